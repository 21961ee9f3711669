// Option parsing: every bad value gives one clear line naming the option, the
// value and what is accepted, and the default is kept.
#include <gtest/gtest.h>

#include <vector>

#include "config/options.h"

namespace graft::config {
namespace {

ParsedOptions parse(std::vector<const char*> env) {
  env.push_back(nullptr);
  return parseOptions(env.data());
}

TEST(Options, DefaultsWithEmptyEnvironment) {
  const ParsedOptions p = parse({"PATH=/usr/bin", "HOME=/root"});
  EXPECT_TRUE(p.problems.empty());
  EXPECT_FALSE(p.options.disable);
  EXPECT_EQ(p.options.mode, Mode::Graph);
  EXPECT_EQ(p.options.logLevel, LogLevel::Info);
  EXPECT_EQ(p.options.warmup, 3);
  EXPECT_EQ(p.options.eagerKernels, "nccl");
}

TEST(Options, ValidValuesAreTaken) {
  const ParsedOptions p = parse({"GRAFT_DISABLE=1", "GRAFT_MODE=passthrough", "GRAFT_LOG_LEVEL=debug",
                                 "GRAFT_WARMUP=5", "GRAFT_STATS=/tmp/x.json", "GRAFT_EAGER_KERNELS="});
  EXPECT_TRUE(p.problems.empty());
  EXPECT_TRUE(p.options.disable);
  EXPECT_EQ(p.options.mode, Mode::Passthrough);
  EXPECT_EQ(p.options.logLevel, LogLevel::Debug);
  EXPECT_EQ(p.options.warmup, 5);
  EXPECT_EQ(p.options.statsFile, "/tmp/x.json");
  EXPECT_EQ(p.options.eagerKernels, "");
}

TEST(Options, ChoicesAreCaseInsensitiveAsBooleansAre) {
  const ParsedOptions p = parse({"GRAFT_MODE=PassThrough", "GRAFT_LOG_LEVEL=WARN", "GRAFT_ASYNC_LAUNCH=OFF"});
  EXPECT_TRUE(p.problems.empty());
  EXPECT_EQ(p.options.mode, Mode::Passthrough);
  EXPECT_EQ(p.options.logLevel, LogLevel::Warn);
  EXPECT_FALSE(p.options.asyncLaunch);
}

// CUDA_LAUNCH_BLOCKING=1 asks that every launch return after its kernel ran;
// a held launch cannot, so graft starts in passthrough and says why.
TEST(Options, LaunchBlockingMeansPassthrough) {
  std::string why;
  EXPECT_EQ(startMode(Mode::Graph, "1", &why), Mode::Passthrough);
  EXPECT_NE(why.find("CUDA_LAUNCH_BLOCKING=1"), std::string::npos);

  // As the driver reads the value (H100, driver 580: tests/gpu/traps_r13.cu,
  // launch_blocking_env): its leading number is 1.
  for (const char* value : {"01", " 1", "1x"}) {
    std::string on;
    EXPECT_EQ(startMode(Mode::Graph, value, &on), Mode::Passthrough) << value;
    EXPECT_NE(on.find(std::string("CUDA_LAUNCH_BLOCKING=") + value), std::string::npos);
  }
  for (const char* value : {static_cast<const char*>(nullptr), "0", "", "yes", "2", "true", "-1", "10"}) {
    std::string none;
    EXPECT_EQ(startMode(Mode::Graph, value, &none), Mode::Graph);
    EXPECT_TRUE(none.empty());
  }
  // The benchmark modes replace the GPU's work anyway; they stay.
  std::string bench;
  EXPECT_EQ(startMode(Mode::Swallow, "1", &bench), Mode::Swallow);
  EXPECT_EQ(startMode(Mode::Passthrough, "1", &bench), Mode::Passthrough);
  EXPECT_TRUE(bench.empty());
}

struct BadCase {
  const char* entry;
  const char* mustMention;
};

class BadValue : public testing::TestWithParam<BadCase> {};

TEST_P(BadValue, OneClearLineAndTheDefault) {
  const ParsedOptions p = parse({GetParam().entry});
  ASSERT_EQ(p.problems.size(), 1u);
  const std::string& line = p.problems[0];
  EXPECT_NE(line.find(GetParam().mustMention), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const ParsedOptions defaults = parse({});
  EXPECT_EQ(p.options.warmup, defaults.options.warmup);
  EXPECT_EQ(p.options.logLevel, defaults.options.logLevel);
  EXPECT_EQ(p.options.mode, defaults.options.mode);
  EXPECT_EQ(p.options.disable, defaults.options.disable);
}

INSTANTIATE_TEST_SUITE_P(
    Options, BadValue,
    testing::Values(BadCase{"GRAFT_LOG_LEVEL=loud", "GRAFT_LOG_LEVEL=loud is not valid (expected one of trace, debug, info, warn, error, off)"},
                    BadCase{"GRAFT_WARMUP=-3", "GRAFT_WARMUP=-3 is not valid (expected an integer from 1 to 1000); using 3"},
                    BadCase{"GRAFT_WARMUP=abc", "GRAFT_WARMUP=abc"},
                    BadCase{"GRAFT_WARMUP=", "GRAFT_WARMUP=\"\" is not valid (expected an integer"},
                    BadCase{"GRAFT_MODE=graph ", "GRAFT_MODE=\"graph \" is not valid"},
                    BadCase{"GRAFT_MODE=gra\nph", "GRAFT_MODE=\"gra\\nph\" is not valid"},
                    BadCase{"GRAFT_WARMUP=3x", "GRAFT_WARMUP=3x"},
                    BadCase{"GRAFT_MODE=fast", "one of passthrough, graph, swallow"},
                    BadCase{"GRAFT_DISABLE=maybe", "GRAFT_DISABLE=maybe"},
                    BadCase{"GRAFT_WARMUPS=2", "unknown option GRAFT_WARMUPS (did you mean GRAFT_WARMUP?)"},
                    BadCase{"GRAFT_FOO=1", "unknown option GRAFT_FOO"}));

TEST(Options, MarkdownTableListsEveryOption) {
  const std::string table = optionsMarkdownTable();
  for (auto name : optionNames()) EXPECT_NE(table.find(std::string(name)), std::string::npos) << name;
  EXPECT_NE(table.find("| `GRAFT_WARMUP` | `3` | 1 to 1000 |"), std::string::npos);
}

}  // namespace
}  // namespace graft::config
