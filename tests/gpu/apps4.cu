// apps4: six more application loops in the style of apps.cu, apps2.cu and
// apps3.cu (trap_common.cuh), run by check_traps.py, of kinds those leave out:
// an LLM decode engine, a server with a pool of host threads, molecular
// dynamics with Verlet lists, a three-stream video pipeline, an MLP trained
// with a hand-written AdamW, and graph traversal with data-dependent level
// counts. Each scenario is deterministic in eager (integer math, or floats
// summed in a fixed order; atomics only on integers), checks its results
// against a host reference (a MISMATCH line and exit 1 on a difference) and
// prints digests of its results; the output under graft must be the same line
// for line.
//
//   llm_decode      a llama.cpp-like decode engine in miniature, integer-only
//                   (int8 weights, __dp4a matmuls, RMSnorm by an integer
//                   square root, rotary tables, softmax by a lookup table):
//                   prompts of 6-40 tokens copied in from pageable memory and
//                   prefilled in one pass (grids sized by the prompt), then one
//                   token per step: embedding lookup of the token the last
//                   step's sampler wrote on the device, attention over a KV
//                   cache one longer every token (the position by value),
//                   a sampler with a seeded hash noise (atomicMax on packed
//                   keys), the token read back by cudaMemcpyAsync into pinned
//                   memory and cudaStreamSynchronize; the host stops a prompt
//                   on a stop token or a per-prompt budget and now and then
//                   forces a token into the device history; a host model of
//                   the same integer math checks every token and the caches
//   server_pool     an inference server: 4 host threads, each with its own
//                   non-blocking stream, cuBLAS handle, pinned staging and
//                   device buffers, serve requests from one queue (request i
//                   to thread i % 4) of 1-16 rows: H2D copy, cublasSgemm,
//                   bias+GELU, cublasSgemm, softmax/argmax, D2H copies, timing
//                   events, cudaEventSynchronize per request, a double-
//                   precision host check per request; the main thread hot-
//                   swaps one of two weight slots every 100 requests (after
//                   the requests that used it are done) and prints results
//                   in request order
//   md_verlet       Lennard-Jones molecular dynamics, velocity Verlet, with a
//                   Verlet list rebuilt every 20 steps, or earlier when the
//                   largest displacement read back says so: cell ids, a
//                   cub::DeviceRadixSort::SortPairs (temporary storage asked
//                   once, shared with cub::DeviceReduce::Sum), particles
//                   reordered into cell order, cell ranges, the list built
//                   with an overflow count read back (the list reallocated and
//                   rebuilt when it is short); energies and the displacement
//                   reduced and read back every 5 steps set a Berendsen factor
//                   passed by value; lists checked against a brute-force host
//                   search, energies against host sums
//   video_pipeline  frames double-buffered over an upload, a compute and a
//                   download stream: pinned staging refilled after the slot's
//                   upload event, cudaStreamWaitEvent chains (uploaded,
//                   consumed mid-way through the compute work, computed,
//                   downloaded), denoise, temporal filter, exposure with a gain
//                   fed back on the device from a histogram (integer atomics),
//                   sharpening; each frame checked on the host one frame late
//                   against a host pipeline; the resolution changes every 60
//                   frames (device and pinned buffers reallocated)
//   mlp_adam        a 3-layer MLP trained in raw CUDA C++: cublasSgemm forward
//                   and backward, bias/ReLU/softmax-cross-entropy kernels, one
//                   AdamW kernel over one parameter blob with the learning
//                   rate (warmup, cosine) and bias corrections by value every
//                   step, batches from a shuffled epoch order, the loss read
//                   back every 10 steps through pinned memory and an event;
//                   an eval pass at another batch size every 50 steps checked
//                   against a double-precision host forward, an AdamW step
//                   checked against the host every 100 steps
//   graph_bfs       breadth-first searches on a grid graph with shortcuts:
//                   one level per step (a frontier queue filled by atomicAdd,
//                   distances by atomicCAS, the smallest parent by atomicMin,
//                   shortest-path counts by 64-bit atomicAdd), the frontier
//                   size read back every level decides the next grid and
//                   whether the frontier is sorted by cub::DeviceRadixSort
//                   (temporary storage grown on demand); every search checked
//                   against a host BFS; the graph is rebuilt (reallocated)
//                   half-way
//
//   apps4 NAME [--iters N]    one scenario
//   apps4 --list              the scenario names
//
// Built with -lcublas; CUB is header-only (no driver API call: no -lcuda).

#include <cublas_v2.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "trap_mirror.cuh"

static_assert(CUBLAS_STATUS_SUCCESS == 0);

namespace {

// ---------------------------------------------------------------- helpers

int blocksFor(int n, int block) { return (n + block - 1) / block; }

template <typename T>
T* devAlloc(size_t count) {
  T* p = nullptr;
  CK(cudaMalloc(&p, count * sizeof(T)));
  return p;
}
template <typename T>
T* pinnedAlloc(size_t count) {
  T* p = nullptr;
  CK(cudaMallocHost(&p, count * sizeof(T)));
  return p;
}

// A MISMATCH line (the host reference disagrees with the device) and exit 1.
[[noreturn]] __attribute__((format(printf, 1, 2))) void mismatch(const char* fmt, ...) {
  std::printf("MISMATCH ");
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::printf("\n");
  std::fflush(stdout);
  std::exit(1);
}
// A device value against a host reference computed another way.
void expectClose(const char* what, int at, size_t index, double got, double want, double rel, double abs) {
  if (!(std::fabs(got - want) <= abs + rel * std::fabs(want)))
    mismatch("%s at %d: element %zu is %.9g, the host reference says %.9g", what, at, index, got, want);
}
// Device memory of plain values against their host mirror, exactly.
template <typename T>
void expectSame(const char* what, int at, const T* dev, const std::vector<T>& want) {
  const std::vector<T> got = fetch<T>(dev, want.size());
  for (size_t k = 0; k < want.size(); ++k)
    if (got[k] != want[k])
      mismatch("%s at %d: element %zu is %lld, the host mirror says %lld", what, at, k, (long long)got[k],
               (long long)want[k]);
}

__host__ __device__ inline int clampInt(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }
constexpr double kPiD = 3.14159265358979323846;

// ================================================================ llm_decode

constexpr int kLmVocab = 256, kLmDim = 128, kLmHeads = 4, kLmHeadDim = kLmDim / kLmHeads, kLmLayers = 2, kLmFfn = 256,
              kLmCtx = 160, kLmMaxPrompt = 40, kLmStops = 3;

__host__ __device__ inline int8_t sat8(long long v) { return int8_t(v < -127 ? -127 : (v > 127 ? 127 : v)); }
// The residual stream saturates at +-2^20.
__host__ __device__ inline int satRes(long long v) {
  const long long m = 1ll << 20;
  return int(v < -m ? -m : (v > m ? m : v));
}
// floor(sqrt(x)), bit by bit.
__host__ __device__ inline uint32_t isqrt64(unsigned long long x) {
  unsigned long long r = 0, bit = 1ull << 62;
  while (bit > x) bit >>= 2;
  while (bit) {
    if (x >= r + bit) {
      x -= r + bit;
      r = (r >> 1) + bit;
    } else {
      r >>= 1;
    }
    bit >>= 2;
  }
  return uint32_t(r);
}
// The integer model's pieces, shared by the kernels and the host model.
__host__ __device__ inline long long lmNormDiv(unsigned long long sumSquares) {
  return (long long)isqrt64(sumSquares / kLmDim) + 1;
}
__host__ __device__ inline int8_t lmNormOut(int x, int gain, long long div) { return sat8((long long)x * gain / div); }
__host__ __device__ inline int lmAngle(int pos, int pair) { return (pos * (pair % (kLmHeadDim / 2) + 1) * 3) & 255; }
__host__ __device__ inline void lmRotate(int a, int b, int c, int s, int8_t& oa, int8_t& ob) {
  oa = sat8(((long long)a * c - (long long)b * s) >> 12);
  ob = sat8(((long long)a * s + (long long)b * c) >> 12);
}
__host__ __device__ inline int lmAttnWeight(int maxScore, int score, const int* lut) {
  const int i = (maxScore - score) >> 6;
  return i > 255 ? 0 : lut[i];
}
__host__ __device__ inline int8_t lmAct(int h) {
  const long long v = h > 0 ? h : 0;
  return sat8((v * v) >> 5);
}
// A sampling key: the logit plus a seeded noise in the high word, the token
// (lowest first on ties) in the low word; the largest key wins.
__host__ __device__ inline unsigned long long lmSampleKey(int logit, int pos, uint32_t seed, int noiseBits, int v) {
  const uint32_t noise = hash32(seed ^ hash32(uint32_t(pos) * 0x9e3779b9u + uint32_t(v))) >> (32 - noiseBits);
  const long long score = (long long)logit + (long long)noise + (1ll << 30);
  return (unsigned long long)score << 32 | (0xFFFFu - uint32_t(v));
}
__host__ __device__ inline int lmKeyToken(unsigned long long key) {
  return int(0xFFFFu - uint32_t(key & 0xFFFFFFFFull));
}

__global__ void lmEmbed(const int* tokens, int pos0, const int8_t* embed, int* x) {
  const int t = blockIdx.x, d = threadIdx.x;
  x[t * kLmDim + d] = int(embed[tokens[pos0 + t] * kLmDim + d]) * 64;
}
// One block per token, a thread per element.
__global__ void lmRmsNorm(const int* x, const int16_t* gain, int8_t* xq) {
  const int t = blockIdx.x, d = threadIdx.x;
  __shared__ unsigned long long ss;
  if (d == 0) ss = 0;
  __syncthreads();
  const int v = x[t * kLmDim + d];
  atomicAdd(&ss, (unsigned long long)((long long)v * v));
  __syncthreads();
  xq[t * kLmDim + d] = lmNormOut(v, gain[d], lmNormDiv(ss));
}
// Y[t][r] = (W[r] . X[t]) >> shift, or added to Y (saturated) when accumulate.
__global__ void lmMatmul(const int8_t* W, const int8_t* X, int* Y, int rows, int k, int shift, int accumulate) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (r >= rows) return;
  const int* w = reinterpret_cast<const int*>(W + size_t(r) * k);
  const int* xv = reinterpret_cast<const int*>(X + size_t(t) * k);
  int acc = 0;
  for (int i = 0; i < k / 4; ++i) acc = __dp4a(w[i], xv[i], acc);
  const int out = acc >> shift;
  int* y = Y + size_t(t) * rows + r;
  *y = accumulate ? satRes((long long)*y + out) : out;
}
// Rotates q and k of token t (position pos0 + t); k and v go into the caches.
__global__ void lmRope(const int* qkv, int pos0, const int16_t* cosT, const int16_t* sinT, int8_t* q8, int8_t* kc,
                       int8_t* vc) {
  const int t = blockIdx.x, i = threadIdx.x, pos = pos0 + t;
  const int* row = qkv + size_t(t) * 3 * kLmDim;
  const int a = lmAngle(pos, i), c = cosT[a], s = sinT[a];
  lmRotate(row[2 * i], row[2 * i + 1], c, s, q8[t * kLmDim + 2 * i], q8[t * kLmDim + 2 * i + 1]);
  lmRotate(row[kLmDim + 2 * i], row[kLmDim + 2 * i + 1], c, s, kc[pos * kLmDim + 2 * i], kc[pos * kLmDim + 2 * i + 1]);
  vc[pos * kLmDim + 2 * i] = sat8(row[2 * kLmDim + 2 * i]);
  vc[pos * kLmDim + 2 * i + 1] = sat8(row[2 * kLmDim + 2 * i + 1]);
}
// One block per (token, head): causal attention of position pos0 + t over the cache.
__global__ void lmAttention(const int8_t* q8, const int8_t* kc, const int8_t* vc, int pos0, const int* lut,
                            int8_t* out) {
  const int t = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, len = pos0 + t + 1;
  __shared__ int score[kLmCtx];
  __shared__ int maxScore;
  __shared__ unsigned long long wsum;
  if (tid == 0) {
    maxScore = INT_MIN;
    wsum = 0;
  }
  __syncthreads();
  const int8_t* q = q8 + t * kLmDim + h * kLmHeadDim;
  for (int j = tid; j < len; j += blockDim.x) {
    const int8_t* k = kc + j * kLmDim + h * kLmHeadDim;
    int s = 0;
    for (int d = 0; d < kLmHeadDim; ++d) s += int(q[d]) * int(k[d]);
    score[j] = s;
    atomicMax(&maxScore, s);
  }
  __syncthreads();
  for (int j = tid; j < len; j += blockDim.x) {
    const int w = lmAttnWeight(maxScore, score[j], lut);
    score[j] = w;
    atomicAdd(&wsum, (unsigned long long)w);
  }
  __syncthreads();
  if (tid < kLmHeadDim) {
    long long a = 0;
    for (int j = 0; j < len; ++j) a += (long long)score[j] * vc[j * kLmDim + h * kLmHeadDim + tid];
    out[t * kLmDim + h * kLmHeadDim + tid] = sat8(a / (long long)wsum);
  }
}
__global__ void lmActQuant(const int* h, int8_t* hq) {
  const int k = blockIdx.x * kLmFfn + threadIdx.x;
  hq[k] = lmAct(h[k]);
}
__global__ void lmSample(const int* logits, int pos, uint32_t seed, int noiseBits, unsigned long long* best) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v < kLmVocab) atomicMax(best, lmSampleKey(logits[v], pos, seed, noiseBits, v));
}
// The winner goes into the token history; the key is reset for the next token.
__global__ void lmCommit(unsigned long long* best, int* tokens, int pos) {
  tokens[pos] = lmKeyToken(*best);
  *best = 0;
}

// The weights (int8, one blob), the norm gains (int16), the rotary tables
// (Q12) and the softmax table (Q15).
struct LmModel {
  size_t embed = 0, wout = 0, wqkv[kLmLayers] = {}, wo[kLmLayers] = {}, w1[kLmLayers] = {}, w2[kLmLayers] = {};
  size_t g1[kLmLayers] = {}, g2[kLmLayers] = {}, gf = 0;
  std::vector<int8_t> w;
  std::vector<int16_t> g, cosT, sinT;
  std::vector<int> lut;
};
LmModel lmModel() {
  LmModel m;
  size_t at = 0;
  auto take = [&](size_t n) {
    const size_t o = at;
    at += n;
    return o;
  };
  m.embed = take(size_t(kLmVocab) * kLmDim);
  for (int l = 0; l < kLmLayers; ++l) {
    m.wqkv[l] = take(size_t(3) * kLmDim * kLmDim);
    m.wo[l] = take(size_t(kLmDim) * kLmDim);
    m.w1[l] = take(size_t(kLmFfn) * kLmDim);
    m.w2[l] = take(size_t(kLmDim) * kLmFfn);
  }
  m.wout = take(size_t(kLmVocab) * kLmDim);
  m.w.resize(at);
  for (size_t k = 0; k < at; ++k) m.w[k] = int8_t(int(hash32(uint32_t(k) * 0x9e3779b9u + 17u) % 63u) - 31);
  at = 0;
  for (int l = 0; l < kLmLayers; ++l) {
    m.g1[l] = take(kLmDim);
    m.g2[l] = take(kLmDim);
  }
  m.gf = take(kLmDim);
  m.g.resize(at);
  for (size_t k = 0; k < at; ++k) m.g[k] = int16_t(32 + hash32(uint32_t(k) + 0x7777u) % 33u);
  for (int a = 0; a < 256; ++a) {
    m.cosT.push_back(int16_t(std::lround(4096.0 * std::cos(2.0 * kPiD * a / 256.0))));
    m.sinT.push_back(int16_t(std::lround(4096.0 * std::sin(2.0 * kPiD * a / 256.0))));
    m.lut.push_back(int(std::lround(32767.0 * std::exp(-a / 24.0))));
  }
  return m;
}

// The same integer model on the host, with its own KV caches.
struct LmHost {
  const LmModel& m;
  std::vector<int8_t> kc[kLmLayers], vc[kLmLayers];
  explicit LmHost(const LmModel& model) : m(model) {
    for (int l = 0; l < kLmLayers; ++l) {
      kc[l].assign(size_t(kLmCtx) * kLmDim, 0);
      vc[l].assign(size_t(kLmCtx) * kLmDim, 0);
    }
  }
  void norm(const int* x, size_t gain, int8_t* xq) const {
    unsigned long long ss = 0;
    for (int d = 0; d < kLmDim; ++d) ss += (unsigned long long)((long long)x[d] * x[d]);
    const long long div = lmNormDiv(ss);
    for (int d = 0; d < kLmDim; ++d) xq[d] = lmNormOut(x[d], m.g[gain + d], div);
  }
  void matmul(size_t w, const int8_t* x, int* y, int rows, int k, int shift, bool accumulate) const {
    for (int r = 0; r < rows; ++r) {
      int acc = 0;
      for (int i = 0; i < k; ++i) acc += int(m.w[w + size_t(r) * k + i]) * int(x[i]);
      y[r] = accumulate ? satRes((long long)y[r] + (acc >> shift)) : acc >> shift;
    }
  }
  // Runs n tokens from pos0 and samples the token after them.
  int forward(const std::vector<int>& tokens, int pos0, int n, uint32_t seed, int noiseBits) {
    std::vector<int> x(size_t(n) * kLmDim), qkv(size_t(3) * kLmDim), hbuf(kLmFfn);
    std::vector<int8_t> xq(kLmFfn), q8(size_t(n) * kLmDim), att(kLmDim), hq(kLmFfn);
    for (int t = 0; t < n; ++t)
      for (int d = 0; d < kLmDim; ++d)
        x[size_t(t) * kLmDim + d] = int(m.w[m.embed + tokens[pos0 + t] * kLmDim + d]) * 64;
    for (int l = 0; l < kLmLayers; ++l) {
      for (int t = 0; t < n; ++t) {  // q, k, v and rotary for every token first
        const int pos = pos0 + t;
        norm(&x[size_t(t) * kLmDim], m.g1[l], xq.data());
        matmul(m.wqkv[l], xq.data(), qkv.data(), 3 * kLmDim, kLmDim, 8, false);
        for (int i = 0; i < kLmDim / 2; ++i) {
          const int a = lmAngle(pos, i), c = m.cosT[a], s = m.sinT[a];
          lmRotate(qkv[2 * i], qkv[2 * i + 1], c, s, q8[t * kLmDim + 2 * i], q8[t * kLmDim + 2 * i + 1]);
          lmRotate(qkv[kLmDim + 2 * i], qkv[kLmDim + 2 * i + 1], c, s, kc[l][pos * kLmDim + 2 * i],
                   kc[l][pos * kLmDim + 2 * i + 1]);
          vc[l][pos * kLmDim + 2 * i] = sat8(qkv[2 * kLmDim + 2 * i]);
          vc[l][pos * kLmDim + 2 * i + 1] = sat8(qkv[2 * kLmDim + 2 * i + 1]);
        }
      }
      for (int t = 0; t < n; ++t) {
        const int len = pos0 + t + 1;
        for (int h = 0; h < kLmHeads; ++h) {
          std::vector<int> score(len);
          int maxScore = INT_MIN;
          for (int j = 0; j < len; ++j) {
            int s = 0;
            for (int d = 0; d < kLmHeadDim; ++d)
              s += int(q8[t * kLmDim + h * kLmHeadDim + d]) * int(kc[l][j * kLmDim + h * kLmHeadDim + d]);
            score[j] = s;
            maxScore = std::max(maxScore, s);
          }
          unsigned long long wsum = 0;
          for (int j = 0; j < len; ++j) {
            score[j] = lmAttnWeight(maxScore, score[j], m.lut.data());
            wsum += (unsigned long long)score[j];
          }
          for (int d = 0; d < kLmHeadDim; ++d) {
            long long a = 0;
            for (int j = 0; j < len; ++j) a += (long long)score[j] * vc[l][j * kLmDim + h * kLmHeadDim + d];
            att[h * kLmHeadDim + d] = sat8(a / (long long)wsum);
          }
        }
        int* xt = &x[size_t(t) * kLmDim];
        matmul(m.wo[l], att.data(), xt, kLmDim, kLmDim, 2, true);
        norm(xt, m.g2[l], xq.data());
        matmul(m.w1[l], xq.data(), hbuf.data(), kLmFfn, kLmDim, 8, false);
        for (int k = 0; k < kLmFfn; ++k) hq[k] = lmAct(hbuf[k]);
        matmul(m.w2[l], hq.data(), xt, kLmDim, kLmFfn, 3, true);
      }
    }
    std::vector<int> logits(kLmVocab);
    norm(&x[size_t(n - 1) * kLmDim], m.gf, xq.data());
    matmul(m.wout, xq.data(), logits.data(), kLmVocab, kLmDim, 0, false);
    unsigned long long best = 0;
    for (int v = 0; v < kLmVocab; ++v) best = std::max(best, lmSampleKey(logits[v], pos0 + n - 1, seed, noiseBits, v));
    return lmKeyToken(best);
  }
};

// A decode engine: each step either prefills a new prompt in one pass (n =
// its length) or decodes one token (n = 1) at the end of the history; the
// sampled token is written on the device, where the next step's embedding
// reads it, and read back for the host's stop decision.
void llmDecode() {
  const LmModel m = lmModel();
  LmHost host(m);
  cudaStream_t s = nonBlockingStream();
  int8_t* dW = devAlloc<int8_t>(m.w.size());
  int16_t* dG = devAlloc<int16_t>(m.g.size());
  int16_t *dCos = devAlloc<int16_t>(256), *dSin = devAlloc<int16_t>(256);
  int* dLut = devAlloc<int>(256);
  CK(cudaMemcpy(dW, m.w.data(), m.w.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dG, m.g.data(), m.g.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dCos, m.cosT.data(), 512, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dSin, m.sinT.data(), 512, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dLut, m.lut.data(), 1024, cudaMemcpyHostToDevice));
  int* dTok = devAlloc<int>(kLmCtx + 1);
  int* dX = devAlloc<int>(size_t(kLmMaxPrompt) * kLmDim);
  int* dQkv = devAlloc<int>(size_t(kLmMaxPrompt) * 3 * kLmDim);
  int* dH = devAlloc<int>(size_t(kLmMaxPrompt) * kLmFfn);
  int* dLogits = devAlloc<int>(kLmVocab);
  int8_t* dXq = devAlloc<int8_t>(size_t(kLmMaxPrompt) * kLmDim);
  int8_t* dQ8 = devAlloc<int8_t>(size_t(kLmMaxPrompt) * kLmDim);
  int8_t* dAtt = devAlloc<int8_t>(size_t(kLmMaxPrompt) * kLmDim);
  int8_t* dHq = devAlloc<int8_t>(size_t(kLmMaxPrompt) * kLmFfn);
  int8_t *dK[kLmLayers], *dV[kLmLayers];
  for (int l = 0; l < kLmLayers; ++l) {
    dK[l] = devAlloc<int8_t>(size_t(kLmCtx) * kLmDim);
    dV[l] = devAlloc<int8_t>(size_t(kLmCtx) * kLmDim);
    CK(cudaMemset(dK[l], 0, size_t(kLmCtx) * kLmDim));
    CK(cudaMemset(dV[l], 0, size_t(kLmCtx) * kLmDim));
  }
  unsigned long long* dBest = devAlloc<unsigned long long>(1);
  CK(cudaMemset(dBest, 0, 8));
  CK(cudaMemset(dTok, 0, (kLmCtx + 1) * 4));
  int* hTok = pinnedAlloc<int>(2);  // [0] the sampled token, [1] a forced one
  CK(cudaDeviceSynchronize());

  auto forward = [&](int pos0, int n, uint32_t seed, int noiseBits) {
    lmEmbed<<<n, kLmDim, 0, s>>>(dTok, pos0, dW + m.embed, dX);
    for (int l = 0; l < kLmLayers; ++l) {
      lmRmsNorm<<<n, kLmDim, 0, s>>>(dX, dG + m.g1[l], dXq);
      lmMatmul<<<dim3(3 * kLmDim / 128, n), 128, 0, s>>>(dW + m.wqkv[l], dXq, dQkv, 3 * kLmDim, kLmDim, 8, 0);
      lmRope<<<n, kLmDim / 2, 0, s>>>(dQkv, pos0, dCos, dSin, dQ8, dK[l], dV[l]);
      lmAttention<<<dim3(n, kLmHeads), 128, 0, s>>>(dQ8, dK[l], dV[l], pos0, dLut, dAtt);
      lmMatmul<<<dim3(kLmDim / 128, n), 128, 0, s>>>(dW + m.wo[l], dAtt, dX, kLmDim, kLmDim, 2, 1);
      lmRmsNorm<<<n, kLmDim, 0, s>>>(dX, dG + m.g2[l], dXq);
      lmMatmul<<<dim3(kLmFfn / 128, n), 128, 0, s>>>(dW + m.w1[l], dXq, dH, kLmFfn, kLmDim, 8, 0);
      lmActQuant<<<n, kLmFfn, 0, s>>>(dH, dHq);
      lmMatmul<<<dim3(kLmDim / 128, n), 128, 0, s>>>(dW + m.w2[l], dHq, dX, kLmDim, kLmFfn, 3, 1);
    }
    lmRmsNorm<<<1, kLmDim, 0, s>>>(dX + (n - 1) * kLmDim, dG + m.gf, dXq);
    lmMatmul<<<dim3(kLmVocab / 128, 1), 128, 0, s>>>(dW + m.wout, dXq, dLogits, kLmVocab, kLmDim, 0, 0);
    lmSample<<<kLmVocab / 128, 128, 0, s>>>(dLogits, pos0 + n - 1, seed, noiseBits, dBest);
    lmCommit<<<1, 1, 0, s>>>(dBest, dTok, pos0 + n);
    CKL();
    CK(cudaMemcpyAsync(hTok, dTok + pos0 + n, 4, cudaMemcpyDeviceToHost, s));
  };

  int prompt = 0, promptLen = 0, maxNew = 0, fresh = 0, noiseBits = 0, generated = 0;
  uint32_t seed = 0;
  bool prefill = true;
  std::vector<int> seq, promptTokens;
  Digest all;
  auto startPrompt = [&] {
    const uint32_t h = hash32(uint32_t(prompt) * 7919u + 1u);
    promptLen = 6 + int(h % 35u);
    maxNew = 12 + int(hash32(h) % 41u);
    seed = hash32(uint32_t(prompt) + 0x1234u);
    noiseBits = 11 + prompt % 6;
    promptTokens.resize(promptLen);
    for (int k = 0; k < promptLen; ++k)
      promptTokens[k] = kLmStops + int(hash32(h + uint32_t(k)) % (kLmVocab - kLmStops));
    seq = promptTokens;
    fresh = 0;
    prefill = true;
    // From pageable memory: staged before the call returns.
    CK(cudaMemcpyAsync(dTok, promptTokens.data(), size_t(promptLen) * 4, cudaMemcpyHostToDevice, s));
  };
  startPrompt();
  for (int it = 0; it < g_iters; ++it) {
    const int n = prefill ? promptLen : 1, pos0 = prefill ? 0 : int(seq.size()) - 1;
    forward(pos0, n, seed, noiseBits);
    const int want = host.forward(seq, pos0, n, seed, noiseBits);  // while the device works
    CK(cudaStreamSynchronize(s));
    const int got = hTok[0];
    if (got != want)
      mismatch("llm_decode token at step %d (prompt %d, position %d): %d, the host model says %d", it, prompt, pos0 + n,
               got, want);
    prefill = false;
    ++fresh;
    ++generated;
    int next = got;
    if (prompt % 3 == 1 && fresh == 4) {  // the host forces a token (a tool call) into the history
      next = kLmStops + prompt % 50;
      hTok[1] = next;
      CK(cudaMemcpyAsync(dTok + pos0 + n, hTok + 1, 4, cudaMemcpyHostToDevice, s));
    }
    seq.push_back(next);
    all.add(uint64_t(uint32_t(next)));
    const int stop = next < kLmStops ? 1 : (fresh >= maxNew || int(seq.size()) >= kLmCtx ? 2 : 0);
    if (stop) {
      std::printf("prompt %d len %d new %d stop %d seq %016llx\n", prompt, promptLen, fresh, stop,
                  ull(hostDigest(seq.data(), seq.size() * 4)));
      ++prompt;
      startPrompt();
    }
    if (it % 50 == 49) {
      CK(cudaStreamSynchronize(s));
      Digest kv;
      for (int l = 0; l < kLmLayers; ++l) {
        expectSame("llm_decode k cache", it, dK[l], host.kc[l]);
        expectSame("llm_decode v cache", it, dV[l], host.vc[l]);
        kv.add(host.kc[l].data(), host.kc[l].size());
        kv.add(host.vc[l].data(), host.vc[l].size());
      }
      std::printf("step %d prompts %d tokens %016llx kv %016llx\n", it, prompt, ull(all.h), ull(kv.h));
    }
  }
  CK(cudaStreamSynchronize(s));
  std::printf("end prompts %d generated %d tokens %016llx\n", prompt, generated, ull(all.h));
  for (void* p : {(void*)dW, (void*)dG, (void*)dCos, (void*)dSin, (void*)dLut, (void*)dTok, (void*)dX, (void*)dQkv,
                  (void*)dH, (void*)dLogits, (void*)dXq, (void*)dQ8, (void*)dAtt, (void*)dHq, (void*)dBest})
    CK(cudaFree(p));
  for (int l = 0; l < kLmLayers; ++l) {
    CK(cudaFree(dK[l]));
    CK(cudaFree(dV[l]));
  }
  CK(cudaFreeHost(hTok));
  CK(cudaStreamDestroy(s));
}

// ================================================================ server_pool

constexpr int kSvThreads = 4, kSvIn = 256, kSvHid = 512, kSvOut = 64, kSvMaxRows = 16, kSvPerVersion = 100;
// One weight slot: W1 [hid][in], b1, W2 [out][hid], b2 (row-major).
constexpr size_t kSvW1 = 0, kSvB1 = kSvW1 + size_t(kSvHid) * kSvIn, kSvW2 = kSvB1 + kSvHid,
                 kSvB2 = kSvW2 + size_t(kSvOut) * kSvHid, kSvWeights = kSvB2 + kSvOut;

int svRows(int id) { return 1 + int(hash32(uint32_t(id) * 0x27d4eb2fu + 3u) % uint32_t(kSvMaxRows)); }
float svInput(int id, int row, int k) {
  return unitFloat(hash32(uint32_t(id) * 0x9e3779b9u ^ hash32(uint32_t(row * kSvIn + k) + 0x51edu))) * 2.0f - 1.0f;
}
std::vector<float> svWeights(int version) {
  std::vector<float> w(kSvWeights);
  for (size_t k = 0; k < kSvWeights; ++k) {
    const float u = unitFloat(hash32(uint32_t(k) * 0x85ebca6bu + uint32_t(version) * 0xc2b2ae35u + 9u)) - 0.5f;
    w[k] = k < kSvB1 ? u * 0.25f : (k < kSvW2 ? u * 0.1f : (k < kSvB2 ? u * 0.2f : u * 0.1f));
  }
  return w;
}

__global__ void svBiasGelu(float* h, const float* b, int rows) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= rows * kSvHid) return;
  const float x = h[k] + b[k % kSvHid];
  h[k] = 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}
// One block of kSvOut threads per row: the logits get their bias, then the
// top class (lowest index on ties) and its probability, reduced in a fixed tree.
__global__ void svSoftmaxTop(float* y, const float* b, float* prob, int* cls) {
  const int row = blockIdx.x, t = threadIdx.x;
  __shared__ float val[kSvOut], sum[kSvOut];
  __shared__ int idx[kSvOut];
  const float z = y[row * kSvOut + t] + b[t];
  y[row * kSvOut + t] = z;
  val[t] = z;
  idx[t] = t;
  __syncthreads();
  for (int s = kSvOut / 2; s > 0; s >>= 1) {
    if (t < s && (val[t + s] > val[t] || (val[t + s] == val[t] && idx[t + s] < idx[t]))) {
      val[t] = val[t + s];
      idx[t] = idx[t + s];
    }
    __syncthreads();
  }
  sum[t] = expf(z - val[0]);
  __syncthreads();
  for (int s = kSvOut / 2; s > 0; s >>= 1) {
    if (t < s) sum[t] += sum[t + s];
    __syncthreads();
  }
  if (t == 0) {
    prob[row] = 1.0f / sum[0];
    cls[row] = idx[0];
  }
}

// The request's logits, top probabilities and classes against a double
// precision forward pass of the same weights.
void svCheck(int id, const std::vector<float>& w, const float* x, int rows, const float* logits, const float* prob,
             const int* cls) {
  std::vector<double> h(kSvHid), y(kSvOut);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < kSvHid; ++j) {
      double a = w[kSvB1 + j];
      for (int k = 0; k < kSvIn; ++k) a += double(w[kSvW1 + size_t(j) * kSvIn + k]) * x[r * kSvIn + k];
      h[j] = 0.5 * a * (1.0 + std::tanh(0.7978845608 * (a + 0.044715 * a * a * a)));
    }
    for (int c = 0; c < kSvOut; ++c) {
      double a = w[kSvB2 + c];
      for (int j = 0; j < kSvHid; ++j) a += double(w[kSvW2 + size_t(c) * kSvHid + j]) * h[j];
      y[c] = a;
      expectClose("server_pool logit", id, size_t(r * kSvOut + c), logits[r * kSvOut + c], a, 1e-4, 1e-4);
    }
    const int best = int(std::max_element(y.begin(), y.end()) - y.begin());
    int second = best == 0 ? 1 : 0;
    for (int c = 0; c < kSvOut; ++c)
      if (c != best && y[c] > y[second]) second = c;
    double sum = 0.0;
    for (int c = 0; c < kSvOut; ++c) sum += std::exp(y[c] - y[best]);
    expectClose("server_pool probability", id, size_t(r), prob[r], 1.0 / sum, 1e-4, 1e-5);
    if (y[best] - y[second] > 1e-3 && cls[r] != best)
      mismatch("server_pool class at request %d row %d: %d, the host reference says %d", id, r, cls[r], best);
  }
}

// Requests go into one queue; worker t serves requests t, t + 4, ... on its
// own stream with its own cuBLAS handle. The main thread publishes requests,
// swaps weight versions, and prints the results in request order.
void serverPool() {
  const int dev = currentDevice(), total = g_iters;
  float* slot[2] = {devAlloc<float>(kSvWeights), devAlloc<float>(kSvWeights)};
  std::vector<std::vector<float>> versions;  // the host's copy of every version uploaded
  const int nVersions = (total + kSvPerVersion - 1) / kSvPerVersion;
  for (int v = 0; v < nVersions; ++v) versions.push_back(svWeights(v));
  for (int v = 0; v < 2 && v < nVersions; ++v)
    CK(cudaMemcpy(slot[v], versions[v].data(), kSvWeights * 4, cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());

  std::mutex mu;
  std::condition_variable cv;
  int published = 0;
  std::vector<char> done(total, 0);
  std::vector<uint64_t> digest(total, 0);
  std::vector<int> firstClass(total, 0);
  float elapsedMs[kSvThreads] = {};

  auto worker = [&](int t) {
    CK(cudaSetDevice(dev));
    cudaStream_t s = nonBlockingStream();
    cublasHandle_t h;
    CKB(cublasCreate(&h));
    CKB(cublasSetStream(h, s));
    float* inPin = pinnedAlloc<float>(size_t(kSvMaxRows) * kSvIn);
    float* outPin = pinnedAlloc<float>(size_t(kSvMaxRows) * (kSvOut + 1));
    int* clsPin = pinnedAlloc<int>(kSvMaxRows);
    float* dx = devAlloc<float>(size_t(kSvMaxRows) * kSvIn);
    float* dh = devAlloc<float>(size_t(kSvMaxRows) * kSvHid);
    float* dy = devAlloc<float>(size_t(kSvMaxRows) * kSvOut);
    float* dprob = devAlloc<float>(kSvMaxRows);
    int* dcls = devAlloc<int>(kSvMaxRows);
    cudaEvent_t start, stop;
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
    const float one = 1.0f, zero = 0.0f;
    for (int id = t; id < total; id += kSvThreads) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return published > id; });
      }
      const int rows = svRows(id), version = id / kSvPerVersion;
      const float* w = slot[version % 2];
      for (int r = 0; r < rows; ++r)
        for (int k = 0; k < kSvIn; ++k) inPin[r * kSvIn + k] = svInput(id, r, k);
      CK(cudaEventRecord(start, s));
      CK(cudaMemcpyAsync(dx, inPin, size_t(rows) * kSvIn * 4, cudaMemcpyHostToDevice, s));
      CKB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, kSvHid, rows, kSvIn, &one, w + kSvW1, kSvIn, dx, kSvIn, &zero, dh,
                      kSvHid));
      svBiasGelu<<<blocksFor(rows * kSvHid, 256), 256, 0, s>>>(dh, w + kSvB1, rows);
      CKL();
      CKB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, kSvOut, rows, kSvHid, &one, w + kSvW2, kSvHid, dh, kSvHid, &zero, dy,
                      kSvOut));
      svSoftmaxTop<<<rows, kSvOut, 0, s>>>(dy, w + kSvB2, dprob, dcls);
      CKL();
      CK(cudaMemcpyAsync(outPin, dy, size_t(rows) * kSvOut * 4, cudaMemcpyDeviceToHost, s));
      CK(cudaMemcpyAsync(outPin + rows * kSvOut, dprob, size_t(rows) * 4, cudaMemcpyDeviceToHost, s));
      CK(cudaMemcpyAsync(clsPin, dcls, size_t(rows) * 4, cudaMemcpyDeviceToHost, s));
      CK(cudaEventRecord(stop, s));
      CK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      CK(cudaEventElapsedTime(&ms, start, stop));
      elapsedMs[t] += ms;
      svCheck(id, versions[version], inPin, rows, outPin, outPin + rows * kSvOut, clsPin);
      Digest d;
      d.add(outPin, size_t(rows) * (kSvOut + 1) * 4);
      d.add(clsPin, size_t(rows) * 4);
      {
        std::lock_guard<std::mutex> lock(mu);
        digest[id] = d.h;
        firstClass[id] = clsPin[0];
        done[id] = 1;
      }
      cv.notify_all();
    }
    CK(cudaEventDestroy(start));
    CK(cudaEventDestroy(stop));
    for (void* p : {(void*)dx, (void*)dh, (void*)dy, (void*)dprob, (void*)dcls}) CK(cudaFree(p));
    for (void* p : {(void*)inPin, (void*)outPin, (void*)clsPin}) CK(cudaFreeHost(p));
    CKB(cublasDestroy(h));
    CK(cudaStreamDestroy(s));
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < kSvThreads; ++t) pool.emplace_back(worker, t);

  cudaStream_t upload = nonBlockingStream();
  float* stagePin = pinnedAlloc<float>(kSvWeights);
  for (int id = 0; id < total; ++id) {
    const int version = id / kSvPerVersion;
    if (id % kSvPerVersion == 0 && version >= 2) {
      // Slot version % 2 last served version - 2: wait for those requests.
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] {
          for (int k = (version - 2) * kSvPerVersion; k < (version - 1) * kSvPerVersion; ++k)
            if (!done[k]) return false;
          return true;
        });
      }
      std::memcpy(stagePin, versions[version].data(), kSvWeights * 4);
      CK(cudaMemcpyAsync(slot[version % 2], stagePin, kSvWeights * 4, cudaMemcpyHostToDevice, upload));
      CK(cudaStreamSynchronize(upload));
      std::printf("version %d in slot %d at request %d\n", version, version % 2, id);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      published = id + 1;
    }
    cv.notify_all();
  }
  Digest run, classes;
  int rowsServed = 0;
  for (int id = 0; id < total; ++id) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done[id] != 0; });
    }
    run.add(digest[id]);
    classes.add(uint64_t(firstClass[id]));
    rowsServed += svRows(id);
    if (id % 25 == 24 || id == total - 1)
      std::printf("requests %d rows %d results %016llx classes %016llx\n", id + 1, rowsServed, ull(run.h),
                  ull(classes.h));
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < kSvThreads; ++t) std::fprintf(stderr, "server_pool: worker %d %.2f ms\n", t, elapsedMs[t]);
  std::printf("end requests %d results %016llx\n", total, ull(run.h));
  CK(cudaFreeHost(stagePin));
  CK(cudaStreamDestroy(upload));
  CK(cudaFree(slot[0]));
  CK(cudaFree(slot[1]));
}

// ================================================================ md_verlet

constexpr int kMdSide = 16, kMdN = kMdSide * kMdSide * kMdSide, kMdCellsPerSide = 5,
              kMdCells = kMdCellsPerSide * kMdCellsPerSide * kMdCellsPerSide, kMdCellBits = 7;
constexpr float kMdSpacing = 1.12f, kMdBox = kMdSide * kMdSpacing, kMdRc = 2.5f, kMdSkin = 0.5f,
                kMdCellSize = kMdBox / kMdCellsPerSide, kMdDt = 0.003f, kMdT0 = 1.0f;
constexpr int kMdEvery = 5, kMdMaxAge = 20;
static_assert(kMdCellSize >= kMdRc + kMdSkin && kMdCellsPerSide >= 3 && kMdCells <= (1 << kMdCellBits));

__host__ __device__ inline float mdWrap(float x) { return x >= kMdBox ? x - kMdBox : (x < 0.0f ? x + kMdBox : x); }
__host__ __device__ inline float mdImage(float d) {
  return d > 0.5f * kMdBox ? d - kMdBox : (d < -0.5f * kMdBox ? d + kMdBox : d);
}
__device__ inline int mdCellCoord(float x) { return min(max(int(x * (1.0f / kMdCellSize)), 0), kMdCellsPerSide - 1); }

__global__ void mdCells(const float4* pos, unsigned* cell, int* idx, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float4 p = pos[i];
  cell[i] = unsigned((mdCellCoord(p.z) * kMdCellsPerSide + mdCellCoord(p.y)) * kMdCellsPerSide + mdCellCoord(p.x));
  idx[i] = i;
}
// The particles into cell order; the positions also into `ref` (displacements
// are measured from there).
__global__ void mdReorder(const int* order, const float4* pos, const float4* vel, const float4* force, const int* tag,
                          float4* pos2, float4* vel2, float4* force2, int* tag2, float4* ref, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int j = order[i];
  pos2[i] = ref[i] = pos[j];
  vel2[i] = vel[j];
  force2[i] = force[j];
  tag2[i] = tag[j];
}
__global__ void mdCellRanges(const unsigned* cell, int* start, int* end, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned c = cell[i];
  if (i == 0 || cell[i - 1] != c) start[c] = i;
  if (i == n - 1 || cell[i + 1] != c) end[c] = i + 1;
}
// The Verlet list of particle i: the 27 cells around its own in a fixed
// order, their particles in cell order; entry k at list[k * n + i]. A count
// over `cap` is reported through `overflow` (the largest).
__global__ void mdNeighbours(const float4* pos, const unsigned* cell, const int* start, const int* end, int* list,
                             int* count, int cap, int* overflow, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  constexpr int P = kMdCellsPerSide;
  const float4 p = pos[i];
  const int c = int(cell[i]), cx = c % P, cy = (c / P) % P, cz = c / (P * P);
  const float lim = (kMdRc + kMdSkin) * (kMdRc + kMdSkin);
  int cnt = 0;
  for (int dz = -1; dz <= 1; ++dz)
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const int nc = (((cz + dz + P) % P) * P + (cy + dy + P) % P) * P + (cx + dx + P) % P;
        for (int j = start[nc]; j < end[nc]; ++j) {
          if (j == i) continue;
          const float4 q = pos[j];
          const float ddx = mdImage(q.x - p.x), ddy = mdImage(q.y - p.y), ddz = mdImage(q.z - p.z);
          if (ddx * ddx + ddy * ddy + ddz * ddz < lim) {
            if (cnt < cap) list[cnt * n + i] = j;
            ++cnt;
          }
        }
      }
  count[i] = cnt;
  if (cnt > cap) atomicMax(overflow, cnt);
}
__global__ void mdKickDrift(float4* pos, float4* vel, const float4* force, int n, float dt) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = vel[i], p = pos[i];
  const float4 f = force[i];
  v.x += 0.5f * dt * f.x;
  v.y += 0.5f * dt * f.y;
  v.z += 0.5f * dt * f.z;
  p.x = mdWrap(p.x + dt * v.x);
  p.y = mdWrap(p.y + dt * v.y);
  p.z = mdWrap(p.z + dt * v.z);
  vel[i] = v;
  pos[i] = p;
}
// Lennard-Jones forces (cut and shifted at kMdRc) over the list, in list
// order; w holds half the particle's pair energy.
__global__ void mdForces(const float4* pos, const int* list, const int* count, int cap, float4* force, int n,
                         float ecut) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float4 p = pos[i];
  float fx = 0.0f, fy = 0.0f, fz = 0.0f, e = 0.0f;
  const int cnt = min(count[i], cap);
  for (int k = 0; k < cnt; ++k) {
    const float4 q = pos[list[k * n + i]];
    const float dx = mdImage(p.x - q.x), dy = mdImage(p.y - q.y), dz = mdImage(p.z - q.z);
    const float r2 = dx * dx + dy * dy + dz * dz;
    if (r2 < kMdRc * kMdRc) {
      const float ir2 = 1.0f / r2, ir6 = ir2 * ir2 * ir2, f = 24.0f * ir2 * ir6 * (2.0f * ir6 - 1.0f);
      fx += f * dx;
      fy += f * dy;
      fz += f * dz;
      e += 4.0f * ir6 * (ir6 - 1.0f) - ecut;
    }
  }
  force[i] = make_float4(fx, fy, fz, 0.5f * e);
}
__global__ void mdKick(float4* vel, const float4* force, int n, float dt, float lambda) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 v = vel[i];
  const float4 f = force[i];
  v.x = (v.x + 0.5f * dt * f.x) * lambda;
  v.y = (v.y + 0.5f * dt * f.y) * lambda;
  v.z = (v.z + 0.5f * dt * f.z) * lambda;
  vel[i] = v;
}
// Per-particle energies for the reductions, and the largest squared
// displacement since the list was built (float bits: positive, so ordered).
__global__ void mdEnergyTerms(const float4* pos, const float4* vel, const float4* force, const float4* ref, double* ke,
                              double* pe, unsigned* maxDisp, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float4 v = vel[i], p = pos[i], r = ref[i];
  ke[i] = 0.5 * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
  pe[i] = force[i].w;
  const float dx = mdImage(p.x - r.x), dy = mdImage(p.y - r.y), dz = mdImage(p.z - r.z);
  atomicMax(maxDisp, __float_as_uint(dx * dx + dy * dy + dz * dz));
}

double mdImageHost(double d) { return d > 0.5 * kMdBox ? d - kMdBox : (d < -0.5 * kMdBox ? d + kMdBox : d); }
double mdDist2Host(const float4& a, const float4& b) {
  const double dx = mdImageHost(double(b.x) - a.x), dy = mdImageHost(double(b.y) - a.y),
               dz = mdImageHost(double(b.z) - a.z);
  return dx * dx + dy * dy + dz * dz;
}

// The list against a brute-force search: every pair closer than rc + skin/2
// listed, no entry farther than rc + skin, no duplicates; cells ascending.
void mdCheckList(int step, const float4* dPos, const unsigned* dCell, const int* dList, const int* dCount, int cap) {
  const std::vector<float4> pos = fetch<float4>(dPos, kMdN);
  const std::vector<unsigned> cell = fetch<unsigned>(dCell, kMdN);
  const std::vector<int> list = fetch<int>(dList, size_t(cap) * kMdN), count = fetch<int>(dCount, kMdN);
  std::vector<int> stamp(kMdN, -1);
  const double near = (kMdRc + 0.5 * kMdSkin) * (kMdRc + 0.5 * kMdSkin), far = (kMdRc + kMdSkin) * (kMdRc + kMdSkin);
  for (int i = 0; i < kMdN; ++i) {
    if (i > 0 && cell[i] < cell[i - 1])
      mismatch("md_verlet cells at step %d: particle %d is out of cell order", step, i);
    if (count[i] > cap)
      mismatch("md_verlet list at step %d: particle %d has %d entries, capacity %d", step, i, count[i], cap);
    for (int k = 0; k < count[i]; ++k) {
      const int j = list[size_t(k) * kMdN + i];
      if (j < 0 || j >= kMdN || j == i || stamp[j] == i)
        mismatch("md_verlet list at step %d: particle %d entry %d is %d", step, i, k, j);
      stamp[j] = i;
      if (mdDist2Host(pos[i], pos[j]) > far * 1.0001)
        mismatch("md_verlet list at step %d: particle %d lists %d at distance^2 %.6f", step, i, j,
                 mdDist2Host(pos[i], pos[j]));
    }
    for (int j = 0; j < kMdN; ++j)
      if (j != i && stamp[j] != i && mdDist2Host(pos[i], pos[j]) < near)
        mismatch("md_verlet list at step %d: particle %d misses %d at distance^2 %.6f", step, i, j,
                 mdDist2Host(pos[i], pos[j]));
  }
}

// Velocity Verlet with a Verlet list: rebuilt (sort into cell order, ranges,
// list) every kMdMaxAge steps, or earlier when the largest displacement read
// back every kMdEvery steps passes a quarter of the skin; a Berendsen
// thermostat factor from the kinetic energy read back at the same time.
void mdVerlet() {
  cudaStream_t s = nonBlockingStream();
  constexpr int N = kMdN, G = N / 128;
  std::vector<float4> hp(N), hv(N);
  std::vector<int> htag(N);
  double mean[3] = {0, 0, 0};
  for (int i = 0; i < N; ++i) {
    const int x = i % kMdSide, y = (i / kMdSide) % kMdSide, z = i / (kMdSide * kMdSide);
    auto jitter = [&](uint32_t salt) { return (unitFloat(hash32(uint32_t(i) * 0x9e3779b9u + salt)) - 0.5f) * 0.1f; };
    hp[i] = make_float4((x + 0.5f) * kMdSpacing + jitter(1), (y + 0.5f) * kMdSpacing + jitter(2),
                        (z + 0.5f) * kMdSpacing + jitter(3), 0.0f);
    auto speed = [&](uint32_t salt) { return unitFloat(hash32(uint32_t(i) * 0x85ebca6bu + salt)) * 2.0f - 1.0f; };
    hv[i] = make_float4(speed(4), speed(5), speed(6), 0.0f);
    mean[0] += hv[i].x;
    mean[1] += hv[i].y;
    mean[2] += hv[i].z;
    htag[i] = i;
  }
  double ke0 = 0.0;
  for (auto& v : hv) {
    v.x -= float(mean[0] / N);
    v.y -= float(mean[1] / N);
    v.z -= float(mean[2] / N);
    ke0 += 0.5 * (double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z);
  }
  const float scale = float(std::sqrt(1.5 * N * kMdT0 / ke0));
  for (auto& v : hv) v.x *= scale, v.y *= scale, v.z *= scale;
  float4 *pos = devAlloc<float4>(N), *vel = devAlloc<float4>(N), *force = devAlloc<float4>(N);
  float4 *pos2 = devAlloc<float4>(N), *vel2 = devAlloc<float4>(N), *force2 = devAlloc<float4>(N);
  float4* ref = devAlloc<float4>(N);
  int *tag = devAlloc<int>(N), *tag2 = devAlloc<int>(N), *idx = devAlloc<int>(N), *order = devAlloc<int>(N);
  unsigned *cell = devAlloc<unsigned>(N), *cellSorted = devAlloc<unsigned>(N), *maxDisp = devAlloc<unsigned>(1);
  int *cellStart = devAlloc<int>(kMdCells), *cellEnd = devAlloc<int>(kMdCells), *count = devAlloc<int>(N);
  int* overflow = devAlloc<int>(1);
  double *ke = devAlloc<double>(N), *pe = devAlloc<double>(N), *sums = devAlloc<double>(2);
  CK(cudaMemcpy(pos, hp.data(), N * sizeof(float4), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(vel, hv.data(), N * sizeof(float4), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(tag, htag.data(), N * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(force, 0, N * sizeof(float4)));
  double* sumsPin = pinnedAlloc<double>(2);
  unsigned* dispPin = pinnedAlloc<unsigned>(1);
  int* overflowPin = pinnedAlloc<int>(1);
  // One temporary buffer for the sort and the reductions, sized once.
  size_t sortBytes = 0, sumBytes = 0;
  CK(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes, cell, cellSorted, idx, order, N, 0, kMdCellBits, s));
  CK(cub::DeviceReduce::Sum(nullptr, sumBytes, ke, sums, N, s));
  const size_t tempBytes = std::max(sortBytes, sumBytes);
  void* temp = devAlloc<char>(tempBytes);
  int cap = 48, rebuilds = 0;
  int* list = devAlloc<int>(size_t(cap) * N);
  CK(cudaDeviceSynchronize());
  const float ir6c = 1.0f / (kMdRc * kMdRc * kMdRc * kMdRc * kMdRc * kMdRc), ecut = 4.0f * ir6c * (ir6c - 1.0f);

  auto rebuild = [&](int step) {
    mdCells<<<G, 128, 0, s>>>(pos, cell, idx, N);
    CKL();
    size_t bytes = tempBytes;
    CK(cub::DeviceRadixSort::SortPairs(temp, bytes, cell, cellSorted, idx, order, N, 0, kMdCellBits, s));
    mdReorder<<<G, 128, 0, s>>>(order, pos, vel, force, tag, pos2, vel2, force2, tag2, ref, N);
    CKL();
    std::swap(pos, pos2);
    std::swap(vel, vel2);
    std::swap(force, force2);
    std::swap(tag, tag2);
    CK(cudaMemsetAsync(cellStart, 0, kMdCells * 4, s));
    CK(cudaMemsetAsync(cellEnd, 0, kMdCells * 4, s));
    mdCellRanges<<<G, 128, 0, s>>>(cellSorted, cellStart, cellEnd, N);
    CKL();
    for (;;) {
      CK(cudaMemsetAsync(overflow, 0, 4, s));
      mdNeighbours<<<G, 128, 0, s>>>(pos, cellSorted, cellStart, cellEnd, list, count, cap, overflow, N);
      CKL();
      CK(cudaMemcpyAsync(overflowPin, overflow, 4, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      if (*overflowPin <= cap) break;
      cap = (*overflowPin + 16 + 31) / 32 * 32;  // some room, then build again
      CK(cudaFree(list));
      list = devAlloc<int>(size_t(cap) * N);
      std::printf("step %d list capacity %d\n", step, cap);
    }
    CK(cudaMemsetAsync(maxDisp, 0, 4, s));
    if (rebuilds < 3 || rebuilds % 5 == 0) mdCheckList(step, pos, cellSorted, list, count, cap);
    ++rebuilds;
  };

  rebuild(-1);
  mdForces<<<G, 128, 0, s>>>(pos, list, count, cap, force, N, ecut);
  CKL();
  float lambda = 1.0f;
  int age = 0;
  bool displaced = false;
  Digest energies;
  for (int step = 0; step < g_iters; ++step) {
    if (age >= kMdMaxAge || displaced) {
      rebuild(step);
      age = 0;
      displaced = false;
    }
    mdKickDrift<<<G, 128, 0, s>>>(pos, vel, force, N, kMdDt);
    mdForces<<<G, 128, 0, s>>>(pos, list, count, cap, force, N, ecut);
    mdKick<<<G, 128, 0, s>>>(vel, force, N, kMdDt, lambda);
    CKL();
    ++age;
    if (step % kMdEvery != kMdEvery - 1) continue;
    mdEnergyTerms<<<G, 128, 0, s>>>(pos, vel, force, ref, ke, pe, maxDisp, N);
    CKL();
    size_t bytes = tempBytes;
    CK(cub::DeviceReduce::Sum(temp, bytes, ke, sums, N, s));
    CK(cub::DeviceReduce::Sum(temp, bytes, pe, sums + 1, N, s));
    CK(cudaMemcpyAsync(sumsPin, sums, 16, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(dispPin, maxDisp, 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    const double kin = sumsPin[0], pot = sumsPin[1], temperature = 2.0 * kin / (3.0 * N);
    float disp2;
    std::memcpy(&disp2, dispPin, 4);
    displaced = std::sqrt(disp2) > 0.25f * kMdSkin;
    lambda = float(std::min(1.02, std::max(0.98, std::sqrt(1.0 + 0.03 * (kMdT0 / temperature - 1.0)))));
    energies.add(bits(kin));
    energies.add(bits(pot));
    if (step % 50 == 49) {  // both energies against host sums
      const std::vector<float4> p = fetch<float4>(pos, N), v = fetch<float4>(vel, N);
      double hk = 0.0, hpot = 0.0;
      const double rc2 = double(kMdRc) * kMdRc, ir6d = 1.0 / (rc2 * rc2 * rc2), ecutd = 4.0 * ir6d * (ir6d - 1.0);
      for (int i = 0; i < N; ++i) {
        hk += 0.5 * (double(v[i].x) * v[i].x + double(v[i].y) * v[i].y + double(v[i].z) * v[i].z);
        for (int j = i + 1; j < N; ++j) {
          const double r2 = mdDist2Host(p[i], p[j]);
          if (r2 < rc2) {
            const double ir6 = 1.0 / (r2 * r2 * r2);
            hpot += 4.0 * ir6 * (ir6 - 1.0) - ecutd;
          }
        }
      }
      expectClose("md_verlet kinetic energy", step, 0, kin, hk, 1e-9, 1e-9);
      expectClose("md_verlet potential energy", step, 0, pot, hpot, 1e-4, 0.05);
    }
    if (step % 25 == 24)
      std::printf("step %d ke %016llx pe %016llx lambda %08x rebuilds %d cap %d\n", step, bits(kin), bits(pot),
                  bits(lambda), rebuilds, cap);
  }
  CK(cudaStreamSynchronize(s));
  std::printf("end rebuilds %d energies %016llx pos %016llx vel %016llx tag %016llx\n", rebuilds, ull(energies.h),
              ull(deviceDigest(pos, N * sizeof(float4))), ull(deviceDigest(vel, N * sizeof(float4))),
              ull(deviceDigest(tag, N * 4)));
  for (void* p : {(void*)pos,        (void*)vel,     (void*)force,     (void*)pos2,    (void*)vel2,  (void*)force2,
                  (void*)ref,        (void*)tag,     (void*)tag2,      (void*)idx,     (void*)order, (void*)cell,
                  (void*)cellSorted, (void*)maxDisp, (void*)cellStart, (void*)cellEnd, (void*)count, (void*)overflow,
                  (void*)ke,         (void*)pe,      (void*)sums,      temp,           (void*)list})
    CK(cudaFree(p));
  for (void* p : {(void*)sumsPin, (void*)dispPin, (void*)overflowPin}) CK(cudaFreeHost(p));
  CK(cudaStreamDestroy(s));
}

// ================================================================ video_pipeline

struct VpSize {
  int w, h;
};
constexpr VpSize kVpSizes[] = {{320, 180}, {256, 144}, {352, 200}, {200, 112}};
constexpr int kVpSegment = 60, kVpGain0 = 256;

// The camera: a moving pattern, a bright square crossing the frame, noise.
uint8_t vpSource(int f, int x, int y, int w, int h) {
  const int sx = (f * 5) % (w + 40) - 40, sy = h / 3 + f % 23;
  int v = ((x + 2 * f) ^ (y + f)) & 0x7F;
  if (x >= sx && x < sx + 40 && y >= sy && y < sy + 30) v += 100;
  v += int(hash32(uint32_t(f) * 0x9e3779b9u ^ uint32_t(y * w + x)) & 31u);
  return uint8_t(v > 255 ? 255 : v);
}
// The pipeline's per-pixel steps, shared by the kernels and the host mirror.
__host__ __device__ inline int vpAt(const uint8_t* p, int w, int h, int x, int y) {
  return p[clampInt(y, 0, h - 1) * w + clampInt(x, 0, w - 1)];
}
__host__ __device__ inline uint8_t vpBoxAt(const uint8_t* p, int w, int h, int x, int y) {
  int sum = 0;
  for (int dy = -1; dy <= 1; ++dy)
    for (int dx = -1; dx <= 1; ++dx) sum += vpAt(p, w, h, x + dx, y + dy);
  return uint8_t(sum / 9);
}
__host__ __device__ inline uint16_t vpBlend(uint16_t hist, uint8_t v, int first) {
  return first ? uint16_t(v << 4) : uint16_t((3u * hist + 16u * v + 2u) >> 2);
}
__host__ __device__ inline uint8_t vpExpose(uint16_t hist, int gain) {
  return uint8_t(min(((hist >> 4) * gain) >> 8, 255));
}
__host__ __device__ inline uint8_t vpSharpenAt(const uint8_t* e, int w, int h, int x, int y) {
  const int c = vpAt(e, w, h, x, y);
  const int lap =
      4 * c - vpAt(e, w, h, x - 1, y) - vpAt(e, w, h, x + 1, y) - vpAt(e, w, h, x, y - 1) - vpAt(e, w, h, x, y + 1);
  return uint8_t(clampInt(c + lap / 4, 0, 255));
}
__host__ __device__ inline int vpNextGain(int gain, int mean) { return clampInt(gain + (112 - mean) / 2, 96, 640); }

__global__ void vpDenoise(const uint8_t* in, uint8_t* out, int w, int h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = vpBoxAt(in, w, h, x, y);
}
__global__ void vpTemporalExpose(const uint8_t* den, uint16_t* hist, uint8_t* exposed, int w, int h, const int* gain,
                                 int first) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  const int k = y * w + x;
  const uint16_t t = vpBlend(hist[k], den[k], first);
  hist[k] = t;
  exposed[k] = vpExpose(t, *gain);
}
__global__ void vpSharpen(const uint8_t* e, uint8_t* out, int w, int h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = vpSharpenAt(e, w, h, x, y);
}
__global__ void vpHistogram(const uint8_t* img, int n, unsigned* histo) {
  __shared__ unsigned local[256];
  local[threadIdx.x] = 0;
  __syncthreads();
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) atomicAdd(&local[img[k]], 1u);
  __syncthreads();
  if (local[threadIdx.x]) atomicAdd(&histo[threadIdx.x], local[threadIdx.x]);
}
// One block of 256: the mean level, the next frame's gain, and the frame's
// statistics {frame, gain used, mean, next gain}.
__global__ void vpGain(const unsigned* histo, int n, int* gain, int* stats, int frame) {
  __shared__ unsigned long long total;
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  atomicAdd(&total, (unsigned long long)threadIdx.x * histo[threadIdx.x]);
  __syncthreads();
  if (threadIdx.x == 0) {
    const int mean = int(total / (unsigned long long)n), g = *gain, next = vpNextGain(g, mean);
    stats[0] = frame;
    stats[1] = g;
    stats[2] = mean;
    stats[3] = next;
    *gain = next;
  }
}

// The host's copy of the pipeline.
struct VpHost {
  std::vector<uint16_t> hist;
  int gain = kVpGain0;
  // Frame f (`first` of its size) into out; its statistics into stats.
  void frame(int f, int w, int h, bool first, std::vector<uint8_t>& out, int stats[4]) {
    const size_t n = size_t(w) * h;
    std::vector<uint8_t> in(n), den(n), exposed(n);
    if (first) hist.assign(n, 0);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) in[size_t(y) * w + x] = vpSource(f, x, y, w, h);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) den[size_t(y) * w + x] = vpBoxAt(in.data(), w, h, x, y);
    for (size_t k = 0; k < n; ++k) {
      hist[k] = vpBlend(hist[k], den[k], first);
      exposed[k] = vpExpose(hist[k], gain);
    }
    out.resize(n);
    unsigned long long total = 0;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        out[size_t(y) * w + x] = vpSharpenAt(exposed.data(), w, h, x, y);
        total += out[size_t(y) * w + x];
      }
    const int mean = int(total / n), next = vpNextGain(gain, mean);
    stats[0] = f;
    stats[1] = gain;
    stats[2] = mean;
    stats[3] = next;
    gain = next;
  }
};

// Frame f is uploaded on `up` from pinned slot f % 2, processed on `comp`,
// downloaded on `down` into pinned slot f % 2, and checked one frame late.
void videoPipeline() {
  cudaStream_t up = nonBlockingStream(), comp = nonBlockingStream(), down = nonBlockingStream();
  cudaEvent_t uploaded[2], consumed[2], computed[2], downloaded[2];
  for (int k = 0; k < 2; ++k)
    for (cudaEvent_t* e : {&uploaded[k], &consumed[k], &computed[k], &downloaded[k]}) *e = untimedEvent();
  int* gain = devAlloc<int>(1);
  unsigned* histo = devAlloc<unsigned>(256);
  int *stats[2] = {devAlloc<int>(4), devAlloc<int>(4)}, *statsPin = pinnedAlloc<int>(8);
  const int gain0 = kVpGain0;
  CK(cudaMemcpy(gain, &gain0, 4, cudaMemcpyHostToDevice));
  uint8_t *hostIn[2] = {}, *hostOut[2] = {}, *devIn[2] = {}, *devOut[2] = {}, *den = nullptr, *exposed = nullptr;
  uint16_t* hist = nullptr;
  VpHost mirror;
  std::vector<uint8_t> want;
  Digest frames;
  int w = 0, h = 0;
  auto release = [&] {
    for (int k = 0; k < 2; ++k) {
      CK(cudaFreeHost(hostIn[k]));
      CK(cudaFreeHost(hostOut[k]));
      CK(cudaFree(devIn[k]));
      CK(cudaFree(devOut[k]));
    }
    CK(cudaFree(den));
    CK(cudaFree(exposed));
    CK(cudaFree(hist));
  };
  // Frame g (downloaded by now, or waited for here) against the host mirror.
  auto check = [&](int g) {
    const int slot = (g % kVpSegment) % 2;
    CK(cudaEventSynchronize(downloaded[slot]));
    int ref[4];
    mirror.frame(g, w, h, g % kVpSegment == 0, want, ref);
    const uint8_t* got = hostOut[slot];
    for (size_t k = 0; k < want.size(); ++k)
      if (got[k] != want[k])
        mismatch("video_pipeline frame %d pixel %zu: %d, the host pipeline says %d", g, k, got[k], want[k]);
    for (int k = 0; k < 4; ++k)
      if (statsPin[4 * slot + k] != ref[k])
        mismatch("video_pipeline frame %d statistic %d: %d, the host pipeline says %d", g, k, statsPin[4 * slot + k],
                 ref[k]);
    frames.add(want.data(), want.size());
    frames.add(ref, sizeof ref);
    if (g % 25 == 24)
      std::printf("frame %d %dx%d gain %d mean %d frames %016llx\n", g, w, h, ref[1], ref[2], ull(frames.h));
  };
  for (int f = 0; f < g_iters; ++f) {
    if (f > 0) check(f - 1);
    const int fi = f % kVpSegment, slot = fi % 2;
    if (fi == 0) {  // a new resolution: every buffer again
      if (f > 0) {
        for (cudaStream_t st : {up, comp, down}) CK(cudaStreamSynchronize(st));
        release();
      }
      w = kVpSizes[(f / kVpSegment) % 4].w;
      h = kVpSizes[(f / kVpSegment) % 4].h;
      const size_t n = size_t(w) * h;
      for (int k = 0; k < 2; ++k) {
        CK(cudaHostAlloc(&hostIn[k], n, cudaHostAllocDefault));
        CK(cudaHostAlloc(&hostOut[k], n, cudaHostAllocDefault));
        devIn[k] = devAlloc<uint8_t>(n);
        devOut[k] = devAlloc<uint8_t>(n);
      }
      den = devAlloc<uint8_t>(n);
      exposed = devAlloc<uint8_t>(n);
      hist = devAlloc<uint16_t>(n);
      std::printf("resize at frame %d to %dx%d\n", f, w, h);
    }
    const int n = w * h;
    // The slot's last upload must be done before the host refills it.
    if (fi >= 2) CK(cudaEventSynchronize(uploaded[slot]));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) hostIn[slot][y * w + x] = vpSource(f, x, y, w, h);
    if (fi >= 2) CK(cudaStreamWaitEvent(up, consumed[slot], 0));  // devIn[slot] read by frame f - 2
    CK(cudaMemcpyAsync(devIn[slot], hostIn[slot], size_t(n), cudaMemcpyHostToDevice, up));
    CK(cudaEventRecord(uploaded[slot], up));

    CK(cudaStreamWaitEvent(comp, uploaded[slot], 0));
    if (fi >= 2) CK(cudaStreamWaitEvent(comp, downloaded[slot], 0));  // devOut[slot] and stats downloaded
    const dim3 block(32, 8), grid(blocksFor(w, 32), blocksFor(h, 8));
    vpDenoise<<<grid, block, 0, comp>>>(devIn[slot], den, w, h);
    CKL();
    CK(cudaEventRecord(consumed[slot], comp));
    vpTemporalExpose<<<grid, block, 0, comp>>>(den, hist, exposed, w, h, gain, fi == 0 ? 1 : 0);
    vpSharpen<<<grid, block, 0, comp>>>(exposed, devOut[slot], w, h);
    CK(cudaMemsetAsync(histo, 0, 256 * 4, comp));
    vpHistogram<<<24, 256, 0, comp>>>(devOut[slot], n, histo);
    vpGain<<<1, 256, 0, comp>>>(histo, n, gain, stats[slot], f);
    CKL();
    CK(cudaEventRecord(computed[slot], comp));

    CK(cudaStreamWaitEvent(down, computed[slot], 0));
    CK(cudaMemcpyAsync(hostOut[slot], devOut[slot], size_t(n), cudaMemcpyDeviceToHost, down));
    CK(cudaMemcpyAsync(statsPin + 4 * slot, stats[slot], 16, cudaMemcpyDeviceToHost, down));
    CK(cudaEventRecord(downloaded[slot], down));
  }
  check(g_iters - 1);
  for (cudaStream_t st : {up, comp, down}) CK(cudaStreamSynchronize(st));
  int lastGain = 0;
  CK(cudaMemcpy(&lastGain, gain, 4, cudaMemcpyDeviceToHost));
  if (lastGain != mirror.gain)
    mismatch("video_pipeline gain at the end: %d, the host pipeline says %d", lastGain, mirror.gain);
  std::printf("end frames %d gain %d frames %016llx\n", g_iters, lastGain, ull(frames.h));
  release();
  for (void* p : {(void*)gain, (void*)histo, (void*)stats[0], (void*)stats[1]}) CK(cudaFree(p));
  CK(cudaFreeHost(statsPin));
  for (int k = 0; k < 2; ++k)
    for (cudaEvent_t e : {uploaded[k], consumed[k], computed[k], downloaded[k]}) CK(cudaEventDestroy(e));
  for (cudaStream_t st : {up, comp, down}) CK(cudaStreamDestroy(st));
}

// ================================================================ mlp_adam

constexpr int kMlIn = 64, kMlH = 256, kMlC = 16, kMlB = 256, kMlEvalB = 512, kMlEpochBatches = 32;
// One parameter blob (and the same layout for gradients and both moments):
// W1 [H][In], b1, W2 [H][H], b2, W3 [C][H], b3, each matrix row-major.
constexpr size_t kMlW1 = 0, kMlB1 = kMlW1 + size_t(kMlH) * kMlIn, kMlW2 = kMlB1 + kMlH,
                 kMlB2 = kMlW2 + size_t(kMlH) * kMlH, kMlW3 = kMlB2 + kMlH, kMlB3 = kMlW3 + size_t(kMlC) * kMlH,
                 kMlParams = kMlB3 + kMlC;
constexpr float kMlBeta1 = 0.9f, kMlBeta2 = 0.999f, kMlEps = 1e-8f, kMlDecay = 0.01f;

__host__ __device__ inline float mlFeature(uint32_t seed, int sample, int k) {
  return unitFloat(hash32(seed * 0x9e3779b9u ^ hash32(uint32_t(sample * kMlIn + k) + 0x3c6ef372u))) * 2.0f - 1.0f;
}
// A batch: features from the seed, labels from a fixed linear teacher (scores
// summed in a fixed order), one thread per sample; column-major (In x batch).
__global__ void mlMakeBatch(float* x, int* y, const float* teacher, int batch, uint32_t seed) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= batch) return;
  float* xs = x + size_t(s) * kMlIn;
  for (int k = 0; k < kMlIn; ++k) xs[k] = mlFeature(seed, s, k);
  int best = 0;
  float bestScore = -1e30f;
  for (int c = 0; c < kMlC; ++c) {
    float sc = 0.0f;
    for (int k = 0; k < kMlIn; ++k) sc += teacher[c * kMlIn + k] * xs[k];
    if (sc > bestScore) {
      bestScore = sc;
      best = c;
    }
  }
  y[s] = best;
}
// z (out x batch, column-major) += bias, then ReLU.
__global__ void mlBiasRelu(float* z, const float* b, int out, int batch) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= out * batch) return;
  const float v = z[k] + b[k % out];
  z[k] = v > 0.0f ? v : 0.0f;
}
__global__ void mlReluBack(float* d, const float* a, int count) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < count && !(a[k] > 0.0f)) d[k] = 0.0f;
}
// db[o] = sum over the batch of dz[o], in sample order.
__global__ void mlBiasGrad(const float* dz, float* db, int out, int batch) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= out) return;
  float acc = 0.0f;
  for (int s = 0; s < batch; ++s) acc += dz[size_t(s) * out + o];
  db[o] = acc;
}
// Softmax cross-entropy per sample (logits + bias); the gradient when dz is
// given, correct predictions counted when `correct` is.
__global__ void mlSoftmaxXent(const float* z, const float* b, const int* y, int batch, float* lossPer, float* dz,
                              int* correct) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= batch) return;
  float l[kMlC], m = -1e30f;
  int arg = 0;
  for (int c = 0; c < kMlC; ++c) {
    l[c] = z[s * kMlC + c] + b[c];
    if (l[c] > m) {
      m = l[c];
      arg = c;
    }
  }
  float sum = 0.0f;
  for (int c = 0; c < kMlC; ++c) sum += expf(l[c] - m);
  lossPer[s] = logf(sum) - (l[y[s]] - m);
  if (dz)
    for (int c = 0; c < kMlC; ++c) dz[s * kMlC + c] = (expf(l[c] - m) / sum - (c == y[s] ? 1.0f : 0.0f)) / float(batch);
  if (correct && arg == y[s]) atomicAdd(correct, 1);
}
// acc[0] += scale * sum(v), one block of 256 in a fixed order.
__global__ void mlSum(const float* v, int n, float* acc, float scale) {
  __shared__ float part[256];
  float a = 0.0f;
  for (int k = threadIdx.x; k < n; k += 256) a += v[k];
  part[threadIdx.x] = a;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) acc[0] += scale * part[0];
}
// AdamW over the whole blob; the learning rate and both bias corrections by value.
__global__ void mlAdamW(float* p, const float* g, float* m, float* v, int n, float lr, float bc1, float bc2) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const float gk = g[k];
  const float mk = kMlBeta1 * m[k] + (1.0f - kMlBeta1) * gk, vk = kMlBeta2 * v[k] + (1.0f - kMlBeta2) * gk * gk;
  m[k] = mk;
  v[k] = vk;
  p[k] -= lr * ((mk / bc1) / (sqrtf(vk / bc2) + kMlEps) + kMlDecay * p[k]);
}

float mlRate(int step) {
  const double peak = 2e-3, floor = 2e-4;
  if (step < 20) return float(peak * (step + 1) / 20.0);
  const double t = double(step - 20) / std::max(1, g_iters - 20);
  return float(floor + 0.5 * (peak - floor) * (1.0 + std::cos(kPiD * t)));
}

// The eval batch's mean loss and accuracy in double from the device's
// parameters, features and labels.
void mlHostEval(const std::vector<float>& p, const std::vector<float>& x, const std::vector<int>& y, double& loss,
                int& correct) {
  loss = 0.0;
  correct = 0;
  std::vector<double> a1(kMlH), a2(kMlH), z(kMlC);
  for (int s = 0; s < kMlEvalB; ++s) {
    const float* xs = &x[size_t(s) * kMlIn];
    for (int o = 0; o < kMlH; ++o) {
      double a = p[kMlB1 + o];
      for (int k = 0; k < kMlIn; ++k) a += double(p[kMlW1 + size_t(o) * kMlIn + k]) * xs[k];
      a1[o] = a > 0 ? a : 0;
    }
    for (int o = 0; o < kMlH; ++o) {
      double a = p[kMlB2 + o];
      for (int k = 0; k < kMlH; ++k) a += double(p[kMlW2 + size_t(o) * kMlH + k]) * a1[k];
      a2[o] = a > 0 ? a : 0;
    }
    for (int c = 0; c < kMlC; ++c) {
      double a = p[kMlB3 + c];
      for (int k = 0; k < kMlH; ++k) a += double(p[kMlW3 + size_t(c) * kMlH + k]) * a2[k];
      z[c] = a;
    }
    const int arg = int(std::max_element(z.begin(), z.end()) - z.begin());
    double sum = 0.0;
    for (int c = 0; c < kMlC; ++c) sum += std::exp(z[c] - z[arg]);
    loss += std::log(sum) - (z[y[s]] - z[arg]);
    correct += arg == y[s] ? 1 : 0;
  }
  loss /= kMlEvalB;
}

// Training: forward (three GEMMs), softmax cross-entropy, backward (five
// GEMMs and the bias sums), AdamW; the loss summed on the device and read
// every 10 steps; an eval pass every 50.
void mlpAdam() {
  cudaStream_t s = blockingStream();
  cublasHandle_t h;
  CKB(cublasCreate(&h));
  CKB(cublasSetStream(h, s));
  float *p = devAlloc<float>(kMlParams), *g = devAlloc<float>(kMlParams), *m = devAlloc<float>(kMlParams),
        *v = devAlloc<float>(kMlParams);
  {
    std::vector<float> hp(kMlParams, 0.0f);
    auto init = [&](size_t at, int out, int in) {
      const float bound = std::sqrt(6.0f / float(in));
      for (size_t k = 0; k < size_t(out) * in; ++k)
        hp[at + k] = (unitFloat(hash32(uint32_t(at + k) * 0x2545f491u + 5u)) * 2.0f - 1.0f) * bound;
    };
    init(kMlW1, kMlH, kMlIn);
    init(kMlW2, kMlH, kMlH);
    init(kMlW3, kMlC, kMlH);
    CK(cudaMemcpy(p, hp.data(), kMlParams * 4, cudaMemcpyHostToDevice));
  }
  float* teacher = devAlloc<float>(size_t(kMlC) * kMlIn);
  {
    std::vector<float> t(size_t(kMlC) * kMlIn);
    for (size_t k = 0; k < t.size(); ++k) t[k] = unitFloat(hash32(uint32_t(k) + 0xfeedu)) * 2.0f - 1.0f;
    CK(cudaMemcpy(teacher, t.data(), t.size() * 4, cudaMemcpyHostToDevice));
  }
  CK(cudaMemset(m, 0, kMlParams * 4));
  CK(cudaMemset(v, 0, kMlParams * 4));
  constexpr int B = kMlEvalB;  // activations sized for the larger (eval) batch
  float *x = devAlloc<float>(size_t(B) * kMlIn), *a1 = devAlloc<float>(size_t(B) * kMlH),
        *a2 = devAlloc<float>(size_t(B) * kMlH), *z3 = devAlloc<float>(size_t(B) * kMlC),
        *d3 = devAlloc<float>(size_t(B) * kMlC), *d2 = devAlloc<float>(size_t(B) * kMlH),
        *d1 = devAlloc<float>(size_t(B) * kMlH), *lossPer = devAlloc<float>(B), *lossAcc = devAlloc<float>(2);
  int *y = devAlloc<int>(B), *correct = devAlloc<int>(1);
  CK(cudaMemset(lossAcc, 0, 8));
  float* lossPin = pinnedAlloc<float>(1);
  cudaEvent_t lossReady = untimedEvent();
  CK(cudaDeviceSynchronize());
  const float one = 1.0f, zero = 0.0f;

  // Z = W A (out x batch), + bias, ReLU unless last.
  auto forward = [&](int batch) {
    CKB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, kMlH, batch, kMlIn, &one, p + kMlW1, kMlIn, x, kMlIn, &zero, a1,
                    kMlH));
    mlBiasRelu<<<blocksFor(kMlH * batch, 256), 256, 0, s>>>(a1, p + kMlB1, kMlH, batch);
    CKB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, kMlH, batch, kMlH, &one, p + kMlW2, kMlH, a1, kMlH, &zero, a2, kMlH));
    mlBiasRelu<<<blocksFor(kMlH * batch, 256), 256, 0, s>>>(a2, p + kMlB2, kMlH, batch);
    CKB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, kMlC, batch, kMlH, &one, p + kMlW3, kMlH, a2, kMlH, &zero, z3, kMlC));
    CKL();
  };
  // dW (in x out, column-major = W's row-major layout) = A dZ^T; dA = W^T dZ.
  auto backward = [&] {
    constexpr int b = kMlB;
    CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, kMlH, kMlC, b, &one, a2, kMlH, d3, kMlC, &zero, g + kMlW3, kMlH));
    mlBiasGrad<<<1, kMlC, 0, s>>>(d3, g + kMlB3, kMlC, b);
    CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, kMlH, b, kMlC, &one, p + kMlW3, kMlH, d3, kMlC, &zero, d2, kMlH));
    mlReluBack<<<blocksFor(kMlH * b, 256), 256, 0, s>>>(d2, a2, kMlH * b);
    CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, kMlH, kMlH, b, &one, a1, kMlH, d2, kMlH, &zero, g + kMlW2, kMlH));
    mlBiasGrad<<<blocksFor(kMlH, 128), 128, 0, s>>>(d2, g + kMlB2, kMlH, b);
    CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, kMlH, b, kMlH, &one, p + kMlW2, kMlH, d2, kMlH, &zero, d1, kMlH));
    mlReluBack<<<blocksFor(kMlH * b, 256), 256, 0, s>>>(d1, a1, kMlH * b);
    CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, kMlIn, kMlH, b, &one, x, kMlIn, d1, kMlH, &zero, g + kMlW1, kMlIn));
    mlBiasGrad<<<blocksFor(kMlH, 128), 128, 0, s>>>(d1, g + kMlB1, kMlH, b);
    CKL();
  };

  std::vector<int> order(kMlEpochBatches);
  Digest losses;
  for (int step = 0; step < g_iters; ++step) {
    if (step % kMlEpochBatches == 0) {  // a new epoch: the batches in a new order
      for (int k = 0; k < kMlEpochBatches; ++k) order[k] = k;
      for (int k = kMlEpochBatches - 1; k > 0; --k)
        std::swap(order[k], order[hash32(uint32_t(step * 131 + k)) % uint32_t(k + 1)]);
    }
    mlMakeBatch<<<kMlB / 128, 128, 0, s>>>(x, y, teacher, kMlB, 1000u + uint32_t(order[step % kMlEpochBatches]));
    CKL();
    forward(kMlB);
    mlSoftmaxXent<<<kMlB / 128, 128, 0, s>>>(z3, p + kMlB3, y, kMlB, lossPer, d3, nullptr);
    mlSum<<<1, 256, 0, s>>>(lossPer, kMlB, lossAcc, 1.0f / kMlB);
    CKL();
    backward();
    const float lr = mlRate(step);
    const double t = step + 1;
    const float bc1 = float(1.0 - std::pow(double(kMlBeta1), t)), bc2 = float(1.0 - std::pow(double(kMlBeta2), t));
    const bool checkAdam = step % 100 == 50;
    std::vector<float> p0, g0, m0, v0;
    if (checkAdam) {
      CK(cudaStreamSynchronize(s));
      p0 = fetch<float>(p, kMlParams);
      g0 = fetch<float>(g, kMlParams);
      m0 = fetch<float>(m, kMlParams);
      v0 = fetch<float>(v, kMlParams);
    }
    mlAdamW<<<blocksFor(int(kMlParams), 256), 256, 0, s>>>(p, g, m, v, int(kMlParams), lr, bc1, bc2);
    CKL();
    if (checkAdam) {  // the update against the host, in double
      CK(cudaStreamSynchronize(s));
      const std::vector<float> p1 = fetch<float>(p, kMlParams), m1 = fetch<float>(m, kMlParams),
                               v1 = fetch<float>(v, kMlParams);
      for (size_t k = 0; k < kMlParams; ++k) {
        const double mk = kMlBeta1 * double(m0[k]) + (1.0 - kMlBeta1) * g0[k];
        const double vk = kMlBeta2 * double(v0[k]) + (1.0 - kMlBeta2) * double(g0[k]) * g0[k];
        const double pk = p0[k] - double(lr) * ((mk / bc1) / (std::sqrt(vk / bc2) + kMlEps) + kMlDecay * p0[k]);
        // Float rounding is relative to the terms summed, not to a sum
        // they cancel in: the tolerances scale with the terms.
        const double mTerms = std::fabs(kMlBeta1 * double(m0[k])) + std::fabs((1.0 - kMlBeta1) * g0[k]);
        const double pTerms = std::fabs(double(p0[k])) + std::fabs(double(p0[k]) - pk);
        expectClose("mlp_adam first moment", step, k, m1[k], mk, 0, 1e-5 * mTerms + 1e-30);
        expectClose("mlp_adam second moment", step, k, v1[k], vk, 1e-5, 1e-15);
        expectClose("mlp_adam parameter", step, k, p1[k], pk, 0, 1e-6 * pTerms + 1e-7);
      }
      std::printf("step %d adam checked lr %08x bc1 %08x bc2 %08x\n", step, bits(lr), bits(bc1), bits(bc2));
    }
    if (step % 10 == 9) {  // the mean loss of the last 10 steps
      CK(cudaMemcpyAsync(lossPin, lossAcc, 4, cudaMemcpyDeviceToHost, s));
      CK(cudaMemsetAsync(lossAcc, 0, 4, s));
      CK(cudaEventRecord(lossReady, s));
      CK(cudaEventSynchronize(lossReady));
      losses.add(bits(*lossPin));
      std::printf("step %d loss %08x lr %08x\n", step, bits(*lossPin / 10.0f), bits(lr));
    }
    if (step % 50 == 49) {  // eval on a fixed batch of another size
      mlMakeBatch<<<kMlEvalB / 128, 128, 0, s>>>(x, y, teacher, kMlEvalB, 7u);
      forward(kMlEvalB);
      CK(cudaMemsetAsync(correct, 0, 4, s));
      CK(cudaMemsetAsync(lossAcc + 1, 0, 4, s));
      mlSoftmaxXent<<<kMlEvalB / 128, 128, 0, s>>>(z3, p + kMlB3, y, kMlEvalB, lossPer, nullptr, correct);
      mlSum<<<1, 256, 0, s>>>(lossPer, kMlEvalB, lossAcc + 1, 1.0f / kMlEvalB);
      CKL();
      float evalLoss = 0.0f;
      int evalCorrect = 0;
      CK(cudaMemcpy(&evalLoss, lossAcc + 1, 4, cudaMemcpyDeviceToHost));  // legacy stream: waits for s
      CK(cudaMemcpy(&evalCorrect, correct, 4, cudaMemcpyDeviceToHost));
      double hostLoss = 0.0;
      int hostCorrect = 0;
      mlHostEval(fetch<float>(p, kMlParams), fetch<float>(x, size_t(kMlEvalB) * kMlIn), fetch<int>(y, kMlEvalB),
                 hostLoss, hostCorrect);
      expectClose("mlp_adam eval loss", step, 0, evalLoss, hostLoss, 1e-3, 1e-4);
      // Near-ties may go either way between float and double.
      if (std::abs(evalCorrect - hostCorrect) > 3)
        mismatch("mlp_adam eval accuracy at %d: %d correct, the host reference says %d", step, evalCorrect,
                 hostCorrect);
      std::printf("step %d eval loss %08x correct %d params %016llx\n", step, bits(evalLoss), evalCorrect,
                  ull(deviceDigest(p, kMlParams * 4)));
    }
  }
  CK(cudaStreamSynchronize(s));
  std::printf("end losses %016llx params %016llx moments %016llx\n", ull(losses.h), ull(deviceDigest(p, kMlParams * 4)),
              ull(deviceDigest(m, kMlParams * 4) ^ deviceDigest(v, kMlParams * 4)));
  for (void* q : {(void*)p, (void*)g, (void*)m, (void*)v, (void*)teacher, (void*)x, (void*)a1, (void*)a2, (void*)z3,
                  (void*)d3, (void*)d2, (void*)d1, (void*)lossPer, (void*)lossAcc, (void*)y, (void*)correct})
    CK(cudaFree(q));
  CK(cudaFreeHost(lossPin));
  CK(cudaEventDestroy(lossReady));
  CKB(cublasDestroy(h));
  CK(cudaStreamDestroy(s));
}

// ================================================================ graph_bfs

constexpr int kGbSide = 48, kGbV = kGbSide * kGbSide, kGbHighways = 24, kGbSortMin = 96, kGbKeyBits = 12,
              kGbMaxLevels = 1024;
static_assert(kGbV <= (1 << kGbKeyBits));

// A grid whose links are each present with probability 0.8, plus shortcuts;
// undirected (both directions stored), neighbours ascending.
struct GbGraph {
  std::vector<int> rowPtr, col;
};
GbGraph gbGraph(uint32_t seed) {
  std::vector<std::vector<int>> adj(kGbV);
  auto link = [&](int a, int b) {
    adj[a].push_back(b);
    adj[b].push_back(a);
  };
  for (int y = 0; y < kGbSide; ++y)
    for (int x = 0; x < kGbSide; ++x) {
      const int v = y * kGbSide + x;
      if (x + 1 < kGbSide && hash32(seed * 0x9e3779b9u ^ uint32_t(2 * v)) % 100u < 80u) link(v, v + 1);
      if (y + 1 < kGbSide && hash32(seed * 0x9e3779b9u ^ uint32_t(2 * v + 1)) % 100u < 80u) link(v, v + kGbSide);
    }
  for (int k = 0; k < kGbHighways; ++k) {
    const uint32_t a = hash32(seed * 0x51ed27u + uint32_t(k) * 0x2545f491u) % kGbV,
                   b = hash32(a ^ (seed * 31u + k)) % kGbV;
    if (a != b) link(int(a), int(b));
  }
  GbGraph g;
  g.rowPtr.push_back(0);
  for (auto& a : adj) {
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    g.col.insert(g.col.end(), a.begin(), a.end());
    g.rowPtr.push_back(int(g.col.size()));
  }
  return g;
}

__global__ void gbInit(int* dist, int* parent, unsigned long long* sigma, int n) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= n) return;
  dist[v] = -1;
  parent[v] = INT_MAX;
  sigma[v] = 0;
}
__global__ void gbSource(int* dist, unsigned long long* sigma, int* frontier, int src) {
  dist[src] = 0;
  sigma[src] = 1;
  frontier[0] = src;
}
// One level: every frontier vertex claims its undiscovered neighbours
// (atomicCAS) and queues them (atomicAdd: the queue's order varies, its set
// does not); a neighbour on the next level takes the smallest parent and adds
// the vertex's shortest-path count.
__global__ void gbExpand(const int* rowPtr, const int* col, const int* frontier, int count, int level, int* dist,
                         int* parent, unsigned long long* sigma, int* next, int* nextCount, unsigned long long* edges) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const int u = frontier[i];
  const unsigned long long su = sigma[u];
  for (int e = rowPtr[u]; e < rowPtr[u + 1]; ++e) {
    const int v = col[e];
    const int old = atomicCAS(&dist[v], -1, level + 1);
    if (old == -1) next[atomicAdd(nextCount, 1)] = v;
    if (old == -1 || old == level + 1) {
      atomicMin(&parent[v], u);
      atomicAdd(&sigma[v], su);
    }
  }
  atomicAdd(edges, (unsigned long long)(rowPtr[u + 1] - rowPtr[u]));
}
__global__ void gbLevels(const int* dist, int n, int* hist) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v < n) atomicAdd(&hist[dist[v] < 0 ? kGbMaxLevels : min(dist[v], kGbMaxLevels - 1)], 1);
}

// Breadth-first searches from one source after another, one level per step:
// the frontier's size read back every level sets the next launch's grid and
// whether the frontier is sorted first (locality); each search checked
// against a host BFS. Half-way the graph is replaced.
void graphBfs() {
  cudaStream_t s = nonBlockingStream();
  GbGraph graph;
  int *rowPtr = nullptr, *col = nullptr;
  auto load = [&](uint32_t seed) {
    graph = gbGraph(seed);
    if (rowPtr) {
      CK(cudaFree(rowPtr));
      CK(cudaFree(col));
    }
    rowPtr = devAlloc<int>(kGbV + 1);
    col = devAlloc<int>(graph.col.size());
    CK(cudaMemcpy(rowPtr, graph.rowPtr.data(), (kGbV + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(col, graph.col.data(), graph.col.size() * 4, cudaMemcpyHostToDevice));
    std::printf("graph %u links %zu\n", seed, graph.col.size());
  };
  load(1);
  int *dist = devAlloc<int>(kGbV), *parent = devAlloc<int>(kGbV), *nextCount = devAlloc<int>(1),
      *hist = devAlloc<int>(kGbMaxLevels + 1);
  int* front[3] = {devAlloc<int>(kGbV), devAlloc<int>(kGbV), devAlloc<int>(kGbV)};
  unsigned long long *sigma = devAlloc<unsigned long long>(kGbV), *edges = devAlloc<unsigned long long>(1);
  int* countPin = pinnedAlloc<int>(1);
  unsigned long long* edgesPin = pinnedAlloc<unsigned long long>(1);
  void* temp = nullptr;
  size_t tempBytes = 0;
  CK(cudaDeviceSynchronize());

  int query = -1, level = 0, count = 0, src = 0, sorts = 0;
  bool active = false, replaced = false;
  int *cur = front[0], *next = front[1], *spare = front[2];
  Digest all;
  // The search so far (`level` levels expanded) against the host's BFS.
  auto finish = [&] {
    CK(cudaMemsetAsync(hist, 0, (kGbMaxLevels + 1) * 4, s));
    gbLevels<<<blocksFor(kGbV, 128), 128, 0, s>>>(dist, kGbV, hist);
    CKL();
    CK(cudaMemcpyAsync(edgesPin, edges, 8, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    std::vector<int> hd(kGbV, -1), hp(kGbV, INT_MAX), queue{src};
    std::vector<unsigned long long> hs(kGbV, 0);
    hd[src] = 0;
    hs[src] = 1;
    for (size_t q = 0; q < queue.size(); ++q) {
      const int u = queue[q];
      for (int e = graph.rowPtr[u]; e < graph.rowPtr[u + 1]; ++e) {
        const int v = graph.col[e];
        if (hd[v] < 0) {
          hd[v] = hd[u] + 1;
          queue.push_back(v);
        }
        if (hd[v] == hd[u] + 1) {
          hp[v] = std::min(hp[v], u);
          hs[v] += hs[u];
        }
      }
    }
    std::vector<int> wantHist(kGbMaxLevels + 1, 0);
    unsigned long long wantEdges = 0;
    int reached = 0;
    for (int v = 0; v < kGbV; ++v) {
      if (hd[v] > level) {  // not discovered yet
        hd[v] = -1;
        hp[v] = INT_MAX;
        hs[v] = 0;
      }
      if (hd[v] >= 0 && hd[v] < level) wantEdges += unsigned(graph.rowPtr[v + 1] - graph.rowPtr[v]);
      reached += hd[v] >= 0 ? 1 : 0;
      ++wantHist[hd[v] < 0 ? kGbMaxLevels : std::min(hd[v], kGbMaxLevels - 1)];
    }
    expectSame("graph_bfs distance", query, dist, hd);
    expectSame("graph_bfs parent", query, parent, hp);
    expectSame("graph_bfs path count", query, sigma, hs);
    expectSame("graph_bfs level histogram", query, hist, wantHist);
    if (*edgesPin != wantEdges)
      mismatch("graph_bfs links scanned in query %d: %llu, the host BFS says %llu", query, *edgesPin, wantEdges);
    Digest d;
    d.add(hd.data(), hd.size() * 4);
    d.add(hp.data(), hp.size() * 4);
    d.add(hs.data(), hs.size() * 8);
    all.add(d.h);
    std::printf("query %d source %d levels %d%s reached %d links %llu sorts %d search %016llx\n", query, src, level,
                active && count > 0 ? " (cut off)" : "", reached, wantEdges, sorts, ull(d.h));
  };
  for (int it = 0; it < g_iters; ++it) {
    if (!active) {
      if (!replaced && it >= g_iters / 2) {
        load(2);
        replaced = true;
      }
      ++query;
      src = int(hash32(uint32_t(query) * 2654435761u + 99u) % kGbV);
      gbInit<<<blocksFor(kGbV, 128), 128, 0, s>>>(dist, parent, sigma, kGbV);
      gbSource<<<1, 1, 0, s>>>(dist, sigma, cur, src);
      CKL();
      CK(cudaMemsetAsync(edges, 0, 8, s));
      count = 1;
      level = 0;
      sorts = 0;
      active = true;
    }
    CK(cudaMemsetAsync(nextCount, 0, 4, s));
    gbExpand<<<blocksFor(count, 128), 128, 0, s>>>(rowPtr, col, cur, count, level, dist, parent, sigma, next, nextCount,
                                                   edges);
    CKL();
    CK(cudaMemcpyAsync(countPin, nextCount, 4, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    const int got = *countPin;
    ++level;
    if (got >= kGbSortMin) {  // a large frontier is sorted (num_items from the host)
      size_t need = 0;
      CK(cub::DeviceRadixSort::SortKeys(nullptr, need, next, spare, got, 0, kGbKeyBits, s));
      if (need > tempBytes) {
        if (temp) CK(cudaFree(temp));
        temp = devAlloc<char>(need);
        tempBytes = need;
      }
      size_t bytes = tempBytes;
      CK(cub::DeviceRadixSort::SortKeys(temp, bytes, next, spare, got, 0, kGbKeyBits, s));
      std::swap(next, spare);
      ++sorts;
    }
    std::swap(cur, next);
    count = got;
    if (count == 0) {
      finish();
      active = false;
    }
  }
  if (active) finish();
  std::printf("end queries %d searches %016llx\n", query + 1, ull(all.h));
  for (void* p : {(void*)rowPtr, (void*)col, (void*)dist, (void*)parent, (void*)nextCount, (void*)hist, (void*)front[0],
                  (void*)front[1], (void*)front[2], (void*)sigma, (void*)edges, temp})
    CK(cudaFree(p));
  CK(cudaFreeHost(countPin));
  CK(cudaFreeHost(edgesPin));
  CK(cudaStreamDestroy(s));
}

constexpr Scenario kScenarios[] = {
    {"llm_decode", llmDecode},         {"server_pool", serverPool}, {"md_verlet", mdVerlet},
    {"video_pipeline", videoPipeline}, {"mlp_adam", mlpAdam},       {"graph_bfs", graphBfs},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
