#include "core/op_buffer.h"

#include <cstring>

namespace graft::core {

uint32_t OpBuffer::push(const OpDesc& op) {
  Stored s{op.kind, op.cause, op.api, op.stream, op.event, op.shapeHash, 0, op.shape.size, 0,
           op.value.size};
  s.shapeOffset = static_cast<uint32_t>(bytes_.size());
  bytes_.insert(bytes_.end(), op.shape.data, op.shape.data + op.shape.size);
  s.valueOffset = static_cast<uint32_t>(bytes_.size());
  bytes_.insert(bytes_.end(), op.value.data, op.value.data + op.value.size);
  ops_.push_back(s);
  return static_cast<uint32_t>(ops_.size() - 1);
}

OpDesc OpBuffer::view(size_t i) const {
  const Stored& s = ops_[i];
  OpDesc d;
  d.kind = s.kind;
  d.cause = s.cause;
  d.api = s.api;
  d.stream = s.stream;
  d.event = s.event;
  d.shapeHash = s.shapeHash;
  d.shape = {bytes_.data() + s.shapeOffset, s.shapeSize};
  d.value = {bytes_.data() + s.valueOffset, s.valueSize};
  return d;
}

void OpBuffer::setValue(size_t i, Bytes value) {
  const Stored& s = ops_[i];
  if (value.size == s.valueSize && value.size) std::memcpy(&bytes_[s.valueOffset], value.data, value.size);
}

}  // namespace graft::core
