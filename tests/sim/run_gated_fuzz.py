#!/usr/bin/env python3
"""run_gated_fuzz.py - run sim_gated_fuzz over seeds (one process per seed).

  run_gated_fuzz.py --exe sim_gated_fuzz --seeds 1:40 [--legacy] [--preload LIB] [--env NAME=VALUE ...]

--legacy makes one of each step's streams the legacy default stream.

LD_PRELOAD and the --env variables are given to sim_gated_fuzz only. With
--preload every seed runs with --expect-graphs. Every seed must exit 0; on
the first failure its output and a reproducing command line are printed and
the exit status is 1.
"""
import argparse
import os
import shlex
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--preload", default="")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--legacy", action="store_true")
    a = ap.parse_args()
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
        cmd = [a.exe, "--seed", str(seed)] + (["--legacy"] if a.legacy else []) + \
              (["--expect-graphs"] if a.preload else [])
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=a.timeout)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        if rc != 0:
            print(out[-4000:])
            print("run_gated_fuzz: seed %d failed (exit %s)" % (seed, rc))
            print("reproduce: env %s %s" % (" ".join("%s=%s" % kv for kv in extra.items()),
                                             " ".join(shlex.quote(c) for c in cmd)))
            return 1
    print("run_gated_fuzz: %d seed(s), all finished with every gate released in time" % len(seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
