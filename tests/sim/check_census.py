#!/usr/bin/env python3
"""check_census.py - compare what a census program issued with graft's exit report.

The census program (sim_census / sim_direct) prints every driver call it made by
base name and every launch by kernel. graft, run in pass-through mode with
GRAFT_STATS=<file>, writes a report with

  "ops": {"total": N, "by_class": {"launch": n, "copy": n, ...}}
  "kernels_top": [{"name": "...", "count": n}, ...]

CLASS_OF below is the one place (on the test side) that decides which driver
function counts in which class; it follows the semantic classes of graft's driver
table (src/hook/driver_api.def). Functions not listed (init, context, creation,
graph build and patch, lookups) are not counted. The checks:
  - by_class[c] == sum of the program's calls in class c, for every class;
  - total == sum over all classes;
  - every kernels_top entry naming a program kernel has exactly its launch count;
    no named kernel with a larger count than the smallest listed one is missing
    (opaque kernels have no name graft can learn and are not required).

Usage:
  check_census.py run --exe PROG --libdir DIR --preload LIB [--workdir D]
  check_census.py compare --census C.json --report R.json
  check_census.py selftest --exe PROG --libdir DIR   (no graft: checks the checker)
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

CLASSES = ["launch", "copy", "set", "event_record", "stream_wait", "barrier", "query", "alloc",
           "free", "host_func", "capture", "graph_launch", "stream_ordered", "lifecycle", "setting",
           "driver_log"]

_C = {
    "launch": ["cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel"],
    "copy": ["cuMemcpy", "cuMemcpyAsync", "cuMemcpyHtoD", "cuMemcpyHtoDAsync", "cuMemcpyDtoH",
             "cuMemcpyDtoHAsync", "cuMemcpyDtoD", "cuMemcpyDtoDAsync", "cuMemcpy2D", "cuMemcpy2DAsync",
             "cuMemcpy2DUnaligned", "cuMemcpy3D", "cuMemcpy3DAsync", "cuMemcpyPeer", "cuMemcpyPeerAsync",
             "cuMemcpy3DPeer", "cuMemcpy3DPeerAsync", "cuMemcpyBatchAsync", "cuMemcpy3DBatchAsync",
             "cuMemcpyAtoA", "cuMemcpyAtoD", "cuMemcpyAtoH", "cuMemcpyAtoHAsync", "cuMemcpyDtoA",
             "cuMemcpyHtoA", "cuMemcpyHtoAAsync"],
    "set": ["cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "cuMemsetD8Async", "cuMemsetD16Async",
            "cuMemsetD32Async", "cuMemsetD2D8", "cuMemsetD2D16", "cuMemsetD2D32",
            "cuMemsetD2D8Async", "cuMemsetD2D16Async", "cuMemsetD2D32Async"],
    "event_record": ["cuEventRecord", "cuEventRecordWithFlags"],
    "stream_wait": ["cuStreamWaitEvent"],
    # cuEventElapsedTime observes completed GPU work, so it counts as a barrier.
    # So do limits that launches change or depend on (cuCtxGetLimit, cuCtxSetLimit).
    "barrier": ["cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize", "cuEventElapsedTime",
                "cuCtxGetLimit", "cuCtxSetLimit"],
    "query": ["cuStreamQuery", "cuEventQuery"],
    "alloc": ["cuMemAlloc", "cuMemAllocAsync", "cuMemAllocFromPoolAsync", "cuMemAllocHost", "cuMemHostAlloc",
              "cuMemAllocPitch", "cuMemAllocManaged", "cuMemHostRegister"],
    "free": ["cuMemFree", "cuMemFreeAsync", "cuMemFreeHost", "cuMemHostUnregister", "cuMemUnmap"],
    "host_func": ["cuLaunchHostFunc", "cuStreamAddCallback"],
    "capture": ["cuStreamBeginCapture", "cuStreamBeginCaptureToGraph", "cuStreamEndCapture",
                "cuStreamIsCapturing", "cuStreamGetCaptureInfo", "cuStreamUpdateCaptureDependencies"],
    "graph_launch": ["cuGraphLaunch", "cuGraphUpload"],
    "stream_ordered": ["cuMemPrefetchAsync", "cuMemPrefetchBatchAsync", "cuMemDiscardBatchAsync",
                       "cuMemDiscardAndPrefetchBatchAsync", "cuStreamWriteValue32", "cuStreamWriteValue64",
                       "cuStreamWaitValue32", "cuStreamWaitValue64", "cuStreamBatchMemOp",
                       "cuSignalExternalSemaphoresAsync", "cuWaitExternalSemaphoresAsync",
                       "cuGraphicsMapResources", "cuGraphicsUnmapResources", "cuMemMapArrayAsync",
                       "cuStreamAttachMemAsync", "cuMemBatchDecompressAsync", "cuLaunch", "cuLaunchGrid",
                       "cuLaunchGridAsync"],
    "lifecycle": ["cuStreamCreate", "cuStreamCreateWithPriority", "cuStreamDestroy", "cuEventCreate", "cuEventDestroy", "cuCtxDestroy",
                  "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset", "cuModuleUnload", "cuLibraryUnload"],
    "setting": ["cuFuncSetAttribute", "cuKernelSetAttribute"],
    "driver_log": ["cuLogsRegisterCallback", "cuLogsCurrent", "cuLogsDumpToMemory", "cuLogsDumpToFile"],
}
CLASS_OF = {fn: cls for cls, fns in _C.items() for fn in fns}


def expected_classes(census):
    by_class = {c: 0 for c in CLASSES}
    for fn, n in census["calls"].items():
        cls = CLASS_OF.get(fn)
        if cls:
            by_class[cls] += n
    return by_class


def compare(census, report):
    """Returns a list of human-readable mismatches (empty: pass)."""
    errors = []
    if census.get("errors"):
        errors.append("the census program itself saw %d failing calls" % census["errors"])
    ops = report.get("ops")
    if not isinstance(ops, dict) or not isinstance(ops.get("by_class"), dict):
        return errors + ["report has no ops.by_class"]
    want = expected_classes(census)
    got = ops["by_class"]
    for cls in CLASSES:
        if got.get(cls, 0) != want[cls]:
            members = {fn: n for fn, n in census["calls"].items() if CLASS_OF.get(fn) == cls}
            errors.append("class %-14s graft counted %d, program issued %d %s"
                          % (cls, got.get(cls, 0), want[cls], members))
    for cls in got:
        if cls not in want:
            errors.append("report has unknown class %r" % cls)
    if ops.get("total") != sum(want.values()):
        errors.append("ops.total %r != %d" % (ops.get("total"), sum(want.values())))
    named = {k["name"]: k["count"] for k in census["kernels"] if k["family"] != "opaque"}
    top = report.get("kernels_top")
    if not isinstance(top, list):
        return errors + ["report has no kernels_top list"]
    listed = {}
    for entry in top:
        name, count = entry.get("name"), entry.get("count")
        listed[name] = count
        if name in named and named[name] != count:
            errors.append("kernel %s: graft counted %r launches, program issued %d" % (name, count, named[name]))
    counts = [e.get("count", 0) for e in top]
    if counts != sorted(counts, reverse=True):
        errors.append("kernels_top is not sorted by count: %s" % counts)
    if top:
        floor = min(counts)
        for name, n in named.items():
            if name not in listed and n > floor:
                errors.append("kernel %s (%d launches) missing from kernels_top (smallest listed: %d)"
                              % (name, n, floor))
    elif named:
        errors.append("kernels_top is empty")
    return errors


def synthetic_report(census):
    """The report a perfect pass-through graft would write for `census`."""
    by_class = expected_classes(census)
    kernels = sorted(({"name": k["name"], "count": k["count"]} for k in census["kernels"]
                      if k["family"] != "opaque"), key=lambda k: -k["count"])
    return {"ops": {"total": sum(by_class.values()), "by_class": by_class}, "kernels_top": kernels}


def run_program(exe, libdir, workdir, preload=None):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    census_path = os.path.join(workdir, "census.json")
    report_path = os.path.join(workdir, "report.json")
    if preload:
        env["LD_PRELOAD"] = preload
        env["GRAFT_MODE"] = "passthrough"
        env["GRAFT_STATS"] = report_path
    proc = subprocess.run([exe, "--out", census_path], env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit("%s exited with %d" % (exe, proc.returncode))
    with open(census_path) as f:
        census = json.load(f)
    report = None
    if preload:
        if not os.path.exists(report_path):
            raise SystemExit("graft wrote no report at %s (GRAFT_STATS)" % report_path)
        with open(report_path) as f:
            report = json.load(f)
    return census, report


def print_result(errors, label):
    if errors:
        print("%s: %d mismatch(es) between the program's census and graft's report:" % (label, len(errors)))
        for e in errors:
            print("  " + e)
        return 1
    print("%s: census matches" % label)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--exe", required=True)
    r.add_argument("--libdir", required=True)
    r.add_argument("--preload", required=True)
    r.add_argument("--workdir")
    c = sub.add_parser("compare")
    c.add_argument("--census", required=True)
    c.add_argument("--report", required=True)
    s = sub.add_parser("selftest")
    s.add_argument("--exe", required=True)
    s.add_argument("--libdir", required=True)
    args = ap.parse_args()

    if args.cmd == "compare":
        with open(args.census) as f:
            census = json.load(f)
        with open(args.report) as f:
            report = json.load(f)
        return print_result(compare(census, report), os.path.basename(args.census))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = getattr(args, "workdir", None) or tmp
        os.makedirs(workdir, exist_ok=True)
        label = os.path.basename(args.exe)
        if args.cmd == "run":
            census, report = run_program(args.exe, args.libdir, workdir, args.preload)
            return print_result(compare(census, report), label)
        census, _ = run_program(args.exe, args.libdir, workdir)
        good = synthetic_report(census)
        if compare(census, good):
            return print_result(compare(census, good), label + " (synthetic report)")
        bad = []
        r1 = copy.deepcopy(good)
        r1["ops"]["by_class"]["launch"] -= 1
        bad.append(("one launch missing", r1))
        r2 = copy.deepcopy(good)
        r2["ops"]["by_class"]["barrier"] += 1
        r2["ops"]["total"] += 1
        bad.append(("one barrier too many", r2))
        r3 = copy.deepcopy(good)
        r3["kernels_top"][0]["count"] += 1
        bad.append(("kernel count off", r3))
        r4 = copy.deepcopy(good)
        r4["kernels_top"] = r4["kernels_top"][1:]
        bad.append(("top kernel missing", r4))
        for what, rep in bad:
            if not compare(census, rep):
                print("%s: checker accepted a report with %s" % (label, what))
                return 1
        print("%s: checker accepts the exact report and rejects %d perturbed ones" % (label, len(bad)))
        return 0


if __name__ == "__main__":
    sys.exit(main())
