// sim_review14_streaks (helper-written): red-team round 14 of the first form
// of the rule that lets a feeding loop progress (7bfe7e8): graft's own
// CUDA_ERROR_NOT_READY answers for queries of held work (core::NotReadyStreak;
// Engine::query, Engine::queryCompleted in src/core/engine.cc; the Query and
// SYNC branches of src/hook/interpose.cc).
//
// STATUS (the session that wrote 7bfe7e8, after this review): every mode
// passes under graft. The first rule (answers in three held runs in a row,
// every host barrier ending the streak) livelocked in the modes marked FAILS
// below, for the reasons given there (line numbers of 7bfe7e8). The rule now
// counts graft's answers per target until the driver's CUDA_SUCCESS for it
// (kAnswersPerTarget), bounds their age since the host last waited
// (kAnswerWindowNs: and-two-streams), counts answers in a row over all
// targets (kAnswersInARow: a target created again), keeps a default stream's
// count per context, and ends driver mode only at real waits
// (cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize). Still graft's
// cost, not a divergence: stream-recreate graphs nothing (each destroy
// flushes a run shorter than the learned piece), and once-per-step-event/
// -stream, asked once per step and never seen complete by a query, become a
// boundary after kAnswersPerTarget steps.
//
//   sim_review14_streaks --mode M [--steps N] [--expect-graphs]
//   build: /tmp/snap/build_review.sh sim_review14_streaks.cc r14s
//   run:   /tmp/snap/run.sh eager|graft ./r14s --mode M [--steps 30]
//   (SIM_ASYNC_US=3 recommended: the simulated GPU then also runs on its own,
//   so a NOT_READY that comes from the DRIVER under graft, which issues fewer
//   driver calls than eager and so drives the simulated GPU less, cannot pass
//   for graft's own answer; the report's queries_answered_not_ready and
//   queries_issued_for_progress (GRAFT_STATS=file.json) tell which it was.)
//
// Every waiting loop ("wait") is bounded: 200000 rounds or 5 s, then the
// query's last code is compared with CUDA_SUCCESS (a livelock shows as
// "returned 600, the driver returns 0"). Eagerly the simulated driver's
// queries run 1..SIM_STEPS items each, so every wait here ends within a few
// rounds; graft may answer CUDA_ERROR_NOT_READY for held work any number of
// times, but not for ever. Before each wait, 8 warm-up rounds of the same
// shape (their query's code only checked to be SUCCESS or NOT_READY) let
// graft learn the round. Values: every add is counted on the host and the
// sums are read after a final cuCtxSynchronize.
// T = a non-blocking stream, U = another, idle, non-blocking stream.
//
// Modes (rounds of the wait loop; "a | query | b": a adds on T, the query, b
// more adds when it answered NOT_READY):
//
// barrier-stream-sync  cuStreamSynchronize(U) (idle, unrelated), then 2 | T's
//                      query | 3. The driver waits for nothing here.
//                      FAILS under graft (every configuration tried but
//                      GRAFT_MIN_SEGMENT_OPS=16; livelock, 20000 rounds, answers
//                      graft's own: queries_answered_not_ready 20002,
//                      queries_issued_for_progress 0). Each round's barrier
//                      runs Engine::hostBarrier, which bumps streak_epoch_
//                      (engine.cc:660-663) and flushes what is held
//                      (engine.cc:666); the 2 adds issued after it are held
//                      again (the round is a 5-op segment between recurring
//                      barriers) and the query finds them: engine.cc:776
//                      resets the streak (epoch differs), :779 starts it at
//                      runs = 1, :783 forProgress false, :787 NOT_READY.
//                      The streak can never pass 1, so the loop r14 meant to
//                      fix still livelocks whenever the feeding loop also
//                      calls anything graft classes as a barrier. The
//                      barrier says nothing about T (it neither waited for
//                      T nor saw graft's held work complete).
//                      Fix: end a streak at a barrier only for targets the
//                      barrier waited for (its stream / event / context), and
//                      add a backstop that does not reset at barriers (see
//                      DIAGNOSES at the end of this comment).
// barrier-event-sync   the same with cuEventSynchronize of an event recorded
//                      on U long ago (complete).
//                      FAILS under graft: as barrier-stream-sync.
// barrier-get-limit    the same with cuCtxGetLimit(CU_LIMIT_STACK_SIZE): the
//                      driver does not wait at all; graft takes it for a
//                      barrier (driver_api.def:128, Barrier SYNC;
//                      interpose.cc:934-937 calls hostBarrier for every SYNC
//                      trait).
//                      FAILS under graft: as barrier-stream-sync.
// barrier-pool-attr    cuMemPoolGetAttribute(USED_MEM_CURRENT) (a memory
//                      statistics read, as PyTorch's cudaMallocAsync backend
//                      makes; driver_api.def:113).
//                      FAILS under graft: as barrier-stream-sync.
// barrier-elapsed      cuEventElapsedTime of two completed events on U (a
//                      profiler reading earlier timings; driver_api.def:106).
//                      FAILS under graft: as barrier-stream-sync.
// barrier-htod         a synchronous cuMemcpyHtoD of 8 bytes into another
//                      buffer (uploading the next input; SYNC copy).
//                      FAILS under graft: as barrier-stream-sync.
// barrier-other-thread cuStreamSynchronize of its own idle stream by a SECOND
//                      thread, in lock-step before each round's adds (a
//                      loader thread's sync ends the main thread's streak:
//                      streak_epoch_ is engine-wide).
//                      FAILS under graft: as barrier-stream-sync.
// barrier-ctx-sync     cuCtxSynchronize, then 2 | T's query | 3. The barrier
//                      covers T; on a real GPU the eager answer two launches
//                      after a sync is timing-dependent (tiny kernels may be
//                      done), graft's is NOT_READY every time.
//                      FAILS under graft: as barrier-stream-sync (here even
//                      a barrier-covers-target rule would not help: only a
//                      backstop that outlives barriers does).
// many-ops             no barrier: 40 | T's query | 60 (a loop that issues a
//                      step's worth of work between two queries of the stream
//                      it feeds).
//                      FAILS under graft (every configuration; all answers
//                      graft's own, queries_issued_for_progress 0). The
//                      adds are identical, graft graphs them in 32-op pieces
//                      (report: 1 graph, ~62000 replays); 100 ops between
//                      two queries end and start 3-4 held runs, so
//                      held_runs_ (engine.cc:359) grows by >= 2 between
//                      answers and engine.cc:779 (`streak->run + 1 ==
//                      held_runs_ ? runs + 1 : 1`) restarts the streak at 1
//                      every time; the query always lands in a partial piece
//                      (T's latest adds held), so :787 answers NOT_READY for
//                      ever. Threshold: ~32 ops a round passes (few-ops),
//                      40 sometimes, >= 70 never. With automatic pieces (32,
//                      64, ... 1024) any loop that issues more than two
//                      pieces between its queries is never helped.
// many-ops-event       40 adds, a record of E on T, 1 add | E's query | 60.
//                      FAILS under graft: as many-ops (E's latest record is
//                      in the partial piece at every query); passes with
//                      GRAFT_SEGMENT_OPS=4 or 1024 (the record's piece is
//                      complete before the query).
// two-contexts-legacy  contexts A (primary) and C (cuCtxCreate, idle): each
//                      round C is made current and its legacy stream asked
//                      (CUDA_SUCCESS: C has no work), then A: 1 add on A's
//                      blocking stream B | A's legacy query (NULL) | 1 add on
//                      A's non-blocking stream N (an op between A's query and
//                      the next round's C query, so no poll is seen).
//                      FAILS under graft (every configuration with held
//                      rounds; all answers graft's own). C's CUDA_SUCCESS
//                      makes the hook call queryCompleted(kLegacyStream, 0)
//                      (interpose.cc:1020-1022), which clears
//                      streams_[kLegacyStream].notReady (engine.cc:803-804):
//                      ONE StreamCounters entry for the legacy stream of
//                      every context (op.h:19 kLegacyStream = 0x1;
//                      engine.h:551-553 streams_ keyed by StreamKey only).
//                      So A's streak is
//                      reset every round and never reaches 3. Confirmed: with
//                      C's query on a created stream of C, or with C's legacy
//                      stream busy (NOT_READY, no queryCompleted), A's wait
//                      ends in < 15 rounds. Fix: keep the default streams'
//                      streak per context (the query's `context`), or let
//                      queryCompleted clear only a streak whose answers were
//                      for the context of the successful query.
// two-threads-legacy   the same, with C's query made by a second thread (C
//                      current) in lock-step; the main thread stays in A.
//                      FAILS under graft: as two-contexts-legacy.
// and-two-streams      waits for A, then for B: query A; if NOT_READY, 1 add
//                      on A and 1 on B, again; if SUCCESS, 1 add on B, query
//                      B; SUCCESS ends the wait, else 1 add on A, again.
//                      FAILS under graft in most runs (3 of 5 runs at
//                      SIM_ASYNC_US=3, always at SIM_ASYNC_US=0; the others
//                      end after > 10000 rounds). B is asked only in rounds
//                      where A was complete; A's driver SUCCESS clears A's
//                      streak (queryCompleted), so A needs 3 more held runs
//                      of graft's answers before it is forced again, and B's
//                      answers come >= 3 held runs apart: engine.cc:779
//                      restarts B's streak at 1 every time (graft answers B
//                      for its freshly held add). Same adjacency rule as
//                      many-ops.
// stream-recreate      1 | T's query, and every 5th round T is destroyed
//                      (work pending) and made again (the driver hands the
//                      same handle back).
//                      FAILS under graft (every configuration but
//                      GRAFT_MIN_SEGMENT_OPS=16; all answers graft's own,
//                      and coverage 0 %: graphs_built 2, replays 0).
//                      cuStreamDestroy -> Engine::releaseStream flushes T's
//                      held adds (engine.cc:814, sync_in_segment: the learned
//                      piece of identical adds is longer than the 5 rounds
//                      between destroys, so no held run ever completes) and
//                      clears the streak (engine.cc:824 `notReady = {}`);
//                      the next incarnation, same StreamKey, starts at
//                      runs = 1, and holds one run before its destroy: the
//                      streak never reaches 3. Graft also holds every op
//                      here for nothing (each is issued eagerly at the next
//                      destroy).
// event-recreate       1 add, a record of E | E's query, and every 5th round E
//                      is destroyed and made again.
//                      FAILS under graft with GRAFT_SEGMENT_OPS=4 and with
//                      SIM_ASYNC_US=0 (queries_issued_for_progress 0 in
//                      every configuration; passes elsewhere only when the
//                      record's piece happens to be complete at a query and
//                      the driver says CUDA_SUCCESS, up to 1900 rounds).
//                      deferEventDestroy erases the record and its streak
//                      (engine.cc:842), so as in stream-recreate each
//                      incarnation restarts at runs = 1.
//
// Controls (codes and values checked; "passes" = every configuration tried):
// few-ops              1 | T's query | 1 (the shape r14 fixed): passes.
// event-other-stream   A waits on B's record every 8th round; E recorded on A
//                      then; each round 1 add on B | E's query (E's record is
//                      held until its piece completes): passes.
// pts-feed-legacy      1 add on CU_STREAM_PER_THREAD | CU_STREAM_LEGACY's
//                      query (the per-thread stream counts for it): passes.
// ptsz-feed-own        per-thread entry points: 1 add on NULL (the
//                      per-thread stream) | NULL's query: passes.
// query-other-thread   a second thread in lock-step: 1 add on T and a record
//                      of E on T | the main thread's query of E: passes.
// event-rerecord-some  1 add on T, a record of E every third round | E's
//                      query (a complete E must have its mark): passes.
// alternate-two        1 add on A, 1 on B | A's query, B's query (both asked
//                      every round; SUCCESS of both ends the wait): passes.
// wait-event-mixed     1 add on U, a record of E2 on U, T waits on E2, 1 add on
//                      T | T's query; every 4th round cuEventSynchronize of
//                      an event of the step's start (a barrier). Passes with
//                      SIM_ASYNC_US > 0, fails at SIM_ASYNC_US=0 (5000 of
//                      the NOT_READYs the driver's: under graft the simulated
//                      GPU only moves at graft's fewer driver calls); the
//                      barrier every 4th round keeps queries_issued_for_
//                      progress at 0 in every configuration (barrier-* cause),
//                      it ends only where a piece completes right before a
//                      query.
// other-thread-noise   few-ops while a second thread issues adds on its own
//                      stream (ops of another thread between every two
//                      queries; held runs start and end with them): passes.
// event-pool           a caching allocator's pattern, no sync until the end:
//                      40 kernels a step on one stream, frees at 4 places a
//                      step (a kernel writes the block's mark, then its event
//                      is recorded), 6 allocations a step, each asking about
//                      the events of pending blocks oldest first until one is
//                      not ready (a complete one's mark must be there):
//                      passes, queries_issued_for_progress 0 (graft keeps its
//                      answers). Coverage 85-93 % (75 % at SIM_ASYNC_US=0):
//                      the rest is `mismatch`, the pool's block/event
//                      rotation depends on the answers (program-caused, not a
//                      query flush).
// once-per-step-event  no sync: 6 adds, a mark kernel, a record of E, 4 adds |
//                      E's query (once a step, the program goes on whatever
//                      it says) | 6 adds (a 17-op step). Passes, but 254-282
//                      of 300 queries are issued for progress: consecutive
//                      steps are consecutive held runs, so graft takes a
//                      program that asks once a step and goes on for a
//                      feeding loop; the forced query becomes a learned
//                      boundary (two graphs a step; coverage 98 %).
// once-per-step-stream the same, T's query: the same numbers.
// once-per-step-long   the same with 30 adds before and 60 after (a 95-op
//                      step): queries_issued_for_progress 0 (>= 2 held runs a
//                      step break the streak, engine.cc:779). Whether graft
//                      keeps its answers for a once-a-step query, and whether
//                      a feeding loop progresses, depends only on how many
//                      graph pieces fit between two queries.
//
// RESULTS (snapshot /tmp/snap/lib; 30 steps; SIM_ASYNC_US=3 unless noted;
// GRAFT_STATS report: nr = queries_answered_not_ready, prog =
// queries_issued_for_progress):
//   mode                  eager graft graphs cov%   nr     prog   max rounds
//   barrier-stream-sync   0     1     yes    99.98  20002  0      20000
//   barrier-event-sync    0     1     yes    99.98  20002  0      20000
//   barrier-get-limit     0     1     yes    99.98  20001  0      20000
//   barrier-pool-attr     0     1     yes    99.98  20001  0      20000
//   barrier-elapsed       0     1     yes    99.95  19998  0      20000
//   barrier-htod          0     1     yes    99.94  20001  0      20000
//   barrier-other-thread  0     1     yes    99.98  20002  0      20000
//   barrier-ctx-sync      0     1     yes    99.98  20002  0      20000
//   many-ops              0     1     yes    99.99  20392  0      20000
//   many-ops-event        0     1     yes    99.99  20005  0      20000
//   two-contexts-legacy   0     1     yes    99.83  20008  0      20000
//   two-threads-legacy    0     1     yes    99.75  20008  0      20000
//   and-two-streams       0     1/0   yes    64-85  ~30000 ~10000 20000/10707
//   stream-recreate       0     1     NO     0.0    20008  0      20000
//   event-recreate        0     0 (1 at SEGMENT_OPS=4 or ASYNC 0) 96.4 733 0 62
//   few-ops               0     0     yes    97.7   2598   44     159
//   event-other-stream    0     0     yes    88.9   890    149    246
//   pts-feed-legacy       0     0     yes    97.4   2384   39     136
//   ptsz-feed-own         0     0     yes    96.0   2974   109    167
//   query-other-thread    0     0     yes    94.9   788    27     32
//   event-rerecord-some   0     0     yes    94.0   907    319    192
//   alternate-two         0     0     yes    87.7   1740   112    48
//   wait-event-mixed      0     0 (1 at ASYNC 0) 97.8 602    0      106
//   other-thread-noise    0     0     yes    70.0   958    45     131
//   event-pool (300)      0     0     yes    92.7   23     0      -
//   once-per-step-event (300)  0 0    yes    98.0   22     254    -
//   once-per-step-long (300)   0 0    yes    99.4   297    0      -
// Configurations tried under graft (20 steps): SIM_ASYNC_US 0/3/20,
// GRAFT_ASYNC_LAUNCH=0, GRAFT_SEGMENT_OPS 4/1024, GRAFT_MIN_SEGMENT_OPS 2/16,
// GRAFT_WARMUP 1/3, SIM_STEPS=8, SIM_SEED=4: the FAILS modes fail in all of
// them except GRAFT_MIN_SEGMENT_OPS=16 (the 5-op rounds are then never held:
// barrier-*, two-*, stream-recreate pass) and where noted; at SIM_ASYNC_US=20
// SIM_STEPS=8 barrier-get-limit/-pool-attr/-elapsed/-htod are not exercised
// (every query answers CUDA_SUCCESS in the warm-up, nothing is graphed). Eagerly every
// mode passes with SIM_STEPS 2/3/8, SIM_ASYNC_US 0/3, SIM_SEED 1-5 (with
// SIM_STEPS=1 and no SIM_ASYNC_US the simulated GPU runs at most one item
// per two calls and falls behind the feed eagerly too).
//
// DIAGNOSES (common): r14 counts graft's answers per HELD RUN, requires the
// runs to be CONSECUTIVE (engine.cc:779), and ends the count at ANY host
// barrier (engine.cc:660-663, 776), at a default stream's success in ANY
// context (engine.cc:800-806 with one kLegacyStream entry), and at a stream's
// destroy / an event's destroy (engine.cc:824, 842). A waiting loop escapes
// only if it fits >= 3 consecutive held runs with none of these between:
// few ops per round, no barrier-classed call, one context. Suggested: keep
// the targeted streak but add a backstop that none of these resets, e.g.
// after N (say 64) of graft's own NOT_READY answers in a row for queries of
// held work (any target, any thread, ops between), with no query since that
// graft left to the driver, take the next such query as a poll. Its cost
// for programs that go on (event-pool, sim_event_poll --between) is at most
// one flush per N answers; and let a barrier end only the streaks of the
// targets it waited for (cuCtxGetLimit, cuMemPoolGetAttribute,
// cuEventElapsedTime and copies on other streams wait for none).
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
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"
#include "sim_tagged_trace.h"

namespace {

using namespace simtest::modes;

simtest::Driver g_drv;
const simtest::DriverApi* g_cu = nullptr;
CUfunction g_add = nullptr;
CUcontext g_a = nullptr;
decltype(&::cuCtxCreate_v4) g_create = nullptr;
decltype(&::cuMemPoolGetAttribute) g_poolGet = nullptr;

constexpr int kRounds = 200000;  // (graft answers for at most 50 ms: and-two-streams took 15000 rounds)
constexpr int kWarmRounds = 8;
int g_most = 0;     // most rounds of one wait
long g_rounds = 0;  // rounds of every wait

void add(CUdeviceptr p, CUstream s, uint64_t* count, const simtest::DriverApi* cu = nullptr) {
  SIM_CHECK(simtest::launchAdd(cu ? *cu : *g_cu, g_add, p, p, 1, s));
  ++*count;
}

bool isQueryCode(CUresult r) { return r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY; }

using Round = std::function<CUresult(int)>;

// The warm-up rounds, then the wait: `round` returns its query's code;
// anything but CUDA_ERROR_NOT_READY ends the wait, which must end with
// CUDA_SUCCESS within kRounds rounds and 5 s. False after a livelock.
bool wait(int step, const char* what, const Round& round) {
  for (int n = 0; n < kWarmRounds; ++n) {
    const CUresult r = round(n);
    if (!isQueryCode(r)) expectCode(r, CUDA_SUCCESS, "a warm-up round's query", step);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  CUresult r = CUDA_ERROR_NOT_READY;
  int n = 0;
  for (; n < kRounds; ++n) {
    r = round(kWarmRounds + n);
    if (r != CUDA_ERROR_NOT_READY) break;
    if ((n & 63) == 63 && std::chrono::steady_clock::now() > deadline) break;
  }
  g_most = std::max(g_most, n);
  g_rounds += n;
  expectCode(r, CUDA_SUCCESS, what, step);
  return r == CUDA_SUCCESS;
}

// A second thread that runs one job at a time for the main thread (lock-step).
class Helper {
 public:
  explicit Helper(CUcontext ctx) : thread_([this, ctx] { loop(ctx); }) {}
  ~Helper() {
    job_.store(nullptr);
    stop_.store(true);
    thread_.join();
  }
  void run(const std::function<void()>& job) {
    done_.store(false);
    job_.store(&job);
    while (!done_.load()) std::this_thread::yield();
  }

 private:
  void loop(CUcontext ctx) {
    SIM_CHECK(g_cu->cuCtxSetCurrent(ctx));
    while (!stop_.load()) {
      const std::function<void()>* j = job_.exchange(nullptr);
      if (!j) {
        std::this_thread::yield();
        continue;
      }
      (*j)();
      done_.store(true);
    }
  }
  std::atomic<const std::function<void()>*> job_{nullptr};
  std::atomic<bool> done_{false}, stop_{false};
  std::thread thread_;
};

// ----------------------------------------------------------------- barriers of something else
void barrierFeed(int steps, const std::string& kind) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream T = simtest::newStream(cu), U = simtest::newStream(cu);
  const CUevent EU = simtest::newEvent(cu, 0), EU2 = simtest::newEvent(cu, 0);
  const CUdeviceptr z = simtest::zeroedBuffer(cu), u = simtest::zeroedBuffer(cu);
  uint64_t issued = 0, uIssued = 0;
  SIM_CHECK(cu.cuEventRecord(EU, U));
  add(u, U, &uIssued);
  SIM_CHECK(cu.cuEventRecord(EU2, U));
  SIM_CHECK(cu.cuCtxSynchronize());
  CUmemoryPool pool = nullptr;
  SIM_CHECK(cu.cuDeviceGetDefaultMemPool(&pool, 0));
  std::unique_ptr<Helper> helper;
  CUstream V = nullptr;
  if (kind == "other-thread") {
    helper = std::make_unique<Helper>(g_a);
    helper->run([&] { V = simtest::newStream(cu); });
  }
  uint64_t hostWord = 0;
  auto barrier = [&] {
    if (kind == "stream-sync") {
      SIM_CHECK(cu.cuStreamSynchronize(U));
    } else if (kind == "event-sync") {
      SIM_CHECK(cu.cuEventSynchronize(EU2));
    } else if (kind == "ctx-sync") {
      SIM_CHECK(cu.cuCtxSynchronize());
    } else if (kind == "get-limit") {
      size_t v = 0;
      SIM_CHECK(cu.cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
    } else if (kind == "pool-attr") {
      cuuint64_t v = 0;
      SIM_CHECK(g_poolGet(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    } else if (kind == "elapsed") {
      float ms = -1;
      SIM_CHECK(cu.cuEventElapsedTime(&ms, EU, EU2));
      if (ms < 0) expectValue(0, 1, "a nonnegative elapsed time", -1);
    } else if (kind == "htod") {
      ++hostWord;
      SIM_CHECK(cu.cuMemcpyHtoD(u + 8, &hostWord, 8));
    } else if (kind == "other-thread") {
      helper->run([&] { SIM_CHECK(cu.cuStreamSynchronize(V)); });
    }
  };
  const Round round = [&](int) {
    barrier();
    for (int k = 0; k < 2; ++k) add(z, T, &issued);
    const CUresult r = cu.cuStreamQuery(T);
    if (r == CUDA_SUCCESS) return r;
    for (int k = 0; k < 3; ++k) add(z, T, &issued);
    return r;
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    add(z, T, &issued);  // the step starts with work pending
    if (!wait(i, "T's query, a barrier of something else and 2 adds on T before it (20000 rounds)", round)) break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "T's adds", steps);
  if (kind == "htod") expectValue(peek(u + 8), hostWord, "the uploaded word", steps);
  helper.reset();
}

// ----------------------------------------------------------------- many ops between two queries
void manyOps(int steps, bool event) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream T = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr z = simtest::zeroedBuffer(cu);
  uint64_t issued = 0;
  const Round round = [&](int) {
    for (int k = 0; k < 40; ++k) add(z, T, &issued);
    if (event) {
      SIM_CHECK(cu.cuEventRecord(E, T));
      add(z, T, &issued);
    }
    const CUresult r = event ? cu.cuEventQuery(E) : cu.cuStreamQuery(T);
    if (r == CUDA_SUCCESS) return r;
    for (int k = 0; k < 60; ++k) add(z, T, &issued);
    return r;
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    add(z, T, &issued);
    if (!wait(i, event ? "E's query, 40 adds, E's record and 1 add before it (20000 rounds)"
                       : "T's query, 40 adds on T before it and 60 after (20000 rounds)",
              round))
      break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "T's adds", steps);
}

// ----------------------------------------------------------------- the legacy streams of two contexts
void twoContexts(int steps, bool thread) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);  // A's, blocking
  const CUstream N = simtest::newStream(cu);                     // A's, non-blocking
  const CUdeviceptr z = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  CUcontext c = nullptr;
  SIM_CHECK(g_create(&c, nullptr, 0, 0));
  SIM_CHECK(cu.cuCtxSetCurrent(g_a));
  std::unique_ptr<Helper> helper;
  if (thread) helper = std::make_unique<Helper>(c);
  uint64_t issued = 0, wIssued = 0;
  int step = 0;
  const Round round = [&](int) {
    CUresult rc = CUDA_ERROR_UNKNOWN;
    if (thread) {
      helper->run([&] { rc = cu.cuStreamQuery(nullptr); });
    } else {
      SIM_CHECK(cu.cuCtxSetCurrent(c));
      rc = cu.cuStreamQuery(nullptr);
      SIM_CHECK(cu.cuCtxSetCurrent(g_a));
    }
    expectCode(rc, CUDA_SUCCESS, "C's legacy query (C has no work)", step);
    add(z, B, &issued);
    const CUresult r = cu.cuStreamQuery(nullptr);
    if (r == CUDA_SUCCESS) return r;
    add(w, N, &wIssued);
    return r;
  };
  for (; step < steps; ++step) {
    SIM_CHECK(cu.cuCtxSynchronize());
    add(z, B, &issued);
    if (!wait(step, "A's legacy query, C's legacy query asked before it each round (20000 rounds)", round)) break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "B's adds", steps);
  expectValue(peek(w), wIssued, "N's adds", steps);
  helper.reset();
}

// ----------------------------------------------------------------- two targets
void andTwo(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream A = simtest::newStream(cu), B = simtest::newStream(cu);
  const CUdeviceptr za = simtest::zeroedBuffer(cu), zb = simtest::zeroedBuffer(cu);
  uint64_t ia = 0, ib = 0;
  const Round round = [&](int) {
    if (cu.cuStreamQuery(A) != CUDA_SUCCESS) {
      add(za, A, &ia);
      add(zb, B, &ib);
      return CUDA_ERROR_NOT_READY;
    }
    add(zb, B, &ib);
    const CUresult r = cu.cuStreamQuery(B);
    if (r == CUDA_SUCCESS) return r;
    add(za, A, &ia);
    return r;
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    add(za, A, &ia);
    if (!wait(i, "A's query, then (A complete) an add on B and B's query (20000 rounds)", round)) break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(za), ia, "A's adds", steps);
  expectValue(peek(zb), ib, "B's adds", steps);
}

void alternateTwo(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream A = simtest::newStream(cu), B = simtest::newStream(cu);
  const CUdeviceptr za = simtest::zeroedBuffer(cu), zb = simtest::zeroedBuffer(cu);
  uint64_t ia = 0, ib = 0;
  const Round round = [&](int) {
    add(za, A, &ia);
    add(zb, B, &ib);
    const CUresult ra = cu.cuStreamQuery(A);
    const CUresult rb = cu.cuStreamQuery(B);
    if (!isQueryCode(ra)) return ra;
    if (!isQueryCode(rb)) return rb;
    return ra == CUDA_SUCCESS && rb == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    if (!wait(i, "A's and B's queries, both complete in one round (20000 rounds)", round)) break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(za), ia, "A's adds", steps);
  expectValue(peek(zb), ib, "B's adds", steps);
}

// ----------------------------------------------------------------- controls
void fewOps(int steps, bool noise) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream T = simtest::newStream(cu);
  const CUdeviceptr z = simtest::zeroedBuffer(cu), n = simtest::zeroedBuffer(cu);
  uint64_t issued = 0, nIssued = 0;
  std::atomic<bool> stop{false};
  std::thread other;
  if (noise) {
    other = std::thread([&] {
      SIM_CHECK(cu.cuCtxSetCurrent(g_a));
      const CUstream V = simtest::newStream(cu);
      for (int k = 0; k < 200000 && !stop.load(); ++k) {
        add(n, V, &nIssued);
        if ((k & 15) == 15) std::this_thread::sleep_for(std::chrono::microseconds(5));
      }
      SIM_CHECK(cu.cuStreamSynchronize(V));
    });
  }
  const Round round = [&](int) {
    add(z, T, &issued);
    return cu.cuStreamQuery(T);
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuStreamSynchronize(T));
    add(z, T, &issued);
    if (!wait(i, "T's query, 1 add on T before it (20000 rounds)", round)) break;
  }
  stop.store(true);
  if (noise) other.join();
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "T's adds", steps);
  if (noise) expectValue(peek(n), nIssued, "the other thread's adds", steps);
}

void eventOtherStream(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream A = simtest::newStream(cu), B = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu), EB = simtest::newEvent(cu);
  const CUdeviceptr za = simtest::zeroedBuffer(cu), zb = simtest::zeroedBuffer(cu);
  uint64_t ia = 0, ib = 0;
  const Round round = [&](int n) {
    if (n % 8 == 0) {  // A joins B and records E now and then
      add(zb, B, &ib);
      SIM_CHECK(cu.cuEventRecord(EB, B));
      SIM_CHECK(cu.cuStreamWaitEvent(A, EB, 0));
      add(za, A, &ia);
      SIM_CHECK(cu.cuEventRecord(E, A));
    }
    add(zb, B, &ib);
    return cu.cuEventQuery(E);
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    if (!wait(i, "E's query (recorded on A after A waited on B), adds fed on B (20000 rounds)", round)) break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(za), ia, "A's adds", steps);
  expectValue(peek(zb), ib, "B's adds", steps);
}

void perThreadFeed(int steps, bool ptsz) {
  const simtest::DriverApi& cu = ptsz ? g_drv.perThread : *g_cu;
  const CUstream fed = ptsz ? nullptr : CU_STREAM_PER_THREAD;
  const CUstream asked = ptsz ? nullptr : CU_STREAM_LEGACY;
  const CUdeviceptr z = simtest::zeroedBuffer(cu);
  uint64_t issued = 0;
  const Round round = [&](int) {
    add(z, fed, &issued, &cu);
    return cu.cuStreamQuery(asked);
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    add(z, fed, &issued, &cu);
    if (!wait(i, ptsz ? "the per-thread stream's query (_ptsz NULL), fed on it (20000 rounds)"
                      : "CU_STREAM_LEGACY's query, fed on CU_STREAM_PER_THREAD (20000 rounds)",
              round))
      break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "the per-thread stream's adds", steps);
}

void queryOtherThread(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream T = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr z = simtest::zeroedBuffer(cu);
  uint64_t issued = 0;
  Helper helper(g_a);
  const std::function<void()> feed = [&] {
    add(z, T, &issued);
    SIM_CHECK(cu.cuEventRecord(E, T));
  };
  const Round round = [&](int) {
    helper.run(feed);
    return cu.cuEventQuery(E);
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    if (!wait(i, "E's query, recorded by another thread after its add (20000 rounds)", round)) break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "T's adds", steps);
}

void eventRerecordSome(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream T = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr z = simtest::zeroedBuffer(cu), mark = simtest::zeroedBuffer(cu);
  uint64_t issued = 0, marks = 0;
  uint64_t markAtRecord = 0;
  int step = 0;
  const Round round = [&](int n) {
    add(z, T, &issued);
    if (n % 3 == 0) {
      add(mark, T, &marks);
      markAtRecord = marks;
      SIM_CHECK(cu.cuEventRecord(E, T));
    }
    const CUresult r = cu.cuEventQuery(E);
    if (r == CUDA_SUCCESS && peek(mark) < markAtRecord)
      expectValue(peek(mark), markAtRecord, "the mark before E's latest record, E complete", step);
    return r;
  };
  for (; step < steps; ++step) {
    SIM_CHECK(cu.cuCtxSynchronize());
    add(z, T, &issued);
    SIM_CHECK(cu.cuEventRecord(E, T));
    if (!wait(step, "E's query, recorded again every third round (20000 rounds)", round)) break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "T's adds", steps);
  expectValue(peek(mark), marks, "the marks", steps);
}

void recreate(int steps, bool event) {
  const simtest::DriverApi& cu = *g_cu;
  CUstream T = simtest::newStream(cu);
  CUevent E = simtest::newEvent(cu);
  const CUdeviceptr z = simtest::zeroedBuffer(cu);
  uint64_t issued = 0;
  const Round round = [&](int n) {
    if (n % 5 == 4) {
      if (event) {
        SIM_CHECK(cu.cuEventDestroy(E));
        E = simtest::newEvent(cu);
      } else {
        SIM_CHECK(cu.cuStreamDestroy(T));  // work pending: it completes anyway
        T = simtest::newStream(cu);
      }
    }
    add(z, T, &issued);
    if (event) SIM_CHECK(cu.cuEventRecord(E, T));
    return event ? cu.cuEventQuery(E) : cu.cuStreamQuery(T);
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    add(z, T, &issued);
    if (!wait(i, event ? "E's query, E destroyed and made again every 5th round (20000 rounds)"
                       : "T's query, T destroyed and made again every 5th round (20000 rounds)",
              round))
      break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "T's adds", steps);
}

void waitEventMixed(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream T = simtest::newStream(cu), U = simtest::newStream(cu);
  const CUevent E2 = simtest::newEvent(cu), Eold = simtest::newEvent(cu);
  const CUdeviceptr z = simtest::zeroedBuffer(cu), u = simtest::zeroedBuffer(cu);
  uint64_t issued = 0, uIssued = 0;
  const Round round = [&](int n) {
    if (n % 4 == 3) SIM_CHECK(cu.cuEventSynchronize(Eold));
    add(u, U, &uIssued);
    SIM_CHECK(cu.cuEventRecord(E2, U));
    SIM_CHECK(cu.cuStreamWaitEvent(T, E2, 0));
    add(z, T, &issued);
    return cu.cuStreamQuery(T);
  };
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSynchronize());
    add(z, T, &issued);
    SIM_CHECK(cu.cuEventRecord(Eold, T));
    if (!wait(i, "T's query, T waiting on U's record each round (20000 rounds)", round)) break;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(z), issued, "T's adds", steps);
  expectValue(peek(u), uIssued, "U's adds", steps);
}

// A caching allocator's blocks: each freed block's event recorded after the
// kernel that last wrote the block (its mark); allocations ask about the
// events of the pending blocks, oldest first, until one is not ready.
void eventPool(int steps) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu);
  constexpr int kBlocks = 16;
  struct Block {
    CUdeviceptr mem;
    CUevent event;
    uint64_t mark;  // what the last kernel before the record writes
  };
  std::vector<Block> blocks(kBlocks);
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), scratch = simtest::zeroedBuffer(cu);
  for (Block& b : blocks) b = {simtest::zeroedBuffer(cu), simtest::newEvent(cu), 0};
  std::deque<int> pending, free;
  for (int k = 0; k < kBlocks; ++k) free.push_back(k);
  std::vector<int> live;
  uint64_t scratchIssued = 0, markNo = 0;
  long asked = 0, complete = 0, notReady = 0;
  auto processEvents = [&](int step) {
    while (!pending.empty()) {
      Block& b = blocks[pending.front()];
      const CUresult r = cu.cuEventQuery(b.event);
      ++asked;
      if (r == CUDA_ERROR_NOT_READY) {
        ++notReady;
        return;
      }
      if (r != CUDA_SUCCESS) {
        expectCode(r, CUDA_SUCCESS, "a pooled event's query", step);
        return;
      }
      ++complete;
      expectValue(peek(b.mem), b.mark, "a block's mark, its event complete", step);
      free.push_back(pending.front());
      pending.pop_front();
    }
  };
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 40; ++k) {
      if (k % 7 == 3) {  // an allocation
        processEvents(i);
        if (!free.empty()) {
          live.push_back(free.front());
          free.pop_front();
        }
      }
      if (k % 10 == 8 && !live.empty()) {  // a free: the block's last kernel, then its event
        Block& b = blocks[live.front()];
        b.mark = ++markNo;
        SIM_CHECK(simtest::launchAdd(cu, g_add, b.mem, zero, b.mark, S));
        SIM_CHECK(cu.cuEventRecord(b.event, S));
        pending.push_back(live.front());
        live.erase(live.begin());
        continue;
      }
      add(scratch, S, &scratchIssued);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(scratch), scratchIssued, "the scratch adds", steps);
  std::printf("sim_review14_streaks: event-pool: %ld queries, %ld complete, %ld not ready\n", asked, complete,
              notReady);
}


// One query a step, between launches, of an event recorded earlier in the
// step (or of the stream), no sync until the end: the program goes on
// whatever the answer (a pinned buffer reused once an event says so, a
// "stream idle?" check). A complete event must mean its mark was written.
void oncePerStep(int steps, bool stream, int before, int after) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream S = simtest::newStream(cu);
  const CUevent E = simtest::newEvent(cu);
  const CUdeviceptr scratch = simtest::zeroedBuffer(cu), mark = simtest::zeroedBuffer(cu),
                    zero = simtest::zeroedBuffer(cu);
  uint64_t issued = 0;
  long complete = 0, notReady = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < before; ++k) add(scratch, S, &issued);
    SIM_CHECK(simtest::launchAdd(cu, g_add, mark, zero, uint64_t(i + 1), S));
    SIM_CHECK(cu.cuEventRecord(E, S));
    for (int k = 0; k < 4; ++k) add(scratch, S, &issued);
    const CUresult r = stream ? cu.cuStreamQuery(S) : cu.cuEventQuery(E);
    if (r == CUDA_SUCCESS) {
      ++complete;
      expectValue(peek(mark), uint64_t(i + 1), "the step's mark, the query complete", i);
    } else if (r == CUDA_ERROR_NOT_READY) {
      ++notReady;
    } else {
      expectCode(r, CUDA_SUCCESS, "the step's query", i);
    }
    for (int k = 0; k < after; ++k) add(scratch, S, &issued);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(scratch), issued, "the adds", steps);
  std::printf("sim_review14_streaks: %s: %ld answers complete, %ld not ready\n", g_mode, complete, notReady);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review14_streaks", 30);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  if (int rc = simtest::startProgram("sim_review14_streaks", &g_drv, &g_a)) return rc;
  g_cu = &g_drv.plain;
  if (!simtest::lookupProc(g_drv, "cuCtxCreate", &g_create)) return 2;
  if (!simtest::lookupProc(g_drv, "cuMemPoolGetAttribute", &g_poolGet)) return 2;
  g_add = simtest::libraryKernel3("sim_add_review14");
  static const char* const kBarriers[] = {"stream-sync", "event-sync", "get-limit", "pool-attr",
                                          "elapsed",     "htod",       "other-thread", "ctx-sync"};
  bool known = true;
  if (mode.rfind("barrier-", 0) == 0 &&
      std::find_if(std::begin(kBarriers), std::end(kBarriers), [&](const char* k) { return mode.substr(8) == k; }) !=
          std::end(kBarriers))
    barrierFeed(steps, mode.substr(8));
  else if (mode == "many-ops") manyOps(steps, false);
  else if (mode == "many-ops-event") manyOps(steps, true);
  else if (mode == "two-contexts-legacy") twoContexts(steps, false);
  else if (mode == "two-threads-legacy") twoContexts(steps, true);
  else if (mode == "and-two-streams") andTwo(steps);
  else if (mode == "few-ops") fewOps(steps, false);
  else if (mode == "other-thread-noise") fewOps(steps, true);
  else if (mode == "event-other-stream") eventOtherStream(steps);
  else if (mode == "pts-feed-legacy") perThreadFeed(steps, false);
  else if (mode == "ptsz-feed-own") perThreadFeed(steps, true);
  else if (mode == "query-other-thread") queryOtherThread(steps);
  else if (mode == "event-rerecord-some") eventRerecordSome(steps);
  else if (mode == "stream-recreate") recreate(steps, false);
  else if (mode == "event-recreate") recreate(steps, true);
  else if (mode == "alternate-two") alternateTwo(steps);
  else if (mode == "wait-event-mixed") waitEventMixed(steps);
  else if (mode == "event-pool") eventPool(steps);
  else if (mode == "once-per-step-event") oncePerStep(steps, false, 6, 6);
  else if (mode == "once-per-step-stream") oncePerStep(steps, true, 6, 6);
  else if (mode == "once-per-step-long") oncePerStep(steps, false, 30, 60);
  else known = false;
  if (!known) {
    std::printf("usage: sim_review14_streaks --mode barrier-stream-sync|barrier-event-sync|barrier-get-limit|"
                "barrier-pool-attr|barrier-elapsed|barrier-htod|barrier-other-thread|barrier-ctx-sync|many-ops|"
                "many-ops-event|two-contexts-legacy|two-threads-legacy|and-two-streams|few-ops|event-other-stream|"
                "pts-feed-legacy|ptsz-feed-own|query-other-thread|event-rerecord-some|stream-recreate|"
                "event-recreate|alternate-two|wait-event-mixed|other-thread-noise|event-pool|once-per-step-event|"
                "once-per-step-stream|once-per-step-long "
                "[--steps N] [--expect-graphs]\n");
    return 2;
  }
  if (mode != "event-pool" && mode.rfind("once-per-step", 0) != 0)
    std::printf("sim_review14_streaks: %s: at most %d rounds in one wait, %ld in all\n", g_mode, g_most, g_rounds);
  return report(steps, args.expectGraphs);
}
