#!/usr/bin/env python3
"""compare_trace.py - run sim_trace_equal without and with an interposer and
require identical executed traces.

  compare_trace.py --exe sim_trace_equal --workdir DIR [--preload LIB]
                   [--env NAME=VALUE ...] [--seed S] [--expect-difference] [--graft-stats]

The reference run has no LD_PRELOAD; the second run gets --preload (or none: then
this checks determinism) and the --env variables. --expect-difference inverts the
verdict (negative control: a faulty interposer must change the trace).
--graft-stats (with --preload libgraft) sets GRAFT_STATS for the second run and
requires graft's exit report: the program ran to completion under graft. It prints
the replay figures; --require-replays also requires that graft replayed graphs.
"""
import argparse
import difflib
import json
import os
import subprocess
import sys


def run(exe, out, seed, env):
    proc = subprocess.run([exe, "--out", out, "--seed", str(seed)], env=env, capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout + proc.stderr)
        raise SystemExit("%s exited with %d" % (exe, proc.returncode))
    with open(out) as f:
        return f.read().splitlines()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--preload")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--expect-difference", action="store_true")
    ap.add_argument("--graft-stats", action="store_true")
    ap.add_argument("--require-fast-lane", action="store_true",
                    help="with --graft-stats: launches must have been held on the fast lane")
    ap.add_argument("--require-replays", action="store_true",
                    help="with --graft-stats: fail unless graft replayed graphs")
    ap.add_argument("--require-profile", action="store_true",
                    help="with --graft-stats and GRAFT_PROFILE=1: the report's cpu_time must count one "
                         "encode and one match per stream-ordered op and one launch per replay")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    base = dict(os.environ)
    base.pop("LD_PRELOAD", None)
    ref = run(args.exe, os.path.join(args.workdir, "trace_ref.txt"), args.seed, base)
    env = dict(base)
    for kv in args.env:
        name, _, value = kv.partition("=")
        env[name] = value
    if args.preload:
        env["LD_PRELOAD"] = args.preload
    stats_path = os.path.join(args.workdir, "graft_stats.json")
    if args.graft_stats:
        if os.path.exists(stats_path):
            os.remove(stats_path)
        env["GRAFT_STATS"] = stats_path
    got = run(args.exe, os.path.join(args.workdir, "trace_test.txt"), args.seed, env)
    if args.graft_stats:
        if not os.path.exists(stats_path):
            print("graft wrote no exit report at %s (GRAFT_STATS): it did not run to completion" % stats_path)
            return 1
        with open(stats_path) as f:
            report = json.load(f)
        replay = report.get("replay", {})
        print("graft exit report: mode %s, %s ops; replay: %s" % (report.get("mode"), report.get("ops", {}).get(
            "total"), ", ".join("%s=%s" % kv for kv in sorted(replay.items()) if not isinstance(kv[1], dict))))
        if args.require_replays and not replay.get("replays"):
            print("graft replayed no graph (--require-replays)")
            return 1
        if args.require_fast_lane and not replay.get("ops_fast_lane"):
            print("graft held no launch on the fast lane (--require-fast-lane)")
            return 1
        if args.require_profile:
            cpu = report.get("cpu_time") or {}
            calls = {k: v.get("calls") for k, v in cpu.items()}
            # A launch held on the fast lane is neither encoded nor matched.
            general = replay.get("ops_total", 0) - replay.get("ops_fast_lane", 0)
            want = {"encode": general, "match": general,
                    "launch": replay.get("replays"), "cuGraphLaunch": replay.get("replays"),
                    "node_update": replay.get("patches"),
                    "build": (replay.get("graphs_built") or 0) + (replay.get("build_failures") or 0)}
            bad = {k: (calls.get(k), v) for k, v in want.items() if calls.get(k) != v}
            # Each fast-lane hit was timed there; misses went on to encode.
            if (calls.get("fast_lane") or 0) < replay.get("ops_fast_lane", 0):
                bad["fast_lane"] = (calls.get("fast_lane"), ">= %d" % replay.get("ops_fast_lane", 0))
            if bad:
                print("cpu_time calls differ from the replay counts (got, want): %s" % bad)
                return 1
            # Node updates of kernels are counted per kernel as well (copies and
            # memsets are patched too, so at most all of them).
            patched = sum(k.get("count", 0) for k in report.get("kernels_patched", []))
            if replay.get("patches") and not 0 < patched <= replay["patches"]:
                print("kernels_patched counts %d node updates of %d patches" % (patched, replay["patches"]))
                return 1
            print("cpu_time: %s" % ", ".join("%s %.3f us x %d" % (k, v["us_per_call"], v["calls"])
                                             for k, v in cpu.items()))
    diff = list(difflib.unified_diff(ref, got, "without interposer", "with interposer", lineterm="", n=2))
    if args.expect_difference:
        if diff:
            print("traces differ, as expected for this interposer (%d diff lines)" % len(diff))
            return 0
        print("traces are identical although the interposer is faulty")
        return 1
    if diff:
        print("executed traces differ (%d lines each side):" % len(ref))
        print("\n".join(diff[:80]))
        return 1
    print("executed traces identical (%d lines)" % len(ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
