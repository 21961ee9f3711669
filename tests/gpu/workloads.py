#!/usr/bin/env python3
"""PyTorch training workloads for graft's GPU tier (DESIGN.md §5), and the runner of
every case. The issue's cases are small scripts of their own in training/ (mlp.py,
gpt.py, ...), which run through main() here; case_lists.py lists the cases.

  python3 tests/gpu/workloads.py CASE --steps N [--warmup W] [--mode eager|handgraph|compile]
                                 [--losses FILE] [--json FILE]
                                 [--profile-json FILE --profile-steps P]

CASE: mlp mlp_item gpt amp sidestream lastbatch partgraph gemm cnn lstm dynamic accum
      inductor_mlp inductor_gpt sdpa ddp vit diffusion gan expandable decode loader serve
      rngstate timing emptycache pinned recordstream condstep moe graphed clipskip
      fno linalg lbfgs plateau swa parametrize sparse gnn pageable setstream
      ppo wgangp dpsgd offload reentrant unfreeze gpudata
      bnfreeze embbag sampling streampool optbwd lrtensor reparam ckpt
      kvgrow beam encpad packed maml multitask sidebwd contrast
      capfail mempool greenctx flexattn jagged threadfeed oomretry
      bncma qat ampfused profwin dyncompile ipcactor
      legacysync recapture mallocasync fsdp optzoo
      asyncsnap sam mixup fp8 pcgrad
      tritonop jiterator layerdrop tf32toggle latechange
      ensemble anomaly signbits dirtyfn offsetview
      oddbytes prefetch evring zerocopy autotune
      memops bgeval streamchurn hostpause cpuadam
      meanflow docmask adahessian spline hostfunc
      groupmm pinhost ssmscan sac memhist
      sharedpool ctc ropecplx selckpt hostreg
      papply bgcapture extevent awdlstm glooddp
      pipeline2 ddp2 (or "list")

--steps N is the total number of training steps; the first W (--warmup) are untimed.
--losses writes one line per step: the loss as float32 bits in hex ("%08x"); lastbatch
appends " eval=<hex>" on steps that ran an eval pass, lstm and diffusion " item=<hex>"
every 10th step, accum and diffusion " ema=<checksum>" on the last step, gan " d=<hex>"
(the discriminator's loss) and decode " tok=<ids>" (the tokens it read) on every step,
serve " cls=<classes>" (the classes it read) on every step, graphed " eval=<hex>" every
25th step, timing " t=ok" every 10th step (its timing events' elapsed times were finite
and in order; " t=bad" if not: never a time), emptycache " mem=<allocated>/<reserved>"
(torch.cuda.memory_allocated() and memory_reserved(), bytes) on every step, pinned
" host=<hex>" (the loss as the host read it back through pinned memory), condstep
" b=h|p|s" (the branch the step took: hard, plain, skip), moe " n=<counts>" (tokens per
expert) and clipskip " s=<hex> n=<hex>" (the loss scale after update, the gradient norm)
on every step; fno " spec=<hex>" (its spectral loss term), linalg " ev=<hex> info=<n>"
(the smallest eigenvalue, the summed LAPACK info codes), lbfgs " ev=<n>" (closure
evaluations), plateau " lr=<float.hex> b=s|r|-" (the learning rate after the step; a
snapshot of the best weights, a restore of them, neither), parametrize " sigma=<hex>" (a
spectral norm estimate; " eval=<hex>" added every 20th step), sparse " nnz=<n>" (distinct
rows in the sparse gradient), gnn " e=<n>" (edges after deduplication) and pageable
" host=<hex>" (the loss read through pageable memory) on every step; swa " swa=<hex>" (the
averaged model's eval loss) every 25th step of its averaging phase and setstream
" q=<hex>" (the loss read after polling Stream.query()) every 10th step; ppo " r=<hex>"
(the rollout's mean reward), wgangp " gp=<hex>" (the gradient penalty; " g=<hex>", the
generator's loss, added every 5th step), dpsgd " clip=<hex>" (the mean per-sample clip
factor), reentrant " n=<hex>" (the gradient norm) and unfreeze " lr=<hex>" (the head's
learning rate tensor after the scheduler's step) on every step, gpudata " eval=<hex>"
at the end of every epoch (32 steps); bnfreeze " rv=<hex>" (the stem BatchNorm's running
variance summed), embbag " e=<hex>" (empty bags), sampling " n=<k> s=<hex>" (tokens sampled,
the window's token sum), reparam " h=<n>" (the hidden width) and ckpt
" ck=s|r<step>|sr<step>|-" (checkpoint saved, restored from the one of that step) on every
line; kvgrow " p=<n> n=<n> g=<hex>" (prompt length, tokens generated, their summed logits),
beam " n=<n> s=<hex> t=<hex>" (tokens searched, the best beams' summed scores and token
sums), packed " T=<n> L=<n> s|u" (longest and total length, sorted or unsorted path), maml
" k=<counts>" (inner steps per task), multitask " t=<tasks>" (c, r, t per micro-batch) and
contrast " s=<hex> p=<n>" (the clamped logit scale, the queue pointer) on every line,
encpad " ev=n:<hex>" or " ev=d:<hex>" (the eval loss, nested or dense fast path) on odd
steps; capfail " cap=h|e|ok" (how its capture attempt ended) on steps 40, 140 and 240,
mempool " p=s|w|- mem=<allocated>/<reserved>" (slept, woke; the allocator's counts) on
every line and " ev=<hex>" (the EMA model's eval loss) every 10th step while awake,
greenctx " ev=<hex>" (the EMA model's loss, evaluated in the side green context) on every
line and " green=0|1" (whether green contexts were made) on the first, flexattn
" kv=<hex>" (key blocks the block mask keeps), jagged " T=<n> L=<n>" (packed and longest
length) and oomretry " b=<n> m=<n> o=<n>" (batch, micro-batches, out-of-memory retries)
on every line; bncma " rm=<hex>" (the first BatchNorm1d's running mean, summed) on every
line and " ev=<hex>" (the eval loss) every 10th step, qat " s=<hex> i=<hex>" (the first
activation fake-quant's and the input fake-quant's scale), ampfused " s=<hex> n=<hex>" (the
loss scale after update, the fused AdamW's step count) and dyncompile " T=<n>" (the padded
length) on every line, profwin " a=<n>" (kernels, memcpys and memsets together in the
profiler window's trace) on the last step of each of its windows, ipcactor
" ev=<hex> acc=<hex> k=<step>" (the actor process's eval loss and accuracy for the weights
sent at step k) every 10th step; legacysync " host=<hex>" (the loss as the host read it
from pinned memory after synchronizing a blocking stream) every 5th step and " ev=<hex>" (the
EMA model's eval loss) every 10th, recapture " g=e|c|r" (eager, warm-up and capture,
replay of its own graph) on every line and " ev=<hex>" (the EMA model's eval loss) every
10th, mallocasync " kl=<hex>" (the distillation term) and optzoo " a=<hex>" (the adapter's
absolute weight sum) on every line; asyncsnap " ck=<hex> s=<step>" (the writer thread's
checksum of the pinned snapshot staged at that step) on the steps that join it (14 of every
20) and " rs=<step>" (the snapshot restored) on 60 of every 100, sam " gn=<hex> rm=<hex>"
(the first pass's gradient norm, the first BatchNorm's running mean summed), mixup
" m=x|c|- x=<hex>" (mixup, CutMix or neither; the mixed batch's sum), fp8 " a=<hex>" (the
first layer's largest recorded input amax) and pcgrad " pj=<n>" (projections applied) on
every line, fp8 " ev=<hex>" (the eval loss) every 10th; tritonop
" c=<rows>x<warps> M=<n> r=<hex>" (its Triton kernels' rows per program and warps, the
batch's rows, the first layer's mean reciprocal RMS), jiterator " l=d|b|c g=<hex>" (the
inputs' layout: dense, broadcast, cast; the first activation's mean gradient by b), layerdrop
" k=<bits> t=<hex>" (the blocks kept, the teacher's cross-entropy), tf32toggle
" p=i|t|h|m|n|x" (the precision state) and latechange " c=<n> e=<hex>" (changes made so
far, the largest renormalised embedding row norm) on every line; ensemble " x=<dst><<src>,..."
(the members overwritten by better ones) every 25th step and " ev=<hex>" (the ensemble's
eval loss) every 10th, anomaly " r=s|k|a j=-|n|i w=0|1 s=<hex>" (stepped, skipped on
non-finite gradients or aborted by anomaly mode; the gradient injection; anomaly mode on;
the loss scale after the step), signbits " z=+|- t=0|1 s=<k> g=<k>" (the clamp bound's
sign, the temperature one ulp up, the salt's and the seed's high word), dirtyfn
" f=<bits> a=0|1 r=<hex> m=<hex>" (frozen layers, the auxiliary term, the retained
gradient's norm, the multi-grad hook's sum) and offsetview
" o=<n> s=<n> b=<n> t=<n> m=<n> w=<n>" (the step's offsets and row stride) on every line; oddbytes
" c=<n>" (the packed buffer's weighted byte checksum), prefetch " j=f|p t=h<k>|d<k>|- p=<hex>"
(full or partial join; the teacher stream's tail after the join: a probe copied from pinned
memory or the GPU, or none; the probe's mean square logit), evring
" l=<hex>,<hex>,<hex> o=<order> h=<hints>" (each model's loss, the order the models ran in,
whose features each took as its hint), zerocopy " h=<hex> s=<float.hex>" (the loss as the
host read it from mapped memory, the input scale) and autotune " M=<n> k=<n>" (the batch rows,
the batch sizes tuned so far) on every line; memops " s=<bits> m=<off>+<n>:<k> c=<n>,<n>" (the
chunks signalled with the step's tag; the memset's offset, count and scale index; checksums of the
flags and of the scales), streamchurn " s=<kinds> d=e|l" (each side stream blocking, non-blocking
or non-blocking of high priority; destroyed at once or after the step), hostpause
" p=<point><ms><s|w>,..." (the step's host pauses, or " p=-") and cpuadam " w=<float.hex>" (a
checksum of the first layer's pinned host weight after the CPU step) on every line, bgeval
" ev=<hex> acc=<n>" (the evaluator thread's loss and correct count for the snapshot of that
step) every 8th step and " lr=<float.hex>" (the learning rate after its adjustment) every 40th;
meanflow " p=<k>/8 m=<hex> j=<hex>" (the share of samples with r = t in eighths, the unweighted
mean squared error, the mean |du/dt|), docmask " w=<n> d=<n>" or " w=<n> u" (the sliding
window; the documents of a packed step, or an unpacked step), spline " q=<k> t=<hex> c=<hex>"
(the quantile's level in permille, the quantile, the latent histogram's chi-square) and
hostfunc " h=<hex> s=<hex> a=<hex>|- k=f|c" (the loss as the host function read it from pinned
memory, the gradient scale it wrote, the auxiliary value it read or -, cuLaunchHostFunc or
cuStreamAddCallback) on every line, meanflow and spline " ev=<hex>" (the one-step samples'
mean squared distance to the nearest center; the inverse flow's samples against the data's
warp) every 10th, adahessian " h=<hex>" (the Hutchinson trace estimate) every 3rd and hostfunc
" lr=<float.hex>" (the learning rate after the host's decision) every 10th; groupmm
" n=<counts> a=<hex>" (the first layer's tokens per expert, the load-balancing loss) on every
line and " g=1|0" (torch._grouped_mm, or the dense fallback) on the first, pinhost
" r=<step> l=<hex> g=<hex> a=<hex> lr=<float.hex>" or " r=- lr=<float.hex>" (the step whose
metrics the host read from pinned memory after its event, its loss, gradient norm and
accuracy as read, the learning rate they set), ssmscan " L=<n> o=<offset> h=<hex>" (the
chunk's length and offset in the token stream, the carried state's mean absolute value; " z"
added where the state was reset), sac " e=<n> u=<n> a=<hex> r=<hex>" (environment steps and
updates of the iteration, the entropy temperature, the mean reward) and memhist
" m=<allocated>/<reserved>/<segments>" (the caching allocator's counts) on every line, memhist
" t=<a>/<f>/<s>/<u> g=<n>/<x>" (a memory-history window's recorded allocations, completed
frees, segments allocated or mapped and freed or unmapped; the snapshot's segments and
expandable ones) on the last step of each of its three windows; sharedpool
" g=e<b>|c<b>|r<b>|l<b>|u k=<rows>" (eager padded to bucket b before its captures, capture,
replay, logging step, eager with no bucket; the batch's rows), ctc " L=<n> p=h|d|r b=<hex>" (the
labels' total length; cuDNN's CTC with host or device label arrays, or the CTC written out; the
share of frames whose argmax is the blank), ropecplx " T=<n> s=<n> a=f|e|m" (the sequence length,
the position offset into the rotary table, the attention backend: flash, memory-efficient,
math), selckpt " ac=o|a|f|l|n n=<hex>" (the checkpointing policy: selective by op, selective
with every second matmul, full, every second block, none; the gradient norm) and hostreg
" p=1|0 l=<hex> lr=<float.hex>" (whether PyTorch sees the staging area as pinned, the loss as
the host read it, the learning rate of the step) on every line, sharedpool " n=<hex>" (the
gradient norm) on its logging steps (every 10th) and " ev=<hex>" (the eval loss) every 10th,
5 later, ropecplx " th=<base> f=<hex>" (the rotary base and the table's real parts summed) where
it rebuilt its table, and on the first line ctc " c=<h><d>" (which forms of F.ctc_loss its
probes took, 1 or 0 each), ropecplx " be=<letters>" (the attention backends its probe found),
selckpt " sac=1|0" (selective checkpointing, or plain checkpoints) and hostreg " reg=1|0"
(whether the host memory could be registered); papply " p=d|s n=<hex>" (the heads' threads on
the default or a side stream, the gradient norm), extevent " g=e|c|r a=<hex> n=<hex>" (eager,
captured after its warm-up, replayed; the accuracy and the gradient norm the logger and stats
streams read) and awdlstm " T=<n> o=s|a" (the step's length, SGD or ASGD; " e" added where the
token stream began again) on every line, bgcapture " ev=<hex> acc=<n>" (the evaluator thread's
summed loss and correct count for that step's snapshot; " cap=t|r" added where it captured its
graph, thread_local or relaxed) every 10th and " lr=<float.hex>" (the learning rate after the
main thread took a reply) where it took one, extevent " h=<hex> lr=<float.hex>" (the loss as
the host read it early, the learning rate it set) every 10th and " ext=1|0" (external events,
or every step eager) on the first, awdlstm " ev=<hex>" (the held-out loss; " sw" added where
the optimizer switched to ASGD) every 20th.
ppo's loss is the mean of its 8 minibatch losses, wgangp's the critic's, sac's the mean critic
loss of its updates, glooddp's the sum of its two micro-batches' halves, extevent's the logger
stream's copy. decode is inference, not training: its "loss" is the sum of the chosen tokens'
logits.
No-sync cases keep the losses in a preallocated GPU tensor and read them after the loop.
expandable runs with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, mallocasync with
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync and pinhost with
PYTORCH_CUDA_ALLOC_CONF=pinned_use_background_threads:True, which main() sets before it
imports torch.
--json writes {"case", "mode", "steps", "ms_per_step_median", "peak_mem_bytes",
"device_used_peak_bytes", "warmup_s", ...}.
--profile-json profiles P steps after warmup with torch.profiler and writes the number of
kernel / memset / memcpy device events per step (used by profile_count.py).
--interleave graph,passthrough,swallow (with LD_PRELOAD=libgraft GRAFT_MODE=graph
GRAFT_BENCH_SWITCH=1): after the warmup, times --cycles cycles of one block of --block
steps in each of these graft modes, switched in this process through
graft_bench_set_mode (eager = passthrough, floor = swallow); the order rotates every
cycle, and each block starts with one untimed step. --steps is then ignored. The JSON
gets "interleaved": {mode: [ms/step of each block, by cycle]} (bench_interleaved.py):
the median step for loops that sync every step, else the time to issue the block.

Exit: 0 ok, 2 usage error, 77 torch or a CUDA device is missing, 1 anything else.
"""

import argparse
import json
import math
import os
import sys
import time

# Must be set before CUDA (cuBLAS) initialises.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def set_allocator_options(case):
    """expandable, mallocasync and pinhost run under their allocator options, set before
    torch is imported (PyTorch reads the allocator backend when it loads)."""
    if case == "expandable":
        # The caching allocator reads its configuration when it initialises, at the first
        # CUDA allocation at the latest; set before torch is imported, it is never late
        # (expandable has no handgraph or compile mode, and --interleave runs this same
        # main). PYTORCH_ALLOC_CONF, newer torch's name, takes precedence when set, so it
        # gets the option too.
        for key in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
            conf = os.environ.get(key, "")
            if key == "PYTORCH_ALLOC_CONF" and not conf:
                continue
            if "expandable_segments" in conf:
                conf = conf.replace("expandable_segments:False", "expandable_segments:True")
            else:
                conf = conf + ("," if conf else "") + "expandable_segments:True"
            os.environ[key] = conf
    if case == "mallocasync":
        # PyTorch's cudaMallocAsync backend, chosen like expandable's option before torch is
        # imported; a backend the caller named is replaced.
        for key in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
            conf = os.environ.get(key, "")
            if key == "PYTORCH_ALLOC_CONF" and not conf:
                continue
            parts = [p for p in conf.split(",") if p and not p.strip().startswith("backend:")]
            os.environ[key] = ",".join(parts + ["backend:cudaMallocAsync"])
    if case == "pinhost":
        # The caching host allocator's background thread, which polls the events of freed
        # pinned blocks (read when the host allocator first needs the option, after this);
        # a setting of it the caller made is replaced.
        for key in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
            conf = os.environ.get(key, "")
            if key == "PYTORCH_ALLOC_CONF" and not conf:
                continue
            parts = [p for p in conf.split(",")
                     if p and not p.strip().startswith("pinned_use_background_threads:")]
            os.environ[key] = ",".join(parts + ["pinned_use_background_threads:True"])


if __name__ == "__main__":
    # Wherever the case stands among the options (no option takes these names as a value).
    for _word in sys.argv[1:]:
        set_allocator_options(_word)

# torch (None without it), the models and the issue's cases (training/).
from training.common import F, GPT, MLP, TORCH_ERROR, Workload, add_block_layers, f32_hex, nn, tensor_hexes, torch  # noqa: E402,F401
from training.mlp import ClassifierWorkload  # noqa: E402
from training.mlp_item import MLPItem  # noqa: E402
from training.gpt import GPTWorkload  # noqa: E402
from training.amp import AMPWorkload  # noqa: E402
from training.sidestream import SideStreamWorkload  # noqa: E402
from training.lastbatch import LastBatchWorkload  # noqa: E402
from training.partgraph import PartGraphWorkload  # noqa: E402
from training.gemm import GemmWorkload  # noqa: E402

from case_lists import CASES, COMPILE_CASES, COMPILE_CHANGES, HANDGRAPH_CASES, TWO_GPU_CASES  # noqa: E402

DEVICE = "cuda"  # the device type every case runs on


# --------------------------------------------------------------------------- models

def build_models():
    """Model classes are defined once torch is imported (mlp's and gpt's: training/common.py)."""
    global SmallResNet, LSTMLM, SDPAGPT, PadBlock, GrowDecoder, SideLinearFn, ViT, TinyUNet, KVDecoder
    global FNO1d, Swish, SAM, F8Linear

    class ConvBlock(nn.Module):
        """conv-BN-ReLU-conv-BN plus a residual (a strided 1x1 conv when the shape changes)."""

        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.skip(x))

    class SmallResNet(nn.Module):
        def __init__(self, nout=10):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
            self.body = nn.Sequential(ConvBlock(32, 32, 1), ConvBlock(32, 64, 2), ConvBlock(64, 128, 2))
            self.head = nn.Linear(128, nout)

        def forward(self, x):
            return self.head(self.body(self.stem(x)).mean(dim=(2, 3)))

    class LSTMLM(nn.Module):
        def __init__(self, vocab, d, layers, p):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.rnn = nn.LSTM(d, d, num_layers=layers, dropout=p, batch_first=True)
            self.drop = nn.Dropout(p)
            self.out = nn.Linear(d, vocab)
            self.out.weight = self.emb.weight  # tied

        def forward(self, idx):
            h, _ = self.rnn(self.drop(self.emb(idx)))
            return self.out(self.drop(h))

    class SDPABlock(nn.Module):
        """Pre-norm block whose attention is F.scaled_dot_product_attention (fused kernels),
        causal, with attention dropout inside the fused kernel."""

        def __init__(self, d, heads, p):
            super().__init__()
            self.heads, self.p = heads, p
            add_block_layers(self, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.p if self.training else 0.0)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class SDPAGPT(nn.Module):
        def __init__(self, vocab, seq, d, heads, layers, p):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(1, seq, d))
            self.blocks = nn.ModuleList([SDPABlock(d, heads, p) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos[:, :idx.shape[1]]
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    class ViTBlock(nn.Module):
        """Pre-norm encoder block: full (not causal) multi-head attention written out (q, k, v
        from one Linear, softmax of the scaled scores, attention dropout), then a GELU MLP."""

        def __init__(self, d, heads, p):
            super().__init__()
            self.heads = heads
            add_block_layers(self, d)
            self.attn_drop = nn.Dropout(p)
            self.drop = nn.Dropout(p)

        def forward(self, x):
            B, T, C = x.shape
            hd = C // self.heads
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = self.attn_drop(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + self.drop(self.proj(y))
            return x + self.drop(self.fc2(self.drop(F.gelu(self.fc1(self.ln2(x))))))

    class ViT(nn.Module):
        """Vision Transformer: Conv2d patch embedding, a learned class token and position
        embedding, pre-norm encoder blocks, a linear head on the class token."""

        def __init__(self, img=32, patch=4, d=128, heads=4, layers=4, nout=10, p=0.1):
            super().__init__()
            n = (img // patch) ** 2
            self.patch = nn.Conv2d(3, d, patch, stride=patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
            self.drop = nn.Dropout(p)
            self.blocks = nn.ModuleList([ViTBlock(d, heads, p) for _ in range(layers)])
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, nout)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)                        # B, n, d
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            x = self.drop(x)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x[:, 0]))

    class ResBlock(nn.Module):
        """GroupNorm-SiLU-conv twice, the timestep embedding added in between through a
        Linear, and a residual (a 1x1 conv when the channel count changes)."""

        def __init__(self, cin, cout, tdim, groups=8):
            super().__init__()
            self.n1 = nn.GroupNorm(groups, cin)
            self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
            self.t = nn.Linear(tdim, cout)
            self.n2 = nn.GroupNorm(groups, cout)
            self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, temb):
            h = self.c1(F.silu(self.n1(x)))
            h = h + self.t(temb)[:, :, None, None]
            h = self.c2(F.silu(self.n2(h)))
            return h + self.skip(x)

    class TinyUNet(nn.Module):
        """A one-level UNet noise predictor: a stride-2 conv down, a ConvTranspose2d
        (stride 2) up, the skip joined by torch.cat, a sinusoidal timestep embedding."""

        def __init__(self, c=3, ch=32):
            super().__init__()
            tdim = 4 * ch
            self.temb = nn.Sequential(nn.Linear(ch, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
            self.inc = nn.Conv2d(c, ch, 3, padding=1)
            self.enc = ResBlock(ch, ch, tdim)
            self.down = nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1)
            self.mid = ResBlock(2 * ch, 2 * ch, tdim)
            self.up = nn.ConvTranspose2d(2 * ch, ch, 4, stride=2, padding=1)
            self.dec = ResBlock(2 * ch, ch, tdim)
            self.out = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(), nn.Conv2d(ch, c, 3, padding=1))
            half = ch // 2
            self.register_buffer("freqs", torch.exp(torch.arange(half, dtype=torch.float32)
                                                    * (-math.log(10000.0) / half)), persistent=False)

        def forward(self, x, t):
            a = t.float()[:, None] * self.freqs[None, :]                        # B, ch/2
            temb = self.temb(torch.cat([a.sin(), a.cos()], dim=1))              # B, 4ch
            h0 = self.enc(self.inc(x), temb)                                    # B, ch, H, W
            h = self.mid(self.down(h0), temb)                                   # B, 2ch, H/2, W/2
            h = self.dec(torch.cat([self.up(h), h0], dim=1), temb)              # B, ch, H, W
            return self.out(h)

    class KVBlock(nn.Module):
        """The GPT block's layers, attending over a static KV cache (B, heads, L, hd): the new
        keys and values are copied into the cache at the host's position, and the queries
        attend over all L positions, those after their own masked."""

        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            add_block_layers(self, d)

        def forward(self, x, pos, mask, kc, vc):
            B, T, C = x.shape
            hd = C // self.heads
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
            kc[:, :, pos:pos + T].copy_(k)
            vc[:, :, pos:pos + T].copy_(v)
            att = (q @ kc.transpose(-2, -1)) * (1.0 / math.sqrt(hd))           # B, heads, T, L
            att = att.masked_fill(mask, float("-inf"))
            y = (F.softmax(att, dim=-1) @ vc).transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class KVDecoder(nn.Module):
        """GPT-style decoder for generation with a static KV cache: forward(idx, pos, caches)
        takes T tokens at positions pos..pos+T-1 and returns the last position's logits."""

        def __init__(self, vocab, maxlen, d, heads, layers):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(maxlen, d)
            self.blocks = nn.ModuleList([KVBlock(d, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.register_buffer("positions", torch.arange(maxlen), persistent=False)

        def forward(self, idx, pos, caches):
            T = idx.shape[1]
            pos_t = self.positions[pos:pos + T]              # the positions as a GPU tensor (a view)
            mask = self.positions[None, :] > pos_t[:, None]  # T, L: True where a query may not look
            x = self.tok(idx) + self.pos(pos_t)
            for b, (kc, vc) in zip(self.blocks, caches):
                x = b(x, pos, mask, kc, vc)
            return self.head(self.ln_f(x[:, -1]))            # B, vocab

    class SpectralConv1d(nn.Module):
        """A Fourier layer's spectral convolution: rfft over the last dimension, the lowest
        `modes` frequencies mixed across channels by complex weights (an einsum, which runs
        as a complex batched GEMM), the other frequencies zeroed, irfft back to the input's
        length (whatever it is: the weights do not depend on it)."""

        def __init__(self, cin, cout, modes):
            super().__init__()
            self.cout, self.modes = cout, modes
            self.w = nn.Parameter(torch.randn(cin, cout, modes, dtype=torch.cfloat) / (cin * cout))

        def forward(self, x):                                               # B, C, N (float32)
            n = x.shape[-1]
            xf = torch.fft.rfft(x)                                          # B, C, N/2+1 (complex64)
            out = torch.zeros(x.shape[0], self.cout, n // 2 + 1, dtype=torch.cfloat, device=x.device)
            out[:, :, :self.modes] = torch.einsum("bix,iox->box", xf[:, :, :self.modes], self.w)
            return torch.fft.irfft(out, n=n)

    class FNO1d(nn.Module):
        """A 1-D Fourier neural operator: the input function and the grid lifted to `width`
        channels, Fourier layers (spectral convolution plus a pointwise Conv1d), a projection
        back to one value per grid point."""

        def __init__(self, width=32, modes=12, layers=3):
            super().__init__()
            self.lift = nn.Linear(2, width)
            self.spec = nn.ModuleList([SpectralConv1d(width, width, modes) for _ in range(layers)])
            self.pw = nn.ModuleList([nn.Conv1d(width, width, 1) for _ in range(layers)])
            self.proj = nn.Sequential(nn.Linear(width, 64), nn.GELU(), nn.Linear(64, 1))

        def forward(self, u, grid):                                         # B, N and N
            x = self.lift(torch.stack([u, grid.expand_as(u)], dim=-1)).transpose(1, 2)  # B, W, N
            for k, (s, p) in enumerate(zip(self.spec, self.pw)):
                x = s(x) + p(x)
                if k < len(self.spec) - 1:
                    x = F.gelu(x)
            return self.proj(x.transpose(1, 2)).squeeze(-1)                 # B, N

    class SwishFn(torch.autograd.Function):
        """x * sigmoid(beta * x) with a learnable beta, written by hand as a custom autograd
        Function: forward saves its input, the parameter and an intermediate with
        ctx.save_for_backward (so saved-tensor hooks such as save_on_cpu pack all three),
        backward computes both gradients itself."""

        @staticmethod
        def forward(ctx, x, beta):
            s = torch.sigmoid(beta * x)
            ctx.save_for_backward(x, beta, s)
            return x * s

        @staticmethod
        def backward(ctx, g):
            x, beta, s = ctx.saved_tensors
            ds = s * (1.0 - s)
            gx = g * (s + beta * x * ds)
            gbeta = (g * x * x * ds).sum().reshape(beta.shape)
            return gx, gbeta

    class Swish(nn.Module):
        def __init__(self):
            super().__init__()
            self.beta = nn.Parameter(torch.ones(1))

        def forward(self, x):
            return SwishFn.apply(x, self.beta)

    class GrowBlock(nn.Module):
        """The GPT block's layers for generation with a KV cache grown by torch.cat: the
        cache, a two-item list [keys, values] of shape (B, heads, L, hd) or [None, None],
        is replaced by the concatenation of itself and the new positions' keys and values
        (a new, longer tensor every token). Without a cache (training) it is a plain causal
        block."""

        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            add_block_layers(self, d)

        def forward(self, x, cache, causal):
            B, T, C = x.shape
            hd = C // self.heads
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
            if cache is not None:
                if cache[0] is not None:
                    k = torch.cat([cache[0], k], dim=2)
                    v = torch.cat([cache[1], v], dim=2)
                cache[0], cache[1] = k, v
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))           # B, heads, T, L
            if causal is not None:
                att = att.masked_fill(causal, float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GrowDecoder(nn.Module):
        """A GPT-style decoder whose forward(idx, start, caches) takes T tokens at positions
        start..start+T-1; with caches (one [keys, values] list per block) it grows them, and
        a prefill of T > 1 tokens is masked causally (a decode step of one token attends
        over the whole cache); caches=None is training over the whole sequence."""

        def __init__(self, vocab, maxlen, d, heads, layers):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(maxlen, d)
            self.blocks = nn.ModuleList([GrowBlock(d, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.register_buffer("positions", torch.arange(maxlen), persistent=False)
            self.register_buffer("future", torch.triu(torch.ones(maxlen, maxlen, dtype=torch.bool), 1),
                                 persistent=False)

        def forward(self, idx, start=0, caches=None):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(self.positions[start:start + T])
            causal = self.future[:T, :T] if T > 1 else None
            for k, b in enumerate(self.blocks):
                x = b(x, None if caches is None else caches[k], causal)
            return self.head(self.ln_f(x))                                  # B, T, vocab

    class SideLinearFn(torch.autograd.Function):
        """y = x W^T + b written by hand, whose backward forks: the weight and bias
        gradients are computed on a side stream (which first waits for the stream backward
        runs on), the input gradient meanwhile on backward's own stream; backward then joins
        the side stream with wait_stream, or with an Event recorded on the side stream and
        waited for (a new event each time), and hands the tensors between the streams with
        record_stream. The input gradient is skipped when the input needs none."""

        @staticmethod
        def forward(ctx, x, w, b, side, use_event):
            ctx.save_for_backward(x, w)
            ctx.side, ctx.use_event = side, use_event
            return F.linear(x, w, b)

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            cur = torch.cuda.current_stream(g.device)
            side = ctx.side
            side.wait_stream(cur)
            with torch.cuda.stream(side):
                gw = g.t() @ x                                              # out, in
                gb = g.sum(0)
            gx = g @ w if ctx.needs_input_grad[0] else None                 # on cur, meanwhile
            g.record_stream(side)
            x.record_stream(side)
            if ctx.use_event:
                ev = torch.cuda.Event()
                ev.record(side)
                cur.wait_event(ev)
            else:
                cur.wait_stream(side)
            gw.record_stream(cur)
            gb.record_stream(cur)
            return gx, gw, gb, None, None

    class PadBlock(nn.Module):
        """Pre-norm encoder block over padded sequences of any batch size and length: the
        attention written out (q, k, v from one Linear, scaled scores plus an additive
        key-padding bias of shape (B, 1, 1, T), softmax, dropout), then a GELU MLP with
        dropout. Its sizes come from the constructor, not from the input, so torch.compile
        with dynamic shapes traces batch and length as symbols."""

        def __init__(self, d, heads, p):
            super().__init__()
            self.d, self.heads, self.hd = d, heads, d // heads
            self.scale = 1.0 / math.sqrt(d // heads)
            add_block_layers(self, d)
            self.attn_drop = nn.Dropout(p)
            self.drop = nn.Dropout(p)

        def forward(self, x, bias):
            B, T, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * self.scale + bias                # B, heads, T, T
            att = self.attn_drop(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).reshape(B, T, self.d)
            x = x + self.drop(self.proj(y))
            return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))

    class SAM(torch.optim.Optimizer):
        """Sharpness-aware minimization as the reference implementation most scripts copy
        (davda54/sam) writes it: first_step() takes the gradient norm over all parameters
        (a norm per tensor, stacked, a norm of those), saves each parameter's data
        (old_p = p.data.clone()) and climbs to w + rho * g / |g| in place; second_step()
        puts the saved data back by assigning p.data = old_p (so every parameter's storage
        becomes the clone made in this step, and the perturbed storage is freed: a host-side
        pointer swap that no launch announces) and steps the base optimizer, whose
        param_groups it shares."""

        def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
            defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
            super().__init__(params, defaults)
            self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
            self.param_groups = self.base_optimizer.param_groups
            self.defaults.update(self.base_optimizer.defaults)
            self.grad_norm = None

        @torch.no_grad()
        def first_step(self, zero_grad=False):
            grad_norm = self._grad_norm()
            for group in self.param_groups:
                scale = group["rho"] / (grad_norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self.state[p]["old_p"] = p.data.clone()
                    e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                    p.add_(e_w)                                 # climb to w + e(w)
            self.grad_norm = grad_norm
            if zero_grad:
                self.zero_grad()

        @torch.no_grad()
        def second_step(self, zero_grad=False):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data = self.state[p]["old_p"]             # back to w: another storage
            self.base_optimizer.step()
            if zero_grad:
                self.zero_grad()

        def _grad_norm(self):
            dev = self.param_groups[0]["params"][0].device
            return torch.norm(torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(dev)
                for group in self.param_groups for p in group["params"] if p.grad is not None]), p=2)

    e4m3_max, e5m2_max, f8_eps = 448.0, 57344.0, 1e-12

    class F8LinearFn(torch.autograd.Function):
        """y = x W^T in float8 with per-tensor scales, as float8 training (torchao's
        Float8Linear, TransformerEngine) computes a Linear: the weight scaled by its
        current amax (dynamic scaling), the input by the scale sx its module passes in, both
        cast to float8_e4m3fn and multiplied by torch._scaled_mm (cuBLASLt's FP8 GEMM, the
        inverse scales handed to it as device pointers), float32 out. Backward casts the
        output gradient to float8_e5m2 with its own amax scale and computes the input and
        weight gradients with two more FP8 GEMMs (column-major copies of the float8
        operands, as Hopper's FP8 GEMM takes only row-major times column-major)."""

        @staticmethod
        def forward(ctx, x, w, sx):
            sw = e4m3_max / w.abs().amax().clamp(min=f8_eps)
            x8 = (x * sx).clamp(-e4m3_max, e4m3_max).to(torch.float8_e4m3fn)
            w8 = (w * sw).clamp(-e4m3_max, e4m3_max).to(torch.float8_e4m3fn)
            ctx.save_for_backward(x8, w8, sx, sw)
            return torch._scaled_mm(x8, w8.t(), scale_a=sx.reciprocal(), scale_b=sw.reciprocal(),
                                    out_dtype=torch.float32)

        @staticmethod
        def backward(ctx, gy):
            x8, w8, sx, sw = ctx.saved_tensors
            gy = gy.contiguous()
            sg = e5m2_max / gy.abs().amax().clamp(min=f8_eps)
            g8 = (gy * sg).clamp(-e5m2_max, e5m2_max).to(torch.float8_e5m2)
            gx = None
            if ctx.needs_input_grad[0]:                             # (M, N) @ (N, K), the second column-major
                gx = torch._scaled_mm(g8, w8.t().contiguous().t(), scale_a=sg.reciprocal(),
                                      scale_b=sw.reciprocal(), out_dtype=torch.float32)
            gw = torch._scaled_mm(g8.t().contiguous(), x8.t().contiguous().t(),   # (N, M) @ (M, K)
                                  scale_a=sg.reciprocal(), scale_b=sx.reciprocal(), out_dtype=torch.float32)
            return gx, gw, None

    class F8Linear(nn.Module):
        """A Linear whose GEMMs run in float8 (F8LinearFn), its float32 bias added after,
        the input scaled by delayed scaling as TransformerEngine's recipe does: in training
        the scale comes from the largest amax in a history of the last 16 steps (1 while the
        history is still zero), and this step's amax is then pushed into the history
        (torch.roll and a copy into element 0, in place, on the GPU); in eval mode the input's
        current amax (dynamic scaling) and no history update. Nothing is read back."""

        def __init__(self, din, dout, history=16):
            super().__init__()
            lin = nn.Linear(din, dout)
            self.weight, self.bias = lin.weight, lin.bias
            self.register_buffer("amax_hist", torch.zeros(history))

        def forward(self, x):
            with torch.no_grad():
                amax = x.detach().abs().amax()
                if self.training:
                    hmax = self.amax_hist.amax()
                    sx = torch.where(hmax > 0, e4m3_max / hmax.clamp(min=f8_eps), torch.ones_like(hmax))
                    self.amax_hist.copy_(torch.roll(self.amax_hist, 1))
                    self.amax_hist[0] = amax
                else:
                    sx = e4m3_max / amax.clamp(min=f8_eps)
            return F8LinearFn.apply(x, self.weight, sx) + self.bias


# --------------------------------------------------------------------------- workloads
#
# A workload provides:
#   setup()            build model, optimizer, data
#   step(i)            one eager training step; returns the loss tensor (float32, 0-dim)
#   syncs              True if a step synchronises with the host every step
#   record_loss(i, l)  store the loss of step i (sync cases: .item(); others: on the GPU)
# handgraph/compile variants are provided for some cases.

# The issue's cases, each a small script of its own in training/ (and the Workload base
# class, in training/common.py), which the other cases build on.


# --------------------------------------------------------------------------- other models
# Loops graft was not tuned on; check_losses.py holds them to the same bitwise bar.

class CNNWorkload(ClassifierWorkload):
    """A small ResNet on 32x32 images: cuDNN convolutions, BatchNorm2d (running statistics
    updated in place every step), residual adds, global mean pooling; SGD with Nesterov
    momentum and weight decay, one kernel per parameter (foreach=False), and OneCycleLR
    changing the learning rate (a kernel argument) every step."""

    batch = 32

    def setup(self, mode="eager"):
        self.model = SmallResNet().to(self.dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                   weight_decay=5e-4, foreach=False)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=0.1, total_steps=self.steps + 1)
        self.fwd = self.model

    def batch_for(self, i):
        x = torch.randn(self.batch, 3, 32, 32, device=self.dev, generator=self.gen)
        y = torch.randint(0, self.nout, (self.batch,), device=self.dev, generator=self.gen)
        return x, y

    def step(self, i):
        loss = super().step(i)
        self.sched.step()
        return loss


class LSTMWorkload(ClassifierWorkload):
    """LSTM language model: embedding, a 2-layer cuDNN LSTM with dropout between layers,
    tied decoder; fused Adam (one kernel over all parameters, step counts on the GPU),
    clip_grad_norm_ every step, and loss.item() every 10th step (a sync whose period
    differs from the step's)."""

    batch, seq, vocab = 16, 48, 1000

    def setup(self, mode="eager"):
        self.model = LSTMLM(self.vocab, 256, layers=2, p=0.2).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=2e-3, fused=True)
        self.fwd = self.model
        self.host_seen = []

    def batch_for(self, i):
        tok = torch.randint(0, self.vocab, (self.batch, self.seq + 1), device=self.dev, generator=self.gen)
        return tok, None

    def loss_of(self, tok, _):
        logits = self.fwd(tok[:, :-1])
        return F.cross_entropy(logits.reshape(-1, self.vocab), tok[:, 1:].reshape(-1))

    def step(self, i):
        tok, _ = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_of(tok, None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 0.5)
        self.opt.step()
        if i % 10 == 9:
            self.extra[i] = "item=" + f32_hex(loss.item())
        return loss


class DynamicWorkload(ClassifierWorkload):
    """Data-dependent shapes every step: a token classifier whose sequence length is drawn
    per step from {40, 48, 64}, whose loss covers only the positions a boolean mask selects
    (nonzero syncs; the selected count changes every step), plus negatives drawn with
    torch.multinomial and scored with gather; AdamW (foreach)."""

    batch, vocab, d, nclass = 16, 500, 128, 20

    def setup(self, mode="eager"):
        self.model = nn.ModuleDict({
            "emb": nn.Embedding(self.vocab, self.d),
            "mix": nn.Sequential(nn.Linear(self.d, 2 * self.d), nn.GELU(), nn.Linear(2 * self.d, self.d)),
            "cls": nn.Linear(self.d, self.nclass)}).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, foreach=True)
        import random
        self.lengths = random.Random(99)

    def step(self, i):
        m = self.model
        t = self.lengths.choice((40, 48, 64))
        tok = torch.randint(0, self.vocab, (self.batch, t), device=self.dev, generator=self.gen)
        target = torch.randint(0, self.nclass, (self.batch, t), device=self.dev, generator=self.gen)
        self.opt.zero_grad(set_to_none=False)
        h = m["emb"](tok)
        h = h + m["mix"](h)
        logits = m["cls"](h)                                   # B, T, C
        keep = (tok % 3) != 0                                  # data-dependent selection
        sel = logits[keep]                                     # nonzero: sync, dynamic shape
        loss = F.cross_entropy(sel, target[keep])
        probs = F.softmax(logits.detach().reshape(-1, self.nclass), dim=-1)
        neg = torch.multinomial(probs, 2, replacement=False, generator=self.gen)
        loss = loss + 0.1 * logits.reshape(-1, self.nclass).gather(1, neg).logsumexp(dim=1).mean()
        loss.backward()
        self.opt.step()
        return loss


class AccumWorkload(ClassifierWorkload):
    """Gradient accumulation over 4 micro-batches under bf16 autocast, with activation
    checkpointing of dropout blocks (the RNG state is saved and restored for the
    recomputation), fused AdamW on every 4th micro-batch, gradients set to None after it,
    and an exponential moving average of the weights (foreach lerp) after each update."""

    accumulate = 4

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
        self.ema = [p.detach().clone() for p in self.model.parameters()]
        from torch.utils.checkpoint import checkpoint
        self.checkpoint = checkpoint
        net = self.model.net
        self.pieces = [net[:6], net[6:12], net[12:]]

    def step(self, i):
        x, y = self.batch_for(i)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            h = x
            for piece in self.pieces[:-1]:
                h = self.checkpoint(piece, h, use_reentrant=False)
            loss = F.cross_entropy(self.pieces[-1](h).float(), y)
        (loss / self.accumulate).backward()
        if (i + 1) % self.accumulate == 0:
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                torch._foreach_lerp_(self.ema, [p.detach() for p in self.model.parameters()], 0.01)
        return loss

    def loss_lines(self):
        # The EMA weights' final checksum is part of the result.
        self.extra[self.steps - 1] = "ema=" + float(sum(e.double().sum() for e in self.ema)).hex()
        return super().loss_lines()


class InductorMLP(ClassifierWorkload):
    """The MLP (with dropout) compiled by torch.compile in its default mode: Inductor's
    Triton kernels (fused elementwise and reductions, Philox dropout seeded from the CUDA
    generator every step), launched by Triton's C launcher through cuLaunchKernelEx, next to
    cuBLAS GEMMs. No CUDA graphs of PyTorch's own (that is mode="reduce-overhead")."""

    grads_to_none = True

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=8, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = torch.compile(self.model)


class InductorGPT(GPTWorkload):
    """The small GPT (dropout 0.1) compiled by torch.compile in its default mode (see
    InductorMLP); the loss and the AdamW step stay eager."""

    grads_to_none = True

    def setup(self, mode="eager"):
        super().setup(mode)
        self.fwd = torch.compile(self.model)


class SDPAWorkload(GPTWorkload):
    """A GPT whose attention is F.scaled_dot_product_attention (PyTorch picks a fused
    kernel: flash, memory-efficient or cuDNN attention, whichever the deterministic
    setting allows), causal, with dropout inside the attention kernel, under bf16 autocast;
    fused AdamW; a batch of 16 x 128 tokens."""

    batch, seq, vocab = 16, 128, 1024
    grads_to_none = True

    def setup(self, mode="eager"):
        self.model = SDPAGPT(self.vocab, self.seq, d=256, heads=4, layers=4, p=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=0.01, fused=True)
        self.fwd = self.model

    def loss_of(self, tok, _):
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = self.fwd(tok[:, :-1])
        return F.cross_entropy(logits.float().reshape(-1, self.vocab), tok[:, 1:].reshape(-1))


def fresh_store_path(prefix):
    """A path for a new file store of torch.distributed (the file itself not yet there)."""
    import tempfile
    fd, path = tempfile.mkstemp(prefix=prefix)
    os.close(fd)
    os.unlink(path)
    return path


def init_group(dist, store_path, rank, world, dev, backend="nccl"):
    """The process group of `backend` over the file store at store_path; an NCCL group is
    bound to dev (gloo takes no device: glooddp's CUDA tensors name theirs)."""
    bound = {"device_id": dev} if backend == "nccl" else {}
    dist.init_process_group(backend, init_method="file://" + store_path, rank=rank, world_size=world, **bound)


def end_group(dist, store_path, join_peers=None):
    """Destroys the process group, waits for peer processes (join_peers), then removes the
    file store if store_path is given (the rank that made it)."""
    dist.destroy_process_group()
    if join_peers:
        join_peers()
    if store_path and os.path.exists(store_path):
        os.unlink(store_path)


class DDPWorkload(ClassifierWorkload):
    """The MLP (with dropout) wrapped in DistributedDataParallel over NCCL, one process
    (world size 1, as `torchrun --nproc_per_node=1` gives): gradient buckets are
    all-reduced by NCCL kernels on NCCL's own stream, joined to the compute stream with
    events, and NCCL's watchdog thread queries those events from another thread."""

    world = 1
    backend = "nccl"                     # the process group's (glooddp: "gloo")
    ddp_options = {"bucket_cap_mb": 1}   # DistributedDataParallel's keyword arguments

    def rendezvous(self):
        """The file store's path (a fresh one; ddp2's rank 0 also starts rank 1 here)."""
        return fresh_store_path("graft_ddp_store.")

    def setup(self, mode="eager"):
        import torch.distributed as dist
        self.dist = dist
        self.store_path = self.rendezvous()
        init_group(dist, self.store_path, self.args.ddp_rank, self.world, self.dev, self.backend)
        model = MLP(self.din, self.hidden, self.nout, layers=8, dropout=0.1).to(self.dev)
        self.model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[self.dev.index],
                                                               **self.ddp_options)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model

    def finish(self):
        end_group(self.dist, self.store_path if self.args.ddp_rank == 0 else None, self.join_peers)

    def join_peers(self):
        """Waits for the other ranks' processes this one started (none here)."""


class Pipeline2Workload(ClassifierWorkload):
    """The MLP (with dropout) split over two GPUs, as model parallelism does: its first
    four layers on cuda:0, the other four and the loss on cuda:1. Every step copies the
    activations to cuda:1 and their gradient back (device-to-device copies between the
    GPUs), the main thread's forward pass switches devices, backward runs on each device's
    autograd thread in turn, and AdamW (foreach) steps parameters on both. `.item()` every
    10th step. Needs two GPUs."""

    def setup(self, mode="eager"):
        self.dev1 = torch.device(DEVICE, 1)
        self.part0 = MLP(self.din, self.hidden, self.hidden, layers=4, dropout=0.1).to(self.dev)
        self.part1 = MLP(self.hidden, self.hidden, self.nout, layers=4, dropout=0.1).to(self.dev1)
        params = list(self.part0.parameters()) + list(self.part1.parameters())
        self.opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=True)

    def loss_of(self, x, y):
        h = torch.relu(self.part0(x)).to(self.dev1)
        return F.cross_entropy(self.part1(h), y.to(self.dev1))

    def step(self, i):
        loss = super().step(i)
        if i % 10 == 9:
            loss.item()
        return loss


class DDP2Workload(DDPWorkload):
    """The DDP MLP over two GPUs, one process each: this process (rank 0, cuda:0) starts
    rank 1 (this script again, on cuda:1, in the same environment, so under graft too when
    this one is) and both train on different data; every step NCCL all-reduces the
    gradient buckets between the GPUs. Rank 0's losses are recorded. Needs two GPUs."""

    world = 2
    peer = None

    def rendezvous(self):
        import subprocess
        self.gen.manual_seed(1234 + self.args.ddp_rank)
        if self.args.ddp_rank != 0:
            return self.args.ddp_store
        path = super().rendezvous()
        self.peer = subprocess.Popen([sys.executable, os.path.abspath(__file__), "ddp2", "--steps",
                                      str(self.args.steps), "--warmup", str(self.args.warmup),
                                      "--ddp-rank", "1", "--ddp-store", path])
        return path

    def join_peers(self):
        if self.peer is not None and self.peer.wait(timeout=120) != 0:
            raise RuntimeError("ddp2: rank 1 exited with %d" % self.peer.returncode)


class ViTWorkload(CNNWorkload):
    """A small Vision Transformer on 32x32 images: a Conv2d patch embedding (4x4 patches),
    a class token and position embedding joined by torch.cat, 4 pre-norm blocks whose
    attention is written out (matmul, softmax, dropout) over 65 tokens, no causal mask;
    cross-entropy with label smoothing, clip_grad_norm_ every step (foreach norms and a
    scale on the GPU, no sync) and AdamW (foreach) under CosineAnnealingLR, which changes
    the learning rate (a kernel argument) every step. Losses stay on the GPU."""

    batch = 32
    grads_to_none = True

    def setup(self, mode="eager"):
        self.model = ViT(img=32, patch=4, d=128, heads=4, layers=4, nout=self.nout, p=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.05, foreach=True)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=self.steps)
        self.fwd = self.model

    def loss_of(self, x, y):
        return F.cross_entropy(self.fwd(x), y, label_smoothing=0.1)

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=self.grads_to_none)
        loss = self.loss_of(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        return loss


class DiffusionWorkload(Workload):
    """A tiny UNet trained as a diffusion model's noise predictor: each step draws images,
    a timestep per sample (randint) and noise, indexes the precomputed alpha-bar schedule
    on the GPU with the timesteps (index_select), forms the noised images and regresses
    the noise (MSE). GroupNorm and SiLU instead of BatchNorm and ReLU, a stride-2 conv
    down, a ConvTranspose2d up, a skip joined by torch.cat, a sinusoidal timestep
    embedding; Adam (foreach), then an exponential moving average of the weights
    (_foreach_mul_ and _foreach_add_) every step, and loss.item() every 10th step."""

    batch, T, decay = 16, 1000, 0.999

    def setup(self, mode="eager"):
        self.model = TinyUNet(c=3, ch=32).to(self.dev)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.Adam(self.params, lr=1e-3, foreach=True)
        self.ema = [p.detach().clone() for p in self.params]
        betas = torch.linspace(1e-4, 0.02, self.T, dtype=torch.float64)
        self.abar = torch.cumprod(1.0 - betas, dim=0).float().to(self.dev)

    def batch_for(self, i):
        x0 = torch.randn(self.batch, 3, 32, 32, device=self.dev, generator=self.gen)
        t = torch.randint(0, self.T, (self.batch,), device=self.dev, generator=self.gen)
        noise = torch.randn(self.batch, 3, 32, 32, device=self.dev, generator=self.gen)
        return x0, t, noise

    def loss_of(self, x0, t, noise):
        ab = self.abar.index_select(0, t).view(-1, 1, 1, 1)
        xt = ab.sqrt() * x0 + (1.0 - ab).sqrt() * noise
        return F.mse_loss(self.model(xt, t), noise)

    def step(self, i):
        x0, t, noise = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_of(x0, t, noise)
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            torch._foreach_mul_(self.ema, self.decay)
            torch._foreach_add_(self.ema, self.params, alpha=1.0 - self.decay)
        if i % 10 == 9:
            self.extra[i] = "item=" + f32_hex(loss.item())
        return loss

    def loss_lines(self):
        # The EMA weights' final checksum is part of the result.
        self.extra[self.steps - 1] = "ema=" + float(sum(e.double().sum() for e in self.ema)).hex()
        return super().loss_lines()


class GANWorkload(Workload):
    """An MLP GAN on a mixture of 8 Gaussians in 64 dimensions: every step a discriminator
    update (real vs fake.detach(), BCE with logits) and then a generator update through
    the just-updated discriminator: two Adam optimizers (betas 0.5, 0.999) stepping in
    turn, two backward passes a step, and the generator's backward also filling the
    discriminator's gradients, which the next step's zero_grad drops. The generator's loss
    is the loss; the discriminator's goes to a second GPU buffer (" d=<hex>" on every
    line). No sync in the loop."""

    batch, zdim, dim, hidden, nmodes = 128, 32, 64, 256, 8

    def setup(self, mode="eager"):
        h = self.hidden
        self.G = nn.Sequential(nn.Linear(self.zdim, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                               nn.Linear(h, self.dim)).to(self.dev)
        self.D = nn.Sequential(nn.Linear(self.dim, h), nn.LeakyReLU(0.2), nn.Linear(h, h), nn.LeakyReLU(0.2),
                               nn.Linear(h, 1)).to(self.dev)
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=2e-4, betas=(0.5, 0.999), foreach=True)
        self.opt_d = torch.optim.Adam(self.D.parameters(), lr=2e-4, betas=(0.5, 0.999), foreach=True)
        self.centers = 2.0 * torch.randn(self.nmodes, self.dim, device=self.dev, generator=self.gen)
        self.real_label = torch.ones(self.batch, 1, device=self.dev)
        self.fake_label = torch.zeros(self.batch, 1, device=self.dev)
        self.d_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def batch_for(self, i):
        k = torch.randint(0, self.nmodes, (self.batch,), device=self.dev, generator=self.gen)
        real = self.centers.index_select(0, k) + 0.05 * torch.randn(
            self.batch, self.dim, device=self.dev, generator=self.gen)
        z = torch.randn(self.batch, self.zdim, device=self.dev, generator=self.gen)
        return real, z

    def step(self, i):
        real, z = self.batch_for(i)
        fake = self.G(z)
        self.opt_d.zero_grad(set_to_none=True)
        d_loss = (F.binary_cross_entropy_with_logits(self.D(real), self.real_label)
                  + F.binary_cross_entropy_with_logits(self.D(fake.detach()), self.fake_label))
        d_loss.backward()
        self.opt_d.step()
        self.opt_g.zero_grad(set_to_none=True)
        g_loss = F.binary_cross_entropy_with_logits(self.D(fake), self.real_label)
        g_loss.backward()
        self.opt_g.step()
        self.d_buf[i].copy_(d_loss.detach())
        return g_loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.d_buf)):
            self.extra[i] = "d=" + h
        return super().loss_lines()


class ExpandableWorkload(ClassifierWorkload):
    """The MLP (with dropout) and AdamW of mlp under the expandable-segments allocator
    (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, set by main() before torch is
    imported): segments are reserved address ranges whose pages the allocator maps and
    unmaps (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease) instead of
    cudaMalloc and cudaFree. A temporary tensor of 1 MiB, then 3 MiB, alternating every 7
    steps (the small and the large pool), is filled from the generator and reduced into the
    recorded loss, and torch.cuda.empty_cache() every 50 steps unmaps the free pages, so
    segments grow again afterwards. No sync in the loop apart from empty_cache's own."""

    tmp_mib = (1, 3)
    empty_every = 50

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=8, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        try:  # informational: whether the allocator did take the setting
            segs = torch.cuda.memory_snapshot()
            flags = [s.get("is_expandable") for s in segs]
            known = [f for f in flags if f is not None]
            print("workloads: expandable: PYTORCH_CUDA_ALLOC_CONF=%s; %s of %d segments expandable" % (
                os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), sum(1 for f in known if f) if known else "?", len(segs)))
        except Exception as e:  # noqa: BLE001 (a report only)
            print("workloads: expandable: memory_snapshot failed: %s" % e)

    def step(self, i):
        n = self.tmp_mib[(i // 7) % len(self.tmp_mib)] * 2 ** 20 // 4
        tmp = torch.empty(n, device=self.dev)
        tmp.normal_(generator=self.gen)
        aux = tmp.abs().mean()
        loss = super().step(i)
        del tmp
        if i % self.empty_every == self.empty_every - 1:
            torch.cuda.empty_cache()
        return loss.detach() + 1e-3 * aux


class LoaderWorkload(ClassifierWorkload):
    """mlp's model and AdamW fed the way most training scripts feed theirs: a
    torch.utils.data.DataLoader over a host TensorDataset, shuffled by a seeded generator
    (in the main process, so the batches do not depend on the workers), 2 worker
    processes (forked after CUDA is initialized; they never touch CUDA), pin_memory=True
    (PyTorch's pin-memory thread copies each batch into page-locked memory from its caching
    host allocator, which records an event after each non_blocking copy and queries it
    before reusing the block, from that thread), a new iterator every epoch (persistent
    workers), gradient clipping and a cosine learning-rate schedule (a new learning rate
    every step). zero_grad(set_to_none=True)."""

    nsamples = 64 * 12

    def setup(self, mode="eager"):
        super().setup()
        g = torch.Generator().manual_seed(2468)
        X = torch.randn(self.nsamples, self.din, generator=g)
        Y = torch.randint(0, self.nout, (self.nsamples,), generator=g)
        self.loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(X, Y), batch_size=self.batch, shuffle=True,
            generator=torch.Generator().manual_seed(1357), num_workers=2, pin_memory=True,
            persistent_workers=True, drop_last=True)
        self.batches = iter(self.loader)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=max(1, self.steps))

    def next_batch(self):
        try:
            return next(self.batches)
        except StopIteration:  # a new epoch
            self.batches = iter(self.loader)
            return next(self.batches)

    def step(self, i):
        xb, yb = self.next_batch()
        x = xb.to(self.dev, non_blocking=True)
        y = yb.to(self.dev, non_blocking=True)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        return loss


class DecodeWorkload(Workload):
    """Inference, not training: greedy autoregressive decoding with a small GPT-style decoder
    (eval mode, torch.inference_mode, no optimizer) and a preallocated static KV cache of
    128 positions for a batch of 4 sequences. A sequence starts with an 8-token prompt
    from the generator, prefilled in one step; every later step feeds the token chosen
    last (a persistent GPU buffer, never read back to steer), copies its keys and values
    into the cache at the current position and attends over the whole cache with a mask
    computed from a GPU position tensor, so every decode step has the same shapes; the
    token is picked by argmax (max over the vocabulary) and read to the host with .cpu()
    every step, as a serving loop does (a sync per token). When the cache is full the
    position goes back to 0 and a new prompt is drawn. The step's "loss" is the sum over
    the batch of the chosen tokens' float32 logits, kept in the GPU buffer; the tokens read
    each step are appended to its line (" tok=a,b,c,d")."""

    syncs = True
    batch, vocab, maxlen, prompt_len, d, heads, layers = 4, 512, 128, 8, 128, 4, 4

    def setup(self, mode="eager"):
        self.model = KVDecoder(self.vocab, self.maxlen, self.d, self.heads, self.layers).to(self.dev)
        self.model.eval()
        hd = self.d // self.heads
        with torch.inference_mode():
            self.caches = [tuple(torch.zeros(self.batch, self.heads, self.maxlen, hd, device=self.dev)
                                 for _ in range(2)) for _ in range(self.layers)]
            self.prompt = torch.zeros(self.batch, self.prompt_len, dtype=torch.long, device=self.dev)
            self.tok = torch.zeros(self.batch, 1, dtype=torch.long, device=self.dev)
        self.pos = 0            # host-side: the only thing that steers what a step launches
        self.tokens = {}        # step -> the tokens read to the host

    def step(self, i):
        with torch.inference_mode():
            if self.pos == 0:   # a new sequence: prefill its prompt
                self.prompt.random_(0, self.vocab, generator=self.gen)
                idx = self.prompt
            else:
                idx = self.tok
            logits = self.model(idx, self.pos, self.caches)     # B, vocab (float32)
            best, nxt = logits.max(dim=-1)
            self.tok.copy_(nxt.unsqueeze(1))
            self.tokens[i] = nxt.cpu().tolist()                 # the per-token sync
            self.pos += idx.shape[1]
            if self.pos >= self.maxlen:
                self.pos = 0
            return best.sum()

    def loss_lines(self):
        for i, toks in self.tokens.items():
            self.extra[i] = "tok=" + ",".join(str(t) for t in toks)
        return super().loss_lines()


class ServeWorkload(Workload):
    """Inference as a server answers requests: batches of 8, 16 or 32 inputs, the size
    drawn each step in a seeded random order (a host-side generator, so the same order in
    every run), through the MLP in eval mode under torch.inference_mode; the answer (the
    argmax class of each input) is read to the host with .cpu() every step. The step's
    value is the sum of the chosen logits; the classes read are appended to its line.
    The launch sequence repeats per batch size, never as a whole period: graft builds a
    size's graphs only where that size happened to come several times in a row."""

    syncs = True
    sizes = (8, 16, 32)
    din, hidden, nout = 256, 512, 10

    def setup(self, mode="eager"):
        import random
        self.model = MLP(self.din, self.hidden, self.nout, layers=8).to(self.dev)
        self.model.eval()
        self.order = random.Random(4321)
        self.answers = {}

    def step(self, i):
        n = self.order.choice(self.sizes)
        with torch.inference_mode():
            x = torch.randn(n, self.din, device=self.dev, generator=self.gen)
            best, cls = self.model(x).max(dim=-1)
            self.answers[i] = cls.cpu().tolist()    # the reply: a sync per request
            return best.sum()

    def loss_lines(self):
        for i, a in self.answers.items():
            self.extra[i] = "cls=" + "".join(str(c) for c in a)
        return super().loss_lines()


# --------------------------------------------------------------------------- odd but legal
# Patterns real scripts have now and then, chosen for what a tool that holds launches back
# and replays them as graphs could get wrong: the RNG state moved by hand, timing events
# read back, the cache emptied right after work on a freed block, pinned host buffers
# rewritten once an event says a copy is done, tensors handed between streams with
# record_stream, steps whose ops depend on a value read back, expert shapes set by
# counts read back, the program's own graphed forward and backward, and optimizer steps
# skipped on overflow.

class RNGStateWorkload(ClassifierWorkload):
    """The MLP with dropout (0.2) and Gaussian input noise drawn from the default CUDA
    generator, whose state the loop moves by hand as resume and debugging code does:
    torch.cuda.set_rng_state() every 11th step restores the state that
    torch.cuda.get_rng_state() saved on the last multiple of 7 (the dropout masks and the
    noise of that earlier step come again: the Philox offsets the kernels get go back),
    and torch.cuda.manual_seed() every 50th step (a new seed, the offset back to 0). The
    batch generator's own state (torch.Generator.get_state/set_state) is saved every 13th
    step and restored 12 steps later, which then sees that earlier batch again. AdamW
    (foreach). No sync in the loop."""

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.2).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.rng_saved = torch.cuda.get_rng_state(self.dev)
        self.gen_saved = self.gen.get_state()

    def step(self, i):
        if i % 50 == 49:
            torch.cuda.manual_seed(7000 + i)
        if i % 11 == 10:
            torch.cuda.set_rng_state(self.rng_saved, self.dev)
        if i % 7 == 0:
            self.rng_saved = torch.cuda.get_rng_state(self.dev)
        if i % 13 == 0:
            self.gen_saved = self.gen.get_state()
        elif i % 13 == 12:
            self.gen.set_state(self.gen_saved)
        x, y = self.batch_for(i)
        x = x + 0.1 * torch.randn(x.shape, device=self.dev)    # the default generator
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss


class TimingWorkload(ClassifierWorkload):
    """The MLP timed as training scripts log step times: every step creates three
    torch.cuda.Event(enable_timing=True) and records them before the forward pass, after
    it and after the optimizer step; every 10th step the loop waits for the newest of them
    (Event.synchronize() on one such step, a busy-wait on Event.query() on the next, as
    asynchronous loggers poll), reads elapsed_time() between the pending events and drops
    them (cuEventDestroy; the driver may give the same handles to the next step's events).
    Only whether the times are finite and in order (the forward pass within its step,
    each step after the one before) reaches the line (" t=ok" or " t=bad"), never a time."""

    read_every = 10

    def setup(self, mode="eager"):
        super().setup()
        self.pending = []

    def step(self, i):
        x, y = self.batch_for(i)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        ev[0].record()
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        ev[1].record()
        loss.backward()
        self.opt.step()
        ev[2].record()
        self.pending.append(ev)
        if i % self.read_every == self.read_every - 1:
            newest = ev[2]
            if (i // self.read_every) % 2 == 0:
                newest.synchronize()
            else:
                while not newest.query():
                    pass
            ok, prev_end = True, None
            for e0, e1, e2 in self.pending:
                t_fwd, t_step = e0.elapsed_time(e1), e0.elapsed_time(e2)
                ok = ok and math.isfinite(t_step) and 0.0 <= t_fwd <= t_step
                if prev_end is not None:
                    ok = ok and prev_end.elapsed_time(e0) >= 0.0
                prev_end = e2
            self.extra[i] = "t=ok" if ok else "t=bad"
            self.pending = []
        return loss


class EmptyCacheWorkload(ClassifierWorkload):
    """The MLP (with dropout) and AdamW under the default caching allocator (segments from
    cudaMalloc, given back with cudaFree), churned: every 5th step a 64 MiB temporary (a
    segment of its own, and its square, another) is filled from the generator, reduced into
    the recorded loss and freed at once; every 7th step torch.cuda.empty_cache() follows
    right there and gives every unused segment back (on steps that had a temporary, its
    segment just after its kernels were issued), so the step's activations come from new
    segments, possibly at other addresses. torch.cuda.memory_allocated() and
    memory_reserved() are read every step and appended to the line
    (" mem=<allocated>/<reserved>", bytes: the allocator's own counts, which follow from
    the program's allocations alone)."""

    big_mib = 64

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=8, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model

    def step(self, i):
        aux = None
        if i % 5 == 4:
            tmp = torch.empty(self.big_mib * 2 ** 20 // 4, device=self.dev)
            tmp.normal_(generator=self.gen)
            aux = tmp.square().mean()
            del tmp
        if i % 7 == 6:
            torch.cuda.empty_cache()
        loss = super().step(i).detach()
        self.extra[i] = "mem=%d/%d" % (torch.cuda.memory_allocated(self.dev), torch.cuda.memory_reserved(self.dev))
        return loss if aux is None else loss + 1e-3 * aux


class PinnedWorkload(ClassifierWorkload):
    """Batches made on the host into two pinned buffers in turn (double buffering), as
    hand-written prefetchers do: during step i the host waits (Event.synchronize()) for
    the event recorded after the last copy out of the buffer it is about to rewrite
    (issued two steps before), writes batch i+1 into it (CPU normal_ and random_ from a
    generator seeded with the step number) and copies it to the GPU with
    .to(non_blocking=True) on the compute stream ahead of step i's own work, recording the
    event after the copy. The loss goes back the same way: copied non_blocking into one of
    two pinned slots, an event recorded after it, and read by the host during the next step
    after that event's synchronize(); the value read is appended to the line
    (" host=<hex>", the loss itself when every wait held). AdamW (foreach)."""

    def setup(self, mode="eager"):
        super().setup()
        self.host_gen = torch.Generator()
        self.xh = [torch.empty(self.batch, self.din, pin_memory=True) for _ in range(2)]
        self.yh = [torch.empty(self.batch, dtype=torch.long, pin_memory=True) for _ in range(2)]
        self.lh = [torch.empty((), pin_memory=True) for _ in range(2)]
        self.copied = [torch.cuda.Event() for _ in range(2)]   # the copy out of buffer k is done
        self.landed = [torch.cuda.Event() for _ in range(2)]   # the loss is in slot k
        self.next = self.prefetch(0)

    def prefetch(self, i):
        k = i % 2
        self.copied[k].synchronize()   # returns at once for an event never recorded
        self.host_gen.manual_seed(50000 + i)
        self.xh[k].normal_(generator=self.host_gen)
        self.yh[k].random_(0, self.nout, generator=self.host_gen)
        x = self.xh[k].to(self.dev, non_blocking=True)
        y = self.yh[k].to(self.dev, non_blocking=True)
        self.copied[k].record()
        return x, y

    def read_back(self, i):
        k = i % 2
        self.landed[k].synchronize()
        self.extra[i] = "host=" + f32_hex(self.lh[k].item())

    def step(self, i):
        x, y = self.next
        self.next = self.prefetch(i + 1)
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.lh[i % 2].copy_(loss.detach(), non_blocking=True)
        self.landed[i % 2].record()
        if i > 0:
            self.read_back(i - 1)
        return loss

    def loss_lines(self):
        if self.steps - 1 not in self.extra:
            self.read_back(self.steps - 1)
        return super().loss_lines()


class RecordStreamWorkload(ClassifierWorkload):
    """Distillation with the teacher on a side stream (high priority): on two steps of
    three the side stream waits for the compute stream (wait_stream), runs a frozen teacher
    MLP on the batch and softens its logits, the compute stream waits for the side stream,
    and the tensors are handed over with record_stream(): the batch, made on the compute
    stream, as used on the side stream, the soft targets, made on the side stream, as
    used on the compute stream; both are dropped after use (del), so the caching allocator
    records events at those frees and queries them before it hands the blocks out again.
    Every third step skips the side stream: the teacher runs on the compute stream. The
    student's loss: cross-entropy plus the KL divergence to the soft targets; AdamW."""

    def setup(self, mode="eager"):
        super().setup()
        self.teacher = MLP(self.din, self.hidden, self.nout, layers=4).to(self.dev)
        self.teacher.requires_grad_(False)
        self.teacher.eval()
        self.side = torch.cuda.Stream(priority=-1)

    def soft_targets(self, x):
        with torch.no_grad():
            return F.softmax(self.teacher(x) / 2.0, dim=-1)

    def step(self, i):
        main = torch.cuda.current_stream()
        x, y = self.batch_for(i)
        if i % 3 != 2:
            self.side.wait_stream(main)
            with torch.cuda.stream(self.side):
                soft = self.soft_targets(x)
            x.record_stream(self.side)
            main.wait_stream(self.side)
            soft.record_stream(main)
        else:
            soft = self.soft_targets(x)
        self.opt.zero_grad(set_to_none=False)
        logits = self.model(x)
        loss = F.cross_entropy(logits, y) + F.kl_div(F.log_softmax(logits / 2.0, dim=-1), soft,
                                                     reduction="batchmean")
        del soft, x
        loss.backward()
        self.opt.step()
        return loss


class CondStepWorkload(ClassifierWorkload):
    """Host-side branching on a value read back in the middle of the step, as loops with
    hard-example or loss-spike logic do: after the forward pass loss.item() is compared
    with a running average of the earlier losses (host floats). Above 1.01 times it, the
    "hard" branch: an L2 penalty over the weight matrices joins the loss before backward,
    and after the optimizer step comes a second forward, backward and step on the same
    batch; below 0.99 times it, "skip": no backward, no optimizer step; otherwise one plain
    step. Which ops a step issues thus depends on the data, deterministically, in no fixed
    period. The MLP with dropout, AdamW (foreach); " b=h", " b=p" or " b=s" on every line."""

    syncs = True

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.weights = [p for p in self.model.parameters() if p.dim() > 1]
        self.avg = None

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        v = loss.item()                                 # the sync the branch hangs on
        avg = v if self.avg is None else self.avg
        self.avg = 0.9 * avg + 0.1 * v
        if v > 1.01 * avg:
            branch = "h"
            reg = sum(w.square().sum() for w in self.weights)
            (loss + 1e-4 * reg).backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=False)
            F.cross_entropy(self.model(x), y).backward()
            self.opt.step()
        elif v < 0.99 * avg:
            branch = "s"
        else:
            branch = "p"
            loss.backward()
            self.opt.step()
        self.extra[i] = "b=" + branch
        return loss


class MoEWorkload(Workload):
    """A mixture-of-experts layer with top-2 routing: a router (Linear, softmax) scores 8
    expert MLPs for each of 256 tokens, torch.topk picks two per token, their gate values
    renormalised; the 512 (token, expert) pairs are sorted by expert (torch.sort, stable),
    the tokens per expert are counted on the GPU and read to the host with .tolist() every
    step (a sync whose values set the shapes of everything after it), the tokens are
    gathered with index_select, each expert runs on its slice (an expert that got no token
    is skipped and gets no gradient, so the optimizer's parameter list changes too), and
    the gated outputs are summed back per token with index_add (deterministic under
    use_deterministic_algorithms). The labels come from a fixed random projection, so the
    routing moves as the model learns; a load-balancing term joins the loss; AdamW
    (foreach) with zero_grad(set_to_none=True). The counts end every line (" n=a,b,...")."""

    syncs = True
    tokens, din, d, experts, nout = 256, 64, 128, 8, 10

    def setup(self, mode="eager"):
        d = self.d
        self.model = nn.ModuleDict({
            "inp": nn.Linear(self.din, d),
            "router": nn.Linear(d, self.experts, bias=False),
            "experts": nn.ModuleList([nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
                                      for _ in range(self.experts)]),
            "head": nn.Linear(d, self.nout)}).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.ids = torch.arange(self.experts, device=self.dev)
        self.label_proj = torch.randn(self.din, self.nout, device=self.dev, generator=self.gen)
        self.counts = {}

    def step(self, i):
        m = self.model
        x = torch.randn(self.tokens, self.din, device=self.dev, generator=self.gen)
        y = (x @ self.label_proj).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        h = F.gelu(m["inp"](x))                                      # N, d
        probs = F.softmax(m["router"](h), dim=-1)                    # N, E
        gate, expert = probs.topk(2, dim=-1)                         # N, 2
        gate = gate / gate.sum(dim=-1, keepdim=True)
        flat = expert.reshape(-1)                                    # 2N: token t's pairs at 2t, 2t+1
        order = torch.sort(flat, stable=True).indices                # the pairs grouped by expert
        token = order // 2
        counts = (flat.unsqueeze(1) == self.ids).sum(dim=0)          # E, on the GPU
        sizes = counts.tolist()                                      # the sync; shapes from here on
        xs = h.index_select(0, token)                                # 2N, d in expert order
        outs, start = [], 0
        for e, n in enumerate(sizes):
            if n:
                outs.append(m["experts"][e](xs.narrow(0, start, n)))
            start += n
        w = gate.reshape(-1).index_select(0, order).unsqueeze(1)
        mixed = torch.zeros_like(h).index_add(0, token, torch.cat(outs) * w)
        logits = m["head"](h + mixed)
        balance = self.experts * (counts.float() / flat.numel() * probs.mean(dim=0)).sum()
        loss = F.cross_entropy(logits, y) + 0.01 * balance
        loss.backward()
        self.opt.step()
        self.counts[i] = sizes
        return loss

    def loss_lines(self):
        for i, n in self.counts.items():
            self.extra[i] = "n=" + ",".join(str(c) for c in n)
        return super().loss_lines()


class GraphedWorkload(ClassifierWorkload):
    """Partial-network capture by the program itself, with
    torch.cuda.make_graphed_callables: the front and the back of an MLP (each with dropout,
    all trainable) are graphed together (one memory pool; a forward and a backward graph
    each, replayed every step by their autograd function after the inputs are copied into
    the graphs' static buffers), with an eager LayerNorm between them, and the loss, the
    accumulation of the graphs' static gradients into .grad and AdamW (foreach,
    zero_grad(set_to_none=True)) eager around them. Dropout inside the graphs draws from
    the default generator through PyTorch's graph-safe Philox state (seed and offset
    written to device tensors by kernels just before each replay). Unlike partgraph, the
    graphed part trains, has a backward graph and random numbers. Every 25th step an eval
    pass (eval mode: the modules run their ordinary eager forward, dropout off) under
    no_grad; its loss is appended (" eval=<hex>")."""

    eval_every = 25
    neval = 256

    def setup(self, mode="eager"):
        h = self.hidden
        front = nn.Sequential(nn.Linear(self.din, h), nn.ReLU(), nn.Dropout(0.1),
                              nn.Linear(h, h), nn.ReLU()).to(self.dev)
        self.mid = nn.LayerNorm(h).to(self.dev)
        back = nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.Dropout(0.1), nn.Linear(h, self.nout)).to(self.dev)
        x0 = torch.randn(self.batch, self.din, device=self.dev, generator=self.gen)
        h0 = torch.randn(self.batch, h, device=self.dev, generator=self.gen).requires_grad_()
        # Returns the same modules, their forward replaced by the graphs' (in training mode).
        self.front, self.back = torch.cuda.make_graphed_callables((front, back), ((x0,), (h0,)))
        self.model = nn.ModuleList([self.front, self.mid, self.back])
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = torch.randint(0, self.nout, (self.neval,), device=self.dev, generator=self.gen)
        self.eval_buf = torch.zeros(self.steps // self.eval_every + 1, dtype=torch.float32, device=self.dev)
        self.eval_steps = []

    def forward(self, x):
        return self.back(self.mid(self.front(x)))

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.forward(x), y)
        loss.backward()
        self.opt.step()
        if (i + 1) % self.eval_every == 0:
            self.model.eval()
            with torch.no_grad():
                self.eval_buf[len(self.eval_steps)].copy_(F.cross_entropy(self.forward(self.Xe), self.Ye))
            self.eval_steps.append(i)
            self.model.train()
        return loss

    def loss_lines(self):
        if self.eval_steps:
            for s, h in zip(self.eval_steps, tensor_hexes(self.eval_buf[:len(self.eval_steps)])):
                self.extra[s] = "eval=" + h
        return super().loss_lines()


class ClipSkipWorkload(ClassifierWorkload):
    """float16 autocast with a GradScaler whose initial scale (2**40) is far too large and
    that grows again quickly (growth_interval 4): the first steps overflow until the scale
    has backed off, and afterwards a step overflows whenever the scale has grown past what
    the gradients bear, so every few steps the optimizer step is skipped. Clipping in the
    documented order: scaler.unscale_(opt), clip_grad_norm_(error_if_nonfinite=False; an
    overflowed step's norm is inf or nan and its gradients are scaled by what follows from
    it), scaler.step(opt) (skipped when unscale_ found an inf: a sync), scaler.update(),
    then a LambdaLR schedule (linear warmup, halved every 100 steps) stepping every step,
    skipped or not. The scale after update (get_scale(), a sync) and the gradient norm end
    every line (" s=<hex> n=<hex>"). The MLP without dropout, AdamW (foreach)."""

    syncs = True

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        kw = dict(init_scale=2.0 ** 40, growth_factor=2.0, backoff_factor=0.5, growth_interval=4)
        try:
            self.scaler = torch.amp.GradScaler("cuda", **kw)
        except (AttributeError, TypeError):
            self.scaler = torch.cuda.amp.GradScaler(**kw)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / 20.0) * 0.5 ** (s // 100))
        self.norm_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.scales = {}

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = F.cross_entropy(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, error_if_nonfinite=False)
        self.scaler.step(self.opt)
        self.scaler.update()
        self.sched.step()
        self.norm_buf[i].copy_(norm.detach())
        self.scales[i] = self.scaler.get_scale()
        return loss.float()

    def loss_lines(self):
        norms = tensor_hexes(self.norm_buf)
        for i, s in self.scales.items():
            self.extra[i] = "s=%s n=%s" % (f32_hex(s), norms[i])
        return super().loss_lines()


# --------------------------------------------------------------------------- libraries and odd loops
# CUDA libraries and PyTorch features the cases above leave out (cuFFT and its plan cache,
# complex tensors, cuSOLVER, cuSPARSE and sparse gradients, scatter and unique, optimizers
# that evaluate the model several times a step, weight averaging, parametrizations whose
# kernels depend on values read back), and odd but legal loops: pageable host buffers
# rewritten as soon as a non_blocking copy out of them returns, the current stream set
# without a context manager, a stream polled with query().

class TaskWorkload(ClassifierWorkload):
    """mlp's batches with labels that follow from the inputs (the argmax of a fixed random
    projection), so the loss falls as the model learns, unlike mlp's random labels."""

    def label_setup(self):
        self.label_proj = torch.randn(self.din, self.nout, device=self.dev, generator=self.gen)

    def host_dataset_setup(self):
        """A 6-layer MLP with dropout under foreach AdamW at lr0 (self.lr), and a dataset of
        self.dataset labelled rows made on the GPU and kept in host memory (self.host_x,
        self.host_y: pinhost's and hostreg's batches come from it)."""
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.params = list(self.model.parameters())
        self.lr = self.lr0
        self.opt = torch.optim.AdamW(self.params, lr=self.lr, weight_decay=0.01, foreach=True)
        self.label_setup()
        with torch.no_grad():
            x = torch.randn(self.dataset, self.din, device=self.dev, generator=self.gen)
            y = (x @ self.label_proj).argmax(dim=-1)
        self.host_x, self.host_y = x.cpu(), y.cpu()

    def batch_for(self, i):
        x = torch.randn(self.batch, self.din, device=self.dev, generator=self.gen)
        return x, (x @ self.label_proj).argmax(dim=-1)


class FNOWorkload(Workload):
    """A 1-D Fourier neural operator learning the heat equation's solution operator (random
    Fourier series in, their coefficients damped by exp(-k^2 t) out) at a resolution that
    changes every 5 steps among 64, 96 and 128 grid points: cuFFT R2C and C2R transforms in
    forward and backward, complex64 weights mixed by a complex batched GEMM (einsum), Adam
    (foreach) over complex and real parameters. The loss adds a spectral term (the error's
    rfft, squared magnitude weighted by frequency) to the MSE. PyTorch's cuFFT plan cache
    is cut to 4 plans, fewer than the three resolutions need, so plans are evicted and made
    again as the resolution changes (cufftDestroy, cufftMakePlanMany: the library's own
    allocations and copies in the middle of a step), and it is cleared every 50 steps.
    The spectral term ends every line (" spec=<hex>"). No sync in the loop."""

    batch, K, t, resolutions, switch_every, plan_cache, clear_every = 32, 8, 0.05, (64, 96, 128), 5, 4, 50

    def setup(self, mode="eager"):
        self.model = FNO1d(width=32, modes=12, layers=3).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, foreach=True)
        self.plans = torch.backends.cuda.cufft_plan_cache[self.dev.index]
        self.plans.max_size = self.plan_cache
        k = torch.arange(1, self.K + 1, dtype=torch.float32, device=self.dev)
        self.coef_scale = (1.0 / k).repeat(2)                            # smoother inputs
        self.decay = torch.exp(-k.square() * self.t).repeat(2)           # sin and cos of each k
        self.grids = {}
        for n in self.resolutions:
            x = torch.arange(n, dtype=torch.float32, device=self.dev) * (2 * math.pi / n)
            basis = torch.cat([torch.sin(k[:, None] * x), torch.cos(k[:, None] * x)])   # 2K, n
            freq_w = 1.0 + torch.arange(n // 2 + 1, dtype=torch.float32, device=self.dev) / self.K
            self.grids[n] = (basis, x / (2 * math.pi), freq_w)
        self.spec_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def step(self, i):
        n = self.resolutions[(i // self.switch_every) % len(self.resolutions)]
        basis, grid, freq_w = self.grids[n]
        a = torch.randn(self.batch, 2 * self.K, device=self.dev, generator=self.gen) * self.coef_scale
        u = a @ basis
        target = (a * self.decay) @ basis
        self.opt.zero_grad(set_to_none=True)
        pred = self.model(u, grid)
        err = torch.fft.rfft(pred - target, norm="ortho")                # B, n/2+1 complex
        spec = (torch.view_as_real(err).square().sum(-1) * freq_w).mean()
        loss = F.mse_loss(pred, target) + 0.1 * spec
        loss.backward()
        self.opt.step()
        if i % self.clear_every == self.clear_every - 1:
            self.plans.clear()
        self.spec_buf[i].copy_(spec.detach())
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.spec_buf)):
            self.extra[i] = "spec=" + h
        return super().loss_lines()


class LinalgWorkload(Workload):
    """Dense linear algebra through cuSOLVER and cuBLAS in every step (cuSOLVER chosen with
    preferred_linalg_library, so MAGMA's hybrid CPU paths stay out): a Gaussian-process
    head on learned, normalised features. The kernel matrix K (128x128, learned amplitude
    and noise) is factored with linalg.cholesky_ex (its info stays on the GPU) on two steps
    of three and with linalg.cholesky on the third (which reads info back: a sync);
    cholesky_solve gives K^-1 y, the log-determinant comes from L's diagonal, and the
    negative log marginal likelihood joins the predictive MSE on query points. A
    least-squares fit of the targets through linalg.qr, four 32x32 systems solved at once
    with linalg.solve_ex (LU, no check) and a penalty on the log eigenvalues of the
    features' covariance from linalg.eigvalsh (which checks its info: a sync) join the loss;
    all are differentiated. Adam (foreach). The smallest eigenvalue and the summed info
    codes (solve_ex's, and cholesky_ex's on its steps) end every line (" ev=<hex>
    info=<n>"; both written to GPU buffers every step and read after the loop)."""

    syncs = True
    n, nq, din, feat, blocks = 128, 64, 16, 32, 4
    checked_every = 3

    def setup(self, mode="eager"):
        try:
            torch.backends.cuda.preferred_linalg_library("cusolver")
        except (AttributeError, RuntimeError) as e:  # informational: the default stays
            print("workloads: linalg: preferred_linalg_library('cusolver') failed: %s" % e)
        self.feat_net = MLP(self.din, 128, self.feat, layers=3).to(self.dev)
        self.log_noise = nn.Parameter(torch.full((), -2.0, device=self.dev))
        self.log_amp = nn.Parameter(torch.zeros((), device=self.dev))
        self.opt = torch.optim.Adam(list(self.feat_net.parameters()) + [self.log_noise, self.log_amp],
                                    lr=1e-3, foreach=True)
        self.proj = torch.randn(self.din, 4, device=self.dev, generator=self.gen)
        self.eye_n = torch.eye(self.n, device=self.dev)
        self.eye_f = torch.eye(self.feat, device=self.dev)
        self.ev_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.info_buf = torch.zeros(self.steps, dtype=torch.int32, device=self.dev)
        self.checked = set()

    def target(self, x):
        return torch.sin(x @ self.proj).sum(dim=-1, keepdim=True)

    def step(self, i):
        x = torch.randn(self.n, self.din, device=self.dev, generator=self.gen)
        xq = torch.randn(self.nq, self.din, device=self.dev, generator=self.gen)
        y = self.target(x) + 0.05 * torch.randn(self.n, 1, device=self.dev, generator=self.gen)
        yq = self.target(xq)
        self.opt.zero_grad(set_to_none=True)
        phi = F.normalize(self.feat_net(x), dim=-1)                      # n, feat; unit rows
        phq = F.normalize(self.feat_net(xq), dim=-1)
        amp = 2.0 * torch.sigmoid(self.log_amp)                         # bounded: K stays well conditioned
        K = amp * (phi @ phi.T) + (F.softplus(self.log_noise) + 1e-2) * self.eye_n
        if i % self.checked_every == self.checked_every - 1:
            L = torch.linalg.cholesky(K)                                 # reads info back: a sync
            self.checked.add(i)
            info = None
        else:
            L, info = torch.linalg.cholesky_ex(K)                        # info stays on the GPU
        alpha = torch.cholesky_solve(y, L)                               # K^-1 y
        nll = 0.5 * (y * alpha).sum() + L.diagonal().log().sum()
        mean = amp * (phq @ phi.T) @ alpha
        Q, _ = torch.linalg.qr(phi)                                      # reduced: n x feat
        lsq = F.mse_loss(Q @ (Q.T @ y), y)
        B = phi.reshape(self.blocks, self.n // self.blocks, self.feat)   # 4 x 32 x 32
        A = B @ B.mT + self.eye_f
        sol, sinfo = torch.linalg.solve_ex(A, B.mean(dim=2, keepdim=True))
        cov = phi.T @ phi / self.n + 1e-3 * self.eye_f
        ev = torch.linalg.eigvalsh(cov)                                  # checks its info: a sync
        loss = (nll / self.n + F.mse_loss(mean, yq) + 0.1 * lsq + 0.01 * ev.log().square().mean()
                + 1e-3 * sol.square().mean())
        loss.backward()
        self.opt.step()
        self.ev_buf[i].copy_(ev[0].detach())
        codes = sinfo.sum() if info is None else sinfo.sum() + info
        self.info_buf[i].copy_(codes)
        return loss

    def loss_lines(self):
        evs = tensor_hexes(self.ev_buf)
        infos = self.info_buf.tolist()
        for i in range(self.steps):
            self.extra[i] = "ev=%s info=%d" % (evs[i], infos[i])
        return super().loss_lines()


class LBFGSWorkload(Workload):
    """Full-batch style regression with torch.optim.LBFGS and a closure: every step the
    optimizer calls the closure (zero_grad, forward, backward) as often as its strong-Wolfe
    line search and its inner iterations (at most 4) need, reading values back to the host
    to decide (float(loss), the gradient's max norm against tolerance_grad, directional
    derivatives, cubic interpolation on the host), so the number of forward and backward
    passes a step issues, and the step lengths passed to the kernels, depend on the data.
    The MLP (tanh targets from a fixed projection, 256 samples a step, MSE); the loss is the
    first closure evaluation's; the number of closure calls ends every line (" ev=<n>")."""

    syncs = True
    batch, din, hidden = 256, 32, 64

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, 1, layers=3).to(self.dev)
        self.opt = torch.optim.LBFGS(self.model.parameters(), lr=1.0, max_iter=4, history_size=8,
                                     line_search_fn="strong_wolfe")
        self.w = torch.randn(self.din, 8, device=self.dev, generator=self.gen) / math.sqrt(self.din)
        self.evals = {}

    def step(self, i):
        x = torch.randn(self.batch, self.din, device=self.dev, generator=self.gen)
        y = torch.tanh(x @ self.w).sum(dim=-1, keepdim=True)
        count = [0]

        def closure():
            count[0] += 1
            self.opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(self.model(x), y)
            loss.backward()
            return loss

        loss = self.opt.step(closure)
        self.evals[i] = count[0]
        return loss

    def loss_lines(self):
        for i, n in self.evals.items():
            self.extra[i] = "ev=%d" % n
        return super().loss_lines()


class PlateauWorkload(TaskWorkload):
    """ReduceLROnPlateau driven from the host: every step reads the loss back with .item()
    (the sync), keeps a moving average of it in a host float and passes that to
    scheduler.step(); after 6 steps without a 0.1% improvement the scheduler multiplies
    the learning rate (a Python float, so a kernel argument) by 0.7, with a cooldown of 4
    steps, down to 1e-5. The loop keeps the weights of the best step so far (state_dict
    clones: device-to-device copies, made only on steps that improved) and loads them back
    into the model (load_state_dict: copies into the live parameters) whenever the learning
    rate was cut, so which copies a step issues depends on the losses read. Adam with
    amsgrad, one parameter at a time (foreach=False). The learning rate after the step and
    what the step did (s: snapshot, r: restore, -: neither) end every line
    (" lr=<float.hex> b=s|r|-")."""

    syncs = True

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=4).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, amsgrad=True, foreach=False)
        self.fwd = self.model
        self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self.opt, mode="min", factor=0.7, patience=6, threshold=0.001, cooldown=4, min_lr=1e-5)
        self.label_setup()
        self.best_state = None
        self.avg = None

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        v = loss.item()                                                  # the sync
        self.avg = v if self.avg is None else 0.9 * self.avg + 0.1 * v
        best, lr = self.sched.best, self.opt.param_groups[0]["lr"]
        self.sched.step(self.avg)
        mark = "-"
        if self.sched.best < best:
            self.best_state = {k: t.detach().clone() for k, t in self.model.state_dict().items()}
            mark = "s"
        new_lr = self.opt.param_groups[0]["lr"]
        if new_lr != lr and self.best_state is not None:
            self.model.load_state_dict(self.best_state)
            mark = "r"
        self.extra[i] = "lr=%s b=%s" % (float(new_lr).hex(), mark)
        return loss


class SWAWorkload(TaskWorkload):
    """Stochastic weight averaging as torch.optim.swa_utils does it: an MLP with BatchNorm1d
    trained with SGD (momentum, weight decay, foreach) under CosineAnnealingLR for the first
    third of the steps, then under SWALR (created at that step), with
    AveragedModel.update_parameters() after every later step (it reads n_averaged back twice
    to decide whether to copy or average: syncs; then a foreach running average, and the
    model's BatchNorm buffers copied over). Every 25th step of the averaging
    phase swa_utils.update_bn() recomputes the averaged model's BatchNorm statistics over 4
    fixed batches (reset_running_stats, momentum None: each BatchNorm reads
    num_batches_tracked back with float() on every batch, a sync), and the averaged model is
    evaluated in eval mode; its loss is appended on those steps (" swa=<hex>")."""

    eval_every = 25
    neval = 256

    def setup(self, mode="eager"):
        from torch.optim import swa_utils
        self.swa = swa_utils
        h = self.hidden
        self.model = nn.Sequential(nn.Linear(self.din, h), nn.BatchNorm1d(h), nn.ReLU(),
                                   nn.Linear(h, h), nn.BatchNorm1d(h), nn.ReLU(),
                                   nn.Linear(h, self.nout)).to(self.dev)
        self.fwd = self.model
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4,
                                   foreach=True)
        self.swa_start = max(1, self.steps // 3)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=self.swa_start)
        self.swa_model = self.swa.AveragedModel(self.model)
        self.swa_sched = None
        self.label_setup()
        self.bn_batches = [torch.randn(self.batch, self.din, device=self.dev, generator=self.gen)
                           for _ in range(4)]
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = (self.Xe @ self.label_proj).argmax(dim=-1)
        self.eval_buf = torch.zeros(self.steps // self.eval_every + 1, dtype=torch.float32, device=self.dev)
        self.eval_steps = []

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        if i < self.swa_start:
            self.sched.step()
            return loss
        if self.swa_sched is None:
            self.swa_sched = self.swa.SWALR(self.opt, swa_lr=0.02, anneal_epochs=10)
        self.swa_model.update_parameters(self.model)
        self.swa_sched.step()
        if (i - self.swa_start) % self.eval_every == self.eval_every - 1:
            self.swa.update_bn(self.bn_batches, self.swa_model)
            self.swa_model.eval()
            with torch.no_grad():
                self.eval_buf[len(self.eval_steps)].copy_(F.cross_entropy(self.swa_model(self.Xe), self.Ye))
            self.eval_steps.append(i)
            self.swa_model.train()
        return loss

    def loss_lines(self):
        if self.eval_steps:
            for s, h in zip(self.eval_steps, tensor_hexes(self.eval_buf[:len(self.eval_steps)])):
                self.extra[s] = "swa=" + h
        return super().loss_lines()


class ParametrizeWorkload(TaskWorkload):
    """Weights computed from other tensors every forward pass, by
    torch.nn.utils.parametrizations: weight_norm on the first layer (the fused _weight_norm
    kernels), spectral_norm on the second and the last (a power iteration on every
    training-mode forward pass that updates the _u and _v buffers in place under no_grad,
    two iterations on the last), and orthogonal on a square middle layer (matrix_exp of a
    skew-symmetric matrix: PyTorch reads the matrix's norm back to pick the degree of its
    Taylor approximation and the number of squarings, a sync whose value sets how many
    GEMMs the forward pass, and the matrix_exp of a doubled block matrix in backward,
    launch; the norm grows as the layer trains, so the launch sequence changes along the
    run). AdamW (foreach) over the parametrizations' originals. Every 20th step an eval pass
    (eval mode: no power iteration) under parametrize.cached(). The spectral norm estimate
    of the second layer (u . W v, from its buffers) ends every line (" sigma=<hex>"), the
    eval loss is appended on eval steps (" eval=<hex>")."""

    syncs = True
    hidden = 256
    eval_every = 20
    neval = 256

    def setup(self, mode="eager"):
        from torch.nn.utils import parametrizations as P, parametrize
        self.parametrize = parametrize
        h = self.hidden
        self.l1 = P.weight_norm(nn.Linear(self.din, h))
        self.l2 = P.spectral_norm(nn.Linear(h, h))
        self.l3 = P.orthogonal(nn.Linear(h, h))
        self.l4 = P.spectral_norm(nn.Linear(h, self.nout), n_power_iterations=2)
        self.model = nn.Sequential(self.l1, nn.GELU(), self.l2, nn.GELU(), self.l3, nn.GELU(),
                                   self.l4).to(self.dev)
        self.fwd = self.model
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = (self.Xe @ self.label_proj).argmax(dim=-1)
        self.sigma_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.eval_buf = torch.zeros(self.steps // self.eval_every + 1, dtype=torch.float32, device=self.dev)
        self.eval_steps = []

    def step(self, i):
        loss = super().step(i)
        sn = self.l2.parametrizations.weight[0]
        with torch.no_grad():
            W = self.l2.parametrizations.weight.original
            self.sigma_buf[i].copy_(torch.dot(sn._u, torch.mv(W, sn._v)))
        if (i + 1) % self.eval_every == 0:
            self.model.eval()
            with torch.no_grad(), self.parametrize.cached():
                self.eval_buf[len(self.eval_steps)].copy_(F.cross_entropy(self.model(self.Xe), self.Ye))
            self.eval_steps.append(i)
            self.model.train()
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.sigma_buf)):
            self.extra[i] = "sigma=" + h
        if self.eval_steps:
            for s, h in zip(self.eval_steps, tensor_hexes(self.eval_buf[:len(self.eval_steps)])):
                self.extra[s] += " eval=" + h
        return super().loss_lines()


class SparseWorkload(Workload):
    """A recommender with sparse gradients and cuSPARSE: user embeddings in an
    nn.Embedding(sparse=True) (its gradient a COO tensor whose indices are the batch's user
    ids) stepped by torch.optim.SparseAdam (which coalesces the gradient: a sort, and a sync
    for the number of distinct rows, so the shapes of its kernels change every step), and
    item vectors smoothed over a fixed item-item graph by two torch.sparse.mm products with
    the normalised adjacency (a coalesced COO matrix, 1024 items; cuSPARSE SpMM in forward,
    the transposed matrix in backward), then a Linear, stepped by Adam (foreach). Binary
    labels from hidden ground-truth factors (the items' smoothed over the same graph), BCE
    with logits on user . item scores. The
    number of distinct users in the step's gradient (read back after backward: another
    coalesce) ends every line (" nnz=<n>")."""

    syncs = True
    users, items, d, batch, rank, links = 1024, 1024, 32, 512, 8, 6

    def setup(self, mode="eager"):
        g = torch.Generator().manual_seed(2024)
        self.tu = torch.randn(self.users, self.rank, generator=g).to(self.dev)
        ti = torch.randn(self.items, self.rank, generator=g)
        src = torch.arange(self.items).repeat_interleave(self.links)
        dst = torch.randint(0, self.items, (self.items * self.links,), generator=g)
        loops = torch.arange(self.items)
        idx = torch.stack([torch.cat([src, dst, loops]), torch.cat([dst, src, loops])])
        A = torch.sparse_coo_tensor(idx, torch.ones(idx.shape[1]), (self.items, self.items)).coalesce()
        deg = torch.sparse.sum(A, dim=1).to_dense()
        ai, av = A.indices(), A.values()
        av = av / (deg[ai[0]] * deg[ai[1]]).sqrt()
        adj = torch.sparse_coo_tensor(ai, av, (self.items, self.items)).coalesce()
        self.ti = torch.sparse.mm(adj, torch.sparse.mm(adj, ti)).to(self.dev)
        self.adj = adj.to(self.dev).coalesce()
        self.user = nn.Embedding(self.users, self.d, sparse=True).to(self.dev)
        self.item_vec = nn.Parameter((0.1 * torch.randn(self.items, self.d, generator=g)).to(self.dev))
        self.mix = nn.Linear(self.d, self.d).to(self.dev)
        self.opt_sparse = torch.optim.SparseAdam(list(self.user.parameters()), lr=1e-2)
        self.opt_dense = torch.optim.Adam([self.item_vec] + list(self.mix.parameters()), lr=3e-3, foreach=True)
        self.nnz = {}

    def step(self, i):
        u = torch.randint(0, self.users, (self.batch,), device=self.dev, generator=self.gen)
        it = torch.randint(0, self.items, (self.batch,), device=self.dev, generator=self.gen)
        label = ((self.tu[u] * self.ti[it]).sum(dim=-1) > 0).float()
        self.opt_sparse.zero_grad(set_to_none=True)
        self.opt_dense.zero_grad(set_to_none=True)
        h1 = torch.sparse.mm(self.adj, self.item_vec)
        h2 = torch.sparse.mm(self.adj, h1)
        rep = self.mix((self.item_vec + h1 + h2) / 3.0)
        score = (self.user(u) * rep[it]).sum(dim=-1)
        loss = F.binary_cross_entropy_with_logits(score, label)
        loss.backward()
        self.nnz[i] = self.user.weight.grad.coalesce()._nnz()
        self.opt_sparse.step()
        self.opt_dense.step()
        return loss

    def loss_lines(self):
        for i, n in self.nnz.items():
            self.extra[i] = "nnz=%d" % n
        return super().loss_lines()


class GNNWorkload(Workload):
    """A two-layer message-passing network on 512 nodes whose 4096 directed edges are drawn
    anew every step: torch.unique drops duplicate edges (a sort, and a sync for the count,
    which sets the shapes of the step's edge tensors), torch.bincount counts in-degrees (a
    sync on the largest index; integer atomics), messages are gathered with index_select
    and aggregated twice per layer: summed with index_put(accumulate=True) (sorted,
    deterministic) for a mean, and maxed with scatter_reduce(reduce="amax",
    include_self=False), whose backward splits gradients among ties with scatter_add.
    Node labels from a fixed projection of the node features; AdamW (foreach). The number
    of edges after deduplication ends every line (" e=<n>")."""

    syncs = True
    nodes, din, d, nclass, edges = 512, 32, 64, 8, 4096

    def setup(self, mode="eager"):
        self.x = torch.randn(self.nodes, self.din, device=self.dev, generator=self.gen)
        proj = torch.randn(self.din, self.nclass, device=self.dev, generator=self.gen)
        self.y = (self.x @ proj).argmax(dim=-1)
        self.layers = nn.ModuleList([
            nn.ModuleDict({"msg": nn.Linear(d_in, self.d), "self": nn.Linear(d_in, self.d),
                           "mean": nn.Linear(self.d, self.d), "max": nn.Linear(self.d, self.d)})
            for d_in in (self.din, self.d)])
        self.head = nn.Linear(self.d, self.nclass)
        self.model = nn.ModuleList([self.layers, self.head]).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.01, foreach=True)
        self.counts = {}

    def step(self, i):
        N, d = self.nodes, self.d
        src = torch.randint(0, N, (self.edges,), device=self.dev, generator=self.gen)
        dst = torch.randint(0, N, (self.edges,), device=self.dev, generator=self.gen)
        key = torch.unique(src * N + dst)                    # sorted, duplicates dropped: a sync
        src, dst = key // N, key % N
        deg = torch.bincount(dst, minlength=N)               # a sync on the largest index
        inv_deg = 1.0 / deg.clamp(min=1).float().unsqueeze(1)
        idx = dst.unsqueeze(1).expand(-1, d)
        self.opt.zero_grad(set_to_none=True)
        h = self.x
        for layer in self.layers:
            msg = layer["msg"](h).index_select(0, src)                          # E', d
            total = torch.zeros(N, d, device=self.dev).index_put((dst,), msg, accumulate=True)
            top = torch.zeros(N, d, device=self.dev).scatter_reduce(0, idx, msg, reduce="amax",
                                                                    include_self=False)
            h = F.relu(layer["self"](h) + layer["mean"](total * inv_deg) + layer["max"](top))
        loss = F.cross_entropy(self.head(h), self.y)
        loss.backward()
        self.opt.step()
        self.counts[i] = key.numel()
        return loss

    def loss_lines(self):
        for i, n in self.counts.items():
            self.extra[i] = "e=%d" % n
        return super().loss_lines()


class PageableWorkload(ClassifierWorkload):
    """Copies between the GPU and pageable (not pinned) host memory with non_blocking=True,
    relying on what CUDA promises for them: a copy from pageable memory has read the host
    buffer when the call returns (the driver stages it), and a copy into pageable memory
    has landed when it returns. Every step the host fills one reusable pageable buffer with
    half a batch (a CPU generator) and its labels (the argmax of a fixed projection,
    computed on the host), copies the half batch into the GPU batch, fills the buffer again
    with the other half at once and copies that too; the labels go up in one copy, their
    host buffer zeroed right after it returns. Every 5th step the first layer's row norms are read with
    .cpu(), the host picks the 10% smallest (a stable argsort) and writes a pruning mask
    into a pageable buffer, copies it to the GPU non_blocking and overwrites the host
    buffer with 0.5 at once; the mask multiplies the first layer's rows after every
    optimizer step. The loss is copied non_blocking into a pageable 0-dim tensor and read
    right after the call returns, with no synchronize: it ends every line (" host=<hex>").
    A tool that defers those copies reads or writes the host buffers too late. The MLP,
    AdamW (foreach)."""

    syncs = True
    prune_every, prune_frac = 5, 0.1

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=4).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.first = self.model.net[0]
        self.host_gen = torch.Generator().manual_seed(8642)
        self.proj_h = torch.randn(self.din, self.nout, generator=self.host_gen)
        self.xh = torch.empty(self.batch // 2, self.din)                # pageable
        self.yh = torch.empty(self.batch, dtype=torch.long)
        self.lh = torch.empty(())
        self.mask_h = torch.ones(self.hidden)
        self.xg = torch.empty(self.batch, self.din, device=self.dev)
        self.yg = torch.empty(self.batch, dtype=torch.long, device=self.dev)
        self.mask_g = torch.ones(self.hidden, device=self.dev)

    def step(self, i):
        half = self.batch // 2
        for k in range(2):
            self.xh.normal_(generator=self.host_gen)       # rewrites what the last copy read
            self.yh[k * half:(k + 1) * half] = (self.xh @ self.proj_h).argmax(dim=-1)
            self.xg[k * half:(k + 1) * half].copy_(self.xh, non_blocking=True)
        self.yg.copy_(self.yh, non_blocking=True)
        self.yh.zero_()
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(self.xg), self.yg)
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            self.first.weight.mul_(self.mask_g.unsqueeze(1))
            self.first.bias.mul_(self.mask_g)
        if i % self.prune_every == self.prune_every - 1:
            norms = self.first.weight.detach().norm(dim=1).cpu()
            order = torch.argsort(norms, stable=True)
            self.mask_h.fill_(1.0)
            self.mask_h[order[:int(self.hidden * self.prune_frac)]] = 0.0
            self.mask_g.copy_(self.mask_h, non_blocking=True)
            self.mask_h.fill_(0.5)
        self.lh.copy_(loss.detach(), non_blocking=True)    # returns once the copy has landed
        self.extra[i] = "host=" + f32_hex(self.lh.item())
        return loss


class SetStreamWorkload(ClassifierWorkload):
    """The current stream switched with torch.cuda.set_stream (no context manager) twice a
    step: the batch is drawn on the default stream, a high-priority stream waits for it and
    becomes current for zero_grad, the forward pass (dropout) and backward (whose kernels
    follow the forward's stream), then a low-priority stream waits for that one and
    becomes current for AdamW with capturable=True (step counts and bias corrections on the
    GPU, foreach), and the default stream is made current again and waits for the
    low-priority one. Every 10th step the loss is copied into pinned memory on the
    low-priority stream and the host busy-waits on Stream.query() (cuStreamQuery) before it
    reads it (" q=<hex>" on those steps). The MLP (8 layers, dropout 0.1)."""

    query_every = 10

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=8, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True,
                                     capturable=True)
        self.fwd = self.model
        self.hi = torch.cuda.Stream(device=self.dev, priority=-1)
        self.lo = torch.cuda.Stream(device=self.dev, priority=0)
        self.qh = torch.empty((), pin_memory=True)

    def step(self, i):
        main = torch.cuda.current_stream(self.dev)
        x, y = self.batch_for(i)
        self.hi.wait_stream(main)
        torch.cuda.set_stream(self.hi)
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.lo.wait_stream(self.hi)
        torch.cuda.set_stream(self.lo)
        self.opt.step()
        if i % self.query_every == self.query_every - 1:
            self.qh.copy_(loss.detach(), non_blocking=True)
            while not self.lo.query():
                pass
            self.extra[i] = "q=" + f32_hex(self.qh.item())
        torch.cuda.set_stream(main)
        main.wait_stream(self.lo)
        return loss


# --------------------------------------------------------------------------- more training patterns
# Training loops from real scripts that the cases above leave out, each chosen for what a
# tool that records launch sequences and replays them as graphs could get wrong: a PPO
# iteration whose step is many shorter repeats (environment steps, minibatches) with
# distribution-validation syncs; double backward (a gradient penalty) with a critic that
# steps five times per generator step; per-sample gradients through torch.func with a
# generator re-seeded every step; activations packed into pinned host memory by
# save_on_cpu and a custom autograd Function; reentrant activation checkpointing under a
# per-step manual_seed; gradual unfreezing with learning rates held in GPU tensors; a
# dataset that lives on the GPU, reshuffled and re-augmented every epoch, in channels_last.

class PPOWorkload(Workload):
    """Proximal policy optimisation on a vectorised environment that lives on the GPU (64
    agents on a plane walking towards goals; the goal of an agent that reached it or ran
    out of time is redrawn by torch.where, so no host branch): every step is one PPO
    iteration, a rollout of 16 environment steps under no_grad (policy MLP,
    torch.distributions.Categorical(logits=...) built every environment step, whose
    argument validation reads `valid.all()` back: a sync; sample() through
    torch.multinomial on the default generator; log_prob, whose support check is another
    sync), generalised advantage estimation by a reversed Python loop over the 16 steps,
    then 2 epochs of 4 minibatches over a torch.randperm (the batch generator) of the
    1024 transitions: clipped surrogate, value loss, entropy bonus, clip_grad_norm_, Adam.
    The launch sequence of one step is thus one long period made of 16 near-identical
    environment steps and 8 near-identical minibatch updates, with a host sync every few
    dozen launches: a recorder that settles on the inner period, or graphs the spans
    between syncs, meets a different continuation at the period's end. The loss is the mean
    of the 8 minibatch losses; the rollout's mean reward ends every line (" r=<hex>")."""

    syncs = True
    envs, horizon, actions, hidden, limit = 64, 16, 4, 64, 24
    epochs, minibatches, gamma, lam, clip = 2, 4, 0.99, 0.95, 0.2
    obs_dim = 7

    def setup(self, mode="eager"):
        h, N, T = self.hidden, self.envs, self.horizon
        self.body = nn.Sequential(nn.Linear(self.obs_dim, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh())
        self.pi = nn.Linear(h, self.actions)
        self.v = nn.Linear(h, 1)
        self.model = nn.ModuleList([self.body, self.pi, self.v]).to(self.dev)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.Adam(self.params, lr=3e-4, eps=1e-5, foreach=True)
        self.moves = 0.1 * torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], device=self.dev)
        self.pos = torch.zeros(N, 2, device=self.dev)
        self.goal = torch.rand(N, 2, device=self.dev, generator=self.gen) * 2.0 - 1.0
        self.t = torch.zeros(N, device=self.dev)
        self.obs_buf = torch.zeros(T, N, self.obs_dim, device=self.dev)
        self.act_buf = torch.zeros(T, N, dtype=torch.long, device=self.dev)
        self.logp_buf = torch.zeros(T, N, device=self.dev)
        self.val_buf = torch.zeros(T, N, device=self.dev)
        self.rew_buf = torch.zeros(T, N, device=self.dev)
        self.done_buf = torch.zeros(T, N, device=self.dev)
        self.adv_buf = torch.zeros(T, N, device=self.dev)
        self.reward_log = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def observe(self):
        return torch.cat([self.pos, self.goal, self.goal - self.pos, (self.t / self.limit).unsqueeze(1)], dim=1)

    def policy(self, obs):
        h = self.body(obs)
        return torch.distributions.Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)

    def env_step(self, a):
        self.pos = (self.pos + self.moves[a]).clamp(-1.5, 1.5)
        self.t = self.t + 1.0
        dist = (self.goal - self.pos).norm(dim=1)
        reached = dist < 0.15
        reward = reached.float() - 0.05 * dist
        done = reached | (self.t >= self.limit)
        fresh = torch.rand(self.envs, 2, device=self.dev, generator=self.gen) * 2.0 - 1.0
        self.goal = torch.where(done.unsqueeze(1), fresh, self.goal)
        self.pos = torch.where(done.unsqueeze(1), torch.zeros_like(self.pos), self.pos)
        self.t = torch.where(done, torch.zeros_like(self.t), self.t)
        return reward, done.float()

    def step(self, i):
        T = self.horizon
        with torch.no_grad():
            for k in range(T):
                obs = self.observe()
                dist, value = self.policy(obs)                   # validation: a sync
                a = dist.sample()
                self.obs_buf[k].copy_(obs)
                self.act_buf[k].copy_(a)
                self.logp_buf[k].copy_(dist.log_prob(a))         # support check: a sync
                self.val_buf[k].copy_(value)
                r, d = self.env_step(a)
                self.rew_buf[k].copy_(r)
                self.done_buf[k].copy_(d)
            last_v = self.v(self.body(self.observe())).squeeze(-1)
            gae = torch.zeros(self.envs, device=self.dev)
            for k in reversed(range(T)):
                next_v = last_v if k == T - 1 else self.val_buf[k + 1]
                nonterminal = 1.0 - self.done_buf[k]
                delta = self.rew_buf[k] + self.gamma * next_v * nonterminal - self.val_buf[k]
                gae = delta + self.gamma * self.lam * nonterminal * gae
                self.adv_buf[k].copy_(gae)
            ret = self.adv_buf + self.val_buf
        n = T * self.envs
        b_obs = self.obs_buf.reshape(n, self.obs_dim)
        b_act, b_logp = self.act_buf.reshape(n), self.logp_buf.reshape(n)
        b_adv, b_ret = self.adv_buf.reshape(n), ret.reshape(n)
        mb = n // self.minibatches
        total = torch.zeros((), device=self.dev)
        for _ in range(self.epochs):
            perm = torch.randperm(n, device=self.dev, generator=self.gen)
            for k in range(self.minibatches):
                idx = perm[k * mb:(k + 1) * mb]
                dist, value = self.policy(b_obs[idx])
                ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
                adv = b_adv[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg = torch.max(-adv * ratio, -adv * ratio.clamp(1.0 - self.clip, 1.0 + self.clip)).mean()
                vloss = 0.5 * (value - b_ret[idx]).square().mean()
                loss = pg + 0.5 * vloss - 0.01 * dist.entropy().mean()
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.params, 0.5)
                self.opt.step()
                total = total + loss.detach()
        self.reward_log[i].copy_(self.rew_buf.mean())
        return total / (self.epochs * self.minibatches)

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.reward_log)):
            self.extra[i] = "r=" + h
        return super().loss_lines()


class WGANGPWorkload(Workload):
    """A Wasserstein GAN with gradient penalty (WGAN-GP) on a mixture of 8 Gaussians: every
    step is one critic update whose loss includes the penalty on the critic's input
    gradient at random interpolates between real and fake samples, obtained with
    torch.autograd.grad(create_graph=True), so backward runs through a backward pass
    (double backward of Linear, LayerNorm and LeakyReLU: kernels no first-order loop
    launches); every 5th step (n_critic = 5) a generator update follows. Adam with betas
    (0, 0.9) for both. The step's launch sequence has period 5, and the steps between
    generator updates differ from those with one only at their end. The critic's loss is
    the loss; the penalty ends every line (" gp=<hex>"), the generator's loss is appended on
    its steps (" g=<hex>"). No sync in the loop."""

    batch, zdim, dim, hidden, nmodes, n_critic, gp_weight = 128, 32, 64, 256, 8, 5, 10.0

    def setup(self, mode="eager"):
        h = self.hidden
        self.G = nn.Sequential(nn.Linear(self.zdim, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                               nn.Linear(h, self.dim)).to(self.dev)
        self.D = nn.Sequential(nn.Linear(self.dim, h), nn.LayerNorm(h), nn.LeakyReLU(0.2),
                               nn.Linear(h, h), nn.LayerNorm(h), nn.LeakyReLU(0.2),
                               nn.Linear(h, 1)).to(self.dev)
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=1e-4, betas=(0.0, 0.9), foreach=True)
        self.opt_d = torch.optim.Adam(self.D.parameters(), lr=1e-4, betas=(0.0, 0.9), foreach=True)
        self.centers = 2.0 * torch.randn(self.nmodes, self.dim, device=self.dev, generator=self.gen)
        self.gp_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.g_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.g_steps = []

    def step(self, i):
        B = self.batch
        k = torch.randint(0, self.nmodes, (B,), device=self.dev, generator=self.gen)
        real = self.centers.index_select(0, k) + 0.05 * torch.randn(B, self.dim, device=self.dev, generator=self.gen)
        z = torch.randn(B, self.zdim, device=self.dev, generator=self.gen)
        with torch.no_grad():
            fake = self.G(z)
        alpha = torch.rand(B, 1, device=self.dev, generator=self.gen)
        interp = torch.lerp(fake, real, alpha).requires_grad_(True)
        d_interp = self.D(interp)
        grad, = torch.autograd.grad(d_interp, interp, grad_outputs=torch.ones_like(d_interp), create_graph=True)
        gp = (grad.norm(2, dim=1) - 1.0).square().mean()
        d_loss = self.D(fake).mean() - self.D(real).mean() + self.gp_weight * gp
        self.opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        self.opt_d.step()
        self.gp_buf[i].copy_(gp.detach())
        if i % self.n_critic == self.n_critic - 1:
            z2 = torch.randn(B, self.zdim, device=self.dev, generator=self.gen)
            self.opt_g.zero_grad(set_to_none=True)
            g_loss = -self.D(self.G(z2)).mean()
            g_loss.backward()
            self.opt_g.step()
            self.g_buf[i].copy_(g_loss.detach())
            self.g_steps.append(i)
        return d_loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.gp_buf)):
            self.extra[i] = "gp=" + h
        g = tensor_hexes(self.g_buf)
        for i in self.g_steps:
            self.extra[i] += " g=" + g[i]
        return super().loss_lines()


class DPSGDWorkload(TaskWorkload):
    """Differentially private SGD as Opacus-style code does it with torch.func: per-sample
    gradients from vmap(grad_and_value(loss of one sample through functional_call)) (batched
    GEMMs whose batch is the 64 samples, launched by functorch's batching rules), each
    sample's gradient clipped to norm 1 (norms over all parameters, a clip factor per
    sample), summed with tensordot, Gaussian noise (sigma 0.8) added from a CUDA generator
    re-seeded with the step number every step (torch.Generator.manual_seed: the Philox seed
    passed to the noise kernels changes every step while their offsets start again from
    0, where other loops keep the seed and advance the offset), the noisy mean assigned to
    .grad by hand and stepped by SGD with momentum (foreach). The MLP (4 layers, 256
    wide). The mean clip factor ends every line (" clip=<hex>"). No sync in the loop."""

    hidden = 256
    max_norm, sigma = 1.0, 0.8

    def setup(self, mode="eager"):
        from torch.func import functional_call, grad_and_value, vmap
        self.model = MLP(self.din, self.hidden, self.nout, layers=4).to(self.dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9, foreach=True)
        self.label_setup()
        self.noise_gen = torch.Generator(device=self.dev)
        model = self.model

        def sample_loss(params, x, y):
            out = functional_call(model, params, (x.unsqueeze(0),))
            return F.cross_entropy(out, y.unsqueeze(0))

        self.per_sample = vmap(grad_and_value(sample_loss), in_dims=(None, 0, 0))
        self.clip_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def step(self, i):
        x, y = self.batch_for(i)
        B = x.shape[0]
        named = list(self.model.named_parameters())
        params = {k: p.detach() for k, p in named}
        grads, losses = self.per_sample(params, x, y)
        norms = torch.stack([grads[k].reshape(B, -1).norm(dim=1) for k, _ in named], dim=1).norm(dim=1)
        factor = (self.max_norm / (norms + 1e-6)).clamp(max=1.0)
        self.noise_gen.manual_seed(900000 + i)
        for k, p in named:
            g = torch.tensordot(factor, grads[k], dims=1)
            g = g + (self.sigma * self.max_norm) * torch.randn(p.shape, device=self.dev, generator=self.noise_gen)
            p.grad = g / B
        self.opt.step()
        self.clip_buf[i].copy_(factor.mean())
        return losses.mean()

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.clip_buf)):
            self.extra[i] = "clip=" + h
        return super().loss_lines()


class OffloadWorkload(ClassifierWorkload):
    """Activation offloading with torch.autograd.graph.save_on_cpu(pin_memory=True) over the
    first four of six blocks (Linear, a learnable Swish written as a custom autograd
    Function with ctx.save_for_backward of its input, its parameter and an intermediate,
    dropout): every tensor those blocks save for backward (inputs, weights, dropout masks,
    the Function's three tensors) is packed into a fresh pinned host tensor from PyTorch's
    caching host allocator and copied there from the GPU by a blocking copy (a sync per
    saved tensor, about twenty a step), and unpacked in backward by a non_blocking copy
    back to the GPU on the autograd thread; the pinned blocks are freed when backward
    releases the graph, an event recorded on them, and reused next step once a query of
    that event says the copy is done. A tool that holds the copies back, or answers the
    event query before the GPU has run the copy, hands a pinned block out while it is still
    being read. AdamW (foreach)."""

    syncs = True
    layers, offloaded = 6, 4

    def setup(self, mode="eager"):
        h = self.hidden
        blocks = [nn.Sequential(nn.Linear(self.din if k == 0 else h, h), Swish(), nn.Dropout(0.1))
                  for k in range(self.layers)]
        self.front = nn.Sequential(*blocks[:self.offloaded])
        self.back = nn.Sequential(*blocks[self.offloaded:], nn.Linear(h, self.nout))
        self.model = nn.Sequential(self.front, self.back).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.forward

    def forward(self, x):
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            h = self.front(x)
        return self.back(h)


class ReentrantWorkload(GPTWorkload):
    """The small GPT (dropout 0.1) as fairseq-style scripts train it: torch.cuda.manual_seed(
    seed + step) at the start of every step (the Philox seed of every dropout kernel changes
    every step, the offset starts from 0 again), bf16 autocast without a GradScaler, every
    block wrapped in torch.utils.checkpoint.checkpoint(use_reentrant=True) (the old default
    many scripts still pass): forward runs the blocks without a graph and stashes the CUDA
    RNG state, and backward, on the autograd engine's device thread, forks the RNG, sets the
    stashed state back, recomputes each block under autocast and runs a nested
    torch.autograd.backward through it, then restores the RNG; clip_grad_value_ then
    clip_grad_norm_(foreach=True, error_if_nonfinite=True), which reads the norm's finiteness
    back (a sync, and a host branch on a GPU value); AdamW (foreach). The gradient norm ends
    every line (" n=<hex>")."""

    syncs = True
    seed = 4242

    def setup(self, mode="eager"):
        from torch.utils.checkpoint import checkpoint
        self.checkpoint = checkpoint
        self.model = GPT(vocab=self.vocab, seq=self.seq, d=128, heads=4, layers=4, p=0.1).to(self.dev)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=3e-4, weight_decay=0.01, foreach=True)
        self.fwd = self.forward
        self.norm_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def forward(self, idx):
        m = self.model
        T = idx.shape[1]
        x = m.drop(m.tok(idx) + m.pos(m.positions[:T]))
        for b in m.blocks:
            x = self.checkpoint(b, x, use_reentrant=True, preserve_rng_state=True)
        return m.head(m.ln_f(x))

    def step(self, i):
        torch.cuda.manual_seed(self.seed + i)
        tok, _ = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = self.fwd(tok[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, self.vocab), tok[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_value_(self.params, 0.5)
        norm = torch.nn.utils.clip_grad_norm_(self.params, 1.0, error_if_nonfinite=True, foreach=True)
        self.opt.step()
        self.norm_buf[i].copy_(norm.detach())
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.norm_buf)):
            self.extra[i] = "n=" + h
        return super().loss_lines()


class UnfreezeWorkload(TaskWorkload):
    """Fine-tuning with gradual unfreezing and discriminative learning rates (ULMFiT style):
    four blocks (Linear, LayerNorm, GELU, dropout) and a head, one parameter group each,
    each group's learning rate a 0-dim CUDA tensor (lower blocks smaller), fused AdamW
    (which takes the learning rate by pointer) under a LambdaLR schedule whose new rates
    reach the tensors every step (the scheduler multiplies the base-rate tensors by a
    Python float, a kernel argument that changes every step, and fill_()s the groups'
    tensors). At first only the head trains; every 60 steps the next block down is
    unfrozen (requires_grad_), so backward reaches one layer deeper, one more group has
    gradients (its AdamW state is created then, mid-run) and the fused step covers more
    tensors: the launch sequence settles, changes for good, and settles again four
    times. The head's learning rate after the step ends every line (" lr=<hex>"). No sync
    in the loop."""

    nblocks, phase_len = 4, 60

    def setup(self, mode="eager"):
        h = self.hidden
        self.blocks = nn.ModuleList([
            nn.Sequential(nn.Linear(self.din if k == 0 else h, h), nn.LayerNorm(h), nn.GELU(), nn.Dropout(0.1))
            for k in range(self.nblocks)])
        self.head = nn.Linear(h, self.nout)
        self.model = nn.ModuleList([self.blocks, self.head]).to(self.dev)
        self.label_setup()
        groups = [{"params": list(b.parameters()),
                   "lr": torch.tensor(2e-3 * 0.6 ** (self.nblocks - k), device=self.dev)}
                  for k, b in enumerate(self.blocks)]
        groups.append({"params": list(self.head.parameters()), "lr": torch.tensor(2e-3, device=self.dev)})
        self.opt = torch.optim.AdamW(groups, lr=2e-3, weight_decay=0.01, fused=True)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / 20.0) * 0.5 ** (s / 150.0))
        self.phase = -1
        self.lr_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def step(self, i):
        phase = min(i // self.phase_len, self.nblocks)
        if phase != self.phase:
            self.phase = phase
            for k, b in enumerate(self.blocks):
                b.requires_grad_(k >= self.nblocks - phase)
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        h = x
        for b in self.blocks:
            h = b(h)
        loss = F.cross_entropy(self.head(h), y)
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.lr_buf[i].fill_(self.opt.param_groups[-1]["lr"])
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.lr_buf)):
            self.extra[i] = "lr=" + h
        return super().loss_lines()


class GPUDataWorkload(Workload):
    """A dataset kept on the GPU, as fast CIFAR-style training scripts keep theirs: 2048
    training images (and 512 held out) made once, labels from a fixed projection of their
    pooled pixels. At the start of every epoch (32 steps) a CUDA generator is re-seeded
    with the epoch number, torch.randperm draws the epoch's order with it (random keys and
    a radix sort, with its temporary storage) and the whole training set is flipped
    horizontally at random into a new 25 MB tensor (the old one freed); every step gathers
    its 64 images with index_select, cuts an 8x8 hole at a random place in each (cutout,
    masks from per-sample positions) and trains a small conv net with BatchNorm in
    channels_last memory format (cuDNN's NHWC kernels) with label smoothing and Nesterov
    SGD (foreach); at the end of every epoch an eval pass over the held-out images
    (eval mode, no_grad) whose loss is appended (" eval=<hex>"). The step's launch sequence
    has a period of one step with a longer step every 32 and an eval pass after every 32nd:
    periods that do not divide each other. No sync in the loop."""

    n, neval, batch, nout, cut = 2048, 512, 64, 10, 8

    def setup(self, mode="eager"):
        cl = torch.channels_last
        X = torch.randn(self.n + self.neval, 3, 32, 32, device=self.dev, generator=self.gen)
        proj = torch.randn(3 * 8 * 8, self.nout, device=self.dev, generator=self.gen)
        Y = (X.reshape(-1, 3, 8, 4, 8, 4).mean(dim=(3, 5)).flatten(1) @ proj).argmax(dim=1)
        self.X, self.Y = X[:self.n].contiguous(memory_format=cl), Y[:self.n].contiguous()
        self.Xe, self.Ye = X[self.n:].contiguous(memory_format=cl), Y[self.n:].contiguous()

        def block(cin, cout, stride):
            return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.GELU()]

        self.body = nn.Sequential(*block(3, 32, 1), *block(32, 64, 2), *block(64, 64, 1),
                                  *block(64, 128, 2), *block(128, 128, 2))
        self.head = nn.Linear(128, self.nout)
        self.model = nn.ModuleList([self.body, self.head]).to(self.dev)
        self.model.to(memory_format=cl)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                   weight_decay=5e-4, foreach=True)
        self.epoch_gen = torch.Generator(device=self.dev)
        self.per_epoch = self.n // self.batch
        self.coords = torch.arange(32, device=self.dev)
        self.eval_buf = torch.zeros(self.steps // self.per_epoch + 1, dtype=torch.float32, device=self.dev)
        self.eval_steps = []

    def forward(self, x):
        return self.head(self.body(x).mean(dim=(2, 3)))

    def step(self, i):
        B = self.batch
        e, k = divmod(i, self.per_epoch)
        if k == 0:
            self.epoch_gen.manual_seed(7000 + e)
            self.perm = torch.randperm(self.n, device=self.dev, generator=self.epoch_gen)
            flip = torch.rand(self.n, device=self.dev, generator=self.epoch_gen) < 0.5
            self.Xa = torch.where(flip.view(-1, 1, 1, 1), self.X.flip(3), self.X)
        idx = self.perm[k * B:(k + 1) * B]
        x = self.Xa.index_select(0, idx)
        y = self.Y.index_select(0, idx)
        cy = torch.randint(0, 32, (B, 1, 1), device=self.dev, generator=self.epoch_gen)
        cx = torch.randint(0, 32, (B, 1, 1), device=self.dev, generator=self.epoch_gen)
        half = self.cut // 2
        hole = (((self.coords.view(1, 32, 1) - cy).abs() < half)
                & ((self.coords.view(1, 1, 32) - cx).abs() < half))
        x = x.masked_fill(hole.unsqueeze(1), 0.0).contiguous(memory_format=torch.channels_last)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.forward(x), y, label_smoothing=0.2)
        loss.backward()
        self.opt.step()
        if k == self.per_epoch - 1:
            self.model.eval()
            with torch.no_grad():
                self.eval_buf[len(self.eval_steps)].copy_(F.cross_entropy(self.forward(self.Xe), self.Ye))
            self.eval_steps.append(i)
            self.model.train()
        return loss

    def loss_lines(self):
        if self.eval_steps:
            for s, h in zip(self.eval_steps, tensor_hexes(self.eval_buf[:len(self.eval_steps)])):
                self.extra[s] = "eval=" + h
        return super().loss_lines()


# --------------------------------------------------------------------------- red-team patterns
# Loops chosen for what a tool that records launch sequences and replays them as graphs
# assumes and a real script breaks: BatchNorm frozen and unfrozen every few steps (two
# launch sequences that differ in a few kernels and the optimizer's tensor lists), bags
# whose boundaries move every step, sampling whose number of random draws changes every
# step and feeds the next step, a fresh pooled stream per micro-batch, optimizer steps
# issued from the autograd thread by post-accumulate-grad hooks, a learning rate passed
# by pointer from a new tensor every step, parameters replaced by new ones (and widened),
# and a checkpoint saved to and restored from host memory mid-run.

class BNFreezeWorkload(ClassifierWorkload):
    """The small ResNet in channels_last (cuDNN's NHWC kernels) with its BatchNorm layers
    frozen and unfrozen in a fixed rhythm, as fine-tuning scripts freeze BN: three steps in
    train mode (batch statistics, running statistics updated in place, num_batches_tracked
    incremented, BN affine parameters trained), then two steps with every BatchNorm2d in
    eval mode (running statistics used and backpropagated through, no update) and its
    weight and bias set to requires_grad=False (their .grad stays None, so SGD's foreach
    lists shrink by eighteen tensors). Every 7th batch arrives in NCHW (contiguous) instead
    of channels_last, so the stem's convolution first converts it (one more kernel); the
    combined period is 35 steps. Labels from a fixed projection of the pooled pixels;
    SGD with momentum (foreach), set_to_none. The sum of the stem BatchNorm's running
    variance after the step ends every line (" rv=<hex>"). No sync in the loop."""

    batch = 32
    train_len, frozen_len, nchw_every = 3, 2, 7

    def setup(self, mode="eager"):
        self.model = SmallResNet(self.nout).to(self.dev)
        self.model.to(memory_format=torch.channels_last)
        self.bns = [m for m in self.model.modules() if isinstance(m, nn.BatchNorm2d)]
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4,
                                   foreach=True)
        self.fwd = self.model
        self.label_proj = torch.randn(3 * 8 * 8, self.nout, device=self.dev, generator=self.gen)
        self.frozen = None
        self.rv_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def set_frozen(self, frozen):
        if frozen == self.frozen:
            return
        self.frozen = frozen
        for bn in self.bns:
            bn.train(not frozen)
            bn.weight.requires_grad_(not frozen)
            bn.bias.requires_grad_(not frozen)

    def step(self, i):
        self.set_frozen(i % (self.train_len + self.frozen_len) >= self.train_len)
        x = torch.randn(self.batch, 3, 32, 32, device=self.dev, generator=self.gen)
        y = (F.avg_pool2d(x, 4).flatten(1) @ self.label_proj).argmax(dim=1)
        if i % self.nchw_every != self.nchw_every - 1:
            x = x.contiguous(memory_format=torch.channels_last)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.rv_buf[i].copy_(self.bns[0].running_var.sum())
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.rv_buf)):
            self.extra[i] = "rv=" + h
        return super().loss_lines()


class EmbBagWorkload(Workload):
    """A bag-of-tokens classifier (fastText / DLRM sparse features): 1536 token ids a step
    split into 64 bags at boundaries drawn anew every step (sorted random cut points on the
    GPU; bags of any length, empty ones included, the total fixed), so the offsets tensor
    has the same shape and address pattern every step but other contents. Two
    nn.EmbeddingBag tables: mode="mean" with padding_idx=0 (about 5% of the ids are the
    padding id; the divisor per bag is its count of other ids) and mode="sum" with
    per_sample_weights from a sigmoid of a third, plain nn.Embedding (so backward reaches
    the weights through _embedding_bag_per_sample_weights_backward too); the embedding
    backward sorts the ids and reduces segments whose number follows from the data. Labels
    from F.embedding_bag over a fixed table with the same bags; Adam (foreach). The number of
    empty bags ends every line (" e=<hex>"). No sync in the loop's own code."""

    vocab, d, bags, total, nout, pad_frac = 4096, 64, 64, 1536, 10, 0.05

    def setup(self, mode="eager"):
        V, d = self.vocab, self.d
        self.mean_bag = nn.EmbeddingBag(V, d, mode="mean", padding_idx=0)
        self.sum_bag = nn.EmbeddingBag(V, d, mode="sum")
        self.gate = nn.Embedding(V, 1)
        self.head = nn.Sequential(nn.Linear(2 * d, 128), nn.GELU(), nn.Linear(128, self.nout))
        self.model = nn.ModuleList([self.mean_bag, self.sum_bag, self.gate, self.head]).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=2e-3, foreach=True)
        self.truth = torch.randn(V, self.nout, device=self.dev, generator=self.gen)
        self.truth[0].zero_()
        self.start = torch.zeros(1, dtype=torch.long, device=self.dev)
        self.empty_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def step(self, i):
        V = self.vocab
        ids = torch.randint(0, V, (self.total,), device=self.dev, generator=self.gen)
        ids = ids.masked_fill(ids < int(V * self.pad_frac), 0)                 # the padding id
        cuts = torch.randint(0, self.total, (self.bags - 1,), device=self.dev, generator=self.gen)
        offsets = torch.cat([self.start, torch.sort(cuts).values])             # bags, from 0
        with torch.no_grad():
            y = F.embedding_bag(ids, self.truth, offsets, mode="sum").argmax(dim=1)
        self.opt.zero_grad(set_to_none=True)
        w = torch.sigmoid(self.gate(ids).squeeze(1))                           # total
        h = torch.cat([self.mean_bag(ids, offsets),
                       0.1 * self.sum_bag(ids, offsets, per_sample_weights=w)], dim=1)
        loss = F.cross_entropy(self.head(h), y)
        loss.backward()
        self.opt.step()
        self.empty_buf[i].copy_((offsets[1:] == offsets[:-1]).sum())
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.empty_buf)):
            self.extra[i] = "e=" + h
        return super().loss_lines()


class SamplingWorkload(Workload):
    """Training on the model's own samples (self-training / on-policy LM fine-tuning): a
    window of 33 tokens per row (8 rows) lives on the GPU; every step first generates 1 to
    4 new tokens (the count drawn by a seeded host random.Random, so the number of random
    draws and forward passes changes from step to step with no period), each by a forward
    pass of a 2-layer GPT in eval mode under no_grad, top-k (16) of the last position's
    logits, then, alternately, torch.multinomial(replacement=True, 2 samples, first kept)
    or the Gumbel-max trick by hand (exponential_ noise, argmax) from a dedicated CUDA
    generator, and with probability 0.1 per row a uniform token instead (torch.rand and
    randint on the default generator); the window slides by torch.cat. Then one training
    step on the window (train mode: dropout from the default generator, whose Philox
    offset at that point depends on how many tokens all earlier steps sampled), AdamW
    (foreach). The tokens are never read by the host: each step's input is the previous
    steps' output. The number of tokens sampled and the window's token sum end every line
    (" n=<k> s=<hex>")."""

    batch, seq, vocab, topk, temperature, explore = 8, 32, 256, 16, 0.9, 0.1

    def setup(self, mode="eager"):
        import random
        self.model = GPT(vocab=self.vocab, seq=self.seq, d=128, heads=4, layers=2, p=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=0.01, foreach=True)
        self.window = torch.randint(0, self.vocab, (self.batch, self.seq + 1), device=self.dev,
                                    generator=self.gen)
        self.sample_gen = torch.Generator(device=self.dev)
        self.sample_gen.manual_seed(5551)
        self.rounds = random.Random(31)
        self.sum_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.counts = {}

    def sample_next(self, r):
        B = self.batch
        logits = self.model(self.window[:, 1:])[:, -1] / self.temperature       # B, vocab
        vals, idx = logits.topk(self.topk, dim=-1)                               # B, k
        probs = F.softmax(vals, dim=-1)
        if r % 2 == 0:
            choice = torch.multinomial(probs, 2, replacement=True, generator=self.sample_gen)[:, :1]
        else:
            q = torch.empty_like(probs).exponential_(generator=self.sample_gen)
            choice = (probs / q).argmax(dim=-1, keepdim=True)
        tok = idx.gather(1, choice)                                              # B, 1
        explore = torch.rand(B, 1, device=self.dev) < self.explore               # the default generator
        uniform = torch.randint(0, self.vocab, (B, 1), device=self.dev)
        return torch.where(explore, uniform, tok)

    def step(self, i):
        n = self.rounds.randint(1, 4)
        self.model.eval()
        with torch.no_grad():
            for r in range(n):
                self.window = torch.cat([self.window[:, 1:], self.sample_next(r)], dim=1)
        self.model.train()
        tok = self.window
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(tok[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, self.vocab), tok[:, 1:].reshape(-1))
        loss.backward()
        self.opt.step()
        self.sum_buf[i].copy_(tok.sum())
        self.counts[i] = n
        return loss

    def loss_lines(self):
        sums = tensor_hexes(self.sum_buf)
        for i, n in self.counts.items():
            self.extra[i] = "n=%d s=%s" % (n, sums[i])
        return super().loss_lines()


class StreamPoolWorkload(TaskWorkload):
    """Gradient accumulation over 3 micro-batches, each on a stream of its own made with
    torch.cuda.Stream() right there (as per-micro-batch stream code does): PyTorch hands
    out its pooled streams round-robin (32 per priority), so the streams a step runs on
    change every step and come back only after 32 steps (the middle micro-batch asks for
    a high-priority stream, from the other pool, whose cycle is three times as long). The
    batch is drawn on the compute stream; the micro-batch's stream waits for it
    (wait_stream), runs forward (dropout) and backward there (.grad created on the first
    micro-batch's stream and accumulated on the others), the batch is record_stream()ed
    to it, the compute stream waits for it and the micro-batch's loss is record_stream()ed
    to the compute stream, which sums the losses and runs AdamW (foreach, set_to_none). The
    caching allocator keeps a pool per stream, so activations come from 64 pools in turn.
    No sync in the loop."""

    micro = 3

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.label_setup()

    def step(self, i):
        main = torch.cuda.current_stream(self.dev)
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.dev)
        for k in range(self.micro):
            x, y = self.batch_for(i)
            s = torch.cuda.Stream(device=self.dev, priority=-1 if k == 1 else 0)
            s.wait_stream(main)
            with torch.cuda.stream(s):
                loss = F.cross_entropy(self.model(x), y) / self.micro
                loss.backward()
            x.record_stream(s)
            y.record_stream(s)
            main.wait_stream(s)
            loss.record_stream(main)
            total = total + loss.detach()
        self.opt.step()
        return total


class OptInBackwardWorkload(TaskWorkload):
    """The optimizer step fused into backward, as PyTorch's memory-saving recipe does it:
    one AdamW (foreach=False) per parameter, run by a hook registered with
    Tensor.register_post_accumulate_grad_hook, which clips that parameter's gradient
    (clip_grad_norm_ over the one tensor), steps it and sets its .grad to None. The hooks
    run on the autograd engine's device thread in the middle of backward, so the
    optimizer's kernels and its host-side bias corrections interleave with the backward
    kernels, issued from that thread, in the order the engine reaches the parameters; the
    main thread issues no optimizer launch at all. A tensor hook (register_hook) on the
    activation between the two halves of the MLP clamps its gradient. The learning rate of
    every optimizer halves every 100 steps (a Python float). The MLP (6 layers, dropout).
    No sync in the loop."""

    clamp = 2e-3

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.fwd = self.model
        self.label_setup()
        self.opts = {}
        self.handles = []
        for p in self.model.parameters():
            self.opts[p] = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, foreach=False)
            self.handles.append(p.register_post_accumulate_grad_hook(self.param_hook))

    def param_hook(self, p):
        torch.nn.utils.clip_grad_norm_([p], 0.5)
        opt = self.opts[p]
        opt.step()
        opt.zero_grad(set_to_none=True)

    def clamp_hook(self, g):
        return g.clamp(-self.clamp, self.clamp)

    def step(self, i):
        if i > 0 and i % 100 == 0:
            for opt in self.opts.values():
                opt.param_groups[0]["lr"] *= 0.5
        x, y = self.batch_for(i)
        net = self.model.net
        h = net[:6](x)
        h.register_hook(self.clamp_hook)
        loss = F.cross_entropy(net[6:](h), y)
        loss.backward()
        return loss


class LRTensorWorkload(TaskWorkload):
    """A learning rate handed to fused Adam by pointer from a new tensor every step, as
    scripts that set group["lr"] = torch.tensor(lr, device="cuda") do: the host computes a
    warmup-then-cosine rate and, for the body's parameter group, makes a new 0-dim CUDA
    tensor of it (a copy from pageable host memory, and a sync) while the last one is still
    referenced, so the address the fused kernel reads the rate from changes every step
    (between blocks the caching allocator hands out in turn). Every 50 steps the body's
    group switches between such a tensor and a Python float (then a kernel argument: the
    other overload of _fused_adam_, another kernel), and back. The head's group always
    takes a Python float (twice the rate). Adam with fused=True and amsgrad (step counts on
    the GPU). The MLP (6 layers, no dropout). A sync every step of the tensor phases, none
    in the float phases."""

    warmup, switch_every, base_lr = 20, 50, 1e-3

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6).to(self.dev)
        self.fwd = self.model
        self.label_setup()
        body = list(self.model.net[:-1].parameters())
        head = list(self.model.net[-1].parameters())
        self.opt = torch.optim.Adam([{"params": body, "lr": torch.tensor(self.base_lr, device=self.dev)},
                                     {"params": head, "lr": self.base_lr}],
                                    lr=self.base_lr, amsgrad=True, fused=True)

    def lr_at(self, i):
        return self.base_lr * min(1.0, (i + 1) / self.warmup) * 0.5 * (1.0 + math.cos(math.pi * i / self.steps))

    def step(self, i):
        lr = self.lr_at(i)
        body, head = self.opt.param_groups
        if (i // self.switch_every) % 2 == 0:
            body["lr"] = torch.tensor(lr, device=self.dev)   # a new tensor: H2D, a sync
        else:
            body["lr"] = lr
        head["lr"] = 2.0 * lr
        return super().step(i)


class ReparamWorkload(TaskWorkload):
    """Parameters replaced by new nn.Parameter objects mid-run, as model surgery does:
    every 30 steps each of the three Linear layers gets a new weight and bias (so every
    parameter, its gradient and its optimizer state move to new addresses, and the old
    blocks go back to the caching allocator, which hands them to the next step's
    activations), and a new AdamW (foreach) takes over the old one's state (cloned). A
    4 MiB spacer held during the surgery pushes the new tensors away from the freed ones.
    Every second surgery widens the hidden layer by 32 units, Net2Net style (function
    preserving): 32 units picked by a torch.randperm from a CUDA generator are duplicated
    (index_select of the second layer's rows), their outgoing weights halved and copied
    (index_fill of a scale, index_select of the last layer's columns); the widened
    parameters start with fresh optimizer state, so the foreach step mixes step counts
    (bias corrections differ per tensor), and every kernel shape after the first layer
    changes for good. The width after the step ends every line (" h=<n>"). No sync in the
    loop's own code."""

    every, grow, hidden = 30, 32, 256

    def setup(self, mode="eager"):
        h = self.hidden
        self.l1 = nn.Linear(self.din, h)
        self.l2 = nn.Linear(h, h)
        self.l3 = nn.Linear(h, self.nout)
        self.model = nn.Sequential(self.l1, nn.ReLU(), self.l2, nn.ReLU(), self.l3).to(self.dev)
        self.fwd = self.model
        self.label_setup()
        self.opt = self.make_opt()
        self.width_gen = torch.Generator(device=self.dev)
        self.width_gen.manual_seed(77)
        self.surgeries = 0
        self.widths = {}

    def make_opt(self):
        return torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)

    def surgery(self, widen):
        old = self.opt
        spacer = torch.empty(2 ** 20, device=self.dev)
        fresh = {}
        with torch.no_grad():
            if widen:
                h = self.l2.out_features
                idx = torch.randperm(h, device=self.dev, generator=self.width_gen)[:self.grow]
                fresh["l2.weight"] = torch.cat([self.l2.weight, self.l2.weight.index_select(0, idx)], dim=0)
                fresh["l2.bias"] = torch.cat([self.l2.bias, self.l2.bias.index_select(0, idx)])
                scale = torch.ones(h, device=self.dev).index_fill_(0, idx, 0.5)
                w3 = self.l3.weight * scale
                fresh["l3.weight"] = torch.cat([w3, w3.index_select(1, idx)], dim=1)
            moved = []
            for name in ("l1", "l2", "l3"):
                lin = getattr(self, name)
                for attr in ("weight", "bias"):
                    p_old = getattr(lin, attr)
                    key = name + "." + attr
                    if key in fresh:
                        p_new, state = nn.Parameter(fresh[key]), None
                    else:
                        p_new = nn.Parameter(p_old.detach().clone())
                        state = None
                        if p_old in old.state:
                            state = {k: (v.clone() if torch.is_tensor(v) else v)
                                     for k, v in old.state[p_old].items()}
                    setattr(lin, attr, p_new)
                    moved.append((p_new, state))
            self.l2.out_features = self.l2.weight.shape[0]
            self.l3.in_features = self.l3.weight.shape[1]
        self.opt = self.make_opt()
        for p_new, state in moved:
            if state is not None:
                self.opt.state[p_new] = state
        del old, spacer, fresh, moved

    def step(self, i):
        if i > 0 and i % self.every == 0:
            self.surgeries += 1
            self.surgery(widen=self.surgeries % 2 == 0)
        loss = super().step(i)
        self.widths[i] = self.l2.out_features
        return loss

    def loss_lines(self):
        for i, h in self.widths.items():
            self.extra[i] = "h=%d" % h
        return super().loss_lines()


class CkptWorkload(TaskWorkload):
    """A checkpoint written to host memory and read back mid-run, as fault-tolerant
    training does after a failure: every 30 steps torch.save writes the model's and the
    optimizer's state_dict, the StepLR scheduler's, the batch generator's state and the
    default CUDA generator's state (get_rng_state) into an io.BytesIO (device-to-host
    copies and syncs); every 50 steps the loop "restarts" from the newest checkpoint:
    torch.load(map_location="cpu"), load_state_dict into the live parameters (host-to-
    device copies from pageable memory), the optimizer's load_state_dict (its exp_avg and
    exp_avg_sq tensors made anew on the GPU, at other addresses, the old ones freed), the
    scheduler's, Generator.set_state and torch.cuda.set_rng_state (dropout's Philox offset
    goes back). The steps after a restore repeat earlier steps' work exactly (a launch
    sequence seen before, at a rewound RNG offset, over optimizer state at new addresses).
    The MLP (6 layers, dropout 0.1), AdamW (foreach). What the step did ends every line
    (" ck=s", " ck=r<step saved>", " ck=sr<step>" or " ck=-")."""

    save_every, restore_every = 30, 50

    def setup(self, mode="eager"):
        import io
        self.io = io
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.fwd = self.model
        self.label_setup()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=40, gamma=0.7)
        self.blob = None
        self.marks = {}

    def save(self, i):
        f = self.io.BytesIO()
        torch.save({"model": self.model.state_dict(), "opt": self.opt.state_dict(),
                    "sched": self.sched.state_dict(), "gen": self.gen.get_state(),
                    "cuda_rng": torch.cuda.get_rng_state(self.dev), "step": i}, f)
        self.blob = f.getvalue()

    def restore(self):
        ck = torch.load(self.io.BytesIO(self.blob), map_location="cpu", weights_only=False)
        self.model.load_state_dict(ck["model"])
        self.opt.load_state_dict(ck["opt"])
        self.sched.load_state_dict(ck["sched"])
        self.gen.set_state(ck["gen"])
        torch.cuda.set_rng_state(ck["cuda_rng"], self.dev)
        return ck["step"]

    def step(self, i):
        loss = super().step(i)
        self.sched.step()
        mark = ""
        if i % self.save_every == self.save_every - 1:
            self.save(i)
            mark = "s"
        if i % self.restore_every == self.restore_every - 1 and self.blob is not None:
            mark += "r%d" % self.restore()
        self.marks[i] = mark or "-"
        return loss

    def loss_lines(self):
        for i, m in self.marks.items():
            self.extra[i] = "ck=" + m
        return super().loss_lines()


# --------------------------------------------------------------------------- red-team round three
# Loops a launch-holding, graph-replaying tool could get wrong in ways the rounds above do
# not reach: a KV cache grown by torch.cat every token (every decode launch has the shapes
# of no earlier one), beam search that stops on a value read back every token, the nested
# tensor fast path of nn.TransformerEncoder (sizes read back) between training steps,
# packed variable-length RNN batches, second-order meta-learning over inner loops of random
# length, tasks drawn from a host RNG with a head that joins mid-run, a backward that forks
# onto side streams from the autograd thread, and a contrastive queue written at a pointer
# that moves every step.

class KVGrowWorkload(Workload):
    """Training between generations, as RL-from-samples and eval-while-training loops do:
    every step is one training step of a 2-layer GPT-style decoder (16 sequences of 40
    tokens, a noisy arithmetic progression per row; AdamW, foreach), then greedy
    generation from the updated weights for 4 fresh prompts in eval mode under no_grad,
    with the KV cache grown by torch.cat: the prompt (4 to 12 tokens) is prefilled with a
    causal mask, and each of the 1 to 16 new tokens (both counts drawn every step by a
    seeded host random.Random) runs the decoder on one token, concatenates its keys and
    values to the cache (a new, one position longer tensor per layer, from the caching
    allocator, the old one freed) and attends over all of it. So every decode launch has
    the kernels of the one before it but other shapes (the attention GEMMs' and softmax's
    sizes, grids and strides grow by one position a token), and the step's sequence,
    prompt and token counts drawn afresh, repeats neither within a step nor across steps:
    a tool that matches launches by kernel and patches their pointer arguments must not
    replay a graph whose kernels were recorded at another length. The tokens are never read
    by the host. Prompt and token counts and the generated tokens' summed logits end every
    line (" p=<n> n=<n> g=<hex>"). No sync in the loop."""

    batch, seq, vocab, d, heads, layers, maxlen = 16, 40, 256, 128, 4, 2, 64
    gen_batch, prompt_range, new_range = 4, (4, 12), (1, 16)

    def setup(self, mode="eager"):
        import random
        self.model = GrowDecoder(self.vocab, self.maxlen, self.d, self.heads, self.layers).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=0.01, foreach=True)
        self.ar = torch.arange(self.seq + 1, device=self.dev)
        self.counts = random.Random(8080)
        self.gen_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.shapes = {}

    def sequences(self, rows, n):
        """rows x n tokens: an arithmetic progression mod vocab per row (random start,
        stride 1 to 4), one token in ten replaced by a random one."""
        start = torch.randint(0, self.vocab, (rows, 1), device=self.dev, generator=self.gen)
        stride = torch.randint(1, 5, (rows, 1), device=self.dev, generator=self.gen)
        tok = (start + stride * self.ar[:n]) % self.vocab
        noise = torch.randint(0, self.vocab, (rows, n), device=self.dev, generator=self.gen)
        flip = torch.rand(rows, n, device=self.dev, generator=self.gen) < 0.1
        return torch.where(flip, noise, tok)

    def step(self, i):
        tok = self.sequences(self.batch, self.seq + 1)
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(tok[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, self.vocab), tok[:, 1:].reshape(-1))
        loss.backward()
        self.opt.step()
        p = self.counts.randint(*self.prompt_range)
        n = self.counts.randint(*self.new_range)
        self.model.eval()
        with torch.no_grad():
            caches = [[None, None] for _ in range(self.layers)]
            prompt = self.sequences(self.gen_batch, p)
            last = self.model(prompt, 0, caches)[:, -1]                    # B, vocab
            total = torch.zeros((), device=self.dev)
            for t in range(n):
                best, nxt = last.max(dim=-1)
                total = total + best.sum()
                if t + 1 < n:
                    last = self.model(nxt.unsqueeze(1), p + t, caches)[:, -1]
            self.gen_buf[i].copy_(total)
            del caches
        self.shapes[i] = (p, n)
        return loss

    def loss_lines(self):
        g = tensor_hexes(self.gen_buf)
        for i, (p, n) in self.shapes.items():
            self.extra[i] = "p=%d n=%d g=%s" % (p, n, g[i])
        return super().loss_lines()


class BeamWorkload(Workload):
    """A GRUCell language model (PyTorch's fused GRU cell kernels, not cuDNN) trained with
    teacher forcing, 20 cell steps a batch, on sequences that end in an end token (0) at a
    data-dependent position (the first token divisible by 8 from the fifth on; the
    positions after it ignored by the loss, ignore_index), Adam (foreach); after every
    training step, beam search (4 beams for each of 4 three-token prompts) with the new
    weights under no_grad: per token the cell's step, log_softmax, the beams' scores added,
    topk over beams x vocabulary, the surviving beams' hidden states and histories
    reordered with index_select by indices computed on the GPU (never read), the histories
    grown by torch.cat; a prompt is done once its best beam has emitted the end token, and
    whether all are is read back with .item() after every token (a sync whose value
    decides whether another token's launches follow), 16 tokens at most. So the step ends
    at a point only the GPU's values decide: a tool that replays a search recorded over
    more tokens launches work the program never asked for, and every launch it holds back
    must be issued before each read can return. The number of tokens searched and the
    best beams' summed scores and token sums end every line (" n=<n> s=<hex> t=<hex>")."""

    syncs = True
    batch, seq, vocab, d, hidden, eos = 32, 20, 32, 64, 256, 0
    prompts, beams, prompt_len, max_new = 4, 4, 3, 16

    def setup(self, mode="eager"):
        self.emb = nn.Embedding(self.vocab, self.d)
        self.cell = nn.GRUCell(self.d, self.hidden)
        self.out = nn.Linear(self.hidden, self.vocab)
        self.model = nn.ModuleList([self.emb, self.cell, self.out]).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=2e-3, foreach=True)
        self.ar = torch.arange(self.seq + 1, device=self.dev)
        K = self.beams
        self.beam_init = torch.tensor([0.0] + [float("-inf")] * (K - 1), device=self.dev).repeat(self.prompts)
        self.base = (torch.arange(self.prompts, device=self.dev) * K).unsqueeze(1)    # first row of each prompt
        self.score_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.tok_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.lens = {}

    def sequences(self, rows):
        """rows x (seq+1) tokens in 1..vocab-1 (an arithmetic progression, stride 1 to 6),
        the end token at the first position from 4 on whose token is divisible by 8, and
        the mask of the positions after it."""
        start = torch.randint(1, self.vocab, (rows, 1), device=self.dev, generator=self.gen)
        stride = torch.randint(1, 7, (rows, 1), device=self.dev, generator=self.gen)
        tok = (start + stride * self.ar) % (self.vocab - 1) + 1
        stop = (tok % 8 == 0) & (self.ar >= 4)
        first = stop.int().argmax(dim=1).masked_fill(~stop.any(dim=1), self.seq + 1)   # the first stop
        tok = tok.masked_fill(self.ar == first.unsqueeze(1), self.eos)
        return tok, self.ar > first.unsqueeze(1)

    def search(self):
        B, K, V, H = self.prompts, self.beams, self.vocab, self.hidden
        with torch.no_grad():
            prompt = self.sequences(B)[0][:, :self.prompt_len]
            h = torch.zeros(B, H, device=self.dev)
            for t in range(self.prompt_len - 1):
                h = self.cell(self.emb(prompt[:, t]), h)
            h = h.unsqueeze(1).expand(B, K, H).reshape(B * K, H)
            last = prompt[:, -1].unsqueeze(1).expand(B, K).reshape(B * K)
            hist = last.unsqueeze(1)
            scores = self.beam_init
            done = torch.zeros(B, dtype=torch.bool, device=self.dev)
            n = 0
            while n < self.max_new:
                h = self.cell(self.emb(last), h)
                logp = F.log_softmax(self.out(h), dim=-1)                  # B*K, V
                top, idx = (scores.unsqueeze(1) + logp).view(B, K * V).topk(K, dim=1)
                rows = (idx // V + self.base).reshape(-1)                  # the beams that survive
                tok = idx % V                                              # B, K
                h = h.index_select(0, rows)
                hist = torch.cat([hist.index_select(0, rows), tok.reshape(-1, 1)], dim=1)
                scores = top.reshape(-1)
                last = tok.reshape(-1)
                done = done | (tok[:, 0] == self.eos)
                n += 1
                if done.all().item():                                      # the per-token sync
                    break
            best = scores.view(B, K)[:, 0].sum()
            toks = hist.view(B, K, -1)[:, 0].sum().float()
        return n, best, toks

    def step(self, i):
        tok, past = self.sequences(self.batch)
        tgt = tok[:, 1:].masked_fill(past[:, 1:], -100)
        self.opt.zero_grad(set_to_none=True)
        x = self.emb(tok[:, :-1])
        h = torch.zeros(self.batch, self.hidden, device=self.dev)
        outs = []
        for t in range(self.seq):
            h = self.cell(x[:, t], h)
            outs.append(h)
        logits = self.out(torch.stack(outs, dim=1))                        # B, T, V
        loss = F.cross_entropy(logits.reshape(-1, self.vocab), tgt.reshape(-1), ignore_index=-100)
        loss.backward()
        self.opt.step()
        n, best, toks = self.search()
        self.score_buf[i].copy_(best)
        self.tok_buf[i].copy_(toks)
        self.lens[i] = n
        return loss

    def loss_lines(self):
        s, t = tensor_hexes(self.score_buf), tensor_hexes(self.tok_buf)
        for i, n in self.lens.items():
            self.extra[i] = "n=%d s=%s t=%s" % (n, s[i], t[i])
        return super().loss_lines()


class EncPadWorkload(Workload):
    """nn.TransformerEncoder (2 post-norm layers, 4 heads, GELU, batch_first,
    enable_nested_tensor=True) classifying padded token sequences whose lengths (4 to 48)
    are redrawn on the GPU every step, masked with src_key_padding_mask (True past each
    length) and mean-pooled over the valid positions; AdamW (foreach). Training steps take
    the ordinary path (MultiheadAttention with the mask merged into
    scaled_dot_product_attention, dropout). On every odd step an eval pass on a fresh
    batch follows in eval mode under no_grad, which PyTorch sends down its fast path: the
    mask is checked to be left-aligned (a bool read back), the batch is packed into a
    nested tensor by _nested_tensor_from_mask (the lengths read back: the nested buffer's
    size and the kernels' shapes follow from them), each layer runs as one
    _transformer_encoder_layer_fwd over the nested tensor, and to_padded_tensor pads the
    result again; every 10th step's eval (i % 10 == 5) has no mask and takes the dense
    fast path (the same fused layer over the padded tensor). The same modules thus issue
    three different launch sequences, one of them shaped by values read back mid-pass, in
    a period-10 rhythm: a tool that replays the training step's recording for the eval
    pass, or a nested pass recorded at other lengths, computes with the wrong kernels. The
    eval loss ends the odd steps' lines (" ev=n:<hex>" nested, " ev=d:<hex>" dense). Syncs
    on the nested passes only (four odd steps in five)."""

    batch, seq, vocab, d, heads, nout, min_len = 32, 48, 1000, 128, 4, 10, 4

    def setup(self, mode="eager"):
        layer = nn.TransformerEncoderLayer(self.d, self.heads, dim_feedforward=4 * self.d, dropout=0.1,
                                           activation="gelu", batch_first=True)
        self.model = nn.ModuleDict({
            "emb": nn.Embedding(self.vocab, self.d),
            "enc": nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=True),
            "head": nn.Linear(self.d, self.nout)}).to(self.dev)
        self.pos = nn.Parameter(0.02 * torch.randn(1, self.seq, self.d, device=self.dev, generator=self.gen))
        self.opt = torch.optim.AdamW(list(self.model.parameters()) + [self.pos], lr=3e-4, weight_decay=0.01,
                                     foreach=True)
        self.truth = torch.randn(self.vocab, self.nout, device=self.dev, generator=self.gen)
        self.ar = torch.arange(self.seq, device=self.dev)
        self.eval_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.evals = {}

    def draw(self):
        tok = torch.randint(0, self.vocab, (self.batch, self.seq), device=self.dev, generator=self.gen)
        lengths = torch.randint(self.min_len, self.seq + 1, (self.batch,), device=self.dev, generator=self.gen)
        pad = self.ar >= lengths.unsqueeze(1)                              # B, T: True past the end
        keep = (~pad).unsqueeze(-1).float()
        y = (F.embedding(tok, self.truth) * keep).sum(dim=1).argmax(dim=1)
        return tok, pad, keep, lengths, y

    def logits(self, tok, pad, keep, lengths):
        m = self.model
        x = m["emb"](tok) + self.pos
        if pad is None:
            return m["head"](m["enc"](x).mean(dim=1))
        h = m["enc"](x, src_key_padding_mask=pad)           # the fast path may pad only to the longest
        return m["head"]((h * keep[:, :h.shape[1]]).sum(dim=1) / lengths.unsqueeze(1).float())

    def step(self, i):
        tok, pad, keep, lengths, y = self.draw()
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.logits(tok, pad, keep, lengths), y)
        loss.backward()
        self.opt.step()
        if i % 2 == 1:
            self.model.eval()
            with torch.no_grad():
                tok, pad, keep, lengths, y = self.draw()
                dense = i % 10 == 5
                if dense:
                    y = F.embedding(tok, self.truth).sum(dim=1).argmax(dim=1)
                    pad = None
                el = F.cross_entropy(self.logits(tok, pad, keep, lengths), y)
                self.eval_buf[i].copy_(el)
            self.model.train()
            self.evals[i] = "d" if dense else "n"
        return loss

    def loss_lines(self):
        ev = tensor_hexes(self.eval_buf)
        for i, kind in self.evals.items():
            self.extra[i] = "ev=%s:%s" % (kind, ev[i])
        return super().loss_lines()


class PackedWorkload(Workload):
    """A 2-layer cuDNN GRU over packed variable-length sequences, as speech and text
    loops batch them: 16 sequences whose lengths (2 to 40) a seeded host random.Random
    redraws every step, padded to the longest, packed by pack_padded_sequence(
    enforce_sorted=False) (the lengths sorted on the host, the permutation copied to the
    GPU from pageable memory, the batch gathered with index_select; the packed batch sizes
    per time step, host data cuDNN gets as its sequence descriptor, change every step), the
    GRU's output unpacked by pad_packed_sequence, which reads the inverse permutation back
    (unsorted_indices.cpu(), a sync) to reorder the lengths; every 4th step the lengths come
    sorted and enforce_sorted=True takes the path with no permutation and no read-back.
    Loss: each position predicts the token before it (the padding ignored) plus a class from
    the final hidden state of the top layer; Adam (foreach). The number of time steps, the
    total of the lengths and which path ran differ from step to step with no period: a tool
    that records the launch sequence of one packed batch and replays it for the next
    replays cuDNN's kernels with another batch layout. The longest length, the total and
    the path end every line (" T=<n> L=<n> s|u")."""

    syncs = True
    batch, vocab, d, hidden, nclass, min_len, max_len, sorted_every = 16, 500, 64, 128, 4, 2, 40, 4

    def setup(self, mode="eager"):
        import random
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
        self.pack, self.unpack = pack_padded_sequence, pad_packed_sequence
        self.model = nn.ModuleDict({
            "emb": nn.Embedding(self.vocab, self.d),
            "rnn": nn.GRU(self.d, self.hidden, num_layers=2, batch_first=True),
            "tok": nn.Linear(self.hidden, self.vocab),
            "cls": nn.Linear(self.hidden, self.nclass)}).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=2e-3, foreach=True)
        self.draws = random.Random(1717)
        self.ar = torch.arange(self.max_len, device=self.dev)
        self.shapes = {}

    def step(self, i):
        m = self.model
        lengths = [self.draws.randint(self.min_len, self.max_len) for _ in range(self.batch)]
        presorted = i % self.sorted_every == self.sorted_every - 1
        if presorted:
            lengths.sort(reverse=True)
        T = max(lengths)
        tok = torch.randint(1, self.vocab, (self.batch, T), device=self.dev, generator=self.gen)
        lens = torch.tensor(lengths, device=self.dev)                      # from pageable memory
        valid = self.ar[:T] < lens.unsqueeze(1)                            # B, T
        tgt = torch.cat([torch.full_like(tok[:, :1], -100), tok[:, :-1]], dim=1).masked_fill(~valid, -100)
        y = tok[:, 0] % self.nclass
        self.opt.zero_grad(set_to_none=True)
        packed = self.pack(m["emb"](tok), lengths, batch_first=True, enforce_sorted=presorted)
        out, hn = m["rnn"](packed)
        padded, _ = self.unpack(out, batch_first=True, total_length=T)     # B, T, hidden
        loss = (F.cross_entropy(m["tok"](padded).reshape(-1, self.vocab), tgt.reshape(-1), ignore_index=-100)
                + F.cross_entropy(m["cls"](hn[-1]), y))
        loss.backward()
        self.opt.step()
        self.shapes[i] = "T=%d L=%d %s" % (T, sum(lengths), "s" if presorted else "u")
        return loss

    def loss_lines(self):
        for i, e in self.shapes.items():
            self.extra[i] = e
        return super().loss_lines()


class MAMLWorkload(Workload):
    """Second-order MAML (with learnable per-tensor inner learning rates, Meta-SGD style)
    over a functional inner loop: every step draws 3 tasks (5-way classification by a
    random projection, 25 support and 25 query samples each, from the GPU generator); for
    each, 1 to 3 inner steps (drawn per task by a seeded host random.Random, so the step's
    launch count has no period) each take torch.autograd.grad(create_graph=True) of the
    support loss through torch.func.functional_call with the fast weights (non-leaf
    tensors: the parameters minus their learning rate times the gradient), and the query
    loss of the adapted weights joins the meta-loss; one backward then runs through every
    inner backward (double backward of Linear, tanh, log_softmax and nll_loss), then
    clip_grad_norm_ and Adam (foreach) over the model and the inner learning rates. The
    inner loop's length decides how many backward passes are nested, and so the whole
    second-order graph: consecutive steps share long runs of identical launches and then
    part, at a point the host RNG decides. The inner step counts end every line
    (" k=<a><b><c>"). No sync in the loop."""

    din, hidden, nway, tasks, shots, queries, max_inner = 32, 64, 5, 3, 25, 25, 3

    def setup(self, mode="eager"):
        import random
        from torch.func import functional_call
        self.call = functional_call
        self.model = nn.Sequential(nn.Linear(self.din, self.hidden), nn.Tanh(),
                                   nn.Linear(self.hidden, self.hidden), nn.Tanh(),
                                   nn.Linear(self.hidden, self.nway)).to(self.dev)
        n = len(list(self.model.parameters()))
        self.log_lr = nn.Parameter(torch.full((n,), math.log(0.3), device=self.dev))
        self.params = list(self.model.parameters()) + [self.log_lr]
        self.opt = torch.optim.Adam(self.params, lr=1e-3, foreach=True)
        self.inner = random.Random(555)
        self.counts = {}

    def task(self):
        w = torch.randn(self.din, self.nway, device=self.dev, generator=self.gen)
        x = torch.randn(self.shots + self.queries, self.din, device=self.dev, generator=self.gen)
        y = (x @ w).argmax(dim=1)
        return x[:self.shots], y[:self.shots], x[self.shots:], y[self.shots:]

    def step(self, i):
        self.opt.zero_grad(set_to_none=True)
        lrs = self.log_lr.exp()
        meta = torch.zeros((), device=self.dev)
        ks = []
        for _ in range(self.tasks):
            xs, ys, xq, yq = self.task()
            k = self.inner.randint(1, self.max_inner)
            fast = dict(self.model.named_parameters())
            for _ in range(k):
                support = F.cross_entropy(self.call(self.model, fast, (xs,)), ys)
                grads = torch.autograd.grad(support, list(fast.values()), create_graph=True)
                fast = {name: p - lrs[j] * g for j, ((name, p), g) in enumerate(zip(fast.items(), grads))}
            meta = meta + F.cross_entropy(self.call(self.model, fast, (xq,)), yq) / self.tasks
            ks.append(k)
        meta.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.counts[i] = ks
        return meta

    def loss_lines(self):
        for i, ks in self.counts.items():
            self.extra[i] = "k=" + "".join(str(k) for k in ks)
        return super().loss_lines()


class MultiTaskWorkload(Workload):
    """Multi-task training with a shared trunk and three heads of other shapes: "c" (64
    samples, 10 classes, cross-entropy), "r" (48 samples, 4 outputs, smooth L1 against a
    tanh of a projection) and "t" (16 sequences of 10 tokens, a per-token 6-way tagger with
    label smoothing, on the trunk's features joined to their sequence mean), each weighted by a
    learnable log-variance (uncertainty weighting). Every step accumulates gradients over 1
    to 3 micro-batches, each of a task drawn by a seeded host random.Random with weights
    5:3:2 (so the step's launch sequence is one of 39 combinations of three interleaved
    ones, in no period), backward after each; the tagger joins only at step 100 (its
    parameters get gradients, and AdamW state, for the first time there). AdamW (foreach)
    with zero_grad(set_to_none=True): the heads a step did not use have no gradient and are
    left out of the step's foreach lists, and since each head's step count is its own the
    bias corrections passed per tensor differ. A tool that predicts the next step from the
    last ones mispredicts on most steps and must give back every launch it held for a
    prediction that failed, in order. The tasks a step drew end every line (" t=<tasks>").
    No sync in the loop."""

    din, width, tag_from, max_micro = 128, 256, 100, 3
    outs = (("cls", 10), ("reg", 4), ("tag", 6))

    def setup(self, mode="eager"):
        import random
        w = self.width
        self.model = nn.ModuleDict({
            "trunk": nn.Sequential(nn.Linear(self.din, w), nn.GELU(), nn.Linear(w, w), nn.GELU()),
            "cls": nn.Linear(w, 10), "reg": nn.Linear(w, 4), "tag": nn.Linear(2 * w, 6)}).to(self.dev)
        self.log_vars = nn.Parameter(torch.zeros(3, device=self.dev))
        self.opt = torch.optim.AdamW(list(self.model.parameters()) + [self.log_vars], lr=1e-3,
                                     weight_decay=0.01, foreach=True)
        self.proj = {name: torch.randn(self.din, n, device=self.dev, generator=self.gen) for name, n in self.outs}
        self.draws = random.Random(4242)
        self.plan = {}

    def task_loss(self, t):
        m = self.model
        if t == 0:
            x = torch.randn(64, self.din, device=self.dev, generator=self.gen)
            return F.cross_entropy(m["cls"](m["trunk"](x)), (x @ self.proj["cls"]).argmax(dim=1))
        if t == 1:
            x = torch.randn(48, self.din, device=self.dev, generator=self.gen)
            return F.smooth_l1_loss(m["reg"](m["trunk"](x)), torch.tanh(x @ self.proj["reg"]))
        x = torch.randn(16, 10, self.din, device=self.dev, generator=self.gen)
        h = m["trunk"](x)                                                  # 16, 10, width
        h = torch.cat([h, h.mean(dim=1, keepdim=True).expand_as(h)], dim=2)
        y = (x @ self.proj["tag"]).argmax(dim=2)
        return F.cross_entropy(m["tag"](h).reshape(-1, 6), y.reshape(-1), label_smoothing=0.1)

    def step(self, i):
        n = self.draws.randint(1, self.max_micro)
        if i >= self.tag_from:
            tasks = [self.draws.choices((0, 1, 2), weights=(5, 3, 2))[0] for _ in range(n)]
        else:
            tasks = [self.draws.choices((0, 1), weights=(5, 3))[0] for _ in range(n)]
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.dev)
        for t in tasks:
            lv = self.log_vars[t]
            loss = (torch.exp(-lv) * self.task_loss(t) + lv) / n
            loss.backward()
            total = total + loss.detach()
        self.opt.step()
        self.plan[i] = "".join("crt"[t] for t in tasks)
        return total

    def loss_lines(self):
        for i, p in self.plan.items():
            self.extra[i] = "t=" + p
        return super().loss_lines()


class SideBwdWorkload(TaskWorkload):
    """An MLP (5 layers, ReLU, dropout 0.1) whose every Linear is a custom autograd
    Function (SideLinearFn) whose backward forks onto a side stream: on the autograd
    engine's device thread, the side stream waits for backward's stream, computes the
    weight and bias gradients there while backward's own stream computes the input
    gradient (none for the first layer), and is joined again by wait_stream or, on a
    layer and step where (step + layer) % 3 == 0, by an Event created, recorded on the side
    stream and waited for (cuEventCreate, cuEventRecord, cuStreamWaitEvent and the
    event's destruction, from the autograd thread, mid-backward); the tensors are handed
    between the streams with record_stream. Layers alternate between two side streams (the
    second of high priority). The weight gradients, allocated on the side streams, become
    .grad directly (zero_grad(set_to_none=True), so AccumulateGrad steals them), and AdamW
    (foreach) reads them on the main stream. The join pattern has period 3. A tool that
    orders held launches per stream must keep the cross-stream edges the program drew on
    another thread, whichever primitive drew them: a weight update that reads a gradient
    before the side stream wrote it, or a side GEMM that reads the output gradient before
    backward's stream produced it, changes the loss. No sync in the loop."""

    layers = 5
    grads_to_none = True

    def setup(self, mode="eager"):
        dims = [self.din] + [self.hidden] * (self.layers - 1) + [self.nout]
        self.lins = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])]).to(self.dev)
        self.model = self.lins
        self.drop = nn.Dropout(0.1)
        self.sides = [torch.cuda.Stream(device=self.dev), torch.cuda.Stream(device=self.dev, priority=-1)]
        self.opt = torch.optim.AdamW(self.lins.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.phase = 0
        self.fwd = self.forward

    def forward(self, x):
        h = x
        last = len(self.lins) - 1
        for k, lin in enumerate(self.lins):
            h = SideLinearFn.apply(h, lin.weight, lin.bias, self.sides[k % 2], (self.phase + k) % 3 == 0)
            if k < last:
                h = self.drop(F.relu(h))
        return h

    def step(self, i):
        self.phase = i % 3
        return super().step(i)


class ContrastWorkload(Workload):
    """Contrastive learning as MoCo and CLIP combine it: a query encoder (MLP to 64-d,
    L2-normalised) trained on two views of 384 samples from 32 latent classes (noise, and
    feature dropout), a key encoder that follows it by a momentum update
    (torch._foreach_lerp_) after every step, a queue of 4000 past keys, and a learnable
    temperature (CLIP's logit_scale: exp() in the graph, clamped in place under no_grad
    after every optimizer step). Loss: cross-entropy over [positive, 4000 queue
    negatives] (a 384 x 4000 similarity GEMM) plus CLIP's symmetric in-batch loss over a
    384 x 384 similarity matrix (cross-entropy over its rows and over its transpose);
    AdamW (foreach). The keys are enqueued at a host pointer that moves by 384 every step
    (period 125, since 4000 is no multiple of 384): while they fit, by a copy into
    queue[ptr:ptr+384] (a device-to-device copy whose destination address moves every
    step), and when they wrap, every tenth step or so, by index_copy_ with indices
    computed from the pointer (another kernel); the queue is read by the next step's GEMM.
    A tool that patches the copy's destination, or a kernel's scalar pointer argument,
    from the step it recorded writes the keys over the wrong rows. The clamped logit scale
    and the pointer after the step end every line (" s=<hex> p=<n>"). No sync in the
    loop."""

    batch, din, width, dim, classes, queue_len, momentum = 384, 128, 256, 64, 32, 4000, 0.99

    def setup(self, mode="eager"):
        import copy
        self.enc_q = nn.Sequential(nn.Linear(self.din, self.width), nn.ReLU(), nn.Linear(self.width, self.width),
                                   nn.ReLU(), nn.Linear(self.width, self.dim)).to(self.dev)
        self.enc_k = copy.deepcopy(self.enc_q).requires_grad_(False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07), device=self.dev))
        self.max_scale = math.log(100.0)
        self.q_params = list(self.enc_q.parameters())
        self.k_params = list(self.enc_k.parameters())
        self.opt = torch.optim.AdamW(self.q_params + [self.logit_scale], lr=1e-3, weight_decay=0.01, foreach=True)
        self.centers = torch.randn(self.classes, self.din, device=self.dev, generator=self.gen)
        self.queue = F.normalize(torch.randn(self.queue_len, self.dim, device=self.dev, generator=self.gen), dim=1)
        self.ar = torch.arange(self.batch, device=self.dev)
        self.zeros = torch.zeros(self.batch, dtype=torch.long, device=self.dev)
        self.ptr = 0
        self.scale_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.ptrs = {}

    def step(self, i):
        B = self.batch
        c = torch.randint(0, self.classes, (B,), device=self.dev, generator=self.gen)
        x = self.centers.index_select(0, c) + 0.5 * torch.randn(B, self.din, device=self.dev, generator=self.gen)
        x1 = x + 0.1 * torch.randn(B, self.din, device=self.dev, generator=self.gen)
        x2 = x * (torch.rand(B, self.din, device=self.dev, generator=self.gen) > 0.1).float() / 0.9
        self.opt.zero_grad(set_to_none=True)
        q1 = F.normalize(self.enc_q(x1), dim=1)
        q2 = F.normalize(self.enc_q(x2), dim=1)
        with torch.no_grad():
            k = F.normalize(self.enc_k(x2), dim=1)
        scale = self.logit_scale.exp()
        l_pos = (q1 * k).sum(dim=1, keepdim=True)                          # B, 1
        l_neg = q1 @ self.queue.t()                                        # B, queue_len
        moco = F.cross_entropy(torch.cat([l_pos, l_neg], dim=1) * scale, self.zeros)
        sim = scale * (q1 @ q2.t())                                        # B, B
        clip = 0.5 * (F.cross_entropy(sim, self.ar) + F.cross_entropy(sim.t(), self.ar))
        loss = moco + clip
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            self.logit_scale.clamp_(0.0, self.max_scale)
            torch._foreach_lerp_(self.k_params, self.q_params, 1.0 - self.momentum)
            end = self.ptr + B
            if end <= self.queue_len:
                self.queue[self.ptr:end].copy_(k)
            else:
                self.queue.index_copy_(0, (self.ar + self.ptr) % self.queue_len, k)
            self.ptr = end % self.queue_len
        self.scale_buf[i].copy_(self.logit_scale.detach())
        self.ptrs[i] = self.ptr
        return loss

    def loss_lines(self):
        s = tensor_hexes(self.scale_buf)
        for i, p in self.ptrs.items():
            self.extra[i] = "s=%s p=%d" % (s[i], p)
        return super().loss_lines()


# --------------------------------------------------------------------------- red-team round four
# Recent PyTorch features and patterns of 2025-26 training code the rounds above leave out,
# each chosen for what a launch-holding, graph-replaying tool could get wrong: a CUDA graph
# capture the program opens and abandons (its kernels never run), allocations routed to a
# MemPool that is deleted and made again, work placed in green contexts (other CUcontexts
# of the same device, their own default streams), FlexAttention's Triton kernels over a
# block mask rebuilt every step, jagged nested tensors whose packed length changes every
# step, a producer thread feeding batches through cross-thread events, and an automatic
# batch-size finder that catches the caching allocator's out-of-memory errors.

class CapFailWorkload(TaskWorkload):
    """A whole-step CUDA graph tried and given up, as scripts that try graphs first and fall
    back to eager do: every 100 steps (steps 40, 140, 240) the loop follows the capture
    recipe (the batch copied into static tensors, a warmup step on a side stream, which is
    that step's real training step), then captures forward, backward and AdamW's step with
    torch.cuda.graph (whose entry synchronizes the device and empties the cache). AdamW was
    built with capturable=False, so its step raises inside the capture (the optimizer's
    capture health check, before it launches anything); the context manager still ends the
    capture and instantiates the graph, whose kernels (the forward with its dropout, the
    backward, the gradients it allocated from the graph's private pool) never run. The loop
    catches the error, drops the gradients and the graph (its pool released, the executable
    graph destroyed) and trains on eagerly, with gradients allocated afresh. The attempts use
    capture_error_mode "global", "thread_local" and "relaxed" in turn: under "global" a
    potentially unsafe CUDA call from any other thread while the capture is open (a query,
    a synchronize, a free) invalidates it, and the program would see a CUDA error at the
    capture's end instead of the optimizer's; a tool that holds launches must also not run
    the captured kernels, nor count them as work done. How each attempt ended is appended on
    its line (" cap=h": the optimizer's error, as eagerly; " cap=e": another error; " cap=ok":
    none). The MLP (6 layers, dropout 0.1), labels from a fixed projection; ordinary steps
    zero_grad(set_to_none=False). No sync in the loop apart from the attempts' own."""

    attempt_every, attempt_at = 100, 40
    capture_modes = ("global", "thread_local", "relaxed")

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True,
                                     capturable=False)
        self.fwd = self.model
        self.label_setup()
        self.static_x = torch.zeros(self.batch, self.din, device=self.dev)
        self.static_y = torch.zeros(self.batch, dtype=torch.long, device=self.dev)
        self.side = torch.cuda.Stream(device=self.dev)
        self.outcomes = {}

    def step(self, i):
        if i % self.attempt_every != self.attempt_at:
            return super().step(i)
        x, y = self.batch_for(i)
        self.static_x.copy_(x)
        self.static_y.copy_(y)
        main = torch.cuda.current_stream(self.dev)
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):   # the recipe's warmup: a real step
            self.opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.model(self.static_x), self.static_y)
            loss.backward()
            self.opt.step()
        main.wait_stream(self.side)
        mode = self.capture_modes[(i // self.attempt_every) % len(self.capture_modes)]
        graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)   # backward in the capture allocates them from its pool
        outcome = "ok"
        static_loss = None
        try:
            with torch.cuda.graph(graph, capture_error_mode=mode):
                static_loss = F.cross_entropy(self.model(self.static_x), self.static_y)
                static_loss.backward()
                self.opt.step()                 # raises: capturable=False
        except RuntimeError as e:
            outcome = "h" if "capturable" in str(e) else "e"
        static_loss = None
        self.opt.zero_grad(set_to_none=True)   # the captured gradients were never computed
        del graph
        self.outcomes[i] = outcome
        return loss

    def loss_lines(self):
        for i, o in self.outcomes.items():
            self.extra[i] = "cap=" + o
        return super().loss_lines()


class MemPoolWorkload(TaskWorkload):
    """Allocations routed to a torch.cuda.MemPool, as recent code keeps long-lived or
    offloadable memory apart from the rest (vLLM's sleep mode, NCCL buffer pools): an
    exponential moving average of the weights lives in a MemPool, updated after every
    optimizer step (foreach lerp), and the training forward pass runs under
    torch.cuda.use_mem_pool(pool), so its activations (allocated by this thread) come from
    the pool too while backward's (the autograd thread's) do not; every 10th step the EMA
    weights are evaluated (torch.func.functional_call, eval mode, no_grad) under the pool.
    Every 60 steps the EMA "sleeps" at step 30 of the cycle: its tensors are copied into
    pinned host buffers (non_blocking), an event is waited for, the tensors are dropped and
    the MemPool deleted (releasePool and emptyCache of the pool: its segments go back to the
    driver with cudaFree); six steps later it "wakes": a new MemPool, new segments, the
    tensors copied back from the pinned buffers (non_blocking host-to-device copies into
    memory that did not exist a moment before). So the same kernels run over addresses that
    move at every sleep and wake, next to blocks freed while a tool may still hold launches
    that wrote them. torch.cuda.memory_allocated() and memory_reserved() after the step
    (the allocator's own counts) and what the step did (s: slept, w: woke, -: neither) end
    every line (" p=<s|w|-> mem=<allocated>/<reserved>"), the EMA model's eval loss the eval
    steps' (" ev=<hex>"). The MLP (6 layers, dropout 0.1), AdamW (foreach)."""

    eval_every, cycle, sleep_at, wake_at, ema_rate, neval = 10, 60, 30, 36, 0.05, 512

    def setup(self, mode="eager"):
        from torch.func import functional_call
        self.call = functional_call
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.label_setup()
        self.params = list(self.model.parameters())
        self.names = [n for n, _ in self.model.named_parameters()]
        self.host = [torch.empty(p.shape, pin_memory=True) for p in self.params]
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = (self.Xe @ self.label_proj).argmax(dim=-1)
        with torch.no_grad():   # this thread's cuBLAS(Lt) workspaces, before any pool exists
            self.model(self.Xe[:8])
        self.pool, self.ema = None, None
        self.wake(from_host=False)
        self.eval_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.evals = []
        self.marks = {}

    def wake(self, from_host):
        self.pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(self.pool):
            if from_host:
                self.ema = [h.to(self.dev, non_blocking=True) for h in self.host]
            else:
                self.ema = [p.detach().clone() for p in self.params]

    def sleep(self):
        for h, e in zip(self.host, self.ema):
            h.copy_(e, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        done.synchronize()
        self.ema = None
        self.pool = None   # ~MemPool: the pool released and its cached segments freed

    def step(self, i):
        phase = i % self.cycle
        mark = "-"
        if phase == self.sleep_at and self.pool is not None:
            self.sleep()
            mark = "s"
        elif phase == self.wake_at and self.pool is None:
            self.wake(from_host=True)
            mark = "w"
        awake = self.pool is not None
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        if awake:
            with torch.cuda.use_mem_pool(self.pool):
                logits = self.model(x)
        else:
            logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        del logits
        loss.backward()
        self.opt.step()
        if awake:
            with torch.no_grad():
                torch._foreach_lerp_(self.ema, self.params, self.ema_rate)
            if i % self.eval_every == self.eval_every - 1:
                self.model.eval()
                with torch.no_grad(), torch.cuda.use_mem_pool(self.pool):
                    out = self.call(self.model, dict(zip(self.names, self.ema)), (self.Xe,))
                    self.eval_buf[i].copy_(F.cross_entropy(out, self.Ye))
                    del out
                self.model.train()
                self.evals.append(i)
        self.marks[i] = "p=%s mem=%d/%d" % (mark, torch.cuda.memory_allocated(self.dev),
                                            torch.cuda.memory_reserved(self.dev))
        return loss

    def loss_lines(self):
        for i, m in self.marks.items():
            self.extra[i] = m
        if self.evals:
            ev = tensor_hexes(self.eval_buf)
            for i in self.evals:
                self.extra[i] += " ev=" + ev[i]
        return super().loss_lines()


class GreenCtxWorkload(TaskWorkload):
    """Training and evaluation on partitions of the GPU's SMs, as serving and overlap code
    (prefill/decode multiplexing, compute/communication overlap) uses CUDA green contexts
    (torch.cuda.green_contexts, CUDA 12.8+): two green contexts, of 64 and 32 SMs. Every
    step the batch is drawn on the default stream; the training step (forward with dropout,
    backward, AdamW foreach) runs on a stream of the first green context (GreenContext.Stream:
    cuGreenCtxStreamCreate, a stream of another CUcontext, used while the primary context
    stays current), which first waits for the default stream; meanwhile the EMA weights are
    evaluated on a fresh batch in the second green context made current with set_context()
    (cuCtxPushCurrent of the green context, whose own default stream, the NULL stream of
    another context, becomes PyTorch's current stream after an event from the default
    stream; cuBLAS launches there on stream handle 0) and left with pop_context() (the
    context popped, the default stream made to wait for an event recorded on the green
    one). Then the default stream waits for the training stream and updates the EMA
    (foreach lerp). So the same stream handle (0) names two streams in two contexts within
    one step, and three streams of three contexts run at once: a tool that keys streams by
    handle, or graphs ops of one context in another's graph, reorders them. The eval loss
    ends every line (" ev=<hex>"); the first line says whether green contexts were made
    (" green=1"; where PyTorch or the driver cannot, ordinary streams and the primary
    context take their place and it says " green=0"). The MLP (6 layers, dropout 0.1). No
    sync in the loop."""

    train_sms, side_sms, ema_rate, neval = 64, 32, 0.05, 256

    def setup(self, mode="eager"):
        from torch.func import functional_call
        self.call = functional_call
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.label_setup()
        self.params = list(self.model.parameters())
        self.names = [n for n, _ in self.model.named_parameters()]
        self.ema = [p.detach().clone() for p in self.params]
        self.green = False
        try:
            from torch.cuda.green_contexts import GreenContext
            idx = self.dev.index if self.dev.index is not None else torch.cuda.current_device()
            train_ctx = GreenContext.create(num_sms=self.train_sms, device_id=idx)
            side_ctx = GreenContext.create(num_sms=self.side_sms, device_id=idx)
            train_stream = train_ctx.Stream()
            self.probe(train_stream, side_ctx)
            self.train_ctx, self.side_ctx, self.train_stream = train_ctx, side_ctx, train_stream
            self.green = True
        except Exception as e:  # noqa: BLE001 (no green contexts here: the same loop without them)
            print("workloads: greenctx: no green contexts (%s: %s); ordinary streams instead"
                  % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            self.train_stream = torch.cuda.Stream(device=self.dev)
        self.eval_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def probe(self, stream, ctx):
        """Both ways of using a green context once, joined to the default stream by events as
        the loop joins them: raises where this PyTorch or driver cannot."""
        main = torch.cuda.current_stream(self.dev)
        ones = torch.ones(64, 64, device=self.dev)
        stream.wait_stream(main)
        with torch.cuda.stream(stream):
            a = ones @ ones
        main.wait_stream(stream)
        ctx.set_context()
        try:
            b = ones @ a
        finally:
            ctx.pop_context()
        torch.cuda.synchronize(self.dev)
        del a, b

    def step(self, i):
        main = torch.cuda.current_stream(self.dev)
        x, y = self.batch_for(i)
        xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        ye = (xe @ self.label_proj).argmax(dim=-1)
        s = self.train_stream
        s.wait_stream(main)
        with torch.cuda.stream(s):
            self.opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            self.opt.step()
        x.record_stream(s)
        y.record_stream(s)
        self.model.eval()   # a host-side flag: the training step's kernels are issued already
        if self.green:
            self.side_ctx.set_context()
        try:
            with torch.no_grad():
                out = self.call(self.model, dict(zip(self.names, self.ema)), (xe,))
                ev = F.cross_entropy(out, ye)
        finally:
            if self.green:
                self.side_ctx.pop_context()
            self.model.train()
        self.eval_buf[i].copy_(ev)
        main.wait_stream(s)
        with torch.no_grad():
            torch._foreach_lerp_(self.ema, self.params, self.ema_rate)
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.eval_buf)):
            self.extra[i] = "ev=" + h
        if self.steps:
            self.extra[0] += " green=%d" % int(self.green)
        return super().loss_lines()


class FlexAttnWorkload(Workload):
    """FlexAttention as 2025 pretraining code uses it (torchtitan's document masking): a
    2-layer GPT-style model on 4 packed rows of 512 tokens whose attention is
    torch.compile(flex_attention) (Inductor's Triton flex templates, forward and backward,
    launched by Triton's launcher, next to eager cuBLAS GEMMs) with an ALiBi score_mod (a
    per-head slope tensor captured by the closure) and a causal document mask: every step
    the document boundaries are redrawn on the GPU (about one every 64 tokens; a cumsum into
    a persistent int32 tensor the mask_mod reads) and create_block_mask builds a new
    BlockMask eagerly (the mask_mod vmapped over batch, query and key positions, block
    counts, stable argsorts for the block indices, and their transposes for backward), so
    the kernels' index tensors change content (and address) every step while every shape
    stays the same: the block-sparse kernels read which blocks to visit from those tensors.
    Dropout (eager) on the embeddings and the MLP outputs; AdamW (foreach). Inductor's
    deterministic mode is set where this PyTorch has it (no benchmarking-based config
    choices). The number of key blocks the mask keeps (partial and full) ends every line
    (" kv=<hex>"). No sync in the loop."""

    batch, seq, vocab, d, heads, layers, mean_doc = 4, 512, 512, 128, 4, 2, 64

    def setup(self, mode="eager"):
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        try:
            import torch._inductor.config as inductor_config
            if hasattr(inductor_config, "deterministic"):
                inductor_config.deterministic = True
        except ImportError:
            pass
        self.create_block_mask = create_block_mask
        self.flex = torch.compile(flex_attention, dynamic=False)
        d = self.d
        self.tok = nn.Embedding(self.vocab, d)
        self.pos = nn.Embedding(self.seq, d)
        self.blocks = nn.ModuleList([nn.ModuleDict({
            "ln1": nn.LayerNorm(d), "qkv": nn.Linear(d, 3 * d), "proj": nn.Linear(d, d),
            "ln2": nn.LayerNorm(d), "fc1": nn.Linear(d, 4 * d), "fc2": nn.Linear(4 * d, d)})
            for _ in range(self.layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, self.vocab, bias=False)
        self.model = nn.ModuleList([self.tok, self.pos, self.blocks, self.ln_f, self.head]).to(self.dev)
        self.drop = nn.Dropout(0.1)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=0.01, foreach=True)
        self.positions = torch.arange(self.seq, device=self.dev)
        self.ar = torch.arange(self.seq + 1, device=self.dev)
        self.doc = torch.zeros(self.batch, self.seq, dtype=torch.int32, device=self.dev)
        self.slopes = torch.tensor([2.0 ** -(k + 1) for k in range(self.heads)], device=self.dev)
        doc, slopes = self.doc, self.slopes

        def same_doc_causal(b, h, q_idx, kv_idx):
            return (doc[b, q_idx] == doc[b, kv_idx]) & (q_idx >= kv_idx)

        def alibi(score, b, h, q_idx, kv_idx):
            return score + slopes[h] * (kv_idx - q_idx)

        self.mask_mod, self.score_mod = same_doc_causal, alibi
        self.kv_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def sequences(self, rows, n):
        """rows x n tokens: an arithmetic progression mod vocab per row (random start,
        stride 1 to 4), one token in ten replaced by a random one."""
        start = torch.randint(0, self.vocab, (rows, 1), device=self.dev, generator=self.gen)
        stride = torch.randint(1, 5, (rows, 1), device=self.dev, generator=self.gen)
        tok = (start + stride * self.ar[:n]) % self.vocab
        noise = torch.randint(0, self.vocab, (rows, n), device=self.dev, generator=self.gen)
        flip = torch.rand(rows, n, device=self.dev, generator=self.gen) < 0.1
        return torch.where(flip, noise, tok)

    def step(self, i):
        B, S, H, d = self.batch, self.seq, self.heads, self.d
        hd = d // H
        tok = self.sequences(B, S + 1)
        starts = torch.rand(B, S, device=self.dev, generator=self.gen) < 1.0 / self.mean_doc
        starts[:, 0] = True
        self.doc.copy_(starts.cumsum(dim=1))
        bm = self.create_block_mask(self.mask_mod, B, None, S, S, device=self.dev)
        self.opt.zero_grad(set_to_none=True)
        x = self.drop(self.tok(tok[:, :-1]) + self.pos(self.positions))
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).view(B, S, 3, H, hd).permute(2, 0, 3, 1, 4)
            y = self.flex(q, k, v, score_mod=self.score_mod, block_mask=bm)     # B, H, S, hd
            x = x + blk["proj"](y.transpose(1, 2).reshape(B, S, d))
            x = x + self.drop(blk["fc2"](F.gelu(blk["fc1"](blk["ln2"](x)))))
        logits = self.head(self.ln_f(x))
        loss = F.cross_entropy(logits.reshape(-1, self.vocab), tok[:, 1:].reshape(-1))
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            kept = bm.kv_num_blocks.sum()
            if bm.full_kv_num_blocks is not None:
                kept = kept + bm.full_kv_num_blocks.sum()
            self.kv_buf[i].copy_(kept)
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.kv_buf)):
            self.extra[i] = "kv=" + h
        return super().loss_lines()


class JaggedWorkload(Workload):
    """A transformer block over jagged nested tensors (torch.nested, layout=torch.jagged), as
    padding-free training code batches variable-length sequences: 16 sequences whose
    lengths (4 to 96) a seeded host random.Random redraws every step, their tokens packed
    into one buffer (embedding plus position embedding), wrapped by
    torch.nested.nested_tensor_from_jagged with offsets copied from the host every step
    (and the min and max length given, so nothing is read back); LayerNorm, separate q, k,
    v projections, unflatten and transpose to (B, heads, j, head_dim), and
    F.scaled_dot_product_attention on the jagged tensors in float32, which runs the
    memory-efficient kernel on the packed buffer with cumulative sequence lengths (int32,
    made from the offsets) and the longest length (deterministic backward under
    use_deterministic_algorithms); a GELU MLP; then the sequences' means from the packed
    values (index_add by a segment id copied from the host) and a classifier (labels from
    a fixed table summed over each sequence's tokens); AdamW (foreach). The packed length
    and the longest sequence change every step with no period, so every kernel's grid and
    the attention kernel's host arguments do: a tool that replays one step's recording
    for the next computes over the wrong extents. The total and the longest length end
    every line (" T=<n> L=<n>"). The offsets, segment ids, positions and lengths are copied
    from pageable host memory (a sync each)."""

    syncs = True
    batch, vocab, d, heads, nout, min_len, max_len = 16, 1000, 128, 4, 10, 4, 96

    def setup(self, mode="eager"):
        import random
        d = self.d
        self.model = nn.ModuleDict({
            "emb": nn.Embedding(self.vocab, d), "pos": nn.Embedding(self.max_len, d),
            "ln1": nn.LayerNorm(d), "q": nn.Linear(d, d), "k": nn.Linear(d, d), "v": nn.Linear(d, d),
            "proj": nn.Linear(d, d), "ln2": nn.LayerNorm(d), "fc1": nn.Linear(d, 4 * d),
            "fc2": nn.Linear(4 * d, d), "head": nn.Linear(d, self.nout)}).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.truth = torch.randn(self.vocab, self.nout, device=self.dev, generator=self.gen)
        self.draws = random.Random(2718)
        self.shapes = {}

    def step(self, i):
        m, B, H, d = self.model, self.batch, self.heads, self.d
        hd = d // H
        lengths = [self.draws.randint(self.min_len, self.max_len) for _ in range(B)]
        total = sum(lengths)
        offs = [0]
        for n in lengths:
            offs.append(offs[-1] + n)
        offsets = torch.tensor(offs, dtype=torch.int64, device=self.dev)
        seg = torch.tensor([b for b, n in enumerate(lengths) for _ in range(n)], dtype=torch.int64,
                           device=self.dev)
        posid = torch.tensor([t for n in lengths for t in range(n)], dtype=torch.int64, device=self.dev)
        lens = torch.tensor(lengths, dtype=torch.float32, device=self.dev)
        tok = torch.randint(0, self.vocab, (total,), device=self.dev, generator=self.gen)
        with torch.no_grad():
            votes = torch.zeros(B, self.nout, device=self.dev).index_add_(0, seg, F.embedding(tok, self.truth))
            y = votes.argmax(dim=1)
        self.opt.zero_grad(set_to_none=True)
        values = m["emb"](tok) + m["pos"](posid)                                   # total, d
        x = torch.nested.nested_tensor_from_jagged(values, offsets, min_seqlen=min(lengths),
                                                   max_seqlen=max(lengths))        # B, j, d
        h = m["ln1"](x)
        q = m["q"](h).unflatten(-1, [H, hd]).transpose(1, 2)                       # B, H, j, hd
        k = m["k"](h).unflatten(-1, [H, hd]).transpose(1, 2)
        v = m["v"](h).unflatten(-1, [H, hd]).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + m["proj"](a.transpose(1, 2).flatten(-2))
        x = x + m["fc2"](F.gelu(m["fc1"](m["ln2"](x))))
        pooled = torch.zeros(B, d, device=self.dev).index_add(0, seg, x.values()) / lens.unsqueeze(1)
        loss = F.cross_entropy(m["head"](pooled), y)
        loss.backward()
        self.opt.step()
        self.shapes[i] = (total, max(lengths))
        return loss

    def loss_lines(self):
        for i, (t, n) in self.shapes.items():
            self.extra[i] = "T=%d L=%d" % (t, n)
        return super().loss_lines()


class ThreadFeedWorkload(Workload):
    """A producer thread that makes the batches on the GPU, as data pipelines that augment
    on the device do (DALI-style, or a prefetcher thread): a Python thread, on a stream of
    its own and with a CUDA generator of its own, draws 36x36 images, crops them at an
    offset a host random.Random picks, flips half of them, mixes their colour channels by a
    random 3x3 matrix (an einsum: cuBLAS from that thread), labels them (pooled pixels times a
    fixed projection, argmax) and writes them into one of three preallocated slots, then
    records an event and hands (slot, event) to the training thread through a queue.Queue;
    the training thread makes the default stream wait for that event, trains the small
    ResNet (cuDNN convolutions, BatchNorm) on the slot with Nesterov SGD (foreach), records
    an event after the optimizer step and hands it back, and the producer makes its stream
    wait for it before it rewrites that slot. So two threads launch at once, in an order the
    GIL decides anew in every run, and every dependency between them is an event recorded
    in one thread and waited for in the other: a tool that holds launches per thread must
    not let a wait overtake the record it waits for, nor a slot's rewrite overtake the step
    that reads it. No sync in the loop (the training thread waits on the queue, a host
    event, not on the GPU)."""

    batch, nout, slots = 64, 10, 3
    STOP = object()

    def setup(self, mode="eager"):
        import queue
        import random
        import threading
        self.model = SmallResNet(self.nout).to(self.dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                   weight_decay=5e-4, foreach=True)
        B = self.batch
        self.xs = [torch.empty(B, 3, 32, 32, device=self.dev) for _ in range(self.slots)]
        self.ys = [torch.empty(B, dtype=torch.long, device=self.dev) for _ in range(self.slots)]
        self.proj = torch.randn(3 * 8 * 8, self.nout, device=self.dev, generator=self.gen)
        self.eye = torch.eye(3, device=self.dev)
        self.feed = torch.cuda.Stream(device=self.dev)
        self.feed_gen = torch.Generator(device=self.dev)
        self.feed_gen.manual_seed(6061)
        self.crops = random.Random(6062)
        # The producer's first kernels read what setup made on the default stream.
        self.feed.wait_stream(torch.cuda.current_stream(self.dev))
        self.ready = queue.Queue()
        self.free = queue.Queue()
        for _ in range(self.slots):
            self.free.put(None)
        self.failure = None
        self.thread = threading.Thread(target=self.produce, name="workloads-threadfeed", daemon=True)
        self.thread.start()

    def produce(self):
        try:
            B = self.batch
            with torch.cuda.device(self.dev), torch.cuda.stream(self.feed):
                k = 0
                while True:
                    token = self.free.get()
                    if token is self.STOP:
                        return
                    if token is not None:
                        self.feed.wait_event(token)           # the step that read this slot is done
                    slot = k % self.slots
                    raw = torch.randn(B, 3, 36, 36, device=self.dev, generator=self.feed_gen)
                    oy, ox = self.crops.randint(0, 4), self.crops.randint(0, 4)
                    img = raw[:, :, oy:oy + 32, ox:ox + 32]
                    flip = torch.rand(B, 1, 1, 1, device=self.dev, generator=self.feed_gen) < 0.5
                    img = torch.where(flip, img.flip(3), img)
                    mix = self.eye + 0.1 * torch.randn(3, 3, device=self.dev, generator=self.feed_gen)
                    img = torch.einsum("ij,bjhw->bihw", mix, img)
                    y = (F.avg_pool2d(img, 4).flatten(1) @ self.proj).argmax(dim=1)
                    self.xs[slot].copy_(img)
                    self.ys[slot].copy_(y)
                    ev = torch.cuda.Event()
                    ev.record(self.feed)
                    self.ready.put((slot, ev))
                    k += 1
        except BaseException as e:  # noqa: BLE001 (handed to the training thread)
            self.failure = e
            self.ready.put(None)

    def step(self, i):
        item = self.ready.get(timeout=120)
        if item is None:
            raise RuntimeError("threadfeed: the producer thread failed: %r" % (self.failure,))
        slot, ev = item
        main = torch.cuda.current_stream(self.dev)
        main.wait_event(ev)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(self.xs[slot]), self.ys[slot])
        loss.backward()
        self.opt.step()
        done = torch.cuda.Event()
        done.record(main)
        self.free.put(done)
        return loss

    def finish(self):
        self.free.put(self.STOP)
        self.thread.join(timeout=60)


class OOMRetryWorkload(TaskWorkload):
    """An automatic batch-size finder, as Accelerate's find_executable_batch_size and
    Lightning's tuner do, under a memory cap: torch.cuda.set_per_process_memory_fraction
    caps the caching allocator at what it had reserved after setup plus 160 MiB (the cap is
    the allocator's own bookkeeping, so where it is hit follows from the program's
    allocations alone, on any GPU). The batch grows from 512 to 8192 samples (doubling
    every 60 steps) and is split into micro-batches with gradient accumulation; a step that
    runs out of memory in forward or backward (torch.OutOfMemoryError: the allocator first
    synchronizes and frees every cached segment, cudaFree, then raises, from the autograd
    thread when backward hit it) is caught, its gradients dropped, gc.collect() and
    empty_cache() run, and the step redone from its first micro-batch with twice as many
    micro-batches; every 25 steps the loop tries half as many again. So some steps issue a
    partial forward or backward whose results are thrown away, then the same work again at
    other shapes, around frees of all cached memory that the program did not ask for. The
    MLP (5 layers, 1024 wide, dropout 0.1), AdamW (foreach). The batch, the micro-batch
    count and the out-of-memory retries end every line (" b=<n> m=<n> o=<n>"). No sync in
    the loop apart from the allocator's own on those retries."""

    din, hidden, base_batch, grow_every, grow_steps, probe_every, max_micro = 512, 1024, 512, 60, 4, 25, 64
    budget_mib = 160

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=5, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.label_setup()
        # One small forward and backward first, so that the cuBLAS workspaces of this thread and
        # of the autograd thread are allocated before the cap is measured.
        self.model(torch.zeros(8, self.din, device=self.dev)).sum().backward()
        self.opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize(self.dev)
        total = torch.cuda.get_device_properties(self.dev).total_memory
        limit = torch.cuda.memory_reserved(self.dev) + self.budget_mib * 2 ** 20
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), self.dev)
        self.micro = 1
        self.plan = {}

    def accumulate(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        n = x.shape[0] // self.micro
        total = torch.zeros((), device=self.dev)
        for k in range(self.micro):
            loss = F.cross_entropy(self.model(x[k * n:(k + 1) * n]), y[k * n:(k + 1) * n]) / self.micro
            loss.backward()
            total = total + loss.detach()
        return total

    def step(self, i):
        import gc
        B = self.base_batch << min(i // self.grow_every, self.grow_steps)
        if i > 0 and i % self.probe_every == 0 and self.micro > 1:
            self.micro //= 2                      # try larger micro-batches again
        x = torch.randn(B, self.din, device=self.dev, generator=self.gen)
        y = (x @ self.label_proj).argmax(dim=-1)
        ooms = 0
        while True:
            try:
                total = self.accumulate(x, y)
            except torch.cuda.OutOfMemoryError:
                total = None
            if total is not None:
                break
            ooms += 1
            self.opt.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()
            if self.micro >= self.max_micro:
                raise RuntimeError("oomretry: out of memory with %d micro-batches of %d" % (self.micro, B))
            self.micro *= 2
        self.opt.step()
        self.plan[i] = (B, self.micro, ooms)
        return total

    def loss_lines(self):
        for i, (b, m, o) in self.plan.items():
            self.extra[i] = "b=%d m=%d o=%d" % (b, m, o)
        return super().loss_lines()


# --------------------------------------------------------------------------- red-team round five
# Training and tooling patterns the rounds above leave out, each chosen for what a
# launch-holding, graph-replaying tool could get wrong: a scalar kernel argument computed on
# the host from a count read back every step (BatchNorm's cumulative moving average);
# observers and fake quantization switched on and off by flags that live on the GPU, read
# back by some modules and by kernels in others (quantization-aware training); gradient
# overflow skips decided on the GPU by fused optimizers and never read by the host (one
# GradScaler over two of them); a profiler that turns CUPTI tracing on and off mid-run and
# counts what the GPU ran; Triton kernels compiled once for symbolic sizes and launched
# with other size arguments and grids every step; and a second process that reads the
# weights and writes the training data through CUDA IPC memory and interprocess events.

class BNCMAWorkload(Workload):
    """BatchNorm with momentum=None, the cumulative moving average, as scripts use it to
    estimate population statistics exactly (swa_utils.update_bn does it now and then; here
    every training step does): a conv stem (two convolutions, each followed by
    BatchNorm2d(momentum=None): cuDNN's batch norm) on 16x16 images, mean pooling, then an
    MLP whose hidden layers are followed by BatchNorm1d(momentum=None) on 2-D input
    (PyTorch's own batch-norm kernels: cuDNN is used for 3-D and larger inputs only). In
    training mode every BatchNorm first increments num_batches_tracked on the GPU and then
    reads it back with float() (a sync per layer, four a forward pass) to compute its
    averaging factor 1/n, a Python float that reaches the kernels updating the running
    statistics as a scalar argument, a new value every step. Every 40 steps
    reset_running_stats() zeroes the statistics and the counts (fill kernels), so the
    factors run 1, 1/2, 1/3, ... again: the launch sequence of 40 steps before with its
    scalars. An eval pass (eval mode: the running statistics normalise, no update and no
    read-back) on held-out images every 10th step. Labels from a fixed projection of the
    pooled pixels; AdamW (foreach), set_to_none. A tool that replays a graph with the
    factor it recorded, or patches it from a step it mistakes for this one, leaves wrong
    running statistics, which only the eval losses and the line show. The sum of the first
    BatchNorm1d's running mean after the step ends every line (" rm=<hex>"), the eval loss
    the eval steps' (" ev=<hex>")."""

    syncs = True
    batch, img, nout, hidden = 64, 16, 10, 256
    reset_every, eval_every, neval = 40, 10, 256

    def setup(self, mode="eager"):
        h = self.hidden
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32, momentum=None),
                                  nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1, bias=False),
                                  nn.BatchNorm2d(64, momentum=None), nn.ReLU())
        self.mlp = nn.Sequential(nn.Linear(64, h), nn.BatchNorm1d(h, momentum=None), nn.ReLU(),
                                 nn.Linear(h, h), nn.BatchNorm1d(h, momentum=None), nn.ReLU(),
                                 nn.Linear(h, self.nout))
        self.model = nn.ModuleList([self.stem, self.mlp]).to(self.dev)
        self.bns = [m for m in self.model.modules() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))]
        self.bn1d = self.mlp[1]
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_proj = torch.randn(3 * 4 * 4, self.nout, device=self.dev, generator=self.gen)
        self.Xe, self.Ye = self.draw(self.neval)
        self.rm_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.eval_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.evals = []

    def draw(self, n):
        x = torch.randn(n, 3, self.img, self.img, device=self.dev, generator=self.gen)
        return x, (F.avg_pool2d(x, 4).flatten(1) @ self.label_proj).argmax(dim=1)

    def forward(self, x):
        return self.mlp(self.stem(x).mean(dim=(2, 3)))

    def step(self, i):
        if i > 0 and i % self.reset_every == 0:
            for bn in self.bns:
                bn.reset_running_stats()
        x, y = self.draw(self.batch)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.forward(x), y)      # four float(num_batches_tracked) reads
        loss.backward()
        self.opt.step()
        self.rm_buf[i].copy_(self.bn1d.running_mean.sum())
        if i % self.eval_every == self.eval_every - 1:
            self.model.eval()
            with torch.no_grad():
                self.eval_buf[i].copy_(F.cross_entropy(self.forward(self.Xe), self.Ye))
            self.model.train()
            self.evals.append(i)
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.rm_buf)):
            self.extra[i] = "rm=" + h
        if self.evals:
            ev = tensor_hexes(self.eval_buf)
            for i in self.evals:
                self.extra[i] += " ev=" + ev[i]
        return super().loss_lines()


class QATWorkload(TaskWorkload):
    """Quantization-aware training with torch.ao.quantization's fake-quantize modules, wired
    by hand as eager-mode QAT wires them: the input through a FakeQuantize with a
    MovingAverageMinMaxObserver (default_fake_quant: Python-side logic that reads its
    observer_enabled and fake_quant_enabled flags back from the GPU, checks whether the
    observer's min and max are still infinite, asserts min <= max and turns the scale and
    zero point it computes into host numbers and back: about seven values read back and two
    copied up a call); every Linear's weight through a fused per-channel fake-quant
    (default_fused_per_channel_wt_fake_quant: torch.fused_moving_avg_obs_fake_quant, whose
    observer and qparams kernels read their on/off flags on the GPU, and which reads the
    fake-quant flag back to choose between fake-quantizing and a plain copy, then reads the
    zero points back to check their range); every hidden activation (after ReLU) through a
    fused per-tensor fake-quant (default_fused_act_fake_quant: the same op without any
    sync: the flags, the running min and max, the scale and the zero point stay on the GPU
    and the kernels read them by pointer). The schedule QAT recipes use: fake quantization
    off and observers on for the first 40 steps (calibration), then on
    (model.apply(enable_fake_quant): fill kernels into the flag tensors), and at step 160
    the observers frozen (model.apply(disable_observer)): from then on the fused modules
    launch exactly the same kernels as before, which now leave the running min, max and
    qparams alone because a flag in GPU memory says so, while the input's FakeQuantize
    takes another host branch. A tool that replays a graph with the flags' old contents
    baked in, or patches the scale pointers, changes the loss. The MLP is 3 Linear layers
    (256 wide), AdamW (foreach). The first activation fake-quant's scale and the input
    fake-quant's scale end every line (" s=<hex> i=<hex>")."""

    syncs = True
    hidden, fq_on_at, freeze_at = 256, 40, 160

    def setup(self, mode="eager"):
        from torch.ao.quantization import fake_quantize as fq
        self.fq = fq
        h = self.hidden
        dims = [self.din, h, h, self.nout]
        self.lins = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])
        self.in_fq = fq.default_fake_quant()
        self.w_fq = nn.ModuleList([fq.default_fused_per_channel_wt_fake_quant() for _ in self.lins])
        self.a_fq = nn.ModuleList([fq.default_fused_act_fake_quant() for _ in range(len(self.lins) - 1)])
        self.model = nn.ModuleList([self.lins, self.in_fq, self.w_fq, self.a_fq]).to(self.dev)
        self.model.apply(fq.disable_fake_quant)
        self.opt = torch.optim.AdamW(self.lins.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.forward
        self.label_setup()
        self.s_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.i_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def forward(self, x):
        h = self.in_fq(x)
        last = len(self.lins) - 1
        for k, lin in enumerate(self.lins):
            h = F.linear(h, self.w_fq[k](lin.weight), lin.bias)
            if k < last:
                h = self.a_fq[k](F.relu(h))
        return h

    def step(self, i):
        if i == self.fq_on_at:
            self.model.apply(self.fq.enable_fake_quant)
        if i == self.freeze_at:
            self.model.apply(self.fq.disable_observer)
        loss = super().step(i)
        self.s_buf[i].copy_(self.a_fq[0].scale.reshape(-1)[0])
        self.i_buf[i].copy_(self.in_fq.scale.reshape(-1)[0])
        return loss

    def loss_lines(self):
        s, q = tensor_hexes(self.s_buf), tensor_hexes(self.i_buf)
        for i in range(self.steps):
            self.extra[i] = "s=%s i=%s" % (s[i], q[i])
        return super().loss_lines()


class AMPFusedWorkload(TaskWorkload):
    """float16 autocast with one GradScaler over two fused optimizers, as mixed-precision
    scripts with parameter groups on separate optimizers run it: AdamW(fused=True) for the
    body of the MLP (6 layers, dropout 0.1) under a LambdaLR warmup and decay (a new
    Python-float learning rate, a kernel argument, every step) and Adam(fused=True) for
    the head. scaler.unscale_(body optimizer) then clip_grad_norm_(foreach=True) on the
    body; scaler.step() on both; scaler.update(). Fused optimizers take the scaler's
    tensors instead of its decision: GradScaler passes found_inf (a sum of the per-device
    flags, a new tensor every step) and, for the head, which was not unscaled, grad_scale
    (the scale times 1, another new tensor) to the fused kernels, which skip the update
    themselves when found_inf is set and take the step counts back on the GPU; update()
    then adjusts the scale with _amp_update_scale_. The initial scale (2**24) overflows
    float16 and growth every 4 clean steps brings overflow back, so steps are skipped at
    points only the GPU knows, and nothing is ever read back: the launch sequence of a
    skipped step is that of an applied one, with other pointers. A tool that patches the
    per-step found_inf and grad_scale pointers wrongly updates weights it should have
    left, or skips updates it should have made. The loss scale after update and the body
    optimizer's step count end every line (" s=<hex> n=<hex>"). No sync in the loop."""

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.fwd = self.model
        self.label_setup()
        net = self.model.net
        self.body = list(net[:-1].parameters())
        self.head = list(net[-1].parameters())
        self.opt_body = torch.optim.AdamW(self.body, lr=1e-3, weight_decay=0.01, fused=True)
        self.opt_head = torch.optim.Adam(self.head, lr=3e-3, betas=(0.9, 0.99), fused=True)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt_body, lambda s: min(1.0, (s + 1) / 25.0) * 0.5 ** (s / 150.0))
        kw = dict(init_scale=2.0 ** 24, growth_factor=2.0, backoff_factor=0.5, growth_interval=4)
        try:
            self.scaler = torch.amp.GradScaler("cuda", **kw)
        except (AttributeError, TypeError):
            self.scaler = torch.cuda.amp.GradScaler(**kw)
        self.scale_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.count_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt_body.zero_grad(set_to_none=True)
        self.opt_head.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = F.cross_entropy(self.model(x), y)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt_body)
        torch.nn.utils.clip_grad_norm_(self.body, 1.0, foreach=True)
        self.scaler.step(self.opt_body)          # fused: found_inf by pointer, no sync
        self.scaler.step(self.opt_head)          # fused: grad_scale and found_inf by pointer
        self.scaler.update()
        self.sched.step()
        self.scale_buf[i].copy_(self.scaler._scale.reshape(()))
        self.count_buf[i].copy_(self.opt_body.state[self.body[0]]["step"].reshape(()))
        return loss.float()

    def loss_lines(self):
        s, n = tensor_hexes(self.scale_buf), tensor_hexes(self.count_buf)
        for i in range(self.steps):
            self.extra[i] = "s=%s n=%s" % (s[i], n[i])
        return super().loss_lines()


class ProfWinWorkload(GPTWorkload):
    """The small GPT (dropout 0.1, AdamW foreach) trained under torch.profiler with a
    schedule, as scripts profile a few steps in the middle of a long run: the profiler is
    started in setup and stepped at the end of every training step (after the loss is read
    for logging, a sync), skips the first 45 steps, then waits 40, warms up 5 (Kineto turns
    CUPTI's activity tracing on) and records 5, four times; record_function ranges mark
    the forward pass, backward and the optimizer step. At the end of each recording window
    the profiler synchronizes the device, stops tracing, and its on_trace_ready handler
    exports the chrome trace, counts its kernel, memcpy and memset events and deletes it.
    What the profiler saw is part of the result: the number of GPU activities (kernels,
    memcpys and memsets together) ends the window's last line (" a=<n>"). A tool that
    replays graphs must leave CUPTI seeing the work of the window, no more (work held from
    before the window and issued inside it) and no less (kernels that a graph replay hides
    from the activity records, or work still held when the profiler stops), and must
    survive CUPTI being enabled and disabled under it. Their kinds are not compared: inside
    graft's graphs a device-to-device copy is graft's own copy kernel (README, Limits: the
    first run gave k=2415 c=10 under graft against k=2375 c=50 eagerly, the same 2425)."""

    syncs = True
    item = True
    skip_first, wait, warmup, active, repeat = 45, 40, 5, 5, 4

    def setup(self, mode="eager"):
        import tempfile
        from torch.profiler import ProfilerActivity, profile, schedule
        super().setup(mode)
        self.trace_dir = tempfile.mkdtemp(prefix="graft_profwin.")
        self.windows = {}
        self.cur = -1
        self.prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                            schedule=schedule(skip_first=self.skip_first, wait=self.wait, warmup=self.warmup,
                                              active=self.active, repeat=self.repeat),
                            on_trace_ready=self.trace_ready)
        self.prof.start()
        self.stopped = False

    def trace_ready(self, prof):
        path = os.path.join(self.trace_dir, "window.%d.json" % self.cur)
        prof.export_chrome_trace(path)
        counts, _ = count_trace(path)
        os.remove(path)
        self.windows[self.cur] = counts

    def step(self, i):
        tok, _ = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        with torch.profiler.record_function("forward"):
            loss = self.loss_of(tok, None)
        with torch.profiler.record_function("backward"):
            loss.backward()
        with torch.profiler.record_function("optimizer"):
            self.opt.step()
        loss.item()                       # logged before the profiler steps: the GPU is idle
        self.cur = i
        self.prof.step()
        return loss

    def loss_lines(self):
        if not self.stopped:
            self.prof.stop()
            self.stopped = True
            try:
                os.rmdir(self.trace_dir)
            except OSError:
                pass
        for i, c in self.windows.items():
            self.extra[i] = "a=%d" % (c["kernels"] + c["memcpys"] + c["memsets"])
        return super().loss_lines()


class DynCompileWorkload(Workload):
    """torch.compile with dynamic shapes on a submodule only, as padding-to-the-longest
    fine-tuning scripts compile their encoder: 16 sequences padded to a length a seeded host
    random.Random draws every step (24 to 96), the embeddings, pooling, head and loss eager,
    and each of two pre-norm encoder blocks (attention written out with an additive
    key-padding bias, dropout, a GELU MLP) wrapped in torch.compile(dynamic=True) in its
    default mode (no CUDA graphs of PyTorch's own): Inductor compiles forward and backward
    once for symbolic batch and length, so every step launches the same Triton kernels
    (fused layer norms, softmax, dropout with Philox seeds drawn per call, GELU, residual
    adds; launched by Inductor's launcher) and cuBLAS GEMMs with other size arguments (ks0,
    xnumel, rnumel) and other grids: within a length bucket a kernel's grid may stay the
    same while its size argument changes. Row lengths (4 to the padded length) are drawn
    on the GPU; labels from a fixed token table summed over each row's valid tokens;
    AdamW (foreach). Inductor's deterministic mode is set where this PyTorch has it. A tool
    that matches a launch by kernel and grid and patches the rest must patch the size
    arguments too; one that replays a step recorded at another length reads and writes
    the wrong extents. The padded length ends every line (" T=<n>"). No sync in the loop
    after the first steps' compilation."""

    batch, vocab, d, heads, nout, layers, min_len, max_len = 16, 1000, 128, 4, 10, 2, 24, 96

    def setup(self, mode="eager"):
        import random
        try:
            import torch._inductor.config as inductor_config
            if hasattr(inductor_config, "deterministic"):
                inductor_config.deterministic = True
        except ImportError:
            pass
        d = self.d
        self.emb = nn.Embedding(self.vocab, d)
        self.pos = nn.Embedding(self.max_len, d)
        self.blocks = nn.ModuleList([PadBlock(d, self.heads, 0.1) for _ in range(self.layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, self.nout)
        self.model = nn.ModuleList([self.emb, self.pos, self.blocks, self.ln, self.head]).to(self.dev)
        self.compiled = [torch.compile(b, dynamic=True) for b in self.blocks]
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, weight_decay=0.01, foreach=True)
        self.truth = torch.randn(self.vocab, self.nout, device=self.dev, generator=self.gen)
        self.ar = torch.arange(self.max_len, device=self.dev)
        self.draws = random.Random(1312)
        self.lens = {}

    def step(self, i):
        B, T = self.batch, self.draws.randint(self.min_len, self.max_len)
        tok = torch.randint(0, self.vocab, (B, T), device=self.dev, generator=self.gen)
        lengths = torch.randint(4, T + 1, (B,), device=self.dev, generator=self.gen)
        pad = self.ar[:T] >= lengths.unsqueeze(1)                               # B, T: True past the end
        keep = (~pad).unsqueeze(-1).float()
        with torch.no_grad():
            y = (F.embedding(tok, self.truth) * keep).sum(dim=1).argmax(dim=1)
        bias = torch.zeros(B, 1, 1, T, device=self.dev).masked_fill(pad.view(B, 1, 1, T), float("-inf"))
        self.opt.zero_grad(set_to_none=True)
        x = self.emb(tok) + self.pos(self.ar[:T])
        for blk in self.compiled:
            x = blk(x, bias)
        pooled = (self.ln(x) * keep).sum(dim=1) / lengths.unsqueeze(1).float()
        loss = F.cross_entropy(self.head(pooled), y)
        loss.backward()
        self.opt.step()
        self.lens[i] = T
        return loss

    def loss_lines(self):
        for i, t in self.lens.items():
            self.extra[i] = "T=%d" % t
        return super().loss_lines()


def ipc_actor_main(requests, replies, dev_index, shapes, cand, keep):
    """ipcactor's actor process (started by torch.multiprocessing's spawn context, so this
    module is imported afresh there and its torch globals are unset: everything is imported
    here). Receives the eval set and the label projection once, then, per request, a flat
    weight vector (CUDA IPC: the storage opened with cudaIpcOpenMemHandle, the current
    stream made to wait for the interprocess event the learner's queue thread recorded);
    scores 1024 fresh candidates from its own generator (seeded by the request's step),
    keeps the 32 with the highest loss (topk) and evaluates the weights on the eval set;
    sends the eval loss and accuracy and the hard examples back as new CUDA tensors (shared
    the same way). Errors are sent back as ("error", text)."""
    import torch
    import torch.multiprocessing  # noqa: F401 (registers the reductions that share CUDA tensors)
    import torch.nn.functional as F
    try:
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        dev = torch.device("cuda", dev_index)
        torch.cuda.set_device(dev)
        gen = torch.Generator(device=dev)
        _, xe, ye, proj = requests.get(timeout=180)
        replies.put(("ready",))
        while True:
            msg = requests.get(timeout=600)
            if msg is None:
                break
            k, flat = msg
            ws, off = [], 0
            for shape in shapes:
                n = math.prod(shape)
                ws.append(flat[off:off + n].view(shape))
                off += n

            def run(x):
                h = x
                for j in range(0, len(ws), 2):
                    h = F.linear(h, ws[j], ws[j + 1])
                    if j + 2 < len(ws):
                        h = F.relu(h)
                return h

            with torch.no_grad():
                gen.manual_seed(31000 + k)
                xc = torch.randn(cand, xe.shape[1], device=dev, generator=gen)
                yc = (xc @ proj).argmax(dim=1)
                hard = F.cross_entropy(run(xc), yc, reduction="none").topk(keep).indices
                out = run(xe)
                stats = torch.stack([F.cross_entropy(out, ye), (out.argmax(dim=1) == ye).float().mean()])
                replies.put((k, stats, xc.index_select(0, hard), yc.index_select(0, hard)))
            del msg, flat, ws, xc, yc, hard, out, stats
        del xe, ye, proj
        torch.cuda.synchronize(dev)
    except BaseException as e:  # noqa: BLE001 (handed to the learner)
        replies.put(("error", "%s: %s" % (type(e).__name__, e)))


class IPCActorWorkload(TaskWorkload):
    """An actor-learner split over two processes that share CUDA memory, as RL and
    hard-example-mining loops built on torch.multiprocessing do: in setup the learner (this
    process) starts an actor process with the spawn context (under graft too when this one
    is: it inherits the environment) and sends it the eval set and the label projection
    through a torch.multiprocessing Queue. CUDA tensors cross as IPC handles: the queue's
    feeder thread pickles them, which for each storage records an interprocess event on the
    default stream (cudaEventCreateWithFlags(interprocess), cudaEventRecord from that
    thread) and sends its handle with cudaIpcGetMemHandle's; the receiver opens both and
    makes its current stream wait for the event. Every 10 steps, at step 4 of 10, the
    learner sends its weights flattened into a new tensor (parameters_to_vector, after the
    optimizer step); the actor scores 1024 fresh candidates with them, keeps the 32 hardest
    and evaluates the weights on the eval set, and sends those back as new CUDA tensors; the
    learner takes the reply at step 9 of 10 (a host wait on the queue), clones the hard
    examples (a copy that must wait for the actor's event), and every training batch is 64
    fresh samples plus the latest 32 hard ones, so the training loss depends on data that
    crossed in both directions. Dropping the received tensors releases their IPC reference
    counts after a stream sync; the learner's freed snapshots wait in PyTorch's limbo until
    the actor has released them. A tool that holds the learner's snapshot kernels past the
    event record (or the record itself), or lets the clone run before the wait on the
    actor's event, trains on stale or half-written data. The MLP (4 layers, no dropout),
    AdamW (foreach). The actor's eval loss and accuracy and the step whose weights they
    judged end the reply steps' lines (" ev=<hex> acc=<hex> k=<step>")."""

    every, send_at, recv_at, cand, keep, neval = 10, 4, 9, 1024, 32, 512

    def setup(self, mode="eager"):
        import torch.multiprocessing as mp
        self.model = MLP(self.din, self.hidden, self.nout, layers=4).to(self.dev)
        self.fwd = self.model
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = (self.Xe @ self.label_proj).argmax(dim=-1)
        self.hard_x = torch.randn(self.keep, self.din, device=self.dev, generator=self.gen)
        self.hard_y = (self.hard_x @ self.label_proj).argmax(dim=-1)
        self.stat_buf = torch.zeros(self.steps, 2, dtype=torch.float32, device=self.dev)
        self.replied = {}
        self.inflight = None
        ctx = mp.get_context("spawn")
        self.requests = ctx.Queue()
        self.replies = ctx.Queue()
        idx = self.dev.index if self.dev.index is not None else torch.cuda.current_device()
        shapes = [tuple(p.shape) for p in self.params]
        self.actor = ctx.Process(target=ipc_actor_main, name="workloads-ipcactor", daemon=True,
                                 args=(self.requests, self.replies, idx, shapes, self.cand, self.keep))
        self.actor.start()
        self.requests.put(("data", self.Xe, self.Ye, self.label_proj))
        self.receive()      # ("ready",): the actor holds the shared tensors (and CUDA is up there)

    def receive(self):
        import queue
        for _ in range(60):
            try:
                msg = self.replies.get(timeout=3)
            except queue.Empty:
                if not self.actor.is_alive():
                    raise RuntimeError("ipcactor: the actor process died (exit code %s)" % self.actor.exitcode)
                continue
            if msg[0] == "error":
                raise RuntimeError("ipcactor: the actor process failed: %s" % msg[1])
            return msg
        raise RuntimeError("ipcactor: no reply from the actor process in 180 s")

    def step(self, i):
        x, y = self.batch_for(i)
        x = torch.cat([x, self.hard_x])
        y = torch.cat([y, self.hard_y])
        self.opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        phase = i % self.every
        if phase == self.send_at:
            with torch.no_grad():
                self.inflight = torch.nn.utils.parameters_to_vector(self.params)
            self.requests.put((i, self.inflight))
        elif phase == self.recv_at and self.inflight is not None:
            k, stats, xh, yh = self.receive()
            self.hard_x = xh.clone()
            self.hard_y = yh.clone()
            self.stat_buf[i].copy_(stats)
            del stats, xh, yh
            self.inflight = None
            self.replied[i] = k
        return loss

    def loss_lines(self):
        st = tensor_hexes(self.stat_buf.reshape(-1))
        for i, k in self.replied.items():
            self.extra[i] = "ev=%s acc=%s k=%d" % (st[2 * i], st[2 * i + 1], k)
        return super().loss_lines()

    def finish(self):
        self.requests.put(None)
        self.actor.join(timeout=120)
        if self.actor.is_alive():
            self.actor.terminate()
            raise RuntimeError("ipcactor: the actor process did not exit")
        if self.actor.exitcode != 0:
            raise RuntimeError("ipcactor: the actor process exited with %s" % self.actor.exitcode)


# --------------------------------------------------------------------------- red-team round six
# Orderings and allocators the rounds above leave out, each chosen for what a tool that holds
# launches back and replays them as graphs could get wrong: blocking streams of the program's
# own, ordered against the legacy default stream by the driver's implicit synchronization
# alone (no event, no wait_stream, no record_stream); a whole-step CUDA graph of the
# program's, captured after graft has learned the eager step (once by hand without a
# synchronize, once by torch.cuda.graph), replayed, dropped for eager training and captured
# again; PyTorch's cudaMallocAsync backend, whose frees are stream-ordered operations, under
# record_stream between two streams and allocation sizes that change every step; FSDP2
# (fully_shard) at world size 1, its all-gather and reduce-scatter streams, per-use events
# and storage resized to zero and back; four foreach optimizers whose per-tensor scalar
# lists the host computes every step, under chained learning-rate schedulers, with a
# parameter group added mid-run.

class LegacySyncWorkload(TaskWorkload):
    """Work split between PyTorch's default stream (the legacy NULL stream) and two blocking
    streams the program makes itself with the driver API (cuStreamCreateWithPriority with
    flags 0, through ctypes; priorities 0 and -1) and wraps in torch.cuda.ExternalStream,
    ordered by nothing but the legacy stream's implicit synchronization: an op on the
    legacy stream waits for all earlier work of blocking streams, and an op on a blocking
    stream for all earlier legacy work. The program never records an event, never calls
    wait_stream and never calls record_stream (memory handed between the streams is safe by
    the same rule). Every step: on the legacy stream a spin (torch.cuda._sleep) and then the
    batch copied into persistent buffers; on stream A (nested torch.cuda.stream contexts)
    the first MLP part reads them, and inside that context stream B spins and writes a
    frozen teacher's soft targets into a persistent buffer; A runs the second part; the head,
    the loss (cross-entropy plus KL to the soft targets) and AdamW (foreach) run on the
    legacy stream; backward runs the parts' gradients on A (the autograd engine's own
    events join them). After the step B updates an EMA of the weights (_foreach_lerp_,
    reading what the legacy optimizer wrote) and every 10th step evaluates it
    (functional_call), the legacy stream copying the result. Every 5th step the loss is
    copied non_blocking into pinned memory on the legacy stream, a one-element kernel is
    launched on A (which the driver holds behind that copy) and the host reads the pinned
    value after A.synchronize() alone. The spins make a dropped edge visible: a consumer
    that does not wait reads the previous step's batch, soft targets or weights, or the
    host reads last time's loss. " host=<hex>" on every 5th line, " ev=<hex>" (the EMA
    model's eval loss) on every 10th. No other sync in the loop."""

    sleep_cycles, read_every, eval_every, ema_rate, neval = 200000, 5, 10, 0.02, 512

    def setup(self, mode="eager"):
        import ctypes
        from torch.func import functional_call
        self.call = functional_call
        cu = ctypes.CDLL("libcuda.so.1")
        create = cu.cuStreamCreateWithPriority
        create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_int]
        create.restype = ctypes.c_int
        self.raw_streams = []
        for prio in (0, -1):
            handle = ctypes.c_void_p()
            rc = create(ctypes.byref(handle), 0, prio)     # flags 0: CU_STREAM_DEFAULT, a blocking stream
            if rc != 0 or not handle.value:
                raise RuntimeError("legacysync: cuStreamCreateWithPriority returned %d" % rc)
            self.raw_streams.append(handle.value)
        self.sa, self.sb = [torch.cuda.ExternalStream(h, device=self.dev) for h in self.raw_streams]
        h = self.hidden
        self.net = nn.Sequential(MLP(self.din, h, h, layers=2, dropout=0.1), nn.ReLU(),
                                 MLP(h, h, h, layers=3, dropout=0.1), nn.ReLU(),
                                 MLP(h, h, self.nout, layers=2)).to(self.dev)
        self.model = self.net
        self.teacher = MLP(self.din, h, self.nout, layers=3).to(self.dev)
        self.teacher.requires_grad_(False)
        self.teacher.eval()
        self.names = [n for n, _ in self.net.named_parameters()]
        self.params = list(self.net.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.xb = torch.zeros(self.batch, self.din, device=self.dev)
        self.yb = torch.zeros(self.batch, dtype=torch.long, device=self.dev)
        self.soft = torch.zeros(self.batch, self.nout, device=self.dev)
        self.ema = [p.detach().clone() for p in self.params]
        self.lh = torch.zeros((), pin_memory=True)
        self.tick = torch.zeros((), device=self.dev)
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = (self.Xe @ self.label_proj).argmax(dim=-1)
        self.eval_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.evals = []

    def step(self, i):
        pre, mid, head = self.net[0], self.net[2], self.net[4]
        self.opt.zero_grad(set_to_none=True)
        torch.cuda._sleep(self.sleep_cycles)               # legacy: the batch lands late
        x, y = self.batch_for(i)
        self.xb.copy_(x)
        self.yb.copy_(y)
        del x, y
        with torch.cuda.stream(self.sa):
            h = pre(self.xb)                               # waits for the legacy copy, implicitly
            with torch.cuda.stream(self.sb):
                torch.cuda._sleep(self.sleep_cycles)
                with torch.no_grad():
                    self.soft.copy_(F.softmax(self.teacher(self.xb) / 2.0, dim=-1))
            h = mid(F.relu(h))
        logits = head(F.relu(h))                           # legacy: waits for A and B, implicitly
        loss = F.cross_entropy(logits, self.yb) + F.kl_div(F.log_softmax(logits / 2.0, dim=-1), self.soft,
                                                           reduction="batchmean")
        del h, logits
        loss.backward()
        self.opt.step()
        with torch.cuda.stream(self.sb), torch.no_grad():
            torch._foreach_lerp_(self.ema, self.params, self.ema_rate)
        if i % self.eval_every == self.eval_every - 1:
            with torch.cuda.stream(self.sb), torch.no_grad():
                self.net.eval()
                ev = F.cross_entropy(self.call(self.net, dict(zip(self.names, self.ema)), (self.Xe,)), self.Ye)
                self.net.train()
            self.eval_buf[i].copy_(ev)                     # legacy: waits for B, implicitly
            del ev
            self.evals.append(i)
        if i % self.read_every == self.read_every - 1:
            self.lh.copy_(loss.detach(), non_blocking=True)   # legacy: device to pinned host
            with torch.cuda.stream(self.sa):
                self.tick.add_(1.0)                        # held by the driver behind that copy
            self.sa.synchronize()
            self.extra[i] = "host=" + f32_hex(self.lh.item())
        return loss

    def loss_lines(self):
        if self.evals:
            ev = tensor_hexes(self.eval_buf)
            for i in self.evals:
                self.extra[i] = (self.extra[i] + " " if i in self.extra else "") + "ev=" + ev[i]
        return super().loss_lines()


class RecaptureWorkload(TaskWorkload):
    """A whole training step (forward with dropout, backward, AdamW with capturable=True)
    graphed by the program itself mid-run, after graft has learned and replayed the same
    step eagerly: steps 0-59 train eagerly on the default stream; at step 60 the batch is
    copied into static tensors, a side stream waits for the default stream and runs that
    step's training there (the capture recipe's warm-up), and the same stream captures the
    step by hand, CUDAGraph.capture_begin() and capture_end() in the default "global" mode,
    with no synchronize before it (work the default stream issued just before may still be
    pending, or held); steps 61-139 draw the batch, copy it into the static tensors and
    replay the graph on the default stream (its dropout through the graph-safe Philox
    state PyTorch fills before every replay); at step 140 the gradients from the graph's
    pool are dropped and the graph destroyed (its pool released), and training goes on
    eagerly with gradients at new addresses; at step 200 the warm-up and a capture again,
    this time by torch.cuda.graph(stream=side, capture_error_mode="thread_local"), whose
    entry synchronizes and empties the allocator's cache; replays to the end. After every
    step, whatever ran it, an eager EMA of the weights (_foreach_lerp_) reads the
    parameters the step wrote, and every 10th step the EMA model is evaluated
    (functional_call, eval mode, no_grad). A tool must step aside for both captures (no
    op of its own on any stream of the context while the global-mode capture is open),
    issue what it holds before the program's graph launch, and not confuse its graphs of
    the eager step, learned before the captures, with the eager steps after them.
    " g=e|c|r" (eager, warm-up and capture, replay) on every line, " ev=<hex>" on every
    10th. No sync in the loop apart from torch.cuda.graph's own."""

    cap_hand, drop_at, cap_ctx, eval_every, ema_rate, neval = 60, 140, 200, 10, 0.02, 512

    def setup(self, mode="eager"):
        from torch.func import functional_call
        self.call = functional_call
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True,
                                     capturable=True)
        self.fwd = self.model
        self.label_setup()
        self.names = [n for n, _ in self.model.named_parameters()]
        self.params = list(self.model.parameters())
        self.ema = [p.detach().clone() for p in self.params]
        self.static_x = torch.zeros(self.batch, self.din, device=self.dev)
        self.static_y = torch.zeros(self.batch, dtype=torch.long, device=self.dev)
        self.side = torch.cuda.Stream(device=self.dev)
        self.graph, self.static_loss = None, None
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = (self.Xe @ self.label_proj).argmax(dim=-1)
        self.eval_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.evals = []
        self.phases = {}

    def eager_step(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss

    def captured_step(self):
        self.static_loss = F.cross_entropy(self.model(self.static_x), self.static_y)
        self.static_loss.backward()
        self.opt.step()

    def capture(self, i, by_hand):
        x, y = self.batch_for(i)
        self.static_x.copy_(x)
        self.static_y.copy_(y)
        main = torch.cuda.current_stream(self.dev)
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            loss = self.eager_step(self.static_x, self.static_y)   # the warm-up: this step's training
        main.wait_stream(self.side)
        loss.record_stream(main)
        self.opt.zero_grad(set_to_none=True)   # backward in the capture allocates them from its pool
        self.graph = torch.cuda.CUDAGraph()
        if by_hand:
            with torch.cuda.stream(self.side):
                self.graph.capture_begin()
                self.captured_step()
                self.graph.capture_end()
        else:
            with torch.cuda.graph(self.graph, stream=self.side, capture_error_mode="thread_local"):
                self.captured_step()
        return loss

    def replay(self, i):
        x, y = self.batch_for(i)
        self.static_x.copy_(x)
        self.static_y.copy_(y)
        self.graph.replay()
        return self.static_loss

    def step(self, i):
        if i == self.drop_at and self.graph is not None:
            self.opt.zero_grad(set_to_none=True)   # the gradients in the graph's pool
            self.static_loss = None
            self.graph = None                      # ~CUDAGraph: the executable graph and its pool go
        if i in (self.cap_hand, self.cap_ctx):
            loss, phase = self.capture(i, by_hand=(i == self.cap_hand)), "c"
        elif self.graph is not None:
            loss, phase = self.replay(i), "r"
        else:
            x, y = self.batch_for(i)
            loss, phase = self.eager_step(x, y), "e"
        with torch.no_grad():
            torch._foreach_lerp_(self.ema, self.params, self.ema_rate)
        if i % self.eval_every == self.eval_every - 1:
            self.model.eval()
            with torch.no_grad():
                out = self.call(self.model, dict(zip(self.names, self.ema)), (self.Xe,))
                self.eval_buf[i].copy_(F.cross_entropy(out, self.Ye))
                del out
            self.model.train()
            self.evals.append(i)
        self.phases[i] = phase
        return loss

    def loss_lines(self):
        for i, p in self.phases.items():
            self.extra[i] = "g=" + p
        if self.evals:
            ev = tensor_hexes(self.eval_buf)
            for i in self.evals:
                self.extra[i] += " ev=" + ev[i]
        return super().loss_lines()


class MallocAsyncWorkload(TaskWorkload):
    """Distillation under PyTorch's cudaMallocAsync allocator backend
    (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, which main() sets before it imports
    torch): every allocation is a cudaMallocAsync and every free a cudaFreeAsync on the
    allocation's stream, issued when Python drops the tensor; a tensor record_stream()ed to
    another stream is freed after an event recorded on that stream is waited for. Every
    step a high-priority side stream waits for the default stream and draws a noise buffer
    of a size a seeded host random.Random picks (16 to 256 Ki floats, so the driver's pool
    hands out other blocks every step) from a CUDA generator of its own, perturbs the batch
    and computes a frozen teacher's soft targets; the noise is freed there, the batch
    (made on the default stream) is record_stream()ed to the side stream, the perturbed
    batch and the soft targets to the default stream, which waits for the side stream; the
    default stream draws a scratch buffer of another random size (8 to 256 Ki floats), uses
    its mean and frees it; the student (MLP, 6 layers, dropout 0.1) trains on
    cross-entropy plus KL with AdamW (foreach), and its saved activations are freed during
    backward. Every 25th step torch.cuda.empty_cache() synchronizes and trims the pool
    (cudaMemPoolTrimTo). A tool that holds launches must keep every stream-ordered free
    behind the launches that use the block (on both streams), and patch addresses that
    the driver's pool changes from step to step. The KL term ends every line
    (" kl=<hex>"). No sync in the loop apart from empty_cache's."""

    empty_every = 25

    def setup(self, mode="eager"):
        import random
        backend = torch.cuda.get_allocator_backend()
        if backend != "cudaMallocAsync":
            raise RuntimeError("mallocasync: the allocator backend is %r, not cudaMallocAsync "
                               "(PYTORCH_CUDA_ALLOC_CONF=%r, PYTORCH_ALLOC_CONF=%r)" % (
                                   backend, os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
                                   os.environ.get("PYTORCH_ALLOC_CONF")))
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.label_setup()
        self.teacher = MLP(self.din, self.hidden, self.nout, layers=4).to(self.dev)
        self.teacher.requires_grad_(False)
        self.teacher.eval()
        self.side = torch.cuda.Stream(device=self.dev, priority=-1)
        self.side_gen = torch.Generator(device=self.dev)
        self.side_gen.manual_seed(8080)
        self.sizes = random.Random(8081)
        self.kl_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def step(self, i):
        main = torch.cuda.current_stream(self.dev)
        x, y = self.batch_for(i)
        n = self.sizes.randint(4, 64) * 4096               # at least the batch's 64 x 256
        m = self.sizes.randint(1, 32) * 8192
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            noise = torch.randn(n, device=self.dev, generator=self.side_gen)
            xa = x + 0.05 * noise[:x.numel()].view_as(x)
            with torch.no_grad():
                soft = F.softmax(self.teacher(xa) / 2.0, dim=-1)
            del noise                                      # a cudaFreeAsync on the side stream
        x.record_stream(self.side)
        main.wait_stream(self.side)
        xa.record_stream(main)
        soft.record_stream(main)
        del x
        scratch = torch.empty(m, device=self.dev)
        scratch.uniform_(generator=self.gen)
        jitter = scratch.mean() - 0.5
        del scratch
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(xa)
        kl = F.kl_div(F.log_softmax(logits / 2.0, dim=-1), soft, reduction="batchmean")
        loss = F.cross_entropy(logits, y) + kl + 0.01 * jitter
        del xa, soft, logits
        loss.backward()
        self.opt.step()
        self.kl_buf[i].copy_(kl.detach())
        if i % self.empty_every == self.empty_every - 1:
            torch.cuda.empty_cache()
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.kl_buf)):
            self.extra[i] = "kl=" + h
        return super().loss_lines()


class FSDPWorkload(TaskWorkload):
    """FSDP2 (torch.distributed.fsdp.fully_shard) over NCCL at world size 1, as a
    single-GPU run of a sharded training script does: a residual MLP (a stem, four pre-norm
    blocks of LayerNorm, Linear to 1024, GELU, dropout 0.1, Linear back to 512, and a head),
    each block its own FSDP unit (reshard_after_forward on the even blocks only) and the
    root a fifth, under MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32).
    Every forward and backward of a unit all-gathers its parameters: a copy-in (foreach
    copies of the bf16 casts) on FSDP's all-gather copy-in stream, the NCCL all-gather on
    its high-priority all-gather stream, an Event created and recorded there and waited
    for by the compute stream, the outputs split into the unsharded parameters, whose
    storage is resized to zero when the unit reshards and back (new blocks, at other
    addresses) when it gathers again; backward's post-backward hooks reduce-scatter the
    gradients (chunk_cat, NCCL on the reduce-scatter stream, more events), and a callback
    queued on the autograd engine makes the compute stream wait for them. Two
    micro-batches a step, the first with set_requires_gradient_sync(False) (gradients
    accumulated unsharded, no reduce-scatter), the second with it on; AdamW (foreach) over
    the sharded DTensor parameters. NCCL's kernels run eagerly under graft; everything
    between them is the multi-stream choreography a tool must keep in order. No sync in the
    loop."""

    width, blocks, micro = 512, 4, 2

    def setup(self, mode="eager"):
        import torch.distributed as dist
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        self.dist = dist
        self.store_path = fresh_store_path("graft_fsdp_store.")
        init_group(dist, self.store_path, 0, 1, self.dev)
        h, blocks = self.width, self.blocks

        class Net(nn.Module):
            def __init__(self, din, nout):
                super().__init__()
                self.stem = nn.Linear(din, h)
                self.body = nn.ModuleList([nn.Sequential(nn.LayerNorm(h), nn.Linear(h, 2 * h), nn.GELU(),
                                                         nn.Dropout(0.1), nn.Linear(2 * h, h))
                                           for _ in range(blocks)])
                self.head = nn.Linear(h, nout)

            def forward(self, x):
                z = self.stem(x)
                for blk in self.body:
                    z = z + blk(z)
                return self.head(z)

        self.net = Net(self.din, self.nout).to(self.dev)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for k, blk in enumerate(self.net.body):
            fully_shard(blk, mp_policy=mp, reshard_after_forward=(k % 2 == 0))
        fully_shard(self.net, mp_policy=mp)
        self.model = self.net
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()

    def step(self, i):
        self.opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.dev)
        for k in range(self.micro):
            self.net.set_requires_gradient_sync(k == self.micro - 1)
            x, y = self.batch_for(i)
            loss = F.cross_entropy(self.net(x).float(), y) / self.micro
            loss.backward()
            total = total + loss.detach()
        self.opt.step()
        return total

    def finish(self):
        end_group(self.dist, self.store_path)


class OptZooWorkload(TaskWorkload):
    """Four foreach optimizers over four parts of one MLP, as fine-tuning scripts give
    layers optimizers of their own, none with capturable=True, so their step counts are
    CPU tensors and their per-step factors are host floats that reach the _foreach kernels
    as scalars and per-tensor scalar lists (TensorListScalarListMetadata in the kernel
    parameters): Adagrad (lr_decay, weight decay) on the first Linear under SequentialLR
    (LinearLR warm-up for 20 steps, then CosineAnnealingLR); RMSprop (centered, momentum
    0.9) on the second Linear and its LayerNorm, with a constant learning rate; NAdam
    (momentum_decay, decoupled weight decay: mu_product on the host) on the third under a
    ChainedScheduler (ConstantLR at half for 40 steps, ExponentialLR); RAdam (decoupled
    weight decay; its rectification term is 0 for the first steps and then not, and its
    decay factor 1 - lr*wd stays the same for 100 steps at a time) on the head under
    MultiStepLR (milestones 100 and 200). clip_grad_norm_(foreach=True) over all of them
    first. At step 150 a zero-initialised residual adapter (Linear) joins the forward pass
    and RMSprop gets a second parameter group for it (add_param_group, momentum 0, not
    centered: other foreach launches from then on). A tool that patches the scalars it saw
    change while it learned, and bakes in those that did not, steps with stale factors
    after step 100, 150 or 200. The adapter weights' absolute sum ends every line
    (" a=<hex>", zero before step 150). No sync in the loop."""

    hidden, adapter_at = 384, 150

    def setup(self, mode="eager"):
        h = self.hidden
        self.l0, self.l1, self.n1 = nn.Linear(self.din, h), nn.Linear(h, h), nn.LayerNorm(h)
        self.l2, self.head, self.adapter = nn.Linear(h, h), nn.Linear(h, self.nout), nn.Linear(h, h)
        self.drop = nn.Dropout(0.1)
        self.model = nn.ModuleList([self.l0, self.l1, self.n1, self.l2, self.head, self.adapter]).to(self.dev)
        with torch.no_grad():
            self.adapter.weight.zero_()
            self.adapter.bias.zero_()
        self.adapted = False
        O, S = torch.optim, torch.optim.lr_scheduler
        self.opt_ada = O.Adagrad(self.l0.parameters(), lr=0.05, lr_decay=1e-3, weight_decay=1e-4, foreach=True)
        self.opt_rms = O.RMSprop(list(self.l1.parameters()) + list(self.n1.parameters()), lr=1e-3, alpha=0.95,
                                 momentum=0.9, centered=True, weight_decay=1e-5, foreach=True)
        self.opt_nadam = O.NAdam(self.l2.parameters(), lr=2e-3, momentum_decay=4e-3, weight_decay=0.01,
                                 decoupled_weight_decay=True, foreach=True)
        self.opt_radam = O.RAdam(self.head.parameters(), lr=1e-3, weight_decay=0.01, decoupled_weight_decay=True,
                                 foreach=True)
        self.opts = [self.opt_ada, self.opt_rms, self.opt_nadam, self.opt_radam]
        self.scheds = [
            S.SequentialLR(self.opt_ada, [S.LinearLR(self.opt_ada, start_factor=0.1, total_iters=20),
                                          S.CosineAnnealingLR(self.opt_ada, T_max=self.steps, eta_min=1e-3)],
                           milestones=[20]),
            S.ChainedScheduler([S.ConstantLR(self.opt_nadam, factor=0.5, total_iters=40),
                                S.ExponentialLR(self.opt_nadam, gamma=0.995)]),
            S.MultiStepLR(self.opt_radam, milestones=[100, 200], gamma=0.3),
        ]
        self.label_setup()
        self.a_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def forward(self, x):
        z = F.relu(self.l0(x))
        z = self.drop(F.relu(self.n1(self.l1(z))))
        z = F.relu(self.l2(z))
        if self.adapted:
            z = z + self.adapter(z)
        return self.head(z)

    def step(self, i):
        if i == self.adapter_at:
            self.adapted = True
            self.opt_rms.add_param_group({"params": list(self.adapter.parameters()), "lr": 5e-4,
                                          "momentum": 0.0, "centered": False})
        x, y = self.batch_for(i)
        for o in self.opts:
            o.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.forward(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, foreach=True)
        for o in self.opts:
            o.step()
        for s in self.scheds:
            s.step()
        self.a_buf[i].copy_(self.adapter.weight.detach().abs().sum())
        return loss

    def loss_lines(self):
        for i, h in enumerate(tensor_hexes(self.a_buf)):
            self.extra[i] = "a=" + h
        return super().loss_lines()


# --------------------------------------------------------------------------- seventh red-team round
# Training patterns the rounds before leave out, each chosen for what a tool that holds
# launches back and replays them as graphs could get wrong: a checkpoint staged into pinned
# memory on a side stream and waited for by a writer thread that launches nothing,
# sharpness-aware minimization (two forward and backward passes a step that differ in a
# scalar, parameters swapped to other storage by p.data every step), timm's Mixup and
# CutMix (host-drawn blend factors and box extents in every step's kernels, three step
# shapes in a host-random order, a dropout rate decaying to nothing), float8 training
# through cuBLASLt's FP8 GEMMs with delayed scaling, and PCGrad (one graph backpropagated
# three times, projections decided by signs read back).

class AsyncSnapWorkload(TaskWorkload):
    """A checkpoint staged asynchronously, as async checkpointers (torch.distributed
    .checkpoint's async_save with pinned staging, torchtitan's async mode, hand-written
    variants) overlap it with training: every 20 steps, at step 4 of 20, after the optimizer
    step, a side stream waits for the default stream, spins (torch.cuda._sleep, about a
    millisecond, so that a step that does not wait for the staging overtakes it) and
    copies every parameter and AdamW's exp_avg and exp_avg_sq non_blocking into pinned
    host buffers (made once, reused by every snapshot), then records an Event (no timing,
    so it may be held). A writer thread started right there waits for the staging, on
    alternate snapshots by Event.synchronize() or by the side stream's synchronize(), reads
    the pinned buffers (an exact integer checksum of their bits, on the host) and ends; the
    main thread never synchronizes: it makes the default stream wait for the event before
    the next optimizer step (which writes the weights the copies read) and joins the thread
    ten steps later. Every 100 steps, at step 60 of 100, training restarts from the newest
    joined snapshot: the weights and moments are copied back non_blocking from the same
    pinned buffers (the next snapshot overwrites them on the side stream four steps later).
    A tool that holds launches must issue the side stream's held work and the event's record
    when a thread that itself launched nothing synchronizes on them (or the writer reads the
    previous snapshot, or a torn one), keep the cross-step wait (or the optimizer rewrites
    the weights under the copies), and order the restores against the staging. The MLP (6
    layers, dropout 0.1), AdamW (foreach). The checksum and the snapshot's step end the join
    steps' lines (" ck=<hex> s=<step>"), the restore steps' say which snapshot they loaded
    (" rs=<step>"). No sync in the main thread's loop (apart from what allocating the pinned
    buffers at the first snapshot costs)."""

    snap_every, snap_at, join_at, restore_every, restore_at = 20, 4, 14, 100, 60
    sleep_cycles = 2000000

    def setup(self, mode="eager"):
        import threading
        self.threading = threading
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.label_setup()
        self.params = list(self.model.parameters())
        self.side = torch.cuda.Stream(device=self.dev)
        self.staged = torch.cuda.Event()        # not a timing event: its record may be held
        self.host = None                        # pinned buffers, made at the first snapshot
        self.pending = None                     # (writer thread, its result, snapshot step)
        self.must_wait = False
        self.snap_step = None                   # the newest joined snapshot's step

    def state_tensors(self):
        st = self.opt.state
        return self.params + [st[p][k] for p in self.params for k in ("exp_avg", "exp_avg_sq")]

    def note(self, i, text):
        self.extra[i] = (self.extra[i] + " " if i in self.extra else "") + text

    def stage(self, i):
        main = torch.cuda.current_stream(self.dev)
        tensors = self.state_tensors()
        if self.host is None:
            self.host = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            torch.cuda._sleep(self.sleep_cycles)
            for h, t in zip(self.host, tensors):
                h.copy_(t, non_blocking=True)
            self.staged.record(self.side)
        self.must_wait = True
        result = {}
        by_event = (i // self.snap_every) % 2 == 0
        writer = self.threading.Thread(target=self.write, args=(by_event, result), name="workloads-asyncsnap",
                                       daemon=True)
        writer.start()
        self.pending = (writer, result, i)

    def write(self, by_event, result):
        """The writer thread: waits for the staging, then reads the pinned buffers."""
        try:
            if by_event:
                self.staged.synchronize()
            else:
                self.side.synchronize()
            total = 0
            for h in self.host:
                total += int(h.view(torch.int32).to(torch.int64).sum())
            result["ck"] = total & 0xFFFFFFFFFFFFFFFF
        except BaseException as e:  # reported by join()
            result["error"] = e

    def join(self, i):
        writer, result, s = self.pending
        writer.join()
        self.pending = None
        if "ck" not in result:
            raise RuntimeError("asyncsnap: the writer thread of step %d failed: %r" % (s, result.get("error")))
        self.snap_step = s
        self.note(i, "ck=%016x s=%d" % (result["ck"], s))

    def step(self, i):
        k = i % self.snap_every
        if self.pending is not None and k == self.join_at:
            self.join(i)
        if i % self.restore_every == self.restore_at and self.snap_step is not None and self.pending is None:
            with torch.no_grad():
                for h, t in zip(self.host, self.state_tensors()):
                    t.copy_(h, non_blocking=True)
            self.note(i, "rs=%d" % self.snap_step)
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        if self.must_wait:
            torch.cuda.current_stream(self.dev).wait_event(self.staged)   # the copies read what step() writes
            self.must_wait = False
        self.opt.step()
        if k == self.snap_at and self.pending is None:
            self.stage(i)
        return loss

    def loss_lines(self):
        if self.pending is not None:
            self.join(self.steps - 1)
        return super().loss_lines()


class SAMWorkload(TaskWorkload):
    """Sharpness-aware minimization (the SAM optimizer of davda54/sam, the implementation
    most SAM training scripts copy, over SGD with Nesterov momentum, foreach, under StepLR)
    on an MLP with BatchNorm1d and dropout, with that repository's BatchNorm trick: every
    step runs forward and backward twice on the same batch, the first at the weights w with
    the BatchNorms' momentum 0.1, then first_step() (the gradient norm: a norm kernel per
    parameter, stacked, a norm of those; old_p = p.data.clone(); p += rho * g / |g|), the
    second at w + e(w) with every BatchNorm's momentum set to 0 (disable_running_stats), so
    that its running statistics keep what the first pass gave them; then second_step()
    assigns p.data = old_p and steps SGD. So the two passes launch the same kernels, the
    running-statistics updates differing only in their momentum argument (0.1, then 0.0),
    and every parameter lives in other storage after every step (the clone of this step;
    the perturbed storage is freed and handed out again to the next step's clones), moved
    by host-side bookkeeping that no driver call announces. A tool that
    replays the first pass's graph for the second, or patches the parameters' addresses
    from the step before, updates the running statistics or the weights wrongly. The
    gradient norm of the first pass and the first BatchNorm's running mean, summed, end
    every line (" gn=<hex> rm=<hex>"). No sync in the loop."""

    rho, layers = 0.05, 3

    def setup(self, mode="eager"):
        h, mods, d = self.hidden, [], self.din
        for _ in range(self.layers):
            mods += [nn.Linear(d, h), nn.BatchNorm1d(h), nn.ReLU(), nn.Dropout(0.1)]
            d = h
        mods.append(nn.Linear(d, self.nout))
        self.model = nn.Sequential(*mods).to(self.dev)
        self.bns = [m for m in self.model if isinstance(m, nn.BatchNorm1d)]
        self.opt = SAM(self.model.parameters(), torch.optim.SGD, rho=self.rho, adaptive=False, lr=0.05,
                       momentum=0.9, nesterov=True, weight_decay=5e-4, foreach=True)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt.base_optimizer, step_size=100, gamma=0.5)
        self.label_setup()
        self.gn_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.rm_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)

    def step(self, i):
        x, y = self.batch_for(i)
        for bn in self.bns:                        # enable_running_stats
            if hasattr(bn, "backup_momentum"):
                bn.momentum = bn.backup_momentum
        loss = F.cross_entropy(self.model(x), y, label_smoothing=0.1)
        loss.backward()
        self.opt.first_step(zero_grad=True)
        for bn in self.bns:                        # disable_running_stats
            bn.backup_momentum = bn.momentum
            bn.momentum = 0
        F.cross_entropy(self.model(x), y, label_smoothing=0.1).backward()
        self.opt.second_step(zero_grad=True)
        self.sched.step()
        self.gn_buf[i].copy_(self.opt.grad_norm)
        self.rm_buf[i].copy_(self.bns[0].running_mean.sum())
        return loss

    def loss_lines(self):
        for i, (g, r) in enumerate(zip(tensor_hexes(self.gn_buf), tensor_hexes(self.rm_buf))):
            self.extra[i] = "gn=%s rm=%s" % (g, r)
        return super().loss_lines()


class MixupWorkload(Workload):
    """Mixup and CutMix as timm's Mixup applies them to every batch (batch mode, the
    DeiT recipe's settings: mixup alpha 0.8, cutmix alpha 1.0, switch probability 0.5,
    label smoothing 0.1; here with probability 0.8, so one batch in five is not mixed), the
    draws from a seeded host random.Random (timm's use numpy's global generator): mixup
    blends the batch with its flip in place (x.flip(0).mul_(1 - lam), x.mul_(lam).add_()),
    CutMix pastes a box of the flipped batch whose extents and position are host integers
    (x[:, :, yl:yh, xl:xh] = x.flip(0)[...]: a strided copy whose size and offsets change
    every step, none when the box is empty) and corrects lam to the pasted area; the soft
    targets blend the smoothed one-hot labels and their flip by lam, and the loss is timm's
    SoftTargetCrossEntropy. The small ResNet (cuDNN convolutions, BatchNorm) with an
    "early dropout" before its head whose rate falls linearly from 0.3 to 0 over the
    first 150 steps (F.dropout's keep probability and backward scale, kernel arguments
    that change every step; at 0 F.dropout launches nothing and draws no random numbers
    from then on). AdamW (foreach) under CosineAnnealingLR. So host floats that never
    repeat reach the mixing, target and dropout kernels every step, and the step takes one
    of three shapes (mixup, CutMix, neither) in an order the host RNG decides: a tool that
    replays a graph with a blend factor, box or keep probability recorded in another step,
    or patches them from the wrong launch, trains on other data. What the step did and the
    mixed batch's sum end every line (" m=x|c|- x=<hex>"). No sync in the loop."""

    batch, nout = 32, 10
    mixup_alpha, cutmix_alpha, mix_prob, switch_prob, smoothing = 0.8, 1.0, 0.8, 0.5, 0.1
    drop_max, drop_until = 0.3, 150

    def setup(self, mode="eager"):
        import random
        self.model = SmallResNet(self.nout).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=2e-3, weight_decay=0.05, foreach=True)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=self.steps, eta_min=1e-5)
        self.rng = random.Random(5150)
        self.label_proj = torch.randn(48, self.nout, device=self.dev, generator=self.gen)   # 3 x 4 x 4 pooled
        self.classes = torch.arange(self.nout, device=self.dev)
        self.x_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.modes = {}

    def mix(self, x):
        """timm's Mixup._mix_batch: mixes x in place, returns lam and what it did."""
        r = self.rng
        if r.random() >= self.mix_prob:
            return 1.0, "-"
        if r.random() < self.switch_prob:
            lam = r.betavariate(self.cutmix_alpha, self.cutmix_alpha)
            H, W = x.shape[-2:]
            cut = math.sqrt(1.0 - lam)
            ch, cw = int(H * cut), int(W * cut)
            cy, cx = r.randrange(H), r.randrange(W)
            yl, yh = max(cy - ch // 2, 0), min(cy + ch // 2, H)
            xl, xh = max(cx - cw // 2, 0), min(cx + cw // 2, W)
            x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
            return 1.0 - (yh - yl) * (xh - xl) / float(H * W), "c"
        lam = r.betavariate(self.mixup_alpha, self.mixup_alpha)
        x_flipped = x.flip(0).mul_(1.0 - lam)
        x.mul_(lam).add_(x_flipped)
        return lam, "x"

    def step(self, i):
        m = self.model
        x = torch.randn(self.batch, 3, 32, 32, device=self.dev, generator=self.gen)
        y = (F.avg_pool2d(x, 8).flatten(1) @ self.label_proj).argmax(dim=-1)
        lam, what = self.mix(x)
        off = self.smoothing / self.nout
        y1 = (y[:, None] == self.classes).float() * (1.0 - self.smoothing) + off
        target = y1 * lam + y1.flip(0) * (1.0 - lam)
        p = self.drop_max * max(0.0, 1.0 - i / self.drop_until)
        self.opt.zero_grad(set_to_none=True)
        feat = m.body(m.stem(x)).mean(dim=(2, 3))
        logits = m.head(F.dropout(feat, p=p, training=True))
        loss = torch.sum(-target * F.log_softmax(logits, dim=-1), dim=-1).mean()
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.x_buf[i].copy_(x.sum())
        self.modes[i] = what
        return loss

    def loss_lines(self):
        xs = tensor_hexes(self.x_buf)
        for i, what in self.modes.items():
            self.extra[i] = "m=%s x=%s" % (what, xs[i])
        return super().loss_lines()


class FP8Workload(TaskWorkload):
    """Float8 training as torchao's Float8Linear and TransformerEngine do it on Hopper,
    written out (F8Linear, F8LinearFn): three of the MLP's four Linear layers (256 to 512,
    512, 512; GELU, dropout 0.1) run their forward GEMM and both backward GEMMs in float8
    through torch._scaled_mm, cuBLASLt's FP8 GEMM with per-tensor scales passed by device
    pointer (inverse scales made anew every call), float32 out; the weights are scaled by
    their current amax, the inputs by delayed scaling (the largest amax in a 16-step
    history kept on the GPU, rolled and written in place every step), the output gradients
    by their amax into float8_e5m2; the head (10 outputs, not a multiple of 16) stays
    float32. The float32 master weights are stepped by AdamW (foreach). Every 10th step an
    eval pass over 256 held-out samples (eval mode: dynamic input scales, no history update,
    another M for the FP8 GEMMs, so other cuBLASLt kernels). Nothing is read back. A tool
    must patch the scale pointers and operand addresses that cuBLASLt bakes into its FP8
    kernels' parameters (on Hopper typically inside TMA descriptors, not as plain pointers),
    and keep the in-place history update ordered before the next step's scale. The first
    layer's largest recorded amax ends every line (" a=<hex>"), the eval loss every 10th
    (" ev=<hex>"). No sync in the loop."""

    eval_every, neval = 10, 256

    def setup(self, mode="eager"):
        cap = torch.cuda.get_device_capability(self.dev)
        if cap < (8, 9):
            raise RuntimeError("fp8: torch._scaled_mm needs compute capability 8.9 or newer, not %d.%d" % cap)
        h = self.hidden
        self.model = nn.Sequential(F8Linear(self.din, h), nn.GELU(), nn.Dropout(0.1),
                                   F8Linear(h, h), nn.GELU(), nn.Dropout(0.1),
                                   F8Linear(h, h), nn.GELU(), nn.Linear(h, self.nout)).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.label_setup()
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = (self.Xe @ self.label_proj).argmax(dim=-1)
        self.a_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.eval_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.evals = []

    def step(self, i):
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.a_buf[i].copy_(self.model[0].amax_hist.amax())
        if i % self.eval_every == self.eval_every - 1:
            self.model.eval()
            with torch.no_grad():
                self.eval_buf[i].copy_(F.cross_entropy(self.model(self.Xe), self.Ye))
            self.model.train()
            self.evals.append(i)
        return loss

    def loss_lines(self):
        for i, a in enumerate(tensor_hexes(self.a_buf)):
            self.extra[i] = "a=" + a
        ev = tensor_hexes(self.eval_buf)
        for i in self.evals:
            self.extra[i] += " ev=" + ev[i]
        return super().loss_lines()


class PCGrad:
    """Projecting conflicting gradients (Yu et al., 2020) as the wrapper multi-task scripts
    copy (WeiChengTseng/Pytorch-PCGrad) does it, around an optimizer: pc_backward(losses)
    backpropagates each task's loss through the same graph (retain_graph=True), each time
    cloning the gradients into one flat vector (torch.cat; zeros, and a has-gradient mask
    of zeros, for parameters the task does not reach); deep-copies the vectors, and for each
    task's copy walks the others in an order shuffled by the host RNG, projecting it off
    each one whose dot product with it is negative (`if g_i_g_j < 0`: a value read back,
    whose sign decides whether the projection's kernels are launched); merges the copies
    (the mean where every task has gradients, the sum elsewhere, by boolean-mask indexing:
    nonzero, a sync each) and assigns the slices back as .grad."""

    def __init__(self, optimizer, rng, reduction="mean"):
        self._optim, self._reduction, self.rng = optimizer, reduction, rng
        self.projected = 0

    def zero_grad(self):
        return self._optim.zero_grad(set_to_none=True)

    def step(self):
        return self._optim.step()

    def pc_backward(self, objectives):
        grads, shapes, has_grads = self._pack_grad(objectives)
        pc_grad = self._project_conflicting(grads, has_grads)
        self._set_grad(self._unflatten_grad(pc_grad, shapes[0]))

    def _project_conflicting(self, grads, has_grads):
        import copy
        shared = torch.stack(has_grads).prod(0).bool()
        pc_grad = copy.deepcopy(grads)
        self.projected = 0
        for g_i in pc_grad:
            self.rng.shuffle(grads)
            for g_j in grads:
                g_i_g_j = torch.dot(g_i, g_j)
                if g_i_g_j < 0:                                     # read back: the branch
                    g_i -= g_i_g_j * g_j / (g_j.norm() ** 2)
                    self.projected += 1
        merged = torch.zeros_like(grads[0])
        if self._reduction == "mean":
            merged[shared] = torch.stack([g[shared] for g in pc_grad]).mean(dim=0)
        else:
            merged[shared] = torch.stack([g[shared] for g in pc_grad]).sum(dim=0)
        merged[~shared] = torch.stack([g[~shared] for g in pc_grad]).sum(dim=0)
        return merged

    def _set_grad(self, grads):
        idx = 0
        for group in self._optim.param_groups:
            for p in group["params"]:
                p.grad = grads[idx]
                idx += 1

    def _pack_grad(self, objectives):
        grads, shapes, has_grads = [], [], []
        for obj in objectives:
            self._optim.zero_grad(set_to_none=True)
            obj.backward(retain_graph=True)
            grad, shape, has_grad = self._retrieve_grad()
            grads.append(torch.cat([g.flatten() for g in grad]))
            has_grads.append(torch.cat([g.flatten() for g in has_grad]))
            shapes.append(shape)
        return grads, shapes, has_grads

    def _unflatten_grad(self, grads, shapes):
        out, idx = [], 0
        for shape in shapes:
            n = shape.numel()
            out.append(grads[idx:idx + n].view(shape).clone())
            idx += n
        return out

    def _retrieve_grad(self):
        grad, shape, has_grad = [], [], []
        for group in self._optim.param_groups:
            for p in group["params"]:
                if p.grad is None:                                  # a head this task does not use
                    shape.append(p.shape)
                    grad.append(torch.zeros_like(p))
                    has_grad.append(torch.zeros_like(p))
                    continue
                shape.append(p.grad.shape)
                grad.append(p.grad.clone())
                has_grad.append(torch.ones_like(p))
        return grad, shape, has_grad


class PCGradWorkload(TaskWorkload):
    """Multi-task training with PCGrad (gradient surgery): a shared trunk (Linear, ReLU,
    dropout 0.1, Linear, ReLU) and three heads, a 10-way classifier (the usual labels), a
    4-output regression (MSE against a tanh of a fixed projection) and a 5-way classifier
    (the argmax of another projection), their three losses backpropagated one at a time
    through the one forward graph (retain_graph=True: its saved tensors, the dropout mask
    among them, read three times), the per-task gradients flattened, projected where they
    conflict and merged by the PCGrad wrapper (a seeded host random.Random for its
    shuffles), then Adam (foreach) over the merged gradients. Nine dot products are read
    back every step and their signs decide which projections run, and eight boolean-mask
    indexings read their counts back: the launch sequence follows values only the GPU
    knows, in no period. A tool that holds launches must issue them at each read, and one
    that replays a step recorded with other projections computes other gradients. The
    number of projections ends every line (" pj=<n>")."""

    syncs = True

    def setup(self, mode="eager"):
        import random
        h = self.hidden
        self.trunk = nn.Sequential(nn.Linear(self.din, h), nn.ReLU(), nn.Dropout(0.1),
                                   nn.Linear(h, h), nn.ReLU()).to(self.dev)
        self.heads = nn.ModuleList([nn.Linear(h, self.nout), nn.Linear(h, 4), nn.Linear(h, 5)]).to(self.dev)
        self.model = nn.ModuleList([self.trunk, self.heads])
        self.opt = PCGrad(torch.optim.Adam(self.model.parameters(), lr=1e-3, foreach=True), random.Random(4242))
        self.label_setup()
        self.reg_proj = torch.randn(self.din, 4, device=self.dev, generator=self.gen) / math.sqrt(self.din)
        self.aux_proj = torch.randn(self.din, 5, device=self.dev, generator=self.gen)

    def step(self, i):
        x, y = self.batch_for(i)
        z = self.trunk(x)
        losses = [F.cross_entropy(self.heads[0](z), y),
                  F.mse_loss(self.heads[1](z), torch.tanh(x @ self.reg_proj)),
                  F.cross_entropy(self.heads[2](z), (x @ self.aux_proj).argmax(dim=-1))]
        self.opt.zero_grad()
        self.opt.pc_backward(losses)
        self.opt.step()
        self.extra[i] = "pj=%d" % self.opt.projected
        return (losses[0] + losses[1] + losses[2]).detach()


# --------------------------------------------------------------------------- eighth red-team round
# Patterns the rounds before leave out, each chosen for what a tool that holds launches back
# and replays them as graphs could get wrong: kernels of the program's own, written in Triton
# and launched by Triton's launcher behind torch.library.custom_op, whose compile-time
# constants, grid and seed change as the run goes on (modules loaded mid-run); elementwise
# kernels compiled at run time by PyTorch's jiterator through NVRTC and launched through
# driver entry points PyTorch looks up with dlsym; stochastic depth decided by a host RNG (a
# different launch sequence nearly every step) with an EMA teacher run under inference_mode;
# the TF32 and reduced-precision switches flipped mid-run (other cuBLAS and cuDNN kernels for
# the same shapes); and scalars, an integer, a pointer and the RNG seed that stay the same for
# a hundred steps or more and then change once, some of them back again.

triton = tl = None   # bound by build_rmsdrop (the kernels' source names tl as a global)
_RMSDROP = None      # the rmsdrop custom op, once built


def build_rmsdrop():
    """The tritonop case's custom op graft_tests::rmsdrop (RMSNorm with a learnable gain,
    then dropout, in one Triton kernel; its backward another Triton kernel behind a second
    custom op), built once per process: Triton is imported here, so that this module loads
    without it. Returns the op (a torch.library.custom_op with register_autograd)."""
    global _RMSDROP, triton, tl
    if _RMSDROP is not None:
        return _RMSDROP
    import triton
    import triton.language as tl

    # M (rows) and seed change every step: unspecialised, so Triton compiles one kernel per
    # (BLOCK_N, ROWS, num_warps), not one per divisibility class of their values.
    @triton.jit(do_not_specialize=["M", "seed"])
    def rmsdrop_fwd_kernel(X, W, Y, RSTD, M, N, p, scale, eps, seed,
                           BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
        cols = tl.arange(0, BLOCK_N)
        cmask = cols < N
        w = tl.load(W + cols, mask=cmask, other=0.0)
        for r in tl.static_range(ROWS):
            row = tl.program_id(0) * ROWS + r
            m = cmask & (row < M)
            x = tl.load(X + row * N + cols, mask=m, other=0.0)
            rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
            keep = tl.rand(seed, row * N + cols) >= p
            y = tl.where(keep, x * rstd * w * scale, 0.0)
            tl.store(Y + row * N + cols, y, mask=m)
            tl.store(RSTD + row, rstd, mask=row < M)

    @triton.jit(do_not_specialize=["M", "seed"])
    def rmsdrop_bwd_kernel(X, W, RSTD, GY, GX, GWP, M, N, p, scale, seed,
                           BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
        cols = tl.arange(0, BLOCK_N)
        cmask = cols < N
        w = tl.load(W + cols, mask=cmask, other=0.0)
        for r in tl.static_range(ROWS):
            row = tl.program_id(0) * ROWS + r
            m = cmask & (row < M)
            x = tl.load(X + row * N + cols, mask=m, other=0.0)
            gy = tl.load(GY + row * N + cols, mask=m, other=0.0)
            rstd = tl.load(RSTD + row, mask=row < M, other=0.0)
            keep = tl.rand(seed, row * N + cols) >= p       # the forward's mask, drawn again
            g = tl.where(keep, gy * scale, 0.0)
            xhat = x * rstd
            tl.store(GWP + row * N + cols, g * xhat, mask=m)  # this row's share of dW
            gxh = g * w
            c = tl.sum(gxh * xhat, axis=0) / N
            tl.store(GX + row * N + cols, rstd * (gxh - xhat * c), mask=m)

    @torch.library.custom_op("graft_tests::rmsdrop", mutates_args=())
    def rmsdrop(x: torch.Tensor, w: torch.Tensor, p: float, eps: float, seed: int, rows: int,
                warps: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.contiguous()
        M, N = x.shape
        y = torch.empty_like(x)
        rstd = torch.empty(M, dtype=torch.float32, device=x.device)
        rmsdrop_fwd_kernel[(triton.cdiv(M, rows),)](
            x, w, y, rstd, M, N, p, 1.0 / (1.0 - p), eps, seed,
            BLOCK_N=triton.next_power_of_2(N), ROWS=rows, num_warps=warps)
        return y, rstd

    @torch.library.custom_op("graft_tests::rmsdrop_bwd", mutates_args=())
    def rmsdrop_bwd(gy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor, p: float,
                    seed: int, rows: int, warps: int) -> tuple[torch.Tensor, torch.Tensor]:
        gy = gy.contiguous()
        M, N = x.shape
        gx = torch.empty_like(x)
        gwp = torch.empty_like(x)
        rmsdrop_bwd_kernel[(triton.cdiv(M, rows),)](
            x, w, rstd, gy, gx, gwp, M, N, p, 1.0 / (1.0 - p), seed,
            BLOCK_N=triton.next_power_of_2(N), ROWS=rows, num_warps=warps)
        return gx, gwp

    def setup_context(ctx, inputs, output):
        x, w, p, eps, seed, rows, warps = inputs
        ctx.save_for_backward(x, w, output[1])
        ctx.cfg = (p, seed, rows, warps)

    def backward(ctx, gy, grstd):
        x, w, rstd = ctx.saved_tensors
        p, seed, rows, warps = ctx.cfg
        gx, gwp = rmsdrop_bwd(gy, x.contiguous(), w, rstd, p, seed, rows, warps)
        return gx, gwp.sum(dim=0), None, None, None, None, None

    rmsdrop.register_autograd(backward, setup_context=setup_context)
    _RMSDROP = rmsdrop
    return rmsdrop


class TritonOpWorkload(TaskWorkload):
    """Kernels of the program's own in Triton, as fused-kernel libraries (Liger, Unsloth,
    hand-written RMSNorm kernels) put them into training: after each of the MLP's two hidden
    Linear layers (256 to 512, 512 to 512, GELU after, a 10-way head) an RMSNorm with a
    learnable gain fused with dropout in one @triton.jit kernel (a row per program or
    several, tl.sum over the row, the dropout mask from tl.rand(seed, offsets)), and its
    backward in another (the mask drawn again from the same seed; each row's share of the
    gain's gradient written out and summed by PyTorch, no atomics), wrapped in
    torch.library.custom_op with register_autograd, so each layer is one op to autograd and
    the kernels are launched by Triton's own launcher on PyTorch's current stream. The
    kernels' compile-time constants change every 25 steps, cycling over four (rows per
    program, num_warps) configurations (1, 4), (2, 4), (4, 8), (2, 2): Triton compiles and
    loads two new modules at steps 0, 25, 50 and 75, mid-run, and a configuration comes back
    100 steps after it was last used. The batch's rows (45, 64, 70 or 96: some leave the
    last program rows to mask off) come from a seeded host random.Random every step, so the
    grids change; the dropout seed is a new host int every step and layer (an unspecialised
    kernel argument); the dropout rate is 0.1 until step 160 and 0.05 after (p and the
    1/(1-p) scale, kernel arguments constant for 160 steps), and the RMSNorm epsilon 1e-6
    until step 220 and 1e-5 after. AdamW (foreach).
    A tool that replays a step recorded with another configuration, grid, seed, rate or
    epsilon, or takes a launch through Triton's launcher for one of PyTorch's, normalises,
    drops or scales the wrong elements. The configuration, the rows and the first layer's
    mean reciprocal RMS end every line (" c=<rows>x<warps> M=<n> r=<hex>"). No sync in the
    loop."""

    hidden = 512
    configs = ((1, 4), (2, 4), (4, 8), (2, 2))
    switch_every, rows_choices = 25, (45, 64, 70, 96)
    p_before, p_after, p_at = 0.1, 0.05, 160
    eps_before, eps_after, eps_at = 1e-6, 1e-5, 220

    def setup(self, mode="eager"):
        import random
        try:
            self.rmsdrop = build_rmsdrop()
        except ImportError as e:
            raise RuntimeError("tritonop: Triton is not importable here (%s)" % e)
        h = self.hidden
        self.fc1, self.fc2, self.head = nn.Linear(self.din, h), nn.Linear(h, h), nn.Linear(h, self.nout)
        self.g1 = nn.Parameter(torch.ones(h, device=self.dev))
        self.g2 = nn.Parameter(torch.ones(h, device=self.dev))
        self.model = nn.ModuleList([self.fc1, self.fc2, self.head]).to(self.dev)
        self.opt = torch.optim.AdamW(list(self.model.parameters()) + [self.g1, self.g2], lr=1e-3,
                                     weight_decay=0.01, foreach=True)
        self.label_setup()
        self.draws = random.Random(8086)
        self.r_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.info = {}

    def step(self, i):
        rows, warps = self.configs[(i // self.switch_every) % len(self.configs)]
        M = self.draws.choice(self.rows_choices)
        s1, s2 = self.draws.randrange(1 << 30), self.draws.randrange(1 << 30)
        p = self.p_before if i < self.p_at else self.p_after
        eps = self.eps_before if i < self.eps_at else self.eps_after
        x = torch.randn(M, self.din, device=self.dev, generator=self.gen)
        y = (x @ self.label_proj).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        z, rstd1 = self.rmsdrop(self.fc1(x), self.g1, p, eps, s1, rows, warps)
        z, _ = self.rmsdrop(self.fc2(F.gelu(z)), self.g2, p, eps, s2, rows, warps)
        loss = F.cross_entropy(self.head(F.gelu(z)), y)
        loss.backward()
        self.opt.step()
        self.r_buf[i].copy_(rstd1.detach().mean())
        self.info[i] = (rows, warps, M)
        return loss

    def loss_lines(self):
        r = tensor_hexes(self.r_buf)
        for i, (rows, warps, M) in self.info.items():
            self.extra[i] = "c=%dx%d M=%d r=%s" % (rows, warps, M, r[i])
        return super().loss_lines()


class JiteratorWorkload(TaskWorkload):
    """Elementwise kernels compiled at run time by PyTorch's jiterator
    (torch.cuda.jiterator._create_multi_output_jit_fn and _create_jit_fn: C++ source
    generated around a functor, compiled by NVRTC, loaded with cuModuleLoadData and launched
    with cuLaunchKernel, both looked up by PyTorch in libcuda.so.1 with dlsym rather than
    linked): the MLP's two hidden activations are a learnable "swish" y = x * sigmoid(beta *
    b * x) with a per-feature parameter b, its forward one three-output jiterator kernel (y
    and the derivatives by x and by b, by reference) inside an autograd.Function, its
    backward a two-input jiterator kernel with a scalar (g * d * gscale) for each, the
    gradient of b summed over the batch by PyTorch. beta is a host float that changes every
    step (a cosine from 1.0 to 2.0 over the run), passed as the kernel's extra double
    argument; gscale is 1.0, and 0.5 for the second layer from step 200 on. The inputs'
    layout changes every 10 steps in the order dense, broadcast, dense, cast, broadcast
    (b expanded to a contiguous copy: jiterator's vectorized kernel; b of shape [H]
    broadcast over the batch: its unrolled kernel with offset calculators; x in bfloat16
    and b dense: its dynamic-casting kernel), so each kind of kernel is first compiled at a
    later step (0, 10, 30) and loaded mid-run; the batch's rows (48, 64 or 96) come from a
    seeded host random.Random every step. AdamW (foreach). A tool that does not see these
    launches (they reach the driver through pointers from dlsym, not through the symbols
    an LD_PRELOAD library defines) lets them run ahead of the work it holds; one that
    replays them with another beta, layout or size computes other activations. The layout
    and the first layer's mean dy/db end every line (" l=d|b|c g=<hex>"). No sync in the
    loop."""

    hidden = 512
    layouts = ("d", "b", "d", "c", "b")
    switch_every, rows_choices, gscale_at = 10, (48, 64, 96), 200

    def setup(self, mode="eager"):
        import random
        from torch.cuda import jiterator
        self.act_fwd = jiterator._create_multi_output_jit_fn(
            "template <typename T> void swish_fwd(T x, T b, T beta, T& y, T& dx, T& db) {"
            " T z = beta * b * x; T s = T(1) / (T(1) + ::exp(-z)); T ds = s * (T(1) - s);"
            " y = x * s; dx = s + z * ds; db = beta * x * x * ds; }",
            num_outputs=3, beta=1.0)
        self.act_bwd = jiterator._create_jit_fn(
            "template <typename T> T swish_grad(T g, T d, T gscale) { return g * d * gscale; }",
            gscale=1.0)
        act_fwd, act_bwd = self.act_fwd, self.act_bwd

        class SwishFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, b, b_in, beta, gscale):
                # b_in: b itself (broadcast) or its dense expansion; the gradient goes to b
                y, dx, db = act_fwd(x, b_in, beta=beta)
                ctx.save_for_backward(dx, db)
                ctx.gscale = gscale
                return y

            @staticmethod
            def backward(ctx, g):
                dx, db = ctx.saved_tensors
                g = g.contiguous()
                gx = act_bwd(g, dx, gscale=ctx.gscale)
                gb = act_bwd(g, db, gscale=ctx.gscale).sum(dim=0)
                return gx, gb, None, None, None

        self.swish = SwishFn
        h = self.hidden
        self.fc1, self.fc2, self.head = nn.Linear(self.din, h), nn.Linear(h, h), nn.Linear(h, self.nout)
        self.b1 = nn.Parameter(torch.ones(h, device=self.dev))
        self.b2 = nn.Parameter(torch.ones(h, device=self.dev))
        self.model = nn.ModuleList([self.fc1, self.fc2, self.head]).to(self.dev)
        self.opt = torch.optim.AdamW(list(self.model.parameters()) + [self.b1, self.b2], lr=1e-3,
                                     weight_decay=0.01, foreach=True)
        self.label_setup()
        self.draws = random.Random(1337)
        self.g_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.lays = {}

    def act(self, x, b, lay, beta, gscale):
        if lay == "b":
            return self.swish.apply(x, b, b, beta, gscale)
        b_in = b.detach().expand_as(x).contiguous()
        if lay == "c":
            x = x.to(torch.bfloat16)
        return self.swish.apply(x, b, b_in, beta, gscale)

    def step(self, i):
        lay = self.layouts[(i // self.switch_every) % len(self.layouts)]
        M = self.draws.choice(self.rows_choices)
        beta = 1.5 - 0.5 * math.cos(math.pi * i / max(1, self.steps - 1))
        g2 = 0.5 if i >= self.gscale_at else 1.0
        x = torch.randn(M, self.din, device=self.dev, generator=self.gen)
        y = (x @ self.label_proj).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        z = self.act(self.fc1(x), self.b1, lay, beta, 1.0)
        z = self.act(self.fc2(z), self.b2, lay, beta, g2)
        loss = F.cross_entropy(self.head(z), y)
        loss.backward()
        self.opt.step()
        self.g_buf[i].copy_(self.b1.grad.detach().mean())
        self.lays[i] = lay
        return loss

    def loss_lines(self):
        g = tensor_hexes(self.g_buf)
        for i, lay in self.lays.items():
            self.extra[i] = "l=%s g=%s" % (lay, g[i])
        return super().loss_lines()


class LayerDropWorkload(TaskWorkload):
    """Stochastic depth (LayerDrop) decided on the host, with a teacher that is the
    student's EMA, as DeiT-style distillation with drop-path in batch mode does it: a
    residual MLP (a Linear stem to 256, six pre-LayerNorm blocks 256-512-256 with GELU and
    dropout 0.1, a LayerNorm, a 10-way head) whose block l is skipped with probability
    0.5 * l / 5 (so block 0 never), ramped up linearly over the first 100 steps, each draw
    from a seeded host random.Random; a kept block's output is divided by its keep
    probability (a host float that changes every step of the ramp). So nearly every step
    launches one of 32 forward and backward sequences in an order only the host RNG knows,
    and AdamW (foreach, grads set to None) steps only the parameters of the kept blocks
    (other tensor lists in its kernels). The teacher, a deepcopy of the student in eval
    mode, runs all six blocks under torch.inference_mode(); its temperature-softened
    log-probabilities are cloned out of inference mode (inference tensors cannot be saved
    for backward) for the KL term (T=2, weight 0.5 against the cross-entropy), and after
    the optimizer step it follows the student by torch._foreach_lerp_ with a weight
    1 - min(0.999, (1+i)/(10+i)) that changes every step. A tool that replays a sequence
    recorded for another set of kept blocks, or patches the divisor or the EMA weight from
    another step, trains other blocks. The kept blocks and the teacher's cross-entropy end
    every line (" k=<bits> t=<hex>"). No sync in the loop."""

    width, depth, p_max, ramp, temp, alpha, ema_max = 256, 6, 0.5, 100, 2.0, 0.5, 0.999

    def setup(self, mode="eager"):
        import copy
        import random
        d = self.width
        self.stem = nn.Linear(self.din, d)
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.GELU(), nn.Dropout(0.1),
                                                   nn.Linear(2 * d, d)) for _ in range(self.depth)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, self.nout)
        self.model = nn.ModuleList([self.stem, self.blocks, self.norm, self.head]).to(self.dev)
        self.teacher = copy.deepcopy(self.model).requires_grad_(False).eval()
        self.s_params = list(self.model.parameters())
        self.t_params = list(self.teacher.parameters())
        self.opt = torch.optim.AdamW(self.s_params, lr=1e-3, weight_decay=0.01, foreach=True)
        self.rng = random.Random(6061)
        self.label_setup()
        self.t_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.keeps = {}

    def run(self, m, x, keep, probs):
        stem, blocks, norm, head = m
        z = stem(x)
        for l, blk in enumerate(blocks):
            if keep is None:
                z = z + blk(z)
            elif keep[l]:
                z = z + blk(z) / (1.0 - probs[l])
        return head(norm(z))

    def step(self, i):
        x, y = self.batch_for(i)
        ramp = min(1.0, i / self.ramp)
        probs = [self.p_max * ramp * l / (self.depth - 1) for l in range(self.depth)]
        keep = [self.rng.random() >= p for p in probs]
        T = self.temp
        with torch.inference_mode():
            t_logits = self.run(self.teacher, x, None, probs)
            t_logp = F.log_softmax(t_logits / T, dim=-1)
            t_ce = F.cross_entropy(t_logits, y)
        t_logp = t_logp.clone()                       # a normal tensor, savable for backward
        self.opt.zero_grad(set_to_none=True)
        s_logits = self.run(self.model, x, keep, probs)
        ce = F.cross_entropy(s_logits, y)
        kd = F.kl_div(F.log_softmax(s_logits / T, dim=-1), t_logp, reduction="batchmean", log_target=True)
        loss = (1.0 - self.alpha) * ce + self.alpha * T * T * kd
        loss.backward()
        self.opt.step()
        decay = min(self.ema_max, (1.0 + i) / (10.0 + i))
        with torch.no_grad():
            torch._foreach_lerp_(self.t_params, self.s_params, 1.0 - decay)
        self.t_buf[i].copy_(t_ce)
        self.keeps[i] = "".join("1" if k else "0" for k in keep)
        return loss

    def loss_lines(self):
        t = tensor_hexes(self.t_buf)
        for i, k in self.keeps.items():
            self.extra[i] = "k=%s t=%s" % (k, t[i])
        return super().loss_lines()


class TF32ToggleWorkload(Workload):
    """The precision switches flipped mid-run, as training scripts flip them around phases
    (and libraries around calls): a small conv net on 16x16 images (two cuDNN convolutions,
    ReLU, a Linear from 4096 to 256 in float32, a 256-512-256 GELU MLP under bfloat16
    autocast, a 10-way head in float32), AdamW (foreach), with the switches set at the
    start of a step to one of six states, each kept for 4 to 12 steps (a seeded host
    random.Random picks the next state and how long): i, IEEE everywhere; t,
    torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 on; h,
    torch.set_float32_matmul_precision("high") with cuDNN's TF32 off; m, "medium" with
    allow_bf16_reduced_precision_reduction off (cuBLAS's bfloat16 GEMMs told not to reduce
    in reduced precision); n, torch.backends.cudnn.enabled off (PyTorch's own im2col
    convolutions and cuBLAS GEMMs instead of cuDNN's); x, TF32 on for the forward pass and
    IEEE for the backward (the switches flipped between loss and backward()). Every state
    calls set_float32_matmul_precision first (which sets the newer fp32_precision settings
    of CUDA and oneDNN matmuls with it), then only legacy switches of the same meaning, so
    the old and new settings never disagree (PyTorch 2.9 and later raise when they do). The
    same shapes are computed by other cuBLAS, cuBLASLt and cuDNN kernels (tensor-core TF32
    or FP32 ones, other cuDNN engines, planned for the first time mid-run) in an order the
    host RNG decides, and in the x state within one step. A tool that replays a step recorded under another state computes the
    step in another precision. The state ends every line (" p=i|t|h|m|n|x"). No sync in
    the loop."""

    batch, nout = 32, 10
    states = "ithmnx"

    def setup(self, mode="eager"):
        import random
        self.conv = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU())
        self.fc = nn.Linear(64 * 8 * 8, 256)
        self.mid = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256))
        self.head = nn.Linear(256, self.nout)
        self.model = nn.ModuleList([self.conv, self.fc, self.mid, self.head]).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_proj = torch.randn(48, self.nout, device=self.dev, generator=self.gen)   # 3 x 4 x 4 pooled
        self.rng = random.Random(3232)
        self.state, self.until = "i", 0
        self.states_at = {}

    def set_flags(self, tf32_mm, tf32_conv, legacy=False, medium=False, bf16_red=True, cudnn=True):
        # set_float32_matmul_precision first, every time: it sets the new API's CUDA and
        # oneDNN matmul precisions with the legacy one, so the legacy allow_tf32 setter after
        # it (the same meaning) leaves them consistent (PyTorch 2.9+ raises on reading a mix).
        torch.set_float32_matmul_precision("medium" if medium else "high" if tf32_mm else "highest")
        if legacy:
            torch.backends.cuda.matmul.allow_tf32 = tf32_mm
        torch.backends.cudnn.allow_tf32 = tf32_conv
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = bf16_red
        torch.backends.cudnn.enabled = cudnn

    def apply_state(self, s):
        if s == "i":
            self.set_flags(False, False, legacy=True)
        elif s in "tx":                                 # x: TF32 forward, IEEE backward (step())
            self.set_flags(True, True, legacy=True)
        elif s == "h":
            self.set_flags(True, False)
        elif s == "m":
            self.set_flags(True, False, medium=True, bf16_red=False)
        else:                                           # n
            self.set_flags(False, False, cudnn=False)

    def step(self, i):
        if i >= self.until:
            self.state = self.rng.choice([s for s in self.states if s != self.state])
            self.until = i + self.rng.randint(4, 12)
        self.apply_state(self.state)
        x = torch.randn(self.batch, 3, 16, 16, device=self.dev, generator=self.gen)
        y = (F.avg_pool2d(x, 4).flatten(1) @ self.label_proj).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        h = F.relu(self.fc(self.conv(x).flatten(1)))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = h + self.mid(h)
        loss = F.cross_entropy(self.head(h.float()), y)
        if self.state == "x":
            self.set_flags(False, False, legacy=True)
        loss.backward()
        self.opt.step()
        self.states_at[i] = self.state
        return loss

    def loss_lines(self):
        for i, s in self.states_at.items():
            self.extra[i] = "p=" + s
        return super().loss_lines()

    def finish(self):
        self.set_flags(False, False, legacy=True)       # as main() left them


class LateChangeWorkload(Workload):
    """Values a step passes to its kernels that stay the same for 110 steps or more and then
    change once, each at a step of its own, two of them back later: a bag-of-tokens
    classifier (nn.Embedding(2000, 64), its looked-up rows renormalised in place to a
    max_norm of 1.0 before each lookup, over 24 tokens a sample, summed and
    divided by sqrt(24), Linear 64-256, LeakyReLU, dropout, torch.roll over the features,
    Linear 256-256, LeakyReLU, a 10-way head), cross-entropy with label smoothing, an
    ignore_index and class weights that an EMA of the batch's inverse class frequencies
    updates in place after every backward, clip_grad_norm_ (foreach) and AdamW (foreach).
    Labels from a fixed token table summed over each bag. The changes: step 110 the
    LeakyReLU slope 0.01 to 0.02 (back at 200); 130 the dropout rate 0.1 to 0.2; 150 the
    max_norm 1.0 to 0.5 (a scalar of the renorm's kernels: torch.unique over the bag's
    tokens, row norms, an index_put_ of the scaled rows; nn.Embedding's own max_norm,
    embedding_renorm_, made two eager runs differ from step 0 on an H100, deterministic
    algorithms on, and is not used); 160 ignore_index -100 to 3 (an int64 argument of the NLL
    kernels and of the smoothing mask; back at 250); 170 label smoothing 0.05 to 0.1; 180
    the roll's shift 1 to 3 (the roll kernels' start offset); 190 the clipping norm 1.0 to
    0.25; 210 AdamW's weight decay 0.01 to 0.05; 220 the class weights moved to new storage
    (a clone, made while the old one is alive: the one pointer that moves among the step's
    persistent tensors); 240 torch.cuda.manual_seed(4242) (the dropout's Philox seed, the
    same kernel argument for 240 steps, and its offset from 0 again); 260 AdamW's beta1 0.9
    to 0.8. A tool that bakes into its graphs the arguments it saw stay the same while it
    learned, or matches a step to a graph recorded before a change, or after a change back,
    keeps training with the old value. The number of changes made so far and the largest
    norm among the batch's embedding rows after the renorm end every line
    (" c=<n> e=<hex>"). One sync a step, not of the script's making: with class weights and
    label smoothing, PyTorch's cross-entropy normalises the smoothing term by the weights
    of the targets it keeps, picked by masked_select, whose size it reads back (all 64
    targets but from step 160 to 249, when it is the number of labels other than 3, a size
    that changes every step)."""

    syncs = True
    batch, vocab, d, bag, hidden, nout = 64, 2000, 64, 24, 256, 10
    changes = ((110, "slope", 0.02), (130, "p", 0.2), (150, "max_norm", 0.5), (160, "ignore", 3),
               (170, "smooth", 0.1), (180, "shift", 3), (190, "clip", 0.25), (200, "slope", 0.01),
               (210, "wd", 0.05), (220, "cw", None), (240, "seed", 4242), (250, "ignore", -100),
               (260, "beta1", 0.8))

    def setup(self, mode="eager"):
        self.emb = nn.Embedding(self.vocab, self.d)
        self.max_norm = 1.0
        self.fc1, self.fc2 = nn.Linear(self.d, self.hidden), nn.Linear(self.hidden, self.hidden)
        self.head = nn.Linear(self.hidden, self.nout)
        self.model = nn.ModuleList([self.emb, self.fc1, self.fc2, self.head]).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-3, betas=(0.9, 0.999), weight_decay=0.01,
                                     foreach=True)
        self.truth = torch.randn(self.vocab, self.nout, device=self.dev, generator=self.gen)
        self.cw = torch.ones(self.nout, device=self.dev)
        self.classes = torch.arange(self.nout, device=self.dev)
        self.knobs = {"slope": 0.01, "p": 0.1, "ignore": -100, "smooth": 0.05, "shift": 1, "clip": 1.0}
        self.n_changes = 0
        self.e_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.counts = {}

    def change(self, what, v):
        if what == "max_norm":
            self.max_norm = v
        elif what in ("wd", "beta1"):
            for g in self.opt.param_groups:
                if what == "wd":
                    g["weight_decay"] = v
                else:
                    g["betas"] = (v, g["betas"][1])
        elif what == "cw":
            self.cw = self.cw.clone()         # new storage; the old block is freed after
        elif what == "seed":
            torch.cuda.manual_seed(v)
        else:
            self.knobs[what] = v
        self.n_changes += 1

    def step(self, i):
        for at, what, v in self.changes:
            if at == i:
                self.change(what, v)
        k = self.knobs
        tok = torch.randint(0, self.vocab, (self.batch, self.bag), device=self.dev, generator=self.gen)
        with torch.no_grad():
            y = F.embedding(tok, self.truth).sum(dim=1).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        with torch.no_grad():  # the looked-up rows renormalised in place to max_norm
            rows = torch.unique(tok)
            w = self.emb.weight
            w[rows] = w[rows] * (self.max_norm / (w[rows].norm(dim=1, keepdim=True) + 1e-7)).clamp(max=1.0)
        e = self.emb(tok)
        h = F.leaky_relu(self.fc1(e.sum(dim=1) / math.sqrt(self.bag)), k["slope"])
        h = torch.roll(F.dropout(h, p=k["p"], training=True), shifts=k["shift"], dims=1)
        h = F.leaky_relu(self.fc2(h), k["slope"])
        loss = F.cross_entropy(self.head(h), y, weight=self.cw, ignore_index=k["ignore"],
                               label_smoothing=k["smooth"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), k["clip"], foreach=True)
        self.opt.step()
        with torch.no_grad():
            freq = (y[:, None] == self.classes).float().mean(dim=0)
            inv = 1.0 / (freq + 0.02)
            self.cw.mul_(0.9).add_(inv / inv.mean(), alpha=0.1)
        self.e_buf[i].copy_(e.detach().norm(dim=-1).amax())
        self.counts[i] = self.n_changes
        return loss

    def loss_lines(self):
        e = tensor_hexes(self.e_buf)
        for i, n in self.counts.items():
            self.extra[i] = "c=%d e=%s" % (n, e[i])
        return super().loss_lines()


# --------------------------------------------------------------------------- ninth red-team round
# Patterns the rounds before leave out, each chosen for what a tool that holds launches back
# and replays them as graphs could get wrong: an ensemble trained as one vmapped model
# (torch.func over stacked parameters, dropout with randomness="different") whose worst
# members are overwritten by the best at member indices read back (population-based
# training); autograd's anomaly mode switched on for windows of steps (a NaN check read back
# after every backward node, from the autograd thread) with NaN and inf injected into a
# gradient by a tensor hook, so that backward raises half-way and the loop catches it, under
# a loss scale kept by hand; kernel scalars that change only in bits that an equality test on
# values ignores (+0.0 and -0.0, one ulp, the high word of an int64 and of a Philox seed);
# custom autograd Functions that modify their input in place (mark_dirty), branch on
# needs_input_grad while layers are frozen in a rhythm and take None gradients
# (set_materialize_grads(False)), under saved-tensor hooks that compress what autograd saves
# with a scale that changes every step; and views at host-chosen offsets and strides into
# persistent buffers (interior pointers whose alignment changes every step, strides that
# live in kernels' by-value structs, device-to-device copies to unaligned addresses).

class EnsembleWorkload(TaskWorkload):
    """Population-based training of an ensemble trained as one model with torch.func, as
    ensembling and PBT scripts do it: 8 MLPs (256-256-256-10, ReLU, dropout 0.1) stacked by
    torch.func.stack_module_state into one leaf tensor per parameter ([8, ...]), run by
    vmap(functional_call) over a meta-device copy of the model with randomness="different"
    (each member's dropout mask differs: one Philox draw over the stacked activations), every
    member on a batch of its own ([8, 64, 256] drawn at once; labels from a fixed projection),
    a label-smoothed soft-target cross-entropy written out (log_softmax times targets made by
    comparison, so no nll_loss or scatter under vmap); the vmapped linear layers are batched
    GEMMs and backward runs through autograd over them. Each member has its own learning rate,
    an [8] CUDA tensor that scales its gradients (broadcast) before SGD (Nesterov momentum,
    foreach, lr 1). Every 25th step (at step 24 of 25) the members' losses are read back with
    .tolist() (a sync), ranked on the host, and the two worst members are overwritten by the
    two best (exploit): each stacked parameter's and each momentum buffer's slice [dst]
    copied from [src], device-to-device copies at interior offsets that the losses pick, and
    the learning rate at [dst] set by fill_ on that element to the source's times 0.8 or 1.25
    from a seeded host random.Random (explore). Every 10th step the ensemble is evaluated in
    eval mode under no_grad (vmap with the held-out batch shared: in_dims None), the mean of
    the members' logits scored. A tool that replays a step recorded with other member indices
    copies the wrong slices; one that replays the random draw of another step gives members
    other masks. The replacements end the line of every exploit step (" x=<dst><<src>,...")
    and the ensemble's eval loss every 10th (" ev=<hex>"). One sync every 25 steps."""

    members, hidden, smooth = 8, 256, 0.1
    exploit_every, n_replace = 25, 2
    lr0, lr_min, lr_max, momentum = 0.05, 0.005, 0.2, 0.9

    def setup(self, mode="eager"):
        import copy
        import random
        from torch.func import functional_call, stack_module_state, vmap
        E = self.members
        nets = [MLP(self.din, self.hidden, self.nout, layers=3, dropout=0.1).to(self.dev) for _ in range(E)]
        self.pdict, self.bdict = stack_module_state(nets)   # leaves [E, ...]; no buffers
        self.params = list(self.pdict.values())
        self.skel = copy.deepcopy(nets[0]).to("meta")
        skel = self.skel

        def member_loss(p, b, x, t):
            logp = F.log_softmax(functional_call(skel, (p, b), (x,)), dim=-1)
            return -(logp * t).sum(dim=-1).mean()

        def member_logits(p, b, x):
            return functional_call(skel, (p, b), (x,))

        self.train_fn = vmap(member_loss, in_dims=(0, 0, 0, 0), randomness="different")
        self.eval_fn = vmap(member_logits, in_dims=(0, 0, None))
        self.opt = torch.optim.SGD(self.params, lr=1.0, momentum=self.momentum, nesterov=True, foreach=True)
        self.rng = random.Random(5150)
        self.lr_host = [self.lr0 * (0.5 + e / (E - 1)) for e in range(E)]
        self.lrs = torch.tensor(self.lr_host, dtype=torch.float32, device=self.dev)
        self.label_setup()
        self.classes = torch.arange(self.nout, device=self.dev)
        self.ev_x = torch.randn(256, self.din, device=self.dev, generator=self.gen)
        self.ev_y = (self.ev_x @ self.label_proj).argmax(dim=-1)
        self.ev_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.notes = {}

    def exploit(self, losses):
        ls = losses.tolist()                                           # the sync
        order = sorted(range(self.members), key=lambda e: (ls[e], e))
        pairs = list(zip(order[::-1][:self.n_replace], order[:self.n_replace]))   # (worst, best)
        with torch.no_grad():
            for dst, src in pairs:
                for p in self.params:
                    p[dst].copy_(p[src])
                    buf = self.opt.state[p].get("momentum_buffer")
                    if buf is not None:
                        buf[dst].copy_(buf[src])
                lr = self.lr_host[src] * self.rng.choice((0.8, 1.25))
                self.lr_host[dst] = min(self.lr_max, max(self.lr_min, lr))
                self.lrs[dst].fill_(self.lr_host[dst])
        return "x=" + ",".join("%d<%d" % pr for pr in pairs)

    def step(self, i):
        E, B = self.members, self.batch
        x = torch.randn(E, B, self.din, device=self.dev, generator=self.gen)
        y = (x @ self.label_proj).argmax(dim=-1)
        t = (y.unsqueeze(-1) == self.classes).float() * (1.0 - self.smooth) + self.smooth / self.nout
        self.opt.zero_grad(set_to_none=True)
        losses = self.train_fn(self.pdict, self.bdict, x, t)      # [E]
        losses.sum().backward()
        with torch.no_grad():
            for p in self.params:
                p.grad.mul_(self.lrs.view((E,) + (1,) * (p.dim() - 1)))
        self.opt.step()
        notes = []
        if i % self.exploit_every == self.exploit_every - 1:
            notes.append(self.exploit(losses.detach()))
        if i % 10 == 0:
            with torch.no_grad():
                self.skel.eval()
                logits = self.eval_fn(self.pdict, self.bdict, self.ev_x)
                self.skel.train()
                self.ev_buf[i].copy_(F.cross_entropy(logits.mean(dim=0), self.ev_y))
            notes.append("ev")
        self.notes[i] = notes
        return losses.detach().mean()

    def loss_lines(self):
        ev = tensor_hexes(self.ev_buf)
        for i, notes in self.notes.items():
            parts = [("ev=" + ev[i]) if n == "ev" else n for n in notes]
            if parts:
                self.extra[i] = " ".join(parts)
        return super().loss_lines()


class AnomalyWorkload(TaskWorkload):
    """Autograd's anomaly mode switched on for windows of steps, as one debugs a run whose
    loss went NaN, with NaN and inf injected into a gradient and a loss scale kept by hand
    (no GradScaler): the MLP (6 layers, 512 wide, dropout 0.1) with a tensor hook
    (register_hook, run on the autograd thread) on the output of its third Linear that
    multiplies the gradient by a host float: 1.0, or on about 10 % of the steps from step 8 on
    (a seeded host random.Random) NaN or inf (inf times the exact zeros ReLU and dropout leave
    in the gradient makes NaN too). The loss is multiplied by the scale (a power of two, a
    host float, starting at 2**12) before backward. Steps 70-109 and 190-224 run forward and
    backward under torch.autograd.detect_anomaly(check_nan=True): the engine checks every
    backward node's outputs with isnan().any() read back (a sync from the autograd thread
    after each node), so on an injected step the node after the hook (the third Linear's
    AddmmBackward0) raises "returned nan values" half-way through backward, after the upper
    layers' gradients were accumulated and the rest of backward's launches never come; the loop
    catches the RuntimeError, drops the gradients and halves the scale ("a"). Outside the
    windows backward finishes; the gradients are unscaled by _foreach_mul_ with 1/scale, their
    norms (_foreach_norm) stacked and torch.isfinite(...).all() read back with .item(): not
    finite, the step is skipped and the scale halved ("k"); finite, clip_grad_norm_ (foreach)
    and AdamW (foreach) step ("s"), and after 15 such steps in a row the scale doubles
    (clamped to [2**-4, 2**20]). A tool that holds launches back must have issued everything
    before each NaN check and must not replay, after an aborted backward, the part of it that
    never ran; one that replays a step recorded with another scale, or with the hook's 1.0
    where it was NaN (NaN compares unequal to itself), trains on other gradients. The
    outcome, the injection, whether anomaly mode was on and the scale after the step end every
    line (" r=s|k|a j=-|n|i w=0|1 s=<hex>"). A sync every step (the finiteness), more inside
    the windows."""

    syncs = True
    hidden = 512
    windows = ((70, 110), (190, 225))
    p_bad, first_bad = 0.1, 8
    scale0, growth_every, scale_min, scale_max = 2.0 ** 12, 15, 2.0 ** -4, 2.0 ** 20

    def setup(self, mode="eager"):
        import random
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.rng = random.Random(4711)
        self.scale, self.good = self.scale0, 0
        self.gmul = 1.0
        self.outcomes = {}

    def grad_hook(self, g):
        return g * self.gmul

    def step(self, i):
        import contextlib
        import warnings
        x, y = self.batch_for(i)
        kind = "-"
        if i >= self.first_bad and self.rng.random() < self.p_bad:
            kind = self.rng.choice("ni")
        self.gmul = {"-": 1.0, "n": float("nan"), "i": float("inf")}[kind]
        watch = any(a <= i < b for a, b in self.windows)
        self.opt.zero_grad(set_to_none=True)
        outcome = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # anomaly mode's own warnings and tracebacks
            guard = torch.autograd.detect_anomaly(check_nan=True) if watch else contextlib.nullcontext()
            with guard:
                net = self.model.net
                h = net[:7](x)                  # up to and with the third Linear
                h.register_hook(self.grad_hook)
                loss = F.cross_entropy(net[7:](h), y)
                try:
                    (loss * self.scale).backward()
                except RuntimeError as e:
                    if not watch or "returned nan values" not in str(e):
                        raise
                    outcome = "a"
        if outcome is None:
            grads = [p.grad for p in self.params]
            torch._foreach_mul_(grads, 1.0 / self.scale)
            finite = bool(torch.isfinite(torch.stack(torch._foreach_norm(grads))).all().item())
            outcome = "s" if finite else "k"
        if outcome == "s":
            torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
            self.opt.step()
            self.good += 1
            if self.good == self.growth_every:
                self.scale, self.good = min(self.scale * 2.0, self.scale_max), 0
        else:
            self.opt.zero_grad(set_to_none=True)
            self.scale, self.good = max(self.scale * 0.5, self.scale_min), 0
        self.outcomes[i] = "r=%s j=%s w=%d s=%s" % (outcome, kind, int(watch), f32_hex(self.scale))
        return loss.detach()

    def loss_lines(self):
        for i, o in self.outcomes.items():
            self.extra[i] = o
        return super().loss_lines()


class SignBitsWorkload(Workload):
    """Kernel arguments that change only in bits an equality test on values ignores, or that
    a 32-bit comparison misses: a classifier over 128 dense features and a bag of 16 hashed
    token ids (nn.Embedding(4093, 32) over (id * 2654435761 + salt) % 4093, int64, mean over
    the bag; labels from a fixed projection of the features plus a fixed table of the raw
    ids), Linear 160-256, clamped from below, a fixed offset of +0.05 or -0.05 by the sign
    bit of each clamped value (torch.signbit), a keep mask from a CUDA generator of its own
    (torch.rand(generator=...) < 0.9, divided by 0.9), Linear 256-256, ReLU, a 10-way head
    whose logits are multiplied by a temperature, cross-entropy, AdamW (foreach). The values:
    the clamp's lower bound is 0.0 or -0.0 (a scalar argument of the clamp kernel, the same
    value to ==, other bits; the clamped entries then carry that sign, which the signbit
    offset turns into +0.05 or -0.05), switched every 3 to 15 steps; the temperature 1.0 or
    the next float32 above it (1 + 2**-23, a scalar one ulp away), switched every 4 to 20
    steps; the hash's salt 0x2545F491 plus k * 2**32 for k among 0, 1, 2, 5 (an int64 scalar of
    the add kernel whose low 32 bits never change, while the remainder by 4093 changes every
    bucket), switched every 8 to 30 steps; and the keep mask's generator re-seeded every 20
    steps with 0x5EED plus k * 2**32, k cycling through 0, 1, 0, 3, 2**30, 1 (the Philox seed
    in the kernels' by-value PhiloxCudaState changes in its high word only, which Philox
    uses as the second key word, its offset goes back to 0 at each re-seed, and every block
    of 20 steps seeded with k = 0, at steps 0, 40, 120, 160, 240 and 280, draws the same
    masks, as do those with k = 1).
    Run lengths and choices come from a seeded host random.Random. A tool that compares
    kernel arguments as numbers (-0.0 == 0.0), with a tolerance, or in 32-bit words, replays
    a step recorded with the other value and trains on other activations. The state ends
    every line (" z=+|- t=0|1 s=<k> g=<k>"). No sync in the loop."""

    batch, din, vocab, buckets, d_emb, bag, hidden, nout = 64, 128, 5000, 4093, 32, 16, 256, 10
    salt_lo, seed_lo = 0x2545F491, 0x5EED
    salt_ks = (0, 1, 2, 5)
    seed_ks = (0, 1, 0, 3, 1 << 30, 1)
    reseed_every, keep = 20, 0.9

    def setup(self, mode="eager"):
        import random
        import struct
        self.tau_up = struct.unpack("<f", struct.pack("<I", 0x3F800001))[0]   # 1 + 2**-23
        self.emb = nn.Embedding(self.buckets, self.d_emb)
        self.fc1 = nn.Linear(self.din + self.d_emb, self.hidden)
        self.fc2 = nn.Linear(self.hidden, self.hidden)
        self.head = nn.Linear(self.hidden, self.nout)
        self.model = nn.ModuleList([self.emb, self.fc1, self.fc2, self.head]).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.proj = torch.randn(self.din, self.nout, device=self.dev, generator=self.gen)
        self.tok_tab = torch.randn(self.vocab, self.nout, device=self.dev, generator=self.gen) * 0.25
        self.noise_gen = torch.Generator(device=self.dev)
        self.rng = random.Random(2323)
        self.zneg, self.tau1, self.salt_k, self.seed_k = False, False, 0, 0
        self.z_until = self.t_until = self.s_until = 0
        self.states = {}

    def step(self, i):
        r = self.rng
        if i >= self.z_until:
            if i:
                self.zneg = not self.zneg
            self.z_until = i + r.randint(3, 15)
        if i >= self.t_until:
            if i:
                self.tau1 = not self.tau1
            self.t_until = i + r.randint(4, 20)
        if i >= self.s_until:
            if i:
                self.salt_k = r.choice([k for k in self.salt_ks if k != self.salt_k])
            self.s_until = i + r.randint(8, 30)
        if i % self.reseed_every == 0:
            self.seed_k = self.seed_ks[(i // self.reseed_every) % len(self.seed_ks)]
            self.noise_gen.manual_seed(self.seed_lo + (self.seed_k << 32))
        z = -0.0 if self.zneg else 0.0
        tau = self.tau_up if self.tau1 else 1.0
        salt = self.salt_lo + (self.salt_k << 32)
        x = torch.randn(self.batch, self.din, device=self.dev, generator=self.gen)
        tok = torch.randint(0, self.vocab, (self.batch, self.bag), device=self.dev, generator=self.gen)
        with torch.no_grad():
            y = (x @ self.proj + F.embedding(tok, self.tok_tab).sum(dim=1)).argmax(dim=-1)
        hashed = (tok * 2654435761 + salt) % self.buckets
        self.opt.zero_grad(set_to_none=True)
        e = self.emb(hashed).mean(dim=1)
        h = torch.clamp(self.fc1(torch.cat([x, e], dim=1)), min=z)
        h = h + 0.05 * (1.0 - 2.0 * torch.signbit(h).float())
        keep = torch.rand(h.shape, device=self.dev, generator=self.noise_gen) < self.keep
        h = F.relu(self.fc2(h * keep / self.keep))
        loss = F.cross_entropy(self.head(h) * tau, y)
        loss.backward()
        self.opt.step()
        self.states[i] = "z=%s t=%d s=%d g=%d" % ("-" if self.zneg else "+", int(self.tau1), self.salt_k,
                                                  self.seed_k)
        return loss

    def loss_lines(self):
        for i, s in self.states.items():
            self.extra[i] = s
        return super().loss_lines()


class DirtyFnWorkload(TaskWorkload):
    """Custom autograd Functions with the parts of the API the other cases leave out, under
    saved-tensor hooks, as memory-saving and fused-layer code writes them: each of the MLP's
    two hidden layers (256 to 512, 512 to 512; a 10-way head) is a GatedLinearFn (F.linear
    times sigmoid(gate), a learnable per-feature gate; two outputs, the gated one and the
    pre-gate one, with ctx.set_materialize_grads(False) so that backward gets None for the
    pre-gate output on the steps that do not use it, and ctx.needs_input_grad deciding
    which of the input, weight, bias and gate gradients backward computes) followed by an
    InPlaceLeakyFn (F.leaky_relu_ on its input, ctx.mark_dirty, the output saved and
    backward by aten.leaky_relu_backward with self_is_result, as in-place activations save
    memory) whose slope is a host float that changes every step (a cosine between 0.02 and
    0.10). The layers are frozen in a rhythm: every 10 steps a layer's weight, bias and gate
    get requires_grad_(False) or back (the first layer on 10 steps of 30, the second on
    another 10), so backward skips those gradients (the first layer's Function then has no
    input needing a gradient at all, and the activation after it none either) and AdamW
    (foreach, grads set to None) steps other tensor lists. Forward runs under
    torch.autograd.graph.saved_tensors_hooks whose pack hook stores every saved float32
    [64, N] tensor (inputs, pre-gate activations, the dirty outputs, the head's input, the
    log-probabilities) as bfloat16 times a scale, 1 + 0.25 sin(0.37 step), and whose unpack
    hook divides by it again (a host float in the pack and unpack kernels, new every step);
    every third step adds 1e-4 times the second layer's mean squared pre-gate activation to
    the loss. The first activation's gradient is multiplied by 1 + 0.5 cos(step / 7) by a
    tensor hook (on the autograd thread), the second's is kept by retain_grad(), and
    register_multi_grad_hook(mode="all") over both writes the sum of their norms into a GPU
    buffer at the step's index from the autograd thread. A tool that replays a backward
    recorded with other layers frozen, another slope, pack scale or hook factor, or without
    the auxiliary term's gradient, computes other gradients. The frozen layers, the
    auxiliary term, the retained gradient's norm and the multi-grad hook's sum end every line
    (" f=<bits> a=0|1 r=<hex> m=<hex>"). No sync in the loop."""

    hidden = 512
    freeze_every, aux_every = 10, 3

    def setup(self, mode="eager"):
        class GatedLinearFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w, b, gate):
                ctx.set_materialize_grads(False)
                pre = F.linear(x, w, b)
                out = pre * gate
                ctx.save_for_backward(x, w, gate, pre)
                return out, pre

            @staticmethod
            def backward(ctx, g_out, g_pre):
                x, w, gate, pre = ctx.saved_tensors
                gx = gw = gb = gg = None
                g = None
                if g_out is not None:
                    g = g_out * gate
                    if ctx.needs_input_grad[3]:
                        gg = (g_out * pre).sum(dim=0)
                if g_pre is not None:
                    g = g_pre if g is None else g + g_pre
                if g is None:
                    return None, None, None, None
                if ctx.needs_input_grad[0]:
                    gx = g @ w
                if ctx.needs_input_grad[1]:
                    gw = g.t() @ x
                if ctx.needs_input_grad[2]:
                    gb = g.sum(dim=0)
                return gx, gw, gb, gg

        class InPlaceLeakyFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, slope):
                F.leaky_relu_(x, slope)
                ctx.mark_dirty(x)
                ctx.save_for_backward(x)
                ctx.slope = slope
                return x

            @staticmethod
            def backward(ctx, g):
                y, = ctx.saved_tensors
                return torch.ops.aten.leaky_relu_backward(g, y, ctx.slope, True), None

        self.gated, self.leaky = GatedLinearFn, InPlaceLeakyFn
        h = self.hidden
        self.fc1, self.fc2, self.head = nn.Linear(self.din, h), nn.Linear(h, h), nn.Linear(h, self.nout)
        self.model = nn.ModuleList([self.fc1, self.fc2, self.head]).to(self.dev)
        self.gate1 = nn.Parameter(torch.zeros(h, device=self.dev))
        self.gate2 = nn.Parameter(torch.zeros(h, device=self.dev))
        self.layers = ((self.fc1, self.gate1), (self.fc2, self.gate2))
        self.opt = torch.optim.AdamW(list(self.model.parameters()) + [self.gate1, self.gate2], lr=1e-3,
                                     weight_decay=0.01, foreach=True)
        self.label_setup()
        self.pack_scale = 1.0
        self.r_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.m_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.notes = {}

    def pack(self, t):
        if t.dtype == torch.float32 and t.dim() == 2 and t.shape[0] == self.batch:
            s = self.pack_scale
            with torch.no_grad():
                return (s, (t.detach() * s).to(torch.bfloat16))
        return (None, t)

    def unpack(self, packed):
        s, t = packed
        return t if s is None else t.float() / s

    def multi_hook(self, i):
        def fn(grads):
            with torch.no_grad():
                self.m_buf[i].copy_(torch.stack([g.norm() for g in grads if g is not None]).sum())
        return fn

    def step(self, i):
        x, y = self.batch_for(i)
        k = i // self.freeze_every
        frozen = [(k + l) % 3 == 0 for l in range(2)]
        for (fc, gate), fz in zip(self.layers, frozen):
            for p in (fc.weight, fc.bias, gate):
                p.requires_grad_(not fz)
        slope = 0.02 + 0.04 * (1.0 + math.cos(i / 9.0))
        gs = 1.0 + 0.5 * math.cos(i / 7.0)
        self.pack_scale = 1.0 + 0.25 * math.sin(0.37 * i)
        aux = i % self.aux_every == 0
        self.opt.zero_grad(set_to_none=True)
        with torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack):
            out1, _ = self.gated.apply(x, self.fc1.weight, self.fc1.bias, torch.sigmoid(self.gate1))
            h1 = self.leaky.apply(out1, slope)
            out2, pre2 = self.gated.apply(h1, self.fc2.weight, self.fc2.bias, torch.sigmoid(self.gate2))
            h2 = self.leaky.apply(out2, slope)
            loss = F.cross_entropy(self.head(h2), y)
            if aux:
                loss = loss + 1e-4 * pre2.pow(2).mean()
        if h1.requires_grad:
            h1.register_hook(lambda g: g * gs)
        h2.retain_grad()
        tracked = tuple(t for t in (h1, h2) if t.requires_grad)
        torch.autograd.graph.register_multi_grad_hook(tracked, self.multi_hook(i), mode="all")
        loss.backward()
        self.opt.step()
        self.r_buf[i].copy_(h2.grad.norm())
        self.notes[i] = "f=%d%d a=%d" % (int(frozen[0]), int(frozen[1]), int(aux))
        return loss.detach()

    def loss_lines(self):
        r, m = tensor_hexes(self.r_buf), tensor_hexes(self.m_buf)
        for i, n in self.notes.items():
            self.extra[i] = "%s r=%s m=%s" % (n, r[i], m[i])
        return super().loss_lines()


class OffsetViewWorkload(TaskWorkload):
    """Views at host-chosen offsets and strides into persistent buffers, as loops that read
    a GPU-resident stream in windows do: every step a seeded host random.Random picks a row
    stride s among 256 (the feature width), 257, 259, 253, 131 and 512 and an offset o
    anywhere in a 4 MiB float32 stream, and the batch is feats.as_strided((64, 256), (s, 1),
    o): a contiguous view (s = 256) whose address is 16-byte aligned only when o is a
    multiple of 4, or rows that overlap (s < 256) or leave gaps; its labels come from a fixed projection of it (a
    cuBLAS GEMM straight on the view where the stride allows, with an odd leading dimension
    and an unaligned pointer, else after a copy kernel whose strides are by-value kernel
    arguments). The model: LayerNorm on the view (PyTorch's vectorised one-kernel path
    where the address allows, its two-kernel path where it does not, a strided copy first
    when the view is not contiguous), Linear 256-512 plus a 512-slice of a learnable 8192
    bias bank at an offset picked every step (an interior pointer into a parameter, whose
    gradient is a slice_backward into a fresh zeroed 8192 buffer), GELU, plus a projected
    mean embedding of 64 x 8 token ids viewed from an int64 token stream at a picked offset;
    Linear 512-512, ReLU, a 10-way head; cross-entropy plus 0.01 times the mean squared
    distance of the 512-wide activation to a window of a 1 MiB float32 memory at a picked
    offset, and after the optimizer step the activation is written into that memory at
    another picked offset (a device-to-device copy to an address of any alignment, read by a
    later step's window). AdamW (foreach). A tool that patches a pointer into a node recorded
    for a kernel chosen for another alignment, or keeps the strides of another step's copy,
    or replays a copy to the memory at an old offset, reads and writes the wrong elements.
    The step's offsets and stride end every line (" o=<n> s=<n> b=<n> t=<n> m=<n> w=<n>").
    No sync in the loop."""

    hidden, d_tok, vocab, bag = 512, 64, 1000, 8
    n_feats, n_bank, n_mem, n_toks = 1 << 20, 8192, 1 << 18, 1 << 16
    strides = (256, 257, 259, 253, 131, 512)

    def setup(self, mode="eager"):
        import random
        D, H = self.din, self.hidden
        self.ln = nn.LayerNorm(D)
        self.fc1, self.fc2, self.head = nn.Linear(D, H), nn.Linear(H, H), nn.Linear(H, self.nout)
        self.emb = nn.Embedding(self.vocab, self.d_tok)
        self.ftok = nn.Linear(self.d_tok, H)
        self.model = nn.ModuleList([self.ln, self.fc1, self.fc2, self.head, self.emb, self.ftok]).to(self.dev)
        self.bank = nn.Parameter(torch.zeros(self.n_bank, device=self.dev))
        self.opt = torch.optim.AdamW(list(self.model.parameters()) + [self.bank], lr=1e-3, weight_decay=0.01,
                                     foreach=True)
        self.label_setup()
        self.feats = torch.randn(self.n_feats, device=self.dev, generator=self.gen)
        self.toks = torch.randint(0, self.vocab, (self.n_toks,), device=self.dev, generator=self.gen)
        self.mem = torch.zeros(self.n_mem, device=self.dev)
        self.rng = random.Random(9091)
        self.offs = {}

    def step(self, i):
        r = self.rng
        B, D, H, T = self.batch, self.din, self.hidden, self.bag
        s = r.choice(self.strides)
        o = r.randrange(0, self.n_feats - (B - 1) * s - D + 1)
        ob = r.randrange(0, self.n_bank - H + 1)
        ot = r.randrange(0, self.n_toks - B * T + 1)
        om = r.randrange(0, self.n_mem - B * H + 1)
        ow = r.randrange(0, self.n_mem - B * H + 1)
        x = self.feats.as_strided((B, D), (s, 1), o)
        y = (x @ self.label_proj).argmax(dim=-1)
        tok = self.toks[ot:ot + B * T].view(B, T)
        past = self.mem[om:om + B * H].view(B, H)
        self.opt.zero_grad(set_to_none=True)
        h1 = F.gelu(self.fc1(self.ln(x)) + self.bank[ob:ob + H])
        h1 = h1 + self.ftok(self.emb(tok).mean(dim=1))
        loss = F.cross_entropy(self.head(F.relu(self.fc2(h1))), y) + 0.01 * F.mse_loss(h1, past)
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            self.mem[ow:ow + B * H].copy_(h1.detach().reshape(-1))
        self.offs[i] = "o=%d s=%d b=%d t=%d m=%d w=%d" % (o, s, ob, ot, om, ow)
        return loss.detach()

    def loss_lines(self):
        for i, s in self.offs.items():
            self.extra[i] = s
        return super().loss_lines()


# --------------------------------------------------------------------------- tenth red-team round
# Patterns the rounds before leave out, each chosen for what a tool that holds launches back
# and replays them as graphs could get wrong: device-to-device copies of odd byte lengths to
# odd addresses issued on two streams at once into one buffer, each copy's first and last
# bytes sharing machine words with bytes the other stream writes at the same moment (a copy
# done as wider stores, or as a read-modify-write of the edge words, loses the other
# stream's bytes); a data prefetcher on a stream that never waits for the compute stream,
# and a teacher stream forked from and joined back into the compute stream, whose work after
# the join (a copy from pinned memory over a buffer the forked part read, more kernels)
# is ordered after the forked part by stream order alone, joined by an event recorded in
# the middle of the forked part on some runs of steps; three models on three streams
# in an order a host RNG picks, exchanging features through double-buffered publications
# whose event waits bind to records of the step before; pinned host memory used as CUDA
# tensors (zero-copy: kernels read inputs and a weight straight from host memory and
# write results into it, the host rewrites it after an event says its readers are done,
# and spins on a flag a kernel writes, with no CUDA call); and Triton's autotuner timing
# its configurations mid-run whenever a new batch size comes (timing events, a 256 MB
# cache flush, the argument cloned and restored around every timed launch, synchronize
# from the autograd thread), the kernels' results the same whichever configuration wins.

class OddBytesWorkload(TaskWorkload):
    """Byte-granular device-to-device copies on two streams into one buffer, as loaders that
    assemble packed or quantised records do: the batch is 64 rows of 256 uint8 features,
    one 16 KiB buffer P, cut once (a seeded host random.Random) into about 100 segments of
    1 to 320 bytes, so nearly every boundary falls inside a machine word. Every step two
    side streams forked from the compute stream (wait_stream) fill the segments in turn,
    issued interleaved (segment k on stream k % 2): P[a:a+L].copy_(src[o:o+L]) from a 1 MiB
    bank of random bytes at an offset o the host draws anew every step (a cudaMemcpyAsync of
    L bytes from and to addresses of any alignment; graft holds such copies as copy kernels
    of its own), every third segment of the second stream written instead by an
    elementwise kernel (bitwise_xor of the source with 0x5A, out= the segment). The two
    streams write disjoint bytes, so eagerly the result does not depend on how their work
    interleaves; but each boundary word is written by both at about the same moment. The
    compute stream joins both, then overwrites 8 short runs (1 to 7 bytes) at host-drawn
    positions by more copies, sums P's bytes weighted by a fixed int64 vector (a checksum
    on the GPU), and trains the MLP on (P - 127.5) / 73.9 with labels from a fixed
    projection of it; AdamW (foreach). A copy that writes a byte outside [a, a+L) (a wider
    store, or a read-modify-write of an edge word racing the other stream's write of its
    neighbour) changes P. The checksum ends every line (" c=<n>"). No sync in the loop."""

    nbank, min_len, max_len = 1 << 20, 1, 320
    patch_lens = (1, 2, 3, 5, 7, 1, 3, 2)

    def setup(self, mode="eager"):
        import random
        B, D = self.batch, self.din
        self.model = MLP(D, self.hidden, self.nout, layers=4).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.n = B * D
        self.bank = torch.randint(0, 256, (self.nbank,), dtype=torch.uint8, device=self.dev, generator=self.gen)
        self.P = torch.zeros(self.n, dtype=torch.uint8, device=self.dev)
        self.mix = torch.randint(1, 1 << 20, (self.n,), dtype=torch.int64, device=self.dev, generator=self.gen)
        self.ck = torch.zeros(self.steps, dtype=torch.int64, device=self.dev)
        layout = random.Random(2718)
        self.segs, pos = [], 0
        while pos < self.n:
            L = min(layout.randint(self.min_len, self.max_len), self.n - pos)
            self.segs.append((pos, L))
            pos += L
        self.side = (torch.cuda.Stream(), torch.cuda.Stream())
        self.rng = random.Random(1618)

    def step(self, i):
        main = torch.cuda.current_stream()
        B, D = self.batch, self.din
        r = self.rng
        for s in self.side:
            s.wait_stream(main)
        for k, (a, L) in enumerate(self.segs):
            o = r.randrange(0, self.nbank - L + 1)
            with torch.cuda.stream(self.side[k % 2]):
                if k % 6 == 5:
                    torch.bitwise_xor(self.bank[o:o + L], 0x5A, out=self.P[a:a + L])
                else:
                    self.P[a:a + L].copy_(self.bank[o:o + L])
        for s in self.side:
            main.wait_stream(s)
        for L in self.patch_lens:
            q = r.randrange(0, self.n - L + 1)
            o = r.randrange(0, self.nbank - L + 1)
            self.P[q:q + L].copy_(self.bank[o:o + L])
        self.ck[i].copy_((self.P.long() * self.mix).sum())
        x = (self.P.view(B, D).float() - 127.5) * (1.0 / 73.9)
        y = (x @ self.label_proj).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss

    def loss_lines(self):
        for i, c in enumerate(self.ck.tolist()):
            self.extra[i] = "c=%d" % c
        return super().loss_lines()


class PrefetchWorkload(TaskWorkload):
    """A data prefetcher and a teacher on two side streams, ordered by stream order where
    scripts rely on it: the prefetcher (apex's data_prefetcher) copies the next batch from
    one of 16 pinned host batches to the GPU on a loader stream that never waits for the
    compute stream (non_blocking, then normalised and labelled by a fixed projection
    there); the compute stream waits for the loader (wait_stream), takes the batch with
    record_stream and starts the next prefetch at once. The teacher (a frozen MLP) runs on a
    teacher stream forked from the compute stream (wait_stream): it copies the batch into a
    persistent input buffer, writes its logits into a persistent buffer, records an event,
    and then updates a persistent running mean of its logits. The compute stream runs the
    student, joins the teacher either fully (wait_stream) or only at the event in the middle
    (wait_event: the running mean's update is left running beside the student, which then
    leaves it alone), adds a KL term to the teacher's logits and, when fully joined, a term
    pulling the student's mean logits to the running mean; backward, AdamW (foreach). After
    the compute stream's optimizer step the teacher stream gets more work with no new fork:
    a probe batch copied over the teacher's input buffer, from pinned memory (a host-memory
    copy: eager under graft, which splits segments) or from the GPU, the teacher run on it
    and its mean square logit written to a per-step buffer; or no such tail. That copy may
    overwrite the buffer only after the teacher's forward of the same step read it, an order
    only the teacher stream's own order gives. The join (f, p) and the tail (h, d, -) change
    together every 4 to 12 steps (a seeded host random.Random), so each pattern repeats long
    enough to be graphed. A tool that launches the forked part on the compute stream
    without holding the teacher stream behind it lets the tail's copy overtake the forward
    that reads the buffer (the student trains on the wrong logits), or the running mean's
    update race the next step's fork. The join, the tail and the probe end every line
    (" j=f|p t=h<k>|d<k>|- p=<hex>"). No sync in the loop."""

    nslots, nprobe = 16, 4
    run_min, run_max = 4, 12

    def setup(self, mode="eager"):
        import random
        B, D = self.batch, self.din
        self.model = MLP(D, self.hidden, self.nout, layers=4).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.teacher = MLP(D, self.hidden, self.nout, layers=3).to(self.dev)
        self.teacher.requires_grad_(False)
        self.teacher.eval()
        self.label_setup()
        g = torch.Generator().manual_seed(2024)
        xs = torch.randn(self.nslots, B, D, generator=g) * 1.5 + 0.25
        self.xs = xs.pin_memory()
        self.px = torch.randn(self.nprobe, B, D, generator=g).pin_memory()
        self.px_dev = self.px.to(self.dev)
        self.mean = xs.mean(dim=(0, 1)).to(self.dev)
        self.std = xs.std(dim=(0, 1)).to(self.dev)
        self.loader, self.tstream = torch.cuda.Stream(), torch.cuda.Stream()
        self.tin = torch.zeros(B, D, device=self.dev)
        self.tout = torch.zeros(B, self.nout, device=self.dev)
        self.tstat = torch.zeros(self.nout, device=self.dev)
        self.probe = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.ev_mid = torch.cuda.Event()
        self.rng = random.Random(777)
        self.run_left, self.cfg = 0, None
        self.next = None
        self.notes = {}

    def preload(self, k):
        with torch.cuda.stream(self.loader):
            xr = self.xs[k % self.nslots].to(self.dev, non_blocking=True)
            x = (xr - self.mean) / self.std
            y = (x @ self.label_proj).argmax(dim=-1)
        self.next = (x, y)

    def step(self, i):
        main = torch.cuda.current_stream()
        T = self.tstream
        if self.next is None:
            self.preload(i)
        main.wait_stream(self.loader)
        x, y = self.next
        x.record_stream(main)
        y.record_stream(main)
        self.preload(i + 1)
        if self.run_left == 0:
            self.cfg = (self.rng.choice("fp"), self.rng.choice("hd-"))
            self.run_left = self.rng.randint(self.run_min, self.run_max)
        self.run_left -= 1
        join, tail = self.cfg
        T.wait_stream(main)                                   # fork
        with torch.cuda.stream(T):
            self.tin.copy_(x)
            with torch.no_grad():
                self.tout.copy_(self.teacher(self.tin))
            self.ev_mid.record(T)
            self.tstat.mul_(0.9).add_(self.tout.mean(dim=0), alpha=0.1)
        x.record_stream(T)
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(x)
        if join == "f":
            main.wait_stream(T)                               # full join
        else:
            main.wait_event(self.ev_mid)                      # partial join: tstat's update runs on
        loss = F.cross_entropy(logits, y) + 0.5 * F.kl_div(F.log_softmax(logits, dim=-1),
                                                           F.softmax(self.tout, dim=-1), reduction="batchmean")
        if join == "f":
            loss = loss + 0.01 * (logits.mean(dim=0) - self.tstat).pow(2).sum()
        loss.backward()
        self.opt.step()
        note = "j=%s t=-" % join
        if tail != "-":
            k = self.rng.randrange(self.nprobe)
            with torch.cuda.stream(T):                        # no new fork: stream order only
                if tail == "h":
                    self.tin.copy_(self.px[k], non_blocking=True)
                else:
                    self.tin.copy_(self.px_dev[k])
                with torch.no_grad():
                    self.probe[i].copy_(self.teacher(self.tin).pow(2).mean())
            note = "j=%s t=%s%d" % (join, tail, k)
        self.notes[i] = note
        return loss

    def loss_lines(self):
        p = tensor_hexes(self.probe)
        for i, n in self.notes.items():
            self.extra[i] = "%s p=%s" % (n, p[i])
        return super().loss_lines()


class EvRingWorkload(Workload):
    """Three models trained in one process on three streams of their own, in an order a host
    RNG picks, exchanging features through events that bind to the step before, as
    co-training and mutual-distillation scripts overlap their members: each model (Linear
    256-384, ReLU, Linear 384-384, ReLU, a 10-way head over its features plus 0.1 times a
    hint) draws its batch from a CUDA generator of its own and labels it by a projection of
    its own, and steps its own AdamW (foreach), all on its stream (the first and third of high
    priority). Its hint is the features another model published in the step before
    (double-buffered by the step's parity in persistent buffers): before reading it the
    model's stream waits on that publication's event (recorded the step before, whatever the
    order of this step, since this step records the other parity), and after its forward it
    records a read event; before publishing its own features into this parity's buffer it
    waits on every other model's read event of the step before (whose readers read the
    buffer it is about to overwrite). The order of the three models (four permutations) and
    whose hint each takes change together every 6 to 20 steps (a seeded host random.Random),
    so a pattern repeats with period two steps long enough to be graphed. At the end of the
    step the default stream waits on the three streams (wait_stream) and sums the three
    losses. A tool that binds a wait to the record of another step, replays a step recorded
    in another order or with other hints, or drops a wait it thinks covered by its graph's
    own ordering, trains on features of the wrong step. Each model's loss, the order and
    the hints end every line (" l=<hex>,<hex>,<hex> o=<order> h=<hints>"). No sync in the
    loop."""

    batch, din, hidden, nout, members = 64, 256, 384, 10, 3
    orders = ((0, 1, 2), (2, 0, 1), (1, 2, 0), (0, 2, 1))
    run_min, run_max = 6, 20

    def setup(self, mode="eager"):
        import random
        n, B, D, H = self.members, self.batch, self.din, self.hidden
        self.bodies = [nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, H), nn.ReLU()).to(self.dev)
                       for _ in range(n)]
        self.heads = [nn.Linear(H, self.nout).to(self.dev) for _ in range(n)]
        self.opts = [torch.optim.AdamW(list(b.parameters()) + list(h.parameters()), lr=1e-3, weight_decay=0.01,
                                       foreach=True) for b, h in zip(self.bodies, self.heads)]
        self.projs = torch.randn(n, D, self.nout, device=self.dev, generator=self.gen)
        self.gens = []
        for j in range(n):
            g = torch.Generator(device=self.dev)
            g.manual_seed(100 + j)
            self.gens.append(g)
        self.streams = [torch.cuda.Stream(priority=-1), torch.cuda.Stream(), torch.cuda.Stream(priority=-1)]
        self.pub = torch.zeros(n, 2, B, H, device=self.dev)
        self.E = [[torch.cuda.Event(), torch.cuda.Event()] for _ in range(n)]
        self.R = [[torch.cuda.Event(), torch.cuda.Event()] for _ in range(n)]
        self.recorded = set()          # ("E" or "R", model, parity) recorded at least once
        self.lb = torch.zeros(n, self.steps, dtype=torch.float32, device=self.dev)
        self.rng = random.Random(31337)
        self.run_left, self.order, self.src = 0, None, None
        self.notes = {}

    def step(self, i):
        n, p, q = self.members, i % 2, 1 - i % 2
        if self.run_left == 0:
            self.order = self.rng.choice(self.orders)
            self.src = [self.rng.choice([k for k in range(n) if k != j]) for j in range(n)]
            self.run_left = self.rng.randint(self.run_min, self.run_max)
        self.run_left -= 1
        main = torch.cuda.current_stream()
        for j in self.order:
            s = self.streams[j]
            k = self.src[j]
            with torch.cuda.stream(s):
                x = torch.randn(self.batch, self.din, device=self.dev, generator=self.gens[j])
                y = (x @ self.projs[j]).argmax(dim=-1)
                if ("E", k, q) in self.recorded:
                    s.wait_event(self.E[k][q])                # k's publication of the step before
                self.opts[j].zero_grad(set_to_none=True)
                h = self.bodies[j](x)
                loss = F.cross_entropy(self.heads[j](h + 0.1 * self.pub[k, q]), y)
                self.R[j][p].record(s)                        # done reading pub[k, q]
                loss.backward()
                self.opts[j].step()
                for r in range(n):
                    if r != j and ("R", r, q) in self.recorded:
                        s.wait_event(self.R[r][q])            # readers of pub[j, p] a step ago
                self.pub[j, p].copy_(h.detach())
                self.E[j][p].record(s)
                self.lb[j, i].copy_(loss.detach())
            self.recorded.add(("R", j, p))
            self.recorded.add(("E", j, p))
        for s in self.streams:
            main.wait_stream(s)
        self.notes[i] = "o=%s h=%s" % ("".join(map(str, self.order)), "".join(map(str, self.src)))
        return self.lb[:, i].sum()

    def loss_lines(self):
        per = [tensor_hexes(self.lb[j]) for j in range(self.members)]
        for i, note in self.notes.items():
            self.extra[i] = "l=%s %s" % (",".join(per[j][i] for j in range(self.members)), note)
        return super().loss_lines()


class ZeroCopyWorkload(TaskWorkload):
    """Pinned host memory used as CUDA tensors (zero-copy), as inference servers and
    RL actors share buffers with the host: pinned CPU tensors from PyTorch's host allocator
    are viewed as CUDA tensors over the same addresses (by
    torch._C._construct_storage_from_data_pointer: under unified addressing pinned memory is
    mapped into the device's address space). Two input slots, written by the host (normal_ from a seeded CPU generator) and
    read by a kernel straight from host memory (times a host scalar); a frozen 256x64
    projection in host memory that a kernel reads every step (the GEMM then runs on its
    device copy: cuBLAS's kernels are not asked to read host memory); the per-step loss and a
    feature statistic written by kernels into host memory (torch.mul(..., 1.0, out=view)), no
    copy engine involved. The host rewrites a slot only after synchronizing the event
    recorded right after the kernel that last read it (two steps before); it reads the step
    before's loss and statistic from host memory after synchronizing that step's event, and
    the statistic sets the next step's input scale (1 + 0.25 tanh(stat - 0.5)), so the host
    closes a loop through mapped memory. Every 10th step a fill kernel writes the step's
    number into a host-memory flag and the host spins on it with no CUDA call at all (30 s
    deadline, then an error), then synchronizes an event recorded after it and reads the
    step's loss. The MLP trains on the input and tanh of the projection; AdamW (foreach).
    A tool that holds the flag's kernel with nothing to make it issue it hangs the host;
    one that issues a held kernel reading a slot after the host rewrote it, or answers an
    event before the kernels that write host memory ran, gives other values. The loss as the
    host read it from mapped memory and the input scale end every line (" h=<hex>
    s=<float.hex>"). A sync every step (the step before's event)."""

    syncs = True
    nproj, flag_every, deadline_s = 64, 10, 30.0

    def setup(self, mode="eager"):
        if not hasattr(torch._C, "_construct_storage_from_data_pointer"):
            raise RuntimeError("zerocopy: this torch has no torch._C._construct_storage_from_data_pointer")
        B, D = self.batch, self.din
        self.model = MLP(D + self.nproj, self.hidden, self.nout, layers=4).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.cpu_gen = torch.Generator().manual_seed(6174)
        self.hx = torch.zeros(2, B, D, pin_memory=True)
        self.hw = (torch.randn(D, self.nproj, generator=self.cpu_gen) / 16.0).pin_memory()
        self.hloss = torch.zeros(self.steps, pin_memory=True)
        self.hstat = torch.zeros(self.steps, pin_memory=True)
        self.hflag = torch.zeros(4, dtype=torch.int32, pin_memory=True)
        self.dx, self.dw, self.dloss, self.dstat, self.dflag = [
            self.mapped(t) for t in (self.hx, self.hw, self.hloss, self.hstat, self.hflag)]
        self.ev_in = [torch.cuda.Event(), torch.cuda.Event()]
        self.ev_out = [torch.cuda.Event(), torch.cuda.Event()]
        self.ev_flag = torch.cuda.Event()
        self.scale = 1.0
        self.scales = {}
        self.seen = {}

    def mapped(self, t):
        """A CUDA tensor over the pinned CPU tensor t's memory (not owning it)."""
        st = torch._C._construct_storage_from_data_pointer(t.data_ptr(), self.dev, t.numel() * t.element_size())
        return torch.empty(0, dtype=t.dtype, device=self.dev).set_(st).view(t.shape)

    def step(self, i):
        slot = i % 2
        if i >= 2:
            self.ev_in[slot].synchronize()                   # step i-2's reader of this slot is done
        self.hx[slot].normal_(generator=self.cpu_gen)         # the host writes the slot in place
        self.scales[i] = self.scale
        x = self.dx[slot] * self.scale                        # a kernel reads host memory
        self.ev_in[slot].record()
        f = torch.tanh(x @ (self.dw * 1.0))                   # a kernel reads host memory
        y = (x @ self.label_proj).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(torch.cat([x, f], dim=1)), y)
        loss.backward()
        self.opt.step()
        torch.mul(loss.detach().view(1), 1.0, out=self.dloss[i:i + 1])         # kernels write host memory
        torch.mul(f.detach().abs().mean().view(1), 1.0, out=self.dstat[i:i + 1])
        self.ev_out[slot].record()
        if i >= 1:
            self.ev_out[1 - slot].synchronize()              # the step before's writes
            self.seen[i - 1] = f32_hex(float(self.hloss[i - 1]))
            self.scale = 1.0 + 0.25 * math.tanh(float(self.hstat[i - 1]) - 0.5)
        if i % self.flag_every == self.flag_every - 1:
            self.dflag[0:1].fill_(i + 1)
            self.ev_flag.record()
            t0 = time.perf_counter()
            while int(self.hflag[0]) != i + 1:               # no CUDA call while spinning
                if time.perf_counter() - t0 > self.deadline_s:
                    raise RuntimeError("zerocopy: the flag of step %d did not arrive in %.0f s" % (i, self.deadline_s))
            self.ev_flag.synchronize()
        return loss

    def loss_lines(self):
        torch.cuda.synchronize()
        last = self.steps - 1
        if last in self.scales and last not in self.seen:
            self.seen[last] = f32_hex(float(self.hloss[last]))
        for i, s in self.scales.items():
            self.extra[i] = "h=%s s=%s" % (self.seen.get(i, "-"), float.hex(s))
        return super().loss_lines()


_AUTOTUNED = None    # the autotune case's Function and kernels, once built


def build_autotuned():
    """The autotune case's kernels (a bias add with a leaky ReLU, in place, and its backward)
    under triton.autotune, and the autograd Function around them, built once per process:
    Triton is imported here, so that this module loads without it. Returns (Function,
    forward autotuner, backward autotuner)."""
    global _AUTOTUNED, triton, tl
    if _AUTOTUNED is not None:
        return _AUTOTUNED
    import triton
    import triton.language as tl

    configs = [triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 1024}, num_warps=4),
               triton.Config({"BLOCK": 4096}, num_warps=8)]

    # Elementwise, one add, one compare and one multiply per element: the same bits
    # whichever configuration the timings pick.
    @triton.autotune(configs=configs, key=["n"], restore_value=["X"])
    @triton.jit
    def bias_leaky_fwd(X, BIAS, n, ncol, slope, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        v = tl.load(X + offs, mask=m, other=0.0) + tl.load(BIAS + offs % ncol, mask=m, other=0.0)
        tl.store(X + offs, tl.where(v > 0, v, v * slope), mask=m)

    @triton.autotune(configs=configs, key=["n"], reset_to_zero=["GX"])
    @triton.jit
    def leaky_bwd(Y, G, GX, n, slope, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        yv = tl.load(Y + offs, mask=m, other=0.0)
        g = tl.load(G + offs, mask=m, other=0.0)
        tl.store(GX + offs, tl.where(yv > 0, g, g * slope), mask=m)

    class BiasLeaky(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h, bias, slope):
            y = h.contiguous().clone()
            n = y.numel()
            bias_leaky_fwd[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](y, bias, n, bias.numel(), slope)
            ctx.save_for_backward(y)
            ctx.slope = slope
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            g = g.contiguous()
            gx = torch.empty_like(y)
            n = y.numel()
            leaky_bwd[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](y, g, gx, n, ctx.slope)
            return gx, gx.sum(dim=0), None

    _AUTOTUNED = (BiasLeaky, bias_leaky_fwd, leaky_bwd)
    return _AUTOTUNED


class AutotuneWorkload(TaskWorkload):
    """Triton's autotuner timing kernel configurations in the middle of training, as
    libraries of hand-written Triton kernels do: the MLP's two hidden layers are Linear
    without bias followed by a Triton kernel that adds the bias and applies a leaky ReLU in
    place on a clone of the GEMM's output (@triton.autotune over three (BLOCK, num_warps)
    configurations, key on the element count, restore_value on the buffer, so the autotuner
    clones it before and copies it back after every timed launch), its backward another
    autotuned Triton kernel (reset_to_zero on its output); both behind a
    torch.autograd.Function, the bias gradient summed by PyTorch. The autotuner times the
    configurations (Triton's default benchmarker: timing events around every launch, a
    256 MB buffer zeroed before each to flush L2, torch.cuda.synchronize, launch counts
    that follow the measured times) at the first launch of each batch size: rows drawn by a
    seeded host random.Random from 48, 64 and 96, then 80 from step 120 and 112 from step
    210 (which those steps use first), so timing bursts come in the first steps and again
    mid-run, the backward's on the autograd thread. The slope, a float kernel argument,
    steps through 0.01, 0.02, 0.05 every 40 steps. AdamW (foreach). Each element is one add,
    one compare and one multiply in every configuration, so the results do not depend on
    which wins (which may differ between runs). A tool that holds launches across the
    autotuner's synchronizations and timing events, or replays a clone, launch and restore
    of the timing loop where training resumes, trains on other activations. The batch rows
    and the number of sizes tuned so far end every line (" M=<n> k=<n>"). No sync in the
    loop but the autotuner's."""

    hidden = 512
    rows_choices = (48, 64, 96)
    rows_late = ((120, 80), (210, 112))
    slopes, slope_every = (0.01, 0.02, 0.05), 40

    def setup(self, mode="eager"):
        import random
        try:
            fn, self.kfwd, self.kbwd = build_autotuned()
        except ImportError as e:
            raise RuntimeError("autotune: Triton is not importable here (%s)" % e)
        self.act = fn.apply
        h = self.hidden
        self.fc1 = nn.Linear(self.din, h, bias=False)
        self.fc2 = nn.Linear(h, h, bias=False)
        self.head = nn.Linear(h, self.nout)
        self.model = nn.ModuleList([self.fc1, self.fc2, self.head]).to(self.dev)
        self.b1 = nn.Parameter(torch.zeros(h, device=self.dev))
        self.b2 = nn.Parameter(torch.zeros(h, device=self.dev))
        self.opt = torch.optim.AdamW(list(self.model.parameters()) + [self.b1, self.b2], lr=1e-3,
                                     weight_decay=0.01, foreach=True)
        self.label_setup()
        self.draws = random.Random(4242)
        self.info = {}

    def step(self, i):
        choices = list(self.rows_choices) + [r for at, r in self.rows_late if i >= at]
        M = self.draws.choice(choices)
        for at, r in self.rows_late:
            if i == at:
                M = r
        slope = self.slopes[(i // self.slope_every) % len(self.slopes)]
        x = torch.randn(M, self.din, device=self.dev, generator=self.gen)
        y = (x @ self.label_proj).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        h = self.act(self.fc1(x), self.b1, slope)
        h = self.act(self.fc2(h), self.b2, slope)
        loss = F.cross_entropy(self.head(h), y)
        loss.backward()
        self.opt.step()
        self.info[i] = (M, len(self.kfwd.cache))
        return loss

    def loss_lines(self):
        for i, (M, k) in self.info.items():
            self.extra[i] = "M=%d k=%d" % (M, k)
        return super().loss_lines()


# --------------------------------------------------------------------------- eleventh red-team round
# Patterns the rounds before leave out, each chosen for what a tool that holds launches back
# and replays them as graphs could get wrong: stream memory operations (cuStreamWriteValue32
# and cuMemsetD32Async, through PyTorch's symm_mem ops, as copy-engine collectives signal
# chunks) whose values change every step and which a same-stream copy must read before; an
# evaluator thread sharing the legacy default stream with the training thread (and the
# autograd thread), the caching allocator handing blocks between the threads by stream order
# alone, with a read-back from that thread; streams made and destroyed every step by the
# runtime and the driver (blocking and non-blocking, two priorities: a handle the driver
# hands out again may come back with other flags), destroyed while their work is pending,
# ordered by the legacy stream's implicit synchronization on some steps; host stalls of 0.5
# to 12 ms, around the idle flush's threshold, at host-chosen points of the step, one of
# them on the autograd thread mid-backward; and an optimizer offloaded to the CPU as torchao's
# CPUOffloadOptimizer does it (gradients copied to pinned memory from post-accumulate hooks on
# the autograd thread, a fused CPU AdamW after each copy's event, the weights copied back on
# the same side stream).

class MemOpsWorkload(TaskWorkload):
    """Stream memory operations as copy-engine collectives and async tensor parallelism use
    them to signal chunks (torch.ops.symm_mem.stream_write_value32_, a cuStreamWriteValue32
    of a 32-bit value into device memory, and torch.ops.symm_mem.memset32_, a
    cuMemsetD32Async; both through PyTorch's driver-API table, on ordinary device memory, one
    GPU): every step a copy stream forked from the compute stream (wait_stream) first clones
    the 8 chunk flags (a device-to-device copy that must read them before this step's
    writes), then for each of 8 chunks copies 8 rows of a 8192-row GPU bank at a row offset a
    seeded host random.Random draws anew into the batch buffer, writes the offset into the
    chunk's second flag and the chunk's flag: the step's tag (0x7FFFFF00 + step, so it crosses
    2**31 at step 256) for about 80 % of the chunks, else the tag it last signalled (the same
    launch sequence every step, only the values change); then memset32_ writes the float32
    bits of 1 + k/16 (k from the host RNG) over a host-drawn range (offset and count) of a
    256-word scale vector that is never reset, so each scale keeps the last memset that
    covered it. Still on the copy stream, kernels read the flags back: a chunk is ready
    where its flag equals the tag, its age is the tag minus the cloned flag (clamped to
    1..8), its weight 1 + 0.1 (offset mod 5) when ready and 0.25 / age when not, written
    into a persistent buffer with checksums of the flags and the scales. The compute stream
    waits for the copy stream, scales the batch's columns by the scale vector (viewed as
    float32), labels it by a fixed projection and trains the MLP on the chunk-weighted
    cross-entropy; AdamW (foreach). A tool that replays a memop or memset with the value,
    offset or count it recorded, forwards one ahead of held work on its stream (the clone
    then reads this step's flags), or drops one, trains on other weights and scales. The
    signalled chunks, the memset and the checksums end every line
    (" s=<bits> m=<off>+<n>:<k> c=<n>,<n>"). No sync in the loop."""

    chunks, nbank, tag0, p_signal = 8, 8192, 0x7FFFFF00, 0.8
    one_bits = 0x3F800000                      # float32 1.0

    def setup(self, mode="eager"):
        import random
        try:
            import torch.distributed._symmetric_memory  # noqa: F401  (the symm_mem ops' Python side)
        except Exception:  # noqa: BLE001 (the ops are registered by libtorch itself; this only adds helpers)
            pass
        try:
            self.write32 = torch.ops.symm_mem.stream_write_value32_
            self.memset32 = torch.ops.symm_mem.memset32_
        except (AttributeError, RuntimeError) as e:
            raise RuntimeError("memops: this torch has no symm_mem.stream_write_value32_ / memset32_ (%s)" % e)
        B, D, C = self.batch, self.din, self.chunks
        self.rows = B // C
        self.model = MLP(D, self.hidden, self.nout, layers=4).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.bank = torch.randn(self.nbank, D, device=self.dev, generator=self.gen)
        self.xbuf = torch.zeros(B, D, device=self.dev)
        self.wbuf = torch.ones(C, device=self.dev)
        self.flags = torch.zeros(2 * C, dtype=torch.int32, device=self.dev)     # tags, then row offsets
        self.scales = torch.full((D,), self.one_bits, dtype=torch.int32, device=self.dev)
        self.flags_u, self.scales_u = self.flags.view(torch.uint32), self.scales.view(torch.uint32)
        self.mix_f = torch.randint(1, 1 << 20, (2 * C,), dtype=torch.int64, device=self.dev, generator=self.gen)
        self.mix_s = torch.randint(1, 1 << 20, (D,), dtype=torch.int64, device=self.dev, generator=self.gen)
        self.ck = torch.zeros(self.steps, 2, dtype=torch.int64, device=self.dev)
        self.copy_stream = torch.cuda.Stream()
        self.last_tag = [0] * C
        self.rng = random.Random(8086)
        self.notes = {}

    def step(self, i):
        r, C, R, D = self.rng, self.chunks, self.rows, self.din
        tag = (self.tag0 + i) & 0xFFFFFFFF
        offs = [r.randrange(0, self.nbank - R + 1) for _ in range(C)]
        sig = [r.random() < self.p_signal for _ in range(C)]
        m_off = r.randrange(0, D)
        m_cnt = r.randint(1, min(64, D - m_off))
        k = r.randrange(16)
        main, cs = torch.cuda.current_stream(), self.copy_stream
        cs.wait_stream(main)                                  # the step before read xbuf, wbuf and scales
        with torch.cuda.stream(cs):
            prev = self.flags[:C].clone()                     # must see the flags before this step's writes
            for c in range(C):
                o = offs[c]
                self.xbuf[c * R:(c + 1) * R].copy_(self.bank[o:o + R])
                self.write32(self.flags_u, C + c, o)
                if sig[c]:
                    self.last_tag[c] = tag
                self.write32(self.flags_u, c, self.last_tag[c])
            self.memset32(self.scales_u, m_off, self.one_bits + (k << 19), m_cnt)
            fl = self.flags.long() & 0xFFFFFFFF
            ready = (fl[:C] == tag).float()
            age = (tag - (prev.long() & 0xFFFFFFFF)).clamp(1, 8).float()
            w = ready * (1.0 + 0.1 * (fl[C:] % 5).float()) + (1.0 - ready) * (0.25 / age)
            self.wbuf.copy_(w)
            self.ck[i, 0].copy_((fl * self.mix_f).sum())
            self.ck[i, 1].copy_((self.scales.long() * self.mix_s).sum())
        main.wait_stream(cs)
        x = self.xbuf * self.scales.view(torch.float32)
        y = (x @ self.label_proj).argmax(dim=-1)
        wrow = self.wbuf.repeat_interleave(R)
        self.opt.zero_grad(set_to_none=True)
        per = F.cross_entropy(self.model(x), y, reduction="none")
        loss = (per * wrow).sum() / wrow.sum()
        loss.backward()
        self.opt.step()
        self.notes[i] = "s=%s m=%d+%d:%d" % ("".join("1" if s else "0" for s in sig), m_off, m_cnt, k)
        return loss.detach()

    def loss_lines(self):
        ck = self.ck.tolist()
        for i, n in self.notes.items():
            self.extra[i] = "%s c=%d,%d" % (n, ck[i][0], ck[i][1])
        return super().loss_lines()


class EvaluatorThread:
    """A Python thread of the case's own running self.evaluator, which takes jobs from
    self.jobs until None (bgeval, bgcapture), and the learning rates it set (self.lrs, by
    step) on the loss lines."""

    def start_evaluator(self, name):
        self.thread = threading.Thread(target=self.evaluator, name=name, daemon=True)
        self.thread.start()

    def add_lr_extras(self):
        for i, lr in self.lrs.items():
            self.extra[i] = (self.extra[i] + " " if i in self.extra else "") + "lr=" + float.hex(lr)

    def finish(self):
        self.jobs.put(None)
        self.thread.join(timeout=60)


class BgEvalWorkload(EvaluatorThread, TaskWorkload):
    """An evaluator thread that shares the default stream with training, as scripts that
    evaluate snapshots in the background without a stream of their own do: every 8th step,
    after the optimizer step, the training thread clones every parameter (on the legacy
    default stream) and hands the clones to a Python thread through a queue.Queue; that
    thread (its current stream the same default stream, grad mode off) copies them into an
    eval-mode copy of the model (_foreach_copy_), re-seeds a CUDA generator of its own with
    the snapshot's step, and scores 4 held-out batches of 256 samples with noise from that
    generator, then reads the summed loss and the correct count back with .tolist() (a sync
    from that thread while the training thread keeps launching) and writes the loss into a
    GPU buffer; the clones are freed by that thread, so the caching allocator hands their
    blocks to the training thread's next allocations, ordered by nothing but the one stream.
    Meanwhile the training thread (MLP, 6 layers, dropout 0.1, AdamW foreach) goes on, its
    backward on the autograd thread: three threads issue work to one stream at once, in an
    order the GIL picks anew in every run. Every 40th step the training thread waits for
    every evaluation so far (Queue.join) and lowers its learning rate (a Python float, a
    kernel argument) by 0.7 when the newest evaluation did not improve on the best. A tool
    that holds one thread's launches while another thread's launches on the same stream go
    out (a block freed in one thread reused by the other before the kernel that read it
    ran), or answers one thread's synchronize before another thread's held work ran, gives
    other values. The evaluation's loss and correct count as that thread read them end
    every 8th line (" ev=<hex> acc=<n>"), the learning rate every 40th (" lr=<float.hex>").
    No sync in the training thread but the waits every 40 steps."""

    hidden, every, adjust_every, neval, eval_batches = 512, 8, 40, 256, 4

    def setup(self, mode="eager"):
        import copy
        import queue
        import threading
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.params = list(self.model.parameters())
        self.lr = 1e-3
        self.opt = torch.optim.AdamW(self.params, lr=self.lr, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.emodel = copy.deepcopy(self.model).eval()
        self.emodel.requires_grad_(False)
        self.eparams = list(self.emodel.parameters())
        self.ex = torch.randn(self.eval_batches, self.neval, self.din, device=self.dev, generator=self.gen)
        self.ey = (self.ex @ self.label_proj).argmax(dim=-1)
        self.egen = torch.Generator(device=self.dev)
        self.ev_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.results, self.lrs = {}, {}
        self.best = None
        self.failure = None
        self.jobs = queue.Queue()
        self.start_evaluator("workloads-bgeval")

    def evaluator(self):
        with torch.cuda.device(self.dev):
            while True:
                job = self.jobs.get()
                try:
                    if job is None:
                        return
                    if self.failure is None:
                        self.evaluate(*job)
                except BaseException as e:  # noqa: BLE001 (handed to the training thread)
                    self.failure = e
                finally:
                    job = None
                    self.jobs.task_done()

    def evaluate(self, k, snap):
        with torch.no_grad():
            torch._foreach_copy_(self.eparams, snap)
            snap.clear()                                     # the clones are freed here, in this thread
            self.egen.manual_seed(9000 + k)
            losses, hits = [], []
            for b in range(self.eval_batches):
                x = self.ex[b] + 0.1 * torch.randn(self.neval, self.din, device=self.dev, generator=self.egen)
                logits = self.emodel(x)
                losses.append(F.cross_entropy(logits, self.ey[b]))
                hits.append((logits.argmax(dim=-1) == self.ey[b]).sum())
            tot = torch.stack(losses).sum()
            self.ev_buf[k].copy_(tot)
            vals = torch.stack([tot, torch.stack(hits).sum().float()]).tolist()   # a sync from this thread
        self.results[k] = (vals[0], int(vals[1]) if math.isfinite(vals[1]) else -1)

    def check(self):
        if self.failure is not None:
            raise RuntimeError("bgeval: the evaluator thread failed: %r" % (self.failure,))

    def step(self, i):
        self.check()
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        if i % self.every == self.every - 1:
            self.jobs.put((i, [p.detach().clone() for p in self.params]))
        if i % self.adjust_every == self.adjust_every - 1:
            self.jobs.join()                                 # every evaluation so far is done
            self.check()
            ev = self.results[i][0]
            if self.best is None or ev < self.best:
                self.best = ev
            else:
                self.lr *= 0.7
                self.opt.param_groups[0]["lr"] = self.lr
            self.lrs[i] = self.lr
        return loss

    def loss_lines(self):
        self.jobs.join()
        self.check()
        for k, (ev, acc) in self.results.items():
            self.extra[k] = "ev=%s acc=%d" % (f32_hex(ev), acc)
        self.add_lr_extras()
        return super().loss_lines()


class StreamChurnWorkload(TaskWorkload):
    """Streams made and destroyed every step outside PyTorch's pool, as code that borrows
    streams from other libraries (CuPy, DALI, TensorRT contexts) does, wrapped in
    torch.cuda.ExternalStream: every step two streams are made, each either blocking (the
    runtime's cudaStreamCreate through torch.cuda.cudart(), "b") or non-blocking (the
    driver's cuStreamCreateWithPriority through ctypes, priority 0, "n", or -1, "p"), so a
    handle the driver hands out again may come back with other flags. The batch is drawn on
    the legacy default stream; on the first stream a spin (torch.cuda._sleep) and an
    augmentation (noise from a CUDA generator of its own) written into a persistent buffer,
    on the second a spin and a frozen teacher's soft targets written into another, an event
    recorded on each. A non-blocking stream is forked by wait_stream; a blocking one is
    ordered after the batch by the legacy stream's implicit synchronization alone. The
    streams are destroyed either at once ("e"), their spins and kernels still pending
    (cudaStreamDestroy and cuStreamDestroy return at once and the work completes), the
    default stream then waiting on their events, or after the step ("l"), the default
    stream then waiting on the events of the non-blocking ones and on nothing for a blocking
    one (its next op waits for it implicitly). The kinds and the destroy point change
    together every 3 to 9 steps (a seeded host random.Random). The student (MLP) trains on
    the augmented batch with cross-entropy plus KL to the soft targets; AdamW (foreach).
    Every 50 steps torch._C._cuda_clearCublasWorkspaces() and torch.cuda.empty_cache() give
    back the cuBLAS workspaces and the blocks PyTorch keeps per stream handle (the GEMMs then
    get new workspaces at other addresses). A tool that drops work held on a destroyed stream, issues it onto the dead handle,
    keeps a destroyed stream's flags or priority for the new stream with its handle (the
    implicit order lost), or drops the wait on an event whose stream is gone, reads an old
    buffer. The kinds and the destroy point end every line (" s=<kinds> d=e|l"). No sync in the
    loop but empty_cache's."""

    sleep_cycles, run_min, run_max, cache_every = 200000, 3, 9, 50

    def setup(self, mode="eager"):
        import ctypes
        import random
        self.ct = ctypes
        self.cudart = torch.cuda.cudart()
        cu = ctypes.CDLL("libcuda.so.1")
        self.cu_create = cu.cuStreamCreateWithPriority
        self.cu_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_int]
        self.cu_create.restype = ctypes.c_int
        self.cu_destroy = cu.cuStreamDestroy_v2
        self.cu_destroy.argtypes = [ctypes.c_void_p]
        self.cu_destroy.restype = ctypes.c_int
        h = self.hidden
        self.model = MLP(self.din, h, self.nout, layers=4).to(self.dev)
        self.teacher = MLP(self.din, h, self.nout, layers=3).to(self.dev)
        self.teacher.requires_grad_(False)
        self.teacher.eval()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.aug_gen = torch.Generator(device=self.dev)
        self.aug_gen.manual_seed(4040)
        self.xa = torch.zeros(self.batch, self.din, device=self.dev)
        self.soft = torch.zeros(self.batch, self.nout, device=self.dev)
        self.rng = random.Random(2468)
        self.run_left, self.cfg = 0, None
        self.notes = {}

    def make_stream(self, kind):
        h = self.ct.c_void_p()
        if kind == "b":                                      # the runtime's: blocking
            rc = self.cudart.cudaStreamCreate(self.ct.addressof(h))
            ok = rc == self.cudart.cudaError.success
        else:                                                # the driver's: CU_STREAM_NON_BLOCKING
            rc = self.cu_create(self.ct.byref(h), 1, 0 if kind == "n" else -1)
            ok = rc == 0
        if not ok or not h.value:
            raise RuntimeError("streamchurn: making a stream of kind %s failed (%r)" % (kind, rc))
        return h.value

    def drop_stream(self, kind, handle):
        if kind == "b":
            rc = self.cudart.cudaStreamDestroy(handle)
            ok = rc == self.cudart.cudaError.success
        else:
            rc = self.cu_destroy(handle)
            ok = rc == 0
        if not ok:
            raise RuntimeError("streamchurn: destroying a stream of kind %s failed (%r)" % (kind, rc))

    def step(self, i):
        if self.run_left == 0:
            self.cfg = (self.rng.choice("bnp"), self.rng.choice("bnp"), self.rng.choice("el"))
            self.run_left = self.rng.randint(self.run_min, self.run_max)
        self.run_left -= 1
        ka, kt, when = self.cfg
        main = torch.cuda.current_stream()
        x, y = self.batch_for(i)                             # on the legacy default stream
        ha, ht = self.make_stream(ka), self.make_stream(kt)
        A = torch.cuda.ExternalStream(ha, device=self.dev)
        T = torch.cuda.ExternalStream(ht, device=self.dev)
        ea, et = torch.cuda.Event(), torch.cuda.Event()
        for s, kind in ((A, ka), (T, kt)):
            if kind != "b":
                s.wait_stream(main)                          # a blocking stream waits for legacy work by itself
        with torch.cuda.stream(A):
            torch.cuda._sleep(self.sleep_cycles)
            noise = torch.randn(x.shape, device=self.dev, generator=self.aug_gen)
            self.xa.copy_(x * 1.1 + 0.05 * noise)
            ea.record(A)
        with torch.cuda.stream(T):
            torch.cuda._sleep(self.sleep_cycles)
            with torch.no_grad():
                self.soft.copy_(F.softmax(self.teacher(x) / 2.0, dim=-1))
            et.record(T)
        del noise
        if when == "e":                                      # their work still pending
            self.drop_stream(ka, ha)
            self.drop_stream(kt, ht)
        for ev, kind in ((ea, ka), (et, kt)):
            if kind != "b" or when == "e":
                main.wait_event(ev)                          # else the legacy stream's next op waits for it
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(self.xa)
        loss = F.cross_entropy(logits, y) + F.kl_div(F.log_softmax(logits / 2.0, dim=-1), self.soft,
                                                     reduction="batchmean")
        loss.backward()
        self.opt.step()
        if when == "l":
            self.drop_stream(ka, ha)
            self.drop_stream(kt, ht)
        if i % self.cache_every == self.cache_every - 1:
            clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
            if clear is not None:
                clear()                                      # cuBLAS workspaces are kept per stream handle
            torch.cuda.empty_cache()
        self.notes[i] = "s=%s%s d=%s" % (ka, kt, when)
        return loss

    def loss_lines(self):
        for i, n in self.notes.items():
            self.extra[i] = n
        return super().loss_lines()


class HostPauseWorkload(TaskWorkload):
    """Host stalls at unpredictable points of the step, as garbage-collector pauses, logging,
    checkpoint I/O and slow data loading make them: every step a seeded host random.Random
    plans 0 to 3 pauses, each at one of seven points (x: after the batch is drawn; f: in a
    forward hook on the third Linear, mid-forward; l: after the loss, before backward; h: in
    a tensor hook on the third block's output, on the autograd thread mid-backward, with the
    main thread blocked in backward(); b: after backward; o: between the body's AdamW and the
    head's SGD; s: after both steps), of 0.5, 3, 4.5, 5, 5.5, 6.5, 9 or 12 ms (around and past a
    launch-holding tool's idle-flush threshold of a few milliseconds), either time.sleep or a
    busy wait on time.perf_counter with no system call. The MLP (6 layers, dropout 0.1);
    AdamW (foreach) on the body and SGD with momentum (foreach) on the head. Eagerly the
    pauses change nothing but time. A tool that issues held work when the host goes quiet
    races, at each pause's end, its flush against the program's next launch (and the
    autograd thread's, in backward); one that splits a run there and replays the rest with
    the wrong part, or issues held work twice or not at all, trains on other values. The
    pauses end every line (" p=<point><ms><s|w>,...", s for a spin, w for a sleep, or
    " p=-"). No sync in the loop."""

    hidden = 512
    points = "xflhbos"
    lengths_ms = (0.5, 3.0, 4.5, 5.0, 5.5, 6.5, 9.0, 12.0)

    def setup(self, mode="eager"):
        import random
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        net = self.model.net
        self.opt = torch.optim.AdamW(net[:-1].parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.opt_head = torch.optim.SGD(net[-1].parameters(), lr=0.01, momentum=0.9, foreach=True)
        self.label_setup()
        net[6].register_forward_hook(lambda mod, inp, out: self.pause("f"))
        self.rng = random.Random(1357)
        self.plan = {}
        self.notes = {}

    def pause(self, point):
        for ms, spin in self.plan.get(point, ()):
            if spin:
                t_end = time.perf_counter() + ms * 1e-3
                while time.perf_counter() < t_end:
                    pass
            else:
                time.sleep(ms * 1e-3)

    def grad_hook(self, g):
        self.pause("h")                                      # on the autograd thread

    def step(self, i):
        r = self.rng
        plan, notes = {}, []
        for _ in range(r.choice((0, 1, 1, 2, 3))):
            point, ms, spin = r.choice(self.points), r.choice(self.lengths_ms), r.random() < 0.5
            plan.setdefault(point, []).append((ms, spin))
            notes.append("%s%g%s" % (point, ms, "s" if spin else "w"))
        self.plan = plan
        net = self.model.net
        x, y = self.batch_for(i)
        self.pause("x")
        self.opt.zero_grad(set_to_none=True)
        self.opt_head.zero_grad(set_to_none=True)
        h = net[:9](x)                                       # the forward hook pauses in here
        h.register_hook(self.grad_hook)
        loss = F.cross_entropy(net[9:](h), y)
        self.pause("l")
        loss.backward()
        self.pause("b")
        self.opt.step()
        self.pause("o")
        self.opt_head.step()
        self.pause("s")
        self.notes[i] = "p=" + (",".join(notes) if notes else "-")
        return loss

    def loss_lines(self):
        for i, n in self.notes.items():
            self.extra[i] = n
        return super().loss_lines()


class CPUAdamWorkload(TaskWorkload):
    """The optimizer offloaded to the CPU as torchao's CPUOffloadOptimizer does it (its
    logic written out here, offload_gradients=True): every parameter of 4096 elements or
    more has a pinned host copy and a pinned host gradient, and a fused CPU AdamW of its own;
    a post-accumulate-grad hook (on the autograd thread, mid-backward) makes a side stream
    wait for the current stream, copies the gradient into the pinned host gradient there
    (non_blocking), records an event on the side stream (Stream.record_event) into an
    ordered queue, then record_stream()s the GPU gradient to the side stream and drops it
    (the caching allocator records an event there at the free and queries it before reuse).
    The smaller parameters (the biases) stay on the GPU under a fused CUDA AdamW, stepped
    first. step() then, parameter by parameter in the order backward reached them,
    synchronizes the gradient's event, runs the CPU AdamW on the pinned copy, and copies
    the pinned copy back into the GPU parameter on the side stream (non_blocking), the next
    parameter's CPU step overlapping that copy; finally it synchronizes the side stream, so
    the next forward reads the new weights. A cosine schedule sets every optimizer's learning
    rate (a Python float) each step. The MLP (4 layers, dropout 0.1). A tool that lets a
    device-to-host copy overtake held backward kernels that wrote the gradient (ordered only
    by the side stream's wait), answers an event or the side stream's synchronize before
    the copies behind it ran, or replays a host-to-device copy of an earlier step, trains on
    other weights. A checksum of the first layer's pinned weight after the step (every 997th
    element summed in float64 on the host) ends every line (" w=<float.hex>"). A sync every
    step (the events, the side stream)."""

    syncs = True
    minimal_size, lr0, lr_min = 4096, 1e-3, 1e-4

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=4, dropout=0.1).to(self.dev)
        self.label_setup()
        self.side = torch.cuda.Stream()
        self.host = {}                                       # GPU parameter -> its pinned copy
        self.cpu_opts = {}
        self.queue = {}
        small = []
        for p in self.model.parameters():
            if p.numel() < self.minimal_size:
                small.append(p)
                continue
            ph = torch.empty(p.shape, pin_memory=True)
            ph.grad = torch.empty(p.shape, pin_memory=True)
            ph.copy_(p.detach(), non_blocking=True)
            self.host[p] = ph
            p.register_post_accumulate_grad_hook(self.grad_hook)
            self.cpu_opts[p] = torch.optim.AdamW([ph], lr=self.lr0, weight_decay=0.01, fused=True)
        self.gpu_opt = torch.optim.AdamW(small, lr=self.lr0, weight_decay=0.01, fused=True)
        self.first = self.host[self.model.net[0].weight]
        self.sums = {}

    def grad_hook(self, p):
        if p.grad is None:
            return
        self.side.wait_stream(torch.cuda.current_stream())   # backward has written this gradient
        with torch.cuda.stream(self.side):
            self.host[p].grad.copy_(p.grad, non_blocking=True)
        self.queue.pop(p, None)
        self.queue[p] = self.side.record_event()
        p.grad.record_stream(self.side)
        p.grad = None

    def step(self, i):
        lr = self.lr_min + 0.5 * (self.lr0 - self.lr_min) * (1.0 + math.cos(math.pi * i / self.steps))
        for opt in [self.gpu_opt] + list(self.cpu_opts.values()):
            opt.param_groups[0]["lr"] = lr
        x, y = self.batch_for(i)
        self.gpu_opt.zero_grad(set_to_none=True)
        for p in self.host:
            p.grad = None
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        with torch.no_grad():
            self.gpu_opt.step()
            for p, ev in self.queue.items():
                ev.synchronize()
                self.cpu_opts[p].step()
                with torch.cuda.stream(self.side):
                    p.copy_(self.host[p], non_blocking=True)
            self.side.synchronize()                          # the next forward reads the new weights
            self.queue.clear()
        self.sums[i] = float.hex(float(self.first.view(-1)[::997].double().sum()))
        return loss

    def loss_lines(self):
        for i, s in self.sums.items():
            self.extra[i] = "w=" + s
        return super().loss_lines()


# --------------------------------------------------------------------------- thirteenth red-team round
# (The twelfth round, traps_r29, has no PyTorch case.) Patterns the rounds before leave out,
# each chosen for what a tool that holds launches back, matches them against recorded
# sequences by kernel and launch shape and replays graphs with patched arguments could get
# wrong: forward-mode automatic differentiation (torch.func.jvp: every layer of the forward
# launched twice with one shape, on the primal and on its tangent, twins that differ only in
# their pointers); scaled_dot_product_attention under masks rebuilt every step (document
# boundaries of packed sequences as a boolean mask on the global layers, a sliding window
# with ALiBi slopes as an additive float mask on the local ones, the window's width a kernel
# scalar that a host RNG changes), memory-efficient attention with those masks and flash
# attention on unpacked steps, in a host-random order; Hessian-vector products through a
# convolutional net (double backward: cuDNN convolutions in roles a first-order step never
# gives them) every third step, as AdaHessian computes them; a neural spline flow whose
# kernels address their operands by indices computed earlier in the same step (cumsum knots,
# searchsorted bins, gather, torch.where tails), with a quantile whose level a host RNG draws
# every step and a bucketize histogram; and host functions enqueued on the stream between
# kernels (cuLaunchHostFunc and cuStreamAddCallback through ctypes), which read a loss from
# pinned memory, compute a gradient scale on the host and write it into pinned memory that a
# copy later on the stream reads, with user data that changes every step, waited for by a
# Python condition with no CUDA call.

class MeanFlowWorkload(Workload):
    """MeanFlow (Geng et al., 2025) one-step generative training, whose loss needs a
    forward-mode derivative, computed as its PyTorch ports do it: torch.func.jvp of the
    average velocity u(z, r, t) (an MLP of four hidden layers of 256 with SiLU, over z and
    sinusoidal embeddings of t and t - r) along the tangent (v, 0, 1), so every Linear and
    SiLU of the forward runs twice, on the primal and on its tangent (GEMMs and elementwise
    kernels of one shape back to back that differ only in their pointers), inside the dual
    level functorch opens and closes every step; the target v - (t - r) du/dt is detached and
    the loss backpropagates through the primal alone. Data: a mixture of 8 Gaussians in 16
    dimensions; t and r from two logit-normal draws, sorted, r set equal to t for a share of
    the samples (2/8 to 6/8) that a seeded host random.Random redraws every 5 to 15 steps (a
    scalar in a comparison kernel); adaptive loss weighting (each sample's squared error
    divided by its detached value plus 1e-3, the paper's p = 1), clip_grad_norm_(1.0,
    foreach=True) and AdamW (foreach). Every 10th step a one-step sample of 512 points
    (z - u(z, 0, 1), noise from a generator re-seeded with the step) is scored by its mean
    squared distance to the nearest center. A tool that swaps a primal launch with its
    tangent twin, or replays one step's jvp with another step's tangent pointers, trains on
    other targets. The share of r = t samples, the unweighted mean squared error and the
    mean |du/dt| end every line (" p=<k>/8 m=<hex> j=<hex>"), the sample's score every 10th
    (" ev=<hex>"). No sync in the loop."""

    batch, dim, hidden, nfreq, ncenters, nsample = 256, 16, 256, 16, 8, 512
    run_min, run_max, eps = 5, 15, 1e-3

    def setup(self, mode="eager"):
        import random
        from torch.func import jvp
        self.jvp = jvp
        D, H = self.dim, self.hidden
        layers = [nn.Linear(D + 4 * self.nfreq, H), nn.SiLU()]
        for _ in range(3):
            layers += [nn.Linear(H, H), nn.SiLU()]
        layers.append(nn.Linear(H, D))
        self.net = nn.Sequential(*layers).to(self.dev)
        self.freqs = torch.exp(torch.linspace(0.0, math.log(100.0), self.nfreq, device=self.dev))
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.centers = 3.0 * torch.randn(self.ncenters, D, device=self.dev, generator=self.gen)
        self.eval_gen = torch.Generator(device=self.dev)
        self.rng = random.Random(2025)
        self.run_left, self.share = 0, 0
        self.m_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.j_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.ev_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.notes = {}

    def embed(self, s):
        a = s.unsqueeze(-1) * self.freqs
        return torch.cat([a.sin(), a.cos()], dim=-1)

    def u(self, z, r, t):
        return self.net(torch.cat([z, self.embed(t), self.embed(t - r)], dim=-1))

    def step(self, i):
        if self.run_left == 0:
            self.share = self.rng.randint(2, 6)
            self.run_left = self.rng.randint(self.run_min, self.run_max)
        self.run_left -= 1
        B, D = self.batch, self.dim
        k = torch.randint(0, self.ncenters, (B,), device=self.dev, generator=self.gen)
        x = self.centers.index_select(0, k) + 0.3 * torch.randn(B, D, device=self.dev, generator=self.gen)
        e = torch.randn(B, D, device=self.dev, generator=self.gen)
        s = torch.sigmoid(torch.randn(B, 2, device=self.dev, generator=self.gen) - 0.4)
        t, r = s.amax(dim=1), s.amin(dim=1)
        same = torch.rand(B, device=self.dev, generator=self.gen) < self.share / 8.0
        r = torch.where(same, t, r)
        z = (1.0 - t).unsqueeze(1) * x + t.unsqueeze(1) * e
        v = e - x
        u, dudt = self.jvp(self.u, (z, r, t), (v, torch.zeros_like(r), torch.ones_like(t)))
        target = (v - (t - r).unsqueeze(1) * dudt).detach()
        err = (u - target).square().sum(dim=1)
        loss = (err / (err.detach() + self.eps)).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0, foreach=True)
        self.opt.step()
        self.m_buf[i].copy_(err.detach().mean())
        self.j_buf[i].copy_(dudt.detach().abs().mean())
        ev = i % 10 == 0
        if ev:
            with torch.no_grad():
                self.eval_gen.manual_seed(7000 + i)
                z1 = torch.randn(self.nsample, D, device=self.dev, generator=self.eval_gen)
                one = torch.ones(self.nsample, device=self.dev)
                x0 = z1 - self.u(z1, torch.zeros_like(one), one)
                d2 = (x0.unsqueeze(1) - self.centers.unsqueeze(0)).square().sum(dim=-1).amin(dim=1)
                self.ev_buf[i].copy_(d2.mean())
        self.notes[i] = (self.share, ev)
        return loss

    def loss_lines(self):
        m, j, ev = tensor_hexes(self.m_buf), tensor_hexes(self.j_buf), tensor_hexes(self.ev_buf)
        for i, (share, has_ev) in self.notes.items():
            self.extra[i] = "p=%d/8 m=%s j=%s" % (share, m[i], j[i]) + (" ev=" + ev[i] if has_ev else "")
        return super().loss_lines()


class DocMaskWorkload(Workload):
    """Packed-sequence language-model training with masks rebuilt every step, as
    document-masking and Gemma-style local/global attention code builds them for
    F.scaled_dot_product_attention: a GPT (4 pre-norm blocks, d 256, 4 heads, bf16 autocast,
    fused AdamW) whose even blocks are global and odd blocks local. On a packed step (three
    steps in four, drawn by a seeded host random.Random) every row of 8 x 128 tokens holds
    documents whose starts are drawn on the GPU every step (a start with probability 1/40 at
    every position), numbered by an integer cumsum; the global blocks get a boolean mask
    (same document and causal, [8, 1, 128, 128]), the local blocks an additive bfloat16 mask
    ([8, 4, 128, 128]: ALiBi slopes times the distance inside the document and the sliding
    window, -inf outside) made by torch.where; the targets that start a new document are
    ignored (ignore_index). On an unpacked step the global blocks run is_causal=True (flash
    attention) and the local blocks a [1, 4, 128, 128] window mask. The window's width (16 to
    64 tokens) changes every 5 to 15 steps by the host RNG (a scalar in the comparison
    kernel). Under sdpa_kernel([FLASH_ATTENTION, EFFICIENT_ATTENTION, MATH]) (cuDNN
    attention left out) the masked attentions run memory-efficient attention where it takes
    them (its parameters a large by-value struct of pointers and strides, its backward's
    workspace zeroed by a memset, one key split as the deterministic setting asks; else the
    math path), so flash and memory-efficient kernels alternate by block on unpacked steps. A tool that replays a step's attention with the mask pointer or bias
    strides of another step, or the window of another run of steps, attends across
    documents. The window and the step's kind end every line (" w=<n> d=<docs>" on packed
    steps, the documents counted on the GPU; " w=<n> u" on unpacked ones). No sync in the
    loop."""

    batch, seq, vocab, d, heads, layers = 8, 128, 1024, 256, 4, 4
    p_start, p_unpacked = 1.0 / 40, 0.25
    windows = (16, 24, 32, 48, 64)
    run_min, run_max = 5, 15

    def setup(self, mode="eager"):
        import random
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.sdpa_kernel = sdpa_kernel
        self.sdpa_backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
        d, H, T, V = self.d, self.heads, self.seq, self.vocab

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                add_block_layers(self, d)

            def forward(self, x, mask, causal):
                B, T_, C = x.shape
                q, k, v = self.qkv(self.ln1(x)).view(B, T_, 3, H, C // H).permute(2, 0, 3, 1, 4)
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
                x = x + self.proj(y.transpose(1, 2).reshape(B, T_, C))
                return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

        self.model = nn.ModuleDict({
            "tok": nn.Embedding(V, d),
            "blocks": nn.ModuleList([Block() for _ in range(self.layers)]),
            "ln_f": nn.LayerNorm(d),
            "head": nn.Linear(d, V, bias=False),
        }).to(self.dev)
        self.pos = nn.Parameter(0.02 * torch.randn(1, T, d, device=self.dev, generator=self.gen))
        self.opt = torch.optim.AdamW(list(self.model.parameters()) + [self.pos], lr=3e-4, weight_decay=0.01,
                                     fused=True)
        p = torch.arange(T, device=self.dev)
        self.tri = p.view(T, 1) >= p.view(1, T)                         # causal, the diagonal kept
        self.dist = (p.view(T, 1) - p.view(1, T)).float()               # query minus key
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device=self.dev)
        self.alibi = (-slopes.view(1, H, 1, 1) * self.dist).to(torch.bfloat16)
        self.neg = torch.tensor(float("-inf"), dtype=torch.bfloat16, device=self.dev)
        self.ndocs = torch.zeros(self.steps, dtype=torch.int64, device=self.dev)
        self.rng = random.Random(4242)
        self.run_left, self.window = 0, self.windows[0]
        self.notes = {}

    def forward(self, idx, gmask, lbias):
        m = self.model
        x = m["tok"](idx) + self.pos
        for li, b in enumerate(m["blocks"]):
            if li % 2 == 0:
                x = b(x, gmask, gmask is None)                          # global: documents, or causal
            else:
                x = b(x, lbias, False)                                  # local: window and ALiBi
        return m["head"](m["ln_f"](x))

    def step(self, i):
        if self.run_left == 0:
            self.window = self.rng.choice(self.windows)
            self.run_left = self.rng.randint(self.run_min, self.run_max)
        self.run_left -= 1
        packed = self.rng.random() >= self.p_unpacked
        B, T, V = self.batch, self.seq, self.vocab
        tok = torch.randint(0, V, (B, T + 1), device=self.dev, generator=self.gen)
        near = self.dist < self.window
        if packed:
            starts = torch.rand(B, T + 1, device=self.dev, generator=self.gen) < self.p_start
            starts[:, 0] = True
            doc = torch.cumsum(starts.int(), dim=1)[:, :T]
            gmask = ((doc.unsqueeze(2) == doc.unsqueeze(1)) & self.tri).unsqueeze(1)   # B, 1, T, T
            lbias = torch.where(gmask & near, self.alibi, self.neg)                   # B, H, T, T
            targets = tok[:, 1:].masked_fill(starts[:, 1:], -100)
            self.ndocs[i].copy_(starts[:, :T].sum())
        else:
            gmask = None
            lbias = torch.where((self.tri & near).view(1, 1, T, T), self.alibi, self.neg)   # 1, H, T, T
            targets = tok[:, 1:]
        self.opt.zero_grad(set_to_none=True)
        with self.sdpa_kernel(self.sdpa_backends), torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = self.forward(tok[:, :-1], gmask, lbias)
        loss = F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1), ignore_index=-100)
        loss.backward()
        self.opt.step()
        self.notes[i] = (self.window, packed)
        return loss

    def loss_lines(self):
        nd = self.ndocs.tolist()
        for i, (w, packed) in self.notes.items():
            self.extra[i] = "w=%d %s" % (w, ("d=%d" % nd[i]) if packed else "u")
        return super().loss_lines()


class AdaHessianWorkload(Workload):
    """AdaHessian (Yao et al., 2021) on a small convolutional net, written out as its
    reference implementation steps: every third step the gradients come from
    torch.autograd.grad(create_graph=True) and the Hessian's diagonal is estimated by
    Hutchinson's method with two Rademacher probes (torch.randint on a CUDA generator of its
    own, times 2 minus 1), each a Hessian-vector product torch.autograd.grad(grads, params,
    grad_outputs=probes), the first retaining the graph: double backward through three
    convolutions (cuDNN, deterministic algorithms, in the roles of convolution_backward's
    derivative, which a first-order step never gives them), SiLU and the cross-entropy; the
    estimate of a convolution's weight averaged over its kernel's spatial positions. The
    other steps take plain first-order gradients and reuse the last estimate. The update
    (weight decay, first moment, second moment of the Hessian diagonal, bias corrections,
    hessian_power 1) runs as foreach ops with host-computed scalars. Images 3 x 16 x 16 in
    batches of 64, labelled by a frozen random conv net. A tool that replays a Hessian
    step's double backward with another step's probe or graph pointers, or takes a
    first-order step's sequence for the start of a Hessian step's, steps with another
    curvature. The Hutchinson trace estimate ends every third line (" h=<hex>"). No sync in
    the loop."""

    batch, img, nout = 64, 16, 10
    update_each, probes = 3, 2
    lr, beta1, beta2, eps, wd = 0.02, 0.9, 0.999, 1e-4, 5e-4

    def setup(self, mode="eager"):
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.SiLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.SiLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.SiLU()).to(self.dev)
        self.head = nn.Linear(64 * (self.img // 4) ** 2, self.nout).to(self.dev)
        self.params = list(self.features.parameters()) + list(self.head.parameters())
        self.teacher = nn.Sequential(                               # labels: a frozen random net's argmax
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.Tanh(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.Tanh(),
            nn.Flatten(), nn.Linear(32 * (self.img // 4) ** 2, self.nout)).to(self.dev)
        self.teacher.requires_grad_(False)
        self.zgen = torch.Generator(device=self.dev)
        self.zgen.manual_seed(31337)
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.hess = [torch.zeros_like(p) for p in self.params]
        self.t = 0
        self.h_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.h_steps = []

    def forward(self, x):
        return self.head(self.features(x).flatten(1))

    def step(self, i):
        x = torch.randn(self.batch, 3, self.img, self.img, device=self.dev, generator=self.gen)
        with torch.no_grad():
            y = self.teacher(x).argmax(dim=-1)
        loss = F.cross_entropy(self.forward(x), y)
        hess_step = i % self.update_each == 0
        grads = torch.autograd.grad(loss, self.params, create_graph=hess_step)
        if hess_step:
            est = [torch.zeros_like(p) for p in self.params]
            trace = torch.zeros((), device=self.dev)
            for n in range(self.probes):
                zs = [torch.randint(0, 2, p.shape, device=self.dev, generator=self.zgen).float() * 2.0 - 1.0
                      for p in self.params]
                hzs = torch.autograd.grad(grads, self.params, grad_outputs=zs, retain_graph=n < self.probes - 1)
                with torch.no_grad():
                    for e, hz, z in zip(est, hzs, zs):
                        e.add_(hz * z, alpha=1.0 / self.probes)
                    trace = trace + sum((hz * z).sum() for hz, z in zip(hzs, zs)) / self.probes
            with torch.no_grad():
                self.hess = [e.abs().mean(dim=(2, 3), keepdim=True).expand_as(e).clone() if e.dim() == 4
                             else e.abs() for e in est]
                self.h_buf[i].copy_(trace)
            self.h_steps.append(i)
            grads = [g.detach() for g in grads]
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        bc1, bc2 = 1.0 - b1 ** self.t, 1.0 - b2 ** self.t
        with torch.no_grad():
            torch._foreach_mul_(self.params, 1.0 - self.lr * self.wd)
            torch._foreach_mul_(self.m, b1)
            torch._foreach_add_(self.m, grads, alpha=1.0 - b1)
            torch._foreach_mul_(self.v, b2)
            torch._foreach_addcmul_(self.v, self.hess, self.hess, value=1.0 - b2)
            denom = torch._foreach_div(self.v, bc2)
            torch._foreach_sqrt_(denom)
            torch._foreach_add_(denom, self.eps)
            torch._foreach_addcdiv_(self.params, self.m, denom, value=-self.lr / bc1)
        return loss.detach()

    def loss_lines(self):
        h = tensor_hexes(self.h_buf)
        for i in self.h_steps:
            self.extra[i] = "h=" + h[i]
        return super().loss_lines()


class SplineWorkload(Workload):
    """A neural spline flow (rational-quadratic coupling layers with linear tails, Durkan
    et al. 2019, as nflows computes them) trained by maximum likelihood on a warped 8-D
    density, in batches of 1024: in each of 4 coupling layers an MLP on one half of the
    dimensions gives every element of the other half 8 bin widths, 8 heights and 7 interior
    derivatives; softmax and torch.cumsum make the knots, torch.searchsorted (right=True) on
    the knots finds each element's bin, gather picks the bin's knot, width, height, slope and
    derivatives, so the spline's kernels read operands at indices computed earlier in the
    same step; elements outside [-3, 3] pass through unchanged by torch.where; a flip between
    layers. The loss is the negative log-likelihood plus 0.05 times relu(the q-quantile of
    the latent's absolute values minus 2.5), torch.quantile over 8192 values (a sort, gathers
    and a lerp, differentiated through the sort's scatter) at a level q in [0.9, 0.99] that a
    seeded host random.Random draws every step (the value of a fill kernel). A histogram of
    the latent over the 16 equiprobable bins of N(0, 1) (torch.bucketize against 15 fixed
    edges, counted by comparison) gives a chi-square statistic. AdamW (foreach),
    clip_grad_norm_(5.0). Every 10th step 1024 samples drawn through the inverse spline
    (searchsorted on the heights' knots, the quadratic's root) are scored against the data's
    warp. A tool that replays a gather with an index pointer of another step, or a quantile
    with another step's level, trains on other values. The quantile level in permille, the
    quantile and the chi-square end every line (" q=<k> t=<hex> c=<hex>"), the samples' score
    every 10th (" ev=<hex>"). No sync in the loop."""

    batch, dim, bins, hidden, couplings, tail = 1024, 8, 8, 128, 4, 3.0
    min_w = min_h = min_d = 1e-3
    nsample, tail_weight, tail_level = 1024, 0.05, 2.5

    def setup(self, mode="eager"):
        import random
        D2, K, H = self.dim // 2, self.bins, self.hidden
        self.conds = nn.ModuleList()
        for _ in range(self.couplings):
            net = nn.Sequential(nn.Linear(D2, H), nn.SiLU(), nn.Linear(H, H), nn.SiLU(),
                                nn.Linear(H, D2 * (3 * K - 1)))
            with torch.no_grad():
                net[-1].weight.mul_(0.1)
                net[-1].bias.zero_()
            self.conds.append(net)
        self.conds.to(self.dev)
        self.opt = torch.optim.AdamW(self.conds.parameters(), lr=1e-3, weight_decay=0.0, foreach=True)
        self.dconst = math.log(math.exp(1.0 - self.min_d) - 1.0)      # softplus of it: 1 - min_d
        # The 15 inner edges of N(0, 1)'s 16 equiprobable bins.
        qs = torch.arange(1, 16, dtype=torch.float64) / 16.0
        self.edges = (math.sqrt(2.0) * torch.erfinv(2.0 * qs - 1.0)).float().to(self.dev)
        self.bin_ids = torch.arange(16, device=self.dev)
        self.eval_gen = torch.Generator(device=self.dev)
        self.rng = random.Random(1729)
        self.t_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.c_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.ev_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.notes = {}

    def data(self, n, gen):
        z = torch.randn(n, self.dim, device=self.dev, generator=gen)
        a, b = z[:, 0::2], z[:, 1::2]
        return torch.stack([a, 0.5 * b + torch.sin(1.5 * a)], dim=2).reshape(n, self.dim)

    def knots(self, u, lo):
        """Bin sizes from unnormalised values (softmax, a floor), their knots by cumsum from
        -tail to tail (the ends set exactly), and the sizes again as knot differences."""
        K, B = self.bins, self.tail
        w = F.softmax(u, dim=-1)
        w = self.min_w + (1.0 - self.min_w * K) * w
        c = 2.0 * B * torch.cumsum(w, dim=-1) - B
        c = torch.cat([lo, c[..., :-1], -lo], dim=-1)                 # K + 1 knots
        return c, c[..., 1:] - c[..., :-1]

    def rqs(self, x, p, inverse):
        """The rational-quadratic spline of x (N, D2) given the conditioner's output p."""
        N, D2, K, B = x.shape[0], self.dim // 2, self.bins, self.tail
        p = p.view(N, D2, 3 * K - 1)
        scale = 1.0 / math.sqrt(self.hidden)
        lo = torch.full((N, D2, 1), -B, device=self.dev)
        cw, wid = self.knots(p[..., :K] * scale, lo)
        ch, hgt = self.knots(p[..., K:2 * K] * scale, lo)
        d = self.min_d + F.softplus(F.pad(p[..., 2 * K:], (1, 1), value=self.dconst))   # K + 1
        inside = (x >= -B) & (x <= B)
        xc = x.clamp(-B, B).unsqueeze(-1)
        idx = torch.searchsorted(ch if inverse else cw, xc, right=True) - 1
        idx = idx.clamp(0, K - 1)

        def pick(t):
            return t.gather(-1, idx).squeeze(-1)

        x_cw, x_w, x_ch, x_h = pick(cw), pick(wid), pick(ch), pick(hgt)
        x_delta = pick(hgt / wid)
        x_d, x_d1 = pick(d[..., :-1]), pick(d[..., 1:])
        xs = xc.squeeze(-1)
        if inverse:
            s = x_d + x_d1 - 2.0 * x_delta
            a = (xs - x_ch) * s + x_h * (x_delta - x_d)
            b = x_h * x_d - (xs - x_ch) * s
            c = -x_delta * (xs - x_ch)
            disc = (b.square() - 4.0 * a * c).clamp(min=0.0)
            root = (2.0 * c) / (-b - disc.sqrt())
            y = root * x_w + x_cw
            return torch.where(inside, y, x), None
        theta = (xs - x_cw) / x_w
        tomt = theta * (1.0 - theta)
        num = x_h * (x_delta * theta.square() + x_d * tomt)
        den = x_delta + (x_d + x_d1 - 2.0 * x_delta) * tomt
        y = x_ch + num / den
        dnum = x_delta.square() * (x_d1 * theta.square() + 2.0 * x_delta * tomt + x_d * (1.0 - theta).square())
        ld = torch.log(dnum) - 2.0 * torch.log(den)
        return torch.where(inside, y, x), torch.where(inside, ld, torch.zeros_like(ld))

    def log_prob(self, x):
        D2 = self.dim // 2
        h, logdet = x, torch.zeros(x.shape[0], device=self.dev)
        for net in self.conds:
            a, b = h[:, :D2], h[:, D2:]
            b, ld = self.rqs(b, net(a), inverse=False)
            h = torch.cat([a, b], dim=1).flip(1)
            logdet = logdet + ld.sum(dim=1)
        base = -0.5 * (h.square() + math.log(2.0 * math.pi)).sum(dim=1)
        return base + logdet, h

    def sample(self, n, gen):
        D2 = self.dim // 2
        h = torch.randn(n, self.dim, device=self.dev, generator=gen)
        for net in reversed(self.conds):
            h = h.flip(1)
            a, b = h[:, :D2], h[:, D2:]
            b, _ = self.rqs(b, net(a), inverse=True)
            h = torch.cat([a, b], dim=1)
        return h

    def step(self, i):
        q = self.rng.randint(900, 990)
        x = self.data(self.batch, self.gen)
        lp, h = self.log_prob(x)
        tq = torch.quantile(h.abs().flatten(), q / 1000.0)
        loss = -lp.mean() + self.tail_weight * F.relu(tq - self.tail_level)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.conds.parameters(), 5.0, foreach=True)
        self.opt.step()
        with torch.no_grad():
            bins = torch.bucketize(h.detach().flatten(), self.edges)
            counts = (bins.unsqueeze(1) == self.bin_ids).sum(dim=0).float()
            expect = h.numel() / 16.0
            self.c_buf[i].copy_(((counts - expect).square() / expect).sum())
            self.t_buf[i].copy_(tq.detach())
            ev = i % 10 == 0
            if ev:
                self.eval_gen.manual_seed(8100 + i)
                s = self.sample(self.nsample, self.eval_gen)
                resid = s[:, 1::2] - torch.sin(1.5 * s[:, 0::2])
                self.ev_buf[i].copy_((resid.square().mean() - 0.25).abs())
        self.notes[i] = (q, ev)
        return loss.detach()

    def loss_lines(self):
        t, c, ev = tensor_hexes(self.t_buf), tensor_hexes(self.c_buf), tensor_hexes(self.ev_buf)
        for i, (q, has_ev) in self.notes.items():
            self.extra[i] = "q=%d t=%s c=%s" % (q, t[i], c[i]) + (" ev=" + ev[i] if has_ev else "")
        return super().loss_lines()


class HostFuncWorkload(TaskWorkload):
    """Host functions enqueued on the stream between kernels, as libraries that run host
    code in stream order do (CuPy's Stream.launch_host_func, DALI, a loss-scale or logging
    hook that must see a step's values without a sync): every step, after backward, the loss
    is copied (non_blocking) into slot i mod 4 of a pinned ring, then a Python function made
    by ctypes.CFUNCTYPE is enqueued on the current stream by the driver's cuLaunchHostFunc
    or, on about a third of the steps (a seeded host random.Random), cuStreamAddCallback;
    its user data encodes the step and the slot, so it changes every step. Run by the
    driver's thread when the stream reaches it, the function reads the loss from pinned
    memory, updates a host-side running average and writes a gradient scale (the average over
    the loss, clamped to [0.5, 1.5], divided by 1 + a / 100 on steps with an auxiliary read)
    into slot i mod 4 of a second pinned ring; a copy enqueued after it brings that slot to
    the GPU and the gradients are multiplied by it before SGD (momentum 0.9, foreach). On
    about a third of the steps a second host function, enqueued between the forward and the
    backward, reads the logits' mean square a (copied to a third pinned ring) for the scale.
    Every 10th step the main thread waits for that step's function on a
    threading.Condition, with no CUDA call, and cuts the learning rate (a Python float) by
    0.8 when the running average did not fall since the last wait; it waits so too after the
    last warm-up step and the last step, ahead of the runner's synchronize(). The MLP (4
    layers, dropout 0.1). A tool that runs a host function before the work held ahead of it (it
    reads an old loss), after the copy behind it (the GPU gets an old scale), with another
    step's user data, or holds it until a later sync (the wait then times out), gives other
    values. The loss as the host function read it, the scale it wrote, the auxiliary value
    (or -) and the API (f: cuLaunchHostFunc, c: cuStreamAddCallback) end every line
    (" h=<hex> s=<hex> a=<hex>|- k=f|c"), the learning rate every 10th (" lr=<float.hex>").
    No CUDA sync in the loop; the host functions take the GIL, which the main thread
    releases in every CUDA call it makes from Python and in its waits."""

    ring, p_callback, p_aux, wait_every, wait_s = 4, 1.0 / 3, 1.0 / 3, 10, 120.0
    lr0 = 0.05

    def setup(self, mode="eager"):
        import ctypes
        import gc
        import random
        import threading
        self.ct = ctypes
        cu = ctypes.CDLL("libcuda.so.1")
        self.HostFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        self.StreamCb = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
        self.cu_launch_host_func = cu.cuLaunchHostFunc
        self.cu_launch_host_func.argtypes = [ctypes.c_void_p, self.HostFn, ctypes.c_void_p]
        self.cu_launch_host_func.restype = ctypes.c_int
        try:
            self.cu_add_callback = cu.cuStreamAddCallback
            self.cu_add_callback.argtypes = [ctypes.c_void_p, self.StreamCb, ctypes.c_void_p, ctypes.c_uint]
            self.cu_add_callback.restype = ctypes.c_int
        except AttributeError:                                       # a driver without the old API
            self.cu_add_callback, self.p_callback = None, 0.0
        self.host_fn = self.HostFn(self.on_host_fn)                  # kept alive while the process runs
        self.stream_cb = self.StreamCb(self.on_stream_cb)
        self.model = MLP(self.din, self.hidden, self.nout, layers=4, dropout=0.1).to(self.dev)
        self.params = list(self.model.parameters())
        self.lr = self.lr0
        self.opt = torch.optim.SGD(self.params, lr=self.lr, momentum=0.9, foreach=True)
        self.label_setup()
        R = self.ring
        self.loss_pin = torch.zeros(R, dtype=torch.float32, pin_memory=True)
        self.aux_pin = torch.zeros(R, dtype=torch.float32, pin_memory=True)
        self.ctl_pin = torch.ones(R, dtype=torch.float32, pin_memory=True)
        self.addr = {"loss": self.loss_pin.data_ptr(), "aux": self.aux_pin.data_ptr(), "ctl": self.ctl_pin.data_ptr()}
        self.scale_dev = torch.ones(1, dtype=torch.float32, device=self.dev)
        self.rng = random.Random(6174)
        self.cv = threading.Condition()
        self.done_upto = -1
        self.failure = None
        self.avg, self.avg_at_wait = None, None
        self.aux_read = {}                                           # step -> a as read
        self.reads = {}                                              # step -> (loss read, scale written)
        self.notes = {}
        # A collection of cyclic garbage on the driver's thread, inside a host function,
        # could free a tensor whose block the allocator then records an event for: a CUDA
        # call where none is allowed. Nothing here makes cycles; collections wait for finish().
        self.gc_was_enabled = gc.isenabled()
        gc.disable()

    def f32_at(self, name, k):
        return self.ct.c_float.from_address(self.addr[name] + 4 * k)

    def on_host_fn(self, ud):
        self.host_call(int(ud or 0))

    def on_stream_cb(self, stream, status, ud):
        if status != 0 and self.failure is None:
            self.failure = RuntimeError("hostfunc: a stream callback got status %d" % status)
        self.host_call(int(ud or 0))

    def host_call(self, ud):
        i, k, aux = (ud >> 4) - 1, (ud >> 1) & 7, ud & 1
        try:
            if aux:
                self.aux_read[i] = self.f32_at("aux", k).value
                return
            loss = self.f32_at("loss", k).value
            if math.isfinite(loss):
                self.avg = loss if self.avg is None else 0.9 * self.avg + 0.1 * loss
            scale = 1.0
            if self.avg is not None and math.isfinite(loss) and loss > 0.0:
                scale = min(1.5, max(0.5, self.avg / loss))
            a = self.aux_read.get(i)
            if a is not None and math.isfinite(a):
                scale /= 1.0 + a / 100.0
            cell = self.f32_at("ctl", k)
            cell.value = scale
            self.reads[i] = (loss, cell.value)
        except BaseException as e:  # noqa: BLE001 (handed to the main thread)
            if self.failure is None:
                self.failure = e
        finally:
            if not aux:
                with self.cv:
                    self.done_upto = i
                    self.cv.notify_all()

    def enqueue(self, i, k, aux, use_callback):
        ud = ((i + 1) << 4) | (k << 1) | (1 if aux else 0)
        stream = torch.cuda.current_stream(self.dev).cuda_stream
        if use_callback:
            rc = self.cu_add_callback(stream, self.stream_cb, ud, 0)
            what = "cuStreamAddCallback"
        else:
            rc = self.cu_launch_host_func(stream, self.host_fn, ud)
            what = "cuLaunchHostFunc"
        if rc != 0:
            raise RuntimeError("hostfunc: %s failed with CUresult %d" % (what, rc))

    def check(self):
        if self.failure is not None:
            raise RuntimeError("hostfunc: a host function failed: %r" % (self.failure,))

    def step(self, i):
        self.check()
        k = i % self.ring
        use_callback = self.rng.random() < self.p_callback
        aux = self.rng.random() < self.p_aux
        x, y = self.batch_for(i)
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(x)
        if aux:
            self.aux_pin[k].copy_(logits.detach().square().mean(), non_blocking=True)
            self.enqueue(i, k, True, False)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        self.loss_pin[k].copy_(loss.detach(), non_blocking=True)
        self.enqueue(i, k, False, use_callback)
        self.scale_dev.copy_(self.ctl_pin[k:k + 1], non_blocking=True)    # after the function wrote it
        with torch.no_grad():
            for p in self.params:
                p.grad.mul_(self.scale_dev)
        self.opt.step()
        note = "k=" + ("c" if use_callback else "f")
        decide = i % self.wait_every == self.wait_every - 1
        if decide or i in (self.args.warmup - 1, self.steps - 1):
            # Also before the runner's synchronize() after the warmup and after the last
            # step, so that no host function waits for the GIL while the runner holds it.
            with self.cv:
                ok = self.cv.wait_for(lambda: self.done_upto >= i or self.failure is not None, timeout=self.wait_s)
            self.check()
            if not ok:
                raise RuntimeError("hostfunc: the host function of step %d did not run within %.0f s"
                                   % (i, self.wait_s))
        if decide:
            if self.avg_at_wait is not None and not self.avg < self.avg_at_wait:
                self.lr *= 0.8
                self.opt.param_groups[0]["lr"] = self.lr
            self.avg_at_wait = self.avg
            note += " lr=" + float.hex(self.lr)
        self.notes[i] = (aux, note)
        return loss

    def loss_lines(self):
        self.check()
        for i, (aux, note) in self.notes.items():
            loss, scale = self.reads.get(i, (float("nan"), float("nan")))
            a = self.aux_read.get(i) if aux else None
            self.extra[i] = "h=%s s=%s a=%s %s" % (f32_hex(loss), f32_hex(scale),
                                                   f32_hex(a) if a is not None else "-", note)
        return super().loss_lines()

    def finish(self):
        import gc
        if self.gc_was_enabled:
            gc.enable()


# --------------------------------------------------------------------------- fourteenth red-team round
# Patterns the rounds before leave out, each chosen for what a tool that holds launches back,
# matches them against recorded sequences and replays graphs with patched arguments could get
# wrong: a dropless mixture of experts on torch._grouped_mm (CUTLASS grouped GEMMs whose
# per-group pointers, strides and sizes a preparation kernel writes into device memory from
# offsets computed on the GPU in the same step, launched on clusters with TMA descriptors in
# their parameters); pinned host memory that PyTorch's caching host allocator hands out and
# takes back on its own (pin_memory() batches and non_blocking copies to the host, their
# blocks' events polled by the allocator's background thread, the host cache emptied mid-run
# so pinned blocks are freed and allocated again), with metrics read on the host after an
# event three steps later steering the learning rate; a selective state-space model trained
# through its reference scan (a Python loop over every time step, forward and backward, its
# trip count drawn every step, the state carried from step to step); soft actor-critic
# (reparameterised Normal samples whose validation reads back, a replay buffer written at a
# moving pointer and sampled over a growing range, polyak-averaged target critics, counts of
# environment steps and updates drawn every step); and the caching allocator instrumented and
# retuned mid-run (memory history recorded in windows and snapshotted, a memory fraction and a
# garbage-collection threshold that make it free segments inside allocations on either
# thread, expandable segments switched on).

class GroupMMWorkload(Workload):
    """Dropless mixture-of-experts training as torchtitan's MoE layers run it on Hopper: a
    2-layer token-mixing LM (a token shift, then an MoE feed-forward of 8 SwiGLU experts, d 256,
    hidden 512, top-2 routing) whose experts run as torch._grouped_mm (bf16): every step the
    router's top-2 (chosen with a load-balancing bias updated on the GPU, aux-loss-free style,
    plus a Switch-style auxiliary loss) assigns the 2048 (token, expert) pairs to experts, and
    the layout is computed on the GPU with no sync: per-expert counts, each pair's rank by a
    cumsum, groups padded to multiples of 16 rows (at least 16), their end offsets by a cumsum
    (int32, the last one the static 2176 rows), a scatter of token ids into the padded rows and
    an index_select of the tokens. Each grouped GEMM is a preparation kernel
    (prepare_grouped_gemm_data, one block of 8 threads) that writes the groups' pointers,
    strides and problem sizes into a buffer from the caching allocator, read by a CUTLASS
    kernel (persistent, warp-specialised, 2x1 clusters, TMA descriptors in its parameters,
    replaced per group in device memory); backward runs them again with transposed operands,
    the weights' gradients as 2d x 2d grouped GEMMs over the ragged token dimension. So the
    rows each expert multiplies change every step while no launch argument but pointers does:
    a tool that replays a grouped GEMM with another step's offsets pointer, or moves the
    preparation kernel away from the GEMM that reads its table, multiplies other rows.
    Tokens: arithmetic progressions mod 512 with a per-row stride, one in ten replaced. Fused
    AdamW, clip_grad_norm_(foreach). Where torch._grouped_mm cannot run (a probe in setup
    raises) the experts run densely (every expert on every row, each row's own kept) and the
    first line says " g=0" instead of " g=1". The first layer's tokens per expert and the
    auxiliary loss end every line (" n=<counts> a=<hex>"). No sync in the loop."""

    batch, seq, vocab, d, hidden, experts, topk, layers = 8, 128, 512, 256, 512, 8, 2, 2
    align, aux_weight, bias_rate = 16, 0.01, 1e-3

    def setup(self, mode="eager"):
        B, T, V, D, H, E, K = self.batch, self.seq, self.vocab, self.d, self.hidden, self.experts, self.topk
        N = B * T
        self.tokens = N
        self.pairs = N * K
        self.rows = N * K + E * self.align                  # the padded layout: static, a multiple of 16
        nl = self.layers

        class Net(nn.Module):
            pass

        net = Net()
        net.emb = nn.Embedding(V, D)
        net.norms = nn.ModuleList([nn.LayerNorm(D) for _ in range(nl)])
        net.routers = nn.ModuleList([nn.Linear(D, E, bias=False) for _ in range(nl)])
        net.norm_f = nn.LayerNorm(D)
        net.head = nn.Linear(D, V, bias=False)
        net = net.to(self.dev)
        g = self.gen
        net.shift = nn.Parameter(0.5 * torch.ones(nl, D, device=self.dev))
        net.w1 = nn.Parameter(torch.randn(nl, E, H, D, device=self.dev, generator=g) * D ** -0.5)
        net.w3 = nn.Parameter(torch.randn(nl, E, H, D, device=self.dev, generator=g) * D ** -0.5)
        net.w2 = nn.Parameter(torch.randn(nl, E, D, H, device=self.dev, generator=g) * H ** -0.5)
        self.net = net
        self.params = list(net.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, fused=True)
        self.ebias = torch.zeros(nl, E, device=self.dev)                 # the balancing bias (no gradient)
        self.expert_ids = torch.arange(E, device=self.dev)
        self.pair_token = torch.arange(self.pairs, device=self.dev) // K  # pair p is token p // K's
        self.last_end = torch.full((1,), self.rows, dtype=torch.long, device=self.dev)
        self.row_ids = torch.arange(self.rows, device=self.dev)
        self.ar = torch.arange(T + 1, device=self.dev)
        self.count_buf = torch.zeros(self.steps, E, dtype=torch.int32, device=self.dev)
        self.aux_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.grouped = self.probe()

    def probe(self):
        """Whether torch._grouped_mm runs here (forward and backward, the layouts the loop uses)."""
        try:
            g = torch.Generator(device=self.dev)
            g.manual_seed(5)
            a = torch.randn(64, 32, device=self.dev, generator=g).to(torch.bfloat16).requires_grad_()
            w = torch.randn(3, 48, 32, device=self.dev, generator=g).requires_grad_()
            offs = torch.tensor([16, 48, 64], dtype=torch.int32, device=self.dev)
            out = torch._grouped_mm(a, w.to(torch.bfloat16).transpose(-2, -1), offs=offs)
            out.float().square().sum().backward()
            torch.cuda.synchronize(self.dev)
            return True
        except Exception as e:  # noqa: BLE001 (no grouped GEMM here: the same loop, dense)
            print("workloads: groupmm: torch._grouped_mm unavailable (%s: %s); dense experts instead"
                  % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            return False

    def gmm(self, x, w, offs):
        """x (rows, in) bf16 times each group's expert w (E, out, in), row by row."""
        wt = w.to(torch.bfloat16).transpose(-2, -1)                      # E, in, out (a view)
        if self.grouped:
            return torch._grouped_mm(x, wt, offs=offs)
        group = torch.searchsorted(offs.long(), self.row_ids, right=True)  # each row's expert
        return torch.matmul(x.unsqueeze(0), wt)[group, self.row_ids]

    def moe(self, li, x):
        """The MoE feed-forward of layer li on x (N, D): output, auxiliary loss, counts."""
        net, E, K, al = self.net, self.experts, self.topk, self.align
        probs = net.routers[li](x).softmax(dim=-1)                        # N, E
        with torch.no_grad():
            eid = (probs + self.ebias[li]).topk(K, dim=-1).indices        # N, K: chosen with the bias
        gate = probs.gather(1, eid)
        gate = gate / gate.sum(dim=-1, keepdim=True)
        with torch.no_grad():
            e = eid.reshape(-1)                                          # pairs, token-major
            onehot = e.unsqueeze(1) == self.expert_ids                   # pairs, E
            counts = onehot.sum(dim=0)                                   # E
            rank = onehot.long().cumsum(dim=0).gather(1, e.unsqueeze(1)).squeeze(1) - 1
            padded = ((counts + (al - 1)) // al * al).clamp_min(al)
            ends = padded.cumsum(dim=0)
            dest = (ends - padded)[e] + rank                             # each pair's row
            src = torch.full((self.rows,), self.tokens, dtype=torch.long, device=self.dev)
            src.scatter_(0, dest, self.pair_token)                       # padding rows: the zero row
            offs = torch.cat([ends[:-1], self.last_end]).to(torch.int32)
        xz = torch.cat([x, x.new_zeros(1, x.shape[1])]).index_select(0, src).to(torch.bfloat16)
        h = F.silu(self.gmm(xz, net.w1[li], offs)) * self.gmm(xz, net.w3[li], offs)
        y = self.gmm(h, net.w2[li], offs)                                 # rows, D
        ya = y.float().index_select(0, dest).view(self.tokens, K, -1)
        out = (ya * gate.unsqueeze(-1)).sum(dim=1)
        frac = counts.float() / self.pairs
        aux = E * (frac * probs.mean(dim=0)).sum()
        with torch.no_grad():
            self.ebias[li] += self.bias_rate * torch.sign(frac.mean() - frac)
        return out, aux, counts

    def step(self, i):
        B, T, V, net = self.batch, self.seq, self.vocab, self.net
        start = torch.randint(0, V, (B, 1), device=self.dev, generator=self.gen)
        stride = torch.randint(1, 16, (B, 1), device=self.dev, generator=self.gen)
        tok = (start + stride * self.ar) % V
        noise = torch.randint(0, V, (B, T + 1), device=self.dev, generator=self.gen)
        flip = torch.rand(B, T + 1, device=self.dev, generator=self.gen) < 0.1
        tok = torch.where(flip, noise, tok)
        self.opt.zero_grad(set_to_none=True)
        x = net.emb(tok[:, :-1])                                         # B, T, D
        aux_total, first_counts = None, None
        for li in range(self.layers):
            h = net.norms[li](x)
            h = h + net.shift[li] * F.pad(h[:, :-1], (0, 0, 1, 0))        # the previous token's features
            y, aux, counts = self.moe(li, h.reshape(B * T, -1))
            x = x + y.view(B, T, -1)
            aux_total = aux if aux_total is None else aux_total + aux
            if first_counts is None:
                first_counts = counts
        logits = net.head(net.norm_f(x))
        loss = F.cross_entropy(logits.reshape(-1, V), tok[:, 1:].reshape(-1)) + self.aux_weight * aux_total
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        self.opt.step()
        self.count_buf[i].copy_(first_counts)
        self.aux_buf[i].copy_(aux_total.detach())
        return loss.detach()

    def loss_lines(self):
        counts = self.count_buf.tolist()
        aux = tensor_hexes(self.aux_buf)
        for i in range(self.steps):
            self.extra[i] = "n=%s a=%s" % (",".join(str(c) for c in counts[i]), aux[i])
        if self.steps:
            self.extra[0] += " g=%d" % int(self.grouped)
        return super().loss_lines()


class PinHostWorkload(TaskWorkload):
    """Pinned host memory that PyTorch's caching host allocator hands out and takes back on
    its own, as input pipelines and metric loggers use it, with the allocator's background
    event thread on (PYTORCH_CUDA_ALLOC_CONF=pinned_use_background_threads:True, set by main()
    before torch is imported): the dataset (16384 x 256, labels from a fixed projection) lives
    in host memory; every step gathers a batch of 96 to 384 rows (a seeded host random.Random)
    by index_select on the host, pin_memory() copies it into a block of the host allocator,
    .to(non_blocking=True) copies it to the GPU on the compute stream, and the pinned tensors
    are dropped at once: the allocator records an event on the stream and returns the block to
    its free list only once the event completes, which its background thread polls with
    cudaEventQuery every 100 microseconds (the main thread too, before it makes a new block).
    After the step a side stream waits for the compute stream and copies the loss, the gradient
    norm and the accuracy to the host with .to("cpu", non_blocking=True) (a pinned block of
    the same allocator) and records an event; three steps later the host synchronizes that
    event, reads the values and sets the learning rate from them (down by 0.9 when the loss
    is above its running average, else up by 1.02, clamped), then drops the block. Every 25th
    step torch._C._host_emptyCache() frees the free blocks (cudaFreeHost), with no sync before
    it, so pinned memory is freed and allocated again (the driver may give the same addresses
    back) while copies out of other blocks are in flight. A tool that answers a block's event
    as complete while the copy before it is still held lets the host rewrite a batch the GPU
    has not read; one that replays a copy from a freed block reads memory that is gone. The
    MLP (6 layers, dropout 0.1), AdamW (foreach), clip_grad_norm_. The step whose metrics the
    host read, the values as it read them and the learning rate they set end every line
    (" r=<step> l=<hex> g=<hex> a=<hex> lr=<float.hex>", or " r=- lr=<float.hex>" on the first
    three). No sync in the loop but the event, three steps behind."""

    rows = (96, 160, 256, 384)
    dataset, lag, empty_every = 16384, 3, 25
    lr0, lr_min, lr_max = 1e-3, 1e-4, 3e-3

    def setup(self, mode="eager"):
        import random
        self.host_dataset_setup()                                       # the dataset, in host memory
        self.cpu_gen = torch.Generator().manual_seed(9731)
        self.rng = random.Random(5150)
        self.log_stream = torch.cuda.Stream(device=self.dev)
        self.pending = []                                               # (step, pinned metrics, event)
        self.avg = None
        self.empty_host = getattr(torch._C, "_host_emptyCache", None)
        if self.empty_host is None:
            print("workloads: pinhost: torch._C._host_emptyCache missing: the host cache is never emptied")
        print("workloads: pinhost: PYTORCH_CUDA_ALLOC_CONF=%s" % os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
        self.notes = {}

    def step(self, i):
        n = self.rng.choice(self.rows)
        idx = torch.randint(0, self.dataset, (n,), generator=self.cpu_gen)
        xb = self.host_x.index_select(0, idx).pin_memory()              # blocks of the host allocator
        yb = self.host_y.index_select(0, idx).pin_memory()
        x = xb.to(self.dev, non_blocking=True)
        y = yb.to(self.dev, non_blocking=True)
        del xb, yb                                                      # freed: reused once their events complete
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        self.opt.step()
        with torch.no_grad():
            acc = (logits.argmax(dim=-1) == y).float().mean()
            metrics = torch.stack([loss.detach(), gnorm, acc])
        main = torch.cuda.current_stream(self.dev)
        self.log_stream.wait_stream(main)
        with torch.cuda.stream(self.log_stream):
            host = metrics.to("cpu", non_blocking=True)                 # a pinned block, filled on the side stream
            ev = torch.cuda.Event()
            ev.record(self.log_stream)
        metrics.record_stream(self.log_stream)
        self.pending.append((i, host, ev))
        del host
        note = "r=-"
        if len(self.pending) > self.lag:
            j, host, ev = self.pending.pop(0)
            ev.synchronize()
            lv, gv, av = host.tolist()
            del host                                                    # its block goes back behind an event
            if math.isfinite(lv):
                if self.avg is not None:
                    self.lr = min(self.lr_max, max(self.lr_min, self.lr * (0.9 if lv > self.avg else 1.02)))
                self.avg = lv if self.avg is None else 0.9 * self.avg + 0.1 * lv
            for group in self.opt.param_groups:
                group["lr"] = self.lr
            note = "r=%d l=%s g=%s a=%s" % (j, f32_hex(lv), f32_hex(gv), f32_hex(av))
        if self.empty_host is not None and i % self.empty_every == self.empty_every - 1:
            self.empty_host()                                           # no sync: only completed blocks go
        self.notes[i] = note + " lr=" + float.hex(self.lr)
        return loss

    def loss_lines(self):
        for i, note in self.notes.items():
            self.extra[i] = note
        return super().loss_lines()

    def finish(self):
        # The pinned blocks still held go back, and the background thread takes their events
        # off its queue, before the process exits.
        self.pending.clear()
        torch.cuda.synchronize(self.dev)
        time.sleep(0.05)


class SSMScanWorkload(Workload):
    """A selective state-space model (Mamba, Gu and Dao 2023) trained through its reference
    scan, as mamba_ssm's selective_scan_ref and the minimal PyTorch ports run it where the
    fused kernel is missing: 2 blocks (d 128, inner 256, state 16; in_proj, a causal depthwise
    conv of width 4 written as shifted products, x_proj, softplus dt_proj, A = -exp(A_log),
    skip D, SiLU gate, out_proj) whose recurrence s = exp(dt A) s + dt B u is a Python loop
    over the time steps, each iteration an elementwise update of the (8, 256, 16) state and an
    einsum with C (a batched GEMM) on views (unbind) at the iteration's offset, its output
    stacked; backward runs the loop again in reverse on the autograd thread. The chunk length
    (48 to 128) is drawn every step by a seeded host random.Random, so the loop's trip count
    changes every step while every iteration has the same shapes and only its pointers move by
    a stride; the training is truncated backpropagation through time over a token stream
    resident on the GPU (phrases of 16 tokens repeated 3 times, 5 % noise), read at an offset
    that advances by the chunk length, the state carried (detached) from one step to the next
    and reset to zeros with probability 1/20. A tool that replays an iteration's launches with
    another iteration's offsets, or a step's loop for a longer or shorter one, trains on other
    values. AdamW (foreach), clip_grad_norm_. The chunk length, its offset in the stream and
    the carried state's mean absolute value end every line (" L=<n> o=<offset> h=<hex>", and
    " z" where the state was reset). No sync in the loop."""

    batch, vocab, d, expand, d_state, d_conv, layers = 8, 64, 128, 2, 16, 4, 2
    lengths, phrase, repeats, noise, p_reset = (48, 64, 80, 96, 112, 128), 16, 3, 0.05, 0.05

    def setup(self, mode="eager"):
        import random
        D, Di, N, Kc = self.d, self.expand * self.d, self.d_state, self.d_conv
        R = math.ceil(D / 16)                                           # dt_rank

        class Mamba(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(D)
                self.in_proj = nn.Linear(D, 2 * Di, bias=False)
                self.conv_w = nn.Parameter(torch.empty(Di, Kc).uniform_(-0.5, 0.5))
                self.conv_b = nn.Parameter(torch.zeros(Di))
                self.x_proj = nn.Linear(Di, R + 2 * N, bias=False)
                self.dt_proj = nn.Linear(R, Di)
                with torch.no_grad():                                   # dt in [1e-3, 1e-1], as in Mamba
                    dt = torch.exp(torch.rand(Di) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
                    self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
                self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(Di, 1))
                self.skip = nn.Parameter(torch.ones(Di))
                self.out_proj = nn.Linear(Di, D, bias=False)

            def forward(self, x, s):
                L = x.shape[1]
                u, z = self.in_proj(self.norm(x)).chunk(2, dim=-1)     # B, L, Di each
                up = F.pad(u.transpose(1, 2), (Kc - 1, 0))             # B, Di, L + Kc - 1
                conv = self.conv_b.unsqueeze(-1)
                for k in range(Kc):
                    conv = conv + up[:, :, k:k + L] * self.conv_w[:, k:k + 1]
                u = F.silu(conv).transpose(1, 2)                       # B, L, Di
                dt, Bm, Cm = self.x_proj(u).split([R, N, N], dim=-1)
                dt = F.softplus(self.dt_proj(dt))                      # B, L, Di
                dA = torch.exp(dt.unsqueeze(-1) * -torch.exp(self.A_log))      # B, L, Di, N
                dBu = (dt * u).unsqueeze(-1) * Bm.unsqueeze(2)                 # B, L, Di, N
                ys = []
                for dA_t, dBu_t, C_t in zip(dA.unbind(1), dBu.unbind(1), Cm.unbind(1)):     # the scan
                    s = dA_t * s + dBu_t
                    ys.append(torch.einsum("bdn,bn->bd", s, C_t))
                y = torch.stack(ys, dim=1) + u * self.skip
                return x + self.out_proj(y * F.silu(z)), s

        self.emb = nn.Embedding(self.vocab, D)
        self.blocks = nn.ModuleList([Mamba() for _ in range(self.layers)])
        self.norm_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, self.vocab, bias=False)
        self.model = nn.ModuleList([self.emb, self.blocks, self.norm_f, self.head]).to(self.dev)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=2e-3, weight_decay=0.01, foreach=True)
        self.state_shape = (self.batch, Di, N)
        # The token stream: phrases of 16 tokens, each repeated 3 times, 5 % noise; long
        # enough for every step at the longest chunk.
        span = self.phrase * self.repeats
        nph = (self.steps * max(self.lengths) + 1) // span + 2
        ph = torch.randint(0, self.vocab, (self.batch, nph, 1, self.phrase), device=self.dev, generator=self.gen)
        stream = ph.expand(self.batch, nph, self.repeats, self.phrase).reshape(self.batch, -1)
        flip = torch.rand(stream.shape, device=self.dev, generator=self.gen) < self.noise
        other = torch.randint(0, self.vocab, stream.shape, device=self.dev, generator=self.gen)
        self.stream = torch.where(flip, other, stream)
        self.pos = 0
        self.states = None
        self.rng = random.Random(1312)
        self.h_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.notes = {}

    def step(self, i):
        L = self.rng.choice(self.lengths)
        reset = self.states is None or self.rng.random() < self.p_reset
        if reset:
            self.states = [torch.zeros(self.state_shape, device=self.dev) for _ in self.blocks]
        o = self.pos
        tok = self.stream[:, o:o + L + 1]
        self.pos += L
        self.opt.zero_grad(set_to_none=True)
        x = self.emb(tok[:, :-1])
        carried = []
        for blk, s0 in zip(self.blocks, self.states):
            x, s = blk(x, s0)
            carried.append(s)
        logits = self.head(self.norm_f(x))
        loss = F.cross_entropy(logits.reshape(-1, self.vocab), tok[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        self.opt.step()
        self.states = [s.detach() for s in carried]
        self.h_buf[i].copy_(self.states[-1].abs().mean())
        self.notes[i] = (L, o, reset)
        return loss.detach()

    def loss_lines(self):
        h = tensor_hexes(self.h_buf)
        for i, (L, o, reset) in self.notes.items():
            self.extra[i] = "L=%d o=%d h=%s" % (L, o, h[i]) + (" z" if reset else "")
        return super().loss_lines()


class SACWorkload(Workload):
    """Soft actor-critic (Haarnoja et al. 2018) on a vectorised environment on the GPU (32
    point masses pushed towards goals; a goal reached ends the episode, 50 steps truncate
    it; resets by torch.where), as SAC implementations write it: every step collects 1 to 4
    environment steps and then runs 1 or 2 updates (both counts drawn by a seeded host
    random.Random), so the step's launch sequence has no period. The policy is a tanh-squashed
    torch.distributions.Normal built every time it is used, whose argument validation reads
    `valid.all()` back (a sync) and whose log_prob's support check is another; actions come
    from rsample() (the default CUDA generator), log-probabilities take the tanh correction
    (2 (log 2 - u - softplus(-2u))). Transitions go into a replay buffer of 8192 on the GPU
    by index_copy_ at a write pointer that moves 32 rows per environment step and wraps; each
    update samples 256 of them with torch.randint over the filled part (a bound that grows
    every environment step until the buffer is full); twin critics regress onto the
    entropy-regularised target of polyak-averaged target critics (torch._foreach_lerp_ after
    every update), the actor steps on every second update (backward(inputs=...) through the
    critics), and the temperature log_alpha is learned against a target entropy. Three Adam
    optimizers (foreach). A tool that replays one iteration's sequence for another's count of
    collections or updates, or a buffer write at another step's pointer, trains on other
    transitions. The loss is the mean critic loss of the step's updates; the counts, the
    temperature and the mean reward of the collected steps end every line
    (" e=<n> u=<n> a=<hex> r=<hex>")."""

    syncs = True
    envs, obs_dim, act_dim, hidden, limit = 32, 7, 2, 128, 50
    capacity, batch, gamma, tau, lr = 8192, 256, 0.99, 0.005, 3e-4
    collect_range, update_range, actor_every = (1, 4), (1, 2), 2
    log_std_min, log_std_max = -5.0, 2.0

    def setup(self, mode="eager"):
        import copy
        import random
        H, O, A = self.hidden, self.obs_dim, self.act_dim

        def mlp(nin, nout):
            return nn.Sequential(nn.Linear(nin, H), nn.ReLU(), nn.Linear(H, H), nn.ReLU(), nn.Linear(H, nout))

        self.actor = mlp(O, 2 * A).to(self.dev)
        self.q1 = mlp(O + A, 1).to(self.dev)
        self.q2 = mlp(O + A, 1).to(self.dev)
        self.q1_t = copy.deepcopy(self.q1).requires_grad_(False)
        self.q2_t = copy.deepcopy(self.q2).requires_grad_(False)
        self.actor_params = list(self.actor.parameters())
        self.critic_params = list(self.q1.parameters()) + list(self.q2.parameters())
        self.target_params = list(self.q1_t.parameters()) + list(self.q2_t.parameters())
        self.log_alpha = torch.zeros((), device=self.dev, requires_grad=True)
        self.actor_opt = torch.optim.Adam(self.actor_params, lr=self.lr, foreach=True)
        self.critic_opt = torch.optim.Adam(self.critic_params, lr=self.lr, foreach=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=self.lr, foreach=True)
        self.target_entropy = -float(A)
        C, Ne = self.capacity, self.envs
        self.buf_obs = torch.zeros(C, O, device=self.dev)
        self.buf_act = torch.zeros(C, A, device=self.dev)
        self.buf_rew = torch.zeros(C, device=self.dev)
        self.buf_next = torch.zeros(C, O, device=self.dev)
        self.buf_term = torch.zeros(C, device=self.dev)
        self.ptr, self.size, self.updates = 0, 0, 0
        self.ar_env = torch.arange(Ne, device=self.dev)
        self.pos = torch.zeros(Ne, 2, device=self.dev)
        self.vel = torch.zeros(Ne, 2, device=self.dev)
        self.goal = torch.rand(Ne, 2, device=self.dev, generator=self.gen) * 2.0 - 1.0
        self.t = torch.zeros(Ne, device=self.dev)
        self.rng = random.Random(27182)
        self.alpha_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.rew_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.counts = {}

    def observe(self):
        return torch.cat([self.pos, self.vel, self.goal - self.pos, (self.t / self.limit).unsqueeze(1)], dim=1)

    def policy(self, obs, with_logp=True):
        """A tanh-squashed Normal policy: actions and (with_logp) their log-probabilities."""
        mu, log_std = self.actor(obs).chunk(2, dim=-1)
        std = log_std.clamp(self.log_std_min, self.log_std_max).exp()
        dist = torch.distributions.Normal(mu, std)                      # argument validation: syncs
        u = dist.rsample()
        if not with_logp:
            return torch.tanh(u), None
        logp = dist.log_prob(u).sum(dim=-1)                             # support check: a sync
        logp = logp - (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(dim=-1)
        return torch.tanh(u), logp

    def env_step(self, a):
        self.vel = 0.9 * self.vel + 0.1 * a
        self.pos = (self.pos + 0.1 * self.vel).clamp(-2.0, 2.0)
        self.t = self.t + 1.0
        dist = (self.goal - self.pos).norm(dim=1)
        reached = dist < 0.1
        reward = reached.float() - dist - 0.01 * a.square().sum(dim=1)
        nxt = self.observe()
        done = (reached | (self.t >= self.limit)).unsqueeze(1)
        fresh = torch.rand(self.envs, 2, device=self.dev, generator=self.gen) * 2.0 - 1.0
        self.goal = torch.where(done, fresh, self.goal)
        self.pos = torch.where(done, torch.zeros_like(self.pos), self.pos)
        self.vel = torch.where(done, torch.zeros_like(self.vel), self.vel)
        self.t = torch.where(done.squeeze(1), torch.zeros_like(self.t), self.t)
        return nxt, reward, reached.float()

    def collect(self):
        with torch.no_grad():
            obs = self.observe()
            a, _ = self.policy(obs, with_logp=False)
            nxt, reward, term = self.env_step(a)
            idx = (self.ar_env + self.ptr) % self.capacity
            self.buf_obs.index_copy_(0, idx, obs)
            self.buf_act.index_copy_(0, idx, a)
            self.buf_rew.index_copy_(0, idx, reward)
            self.buf_next.index_copy_(0, idx, nxt)
            self.buf_term.index_copy_(0, idx, term)
        self.ptr = (self.ptr + self.envs) % self.capacity
        self.size = min(self.size + self.envs, self.capacity)
        return reward.mean()

    def update(self):
        idx = torch.randint(0, self.size, (self.batch,), device=self.dev, generator=self.gen)
        o, a, r, o2, term = (b.index_select(0, idx) for b in (self.buf_obs, self.buf_act, self.buf_rew,
                                                              self.buf_next, self.buf_term))
        with torch.no_grad():
            a2, logp2 = self.policy(o2)
            oa2 = torch.cat([o2, a2], dim=1)
            q_next = torch.min(self.q1_t(oa2), self.q2_t(oa2)).squeeze(1)
            target = r + self.gamma * (1.0 - term) * (q_next - self.log_alpha.exp() * logp2)
        oa = torch.cat([o, a], dim=1)
        q_loss = F.mse_loss(self.q1(oa).squeeze(1), target) + F.mse_loss(self.q2(oa).squeeze(1), target)
        self.critic_opt.zero_grad(set_to_none=True)
        q_loss.backward()
        self.critic_opt.step()
        self.updates += 1
        if self.updates % self.actor_every == 0:
            a_new, logp = self.policy(o)
            oa_new = torch.cat([o, a_new], dim=1)
            q_new = torch.min(self.q1(oa_new), self.q2(oa_new)).squeeze(1)
            actor_loss = (self.log_alpha.exp().detach() * logp - q_new).mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward(inputs=self.actor_params)
            self.actor_opt.step()
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            self.alpha_opt.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(self.target_params, self.critic_params, self.tau)
        return q_loss.detach()

    def step(self, i):
        ne = self.rng.randint(*self.collect_range)
        nu = self.rng.randint(*self.update_range)
        reward = None
        for _ in range(ne):
            r = self.collect()
            reward = r if reward is None else reward + r
        total = None
        for _ in range(nu):
            q = self.update()
            total = q if total is None else total + q
        self.rew_buf[i].copy_(reward / ne)
        self.alpha_buf[i].copy_(self.log_alpha.detach().exp())
        self.counts[i] = (ne, nu)
        return total / nu

    def loss_lines(self):
        a, r = tensor_hexes(self.alpha_buf), tensor_hexes(self.rew_buf)
        for i, (ne, nu) in self.counts.items():
            self.extra[i] = "e=%d u=%d a=%s r=%s" % (ne, nu, a[i], r[i])
        return super().loss_lines()


class MemHistWorkload(TaskWorkload):
    """The caching allocator instrumented and retuned in the middle of a run, as memory
    debugging and tuning do it: the MLP (6 layers of 1024, dropout 0.1, AdamW foreach) on
    batches of 64 to 512 rows (a seeded host random.Random) plus a temporary of 8 x 1024
    floats per row reduced into the loss, so allocation sizes change every step.
    torch.cuda.memory._record_memory_history(stacks="python") is on for three windows of 20
    steps (from steps 60, 160 and 260): the allocator records every allocation and free, those
    of the autograd thread too, and torch.cuda.memory._snapshot() is taken at each window's
    end. From step 100 a memory fraction of 1 GiB (set_per_process_memory_fraction) and a
    garbage-collection threshold of 0.1 (torch.cuda.memory._set_allocator_settings) make the
    allocator free cached segments (cudaFree, a device synchronization) inside allocations that
    find no free block, at points only its state decides, mid-forward on the main thread or
    mid-backward on the autograd thread; from step 200 expandable segments are switched on
    (the same call, which also turns the threshold off again) and torch.cuda.empty_cache()
    returns the old segments, so later ones are address ranges whose pages the allocator maps
    and unmaps (cuMemCreate, cuMemMap) beside the ones cudaMalloc gave before. The allocator's
    counts follow from the program's allocations alone, so a tool in the way must leave them as
    they are: the allocated and reserved bytes and the segments end every line
    (" m=<allocated>/<reserved>/<segments>"), and each window's last line adds the recorded
    allocations, completed frees, segments allocated or mapped and freed or unmapped, and the
    snapshot's segments and expandable ones (" t=<a>/<f>/<s>/<u> g=<n>/<x>"). No sync in the
    loop but empty_cache's at step 200 and the allocator's own."""

    din, hidden = 256, 1024
    rows = (64, 128, 256, 512)
    windows, window_len = (60, 160, 260), 20
    gc_from, gc_threshold, limit_mib, expandable_from = 100, 0.1, 1024, 200

    def setup(self, mode="eager"):
        import random
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)
        self.fwd = self.model
        self.label_setup()
        self.rng = random.Random(8086)
        self.record = torch.cuda.memory._record_memory_history
        self.settings = torch.cuda.memory._set_allocator_settings
        self.index = self.dev.index if self.dev.index is not None else torch.cuda.current_device()
        self.recording = False
        self.notes = {}

    def window_end(self):
        """What the window recorded, from a snapshot taken before recording stops."""
        snap = torch.cuda.memory._snapshot()
        traces = snap.get("device_traces", [])
        trace = traces[self.index] if self.index < len(traces) else []
        acts = {}
        for entry in trace:
            acts[entry.get("action")] = acts.get(entry.get("action"), 0) + 1
        segs = [s for s in snap.get("segments", []) if s.get("device", self.index) == self.index]
        return "t=%d/%d/%d/%d g=%d/%d" % (
            acts.get("alloc", 0), acts.get("free_completed", 0),
            acts.get("segment_alloc", 0) + acts.get("segment_map", 0),
            acts.get("segment_free", 0) + acts.get("segment_unmap", 0),
            len(segs), sum(1 for s in segs if s.get("is_expandable")))

    def step(self, i):
        if i == self.gc_from:
            total = torch.cuda.get_device_properties(self.dev).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, self.limit_mib * 2 ** 20 / total), self.dev)
            self.settings("garbage_collection_threshold:%g" % self.gc_threshold)
        if i == self.expandable_from:
            self.settings("expandable_segments:True")       # the threshold, not named, goes back to off
            torch.cuda.empty_cache()
        if i in self.windows:
            self.record("all", context="all", stacks="python", max_entries=200000)
            self.recording = True
        n = self.rng.choice(self.rows)
        x = torch.randn(n, self.din, device=self.dev, generator=self.gen)
        y = (x @ self.label_proj).argmax(dim=-1)
        tmp = torch.randn(n, 8 * self.hidden, device=self.dev, generator=self.gen)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y) + 1e-3 * tmp.square().mean()
        del tmp
        loss.backward()
        self.opt.step()
        stats = torch.cuda.memory_stats(self.dev)
        note = "m=%d/%d/%d" % (stats.get("allocated_bytes.all.current", 0),
                               stats.get("reserved_bytes.all.current", 0), stats.get("segment.all.current", 0))
        if self.recording and i - self.window_len + 1 in self.windows:
            note += " " + self.window_end()
            self.record(None)
            self.recording = False
        self.notes[i] = note
        return loss.detach()

    def loss_lines(self):
        for i, note in self.notes.items():
            self.extra[i] = note
        return super().loss_lines()

    def finish(self):
        if self.recording:
            self.record(None)
            self.recording = False


# --------------------------------------------------------------------------- fifteenth red-team round
# Patterns the rounds before leave out, each chosen for what a tool that holds launches back,
# matches them against recorded sequences and replays graphs with patched arguments could get
# wrong: whole training steps graphed by the program for three batch buckets and an eval pass,
# all four graphs in one shared memory pool (so each graph's temporaries lie where another's
# gradients or temporaries were), replayed in a host-random order between eager steps; CTC
# speech recognition through cuDNN's CTC loss, whose labels and lengths are host arrays it
# reads in the call (or device arrays, read back to the host first) and whose gradient comes
# out of the forward call; rotary position embeddings in complex arithmetic (view_as_complex,
# torch.polar) under bf16 autocast, at a host-drawn position offset into the frequency table,
# with the attention backend (flash, memory-efficient, math) picked per step by sdpa_kernel;
# selective activation checkpointing (create_selective_checkpoint_contexts), whose policy,
# switched every step, decides which of the forward's kernels backward launches again and
# which outputs it takes from a cache; and a host staging ring pinned in place by
# cudaHostRegister for some phases and unregistered for others, so the same host addresses are
# copied from and to with pinned semantics (async, the host waits on events) in one phase and
# pageable semantics (the source taken, the destination filled, before the call returns) in
# the next.

class SharedPoolWorkload(TaskWorkload):
    """Bucketed CUDA graphs of the whole training step sharing one memory pool, as serving and
    training code that graphs several batch shapes does (vLLM's decode buckets, graphed
    training steps per sequence bucket): steps 0-39 train eagerly; at steps 40, 41 and 42 the
    program captures the whole step (forward with dropout, backward, AdamW with
    capturable=True) for batches of 256, 128 and 64 rows, largest first as PyTorch's docs
    advise, each by torch.cuda.graph(pool=<one torch.cuda.graph_pool_handle()>) on a side
    stream after that step's training there as the warm-up, the gradients set to None before
    each capture (each capture's backward makes them from the pool, so a later capture may
    place its temporaries where an earlier graph writes its gradients); at step 43 an eval
    graph (eval mode, no_grad, a held-out set of 512) joins the same pool. From then on every
    step draws its batch size (48 to 320, a seeded host random.Random), pads it with zero rows
    of weight 0 to the smallest bucket that holds it (the loss is the weighted mean of the
    per-row cross-entropy) and replays that bucket's graph on the default stream after
    copying the batch into its static tensors; a batch of 320 fits no bucket and trains
    eagerly, and every 10th step is a logging step that trains the padded batch eagerly with
    clip_grad_norm_ (its gradients at new addresses outside the pool); every 10th step, 5
    later, the eval graph is replayed (eagerly before step 43). So four graphs whose pool
    memory overlaps run in an order no one fixed, with eager steps, and the Philox state
    PyTorch fills before each replay, between them. A tool that orders an eager copy into the
    static tensors, or the read of a static loss, around the wrong replay, or treats one
    graph's pool addresses as another's, gives other values. The step's path and rows end
    every line (" g=e<b>|c<b>|r<b>|l<b>|u k=<rows>": eager padded to bucket b before the
    captures, capture, replay, logging step, unbucketed eager), the logging steps' gradient
    norm (" n=<hex>") and the eval loss (" ev=<hex>") theirs. No sync in the loop apart from
    torch.cuda.graph's own at the four captures."""

    buckets = (256, 128, 64)                  # captured in this order into one pool
    sizes = (48, 64, 100, 128, 200, 256, 320)
    capture_at, log_every, eval_every, neval = 40, 10, 10, 512

    def setup(self, mode="eager"):
        import random
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, foreach=True, capturable=True)
        self.label_setup()
        self.pool = torch.cuda.graph_pool_handle()
        self.side = torch.cuda.Stream(device=self.dev)
        self.static = {b: (torch.zeros(b, self.din, device=self.dev),
                           torch.zeros(b, dtype=torch.long, device=self.dev),
                           torch.zeros(b, device=self.dev)) for b in self.buckets}
        self.graphs = {}                                             # bucket -> (CUDAGraph, its static loss)
        self.eval_graph, self.eval_loss = None, None
        self.Xe = torch.randn(self.neval, self.din, device=self.dev, generator=self.gen)
        self.Ye = (self.Xe @ self.label_proj).argmax(dim=-1)
        self.eval_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.norm_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.rng = random.Random(7919)
        self.logged, self.evals = [], []
        self.notes = {}

    def loss_of(self, x, y, w):
        """The weighted mean cross-entropy: padding rows have weight 0."""
        ce = F.cross_entropy(self.model(x), y, reduction="none")
        return (ce * w).sum() / w.sum()

    def fill(self, b, n):
        """n fresh samples into bucket b's static tensors, the rows after them zero, weight 0."""
        x, y, w = self.static[b]
        xb = torch.randn(n, self.din, device=self.dev, generator=self.gen)
        x[:n].copy_(xb)
        y[:n].copy_((xb @ self.label_proj).argmax(dim=-1))
        w[:n].fill_(1.0)
        if n < b:
            x[n:].zero_()
            y[n:].zero_()
            w[n:].zero_()
        return x, y, w

    def eager_step(self, x, y, w, clip):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_of(x, y, w)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True) if clip else None
        self.opt.step()
        return loss, norm

    def capture(self, b):
        x, y, w = self.fill(b, b)
        main = torch.cuda.current_stream(self.dev)
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            loss, _ = self.eager_step(x, y, w, False)              # the warm-up: this step's training
        main.wait_stream(self.side)
        loss.record_stream(main)
        self.opt.zero_grad(set_to_none=True)                       # the capture's backward makes them, in the pool
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool, stream=self.side):
            static_loss = self.loss_of(x, y, w)
            static_loss.backward()
            self.opt.step()
        self.graphs[b] = (g, static_loss)
        return loss

    def capture_eval(self):
        self.model.eval()
        main = torch.cuda.current_stream(self.dev)
        self.side.wait_stream(main)
        with torch.no_grad():
            with torch.cuda.stream(self.side):
                F.cross_entropy(self.model(self.Xe), self.Ye)      # the warm-up
            main.wait_stream(self.side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool, stream=self.side):
                self.eval_loss = F.cross_entropy(self.model(self.Xe), self.Ye)
        self.model.train()
        self.eval_graph = g

    def step(self, i):
        k = i - self.capture_at
        if 0 <= k < len(self.buckets):
            b = self.buckets[k]
            loss, note = self.capture(b), "g=c%d k=%d" % (b, b)
        else:
            n = self.rng.choice(self.sizes)
            fits = [b for b in self.buckets if b >= n]
            if not fits:                                           # no bucket holds it: eager, unpadded
                x = torch.randn(n, self.din, device=self.dev, generator=self.gen)
                y = (x @ self.label_proj).argmax(dim=-1)
                loss, _ = self.eager_step(x, y, torch.ones(n, device=self.dev), False)
                note = "g=u"
            else:
                b = min(fits)
                x, y, w = self.fill(b, n)
                if i % self.log_every == self.log_every - 1:      # logging: eager, the norm kept
                    loss, norm = self.eager_step(x, y, w, True)
                    self.norm_buf[i].copy_(norm)
                    self.logged.append(i)
                    note = "g=l%d" % b
                elif b in self.graphs:
                    g, loss = self.graphs[b]
                    g.replay()
                    note = "g=r%d" % b
                else:
                    loss, _ = self.eager_step(x, y, w, False)
                    note = "g=e%d" % b
            note += " k=%d" % n
        if i == self.capture_at + len(self.buckets):
            self.capture_eval()
        if i % self.eval_every == self.eval_every // 2 - 1:
            if self.eval_graph is not None:
                self.eval_graph.replay()
                self.eval_buf[i].copy_(self.eval_loss)
            else:
                self.model.eval()
                with torch.no_grad():
                    self.eval_buf[i].copy_(F.cross_entropy(self.model(self.Xe), self.Ye))
                self.model.train()
            self.evals.append(i)
        self.notes[i] = note
        return loss

    def loss_lines(self):
        for i, note in self.notes.items():
            self.extra[i] = note
        norms, evs = tensor_hexes(self.norm_buf), tensor_hexes(self.eval_buf)
        for i in self.logged:
            self.extra[i] += " n=" + norms[i]
        for i in self.evals:
            self.extra[i] += " ev=" + evs[i]
        return super().loss_lines()


class CTCWorkload(Workload):
    """Speech recognition with the CTC loss, as ASR recipes (ESPnet, wav2letter-style models,
    torchaudio's tutorials) train it: utterances of 96 frames of 40 features, synthesised
    every step from label sequences of 4 to 18 symbols (31 labels and the blank; each symbol
    held 2 or 3 frames, silences of 0 or 1 frames between, drawn by a seeded host
    random.Random, so every step's labels and their lengths differ) as a per-label prototype
    plus noise, a time mask of 0 to 10 frames at a host-drawn start (SpecAugment style); the
    model subsamples by a stride-2 Conv1d (to 48 frames), a second Conv1d, a bidirectional
    2-layer GRU (cuDNN) and a Linear to log-probabilities. F.ctc_loss (mean reduction) runs
    where PyTorch gives it to cuDNN (float32 log-probabilities, blank 0, every input length the
    full 48 frames): on about half the steps with the labels as a concatenated int32 CPU tensor
    and the lengths as Python tuples (cudnnCTCLoss's host label and length arrays, read in the
    call; the mean's divisor a tensor made from the host's lengths), on the others as int32
    tensors on the GPU (cudnnCTCLoss_v8's device arrays; PyTorch reads the lengths back first
    to check them); the gradient comes out of the forward call and backward only scales it.
    Probes in setup try both forms with a backward (the deterministic setting refuses
    PyTorch's own CUDA CTC backward); a form that fails is not used, and if both fail a CTC
    written out in PyTorch (the alpha recursion in log space, a Python loop over the frames)
    stands in. AdamW (foreach), clip_grad_norm_. A tool that lets cuDNN read another step's
    host arrays, or replays its CTC kernels with the workspace or label layout of another
    step, trains on other alignments. The labels' total length, the step's form (h: host
    arrays, d: device arrays, r: the written-out CTC) and the share of frames whose argmax is
    the blank end every line (" L=<n> p=h|d|r b=<hex>"); the first adds which forms the probes
    took (" c=<h><d>", 1 or 0 each). No sync in the loop but the device form's read-back."""

    batch, frames, feats, classes, hidden = 16, 96, 40, 32, 128
    len_range, hold_range, gap_range, lead_max, mask_max = (4, 18), (2, 3), (0, 1), 4, 10

    def setup(self, mode="eager"):
        import random
        Fd, H, V = self.feats, self.hidden, self.classes
        self.conv = nn.Sequential(nn.Conv1d(Fd, H, 5, stride=2, padding=2), nn.GELU(),
                                  nn.Conv1d(H, H, 3, padding=1), nn.GELU()).to(self.dev)
        self.rnn = nn.GRU(H, H, num_layers=2, bidirectional=True, batch_first=True).to(self.dev)
        self.out = nn.Linear(2 * H, V).to(self.dev)
        self.params = list(self.conv.parameters()) + list(self.rnn.parameters()) + list(self.out.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, foreach=True)
        self.proto = torch.randn(V, Fd, device=self.dev, generator=self.gen)   # each label's frame features
        self.rng = random.Random(6502)
        self.blank_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.host_ok = self.probe(True)
        self.dev_ok = self.probe(False)
        self.notes = {}

    def probe(self, host):
        """Whether F.ctc_loss in this form runs forward and backward here, at the loop's sizes."""
        what = "host arrays" if host else "device arrays"
        try:
            g = torch.Generator(device=self.dev)
            g.manual_seed(17)
            T = (self.frames + 2 * 2 - 5) // 2 + 1                         # after the stride-2 convolution
            lp = torch.randn(T, self.batch, self.classes, device=self.dev, generator=g).requires_grad_()
            targets = [[1 + (7 * j + b) % (self.classes - 1) for j in range(self.len_range[0] + b % 15)]
                       for b in range(self.batch)]
            loss = self.ctc(lp.log_softmax(dim=-1), targets, host)
            loss.backward()
            torch.cuda.synchronize(self.dev)
            return True
        except Exception as e:  # noqa: BLE001 (this form is not used)
            print("workloads: ctc: F.ctc_loss with %s unavailable (%s: %s)"
                  % (what, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            return False

    def ctc(self, log_probs, targets, host):
        """F.ctc_loss over log_probs (T, B, V) and label lists, blank 0, every input length T."""
        T, B = log_probs.shape[0], len(targets)
        lengths = [len(t) for t in targets]
        flat = torch.tensor([c for t in targets for c in t], dtype=torch.int32)   # concatenated, on the host
        if host:
            return F.ctc_loss(log_probs, flat, (T,) * B, tuple(lengths), blank=0, reduction="mean")
        il = torch.full((B,), T, dtype=torch.int32, device=self.dev)
        tl = torch.tensor(lengths, dtype=torch.int32).to(self.dev, non_blocking=True)
        return F.ctc_loss(log_probs, flat.to(self.dev, non_blocking=True), il, tl, blank=0, reduction="mean")

    def ctc_ref(self, log_probs, targets):
        """The CTC loss written out (mean reduction): the alpha recursion over the extended
        label sequence in log space, -1e30 standing for log 0 so no gradient is NaN."""
        T, B, _ = log_probs.shape
        S = 2 * max(len(t) for t in targets) + 1
        ext, skip, ends = [], [], []
        for t in targets:
            e = [0] * S
            for j, c in enumerate(t):
                e[2 * j + 1] = c
            ext.append(e)
            skip.append([s >= 2 and e[s] != 0 and e[s] != e[s - 2] for s in range(S)])
            ends.append([2 * len(t), 2 * len(t) - 1])
        ext = torch.tensor(ext, device=self.dev)
        skip = torch.tensor(skip, device=self.dev)
        ends = torch.tensor(ends, device=self.dev)
        neg = -1e30
        lp = log_probs.gather(2, ext.unsqueeze(0).expand(T, B, S))          # T, B, S
        alpha = torch.cat([lp[0, :, :2], lp.new_full((B, S - 2), neg)], dim=1)
        for t in range(1, T):
            a2 = F.pad(alpha[:, :-1], (1, 0), value=neg)
            a3 = F.pad(alpha[:, :-2], (2, 0), value=neg).masked_fill(~skip, neg)
            alpha = torch.logsumexp(torch.stack([alpha, a2, a3]), dim=0) + lp[t]
        nll = -torch.logsumexp(alpha.gather(1, ends), dim=1)                 # B
        tl = torch.tensor([len(t) for t in targets], dtype=torch.float32, device=self.dev)
        return (nll / tl).mean()

    def utterances(self):
        """Each utterance's labels (no symbol twice in a row) and its frames' labels (0: silence)."""
        V, N = self.classes, self.frames
        targets, frames = [], []
        for _ in range(self.batch):
            labels, prev = [], 0
            for _ in range(self.rng.randint(*self.len_range)):
                c = self.rng.randint(1, V - 2)
                if prev and c >= prev:                                     # 1..V-1 but the one before
                    c += 1
                labels.append(c)
                prev = c
            row = [0] * self.rng.randint(0, self.lead_max)
            for c in labels:
                row += [c] * self.rng.randint(*self.hold_range)
                row += [0] * self.rng.randint(*self.gap_range)
            targets.append(labels)
            frames.append((row + [0] * N)[:N])
        return targets, frames

    def step(self, i):
        B, N = self.batch, self.frames
        targets, frames = self.utterances()
        w = self.rng.randint(0, self.mask_max)
        s = self.rng.randint(0, N - w)
        r = self.rng.random()
        fl = torch.tensor(frames, dtype=torch.long).to(self.dev, non_blocking=True)
        feat = self.proto[fl] + 0.5 * torch.randn(B, N, self.feats, device=self.dev, generator=self.gen)
        if w:
            feat[:, s:s + w] = 0.0
        self.opt.zero_grad(set_to_none=True)
        h = self.conv(feat.transpose(1, 2)).transpose(1, 2).contiguous()     # B, T, H
        h, _ = self.rnn(h)
        log_probs = self.out(h).log_softmax(dim=-1).transpose(0, 1).contiguous()   # T, B, V (float32)
        if self.host_ok or self.dev_ok:
            host = self.host_ok and (not self.dev_ok or r < 0.5)
            loss = self.ctc(log_probs, targets, host)
            path = "h" if host else "d"
        else:
            loss = self.ctc_ref(log_probs, targets)
            path = "r"
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 5.0, foreach=True)
        self.opt.step()
        with torch.no_grad():
            self.blank_buf[i].copy_((log_probs.detach().argmax(dim=-1) == 0).float().mean())
        self.notes[i] = "L=%d p=%s" % (sum(len(t) for t in targets), path)
        return loss.detach()

    def loss_lines(self):
        b = tensor_hexes(self.blank_buf)
        for i, note in self.notes.items():
            self.extra[i] = "%s b=%s" % (note, b[i])
        if self.steps:
            self.extra[0] = self.extra.get(0, "") + " c=%d%d" % (int(self.host_ok), int(self.dev_ok))
        return super().loss_lines()


class RoPECplxWorkload(Workload):
    """A Llama-style language model with rotary position embeddings computed as the Meta
    reference code computes them, in complex arithmetic: the frequency table is
    torch.polar(ones, outer(positions, inverse frequencies)) (complex64, 1024 positions), and
    every attention layer turns its queries and keys into complex pairs (view_as_complex on a
    float32 copy), multiplies them by the table's rows and turns them back (view_as_real,
    flatten, type_as), under bf16 autocast; RMSNorm, SwiGLU, 4 layers, d 256, 4 heads. Every
    step draws its sequence length (64, 128 or 256, the batch 2048 tokens over it) and a
    position offset into the table (a seeded host random.Random; positions drawn from a longer
    range, as randomized positional encodings train for length generalization), so the
    complex kernels read the table at an interior pointer that moves every step; the RoPE base
    is raised every 75 steps (10^4 to 5 x 10^5, adjusted base frequency as long-context
    training raises it) and the table rebuilt at a new address. Attention is
    F.scaled_dot_product_attention (causal) under sdpa_kernel with one backend a step, flash,
    memory-efficient or math, drawn by the host RNG among those a probe in setup finds
    working, so the kernels of attention and of its backward change family from step to step
    at one shape. Tokens: phrases of 16 repeated with 5 % noise. AdamW (foreach),
    clip_grad_norm_. A tool that replays a step's rotary kernels at another step's offset or
    table, or one backend's attention for another, trains on other values. The length, the
    offset and the backend end every line (" T=<n> s=<n> a=f|e|m"); the lines that rebuilt the
    table add the base and its real parts' sum (" th=<n> f=<hex>"), the first line the
    backends the probe found (" be=<letters>"). No sync in the loop."""

    tokens, lengths, vocab, d, heads, layers, ffn = 2048, (64, 128, 256), 1024, 256, 4, 4, 768
    maxpos, phrase, noise = 1024, 16, 0.05
    thetas, theta_every = (10000.0, 40000.0, 160000.0, 500000.0), 75

    def setup(self, mode="eager"):
        import random
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.sdpa_kernel = sdpa_kernel
        D, H, Hf = self.d, self.heads, self.ffn
        hd = D // H

        class RMSNorm(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(D))

            def forward(self, x):
                xf = x.float()
                return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * self.weight

        def rotary(x, fc):                                   # x: B, T, H, hd; fc: T, hd/2 (complex64)
            xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
            out = torch.view_as_real(xc * fc.view(1, fc.shape[0], 1, fc.shape[1])).flatten(3)
            return out.type_as(x)

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn_norm = RMSNorm()
                self.wq = nn.Linear(D, D, bias=False)
                self.wk = nn.Linear(D, D, bias=False)
                self.wv = nn.Linear(D, D, bias=False)
                self.wo = nn.Linear(D, D, bias=False)
                self.ffn_norm = RMSNorm()
                self.w1 = nn.Linear(D, Hf, bias=False)
                self.w2 = nn.Linear(Hf, D, bias=False)
                self.w3 = nn.Linear(D, Hf, bias=False)

            def forward(self, x, fc):
                B, T, _ = x.shape
                h = self.attn_norm(x)
                q = rotary(self.wq(h).view(B, T, H, hd), fc)
                k = rotary(self.wk(h).view(B, T, H, hd), fc)
                v = self.wv(h).view(B, T, H, hd)
                y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                   is_causal=True)
                x = x + self.wo(y.transpose(1, 2).reshape(B, T, D))
                h = self.ffn_norm(x)
                return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

        self.tok = nn.Embedding(self.vocab, D)
        self.blocks = nn.ModuleList([Block() for _ in range(self.layers)])
        self.norm = RMSNorm()
        self.head = nn.Linear(D, self.vocab, bias=False)
        self.model = nn.ModuleList([self.tok, self.blocks, self.norm, self.head]).to(self.dev)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, foreach=True)
        self.backends = [(c, b) for c, b in (("f", SDPBackend.FLASH_ATTENTION), ("e", SDPBackend.EFFICIENT_ATTENTION),
                                             ("m", SDPBackend.MATH)) if self.probe(c, b)]
        if not self.backends:
            raise RuntimeError("ropecplx: no attention backend ran in the probe")
        self.phase, self.freqs = -1, None
        self.f_buf = torch.zeros(len(self.thetas), dtype=torch.float32, device=self.dev)
        self.rng = random.Random(31337)
        self.notes = {}

    def probe(self, letter, backend):
        """Whether this backend alone runs causal bf16 attention forward and backward here."""
        try:
            g = torch.Generator(device=self.dev)
            g.manual_seed(23)
            q = torch.randn(2, self.heads, 64, self.d // self.heads, device=self.dev, generator=g,
                            dtype=torch.bfloat16).requires_grad_()
            with self.sdpa_kernel(backend):
                y = F.scaled_dot_product_attention(q, q * 0.5, q * 0.25, is_causal=True)
            y.float().square().sum().backward()
            torch.cuda.synchronize(self.dev)
            return True
        except Exception as e:  # noqa: BLE001 (this backend is not drawn)
            print("workloads: ropecplx: attention backend %s unavailable (%s: %s)"
                  % (letter, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            return False

    def table(self, theta):
        """The rotary frequency table for base theta: maxpos x hd/2, complex64."""
        hd = self.d // self.heads
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, device=self.dev)[:hd // 2].float() / hd))
        ang = torch.outer(torch.arange(self.maxpos, device=self.dev, dtype=torch.float32), inv)
        return torch.polar(torch.ones_like(ang), ang)

    def step(self, i):
        note = ""
        phase = min(i // self.theta_every, len(self.thetas) - 1)
        if phase != self.phase:
            self.phase = phase
            self.freqs = self.table(self.thetas[phase])                    # a new table, at a new address
            self.f_buf[phase].copy_(torch.view_as_real(self.freqs)[..., 0].sum())
            note = " th=%d f=@%d" % (int(self.thetas[phase]), phase)
        T = self.rng.choice(self.lengths)
        B = self.tokens // T
        s = self.rng.randint(0, self.maxpos - T)
        letter, backend = self.backends[self.rng.randrange(len(self.backends))]
        P, V = self.phrase, self.vocab
        ph = torch.randint(0, V, (B, 1, P), device=self.dev, generator=self.gen)
        tok = ph.expand(B, (T + P) // P, P).reshape(B, -1)[:, :T + 1]
        flip = torch.rand(B, T + 1, device=self.dev, generator=self.gen) < self.noise
        other = torch.randint(0, V, (B, T + 1), device=self.dev, generator=self.gen)
        tok = torch.where(flip, other, tok)
        fc = self.freqs[s:s + T]                                           # T, hd/2: an interior pointer
        self.opt.zero_grad(set_to_none=True)
        with self.sdpa_kernel(backend), torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            x = self.tok(tok[:, :-1])
            for b in self.blocks:
                x = b(x, fc)
            logits = self.head(self.norm(x))
        loss = F.cross_entropy(logits.float().reshape(-1, V), tok[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        self.opt.step()
        self.notes[i] = "T=%d s=%d a=%s%s" % (T, s, letter, note)
        return loss.detach()

    def loss_lines(self):
        f = tensor_hexes(self.f_buf)
        for i, note in self.notes.items():
            if "f=@" in note:
                head, _, k = note.rpartition("f=@")
                note = head + "f=" + f[int(k)]
            self.extra[i] = note
        if self.steps:
            self.extra[0] = self.extra.get(0, "") + " be=" + "".join(c for c, _ in self.backends)
        return super().loss_lines()


class SelCkptWorkload(Workload):
    """Selective activation checkpointing as torchtitan applies it: a GPT (6 pre-norm blocks,
    d 256, 4 heads, bias-free Linears, causal F.scaled_dot_product_attention in float32, which
    runs as memory-efficient attention, residual dropout 0.1) whose blocks run through
    torch.utils.checkpoint.checkpoint(use_reentrant=False, context_fn=...) with
    create_selective_checkpoint_contexts: a policy function sees every ATen op of the block's
    forward (a TorchDispatchMode) and says which outputs to keep and which to recompute, and
    backward, on the autograd thread, runs the block again under a second mode that launches
    the recomputed ops (dropout again with the CUDA RNG state set back to the forward's) and
    hands out the kept outputs from its cache with no launch. The policy changes every step (a
    seeded host random.Random): "o" keeps every matmul's and the attention's outputs, "a"
    keeps the attention's and every second matmul's (torchtitan's op-level policy, its matmul
    count kept per forward and recompute), "f" keeps nothing (the vanilla recompute, through
    the same contexts), "l" checkpoints every second block plainly and runs the others
    without, "n" checkpoints nothing. So backward launches a different subset of the
    forward's kernels every step, twins of forward launches that differ in pointers only, with
    the Philox offsets of the forward's dropout. Where the selective contexts fail (a probe in
    setup) "o" and "a" checkpoint plainly and the first line says " sac=0". Tokens: phrases
    of 16 repeated with 5 % noise. AdamW (foreach), clip_grad_norm_. A tool that replays a
    recompute with the sequence of another policy, or a dropout of the recompute with a fresh
    offset, gets other gradients. The policy and the gradient norm end every line
    (" ac=o|a|f|l|n n=<hex>"), " sac=1|0" the first. No sync in the loop."""

    batch, seq, vocab, d, heads, layers, p = 16, 128, 1024, 256, 4, 6, 0.1
    phrase, noise, kinds = 16, 0.05, "oafln"

    def setup(self, mode="eager"):
        import collections
        import random
        from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
        self.checkpoint = checkpoint
        D, H, p = self.d, self.heads, self.p
        aten = torch.ops.aten
        self.mm_ops = {aten.mm.default, aten.addmm.default}
        self.save_ops = set(self.mm_ops)
        for name in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                     "_scaled_dot_product_cudnn_attention"):
            packet = getattr(aten, name, None)
            if packet is not None and hasattr(packet, "default"):
                self.save_ops.add(packet.default)

        def make_policy(kind, counts):
            def policy(ctx, op, *args, **kwargs):
                if kind == "f" or op not in self.save_ops:
                    return CheckpointPolicy.PREFER_RECOMPUTE
                if kind == "a" and op in self.mm_ops:
                    key = "recompute" if ctx.is_recompute else "forward"
                    counts[key] += 1
                    if counts[key] % 2 == 0:                       # every second matmul recomputed
                        return CheckpointPolicy.PREFER_RECOMPUTE
                return CheckpointPolicy.MUST_SAVE
            return policy

        def context_fn():
            return create_selective_checkpoint_contexts(make_policy(self.kind, collections.defaultdict(int)))

        self.context_fn = context_fn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1 = nn.LayerNorm(D)
                self.qkv = nn.Linear(D, 3 * D, bias=False)
                self.proj = nn.Linear(D, D, bias=False)
                self.ln2 = nn.LayerNorm(D)
                self.fc1 = nn.Linear(D, 4 * D, bias=False)
                self.fc2 = nn.Linear(4 * D, D, bias=False)
                self.drop = nn.Dropout(p)

            def forward(self, x):
                B, T, C = x.shape
                q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))
                return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))

        self.model = nn.ModuleDict({
            "tok": nn.Embedding(self.vocab, D),
            "blocks": nn.ModuleList([Block() for _ in range(self.layers)]),
            "ln_f": nn.LayerNorm(D),
            "head": nn.Linear(D, self.vocab, bias=False),
        }).to(self.dev)
        self.pos = nn.Parameter(0.02 * torch.randn(1, self.seq, D, device=self.dev, generator=self.gen))
        self.drop = nn.Dropout(p)
        self.params = list(self.model.parameters()) + [self.pos]
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, foreach=True)
        self.sac = self.probe()
        self.norm_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.rng = random.Random(8191)
        self.notes = {}

    def probe(self):
        """Whether a block runs forward and backward under the selective contexts here."""
        self.kind = "a"
        try:
            x = torch.randn(2, 16, self.d, device=self.dev).requires_grad_()
            y = self.checkpoint(self.model["blocks"][0], x, use_reentrant=False, context_fn=self.context_fn)
            y.square().mean().backward()
            torch.cuda.synchronize(self.dev)
            ok = True
        except Exception as e:  # noqa: BLE001 (plain checkpointing instead)
            print("workloads: selckpt: selective checkpointing unavailable (%s: %s); plain checkpoints"
                  % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
            ok = False
        for q in self.params:
            q.grad = None
        return ok

    def forward(self, idx):
        m = self.model
        x = self.drop(m["tok"](idx) + self.pos[:, :idx.shape[1]])
        for li, b in enumerate(m["blocks"]):
            if self.kind in "oaf" and self.sac:
                x = self.checkpoint(b, x, use_reentrant=False, context_fn=self.context_fn)
            elif self.kind in "oaf" or (self.kind == "l" and li % 2 == 1):
                x = self.checkpoint(b, x, use_reentrant=False)
            else:
                x = b(x)
        return m["head"](m["ln_f"](x))

    def step(self, i):
        self.kind = self.rng.choice(self.kinds)
        B, T, P, V = self.batch, self.seq, self.phrase, self.vocab
        ph = torch.randint(0, V, (B, 1, P), device=self.dev, generator=self.gen)
        tok = ph.expand(B, (T + P) // P, P).reshape(B, -1)[:, :T + 1]
        flip = torch.rand(B, T + 1, device=self.dev, generator=self.gen) < self.noise
        other = torch.randint(0, V, (B, T + 1), device=self.dev, generator=self.gen)
        tok = torch.where(flip, other, tok)
        self.opt.zero_grad(set_to_none=True)
        logits = self.forward(tok[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), tok[:, 1:].reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        self.opt.step()
        self.norm_buf[i].copy_(norm)
        self.notes[i] = self.kind
        return loss.detach()

    def loss_lines(self):
        n = tensor_hexes(self.norm_buf)
        for i, kind in self.notes.items():
            self.extra[i] = "ac=%s n=%s" % (kind, n[i])
        if self.steps:
            self.extra[0] = self.extra.get(0, "") + " sac=%d" % int(self.sac)
        return super().loss_lines()


class HostRegWorkload(TaskWorkload):
    """A host staging ring pinned in place and unpinned again, as loaders that page-lock
    existing host memory do (DGL's pin_memory_inplace, vLLM's and offloading libraries'
    torch.cuda.cudart().cudaHostRegister on tensors they own): the dataset (16384 x 256, labels
    from a fixed projection) lives in pageable host memory, and every step gathers a batch of
    96, 160 or 256 rows (a seeded host random.Random) by index_select into a slot of a staging
    area (one CPU tensor, the slots and a metrics ring carved out of it at page offsets) and
    copies it to the GPU with .to(non_blocking=True). The area alternates every 40 steps: in a
    pageable phase (steps 0-39, 80-119, ...) it is ordinary memory and the loader uses one slot,
    gathering the next step's batch into it as soon as this step's copies return (a copy from
    pageable memory has taken its bytes by then), and the loss, gradient norm and accuracy are
    copied back into it with non_blocking=True and read at once (a copy into pageable memory is
    done when it returns); in a pinned phase the area is registered (cudaHostRegister, through
    torch.cuda.cudart()), the loader rotates three slots and rewrites one only after the
    event recorded behind its copies completed, and the metrics come back asynchronously into
    a slot the host reads two steps later after that step's event. Between phases every event
    is synchronized and the area registered or unregistered (cudaHostUnregister). The loss as
    the host read it sets the learning rate (down by 0.95 above its running average, else up
    by 1.01, clamped). The same host addresses thus change between memory the driver knows and
    memory it does not every 40 steps: a tool that decides a copy's semantics by what it saw of
    an address before (copying out of pageable memory late, after the host rewrote it, or
    leaving the host to read a metrics slot before the copy into it ran) gives other values.
    Whether PyTorch sees the area as pinned (is_pinned(), a pointer-attributes query), the loss
    as the host read it and the learning rate the step used end every line
    (" p=1|0 l=<hex> lr=<float.hex>"); the first line adds whether registration works here
    (" reg=1|0", probed by the driver's cuMemHostRegister; with 0 every phase is pageable).
    The MLP (6 layers, dropout 0.1), AdamW (foreach), clip_grad_norm_. No sync in the loop but
    the pageable phases' read-backs and the pinned phases' event waits."""

    rows = (96, 160, 256)
    dataset, ring, lag, phase = 16384, 3, 2, 40
    lr0, lr_min, lr_max = 1e-3, 1e-4, 3e-3

    def setup(self, mode="eager"):
        import ctypes
        import random
        self.host_dataset_setup()                                       # the dataset, in pageable memory
        R, N, page = self.ring, max(self.rows), 4096

        def up(n):
            return (n + page - 1) // page * page

        sx, sy, sm = R * N * self.din * 4, R * N * 8, R * 3 * 4
        self.area = torch.zeros(up(sx) + up(sy) + up(sm), dtype=torch.uint8)   # one range to register
        self.stage_x = self.area[:sx].view(torch.float32).view(R, N, self.din)
        self.stage_y = self.area[up(sx):up(sx) + sy].view(torch.int64).view(R, N)
        self.met = self.area[up(sx) + up(sy):up(sx) + up(sy) + sm].view(torch.float32).view(R, 3)
        self.area_ptr, self.area_bytes = self.area.data_ptr(), self.area.numel()
        self.cudart = torch.cuda.cudart()
        # The probe goes through the driver, so that a refusal leaves no error pending in the
        # runtime (which PyTorch's next launch check would raise).
        cu = ctypes.CDLL("libcuda.so.1")
        reg, unreg = cu.cuMemHostRegister_v2, cu.cuMemHostUnregister
        reg.argtypes, reg.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint], ctypes.c_int
        unreg.argtypes, unreg.restype = [ctypes.c_void_p], ctypes.c_int
        rc = reg(self.area_ptr, self.area_bytes, 0)
        self.can_register = rc == 0 and unreg(self.area_ptr) == 0
        if not self.can_register:
            print("workloads: hostreg: cuMemHostRegister refused the staging area (CUresult %d): "
                  "every phase pageable" % rc)
        self.registered = False
        self.ev_in = [None] * R
        self.pending = []                                               # (step, slot, event): metrics in flight
        self.ready = None                                               # rows already gathered into slot 0
        self.cpu_gen = torch.Generator().manual_seed(2718)
        self.rng = random.Random(1618)
        self.avg = None
        self.read = {}                                                  # step -> the loss as the host read it
        self.notes = {}

    def set_registered(self, on):
        if on:
            rc = self.cudart.cudaHostRegister(self.area_ptr, self.area_bytes, 0)
        else:
            rc = self.cudart.cudaHostUnregister(self.area_ptr)
        if rc != self.cudart.cudaError.success:
            raise RuntimeError("hostreg: cudaHost%sregister failed (%r)" % ("R" if on else "Un", rc))
        self.registered = on

    def gather(self, k):
        """A batch into slot k: its rows."""
        n = self.rng.choice(self.rows)
        idx = torch.randint(0, self.dataset, (n,), generator=self.cpu_gen)
        torch.index_select(self.host_x, 0, idx, out=self.stage_x[k, :n])
        torch.index_select(self.host_y, 0, idx, out=self.stage_y[k, :n])
        return n

    def took(self, j, loss):
        """The host read step j's loss: the learning rate follows it."""
        self.read[j] = loss
        if math.isfinite(loss):
            if self.avg is not None:
                self.lr = min(self.lr_max, max(self.lr_min, self.lr * (0.95 if loss > self.avg else 1.01)))
            self.avg = loss if self.avg is None else 0.9 * self.avg + 0.1 * loss
        for group in self.opt.param_groups:
            group["lr"] = self.lr

    def drain(self):
        for ev in self.ev_in:
            if ev is not None:
                ev.synchronize()
        self.ev_in = [None] * self.ring
        while self.pending:
            j, k, ev = self.pending.pop(0)
            ev.synchronize()
            self.took(j, float(self.met[k, 0]))

    def step(self, i):
        pin = self.can_register and (i // self.phase) % 2 == 1
        if pin != self.registered:
            self.drain()                                                # nothing in flight to or from the area
            self.set_registered(pin)
        if pin:
            k = i % self.ring
            if self.ev_in[k] is not None:
                self.ev_in[k].synchronize()                             # the copies out of slot k are done
            n = self.gather(k)
        else:
            k = 0
            n = self.ready if self.ready is not None else self.gather(0)
            self.ready = None
        x = self.stage_x[k, :n].to(self.dev, non_blocking=True)
        y = self.stage_y[k, :n].to(self.dev, non_blocking=True)
        if pin:
            ev = torch.cuda.Event()
            ev.record()
            self.ev_in[k] = ev
        elif (i + 1) // self.phase == i // self.phase and i + 1 < self.steps:
            self.ready = self.gather(0)                                 # the slot rewritten at once
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        lr = self.lr
        self.opt.step()
        with torch.no_grad():
            acc = (logits.argmax(dim=-1) == y).float().mean()
            metrics = torch.stack([loss.detach(), gnorm, acc])
        self.met[k].copy_(metrics, non_blocking=True)
        if pin:
            ev = torch.cuda.Event()
            ev.record()
            self.pending.append((i, k, ev))
            if len(self.pending) > self.lag:
                j, kj, evj = self.pending.pop(0)
                evj.synchronize()
                self.took(j, float(self.met[kj, 0]))
        else:
            self.took(i, float(self.met[0, 0]))                         # the copy was done when copy_ returned
        self.notes[i] = ("p=%d" % int(self.stage_x.is_pinned()), lr)
        return loss

    def loss_lines(self):
        self.drain()
        for i, (note, lr) in self.notes.items():
            self.extra[i] = "%s l=%s lr=%s" % (note, f32_hex(self.read.get(i, float("nan"))), float.hex(lr))
        if self.steps:
            self.extra[0] = self.extra.get(0, "") + " reg=%d" % int(self.can_register)
        return super().loss_lines()

    def finish(self):
        self.drain()
        if self.registered:
            torch.cuda.synchronize(self.dev)
            self.set_registered(False)


# --------------------------------------------------------------------------- sixteenth red-team round
# Patterns the rounds before leave out, each chosen for what a tool that holds launches back,
# matches them against recorded sequences and replays graphs with patched arguments could get
# wrong: a model's heads run by torch.nn.parallel.parallel_apply, four fresh Python threads a
# step launching at once onto one stream (the legacy default stream, or a side stream the caller
# made current), each with a cuBLAS handle and a CUDA generator of its own, blocks one thread
# freed taken by another in stream order alone; the program's own CUDA graph captured in a
# background thread (capture_error_mode "thread_local" or "relaxed", torch.cuda.graph's own
# synchronize and empty_cache from that thread) and replayed there while the main thread trains
# eagerly on the default stream; a whole-step graph of the program's own with external event
# nodes (torch.cuda.Event(external=True)): it waits on a loader stream's eager record at its
# start, and eager streams wait on the records it makes after the forward and after clipping,
# reading the loss and the gradients while the graph still runs the optimizer, the host reading
# the loss early; AWD-LSTM (weight-dropped cuDNN LSTMs whose weights are packed anew every call,
# truncated backpropagation through a length drawn every step with the state carried across
# steps, NT-ASGD switching from SGD to ASGD on an evaluation read back, the averaged weights
# swapped in by p.data for every evaluation); and DistributedDataParallel over gloo with CUDA
# gradients, whose buckets go through pinned host memory on gloo's streams and worker threads,
# one of which makes the default stream wait for its copies.

class PApplyWorkload(TaskWorkload):
    """A shared trunk and four heads run by torch.nn.parallel.parallel_apply on one GPU, as
    DataParallel's replicas and multi-head models built on it do: every step the main thread
    runs the trunk (Linear 256 to 512, GELU) on a batch of 4 x 64 rows, cuts its output into
    four chunks (views) and parallel_apply starts four new Python threads, one per head (3-layer
    MLPs of widths 256, 384, 512 and 640, so each launches its own kernels), each under the
    stream the caller had current: on about half the steps (a seeded host random.Random) the
    legacy default stream the main thread uses, on the others a side stream the caller made
    current after side.wait_stream(main) (the trunk's output recorded on it with record_stream,
    since the heads' backward reads it there), joined back by main.wait_stream(side). The
    threads launch at once, in an order the GIL and the scheduler pick anew in every run, each
    with a cuBLAS handle of its own from PyTorch's pool and dropout drawn from a CUDA generator
    of its own (the default generator would hand out Philox offsets in thread order), and exit
    with their work queued; the caching allocator hands a block one thread freed to another
    thread's next allocation on the same stream, ordered by nothing but that stream. The heads'
    outputs are joined by torch.cat on the main thread, the cross-entropy's backward runs on the
    autograd thread through an autograd graph recorded by five threads, then
    clip_grad_norm_ and AdamW (foreach). A tool that issues one thread's held launches after
    another thread's later ones on the same stream (a block rewritten before the kernel that
    read it ran), or joins a side stream at the wrong point, gives other values. The stream the
    heads ran on and the gradient norm end every line (" p=d|s n=<hex>"). No sync in the loop."""

    heads, rows, trunk, p = 4, 64, 512, 0.1
    widths = (256, 384, 512, 640)

    def setup(self, mode="eager"):
        import random
        from torch.nn.parallel import parallel_apply
        self.parallel_apply = parallel_apply
        T, nout, p = self.trunk, self.nout, self.p

        class Head(nn.Module):
            """A 3-layer MLP head whose dropout masks come from its own CUDA generator."""

            def __init__(self, width, seed, dev):
                super().__init__()
                self.fc1 = nn.Linear(T, width)
                self.fc2 = nn.Linear(width, width)
                self.fc3 = nn.Linear(width, nout)
                self.gen = torch.Generator(device=dev)
                self.gen.manual_seed(seed)

            def drop(self, h):
                keep = torch.rand(h.shape, device=h.device, generator=self.gen) >= p
                return h * keep / (1.0 - p)

            def forward(self, h):
                h = self.drop(F.gelu(self.fc1(h)))
                h = self.drop(F.gelu(self.fc2(h)))
                return self.fc3(h)

        self.stem = nn.Sequential(nn.Linear(self.din, T), nn.GELU()).to(self.dev)
        self.branches = nn.ModuleList([Head(w, 4040 + k, self.dev) for k, w in enumerate(self.widths)]).to(self.dev)
        self.params = list(self.stem.parameters()) + list(self.branches.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.side = torch.cuda.Stream(device=self.dev)
        self.norm_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.rng = random.Random(4041)
        self.notes = {}

    def step(self, i):
        on_side = self.rng.random() < 0.5
        K, main = self.heads, torch.cuda.current_stream(self.dev)
        x = torch.randn(K * self.rows, self.din, device=self.dev, generator=self.gen)
        y = (x @ self.label_proj).argmax(dim=-1)
        self.opt.zero_grad(set_to_none=True)
        h = self.stem(x)
        chunks = h.chunk(K)
        devices = [self.dev] * K
        if on_side:
            self.side.wait_stream(main)
            h.record_stream(self.side)                    # the heads read it there, in backward too
            with torch.cuda.stream(self.side):
                outs = self.parallel_apply(list(self.branches), chunks, devices=devices)
            main.wait_stream(self.side)
        else:
            outs = self.parallel_apply(list(self.branches), chunks, devices=devices)
        loss = F.cross_entropy(torch.cat(outs), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        self.opt.step()
        self.norm_buf[i].copy_(norm)
        self.notes[i] = "s" if on_side else "d"
        return loss

    def loss_lines(self):
        n = tensor_hexes(self.norm_buf)
        for i, where in self.notes.items():
            self.extra[i] = "p=%s n=%s" % (where, n[i])
        return super().loss_lines()


class BgCaptureWorkload(EvaluatorThread, TaskWorkload):
    """An evaluator thread that captures and replays a CUDA graph of its own while the main
    thread trains eagerly, as serving stacks that graph an eval or decode path next to a live
    training loop do: every 10th step the main thread copies the parameters into one of two
    snapshot buffers (_foreach_copy_ on the default stream), records an event and hands (round,
    event) to a Python thread through a queue.Queue. That thread (grad mode off, its own
    non-blocking stream) waits for the event, copies the snapshot into an eval copy of the model
    and replays its eval graph (the summed cross-entropy and the correct count of a held-out
    batch copied into the graph's static input) and reads the result back through pinned memory
    after an event's synchronize. It captures that graph itself, by torch.cuda.graph on its
    stream, at rounds 0, 10 and 20 (steps 9, 109 and 209) for batches of 256, 512 and 384 rows,
    in capture_error_mode "thread_local", "relaxed" and "thread_local" (two eager warm-up passes
    first, the previous graph dropped), while the main thread keeps launching: torch.cuda.graph
    synchronizes the device and empties the caching allocator's cache (cudaFree) from that
    thread, then the capture runs beside the main thread's eager kernels, allocations and frees.
    At round r the main thread takes the reply of round r - 2 (a host wait, rarely a long one)
    and makes the default stream wait for its event before it rewrites that round's snapshot
    buffer, and cuts its learning rate (a kernel argument) by 0.8 when that evaluation did not
    improve on the best. The main thread trains the MLP (6 layers) with AdamW (foreach); its
    input dropout comes from the batch generator, not from the default CUDA generator, which a
    capture in any thread puts in capture mode. A tool that answers the evaluator's synchronize
    or cudaFree before the main thread's held work ran, mixes the main thread's launches into
    the capture, or lets a replay read a snapshot before its copy ran, gives other values. The
    round's eval loss and correct count end every 10th line (" ev=<hex> acc=<n>", and " cap=t|r"
    where the round captured its graph), the learning rate the lines where a reply was taken
    (" lr=<float.hex>"). No sync in the main thread; the host waits on the reply queue."""

    hidden, every, lag, p = 512, 10, 2, 0.1
    sizes = (256, 512, 384)                       # eval rows, one graph each
    modes = ("thread_local", "relaxed", "thread_local")
    recapture_every, pool_batches = 10, 16        # rounds per graph; held-out batches

    def setup(self, mode="eager"):
        import copy
        import queue
        import threading
        self.model = MLP(self.din, self.hidden, self.nout, layers=6).to(self.dev)
        self.params = list(self.model.parameters())
        self.lr = 1e-3
        self.opt = torch.optim.AdamW(self.params, lr=self.lr, weight_decay=0.01, foreach=True)
        self.label_setup()
        self.emodel = copy.deepcopy(self.model).eval()
        self.emodel.requires_grad_(False)
        self.eparams = list(self.emodel.parameters())
        self.snaps = [[torch.empty_like(q) for q in self.params] for _ in range(self.lag)]
        self.pool_x = torch.randn(self.pool_batches, max(self.sizes), self.din, device=self.dev, generator=self.gen)
        self.pool_y = (self.pool_x @ self.label_proj).argmax(dim=-1)
        self.bg = torch.cuda.Stream(device=self.dev)
        self.bg.wait_stream(torch.cuda.current_stream(self.dev))   # its first copies read what setup made
        self.host_out = torch.zeros(2, dtype=torch.float32).pin_memory()
        self.graph, self.graph_k = None, -1
        self.results, self.captured, self.lrs = {}, {}, {}
        self.best, self.sent, self.taken = None, 0, 0
        self.failure = None
        self.jobs, self.replies = queue.Queue(), queue.Queue()
        self.start_evaluator("workloads-bgcapture")

    # --- the evaluator thread
    def evaluator(self):
        try:
            with torch.cuda.device(self.dev), torch.no_grad(), torch.cuda.stream(self.bg):
                while True:
                    job = self.jobs.get()
                    if job is None:
                        return
                    self.evaluate(*job)
        except BaseException as e:  # noqa: BLE001 (handed to the main thread)
            self.failure = e
            self.replies.put(None)

    def eval_body(self):
        logits = self.emodel(self.sx)
        return torch.stack([F.cross_entropy(logits, self.sy, reduction="sum"),
                            (logits.argmax(dim=-1) == self.sy).sum().float()])

    def capture(self, r, k):
        """The eval graph for sizes[k], captured on this thread's stream."""
        n = self.sizes[k]
        self.graph = self.out = None                               # the old graph and its pool go
        self.sx = self.pool_x[0, :n].clone()
        self.sy = self.pool_y[0, :n].clone()
        for _ in range(2):                                         # warm-up, on the capture's stream
            self.eval_body()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=self.bg, capture_error_mode=self.modes[k]):
            self.out = self.eval_body()
        self.graph, self.graph_k = g, k
        self.captured[r] = self.modes[k][0]

    def evaluate(self, r, ready):
        self.bg.wait_event(ready)                                  # the snapshot was copied
        torch._foreach_copy_(self.eparams, self.snaps[r % self.lag])
        k = min(r // self.recapture_every, len(self.sizes) - 1)
        if k != self.graph_k:
            self.capture(r, k)
        n, b = self.sizes[k], r % self.pool_batches
        self.sx.copy_(self.pool_x[b, :n])
        self.sy.copy_(self.pool_y[b, :n])
        self.graph.replay()
        self.host_out.copy_(self.out, non_blocking=True)
        done = torch.cuda.Event()
        done.record(self.bg)
        done.synchronize()
        loss, hits = self.host_out.tolist()
        self.results[r] = (loss, int(hits) if math.isfinite(hits) else -1)
        self.replies.put((r, done))

    # --- the main thread
    def take(self, i):
        """The oldest reply: the default stream waits for its event, the learning rate follows it."""
        item = self.replies.get(timeout=120)
        if item is None:
            raise RuntimeError("bgcapture: the evaluator thread failed: %r" % (self.failure,))
        r, done = item
        self.taken += 1
        torch.cuda.current_stream(self.dev).wait_event(done)      # its reads of the snapshot are done
        loss = self.results[r][0]
        if math.isfinite(loss):
            if self.best is None or loss < self.best:
                self.best = loss
            else:
                self.lr *= 0.8
                self.opt.param_groups[0]["lr"] = self.lr
        self.lrs[i] = self.lr

    def step(self, i):
        x, y = self.batch_for(i)
        keep = torch.rand(x.shape, device=self.dev, generator=self.gen) >= self.p
        x = x * keep / (1.0 - self.p)
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        if i % self.every == self.every - 1:
            r = i // self.every
            if r >= self.lag:
                self.take(i)                                       # round r - lag: its buffer is free
            torch._foreach_copy_(self.snaps[r % self.lag], [q.detach() for q in self.params])
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(self.dev))
            self.jobs.put((r, ready))
            self.sent += 1
        return loss

    def loss_lines(self):
        while self.taken < self.sent:
            self.take(self.steps - 1)
        for r, (ev, acc) in self.results.items():
            i = r * self.every + self.every - 1
            self.extra[i] = "ev=%s acc=%d" % (f32_hex(ev), acc)
            if r in self.captured:
                self.extra[i] += " cap=" + self.captured[r]
        self.add_lr_extras()
        return super().loss_lines()


class ExtEventWorkload(TaskWorkload):
    """A whole training step graphed by the program with external event nodes
    (torch.cuda.Event(external=True), cudaEventRecordExternal and cudaEventWaitExternal), as
    pipelines that overlap logging and data loading with a graphed step do: a loader stream
    writes every step's batch into the static input (normal_ from the batch generator, labels
    by a matmul) after waiting for the event the step before recorded once its backward was done,
    and records ev_data; the step waits for ev_data, runs forward (MLP, 6 layers, dropout 0.1),
    the cross-entropy and the accuracy, records ev_fwd, runs backward and clip_grad_norm_,
    records ev_clip, and steps a capturable AdamW whose learning rate is a CUDA tensor. A logger
    stream waits for ev_fwd and copies the loss and accuracy into a ring, a stats stream waits
    for ev_clip and computes the gradient norm (_foreach_norm) while the optimizer still runs,
    and the default stream waits for both before the next step; every 10th step the logger
    also copies the loss into pinned memory and records an event the host synchronizes at
    once, so the host reads the loss while the step's backward may still run, and sets the
    next learning rate from it (fill_ of the tensor, down by 0.95 above its running average,
    else up by 1.01, clamped). Steps 0-39 run eagerly, with the same events recorded eagerly;
    step 40 trains on a side stream as the warm-up and then the program captures the step by
    torch.cuda.graph on that stream, so ev_data's wait and the two records become event nodes
    of its graph; from then on the default stream replays the graph, but every 25th step runs
    eagerly again (gradients zeroed in place in the graph's own gradient tensors). So the same
    event handles are recorded by eager calls on some steps and by nodes inside the program's
    graph on others, and eager work waits on records inside a graph still running. A tool that
    binds the graph's wait to an earlier record (issuing the loader's work after the graph), or
    an eager wait to a record other than the graph's (reading a loss or gradients of another
    step), gives other values. Where torch.cuda.Event has no external flag every step runs
    eagerly and the first line says " ext=0". The step's kind, accuracy and gradient norm end
    every line (" g=e|c|r a=<hex> n=<hex>": eager, captured after the warm-up, replayed), the
    loss as the host read it and the learning rate it set every 10th (" h=<hex>
    lr=<float.hex>"); the loss is the logger's copy. No sync in the loop but the host's early
    reads."""

    capture_at, eager_every, host_every = 40, 25, 10
    lr0, lr_min, lr_max = 1e-3, 1e-4, 3e-3

    def setup(self, mode="eager"):
        self.model = MLP(self.din, self.hidden, self.nout, layers=6, dropout=0.1).to(self.dev)
        self.params = list(self.model.parameters())
        self.lr = self.lr0
        self.opt = torch.optim.AdamW(self.params, lr=torch.tensor(self.lr0, device=self.dev), weight_decay=0.01,
                                     foreach=True, capturable=True)
        self.label_setup()
        self.sx = torch.zeros(self.batch, self.din, device=self.dev)
        self.sy = torch.zeros(self.batch, dtype=torch.long, device=self.dev)
        self.loader, self.logger, self.stats, self.side = (torch.cuda.Stream(device=self.dev) for _ in range(4))
        self.loader.wait_stream(torch.cuda.current_stream(self.dev))    # label_proj, sx, sy
        try:
            self.ev_data, self.ev_fwd, self.ev_clip = (torch.cuda.Event(external=True) for _ in range(3))
            self.external = True
        except TypeError:                                                # a torch without external events
            print("workloads: extevent: torch.cuda.Event has no external flag: every step eager")
            self.ev_data, self.ev_fwd, self.ev_clip = (torch.cuda.Event() for _ in range(3))
            self.external = False
        self.ev_host = torch.cuda.Event()
        self.host = torch.zeros(2, dtype=torch.float32).pin_memory()
        self.log_buf = torch.zeros(self.steps, 2, dtype=torch.float32, device=self.dev)   # loss, accuracy
        self.norm_buf = torch.zeros(self.steps, dtype=torch.float32, device=self.dev)
        self.graph = None
        self.avg = None
        self.notes, self.read = {}, {}

    def load(self):
        """This step's batch into the static input, on the loader stream, then ev_data."""
        with torch.cuda.stream(self.loader):
            self.loader.wait_event(self.ev_clip)         # the step before has read sx and sy
            self.sx.normal_(generator=self.gen)
            self.sy.copy_((self.sx @ self.label_proj).argmax(dim=-1))
            self.ev_data.record(self.loader)

    def body(self):
        """One training step on the current stream: eagerly, or into the capture."""
        cur = torch.cuda.current_stream(self.dev)
        cur.wait_event(self.ev_data)                     # in the graph: an event wait node
        logits = self.model(self.sx)
        loss = F.cross_entropy(logits, self.sy)
        acc = (logits.argmax(dim=-1) == self.sy).float().mean()
        self.ev_fwd.record(cur)                          # in the graph: an event record node
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=True)
        self.ev_clip.record(cur)
        self.opt.step()
        return loss.detach(), acc

    def log(self, i, loss, acc, host):
        """The logger and stats streams read this step's outputs once its events say so."""
        main = torch.cuda.current_stream(self.dev)
        with torch.cuda.stream(self.logger):
            self.logger.wait_event(self.ev_fwd)
            self.log_buf[i, 0].copy_(loss)
            self.log_buf[i, 1].copy_(acc)
            if host:
                self.host.copy_(self.log_buf[i], non_blocking=True)
                self.ev_host.record(self.logger)
        with torch.cuda.stream(self.stats):
            self.stats.wait_event(self.ev_clip)
            norms = torch._foreach_norm([q.grad for q in self.params])
            self.norm_buf[i].copy_(torch.linalg.vector_norm(torch.stack(norms)))
        main.wait_stream(self.logger)
        main.wait_stream(self.stats)

    def steer(self, i):
        """The host reads the loss early (the step may still run) and sets the next learning rate."""
        self.ev_host.synchronize()
        loss = float(self.host[0])
        if math.isfinite(loss):
            if self.avg is not None:
                self.lr = min(self.lr_max, max(self.lr_min, self.lr * (0.95 if loss > self.avg else 1.01)))
            self.avg = loss if self.avg is None else 0.9 * self.avg + 0.1 * loss
        self.opt.param_groups[0]["lr"].fill_(self.lr)           # the tensor the graph reads
        self.read[i] = (loss, self.lr)

    def capture(self, i, host):
        """Step i trains on the side stream (the warm-up), then the program captures the step."""
        main = torch.cuda.current_stream(self.dev)
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            self.opt.zero_grad(set_to_none=False)
            loss, acc = self.body()
            self.log(i, loss, acc, host)
        main.wait_stream(self.side)
        self.opt.zero_grad(set_to_none=True)             # the capture's backward makes them, in its pool
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=self.side):
            self.static_loss, self.static_acc = self.body()
        self.graph = g

    def step(self, i):
        host = i % self.host_every == self.host_every - 1
        self.load()
        if i == self.capture_at and self.external:
            self.capture(i, host)
            kind = "c"
        else:
            if self.graph is not None and i % self.eager_every != self.eager_every - 1:
                self.graph.replay()
                loss, acc, kind = self.static_loss, self.static_acc, "r"
            else:
                self.opt.zero_grad(set_to_none=False)
                loss, acc = self.body()
                kind = "e"
            self.log(i, loss, acc, host)
        if host:
            self.steer(i)
        self.notes[i] = kind
        return self.log_buf[i, 0]

    def loss_lines(self):
        logged, n = tensor_hexes(self.log_buf[:, 1]), tensor_hexes(self.norm_buf)
        for i, kind in self.notes.items():
            self.extra[i] = "g=%s a=%s n=%s" % (kind, logged[i], n[i])
            if i in self.read:
                loss, lr = self.read[i]
                self.extra[i] += " h=%s lr=%s" % (f32_hex(loss), float.hex(lr))
        if self.steps:
            self.extra[0] = self.extra.get(0, "") + " ext=%d" % int(self.external)
        return super().loss_lines()


class AWDLSTMWorkload(Workload):
    """AWD-LSTM word-level language modelling as Merity et al.'s recipe trains it: three
    single-layer cuDNN LSTMs (256 to 512 to 512 to 256 units, the embedding tied to the
    decoder) whose hidden-to-hidden weights are dropped out anew every step (DropConnect
    through a WeightDrop wrapper as fastai's WeightDropout writes it: the parameter replaced by
    a dropped copy set on the LSTM before each call, flatten_parameters disabled, so cuDNN packs
    the weights into a fresh buffer at every call and backward unpacks their gradients),
    embedding dropout of whole rows, locked (variational) dropout between layers, activation
    and temporal activation regularization. Truncated backpropagation through time over a
    token stream (32 columns of phrases of 8 tokens with 5 % noise, on the GPU): every step's
    length is drawn by a seeded host random.Random (about N(48, 5), half as long on 5 % of
    steps), the batch is a view into the stream at a moving offset, the LSTMs' state is carried
    from step to step (detached), reset where the stream ends, and the learning rate is scaled
    by the length for the step. SGD (foreach, lr 5, clip 0.25) until NT-ASGD's trigger: every
    20th step the model is evaluated on a held-out stream in two chunks (state carried, .item()
    read back) and, once that loss is worse than the best before the last two evaluations (or
    from step 159 on), the optimizer becomes torch.optim.ASGD (t0=0, lambd=0, foreach), which
    reads its step count back and uploads two scalars per parameter from the host every step;
    from then on every evaluation swaps ASGD's averaged weights in by p.data = ax.clone() and the
    trained ones back after. A tool that replays a step's cuDNN kernels with another length's
    workspace, or the carried state of another step, or misses a weight packing, trains on
    other values. The step's length and optimizer end every line (" T=<n> o=s|a", " e" where the
    stream began again), the evaluation loss every 20th (" ev=<hex>", " sw" where the optimizer
    switched). A sync every ASGD step and every evaluation."""

    syncs = True
    vocab, emb, hid, batch, bptt = 1024, 256, 512, 32, 48
    dropout, dropouth, dropouti, dropoute, wdrop = 0.4, 0.25, 0.4, 0.1, 0.5
    alpha, beta, lr, clip, wdecay = 2.0, 1.0, 5.0, 0.25, 1.2e-6
    corpus, eval_len, eval_batch, eval_chunk, phrase, phrases, noise = 4096, 129, 16, 64, 8, 64, 0.05
    eval_every, nonmono, force_switch = 20, 2, 150

    def setup(self, mode="eager"):
        import random
        import warnings
        # cuDNN warns once that the weights are not one contiguous chunk: that is the point here.
        warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous")
        V, E, H, dev, wdrop = self.vocab, self.emb, self.hid, self.dev, self.wdrop

        class WeightDrop(nn.Module):
            """DropConnect on an LSTM's hidden-to-hidden weight: the LSTM's parameter removed, a
            raw one kept here, a dropped copy set on the LSTM before every call."""

            def __init__(self, rnn, p):
                super().__init__()
                self.rnn, self.p = rnn, p
                raw = rnn.weight_hh_l0.detach().clone()
                delattr(rnn, "weight_hh_l0")
                self.weight_hh_raw = nn.Parameter(raw)
                rnn.flatten_parameters = lambda: None      # the weights stay apart: packed at every call

            def forward(self, x, h):
                raw = self.weight_hh_raw
                setattr(self.rnn, "weight_hh_l0", F.dropout(raw, self.p, training=True) if self.training
                        else raw.clone())                  # never the Parameter itself (it would register)
                return self.rnn(x, h)

        class AWD(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Embedding(V, E, device=dev)
                sizes = (E, H, H, E)
                self.rnns = nn.ModuleList([WeightDrop(nn.LSTM(sizes[k], sizes[k + 1], device=dev), wdrop)
                                           for k in range(3)])
                self.decoder = nn.Linear(E, V, device=dev)
                self.decoder.weight = self.encoder.weight  # tied
                with torch.no_grad():
                    self.encoder.weight.uniform_(-0.1, 0.1)
                    self.decoder.bias.zero_()

        self.model = AWD()
        self.params = list(self.model.parameters())
        self.opt = torch.optim.SGD(self.params, lr=self.lr, weight_decay=self.wdecay, foreach=True)
        self.kind = "s"
        self.bank = torch.randint(0, V, (self.phrases, self.phrase), device=dev, generator=self.gen)
        self.data = self.token_stream(self.corpus, self.batch)           # T, B
        self.edata = self.token_stream(self.eval_len, self.eval_batch)
        self.pos, self.hidden = 0, self.init_hidden(self.batch)
        self.evals = []
        self.rng = random.Random(1150)
        self.notes = {}

    def token_stream(self, T, B):
        """B columns of T tokens: phrases drawn from a fixed bank, 5 % of tokens replaced."""
        g, V, P = self.gen, self.vocab, self.phrase
        ids = torch.randint(0, self.phrases, (B, (T + P - 1) // P), device=self.dev, generator=g)
        tok = self.bank[ids].reshape(B, -1)[:, :T]
        flip = torch.rand(B, T, device=self.dev, generator=g) < self.noise
        tok = torch.where(flip, torch.randint(0, V, (B, T), device=self.dev, generator=g), tok)
        return tok.t().contiguous()

    def init_hidden(self, B):
        return [(torch.zeros(1, B, n, device=self.dev), torch.zeros(1, B, n, device=self.dev))
                for n in (self.hid, self.hid, self.emb)]

    @staticmethod
    def lockdrop(x, p, train):
        """Variational dropout: one mask per sequence, the same at every time step."""
        if not train or p == 0:
            return x
        return x * (x.new_empty(1, x.shape[1], x.shape[2]).bernoulli_(1 - p) / (1 - p))

    def run(self, tok, hidden, train):
        """Logits, the last LSTM's raw and dropped outputs, the new state."""
        m = self.model
        m.train(train)
        w = m.encoder.weight
        if train:                                                          # embedding dropout: whole rows
            w = w * (w.new_empty(w.shape[0], 1).bernoulli_(1 - self.dropoute) / (1 - self.dropoute))
        x = self.lockdrop(F.embedding(tok, w), self.dropouti, train)
        state = []
        for k, rnn in enumerate(m.rnns):
            raw, h = rnn(x, hidden[k])
            state.append(h)
            x = self.lockdrop(raw, self.dropouth if k < len(m.rnns) - 1 else self.dropout, train)
        return m.decoder(x), raw, x, state

    def evaluate(self):
        """The held-out loss, with ASGD's averaged weights swapped in once it runs."""
        kept = []
        if self.kind == "a":
            for q in self.params:
                state = self.opt.state.get(q, {})
                if "ax" in state:
                    kept.append((q, q.data))
                    q.data = state["ax"].clone()
        with torch.no_grad():
            hidden = self.init_hidden(self.eval_batch)
            total, n_all = torch.zeros((), device=self.dev), self.eval_len - 1
            for s in range(0, n_all, self.eval_chunk):
                n = min(self.eval_chunk, n_all - s)
                logits, _, _, hidden = self.run(self.edata[s:s + n], hidden, False)
                total = total + n * F.cross_entropy(logits.reshape(-1, self.vocab),
                                                    self.edata[s + 1:s + 1 + n].reshape(-1))
            ev = (total / n_all).item()
        for q, data in kept:
            q.data = data
        return ev

    def step(self, i):
        note = ""
        bptt = self.bptt if self.rng.random() < 0.95 else self.bptt / 2
        seq = max(8, int(self.rng.gauss(bptt, 5)))
        if self.pos + seq + 1 > self.corpus:                               # the stream ends: begin again
            self.pos, self.hidden, note = 0, self.init_hidden(self.batch), " e"
        src = self.data[self.pos:self.pos + seq]
        tgt = self.data[self.pos + 1:self.pos + 1 + seq]
        hidden = [tuple(t.detach() for t in h) for h in self.hidden]
        group = self.opt.param_groups[0]
        lr = group["lr"]
        group["lr"] = lr * seq / self.bptt
        self.opt.zero_grad(set_to_none=True)
        logits, raw, dropped, self.hidden = self.run(src, hidden, True)
        loss = F.cross_entropy(logits.reshape(-1, self.vocab), tgt.reshape(-1))
        reg = self.alpha * dropped.pow(2).mean() + self.beta * (raw[1:] - raw[:-1]).pow(2).mean()
        (loss + reg).backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.clip, foreach=True)
        self.opt.step()
        group["lr"] = lr
        self.pos += seq
        note = "T=%d o=%s%s" % (seq, self.kind, note)
        if i % self.eval_every == self.eval_every - 1:
            ev = self.evaluate()
            note += " ev=" + f32_hex(ev)
            worse = len(self.evals) > self.nonmono and ev > min(self.evals[:-self.nonmono])
            if self.kind == "s" and (worse or i + 1 >= self.force_switch):
                self.opt = torch.optim.ASGD(self.params, lr=self.lr, t0=0, lambd=0.0, weight_decay=self.wdecay,
                                            foreach=True)
                self.kind = "a"
                note += " sw"
            self.evals.append(ev)
        self.notes[i] = note
        return loss.detach()

    def loss_lines(self):
        for i, note in self.notes.items():
            self.extra[i] = note
        return super().loss_lines()


class GlooDDPWorkload(DDPWorkload):
    """ddp's MLP (8 layers, dropout 0.1) in DistributedDataParallel over gloo instead of NCCL,
    world size 1, as scripts that fall back to gloo (no NCCL, a CPU-first launcher) run on a
    GPU: gloo all-reduces CUDA tensors through host memory. Every gradient bucket (1 MB,
    gradient_as_bucket_view=True: the gradients are views of the buckets) is all-reduced from the
    autograd thread, mid-backward: gloo takes a stream from PyTorch's pool, makes it wait for
    an event on the autograd thread's stream and copies the bucket into fresh pinned memory
    there; one of gloo's two worker threads synchronizes that stream, reduces on the host,
    copies the result back on the same stream, records an event and makes the default stream
    (its current stream: the one training runs on) wait for it, then completes the bucket's
    future by recording events there; the autograd thread's end-of-backward callback waits on
    the futures (a host wait) and makes its stream wait for them. Two micro-batches a step, the
    first under no_sync() (gradients accumulated in the buckets, no all-reduce); AdamW
    (foreach). So a library's worker thread inserts waits and records into the stream the
    program's own threads are launching on, at host moments no one fixes, and copies from and
    to pinned memory on streams whose earlier work other threads issued. A tool that lets a
    bucket's copy out read it before backward wrote it, or the optimizer read a bucket before
    the copy back, gives other values. The loss is the sum of the two micro-batches' halves.
    GLOO_SOCKET_IFNAME defaults to lo (one rank opens no connection)."""

    syncs = True
    backend = "gloo"
    ddp_options = {"bucket_cap_mb": 1, "gradient_as_bucket_view": True}
    micro = 2

    def setup(self, mode="eager"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        super().setup(mode)

    def step(self, i):
        import contextlib
        self.opt.zero_grad(set_to_none=False)                   # the gradients stay bucket views
        total = torch.zeros((), device=self.dev)
        for k in range(self.micro):
            x, y = self.batch_for(i)
            last = k == self.micro - 1
            with (contextlib.nullcontext() if last else self.model.no_sync()):
                loss = self.loss_of(x, y) / self.micro
                loss.backward()
            total = total + loss.detach()
        self.opt.step()
        return total


WORKLOADS = {
    "mlp": ClassifierWorkload,
    "mlp_item": MLPItem,
    "gpt": GPTWorkload,
    "amp": AMPWorkload,
    "sidestream": SideStreamWorkload,
    "lastbatch": LastBatchWorkload,
    "partgraph": PartGraphWorkload,
    "gemm": GemmWorkload,
    "cnn": CNNWorkload,
    "lstm": LSTMWorkload,
    "dynamic": DynamicWorkload,
    "accum": AccumWorkload,
    "inductor_mlp": InductorMLP,
    "inductor_gpt": InductorGPT,
    "sdpa": SDPAWorkload,
    "ddp": DDPWorkload,
    "vit": ViTWorkload,
    "diffusion": DiffusionWorkload,
    "gan": GANWorkload,
    "expandable": ExpandableWorkload,
    "decode": DecodeWorkload,
    "loader": LoaderWorkload,
    "serve": ServeWorkload,
    "rngstate": RNGStateWorkload,
    "timing": TimingWorkload,
    "emptycache": EmptyCacheWorkload,
    "pinned": PinnedWorkload,
    "recordstream": RecordStreamWorkload,
    "condstep": CondStepWorkload,
    "moe": MoEWorkload,
    "graphed": GraphedWorkload,
    "clipskip": ClipSkipWorkload,
    "fno": FNOWorkload,
    "linalg": LinalgWorkload,
    "lbfgs": LBFGSWorkload,
    "plateau": PlateauWorkload,
    "swa": SWAWorkload,
    "parametrize": ParametrizeWorkload,
    "sparse": SparseWorkload,
    "gnn": GNNWorkload,
    "pageable": PageableWorkload,
    "setstream": SetStreamWorkload,
    "ppo": PPOWorkload,
    "wgangp": WGANGPWorkload,
    "dpsgd": DPSGDWorkload,
    "offload": OffloadWorkload,
    "reentrant": ReentrantWorkload,
    "unfreeze": UnfreezeWorkload,
    "gpudata": GPUDataWorkload,
    "bnfreeze": BNFreezeWorkload,
    "embbag": EmbBagWorkload,
    "sampling": SamplingWorkload,
    "streampool": StreamPoolWorkload,
    "optbwd": OptInBackwardWorkload,
    "lrtensor": LRTensorWorkload,
    "reparam": ReparamWorkload,
    "ckpt": CkptWorkload,
    "kvgrow": KVGrowWorkload,
    "beam": BeamWorkload,
    "encpad": EncPadWorkload,
    "packed": PackedWorkload,
    "maml": MAMLWorkload,
    "multitask": MultiTaskWorkload,
    "sidebwd": SideBwdWorkload,
    "contrast": ContrastWorkload,
    "capfail": CapFailWorkload,
    "mempool": MemPoolWorkload,
    "greenctx": GreenCtxWorkload,
    "flexattn": FlexAttnWorkload,
    "jagged": JaggedWorkload,
    "threadfeed": ThreadFeedWorkload,
    "oomretry": OOMRetryWorkload,
    "bncma": BNCMAWorkload,
    "qat": QATWorkload,
    "ampfused": AMPFusedWorkload,
    "profwin": ProfWinWorkload,
    "dyncompile": DynCompileWorkload,
    "ipcactor": IPCActorWorkload,
    "legacysync": LegacySyncWorkload,
    "recapture": RecaptureWorkload,
    "mallocasync": MallocAsyncWorkload,
    "fsdp": FSDPWorkload,
    "optzoo": OptZooWorkload,
    "asyncsnap": AsyncSnapWorkload,
    "sam": SAMWorkload,
    "mixup": MixupWorkload,
    "fp8": FP8Workload,
    "pcgrad": PCGradWorkload,
    "tritonop": TritonOpWorkload,
    "jiterator": JiteratorWorkload,
    "layerdrop": LayerDropWorkload,
    "tf32toggle": TF32ToggleWorkload,
    "latechange": LateChangeWorkload,
    "ensemble": EnsembleWorkload,
    "anomaly": AnomalyWorkload,
    "signbits": SignBitsWorkload,
    "dirtyfn": DirtyFnWorkload,
    "offsetview": OffsetViewWorkload,
    "oddbytes": OddBytesWorkload,
    "prefetch": PrefetchWorkload,
    "evring": EvRingWorkload,
    "zerocopy": ZeroCopyWorkload,
    "autotune": AutotuneWorkload,
    "memops": MemOpsWorkload,
    "bgeval": BgEvalWorkload,
    "streamchurn": StreamChurnWorkload,
    "hostpause": HostPauseWorkload,
    "cpuadam": CPUAdamWorkload,
    "meanflow": MeanFlowWorkload,
    "docmask": DocMaskWorkload,
    "adahessian": AdaHessianWorkload,
    "spline": SplineWorkload,
    "hostfunc": HostFuncWorkload,
    "groupmm": GroupMMWorkload,
    "pinhost": PinHostWorkload,
    "ssmscan": SSMScanWorkload,
    "sac": SACWorkload,
    "memhist": MemHistWorkload,
    "sharedpool": SharedPoolWorkload,
    "ctc": CTCWorkload,
    "ropecplx": RoPECplxWorkload,
    "selckpt": SelCkptWorkload,
    "hostreg": HostRegWorkload,
    "papply": PApplyWorkload,
    "bgcapture": BgCaptureWorkload,
    "extevent": ExtEventWorkload,
    "awdlstm": AWDLSTMWorkload,
    "glooddp": GlooDDPWorkload,
    "pipeline2": Pipeline2Workload,
    "ddp2": DDP2Workload,
}


# --------------------------------------------------------------------------- profiling

DEVICE_CATS = {"kernel": "kernels", "gpu_memset": "memsets", "gpu_memcpy": "memcpys"}


def count_trace(path):
    """Counts device events in a Kineto chrome trace by category."""
    with open(path) as f:
        trace = json.load(f)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    counts = {v: 0 for v in DEVICE_CATS.values()}
    names = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        key = DEVICE_CATS.get(cat)
        if key:
            counts[key] += 1
            if key == "kernels":
                n = str(e.get("name", "?"))[:80]
                names[n] = names.get(n, 0) + 1
    return counts, names


def run_profiled(w, step_fn, first, count, out_path):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()  # nothing from earlier steps may land in the profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(first, first + count):
            w.record_loss(i, step_fn(i))
        torch.cuda.synchronize()
    trace_path = out_path + ".trace.json"
    prof.export_chrome_trace(trace_path)
    counts, names = count_trace(trace_path)
    res = {"case": w.args.case, "mode": w.args.mode, "profiled_steps": count, "first_step": first,
           "totals": counts, "per_step": {k: v / count for k, v in counts.items()},
           "kernels_by_name_per_step": {k: v / count for k, v in sorted(names.items(), key=lambda kv: -kv[1])},
           "trace": trace_path}
    if counts["kernels"] == 0:
        res["warning"] = "no 'kernel' events in the trace: categories differ from expectation?"
    if not w.args.keep_trace:
        try:
            os.remove(trace_path)
            res["trace"] = None
        except OSError:
            pass
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)
    return res


# --------------------------------------------------------------------------- main

def device_used():
    free, total = torch.cuda.mem_get_info()
    return total - free


def run_interleaved(args, w, run_step, modes, first, warmup_s, used_peak):
    """Blocks of steps in each graft mode, switched in-process; see --interleave."""
    import ctypes
    try:
        set_mode = ctypes.CDLL(None).graft_bench_set_mode
    except AttributeError:
        print("workloads: --interleave needs libgraft preloaded (graft_bench_set_mode not found)")
        return 2
    set_mode.argtypes = [ctypes.c_char_p]
    set_mode.restype = ctypes.c_int
    per_mode = {m: [] for m in modes}   # block wall time / steps, the final sync included
    issue = {m: [] for m in modes}      # ... up to the return of the last step (no final sync)
    tails = {m: [] for m in modes}      # ms the final sync waited
    medians = {m: [] for m in modes}    # median step
    records = {m: [] for m in modes}    # median time in record_loss (loss.item(): the sync)
    i = first
    for c in range(args.cycles):
        order = modes[c % len(modes):] + modes[:c % len(modes)]
        for m in order:
            torch.cuda.synchronize()
            if set_mode(m.encode()) != 0:
                print("workloads: graft_bench_set_mode(%s) refused (GRAFT_BENCH_SWITCH=1 and "
                      "GRAFT_MODE=graph needed)" % m)
                return 2
            run_step(i)  # untimed: the first step after a switch
            i += 1
            torch.cuda.synchronize()
            step_ms = []
            record_ms = []
            t0 = time.perf_counter()
            for _ in range(args.block):
                ts = time.perf_counter()
                run_step(i)
                step_ms.append((time.perf_counter() - ts) * 1e3)
                record_ms.append(w.last_record_ms)
                i += 1
            t_issued = time.perf_counter()
            torch.cuda.synchronize()
            t_done = time.perf_counter()
            issue[m].append(round((t_issued - t0) * 1e3 / args.block, 5))
            per_mode[m].append(round((t_done - t0) * 1e3 / args.block, 5))
            tails[m].append(round((t_done - t_issued) * 1e3, 5))
            s = sorted(step_ms)
            medians[m].append(round(s[len(s) // 2], 5))
            r = sorted(record_ms)
            records[m].append(round(r[len(r) // 2], 5))
    set_mode(b"graph")
    torch.cuda.synchronize()
    w.loss_lines()
    w.finish()
    # Loops with a per-step sync: the median step of the block. No-sync loops: the
    # time to issue the block's steps, i.e. the steady-state step time of a long
    # loop whose GPU keeps up (check: the final sync's wait, "interleaved_tail_ms",
    # stays under about one step's GPU time). Including that wait in a block of a
    # few steps would charge each block the GPU time of its last step, which a
    # real loop pays once at its end; graft, which launches late pieces, would
    # pay more of it than eager.
    res = {
        "case": args.case, "mode": "interleaved", "modes": modes, "cycles": args.cycles,
        "block": args.block, "warmup": args.warmup, "syncs_every_step": w.syncs,
        "interleaved": medians if w.syncs else issue,
        "interleaved_wall": per_mode, "interleaved_issue": issue, "interleaved_median": medians,
        "interleaved_tail_ms": tails, "interleaved_record_ms": records,
        "warmup_s": warmup_s, "device_used_peak_bytes": max(used_peak, device_used()),
        "torch": torch.__version__, "device_name": torch.cuda.get_device_name(0),
        "graft_preloaded": "libgraft" in os.environ.get("LD_PRELOAD", ""),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    summary = ", ".join("%s %.3f" % (m, sorted(v)[len(v) // 2]) for m, v in res["interleaved"].items())
    print("workloads: case=%s interleaved %d cycles x %d steps: median ms/step %s" % (
        args.case, args.cycles, args.block, summary))
    return 0


def main(argv=None, case=None, workload_class=None):
    """Runs one case. argv: the command line after the program's name, whose first word
    names the case; or, for a case script of its own (training/), `case` and its
    `workload_class` (else WORKLOADS[case]) and argv only the options."""
    if case is None:
        ap = argparse.ArgumentParser(description="graft GPU-tier PyTorch workloads")
        ap.add_argument("case", choices=CASES + ["list"])
    else:
        ap = argparse.ArgumentParser(description="graft GPU-tier PyTorch workload %s" % case)
        ap.set_defaults(case=case)
    ap.add_argument("--steps", type=int, default=300, help="total steps (warmup included)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps (default min(30, steps/3))")
    ap.add_argument("--mode", default="eager", choices=["eager", "handgraph", "compile"])
    ap.add_argument("--losses", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--profile-json", default=None)
    ap.add_argument("--profile-steps", type=int, default=5)
    ap.add_argument("--keep-trace", action="store_true")
    ap.add_argument("--interleave", default=None, help="graft modes to time interleaved in this process")
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--ddp-rank", type=int, default=0, help=argparse.SUPPRESS)  # ddp2's second process
    ap.add_argument("--ddp-store", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    interleave = args.interleave.split(",") if args.interleave else []
    if interleave:
        if args.mode != "eager" or args.profile_json or args.losses:
            ap.error("--interleave needs --mode eager and no --profile-json or --losses (the floor's "
                     "blocks make the losses garbage)")
        if args.warmup is None:
            args.warmup = 30
        if args.cycles < 1 or args.block < 1:
            ap.error("--cycles and --block must be >= 1")
        args.steps = args.warmup + args.cycles * len(interleave) * (args.block + 1)

    if args.case == "list":
        print(" ".join(CASES))
        return 0
    # expandable's option is read at the first CUDA allocation, still ahead here for a
    # caller of main() that imported this module; mallocasync's backend only when torch
    # loads, which main()'s caller must then have set (workloads.py does, at the top).
    set_allocator_options(args.case)
    if args.warmup is None:
        args.warmup = min(30, args.steps // 3)
    if args.steps < 1 or args.warmup < 0 or args.warmup >= args.steps:
        ap.error("need steps >= 1 and 0 <= warmup < steps (steps=%d warmup=%d)" % (args.steps, args.warmup))
    if args.mode == "handgraph" and args.case not in HANDGRAPH_CASES:
        ap.error("--mode handgraph is implemented for %s only" % (HANDGRAPH_CASES,))
    if args.mode == "compile" and args.case not in COMPILE_CASES:
        ap.error("--mode compile is implemented for %s only" % (COMPILE_CASES,))
    if args.profile_json and args.warmup + args.profile_steps > args.steps:
        ap.error("--profile-steps %d does not fit after %d warmup steps in %d steps" % (
            args.profile_steps, args.warmup, args.steps))

    if torch is None:
        e = TORCH_ERROR
        print("workloads: skipped: torch not available (%s)" % (str(e).splitlines()[0] if str(e) else type(e).__name__))
        return 77
    if not torch.cuda.is_available():
        print("workloads: skipped: no CUDA device visible to torch %s" % torch.__version__)
        return 77
    if args.case in TWO_GPU_CASES and torch.cuda.device_count() < 2:
        print("workloads: skipped: %s needs two GPUs, torch sees %d" % (args.case, torch.cuda.device_count()))
        return 77
    build_models()

    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    dev = torch.device(DEVICE, args.ddp_rank)
    if args.ddp_rank:
        torch.cuda.set_device(dev)
    torch.zeros(1, device=dev)  # create the context
    torch.cuda.synchronize()
    used_init = device_used()

    w = (workload_class or WORKLOADS[args.case])(args, dev)
    t_setup = time.perf_counter()
    if args.mode == "eager":
        w.setup()
        step_fn = w.step
    elif args.mode == "handgraph":
        w.setup_handgraph()
        step_fn = w.step_handgraph
    else:
        w.setup_compile()
        step_fn = w.step_compile
    torch.cuda.synchronize()
    setup_s = time.perf_counter() - t_setup
    torch.cuda.reset_peak_memory_stats()

    def run_step(i):
        loss = step_fn(i)
        ts = time.perf_counter()
        w.record_loss(i, loss)
        w.last_record_ms = (time.perf_counter() - ts) * 1e3  # the per-step sync, where there is one

    # warmup (includes torch.compile's compilation and graft's recording)
    t0 = time.perf_counter()
    for i in range(args.warmup):
        run_step(i)
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    used_peak = device_used()

    first = args.warmup
    prof = None
    if args.profile_json:
        prof = run_profiled(w, step_fn, first, args.profile_steps, args.profile_json)
        first += args.profile_steps

    if interleave:
        return run_interleaved(args, w, run_step, interleave, first, warmup_s, used_peak)

    n_timed = args.steps - first
    step_ms = []
    ev0 = torch.cuda.Event(enable_timing=True)
    ev1 = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    ev0.record()
    tw0 = time.perf_counter()
    for i in range(first, args.steps):
        ts = time.perf_counter()
        run_step(i)
        step_ms.append((time.perf_counter() - ts) * 1e3)
    ev1.record()
    torch.cuda.synchronize()
    tw1 = time.perf_counter()
    used_peak = max(used_peak, device_used())

    wall_ms = (tw1 - tw0) * 1e3 / n_timed if n_timed else None
    event_ms = ev0.elapsed_time(ev1) / n_timed if n_timed else None
    if n_timed and w.syncs:
        s = sorted(step_ms)
        median = s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])
    else:
        median = wall_ms  # no per-step sync: whole timed region / steps

    # medians of ten consecutive blocks of steps: drift within a process vs between processes
    blocks = []
    if len(step_ms) >= 10:
        per = len(step_ms) // 10
        for b in range(10):
            part = sorted(step_ms[b * per:(b + 1) * per])
            blocks.append(round(part[len(part) // 2], 4))

    lines = w.loss_lines()
    w.finish()
    if args.losses:
        with open(args.losses, "w") as f:
            f.write("\n".join(lines) + ("\n" if lines else ""))

    res = {
        "case": args.case, "mode": args.mode, "steps": args.steps, "warmup": args.warmup,
        "timed_steps": n_timed, "syncs_every_step": w.syncs,
        "ms_per_step_median": median,
        "ms_per_step_wall": wall_ms,
        "ms_per_step_event": event_ms,
        "block_medians_ms": blocks,
        "step_ms": [round(t, 4) for t in step_ms],
        "warmup_s": warmup_s, "setup_s": setup_s,
        "peak_mem_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
        "device_used_init_bytes": used_init,
        "device_used_peak_bytes": used_peak,
        "loss_first_hex": lines[0].split()[0] if lines else None,
        "loss_final_hex": lines[-1].split()[0] if lines else None,
        "torch": torch.__version__,
        "device_name": torch.cuda.get_device_name(0),
        "graft_preloaded": "libgraft" in os.environ.get("LD_PRELOAD", ""),
        "graft_mode": os.environ.get("GRAFT_MODE"),
    }
    if args.mode == "compile":
        res["compile_changes"] = COMPILE_CHANGES
    if prof is not None:
        res["profile"] = {k: prof[k] for k in ("per_step", "profiled_steps", "first_step")}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    print("workloads: case=%s mode=%s steps=%d warmup=%d ms/step=%s (wall %s, event %s) warmup=%.2fs "
          "peak=%.1fMiB device=%.1fMiB loss[-1]=%s" % (
              args.case, args.mode, args.steps, args.warmup,
              "%.3f" % median if median is not None else "-",
              "%.3f" % wall_ms if wall_ms is not None else "-",
              "%.3f" % event_ms if event_ms is not None else "-",
              warmup_s, res["peak_mem_bytes"] / 2 ** 20, used_peak / 2 ** 20, res["loss_final_hex"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
