// Segments: op sequences that have repeated and now have an executable graph,
// and the store that finds them by their first op.
//
// Threading: not thread-safe (engine lock). Adding a segment allocates;
// lookups do not.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/executor.h"
#include "core/hash.h"
#include "core/op_buffer.h"

namespace graft::core {

struct Segment {
  uint32_t id = 0;
  // The segment's ops: shapes as recorded, values as the executable graph
  // currently holds them (updated after each patch).
  OpBuffer ops;
  std::vector<int32_t> waitInstance;  // per op, see BuildRequest
  std::vector<uint32_t> eventOps;     // indices of its event records and waits
  SequenceHash expanded;              // over the ops' shape hashes
  uint64_t tokenHash = 0;             // what the period detector sees for one replay
  GraphHandle* graph = nullptr;
  ForkCandidate fork;                 // the graph's (Executor::forkCandidate); joinsInto 0: none
  bool disabled = false;              // a launch or patch failed, or it was dropped: never matched again
  uint64_t replays = 0;
  uint64_t patches = 0;
  uint64_t lastUsedAtOp = 0;          // the engine's op count at its build or latest replay
  // The current window of its last tries (replays, and mismatches that
  // issued held ops eagerly; Engine::countTry): their number, the mismatches
  // among them, the ops replayed and the held ops issued eagerly after a
  // mismatch.
  uint32_t windowTries = 0;
  uint32_t windowMismatches = 0;
  uint64_t windowReplayedOps = 0;
  uint64_t windowWastedOps = 0;
  uint32_t mismatchesSinceReplay = 0;  // costly mismatches charged since its latest replay
  uint64_t loggedReasons = 0;         // bit per fallback reason already logged
  uint64_t runKey = 0;                // the run it was cut from (Engine::built_runs_)
  uint32_t liveIndex = 0;             // its place in SegmentStore::live_ while not disabled
  // The segment whose run began with the op right after this one's replay
  // completed, the last time that run began with one candidate (its id + 1;
  // 0: none): the engine expects it next (Engine::armStart).
  uint32_t followedBy = 0;

  size_t length() const { return ops.size(); }
  uint64_t firstShapeHash() const { return ops.view(0).shapeHash; }
};

class SegmentStore {
 public:
  // Takes ownership. Returns the stored segment.
  Segment* add(HotPtr<Segment> segment);
  Segment* byId(uint32_t id) const { return id < all_.size() ? all_[id].get() : nullptr; }
  // Live segments whose first op has this shape hash, longest first.
  const std::vector<Segment*>* startingWith(uint64_t firstShapeHash) const;
  size_t countStartingWith(uint64_t firstShapeHash) const;
  Segment* findExpanded(const SequenceHash& h) const;
  void disable(Segment* s);
  // Disables `s` and forgets its expanded sequence, so it can be built anew.
  void retire(Segment* s);
  // Frees a retired segment: its id then names nothing (byId returns null;
  // all() holds null there). Only when nothing refers to it any more: no held
  // op borrows its bytes, no candidate or mismatch record names it, its graph
  // is destroyed (Engine::releaseRetired).
  void release(uint32_t id);
  size_t live() const { return live_.size(); }
  // Changes whenever a segment is added, disabled or released: what
  // startingWith() answers for any hash is the same while it does not.
  uint64_t generation() const { return generation_; }
  // The segments not disabled, in no particular order (a scan costs the live
  // count, never the number of segments ever built).
  const std::vector<Segment*>& liveSegments() const { return live_; }
  // Every segment ever added, by id; null where released.
  const std::vector<HotPtr<Segment>>& all() const { return all_; }

 private:
  std::vector<HotPtr<Segment>> all_;
  std::unordered_map<uint64_t, std::vector<Segment*>> by_first_;
  std::unordered_map<uint64_t, Segment*> by_expanded_;
  std::vector<Segment*> live_;
  uint64_t generation_ = 0;
};

}  // namespace graft::core
