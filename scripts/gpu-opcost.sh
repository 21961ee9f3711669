#!/usr/bin/env bash
# graft's CPU cost per launch against the null driver (bench/op_cost), builds
# side by side, rounds interleaved: in a tight loop (the whole loop's time per
# op, minus the bare loop's), and with the program touching KB kilobytes of
# memory between launches (--thrash, a new page every STRIDE bytes), where
# graft's lines and pages are no longer in the caches and TLB, as in a real
# training step; there only the time inside the launch calls counts
# (op_cost --calls), since the thrash itself varies more than graft's cost.
# Needs no GPU (any machine of the kind timed).
#   scripts/gpu-opcost.sh BUILD ROUNDS LIB [LIB...]     (LIBs under BUILD/src)
#   A LIB may carry graft settings: libgraft.so:GRAFT_HOT_ARENA_MB=0[,NAME=VALUE...]
#   THRASH="KB[:STRIDE[:huge]] ..." (default "64"): the thrashes to time. STRIDE defaults
#   to 4160 (a new page each touch); 64 evicts lines only; 4096 misses the TLB
#   while evicting few cache sets; huge puts the thrashed buffer on huge pages
#   (cache misses without TLB misses). E.g. THRASH="1024:64:huge 256:4096"
#   tells TLB misses from cache misses.
B=${1:-.gpu/build}; ROUNDS=${2:-3}; LIBS=("${@:3}")
BA=$(cd "$B" && pwd) || exit 2
THRASH=${THRASH:-${THRASH_KB:+$(for k in $THRASH_KB; do printf '%s:%s ' $k ${STRIDE:-4160}; done)}}
THRASH=${THRASH:-64}
declare -A vals
# run LIB ITERS THRASH: ns per op (0: whole loop; else: inside the launch calls)
run() {
  local lib=${1%%:*} envs=(); [ "$1" != "$lib" ] && IFS=, read -ra envs <<< "${1#*:}"
  (cd "$BA/bench" && export GRAFT_SUMMARY=0 "${envs[@]}" && set -- "$lib" "$2" "$3" && if [ "$3" = 0 ]; then
     LD_LIBRARY_PATH=. LD_PRELOAD=$1 GRAFT_LOG_LEVEL=warn ./op_cost 200 $2 --vary | sed -n 's/^ns_per_op=//p'
   else
     IFS=: read -r kb stride huge <<<"$3"
     LD_LIBRARY_PATH=. LD_PRELOAD=$1 GRAFT_LOG_LEVEL=warn ./op_cost 200 $2 --vary --calls --thrash $kb \
       --stride ${stride:-4160} ${huge:+--huge} | sed -n 's/^calls_ns_per_op=//p'
   fi)
}
for r in $(seq 1 $ROUNDS); do
  for t in 0 $THRASH; do
    it=$([ $t = 0 ] && echo 20000 || echo 100)
    base=$(run "" $it $t)
    for l in "${LIBS[@]}"; do
      v=$(run "$BA/src/$l" $it $t)
      d=$(python3 -c "print('%.0f' % ($v - $base))")
      vals[$l,$t]+="$d "
      echo "round $r thrash $t: none $base ns, $l $v ns, +$d ns/op"
    done
  done
done
header="| build | graft ns/op, tight loop |"; rule="|---|---|"
for t in $THRASH; do header+=" graft ns/op, thrash $t |"; rule+="---|"; done
echo "$header"; echo "$rule"
for l in "${LIBS[@]}"; do
  cols=(); for t in 0 $THRASH; do cols+=("${vals[$l,$t]}"); done
  python3 - "$l" "${cols[@]}" <<'PY'
import statistics, sys
l, cols = sys.argv[1], [[float(x) for x in c.split()] for c in sys.argv[2:]]
print("| %s | %s |" % (l, " | ".join("%.0f [%s]" % (statistics.median(c), ", ".join("%.0f" % x for x in c))
                                    for c in cols)))
PY
done
