// History: the recent token stream the period detector sees, and deep copies
// of the recent eagerly issued ops, so a confirmed period can be turned into
// segments without re-observing it.
//
// A token is one of: an op issued eagerly (graphable or boundary), a whole
// segment replayed through a graph, or a host barrier (sync). A replayed
// segment keeps the event handles its event ops named in that replay (a
// program may use other events each time: a run built from the history must
// name the events it named then, or its waits would find other records).
// Rings of fixed capacity; old entries are overwritten.
//
// Threading: not thread-safe; owned by the engine under its lock. Allocates
// only in the constructor.
#pragma once

#include <cstdint>

#include "core/op.h"
#include "core/zeroed_array.h"

namespace graft::core {

enum class TokenKind : uint8_t { Op, Segment, Barrier };

struct Token {
  uint64_t hash = 0;
  TokenKind kind = TokenKind::Op;
  bool boundary = false;  // splits segments (boundary ops, barriers, relevant queries)
  uint32_t segment = 0;   // TokenKind::Segment
  uint32_t events = 0;    // TokenKind::Segment: event handles kept, from opSeq on in the event ring
  uint64_t opSeq = 0;     // TokenKind::Op: sequence number in the op ring;
                          // TokenKind::Segment: of its first event handle in the event ring
};

class History {
 public:
  History(size_t tokenCapacity, size_t opCapacity, size_t byteCapacity);

  // Appends a token; returns its absolute index.
  uint64_t pushOp(const OpDesc& op, uint64_t tokenHash, bool boundary);
  // `events`: the handles of the replay's event ops, in order.
  uint64_t pushSegment(uint32_t segmentId, uint64_t tokenHash, const uint64_t* events = nullptr,
                       uint32_t eventCount = 0);
  uint64_t pushBarrier(uint64_t tokenHash);

  uint64_t tokenCount() const { return tokens_pushed_; }
  // nullptr when `index` has been overwritten or not written yet.
  const Token* token(uint64_t index) const;
  // False when the op (or its bytes) has been overwritten.
  bool op(uint64_t seq, OpDesc* out) const;
  // The i-th event handle of a Segment token; false when overwritten.
  bool segmentEvent(const Token& t, uint32_t i, uint64_t* out) const;

 private:
  struct StoredOp {
    OpDesc desc;  // shape/value point into bytes_
    uint64_t byteStart;
  };
  uint64_t pushToken(const Token& t);

  ZeroedArray<Token> tokens_;  // rings: pages touched only as used
  uint64_t tokens_pushed_ = 0;
  ZeroedArray<StoredOp> ops_;
  uint64_t ops_pushed_ = 0;
  ZeroedArray<uint8_t> bytes_;
  size_t byte_capacity_;
  uint64_t byte_pos_ = 0;
  ZeroedArray<uint64_t> events_;
  uint64_t events_pushed_ = 0;
};

}  // namespace graft::core
