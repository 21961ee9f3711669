// Period detection on token streams.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/period_detector.h"
#include "resident_bytes.h"

namespace graft::core {
namespace {

PeriodDetector::Confirmation feedFull(PeriodDetector& d, uint64_t token) {
  return d.push(token * 0x9e3779b97f4a7c15ull + 1);
}
uint32_t feed(PeriodDetector& d, uint64_t token) { return feedFull(d, token).period; }

TEST(PeriodDetector, AnIndexForTheLongestPeriodCostsMemoryOnlyAsUsed) {
  // Sized for GRAFT_MAX_PERIOD at start (~48 MiB for a million-op period):
  // not resident before tokens come, and a fresh index finds periods.
  const size_t before = testing::residentBytes();
  PeriodDetector d(/*warmup=*/3, /*maxPeriod=*/1u << 20);
  EXPECT_LT(testing::residentBytes() - before, size_t(4) << 20) << "the index was touched when made";
  uint32_t period = 0;
  for (uint32_t i = 0; i < 10 * 41 && !period; ++i) period = feed(d, 7 + i % 41);
  EXPECT_EQ(period, 41u);
}

TEST(PeriodDetector, RearmedReportsARunningPeriodAgainAtOnce) {
  // The engine may turn a confirmation down (variant limit) and take it
  // later: after rearm() the period still running is reported at the next
  // token, without warming up again.
  PeriodDetector d(/*warmup=*/3, /*maxPeriod=*/1000);
  uint32_t period = 0;
  uint32_t i = 0;
  for (; i < 10 * 37 && !period; ++i) period = feed(d, 1000 + i % 37);
  ASSERT_EQ(period, 37u);
  for (uint32_t k = 0; k < 200; ++k, ++i) ASSERT_EQ(feed(d, 1000 + i % 37), 0u) << "reported once until rearmed";
  d.rearm();
  EXPECT_EQ(feed(d, 1000 + i % 37), 37u);
}

TEST(PeriodDetector, ConfirmsAfterWarmupRepeats) {
  PeriodDetector d(/*warmup=*/3, /*maxPeriod=*/1000);
  uint32_t confirmedAt = 0, period = 0;
  for (uint32_t i = 0; i < 10 * 37 && !period; ++i) {
    period = feed(d, 1000 + i % 37);
    confirmedAt = i + 1;
  }
  EXPECT_EQ(period, 37u);
  // Three identical instances seen: confirmed at the end of the third.
  EXPECT_LE(confirmedAt, 3u * 37u + 1);
  EXPECT_GE(confirmedAt, 2u * 37u + 37u - PeriodDetector::kGram);
}

TEST(PeriodDetector, ReportsOnceUntilTheRunBreaks) {
  // A period of 40 ops: one report per run.
  PeriodDetector d(2, 1000);
  int reports = 0;
  for (uint32_t i = 0; i < 50 * 40; ++i) reports += feed(d, i % 40) != 0;
  EXPECT_EQ(reports, 1);
  for (uint32_t i = 0; i < 7; ++i) feed(d, 999 + i);  // break
  for (uint32_t i = 0; i < 50 * 40; ++i) reports += feed(d, i % 40) != 0;
  EXPECT_EQ(reports, 2);
}

TEST(PeriodDetector, ShortPeriodsAreReportedAgainUnrolled) {
  // A period of 10 ops: at warmup periods (unroll 1), then once the run
  // covers warmup instances of 4 periods (unroll 4), then not again.
  PeriodDetector d(3, 1000);
  std::vector<std::pair<uint32_t, PeriodDetector::Confirmation>> reports;
  for (uint32_t i = 0; i < 50 * 10; ++i)
    if (auto c = feedFull(d, i % 10); c.period) reports.push_back({i + 1, c});
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].second.period, 10u);
  EXPECT_EQ(reports[0].second.unroll, 1u);
  EXPECT_LE(reports[0].first, 3u * 10u);
  EXPECT_EQ(reports[1].second.period, 10u);
  EXPECT_EQ(reports[1].second.unroll, 4u);
  EXPECT_EQ(reports[1].first, 10u + 2u * 40u);
}

TEST(PeriodDetector, NoiseNeverConfirms) {
  PeriodDetector d(3, 1000);
  uint64_t x = 12345;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    EXPECT_EQ(feed(d, x >> 20), 0u);
  }
}

TEST(PeriodDetector, FindsTheWholeIterationAroundInnerRepeats) {
  // pre, 8 x layer(5 tokens), post: the whole iteration (43 tokens) must be
  // confirmed at some point, even though the layer period confirms first.
  PeriodDetector d(3, 1000);
  bool sawWhole = false;
  for (int it = 0; it < 10; ++it) {
    std::vector<uint64_t> seq{1, 2};
    for (int l = 0; l < 8; ++l)
      for (int k = 0; k < 5; ++k) seq.push_back(100 + k);
    seq.push_back(3);
    for (uint64_t t : seq) sawWhole |= feed(d, t) == seq.size();
  }
  EXPECT_TRUE(sawWhole);
}

TEST(PeriodDetector, ShortPeriodsAreUnrolledOnlyOverWarmupUnrolledInstances) {
  // 3 tokens of one op each, no boundary: unrolled 11 times (33 ops), so the
  // run must cover 2 x 33 ops past the first instance.
  PeriodDetector d(3, 1000);
  EXPECT_EQ(PeriodDetector::unrollFor(3), 11u);
  EXPECT_EQ(PeriodDetector::unrollFor(32), 1u);
  uint32_t confirmedAt = 0;
  for (uint32_t i = 0; i < 300 && !confirmedAt; ++i)
    if (feedFull(d, i % 3).unroll == 11) confirmedAt = i + 1;
  EXPECT_EQ(confirmedAt, 3u + 2u * 33u);
  // A period of 2 replayed segments of 40 ops each is long already: one
  // report, not unrolled.
  PeriodDetector e(3, 1000);
  int reports = 0;
  for (uint32_t i = 0; i < 300; ++i) {
    const auto c = e.push(0x1234567 + (i % 2), 40, false);
    reports += c.period != 0;
    EXPECT_EQ(c.unroll, 1u);
  }
  EXPECT_EQ(reports, 1);
}

TEST(PeriodDetector, ShortPeriodsWithABoundaryConfirmAfterWarmupPeriods) {
  // 3 ops and a sync: the runs between syncs cannot be unrolled.
  PeriodDetector d(3, 1000);
  uint32_t confirmedAt = 0;
  for (uint32_t i = 0; i < 300 && !confirmedAt; ++i) {
    const bool sync = i % 4 == 3;
    const auto c = d.push(0x777 + i % 4, sync ? 0 : 1, sync);
    EXPECT_EQ(c.unroll, 1u);
    if (c.period && !confirmedAt) confirmedAt = i + 1;
  }
  EXPECT_GT(confirmedAt, 0u);
  EXPECT_LE(confirmedAt, 3u * 4u + 1u);
}

// A step of `len` tokens drawn from four kernels in a fixed pseudo-random
// order: every 4-gram recurs within a few hundred tokens.
std::vector<uint64_t> stepOfFourKernels(size_t len) {
  std::vector<uint64_t> seq;
  uint64_t x = 99;
  for (size_t k = 0; k < len; ++k) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    seq.push_back(x >> 62);
  }
  return seq;
}

TEST(PeriodDetector, FindsALongStepOfAFewKernels) {
  // 3000 launches of four kernels (graft's tokens name kernels and shapes,
  // not pointers): the step is found, although no short gram is seen only
  // once a step (0 graphs for such a C++ program before the long grams).
  PeriodDetector d(3, 16384);
  const std::vector<uint64_t> step = stepOfFourKernels(3000);
  bool found = false;
  for (int it = 0; it < 6 && !found; ++it)
    for (uint64_t t : step) found |= feed(d, t) == step.size();
  EXPECT_TRUE(found);
}

TEST(PeriodDetector, FindsAStepThatAlternatesByOneLaunch) {
  // The same step with one more launch (of one of the four kernels) in its
  // middle every other time: the launch sequence repeats every two steps.
  PeriodDetector d(3, 16384);
  const std::vector<uint64_t> step = stepOfFourKernels(3000);
  const uint32_t twoSteps = 2 * 3000 + 1;
  bool found = false;
  for (int it = 0; it < 12 && !found; ++it)
    for (size_t k = 0; k < step.size(); ++k) {
      if (k == 1500 && it % 2 == 1) found |= feed(d, 3) == twoSteps;
      found |= feed(d, step[k]) == twoSteps;
    }
  EXPECT_TRUE(found);
}

TEST(PeriodDetector, AStepWithOneOpThatChangesEveryTimeIsStillFound) {
  // 40 launches and a memset whose size changes every step (a new token
  // each time): the step is confirmed with a hole where the memset is (no
  // period at all before holes, so nothing of such a program was graphed).
  PeriodDetector d(3, 1000);
  bool found = false;
  for (uint64_t it = 0; it < 10 && !found; ++it)
    for (uint64_t k = 0; k < 41 && !found; ++k) found = feed(d, k == 20 ? 5000 + it : k) == 41;
  EXPECT_TRUE(found);
}

TEST(PeriodDetector, DifferencesAtAnotherPlaceEveryTimeAreNoPeriod) {
  // The place that changes moves every step: no hole holds, nothing confirms.
  PeriodDetector d(3, 1000);
  for (uint64_t it = 0; it < 40; ++it)
    for (uint64_t k = 0; k < 41; ++k) EXPECT_EQ(feed(d, k == (it * 7) % 41 ? 5000 + it : k), 0u) << it << " " << k;
}

TEST(PeriodDetector, ShortPeriodsHaveNoHoles) {
  // A period under 32 tokens may not skip a changing token: 20 tokens with
  // one that changes every time never confirm.
  PeriodDetector d(3, 1000);
  for (uint64_t it = 0; it < 40; ++it)
    for (uint64_t k = 0; k < 20; ++k) EXPECT_EQ(feed(d, k == 10 ? 5000 + it : k), 0u);
}

TEST(PeriodDetector, ADifferenceThatMovesIsNoHole) {
  // R, 378 x A, R, 379 x A, ...: the R moves one place later every two
  // steps, so the stream never repeats every 379 tokens, though every place
  // differs only a few times: no period of 379 may be confirmed (it was, when
  // a hole had only to be hit again, not in every instance).
  PeriodDetector d(3, 16384);
  for (int it = 0; it < 40; ++it)
    for (uint32_t k = 0; k < 379u + uint32_t(it % 2); ++k) EXPECT_NE(feed(d, k == 0 ? 7 : 1), 379u);
}

TEST(PeriodDetector, ResetLeavesTheIndexesUnbacked) {
  // The engine resets the detector at every rest: clearing a large index by
  // writing it would make all of it resident (128 MiB at the longest period).
  PeriodDetector d(/*warmup=*/3, /*maxPeriod=*/1u << 20);
  for (uint32_t i = 0; i < 1000; ++i) feed(d, i % 41);
  const size_t before = testing::residentBytes();
  d.reset();
  EXPECT_LT(testing::residentBytes(), before + (size_t(4) << 20)) << "reset() touched the indexes";
  uint32_t period = 0;
  for (uint32_t i = 0; i < 10 * 41 && !period; ++i) period = feed(d, 7 + i % 41);
  EXPECT_EQ(period, 41u);
}

TEST(PeriodDetector, RespectsMaxPeriod) {
  PeriodDetector d(2, 50);
  for (int it = 0; it < 10; ++it)
    for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(feed(d, i), 0u);
}

// Recurring stretches: X Y1 X Y2 X Y3 ... where X (60 tokens) is the same
// every time and each Y (20 tokens) is new: no period is ever confirmed, but
// each X after the first is reported as a stretch of X's tokens, at the
// distance to the X before.
TEST(PeriodDetector, ReportsAStretchThatRecursBetweenTokensThatDiffer) {
  PeriodDetector d(/*warmup=*/3, /*maxPeriod=*/1000);
  std::vector<std::pair<uint64_t, PeriodDetector::Confirmation>> stretches;
  uint64_t i = 0, fresh = 100000;
  for (int round = 0; round < 6; ++round) {
    for (uint32_t k = 0; k < 60; ++k, ++i) {
      const auto c = feedFull(d, 1 + k);
      EXPECT_EQ(c.period, 0u);
      if (c.stretch) stretches.push_back({i, c});
    }
    for (uint32_t k = 0; k < 20; ++k, ++i) {
      const auto c = feedFull(d, fresh++);
      EXPECT_EQ(c.period, 0u) << "nothing repeats in a row";
      if (c.stretch) stretches.push_back({i, c});
    }
  }
  ASSERT_EQ(stretches.size(), 5u) << "one for each X after the first";
  for (const auto& [at, c] : stretches) {
    EXPECT_EQ(c.stretch, 60u);
    EXPECT_EQ(c.stretchPeriod, 80u);
    // Y's first tokens may be taken for holes before the candidate breaks:
    // the report comes then, saying how far back X ended.
    EXPECT_GE(c.stretchAfter, 1u);
    EXPECT_EQ(at % 80, 60u + c.stretchAfter - 1) << "reported where the candidate broke";
  }
}

// The same where each Y's first tokens differ at a few places before the
// break (the candidate takes them as holes first): the stretch still ends
// where X ends, not at the break.
TEST(PeriodDetector, AStretchEndsWhereItsLastInstanceFirstDiffered) {
  PeriodDetector d(/*warmup=*/3, /*maxPeriod=*/1000);
  std::vector<PeriodDetector::Confirmation> stretches;
  uint64_t fresh = 100000;
  for (int round = 0; round < 5; ++round) {
    for (uint32_t k = 0; k < 64; ++k) {
      if (auto c = feedFull(d, 1 + k); c.stretch) stretches.push_back(c);
    }
    // Y: a fresh token, then 3 tokens that match the previous Y, then fresh.
    for (uint32_t k = 0; k < 24; ++k) {
      const uint64_t token = (k >= 1 && k < 4) ? 5000 + k : fresh++;
      if (auto c = feedFull(d, token); c.stretch) stretches.push_back(c);
    }
  }
  ASSERT_FALSE(stretches.empty());
  for (const auto& c : stretches) {
    EXPECT_EQ(c.stretch, 64u) << "X only: neither the holes nor the tokens after them";
    EXPECT_EQ(c.stretchPeriod, 88u);
  }
}

// A period confirmed in a row is not reported again as a stretch when its
// run breaks, and short runs (under kMinStretchTokens tokens, or under
// kShortRunOps ops) are no stretches.
TEST(PeriodDetector, ConfirmedPeriodsAndShortRunsAreNoStretches) {
  PeriodDetector d(/*warmup=*/3, /*maxPeriod=*/1000);
  uint64_t fresh = 100000;
  int stretches = 0, periods = 0;
  for (int phase = 0; phase < 4; ++phase) {
    for (uint32_t k = 0; k < 10 * 50; ++k) periods += feedFull(d, 1 + k % 50).period != 0;
    // (The next phase's first tokens may report the period's tokens across
    // these as a stretch: the same run the period built.)
    for (uint32_t k = 0; k < 10; ++k) stretches += feedFull(d, fresh++).stretch != 0;
  }
  EXPECT_EQ(periods, 4);
  EXPECT_EQ(stretches, 0) << "the confirmed period's break";
  // 12 tokens alike between fresh ones: too short.
  for (int round = 0; round < 10; ++round) {
    for (uint32_t k = 0; k < 12; ++k) stretches += feedFull(d, 7000 + k).stretch != 0;
    for (uint32_t k = 0; k < 12; ++k) stretches += feedFull(d, fresh++).stretch != 0;
  }
  EXPECT_EQ(stretches, 0);
  // 40 tokens alike that stand for 20 ops (a token of no ops in two): too few ops.
  for (int round = 0; round < 10; ++round) {
    for (uint32_t k = 0; k < 40; ++k) stretches += d.push((8000 + k) * 0x9e3779b97f4a7c15ull, k % 2).stretch != 0;
    for (uint32_t k = 0; k < 12; ++k) stretches += feedFull(d, fresh++).stretch != 0;
  }
  EXPECT_EQ(stretches, 0);
}

// Every stretch reported is what its report says: its tokens equal those a
// period before them, on random streams of few token values whose step
// changes at a place now and then for good (a hole that then matches) or for
// one token, with small maximum periods (the ring wraps): a stretch's start
// is never taken from a slot of the ring written since.
TEST(PeriodDetector, EveryStretchReportedMatchesItsCopy) {
  uint64_t reports = 0, wrong = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    std::mt19937_64 rng(seed);
    const uint32_t maxPeriod = 40 + uint32_t(rng() % 100);
    PeriodDetector d(/*warmup=*/2 + uint32_t(rng() % 5), maxPeriod);
    const uint32_t step = 20 + uint32_t(rng() % maxPeriod), values = 2 + uint32_t(rng() % 20);
    std::vector<uint64_t> place(step), tokens;
    for (auto& v : place) v = rng() % values;
    for (uint32_t n = 0; n < 3000; ++n) {
      const uint64_t r = rng() % 1000;
      if (r < 8) place[n % step] = rng() % values;
      tokens.push_back(r >= 8 && r < 12 ? 1000 + rng() : place[n % step]);
      const auto c = feedFull(d, tokens.back());
      if (!c.stretch) continue;
      ++reports;
      const uint64_t end = tokens.size() - c.stretchAfter, begin = end - c.stretch;
      bool right = c.stretch <= maxPeriod && begin >= c.stretchPeriod;
      for (uint64_t x = begin; right && x < end; ++x) right = tokens[x] == tokens[x - c.stretchPeriod];
      wrong += !right;
    }
  }
  EXPECT_GT(reports, 1000u);
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace graft::core
