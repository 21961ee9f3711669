// sim_event_poll: a host that polls an event recorded in the middle of each
// step, now and then, and then reads what the work before the record wrote
// (in the simulator device memory is host memory, like pinned memory that a
// DataLoader's pin-memory thread reuses once an event says the copy is done).
// Every step: 6 kernels, one that stores the step's number in `mark`, the
// event's record, 20 more kernels, then (every third step, so never a
// boundary graft can learn) a poll of the event until it is complete and a
// read of `mark`, then 10 more kernels. No sync until the end.
//   sim_event_poll [--steps N] [--every K] [--between [--twice-at S]] [--stream] [--min-graph-pct P]
//   exit 0: every read saw its own step's mark
// --every K: the host asks every K-th step (default 3; 1: every step, at the
// same place, which graft should learn as where a graph ends).
// --min-graph-pct P: also fail unless P % of the kernels ran from graphs.
// --stream: the host asks about the stream (cuStreamQuery) instead of the
// event: complete then means all of the stream's work so far has run.
// --between: instead of polling, the host asks once after each of the last 10
// kernels of those steps (as a caching allocator asks about a block's event
// before each allocation) and reads `mark` whenever the answer is "complete";
// any other answer than complete or not ready fails.
// --twice-at S: in step S the host asks twice in a row once (two allocations
// with no launch between): that looks like a poll, but only once; the later
// steps' single asks must still be answered without issuing held work.
// A tool that let the query answer while it still held the record (the
// event still complete from the step before) would read the previous step's
// mark. Run with SIM_ASYNC_US so the simulated GPU progresses on its own.
// A poll makes the event a place graft learns as a segment boundary (with
// --every 1 most of the work must still come from graphs: --min-graph-pct).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  int steps = 90, every = 3, minGraphPct = 0, twiceAt = 0;
  bool between = false, streamQuery = false;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--steps") && a + 1 < argc) {
      steps = std::atoi(argv[++a]);
    } else if (!std::strcmp(argv[a], "--every") && a + 1 < argc) {
      every = std::max(1, std::atoi(argv[++a]));
    } else if (!std::strcmp(argv[a], "--min-graph-pct") && a + 1 < argc) {
      minGraphPct = std::atoi(argv[++a]);
    } else if (!std::strcmp(argv[a], "--twice-at") && a + 1 < argc) {
      twiceAt = std::atoi(argv[++a]);
    } else if (!std::strcmp(argv[a], "--between")) {
      between = true;
    } else if (!std::strcmp(argv[a], "--stream")) {
      streamQuery = true;
    } else {
      std::printf("usage: sim_event_poll [--steps N] [--every K] [--between [--twice-at S]] [--stream] "
                  "[--min-graph-pct P]\n");
      return 2;
    }
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_event_poll", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_event_poll");
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  SIM_CHECK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr zero = simtest::zeroedBuffer(cu, 64);
  const CUdeviceptr mark = simtest::zeroedBuffer(cu, 64);
  const CUdeviceptr scratch = simtest::zeroedBuffer(cu, 64);
  auto query = [&] { return streamQuery ? cu.cuStreamQuery(s) : cu.cuEventQuery(ev); };
  int polls = 0, stale = 0, complete = 0, notReady = 0;
  // A "complete" answer: the work before the record has run.
  auto checkMark = [&](int step) {
    const uint64_t seen = *reinterpret_cast<volatile const uint64_t*>(mark);
    if (seen != uint64_t(step) && stale++ < 5)
      std::printf("sim_event_poll: step %d: the event was complete but mark is %llu\n", step,
                  static_cast<unsigned long long>(seen));
  };
  for (int step = 1; step <= steps; ++step) {
    for (int k = 0; k < 6; ++k) SIM_CHECK(simtest::launchAdd(cu, add, scratch, scratch, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, mark, zero, uint64_t(step), s));  // mark = step
    SIM_CHECK(cu.cuEventRecord(ev, s));
    for (int k = 0; k < 20; ++k) SIM_CHECK(simtest::launchAdd(cu, add, scratch, scratch, 1, s));
    const bool asks = step % every == every - 1;
    if (asks && between) {
      for (int k = 0; k < 10; ++k) {
        SIM_CHECK(simtest::launchAdd(cu, add, scratch, scratch, 1, s));
        for (int ask = 0; ask < (step == twiceAt && k == 4 ? 2 : 1); ++ask) {
          const CUresult r = query();
          if (r == CUDA_SUCCESS) {
            ++complete;
            checkMark(step);
          } else if (r == CUDA_ERROR_NOT_READY) {
            ++notReady;
          } else {
            SIM_CHECK(r);
          }
        }
      }
      continue;
    }
    if (asks) {
      ++polls;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      CUresult r;
      while ((r = query()) == CUDA_ERROR_NOT_READY) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::printf("sim_event_poll: step %d: the event never completed\n", step);
          return 1;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      SIM_CHECK(r);
      checkMark(step);
    }
    for (int k = 0; k < 10; ++k) SIM_CHECK(simtest::launchAdd(cu, add, scratch, scratch, 1, s));
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  const uint64_t total = *reinterpret_cast<const uint64_t*>(scratch);
  const uint64_t want = uint64_t(steps) * 36;
  if (total != want) {
    std::printf("sim_event_poll: scratch is %llu, want %llu\n", static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(want));
    return 1;
  }
  if (stale || simtest::failedCalls()) {
    std::printf("sim_event_poll: %d reads of a stale mark (%d polls, %d complete answers), %d calls failed\n",
                stale, polls, complete, simtest::failedCalls());
    return 1;
  }
  if (minGraphPct) {
    SimCounters c;
    simCounters(&c);
    if (simtest::tooFewFromGraphs("sim_event_poll", c, uint64_t(minGraphPct))) return 1;
  }
  std::printf("sim_event_poll: %d steps, %d polls, %d answers complete and %d not ready between launches, "
              "every read saw its own step's mark\n", steps, polls, complete, notReady);
  return 0;
}
