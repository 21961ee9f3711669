// traps_r33 (helper-written): a thirty-third red-team round of odd but legal CUDA
// C++ patterns in the style of traps_r31.cu and traps_r29.cu (trap_common.cuh,
// trap_helpers.cuh, trap_mirror.cuh), aimed at what a tool that holds launches
// back, replays repeating runs as graphs of its own (a graph over several
// streams launched on a stream of the tool's, each program stream then waiting
// on its branch's tail event, a branch's last event record issued on the
// program stream after that wait), stands in for per-thread default streams
// with streams of its own, patches argument values and issues the ops it
// cannot graph eagerly at their position could get wrong: what a host wait
// implies about OTHER streams and events (a query right after it must say
// done), per-thread default streams of two threads joined by events and of a
// fresh thread every step (more threads than a tool's table of stand-in
// streams), copies into pageable memory (they return only once complete)
// whose source other streams produced, 32 KB by-value structs launched three
// times a step through four entry points, host functions that decide the next
// step's launch shapes and streams, and interprocess and blocking-sync events
// used as in-process joins. Each scenario is deterministic in eager (integer
// kernels, every cross-stream access ordered by a stream, an event, the legacy
// stream's implicit synchronization or a host wait), prints digests of its
// buffers, and checks its results against a host mirror of its kernels (a
// MISMATCH line and exit 1 on a difference); check_traps.py requires the same
// output under graft. No line depends on an address or on timing (what depends
// on timing goes to stderr).
//
//   implied_event_queries  a ~20-op step on three non-blocking streams: M
//                         forks B and C by an event, B and C each end with an
//                         event record as their LAST op (eB, eC), M waits on
//                         eB (and on eC in the first and last thirds) and
//                         records eM as its last op, with no kernel after the
//                         join; B's last kernel writes zero-copy memory. Then
//                         the host waits in one of four ways (in blocks of 8
//                         steps): cudaStreamSynchronize(M), cudaEventSynchronize
//                         (eM), a synchronize of a fourth stream W that waited
//                         on eM, or cudaEventSynchronize(eB); right after it,
//                         cudaEventQuery of every event the wait implies
//                         (eF, eB, eC where joined, eM) must be cudaSuccess
//                         and the zero-copy words must be there. The last
//                         third's B is cudaStreamPerThread. Early queries of
//                         eB and B before the wait on irregular steps (stderr
//                         only). What graft may get wrong: a branch's last
//                         record re-issued on its program stream after the
//                         stream's tail wait completes after the graph, so
//                         the host's wait on the join stream returns while
//                         cudaEventQuery(eB) still says not ready (eagerly
//                         impossible: M waited on eB).
//   implied_stream_idle   the same step and waits; right after the wait,
//                         cudaStreamQuery of each stream whose last op is a
//                         record the wait implies (B; C where joined; M after
//                         the event waits; W) must say idle. Counted, with up
//                         to five NOT_IDLE lines (eagerly none). What graft may
//                         get wrong: a program stream left with its tail wait
//                         (or a stand-in stream's join record) still pending
//                         after the work it stands for completed.
//   implied_legacy_blocking  M is the legacy stream, B and C blocking streams
//                         (the second half: B is cudaStreamPerThread and C is
//                         joined by an event too); waits: cudaStreamSynchronize
//                         (legacy), cudaEventSynchronize(eM), W's synchronize,
//                         cudaEventSynchronize(eB) and a synchronous cudaMemcpy
//                         (legacy stream); both the implied event queries
//                         (MISMATCH) and the implied idle streams (the legacy
//                         stream, which counts blocking streams' pending work;
//                         B; C: the legacy stream's later ops waited for C
//                         without an event) are checked. What graft may get
//                         wrong: a blocking stream's record kept in its graph
//                         node completes while the stream still has its tail
//                         wait pending, tail waits issued after the legacy
//                         stream's leave blocking streams busy after a legacy
//                         synchronize, and the legacy stream's query counts them.
//   implied_mid_record    implied_event_queries with seven kernels of the
//                         next work queued on M behind eM before the host
//                         waits, so the waited-for record is no longer M's
//                         last op: a tool cannot move it after its graph
//                         (it would then wait for those kernels too), and a
//                         record node there completes before the branches'
//                         last records re-issued after the graph.
//   ptsz_thread_handoff   a helper thread and the main thread take turns
//                         (host-ordered): the helper runs 12 kernels on ITS
//                         cudaStreamPerThread after waiting on the main
//                         stream's event and records eH as the per-thread
//                         stream's last op; the main thread's stream (a
//                         non-blocking stream, in the second half the main
//                         thread's own cudaStreamPerThread) waits on eH, runs
//                         12 kernels, records eM, and the host waits (stream
//                         or event synchronize, or a third stream's). Then the
//                         main thread asks cudaEventQuery(eH) and, at its next
//                         turn, the helper asks it and cudaStreamQuery of its
//                         own per-thread stream: all implied done. What graft
//                         may get wrong: a per-thread stream's work held on a
//                         stand-in stream of another thread, a query of the
//                         per-thread stream that sees the stand-in's own join
//                         record pending, the two threads' stand-ins confused.
//   fresh_thread_ptsz     every step a NEW thread (300 in a run) waits on the
//                         main stream's event on its cudaStreamPerThread, runs
//                         kernels and a memset there, then either records an
//                         event that the main thread's stream waits on and
//                         exits with that work pending, or synchronizes its
//                         per-thread stream and exits (the main thread then
//                         reads its output with no device-side ordering, after
//                         joining the thread); every fifth step the main work
//                         runs on the main thread's own per-thread stream.
//                         What graft may get wrong: held work of a thread that
//                         has exited, a stand-in stream per (thread, context)
//                         pair past the table's 256 entries (the run crosses
//                         it), a stand-in reused for the next thread.
//   pageable_readback_joined  stream A produces x, B (after A's event) y, and
//                         C copies a moving window of y into PAGEABLE host
//                         memory and checks it at once, with no
//                         synchronization (such a copy returns only once it
//                         completed), through cudaMemcpyAsync,
//                         cuMemcpyDtoHAsync, cudaMemcpy2DAsync (a pitched
//                         destination whose gaps must stay untouched) and
//                         cuMemcpyAsync in turn; then C copies pageable words
//                         to the device and the host scribbles them at once
//                         (staged at the call). First third: three non-blocking
//                         streams joined by events; second: A and B blocking,
//                         C the legacy stream with NO event from B (the
//                         implicit synchronization orders the copy); third: B
//                         is cudaStreamPerThread. What graft may get wrong: the
//                         eager copy issued before held work of OTHER streams
//                         it depends on (through an event or the legacy
//                         stream's implicit synchronization), so the host reads
//                         stale words.
//   big_param_twins       one kernel taking (out, a 32000-byte
//                         __grid_constant__ struct, a salt): 32012 bytes of
//                         parameters (the limit is 32764), launched three times
//                         a step with three structs that differ in a few words,
//                         through <<<>>>, cudaLaunchKernel, cuLaunchKernel with
//                         kernelParams and cuLaunchKernel with an `extra`
//                         buffer (every 4 steps in turn; irregular steps swap
//                         the first two forms); each step two words per struct
//                         change in the head (even steps) or the tail (odd
//                         steps) region, the struct's last word (the last
//                         bytes of the parameter space but the salt's) every
//                         third step, and every fifth step the changes made two
//                         steps before undone (values launched before). Structs
//                         scribbled after each call; each block sums the whole
//                         struct by position. What graft may get wrong: a patch that
//                         misses a word of the other region or of the tail,
//                         the twins' patches applied to the wrong node, a
//                         reverted value taken for "unchanged since the graph".
//   hostfunc_derived_args  stream S: a kernel, a summary kernel, a
//                         device-to-host copy of 8 words into pinned memory
//                         and a host function (cudaLaunchHostFunc) that
//                         derives from them the NEXT step's grid (1..4
//                         blocks), scalar, memset size and offset and which of
//                         two consumer streams runs it; the consumer waits on
//                         S's event after the host function. The host waits
//                         for the host function by cudaEventSynchronize of the
//                         CONSUMER's event, by polling its flag with no CUDA
//                         call, or by cudaStreamSynchronize(S), and checks the
//                         derived values against its mirror. What graft may get
//                         wrong: the host function run before the copy (or the
//                         kernels) it follows, the consumer's wait bound to an
//                         earlier record, shapes drawn from data every step.
//   ipc_event_joins       a fork/join step on three streams whose fork event
//                         and join events are, in turn (4 steps each, irregular
//                         steps shifted), plain untimed events, interprocess
//                         events (cudaEventInterprocess: their records and
//                         waits are ones a tool leaves eager) and blocking-sync
//                         events; every sixth step the host waits on a
//                         blocking-sync event. First half non-blocking streams;
//                         second half the legacy stream forks and joins two
//                         blocking streams (an eager record on the legacy stream
//                         waits for the blocking streams' work before it). What
//                         graft may get wrong: an eager record or wait issued
//                         ahead of held work before it in its stream (or, for
//                         the legacy stream, in the blocking streams), boundary
//                         positions that move with a period of 12 steps.
//
//   traps_r33 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r33 --list               the scenario names
//
// Linked to libcuda (-lcuda: driver copies and launches); no device-side
// launches:
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -o traps_r33 traps_r33.cu -lcuda
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trap_words.cuh"

namespace {

// ---------------------------------------------------------------- shared helpers

constexpr int kL = 128;  // threads of the one-block kernels

// An event whose completion the program's own wait implies: cudaEventQuery
// must say cudaSuccess (eagerly it cannot say anything else), else a MISMATCH
// line and exit 1.
void expectEventDone(const char* scenario, const char* what, cudaEvent_t e, int step, const char* after) {
  const cudaError_t r = cudaEventQuery(e);
  if (r == cudaSuccess) return;
  if (r != cudaErrorNotReady) CK(r);
  mismatch(scenario, step,
           std::string("cudaEventQuery(") + what + ") after " + after +
               " said not ready; the wait implies that it completed");
}

// Streams whose last op the program's wait implies complete: cudaStreamQuery
// must say idle. Counted, with the first five as NOT_IDLE lines (eagerly: none;
// this relies on the driver's stream being idle once its last op, an event
// record, completed).
struct IdleTally {
  explicit IdleTally(const char* s) : scenario(s) {}
  const char* scenario;
  std::atomic<int> notIdle{0};
  std::atomic<int> printed{0};
  void expectIdle(const char* what, cudaStream_t s, int step, const char* after) {
    const cudaError_t r = cudaStreamQuery(s);
    if (r == cudaSuccess) return;
    if (r != cudaErrorNotReady) CK(r);
    ++notIdle;
    if (printed.fetch_add(1) < 5) {
      std::printf("NOT_IDLE %s at step %d: cudaStreamQuery(%s) after %s said not ready; the wait implies it is idle\n",
                  scenario, step, what, after);
      std::fflush(stdout);
    }
  }
};

// ================================================================ implied_* (three scenarios)

constexpr int kOutWords = 64;

__host__ __device__ inline void toMappedAt(uint32_t* out, const uint32_t* b, uint32_t salt, int k) {
  out[k] = b[(uint32_t(k) * 29u + salt) % uint32_t(kW)] ^ rotl(salt, 1 + (k & 15));
}
// 64 words of b into zero-copy memory.
__global__ void toMapped(uint32_t* out, const uint32_t* b, uint32_t salt) {
  const int k = int(threadIdx.x);
  if (k < kOutWords) toMappedAt(out, b, salt, k);
}

enum class Implied { Events, Streams, Legacy, MidRecord };

// What a tool could get wrong: the host waits on one stream or event; the
// program's own ordering (event waits, the legacy stream's implicit
// synchronization) then implies that other events completed and that streams
// whose last op was such a record are idle, so a query right after the wait
// must say so. A tool that launches a multi-stream graph on a stream of its
// own adds a wait on a tail event to every program stream and may re-issue a
// branch's last record after it: that work completes a little after the graph,
// where eagerly there is nothing left to complete.
void impliedRun(const char* name, const char* tag, Implied kind) {
  const bool legacyKind = kind == Implied::Legacy;
  const bool askEvents = kind != Implied::Streams;
  const bool askStreams = kind == Implied::Streams || kind == Implied::Legacy;
  const bool trailing = kind == Implied::MidRecord;
  cudaStream_t nbM = nonBlockingStream(), nbB = nonBlockingStream(), nbC = nonBlockingStream();
  cudaStream_t blB = blockingStream(), blC = blockingStream(), W = nonBlockingStream();
  cudaEvent_t eF = untimedEvent(), eB = untimedEvent(), eC = untimedEvent(), eM = untimedEvent();
  cudaEvent_t eW = untimedEvent();
  Buf m0(33101), m1(33102), b0(33103), b1(33104), c0(33105), c1(33106), t0(33107), t1(33108);
  Mapped out = mappedBuffer(kOutWords, 0);
  std::vector<uint32_t> hOut(kOutWords, 0u);
  preload(mix);
  preload(toMapped);
  CK(cudaDeviceSynchronize());
  static const char* const kAfter[5] = {
      "cudaStreamSynchronize(M)", "cudaEventSynchronize(eM)", "a synchronize of W after W waited on eM",
      "cudaEventSynchronize(eB)", "a synchronous cudaMemcpy (the legacy stream)"};
  const int nForms = legacyKind ? 5 : 4;
  const int nPhases = legacyKind ? 2 : 3;
  IdleTally idle(name);
  int forms[5] = {0, 0, 0, 0, 0}, earlyAsked = 0, earlyReady = 0, phase = -1;
  bool joinedC = true;  // the previous step's M followed C's last op (else M waits on eC first)
  const std::string mappedLabel = std::string(tag) + "_mapped";
  const std::string copyLabel = std::string(tag) + "_sync_copy_m1";
  for (int i = 0; i < g_iters; ++i) {
    const int ph = std::min(nPhases - 1, i * nPhases / g_iters);
    if (ph != phase) {
      CK(cudaDeviceSynchronize());
      phase = ph;
      joinedC = true;
    }
    cudaStream_t M, B, C;
    bool joinC;
    if (legacyKind) {
      M = cudaStreamLegacy;
      B = ph == 0 ? blB : cudaStreamPerThread;
      C = blC;
      joinC = ph == 1;
    } else {
      M = nbM;
      B = ph == 2 ? cudaStreamPerThread : nbB;
      C = nbC;
      joinC = ph != 1;
    }
    const char* bName = B == cudaStreamPerThread ? "cudaStreamPerThread (B)" : "B";
    const char* mName = legacyKind ? "the legacy stream (M)" : "M";
    // C's last op precedes a later op of M: an event wait, or (M the legacy
    // stream, C blocking) the implicit synchronization.
    const bool cImplied = joinC || legacyKind;
    const uint32_t salt = hash32(uint32_t(i) + 33100u);
    // M: what the sides wrote last step (M followed B's last op then, and C's
    // or waits now), then its own chain.
    if (!joinedC) CK(cudaStreamWaitEvent(M, eC, 0));
    mixOn(M, m1, b0, salt ^ 0x01u);
    mixOn(M, m0, c0, salt ^ 0x02u);
    for (int r = 0; r < 3; ++r) {
      mixOn(M, m1, m0, salt + uint32_t(2 * r) * 0x100u);
      mixOn(M, m0, m1, salt + uint32_t(2 * r + 1) * 0x100u);
    }
    CK(cudaEventRecord(eF, M));
    // B and C read m0 (M leaves it alone until the join).
    CK(cudaStreamWaitEvent(B, eF, 0));
    mixOn(B, b1, m0, salt ^ 0x11u);
    mixOn(B, b0, b1, salt ^ 0x12u);
    toMapped<<<1, kOutWords, 0, B>>>(out.dev, b0.d, salt ^ 0x13u);
    CKL();
    for (int k = 0; k < kOutWords; ++k) toMappedAt(hOut.data(), b0.h.data(), salt ^ 0x13u, k);
    CK(cudaEventRecord(eB, B));  // B's last op
    CK(cudaStreamWaitEvent(C, eF, 0));
    mixOn(C, c1, m0, salt ^ 0x21u);
    mixOn(C, c0, c1, salt ^ 0x22u);
    CK(cudaEventRecord(eC, C));  // C's last op
    mixOn(M, m1, m0, salt ^ 0x31u);
    CK(cudaStreamWaitEvent(M, eB, 0));
    if (joinC) CK(cudaStreamWaitEvent(M, eC, 0));
    CK(cudaEventRecord(eM, M));  // M's last op: nothing after the join (but implied_mid_record's)
    if (trailing) {  // the next work already queued on M behind eM
      mixOn(M, t0, m1, salt ^ 0x41u);
      for (int r = 0; r < 3; ++r) {
        mixOn(M, t1, t0, salt ^ (0x42u + uint32_t(r)));
        mixOn(M, t0, t1, salt ^ (0x52u + uint32_t(r)));
      }
    }
    joinedC = cImplied;
    if (irregular(i, 3311, 3)) {  // before the wait: timing decides (stderr only)
      const cudaError_t q1 = cudaEventQuery(eB);
      const cudaError_t q2 = cudaStreamQuery(B);
      if (q1 != cudaSuccess && q1 != cudaErrorNotReady) CK(q1);
      if (q2 != cudaSuccess && q2 != cudaErrorNotReady) CK(q2);
      earlyAsked += 2;
      earlyReady += (q1 == cudaSuccess ? 1 : 0) + (q2 == cudaSuccess ? 1 : 0);
    }
    const int form = (i / 8) % nForms;
    ++forms[form];
    const char* after = kAfter[form];
    switch (form) {
      case 0:
        CK(cudaStreamSynchronize(M));
        break;
      case 1:
        CK(cudaEventSynchronize(eM));
        break;
      case 2:
        CK(cudaStreamWaitEvent(W, eM, 0));
        CK(cudaEventRecord(eW, W));
        if (i % 2 == 0)
          CK(cudaStreamSynchronize(W));
        else
          CK(cudaEventSynchronize(eW));
        break;
      case 3:
        CK(cudaEventSynchronize(eB));
        break;
      default: {  // on the legacy stream: after M's work and every blocking stream's before it
        const std::vector<uint32_t> got = fetch<uint32_t>(m1.d, size_t(kW));
        expectWords(copyLabel.c_str(), i, got.data(), m1.h.data(), size_t(kW));
        break;
      }
    }
    // Right after the wait, before any other CUDA call.
    if (askEvents) {
      expectEventDone(name, "eF", eF, i, after);  // B waited on it
      if (form != 3) {
        expectEventDone(name, "eB", eB, i, after);
        if (cImplied) expectEventDone(name, "eC", eC, i, after);
        expectEventDone(name, "eM", eM, i, after);
      }
    }
    if (askStreams) {
      idle.expectIdle(bName, B, i, after);
      if (form != 3) {
        if (cImplied) idle.expectIdle("C", C, i, after);
        if (form != 0) idle.expectIdle(mName, M, i, after);
        if (form == 2) idle.expectIdle("W", W, i, after);
      }
    }
    // B's kernels completed in every form: the zero-copy words are there.
    expectWords(mappedLabel.c_str(), i, out.host, hOut.data(), size_t(kOutWords));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      m0.check(tag, "m0", i);
      m1.check(tag, "m1", i);
      b0.check(tag, "b0", i);
      b1.check(tag, "b1", i);
      c0.check(tag, "c0", i);
      c1.check(tag, "c1", i);
      if (trailing) {
        t0.check(tag, "t0", i);
        t1.check(tag, "t1", i);
      }
      print(mappedLabel.c_str(), i, hostDigest(hOut.data(), hOut.size() * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  if (askStreams)
    std::printf("%s: waits by form %d %d %d %d %d, streams not idle where implied %d\n", name, forms[0], forms[1],
                forms[2], forms[3], forms[4], idle.notIdle.load());
  else
    std::printf("%s: waits by form %d %d %d %d, every implied event query said done\n", name, forms[0], forms[1],
                forms[2], forms[3]);
  std::fprintf(stderr, "%s (timing, not compared): %d of %d queries before the wait said done\n", name, earlyReady,
               earlyAsked);
  CK(cudaFreeHost(out.host));
}

void impliedEventQueries() { impliedRun("implied_event_queries", "ieq", Implied::Events); }
void impliedStreamIdle() { impliedRun("implied_stream_idle", "isi", Implied::Streams); }
void impliedLegacyBlocking() { impliedRun("implied_legacy_blocking", "ilb", Implied::Legacy); }
void impliedMidRecord() { impliedRun("implied_mid_record", "imr", Implied::MidRecord); }

// ================================================================ ptsz_thread_handoff

// What a tool could get wrong: two threads take turns; the helper's work runs
// on its own per-thread default stream, which only the helper can name, and
// ends with an event record; the main thread's stream waits on that event and
// the host waits for the main stream. A tool that stands in for each thread's
// per-thread stream with a stream of its own must issue the helper's held work
// there before the main thread's wait, and after the main thread's wait the
// helper's event and per-thread stream must read as done.
void ptszThreadHandoff() {
  const char* name = "ptsz_thread_handoff";
  const int dev = currentDevice();
  cudaStream_t nbM = nonBlockingStream(), W = nonBlockingStream();
  cudaEvent_t eH = untimedEvent(), eM = untimedEvent(), eW = untimedEvent();
  Buf m0(33201), m1(33202), h0(33203), h1(33204);
  preload(mix);
  CK(cudaDeviceSynchronize());
  Turns T;
  const int half = g_iters / 2;
  IdleTally helperIdle(name), mainIdle(name);
  int forms[3] = {0, 0, 0};
  static const char* const kAfter[3] = {"cudaStreamSynchronize(M)", "cudaEventSynchronize(eM)",
                                        "a synchronize of W after W waited on eM"};
  std::thread helper([&] {
    CK(cudaSetDevice(dev));
    cudaStream_t P = cudaStreamPerThread;
    for (int i = 0; i < g_iters; ++i) {
      T.waitFor(2L * i);
      if (i > 0) {
        // The main thread's wait at the end of its last turn implied that eH,
        // the last op of this thread's per-thread stream, completed.
        expectEventDone(name, "eH, in the helper", eH, i - 1, "the main thread's wait");
        helperIdle.expectIdle("the helper's cudaStreamPerThread", P, i - 1, "the main thread's wait");
        CK(cudaStreamWaitEvent(P, eM, 0));  // the main stream read h0 last turn
      }
      const uint32_t salt = hash32(uint32_t(i) + 33210u);
      for (int r = 0; r < 6; ++r) {
        mixOn(P, h1, m0, salt + uint32_t(r) * 0x10u);
        mixOn(P, h0, h1, salt + uint32_t(r) * 0x10u + 1u);
      }
      CK(cudaEventRecord(eH, P));  // the per-thread stream's last op
      T.pass();
    }
  });
  for (int i = 0; i < g_iters; ++i) {
    T.waitFor(2L * i + 1);
    // The second half: the main thread's own per-thread stream (its first
    // step there follows the non-blocking stream's work: the host waited).
    cudaStream_t M = i < half ? nbM : cudaStreamPerThread;
    const uint32_t salt = hash32(uint32_t(i) + 33220u);
    CK(cudaStreamWaitEvent(M, eH, 0));
    for (int r = 0; r < 6; ++r) {
      mixOn(M, m1, h0, salt + uint32_t(r) * 0x10u);
      mixOn(M, m0, m1, salt + uint32_t(r) * 0x10u + 1u);
    }
    CK(cudaEventRecord(eM, M));
    const int form = (i / 6) % 3;
    ++forms[form];
    switch (form) {
      case 0:
        CK(cudaStreamSynchronize(M));
        break;
      case 1:
        CK(cudaEventSynchronize(eM));
        break;
      default:
        CK(cudaStreamWaitEvent(W, eM, 0));
        CK(cudaEventRecord(eW, W));
        CK(cudaStreamSynchronize(W));
        break;
    }
    expectEventDone(name, "eH", eH, i, kAfter[form]);
    if (form != 0)
      mainIdle.expectIdle(M == cudaStreamPerThread ? "the main thread's cudaStreamPerThread" : "M", M, i,
                          kAfter[form]);
    if (at(i)) {
      m0.check("pth", "m0", i);  // synchronous copies: the helper waits for its turn
      m1.check("pth", "m1", i);
      h0.check("pth", "h0", i);
      h1.check("pth", "h1", i);
    }
    T.pass();
  }
  helper.join();
  CK(cudaDeviceSynchronize());
  std::printf("%s: waits by form %d %d %d, not idle where implied: the helper's per-thread stream %d, main %d\n",
              name, forms[0], forms[1], forms[2], helperIdle.notIdle.load(), mainIdle.notIdle.load());
}

// ================================================================ fresh_thread_ptsz

// What a tool could get wrong: each step's producer is a new thread whose work
// runs on its own per-thread default stream; it exits with that work pending
// (ordered for the main thread by an event only) or after synchronizing it
// (ordered by the host alone). A tool that stands in for per-thread streams
// with streams of its own per (thread, context) pair meets more threads than
// its table holds, and held work of threads that are gone.
void freshThreadPtsz() {
  const int dev = currentDevice();
  cudaStream_t M = nonBlockingStream();
  cudaEvent_t eW = untimedEvent(), eMain = untimedEvent();
  Buf m0(33301), m1(33302), w0(33303), w1(33304);
  preload(mix);
  CK(cudaDeviceSynchronize());
  int modes[3] = {0, 0, 0}, mainOnPerThread = 0;
  bool mainRecorded = false;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 33300u);
    const int mode = irregular(i, 3301, 7) ? 2 : i % 3;  // 2: the worker synchronizes; else it records eW
    ++modes[mode];
    std::thread worker([&, i, mode, salt] {
      CK(cudaSetDevice(dev));
      cudaStream_t P = cudaStreamPerThread;
      if (mainRecorded) CK(cudaStreamWaitEvent(P, eMain, 0));  // the main work read w0 and wrote m0
      mixOn(P, w0, m0, salt);
      mixOn(P, w1, w0, salt ^ 1u);
      {
        const int words = 64 + (i % 4) * 32;
        const int off = int(hash32(salt ^ 0x55u) % uint32_t(kW - words));
        const int value = int(salt >> 24);
        CK(cudaMemsetAsync(w1.d + off, value, size_t(words) * 4, P));
        std::memset(w1.h.data() + off, value, size_t(words) * 4);
      }
      mixOn(P, w0, w1, salt ^ 2u);
      if (mode == 2)
        CK(cudaStreamSynchronize(P));
      else
        CK(cudaEventRecord(eW, P));  // left pending as the thread exits
    });
    worker.join();
    cudaStream_t S = i % 5 == 4 ? cudaStreamPerThread : M;
    mainOnPerThread += S == cudaStreamPerThread ? 1 : 0;
    // The worker waited on eMain, so S follows the main work of the step
    // before through eW (or through the worker's synchronize).
    if (mode != 2) CK(cudaStreamWaitEvent(S, eW, 0));
    mixOn(S, m0, w0, salt ^ 3u);
    mixOn(S, m1, m0, salt ^ 4u);
    mixOn(S, m0, m1, salt ^ 5u);
    CK(cudaEventRecord(eMain, S));
    mainRecorded = true;
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      m0.check("ftp", "m0", i);
      m1.check("ftp", "m1", i);
      w0.check("ftp", "w0", i);
      w1.check("ftp", "w1", i);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("fresh_thread_ptsz: %d threads, %d left an event record pending, %d synchronized, main steps on "
              "its per-thread stream %d\n",
              g_iters, modes[0] + modes[1], modes[2], mainOnPerThread);
}

// ================================================================ pageable_readback_joined

constexpr int kRowWords = 64, kPitchWords = 80;  // the 2-D form: 256-byte rows, 320-byte destination pitch

// What a tool could get wrong: a copy into pageable memory returns only once it
// completed, so the host reads it at once; the copy's source was written on
// other streams, ordered before the copy by events or by the legacy stream's
// implicit synchronization. A tool issues such a copy eagerly at its call, but
// must first issue all the held work it depends on, on every stream.
void pageableReadbackJoined() {
  const char* name = "pageable_readback_joined";
  cudaStream_t nbA = nonBlockingStream(), nbB = nonBlockingStream(), nbC = nonBlockingStream();
  cudaStream_t blA = blockingStream(), blB = blockingStream();
  cudaEvent_t eA = untimedEvent(), eB = untimedEvent(), eC = untimedEvent();
  Buf x(33401), x2(33402), y(33403), y2(33404), z(33405);
  std::vector<uint32_t> hp(1024), want(1024), src(512);
  preload(mix);
  CK(cudaDeviceSynchronize());
  int forms[4] = {0, 0, 0, 0}, phase = -1;
  bool pendingC = false;
  const std::string label = "prj_pageable";
  for (int i = 0; i < g_iters; ++i) {
    const int ph = std::min(2, i * 3 / g_iters);
    if (ph != phase) {
      CK(cudaDeviceSynchronize());
      phase = ph;
      pendingC = false;
    }
    cudaStream_t A = ph == 1 ? blA : nbA;
    cudaStream_t B = ph == 1 ? blB : ph == 2 ? cudaStreamPerThread : nbB;
    cudaStream_t C = ph == 1 ? cudaStreamLegacy : nbC;
    const bool implicit = ph == 1;  // C is the legacy stream, A and B blocking: no events to or from C
    const uint32_t salt = hash32(uint32_t(i) + 33400u);
    if (pendingC) CK(cudaStreamWaitEvent(A, eC, 0));  // C read y and wrote z, which A reads
    mixOn(A, x2, z, salt);
    mixOn(A, x, x2, salt ^ 1u);
    CK(cudaEventRecord(eA, A));
    CK(cudaStreamWaitEvent(B, eA, 0));
    mixOn(B, y2, x, salt ^ 2u);
    mixOn(B, y, y2, salt ^ 3u);
    if (!implicit) {
      CK(cudaEventRecord(eB, B));
      CK(cudaStreamWaitEvent(C, eB, 0));
    }
    // A window of y into pageable memory, read at once.
    const int form = irregular(i, 3401, 7) ? (i + 2) % 4 : i % 4;
    ++forms[form];
    const int words = 256 + (i % 3) * 128;
    const int off = int(hash32(salt) % uint32_t(kW - words));
    const uint32_t sentinel = 0xc0de0000u ^ uint32_t(i);
    std::fill(hp.begin(), hp.end(), sentinel);
    std::fill(want.begin(), want.end(), sentinel);
    const uint32_t* from = y.d + off;
    switch (form) {
      case 0:
        CK(cudaMemcpyAsync(hp.data(), from, size_t(words) * 4, cudaMemcpyDeviceToHost, C));
        break;
      case 1:
        CKD(cuMemcpyDtoHAsync(hp.data(), dptr(from), size_t(words) * 4, cu(C)));
        break;
      case 2:
        CK(cudaMemcpy2DAsync(hp.data(), size_t(kPitchWords) * 4, from, size_t(kRowWords) * 4, size_t(kRowWords) * 4,
                             size_t(words / kRowWords), cudaMemcpyDeviceToHost, C));
        break;
      default:
        CKD(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(hp.data()), dptr(from), size_t(words) * 4, cu(C)));
        break;
    }
    if (form == 2) {
      for (int r = 0; r < words / kRowWords; ++r)
        for (int c = 0; c < kRowWords; ++c)
          want[size_t(r * kPitchWords + c)] = y.h[size_t(off + r * kRowWords + c)];
    } else {
      for (int k = 0; k < words; ++k) want[size_t(k)] = y.h[size_t(off + k)];
    }
    expectWords(label.c_str(), i, hp.data(), want.data(), hp.size());
    // Pageable words to the device; the source scribbled at once (staged at the call).
    const int zoff = int(hash32(salt ^ 0x77u) % uint32_t(kW - words));
    for (int k = 0; k < words; ++k) {
      const int pos = form == 2 ? (k / kRowWords) * kPitchWords + k % kRowWords : k;  // where word k landed
      src[size_t(k)] = rotl(hp[size_t(pos)], 9) ^ salt;
    }
    CK(cudaMemcpyAsync(z.d + zoff, src.data(), size_t(words) * 4, cudaMemcpyHostToDevice, C));
    std::memcpy(z.h.data() + zoff, src.data(), size_t(words) * 4);
    std::fill(src.begin(), src.end(), ~sentinel);
    mixOn(C, z, y, salt ^ 4u);
    if (!implicit) CK(cudaEventRecord(eC, C));
    pendingC = !implicit;  // A (blocking) follows the legacy stream's work by itself
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      x.check("prj", "x", i);
      x2.check("prj", "x2", i);
      y.check("prj", "y", i);
      y2.check("prj", "y2", i);
      z.check("prj", "z", i);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s: cudaMemcpyAsync %d, cuMemcpyDtoHAsync %d, cudaMemcpy2DAsync %d, cuMemcpyAsync %d\n", name,
              forms[0], forms[1], forms[2], forms[3]);
}

// ================================================================ big_param_twins

constexpr int kTwinWords = 8000;
constexpr int kTwinGrid = 4;
constexpr int kTwinBlock = 256;
struct Twin {
  uint32_t w[kTwinWords];
};
static_assert(sizeof(Twin) == 32000, "Twin's size");
// (out at 0, the struct at 8, the salt at 32008): 32012 bytes, under 32764.
constexpr size_t kTwinOffStruct = 8, kTwinOffSalt = 8 + sizeof(Twin), kTwinParamBytes = kTwinOffSalt + 4;
static_assert(kTwinParamBytes <= 32764, "the kernel parameter limit");

__host__ __device__ inline int twinPick(uint32_t salt, int b) {
  return int((uint32_t(b) * 1999u + salt) % uint32_t(kTwinWords));
}
__host__ __device__ inline uint32_t twinOut(uint32_t old, uint32_t sum, uint32_t picked, uint32_t salt, int b) {
  return rotl(old, 5) ^ (sum + salt * uint32_t(2 * b + 1) + picked);
}
// Each block sums every word of the struct by position, and picks one word.
__global__ void twinK(uint32_t* out, const __grid_constant__ Twin t, uint32_t salt) {
  __shared__ uint32_t acc;
  if (threadIdx.x == 0) acc = 0;
  __syncthreads();
  uint32_t s = 0;
  for (int j = int(threadIdx.x); j < kTwinWords; j += int(blockDim.x)) s += t.w[j] * uint32_t(2 * j + 1);
  atomicAdd(&acc, s);
  __syncthreads();
  if (threadIdx.x == 0) {
    const int b = int(blockIdx.x);
    out[b] = twinOut(out[b], acc, t.w[twinPick(salt, b)], salt, b);
  }
}
uint32_t twinSum(const Twin& t) {
  uint32_t s = 0;
  for (int j = 0; j < kTwinWords; ++j) s += t.w[j] * uint32_t(2 * j + 1);
  return s;
}
__host__ __device__ inline void twinFoldAt(uint32_t* acc, const uint32_t* out, uint32_t salt, int k) {
  acc[k] = rotl(acc[k], 7) + (out[k % kTwinGrid] ^ (salt + uint32_t(k) * 0x9e3779b9u));
}
__global__ void twinFold(uint32_t* acc, const uint32_t* out, uint32_t salt) {
  const int k = int(threadIdx.x);
  if (k < kL) twinFoldAt(acc, out, salt, k);
}

struct TwinChange {
  int twin;
  int pos;
  uint32_t old;
};

// What a tool could get wrong: three launches a step of one kernel whose
// 32012 bytes of parameters differ between the launches by a few words and
// change every step at few places, alternating between two regions far apart,
// sometimes in the last bytes of the parameter space, sometimes back to values
// launched before; through four launch entry points (the `extra` buffer
// among them). Every word reaches the kernel's sum by position.
void bigParamTwins() {
  cudaStream_t s = nonBlockingStream();
  std::vector<Buf> outs;
  for (int t = 0; t < 3; ++t) outs.emplace_back(uint32_t(33501 + t), kTwinGrid);
  Buf acc(33505, kL);
  std::vector<Twin> T(3);
  for (int t = 0; t < 3; ++t)
    for (int j = 0; j < kTwinWords; ++j) T[size_t(t)].w[j] = hash32(uint32_t(j) * 3u + uint32_t(t) + 33506u);
  // Twins differ in a few words.
  T[1].w[17] ^= 0x1u;
  T[2].w[kTwinWords - 3] ^= 0x80000000u;
  auto tmp = std::make_unique<Twin>();
  std::vector<unsigned char> packed(kTwinParamBytes);
  CUfunction fn = nullptr;
  CK(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(twinK)));
  {  // the layout the `extra` buffer follows (cuFuncGetParamInfo, where the driver has it)
    const size_t wantOff[3] = {0, kTwinOffStruct, kTwinOffSalt}, wantSize[3] = {8, sizeof(Twin), 4};
    for (size_t p = 0; p < 3; ++p) {
      size_t offset = 0, size = 0;
      if (cuFuncGetParamInfo(fn, p, &offset, &size) != CUDA_SUCCESS) break;
      if (offset != wantOff[p] || size != wantSize[p]) {
        std::fprintf(stderr, "traps_r33: twinK's parameter %zu at %zu (%zu bytes), expected %zu (%zu)\n", p, offset,
                     size, wantOff[p], wantSize[p]);
        std::exit(1);
      }
    }
  }
  preload(twinK);
  preload(twinFold);
  CK(cudaDeviceSynchronize());
  std::vector<std::vector<TwinChange>> hist(static_cast<size_t>(g_iters));
  int byForm[4] = {0, 0, 0, 0}, reverts = 0, lastWord = 0;
  auto change = [&](int i, int t, int pos, uint32_t v) {
    hist[size_t(i)].push_back({t, pos, T[size_t(t)].w[pos]});
    T[size_t(t)].w[pos] = v;
  };
  auto launch = [&](int t, int form, uint32_t sl) {
    *tmp = T[size_t(t)];
    uint32_t* o = outs[size_t(t)].d;
    ++byForm[form];
    switch (form) {
      case 0:
        twinK<<<kTwinGrid, kTwinBlock, 0, s>>>(o, *tmp, sl);
        CKL();
        break;
      case 1: {
        void* args[] = {&o, tmp.get(), &sl};
        CK(cudaLaunchKernel(reinterpret_cast<const void*>(twinK), dim3(kTwinGrid), dim3(kTwinBlock), args, 0, s));
        break;
      }
      case 2: {
        void* params[] = {&o, tmp.get(), &sl};
        CKD(cuLaunchKernel(fn, kTwinGrid, 1, 1, kTwinBlock, 1, 1, 0, cu(s), params, nullptr));
        break;
      }
      default: {
        std::memcpy(packed.data(), &o, sizeof o);
        std::memcpy(packed.data() + kTwinOffStruct, tmp.get(), sizeof(Twin));
        std::memcpy(packed.data() + kTwinOffSalt, &sl, sizeof sl);
        size_t size = kTwinParamBytes;
        void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         CU_LAUNCH_PARAM_END};
        CKD(cuLaunchKernel(fn, kTwinGrid, 1, 1, kTwinBlock, 1, 1, 0, cu(s), nullptr, extra));
        std::fill(packed.begin(), packed.end(), static_cast<unsigned char>(0xa5));
        break;
      }
    }
    const uint32_t sum = twinSum(*tmp);
    std::vector<uint32_t>& h = outs[size_t(t)].h;
    for (int b = 0; b < kTwinGrid; ++b) h[size_t(b)] = twinOut(h[size_t(b)], sum, tmp->w[twinPick(sl, b)], sl, b);
    std::memset(tmp.get(), 0x5a, sizeof(Twin));  // scribbled: the launch took its copy
  };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 33500u);
    const int base = i % 2 == 0 ? 0 : kTwinWords - 1000;  // the head or the tail region
    for (int t = 0; t < 3; ++t)
      for (int c = 0; c < 2; ++c) {
        const uint32_t h = hash32(salt + uint32_t(t) * 131u + uint32_t(c) * 7u);
        change(i, t, base + int(h % 1000u), hash32(h ^ 0x5bd1e995u));
      }
    if (i % 3 == 2) {  // the last bytes of the parameter space but the salt's
      const int t = (i / 3) % 3;
      change(i, t, kTwinWords - 1, T[size_t(t)].w[kTwinWords - 1] ^ (hash32(salt) | 1u));
      ++lastWord;
    }
    if (i % 5 == 4 && i >= 2) {  // step i - 2's changes undone: values launched before
      const std::vector<TwinChange>& old = hist[size_t(i - 2)];
      for (auto it = old.rbegin(); it != old.rend(); ++it) T[size_t(it->twin)].w[it->pos] = it->old;
      ++reverts;
    }
    int f0 = 0, f1 = 1;
    if (irregular(i, 3501, 6)) std::swap(f0, f1);
    const int f2 = (i / 4) % 2 == 0 ? 2 : 3;
    const int forms[3] = {f0, f1, f2};
    for (int t = 0; t < 3; ++t) {
      const uint32_t sl = salt ^ (uint32_t(t) * 0x9e3779b9u);
      launch(t, forms[t], sl);
      twinFold<<<1, kL, 0, s>>>(acc.d, outs[size_t(t)].d, sl ^ 0x77u);
      CKL();
      for (int k = 0; k < kL; ++k) twinFoldAt(acc.h.data(), outs[size_t(t)].h.data(), sl ^ 0x77u, k);
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      outs[0].check("bpt", "out0", i);
      outs[1].check("bpt", "out1", i);
      outs[2].check("bpt", "out2", i);
      acc.check("bpt", "acc", i);
    }
  }
  CK(cudaStreamSynchronize(s));
  std::printf("big_param_twins: launches by <<<>>> %d, cudaLaunchKernel %d, kernelParams %d, extra %d; reverts %d, "
              "last-word changes %d\n",
              byForm[0], byForm[1], byForm[2], byForm[3], reverts, lastWord);
}

// ================================================================ hostfunc_derived_args

constexpr int kSumWords = 8;
constexpr int kShapeBlocks = 4;

__host__ __device__ inline uint32_t summaryWord(const uint32_t* x, int n, uint32_t salt, int j) {
  uint32_t s = salt + uint32_t(j);
  for (int k = j; k < n; k += kSumWords) s = rotl(s, 3) ^ (x[k] + uint32_t(k));
  return s;
}
__global__ void summarize(uint32_t* out, const uint32_t* x, int n, uint32_t salt) {
  const int j = int(threadIdx.x);
  if (j < kSumWords) out[j] = summaryWord(x, n, salt, j);
}
// Block b (of 1 to kShapeBlocks) rewrites z's words [b * kL, (b + 1) * kL).
__host__ __device__ inline void shapedAt(uint32_t* z, const uint32_t* x, uint32_t scalar, int b, int t) {
  z[b * kL + t] = rotl(z[b * kL + t], 3) ^ (x[(t * 5 + b * 131) % kW] + scalar * uint32_t(b + 1));
}
__global__ void shaped(uint32_t* z, const uint32_t* x, uint32_t scalar) {
  shapedAt(z, x, scalar, int(blockIdx.x), int(threadIdx.x));
}

// The next step's launch values, from the summary words.
struct Derived {
  uint32_t grid = 2, scalar = 12345u, words = 64, which = 0, off = 100;
};
Derived deriveFrom(const uint32_t* s) {
  Derived d;
  d.grid = 1u + s[0] % uint32_t(kShapeBlocks);
  d.scalar = s[1] ^ rotl(s[2], 7);
  d.words = 16u + (s[3] % 48u) * 4u;
  d.which = s[4] & 1u;
  d.off = s[5] % uint32_t(kW - 256);
  return d;
}
bool sameDerived(const Derived& a, const Derived& b) {
  return a.grid == b.grid && a.scalar == b.scalar && a.words == b.words && a.which == b.which && a.off == b.off;
}
struct DeriveCall {
  const uint32_t* pinned = nullptr;
  Derived next;
  int step = 0;
  std::atomic<int> done{0};
};
void CUDART_CB deriveHost(void* p) {
  auto* c = static_cast<DeriveCall*>(p);
  c->next = deriveFrom(c->pinned);
  c->done.store(c->step + 1, std::memory_order_release);
}

// What a tool could get wrong: the next step's grid, scalar, memset size and
// offset and consumer stream come from a host function that reads words the
// device summarized and a copy brought into pinned memory before it; the host
// learns that the host function ran from an event of ANOTHER stream that
// waited on one recorded after it, by polling its flag with no CUDA call, or
// by synchronizing the stream. Shapes drawn from data every step, a consumer
// on one of two streams.
void hostfuncDerivedArgs() {
  const char* name = "hostfunc_derived_args";
  cudaStream_t S = nonBlockingStream(), T = nonBlockingStream(), U = nonBlockingStream();
  cudaEvent_t eS = untimedEvent(), eCons = untimedEvent();
  Buf x(33601), y(33602), z(33603, kShapeBlocks * kL), w(33604);
  uint32_t* sumDev = zeroBuffer(kSumWords);
  uint32_t* pinned = nullptr;
  CK(cudaMallocHost(reinterpret_cast<void**>(&pinned), kSumWords * 4));
  std::memset(pinned, 0, kSumWords * 4);
  DeriveCall call;
  call.pinned = pinned;
  preload(mix);
  preload(summarize);
  preload(shaped);
  CK(cudaDeviceSynchronize());
  Derived cur;
  int waits[3] = {0, 0, 0}, onU = 0, grids[kShapeBlocks] = {0, 0, 0, 0};
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t salt = hash32(uint32_t(i) + 33600u);
    if (i > 0) CK(cudaStreamWaitEvent(S, eCons, 0));  // the consumer wrote y and read x
    mixOn(S, x, y, salt);
    summarize<<<1, 32, 0, S>>>(sumDev, x.d, kW, salt ^ 1u);
    CKL();
    uint32_t hs[kSumWords];
    for (int j = 0; j < kSumWords; ++j) hs[j] = summaryWord(x.h.data(), kW, salt ^ 1u, j);
    CK(cudaMemcpyAsync(pinned, sumDev, kSumWords * 4, cudaMemcpyDeviceToHost, S));
    call.step = i;
    CK(cudaLaunchHostFunc(S, deriveHost, &call));
    CK(cudaEventRecord(eS, S));
    // The consumer, with this step's values (from the step before).
    cudaStream_t Cons = cur.which ? U : T;
    onU += cur.which ? 1 : 0;
    ++grids[cur.grid - 1];
    CK(cudaStreamWaitEvent(Cons, eS, 0));
    shaped<<<cur.grid, kL, 0, Cons>>>(z.d, x.d, cur.scalar);
    CKL();
    for (int b = 0; b < int(cur.grid); ++b)
      for (int t = 0; t < kL; ++t) shapedAt(z.h.data(), x.h.data(), cur.scalar, b, t);
    {
      const int value = int(cur.scalar & 0xffu);
      CK(cudaMemsetAsync(y.d + cur.off, value, size_t(cur.words) * 4, Cons));
      std::memset(y.h.data() + cur.off, value, size_t(cur.words) * 4);
    }
    mixOn(Cons, w, x, salt ^ 2u);
    CK(cudaEventRecord(eCons, Cons));
    // Wait for the host function, three ways.
    const int form = irregular(i, 3601, 5) ? (i + 1) % 3 : i % 3;
    ++waits[form];
    if (form == 0) {
      CK(cudaEventSynchronize(eCons));  // the consumer waited on eS, recorded after the host function
    } else if (form == 2) {
      CK(cudaStreamSynchronize(S));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (call.done.load(std::memory_order_acquire) != i + 1) {
      if (form != 1) mismatch(name, i, "the host function had not run when the wait returned");
      if (std::chrono::steady_clock::now() > deadline) mismatch(name, i, "the host function never ran (5 s)");
      std::this_thread::yield();
    }
    const Derived want = deriveFrom(hs);
    if (!sameDerived(call.next, want))
      mismatch(name, i, "the host function derived other values than the mirror: it read stale summary words");
    cur = call.next;
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      x.check("hda", "x", i);
      y.check("hda", "y", i);
      z.check("hda", "z", i);
      w.check("hda", "w", i);
      Digest d;
      d.add(uint64_t(cur.grid));
      d.add(uint64_t(cur.scalar));
      d.add(uint64_t(cur.words));
      d.add(uint64_t(cur.which));
      d.add(uint64_t(cur.off));
      print("hda_derived", i, d.h);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s: waits by consumer event %d, flag %d, stream %d; consumer U %d; grids %d %d %d %d\n", name,
              waits[0], waits[1], waits[2], onU, grids[0], grids[1], grids[2], grids[3]);
  CK(cudaFreeHost(pinned));
}

// ================================================================ ipc_event_joins

// What a tool could get wrong: the fork and join events of a repeating step
// are plain, interprocess or blocking-sync events in turn; records of and
// waits on interprocess events are ones a tool issues eagerly at their call
// (another process could wait on them at once), so each must come after the
// held work before it (on its stream, and for the legacy stream on the
// blocking streams too), and the held work after an eager wait must still
// follow it. The step's boundaries move with a period of 12 steps.
void ipcEventJoins() {
  const char* name = "ipc_event_joins";
  cudaStream_t nbA = nonBlockingStream(), nbB = nonBlockingStream(), nbC = nonBlockingStream();
  cudaStream_t blB = blockingStream(), blC = blockingStream();
  static const unsigned kFlags[3] = {cudaEventDisableTiming, cudaEventDisableTiming | cudaEventInterprocess,
                                     cudaEventDisableTiming | cudaEventBlockingSync};
  cudaEvent_t F[3], JB[3], JC[3];
  for (int k = 0; k < 3; ++k) {
    CK(cudaEventCreateWithFlags(&F[k], kFlags[k]));
    CK(cudaEventCreateWithFlags(&JB[k], kFlags[k]));
    CK(cudaEventCreateWithFlags(&JC[k], kFlags[k]));
  }
  cudaEvent_t endE = nullptr;
  CK(cudaEventCreateWithFlags(&endE, cudaEventDisableTiming | cudaEventBlockingSync));
  {  // the handles another process would open (not printed: they name this process)
    cudaIpcEventHandle_t h;
    const int c1 = int(keep(cudaIpcGetEventHandle(&h, F[1])));
    const int c2 = int(keep(cudaIpcGetEventHandle(&h, JB[1])));
    const int c3 = int(keep(cudaIpcGetEventHandle(&h, JC[1])));
    std::printf("%s: cudaIpcGetEventHandle codes %d %d %d\n", name, c1, c2, c3);
  }
  Buf a0(33701), a1(33702), b0(33703), b1(33704), c0(33705), c1(33706);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  const int half = g_iters / 2;
  int forks[3] = {0, 0, 0}, joins[3] = {0, 0, 0}, hostWaits = 0;
  for (int i = 0; i < g_iters; ++i) {
    if (i == half) CK(cudaDeviceSynchronize());  // the streams change kind
    cudaStream_t A = i < half ? nbA : cudaStreamLegacy;
    cudaStream_t B = i < half ? nbB : blB;
    cudaStream_t C = i < half ? nbC : blC;
    const int kf = (i / 4) % 3;
    int kj = (kf + 1) % 3;
    if (irregular(i, 3701, 6)) kj = (kj + 1) % 3;
    ++forks[kf];
    ++joins[kj];
    const uint32_t salt = hash32(uint32_t(i) + 33700u);
    mixOn(A, a1, a0, salt);
    mixOn(A, a0, a1, salt ^ 1u);
    CK(cudaEventRecord(F[kf], A));
    CK(cudaStreamWaitEvent(B, F[kf], 0));
    mixOn(B, b1, a0, salt ^ 2u);
    mixOn(B, b0, b1, salt ^ 3u);
    CK(cudaEventRecord(JB[kj], B));
    CK(cudaStreamWaitEvent(C, F[kf], 0));
    mixOn(C, c1, a0, salt ^ 4u);
    mixOn(C, c0, c1, salt ^ 5u);
    CK(cudaEventRecord(JC[kj], C));
    mixOn(A, a1, a0, salt ^ 6u);  // A keeps off a0 until the join
    CK(cudaStreamWaitEvent(A, JB[kj], 0));
    CK(cudaStreamWaitEvent(A, JC[kj], 0));
    mix2On(A, a0, b0, c0, salt ^ 7u);
    if (i % 6 == 5) {
      CK(cudaEventRecord(endE, A));
      CK(cudaEventSynchronize(endE));
      ++hostWaits;
      expectEventDone(name, "the join event of B", JB[kj], i, "cudaEventSynchronize of A's last record");
      expectEventDone(name, "the join event of C", JC[kj], i, "cudaEventSynchronize of A's last record");
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      a0.check("iej", "a0", i);
      a1.check("iej", "a1", i);
      b0.check("iej", "b0", i);
      b1.check("iej", "b1", i);
      c0.check("iej", "c0", i);
      c1.check("iej", "c1", i);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s: forks by kind (plain, interprocess, blocking-sync) %d %d %d, joins %d %d %d, host waits %d\n",
              name, forks[0], forks[1], forks[2], joins[0], joins[1], joins[2], hostWaits);
}

const Scenario kScenarios[] = {
    {"implied_event_queries", impliedEventQueries},
    {"implied_stream_idle", impliedStreamIdle},
    {"implied_legacy_blocking", impliedLegacyBlocking},
    {"implied_mid_record", impliedMidRecord},
    {"ptsz_thread_handoff", ptszThreadHandoff},
    {"fresh_thread_ptsz", freshThreadPtsz},
    {"pageable_readback_joined", pageableReadbackJoined},
    {"big_param_twins", bigParamTwins},
    {"hostfunc_derived_args", hostfuncDerivedArgs},
    {"ipc_event_joins", ipcEventJoins},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
