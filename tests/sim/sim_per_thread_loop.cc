// sim_per_thread_loop: a loop written for the per-thread default stream (as
// built with `nvcc --default-stream per-thread`): each iteration launches on
// the calling thread's per-thread stream, both through the per-thread table
// with a NULL stream and through the plain table with CU_STREAM_PER_THREAD,
// interleaved with a launch on the legacy stream (ordered against the
// per-thread stream only by the legacy stream's implicit synchronization), a
// device-to-device copy and a memset on the per-thread stream, and an event
// recorded there that a non-blocking stream waits on. Every --check-every
// iterations it reads the values back in turn with a synchronous copy of the
// per-thread table (cuMemcpyDtoH_v2_ptds), after cuStreamSynchronize of the
// per-thread stream, after polling cuStreamQuery of it, and after
// cuEventSynchronize of the non-blocking stream's event.
//   sim_per_thread_loop [--threads N | --contexts] [--iterations M] [--check-every K] [--expect-graphs PCT]
// --threads N: N threads run the loop at once, each on its own buffers and its
// own per-thread stream. --contexts: the loop runs in three contexts in turn,
// each created (cuCtxCreate) and destroyed after it, by cuCtxDestroy_v2 and
// then by the CUDA 2.0 ABI of cuCtxDestroy (which graft's table does not
// wrap); the simulator aborts on any call naming a stream of a destroyed
// context. Exit 1 on a wrong value; --expect-graphs PCT also asks that at
// least PCT % of the effects came from graph launches.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

struct Loop {
  const simtest::Driver* drv = nullptr;
  CUcontext ctx = nullptr;
  CUfunction add = nullptr;
  uint64_t iterations = 600, checkEvery = 50;
  int id = 0;
  bool ok = true;

  void run() {
    const simtest::DriverApi& pt = drv->perThread;
    const simtest::DriverApi& cu = drv->plain;
    pt.cuCtxSetCurrent(ctx);
    CUstream side;  // non-blocking: ordered only by the event
    SIM_CHECK(cu.cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    CUevent done, sideDone;
    SIM_CHECK(cu.cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu.cuEventCreate(&sideDone, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                w = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu), m = simtest::zeroedBuffer(cu),
                v = simtest::zeroedBuffer(cu);
    uint64_t hx = 0, hy = 0, hz = 0, hw = 0, hv = 0;
    for (uint64_t it = 1; it <= iterations && ok; ++it) {
      SIM_CHECK(simtest::launchAdd(pt, add, y, x, it, nullptr));               // y = x + it (per-thread)
      SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, CU_STREAM_PER_THREAD));   // x = y + 1 (per-thread)
      SIM_CHECK(simtest::launchAdd(cu, add, z, x, 2, nullptr));                // z = x + 2 (legacy)
      SIM_CHECK(simtest::launchAdd(pt, add, w, z, 3, nullptr));                // w = z + 3 (per-thread)
      SIM_CHECK(pt.cuMemcpyDtoDAsync(c, w, 8, nullptr));                      // c = w
      SIM_CHECK(pt.cuMemsetD32Async(m, unsigned(it), 2, nullptr));            // m = it
      SIM_CHECK(pt.cuEventRecord(done, nullptr));
      SIM_CHECK(cu.cuStreamWaitEvent(side, done, 0));
      SIM_CHECK(simtest::launchAdd(cu, add, v, c, 5, side));                   // v = c + 5 (side)
      SIM_CHECK(cu.cuEventRecord(sideDone, side));
      hy = hx + it;
      hx = hy + 1;
      hz = hx + 2;
      hw = hz + 3;
      hv = hw + 5;
      if (it % checkEvery != 0) continue;
      uint64_t got[5] = {};
      uint32_t mark[2] = {};
      switch ((it / checkEvery) % 4) {
        case 0: break;  // the synchronous copies below wait for the per-thread stream
        case 1: SIM_CHECK(pt.cuStreamSynchronize(nullptr)); break;
        case 2:
          while (cu.cuStreamQuery(CU_STREAM_PER_THREAD) == CUDA_ERROR_NOT_READY) {
          }
          break;
        case 3: SIM_CHECK(cu.cuEventSynchronize(sideDone)); break;
      }
      SIM_CHECK(cu.cuEventSynchronize(sideDone));
      SIM_CHECK(pt.cuMemcpyDtoH(&got[0], x, 8));
      SIM_CHECK(pt.cuMemcpyDtoH(&got[1], y, 8));
      SIM_CHECK(pt.cuMemcpyDtoH(&got[2], z, 8));
      SIM_CHECK(pt.cuMemcpyDtoH(&got[3], c, 8));
      SIM_CHECK(pt.cuMemcpyDtoH(&got[4], v, 8));
      SIM_CHECK(pt.cuMemcpyDtoH(mark, m, 8));
      if (got[0] != hx || got[1] != hy || got[2] != hz || got[3] != hw || got[4] != hv || mark[0] != it ||
          mark[1] != it) {
        std::printf("sim_per_thread_loop: thread %d iteration %llu: x y z c v m = %llu %llu %llu %llu %llu %u, "
                    "expected %llu %llu %llu %llu %llu %llu\n",
                    id, (unsigned long long)it, (unsigned long long)got[0], (unsigned long long)got[1],
                    (unsigned long long)got[2], (unsigned long long)got[3], (unsigned long long)got[4], mark[0],
                    (unsigned long long)hx, (unsigned long long)hy, (unsigned long long)hz,
                    (unsigned long long)hw, (unsigned long long)hv, (unsigned long long)it);
        ok = false;
      }
    }
    SIM_CHECK(cu.cuCtxSynchronize());
  }
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  bool contexts = false;
  uint64_t iterations = 600, checkEvery = 50, expectPct = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--contexts") == 0) contexts = true;
    else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc)
      iterations = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--check-every") == 0 && i + 1 < argc)
      checkEvery = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--expect-graphs") == 0 && i + 1 < argc)
      expectPct = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::printf("usage: sim_per_thread_loop [--threads N | --contexts] [--iterations M] [--check-every K] "
                  "[--expect-graphs PCT]\n");
      return 2;
    }
  }
  if (threads < 1 || threads > 8 || checkEvery == 0) {
    std::printf("sim_per_thread_loop: --threads 1..8, --check-every at least 1\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_per_thread_loop", &drv, &ctx)) return rc;
  CUfunction add = simtest::libraryKernel3("sim_add_per_thread");
  std::vector<Loop> loops(static_cast<size_t>(contexts ? 3 : threads));
  for (size_t t = 0; t < loops.size(); ++t) loops[t] = Loop{&drv, ctx, add, iterations, checkEvery, int(t)};
  if (contexts) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status;
    SIM_CHECK(drv.getProcAddress("cuCtxCreate", &p, 12050, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    auto ctxCreate = reinterpret_cast<CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice)>(p);
    SIM_CHECK(drv.getProcAddress("cuCtxDestroy", &p, 4000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    auto ctxDestroy = reinterpret_cast<CUresult (*)(CUcontext)>(p);
    SIM_CHECK(drv.getProcAddress("cuCtxDestroy", &p, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    auto ctxDestroyV1 = reinterpret_cast<CUresult (*)(CUcontext)>(p);
    if (!ctxCreate || !ctxDestroy || !ctxDestroyV1) return 1;
    for (Loop& l : loops) {
      SIM_CHECK(ctxCreate(&l.ctx, nullptr, 0, 0));
      l.run();
      SIM_CHECK((l.id == 0 ? ctxDestroy : ctxDestroyV1)(l.ctx));
    }
  } else if (threads == 1) {
    loops[0].run();
  } else {
    std::vector<std::thread> workers;
    for (Loop& l : loops) workers.emplace_back([&l] { l.run(); });
    for (std::thread& w : workers) w.join();
  }
  SimCounters c{};
  simCounters(&c);
  bool ok = simtest::failedCalls() == 0;
  for (const Loop& l : loops) ok &= l.ok;
  std::printf("sim_per_thread_loop: %d %s x %llu iterations, %s; effects from graphs %llu, eager %llu, "
              "graph launches %llu\n",
              int(loops.size()), contexts ? "context(s)" : "thread(s)", (unsigned long long)iterations, ok ? "every value right" : "WRONG VALUES",
              (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager,
              (unsigned long long)c.graphLaunches);
  if (!ok) return 1;
  if (expectPct && simtest::tooFewFromGraphs("sim_per_thread_loop", c, expectPct)) return 1;
  return 0;
}
