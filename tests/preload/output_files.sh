#!/usr/bin/env bash
# graft's output files as a user meets them: GRAFT_STATS and GRAFT_LOG_FILE
# naming /dev/stdout or /dev/stderr append to what a redirect already holds;
# with LD_PRELOAD and GRAFT_LOG_FILE exported, a command that never uses CUDA
# leaves the log alone, the next run that does replaces an earlier run's log,
# and a child of a run appends to its parent's; the report names the pid.
#   output_files.sh LIBGRAFT FAKE_CUDA_DIR PROGRAM
set -u
lib=$1 simdir=$2 prog=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; shift; for f in "$@"; do sed 's/^/  | /' "$f" | head -10; done; fail=1; }
export LD_LIBRARY_PATH="$simdir"

echo earlier >"$tmp/out"
env LD_PRELOAD="$lib" GRAFT_STATS=/dev/stdout "$prog" >>"$tmp/out" 2>"$tmp/err" || bad "the program failed" "$tmp/err"
head -1 "$tmp/out" | grep -qx earlier && ok "GRAFT_STATS=/dev/stdout keeps what stdout's file held" || bad "stdout's file was emptied" "$tmp/out"
grep -q "\"pid\": [0-9]" "$tmp/out" && ok "the JSON report is appended with its pid" || bad "no JSON report on stdout" "$tmp/out"

# With `>` (the program's stdout at its own offset): its lines and the report both whole.
env LD_PRELOAD="$lib" GRAFT_STATS=/dev/stdout "$prog" >"$tmp/out1" 2>/dev/null
"$prog" >"$tmp/eager1" 2>/dev/null
if python3 -c "
import json, sys
t, eager = open(sys.argv[1]).read(), open(sys.argv[2]).read()
assert t.startswith(eager), 'the program output is not first'
assert 'pid' in json.loads(t[len(eager):]), 'no report after it'" "$tmp/out1" "$tmp/eager1"; then
  ok "GRAFT_STATS=/dev/stdout with '>' keeps the program's lines and a whole report"
else
  bad "the program's output or the report was overwritten" "$tmp/out1"
fi
# A regular file under /dev/shm is a file: replaced, not appended to.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  shm=/dev/shm/graft-output-files-$$.json
  env LD_PRELOAD="$lib" GRAFT_STATS="$shm" "$prog" >/dev/null 2>&1
  env LD_PRELOAD="$lib" GRAFT_STATS="$shm" "$prog" >/dev/null 2>&1
  python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$shm" && ok "a report in /dev/shm is replaced" ||
    bad "a report in /dev/shm is not one JSON document" "$shm"
  rm -f "$shm"
fi

echo earlier >"$tmp/err2"
env LD_PRELOAD="$lib" GRAFT_LOG_FILE=/dev/stderr "$prog" >/dev/null 2>>"$tmp/err2"
head -1 "$tmp/err2" | grep -qx earlier && ok "GRAFT_LOG_FILE=/dev/stderr keeps what stderr's file held" || bad "stderr's file was emptied" "$tmp/err2"
grep -q "exit report (pid [0-9]*, mode graph)" "$tmp/err2" && ok "the summary names the pid" || bad "no summary with a pid" "$tmp/err2"
# With `2>` and the program writing to stderr after graft: nothing overwritten.
( env LD_PRELOAD="$lib" GRAFT_LOG_FILE=/dev/stderr GRAFT_LOG_LEVEL=debug "$prog" >/dev/null; echo "after the program" >&2 ) 2>"$tmp/err3"
grep -q "^\[graft\] debug: graft started" "$tmp/err3" && tail -1 "$tmp/err3" | grep -qx "after the program" &&
  ok "GRAFT_LOG_FILE=/dev/stderr with '2>' keeps graft's first line and what came after" ||
  bad "graft's log or a later line was overwritten" "$tmp/err3"

log="$tmp/run.log"
(
  export LD_PRELOAD="$lib" GRAFT_LOG_FILE="$log"
  "$prog" >/dev/null 2>&1
  size1=$(wc -c <"$log")
  /bin/true
  cat "$log" >/dev/null
  size2=$(wc -c <"$log")
  [ "$size1" -gt 0 ] && [ "$size1" -eq "$size2" ] && echo "ok: commands without CUDA leave the log alone ($size2 bytes)" ||
    echo "FAIL: the log went from $size1 to $size2 bytes after commands without CUDA"
  sleep 0.05
  "$prog" >/dev/null 2>&1
  n=$(grep -c "exit report" "$log")
  [ "$n" -eq 1 ] && echo "ok: the next run replaces an earlier run's log" || echo "FAIL: $n exit reports in the log after a second run"
  # A run whose first process uses no CUDA: its two children share the log.
  sleep 0.05
  bash -c "'$prog' >/dev/null 2>&1; '$prog' >/dev/null 2>&1"
  n=$(grep -c "exit report" "$log")
  [ "$n" -eq 2 ] && echo "ok: two processes of one run both keep their lines" || echo "FAIL: $n exit reports in the log of a run of two processes (2 expected)"
) >"$tmp/res" 2>&1
cat "$tmp/res"
grep -q "^FAIL" "$tmp/res" && fail=1
exit $fail
