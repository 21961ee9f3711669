#!/usr/bin/env python3
"""Issue 4, case 1: an MLP classifier (8 layers) trained with AdamW (foreach), no sync in
the loop: the losses stay in a GPU tensor, read after the last step.

  python3 tests/gpu/training/mlp.py --steps N [--warmup W] [--mode eager|handgraph|compile]
                                        [--losses FILE] [--json FILE]

--mode handgraph: the whole iteration captured by hand in one torch.cuda.graph (a
capturable AdamW); --mode compile: the model under torch.compile(mode="reduce-overhead")
with the smallest change that makes it run (workloads.COMPILE_CHANGES).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/gpu

from training.common import F, MLP, Workload, run_case, torch


class ClassifierWorkload(Workload):
    """MLP classifier on data generated on the GPU from a fixed generator."""

    batch, din, hidden, nout = 64, 256, 512, 10
    grads_to_none = False  # zero_grad(set_to_none=...) in step()

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=8).to(self.dev)
        capturable = mode == "handgraph"
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01,
                                     foreach=True, capturable=capturable)
        self.fwd = self.model

    def batch_for(self, i):
        x = torch.randn(self.batch, self.din, device=self.dev, generator=self.gen)
        y = torch.randint(0, self.nout, (self.batch,), device=self.dev, generator=self.gen)
        return x, y

    def fill_batch(self, x, y):
        x.normal_(generator=self.gen)
        y.random_(0, self.nout, generator=self.gen)

    def loss_of(self, x, y):
        return F.cross_entropy(self.fwd(x), y)

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=self.grads_to_none)
        loss = self.loss_of(x, y)
        loss.backward()
        self.opt.step()
        return loss

    # --- compile: the smallest change that makes reduce-overhead run (COMPILE_CHANGES)
    def setup_compile(self):
        self.setup()
        self.fwd = torch.compile(self.model, mode="reduce-overhead")

    def step_compile(self, i):
        torch.compiler.cudagraph_mark_step_begin()
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_of(x, y)
        loss.backward()
        self.opt.step()
        return loss

    # --- handgraph: the standard whole-iteration recipe (static inputs, side-stream
    #     warmup, capturable AdamW captured with forward and backward)
    def setup_handgraph(self):
        self.setup(mode="handgraph")
        x0, y0 = self.batch_for(-1)
        self.static_x = x0.clone()
        self.static_y = y0.clone() if y0 is not None else None
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                loss = self.loss_of(self.static_x, self.static_y)
                loss.backward()
                self.opt.step()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self.loss_of(self.static_x, self.static_y)
            self.static_loss.backward()
            self.opt.step()

    def step_handgraph(self, i):
        self.fill_batch(self.static_x, self.static_y)
        self.graph.replay()
        return self.static_loss


if __name__ == "__main__":
    sys.exit(run_case("mlp", ClassifierWorkload))
