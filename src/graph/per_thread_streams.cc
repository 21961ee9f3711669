#include "graph/per_thread_streams.h"

#include <mutex>

#include "graph/context_scope.h"
#include "hook/driver_api.h"
#include "log/log.h"

namespace graft::graph {
namespace {

using hook::ApiId;
using hook::real;

struct Proxy {
  std::atomic<CUstream> stream{nullptr};  // set once, before its key is handed out
  CUcontext context = nullptr;
  int primaryOf = -1;                     // the device whose primary context `context` is, or -1
  CUevent entry = nullptr;                // recorded on the per-thread stream (bridge)
  CUevent exit = nullptr;                 // recorded on the proxy (join)
  // Non-blocking, in `context`: where `exit` is recorded after a graph's
  // branch without following legacy-stream work (issuedAfter).
  CUstream marker = nullptr;
  std::atomic<bool> joinPending{false};   // graft issued on the proxy since the last join
  // Work graft issued on the proxy (counted as proxyOf hands it out), and how
  // much of it `exit`'s last record follows (PerThreadStreams::issued).
  std::atomic<uint64_t> issues{0};
  std::atomic<uint64_t> exitCovers{0};
  std::atomic<bool> dead{false};          // its context ended: never named again
  bool bridgePending = true;              // owner only: the stream got work directly since the last bridge
};

// Slot 0 is never used (perThreadKey(0) would be no different from a free slot).
constinit Proxy g_proxies[PerThreadStreams::kSlots];
constinit std::atomic<uint32_t> g_used{1};  // slots handed out, slot 0 included
constinit std::mutex g_create;
constinit std::atomic<bool> g_enabled{false};

// The calling thread's proxies, one per context it used its stream in.
struct Owned {
  unsigned count = 0;
  uint32_t slot[4] = {};
};
thread_local Owned t_mine;
// The last context this thread found to be a green context's (cuCtxFromGreenCtx),
// whose per-thread default stream the driver refuses (CUDA_ERROR_INVALID_HANDLE
// for every launch on an H100, driver 580: tests/gpu/traps_r21.cu,
// green_per_thread): no proxy there, so the driver answers each op.
thread_local CUcontext t_green = nullptr;

// Whether `ctx`, current, is a green context's.
bool isGreenContext(CUcontext ctx) {
  if (ctx == t_green) return true;
  auto getCtx2 = real<ApiId::k_cuStreamGetCtx_12050>();
  CUcontext regular = nullptr;
  CUgreenCtx green = nullptr;
  if (!getCtx2 || getCtx2(CU_STREAM_LEGACY, &regular, &green) != CUDA_SUCCESS || !green) return false;
  t_green = ctx;
  return true;
}

// A handed-out proxy, live or retired.
Proxy* proxyAt(core::StreamKey key) {
  if (!core::isPerThreadKey(key)) return nullptr;
  const uint32_t slot = core::perThreadSlot(key);
  if (slot == 0 || slot >= g_used.load(std::memory_order_acquire)) return nullptr;
  return &g_proxies[slot];
}

Proxy* liveAt(core::StreamKey key) {
  Proxy* p = proxyAt(key);
  return p && !p->dead.load(std::memory_order_acquire) ? p : nullptr;
}

// The calling thread's live proxy in `ctx`, or nullptr.
Proxy* mineIn(CUcontext ctx) {
  for (unsigned i = 0; i < t_mine.count; ++i) {
    Proxy* p = &g_proxies[t_mine.slot[i]];
    if (p->context == ctx && !p->dead.load(std::memory_order_acquire)) return p;
  }
  return nullptr;
}

CUcontext currentContext() {
  CUcontext ctx = nullptr;
  real<ApiId::k_cuCtxGetCurrent_4000>()(&ctx);
  return ctx;
}

// The device whose primary context `ctx` (current) is, or -1. Never creates
// a primary context: only an active one is retained (and released) to compare.
int primaryDeviceOf(CUcontext ctx) {
  CUdevice dev = 0;
  unsigned flags = 0;
  int active = 0;
  if (real<ApiId::k_cuCtxGetDevice_2000>()(&dev) != CUDA_SUCCESS) return -1;
  auto getState = real<ApiId::k_cuDevicePrimaryCtxGetState_7000>();
  if (!getState || getState(dev, &flags, &active) != CUDA_SUCCESS || !active) return -1;
  CUcontext primary = nullptr;
  if (real<ApiId::k_cuDevicePrimaryCtxRetain_7000>()(&primary, dev) != CUDA_SUCCESS) return -1;
  real<ApiId::k_cuDevicePrimaryCtxRelease_11000>()(dev);
  return primary == ctx ? int(dev) : -1;
}

// The join: the owner's per-thread stream (in p's context, current) waits for
// what graft issued on the proxy, through `exit`, recorded right after that
// work (PerThreadStreams::issued): recorded now, on the blocking proxy, it
// would also wait for legacy-stream work issued since, which the per-thread
// stream's earlier work never waits for.
void join(Proxy& p) {
  if (!p.joinPending.exchange(false, std::memory_order_acq_rel)) return;
  const CUstream proxy = p.stream.load(std::memory_order_relaxed);
  // Work issued with no record after it (not through issued()): recorded now.
  if (p.exitCovers.load(std::memory_order_acquire) != p.issues.load(std::memory_order_acquire) &&
      real<ApiId::k_cuEventRecord_2000>()(p.exit, proxy) != CUDA_SUCCESS) {
    real<ApiId::k_cuStreamSynchronize_2000>()(proxy);  // the order cannot be carried over: wait for it here
    return;
  }
  if (real<ApiId::k_cuStreamWaitEvent_3020>()(CU_STREAM_PER_THREAD, p.exit, 0) != CUDA_SUCCESS)
    real<ApiId::k_cuStreamSynchronize_2000>()(proxy);
}

}  // namespace

thread_local unsigned PerThreadStreams::t_owned_ = 0;

void PerThreadStreams::enable() { g_enabled.store(true, std::memory_order_relaxed); }

core::StreamKey PerThreadStreams::keyFor(CUcontext ctx) {
  if (!ctx || !g_enabled.load(std::memory_order_relaxed)) return core::kPerThreadStream;
  if (Proxy* p = mineIn(ctx)) return core::perThreadKey(uint32_t(p - g_proxies));
  if (isGreenContext(ctx)) return core::kPerThreadStream;
  // A place in this thread's list: a free one, or one whose proxy is dead.
  unsigned at = t_mine.count;
  for (unsigned i = 0; i < t_mine.count && at == t_mine.count; ++i)
    if (g_proxies[t_mine.slot[i]].dead.load(std::memory_order_acquire)) at = i;
  if (at == std::size(t_mine.slot)) return core::kPerThreadStream;
  std::lock_guard<std::mutex> lock(g_create);
  const uint32_t slot = g_used.load(std::memory_order_relaxed);
  if (slot >= kSlots) return core::kPerThreadStream;
  Proxy& p = g_proxies[slot];
  // In `ctx`, which is current: a blocking stream (it orders against the
  // legacy stream as the per-thread stream does) and two events.
  CUstream stream = nullptr;
  CUresult r = real<ApiId::k_cuStreamCreate_2000>()(&stream, CU_STREAM_DEFAULT);
  if (r == CUDA_SUCCESS) r = real<ApiId::k_cuEventCreate_2000>()(&p.entry, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = real<ApiId::k_cuEventCreate_2000>()(&p.exit, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = real<ApiId::k_cuStreamCreate_2000>()(&p.marker, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    GRAFT_DEBUG("no proxy stream for a per-thread default stream (error {}); its ops run eagerly", int(r));
    if (p.exit) real<ApiId::k_cuEventDestroy_4000>()(p.exit);
    if (p.entry) real<ApiId::k_cuEventDestroy_4000>()(p.entry);
    if (stream) real<ApiId::k_cuStreamDestroy_4000>()(stream);
    p.entry = p.exit = nullptr;
    p.marker = nullptr;
    return core::kPerThreadStream;
  }
  p.context = ctx;
  p.primaryOf = primaryDeviceOf(ctx);
  p.bridgePending = true;
  p.stream.store(stream, std::memory_order_relaxed);
  g_used.store(slot + 1, std::memory_order_release);
  t_mine.slot[at] = slot;
  if (at == t_mine.count) ++t_mine.count;
  t_owned_ = t_mine.count;
  return core::perThreadKey(slot);
}

CUstream PerThreadStreams::proxyOf(core::StreamKey key) {
  // A retired proxy too: work graft held for it is still ordered there (its
  // context may live on after a release that was not the last).
  Proxy* p = proxyAt(key);
  if (!p) return nullptr;
  p->issues.fetch_add(1, std::memory_order_acq_rel);
  p->joinPending.store(true, std::memory_order_release);
  return p->stream.load(std::memory_order_relaxed);
}

void PerThreadStreams::noteIssued(core::StreamKey key) {
  if (Proxy* p = liveAt(key)) {
    p->issues.fetch_add(1, std::memory_order_acq_rel);
    p->joinPending.store(true, std::memory_order_release);
  }
}

void PerThreadStreams::issued(core::StreamKey key) { issuedAfter(key, nullptr, nullptr); }

void PerThreadStreams::issuedAfter(core::StreamKey key, CUevent branchTail, CUevent lastRecord) {
  Proxy* p = proxyAt(key);
  if (!p) return;
  const uint64_t covers = p->issues.load(std::memory_order_acquire);
  ContextScope scope(p->context);
  const bool onMarker = branchTail && p->marker;
  if (onMarker && real<ApiId::k_cuStreamWaitEvent_3020>()(p->marker, branchTail, 0) != CUDA_SUCCESS) return;
  if (onMarker && lastRecord && real<ApiId::k_cuStreamWaitEvent_3020>()(p->marker, lastRecord, 0) != CUDA_SUCCESS)
    return;
  if (real<ApiId::k_cuEventRecord_2000>()(p->exit, onMarker ? p->marker : p->stream.load(std::memory_order_relaxed)) !=
      CUDA_SUCCESS)
    return;  // the join records it
  // (Two threads' records may store out of order: a lower count only makes
  // the join record again.)
  p->exitCovers.store(covers, std::memory_order_release);
}

CUresult PerThreadStreams::queryProxy() {
  if (t_owned_ == 0) return CUDA_SUCCESS;
  Proxy* p = mineIn(currentContext());
  if (!p || !p->joinPending.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  return real<ApiId::k_cuStreamQuery_2000>()(p->stream.load(std::memory_order_relaxed));
}

CUcontext PerThreadStreams::contextOf(core::StreamKey key) {
  Proxy* p = liveAt(key);
  return p ? p->context : nullptr;
}

void PerThreadStreams::bridgeIfPending(core::StreamKey key) {
  Proxy* p = liveAt(key);
  if (!p || !p->bridgePending) return;
  // The op's context is current: its key was made for it just now.
  const CUstream proxy = p->stream.load(std::memory_order_relaxed);
  if (real<ApiId::k_cuEventRecord_2000>()(p->entry, CU_STREAM_PER_THREAD) == CUDA_SUCCESS)
    real<ApiId::k_cuStreamWaitEvent_3020>()(proxy, p->entry, 0);
  else  // the order cannot be carried over: the proxy waits for everything before
    real<ApiId::k_cuStreamSynchronize_2000>(1)(nullptr);
  p->bridgePending = false;
}

void PerThreadStreams::beforeDriverCall(bool issues) {
  if (t_owned_ == 0) return;
  Proxy* p = mineIn(currentContext());
  if (!p) return;
  join(*p);
  if (issues) p->bridgePending = true;
}

void PerThreadStreams::joinAllOwned() {
  for (unsigned i = 0; i < t_mine.count; ++i) {
    Proxy& p = g_proxies[t_mine.slot[i]];
    if (p.dead.load(std::memory_order_acquire) || !p.joinPending.load(std::memory_order_acquire)) continue;
    ContextScope scope(p.context);
    join(p);
  }
}

PerThreadStreams::Proxies PerThreadStreams::proxiesOf(CUcontext ctx) {
  Proxies found;
  for (uint32_t s = 1; s < g_used.load(std::memory_order_acquire); ++s)
    if (g_proxies[s].context == ctx) found.set(s);
  return found;
}

PerThreadStreams::Proxies PerThreadStreams::proxiesOfPrimary(int device) {
  Proxies found;
  for (uint32_t s = 1; s < g_used.load(std::memory_order_acquire); ++s)
    if (g_proxies[s].primaryOf == device) found.set(s);
  return found;
}

PerThreadStreams::Proxies PerThreadStreams::proxiesOfAnyPrimary() {
  Proxies found;
  for (uint32_t s = 1; s < g_used.load(std::memory_order_acquire); ++s)
    if (g_proxies[s].primaryOf >= 0) found.set(s);
  return found;
}

void PerThreadStreams::retireIfEnded(const Proxies& proxies, int device, bool surely) {
  auto primaryActive = [](int dev) {
    unsigned flags = 0;
    int active = 0;
    auto getState = real<ApiId::k_cuDevicePrimaryCtxGetState_7000>();
    return getState && getState(CUdevice(dev), &flags, &active) == CUDA_SUCCESS && active;
  };
  for (uint32_t s = 1; s < kSlots && proxies.any(); ++s) {
    if (!proxies.test(s)) continue;
    Proxy& p = g_proxies[s];
    // A primary context's handle given to cuCtxDestroy may only drop a
    // reference: it ended only if no longer active.
    const int primary = device >= 0 ? device : p.primaryOf;
    const bool ended = surely && (device >= 0 || primary < 0) ? true : !primaryActive(primary);
    if (ended) p.dead.store(true, std::memory_order_release);
  }
}

void PerThreadStreams::endedUnknown() {
  // A context may have ended, which one is not known (a function outside
  // graft's table): what graft issued on a proxy and no thread has joined yet
  // is waited for here, so no join is owed to a stream that may be gone;
  // every proxy is retired.
  for (uint32_t s = 1; s < g_used.load(std::memory_order_acquire); ++s) {
    Proxy& p = g_proxies[s];
    if (p.dead.load(std::memory_order_acquire)) continue;
    if (p.joinPending.exchange(false, std::memory_order_acq_rel)) {
      ContextScope scope(p.context);
      real<ApiId::k_cuStreamSynchronize_2000>()(p.stream.load(std::memory_order_relaxed));
    }
    p.dead.store(true, std::memory_order_release);
  }
}

}  // namespace graft::graph
