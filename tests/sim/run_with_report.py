#!/usr/bin/env python3
"""run_with_report.py - run a sim test program under graft and check its exit report.

  run_with_report.py --exe PROGRAM [--arg A ...] [--require SECTION.KEY ...] [--forbid SECTION.KEY ...]
                     [--at-most SECTION.KEY=N ...] [--at-least SECTION.KEY=N ...] [--path-retries N]

Runs PROGRAM (with its --arg arguments) with GRAFT_STATS pointing at a
temporary file, in the environment it was given (LD_PRELOAD=libgraft.so and
the simulator's variables). Fails when the program fails, when graft wrote no
exit report (it did not run to completion), or when a required counter of the
report (e.g. launch_thread.frees_queued) is missing or zero: the path under
test was not taken; or when a forbidden one (e.g. replay.fallbacks.query_in_segment)
is there and not zero: graft fell back where it must not; or when a bounded
one is outside its bound (--at-most N, --at-least N).

--path-retries N: a run whose only failure is that the path under test was
not taken (the program exits 3, or a --require counter is missing or zero:
timing decides whether a thread of graft's was on a core at the moment) is
run again, up to N more times. Any other failure fails at once. When every
run's only failure was that, the test is skipped (exit 77), saying so: each
run still checked every value, but on a machine this loaded (the development
machine has 2 cores) the path could not be reached.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", required=True)
    ap.add_argument("--arg", action="append", default=[])
    ap.add_argument("--require", action="append", default=[])
    ap.add_argument("--forbid", action="append", default=[])
    ap.add_argument("--at-most", action="append", default=[])
    ap.add_argument("--at-least", action="append", default=[])
    ap.add_argument("--path-retries", type=int, default=0)
    args = ap.parse_args()
    for attempt in range(args.path_retries + 1):
        rc, path_missed = run_once(args)
        if rc == 0 or not path_missed:
            return rc
        if attempt < args.path_retries:
            print("the path under test was not taken; running again (%d of %d)" % (attempt + 1, args.path_retries))
    if args.path_retries:
        print("SKIPPED: every value was right, but the path under test was not taken in %d runs "
              "(graft's thread off a core: the machine is loaded)" % (args.path_retries + 1))
        return 77
    return rc


def run_once(args):
    """(exit status, whether the only failure was the path under test not taken)."""
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "graft_stats.json")
        env = dict(os.environ, GRAFT_STATS=stats)
        proc = subprocess.run([args.exe] + args.arg, env=env, capture_output=True, text=True, timeout=120)
        sys.stdout.write(proc.stdout + proc.stderr)
        if proc.returncode == 3:
            print("%s: the path under test was not taken" % args.exe)
            return 1, True
        if proc.returncode != 0:
            print("%s exited with %d" % (args.exe, proc.returncode))
            return 1, False
        if not os.path.exists(stats):
            print("graft wrote no exit report (GRAFT_STATS): it did not run to completion")
            return 1, False
        with open(stats) as f:
            report = json.load(f)
    def lookup(path):
        value = report
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        print("report %s = %s" % (path, value))
        return value

    bad = 0
    missed = 0
    for path in args.require:
        if not lookup(path):
            print("the report's %s is missing or zero: the path under test was not taken" % path)
            missed += 1
    for path in args.forbid:
        if lookup(path):
            print("the report's %s is not zero: graft fell back where it must not" % path)
            bad += 1
    for bound in args.at_most:
        path, limit = bound.rsplit("=", 1)
        if (lookup(path) or 0) > int(limit):
            print("the report's %s is above %s" % (path, limit))
            bad += 1
    for bound in args.at_least:
        path, limit = bound.rsplit("=", 1)
        if (lookup(path) or 0) < int(limit):
            print("the report's %s is below %s" % (path, limit))
            bad += 1
    return (1 if bad or missed else 0), (missed > 0 and bad == 0)

if __name__ == "__main__":
    sys.exit(main())
