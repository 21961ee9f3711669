#!/usr/bin/env python3
"""libtorch C++ programs under graft (tests/gpu/libtorch_train.cpp), gpu tier.

Builds libtorch_train against the libtorch that the installed torch wheel
ships (its headers and libraries; g++ or $CXX), unless --bin names a built one.
Then, per case: an eager run and a run under graft (GRAFT_MODE=graph) write
one float32 hex per step; the files must be identical (if they differ, eager
runs again to tell a graft bug from a nondeterministic case). With --rounds R,
R more rounds time eager, graft and the launch-free floor (GRAFT_MODE=swallow,
results discarded), one process each, interleaved. A table is printed last.

  check_libtorch.py --libgraft LIB [--bin BIN | --build-dir DIR] [--cases a,b]
                    [--steps 300] [--warmup 30] [--rounds 0] [--out DIR]

Exit: 0 every case equal, 1 otherwise, 2 usage or build failure, 77 no torch,
no C++ compiler or no GPU.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "libtorch_train.cpp")

# What the build needs to know about the installed torch, asked of python.
TORCH_PROBE = r"""
import json, os, torch, torch.utils.cpp_extension as ext
try:
    inc = ext.include_paths(device_type="cuda")
except TypeError:
    inc = ext.include_paths(cuda=True)
print(json.dumps({"include": inc, "lib": os.path.join(os.path.dirname(torch.__file__), "lib"),
                  "cuda_home": ext.CUDA_HOME, "abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
                  "cuda": torch.cuda.is_available(), "version": torch.__version__}))
"""


def probe_torch():
    try:
        p = subprocess.run([sys.executable, "-c", TORCH_PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["torch not importable"])[-1]
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def build(torch_info, build_dir):
    """Compiles SOURCE into build_dir (skipped when the binary is newer). Returns (path, error)."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        return None, "no C++ compiler (g++ or $CXX)"
    os.makedirs(build_dir, exist_ok=True)
    binary = os.path.join(build_dir, "libtorch_train")
    if os.path.exists(binary) and os.path.getmtime(binary) >= os.path.getmtime(SOURCE):
        return binary, None
    lib = torch_info["lib"]
    cuda_lib = [os.path.join(torch_info["cuda_home"], d) for d in ("lib64", "lib")] if torch_info["cuda_home"] else []
    cuda_lib = [d for d in cuda_lib if os.path.isdir(d)]
    cmd = [cxx, "-std=c++17", "-O2", "-D_GLIBCXX_USE_CXX11_ABI=%d" % torch_info["abi"], SOURCE, "-o", binary]
    cmd += ["-I" + d for d in torch_info["include"]]
    if torch_info["cuda_home"]:
        cmd.append("-I" + os.path.join(torch_info["cuda_home"], "include"))
    cmd += ["-L" + lib, "-Wl,-rpath," + lib] + ["-L" + d for d in cuda_lib] + ["-Wl,-rpath," + d for d in cuda_lib]
    # torch_cuda registers the CUDA backend from its constructors: linked even
    # though nothing here names its symbols.
    cmd += ["-Wl,--no-as-needed", "-ltorch", "-ltorch_cuda", "-ltorch_cpu", "-lc10_cuda", "-lc10", "-Wl,--as-needed",
            "-lcudart", "-lpthread"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return None, "build failed (%s):\n%s" % (" ".join(cmd), "\n".join(p.stdout.splitlines()[-25:]))
    print("check_libtorch: built %s in %.0f s" % (binary, time.monotonic() - t0), flush=True)
    return binary, None


def run(binary, case, tag, env, args, out, losses=True):
    jpath = os.path.join(out, tag + ".json")
    lpath = os.path.join(out, tag + ".losses") if losses else None
    H.rm_f(jpath, lpath)
    cmd = [binary, case, "--steps", str(args.steps), "--warmup", str(args.warmup), "--json", jpath]
    if lpath:
        cmd += ["--losses", lpath]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", timeout=args.timeout)
        rc, text = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, text = "timeout", (e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or "")
    with open(os.path.join(out, tag + ".log"), "w") as f:
        f.write(text)
    res = H.load_json(jpath)
    ms = res.get("ms_per_step") if isinstance(res, dict) else None
    return {"rc": rc, "ms": ms, "losses": lpath, "wall": time.monotonic() - t0, "tail": H.last_lines(text, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libgraft", default=H.DEFAULT_LIBGRAFT)
    ap.add_argument("--bin", default=None, help="a built libtorch_train (default: build it)")
    ap.add_argument("--build-dir", default=None, help="where to build libtorch_train (default: OUT)")
    ap.add_argument("--cases", default=None, help="default: every case (libtorch_train --list)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=0, help="timing rounds of eager, graft and floor after the check")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per process")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="check_libtorch."))
    os.makedirs(out, exist_ok=True)

    binary = os.path.abspath(args.bin) if args.bin else None
    if not binary:
        info, err = probe_torch()
        if info is None:
            print("check_libtorch: skipped: torch not importable (%s)" % err)
            return 77
        if not info["cuda"]:
            print("check_libtorch: skipped: torch sees no CUDA device")
            return 77
        binary, err = build(info, os.path.abspath(args.build_dir or out))
        if binary is None:
            print("check_libtorch: " + err)
            return 77 if err.startswith("no C++ compiler") else 2
    lib_err = H.check_libgraft(os.path.abspath(args.libgraft) if args.libgraft else None)
    if lib_err:
        print("check_libtorch: " + lib_err)
        return 2
    libgraft = os.path.abspath(args.libgraft)
    listed = subprocess.run([binary, "--list"], stdout=subprocess.PIPE, text=True, env=H.clean_env())
    known = listed.stdout.split()
    cases = [c for c in (args.cases.split(",") if args.cases else known) if c]
    bad = [c for c in cases if c not in known]
    if listed.returncode != 0 or bad:
        print("check_libtorch: unknown case(s) %s; the program lists %s" % (bad, known))
        return 2

    rows, failed, timing = [], [], {}
    for case in cases:
        eager = run(binary, case, case + ".eager", H.clean_env(), args, out)
        if eager["rc"] == 77:
            print("check_libtorch: skipped: no CUDA device")
            return 77
        spath = os.path.join(out, case + ".graft.stats.json")
        H.rm_f(spath)
        graft = run(binary, case, case + ".graft", H.graft_env(libgraft, "graph", spath), args, out)
        cmp = H.compare_losses(eager["losses"], graft["losses"])
        if eager["rc"] != 0:
            verdict = "EAGER-FAIL(%s)" % eager["rc"]
        elif graft["rc"] != 0:
            verdict = "GRAFT-RC-%s" % graft["rc"]
        elif cmp["equal"]:
            verdict = "EQUAL"
        else:
            again = run(binary, case, case + ".eager2", H.clean_env(), args, out)
            verdict = "EAGER-NONDET" if not H.compare_losses(eager["losses"], again["losses"])["equal"] else "DIFFERS"
            print("check_libtorch: %s %s: first differing step %s (eager %s, graft %s) %s" % (
                case, verdict, cmp.get("first_diff"), cmp.get("a"), cmp.get("b"), cmp.get("error", "")))
        if verdict != "EQUAL":
            failed.append(case)
            for tag, r in (("eager", eager), ("graft", graft)):
                if r["rc"] != 0:
                    print("check_libtorch: %s %s rc %s: %s" % (case, tag, r["rc"], " | ".join(r["tail"])))
        s = H.graft_summary(H.load_json(spath))
        timing[case] = {"eager": [eager["ms"]], "graft": [graft["ms"]], "floor": []}
        print("check_libtorch: %-10s %-12s eager %s ms/step, graft %s ms/step, coverage %s %%" % (
            case, verdict, H.fmt(eager["ms"], "{:.3f}"), H.fmt(graft["ms"], "{:.3f}"),
            H.fmt(s["coverage_pct"], "{:.1f}")), flush=True)
        rows.append([case, verdict, str(cmp.get("n_a")), H.fmt(s["coverage_pct"], "{:.1f}"), H.fmt(s["replays"], "{}"),
                     H.fmt(s["graphs_built"], "{}"), H.fmt(s["patches_per_replay"], "{:.1f}"),
                     H.fmt(s["first_replay_s"], "{:.2f}"), H.fmt_fallbacks(s["fallbacks"], top=3)])

    for r in range(args.rounds):
        for case in cases:
            if case in failed:
                continue
            for mode in ("eager", "graft", "floor"):
                env = H.clean_env() if mode == "eager" else H.graft_env(
                    libgraft, "graph" if mode == "graft" else "swallow", None)
                res = run(binary, case, "%s.r%d.%s" % (case, r, mode), env, args, out, losses=False)
                timing[case][mode].append(res["ms"] if res["rc"] == 0 else None)

    print("=== RESULT ===")
    print("check_libtorch: %s, %d steps after %d warm-up, eager vs LD_PRELOAD=libgraft GRAFT_MODE=graph" % (
        os.path.basename(binary), args.steps, args.warmup))
    print("\n".join(H.table(["case", "losses", "values", "cover%", "replays", "graphs", "patches/replay",
                             "1st replay s", "fallbacks"], rows)))
    print()
    trows = []
    for case in cases:
        t = timing[case]
        med = {m: H.median([x for x in t[m] if x is not None]) if any(x is not None for x in t[m]) else None
               for m in t}
        gap = None
        if med["floor"] is not None and med["eager"] and med["graft"] and med["eager"] > med["floor"]:
            gap = 100.0 * (med["eager"] - med["graft"]) / (med["eager"] - med["floor"])
        trows.append([case, "%d" % len([x for x in t["eager"] if x is not None]), H.fmt(med["eager"], "{:.3f}"),
                      H.fmt(med["graft"], "{:.3f}"), H.fmt(med["floor"], "{:.3f}"),
                      H.fmt(med["eager"] / med["graft"] if med["eager"] and med["graft"] else None, "{:.2f}x"),
                      H.fmt(med["eager"] / med["floor"] if med["eager"] and med["floor"] else None, "{:.2f}x"),
                      H.fmt(gap, "{:.0f} %")])
    print("ms/step, median of the check run and %d timing rounds (floor: timing rounds only)" % args.rounds)
    print("\n".join(H.table(["case", "runs", "eager", "graft", "floor", "eager/graft", "eager/floor", "gap removed"],
                            trows)))
    if failed:
        print("check_libtorch: FAIL: %d of %d cases: %s (logs in %s)" % (len(failed), len(cases), ", ".join(failed), out))
        return 1
    print("check_libtorch: PASS: %d/%d cases bitwise equal to eager (logs in %s)" % (len(cases), len(cases), out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
