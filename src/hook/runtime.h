// Runtime: the process-wide state of the preloaded library — options, the
// real driver, the engine and its executor, counters — and its lifetime.
//
// Options are parsed and the log opened at load (library constructor); the
// real driver is found and the engine created on first use of the CUDA driver
// (never in processes that do not use CUDA); the exit report is written from
// an atexit handler registered at that point.
//
// Threading: Runtime::get() is safe from any thread after initialization;
// engine state is protected by engine().lock(). Counters are relaxed atomics.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "config/options.h"
#include "core/engine.h"
#include "graph/graph_executor.h"
#include "graph/kernel_registry.h"
#include "graph/op_codec.h"
#include "hook/driver_api.h"
#include "pool/device_pool.h"

namespace graft::hook {

// What an UNLOADS call ends: a module, a library, or (kind Everything: a
// context, or a call graft forwards without decoding it) all code.
struct UnloadedCode {
  enum Kind { Everything, Module, Library } kind = Everything;
  uint64_t handle = 0;
};

class Runtime {
 public:
  // The options snapshot (valid from library load on).
  static const config::Options& options();
  // False when GRAFT_DISABLE=1, when the driver could not be set up, and in a
  // child process forked after graft began to start: every wrapper then
  // forwards straight to the driver.
  static bool active() { return g_hook.active.load(std::memory_order_relaxed); }
  // A child forked after graft began to start: graft stays off in it, and not
  // even driver lookups go through graft's tables (whose locks a thread of the
  // parent may have held at the fork).
  static bool forkedChild() { return g_hook.forkedChild.load(std::memory_order_relaxed); }
  // Finds the real driver (through `libcudaHint` if it is a handle of it) and
  // creates the engine, once. Safe to call from any thread, any number of times.
  static void ensureStarted(void* libcudaHint);
  // Valid once started and active.
  static Runtime& get() { return *g_hook.runtime; }

  core::Engine& engine() { return *engine_; }
  graph::GraphExecutor& executor() { return *executor_; }
  graph::KernelRegistry& kernels() { return kernels_; }
  graph::OpEncoder& encoder() { return encoder_; }
  // Stable while engine().lock() is held (a benchmark switch changes it under
  // that lock).
  config::Mode mode() const { return mode_.load(std::memory_order_relaxed); }
  // Benchmark-only (GRAFT_BENCH_SWITCH=1 with GRAFT_MODE=graph): switches
  // between graph, passthrough and swallow at run time so a harness can time
  // the variants interleaved in one process. Leaving graph mode issues every
  // held op first. Returns false, with a logged reason, when not allowed or
  // the name is unknown. Takes the engine lock; may call the driver.
  bool switchModeForBenchmark(std::string_view name);
  // False until the first stream-ordered op with a context current: then
  // settleStart() (under the engine lock) reads CUDA_LAUNCH_BLOCKING again,
  // since the driver reads it when it creates a context, which a program may
  // do after setting it later than graft started; on, graph mode becomes
  // passthrough as at start. (A value set before a context is created and
  // unset before the first op, or set only before a second context, is not
  // seen: README, Limits.) Calls the driver; logs a warning.
  bool startSettled() const { return start_settled_; }
  void settleStart();
  // The private pool (GRAFT_POOL=1), or null.
  pool::DevicePool* pool() { return pool_.get(); }

  void countClass(ApiClass c) {
    class_counts_[size_t(c)].fetch_add(1, std::memory_order_relaxed);
  }
  // The program obtained a driver function graft cannot follow (a program
  // capture under an unknown ABI, or no flushing forwarder left): graft can no
  // longer see every op, so it stops replaying.
  void noteUnwrapped(std::string_view name, int requestedVersion);

  // The real cuGetProcAddress_v2 / cuGetProcAddress and the real dlsym.
  static PFN_cuGetProcAddress_v12000 realGetProcAddress();

  // The program is about to unload code or destroy a context (an UNLOADS
  // function, wrapped or forwarded), after the host barrier before it: graft
  // forgets the graphs with kernels of that code and what it learned of those
  // kernels (of every kernel, for Everything), or, at teardown, stops
  // replaying without touching its graphs. Calls the driver (before the
  // unload: the handles are still valid). Call with engine().lock() held.
  void codeUnloading(UnloadedCode code = UnloadedCode{});
  // The program changed a kernel attribute that changes what the kernel's
  // launches do or whether the driver takes them (a required cluster shape,
  // the permission for non-portable cluster sizes, a cache preference, the
  // pre-4.0 launch API's state), right after a host barrier: graphs with the
  // kernel (named by any of its handles) were made under the old value, so
  // they are dropped, and built again when their runs repeat. Call with
  // engine().lock() held. Allocates.
  void kernelAttributeChanged(CUfunction handle);
  // The same for every kernel (`why`, for the log: the context's cache
  // preference or one of its limits changed).
  void everyKernelAttributeChanged(std::string_view why);
  // Whether `value` differs from the cache preference the program last set
  // through `key` (a function, or a kernel and device; the driver reads none
  // back): true for a key not set before, or since code was unloaded
  // (codeUnloading: handles may be reused). noteCachePreference records one
  // the driver took. Call with engine().lock() held. The note allocates.
  bool cachePreferenceDiffers(uint64_t key, int value) const;
  void noteCachePreference(uint64_t key, int value) { cache_preferences_[key] = value; }

  void writeExitReport();
  // Set (under the engine lock) once the exit report is written.
  bool exiting() const { return exiting_; }

  // The first sticky error a call returned (hook::isStickyError), or
  // CUDA_SUCCESS: from then on graft's pool serves nothing, and a pool
  // block's free answers it, as the driver answers every call. Any thread.
  // (Also one graft's own calls got: Engine::stickyErrorCode.)
  CUresult stickyError() const {
    const int r = sticky_error_.load(std::memory_order_relaxed);
    return CUresult(r ? r : engine_->stickyErrorCode());
  }
  void noteStickyError(CUresult r) {
    int none = CUDA_SUCCESS;
    sticky_error_.compare_exchange_strong(none, int(r), std::memory_order_relaxed);
  }

 private:
  explicit Runtime(config::Mode startMode);


  // Per-op fields first, together (core/hot_path.h): a launch reads the mode,
  // the engine, the kernel index (first in KernelRegistry) and counts its
  // class (launches first), all in the first cache line. (The Runtime is never
  // destroyed; were it, engine_ would have to go before executor_.)
  alignas(64) std::atomic<config::Mode> mode_;
  bool start_settled_ = false;  // settleStart() ran (under the engine lock); in mode_'s padding
  core::HotPtr<core::Engine> engine_;
  graph::KernelRegistry kernels_;  // 32 bytes (see KernelRegistry::Entries)
  std::atomic<uint64_t> class_counts_[size_t(ApiClass::Count)] = {};
  graph::OpEncoder encoder_;
  std::unique_ptr<pool::DevicePool> pool_;
  std::unique_ptr<graph::GraphExecutor> executor_;
  std::atomic<bool> unwrapped_noted_{false};
  std::atomic<int> sticky_error_{CUDA_SUCCESS};
  bool exiting_ = false;
  const config::Mode start_mode_;
  std::unordered_map<uint64_t, int> cache_preferences_;  // cachePreferenceDiffers
};

// True for an address inside libgraft itself (e.g. one of its exports).
bool insideGraft(const void* address);

// Set while graft itself is running on this thread: its own driver calls (and
// anything the driver calls back) are forwarded untouched.
// constinit: no dynamic initialization, so no TLS wrapper call per access.
extern thread_local constinit bool t_inGraft __attribute__((tls_model("initial-exec")));

// A nonzero number per thread that submits ops (core::Engine::noteSubmitter),
// given on its first call. Any thread; no allocation.
extern thread_local constinit uint32_t t_submitter __attribute__((tls_model("initial-exec")));
uint32_t firstSubmitterToken();
inline uint32_t submitterToken() {
  const uint32_t t = t_submitter;
  return t ? t : firstSubmitterToken();
}

}  // namespace graft::hook
