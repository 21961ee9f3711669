#include "core/engine.h"

#include "core/hot_path.h"
#include "core/stage_clock.h"

#include <algorithm>

#include "log/log.h"

namespace graft::core {
namespace {

constexpr uint64_t kBoundarySalt = 0xb0a7da4e5a17ull;
constexpr uint64_t kSegmentSalt = 0x5e63e47ull;
constexpr uint64_t kWaitInstanceSalt = 0x3a17e1157a1ceull;
constexpr size_t kHeldReserveOps = 4096;
constexpr size_t kHeldReserveBytes = 1 << 20;
constexpr size_t kMaxAutoPiece = 1024;  // longest piece of the automatic schedule, in ops
constexpr size_t kCutSearch = 16;       // how far a cut may move to land before a unique op

size_t nextPow2(size_t v) {
  size_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

std::string_view toString(EagerCause c) {
  switch (c) {
    case EagerCause::None: return "none";
#define GRAFT_CAUSE_CASE(name, text, doc) \
  case EagerCause::name: return text;
      GRAFT_EAGER_CAUSES(GRAFT_CAUSE_CASE)
#undef GRAFT_CAUSE_CASE
    case EagerCause::Count: break;
  }
  return "unknown";
}

Engine::Engine(const EngineConfig& config, Executor& executor)
    : config_(config),
      history_(nextPow2(size_t(config.maxPeriod) + 1), nextPow2(size_t(config.maxPeriod) * 2 + 1),
               size_t(32) << 20),
      detector_(config.warmup, config.maxPeriod),
      executor_(executor) {
  if (config.dormantAfterOps)
    dormant_after_ops_ = std::max<uint64_t>(config.dormantAfterOps, uint64_t(config.warmup + 1) * config.maxPeriod);
  held_.reserve(kHeldReserveOps, kHeldReserveBytes);
  held_matched_.reserve(kHeldReserveOps);
  failed_launches_.reserve(64);
  patch_.reserve(kHeldReserveOps);
  streams_.reserve(64);
  // As many candidates as variants may start alike (SegmentStore refuses more).
  candidates_.resize(std::max<uint32_t>(config.maxVariants, 1));
  candidate_events_.resize(candidates_.size());
}

Engine::~Engine() {
  for (const auto& s : segments_.all()) {
    if (s && s->graph) executor_.destroy(s->graph);
  }
}

// ---------------------------------------------------------------------------
// Submission

GRAFT_FAST_LANE void Engine::countStream(StreamKey stream) {
  // Programs usually issue many ops in a row on one stream: cache its entry.
  // (Pointers into unordered_map values stay valid; entries are never erased.)
  if (stream != last_stream_ || !last_stream_counters_) {
    last_stream_ = stream;
    last_stream_counters_ = &streams_[stream];
    last_stream_counters_->destroyed = false;  // an op on the handle: a stream again
  }
  ++last_stream_counters_->ops;
}

// Inline (as holdAs and expectSoleAt): the fast lane calls it for every op.
[[gnu::always_inline]] inline void Engine::noteActivity(const OpDesc& op) {
  last_stream_counters_->activity = boundary_generation_;  // countStream() ran first for op.stream
  if (op.kind == OpKind::EventRecord) {
    // The legacy and per-thread stream keys name one stream per context.
    const uint64_t context = isDefaultStream(op.stream) ? executor_.contextOfEventOp(op) : 0;
    EventRecordInfo& info = event_records_[op.event];
    // A program that waits on an event in every step polls its records; a
    // caching allocator that asked twice in a row about a block's event, and
    // reuses the event from a pool for other blocks, asks between launches and
    // goes on: the event stops being treated as polled once the program asked
    // about a record of it in the middle of a held run and did not poll. (A
    // record nobody asked about says nothing, nor one asked about while graft
    // held nothing, as where a poll's learned graph ended before the query and
    // the GPU was done at the first one.)
    if (info.askedMidRun && !info.polledNow && !polled_events_.empty()) [[unlikely]]
      polled_events_.erase(op.event);
    const NotReadyStreak streak = info.notReady;  // the event's, not the record's
    info = {boundary_generation_, op.stream, last_stream_counters_->ops, ops_total_,
            event_epoch_, context, 0, false, false, streak};  // a new record: not asked about yet
  } else if (op.kind == OpKind::EventWait) [[unlikely]] {
    noteWait(op);
  }
}

void Engine::noteWait(const OpDesc& op) {
  auto it = event_records_.find(op.event);
  StreamCounters& c = *last_stream_counters_;
  if (it == event_records_.end() || it->second.epoch != event_epoch_) {
    // A no-op wait (never recorded), or one whose record graft may not have
    // seen: the stream's earlier claim stays true, as waits only add order.
    return;
  }
  c.forkedFrom = it->second.stream;
  // The legacy and per-thread stream keys name one stream per context: which
  // one waited.
  c.waitContext = isDefaultStream(op.stream) ? executor_.contextOfEventOp(op) : 0;
  c.forkedFromOps = it->second.streamOps;
  c.forkedRecordAtOp = it->second.atOp;
  c.forkedContext = it->second.context;
  c.forkedAtOp = ops_total_;
  c.forkedOwnOps = c.ops;
}

GRAFT_HOT Decision Engine::submit(const OpDesc& op) {
  if (!started_) {
    started_ = true;
    start_ = std::chrono::steady_clock::now();
  }
  if (needs_attention_) [[unlikely]] attendToLaunches();
  ++ops_total_;
  countStream(op.stream);
  if (stepsAside()) {
    ++event_epoch_;
    pending_cause_ = capture_depth_ > 0 ? EagerCause::ProgramCapture : EagerCause::NotCaptured;
    pending_boundary_ = false;
    drainLaunches();
    return Decision::IssueNow;
  }
  noteActivity(op);

  if (op.kind == OpKind::Boundary) {
    ++event_epoch_;  // it may record an event graft does not see (per-thread stream, program graph, ...)
    if (!held_.empty()) resolveHeld(EagerCause::BoundaryInSegment, &op);
    pending_cause_ = op.cause;
    pending_boundary_ = true;
    drainLaunches();
    return Decision::IssueNow;
  }
  if (!held_.empty()) {
    if (advance(op)) return Decision::Held;
    resolveHeld(EagerCause::Mismatch, &op);
  }
  if (tryStart(op)) return Decision::Held;
  pending_cause_ = EagerCause::NotCaptured;
  pending_boundary_ = false;
  drainLaunches();
  return Decision::IssueNow;
}

GRAFT_FAST_LANE void Engine::holdSoleExpected(Bytes value) {
  // What submit() does for an op that advance() holds while one candidate is
  // live, it expects this op and no completed candidate waits (see
  // refreshSoleExpected): the same counts, and the same hold. With one live
  // candidate that the op does not complete, afterHeldGrew() would only find
  // that candidate again and expect its next op, which is done here directly.
  // An armed start (nothing held) is what tryStart() would do for the op.
  if (held_.empty()) [[unlikely]] beginArmedStart();
  ++ops_total_;
  ++ops_sole_expected_;
  countStream(sole_expected_.stream);
  noteActivity(sole_expected_);
  // `value` is sole_expected_'s own bytes exactly when they are equal.
  const bool valueDiffers = value.data != sole_expected_.value.data;
  // sole_expected_ becomes the held op (it is replaced below in every case).
  sole_expected_.value = value;
  holdAs(sole_expected_, sole_segment_, sole_expected_.shape.data, valueDiffers ? nullptr : value.data);
  const size_t j = held_.size();
  if (j >= sole_segment_->length()) {  // complete: afterHeldGrew() launches it
    afterHeldGrew();
    return;
  }
  expectSoleAt(j);
}

[[gnu::always_inline]] inline void Engine::expectSoleAt(size_t j) {
  sole_expected_ = sole_segment_->ops.view(j);
  sole_expected_ready_ = sole_expected_.kind == OpKind::Kernel;
}

GRAFT_HOT void Engine::beginArmedStart() {
  // tryStart's candidates, which armStart made sure are this one alone.
  start_armed_ = false;
  candidate_events_[0].clear();
  candidates_[0] = {sole_segment_, true};
  num_candidates_ = 1;
  sole_candidate_ = 0;
  last_mismatch_ = {};
  if (expect_launch_hint_) {
    expect_launch_hint_ = false;
    executor_.expectLaunch();
  }
}

GRAFT_HOT void Engine::armStart(uint32_t completedId, uint32_t followedBy) {
  completed_id_ = completedId;
  completed_at_ops_ = ops_total_;
  if (!followedBy || stepsAside() || needs_attention_) return;
  Segment* next = segments_.byId(followedBy - 1);
  if (!next || next->disabled) return;
  const OpDesc first = next->ops.view(0);
  if (first.kind != OpKind::Kernel) return;
  // tryStart takes every live segment whose first op has this shape: armed
  // only when that is `next` alone.
  const std::vector<Segment*>* list = segments_.startingWith(first.shapeHash);
  if (!list) return;
  size_t alike = 0;
  for (const Segment* s : *list) alike += sameShape(s->ops.view(0), first);
  if (alike != 1) return;
  sole_segment_ = next;
  sole_expected_ = first;
  sole_expected_ready_ = true;
  start_armed_ = true;
  start_armed_at_ops_ = ops_total_;
  start_armed_gen_ = segments_.generation();
}

GRAFT_HOT void Engine::refreshSoleExpected() {
  sole_expected_ready_ = false;
  start_armed_ = false;
  if (held_.empty() || stepsAside() || needs_attention_) return;
  const size_t j = held_.size();
  size_t live = 0;
  for (size_t c = 0; c < num_candidates_; ++c) {
    if (!candidates_[c].alive) continue;
    // A live candidate that is complete (j == length) is retired by the next
    // advance(); the fast lane does not do that, so it is not taken then.
    if (++live > 1 || j >= candidates_[c].segment->length()) return;
    sole_candidate_ = c;
  }
  if (live != 1) return;
  sole_segment_ = candidates_[sole_candidate_].segment;
  expectSoleAt(j);
}

GRAFT_HOT bool Engine::expectedNext(OpDesc* out) const {
  if (held_.empty() || stepsAside()) return false;
  const size_t j = held_.size();
  for (size_t c = 0; c < num_candidates_; ++c) {
    const Candidate& cand = candidates_[c];
    if (!cand.alive || j >= cand.segment->length()) continue;
    *out = cand.segment->ops.view(j);
    return true;
  }
  return false;
}

GRAFT_HOT void Engine::drainLaunches() {
  executor_.drain(&failed_launches_);
  if (!failed_launches_.empty()) [[unlikely]] handleFailedLaunches();
}

GRAFT_COLD void Engine::handleFailedLaunches() {
  // Each entry is one instance whose ops were issued eagerly instead; its
  // graph is not used again (it may hold some of its updates only).
  for (const FailedLaunch& f : failed_launches_) {
    if (f.stickyError) noteStickyError(f.stickyError);
    stats_.opsViaGraph -= std::min<uint64_t>(stats_.opsViaGraph, f.ops);
    stats_.eagerByCause[size_t(EagerCause::LaunchFailed)] += f.ops;
    stats_.replays -= std::min<uint64_t>(stats_.replays, 1);
    if (!f.graph) continue;
    for (const auto& s : segments_.all()) {
      if (!s || s->graph != f.graph) continue;
      logFallback(s.get(), 0, EagerCause::LaunchFailed, nullptr, nullptr, s->length());
      GRAFT_WARN("segment #{}: its graph launch failed; its {} ops were issued eagerly and it is "
                 "disabled", s->id, s->length());
      segments_.disable(s.get());
      // Ops held now may be matching it: they go on with the other candidates.
      for (size_t c = 0; c < num_candidates_; ++c)
        if (candidates_[c].segment == s.get()) candidates_[c].alive = false;
      if (last_mismatch_.segment == s.get()) last_mismatch_ = {};
      s->graph = nullptr;
      executor_.destroy(f.graph);
      break;
    }
  }
  failed_launches_.clear();
  refreshSoleExpected();  // candidates may have died
}

void Engine::countPassthrough(StreamKey stream) {
  ++ops_total_;
  ++event_epoch_;  // its records are not tracked
  countStream(stream);
  ++stats_.eagerByCause[size_t(EagerCause::NotCaptured)];
}

void Engine::countDormant(StreamKey stream) {
  ++ops_total_;
  ++event_epoch_;  // its records are not tracked
  countStream(stream);
  ++stats_.eagerByCause[size_t(rest_cause_)];
  drainLaunches();  // none can be pending in a rest; kept for the rule that every op does it
  if (rest_cause_ == EagerCause::ThreadsInterleave && ops_total_ - interleave_.startOps >= kInterleaveWindowOps)
    endRestIfThreadsCalm();
}

GRAFT_HOT void Engine::completeIssued(const OpDesc& op, bool succeeded) {
  ++stats_.eagerByCause[size_t(pending_cause_)];
  if (!succeeded && (op.kind == OpKind::EventRecord || op.kind == OpKind::EventWait)) [[unlikely]] {
    // A record or wait the driver refused changed nothing, but noteActivity
    // took it for done: nothing graft knows of the event's records, nor of
    // what the stream's later work follows, holds any longer.
    if (op.kind == OpKind::EventRecord) {
      if (auto it = event_records_.find(op.event); it != event_records_.end()) {
        endStreak(it->second.notReady);
        event_records_.erase(it);
      }
    }
    else if (last_stream_counters_) last_stream_counters_->forkedFrom = 0;  // (its counters: countStream ran for it)
  }
  if (stepsAside() || !succeeded) return;
  recordEagerOp(op, pending_boundary_);
}

// ---------------------------------------------------------------------------
// Deferred matching

GRAFT_HOT bool Engine::tryStart(const OpDesc& op) {
  const std::vector<Segment*>* list = segments_.startingWith(op.shapeHash);
  if (!list) return false;
  num_candidates_ = 0;
  for (Segment* s : *list) {
    if (num_candidates_ == candidates_.size()) break;
    const OpDesc first = s->ops.view(0);
    if (!sameShape(first, op)) continue;
    EventInstances& events = candidate_events_[num_candidates_];
    events.clear();
    if (op.kind == OpKind::EventRecord && events.record(op.event) == EventInstances::kOverflow)
      continue;
    if (op.kind == OpKind::EventWait && events.wait(op.event) != s->waitInstance[0]) continue;
    candidates_[num_candidates_++] = {s, true};
  }
  if (num_candidates_ == 0) return false;
  // The run began right after a replay completed: that segment is followed
  // by this one (armStart), while one candidate alone is what such a run finds.
  if (completed_id_ && completed_at_ops_ + 1 == ops_total_)
    if (Segment* previous = segments_.byId(completed_id_ - 1))
      previous->followedBy = num_candidates_ == 1 ? candidates_[0].segment->id + 1 : 0;
  last_mismatch_ = {};
  if (expect_launch_hint_) {
    // The first run after the host waited: the GPU is likely idle, so the
    // launch this run may become is latency-critical (Executor::expectLaunch).
    expect_launch_hint_ = false;
    executor_.expectLaunch();
  }
  hold(op, candidates_[0].segment, candidates_[0].segment->ops.view(0));
  afterHeldGrew();
  return true;
}

GRAFT_HOT bool Engine::advance(const OpDesc& op) {
  const size_t j = held_.size();
  Segment* matched = nullptr;  // the first candidate still matching
  OpDesc matchedExpected;       // its op at j
  for (size_t c = 0; c < num_candidates_; ++c) {
    Candidate& cand = candidates_[c];
    if (!cand.alive) continue;
    Segment* s = cand.segment;
    if (j >= s->length()) {  // completed earlier, waiting for a longer one
      cand.alive = false;
      continue;
    }
    const OpDesc expected = s->ops.view(j);
    bool ok = sameShape(expected, op);
    if (ok && op.kind == OpKind::EventRecord)
      ok = candidate_events_[c].record(op.event) != EventInstances::kOverflow;
    if (ok && op.kind == OpKind::EventWait)
      ok = candidate_events_[c].wait(op.event) == s->waitInstance[j];
    if (!ok) {
      cand.alive = false;
      if (!last_mismatch_.segment || s->length() > last_mismatch_.segment->length())
        last_mismatch_ = {s, j};
      continue;
    }
    if (!matched) {
      matched = s;
      matchedExpected = expected;
    }
  }
  if (!matched) return false;
  hold(op, matched, matchedExpected);
  afterHeldGrew();
  return true;
}

GRAFT_HOT void Engine::hold(const OpDesc& op, const Segment* matched, const OpDesc& expected) {
  // `op` has the shape of `matched`'s op at this index: borrow those bytes,
  // and its value bytes too when they are equal (no patch needed then).
  // A launch at held index b of a segment of length L overwrites (patches)
  // only that segment's ops below L and consumes held ops up to b + L - 1, so
  // held op j, which borrows op j, is consumed no later than any launch that
  // could overwrite what it borrows.
  holdAs(op, matched, expected.shape.data, op.value == expected.value ? expected.value.data : nullptr);
}

[[gnu::always_inline]] inline void Engine::holdAs(const OpDesc& op, const Segment* matched, const uint8_t* shape,
                              const uint8_t* sameValue) {
  if (held_.empty()) [[unlikely]] held_first_op_ = ops_total_;
  held_.pushBorrowing(op, shape, sameValue);
  held_matched_.push_back({matched, sameValue == nullptr});
}

GRAFT_FAST_LANE void Engine::afterHeldGrew() {
  const size_t n = held_.size();
  Segment* done = nullptr;
  bool longerAlive = false;
  for (size_t c = 0; c < num_candidates_; ++c) {
    const Candidate& cand = candidates_[c];
    if (!cand.alive) continue;
    if (cand.segment->length() == n && !done) done = cand.segment;
    else if (cand.segment->length() > n) longerAlive = true;
  }
  if (!done || longerAlive) {
    refreshSoleExpected();
    return;
  }
  num_candidates_ = 0;
  const uint32_t doneId = done->id + 1, followedBy = done->followedBy;  // (launchHeld may retire it)
  launchHeld(done, 0, n);
  heldCleared();
  armStart(doneId, followedBy);
}

bool Engine::matchesAt(Segment* s, size_t begin, EventInstances& events) {
  events.clear();
  for (size_t k = 0; k < s->length(); ++k) {
    const OpDesc op = held_.view(begin + k);
    const OpDesc expected = s->ops.view(k);
    if (!sameShape(expected, op)) return false;
    if (op.kind == OpKind::EventRecord && events.record(op.event) == EventInstances::kOverflow)
      return false;
    if (op.kind == OpKind::EventWait && events.wait(op.event) != s->waitInstance[k]) return false;
  }
  return true;
}

Segment* Engine::longestCompleteMatch(size_t begin, size_t end) {
  const std::vector<Segment*>* list = segments_.startingWith(held_.view(begin).shapeHash);
  if (!list) return nullptr;
  for (Segment* s : *list) {
    if (s->length() > end - begin) continue;
    if (matchesAt(s, begin, scratch_events_)) return s;
  }
  return nullptr;
}

namespace {
// Engine::countTry: the window of a segment's last tries, the mismatches in
// it that make a segment worth dropping, and the held ops a mismatch must
// issue eagerly to count at all.
constexpr uint32_t kSegmentTryWindow = 64;
constexpr uint32_t kDropAfterMismatches = 16;
constexpr size_t kCostlyMismatchOps = 4;
}  // namespace

void Engine::resolveHeld(EagerCause cause, const OpDesc* trigger) {
  const size_t n = held_.size();
  // Log against the longest segment that was being matched.
  Segment* primary = last_mismatch_.segment;
  size_t index = last_mismatch_.index;
  for (size_t c = 0; c < num_candidates_; ++c) {
    Segment* s = candidates_[c].segment;
    if (!primary || s->length() > primary->length()) {
      primary = s;
      index = n;
    }
  }
  if (primary) {
    OpDesc expected;
    const bool haveExpected = index < primary->length();
    if (haveExpected) expected = primary->ops.view(index);
    logFallback(primary, index, cause, haveExpected ? &expected : nullptr, trigger, n);
  }
  num_candidates_ = 0;
  last_mismatch_ = {};

  size_t i = 0;
  size_t issuedEagerly = 0;
  while (i < n) {
    if (Segment* s = longestCompleteMatch(i, n)) {
      launchHeld(s, i, s->length());
      i += s->length();
    } else {
      issueHeldEagerly(held_.view(i), cause);
      ++i;
      ++issuedEagerly;
    }
  }
  heldCleared();
  // A false start (the first op or few of a segment matching out of phase)
  // costs next to nothing and is not counted.
  if (cause == EagerCause::Mismatch && primary && issuedEagerly >= kCostlyMismatchOps && !primary->disabled)
    countTry(primary, true, issuedEagerly);
}

void Engine::countTry(Segment* s, bool mismatched, size_t ops) {
  if (s->windowTries == kSegmentTryWindow) {
    s->windowTries = s->windowMismatches = 0;
    s->windowReplayedOps = s->windowWastedOps = 0;
  }
  ++s->windowTries;
  if (!mismatched) {
    s->windowReplayedOps += ops;
    s->mismatchesSinceReplay = 0;
    return;
  }
  ++s->windowMismatches;
  ++s->mismatchesSinceReplay;
  s->windowWastedOps += ops;
  GRAFT_TRACE("segment #{} mismatched: {} held ops issued eagerly", s->id, ops);
  if (s->windowMismatches < kDropAfterMismatches) return;
  // Held ops are held for every live segment that starts as they do, and a
  // mismatch is charged to one of them (the longest that died) though the
  // run was often a sibling variant's not built yet or refused at
  // GRAFT_MAX_VARIANTS: weigh the waste against what the whole group replayed,
  // or variants taking turns at random drop each other for good.
  // One that has not replayed since its last kDropAfterMismatches mismatches
  // is judged alone: its shape may have moved on for good (a grid that grows
  // with a KV cache).
  uint64_t replayed = s->windowReplayedOps;
  if (s->mismatchesSinceReplay < kDropAfterMismatches)
    if (const std::vector<Segment*>* group = segments_.startingWith(s->firstShapeHash()))
      for (const Segment* sibling : *group)
        if (sibling != s) replayed += sibling->windowReplayedOps;
  if (s->windowWastedOps <= replayed) return;
  GRAFT_INFO_LIMITED(chatty_lines_[kChattyDrop], kChattyInfoLines, "segments dropped",
             "segment #{} ({} ops): in its last {} tries it replayed {} ops (with the variants that start "
             "alike, {}) and mismatched {} times, issuing {} held ops eagerly: dropped after {} ops (its ops run "
             "eagerly or through other graphs; it may be built again later)",
             s->id, s->length(), s->windowTries, s->windowReplayedOps, replayed, s->windowMismatches,
             s->windowWastedOps, ops_total_);
  // Built again after a cool-off that doubles with each drop of its run: a
  // segment charged for its siblings' runs (variants not built yet, or refused
  // at GRAFT_MAX_VARIANTS, mismatch it at their first differing op) replays
  // well once they have graphs; one that keeps mismatching costs a build and
  // at most a window of tries per cool-off.
  if (last_mismatch_.segment == s) last_mismatch_ = {};
  retireSegment(s);
  dropGraph(s);
  ++stats_.segmentsDropped;
  // Runs refused a graph wait for one to go idle; one just went: they may
  // try again soon. Not those cooling off after a drop of their own (the
  // dropped run itself included, below).
  for (auto& [key, at] : runs_to_retry_)
    if (at > ops_total_ + 1024 && !run_drops_.contains(key)) {
      at = ops_total_ + 1024;
      next_run_retry_at_ = std::min(next_run_retry_at_, at);
    }
  uint8_t& drops = run_drops_[s->runKey];
  drops = uint8_t(std::min<unsigned>(drops + 1u, 255u));
  const uint64_t coolOff = kDroppedRunCoolOffOps << std::min<unsigned>(drops - 1u, kDroppedRunMaxDoublings);
  noteRunToRetry(s->runKey, ops_total_ + coolOff);
  if (run_drops_.size() > kMaxRunsToRetry) run_drops_.clear();  // forget the oldest history wholesale
}

void Engine::noteRunToRetry(uint64_t runKey, uint64_t at) {
  if (runs_to_retry_.size() >= kMaxRunsToRetry && !runs_to_retry_.contains(runKey)) {
    // Full of runs that have not come back: forget those due longest ago (a
    // server's shapes that moved on); forgotten runs are built anew, not
    // retried, if they ever return.
    std::vector<std::pair<uint64_t, uint64_t>> due(runs_to_retry_.begin(), runs_to_retry_.end());
    std::nth_element(due.begin(), due.begin() + due.size() / 2, due.end(),
                     [](const auto& a, const auto& b) { return a.second < b.second; });
    for (size_t k = 0; k <= due.size() / 2; ++k) {
      runs_to_retry_.erase(due[k].first);
      built_runs_.erase(due[k].first);
    }
    GRAFT_DEBUG("{} runs to retry forgotten (kMaxRunsToRetry={})", due.size() / 2 + 1, kMaxRunsToRetry);
  }
  uint64_t& when = runs_to_retry_[runKey];
  when = std::max(when, at);
  next_run_retry_at_ = std::min(next_run_retry_at_, when);
}

bool Engine::forkedBeforeHeld(const Segment& s, size_t begin) const {
  const uint64_t segmentStart = held_first_op_ + begin;  // ops_total_ of its first op
  // A stream's ops when the instance began: its ops now less those submitted
  // since (the held ops from `begin` on, and the op being submitted if it was
  // counted but not held: held ops are the latest ops, in a row). ~0: unknown.
  const bool countedNotHeld = ops_total_ >= held_first_op_ + held_.size();
  auto opsAtStart = [&](StreamKey stream) -> uint64_t {
    auto it = streams_.find(stream);
    if (it == streams_.end()) return ~uint64_t(0);
    uint64_t since = countedNotHeld && last_stream_ == stream;
    for (size_t k = begin; k < held_.size(); ++k) since += held_.view(k).stream == stream;
    return it->second.ops - since;
  };
  const StreamKey join = s.fork.joinsInto;
  const uint64_t joinOpsAtStart = opsAtStart(join);
  if (joinOpsAtStart == ~uint64_t(0)) return false;
  for (StreamKey b : s.fork.forkNeeded) {
    auto it = streams_.find(b);
    if (it == streams_.end()) return false;
    const StreamCounters& c = it->second;
    if (c.forkedFrom != join || c.forkedAtOp >= segmentStart || c.forkedFromOps != joinOpsAtStart) return false;
    if (isDefaultStream(join) && c.forkedContext != s.fork.context) return false;  // another context's record
    if (isDefaultStream(b) && c.waitContext != s.fork.context) return false;        // another context's wait
    if (s.fork.joinSyncsImplicitly) {
      // A launch on the join stream also waits for whatever the legacy
      // stream's implicit synchronization orders before it, issued up to the
      // segment's start; b followed that only up to the record. So: the wait
      // came right after the record, and b alone issued ops since.
      const uint64_t bOpsAtStart = opsAtStart(b);
      if (c.forkedAtOp != c.forkedRecordAtOp + 1 || bOpsAtStart == ~uint64_t(0) ||
          bOpsAtStart - c.forkedOwnOps != segmentStart - c.forkedAtOp - 1)
        return false;
    }
  }
  return true;
}

GRAFT_HOT void Engine::launchHeld(Segment* s, size_t begin, size_t length) {
  if (!s->graph) {  // disabled while its ops were held
    for (size_t k = 0; k < length; ++k) issueHeldEagerly(held_.view(begin + k), EagerCause::LaunchFailed);
    return;
  }
  patch_.clear();
  for (size_t k = 0; k < length; ++k) {
    // Held op k was compared with its segment's op k when it was held.
    const HeldMatch& m = held_matched_[begin + k];
    const bool differs = begin == 0 && m.segment == s
                             ? m.valueDiffers
                             : !(held_.view(begin + k).value == s->ops.view(k).value);
    if (differs) patch_.push_back(uint32_t(k));
  }
  const OpRange ops(held_, begin, length);
  std::string why;
  int rc;
  {
    StageTimer timer(Stage::Launch);
    const bool onJoinStream = s->fork.joinsInto && forkedBeforeHeld(*s, begin);
    rc = executor_.launch(s->graph, ops, patch_, onJoinStream, &why);
  }
  if (rc != 0) {
    if (executor_.isStickyError(rc)) noteStickyError(rc);
    // An outdated graph (streams created again with other flags) is a
    // mismatch and retired; any other failure disables the segment.
    const bool outdated = rc == Executor::kGraphOutdated;
    const EagerCause cause = outdated ? EagerCause::Mismatch : EagerCause::LaunchFailed;
    logFallback(s, 0, cause, nullptr, nullptr, length);
    if (outdated) {
      GRAFT_INFO("segment #{}: {}; issuing its {} ops eagerly and dropping its graph (built again when "
                 "its run repeats)", s->id, why, length);
      retireSegment(s);
      built_runs_.erase(s->runKey);  // its run may be built again, with the streams as they are now
    } else {
      GRAFT_WARN("segment #{}: {}; issuing its {} ops eagerly and disabling it", s->id, why, length);
      segments_.disable(s);
    }
    dropGraph(s);
    for (size_t k = 0; k < length; ++k) issueHeldEagerly(held_.view(begin + k), cause);
    return;
  }
  for (uint32_t k : patch_) s->ops.setValue(k, ops[k].value);
  ++s->replays;
  s->lastUsedAtOp = ops_total_;
  countTry(s, false, length);
  s->patches += patch_.size();
  ++stats_.replays;
  stats_.patches += patch_.size();
  stats_.opsViaGraph += length;
  if (stats_.firstReplaySeconds < 0) {
    stats_.firstReplaySeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    GRAFT_INFO("first replay after {:.3f} s (segment #{}, {} ops)", stats_.firstReplaySeconds,
               s->id, length);
  }
  GRAFT_TRACE("token {:#018x} segment #{} ({} ops, {} patched)", s->tokenHash, s->id, length,
              patch_.size());
  // The events this replay named (Segment::eventOps; reserved when built).
  replay_events_.clear();
  for (uint32_t k : s->eventOps) replay_events_.push_back(held_.view(begin + k).event);
  history_.pushSegment(s->id, s->tokenHash, replay_events_.data(), uint32_t(replay_events_.size()));
  feedDetector(s->tokenHash, length, false);
  // A queued launch failed (the launch thread halted): dealt with at the next
  // op, which the fast lane leaves to submit() meanwhile, so that a sticky
  // error there stops replay within a launch rather than at the next sync.
  if (executor_.launchesHalted()) [[unlikely]] needs_attention_ = true;
}

void Engine::issueHeldEagerly(const OpDesc& op, EagerCause cause) {
  int rc;
  {
    StageTimer timer(Stage::Reissue);
    rc = executor_.issue(op);
  }
  if (rc != 0) {
    if (stats_.reissueErrors++ == 0)
      GRAFT_WARN("re-issuing a held op ({}) returned driver error {}", executor_.describe(op), rc);
    if (executor_.isStickyError(rc)) noteStickyError(rc);
  }
  ++stats_.eagerByCause[size_t(cause)];
  if (rc == 0) recordEagerOp(op, false);
}

// ---------------------------------------------------------------------------
// Barriers, queries, capture

void Engine::hostBarrier(uint64_t barrierHash) {
  expect_launch_hint_ = true;
  ++event_epoch_;  // some barriers record events (cuCtxRecordEvent, green contexts)
  if (!stepsAside()) {
    if (!held_.empty()) resolveHeld(EagerCause::SyncInSegment, nullptr);
    pushBoundaryToken(hashCombine(barrierHash, kBoundarySalt));
  }
  drainLaunches();
}

QueryAnswer Engine::query(StreamKey stream, uint64_t event, uint64_t queryHash, uint64_t context) {
  if (needs_attention_) [[unlikely]] attendToLaunches();
  // What a query observes is work the program issued before it. Everything
  // graft does not hold was issued before everything it holds, so the query
  // needs none of the held ops unless its target is among them: the event's
  // latest record, or, for a stream, any op on that stream. Then that work is
  // truly not complete (not even issued), and graft answers CUDA_ERROR_NOT_READY
  // itself and leaves the held run alone (a caching allocator asking about a
  // block's event between launches). A target asked about again with no op
  // issued since is being polled: from then on its queries are places where
  // the program waits, where graft issues everything it holds and which it
  // learns as segment boundaries, so that a poll in every step ends a graph
  // there (what graft did for every query before it answered any itself).
  // It stays polled while the program waits for it: an event until the
  // program asked about one of its records in the middle of a held run and did
  // not poll it (it went on), a stream likewise for a run of queries of it
  // (with no op between). A caching allocator asks about the same pooled
  // event twice in a row now and then, and must not lose graft's answers for
  // good.
  if (!stepsAside()) {
    bool inGeneration = false, targetHeld = false, polled = false;
    uint64_t* lastAsked = nullptr;
    StreamCounters* counters = nullptr;  // a stream query's target
    EventRecordInfo* record = nullptr;   // an event query's target
    if (event) {
      auto it = event_records_.find(event);
      if (it != event_records_.end()) {
        record = &it->second;
        inGeneration = record->generation == boundary_generation_;
        targetHeld = inGeneration && !held_.empty() && record->atOp >= held_first_op_ &&
                     record->atOp < held_first_op_ + held_.size();
        lastAsked = &record->lastAskedAt;
      }
      polled = polled_events_.count(event) != 0;
    } else {
      auto it = streams_.find(stream);
      const bool ownGeneration = it != streams_.end() && it->second.activity == boundary_generation_;
      // A query of the legacy stream also answers for the pending work of
      // its context's blocking streams (the driver's answer on an H100:
      // tests/gpu/traps_r13.cu, legacy_query_gate), held work there included.
      const bool countsBlocking = stream == kLegacyStream && context;
      // Only waits held on it: the stream may have nothing to do (a wait on
      // an event never recorded, or on a record that is complete, does
      // nothing), which only the driver can tell once they are issued
      // (tests/gpu/traps_edge.cu, noop_query).
      bool waitsHeld = false, blockingHeld = false;
      for (size_t k = 0; k < held_.size() && !targetHeld; ++k) {
        const OpDesc h = held_.view(k);
        if (h.stream == stream) {
          if (!ownGeneration) continue;
          if (context && isDefaultStream(stream)) {  // another context's default stream is another stream
            uint64_t c = executor_.domainOf(h);
            if (!c) c = executor_.contextOfEventOp(h);
            if (c && c != context) continue;
          }
        } else if (countsBlocking && executor_.pendsLegacyQuery(h.stream, context)) {
          blockingHeld = true;
        } else {
          continue;
        }
        if (h.kind == OpKind::EventWait) waitsHeld = true;
        else targetHeld = true;
      }
      // Its queries are counted (polls) even if it has had no op of its own.
      if (blockingHeld && it == streams_.end()) it = streams_.try_emplace(stream).first;
      if (it != streams_.end()) {
        inGeneration = ownGeneration || blockingHeld;
        if (waitsHeld && !targetHeld) resolveHeld(EagerCause::QueryInSegment, nullptr);
        counters = &it->second;
        lastAsked = &counters->lastAskedAt;
        polled = counters->polled;
      }
    }
    if (lastAsked) {
      const bool askedAgain = *lastAsked == ops_total_ + 1;  // no op since: a poll
      if (counters && !askedAgain) {
        // A new run of queries of the stream: it stays polled unless the last
        // run was asked in the middle of a held run and was no poll (as for an
        // event's records; noteActivity).
        if (counters->askedMidRun && !counters->polledNow) polled = counters->polled = false;
        counters->polledNow = counters->askedMidRun = false;
      }
      if (!held_.empty()) {  // asked in the middle of a held run (see noteActivity)
        if (record) record->askedMidRun = true;
        if (counters) counters->askedMidRun = true;
      }
      if (askedAgain) {
        if (record) record->polledNow = true;
        if (counters) counters->polledNow = true;
        if (!polled) {
          polled = true;
          if (counters) counters->polled = true;
          else polled_events_.insert(event);
        }
      }
      *lastAsked = ops_total_ + 1;
    }
    bool forProgress = false;
    if (!polled && targetHeld) {
      // graft answers, unless it has too often for this target (or in a row)
      // with no CUDA_SUCCESS from the driver for it since (NotReadyStreak):
      // then the query is taken as a poll.
      NotReadyStreak* streak = record                                ? &record->notReady
                               : !event && isDefaultStream(stream) && context
                                   ? &default_stream_streaks_[hashCombine(stream, context)]
                               : counters ? &counters->notReady
                                          : nullptr;
      bool withinLimits = answers_in_a_row_ < kAnswersInARow;
      if (streak && withinLimits) {
        const uint64_t now = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
        if (!streak->answers || streak->sinceWait != wait_generation_) {
          streak->sinceNs = now;
          streak->sinceWait = wait_generation_;
        }
        withinLimits = streak->driverUntil != wait_generation_ + 1 && streak->answers < kAnswersPerTarget &&
                       now - streak->sinceNs < kAnswerWindowNs;
      }
      if (streak && !streak->open() && open_streaks_++ == 0) streaks_open_.store(true, std::memory_order_relaxed);
      if (withinLimits) {
        if (streak) ++streak->answers;
        ++answers_in_a_row_;
        ++queries_answered_not_ready_;
        return QueryAnswer::NotReady;
      }
      if (streak) {
        streak->answers = 0;
        streak->driverUntil = wait_generation_ + 1;
      }
      ++queries_issued_for_progress_;
      forProgress = true;
    }
    if ((polled || forProgress) && inGeneration) {
      if (!held_.empty()) resolveHeld(EagerCause::QueryInSegment, nullptr);
      pushBoundaryToken(hashCombine(queryHash, kBoundarySalt));
    }
  }
  drainLaunches();  // last: a launch queued before the query is work it must see
  return QueryAnswer::AskDriver;
}

void Engine::endStreak(NotReadyStreak& streak) {
  if (streak.open() && --open_streaks_ == 0) streaks_open_.store(false, std::memory_order_relaxed);
  streak = {};
}

void Engine::queryCompleted(StreamKey stream, uint64_t event, uint64_t context) {
  NotReadyStreak* streak = nullptr;
  if (event) {
    if (auto it = event_records_.find(event); it != event_records_.end()) streak = &it->second.notReady;
  } else if (isDefaultStream(stream) && context) {
    if (auto it = default_stream_streaks_.find(hashCombine(stream, context)); it != default_stream_streaks_.end())
      streak = &it->second;
  } else if (auto it = streams_.find(stream); it != streams_.end()) {
    streak = &it->second.notReady;
  }
  if (!streak || !streak->open()) return;
  answers_in_a_row_ = 0;  // the driver saw done what graft had answered for
  endStreak(*streak);
}

void Engine::releaseStream(StreamKey stream) {
  // Nothing held may use it, and no free deferred past the held ops may be
  // ordered on it: both reach the driver with the stream's handle.
  bool uses = false;
  for (size_t k = 0; k < held_.size() && !uses; ++k) uses = held_.view(k).stream == stream;
  for (size_t k = 0; k < deferred_.size() && !uses; ++k) uses = deferred_[k].isFree && deferred_[k].stream == stream;
  if (uses) resolveHeld(EagerCause::SyncInSegment, nullptr);
  // Its op count stays for the report; a reused handle starts with no activity
  // and has waited on nothing.
  // (A stream without ops has none in the history either.)
  if (auto it = streams_.find(stream); it != streams_.end()) {
    it->second.activity = 0;
    it->second.forkedFrom = 0;
    it->second.destroyed = true;
    it->second.lastAskedAt = 0;
    it->second.polled = it->second.polledNow = it->second.askedMidRun = false;  // a new stream may get the handle
  }
  last_stream_counters_ = nullptr;  // the next op looks its stream up (countStream) and clears `destroyed`
  drainLaunches();
}

void Engine::streamCreated(StreamKey stream, uint64_t context) {
  StreamCounters& c = streams_[stream];
  const uint64_t before = c.createdIn;
  c.createdIn = context;
  if (before == 0 || before == context) return;
  const size_t dropped =
      forgetSegmentsWith([stream](const OpDesc& op) { return op.stream == stream; }, /*certain=*/false);
  if (dropped)
    GRAFT_DEBUG("stream {:#x} created again in another context: {} graphs with it dropped", stream, dropped);
}

bool Engine::deferEventDestroy(uint64_t event, uint64_t domain) {
  if (auto it = event_records_.find(event); it != event_records_.end()) {
    endStreak(it->second.notReady);
    event_records_.erase(it);
  }
  polled_events_.erase(event);  // a new event may get the handle
  for (size_t k = 0; k < held_.size(); ++k) {
    if (held_.view(k).event == event) {
      deferred_.push_back({false, event, 0, domain});
      return true;
    }
  }
  drainLaunches();
  executor_.forgetEvent(event);
  return false;
}

bool Engine::deferFree(uint64_t pointer, StreamKey stream, uint64_t domain) {
  if (stream == kPerThreadStream) {  // only the calling thread can name that stream
    if (!held_.empty()) resolveHeld(EagerCause::SyncInSegment, nullptr);
    drainLaunches();
    return false;
  }
  if (held_.empty()) {
    if (executor_.freeBehindQueuedLaunches(pointer, stream, domain)) return true;
    drainLaunches();
    return false;
  }
  deferred_.push_back({true, pointer, stream, domain});
  return true;
}

GRAFT_HOT void Engine::heldCleared() {
  sole_expected_ready_ = false;
  start_armed_ = false;
  held_.clear();
  held_matched_.clear();
  for (const Deferred& d : deferred_) {
    if (d.isFree) executor_.freeAsync(d.handle, d.stream, d.domain);
    else executor_.destroyEvent(d.handle, d.domain);
  }
  deferred_.clear();
}

void Engine::programCaptureBegin() {
  if (!held_.empty()) resolveHeld(EagerCause::ProgramCapture, nullptr);
  drainLaunches();
  if (capture_depth_ == 0) {
    // graft steps aside for the capture: its ops are not recorded. The
    // capture is a boundary in what graft learns, as a host sync is, so no
    // run spans it, while the eager work around a capture the program makes
    // every step (ggml-cuda captures and updates its graph each token) can
    // still be learned; forgetting all that was seen at every capture kept
    // that work eager (sim_review11_decode ggml-topology).
    ++event_epoch_;
    if (!stepsAside()) pushBoundaryToken(hashCombine(0x70726f6763617074ull /* "progcapt" */, kBoundarySalt));
    GRAFT_DEBUG("program stream capture began: stepping aside");
  }
  ++capture_depth_;
}

void Engine::programCaptureEnd() {
  if (capture_depth_ > 0 && --capture_depth_ == 0) GRAFT_DEBUG("program stream capture ended");
}

void Engine::flushAll() {
  if (!held_.empty()) resolveHeld(EagerCause::SyncInSegment, nullptr);
  drainLaunches();
}

bool Engine::flushIfIdle() {
  if (held_.empty() && !executor_.freesPending() && !executor_.launchesHalted()) {
    idle_seen_submissions_ = ~uint64_t(0);
    return false;
  }
  if (idle_seen_submissions_ != ops_total_) {
    idle_seen_submissions_ = ops_total_;
    return false;
  }
  if (!held_.empty()) resolveHeld(EagerCause::IdleFlush, nullptr);
  // The frees deferred past what was held, any put behind queued launches,
  // and a failed launch's ops with those queued after it (the launch thread
  // stopped at the failure), reach the driver too: the program may make no
  // further call.
  drainLaunches();
  idle_seen_submissions_ = ~uint64_t(0);
  return true;
}

void Engine::forgetRecordedCode() {
  flushAll();
  size_t dropped = 0;
  for (const auto& s : segments_.all()) {
    if (!s) continue;
    if (s->graph) {
      executor_.destroy(s->graph);
      s->graph = nullptr;
      ++dropped;
    }
    retireSegment(s.get());
  }
  last_mismatch_ = {};
  num_candidates_ = 0;
  releaseRetired();
  detector_.reset();  // periods are confirmed from tokens after this point only
  built_runs_.clear();
  runs_to_retry_.clear();
  next_run_retry_at_ = ~uint64_t(0);
  runs_dropped_early_.clear();
  run_drops_.clear();
  stretch_sightings_.clear();
  stretch_builds_.clear();
  stretch_backoff_ = 0;
  executor_.forgetKernels();
  if (dropped)
    GRAFT_INFO("the program unloaded code: {} graphs dropped; graft learns its loop again", dropped);
}

uint64_t Engine::mostReplaysOfGraphsWith(const std::function<bool(const OpDesc&)>& uses) const {
  uint64_t most = 0;
  for (const auto& s : segments_.all()) {
    if (!s || !s->graph || s->replays <= most) continue;
    for (size_t k = 0; k < s->ops.size(); ++k) {
      if (uses(s->ops.view(k))) {
        most = s->replays;
        break;
      }
    }
  }
  return most;
}

size_t Engine::forgetSegmentsWith(const std::function<bool(const OpDesc&)>& usesUnloaded, bool certain) {
  flushAll();
  size_t dropped = 0;
  for (const auto& s : segments_.all()) {
    // (A segment disabled without a graph stays so: "not built again".)
    if (!s || (s->disabled && !s->graph)) continue;
    bool uses = false;
    for (size_t k = 0; k < s->ops.size() && !uses; ++k) uses = usesUnloaded(s->ops.view(k));
    if (!uses) continue;
    if (s->graph) {
      executor_.destroy(s->graph);
      s->graph = nullptr;
      ++dropped;
    }
    retireSegment(s.get());
    const bool rebuild = !certain || s->replays >= kReplaysBeforeUnloadToRebuild ||
                         ++runs_dropped_early_[s->runKey] < 2;
    if (rebuild) built_runs_.erase(s->runKey);
  }
  last_mismatch_ = {};
  num_candidates_ = 0;
  releaseRetired();
  return dropped;
}

void Engine::retireSegment(Segment* s) {
  segments_.retire(s);
  retired_ids_.push_back(s->id);
}

void Engine::releaseRetired() {
  // Held ops may borrow a retired segment's bytes, and candidates and the
  // mismatch record name segments: wait for a moment with none.
  if (retired_ids_.empty() || !held_.empty() || num_candidates_ || last_mismatch_.segment) return;
  for (uint32_t id : retired_ids_) {
    const Segment* s = segments_.byId(id);
    if (s && !s->graph) segments_.release(id);
  }
  retired_ids_.clear();
}

void Engine::stopReplay() {
  flushAll();
  config_.replay = false;
}

GRAFT_COLD void Engine::noteStickyError(int rc) {
  int none = 0;
  sticky_code_.compare_exchange_strong(none, rc, std::memory_order_relaxed);
  if (!config_.replay || sticky_error_seen_) return;
  sticky_error_seen_ = needs_attention_ = true;
  sole_expected_ready_ = false;
  GRAFT_WARN("graft's own driver call hit a sticky error (the context is unusable): graft replays nothing "
             "more, so every later call gets it from the driver as it would without graft");
}

GRAFT_COLD void Engine::attendToLaunches() {
  needs_attention_ = false;
  drainLaunches();  // a failed launch: its ops issued, its segment disabled, a sticky error noted
  if (!sticky_error_seen_) return;
  stopReplay();  // its flush may see more of the same error
  sticky_error_seen_ = needs_attention_ = false;
}

void Engine::pauseReplay() {
  flushAll();
  paused_ = true;
}

void Engine::resumeReplay() {
  if (!paused_) return;
  paused_ = false;
  // What ran while paused was not seen: no period may span the gap, and no
  // match or mismatch state from before it applies.
  detector_.reset();
  num_candidates_ = 0;
  last_mismatch_ = {};
}

// ---------------------------------------------------------------------------
// Detection and building

GRAFT_HOT void Engine::recordEagerOp(const OpDesc& op, bool boundary) {
  const uint64_t hash = boundary ? hashCombine(op.shapeHash, kBoundarySalt) : op.shapeHash;
  // One line per eager op; event ops name their event (tests/sim/sim_trace_replay reads these lines).
  GRAFT_TRACE("token {:#018x} op stream {:#x} {}{}{}", hash, op.stream, executor_.describe(op),
              isEventOp(op.kind) ? fmt::format(" event {:#x}", op.event) : std::string(),
              boundary ? " (boundary)" : "");
  history_.pushOp(op, hash, boundary);
  if (boundary) ++boundary_generation_;
  if (ops_total_ >= next_run_retry_at_) [[unlikely]] confirmRefusedRunsAgain();
  feedDetector(hash, 1, boundary);
  if (!dormant_after_ops_) return;
  if (++recorded_since_build_ >= dormant_after_ops_) restIfNothingRepeats();
  if (ops_total_ - interleave_.startOps >= kInterleaveWindowOps) restIfThreadsInterleave();
}

void Engine::startRecordingWindow() {
  recorded_since_build_ = 0;
  window_via_graph_start_ = stats_.opsViaGraph;
}

void Engine::restIfNothingRepeats() {
  // Judged at the first op recorded with nothing held (a program that holds
  // ops most of the time must still be judged: the window goes on till then).
  if (!held_.empty()) return;
  // (opsViaGraph falls when a graph launch failed: counted as none then.)
  const uint64_t viaGraph = stats_.opsViaGraph - std::min(stats_.opsViaGraph, window_via_graph_start_);
  const uint64_t recorded = recorded_since_build_;
  startRecordingWindow();
  // Graphs that carried under GRAFT_REST_BELOW_PCT of the window's ops (a
  // short run repeated once, in a program whose shapes change every step; an
  // optimizer's run among streams that change every step) save less than
  // learning the rest costs: rest as if there were none.
  const bool graphsIdle = viaGraph * 100 < uint64_t(config_.restBelowGraphPct) * (viaGraph + recorded);
  if (segments_.live() != 0 && !graphsIdle) return;
  rest(EagerCause::Dormant);
  if (rests_++ == 0 && segments_.live() != 0)
    GRAFT_INFO("graphs carried {} of the last {} ops (under GRAFT_REST_BELOW_PCT={} %): resting (only "
               "counting) for the next {} ops, then looking again (GRAFT_DORMANT_AFTER_OPS)", viaGraph,
               viaGraph + recorded, config_.restBelowGraphPct, 4 * dormant_after_ops_);
  else if (rests_ == 1)
    GRAFT_INFO("no op sequence worth a graph repeated in {} ops: resting (only counting) for the next {} "
               "ops, then looking again (GRAFT_DORMANT_AFTER_OPS)", dormant_after_ops_, 4 * dormant_after_ops_);
  else
    GRAFT_DEBUG("resting again for {} ops (rest #{})", 4 * dormant_after_ops_, rests_);
}

void Engine::restIfThreadsInterleave() {
  if (!held_.empty()) return;  // judged at the next op recorded with nothing held
  const uint64_t ops = ops_total_ - interleave_.startOps;
  // (opsViaGraph falls when a graph launch failed: then no rest.)
  const uint64_t viaGraph = stats_.opsViaGraph - std::min(stats_.opsViaGraph, interleave_.startViaGraph);
  const uint64_t switches = interleave_.switches;
  startInterleaveWindow();
  const bool often = switches * kOpsPerThreadSwitch >= ops && viaGraph * 2 < ops;
  const bool steadyWithoutGraphs = switches * kOpsPerThreadSwitchNoGraph >= ops && viaGraph * 10 < ops;
  if (dormant() || !(often || steadyWithoutGraphs)) return;
  // Nothing is held, and submit() drained the queued graph launches before
  // this op was issued; the rest's ops drain them too (countDormant).
  rest(EagerCause::ThreadsInterleave);
  if (interleave_rests_++ == 0)
    GRAFT_INFO("threads issue ops at the same time (in the last {} ops, {} switches between threads and {} "
               "ops through graphs): resting (only counting) for the next {} ops, then looking again "
               "(GRAFT_DORMANT_AFTER_OPS)", ops, switches, viaGraph, 4 * dormant_after_ops_);
  else
    GRAFT_DEBUG("threads interleave: resting again for {} ops (rest #{})", 4 * dormant_after_ops_,
                interleave_rests_);
}

void Engine::endRestIfThreadsCalm() {
  const uint64_t ops = ops_total_ - interleave_.startOps;
  const uint64_t switches = interleave_.switches;
  startInterleaveWindow();
  if (switches * kOpsPerThreadSwitchNoGraph >= ops) return;
  dormant_until_ = ops_total_;  // the next op is looked at again
  GRAFT_DEBUG("threads no longer issue ops at the same time ({} switches in {} ops): rest ended", switches, ops);
}

void Engine::rest(EagerCause cause) {
  startRecordingWindow();
  dormant_until_ = ops_total_ + 4 * dormant_after_ops_;
  rest_cause_ = cause;
  // What runs during the rest is not seen: no period may span it.
  detector_.reset();
  num_candidates_ = 0;
  last_mismatch_ = {};
}

void Engine::pushBoundaryToken(uint64_t hash) {
  GRAFT_TRACE("token {:#018x} barrier", hash);
  history_.pushBarrier(hash);
  ++boundary_generation_;
  feedDetector(hash, 0, true);
}

GRAFT_HOT void Engine::feedDetector(uint64_t tokenHash, uint64_t ops, bool boundary) {
  const PeriodDetector::Confirmation confirmed = detector_.push(tokenHash, ops, boundary);
  if (!confirmed.period && !confirmed.stretch) [[likely]] return;
  // Building allocates; running out of memory must not reach the program.
  try {
    if (confirmed.period)
      buildFromPeriod(confirmed);
    else
      noteRecurringStretch(confirmed.stretch, confirmed.stretchPeriod, confirmed.stretchAfter);
  } catch (const std::exception& e) {
    ++stats_.buildFailures;
    GRAFT_WARN("building graphs for a sequence of {} ops failed ({}); those ops stay eager",
               confirmed.period ? confirmed.period : confirmed.stretch, e.what());
  }
}

void Engine::noteRecurringStretch(uint32_t length, uint32_t period, uint32_t after) {
  if (history_.tokenCount() < uint64_t(length) + after) return;
  // Threads that issue ops at the same time (a switch every
  // kOpsPerThreadSwitchNoGraph ops or more often) meet in an order that
  // repeats by chance only: no graphs for it (restIfThreadsInterleave).
  const uint64_t windowOps = ops_total_ - interleave_.startOps;
  if (interleave_.switches >= 4 && interleave_.switches * kOpsPerThreadSwitchNoGraph >= windowOps) return;
  const uint64_t end = history_.tokenCount() - after;  // the stretch is [end - length, end)
  std::vector<const Token*> tokens;
  tokens.reserve(length);
  size_t eagerOps = 0, replayedOps = 0;
  uint64_t key = hashCombine(0x3c6ef372fe94f82bull, length);
  for (uint64_t i = end - length; i < end; ++i) {
    const Token* t = history_.token(i);
    if (!t || !heldInHistory(*t)) return;
    eagerOps += t->kind == TokenKind::Op && !t->boundary;
    if (t->kind == TokenKind::Segment) replayedOps += segments_.byId(t->segment)->length();
    key = hashCombine(key, t->hash);
    tokens.push_back(t);
  }
  // Mostly replayed already (what is left between graphs: an op that
  // changes every time, a few ops a graph could not take, held ops a
  // mismatch issued): not worth graphs that would merge them with their
  // neighbours' graphs.
  if (eagerOps < kStretchEagerOps || eagerOps * 4 < replayedOps) return;
  if (stretch_sightings_.size() >= kMaxRunsToRetry) stretch_sightings_.clear();
  StretchSightings& seen = stretch_sightings_[key];
  if (end == seen.lastEnd) return;  // this place counted already
  // Sightings far apart (more than kStretchGapPeriods of its period) are a
  // coincidence that returns now and then, not a stretch the loop repeats.
  // (Another candidate may report a place before the last one counted.)
  if (end > seen.lastEnd && end - seen.lastEnd > uint64_t(kStretchGapPeriods) * period) seen.count = 0;
  seen.lastEnd = std::max(seen.lastEnd, end);
  judgeStretchBuilds();
  const uint32_t sightingsToBuild = stretchSightingsToBuild();
  if (++seen.count < sightingsToBuild) return;
  if (seen.count == sightingsToBuild)
    GRAFT_DEBUG("a stretch of {} tokens recurred {} times, not in a row (its copy {} tokens before): built", length,
                seen.count + 1, period);
  // Split at its boundaries as a period's run is; the run that ends at one
  // is cut as a run before a sync.
  const size_t firstNewId = segments_.all().size();
  std::vector<const Token*> run;
  for (const Token* t : tokens) {
    if (t->boundary) {
      buildRun(run, true, false);
      run.clear();
    } else {
      run.push_back(t);
    }
  }
  buildRun(run, false, false);
  if (segments_.all().size() == firstNewId) return;  // nothing new (built before, or refused)
  if (stretch_builds_.size() >= kMaxStretchBuilds) stretch_builds_.erase(stretch_builds_.begin());
  stretch_builds_.push_back({uint32_t(firstNewId), uint32_t(segments_.all().size())});
}

void Engine::judgeStretchBuilds() {
  size_t kept = 0;
  for (const StretchBuild& build : stretch_builds_) {
    bool paid = false, dropped = false;
    uint64_t replays = 0;
    for (uint32_t id = build.firstSegment; id < build.endSegment; ++id) {
      const Segment* s = segments_.byId(id);
      dropped |= !s || s->disabled;
      if (!s) continue;
      paid |= s->replays >= kStretchPaidReplays;
      replays = std::max(replays, s->replays);
    }
    if (paid) {
      // Cleared, not lowered by one: a program whose early stretches were
      // dropped would otherwise build too rarely to ever lower it again.
      stretch_backoff_ = 0;
    } else if (!dropped) {
      stretch_builds_[kept++] = build;
    } else if (stretch_backoff_ < kMaxStretchBackoff) {
      ++stretch_backoff_;
      GRAFT_DEBUG("a graph built from a recurring stretch (segments #{} to #{}) was dropped, or went idle, having "
                  "replayed at most {} times: stretches are built once seen {} times", build.firstSegment,
                  build.endSegment - 1, replays, stretchSightingsToBuild());
    }
  }
  stretch_builds_.resize(kept);
}

void Engine::buildFromPeriod(const PeriodDetector::Confirmation& confirmed) {
  const uint32_t period = confirmed.period;
  if (confirmed.unrollPending) {
    // A loop of a few ops without a sync: a graph of one iteration would be
    // launched once per iteration, a launch (and its node updates) for a few
    // ops, often costing more than it saves (cuDNN's recurrent timestep loops
    // ran slower than eager so). Built unrolled if its run lasts; otherwise
    // its ops go into the graphs of the longer period they are part of.
    GRAFT_DEBUG("period of {} tokens confirmed: short, built only unrolled", period);
    return;
  }
  const uint64_t end = history_.tokenCount();
  if (period > end) return;
  std::vector<const Token*> tokens;
  tokens.reserve(period);
  for (uint64_t i = end - period; i < end; ++i) {
    const Token* t = history_.token(i);
    if (!t) return;
    tokens.push_back(t);
  }
  // Holes (PeriodDetector): places where the instances the detector saw
  // differ (a size or grid that changes every step). Their ops stay eager,
  // between the graphs of the rest.
  std::vector<bool> hole(period, false);
  size_t holes = 0;
  for (uint32_t back = 1; back < std::max<uint32_t>(config_.warmup, 2); ++back) {
    if (end < uint64_t(period) * (back + 1)) break;
    for (uint32_t k = 0; k < period; ++k) {
      const Token* earlier = history_.token(end - uint64_t(period) * (back + 1) + k);
      if (earlier && !hole[k] && earlier->hash != tokens[k]->hash) {
        hole[k] = true;
        ++holes;
      }
    }
  }
  // Start after a boundary when there is one; else after a hole; otherwise at
  // a token that occurs once in the period, so the segment does not start on
  // a common op.
  size_t start = 0;
  bool haveBoundary = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i]->boundary) {
      start = (i + 1) % tokens.size();
      haveBoundary = true;
      break;
    }
  }
  if (!haveBoundary && holes) {
    start = (size_t(std::find(hole.begin(), hole.end(), true) - hole.begin()) + 1) % tokens.size();
  } else if (!haveBoundary) {
    std::unordered_map<uint64_t, uint32_t> occurrences;
    for (const Token* t : tokens) ++occurrences[t->hash];
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (occurrences[tokens[i]->hash] == 1) {
        start = i;
        break;
      }
    }
  }
  // The second report of a short period without a boundary (a loop of a few
  // kernels, no sync) builds it unrolled (PeriodDetector::unrollFor).
  const size_t unroll = haveBoundary ? 1 : confirmed.unroll;
  GRAFT_DEBUG("period of {} tokens confirmed (built {} time(s) unrolled, {} hole(s))", period, unroll, holes);
  // The run is the `unroll` periods that end where the period's window,
  // started at `start`, would wrap around: tokens the program issued in a
  // row, so their events are those of one stretch of the program (a window
  // rotated to `start` joins the end of one iteration to the start of the
  // next, whose events may be others). The detector confirmed the period
  // over at least that many tokens. Where the history no longer holds them
  // all, the rotated window (same shapes) is built instead.
  const uint64_t windowEnd = start == 0 ? end : end - period + start;
  std::vector<const Token*> window;
  if (windowEnd >= uint64_t(period) * unroll) {
    window.reserve(size_t(period) * unroll);
    for (uint64_t i = windowEnd - uint64_t(period) * unroll; i < windowEnd; ++i) {
      const Token* t = history_.token(i);
      if (!t || !heldInHistory(*t)) {
        window.clear();
        break;
      }
      window.push_back(t);
    }
  }
  std::vector<const Token*> run;
  for (size_t k = 0; k < tokens.size() * unroll; ++k) {
    const Token* t = window.empty() ? tokens[(start + k) % tokens.size()] : window[k];
    if (t->boundary) {
      buildRun(run, true, false);
      run.clear();
    } else if (hole[(start + k) % tokens.size()]) {
      // Before a recurring sync, the run's pieces shrink towards its end as
      // they would without the hole (the host waits there for the last one).
      const size_t next = k + 1;
      const Token* after = next >= tokens.size() * unroll ? nullptr
                           : window.empty()                ? tokens[(start + next) % tokens.size()]
                                                           : window[next];
      buildRun(run, after && after->boundary, false);
      run.clear();
    } else {
      run.push_back(t);
    }
  }
  buildRun(run, haveBoundary, unroll > 1);
}

bool Engine::heldInHistory(const Token& t) const {
  OpDesc op;
  uint64_t event;
  switch (t.kind) {
    case TokenKind::Op: return history_.op(t.opSeq, &op);
    case TokenKind::Segment:  // its oldest event is the first the ring overwrites
      return segments_.byId(t.segment) && (!t.events || history_.segmentEvent(t, 0, &event));
    case TokenKind::Barrier: return true;
  }
  return false;
}

void Engine::buildRun(const std::vector<const Token*>& run, bool delimited, bool unrolled) {
  // A run with ops not yet in any graph is worth building. A run made only of
  // replayed segments is merged into one sequence (fewer launches, no per-layer
  // patches) only when boundaries delimit it, or when it is a short period
  // unrolled: otherwise the period's phase is arbitrary and re-cutting a
  // rotated copy would churn.
  bool anyEagerOp = false;
  size_t segmentTokens = 0;
  for (const Token* t : run) {
    anyEagerOp |= t->kind == TokenKind::Op;
    segmentTokens += t->kind == TokenKind::Segment;
  }
  if (!anyEagerOp && !unrolled && !(delimited && segmentTokens >= 2)) return;

  OpBuffer ops;
  std::vector<std::pair<size_t, size_t>> segmentSpans;  // ops [begin, end) of each replayed segment in the run
  for (const Token* t : run) {
    if (t->kind == TokenKind::Segment) segmentSpans.emplace_back(ops.size(), ops.size());
    if (t->kind == TokenKind::Op) {
      OpDesc d;
      if (!history_.op(t->opSeq, &d)) return;  // too old: wait for the next confirmation
      ops.push(d);
    } else if (t->kind == TokenKind::Segment) {
      // Its ops as that replay issued them: the segment's shapes and values,
      // the events the program named in that replay. Where the history no
      // longer holds them (a period of very many events), the events the
      // segment was built with: the run's event structure may then not be
      // the program's, which matching finds, but it is built.
      const Segment* s = segments_.byId(t->segment);
      if (!s) return;
      uint32_t e = 0;
      for (size_t k = 0; k < s->length(); ++k) {
        OpDesc d = s->ops.view(k);
        if (isEventOp(d.kind)) {
          uint64_t named;
          if (history_.segmentEvent(*t, e++, &named)) d.event = named;
        }
        ops.push(d);
      }
      segmentSpans.back().second = ops.size();
    }
  }
  if (ops.size() < config_.minSegmentOps) return;
  // A stream of the run destroyed since, its handle not used again: building
  // would ask the driver about a handle that names no stream (the driver may
  // crash on one), and the run cannot recur as it was. The next confirmation,
  // once the handle names a stream again, may build it.
  for (size_t k = 0; k < ops.size(); ++k) {
    auto it = streams_.find(ops.view(k).stream);
    if (it != streams_.end() && it->second.destroyed) {
      GRAFT_DEBUG("a run of {} ops is not built: stream {:#x} was destroyed", ops.size(), ops.view(k).stream);
      return;
    }
  }
  SequenceHash whole;
  std::vector<int32_t> waits;
  variantKey(ops, 0, ops.size(), &whole, &waits);  // (a run too long for the event slots still gets a key)
  const uint64_t runKey = hashCombine(whole.value, whole.length);
  if (built_runs_.size() >= kMaxBuiltRuns) {
    // One key per distinct run ever built: a server whose shapes never come
    // back would grow it for the process's life. Forgetting them all is
    // safe: a run that comes back finds its pieces live (findExpanded) or
    // builds them again.
    built_runs_.clear();
    GRAFT_DEBUG("the runs built so far are forgotten (kMaxBuiltRuns={})", kMaxBuiltRuns);
  }
  const bool retrying = !built_runs_.insert(runKey).second;
  if (retrying) {
    // Built already, unless a piece was refused at the variant limit and an
    // old variant may have gone idle since.
    auto retry = runs_to_retry_.find(runKey);
    if (retry == runs_to_retry_.end() || ops_total_ < retry->second) return;
    runs_to_retry_.erase(retry);
  }

  const std::vector<size_t> cuts = pieceCuts(ops, delimited, segmentSpans);
  uint64_t retryAt = 0;
  bool refused = false;
  for (size_t p = 0; p + 1 < cuts.size(); ++p)
    refused |= !buildPiece(ops, cuts[p], cuts[p + 1], runKey, retrying, &retryAt);
  if (refused) noteRunToRetry(runKey, retryAt);
}

void Engine::confirmRefusedRunsAgain() {
  next_run_retry_at_ = ~uint64_t(0);
  for (const auto& [key, at] : runs_to_retry_)
    if (at > ops_total_) next_run_retry_at_ = std::min(next_run_retry_at_, at);
  GRAFT_DEBUG("a run refused at the variant limit may find an idle variant now: periods confirmed are reported again");
  detector_.rearm();
}

std::vector<size_t> Engine::alignCuts(const OpBuffer& ops, std::vector<size_t> cuts,
                                      const std::vector<std::pair<size_t, size_t>>& segmentSpans) const {
  // `cuts`: one part's, from its first op to its end (both kept: they are the
  // run's ends or where its device context changes).
  // A piece that starts inside a segment the run replayed is never started
  // while that segment keeps matching there (the matcher is busy with it), so
  // its ops would stay eager: a cut inside a segment's ops moves to the
  // nearer of its ends whose op occurs once in the part (a piece starting on
  // a common op would be tried wherever that op comes), staying inside the
  // part. Pieces shorter than GRAFT_MIN_SEGMENT_OPS that this leaves are
  // joined to the next.
  if (segmentSpans.empty() || cuts.size() < 3) return cuts;
  const size_t first = cuts.front(), last = cuts.back();
  std::unordered_map<uint64_t, uint32_t> occurrences;
  for (size_t k = first; k < last; ++k) ++occurrences[ops.view(k).shapeHash];
  auto movableTo = [&](size_t k) { return k > first && k < last && occurrences[ops.view(k).shapeHash] == 1; };
  size_t s = 0;
  for (size_t i = 1; i + 1 < cuts.size(); ++i) {
    while (s < segmentSpans.size() && segmentSpans[s].second <= cuts[i]) ++s;
    if (s == segmentSpans.size()) break;
    const auto [begin, end] = segmentSpans[s];
    if (cuts[i] <= begin || cuts[i] >= end) continue;
    const bool toEnd = end - cuts[i] <= cuts[i] - begin;
    const size_t nearer = toEnd ? end : begin, farther = toEnd ? begin : end;
    if (movableTo(nearer)) cuts[i] = nearer;
    else if (movableTo(farther)) cuts[i] = farther;
  }
  std::vector<size_t> aligned{cuts.front()};
  for (size_t i = 1; i + 1 < cuts.size(); ++i)
    if (cuts[i] >= aligned.back() + config_.minSegmentOps && cuts[i] + config_.minSegmentOps <= cuts.back())
      aligned.push_back(cuts[i]);
  aligned.push_back(cuts.back());
  return aligned;
}

std::vector<size_t> Engine::pieceCuts(const OpBuffer& ops, bool endsAtBarrier,
                                      const std::vector<std::pair<size_t, size_t>>& segmentSpans) {
  // Ops of different device contexts never share a graph: cut the run where
  // the domain changes, then cut each part by the schedule below.
  // An op without a domain of its own (an event op on a program stream) takes
  // that of the other ops on its stream in this run, so a cross-device wait
  // goes with the device whose stream waits.
  std::unordered_map<StreamKey, uint64_t> streamDomain;
  for (size_t k = 0; k < ops.size(); ++k) {
    const OpDesc op = ops.view(k);
    if (const uint64_t d = executor_.domainOf(op)) streamDomain.emplace(op.stream, d);
  }
  std::vector<size_t> cuts{0};
  auto cutPart = [&](size_t from, size_t to, bool atBarrier) {
    std::vector<size_t> part{from};
    for (size_t c : scheduleCuts(ops, from, to, atBarrier)) part.push_back(c);
    part = alignCuts(ops, std::move(part), segmentSpans);
    cuts.insert(cuts.end(), part.begin() + 1, part.end());
  };
  uint64_t domain = 0;
  size_t begin = 0;
  for (size_t k = 0; k < ops.size(); ++k) {
    const OpDesc op = ops.view(k);
    uint64_t d = executor_.domainOf(op);
    if (!d) {
      auto it = streamDomain.find(op.stream);
      if (it != streamDomain.end()) d = it->second;
    }
    if (!d) continue;
    if (domain && d != domain) {
      cutPart(begin, k, false);
      begin = k;
    }
    domain = d;
  }
  cutPart(begin, ops.size(), endsAtBarrier);
  return cuts;
}

// Cuts of ops [begin, end), without `begin`, with `end`.
std::vector<size_t> Engine::scheduleCuts(const OpBuffer& ops, size_t begin, size_t end,
                                         bool endsAtBarrier) const {
  const size_t n = end;
  const size_t minOps = config_.minSegmentOps;
  // Prefer to cut before an op whose shape occurs once in the run, so pieces
  // do not start on a common op (fewer false starts while matching). A cut
  // moves later (or, cutting from the back, earlier) by at most `reach` ops
  // and never leaves fewer than minOps ops on the far side of `limit`.
  std::unordered_map<uint64_t, uint32_t> occurrences;
  for (size_t k = begin; k < n; ++k) ++occurrences[ops.view(k).shapeHash];
  auto unique = [&](size_t k) { return occurrences[ops.view(k).shapeHash] == 1; };
  auto nudgeLater = [&](size_t cut, size_t limit) {
    for (size_t d = 0; d < kCutSearch && cut + d + minOps < limit; ++d)
      if (unique(cut + d)) return cut + d;
    return cut;
  };
  auto nudgeEarlier = [&](size_t cut, size_t limit, size_t reach) {
    for (size_t d = 0; d < reach && cut - d > limit + minOps; ++d)
      if (unique(cut - d)) return cut - d;
    return cut;
  };
  auto grow = [&](size_t size) { return std::max<size_t>(minOps, std::min<size_t>(size * 2, kMaxAutoPiece)); };

  if (config_.segmentOps || !endsAtBarrier) {
    // Pieces of GRAFT_SEGMENT_OPS, or growing 32, 64, ... 1024: the GPU starts
    // after the first few ops, and long runs cost few graph launches. (One
    // piece of up to 1024 ops was measured no faster on PyTorch loops without
    // a sync, and lost coverage: a late mismatch flushes more held ops.)
    std::vector<size_t> cuts;
    // (A piece shorter than GRAFT_MIN_SEGMENT_OPS would never be built.)
    size_t piece = std::max<size_t>(config_.segmentOps ? config_.segmentOps : 32, minOps);
    size_t at = begin;
    while (n - at > piece + minOps) {
      at = nudgeLater(at + piece, n);
      cuts.push_back(at);
      if (!config_.segmentOps) piece = grow(piece);
    }
    cuts.push_back(n);
    return cuts;
  }

  // A run the host waits for at its end (a recurring sync such as
  // loss.item()): pieces grow from both ends, 16, 32, ... from the front and
  // 8, 16, ... from the back. The small first piece starts the GPU early when
  // it is the bottleneck; the small last piece keeps what is left to run
  // after the program's last op short when the CPU is (otherwise the whole
  // last piece, up to hundreds of ops, would start only then). The middle
  // stays one piece.
  std::vector<size_t> front, back{n};
  size_t lo = begin, hi = n;
  size_t frontSize = std::max<size_t>(16, minOps), backSize = std::max<size_t>(config_.syncTailOps, minOps);
  for (;;) {
    const bool takeBack = backSize <= frontSize;
    const size_t next = takeBack ? backSize : frontSize;
    if (hi - lo < 3 * next) break;
    if (takeBack) {
      hi = nudgeEarlier(hi - next, lo, std::min<size_t>(kCutSearch, next / 2));
      back.push_back(hi);
      backSize = grow(backSize);
    } else {
      lo = nudgeLater(lo + next, hi);
      front.push_back(lo);
      frontSize = grow(frontSize);
    }
  }
  front.insert(front.end(), back.rbegin(), back.rend());
  return front;
}

void Engine::dropGraph(Segment* s) {
  if (!s->graph) return;
  executor_.destroy(s->graph);
  s->graph = nullptr;
}

bool Engine::evictIdleVariant(uint64_t firstShapeHash) {
  // The program's shapes moved on (a server's requests of other sizes).
  const std::vector<Segment*>* list = segments_.startingWith(firstShapeHash);
  return list && evictIdlest(*list, "variant", "GRAFT_MAX_VARIANTS", config_.maxVariants);
}

bool Engine::evictIdleSegment() {
  // A server whose request shapes never come back (each a sequence of its
  // own first op) would otherwise fill GRAFT_MAX_SEGMENTS with graphs never
  // replayed again and graph nothing new for the rest of the process.
  return evictIdlest(segments_.liveSegments(), "sequence", "GRAFT_MAX_SEGMENTS", config_.maxSegments);
}

bool Engine::evictIdlest(const std::vector<Segment*>& among, std::string_view what, std::string_view option,
                         uint32_t limit) {
  // The one replayed longest ago, if not for kVariantIdleOps ops. One
  // replayed within that time is kept, so shapes that take turns do not evict
  // each other over and over (each eviction costs a build).
  Segment* victim = nullptr;
  for (Segment* s : among)
    if (!victim || s->lastUsedAtOp < victim->lastUsedAtOp) victim = s;
  if (!victim || ops_total_ - victim->lastUsedAtOp < kVariantIdleOps) return false;
  for (size_t c = 0; c < num_candidates_; ++c)
    if (candidates_[c].segment == victim) return false;  // matching now (then it is not idle, but be sure)
  GRAFT_INFO_LIMITED(chatty_lines_[kChattyEviction], kChattyInfoLines, "evictions",
                     "segment #{} ({} ops): not replayed for {} ops; its graph makes room for a new {} ({}={})",
                     victim->id, victim->length(), ops_total_ - victim->lastUsedAtOp, what, option, limit);
  retireIdle(victim);  // after the scan: it changes `among`
  return true;
}

void Engine::retireLongIdle() {
  // A program that keeps building (a server whose request shapes never come
  // back) would otherwise keep every graph it ever built, up to
  // GRAFT_MAX_SEGMENTS, and their memory. Graphs of a loop's rarer phases
  // (an eval pass every few thousand steps) replay far more often than this.
  next_idle_sweep_at_ = ops_total_ + kVariantIdleOps;
  std::vector<Segment*> idle;  // retiring changes the live list: collect first
  for (Segment* s : segments_.liveSegments()) {
    if (ops_total_ - s->lastUsedAtOp < kSegmentIdleOps) continue;
    bool candidate = false;
    for (size_t c = 0; c < num_candidates_; ++c) candidate |= candidates_[c].segment == s;
    if (!candidate) idle.push_back(s);
  }
  for (Segment* s : idle) {
    GRAFT_INFO_LIMITED(chatty_lines_[kChattyEviction], kChattyInfoLines, "evictions",
                       "segment #{} ({} ops): not replayed for {} ops; its graph is destroyed (built again if "
                       "its run comes back)", s->id, s->length(), ops_total_ - s->lastUsedAtOp);
    retireIdle(s);
  }
}

void Engine::retireIdle(Segment* victim) {
  if (last_mismatch_.segment == victim) last_mismatch_ = {};
  retireSegment(victim);               // built again if it comes back
  built_runs_.erase(victim->runKey);
  dropGraph(victim);
  ++stats_.variantsEvicted;
}

bool Engine::variantKey(const OpBuffer& ops, size_t begin, size_t end, SequenceHash* key,
                        std::vector<int32_t>* waitInstance) {
  // Which record of ops [begin, end) (or none: one before them) each wait
  // names. Sequences of equal shapes whose waits name other records are
  // different variants (matchesAt tells them apart), so that goes into the
  // key after the shapes.
  bool fits = true;
  waitInstance->assign(end - begin, EventInstances::kExternal);
  scratch_events_.clear();
  for (size_t k = begin; k < end; ++k) {
    const OpDesc op = ops.view(k);
    key->append(op.shapeHash);
    if (op.kind == OpKind::EventRecord && scratch_events_.record(op.event) == EventInstances::kOverflow)
      fits = false;
    if (op.kind != OpKind::EventWait) continue;
    const int32_t instance = (*waitInstance)[k - begin] = scratch_events_.wait(op.event);
    if (instance != EventInstances::kExternal) key->append(hashCombine(kWaitInstanceSalt, uint64_t(uint32_t(instance))));
  }
  return fits;
}

bool Engine::buildPiece(const OpBuffer& ops, size_t begin, size_t end, uint64_t runKey, bool retrying,
                        uint64_t* retryAt) {
  if (end - begin < config_.minSegmentOps) return true;
  if (ops_total_ >= next_idle_sweep_at_) retireLongIdle();
  releaseRetired();
  SequenceHash h;
  std::vector<int32_t> waitInstance;
  if (!variantKey(ops, begin, end, &h, &waitInstance)) return true;  // more records than event slots
  if (segments_.findExpanded(h)) return true;
  const OpDesc first = ops.view(begin);
  if (segments_.live() >= config_.maxSegments && !evictIdleSegment()) {
    // Not a build failure: counted (once per sequence refused) as variant_limit is.
    if (!retrying && stats_.eagerByCause[size_t(EagerCause::SegmentLimit)]++ == 0)
      GRAFT_INFO("segment limit GRAFT_MAX_SEGMENTS={} reached: further sequences stay eager until a graph "
                 "goes unused for {} ops", config_.maxSegments, kVariantIdleOps);
    // Tried again when the graph replayed longest ago would be idle.
    uint64_t oldest = ops_total_;
    for (const Segment* s : segments_.liveSegments()) oldest = std::min(oldest, s->lastUsedAtOp);
    *retryAt = std::max({*retryAt, oldest + kVariantIdleOps, ops_total_ + 1024});
    return false;
  }
  if (segments_.countStartingWith(first.shapeHash) >= config_.maxVariants && !evictIdleVariant(first.shapeHash)) {
    if (!retrying) {  // counted and logged once per sequence, not per retry
      ++stats_.eagerByCause[size_t(EagerCause::VariantLimit)];
      GRAFT_INFO_LIMITED(chatty_lines_[kChattyVariantLimit], kChattyInfoLines, "variant limit",
                 "variant limit GRAFT_MAX_VARIANTS={} reached for sequences starting with {}; "
                 "this variant of {} ops stays eager until a variant goes unused for {} ops",
                 config_.maxVariants, executor_.describe(first), end - begin, kVariantIdleOps);
    }
    // When the variant replayed longest ago would be idle, if not used again
    // (at least some ops on: one matching right now is not evicted).
    uint64_t oldest = ops_total_;
    if (const std::vector<Segment*>* list = segments_.startingWith(first.shapeHash))
      for (const Segment* s : *list) oldest = std::min(oldest, s->lastUsedAtOp);
    *retryAt = std::max({*retryAt, oldest + kVariantIdleOps, ops_total_ + 1024});
    return false;
  }

  auto seg = makeHot<Segment>();
  seg->ops.reserve(end - begin, 0);
  seg->waitInstance = std::move(waitInstance);
  std::vector<OpDesc> views;
  views.reserve(end - begin);
  for (size_t k = begin; k < end; ++k) {
    const OpDesc op = ops.view(k);
    seg->ops.push(op);
    if (isEventOp(op.kind)) seg->eventOps.push_back(uint32_t(k - begin));
  }
  replay_events_.reserve(seg->eventOps.size());  // launchHeld() fills it without allocating
  for (size_t k = 0; k < seg->length(); ++k) views.push_back(seg->ops.view(k));
  std::string why;
  GraphHandle* graph;
  {
    StageTimer timer(Stage::Build);
    graph = executor_.build(BuildRequest{views, seg->waitInstance}, &why);
  }
  if (!graph) {
    ++stats_.buildFailures;
    GRAFT_INFO_LIMITED(chatty_lines_[kChattyBuild], kChattyInfoLines, "failed builds",
               "could not build a graph for {} ops starting with {}: {}; they stay eager",
               end - begin, executor_.describe(first), why);
    return true;
  }
  seg->graph = graph;
  seg->runKey = runKey;
  if (const ForkCandidate* fork = executor_.forkCandidate(graph)) seg->fork = *fork;
  seg->expanded = h;
  seg->tokenHash = hashCombine(h.value ^ kSegmentSalt, h.length);
  Segment* stored = segments_.add(std::move(seg));
  stored->lastUsedAtOp = ops_total_;
  ++stats_.graphsBuilt;
  // A program still learning (no graph carried an op in this window yet) gets
  // a full window after each build before it is judged; one whose graphs are
  // replaying keeps its window, so graphs built again and again while they
  // carry a small share of the ops (stream handles that change every step)
  // do not keep it from resting.
  if (stats_.opsViaGraph <= window_via_graph_start_) startRecordingWindow();
  GRAFT_DEBUG("segment #{}: graph of {} ops, first {} (after {} ops)", stored->id, stored->length(),
              executor_.describe(first), ops_total_);
  return true;
}

// ---------------------------------------------------------------------------
// Fallback log and statistics

void Engine::logFallback(Segment* s, size_t index, EagerCause cause, const OpDesc* expected,
                         const OpDesc* actual, size_t heldCount) {
  const uint64_t bit = uint64_t(1) << (size_t(cause) % 64);
  if (s->loggedReasons & bit) return;
  s->loggedReasons |= bit;
  if (!log::enabled(chatty_lines_[kChattyFallback] < kChattyInfoLines ? log::Level::Info : log::Level::Debug)) return;
  std::string what;
  if (expected && actual) {
    what = executor_.describe(*expected) + ": " + executor_.describeDifference(*expected, *actual);
  } else if (actual) {
    what = "got " + executor_.describe(*actual);
  } else if (cause == EagerCause::SyncInSegment) {
    what = "the host synchronized";
  } else if (cause == EagerCause::QueryInSegment) {
    what = "the host queried held work";
  } else if (cause == EagerCause::IdleFlush) {
    what = "the program issued nothing for GRAFT_IDLE_FLUSH_MS";
  }
  GRAFT_INFO_LIMITED(chatty_lines_[kChattyFallback], kChattyInfoLines, "fallbacks of segments",
             "fallback: segment #{} ({} ops) at op {}: {}{}{}; {} held ops issued eagerly", s->id,
             s->length(), index, toString(cause), what.empty() ? "" : ": ", what, heldCount);
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.opsTotal = ops_total_;
  s.opsSoleExpected = ops_sole_expected_;
  s.queriesAnsweredNotReady = queries_answered_not_ready_;
  s.queriesIssuedForProgress = queries_issued_for_progress_;
  for (const auto& [stream, counters] : streams_) s.opsByStream.emplace_back(stream, counters.ops);
  std::sort(s.opsByStream.begin(), s.opsByStream.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  s.liveSegments = segments_.live();
  return s;
}

}  // namespace graft::core
