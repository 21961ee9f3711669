// sim_pool_loop: a training-shaped loop that allocates its temporaries with
// cuMemAllocAsync every iteration, chains data through them with sim_add
// kernels, frees them with cuMemFreeAsync (on two streams) and reads the
// result each iteration.
//   sim_pool_loop [--same-addresses]
// Checks every iteration's value (exit 1 on a wrong one); with
// --same-addresses also that, after a warm-up, every iteration got the same
// addresses (what graft's pool promises with GRAFT_POOL=1).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  const bool wantSame = argc > 1 && std::strcmp(argv[1], "--same-addresses") == 0;
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_pool_loop", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_pool");
  CUstream s1, s2;
  cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING);
  cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING);
  CUevent ev;
  cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
  CUdeviceptr src, dst;
  cu.cuMemAlloc(&src, 64);
  cu.cuMemAlloc(&dst, 64);
  cu.cuMemsetD8(src, 0, 64);
  std::vector<std::vector<CUdeviceptr>> seen;
  for (uint64_t it = 1; it <= 60; ++it) {
    CUdeviceptr a = 0, b = 0, c = 0;
    if (cu.cuMemAllocAsync(&a, 256, s1) || cu.cuMemAllocAsync(&b, 4096, s1) ||
        cu.cuMemAllocAsync(&c, 3u << 20, s1)) {
      std::printf("sim_pool_loop: cuMemAllocAsync failed\n");
      return 1;
    }
    seen.push_back({a, b, c});
    simtest::launchAdd(cu, add, a, src, it, s1);      // a = it
    simtest::launchAdd(cu, add, b, a, 1, s1);         // b = it + 1
    cu.cuEventRecord(ev, s1);
    cu.cuStreamWaitEvent(s2, ev, 0);
    simtest::launchAdd(cu, add, c, b, 1, s2);         // c = it + 2 (on the other stream)
    simtest::launchAdd(cu, add, dst, c, 0, s2);       // dst = it + 2
    cu.cuMemFreeAsync(a, s1);
    cu.cuMemFreeAsync(b, s2);  // its last use is on s2
    cu.cuMemFreeAsync(c, s2);
    uint64_t value = 0;
    cu.cuStreamSynchronize(s2);
    cu.cuMemcpyDtoH(&value, dst, sizeof(value));
    if (value != it + 2) {
      std::printf("sim_pool_loop: iteration %llu: got %llu, expected %llu\n", (unsigned long long)it,
                  (unsigned long long)value, (unsigned long long)(it + 2));
      return 1;
    }
  }
  if (wantSame) {
    for (size_t i = 10; i < seen.size(); ++i) {
      if (seen[i] != seen[9]) {
        std::printf("sim_pool_loop: iteration %zu got other addresses than iteration 10\n", i + 1);
        return 1;
      }
    }
  }
  cu.cuCtxSynchronize();
  std::printf("sim_pool_loop: 60 iterations, every value right%s\n",
              wantSame ? ", same addresses every iteration" : "");
  return 0;
}
