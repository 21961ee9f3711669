#!/usr/bin/env bash
# llm.c (github.com/karpathy/llm.c, raw CUDA C++ GPT-2 training, cuBLASLt) under
# graft: eager twice (is the program deterministic?), then graft, per
# configuration; the per-step loss and gradient-norm bits, the validation
# losses and the sampled token ids must be equal, and the step times are
# compared (median of the program's own "ms" per step, first 20 steps left out).
#
# Build the program here (needs only nvcc and cuBLAS), then carry LLMC:
#   scripts/gpu-llmc.sh --build LLMC_SRC LLMC      (LLMC_SRC: an llm.c checkout; f1e2ace
#       was used; the three changes it makes are listed below)
#   OUT=dir scripts/gpu-llmc.sh BUILD LLMC [STEPS]  (on the GPU machine)
# The changes to llm.c (none touches its CUDA work): a "bits" line after each
# step's and validation's log line (the float32 bit patterns); cudaMemAdvise's
# CUDA 13 signature in its out-of-memory fallback; NVML off (no libnvidia-ml
# to link here). Data: synthetic token files made here (train.bin, val.bin).
set -u
if [ "${1:-}" = --build ]; then
  S=$2; D=$3; mkdir -p "$D"; W=$(mktemp -d)
  (cd "$S" && git archive HEAD 2>/dev/null || tar c .) | tar x -C "$W"
  python3 - "$W" <<'PY'
import sys
w = sys.argv[1]
def patch(path, old, new):
    p = w + "/" + path; s = open(p).read()
    assert s.count(old) == 1, (path, old)
    open(p, "w").write(s.replace(old, new))
step = "                time_elapsed_ms, 100*mfu, bias_corrected_ema_tokens_per_second);\n"
patch("train_gpt2.cu", step, step +
      "        { float l_ = model.mean_loss, n_ = grad_norm; unsigned lb_, nb_; memcpy(&lb_, &l_, 4); "
      "memcpy(&nb_, &n_, 4);\n          printf0(\"bits step %d loss %08x norm %08x\\n\", step + 1, lb_, nb_); }\n")
val = "            printf0(\"val loss %f\\n\", val_loss);\n"
patch("train_gpt2.cu", val, val +
      "            { unsigned vb_; memcpy(&vb_, &val_loss, 4); printf0(\"bits val %08x\\n\", vb_); }\n")
patch("llmc/cuda_utils.cuh", "cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)",
      "cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})")
patch("llmc/mfu.h", "#if __has_include(<nvml.h>)", "#if 0")
PY
  (cd "$W" && nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 \
      --generate-code 'arch=compute_90,code=[compute_90,sm_90]' -DENABLE_BF16 train_gpt2.cu \
      -lcublas -lcublasLt -o train_gpt2cu) || exit 1
  cp "$W/train_gpt2cu" "$D/" && rm -rf "$W"
  python3 - "$D" <<'PY'
import random, struct, sys
def write(path, n, seed):
    r, toks, t = random.Random(seed), [], 0
    for _ in range(n):  # a mostly predictable stream over 2000 ids, so the loss falls
        t = (t * 31 + r.randrange(7)) % 2000 if r.random() < 0.9 else r.randrange(50257)
        toks.append(t)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
        f.write(struct.pack("<%dH" % n, *toks))
write(sys.argv[1] + "/train.bin", 600000, 1)
write(sys.argv[1] + "/val.bin", 100000, 2)
PY
  echo "gpu-llmc: built $D"; exit 0
fi

B=${1:-.gpu/build}; L=${2:-.gpu/llmc}; STEPS=${3:-300}
BA=$(cd "$B" && pwd); LA=$(cd "$L" && pwd); O=${OUT:-/tmp}/llmc; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# cuBLAS 13: the toolkit's, else the one PyTorch's wheels bring.
if ! ldd $LA/train_gpt2cu | grep -q 'libcublasLt.so.13 => /'; then
  for d in /usr/local/cuda/lib64 $(python3 -c "import glob,nvidia; print(' '.join(d for p in nvidia.__path__ for d in glob.glob(p + '/*/lib')))" 2>/dev/null); do
    [ -e $d/libcublasLt.so.13 ] && { export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; break; }
  done
fi
# name|arguments: GPT-2 of 6 and 12 layers from random weights, validation
# every 50 steps (another sequence of ops), sampling every 100 (a host loop
# of forward passes and synchronous copies), recomputation, GELU fusion off;
# d6_small's kernels are short enough for launches to set its pace;
# d6_wsd_nomaster: no master weights, a warmup-stable-decay schedule, one
# batch over and over, TF32 off, GELU fused into cuBLASLt's epilogue.
CONFIGS="d6|-e d6 -b 8 -t 256 -v 50 -m 4 -s 100 -g 12
d12_recompute|-e d12 -b 4 -t 512 -v 100 -m 2 -s 0 -r 1 -ge 0
d6_small|-e d6 -b 1 -t 64 -v 50 -m 4 -s 0
d6_wsd_nomaster|-e d6 -b 4 -t 128 -v 1000 -m 2 -s 0 -w 0 -k wsd -u 20 -a 1 -f 0 -ge 2"
common="-i $LA/train.bin -j $LA/val.bin -x $STEPS -n 0 -h 0 -y 0 -lg 0"
pick() { grep -E '^(bits|val loss|[0-9]+ )' "$1" | grep -v '^val loss'; sed -n '/^generating/,/^---$/p' "$1" | grep -v '^[-g]'; }
msmed() { python3 -c "
import re,statistics,sys
ms=[float(m.group(1)) for m in re.finditer(r'\| ([0-9.]+) ms \|', open(sys.argv[1]).read())][20:]
print('%.3f' % statistics.median(ms) if ms else 'nan')" "$1"; }
rows=()
while IFS='|' read -r name args; do
  cd $O
  timeout 300 $LA/train_gpt2cu $common $args > $O/$name.eager1.log 2>&1; e1=$?
  timeout 300 $LA/train_gpt2cu $common $args > $O/$name.eager2.log 2>&1; e2=$?
  GRAFT_STATS=$O/$name.graft.json GRAFT_LOG_FILE=$O/$name.graft.glog LD_PRELOAD=$BA/src/libgraft.so \
    timeout 300 $LA/train_gpt2cu $common $args > $O/$name.graft.log 2>&1; g=$?
  pick $O/$name.eager1.log > $O/$name.eager1.bits; pick $O/$name.eager2.log > $O/$name.eager2.bits
  pick $O/$name.graft.log > $O/$name.graft.bits
  n=$(grep -c '^bits step' $O/$name.eager1.bits)
  if [ $e1$e2$g != 000 ] || [ "$n" -lt "$STEPS" ]; then verdict="ERROR (rc $e1/$e2/$g, $n steps)"
  elif ! cmp -s $O/$name.eager1.bits $O/$name.eager2.bits; then verdict=EAGER-NONDET
  elif cmp -s $O/$name.eager1.bits $O/$name.graft.bits; then verdict=EQUAL
  else verdict=DIFFERS; diff $O/$name.eager1.bits $O/$name.graft.bits | head -6; fi
  cov=$(python3 -c "
import json,sys
p=json.load(open(sys.argv[1]))['replay']
fb=sorted(p.get('fallbacks',{}).items(), key=lambda kv:-kv[1])[:3]
print('%.1f %% | %s | %s' % (p['coverage_pct'], p['replays'],
      ', '.join('%s %s' % kv for kv in fb) or '-'))" $O/$name.graft.json 2>/dev/null || echo "? | ? | ?")
  rows+=("| $name | $verdict | $n | $cov | $(msmed $O/$name.eager1.log) | $(msmed $O/$name.eager2.log) | $(msmed $O/$name.graft.log) |")
  cd - >/dev/null
done <<< "$CONFIGS"
echo
echo "| config | bits vs eager | steps | through graphs | replays | top fallbacks | eager ms | eager ms (2nd) | graft ms |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
