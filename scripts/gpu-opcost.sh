#!/usr/bin/env bash
# graft's CPU cost per launch against the null driver (bench/op_cost), builds
# side by side, rounds interleaved: in a tight loop, and with the program
# touching THRASH_KB of fresh memory between launches (--thrash), where
# graft's lines and pages are no longer in the caches and TLB, as in a real
# training step. Needs no GPU (any machine of the kind timed).
#   scripts/gpu-opcost.sh BUILD ROUNDS LIB [LIB...]     (LIBs under BUILD/src)
B=${1:-.gpu/build}; ROUNDS=${2:-3}; LIBS=("${@:3}")
BA=$(cd "$B" && pwd) || exit 2
THRASH_KB=${THRASH_KB:-64}
declare -A vals
run() { (cd "$BA/bench" && LD_LIBRARY_PATH=. LD_PRELOAD=$1 GRAFT_LOG_LEVEL=warn ./op_cost 200 $2 --vary $3 | sed 's/ns_per_op=//'); }
for r in $(seq 1 $ROUNDS); do
  for t in 0 $THRASH_KB; do
    it=$([ $t = 0 ] && echo 20000 || echo 300); th=$([ $t = 0 ] || echo "--thrash $t")
    base=$(run "" $it "$th")
    for l in "${LIBS[@]}"; do
      v=$(run "$BA/src/$l" $it "$th")
      vals[$l,$t]+="$(python3 -c "print('%.0f' % ($v - $base))") "
      echo "round $r thrash ${t}KB: none $base ns, $l $v ns, +$(python3 -c "print('%.0f' % ($v - $base))") ns/op"
    done
  done
done
echo "| build | graft ns/op, tight loop | graft ns/op, ${THRASH_KB} KiB between launches |"
echo "|---|---|---|"
for l in "${LIBS[@]}"; do
  python3 - "$l" "${vals[$l,0]}" "${vals[$l,$THRASH_KB]}" <<'PY'
import statistics, sys
l, a, b = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
print("| %s | %.0f [%s] | %.0f [%s] |" % (l, statistics.median(a), ", ".join("%.0f" % x for x in a),
                                          statistics.median(b), ", ".join("%.0f" % x for x in b)))
PY
done
