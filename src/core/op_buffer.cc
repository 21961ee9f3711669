#include "core/op_buffer.h"

#include "core/hot_path.h"

#include <cassert>
#include <cstring>

namespace graft::core {

uint32_t OpBuffer::push(const OpDesc& op) { return pushBorrowing(op, nullptr, nullptr); }

GRAFT_HOT uint32_t OpBuffer::pushBorrowing(const OpDesc& op, const uint8_t* shape, const uint8_t* value) {
  Stored s{op.kind, op.cause, op.api, op.stream, op.event, op.shapeHash, shape, value,
           0, op.shape.size, 0, op.value.size};
  if (!shape) {
    bytes_.resize((bytes_.size() + kCacheLine - 1) & ~(kCacheLine - 1));
    s.shapeOffset = static_cast<uint32_t>(bytes_.size());
    bytes_.insert(bytes_.end(), op.shape.data, op.shape.data + op.shape.size);
  }
  if (!value) {
    s.valueOffset = static_cast<uint32_t>(bytes_.size());
    bytes_.insert(bytes_.end(), op.value.data, op.value.data + op.value.size);
  }
  ops_.push_back(s);
  return static_cast<uint32_t>(ops_.size() - 1);
}

GRAFT_HOT OpDesc OpBuffer::view(size_t i) const {
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

void OpBuffer::setValue(size_t i, Bytes value) {
  const Stored& s = ops_[i];
  assert(!s.valueBorrowed);  // only segments are patched, and they never borrow
  if (value.size == s.valueSize && value.size) std::memmove(&bytes_[s.valueOffset], value.data, value.size);
}

}  // namespace graft::core
