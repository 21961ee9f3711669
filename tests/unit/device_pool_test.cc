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
    if (g_events->failRecords) return CUDA_ERROR_INVALID_HANDLE;
    g_events->recordedOn[e] = reinterpret_cast<uint64_t>(s);
    g_events->complete[e] = false;
    return CUDA_SUCCESS;
  };
  d.eventQuery = [](CUevent e) { return g_events->complete[e] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; };
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

TEST_F(PoolTest, ZeroBytesAreTheDriversToJudge) {
  CUdeviceptr p = 0;
  EXPECT_FALSE(pool.allocate(0, 0x100, kCtxA, &p));
}

}  // namespace
}  // namespace graft::pool
