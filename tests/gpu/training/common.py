"""What the PyTorch training cases share: the models, the Workload base class, the loss
format, and run_case, which runs a case's script through workloads.py's runner.

Each of issue 4's cases is a small script of its own in this directory (mlp.py,
mlp_item.py, gpt.py, amp.py, sidestream.py, lastbatch.py, partgraph.py, and gemm.py, the
GPU-bound case); tests/gpu/workloads.py holds the other cases and the runner (argument
parsing, timing, --json, --interleave) and runs these too: `workloads.py mlp ...` and
`training/mlp.py ...` run the same loop. Deterministic algorithms and fixed seeds
(workloads.main sets them).

torch is imported here, guarded: without it the names are None and workloads.main exits
77. (workloads.py sets the allocator's options for its expandable and mallocasync cases
before it imports this module: PyTorch reads the allocator backend when torch loads.)
"""

import math
import os
import struct
import sys

# Must be set before CUDA (cuBLAS) initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    TORCH_ERROR = None
except Exception as e:  # ImportError, or a broken install
    torch = nn = F = None
    TORCH_ERROR = e
# The models' base class (object without torch, so this module loads anyway).
Module = nn.Module if nn is not None else object


def f32_hex(v):
    """Exact float32 bit pattern of a Python float (which holds a float32 exactly)."""
    return "%08x" % struct.unpack("<I", struct.pack("<f", v))[0]


def tensor_hexes(t):
    """Float32 bit patterns (hex) of a 1-D float32 tensor."""
    bits = t.detach().to("cpu", torch.float32).contiguous().view(torch.int32).tolist()
    return ["%08x" % (b & 0xFFFFFFFF) for b in bits]


# --------------------------------------------------------------------------- models


class MLP(Module):
    def __init__(self, din=256, hidden=512, nout=10, layers=4, dropout=0.0):
        super().__init__()
        mods = []
        d = din
        for _ in range(layers - 1):
            mods += [nn.Linear(d, hidden), nn.ReLU()]
            if dropout > 0:
                mods.append(nn.Dropout(dropout))
            d = hidden
        mods.append(nn.Linear(d, nout))
        self.net = nn.Sequential(*mods)

    def forward(self, x):
        return self.net(x)


def add_block_layers(block, d):
    """A transformer block's layers, created in this order (their initial weights
    come from the generator in this order)."""
    block.ln1 = nn.LayerNorm(d)
    block.qkv = nn.Linear(d, 3 * d)
    block.proj = nn.Linear(d, d)
    block.ln2 = nn.LayerNorm(d)
    block.fc1 = nn.Linear(d, 4 * d)
    block.fc2 = nn.Linear(4 * d, d)


class Block(Module):
    def __init__(self, d, heads, seq, p):
        super().__init__()
        self.heads = heads
        add_block_layers(self, d)
        self.attn_drop = nn.Dropout(p)
        self.resid_drop = nn.Dropout(p)
        # True above the diagonal: positions a token may not attend to.
        self.register_buffer("future", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1)
                             .view(1, 1, seq, seq), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.future[:, :, :T, :T], float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.resid_drop(self.proj(y))
        x = x + self.resid_drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))
        return x


class GPT(Module):
    def __init__(self, vocab=512, seq=64, d=128, heads=4, layers=4, p=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList([Block(d, heads, seq, p) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("positions", torch.arange(seq), persistent=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.drop(self.tok(idx) + self.pos(self.positions[:T]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


# --------------------------------------------------------------------------- workloads


class Workload:
    syncs = False
    item = False

    def __init__(self, args, dev):
        self.args = args
        self.dev = dev
        self.steps = args.steps
        self.gen = torch.Generator(device=dev)
        self.gen.manual_seed(1234)
        self.loss_buf = torch.zeros(args.steps, dtype=torch.float32, device=dev)
        self.host_losses = []   # sync cases
        self.extra = {}         # step -> extra text appended to the loss line

    def record_loss(self, i, loss):
        if self.item:
            self.host_losses.append(loss.item())  # the per-step sync of the loop
        else:
            self.loss_buf[i].copy_(loss.detach().float())

    def loss_lines(self):
        if self.item:
            hexes = [f32_hex(v) for v in self.host_losses]
        else:
            hexes = tensor_hexes(self.loss_buf)
        lines = []
        for i, h in enumerate(hexes):
            e = self.extra.get(i)
            lines.append(h if e is None else "%s %s" % (h, e))
        return lines

    def finish(self):
        pass


def run_case(case, workload_class):
    """A case script's main: workloads.py's runner with this script's class and the
    command line's options (see workloads.py: --steps, --warmup, --mode, --losses,
    --json, ...). Returns the exit code."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if here not in sys.path:
        sys.path.insert(0, here)
    import workloads
    return workloads.main(sys.argv[1:], case=case, workload_class=workload_class)
