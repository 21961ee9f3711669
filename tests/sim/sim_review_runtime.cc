// sim_review_runtime: red-team review of graft's runtime layer (lookups,
// threads, exit, GRAFT_POOL). One mode per suspected divergence; each must
// pass eagerly (the simulated driver alone) and, where graft is right, under
// graft too:
//   sim_review_runtime --mode MODE [--expect-graphs]
//
// pool-xctx-legacy  (GRAFT_POOL=1) two contexts on device 0. In context A a
//                stream-ordered block on the legacy stream is written (5),
//                read behind a closed gate and freed there; then context B
//                allocates a block on ITS legacy stream and writes 7 into it.
//                The gate opens: A's reader must see 5. The driver's pool
//                cannot hand B the block before A's free ran.
// pool-recycled-stream  (GRAFT_POOL=1) the same on one context: the block is
//                freed on stream S behind a gated reader, S is destroyed (work
//                pending) and a new stream created (the driver recycles the
//                handle); the new stream allocates and writes 7.
// pool-zero-bytes  (GRAFT_POOL=1) cuMemAllocAsync of 0 bytes: the driver
//                refuses it (CUDA_ERROR_INVALID_VALUE).
// pool-stats     (GRAFT_POOL=1) cuMemPoolGetAttribute(USED_MEM_CURRENT,
//                RESERVED_MEM_CURRENT) of the device's default pool after a
//                cuMemAllocAsync of 1000 bytes: the driver counts them.
// pool-other-stream  (GRAFT_POOL=1) a block written on A, read on B behind a
//                gate (B waits on A's event), freed on B; A allocates again
//                and writes 7 at once: B's reader must still see 5.
// lookup-variants  a replayed loop whose launches go through cuLaunchKernel
//                pointers obtained in unusual ways: cuGetProcAddress_v2 at
//                versions 4000 / 13000 / 99999 with flags DEFAULT, LEGACY and
//                PER_THREAD, the v1 resolver (cuGetProcAddress at 11030,
//                itself looked up at 11030), dlsym of "cuLaunchKernel" and
//                "cuLaunchKernel_ptsz"; legacy and per-thread variants chain
//                through one buffer on the calling thread's NULL stream
//                (the per-thread stream syncs implicitly with the legacy one).
// thread-exit-pts  300 threads one after another (past graft's 256 proxy
//                slots), each running a replayable loop on its per-thread
//                default stream and exiting without synchronizing; the main
//                thread then synchronizes the context and checks every value.
// pts-legacy-threads  a worker thread runs steps on its per-thread default
//                stream (replayed); after each step the main thread launches
//                y = x on the legacy stream and synchronizes it: y must be the
//                worker's value (the per-thread stream blocks the legacy one).
// exit-pending   a replayed loop ends with work pending (no sync); an atexit
//                handler registered before the driver was first used (so it
//                runs after graft's own) synchronizes and checks the value.
// exit-other-thread  the main thread launches a replayed loop forever; a
//                second thread calls exit(0) after 200 ms: the process must
//                leave with status 0 and the atexit handler (registered before
//                the driver was used) must see a synchronize succeed.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

const char* g_mode = "";
int g_wrong = 0;

void expectCode(CUresult got, CUresult want, const char* what) {
  if (got == want) return;
  ++g_wrong;
  std::printf("sim_review_runtime: %s: %s returned %d, the driver returns %d\n", g_mode, what, int(got), int(want));
}
void expectValue(uint64_t got, uint64_t want, const char* what) {
  if (got == want) return;
  ++g_wrong;
  std::printf("sim_review_runtime: %s: %s is %llu, expected %llu\n", g_mode, what, (unsigned long long)got,
              (unsigned long long)want);
}

uint64_t peek(CUdeviceptr p) { return *reinterpret_cast<volatile const uint64_t*>(p); }
void poke(CUdeviceptr p, uint64_t v) { *reinterpret_cast<volatile uint64_t*>(p) = v; }

struct Kit {
  simtest::Driver* drv;
  const simtest::DriverApi* cu;
  CUfunction add, gate;
  CUdeviceptr flag, zero, out;
  void launchGate(uint64_t threshold, CUstream s) {
    uint64_t unused = 0;
    void* args[] = {&flag, &unused, &threshold};
    SIM_CHECK(cu->cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
  }
  void add3(CUdeviceptr to, CUdeviceptr from, uint64_t k, CUstream s) {
    SIM_CHECK(simtest::launchAdd(*cu, add, to, from, k, s));
  }
};

// ------------------------------------------------------------------ pool

void poolXctxLegacy(Kit& k, CUcontext a) {
  auto& cu = *k.cu;
  decltype(&::cuCtxCreate_v4) ctxCreate = nullptr;
  if (!simtest::lookupProc(*k.drv, "cuCtxCreate", &ctxCreate)) return void(++g_wrong);
  CUcontext b = nullptr;
  SIM_CHECK(ctxCreate(&b, nullptr, 0, 0));  // device 0, made current
  SIM_CHECK(cu.cuCtxSetCurrent(a));
  for (uint64_t round = 1; round <= 3; ++round) {
    CUdeviceptr p = 0, q = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&p, 64, nullptr));
    k.add3(p, k.zero, 5, nullptr);     // *p = 5
    k.launchGate(round, nullptr);      // A's legacy stream waits for the host
    k.add3(k.out, p, 0, nullptr);      // out = *p, after the gate
    SIM_CHECK(cu.cuMemFreeAsync(p, nullptr));
    SIM_CHECK(cu.cuCtxSetCurrent(b));
    SIM_CHECK(cu.cuMemAllocAsync(&q, 64, nullptr));  // B's legacy stream
    k.add3(q, k.zero, 7, nullptr);     // *q = 7
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    SIM_CHECK(cu.cuMemFreeAsync(q, nullptr));
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    poke(k.flag, round);
    SIM_CHECK(cu.cuCtxSynchronize());
    if (p == q) std::printf("sim_review_runtime: %s: round %llu: context B got A's block %#llx before A's free ran\n",
                            g_mode, (unsigned long long)round, (unsigned long long)p);
    expectValue(peek(k.out), 5, "what A's gated kernel read from its block");
  }
}

void poolRecycledStream(Kit& k) {
  auto& cu = *k.cu;
  for (uint64_t round = 1; round <= 3; ++round) {
    CUstream s = nullptr, s2 = nullptr;
    SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p = 0, q = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&p, 64, s));
    k.add3(p, k.zero, 5, s);
    k.launchGate(round, s);
    k.add3(k.out, p, 0, s);
    SIM_CHECK(cu.cuMemFreeAsync(p, s));
    SIM_CHECK(cu.cuStreamDestroy(s));  // its work goes on
    SIM_CHECK(cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    SIM_CHECK(cu.cuMemAllocAsync(&q, 64, s2));
    k.add3(q, k.zero, 7, s2);
    SIM_CHECK(cu.cuStreamSynchronize(s2));
    SIM_CHECK(cu.cuMemFreeAsync(q, s2));
    SIM_CHECK(cu.cuStreamSynchronize(s2));
    poke(k.flag, round);
    SIM_CHECK(cu.cuCtxSynchronize());
    SIM_CHECK(cu.cuStreamDestroy(s2));
    if (p == q) std::printf("sim_review_runtime: %s: round %llu: the new stream (handle %s) got the block %#llx "
                            "before the old stream's free ran\n", g_mode, (unsigned long long)round,
                            s == s2 ? "recycled" : "new", (unsigned long long)p);
    expectValue(peek(k.out), 5, "what the destroyed stream's gated kernel read from its block");
  }
}

void poolZeroBytes(Kit& k) {
  auto& cu = *k.cu;
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p = 0;
  expectCode(cu.cuMemAllocAsync(&p, 0, s), CUDA_ERROR_INVALID_VALUE, "cuMemAllocAsync of 0 bytes");
  SIM_CHECK(cu.cuStreamSynchronize(s));
}

void poolStats(Kit& k) {
  auto& cu = *k.cu;
  decltype(&::cuMemPoolGetAttribute) getAttr = nullptr;
  if (!simtest::lookupProc(*k.drv, "cuMemPoolGetAttribute", &getAttr)) return void(++g_wrong);
  CUmemoryPool pool = nullptr;
  SIM_CHECK(cu.cuDeviceGetDefaultMemPool(&pool, 0));
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p = 0;
  SIM_CHECK(cu.cuMemAllocAsync(&p, 1000, s));
  cuuint64_t used = 0, reserved = 0;
  SIM_CHECK(getAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  SIM_CHECK(getAttr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  expectValue(used, 1000, "the default pool's USED_MEM_CURRENT after a 1000-byte cuMemAllocAsync");
  if (reserved < 1000) expectValue(reserved, 1000, "the default pool's RESERVED_MEM_CURRENT (at least)");
  SIM_CHECK(cu.cuMemFreeAsync(p, s));
  SIM_CHECK(cu.cuStreamSynchronize(s));
}

void poolOtherStream(Kit& k) {
  auto& cu = *k.cu;
  CUstream a = nullptr, b = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e = nullptr;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  for (uint64_t round = 1; round <= 20; ++round) {
    CUdeviceptr p = 0, q = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&p, 64, a));
    k.add3(p, k.zero, 5, a);
    SIM_CHECK(cu.cuEventRecord(e, a));
    SIM_CHECK(cu.cuStreamWaitEvent(b, e, 0));
    k.launchGate(round, b);
    k.add3(k.out, p, 0, b);
    SIM_CHECK(cu.cuMemFreeAsync(p, b));
    SIM_CHECK(cu.cuMemAllocAsync(&q, 64, a));
    k.add3(q, k.zero, 7, a);
    SIM_CHECK(cu.cuStreamSynchronize(a));
    SIM_CHECK(cu.cuMemFreeAsync(q, a));
    poke(k.flag, round);
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(k.out), 5, "what B's gated kernel read from the block");
  }
}

// ------------------------------------------------------------------ lookups

using LaunchFn = decltype(&::cuLaunchKernel);
using Gpa2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using Gpa1 = CUresult (*)(const char*, void**, int, cuuint64_t);

void lookupVariants(Kit& k, bool expectGraphs) {
  auto& cu = *k.cu;
  Gpa2 gpa = k.drv->getProcAddress;
  struct Variant {
    const char* how;
    LaunchFn fn;
  };
  std::vector<Variant> vs;
  auto viaGpa = [&](const char* how, int version, cuuint64_t flags) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult st{};
    if (gpa("cuLaunchKernel", &p, version, flags, &st) != CUDA_SUCCESS || !p) {
      std::printf("sim_review_runtime: %s: lookup %s failed\n", g_mode, how);
      ++g_wrong;
      return;
    }
    vs.push_back({how, reinterpret_cast<LaunchFn>(p)});
  };
  viaGpa("v2 4000 default", 4000, CU_GET_PROC_ADDRESS_DEFAULT);
  viaGpa("v2 13000 legacy", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  viaGpa("v2 99999 per-thread", 99999, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  viaGpa("v2 7000 per-thread", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  // The v1 resolver, looked up through itself.
  void* v1 = nullptr;
  if (gpa("cuGetProcAddress", &v1, 11030, 0, nullptr) == CUDA_SUCCESS && v1) {
    void* v1b = nullptr;
    if (reinterpret_cast<Gpa1>(v1)("cuGetProcAddress", &v1b, 11030, 0) == CUDA_SUCCESS && v1b) v1 = v1b;
    void* p = nullptr;
    if (reinterpret_cast<Gpa1>(v1)("cuLaunchKernel", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
            CUDA_SUCCESS && p)
      vs.push_back({"v1 12000 per-thread", reinterpret_cast<LaunchFn>(p)});
    else
      ++g_wrong, std::printf("sim_review_runtime: %s: v1 lookup failed\n", g_mode);
  } else {
    ++g_wrong, std::printf("sim_review_runtime: %s: v1 resolver not found\n", g_mode);
  }
  for (const char* name : {"cuLaunchKernel", "cuLaunchKernel_ptsz"}) {
    void* p = dlsym(k.drv->handle, name);
    if (!p) ++g_wrong, std::printf("sim_review_runtime: %s: dlsym %s failed\n", g_mode, name);
    else vs.push_back({name, reinterpret_cast<LaunchFn>(p)});
  }
  CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  const int steps = 60;
  for (int i = 0; i < steps; ++i) {
    for (size_t v = 0; v < vs.size(); ++v) {
      CUdeviceptr to = x, from = x;
      uint64_t add = v + 1;
      void* args[] = {&to, &from, &add};
      expectCode(vs[v].fn(k.add, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr), CUDA_SUCCESS, vs[v].how);
      want += v + 1;
    }
    if (i % 10 == 9) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(x), want, "the chained value");
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), want, "the chained value at the end");
  (void)expectGraphs;
}

// ------------------------------------------------------------------ threads, exit

void threadExitPts(Kit& k) {
  const auto& pt = k.drv->perThread;
  CUcontext ctx = nullptr;
  SIM_CHECK(k.cu->cuCtxGetCurrent(&ctx));
  constexpr int kThreads = 300, kSteps = 12;
  std::vector<CUdeviceptr> xs(kThreads);
  for (auto& x : xs) x = simtest::zeroedBuffer(*k.cu);
  for (int t = 0; t < kThreads; ++t) {
    std::thread th([&, t] {
      SIM_CHECK(pt.cuCtxSetCurrent(ctx));
      for (int i = 0; i < kSteps; ++i)
        for (int j = 0; j < 6; ++j) SIM_CHECK(simtest::launchAdd(pt, k.add, xs[t], xs[t], 1, nullptr));
      // leaves with its work pending
    });
    th.join();
  }
  SIM_CHECK(k.cu->cuCtxSynchronize());
  for (int t = 0; t < kThreads; ++t) expectValue(peek(xs[t]), kSteps * 6, "a thread's value");
}

// pts-legacy-threads: a worker thread runs steps on its per-thread default
// stream (replayed); after each step the main thread launches y = x on the
// legacy stream and synchronizes it: the per-thread stream is a blocking
// stream to the legacy one, so y must be the worker's value of that step.
void ptsLegacyThreads(Kit& k) {
  const auto& pt = k.drv->perThread;
  const auto& cu = *k.cu;
  CUcontext ctx = nullptr;
  SIM_CHECK(cu.cuCtxGetCurrent(&ctx));
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  constexpr int kSteps = 40;
  std::atomic<int> launched{0}, acked{0};
  std::thread worker([&] {
    SIM_CHECK(pt.cuCtxSetCurrent(ctx));
    for (int i = 0; i < kSteps; ++i) {
      for (int j = 0; j < 6; ++j) SIM_CHECK(simtest::launchAdd(pt, k.add, x, x, 1, nullptr));
      launched.store(i + 1);
      while (acked.load() != i + 1) std::this_thread::yield();
    }
    SIM_CHECK(pt.cuStreamSynchronize(nullptr));
  });
  for (int i = 0; i < kSteps; ++i) {
    while (launched.load() != i + 1) std::this_thread::yield();
    k.add3(y, x, 0, nullptr);  // legacy stream: after the worker's step
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(y), uint64_t(6 * (i + 1)), "y read on the legacy stream after the worker's step");
    acked.store(i + 1);
  }
  worker.join();
}

Kit* g_kit = nullptr;
CUdeviceptr g_exitX = 0;
uint64_t g_exitWant = 0;
std::atomic<bool> g_checkAtExit{false};
bool g_expectGraphs = false;

CUcontext g_ctx = nullptr;

void atExitCheck() {
  if (!g_checkAtExit.load() || !g_kit) return;
  SIM_CHECK(g_kit->cu->cuCtxSetCurrent(g_ctx));  // exit() may come from a thread without one
  const CUresult r = g_kit->cu->cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    std::printf("sim_review_runtime: %s: cuCtxSynchronize in an atexit handler returned %d\n", g_mode, int(r));
    std::fflush(stdout);
    _exit(1);
  }
  if (std::string(g_mode) == "exit-pending" && peek(g_exitX) != g_exitWant) {
    std::printf("sim_review_runtime: %s: value at exit %llu, expected %llu\n", g_mode,
                (unsigned long long)peek(g_exitX), (unsigned long long)g_exitWant);
    std::fflush(stdout);
    _exit(1);
  }
  if (std::string(g_mode) == "exit-pending" && g_expectGraphs) {
    SimCounters c{};
    simCounters(&c);
    if (c.effectsGraph == 0) {
      std::printf("sim_review_runtime: %s: no kernel ran from a graph\n", g_mode);
      std::fflush(stdout);
      _exit(3);
    }
  }
  std::printf("sim_review_runtime: %s: atexit check passed\n", g_mode);
  std::fflush(stdout);
}

void exitPending(Kit& k) {
  CUstream s = nullptr;
  SIM_CHECK(k.cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  g_exitX = simtest::zeroedBuffer(*k.cu);
  for (int i = 0; i < 40; ++i)
    for (int j = 0; j < 6; ++j) k.add3(g_exitX, g_exitX, uint64_t(j + 1), s), g_exitWant += uint64_t(j + 1);
  g_checkAtExit = true;
  // returns with the last steps pending; main returns 0 and exit runs the handlers
}

[[noreturn]] void exitOtherThread(Kit& k) {
  CUstream s = nullptr;
  SIM_CHECK(k.cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  g_exitX = simtest::zeroedBuffer(*k.cu);
  g_checkAtExit = true;
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::fflush(stdout);
    std::exit(0);
  }).detach();
  for (;;)
    for (int j = 0; j < 6; ++j) k.add3(g_exitX, g_exitX, uint64_t(j + 1), s);
}

}  // namespace

int main(int argc, char** argv) {
  static std::string mode;  // read by the atexit handler
  bool expectGraphs = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) mode = argv[++i];
    else if (!std::strcmp(argv[i], "--expect-graphs")) expectGraphs = true;
  }
  g_mode = mode.c_str();
  g_expectGraphs = expectGraphs;
  std::atexit(atExitCheck);  // before the driver is used: runs after graft's handler
  static simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review_runtime", &drv, &ctx)) return rc;
  static Kit k{&drv, &drv.plain, simtest::libraryKernel3("sim_add_r"), simtest::libraryKernel3("sim_gate"),
        0, 0, 0};
  k.flag = simtest::zeroedBuffer(drv.plain);
  k.zero = simtest::zeroedBuffer(drv.plain);
  k.out = simtest::zeroedBuffer(drv.plain);
  g_kit = &k;
  g_ctx = ctx;
  if (mode == "pool-xctx-legacy") poolXctxLegacy(k, ctx);
  else if (mode == "pool-recycled-stream") poolRecycledStream(k);
  else if (mode == "pool-zero-bytes") poolZeroBytes(k);
  else if (mode == "pool-stats") poolStats(k);
  else if (mode == "pool-other-stream") poolOtherStream(k);
  else if (mode == "lookup-variants") lookupVariants(k, expectGraphs);
  else if (mode == "thread-exit-pts") threadExitPts(k);
  else if (mode == "pts-legacy-threads") ptsLegacyThreads(k);
  else if (mode == "exit-pending") exitPending(k);
  else if (mode == "exit-other-thread") exitOtherThread(k);
  else {
    std::fprintf(stderr, "sim_review_runtime: unknown mode '%s'\n", g_mode);
    return 2;
  }
  if (mode != "exit-pending") SIM_CHECK(drv.plain.cuCtxSynchronize());
  if (simtest::failedCalls()) ++g_wrong;
  if (g_wrong) {
    std::printf("sim_review_runtime: %s: FAILED (%d wrong)\n", g_mode, g_wrong);
    std::fflush(stdout);
    _exit(1);  // not through the atexit check
  }
  if (expectGraphs && mode.rfind("pool-", 0) != 0 && mode != "exit-pending") {
    SimCounters c{};
    simCounters(&c);
    if (c.effectsGraph == 0) {
      std::printf("sim_review_runtime: %s: no kernel ran from a graph\n", g_mode);
      return 3;
    }
  }
  std::printf("sim_review_runtime: %s: ok\n", g_mode);
  return 0;
}
