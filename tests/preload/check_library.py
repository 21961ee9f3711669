#!/usr/bin/env python3
"""Checks the shape of libgraft.so and of the checkout (preload tier).

  check_library.py exports LIBGRAFT API_TABLE_TOOL
      libgraft.so needs only glibc and the C++ runtime (no libcuda, spdlog or
      fmt) and exports exactly dlsym, the benchmark-only graft_bench_set_mode and the table's intercepted symbols.
  check_library.py readme README OPTIONS_TOOL REASONS_TOOL
      README.md's options table equals the one generated from options.def, and
      its table of eager reasons the one generated from core/op.h.
  check_library.py core-no-cuda SRC_CORE
      no file in src/core includes a CUDA or NCCL header.
  check_library.py static-init LIBGRAFT
      libgraft.so has no global needing code at load (a C++ dynamic
      initializer): a library the program links may reach graft from its own
      constructor, which the loader runs before graft's (sim_early_lookups).
  check_library.py hot-text LIBGRAFT FAKE_CUDA_DIR PROGRAM
      with GRAFT_HOT_TEXT=1 a program under libgraft.so runs, and graft's code
      is moved onto a huge page, or is refused only for what the machine lacks
      (huge pages, executable anonymous memory), never for libgraft's own layout; without the
      option nothing is moved.
  check_library.py op-cost-replays LIBGRAFT NULL_CUDA_DIR OP_COST
      bench/op_cost under graft against the null driver replays graphs (it
      times the fast lane; a null driver graft cannot capture with made it
      time the eager path unnoticed).
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ALLOWED_NEEDED = {"libc.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libm.so.6",
                  "ld-linux-x86-64.so.2", "libdl.so.2", "libpthread.so.0"}


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def check_exports(lib, tool):
    failures = []
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", lib)))
    extra = needed - ALLOWED_NEEDED
    if extra:
        failures.append(f"libgraft.so needs more than glibc and the C++ runtime: {sorted(extra)}")
    exported = set()
    for line in run("nm", "-D", "--defined-only", lib).splitlines():
        parts = line.split()
        if len(parts) == 3:
            exported.add(parts[2].split("@")[0])
    want = set(run(tool, "--exports").split()) | {"dlsym", "graft_bench_set_mode"}
    if exported - want:
        failures.append(f"exports symbols outside the table: {sorted(exported - want)[:20]}")
    if want - exported:
        failures.append(f"table symbols not exported: {sorted(want - exported)[:20]}")
    return failures, f"{len(exported)} exported symbols, NEEDED {sorted(needed)}"


def check_readme(readme, options_tool, reasons_tool):
    text = pathlib.Path(readme).read_text()
    failures = []
    for name, tool, source in (("options", options_tool, "options.def"), ("reasons", reasons_tool, "core/op.h")):
        m = re.search(r"<!-- %s:begin -->\n(.*?)<!-- %s:end -->" % (name, name), text, re.S)
        if not m:
            failures.append(f"README.md has no <!-- {name}:begin --> ... <!-- {name}:end --> section")
        elif m.group(1).strip() != run(tool, "--markdown").strip():
            failures.append(f"README.md's {name} table differs from {source}; run scripts/update-readme")
    return failures, "README options and reasons tables match their sources"


def check_core(core_dir):
    bad = []
    for f in pathlib.Path(core_dir).rglob("*"):
        if f.suffix in (".h", ".cc", ".cpp", ".hpp") and re.search(
                r'#\s*include\s*[<"](cuda|nccl)', f.read_text()):
            bad.append(str(f))
    return ([f"core includes CUDA/NCCL headers: {bad}"] if bad else []), "core is CUDA-free"


def check_hot_text(lib, simdir, program):
    failures = []
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        for setting in ("1", None):
            env = dict(os.environ, LD_LIBRARY_PATH=simdir, LD_PRELOAD=lib, GRAFT_LOG_LEVEL="warn",
                       GRAFT_STATS=f"{tmp}/report.json")
            env.pop("GRAFT_HOT_TEXT", None)
            if setting:
                env["GRAFT_HOT_TEXT"] = setting
            p = subprocess.run([program], env=env, capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                failures.append(f"GRAFT_HOT_TEXT={setting}: the program exited {p.returncode}: {p.stderr[-500:]}")
                continue
            reports[setting] = json.loads(pathlib.Path(f"{tmp}/report.json").read_text())
    info = ""
    if "1" in reports:
        hot = reports["1"].get("hot_text")
        if hot is None:
            failures.append("GRAFT_HOT_TEXT=1: the report has no hot_text entry")
        elif not hot["on_huge_page"]:
            why = hot["why_not"]
            machine_lacks = ("transparent huge pages", "no huge page", "executable anonymous memory")
            if not any(m in why for m in machine_lacks):
                failures.append(f"GRAFT_HOT_TEXT=1: graft's code was not moved: {why}")
            info = f"not moved on this machine ({why})"
        else:
            info = "moved onto a huge page"
    if None in reports and "hot_text" in reports[None]:
        failures.append("without GRAFT_HOT_TEXT the report says graft's code was moved or tried")
    return failures, f"GRAFT_HOT_TEXT=1: {info}"


def check_op_cost_replays(lib, nulldir, program):
    """bench/op_cost times graft's fast lane only while its launches replay:
    against the null driver, graft must build graphs and carry nearly all ops."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LD_LIBRARY_PATH=nulldir, LD_PRELOAD=lib, GRAFT_LOG_LEVEL="warn",
                   GRAFT_MODE="graph", GRAFT_STATS=f"{tmp}/report.json")
        p = subprocess.run([program, "200", "200", "--vary", "--distinct"], env=env, capture_output=True,
                           text=True, timeout=120)
        if p.returncode != 0:
            return [f"op_cost exited {p.returncode}: {p.stderr[-500:]}"], ""
        report = json.loads(pathlib.Path(f"{tmp}/report.json").read_text())
    replay = report["replay"]
    share = replay["ops_via_graph"] / max(1, replay["ops_total"])
    fast = replay["ops_fast_lane"] / max(1, replay["ops_total"])
    failures = []
    if replay["graphs_built"] == 0 or share < 0.95 or fast < 0.5:
        failures.append(f"op_cost under graft: {replay['graphs_built']} graphs built, {100 * share:.1f} % "
                        f"through graphs, {100 * fast:.1f} % on the fast lane (the benchmark would time "
                        f"another path than the fast lane)")
    return failures, (f"{replay['graphs_built']} graphs, {100 * share:.1f} % through graphs, "
                      f"{100 * fast:.1f} % on the fast lane")


def check_static_init(lib):
    symbols = {}
    for line in run("nm", lib).splitlines():
        parts = line.split()
        if len(parts) == 3:
            symbols.setdefault(int(parts[0], 16), []).append(parts[2])
    if not symbols:
        return ["libgraft.so has no symbol table (stripped?): cannot check its initializers"], ""
    failures = []
    inits = [n for names in symbols.values() for n in names if "_GLOBAL__sub_I" in n]
    if inits:
        failures.append(f"dynamic initializers (globals constructed by code at load): {inits}")
    # Every .init_array entry: the toolchain's frame_dummy or graft's own graftLoad.
    dump = run("readelf", "-x", ".init_array", lib)
    words = "".join("".join(l.split()[1:5]) for l in dump.splitlines() if l.strip().startswith("0x"))
    entries = [int.from_bytes(bytes.fromhex(words[i:i + 16]), "little") for i in range(0, len(words) - 15, 16)]
    for e in entries:
        names = symbols.get(e, ["(unnamed)"])
        if not any(n == "frame_dummy" or "graftLoad" in n for n in names):
            failures.append(f".init_array runs {names} at load")
    return failures, f"no dynamic initializer; .init_array: {len(entries)} entries (frame_dummy, graftLoad)"


def main():
    what = sys.argv[1]
    checks = {"exports": check_exports, "readme": check_readme, "core-no-cuda": check_core,
              "hot-text": check_hot_text, "static-init": check_static_init,
              "op-cost-replays": check_op_cost_replays}
    failures, info = checks[what](*sys.argv[2:])
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok:", info)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
