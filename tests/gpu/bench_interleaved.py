#!/usr/bin/env python3
"""PyTorch benchmark: eager, graft and the launch-free floor timed interleaved in one process.

The lent GPU hosts change CPU speed in bursts of 0.1 s to several seconds, by 10-50 %
(docs/PERF.md), which swamps launch-bound differences between separate processes.
Here each run is one process under graft (GRAFT_MODE=graph GRAFT_BENCH_SWITCH=1) that,
after its warmup, cycles through blocks of --block steps in graft's three modes,
switched in-process (workloads.py --interleave):

  eager   GRAFT_MODE passthrough: every op forwarded to the driver (graft only counts it,
          23-28 ns per op; this bias is in graft's favour by < 0.1 % of a step)
  graft   graph mode: the graphs built during the warmup are replayed
  floor   swallow: kernels, memsets and device copies dropped (results garbage)

The order of the three rotates every cycle. A block's ms/step is its median step when
the loop syncs every step, else the time to issue its steps (the steady state of a long
loop; the wait of the sync after the block is recorded and reported as the GPU tail).
Per cycle c, with e, g, f the ms/step of its three blocks: gap removed = (e - g) / (e - f),
speedup = e / g, the floor's speedup = e / f. Each is the median over the run's cycles;
the table gives the median over runs and every run's value.
Raw blocks go to --out.

With --match a fourth mode is timed in the same rotation: graft's `match` mode (all of
graft's work in graph mode, but nothing reaches the GPU: eager kernels, memsets and device
copies and the graph launches are dropped after matching). match - floor is graft's cost on
the program's thread; graft - match is what launching costs it (the launch thread, the
driver). The extra columns give both as a share of the eager - floor gap.

  python3 tests/gpu/bench_interleaved.py [--libgraft build/src/libgraft.so] [--cases mlp,gpt]
                                         [--runs 5] [--cycles 30] [--block 20] [--out FILE]

Exit: 0 ok; 1 a run failed; 77 no torch/GPU; 2 usage.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from case_lists import GARBAGE_SENSITIVE_CASES  # noqa: E402

MODES = ("passthrough", "graph", "swallow")
NAMES = {"passthrough": "eager", "graph": "graft", "swallow": "floor", "match": "match"}


def run_once(args, case, rnd, workdir):
    tag = "%s.r%d" % (case, rnd)
    spath = os.path.join(workdir, tag + ".stats.json")
    jpath = os.path.join(workdir, tag + ".json")
    env = H.graft_env(args.libgraft, "graph", spath, list(args.graft_env) + ["GRAFT_BENCH_SWITCH=1"])
    if case in GARBAGE_SENSITIVE_CASES:
        modes = ("passthrough", "graph")  # no floor or match: their garbage steers the loop
    else:
        modes = MODES + (("match",) if args.match else ())
    cmd = H.workload_command(case) + ["--interleave", ",".join(modes), "--cycles", str(args.cycles),
                                      "--block", str(args.block), "--warmup", str(args.warmup), "--json", jpath]
    import subprocess
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        sys.stdout.write("bench_interleaved: %s timed out after %d s\n" % (tag, args.timeout))
        return 1, None
    if p.returncode == 77:
        return 77, None
    out = H.load_json(jpath)
    if p.returncode != 0 or not out or "interleaved" not in out:
        sys.stdout.write("bench_interleaved: %s failed (exit %d)\n%s%s" % (tag, p.returncode, p.stdout[-2000:],
                                                                          p.stderr[-2000:]))
        return 1, None
    out["graft_report"] = H.load_json(spath)
    return 0, out


def per_cycle(out):
    iv = out["interleaved"]
    e, g = iv["passthrough"], iv["graph"]
    f = iv.get("swallow") or [None] * len(e)
    mt = iv.get("match") or [None] * len(e)
    rows = []
    for ec, gc, fc, mc in zip(e, g, f, mt):
        gap = ec - fc if fc is not None else 0.0
        rows.append({"eager": ec, "graft": gc, "floor": fc,
                     "gap": (ec - gc) / gap if gap > 1e-9 else None,
                     "speedup": ec / gc, "ceiling": ec / fc if fc else None, "match": mc,
                     "thread_share": (mc - fc) / gap if mc is not None and gap > 1e-9 else None,
                     "launch_share": (gc - mc) / gap if mc is not None and gap > 1e-9 else None})
    return rows


def fmt_or_dash(fmt, v):
    return "-" if v is None else fmt % v


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--libgraft", default=H.DEFAULT_LIBGRAFT)
    ap.add_argument("--cases", default="mlp,mlp_item,gpt")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--timeout", type=int, default=400)
    ap.add_argument("--graft-env", action="append", default=[], help="NAME=VALUE for graft runs")
    ap.add_argument("--match", action="store_true", help="also time graft's match mode (see above)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    if not os.path.exists(args.libgraft):
        print("bench_interleaved: %s not found" % args.libgraft)
        return 2
    cases = args.cases.split(",")
    workdir = args.workdir or tempfile.mkdtemp(prefix="graft-interleaved-")
    os.makedirs(workdir, exist_ok=True)
    results = {c: [] for c in cases}
    for rnd in range(args.runs):
        for case in cases:
            rc, out = run_once(args, case, rnd, workdir)
            if rc == 77:
                print("bench_interleaved: skipped (no torch or no GPU)")
                return 77
            if rc:
                return 1
            rows = per_cycle(out)
            run = {m: med(r[m] for r in rows) for m in ("eager", "graft", "floor", "gap", "speedup", "ceiling",
                                                          "match", "thread_share", "launch_share")}
            run["cycles"] = rows
            rep = out.get("graft_report") or {}
            tails = out.get("interleaved_tail_ms", {})
            run["tail_ms"] = {NAMES[m]: med(v) for m, v in tails.items()}
            run["coverage_pct"] = H.get(rep, "replay", "coverage_pct")
            run["graphs_built"] = H.get(rep, "replay", "graphs_built")
            results[case].append(run)
            # (graft's coverage is not printed: the eager and floor blocks count as eager ops)
            print("run %d %-9s eager %.3f graft %.3f floor %s ms/step  gap removed %s %%  "
                  "speedup eager/graft %.3fx  eager/floor %sx  (graphs %s, GPU tail after a block "
                  "eager/graft/floor: %s ms)" % (
                      rnd, case, run["eager"], run["graft"], fmt_or_dash("%.3f", run["floor"]),
                      fmt_or_dash("%5.1f", None if run["gap"] is None else 100 * run["gap"]),
                      run["speedup"], fmt_or_dash("%.3f", run["ceiling"]), run["graphs_built"],
                      "/".join("%.2f" % (run["tail_ms"].get(n) or 0) for n in ("eager", "graft", "floor"))),
                  flush=True)
            if run["match"] is not None:
                print("run %d %-9s match %.3f ms/step: graft's work on the program's thread %.1f %% of the gap, "
                      "launching %.1f %%" % (rnd, case, run["match"] or 0, 100 * (run["thread_share"] or 0),
                                             100 * (run["launch_share"] or 0)), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)

    print()
    print("interleaved in-process: %d runs x %d cycles x %d steps per block; ms/step; per-cycle paired "
          "statistics, median over a run's cycles, then over runs (each run's value in brackets)" % (
              args.runs, args.cycles, args.block))
    print("| case | eager | graft | floor | gap removed, paired | speedup eager ÷ graft, paired | "
          "floor's speedup eager ÷ floor, paired | pooled: gap removed, speedup |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        runs = results[case]
        def cell(key, fmt, scale=1.0):
            vals = [r[key] for r in runs]
            m = med(vals)
            return ("-" if m is None else fmt % (scale * m)) + " [" + ", ".join(
                "-" if v is None else fmt % (scale * v) for v in vals) + "]"
        # Pooled: the median block of each mode over every cycle of every run.
        pe, pg, pf = (med(c[m] for r in runs for c in r["cycles"]) for m in ("eager", "graft", "floor"))
        pooled = ("%.0f %%, %.2fx" % (100 * (pe - pg) / (pe - pf), pe / pg) if pf is not None and pe - pf > 1e-9
                  else "-, %.2fx" % (pe / pg))
        print("| %s | %.3f | %.3f | %s | %s | %s | %s | %s |" % (
            case, med(r["eager"] for r in runs), med(r["graft"] for r in runs),
            fmt_or_dash("%.3f", med(r["floor"] for r in runs)),
            cell("gap", "%.0f %%", 100), cell("speedup", "%.2fx"), cell("ceiling", "%.2fx"), pooled))
    if args.match:
        print()
        print("| case | match ms/step | match - floor, share of the gap (graft's work on the program's thread) "
              "| graft - match, share of the gap (launching) |")
        print("|---|---|---|---|")
        for case in cases:
            runs = results[case]
            if med(r["match"] for r in runs) is None:
                continue
            def cell2(key):
                vals = [r[key] for r in runs if r[key] is not None]
                return "%.1f %% [%s]" % (100 * med(vals), ", ".join("%.0f" % (100 * v) for v in vals))
            print("| %s | %.3f | %s | %s |" % (case, med(r["match"] for r in runs), cell2("thread_share"),
                                               cell2("launch_share")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
