// EventInstances: the event structure of an op sequence, independent of the
// event handles the program happens to use.
//
// Each EventRecord in a sequence creates a new record instance (0, 1, 2, ...).
// Each EventWait refers to the latest instance of its event recorded earlier
// in the same sequence, or to none (-1: "external", recorded before the
// sequence began). Two sequences have the same event structure when their
// waits refer to the same instances. Handles are values, not shape.
//
// Threading: not thread-safe. Allocates only in the constructor (its table's
// pages are touched only as slots are used: the engine keeps one per
// candidate variant); clear() is O(1) (generation stamps).
#pragma once

#include <cstdint>

#include "core/hash.h"
#include "core/zeroed_array.h"

namespace graft::core {

class EventInstances {
 public:
  static constexpr int32_t kExternal = -1;
  static constexpr int32_t kOverflow = -2;

  // `capacity` must be a power of two.
  explicit EventInstances(size_t capacity = 4096) : slots_(capacity) {}

  void clear() {
    ++generation_;
    records_ = 0;
    used_ = 0;
  }
  // Returns the new instance index, or kOverflow if the table is full.
  int32_t record(uint64_t event) {
    Slot* s = find(event, /*insert=*/true);
    if (!s) return kOverflow;
    s->instance = records_++;
    return s->instance;
  }
  int32_t wait(uint64_t event) {
    Slot* s = find(event, /*insert=*/false);
    return s ? s->instance : kExternal;
  }
  int32_t records() const { return records_; }

 private:
  struct Slot {
    uint64_t event = 0;
    uint64_t generation = 0;
    int32_t instance = 0;
  };
  Slot* find(uint64_t event, bool insert) {
    const size_t mask = slots_.size() - 1;  // capacity is a power of two
    size_t i = mix64(event) & mask;
    for (size_t probe = 0; probe < slots_.size(); ++probe, i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.generation != generation_) {
        if (!insert) return nullptr;
        if (used_ * 10 >= slots_.size() * 7) return nullptr;
        s.generation = generation_;
        s.event = event;
        ++used_;
        return &s;
      }
      if (s.event == event) return &s;
    }
    return nullptr;
  }
  ZeroedArray<Slot> slots_;  // all zero: generation 0 is never current
  uint64_t generation_ = 1;
  int32_t records_ = 0;
  size_t used_ = 0;
};

}  // namespace graft::core
