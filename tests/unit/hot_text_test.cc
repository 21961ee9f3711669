// HotText: which objects graft's code may be moved for, and that the moved
// code is the same code at the same addresses, executable, on a huge page
// where the kernel grants one.
#include "core/hot_text.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" uint64_t hotTextProbeMix(uint64_t x);
extern "C" uint64_t (*hotTextProbeMixPointer())(uint64_t);

namespace graft::core {
namespace {

constexpr uintptr_t MiB = uintptr_t(1) << 20;
constexpr uintptr_t kBase = uintptr_t(0x7f0000000000);

// libgraft's layout with -z max-page-size=0x200000: R, RX, R, RW at 2 MiB steps.
std::vector<LoadSegment> alignedLayout(uintptr_t base) {
  return {{base, base + 0xbcc0, false},
          {base + 2 * MiB, base + 2 * MiB + 0x989c5, true},
          {base + 4 * MiB, base + 4 * MiB + 0x2454b, false},
          {base + 0x7fc2d0, base + 0x7fc2d0 + 0x8dd8, false}};
}

TEST(HotTextPlan, AlignedObjectGetsTheWindowOfItsCode) {
  const auto segments = alignedLayout(kBase);
  const HotTextPlan plan = planHotText(segments);
  ASSERT_EQ(plan.refusal, nullptr);
  EXPECT_EQ(plan.window, kBase + 2 * MiB);
  EXPECT_EQ(plan.copyStart, kBase + 2 * MiB);
  EXPECT_EQ(plan.copyEnd, kBase + 2 * MiB + 0x99000);  // page-rounded end of the code
}

TEST(HotTextPlan, CodeLargerThanTheWindowMovesItsFirstTwoMiB) {
  auto segments = alignedLayout(kBase);
  segments[1].end = segments[1].start + 3 * MiB;
  segments[2] = {kBase + 6 * MiB, kBase + 6 * MiB + 0x1000, false};
  segments[3] = {kBase + 8 * MiB, kBase + 8 * MiB + 0x1000, false};
  const HotTextPlan plan = planHotText(segments);
  ASSERT_EQ(plan.refusal, nullptr);
  EXPECT_EQ(plan.copyEnd, plan.window + 2 * MiB);
}

TEST(HotTextPlan, PageAlignedLoadUsesTheWindowWhenItHoldsOnlyCode) {
  // glibc before 2.35 aligns the object to 4 KiB only; the 2 MiB holes of the
  // layout still give its code a window of its own for most load addresses.
  const auto segments = alignedLayout(kBase + 0x5000);
  const HotTextPlan plan = planHotText(segments);
  ASSERT_EQ(plan.refusal, nullptr);
  EXPECT_EQ(plan.window, kBase + 2 * MiB);
  EXPECT_EQ(plan.copyStart, kBase + 0x5000 + 2 * MiB);
}

TEST(HotTextPlan, RefusesAWindowThatReachesAnotherSegment) {
  // Loaded 32 KiB below a 2 MiB boundary: the window starts inside the first segment.
  const auto segments = alignedLayout(kBase + 2 * MiB - 0x8000);
  const HotTextPlan plan = planHotText(segments);
  EXPECT_EQ(plan.window, 0u);
  ASSERT_NE(plan.refusal, nullptr);
  EXPECT_NE(std::string(plan.refusal).find("another segment"), std::string::npos);
}

TEST(HotTextPlan, RefusesAWindowOutsideTheObject) {
  // Linked with 4 KiB pages and loaded off a 2 MiB boundary: the window starts below the object.
  const std::vector<LoadSegment> segments = {{kBase + 0x5000, kBase + 0x10bd0, false},
                                             {kBase + 0x11000, kBase + 0xa8845, true}};
  const HotTextPlan plan = planHotText(segments);
  EXPECT_EQ(plan.window, 0u);
  ASSERT_NE(plan.refusal, nullptr);
  EXPECT_NE(std::string(plan.refusal).find("outside"), std::string::npos);
}

TEST(HotTextPlan, RefusesAWindowSharedWithAnotherSegment) {
  // Linked with 4 KiB pages: code and read-only data share one 2 MiB window.
  const std::vector<LoadSegment> segments = {{kBase, kBase + 0xbbd0, false},
                                             {kBase + 0xc000, kBase + 0xa3845, true},
                                             {kBase + 0xa4000, kBase + 0xc7d59, false},
                                             {kBase + 0x3c82f0, kBase + 0x3d1088, false}};
  const HotTextPlan plan = planHotText(segments);
  EXPECT_EQ(plan.window, 0u);
  ASSERT_NE(plan.refusal, nullptr);
  EXPECT_NE(std::string(plan.refusal).find("another segment"), std::string::npos);
}

TEST(HotTextPlan, RefusesObjectsWithoutExactlyOneCodeSegment) {
  auto segments = alignedLayout(kBase);
  segments[1].executable = false;
  EXPECT_EQ(planHotText(segments).window, 0u);
  segments[1].executable = true;
  segments[2].executable = true;
  EXPECT_EQ(planHotText(segments).window, 0u);
}

// The line of /proc/self/maps that holds `address`.
std::string mapsLineOf(uintptr_t address) {
  FILE* f = std::fopen("/proc/self/maps", "r");
  char line[512];
  std::string found;
  while (f && std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2 && address >= lo && address < hi) found = line;
  }
  if (f) std::fclose(f);
  return found;
}

TEST(HotTextMove, MovedCodeIsTheSameCodeAtTheSameAddresses) {
  const auto probe = reinterpret_cast<uintptr_t>(&hotTextProbeMix);
  const uint64_t before = hotTextProbeMix(12345);
  ASSERT_NE(mapsLineOf(probe).find("hot_text_probe"), std::string::npos) << mapsLineOf(probe);
  std::vector<unsigned char> bytes(256);
  std::memcpy(bytes.data(), reinterpret_cast<const void*>(probe), bytes.size());

  // requireHuge=false: the move itself is checked on any kernel.
  const HotTextResult r = moveHotText(reinterpret_cast<const void*>(&hotTextProbeMix), false);
  ASSERT_TRUE(r.moved) << r.why;
  EXPECT_EQ(r.window % (2 * MiB), 0u);
  EXPECT_LE(r.window, probe);
  EXPECT_GT(r.window + 2 * MiB, probe);

  // The probe's code now comes from an anonymous, executable, read-only mapping...
  const std::string line = mapsLineOf(probe);
  EXPECT_EQ(line.find("hot_text_probe"), std::string::npos) << line;
  EXPECT_NE(line.find("r-xp"), std::string::npos) << line;
  // ...with the same bytes, and it runs, directly and through pointers taken
  // before and after the move.
  EXPECT_EQ(std::memcmp(bytes.data(), reinterpret_cast<const void*>(probe), bytes.size()), 0);
  EXPECT_EQ(hotTextProbeMix(12345), before);
  EXPECT_EQ(hotTextProbeMixPointer()(12345), before);
  std::printf("probe code on a huge page: %s\n", r.huge ? "yes" : "no (the kernel gave none)");

  // Once per process: a second call reports the first move and changes nothing.
  const HotTextResult again = moveHotText(reinterpret_cast<const void*>(&hotTextProbeMix), true);
  EXPECT_TRUE(again.moved);
  EXPECT_EQ(again.window, r.window);
  EXPECT_EQ(hotTextResult().window, r.window);
  EXPECT_EQ(hotTextProbeMix(12345), before);
}

}  // namespace
}  // namespace graft::core
