// sim_review13b_legacy: red-team round 13b of r13.diff: the legacy stream's
// query answering for its context's blocking and per-thread streams
// (Engine::query, src/core/engine.cc; GraphExecutor::pendsLegacyQuery; the
// simulator's streamQueryImpl) and CUDA_LAUNCH_BLOCKING read again at the
// first stream-ordered op (Runtime::settleStart, src/hook/runtime.cc, called
// from submitOp in src/hook/interpose.cc).
//
// Contexts: A = device 0's primary context, C = a second context on device 0
// (cuCtxCreate). B = a blocking stream created in A, N = a non-blocking one.
// "gate" = a sim_gate kernel the host opens (poke) after the queries.
// Every return code and value is compared with what the simulated driver
// gives eagerly; the queries' eager answers used below are independent of
// timing (a closed gate is pending, a context with no pending work is idle).
//
//   sim_review13b_legacy --mode M [--steps N] [--expect-graphs]
//   build: /tmp/snap/build_review.sh sim_review13b_legacy.cc r13b
//   run:   /tmp/snap/run.sh eager|graft ./r13b --mode M [--steps 200]
//   (/tmp/rev13b/runall.sh STEPS [MODES] runs every mode both ways)
//
// Modes:
// copy-other-context   C current: two adds on C's non-blocking stream NC, a
//                      cuMemcpyDtoDAsync on A's blocking stream B (a copy may
//                      name another context's stream), an add on NC; then
//                      cuStreamQuery(NULL) and (CU_STREAM_LEGACY) in C, then
//                      one more add. C has no blocking stream and its legacy
//                      stream no work: the driver answers CUDA_SUCCESS
//                      whenever it is asked (B belongs to A). graft might
//                      count the held copy for C.
//                      FAILS under graft: step 2 (the first replay, before
//                      the segment's launch fails and it is disabled) C's
//                      legacy query returns CUDA_ERROR_NOT_READY (600).
//                      engine.cc:700-703 takes a held op's context from
//                      executor_.domainOf(h) first; for a Memcpy / Memset that
//                      is runContext(op) (graph_executor.cc:299-304) =
//                      contextOf(op) = the CopyShape / SetShape ctx
//                      (op_codec.cc:375-376), i.e. the context CURRENT AT THE
//                      PROGRAM'S CALL (interpose.cc:312, 330, 343, 351:
//                      currentContext()), not the context of the stream the
//                      op is on. engine.cc:711 then sets blockingHeld (B is
//                      blocking, "its" context == the query's C), :714
//                      creates the legacy counters, :726-732 make the copy a
//                      target, and :771 answers NOT_READY for a context whose
//                      legacy stream and blocking streams have nothing
//                      pending (the driver, any timing: CUDA_SUCCESS). The
//                      converse (A's legacy query skips the held copy on its
//                      own blocking stream B) only changes a timing-dependent
//                      answer. Fix: for h.stream != the legacy stream compare
//                      the STREAM's context (GraphExecutor::streamContext /
//                      PerThreadStreams::contextOf), e.g.
//                      pendsLegacyQuery(stream, context) = isBlocking(stream)
//                      && streamContext(stream) == context.
// memset-other-context the same with a cuMemsetD32Async on B.
//                      FAILS under graft: as copy-other-context (the
//                      SetShape ctx, op_codec.cc:376).
// copy-other-device    copy-other-context with C = device 1's primary context.
//                      FAILS under graft: as copy-other-context.
// copy-other-context-a the copy on B issued from C, then back in A: a gate
//                      on N, B waits on N's record after the gate, the
//                      query of A's legacy stream (NOT_READY: B's wait is
//                      pending), then the gate opens. graft must count B's
//                      held wait for A (its stream's context) though the
//                      copy before it counts for C.
// query-other-context  A current: an add, a gate and an add on B; C made
//                      current: its legacy stream's query (SUCCESS: B is A's),
//                      A current again: A's (NOT_READY); the gate opens.
// query-other-thread   as query-other-context, but C's query comes from a
//                      second thread with C current while the first holds
//                      B's work (then A's query from a third thread with A
//                      current: NOT_READY).
// pts-legacy           plain variant: add, gate, add on CU_STREAM_PER_THREAD
//                      (graft holds them under a per-thread key, graft's
//                      proxy issues them); CU_STREAM_LEGACY's query
//                      NOT_READY, an idle blocking stream's SUCCESS,
//                      CU_STREAM_PER_THREAD's NOT_READY.
// ptsz-null            per-thread variant (_ptsz entry points, NULL = the
//                      thread's per-thread stream): add, gate, add on B;
//                      cuStreamQuery_ptsz(NULL) SUCCESS (the per-thread
//                      stream answers for itself only), CU_STREAM_LEGACY
//                      NOT_READY; then the same with the gate on NULL (the
//                      per-thread stream): CU_STREAM_LEGACY NOT_READY, B's
//                      query SUCCESS.
// other-thread-pts     a second thread runs add, gate, add on its per-thread
//                      stream (plain variant, CU_STREAM_PER_THREAD) and
//                      signals; the main thread's legacy query (NOT_READY),
//                      then it opens the gate, the second thread syncs.
// waits-only-blocking  N: add, gate, record E; B waits on E (only a wait held
//                      on B), N: add; the legacy stream's query NOT_READY
//                      (B's wait is pending); a second variant's wait names
//                      an event recorded on an idle stream before the step
//                      (complete): the legacy query then answers for N's
//                      gate only (N is non-blocking: SUCCESS once B's wait
//                      ran; polled until SUCCESS).
// poll-flag-thread     add, gate, add on B; the main thread polls the legacy
//                      stream (NULL) in a loop with no op between while a
//                      second thread, told the poll started, opens the gate
//                      after 2 ms; the poll must end with CUDA_SUCCESS and
//                      B's last add done (read through host memory).
// poll-noops-other-thread  the main thread's held run on B (add, gate, add);
//                      a second thread issues a steady stream of adds on its
//                      own non-blocking stream (ops between the main thread's
//                      queries: no poll is ever seen) and opens the gate
//                      after its 200th add (it stops at 4000); the main
//                      thread polls the legacy stream until SUCCESS (10 s at
//                      most).
// poll-blocking-other-thread  the same with the other thread's stream
//                      blocking (its held adds count for the legacy query;
//                      passes because the other thread stops at 4000 adds and
//                      the idle flush then issues what graft holds).
// poll-lockstep-blocking  a second thread owns blocking stream M; the main
//                      thread asks cuStreamQuery(NULL) and, while it answers
//                      CUDA_ERROR_NOT_READY, has the other thread issue ONE
//                      add on M and waits for that call to return, then asks
//                      again (lock-step: every query has one op before it; a
//                      pipeline that feeds the GPU while it is busy). Each
//                      step starts after cuCtxSynchronize with one add
//                      pending. Eagerly the first query of every step
//                      answers CUDA_SUCCESS (the query's own simulated
//                      progress runs the add), in every configuration tried;
//                      at most 20000 rounds per step.
//                      Failed under graft until the session after r13 (a
//                      livelock, stopped at 20000 rounds): every query found
//                      one of M's adds held and none was a poll (an op came
//                      between), so graft answered NOT_READY every time.
//                      Now, once graft has answered for the target often
//                      enough (core::NotReadyStreak: 128 answers with no
//                      CUDA_SUCCESS from the driver for it since, or 50 ms),
//                      the query issues what is held and asks the driver.
// poll-lockstep-nonblocking  the same with M non-blocking (control: the
//                      legacy query does not count it).
// poll-lockstep-stream  the same but the main thread asks M itself (the
//                      pre-r13 form of the livelock, fixed the same way).
// poll-feed-single     the same in one thread: query(NULL), if not ready
//                      one add on the thread's blocking stream, again
//                      (failed as poll-lockstep-blocking; fixed the same way).
// destroyed-blocking   add, gate, add on a fresh blocking stream D each step;
//                      D destroyed with the gate closed; the legacy query
//                      (SUCCESS in the simulator: a destroyed stream does not
//                      count), the gate opens, cuCtxSynchronize.
// clb-context-then-unset   CUDA_LAUNCH_BLOCKING=1 set after graft started and
//                      before the context is created, unset before the first
//                      op. r13's own premise (options.h, runtime.h: "the
//                      driver reads it when it creates a context") says every
//                      launch then blocks; graft reads the variable at the
//                      first op and keeps graph mode. The simulator does not
//                      model the variable, so the check is that no kernel ran
//                      from a graft graph (graft must forward only).
//                      FAILS under graft (under that premise; the driver
//                      reads the variable at cuInit or at the context's
//                      creation, both after setenv here): runtime.cc:266-278
//                      settleStart reads the variable once, at the first
//                      submitOp (interpose.cc:469), not when the driver read
//                      it; graft stays in graph mode and graphs.
// clb-failed-op-first  a stream-ordered call made before cuInit
//                      (cuMemsetD32Async: CUDA_ERROR_NOT_INITIALIZED, as the
//                      driver answers), then CUDA_LAUNCH_BLOCKING=1 set, then
//                      cuInit, the context, and the loop: as above, no kernel
//                      may run from a graph.
//                      FAILS under graft (same premise): submitOp calls
//                      settleStart for the failed call (interpose.cc:469,
//                      before any check), start_settled_ becomes true
//                      (runtime.cc:267) with the variable unset, and it is
//                      never read again.
// clb-second-context   the loop runs in A (graphs allowed), then
//                      CUDA_LAUNCH_BLOCKING=1 is set and context C created;
//                      the loop runs in C: no kernel of C may run from a
//                      graph (same premise).
//                      FAILS under graft if the driver reads the variable at
//                      each context's creation (r13's words, options.h:63-64,
//                      runtime.h:68-72): settleStart runs once per process
//                      (runtime.h:130 start_settled_), so C's launches are
//                      held and graphed. (If the driver reads it only once,
//                      at cuInit or the first context, this mode is no
//                      divergence.)
// clb-before-context  (control) CUDA_LAUNCH_BLOCKING=1 set after graft
//                      started, before cuInit and the context, kept: graft
//                      reads it at the first op and forwards only (no graph).
// clb-late            (control, graphing lost) the context is created, then
//                      CUDA_LAUNCH_BLOCKING=1 set before the first op: under
//                      the premise the driver does not block, graft forwards
//                      only anyway (sim_short_loop --launch-blocking-late
//                      expects that); codes and values checked only.
//
// RESULTS (snapshot /tmp/snap/lib, 200 steps, SIM_SEED 1-6, SIM_ASYNC_US=3,
// GRAFT_ASYNC_LAUNCH=0, GRAFT_WARMUP=1, SIM_STEPS=0/8, GRAFT_SEGMENT_OPS=4):
// every mode passes eagerly. Under graft the modes marked FAILS fail in
// every configuration (poll-lockstep-blocking and poll-lockstep-stream pass,
// slowly, with SIM_ASYNC_US); all others pass (graphs used except where noted:
// copy-other-context-a (the copy from C makes every segment with it fail its
// launch), destroyed-blocking (a new stream each step), the clb controls).
// Not divergences, seen on the way:
//  - a poll of the legacy stream whose run before the poll is shorter than
//    GRAFT_MIN_SEGMENT_OPS: during warm-up nothing is held, so the legacy
//    stream (no ops of its own, no counters entry: engine.cc:708-714) is no
//    boundary; the segment learned spans the poll, and every replay then
//    flushes it at the poll (query_in_segment) and nothing is graphed (0 %
//    with a 3-op run; poll-flag-thread uses 4 ops, where graft re-learns).
//  - the exit report's "streams" lists {"stream": "0x1", "ops": 0} once
//    engine.cc:714 created the legacy stream's counters.
//  - clb-late (the variable set after the context was created, before the
//    first op): graft goes to passthrough although, by r13's premise, the
//    driver does not block; the warning text "(set after graft started,
//    before the program's first context)" is then wrong.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graft graph.
#include <algorithm>
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
#include "sim_tagged_trace.h"

namespace {

using namespace simtest::modes;

simtest::Driver g_drv;
const simtest::DriverApi* g_cu = nullptr;
CUfunction g_add = nullptr, g_gate = nullptr;
decltype(&::cuCtxCreate_v4) g_create = nullptr;
CUcontext g_a = nullptr;

void add(CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s, const simtest::DriverApi* cu = nullptr) {
  SIM_CHECK(simtest::launchAdd(cu ? *cu : *g_cu, g_add, to, from, v, s));
}
void gate(CUdeviceptr flag, uint64_t open, CUstream s, const simtest::DriverApi* cu = nullptr) {
  SIM_CHECK(simtest::launchAdd(cu ? *cu : *g_cu, g_gate, flag, flag, open, s));
}

CUcontext createdContext() {
  CUcontext c = nullptr;
  SIM_CHECK(g_create(&c, nullptr, 0, 0));  // device 0, pushed
  SIM_CHECK(g_cu->cuCtxSetCurrent(g_a));   // replaces it on the stack
  return c;
}

void setCtx(CUcontext c) { SIM_CHECK(g_cu->cuCtxSetCurrent(c)); }

// ----------------------------------------------------------------- other context's stream
CUcontext device1Context() {
  CUdevice dev1 = 0;
  CUcontext c = nullptr;
  if (g_cu->cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || g_cu->cuDevicePrimaryCtxRetain(&c, dev1) != CUDA_SUCCESS) {
    std::printf("sim_review13b_legacy: no device 1\n");
    std::exit(2);
  }
  return c;
}

void otherContextCopy(int steps, bool memset, bool device1 = false) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);  // A's
  const CUdeviceptr u = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  const CUcontext c = device1 ? device1Context() : createdContext();
  setCtx(c);
  const CUstream NC = simtest::newStream(cu);  // C's
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    add(x, x, 1, NC);
    add(x, x, 2, NC);
    if (memset) SIM_CHECK(cu.cuMemsetD32Async(w, unsigned(i + 1), 2, B));
    else SIM_CHECK(cu.cuMemcpyDtoDAsync(w, u, 8, B));
    add(x, x, 3, NC);
    want += 6;
    expectCode(cu.cuStreamQuery(i % 2 ? CU_STREAM_LEGACY : nullptr), CUDA_SUCCESS,
               "C's legacy stream's query (C has no pending work; B is A's)", i);
    add(x, x, 0, NC);
    SIM_CHECK(cu.cuStreamSynchronize(NC));
    SIM_CHECK(cu.cuStreamSynchronize(B));
    expectValue(peek(x), want, "C's adds", i);
    expectValue(peek(w), memset ? (uint64_t(i + 1) << 32 | uint64_t(i + 1)) : 0, "B's copy or memset", i);
  }
}

void otherContextCopyThenA(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);  // A's
  const CUstream N = simtest::newStream(cu);                     // A's
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr u = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu), flag = simtest::zeroedBuffer(cu),
                    x = simtest::zeroedBuffer(cu);
  const CUcontext c = createdContext();
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    add(x, x, 1, N);
    setCtx(c);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(w, u, 8, B));
    setCtx(g_a);
    gate(flag, open, N);
    SIM_CHECK(cu.cuEventRecord(E, N));
    SIM_CHECK(cu.cuStreamWaitEvent(B, E, 0));
    add(x, x, 2, N);
    want += 3;
    expectCode(cu.cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY, "A's legacy query, B waits on a closed gate", i);
    poke(flag, open);
    add(x, x, 0, B);
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(x), want, "N's adds", i);
  }
}

// ----------------------------------------------------------------- queries from another context / thread
void queryOtherContext(int steps, bool thread) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  const CUcontext c = createdContext();
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    add(a, a, open, B);
    gate(flag, open, B);
    add(b, a, 3, B);
    add(a, a, 0, B);
    want += open;
    if (!thread) {
      setCtx(c);
      expectCode(cu.cuStreamQuery(i % 2 ? CU_STREAM_LEGACY : nullptr), CUDA_SUCCESS, "C's legacy query", i);
      setCtx(g_a);
      expectCode(cu.cuStreamQuery(i % 2 ? nullptr : CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY, "A's legacy query", i);
    } else {
      CUresult rc = CUDA_ERROR_UNKNOWN, ra = CUDA_ERROR_UNKNOWN;
      std::thread([&] {
        SIM_CHECK(cu.cuCtxSetCurrent(c));
        rc = cu.cuStreamQuery(nullptr);
      }).join();
      std::thread([&] {
        SIM_CHECK(cu.cuCtxSetCurrent(g_a));
        ra = cu.cuStreamQuery(CU_STREAM_LEGACY);
      }).join();
      expectCode(rc, CUDA_SUCCESS, "C's legacy query from another thread", i);
      expectCode(ra, CUDA_ERROR_NOT_READY, "A's legacy query from another thread", i);
    }
    poke(flag, open);
    add(b, b, 0, B);
    SIM_CHECK(cu.cuStreamSynchronize(B));
    expectValue(peek(b), want + 3, "B's last add", i);
  }
}

// ----------------------------------------------------------------- per-thread streams
void perThreadLegacy(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream idle = simtest::newStream(cu, CU_STREAM_DEFAULT);
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    add(a, a, open, CU_STREAM_PER_THREAD);
    gate(flag, open, CU_STREAM_PER_THREAD);
    add(b, a, 3, CU_STREAM_PER_THREAD);
    want += open;
    expectCode(cu.cuStreamQuery(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY, "the legacy query, per-thread gate", i);
    expectCode(cu.cuStreamQuery(idle), CUDA_SUCCESS, "an idle blocking stream's query", i);
    expectCode(cu.cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY, "the per-thread stream's query", i);
    poke(flag, open);
    add(b, b, 0, CU_STREAM_PER_THREAD);
    SIM_CHECK(cu.cuStreamSynchronize(CU_STREAM_PER_THREAD));
    expectValue(peek(b), want + 3, "the per-thread stream's last add", i);
  }
}

void ptszNull(int steps) {
  const simtest::DriverApi& pt = g_drv.perThread;
  const CUstream B = simtest::newStream(pt, CU_STREAM_DEFAULT);
  const CUdeviceptr flag = simtest::zeroedBuffer(pt), a = simtest::zeroedBuffer(pt), b = simtest::zeroedBuffer(pt);
  uint64_t want = 0, n = 0;
  for (int i = 0; i < steps; ++i) {
    for (int half = 0; half < 2; ++half) {
      const uint64_t open = ++n;
      const CUstream G = half ? nullptr : B;  // NULL: the per-thread stream here
      add(a, a, open, G, &pt);
      gate(flag, open, G, &pt);
      add(b, a, 3, G, &pt);
      want += open;
      if (!half) {
        expectCode(pt.cuStreamQuery(nullptr), CUDA_SUCCESS, "the per-thread stream's query (_ptsz NULL)", i);
        expectCode(pt.cuStreamQuery(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY, "CU_STREAM_LEGACY's query, B gated", i);
      } else {
        expectCode(pt.cuStreamQuery(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY,
                   "CU_STREAM_LEGACY's query, the per-thread stream gated", i);
        expectCode(pt.cuStreamQuery(B), CUDA_SUCCESS, "B's query, the per-thread stream gated", i);
      }
      poke(flag, open);
      add(b, b, 0, G, &pt);
      SIM_CHECK(pt.cuStreamSynchronize(G));
      expectValue(peek(b), want + 3, "the gated stream's last add", i);
    }
  }
}

void otherThreadPts(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  std::atomic<int> phase{0};
  uint64_t want = 0;
  std::thread t([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(g_a));
    for (int i = 0; i < steps; ++i) {
      const uint64_t open = uint64_t(i) + 1;
      while (phase.load() != 4 * i + 1) std::this_thread::sleep_for(std::chrono::microseconds(20));
      add(a, a, open, CU_STREAM_PER_THREAD);
      gate(flag, open, CU_STREAM_PER_THREAD);
      add(b, a, 3, CU_STREAM_PER_THREAD);
      phase.store(4 * i + 2);
      while (phase.load() != 4 * i + 3) std::this_thread::sleep_for(std::chrono::microseconds(20));
      add(b, b, 0, CU_STREAM_PER_THREAD);
      SIM_CHECK(cu.cuStreamSynchronize(CU_STREAM_PER_THREAD));
      phase.store(4 * i + 4);
    }
  });
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    want += open;
    phase.store(4 * i + 1);
    while (phase.load() != 4 * i + 2) std::this_thread::sleep_for(std::chrono::microseconds(20));
    expectCode(cu.cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY, "the legacy query, another thread's per-thread gate",
               i);
    poke(flag, open);
    phase.store(4 * i + 3);
    while (phase.load() != 4 * i + 4) std::this_thread::sleep_for(std::chrono::microseconds(20));
    expectValue(peek(b), want + 3, "the other thread's last add", i);
  }
  t.join();
}

// ----------------------------------------------------------------- waits only
void waitsOnly(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);
  const CUstream N = simtest::newStream(cu);
  const CUstream idle = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu), done = simtest::newEvent(cu);
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuEventRecord(done, idle));
  SIM_CHECK(cu.cuStreamSynchronize(idle));
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    const bool complete = irregularStep(i, 7, 6, 3);
    add(a, a, open, N);
    gate(flag, open, N);
    SIM_CHECK(cu.cuEventRecord(E, N));
    SIM_CHECK(cu.cuStreamWaitEvent(B, complete ? done : E, 0));
    add(a, a, 0, N);
    want += open;
    if (complete) {
      expectCode(pollUntilDone([&] { return cu.cuStreamQuery(nullptr); }), CUDA_SUCCESS,
                 "the legacy query, B waits on a complete event", i);
    } else {
      expectCode(cu.cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY, "the legacy query, B waits on a closed gate", i);
    }
    poke(flag, open);
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(a), want, "N's adds", i);
  }
}

// ----------------------------------------------------------------- polls
void pollFlagThread(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    add(a, a, open, B);
    gate(flag, open, B);
    add(b, a, 3, B);
    add(a, a, 0, B);
    want += open;
    std::atomic<bool> polling{false};
    std::thread opener([&] {
      while (!polling.load()) std::this_thread::sleep_for(std::chrono::microseconds(20));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      poke(flag, open);
    });
    CUresult r = CUDA_ERROR_NOT_READY;
    const auto t0 = std::chrono::steady_clock::now();
    bool first = true;
    while ((r = cu.cuStreamQuery(nullptr)) == CUDA_ERROR_NOT_READY &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
      if (first) polling.store(true), first = false;
    }
    polling.store(true);
    opener.join();
    expectCode(r, CUDA_SUCCESS, "the legacy stream's poll (10 s at most)", i);
    expectValue(peek(b), want + 3, "B's last add once the legacy poll said done", i);
    add(b, b, 0, B);
    SIM_CHECK(cu.cuStreamSynchronize(B));
  }
}

void pollNoopsOtherThread(int steps, bool blockingOther) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu),
                    z = simtest::zeroedBuffer(cu);
  uint64_t want = 0, zwant = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    add(a, a, open, B);
    gate(flag, open, B);
    add(b, a, 3, B);
    add(a, a, 0, B);
    want += open;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> zAdds{0};
    constexpr uint64_t kCap = 4000;  // then the other thread stops issuing and waits
    std::thread other([&] {
      SIM_CHECK(cu.cuCtxSetCurrent(g_a));
      static CUstream M = simtest::newStream(cu, blockingOther ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING);
      while (!stop.load() && zAdds.load() < kCap) {
        add(z, z, 1, M);
        if (zAdds.fetch_add(1) + 1 == 200) poke(flag, open);
      }
      if (zAdds.load() < 200) poke(flag, open);
      while (!stop.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
      SIM_CHECK(cu.cuStreamSynchronize(M));
    });
    CUresult r = CUDA_ERROR_NOT_READY;
    const auto t0 = std::chrono::steady_clock::now();
    while ((r = cu.cuStreamQuery(nullptr)) == CUDA_ERROR_NOT_READY &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    }
    const uint64_t issuedWhenDone = zAdds.load();
    stop.store(true);
    other.join();
    zwant += zAdds.load();
    expectCode(r, CUDA_SUCCESS, "the legacy stream's poll while another thread issues ops (10 s at most)", i);
    (void)issuedWhenDone;
    expectValue(peek(b), want + 3, "B's last add once the legacy poll said done", i);
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(z), zwant, "the other thread's adds", i);
  }
}

// The main thread asks; only when told "not ready" does the other thread
// issue one more add on M, and the main thread waits for that call to
// return before it asks again (lock-step: the simulator's schedule is the
// seed's). Each query has an op between it and the last one.
void pollLockstep(int steps, bool blockingOther, bool askM = false, bool single = false) {
  const simtest::DriverApi& cu = *g_cu;
  const CUdeviceptr z = simtest::zeroedBuffer(cu);
  std::atomic<CUstream> theM{nullptr};
  std::atomic<int> turn{0};  // 1: the other thread issues one add; 0: done; -1: stop
  std::atomic<uint64_t> issued{0};
  std::thread other([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(g_a));
    const CUstream M = simtest::newStream(cu, blockingOther ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING);
    theM.store(M);
    for (;;) {
      int t;
      while ((t = turn.load()) == 0) std::this_thread::sleep_for(std::chrono::microseconds(5));
      if (t < 0) break;
      add(z, z, 1, M);
      issued.fetch_add(1);
      turn.store(0);
    }
    SIM_CHECK(cu.cuStreamSynchronize(M));
  });
  const CUstream own = single ? simtest::newStream(cu, CU_STREAM_DEFAULT) : nullptr;
  auto oneAdd = [&] {
    if (single) {
      add(z, z, 1, own);
      issued.fetch_add(1);
      return;
    }
    turn.store(1);
    while (turn.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(5));
  };
  for (int k = 0; k < 300; ++k) oneAdd();  // learning
  SIM_CHECK(cu.cuCtxSynchronize());
  oneAdd();
  constexpr int kRounds = 20000;
  int most = 0;
  const CUstream asked = askM ? theM.load() : nullptr;
  for (int i = 0; i < steps; ++i) {
    int rounds = 0;
    CUresult r;
    while ((r = cu.cuStreamQuery(asked)) == CUDA_ERROR_NOT_READY && rounds < kRounds) {
      oneAdd();
      ++rounds;
    }
    most = std::max(most, rounds);
    expectCode(r, CUDA_SUCCESS,
               askM ? "M's query, asked again after each add of the other thread (20000 rounds)"
                    : "the legacy query, asked again after each add of the other thread (20000 rounds)",
               i);
    if (r != CUDA_SUCCESS) break;  // a livelock: shown once
    SIM_CHECK(cu.cuCtxSynchronize());
    oneAdd();  // the next step starts with work pending
  }
  std::printf("sim_review13b_legacy: %s: at most %d rounds before CUDA_SUCCESS\n", g_mode, most);
  turn.store(-1);
  other.join();
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued.load(), "the other thread's adds", steps);
}

void destroyedBlocking(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    const CUstream D = simtest::newStream(cu, CU_STREAM_DEFAULT);
    add(a, a, open, D);
    gate(flag, open, D);
    add(b, a, 3, D);
    add(a, a, 0, D);
    want += open;
    SIM_CHECK(cu.cuStreamDestroy(D));
    expectCode(cu.cuStreamQuery(nullptr), CUDA_SUCCESS, "the legacy query, the gated blocking stream destroyed", i);
    poke(flag, open);
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(b), want + 3, "the destroyed stream's last add", i);
  }
}

// ----------------------------------------------------------------- CUDA_LAUNCH_BLOCKING
// The loop: three adds on a blocking stream and one on the legacy stream, a
// read-back every 10 steps. Returns nothing; graph use is checked by the caller.
void clbLoop(int steps, int salt) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    add(x, x, 1, B);
    add(x, x, 2, nullptr);
    add(x, x, 3, B);
    want += 6;
    if (i % 10 == 9) expectValue(readWord(cu, x), want, "the loop's sum", i + salt);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(readWord(cu, x), want, "the loop's sum at the end", steps + salt);
}

uint64_t graphKernelsIn(CUcontext c, size_t from) {
  uint64_t n = 0;
  SimEffect e;
  for (size_t i = from; simTraceGet(i, &e) == 0; ++i)
    if (e.kind == SIM_EFFECT_KERNEL && e.origin == SIM_ORIGIN_GRAPH && (!c || e.context == c)) ++n;
  return n;
}

void expectNoGraphs(CUcontext c, size_t from, const char* why) {
  const uint64_t n = graphKernelsIn(c, from);
  if (n) {
    ++g_wrong;
    std::printf("sim_review13b_legacy: %s: %llu kernels ran from graft's graphs while CUDA_LAUNCH_BLOCKING=1 was "
                "in effect when the context was created (%s): each such launch returned before its kernel ran, "
                "where the driver returns after it\n",
                g_mode, (unsigned long long)n, why);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review13b_legacy", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  const bool clb = mode.rfind("clb-", 0) == 0;
  unsetenv("CUDA_LAUNCH_BLOCKING");
  if (clb) {
    // The driver (and graft) first, the context later.
    std::string err;
    if (!simtest::loadDriver(&g_drv, &err)) {
      std::fprintf(stderr, "sim_review13b_legacy: %s\n", err.c_str());
      return 2;
    }
    g_cu = &g_drv.plain;
    const simtest::DriverApi& cu = *g_cu;
    if (mode == "clb-failed-op-first") {
      // Before cuInit: whether the driver reads the variable at cuInit or at
      // the context's creation, it reads it after this call.
      CUdeviceptr none = 0;
      expectCode(cu.cuMemsetD32Async(none, 0, 1, nullptr), CUDA_ERROR_NOT_INITIALIZED,
                 "a memset before cuInit", 0);
    }
    if (mode != "clb-late" && mode != "clb-second-context") setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
    if (!simtest::openPrimaryContext(cu, &g_a)) return 2;
    if (mode == "clb-context-then-unset") unsetenv("CUDA_LAUNCH_BLOCKING");
    if (mode == "clb-late") setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
    g_add = simtest::libraryKernel3("sim_add_review13b");
    simTraceClear();
    if (mode == "clb-second-context") {
      if (!simtest::lookupProc(g_drv, "cuCtxCreate", &g_create)) return 2;
      clbLoop(steps, 0);
      setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
      const CUcontext c = createdContext();
      setCtx(c);
      const size_t from = simTraceSize();
      clbLoop(steps, steps);
      expectNoGraphs(c, from, "set before C was created");
    } else if (mode == "clb-context-then-unset" || mode == "clb-failed-op-first") {
      clbLoop(steps, 0);
      expectNoGraphs(nullptr, 0,
                     mode == "clb-failed-op-first" ? "set after a failed op, before the context"
                                                   : "set before the context, unset before the first op");
    } else if (mode == "clb-late" || mode == "clb-before-context") {
      clbLoop(steps, 0);
      if (mode == "clb-before-context") expectNoGraphs(nullptr, 0, "set before the context");
    } else {
      std::printf("sim_review13b_legacy: unknown mode %s\n", mode.c_str());
      return 2;
    }
    return report(steps, args.expectGraphs);
  }
  if (int rc = simtest::startProgram("sim_review13b_legacy", &g_drv, &g_a)) return rc;
  g_cu = &g_drv.plain;
  if (!simtest::lookupProc(g_drv, "cuCtxCreate", &g_create)) return 2;
  g_add = simtest::libraryKernel3("sim_add_review13b");
  g_gate = simtest::libraryKernel3("sim_gate_review13b");
  if (mode == "copy-other-context") otherContextCopy(steps, false);
  else if (mode == "memset-other-context") otherContextCopy(steps, true);
  else if (mode == "copy-other-device") otherContextCopy(steps, false, true);
  else if (mode == "copy-other-context-a") otherContextCopyThenA(steps);
  else if (mode == "query-other-context") queryOtherContext(steps, false);
  else if (mode == "query-other-thread") queryOtherContext(steps, true);
  else if (mode == "pts-legacy") perThreadLegacy(steps);
  else if (mode == "ptsz-null") ptszNull(steps);
  else if (mode == "other-thread-pts") otherThreadPts(steps);
  else if (mode == "waits-only-blocking") waitsOnly(steps);
  else if (mode == "poll-flag-thread") pollFlagThread(steps);
  else if (mode == "poll-noops-other-thread") pollNoopsOtherThread(steps, false);
  else if (mode == "poll-blocking-other-thread") pollNoopsOtherThread(steps, true);
  else if (mode == "poll-lockstep-blocking") pollLockstep(steps, true);
  else if (mode == "poll-lockstep-nonblocking") pollLockstep(steps, false);
  else if (mode == "poll-lockstep-stream") pollLockstep(steps, true, true);
  else if (mode == "poll-feed-single") pollLockstep(steps, true, false, true);
  else if (mode == "destroyed-blocking") destroyedBlocking(steps);
  else {
    std::printf("usage: sim_review13b_legacy --mode copy-other-context|memset-other-context|copy-other-device|copy-other-context-a|"
                "query-other-context|query-other-thread|pts-legacy|ptsz-null|other-thread-pts|"
                "waits-only-blocking|poll-flag-thread|poll-noops-other-thread|poll-blocking-other-thread|poll-lockstep-blocking|poll-lockstep-nonblocking|poll-lockstep-stream|poll-feed-single|destroyed-blocking|"
                "clb-context-then-unset|clb-failed-op-first|clb-second-context|clb-before-context|clb-late "
                "[--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
