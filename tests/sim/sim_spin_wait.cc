// sim_spin_wait: a host that waits for the GPU without any CUDA call.
//
// Each iteration launches the same kernels (so graft, after its warm-up, holds
// them back to match a segment); the last one writes a value into device
// memory that the host then polls directly (in the simulator device memory is
// host memory, like mapped pinned memory on a GPU). Run with SIM_ASYNC_US so
// the simulated GPU progresses on its own. Eagerly this always finishes; a
// tool that held work back forever would spin until the timeout.
//   sim_spin_wait [TIMEOUT_SECONDS]   exit 0: every value arrived; 1: a wait timed out.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  const int timeoutSeconds = argc > 1 ? std::atoi(argv[1]) : 10;
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_spin_wait", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction work = simtest::libraryKernel3("spin_work");
  CUfunction add = simtest::libraryKernel3("sim_add_flag");
  CUdeviceptr flag = simtest::zeroedBuffer(cu), zero = simtest::zeroedBuffer(cu);
  CUstream s;
  cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  for (uint64_t it = 1; it <= 40; ++it) {
    for (uint64_t k = 0; k < 12; ++k) {
      uint64_t a = k, b = 7, c = 9;
      void* args[] = {&a, &b, &c};
      cu.cuLaunchKernel(work, 1 + k % 3, 1, 1, 32, 1, 1, 0, s, args, nullptr);
    }
    uint64_t value = it;  // *flag = *zero + it
    void* args[] = {&flag, &zero, &value};
    cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
    // Wait without any driver call.
    const auto* seen = reinterpret_cast<volatile const uint64_t*>(flag);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
    while (*seen != it) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::printf("sim_spin_wait: iteration %llu: value never arrived (held back?)\n",
                    static_cast<unsigned long long>(it));
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  cu.cuCtxSynchronize();
  std::printf("sim_spin_wait: 40 iterations, every value arrived\n");
  return 0;
}
