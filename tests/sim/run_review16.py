#!/usr/bin/env python3
"""run_review16.py - run sim_review16_streams over seeds (one process per seed).

  run_review16.py --exe sim_review16_streams --seeds A:B [--preload LIB] [--env NAME=VALUE ...] [-- ARGS...]

ARGS (--legacy, --pts, --recreate, --queries, --steps N) go to every run.
With --preload every seed runs with --expect-graphs (exit 3, most kernels
eager, counts as a pass only without it). Every seed must exit 0; on the
first failure its output and a reproducing command line are printed and the
exit status is 1.
"""
import argparse
import os
import shlex
import subprocess
import sys


def main():
    argv = sys.argv[1:]
    extra_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra_args = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--preload", default="")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args(argv)
    lo, _, hi = a.seeds.partition(":")
    env = dict(os.environ)
    extra = {}
    if a.preload:
        extra["LD_PRELOAD"] = a.preload
    for kv in a.env:
        k, _, v = kv.partition("=")
        extra[k] = v
    env.update(extra)
    seeds = range(int(lo), int(hi or lo) + 1)
    for seed in seeds:
        cmd = [a.exe, "--seed", str(seed)] + extra_args + (["--expect-graphs"] if a.preload else [])
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=a.timeout)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        if rc != 0:
            print(out[-4000:])
            print("run_review16: seed %d failed (exit %s)" % (seed, rc))
            print("reproduce: env %s %s" % (" ".join("%s=%s" % kv for kv in extra.items()),
                                             " ".join(shlex.quote(c) for c in cmd)))
            return 1
    print("run_review16: %d seed(s), no kernel ran before a gate it waits for" % len(seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
