// traps_r31 (helper-written): a thirty-first red-team round of odd but legal CUDA C++
// patterns in the style of traps_r29.cu and traps_r27.cu (trap_common.cuh,
// trap_helpers.cuh, trap_mirror.cuh), aimed at what a tool that holds launches
// back, captures the repeating ones into graphs of its own, leaves ops that
// change every step eager between graphs (holes), builds sequences that recur
// but never repeat in a row (stretches), patches argument values and answers
// some queries itself could get wrong: programmatic dependent launches joined
// across streams, holes inside fork/join windows (on the legacy stream too),
// a stretch with fresh events every time, op sequences that a library picks
// from stream queries and capture status (results the same either way), code
// unloaded and reloaded under one kernel name every few steps, another
// thread's barriers and queries at any moment, a persistent workspace set up
// once per epoch and reached only through a device global, launch attributes
// that change every few steps with a large by-value struct, and the program's
// own graph alternating with the same work issued eagerly. Each scenario is
// deterministic in eager (integer kernels, every cross-stream access ordered
// by a stream, an event, the legacy stream's implicit synchronization or a
// host barrier), prints digests of its buffers, and checks its results
// against a host mirror of its kernels (a MISMATCH line and exit 1 on a
// difference); check_traps.py requires the same output under graft. No line
// depends on an address or on timing (what depends on timing goes to stderr).
//
//   pdl_cross_join        stream T runs a producer that triggers its
//                         dependents at its start (griddepcontrol
//                         .launch_dependents; on 4 steps in 5), spins ~20 us
//                         and only then writes B; T records an event that S
//                         waits on before a kernel launched with programmatic
//                         stream serialization that reads B WITHOUT calling
//                         cudaGridDependencySynchronize (on one step in three
//                         it does): eagerly the serialization only relaxes the
//                         kernel before it on S (which never triggers, or
//                         triggers but shares no data), while the event wait
//                         is a full dependency. Four step forms in turn: the
//                         wait between a plain kernel and the dependent, the
//                         wait first, a second dependent that triggers at its
//                         start between the kernel and the wait, and a step
//                         that starts after a stream synchronize with the
//                         wait and the dependent first on S; serialization off
//                         on irregular steps. What graft may get wrong: in a
//                         graph captured from that step the dependent's
//                         dependency on T's producer (an edge made from the
//                         event join) must stay a full edge; a programmatic
//                         edge lets the dependent read B before it is written.
//   holes_in_windows      a ~140-op step on three streams with two fork/join
//                         windows and four ops that change every step (holes,
//                         which graft leaves eager between its graphs): a
//                         kernel whose grid cycles 1, 2, 3 in the middle of a
//                         side stream's branch, a memset whose size changes
//                         on the main stream, a device copy whose size changes
//                         as the FIRST op of the second branch, and a launch
//                         right after a join whose handle alternates (<<<>>>,
//                         the CUfunction of cudaGetFuncBySymbol through
//                         cuLaunchKernel); the op after each hole reads what it
//                         wrote. First half non-blocking streams; second half
//                         the legacy stream as the main stream and two blocking
//                         side streams (ordered also by the implicit
//                         synchronization). What graft may get wrong: an eager
//                         hole between two graphs that split an open window
//                         (the branch's earlier work in the first graph, its
//                         later work and the join in the second) run before
//                         its branch's earlier work or after its later work.
//   recurring_stretch     a ~60-op training stretch on two streams (a fork/join
//                         by two events and an output event, all three created
//                         anew for every stretch and destroyed right after
//                         their last use; buffer sets rotating with period 3,
//                         salts new every step; about one stretch in 11 has
//                         one launch replaced) followed by an eval pass on a third
//                         stream that waits on the stretch's output event and
//                         launches 2 to 7 kernels of grids drawn from a host
//                         RNG (1 to 24 blocks) and sometimes a memset of a
//                         drawn size: the stretch recurs every step but the
//                         step never repeats. What graft may get wrong: a
//                         stretch built at its third sighting replayed with the
//                         events of the occurrence it was built from (the
//                         eval's wait must bind to THIS stretch's record), an
//                         event destroyed while its record is in a held or
//                         replayed graph.
//   query_steered_paths   a library helper that, like a framework's, asks
//                         cudaStreamIsCapturing and cudaStreamGetCaptureInfo
//                         about its stream and then cudaStreamQuery: idle, it
//                         runs one fused grid-stride kernel with 8 blocks;
//                         busy, two kernels through a workspace picked by
//                         cudaEventQuery of its last record (either is
//                         safe), grid-stride with 16 blocks; capturing, the
//                         two-kernel path with no query. The paths compute the
//                         same values, so the op sequence depends on timing
//                         (eagerly and under graft alike) but no printed line
//                         does. Four helper calls a step on two streams joined
//                         by events; every 16th step the program captures one
//                         call (relaxed mode) and launches the graph. What
//                         graft may get wrong: the sequence changing with its
//                         own answers, a capture status other than the
//                         driver's, held work across the program's capture.
//   reload_variants       a kernel of one name (trapInc) in two variants of
//                         PTX with other constants, loaded in turn as a module
//                         (cuModuleLoadData, a CUfunction) or a library
//                         (cuLibraryLoadData: launched by its CUkernel and by
//                         cuKernelGetFunction's CUfunction), each load living
//                         1 to 5 steps, then the stream synchronized and the
//                         code unloaded (the driver may hand the same handles
//                         to the other variant); between its launches, runtime
//                         kernels and a memset that graft can keep in graphs.
//                         What graft may get wrong: a graph or a learned
//                         layout kept for a handle whose code changed, the
//                         eager rule for reloaded code applied by name to the
//                         other variant's launches.
//   monitor_barriers      a monitoring thread, free-running, calls in turn
//                         cudaDeviceSynchronize, cudaStreamSynchronize of the
//                         main stream, cudaEventSynchronize of the step's last
//                         event, cudaStreamQuery of the side stream,
//                         cudaEventQuery, the pool's used-memory attribute,
//                         cuCtxSynchronize and cudaMemGetInfo, sleeping 50 to
//                         300 us between them, while the main thread runs a
//                         two-stream step with a stream-ordered scratch block
//                         (allocated, memset, used, freed every step) and, on
//                         irregular steps, sleeps 12 ms at a moving place in the
//                         step (longer than graft's idle flush). Nothing the
//                         monitor sees is printed (its counts go to stderr).
//                         What graft may get wrong: another thread's barrier or
//                         pool query arriving in the middle of a replay, a
//                         graph build, an idle flush or a deferred free (a
//                         hang, lost or doubled work, a free run too early).
//   epoch_workspace       a library-style workspace allocated with
//                         cudaMallocAsync at the start of each epoch (4 to 8
//                         steps, its size changing every epoch) on a workspace
//                         stream and memset only then (on that stream with an
//                         event the main stream waits on, on odd epochs on the
//                         main stream itself); its address reaches the kernels
//                         only through a __device__ handle a one-thread kernel
//                         sets once per epoch; kernels add into it with
//                         atomics every step, read it, and the last step of the
//                         epoch drains it and frees it (cudaFreeAsync on the
//                         main stream); a per-step scratch block allocated
//                         before or after the atomics in turn, in three sizes.
//                         What graft may get wrong: the first step of an epoch
//                         (a wait and a kernel more) matched as a plain step,
//                         atomics replayed twice or dropped, the old
//                         workspace's deferred free against the new one's
//                         allocation, the handle kernel's argument not patched.
//   attr_epochs           one kernel taking a 2816-byte struct by value (three
//                         table words of 700 change every step at hashed
//                         places, its output pointer every 2 steps) launched
//                         through cudaLaunchKernelExC with a cluster dimension
//                         that changes every 6 steps (none, 1, 2, 4), a
//                         priority every 4, a memory synchronization domain
//                         every 5, and the order of the list and an ignored
//                         entry full of garbage every 9; a plain launch of it
//                         too. The kernel records its cluster size and rank
//                         with a checksum of the table. What graft may get
//                         wrong: a graph built under one attribute set replayed
//                         under another, variants of the step evicted and
//                         rebuilt, a struct word patched at the wrong place.
//   program_graph_alternate  the program's own graph (explicit nodes: two
//                         kernels and a memset) and the same kernels and
//                         memset issued eagerly with the same arguments, in
//                         turn: the graph's kernel nodes updated
//                         (cudaGraphExecKernelNodeSetParams) and launched; the
//                         eager path; the nodes updated but the eager path
//                         taken with the very argument array given to the
//                         update (scribbled right after); on irregular steps
//                         the nodes set again right after the graph's launch
//                         (affecting only later launches). A second stream
//                         reads the results after an event. What graft may get
//                         wrong: the program's graph launch ahead of held work,
//                         graft's graphs of the eager path replayed with the
//                         values of the program's graph, an update taken as
//                         applying to a launch already made.
//
//   traps_r31 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r31 --list               the scenario names
//
// Linked to libcuda (-lcuda: driver launches, modules and libraries,
// cuCtxSynchronize); no device-side launches:
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -o traps_r31 traps_r31.cu -lcuda
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trap_mirror.cuh"

namespace {

// ---------------------------------------------------------------- shared helpers

constexpr int kW = 2048;  // words per buffer of the multi-block scenarios
constexpr int kWGrid = kW / kBlock;
constexpr int kL = 128;  // words per buffer of the one-block kernels

std::vector<uint32_t> patternWords(uint32_t seed, int n) { return hostPattern(seed, n); }
uint8_t* bytesOf(std::vector<uint32_t>& v) { return reinterpret_cast<uint8_t*>(v.data()); }

// Programmatic dependent launch, as PTX (no device runtime needed).
__device__ __forceinline__ void gridDepWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void gridDepTrigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// Three one-block kernels of one signature: the order of any two launches on
// one buffer matters (trap_mirror.cuh's orderedOpAt). dst must not alias src.
template <int F>
__global__ void opK(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) orderedOpAt(F, dst, src, n, salt, k);
}
// One launch of kernel fn (kL threads, one block) and its mirror.
void runOp(int fn, cudaStream_t s, uint32_t* dst, const uint32_t* src, uint32_t salt, std::vector<uint32_t>& hDst,
           const std::vector<uint32_t>& hSrc) {
  switch (fn) {
    case 0:
      opK<0><<<1, kL, 0, s>>>(dst, src, kL, salt);
      break;
    case 1:
      opK<1><<<1, kL, 0, s>>>(dst, src, kL, salt);
      break;
    default:
      opK<2><<<1, kL, 0, s>>>(dst, src, kL, salt);
      break;
  }
  CKL();
  for (int k = 0; k < kL; ++k) orderedOpAt(fn, hDst.data(), hSrc.data(), kL, salt, k);
}

// A set of one-block buffers and their mirrors.
struct BufSet {
  std::vector<uint32_t*> d;
  std::vector<std::vector<uint32_t>> h;
  BufSet(int count, uint32_t seed, int words = kL) {
    for (int k = 0; k < count; ++k) {
      d.push_back(deviceBuffer(seed + uint32_t(k), words));
      h.push_back(patternWords(seed + uint32_t(k), words));
    }
  }
  void check(const char* what, int at) {
    for (size_t k = 0; k < d.size(); ++k) {
      const std::string name = std::string(what) + std::to_string(k);
      checkDev(name.c_str(), at, d[k], h[k]);
    }
  }
};

// `count` one-block launches on s over buffers of `b`: destinations from
// `dsts`, sources from `srcs` (never the destination), kernels and salts
// from `seed` (every 4th launch's salt also from `stepSalt`, a value that
// changes every step).
void scriptOps(cudaStream_t s, BufSet& b, int count, uint32_t seed, uint32_t stepSalt, std::initializer_list<int> dsts,
               std::initializer_list<int> srcs) {
  const std::vector<int> D(dsts), S(srcs);
  for (int j = 0; j < count; ++j) {
    const uint32_t h = hash32(seed * 0x85ebca6bu + uint32_t(j) * 0x9e3779b9u);
    const int fn = int(h % 3);
    const int dst = D[(h >> 4) % D.size()];
    int si = int((h >> 8) % S.size());
    if (S[size_t(si)] == dst) si = (si + 1) % int(S.size());
    const int src = S[size_t(si)];
    if (src == dst) {
      std::fprintf(stderr, "traps_r31: a script op would alias its source\n");
      std::exit(1);
    }
    const uint32_t salt = hash32(h ^ 0x5bd1e995u) + (j % 4 == 0 ? stepSalt : 0u);
    runOp(fn, s, b.d[size_t(dst)], b.d[size_t(src)], salt, b.h[size_t(dst)], b.h[size_t(src)]);
  }
}

// ================================================================ pdl_cross_join

constexpr long long kPdlSpin = 40000;  // cycles: ~20 us on an H100

__host__ __device__ inline void pdlProduceAt(uint32_t* b, const uint32_t* d, int n, uint32_t salt, int k) {
  b[k] = rotl(b[k], 9) ^ (d[(k * 7 + 3) % n] + salt + uint32_t(k) * 0x9e3779b9u);
}
__host__ __device__ inline void pdlK1At(uint32_t* a, const uint32_t* d, int n, uint32_t salt, int k) {
  a[k] = a[k] * 0x2545f491u + (d[(k * 11 + 5) % n] ^ salt);
}
__host__ __device__ inline void pdlSideAt(uint32_t* e, uint32_t salt, int k) {
  e[k] = rotl(e[k], 1) ^ hash32(salt + uint32_t(k));
}
__host__ __device__ inline void pdlDepAt(uint32_t* c, const uint32_t* b, int n, uint32_t salt, int k) {
  c[k] = rotl(c[k], 3) + (b[(k * 13 + 1) % n] ^ b[k] ^ salt);
}
__host__ __device__ inline void pdlK3At(uint32_t* d, const uint32_t* a, const uint32_t* c, int n, uint32_t salt,
                                        int k) {
  d[k] = rotl(d[k], 7) ^ (a[(k * 3 + 2) % n] + c[(k * 5 + 4) % n] + salt);
}

// T: triggers its dependents at once when `trigger` (eagerly there are none:
// the next op on T is an event record), spins, then writes b.
__global__ void pdlProduce(uint32_t* b, const uint32_t* d, int n, uint32_t salt, int trigger, long long spin) {
  if (trigger) gridDepTrigger();
  spinCycles(spin);
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) pdlProduceAt(b, d, n, salt, k);
}
// S's plain kernel: never triggers (its dependents start once it completed).
__global__ void pdlK1(uint32_t* a, const uint32_t* d, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) pdlK1At(a, d, n, salt, k);
}
// A second dependent (programmatic serialization) that triggers at its
// start: it touches only e, which nothing else on S reads or writes.
__global__ void pdlSide(uint32_t* e, int n, uint32_t salt) {
  gridDepTrigger();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) pdlSideAt(e, salt, k);
}
// The dependent: reads b, which T's producer wrote (ordered by the event
// wait only); waits for its programmatic primaries only when `gds`.
__global__ void pdlDep(uint32_t* c, const uint32_t* b, int n, uint32_t salt, int gds) {
  if (gds) gridDepWait();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) pdlDepAt(c, b, n, salt, k);
}
__global__ void pdlK3(uint32_t* d, const uint32_t* a, const uint32_t* c, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) pdlK3At(d, a, c, n, salt, k);
}

// What a tool could get wrong: the step's dependent kernel is launched with
// programmatic stream serialization right after an event wait on T, whose
// producer triggers its dependents at its start and writes b only ~20 us
// later. Eagerly the serialization relaxes only the kernel before the
// dependent on S; the wait is a full dependency. In a graph captured from the
// step, the wait becomes an edge from T's producer to the dependent, which
// must not be programmatic.
void pdlCrossJoin() {
  const int n = kW;
  cudaStream_t S = nonBlockingStream(), T = nonBlockingStream();
  cudaEvent_t eT = untimedEvent(), eS = untimedEvent();
  uint32_t *A = deviceBuffer(3101, n), *B = deviceBuffer(3102, n), *C = deviceBuffer(3103, n);
  uint32_t *D = deviceBuffer(3104, n), *E = deviceBuffer(3105, n);
  std::vector<uint32_t> hA = patternWords(3101, n), hB = patternWords(3102, n), hC = patternWords(3103, n);
  std::vector<uint32_t> hD = patternWords(3104, n), hE = patternWords(3105, n);
  preload(pdlProduce);
  preload(pdlK1);
  preload(pdlSide);
  preload(pdlDep);
  preload(pdlK3);
  CK(cudaDeviceSynchronize());
  auto pssLaunch = [&](bool pss, auto kernel, auto... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kWGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = S;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = pss ? 1 : 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, kernel, args...));
  };
  int forms[4] = {0, 0, 0, 0}, serialOff = 0, waits = 0, triggers = 0;
  for (int i = 0; i < g_iters; ++i) {
    const int form = i % 4;
    ++forms[form];
    const uint32_t salt = hash32(uint32_t(i) + 31010u);
    const bool pss = !irregular(i, 3101, 7);
    serialOff += pss ? 0 : 1;
    const int gds = i % 3 == 1 ? 1 : 0;
    waits += gds;
    const int trigger = i % 5 != 4 ? 1 : 0;
    triggers += trigger;
    if (form == 3) CK(cudaStreamSynchronize(S));  // the step starts on an idle S
    // T: after the previous step's S work (it read b and wrote d), produce b.
    if (i > 0) CK(cudaStreamWaitEvent(T, eS, 0));
    pdlProduce<<<kWGrid, kBlock, 0, T>>>(B, D, n, salt, trigger, kPdlSpin);
    CKL();
    for (int k = 0; k < n; ++k) pdlProduceAt(hB.data(), hD.data(), n, salt, k);
    CK(cudaEventRecord(eT, T));
    auto k1 = [&] {
      pdlK1<<<kWGrid, kBlock, 0, S>>>(A, D, n, salt ^ 1u);
      CKL();
      for (int k = 0; k < n; ++k) pdlK1At(hA.data(), hD.data(), n, salt ^ 1u, k);
    };
    auto dep = [&] {
      pssLaunch(pss, pdlDep, C, static_cast<const uint32_t*>(B), n, salt ^ 2u, gds);
      for (int k = 0; k < n; ++k) pdlDepAt(hC.data(), hB.data(), n, salt ^ 2u, k);
    };
    switch (form) {
      case 0:  // kernel, wait, dependent
        k1();
        CK(cudaStreamWaitEvent(S, eT, 0));
        dep();
        break;
      case 1:  // wait, kernel, dependent
        CK(cudaStreamWaitEvent(S, eT, 0));
        k1();
        dep();
        break;
      case 2:  // kernel, a dependent that triggers at once, wait, dependent
        k1();
        pssLaunch(pss, pdlSide, E, n, salt ^ 3u);
        for (int k = 0; k < n; ++k) pdlSideAt(hE.data(), salt ^ 3u, k);
        CK(cudaStreamWaitEvent(S, eT, 0));
        dep();
        break;
      default:  // (after a synchronize) wait, dependent, kernel
        CK(cudaStreamWaitEvent(S, eT, 0));
        dep();
        k1();
        break;
    }
    pdlK3<<<kWGrid, kBlock, 0, S>>>(D, A, C, n, salt ^ 4u);
    CKL();
    for (int k = 0; k < n; ++k) pdlK3At(hD.data(), hA.data(), hC.data(), n, salt ^ 4u, k);
    CK(cudaEventRecord(eS, S));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("pcj_a", i, A, hA);
      checkDev("pcj_b", i, B, hB);
      checkDev("pcj_c", i, C, hC);
      checkDev("pcj_d", i, D, hD);
      checkDev("pcj_e", i, E, hE);
    }
  }
  std::printf("pdl_cross_join: forms %d %d %d %d, serialization off %d, waits in the dependent %d, early triggers %d\n",
              forms[0], forms[1], forms[2], forms[3], serialOff, waits, triggers);
  CK(cudaDeviceSynchronize());
}

// ================================================================ holes_in_windows

// Block b of the hole kernel (grid 1 to 3) rewrites words [b * kL, (b + 1) * kL) of w.
__host__ __device__ inline void holeGridAt(uint32_t* w, const uint32_t* src, uint32_t salt, int b, int t) {
  w[b * kL + t] = rotl(w[b * kL + t], 3) ^ (src[(t * 5 + b) % kL] + salt * uint32_t(b + 1));
}
__global__ void holeGrid(uint32_t* w, const uint32_t* src, uint32_t salt) {
  holeGridAt(w, src, salt, int(blockIdx.x), int(threadIdx.x));
}

// What a tool could get wrong: four ops that change every step (a grid, a
// memset size, a copy size, a kernel handle) sit inside or at the edges of
// fork/join windows of an otherwise repeating step. A tool that leaves them
// eager between graphs of the rest splits a window: the branch's earlier
// work goes into the graph before the hole, its later work and the join into
// the graph after. The eager hole must run after the first part of its own
// branch and before the second; in the second half of the run the main
// stream is the legacy stream and the side streams are blocking, so the
// implicit synchronization orders them too.
void holesInWindows() {
  cudaStream_t nb[3] = {nonBlockingStream(), nonBlockingStream(), nonBlockingStream()};
  cudaStream_t bl[2] = {blockingStream(), blockingStream()};
  cudaEvent_t eF1 = untimedEvent(), eJ1 = untimedEvent(), eF2 = untimedEvent(), eJ2 = untimedEvent();
  // m0..m3: the main stream's; p0, p1: P's; q0, q1: Q's; sc: the memset's; w: the grid hole's (3 blocks).
  BufSet m(4, 3111), p(2, 3121), q(2, 3131);
  uint32_t* sc = deviceBuffer(3141, kL);
  std::vector<uint32_t> hSc = patternWords(3141, kL);
  uint32_t* w = deviceBuffer(3142, 3 * kL);
  std::vector<uint32_t> hW = patternWords(3142, 3 * kL);
  CUfunction fnB = nullptr;
  CK(cudaGetFuncBySymbol(&fnB, reinterpret_cast<const void*>(opK<1>)));
  preload(opK<0>);
  preload(opK<1>);
  preload(opK<2>);
  preload(holeGrid);
  CK(cudaDeviceSynchronize());
  const int half = g_iters / 2;
  int grids[3] = {0, 0, 0}, byFunction = 0;
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    if (i == half) CK(cudaDeviceSynchronize());  // the streams change kind
    cudaStream_t M = i < half ? nb[0] : nullptr;
    cudaStream_t P = i < half ? nb[1] : bl[0];
    cudaStream_t Q = i < half ? nb[2] : bl[1];
    const uint32_t salt = hash32(uint32_t(i) + 31100u);
    // M alone: 40 launches over m0..m3 (the step has ~140 ops: room for four holes).
    scriptOps(M, m, 40, 3111, salt, {0, 1, 2, 3}, {0, 1, 2, 3});
    // Window 1: P forks; M keeps to m0..m2, P reads m3 (M leaves it alone).
    CK(cudaEventRecord(eF1, M));
    CK(cudaStreamWaitEvent(P, eF1, 0));
    runOp(0, P, p.d[0], m.d[3], salt ^ 0x11u, p.h[0], m.h[3]);
    scriptOps(P, p, 5, 3112, salt, {0, 1}, {0, 1});
    scriptOps(M, m, 8, 3113, salt, {0, 1, 2}, {0, 1, 2});
    {  // hole 1: a grid that cycles 1, 2, 3 (different every step), on P
      const int g = 1 + i % 3;
      ++grids[g - 1];
      holeGrid<<<g, kL, 0, P>>>(w, p.d[1], salt ^ 0x22u);
      CKL();
      for (int b = 0; b < g; ++b)
        for (int t = 0; t < kL; ++t) holeGridAt(hW.data(), p.h[1].data(), salt ^ 0x22u, b, t);
    }
    // P reads what the hole wrote (all three blocks' parts, written or not).
    for (int b = 0; b < 3; ++b) {
      runOp(b, P, p.d[b % 2], w + b * kL, salt + uint32_t(b), p.h[b % 2],
            std::vector<uint32_t>(hW.begin() + b * kL, hW.begin() + (b + 1) * kL));
    }
    scriptOps(M, m, 8, 3114, salt, {0, 1, 2}, {0, 1, 2});
    scriptOps(P, p, 3, 3115, salt, {0, 1}, {0, 1});
    CK(cudaEventRecord(eJ1, P));
    CK(cudaStreamWaitEvent(M, eJ1, 0));
    runOp(1, M, m.d[3], p.d[1], salt ^ 0x33u, m.h[3], p.h[1]);
    scriptOps(M, m, 12, 3116, salt, {0, 1, 2, 3}, {0, 1, 2, 3});
    {  // hole 2: a memset whose size changes every step, on M
      const size_t bytes = 4 * size_t(1 + (i * 53) % 101);
      const int value = (i * 7 + 1) & 0xff;
      CK(cudaMemsetAsync(sc, value, bytes, M));
      std::memset(hSc.data(), value, bytes);
    }
    runOp(2, M, m.d[2], sc, salt ^ 0x44u, m.h[2], hSc);
    scriptOps(M, m, 8, 3117, salt, {0, 1, 2, 3}, {0, 1, 2, 3});
    // Window 2: Q forks; its first op is hole 3, a copy whose size changes
    // every step, from m1 (M leaves m1 alone until the join).
    CK(cudaEventRecord(eF2, M));
    CK(cudaStreamWaitEvent(Q, eF2, 0));
    {
      const size_t bytes = 4 * size_t(1 + (i * 37) % 97);
      const size_t dstOff = size_t(i * 13) % 8;  // words
      const cudaError_t r = keep(cudaMemcpyAsync(q.d[0] + dstOff, m.d[1], bytes, cudaMemcpyDeviceToDevice, Q));
      addCode(codes, int(r));
      if (r == cudaSuccess) std::memcpy(bytesOf(q.h[0]) + dstOff * 4, m.h[1].data(), bytes);
    }
    scriptOps(Q, q, 8, 3118, salt, {0, 1}, {0, 1});
    scriptOps(M, m, 10, 3119, salt, {0, 2, 3}, {0, 2, 3});
    CK(cudaEventRecord(eJ2, Q));
    CK(cudaStreamWaitEvent(M, eJ2, 0));
    // Hole 4: right after the join, one kernel through two handles in turn.
    {
      uint32_t* dst = m.d[1];
      const uint32_t* src = q.d[1];
      int nn = kL;
      uint32_t sl = salt ^ 0x55u;
      if (i % 2 == 0) {
        opK<1><<<1, kL, 0, M>>>(dst, src, nn, sl);
        CKL();
      } else {
        void* params[] = {&dst, &src, &nn, &sl};
        CKD(cuLaunchKernel(fnB, 1, 1, 1, kL, 1, 1, 0, cu(M), params, nullptr));
        ++byFunction;
      }
      for (int k = 0; k < kL; ++k) orderedOpAt(1, m.h[1].data(), q.h[1].data(), kL, sl, k);
    }
    runOp(0, M, m.d[0], q.d[0], salt ^ 0x66u, m.h[0], q.h[0]);
    scriptOps(M, m, 16, 3120, salt, {0, 1, 2, 3}, {0, 1, 2, 3});
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      m.check("hiw_m", i);
      p.check("hiw_p", i);
      q.check("hiw_q", i);
      checkDev("hiw_w", i, w, hW);
      checkDev("hiw_sc", i, sc, hSc);
      print("hiw_codes", i, codes.h);
    }
  }
  std::printf("holes_in_windows: grids 1/2/3 %d %d %d, launches through the CUfunction %d\n", grids[0], grids[1],
              grids[2], byFunction);
  CK(cudaDeviceSynchronize());
}

// ================================================================ recurring_stretch

constexpr int kEvalBlocks = 24;

__host__ __device__ inline void evalAt(uint32_t* ev, const uint32_t* src, uint32_t salt, int b, int t) {
  ev[b * kL + t] = rotl(ev[b * kL + t], 7) + (src[(t * 3 + b) % kL] ^ salt);
}
__global__ void evalK(uint32_t* ev, const uint32_t* src, uint32_t salt) {
  evalAt(ev, src, salt, int(blockIdx.x), int(threadIdx.x));
}

// What a tool could get wrong: the training stretch repeats every step, but
// the eval pass after it has shapes drawn anew every time, so the step never
// repeats: a tool that builds sequences recurring between other work builds
// the stretch at its third sighting and replays it later. Its three events are
// created for each stretch and destroyed after their last use; the eval's wait
// on the stretch's output event must bind to this stretch's record (a graph's
// event node set to the new handle), and the next stretch must wait for the
// eval through a long-lived event recorded by eager work.
void recurringStretch() {
  cudaStream_t M = nonBlockingStream(), A = nonBlockingStream(), R = nonBlockingStream();
  cudaEvent_t eR = untimedEvent();
  std::vector<BufSet> sets;
  for (int k = 0; k < 3; ++k) sets.emplace_back(3, uint32_t(3150 + 10 * k));
  BufSet a(2, 3190);
  uint32_t* ev = deviceBuffer(3195, kEvalBlocks * kL);
  std::vector<uint32_t> hEv = patternWords(3195, kEvalBlocks * kL);
  preload(opK<0>);
  preload(opK<1>);
  preload(opK<2>);
  preload(evalK);
  CK(cudaDeviceSynchronize());
  int variants = 0, evalKernels = 0, evalMemsets = 0;
  for (int i = 0; i < g_iters; ++i) {
    BufSet& t = sets[size_t(i % 3)];
    const uint32_t salt = hash32(uint32_t(i) + 31500u);
    const bool variant = irregular(i, 3151, 11);
    variants += variant ? 1 : 0;
    cudaEvent_t f1 = untimedEvent(), j1 = untimedEvent(), out = untimedEvent();
    // The stretch.
    if (i > 0) CK(cudaStreamWaitEvent(M, eR, 0));  // the previous eval read a set
    scriptOps(M, t, 16, 3152, salt, {0, 1, 2}, {0, 1, 2});
    CK(cudaEventRecord(f1, M));
    CK(cudaStreamWaitEvent(A, f1, 0));
    runOp(0, A, a.d[0], t.d[0], salt ^ 0x10u, a.h[0], t.h[0]);
    scriptOps(A, a, 8, 3153, salt, {0, 1}, {0, 1});
    scriptOps(M, t, 10, 3154, salt, {1, 2}, {1, 2});
    runOp(variant ? 2 : 0, M, t.d[1], t.d[2], salt ^ 0x20u, t.h[1], t.h[2]);
    scriptOps(M, t, 6, 3155, salt, {1, 2}, {1, 2});
    CK(cudaEventRecord(j1, A));
    CK(cudaStreamWaitEvent(M, j1, 0));
    runOp(1, M, t.d[0], a.d[1], salt ^ 0x30u, t.h[0], a.h[1]);
    scriptOps(M, t, 14, 3156, salt, {0, 1, 2}, {0, 1, 2});
    CK(cudaEventRecord(out, M));
    // The eval pass: shapes from a host RNG.
    CK(cudaStreamWaitEvent(R, out, 0));
    const uint32_t h = hash32(uint32_t(i) * 0x27d4eb2fu + 3157u);
    const int ne = 2 + int(h % 6);
    for (int e = 0; e < ne; ++e) {
      const uint32_t he = hash32(h + uint32_t(e) * 0x9e3779b9u);
      const int g = 1 + int(he % kEvalBlocks);
      const int src = int((he >> 8) % 3);
      const uint32_t es = hash32(he ^ salt);
      evalK<<<g, kL, 0, R>>>(ev, t.d[size_t(src)], es);
      CKL();
      for (int b = 0; b < g; ++b)
        for (int tt = 0; tt < kL; ++tt) evalAt(hEv.data(), t.h[size_t(src)].data(), es, b, tt);
      ++evalKernels;
      if ((he >> 16) % 4 == 0) {
        const size_t words = 1 + (he >> 20) % 700;
        const size_t off = (he >> 3) % (size_t(kEvalBlocks * kL) - words);
        const int value = int(he >> 24);
        CK(cudaMemsetAsync(ev + off, value, words * 4, R));
        std::memset(hEv.data() + off, value, words * 4);
        ++evalMemsets;
      }
    }
    CK(cudaEventRecord(eR, R));
    CK(cudaEventDestroy(f1));
    CK(cudaEventDestroy(j1));
    CK(cudaEventDestroy(out));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      sets[0].check("rs_t0_", i);
      sets[1].check("rs_t1_", i);
      sets[2].check("rs_t2_", i);
      a.check("rs_a", i);
      checkDev("rs_ev", i, ev, hEv);
    }
  }
  std::printf("recurring_stretch: %d stretches with a launch replaced, %d eval kernels, %d eval memsets\n", variants,
              evalKernels, evalMemsets);
  CK(cudaDeviceSynchronize());
}

// ================================================================ query_steered_paths

// g: w[k] from in; f: out[k] from w; fused: f(g(in)) without w. Grid-stride,
// so any grid gives the same values.
__host__ __device__ inline uint32_t qGVal(const uint32_t* in, int n, uint32_t salt, int k) {
  return hash32(in[(k * 3 + 1) % n] ^ salt) + in[k];
}
__host__ __device__ inline uint32_t qFVal(uint32_t out, uint32_t w, uint32_t salt) { return rotl(out, 5) ^ (w + salt); }
__global__ void qG(uint32_t* w, const uint32_t* in, int n, uint32_t salt) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) w[k] = qGVal(in, n, salt, k);
}
__global__ void qF(uint32_t* out, const uint32_t* w, int n, uint32_t salt) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    out[k] = qFVal(out[k], w[(k * 7 + 2) % n], salt);
}
__global__ void qFused(uint32_t* out, const uint32_t* in, int n, uint32_t salt) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
    out[k] = qFVal(out[k], qGVal(in, n, salt, (k * 7 + 2) % n), salt);
}
__global__ void qPre(uint32_t* x, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) x[k] = rotl(x[k], 11) + hash32(uint32_t(k) ^ salt);
}

// A library's per-stream state: two workspaces and the event of its last call.
struct QLib {
  cudaStream_t s = nullptr;
  uint32_t* ws[2] = {nullptr, nullptr};
  cudaEvent_t last = nullptr;
  bool recorded = false;
  int fused = 0, split = 0, captured = 0, reused = 0;
};

// out = f(g(in)), by a path chosen from what the driver (or a tool) says
// about the stream: the values do not depend on the path.
void qLibOp(QLib& L, const uint32_t* in, uint32_t* out, uint32_t salt, const std::vector<uint32_t>& hIn,
            std::vector<uint32_t>& hOut) {
  const int n = kW;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  CK(cudaStreamIsCapturing(L.s, &st));
  if (st == cudaStreamCaptureStatusActive) {  // capture-safe: no query, no record
    qG<<<16, kBlock, 0, L.s>>>(L.ws[0], in, n, salt);
    qF<<<16, kBlock, 0, L.s>>>(out, L.ws[0], n, salt);
    CKL();
    ++L.captured;
  } else {
    cudaStreamCaptureStatus st2 = cudaStreamCaptureStatusActive;
    unsigned long long id = 0;
    CK(cudaStreamGetCaptureInfo(L.s, &st2, &id));
    if (st2 != cudaStreamCaptureStatusNone || st != cudaStreamCaptureStatusNone) {
      std::printf("MISMATCH query_steered_paths: a stream that is not capturing says %d / %d\n", int(st), int(st2));
      std::exit(1);
    }
    const cudaError_t q = cudaStreamQuery(L.s);
    if (q != cudaSuccess && q != cudaErrorNotReady) CK(q);
    if (q == cudaSuccess) {  // idle: the fused kernel
      qFused<<<8, kBlock, 0, L.s>>>(out, in, n, salt);
      CKL();
      ++L.fused;
    } else {  // busy: through a workspace (either is safe: one stream)
      int wsi = 1;
      if (L.recorded) {
        const cudaError_t e = cudaEventQuery(L.last);
        if (e != cudaSuccess && e != cudaErrorNotReady) CK(e);
        if (e == cudaSuccess) wsi = 0;
      }
      L.reused += wsi == 0 ? 1 : 0;
      qG<<<16, kBlock, 0, L.s>>>(L.ws[wsi], in, n, salt);
      qF<<<16, kBlock, 0, L.s>>>(out, L.ws[wsi], n, salt);
      CKL();
      ++L.split;
    }
    CK(cudaEventRecord(L.last, L.s));
    L.recorded = true;
  }
  for (int k = 0; k < n; ++k) hOut[size_t(k)] = qFVal(hOut[size_t(k)], qGVal(hIn.data(), n, salt, (k * 7 + 2) % n), salt);
}

// What a tool could get wrong: the op sequence is the library's choice from
// the answers to cudaStreamIsCapturing, cudaStreamGetCaptureInfo,
// cudaStreamQuery and cudaEventQuery (timing decides them eagerly too, and a
// tool that holds work changes them); every choice computes the same values.
// Every 16th step the program captures one call in relaxed mode, where the
// library must see the capture the driver sees.
void querySteeredPaths() {
  const int n = kW;
  QLib L1, L2;
  L1.s = nonBlockingStream();
  L2.s = nonBlockingStream();
  for (QLib* L : {&L1, &L2}) {
    L->ws[0] = deviceBuffer(3200, n);
    L->ws[1] = deviceBuffer(3201, n);
    L->last = untimedEvent();
  }
  cudaEvent_t e1 = untimedEvent(), e2 = untimedEvent();
  uint32_t *in1 = deviceBuffer(3202, n), *out1 = deviceBuffer(3203, n), *out2 = deviceBuffer(3204, n);
  uint32_t* out3 = deviceBuffer(3205, n);
  std::vector<uint32_t> hIn1 = patternWords(3202, n), hOut1 = patternWords(3203, n), hOut2 = patternWords(3204, n);
  std::vector<uint32_t> hOut3 = patternWords(3205, n);
  preload(qG);
  preload(qF);
  preload(qFused);
  preload(qPre);
  CK(cudaDeviceSynchronize());
  int captures = 0, idleAtEnd = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 32000u);
    if (i > 0) CK(cudaStreamWaitEvent(L1.s, e2, 0));  // S2 read out1 last step
    qPre<<<kWGrid, kBlock, 0, L1.s>>>(in1, n, salt);
    CKL();
    for (int k = 0; k < n; ++k) hIn1[size_t(k)] = rotl(hIn1[size_t(k)], 11) + hash32(uint32_t(k) ^ salt);
    qLibOp(L1, in1, out1, salt ^ 1u, hIn1, hOut1);
    CK(cudaEventRecord(e1, L1.s));
    CK(cudaStreamWaitEvent(L2.s, e1, 0));
    if (i % 16 == 15) {  // the program's capture of one call
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      CK(cudaStreamBeginCapture(L2.s, cudaStreamCaptureModeRelaxed));
      qLibOp(L2, out1, out2, salt ^ 2u, hOut1, hOut2);
      CK(cudaStreamEndCapture(L2.s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      CK(cudaGraphLaunch(ge, L2.s));
      CK(cudaGraphExecDestroy(ge));
      CK(cudaGraphDestroy(g));
      ++captures;
    } else {
      qLibOp(L2, out1, out2, salt ^ 2u, hOut1, hOut2);
    }
    qLibOp(L1, in1, out3, salt ^ 3u, hIn1, hOut3);
    CK(cudaEventRecord(e2, L2.s));
    CK(cudaStreamWaitEvent(L1.s, e2, 0));
    qLibOp(L1, out2, in1, salt ^ 4u, hOut2, hIn1);
    {  // a query for a log line only (stderr)
      const cudaError_t q = cudaStreamQuery(L1.s);
      if (q != cudaSuccess && q != cudaErrorNotReady) CK(q);
      idleAtEnd += q == cudaSuccess ? 1 : 0;
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("qsp_in1", i, in1, hIn1);
      checkDev("qsp_out1", i, out1, hOut1);
      checkDev("qsp_out2", i, out2, hOut2);
      checkDev("qsp_out3", i, out3, hOut3);
    }
  }
  std::printf("query_steered_paths: %d program captures, %d calls inside them\n", captures, L2.captured);
  std::fprintf(stderr,
               "query_steered_paths (timing, not compared): S1 fused %d split %d reused %d; S2 fused %d split %d "
               "reused %d; S1 idle at the step's end %d\n",
               L1.fused, L1.split, L1.reused, L2.fused, L2.split, L2.reused, idleAtEnd);
  CK(cudaDeviceSynchronize());
}

// ================================================================ reload_variants

// trapInc (trap_common.cuh, kIncPtx) and a variant of it with other
// constants under the same name: rotate by 5, read src[(k * 13 + 7) % n].
std::string incPtx(int variant) {
  std::string ptx = kIncPtx;
  if (variant == 0) return ptx;
  const std::pair<const char*, const char*> edits[] = {
      {"shf.l.wrap.b32 \t%r8, %r7, %r7, 3;", "shf.l.wrap.b32 \t%r8, %r7, %r7, 5;"},
      {"mad.lo.s32 \t%r9, %r1, 11, 5;", "mad.lo.s32 \t%r9, %r1, 13, 7;"},
  };
  for (const auto& [from, to] : edits) {
    const size_t pos = ptx.find(from);
    if (pos == std::string::npos) {
      std::fprintf(stderr, "traps_r31: PTX edit '%s' not found\n", from);
      std::exit(1);
    }
    ptx.replace(pos, std::strlen(from), to);
  }
  return ptx;
}
void incHost(int variant, std::vector<uint32_t>& dst, const std::vector<uint32_t>& src, uint32_t v) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k) {
    if (variant == 0)
      dst[size_t(k)] = rotl(dst[size_t(k)], 3) + src[size_t((k * 11 + 5) % n)] + v;
    else
      dst[size_t(k)] = rotl(dst[size_t(k)], 5) + src[size_t((k * 13 + 7) % n)] + v;
  }
}

// One load of trapInc's code: a module, or a library (its CUkernel and its
// function in the current context).
struct IncLoad {
  int variant = 0;
  bool library = false;
  CUmodule mod = nullptr;
  CUlibrary lib = nullptr;
  CUfunction first = nullptr, second = nullptr;
  int stepsLeft = 0;
};

// What a tool could get wrong: every few steps the code behind trapInc is
// unloaded and the other variant (or the same) loaded, as a module or a
// library; the driver may hand back the handles of the code just unloaded.
// A graph or anything learned for a handle must not outlive its code; the
// runtime kernels and the memset around it stay the same.
void reloadVariants() {
  const int n = kW;
  const std::string ptx[2] = {incPtx(0), incPtx(1)};
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(3301, n), *b = deviceBuffer(3302, n), *c = deviceBuffer(3303, n);
  std::vector<uint32_t> hA = patternWords(3301, n), hB = patternWords(3302, n), hC = patternWords(3303, n);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  IncLoad cur;
  int loads = 0, libraries = 0, byVariant[2] = {0, 0};
  auto unload = [&] {
    CK(cudaStreamSynchronize(s));
    if (cur.library)
      CKD(cuLibraryUnload(cur.lib));
    else
      CKD(cuModuleUnload(cur.mod));
  };
  auto launchInc = [&](CUfunction f, uint32_t* dst, const uint32_t* src, uint32_t v) {
    int nn = n;
    void* params[] = {&dst, &src, &nn, &v};
    CKD(cuLaunchKernel(f, kWGrid, 1, 1, kBlock, 1, 1, 0, cu(s), params, nullptr));
  };
  for (int i = 0; i < g_iters; ++i) {
    if (cur.stepsLeft == 0) {
      if (loads > 0) unload();
      const uint32_t h = hash32(uint32_t(loads) * 0x9e3779b9u + 3304u);
      cur = IncLoad();
      cur.variant = int(h & 1u);
      cur.library = ((h >> 1) & 1u) != 0;
      cur.stepsLeft = 1 + int((h >> 2) % 5u);
      const std::string& code = ptx[cur.variant];
      if (cur.library) {
        CKD(cuLibraryLoadData(&cur.lib, code.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        CUkernel k = nullptr;
        CKD(cuLibraryGetKernel(&k, cur.lib, "trapInc"));
        cur.first = reinterpret_cast<CUfunction>(k);
        CKD(cuKernelGetFunction(&cur.second, k));
        ++libraries;
      } else {
        CKD(cuModuleLoadData(&cur.mod, code.c_str()));
        CKD(cuModuleGetFunction(&cur.first, cur.mod, "trapInc"));
        cur.second = cur.first;
      }
      ++loads;
      ++byVariant[cur.variant];
    }
    --cur.stepsLeft;
    const uint32_t salt = hash32(uint32_t(i) + 33000u);
    mix<<<kWGrid, kBlock, 0, s>>>(a, b, n, salt);
    CKL();
    mixHost(hA, hB, n, salt);
    launchInc(cur.first, b, a, salt ^ 1u);
    incHost(cur.variant, hB, hA, salt ^ 1u);
    {
      const int off = int(hash32(salt) % uint32_t(n - 128));
      const int value = int(salt >> 24);
      CK(cudaMemsetAsync(c + off, value, 512, s));
      std::memset(hC.data() + off, value, 512);
    }
    mix2<<<kWGrid, kBlock, 0, s>>>(c, a, b, n, salt ^ 2u);
    CKL();
    mix2Host(hC, hA, hB, n, salt ^ 2u);
    launchInc(cur.second, c, b, salt ^ 3u);
    incHost(cur.variant, hC, hB, salt ^ 3u);
    mix<<<kWGrid, kBlock, 0, s>>>(a, c, n, salt ^ 4u);
    CKL();
    mixHost(hA, hC, n, salt ^ 4u);
    mix2<<<kWGrid, kBlock, 0, s>>>(b, c, a, n, salt ^ 5u);
    CKL();
    mix2Host(hB, hC, hA, n, salt ^ 5u);
    mix<<<kWGrid, kBlock, 0, s>>>(c, b, n, salt ^ 6u);
    CKL();
    mixHost(hC, hB, n, salt ^ 6u);
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      checkDev("rv_a", i, a, hA);
      checkDev("rv_b", i, b, hB);
      checkDev("rv_c", i, c, hC);
    }
  }
  unload();
  std::printf("reload_variants: %d loads (%d libraries), variants %d %d\n", loads, libraries, byVariant[0],
              byVariant[1]);
}

// ================================================================ monitor_barriers

__host__ __device__ inline void scFillAt(uint32_t* sc, const uint32_t* x, int words, uint32_t salt, int k) {
  sc[k] ^= x[k % kW] + salt + uint32_t(k / kW);
  (void)words;
}
__global__ void scFill(uint32_t* sc, const uint32_t* x, int words, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < words) scFillAt(sc, x, words, salt, k);
}
__host__ __device__ inline void scFoldAt(uint32_t* x, const uint32_t* sc, int words, uint32_t salt, int k) {
  x[k] = rotl(x[k], 3) + (sc[(k * 3 + 1) % words] ^ sc[(k + kW) % words] ^ salt);
}
__global__ void scFold(uint32_t* x, const uint32_t* sc, int words, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < kW) scFoldAt(x, sc, words, salt, k);
}

// What a tool could get wrong: a second thread, with no coordination with the
// main thread, synchronizes the device, a stream and an event, queries a
// stream and an event, reads a pool attribute (which issues what a tool holds)
// and the memory info, at any moment: in the middle of the main thread's
// matching, while a graph is built or queued for launch, while a stream-ordered
// free is deferred, during an idle flush (the main thread sleeps 12 ms at a
// moving place on irregular steps). None of it changes a value the program
// prints.
void monitorBarriers() {
  const int n = kW;
  cudaStream_t S1 = nonBlockingStream(), S2 = nonBlockingStream();
  cudaEvent_t e1 = untimedEvent(), e2 = untimedEvent(), eStep = untimedEvent();
  uint32_t *x = deviceBuffer(3401, n), *y = deviceBuffer(3402, n), *z = deviceBuffer(3403, n);
  std::vector<uint32_t> hX = patternWords(3401, n), hY = patternWords(3402, n), hZ = patternWords(3403, n);
  const int dev = currentDevice();
  cudaMemPool_t pool = nullptr;
  CK(cudaDeviceGetDefaultMemPool(&pool, dev));
  CUcontext primary = nullptr;
  CKD(cuCtxGetCurrent(&primary));
  preload(scFill);
  preload(scFold);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  std::atomic<bool> stop{false};
  std::atomic<int> calls[8];
  std::atomic<int> notReady{0};
  for (auto& c : calls) c.store(0);
  std::thread monitor([&] {
    CKD(cuCtxSetCurrent(primary));
    CK(cudaSetDevice(dev));
    for (uint32_t k = 0; !stop.load(std::memory_order_acquire); ++k) {
      const int what = int(k % 8);
      switch (what) {
        case 0:
          CK(cudaDeviceSynchronize());
          break;
        case 1:
          CK(cudaStreamSynchronize(S1));
          break;
        case 2:
          CK(cudaEventSynchronize(eStep));
          break;
        case 3: {
          const cudaError_t r = cudaStreamQuery(S2);
          if (r != cudaSuccess && r != cudaErrorNotReady) CK(r);
          notReady += r == cudaErrorNotReady ? 1 : 0;
          break;
        }
        case 4: {
          const cudaError_t r = cudaEventQuery(eStep);
          if (r != cudaSuccess && r != cudaErrorNotReady) CK(r);
          notReady += r == cudaErrorNotReady ? 1 : 0;
          break;
        }
        case 5: {
          cuuint64_t used = 0;
          CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
          break;
        }
        case 6:
          CKD(cuCtxSynchronize());
          break;
        default: {
          size_t freeB = 0, totalB = 0;
          CK(cudaMemGetInfo(&freeB, &totalB));
          break;
        }
      }
      ++calls[what];
      std::this_thread::sleep_for(std::chrono::microseconds(50 + (k * 37) % 250));
    }
  });
  int sleeps = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 34000u);
    const int words = kW * (1 + i % 3);
    const int sleepAt = irregular(i, 3401, 9) ? i % 4 : -1;
    auto maybeSleep = [&](int place) {
      if (sleepAt != place) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(12));
      ++sleeps;
    };
    uint32_t* sc = nullptr;
    CK(cudaMallocAsync(reinterpret_cast<void**>(&sc), size_t(words) * 4, S1));
    const int value = int(salt & 0xffu);
    CK(cudaMemsetAsync(sc, value, size_t(words) * 4, S1));
    std::vector<uint32_t> hSc(static_cast<size_t>(words));
    std::memset(hSc.data(), value, size_t(words) * 4);
    maybeSleep(0);
    scFill<<<words / kBlock, kBlock, 0, S1>>>(sc, x, words, salt);
    CKL();
    for (int k = 0; k < words; ++k) scFillAt(hSc.data(), hX.data(), words, salt, k);
    scFold<<<kWGrid, kBlock, 0, S1>>>(x, sc, words, salt ^ 1u);
    CKL();
    for (int k = 0; k < n; ++k) scFoldAt(hX.data(), hSc.data(), words, salt ^ 1u, k);
    CK(cudaEventRecord(e1, S1));
    CK(cudaStreamWaitEvent(S2, e1, 0));
    for (int r = 0; r < 4; ++r) {  // S2: y from x; S1 meanwhile: z from the scratch block
      mix<<<kWGrid, kBlock, 0, S2>>>(y, x, n, salt + uint32_t(r));
      CKL();
      mixHost(hY, hX, n, salt + uint32_t(r));
      mix<<<kWGrid, kBlock, 0, S1>>>(z, sc, n, salt + uint32_t(r) * 3u);
      CKL();
      std::vector<uint32_t> hScHead(hSc.begin(), hSc.begin() + n);
      mixHost(hZ, hScHead, n, salt + uint32_t(r) * 3u);
      if (r == 1) maybeSleep(1);
    }
    CK(cudaEventRecord(e2, S2));
    CK(cudaStreamWaitEvent(S1, e2, 0));
    maybeSleep(2);
    mix2<<<kWGrid, kBlock, 0, S1>>>(x, y, z, n, salt ^ 2u);
    CKL();
    mix2Host(hX, hY, hZ, n, salt ^ 2u);
    CK(cudaFreeAsync(sc, S1));
    CK(cudaEventRecord(eStep, S1));
    maybeSleep(3);
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("mb_x", i, x, hX);
      checkDev("mb_y", i, y, hY);
      checkDev("mb_z", i, z, hZ);
    }
  }
  stop.store(true, std::memory_order_release);
  monitor.join();
  CK(cudaDeviceSynchronize());
  std::printf("monitor_barriers: %d sleeps in a step\n", sleeps);
  std::fprintf(stderr, "monitor_barriers (timing, not compared): monitor calls %d %d %d %d %d %d %d %d, not ready %d\n",
               calls[0].load(), calls[1].load(), calls[2].load(), calls[3].load(), calls[4].load(), calls[5].load(),
               calls[6].load(), calls[7].load(), notReady.load());
}

// ================================================================ epoch_workspace

struct WsHandle {
  uint32_t* p;
  uint32_t words;
  uint32_t epoch;
};
__device__ WsHandle g_ws;

__global__ void wsSet(uint32_t* p, uint32_t words, uint32_t epoch) {
  if (blockIdx.x == 0 && threadIdx.x == 0) g_ws = WsHandle{p, words, epoch};
}
__host__ __device__ inline void epStirAt(uint32_t* x, const uint32_t* y, int n, uint32_t salt, int k) {
  x[k] = rotl(x[k], 7) ^ (y[(k * 3 + 1) % n] + salt);
}
__global__ void epStir(uint32_t* x, const uint32_t* y, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) epStirAt(x, y, n, salt, k);
}
__host__ __device__ inline uint32_t wsSlot(uint32_t xv, uint32_t salt, uint32_t words) {
  return hash32(xv ^ salt) % words;
}
// Every element adds into a hashed slot of the workspace (integer sums: the
// order of the atomics does not matter).
__global__ void wsAccum(const uint32_t* x, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    const WsHandle h = g_ws;
    atomicAdd(&h.p[wsSlot(x[k], salt, h.words)], x[k] | 1u);
  }
}
__host__ __device__ inline void wsReadAt(uint32_t* y, const uint32_t* ws, uint32_t words, uint32_t epoch, uint32_t salt,
                                         int k) {
  y[k] = rotl(y[k], 3) ^ (ws[(uint32_t(k) * 5u + salt) % words] + epoch);
}
__global__ void wsRead(uint32_t* y, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    const WsHandle h = g_ws;
    wsReadAt(y, h.p, h.words, h.epoch, salt, k);
  }
}
__host__ __device__ inline void wsDrainAt(uint32_t* r, const uint32_t* ws, uint32_t words, int n, int k) {
  uint32_t s = 0;
  for (uint32_t j = uint32_t(k); j < words; j += uint32_t(n)) s += ws[j] * (j | 1u);
  r[k] = rotl(r[k], 1) + s;
}
__global__ void wsDrain(uint32_t* r, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    const WsHandle h = g_ws;
    wsDrainAt(r, h.p, h.words, n, k);
  }
}
__host__ __device__ inline void epMixAt(uint32_t* y, const uint32_t* sc, int n, uint32_t salt, int k) {
  y[k] = y[k] * 3u + (sc[(k * 5 + 7) % n] ^ salt);
}
__global__ void epMix(uint32_t* y, const uint32_t* sc, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) epMixAt(y, sc, n, salt, k);
}

// What a tool could get wrong: the workspace exists for one epoch of 4 to 8
// steps; its address reaches the kernels only through a device global that a
// one-thread kernel sets at the epoch's first step, which also carries the
// allocation, the memset (on another stream with an event, or on the main
// stream) and the wait: the first step is a variant of the others. The
// last step drains and frees it; the next epoch allocates another size at
// once. A per-step scratch block is allocated before or after the atomics in
// turn, in three sizes.
void epochWorkspace() {
  const int n = kW;
  cudaStream_t M = nonBlockingStream(), W = nonBlockingStream();
  cudaEvent_t eW = untimedEvent();
  uint32_t *x = deviceBuffer(3501, n), *y = deviceBuffer(3502, n), *r = deviceBuffer(3503, n);
  std::vector<uint32_t> hX = patternWords(3501, n), hY = patternWords(3502, n), hR = patternWords(3503, n);
  preload(wsSet);
  preload(epStir);
  preload(wsAccum);
  preload(wsRead);
  preload(wsDrain);
  preload(epMix);
  CK(cudaDeviceSynchronize());
  uint32_t* ws = nullptr;
  std::vector<uint32_t> hWs;
  int epoch = -1, epochLeft = 0, onW = 0, drains = 0;
  uint32_t words = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 35000u);
    if (epochLeft == 0) {  // a new epoch: its workspace, set up once
      ++epoch;
      epochLeft = 4 + int(hash32(uint32_t(epoch) + 3504u) % 5u);
      words = 256u * uint32_t(1 + (epoch * 3) % 7);
      const size_t bytes = size_t(words) * 4;
      if (epoch % 2 == 0) {
        CK(cudaMallocAsync(reinterpret_cast<void**>(&ws), bytes, W));
        CK(cudaMemsetAsync(ws, 0, bytes, W));
        CK(cudaEventRecord(eW, W));
        CK(cudaStreamWaitEvent(M, eW, 0));
        ++onW;
      } else {
        CK(cudaMallocAsync(reinterpret_cast<void**>(&ws), bytes, M));
        CK(cudaMemsetAsync(ws, 0, bytes, M));
      }
      wsSet<<<1, 32, 0, M>>>(ws, words, uint32_t(epoch));
      CKL();
      hWs.assign(words, 0u);
    }
    --epochLeft;
    const size_t scWords = size_t(n) * size_t(1 + i % 3);
    uint32_t* sc = nullptr;
    auto allocScratch = [&] { CK(cudaMallocAsync(reinterpret_cast<void**>(&sc), scWords * 4, M)); };
    if (i % 2 == 0) allocScratch();
    epStir<<<kWGrid, kBlock, 0, M>>>(x, y, n, salt);
    CKL();
    for (int k = 0; k < n; ++k) epStirAt(hX.data(), hY.data(), n, salt, k);
    wsAccum<<<kWGrid, kBlock, 0, M>>>(x, n, salt ^ 1u);
    CKL();
    for (int k = 0; k < n; ++k) hWs[wsSlot(hX[size_t(k)], salt ^ 1u, words)] += hX[size_t(k)] | 1u;
    if (i % 2 == 1) allocScratch();
    CK(cudaMemcpyAsync(sc + (scWords - size_t(n)), x, size_t(n) * 4, cudaMemcpyDeviceToDevice, M));
    epMix<<<kWGrid, kBlock, 0, M>>>(y, sc + (scWords - size_t(n)), n, salt ^ 2u);
    CKL();
    for (int k = 0; k < n; ++k) epMixAt(hY.data(), hX.data(), n, salt ^ 2u, k);
    wsRead<<<kWGrid, kBlock, 0, M>>>(y, n, salt ^ 3u);
    CKL();
    for (int k = 0; k < n; ++k) wsReadAt(hY.data(), hWs.data(), words, uint32_t(epoch), salt ^ 3u, k);
    CK(cudaFreeAsync(sc, M));
    const bool last = epochLeft == 0;
    if (at(i)) {  // before the drain: the workspace is still there
      CK(cudaDeviceSynchronize());
      checkDev("ew_x", i, x, hX);
      checkDev("ew_y", i, y, hY);
      checkDev("ew_ws", i, ws, hWs);
    }
    if (last) {
      wsDrain<<<kWGrid, kBlock, 0, M>>>(r, n);
      CKL();
      for (int k = 0; k < n; ++k) wsDrainAt(hR.data(), hWs.data(), words, n, k);
      CK(cudaFreeAsync(ws, M));
      ws = nullptr;
      ++drains;
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(M));
      checkDev("ew_r", i, r, hR);
    }
  }
  if (ws) CK(cudaFreeAsync(ws, M));
  CK(cudaDeviceSynchronize());
  std::printf("epoch_workspace: %d epochs (%d set up on the workspace stream), %d drained\n", epoch + 1, onW, drains);
}

// ================================================================ attr_epochs

constexpr int kBigWords = 700;
constexpr int kBigGrid = 8;
struct BigArg {
  uint32_t* out;
  uint32_t salt;
  uint32_t pad;
  uint32_t table[kBigWords];
};
static_assert(sizeof(BigArg) == 2816, "BigArg's size");

__host__ __device__ inline uint32_t bigSum(const uint32_t* table) {
  uint32_t s = 0;
  for (int j = 0; j < kBigWords; ++j) s += table[j] * uint32_t(2 * j + 1);
  return s;
}
__host__ __device__ inline uint32_t bigOut(uint32_t old, uint32_t sum, uint32_t salt, uint32_t nct, uint32_t rank, int b) {
  return rotl(old, 5) ^ (sum + salt + nct * 0x1000u + rank * 0x10u + uint32_t(b));
}
// Each block sums the table (by position) and records its cluster's size and
// its rank in it: a launch made with another cluster shape shows.
__global__ void bigAttrK(BigArg a) {
  __shared__ uint32_t acc;
  if (threadIdx.x == 0) acc = 0;
  __syncthreads();
  uint32_t s = 0;
  for (int j = int(threadIdx.x); j < kBigWords; j += int(blockDim.x)) s += a.table[j] * uint32_t(2 * j + 1);
  atomicAdd(&acc, s);
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t nct = 0, rank = 0;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nct));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const int b = int(blockIdx.x);
    a.out[b] = bigOut(a.out[b], acc, a.salt, nct, rank, b);
  }
}

// What a tool could get wrong: the step is the same launch of one kernel with
// a 2816-byte struct by value (three table words changing every step at
// hashed places, the output pointer every 2 steps), but its attribute list
// changes on its own schedules: the cluster shape every 6 steps, the priority
// every 4, the memory synchronization domain every 5, the order of the list
// and an ignored entry full of garbage every 9. A graph made under one list
// must not be replayed under another (the kernel sees its cluster shape), and
// the struct's changed words must reach the kernel where they are.
void attrEpochs() {
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nonBlockingStream();
  BufSet o(4, 3601);
  preload(bigAttrK);
  preload(opK<0>);
  preload(opK<1>);
  preload(opK<2>);
  CK(cudaDeviceSynchronize());
  BigArg arg;
  std::memset(&arg, 0, sizeof arg);
  for (int j = 0; j < kBigWords; ++j) arg.table[j] = hash32(uint32_t(j) + 3602u);
  static const unsigned kClusters[4] = {0, 1, 2, 4};  // 0: no cluster attribute
  int byCluster[4] = {0, 0, 0, 0}, reordered = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 36000u);
    for (int c = 0; c < 3; ++c) {
      const uint32_t h = hash32(salt + uint32_t(c) * 0x9e3779b9u);
      arg.table[h % kBigWords] = hash32(h);
    }
    const int oi = (i / 2) % 2;
    arg.out = o.d[size_t(oi)];
    arg.salt = salt;
    arg.pad = hash32(salt ^ 0xabcdu);  // garbage the kernel never reads
    const uint32_t sum = bigSum(arg.table);
    // The list.
    const int ci = (i / 6) % 4;
    const unsigned cx = kClusters[ci];
    ++byCluster[ci];
    const int prio = (i / 4) % 2 ? greatest : least;
    const bool remote = (i / 5) % 2 == 1;
    const bool reorder = (i / 9) % 2 == 1;
    reordered += reorder ? 1 : 0;
    std::vector<cudaLaunchAttribute> list;
    if (cx) {
      cudaLaunchAttribute a = {};
      a.id = cudaLaunchAttributeClusterDimension;
      a.val.clusterDim.x = cx;
      a.val.clusterDim.y = 1;
      a.val.clusterDim.z = 1;
      list.push_back(a);
    }
    {
      cudaLaunchAttribute a = {};
      a.id = cudaLaunchAttributePriority;
      a.val.priority = prio;
      list.push_back(a);
    }
    {
      cudaLaunchAttribute a = {};
      a.id = cudaLaunchAttributeMemSyncDomain;
      a.val.memSyncDomain = remote ? cudaLaunchMemSyncDomainRemote : cudaLaunchMemSyncDomainDefault;
      list.push_back(a);
    }
    if (reorder) {
      cudaLaunchAttribute a;
      uint32_t junk[sizeof(cudaLaunchAttribute) / 4];
      for (size_t w = 0; w < sizeof junk / 4; ++w) junk[w] = hash32(salt + uint32_t(w) * 77u);
      std::memcpy(&a, junk, sizeof a);
      a.id = cudaLaunchAttributeIgnore;
      list.push_back(a);
      std::reverse(list.begin(), list.end());
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kBigGrid);
    cfg.blockDim = dim3(64);
    cfg.stream = s;
    cfg.attrs = list.data();
    cfg.numAttrs = unsigned(list.size());
    void* args[] = {&arg};
    CK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(bigAttrK), args));
    const uint32_t nct = cx ? cx : 1u;
    for (int b = 0; b < kBigGrid; ++b) {
      uint32_t& v = o.h[size_t(oi)][size_t(b)];
      v = bigOut(v, sum, salt, nct, uint32_t(b) % nct, b);
    }
    std::memset(arg.table + (salt % 600u), 0x5a, 16);  // the struct scribbled after the call (and mirrored)
    // The same kernel, plain, into o2.
    BigArg plain = arg;
    plain.out = o.d[2];
    plain.salt = salt ^ 7u;
    bigAttrK<<<kBigGrid, 64, 0, s>>>(plain);
    CKL();
    {
      const uint32_t psum = bigSum(plain.table);
      for (int b = 0; b < kBigGrid; ++b) {
        uint32_t& v = o.h[2][size_t(b)];
        v = bigOut(v, psum, salt ^ 7u, 1u, 0u, b);
      }
    }
    scriptOps(s, o, 3, 3603, salt, {3}, {0, 1, 2});
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      o.check("ae_o", i);
    }
  }
  std::printf("attr_epochs: steps by cluster (none, 1, 2, 4) %d %d %d %d, reordered lists %d\n", byCluster[0],
              byCluster[1], byCluster[2], byCluster[3], reordered);
  CK(cudaStreamSynchronize(s));
}

// ================================================================ program_graph_alternate

__host__ __device__ inline void pgAAt(uint32_t* x, const uint32_t* y, int n, uint32_t salt, int k) {
  x[k] = rotl(x[k], 3) ^ (y[(k * 5 + 1) % n] + salt);
}
__host__ __device__ inline void pgBAt(uint32_t* y, const uint32_t* x, int n, uint32_t salt, int k) {
  y[k] = y[k] * 3u + (x[(k * 7 + 2) % n] ^ salt);
}
__global__ void pgA(uint32_t* x, const uint32_t* y, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) pgAAt(x, y, n, salt, k);
}
__global__ void pgB(uint32_t* y, const uint32_t* x, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) pgBAt(y, x, n, salt, k);
}

constexpr int kZWords = 256;

// What a tool could get wrong: the program does the same work (two kernels
// and a 32-bit memset) in turn through its own graph, whose nodes it updates
// every time, and eagerly with the same arguments; on some steps it updates
// the graph and takes the eager path with the very argument array it gave
// the update, then scribbles it; on irregular steps it updates the graph right
// after launching it (for later launches only). A tool sees the program's
// graph launch as one op it must issue in place, after what it holds, and the
// eager path as ops it may replay from graphs of its own with new values.
void programGraphAlternate() {
  const int n = kW;
  cudaStream_t S = nonBlockingStream(), T = nonBlockingStream();
  cudaEvent_t eS = untimedEvent(), eT = untimedEvent();
  uint32_t* X[2] = {deviceBuffer(3701, n), deviceBuffer(3702, n)};
  uint32_t* Y[2] = {deviceBuffer(3703, n), deviceBuffer(3704, n)};
  uint32_t *z = deviceBuffer(3705, kZWords), *u = deviceBuffer(3706, n), *v = deviceBuffer(3707, n);
  uint32_t* w = deviceBuffer(3708, n);
  std::vector<uint32_t> hX[2] = {patternWords(3701, n), patternWords(3702, n)};
  std::vector<uint32_t> hY[2] = {patternWords(3703, n), patternWords(3704, n)};
  std::vector<uint32_t> hZ = patternWords(3705, kZWords), hU = patternWords(3706, n), hV = patternWords(3707, n);
  std::vector<uint32_t> hW = patternWords(3708, n);
  preload(pgA);
  preload(pgB);
  preload(mix);
  preload(mix2);
  // The program's graph: A, then B, then a memset of z (explicit nodes).
  uint32_t* ax = X[0];
  const uint32_t* ay = Y[0];
  int an = n;
  uint32_t as = 0;
  void* argsA[] = {&ax, &ay, &an, &as};
  uint32_t* by = Y[0];
  const uint32_t* bx = X[0];
  int bn = n;
  uint32_t bs = 0;
  void* argsB[] = {&by, &bx, &bn, &bs};
  auto kernelParams = [&](void* func, void** args) {
    cudaKernelNodeParams p = {};
    p.func = func;
    p.gridDim = dim3(kWGrid);
    p.blockDim = dim3(kBlock);
    p.sharedMemBytes = 0;
    p.kernelParams = args;
    p.extra = nullptr;
    return p;
  };
  auto memsetParams = [&](uint32_t value) {
    cudaMemsetParams p = {};
    p.dst = z;
    p.value = value;
    p.elementSize = 4;
    p.width = kZWords;
    p.height = 1;
    p.pitch = 0;
    return p;
  };
  cudaGraph_t g = nullptr;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t nA = nullptr, nB = nullptr, nM = nullptr;
  {
    const cudaKernelNodeParams pa = kernelParams(reinterpret_cast<void*>(pgA), argsA);
    const cudaKernelNodeParams pb = kernelParams(reinterpret_cast<void*>(pgB), argsB);
    const cudaMemsetParams pm = memsetParams(0);
    CK(cudaGraphAddKernelNode(&nA, g, nullptr, 0, &pa));
    CK(cudaGraphAddKernelNode(&nB, g, &nA, 1, &pb));
    CK(cudaGraphAddMemsetNode(&nM, g, &nB, 1, &pm));
  }
  cudaGraphExec_t ge = nullptr;
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaDeviceSynchronize());
  int modes[3] = {0, 0, 0}, lateUpdates = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 37000u);
    const int ps = (i / 3) % 2;
    uint32_t* x = X[ps];
    uint32_t* y = Y[ps];
    const uint32_t value = hash32(salt ^ 0x3333u);
    if (i > 0) CK(cudaStreamWaitEvent(S, eT, 0));  // T read x and y last step
    mix<<<kWGrid, kBlock, 0, S>>>(u, v, n, salt);
    mix<<<kWGrid, kBlock, 0, S>>>(v, u, n, salt ^ 1u);
    CKL();
    mixHost(hU, hV, n, salt);
    mixHost(hV, hU, n, salt ^ 1u);
    auto setNodes = [&](uint32_t* xx, uint32_t* yy, uint32_t sa, uint32_t sb, uint32_t mv) {
      ax = xx;
      ay = yy;
      as = sa;
      by = yy;
      bx = xx;
      bs = sb;
      const cudaKernelNodeParams pa = kernelParams(reinterpret_cast<void*>(pgA), argsA);
      const cudaKernelNodeParams pb = kernelParams(reinterpret_cast<void*>(pgB), argsB);
      const cudaMemsetParams pm = memsetParams(mv);
      CK(cudaGraphExecKernelNodeSetParams(ge, nA, &pa));
      CK(cudaGraphExecKernelNodeSetParams(ge, nB, &pb));
      CK(cudaGraphExecMemsetNodeSetParams(ge, nM, &pm));
    };
    const int mode = i % 3;
    ++modes[mode];
    if (mode == 0) {  // the program's graph
      setNodes(x, y, salt ^ 2u, salt ^ 3u, value);
      CK(cudaGraphLaunch(ge, S));
      if (irregular(i, 3709, 5)) {  // for later launches only
        setNodes(X[1 - ps], Y[1 - ps], salt ^ 0xdeadu, salt ^ 0xbeefu, ~value);
        ++lateUpdates;
      }
    } else if (mode == 1) {  // the same work, eagerly
      pgA<<<kWGrid, kBlock, 0, S>>>(x, y, n, salt ^ 2u);
      pgB<<<kWGrid, kBlock, 0, S>>>(y, x, n, salt ^ 3u);
      CKL();
      CKD(cuMemsetD32Async(dptr(z), value, kZWords, cu(S)));
    } else {  // the graph updated, the eager path taken with the update's arguments
      setNodes(x, y, salt ^ 2u, salt ^ 3u, value);
      CK(cudaLaunchKernel(reinterpret_cast<const void*>(pgA), dim3(kWGrid), dim3(kBlock), argsA, 0, S));
      ax = nullptr;  // scribbled: the launch took its copy
      as = 0xffffffffu;
      CK(cudaLaunchKernel(reinterpret_cast<const void*>(pgB), dim3(kWGrid), dim3(kBlock), argsB, 0, S));
      by = nullptr;
      bs = 0xffffffffu;
      CKD(cuMemsetD32Async(dptr(z), value, kZWords, cu(S)));
    }
    for (int k = 0; k < n; ++k) pgAAt(hX[ps].data(), hY[ps].data(), n, salt ^ 2u, k);
    for (int k = 0; k < n; ++k) pgBAt(hY[ps].data(), hX[ps].data(), n, salt ^ 3u, k);
    std::fill(hZ.begin(), hZ.end(), value);
    mix<<<kWGrid / 8, kBlock, 0, S>>>(z, x, kZWords, salt ^ 4u);  // z from x (n = 256)
    CKL();
    mixHost(hZ, hX[ps], kZWords, salt ^ 4u);
    CK(cudaEventRecord(eS, S));
    CK(cudaStreamWaitEvent(T, eS, 0));
    mix2<<<kWGrid, kBlock, 0, T>>>(w, x, y, n, salt ^ 5u);
    CKL();
    mix2Host(hW, hX[ps], hY[ps], n, salt ^ 5u);
    CK(cudaEventRecord(eT, T));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkDev("pga_x0", i, X[0], hX[0]);
      checkDev("pga_x1", i, X[1], hX[1]);
      checkDev("pga_y0", i, Y[0], hY[0]);
      checkDev("pga_y1", i, Y[1], hY[1]);
      checkDev("pga_z", i, z, hZ);
      checkDev("pga_u", i, u, hU);
      checkDev("pga_w", i, w, hW);
    }
  }
  std::printf("program_graph_alternate: graph %d, eager %d, updated but eager %d, late updates %d\n", modes[0],
              modes[1], modes[2], lateUpdates);
  CK(cudaDeviceSynchronize());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
}

const Scenario kScenarios[] = {
    {"pdl_cross_join", pdlCrossJoin},
    {"holes_in_windows", holesInWindows},
    {"recurring_stretch", recurringStretch},
    {"query_steered_paths", querySteeredPaths},
    {"reload_variants", reloadVariants},
    {"monitor_barriers", monitorBarriers},
    {"epoch_workspace", epochWorkspace},
    {"attr_epochs", attrEpochs},
    {"program_graph_alternate", programGraphAlternate},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
