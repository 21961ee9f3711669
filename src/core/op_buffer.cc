#include "core/op_buffer.h"

#include "core/hot_path.h"

#include <cassert>
#include <cstring>

namespace graft::core {

uint32_t OpBuffer::push(const OpDesc& op) { return pushCopying(op, nullptr, nullptr); }

GRAFT_HOT uint32_t OpBuffer::pushCopying(const OpDesc& op, const uint8_t* shape, const uint8_t* value) {
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

void OpBuffer::setValue(size_t i, Bytes value) {
  const Stored& s = ops_[i];
  assert(!s.valueBorrowed);  // only segments are patched, and they never borrow
  if (value.size == s.valueSize && value.size) std::memmove(&bytes_[s.valueOffset], value.data, value.size);
}

}  // namespace graft::core
