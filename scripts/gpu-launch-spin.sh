#!/usr/bin/env bash
# The launch thread's idle spin (GRAFT_LAUNCH_SPIN_US), two builds side by
# side in one device call: the launch thread's CPU time and idle spells in
# PyTorch cases (losses eager vs graft checked too), then the demo (a C++ loop
# launching back to back) interleaved with eager and the hand-written graph.
#   OUT=dir scripts/gpu-launch-spin.sh BUILD LIB_A LIB_B [CASES] [DEMO_ROUNDS]
B=${1:-.gpu/build}; A=${2:-libgraft_base.so}; Bl=${3:-libgraft.so}; CASES=${4:-gpt,mlp}; R=${5:-3}
BA=$(cd "$B" && pwd) || exit 2
O=/tmp/spin; rm -rf $O; mkdir -p $O
export PYTHONUNBUFFERED=1
for lib in $A $Bl; do
  timeout 200 python3 tests/gpu/check_losses.py --libgraft $BA/src/$lib --cases $CASES --steps 300 \
    --out $O/$lib > $O/$lib.txt 2>&1
done
OUT=$O timeout 150 scripts/gpu-demo-ab.sh $B $R $A $Bl > $O/demo.txt 2>&1
(cd /tmp && tar czf ${OUT:-/tmp}/spin.tgz spin)
echo "| build | case | result | graft ms/step | eager ms/step | launch thread cpu s | sleeps until woken | spins caught | spins skipped |"
echo "|---|---|---|---|---|---|---|---|---|"
python3 - $O $A $Bl ${CASES//,/ } <<'PY'
import json, sys, os
o, libs, cases = sys.argv[1], sys.argv[2:4], sys.argv[4:]
for lib in libs:
    res = {}
    try:
        for r in json.load(open(os.path.join(o, lib, "check_losses.json")))["results"]:
            res[r["case"]] = r
    except Exception as e:
        print("| %s | - | no result (%s) |" % (lib, e)); continue
    for c in cases:
        st = {}
        try: st = json.load(open(os.path.join(o, lib, c + ".graft.stats.json")))
        except Exception: pass
        lt = st.get("launch_thread", {})
        r = res.get(c, {})
        g = (r.get("graft") or {}).get("result") or {}
        e = (r.get("eager") or {}).get("result") or {}
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (lib, c, r.get("verdict"), g.get("ms_per_step_median"),
              e.get("ms_per_step_median"), lt.get("cpu_s"), lt.get("sleeps_until_woken"), lt.get("spins_caught", "-"),
              lt.get("spins_skipped", "-")))
PY
tail -6 $O/demo.txt
