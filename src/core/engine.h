// Engine: detection, recording, deferred matching and replay (DESIGN.md §2).
//
// Every stream-ordered op the program issues is submitted here, in issue
// order, under the engine lock. The engine either tells the caller to issue
// the op now (eagerly, with the caller's own arguments) or holds it back
// because it continues a segment that may be replayed through a graph. Held
// ops are never lost: on a mismatch, a barrier, a relevant query or any
// failure, they are issued eagerly from their recorded copies, in order,
// before anything else.
//
// Threading: every public member except lock() must be called with the lock
// returned by lock() held. The engine calls the Executor under that lock.
// Hot path (submit/completeIssued in steady state): no allocation, no
// logging above trace.
#pragma once

#include <array>
#include <chrono>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/engine_mutex.h"
#include "core/event_instances.h"
#include "core/executor.h"
#include "core/history.h"
#include "core/op.h"
#include "core/op_buffer.h"
#include "core/period_detector.h"
#include "core/segment.h"

namespace graft::core {

struct EngineConfig {
  bool replay = true;          // false: count and forward only (pass-through)
  uint32_t warmup = 3;         // identical repeats before capture
  uint32_t maxPeriod = 16384;  // tokens
  uint32_t minSegmentOps = 2;
  uint32_t segmentOps = 0;     // 0: automatic piece sizes
  uint32_t syncTailOps = 8;    // first back piece before a recurring sync (automatic sizes)
  uint32_t maxVariants = 8;
  uint32_t maxSegments = 4096;
  // While no segment is live: recorded ops without a build before resting
  // (0: never); raised to (warmup + 1) * maxPeriod. A rest lasts 4x as many ops.
  uint64_t dormantAfterOps = 0;
  // With segments live: rest when graphs carried under this share (percent)
  // of a window's ops (0: never).
  uint32_t restBelowGraphPct = 20;
};

enum class Decision : uint8_t { IssueNow, Held };
// Engine::query: the caller asks the driver, or answers CUDA_ERROR_NOT_READY.
enum class QueryAnswer : uint8_t { AskDriver, NotReady };

// graft's own CUDA_ERROR_NOT_READY answers for one query target (a stream,
// or an event across its records), so that a program that issues an op
// between every two queries of what it waits for (a feeding loop: it never
// polls by graft's rule, and always finds its newest op held) gets the
// driver's answer in the end. Once graft has answered for the target
// Engine::kAnswersPerTarget times since the driver last said CUDA_SUCCESS for
// it, or for longer than Engine::kAnswerWindowNs since the first of those
// answers after the host last waited (a program that asks about it in turn
// with other targets), or Engine::kAnswersInARow times over all targets with
// no CUDA_SUCCESS from the driver for any of them and no host wait between
// (a new event in every round), the query is taken as a poll: it issues what
// graft holds and asks the driver, and so do the target's later queries
// (driver mode; all targets' after kAnswersInARow) until the driver says
// CUDA_SUCCESS for it (for one graft answered for) or the host waits
// (cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize:
// Engine::hostWaited). A caching
// allocator records an event again only after the driver's success, so it
// keeps graft's answers. A program that records an event in every step and
// asks about it without ever seeing it complete keeps them for
// kAnswersPerTarget steps where it waits for the host in every step, else
// its queries issue what graft holds from then on (and become segment
// boundaries there).
struct NotReadyStreak {
  uint32_t answers = 0;     // graft's answers since the driver's success (or the last progress query)
  uint64_t driverUntil = 0; // Engine::wait_generation_ + 1 while in driver mode; 0: not
  uint64_t sinceNs = 0;     // the first of those answers since the host last waited (steady clock)
  uint64_t sinceWait = 0;   // Engine::wait_generation_ then
  bool open() const { return answers || driverUntil; }
};

struct EngineStats {
  uint64_t opsTotal = 0;     // stream-ordered ops submitted
  uint64_t opsViaGraph = 0;
  std::array<uint64_t, size_t(EagerCause::Count)> eagerByCause{};
  uint64_t graphsBuilt = 0;
  uint64_t buildFailures = 0;
  uint64_t segmentsDropped = 0;  // mismatched more often than replayed (Engine::countTry)
  uint64_t variantsEvicted = 0;  // idle graphs retired: for a new variant or sequence, or unused 2^22 ops (retireIdle)
  uint64_t replays = 0;
  uint64_t patches = 0;
  uint64_t reissueErrors = 0;
  uint64_t opsSoleExpected = 0;  // held through the fast lane (holdSoleExpected)
  uint64_t queriesAnsweredNotReady = 0;  // queries of held work graft answered itself (query)
  uint64_t queriesIssuedForProgress = 0; // queries of held work that issued it after a streak (NotReadyStreak)
  double firstReplaySeconds = -1;
  size_t liveSegments = 0;
  std::vector<std::pair<StreamKey, uint64_t>> opsByStream;

  // (variant_limit and segment_limit count sequences refused a graph, not
  // ops: their ops are counted under the cause they were issued by.)
  uint64_t opsEager() const {
    uint64_t n = 0;
    for (size_t c = 0; c < size_t(EagerCause::Count); ++c)
      if (c != size_t(EagerCause::VariantLimit) && c != size_t(EagerCause::SegmentLimit)) n += eagerByCause[c];
    return n;
  }
};

class Engine {
 public:
  Engine(const EngineConfig& config, Executor& executor);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  std::unique_lock<EngineMutex> lock() { return std::unique_lock<EngineMutex>(mutex_); }

  // A stream-ordered op. On IssueNow the caller issues the op with its own
  // arguments and then calls completeIssued() before releasing the lock (or,
  // for an op that may block the host, see the hook's submitOp, calls it
  // first as if the call succeeded, then releases the lock for the call).
  Decision submit(const OpDesc& op);
  // While ops are held: the op the first live candidate expects next (what
  // submit() would compare the next op with first). Its bytes stay unchanged
  // until an op equal to it has been submitted. False when nothing is held.
  bool expectedNext(OpDesc* out) const;
  // The fast lane for launches, which a replay spends most of its ops on.
  // While ops are held and exactly one candidate is live: the op it expects
  // next, a kernel op (else nullptr). An op equal to it in shape is handed to
  // holdSoleExpected() instead of submit(), with the same effect as submit()
  // returning Held, minus the work of finding that out.
  // Also while nothing is held, right after a replay completed (armStart):
  // the first op of the segment whose run began there the last time, when
  // that segment is the only one a run starting with that op could match,
  // and only until anything else happens (an op, a new or dropped segment,
  // stepping aside).
  const OpDesc* soleExpected() const {
    if (!sole_expected_ready_) return nullptr;
    if (start_armed_ && !armedStartHolds()) return nullptr;
    return &sole_expected_;
  }
  // `value`: the op's value bytes, sole_expected's own when equal to them.
  // For an op that begins a run (holdsNothing()) the caller notes its
  // thread first (noteSubmitter), as for an op it submits.
  void holdSoleExpected(Bytes value);
  bool holdsNothing() const { return held_.empty(); }
  void completeIssued(const OpDesc& op, bool succeeded);
  // Pass-through mode: counts an op issued on `stream`, nothing else.
  void countPassthrough(StreamKey stream);
  // Resting (EngineConfig::dormantAfterOps): no segment is live and nothing
  // worth a graph repeated for a long time, or threads issue ops at the same
  // time (noteSubmitter), so the caller issues each op itself and reports it
  // with countDormant() instead of encoding and submitting it. Nothing is
  // held, learned or recorded meanwhile; the rest ends by itself after a
  // fixed number of ops, or once the threads stop.
  bool dormant() const { return ops_total_ < dormant_until_; }
  void countDormant(StreamKey stream);
  // The thread that submits the next op, as a nonzero token per thread: the
  // engine counts switches between threads, and rests when threads issue
  // ops at the same time and little goes through graphs (their interleaving
  // changes from run to run, so nothing repeats, and recording every op
  // under the lock would only slow them down), until they stop. Off the
  // fast lane; also called for ops counted in a rest.
  void noteSubmitter(uint32_t thread) {
    if (thread == last_submitter_) return;
    last_submitter_ = thread;
    ++interleave_.switches;
  }

  // The host is about to wait for or observe the GPU (synchronize, synchronous
  // copy, free): issues everything held. Recurs as a segment boundary.
  void hostBarrier(uint64_t barrierHash);
  // Whether an op graft holds satisfies `pred` (bool(const OpDesc&)): the hook
  // asks whether a held launch needs what a setting is about to take away.
  template <typename Pred>
  bool anyHeld(Pred pred) const {
    for (size_t k = 0; k < held_.size(); ++k)
      if (pred(held_.view(k))) return true;
    return false;
  }
  // A stream (event == 0) or event query, before the driver is asked. When
  // graft holds the work it observes (the event's latest record, an op on the
  // stream): NotReady, graft's answer (that work is not complete). Once the
  // program has polled the target (asked again with no op issued since), its
  // queries in the current generation issue everything held instead and recur
  // as a segment boundary, until the program stops polling it (an event's
  // record, or a stream's run of queries, asked about while ops were held and
  // not polled: the program went on without waiting). A target graft has
  // answered for too often without the driver's CUDA_SUCCESS for it since
  // (queryCompleted) is taken as polled too (NotReadyStreak): a loop that
  // feeds work between its queries makes progress.
  // Otherwise AskDriver, after queued launches are in the driver's queues.
  // A default stream names one stream per context: `context` (nonzero) is
  // the caller's current one, and only held ops of that context (or of none
  // known) count as the target's.
  QueryAnswer query(StreamKey stream, uint64_t event, uint64_t queryHash, uint64_t context = 0);
  // The driver answered CUDA_SUCCESS for a query that query() left to it
  // (`context`: the caller's, for a default stream): the target's streak of
  // graft's answers ends. The hook calls it, and hostWaited (after the
  // driver's success for cuCtxSynchronize, cuStreamSynchronize or
  // cuEventSynchronize: driver modes end), only while streaksMayBeOpen() (no
  // lock needed to ask that); both under the engine lock.
  void queryCompleted(StreamKey stream, uint64_t event, uint64_t context);
  void hostWaited() {
    ++wait_generation_;
    answers_in_a_row_ = 0;
  }
  static constexpr uint32_t kAnswersPerTarget = 128;  // NotReadyStreak
  static constexpr uint32_t kAnswersInARow = 256;
  static constexpr uint64_t kAnswerWindowNs = 50'000'000;
  bool streaksMayBeOpen() const { return streaks_open_.load(std::memory_order_relaxed); }
  // A stream is about to be destroyed: nothing held may use it.
  void releaseStream(StreamKey stream);
  // The program created a stream in `context`. A handle that a stream of
  // another context had before (destroyed since) names a stream the graphs
  // built with it cannot be launched on, and launches on it from the old
  // context are refused by the driver: those graphs go, so such launches
  // reach the driver (tests/sim/sim_review_engine.cc, recycled-stream-context).
  void streamCreated(StreamKey stream, uint64_t context);
  // The context `stream` is in (0: unknown), as streamCreated compares it.
  void noteStreamContext(StreamKey stream, uint64_t context) {
    if (context) streams_[stream].createdIn = context;
  }
  // Whether the program destroyed `event` and graft defers the destruction
  // (deferEventDestroy): the handle names no event for the program, so its
  // queries and a second destroy get CUDA_ERROR_INVALID_HANDLE, as eagerly.
  bool eventDestroyDeferred(uint64_t event) const {
    for (const Deferred& d : deferred_)
      if (!d.isFree && d.handle == event) return true;
    return false;
  }
  // The program destroys an event. If held ops use it, its destruction is
  // deferred until they have been issued (returns true: the caller must not
  // destroy it now); CUDA allows destroying an event with pending work.
  // Otherwise the launches are drained and the executor forgets the event.
  // `domain`: the context current at the call (the deferred destroy is made
  // in it, maybe from graft's idle-flush thread, which has none).
  bool deferEventDestroy(uint64_t event, uint64_t domain);
  // A stream-ordered free (cuMemFreeAsync) while ops are held: it is issued
  // right after them, so the memory is never reusable before they ran
  // (returns true: the caller must not free it now); while nothing is held
  // but graph launches are queued, after those (Executor::freeBehindQueuedLaunches).
  // Allocations need no such care: issued at once, they come before the held
  // ops and the queued launches, which cannot use them.
  // `domain`: the caller's context (opaque), in which a NULL stream is named.
  bool deferFree(uint64_t pointer, StreamKey stream, uint64_t domain = 0);
  // The program begins/ends its own stream capture: graft steps aside.
  void programCaptureBegin();
  void programCaptureEnd();
  bool programCaptureActive() const { return capture_depth_ > 0; }
  // False while graft issues every op in place and holds none (a program's
  // capture, a rest, replay stopped or off).
  bool mayHold() const { return !stepsAside(); }
  // Issues everything held (at exit, or before graft stops replaying), and
  // waits until every graph launch is in the driver's queues.
  void flushAll();
  // Waits until every graph launch the executor accepted is in the driver's
  // queues (see Executor::drain); the caller then issues a call of the
  // program's that enqueues or observes GPU work. Cheap when none is pending.
  void drainLaunches();
  // For a watchdog called periodically: issues what is held (and the frees
  // put behind queued launches) if no op has been submitted since the
  // previous call that saw the same held work. Returns true when it flushed.
  bool flushIfIdle();
  // The program unloads code (a module or library), right after a host
  // barrier: every graph is destroyed and everything recorded so far is
  // forgotten, since a kernel handle seen before may now name another kernel.
  // Replay resumes once the loop repeats again. Allocates; not on the hot path.
  void forgetRecordedCode();
  // The program unloads code that only some kernels came from, right after a
  // host barrier: every segment with an op `usesUnloaded` says yes to is
  // retired and its graph destroyed; the other graphs and what graft learned
  // stay. Its run is built again if it repeats, with the kernels loaded
  // then; for `certain` (the op's kernel surely was of this code, not only
  // perhaps) only once if the graph had replayed fewer than
  // kReplaysBeforeUnloadToRebuild times: code a library loads and unloads
  // every step would otherwise cost a build each time. Returns the number
  // of graphs destroyed. Allocates; not on the hot path.
  size_t forgetSegmentsWith(const std::function<bool(const OpDesc&)>& usesUnloaded, bool certain);
  // The most times a graph with an op `uses` says yes to has replayed (0:
  // no such graph). Not on the hot path.
  uint64_t mostReplaysOfGraphsWith(const std::function<bool(const OpDesc&)>& uses) const;
  static constexpr uint64_t kReplaysBeforeUnloadToRebuild = 4;
  // Stops replaying for good (e.g. graft can no longer see every op): issues
  // everything held; from now on every op is issued eagerly and only counted.
  void stopReplay();
  // False once stopReplay() ran (or replay was never on).
  // (Also after one of graft's own driver calls got an error that leaves the
  // context unusable: the next op or query stops replay, see noteStickyError.)
  bool replaying() const { return config_.replay; }
  // The first error graft's own driver calls got that leaves the context
  // unusable (noteStickyError); 0: none. Any thread.
  int stickyErrorCode() const { return sticky_code_.load(std::memory_order_relaxed); }
  // Benchmark-only (GRAFT_BENCH_SWITCH): stops replaying until resumeReplay().
  // Pausing issues everything held; while paused every op is issued eagerly
  // and nothing is recorded or learned. Graphs built so far are kept, and
  // after resuming the loop is matched against them again from the next op.
  void pauseReplay();
  void resumeReplay();

  EngineStats stats() const;

 private:
  struct Candidate {
    Segment* segment = nullptr;
    bool alive = false;
  };
  struct Mismatch {
    Segment* segment = nullptr;
    size_t index = 0;
  };

  // Ops are issued eagerly and nothing is learned: pass-through, a program
  // capture in progress, or a benchmark pause.
  bool stepsAside() const { return !config_.replay || capture_depth_ > 0 || paused_ || dormant(); }
  bool advance(const OpDesc& op);
  // `expected`: `matched`'s op at this index.
  void hold(const OpDesc& op, const Segment* matched, const OpDesc& expected);
  // Appends `op` to the held ops, borrowing the matched segment's bytes:
  // `shape`, and `sameValue` when its value bytes equal op's (else null: op's
  // are copied and the op is patched at launch).
  void holdAs(const OpDesc& op, const Segment* matched, const uint8_t* shape, const uint8_t* sameValue);
  bool tryStart(const OpDesc& op);
  void afterHeldGrew();
  // Sets soleExpected() for the held ops as they are now.
  void refreshSoleExpected();
  // sole_segment_'s op j becomes soleExpected() (if it is a kernel op).
  void expectSoleAt(size_t j);
  // After `completed` (id + 1, and what it was followed by) replayed and
  // nothing is held: arms soleExpected() with the first op of the segment
  // that followed it last time, when a run starting with that op could match
  // that segment alone (what tryStart would find), so the op that begins the
  // next run takes the fast lane too.
  void armStart(uint32_t completedId, uint32_t followedBy);
  // The armed start is still what tryStart would find: no op since, the
  // same segments, not stepping aside.
  bool armedStartHolds() const {
    return ops_total_ == start_armed_at_ops_ && segments_.generation() == start_armed_gen_ && !stepsAside() &&
           !needs_attention_;
  }
  // holdSoleExpected for an armed start: what tryStart does besides holding.
  void beginArmedStart();
  void resolveHeld(EagerCause cause, const OpDesc* trigger);
  // Counts a try of `segment`: a replay, or a mismatch after which `ops` held
  // ops were issued eagerly (resolveHeld counts only mismatches that issue at
  // least kCostlyMismatchOps: a false start, out of phase, costs next to
  // nothing). Within a window of its last tries, once at least
  // kDropAfterMismatches mismatched and the ops they issued eagerly outnumber
  // the ops it replayed, the segment is dropped: holding its ops mostly
  // delays them and makes graft handle them twice. Its run is offered to
  // buildPiece again after a cool-off that doubles with each drop (run_drops_).
  void countTry(Segment* segment, bool mismatched, size_t ops);
  Segment* longestCompleteMatch(size_t begin, size_t end);
  bool matchesAt(Segment* segment, size_t begin, EventInstances& events);
  void launchHeld(Segment* segment, size_t begin, size_t length);
  // Whether, when the held instance of `segment` at `begin` started, each of
  // its fork candidate's forkNeeded streams had last waited on an event that
  // the join stream recorded as its latest op (see core/launch_plan.h).
  bool forkedBeforeHeld(const Segment& segment, size_t begin) const;
  void noteWait(const OpDesc& op);
  void heldCleared();
  void issueHeldEagerly(const OpDesc& op, EagerCause cause);
  void recordEagerOp(const OpDesc& op, bool boundary);
  void restIfNothingRepeats();
  void startRecordingWindow();
  // At the end of each window of kInterleaveWindowOps ops: rests when the
  // window had a switch between threads at least every kOpsPerThreadSwitch
  // ops and less than half of its ops went through graphs; or a switch at
  // least every kOpsPerThreadSwitchNoGraph ops (threads whose runs are
  // longer, as tight C++ loops contending for the engine lock make them) and
  // under a tenth of its ops through graphs. Threads that hand work over in
  // turn switch less often than either (a forward pass and the autograd
  // thread's backward, a GAN's optimizers: one switch in 25 ops or fewer),
  // and their loop replays within the first window.
  void restIfThreadsInterleave();
  // During a rest for interleaved threads, at the end of each window: ends
  // the rest when the window no longer had a switch every
  // kOpsPerThreadSwitchNoGraph ops (the threads stopped issuing ops at the
  // same time).
  void endRestIfThreadsCalm();
  // Starts a rest (dormant()); `cause` is what its ops are counted as.
  void rest(EagerCause cause);
  void pushBoundaryToken(uint64_t hash);
  void feedDetector(uint64_t tokenHash, uint64_t ops, bool boundary);
  void buildFromPeriod(const PeriodDetector::Confirmation& confirmed);
  // A recurring stretch (PeriodDetector) of `length` tokens, `period`
  // tokens after its copy, ended `after` tokens before the last one
  // recorded: counted by its tokens, and built (split at its boundaries)
  // once seen stretchSightingsToBuild() times in a row (at different places,
  // each within kStretchGapPeriods periods of the one before; each sighting
  // is two copies), when at least kStretchEagerOps of its ops ran eagerly,
  // and no fewer than a quarter as many as graphs replayed of it.
  void noteRecurringStretch(uint32_t length, uint32_t period, uint32_t after);
  static constexpr size_t kStretchEagerOps = 16;
  static constexpr uint32_t kStretchGapPeriods = 4;
  // Judges the stretches built (stretch_builds_): one with a piece that
  // replayed kStretchPaidReplays times paid off and clears stretch_backoff_
  // (stretches in this program do come back); one with a piece retired
  // before any paid off (dropped for mismatching more than it replayed, gone
  // idle) was a coincidence and raises it by one (at most
  // kMaxStretchBackoff). A graph that only waits costs nothing more: it is
  // judged when it pays off or is retired.
  void judgeStretchBuilds();
  // max(warmup - 1, 2), times 2 to the power stretch_backoff_.
  uint32_t stretchSightingsToBuild() const {
    return (std::max<uint32_t>(config_.warmup, 3) - 1) << stretch_backoff_;
  }
  static constexpr uint64_t kStretchPaidReplays = 3;
  static constexpr uint32_t kMaxStretchBackoff = 4;
  static constexpr size_t kMaxStretchBuilds = 64;
  void buildRun(const std::vector<const Token*>& run, bool delimited, bool unrolled);
  // The key of ops [begin, end) as a variant (appended to *key): their shape
  // hashes, and which of their records each wait names (*waitInstance, per
  // op, as BuildRequest wants it). False when they record more events than
  // EventInstances holds (the key is made all the same).
  bool variantKey(const OpBuffer& ops, size_t begin, size_t end, SequenceHash* key,
                  std::vector<int32_t>* waitInstance);
  // Returns false when the piece was refused at GRAFT_MAX_VARIANTS or
  // GRAFT_MAX_SEGMENTS (no idle graph made room); sets *retryAt to when one
  // could next make room.
  // `retrying`: the run was refused before (the refusal is not counted again).
  bool buildPiece(const OpBuffer& ops, size_t begin, size_t end, uint64_t runKey, bool retrying,
                  uint64_t* retryAt);
  // Whether the history still holds what buildRun() needs of token `t`.
  bool heldInHistory(const Token& t) const;
  void logFallback(Segment* segment, size_t index, EagerCause cause, const OpDesc* expected,
                   const OpDesc* actual, size_t heldCount);
  void noteActivity(const OpDesc& op);
  // Takes over the instances whose launch failed on the launch thread.
  void handleFailedLaunches();
  // GRAFT_MAX_VARIANTS variants start with this shape: retires the one
  // replayed longest ago if that was kVariantIdleOps ops ago or more.
  bool evictIdleVariant(uint64_t firstShapeHash);
  // GRAFT_MAX_SEGMENTS segments are live: retires the one replayed longest
  // ago, of any first op, if that was kVariantIdleOps ops ago or more.
  bool evictIdleSegment();
  // Retires the segment of `among` replayed longest ago if that was
  // kVariantIdleOps ops ago or more and it is not being matched; the log
  // names `what` it makes room for and the `option` = `limit` reached.
  bool evictIdlest(const std::vector<Segment*>& among, std::string_view what, std::string_view option,
                   uint32_t limit);
  // Retires an idle segment (its graph destroyed; built again if its run
  // comes back).
  void retireIdle(Segment* victim);
  // Retires every segment not replayed for kSegmentIdleOps ops (at a build,
  // once per kVariantIdleOps ops: next_idle_sweep_at_).
  void retireLongIdle();
  static constexpr uint64_t kSegmentIdleOps = uint64_t(1) << 22;
  uint64_t next_idle_sweep_at_ = kVariantIdleOps;
  // Retires `s` (SegmentStore::retire) and notes it to be freed.
  void retireSegment(Segment* s);
  // Frees the retired segments once nothing refers to them (no held op, no
  // candidate, no mismatch record); else leaves them for a later call.
  void releaseRetired();
  // next_run_retry_at_ reached: the detector reports again (see there).
  void confirmRefusedRunsAgain();
  // Offers `runKey` to buildPiece again at a confirmation once ops_total_
  // reaches `at` (runs_to_retry_; when full, the half due longest ago is
  // forgotten). Allocates.
  void noteRunToRetry(uint64_t runKey, uint64_t at);
  // Destroys the segment's executable graph, if it has one (waits for its
  // queued launches).
  void dropGraph(Segment* s);
  static constexpr uint64_t kVariantIdleOps = uint64_t(1) << 16;
  // One of graft's own driver calls (a graph launch, a node update, an op
  // issued eagerly) got an error that leaves the context unusable. Eagerly
  // every later call fails with it, so replay stops: at the next op or query
  // (here it may be inside a flush), and nothing is held meanwhile.
  void noteStickyError(int rc);
  // At the next op or query after needs_attention_ was set: handles failed
  // launches and stops replay after a sticky error.
  void attendToLaunches();
  void countStream(StreamKey stream);
  // Where the run `ops` is cut into pieces (from 0 to ops.size()): at every
  // change of device context, then by the schedule of scheduleCuts(), moved
  // out of the replayed segments in `segmentSpans` (alignCuts()).
  std::vector<size_t> pieceCuts(const OpBuffer& ops, bool endsAtBarrier,
                                const std::vector<std::pair<size_t, size_t>>& segmentSpans);
  std::vector<size_t> alignCuts(const OpBuffer& ops, std::vector<size_t> cuts,
                                const std::vector<std::pair<size_t, size_t>>& segmentSpans) const;
  std::vector<size_t> scheduleCuts(const OpBuffer& ops, size_t begin, size_t end, bool endsAtBarrier) const;

  // What every op reads or writes, kept together from the lock on, in as few
  // cache lines as they fit (core/hot_path.h).
  alignas(64) EngineMutex mutex_;
  bool started_ = false;
  EagerCause pending_cause_ = EagerCause::NotCaptured;
  bool pending_boundary_ = false;
  bool paused_ = false;
  bool expect_launch_hint_ = false;  // a host barrier since the last run began
  // soleExpected(): valid while held_ is unchanged and sole_expected_ready_.
  bool sole_expected_ready_ = false;
  bool start_armed_ = false;  // soleExpected() is an armed start (armStart); nothing is held
  bool sticky_error_seen_ = false;  // see noteStickyError
  std::atomic<int> sticky_code_{0};  // the first such error graft's own calls got
  bool needs_attention_ = false;    // see attendToLaunches; soleExpected() is off meanwhile
  int capture_depth_ = 0;
  uint64_t boundary_generation_ = 1;  // query relevance (see StreamCounters)
  StreamKey last_stream_ = 0;  // cache for streams_ (unordered_map values stay put)
  struct StreamCounters {
    uint64_t ops = 0;       // for the report, and for fork claims (ops so far, this one included)
    uint64_t activity = 0;  // the boundary generation of its last op (query relevance); 0: none
    // The record of this stream's latest wait: the stream that recorded it,
    // that stream's ops then, the record's and the wait's index among all ops
    // (ops_total_), and this stream's ops after the wait. The stream's later
    // work follows all of `forkedFrom`'s work while that has issued no op since.
    StreamKey forkedFrom = 0;
    uint64_t forkedFromOps = 0;
    uint64_t forkedRecordAtOp = 0;
    uint64_t forkedAtOp = 0;
    uint64_t forkedOwnOps = 0;
    uint64_t forkedContext = 0;  // of a record on a default stream
    uint64_t waitContext = 0;    // of the wait, on a default stream (its key names one stream per context)
    uint64_t createdIn = 0;      // its context, as of its latest creation or destruction graft saw (0: none)
    // The program destroyed the stream and has issued nothing on its handle
    // since: the handle names no stream, and the driver must not be asked
    // about it (it may crash), so runs with ops on it are not built.
    bool destroyed = false;
    uint64_t lastAskedAt = 0;  // ops_total_ + 1 at its last query; 0: never
    bool polled = false;       // queried again with no op between: a place the program waits (query)
    // The current run of queries (with no op between): whether it was a poll,
    // and whether it came in the middle of a held run. A run that did and was
    // no poll (the program went on) clears `polled`.
    bool polledNow = false;
    bool askedMidRun = false;
    NotReadyStreak notReady;  // graft's own answers for it (query)
  };
  StreamCounters* last_stream_counters_ = nullptr;
  // The fast lane's counters (the rest of stats_ is further down), apart so
  // that the compiler does not add them as a vector (a constant's line more).
  // ops_total_ also tells the idle watchdog whether ops were submitted.
  uint64_t ops_total_ = 0;
  uint64_t held_first_op_ = 0;  // ops_total_ of held_[0] (ops are held in a row, as submitted)
  Segment* sole_segment_ = nullptr;  // candidates_[sole_candidate_].segment
  uint64_t ops_sole_expected_ = 0;
  OpDesc sole_expected_;  // second line
  // Third line: the ends of held_matched_ and held_'s records, where the
  // fast lane appends.
  // Per held op: the candidate it was compared with when held (the same
  // index in that segment) and whether its value bytes differ from it.
  struct HeldMatch {
    const Segment* segment;
    bool valueDiffers;
  };
  HotVector<HeldMatch> held_matched_;
  OpBuffer held_;
  size_t num_candidates_ = 0;
  size_t sole_candidate_ = 0;
  // armStart: when the armed start was set up, and the last completed
  // replay (its segment's id + 1, ops_total_ then), which tryStart credits
  // with the segment that followed it (Segment::followedBy).
  uint64_t start_armed_at_ops_ = 0;
  uint64_t start_armed_gen_ = 0;
  uint32_t completed_id_ = 0;
  uint64_t completed_at_ops_ = 0;
  HotVector<Candidate> candidates_;  // GRAFT_MAX_VARIANTS of them: every variant that starts alike is tried
  EngineConfig config_;
  EngineStats stats_;  // opsTotal and opsSoleExpected are ops_total_ and ops_sole_expected_

  History history_;
  std::vector<uint64_t> replay_events_;  // launchHeld(): the replay's event handles, for the history
  PeriodDetector detector_;
  SegmentStore segments_;
  Executor& executor_;
  std::unordered_set<uint64_t> built_runs_;
  // Runs with a piece refused at the variant limit: built again at a later
  // confirmation once ops_total_ reaches the value, when the variant replayed
  // longest ago could have gone idle (a server whose request shapes move on
  // while the old ones were still in use). Bounded (kMaxRunsToRetry).
  std::unordered_map<uint64_t, uint64_t> runs_to_retry_;
  static constexpr size_t kMaxRunsToRetry = 4096;
  // The earliest of runs_to_retry_'s times. When an eagerly recorded op
  // reaches it, the detector reports its confirmed periods again, so that a
  // refused run repeating without a break (confirmed once, never reported
  // again) is offered to buildPiece again.
  uint64_t next_run_retry_at_ = ~uint64_t(0);
  // Recurring stretches seen (noteRecurringStretch), by the hash of their
  // tokens: how often, and the token count when last seen. Cleared when it
  // reaches kMaxRunsToRetry.
  struct StretchSightings {
    uint32_t count = 0;
    uint64_t lastEnd = 0;
  };
  std::unordered_map<uint64_t, StretchSightings> stretch_sightings_;
  // Stretches built, not judged yet (judgeStretchBuilds): the ids of the
  // segments their pieces made, [firstSegment, endSegment). At most
  // kMaxStretchBuilds (the oldest are forgotten unjudged).
  struct StretchBuild {
    uint32_t firstSegment;
    uint32_t endSegment;
  };
  std::vector<StretchBuild> stretch_builds_;
  // A stretch is built once seen (max(warmup, 3) - 1) << stretch_backoff_
  // times: where shapes drawn anew every step make stretches that recur by
  // coincidence (a sequence length that comes back three times in a few
  // steps, then rarely, its pieces starting at ops every step has), their
  // graphs seldom replay and often mismatch, and each costs a build and the
  // held ops of its mismatches until it is dropped.
  uint32_t stretch_backoff_ = 0;
  // Runs whose graph an unload dropped before it paid off, and how often.
  std::unordered_map<uint64_t, uint8_t> runs_dropped_early_;
  // Runs with a segment dropped by countTry, and how often: the run is
  // retried after kDroppedRunCoolOffOps << (drops - 1) ops (at most
  // kDroppedRunMaxDoublings doublings). Cleared when it outgrows
  // kMaxRunsToRetry.
  std::unordered_map<uint64_t, uint8_t> run_drops_;
  std::vector<uint32_t> retired_ids_;  // retired, not yet freed (releaseRetired)
  static constexpr uint64_t kDroppedRunCoolOffOps = 4096;
  static constexpr unsigned kDroppedRunMaxDoublings = 10;
  // built_runs_ is forgotten when it reaches this many runs.
  static constexpr size_t kMaxBuiltRuns = 1 << 16;

  std::vector<EventInstances> candidate_events_;  // one per entry of candidates_
  EventInstances scratch_events_;
  Mismatch last_mismatch_;
  uint64_t dormant_after_ops_ = 0;      // effective EngineConfig::dormantAfterOps (0: never)
  // Info lines of the kinds a long-lived process repeats (GRAFT_INFO_LIMITED):
  // evictions, drops, refusals at the variant limit, fallbacks of new
  // segments, failed builds; each kind logs kChattyInfoLines at info.
  enum Chatty : uint8_t { kChattyEviction, kChattyDrop, kChattyVariantLimit, kChattyFallback, kChattyBuild, kChattyKinds };
  static constexpr uint32_t kChattyInfoLines = 64;
  uint32_t chatty_lines_[kChattyKinds] = {};
  uint64_t recorded_since_build_ = 0;   // ops recorded in the window (from a rest, a judgement, or a build while no graph carried ops in it)
  uint64_t window_via_graph_start_ = 0; // stats_.opsViaGraph when recorded_since_build_ was last reset
  uint64_t dormant_until_ = 0;          // ops_total_ at which the current rest ends (see dormant())
  uint64_t rests_ = 0;
  EagerCause rest_cause_ = EagerCause::Dormant;  // of the current or last rest
  // Threads that interleave (noteSubmitter): the current window's start (in
  // ops_total_ and stats_.opsViaGraph) and its switches between threads.
  struct InterleaveWindow {
    uint64_t startOps = 0;
    uint64_t startViaGraph = 0;
    uint64_t switches = 0;
  };
  static constexpr uint64_t kInterleaveWindowOps = 4096;
  static constexpr uint64_t kOpsPerThreadSwitch = 8;
  static constexpr uint64_t kOpsPerThreadSwitchNoGraph = 32;
  void startInterleaveWindow() { interleave_ = {ops_total_, stats_.opsViaGraph, 0}; }
  uint32_t last_submitter_ = 0;
  InterleaveWindow interleave_;
  uint64_t interleave_rests_ = 0;
  std::vector<uint32_t> patch_;
  std::vector<FailedLaunch> failed_launches_;
  struct Deferred {
    bool isFree;  // cuMemFreeAsync(handle, stream); else cuEventDestroy(handle)
    uint64_t handle;
    StreamKey stream;
    uint64_t domain;  // the context current at the program's call
  };
  std::vector<Deferred> deferred_;

  uint64_t idle_seen_submissions_ = ~uint64_t(0);

  // Query relevance: work issued since the last boundary token.
  std::unordered_map<StreamKey, StreamCounters, std::hash<StreamKey>, std::equal_to<StreamKey>,
                     HotAllocator<std::pair<const StreamKey, StreamCounters>>>
      streams_;
  struct EventRecordInfo {
    uint64_t generation;  // boundary generation of its latest record (query relevance)
    StreamKey stream;     // where it was recorded last
    uint64_t streamOps;   // that stream's ops then, the record included
    uint64_t atOp;        // ops_total_ then
    uint64_t epoch;       // event_epoch_ then
    uint64_t context;     // recorded on a default stream: its context (Executor::contextOfEventOp); else 0
    uint64_t lastAskedAt = 0;  // ops_total_ + 1 at the last query of this record; 0: never
    bool polledNow = false;    // this record was polled (asked about again with no op between)
    bool askedMidRun = false;  // it was asked about while graft held ops
    NotReadyStreak notReady;   // the event's, kept across its records (query)
  };
  // Bumped whenever events may have been recorded out of graft's sight (the
  // program's graph launches and captures, ops graft does not model, ops
  // while it steps aside): older EventRecordInfo no longer name an event's
  // latest record, so a wait on it yields no fork claim.
  uint64_t event_epoch_ = 0;
  std::unordered_map<uint64_t, EventRecordInfo> event_records_;
  // Events the program polls (query): one leaves at a record after one that
  // the program asked about while graft held ops and did not poll.
  std::unordered_set<uint64_t> polled_events_;
  uint64_t queries_answered_not_ready_ = 0;       // off the fast lane's lines
  uint64_t queries_issued_for_progress_ = 0;      // queries taken as polls after graft's answers (NotReadyStreak)
  uint64_t answers_in_a_row_ = 0;  // graft's answers since the driver's success for a target it answered for, or a host wait
  // A default stream's (its key names one stream per context): per context.
  std::unordered_map<uint64_t, NotReadyStreak> default_stream_streaks_;
  uint64_t wait_generation_ = 0;   // host waits (hostWaited): driver modes end
  // Streaks open (NotReadyStreak::open()), and whether there are any: the
  // hook tells queryCompleted and hostWaited only then (read without the
  // lock).
  uint64_t open_streaks_ = 0;
  std::atomic<bool> streaks_open_{false};
  // A streak ends (the driver's success, or its target is gone).
  void endStreak(NotReadyStreak& streak);

  std::chrono::steady_clock::time_point start_;
};

}  // namespace graft::core
