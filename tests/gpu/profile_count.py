#!/usr/bin/env python3
"""Does graft see every kernel, memset and memcpy?  (graft passthrough vs torch.profiler)

For each case (default mlp, gpt):
  graft's per-step count  = (count(N2) - count(N1)) / (N2 - N1), from GRAFT_STATS
                            ops.by_class.{launch,set,copy} of two runs under
                            LD_PRELOAD=libgraft GRAFT_MODE=passthrough;
  the profiler's          = kernel / gpu_memset / gpu_memcpy device events per profiled
                            step of a run without graft (torch.profiler, after warmup).
And for demo/storm (if --storm is given or found): graft's per-iteration launches, sets
and copies under passthrough against storm's own kernels_per_iter / memsets_per_iter /
copies_per_iter, for the sync and nosync variants.

  python3 tests/gpu/profile_count.py [--libgraft build/src/libgraft.so] [--storm PATH]
                                     [--cases mlp,gpt] [--out DIR]

Exit: 0 all counts equal; 1 a count differs or a run failed; 77 nothing could run
(no GPU / no torch); 2 usage.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

KINDS = (("kernels", "launch"), ("memsets", "set"), ("memcpys", "copy"))


def per_step(stats1, stats2, cls, n1, n2):
    a = H.get(stats1, "ops", "by_class", cls)
    b = H.get(stats2, "ops", "by_class", cls)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return None
    return (b - a) / float(n2 - n1)


def same(x, y):
    return x is not None and y is not None and abs(x - y) < 1e-6


def torch_case(args, case, out, rows, problems):
    """Returns False if the case was skipped (exit 77 from workloads.py)."""
    w = args.warmup
    prof_json = os.path.join(out, case + ".profile.json")
    H.rm_f(prof_json)
    prof = H.run_workload(case, "eager", w + args.profile_steps + 2, out, case + ".profiler", H.clean_env(),
                          args.timeout, warmup=w, losses=False,
                          extra_args=["--profile-json", prof_json, "--profile-steps", str(args.profile_steps)])
    if H.skipped(prof):
        line = H.last_lines(prof["output_tail"], 1)
        print("profile_count: %s skipped: %s" % (case, line[0] if line else "exit 77"))
        return False
    recs = []
    for n in (args.n1, args.n2):
        sp = os.path.join(out, "%s.pt%d.stats.json" % (case, n))
        env = H.graft_env(args.libgraft, "passthrough", sp, args.graft_env)
        recs.append(H.run_workload(case, "eager", n, out, "%s.pt%d" % (case, n), env, args.timeout,
                                   warmup=w, losses=False, stats_path=sp))
    pj = H.load_json(prof_json)
    for r in [prof] + recs:
        if not r["ok"]:
            problems.append("%s: run %s failed rc=%s: %s" % (case, r["tag"], r["rc"],
                                                           " | ".join(H.last_lines(r["output_tail"], 2))))
    for r in recs:
        if r["ok"] and not isinstance(r["stats"], dict):
            problems.append("%s: %s wrote no GRAFT_STATS JSON" % (case, r["tag"]))
    if isinstance(pj, dict) and pj.get("warning"):
        problems.append("%s: profiler: %s" % (case, pj["warning"]))
    for kind, cls in KINDS:
        g = per_step(recs[0]["stats"], recs[1]["stats"], cls, args.n1, args.n2)
        p = H.get(pj, "per_step", kind)
        ok = same(g, p)
        rows.append((case, kind, H.fmt(p, "{:.2f}"), H.fmt(g, "{:.2f}"), "OK" if ok else "DIFF"))
        if not ok:
            problems.append("%s %s per step: profiler %s, graft %s" % (case, kind, H.fmt(p, "{:.3f}"), H.fmt(g, "{:.3f}")))
    return True


def run_storm(args, iters, sync, out):
    tag = "storm.%s.pt%d" % ("sync" if sync else "nosync", iters)
    jp = os.path.join(out, tag + ".json")
    sp = os.path.join(out, tag + ".stats.json")
    H.rm_f(jp, sp)
    cmd = [args.storm, "--mode", "eager", "--iters", str(iters), "--warmup", "10", "--json", jp] + ([] if sync else ["--nosync"])
    env = H.graft_env(args.libgraft, "passthrough", sp, args.graft_env)
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=args.timeout)
        rc, text = p.returncode, p.stdout
    except subprocess.TimeoutExpired:
        rc, text = "timeout", ""
    except OSError as e:
        rc, text = "oserror", str(e)
    return {"tag": tag, "rc": rc, "output_tail": text[-2000:], "result": H.load_json(jp), "stats": H.load_json(sp)}


def storm_part(args, out, rows, problems):
    """Returns False if storm was skipped (no device)."""
    n1, n2 = args.storm_iters
    for sync in (True, False):
        recs = [run_storm(args, n, sync, out) for n in (n1, n2)]
        if any(r["rc"] == 77 for r in recs):
            print("profile_count: storm skipped: %s" % " ".join(H.last_lines(recs[0]["output_tail"], 1)))
            return False
        label = "storm-" + ("sync" if sync else "nosync")
        bad = [r for r in recs if r["rc"] != 0 or not isinstance(r["result"], dict)]
        for r in bad:
            problems.append("%s: run %s failed rc=%s: %s" % (label, r["tag"], r["rc"],
                                                           " | ".join(H.last_lines(r["output_tail"], 2))))
        for r in recs:
            if r["rc"] == 0 and not isinstance(r["stats"], dict):
                problems.append("%s: %s wrote no GRAFT_STATS JSON" % (label, r["tag"]))
        res = recs[1]["result"] if isinstance(recs[1]["result"], dict) else {}
        expect = {"kernels": res.get("kernels_per_iter"), "memsets": res.get("memsets_per_iter"),
                  "memcpys": res.get("copies_per_iter")}
        for kind, cls in KINDS:
            g = per_step(recs[0]["stats"], recs[1]["stats"], cls, n1, n2)
            e = expect[kind]
            ok = same(g, e)
            rows.append((label, kind, H.fmt(e, "{:.2f}"), H.fmt(g, "{:.2f}"), "OK" if ok else "DIFF"))
            if not ok:
                problems.append("%s %s per iteration: storm says %s, graft %s" % (label, kind, e, H.fmt(g, "{:.3f}")))
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libgraft", default=H.DEFAULT_LIBGRAFT)
    ap.add_argument("--storm", default=None, help="demo/storm binary (default: build/demo/storm if present; 'none' to skip)")
    ap.add_argument("--cases", default="mlp,gpt")
    ap.add_argument("--n1", type=int, default=40)
    ap.add_argument("--n2", type=int, default=80)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--profile-steps", type=int, default=5)
    ap.add_argument("--storm-iters", default="50,150", help="N1,N2 storm iterations")
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--graft-env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default=None, help="directory for logs and JSON (default: temp)")
    args = ap.parse_args()

    if not (args.warmup < args.n1 < args.n2):
        ap.error("need warmup < n1 < n2")
    try:
        args.storm_iters = [int(x) for x in args.storm_iters.split(",")]
        assert len(args.storm_iters) == 2 and 0 < args.storm_iters[0] < args.storm_iters[1]
    except (ValueError, AssertionError):
        ap.error("--storm-iters takes N1,N2 with 0 < N1 < N2")
    if args.storm is None:
        cand = os.path.join(H.REPO, "build", "demo", "storm")
        args.storm = cand if os.access(cand, os.X_OK) else "none"
    if args.storm != "none":
        args.storm = os.path.abspath(args.storm)
        if not os.access(args.storm, os.X_OK):
            print("profile_count: storm binary not found or not executable: %s" % args.storm)
            return 2
    err = H.check_libgraft(args.libgraft)
    if err:
        print("profile_count: " + err)
        return 2
    args.libgraft = os.path.abspath(args.libgraft)
    out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="profile_count."))
    os.makedirs(out, exist_ok=True)

    t0 = time.monotonic()
    rows, problems, ran = [], [], []
    for case in [c.strip() for c in args.cases.split(",") if c.strip()]:
        if torch_case(args, case, out, rows, problems):
            ran.append(case)
        else:
            break  # no torch / no GPU: the other cases would skip too
    if args.storm != "none":
        if storm_part(args, out, rows, problems):
            ran.append("storm")
    else:
        print("profile_count: no storm binary (pass --storm): storm check not run")

    print()
    print("=== RESULT ===")
    print("profile_count: per-step counts, torch.profiler (storm: its own report) vs graft passthrough "
          "(N1=%d, N2=%d)" % (args.n1, args.n2))
    for line in H.table(("workload", "what", "reference", "graft", "check"), rows):
        print(line)
    for p in problems:
        print("  " + p)
    with open(os.path.join(out, "profile_count.json"), "w") as f:
        json.dump({"tool": "profile_count", "rows": rows, "problems": problems, "ran": ran}, f, indent=1)
    if not ran:
        print("profile_count: SKIP: nothing could run (no GPU or no torch)")
        return 77
    verdict = "PASS" if not problems else "FAIL"
    print("profile_count: %s (%s; %.0fs; logs in %s)" % (verdict, ", ".join(ran), time.monotonic() - t0, out))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
