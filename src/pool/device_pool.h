// DevicePool: graft's private virtual-address pool (DESIGN.md §4), serving the
// program's stream-ordered allocations (cuMemAllocAsync) when GRAFT_POOL=1.
//
// It reserves one large virtual range and maps physical memory into it on
// demand (cuMemCreate/cuMemMap), in size classes. Freed blocks are reused
// last-in first-out, so a loop that allocates the same sizes every iteration
// gets the same addresses every iteration and its graphs need no patches.
//
// Stream-ordered reuse, never looser than the driver's own pool:
//  - a block freed on stream S is reusable at once by an allocation on S in
//    the same context (everything after the allocation on S runs after the
//    free; the legacy stream's key names every context's legacy stream);
//  - on another stream only after a fence event, recorded on S after the
//    free, has completed (a block freed on another context's legacy stream:
//    only there, or after a synchronize);
//  - a destroyed stream's blocks are fenced before it goes, and its handle,
//    which a new stream may get, no longer counts as theirs;
//  - once a context has ended (its work done, its streams and events gone,
//    their handles free for new ones), the blocks freed in it are reusable
//    anywhere, and its fence events are forgotten, never recorded again.
// freeAsync() must be called at the free's position in stream order (graft's
// engine defers a free past the ops it still holds before calling it).
//
// Threading: thread-safe (own mutex). Calls the driver through PoolDriver
// only. allocate/free never block on the GPU.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace graft::pool {

// The driver functions the pool uses (graft passes the real ones).
struct PoolDriver {
  PFN_cuMemGetAllocationGranularity_v10020 getGranularity = nullptr;
  PFN_cuMemAddressReserve_v10020 addressReserve = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemSetAccess_v10020 setAccess = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuCtxGetDevice_v2000 ctxGetDevice = nullptr;
  PFN_cuEventCreate_v2000 eventCreate = nullptr;
  PFN_cuEventRecord_v2000 eventRecord = nullptr;
  PFN_cuEventQuery_v2000 eventQuery = nullptr;
  // Optional: without them every context is taken to live for ever.
  PFN_cuCtxGetCurrent_v4000 ctxGetCurrent = nullptr;
  PFN_cuCtxGetId_v12000 ctxGetId = nullptr;
};

struct PoolStats {
  uint64_t reservedBytes = 0;
  uint64_t mappedBytes = 0;
  uint64_t inUseBytes = 0;
  uint64_t peakInUseBytes = 0;
  uint64_t allocations = 0;
  uint64_t reusedSameStream = 0;
  uint64_t reusedAfterFence = 0;
  uint64_t declined = 0;  // requests left to the driver (pool full or unavailable)
};

class DevicePool {
 public:
  DevicePool(const PoolDriver& driver, uint64_t reserveBytes) : driver_(driver), reserve_bytes_(reserveBytes) {}

  // Serves `bytes` (not 0: the driver's to judge) for use after the current
  // point of `stream`, an allocation made in context `ctx`. False when the
  // pool cannot (the caller then asks the driver).
  bool allocate(size_t bytes, uint64_t stream, uint64_t ctx, CUdeviceptr* out);
  bool owns(CUdeviceptr p) const;
  // The program's free, at its position in `stream`'s order, made in `ctx`.
  void freeAsync(CUdeviceptr p, uint64_t stream, uint64_t ctx);
  // `stream` is about to be destroyed (everything graft held on it issued):
  // its blocks get their fence now and are no longer its.
  void streamDestroyed(uint64_t stream);
  // A free after the device was synchronized: reusable by any stream at once.
  void freeNow(CUdeviceptr p);
  // A call that may have ended a context returned (cuCtxDestroy, a primary
  // context's reset or release): the contexts the pool knows that ended are
  // forgotten (see above). Calls the driver (cuCtxGetId).
  void contextsMayHaveEnded();
  // The same, checked at the pool's next call: a context-ending call is about
  // to be made (graft's generic forwarder runs before it). Any thread.
  void contextsMayEnd() { check_contexts_.store(true, std::memory_order_relaxed); }
  // The context a live block was allocated in (0: not a live block).
  uint64_t allocationContext(CUdeviceptr p) const;
  PoolStats stats() const;

 private:
  struct FreeBlock {
    CUdeviceptr ptr;
    uint64_t stream;   // freed in this stream's order (0: reusable anywhere)
    CUevent fence;     // recorded on `stream` after the free; null until fenced
    uint64_t ctx;      // the context of the free
  };
  struct Live {
    uint32_t sizeClass;
    uint64_t bytes;  // class size
    uint64_t ctx;    // the context of the allocation
  };
  bool initLocked();
  void contextsMayHaveEndedLocked();
  // Before serving: what contextsMayEnd() asked for.
  void checkContextsIfAskedLocked() {
    if (check_contexts_.exchange(false, std::memory_order_relaxed)) contextsMayHaveEndedLocked();
  }
  bool setUpLocked();
  uint32_t classOf(size_t bytes, uint64_t* classBytes) const;
  bool carveLocked(uint32_t cls, uint64_t classBytes, CUdeviceptr* out);
  bool mapLocked(uint64_t bytes, CUdeviceptr* out);
  // The latest fence after the frees on `stream` (for the legacy stream, on
  // context `ctx`'s), recorded now if frees came since.
  CUevent fenceFor(uint64_t stream, uint64_t ctx);
  // The current context (0: unknown), noted with its id in known_contexts_.
  uint64_t currentContextLocked();
  void noteContextLocked(uint64_t ctx);
  // The key of stream_fence_ and unfenced_: the stream, or for the legacy
  // stream, which every context has, its context (odd: no stream handle).
  static uint64_t fenceKey(uint64_t stream, uint64_t ctx) { return stream == kLegacyStream ? (ctx | 1) : stream; }
  // A destroyed stream's blocks (their handle may name a new stream).
  static constexpr uint64_t kDestroyedStream = ~uint64_t(0);
  static constexpr uint64_t kLegacyStream = 1;  // core::kLegacyStream
  void takeLocked(std::vector<FreeBlock>& list, size_t index, CUdeviceptr* out);

  PoolDriver driver_;
  uint64_t reserve_bytes_;
  mutable std::mutex mutex_;
  std::atomic<bool> check_contexts_{false};
  bool initialized_ = false;
  bool usable_ = false;
  CUdevice device_ = 0;
  size_t granularity_ = 0;
  CUdeviceptr base_ = 0;
  uint64_t next_ = 0;  // bump offset into the reserved range
  std::unordered_map<uint32_t, std::vector<FreeBlock>> free_;       // by size class
  std::unordered_map<uint32_t, std::pair<CUdeviceptr, uint64_t>> carving_;  // class -> chunk cursor, left
  std::unordered_map<CUdeviceptr, Live> live_;
  std::vector<CUevent> spare_events_;
  std::unordered_map<CUevent, uint64_t> event_context_;   // each fence event: the context it was made in
  std::unordered_map<uint64_t, uint64_t> known_contexts_;  // context handle -> its id (cuCtxGetId)
  std::unordered_map<uint64_t, CUevent> stream_fence_;  // per fenceKey: its latest fence
  std::unordered_map<uint64_t, uint64_t> unfenced_;     // per fenceKey: frees since that fence
  std::unordered_map<CUevent, uint32_t> fence_refs_;    // free blocks waiting on each fence
  PoolStats stats_;
};

}  // namespace graft::pool
