#!/usr/bin/env python3
"""Issue 4's GPU-bound case: large bf16 matmuls, few kernels a step.

  python3 tests/gpu/training/gemm.py --steps N [--warmup W] [--mode eager|compile]
                                        [--losses FILE] [--json FILE]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/gpu

from training.common import nn, run_case, torch
from training.mlp import ClassifierWorkload


class GemmWorkload(ClassifierWorkload):
    """GPU-bound: two 4096x4096 bf16 layers on a 4096-row batch; 6 large GEMMs a step."""

    n = 4096

    def setup(self, mode="eager"):
        self.model = nn.Sequential(nn.Linear(self.n, self.n, bias=False), nn.ReLU(),
                                   nn.Linear(self.n, self.n, bias=False)).to(self.dev, torch.bfloat16)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, foreach=True)
        self.fwd = self.model

    def batch_for(self, i):
        return torch.randn(self.n, self.n, device=self.dev, dtype=torch.bfloat16, generator=self.gen), None

    def loss_of(self, x, _):
        return self.fwd(x).float().pow(2).mean()


if __name__ == "__main__":
    sys.exit(run_case("gemm", GemmWorkload))
