#include "hook/generic_forward.h"

#include "graph/per_thread_streams.h"

#include <atomic>
#include <cstdint>
#include <mutex>

#include "core/hash.h"
#include "hook/runtime.h"
#include "log/log.h"

extern "C" void* graft_generic_trampolines[];
extern "C" uint64_t graft_generic_trampoline_count;

namespace graft::hook {
namespace {

// Zero- or constant-initialized only: a library's constructor may reach
// this before graft's own run (interpose.cc, kWrappers).
constexpr size_t kSlots = 64;
std::atomic<void*> g_real[kSlots];
std::atomic<uint8_t> g_traits[kSlots];  // UNLOADS and ENDS_CONTEXT of the row
size_t g_used = 0;
std::mutex g_mutex;

}  // namespace

void* flushingForwarder(void* real, std::string_view name, int version, uint8_t traits) {
  traits &= trait::UNLOADS | trait::ENDS_CONTEXT;
  const bool unloads = traits & trait::UNLOADS;
  std::lock_guard<std::mutex> guard(g_mutex);
  for (size_t i = 0; i < g_used; ++i) {
    if (g_real[i].load(std::memory_order_relaxed) == real) {
      g_traits[i].fetch_or(traits, std::memory_order_relaxed);
      return graft_generic_trampolines[i];
    }
  }
  if (g_used == kSlots || g_used >= graft_generic_trampoline_count) return nullptr;
  g_traits[g_used].store(traits, std::memory_order_relaxed);
  g_real[g_used].store(real, std::memory_order_release);
  GRAFT_DEBUG("{} (ABI asked for: {}): not decoded by graft; it flushes held work{} and is issued as the program "
              "asked", name, version, unloads ? " and makes graft forget its graphs" : "");
  return graft_generic_trampolines[g_used++];
}

bool looksStreamOrdered(std::string_view n) {
  auto starts = [n](std::string_view p) { return n.substr(0, p.size()) == p; };
  return n.find("Async") != std::string_view::npos ||
         n.find("Synchronize") != std::string_view::npos || starts("cuLaunch") ||
         starts("cuGraphLaunch") || starts("cuMemcpy") || starts("cuMemset") ||
         starts("cuStreamWait") || starts("cuStreamWrite") || starts("cuStreamBatchMemOp") ||
         starts("cuEventRecord") || starts("cuStreamBeginCapture") || starts("cuStreamEndCapture") ||
         n.find("RecordEvent") != std::string_view::npos || n.find("WaitEvent") != std::string_view::npos ||
         starts("cuEGLStreamProducer") || starts("cuEGLStreamConsumer");  // frames handed over on a stream
}

}  // namespace graft::hook

// Called by trampoline `index` (generic_trampoline.S) with the caller's
// arguments saved: issues everything held, returns the real function.
extern "C" __attribute__((visibility("hidden"))) void* graft_generic_enter(unsigned index) {
  using namespace graft::hook;
  void* real = g_real[index].load(std::memory_order_acquire);
  if (!t_inGraft && Runtime::active()) {
    t_inGraft = true;
    {
      Runtime& rt = Runtime::get();
      auto lock = rt.engine().lock();
      rt.engine().hostBarrier(graft::core::hashCombine(0xf1a5, index));
      // As the wrapper of an UNLOADS function does: the code or context goes
      // away with the handles graft's graphs name.
      if (g_traits[index].load(std::memory_order_relaxed) & trait::UNLOADS) rt.codeUnloading();
    }
    // Not under the engine lock: it may wait for the GPU.
    if (g_traits[index].load(std::memory_order_relaxed) & trait::ENDS_CONTEXT) {
      graft::graph::PerThreadStreams::endedUnknown();
      if (graft::pool::DevicePool* pool = Runtime::get().pool()) pool->contextsMayEnd();
    }
    // The call may name this thread's per-thread stream, whose held work
    // went to its proxy: that stream waits for it, and what graft issues
    // there later waits for the call's work (graph/per_thread_streams.h).
    graft::graph::PerThreadStreams::beforeDriverCall(true);
    t_inGraft = false;
  }
  return real;
}
