// sim_short_loop: a solver-shaped loop of three launches per iteration and no
// sync (two on a blocking stream, one between them on the legacy default
// stream, which only implicit legacy-stream ordering keeps in place), with a
// read-back every 250 iterations. graft replays such short periods unrolled,
// several iterations per graph.
//   sim_short_loop [--expect-graphs]
// Checks every read-back (exit 1 on a wrong value); with --expect-graphs also
// that most kernels ran from graph launches.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  const bool expectGraphs = argc > 1 && std::strcmp(argv[1], "--expect-graphs") == 0;
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_short_loop", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_short");
  CUstream s1;
  cu.cuStreamCreate(&s1, 0);  // blocking: ordered against the legacy stream
  CUdeviceptr x, y, z;
  cu.cuMemAlloc(&x, 64);
  cu.cuMemAlloc(&y, 64);
  cu.cuMemAlloc(&z, 64);
  cu.cuMemsetD8(x, 0, 64);
  uint64_t hx = 0, hy = 0, hz = 0;
  constexpr uint64_t kIterations = 1000;
  for (uint64_t it = 1; it <= kIterations; ++it) {
    simtest::launchAdd(cu, add, y, x, it, s1);       // y = x + it
    simtest::launchAdd(cu, add, x, y, 1, nullptr);   // x = y + 1, on the legacy stream
    simtest::launchAdd(cu, add, z, x, 2, s1);        // z = x + 2
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
    }
  }
  cu.cuCtxSynchronize();
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_short_loop: %llu iterations, every value right; kernels from graphs %llu, eager %llu, "
              "graph launches %llu\n",
              (unsigned long long)kIterations, (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager, (unsigned long long)c.graphLaunches);
  if (expectGraphs && c.effectsGraph * 10 < (c.effectsGraph + c.effectsEager) * 8) {
    std::printf("sim_short_loop: fewer than 80 %% of the effects came from graphs\n");
    return 1;
  }
  return 0;
}
