#!/usr/bin/env python3
"""The GPU tier's PyTorch scripts and drivers, checked on a machine without a GPU.

  check_gpu_scripts.py SOURCE_ROOT LIBGRAFT

1. Issue 4's cases are scripts of their own: tests/gpu/training/CASE.py for each case of
   case_lists.ISSUE_CASES, and no other script there; the drivers (harness.workload_command)
   run each through its script.
2. Each of those scripts and `workloads.py CASE` load without torch (a `torch` package
   that refuses to import is put first on the path) and exit 77 with the skip line:
   an import of the scripts' own modules or names that fails, or code at their top
   level that needs torch, fails here, not on the GPU machine. `workloads.py list`
   prints case_lists.CASES.
3. check_losses.py, with a stand-in workload (GPU_TIER_WORKLOADS) that writes one loss
   per step and, under graft, an exit report, reports equal losses as PASS (exit 0), a
   loss that differs under graft as FAIL with its step (exit 1), and equal losses with
   a share through graphs under the case's floor (case_lists.ISSUE_CASE_FLOORS) as FAIL.

Exit 0 when all hold, 1 otherwise (each failure printed).
"""

import os
import shutil
import subprocess
import sys
import tempfile

FAILURES = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILURES.append(what)


def run(cmd, env, timeout=120):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout


STAND_IN = r'''
import argparse, json, os
ap = argparse.ArgumentParser()
ap.add_argument("case")
ap.add_argument("--mode")
ap.add_argument("--steps", type=int)
ap.add_argument("--warmup", type=int)
ap.add_argument("--json")
ap.add_argument("--losses")
a = ap.parse_args()
differ = os.environ.get("GRAFT_MODE") == "graph" and os.environ.get("STAND_IN_DIFFERS") == "1"
with open(a.losses, "w") as f:
    for i in range(a.steps):
        f.write("%08x\n" % (0x3f800000 + i + (1 if differ and i == 7 else 0)))
with open(a.json, "w") as f:
    json.dump({"case": a.case, "ms_per_step_median": 1.0}, f)
if os.environ.get("GRAFT_MODE") == "graph" and os.environ.get("GRAFT_STATS"):
    with open(os.environ["GRAFT_STATS"], "w") as f:
        json.dump({"replay": {"coverage_pct": float(os.environ.get("STAND_IN_COVERAGE", "99")),
                              "patches_per_replay": 13.5, "replays": 10, "graphs_built": 1,
                              "fallbacks": {"program_graph_launch": int(os.environ.get("STAND_IN_STEPS_ASIDE", a.steps))}}}, f)
'''


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    root, libgraft = os.path.abspath(sys.argv[1]), sys.argv[2]
    gpu = os.path.join(root, "tests", "gpu")
    training = os.path.join(gpu, "training")
    sys.path.insert(0, gpu)
    from case_lists import CASES, ISSUE_CASES

    # 1. A script per case.
    scripts = sorted(f[:-3] for f in os.listdir(training)
                     if f.endswith(".py") and f not in ("common.py", "__init__.py"))
    check(sorted(ISSUE_CASES) == scripts,
          "training/ holds a script for each of ISSUE_CASES and no other (scripts: %s)" % ", ".join(scripts))

    # The drivers run a case through its own script where it has one.
    os.environ.pop("GPU_TIER_WORKLOADS", None)
    import harness
    own = [c for c in ISSUE_CASES if harness.workload_command(c)[1:] != [os.path.join(training, c + ".py")]]
    other = harness.workload_command("cnn")[1:]
    check(not own and other == [os.path.join(gpu, "workloads.py"), "cnn"],
          "the drivers run each of ISSUE_CASES through its own script and other cases through "
          "workloads.py (not so: %s; cnn: %s)" % (own, other))

    tmp = tempfile.mkdtemp(prefix="check_gpu_scripts.")
    # 2. Without torch: exit 77 and say why.
    hidden = os.path.join(tmp, "hidden")
    os.makedirs(os.path.join(hidden, "torch"))
    with open(os.path.join(hidden, "torch", "__init__.py"), "w") as f:
        f.write('raise ImportError("torch hidden by check_gpu_scripts")\n')
    env = dict(os.environ, PYTHONPATH=hidden, PYTHONDONTWRITEBYTECODE="1")
    env.pop("LD_PRELOAD", None)
    # The options the drivers pass (harness.run_workload, bench_interleaved.py), parsed
    # before the torch check.
    opts = ["--mode", "eager", "--steps", "3", "--json", os.path.join(tmp, "j"), "--warmup", "1",
            "--losses", os.path.join(tmp, "l")]
    commands = [([sys.executable, os.path.join(training, c + ".py")] + opts, "training/%s.py" % c)
                for c in ISSUE_CASES]
    commands.append(([sys.executable, os.path.join(training, "mlp.py"), "--interleave", "passthrough,graph",
                      "--cycles", "2", "--block", "1", "--warmup", "1", "--json", os.path.join(tmp, "j")],
                     "training/mlp.py --interleave"))
    commands += [([sys.executable, os.path.join(gpu, "workloads.py"), c, "--steps", "3"], "workloads.py " + c)
                 for c in ("mlp", "gpt", "cnn", "expandable")]
    for cmd, name in commands:
        rc, out = run(cmd, env)
        check(rc == 77 and "skipped: torch not available (torch hidden by check_gpu_scripts)" in out,
              "%s without torch: exit 77 and the reason (rc=%s, output: %s)" % (name, rc, out.strip()[-300:]))
    rc, out = run([sys.executable, os.path.join(gpu, "workloads.py"), "list"], env)
    check(rc == 0 and out.split() == list(CASES), "workloads.py list prints every case (rc=%s)" % rc)

    # 3. check_losses.py's verdicts, on a stand-in workload.
    stand_in = os.path.join(tmp, "stand_in.py")
    with open(stand_in, "w") as f:
        f.write(STAND_IN)
    base = dict(os.environ, GPU_TIER_WORKLOADS=stand_in, PYTHONDONTWRITEBYTECODE="1", GRAFT_LOG_LEVEL="warn")
    base.pop("LD_PRELOAD", None)
    check_losses = [sys.executable, os.path.join(gpu, "check_losses.py"), "--libgraft", libgraft,
                    "--steps", "300", "--cases", "mlp,gpt,partgraph", "--no-log-file"]
    rc, out = run(check_losses + ["--out", os.path.join(tmp, "equal")], base)
    check(rc == 0 and "PASS: 3/3 cases bitwise equal and at their floors" in out,
          "check_losses: equal losses pass (rc=%s, output: %s)" % (rc, out.strip()[-300:]))
    rc, out = run(check_losses + ["--out", os.path.join(tmp, "differs")], dict(base, STAND_IN_DIFFERS="1"))
    check(rc == 1 and "FAIL: 0/3 cases bitwise equal and at their floors" in out and "first diff at step 7" in out,
          "check_losses: a loss that differs under graft fails, with its step (rc=%s, output: %s)" % (
              rc, out.strip()[-300:]))

    rc, out = run(check_losses + ["--out", os.path.join(tmp, "short")], dict(base, STAND_IN_COVERAGE="50"))
    check(rc == 1 and "SHORT" in out and "below this case's floor of 94.0 %" in out,
          "check_losses: equal losses with too few ops through graphs fail (rc=%s, output: %s)" % (
              rc, out.strip()[-300:]))

    rc, out = run(check_losses + ["--out", os.path.join(tmp, "aside")], dict(base, STAND_IN_STEPS_ASIDE="269"))
    check(rc == 1 and "FAIL: 2/3" in out and "269 fallback(s) program_graph_launch in 300 steps" in out,
          "check_losses: partgraph fails where graft did not step aside once a step (rc=%s, output: %s)" % (
              rc, out.strip()[-300:]))

    shutil.rmtree(tmp, ignore_errors=True)
    print("%d check(s) failed" % len(FAILURES) if FAILURES else "all checks hold")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
