// sim_random_variants: a loop whose step comes in a few variants (as a
// server's batches of a few sizes), picked in a seeded random order, each
// step ending with a read-back (cuStreamSynchronize and a synchronous copy).
// The op sequence repeats per variant but never as a whole period; graft
// learns each variant where it happens to come several times in a row, and
// replays it wherever it comes later. Every step's value is checked.
//   sim_random_variants [--steps N] [--variants V] [--ops K] [--expect-graphs PCT]
// Exit 1 on a wrong value or (--expect-graphs) too few effects from graphs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  uint64_t steps = 600, variants = 3, ops = 12, expectPct = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const uint64_t v = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--steps") steps = v;
    else if (a == "--variants") variants = v;
    else if (a == "--ops") ops = v;
    else if (a == "--expect-graphs") expectPct = v;
    else {
      std::printf("usage: sim_random_variants [--steps N] [--variants V] [--ops K] [--expect-graphs PCT]\n");
      return 2;
    }
  }
  if (argc % 2 == 0 || variants < 1 || variants > 16 || ops < 2) {
    std::printf("sim_random_variants: arguments in pairs, --variants 1..16, --ops at least 2\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_random_variants", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_variants");
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  std::mt19937_64 order(777);
  uint64_t expected = 0;
  bool ok = true;
  for (uint64_t step = 1; step <= steps && ok; ++step) {
    const unsigned variant = unsigned(order() % variants);
    for (uint64_t k = 0; k < ops; ++k) {
      // The variant sets the grid (the launch's shape); the added value changes every step.
      uint64_t add1 = step * 3 + k;
      CUdeviceptr to = k % 2 ? x : y, from = k % 2 ? y : x;
      void* args[] = {&to, &from, &add1};
      SIM_CHECK(cu.cuLaunchKernel(add, 1 + variant, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      expected += add1;
    }
    uint64_t got = 0;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    SIM_CHECK(cu.cuMemcpyDtoH(&got, ops % 2 ? y : x, 8));
    if (got != expected) {
      std::printf("sim_random_variants: step %llu: %llu, expected %llu\n", (unsigned long long)step,
                  (unsigned long long)got, (unsigned long long)expected);
      ok = false;
    }
  }
  SimCounters c{};
  simCounters(&c);
  ok &= simtest::failedCalls() == 0;
  std::printf("sim_random_variants: %llu steps in %llu variants x %llu ops, %s; effects from graphs %llu, eager "
              "%llu, graph launches %llu\n",
              (unsigned long long)steps, (unsigned long long)variants, (unsigned long long)ops,
              ok ? "every value right" : "WRONG VALUES", (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager, (unsigned long long)c.graphLaunches);
  if (!ok) return 1;
  if (expectPct && simtest::tooFewFromGraphs("sim_random_variants", c, expectPct)) return 1;
  return 0;
}
