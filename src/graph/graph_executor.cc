#include "graph/graph_executor.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/hot_path.h"
#include "core/stage_clock.h"

#include <fmt/format.h>

#include "core/event_instances.h"
#include "core/launch_plan.h"
#include "graph/context_scope.h"
#include "graph/copy_kernels.h"
#include "graph/op_codec.h"
#include "graph/per_thread_streams.h"
#include "hook/driver_api.h"
#include "log/log.h"

namespace graft::core {

// An executable graph of one segment, and how to launch it.
struct GraphHandle {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CUcontext ctx = nullptr;
  std::vector<CUgraphNode> nodes;                   // per op; null for event ops
  std::vector<CUDA_KERNEL_NODE_PARAMS> kernelBase;  // per op; meaningful for kernels
  std::unordered_map<uint32_t, CUDA_MEMCPY3D> copyBase;
  std::unordered_map<uint32_t, CUDA_MEMSET_NODE_PARAMS> setBase;
  // Per op: a copy or memset captured as graft's kernel (graph/copy_kernels.h),
  // a kernel node whose base parameters are in kernelBase; and those ops'
  // indices (each launch checks their memory).
  std::vector<uint8_t> kernelForm;
  std::vector<uint32_t> kernelFormOps;
  // Launch plan (DESIGN.md §2.5), chosen at build:
  //  - one program stream: launched on it;
  //  - several streams (branched): launched on graft's own non-blocking stream
  //    (ownStream; it holds only this graph's launches, which the driver
  //    serializes anyway, a wait that is itself stricter than eager, see
  //    README Limits). Branch b starts with an external wait on
  //    entryEvents[b], recorded on its program stream right before the launch,
  //    and ends with an external record of tailEvents[b], which its program
  //    stream waits on right after the launch: each branch waits for what its
  //    program stream held before, and each program stream for its own branch
  //    only, as eagerly;
  //  - branched with a fork and join (core/launch_plan.h): launched on the
  //    program stream whose ops every other branch follows and whose last op
  //    follows every other branch, which then needs neither event (null).
  // The legacy stream's implicit synchronization with blocking streams carries
  // over through these records and waits (tests/gpu/driver_facts.cu, measured
  // on an H100): an entry record on the legacy stream completes after earlier
  // work on blocking streams, one on a blocking stream after earlier legacy
  // work, and a tail wait is work that later legacy (blocking) work waits for.
  // Inside the graph, the capture adds the same ordering as edges.
  CUstream launchStream = nullptr;
  CUstream ownStream = nullptr;          // branched: graft's stream, destroyed with the graph
  std::vector<CUstream> branchStreams;   // branched: the program stream of each branch
  // Per-thread streams among the program streams (their proxies are in
  // launchStream and branchStreams): each launch gives them work to join.
  std::vector<core::StreamKey> perThreadKeys;
  std::vector<int32_t> perThreadBranch;  // per perThreadKeys: its branch (branched), else -1
  std::vector<CUevent> entryEvents;      // branched: per branch; null for a launch stream of the program's
  std::vector<CUevent> tailEvents;       // branched: per branch; null for a launch stream of the program's
  // branched: the order of the tail waits, the legacy stream's first: a wait
  // on a blocking stream does not wait for earlier legacy work, but a legacy
  // wait waits for the blocking streams' earlier work, tail waits included
  // (tests/gpu/driver_facts.cu), which would make the legacy stream wait for
  // every blocking stream's branch.
  std::vector<uint32_t> tailOrder;
  // The legacy stream among the streams: each other stream, and whether it was
  // blocking when the capture added edges for its implicit synchronization
  // with the legacy stream. A stream destroyed and created again under the
  // same handle may differ; launch() then refuses the graph.
  std::vector<std::pair<core::StreamKey, bool>> blockingAtBuild;
  // Launched on ownStream unless the engine finds that, for this instance,
  // the fork into the branches happened before the segment (see
  // core/launch_plan.h): then on branch joinsInto's program stream, which
  // waits for no tail event.
  int joinsInto = -1;
  core::ForkCandidate fork;
  // The program's event records, and its waits on events recorded before the
  // segment, are external event nodes where the program put them, captured
  // with graft's placeholder events. Before a launch the node gets the
  // instance's event (GraphExecutor::forgetEvent puts the placeholder back
  // before the program's event is destroyed).
  struct EventOp {
    uint32_t op;                    // index in the segment (LaunchJob::events follows this order)
    bool record;                    // a record, else a wait
    CUgraphNode node = nullptr;     // null: a wait on an event recorded inside the segment (an edge)
    CUevent placeholder = nullptr;  // graft's event the node was captured with
    CUevent holds = nullptr;        // the event the executable graph's node holds now
    // A record that is the last op of a branch with a tail event: its node
    // keeps its placeholder (edges to waits inside the segment stay), and the
    // program's record is issued on that branch's program stream right after
    // the stream's tail wait, so it completes when the stream has nothing
    // left, as eagerly (from the node, the tail record and the stream's wait
    // on it would still be pending: a query of the stream said
    // CUDA_ERROR_NOT_READY after the event completed). -1: none.
    int32_t tailBranch = -1;
    // Launch-time: a later record of the same event in the instance
    // supersedes this one. Only the last record of an event in a segment is
    // the program's; an earlier one serves waits inside the segment, which
    // are edges, so its node keeps its placeholder (two unordered record
    // nodes of one event would leave its latest record to the driver).
    bool superseded = false;
  };
  std::vector<EventOp> eventOps;  // every event op, in op order
  std::vector<int32_t> tailRecordOf;  // branched: per branch, the eventOps index of its tail record (-1: none)
  // Completion a host wait implies (branched, no legacy stream, at most 64
  // streams; else empty). A record issued after the graph completes after
  // the graph's own nodes: a program record node, or a branch's tail wait,
  // that followed it in the segment would complete first, and a host that
  // waited for that one would find the earlier record, or its stream, still
  // pending (tests/sim sim_review49_queries). So each branch, after the
  // graph, also waits for the records issued after the graph that its end
  // followed in the segment, in the order of the branches' last ops, and the
  // launch stream's last op, a record that follows any of them, is issued
  // after the graph too (its node keeps its placeholder).
  //   lastRecordOf[b]: eventOps index of branch b's last op if it is a
  //   record with a node (-1: none); endFollows[b]: the branches whose last
  //   record branch b's last op follows (bit per branch, b's own excluded);
  //   branchesByEnd: the branches in the order of their last ops.
  std::vector<int32_t> lastRecordOf;
  std::vector<uint64_t> endFollows;
  std::vector<uint32_t> branchesByEnd;
  int32_t launchBranch = -1;  // branched and launched on a program stream: its branch
  std::vector<uint32_t> recordOps;                           // indices into eventOps of the records
  std::vector<std::pair<uint64_t, uint32_t>> recordScratch;  // launch-time (event, index), reserved at build
  // Kernel parameter offsets of op i: paramOffsets[paramStart[i] .. paramStart[i + 1]).
  std::vector<uint32_t> paramStart;
  std::vector<uint32_t> paramOffsets;
  // The segment's ops with the values the engine believes the executable
  // graph holds (each queued instance's patches applied in order, whether its
  // launch succeeded or not), to issue an instance eagerly if its launch fails.
  OpBuffer instance;
  // A launch of it failed: it may hold some of its updates only, so it is
  // never launched again (launch() refuses it).
  bool broken = false;
  // Benchmark-only: a dry-run launch (GraphExecutor::setDryRun) skipped its
  // updates, so the graph may differ from the segment in any op.
  bool dryRunSkipped = false;
  // Node updates per op, for the report: counted where the updates are made
  // (the launch thread), added to the kernel registry's counts under the
  // engine lock with no launch queued (GraphExecutor::countPatches), so the
  // program's thread reads no kernel entry per update.
  std::vector<uint32_t> nodeUpdates;
};

}  // namespace graft::core

namespace graft::graph {

using core::GraphHandle;
using core::OpDesc;
using core::OpKind;
using hook::ApiId;
using hook::real;

namespace {

std::string errorName(CUresult r) {
  const char* name = nullptr;
  if (auto f = real<ApiId::k_cuGetErrorName_6000>()) f(r, &name);
  return name ? fmt::format("{} ({})", name, int(r)) : fmt::format("CUresult {}", int(r));
}

// The driver handle of a stream key. graft issues a per-thread default
// stream's held work on its proxy (graph/per_thread_streams.h); a retired
// proxy's key (its context is gone) names the calling thread's stream.
CUstream asStream(core::StreamKey key) {
  if (core::isPerThreadKey(key)) [[unlikely]] {
    const CUstream proxy = PerThreadStreams::proxyOf(key);
    return proxy ? proxy : CU_STREAM_PER_THREAD;
  }
  return reinterpret_cast<CUstream>(key);
}

CUresult recordOn(CUevent e, CUstream s) { return real<ApiId::k_cuEventRecord_2000>()(e, s); }
// Inside a capture: an event record node, which the program's streams and host
// can wait on after a launch (CU_EVENT_RECORD_EXTERNAL).
CUresult recordNodeOn(CUevent e, CUstream s) {
  return real<ApiId::k_cuEventRecordWithFlags_11010>()(e, s, CU_EVENT_RECORD_EXTERNAL);
}
CUresult waitOn(CUstream s, CUevent e, unsigned flags = 0) {
  return real<ApiId::k_cuStreamWaitEvent_3020>()(s, e, flags);
}

void destroyHandle(GraphHandle* g) {
  if (g->exec) real<ApiId::k_cuGraphExecDestroy_10000>()(g->exec);
  if (g->graph) real<ApiId::k_cuGraphDestroy_10000>()(g->graph);
  auto destroyEvent = real<ApiId::k_cuEventDestroy_4000>();
  for (const auto* list : {&g->entryEvents, &g->tailEvents})
    for (CUevent e : *list)
      if (e) destroyEvent(e);
  for (const GraphHandle::EventOp& e : g->eventOps)
    if (e.placeholder) destroyEvent(e.placeholder);
  // Launches still queued on it finish first (the driver releases it then).
  if (g->ownStream) real<ApiId::k_cuStreamDestroy_4000>()(g->ownStream);
  delete g;
}

// Puts `event` into the event node of `e` in executable graph `exec`.
CUresult setNodeEvent(CUgraphExec exec, const GraphHandle::EventOp& e, CUevent event) {
  return e.record ? real<ApiId::k_cuGraphExecEventRecordNodeSetEvent_11010>()(exec, e.node, event)
                  : real<ApiId::k_cuGraphExecEventWaitNodeSetEvent_11010>()(exec, e.node, event);
}

// Op k's node, a copy or a memset, gets `op`'s addresses (and value).
CUresult updateCopyNode(const GraphHandle& g, uint32_t k, const OpDesc& op) {
  if (g.kernelForm[k]) {
    CUDA_KERNEL_NODE_PARAMS params = g.kernelBase[k];
    CopyKernelArgs args(op);
    params.kernelParams = args.pointers;
    params.extra = nullptr;
    return real<ApiId::k_cuGraphExecKernelNodeSetParams_12000>()(g.exec, g.nodes[k], &params);
  }
  if (op.kind == OpKind::Memset) {
    CUDA_MEMSET_NODE_PARAMS params = g.setBase.at(k);
    const SetValue v = setValueOf(op);
    params.dst = v.dst;
    params.value = v.value;
    return real<ApiId::k_cuGraphExecMemsetNodeSetParams_10020>()(g.exec, g.nodes[k], &params, g.ctx);
  }
  CUDA_MEMCPY3D params = g.copyBase.at(k);
  const CopyValue v = copyValueOf(op);
  if (params.srcMemoryType == CU_MEMORYTYPE_HOST) params.srcHost = reinterpret_cast<const void*>(v.src);
  else params.srcDevice = v.src;
  if (params.dstMemoryType == CU_MEMORYTYPE_HOST) params.dstHost = reinterpret_cast<void*>(v.dst);
  else params.dstDevice = v.dst;
  return real<ApiId::k_cuGraphExecMemcpyNodeSetParams_10020>()(g.exec, g.nodes[k], &params, g.ctx);
}

}  // namespace

GraphExecutor::GraphExecutor(KernelRegistry& kernels, pool::DevicePool* pool, bool asyncLaunch,
                             void (*onLaunchThread)(), unsigned launchPollMicros,
                             unsigned launchSpinMicros)
    : kernels_(kernels), pool_(pool) {
  if (!asyncLaunch) return;
  frees_pending_.reserve(256);
  worker_ = std::make_unique<LaunchWorker<LaunchJob>>(
      [this](LaunchJob& job) {
        job.failure.clear();  // only a failure builds text
        const int rc = runLaunch(job, &job.failure);
        if (rc == 0) issueFrees(job.frees);  // else takeOverAfterFailure issues them after the instance
        return rc;
      },
      onLaunchThread, launchPollMicros, launchSpinMicros);
  if (!worker_->start()) {
    GRAFT_WARN("graft could not start its launch thread; graph launches run on the program's thread");
    worker_.reset();
  }
}

GraphExecutor::~GraphExecutor() = default;  // driver objects are left to process teardown

CUstream GraphExecutor::captureStream(ContextPool& pool, size_t index, CUresult* status) {
  while (pool.streams.size() <= index) {
    CUstream s = nullptr;
    *status = real<ApiId::k_cuStreamCreate_2000>()(&s, CU_STREAM_NON_BLOCKING);
    if (*status != CUDA_SUCCESS) return nullptr;
    pool.streams.push_back(s);
  }
  return pool.streams[index];
}

CUevent GraphExecutor::captureEvent(ContextPool& pool, size_t index, CUresult* status) {
  while (pool.events.size() <= index) {
    CUevent e = nullptr;
    *status = real<ApiId::k_cuEventCreate_2000>()(&e, CU_EVENT_DISABLE_TIMING);
    if (*status != CUDA_SUCCESS) return nullptr;
    pool.events.push_back(e);
  }
  return pool.events[index];
}

void GraphExecutor::dropPool(CUcontext ctx) {
  auto it = pools_.find(ctx);
  if (it == pools_.end()) return;
  for (CUstream s : it->second.streams) real<ApiId::k_cuStreamDestroy_4000>()(s);
  for (CUevent e : it->second.events) real<ApiId::k_cuEventDestroy_4000>()(e);
  pools_.erase(it);
}

bool GraphExecutor::isBlocking(core::StreamKey key) {
  if (key == core::kLegacyStream) return false;  // the legacy stream itself
  if (core::isPerThreadKey(key)) return true;    // a per-thread stream (and its proxy) is blocking
  auto it = blocking_.find(key);
  if (it != blocking_.end()) return it->second;
  unsigned flags = 0;
  // Not known (the driver did not say): taken for blocking, whose implicit
  // joins with the legacy stream only order more, and asked again next time.
  if (real<ApiId::k_cuStreamGetFlags_5050>()(asStream(key), &flags) != CUDA_SUCCESS) return true;
  const bool blocking = !(flags & CU_STREAM_NON_BLOCKING);
  blocking_.emplace(key, blocking);
  return blocking;
}

CUcontext GraphExecutor::orLastContext(CUcontext ctx) {
  if (ctx) last_ctx_ = ctx;
  return last_ctx_;
}

int GraphExecutor::issue(const OpDesc& op) {
  waitForLaunches();
  if (dry_run_ && op.kind != OpKind::EventRecord && op.kind != OpKind::EventWait) return 0;
  // An event op on a program stream carries no context: its stream's (another
  // thread, the idle flush, may have another one current, or none); else the
  // last context graft saw.
  ContextScope scope(orLastContext(runContext(op)));
  const int r = int(issueOp(op, asStream(op.stream), kernels_, params_));
  if (core::isPerThreadKey(op.stream)) [[unlikely]] PerThreadStreams::issued(op.stream);
  return r;
}

CUcontext GraphExecutor::runContext(const OpDesc& op) {
  // An op on a program stream runs in its stream's context, whatever was
  // current at the call: the driver runs a launch into a green context's
  // stream (cuGreenCtxStreamCreate) in that green context while the primary
  // context is current, and a library kernel (CUkernel) in the context of the
  // stream it is launched into. Captured in the context current at the call,
  // such a launch would run outside the green context's SMs
  // (tests/gpu/traps_r21.cu, green_partition_alone). An op on a default
  // stream runs in the context current at its call, which it carries; one
  // without a context of its own (an event op) in its stream's.
  if (!core::isDefaultStream(op.stream) && !core::isPerThreadKey(op.stream)) {
    if (CUcontext s = streamContext(op.stream)) return s;
  }
  CUcontext c = contextOf(op);
  return c ? c : streamContext(op.stream);
}

CUcontext GraphExecutor::streamContext(core::StreamKey key) {
  if (key == core::kLegacyStream || key == core::kPerThreadStream) return nullptr;
  if (core::isPerThreadKey(key)) return PerThreadStreams::contextOf(key);
  auto it = stream_ctx_.find(key);
  if (it != stream_ctx_.end()) return it->second;
  CUcontext c = nullptr;
  auto getCtx = real<ApiId::k_cuStreamGetCtx_9020>();
  if (!getCtx || getCtx(asStream(key), &c) != CUDA_SUCCESS) c = nullptr;
  stream_ctx_.emplace(key, c);
  return c;
}

CUcontext GraphExecutor::streamRegularContext(core::StreamKey key) {
  if (core::isDefaultStream(key) || core::isPerThreadKey(key)) return streamContext(key);
  auto it = stream_regular_ctx_.find(key);
  if (it != stream_regular_ctx_.end()) return it->second;
  CUcontext c = streamContext(key);
  CUcontext primary = nullptr;
  CUgreenCtx green = nullptr;
  auto getCtx2 = real<ApiId::k_cuStreamGetCtx_12050>();
  if (c && getCtx2 && getCtx2(asStream(key), &primary, &green) == CUDA_SUCCESS && green && primary) c = primary;
  stream_regular_ctx_.emplace(key, c);
  return c;
}

core::GraphHandle* GraphExecutor::build(const core::BuildRequest& req, std::string* why) {
  waitForLaunches();
  const auto& ops = req.ops;
  // A run built from ops recorded before their code was unloaded (the
  // history outlives an unload of some code) may name a handle no kernel
  // has now, or one another kernel got since, with another layout: never
  // put such a handle in a graph (its launch would run freed code).
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpDesc& op = ops[i];
    if (op.kind != OpKind::Kernel) continue;
    const KernelShape& ks = kernelShapeOf(op);
    const KernelInfo* info = kernels_.find(ks.func);
    if (!info || (ks.paramMode == kParamsArray && info->paramBytes != op.value.size)) {
      *why = "a kernel handle recorded before its code was unloaded";
      return nullptr;
    }
  }
  CUcontext ctx = nullptr;
  for (const OpDesc& op : ops) {
    CUcontext c = runContext(op);
    if (!c) continue;
    if (ctx && c != ctx) {
      *why = "the ops span several contexts";
      return nullptr;
    }
    ctx = c;
  }
  ctx = orLastContext(ctx);
  ContextScope scope(ctx);
  ContextPool& pool = pools_[ctx];

  auto g = std::make_unique<GraphHandle>();
  g->ctx = ctx;
  g->nodes.assign(ops.size(), nullptr);
  g->kernelBase.resize(ops.size());
  g->nodeUpdates.assign(ops.size(), 0);
  g->kernelForm.assign(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind != OpKind::Memcpy && ops[i].kind != OpKind::Memset) continue;
    g->kernelForm[i] = copy_kernels_.usable(ops[i], ctx);
    if (g->kernelForm[i]) g->kernelFormOps.push_back(uint32_t(i));
  }

  // Program streams in order of first use; capture stream i stands for stream i.
  std::vector<core::StreamKey> streams;
  auto streamIndex = [&streams](core::StreamKey key) {
    for (size_t i = 0; i < streams.size(); ++i)
      if (streams[i] == key) return i;
    streams.push_back(key);
    return streams.size() - 1;
  };
  std::vector<uint32_t> streamOf(ops.size());
  bool hasLegacy = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    streamOf[i] = uint32_t(streamIndex(ops[i].stream));
    hasLegacy |= ops[i].stream == core::kLegacyStream;
  }
  const bool branched = streams.size() > 1;
  // The program stream to launch on, if the graph forks from and joins into one.
  int launchOn = -1;
  if (branched) {
    std::vector<core::PlanOp> planOps(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      planOps[i].stream = streamOf[i];
      if (ops[i].kind == OpKind::EventRecord) {
        planOps[i].kind = core::PlanOp::Kind::Record;
      } else if (ops[i].kind == OpKind::EventWait) {
        planOps[i].kind = core::PlanOp::Kind::Wait;
        planOps[i].waitInstance = req.waitInstance[i];
      }
    }
    std::vector<core::PlanStream> planStreams(streams.size());
    for (size_t si = 0; si < streams.size(); ++si) {
      planStreams[si] = {streams[si] == core::kLegacyStream, isBlocking(streams[si])};
      if (hasLegacy && !planStreams[si].legacy) g->blockingAtBuild.emplace_back(streams[si], planStreams[si].blocking);
    }
    const core::LaunchPlan plan = core::planLaunch(planOps, planStreams);
    launchOn = plan.launchOn;
    if (plan.joinsInto >= 0) {
      g->joinsInto = plan.joinsInto;
      g->fork.joinsInto = streams[size_t(plan.joinsInto)];
      g->fork.joinSyncsImplicitly =
          planStreams[size_t(plan.joinsInto)].legacy || planStreams[size_t(plan.joinsInto)].blocking;
      g->fork.context = reinterpret_cast<uint64_t>(ctx);
      for (uint32_t b : plan.forkNeeded) g->fork.forkNeeded.push_back(streams[b]);
    }
  }

  CUresult r = CUDA_SUCCESS;
  std::string failure;
  size_t eventsUsed = 0;
  std::vector<CUevent> instanceEvents;
  // Implicit ordering of the legacy stream against blocking streams.
  std::vector<uint64_t> opsOn(streams.size(), 0), opsOnAtLegacyJoin(streams.size(), 0),
      legacyOpsAtJoin(streams.size(), 0);
  std::vector<bool> started(streams.size(), false);
  uint64_t legacyOps = 0;

  CUstream origin = captureStream(pool, 0, &r);
  CUevent fork = origin ? captureEvent(pool, eventsUsed++, &r) : nullptr;
  bool capturing = false;
  auto fail = [&](std::string what) {
    if (failure.empty()) failure = what + ": " + errorName(r);
    return false;
  };
  auto newEvent = [&](std::vector<CUevent>& into) -> CUevent {
    CUevent e = nullptr;
    if ((r = real<ApiId::k_cuEventCreate_2000>()(&e, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS) return nullptr;
    into.push_back(e);
    return e;
  };
  // The node an op just captured on `cs` became.
  auto capturedNode = [&](CUstream cs, CUgraphNode* node) -> bool {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode* deps = nullptr;
    size_t numDeps = 0;
    r = real<ApiId::k_cuStreamGetCaptureInfo_12030>()(cs, &status, nullptr, nullptr, &deps, nullptr, &numDeps);
    if (r != CUDA_SUCCESS) return fail("cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || numDeps != 1 || !deps) {
      r = CUDA_ERROR_UNKNOWN;
      return fail("finding the node just captured");
    }
    *node = deps[0];
    return true;
  };
  // An external event node for the program's event op just added to
  // g->eventOps, captured with a placeholder event of graft's (launch() puts
  // the program's event in).
  auto programEventNode = [&](CUstream cs) -> bool {
    GraphHandle::EventOp& e = g->eventOps.back();
    if ((r = real<ApiId::k_cuEventCreate_2000>()(&e.placeholder, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
      return fail("creating an event");
    e.holds = e.placeholder;
    r = e.record ? recordNodeOn(e.placeholder, cs) : waitOn(cs, e.placeholder, CU_EVENT_WAIT_EXTERNAL);
    if (r != CUDA_SUCCESS) return fail(e.record ? "capturing an event record node" : "capturing an event wait node");
    return capturedNode(cs, &e.node);
  };
  auto run = [&]() -> bool {
    if (!origin || !fork) return fail("creating capture streams and events");
    for (size_t si = 0; branched && si < streams.size(); ++si) {
      g->branchStreams.push_back(asStream(streams[si]));
      if (int(si) == launchOn) {
        g->entryEvents.push_back(nullptr);
        g->tailEvents.push_back(nullptr);
        continue;
      }
      if (!newEvent(g->entryEvents) || !newEvent(g->tailEvents)) return fail("creating launch events");
      if (streams[si] == core::kLegacyStream) g->tailOrder.insert(g->tailOrder.begin(), uint32_t(si));
      else g->tailOrder.push_back(uint32_t(si));
    }
    r = real<ApiId::k_cuStreamBeginCapture_10010>()(origin, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (r != CUDA_SUCCESS) return fail("cuStreamBeginCapture");
    capturing = true;
    if ((r = recordOn(fork, origin)) != CUDA_SUCCESS) return fail("recording the fork event");
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpDesc& op = ops[i];
      const size_t si = streamOf[i];
      CUstream cs = captureStream(pool, si, &r);
      if (!cs) return fail("creating a capture stream");
      if (!started[si]) {  // first op on this stream: fork it from the origin
        started[si] = true;
        if (si > 0 && (r = waitOn(cs, fork)) != CUDA_SUCCESS) return fail("forking a capture stream");
        if (branched && g->entryEvents[si] &&
            (r = waitOn(cs, g->entryEvents[si], CU_EVENT_WAIT_EXTERNAL)) != CUDA_SUCCESS)
          return fail("capturing a branch's entry wait");
      }
      if (hasLegacy) {
        auto join = [&](size_t from, size_t to) -> bool {
          CUevent e = captureEvent(pool, eventsUsed++, &r);
          if (!e) return false;
          CUstream fromStream = captureStream(pool, from, &r);
          return recordOn(e, fromStream) == CUDA_SUCCESS &&
                 (r = waitOn(captureStream(pool, to, &r), e)) == CUDA_SUCCESS;
        };
        if (op.stream == core::kLegacyStream) {
          // A legacy-stream op waits for all work already on blocking streams.
          for (size_t j = 0; j < streams.size(); ++j) {
            if (j == si || !isBlocking(streams[j]) || opsOn[j] == opsOnAtLegacyJoin[j]) continue;
            if (!join(j, si)) return fail("ordering the legacy stream");
            opsOnAtLegacyJoin[j] = opsOn[j];
          }
          ++legacyOps;
        } else if (isBlocking(op.stream) && legacyOps != legacyOpsAtJoin[si]) {
          // ... and work on a blocking stream waits for the legacy stream.
          const size_t li = streamIndex(core::kLegacyStream);
          if (!join(li, si)) return fail("ordering against the legacy stream");
          legacyOpsAtJoin[si] = legacyOps;
        }
      }
      // Any op, waits included, is work a later legacy-stream op must follow.
      ++opsOn[si];
      switch (op.kind) {
        case OpKind::Kernel:
        case OpKind::Memcpy:
        case OpKind::Memset: {
          // The node the capture ended on before: an op that added none (the
          // encoder leaves empty copies and memsets out; anything else the
          // driver adds no node for) would otherwise take it for its own, and
          // its patches would change that op's node.
          CUgraphNode before = nullptr;
          {
            CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
            const CUgraphNode* deps = nullptr;
            size_t numDeps = 0;
            r = real<ApiId::k_cuStreamGetCaptureInfo_12030>()(cs, &status, nullptr, nullptr, &deps, nullptr, &numDeps);
            if (r != CUDA_SUCCESS) return fail("cuStreamGetCaptureInfo");
            if (numDeps == 1 && deps) before = deps[0];
          }
          r = g->kernelForm[i] ? copy_kernels_.launch(op, ctx, cs) : issueOp(op, cs, kernels_, params_);
          if (r != CUDA_SUCCESS) {
            // The same launch ran eagerly: the driver refuses this kernel in
            // a capture, so later runs leave it out (a boundary) and the ops
            // around it can still be graphed.
            if (op.kind == OpKind::Kernel && (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED ||
                                              r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED))
              kernels_.noteCaptureRefused(kernelShapeOf(op).func, errorName(r).c_str());
            return fail("re-issuing " + describeLaunch(op, kernels_) + " into capture");
          }
          if (!capturedNode(cs, &g->nodes[i])) return false;
          if (g->nodes[i] == before) {
            r = CUDA_ERROR_INVALID_VALUE;
            return fail("op " + std::to_string(i) + " (" + describeOp(op, kernels_) + ") added no graph node");
          }
          break;
        }
        case OpKind::EventRecord: {
          // graft's event for waits inside the segment, and the program's own
          // record node for everyone else.
          CUevent e = captureEvent(pool, eventsUsed++, &r);
          if (!e || (r = recordOn(e, cs)) != CUDA_SUCCESS) return fail("recording an event");
          instanceEvents.push_back(e);
          g->eventOps.push_back({uint32_t(i), true});
          if (!programEventNode(cs)) return false;
          break;
        }
        case OpKind::EventWait: {
          const int32_t instance = req.waitInstance[i];
          g->eventOps.push_back({uint32_t(i), false});
          if (instance == core::EventInstances::kExternal) {
            if (!programEventNode(cs)) return false;
          } else if (instance >= 0 && size_t(instance) < instanceEvents.size()) {
            if ((r = waitOn(cs, instanceEvents[instance], eventShapeOf(op).flags)) != CUDA_SUCCESS)
              return fail("waiting on an event");
          } else {
            r = CUDA_ERROR_INVALID_VALUE;
            return fail("bad event structure");
          }
          break;
        }
        case OpKind::Boundary:
          r = CUDA_ERROR_INVALID_VALUE;
          return fail("a boundary op inside a segment");
      }
    }
    for (size_t e = 0; e < g->eventOps.size(); ++e)
      if (g->eventOps[e].record) g->recordOps.push_back(uint32_t(e));
    if (branched) {
      // Each branch's last op: a record there is issued after the tail wait.
      std::vector<int64_t> lastOpOn(streams.size(), -1);
      for (size_t i = 0; i < ops.size(); ++i) lastOpOn[streamOf[i]] = int64_t(i);
      g->tailRecordOf.assign(streams.size(), -1);
      for (size_t e = 0; e < g->eventOps.size(); ++e) {
        GraphHandle::EventOp& ev = g->eventOps[e];
        const size_t si = streamOf[ev.op];
        if (!ev.record || !ev.node || !g->tailEvents[si] || lastOpOn[si] != int64_t(ev.op)) continue;
        // Not on a blocking stream beside legacy-stream ops: issued after the
        // tail waits (the legacy stream's first), the record would also wait
        // for the legacy stream's whole branch, ops after it included
        // (tests/sim sim_gated_fuzz --legacy, seed 586: a deadlock).
        if (hasLegacy && isBlocking(streams[si])) continue;
        ev.tailBranch = int32_t(si);
        g->tailRecordOf[si] = int32_t(e);
      }
      if (!hasLegacy && streams.size() <= 64) {
        // What each stream's position follows in the segment: a wait on a
        // record carries what the record's stream had followed, and a
        // branch's last record stands for the branch (GraphHandle::endFollows).
        std::vector<uint64_t> follows(streams.size(), 0), recordFollows;
        g->lastRecordOf.assign(streams.size(), -1);
        size_t e = 0;  // g->eventOps is in op order
        for (size_t i = 0; i < ops.size(); ++i) {
          const size_t si = streamOf[i];
          if (ops[i].kind == OpKind::EventRecord) {
            const bool last = lastOpOn[si] == int64_t(i);
            recordFollows.push_back(follows[si] | (last ? uint64_t(1) << si : 0));
            while (e < g->eventOps.size() && g->eventOps[e].op < i) ++e;
            if (last && e < g->eventOps.size() && g->eventOps[e].op == i && g->eventOps[e].node)
              g->lastRecordOf[si] = int32_t(e);
          } else if (ops[i].kind == OpKind::EventWait) {
            const int32_t instance = req.waitInstance[i];
            if (instance >= 0 && size_t(instance) < recordFollows.size()) follows[si] |= recordFollows[size_t(instance)];
          }
        }
        g->endFollows.resize(streams.size());
        for (size_t si = 0; si < streams.size(); ++si) g->endFollows[si] = follows[si] & ~(uint64_t(1) << si);
        for (uint32_t si = 0; si < streams.size(); ++si) g->branchesByEnd.push_back(si);
        std::sort(g->branchesByEnd.begin(), g->branchesByEnd.end(),
                  [&](uint32_t a, uint32_t b) { return lastOpOn[a] < lastOpOn[b]; });
      }
    }
    g->recordScratch.reserve(g->recordOps.size());
    for (size_t si = 0; si < g->tailEvents.size(); ++si)
      if (g->tailEvents[si] && (r = recordNodeOn(g->tailEvents[si], captureStream(pool, si, &r))) != CUDA_SUCCESS)
        return fail("capturing a branch's tail record");
    for (size_t si = 1; si < streams.size(); ++si) {
      CUevent e = captureEvent(pool, eventsUsed++, &r);
      if (!e || (r = recordOn(e, captureStream(pool, si, &r))) != CUDA_SUCCESS ||
          (r = waitOn(origin, e)) != CUDA_SUCCESS)
        return fail("joining capture streams");
    }
    capturing = false;
    r = real<ApiId::k_cuStreamEndCapture_10000>()(origin, &g->graph);
    if (r != CUDA_SUCCESS) return fail("cuStreamEndCapture");
    r = real<ApiId::k_cuGraphInstantiateWithFlags_11040>()(&g->exec, g->graph, 0);
    if (r != CUDA_SUCCESS) return fail("cuGraphInstantiateWithFlags");
    // Upload on graft's own capture stream. Measured on an H200 (docs/PERF.md):
    // without it, or uploading on the launch stream, every replay of the demo
    // took ~19 us longer.
    r = real<ApiId::k_cuGraphUpload_11010>()(g->exec, origin);
    if (r != CUDA_SUCCESS) return fail("cuGraphUpload");

    g->paramStart.assign(1, 0);
    for (size_t i = 0; i < ops.size(); ++i) {
      g->instance.push(ops[i]);
      if (ops[i].kind == OpKind::Kernel && kernelShapeOf(ops[i]).paramMode == kParamsArray &&
          ops[i].value.size) {
        const KernelInfo* info = kernels_.find(kernelShapeOf(ops[i]).func);
        if (!info || !info->layoutKnown) {
          r = CUDA_ERROR_INVALID_VALUE;
          return fail("a kernel without a known parameter layout");
        }
        g->paramOffsets.insert(g->paramOffsets.end(), info->offsets.begin(), info->offsets.end());
      }
      g->paramStart.push_back(uint32_t(g->paramOffsets.size()));
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!g->nodes[i]) continue;
      if (ops[i].kind == OpKind::Kernel || g->kernelForm[i]) {
        r = real<ApiId::k_cuGraphKernelNodeGetParams_12000>()(g->nodes[i], &g->kernelBase[i]);
        if (r != CUDA_SUCCESS) return fail("cuGraphKernelNodeGetParams");
      } else if (ops[i].kind == OpKind::Memcpy) {
        CUDA_MEMCPY3D p{};
        r = real<ApiId::k_cuGraphMemcpyNodeGetParams_10000>()(g->nodes[i], &p);
        if (r != CUDA_SUCCESS) return fail("cuGraphMemcpyNodeGetParams");
        g->copyBase.emplace(uint32_t(i), p);
      } else if (ops[i].kind == OpKind::Memset) {
        CUDA_MEMSET_NODE_PARAMS p{};
        r = real<ApiId::k_cuGraphMemsetNodeGetParams_10000>()(g->nodes[i], &p);
        if (r != CUDA_SUCCESS) return fail("cuGraphMemsetNodeGetParams");
        g->setBase.emplace(uint32_t(i), p);
      }
    }
    for (size_t si = 0; si < streams.size(); ++si) {
      if (!core::isPerThreadKey(streams[si])) continue;
      g->perThreadKeys.push_back(streams[si]);
      g->perThreadBranch.push_back(branched ? int32_t(si) : -1);
    }
    if (!branched || launchOn >= 0) {
      g->launchStream = asStream(streams[branched ? size_t(launchOn) : 0]);
      g->launchBranch = branched ? int32_t(launchOn) : -1;
      if (branched)
        GRAFT_DEBUG("a graph of {} streams forks from and joins into stream {:#x}: launched on it", streams.size(),
                    streams[size_t(launchOn)]);
      return true;
    }
    // With the priority of the segment's first stream, on which it was
    // launched before it had a stream of its own (a graph's kernels run at
    // the priority of the stream it is launched on).
    int priority = 0;
    auto getPriority = real<ApiId::k_cuStreamGetPriority_5050>();
    auto createWithPriority = real<ApiId::k_cuStreamCreateWithPriority_5050>();
    if (!getPriority || getPriority(asStream(streams[0]), &priority) != CUDA_SUCCESS) priority = 0;
    // Non-blocking: the branches' entry and tail events order the graph
    // against the legacy stream exactly as eagerly; implicit synchronization
    // of the launch itself would make every branch wait for the legacy stream
    // and the legacy stream for every branch.
    const unsigned flags = CU_STREAM_NON_BLOCKING;
    r = createWithPriority ? createWithPriority(&g->ownStream, flags, priority)
                           : real<ApiId::k_cuStreamCreate_2000>()(&g->ownStream, flags);
    if (r != CUDA_SUCCESS) return fail("creating the launch stream");
    g->launchStream = g->ownStream;
    return true;
  };

  if (!run()) {
    if (capturing) {
      CUgraph partial = nullptr;
      real<ApiId::k_cuStreamEndCapture_10000>()(origin, &partial);
      if (partial) real<ApiId::k_cuGraphDestroy_10000>()(partial);
    }
    dropPool(ctx);  // capture streams may be left in an unknown state
    destroyHandle(g.release());
    *why = failure;
    return nullptr;
  }
  if (std::any_of(g->eventOps.begin(), g->eventOps.end(), [](const auto& e) { return e.node; }))
    graphs_with_event_nodes_.push_back(g.get());
  graphs_.push_back(g.get());
  return g.release();
}

const core::ForkCandidate* GraphExecutor::forkCandidate(const GraphHandle* g) {
  return g->joinsInto >= 0 ? &g->fork : nullptr;
}

GRAFT_HOT int GraphExecutor::launch(GraphHandle* g, const core::OpRange& ops,
                          std::span<const uint32_t> patch, bool onJoinStream, std::string* why) {
  for (const auto& [stream, blocking] : g->blockingAtBuild) {
    if (isBlocking(stream) != blocking) [[unlikely]] {
      *why = fmt::format("stream {:#x} was created again as a {} stream since the graph was built", stream,
                         blocking ? "non-blocking" : "blocking");
      return kGraphOutdated;
    }
  }
  if (!g->kernelFormOps.empty()) {
    // Nothing validates a kernel's parameters: memory graft's copy kernels
    // cannot reach (another device's, host memory), which the driver's copy
    // or memset would, makes this instance run eagerly and the graph be built
    // again when its run repeats.
    ContextScope scope(g->ctx);
    for (uint32_t k : g->kernelFormOps) {
      if (!copy_kernels_.reachable(ops[k], g->ctx)) [[unlikely]] {
        *why = fmt::format("op {} ({}) names memory graft's copy kernel cannot reach", k, describe(ops[k]));
        return kGraphOutdated;
      }
    }
  }
  LaunchJob* job = &sync_job_;
  // The first launch after the host waited finds the GPU idle: it runs here,
  // at once, when nothing is queued before it (order is kept either way).
  bool async = launchThread();
  if (async && launch_inline_ && worker_->idle()) async = false;
  launch_inline_ = false;
  if (async) {
    while (!(job = worker_->slot())) {  // the launch thread stopped after a failure
      worker_->drain();
      takeOverAfterFailure();
    }
  }
  if (g->broken) {  // see takeOverAfterFailure; nothing is queued
    *why = "an earlier launch of this graph failed";
    return int(CUDA_ERROR_LAUNCH_FAILED);
  }
  if (g->dryRunSkipped && !dry_run_) [[unlikely]] {
    // Every op whose value differs from what the graph holds is patched.
    waitForLaunches();  // the graph's instance copy is current
    dry_run_patch_.clear();
    for (uint32_t k = 0; k < ops.size(); ++k)
      if (!(ops[k].value == g->instance.view(k).value)) dry_run_patch_.push_back(k);
    patch = dry_run_patch_;
    g->dryRunSkipped = false;
  }
  // Copy what this instance changes: the held ops are gone once this returns.
  job->graph = g;
  job->patchOps.clear();
  job->patchOffsets.clear();
  job->bytes.clear();
  for (uint32_t k : patch) {
    const OpDesc op = ops[k];
    job->patchOps.push_back(k);
    job->patchOffsets.push_back(uint32_t(job->bytes.size()));
    job->bytes.insert(job->bytes.end(), op.value.data, op.value.data + op.value.size);
  }
  job->events.clear();
  for (const GraphHandle::EventOp& e : g->eventOps) job->events.push_back(ops[e.op].event);
  // Not when the join stream's handle now names a blocking stream where the
  // engine checked for a non-blocking one (a stream created again).
  job->onJoinStream = onJoinStream && g->joinsInto >= 0 &&
                      (g->fork.joinSyncsImplicitly || !isBlocking(g->fork.joinsInto));
  if (job->onJoinStream) GRAFT_TRACE("forked before the segment: launched on stream {:#x}", g->fork.joinsInto);
  if (dry_run_) [[unlikely]] {
    g->dryRunSkipped = true;
    return 0;
  }
  if (async) {
    // The frees made since the last queued launch go after this one.
    job->frees.swap(frees_pending_);
    core::StageTimer timer(core::Stage::LaunchQueue);
    worker_->queue();
    return 0;
  }
  if (!frees_pending_.empty()) issueFrees(frees_pending_);  // the launches before them ran
  return runLaunch(*job, why);
}

bool GraphExecutor::queuedLaunchNeedsSharedMem(CUfunction a, CUfunction b, uint32_t sharedMem) {
  if (!launchThread() || worker_->idle()) return false;
  // Only node updates check the allowance; a graph launch does not (driver
  // behaviour observed on an H200, docs/PERF.md).
  for (uint64_t i = worker_->firstUndone(); i < worker_->queuedCount(); ++i) {
    const LaunchJob& job = worker_->job(i);
    for (const uint32_t k : job.patchOps) {
      const CUDA_KERNEL_NODE_PARAMS& p = job.graph->kernelBase[k];
      const CUfunction kern = reinterpret_cast<CUfunction>(p.kern);
      const bool named = (p.func && (p.func == a || p.func == b)) || (kern && (kern == a || kern == b));
      if (named && p.sharedMemBytes > sharedMem) return true;
    }
  }
  return false;
}

OpDesc GraphExecutor::instanceOp(const LaunchJob& job, uint32_t k) {
  GraphHandle* g = job.graph;
  OpDesc op = g->instance.view(k);
  for (size_t e = 0; e < g->eventOps.size(); ++e)
    if (g->eventOps[e].op == k) op.event = job.events[e];
  return op;
}

int GraphExecutor::runLaunch(LaunchJob& job, std::string* why) {
  GraphHandle* g = job.graph;
  ContextScope scope(g->ctx);
  CUresult r = CUDA_SUCCESS;
  for (const core::StreamKey key : g->perThreadKeys) PerThreadStreams::noteIssued(key);
  for (size_t p = 0; p < job.patchOps.size(); ++p) {
    core::StageTimer timer(core::Stage::NodeUpdate);
    const uint32_t k = job.patchOps[p];
    OpDesc op = g->instance.view(k);  // the recorded op with this instance's value bytes
    op.value.data = job.bytes.data() + job.patchOffsets[p];
    switch (op.kind) {
      case OpKind::Kernel: {
        CUDA_KERNEL_NODE_PARAMS params = g->kernelBase[k];
        void* extra[5];
        size_t extraSize = 0;
        const std::span<const uint32_t> offsets(g->paramOffsets.data() + g->paramStart[k],
                                                g->paramStart[k + 1] - g->paramStart[k]);
        kernelParamsOf(op, offsets, job.pointers, extra, &extraSize);
        const bool buffer = kernelShapeOf(op).paramMode == kParamsBuffer;
        params.kernelParams = buffer ? nullptr : job.pointers.data();
        params.extra = buffer ? extra : nullptr;
        r = real<ApiId::k_cuGraphExecKernelNodeSetParams_12000>()(g->exec, g->nodes[k], &params);
        ++g->nodeUpdates[k];
        break;
      }
      case OpKind::Memcpy:
      case OpKind::Memset:
        r = updateCopyNode(*g, k, op);
        break;
      default: break;
    }
    if (r != CUDA_SUCCESS) {
      *why = fmt::format("updating the graph node of op {} failed: {}", k, errorName(r));
      return int(r);
    }
  }
  // The instance's program events into the event nodes.
  if (g->recordOps.size() > 1) {
    g->recordScratch.clear();
    for (uint32_t e : g->recordOps) g->recordScratch.emplace_back(job.events[e], e);
    std::sort(g->recordScratch.begin(), g->recordScratch.end());
    for (size_t i = 0; i < g->recordScratch.size(); ++i)
      g->eventOps[g->recordScratch[i].second].superseded =
          i + 1 < g->recordScratch.size() && g->recordScratch[i + 1].first == g->recordScratch[i].first;
  }
  // On the join stream the graph follows that stream's earlier work by stream
  // order (its entry record is then already complete) and the stream's later
  // work follows the whole graph, whose tail events its own branch's tail
  // follows: it waits for no tail event, and its last record stays in its node.
  const int joinBranch = job.onJoinStream ? g->joinsInto : -1;
  // The branches whose last record is issued after the graph, and the launch
  // stream's last record when it is too (GraphHandle::endFollows).
  const int launchBranch = job.onJoinStream ? g->joinsInto : g->launchBranch;
  uint64_t recordsAfter = 0;
  int32_t launchRecordAfter = -1;
  if (!g->endFollows.empty()) {
    for (size_t b = 0; b < g->tailRecordOf.size(); ++b) {
      const int32_t t = g->tailRecordOf[b];
      if (t >= 0 && int(b) != joinBranch && !g->eventOps[size_t(t)].superseded) recordsAfter |= uint64_t(1) << b;
    }
    if (launchBranch >= 0) {
      const int32_t t = g->lastRecordOf[size_t(launchBranch)];
      if (t >= 0 && !g->eventOps[size_t(t)].superseded && (g->endFollows[size_t(launchBranch)] & recordsAfter)) {
        launchRecordAfter = t;
        recordsAfter |= uint64_t(1) << launchBranch;
      }
    }
  }
  for (size_t k = 0; k < g->eventOps.size(); ++k) {
    GraphHandle::EventOp& e = g->eventOps[k];
    if (!e.node) continue;
    const bool afterTail = (e.tailBranch >= 0 && e.tailBranch != joinBranch) || int32_t(k) == launchRecordAfter;
    const CUevent want = e.superseded || afterTail ? e.placeholder : reinterpret_cast<CUevent>(job.events[k]);
    if (want == e.holds) continue;
    const CUresult refused = setNodeEvent(g->exec, e, want);
    if (refused == CUDA_SUCCESS) {
      e.holds = want;
      continue;
    }
    // The driver refused the program's event in the node: the launch fails,
    // so the instance is issued eagerly and the graph is not used again. (A
    // wait issued before the graph and a record after it would be stricter
    // than eager: a host waiting on the record before it releases a later
    // kernel of the graph would never return. The one refusal seen on the
    // H100, an event destroyed since, never gets here: forgetEvent.)
    if ((r = setNodeEvent(g->exec, e, e.placeholder)) == CUDA_SUCCESS) e.holds = e.placeholder;
    *why = fmt::format("the driver refused the program's event in a graph's event node ({})", errorName(refused));
    return int(refused);
  }

  const CUstream L = job.onJoinStream ? g->branchStreams[size_t(g->joinsInto)] : g->launchStream;
  // Each branch's program stream marks its work before the graph; the branch
  // waits on that mark in the graph.
  for (size_t b = 0; b < g->entryEvents.size(); ++b) {
    if (g->entryEvents[b] && (r = recordOn(g->entryEvents[b], g->branchStreams[b])) != CUDA_SUCCESS) {
      *why = "joining streams before the graph failed: " + errorName(r);
      return int(r);
    }
  }
  {
    core::StageTimer timer(core::Stage::GraphLaunchCall);
    r = real<ApiId::k_cuGraphLaunch_10000>()(g->exec, L);
  }
  if (r != CUDA_SUCCESS) {
    *why = "cuGraphLaunch failed: " + errorName(r);
    return int(r);
  }
  applyToInstance(job);  // the graph holds this instance's values now
  // After the graph: each program stream of a branch waits for its branch.
  bool ok = true;
  uint64_t issued = 0;  // the branches whose last record was issued after the graph
  if (!g->endFollows.empty()) {
    // Branch by branch in the order of their last ops: the tail wait, waits
    // for the records issued after the graph that the branch's end followed,
    // then the branch's own last record if it is issued after the graph.
    for (size_t i = 0; ok && i < g->branchesByEnd.size(); ++i) {
      const uint32_t b = g->branchesByEnd[i];
      const CUstream s = g->branchStreams[b];
      if (int(b) != joinBranch && g->tailEvents[b]) ok = (r = waitOn(s, g->tailEvents[b])) == CUDA_SUCCESS;
      for (uint64_t f = g->endFollows[b] & issued; ok && f; f &= f - 1) {
        const int32_t t = g->lastRecordOf[size_t(std::countr_zero(f))];
        ok = (r = waitOn(s, reinterpret_cast<CUevent>(job.events[size_t(t)]))) == CUDA_SUCCESS;
      }
      if (!ok || !(recordsAfter & (uint64_t(1) << b))) continue;
      const int32_t t = int(b) == launchBranch ? launchRecordAfter : g->tailRecordOf[b];
      ok = (r = issueOp(instanceOp(job, g->eventOps[size_t(t)].op), s, kernels_, job.pointers)) == CUDA_SUCCESS;
      issued |= uint64_t(1) << b;
    }
  }
  for (size_t i = 0; ok && g->endFollows.empty() && i < g->tailOrder.size(); ++i) {
    const uint32_t b = g->tailOrder[i];
    if (int(b) == joinBranch) continue;
    ok = (r = waitOn(g->branchStreams[b], g->tailEvents[b])) == CUDA_SUCCESS;
    // The branch's last op, a program record: after the wait (see EventOp::tailBranch).
    const int32_t t = g->tailRecordOf[b];
    if (!ok || t < 0) continue;
    const GraphHandle::EventOp& e = g->eventOps[size_t(t)];
    if (e.superseded || e.tailBranch == joinBranch) continue;
    const OpDesc op = instanceOp(job, e.op);
    ok = (r = issueOp(op, g->branchStreams[b], kernels_, job.pointers)) == CUDA_SUCCESS;
  }
  // Per-thread streams' proxies mark the work just issued there (the join's
  // event): after their branch's tail where it has one, which does not
  // follow the legacy stream's tail wait issued before, and after the
  // branch's last record where it was issued after the graph (a host that
  // synchronized the stream finds that record complete, as eagerly).
  for (size_t k = 0; k < g->perThreadKeys.size(); ++k) {
    const int32_t b = g->perThreadBranch[k];
    const bool hasTail = b >= 0 && b != joinBranch;
    const bool recordAfter = hasTail && b < 64 && (issued & (uint64_t(1) << b));
    const CUevent lastRecord =
        recordAfter ? reinterpret_cast<CUevent>(job.events[size_t(g->lastRecordOf[size_t(b)])]) : nullptr;
    PerThreadStreams::issuedAfter(g->perThreadKeys[k], hasTail ? g->tailEvents[size_t(b)] : nullptr, lastRecord);
  }
  if (!ok) {
    // The graph is enqueued; stay never-looser-than-eager by waiting for it.
    GRAFT_WARN("stream bookkeeping after a graph launch failed ({}); synchronizing", errorName(r));
    real<ApiId::k_cuStreamSynchronize_2000>()(L);
  }
  return 0;
}

int GraphExecutor::reissueInstance(const LaunchJob& job) {
  // The instance as the program issued it: the graph's copy of the segment
  // with this job's patches applied, and the program's events.
  applyToInstance(job);
  int first = 0;
  for (uint32_t k = 0; k < job.graph->instance.size(); ++k) {
    const OpDesc op = instanceOp(job, k);
    ContextScope scope(orLastContext(runContext(op)));
    const int rc = int(issueOp(op, asStream(op.stream), kernels_, params_));
    if (rc && !first) first = rc;
    // The proxy's join event right after each of its ops, as issue() does:
    // recorded after the instance, on the blocking proxy, it would also wait
    // for the instance's later legacy-stream ops.
    if (core::isPerThreadKey(op.stream)) [[unlikely]] PerThreadStreams::issued(op.stream);
  }
  return first;
}

void GraphExecutor::applyToInstance(const LaunchJob& job) {
  GraphHandle* g = job.graph;
  for (size_t p = 0; p < job.patchOps.size(); ++p) {
    const uint32_t k = job.patchOps[p];
    g->instance.setValue(k, core::Bytes{job.bytes.data() + job.patchOffsets[p], g->instance.view(k).value.size});
  }
}

void GraphExecutor::takeOverAfterFailure() {
  const uint64_t first = worker_->firstUndone(), end = worker_->queuedCount();
  for (uint64_t i = first; i < end; ++i) {
    LaunchJob& job = worker_->job(i);
    GraphHandle* g = job.graph;
    std::string why = i == first ? job.failure : std::string();
    int rc = i == first ? worker_->failure() : 0;
    if (!rc && !g->broken) rc = runLaunch(job, &why);  // applies the job to the instance
    if (!rc && !g->broken) {
      issueFrees(job.frees);
      continue;
    }
    if (rc && !g->broken) {
      GRAFT_WARN("a graph launch failed ({}); issuing that instance's {} ops eagerly",
                 why.empty() ? errorName(CUresult(rc)) : why, g->instance.size());
      g->broken = true;
    }
    // Every later instance of a broken graph is issued eagerly too. Its
    // patches still describe what changed since the instance before (the
    // engine counted on that), so the instance copy takes them either way
    // (reissueInstance applies them).
    const int e = reissueInstance(job);
    if (e) GRAFT_WARN("issuing a failed launch's ops eagerly returned driver error {}", e);
    failed_.push_back({g, uint32_t(g->instance.size()), isStickyError(rc) ? rc : isStickyError(e) ? e : 0});
    issueFrees(job.frees);
  }
  worker_->finish();
}

GRAFT_HOT void GraphExecutor::waitForQueuedLaunches() {
  // What the program's thread waits (or runs the queued launches itself:
  // their node updates and cuGraphLaunch are their own stages).
  core::StageTimer timer(core::Stage::DrainWait);
  if (!worker_->drain()) takeOverAfterFailure();
}

GRAFT_HOT void GraphExecutor::drain(std::vector<core::FailedLaunch>* failed) {
  waitForLaunches();
  failed->insert(failed->end(), failed_.begin(), failed_.end());
  failed_.clear();
}

void GraphExecutor::destroy(GraphHandle* g) {
  if (!g) return;
  waitForLaunches();
  for (core::FailedLaunch& f : failed_)
    if (f.graph == g) f.graph = nullptr;  // still counted; the handle may be reused
  countPatches(g);
  ContextScope scope(g->ctx);
  std::erase(graphs_with_event_nodes_, g);
  std::erase(graphs_, g);
  destroyHandle(g);
}

void GraphExecutor::countPatches(GraphHandle* g) {
  for (uint32_t k = 0; k < g->nodeUpdates.size(); ++k) {
    if (!g->nodeUpdates[k]) continue;
    kernels_.notePatched(kernelShapeOf(g->instance.view(k)).func, g->nodeUpdates[k]);
    g->nodeUpdates[k] = 0;
  }
}

void GraphExecutor::countPatches() {
  waitForLaunches();
  for (GraphHandle* g : graphs_) countPatches(g);
}

void GraphExecutor::forgetEvent(uint64_t event) {
  waitForLaunches();
  const CUevent e = reinterpret_cast<CUevent>(event);
  for (GraphHandle* g : graphs_with_event_nodes_) {
    for (GraphHandle::EventOp& k : g->eventOps) {
      if (!k.node || k.holds != e) continue;
      ContextScope scope(g->ctx);
      // If that fails, the next launch finds the node refusing the
      // instance's event and the placeholder alike, and issues the instance
      // eagerly (a failed launch).
      const bool reset = setNodeEvent(g->exec, k, k.placeholder) == CUDA_SUCCESS;
      k.holds = reset ? k.placeholder : nullptr;
    }
  }
}

void GraphExecutor::destroyEvent(uint64_t event, uint64_t domain) {
  forgetEvent(event);
  // Maybe on graft's idle-flush thread, which has no current context (the
  // driver may then refuse it, and the handle would never come back).
  ContextScope scope(orLastContext(reinterpret_cast<CUcontext>(domain)));
  if (const CUresult r = real<ApiId::k_cuEventDestroy_4000>()(reinterpret_cast<CUevent>(event)); r != CUDA_SUCCESS)
    GRAFT_DEBUG("a deferred cuEventDestroy returned {}", errorName(r));
}

void GraphExecutor::freeAsync(uint64_t pointer, core::StreamKey stream, uint64_t domain) {
  if (freeBehindQueuedLaunches(pointer, stream, domain)) return;
  waitForLaunches();  // and the frees put behind them, which come before this one
  if (pool_ && pool_->owns(pointer)) {
    // A per-thread stream's work is on its proxy (graph/per_thread_streams.h).
    pool_->freeAsync(pointer, core::isPerThreadKey(stream) ? reinterpret_cast<uint64_t>(asStream(stream)) : stream,
                     reinterpret_cast<uint64_t>(orLastContext(reinterpret_cast<CUcontext>(domain))));
    if (core::isPerThreadKey(stream)) [[unlikely]] PerThreadStreams::issued(stream);  // as issueFree
    return;
  }
  issueFree({pointer, stream, orLastContext(reinterpret_cast<CUcontext>(domain))});
}

bool GraphExecutor::freeBehindQueuedLaunches(uint64_t pointer, core::StreamKey stream, uint64_t domain) {
  // graft's pool keeps its own order; only the calling thread can name its
  // per-thread default stream.
  if (!launchThread() || worker_->idle() || stream == core::kPerThreadStream || (pool_ && pool_->owns(pointer)))
    return false;
  // The context of the program's call: a default stream names its stream.
  frees_pending_.push_back({pointer, stream, orLastContext(reinterpret_cast<CUcontext>(domain))});
  frees_queued_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void GraphExecutor::issueFree(const PendingFree& f) {
  ContextScope scope(f.ctx);
  // An error of a deferred free reaches nobody: the program's call returned
  // when it was deferred.
  if (const CUresult r = real<ApiId::k_cuMemFreeAsync_11020>()(f.pointer, asStream(f.stream)); r != CUDA_SUCCESS)
    GRAFT_DEBUG("a deferred cuMemFreeAsync returned {}", errorName(r));
  // On a proxy: its `exit` now, before later legacy-stream work (as after any
  // work graft issues there; sim_review7_threads, pts-free-legacy-gate).
  if (core::isPerThreadKey(f.stream)) [[unlikely]] PerThreadStreams::issued(f.stream);
}

void GraphExecutor::issueFrees(std::vector<PendingFree>& frees) {
  for (const PendingFree& f : frees) issueFree(f);
  frees.clear();
}

uint64_t GraphExecutor::domainOf(const OpDesc& op) { return reinterpret_cast<uint64_t>(runContext(op)); }

uint64_t GraphExecutor::contextOfEventOp(const OpDesc& op) { return reinterpret_cast<uint64_t>(contextOf(op)); }

void GraphExecutor::forgetKernels() {
  countPatches();  // by the handles' current names
  kernels_.retireAll();
  // A context may be going away with its streams: graft's capture streams
  // and events for it go first, and stream handles may be reused later; so do
  // graft's copy kernels (the graphs using them are destroyed already).
  while (!pools_.empty()) dropPool(pools_.begin()->first);
  copy_kernels_.forgetAll();
  blocking_.clear();
  stream_ctx_.clear();
  stream_regular_ctx_.clear();
}

std::string GraphExecutor::describe(const OpDesc& op) { return describeOp(op, kernels_); }

std::string GraphExecutor::describeDifference(const OpDesc& e, const OpDesc& a) {
  return graph::describeDifference(e, a, kernels_);
}

}  // namespace graft::graph
