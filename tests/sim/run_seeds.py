#!/usr/bin/env python3
"""run_seeds.py - run sim_oracle over many seeds (one process per seed).

  run_seeds.py --exe sim_oracle --seeds 100:115 --ops 1500 [--threads] [--inject]
               [--features LIST] [--preload LIB] [--env NAME=VALUE ...] [--expect-divergence]
  run_seeds.py --exe sim_oracle --regressions regressions.txt [--preload LIB] [--env ...]

LD_PRELOAD and the --env variables are given to sim_oracle only (not to this
interpreter). Without --expect-divergence every seed must end with
"oracle: N ops, 0 divergences" and exit 0; with it every seed must exit 1 with
K > 0 divergences (a negative control: the oracle must not pass silently).
A regressions file has one run per line: "SEED [--ops N] [--threads] [--inject]",
'#' starts a comment. On the first failure the output and a reproducing command
line are printed and the exit status is 1.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

LAST_LINE = re.compile(r"^oracle: (\d+) ops, (\d+) divergences$")


def parse_seeds(spec):
    lo, _, hi = spec.partition(":")
    return list(range(int(lo), int(hi or lo) + 1))


def runs_from_args(args):
    if args.regressions:
        runs = []
        with open(args.regressions) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                words = line.split()
                runs.append(["--seed", words[0]] + (words[1:] if len(words) > 1 else ["--ops", str(args.ops)]))
        return runs
    extra = (["--threads"] if args.threads else []) + (["--inject"] if args.inject else [])
    if args.features:
        extra += ["--features", args.features]
    return [["--seed", str(s), "--ops", str(args.ops)] + extra for s in parse_seeds(args.seeds)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", required=True)
    ap.add_argument("--seeds", default="1:10")
    ap.add_argument("--ops", type=int, default=1500)
    ap.add_argument("--threads", action="store_true")
    ap.add_argument("--inject", action="store_true")
    ap.add_argument("--features", help="sim_oracle --features (default: all, each enabled at random per seed)")
    ap.add_argument("--preload")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--expect-divergence", action="store_true")
    ap.add_argument("--regressions")
    ap.add_argument("--timeout", type=int, default=120)
    args = ap.parse_args()

    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    shown_env = []
    for kv in args.env:
        name, _, value = kv.partition("=")
        env[name] = value
        shown_env.append(kv)
    if args.preload:
        env["LD_PRELOAD"] = args.preload
        shown_env.append("LD_PRELOAD=" + args.preload)
    if env.get("LD_LIBRARY_PATH"):
        shown_env.append("LD_LIBRARY_PATH=" + env["LD_LIBRARY_PATH"])

    runs = runs_from_args(args)
    total_ops = 0
    for run in runs:
        cmd = [args.exe] + run
        repro = " ".join(shlex.quote(x) for x in ["env"] + shown_env + cmd)
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print("TIMEOUT after %ds: %s" % (args.timeout, repro))
            return 1
        lines = proc.stdout.strip().splitlines()
        m = LAST_LINE.match(lines[-1]) if lines else None
        if m:
            total_ops += int(m.group(1))
        divergences = int(m.group(2)) if m else None
        if args.expect_divergence:
            ok = proc.returncode == 1 and divergences
        else:
            ok = proc.returncode == 0 and divergences == 0
        if not ok:
            what = ("expected the oracle to report a divergence" if args.expect_divergence
                    else "oracle failed")
            print("%s (exit %d): %s" % (what, proc.returncode, repro))
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-40:]
            print("\n".join("  | " + t for t in tail))
            return 1
        if args.expect_divergence:
            first = next((l for l in lines if l.strip().startswith("[1]")), "")
            print("seed %s: divergence reported as expected: %s" % (run[1], first.strip()[:160]))
    print("%d run(s), %d ops, all %s" % (len(runs), total_ops,
                                         "reported divergences" if args.expect_divergence else "passed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
