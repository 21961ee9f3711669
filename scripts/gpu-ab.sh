#!/usr/bin/env bash
# A/B of two libgraft builds, interleaved: storm (sync) and the mlp_item PyTorch
# loop (loss.item() every step), with eager and floor as references. Prints each
# run's median and fastest block. Usage: scripts/gpu-ab.sh OLD.so NEW.so [rounds]
A=$(readlink -f $1); N=$(readlink -f $2); R=${3:-4}; B=.gpu/build; O=/tmp/ab; mkdir -p $O
show() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); b = d.get("block_medians_us") or d.get("block_medians_ms") or [0]
m = d.get("us_per_iter_median") or d.get("ms_per_step_median")
print("%-28s median %9.3f  best-block %9.3f" % (sys.argv[2], m, min(b)), flush=True)
PY
}
for r in $(seq 1 $R); do
  for v in eager old new hand; do
    case $v in
      eager) env $B/demo/storm --iters 1000 --json $O/s.json >/dev/null ;;
      hand) env $B/demo/storm --mode graph --iters 1000 --json $O/s.json >/dev/null ;;
      old) LD_PRELOAD=$A GRAFT_LOG_LEVEL=warn $B/demo/storm --iters 1000 --json $O/s.json >/dev/null ;;
      new) LD_PRELOAD=$N GRAFT_LOG_LEVEL=warn $B/demo/storm --iters 1000 --json $O/s.json >/dev/null ;;
    esac
    show $O/s.json "storm-sync r$r $v"
  done
done
for r in $(seq 1 $R); do
  for v in eager old new floor; do
    case $v in
      eager) E= ;; old) E="LD_PRELOAD=$A" ;; new) E="LD_PRELOAD=$N" ;; floor) E="LD_PRELOAD=$N GRAFT_MODE=swallow" ;;
    esac
    env $E GRAFT_LOG_LEVEL=warn GRAFT_STATS=$O/m-$v-$r.stats.json python3 tests/gpu/workloads.py mlp_item --steps 200 --warmup 40 --json $O/m.json >/dev/null 2>&1
    show $O/m.json "mlp_item r$r $v"
  done
done
cd /tmp && tar czf $OUT/ab.tgz ab
