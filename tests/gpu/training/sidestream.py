#!/usr/bin/env python3
"""Issue 4, case 5: work on a side torch.cuda.Stream joined with wait_stream, and backward
on the autograd engine's own thread.

  python3 tests/gpu/training/sidestream.py --steps N [--warmup W] [--mode eager]
                                        [--losses FILE] [--json FILE]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/gpu

from training.common import F, run_case, torch
from training.mlp import ClassifierWorkload


class SideStreamWorkload(ClassifierWorkload):
    """Each step copies a pinned CPU batch to the GPU and normalises it on a side stream;
    the main stream joins with wait_stream and the tensors are record_stream()ed.
    Backward runs on the autograd engine's device thread (the default)."""

    nbatches = 16

    def setup(self, mode="eager"):
        super().setup()
        g = torch.Generator().manual_seed(4321)
        self.xs = torch.randn(self.nbatches, self.batch, self.din, generator=g).pin_memory()
        self.ys = torch.randint(0, self.nout, (self.nbatches, self.batch), generator=g).pin_memory()
        self.side = torch.cuda.Stream()

    def step(self, i):
        main = torch.cuda.current_stream()
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            xr = self.xs[i % self.nbatches].to(self.dev, non_blocking=True)
            y = self.ys[i % self.nbatches].to(self.dev, non_blocking=True)
            x = (xr - xr.mean(dim=0, keepdim=True)) / (xr.std(dim=0, keepdim=True) + 1e-5)
        main.wait_stream(self.side)
        for t in (xr, x, y):
            t.record_stream(main)
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss


if __name__ == "__main__":
    sys.exit(run_case("sidestream", SideStreamWorkload))
