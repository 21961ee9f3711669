// sim_review_engine: red-team checks of the engine's held ops, queries, rests
// and captures (review of src/core/engine.cc). One mode per suspected
// divergence from eager behaviour; every mode passes without graft (the
// simulated driver's own answers), and a mode that also passes under graft
// is a regression check:
//   sim_review_engine --mode MODE [--steps N] [--expect-graphs]
//
// event-other-context  a two-stream loop whose step records an event of the
//                  program's context on stream s and waits on it on stream t;
//                  on irregular steps the record names an event created in
//                  device 1's primary context instead: the driver refuses a
//                  record of an event on a stream of another context
//                  (CUDA_ERROR_INVALID_HANDLE, cuEventRecord: "hEvent and
//                  hStream must be from the same context"). A tool that
//                  matches event ops by their place, not their context, holds
//                  the record and returns success.
// recycled-stream-context  a one-stream loop graft replays; then the stream is
//                  destroyed and device 1's context creates a stream, which
//                  gets the same handle (the simulator, like drivers, gives a
//                  freed handle out again); the program's context then makes
//                  the step's launches on that handle: refused
//                  (CUDA_ERROR_INVALID_HANDLE: a launch on a stream of another
//                  context). A tool that holds them as the step it knows
//                  returns success.
// capture-mid-step a two-stream loop; on irregular steps part of the step is
//                  captured by the program (relaxed mode, kernels on s) and
//                  launched as the program's own graph at that place, then
//                  destroyed. Every value checked (regression check).
// rest-queries     a loop of steps that alternate between a repeating step
//                  and noise (a new grid each launch) so that graft rests and
//                  wakes (run with small GRAFT_MAX_PERIOD and
//                  GRAFT_DORMANT_AFTER_OPS); each step asks cuEventQuery and
//                  cuStreamQuery between launches and, on a "complete" answer,
//                  reads the mark the work before the record wrote (device
//                  memory is host memory in the simulator). Regression check.
// event-churn-held every step creates an event, records it mid-step on s,
//                  waits on it on t, destroys it right after the wait (while a
//                  replay holds both), and the next step's event reuses the
//                  handle; values checked (regression check).
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 10, 7); }

CUcontext device1Context(const simtest::DriverApi& cu) {
  CUdevice dev1 = 0;
  CUcontext c = nullptr;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&c, dev1) != CUDA_SUCCESS) return nullptr;
  return c;
}

// ------------------------------------------------------------------ modes

void eventOtherContext(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUcontext ctx1 = device1Context(cu);
  if (!ctx1) {
    std::printf("sim_review_engine: no device 1\n");
    std::exit(2);
  }
  CUevent foreign;
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  SIM_CHECK(cu.cuEventCreate(&foreign, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx));
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  SIM_CHECK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 4;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, s));  // snap = x
    const bool odd = irregular(i, 1);
    g_provoked += odd;
    expectCode(cu.cuEventRecord(odd ? foreign : ev, s), odd ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS,
               odd ? "cuEventRecord of another context's event" : "cuEventRecord", i);
    SIM_CHECK(cu.cuStreamWaitEvent(t, ev, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap, 0, t));  // y = snap, after the record
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 4;
    SIM_CHECK(cu.cuStreamSynchronize(t));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    // (After a refused record t waits on the previous step's: y is then
    // either snapshot, not checked.)
    if (!odd) expectValue(readWord(cu, y), hx - 4, "y", i);
    expectValue(readWord(cu, x), hx, "x", i);
  }
}

void recycledStreamContext(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUcontext ctx1 = device1Context(cu);
  if (!ctx1) {
    std::printf("sim_review_engine: no device 1\n");
    std::exit(2);
  }
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  auto step = [&](CUstream on, CUresult want, int i) {
    for (int k = 0; k < 6; ++k) {
      expectCode(simtest::launchAdd(cu, add, k % 2 ? x : y, k % 2 ? y : x, 1, on), want,
                 want ? "cuLaunchKernel on another context's stream" : "cuLaunchKernel", i);
    }
  };
  // y = x + 1, x = y + 1, ... : x grows by 6 every step (3 launches write x).
  for (int i = 0; i < steps; ++i) {
    step(s, CUDA_SUCCESS, i);
    hx += 6;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(readWord(cu, y), hx - 1, "y", i);
    expectValue(readWord(cu, x), hx, "x", i);
  }
  SIM_CHECK(cu.cuStreamDestroy(s));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  CUstream s1;
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx));
  if (s1 != s) {
    std::printf("sim_review_engine: %s: the simulator gave device 1's stream another handle\n", g_mode);
    std::exit(3);
  }
  for (int i = 0; i < 3; ++i) {
    ++g_provoked;
    step(s1, CUDA_ERROR_INVALID_HANDLE, steps + i);
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(readWord(cu, x), hx, "x (no launch took place)", steps + i);
  }
}

void captureMidStep(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent e1, e2;
  SIM_CHECK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                    snap = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hz = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, s));  // snap = x (s's later launches leave it)
    SIM_CHECK(cu.cuEventRecord(e1, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e1, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap, 5, t));  // y = snap + 5
    hy = hx + 5;
    const bool cap = irregular(i, 3);
    if (cap) {
      ++g_provoked;
      CUgraph g = nullptr;
      CUgraphExec ge = nullptr;
      SIM_CHECK(cu.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
      SIM_CHECK(simtest::launchAdd(cu, add, z, x, 7, s));  // z = x + 7
      SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
      SIM_CHECK(cu.cuStreamEndCapture(s, &g));
      SIM_CHECK(cu.cuGraphInstantiateWithFlags(&ge, g, 0));
      SIM_CHECK(cu.cuGraphLaunch(ge, s));
      hz = hx + 7;
      hx += 1;
      SIM_CHECK(cu.cuGraphExecDestroy(ge));
      SIM_CHECK(cu.cuGraphDestroy(g));
    } else {
      SIM_CHECK(simtest::launchAdd(cu, add, z, x, 7, s));
      SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
      hz = hx + 7;
      hx += 1;
    }
    SIM_CHECK(cu.cuEventRecord(e2, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, e2, 0));
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    if (i % 5 == 4 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(readWord(cu, x), hx, "x", i);
      expectValue(readWord(cu, y), hy, "y", i);
      expectValue(readWord(cu, z), hz, "z", i);
    }
  }
}

void restQueries(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  SIM_CHECK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), mark = simtest::zeroedBuffer(cu),
                    scratch = simtest::zeroedBuffer(cu), noise = simtest::zeroedBuffer(cu);
  uint64_t hs = 0, hn = 0, stale = 0, complete = 0;
  unsigned grid = 1;
  for (int i = 1; i <= steps; ++i) {
    // Phases of 40 steps: repeating, then noise (every launch a new grid).
    const bool noisy = (i / 40) % 2 == 1;
    for (int k = 0; k < 6; ++k) {
      if (noisy) {
        uint64_t one = 1;
        CUdeviceptr p = noise;
        void* args[] = {&p, &p, &one};
        SIM_CHECK(cu.cuLaunchKernel(add, ++grid, 1, 1, 1, 1, 1, 0, s, args, nullptr));
        ++hn;
      } else {
        SIM_CHECK(simtest::launchAdd(cu, add, scratch, scratch, 1, s));
        ++hs;
      }
    }
    SIM_CHECK(simtest::launchAdd(cu, add, mark, zero, uint64_t(i), s));
    SIM_CHECK(cu.cuEventRecord(ev, s));
    for (int k = 0; k < 8; ++k) {
      SIM_CHECK(simtest::launchAdd(cu, add, scratch, scratch, 1, s));
      ++hs;
      const CUresult r = k % 2 ? cu.cuEventQuery(ev) : cu.cuStreamQuery(s);
      if (r == CUDA_SUCCESS) {
        ++complete;
        const uint64_t seen = *reinterpret_cast<volatile const uint64_t*>(mark);
        if (seen != uint64_t(i) && stale++ < 5)
          std::printf("sim_review_engine: %s: step %d: a query said complete but mark is %llu\n", g_mode, i,
                      (unsigned long long)seen);
        if (k % 2 == 0) {  // the stream is idle: everything issued on it ran
          const uint64_t sc = *reinterpret_cast<volatile const uint64_t*>(scratch);
          if (sc != hs && stale++ < 5)
            std::printf("sim_review_engine: %s: step %d: the stream was idle but scratch is %llu, not %llu\n",
                        g_mode, i, (unsigned long long)sc, (unsigned long long)hs);
        }
      } else if (r != CUDA_ERROR_NOT_READY) {
        SIM_CHECK(r);
      }
    }
    if (i % 9 == 0) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(readWord(cu, scratch), hs, "scratch", i);
      expectValue(readWord(cu, noise), hn, "noise", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(readWord(cu, scratch), hs, "scratch", steps);
  g_wrong += int(stale);
  std::printf("sim_review_engine: %s: %llu complete answers\n", g_mode, (unsigned long long)complete);
}

void eventChurnHeld(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    CUevent ev;
    SIM_CHECK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 4;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, s));  // snap = x
    SIM_CHECK(cu.cuEventRecord(ev, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, ev, 0));
    SIM_CHECK(cu.cuEventDestroy(ev));
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap, 0, t));  // y = snap, after the record
    hy = hx;
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 4;
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 0, t));  // y = y
    if (i % 7 == 6 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(readWord(cu, x), hx, "x", i);
      expectValue(readWord(cu, y), hy, "y", i);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review_engine", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  const bool expectGraphs = args.expectGraphs;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review_engine", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review_engine");
  if (mode == "event-other-context") eventOtherContext(cu, ctx, add, steps);
  else if (mode == "recycled-stream-context") recycledStreamContext(cu, ctx, add, steps);
  else if (mode == "capture-mid-step") captureMidStep(cu, add, steps);
  else if (mode == "rest-queries") restQueries(cu, add, steps);
  else if (mode == "event-churn-held") eventChurnHeld(cu, add, steps);
  else {
    std::printf("usage: sim_review_engine --mode event-other-context|recycled-stream-context|capture-mid-step|"
                "rest-queries|event-churn-held [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, expectGraphs);
}
