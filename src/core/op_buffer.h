// OpBuffer: an append-only list of owned op copies (deep copies of shape and
// value bytes). Used for held ops and for a segment's recorded ops.
//
// Threading: not thread-safe; owned by the engine under its lock. Allocates
// only when it grows past its high-water mark (never in steady state).
#pragma once

#include <cstdint>
#include <vector>

#include "core/op.h"

namespace graft::core {

class OpBuffer {
 public:
  void reserve(size_t ops, size_t bytes) {
    ops_.reserve(ops);
    bytes_.reserve(bytes);
  }
  uint32_t push(const OpDesc& op);
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }
  void clear() {
    ops_.clear();
    bytes_.clear();
  }
  OpDesc view(size_t i) const;
  // Overwrites op i's value bytes (same length) with `value`.
  void setValue(size_t i, Bytes value);

 private:
  struct Stored {
    OpKind kind;
    EagerCause cause;
    uint16_t api;
    StreamKey stream;
    uint64_t event;
    uint64_t shapeHash;
    uint32_t shapeOffset, shapeSize, valueOffset, valueSize;
  };
  std::vector<Stored> ops_;
  std::vector<uint8_t> bytes_;
};

}  // namespace graft::core
