#include "core/segment.h"

#include <algorithm>

#include "core/hot_path.h"

namespace graft::core {

Segment* SegmentStore::add(HotPtr<Segment> segment) {
  ++generation_;
  Segment* s = segment.get();
  s->id = static_cast<uint32_t>(all_.size());
  all_.push_back(std::move(segment));
  auto& list = by_first_[s->firstShapeHash()];
  list.push_back(s);
  std::stable_sort(list.begin(), list.end(),
                   [](const Segment* a, const Segment* b) { return a->length() > b->length(); });
  by_expanded_[hashCombine(s->expanded.value, s->expanded.length)] = s;
  s->liveIndex = uint32_t(live_.size());
  live_.push_back(s);
  return s;
}

GRAFT_HOT const std::vector<Segment*>* SegmentStore::startingWith(uint64_t firstShapeHash) const {
  if (by_first_.empty()) return nullptr;  // no call into the map's code (a page of its own) before any segment
  auto it = by_first_.find(firstShapeHash);
  return it == by_first_.end() || it->second.empty() ? nullptr : &it->second;
}

size_t SegmentStore::countStartingWith(uint64_t firstShapeHash) const {
  auto it = by_first_.find(firstShapeHash);
  return it == by_first_.end() ? 0 : it->second.size();
}

Segment* SegmentStore::findExpanded(const SequenceHash& h) const {
  auto it = by_expanded_.find(hashCombine(h.value, h.length));
  return it == by_expanded_.end() ? nullptr : it->second;
}

void SegmentStore::disable(Segment* s) {
  if (s->disabled) return;
  ++generation_;
  s->disabled = true;
  auto it = by_first_.find(s->firstShapeHash());
  if (it != by_first_.end()) std::erase(it->second, s);
  Segment* last = live_.back();
  live_[s->liveIndex] = last;
  last->liveIndex = s->liveIndex;
  live_.pop_back();
}

void SegmentStore::release(uint32_t id) {
  if (id >= all_.size() || !all_[id] || !all_[id]->disabled) return;
  ++generation_;
  Segment* s = all_[id].get();
  auto it = by_expanded_.find(hashCombine(s->expanded.value, s->expanded.length));
  if (it != by_expanded_.end() && it->second == s) by_expanded_.erase(it);
  auto first = by_first_.find(s->firstShapeHash());
  if (first != by_first_.end() && first->second.empty()) by_first_.erase(first);
  all_[id].reset();
}

void SegmentStore::retire(Segment* s) {
  disable(s);
  auto it = by_expanded_.find(hashCombine(s->expanded.value, s->expanded.length));
  if (it != by_expanded_.end() && it->second == s) by_expanded_.erase(it);
}

}  // namespace graft::core
