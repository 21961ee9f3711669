// sim_churn_pending: events and a stream destroyed while work that uses them
// is pending (legal: the driver frees them once that work is done), new ones
// created every step, so handles just freed come back. Each step forks from
// stream A into B and back through fresh events destroyed right after the
// wait, and runs one kernel on a fresh stream T destroyed right after its
// record (the GPU trap churn_pending is the same loop).
//   sim_churn_pending
// Checks every value, read back every 50 steps (exit 1 on a wrong one). The
// simulator aborts on a driver call naming a destroyed stream handle: an
// interposer must never query a stream the program destroyed (the real driver
// crashed in cuStreamGetCtx on one).
#include <cstdint>
#include <cstdio>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main() {
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_churn_pending", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_churn");
  CUstream a, b;
  cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING);
  cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING);
  CUdeviceptr x, y, z;
  cu.cuMemAlloc(&x, 64);
  cu.cuMemAlloc(&y, 64);
  cu.cuMemAlloc(&z, 64);
  cu.cuMemsetD8(x, 0, 64);
  cu.cuMemsetD8(y, 0, 64);
  cu.cuMemsetD8(z, 0, 64);
  uint64_t hx = 0, hy = 0, hz = 0;
  for (uint64_t i = 1; i <= 300; ++i) {
    CUevent e, f, g;
    CUstream t;
    simtest::launchAdd(cu, add, y, x, i, a);  // y = x + i
    cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    cu.cuEventRecord(e, a);
    cu.cuStreamWaitEvent(b, e, 0);
    cu.cuEventDestroy(e);                     // the wait is pending
    simtest::launchAdd(cu, add, z, y, 1, b);  // z = y + 1
    cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING);
    cu.cuEventRecord(f, b);
    cu.cuStreamWaitEvent(a, f, 0);
    cu.cuEventDestroy(f);
    cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING);
    cu.cuEventCreate(&g, CU_EVENT_DISABLE_TIMING);
    cu.cuEventRecord(g, a);
    cu.cuStreamWaitEvent(t, g, 0);
    simtest::launchAdd(cu, add, x, z, 2, t);  // x = z + 2
    cu.cuEventRecord(g, t);
    cu.cuStreamDestroy(t);                    // its kernel is pending
    cu.cuStreamWaitEvent(a, g, 0);
    cu.cuEventDestroy(g);
    simtest::launchAdd(cu, add, y, x, 3, a);  // y = x + 3
    hy = hx + i;
    hz = hy + 1;
    hx = hz + 2;
    hy = hx + 3;
    if (i % 50 == 0) {
      uint64_t got[3] = {};
      cu.cuStreamSynchronize(a);
      cu.cuMemcpyDtoH(&got[0], x, 8);
      cu.cuMemcpyDtoH(&got[1], y, 8);
      cu.cuMemcpyDtoH(&got[2], z, 8);
      if (got[0] != hx || got[1] != hy || got[2] != hz) {
        std::printf("sim_churn_pending: step %llu: x y z = %llu %llu %llu, expected %llu %llu %llu\n",
                    (unsigned long long)i, (unsigned long long)got[0], (unsigned long long)got[1],
                    (unsigned long long)got[2], (unsigned long long)hx, (unsigned long long)hy,
                    (unsigned long long)hz);
        return 1;
      }
    }
  }
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_churn_pending: 300 steps, every value right; kernels from graphs %llu, eager %llu\n",
              (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager);
  return 0;
}
