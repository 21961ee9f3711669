// sim_free_behind_launches: a loop shaped like PyTorch under
// backend:cudaMallocAsync. Every iteration allocates its temporaries with
// cuMemAllocAsync, chains data through them with sim_add kernels (one chain
// on a second stream, joined by an event), stores the iteration's result in
// its own slot of a persistent buffer and frees the temporaries with
// cuMemFreeAsync; there is no sync until the end. Some frees come between
// the kernels (while graft holds the iteration's ops), some after the last
// one (while nothing is held and the launch of the graph may still be queued).
//   sim_free_behind_launches [--iterations N] [--lead K] [--big BYTES] [--legacy] [--from-pool]
//                            [--expect-off-thread-frees]
// --lead K: K extra kernels at the start of every iteration (other segment
// lengths and phases against the iterations: with K = 30, at the time of
// writing, 28 frees came right after a segment's launch, with nothing held). --expect-off-thread-frees: fail unless
// some frees reached the driver from another thread (graft's launch thread):
// exit 3 when every value was right but none did (the launch thread was off
// a core when the frees came: run_with_report.py --path-retries runs it again).
// --legacy: the second stream is the legacy default stream (NULL), whose
// frees graft's launch thread must name in the program's context.
// --big BYTES: each iteration also allocates a block of BYTES, copies through
// it and frees it while ops are held; run with SIM_ASYNC_POOL_BYTES below
// twice that, the next iteration's allocation fails for lack of memory
// unless the free reached the driver first (graft retries it after issuing
// what it holds back). --from-pool: every allocation is cuMemAllocFromPoolAsync
// from the device's pool (cuDeviceGetDefaultMemPool), as with a pool the
// program made: graft retries those the same way.
// Run with SIM_GRAPH_LAUNCH_US so graft's launch thread is still busy when
// the frees come: they go behind the queued launches (the report's
// launch_thread.frees_queued). The simulator frees stream-ordered memory
// when the free runs, poisons it and hands it out again first-fit, so a free
// that reached the driver before a launch using the memory makes a later
// kernel fault or read poison. Checks every iteration's slot at the end, and
// that every temporary's free reached the driver and ran (exit 1 otherwise).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  int iterations = 60, lead = 0;
  unsigned long long bigBytes = 0;
  bool expectOffThread = false, legacy = false, fromPool = false;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--iterations") && a + 1 < argc) iterations = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--lead") && a + 1 < argc) lead = std::atoi(argv[++a]);
    else if (!std::strcmp(argv[a], "--big") && a + 1 < argc) bigBytes = std::strtoull(argv[++a], nullptr, 0);
    else if (!std::strcmp(argv[a], "--expect-off-thread-frees")) expectOffThread = true;
    else if (!std::strcmp(argv[a], "--legacy")) legacy = true;
    else if (!std::strcmp(argv[a], "--from-pool")) fromPool = true;
    else {
      std::printf("usage: sim_free_behind_launches [--iterations N] [--lead K] [--big BYTES] [--legacy] "
                  "[--from-pool] [--expect-off-thread-frees]\n");
      return 2;
    }
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_free_behind_launches", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_free_behind");
  CUstream s1, s2 = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  if (legacy) s2 = nullptr;
  else SIM_CHECK(cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  SIM_CHECK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CUmemoryPool pool = nullptr;
  if (fromPool) SIM_CHECK(cu.cuDeviceGetDefaultMemPool(&pool, 0));
  auto allocAsync = [&](CUdeviceptr* p, size_t bytes, CUstream s) {
    return fromPool ? cu.cuMemAllocFromPoolAsync(p, bytes, pool, s) : cu.cuMemAllocAsync(p, bytes, s);
  };
  const CUdeviceptr src = simtest::zeroedBuffer(cu, 64);
  const CUdeviceptr results = simtest::zeroedBuffer(cu, 64 * size_t(iterations));
  const CUdeviceptr scratch = simtest::zeroedBuffer(cu, 64);
  for (int it = 0; it < iterations; ++it) {
    for (int k = 0; k < lead; ++k) SIM_CHECK(simtest::launchAdd(cu, add, scratch, scratch, 1, s1));
    const uint64_t k = uint64_t(it) + 1;
    CUdeviceptr a = 0, b = 0, c = 0, d = 0;
    SIM_CHECK(allocAsync(&a, 256, s1));
    SIM_CHECK(allocAsync(&b, 4096, s1));
    SIM_CHECK(simtest::launchAdd(cu, add, a, src, k, s1));  // a = k
    CUdeviceptr big = 0;
    if (bigBytes) {
      SIM_CHECK(allocAsync(&big, bigBytes, s1));
      SIM_CHECK(simtest::launchAdd(cu, add, big + bigBytes - 64, a, 0, s1));  // its last bytes = k
      SIM_CHECK(simtest::launchAdd(cu, add, b, big + bigBytes - 64, 1, s1));  // b = k + 1
      SIM_CHECK(cu.cuMemFreeAsync(big, s1));                                 // while later ops are held
    } else {
      SIM_CHECK(simtest::launchAdd(cu, add, b, a, 1, s1));  // b = k + 1
    }
    SIM_CHECK(cu.cuMemFreeAsync(a, s1));                    // while b's chain is held
    SIM_CHECK(allocAsync(&c, 512, s1));
    SIM_CHECK(simtest::launchAdd(cu, add, c, b, 1, s1));    // c = k + 2
    SIM_CHECK(cu.cuEventRecord(ev, s1));
    SIM_CHECK(cu.cuStreamWaitEvent(s2, ev, 0));
    SIM_CHECK(allocAsync(&d, 1u << 20, s2));
    SIM_CHECK(simtest::launchAdd(cu, add, d, c, 1, s2));    // d = k + 3, on the other stream
    SIM_CHECK(cu.cuMemFreeAsync(c, s2));                    // its last use is on s2
    SIM_CHECK(simtest::launchAdd(cu, add, results + 64 * uint64_t(it), d, 0, s2));
    SIM_CHECK(cu.cuEventRecord(ev, s2));
    SIM_CHECK(cu.cuStreamWaitEvent(s1, ev, 0));  // the next iteration's s1 work follows this one
    // After the iteration's last op: nothing may be held when these come.
    SIM_CHECK(cu.cuMemFreeAsync(b, s1));
    SIM_CHECK(cu.cuMemFreeAsync(d, s2));
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  std::vector<uint64_t> got(8 * size_t(iterations));
  SIM_CHECK(cu.cuMemcpyDtoH(got.data(), results, got.size() * sizeof(uint64_t)));
  SimCounters counters;
  simCounters(&counters);
  int wrong = 0;
  if (counters.allocsAsync != (bigBytes ? 5 : 4) * uint64_t(iterations) ||
      counters.freesAsyncRun != counters.allocsAsync) {
    ++wrong;
    std::printf("sim_free_behind_launches: %llu stream-ordered allocations, %llu of them freed: frees were lost\n",
                (unsigned long long)counters.allocsAsync, (unsigned long long)counters.freesAsyncRun);
  }
  // Timing decides it (the launch thread must be on a core when the frees
  // come): exit 3 if it is the only failure, so the runner may try again.
  const bool pathMissed = expectOffThread && counters.freesAsyncOffThread == 0;
  if (pathMissed)
    std::printf("sim_free_behind_launches: no free reached the driver from another thread (graft's launch "
                "thread): the path under test was not taken\n");
  for (int it = 0; it < iterations; ++it) {
    const uint64_t want = uint64_t(it) + 4;
    if (got[8 * size_t(it)] != want && wrong++ < 5)
      std::printf("sim_free_behind_launches: iteration %d: got %llu, expected %llu\n", it,
                  (unsigned long long)got[8 * size_t(it)], (unsigned long long)want);
  }
  if (wrong || simtest::failedCalls()) {
    std::printf("sim_free_behind_launches: %d wrong iterations, %d failed calls\n", wrong, simtest::failedCalls());
    return 1;
  }
  if (pathMissed) return 3;
  std::printf("sim_free_behind_launches: %d iterations, every value right, %llu frees all run (%llu from another "
              "thread)\n", iterations, (unsigned long long)counters.freesAsyncRun,
              (unsigned long long)counters.freesAsyncOffThread);
  return 0;
}
