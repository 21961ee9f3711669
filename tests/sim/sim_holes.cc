// sim_holes: a step of N launches on the legacy stream that repeats but for
// "holes": ops at a few places whose shape changes from step to step (a
// memset or copy whose size, or a kernel whose grid, changes). graft should
// leave those ops eager and replay the rest from graphs (PeriodDetector
// holes, Engine::buildFromPeriod). Values are checked against a host mirror
// every few steps and at every read-back.
//   sim_holes [--ops N] [--steps N] [--holes P,P,...] [--kind memset|copy|grid|dtoh|htod|memset2]
//             [--cycle unique|const|inc|ab|aab|abc|rand3] [--side] [--side-bare] [--interleave]
//             [--sync before|after] [--sync-kind stream|dtoh] [--extra POS] [--same-kernel]
//             [--check-every N] [--vary-from S] [--vary-until S] [--layer-len M] [--no-holes]
//             [--inner POS,ITERS] [--dep] [--expect-graphs PCT] [--max-late-builds N]
// --holes: places (0..N) in the step before whose launch a hole goes (N: at
//   the step's end); default one, a quarter into the step.
// --kind: what varies at a hole: a memset of scratch (8 + v bytes, byte i),
//   a copy from host memory (8 + v bytes), or a launch with grid 1 + v; each
//   followed by a launch that reads what it wrote. dtoh: a launch, then a
//   read-back (cuMemcpyDtoH, a sync) of 8 + v bytes of what it wrote, checked;
//   htod: a synchronous copy (cuMemcpyHtoD) of 8 + v bytes, then a launch;
//   memset2: two memsets of different sizes in a row (two holes side by side).
// --cycle: v per step: a new value every step (unique, drawn from 50), or v
//   cycling with a short period (ab, aab, abc); const: v never changes; inc:
//   v repeats every 53 steps; rand3: v one of 3 at random.
// --side: each hole is issued on a side stream, forked from the main stream
//   by an event and joined back by another (with a launch on each side);
//   --side-bare: the side stream holds only the hole's op; --interleave:
//   launches on the main stream between the side stream's ops.
// --sync: a cuStreamSynchronize (--sync-kind stream) or a read-back with
//   cuMemcpyDtoH, checked at once (dtoh), right before or after each hole.
// --extra POS: odd steps carry one launch more, before launch POS.
// --same-kernel: every launch of the step uses the same kernel and grid.
// --check-every N: read every buffer back every N steps (0: at the end only).
// --vary-from S, --vary-until S: v stays the same before step S (after).
// --layer-len M: the step's launches repeat every M (layers alike), and each
//   layer starts with a memset whose size depends on the layer's index (the
//   same in every step): a layer is a period with a hole, the step a period
//   without one. --no-holes: no hole that changes from step to step.
// --inner POS,ITERS: before launch POS, an inner loop of ITERS iterations of
//   three launches (a short period, built unrolled, then replayed as
//   segments inside the step).
// --dep: right before each hole, a launch writes what the hole's op
//   overwrites (memset, copy) or reads (grid): the hole's op, issued
//   eagerly, must run after the graph that holds that launch.
// --expect-graphs PCT: at least PCT % of the effects came from graphs.
// --max-late-builds N: at most N graphs instantiated in the second half of
//   the run (graft's graphs stop changing once the holes are learned).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {
uint32_t mix32(uint32_t x) { return uint32_t(simMix64(x)); }
constexpr int kBuffers = 8;
}  // namespace

int main(int argc, char** argv) {
  int n = 200, steps = 300, checkEvery = 10, extra = -1;
  std::vector<int> holes;
  std::string kind = "memset", cycle = "unique", sync, syncKind = "stream";
  bool side = false, sameKernel = false, sideBare = false, noHoles = false;
  int layerLen = 0, innerPos = -1, innerIters = 0;
  bool dep = false, interleave = false;
  int varyFrom = 0, varyUntil = 1 << 30;
  uint64_t expectPct = 0;
  long maxLateBuilds = -1;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return std::strcmp(argv[i], name) == 0 && i + 1 < argc; };
    if (arg("--ops")) n = std::atoi(argv[++i]);
    else if (arg("--steps")) steps = std::atoi(argv[++i]);
    else if (arg("--holes")) {
      for (char* p = argv[++i]; *p;) {
        holes.push_back(int(std::strtol(p, &p, 10)));
        if (*p == ',') ++p;
        else if (*p) return 2;
      }
    } else if (arg("--kind")) kind = argv[++i];
    else if (arg("--cycle")) cycle = argv[++i];
    else if (std::strcmp(argv[i], "--side") == 0) side = true;
    else if (arg("--sync")) sync = argv[++i];
    else if (arg("--sync-kind")) syncKind = argv[++i];
    else if (arg("--extra")) extra = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--same-kernel") == 0) sameKernel = true;
    else if (std::strcmp(argv[i], "--side-bare") == 0) side = sideBare = true;
    else if (std::strcmp(argv[i], "--no-holes") == 0) noHoles = true;
    else if (std::strcmp(argv[i], "--dep") == 0) dep = true;
    else if (std::strcmp(argv[i], "--interleave") == 0) interleave = true;
    else if (arg("--layer-len")) layerLen = std::atoi(argv[++i]);
    else if (arg("--inner")) {
      char* p = argv[++i];
      innerPos = int(std::strtol(p, &p, 10));
      if (*p++ != ',') return 2;
      innerIters = std::atoi(p);
    }
    else if (arg("--vary-from")) varyFrom = std::atoi(argv[++i]);
    else if (arg("--vary-until")) varyUntil = std::atoi(argv[++i]);
    else if (arg("--check-every")) checkEvery = std::atoi(argv[++i]);
    else if (arg("--expect-graphs")) expectPct = std::strtoull(argv[++i], nullptr, 10);
    else if (arg("--max-late-builds")) maxLateBuilds = std::atol(argv[++i]);
    else {
      std::printf("usage: sim_holes [--ops N] [--steps N] [--holes P,...] [--kind memset|copy|grid|dtoh|htod|memset2] "
                  "[--cycle unique|const|inc|ab|aab|abc|rand3] [--side] [--sync before|after] [--sync-kind stream|dtoh] "
                  "[--extra POS] [--same-kernel] [--check-every N] [--vary-from S] [--vary-until S] [--side-bare] "
                  "[--layer-len M] [--no-holes] [--inner POS,ITERS] [--dep] [--interleave] [--expect-graphs PCT] "
                  "[--max-late-builds N]\n");
      return 2;
    }
  }
  if (holes.empty() && !noHoles) holes.push_back(n / 4);
  if (noHoles) holes.clear();
  if (n < 1 || steps < 1 || (kind != "memset" && kind != "copy" && kind != "grid" && kind != "dtoh" && kind != "htod" &&
                                     kind != "memset2") ||
      (cycle != "unique" && cycle != "const" && cycle != "inc" && cycle != "rand3" && cycle != "ab" && cycle != "aab" && cycle != "abc") ||
      (!sync.empty() && sync != "before" && sync != "after") || (syncKind != "stream" && syncKind != "dtoh")) {
    std::printf("sim_holes: bad arguments\n");
    return 2;
  }
  for (int p : holes)
    if (p < 0 || p > n) return 2;

  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_holes", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  constexpr int kKernels = 7;
  CUfunction kernels[kKernels];
  for (int k = 0; k < kKernels; ++k) kernels[k] = simtest::libraryKernel3(("sim_add_holes" + std::to_string(k)).c_str());
  const CUfunction holeKernel = simtest::libraryKernel3("sim_add_holes_grid");
  CUdeviceptr d[kBuffers];
  for (auto& b : d) b = simtest::zeroedBuffer(cu, 64);
  uint64_t host[kBuffers] = {};
  std::vector<CUdeviceptr> scratch, sideBuf;  // per hole
  for (size_t h = 0; h < holes.size(); ++h) {
    scratch.push_back(simtest::zeroedBuffer(cu, 128));
    sideBuf.push_back(simtest::zeroedBuffer(cu, 64));
  }
  const CUdeviceptr layerScratch = simtest::zeroedBuffer(cu, 128);
  CUstream sideStream = nullptr;
  CUevent fork = nullptr, join = nullptr;
  if (side) {
    SIM_CHECK(cu.cuStreamCreate(&sideStream, CU_STREAM_NON_BLOCKING));
    SIM_CHECK(cu.cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu.cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  }
  struct Op {
    int fn, dst, src;
    unsigned grid;
    uint64_t add;
  };
  std::vector<Op> ops;
  for (int j = 0; j < n; ++j) {
    const uint32_t h = mix32(uint32_t(layerLen > 0 ? j % layerLen : j) * 0x85ebca6bu + 4711u);
    const int dst = int((h >> 4) % kBuffers);
    ops.push_back({sameKernel ? 0 : int(h % kKernels), dst, int((uint32_t(dst) + 1 + (h >> 8) % (kBuffers - 1)) % kBuffers),
                   sameKernel ? 1u : 1u + (h >> 20) % 3, (h >> 12) % 1000});
  }
  std::deque<std::vector<uint8_t>> sources;  // the copies' host bytes, never rewritten
  int bad = 0;
  auto launch = [&](CUfunction f, unsigned grid, int dst, CUdeviceptr from, uint64_t fromValue, uint64_t add,
                    CUstream s) {
    CUdeviceptr to = d[dst];
    void* args[] = {&to, &from, &add};
    SIM_CHECK(cu.cuLaunchKernel(f, grid, 1, 1, 1, 1, 1, 0, s, args, nullptr));
    host[dst] = fromValue + add;
  };
  auto readBack = [&](int step, int k) {
    uint64_t got = 0;
    SIM_CHECK(cu.cuMemcpyDtoH(&got, d[k], 8));
    if (got != host[k] && bad++ < 5)
      std::printf("sim_holes: step %d: buffer %d holds %llu, expected %llu\n", step, k, (unsigned long long)got,
                  (unsigned long long)host[k]);
  };
  auto syncNow = [&](int step, int k) {
    if (syncKind == "stream") SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    else readBack(step, k);
  };
  SimCounters before{}, half{};
  simCounters(&before);
  for (int i = 0; i < steps; ++i) {
    if (i == steps / 2) simCounters(&half);
    uint32_t v;  // the step's variant
    if (cycle == "unique") v = 1 + mix32(uint32_t(i)) % 50;
    else if (cycle == "const") v = 1;
    else if (cycle == "inc") v = 1 + i % 53;
    else if (cycle == "rand3") v = 1 + mix32(uint32_t(i) + 99) % 3 * 7;
    else if (cycle == "ab") v = 1 + i % 2 * 7;
    else if (cycle == "aab") v = 1 + (i % 3 == 2) * 7;
    else v = 1 + i % 3 * 7;
    if (i < varyFrom || i >= varyUntil) v = 3;
    for (int pos = 0; pos <= n; ++pos) {
      if (pos == extra && i % 2 == 1) launch(kernels[1], 1, 0, d[3], host[3], uint64_t(i), nullptr);
      for (size_t h = 0; h < holes.size(); ++h) {
        if (holes[h] != pos) continue;
        const int target = int(h * 3 % kBuffers);
        if (dep) {
          // (on the main stream, before any fork)
          CUdeviceptr to = kind == "grid" ? d[(target + 1) % kBuffers] : scratch[h], from = d[(target + 4) % kBuffers];
          uint64_t add = 77;
          void* args[] = {&to, &from, &add};
          SIM_CHECK(cu.cuLaunchKernel(kernels[6], 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
          if (kind == "grid") host[(target + 1) % kBuffers] = host[(target + 4) % kBuffers] + 77;
        }
        if (sync == "before") syncNow(i, target);
        CUstream s = nullptr;
        if (side) {
          SIM_CHECK(cu.cuEventRecord(fork, nullptr));
          SIM_CHECK(cu.cuStreamWaitEvent(sideStream, fork, 0));
          s = sideStream;
        }
        // Main stream work between the side stream's ops (buffers the side
        // stream does not touch).
        auto mainBetween = [&] {
          if (!side || !interleave) return;
          const int to = (target + 5) % kBuffers, from = (target + 6) % kBuffers;
          launch(kernels[0], 1, to, d[from], host[from], 1, nullptr);
        };
        mainBetween();
        // The hole: scratch[h] (or the target) gets a value of the step by an
        // op whose shape changes; then a fixed launch reads it.
        const uint64_t pattern = uint64_t(i & 0xff) * 0x0101010101010101ull;
        if (kind == "grid") {
          const int src = (target + 1) % kBuffers;
          launch(holeKernel, 1 + v, target, d[src], host[src], uint64_t(i), s);
        } else if (kind == "dtoh") {
          const int src = (target + 1) % kBuffers;
          launch(kernels[2], 1, target, d[src], host[src], uint64_t(i) + 5, s);
          uint8_t bytes[64] = {};
          SIM_CHECK(cu.cuMemcpyDtoH(bytes, d[target], 8 + v));
          uint64_t got;
          std::memcpy(&got, bytes, 8);
          if (got != host[target] && bad++ < 5)
            std::printf("sim_holes: step %d: read back %llu, expected %llu\n", i, (unsigned long long)got,
                        (unsigned long long)host[target]);
        } else {
          const size_t bytes = 8 + v;
          if (kind == "copy") {
            sources.emplace_back(128, uint8_t(i));
            SIM_CHECK(cu.cuMemcpyHtoDAsync(scratch[h], sources.back().data(), bytes, s));
          } else if (kind == "htod") {
            std::vector<uint8_t> src(128, uint8_t(i));
            SIM_CHECK(cu.cuMemcpyHtoD(scratch[h], src.data(), bytes));
          } else {
            SIM_CHECK(cu.cuMemsetD8Async(scratch[h], uint8_t(i), bytes, s));
            if (kind == "memset2") SIM_CHECK(cu.cuMemsetD8Async(scratch[h] + 64, uint8_t(i), 8 + (v * 5) % 37, s));
          }
          mainBetween();
          if (!sideBare) launch(kernels[2], 1, target, scratch[h], pattern, uint64_t(i) + 5, s);
        }
        mainBetween();
        if (sideBare) {
          SIM_CHECK(cu.cuEventRecord(join, sideStream));
          SIM_CHECK(cu.cuStreamWaitEvent(nullptr, join, 0));
          if (kind != "grid") launch(kernels[2], 1, target, scratch[h], pattern, uint64_t(i) + 5, nullptr);
        }
        if (side && !sideBare) {
          // One launch more on the side stream, then the join.
          CUdeviceptr to = sideBuf[h], from = d[target];
          uint64_t add = 11;
          void* args[] = {&to, &from, &add};
          SIM_CHECK(cu.cuLaunchKernel(kernels[3], 1, 1, 1, 1, 1, 1, 0, sideStream, args, nullptr));
          const uint64_t sideValue = host[target] + 11;
          SIM_CHECK(cu.cuEventRecord(join, sideStream));
          SIM_CHECK(cu.cuStreamWaitEvent(nullptr, join, 0));
          const int back = (target + 2) % kBuffers;
          launch(kernels[4], 1, back, sideBuf[h], sideValue, 3, nullptr);
        }
        if (sync == "after") syncNow(i, target);
      }
      if (pos == innerPos)
        for (int r = 0; r < innerIters; ++r) {
          launch(kernels[0], 1, 1, d[2], host[2], 1, nullptr);
          launch(kernels[1], 1, 2, d[1], host[1], uint64_t(r % 3), nullptr);
          launch(kernels[6], 1, 3, d[2], host[2], 2, nullptr);
        }
      if (pos == n) break;
      if (layerLen > 0 && pos % layerLen == 0) {
        SIM_CHECK(cu.cuMemsetD8Async(layerScratch, uint8_t(i), 8 + size_t(pos / layerLen) % 50, nullptr));
        launch(kernels[5], 1, 7, layerScratch, uint64_t(i & 0xff) * 0x0101010101010101ull, uint64_t(pos), nullptr);
      }
      const Op& op = ops[size_t(pos)];
      launch(kernels[op.fn], op.grid, op.dst, d[op.src], host[op.src], op.add + (pos % 16 == 0 ? uint64_t(i % 3) : 0),
             nullptr);
    }
    if ((checkEvery && i % checkEvery == checkEvery - 1) || i == steps - 1)
      for (int k = 0; k < kBuffers; ++k) readBack(i, k);
  }
  SimCounters c{};
  simCounters(&c);
  c.effectsGraph -= before.effectsGraph;
  c.effectsEager -= before.effectsEager;
  std::printf("sim_holes: %d steps of %d launches and %zu hole(s), %s; effects from graphs %llu, eager %llu\n", steps,
              n, holes.size(), bad ? "WRONG VALUES" : "every value right", (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager);
  if (bad || simtest::failedCalls()) return 1;
  if (expectPct && simtest::tooFewFromGraphs("sim_holes", c, expectPct)) return 1;
  const uint64_t late = c.graphInstantiations - half.graphInstantiations;
  if (maxLateBuilds >= 0 && late > uint64_t(maxLateBuilds)) {
    std::printf("sim_holes: %llu graphs instantiated in the second half of the run (at most %ld expected)\n",
                (unsigned long long)late, maxLateBuilds);
    return 1;
  }
  return 0;
}
