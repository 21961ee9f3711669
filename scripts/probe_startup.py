#!/usr/bin/env python3
# A short PyTorch program that prints, on its last line, the milliseconds
# since its process started at each stage (scripts/probe-startup.sh).
import os, time
def since_start():
    # Field 22 of /proc/self/stat: start time in clock ticks since boot.
    with open("/proc/self/stat") as f: start = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f: up = float(f.read().split()[0])
    return (up - start / os.sysconf("SC_CLK_TCK")) * 1e3
t_py = time.perf_counter(); base = since_start()
def at(): return base + (time.perf_counter() - t_py) * 1e3
marks = {"python": at()}
import torch
marks["import"] = at()
torch.cuda.init(); torch.cuda.current_device()
marks["cuda_init"] = at()
x = torch.ones(1, device="cuda")
marks["first_tensor"] = at()
y = torch.nn.functional.linear(torch.randn(64, 256, device="cuda"), torch.randn(128, 256, device="cuda"))
marks["first_matmul"] = at()
v = (x * 2).sum().item() + y.sum().item()
marks["item"] = at()
print(" ".join("%s=%.1f" % kv for kv in marks.items()))
