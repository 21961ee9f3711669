export PYTHONUNBUFFERED=1
CASES="lstm dynamic" STEPS=40 LEVEL=trace scripts/gpu-trace-torch.sh
W=tests/gpu/workloads.py; L=$PWD/.gpu/build/src/libgraft.so; O=$OUT/p; mkdir -p $O
for c in lstm dynamic; do
  python3 $W $c --steps 200 --warmup 50 > $O/$c.eager.out 2>&1; tail -1 $O/$c.eager.out
  for m in passthrough match graph; do
    LD_PRELOAD=$L GRAFT_MODE=$m GRAFT_PROFILE=1 GRAFT_STATS=$O/$c.$m.json GRAFT_LOG_FILE=$O/$c.$m.log \
      timeout 120 python3 $W $c --steps 200 --warmup 50 > $O/$c.$m.out 2>&1; echo "$m: $(tail -1 $O/$c.$m.out)"
  done
done
cd $OUT && tar czf p.tgz p && rm -rf p
