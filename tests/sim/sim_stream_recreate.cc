// sim_stream_recreate: streams destroyed and created again every 30
// iterations, alternately blocking and non-blocking (the simulated driver
// hands the freed handle to the next stream), mixed with launches on the
// legacy stream. A blocking stream is ordered against the legacy stream by
// the driver; for a non-blocking one the program orders with events. A tool
// that kept a recycled handle's old flags would drop the implicit ordering.
// The host reads the values back every N iterations (default 50): each N
// cuts the loop into other sequences, which graft may build into graphs long
// after it saw them, when the handle names a stream with other flags.
// --recreate-until N: the last stream is created before iteration N and kept
// to the end (a program whose streams settle): a graph dropped because its
// handle was recreated with other flags must be built again.
//   sim_stream_recreate [--expect-graphs [PERCENT]] [--check-every N] [--recreate-until N]
// --expect-graphs: at least PERCENT (default 50) of the kernels ran from graphs.
// exit 0: every read-back right (and, with --expect-graphs, most kernels ran
// from graphs); 1 otherwise.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  uint64_t expectGraphPercent = 0;
  uint64_t checkEvery = 50;
  uint64_t recreateUntil = ~uint64_t(0);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expect-graphs") == 0) {
      expectGraphPercent = 50;
      if (i + 1 < argc && argv[i + 1][0] != '-') expectGraphPercent = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--check-every") == 0 && i + 1 < argc) {
      checkEvery = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--recreate-until") == 0 && i + 1 < argc) {
      recreateUntil = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: sim_stream_recreate [--expect-graphs [PERCENT]] [--check-every N] [--recreate-until N]\n");
      return 2;
    }
  }
  if (checkEvery == 0) checkEvery = 1;
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_stream_recreate", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_recreate");
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  CUevent e;
  cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
  CUstream s = nullptr, first = nullptr;
  bool blocking = true, reused = false;
  uint64_t hx = 0, hy = 0;
  for (uint64_t it = 0; it < 600; ++it) {
    if (it % 30 == 0 && it < recreateUntil) {
      if (s) {
        // All of it: the last legacy-stream add is not ordered before the new
        // stream's first add when that stream is non-blocking.
        cu.cuCtxSynchronize();
        cu.cuStreamDestroy(s);
      }
      blocking = (it / 30) % 2 == 1;  // non-blocking first: a stale flag would then be "non-blocking"
      cu.cuStreamCreate(&s, blocking ? 0 : CU_STREAM_NON_BLOCKING);
      if (!first) first = s;
      reused |= it > 0 && s == first;
    }
    for (uint64_t k = 0; k < 3; ++k) {
      simtest::launchAdd(cu, add, y, x, it + k, s);  // y = x + it + k
      hy = hx + it + k;
      if (!blocking) {
        cu.cuEventRecord(e, s);
        cu.cuStreamWaitEvent(nullptr, e, 0);
      }
      simtest::launchAdd(cu, add, x, y, 1, nullptr);  // x = y + 1, legacy stream
      hx = hy + 1;
      if (!blocking) {
        cu.cuEventRecord(e, nullptr);
        cu.cuStreamWaitEvent(s, e, 0);
      }
    }
    if (it % checkEvery == checkEvery - 1) {
      uint64_t got[2] = {};
      cu.cuStreamSynchronize(s);
      cu.cuMemcpyDtoH(&got[0], x, 8);
      cu.cuMemcpyDtoH(&got[1], y, 8);
      if (got[0] != hx || got[1] != hy) {
        std::printf("sim_stream_recreate: iteration %llu (%s stream): x y = %llu %llu, expected %llu %llu\n",
                    (unsigned long long)it, blocking ? "blocking" : "non-blocking", (unsigned long long)got[0],
                    (unsigned long long)got[1], (unsigned long long)hx, (unsigned long long)hy);
        return 1;
      }
    }
  }
  cu.cuCtxSynchronize();
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_stream_recreate: 600 iterations, every value right, handles %s; kernels from graphs %llu, "
              "eager %llu\n",
              reused ? "reused" : "never reused", (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager);
  if (!reused) {
    std::printf("sim_stream_recreate: the simulated driver never reused a stream handle\n");
    return 1;
  }
  return simtest::tooFewFromGraphs("sim_stream_recreate", c, expectGraphPercent) ? 1 : 0;
}
