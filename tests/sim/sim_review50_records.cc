// sim_review50_records: a red-team review of 0d6d02f (helper-written): the
// program's record nodes that follow branches' last records issued after the
// graph, made on graft's own stream after the graph
// (GraphHandle::recordsFollowingEnds, EventOp::recordedAfter and the code
// after the graph launch in GraphExecutor::runLaunch,
// src/graph/graph_executor.cc), and a per-thread branch's join marker that
// follows the branch's last record issued after the graph
// (PerThreadStreams::issuedAfter, src/graph/per_thread_streams.cc). Built
// like sim_review49_queries (its checks are in sim_mode_checks.h): every
// code and value is compared with a host mirror of what eager guarantees
// (CUDA driver documentation: after a host wait, every op ordered before
// what it waited for has completed, so a query of an event recorded before
// it, or of a stream whose last op is ordered before it, says CUDA_SUCCESS;
// nothing says CUDA_SUCCESS before its work ran). A gate kernel (sim_gate:
// runnable once the host writes its threshold into a flag) models a kernel
// that waits for the host: a wait graft adds that eager does not have shows
// as a simulated deadlock (the simulator aborts) or, with a bounded poll, as
// a query that never says CUDA_SUCCESS.
//
//   sim_review50_records --mode MODE [--steps N] [--expect-graphs]
//                        [--min-graph-pct P] [--implied-poll] [--verbose]
//
// The fork/join step most modes use (as sim_review49_queries'): main stream
// m (non-blocking) x += 1 four times and records F0; side streams s1, s2
// wait F0, each does four adds into its own buffer and records E1 / E2 as
// its last op (issued by graft after the graph: branch-end records); m waits
// E1 and E2, adds both results into c, d and records Fend. "Mid": 12 adds
// on m after Fend (Fend is not m's last op: a record graft makes on its own
// stream after the graph). "The sides": s1, E1, s2, E2, F0 and the values.
//
// mid-stream-sync  mid; the host synchronizes m (cuStreamSynchronize), then
//                asks Fend (recorded on m before m's last op), the sides.
// mid-later-record  mid, then G recorded on m as its last op; the host waits
//                for G (cuEventSynchronize), asks Fend, the sides, m.
// mid-waited-record  mid; stream t waits Fend, adds from c and records H (its
//                last op); the host waits for H, asks Fend, t, the sides.
// mid-waited-stream  the same without H; the host synchronizes t.
// mid-ctx-sync   mid; cuCtxSynchronize, then Fend and the sides (control).
// *-many         (mid-stream-sync-many, mid-later-record-many,
//                mid-waited-record-many, mid-waited-stream-many,
//                mid-ctx-sync-many, pts-main-mid-many) the same with 24 adds
//                on each side stream and, on m after Fend, one add, 16
//                records R1..R16 in a row and one add (t waits R16); the host
//                also asks R16..R1 (the last first). These records all follow
//                the branch ends, so graft has more to do after the graph.
// mid-copy-sync-many  mid-stream-sync-many with m a blocking stream and the
//                host reading m's result with cuMemcpyDtoH (the legacy
//                stream waits for m's work, R1..R16 included).
// two-mids       on m: wait E1, add, record R1, wait E2, add, record R2, 12
//                adds; the host waits for R1 (asks E1, s1), then for R2 (asks
//                E2, s2, R1).
// two-mid-gate   no fork: s1 adds and records E1 (last op); m runs the gate,
//                waits E1, adds, records Rm, adds; t waits E1, adds, records
//                Rt, adds. The host waits for Rt (cuEventSynchronize): eagerly
//                Rt follows s1 and t only, never the gate; then opens the gate.
// two-mid-gate-poll  the same, the host polling cuEventQuery(Rt) (200000 times
//                at most) instead of waiting.
// two-mid-gate-swapped  two-mid-gate with t's ops issued before m's (Rt
//                before Rm in op order; control).
// two-mid-gate-end  the gate on s1 before its last record E1; s2 records E2
//                last; m waits E1 and records Rm, t waits E2 and records Rt
//                (both then add). The host waits for Rt (eagerly: s2 and t
//                only), then opens the gate.
// mid-gate-after  mid with the gate on m right after Fend (before the 12
//                adds); the host waits for Fend, asks the sides, opens the gate.
// mid-superseded  mid; t waits Fend, adds, records Fend again (t's last op,
//                Fend's latest record); the host waits for Fend, asks t, the
//                sides.
// end-rerecord   the step with Fend m's last op; u waits Fend, adds and
//                records E1 again (u's last op): s1's E1 is superseded. The
//                host waits for Fend, asks m, s1, s2, E2, F0; then waits for
//                E1 and asks u.
// end-rerecord-mid  the same with the 12 adds on m after Fend (u waits the
//                mid Fend).
// mid-poll       mid; the host polls cuEventQuery(Fend) until CUDA_SUCCESS,
//                then asks the sides.
// mid-blocking-sync  mid, the host waiting for Fend (sim_review49_queries'
//                mid-event-sync), every event created with
//                CU_EVENT_BLOCKING_SYNC.
// mid-destroy    mid with F0, E1, E2, Fend created each step and destroyed
//                right after the step was issued (graft may still hold their
//                records); the host synchronizes m, asks s1 and s2.
// mid-destroy-after  mid; the host waits for Fend, asks the sides, then
//                destroys Fend and creates it again (its handle recurs).
// pts-main-mid   mid with m the calling thread's per-thread default stream
//                (_ptsz entry points); the host synchronizes it, asks Fend and
//                the sides.
// pts-side-mid   mid with s2 the per-thread default stream; the host waits
//                for Fend, asks the sides.
// pts-side-rerecord  s2 the per-thread stream, E2 recorded again on m after
//                m's waits (s2's E2 superseded; m's E2 is a mid record that
//                follows s1's end); the host synchronizes the per-thread s2,
//                asks it, waits for E2, asks s1, E1, then waits for Fend.
// pts-side-legacy-gate  a gate on the legacy stream (issued, the legacy
//                stream queried) before a step in which the per-thread s2
//                only waits F0 and records E2 (no kernel); the host
//                synchronizes the per-thread s2 (eagerly it does not wait for
//                the gate: a blocking stream's waits and records do not hold
//                it for earlier legacy work), then opens the gate and waits for
//                Fend.
// threads-mid    two threads, each with its own mid step on its own streams,
//                one waiting for Fend, the other synchronizing m, each asking
//                the implied queries, at the same time.
//
// --implied-poll: as in sim_review49_queries (sim_mode_checks.h,
// impliedQuery): an implied query that says CUDA_ERROR_NOT_READY is asked
// again until it answers, which must be CUDA_SUCCESS.
//
// FINDINGS (library at 0d6d02f; 'before' is its parent 2b54e0d):
//   - two-mid-gate, two-mid-gate-end: a simulated deadlock once the step
//     replays from a graph (cuEventSynchronize(Rt) never returns;
//     two-mid-gate-poll: in 198 of 200 steps, all but the eager warm-up, the
//     poll of Rt never says CUDA_SUCCESS while the gate is closed), every seed
//     and setting tried; eager passes. GraphHandle::impliedStream is one
//     stream for all of a graph's records made after it, in op order: Rt is
//     queued behind Rm's waits on its placeholder (which follows the gate on
//     m) or on E1 (which follows the gate on s1), which Rt does not follow
//     eagerly. Before: no deadlock (E1 / s1 queries said not ready after Rt
//     instead). two-mid-gate-swapped (Rt first in op order) passes.
//   - the *-many modes (and mid-copy-sync-many): after the host waited for m
//     (cuStreamSynchronize, cuMemcpyDtoH of blocking m, a later record G on
//     m) or for t, which waited for R16, cuEventQuery of R1..R16 says
//     CUDA_ERROR_NOT_READY where eager says CUDA_SUCCESS (4-134 times in 200
//     steps; CUDA_SUCCESS when asked again: --implied-poll passes): a record
//     made on graft's stream after the graph is followed by nothing else
//     graft issues after the graph (neither its own stream's tail wait and
//     later records, nor a branch whose end waited for it, nor the
//     per-thread proxy's marker). Before: all passed strictly (the record was
//     a node before m's later nodes). The single-record modes show it rarely
//     (mid-stream-sync, threads-mid: 1-2 answers in some runs).
//   - pts-side-legacy-gate (not from 0d6d02f: also before, and at the first
//     step, with no graph): the host's cuStreamSynchronize of the per-thread
//     stream deadlocks; graft's join makes the per-thread stream wait for the
//     proxy's `exit`, recorded on the blocking proxy, which covers the earlier
//     legacy-stream gate as a record on a blocking stream does, while eagerly
//     the stream's wait and record do not hold it (tests/sim's model of
//     tests/gpu/driver_facts.cu).
//   Every other mode passes strictly (mid-stream-sync and threads-mid but
//   now and then, above), and every value was right everywhere.
// Since (the fiftieth session): the records made after the graph on graft's
// stream were withdrawn (the deadlock outweighs the lag they removed); the
// per-thread marker's wait on a branch's last record stays. With that
// library no mode deadlocks but pts-side-legacy-gate, and the modes whose
// host waits for a record in the middle of a stream that follows branches'
// last records answer CUDA_ERROR_NOT_READY for a while where eager says
// CUDA_SUCCESS (mid-waited-*, two-mid*, mid-gate-after, mid-superseded,
// end-rerecord-mid, mid-poll, mid-blocking-sync, mid-destroy-after,
// pts-side-mid, pts-side-rerecord, threads-mid: 10-261 answers in 200
// steps, every run; --implied-poll passes), as sim_review49_queries'
// mid-event-sync. The *-many modes pass. A design that removes the lag
// without the deadlock, prototyped by this review (all modes pass, gated
// fuzz 1:3000, oracle 98000:98600): one graft stream per branch instead of
// per graph; everything after the graph issued in one pass in op order; a
// record made after the graph also waits for the earlier such records of
// other branches it follows; each branch end and per-thread marker waits
// for the ones it follows (docs/PERF.md, fiftieth session).
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph, or with
// --min-graph-pct P fewer than P % of the effects came from graphs.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

CUfunction g_add = nullptr;
CUfunction g_gate = nullptr;

// A stream of the program: a created one, or the calling thread's per-thread
// default stream (its calls through the _ptsz entry points with NULL).
struct Stream {
  CUstream h = nullptr;
  bool pts = false;
};

// A device word and the host's mirror of it.
struct Word {
  CUdeviceptr p = 0;
  uint64_t h = 0;
};

struct Rig {
  const simtest::DriverApi* cu = nullptr;  // legacy-stream entry points
  const simtest::DriverApi* pt = nullptr;  // per-thread entry points
  CUdeviceptr flag = 0;                    // the gate's flag
  uint64_t gateLevel = 0;                  // the last gate's threshold

  explicit Rig(const simtest::Driver& drv) : cu(&drv.plain), pt(&drv.perThread) { flag = simtest::zeroedBuffer(*cu); }
  const simtest::DriverApi& api(const Stream& s) const { return s.pts ? *pt : *cu; }
  static CUstream h(const Stream& s) { return s.pts ? nullptr : s.h; }

  Stream stream(bool pts = false, unsigned flags = CU_STREAM_NON_BLOCKING) const {
    Stream s;
    s.pts = pts;
    if (!pts) SIM_CHECK(cu->cuStreamCreate(&s.h, flags));
    return s;
  }
  CUevent event(unsigned flags = CU_EVENT_DISABLE_TIMING) const {
    CUevent e = nullptr;
    SIM_CHECK(cu->cuEventCreate(&e, flags));
    return e;
  }
  Word word() const { return {simtest::zeroedBuffer(*cu), 0}; }

  void add(const Stream& s, Word& to, const Word& from, uint64_t k) const {
    SIM_CHECK(simtest::launchAdd(api(s), g_add, to.p, from.p, k, h(s)));
    to.h = from.h + k;
  }
  void adds(const Stream& s, Word& w, int n) const {
    for (int i = 0; i < n; ++i) add(s, w, w, 1);
  }
  void record(CUevent e, const Stream& s) const { SIM_CHECK(api(s).cuEventRecord(e, h(s))); }
  void wait(const Stream& s, CUevent e) const { SIM_CHECK(api(s).cuStreamWaitEvent(h(s), e, 0)); }
  // A gate kernel on `s`: it runs once the host opens it (openGate).
  void gate(const Stream& s) {
    CUdeviceptr f = flag;
    uint64_t unused = 0, threshold = ++gateLevel;
    void* args[] = {&f, &unused, &threshold};
    SIM_CHECK(api(s).cuLaunchKernel(g_gate, 1, 1, 1, 1, 1, 1, 0, h(s), args, nullptr));
  }
  void openGate() const { poke(flag, gateLevel); }

  void syncStream(const Stream& s) const { SIM_CHECK(api(s).cuStreamSynchronize(h(s))); }
  void syncEvent(CUevent e) const { SIM_CHECK(cu->cuEventSynchronize(e)); }

  // Implied queries: the first answer must be CUDA_SUCCESS (--implied-poll:
  // the last).
  void impliedEvent(CUevent e, const char* what, int step) const {
    expectCodeMt(impliedQuery([&] { return cu->cuEventQuery(e); }), CUDA_SUCCESS, what, step);
  }
  void impliedStream(const Stream& s, const char* what, int step) const {
    expectCodeMt(impliedQuery([&] { return api(s).cuStreamQuery(h(s)); }), CUDA_SUCCESS, what, step);
  }
  static void value(const Word& w, const char* what, int step) { expectValueMt(peek(w.p), w.h, what, step); }
};

// ------------------------------------------------------------------ fork/join

struct ForkJoin {
  Rig* rig = nullptr;
  Stream m, s1, s2;
  CUevent f0 = nullptr, e1 = nullptr, e2 = nullptr, fend = nullptr;
  Word x, a1, a2, c, d, z, mc;
  unsigned eventFlags = CU_EVENT_DISABLE_TIMING;
  int sideAdds = 3;            // adds on each side stream after its first
  std::vector<CUevent> mids;   // records on m after Fend, each after an add into mc

  // `many`: 24 adds on each side stream, and on m after Fend an add and 16
  // records in a row
  // (the "-many" modes: graft's stream then has more to do after the graph).
  void create(Rig& r, bool mPts = false, bool s2Pts = false, unsigned flags = CU_EVENT_DISABLE_TIMING,
              bool many = false, unsigned mFlags = CU_STREAM_NON_BLOCKING) {
    rig = &r;
    eventFlags = flags;
    m = r.stream(mPts, mFlags);
    s1 = r.stream();
    s2 = r.stream(s2Pts);
    createEvents();
    for (Word* w : {&x, &a1, &a2, &c, &d, &z, &mc}) *w = r.word();
    if (many) {
      sideAdds = 24;
      mids.resize(16);
      for (CUevent& e : mids) e = r.event(flags);
    }
  }
  void createEvents() {
    for (CUevent* e : {&f0, &e1, &e2, &fend}) *e = rig->event(eventFlags);
  }
  void destroyEvents() {
    for (CUevent* e : {&f0, &e1, &e2, &fend}) {
      SIM_CHECK(rig->cu->cuEventDestroy(*e));
      *e = nullptr;
    }
  }
  // The fork and the sides, up to m's waits on E1 and E2 (not made).
  void fork() {
    Rig& r = *rig;
    r.adds(m, x, 4);
    r.record(f0, m);
    r.wait(s1, f0);
    r.add(s1, a1, x, 10);
    r.adds(s1, a1, sideAdds);
    r.record(e1, s1);
    r.wait(s2, f0);
    r.add(s2, a2, x, 20);
    r.adds(s2, a2, sideAdds);
    r.record(e2, s2);
  }
  // The whole step; `trailing` adds on m after Fend (mid; one with `many`,
  // after the 16 records), and `gateAfter` a gate on m right after Fend.
  void issue(int trailing, bool gateAfter = false) {
    if (!mids.empty()) trailing = 1;
    Rig& r = *rig;
    fork();
    r.wait(m, e1);
    r.wait(m, e2);
    r.add(m, c, a1, 100);
    r.add(m, d, a2, 200);
    r.record(fend, m);
    if (gateAfter) r.gate(m);
    if (!mids.empty()) r.add(m, mc, mc, 1);
    for (CUevent e : mids) r.record(e, m);
    r.adds(m, z, trailing);
  }
  // The records on m after Fend, when the host's wait implies them (`what`):
  // the last first.
  void expectMids(int step, const char* what) const {
    for (size_t k = mids.size(); k-- > 0;) rig->impliedEvent(mids[k], what, step);
    if (!mids.empty()) Rig::value(mc, "mc (m's add before R1)", step);
  }
  // The sides' queries (s1, E1, s2, E2 and, unless `e1Latest` is false, E1:
  // it has a later record elsewhere), F0, and the values of the step up to Fend.
  void expectSides(int step, bool withE1 = true, bool withE2 = true) const {
    const Rig& r = *rig;
    r.impliedStream(s1, "cuStreamQuery(s1) (its last op, E1, before Fend)", step);
    if (withE1) r.impliedEvent(e1, "cuEventQuery(E1) (s1's last op, before Fend)", step);
    r.impliedStream(s2, s2.pts ? "cuStreamQuery(per-thread s2) (its last op, E2, before Fend)"
                               : "cuStreamQuery(s2) (its last op, E2, before Fend)",
                    step);
    if (withE2) r.impliedEvent(e2, "cuEventQuery(E2) (s2's last op, before Fend)", step);
    r.impliedEvent(f0, "cuEventQuery(F0) (before Fend on m)", step);
    Rig::value(x, "x", step);
    Rig::value(a1, "a1", step);
    Rig::value(a2, "a2", step);
    Rig::value(c, "c", step);
    Rig::value(d, "d", step);
  }
};

constexpr int kTrailing = 12;

// mid-stream-sync / mid-ctx-sync / mid-blocking-sync / mid-poll.
enum class MidWait { Stream, Ctx, Event, Poll, Copy };
void midSync(Rig& r, int steps, MidWait how, unsigned eventFlags = CU_EVENT_DISABLE_TIMING, bool many = false) {
  ForkJoin fj;
  fj.create(r, false, false, eventFlags, many, how == MidWait::Copy ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING);
  for (int i = 0; i < steps; ++i) {
    fj.issue(kTrailing);
    switch (how) {
      case MidWait::Stream: r.syncStream(fj.m); break;
      case MidWait::Ctx: SIM_CHECK(r.cu->cuCtxSynchronize()); break;
      case MidWait::Event: r.syncEvent(fj.fend); break;
      case MidWait::Copy: {
        uint64_t v = 0;
        SIM_CHECK(r.cu->cuMemcpyDtoH(&v, fj.z.p, 8));  // the legacy stream: waits for blocking m
        expectValueMt(v, fj.z.h, "z (read by cuMemcpyDtoH)", i);
        break;
      }
      case MidWait::Poll: {
        const CUresult q = pollUntilDone([&] { return r.cu->cuEventQuery(fj.fend); }, 200000);
        expectCodeMt(q, CUDA_SUCCESS, "cuEventQuery(Fend) polled (200000 times at most)", i);
        break;
      }
    }
    if (how != MidWait::Event && how != MidWait::Poll) {
      fj.expectMids(i, "cuEventQuery(R1..R16) (recorded on m before the synchronized end)");
      r.impliedEvent(fj.fend, "cuEventQuery(Fend) (recorded on m before the synchronized end)", i);
    }
    fj.expectSides(i);
    if (how == MidWait::Event || how == MidWait::Poll) r.syncStream(fj.m);
    Rig::value(fj.z, "z (m's adds after Fend)", i);
  }
}

// mid-later-record: G, m's last op, after the 12 adds; the host waits for G.
void midLaterRecord(Rig& r, int steps, bool many = false) {
  ForkJoin fj;
  fj.create(r, false, false, CU_EVENT_DISABLE_TIMING, many);
  const CUevent g = r.event();
  for (int i = 0; i < steps; ++i) {
    fj.issue(kTrailing);
    r.record(g, fj.m);
    r.syncEvent(g);
    fj.expectMids(i, "cuEventQuery(R1..R16) (recorded on m before G)");
    r.impliedEvent(fj.fend, "cuEventQuery(Fend) (recorded on m before G)", i);
    r.impliedStream(fj.m, "cuStreamQuery(m) (its last op was G)", i);
    fj.expectSides(i);
    Rig::value(fj.z, "z (m's adds before G)", i);
  }
}

// mid-waited-record / mid-waited-stream: t waits the mid Fend, adds from c
// and (record) records H as its last op.
void midWaited(Rig& r, int steps, bool record, bool many = false) {
  ForkJoin fj;
  fj.create(r, false, false, CU_EVENT_DISABLE_TIMING, many);
  const Stream t = r.stream();
  const CUevent hEv = r.event();
  Word w = r.word();
  for (int i = 0; i < steps; ++i) {
    fj.issue(kTrailing);
    r.wait(t, many ? fj.mids.back() : fj.fend);
    r.add(t, w, fj.c, 7);
    if (record) {
      r.record(hEv, t);
      r.syncEvent(hEv);
      r.impliedStream(t, "cuStreamQuery(t) (its last op was H)", i);
    } else {
      r.syncStream(t);
    }
    fj.expectMids(i, "cuEventQuery(R1..R16) (t waited for R16)");
    r.impliedEvent(fj.fend, record ? "cuEventQuery(Fend) (t waited for it before H)"
                                   : "cuEventQuery(Fend) (t waited for it; t synchronized)",
                   i);
    fj.expectSides(i);
    Rig::value(w, "w (t's add after its wait on Fend)", i);
    r.syncStream(fj.m);
    Rig::value(fj.z, "z", i);
  }
}

// two-mids: two records on m in the middle, following s1's end, then both ends.
void twoMids(Rig& r, int steps) {
  ForkJoin fj;
  fj.create(r);
  const CUevent r1 = r.event(), r2 = r.event();
  for (int i = 0; i < steps; ++i) {
    fj.fork();
    r.wait(fj.m, fj.e1);
    r.add(fj.m, fj.c, fj.a1, 100);
    r.record(r1, fj.m);
    r.wait(fj.m, fj.e2);
    r.add(fj.m, fj.d, fj.a2, 200);
    r.record(r2, fj.m);
    r.adds(fj.m, fj.z, kTrailing);
    r.syncEvent(r1);
    r.impliedStream(fj.s1, "cuStreamQuery(s1) (its last op, E1, before R1)", i);
    r.impliedEvent(fj.e1, "cuEventQuery(E1) (s1's last op, before R1)", i);
    r.impliedEvent(fj.f0, "cuEventQuery(F0) (before R1 on m)", i);
    Rig::value(fj.a1, "a1", i);
    Rig::value(fj.c, "c", i);
    r.syncEvent(r2);
    r.impliedEvent(r1, "cuEventQuery(R1) (before R2 on m)", i);
    fj.expectSides(i);
    r.syncStream(fj.m);
    Rig::value(fj.z, "z", i);
  }
}

// two-mid-gate-end: the gate on s1 before its last record E1; m waits E1 and
// records Rm; s2 records E2 last; t waits E2 and records Rt. The host waits
// for Rt, which eagerly follows s2 and t only.
void twoMidGateEnd(Rig& r, int steps) {
  const Stream m = r.stream(), s1 = r.stream(), s2 = r.stream(), t = r.stream();
  const CUevent e1 = r.event(), e2 = r.event(), rm = r.event(), rt = r.event();
  Word a1 = r.word(), a2 = r.word(), c = r.word(), zm = r.word(), w = r.word(), zt = r.word();
  for (int i = 0; i < steps; ++i) {
    r.gate(s1);
    r.adds(s1, a1, 2);
    r.record(e1, s1);  // s1's last op: issued after the graph
    r.adds(s2, a2, 2);
    r.record(e2, s2);  // s2's last op: issued after the graph
    r.wait(m, e1);
    r.add(m, c, a1, 100);
    r.record(rm, m);  // follows s1's end, so the gate
    r.adds(m, zm, 3);
    r.wait(t, e2);
    r.add(t, w, a2, 7);
    r.record(rt, t);  // follows s2's end only
    r.adds(t, zt, 3);
    r.syncEvent(rt);  // eagerly: never waits for the gate
    r.impliedEvent(e2, "cuEventQuery(E2) (s2's last op, before Rt)", i);
    r.impliedStream(s2, "cuStreamQuery(s2) (its last op, E2, before Rt)", i);
    Rig::value(a2, "a2", i);
    Rig::value(w, "w (t's add before Rt)", i);
    r.openGate();
    SIM_CHECK(r.cu->cuCtxSynchronize());
    for (const Word* x : {&a1, &c, &zm, &zt}) Rig::value(*x, "a1, c, zm or zt", i);
  }
}

// two-mid-gate / two-mid-gate-poll / two-mid-gate-swapped (t's ops issued
// before m's: Rt before Rm in op order).
void twoMidGate(Rig& r, int steps, bool poll, bool swapped = false) {
  const Stream m = r.stream(), s1 = r.stream(), t = r.stream();
  const CUevent e1 = r.event(), rm = r.event(), rt = r.event();
  Word a1 = r.word(), c = r.word(), zm = r.word(), w = r.word(), zt = r.word();
  int stuck = 0;
  for (int i = 0; i < steps; ++i) {
    r.adds(s1, a1, 2);
    r.record(e1, s1);  // s1's last op: issued after the graph
    auto mPart = [&] {
      r.gate(m);
      r.wait(m, e1);
      r.add(m, c, a1, 100);
      r.record(rm, m);  // follows s1's end and the gate
      r.adds(m, zm, 3);
    };
    auto tPart = [&] {
      r.wait(t, e1);
      r.add(t, w, a1, 7);
      r.record(rt, t);  // follows s1's end only
      r.adds(t, zt, 3);
    };
    if (swapped) {
      tPart();
      mPart();
    } else {
      mPart();
      tPart();
    }
    CUresult q = CUDA_SUCCESS;
    if (poll) {
      q = pollUntilDone([&] { return r.cu->cuEventQuery(rt); }, 200000);
      expectCodeMt(q, CUDA_SUCCESS, "cuEventQuery(Rt) polled (200000 times at most) with the gate on m closed", i);
      if (q != CUDA_SUCCESS) ++stuck;
    } else {
      r.syncEvent(rt);  // eagerly: never waits for the gate
    }
    if (q == CUDA_SUCCESS) {
      r.impliedEvent(e1, "cuEventQuery(E1) (s1's last op, before Rt)", i);
      r.impliedStream(s1, "cuStreamQuery(s1) (its last op, E1, before Rt)", i);
      Rig::value(a1, "a1", i);
      Rig::value(w, "w (t's add before Rt)", i);
    }
    r.openGate();
    SIM_CHECK(r.cu->cuCtxSynchronize());
    Rig::value(c, "c", i);
    Rig::value(zm, "zm", i);
    Rig::value(zt, "zt", i);
  }
  if (poll) std::printf("%s: %s: %d steps' polls of Rt never said CUDA_SUCCESS before the gate opened\n", g_program, g_mode, stuck);
}

// mid-gate-after: the gate on m right after Fend.
void midGateAfter(Rig& r, int steps) {
  ForkJoin fj;
  fj.create(r);
  for (int i = 0; i < steps; ++i) {
    fj.issue(kTrailing, /*gateAfter=*/true);
    r.syncEvent(fj.fend);
    fj.expectSides(i);
    r.openGate();
    r.syncStream(fj.m);
    Rig::value(fj.z, "z", i);
  }
}

// mid-superseded: Fend recorded again on t, which waited for the mid Fend.
void midSuperseded(Rig& r, int steps) {
  ForkJoin fj;
  fj.create(r);
  const Stream t = r.stream();
  Word w = r.word();
  for (int i = 0; i < steps; ++i) {
    fj.issue(kTrailing);
    r.wait(t, fj.fend);
    r.add(t, w, fj.c, 7);
    r.record(fj.fend, t);  // Fend's latest record
    r.syncEvent(fj.fend);
    r.impliedStream(t, "cuStreamQuery(t) (its last op, Fend's latest record)", i);
    fj.expectSides(i);
    Rig::value(w, "w (t's add before Fend's latest record)", i);
    r.syncStream(fj.m);
    Rig::value(fj.z, "z", i);
  }
}

// end-rerecord / end-rerecord-mid: E1 recorded again on u after u waited Fend.
void endRerecord(Rig& r, int steps, int trailing) {
  ForkJoin fj;
  fj.create(r);
  const Stream u = r.stream();
  Word w = r.word();
  for (int i = 0; i < steps; ++i) {
    fj.issue(trailing);
    r.wait(u, fj.fend);
    r.add(u, w, fj.d, 9);
    r.record(fj.e1, u);  // E1's latest record: s1's is superseded
    r.syncEvent(fj.fend);
    fj.expectSides(i, /*withE1=*/false);  // s1 first: its tail wait after the graph
    if (!trailing) r.impliedStream(fj.m, "cuStreamQuery(m) (its last op was Fend)", i);
    r.syncEvent(fj.e1);
    r.impliedStream(u, "cuStreamQuery(u) (its last op, E1's latest record)", i);
    Rig::value(w, "w (u's add before E1's latest record)", i);
    r.syncStream(fj.m);
    Rig::value(fj.z, "z", i);
  }
}

// mid-destroy: the step's events destroyed right after it was issued.
void midDestroy(Rig& r, int steps) {
  ForkJoin fj;
  fj.create(r);
  for (int i = 0; i < steps; ++i) {
    fj.issue(kTrailing);
    fj.destroyEvents();
    r.syncStream(fj.m);
    r.impliedStream(fj.s1, "cuStreamQuery(s1) (m waited for its last op, E1)", i);
    r.impliedStream(fj.s2, "cuStreamQuery(s2) (m waited for its last op, E2)", i);
    Rig::value(fj.c, "c", i);
    Rig::value(fj.d, "d", i);
    Rig::value(fj.z, "z", i);
    fj.createEvents();
  }
}

// mid-destroy-after: Fend destroyed and created again after the host waited.
void midDestroyAfter(Rig& r, int steps) {
  ForkJoin fj;
  fj.create(r);
  for (int i = 0; i < steps; ++i) {
    fj.issue(kTrailing);
    r.syncEvent(fj.fend);
    fj.expectSides(i);
    SIM_CHECK(r.cu->cuEventDestroy(fj.fend));
    fj.fend = r.event();
    r.syncStream(fj.m);
    Rig::value(fj.z, "z", i);
  }
}

// pts-main-mid / pts-side-mid.
void ptsMid(Rig& r, int steps, bool mainPts, bool many = false) {
  ForkJoin fj;
  fj.create(r, mainPts, !mainPts, CU_EVENT_DISABLE_TIMING, many);
  for (int i = 0; i < steps; ++i) {
    fj.issue(kTrailing);
    if (mainPts) {
      r.syncStream(fj.m);
      fj.expectMids(i, "cuEventQuery(R1..R16) (recorded on the synchronized per-thread m)");
      r.impliedEvent(fj.fend, "cuEventQuery(Fend) (recorded on the synchronized per-thread m)", i);
    } else {
      r.syncEvent(fj.fend);
    }
    fj.expectSides(i);
    r.syncStream(fj.m);
    Rig::value(fj.z, "z", i);
  }
}

// pts-side-rerecord: the per-thread s2's E2 superseded by m's record of E2.
void ptsSideRerecord(Rig& r, int steps) {
  ForkJoin fj;
  fj.create(r, false, true);
  for (int i = 0; i < steps; ++i) {
    fj.fork();
    r.wait(fj.m, fj.e1);
    r.wait(fj.m, fj.e2);
    r.add(fj.m, fj.c, fj.a1, 100);
    r.record(fj.e2, fj.m);  // E2 again: a mid record following both ends
    r.add(fj.m, fj.d, fj.a2, 200);
    r.record(fj.fend, fj.m);
    r.adds(fj.m, fj.z, kTrailing);
    r.syncStream(fj.s2);
    r.impliedStream(fj.s2, "cuStreamQuery(per-thread s2) after its synchronize", i);
    Rig::value(fj.a2, "a2 (the per-thread s2's adds)", i);
    r.syncEvent(fj.e2);
    r.impliedStream(fj.s1, "cuStreamQuery(s1) (its last op, E1, before m's E2)", i);
    r.impliedEvent(fj.e1, "cuEventQuery(E1) (s1's last op, before m's E2)", i);
    r.impliedEvent(fj.f0, "cuEventQuery(F0) (before m's E2)", i);
    Rig::value(fj.c, "c (before m's E2)", i);
    r.syncEvent(fj.fend);
    fj.expectSides(i);
    r.syncStream(fj.m);
    Rig::value(fj.z, "z", i);
  }
}

// pts-side-legacy-gate: a gate on the legacy stream, issued (and the legacy
// stream queried) before the step; the per-thread s2 only waits F0 and
// records E2 (no kernel: a blocking stream's waits and records do not hold
// it for earlier legacy work, though E2 covers that work). The host
// synchronizes the per-thread s2 (eagerly: idle once F0 completed), then
// opens the gate and waits for Fend.
void ptsSideLegacyGate(Rig& r, int steps) {
  ForkJoin fj;
  fj.create(r, false, true);
  const Stream legacy;  // NULL through the legacy entry points
  for (int i = 0; i < steps; ++i) {
    r.gate(legacy);
    SIM_CHECK(r.cu->cuStreamQuery(nullptr) == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
    r.adds(fj.m, fj.x, 4);
    r.record(fj.f0, fj.m);
    r.wait(fj.s1, fj.f0);
    r.add(fj.s1, fj.a1, fj.x, 10);
    r.adds(fj.s1, fj.a1, 3);
    r.record(fj.e1, fj.s1);
    r.wait(fj.s2, fj.f0);
    r.record(fj.e2, fj.s2);
    r.wait(fj.m, fj.e1);
    r.wait(fj.m, fj.e2);
    r.add(fj.m, fj.c, fj.a1, 100);
    r.record(fj.fend, fj.m);
    r.syncStream(fj.s2);  // eagerly: does not wait for the legacy gate
    r.openGate();
    r.syncEvent(fj.fend);
    r.impliedStream(fj.s1, "cuStreamQuery(s1) (its last op, E1, before Fend)", i);
    r.impliedEvent(fj.e1, "cuEventQuery(E1) (before Fend)", i);
    r.impliedEvent(fj.e2, "cuEventQuery(E2) (before Fend)", i);
    Rig::value(fj.x, "x", i);
    Rig::value(fj.a1, "a1", i);
    Rig::value(fj.c, "c", i);
  }
}

// threads-mid: two threads, each its own mid step.
void threadsMid(const simtest::Driver& drv, CUcontext ctx, int steps) {
  auto body = [&](bool streamSync) {
    SIM_CHECK(drv.plain.cuCtxSetCurrent(ctx));
    Rig r(drv);
    ForkJoin fj;
    fj.create(r);
    for (int i = 0; i < steps; ++i) {
      fj.issue(kTrailing);
      if (streamSync) {
        r.syncStream(fj.m);
        r.impliedEvent(fj.fend, "cuEventQuery(Fend) (recorded on the synchronized m; thread 2)", i);
      } else {
        r.syncEvent(fj.fend);
      }
      fj.expectSides(i);
      r.syncStream(fj.m);
      Rig::value(fj.z, "z", i);
    }
  };
  std::thread other(body, true);
  body(false);
  other.join();
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseQueryModeArgs(argc, argv, "sim_review50_records", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review50_records", &drv, &ctx)) return rc;
  g_add = simtest::libraryKernel3("sim_add_r50r");
  g_gate = simtest::libraryKernel3("sim_gate_r50r");
  Rig rig(drv);
  if (mode == "mid-stream-sync") midSync(rig, steps, MidWait::Stream);
  else if (mode == "mid-ctx-sync") midSync(rig, steps, MidWait::Ctx);
  else if (mode == "mid-poll") midSync(rig, steps, MidWait::Poll);
  else if (mode == "mid-blocking-sync") midSync(rig, steps, MidWait::Event, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING);
  else if (mode == "mid-later-record") midLaterRecord(rig, steps);
  else if (mode == "mid-stream-sync-many") midSync(rig, steps, MidWait::Stream, CU_EVENT_DISABLE_TIMING, true);
  else if (mode == "mid-later-record-many") midLaterRecord(rig, steps, true);
  else if (mode == "mid-waited-record-many") midWaited(rig, steps, true, true);
  else if (mode == "mid-waited-stream-many") midWaited(rig, steps, false, true);
  else if (mode == "pts-main-mid-many") ptsMid(rig, steps, true, true);
  else if (mode == "mid-ctx-sync-many") midSync(rig, steps, MidWait::Ctx, CU_EVENT_DISABLE_TIMING, true);
  else if (mode == "mid-waited-record") midWaited(rig, steps, true);
  else if (mode == "mid-waited-stream") midWaited(rig, steps, false);
  else if (mode == "two-mids") twoMids(rig, steps);
  else if (mode == "two-mid-gate") twoMidGate(rig, steps, false);
  else if (mode == "two-mid-gate-poll") twoMidGate(rig, steps, true);
  else if (mode == "two-mid-gate-end") twoMidGateEnd(rig, steps);
  else if (mode == "two-mid-gate-swapped") twoMidGate(rig, steps, false, true);
  else if (mode == "mid-copy-sync-many") midSync(rig, steps, MidWait::Copy, CU_EVENT_DISABLE_TIMING, true);
  else if (mode == "mid-gate-after") midGateAfter(rig, steps);
  else if (mode == "mid-superseded") midSuperseded(rig, steps);
  else if (mode == "end-rerecord") endRerecord(rig, steps, 0);
  else if (mode == "end-rerecord-mid") endRerecord(rig, steps, kTrailing);
  else if (mode == "mid-destroy") midDestroy(rig, steps);
  else if (mode == "mid-destroy-after") midDestroyAfter(rig, steps);
  else if (mode == "pts-main-mid") ptsMid(rig, steps, true);
  else if (mode == "pts-side-mid") ptsMid(rig, steps, false);
  else if (mode == "pts-side-rerecord") ptsSideRerecord(rig, steps);
  else if (mode == "threads-mid") threadsMid(drv, ctx, steps);
  else if (mode == "pts-side-legacy-gate") ptsSideLegacyGate(rig, steps);
  else {
    std::printf("usage: sim_review50_records --mode mid-stream-sync|mid-later-record|mid-waited-record|"
                "mid-waited-stream|mid-ctx-sync|mid-stream-sync-many|mid-later-record-many|mid-waited-record-many|"
                "mid-waited-stream-many|mid-copy-sync-many|mid-ctx-sync-many|pts-main-mid-many|two-mids|"
                "two-mid-gate|two-mid-gate-poll|two-mid-gate-end|two-mid-gate-swapped|mid-gate-after|mid-superseded|end-rerecord|"
                "end-rerecord-mid|mid-poll|mid-blocking-sync|mid-destroy|mid-destroy-after|pts-main-mid|"
                "pts-side-mid|pts-side-rerecord|pts-side-legacy-gate|threads-mid [--steps N] [--expect-graphs] [--min-graph-pct P] "
                "[--implied-poll] [--verbose]\n");
    return 2;
  }
  printTally();
  return report(steps, args.expectGraphs, args.minGraphPct);
}
