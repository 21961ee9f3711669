// storm: a "training-shaped" CUDA C++ loop of many small kernel launches.
//
// Per iteration (8*L+3 = 203 kernels for L = 25 layers, plus one memset):
//   schedule (takes the step counter by value: a scalar that changes every iteration)
//   gen_data (inputs/targets from a hash of seed and step)
//   forward:  L x (linear_fwd, act_fwd)
//   loss:     cudaMemsetAsync(metrics), loss_elem, loss_reduce (single block, fixed order)
//   backward: L x (act_bwd, grad_w, grad_b, grad_in [not for the first layer])
//   update:   L x (sgd_w [momentum + weight decay], sgd_b)
// then, in the default "sync" variant, a cudaMemcpy of the loss to the host.
//
// Everything is deterministic (no atomics, fixed-order reductions, fixed seeds), so
// the loss and the parameter checksum are bit-exact across runs and modes.
//
//   storm [--iters N] [--warmup W] [--nosync] [--mode eager|graph]
//         [--stream null|new] [--json FILE]
//
// --mode graph is the hand-written reference: one iteration (without the D2H read)
// captured once on a non-default stream, instantiated, and replayed with
// cudaGraphLaunch; the step scalar of the schedule kernel is patched each iteration
// with cudaGraphExecKernelNodeSetParams.
//
// Exit codes: 0 ok, 1 CUDA error, 2 usage error, 77 no CUDA device.

#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(call)                                                                  \
  do {                                                                            \
    cudaError_t err_ = (call);                                                    \
    if (err_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "storm: CUDA error at %s:%d: %s -> %s (%s)\n",         \
                   __FILE__, __LINE__, #call, cudaGetErrorName(err_),             \
                   cudaGetErrorString(err_));                                     \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

// Checks a <<<>>> launch (configuration errors are reported by cudaGetLastError).
#define CKL() CK(cudaGetLastError())

namespace {

constexpr int kLayers = 25;
constexpr int kBatch = 32;
constexpr int kIn = 64;
constexpr int kOut = 16;
constexpr unsigned kSeed = 12345u;
constexpr float kBaseLr = 0.01f;
constexpr int kWarmSteps = 50;
constexpr float kWeightDecay = 1e-4f;
constexpr unsigned kSchedGrid = 1, kSchedBlock = 32;

struct Dims {  // passed by value
  int batch;
  int in;
  int out;
  float scale;
};

struct StepState {  // written by schedule_kernel, read by gen_data and the optimizers
  int step;
  float lr;
  float mom;
  float pad;
};

__host__ __device__ inline uint32_t hash3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ (c + 0x165667B1u) * 0xC2B2AE3Du;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  h *= 0x297A2D39u;
  h ^= h >> 15;
  return h;
}

__device__ inline float unit(uint32_t h) {  // [-1, 1)
  return (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void init_params(float* w, int n, float scale, uint32_t layer, uint32_t seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] = scale * unit(hash3(seed, layer, (uint32_t)i));
}

__global__ void schedule_kernel(StepState* st, int step, float base_lr, int warm) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float w = step < warm ? (float)(step + 1) / (float)warm : 1.0f;
    float decay = 1.0f / (1.0f + 1e-3f * (float)step);
    st->step = step;
    st->lr = base_lr * w * decay;
    st->mom = 0.9f;
    st->pad = 0.0f;
  }
}

__device__ inline float xval(uint32_t seed, int step, int b, int k) {
  return unit(hash3(seed ^ 0xA5A5A5A5u, (uint32_t)step, (uint32_t)(b * 1024 + k)));
}

__global__ void gen_data(const StepState* st, float* x, float* t, int batch, int din, int dout,
                         uint32_t seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int step = st->step;
  if (i < batch * din) x[i] = xval(seed, step, i / din, i % din);
  if (i < batch * dout) {
    int b = i / dout, j = i % dout;
    t[i] = 0.5f * sinf(3.0f * xval(seed, step, b, j % din) + xval(seed, step, b, (j + dout) % din));
  }
}

__global__ void linear_fwd(Dims d, const float* __restrict__ W, const float* __restrict__ bias,
                           const float* __restrict__ x, float* __restrict__ z) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.batch * d.out) return;
  int b = i / d.out, o = i % d.out;
  float acc = bias[o];
  for (int k = 0; k < d.in; ++k) acc += W[o * d.in + k] * x[b * d.in + k];
  z[i] = acc * d.scale;
}

__global__ void act_fwd(const float* __restrict__ z, float* __restrict__ a, int n, int kind) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = kind == 0 ? tanhf(z[i]) : z[i];
}

__global__ void loss_elem(const float* __restrict__ y, const float* __restrict__ t,
                          float* __restrict__ sq, float* __restrict__ dy, int n, float inv_n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float diff = y[i] - t[i];
    sq[i] = diff * diff;
    dy[i] = 2.0f * diff * inv_n;
  }
}

constexpr int kReduceThreads = 256;

// One block, fixed summation order: deterministic. metrics is zeroed by a memset first.
__global__ void loss_reduce(const float* __restrict__ sq, float* metrics, int n, float inv_n) {
  __shared__ float s[kReduceThreads];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += sq[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    metrics[0] += s[0] * inv_n;
    metrics[1] += 1.0f;
  }
}

__global__ void act_bwd(const float* __restrict__ dA, const float* __restrict__ a,
                        float* __restrict__ dZ, int n, int kind) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dZ[i] = kind == 0 ? dA[i] * (1.0f - a[i] * a[i]) : dA[i];
}

__global__ void grad_w(Dims d, const float* __restrict__ dZ, const float* __restrict__ x,
                       float* __restrict__ dW) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.out * d.in) return;
  int o = i / d.in, k = i % d.in;
  float acc = 0.0f;
  for (int b = 0; b < d.batch; ++b) acc += dZ[b * d.out + o] * x[b * d.in + k];
  dW[i] = acc * d.scale;
}

__global__ void grad_b(const float* __restrict__ dZ, float* __restrict__ db, int batch, int out) {
  int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= out) return;
  float acc = 0.0f;
  for (int b = 0; b < batch; ++b) acc += dZ[b * out + o];
  db[o] = acc;
}

__global__ void grad_in(Dims d, const float* __restrict__ W, const float* __restrict__ dZ,
                        float* __restrict__ dX) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.batch * d.in) return;
  int b = i / d.in, k = i % d.in;
  float acc = 0.0f;
  for (int o = 0; o < d.out; ++o) acc += dZ[b * d.out + o] * W[o * d.in + k];
  dX[i] = acc * d.scale;
}

__global__ void sgd_w(float* __restrict__ W, const float* __restrict__ dW, float* __restrict__ mom,
                      int n, const StepState* __restrict__ st, float wd) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = st->mom * mom[i] + dW[i] + wd * W[i];
  mom[i] = v;
  W[i] -= st->lr * v;
}

__global__ void sgd_b(float* __restrict__ b, const float* __restrict__ db, int n,
                      const StepState* __restrict__ st) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] -= st->lr * db[i];
}

inline unsigned blocks(int n, int t) { return (unsigned)((n + t - 1) / t); }

struct Model {
  int width[kLayers + 1];
  // parameters and optimizer state live in one arena (for the checksum)
  float* params = nullptr;
  size_t params_floats = 0;
  float* W[kLayers + 1] = {};
  float* b[kLayers + 1] = {};
  float* mom[kLayers + 1] = {};
  // gradients / activations
  float* dW[kLayers + 1] = {};
  float* db[kLayers + 1] = {};
  float* z[kLayers + 1] = {};
  float* a[kLayers + 1] = {};  // a[0] = input batch
  float* dA[kLayers + 1] = {};
  float* dZ[kLayers + 1] = {};
  float* target = nullptr;
  float* sq = nullptr;
  float* metrics = nullptr;  // [0] loss, [1] count
  StepState* st = nullptr;
  float* scratch = nullptr;
};

void setup(Model& m) {
  static const int pattern[5] = {96, 64, 48, 128, 80};
  m.width[0] = kIn;
  for (int i = 1; i < kLayers; ++i) m.width[i] = pattern[(i - 1) % 5];
  m.width[kLayers] = kOut;

  size_t pf = 0;
  for (int i = 1; i <= kLayers; ++i)
    pf += 2 * (size_t)m.width[i] * m.width[i - 1] + m.width[i];  // W, mom, b
  m.params_floats = pf;
  CK(cudaMalloc(&m.params, pf * sizeof(float)));
  float* p = m.params;
  for (int i = 1; i <= kLayers; ++i) {
    size_t nw = (size_t)m.width[i] * m.width[i - 1];
    m.W[i] = p; p += nw;
    m.mom[i] = p; p += nw;
    m.b[i] = p; p += m.width[i];
  }

  size_t sf = 0;
  for (int i = 0; i <= kLayers; ++i) {
    size_t act = (size_t)kBatch * m.width[i];
    sf += 4 * act;  // z, a, dA, dZ
    if (i > 0) sf += (size_t)m.width[i] * m.width[i - 1] + m.width[i];  // dW, db
  }
  sf += 2 * (size_t)kBatch * kOut + 8;  // target, sq, metrics
  CK(cudaMalloc(&m.scratch, sf * sizeof(float)));
  CK(cudaMemset(m.scratch, 0, sf * sizeof(float)));
  float* s = m.scratch;
  for (int i = 0; i <= kLayers; ++i) {
    size_t act = (size_t)kBatch * m.width[i];
    m.z[i] = s; s += act;
    m.a[i] = s; s += act;
    m.dA[i] = s; s += act;
    m.dZ[i] = s; s += act;
    if (i > 0) {
      m.dW[i] = s; s += (size_t)m.width[i] * m.width[i - 1];
      m.db[i] = s; s += m.width[i];
    }
  }
  m.target = s; s += (size_t)kBatch * kOut;
  m.sq = s; s += (size_t)kBatch * kOut;
  m.metrics = s; s += 8;
  CK(cudaMalloc(&m.st, sizeof(StepState)));
  CK(cudaMemset(m.st, 0, sizeof(StepState)));

  CK(cudaMemset(m.params, 0, pf * sizeof(float)));
  for (int i = 1; i <= kLayers; ++i) {
    int nw = m.width[i] * m.width[i - 1];
    float scale = 1.0f / std::sqrt((float)m.width[i - 1]);
    init_params<<<blocks(nw, 256), 256>>>(m.W[i], nw, scale, (uint32_t)i, kSeed);
    CKL();
    init_params<<<blocks(m.width[i], 256), 256>>>(m.b[i], m.width[i], 0.1f, (uint32_t)(1000 + i), kSeed);
    CKL();
  }
  CK(cudaDeviceSynchronize());
}

// Issues one training iteration on stream s. Returns the number of kernel launches.
// If sched_node is non-null (stream s is capturing), the schedule kernel's graph node
// is stored there.
int issue_iteration(Model& m, cudaStream_t s, int step, cudaGraphNode_t* sched_node) {
  int k = 0;
  schedule_kernel<<<kSchedGrid, kSchedBlock, 0, s>>>(m.st, step, kBaseLr, kWarmSteps);
  CKL(); ++k;
  if (sched_node) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t* deps = nullptr;
    size_t ndeps = 0;
    CK(cudaStreamGetCaptureInfo(s, &cs, nullptr, nullptr, &deps, nullptr, &ndeps));
    if (cs != cudaStreamCaptureStatusActive || ndeps != 1 || deps == nullptr) {
      std::fprintf(stderr, "storm: unexpected capture state after schedule kernel (status %d, %zu deps)\n",
                   (int)cs, ndeps);
      std::exit(1);
    }
    *sched_node = deps[0];
  }
  {
    int n = kBatch * std::max(kIn, kOut);
    gen_data<<<blocks(n, 128), 128, 0, s>>>(m.st, m.a[0], m.target, kBatch, kIn, kOut, kSeed);
    CKL(); ++k;
  }
  for (int i = 1; i <= kLayers; ++i) {
    Dims d{kBatch, m.width[i - 1], m.width[i], 1.0f};
    int n = kBatch * m.width[i];
    linear_fwd<<<blocks(n, 128), 128, 0, s>>>(d, m.W[i], m.b[i], m.a[i - 1], m.z[i]);
    CKL(); ++k;
    act_fwd<<<blocks(n, 256), 256, 0, s>>>(m.z[i], m.a[i], n, i == kLayers ? 1 : 0);
    CKL(); ++k;
  }
  {
    int n = kBatch * kOut;
    float inv_n = 1.0f / (float)n;
    CK(cudaMemsetAsync(m.metrics, 0, 2 * sizeof(float), s));
    loss_elem<<<blocks(n, 64), 64, 0, s>>>(m.a[kLayers], m.target, m.sq, m.dA[kLayers], n, inv_n);
    CKL(); ++k;
    loss_reduce<<<1, kReduceThreads, 0, s>>>(m.sq, m.metrics, n, 1.0f / (float)n);
    CKL(); ++k;
  }
  for (int i = kLayers; i >= 1; --i) {
    Dims d{kBatch, m.width[i - 1], m.width[i], 1.0f};
    int n = kBatch * m.width[i];
    act_bwd<<<blocks(n, 256), 256, 0, s>>>(m.dA[i], m.a[i], m.dZ[i], n, i == kLayers ? 1 : 0);
    CKL(); ++k;
    int nw = m.width[i] * m.width[i - 1];
    grad_w<<<blocks(nw, 128), 128, 0, s>>>(d, m.dZ[i], m.a[i - 1], m.dW[i]);
    CKL(); ++k;
    grad_b<<<blocks(m.width[i], 32), 32, 0, s>>>(m.dZ[i], m.db[i], kBatch, m.width[i]);
    CKL(); ++k;
    if (i > 1) {
      int ni = kBatch * m.width[i - 1];
      grad_in<<<blocks(ni, 64), 64, 0, s>>>(d, m.W[i], m.dZ[i], m.dA[i - 1]);
      CKL(); ++k;
    }
  }
  for (int i = 1; i <= kLayers; ++i) {
    int nw = m.width[i] * m.width[i - 1];
    sgd_w<<<blocks(nw, 256), 256, 0, s>>>(m.W[i], m.dW[i], m.mom[i], nw, m.st, kWeightDecay);
    CKL(); ++k;
    sgd_b<<<blocks(m.width[i], 128), 128, 0, s>>>(m.b[i], m.db[i], m.width[i], m.st);
    CKL(); ++k;
  }
  return k;
}

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

[[noreturn]] void usage(const char* msg) {
  if (msg) std::fprintf(stderr, "storm: %s\n", msg);
  std::fprintf(stderr,
               "usage: storm [--iters N] [--warmup W] [--nosync] [--mode eager|graph]\n"
               "             [--stream null|new] [--json FILE]\n");
  std::exit(2);
}

int parse_int(const char* s, const char* what) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!end || *end != '\0' || v < 0 || v > 100000000) {
    std::fprintf(stderr, "storm: bad value for %s: '%s'\n", what, s);
    std::exit(2);
  }
  return (int)v;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 1000, warmup = 50;
  bool sync = true;
  std::string mode = "eager", stream_kind = "null", json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&](const char* what) -> const char* {
      if (i + 1 >= argc) usage((std::string("missing value for ") + what).c_str());
      return argv[++i];
    };
    if (a == "--iters") iters = parse_int(next("--iters"), "--iters");
    else if (a == "--warmup") warmup = parse_int(next("--warmup"), "--warmup");
    else if (a == "--nosync") sync = false;
    else if (a == "--sync") sync = true;
    else if (a == "--mode") mode = next("--mode");
    else if (a == "--stream") stream_kind = next("--stream");
    else if (a == "--json") json_path = next("--json");
    else if (a == "-h" || a == "--help") usage(nullptr);
    else usage((std::string("unknown argument '") + a + "'").c_str());
  }
  if (mode != "eager" && mode != "graph") usage("--mode must be eager or graph");
  if (stream_kind != "null" && stream_kind != "new") usage("--stream must be null or new");
  if (iters < 1) usage("--iters must be >= 1");

  int ndev = 0;
  cudaError_t derr = cudaGetDeviceCount(&ndev);
  if (derr != cudaSuccess || ndev == 0) {
    std::printf("storm: no CUDA device (%s)\n",
                derr != cudaSuccess ? cudaGetErrorString(derr) : "device count is 0");
    return 77;
  }
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));  // create the context outside any timing

  Model m;
  setup(m);

  // eager: the legacy default stream unless --stream new; graph: always its own stream
  // (capture is not allowed on the legacy stream). Both are blocking streams, so a
  // cudaMemcpy on the legacy stream waits for them.
  cudaStream_t s = nullptr;
  if (mode == "graph" || stream_kind == "new") CK(cudaStreamCreate(&s));

  int kernels_per_iter = 0;
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphNode_t sched_node = nullptr;
  cudaKernelNodeParams sched_params{};
  int patch_step = 0;
  float patch_lr = kBaseLr;
  int patch_warm = kWarmSteps;
  StepState* patch_st = m.st;
  void* patch_args[4] = {&patch_st, &patch_step, &patch_lr, &patch_warm};
  if (mode == "graph") {
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    kernels_per_iter = issue_iteration(m, s, 0, &sched_node);
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    // The patch re-states the schedule kernel's launch exactly as issue_iteration does,
    // with a new step value.
    sched_params.func = reinterpret_cast<void*>(schedule_kernel);
    sched_params.gridDim = dim3(kSchedGrid);
    sched_params.blockDim = dim3(kSchedBlock);
    sched_params.sharedMemBytes = 0;
    sched_params.kernelParams = patch_args;
    sched_params.extra = nullptr;
    CK(cudaGraphUpload(exec, s));
    CK(cudaStreamSynchronize(s));
  }

  auto run_iter = [&](int step) {
    if (mode == "graph") {
      patch_step = step;
      CK(cudaGraphExecKernelNodeSetParams(exec, sched_node, &sched_params));
      CK(cudaGraphLaunch(exec, s));
    } else {
      int k = issue_iteration(m, s, step, nullptr);
      if (kernels_per_iter == 0) kernels_per_iter = k;
    }
  };

  using clk = std::chrono::steady_clock;
  std::vector<double> us;
  float loss = 0.0f;
  double total_s = 0.0;
  if (sync) {
    us.reserve(iters);
    for (int it = 0; it < warmup + iters; ++it) {
      auto t0 = clk::now();
      run_iter(it);
      CK(cudaMemcpy(&loss, m.metrics, sizeof(float), cudaMemcpyDeviceToHost));
      auto t1 = clk::now();
      if (it >= warmup) {
        double d = std::chrono::duration<double, std::micro>(t1 - t0).count();
        us.push_back(d);
        total_s += d * 1e-6;
      }
    }
  } else {
    for (int it = 0; it < warmup; ++it) run_iter(it);
    CK(cudaDeviceSynchronize());
    auto t0 = clk::now();
    for (int it = warmup; it < warmup + iters; ++it) run_iter(it);
    CK(cudaDeviceSynchronize());
    auto t1 = clk::now();
    total_s = std::chrono::duration<double>(t1 - t0).count();
    us.assign(1, total_s * 1e6 / iters);
    CK(cudaMemcpy(&loss, m.metrics, sizeof(float), cudaMemcpyDeviceToHost));
  }
  CK(cudaDeviceSynchronize());

  std::vector<float> host(m.params_floats);
  CK(cudaMemcpy(host.data(), m.params, m.params_floats * sizeof(float), cudaMemcpyDeviceToHost));
  uint64_t checksum = fnv1a(host.data(), host.size() * sizeof(float));
  double psum = 0.0;
  for (float v : host) psum += v;

  // Medians of ten consecutive blocks of iterations (sync only): tells drift within a
  // process apart from differences between processes.
  std::string blocks;
  if (sync && us.size() >= 10) {
    size_t per = us.size() / 10;
    for (size_t b = 0; b < 10; ++b) {
      std::vector<double> part(us.begin() + b * per, us.begin() + (b + 1) * per);
      std::nth_element(part.begin(), part.begin() + part.size() / 2, part.end());
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.2f", b ? ", " : "", part[part.size() / 2]);
      blocks += buf;
    }
  }

  std::vector<double> sorted = us;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                    : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  double mean = total_s * 1e6 / iters;

  char loss_hex[16], sum_hex[24];
  std::snprintf(loss_hex, sizeof loss_hex, "%08x", float_bits(loss));
  std::snprintf(sum_hex, sizeof sum_hex, "%016llx", (unsigned long long)checksum);

  std::printf("storm: mode=%s sync=%d stream=%s iters=%d warmup=%d kernels/iter=%d "
              "us/iter median=%.2f mean=%.2f loss=%.9g (0x%s) params=0x%s (sum %.6g)\n",
              mode.c_str(), sync ? 1 : 0, mode == "graph" ? "new" : stream_kind.c_str(), iters, warmup,
              kernels_per_iter, median, mean, (double)loss, loss_hex, sum_hex, psum);

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "storm: cannot write %s: %s\n", json_path.c_str(), std::strerror(errno));
      return 1;
    }
    std::fprintf(f,
                 "{\"mode\": \"%s\", \"sync\": %s, \"stream\": \"%s\", \"iters\": %d, \"warmup\": %d, "
                 "\"kernels_per_iter\": %d, \"memsets_per_iter\": 1, \"copies_per_iter\": %d, "
                 "\"us_per_iter_median\": %.3f, \"us_per_iter_mean\": %.3f, \"total_s\": %.6f, "
                 "\"loss_final\": %.9g, \"loss_final_hex\": \"%s\", \"params_checksum_hex\": \"%s\", "
                 "\"block_medians_us\": [%s]}\n",
                 mode.c_str(), sync ? "true" : "false", mode == "graph" ? "new" : stream_kind.c_str(),
                 iters, warmup, kernels_per_iter, sync ? 1 : 0, median, mean, total_s, (double)loss,
                 loss_hex, sum_hex, blocks.c_str());
    std::fclose(f);
  }

  if (exec) CK(cudaGraphExecDestroy(exec));
  if (graph) CK(cudaGraphDestroy(graph));
  if (s) CK(cudaStreamDestroy(s));
  CK(cudaFree(m.st));
  CK(cudaFree(m.scratch));
  CK(cudaFree(m.params));
  return 0;
}
