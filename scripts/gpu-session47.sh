#!/usr/bin/env bash
# Forty-seventh session's GPU steps. BUILD = a folder packed by scripts/gpu-pack.
#   OUT=dir [WAIT_S=150] [ENVS="K=V ..."] scripts/gpu-session47.sh BUILD hang CASE STEPS
#       CASE under graft as gpu-session46.sh's record does (trace log, nothing
#       built) plus ENVS; if it is still running after WAIT_S seconds: the
#       native stacks of all its threads (gdb, where there is one) and the
#       Python stacks (faulthandler, on SIGABRT); the last log lines and the
#       step it reached come back as OUT/hang.tgz
#   OUT=dir scripts/gpu-session47.sh BUILD record|ab|traps|losses|diag|scanab ...   as gpu-session46.sh
# A table last.
B=${1:-.gpu/build}; BA=$(cd "$B" && pwd); WHAT=${2:-hang}
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
W=tests/gpu/workloads.py
case "$WHAT" in
hang)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  O=${OUT:-/tmp}/hang; rm -rf "$O"; mkdir -p "$O"; c=${3:-fno}; N=${4:-300}
  env LD_PRELOAD=$BA/src/libgraft.so GRAFT_WARMUP=1000 GRAFT_DORMANT_AFTER_OPS=0 GRAFT_LOG_LEVEL=trace \
    GRAFT_LOG_FILE=$O/$c.log $ENVS python3 -X faulthandler $W $c --steps $N --warmup 2 > $O/$c.out 2>&1 &
  pid=$!; t0=$(date +%s); state=finished
  while kill -0 $pid 2>/dev/null; do
    if [ $(( $(date +%s) - t0 )) -ge ${WAIT_S:-150} ]; then
      state=hung
      if command -v gdb >/dev/null; then timeout 60 gdb -p $pid -batch -ex "thread apply all bt 30" > $O/gdb.txt 2>&1; fi
      kill -ABRT $pid; sleep 5; kill -9 $pid 2>/dev/null; break
    fi
    sleep 2
  done
  wait $pid; rc=$?
  echo "$c: $state after $(( $(date +%s) - t0 )) s, rc=$rc, log $(wc -l < $O/$c.log) lines, $(grep -c token $O/$c.log) ops"
  echo "--- last 30 log lines"; tail -30 $O/$c.log | cut -c1-240
  echo "--- program output (last 60 lines)"; tail -60 $O/$c.out | cut -c1-240
  [ -e $O/gdb.txt ] && { echo "--- gdb (graft frames and thread heads)"; grep -E "^Thread|graft|#0 |#1 |#2 |#3 " $O/gdb.txt | head -120 | cut -c1-220; }
  tail -2000 $O/$c.log > $O/$c.tail.log; rm -f $O/$c.log
  cd "${OUT:-/tmp}" && tar czf hang.tgz hang && rm -rf hang;;
*) exec "$(dirname "$0")/gpu-session46.sh" "$@";;
esac
