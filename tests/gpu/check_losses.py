#!/usr/bin/env python3
"""Bitwise loss equality of PyTorch training under graft vs eager (DESIGN.md §5, gpu tier).

For each case of workloads.py: one eager run and one run under
LD_PRELOAD=libgraft GRAFT_MODE=graph GRAFT_STATS=..., both writing the per-step loss
as float32 hex; the two files must be identical. The issue's cases must also reach
their floors of ops through graphs and node updates per replay
(case_lists.ISSUE_CASE_FLOORS; verdict SHORT when not).  Prints, per case, the first differing
step (if any) and graft's coverage, replays, patches per replay and fallback reasons.
When a case differs, eager is run a second time to tell graft bugs from a
nondeterministic workload.

  python3 tests/gpu/check_losses.py [--libgraft build/src/libgraft.so] [--steps 300]
                                    [--cases mlp,gpt,...] [--out DIR] [--mode eager|compile]

--mode compile runs both sides as workloads.py --mode compile (the model under
torch.compile(mode="reduce-overhead"), whose CUDA graphs PyTorch captures and
launches itself; graft steps aside for the captures): graft under a program that
graphs most of its step itself. Cases: case_lists.COMPILE_CASES.

Exit: 0 all cases bitwise equal (and at their floors); 1 otherwise; 77 torch or a GPU is missing; 2 usage.
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from case_lists import CASES, COMPILE_CASES, ISSUE_CASE_FLOORS, TWO_GPU_CASES  # noqa: E402


def short_of_floors(summary, floors, steps):
    """Why graft fell short of a case's floors (case_lists.ISSUE_CASE_FLOORS) over `steps`
    steps, or None."""
    min_cover, min_patches, each_step = floors
    cover, patches = summary.get("coverage_pct"), summary.get("patches_per_replay")
    if cover is None or cover < min_cover:
        return "%s %% of ops through graphs, below this case's floor of %.1f %%" % (cover, min_cover)
    if min_patches and (patches is None or patches < min_patches):
        return "%s node updates per replay, below this case's floor of %.1f" % (patches, min_patches)
    # (A tenth may be counted as `dormant` instead, were graft to rest for a while.)
    if each_step and (summary.get("fallbacks") or {}).get(each_step, 0) < 0.9 * steps:
        return "%s fallback(s) %s in %d steps, where each step has one" % (
            (summary.get("fallbacks") or {}).get(each_step, 0), each_step, steps)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libgraft", default=H.DEFAULT_LIBGRAFT)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--cases", default=None, help="default: every case of the mode")
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"],
                    help="workloads.py --mode for both runs (compile: torch.compile reduce-overhead)")
    ap.add_argument("--out", default=None, help="directory for logs, loss files, stats (default: temp)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per process")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="start no new case after this many seconds (0: no limit)")
    ap.add_argument("--graft-env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--no-floors", action="store_true",
                    help="do not hold the issue's cases to their floors (experiments with other settings)")
    ap.add_argument("--no-log-file", action="store_true",
                    help="do not set GRAFT_LOG_FILE per case (default: OUT/CASE.graftlog.txt unless set)")
    args = ap.parse_args()

    known = CASES if args.mode == "eager" else list(COMPILE_CASES)
    cases = [c.strip() for c in (args.cases or ",".join(known)).split(",") if c.strip()]
    bad = [c for c in cases if c not in known]
    if bad:
        ap.error("unknown case(s) %s for --mode %s; choose from %s" % (bad, args.mode, known))
    if args.steps < 300:
        print("check_losses: note: --steps %d is below the 300 the gpu tier asks for" % args.steps)
    out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="check_losses."))
    os.makedirs(out, exist_ok=True)
    libgraft = os.path.abspath(args.libgraft) if args.libgraft else None

    t_start = time.monotonic()
    results = []
    lib_err = None
    for n, case in enumerate(cases):
        if args.budget_s and time.monotonic() - t_start > args.budget_s:
            results.append({"case": case, "verdict": "NOT RUN", "why": "time budget %.0fs" % args.budget_s})
            continue
        eager = H.run_workload(case, args.mode, args.steps, out, case + ".eager", H.clean_env(),
                               args.timeout, warmup=args.warmup)
        if H.skipped(eager):
            line = H.last_lines(eager["output_tail"], 1)
            print("check_losses: skipped: %s" % (line[0] if line else "workloads.py exited 77"))
            if case not in TWO_GPU_CASES:
                return 77  # no torch or no GPU: nothing can run
            results.append({"case": case, "verdict": "SKIP", "why": line[0] if line else "exit 77"})
            continue
        if lib_err is None:
            lib_err = H.check_libgraft(libgraft) or ""
        if lib_err:
            print("check_losses: " + lib_err)
            return 2
        spath = os.path.join(out, case + ".graft.stats.json")
        extra = list(args.graft_env)
        if not args.no_log_file and "GRAFT_LOG_FILE" not in os.environ:
            extra.append("GRAFT_LOG_FILE=" + os.path.join(out, case + ".graftlog.txt"))
        genv = H.graft_env(libgraft, "graph", spath, extra)
        graft = H.run_workload(case, args.mode, args.steps, out, case + ".graft", genv, args.timeout,
                               warmup=args.warmup, stats_path=spath)
        r = {"case": case, "eager": eager, "graft": graft, "graft_summary": H.graft_summary(graft["stats"])}
        if not eager["ok"]:
            r["verdict"] = "ERROR"
            r["why"] = "eager run failed rc=%s: %s" % (eager["rc"], " | ".join(H.last_lines(eager["output_tail"])))
        elif not graft["ok"]:
            r["verdict"] = "ERROR"
            r["why"] = "graft run failed rc=%s: %s" % (graft["rc"], " | ".join(H.last_lines(graft["output_tail"])))
        else:
            cmp = H.compare_losses(eager["losses"], graft["losses"])
            r["compare"] = cmp
            floors = ISSUE_CASE_FLOORS.get(case) if args.mode == "eager" and not args.no_floors else None
            short = short_of_floors(r["graft_summary"], floors, args.steps) if floors else None
            if cmp["equal"] and short:
                r["verdict"] = "SHORT"
                r["why"] = short
            elif cmp["equal"]:
                r["verdict"] = "EQUAL"
            else:
                r["verdict"] = "DIFF"
                if cmp.get("first_diff") is not None:
                    r["why"] = "first diff at step %s: eager %s graft %s (%s of %s steps differ)" % (
                        cmp["first_diff"], cmp["a"], cmp["b"], cmp.get("n_diff", "?"), cmp["n_a"])
                else:
                    r["why"] = cmp.get("error", "?")
                # Is eager itself deterministic?
                eager2 = H.run_workload(case, args.mode, args.steps, out, case + ".eager2", H.clean_env(),
                                        args.timeout, warmup=args.warmup)
                if eager2["ok"]:
                    c2 = H.compare_losses(eager["losses"], eager2["losses"])
                    r["eager_repeat_equal"] = c2["equal"]
                    if not c2["equal"]:
                        r["verdict"] = "NONDET"
                        r["why"] += "; eager differs from itself at step %s: the workload is nondeterministic" % (
                            c2.get("first_diff"),)
        results.append(r)
        gs = r["graft_summary"]
        print("  %-10s %-6s %5.1fs  cover=%s%% replays=%s patches/replay=%s %s" % (
            case, r["verdict"], eager["wall_s"] + graft["wall_s"], H.fmt(gs["coverage_pct"], "{:.1f}"),
            H.fmt(gs["replays"], "{}"), H.fmt(gs["patches_per_replay"]), r.get("why", "")), flush=True)

    print()
    print("=== RESULT ===")
    print("check_losses: %d steps per run, %s vs LD_PRELOAD=libgraft GRAFT_MODE=graph" % (
        args.steps, "eager" if args.mode == "eager" else "torch.compile(mode=\"reduce-overhead\")"))
    skipped = [r["case"] for r in results if r["verdict"] == "SKIP"]
    results = [r for r in results if r["verdict"] != "SKIP"]
    if skipped:
        print("  skipped (need two GPUs): %s" % ", ".join(skipped))
    if not results:
        return 77
    rows = []
    for r in results:
        gs = r.get("graft_summary") or {}
        e_ms = H.get(r, "eager", "result", "ms_per_step_median")
        g_ms = H.get(r, "graft", "result", "ms_per_step_median")
        rows.append((r["case"], r["verdict"],
                     H.fmt(H.get(r, "compare", "first_diff"), "{}"),
                     H.fmt(gs.get("coverage_pct"), "{:.1f}"), H.fmt(gs.get("fast_lane_pct"), "{:.1f}"),
                     H.fmt(gs.get("replays"), "{}"),
                     H.fmt(gs.get("graphs_built"), "{}"), H.fmt(gs.get("patches_per_replay")),
                     H.fmt(gs.get("first_replay_s"), "{:.2f}"),
                     H.fmt(e_ms, "{:.3f}"), H.fmt(g_ms, "{:.3f}"),
                     H.fmt_fallbacks(gs.get("fallbacks"), 3)))
    for line in H.table(("case", "result", "1st-diff", "cover%", "fast%", "replays", "graphs", "patch/rep",
                         "1st-rep-s", "eager-ms", "graft-ms", "fallbacks"), rows):
        print(line)
    for r in results:
        if r["verdict"] != "EQUAL":
            print("  %s: %s" % (r["case"], r.get("why", "")))
        if r.get("graft") and not (r.get("graft_summary") or {}).get("present"):
            print("  %s: graft wrote no GRAFT_STATS JSON (%s)" % (r["case"], r["graft"]["stats_path"]))
    n_eq = sum(1 for r in results if r["verdict"] == "EQUAL")
    ok = n_eq == len(results) and results
    with open(os.path.join(out, "check_losses.json"), "w") as f:
        json.dump({"tool": "check_losses", "steps": args.steps, "results": results}, f, indent=1, default=str)
    print("check_losses: %s: %d/%d cases bitwise equal and at their floors (%.0fs; logs in %s)" % (
        "PASS" if ok else "FAIL", n_eq, len(results), time.monotonic() - t_start, out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
