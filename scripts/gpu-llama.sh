#!/usr/bin/env bash
# llama.cpp (ggml-org/llama.cpp 0253fb21f, CUDA backend built for sm_90, shared
# ggml/llama libraries) with and without graft, on a tiny random-weight LLaMA
# (4 layers, n_embd 256, 4 heads / 2 KV heads, n_ff 688, 32000-token SPM vocab,
# f16 layers, Q8_0 token embedding tied to the output; made with gguf-py, seed 1234).
#   OUT=dir scripts/gpu-llama.sh LIBDIR [PACK]     (on the GPU machine, repo root)
# LIBDIR/src/libgraft.so is graft; PACK (default .gpu/llama) holds bin.tar.xz:
# llama/bin (llama-simple, llama-bench, test-backend-ops, llama-completion),
# llama/lib (libggml*, libllama*, libcudart.so.13), llama/model/tiny-llama.gguf,
# llama/BUILD.txt. cuBLAS 13 is not packed (libcublasLt alone is 540 MB): it is
# taken from the CUDA toolkit there, else from PyTorch's nvidia wheels.
# Parts: (1) test-backend-ops test -b CUDA0 per op, eager then graft, results
# compared test by test; (2) llama-simple greedy generation, eager / eager with
# GGML_CUDA_DISABLE_GRAPHS=1 / graft / graft with it / eager again, text
# compared; (3) llama-bench pp64+tg128, the four configurations interleaved
# over rounds. Writes $OUT/llama/summary.md and $OUT/llama/logs.tar.gz.
# Knobs: NGEN (tokens generated, 256), ROUNDS (bench rounds, 3), OPS (ops for
# test-backend-ops, "OP:seconds ..."), SKIP_TBO=1, SKIP_BENCH=1.
# Exits 0 whatever differs (the tables say so); 2 if the pack or graft is missing.
# Status: first run on an H100 in the thirty-fourth session (2026-11-27,
# library 3316131): docs/PERF.md, "thirty-fourth session". With the default
# OPS, ROPE, FLASH_ATTN_EXT and MUL_MAT run out of their seconds (rc 124) in
# both configurations; the tests both ran are compared.
# The pack (built here, ~40 min on 2 cores): the tree exported at the commit
# above, then
#   cmake -S src -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
#     -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=ON \
#     -DGGML_BACKEND_DL=OFF -DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_CUDA_NCCL=OFF \
#     -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=ON \
#     -DCMAKE_INSTALL_RPATH='$ORIGIN/../lib' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON
#   cmake --build build -j2 --target llama-simple llama-bench test-backend-ops
# (linking needs a libcuda.so.1 on the link path: the toolkit's stub); the
# model from scripts/llama_tiny_model.py (gguf-py from the same tree, numpy);
# binaries stripped into llama/bin, libggml*/libllama*/libcudart.so.13 into
# llama/lib, tar | xz -9e.
set -u
B=${1:?usage: OUT=dir scripts/gpu-llama.sh LIBDIR [PACK]}; P=${2:-.gpu/llama}
[ -f "$P/bin.tar.xz" ] || { echo "gpu-llama: pack $P/bin.tar.xz missing" >&2; exit 2; }
BA=$(cd "$B" && pwd) || exit 2; GL=$BA/src/libgraft.so
[ -f "$GL" ] || { echo "gpu-llama: $GL missing" >&2; exit 2; }
W=/tmp/gpu-llama; rm -rf $W; mkdir -p $W/logs; L=$W/logs
tar xJf "$P/bin.tar.xz" -C $W 2>/dev/null ||
  python3 -c "import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$P/bin.tar.xz" $W ||
  { echo "gpu-llama: cannot unpack $P/bin.tar.xz" >&2; exit 2; }
[ -x $W/llama/bin/llama-simple ] || { echo "gpu-llama: pack incomplete" >&2; exit 2; }
O=${OUT:-/tmp}/llama; rm -rf $O; mkdir -p $O
BIN=$W/llama/bin; M=$W/llama/model/tiny-llama.gguf
T0=$(date +%s)
cat $W/llama/BUILD.txt 2>/dev/null | head -3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export LD_LIBRARY_PATH=$W/llama/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# cuBLAS 13: the toolkit's, else the one PyTorch's wheels bring.
if ! ldd $W/llama/lib/libggml-cuda.so | grep -q 'libcublasLt.so.13 => /'; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
      $(python3 -c "import glob,nvidia; print(' '.join(d for p in nvidia.__path__ for d in glob.glob(p + '/*/lib')))" 2>/dev/null) \
      $(python3 -c "import os,torch; print(os.path.dirname(torch.__file__) + '/lib')" 2>/dev/null); do
    [ -e $d/libcublasLt.so.13 ] && [ -e $d/libcublas.so.13 ] && { export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; break; }
  done
fi
if ldd $W/llama/lib/libggml-cuda.so | grep -q 'not found'; then
  echo "gpu-llama: unresolved libraries:"; ldd $W/llama/lib/libggml-cuda.so | grep 'not found'
fi
ldd $W/llama/lib/libggml-cuda.so | grep -E 'cublas|cudart|libcuda\.' | sed 's/^/  /'

# run TAG MODE TIMEOUT CMD...: MODE eager|graft; extra env through ENVS="A=1 B=2".
run() {
  local tag=$1 mode=$2 tmo=$3; shift 3
  local pre=(); [ $mode = graft ] && pre=(LD_PRELOAD=$GL GRAFT_STATS=$L/$tag.json GRAFT_LOG_FILE=$L/$tag.glog)
  timeout $tmo env ${ENVS:-} "${pre[@]}" "$@" > $L/$tag.out 2> $L/$tag.err
  echo $? > $L/$tag.rc
}

# ---- (1) test-backend-ops, correctness mode on CUDA0 (compared with the CPU backend)
OPS=${OPS:-"ADD:10 MUL:10 GET_ROWS:15 CPY:15 RMS_NORM:10 SOFT_MAX:12 ROPE:15 FLASH_ATTN_EXT:30 MUL_MAT:40"}
if [ -z "${SKIP_TBO:-}" ]; then
  echo "== test-backend-ops"
  for ot in $OPS; do
    op=${ot%%:*}; tm=${ot#*:}
    run tbo.$op.eager eager $tm $BIN/test-backend-ops test -b CUDA0 -o $op
    run tbo.$op.graft graft $tm $BIN/test-backend-ops test -b CUDA0 -o $op
    echo "  $op: eager rc $(cat $L/tbo.$op.eager.rc), graft rc $(cat $L/tbo.$op.graft.rc), $(( $(date +%s) - T0 ))s so far"
  done
fi

# ---- (2) greedy generation with llama-simple (greedy sampler; all layers on the GPU)
NGEN=${NGEN:-256}
PROMPT="Once upon a time, in a small village at the edge of the forest, there lived an old clockmaker who"
echo "== generation, $NGEN tokens"
GEN="eager:eager: eager_nographs:eager:GGML_CUDA_DISABLE_GRAPHS=1 graft:graft: graft_nographs:graft:GGML_CUDA_DISABLE_GRAPHS=1 eager_again:eager:"
for g in $GEN; do
  IFS=: read -r tag mode envs <<< "$g"
  ENVS=$envs run gen.$tag $mode 60 $BIN/llama-simple -m $M -n $NGEN -ngl 99 "$PROMPT"
  echo "  $tag: rc $(cat $L/gen.$tag.rc), $(grep -o 'decoded.*' $L/gen.$tag.err | head -1)"
done

# ---- (3) llama-bench, configurations interleaved round by round
ROUNDS=${ROUNDS:-3}
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "== llama-bench, $ROUNDS rounds"
  for r in $(seq 1 $ROUNDS); do
    [ $(( $(date +%s) - T0 )) -gt 400 ] && { echo "  out of time: rounds $r.. skipped"; break; }
    for g in eager:eager: eager_nographs:eager:GGML_CUDA_DISABLE_GRAPHS=1 graft:graft: graft_nographs:graft:GGML_CUDA_DISABLE_GRAPHS=1; do
      IFS=: read -r tag mode envs <<< "$g"
      ENVS=$envs run bench.$tag.r$r $mode 60 $BIN/llama-bench -m $M -p 64 -n 128 -r 3 -ngl 99 -o jsonl
    done
    echo "  round $r done, $(( $(date +%s) - T0 ))s so far"
  done
fi

# ---- summary
python3 - $L "$OPS" "$ROUNDS" "${SKIP_TBO:-}" "${SKIP_BENCH:-}" "$NGEN" > $O/summary.md <<'PY'
import collections, glob, json, os, re, statistics, sys
L, OPS, ROUNDS, skip_tbo, skip_bench, NGEN = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
def rd(p):
    try: return open(p, errors="replace").read()
    except OSError: return ""
def rc(tag): return rd(f"{L}/{tag}.rc").strip() or "?"
def graft(tag):
    try: p = json.load(open(f"{L}/{tag}.json"))["replay"]
    except Exception: return ("?", "?", "?", "?")
    fb = sorted(p.get("fallbacks", {}).items(), key=lambda kv: -kv[1])[:3]
    return ("%.1f" % p["coverage_pct"], str(p["replays"]), str(p["ops_total"]),
            ", ".join("%s %s" % kv for kv in fb) or "-")
ansi = re.compile(r"\x1b\[[0-9;]*m")
def tbo(tag):
    res, summ = collections.Counter(), []
    for line in ansi.sub("", rd(f"{L}/{tag}.out")).splitlines():
        m = re.match(r"^  ([A-Z_0-9]+\(.*?\)): (.*)$", line)
        if m:
            s = m.group(2).strip()
            st = ("OK" if s.endswith("OK") else "FAIL" if s.endswith("FAIL") else
                  "NS" if s.startswith("not supported") else "SKIP" if s.startswith("skipping") else None)
            if st: res[(m.group(1), st)] += 1
        elif re.search(r"tests passed", line): summ.append(line.strip())
    return res, summ
out = []
if not skip_tbo:
    out += ["## test-backend-ops test -b CUDA0 (vs CPU), per op", "",
            "| op | eager rc | eager OK/FAIL/unsupported | eager summary | graft rc | graft OK/FAIL/unsupported | graft summary | tests with a different result (both ran) | graft coverage % | replays |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    fails = []
    for ot in OPS:
        op = ot.split(":")[0]
        e, es = tbo(f"tbo.{op}.eager"); g, gs = tbo(f"tbo.{op}.graft")
        cnt = lambda r: "/".join(str(sum(v for (n, s), v in r.items() if s == k)) for k in ("OK", "FAIL", "NS"))
        en, gn = {n for n, s in e}, {n for n, s in g}
        both = en & gn
        diff = sorted(n for n in both if {s for (m, s) in e if m == n} != {s for (m, s) in g if m == n})
        fails += [("eager", n) for (n, s) in e if s == "FAIL"] + [("graft", n) for (n, s) in g if s == "FAIL"]
        gc = graft(f"tbo.{op}.graft")
        rce, rcg = rc(f"tbo.{op}.eager"), rc(f"tbo.{op}.graft")
        rce += " (timeout)" if rce == "124" else ""; rcg += " (timeout)" if rcg == "124" else ""
        out.append(f"| {op} | {rce} | {cnt(e)} | {'; '.join(es[-1:]) or '-'} | {rcg} | {cnt(g)} | {'; '.join(gs[-1:]) or '-'} | "
                   f"{len(diff)} of {len(both)}{(': ' + ', '.join(diff[:3])) if diff else ''} | {gc[0]} | {gc[1]} |")
    if fails:
        out += ["", "FAIL lines:"] + ["- %s: %s" % f for f in fails[:40]]
    out.append("")
if not skip_bench:
    out += ["## llama-bench -p 64 -n 128 -r 3 (tokens/s; median over rounds, each round in brackets)", "",
            "| run | pp64 t/s | tg128 t/s | graft coverage % (last round) | replays | top fallbacks |", "|---|---|---|---|---|---|"]
    for tag in ("eager", "eager_nographs", "graft", "graft_nographs"):
        vals = collections.defaultdict(list)
        for r in range(1, ROUNDS + 1):
            for line in rd(f"{L}/bench.{tag}.r{r}.out").splitlines():
                try: j = json.loads(line)
                except ValueError: continue
                k = "pp%d" % j["n_prompt"] if j.get("n_prompt") else "tg%d" % j["n_gen"]
                vals[k].append(j["avg_ts"])
        f = lambda k: ("%.0f [%s]" % (statistics.median(vals[k]), " ".join("%.0f" % v for v in vals[k]))) if vals[k] else "?"
        c = graft(f"bench.{tag}.r{ROUNDS}") if tag.startswith("graft") else ("-", "-", "-", "-")
        out.append(f"| {tag} | {f('pp64')} | {f('tg128')} | {c[0]} | {c[1]} | {c[3]} |")
    out.append("")
def gen(tag):
    o, e = rd(f"{L}/gen.{tag}.out"), rd(f"{L}/gen.{tag}.err")
    m = re.search(r"eval time =.*?/\s*(\d+) runs.*?([0-9.]+) tokens per second", e)
    return o, (m.group(2) if m else "?"), (m.group(1) if m else "?")
ref = gen("eager")[0]
out += [f"## greedy generation (llama-simple -n {NGEN} -ngl 99), text compared with eager's", "",
        "| run | rc | text equal to eager? | decode tok/s | decode runs | graft ops | graft coverage % | replays | top fallbacks |",
        "|---|---|---|---|---|---|---|---|---|"]
for tag in ("eager", "eager_nographs", "graft", "graft_nographs", "eager_again"):
    o, ts, n = gen(tag)
    if not o.strip(): eq = "NO OUTPUT"
    elif tag == "eager": eq = "(reference, %d chars)" % len(o)
    elif o == ref: eq = "yes"
    elif tag == "eager_again": eq = "NO: eager itself is not deterministic"
    else:
        i = next((k for k in range(min(len(o), len(ref))) if o[k] != ref[k]), min(len(o), len(ref)))
        eq = "NO (differs from char %d of %d)" % (i, len(ref))
    c = graft(f"gen.{tag}") if tag.startswith("graft") else ("-", "-", "-", "-")
    out.append(f"| {tag} | {rc('gen.' + tag)} | {eq} | {ts} | {n} | {c[2]} | {c[0]} | {c[1]} | {c[3]} |")
out.append("")
print("\n".join(out))
PY
echo; cat $O/summary.md
tar czf $O/logs.tar.gz -C $W logs
echo "gpu-llama: $(( $(date +%s) - T0 ))s; summary and logs in $O"
exit 0
