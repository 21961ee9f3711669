// sim_copy_devices: a copy whose source switches to another device's memory
// after the loop was graphed. Device 0's stream runs, every step, a kernel,
// a device-to-device copy into its own buffer and a kernel reading that
// buffer; every 40 steps the copy's source switches between a buffer of
// device 0 and a buffer of device 1 (no peer access: the driver's copy
// reaches it, a kernel on device 0 does not, and the simulator faults such a
// kernel as the GPU would). graft must not run that copy as its copy kernel.
//   sim_copy_devices [--expect-graphs]
// Needs SIM_DEVICES >= 2. Checks every value (exit 1 on a wrong one or a
// sticky error); --expect-graphs asks that at least 40 % of the effects came
// from graphs (the steps reading device 0's memory are graphed).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  const bool expectGraphs = argc == 2 && std::strcmp(argv[1], "--expect-graphs") == 0;
  if (argc > 2 || (argc == 2 && !expectGraphs)) {
    std::printf("usage: sim_copy_devices [--expect-graphs]\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx0;
  if (int rc = simtest::startProgram("sim_copy_devices", &drv, &ctx0)) return rc;
  auto& cu = drv.plain;
  int devices = 0;
  if (cu.cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices < 2) {
    std::printf("sim_copy_devices: needs 2 devices (SIM_DEVICES), the driver reports %d\n", devices);
    return 2;
  }
  // Device 1's buffer, holding 1000 (allocated in device 1's primary context).
  CUdevice dev1;
  CUcontext ctx1;
  SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx1, dev1));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  CUdeviceptr far = 0;
  SIM_CHECK(cu.cuMemAlloc(&far, 64));
  const uint64_t thousand = 1000;
  SIM_CHECK(cu.cuMemcpyHtoD(far, &thousand, 8));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));

  CUfunction add = simtest::libraryKernel3("sim_add_devices");
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr near = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hnear = 0, hx = 0;
  for (uint64_t i = 1; i <= 240; ++i) {
    const bool fromFar = (i / 40) % 2 == 1;
    SIM_CHECK(simtest::launchAdd(cu, add, near, near, 1, s));                  // near += 1
    SIM_CHECK(cu.cuMemcpyAsync(y, fromFar ? far : near, 8, s));                // y = near or 1000
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, i, s));                        // x = y + i
    SIM_CHECK(cu.cuMemsetD32Async(y, uint32_t(i), 2, s));                      // y = i in both words
    hnear += 1;
    hx = (fromFar ? thousand : hnear) + i;
    uint64_t got = 0;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    SIM_CHECK(cu.cuMemcpyDtoH(&got, x, 8));
    if (got != hx) {
      std::printf("sim_copy_devices: step %llu: x = %llu, expected %llu\n", (unsigned long long)i,
                  (unsigned long long)got, (unsigned long long)hx);
      return 1;
    }
  }
  if (simtest::failedCalls()) return 1;
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_copy_devices: every value right; effects from graphs %llu, eager %llu\n",
              (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager);
  return expectGraphs && simtest::tooFewFromGraphs("sim_copy_devices", c, 40) ? 1 : 0;
}
