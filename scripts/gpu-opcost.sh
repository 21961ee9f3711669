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
#   THRASH_KB="256 1024" (default 64), STRIDE (default 4160: a new page each touch; 64: lines only)
B=${1:-.gpu/build}; ROUNDS=${2:-3}; LIBS=("${@:3}")
BA=$(cd "$B" && pwd) || exit 2
THRASH_KB=${THRASH_KB:-64}; STRIDE=${STRIDE:-4160}
declare -A vals
# run LIB ITERS THRASH_KB: ns per op (0: whole loop; else: inside the launch calls)
run() {
  (cd "$BA/bench" && if [ "$3" = 0 ]; then
     LD_LIBRARY_PATH=. LD_PRELOAD=$1 GRAFT_LOG_LEVEL=warn ./op_cost 200 $2 --vary | sed -n 's/^ns_per_op=//p'
   else
     LD_LIBRARY_PATH=. LD_PRELOAD=$1 GRAFT_LOG_LEVEL=warn ./op_cost 200 $2 --vary --calls --thrash $3 \
       --stride $STRIDE | sed -n 's/^calls_ns_per_op=//p'
   fi)
}
for r in $(seq 1 $ROUNDS); do
  for t in 0 $THRASH_KB; do
    it=$([ $t = 0 ] && echo 20000 || echo 100)
    base=$(run "" $it $t)
    for l in "${LIBS[@]}"; do
      v=$(run "$BA/src/$l" $it $t)
      d=$(python3 -c "print('%.0f' % ($v - $base))")
      vals[$l,$t]+="$d "
      echo "round $r thrash ${t}KB: none $base ns, $l $v ns, +$d ns/op"
    done
  done
done
header="| build | graft ns/op, tight loop |"; rule="|---|---|"
for t in $THRASH_KB; do header+=" graft ns/op, ${t} KiB between launches (stride $STRIDE) |"; rule+="---|"; done
echo "$header"; echo "$rule"
for l in "${LIBS[@]}"; do
  cols=(); for t in 0 $THRASH_KB; do cols+=("${vals[$l,$t]}"); done
  python3 - "$l" "${cols[@]}" <<'PY'
import statistics, sys
l, cols = sys.argv[1], [[float(x) for x in c.split()] for c in sys.argv[2:]]
print("| %s | %s |" % (l, " | ".join("%.0f [%s]" % (statistics.median(c), ", ".join("%.0f" % x for x in c))
                                    for c in cols)))
PY
done
