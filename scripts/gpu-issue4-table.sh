#!/usr/bin/env bash
# Issue 4's speed table and the other models' timings in one device call
# (< 10 min on an H100): eager, graft, the launch-free floor and graft's match
# mode, timed interleaved in-process (tests/gpu/bench_interleaved.py).
#   OUT=dir scripts/gpu-issue4-table.sh BUILD [RUNS] [OTHER_CASES] [OTHER_RUNS]
B=${1:-.gpu/build}; RUNS=${2:-5}; OTHER=${3-inductor_mlp,inductor_gpt,sdpa}; ORUNS=${4:-3}  # OTHER "": none
BA=$(cd "$B" && pwd) || exit 2
O=/tmp/table; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() {  # tag cases runs cycles block budget
  timeout $6 python3 tests/gpu/bench_interleaved.py --libgraft $BA/src/libgraft.so --cases $2 --runs $3 \
    --cycles $4 --block $5 --warmup 40 --match --out $O/$1.json --workdir $O/w_$1 > $O/$1.txt 2>&1
}
run mlp mlp,mlp_item $RUNS 60 5 260
run gpt gpt $RUNS 30 4 210
[ -n "$OTHER" ] && run other $OTHER $ORUNS 30 5 190
(cd /tmp && tar czf ${OUT:-/tmp}/table.tgz table)
for t in mlp gpt other; do [ -f $O/$t.txt ] && sed -n '/^interleaved in-process/,$p' $O/$t.txt; done
