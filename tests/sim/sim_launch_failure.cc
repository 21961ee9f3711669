// sim_launch_failure: a loop whose replays fail (SIM_FAIL injects driver
// errors into graft's cuGraphLaunch or node updates) must still compute what
// eager computes. Each iteration launches 12 kernels and then adds k to an
// accumulator on the device; k changes once, from 1 to 2, at iteration CHANGE
// (so one replay patches it and the ones after do not). With QUERY=1 the loop
// also queries an idle second stream in the middle of each iteration, so graft
// learns of a failed launch while it holds ops that match its segment.
//   CHANGE=N QUERY=0|1 sim_launch_failure   exit 0: the accumulator is right
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main() {
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_launch_failure", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  const size_t sizes[] = {8, 8, 8};
  CUfunction work = simKernelCreate("spin_work", SIM_KERNEL_LIBRARY, 3, sizes, nullptr);
  CUfunction add = simKernelCreate("sim_add_acc", SIM_KERNEL_LIBRARY, 3, sizes, nullptr);
  CUdeviceptr acc;
  cu.cuMemAlloc(&acc, 64);
  cu.cuMemsetD8(acc, 0, 64);
  CUstream s, idle;
  cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  cu.cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING);
  const int change = std::getenv("CHANGE") ? std::atoi(std::getenv("CHANGE")) : 30;
  const bool query = std::getenv("QUERY") && std::atoi(std::getenv("QUERY"));
  uint64_t want = 0;
  for (int it = 1; it <= 60; ++it) {
    for (uint64_t k = 0; k < 12; ++k) {
      uint64_t a = k, b = 7, c = 9;
      void* args[] = {&a, &b, &c};
      cu.cuLaunchKernel(work, 1 + k % 3, 1, 1, 32, 1, 1, 0, s, args, nullptr);
      if (query && k == 5) cu.cuStreamQuery(idle);
    }
    uint64_t kk = it < change ? 1 : 2;
    want += kk;
    void* args[] = {&acc, &acc, &kk};
    cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  cu.cuCtxSynchronize();
  const uint64_t got = *reinterpret_cast<volatile uint64_t*>(acc);
  std::printf("sim_launch_failure: accumulator %llu, eager computes %llu: %s\n",
              static_cast<unsigned long long>(got), static_cast<unsigned long long>(want),
              got == want ? "ok" : "WRONG");
  return got == want ? 0 : 1;
}
