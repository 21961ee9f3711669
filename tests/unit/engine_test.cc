// Engine behaviour on synthetic op streams (no driver): what executes must be
// exactly what was issued, in order, while repeating sequences go through
// graphs after the warm-up.
#include <gtest/gtest.h>

#include <memory>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>

#include "core/engine.h"
#include "fake_executor.h"

namespace graft::test {
namespace {

using core::Decision;
using core::EagerCause;

struct Harness {
  explicit Harness(core::EngineConfig c = defaultConfig()) : engine(c, exec) {}

  static core::EngineConfig defaultConfig() {
    core::EngineConfig c;
    c.warmup = 3;
    c.maxPeriod = 4096;
    c.minSegmentOps = 2;
    c.segmentOps = 1000;  // one piece per segment unless a test says otherwise
    return c;
  }

  void op(const TestOp& t) {
    auto lock = engine.lock();
    const core::OpDesc d = t.desc();
    issued.push_back(t.expected());
    if (engine.dormant()) {  // as the hook does: counted, issued in place
      engine.countDormant(d.stream);
      exec.trace.push_back(t.expected());
      ++dormantOps;
      return;
    }
    if (useFastLane()) {
      // As the hook does: an op of the expected shape goes to holdSoleExpected,
      // with the expected op's own value bytes when equal.
      if (const core::OpDesc* e = engine.soleExpected(); e && core::sameShape(*e, d)) {
        engine.holdSoleExpected(e->value == d.value ? e->value : d.value);
        ++fastLaneOps;
        return;
      }
    }
    if (engine.submit(d) == Decision::IssueNow) {
      exec.trace.push_back(t.expected());
      engine.completeIssued(d, true);
    }
  }
  void sync() {
    {
      auto lock = engine.lock();
      engine.hostBarrier(42);
    }
    // A host barrier must leave nothing held: everything issued has executed.
    ASSERT_EQ(exec.trace.size(), issued.size()) << "ops still held at a barrier";
  }
  void finish() {
    auto lock = engine.lock();
    engine.flushAll();
  }
  // Everything issued executed exactly once, in issue order, per stream.
  void expectEquivalent() {
    finish();
    std::map<uint64_t, std::vector<Executed>> want, got;
    for (const auto& e : issued) want[e.stream].push_back(e);
    for (const auto& e : exec.trace) got[e.stream].push_back(e);
    ASSERT_EQ(want.size(), got.size());
    for (auto& [stream, ops] : want) {
      const auto& g = got[stream];
      ASSERT_EQ(ops.size(), g.size()) << "stream " << stream;
      for (size_t i = 0; i < ops.size(); ++i)
        ASSERT_TRUE(ops[i] == g[i]) << "stream " << stream << " op " << i << " differs";
    }
  }
  size_t viaGraph() const {
    size_t n = 0;
    for (const auto& e : exec.trace) n += e.viaGraph;
    return n;
  }

  // ENGINE_FAST_LANE=1 (a second run of this suite): the fast lane is taken
  // wherever the engine offers it; every test must pass the same.
  static bool useFastLane() {
    static const bool on = [] {
      const char* v = std::getenv("ENGINE_FAST_LANE");
      return v && v[0] == '1';
    }();
    return on;
  }

  FakeExecutor exec;
  core::Engine engine;
  std::vector<Executed> issued;
  size_t fastLaneOps = 0;
  size_t dormantOps = 0;
};

// One "iteration": n kernels with distinct shapes; `step` goes into a value.
void iteration(Harness& h, int n, uint64_t step, uint64_t shapeBase = 1000) {
  for (int k = 0; k < n; ++k) h.op(TestOp{OpKind::Kernel, 0x100, shapeBase + k, k == 3 ? step : 7});
}

// A loop that waits for its results every iteration (loss.item()): 20
// iterations of 300 ops under config `c`, checked against eager. Returns the
// harness, whose builtSizes are the pieces the engine cut.
std::unique_ptr<Harness> runSyncedLoop(const core::EngineConfig& c) {
  auto h = std::make_unique<Harness>(c);
  for (int it = 0; it < 20; ++it) {
    iteration(*h, 300, 1);
    h->sync();
  }
  h->expectEquivalent();
  return h;
}

TEST(Engine, RepeatingLoopWithoutSyncReplaysThroughGraphs) {
  Harness h;
  for (int it = 0; it < 20; ++it) iteration(h, 50, it);
  h.expectEquivalent();
  EXPECT_GE(h.exec.builds, 1);
  EXPECT_GE(h.exec.launches, 14);
  // After warm-up nearly everything goes through graphs.
  EXPECT_GT(h.viaGraph(), size_t(14 * 50));
  // ... and, on the fast lane's run, nearly all of it is held there.
  if (Harness::useFastLane()) {
    EXPECT_GT(h.fastLaneOps, size_t(14 * 45));
  }
  {
    auto lock = h.engine.lock();
    EXPECT_EQ(h.engine.stats().opsSoleExpected, h.fastLaneOps);
    EXPECT_EQ(h.engine.stats().opsTotal, size_t(20 * 50));
  }
}

// A replay's last op launches its graph at once: the GPU must not wait for
// the program's next op (which may be a long time coming).
TEST(Engine, ASegmentIsLaunchedByItsLastOpNotTheNextOne) {
  Harness h;
  size_t mostHeld = 0;
  for (int it = 0; it < 20; ++it) {
    for (int k = 0; k < 50; ++k) {
      h.op(TestOp{OpKind::Kernel, 0x100, uint64_t(1000 + k), k == 3 ? uint64_t(it) : 7});
      if (it >= 10) mostHeld = std::max(mostHeld, h.issued.size() - h.exec.trace.size());
    }
  }
  // Segments are whole iterations here (50 ops): at most 49 of them wait.
  EXPECT_EQ(mostHeld, size_t(49));
  EXPECT_GT(h.viaGraph(), size_t(10 * 50));
  h.expectEquivalent();
}

TEST(Engine, LoopOfAFewKernelsWithoutSyncReplaysUnrolled) {
  // Three launches per iteration, two of the same shape on one stream and one
  // on another (a solver loop), thousands of times, a sync now and then: the
  // period is short, so graphs hold several iterations each.
  core::EngineConfig c = Harness::defaultConfig();
  c.minSegmentOps = 4;
  Harness h(c);
  for (int it = 0; it < 600; ++it) {
    h.op(TestOp{OpKind::Kernel, 0x100, 1000, uint64_t(it)});
    h.op(TestOp{OpKind::Kernel, 0x200, 1001, uint64_t(it) * 3});
    h.op(TestOp{OpKind::Kernel, 0x100, 1000, uint64_t(it) + 7});
    if (it % 200 == 199) h.sync();
  }
  h.expectEquivalent();
  ASSERT_FALSE(h.exec.builtSizes.empty());
  for (size_t sz : h.exec.builtSizes) EXPECT_EQ(sz, size_t(33));  // 11 iterations of 3
  EXPECT_GT(h.viaGraph(), size_t(600 * 3 * 8 / 10));
}

TEST(Engine, ShortRepeatInsideALongerIterationIsNotUnrolled) {
  // A B A B A B C per iteration: the pair must not become a graph of 16 pairs
  // (it never occurs 16 times in a row); the whole iteration does (5 times
  // unrolled: 35 ops). Graphs of one pair or one iteration come first.
  Harness h;
  for (int it = 0; it < 80; ++it) {
    for (int k = 0; k < 3; ++k) {
      h.op(TestOp{OpKind::Kernel, 0x100, 1000, uint64_t(it)});
      h.op(TestOp{OpKind::Kernel, 0x100, 1001, 7});
    }
    h.op(TestOp{OpKind::Kernel, 0x100, 1002, 7});
  }
  h.expectEquivalent();
  for (size_t sz : h.exec.builtSizes) EXPECT_TRUE(sz <= 7 || sz % 7 == 0) << "a graph of " << sz << " ops";
  EXPECT_NE(std::find(h.exec.builtSizes.begin(), h.exec.builtSizes.end(), size_t(35)), h.exec.builtSizes.end());
  EXPECT_GE(h.viaGraph(), size_t(60 * 7));
}

TEST(Engine, AShortLoopInsideAnIterationIsNotGraphedOneIterationAtATime) {
  // A timestep loop (a recurrent layer): 4 launches repeated 12 times, then
  // 40 other launches, no sync. A graph of one loop iteration would cost a
  // launch per 4 ops; the loop is too short to be unrolled, so its ops go into
  // the iteration's graphs instead.
  Harness h;
  for (int it = 0; it < 60; ++it) {
    for (int t = 0; t < 12; ++t)
      for (uint64_t k = 0; k < 4; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 1000 + k, uint64_t(it * 100 + t)});
    for (uint64_t k = 0; k < 40; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 2000 + k, 7});
  }
  h.expectEquivalent();
  for (size_t sz : h.exec.builtSizes)
    EXPECT_GE(sz, size_t(core::PeriodDetector::kShortRunOps)) << "a graph of " << sz << " ops";
  EXPECT_GE(h.viaGraph(), size_t(50 * 88));
}

TEST(Engine, RecurringSyncIsASegmentBoundaryNotAFallback) {
  Harness h;
  for (int it = 0; it < 20; ++it) {
    iteration(h, 40, it);
    h.sync();
  }
  h.expectEquivalent();
  const auto s = h.engine.stats();
  EXPECT_EQ(s.eagerByCause[size_t(EagerCause::SyncInSegment)], 0u);
  EXPECT_GE(s.replays, 15u);
  EXPECT_EQ(s.opsViaGraph, s.replays * 40);
}

TEST(Engine, ChangedParameterValuesArePatchedNotFallenBackOn) {
  Harness h;
  for (int it = 0; it < 20; ++it) {
    iteration(h, 30, 1000 + it);  // op 3 carries a new value every iteration
    h.sync();
  }
  h.expectEquivalent();
  const auto s = h.engine.stats();
  EXPECT_GE(s.replays, 15u);
  EXPECT_EQ(s.patches, s.replays);  // exactly one node patched per replay
  EXPECT_EQ(s.eagerByCause[size_t(EagerCause::Mismatch)], 0u);
}

TEST(Engine, ShapeChangeMidSegmentFlushesInOrderAndRecovers) {
  Harness h;
  for (int it = 0; it < 30; ++it) {
    if (it == 12) {
      for (int k = 0; k < 30; ++k) h.op(TestOp{OpKind::Kernel, 0x100, k == 17 ? 9999u : 1000u + k, 7});
    } else {
      iteration(h, 30, 5);
    }
    h.sync();
  }
  h.expectEquivalent();
  const auto s = h.engine.stats();
  EXPECT_GT(s.eagerByCause[size_t(EagerCause::Mismatch)], 0u);
  // Replay resumes after the odd iteration.
  EXPECT_GE(s.replays, 20u);
}

// A segment that mismatches on most tries (here a kernel near its end changes
// shape every iteration) holds its ops only to issue them late: after
// kDropAfterMismatches such tries outnumbering its replays it is dropped, and
// the ops run eagerly without being held.
TEST(Engine, ASegmentThatMostlyMismatchesIsDropped) {
  Harness h;
  auto run = [&](int it) {
    for (int k = 0; k < 30; ++k)
      h.op(TestOp{OpKind::Kernel, 0x100, k == 25 && it >= 10 ? 20000u + it : 1000u + k, 7});
    h.sync();
  };
  for (int it = 0; it < 70; ++it) run(it);
  h.expectEquivalent();
  const auto s = h.engine.stats();
  EXPECT_GE(s.replays, 5u);
  EXPECT_EQ(s.segmentsDropped, 1u);
  // 25 held ops re-issued per mismatch: 16 mismatches, not 60.
  EXPECT_LE(s.eagerByCause[size_t(EagerCause::Mismatch)], 17u * 25u);
}

// A segment that mismatches now and then (a shorter batch every fifth step)
// stays: it replays far more often than it fails.
TEST(Engine, ASegmentThatMismatchesNowAndThenIsKept) {
  Harness h;
  for (int it = 0; it < 100; ++it) {
    for (int k = 0; k < 30; ++k)
      h.op(TestOp{OpKind::Kernel, 0x100, k == 25 && it >= 10 && it % 5 == 0 ? 20000u + it : 1000u + k, 7});
    h.sync();
  }
  h.expectEquivalent();
  const auto s = h.engine.stats();
  EXPECT_EQ(s.segmentsDropped, 0u);
  EXPECT_GE(s.replays, 60u);
}

TEST(Engine, ExtraAndMissingOpsAreIssuedExactly) {
  Harness h;
  for (int it = 0; it < 40; ++it) {
    for (int k = 0; k < 25; ++k) {
      if (it % 7 == 5 && k == 10) continue;                                  // missing op
      h.op(TestOp{OpKind::Kernel, 0x100, 1000u + k, uint64_t(it)});
      if (it % 11 == 6 && k == 20) h.op(TestOp{OpKind::Kernel, 0x100, 5555, 1});  // extra op
    }
    if (it % 3 == 0) h.sync();
  }
  h.expectEquivalent();
}

TEST(Engine, SyncInsideASegmentFlushesHeldWork) {
  Harness h;
  for (int it = 0; it < 12; ++it) {
    iteration(h, 20, 1);
    h.sync();
  }
  // Now a sync arrives in the middle of what would be a segment.
  for (int k = 0; k < 10; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 1000u + k, 7});
  h.sync();  // asserts nothing is held
  h.expectEquivalent();
  EXPECT_GT(h.engine.stats().eagerByCause[size_t(EagerCause::SyncInSegment)], 0u);
}

TEST(Engine, BuildFailureLeavesEverythingEagerAndCorrect) {
  Harness h;
  h.exec.failBuilds = true;
  for (int it = 0; it < 15; ++it) {
    iteration(h, 20, it);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_EQ(h.viaGraph(), 0u);
  EXPECT_GT(h.engine.stats().buildFailures, 0u);
}

TEST(Engine, LaunchFailureIssuesTheHeldOpsEagerly) {
  Harness h;
  h.exec.failLaunchAt = 2;
  for (int it = 0; it < 15; ++it) {
    iteration(h, 20, it);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_GT(h.engine.stats().eagerByCause[size_t(EagerCause::LaunchFailed)], 0u);
}

TEST(Engine, PatchFailureIssuesTheHeldOpsEagerly) {
  Harness h;
  h.exec.failPatchAt = 1;
  for (int it = 0; it < 15; ++it) {
    iteration(h, 20, 100 + it);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_GT(h.engine.stats().eagerByCause[size_t(EagerCause::LaunchFailed)], 0u);
}

TEST(Engine, BoundaryOpsRunInSequenceAndSplitSegments) {
  Harness h;
  for (int it = 0; it < 15; ++it) {
    iteration(h, 20, 1, 1000);
    h.op(TestOp{OpKind::Boundary, 0x100, 77, 0, 0, EagerCause::HostMemoryCopy});
    iteration(h, 20, 1, 2000);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_GE(h.engine.stats().replays, 20u);  // two segments per iteration
}

TEST(Engine, EventStructureMatchesWhateverTheHandles) {
  Harness h;
  for (int it = 0; it < 20; ++it) {
    const uint64_t e = 0xe000 + it;  // a fresh event handle every iteration
    iteration(h, 5, 1, 1000);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, e});
    h.op(TestOp{OpKind::EventWait, 0x200, 2, 0, e});
    for (int k = 0; k < 5; ++k) h.op(TestOp{OpKind::Kernel, 0x200, 3000u + k, 3});
    h.op(TestOp{OpKind::EventRecord, 0x200, 4, 0, e + 0x100});
    h.op(TestOp{OpKind::EventWait, 0x100, 5, 0, e + 0x100});
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_GE(h.engine.stats().replays, 15u);
  EXPECT_EQ(h.engine.stats().eagerByCause[size_t(EagerCause::Mismatch)], 0u);
}

TEST(Engine, WaitOnAnEventRecordedInsideVersusOutsideIsAMismatch) {
  Harness h;
  for (int it = 0; it < 20; ++it) {
    const uint64_t e = 0xe000 + it;
    if (it != 15) h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, e});
    iteration(h, 6, 1);
    h.op(TestOp{OpKind::EventWait, 0x200, 2, 0, it == 15 ? 0xdead : e});
    h.op(TestOp{OpKind::Kernel, 0x200, 9, 1});
    h.sync();
  }
  h.expectEquivalent();
}

TEST(Engine, NestedRepetitionConvergesToWholeIterationGraphs) {
  // Twelve identical "layers" inside each iteration: the layer repeats first,
  // but the whole iteration must end up in graphs without per-layer launches.
  core::EngineConfig c = Harness::defaultConfig();
  Harness h(c);
  auto iterationWithLayers = [&h](uint64_t step) {
    h.op(TestOp{OpKind::Kernel, 0x100, 1, step});
    for (int layer = 0; layer < 12; ++layer)
      for (int k = 0; k < 6; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 100u + k, uint64_t(layer)});
    h.op(TestOp{OpKind::Kernel, 0x100, 2, step});
    h.op(TestOp{OpKind::Kernel, 0x100, 3, step});
  };
  for (int it = 0; it < 30; ++it) iterationWithLayers(it);
  const uint64_t launchesBefore = h.engine.stats().replays;
  for (int it = 30; it < 40; ++it) iterationWithLayers(it);
  h.expectEquivalent();
  const uint64_t perIteration = (h.engine.stats().replays - launchesBefore) / 10;
  EXPECT_LE(perIteration, 2u) << "still replaying layer by layer";
  // No patches in steady state: each layer's values are stable in the big graph.
  EXPECT_EQ(h.exec.trace.size(), h.issued.size());
}

// A query asks about work graft may hold. When graft holds the queried
// record, that work is not complete: graft answers NotReady itself (the hook
// returns CUDA_ERROR_NOT_READY) and nothing is issued, nor is the held run
// cut. The same query again with no op issued since is a poll: graft issues
// what it holds, so the driver can answer and the poll makes progress.
TEST(Engine, QueriesOfHeldRecordsAnswerNotReadyAndAPollFlushes) {
  Harness h;
  size_t notReady = 0;
  for (int it = 0; it < 20; ++it) {
    iteration(h, 10, 1);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe1});
    iteration(h, 10, 1, 5000);
    auto recorded = [&h] {
      size_t n = 0;
      for (const auto& e : h.exec.trace) n += e.kind == OpKind::EventRecord && e.event == 0xe1;
      return n;
    };
    core::QueryAnswer first, second;
    {
      auto lock = h.engine.lock();
      first = h.engine.query(0, 0xe1, 9);
    }
    if (first == core::QueryAnswer::NotReady) {
      ++notReady;
      ASSERT_EQ(recorded(), size_t(it)) << "graft answered for a record it had issued";
      {
        auto lock = h.engine.lock();
        second = h.engine.query(0, 0xe1, 9);  // the poll
      }
      ASSERT_EQ(second, core::QueryAnswer::AskDriver) << "a poll must make progress";
    }
    // When the driver is asked, the record has been issued.
    ASSERT_EQ(recorded(), size_t(it + 1)) << "iteration " << it;
    iteration(h, 5, 1, 9000);  // the run goes on past the query
    h.sync();
  }
  h.expectEquivalent();
  // The record was held at the query after the warm-up (until the polls' flushes
  // taught graft the query as a boundary, as any recurring poll does).
  EXPECT_GT(notReady, 0u);
}

// A target the program polls (asked again with no op issued between) is a
// place where it waits: from then on each query of it issues what graft holds
// at once (no NotReady answer first) and recurs as a segment boundary, so
// graphs end there and nothing is issued eagerly at the poll. Here the driver
// says "complete" as soon as graft issued the record at the query, so the
// program asks once about a polled record it found held: that ends the
// polling, and the next record is answered NotReady once more before its poll
// (every other step at most; EventsPolledAtEveryRecordStayPolled has a driver
// that needs a second query). The boundary is learned either way.
TEST(Engine, PolledTargetsBecomeBoundaries) {
  Harness h;
  size_t notReady = 0, flushedAtQuery = 0;
  for (int it = 0; it < 40; ++it) {
    iteration(h, 10, it);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe1});
    for (int poll = 0;; ++poll) {
      ASSERT_LT(poll, 2) << "iteration " << it;
      const size_t executedBefore = h.exec.trace.size();
      core::QueryAnswer a;
      {
        auto lock = h.engine.lock();
        a = h.engine.query(0, 0xe1, 9);
      }
      if (it >= 20)  // held ops the query issued eagerly (a graph ending there may launch)
        for (size_t k = executedBefore; k < h.exec.trace.size(); ++k) flushedAtQuery += !h.exec.trace[k].viaGraph;
      if (a == core::QueryAnswer::AskDriver) break;
      ++notReady;
    }
    iteration(h, 10, 1, 5000);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_LE(notReady, 20u) << "records after a polled one were answered NotReady";
  EXPECT_EQ(flushedAtQuery, 0u) << "the poll was not learned as a boundary";
  EXPECT_GT(h.viaGraph(), size_t(20 * 21));
}

// A query under the engine lock; when `eagerAtQuery` is given, adds the ops it
// issued eagerly (a graph the issue completed may launch) to it.
core::QueryAnswer queryCounting(Harness& h, core::StreamKey stream, uint64_t event, uint64_t hash,
                                size_t* eagerAtQuery) {
  const size_t executedBefore = h.exec.trace.size();
  core::QueryAnswer a;
  {
    auto lock = h.engine.lock();
    a = h.engine.query(stream, event, hash);
  }
  if (eagerAtQuery)
    for (size_t k = executedBefore; k < h.exec.trace.size(); ++k) *eagerAtQuery += !h.exec.trace[k].viaGraph;
  return a;
}

// A host that polls event 0xe1 until the driver says complete, which it does
// at the second time it is asked (the first time, the work is not done yet).
// Counts graft's NotReady answers, and (when counting) the ops issued eagerly.
void pollUntilComplete(Harness& h, int it, bool counting, size_t* notReady, size_t* eagerAtQuery) {
  size_t askedDriver = 0;
  for (int poll = 0; askedDriver < 2; ++poll) {
    ASSERT_LT(poll, 3) << "iteration " << it;
    if (queryCounting(h, 0, 0xe1, 9, counting ? eagerAtQuery : nullptr) == core::QueryAnswer::AskDriver)
      ++askedDriver;
    else
      ++*notReady;
  }
}

// A caching allocator's asks (about event 0xe1, or about stream 0x100 when
// `aboutStream`) after one launch of each iteration from 20 on, at places that
// differ from step to step, twice in a row in iteration 25. Expects graft to
// answer every ask from iteration 30 on itself, with nothing issued eagerly.
void expectAllocatorAsksAnswered(bool aboutStream) {
  Harness h;
  size_t flushedLate = 0, notReadyLate = 0, asksLate = 0;
  for (int it = 0; it < 60; ++it) {
    iteration(h, 10, it);
    if (!aboutStream) h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe1});
    for (int k = 0; k < 10; ++k) {
      h.op(TestOp{OpKind::Kernel, 0x100, 5000u + k, 7});
      if (it < 20 || k != (it * 3) % 7 + 1) continue;
      for (int q = 0; q < (it == 25 ? 2 : 1); ++q) {  // iteration 25: two allocations in a row
        const core::QueryAnswer a = aboutStream ? queryCounting(h, 0x100, 0, 13, it >= 30 ? &flushedLate : nullptr)
                                                : queryCounting(h, 0, 0xe1, 9, it >= 30 ? &flushedLate : nullptr);
        if (it >= 30) {
          notReadyLate += a == core::QueryAnswer::NotReady;
          ++asksLate;
        }
      }
    }
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_EQ(flushedLate, 0u) << "asks nobody polls still issued held work";
  EXPECT_EQ(notReadyLate, asksLate) << "asks about held work were not answered by graft";
  EXPECT_GT(h.viaGraph(), size_t(45 * 21));
}

// The same when each poll takes more than one query after graft issued the
// record (the GPU had not run it yet): every record is polled, the event stays
// polled, and graft never answers NotReady after the first poll.
TEST(Engine, EventsPolledAtEveryRecordStayPolled) {
  Harness h;
  size_t notReady = 0, flushedAtQuery = 0;
  for (int it = 0; it < 40; ++it) {
    iteration(h, 10, it);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe1});
    pollUntilComplete(h, it, it >= 20, &notReady, &flushedAtQuery);
    iteration(h, 10, 1, 5000);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_LE(notReady, 1u) << "a polled event was answered NotReady again";
  EXPECT_EQ(flushedAtQuery, 0u) << "the poll was not learned as a boundary";
  EXPECT_GT(h.viaGraph(), size_t(20 * 21));
}

// A caching allocator queries the oldest pending block's event at every
// allocation, at places that differ from step to step, so two allocations with
// no launch between ask about the same record twice: once, that looks like a
// poll. Its events come from a pool and are recorded again for other blocks; a
// later record asked about while held, and not polled, ends that: from then on
// graft answers NotReady again and the run is not cut at the queries.
TEST(Engine, AnEventPolledOnceByChanceIsNotPolledForever) { expectAllocatorAsksAnswered(false); }

// An event recorded twice per step and polled after its second record: the
// first record, which nobody asks about, does not end the polling, so the poll
// stays a boundary and graft never answers NotReady after the first poll.
TEST(Engine, AnEventRecordedTwicePerStepStaysPolled) {
  Harness h;
  size_t notReady = 0, flushedAtQuery = 0;
  for (int it = 0; it < 100; ++it) {  // no sync: the poll is the step's only boundary
    iteration(h, 10, it);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe1});
    iteration(h, 5, 1, 3000);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe1});
    pollUntilComplete(h, it, it >= 50, &notReady, &flushedAtQuery);
    iteration(h, 10, 1, 5000);
  }
  h.sync();
  h.expectEquivalent();
  EXPECT_LE(notReady, 1u) << "a polled event was answered NotReady again";
  EXPECT_EQ(flushedAtQuery, 0u) << "the poll was not learned as a boundary";
  EXPECT_GT(h.viaGraph(), size_t(50 * 27));
}

// Queries of a held record between launches (a caching allocator asking about
// a block's event before each allocation): each is answered NotReady while
// ops keep coming, nothing is issued eagerly, and the run is replayed whole.
TEST(Engine, QueriesOfHeldRecordsBetweenLaunchesDoNotCutTheRun) {
  Harness h;
  for (int it = 0; it < 30; ++it) {
    iteration(h, 10, it);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe1});
    for (int k = 0; k < 10; ++k) {
      h.op(TestOp{OpKind::Kernel, 0x100, 5000u + k, 7});
      if (it % 4 == 1 && k % 3 == 0) {  // irregular: never a boundary graft could learn
        auto lock = h.engine.lock();
        h.engine.query(0, 0xe1, 9);
      }
    }
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_EQ(h.engine.stats().eagerByCause[size_t(EagerCause::QueryInSegment)], 0u);
  EXPECT_GT(h.engine.stats().queriesAnsweredNotReady, 0u);
  EXPECT_GT(h.viaGraph(), size_t(24 * 21));
}

// A query of an event whose record graft already issued (in a piece launched
// before the query) sees that record as it is: it must neither flush the ops
// held after it nor cut the run there (the DataLoader's pin-memory thread
// queries such events at any time). A query of a record still held is above.
TEST(Engine, QueriesOfIssuedRecordsLeaveHeldWorkAlone) {
  core::EngineConfig c = Harness::defaultConfig();
  c.segmentOps = 8;  // pieces of 8: the record's piece launches before the query
  Harness h(c);
  size_t flushedByQuery = 0;
  for (int it = 0; it < 40; ++it) {
    iteration(h, 10, it);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe1});  // op 10, in the piece of ops 8..15
    iteration(h, 10, 1, 5000);                             // ops 11..20: 16..20 still held
    if (it % 3 == 2) {  // now and then, as from another thread: never a learned boundary
      const size_t executedBefore = h.exec.trace.size();
      {
        auto lock = h.engine.lock();
        EXPECT_EQ(h.engine.query(0, 0xe1, 9), core::QueryAnswer::AskDriver) << "iteration " << it;
      }
      // The record has executed by the time the query returns, flushed or not.
      size_t records = 0;
      for (const auto& e : h.exec.trace) records += e.kind == OpKind::EventRecord && e.event == 0xe1;
      ASSERT_EQ(records, size_t(it + 1)) << "iteration " << it;
      if (it >= 10) flushedByQuery += h.exec.trace.size() - executedBefore;
    }
    iteration(h, 10, 1, 9000);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_EQ(flushedByQuery, 0u) << "a query of an issued record flushed held ops";
  EXPECT_GT(h.viaGraph(), size_t(25 * 31));
}

// A stream whose first op of the step comes in the middle of a held run (on
// the fast lane's run, held there): an occasional poll of that stream in
// mid-run must issue it (graft answers NotReady first), and a query of a
// stream with no work since the last barrier must issue nothing.
TEST(Engine, StreamQueriesSeeWorkHeldMidRun) {
  Harness h;
  size_t flushedByQuery = 0;
  for (int it = 0; it < 60; ++it) {
    iteration(h, 8, it);                                                            // stream 0x100
    for (int k = 0; k < 8; ++k) h.op(TestOp{OpKind::Kernel, 0x200, 7000u + k, 5});  // stream 0x200
    if (it % 4 == 3) {
      const size_t executedBefore = h.exec.trace.size();
      {
        auto lock = h.engine.lock();
        EXPECT_EQ(h.engine.query(0x300, 0, 11), core::QueryAnswer::AskDriver);  // idle stream: nothing to flush
      }
      EXPECT_EQ(h.exec.trace.size(), executedBefore) << "iteration " << it;
      // Polled until the driver is asked (graft answers NotReady while it
      // holds work of the stream, then issues it at the poll).
      for (int poll = 0;; ++poll) {
        ASSERT_LT(poll, 2) << "iteration " << it << ": the poll made no progress";
        auto lock = h.engine.lock();
        if (h.engine.query(0x200, 0, 12) == core::QueryAnswer::AskDriver) break;
      }
      flushedByQuery += h.exec.trace.size() - executedBefore;
      // Every op on 0x200 issued so far has executed once the query returns.
      size_t issued200 = 0, executed200 = 0;
      for (const auto& e : h.issued) issued200 += e.stream == 0x200;
      for (const auto& e : h.exec.trace) executed200 += e.stream == 0x200;
      ASSERT_EQ(executed200, issued200) << "iteration " << it;
    }
    iteration(h, 8, it, 9000);  // more on 0x100: the run goes on past the query's position
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_GT(flushedByQuery, 0u);  // the queries did find held work
  EXPECT_GT(h.viaGraph(), size_t(30 * 24));
}

// The same for a stream: asked about twice in a row once, then once between
// its launches, at places that differ from step to step. After a run of
// queries that found its work held and was no poll, the stream is no longer
// taken for polled: graft answers NotReady while it holds the stream's work,
// and the run is not cut there.
TEST(Engine, AStreamPolledOnceByChanceIsNotPolledForever) { expectAllocatorAsksAnswered(true); }

// A GPU for the feeding-loop tests: eager ops complete at once; a graph
// launch completes at the second time the driver is asked after it (it takes
// longer than one query). Answers a query the engine left to the driver (the
// stream's ops, or the event's records, all executed and no graph launched
// since the last ask), and tells the engine of a CUDA_SUCCESS as the hook does.
struct SlowGraphDriver {
  size_t seenAtLastAsk = 0;
  bool answer(Harness& h, core::StreamKey stream, uint64_t event) {
    bool launchedSince = false;
    for (size_t k = seenAtLastAsk; k < h.exec.trace.size(); ++k) launchedSince |= h.exec.trace[k].viaGraph;
    seenAtLastAsk = h.exec.trace.size();
    auto targets = [stream, event](const std::vector<Executed>& ops) {
      size_t n = 0;
      for (const auto& e : ops) n += event ? e.kind == OpKind::EventRecord && e.event == event : e.stream == stream;
      return n;
    };
    const bool complete = !launchedSince && targets(h.exec.trace) == targets(h.issued);
    if (complete) {
      auto lock = h.engine.lock();
      h.engine.queryCompleted(stream, event, 0);
    }
    return complete;
  }
};

// A loop that feeds what it waits for: one op, then a query of the stream (or
// of an event recorded after the op), again and again, with no sync (a
// pipeline issuing work while it waits for the GPU to go idle). Eagerly the
// first query finds the GPU done. Under graft every query finds the op just
// issued held, and none is a poll (an op came between); the only queries
// that reach the driver come right after a graph launch, which is not done
// yet: without a limit on graft's own answers the loop never ends. Once
// graft has answered for the target kAnswersPerTarget times, the query
// issues what graft holds and the driver answers. After the driver's
// CUDA_SUCCESS graft answers for the target again.
// `barrierEachRound`: the loop also calls something graft takes for a host
// barrier in every round (cuCtxGetLimit, a sync of another stream): it
// issues what graft holds, but the next round's op is held again, so it must
// not end graft's count.
void expectFeedingLoopProgresses(bool aboutEvent, bool barrierEachRound = false) {
  Harness h;
  auto feedOp = [&h, aboutEvent](int k, uint64_t step) {
    h.op(TestOp{OpKind::Kernel, 0x100, 1000u + k, k == 3 ? step : 7});
    if (aboutEvent) h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe7});
  };
  for (int it = 0; it < 30; ++it) {  // learned: the ten ops (and records) of a step
    for (int k = 0; k < 10; ++k) feedOp(k, it);
    h.sync();
  }
  SlowGraphDriver gpu;
  size_t graftAnswers = 0, graftAnswersAfterFirstPhase = 0;
  for (int phase = 0; phase < 6; ++phase) {
    for (int round = 0;; ++round) {
      ASSERT_LT(round, int(core::Engine::kAnswersPerTarget) + 25) << "phase " << phase << ": the loop made no progress";
      feedOp(round % 10, phase);
      core::QueryAnswer a;
      {
        auto lock = h.engine.lock();
        a = aboutEvent ? h.engine.query(0, 0xe7, 9) : h.engine.query(0x100, 0, 13);
      }
      if (a == core::QueryAnswer::NotReady) {
        ++graftAnswers;
        graftAnswersAfterFirstPhase += phase > 0;
        if (barrierEachRound) h.sync();
        continue;
      }
      if (gpu.answer(h, aboutEvent ? 0 : 0x100, aboutEvent ? 0xe7 : 0)) {
        // CUDA_SUCCESS: everything issued so far has executed.
        ASSERT_EQ(h.exec.trace.size(), h.issued.size()) << "phase " << phase;
        break;
      }
    }
  }
  h.expectEquivalent();
  EXPECT_GT(graftAnswers, 0u) << "graft answered no query itself";
  if (!barrierEachRound) {
    EXPECT_GT(h.engine.stats().queriesIssuedForProgress, 0u);
  }
  if (!aboutEvent) {  // (an event's record after every op cuts the learned runs apart)
    EXPECT_GT(graftAnswersAfterFirstPhase, 0u) << "the driver's CUDA_SUCCESS did not end the streak";
  }
}

TEST(Engine, AFeedingLoopOnAStreamReachesTheDriverAfterGraftsAnswers) { expectFeedingLoopProgresses(false); }
TEST(Engine, AFeedingLoopOnAnEventReachesTheDriverAfterGraftsAnswers) { expectFeedingLoopProgresses(true); }
TEST(Engine, AFeedingLoopWithABarrierEachRoundReachesTheDriverAfterGraftsAnswers) {
  expectFeedingLoopProgresses(false, true);
}

// PyTorch's caching allocator, with no sync in the loop: each step records an
// event from its pool after a block's last use (mid-run) and asks about the
// oldest outstanding one at allocations; an event goes back to the pool only
// after the driver said CUDA_SUCCESS for it. graft answers every ask about a
// held record itself, and never issues held work for progress: an event is
// recorded again only after the driver's success, which ends its streak.
TEST(Engine, AnAllocatorsEventPoolWithoutSyncsKeepsGraftsAnswers) {
  Harness h;
  SlowGraphDriver gpu;
  std::vector<uint64_t> pool = {0xe10, 0xe11, 0xe12, 0xe13}, outstanding;
  size_t answeredLate = 0;
  for (int it = 0; it < 80; ++it) {
    iteration(h, 10, it);
    uint64_t e;
    if (pool.empty()) {
      e = 0xe20 + outstanding.size();  // a new event (cudaEventCreate)
    } else {
      e = pool.back();
      pool.pop_back();
    }
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, e});
    outstanding.push_back(e);
    for (int k = 0; k < 10; ++k) {
      h.op(TestOp{OpKind::Kernel, 0x100, 5000u + k, 7});
      if (k % 3 != 1 || outstanding.empty()) continue;
      const uint64_t oldest = outstanding.front();
      core::QueryAnswer a;
      {
        auto lock = h.engine.lock();
        a = h.engine.query(0, oldest, 9);
      }
      if (a == core::QueryAnswer::NotReady) {
        answeredLate += it >= 40;
      } else if (gpu.answer(h, 0, oldest)) {
        outstanding.erase(outstanding.begin());
        pool.push_back(oldest);  // back to the pool: recorded again next
      }
    }
  }
  h.expectEquivalent();
  EXPECT_EQ(h.engine.stats().queriesIssuedForProgress, 0u);
  EXPECT_GT(answeredLate, 0u);
  EXPECT_GT(h.viaGraph(), size_t(40 * 21));
}

TEST(Engine, DestroyingAnEventUsedByHeldOpsIsDeferredUntilTheyAreIssued) {
  // The side-stream pattern: a fresh event per iteration, destroyed right after
  // the wait, while graft still holds the record and the wait.
  Harness h;
  size_t deferred = 0;
  for (int it = 0; it < 20; ++it) {
    const uint64_t e = 0xe000 + it;
    iteration(h, 6, 1);
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, e});
    h.op(TestOp{OpKind::EventWait, 0x200, 2, 0, e});
    {
      auto lock = h.engine.lock();
      if (h.engine.deferEventDestroy(e, 0)) {
        ++deferred;
      } else {
        h.exec.destroyedEvents.push_back(e);  // destroyed now, as the program asked
        h.exec.destroyedWhileTraceSize.push_back(h.exec.trace.size());
      }
    }
    for (int k = 0; k < 6; ++k) h.op(TestOp{OpKind::Kernel, 0x200, 3000u + k, 3});
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_GT(deferred, 5u);  // replay held them
  EXPECT_GE(h.engine.stats().replays, 15u);
  EXPECT_EQ(h.engine.stats().eagerByCause[size_t(EagerCause::SyncInSegment)], 0u);
  // Every event was destroyed, each only after its record and wait executed.
  ASSERT_EQ(h.exec.destroyedEvents.size(), 20u);
  for (size_t n = 0; n < h.exec.destroyedEvents.size(); ++n) {
    const uint64_t e = h.exec.destroyedEvents[n];
    int seen = 0;
    for (size_t k = 0; k < h.exec.destroyedWhileTraceSize[n]; ++k) seen += h.exec.trace[k].event == e;
    EXPECT_EQ(seen, 2) << "event " << e << " destroyed before its record and wait ran";
  }
}

TEST(Engine, AStreamOrderedFreeWaitsForTheHeldOpsBeforeIt) {
  Harness h;
  size_t deferred = 0;
  for (int it = 0; it < 20; ++it) {
    iteration(h, 10, 1);
    const uint64_t pointer = 0x7000 + it;
    const size_t issuedBefore = h.issued.size();
    {
      auto lock = h.engine.lock();
      if (h.engine.deferFree(pointer, 0x100)) ++deferred;
      else h.exec.freed.emplace_back(pointer, h.exec.trace.size());
    }
    iteration(h, 10, 1, 5000);
    h.sync();
    // The free ran after every op issued before it.
    ASSERT_EQ(h.exec.freed.back().first, pointer);
    EXPECT_GE(h.exec.freed.back().second, issuedBefore) << "iteration " << it;
  }
  h.expectEquivalent();
  EXPECT_GT(deferred, 5u);
  EXPECT_GE(h.engine.stats().replays, 15u);
}

// With nothing held but launches still queued, a free goes behind them: the
// program's thread does not wait (no drain), and the next drain issues it,
// before the op that caused the drain runs.
TEST(Engine, AFreeWithNothingHeldGoesBehindQueuedLaunchesUntilTheNextDrain) {
  Harness h;
  h.exec.launchesQueued = true;
  iteration(h, 10, 1);
  h.sync();  // nothing held now
  const int drainsBefore = h.exec.drains;
  {
    auto lock = h.engine.lock();
    EXPECT_TRUE(h.engine.deferFree(0x7100, 0x100));
  }
  EXPECT_EQ(h.exec.drains, drainsBefore) << "the free waited for the queued launches";
  EXPECT_TRUE(h.exec.freed.empty());
  ASSERT_EQ(h.exec.pendingFrees.size(), 1u);
  const size_t traceBefore = h.exec.trace.size();
  h.op(TestOp{OpKind::Boundary, 0x100, 77, 0, 0, EagerCause::HostMemoryCopy});  // an eager op: drains first
  ASSERT_EQ(h.exec.freed.size(), 1u);
  EXPECT_EQ(h.exec.freed[0].first, 0x7100u);
  EXPECT_EQ(h.exec.freed[0].second, traceBefore) << "the free must reach the driver before the op after it";
  EXPECT_TRUE(h.exec.pendingFrees.empty());
}

// Only the calling thread can name its per-thread default stream: such a free
// never waits on another thread's queue.
TEST(Engine, APerThreadStreamFreeIsNeverPutBehindQueuedLaunches) {
  Harness h;
  h.exec.launchesQueued = true;
  auto lock = h.engine.lock();
  EXPECT_FALSE(h.engine.deferFree(0x7200, core::kPerThreadStream));  // the caller frees it, after a drain
  EXPECT_TRUE(h.exec.pendingFrees.empty());
  EXPECT_GT(h.exec.drains, 0);
}

// A program that goes quiet after such a free: the idle flush issues it.
TEST(Engine, TheIdleFlushIssuesFreesPutBehindQueuedLaunches) {
  Harness h;
  h.exec.launchesQueued = true;
  iteration(h, 10, 1);
  h.sync();
  auto lock = h.engine.lock();
  ASSERT_TRUE(h.engine.deferFree(0x7300, 0x100));
  EXPECT_FALSE(h.engine.flushIfIdle());  // first look: the program may still be busy
  EXPECT_TRUE(h.exec.freed.empty());
  EXPECT_TRUE(h.engine.flushIfIdle());  // no op since: quiet
  ASSERT_EQ(h.exec.freed.size(), 1u);
  EXPECT_EQ(h.exec.freed[0].first, 0x7300u);
  EXPECT_FALSE(h.engine.flushIfIdle());  // nothing left
}

// A free deferred past held ops and ordered on a stream the program then
// destroys must reach the driver before the destroy: afterwards the handle
// names no stream (the driver may crash on it).
TEST(Engine, AFreeDeferredOnAStreamIsIssuedBeforeThatStreamIsDestroyed) {
  Harness h;
  size_t deferred = 0;
  for (int it = 0; it < 20; ++it) {
    iteration(h, 10, 1);  // on stream 0x100: held while a replay matches
    const uint64_t pointer = 0x9000 + it;
    const uint64_t sideStream = 0x700 + it;  // no op of its own
    const size_t freesBefore = h.exec.freed.size();
    {
      auto lock = h.engine.lock();
      if (h.engine.deferFree(pointer, sideStream)) ++deferred;
      else h.exec.freeAsync(pointer, sideStream, 0);
      h.engine.releaseStream(sideStream);  // the program destroys it now
      ASSERT_EQ(h.exec.freed.size(), freesBefore + 1) << "iteration " << it << ": free still deferred";
      EXPECT_EQ(h.exec.freedOnStream.back(), sideStream);
    }
    iteration(h, 10, 1, 5000);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_GT(deferred, 5u);
}

// The op that begins the next piece, right after a replay completed, takes
// the fast lane too (Engine::armStart) when that piece is the only one a run
// starting with it could match: in steady state every op of a loop without a
// sync is held there, its replays unchanged.
TEST(Engine, TheOpThatBeginsTheNextPieceTakesTheFastLane) {
  Harness h;
  for (int it = 0; it < 30; ++it) iteration(h, 200, it);
  const size_t fastBefore = h.fastLaneOps, launchesBefore = h.exec.launches;
  for (int it = 30; it < 40; ++it) iteration(h, 200, it);
  h.expectEquivalent();
  EXPECT_GE(h.exec.launches - launchesBefore, size_t(10));
  if (Harness::useFastLane()) {
    EXPECT_EQ(h.fastLaneOps - fastBefore, size_t(10 * 200));  // the op that begins each replay too
  }
}

// An armed start holds only until anything else happens: a program capture
// begun between two pieces (no op in between) makes graft step aside for the
// very next op, which goes to the driver as submitted.
TEST(Engine, AnArmedStartIsNotTakenOnceTheProgramCaptures) {
  Harness h;
  for (int it = 0; it < 30; ++it) iteration(h, 200, it);
  {
    auto lock = h.engine.lock();
    h.engine.programCaptureBegin();
  }
  const size_t launches = h.exec.launches, fast = h.fastLaneOps;
  for (int it = 30; it < 33; ++it) iteration(h, 200, it);
  EXPECT_EQ(h.exec.launches, launches);  // nothing replayed while the program captures
  EXPECT_EQ(h.fastLaneOps, fast);
  EXPECT_EQ(h.exec.trace.size(), h.issued.size());
  {
    auto lock = h.engine.lock();
    h.engine.programCaptureEnd();
  }
  for (int it = 33; it < 60; ++it) iteration(h, 200, it);
  h.expectEquivalent();
}

// Two loops that begin alike and part later, taken in turn: a start is armed
// only where the next piece is the one segment a run with that first op
// could match, so each loop keeps replaying its own graphs.
TEST(Engine, LoopsThatBeginAlikeKeepTheirOwnGraphsWithArmedStarts) {
  Harness h;
  for (int it = 0; it < 60; ++it) {
    const uint64_t base = it % 3 == 2 ? 5000 : 1000;
    for (int k = 0; k < 80; ++k) h.op(TestOp{OpKind::Kernel, 0x100, k < 40 ? uint64_t(1000 + k) : base + k, 7});
    h.op(TestOp{OpKind::Kernel, 0x200, uint64_t(9000 + it % 3), 7});
  }
  h.expectEquivalent();
  EXPECT_GT(h.viaGraph(), size_t(30 * 81));
}

// An armed start goes with the piece it was armed for. Right after a replay
// completed (nothing held, no op since), code unloaded that the next piece
// uses (Engine::forgetSegmentsWith), or that replay's own graph launch
// failing (its segment, which follows itself here, disabled): the op that
// would have begun the piece finds nothing to match and is issued as
// submitted, as submit() issues it.
TEST(Engine, AnArmedStartIsNotTakenOnceItsPieceIsGone) {
  Harness h;
  auto loopOp = [&](int k, uint64_t step, uint64_t base) {
    h.op(TestOp{OpKind::Kernel, 0x100, base + k, k == 3 ? step : 7});
  };
  for (int it = 0; it < 30; ++it) iteration(h, 200, it);
  ASSERT_EQ(h.exec.trace.size(), h.issued.size());  // the last replay completed: nothing held
  {
    auto lock = h.engine.lock();
    ASSERT_NE(h.engine.soleExpected(), nullptr);  // armed with the loop's first op
    h.engine.forgetSegmentsWith([](const core::OpDesc& op) { return op.kind == OpKind::Kernel; }, false);
    EXPECT_EQ(h.engine.soleExpected(), nullptr);
  }
  size_t fast = h.fastLaneOps;
  loopOp(0, 30, 1000);
  EXPECT_EQ(h.fastLaneOps, fast);
  EXPECT_EQ(h.exec.trace.size(), h.issued.size());  // no segment: issued at once
  for (int k = 1; k < 200; ++k) loopOp(k, 30, 1000);
  size_t launches = h.exec.launches;
  for (int it = 31; it < 60; ++it) iteration(h, 200, it);
  EXPECT_GT(h.exec.launches, launches + 10);  // built again, replayed again

  // The next completing replay's launch fails.
  ASSERT_EQ(h.exec.trace.size(), h.issued.size());
  h.exec.failLaunchAt = h.exec.launches;
  for (int k = 0; k < 200; ++k) loopOp(k, 60, 1000);
  ASSERT_EQ(h.exec.launches, h.exec.failLaunchAt + 1);
  ASSERT_EQ(h.exec.trace.size(), h.issued.size());  // its ops issued eagerly
  {
    auto lock = h.engine.lock();
    EXPECT_EQ(h.engine.soleExpected(), nullptr);
  }
  fast = h.fastLaneOps;
  loopOp(0, 61, 1000);
  EXPECT_EQ(h.fastLaneOps, fast);
  EXPECT_EQ(h.exec.trace.size(), h.issued.size());
  h.expectEquivalent();
}

// What submit() does with the op that begins the next piece depends only on
// the live segments and on graft not stepping aside: calls between the
// pieces that change neither (a host wait, queries, an event destroyed,
// another stream destroyed and created again) leave the start armed, and the
// op is held there as tryStart() would hold it.
TEST(Engine, AnArmedStartOutlivesCallsThatChangeNoSegment) {
  Harness h;
  for (int it = 0; it < 30; ++it) iteration(h, 200, it);
  ASSERT_EQ(h.exec.trace.size(), h.issued.size());
  for (int it = 30; it < 40; ++it) {
    {
      auto lock = h.engine.lock();
      ASSERT_NE(h.engine.soleExpected(), nullptr) << "iteration " << it;
      if (it == 31) h.engine.hostBarrier(42);  // once: barriers that recur are learned as boundaries
      EXPECT_EQ(h.engine.query(0x100, 0, 11), core::QueryAnswer::AskDriver);  // nothing held
      EXPECT_EQ(h.engine.query(0, 0xe9, 9), core::QueryAnswer::AskDriver);
      EXPECT_FALSE(h.engine.deferEventDestroy(0xe9, 0));
      h.engine.releaseStream(0x300);
      h.engine.streamCreated(0x300, 0);
      EXPECT_NE(h.engine.soleExpected(), nullptr) << "iteration " << it;
    }
    const size_t fast = h.fastLaneOps, held = h.issued.size() - h.exec.trace.size();
    h.op(TestOp{OpKind::Kernel, 0x100, 1000, 7});
    EXPECT_EQ(h.issued.size() - h.exec.trace.size(), held + 1) << "iteration " << it;  // held
    if (Harness::useFastLane()) {
      EXPECT_EQ(h.fastLaneOps, fast + 1);
    }
    for (int k = 1; k < 200; ++k) h.op(TestOp{OpKind::Kernel, 0x100, uint64_t(1000 + k), k == 3 ? uint64_t(it) : 7});
    EXPECT_EQ(h.exec.trace.size(), h.issued.size());  // replayed whole
  }
  h.expectEquivalent();
  EXPECT_GT(h.viaGraph(), size_t(35 * 200));
}

TEST(Engine, ProgramCaptureMakesGraftStepAside) {
  Harness h;
  for (int it = 0; it < 10; ++it) {
    iteration(h, 10, 1);
    h.sync();
  }
  {
    auto lock = h.engine.lock();
    h.engine.programCaptureBegin();
  }
  const size_t launches = h.exec.launches;
  for (int it = 0; it < 5; ++it) iteration(h, 10, 1);
  EXPECT_EQ(h.exec.launches, launches);  // nothing replayed while the program captures
  EXPECT_EQ(h.exec.trace.size(), h.issued.size());
  {
    auto lock = h.engine.lock();
    h.engine.programCaptureEnd();
  }
  h.expectEquivalent();
}

TEST(Engine, PiecesBeforeARecurringSyncAreSmallAtBothEnds) {
  // A loop that waits for its results every iteration (loss.item()): a small
  // first piece starts the GPU early; small last pieces leave little GPU work
  // to start after the program's last op, which the host then waits for.
  core::EngineConfig c = Harness::defaultConfig();
  c.segmentOps = 0;  // automatic
  auto h = runSyncedLoop(c);
  EXPECT_EQ(h->exec.builtSizes, (std::vector<size_t>{16, 32, 132, 64, 32, 16, 8}));
  EXPECT_GE(h->viaGraph(), size_t(15 * 300));
}

TEST(Engine, TheLastPieceBeforeARecurringSyncHasGraftSyncTailOps) {
  // GRAFT_SYNC_TAIL_OPS sets the last piece (what the host waits for after its
  // last op); the pieces before it double; GRAFT_MIN_SEGMENT_OPS bounds it.
  core::EngineConfig c = Harness::defaultConfig();
  c.segmentOps = 0;
  c.minSegmentOps = 2;
  c.syncTailOps = 2;
  auto h = runSyncedLoop(c);
  EXPECT_EQ(h->exec.builtSizes.back(), 2u);
  EXPECT_EQ(h->exec.builtSizes[h->exec.builtSizes.size() - 2], 4u);
  EXPECT_GE(h->viaGraph(), size_t(15 * 300));

  c.minSegmentOps = 6;  // a tail below the shortest graph is raised to it
  EXPECT_EQ(runSyncedLoop(c)->exec.builtSizes.back(), 6u);
}

TEST(Engine, PiecesCoverEveryOpOfAnyLengthExactlyOnce) {
  // Whatever the run's length and GRAFT_MIN_SEGMENT_OPS, the automatic pieces
  // tile the run: no op left eager for being in a piece too short to build.
  for (uint32_t minOps : {2u, 4u, 16u, 64u, 1025u}) {
    for (int n : {5, 17, 23, 24, 47, 100, 200, 301, 1000, 4355}) {
      for (bool sync : {true, false}) {
      if (n < int(minOps)) continue;
      if (n > 1000 && minOps < 1025) continue;
      core::EngineConfig c = Harness::defaultConfig();
      c.segmentOps = 0;
      c.minSegmentOps = minOps;
      c.maxPeriod = 8192;
      Harness h(c);
      // Without a sync a run shorter than PeriodDetector::kShortRunOps is
      // built only unrolled, once `warmup` unrolled instances ran.
      const size_t unroll = sync ? 1 : core::PeriodDetector::unrollFor(uint64_t(n));
      for (size_t it = 0; it < 8 * unroll; ++it) {
        // mostly repeating shapes (layers), a unique one every 13 ops: cuts
        // move to the unique ops
        for (int k = 0; k < n; ++k)
          h.op(TestOp{OpKind::Kernel, 0x100, uint64_t(k % 13 == 0 ? 5000 + k : 1000 + k % 5), 7});
        if (sync) h.sync();
      }
      h.expectEquivalent();
      size_t total = 0;
      for (size_t sz : h.exec.builtSizes) {
        EXPECT_GE(sz, minOps) << "n=" << n << " min=" << minOps;
        total += sz;
      }
      EXPECT_EQ(total, size_t(n) * unroll)
          << "n=" << n << " min=" << minOps << " sync=" << sync;
      }
    }
  }
}

TEST(Engine, GraphsNeverMixDeviceContexts) {
  // One thread drives two devices in turn (a context switch between them):
  // every graph holds ops of one context, and nearly everything still replays.
  Harness h;
  h.exec.streamIsDomain = true;
  for (int it = 0; it < 20; ++it) {
    for (int k = 0; k < 30; ++k) h.op(TestOp{OpKind::Kernel, 0x100, uint64_t(1000 + k), 7});
    for (int k = 0; k < 30; ++k) h.op(TestOp{OpKind::Kernel, 0x200, uint64_t(2000 + k), uint64_t(it)});
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_EQ(h.exec.mixedDomainBuilds, 0);
  EXPECT_GE(h.exec.builds, 2);
  EXPECT_GE(h.viaGraph(), size_t(15 * 60));
}

// Two streams standing for two device contexts: `learn` is issued 10 times,
// then `step` (which replays what `learn` taught) 20 times, a sync after each.
template <typename Learn, typename Step>
void expectContextsApart(uint32_t segmentOps, Learn learn, Step step, const char* what) {
  core::EngineConfig c = Harness::defaultConfig();
  c.minSegmentOps = 4;
  c.segmentOps = segmentOps;
  Harness h(c);
  h.exec.streamIsDomain = true;
  for (int it = 0; it < 10; ++it) {
    learn(h);
    h.sync();
  }
  for (int it = 0; it < 20; ++it) {
    step(h);
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_EQ(h.exec.mixedDomainBuilds, 0) << what;
}

void kernels(Harness& h, uint64_t stream, uint64_t firstShape, int n) {
  for (int k = 0; k < n; ++k) h.op(TestOp{OpKind::Kernel, stream, firstShape + k, 7});
}

TEST(Engine, PiecesMovedOutOfReplayedSegmentsKeepDeviceContextsApart) {
  // Runs built around a segment already replayed: cuts moved out of it
  // (Engine::alignCuts) must never drop a cut where the device context
  // changes.
  expectContextsApart(
      1000, [](Harness& h) { kernels(h, 0x100, 1000, 30); },
      [](Harness& h) {
        kernels(h, 0x100, 1000, 30);
        kernels(h, 0x200, 2000, 1);
        kernels(h, 0x100, 3000, 30);
      },
      "a context's part shorter than GRAFT_MIN_SEGMENT_OPS");
  expectContextsApart(
      25, [](Harness& h) { kernels(h, 0x100, 1000, 60); },
      [](Harness& h) {
        kernels(h, 0x100, 4000, 20);
        kernels(h, 0x100, 1000, 60);
        kernels(h, 0x100, 5000, 1);
        kernels(h, 0x200, 6000, 30);
      },
      "a cut moved to a segment's end just before a context change");
}

TEST(Engine, ACrossDeviceWaitGoesWithTheDeviceThatWaits) {
  // Device A's work records an event, device B's stream waits for it: the
  // record belongs in A's graph and the wait in B's, though neither event op
  // carries a context of its own.
  Harness h;
  h.exec.streamIsDomain = true;
  const uint64_t e = 0xe0;
  for (int it = 0; it < 20; ++it) {
    for (int k = 0; k < 20; ++k) h.op(TestOp{OpKind::Kernel, 0x100, uint64_t(1000 + k), 7});
    h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, e});
    h.op(TestOp{OpKind::EventWait, 0x200, 2, 0, e});
    for (int k = 0; k < 20; ++k) h.op(TestOp{OpKind::Kernel, 0x200, uint64_t(2000 + k), uint64_t(it)});
    h.sync();
  }
  h.expectEquivalent();
  EXPECT_EQ(h.exec.mixedDomainBuilds, 0);
  EXPECT_GE(h.viaGraph(), size_t(15 * 42));
}

TEST(Engine, PiecesOfLongSegmentsWithoutSyncGrow) {
  core::EngineConfig c = Harness::defaultConfig();
  c.segmentOps = 0;  // automatic: 32, 64, 128, ...
  Harness h(c);
  for (int it = 0; it < 20; ++it) iteration(h, 300, 1);
  h.expectEquivalent();
  EXPECT_EQ(h.exec.builtSizes, (std::vector<size_t>{32, 64, 128, 76}));
}

TEST(Engine, FixedPieceSizeIsHonoured) {
  core::EngineConfig c = Harness::defaultConfig();
  c.segmentOps = 100;
  EXPECT_EQ(runSyncedLoop(c)->exec.builtSizes, (std::vector<size_t>{100, 100, 100}));
}

TEST(Engine, UnloadingCodeDropsEveryGraphAndRelearns) {
  // A module unload may let the driver reuse a kernel handle for other code:
  // nothing recorded before may be replayed after it.
  Harness h;
  for (int it = 0; it < 10; ++it) {
    iteration(h, 40, it);
    h.sync();
  }
  const int builtBefore = h.exec.builds;
  ASSERT_GE(builtBefore, 1);
  const size_t viaGraphBefore = h.viaGraph();
  {
    auto lock = h.engine.lock();
    h.engine.hostBarrier(7);
    h.engine.forgetRecordedCode();
  }
  EXPECT_EQ(h.exec.destroyed, builtBefore);
  EXPECT_EQ(h.exec.kernelForgets, 1);
  // The same loop right after: eager until it has repeated again, then
  // replayed through graphs built anew.
  for (int it = 0; it < 2; ++it) {
    iteration(h, 40, it);
    h.sync();
  }
  EXPECT_EQ(h.viaGraph(), viaGraphBefore);
  for (int it = 2; it < 12; ++it) {
    iteration(h, 40, it);
    h.sync();
  }
  EXPECT_GT(h.exec.builds, builtBefore);
  EXPECT_GT(h.viaGraph(), viaGraphBefore + 5 * 40);
  h.expectEquivalent();
}

TEST(Engine, BenchmarkPauseIssuesHeldWorkAndResumeReplaysWithTheSameGraphs) {
  // The benchmark switch (GRAFT_BENCH_SWITCH) pauses replay at any point, even
  // in the middle of a segment, and resumes it at any point.
  Harness h;
  for (int it = 0; it < 8; ++it) iteration(h, 40, it);
  const int builds = h.exec.builds;
  ASSERT_GE(builds, 1);
  for (int round = 0; round < 6; ++round) {
    const int cut = 5 + 7 * round;  // mid-iteration
    for (int k = 0; k < cut; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 1000u + k, k == 3 ? 99u + round : 7u});
    {
      auto lock = h.engine.lock();
      h.engine.pauseReplay();
    }
    // Nothing may stay held across a pause: the ops after it bypass the engine.
    ASSERT_EQ(h.exec.trace.size(), h.issued.size()) << "ops held across a pause";
    const size_t viaGraph = h.viaGraph();
    for (int k = cut; k < 40; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 1000u + k, 7});
    for (int it = 0; it < 5; ++it) {
      iteration(h, 40, it);
      h.sync();
    }
    EXPECT_EQ(h.viaGraph(), viaGraph) << "replayed while paused";
    ASSERT_EQ(h.exec.trace.size(), h.issued.size()) << "ops held while paused";
    {
      auto lock = h.engine.lock();
      h.engine.resumeReplay();
    }
    for (int it = 0; it < 4; ++it) iteration(h, 40, 50 + it);
    EXPECT_GE(h.viaGraph(), viaGraph + 3 * 40) << "no replay after resuming";
  }
  // Resuming uses the graphs built before; nothing learned across the gaps.
  EXPECT_EQ(h.exec.builds, builds);
  h.expectEquivalent();
}

// An RNN-shaped iteration (cuDNN's LSTM): per layer, a loop of 47 timesteps
// of two kernels, every eighth forked to a second stream and joined back
// with events from a small pool, forward and backward, between unique ops.
// The timestep loop repeats first, but in steady state the whole iteration
// must run as the automatic pieces (32, 64, ... ops), with no mismatches.
// `eventsPerIteration`: the pool hands out other events each iteration (as
// cuDNN's events, created and destroyed every step, come back in another
// order), so the runs graft builds from replayed segments and eager ops must
// name the events of one replay, not those the segments were built with.
void expectRecurrentLoopsConverge(bool eventsPerIteration) {
  core::EngineConfig c = Harness::defaultConfig();
  c.segmentOps = 0;
  c.minSegmentOps = 4;
  c.maxPeriod = 16384;
  Harness h(c);
  uint64_t it = 0;
  auto timesteps = [&h, &it, eventsPerIteration](uint64_t base) {
    for (int t = 0; t < 47; ++t) {
      h.op(TestOp{OpKind::Kernel, 0x100, base, uint64_t(t)});
      h.op(TestOp{OpKind::Kernel, 0x100, base + 1, uint64_t(t)});
      if (t % 8 == 7) {
        const uint64_t e = 0xe000 + (t / 8 + (eventsPerIteration ? it * 2 : 0)) % 3;
        h.op(TestOp{OpKind::EventRecord, 0x100, 7, 0, e});
        h.op(TestOp{OpKind::EventWait, 0x200, 8, 0, e});
        h.op(TestOp{OpKind::Kernel, 0x200, base + 2, uint64_t(t)});
        h.op(TestOp{OpKind::EventRecord, 0x200, 9, 0, e + 0x10});
        h.op(TestOp{OpKind::EventWait, 0x100, 10, 0, e + 0x10});
      }
    }
  };
  auto iterationOfLayers = [&]() {
    h.op(TestOp{OpKind::Kernel, 0x100, 1, it});
    for (uint64_t layer = 0; layer < 2; ++layer) {
      h.op(TestOp{OpKind::Kernel, 0x100, 2, layer});
      timesteps(20);
    }
    for (int k = 0; k < 5; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 40u + k, it});
    for (uint64_t layer = 0; layer < 2; ++layer) {
      h.op(TestOp{OpKind::Kernel, 0x100, 3, layer});
      timesteps(30);
    }
    for (int k = 0; k < 10; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 60u + k, it});
  };
  for (it = 0; it < 30; ++it) iterationOfLayers();
  const core::EngineStats before = h.engine.stats();
  const size_t viaGraphBefore = h.viaGraph(), opsBefore = h.issued.size();
  for (it = 30; it < 50; ++it) iterationOfLayers();
  const core::EngineStats after = h.engine.stats();
  EXPECT_EQ(after.eagerByCause[size_t(EagerCause::Mismatch)], before.eagerByCause[size_t(EagerCause::Mismatch)]);
  EXPECT_EQ(h.viaGraph() - viaGraphBefore, h.issued.size() - opsBefore) << "ops eager in steady state";
  EXPECT_LE(after.replays - before.replays, 20u * 6) << "more launches than pieces of the iteration";
  h.expectEquivalent();
}

TEST(Engine, RecurrentTimestepLoopsWithCrossStreamEventsConvergeToIterationPieces) {
  expectRecurrentLoopsConverge(false);
}

TEST(Engine, RecurrentLoopsConvergeWhenEachIterationNamesOtherEvents) { expectRecurrentLoopsConverge(true); }

TEST(Engine, RunsBuiltFromReplayedSegmentsNameTheEventsOfThatReplay) {
  // Each iteration: an inner loop of 4 repeats of 33 ops that records event E
  // (graft learns the loop first, within the first iteration), then a second
  // stream waits for E's last record. E is another event each iteration (as
  // events created and destroyed every step). The whole iteration is learned from the inner
  // loop's replays and the ops after it: built with the events of the first
  // replays, its wait would find no record inside the graph, mismatch every
  // time, and the iteration would never go through graphs.
  Harness h;
  auto iteration = [&h](uint64_t it) {
    const uint64_t e = 0xe000 + it;
    h.op(TestOp{OpKind::Kernel, 0x100, 1, it});
    for (int t = 0; t < 4; ++t) {
      for (uint64_t k = 0; k < 32; ++k) h.op(TestOp{OpKind::Kernel, 0x100, 100 + k, uint64_t(t)});
      h.op(TestOp{OpKind::EventRecord, 0x100, 7, 0, e});
    }
    h.op(TestOp{OpKind::EventWait, 0x200, 8, 0, e});
    for (uint64_t k = 0; k < 8; ++k) h.op(TestOp{OpKind::Kernel, 0x200, 200 + k, it});
    h.op(TestOp{OpKind::Kernel, 0x100, 2, it});
    h.sync();
  };
  for (uint64_t it = 0; it < 30; ++it) iteration(it);
  const size_t viaGraphBefore = h.viaGraph(), opsBefore = h.issued.size();
  for (uint64_t it = 30; it < 40; ++it) iteration(it);
  EXPECT_EQ(h.viaGraph() - viaGraphBefore, h.issued.size() - opsBefore) << "ops eager in steady state";
  h.expectEquivalent();
}

// Ops whose shapes never repeat (a fresh shape every op, as with data-dependent
// sizes every step), on two streams.
void nonRepeating(Harness& h, size_t n, uint64_t& shape) {
  for (size_t k = 0; k < n; ++k) h.op(TestOp{OpKind::Kernel, k % 3 ? 0x100u : 0x200u, 50000 + shape++, 7});
}

TEST(Engine, NothingRepeatingMakesGraftRestThenLookAgain) {
  core::EngineConfig c = Harness::defaultConfig();
  c.maxPeriod = 64;
  c.dormantAfterOps = 100;  // raised to (3 + 1) * 64 = 256
  Harness h(c);
  uint64_t shape = 0;
  nonRepeating(h, 255, shape);
  EXPECT_FALSE(h.engine.dormant()) << "rested before (warmup + 1) * maxPeriod ops";
  nonRepeating(h, 1, shape);
  EXPECT_TRUE(h.engine.dormant());
  // A rest lasts 4 x 256 ops, every one issued in place and counted.
  nonRepeating(h, 4 * 256, shape);
  EXPECT_EQ(h.dormantOps, size_t(4 * 256));
  EXPECT_FALSE(h.engine.dormant());
  {
    auto lock = h.engine.lock();
    EXPECT_EQ(h.engine.stats().eagerByCause[size_t(EagerCause::Dormant)], uint64_t(4 * 256));
    EXPECT_EQ(h.engine.stats().opsTotal, uint64_t(5 * 256));
  }
  // The program turns periodic: after the rest graft finds the loop again.
  for (int it = 0; it < 20; ++it) iteration(h, 40, it);
  EXPECT_GE(h.exec.builds, 1);
  EXPECT_GT(h.viaGraph(), size_t(14 * 40));
  h.expectEquivalent();
}

TEST(Engine, ALoopThatStartsDuringARestIsReplayedOnceTheRestEnds) {
  core::EngineConfig c = Harness::defaultConfig();
  c.maxPeriod = 64;
  c.dormantAfterOps = 256;
  Harness h(c);
  uint64_t shape = 0;
  nonRepeating(h, 256, shape);
  ASSERT_TRUE(h.engine.dormant());
  // 1024 ops of rest, then the loop keeps going: graphs by 1024 + 4 x 40 ops later.
  for (int it = 0; it < 40; ++it) iteration(h, 40, it);
  EXPECT_EQ(h.dormantOps, size_t(1024));
  EXPECT_GE(h.exec.builds, 1);
  EXPECT_GT(h.viaGraph(), size_t(40 * 40 - 1024 - 5 * 40));
  h.expectEquivalent();
}

TEST(Engine, GraftKeepsMatchingWhileItsGraphsCarryOps) {
  core::EngineConfig c = Harness::defaultConfig();
  c.maxPeriod = 64;
  c.dormantAfterOps = 256;
  Harness h(c);
  for (int it = 0; it < 10; ++it) iteration(h, 40, it);
  ASSERT_GE(h.exec.builds, 1);
  // Stretches of new shapes between loop iterations: the graph carries a
  // third of the ops (over GRAFT_REST_BELOW_PCT's 20 %), so every op keeps
  // going through the engine.
  uint64_t shape = 0;
  for (int round = 0; round < 30; ++round) {
    nonRepeating(h, 80, shape);
    iteration(h, 40, 99);
  }
  EXPECT_EQ(h.dormantOps, 0u);
  EXPECT_GE(h.viaGraph(), size_t(30 * 40));
  h.expectEquivalent();
}

// A step of five parts, then a sync: X (the same 40 kernels every step), 10
// kernels of new shapes, Y, 10 kernels of new shapes again (no period is
// ever confirmed). Y is 8 kernels every step has, then 32 in one of
// `variants` shapes drawn at random every step, the first ones more often
// when `skewed` (a draw that comes back by coincidence now and then).
// Returns the graphs built in `steps` steps and the ops that went through
// graphs in the last half.
std::pair<int, size_t> stepsWithADrawnPart(int steps, uint32_t variants, bool skewed) {
  core::EngineConfig c = Harness::defaultConfig();
  c.maxPeriod = 1024;
  Harness h(c);
  std::mt19937 draw(2718);
  uint64_t fresh = 900000;
  auto newShapes = [&](int n) {
    for (int k = 0; k < n; ++k) h.op(TestOp{OpKind::Kernel, 0x100, fresh++, 7});
  };
  size_t viaGraphHalfway = 0;
  for (int step = 0; step < steps; ++step) {
    if (step == steps / 2) viaGraphHalfway = h.viaGraph();
    iteration(h, 40, 1, 1000);
    newShapes(10);
    iteration(h, 8, 1, 2000);
    const uint32_t v = skewed ? std::min(draw() % variants, draw() % variants) : draw() % variants;
    iteration(h, 32, 1, 3000 + 100 * v);
    newShapes(10);
    h.sync();
  }
  h.expectEquivalent();
  return {h.exec.builds, h.viaGraph() - viaGraphHalfway};
}

// Stretches that recur by coincidence (8 kernels every step has and a draw
// of 80 that came back within a few steps) make graphs that seldom replay
// and mismatch where the draw differs: each costs a build, and held ops until
// it is dropped. Once such graphs are dropped, stretches must be seen more
// often before they are built (23 graphs before, 3 since), while X, which
// comes back every step, replays in each, and a draw of 20 that comes back
// often keeps its graphs.
TEST(Engine, StretchesThatRecurByCoincidenceAreBuiltLessOften) {
  const auto [builds, viaGraph] = stepsWithADrawnPart(600, 80, true);
  EXPECT_LE(builds, 8) << "graphs for draws that rarely come back";
  EXPECT_GE(viaGraph, size_t(300 * 40)) << "X replays in every step";
  EXPECT_GE(stepsWithADrawnPart(600, 20, true).second, size_t(300 * 40 + 100 * 40)) << "X, and Y in more than a third of the steps";
}

// The loop of GraftKeepsMatchingWhileItsGraphsCarryOps with longer stretches
// of new shapes: a sixth of the ops through the graph. Under `pct`, and
// whether graft rested.
bool restsWithAGraphCarryingASixth(uint32_t pct) {
  core::EngineConfig c = Harness::defaultConfig();
  c.maxPeriod = 64;
  c.dormantAfterOps = 256;
  c.restBelowGraphPct = pct;
  Harness h(c);
  for (int it = 0; it < 10; ++it) iteration(h, 40, it);
  EXPECT_GE(h.exec.builds, 1);
  uint64_t shape = 0;
  for (int round = 0; round < 12; ++round) {
    nonRepeating(h, 200, shape);
    iteration(h, 40, 99);
  }
  h.expectEquivalent();
  return h.dormantOps > 0;
}

TEST(Engine, GraftRestsWhenItsGraphsCarryUnderTheSetShare) {
  EXPECT_TRUE(restsWithAGraphCarryingASixth(20)) << "a sixth is under GRAFT_REST_BELOW_PCT=20";
  EXPECT_FALSE(restsWithAGraphCarryingASixth(10)) << "a sixth is over GRAFT_REST_BELOW_PCT=10";
  EXPECT_FALSE(restsWithAGraphCarryingASixth(0)) << "GRAFT_REST_BELOW_PCT=0: no rest while a graph is live";
}

TEST(Engine, GraphsBuiltAgainAndAgainDoNotKeepGraftFromResting) {
  // A loop whose graph replays, and runs that repeat a few times and then
  // change (stream handles that come back in rotation): graft keeps building
  // graphs for them, and they carry a small share of the ops. A build must
  // not restart the window in which graft judges that share, or it never
  // rests.
  core::EngineConfig c = Harness::defaultConfig();
  c.maxPeriod = 256;
  c.dormantAfterOps = 256;  // raised to (3 + 1) * 256 = 1024
  Harness h(c);
  for (int it = 0; it < 10; ++it) iteration(h, 20, it);
  ASSERT_GE(h.exec.builds, 1);
  uint64_t shape = 0;
  int roundsWithBuilds = 0;
  for (int round = 0; round < 40 && !h.engine.dormant(); ++round) {
    const int buildsBefore = h.exec.builds;
    // Six times this round, then never again; then new shapes. Under a
    // window's worth of ops recorded per round, and under a fifth of the ops
    // through graphs.
    for (int rep = 0; rep < 6; ++rep) iteration(h, 40, 7, 70000 + 100 * uint64_t(round));
    nonRepeating(h, 700, shape);
    roundsWithBuilds += h.exec.builds > buildsBefore;
  }
  EXPECT_GE(roundsWithBuilds, 2) << "the runs that repeat a few times got graphs";
  EXPECT_TRUE(h.engine.dormant()) << "graft never rested while it kept building graphs";
  h.expectEquivalent();
}

TEST(Engine, GraftRestsWhenItsGraphsCarryAlmostNothing) {
  // A short run repeated once and got a graph, then the program's shapes
  // change every step (a mixture of experts): matching and false starts on
  // that graph only cost, so graft rests as if it had none, then looks again.
  core::EngineConfig c = Harness::defaultConfig();
  c.maxPeriod = 64;
  c.dormantAfterOps = 256;
  Harness h(c);
  for (int it = 0; it < 10; ++it) iteration(h, 40, it);
  ASSERT_GE(h.exec.builds, 1);
  const size_t viaGraphBefore = h.viaGraph();
  // The first window of 256 recorded ops began at the build and saw the
  // replays; the next one sees none.
  uint64_t shape = 0;
  size_t fed = 0;
  while (!h.engine.dormant() && fed < 2000) {
    nonRepeating(h, 1, shape);
    ++fed;
  }
  EXPECT_TRUE(h.engine.dormant());
  EXPECT_LE(fed, size_t(2 * 256));
  nonRepeating(h, 4 * 256, shape);
  EXPECT_EQ(h.dormantOps, size_t(4 * 256)) << "a rest of 4 x GRAFT_DORMANT_AFTER_OPS ops";
  EXPECT_FALSE(h.engine.dormant());
  // The loop comes back: its graph, still live, replays it again.
  for (int it = 0; it < 10; ++it) iteration(h, 40, it);
  EXPECT_GE(h.viaGraph(), viaGraphBefore + size_t(8 * 40));
  h.expectEquivalent();
}

TEST(Engine, ZeroDormantAfterOpsNeverRests) {
  core::EngineConfig c = Harness::defaultConfig();
  c.maxPeriod = 64;
  c.dormantAfterOps = 0;
  Harness h(c);
  uint64_t shape = 0;
  nonRepeating(h, 5000, shape);
  EXPECT_EQ(h.dormantOps, 0u);
  h.expectEquivalent();
}

TEST(Engine, PassThroughNeverHoldsAnything) {
  core::EngineConfig c = Harness::defaultConfig();
  c.replay = false;
  Harness h(c);
  for (int it = 0; it < 10; ++it) iteration(h, 20, 1);
  EXPECT_EQ(h.exec.launches, 0);
  EXPECT_EQ(h.exec.builds, 0);
  h.expectEquivalent();
}

TEST(Engine, RandomizedStreamsStayEquivalent) {
  // Random perturbations of a periodic program on two streams.
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Harness h;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull;
    auto rnd = [&x](uint64_t n) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x % n;
    };
    for (int it = 0; it < 40; ++it) {
      for (int k = 0; k < 30; ++k) {
        const uint64_t stream = k % 5 == 0 ? 0x200 : 0x100;
        uint64_t shape = 1000 + k;
        if (rnd(200) == 0) shape = 7000 + rnd(3);  // shape change
        if (rnd(300) == 0) continue;              // missing op
        h.op(TestOp{OpKind::Kernel, stream, shape, k % 4 == 0 ? uint64_t(it) : 1});
        if (k == 12) {
          h.op(TestOp{OpKind::EventRecord, 0x100, 1, 0, 0xe000 + uint64_t(it)});
          h.op(TestOp{OpKind::EventWait, 0x200, 2, 0, 0xe000 + uint64_t(it)});
        }
        if (rnd(150) == 0) h.sync();  // sync at an odd place
      }
      if (rnd(2)) h.sync();
    }
    h.expectEquivalent();
    if (testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "seed " << seed;
      return;
    }
  }
}

}  // namespace
}  // namespace graft::test

