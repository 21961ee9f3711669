#!/usr/bin/env bash
# What graft costs a short program as a whole process: start, learning, exit.
# Each program runs R rounds, the variants round-robin within a round (the
# order rotating from round to round), one process at a time:
#   eager     no graft;
#   loaded    libgraft preloaded with GRAFT_DISABLE=1 (the loader's cost alone);
#   pass      GRAFT_MODE=passthrough (interposed, nothing held);
#   graft     GRAFT_MODE=graph (the default).
# Wall time is from fork to exit (`date +%s%N` around the process).
# VARIANTS (default "eager loaded pass graft"): a variant NAME@LIB uses
# BUILD/src/LIB instead of libgraft.so (two builds side by side:
# VARIANTS="eager graft@libgraft_old.so graft").
#   OUT=dir scripts/gpu-short-programs.sh BUILD SAMPLES ROUNDS [SAMPLE_NAMES]
# SAMPLES: the pack of scripts/gpu-cuda-samples.sh (bin.tar.xz), or `none`
# (the PyTorch programs only). Besides the
# named samples it times two PyTorch programs: `torch-hello` (import torch, one
# tensor on the GPU, one .item()) and `mlp-40` (tests/gpu/workloads.py mlp, 40
# steps: graft's learning and first replays, then exit).
set -u
B=${1:-.gpu/build}; SAMP=${2:-.gpu/samples}; R=${3:-5}
NAMES=${4:-vectorAdd matrixMul simpleStreams jacobiCudaGraphs LargeKernelParameter conjugateGradient conjugateGradientPrecond scan radixSortThrust BlackScholes}
BA=$(cd "$B" && pwd) || exit 2
LIB=$BA/src/libgraft.so
VARIANTS=${VARIANTS:-eager loaded pass graft}
T=/tmp/short; rm -rf $T; mkdir -p $T/o $T/bin
[ "$SAMP" = none ] || tar xJf "$SAMP/bin.tar.xz" -C $T || exit 2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
REPO=$(pwd)
progs=()
for n in $NAMES; do d=$(cd $T/bin && ls -d */$n 2>/dev/null | head -1); [ -n "$d" ] && progs+=("$d"); done
progs+=(${PYPROGS-torch-hello mlp-40})  # PYPROGS="" leaves them out
run_prog() {  # prog -> runs it in the current environment
  case $1 in
    torch-hello) python3 -c "import torch; x = torch.ones(1, device='cuda'); print((x * 2).sum().item())";;
    mlp-40) python3 $REPO/tests/gpu/workloads.py mlp --steps 40 --warmup 10;;
    *) (cd $T/bin/$1 && ./$(basename $1));;
  esac
}
# One untimed run of each, eager, so that files and the driver's caches are warm.
for p in "${progs[@]}"; do run_prog $p > /dev/null 2>&1 < /dev/null; done
ALL=${OUT:-$T}/short-all.txt; : > $ALL  # under OUT: it comes back even if the call is cut short
for r in $(seq 1 $R); do
  for p in "${progs[@]}"; do
    read -r -a vs <<< "$VARIANTS"
    n=${#vs[@]}
    for k in $(seq 0 $((n - 1))); do
      v=${vs[$(( (k + r) % n ))]}  # the order rotates round by round
      lib=$LIB; [[ $v == *@* ]] && lib=$BA/src/${v#*@}
      case ${v%@*} in
        eager) env=();;
        loaded) env=(LD_PRELOAD=$lib GRAFT_DISABLE=1);;
        pass) env=(LD_PRELOAD=$lib GRAFT_MODE=passthrough);;
        graft) env=(LD_PRELOAD=$lib GRAFT_MODE=graph GRAFT_STATS=$T/o/$(basename $p).${v#*@}.json);;
      esac
      t0=$(date +%s%N)
      env "${env[@]}" bash -c "$(declare -f run_prog); T=$T REPO=$REPO run_prog $p" > $T/o/$(basename $p).$v.log 2>&1 < /dev/null
      rc=$?
      echo "$p $v $rc $(( ($(date +%s%N) - t0) / 1000 ))" >> $ALL
    done
  done
done
python3 - $ALL $T/o "$VARIANTS" <<'PY'
import sys, statistics, collections, json, os, glob
runs = collections.OrderedDict()
rcs = collections.defaultdict(set)
for line in open(sys.argv[1]):
    p, v, rc, us = line.split()
    runs.setdefault(p, collections.OrderedDict()).setdefault(v, []).append(int(us) / 1000.0)
    rcs[p].add(rc)
others = [v for v in sys.argv[3].split() if v != "eager"]
print()
print("| program | eager ms | " + " | ".join("%s − eager [rounds]" % v for v in others) +
      " | ops | through graphs | exit codes |")
print("|---|---|" + "---|" * len(others) + "---|---|---|")
for p, vs in runs.items():
    e = statistics.median(vs["eager"])
    cells = []
    for v in others:
        pr = ", ".join("%+.0f" % (g - x) for g, x in zip(vs[v], vs["eager"]))  # paired per round
        cells.append("%+.0f [%s]" % (statistics.median(vs[v]) - e, pr))
    ops = cov = "?"
    js = sorted(glob.glob(os.path.join(sys.argv[2], os.path.basename(p) + ".*json")))
    try:
        rep = json.load(open(js[-1]))["replay"]
        ops, cov = rep["ops_total"], "%.1f %%" % rep["coverage_pct"]
    except Exception:
        pass
    print("| %s | %.0f | %s | %s | %s | %s |" % (os.path.basename(p), e, " | ".join(cells), ops, cov,
                                             "/".join(sorted(rcs[p]))))
PY
