// History: what a run built from the history may rely on.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/history.h"
#include "resident_bytes.h"

namespace graft::core {
namespace {

TEST(History, RingsSizedForTheLongestPeriodCostMemoryOnlyAsUsed) {
  // graft makes one history per process, sized for GRAFT_MAX_PERIOD; a short
  // program must not pay for all of it (in page faults at start, and in
  // resident memory) before it has recorded anything.
  const size_t before = testing::residentBytes();
  History h(size_t(1) << 20, size_t(1) << 21, size_t(64) << 20);
  ASSERT_EQ(h.token(0), nullptr);
  EXPECT_LT(testing::residentBytes() - before, size_t(8) << 20)
      << "rings of ~200 MiB touched when made";
  // Recording works from the first op, and keeps what it recorded.
  uint8_t shape[24] = {1, 2, 3};
  OpDesc op{};
  op.shape = {shape, sizeof shape};
  const uint64_t at = h.pushOp(op, 0x51, false);
  const Token* t = h.token(at);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->hash, 0x51u);
  OpDesc back{};
  ASSERT_TRUE(h.op(t->opSeq, &back));
  ASSERT_EQ(back.shape.size, sizeof shape);
  EXPECT_EQ(back.shape.data[2], 3);
}

TEST(History, AReplayedSegmentKeepsTheEventsOfThatReplay) {
  // A program whose events change from one replay to the next: a run built
  // from the history must see the handles each replay named, in order.
  History h(16, 8, 1 << 12);
  const uint64_t first[] = {0xa1, 0xa2, 0xa3};
  const uint64_t second[] = {0xb1, 0xb2, 0xb3};
  const Token a = *h.token(h.pushSegment(7, 0x77, first, 3));
  const Token b = *h.token(h.pushSegment(7, 0x77, second, 3));
  for (uint32_t i = 0; i < 3; ++i) {
    uint64_t e = 0;
    ASSERT_TRUE(h.segmentEvent(a, i, &e));
    EXPECT_EQ(e, first[i]);
    ASSERT_TRUE(h.segmentEvent(b, i, &e));
    EXPECT_EQ(e, second[i]);
  }
  uint64_t e = 0;
  EXPECT_FALSE(h.segmentEvent(a, 3, &e)) << "past the replay's own events";
  const Token noEvents = *h.token(h.pushSegment(8, 0x88));
  EXPECT_FALSE(h.segmentEvent(noEvents, 0, &e));
}

TEST(History, OverwrittenEventsAreReportedLostNotReused) {
  // The event ring holds twice the op ring's capacity (16 here): a replay's
  // handles that later replays overwrote must not read as another replay's.
  History h(64, 8, 1 << 12);
  const uint64_t old[] = {1, 2, 3, 4};
  const Token t = *h.token(h.pushSegment(1, 0x11, old, 4));
  uint64_t later[16];
  for (uint64_t i = 0; i < 16; ++i) later[i] = 100 + i;
  h.pushSegment(2, 0x22, later, 16);
  uint64_t e = 0;
  for (uint32_t i = 0; i < 4; ++i) EXPECT_FALSE(h.segmentEvent(t, i, &e)) << i;
}

}  // namespace
}  // namespace graft::core
