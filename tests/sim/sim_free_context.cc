// sim_free_context: a stream-ordered free on the NULL stream of the second
// device, after work graft holds back and replays. A free graft defers past
// that work must be issued in the context of the program's call: on the other
// device's NULL stream it would free the memory before the work that uses it
// ran (the simulator then reports an illegal address).
//   sim_free_context   exit 0: every call succeeded; 1: a call failed.
#include <cstdint>
#include <cstdio>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main() {
  simtest::Driver drv;
  if (int rc = simtest::startProgram("sim_free_context", &drv, nullptr)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  SIM_CHECK(cu.cuInit(0));
  int count = 0;
  SIM_CHECK(cu.cuDeviceGetCount(&count));
  if (count < 2) {
    std::fprintf(stderr, "sim_free_context: needs 2 devices (SIM_DEVICES=2)\n");
    return 2;
  }
  const size_t s3[] = {8, 8, 8};
  CUfunction work = simKernelCreate("free_ctx_work", SIM_KERNEL_LIBRARY, 3, s3, nullptr);
  CUcontext ctx[2];
  for (int d = 0; d < 2; ++d) {
    CUdevice dev;
    SIM_CHECK(cu.cuDeviceGet(&dev, d));
    SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx[d], dev));
  }
  for (uint64_t it = 0; it < 100; ++it) {
    for (int d = 0; d < 2; ++d) {
      SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
      // Device 0: every fifth iteration the last kernel's grid differs, so
      // graft issues the ops it held before it itself (in device 0's context).
      for (uint64_t k = 0; k < 8; ++k) {
        uint64_t a = k, b = it, c = uint64_t(d);
        void* args[] = {&a, &b, &c};
        const unsigned grid = d == 0 && k == 7 && it % 5 == 4 ? 7u : unsigned(1 + k % 3);
        SIM_CHECK(cu.cuLaunchKernel(work, grid, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
      }
      if (d == 1) {
        // Device 1: memory allocated, used and freed on its NULL stream, the
        // free in the middle of ops graft holds back.
        CUdeviceptr p = 0;
        SIM_CHECK(cu.cuMemAllocAsync(&p, 4096, nullptr));
        SIM_CHECK(cu.cuMemsetD32Async(p, unsigned(it), 1024, nullptr));
        for (uint64_t k = 0; k < 8; ++k) {
          if (k == 2) SIM_CHECK(cu.cuMemFreeAsync(p, nullptr));
          uint64_t a = k + 100, b = it, c = 1;
          void* args[] = {&a, &b, &c};
          SIM_CHECK(cu.cuLaunchKernel(work, 2, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
        }
      }
    }
    if (it % 10 == 9) {
      for (int d = 0; d < 2; ++d) {
        SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
        SIM_CHECK(cu.cuCtxSynchronize());
      }
    }
  }
  for (int d = 0; d < 2; ++d) {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
    SIM_CHECK(cu.cuCtxSynchronize());
  }
  if (simtest::failedCalls()) {
    std::printf("sim_free_context: %d call(s) failed\n", simtest::failedCalls());
    return 1;
  }
  std::printf("sim_free_context: 100 iterations on two devices, every call succeeded\n");
  return 0;
}
