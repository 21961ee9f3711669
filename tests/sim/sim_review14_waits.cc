// sim_review14_waits: red-team round 14 (b), every way a host waits for or
// observes GPU work without a full synchronize, while graft holds launches
// back: queries graft answers itself (Engine::query and its NotReadyStreak
// bounds, src/core/engine.cc), host barriers (Engine::hostBarrier), the idle
// flush (idleFlushLoop, src/hook/runtime.cc; Engine::flushIfIdle), host
// functions, mapped-memory flags, events across threads, deferred event
// destroys. Every return code and value is compared with what the simulated
// driver gives eagerly; every wait is bounded (200000 rounds of a feeding loop,
// 3 s of a spin), so a livelock shows as a failure, not a hang.
//
// STATUS (the session that wrote it, after this review): feed-two-devices,
// feed-two-contexts and feed-new-event-idle pass since graft keeps a default
// stream's count of its answers per context and counts its answers in a row
// until the driver's success for a target it answered for (not until any
// query left to the driver); query-destroyed and destroy-twice pass since
// graft answers CUDA_ERROR_INVALID_HANDLE for a handle whose destruction it
// defers. The mapped-spin modes (except -elapsed) stay over their 1 ms bound
// (README, Limits: the idle flush) and are not registered.
//
//   sim_review14_waits --mode M [--steps N] [--expect-graphs]
//   build: /tmp/snap/build_review.sh sim_review14_waits.cc r14w
//   run:   /tmp/snap/run.sh eager|graft ./r14w --mode M --steps 100
//   (/tmp/rt14b/matrix.sh eager|graft OUT STEPS: every mode, 8 settings)
// Modes whose host spins without CUDA calls (hostfn-*, mapped-*,
// event-other-thread-*, feed-other-thread) set SIM_ASYNC_US=20 when it is
// unset or 0: the simulated GPU must run while the host makes no call.
//
// LIBRARY: /tmp/snap/lib/libgraft.so was replaced at 05:06:20 (md5
// 27a259a6...), mid-session: it is /work/main 297f4c6/50a80e2 (query answers
// bounded by kAnswersPerTarget=128 per target, kAnswerWindowNs=50 ms,
// kAnswersInARow=1024, a "driver mode" per target), NOT the r14.diff source
// in /tmp/snap/src. Line numbers below are /work/main HEAD (50a80e2; its
// engine.cc is 297f4c6's). Results are for that library unless said.
//
// ---------------------------------------------------------------- feeding loops
// The host waits for the GPU by asking, and issues the next round of work
// while the answer is CUDA_ERROR_NOT_READY (never two queries with no op
// between: no poll by graft's rule). 16 warm-up rounds without the query and
// a synchronize first (graft learns the rounds), then each step loops until
// CUDA_SUCCESS; values checked at every 8th step's synchronize. Eagerly every
// step ends within 3-7 rounds (< 0.3 ms) in every setting below.
// feed-event         round: 2 adds on S, record E, cuEventQuery(E), 2 adds.
// feed-stream        the same with cuStreamQuery(S) (no record).
// feed-event-long, feed-stream-long  20 + 20 adds (pieces: two held runs per
//                    round).
// feed-event-hostfn, feed-stream-hostfn  each round also 4 adds on S2 and two
//                    cuLaunchHostFunc on S2 (segment boundaries): two held runs
//                    per round.
//     With r14.diff's library (04:44, held-run streaks): feed-event-long and
//     the -hostfn modes LIVELOCKED at SIM_ASYNC_US=3 and 50 (20000 rounds,
//     queries_issued_for_progress 0): engine.cc r14 :777-783 counts a streak
//     only when the target is answered in consecutive held runs
//     (streak->run + 1 == held_runs_); with two held runs between two queries
//     it restarts at 1 every time. Superseded by 297f4c6.
//     With the current library all six pass where SIM_ASYNC_US > 0, but wait
//     139-4788 rounds (2-280 ms; eagerly <= 7 rounds, < 0.3 ms): graft
//     answers 128 times per target, then each query issues what is held and
//     asks at once (mostly a sim artifact: the simulated GPU runs a graph just
//     launched only in later calls or its 60 us tick). With SIM_ASYNC_US=0 the
//     four without host functions never end (20000 rounds): sim artifact (no
//     GPU progress outside driver calls, and graft makes far fewer).
// feed-two-devices   ONE host thread drives device 0's and device 1's primary
//                    contexts, each round in each context: 2 adds on NULL,
//                    cuStreamQuery(NULL), 2 adds; loops until both say
//                    CUDA_SUCCESS in one round (a multi-GPU loop polling each
//                    device's default stream while keeping both fed).
// feed-two-contexts  the same with a second context on device 0 (cuCtxCreate).
//     FAIL under graft in EVERY setting (SIM_ASYNC_US 0/3/50,
//     GRAFT_ASYNC_LAUNCH 0/1, GRAFT_IDLE_FLUSH_MS 1/5/200, SIM_SEED 1-3): a
//     livelock, 20000 rounds (0.2-0.9 s) where eagerly 6-7 rounds (< 0.2 ms);
//     exit report: 39961 queries answered by graft, 39 issued for progress.
//     Why: both legacy streams share one StreamCounters (key kLegacyStream)
//     and so one NotReadyStreak; engine.cc:773-776 ends the streak whenever
//     the query comes from another context than its answers (endStreak:
//     answers = 0, driverUntil = 0), so each context's query restarts the
//     other's count: kAnswersPerTarget (:786) is never reached and the 50 ms
//     window restarts with every answer (:782-785, answers == 0). Only
//     kAnswersInARow (:777) trips, once per 1024 answers; that query issues
//     everything held and asks the driver at once (NOT_READY: the work was
//     just issued), and the driver mode it sets (:799) is wiped by the other
//     context's next query (:774). Fix: keep a default stream's streaks per
//     (key, context) (a small map, or two slots), not one slot reset on a
//     context switch.
// feed-two-devices-threads  the same with a thread per device, at once.
//     Passes where SIM_ASYNC_US > 0 (529-2784 rounds vs 3-4 eagerly); 20000
//     rounds at SIM_ASYNC_US=0 (sim artifact as above).
// feed-new-event     round: 2 adds, a NEW event E_r (cuEventCreate), record
//                    E_r, destroy E_{r-1} (its record maybe held: graft defers
//                    the destroy), cuEventQuery(E_r), 2 adds (PyTorch makes
//                    events per step). Eagerly <= 3 rounds.
//     Under graft 2050-6972 rounds (65-280 ms) where SIM_ASYNC_US > 0, and a
//     livelock (20000) at SIM_ASYNC_US=0 and at SIM_ASYNC_US=50 SIM_SEED=3
//     GRAFT_ASYNC_LAUNCH=0: each new event is a new target with a fresh
//     streak (deferEventDestroy :860-864 ends the old one), so only
//     kAnswersInARow can trip.
//     Since 6e09887 it ends (up to ~800 rounds at SIM_ASYNC_US=3, 30 steps):
//     the simulated GPU advances at driver calls, and graft makes fewer per
//     round. On the H100 the same loop (traps_r13 feed_until_idle, new-event
//     target) ends in fewer rounds under graft than eagerly (docs/PERF.md,
//     thirty-seventh session).
// feed-new-event-idle  the same, each round also asking about an idle stream
//                    (CUDA_SUCCESS, a query graft leaves to the driver).
//     FAIL under graft in EVERY setting: a livelock (20000 rounds, 0.13-0.22 s;
//     eagerly 4 rounds, 0.01-0.03 ms); exit report: 20000 answered by graft,
//     0 issued for progress. Why: every query left to the driver resets the
//     global count (engine.cc:804, answers_in_a_row_ = 0), here the idle
//     stream's, so kAnswersInARow never trips, and every round's target is a
//     new event whose streak starts at 0 (per-target count and window never
//     reached). Any program that asks about a fresh event per step while it
//     asks about anything else in between never gets the driver's answer.
//     Fix: bound graft's answers per *held run or stream* (e.g. the streak on
//     the record's stream too), or reset answers_in_a_row_ only at a driver
//     success for a target graft had answered / a host wait, not at every
//     query left to the driver.
// feed-other-thread  thread T feeds S in 41-op rounds (record E mid-round)
//                    until thread Q, which never launches, has seen
//                    cuEventQuery(E) say CUDA_SUCCESS (Q polls: no op of its
//                    own between its queries). Passes.
//
// ---------------------------------------------------------------- host functions
// hostfn-flag        6 adds, cuLaunchHostFunc (sets a host flag), 6 adds; the
//                    host spins on the flag (no CUDA call), checks what the
//                    adds before wrote, synchronizes. -wait: the host function
//                    on S2 behind a wait on E recorded on S. -nosync: never
//                    synchronizes. -mid, -wait-mid: the last 6 adds issued only
//                    after the flag came. All pass (host functions are issued
//                    at their position, held work before them first).
// hostfn-gate-sync, -poll, -stream  a host function on A blocks until the host
//                    opens it (bounded 3 s); then adds on A, 3 adds on B and a
//                    record of F on B; the host waits for B's work
//                    (cuEventSynchronize(F) / polling cuEventQuery(F) /
//                    cuStreamSynchronize(B)), then opens it. B's work must not
//                    wait for A's host function. Pass. (The simulator runs a
//                    host function in whichever thread steps it; in the
//                    program's thread the gate stays open. A variant waiting
//                    on B's work through mapped memory deadlocks eagerly too:
//                    the simulator has one GPU thread.)
//
// ---------------------------------------------------------------- mapped-memory flags
// mapped-spin        6 adds on S, an add writing the step's number into pinned
//                    host memory (cuMemAllocHost), then the host spins on it
//                    (no CUDA call, 3 s bound) before it issues the step's last
//                    6 adds; the median wait must stay under 1 ms (eagerly
//                    0.06-0.14 ms). -memset: a cuMemsetD32Async writes the flag.
//                    -legacy / -pts: on the legacy / per-thread stream (NULL).
//                    -ctx2-legacy / -ctx2-memset: on the legacy stream of a
//                    second context (the idle flush issues them from a thread
//                    with no current context). With a cheap call in the spin:
//                    -ctxgetcurrent, -priority (cuStreamGetPriority), -flags
//                    (cuStreamGetFlags), -meminfo (cuMemGetInfo), -elapsed
//                    (cuEventElapsedTime of two old events), -oldquery
//                    (cuEventQuery of an old complete event), -idlequery
//                    (cuStreamQuery of an idle stream), -allocfree
//                    (cuMemAllocAsync + cuMemFreeAsync of 256 B).
//     All but -elapsed FAIL the 1 ms bound in every setting (DOCUMENTED: README
//     Limits, GRAFT_IDLE_FLUSH_MS): median 10.0-10.3 ms at the default 5 ms
//     (two idle-flush ticks, Engine::flushIfIdle :929, compares ops_total_
//     across ticks), 2.1 ms at 1 ms, 400 ms at 200 ms: ~100x eager at the
//     default. No value or code differs and no wait hangs, on any stream kind
//     or context. -elapsed passes (cuEventElapsedTime is a barrier). The
//     queries of old/idle targets do not count as polls (not in the current
//     boundary generation). -allocfree: median 15-20 ms (3.7 ms at 1 ms,
//     663 ms at 200 ms), half again the others: the spin's deferred frees and
//     lock traffic delay the flush further.
//
// ---------------------------------------------------------------- events, threads, syncs
// event-other-thread-sync, -poll  T: 5 adds, an add into mark, record E
//                    (BLOCKING_SYNC | DISABLE_TIMING), tells W, 5 more adds
//                    (held), then spins (no CUDA call) for W; W, which never
//                    launches, cuEventSynchronize(E) (or polls cuEventQuery(E))
//                    and reads mark. Pass.
// ring, ring-external  producer and consumer threads, 3 slots, events both
//                    ways, no synchronize: P polls Ec[slot], fills the slot
//                    (add, memset, adds), records Ep[slot] (-external:
//                    cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL)); C polls
//                    Ep[slot], checks the slot on the host, copies it on Sc,
//                    records Ec[slot]. Pass.
// sync-kinds         work on the legacy, a blocking, a non-blocking and the
//                    per-thread stream, then one of cuCtxSynchronize,
//                    cuStreamSynchronize(NULL / CU_STREAM_LEGACY / N /
//                    CU_STREAM_PER_THREAD), cuStreamSynchronize_ptsz(NULL),
//                    cuEventSynchronize(E), at random; the words that call
//                    promises are checked. Pass.
//
// ---------------------------------------------------------------- destroyed events
// query-destroyed    each step a new event E, recorded mid-step and destroyed
//                    while its record is held; on irregular steps
//                    cuEventQuery(E) of the destroyed handle. The driver:
//                    CUDA_ERROR_INVALID_HANDLE (400).
//     FAILS under graft in every setting: CUDA_SUCCESS (0). interpose.cc:1041
//     returns CUDA_SUCCESS for the destroy without calling the driver
//     (deferEventDestroy, engine.cc:860-871, defers it past the held record),
//     and engine.cc:861-863 erased event_records_ for it, so the query (:1001-1020)
//     is left to the driver, for which the event still exists (its held
//     record never reached it). Use after destroy, so low severity, but a
//     code the driver decides. Fix: remember deferred-destroy handles and
//     answer CUDA_ERROR_INVALID_HANDLE for queries of them (and for a second
//     destroy, below) until the deferred destroy ran.
// sync-destroyed     the same with cuEventSynchronize: passes (a barrier: the
//                    deferred destroy runs first).
// destroy-twice      the destroyed event destroyed again: the driver 400.
//     FAILS under graft: 0. deferEventDestroy finds the held record again
//     (:866-869) and defers a second destroy; both run at heldCleared
//     (:896-899), the second one's error unseen by the program.
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
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"
#include "sim_tagged_trace.h"

namespace {

using namespace simtest::modes;
using Clock = std::chrono::steady_clock;

simtest::Driver g_drv;
const simtest::DriverApi* g_cu = nullptr;
CUcontext g_a = nullptr;
CUfunction g_add = nullptr;
constexpr int kRounds = 200000;  // most rounds of a feeding loop (feed-new-event took up to 19145 under graft)
constexpr double kSpinLimitS = 3.0;  // longest host spin without CUDA calls

void add(CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s, const simtest::DriverApi* cu = nullptr) {
  SIM_CHECK(simtest::launchAdd(cu ? *cu : *g_cu, g_add, to, from, v, s));
}
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void fail(const char* what, int step) {
  if (g_wrong++ < 8) std::printf("%s: %s: step %d: %s\n", g_program, g_mode, step, what);
}

// Waits (no CUDA call) until *p >= want; false after kSpinLimitS. `secs` gets the wait.
bool spinFor(CUdeviceptr p, uint64_t want, double* secs = nullptr) {
  const auto t0 = Clock::now();
  while (peek(p) < want) {
    if (since(t0) > kSpinLimitS) {
      if (secs) *secs = since(t0);
      return false;
    }
  }
  if (secs) *secs = since(t0);
  return true;
}

// ============================================================== feeding loops
// A loop that waits for the GPU by asking, and issues the next round of work
// while the answer is "not ready": round = `pre` adds on S, [record E], the
// query, `post` adds on S. Eagerly the simulated GPU keeps up and the query
// says CUDA_SUCCESS within a few rounds.
enum class FeedTarget { Event, Stream };
void feedLoop(int steps, FeedTarget target, int pre, int post, bool splitByHostFn) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu);
  const CUstream S2 = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t want = 0, wantY = 0;
  int most = 0;
  double longest = 0;
  static std::atomic<uint64_t> hostCalls{0};
  auto hostFn = [](void*) { hostCalls.fetch_add(1); };
  uint64_t hostWant = 0;
  // Warm-up: the same rounds without the query (graft learns and builds
  // them), then a synchronize; the feeding loop's first step starts replayed.
  for (int k = 0; k < 16; ++k) {
    if (splitByHostFn) {
      for (int j = 0; j < 4; ++j) add(y, y, 1, S2);
      wantY += 4;
      SIM_CHECK(cu.cuLaunchHostFunc(S2, hostFn, nullptr));
      ++hostWant;
    }
    for (int j = 0; j < pre; ++j) add(x, x, 1, S);
    if (target == FeedTarget::Event) SIM_CHECK(cu.cuEventRecord(E, S));
    for (int j = 0; j < post; ++j) add(x, x, 1, S);
    if (splitByHostFn) {
      SIM_CHECK(cu.cuLaunchHostFunc(S2, hostFn, nullptr));
      ++hostWant;
    }
    want += uint64_t(pre + post);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  for (int i = 0; i < steps; ++i) {
    int rounds = 0;
    CUresult r = CUDA_ERROR_NOT_READY;
    const auto t0 = Clock::now();
    while (rounds < kRounds) {
      if (splitByHostFn) {  // a run on S2 and a host function: S's run is a held run of its own
        for (int k = 0; k < 4; ++k) add(y, y, 1, S2);
        wantY += 4;
        SIM_CHECK(cu.cuLaunchHostFunc(S2, hostFn, nullptr));
        ++hostWant;
      }
      for (int k = 0; k < pre; ++k) add(x, x, 1, S);
      if (target == FeedTarget::Event) SIM_CHECK(cu.cuEventRecord(E, S));
      r = target == FeedTarget::Event ? cu.cuEventQuery(E) : cu.cuStreamQuery(S);
      for (int k = 0; k < post; ++k) add(x, x, 1, S);
      if (splitByHostFn) {
        SIM_CHECK(cu.cuLaunchHostFunc(S2, hostFn, nullptr));
        ++hostWant;
      }
      want += uint64_t(pre + post);
      ++rounds;
      if (r != CUDA_ERROR_NOT_READY) break;
    }
    most = std::max(most, rounds);
    longest = std::max(longest, since(t0));
    expectCode(r, CUDA_SUCCESS,
               target == FeedTarget::Event
                   ? "the query of E (recorded just before it), asked once per round of work (200000 rounds)"
                   : "the query of S, asked once per round of work (200000 rounds)",
               i);
    if (r != CUDA_SUCCESS) break;  // a livelock: shown once
    if (i % 8 == 7) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(x), want, "S's adds", i);
      expectValue(peek(y), wantY, "S2's adds", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), want, "S's adds at the end", steps);
  expectValue(peek(y), wantY, "S2's adds at the end", steps);
  expectValue(hostCalls.load(), hostWant, "host functions run", steps);
  std::printf("%s: %s: at most %d rounds (%.3f ms) before CUDA_SUCCESS\n", g_program, g_mode, most, longest * 1e3);
}

// One host thread drives two contexts (device 0's and device 1's primary
// contexts, or device 0's and a second context on it) and waits until both
// legacy default streams are idle, feeding each a round of work between its
// queries: in each context two adds on NULL, cuStreamQuery(NULL), two adds.
// Eagerly both say CUDA_SUCCESS in one round within a few rounds.
void feedTwoContexts(int steps, bool device1) {
  const simtest::DriverApi& cu = *g_cu;
  CUcontext c1 = nullptr;
  if (device1) {
    CUdevice d1 = 0;
    if (cu.cuDeviceGet(&d1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&c1, d1) != CUDA_SUCCESS) std::exit(2);
  } else {
    decltype(&::cuCtxCreate_v4) create = nullptr;
    if (!simtest::lookupProc(g_drv, "cuCtxCreate", &create)) std::exit(2);
    SIM_CHECK(create(&c1, nullptr, 0, 0));
  }
  const CUcontext ctx[2] = {g_a, c1};
  CUdeviceptr x[2];
  for (int d = 0; d < 2; ++d) {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
    x[d] = simtest::zeroedBuffer(cu);
  }
  uint64_t want[2] = {0, 0};
  auto round = [&](bool ask, CUresult* r) {
    for (int d = 0; d < 2; ++d) {
      SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
      add(x[d], x[d], 1, nullptr);
      add(x[d], x[d], 1, nullptr);
      if (ask) r[d] = cu.cuStreamQuery(nullptr);
      add(x[d], x[d], 1, nullptr);
      add(x[d], x[d], 1, nullptr);
      want[d] += 4;
    }
  };
  CUresult r[2];
  for (int k = 0; k < 16; ++k) round(false, r);  // warm-up: graft learns the rounds
  for (int d = 0; d < 2; ++d) {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
    SIM_CHECK(cu.cuCtxSynchronize());
  }
  int most = 0;
  double longest = 0;
  for (int i = 0; i < steps; ++i) {
    int rounds = 0;
    const auto t0 = Clock::now();
    do {
      round(true, r);
      ++rounds;
    } while ((r[0] != CUDA_SUCCESS || r[1] != CUDA_SUCCESS) && r[0] <= CUDA_ERROR_NOT_READY &&
             r[1] <= CUDA_ERROR_NOT_READY && (r[0] == CUDA_ERROR_NOT_READY || r[0] == CUDA_SUCCESS) &&
             (r[1] == CUDA_ERROR_NOT_READY || r[1] == CUDA_SUCCESS) && rounds < kRounds);
    most = std::max(most, rounds);
    longest = std::max(longest, since(t0));
    expectCode(r[0], CUDA_SUCCESS, "context 0's legacy stream query, asked once per round (200000 rounds)", i);
    expectCode(r[1], CUDA_SUCCESS, "context 1's legacy stream query, asked once per round (200000 rounds)", i);
    if (r[0] != CUDA_SUCCESS || r[1] != CUDA_SUCCESS) break;
    if (i % 8 == 7)
      for (int d = 0; d < 2; ++d) {
        SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
        SIM_CHECK(cu.cuCtxSynchronize());
        expectValue(peek(x[d]), want[d], "a context's adds", i);
      }
  }
  for (int d = 0; d < 2; ++d) {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(x[d]), want[d], "a context's adds at the end", steps);
  }
  SIM_CHECK(cu.cuCtxSetCurrent(g_a));
  std::printf("%s: %s: at most %d rounds (%.3f ms) before CUDA_SUCCESS\n", g_program, g_mode, most, longest * 1e3);
}

// feed-two-devices with a thread per device: each thread, with its device's
// primary context current, feeds its legacy stream and asks about it (two
// adds, cuStreamQuery(NULL), two adds) until CUDA_SUCCESS, then synchronizes
// and checks; the threads run at the same time.
void feedTwoContextThreads(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  CUcontext c1 = nullptr;
  CUdevice d1 = 0;
  if (cu.cuDeviceGet(&d1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&c1, d1) != CUDA_SUCCESS) std::exit(2);
  const CUcontext ctx[2] = {g_a, c1};
  int most[2] = {0, 0};
  CUresult last[2] = {CUDA_SUCCESS, CUDA_SUCCESS};
  int failedAt[2] = {-1, -1};
  uint64_t got[2] = {0, 0}, want[2] = {0, 0};
  auto body = [&](int d) {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[d]));
    const CUdeviceptr x = simtest::zeroedBuffer(cu);
    for (int k = 0; k < 16; ++k)
      for (int j = 0; j < 4; ++j) add(x, x, 1, nullptr);
    want[d] += 64;
    SIM_CHECK(cu.cuCtxSynchronize());
    for (int i = 0; i < steps; ++i) {
      int rounds = 0;
      CUresult r;
      do {
        add(x, x, 1, nullptr);
        add(x, x, 1, nullptr);
        r = cu.cuStreamQuery(nullptr);
        add(x, x, 1, nullptr);
        add(x, x, 1, nullptr);
        want[d] += 4;
        ++rounds;
      } while (r == CUDA_ERROR_NOT_READY && rounds < kRounds);
      most[d] = std::max(most[d], rounds);
      last[d] = r;
      if (r != CUDA_SUCCESS) {
        failedAt[d] = i;
        break;
      }
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    got[d] = peek(x);
  };
  std::thread t1(body, 1);
  body(0);
  t1.join();
  for (int d = 0; d < 2; ++d) {
    expectCode(last[d], CUDA_SUCCESS, d ? "device 1's thread: its legacy stream's query (200000 rounds)"
                                        : "device 0's thread: its legacy stream's query (200000 rounds)",
               failedAt[d]);
    expectValue(got[d], want[d], "a device's adds at the end", steps);
  }
  std::printf("%s: %s: at most %d / %d rounds before CUDA_SUCCESS\n", g_program, g_mode, most[0], most[1]);
}

// As feedLoop (event), but every round records a new event, created for it
// (the previous one destroyed at once, its record perhaps still held), as
// PyTorch makes events per step: round = two adds, create E_r, record E_r,
// destroy E_{r-1}, query E_r, two adds.
void feedNewEvent(int steps, bool askIdle) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu);
  const CUstream idle = simtest::newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  CUevent prev = nullptr;
  auto round = [&](bool ask) {
    add(x, x, 1, S);
    add(x, x, 1, S);
    const CUevent e = simtest::newEvent(cu);
    SIM_CHECK(cu.cuEventRecord(e, S));
    if (prev) SIM_CHECK(cu.cuEventDestroy(prev));
    prev = e;
    const CUresult r = ask ? cu.cuEventQuery(e) : CUDA_ERROR_NOT_READY;
    if (ask && askIdle) expectCode(cu.cuStreamQuery(idle), CUDA_SUCCESS, "an idle stream's query", 0);
    add(x, x, 1, S);
    add(x, x, 1, S);
    want += 4;
    return r;
  };
  for (int k = 0; k < 16; ++k) round(false);
  SIM_CHECK(cu.cuCtxSynchronize());
  int most = 0;
  double longest = 0;
  for (int i = 0; i < steps; ++i) {
    int rounds = 0;
    CUresult r;
    const auto t0 = Clock::now();
    do {
      r = round(true);
      ++rounds;
    } while (r == CUDA_ERROR_NOT_READY && rounds < kRounds);
    most = std::max(most, rounds);
    longest = std::max(longest, since(t0));
    expectCode(r, CUDA_SUCCESS, "the query of the round's new event (200000 rounds)", i);
    if (r != CUDA_SUCCESS) break;
    if (i % 8 == 7) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(x), want, "S's adds", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), want, "S's adds at the end", steps);
  std::printf("%s: %s: at most %d rounds (%.3f ms) before CUDA_SUCCESS\n", g_program, g_mode, most, longest * 1e3);
}

// Two threads: T feeds S in rounds (as feedLoop) and stops when Q tells it;
// Q never launches: it asks about E (recorded by T mid-round) until
// CUDA_SUCCESS, then checks what T wrote before that record, then tells T.
void feedOtherThread(int steps, int pre, int post) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), atRecord = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    std::atomic<int> phase{0};  // 1: E recorded once; 2: Q done
    std::atomic<uint64_t> recorded{0};
    CUresult qr = CUDA_ERROR_NOT_READY;
    uint64_t seen = 0, seenWant = 0;
    std::thread q([&] {
      SIM_CHECK(cu.cuCtxSetCurrent(g_a));
      while (phase.load() < 1) std::this_thread::yield();
      const auto t0 = Clock::now();
      while ((qr = cu.cuEventQuery(E)) == CUDA_ERROR_NOT_READY && since(t0) < kSpinLimitS) {
      }
      seenWant = recorded.load();  // E's latest record when it said done: at least the first
      seen = peek(atRecord);
      phase.store(2);
    });
    int rounds = 0;
    while (phase.load() < 2 && rounds < 4 * kRounds) {
      for (int k = 0; k < pre; ++k) add(x, x, 1, S);
      add(atRecord, x, 0, S);
      SIM_CHECK(cu.cuEventRecord(E, S));
      want += uint64_t(pre);
      if (rounds == 0) {
        recorded.store(want);
        phase.store(1);
      }
      for (int k = 0; k < post; ++k) add(x, x, 1, S);
      want += uint64_t(post);
      ++rounds;
    }
    if (phase.load() < 2) phase.store(1);
    q.join();
    expectCode(qr, CUDA_SUCCESS, "Q's poll of E while T feeds S (3 s)", i);
    if (seen < seenWant) expectValue(seen, seenWant, "what T wrote before E's first record, once E said done", i);
    if (qr != CUDA_SUCCESS) break;
    SIM_CHECK(cu.cuStreamSynchronize(S));
    expectValue(peek(x), want, "S's adds", i);
  }
}

// ============================================================== host functions
std::atomic<uint64_t> g_hostFlag{0};
void setHostFlag(void* v) { g_hostFlag.store(reinterpret_cast<uint64_t>(v)); }

// Step: adds on S, a host function setting a host flag to the step's number,
// adds on S (or, -wait: the host function on S2 behind a wait on E recorded
// on S after the adds). The host then waits for the flag without any CUDA
// call; -nosync: never synchronizes (values checked at the end).
void hostFnFlag(int steps, bool viaWait, bool noSync, bool midStep) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu), S2 = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  double worst = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t tag = uint64_t(i) + 1;
    for (int k = 0; k < 6; ++k) add(x, x, 1, S);
    add(y, x, 0, S);
    want += 6;
    if (viaWait) {
      SIM_CHECK(cu.cuEventRecord(E, S));
      SIM_CHECK(cu.cuStreamWaitEvent(S2, E, 0));
      SIM_CHECK(cu.cuLaunchHostFunc(S2, setHostFlag, reinterpret_cast<void*>(tag)));
    } else {
      SIM_CHECK(cu.cuLaunchHostFunc(S, setHostFlag, reinterpret_cast<void*>(tag)));
    }
    if (!midStep)
      for (int k = 0; k < 6; ++k) add(x, x, 1, S);
    const auto t0 = Clock::now();
    while (g_hostFlag.load() < tag && since(t0) < kSpinLimitS) {
    }
    worst = std::max(worst, since(t0));
    if (g_hostFlag.load() < tag) {
      fail("the host function's flag never came (3 s)", i);
      break;
    }
    // What the work before the host function wrote is there.
    expectValue(peek(y), want, "y, written before the host function ran", i);
    if (midStep)
      for (int k = 0; k < 6; ++k) add(x, x, 1, S);
    want += 6;
    if (!noSync) {
      SIM_CHECK(cu.cuStreamSynchronize(S));
      expectValue(peek(x), want, "S's adds", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), want, "S's adds at the end", steps);
  std::printf("%s: %s: longest wait for a host function's flag %.3f ms\n", g_program, g_mode, worst * 1e3);
}

// ============================================================== mapped-memory flags
// Step: `pre` adds on S, an add writing the step's number into a flag in
// pinned host memory (cuMemAllocHost), then the host waits for it without
// any CUDA call (or, by `spin`, calling a cheap function each round), and only
// then issues the rest of the step (`post` adds). The wait is timed.
using SpinCall = void (*)();
CUstream g_spinStream = nullptr;
CUevent g_oldA = nullptr, g_oldB = nullptr;
decltype(&::cuStreamGetPriority) g_getPriority = nullptr;
decltype(&::cuMemGetInfo_v2) g_memGetInfo = nullptr;
void spinNone() {}
void spinCtxGetCurrent() {
  CUcontext c = nullptr;
  SIM_CHECK(g_cu->cuCtxGetCurrent(&c));
}
void spinPriority() {
  int p = 0;
  SIM_CHECK(g_getPriority(g_spinStream, &p));
}
void spinFlags() {
  unsigned f = 0;
  SIM_CHECK(g_cu->cuStreamGetFlags(g_spinStream, &f));
}
void spinMemInfo() {
  size_t a = 0, b = 0;
  SIM_CHECK(g_memGetInfo(&a, &b));
}
void spinElapsed() {
  float ms = 0;
  SIM_CHECK(g_cu->cuEventElapsedTime(&ms, g_oldA, g_oldB));
}
void spinOldEventQuery() { SIM_CHECK(g_cu->cuEventQuery(g_oldB)); }
void spinIdleStreamQuery() { SIM_CHECK(g_cu->cuStreamQuery(g_spinStream)); }
void spinAllocFree() {
  CUdeviceptr p = 0;
  SIM_CHECK(g_cu->cuMemAllocAsync(&p, 256, g_spinStream));
  SIM_CHECK(g_cu->cuMemFreeAsync(p, g_spinStream));
}

enum class Where { Created, Legacy, PerThread, OtherContextLegacy };
void mappedFlag(int steps, Where where, SpinCall spin, bool memsetFlag, double limitMs) {
  const simtest::DriverApi& cu = where == Where::PerThread ? g_drv.perThread : *g_cu;
  CUcontext ctx2 = nullptr;
  if (where == Where::OtherContextLegacy) {
    decltype(&::cuCtxCreate_v4) create = nullptr;
    if (!simtest::lookupProc(g_drv, "cuCtxCreate", &create)) std::exit(2);
    SIM_CHECK(create(&ctx2, nullptr, 0, 0));  // current now
  }
  const CUstream S = where == Where::Created ? simtest::newStream(cu) : nullptr;  // NULL: legacy / per-thread
  g_spinStream = simtest::newStream(cu);
  g_oldA = simtest::newEvent(cu, 0);
  g_oldB = simtest::newEvent(cu, 0);
  SIM_CHECK(cu.cuEventRecord(g_oldA, g_spinStream));
  SIM_CHECK(cu.cuEventRecord(g_oldB, g_spinStream));
  SIM_CHECK(cu.cuStreamSynchronize(g_spinStream));
  void* host = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&host, 64));
  std::memset(host, 0, 64);
  const CUdeviceptr flag = reinterpret_cast<CUdeviceptr>(host);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), one = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  std::vector<double> waits;
  for (int i = 0; i < steps; ++i) {
    const uint64_t tag = uint64_t(i) + 1;
    for (int k = 0; k < 6; ++k) add(x, x, 1, S, &cu);
    want += 6;
    if (memsetFlag) SIM_CHECK(cu.cuMemsetD32Async(flag, unsigned(tag), 1, S));
    else add(flag, one, tag, S, &cu);  // *flag = 0 + tag
    const auto t0 = Clock::now();
    while (uint32_t(peek(flag)) < uint32_t(tag) && since(t0) < kSpinLimitS) spin();
    waits.push_back(since(t0));
    if (uint32_t(peek(flag)) < uint32_t(tag)) {
      fail("the flag written by the step's kernel never came (3 s)", i);
      break;
    }
    expectValue(peek(x), want, "x, written before the flag", i);
    for (int k = 0; k < 6; ++k) add(x, x, 1, S, &cu);
    want += 6;
    if (i % 10 == 9) {
      SIM_CHECK(cu.cuStreamSynchronize(S));
      expectValue(peek(x), want, "x after the stream's synchronize", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), want, "x at the end", steps);
  std::sort(waits.begin(), waits.end());
  const double median = waits.empty() ? 0 : waits[waits.size() / 2] * 1e3,
               worst = waits.empty() ? 0 : waits.back() * 1e3;
  std::printf("%s: %s: wait for the flag: median %.3f ms, longest %.3f ms (%zu steps)\n", g_program, g_mode, median,
              worst, waits.size());
  if (limitMs > 0 && median > limitMs) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "the median wait for a flag the GPU writes is %.3f ms, over %.1f ms (eagerly 0.06-0.18 ms)", median,
                  limitMs);
    fail(line, steps);
  }
  if (ctx2) SIM_CHECK(cu.cuCtxSetCurrent(g_a));
}

// ============================================================== events across threads
// T issues: adds on S, an add into `mark`, a record of E, then tells W and
// issues more adds (held), then waits (no CUDA call) for W. W waits for E
// (cuEventSynchronize, or polling cuEventQuery), then reads `mark`.
void eventOtherThread(int steps, bool poll) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), mark = simtest::zeroedBuffer(cu);
  std::atomic<int> turn{0};
  std::atomic<bool> stop{false};
  std::vector<uint64_t> seen(steps), codes(steps);
  std::thread w([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(g_a));
    for (int i = 0; i < steps; ++i) {
      while (turn.load() != 2 * i + 1 && !stop.load()) std::this_thread::yield();
      if (stop.load()) return;
      CUresult r;
      if (poll) {
        const auto t0 = Clock::now();
        while ((r = cu.cuEventQuery(E)) == CUDA_ERROR_NOT_READY && since(t0) < kSpinLimitS) {
        }
      } else {
        r = cu.cuEventSynchronize(E);
      }
      codes[i] = uint64_t(r);
      seen[i] = peek(mark);
      turn.store(2 * i + 2);
    }
  });
  uint64_t want = 0;
  int i = 0;
  for (; i < steps; ++i) {
    for (int k = 0; k < 5; ++k) add(x, x, 1, S);
    want += 5;
    add(mark, x, 0, S);
    SIM_CHECK(cu.cuEventRecord(E, S));
    turn.store(2 * i + 1);
    for (int k = 0; k < 5; ++k) add(x, x, 1, S);
    want += 5;
    const auto t0 = Clock::now();
    while (turn.load() != 2 * i + 2 && since(t0) < kSpinLimitS) {
    }
    if (turn.load() != 2 * i + 2) {
      fail("the other thread's wait for E never ended (3 s)", i);
      stop.store(true);
      break;
    }
    expectCode(CUresult(codes[i]), CUDA_SUCCESS, poll ? "the other thread's poll of E" : "cuEventSynchronize(E) there", i);
    expectValue(seen[i], want - 5, "mark, written before E's record, once the other thread saw E done", i);
    if (i % 10 == 9) {
      SIM_CHECK(cu.cuStreamSynchronize(S));
      expectValue(peek(x), want, "x", i);
    }
  }
  w.join();
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), want, "x at the end", i);
}

// Producer P and consumer C in two threads, a ring of K slots and two events
// per slot, no synchronize: P waits (polling) for C's event of the slot's
// last use, fills the slot (adds on Sp) and records Ep[slot]; C polls
// Ep[slot], checks the slot's value on the host (it must be there once the
// event said done), copies it on Sc (adds) into out[slot] and records
// Ec[slot]. Each poll is bounded (3 s).
void ring(int steps, bool recordExternal) {
  const simtest::DriverApi& cu = *g_cu;
  constexpr int K = 3;
  const CUstream Sp = simtest::newStream(cu), Sc = simtest::newStream(cu);
  CUevent Ep[K], Ec[K];
  CUdeviceptr slot[K], out[K];
  for (int k = 0; k < K; ++k) {
    Ep[k] = simtest::newEvent(cu, k == 1 ? CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING : CU_EVENT_DISABLE_TIMING);
    Ec[k] = simtest::newEvent(cu);
    slot[k] = simtest::zeroedBuffer(cu);
    out[k] = simtest::zeroedBuffer(cu);
  }
  std::atomic<int> produced{0}, consumed{0};
  std::atomic<bool> stop{false};
  std::atomic<int> badStep{-1};
  std::atomic<uint64_t> badSeen{0}, badWant{0};
  std::atomic<int> timeoutAt{-1};
  auto pollEvent = [&](CUevent e) {
    const auto t0 = Clock::now();
    CUresult r;
    while ((r = cu.cuEventQuery(e)) == CUDA_ERROR_NOT_READY && since(t0) < kSpinLimitS && !stop.load()) {
    }
    return r;
  };
  std::thread c([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(g_a));
    for (int i = 0; i < steps && !stop.load(); ++i) {
      const int k = i % K;
      while (produced.load() <= i && !stop.load()) std::this_thread::yield();
      if (pollEvent(Ep[k]) != CUDA_SUCCESS) {
        if (!stop.exchange(true)) timeoutAt.store(i);
        return;
      }
      const uint64_t wantSlot = uint64_t(i) * 7 + 6;
      if (peek(slot[k]) != wantSlot && badStep.load() < 0) {
        badSeen.store(peek(slot[k]));
        badWant.store(wantSlot);
        badStep.store(i);
      }
      for (int a = 0; a < 3; ++a) add(out[k], a ? out[k] : slot[k], 1, Sc);
      SIM_CHECK(cu.cuEventRecord(Ec[k], Sc));
      consumed.store(i + 1);
    }
  });
  SIM_CHECK(cu.cuCtxSetCurrent(g_a));
  for (int i = 0; i < steps && !stop.load(); ++i) {
    const int k = i % K;
    if (i >= K) {
      while (consumed.load() <= i - K && !stop.load()) std::this_thread::yield();
      if (pollEvent(Ec[k]) != CUDA_SUCCESS) {
        if (!stop.exchange(true)) timeoutAt.store(i);
        break;
      }
      // out[k] of use i-K is complete: check it.
      const uint64_t wantOut = uint64_t(i - K) * 7 + 6 + 3;
      if (peek(out[k]) != wantOut && badStep.load() < 0) {
        badSeen.store(peek(out[k]));
        badWant.store(wantOut);
        badStep.store(i);
      }
    }
    SIM_CHECK(simtest::launchAdd(cu, g_add, slot[k], out[k], 0, Sp));  // slot = out (any), then overwritten:
    SIM_CHECK(cu.cuMemsetD32Async(slot[k], 0, 2, Sp));
    add(slot[k], slot[k], uint64_t(i) * 7, Sp);
    for (int a = 0; a < 6; ++a) add(slot[k], slot[k], 1, Sp);
    if (recordExternal) SIM_CHECK(cu.cuEventRecordWithFlags(Ep[k], Sp, CU_EVENT_RECORD_EXTERNAL));
    else SIM_CHECK(cu.cuEventRecord(Ep[k], Sp));
    produced.store(i + 1);
  }
  c.join();
  if (timeoutAt.load() >= 0) fail("a poll of the ring's events never said done (3 s)", timeoutAt.load());
  if (badStep.load() >= 0) expectValue(badSeen.load(), badWant.load(), "a slot once its event said done", badStep.load());
  SIM_CHECK(cu.cuCtxSynchronize());
}

// ============================================================== synchronize kinds
// Step: x += 1 on the legacy stream, b += 1 on a blocking stream B, n += 1 on
// a non-blocking stream N (record E after), p += 1 on the per-thread stream,
// four adds each; then one of cuCtxSynchronize, cuStreamSynchronize(NULL),
// cuStreamSynchronize(CU_STREAM_LEGACY), cuStreamSynchronize(N),
// cuStreamSynchronize(CU_STREAM_PER_THREAD), cuStreamSynchronize_ptsz(NULL),
// cuEventSynchronize(E), picked at random per step, and the words that call
// promises are checked.
void syncKinds(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const simtest::DriverApi& pt = g_drv.perThread;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT), N = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu), n = simtest::zeroedBuffer(cu),
                    p = simtest::zeroedBuffer(cu);
  uint64_t w = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 4; ++k) {
      add(n, n, 1, N);
      add(b, b, 1, B);
      add(x, x, 1, nullptr);
      add(p, p, 1, CU_STREAM_PER_THREAD);
    }
    SIM_CHECK(cu.cuEventRecord(E, N));
    w += 4;
    const int kind = i < 12 ? 0 : int(simMix64(uint64_t(i) * 977) % 7);
    switch (kind) {
      case 0:
        SIM_CHECK(cu.cuCtxSynchronize());
        expectValue(peek(x) + peek(b) + peek(n) + peek(p), 4 * w, "all four after cuCtxSynchronize", i);
        break;
      case 1:
        SIM_CHECK(cu.cuStreamSynchronize(nullptr));
        expectValue(peek(x), w, "x after cuStreamSynchronize(NULL)", i);
        break;
      case 2:
        SIM_CHECK(cu.cuStreamSynchronize(CU_STREAM_LEGACY));
        expectValue(peek(x), w, "x after cuStreamSynchronize(CU_STREAM_LEGACY)", i);
        break;
      case 3:
        SIM_CHECK(cu.cuStreamSynchronize(N));
        expectValue(peek(n), w, "n after cuStreamSynchronize(N)", i);
        break;
      case 4:
        SIM_CHECK(cu.cuStreamSynchronize(CU_STREAM_PER_THREAD));
        expectValue(peek(p), w, "p after cuStreamSynchronize(CU_STREAM_PER_THREAD)", i);
        break;
      case 5:
        SIM_CHECK(pt.cuStreamSynchronize(nullptr));
        expectValue(peek(p), w, "p after cuStreamSynchronize_ptsz(NULL)", i);
        break;
      case 6:
        SIM_CHECK(cu.cuEventSynchronize(E));
        expectValue(peek(n), w, "n after cuEventSynchronize(E)", i);
        break;
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x) + peek(b) + peek(n) + peek(p), 4 * w, "all four at the end", steps);
}

// ============================================================== a destroyed event's query
// Step: adds on S, record E (a fresh event), adds; on irregular steps E is
// destroyed while its record is held, then cuEventQuery(E) and
// cuEventSynchronize(E) are asked about the destroyed handle (before any
// other event is created). The driver: CUDA_ERROR_INVALID_HANDLE for both.
void queryDestroyed(int steps, bool sync) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const CUevent E = simtest::newEvent(cu);
    for (int k = 0; k < 4; ++k) add(x, x, 1, S);
    SIM_CHECK(cu.cuEventRecord(E, S));
    for (int k = 0; k < 4; ++k) add(x, x, 1, S);
    want += 8;
    SIM_CHECK(cu.cuEventDestroy(E));
    if (irregularStep(i, 11, 8, 3)) {
      ++g_provoked;
      if (sync) expectCode(cu.cuEventSynchronize(E), CUDA_ERROR_INVALID_HANDLE, "cuEventSynchronize of a destroyed event", i);
      else expectCode(cu.cuEventQuery(E), CUDA_ERROR_INVALID_HANDLE, "cuEventQuery of a destroyed event", i);
    }
    for (int k = 0; k < 4; ++k) add(x, x, 1, S);
    want += 4;
    if (i % 5 == 4) {
      SIM_CHECK(cu.cuStreamSynchronize(S));
      expectValue(peek(x), want, "x", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), want, "x at the end", steps);
}

// ============================================================== a host function as a gate
// Step: k0 on A; a host function on A that blocks until the host opens it
// (a bounded spin, 3 s); then k2 on A, three adds on B writing w, a record of
// F on B, k3 on A. The host waits for B's work (cuEventSynchronize(F),
// polling cuEventQuery(F), cuStreamSynchronize(B), or spinning on w without
// any CUDA call), then opens the host function, then synchronizes A. Eagerly
// B's work never waits for A's host function.
std::atomic<uint64_t> g_hostGate{0};
std::atomic<int> g_gateTimeouts{0};
std::thread::id g_mainThread;
void hostGate(void* v) {
  const uint64_t want = reinterpret_cast<uint64_t>(v);
  // The simulator runs host functions in whichever thread makes it progress:
  // in the program's own thread (inside one of its driver calls) the gate
  // cannot wait for that thread, and stays open.
  if (std::this_thread::get_id() == g_mainThread) return;
  const auto t0 = Clock::now();
  while (g_hostGate.load() < want) {
    if (since(t0) > kSpinLimitS) {
      g_gateTimeouts.fetch_add(1);
      return;
    }
  }
}
enum class GateWait { EventSync, EventPoll, StreamSync };
void hostFnGate(int steps, GateWait how) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream A = simtest::newStream(cu), B = simtest::newStream(cu);
  const CUevent F = simtest::newEvent(cu);
  const CUdeviceptr a = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t wantA = 0, wantW = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t tag = uint64_t(i) + 1;
    add(a, a, 1, A);
    SIM_CHECK(cu.cuLaunchHostFunc(A, hostGate, reinterpret_cast<void*>(tag)));
    add(a, a, 1, A);
    for (int k = 0; k < 3; ++k) add(w, w, 1, B);
    SIM_CHECK(cu.cuEventRecord(F, B));
    add(a, a, 1, A);
    wantA += 3;
    wantW += 3;
    const auto t0 = Clock::now();
    CUresult r = CUDA_SUCCESS;
    switch (how) {
      case GateWait::EventSync: r = cu.cuEventSynchronize(F); break;
      case GateWait::StreamSync: r = cu.cuStreamSynchronize(B); break;
      case GateWait::EventPoll:
        while ((r = cu.cuEventQuery(F)) == CUDA_ERROR_NOT_READY && since(t0) < kSpinLimitS) {
        }
        break;
    }
    const double waited = since(t0);
    expectCode(r, CUDA_SUCCESS, "the wait for B's work", i);
    expectValue(peek(w), wantW, "w once the wait for B's work ended", i);
    g_hostGate.store(tag);
    if (waited > 1.0) {
      fail("the wait for B's work ended only once A's host function gave up (B's work waited for it)", i);
      break;
    }
    SIM_CHECK(cu.cuStreamSynchronize(A));
    expectValue(peek(a), wantA, "A's adds", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  if (g_gateTimeouts.load()) fail("a host function gave up waiting for the host (3 s)", steps);
}

// ============================================================== a destroyed event destroyed again
// As query-destroyed, but on irregular steps the destroyed event is
// destroyed again: the driver answers CUDA_ERROR_INVALID_HANDLE.
void destroyTwice(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const CUevent E = simtest::newEvent(cu);
    for (int k = 0; k < 4; ++k) add(x, x, 1, S);
    SIM_CHECK(cu.cuEventRecord(E, S));
    for (int k = 0; k < 4; ++k) add(x, x, 1, S);
    want += 8;
    SIM_CHECK(cu.cuEventDestroy(E));
    if (irregularStep(i, 13, 8, 3)) {
      ++g_provoked;
      expectCode(cu.cuEventDestroy(E), CUDA_ERROR_INVALID_HANDLE, "a second cuEventDestroy of an event", i);
    }
    for (int k = 0; k < 4; ++k) add(x, x, 1, S);
    want += 4;
    if (i % 5 == 4) {
      SIM_CHECK(cu.cuStreamSynchronize(S));
      expectValue(peek(x), want, "x", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), want, "x at the end", steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review14_waits", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  // Modes where the host waits without a CUDA call need the simulated GPU to
  // run on its own (eagerly too).
  const bool needsAsync = mode.rfind("hostfn-", 0) == 0 || mode.rfind("mapped-", 0) == 0 ||
                          mode.rfind("event-other-thread", 0) == 0 || mode == "feed-other-thread";
  if (needsAsync) {
    const char* a = std::getenv("SIM_ASYNC_US");
    if (!a || std::atoi(a) == 0) setenv("SIM_ASYNC_US", "20", 1);
  }
  g_mainThread = std::this_thread::get_id();
  if (int rc = simtest::startProgram("sim_review14_waits", &g_drv, &g_a)) return rc;
  g_cu = &g_drv.plain;
  g_add = simtest::libraryKernel3("sim_add_review14w");
  if (!simtest::lookupProc(g_drv, "cuStreamGetPriority", &g_getPriority)) return 2;
  if (!simtest::lookupProc(g_drv, "cuMemGetInfo", &g_memGetInfo)) return 2;
  const double limitMs = 1.0;  // eagerly the median wait is 0.06-0.18 ms (SIM_ASYNC_US 3-50, 20 when unset)
  if (mode == "feed-event") feedLoop(steps, FeedTarget::Event, 2, 2, false);
  else if (mode == "feed-stream") feedLoop(steps, FeedTarget::Stream, 2, 2, false);
  else if (mode == "feed-event-long") feedLoop(steps, FeedTarget::Event, 20, 20, false);
  else if (mode == "feed-stream-long") feedLoop(steps, FeedTarget::Stream, 20, 20, false);
  else if (mode == "feed-event-hostfn") feedLoop(steps, FeedTarget::Event, 2, 2, true);
  else if (mode == "feed-stream-hostfn") feedLoop(steps, FeedTarget::Stream, 2, 2, true);
  else if (mode == "feed-other-thread") feedOtherThread(steps, 20, 20);
  else if (mode == "feed-two-devices") feedTwoContexts(steps, true);
  else if (mode == "feed-two-contexts") feedTwoContexts(steps, false);
  else if (mode == "feed-new-event") feedNewEvent(steps, false);
  else if (mode == "feed-new-event-idle") feedNewEvent(steps, true);
  else if (mode == "feed-two-devices-threads") feedTwoContextThreads(steps);
  else if (mode == "hostfn-flag") hostFnFlag(steps, false, false, false);
  else if (mode == "hostfn-flag-wait") hostFnFlag(steps, true, false, false);
  else if (mode == "hostfn-flag-nosync") hostFnFlag(steps, false, true, false);
  else if (mode == "hostfn-flag-mid") hostFnFlag(steps, false, true, true);
  else if (mode == "hostfn-flag-wait-mid") hostFnFlag(steps, true, true, true);
  else if (mode == "mapped-spin") mappedFlag(steps, Where::Created, spinNone, false, limitMs);
  else if (mode == "mapped-spin-memset") mappedFlag(steps, Where::Created, spinNone, true, limitMs);
  else if (mode == "mapped-spin-legacy") mappedFlag(steps, Where::Legacy, spinNone, false, limitMs);
  else if (mode == "mapped-spin-pts") mappedFlag(steps, Where::PerThread, spinNone, false, limitMs);
  else if (mode == "mapped-spin-ctx2-legacy") mappedFlag(steps, Where::OtherContextLegacy, spinNone, false, limitMs);
  else if (mode == "mapped-spin-ctx2-memset") mappedFlag(steps, Where::OtherContextLegacy, spinNone, true, limitMs);
  else if (mode == "mapped-spin-ctxgetcurrent") mappedFlag(steps, Where::Created, spinCtxGetCurrent, false, limitMs);
  else if (mode == "mapped-spin-priority") mappedFlag(steps, Where::Created, spinPriority, false, limitMs);
  else if (mode == "mapped-spin-flags") mappedFlag(steps, Where::Created, spinFlags, false, limitMs);
  else if (mode == "mapped-spin-meminfo") mappedFlag(steps, Where::Created, spinMemInfo, false, limitMs);
  else if (mode == "mapped-spin-elapsed") mappedFlag(steps, Where::Created, spinElapsed, false, limitMs);
  else if (mode == "mapped-spin-oldquery") mappedFlag(steps, Where::Created, spinOldEventQuery, false, limitMs);
  else if (mode == "mapped-spin-idlequery") mappedFlag(steps, Where::Created, spinIdleStreamQuery, false, limitMs);
  else if (mode == "mapped-spin-allocfree") mappedFlag(steps, Where::Created, spinAllocFree, false, limitMs);
  else if (mode == "event-other-thread-sync") eventOtherThread(steps, false);
  else if (mode == "event-other-thread-poll") eventOtherThread(steps, true);
  else if (mode == "ring") ring(steps, false);
  else if (mode == "ring-external") ring(steps, true);
  else if (mode == "sync-kinds") syncKinds(steps);
  else if (mode == "query-destroyed") queryDestroyed(steps, false);
  else if (mode == "sync-destroyed") queryDestroyed(steps, true);
  else if (mode == "destroy-twice") destroyTwice(steps);
  else if (mode == "hostfn-gate-sync") hostFnGate(steps, GateWait::EventSync);
  else if (mode == "hostfn-gate-poll") hostFnGate(steps, GateWait::EventPoll);
  else if (mode == "hostfn-gate-stream") hostFnGate(steps, GateWait::StreamSync);
  else {
    std::printf("usage: sim_review14_waits --mode MODE [--steps N] [--expect-graphs] (modes: see the header)\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
