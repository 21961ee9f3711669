#!/usr/bin/env python3
"""Issue 4, case 4: mixed precision: torch.autocast(float16) and a GradScaler, whose inf
check syncs every step and whose update() changes the scale.

  python3 tests/gpu/training/amp.py --steps N [--warmup W] [--mode eager]
                                        [--losses FILE] [--json FILE]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/gpu

from training.common import F, run_case, torch
from training.mlp import ClassifierWorkload


class AMPWorkload(ClassifierWorkload):
    """MLP under autocast(float16) with a GradScaler: the inf check syncs every step,
    scaler.update() changes the scale, and steps with inf/nan grads skip the optimizer."""

    syncs = True

    def setup(self, mode="eager"):
        super().setup()
        try:
            self.scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 16, growth_interval=20)
        except (AttributeError, TypeError):
            self.scaler = torch.cuda.amp.GradScaler(init_scale=2.0 ** 16, growth_interval=20)
        self.scale_changes = 0

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=False)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = F.cross_entropy(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)   # syncs: found_inf .item()
        self.scaler.update()
        return loss.float()


if __name__ == "__main__":
    sys.exit(run_case("amp", AMPWorkload))
