"""Shared helpers for the GPU-tier drivers (check_losses, bench_torch, profile_count).

Runs tests/gpu/workloads.py as separate processes, eagerly or under graft
(LD_PRELOAD=libgraft GRAFT_MODE=... GRAFT_STATS=...), and reads their JSON, loss files
and graft's statistics JSON.  Python stdlib only.
"""

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# GPU_TIER_WORKLOADS replaces workloads.py (only for testing these drivers without a GPU).
WORKLOADS = os.environ.get("GPU_TIER_WORKLOADS") or os.path.join(HERE, "workloads.py")
TRAINING = os.path.join(HERE, "training")  # the cases, a script each


def workload_command(case):
    """The command that runs a case: its own script (training/CASE.py) where it has one,
    else workloads.py CASE (the same runner and options either way)."""
    own = os.path.join(TRAINING, case + ".py")
    if not os.environ.get("GPU_TIER_WORKLOADS") and os.path.isfile(own):
        return [sys.executable, own]
    return [sys.executable, WORKLOADS, case]
DEFAULT_LIBGRAFT = os.path.join(REPO, "build", "src", "libgraft.so")

# graft runs set these themselves; everything else GRAFT_* in the caller's environment
# (GRAFT_WARMUP, GRAFT_LOG_LEVEL, GRAFT_LOG_FILE, ...) is forwarded to graft runs only.
OWN_GRAFT_VARS = ("GRAFT_MODE", "GRAFT_STATS")


def clean_env():
    """The caller's environment without LD_PRELOAD and without GRAFT_* variables."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("GRAFT_"):
            del env[k]
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def graft_env(libgraft, mode, stats_path, extra=()):
    """Environment for a run under graft in GRAFT_MODE=mode."""
    env = clean_env()
    for k, v in os.environ.items():
        if k.startswith("GRAFT_") and k not in OWN_GRAFT_VARS:
            env[k] = v
    env["LD_PRELOAD"] = libgraft
    env["GRAFT_MODE"] = mode
    if stats_path:
        env["GRAFT_STATS"] = stats_path
    for kv in extra:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def get(d, *keys, default=None):
    """Nested lookup tolerant of missing keys and wrong types."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def fmt(v, spec="{:.2f}", none="-"):
    if v is None:
        return none
    try:
        return spec.format(v)
    except (ValueError, TypeError):
        return str(v)


def median(xs):
    xs = [x for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool)]
    return statistics.median(xs) if xs else None


def load_json(path):
    if not path:
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return {"_error": "unreadable JSON %s: %s" % (path, e)}


def rm_f(*paths):
    for p in paths:
        if p and os.path.exists(p):
            os.remove(p)


def run_workload(case, mode, steps, workdir, tag, env, timeout, warmup=None,
                 losses=True, extra_args=(), stats_path=None):
    """Runs a case once (workload_command). Returns a record (dict) with rc, result JSON,
    paths, stats."""
    os.makedirs(workdir, exist_ok=True)
    jpath = os.path.join(workdir, tag + ".json")
    lpath = os.path.join(workdir, tag + ".losses") if losses else None
    logpath = os.path.join(workdir, tag + ".log")
    rm_f(jpath, lpath, stats_path)
    cmd = workload_command(case) + ["--mode", mode, "--steps", str(steps), "--json", jpath]
    if warmup is not None:
        cmd += ["--warmup", str(warmup)]
    if lpath:
        cmd += ["--losses", lpath]
    cmd += list(extra_args)
    rec = {"case": case, "mode": mode, "tag": tag, "steps": steps, "cmd": cmd,
           "env": {k: env[k] for k in sorted(env) if k.startswith("GRAFT_") or k == "LD_PRELOAD"},
           "json": jpath, "losses": lpath, "log": logpath, "stats_path": stats_path}
    t0 = time.monotonic()
    out = ""
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, text=True, errors="replace")
        rec["rc"] = p.returncode
        out = p.stdout
    except subprocess.TimeoutExpired as e:
        rec["rc"] = "timeout"
        out = e.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
    except OSError as e:
        rec["rc"] = "oserror"
        out = str(e)
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    try:
        with open(logpath, "w") as f:
            f.write(out)
    except OSError:
        pass
    rec["output_tail"] = out[-3000:]
    rec["result"] = load_json(jpath)
    rec["stats"] = load_json(stats_path)
    rec["ok"] = (rec["rc"] == 0 and isinstance(rec["result"], dict) and "_error" not in rec["result"])
    return rec


def last_lines(text, n=3):
    return [l for l in (text or "").strip().splitlines()[-n:]]


def skipped(rec):
    return rec.get("rc") == 77


def read_lines(path):
    try:
        with open(path) as f:
            return [l.rstrip("\n") for l in f]
    except OSError:
        return None


def compare_losses(a_path, b_path):
    """Bitwise comparison of two loss files (one hex float32 per line)."""
    a, b = read_lines(a_path), read_lines(b_path)
    res = {"equal": False, "n_a": None if a is None else len(a), "n_b": None if b is None else len(b),
           "first_diff": None, "a": None, "b": None}
    if a is None or b is None:
        res["error"] = "missing loss file: %s" % (a_path if a is None else b_path)
        return res
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            res.update(first_diff=i, a=x, b=y)
            res["n_diff"] = sum(1 for u, v in zip(a, b) if u != v)
            return res
    if len(a) != len(b):
        res.update(first_diff=min(len(a), len(b)), error="lengths differ: %d vs %d" % (len(a), len(b)))
        return res
    if not a:
        res["error"] = "empty loss files"
        return res
    res["equal"] = True
    return res


def graft_summary(stats):
    """The replay figures of a GRAFT_STATS JSON (None where missing)."""
    fb = get(stats, "replay", "fallbacks", default=None)
    return {
        "present": isinstance(stats, dict) and "_error" not in stats,
        "mode": get(stats, "mode"),
        "ops_total": get(stats, "ops", "total"),
        "launch": get(stats, "ops", "by_class", "launch"),
        "coverage_pct": get(stats, "replay", "coverage_pct"),
        "replays": get(stats, "replay", "replays"),
        "graphs_built": get(stats, "replay", "graphs_built"),
        "patches_per_replay": get(stats, "replay", "patches_per_replay"),
        "first_replay_s": get(stats, "replay", "first_replay_s"),
        # Launches held on the fast lane, as a share of the ops graft saw.
        "fast_lane_pct": (100.0 * get(stats, "replay", "ops_fast_lane") / get(stats, "replay", "ops_total")
                          if get(stats, "replay", "ops_fast_lane") is not None and get(stats, "replay", "ops_total")
                          else None),
        "fallbacks": fb if isinstance(fb, dict) else {},
    }


def fmt_fallbacks(fb, top=4):
    if not fb:
        return "-"
    items = sorted(fb.items(), key=lambda kv: (-(kv[1] if isinstance(kv[1], (int, float)) else 0), kv[0]))
    s = ", ".join("%s=%s" % kv for kv in items[:top])
    if len(items) > top:
        s += ", +%d more" % (len(items) - top)
    return s


def table(headers, rows, widths=None):
    """Plain fixed-width table as a list of lines."""
    cols = len(headers)
    if widths is None:
        widths = [max(len(str(headers[i])), *(len(str(r[i])) for r in rows)) if rows else len(str(headers[i]))
                  for i in range(cols)]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for r in rows:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    return out


def check_libgraft(path):
    if not path or not os.path.isfile(path):
        return "libgraft not found: %s (build it, or pass --libgraft)" % path
    return None
