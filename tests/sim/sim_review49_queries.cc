// sim_review49_queries: a red-team review of the answers graft gives to
// queries and synchronizations (helper-written): cuEventQuery, cuStreamQuery,
// cuEventSynchronize, cuStreamSynchronize, cuCtxSynchronize and a blocking
// copy, while graft holds a step's ops back (Engine::query,
// Engine::hostBarrier: src/core/engine.cc) or replays them from graphs whose
// branches are joined to the program's streams by tail events
// (GraphExecutor::runLaunch: src/graph/graph_executor.cc), often from its
// launch thread. Eager semantics (CUDA driver documentation): an event query
// says CUDA_SUCCESS once the work its latest record captured completed; a
// stream query once all work submitted to the stream completed; after
// cuEventSynchronize(e) every op ordered before e's record has completed,
// including the work of other streams that e's stream waited for, so queries
// of events recorded before those waits, and of streams whose last op was
// such a record, say CUDA_SUCCESS. Every code and value is compared with a
// host mirror of what eager guarantees; a query must never say CUDA_SUCCESS
// before its work ran (values read right after it), and every poll is
// bounded (a livelock shows as a failure, not a hang).
//
//   sim_review49_queries --mode MODE [--steps N] [--expect-graphs]
//                        [--min-graph-pct P] [--implied-poll] [--verbose]
//
// implied-event-sync  a fork/join step: main stream m (non-blocking) x += 1
//                four times, records F0; side streams s1, s2 wait F0, each
//                does four adds into its own buffer and records E1 / E2 as
//                its last op; m waits E1 and E2, adds both results into c, d
//                and records Fend as its last op. The host calls
//                cuEventSynchronize(Fend), then asks cuStreamQuery(m),
//                cuStreamQuery(s1), cuEventQuery(E1), the same for s2 and E2,
//                then cuEventQuery of F0 and Fend: every one must say
//                CUDA_SUCCESS at once (the work each covers is ordered before
//                Fend: the implied queries), then reads every buffer.
// implied-stream-sync  the same, the host synchronizing m (cuStreamSynchronize).
// implied-copy-sync    the same with m a blocking stream, the host reading c with
//                a synchronous cuMemcpyDtoH (the legacy stream waits for m).
// implied-ctx-sync     the same, the host calling cuCtxSynchronize (control).
// implied-pts    the same with s2 the calling thread's per-thread default
//                stream (the _ptsz entry points, NULL stream) and
//                cuEventSynchronize(Fend).
// implied-pts-main  the per-thread default stream as the main stream, s1 and
//                s2 created streams, cuEventSynchronize(Fend).
// mid-event-sync implied-event-sync with 12 launches queued on m after Fend
//                (the next step's work) before the host waits for Fend: Fend
//                is no longer m's last op (a review of 65e5afd).
// pts-side-sync  implied-pts, the host synchronizing the per-thread s2 and
//                querying E2 and s2 before it waits for Fend (the same review).
// implied-legacy the legacy stream joined only implicitly: s1, s2 blocking
//                streams (each: adds from the legacy stream's last result,
//                then records E1 / E2 last); the legacy stream adds both into
//                c, d and records Fend. After cuEventSynchronize(Fend): E1, E2,
//                s1, s2 and the legacy stream must say CUDA_SUCCESS.
// implied-legacy-pts  the same with the calling thread's per-thread default
//                stream (blocking) in place of s1 and s2: after
//                cuEventSynchronize(Fend) the per-thread stream, its last
//                record E and the legacy stream must say CUDA_SUCCESS.
// rerecord       an event E recorded on s1 after a long run, then recorded
//                again on s2 (which waited for the first record and added
//                from it) before any query, while s1 goes on. The host polls
//                cuEventQuery(E) (no op between): once CUDA_SUCCESS, s2's
//                work before the second record must have run; s1's later
//                work need not (then s1 is synchronized and checked).
// rerecord-sync  the same, the host calling cuEventSynchronize(E), then
//                cuStreamQuery(s2) (its last op was the record: CUDA_SUCCESS).
// rerecord-tails  E recorded as the last op of s1 (one add) and then of s2
//                (ten adds; its latest record), m waits on E and records
//                Fend: the host polls cuEventQuery(E): once CUDA_SUCCESS,
//                s2's ten adds must have run; then cuEventSynchronize(Fend),
//                and m and s2 must be idle.
// alloc-reuse    a caching allocator: a pool of three device blocks, each
//                with the event of its last use. A step takes the oldest
//                block once cuEventQuery of its event says CUDA_SUCCESS
//                (else waits with cuEventSynchronize): its content must be
//                the value its last use wrote, and the host then overwrites
//                it (the block reused). A producer stream writes the block
//                (six adds), records P; a consumer stream waits P, adds the
//                block into the step's output slot and a running sum, and
//                records the block's event. At the end every output slot
//                must hold its step's value: a kernel of an earlier use that
//                ran after the block was reused would read the host's
//                overwrite.
// alloc-reuse-fork  the same, the block written on two streams forked from the
//                producer and joined back before P.
// alloc-reuse-pts  alloc-reuse-fork with the consumer the calling thread's
//                per-thread default stream (_ptsz entry points).
// poll-feed      the fork/join step, then a loop whose exit is a query:
//                cuEventQuery(Fend) and, while CUDA_ERROR_NOT_READY, three
//                adds on a feed stream f (a feeding loop, bounded at 200000
//                rounds); on CUDA_SUCCESS c, d must hold the step's values,
//                and E1, E2, s1, s2 must say CUDA_SUCCESS. The feed counter
//                is checked at the end.
// poll-feed-stream  the same with cuStreamQuery(m) as the exit.
// poll-plain     the same with no op between two queries (a poll).
// sync-other-thread  the fork/join step on the main thread; a second thread
//                does cuEventSynchronize(Fend) and the implied queries while
//                the main thread keeps issuing adds to another stream t (it
//                waits for the second thread's verdict before the next step).
// query-other-thread  a second thread keeps asking cuEventQuery(E1) and
//                cuStreamQuery(s1) while the main thread issues fork/join
//                steps; before each question it reads the step the main
//                thread published after its record calls returned: a
//                CUDA_SUCCESS means s1's buffer holds at least that step's
//                value (it only grows). Every 8th step the main thread
//                synchronizes Fend and asks the implied queries.
// two-threads-sync  two threads, each with its own fork/join step on its own
//                three streams, each synchronizing its own Fend and asking
//                the implied queries, at the same time.
//
// --implied-poll: an implied query that says CUDA_ERROR_NOT_READY is counted
// (printed at the end) and asked again, with no op between, until it says
// something else (100000 times at most), which must be CUDA_SUCCESS: what
// a program that polls would see. --verbose: every wrong answer (not only
// the first 8), and poll-* print each step's rounds.
//
// FINDINGS (library at 874c77b). No query said CUDA_SUCCESS before the
// work it covers ran (no wrong value in any mode or setting), no poll failed
// to end, and rerecord*, alloc-reuse*, implied-ctx-sync and implied-legacy
// pass strictly. The implied queries diverge: after the host waited for the
// join, graft may answer CUDA_ERROR_NOT_READY (the driver's answer about the
// work graft issued) where eager answers CUDA_SUCCESS, until the simulated
// GPU runs graft's bookkeeping after a branched graph:
//   - each side stream's tail wait and the program's tail record issued on
//     it after the graph (GraphExecutor::runLaunch, graph_executor.cc
//     :915-926; EventOp::tailBranch, set at :601-613, keeps the node a
//     placeholder, :876-877): the join's wait on E1 inside the graph is an
//     edge from that placeholder node, so Fend does not follow the program's
//     record of E1 nor s1's tail wait (cuEventQuery(E1), cuStreamQuery(s1));
//   - the side branches' tail-event record nodes (:616-618), which the join
//     branch's last node does not follow: with the graph launched on m
//     (launch plan: fork and join), m is idle only after them
//     (cuStreamQuery(m) after cuEventSynchronize(Fend));
//   - with the legacy stream joined implicitly to the per-thread stream, the
//     per-thread proxy's tail wait is issued after the legacy stream's tail
//     record Fend (tail order :915, legacy first), so it is pending after
//     Fend completed, and the legacy stream's query, which answers for
//     blocking streams, says not ready.
// Every mode with a cuEventSynchronize / cuStreamSynchronize / blocking copy
// of the join shows it by default (1-280 such answers in 200 steps), and
// with GRAFT_ASYNC_LAUNCH=0, SIM_GRAPH_LAUNCH_US=200, GRAFT_WARMUP=1/3,
// SIM_SEED=2/3/7, SIM_STEPS=1, SIM_ASYNC_US=20; with SIM_STEPS=8 (more
// simulated progress per call) or GRAFT_SEGMENT_OPS=4 a few modes happened
// to pass (implied-stream-sync, implied-copy-sync). The answers turn
// CUDA_SUCCESS when asked again (--implied-poll passes in every setting).
// Fixed since (GraphHandle::endFollows, then the per-thread marker's wait on
// the branch's last record) but for implied-legacy-pts and mid-event-sync
// (see sim_review50_records).
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph, or with
// --min-graph-pct P fewer than P % of the effects came from graphs.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

// expectCodeMt / expectValueMt (thread-safe, tallied), impliedQuery
// (--implied-poll) and printTally: sim_mode_checks.h.

CUfunction g_add = nullptr;

// ------------------------------------------------------------------ fork/join

// One fork/join step's streams and events. A side stream or the main stream
// may be the calling thread's per-thread default stream: then its calls go
// through the per-thread entry points with the NULL stream.
struct ForkJoin {
  const simtest::DriverApi* cu = nullptr;  // legacy-stream entry points
  const simtest::DriverApi* pt = nullptr;  // per-thread entry points
  CUstream m = nullptr, s1 = nullptr, s2 = nullptr;
  bool mPts = false, s2Pts = false;
  CUevent f0 = nullptr, e1 = nullptr, e2 = nullptr, fend = nullptr;
  CUdeviceptr x = 0, a1 = 0, a2 = 0, c = 0, d = 0, z = 0;
  uint64_t hx = 0, ha1 = 0, ha2 = 0, hc = 0, hd = 0, hz = 0;  // the host mirror
  int trailing = 0;  // launches on m after Fend (the next step's work queued before the host waits)

  const simtest::DriverApi& api(bool perThread) const { return perThread ? *pt : *cu; }
  const simtest::DriverApi& mApi() const { return api(mPts); }
  const simtest::DriverApi& s2Api() const { return api(s2Pts); }
  CUstream mS() const { return mPts ? nullptr : m; }
  CUstream s2S() const { return s2Pts ? nullptr : s2; }

  void create(const simtest::DriverApi& legacy, const simtest::DriverApi& perThread, unsigned mFlags, bool mainPts,
              bool sidePts) {
    cu = &legacy;
    pt = &perThread;
    mPts = mainPts;
    s2Pts = sidePts;
    if (!mPts) SIM_CHECK(cu->cuStreamCreate(&m, mFlags));
    SIM_CHECK(cu->cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    if (!s2Pts) SIM_CHECK(cu->cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    for (CUevent* e : {&f0, &e1, &e2, &fend}) SIM_CHECK(cu->cuEventCreate(e, CU_EVENT_DISABLE_TIMING));
    for (CUdeviceptr* p : {&x, &a1, &a2, &c, &d, &z}) *p = simtest::zeroedBuffer(*cu);
  }

  // The step's ops (Fend recorded last on m).
  void issue() {
    const simtest::DriverApi& M = mApi();
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(M, g_add, x, x, 1, mS()));
    hx += 4;
    SIM_CHECK(M.cuEventRecord(f0, mS()));
    SIM_CHECK(cu->cuStreamWaitEvent(s1, f0, 0));
    SIM_CHECK(simtest::launchAdd(*cu, g_add, a1, x, 10, s1));
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(*cu, g_add, a1, a1, 1, s1));
    ha1 = hx + 13;
    SIM_CHECK(cu->cuEventRecord(e1, s1));
    const simtest::DriverApi& S2 = s2Api();
    SIM_CHECK(S2.cuStreamWaitEvent(s2S(), f0, 0));
    SIM_CHECK(simtest::launchAdd(S2, g_add, a2, x, 20, s2S()));
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(S2, g_add, a2, a2, 2, s2S()));
    ha2 = hx + 26;
    SIM_CHECK(S2.cuEventRecord(e2, s2S()));
    SIM_CHECK(M.cuStreamWaitEvent(mS(), e1, 0));
    SIM_CHECK(M.cuStreamWaitEvent(mS(), e2, 0));
    SIM_CHECK(simtest::launchAdd(M, g_add, c, a1, 100, mS()));
    SIM_CHECK(simtest::launchAdd(M, g_add, d, a2, 200, mS()));
    hc = ha1 + 100;
    hd = ha2 + 200;
    SIM_CHECK(M.cuEventRecord(fend, mS()));
    for (int k = 0; k < trailing; ++k) SIM_CHECK(simtest::launchAdd(M, g_add, z, z, 1, mS()));
    hz += uint64_t(trailing);
  }

  // After the host knows Fend complete: everything of the step is complete.
  void expectAllDone(int step, bool mainIdle = true) const {
    // The main stream first (right after the host's wait), then each side
    // stream and its event, then m's own events.
    const simtest::DriverApi& M = mApi();
    const simtest::DriverApi& S2 = s2Api();
    const CUstream ms = mS(), s2s = s2S();
    if (mainIdle)
      expectCodeMt(impliedQuery([&] { return M.cuStreamQuery(ms); }), CUDA_SUCCESS,
                   mPts ? "cuStreamQuery(per-thread m) (its last op was Fend)" : "cuStreamQuery(m) (its last op was Fend)",
                   step);
    expectCodeMt(impliedQuery([&] { return cu->cuStreamQuery(s1); }), CUDA_SUCCESS,
                 "cuStreamQuery(s1) (its last op, E1, waited for before Fend)", step);
    expectCodeMt(impliedQuery([&] { return cu->cuEventQuery(e1); }), CUDA_SUCCESS,
                 "cuEventQuery(E1) (s1's last op, waited for before Fend)", step);
    expectCodeMt(impliedQuery([&] { return S2.cuStreamQuery(s2s); }), CUDA_SUCCESS,
                 s2Pts ? "cuStreamQuery(per-thread s2) (its last op, E2, waited for before Fend)"
                       : "cuStreamQuery(s2) (its last op, E2, waited for before Fend)",
                 step);
    expectCodeMt(impliedQuery([&] { return cu->cuEventQuery(e2); }), CUDA_SUCCESS,
                 "cuEventQuery(E2) (s2's last op, waited for before Fend)", step);
    expectCodeMt(impliedQuery([&] { return cu->cuEventQuery(f0); }), CUDA_SUCCESS,
                 "cuEventQuery(F0) (recorded before Fend on m)", step);
    expectCodeMt(cu->cuEventQuery(fend), CUDA_SUCCESS, "cuEventQuery(Fend) after Fend completed", step);
    expectValues(step);
  }
  void expectValues(int step) const {
    expectValueMt(peek(x), hx, "x", step);
    expectValueMt(peek(a1), ha1, "a1", step);
    expectValueMt(peek(a2), ha2, "a2", step);
    expectValueMt(peek(c), hc, "c", step);
    expectValueMt(peek(d), hd, "d", step);
    if (trailing) {
      SIM_CHECK(mApi().cuStreamSynchronize(mS()));
      expectValueMt(peek(z), hz, "z", step);
    }
  }
};

enum class SyncKind { Event, Stream, Copy, Ctx };

void implied(const simtest::Driver& drv, int steps, SyncKind sync, bool mainPts, bool sidePts, int trailing = 0) {
  ForkJoin fj;
  fj.create(drv.plain, drv.perThread, sync == SyncKind::Copy ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING, mainPts,
            sidePts);
  fj.trailing = trailing;
  for (int i = 0; i < steps; ++i) {
    fj.issue();
    switch (sync) {
      case SyncKind::Event: SIM_CHECK(drv.plain.cuEventSynchronize(fj.fend)); break;
      case SyncKind::Stream: SIM_CHECK(fj.mApi().cuStreamSynchronize(fj.mS())); break;
      case SyncKind::Copy: {
        uint64_t v = 0;
        SIM_CHECK(drv.plain.cuMemcpyDtoH(&v, fj.c, 8));  // legacy stream: waits for blocking m
        expectValueMt(v, fj.hc, "c (read by cuMemcpyDtoH)", i);
        break;
      }
      case SyncKind::Ctx: SIM_CHECK(drv.plain.cuCtxSynchronize()); break;
    }
    fj.expectAllDone(i, trailing == 0);
  }
}

// pts-side-sync: s2 is the per-thread default stream; the host synchronizes
// it, then asks about E2 (its last op) and s2, then waits for Fend.
void ptsSideSync(const simtest::Driver& drv, int steps) {
  ForkJoin fj;
  fj.create(drv.plain, drv.perThread, CU_STREAM_NON_BLOCKING, false, true);
  for (int i = 0; i < steps; ++i) {
    fj.issue();
    SIM_CHECK(drv.perThread.cuStreamSynchronize(nullptr));
    expectCodeMt(impliedQuery([&] { return drv.plain.cuEventQuery(fj.e2); }), CUDA_SUCCESS,
                 "cuEventQuery(E2) after cuStreamSynchronize(per-thread s2)", i);
    expectCodeMt(impliedQuery([&] { return drv.perThread.cuStreamQuery(nullptr); }), CUDA_SUCCESS,
                 "cuStreamQuery(per-thread s2) after its synchronize", i);
    SIM_CHECK(drv.plain.cuEventSynchronize(fj.fend));
    fj.expectAllDone(i);
  }
}

// implied-legacy: blocking streams s1, s2 and the legacy stream, joined only
// by the legacy stream's implicit synchronization.
void impliedLegacy(const simtest::DriverApi& cu, int steps) {
  CUstream s1, s2;
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_DEFAULT));
  SIM_CHECK(cu.cuStreamCreate(&s2, CU_STREAM_DEFAULT));
  CUevent e1, e2, fend;
  for (CUevent* e : {&e1, &e2, &fend}) SIM_CHECK(cu.cuEventCreate(e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr a1 = simtest::zeroedBuffer(cu), a2 = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu),
                    d = simtest::zeroedBuffer(cu);
  uint64_t ha1 = 0, ha2 = 0, hc = 0, hd = 0;
  for (int i = 0; i < steps; ++i) {
    // s1, s2 start after the legacy stream's earlier work (implicitly).
    SIM_CHECK(simtest::launchAdd(cu, g_add, a1, c, 1, s1));
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, g_add, a1, a1, 1, s1));
    ha1 = hc + 4;
    SIM_CHECK(cu.cuEventRecord(e1, s1));
    SIM_CHECK(simtest::launchAdd(cu, g_add, a2, d, 2, s2));
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, g_add, a2, a2, 2, s2));
    ha2 = hd + 8;
    SIM_CHECK(cu.cuEventRecord(e2, s2));
    SIM_CHECK(simtest::launchAdd(cu, g_add, c, a1, 3, nullptr));
    SIM_CHECK(simtest::launchAdd(cu, g_add, d, a2, 5, nullptr));
    hc = ha1 + 3;
    hd = ha2 + 5;
    SIM_CHECK(cu.cuEventRecord(fend, nullptr));
    SIM_CHECK(cu.cuEventSynchronize(fend));
    expectCodeMt(impliedQuery([&] { return cu.cuEventQuery(e1); }), CUDA_SUCCESS, "cuEventQuery(E1) (before the legacy stream's Fend)", i);
    expectCodeMt(impliedQuery([&] { return cu.cuEventQuery(e2); }), CUDA_SUCCESS, "cuEventQuery(E2) (before the legacy stream's Fend)", i);
    expectCodeMt(impliedQuery([&] { return cu.cuStreamQuery(s1); }), CUDA_SUCCESS, "cuStreamQuery(blocking s1) (the legacy stream waited for it)", i);
    expectCodeMt(impliedQuery([&] { return cu.cuStreamQuery(s2); }), CUDA_SUCCESS, "cuStreamQuery(blocking s2) (the legacy stream waited for it)", i);
    expectCodeMt(impliedQuery([&] { return cu.cuStreamQuery(nullptr); }), CUDA_SUCCESS, "cuStreamQuery(legacy) (its last op was Fend)", i);
    expectValueMt(peek(a1), ha1, "a1", i);
    expectValueMt(peek(a2), ha2, "a2", i);
    expectValueMt(peek(c), hc, "c", i);
    expectValueMt(peek(d), hd, "d", i);
  }
}

// implied-legacy-pts: the per-thread default stream (blocking) and the
// legacy stream, joined only implicitly: the per-thread stream adds from the
// legacy stream's last result and records E last; the legacy stream adds
// from it and records Fend. After cuEventSynchronize(Fend): E, the
// per-thread stream and the legacy stream must say CUDA_SUCCESS.
void impliedLegacyPts(const simtest::DriverApi& cu, const simtest::DriverApi& pt, int steps) {
  CUevent e, fend;
  for (CUevent* ev : {&e, &fend}) SIM_CHECK(cu.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr a = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu);
  uint64_t ha = 0, hc = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(pt, g_add, a, c, 1, nullptr));
    for (int k = 0; k < 5; ++k) SIM_CHECK(simtest::launchAdd(pt, g_add, a, a, 1, nullptr));
    ha = hc + 6;
    SIM_CHECK(pt.cuEventRecord(e, nullptr));
    SIM_CHECK(simtest::launchAdd(cu, g_add, c, a, 3, nullptr));
    SIM_CHECK(simtest::launchAdd(cu, g_add, c, c, 1, nullptr));
    hc = ha + 4;
    SIM_CHECK(cu.cuEventRecord(fend, nullptr));
    SIM_CHECK(cu.cuEventSynchronize(fend));
    expectCodeMt(impliedQuery([&] { return cu.cuStreamQuery(nullptr); }), CUDA_SUCCESS,
                 "cuStreamQuery(legacy) (its last op was Fend)", i);
    expectCodeMt(impliedQuery([&] { return pt.cuStreamQuery(nullptr); }), CUDA_SUCCESS,
                 "cuStreamQuery(per-thread) (the legacy stream waited for it)", i);
    expectCodeMt(impliedQuery([&] { return cu.cuEventQuery(e); }), CUDA_SUCCESS,
                 "cuEventQuery(E) (the per-thread stream's last op, before Fend)", i);
    expectValueMt(peek(a), ha, "a", i);
    expectValueMt(peek(c), hc, "c", i);
  }
}

// ------------------------------------------------------------------ rerecord

void rerecord(const simtest::DriverApi& cu, int steps, bool sync) {
  CUstream s1, s2;
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu);
  uint64_t ha = 0, hb = 0, hsnap = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 6; ++k) SIM_CHECK(simtest::launchAdd(cu, g_add, a, a, 1, s1));
    ha += 6;
    SIM_CHECK(simtest::launchAdd(cu, g_add, snap, a, 0, s1));
    hsnap = ha;
    SIM_CHECK(cu.cuEventRecord(e, s1));
    SIM_CHECK(cu.cuStreamWaitEvent(s2, e, 0));  // the first record
    SIM_CHECK(simtest::launchAdd(cu, g_add, b, snap, 1, s2));
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, g_add, b, b, 1, s2));
    hb = hsnap + 4;
    // s1 goes on (a only: snap is s2's to read until the next step).
    for (int k = 0; k < 5; ++k) SIM_CHECK(simtest::launchAdd(cu, g_add, a, a, 1, s1));
    ha += 5;
    SIM_CHECK(cu.cuEventRecord(e, s2));  // again: E now follows s2's work
    if (sync) {
      SIM_CHECK(cu.cuEventSynchronize(e));
      expectCodeMt(impliedQuery([&] { return cu.cuStreamQuery(s2); }), CUDA_SUCCESS, "cuStreamQuery(s2) (its last op, E's record, completed)", i);
      expectCodeMt(cu.cuEventQuery(e), CUDA_SUCCESS, "cuEventQuery(E) after cuEventSynchronize(E)", i);
    } else {
      const CUresult q = pollUntilDone([&] { return cu.cuEventQuery(e); }, 200000);
      expectCodeMt(q, CUDA_SUCCESS, "cuEventQuery(E) polled (200000 times at most)", i);
    }
    expectValueMt(peek(b), hb, "b (s2's work before E's latest record)", i);
    SIM_CHECK(cu.cuStreamSynchronize(s1));
    expectValueMt(peek(a), ha, "a", i);
    expectValueMt(peek(snap), hsnap, "snap", i);
  }
}

// rerecord-tails: E recorded as the last op of two side streams in turn
// (s1, a short run, then s2, a long one: E's latest record is s2's), m
// waits on E (s2's record), adds from s2's result and records Fend. The host
// polls cuEventQuery(E) first: once CUDA_SUCCESS, s2's run must have
// completed; then cuEventSynchronize(Fend) and the implied queries.
void rerecordTails(const simtest::DriverApi& cu, int steps) {
  CUstream m, s1, s2;
  SIM_CHECK(cu.cuStreamCreate(&m, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent f0, e, fend;
  for (CUevent* ev : {&f0, &e, &fend}) SIM_CHECK(cu.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu),
                    c = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, ha = 0, hb = 0, hc = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, g_add, x, x, 1, m));
    hx += 1;
    SIM_CHECK(cu.cuEventRecord(f0, m));
    SIM_CHECK(cu.cuStreamWaitEvent(s1, f0, 0));
    SIM_CHECK(cu.cuStreamWaitEvent(s2, f0, 0));
    SIM_CHECK(simtest::launchAdd(cu, g_add, a, x, 5, s1));
    ha = hx + 5;
    SIM_CHECK(cu.cuEventRecord(e, s1));
    SIM_CHECK(simtest::launchAdd(cu, g_add, b, x, 7, s2));
    for (int k = 0; k < 9; ++k) SIM_CHECK(simtest::launchAdd(cu, g_add, b, b, 1, s2));
    hb = hx + 16;
    SIM_CHECK(cu.cuEventRecord(e, s2));  // E's latest record
    SIM_CHECK(cu.cuStreamWaitEvent(m, e, 0));
    SIM_CHECK(simtest::launchAdd(cu, g_add, c, b, 100, m));
    hc = hb + 100;
    SIM_CHECK(cu.cuEventRecord(fend, m));
    const CUresult q = pollUntilDone([&] { return cu.cuEventQuery(e); }, 200000);
    expectCodeMt(q, CUDA_SUCCESS, "cuEventQuery(E) polled (200000 times at most)", i);
    expectValueMt(peek(b), hb, "b (s2's run before E's latest record)", i);
    SIM_CHECK(cu.cuEventSynchronize(fend));
    expectCodeMt(impliedQuery([&] { return cu.cuStreamQuery(m); }), CUDA_SUCCESS, "cuStreamQuery(m) (its last op was Fend)", i);
    expectCodeMt(impliedQuery([&] { return cu.cuStreamQuery(s2); }), CUDA_SUCCESS,
                 "cuStreamQuery(s2) (its last op, E, waited for before Fend)", i);
    SIM_CHECK(cu.cuStreamSynchronize(s1));  // s1's record is not implied complete (m waited on s2's)
    expectValueMt(peek(a), ha, "a", i);
    expectValueMt(peek(c), hc, "c", i);
  }
}

// ------------------------------------------------------------------ alloc-reuse

void allocReuse(const simtest::DriverApi& cu, const simtest::DriverApi& pt, int steps, bool fork, bool ptsConsumer) {
  CUstream p, q = nullptr, p2 = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&p, CU_STREAM_NON_BLOCKING));
  if (!ptsConsumer) SIM_CHECK(cu.cuStreamCreate(&q, CU_STREAM_NON_BLOCKING));
  const simtest::DriverApi& Q = ptsConsumer ? pt : cu;  // q null: the per-thread stream
  if (fork) SIM_CHECK(cu.cuStreamCreate(&p2, CU_STREAM_NON_BLOCKING));
  constexpr int kBlocks = 3;
  CUdeviceptr block[kBlocks];
  CUevent used[kBlocks];
  bool inUse[kBlocks] = {};
  uint64_t lastValue[kBlocks] = {};
  for (int b = 0; b < kBlocks; ++b) {
    block[b] = simtest::zeroedBuffer(cu);
    SIM_CHECK(cu.cuEventCreate(&used[b], CU_EVENT_DISABLE_TIMING));
  }
  CUevent produced, forked, joined;
  SIM_CHECK(cu.cuEventCreate(&produced, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&forked, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&joined, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr seed = simtest::zeroedBuffer(cu), sum = simtest::zeroedBuffer(cu), side = simtest::zeroedBuffer(cu);
  const CUdeviceptr out = simtest::zeroedBuffer(cu, size_t(steps) * 8 + 8);
  std::vector<uint64_t> want(size_t(steps), 0);
  uint64_t hsum = 0;
  int next = 0;  // the oldest block
  int waited = 0;
  for (int i = 0; i < steps; ++i) {
    const int b = next;
    next = (next + 1) % kBlocks;
    if (inUse[b]) {
      const CUresult r = cu.cuEventQuery(used[b]);
      if (r == CUDA_ERROR_NOT_READY) {
        SIM_CHECK(cu.cuEventSynchronize(used[b]));
        ++waited;
      } else {
        expectCodeMt(r, CUDA_SUCCESS, "cuEventQuery(block's event)", i);
      }
      // Free: its last use's writes all landed, and its reads are done.
      expectValueMt(peek(block[b]), lastValue[b], "a reused block's content (its last use's value)", i);
      poke(block[b], 0xdead0000ull + uint64_t(i));  // the memory reused
    }
    const uint64_t v = 1000 * uint64_t(i);
    // The producer: block = seed + v, then five adds (forked: two of them on p2).
    {
      CUdeviceptr to = block[b], from = seed;
      uint64_t add = v;
      void* a[] = {&to, &from, &add};
      SIM_CHECK(cu.cuLaunchKernel(g_add, 1, 1, 1, 1, 1, 1, 0, p, a, nullptr));
    }
    uint64_t hv = v;
    if (fork) {
      SIM_CHECK(cu.cuEventRecord(forked, p));
      SIM_CHECK(cu.cuStreamWaitEvent(p2, forked, 0));
      SIM_CHECK(simtest::launchAdd(cu, g_add, block[b], block[b], 3, p2));
      SIM_CHECK(simtest::launchAdd(cu, g_add, block[b], block[b], 4, p2));
      SIM_CHECK(simtest::launchAdd(cu, g_add, side, block[b], 0, p2));
      SIM_CHECK(cu.cuEventRecord(joined, p2));
      SIM_CHECK(cu.cuStreamWaitEvent(p, joined, 0));
      hv += 7;
    } else {
      SIM_CHECK(simtest::launchAdd(cu, g_add, block[b], block[b], 3, p));
      SIM_CHECK(simtest::launchAdd(cu, g_add, block[b], block[b], 4, p));
      hv += 7;
    }
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, g_add, block[b], block[b], 1, p));
    hv += 3;
    SIM_CHECK(cu.cuEventRecord(produced, p));
    // The consumer reads the block.
    SIM_CHECK(Q.cuStreamWaitEvent(q, produced, 0));
    SIM_CHECK(simtest::launchAdd(Q, g_add, out + 8 * uint64_t(i), block[b], 0, q));
    SIM_CHECK(simtest::launchAdd(Q, g_add, sum, sum, 1, q));
    hsum += 1;
    SIM_CHECK(Q.cuEventRecord(used[b], q));
    want[size_t(i)] = hv;
    lastValue[b] = hv;
    inUse[b] = true;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  for (int i = 0; i < steps; ++i) expectValueMt(peek(out + 8 * uint64_t(i)), want[size_t(i)], "an output slot", i);
  expectValueMt(peek(sum), hsum, "sum", steps);
  std::printf("%s: %s: %d of %d reuses waited (cuEventSynchronize)\n", g_program, g_mode, waited, steps - kBlocks);
}

// ------------------------------------------------------------------ poll-feed

enum class PollKind { FeedEvent, FeedStream, Plain };

void pollFeed(const simtest::Driver& drv, int steps, PollKind kind) {
  const simtest::DriverApi& cu = drv.plain;
  ForkJoin fj;
  fj.create(cu, drv.perThread, CU_STREAM_NON_BLOCKING, false, false);
  CUstream f;
  SIM_CHECK(cu.cuStreamCreate(&f, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr cnt = simtest::zeroedBuffer(cu);
  uint64_t hcnt = 0;
  long maxRounds = 0;
  for (int i = 0; i < steps; ++i) {
    if (g_verbose) std::printf("%s: %s: step %d\n", g_program, g_mode, i);
    fj.issue();
    CUresult r = CUDA_ERROR_NOT_READY;
    long rounds = 0;
    for (; rounds < 200000; ++rounds) {
      r = kind == PollKind::FeedStream ? cu.cuStreamQuery(fj.m) : cu.cuEventQuery(fj.fend);
      if (r != CUDA_ERROR_NOT_READY) break;
      if (kind != PollKind::Plain) {
        for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, g_add, cnt, cnt, 1, f));
        hcnt += 3;
      }
    }
    if (rounds > maxRounds) maxRounds = rounds;
    if (g_verbose) std::printf("%s: %s: step %d: %ld rounds\n", g_program, g_mode, i, rounds);
    expectCodeMt(r, CUDA_SUCCESS, "the polled query (200000 rounds at most)", i);
    if (r != CUDA_SUCCESS) break;
    fj.expectAllDone(i);
    if (i % 16 == 15) {
      SIM_CHECK(cu.cuStreamSynchronize(f));
      expectValueMt(peek(cnt), hcnt, "cnt (the feed)", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValueMt(peek(cnt), hcnt, "cnt (the feed)", steps);
  std::printf("%s: %s: at most %ld rounds in a step, %llu feed adds\n", g_program, g_mode, maxRounds,
              (unsigned long long)hcnt);
}

// ------------------------------------------------------------------ threads

void syncOtherThread(const simtest::Driver& drv, CUcontext ctx, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  ForkJoin fj;
  fj.create(cu, drv.perThread, CU_STREAM_NON_BLOCKING, false, false);
  CUstream t;
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr y = simtest::zeroedBuffer(cu);
  uint64_t hy = 0;
  std::atomic<int> ready{-1}, checked{-1};
  std::atomic<bool> quit{false};
  std::thread helper([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    for (int i = 0; i < steps; ++i) {
      while (ready.load() < i && !quit.load()) std::this_thread::yield();
      if (quit.load()) break;
      SIM_CHECK(cu.cuEventSynchronize(fj.fend));
      fj.expectAllDone(i);
      checked.store(i);
    }
  });
  long fed = 0;
  for (int i = 0; i < steps; ++i) {
    fj.issue();
    ready.store(i);
    while (checked.load() < i) {
      SIM_CHECK(simtest::launchAdd(cu, g_add, y, y, 1, t));
      ++hy;
      if (++fed % 64 == 0) std::this_thread::yield();
      if (fed > 50'000'000) {
        expectValueMt(0, 1, "the helper thread never finished a step", i);
        quit.store(true);
        break;
      }
    }
    if (quit.load()) break;
  }
  helper.join();
  SIM_CHECK(cu.cuStreamSynchronize(t));
  expectValueMt(peek(y), hy, "y (the other stream's adds)", steps);
  std::printf("%s: %s: %ld adds on t while the helper waited\n", g_program, g_mode, fed);
}

void queryOtherThread(const simtest::Driver& drv, CUcontext ctx, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  ForkJoin fj;
  fj.create(cu, drv.perThread, CU_STREAM_NON_BLOCKING, false, false);
  std::atomic<int> published{-1};
  std::atomic<bool> done{false};
  std::vector<uint64_t> a1At(size_t(steps) + 1, 0);  // a1's value after step i (written before publishing i)
  std::atomic<long> successes{0}, asks{0};
  std::thread asker([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    while (!done.load()) {
      const int p = published.load();
      if (p < 0) {
        std::this_thread::yield();
        continue;
      }
      const uint64_t floor = a1At[size_t(p)];
      const bool streamAsk = asks.fetch_add(1) % 2;
      const CUresult r = streamAsk ? cu.cuStreamQuery(fj.s1) : cu.cuEventQuery(fj.e1);
      if (r == CUDA_SUCCESS) {
        successes.fetch_add(1);
        const uint64_t got = peek(fj.a1);
        if (got < floor)
          expectValueMt(got, floor,
                        streamAsk ? "a1 after cuStreamQuery(s1) said complete (at least the published step's)"
                                  : "a1 after cuEventQuery(E1) said complete (at least the published step's)",
                        p);
      } else if (r != CUDA_ERROR_NOT_READY) {
        expectCodeMt(r, CUDA_SUCCESS, "a query from the other thread", p);
      }
    }
  });
  for (int i = 0; i < steps; ++i) {
    fj.issue();
    a1At[size_t(i)] = fj.ha1;
    published.store(i);
    if (i % 8 == 7) {
      SIM_CHECK(cu.cuEventSynchronize(fj.fend));
      fj.expectAllDone(i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  done.store(true);
  asker.join();
  fj.expectValues(steps);
  std::printf("%s: %s: %ld asks, %ld said complete\n", g_program, g_mode, asks.load(), successes.load());
}

void twoThreadsSync(const simtest::Driver& drv, CUcontext ctx, int steps) {
  auto body = [&] {
    SIM_CHECK(drv.plain.cuCtxSetCurrent(ctx));
    ForkJoin fj;
    fj.create(drv.plain, drv.perThread, CU_STREAM_NON_BLOCKING, false, false);
    for (int i = 0; i < steps; ++i) {
      fj.issue();
      SIM_CHECK(drv.plain.cuEventSynchronize(fj.fend));
      fj.expectAllDone(i);
    }
  };
  std::thread other(body);
  body();
  other.join();
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseQueryModeArgs(argc, argv, "sim_review49_queries", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review49_queries", &drv, &ctx)) return rc;
  g_add = simtest::libraryKernel3("sim_add_r49q");
  const simtest::DriverApi& cu = drv.plain;
  if (mode == "implied-event-sync") implied(drv, steps, SyncKind::Event, false, false);
  else if (mode == "implied-stream-sync") implied(drv, steps, SyncKind::Stream, false, false);
  else if (mode == "implied-copy-sync") implied(drv, steps, SyncKind::Copy, false, false);
  else if (mode == "implied-ctx-sync") implied(drv, steps, SyncKind::Ctx, false, false);
  else if (mode == "implied-pts") implied(drv, steps, SyncKind::Event, false, true);
  else if (mode == "implied-pts-main") implied(drv, steps, SyncKind::Event, true, false);
  else if (mode == "mid-event-sync") implied(drv, steps, SyncKind::Event, false, false, 12);
  else if (mode == "pts-side-sync") ptsSideSync(drv, steps);
  else if (mode == "implied-legacy") impliedLegacy(cu, steps);
  else if (mode == "implied-legacy-pts") impliedLegacyPts(cu, drv.perThread, steps);
  else if (mode == "rerecord-tails") rerecordTails(cu, steps);
  else if (mode == "rerecord") rerecord(cu, steps, false);
  else if (mode == "rerecord-sync") rerecord(cu, steps, true);
  else if (mode == "alloc-reuse") allocReuse(cu, drv.perThread, steps, false, false);
  else if (mode == "alloc-reuse-fork") allocReuse(cu, drv.perThread, steps, true, false);
  else if (mode == "alloc-reuse-pts") allocReuse(cu, drv.perThread, steps, true, true);
  else if (mode == "poll-feed") pollFeed(drv, steps, PollKind::FeedEvent);
  else if (mode == "poll-feed-stream") pollFeed(drv, steps, PollKind::FeedStream);
  else if (mode == "poll-plain") pollFeed(drv, steps, PollKind::Plain);
  else if (mode == "sync-other-thread") syncOtherThread(drv, ctx, steps);
  else if (mode == "query-other-thread") queryOtherThread(drv, ctx, steps);
  else if (mode == "two-threads-sync") twoThreadsSync(drv, ctx, steps);
  else {
    std::printf("usage: sim_review49_queries --mode implied-event-sync|implied-stream-sync|implied-copy-sync|"
                "implied-ctx-sync|implied-pts|implied-pts-main|mid-event-sync|pts-side-sync|implied-legacy|implied-legacy-pts|rerecord|rerecord-sync|"
                "rerecord-tails|alloc-reuse|"
                "alloc-reuse-fork|alloc-reuse-pts|poll-feed|poll-feed-stream|poll-plain|sync-other-thread|query-other-thread|"
                "two-threads-sync [--steps N] [--expect-graphs] [--min-graph-pct P] [--implied-poll] [--verbose]\n");
    return 2;
  }
  printTally();
  return report(steps, args.expectGraphs, args.minGraphPct);
}
