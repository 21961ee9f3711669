#!/usr/bin/env python3
"""Odd but legal CUDA C++ patterns (tests/gpu/traps.cu) under graft.

For each scenario: one eager run, a second eager run (the scenario must be
deterministic, or the comparison means nothing), and a run under graft
(GRAFT_MODE=graph). The graft run's output must equal eager's line for line,
and it must exit as eager did (0, or 3 where the scenario reports a device
error it provoked). Prints a table of results, coverage, replays
and fallbacks, and exits 1 if any scenario differs, 77 without a GPU.

  check_traps.py --traps BIN [--traps BIN2 ...] --libgraft LIB [--scenarios a,b] [--iters N] [--out DIR]

Each BIN is a trap program (traps, traps_libs) that lists its scenarios with --list.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def run(cmd, env, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired as e:
        return "timeout", e.stdout or "", e.stderr or "", time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--traps", required=True, action="append", help="a trap program (repeatable)")
    ap.add_argument("--libgraft", required=True)
    ap.add_argument("--scenarios", default="")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--out", default="/tmp/graft-traps")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    # (program, scenario) pairs, in the programs' order.
    # A program that is not built is skipped; one that cannot list its
    # scenarios here (a library it links is missing) fails.
    scenarios, broken = [], []
    for prog in a.traps:
        if not os.path.exists(prog):
            print("check_traps: %s not built (needs nvcc): skipped" % prog)
            continue
        rc, listing, err, _ = run([prog, "--list"], harness.clean_env(), 60)
        if rc != 0:
            print("check_traps: %s --list failed (%s): %s" % (prog, rc, " ".join(harness.last_lines(err, 1))))
            broken.append(os.path.basename(prog))
            continue
        scenarios += [(prog, n) for n in listing.split() if not a.scenarios or n in a.scenarios.split(",")]
    if not scenarios:
        if broken:
            print("check_traps: FAIL: %s cannot run here" % ", ".join(broken))
            return 1
        print("check_traps: no trap program built, or no scenario named %s: skipped" % a.scenarios)
        return 77
    probe = run([scenarios[0][0], scenarios[0][1], "--iters", "10"], harness.clean_env(), 60)
    if probe[0] == 77:
        print("check_traps: no CUDA device: skipped")
        return 77
    bad = harness.check_libgraft(a.libgraft)
    if bad:
        print("check_traps: " + bad)
        return 1

    rows, failed = [], list(broken)
    for prog, name in scenarios:
        cmd = [prog, name, "--iters", str(a.iters)]
        e1 = run(cmd, harness.clean_env(), a.timeout)
        e2 = run(cmd, harness.clean_env(), a.timeout)
        stats_path = os.path.join(a.out, name + ".json")
        harness.rm_f(stats_path)
        g = run(cmd, harness.graft_env(a.libgraft, "graph", stats_path), a.timeout)
        with open(os.path.join(a.out, name + ".log"), "w") as f:
            for tag, r in (("eager", e1), ("eager again", e2), ("graft", g)):
                f.write("=== %s: rc %s, %.2f s\n%s\n--- stderr\n%s\n" % (tag, r[0], r[3], r[1], r[2]))
        # Exit 3: the scenario reported a device error on purpose (sticky_fault).
        if e1[0] not in (0, 3):
            result = "EAGER-FAIL"
        elif e1[0] != e2[0] or e1[1] != e2[1]:
            result = "EAGER-NONDET"
        elif g[0] != e1[0]:
            result = "GRAFT-RC-%s" % g[0]
        elif g[1] != e1[1]:
            result = "DIFFERS"
        else:
            result = "EQUAL"
        if result != "EQUAL":
            failed.append(name)
        print("check_traps: %-24s %-12s eager %.2f s (rc %s), graft %.2f s (rc %s)" % (name, result, e1[3], e1[0], g[3], g[0]),
              flush=True)
        s = harness.graft_summary(harness.load_json(stats_path))
        rows.append([name, result, harness.fmt(s["coverage_pct"], "{:.1f}"), harness.fmt(s["replays"], "{}"),
                     harness.fmt(s["graphs_built"], "{}"), "%.2f" % e1[3], "%.2f" % g[3],
                     harness.fmt_fallbacks(s["fallbacks"])])
        if result != "EQUAL":
            eo, go = e1[1].splitlines(), g[1].splitlines()
            first = next((i for i in range(max(len(eo), len(go)))
                          if i >= len(eo) or i >= len(go) or eo[i] != go[i]), None)
            print("check_traps: %s %s: first differing line %s: eager %r, graft %r; graft stderr: %s" % (
                name, result, first, eo[first] if first is not None and first < len(eo) else None,
                go[first] if first is not None and first < len(go) else None, " | ".join(harness.last_lines(g[2], 2))))
    print("=== RESULT ===")
    print("check_traps: %d iterations per scenario, eager vs LD_PRELOAD=libgraft GRAFT_MODE=graph" % a.iters)
    print("\n".join(harness.table(["scenario", "result", "cover%", "replays", "graphs", "eager-s", "graft-s",
                                   "fallbacks"], rows)))
    if failed:
        print("check_traps: FAIL: %d of %d scenarios or programs: %s (logs in %s)" % (len(failed), len(scenarios) + len(broken),
                                                                         ", ".join(failed), a.out))
        return 1
    print("check_traps: PASS: %d/%d scenarios equal to eager (logs in %s)" % (len(scenarios), len(scenarios), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
