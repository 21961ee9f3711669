#!/usr/bin/env python3
"""Interleaved benchmark of demo/storm: eager vs graft vs hand-written graph vs floor.

Each variant runs as its own process, round-robin, for the sync and nosync variants of
the loop:

  eager        storm --mode eager                 (no preload)
  graft        LD_PRELOAD=libgraft GRAFT_MODE=graph
  passthrough  LD_PRELOAD=libgraft GRAFT_MODE=passthrough   (interception overhead)
  hand         storm --mode graph                 (hand-written graph, no preload)
  floor        LD_PRELOAD=libgraft GRAFT_MODE=swallow       (launches swallowed; results discarded)

Prints a table of medians (speedup vs eager, graft's share of the hand-graph speedup,
passthrough overhead, MATCH/DIFF of the loss and parameter checksum against eager) and
writes every raw number to --out.

Exit: 0 all runs ok and graft/passthrough results bitwise equal to eager; 1 otherwise;
77 no CUDA device (storm exits 77); 2 usage error.  Python stdlib only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ALL_VARIANTS = ["eager", "graft", "passthrough", "hand", "floor"]
GRAFT_MODES = {"graft": "graph", "passthrough": "passthrough", "floor": "swallow"}
CHECKED = ("graft", "passthrough", "hand")  # results compared with eager
MUST_MATCH = ("graft", "passthrough")       # a DIFF here fails the run


# Shared with the PyTorch harness: environment cleaning and tolerant JSON helpers.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
import harness as H  # noqa: E402

clean_env, get, load_json, median_or_none = H.clean_env, H.get, H.load_json, H.median


def fmt(v, spec="{:.1f}", none="-"):
    return H.fmt(v, spec, none)


def run_one(args, variant, sync, rnd, workdir):
    tag = "%s-%s-r%d" % (variant, "sync" if sync else "nosync", rnd)
    jpath = os.path.join(workdir, tag + ".json")
    spath = os.path.join(workdir, tag + ".stats.json")
    for p in (jpath, spath):
        if os.path.exists(p):
            os.remove(p)
    cmd = [args.storm, "--iters", str(args.iters), "--warmup", str(args.warmup), "--json", jpath]
    cmd += ["--mode", "graph" if variant == "hand" else "eager"]
    if not sync:
        cmd.append("--nosync")
    cmd += args.storm_arg
    env = clean_env()
    if variant in GRAFT_MODES:
        # the caller's GRAFT_* settings (GRAFT_WARMUP, GRAFT_LOG_LEVEL, ...) reach graft runs only
        for k, v in os.environ.items():
            if k.startswith("GRAFT_") and k not in ("GRAFT_MODE", "GRAFT_STATS"):
                env[k] = v
        env["LD_PRELOAD"] = args.libgraft
        env["GRAFT_MODE"] = GRAFT_MODES[variant]
        env["GRAFT_STATS"] = spath
        for kv in args.graft_env:
            k, _, v = kv.partition("=")
            env[k] = v
    rec = {"variant": variant, "sync": sync, "round": rnd, "cmd": cmd,
           "env": {k: env[k] for k in sorted(env) if k.startswith("GRAFT_") or k == "LD_PRELOAD"}}
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=args.timeout, text=True, errors="replace")
        rec["rc"] = p.returncode
        rec["output_tail"] = p.stdout[-2000:]
    except subprocess.TimeoutExpired as e:
        rec["rc"] = "timeout"
        out = e.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        rec["output_tail"] = out[-2000:]
    except OSError as e:
        rec["rc"] = "oserror"
        rec["output_tail"] = str(e)
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    rec["result"] = load_json(jpath)
    rec["stats"] = load_json(spath) if variant in GRAFT_MODES else None
    rec["ok"] = rec["rc"] == 0 and isinstance(rec["result"], dict) and "_error" not in rec["result"]
    return rec


def summarize(runs, variants, sync):
    rows = {}
    sel = [r for r in runs if r["sync"] == sync]
    for v in variants:
        rs = [r for r in sel if r["variant"] == v]
        ok = [r for r in rs if r["ok"]]
        us = [get(r, "result", "us_per_iter_median") for r in ok]
        stats = [r["stats"] for r in ok if isinstance(r.get("stats"), dict)]
        fb = {}
        for s in stats[-1:]:  # fallbacks of the last run (they repeat run to run)
            for k, n in (get(s, "replay", "fallbacks", default={}) or {}).items():
                fb[k] = n
        rows[v] = {
            "runs": len(rs), "ok": len(ok),
            "us_median": median_or_none(us),
            "us_min": min([u for u in us if u is not None], default=None),
            "us_max": max([u for u in us if u is not None], default=None),
            "us_all": us,
            # each run's fastest block of 10 % of the iterations (sync only): the machine
            # undisturbed; noise on the lent machines comes in bursts that slow whole
            # blocks by 10-50 % (scripts/gpu-noise.sh, docs/PERF.md)
            "us_best": median_or_none([min(get(r, "result", "block_medians_us") or [], default=None)
                                       for r in ok]),
            "us_by_round": {r["round"]: get(r, "result", "us_per_iter_median") for r in ok},
            "kernels_per_iter": get(ok[0], "result", "kernels_per_iter") if ok else None,
            "loss_hex": sorted({get(r, "result", "loss_final_hex") for r in ok} - {None}),
            "checksum_hex": sorted({get(r, "result", "params_checksum_hex") for r in ok} - {None}),
            "coverage_pct": median_or_none([get(s, "replay", "coverage_pct") for s in stats]),
            "replays": median_or_none([get(s, "replay", "replays") for s in stats]),
            "graphs_built": median_or_none([get(s, "replay", "graphs_built") for s in stats]),
            "patches_per_replay": median_or_none([get(s, "replay", "patches_per_replay") for s in stats]),
            "first_replay_s": median_or_none([get(s, "replay", "first_replay_s") for s in stats]),
            "launches_total": median_or_none([get(s, "ops", "by_class", "launch") for s in stats]),
            "fallbacks": fb,
            "stats_missing": len(ok) - len(stats) if v in GRAFT_MODES else 0,
        }
    eager = rows.get("eager", {})
    e_us = eager.get("us_median")
    hand_us = get(rows, "hand", "us_median")
    ref_loss = eager.get("loss_hex") or []
    ref_sum = eager.get("checksum_hex") or []
    e_best, hand_best = eager.get("us_best"), get(rows, "hand", "us_best")
    for v, row in rows.items():
        for suffix, e, u, h in (("", e_us, row["us_median"], hand_us), ("_best", e_best, row["us_best"], hand_best)):
            row["speedup" + suffix] = (e / u) if (e and u) else None
            # share of the hand graph's speedup, strictest reading: (e/g - 1) / (e/h - 1)
            row["share_of_hand_pct" + suffix] = None
            if v == "graft" and e and u and h and e / h - 1 > 1e-9:
                row["share_of_hand_pct" + suffix] = 100.0 * (e / u - 1) / (e / h - 1)
            row["overhead_pct" + suffix] = (100.0 * (u / e - 1)) if (v == "passthrough" and e and u) else None
        # median over rounds of this run's time / the same round's eager time
        pairs = [u / eager["us_by_round"][k] for k, u in row["us_by_round"].items()
                 if u and eager.get("us_by_round", {}).get(k)]
        row["paired_ratio"] = median_or_none(pairs)
        if v in CHECKED:
            if not row["ok"] or len(ref_loss) != 1 or len(ref_sum) != 1:
                row["check"] = "-"
            elif row["loss_hex"] == ref_loss and row["checksum_hex"] == ref_sum:
                row["check"] = "MATCH"
            else:
                row["check"] = "DIFF"
        elif v == "eager":
            row["check"] = "ref" if len(ref_loss) == 1 and len(ref_sum) == 1 else (
                "NONDET" if row["ok"] else "-")
        else:
            row["check"] = "(discarded)"
    return rows


def print_table(rows, variants, sync, args, rounds_done):
    print("== storm %s: %d round(s) x %d iters (warmup %d); us/iter = median over rounds ==" % (
        "sync" if sync else "nosync", rounds_done, args.iters, args.warmup))
    hdr = ("variant", "ok", "us/iter", "min", "max", "speedup", "hand-share", "overhead", "paired",
           "best-blk", "share", "overhead", "result", "cover%", "replays", "graphs", "patch/rep", "1st-rep-s")
    w = (12, 5, 9, 9, 9, 8, 10, 9, 7, 9, 7, 9, 11, 7, 8, 7, 9, 9)
    print(" ".join(h.ljust(n) for h, n in zip(hdr, w)).rstrip())
    for v in variants:
        r = rows[v]
        cells = (v, "%d/%d" % (r["ok"], r["runs"]), fmt(r["us_median"]), fmt(r["us_min"]),
                 fmt(r["us_max"]), fmt(r["speedup"], "{:.2f}x"), fmt(r["share_of_hand_pct"], "{:.1f}%"),
                 fmt(r["overhead_pct"], "{:+.1f}%"), fmt(r["paired_ratio"], "{:.3f}"),
                 fmt(r["us_best"]), fmt(r["share_of_hand_pct_best"], "{:.1f}%"),
                 fmt(r["overhead_pct_best"], "{:+.1f}%"), r["check"],
                 fmt(r["coverage_pct"]), fmt(r["replays"], "{:.0f}"), fmt(r["graphs_built"], "{:.0f}"),
                 fmt(r["patches_per_replay"], "{:.2f}"), fmt(r["first_replay_s"], "{:.3f}"))
        print(" ".join(str(c).ljust(n) for c, n in zip(cells, w)).rstrip())
    for v in variants:
        r = rows[v]
        if r["fallbacks"]:
            print("  %s fallbacks: %s" % (v, ", ".join("%s=%s" % kv for kv in sorted(r["fallbacks"].items()))))
        if r.get("stats_missing"):
            print("  %s: %d run(s) wrote no GRAFT_STATS JSON" % (v, r["stats_missing"]))
        if r["check"] == "DIFF":
            print("  %s DIFF: loss %s checksum %s vs eager loss %s checksum %s" % (
                v, r["loss_hex"], r["checksum_hex"], rows["eager"]["loss_hex"], rows["eager"]["checksum_hex"]))
    if "eager" in rows and rows["eager"]["check"] == "NONDET":
        print("  eager runs disagree among themselves: loss %s checksum %s" % (
            rows["eager"]["loss_hex"], rows["eager"]["checksum_hex"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--storm", required=True, help="path to the demo/storm binary")
    ap.add_argument("--libgraft", default=None, help="path to libgraft.so (needed for graft/passthrough/floor)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--out", default=None, help="raw results JSON")
    ap.add_argument("--variants", default=",".join(ALL_VARIANTS))
    ap.add_argument("--syncs", default="sync,nosync", help="sync,nosync or one of them")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per storm process")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="stop starting rounds once this many seconds would be exceeded (0: no limit)")
    ap.add_argument("--graft-env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for the preloaded runs (repeatable)")
    ap.add_argument("--workdir", default=None, help="where per-run JSON goes (default: temp dir)")
    ap.add_argument("--storm-arg", action="append", default=[], metavar="ARG",
                    help="extra argument for every storm run, e.g. --storm-arg=--stream --storm-arg=new")
    args = ap.parse_args()

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in ALL_VARIANTS]
    if bad:
        ap.error("unknown variant(s) %s; choose from %s" % (bad, ALL_VARIANTS))
    if "eager" not in variants:
        variants.insert(0, "eager")
    syncs = []
    for s in args.syncs.split(","):
        s = s.strip()
        if s not in ("sync", "nosync"):
            ap.error("--syncs takes sync and/or nosync")
        syncs.append(s == "sync")
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be >= 1")
    args.storm = os.path.abspath(args.storm)
    if not os.access(args.storm, os.X_OK):
        print("storm_bench: storm binary not found or not executable: %s" % args.storm)
        return 2
    needs_graft = any(v in GRAFT_MODES for v in variants)
    if needs_graft:
        if not args.libgraft or not os.path.isfile(args.libgraft):
            print("storm_bench: libgraft not found: %s (needed for %s)" % (
                args.libgraft, [v for v in variants if v in GRAFT_MODES]))
            return 2
        args.libgraft = os.path.abspath(args.libgraft)
    for kv in args.graft_env:
        if "=" not in kv:
            ap.error("--graft-env takes KEY=VALUE, got %r" % kv)

    workdir = args.workdir or tempfile.mkdtemp(prefix="storm_bench.")
    os.makedirs(workdir, exist_ok=True)

    # Probe: one eager run tells whether a device exists at all.
    probe = run_one(args, "eager", syncs[0], -1, workdir)
    if probe["rc"] == 77:
        lines = probe["output_tail"].strip().splitlines()
        print("storm_bench: skipped: %s" % (lines[-1] if lines else "storm exited 77 (no CUDA device)"))
        return 77
    if not probe["ok"]:
        print("storm_bench: probe run failed (rc=%s):\n%s" % (probe["rc"], probe["output_tail"]))

    runs = []
    t_start = time.monotonic()
    rounds_done = 0
    note = None
    for rnd in range(args.rounds):
        order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
        for sync in syncs:
            for v in order:
                rec = run_one(args, v, sync, rnd, workdir)
                runs.append(rec)
                status = "ok" if rec["ok"] else "FAILED rc=%s" % rec["rc"]
                us = get(rec, "result", "us_per_iter_median")
                print("  round %d %-6s %-12s %-14s us/iter=%s (%.1fs)" % (
                    rnd, "sync" if sync else "nosync", v, status, fmt(us), rec["wall_s"]), flush=True)
                if not rec["ok"]:
                    tail = rec["output_tail"].strip().splitlines()[-3:]
                    for line in tail:
                        print("      | " + line)
        rounds_done += 1
        elapsed = time.monotonic() - t_start
        per_round = elapsed / rounds_done
        if args.budget_s and rnd + 1 < args.rounds and elapsed + per_round > args.budget_s:
            note = "stopped after %d of %d rounds: time budget %.0fs" % (rounds_done, args.rounds, args.budget_s)
            print("storm_bench: " + note)
            break

    summary = {}
    print()
    print("=== RESULT ===")
    failed = False
    for sync in syncs:
        rows = summarize(runs, variants, sync)
        summary["sync" if sync else "nosync"] = rows
        print_table(rows, variants, sync, args, rounds_done)
        for v in variants:
            if rows[v]["ok"] < rows[v]["runs"]:
                failed = True
            if v in MUST_MATCH and rows[v]["check"] != "MATCH":
                failed = True
        print()
    if note:
        print("note: " + note)
    print("storm_bench: %s (%.0fs, raw JSON: %s)" % ("PASS" if not failed else "FAIL",
                                                     time.monotonic() - t_start, args.out or "-"))

    if args.out:
        d = os.path.dirname(os.path.abspath(args.out))
        os.makedirs(d, exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"tool": "storm_bench", "config": {k: v for k, v in vars(args).items()},
                       "rounds_done": rounds_done, "note": note, "probe": probe,
                       "summary": summary, "runs": runs}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
