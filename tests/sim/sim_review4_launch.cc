// sim_review4_launch: red-team checks (fourth round) of the launch path and of
// everything that must see held or queued work (src/graph/launch_worker.h,
// src/graph/graph_executor.cc, src/core/engine.cc, the synchronizing and
// querying calls in src/hook/interpose.cc, per-thread streams). One mode per
// suspected divergence from eager behaviour; every mode passes without graft
// (the simulated driver's own answers), and a mode that also passes under graft
// is a regression check:
//   sim_review4_launch --mode MODE [--steps N] [--expect-graphs]
//
// idle-after-event-sync  two independent non-blocking streams in one step, each
//                  ending with a record of its own event (one graph over both
//                  streams, launched on graft's own stream); the host
//                  synchronizes s's event and asks cuStreamQuery(s): the record
//                  was s's last op and it completed, so s is idle
//                  (CUDA_SUCCESS); then the same for t.
// per-thread-idle-after-sync  the calling thread's per-thread default stream
//                  (the _ptsz entry points, NULL stream): kernels, a record of
//                  E as the stream's last op, cuEventSynchronize(E), then
//                  cuStreamQuery(NULL) must be CUDA_SUCCESS; every third step
//                  also after cuCtxSynchronize.
// query-after-waiter-sync  s records E mid-step, t waits on E and works; after
//                  cuStreamSynchronize(t), E is complete (cuEventQuery(E) ==
//                  CUDA_SUCCESS) though s is not synchronized yet.
// threads-query-other  thread A loops on its stream (a mark written before a
//                  record of E each step), thread B loops on its own stream and
//                  asks cuEventQuery(E) and cuStreamQuery(A's stream): a
//                  complete answer means the work A issued before the question
//                  ran (values checked against what A published).
// thread-exit-held a thread loops on a stream without synchronizing and exits
//                  in the middle of a step (after a record of E); the main
//                  thread joins it, polls cuEventQuery(E) until complete and
//                  reads the mark written before the record, then synchronizes.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <atomic>
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


// ------------------------------------------------------------------ modes

// idle-after-event-sync: two independent streams in one step, each ending
// with a record of its own event; the host synchronizes s's event, then asks
// cuStreamQuery(s): s's last op was that record and it completed, so s is idle
// (CUDA_SUCCESS); likewise for t.
void idleAfterEventSync(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent es, et;
  SIM_CHECK(cu.cuEventCreate(&es, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&et, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 8; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 8;
    SIM_CHECK(cu.cuEventRecord(es, s));
    for (int k = 0; k < 8; ++k) SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, t));
    hy += 8;
    SIM_CHECK(cu.cuEventRecord(et, t));
    SIM_CHECK(cu.cuEventSynchronize(es));
    expectCode(cu.cuStreamQuery(s), CUDA_SUCCESS, "cuStreamQuery(s) after its last record completed", i);
    expectValue(peek(x), hx, "x", i);
    SIM_CHECK(cu.cuEventSynchronize(et));
    expectCode(cu.cuStreamQuery(t), CUDA_SUCCESS, "cuStreamQuery(t) after its last record completed", i);
    expectValue(peek(y), hy, "y", i);
  }
}

// query-after-waiter-sync: s: x += 1 four times, record E, x += 1 four
// times; t: wait E, y = x + 0 ... (four kernels). The host synchronizes t:
// t's work followed the record of E, so E is complete (cuEventQuery(E) ==
// CUDA_SUCCESS) before s is synchronized.
void queryAfterWaiterSync(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 4;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, s));  // snap = x
    SIM_CHECK(cu.cuEventRecord(e, s));
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, y, k ? y : snap, 1, t));
    SIM_CHECK(cu.cuStreamSynchronize(t));
    expectCode(cu.cuEventQuery(e), CUDA_SUCCESS, "cuEventQuery(E) after synchronizing a stream that waited on it", i);
    expectValue(peek(y), hx + 4, "y", i);
    hx += 4;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(x), hx, "x", i);
  }
}

// per-thread-idle-after-sync: the same on the calling thread's per-thread
// default stream (the _ptsz entry points, NULL stream): kernels, a record of
// ev as the stream's last op; after cuEventSynchronize(ev) the stream is idle
// (cuStreamQuery(NULL) == CUDA_SUCCESS) and the values are there.
void perThreadIdleAfterSync(const simtest::DriverApi& pt, CUfunction add, int steps) {
  CUevent ev;
  SIM_CHECK(pt.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(pt);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 12; ++k) SIM_CHECK(simtest::launchAdd(pt, add, x, x, 1, nullptr));
    hx += 12;
    SIM_CHECK(pt.cuEventRecord(ev, nullptr));
    SIM_CHECK(pt.cuEventSynchronize(ev));
    expectCode(pt.cuStreamQuery(nullptr), CUDA_SUCCESS,
               "cuStreamQuery(per-thread stream) after its last record completed", i);
    expectValue(peek(x), hx, "x", i);
    if (i % 3 == 2) {
      // After a full synchronize every stream is idle.
      for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(pt, add, x, x, 1, nullptr));
      hx += 4;
      SIM_CHECK(pt.cuCtxSynchronize());
      expectCode(pt.cuStreamQuery(nullptr), CUDA_SUCCESS, "cuStreamQuery(per-thread stream) after cuCtxSynchronize",
                 i);
      expectValue(peek(x), hx, "x", i);
    }
  }
}

// threads-query-other: thread A loops on its stream a (x += 1 six times,
// mark = x, record E, x += 1 six times; a synchronize every fourth step) and
// publishes, after each call returns, what it issued so far. Thread B loops
// on its own stream b (values checked at each of its synchronizes) and asks
// about A's work: cuEventQuery(E) complete means mark holds at least the
// value of the mark A published before the query; cuStreamQuery(a) complete
// means x holds at least what A had issued before the query.
void threadsQueryOther(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUstream a, b;
  SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), mark = simtest::zeroedBuffer(cu),
                    y = simtest::zeroedBuffer(cu);
  std::atomic<uint64_t> issuedX{0}, publishedMark{0};
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0}, completes{0};
  std::thread ta([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    uint64_t hx = 0;
    for (int i = 0; i < steps; ++i) {
      for (int k = 0; k < 6; ++k) {
        SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, a));
        issuedX.store(++hx);
      }
      SIM_CHECK(simtest::launchAdd(cu, add, mark, x, 0, a));  // mark = x
      SIM_CHECK(cu.cuEventRecord(e, a));
      publishedMark.store(hx);
      for (int k = 0; k < 6; ++k) {
        SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, a));
        issuedX.store(++hx);
      }
      if (i % 4 == 3) {
        SIM_CHECK(cu.cuStreamSynchronize(a));
        if (peek(x) != hx && wrong++ < 5) std::printf("sim_review4_launch: %s: A step %d: x is %llu, expected %llu\n",
                                                    g_mode, i, (unsigned long long)peek(x), (unsigned long long)hx);
      }
    }
    SIM_CHECK(cu.cuStreamSynchronize(a));
    done.store(true);
  });
  std::thread tb([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    uint64_t hy = 0;
    for (int i = 0; !done.load() || i < steps; ++i) {
      for (int k = 0; k < 5; ++k) SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, b));
      hy += 5;
      const uint64_t pm = publishedMark.load();
      CUresult r = cu.cuEventQuery(e);
      if (r == CUDA_SUCCESS) {
        ++completes;
        if (peek(mark) < pm && wrong++ < 5)
          std::printf("sim_review4_launch: %s: B: E complete but mark is %llu < %llu\n", g_mode,
                      (unsigned long long)peek(mark), (unsigned long long)pm);
      } else if (r != CUDA_ERROR_NOT_READY) {
        SIM_CHECK(r);
      }
      const uint64_t px = issuedX.load();
      r = cu.cuStreamQuery(a);
      if (r == CUDA_SUCCESS) {
        ++completes;
        if (peek(x) < px && wrong++ < 5)
          std::printf("sim_review4_launch: %s: B: stream a idle but x is %llu < %llu\n", g_mode,
                      (unsigned long long)peek(x), (unsigned long long)px);
      } else if (r != CUDA_ERROR_NOT_READY) {
        SIM_CHECK(r);
      }
      if (i % 3 == 2) {
        SIM_CHECK(cu.cuStreamSynchronize(b));
        if (peek(y) != hy && wrong++ < 5) std::printf("sim_review4_launch: %s: B step %d: y is %llu, expected %llu\n",
                                                    g_mode, i, (unsigned long long)peek(y), (unsigned long long)hy);
      }
      if (i > 100 * steps) break;
    }
    SIM_CHECK(cu.cuStreamSynchronize(b));
    if (peek(y) != hy && wrong++ < 5) std::printf("sim_review4_launch: %s: B: y is %llu, expected %llu\n", g_mode,
                                                (unsigned long long)peek(y), (unsigned long long)hy);
  });
  ta.join();
  tb.join();
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), uint64_t(steps) * 12, "x", steps);
  g_wrong += wrong.load();
  std::printf("sim_review4_launch: %s: %d complete answers\n", g_mode, completes.load());
}

// thread-exit-held: a thread loops on stream s (x += 1 eight times, mark = x,
// record E, x += 1 eight times) with no synchronize, issues the first half of
// one more step (up to the record) and exits. The main thread joins it, polls
// cuEventQuery(E) until complete, then reads mark (the last step's), then
// synchronizes s and reads x.
void threadExitHeld(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), mark = simtest::zeroedBuffer(cu);
  const int rounds = 8;
  uint64_t hx = 0;
  for (int r = 0; r < rounds; ++r) {
    uint64_t markWant = 0;
    std::thread w([&] {
      SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      for (int i = 0; i <= steps / rounds; ++i) {
        for (int k = 0; k < 8; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
        hx += 8;
        SIM_CHECK(simtest::launchAdd(cu, add, mark, x, 0, s));
        SIM_CHECK(cu.cuEventRecord(e, s));
        markWant = hx;
        if (i == steps / rounds) break;  // exits in the middle of a step
        for (int k = 0; k < 8; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
        hx += 8;
      }
    });
    w.join();
    CUresult q;
    long polls = 0;
    while ((q = cu.cuEventQuery(e)) == CUDA_ERROR_NOT_READY && ++polls < 10000000) {
    }
    expectCode(q, CUDA_SUCCESS, "cuEventQuery(E) after polling", r);
    expectValue(peek(mark), markWant, "mark", r);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(x), hx, "x", r);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review4_launch", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review4_launch", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review4_launch");
  if (mode == "idle-after-event-sync") idleAfterEventSync(cu, add, steps);
  else if (mode == "query-after-waiter-sync") queryAfterWaiterSync(cu, add, steps);
  else if (mode == "threads-query-other") threadsQueryOther(cu, ctx, add, steps);
  else if (mode == "thread-exit-held") threadExitHeld(cu, ctx, add, steps);
  else if (mode == "per-thread-idle-after-sync") perThreadIdleAfterSync(drv.perThread, add, steps);
  else {
    std::printf("usage: sim_review4_launch --mode idle-after-event-sync|per-thread-idle-after-sync|"
                "query-after-waiter-sync|threads-query-other|thread-exit-held [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
