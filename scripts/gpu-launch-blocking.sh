#!/usr/bin/env bash
# CUDA_LAUNCH_BLOCKING=1 under graft (one device call, seconds): graft must
# say it only forwards, and each trap's output and exit code must equal
# eager's under the same setting (a kernel that faults is reported at its own
# launch). Prints one line per scenario.
#   OUT=dir scripts/gpu-launch-blocking.sh BUILD [SCENARIOS]
B=${1:-.gpu/build}; SCEN=${2:-sticky_fault,launch_errors,legacy_order}
L="$PWD/$B/src/libgraft.so"; T="$PWD/$B/tests/gpu/traps"; O="${OUT:-/tmp}/launch_blocking"; mkdir -p "$O"
for s in ${SCEN//,/ }; do
  CUDA_LAUNCH_BLOCKING=1 timeout 60 "$T" "$s" > "$O/$s.eager.txt" 2> "$O/$s.eager.err"; e=$?
  CUDA_LAUNCH_BLOCKING=1 LD_PRELOAD="$L" GRAFT_STATS="$O/$s.json" timeout 60 "$T" "$s" \
    > "$O/$s.graft.txt" 2> "$O/$s.graft.err"; g=$?
  same=DIFFERS; [ $e = $g ] && cmp -s "$O/$s.eager.txt" "$O/$s.graft.txt" && same=EQUAL
  said=no; grep -q "CUDA_LAUNCH_BLOCKING=1 makes every launch wait" "$O/$s.graft.err" && said=yes
  mode=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('mode','?'))" "$O/$s.json" 2>/dev/null)
  echo "launch_blocking: $s $same (rc eager $e, graft $g), graft said it forwards: $said, report mode: ${mode:-none}"
done
