#include "core/history.h"

#include <cstring>
#include "core/hot_path.h"

namespace graft::core {

History::History(size_t tokenCapacity, size_t opCapacity, size_t byteCapacity)
    : tokens_(tokenCapacity),
      ops_(opCapacity),
      bytes_(byteCapacity),
      byte_capacity_(byteCapacity),
      events_(2 * opCapacity) {}  // a replayed segment may name many events

GRAFT_HOT uint64_t History::pushToken(const Token& t) {
  tokens_[tokens_pushed_ % tokens_.size()] = t;
  return tokens_pushed_++;
}

GRAFT_HOT uint64_t History::pushOp(const OpDesc& op, uint64_t tokenHash, bool boundary) {
  const uint64_t len = uint64_t(op.shape.size) + op.value.size;
  const uint64_t cap = byte_capacity_;
  StoredOp s{op, 0};
  if (len <= cap) {
    if (byte_pos_ % cap + len > cap) byte_pos_ += cap - byte_pos_ % cap;  // no wrap inside an op
    s.byteStart = byte_pos_;
    uint8_t* base = bytes_.begin() + byte_pos_ % cap;
    if (op.shape.size) std::memcpy(base, op.shape.data, op.shape.size);
    if (op.value.size) std::memcpy(base + op.shape.size, op.value.data, op.value.size);
    s.desc.shape.data = base;
    s.desc.value.data = base + op.shape.size;
    byte_pos_ += len;
  } else {
    // Larger than the whole ring: keep the header only; op() reports it lost.
    s.byteStart = ~uint64_t(0);
    s.desc.shape = {};
    s.desc.value = {};
  }
  ops_[ops_pushed_ % ops_.size()] = s;
  Token t;
  t.hash = tokenHash;
  t.kind = TokenKind::Op;
  t.boundary = boundary;
  t.opSeq = ops_pushed_++;
  return pushToken(t);
}

uint64_t History::pushSegment(uint32_t segmentId, uint64_t tokenHash, const uint64_t* events,
                              uint32_t eventCount) {
  Token t;
  t.hash = tokenHash;
  t.kind = TokenKind::Segment;
  t.segment = segmentId;
  t.events = eventCount;
  t.opSeq = events_pushed_;
  for (uint32_t i = 0; i < eventCount; ++i) events_[events_pushed_++ % events_.size()] = events[i];
  return pushToken(t);
}

bool History::segmentEvent(const Token& t, uint32_t i, uint64_t* out) const {
  const uint64_t seq = t.opSeq + i;
  if (t.kind != TokenKind::Segment || i >= t.events || seq >= events_pushed_ ||
      events_pushed_ - seq > events_.size())
    return false;
  *out = events_[seq % events_.size()];
  return true;
}

uint64_t History::pushBarrier(uint64_t tokenHash) {
  Token t;
  t.hash = tokenHash;
  t.kind = TokenKind::Barrier;
  t.boundary = true;
  return pushToken(t);
}

const Token* History::token(uint64_t index) const {
  if (index >= tokens_pushed_ || tokens_pushed_ - index > tokens_.size()) return nullptr;
  return &tokens_[index % tokens_.size()];
}

bool History::op(uint64_t seq, OpDesc* out) const {
  if (seq >= ops_pushed_ || ops_pushed_ - seq > ops_.size()) return false;
  const StoredOp& s = ops_[seq % ops_.size()];
  if (s.byteStart == ~uint64_t(0)) return false;
  if (byte_pos_ > s.byteStart + byte_capacity_) return false;  // bytes overwritten
  *out = s.desc;
  return true;
}

}  // namespace graft::core
