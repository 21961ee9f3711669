#!/usr/bin/env python3
"""Issue 4, case 2: mlp.py's loop with loss.item() every step (a sync per step).

  python3 tests/gpu/training/mlp_item.py --steps N [--warmup W] [--mode eager|handgraph|compile]
                                        [--losses FILE] [--json FILE]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/gpu

from training.common import run_case
from training.mlp import ClassifierWorkload


class MLPItem(ClassifierWorkload):
    syncs = True
    item = True


if __name__ == "__main__":
    sys.exit(run_case("mlp_item", MLPItem))
