// sim_stream_rotation: a training loop shaped like PyTorch's with a stream
// pool. 32 non-blocking streams are created up front (PyTorch hands its
// pool's streams out round-robin); each step runs, on the legacy default
// stream, the "optimizer": --opt-launches launches of one kernel shape, one
// per parameter chunk (a foreach optimizer's), the same every step; then
// three micro-batches, each on the next pool stream in rotation: the pool
// stream waits for the main stream (an event recorded there), runs
// --micro-launches kernels (each its own shape, as a model's layers are)
// whose values depend on the step, and the main stream waits for it (another
// event). A step's stream handles come again only every 32 steps, so the only
// run graft finds repeating is the optimizer's (a run of one shape, built
// unrolled): its graphs are replayed every step but carry a small share of
// the ops (13 % with the defaults), and with GRAFT_REST_BELOW_PCT above that
// graft must rest instead of paying its learning cost for the rest. (Under
// GRAFT_WARMUP=2 a run of one shape gets its graph, of 32 launches, once it
// is 33 long; under the default warmup of 3 it would take 65.)
//   sim_stream_rotation [--steps N] [--opt-launches K] [--micro-launches M]
//                       [--expect-graphs] [--expect-rest]
// Every 50 steps (and at the end) the main stream is synchronized and every
// buffer read back and compared with the host's values: exit 1 on a wrong one.
// --expect-graphs: some kernels must have run from graph launches.
// --expect-rest: after graphs first launched, a stretch of at least 20 steps
// must have passed without a graph launch (graft rested: it only counted the
// ops); with graphs live and no rest the optimizer's graph is launched every
// step. (The exit report's replay.fallbacks.dormant says the same; the meson
// tests check that too, through run_with_report.py.)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

constexpr int kPoolStreams = 32;
constexpr int kMicroBatches = 3;
constexpr uint64_t kCheckEvery = 50;
constexpr uint64_t kRestSteps = 20;

// What launch i of micro-batch j adds in step t.
uint64_t value(uint64_t t, int j, uint64_t i) { return t * 1000 + uint64_t(j) * 100 + i + 1; }

}  // namespace

int main(int argc, char** argv) {
  bool expectGraphs = false, expectRest = false;
  uint64_t steps = 300, optLaunches = 33, microLaunches = 64;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expect-graphs") == 0) expectGraphs = true;
    else if (std::strcmp(argv[i], "--expect-rest") == 0) expectRest = true;
    else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--opt-launches") == 0 && i + 1 < argc)
      optLaunches = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--micro-launches") == 0 && i + 1 < argc)
      microLaunches = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::printf("usage: sim_stream_rotation [--steps N] [--opt-launches K] [--micro-launches M] "
                  "[--expect-graphs] [--expect-rest]\n");
      return 2;
    }
  }
  if (steps == 0 || steps > 100000 || optLaunches == 0 || optLaunches > 1024 || microLaunches == 0 ||
      microLaunches > 1024) {
    std::printf("sim_stream_rotation: --steps 1..100000, --opt-launches and --micro-launches 1..1024\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_stream_rotation", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_rotation");
  CUstream pool[kPoolStreams];
  for (auto& s : pool) SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUstream mainStream = CU_STREAM_LEGACY;  // PyTorch's default stream
  CUevent forked[kMicroBatches], joined[kMicroBatches];
  for (int j = 0; j < kMicroBatches; ++j) {
    SIM_CHECK(cu.cuEventCreate(&forked[j], CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu.cuEventCreate(&joined[j], CU_EVENT_DISABLE_TIMING));
  }
  // w[k]: the optimizer's parameter chunks (w[0] takes the last micro-batch's
  // result); acc[j]: micro-batch j's.
  const CUdeviceptr w = simtest::zeroedBuffer(cu, 8 * optLaunches);
  CUdeviceptr acc[kMicroBatches];
  for (auto& a : acc) a = simtest::zeroedBuffer(cu);
  std::vector<uint64_t> hw(optLaunches, 0), got(optLaunches, 0);
  uint64_t hacc[kMicroBatches] = {};
  // A launch of `add` (*to = *from + k) with a grid of `grid` blocks: the grid
  // is the launch's shape, which graft matches.
  auto launch = [&](CUdeviceptr to, CUdeviceptr from, uint64_t k, unsigned grid, CUstream stream) {
    void* args[] = {&to, &from, &k};
    SIM_CHECK(cu.cuLaunchKernel(add, grid, 1, 1, 1, 1, 1, 0, stream, args, nullptr));
  };

  SimCounters start{};
  simCounters(&start);
  bool launched = false;  // a graph launch seen
  uint64_t firstLaunchStep = 0, lastLaunchStep = 0, launchesSeen = start.graphLaunches, longestQuiet = 0;
  uint64_t quietFrom = 0, quietTo = 0;
  auto quietUntil = [&](uint64_t end) {  // steps lastLaunchStep+1 .. end had no graph launch
    if (launched && end - lastLaunchStep > longestQuiet) {
      longestQuiet = end - lastLaunchStep;
      quietFrom = lastLaunchStep + 1;
      quietTo = end;
    }
  };
  int next = 0;  // the pool's next stream
  for (uint64_t t = 1; t <= steps; ++t) {
    // Graph launches made during the previous step (graft's launch thread may
    // make one a little after the step that asked for it; a rest lasts far
    // longer).
    SimCounters now{};
    simCounters(&now);
    if (now.graphLaunches != launchesSeen) {
      quietUntil(t - 2);
      if (!launched) firstLaunchStep = t - 1;
      launched = true;
      lastLaunchStep = t - 1;
      launchesSeen = now.graphLaunches;
    }
    // The optimizer: the same launches every step, all of one shape.
    for (uint64_t k = 0; k < optLaunches; ++k) {
      if (k == 0) launch(w, acc[kMicroBatches - 1], 1, 1, mainStream);  // w0 = acc2 + 1
      else launch(w + 8 * k, w + 8 * k, k, 1, mainStream);               // wk += k
      hw[k] = k == 0 ? hacc[kMicroBatches - 1] + 1 : hw[k] + k;
    }
    for (int j = 0; j < kMicroBatches; ++j) {
      const CUstream side = pool[next];
      next = (next + 1) % kPoolStreams;
      SIM_CHECK(cu.cuEventRecord(forked[j], mainStream));
      SIM_CHECK(cu.cuStreamWaitEvent(side, forked[j], 0));
      // acc[j] = (j == 0 ? w0 : acc[j - 1]) + v, then acc[j] += v.
      const CUdeviceptr from = j == 0 ? w : acc[j - 1];
      uint64_t h = j == 0 ? hw[0] : hacc[j - 1];
      for (uint64_t i = 0; i < microLaunches; ++i) {
        launch(acc[j], i == 0 ? from : acc[j], value(t, j, i), unsigned(i + 1), side);
        h += value(t, j, i);
      }
      hacc[j] = h;
      SIM_CHECK(cu.cuEventRecord(joined[j], side));
      SIM_CHECK(cu.cuStreamWaitEvent(mainStream, joined[j], 0));
    }
    if (t % kCheckEvery == 0 || t == steps) {
      // Every pool stream's work joined the main stream: its synchronize covers all.
      SIM_CHECK(cu.cuStreamSynchronize(mainStream));
      SIM_CHECK(cu.cuMemcpyDtoH(got.data(), w, 8 * optLaunches));
      for (uint64_t k = 0; k < optLaunches; ++k) {
        if (got[k] != hw[k]) {
          std::printf("sim_stream_rotation: step %llu: w%llu = %llu, expected %llu\n", (unsigned long long)t,
                      (unsigned long long)k, (unsigned long long)got[k], (unsigned long long)hw[k]);
          return 1;
        }
      }
      for (int j = 0; j < kMicroBatches; ++j) {
        uint64_t a = 0;
        SIM_CHECK(cu.cuMemcpyDtoH(&a, acc[j], 8));
        if (a != hacc[j]) {
          std::printf("sim_stream_rotation: step %llu: acc%d = %llu, expected %llu\n", (unsigned long long)t, j,
                      (unsigned long long)a, (unsigned long long)hacc[j]);
          return 1;
        }
      }
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  SimCounters c{};
  simCounters(&c);
  if (c.graphLaunches != launchesSeen) {
    quietUntil(steps - 1);
    if (!launched) firstLaunchStep = steps;
    launched = true;
    lastLaunchStep = steps;
  }
  quietUntil(steps);
  if (simtest::failedCalls()) {
    std::printf("sim_stream_rotation: %d driver calls failed\n", simtest::failedCalls());
    return 1;
  }
  const uint64_t graphEffects = c.effectsGraph - start.effectsGraph, eagerEffects = c.effectsEager - start.effectsEager;
  std::printf("sim_stream_rotation: %llu steps, every value right; effects from graphs %llu, eager %llu, "
              "graph launches %llu, instantiations %llu; first graph launch in step %llu, longest stretch "
              "without one after it: %llu steps (%llu..%llu)\n",
              (unsigned long long)steps, (unsigned long long)graphEffects, (unsigned long long)eagerEffects,
              (unsigned long long)(c.graphLaunches - start.graphLaunches),
              (unsigned long long)(c.graphInstantiations - start.graphInstantiations),
              (unsigned long long)firstLaunchStep, (unsigned long long)longestQuiet, (unsigned long long)quietFrom,
              (unsigned long long)quietTo);
  if (expectGraphs && graphEffects == 0) {
    std::printf("sim_stream_rotation: no kernel ran from a graph\n");
    return 1;
  }
  if (expectRest && (!launched || longestQuiet < kRestSteps)) {
    std::printf("sim_stream_rotation: graft did not rest (no stretch of %llu steps without a graph launch after "
                "graphs first launched)\n",
                (unsigned long long)kRestSteps);
    return 1;
  }
  return 0;
}
