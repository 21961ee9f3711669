// Which program stream a multi-stream graph may be launched on (core/launch_plan.h).
#include <gtest/gtest.h>

#include <vector>

#include "core/launch_plan.h"

namespace graft::core {
namespace {

using K = PlanOp::Kind;

PlanOp work(uint32_t s) { return {K::Work, s, -1}; }
PlanOp rec(uint32_t s) { return {K::Record, s, -1}; }
PlanOp waitOn(uint32_t s, int32_t instance) { return {K::Wait, s, instance}; }

const std::vector<PlanStream> kTwoNonBlocking{{false, false}, {false, false}};

TEST(LaunchPlan, ForkAndJoinLaunchesOnTheForkingStream) {
  // main: work, record 0; side: wait 0, work, record 1; main: wait 1, work.
  const std::vector<PlanOp> ops{work(0), rec(0), waitOn(1, 0), work(1), rec(1), waitOn(0, 1), work(0)};
  EXPECT_EQ(planLaunch(ops, kTwoNonBlocking).launchOn, 0);
}

TEST(LaunchPlan, NoJoinBackMeansOwnStream) {
  // The side stream is never joined back: main must not wait for it.
  const std::vector<PlanOp> ops{work(0), rec(0), waitOn(1, 0), work(1), work(0)};
  EXPECT_EQ(planLaunch(ops, kTwoNonBlocking).launchOn, -1);
}

TEST(LaunchPlan, SideWorkBeforeTheForkMeansOwnStream) {
  // side's first op does not wait for main: it must not wait for main's earlier work.
  const std::vector<PlanOp> ops{work(1), work(0), rec(0), waitOn(1, 0), work(1), rec(1), waitOn(0, 1)};
  EXPECT_EQ(planLaunch(ops, kTwoNonBlocking).launchOn, -1);
}

TEST(LaunchPlan, AJoinWithoutAForkInTheGraphIsACandidate) {
  // PyTorch's side stream with the fork before the segment (the side stream
  // waited before host copies cut the step): side works, records; main waits
  // and works. main joins side, but side's first op follows no op of main.
  const std::vector<PlanOp> ops{work(1), work(1), rec(1), waitOn(0, 0), work(0)};
  const LaunchPlan plan = planLaunch(ops, kTwoNonBlocking);
  EXPECT_EQ(plan.launchOn, -1);
  EXPECT_EQ(plan.joinsInto, 0);
  EXPECT_EQ(plan.forkNeeded, std::vector<uint32_t>{1});
  // Nothing joins: no candidate.
  const LaunchPlan none = planLaunch(std::vector<PlanOp>{work(1), work(0)}, kTwoNonBlocking);
  EXPECT_EQ(none.joinsInto, -1);
  EXPECT_TRUE(none.forkNeeded.empty());
  // A fork and a join in the graph: launched on main whatever came before.
  const LaunchPlan full = planLaunch(std::vector<PlanOp>{work(0), rec(0), waitOn(1, 0), work(1), rec(1),
                                                          waitOn(0, 1), work(0)},
                                     kTwoNonBlocking);
  EXPECT_EQ(full.launchOn, 0);
  EXPECT_EQ(full.joinsInto, -1);
}

TEST(LaunchPlan, JoinBeforeTheSideStreamsLastOpMeansOwnStream) {
  // main joins side, then side does more work main does not wait for.
  const std::vector<PlanOp> ops{work(0), rec(0), waitOn(1, 0), work(1), rec(1), waitOn(0, 1), work(1)};
  EXPECT_EQ(planLaunch(ops, kTwoNonBlocking).launchOn, -1);
}

TEST(LaunchPlan, IndependentStreamsMeanOwnStream) {
  EXPECT_EQ(planLaunch(std::vector<PlanOp>{work(0), work(1), work(0)}, kTwoNonBlocking).launchOn, -1);
}

TEST(LaunchPlan, AWaitOnAnEarlierEventIsNoFork) {
  // side waits on an event recorded before the segment: no order against main.
  const std::vector<PlanOp> ops{work(0), rec(0), waitOn(1, -1), work(1), rec(1), waitOn(0, 1)};
  EXPECT_EQ(planLaunch(ops, kTwoNonBlocking).launchOn, -1);
}

TEST(LaunchPlan, TheSecondStreamCanBeTheLaunchStream) {
  // side forks main and joins it back.
  const std::vector<PlanOp> ops{work(1), rec(1), waitOn(0, 0), work(0), rec(0), waitOn(1, 1), work(1)};
  EXPECT_EQ(planLaunch(ops, kTwoNonBlocking).launchOn, 1);
}

TEST(LaunchPlan, TheLegacyStreamOrdersBlockingStreamsImplicitly) {
  // legacy: work; blocking: work (follows it); legacy: work (follows that).
  const std::vector<PlanStream> streams{{true, false}, {false, true}};
  EXPECT_EQ(planLaunch(std::vector<PlanOp>{work(0), work(1), work(0)}, streams).launchOn, 0);
  // Without the last legacy op nothing joins the blocking stream back.
  EXPECT_EQ(planLaunch(std::vector<PlanOp>{work(0), work(1)}, streams).launchOn, -1);
  // A blocking stream is not the launch stream beside the legacy one: the
  // legacy stream's tail wait would follow the whole launch.
  EXPECT_EQ(planLaunch(std::vector<PlanOp>{work(1), work(0), work(1)}, streams).launchOn, -1);
  // A non-blocking stream gets no implicit order.
  const std::vector<PlanStream> nonBlocking{{true, false}, {false, false}};
  EXPECT_EQ(planLaunch(std::vector<PlanOp>{work(0), work(1), work(0)}, nonBlocking).launchOn, -1);
}

TEST(LaunchPlan, EveryBranchMustForkAndJoin) {
  // Three streams: side 1 forks and joins, side 2 only forks.
  const std::vector<PlanStream> streams{{false, false}, {false, false}, {false, false}};
  const std::vector<PlanOp> ops{work(0), rec(0),        waitOn(1, 0), waitOn(2, 0), work(1),
                                work(2), rec(1),        waitOn(0, 1), work(0)};
  EXPECT_EQ(planLaunch(ops, streams).launchOn, -1);
  std::vector<PlanOp> joined = ops;
  joined.push_back(rec(2));
  joined.push_back(waitOn(0, 2));
  EXPECT_EQ(planLaunch(joined, streams).launchOn, 0);
}

TEST(LaunchPlan, OneStreamOrBadInputIsNoPlan) {
  EXPECT_EQ(planLaunch(std::vector<PlanOp>{work(0), work(0)}, std::vector<PlanStream>{{false, false}}).launchOn, -1);
  EXPECT_EQ(planLaunch(std::vector<PlanOp>{work(0), waitOn(1, 5)}, kTwoNonBlocking).launchOn, -1);
  EXPECT_EQ(planLaunch(std::vector<PlanOp>{work(0), work(7)}, kTwoNonBlocking).launchOn, -1);
}

}  // namespace
}  // namespace graft::core
