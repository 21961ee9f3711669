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
  EXPECT_EQ(p.options.eagerKernels, "");
}

TEST(Options, ValidValuesAreTaken) {
  const ParsedOptions p = parse({"GRAFT_DISABLE=1", "GRAFT_MODE=passthrough", "GRAFT_LOG_LEVEL=debug",
                                 "GRAFT_WARMUP=5", "GRAFT_STATS=/tmp/x.json", "GRAFT_EAGER_KERNELS=mine"});
  EXPECT_TRUE(p.problems.empty());
  EXPECT_TRUE(p.options.disable);
  EXPECT_EQ(p.options.mode, Mode::Passthrough);
  EXPECT_EQ(p.options.logLevel, LogLevel::Debug);
  EXPECT_EQ(p.options.warmup, 5);
  EXPECT_EQ(p.options.statsFile, "/tmp/x.json");
  EXPECT_EQ(p.options.eagerKernels, "mine");
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
                    BadCase{"GRAFT_MODE=gra ph", "GRAFT_MODE=\"gra ph\" is not valid"},
                    BadCase{"GRAFT_MODE=gra\nph", "GRAFT_MODE=\"gra\\nph\" is not valid"},
                    BadCase{"GRAFT_WARMUP=3x", "GRAFT_WARMUP=3x"},
                    BadCase{"GRAFT_MODE=fast", "one of passthrough, graph, swallow"},
                    BadCase{"GRAFT_WARMUPS=2", "unknown option GRAFT_WARMUPS (did you mean GRAFT_WARMUP?)"},
                    BadCase{"GRAFT_FOO=1", "unknown option GRAFT_FOO"},
                    BadCase{"graft_warmup=5", "unknown option graft_warmup (did you mean GRAFT_WARMUP? names are case-sensitive)"}));

// Blanks around a value (a shell's $(...) keeps a newline) are not part of it,
// and GRAFT_LOG_LEVEL takes the word the log prints, `warning`.
TEST(Options, BlanksAroundValuesAndTheWordWarning) {
  const ParsedOptions p = parse({"GRAFT_WARMUP= 5\n", "GRAFT_MODE=\tpassthrough ", "GRAFT_ASYNC_LAUNCH=0 ",
                                 "GRAFT_LOG_LEVEL=Warning"});
  EXPECT_TRUE(p.problems.empty()) << p.problems[0];
  EXPECT_EQ(p.options.warmup, 5);
  EXPECT_EQ(p.options.mode, Mode::Passthrough);
  EXPECT_FALSE(p.options.asyncLaunch);
  EXPECT_EQ(p.options.logLevel, LogLevel::Warn);
}

// GRAFT_DISABLE is a kill switch: a value graft does not understand turns it
// off rather than leaving it on, with one line saying so.
TEST(Options, AKillSwitchItCannotReadTurnsGraftOff) {
  for (const char* entry : {"GRAFT_DISABLE=maybe", "GRAFT_DISABLE=2"}) {
    const ParsedOptions p = parse({entry});
    EXPECT_TRUE(p.options.disable) << entry;
    ASSERT_EQ(p.problems.size(), 1u) << entry;
    EXPECT_NE(p.problems[0].find("using 1 (graft off)"), std::string::npos) << p.problems[0];
  }
  EXPECT_FALSE(parse({"GRAFT_DISABLE=off"}).options.disable);
  // Empty, as `GRAFT_DISABLE= cmd` leaves it: unset.
  EXPECT_FALSE(parse({"GRAFT_DISABLE="}).options.disable);
  EXPECT_TRUE(parse({"GRAFT_DISABLE="}).problems.empty());
}

// A shortest segment longer than the longest period can never give a graph.
TEST(Options, ASegmentLongerThanAnyPeriodIsFlagged) {
  const ParsedOptions p = parse({"GRAFT_MIN_SEGMENT_OPS=2000", "GRAFT_MAX_PERIOD=1000"});
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_NE(p.problems[0].find("GRAFT_MIN_SEGMENT_OPS=2000 is above GRAFT_MAX_PERIOD=1000"), std::string::npos);
  EXPECT_TRUE(parse({"GRAFT_MIN_SEGMENT_OPS=1000", "GRAFT_MAX_PERIOD=1000"}).problems.empty());
}

TEST(Options, MarkdownTableListsEveryOption) {
  const std::string table = optionsMarkdownTable();
  for (auto name : optionNames()) EXPECT_NE(table.find(std::string(name)), std::string::npos) << name;
  EXPECT_NE(table.find("| `GRAFT_WARMUP` | `3` | 1 to 1000 |"), std::string::npos);
}

}  // namespace
}  // namespace graft::config
