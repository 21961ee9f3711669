#!/usr/bin/env bash
# A real program under LD_PRELOAD=libgraft.so with bad GRAFT_* values: each
# gives one line naming the option, the value and what is accepted; the
# program carries on and succeeds. GRAFT_DISABLE=1 writes no report.
#   bad_options.sh LIBGRAFT FAKE_CUDA_DIR PROGRAM
set -u
lib=$1 simdir=$2 prog=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # description, pattern, file
  if grep -qF -- "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1 (no line containing: $2)"; sed 's/^/  | /' "$3" | head -20; fail=1; fi
}
env LD_LIBRARY_PATH="$simdir" LD_PRELOAD="$lib" GRAFT_LOG_LEVEL=loud GRAFT_WARMUP=-3 GRAFT_WARMPU=2 \
  GRAFT_LOG_FILE=/dev/null/graft.log GRAFT_STATS="$tmp/report.json" GRAFT_MODE=passthrough \
  "$prog" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && echo "ok: the program succeeded" || { echo "FAIL: the program exited $rc"; fail=1; }
check "bad log level" "GRAFT_LOG_LEVEL=loud is not valid (expected one of trace, debug, info, warn, error, off); using info" "$tmp/err"
check "negative warm-up" "GRAFT_WARMUP=-3 is not valid (expected an integer from 1 to 1000); using 3" "$tmp/err"
check "unknown option" "unknown option GRAFT_WARMPU (did you mean GRAFT_WARMUP?); ignored" "$tmp/err"
check "unwritable log file" "GRAFT_LOG_FILE=/dev/null/graft.log cannot be opened" "$tmp/err"
[ -s "$tmp/report.json" ] && echo "ok: the report was written" || { echo "FAIL: no report"; fail=1; }
n=$(grep -c "graft" "$tmp/err")
[ "$n" -le 8 ] && echo "ok: $n lines from graft" || { echo "FAIL: $n lines from graft (one per problem expected)"; fail=1; }

# Blanks around a value are not part of it; `warning` is a log level; a
# lower-case name is pointed at; a minimum segment longer than any period is flagged.
env LD_LIBRARY_PATH="$simdir" LD_PRELOAD="$lib" GRAFT_WARMUP=" 5 " GRAFT_LOG_LEVEL=warning graft_mode=swallow \
  GRAFT_MIN_SEGMENT_OPS=20000 GRAFT_MAX_PERIOD=1000 "$prog" >"$tmp/out3" 2>"$tmp/err3"
rc=$?
[ $rc -eq 0 ] && echo "ok: the program succeeded" || { echo "FAIL: the program exited $rc"; fail=1; }
grep -q "GRAFT_WARMUP\|GRAFT_LOG_LEVEL" "$tmp/err3" && { echo "FAIL: a blank-padded or 'warning' value was refused"; sed 's/^/  | /' "$tmp/err3" | head; fail=1; } || echo "ok: blanks and 'warning' accepted"
check "lower-case name" "unknown option graft_mode (did you mean GRAFT_MODE? names are case-sensitive); ignored" "$tmp/err3"
check "impossible segment length" "GRAFT_MIN_SEGMENT_OPS=20000 is above GRAFT_MAX_PERIOD=1000" "$tmp/err3"

# A kill switch the parser does not understand turns graft off, and says so.
rm -f "$tmp/report.json"
env LD_LIBRARY_PATH="$simdir" LD_PRELOAD="$lib" GRAFT_DISABLE=2 GRAFT_STATS="$tmp/report.json" \
  "$prog" >"$tmp/out4" 2>"$tmp/err4"
rc=$?
[ $rc -eq 0 ] && echo "ok: GRAFT_DISABLE=2 program succeeded" || { echo "FAIL: GRAFT_DISABLE=2 program exited $rc"; fail=1; }
[ ! -e "$tmp/report.json" ] && echo "ok: GRAFT_DISABLE=2 leaves graft off" || { echo "FAIL: GRAFT_DISABLE=2 left graft on"; fail=1; }
check "kill switch value" "GRAFT_DISABLE=2 is not valid (expected 1, 0, true, false, yes, no, on or off); using 1 (graft off)" "$tmp/err4"

rm -f "$tmp/report.json"
env LD_LIBRARY_PATH="$simdir" LD_PRELOAD="$lib" GRAFT_DISABLE=1 GRAFT_STATS="$tmp/report.json" \
  "$prog" >"$tmp/out2" 2>"$tmp/err2"
rc=$?
[ $rc -eq 0 ] && echo "ok: GRAFT_DISABLE=1 program succeeded" || { echo "FAIL: GRAFT_DISABLE=1 program exited $rc"; fail=1; }
[ ! -e "$tmp/report.json" ] && echo "ok: GRAFT_DISABLE=1 is a pure forwarder (no report)" || { echo "FAIL: GRAFT_DISABLE=1 wrote a report"; fail=1; }
grep -q "\[graft\]" "$tmp/err2" && { echo "FAIL: GRAFT_DISABLE=1 logged"; fail=1; } || echo "ok: GRAFT_DISABLE=1 logs nothing"
exit $fail
