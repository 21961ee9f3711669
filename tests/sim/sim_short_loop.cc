// sim_short_loop: a solver-shaped loop of three launches per iteration and no
// sync (two on a blocking stream, one between them on the legacy default
// stream, which only implicit legacy-stream ordering keeps in place), with a
// read-back every 250 iterations. graft replays such short periods unrolled,
// several iterations per graph.
//   sim_short_loop [--expect-graphs] [--refused-kernel] [--noise N --iterations M [--expect-rest]]
// Checks every read-back (exit 1 on a wrong value); with --expect-graphs also
// that most kernels ran from graph launches.
// --noise N: first N launches that never repeat (a new grid size each, as
// data-dependent shapes give), each adding 1 to a counter that is checked;
// then the loop runs M iterations. --expect-graphs then asks that at least
// 30 % of the loop's kernels ran from graphs, and --expect-rest that at least
// 1000 of them ran eagerly (graft rested, GRAFT_DORMANT_AFTER_OPS, into the loop).
// --refused-kernel: the third launch of each iteration is of a second kernel,
// "sim_add_refused" (run with SIM_REFUSE_CAPTURE=sim_add_refused, the driver
// refuses it in a capture), and each iteration also adds 1 to a counter five
// times on the blocking stream; --expect-graphs then asks that at least 60 %
// of the kernels ran from graphs (all but the refused one can be).
// --launch-blocking: sets CUDA_LAUNCH_BLOCKING=1 with setenv() before the
// first driver call (as a script does with os.environ after loading graft);
// --launch-blocking-late V: sets CUDA_LAUNCH_BLOCKING=V after the driver and
// graft started, before the first op (the driver reads it when it creates a
// context, which a CUDA runtime program may do after setting it);
// --expect-eager: asks that no kernel ran from a graph.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  bool expectGraphs = false, expectRest = false, refusedKernel = false, expectEager = false;
  const char* launchBlockingLate = nullptr;
  uint64_t noise = 0, iterations = 1000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expect-graphs") == 0) expectGraphs = true;
    else if (std::strcmp(argv[i], "--expect-rest") == 0) expectRest = true;
    else if (std::strcmp(argv[i], "--refused-kernel") == 0) refusedKernel = true;
    else if (std::strcmp(argv[i], "--expect-eager") == 0) expectEager = true;
    else if (std::strcmp(argv[i], "--launch-blocking") == 0) setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
    else if (std::strcmp(argv[i], "--launch-blocking-late") == 0 && i + 1 < argc) launchBlockingLate = argv[++i];
    else if (std::strcmp(argv[i], "--noise") == 0 && i + 1 < argc) noise = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc)
      iterations = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::printf("usage: sim_short_loop [--expect-graphs | --expect-eager] [--refused-kernel] [--launch-blocking] "
                  "[--launch-blocking-late V] "
                  "[--noise N --iterations M [--expect-rest]]\n");
      return 2;
    }
  }
  if (noise > 50000 || iterations % 250 != 0) {
    std::printf("sim_short_loop: --noise at most 50000, --iterations a multiple of 250\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_short_loop", &drv, &ctx)) return rc;
  if (launchBlockingLate) setenv("CUDA_LAUNCH_BLOCKING", launchBlockingLate, 1);
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_short");
  CUfunction third = refusedKernel ? simtest::libraryKernel3("sim_add_refused") : add;
  CUstream s1;
  cu.cuStreamCreate(&s1, 0);  // blocking: ordered against the legacy stream
  CUdeviceptr x, y, z;
  cu.cuMemAlloc(&x, 64);
  cu.cuMemAlloc(&y, 64);
  cu.cuMemAlloc(&z, 64);
  cu.cuMemsetD8(x, 0, 64);
  if (noise) {
    CUdeviceptr w;
    cu.cuMemAlloc(&w, 64);
    cu.cuMemsetD8(w, 0, 64);
    for (uint64_t k = 0; k < noise; ++k) {
      uint64_t one = 1;
      void* args[] = {&w, &w, &one};
      cu.cuLaunchKernel(add, unsigned(1 + k), 1, 1, 1, 1, 1, 0, s1, args, nullptr);  // w += 1
    }
    uint64_t got = 0;
    cu.cuMemcpyDtoH(&got, w, 8);
    if (got != noise) {
      std::printf("sim_short_loop: after %llu non-repeating launches the counter is %llu\n",
                  (unsigned long long)noise, (unsigned long long)got);
      return 1;
    }
  }
  CUdeviceptr counter = 0;
  if (refusedKernel) {
    cu.cuMemAlloc(&counter, 64);
    cu.cuMemsetD8(counter, 0, 64);
  }
  SimCounters before{};
  simCounters(&before);
  uint64_t hx = 0, hy = 0, hz = 0;
  const uint64_t kIterations = iterations;
  for (uint64_t it = 1; it <= kIterations; ++it) {
    simtest::launchAdd(cu, add, y, x, it, s1);       // y = x + it
    simtest::launchAdd(cu, add, x, y, 1, nullptr);   // x = y + 1, on the legacy stream
    simtest::launchAdd(cu, third, z, x, 2, s1);      // z = x + 2
    for (int k = 0; refusedKernel && k < 5; ++k) simtest::launchAdd(cu, add, counter, counter, 1, s1);
    hy = hx + it;
    hx = hy + 1;
    hz = hx + 2;
    if (it % 250 == 0) {
      uint64_t got[3] = {};
      cu.cuMemcpyDtoH(&got[0], x, 8);  // legacy stream: after everything on s1
      cu.cuMemcpyDtoH(&got[1], y, 8);
      cu.cuMemcpyDtoH(&got[2], z, 8);
      if (got[0] != hx || got[1] != hy || got[2] != hz) {
        std::printf("sim_short_loop: iteration %llu: x y z = %llu %llu %llu, expected %llu %llu %llu\n",
                    (unsigned long long)it, (unsigned long long)got[0], (unsigned long long)got[1],
                    (unsigned long long)got[2], (unsigned long long)hx, (unsigned long long)hy,
                    (unsigned long long)hz);
        return 1;
      }
      uint64_t count = 0;
      if (refusedKernel && (cu.cuMemcpyDtoH(&count, counter, 8), count != 5 * it)) {
        std::printf("sim_short_loop: iteration %llu: counter %llu, expected %llu\n", (unsigned long long)it,
                    (unsigned long long)count, (unsigned long long)(5 * it));
        return 1;
      }
    }
  }
  cu.cuCtxSynchronize();
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_short_loop: %llu iterations, every value right; kernels from graphs %llu, eager %llu, "
              "graph launches %llu\n",
              (unsigned long long)kIterations, (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager, (unsigned long long)c.graphLaunches);
  const uint64_t loopGraph = c.effectsGraph - before.effectsGraph, loopEager = c.effectsEager - before.effectsEager;
  if (noise) std::printf("sim_short_loop: the loop's kernels from graphs %llu, eager %llu\n",
                         (unsigned long long)loopGraph, (unsigned long long)loopEager);
  const uint64_t wantPct = refusedKernel ? 60 : 80;
  if (expectGraphs && !noise && simtest::tooFewFromGraphs("sim_short_loop", c, wantPct)) return 1;
  if (expectGraphs && noise && loopGraph * 10 < (loopGraph + loopEager) * 3) {
    std::printf("sim_short_loop: fewer than 30 %% of the loop's effects came from graphs\n");
    return 1;
  }
  if (expectEager && c.effectsGraph != 0) {
    std::printf("sim_short_loop: %llu kernels ran from graphs, none expected\n", (unsigned long long)c.effectsGraph);
    return 1;
  }
  if (expectRest && loopEager < 1000) {
    std::printf("sim_short_loop: graft did not rest into the loop (%llu of its kernels eager)\n",
                (unsigned long long)loopEager);
    return 1;
  }
  return 0;
}
