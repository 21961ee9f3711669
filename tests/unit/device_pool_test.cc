// DevicePool (GRAFT_POOL=1) over a fake PoolDriver: a block is handed out
// again no earlier than the driver's own pool would let it be, stream by
// stream and context by context (src/pool/device_pool.h).
#include <gtest/gtest.h>

#include <map>

#include "pool/device_pool.h"

namespace graft::pool {
namespace {

// The fake driver's events: recorded on a stream, complete once a test says
// that stream's work is done.
struct FakeEvents {
  std::map<CUevent, uint64_t> recordedOn;
  std::map<CUevent, bool> complete;
  uintptr_t next = 0x1000;
  bool failRecords = false;
  std::vector<uint64_t> recordStreams;
  std::vector<CUevent> recorded;  // in order
  // Contexts: the current one and each live context's id (an ended one has none).
  uint64_t current = 0xA0;
  std::map<uint64_t, unsigned long long> contextIds = {{0xA0, 1}, {0xB0, 2}};
};
FakeEvents* g_events = nullptr;

PoolDriver fakeDriver() {
  PoolDriver d;
  d.getGranularity = [](size_t* g, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) {
    *g = 2 << 20;
    return CUDA_SUCCESS;
  };
  d.addressReserve = [](CUdeviceptr* p, size_t, size_t, CUdeviceptr, unsigned long long) {
    *p = 0x10000000;
    return CUDA_SUCCESS;
  };
  d.create = [](CUmemGenericAllocationHandle* h, size_t, const CUmemAllocationProp*, unsigned long long) {
    *h = 1;
    return CUDA_SUCCESS;
  };
  d.map = [](CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) { return CUDA_SUCCESS; };
  d.setAccess = [](CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) { return CUDA_SUCCESS; };
  d.release = [](CUmemGenericAllocationHandle) { return CUDA_SUCCESS; };
  d.ctxGetDevice = [](CUdevice* x) {
    *x = 0;
    return CUDA_SUCCESS;
  };
  d.eventCreate = [](CUevent* e, unsigned) {
    *e = reinterpret_cast<CUevent>(g_events->next++);
    return CUDA_SUCCESS;
  };
  d.eventRecord = [](CUevent e, CUstream s) {
    g_events->recordStreams.push_back(reinterpret_cast<uint64_t>(s));
    g_events->recorded.push_back(e);
    if (g_events->failRecords) return CUDA_ERROR_INVALID_HANDLE;
    g_events->recordedOn[e] = reinterpret_cast<uint64_t>(s);
    g_events->complete[e] = false;
    return CUDA_SUCCESS;
  };
  d.eventQuery = [](CUevent e) { return g_events->complete[e] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; };
  d.ctxGetCurrent = [](CUcontext* c) {
    *c = reinterpret_cast<CUcontext>(g_events->current);
    return CUDA_SUCCESS;
  };
  d.ctxGetId = [](CUcontext c, unsigned long long* id) {
    auto it = g_events->contextIds.find(reinterpret_cast<uint64_t>(c));
    if (it == g_events->contextIds.end()) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *id = it->second;
    return CUDA_SUCCESS;
  };
  return d;
}

struct PoolTest : testing::Test {
  PoolTest() : pool(fakeDriver(), uint64_t(1) << 30) { g_events = &events; }
  ~PoolTest() override { g_events = nullptr; }
  // Every fence recorded so far completes (the GPU caught up).
  void gpuCaughtUp() {
    for (auto& [e, done] : events.complete) done = true;
  }
  CUdeviceptr alloc(uint64_t stream, uint64_t ctx) {
    CUdeviceptr p = 0;
    EXPECT_TRUE(pool.allocate(256, stream, ctx, &p));
    return p;
  }
  FakeEvents events;
  DevicePool pool;
  static constexpr uint64_t kLegacy = 1, kCtxA = 0xA0, kCtxB = 0xB0;
};

TEST_F(PoolTest, ABlockFreedOnAStreamIsReusedAtOnceOnThatStream) {
  const CUdeviceptr p = alloc(0x100, kCtxA);
  pool.freeAsync(p, 0x100, kCtxA);
  EXPECT_EQ(alloc(0x100, kCtxA), p);
  EXPECT_TRUE(events.recordStreams.empty()) << "no fence needed on its own stream";
}

TEST_F(PoolTest, AnotherStreamGetsItOnlyAfterAFenceOnTheFreeingStream) {
  const CUdeviceptr p = alloc(0x100, kCtxA);
  pool.freeAsync(p, 0x100, kCtxA);
  EXPECT_NE(alloc(0x200, kCtxA), p) << "the fence has not completed";
  ASSERT_EQ(events.recordStreams, std::vector<uint64_t>{0x100});
  gpuCaughtUp();
  EXPECT_EQ(alloc(0x300, kCtxA), p);
}

TEST_F(PoolTest, OneContextsLegacyStreamIsNotAnothers) {
  // Every context's legacy stream has one key: a block B freed there is not
  // A's at once, and a fence recorded on A's legacy stream says nothing of B's.
  const CUdeviceptr a = alloc(kLegacy, kCtxA);
  const CUdeviceptr b = alloc(kLegacy, kCtxB);
  pool.freeAsync(a, kLegacy, kCtxA);
  pool.freeAsync(b, kLegacy, kCtxB);
  EXPECT_EQ(alloc(kLegacy, kCtxA), a) << "A's own block, on A's legacy stream";
  const CUdeviceptr other = alloc(kLegacy, kCtxA);
  EXPECT_NE(other, b) << "B's block handed to A's legacy stream";
  pool.freeAsync(other, kLegacy, kCtxA);
  EXPECT_NE(alloc(0x100, kCtxA), b) << "A fenced B's legacy block";
  gpuCaughtUp();  // the fence recorded (on A's legacy stream) completes
  EXPECT_NE(alloc(0x200, kCtxB), b) << "B's block reused after a fence recorded in A";
}

TEST_F(PoolTest, ADestroyedStreamsHandleNoLongerOwnsItsBlocks) {
  const CUdeviceptr p = alloc(0x100, kCtxA);
  pool.freeAsync(p, 0x100, kCtxA);
  pool.streamDestroyed(0x100);
  ASSERT_EQ(events.recordStreams, std::vector<uint64_t>{0x100}) << "fenced while the stream exists";
  // A new stream gets the handle: the block waits for the old stream's fence.
  EXPECT_NE(alloc(0x100, kCtxA), p);
  gpuCaughtUp();
  EXPECT_EQ(alloc(0x100, kCtxA), p);
}

TEST_F(PoolTest, ABlockWhoseFenceFailedIsKeptAndNeverFencedAgain) {
  const CUdeviceptr p = alloc(0x100, kCtxA);
  pool.freeAsync(p, 0x100, kCtxA);
  events.failRecords = true;
  pool.streamDestroyed(0x100);
  events.failRecords = false;
  events.recordStreams.clear();
  for (uint64_t s = 0x200; s < 0x205; ++s) EXPECT_NE(alloc(s, kCtxA), p);
  EXPECT_TRUE(events.recordStreams.empty()) << "a record on the destroyed stream's placeholder";
}

TEST_F(PoolTest, AnEndedContextsBlocksAreFreeAndItsFencesNeverRecordedAgain) {
  // Context B frees a block on its stream 0x300 and fences it (another
  // stream of B asks for a block of that size while the GPU is behind).
  events.current = kCtxB;
  const CUdeviceptr p = alloc(0x300, kCtxB);
  pool.freeAsync(p, 0x300, kCtxB);
  EXPECT_NE(alloc(0x301, kCtxB), p);
  ASSERT_EQ(events.recorded.size(), 1u);
  const CUevent bFence = events.recorded[0];
  // B ends (its work done, its streams and events gone); A is current again.
  events.contextIds.erase(kCtxB);
  events.current = kCtxA;
  pool.contextsMayHaveEnded();
  events.recordStreams.clear();
  events.recorded.clear();
  EXPECT_EQ(alloc(0x100, kCtxA), p) << "the ended context finished the block's stream";
  // A's own fences are made in A: B's event is never recorded again (its
  // handle may be a new event of the program's).
  const CUdeviceptr q = alloc(0x100, kCtxA);
  pool.freeAsync(q, 0x100, kCtxA);
  EXPECT_NE(alloc(0x101, kCtxA), q);
  ASSERT_EQ(events.recordStreams, std::vector<uint64_t>{0x100});
  EXPECT_NE(events.recorded[0], bFence);
}

TEST_F(PoolTest, ASpareFenceOfAnotherContextIsNotUsed) {
  // In context B: p freed on 0x300 and fenced (E1) for 0x301; reused there
  // once E1 completed; freed on 0x300 again and fenced anew (E2): E1 is spare.
  events.current = kCtxB;
  const CUdeviceptr p = alloc(0x300, kCtxB);
  pool.freeAsync(p, 0x300, kCtxB);
  EXPECT_NE(alloc(0x301, kCtxB), p);
  gpuCaughtUp();
  ASSERT_EQ(alloc(0x301, kCtxB), p);
  pool.freeAsync(p, 0x300, kCtxB);
  alloc(0x301, kCtxB);
  ASSERT_EQ(events.recorded.size(), 2u);
  const CUevent e1 = events.recorded[0];
  // Context A needs a fence: a new event of A's, not B's spare E1.
  events.current = kCtxA;
  const CUdeviceptr q = alloc(0x100, kCtxA);
  pool.freeAsync(q, 0x100, kCtxA);
  events.recorded.clear();
  EXPECT_NE(alloc(0x101, kCtxA), q);
  ASSERT_EQ(events.recorded.size(), 1u);
  EXPECT_NE(events.recorded[0], e1);
  // Back in B, the spare is B's to use.
  events.current = kCtxB;
  pool.freeAsync(alloc(0x300, kCtxB), 0x300, kCtxB);
  events.recorded.clear();
  alloc(0x301, kCtxB);
  ASSERT_EQ(events.recorded.size(), 1u);
  EXPECT_EQ(events.recorded[0], e1);
}

TEST_F(PoolTest, ZeroBytesAreTheDriversToJudge) {
  CUdeviceptr p = 0;
  EXPECT_FALSE(pool.allocate(0, 0x100, kCtxA, &p));
}

}  // namespace
}  // namespace graft::pool
