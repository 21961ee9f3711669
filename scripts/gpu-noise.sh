#!/usr/bin/env bash
# Where does run-to-run timing noise on the lent GPU machine come from? Prints the
# machine's CPU/NUMA layout, then interleaved storm runs (eager, pass-through, eager
# pinned to one core) and MLP runs (eager, floor) with the medians of ten blocks
# inside each process. Output tarred into $OUT/noise.tgz.
B=${1:-.gpu/build}; L=$PWD/$B/src/libgraft.so; O=/tmp/noise; mkdir -p $O
{ nproc; lscpu | grep -E "Model name|Socket|NUMA|MHz|Thread|Core"; cat /sys/fs/cgroup/cpu.max 2>/dev/null
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,pstate --format=csv; uptime; } 2>&1 | tee $O/machine.txt
for r in 1 2 3 4 5 6; do
  for v in eager pass pin; do
    case $v in
      eager) $B/demo/storm --iters 1000 --json $O/s-$v-$r.json >/dev/null ;;
      pass) LD_PRELOAD=$L GRAFT_MODE=passthrough GRAFT_LOG_LEVEL=warn $B/demo/storm --iters 1000 --json $O/s-$v-$r.json >/dev/null ;;
      pin) taskset -c 5 $B/demo/storm --iters 1000 --json $O/s-$v-$r.json >/dev/null ;;
    esac
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('storm %-5s r%d median %7.1f blocks %s' % (sys.argv[2], int(sys.argv[3]), d['us_per_iter_median'], ' '.join('%.0f' % x for x in d['block_medians_us'])))" $O/s-$v-$r.json $v $r
  done
done
for r in 1 2 3; do
  for v in eager floor; do
    if [ $v = floor ]; then E="LD_PRELOAD=$L GRAFT_MODE=swallow GRAFT_LOG_LEVEL=warn"; else E=; fi
    env $E python3 tests/gpu/workloads.py mlp_item --steps 200 --warmup 40 --json $O/m-$v-$r.json >/dev/null 2>&1
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('mlp_item %-5s r%d median %6.3f blocks %s' % (sys.argv[2], int(sys.argv[3]), d['ms_per_step_median'], ' '.join('%.2f' % x for x in d['block_medians_ms'])))" $O/m-$v-$r.json $v $r
  done
done
(cd $B/bench && for i in 1 2; do for m in none passthrough graph; do
  if [ $m = none ]; then r=$(LD_LIBRARY_PATH=. ./op_cost 200 5000); else r=$(LD_LIBRARY_PATH=. LD_PRELOAD=$L GRAFT_MODE=$m GRAFT_LOG_LEVEL=warn ./op_cost 200 5000); fi
  echo "op_cost $m $r"; done; done)
cd /tmp && tar czf $OUT/noise.tgz noise
