// sim_event_timing: cuEventElapsedTime around a loop's work must measure that
// work. Each iteration records a timing event, launches kernels, records a
// second timing event (and an untimed marker event, which graft may graph),
// waits for the second and asks for the elapsed time. The simulated clock
// advances by one unit per executed op or graph node, so the elapsed time
// must cover at least the kernels in between, graphs or not. A tool that
// re-recorded both events after a graph would measure almost nothing. Every
// 10 iterations the events are recreated, each under the other's old handle.
//   sim_event_timing   exit 0: every measurement covered its kernels; 1: one did not.
#include <cstdint>
#include <cstdio>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main() {
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_event_timing", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction work = simtest::libraryKernel3("timed_work");
  CUstream s;
  cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUevent start, stop, marker;
  cu.cuEventCreate(&start, 0);
  cu.cuEventCreate(&stop, CU_EVENT_BLOCKING_SYNC);
  cu.cuEventCreate(&marker, CU_EVENT_DISABLE_TIMING);
  constexpr int kKernels = 20;
  int bad = 0;
  for (uint64_t it = 0; it < 40; ++it) {
    cu.cuEventRecord(start, s);
    for (uint64_t k = 0; k < kKernels; ++k) {
      uint64_t a = k, b = it, c = 3;
      void* args[] = {&a, &b, &c};
      cu.cuLaunchKernel(work, 1 + k % 4, 1, 1, 32, 1, 1, 0, s, args, nullptr);
      if (k == kKernels / 2) cu.cuEventRecord(marker, s);
    }
    cu.cuEventRecord(stop, s);
    cu.cuEventSynchronize(stop);
    float ms = 0;
    const CUresult r = cu.cuEventElapsedTime(&ms, start, stop);
    const double units = double(ms) * 1000.0;
    if (r != CUDA_SUCCESS || units < kKernels - 0.5) {
      std::printf("sim_event_timing: iteration %llu: elapsed %.1f units (status %d), expected >= %d\n",
                  static_cast<unsigned long long>(it), units, int(r), kKernels);
      ++bad;
    }
    if (it % 10 == 9) {
      // New events under recycled handles (the simulated driver reuses the
      // last freed first): the timing start event now has the untimed
      // marker's old handle, and the other way round.
      const CUevent oldStart = start, oldMarker = marker;
      cu.cuEventDestroy(start);
      cu.cuEventDestroy(marker);
      cu.cuEventCreate(&start, 0);
      cu.cuEventCreate(&marker, CU_EVENT_DISABLE_TIMING);
      if (start != oldMarker || marker != oldStart) {
        std::printf("sim_event_timing: the simulated driver did not recycle event handles\n");
        return 1;
      }
    }
  }
  cu.cuCtxSynchronize();
  if (bad) return 1;
  std::printf("sim_event_timing: 40 iterations, every elapsed time covered its %d kernels\n", kKernels);
  return 0;
}
