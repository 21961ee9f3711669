#!/usr/bin/env python3
"""Issue 4, case 7: a program that captures part of its step with torch.cuda.graph itself
(a frozen encoder), replayed every step; graft steps aside for that part.

  python3 tests/gpu/training/partgraph.py --steps N [--warmup W] [--mode eager]
                                        [--losses FILE] [--json FILE]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/gpu

from training.common import F, MLP, nn, run_case, torch
from training.mlp import ClassifierWorkload


class PartGraphWorkload(ClassifierWorkload):
    """A frozen feature extractor whose forward the program itself captures with
    torch.cuda.graph and replays every step; the trainable head runs eagerly."""

    feat = 512

    def setup(self, mode="eager"):
        self.encoder = nn.Sequential(nn.Linear(self.din, self.feat), nn.GELU(),
                                     nn.Linear(self.feat, self.feat), nn.GELU()).to(self.dev)
        self.encoder.requires_grad_(False)
        self.encoder.eval()
        self.model = MLP(self.feat, self.hidden, self.nout, layers=3).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.static_in = torch.zeros(self.batch, self.din, device=self.dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                self.encoder(self.static_in)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.static_feat = self.encoder(self.static_in)

    def step(self, i):
        x, y = self.batch_for(i)
        self.static_in.copy_(x)
        self.graph.replay()
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(self.static_feat), y)
        loss.backward()
        self.opt.step()
        return loss


if __name__ == "__main__":
    sys.exit(run_case("partgraph", PartGraphWorkload))
