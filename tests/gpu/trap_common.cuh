// Shared by the trap programs (traps.cu, traps_libs.cu): error checks,
// digests, buffers, the mixing kernels, and the scenario runner. Every
// scenario is a deterministic loop that prints digests of its device buffers;
// check_traps.py compares its output under graft with eager's, line for line.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CK(call)                                                                        \
  do {                                                                                  \
    cudaError_t err_ = (call);                                                          \
    if (err_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "traps: %s:%d: %s -> %s\n", __FILE__, __LINE__, #call,       \
                   cudaGetErrorName(err_));                                             \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)
#define CKD(call)                                                                       \
  do {                                                                                  \
    CUresult r_ = (call);                                                               \
    if (r_ != CUDA_SUCCESS) {                                                           \
      const char* n_ = nullptr;                                                         \
      cuGetErrorName(r_, &n_);                                                          \
      std::fprintf(stderr, "traps: %s:%d: %s -> %s\n", __FILE__, __LINE__, #call, n_);   \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)
#define CKL() CK(cudaGetLastError())

// A library call's status (cuBLAS, cuRAND, cuFFT: 0 is success); exit 1 otherwise.
#define CK_LIB(call, lib)                                                                        \
  do {                                                                                           \
    const int s_ = int(call);                                                                    \
    if (s_ != 0) {                                                                               \
      std::fprintf(stderr, "%s:%d: %s -> %s status %d\n", __FILE__, __LINE__, #call, lib, s_);  \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
#define CKB(call) CK_LIB(call, "cuBLAS")
#define CKR(call) CK_LIB(call, "cuRAND")

namespace {


int g_iters = 300;
constexpr int kN = 1 << 14;  // elements per buffer
constexpr int kBlock = 128;
constexpr int kGrid = kN / kBlock;

// ---------------------------------------------------------------- digests

struct Digest {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void add(uint64_t v) { add(&v, sizeof v); }
};

// A float's or a double's bits, for printing a value exactly.
inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline unsigned long long bits(double f) {
  unsigned long long u;
  std::memcpy(&u, &f, 8);
  return u;
}

// Synchronous copy of a device buffer (on the legacy stream: waits for all
// blocking streams' work) into a digest.
uint64_t deviceDigest(const void* d, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  CK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
  Digest g;
  g.add(h.data(), bytes);
  return g.h;
}

// A 32-bit mix, a float in [0, 1) from its top 24 bits, and a value for
// printf's %llx.
__host__ __device__ inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
__host__ __device__ inline float unitFloat(uint32_t h) { return float(h >> 8) * (1.0f / 16777216.0f); }
[[maybe_unused]] inline unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

// A digest of host memory.
[[maybe_unused]] uint64_t hostDigest(const void* p, size_t bytes) {
  Digest d;
  d.add(p, bytes);
  return d.h;
}

// The current device's ordinal.
[[maybe_unused]] int currentDevice() {
  int d = 0;
  CK(cudaGetDevice(&d));
  return d;
}

// About one step in `every` from step 16 on, with no period: a tool that
// learned the common step (by then) meets the odd one in its place.
[[maybe_unused]] bool irregular(int i, uint32_t salt, uint32_t every) {
  return i >= 16 && hash32(uint32_t(i) * 0x9e3779b9u + salt * 0x85ebca6bu) % every == 0;
}

void print(const char* what, int at, uint64_t h) {
  std::printf("%s %d %016llx\n", what, at, static_cast<unsigned long long>(h));
}

cudaStream_t nonBlockingStream() {
  cudaStream_t s = nullptr;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

// Every 100th step: waits for `s`, then prints the digest of `words` words of
// `buf`. True at those steps (for extra lines after it).
bool checkpoint(int i, cudaStream_t s, const char* what, const uint32_t* buf, size_t words = kN) {
  if (i % 100 != 99) return false;
  CK(cudaStreamSynchronize(s));
  print(what, i, deviceDigest(buf, words * 4));
  return true;
}

[[maybe_unused]] int deviceAttribute(cudaDeviceAttr attr) {
  int v = 0;
  CK(cudaDeviceGetAttribute(&v, attr, currentDevice()));
  return v;
}

// A runtime call's code, for a digest: a refusal must not stay behind as the
// runtime's last error (the next CKL() would take it for a launch's).
[[maybe_unused]] cudaError_t keep(cudaError_t r) {
  if (r != cudaSuccess) cudaGetLastError();
  return r;
}

uint32_t* deviceBuffer(uint32_t seed, int n = kN) {
  std::vector<uint32_t> h(n);
  for (int i = 0; i < n; ++i) h[i] = seed * 2654435761u + uint32_t(i) * 40503u;
  uint32_t* d = nullptr;
  CK(cudaMalloc(&d, n * sizeof(uint32_t)));
  CK(cudaMemcpy(d, h.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice));
  return d;
}

// ---------------------------------------------------------------- probes

// This program run again as `NAME FLAG VARIANT` in a fresh process (exec
// before any CUDA call: a call the driver lets fault would leave the
// scenario's own context broken), for at most 60 s: its output (trailing
// newlines cut) and how it ended.
struct ChildRun {
  std::string text;  // "exit N: OUTPUT", "signal N" or "timed out"
  std::string out;
  int exitCode = -1;  // -1: killed by a signal or timed out
};

inline ChildRun runSelfInChild(const char* name, const char* flag, const char* variant) {
  std::fflush(stdout);
  std::fflush(stderr);
  int fds[2];
  if (pipe(fds) != 0) {
    std::fprintf(stderr, "traps: pipe failed\n");
    std::exit(1);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "traps: fork failed\n");
    std::exit(1);
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", name, flag, variant, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  bool timedOut = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timedOut = true;
      break;
    }
    pollfd p = {fds[0], POLLIN, 0};
    const int r = poll(&p, 1, int(left));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) timedOut = true;
    if (r <= 0) break;
    char buf[256];
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    out.append(buf, size_t(got));
  }
  close(fds[0]);
  if (timedOut) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  ChildRun res;
  res.out = out;
  if (timedOut) {
    res.text = "timed out";
  } else if (WIFSIGNALED(status)) {
    res.text = "signal " + std::to_string(WTERMSIG(status));
  } else {
    res.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    res.text = "exit " + std::to_string(res.exitCode) + ": " + out;
  }
  return res;
}

// ---------------------------------------------------------------- kernels

__host__ __device__ inline uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }


// dst[k] mixes with src at another block's index: a launch that overlaps the
// one before it, or runs before it, changes the result.
__global__ void mix(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 5) ^ (src[(k * 7 + 4099) % n] + salt + uint32_t(k));
}

__global__ void mix2(uint32_t* dst, const uint32_t* a, const uint32_t* b, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 3) + (a[(k * 5 + 77) % n] ^ rotl(b[(k * 3 + 11) % n], 7)) + salt;
}

// A gate in a stream: a host function (hostGateWait, with a HostGateCall)
// that blocks its stream until the host opened the gate for its step
// (open >= want), or until timeoutMs passed, which it counts. Eagerly a
// scenario's gates never time out; a replay that makes the opening depend
// on work behind the gate shows in `timeouts`.
struct HostGate {
  explicit HostGate(unsigned ms) : timeoutMs(ms) {}
  std::atomic<uint32_t> open{0};
  std::atomic<uint32_t> timeouts{0};
  std::atomic<uint32_t> ran{0};
  const unsigned timeoutMs;
};
struct HostGateCall {
  HostGate* gate;
  uint32_t want;
};
[[maybe_unused]] void CUDART_CB hostGateWait(void* p) {
  const auto* call = static_cast<const HostGateCall*>(p);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(call->gate->timeoutMs);
  while (call->gate->open.load(std::memory_order_acquire) < call->want) {
    if (std::chrono::steady_clock::now() > until) {
      call->gate->timeouts.fetch_add(1);
      break;
    }
    std::this_thread::yield();
  }
  call->gate->ran.fetch_add(1);
}

struct Scenario {
  const char* name;
  void (*run)();
};

// The trap programs' main: `PROGRAM NAME [--iters N]` runs one scenario,
// `PROGRAM --list` names them. Exit codes: 0 ok, 1 CUDA error or broken
// invariant (the scenario exits), 2 usage, 77 no device.
inline int runScenarios(int argc, char** argv, const Scenario* scenarios, size_t n, const Scenario* unlisted,
                        size_t nUnlisted) {
  const char* name = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--list")) {
      for (size_t k = 0; k < n; ++k) std::printf("%s\n", scenarios[k].name);
      return 0;
    } else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      g_iters = std::atoi(argv[++i]);
    } else if (argv[i][0] != '-' && !name) {
      name = argv[i];
    } else {
      std::fprintf(stderr, "usage: %s NAME [--iters N] | --list\n", argv[0]);
      return 2;
    }
  }
  if (!name || g_iters < 10) {
    std::fprintf(stderr, "usage: %s NAME [--iters N>=10] | --list\n", argv[0]);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("traps: no CUDA device\n");
    return 77;
  }
  for (size_t k = 0; k < n + nUnlisted; ++k) {
    const Scenario& s = k < n ? scenarios[k] : unlisted[k - n];
    if (std::strcmp(s.name, name)) continue;
    s.run();
    CK(cudaDeviceSynchronize());
    return 0;
  }
  std::fprintf(stderr, "traps: unknown scenario '%s' (--list names them)\n", name);
  return 2;
}

template <size_t N>
int runScenarios(int argc, char** argv, const Scenario (&scenarios)[N]) {
  return runScenarios(argc, argv, scenarios, N, nullptr, 0);
}

// The same with `unlisted` scenarios: run by name, but not named by --list
// (so check_traps.py leaves them out): where graft differs from eager by
// design (README, Limits) or where the eager run itself is not deterministic
// on every machine.
template <size_t N, size_t U>
int runScenarios(int argc, char** argv, const Scenario (&scenarios)[N], const Scenario (&unlisted)[U]) {
  return runScenarios(argc, argv, scenarios, N, unlisted, U);
}


// A kernel the programs load from PTX (the driver compiles it). Generated by
// nvcc -ptx from:
//   extern "C" __global__ void trapInc(unsigned* dst, const unsigned* src, int n, unsigned v) {
//     int k = blockIdx.x * blockDim.x + threadIdx.x;
//     if (k < n) dst[k] = (dst[k] << 3 | dst[k] >> 29) + src[(k * 11 + 5) % n] + v;
//   }
[[maybe_unused]] const char* const kIncPtx = R"PTX(.version 9.0
.target sm_90
.address_size 64
.visible .entry trapInc(
	.param .u64 trapInc_param_0,
	.param .u64 trapInc_param_1,
	.param .u32 trapInc_param_2,
	.param .u32 trapInc_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<14>;
	.reg .b64 	%rd<9>;
	ld.param.u64 	%rd1, [trapInc_param_0];
	ld.param.u64 	%rd2, [trapInc_param_1];
	ld.param.u32 	%r2, [trapInc_param_2];
	ld.param.u32 	%r3, [trapInc_param_3];
	mov.u32 	%r4, %ctaid.x;
	mov.u32 	%r5, %ntid.x;
	mov.u32 	%r6, %tid.x;
	mad.lo.s32 	%r1, %r4, %r5, %r6;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd1;
	mul.wide.s32 	%rd4, %r1, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.u32 	%r7, [%rd5];
	shf.l.wrap.b32 	%r8, %r7, %r7, 3;
	mad.lo.s32 	%r9, %r1, 11, 5;
	rem.s32 	%r10, %r9, %r2;
	cvta.to.global.u64 	%rd6, %rd2;
	mul.wide.s32 	%rd7, %r10, 4;
	add.s64 	%rd8, %rd6, %rd7;
	ld.global.u32 	%r11, [%rd8];
	add.s32 	%r12, %r11, %r3;
	add.s32 	%r13, %r12, %r8;
	st.global.u32 	[%rd5], %r13;
$L__BB0_2:
	ret;
}
)PTX";

}  // namespace
