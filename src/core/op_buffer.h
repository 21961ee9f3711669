// OpBuffer: an append-only list of ops. Each op's shape and value bytes are
// either copied into the buffer or, for held ops, borrowed: they point into a
// segment's recorded bytes that are equal to the op's (pushBorrowing), which
// saves copying what a replay does not need to change.
//
// Borrowed bytes must outlive the buffer's use of them and must not change
// meanwhile; the engine borrows only from segments (freed only while no op
// is held: Engine::releaseRetired) and only
// the bytes of the segment op at the held op's own index, which no patch can
// overwrite before the held op is consumed (see Engine::advance).
//
// Threading: not thread-safe; owned by the engine under its lock. Allocates
// only when it grows past its high-water mark (never in steady state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/hot_arena.h"
#include "core/hot_path.h"
#include "core/op.h"

namespace graft::core {

// Each op's record and its shape bytes start a cache line, so reading one op
// touches as few lines as possible; the storage is in the hot arena, so as few
// pages (core/hot_path.h).
inline constexpr size_t kCacheLine = HotArena::kAlign;

class OpBuffer {
 public:
  void reserve(size_t ops, size_t bytes) {
    ops_.reserve(ops);
    bytes_.reserve(bytes);
  }
  uint32_t push(const OpDesc& op);
  // Like push, but the op's shape bytes are `shape` (equal to op.shape) and,
  // when `value` is non-null, its value bytes are `value` (equal to
  // op.value); neither is copied.
  // Inline: a replay holds most ops this way, borrowing both.
  GRAFT_FAST_LANE_INLINE uint32_t pushBorrowing(const OpDesc& op, const uint8_t* shape, const uint8_t* value) {
    if (!shape || !value) return pushCopying(op, shape, value);
    ops_.push_back(Stored{op.kind, op.cause, op.api, op.stream, op.event, op.shapeHash, shape, value, 0,
                          op.shape.size, 0, op.value.size});
    return static_cast<uint32_t>(ops_.size() - 1);
  }
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }
  void clear() {
    ops_.clear();
    bytes_.clear();
  }
  OpDesc view(size_t i) const {
    const Stored& s = ops_[i];
    OpDesc d;
    d.kind = s.kind;
    d.cause = s.cause;
    d.api = s.api;
    d.stream = s.stream;
    d.event = s.event;
    d.shapeHash = s.shapeHash;
    d.shape = {s.shapeBorrowed ? s.shapeBorrowed : bytes_.data() + s.shapeOffset, s.shapeSize};
    d.value = {s.valueBorrowed ? s.valueBorrowed : bytes_.data() + s.valueOffset, s.valueSize};
    return d;
  }
  // Overwrites op i's value bytes (same length) with `value`.
  void setValue(size_t i, Bytes value);

 private:
  // Copies the shape bytes when `shape` is null, the value bytes when `value` is.
  uint32_t pushCopying(const OpDesc& op, const uint8_t* shape, const uint8_t* value);
  struct alignas(kCacheLine) Stored {
    OpKind kind;
    EagerCause cause;
    uint16_t api;
    StreamKey stream;
    uint64_t event;
    uint64_t shapeHash;
    const uint8_t* shapeBorrowed;  // nullptr: at shapeOffset in bytes_
    const uint8_t* valueBorrowed;  // nullptr: at valueOffset in bytes_
    uint32_t shapeOffset, shapeSize, valueOffset, valueSize;
  };
  HotVector<Stored> ops_;
  HotVector<uint8_t> bytes_;  // each op's shape starts a line
};

// Ops [begin, begin + size) of an OpBuffer, viewed one at a time (no copies).
// Valid while the buffer is not changed.
class OpRange {
 public:
  OpRange(const OpBuffer& buffer, size_t begin, size_t size)
      : buffer_(&buffer), begin_(begin), size_(size) {}
  size_t size() const { return size_; }
  OpDesc operator[](size_t k) const { return buffer_->view(begin_ + k); }

 private:
  const OpBuffer* buffer_;
  size_t begin_, size_;
};

}  // namespace graft::core
