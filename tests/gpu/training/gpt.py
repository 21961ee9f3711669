#!/usr/bin/env python3
"""Issue 4, case 3: a small transformer language model: token and position embeddings,
causal attention written out, LayerNorm, dropout 0.1 (new RNG offsets every step),
AdamW (foreach).

  python3 tests/gpu/training/gpt.py --steps N [--warmup W] [--mode eager|handgraph|compile]
                                        [--losses FILE] [--json FILE]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/gpu

from training.common import F, GPT, run_case, torch
from training.mlp import ClassifierWorkload


class GPTWorkload(ClassifierWorkload):
    batch, seq, vocab = 8, 64, 512

    def setup(self, mode="eager"):
        self.model = GPT(vocab=self.vocab, seq=self.seq, d=128, heads=4, layers=4, p=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=0.01,
                                     foreach=True, capturable=(mode == "handgraph"))
        self.fwd = self.model

    def batch_for(self, i):
        tok = torch.randint(0, self.vocab, (self.batch, self.seq + 1), device=self.dev, generator=self.gen)
        return tok, None

    def fill_batch(self, tok, _):
        tok.random_(0, self.vocab, generator=self.gen)

    def loss_of(self, tok, _):
        logits = self.fwd(tok[:, :-1])
        return F.cross_entropy(logits.reshape(-1, self.vocab), tok[:, 1:].reshape(-1))


if __name__ == "__main__":
    sys.exit(run_case("gpt", GPTWorkload))
