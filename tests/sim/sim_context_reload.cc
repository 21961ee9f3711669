// sim_context_reload: a program that creates a context, loops in it, destroys
// it through the CUDA 2.0 ABI of cuCtxDestroy (an ABI graft's table does not
// wrap, as cudart's cudaDeviceReset reaches cuDevicePrimaryCtxReset on a real
// driver), then does the same in a second context. graft must forget the
// first context's graphs at the destroy, before the driver does.
//   sim_context_reload    exit 0: every read-back right; 1: a wrong value or a failed call.
// check_context_reload.py runs it under graft and checks the exit report.
#include <cstdint>
#include <cstdio>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main() {
  simtest::Driver drv;
  if (int rc = simtest::startProgram("sim_context_reload", &drv, nullptr)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  SIM_CHECK(cu.cuInit(0));
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  SIM_CHECK(drv.getProcAddress("cuCtxCreate", &p, 12050, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  auto ctxCreate = reinterpret_cast<CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice)>(p);
  SIM_CHECK(drv.getProcAddress("cuCtxDestroy", &p, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  auto ctxDestroyV1 = reinterpret_cast<CUresult (*)(CUcontext)>(p);
  if (!ctxCreate || !ctxDestroyV1) return 1;
  CUfunction add = simtest::libraryKernel3("sim_add_reload");
  for (int round = 0; round < 2; ++round) {
    CUcontext ctx = nullptr;
    SIM_CHECK(ctxCreate(&ctx, nullptr, 0, 0));
    CUstream s;
    SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x, y;
    SIM_CHECK(cu.cuMemAlloc(&x, 64));
    SIM_CHECK(cu.cuMemAlloc(&y, 64));
    SIM_CHECK(cu.cuMemsetD8(x, 0, 64));
    uint64_t hx = 0;
    for (uint64_t it = 1; it <= 120; ++it) {
      for (uint64_t k = 0; k < 6; ++k) {
        CUdeviceptr to = k % 2 ? x : y, from = k % 2 ? y : x;
        const uint64_t inc = k == 0 ? it : 1;
        SIM_CHECK(simtest::launchAdd(cu, add, to, from, inc, s));
        hx += inc;  // x and y alternate, each one more than the other
      }
      if (it % 40 == 0) {
        uint64_t got = 0;
        SIM_CHECK(cu.cuStreamSynchronize(s));
        SIM_CHECK(cu.cuMemcpyDtoH(&got, x, 8));
        if (got != hx) {
          std::printf("sim_context_reload: round %d iteration %llu: x = %llu, expected %llu\n", round,
                      (unsigned long long)it, (unsigned long long)got, (unsigned long long)hx);
          return 1;
        }
      }
    }
    SIM_CHECK(ctxDestroyV1(ctx));
  }
  if (simtest::failedCalls()) {
    std::printf("sim_context_reload: %d call(s) failed\n", simtest::failedCalls());
    return 1;
  }
  std::printf("sim_context_reload: two contexts, 120 iterations each, every value right\n");
  return 0;
}
