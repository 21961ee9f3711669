// HotArena: graft's per-op data allocator. What graft relies on: blocks are
// line-aligned and never overlap, freed blocks are reused, nothing ever fails
// (what does not fit comes from the heap), and a late configure() is refused.
// Tests that need a fresh process (the arena is process-wide) run as
// "threadsafe" death tests, which re-execute the binary for that test alone.
#include "core/hot_arena.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace graft::core {
namespace {

bool lineAligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % HotArena::kAlign == 0; }

TEST(HotArena, BlocksAreLineAlignedDistinctAndInTheArena) {
  std::vector<std::pair<char*, size_t>> blocks;
  for (size_t bytes : {1, 8, 63, 64, 65, 200, 4096, 5000, 70000}) {
    char* p = static_cast<char*>(HotArena::allocate(bytes));
    EXPECT_TRUE(lineAligned(p)) << bytes;
    EXPECT_TRUE(HotArena::owns(p)) << bytes;
    std::memset(p, int(bytes & 0xff), bytes);
    blocks.emplace_back(p, bytes);
  }
  for (auto& [p, bytes] : blocks) {  // no block overwrote another
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(static_cast<unsigned char>(p[i]), bytes & 0xff) << bytes;
    HotArena::deallocate(p, bytes);
  }
}

TEST(HotArena, AFreedBlockIsReusedForTheSameSizeClass) {
  void* a = HotArena::allocate(300);
  HotArena::deallocate(a, 300);
  void* b = HotArena::allocate(400);  // same class (512 bytes)
  EXPECT_EQ(a, b);
  HotArena::deallocate(b, 400);
  const size_t used = HotArena::stats().usedBytes;
  for (int i = 0; i < 1000; ++i) HotArena::deallocate(HotArena::allocate(1000), 1000);
  EXPECT_LE(HotArena::stats().usedBytes, used + 1024) << "alloc/free in a loop must not grow the arena";
}

TEST(HotArena, ABlockTooLargeForTheArenaComesFromTheHeap) {
  const size_t before = HotArena::stats().heapBytes;
  const size_t big = HotArena::kDefaultBytes;  // more than an eighth of the arena
  char* p = static_cast<char*>(HotArena::allocate(big));
  EXPECT_TRUE(lineAligned(p));
  EXPECT_FALSE(HotArena::owns(p));
  p[0] = 1;
  p[big - 1] = 2;
  EXPECT_EQ(HotArena::stats().heapBytes, before + big);
  HotArena::deallocate(p, big);
  EXPECT_EQ(HotArena::stats().heapBytes, before);
}

TEST(HotArena, ConfigureAfterFirstUseIsRefused) {
  HotArena::deallocate(HotArena::allocate(64), 64);
  const size_t reserved = HotArena::stats().reservedBytes;
  EXPECT_FALSE(HotArena::configure(0));
  EXPECT_EQ(HotArena::stats().reservedBytes, reserved);
  void* p = HotArena::allocate(64);
  EXPECT_TRUE(HotArena::owns(p));
  HotArena::deallocate(p, 64);
}

TEST(HotArena, ContainersAndObjectsLiveInIt) {
  HotVector<uint64_t> v;
  for (uint64_t i = 0; i < 10000; ++i) v.push_back(i * 3);
  EXPECT_TRUE(HotArena::owns(v.data()));
  EXPECT_TRUE(lineAligned(v.data()));
  for (uint64_t i = 0; i < 10000; ++i) ASSERT_EQ(v[i], i * 3);

  static int destroyed = 0;
  struct Probe {
    explicit Probe(int v) : value(v) {}
    ~Probe() { ++destroyed; }
    int value;
  };
  {
    HotPtr<Probe> p = makeHot<Probe>(7);
    EXPECT_EQ(p->value, 7);
    EXPECT_TRUE(HotArena::owns(p.get()));
  }
  EXPECT_EQ(destroyed, 1);
}

TEST(HotArena, ThreadsGetDisjointBlocks) {
  constexpr int kThreads = 4, kRounds = 2000;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &bad] {
      std::vector<unsigned char*> mine;
      for (int i = 0; i < kRounds; ++i) {
        const size_t bytes = 64 + (i % 7) * 100;
        auto* p = static_cast<unsigned char*>(HotArena::allocate(bytes));
        std::memset(p, t + 1, bytes);
        mine.push_back(p);
        if (i % 3 == 2) {  // free some as we go, so free lists are shared too
          unsigned char* q = mine[mine.size() - 2];
          const size_t qb = 64 + ((i - 1) % 7) * 100;
          for (size_t k = 0; k < qb; ++k)
            if (q[k] != t + 1) ++bad;
          HotArena::deallocate(q, qb);
          mine[mine.size() - 2] = nullptr;
        }
      }
      for (size_t i = 0; i < mine.size(); ++i) {
        if (!mine[i]) continue;
        const size_t bytes = 64 + (i % 7) * 100;
        for (size_t k = 0; k < bytes; ++k)
          if (mine[i][k] != t + 1) ++bad;
        HotArena::deallocate(mine[i], bytes);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(HotArena, AForkWhileAnotherThreadAllocatesLeavesTheChildAbleToAllocate) {
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop.load()) HotArena::deallocate(HotArena::allocate(128), 128);
  });
  int childrenOk = 0;
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {  // only this thread exists here; a held arena lock would hang it
      alarm(2);
      void* p = HotArena::allocate(256);
      HotArena::deallocate(p, 256);
      _exit(HotArena::owns(p) ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ++childrenOk;
  }
  stop = true;
  churn.join();
  EXPECT_EQ(childrenOk, 20);
}

// Fresh processes: the arena as configured before first use. Each returns
// the exit code (0: as expected).

int offMeansEverythingOnTheHeap() {
  if (!HotArena::configure(0)) return 2;
  void* p = HotArena::allocate(128);
  const bool ok = lineAligned(p) && !HotArena::owns(p) && HotArena::stats().reservedBytes == 0 &&
                  HotArena::stats().heapBytes == 128;
  HotArena::deallocate(p, 128);
  return ok && HotArena::stats().heapBytes == 0 ? 0 : 1;
}

int aFullArenaFallsBackToTheHeap() {
  // 2 MiB: blocks up to 256 KiB; the ninth such block does not fit.
  if (!HotArena::configure(size_t(2) << 20)) return 2;
  constexpr size_t kBlock = 256 << 10;
  std::vector<void*> blocks;
  int inArena = 0, onHeap = 0;
  for (int i = 0; i < 9; ++i) {
    void* p = HotArena::allocate(kBlock);
    std::memset(p, i, kBlock);
    (HotArena::owns(p) ? inArena : onHeap)++;
    blocks.push_back(p);
  }
  for (void* p : blocks) HotArena::deallocate(p, kBlock);
  void* again = HotArena::allocate(kBlock);  // the arena's blocks are reused afterwards
  return inArena == 8 && onHeap == 1 && HotArena::owns(again) ? 0 : 1;
}

TEST(HotArenaDeathTest, OffMeansEverythingOnTheHeap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(offMeansEverythingOnTheHeap()), ::testing::ExitedWithCode(0), "");
}

TEST(HotArenaDeathTest, AFullArenaFallsBackToTheHeap) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(aFullArenaFallsBackToTheHeap()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace graft::core
