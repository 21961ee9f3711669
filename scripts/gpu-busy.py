#!/usr/bin/env python3
"""GPU busy time per step from a torch.profiler chrome trace (workloads.py
--profile-json F --keep-trace writes F.trace.json): the union of the device's
kernel, memcpy and memset intervals, and their plain sum, divided by STEPS.
  scripts/gpu-busy.py TRACE STEPS"""
import json
import sys

trace, steps = sys.argv[1], int(sys.argv[2])
events = json.load(open(trace))
events = events.get("traceEvents", events)
iv = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
busy, total, end = 0.0, 0.0, None
start = iv[0][0] if iv else 0
for a, b in iv:
    total += b - a
    if end is None or a > end:
        busy += b - a
        end = b
    elif b > end:
        busy += b - end
        end = b
span = (end - start) if iv else 0
print(f"device intervals {len(iv)}; per step: busy (union) {busy / steps / 1000:.3f} ms, "
      f"sum {total / steps / 1000:.3f} ms, first to last {span / steps / 1000:.3f} ms")
