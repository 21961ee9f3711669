// sim_early_lookups: a program whose library (libsim_early_lookups.so) found
// the driver from its own constructor, before a preloaded interposer's
// constructors ran (cuBLASLt does this; under graft such programs crashed at
// load). Runs a loop with the functions found then: a launch chain on a
// stream and a read-back every iteration.
//   sim_early_lookups [--expect-graphs]
// Checks every value (exit 1 on a wrong one); --expect-graphs asks that at
// least 80 % of the kernels ran from graphs, i.e. the functions looked up
// before graft's constructors are graft's wrappers.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sim_api.h"
#include "sim_early_lookups.h"

int main(int argc, char** argv) {
  const bool expectGraphs = argc == 2 && std::strcmp(argv[1], "--expect-graphs") == 0;
  if (argc > 2 || (argc == 2 && !expectGraphs)) {
    std::printf("usage: sim_early_lookups [--expect-graphs]\n");
    return 2;
  }
  const EarlyLookups& early = earlyLookups();
  if (!early.loaded || !early.byName || !early.exported) {
    std::printf("sim_early_lookups: lookups from the constructor failed (table %d, by name %d, exported %d)\n",
                early.loaded, early.byName, early.exported);
    return 1;
  }
  const simtest::DriverApi& cu = early.driver->plain;
  CUcontext ctx;
  if (!simtest::openPrimaryContext(cu, &ctx)) {
    std::printf("sim_early_lookups: no context\n");
    return 2;
  }
  CUfunction add = simtest::libraryKernel3("sim_add_early");
  CUstream s;
  cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (uint64_t i = 1; i <= 300; ++i) {
    for (int k = 0; k < 4; ++k) {
      simtest::launchAdd(cu, add, y, x, i + k, s);  // y = x + i + k
      simtest::launchAdd(cu, add, x, y, 1, s);      // x = y + 1
      hy = hx + i + k;
      hx = hy + 1;
    }
    uint64_t got = 0;
    cu.cuStreamSynchronize(s);
    cu.cuMemcpyDtoH(&got, x, 8);
    if (got != hx) {
      std::printf("sim_early_lookups: iteration %llu: x = %llu, expected %llu\n", (unsigned long long)i,
                  (unsigned long long)got, (unsigned long long)hx);
      return 1;
    }
  }
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_early_lookups: every value right; kernels from graphs %llu, eager %llu\n",
              (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager);
  return expectGraphs && simtest::tooFewFromGraphs("sim_early_lookups", c, 80) ? 1 : 0;
}
