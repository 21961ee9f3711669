// sim_review_graph: red-team checks of graph building and launching (review
// of src/graph/graph_executor.cc, src/core/launch_plan.cc,
// src/graph/launch_worker.h, src/graph/copy_kernels.cc). One mode per
// suspected divergence from eager behaviour; every mode passes without graft
// (the simulated driver's own answers), and a mode that also passes under
// graft is a regression check:
//   sim_review_graph --mode MODE [--steps N] [--expect-graphs]
//
// legacy-mixed     a step on the legacy stream, a blocking stream b and a
//                  non-blocking stream n: legacy x += 1; b: y = x (implicitly
//                  after the legacy op); b records E; n waits E, z = y + 1,
//                  records F; legacy waits F, w = z; then a blocking stream c
//                  outside the segment's streams gets v = w (implicitly after
//                  the legacy stream's work). Values checked every third step
//                  (run with SIM_GRAPH_LAUNCH_US so launches queue).
// patch-fail-queued  one stream: 40 kernels a step, one of them with a
//                  parameter that changes every step (a node update), a
//                  stream-ordered temporary allocated, used and freed each step,
//                  and an event record waited on by a second stream; no sync for
//                  9 steps. Run with SIM_FAIL=cuGraphExecKernelNodeSetParams:N:999
//                  and a slow SIM_GRAPH_LAUNCH_US: an update fails on the launch
//                  thread with launches queued behind it; every value right and
//                  every free run.
// other-context-between  a loop on a created stream of context A; after each
//                  step the host makes device 1's context current, launches a
//                  kernel on its legacy stream, asks cuStreamQuery(NULL) and
//                  synchronizes that context, then makes A current again:
//                  values of both contexts checked every step.
// query-queued     every step writes mark = i, records E, then 30 more
//                  kernels; the host asks cuEventQuery(E) and cuStreamQuery(s)
//                  right after the step (a launch still queued on the launch
//                  thread under SIM_GRAPH_LAUNCH_US): a "complete" answer must
//                  mean the work ran.
// recreate-flags   a two-stream step (s non-blocking, t) replayed; every 25
//                  steps t is destroyed and created again with the same handle
//                  and the other flag (non-blocking <-> blocking); each step
//                  the legacy stream first copies the step number from the
//                  host into `a` (an eager op, a segment boundary), and t's
//                  first kernel reads it: while t is blocking it follows the
//                  copy implicitly; while non-blocking the step waits on an
//                  event recorded after the copy.
// kernel-form-switch  a device copy and a memset of device memory in the step
//                  (graft's copy kernels); on irregular steps the copy's source
//                  is memory of device 1, and the memset's destination too: the
//                  driver's copy reaches it, graft's kernel may not.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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

void legacyMixed(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream b, n, c;
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_DEFAULT));
  SIM_CHECK(cu.cuStreamCreate(&n, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&c, CU_STREAM_DEFAULT));
  CUevent e, f;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                    w = simtest::zeroedBuffer(cu), v = simtest::zeroedBuffer(cu), p = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hp = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, nullptr));
    ++hx;
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, p, p, 1, n));  // n's own work
    hp += 3;
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 0, b));  // y = x: after the legacy op (b blocking)
    SIM_CHECK(cu.cuEventRecord(e, b));
    SIM_CHECK(cu.cuStreamWaitEvent(n, e, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 1, n));  // z = y + 1
    SIM_CHECK(cu.cuEventRecord(f, n));
    SIM_CHECK(cu.cuStreamWaitEvent(nullptr, f, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, w, z, 0, nullptr));  // w = z
    SIM_CHECK(simtest::launchAdd(cu, add, v, w, 0, c));        // v = w: after the legacy op (c blocking)
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, p, p, 1, n));
    hp += 3;
    if (i % 3 == 2 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(c));
      expectValue(peek(v), hx + 1, "v (c synchronized)", i);
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(readWord(cu, w), hx + 1, "w", i);
      expectValue(readWord(cu, p), hp, "p", i);
    }
  }
}

void patchFailQueued(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), q = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hq = 0;
  SimCounters before{};
  simCounters(&before);
  int allocs = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr tmp = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&tmp, 64, s));
    ++allocs;
    SIM_CHECK(simtest::launchAdd(cu, add, tmp, x, 0, s));  // tmp = x
    for (int k = 0; k < 18; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, q, q, uint64_t(i), s));  // changes every step: a node update
    hq += uint64_t(i);
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, tmp, 18, t));  // y = tmp + 18 = x
    SIM_CHECK(cu.cuEventRecord(e, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, e, 0));
    SIM_CHECK(cu.cuMemFreeAsync(tmp, s));
    for (int k = 0; k < 18; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 36;
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(readWord(cu, x), hx, "x", i);
      expectValue(readWord(cu, y), hx - 18, "y", i);
      expectValue(readWord(cu, q), hq, "q", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  SimCounters after{};
  simCounters(&after);
  expectValue(after.freesAsyncRun - before.freesAsyncRun, uint64_t(allocs), "stream-ordered frees run", steps);
}

void otherContextBetween(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUcontext ctx1 = device1Context(cu);
  if (!ctx1) {
    std::printf("sim_review_graph: no device 1\n");
    std::exit(2);
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  const CUdeviceptr u = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx));
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_DEFAULT));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), l = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hu = 0, hl = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 12; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 12;
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 0, t));
    for (int k = 0; k < 6; ++k) SIM_CHECK(simtest::launchAdd(cu, add, l, l, 1, nullptr));  // A's legacy stream
    hl += 6;
    SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
    SIM_CHECK(simtest::launchAdd(cu, add, u, u, 1, nullptr));  // device 1's legacy stream
    ++hu;
    const CUresult q = cu.cuStreamQuery(nullptr);
    if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY) expectCode(q, CUDA_SUCCESS, "cuStreamQuery(NULL) in B", i);
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(u), hu, "u (device 1 synchronized)", i);
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    if (i % 4 == 3 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(t));
      expectValue(peek(y), hx, "y (t synchronized)", i);
      SIM_CHECK(cu.cuStreamSynchronize(nullptr));
      expectValue(peek(l), hl, "l (legacy synchronized)", i);
      expectValue(peek(x), hx, "x", i);
    }
  }
}

void queryQueued(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), mark = simtest::zeroedBuffer(cu),
                    x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, complete = 0;
  for (int i = 1; i <= steps; ++i) {
    for (int k = 0; k < 20; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 20;
    SIM_CHECK(simtest::launchAdd(cu, add, mark, zero, uint64_t(i), s));
    SIM_CHECK(cu.cuEventRecord(e, s));
    for (int k = 0; k < 30; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 30;
    const CUresult re = cu.cuEventQuery(e);
    if (re == CUDA_SUCCESS) {
      ++complete;
      expectValue(peek(mark), uint64_t(i), "mark after a complete cuEventQuery", i);
    } else if (re != CUDA_ERROR_NOT_READY) {
      SIM_CHECK(re);
    }
    const CUresult rs = cu.cuStreamQuery(s);
    if (rs == CUDA_SUCCESS) {
      ++complete;
      expectValue(peek(x), hx, "x after a complete cuStreamQuery", i);
    } else if (rs != CUDA_ERROR_NOT_READY) {
      SIM_CHECK(rs);
    }
    if (i % 5 == 0) {
      SIM_CHECK(cu.cuEventSynchronize(e));
      expectValue(peek(mark), uint64_t(i), "mark after cuEventSynchronize", i);
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(peek(x), hx, "x", i);
    }
  }
  std::printf("sim_review_graph: %s: %llu complete answers\n", g_mode, (unsigned long long)complete);
}

void recreateFlags(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  bool tBlocking = false;
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent e, f, g;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&g, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr a = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                    x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  static uint64_t hostA[1];
  for (int i = 0; i < steps; ++i) {
    if (i && i % 25 == 0) {
      SIM_CHECK(cu.cuCtxSynchronize());
      CUstream old = t;
      SIM_CHECK(cu.cuStreamDestroy(t));
      tBlocking = !tBlocking;
      SIM_CHECK(cu.cuStreamCreate(&t, tBlocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
      if (t != old) {
        std::printf("sim_review_graph: %s: the simulator gave the new stream another handle\n", g_mode);
        std::exit(3);
      }
      ++g_provoked;
    }
    hostA[0] = uint64_t(i) + 1000;
    SIM_CHECK(cu.cuMemcpyHtoDAsync(a, hostA, 8, nullptr));  // legacy stream, eager
    if (!tBlocking) {
      SIM_CHECK(cu.cuEventRecord(g, nullptr));
      SIM_CHECK(cu.cuStreamWaitEvent(t, g, 0));
    }
    SIM_CHECK(simtest::launchAdd(cu, add, y, a, 0, t));  // y = a (this step's)
    for (int k = 0; k < 6; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 6;
    SIM_CHECK(cu.cuEventRecord(e, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, e, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 1, s));  // z = y + 1
    SIM_CHECK(cu.cuEventRecord(f, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, f, 0));
    for (int k = 0; k < 6; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, t));
    hx += 6;
    // The host copy's buffer is rewritten next step: wait for the copy.
    SIM_CHECK(cu.cuStreamSynchronize(t));
    expectValue(peek(z), uint64_t(i) + 1001, "z", i);
    expectValue(peek(x), hx, "x", i);
  }
}

void kernelFormSwitch(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUcontext ctx1 = device1Context(cu);
  if (!ctx1) {
    std::printf("sim_review_graph: no device 1\n");
    std::exit(2);
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  const CUdeviceptr far = simtest::zeroedBuffer(cu), farDst = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx));
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr src = simtest::zeroedBuffer(cu), dst = simtest::zeroedBuffer(cu), set = simtest::zeroedBuffer(cu),
                    x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const bool odd = irregular(i, 5);
    g_provoked += odd;
    const CUdeviceptr from = odd ? far : src;
    const CUdeviceptr setTo = odd ? farDst : set;
    SIM_CHECK(simtest::launchAdd(cu, add, from, x, 7, s));  // from = x + 7
    for (int k = 0; k < 8; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    SIM_CHECK(cu.cuMemcpyDtoDAsync(dst, from, 8, s));
    SIM_CHECK(cu.cuMemsetD32Async(setTo, uint32_t(i + 1), 2, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(dst), hx + 7, "dst (copied)", i);
    const uint64_t want = (uint64_t(uint32_t(i + 1)) << 32) | uint32_t(i + 1);
    expectValue(peek(setTo), want, "memset word", i);
    hx += 9;
    expectValue(peek(x), hx, "x", i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review_graph", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  const bool expectGraphs = args.expectGraphs;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review_graph", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review_graph");
  if (mode == "legacy-mixed") legacyMixed(cu, add, steps);
  else if (mode == "patch-fail-queued") patchFailQueued(cu, add, steps);
  else if (mode == "other-context-between") otherContextBetween(cu, ctx, add, steps);
  else if (mode == "query-queued") queryQueued(cu, add, steps);
  else if (mode == "recreate-flags") recreateFlags(cu, add, steps);
  else if (mode == "kernel-form-switch") kernelFormSwitch(cu, ctx, add, steps);
  else {
    std::printf("usage: sim_review_graph --mode legacy-mixed|patch-fail-queued|other-context-between|query-queued|"
                "recreate-flags|kernel-form-switch [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, expectGraphs);
}
