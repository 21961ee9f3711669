// sim_alternating_steps: a long step (2 x HALF launches on the legacy stream,
// the second half the first one mirrored) whose odd instances carry one
// launch more in the middle, so the launch sequence repeats every two steps
// (2 x 2 x HALF + 1 ops), not every step. Values are checked against a host
// mirror every 10 steps.
//   sim_alternating_steps [--half N] [--steps N] [--same] [--vary-memset] [--vary-copy] [--expect-graphs PCT]
// --same: no launch more on odd steps (every step alike).
// --vary-memset: a memset whose size changes every step, a quarter into it;
// --vary-copy: the same with a copy from host memory.
// --expect-graphs: at least PCT % of the kernels ran from graphs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {
uint32_t mix32(uint32_t x) { return uint32_t(simMix64(x)); }
}  // namespace

int main(int argc, char** argv) {
  int half = 1500, steps = 120;
  bool same = false, varyMemset = false, varyCopy = false;
  uint64_t expectPct = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--half") == 0 && i + 1 < argc) half = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--same") == 0) same = true;
    else if (std::strcmp(argv[i], "--vary-memset") == 0) varyMemset = true;
    else if (std::strcmp(argv[i], "--vary-copy") == 0) varyCopy = true;
    else if (std::strcmp(argv[i], "--expect-graphs") == 0 && i + 1 < argc) expectPct = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::printf("usage: sim_alternating_steps [--half N] [--steps N] [--same] [--vary-memset] [--vary-copy] [--expect-graphs PCT]\n");
      return 2;
    }
  }
  if (half < 2 || half > 100000 || steps < 1) {
    std::printf("sim_alternating_steps: --half 2..100000, --steps at least 1\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_alternating_steps", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction kernels[4] = {simtest::libraryKernel3("sim_add_alt0"), simtest::libraryKernel3("sim_add_alt1"),
                           simtest::libraryKernel3("sim_add_alt2"), simtest::libraryKernel3("sim_add_alt3")};
  CUdeviceptr d[4];
  for (auto& b : d) b = simtest::zeroedBuffer(cu, 64);
  struct Op {
    int fn, dst, src;
    uint64_t add;
  };
  std::vector<Op> ops;
  for (int j = 0; j < half; ++j) {
    const uint32_t h = mix32(uint32_t(j) * 0x85ebca6bu + 27080u);
    const int dst = int((h >> 4) % 4);
    ops.push_back({int(h % 4), dst, int((uint32_t(dst) + 1 + (h >> 8) % 3) % 4), (h >> 12) % 1000});
  }
  uint64_t host[4] = {};
  const CUdeviceptr scratch = simtest::zeroedBuffer(cu, 64);
  std::deque<std::vector<uint8_t>> sources;  // the copies' host bytes
  auto launch = [&](const Op& op, uint64_t add) {
    SIM_CHECK(simtest::launchAdd(cu, kernels[op.fn], d[op.dst], d[op.src], add, nullptr));
    host[op.dst] = host[op.src] + add;
  };
  SimCounters before{};
  simCounters(&before);
  for (int i = 0; i < steps; ++i) {
    for (int pos = 0; pos < 2 * half; ++pos) {
      if (pos == half && i % 2 == 1 && !same) launch({3, 0, 3, 0}, uint64_t(i));  // odd steps: one more launch
      if (pos == half / 2 && (varyCopy || varyMemset)) {
        // The first 8 bytes of `scratch` become 8 x byte (i), by a copy or a
        // memset of 8 to 57 bytes; then d[0] = scratch + i.
        const size_t bytes = 8 + size_t(mix32(uint32_t(i)) % 50);
        if (varyCopy) {
          sources.emplace_back(64, uint8_t(i));  // never rewritten
          SIM_CHECK(cu.cuMemcpyHtoDAsync(scratch, sources.back().data(), bytes, nullptr));
        } else {
          SIM_CHECK(cu.cuMemsetD8Async(scratch, uint8_t(i), bytes, nullptr));
        }
        SIM_CHECK(simtest::launchAdd(cu, kernels[0], d[0], scratch, uint64_t(i), nullptr));
        host[0] = uint64_t(i & 0xff) * 0x0101010101010101ull + uint64_t(i);
      }
      const Op& op = ops[size_t(pos < half ? pos : 2 * half - 1 - pos)];
      launch(op, op.add + (pos % 16 == 0 ? uint64_t(i % 3) : 0));  // a value that changes: patched
    }
    if (i % 10 == 9 || i == steps - 1) {
      for (int k = 0; k < 4; ++k) {
        uint64_t got = 0;
        SIM_CHECK(cu.cuMemcpyDtoH(&got, d[k], 8));
        if (got != host[k]) {
          std::printf("sim_alternating_steps: step %d: buffer %d holds %llu, expected %llu\n", i, k,
                      (unsigned long long)got, (unsigned long long)host[k]);
          return 1;
        }
      }
    }
  }
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_alternating_steps: %d steps of %d and %d launches, every value right; kernels from graphs %llu, "
              "eager %llu\n",
              steps, 2 * half, 2 * half + 1, (unsigned long long)(c.effectsGraph - before.effectsGraph),
              (unsigned long long)(c.effectsEager - before.effectsEager));
  if (simtest::failedCalls()) return 1;
  if (expectPct && simtest::tooFewFromGraphs("sim_alternating_steps", c, expectPct)) return 1;
  return 0;
}
