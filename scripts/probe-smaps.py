#!/usr/bin/env python3
# How long reading /proc/self/smaps takes in a PyTorch process that trained a
# little (graft's exit report reads it to count huge pages; docs/PERF.md,
# thirty-third session):  python3 scripts/probe-smaps.py
import time, torch, sys
x = torch.ones(1, device='cuda')
m = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).cuda()
opt = torch.optim.AdamW(m.parameters())
for _ in range(20):
    loss = m(torch.randn(64, 512, device='cuda')).square().mean(); loss.backward(); opt.step(); opt.zero_grad()
torch.cuda.synchronize()
t = time.perf_counter(); n = sum(1 for _ in open('/proc/self/smaps')); t1 = time.perf_counter() - t
t = time.perf_counter(); k = sum(1 for _ in open('/proc/self/maps')); t2 = time.perf_counter() - t
print("smaps: %d lines in %.2f ms; maps: %d mappings in %.2f ms" % (n, t1 * 1e3, k, t2 * 1e3))
