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
  std::atomic<CUstream> stream{nullptr};  // set once, before `key` is handed out
  CUcontext context = nullptr;
  CUevent entry = nullptr;                // recorded on the per-thread stream (bridge)
  CUevent exit = nullptr;                 // recorded on the proxy (join)
  std::atomic<bool> joinPending{false};   // graft issued on the proxy since the last join
  bool bridgePending = true;              // owner only: the stream got work directly since the last bridge
};

// Slot 0 is never used (perThreadKey(0) would be no different from a free slot).
constinit Proxy g_proxies[PerThreadStreams::kSlots];
constinit std::atomic<uint32_t> g_used{1};        // slots handed out, slot 0 included
constinit std::atomic<uint32_t> g_generation{0};  // bumped by retireAll
constinit std::mutex g_create;
constinit std::atomic<bool> g_enabled{false};

// The calling thread's proxies, one per context it used its stream in.
struct Owned {
  uint32_t generation = 0;
  unsigned count = 0;
  CUcontext context[4] = {};
  uint32_t slot[4] = {};
};
thread_local Owned t_mine;

Proxy* proxyAt(core::StreamKey key) {
  if (!core::isPerThreadKey(key)) return nullptr;
  const uint32_t slot = core::perThreadSlot(key);
  if (slot == 0 || slot >= g_used.load(std::memory_order_acquire)) return nullptr;
  return &g_proxies[slot];
}

// The calling thread's proxy in `ctx`, or nullptr (none yet, or retired).
Proxy* mineIn(CUcontext ctx) {
  if (t_mine.generation != g_generation.load(std::memory_order_relaxed)) return nullptr;
  for (unsigned i = 0; i < t_mine.count; ++i)
    if (t_mine.context[i] == ctx) return &g_proxies[t_mine.slot[i]];
  return nullptr;
}

CUcontext currentContext() {
  CUcontext ctx = nullptr;
  real<ApiId::k_cuCtxGetCurrent_4000>()(&ctx);
  return ctx;
}

}  // namespace

thread_local unsigned PerThreadStreams::t_owned_ = 0;

void PerThreadStreams::enable() { g_enabled.store(true, std::memory_order_relaxed); }

core::StreamKey PerThreadStreams::keyFor(CUcontext ctx) {
  if (!ctx || !g_enabled.load(std::memory_order_relaxed)) return core::kPerThreadStream;
  const uint32_t generation = g_generation.load(std::memory_order_relaxed);
  if (t_mine.generation != generation) {
    t_mine = Owned{};
    t_mine.generation = generation;
    t_owned_ = 0;
  }
  for (unsigned i = 0; i < t_mine.count; ++i)
    if (t_mine.context[i] == ctx) return core::perThreadKey(t_mine.slot[i]);
  if (t_mine.count == std::size(t_mine.context)) return core::kPerThreadStream;
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
  if (r != CUDA_SUCCESS) {
    GRAFT_DEBUG("no proxy stream for a per-thread default stream (error {}); its ops run eagerly", int(r));
    if (p.entry) real<ApiId::k_cuEventDestroy_4000>()(p.entry);
    if (stream) real<ApiId::k_cuStreamDestroy_4000>()(stream);
    p.entry = p.exit = nullptr;
    return core::kPerThreadStream;
  }
  p.context = ctx;
  p.bridgePending = true;
  p.stream.store(stream, std::memory_order_relaxed);
  g_used.store(slot + 1, std::memory_order_release);
  t_mine.context[t_mine.count] = ctx;
  t_mine.slot[t_mine.count] = slot;
  ++t_mine.count;
  t_owned_ = t_mine.count;
  return core::perThreadKey(slot);
}

CUstream PerThreadStreams::proxyOf(core::StreamKey key) {
  Proxy* p = proxyAt(key);
  if (!p) return nullptr;
  p->joinPending.store(true, std::memory_order_release);
  return p->stream.load(std::memory_order_relaxed);
}

void PerThreadStreams::noteIssued(core::StreamKey key) {
  if (Proxy* p = proxyAt(key)) p->joinPending.store(true, std::memory_order_release);
}

CUcontext PerThreadStreams::contextOf(core::StreamKey key) {
  Proxy* p = proxyAt(key);
  return p ? p->context : nullptr;
}

void PerThreadStreams::bridgeIfPending(core::StreamKey key) {
  Proxy* p = proxyAt(key);
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
  if (p->joinPending.exchange(false, std::memory_order_acq_rel)) {
    const CUstream proxy = p->stream.load(std::memory_order_relaxed);
    if (real<ApiId::k_cuEventRecord_2000>()(p->exit, proxy) == CUDA_SUCCESS)
      real<ApiId::k_cuStreamWaitEvent_3020>()(CU_STREAM_PER_THREAD, p->exit, 0);
    else  // the order cannot be carried over: wait for the proxy's work here
      real<ApiId::k_cuStreamSynchronize_2000>()(proxy);
  }
  if (issues) p->bridgePending = true;
}

void PerThreadStreams::noteDirectWork() {
  if (t_owned_ == 0) return;
  if (Proxy* p = mineIn(currentContext())) p->bridgePending = true;
}

void PerThreadStreams::retireAll() {
  std::lock_guard<std::mutex> lock(g_create);
  // Before the contexts go: what graft issued on a proxy and no thread has
  // joined yet is waited for here, so no join is owed to a stream that may
  // be gone. The proxies die with their contexts; their slots are not handed
  // out again, and each thread's next per-thread op gets a new key.
  for (uint32_t s = 1; s < g_used.load(std::memory_order_relaxed); ++s) {
    Proxy& p = g_proxies[s];
    if (!p.joinPending.exchange(false, std::memory_order_acq_rel)) continue;
    ContextScope scope(p.context);
    real<ApiId::k_cuStreamSynchronize_2000>()(p.stream.load(std::memory_order_relaxed));
  }
  g_generation.fetch_add(1, std::memory_order_relaxed);
}

size_t PerThreadStreams::count() { return g_used.load(std::memory_order_relaxed) - 1; }

}  // namespace graft::graph
