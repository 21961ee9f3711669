#!/usr/bin/env python3
"""Issue 4, case 6: epochs whose last batch is smaller (a shape change), with an eval
pass every 25 steps.

  python3 tests/gpu/training/lastbatch.py --steps N [--warmup W] [--mode eager]
                                        [--losses FILE] [--json FILE]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/gpu

from training.common import F, MLP, run_case, tensor_hexes, torch
from training.mlp import ClassifierWorkload


class LastBatchWorkload(ClassifierWorkload):
    """Epochs over a pinned CPU dataset whose last batch is smaller (a shape change),
    copied with non_blocking=True every step; an eval pass (model.eval(), no_grad) every
    eval_every steps."""

    nsamples = 1000     # 15 batches of 64 and one of 40
    eval_every = 25
    neval = 256

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=4, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        g = torch.Generator().manual_seed(987)
        self.X = torch.randn(self.nsamples, self.din, generator=g).pin_memory()
        self.Y = torch.randint(0, self.nout, (self.nsamples,), generator=g).pin_memory()
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = torch.randint(0, self.nout, (self.neval,), device=self.dev, generator=self.gen)
        nb = (self.nsamples + self.batch - 1) // self.batch
        self.bounds = [(k * self.batch, min(self.nsamples, (k + 1) * self.batch)) for k in range(nb)]
        self.eval_buf = torch.zeros(self.steps // self.eval_every + 1, dtype=torch.float32, device=self.dev)
        self.eval_steps = []

    def step(self, i):
        lo, hi = self.bounds[i % len(self.bounds)]
        x = self.X[lo:hi].to(self.dev, non_blocking=True)
        y = self.Y[lo:hi].to(self.dev, non_blocking=True)
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        if (i + 1) % self.eval_every == 0:
            self.model.eval()
            with torch.no_grad():
                el = F.cross_entropy(self.model(self.Xe), self.Ye)
                self.eval_buf[len(self.eval_steps)].copy_(el)
            self.eval_steps.append(i)
            self.model.train()
        return loss

    def loss_lines(self):
        if self.eval_steps:
            ev = tensor_hexes(self.eval_buf[:len(self.eval_steps)])
            for s, h in zip(self.eval_steps, ev):
                self.extra[s] = "eval=" + h
        return super().loss_lines()


if __name__ == "__main__":
    sys.exit(run_case("lastbatch", LastBatchWorkload))
