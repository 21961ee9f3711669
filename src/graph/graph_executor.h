// GraphExecutor: the core::Executor on the real (or simulated) driver.
//
// build(): re-issues a segment's recorded ops into graft's own capture streams
// (one per program stream, non-blocking, forked and joined with graft's own
// events, never a program stream), instantiates the graph and remembers, per
// op, the node it became (cuStreamGetCaptureInfo right after the op).
// The program's event records, and its waits on events recorded before the
// segment, become external event nodes where the program issued them; a
// segment on several streams (the legacy stream not among them) is launched
// on graft's own stream, each branch waiting for its own program stream only
// and each program stream waiting for its own branch only (GraphHandle).
// launch(): patches differing nodes, then launches on the segment's launch
// stream with the stream and event bookkeeping of DESIGN.md §2.5. With
// asyncLaunch, launch() copies what the launch needs into a job and returns;
// graft's launch thread (LaunchWorker) runs the jobs in order, and every
// other member waits for the queued jobs first (drain), so nothing graft or
// the program issues can overtake a launch queued before it. A job that fails
// there is issued eagerly, op by op, from the graph's own copy of its
// segment, and reported by drain().
//
// Threading: used under the engine lock only; the launch thread touches only
// its jobs and the graphs they name (never the kernel registry). Calls the
// driver through the real pointers (never through graft's wrappers). build()
// allocates; issue() and launch() do not in steady state.
#pragma once

#include <atomic>
#include <cuda.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/executor.h"
#include "core/stage_clock.h"
#include "graph/copy_kernels.h"
#include "graph/kernel_registry.h"
#include "hook/driver_api.h"
#include "graph/launch_worker.h"
#include "pool/device_pool.h"

namespace graft::graph {

class GraphExecutor final : public core::Executor {
 public:
  // `pool` (may be null) serves the program's stream-ordered allocations; the
  // frees the engine deferred go back to it rather than to the driver.
  // asyncLaunch: run launches on graft's launch thread, which first calls
  // onLaunchThread (may be null), spins up to launchSpinMicros while idle when
  // launches come that close together, and polls every launchPollMicros while
  // idle (LaunchWorker).
  GraphExecutor(KernelRegistry& kernels, pool::DevicePool* pool, bool asyncLaunch,
                void (*onLaunchThread)(), unsigned launchPollMicros, unsigned launchSpinMicros);
  ~GraphExecutor() override;

  int issue(const core::OpDesc& op) override;
  bool isStickyError(int rc) const override { return rc > 0 && graft::hook::isStickyError(CUresult(rc)); }
  core::GraphHandle* build(const core::BuildRequest& request, std::string* whyNot) override;
  const core::ForkCandidate* forkCandidate(const core::GraphHandle* graph) override;
  int launch(core::GraphHandle* graph, const core::OpRange& ops,
             std::span<const uint32_t> patch, bool onJoinStream, std::string* whyNot) override;
  void drain(std::vector<core::FailedLaunch>* failed) override;
  void expectLaunch() override { launch_inline_ = launchThread(); }
  // Benchmark-only (GRAFT_MODE=match): launches and eager kernels, memsets
  // and copies are dropped after all of graft's own work on them.
  void setDryRun(bool on) { dry_run_ = on; }
  void destroy(core::GraphHandle* graph) override;
  void destroyEvent(uint64_t event, uint64_t domain) override;
  void freeAsync(uint64_t pointer, core::StreamKey stream, uint64_t domain) override;
  bool freeBehindQueuedLaunches(uint64_t pointer, core::StreamKey stream, uint64_t domain) override;
  uint64_t domainOf(const core::OpDesc& op) override;
  bool pendsLegacyQuery(core::StreamKey stream, uint64_t context) override {
    return stream != core::kPerThreadStream && isBlocking(stream) &&
           reinterpret_cast<uint64_t>(streamContext(stream)) == context;
  }
  uint64_t contextOfEventOp(const core::OpDesc& op) override;
  void forgetKernels() override;
  std::string describe(const core::OpDesc& op) override;
  std::string describeDifference(const core::OpDesc& expected, const core::OpDesc& actual) override;

  // Every event node holding `event` gets its placeholder back before the
  // driver destroys it (the driver refuses to set a node's event once the
  // event it holds is destroyed, measured on an H100), and a later event that
  // gets this handle is set into nodes again.
  void forgetEvent(uint64_t event) override;

  // Stream-ordered frees put behind queued launches so far (freeBehindQueuedLaunches).
  uint64_t freesQueued() const { return frees_queued_.load(std::memory_order_relaxed); }
  bool freesPending() const override { return !frees_pending_.empty(); }
  bool launchesHalted() const override { return launchThread() && worker_->halted(); }

  // The launch thread so far; false without one.
  bool launchThreadStats(LaunchWorkerStats* out) const {
    if (!worker_) return false;
    *out = worker_->stats();
    return true;
  }

  // Adds the node updates of every graph's launches so far to the kernel
  // registry's per-kernel counts (the report's kernels_patched). Waits for
  // queued launches.
  void countPatches();

  // Whether a graph launch queued on the launch thread, and not yet done,
  // updates a kernel node of `a` or `b` (a kernel's handles; null: none) that
  // asks for more than `sharedMem` bytes of dynamic shared memory: the driver
  // refuses that update once the kernel's allowance is lowered to that (a
  // graph launch is not checked), so it must reach the driver first. Under
  // the engine lock; never blocks.
  bool queuedLaunchNeedsSharedMem(CUfunction a, CUfunction b, uint32_t sharedMem);

  // A program stream was destroyed: forget what was cached about it.
  void forgetStream(CUstream stream) {
    waitForLaunches();
    blocking_.erase(reinterpret_cast<uint64_t>(stream));
    stream_ctx_.erase(reinterpret_cast<uint64_t>(stream));
    stream_regular_ctx_.erase(reinterpret_cast<uint64_t>(stream));
  }
  // The program created `stream` in `ctx` (its handle may be a destroyed
  // stream's that graft did not see go): what was cached about it is the new one's.
  void noteStreamCreated(CUstream stream, CUcontext ctx) {
    blocking_.erase(reinterpret_cast<uint64_t>(stream));
    stream_regular_ctx_.erase(reinterpret_cast<uint64_t>(stream));
    stream_ctx_[reinterpret_cast<uint64_t>(stream)] = ctx;
  }
  // A program stream's context (null for the legacy and the calling thread's
  // per-thread key, and for a stream the driver does not know). Cached until
  // the stream is destroyed or created again; calls the driver once per stream.
  // Under the engine lock.
  CUcontext streamContext(core::StreamKey key);
  // For a green context's stream, the primary context it was made from
  // (cuStreamGetCtx_v2), whose events the driver records on it; else
  // streamContext(key). Cached alike; under the engine lock.
  CUcontext streamRegularContext(core::StreamKey key);

 private:
  struct ContextPool {
    std::vector<CUstream> streams;
    std::vector<CUevent> events;
  };
  CUstream captureStream(ContextPool& pool, size_t index, CUresult* status);
  CUevent captureEvent(ContextPool& pool, size_t index, CUresult* status);
  void dropPool(CUcontext ctx);
  bool isBlocking(core::StreamKey stream);

  // A stream-ordered free put behind the queued launches: issued, in the
  // context of the program's call, after them (by the launch thread, after
  // the next launch queued; or by the program's thread once it waited for
  // the launches, before anything it issues next).
  struct PendingFree {
    uint64_t pointer;
    core::StreamKey stream;
    CUcontext ctx;
  };
  // Issues `frees` in order and clears it (either thread; the vector keeps
  // its capacity).
  static void issueFrees(std::vector<PendingFree>& frees);
  static void issueFree(const PendingFree& free);

  // One graph launch, with copies of what differs from the graph's own copy
  // of its segment: the patched ops' value bytes and the program's events;
  // and the frees made since the launch queued before it, issued after it.
  struct LaunchJob {
    core::GraphHandle* graph = nullptr;
    std::vector<uint32_t> patchOps;      // op index of each patch
    std::vector<uint32_t> patchOffsets;  // where its value bytes start in `bytes`
    std::vector<uint8_t> bytes;
    std::vector<uint64_t> events;        // per event op of the graph, in op order
    std::vector<void*> pointers;         // scratch: kernel parameter pointers
    std::string failure;                 // why its launch failed on the launch thread
    std::vector<PendingFree> frees;      // issued after the launch (empty once issued)
    bool onJoinStream = false;           // see Executor::launch
  };
  int runLaunch(LaunchJob& job, std::string* why);
  // After a launch failed on the launch thread: issues that job and, in order,
  // every job queued after it (eagerly when its graph failed before).
  void takeOverAfterFailure();
  // Issues the job's instance eagerly, op by op (its patches applied to the
  // graph's instance copy first).
  int reissueInstance(const LaunchJob& job);
  // The graph's copy of op k with the job's event handle (value bytes as the
  // instance copy holds them).
  static core::OpDesc instanceOp(const LaunchJob& job, uint32_t k);
  void applyToInstance(const LaunchJob& job);
  void countPatches(core::GraphHandle* graph);
  bool launchThread() const { return worker_ && LaunchWorker<LaunchJob>::usable(); }
  // Every queued launch is in the driver's queues, and every free put behind
  // them too.
  // waitForLaunches' wait, out of line (the per-op path only tests idle()).
  void waitForQueuedLaunches();
  void waitForLaunches() {
    if (launchThread() && !worker_->idle()) [[unlikely]] waitForQueuedLaunches();
    if (!frees_pending_.empty()) [[unlikely]] issueFrees(frees_pending_);
  }

  KernelRegistry& kernels_;
  pool::DevicePool* pool_;
  std::unique_ptr<LaunchWorker<LaunchJob>> worker_;
  LaunchJob sync_job_;                         // without the launch thread
  // Frees put behind the queued launches since the last launch was queued
  // (program's thread, under the engine's lock); the next queued launch
  // takes them.
  std::vector<PendingFree> frees_pending_;
  std::atomic<uint64_t> frees_queued_{0};  // written under the engine's lock, read by the report
  bool dry_run_ = false;
  std::vector<uint32_t> dry_run_patch_;
  bool launch_inline_ = false;  // the next launch follows a host barrier: run it here
  std::vector<core::FailedLaunch> failed_;     // launches that failed there, not yet reported
  std::unordered_map<CUcontext, ContextPool> pools_;
  std::unordered_map<uint64_t, bool> blocking_;
  // The context of each program stream seen at build time (cuStreamGetCtx).
  std::unordered_map<uint64_t, CUcontext> stream_ctx_;
  std::unordered_map<uint64_t, CUcontext> stream_regular_ctx_;  // streamRegularContext
  // The context an op runs in: a program stream's (known to the driver), else
  // the op's own, else its stream's (null if none).
  CUcontext runContext(const core::OpDesc& op);
  // `ctx` when set (and remembered), else the last context graft used.
  CUcontext orLastContext(CUcontext ctx);
  std::vector<void*> params_;
  CopyKernels copy_kernels_;
  CUcontext last_ctx_ = nullptr;
  // The graphs with event nodes (forgetEvent); changed with no launch queued.
  std::vector<core::GraphHandle*> graphs_with_event_nodes_;
  std::vector<core::GraphHandle*> graphs_;  // every graph built and not destroyed
};

}  // namespace graft::graph
