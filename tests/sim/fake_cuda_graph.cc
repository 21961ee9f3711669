// fake_cuda_graph.cc - simulated stream capture, graphs, executable graphs.
//
// Invariants:
//  - A capturing stream never enqueues: its ops become nodes whose dependencies are
//    the stream's capture-dependency set, which then becomes {new node}.
//  - An exec owns an immutable ExecSnapshot; cuGraphLaunch enqueues a reference to
//    the current snapshot and node setters copy-on-write, so an update only affects
//    launches issued after it ("future launches only").
//  - Launches of one exec are serialized (each waits for the previous one), and a
//    launch executes its nodes one scheduler step at a time in a random
//    topological order, interleaved with other streams.
//  - Capture modes follow CUDA: a "potentially unsafe" call is refused (and the
//    offending capture invalidated) while this thread has a non-relaxed capture, or,
//    for a thread in global mode, while any other thread has a global-mode capture.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "fake_cuda_internal.h"

namespace sim {

namespace {

thread_local CUstreamCaptureMode tlsCaptureMode = CU_STREAM_CAPTURE_MODE_GLOBAL;

std::shared_ptr<Graph> lookupGraph(CUgraph g) {
  SimState& st = state();
  auto it = st.graphs.find(g);
  if (it != st.graphs.end()) return it->second;
  for (auto& cs : st.sessions) {
    if (cs->graph.get() == reinterpret_cast<Graph*>(g)) return cs->graph;
  }
  return nullptr;
}

Node* lookupNode(CUgraphNode n) {
  auto* p = reinterpret_cast<Node*>(n);
  return state().liveNodes.count(p) ? p : nullptr;
}

std::shared_ptr<Exec> lookupExec(CUgraphExec e) {
  SimState& st = state();
  auto it = st.execs.find(e);
  if (it != st.execs.end()) return it->second;
  if (st.strictHandles && st.endedExecHandles.count(e))
    fatal("a call named an executable graph of a context that ended (the last cuDevicePrimaryCtxRelease; the "
          "real driver crashed replaying one; SIM_STRICT_HANDLES=0 makes it an error)");
  return nullptr;
}

Node* newNode(Graph* g, NodeParams&& p, const std::vector<Node*>& deps) {
  auto n = std::make_unique<Node>();
  n->graph = g;
  n->index = g->nodes.size();
  n->params = std::move(p);
  n->deps = deps;
  Node* raw = n.get();
  g->nodes.push_back(std::move(n));
  state().liveNodes.insert(raw);
  return raw;
}

CUgraphNodeType nodeType(NodeKind k) {
  switch (k) {
    case NodeKind::Kernel:
      return CU_GRAPH_NODE_TYPE_KERNEL;
    case NodeKind::Memcpy:
      return CU_GRAPH_NODE_TYPE_MEMCPY;
    case NodeKind::Memset:
      return CU_GRAPH_NODE_TYPE_MEMSET;
    case NodeKind::Host:
      return CU_GRAPH_NODE_TYPE_HOST;
    case NodeKind::Empty:
      return CU_GRAPH_NODE_TYPE_EMPTY;
    case NodeKind::EventRecord:
      return CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    case NodeKind::EventWait:
      return CU_GRAPH_NODE_TYPE_WAIT_EVENT;
  }
  return CU_GRAPH_NODE_TYPE_EMPTY;
}

CUresult copyFrom3D(const CUDA_MEMCPY3D* p, CopyOp* out) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1) return CUDA_ERROR_INVALID_VALUE;
  auto side = [](CUmemorytype t, const void* host, CUdeviceptr dev, uint64_t* addr) {
    switch (t) {
      case CU_MEMORYTYPE_HOST:
        *addr = reinterpret_cast<uint64_t>(host);
        return true;
      case CU_MEMORYTYPE_DEVICE:
      case CU_MEMORYTYPE_UNIFIED:
        *addr = dev;
        return true;
      default:
        return false;  // arrays are not simulated
    }
  };
  uint64_t src, dst;
  if (!side(p->srcMemoryType, p->srcHost, p->srcDevice, &src)) return CUDA_ERROR_INVALID_VALUE;
  if (!side(p->dstMemoryType, p->dstHost, p->dstDevice, &dst)) return CUDA_ERROR_INVALID_VALUE;
  CopyOp c;
  c.src = src + p->srcZ * p->srcHeight * p->srcPitch + p->srcY * p->srcPitch + p->srcXInBytes;
  c.dst = dst + p->dstZ * p->dstHeight * p->dstPitch + p->dstY * p->dstPitch + p->dstXInBytes;
  c.width = p->WidthInBytes;
  c.height = p->Height;
  c.depth = p->Depth;
  c.srcPitch = p->srcPitch;
  c.dstPitch = p->dstPitch;
  c.srcHeight = p->srcHeight;
  c.dstHeight = p->dstHeight;
  if (c.width == 0 || c.height == 0 || c.depth == 0) return CUDA_ERROR_INVALID_VALUE;
  if (c.height == 1 && c.depth == 1) c.srcPitch = c.dstPitch = 0;
  if (c.depth == 1) c.srcHeight = c.dstHeight = 0;
  if (c.height > 1 && (c.srcPitch < c.width || c.dstPitch < c.width)) return CUDA_ERROR_INVALID_VALUE;
  if (c.depth > 1 && (c.srcHeight < c.height || c.dstHeight < c.height)) return CUDA_ERROR_INVALID_VALUE;
  size_t se = copyExtent(c.width, c.height, c.depth, c.srcPitch, c.srcHeight);
  size_t de = copyExtent(c.width, c.height, c.depth, c.dstPitch, c.dstHeight);
  MemClass sc = classify(c.src, se), dc = classify(c.dst, de);
  // Graph copies cannot use pageable host memory.
  if (sc == MemClass::Invalid || dc == MemClass::Invalid || sc == MemClass::PageableHost ||
      dc == MemClass::PageableHost) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = c;
  return CUDA_SUCCESS;
}

CUresult memsetFromParams(const CUDA_MEMSET_NODE_PARAMS* p, MemsetOp* out) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  unsigned e = p->elementSize;
  if (e != 1 && e != 2 && e != 4) return CUDA_ERROR_INVALID_VALUE;
  if (p->width == 0 || p->height == 0) return CUDA_ERROR_INVALID_VALUE;
  MemsetOp m;
  m.dst = p->dst;
  m.elementSize = e;
  m.value = e == 1 ? (p->value & 0xff) : (e == 2 ? (p->value & 0xffff) : p->value);
  m.width = p->width;
  m.height = p->height;
  m.pitch = p->height == 1 ? 0 : p->pitch;
  if (m.dst % e || m.pitch % e || (m.height > 1 && m.pitch < m.width * e)) return CUDA_ERROR_INVALID_VALUE;
  if (classify(m.dst, copyExtent(m.width * e, m.height, 1, m.pitch, 0)) != MemClass::Device) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = m;
  return CUDA_SUCCESS;
}

void fillKernelParams(Node* n, CUDA_KERNEL_NODE_PARAMS_v2* out) {
  const KernelLaunch& k = n->params.kernel;
  n->paramPtrs.clear();
  for (size_t off : k.kernel->offsets) n->paramPtrs.push_back(const_cast<uint8_t*>(k.params.data()) + off);
  out->func = k.handle;
  out->gridDimX = k.grid[0];
  out->gridDimY = k.grid[1];
  out->gridDimZ = k.grid[2];
  out->blockDimX = k.block[0];
  out->blockDimY = k.block[1];
  out->blockDimZ = k.block[2];
  out->sharedMemBytes = k.sharedMem;
  out->kernelParams = n->paramPtrs.empty() ? nullptr : n->paramPtrs.data();
  out->extra = nullptr;
}

std::shared_ptr<ExecSnapshot> snapshotOf(const Graph& g) {
  auto s = std::make_shared<ExecSnapshot>();
  size_t n = g.nodes.size();
  s->params.reserve(n);
  s->preds.resize(n);
  s->succs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = *g.nodes[i];
    s->params.push_back(node.params);
    for (Node* d : node.deps) {
      s->preds[i].push_back(d->index);
      s->succs[d->index].push_back(i);
    }
  }
  return s;
}

// Writable params of `node` in `ex` (copy-on-write of the snapshot).
NodeParams* execParams(Exec& ex, Node* node) {
  if (ex.snap.use_count() > 1) ex.snap = std::make_shared<ExecSnapshot>(*ex.snap);
  return &ex.snap->params[node->index];
}

CUresult execNodeLookup(CUgraphExec e, CUgraphNode h, NodeKind kind, std::shared_ptr<Exec>* ex, Node** node) {
  *ex = lookupExec(e);
  if (!*ex) return CUDA_ERROR_INVALID_VALUE;
  *node = lookupNode(h);
  if (!*node || (*node)->graph != (*ex)->source.get()) return CUDA_ERROR_INVALID_VALUE;
  if ((*ex)->snap->params[(*node)->index].kind != kind) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// Simplification: an exec runs in one context, or in contexts of one family (a
// primary context and its green contexts: each node in its own); a graph whose
// nodes belong to unrelated contexts is refused (the fake has no multi-device
// graphs).
CUresult instantiate(CUgraphExec* pexec, CUgraph g) {
  if (!pexec) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Graph> graph = lookupGraph(g);
  if (!graph || !state().graphs.count(g)) return CUDA_ERROR_INVALID_VALUE;  // not while capturing
  Context* ctx = nullptr;
  for (auto& n : graph->nodes) {
    // A kernel whose module/library was unloaded cannot be instantiated.
    if (n->params.kind == NodeKind::Kernel && n->params.kernel.kernel->unloaded) return CUDA_ERROR_INVALID_HANDLE;
    // As the real driver (measured on an H100, docs/PERF.md): a memset or copy
    // node naming memory that is no longer allocated (a stream-ordered free
    // ran) does not instantiate.
    if (n->params.kind == NodeKind::Memset) {
      const MemsetOp& m = n->params.memset;
      if (classify(m.dst, copyExtent(m.width * m.elementSize, m.height, 1, m.pitch, 0)) == MemClass::Invalid)
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (n->params.kind == NodeKind::Memcpy) {
      const CopyOp& c = n->params.copy;
      if (classify(c.dst, copyExtent(c.width, c.height, c.depth, c.dstPitch, c.dstHeight)) == MemClass::Invalid ||
          (!c.staged && classify(c.src, copyExtent(c.width, c.height, c.depth, c.srcPitch, c.srcHeight)) ==
                            MemClass::Invalid))
        return CUDA_ERROR_INVALID_VALUE;
    }
    Context* c = n->params.ctx;
    if (!c) continue;
    if (c->destroyed) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx && !sameFamily(c, ctx)) return CUDA_ERROR_INVALID_VALUE;
    ctx = ctx && c != ctx ? familyOf(c) : c;
  }
  auto ex = std::make_shared<Exec>();
  ex->ctx = ctx ? ctx : currentCtx();
  ex->stackLimit = ex->ctx->stackLimit;
  ex->stackLimitSets = ex->ctx->stackLimitSets;
  ex->source = graph;
  ex->snap = snapshotOf(*graph);
  auto h = reinterpret_cast<CUgraphExec>(ex.get());
  state().execs[h] = ex;
  ++state().counters.graphInstantiations;
  *pexec = h;
  return CUDA_SUCCESS;
}

CUresult graphLaunchImpl(bool pt, CUgraphExec e, CUstream h) {
  // SIM_GRAPH_LAUNCH_US: a slow launch (outside the simulator's lock; the
  // value is set once, when the first call parsed the environment).
  if (const unsigned us = state().graphLaunchMicros) std::this_thread::sleep_for(std::chrono::microseconds(us));
  SIM_ENTRY("cuGraphLaunch", kNeedCtx | kSteps);
  SimState& st = state();
  CUresult err;
  Stream* s = resolveStream(h, pt, &err);
  if (!s) return err;
  std::shared_ptr<Exec> ex = lookupExec(e);
  if (!ex) return CUDA_ERROR_INVALID_VALUE;
  // Simplification: an exec is launched only on a stream of its own context (or
  // of its family: its nodes run in their own contexts, wherever it is
  // launched), so its nodes run on (and are traced as) that context's device.
  if (!sameFamily(s->ctx, ex->ctx)) return CUDA_ERROR_INVALID_VALUE;
  // A node of a green context destroyed since the graph was instantiated.
  for (const NodeParams& p : ex->snap->params)
    if (p.ctx && p.ctx->destroyed && p.ctx->green) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  // An exec holding a kernel whose module/library was unloaded fails to launch.
  for (const NodeParams& p : ex->snap->params) {
    if (p.kind == NodeKind::Kernel && p.kernel.kernel->unloaded) return CUDA_ERROR_INVALID_HANDLE;
  }
  CaptureCheck cc = captureCheckForOp(s);
  if (cc.result != CUDA_SUCCESS) return cc.result;
  if (cc.capture) {
    // Simplification: child-graph nodes are not simulated.
    invalidate(s->capture.get());
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (ex->ctx->stackLimitSets != ex->stackLimitSets && ex->ctx->stackLimit < ex->stackLimit) {
    setSticky(CUDA_ERROR_LAUNCH_FAILED, "a graph made under a larger stack limit launched after cuCtxSetLimit lowered it");
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  for (const NodeParams& p : ex->snap->params)
    if (p.kind == NodeKind::Kernel) growStackFor(p.ctx ? p.ctx : ex->ctx, *p.kernel.kernel);
  auto item = std::make_unique<Item>();
  item->kind = ItemKind::GraphLaunch;
  auto run = std::make_unique<GraphRun>();
  run->snap = ex->snap;
  run->exec = e;
  run->launchId = st.nextLaunchId++;
  size_t n = ex->snap->params.size();
  run->recordTokens.resize(n);
  run->waitTokens.resize(n);
  // Wait nodes wait for the records that are latest when the graph is
  // launched; then the graph's record nodes become their events' latest. Of
  // several record nodes of one event (not ordered by the graph), which one
  // ends up latest is not specified: a random one here.
  for (size_t i = 0; i < n; ++i) {
    const NodeParams& p = ex->snap->params[i];
    if (p.kind == NodeKind::EventWait && p.event->lastRecord && !p.event->lastRecord->done)
      run->waitTokens[i] = p.event->lastRecord;
  }
  std::vector<std::pair<Event*, std::vector<size_t>>> recordsOf;  // in node order, for determinism
  for (size_t i = 0; i < n; ++i) {
    const NodeParams& p = ex->snap->params[i];
    if (p.kind != NodeKind::EventRecord) continue;
    run->recordTokens[i] = std::make_shared<Completion>();
    auto it = std::find_if(recordsOf.begin(), recordsOf.end(), [&](const auto& r) { return r.first == p.event.get(); });
    if (it == recordsOf.end()) recordsOf.push_back({p.event.get(), {i}});
    else it->second.push_back(i);
  }
  for (auto& [event, nodes] : recordsOf) {
    const size_t latest = nodes[nodes.size() == 1 ? 0 : st.rng() % nodes.size()];
    event->lastRecord = run->recordTokens[latest];
    event->capSession.reset();
    event->capNodes.clear();
  }
  item->graph = std::move(run);
  if (ex->lastLaunch && !ex->lastLaunch->done) item->deps.push_back(ex->lastLaunch);
  enqueue(s, std::move(item));
  ex->lastLaunch = s->lastDone;
  ++st.counters.graphLaunches;
  return CUDA_SUCCESS;
}

CUresult graphUploadImpl(bool pt, CUgraphExec e, CUstream h) {
  SIM_ENTRY("cuGraphUpload", kNeedCtx);
  CUresult err;
  if (!resolveStream(h, pt, &err)) return err;
  if (!lookupExec(e)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult beginCaptureImpl(const char* api, bool pt, CUstream h, CUstreamCaptureMode mode) {
  SIM_ENTRY(api, kNeedCtx);
  SimState& st = state();
  CUresult err;
  Stream* s = resolveStream(h, pt, &err);
  if (!s) return err;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (s->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  auto cs = std::make_shared<CaptureSession>();
  cs->id = st.nextCaptureId++;
  cs->graph = std::make_shared<Graph>();
  cs->origin = s;
  cs->ctx = s->ctx;
  cs->mode = mode;
  cs->owner = std::this_thread::get_id();
  cs->streams.push_back(s);
  s->capture = cs;
  s->captureDeps.clear();
  st.sessions.push_back(cs);
  ++st.counters.captures;
  return CUDA_SUCCESS;
}

CUresult endCaptureImpl(bool pt, CUstream h, CUgraph* phGraph) {
  SIM_ENTRY("cuStreamEndCapture", kNeedCtx);
  SimState& st = state();
  CUresult err;
  Stream* s = resolveStream(h, pt, &err);
  if (!s) return err;
  if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
  if (!s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  std::shared_ptr<CaptureSession> cs = s->capture;
  if (cs->origin != s) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  if (cs->mode != CU_STREAM_CAPTURE_MODE_RELAXED && cs->owner != std::this_thread::get_id()) {
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  }
  CUresult r = CUDA_SUCCESS;
  if (cs->invalidated) {
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  } else {
    // Every forked stream's last nodes must be ancestors of the origin's.
    std::unordered_set<Node*> anc;
    std::vector<Node*> work(s->captureDeps.begin(), s->captureDeps.end());
    while (!work.empty()) {
      Node* n = work.back();
      work.pop_back();
      if (!anc.insert(n).second) continue;
      for (Node* d : n->deps) work.push_back(d);
    }
    for (Stream* t : cs->streams) {
      if (t == s) continue;
      for (Node* n : t->captureDeps) {
        if (!anc.count(n)) r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
      }
    }
  }
  for (Stream* t : cs->streams) {
    t->capture.reset();
    t->captureDeps.clear();
  }
  cs->active = false;
  auto& v = st.sessions;
  v.erase(std::remove(v.begin(), v.end(), cs), v.end());
  if (r != CUDA_SUCCESS) {
    *phGraph = nullptr;
    return r;
  }
  auto gh = reinterpret_cast<CUgraph>(cs->graph.get());
  st.graphs[gh] = cs->graph;
  *phGraph = gh;
  return CUDA_SUCCESS;
}

// Status of `s` for IsCapturing / GetCaptureInfo; the legacy stream cannot be
// queried while a blocking stream captures.
CUresult captureStatus(Stream* s, CUstreamCaptureStatus* status) {
  if (s->legacy) {
    std::vector<CaptureSession*> v;
    if (blockingStreamCapturing(s->ctx, &v)) {
      for (CaptureSession* cs : v) invalidate(cs);
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  }
  if (!s->capture) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
  } else {
    *status = s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  }
  return CUDA_SUCCESS;
}

CUresult captureInfo(const char* api, bool pt, CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id,
                     CUgraph* graph, const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* numDeps) {
  SIM_ENTRY(api, kNeedCtx);
  CUresult err;
  Stream* s = resolveStream(h, pt, &err);
  if (!s) return err;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = captureStatus(s, status); r != CUDA_SUCCESS) return r;
  if (*status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_SUCCESS;
  if (id) *id = s->capture->id;
  if (*status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_SUCCESS;
  if (graph) *graph = reinterpret_cast<CUgraph>(s->capture->graph.get());
  s->infoDeps.clear();
  for (Node* n : s->captureDeps) s->infoDeps.push_back(reinterpret_cast<CUgraphNode>(n));
  s->infoEdges.assign(s->captureDeps.size(), CUgraphEdgeData{});
  if (deps) *deps = s->infoDeps.empty() ? nullptr : s->infoDeps.data();
  if (edges) *edges = s->infoEdges.empty() ? nullptr : s->infoEdges.data();
  if (numDeps) *numDeps = s->infoDeps.size();
  return CUDA_SUCCESS;
}

CUresult isCapturingImpl(bool pt, CUstream h, CUstreamCaptureStatus* status) {
  SIM_ENTRY("cuStreamIsCapturing", kNeedCtx);
  CUresult err;
  Stream* s = resolveStream(h, pt, &err);
  if (!s) return err;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  return captureStatus(s, status);
}

CUresult addNode(CUgraphNode* ph, CUgraph g, const CUgraphNode* deps, size_t n, NodeParams&& p) {
  if (!ph || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Graph> graph = lookupGraph(g);
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Node*> d;
  for (size_t i = 0; i < n; ++i) {
    Node* dn = lookupNode(deps[i]);
    if (!dn || dn->graph != graph.get()) return CUDA_ERROR_INVALID_VALUE;
    d.push_back(dn);
  }
  *ph = reinterpret_cast<CUgraphNode>(newNode(graph.get(), std::move(p), d));
  return CUDA_SUCCESS;
}

}  // namespace

void endExecsOf(Context* ctx) {
  SimState& st = state();
  for (auto it = st.execs.begin(); it != st.execs.end();) {
    if (familyOf(it->second->ctx) != ctx) {
      ++it;
      continue;
    }
    st.endedExecs.push_back(it->second);
    st.endedExecHandles.insert(it->first);
    it = st.execs.erase(it);
  }
}

CaptureCheck captureCheckForOp(Stream* s) {
  CaptureCheck cc;
  if (s->capture) {
    if (s->capture->invalidated) {
      cc.result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
      cc.capture = true;
    }
    return cc;
  }
  if (s->legacy) {
    std::vector<CaptureSession*> v;
    if (blockingStreamCapturing(s->ctx, &v)) {
      for (CaptureSession* cs : v) invalidate(cs);
      cc.result = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  }
  return cc;
}

Node* addCaptureNode(Stream* s, NodeParams&& p) {
  p.ctx = s->ctx;
  Node* n = newNode(s->capture->graph.get(), std::move(p), s->captureDeps);
  s->captureDeps.assign(1, n);
  return n;
}

void invalidate(CaptureSession* cs) {
  if (cs) cs->invalidated = true;
}

bool blockingStreamCapturing(Context* ctx, std::vector<CaptureSession*>* out) {
  bool any = false;
  for (auto& cs : state().sessions) {
    if (!cs->active) continue;
    for (Stream* t : cs->streams) {
      if (t->blocking && !t->legacy && t->ctx == ctx) {
        out->push_back(cs.get());
        any = true;
        break;
      }
    }
  }
  return any;
}

CUresult checkUnsafeCall() {
  if (tlsCaptureMode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  bool refused = false;
  auto me = std::this_thread::get_id();
  for (auto& cs : state().sessions) {
    if (!cs->active) continue;
    bool mine = cs->owner == me;
    if ((mine && cs->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
        (!mine && tlsCaptureMode == CU_STREAM_CAPTURE_MODE_GLOBAL && cs->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
      invalidate(cs.get());
      refused = true;
    }
  }
  return refused ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult checkSyncOfStream(Stream* s) {
  if (s->capture) {
    invalidate(s->capture.get());
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (s->legacy) {
    std::vector<CaptureSession*> v;
    if (blockingStreamCapturing(s->ctx, &v)) {
      for (CaptureSession* cs : v) invalidate(cs);
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace sim

using namespace sim;

extern "C" {

// ---------------------------------------------------------------- capture

CUresult CUDAAPI cuStreamBeginCapture(CUstream h) {
  return beginCaptureImpl("cuStreamBeginCapture", false, h, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream h) {
  return beginCaptureImpl("cuStreamBeginCapture", true, h, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  return beginCaptureImpl("cuStreamBeginCapture_v2", false, h, mode);
}
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  return beginCaptureImpl("cuStreamBeginCapture_v2", true, h, mode);
}
CUresult CUDAAPI cuStreamEndCapture(CUstream h, CUgraph* g) { return endCaptureImpl(false, h, g); }
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream h, CUgraph* g) { return endCaptureImpl(true, h, g); }
CUresult CUDAAPI cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* st) { return isCapturingImpl(false, h, st); }
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus* st) {
  return isCapturingImpl(true, h, st);
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id) {
  return captureInfo("cuStreamGetCaptureInfo", false, h, st, id, nullptr, nullptr, nullptr, nullptr);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id) {
  return captureInfo("cuStreamGetCaptureInfo", true, h, st, id, nullptr, nullptr, nullptr, nullptr);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                                           const CUgraphNode** deps, size_t* n) {
  return captureInfo("cuStreamGetCaptureInfo_v2", false, h, st, id, g, deps, nullptr, n);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                                                const CUgraphNode** deps, size_t* n) {
  return captureInfo("cuStreamGetCaptureInfo_v2", true, h, st, id, g, deps, nullptr, n);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                                           const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
  return captureInfo("cuStreamGetCaptureInfo_v3", false, h, st, id, g, deps, edges, n);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                                                const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
  return captureInfo("cuStreamGetCaptureInfo_v3", true, h, st, id, g, deps, edges, n);
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  SIM_ENTRY("cuThreadExchangeStreamCaptureMode", kNoSticky);
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode m = *mode;
  if (m != CU_STREAM_CAPTURE_MODE_GLOBAL && m != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      m != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *mode = tlsCaptureMode;
  tlsCaptureMode = m;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- graphs

CUresult CUDAAPI cuGraphCreate(CUgraph* ph, unsigned int flags) {
  SIM_ENTRY("cuGraphCreate", kNeedCtx);
  if (!ph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto g = std::make_shared<Graph>();
  auto h = reinterpret_cast<CUgraph>(g.get());
  state().graphs[h] = g;
  *ph = h;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
  SIM_ENTRY("cuGraphDestroy", kNoSticky);
  if (!state().graphs.erase(g)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* num) {
  SIM_ENTRY("cuGraphGetNodes", kNoSticky);
  std::shared_ptr<Graph> graph = lookupGraph(g);
  if (!graph || !num) return CUDA_ERROR_INVALID_VALUE;
  size_t n = graph->nodes.size();
  if (nodes) {
    for (size_t i = 0; i < *num; ++i) {
      nodes[i] = i < n ? reinterpret_cast<CUgraphNode>(graph->nodes[i].get()) : nullptr;
    }
  }
  *num = n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType* type) {
  SIM_ENTRY("cuGraphNodeGetType", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = nodeType(n->params.kind);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode h, CUgraphNode* deps, size_t* num) {
  SIM_ENTRY("cuGraphNodeGetDependencies", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !num) return CUDA_ERROR_INVALID_VALUE;
  if (deps) {
    for (size_t i = 0; i < *num; ++i)
      deps[i] = i < n->deps.size() ? reinterpret_cast<CUgraphNode>(n->deps[i]) : nullptr;
  }
  *num = n->deps.size();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS_v2* p) {
  SIM_ENTRY("cuGraphKernelNodeGetParams_v2", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !p || n->params.kind != NodeKind::Kernel) return CUDA_ERROR_INVALID_VALUE;
  fillKernelParams(n, p);
  p->kern = nullptr;
  p->ctx = nullptr;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS_v1* p) {
  SIM_ENTRY("cuGraphKernelNodeGetParams", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !p || n->params.kind != NodeKind::Kernel) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS_v2 v2{};
  fillKernelParams(n, &v2);
  std::memcpy(p, &v2, sizeof *p);  // v1 is a prefix of v2
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D* p) {
  SIM_ENTRY("cuGraphMemcpyNodeGetParams", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !p || n->params.kind != NodeKind::Memcpy) return CUDA_ERROR_INVALID_VALUE;
  *p = n->params.copyRaw;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS* p) {
  SIM_ENTRY("cuGraphMemsetNodeGetParams", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !p || n->params.kind != NodeKind::Memset) return CUDA_ERROR_INVALID_VALUE;
  const MemsetOp& m = n->params.memset;
  p->dst = m.dst;
  p->pitch = m.pitch;
  p->value = m.value;
  p->elementSize = m.elementSize;
  p->width = m.width;
  p->height = m.height;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode h, CUDA_HOST_NODE_PARAMS* p) {
  SIM_ENTRY("cuGraphHostNodeGetParams", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !p || n->params.kind != NodeKind::Host) return CUDA_ERROR_INVALID_VALUE;
  p->fn = n->params.host.fn;
  p->userData = n->params.host.userData;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetAttribute(CUgraphNode h, CUkernelNodeAttrID attr, CUkernelNodeAttrValue* value) {
  SIM_ENTRY("cuGraphKernelNodeGetAttribute", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !value || n->params.kind != NodeKind::Kernel || attr <= 0 || attr >= CU_LAUNCH_ATTRIBUTE_MAX) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::memset(value, 0, sizeof *value);
  for (const CUlaunchAttribute& a : n->params.kernel.attrs) {
    if (a.id == attr) *value = a.value;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeSetAttribute(CUgraphNode h, CUkernelNodeAttrID attr,
                                               const CUkernelNodeAttrValue* value) {
  SIM_ENTRY("cuGraphKernelNodeSetAttribute", kNoSticky);
  Node* n = lookupNode(h);
  if (!n || !value || n->params.kind != NodeKind::Kernel || attr <= 0 || attr >= CU_LAUNCH_ATTRIBUTE_MAX) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto& attrs = n->params.kernel.attrs;
  for (CUlaunchAttribute& a : attrs) {
    if (a.id == attr) {
      a.value = *value;
      return CUDA_SUCCESS;
    }
  }
  CUlaunchAttribute a;
  std::memset(&a, 0, sizeof a);
  a.id = attr;
  a.value = *value;
  attrs.push_back(a);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- explicit node API

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* ph, CUgraph g, const CUgraphNode* deps, size_t n,
                                         const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  SIM_ENTRY("cuGraphAddKernelNode_v2", kNeedCtx);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  NodeParams np;
  np.kind = NodeKind::Kernel;
  np.ctx = p->ctx ? lookupContext(p->ctx) : currentCtx();
  if (!np.ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = buildKernelFromNodeParams(*p, &np.kernel); r != CUDA_SUCCESS) return r;
  return addNode(ph, g, deps, n, std::move(np));
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode* ph, CUgraph g, const CUgraphNode* deps, size_t n,
                                      const CUDA_MEMCPY3D* p, CUcontext ctx) {
  SIM_ENTRY("cuGraphAddMemcpyNode", kNeedCtx);
  NodeParams np;
  np.kind = NodeKind::Memcpy;
  np.ctx = ctx ? lookupContext(ctx) : currentCtx();
  if (!np.ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = copyFrom3D(p, &np.copy); r != CUDA_SUCCESS) return r;
  np.copyRaw = *p;
  return addNode(ph, g, deps, n, std::move(np));
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode* ph, CUgraph g, const CUgraphNode* deps, size_t n,
                                      const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx) {
  SIM_ENTRY("cuGraphAddMemsetNode", kNeedCtx);
  NodeParams np;
  np.kind = NodeKind::Memset;
  np.ctx = ctx ? lookupContext(ctx) : currentCtx();
  if (!np.ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = memsetFromParams(p, &np.memset); r != CUDA_SUCCESS) return r;
  return addNode(ph, g, deps, n, std::move(np));
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode* ph, CUgraph g, const CUgraphNode* deps, size_t n,
                                    const CUDA_HOST_NODE_PARAMS* p) {
  SIM_ENTRY("cuGraphAddHostNode", kNeedCtx);
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  NodeParams np;
  np.kind = NodeKind::Host;
  np.host = HostCall{p->fn, p->userData};
  return addNode(ph, g, deps, n, std::move(np));
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode* ph, CUgraph g, const CUgraphNode* deps, size_t n) {
  SIM_ENTRY("cuGraphAddEmptyNode", kNeedCtx);
  NodeParams np;
  np.kind = NodeKind::Empty;
  return addNode(ph, g, deps, n, std::move(np));
}

CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode* ph, CUgraph g, const CUgraphNode* deps, size_t n, CUevent e) {
  SIM_ENTRY("cuGraphAddEventRecordNode", kNeedCtx);
  NodeParams np;
  np.kind = NodeKind::EventRecord;
  np.event = lookupEvent(e);
  if (!np.event) return CUDA_ERROR_INVALID_VALUE;
  return addNode(ph, g, deps, n, std::move(np));
}

CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode* ph, CUgraph g, const CUgraphNode* deps, size_t n, CUevent e) {
  SIM_ENTRY("cuGraphAddEventWaitNode", kNeedCtx);
  NodeParams np;
  np.kind = NodeKind::EventWait;
  np.event = lookupEvent(e);
  if (!np.event) return CUDA_ERROR_INVALID_VALUE;
  return addNode(ph, g, deps, n, std::move(np));
}

// ---------------------------------------------------------------- executable graphs

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* pexec, CUgraph g, unsigned long long flags) {
  SIM_ENTRY("cuGraphInstantiateWithFlags", kNeedCtx);
  const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                   CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                   CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  return instantiate(pexec, g);
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* pexec, CUgraph g, CUgraphNode* errNode, char* log, size_t logSize) {
  SIM_ENTRY("cuGraphInstantiate", kNeedCtx);
  if (errNode) *errNode = nullptr;
  if (log && logSize) log[0] = '\0';
  return instantiate(pexec, g);
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* pexec, CUgraph g, CUgraphNode* errNode, char* log, size_t logSize) {
  SIM_ENTRY("cuGraphInstantiate_v2", kNeedCtx);
  if (errNode) *errNode = nullptr;
  if (log && logSize) log[0] = '\0';
  return instantiate(pexec, g);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
  SIM_ENTRY("cuGraphExecDestroy", kNoSticky);
  // In-flight launches keep their snapshot alive and complete normally.
  if (!state().execs.erase(e)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream h) { return graphLaunchImpl(false, e, h); }
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec e, CUstream h) { return graphLaunchImpl(true, e, h); }
CUresult CUDAAPI cuGraphUpload(CUgraphExec e, CUstream h) { return graphUploadImpl(false, e, h); }
CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec e, CUstream h) { return graphUploadImpl(true, e, h); }

static CUresult execKernelSet(const char* api, CUgraphExec e, CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v2& p) {
  SIM_ENTRY(api, kNeedCtx);
  std::shared_ptr<Exec> ex;
  Node* node;
  if (CUresult r = execNodeLookup(e, h, NodeKind::Kernel, &ex, &node); r != CUDA_SUCCESS) return r;
  const KernelLaunch& cur = ex->snap->params[node->index].kernel;
  CUfunction f = p.func ? p.func : reinterpret_cast<CUfunction>(p.kern);
  if (f != cur.handle) return CUDA_ERROR_INVALID_VALUE;  // the function cannot change
  KernelLaunch k;
  if (CUresult r = buildKernelFromNodeParams(p, &k); r != CUDA_SUCCESS) return r;
  k.attrs = cur.attrs;
  k.clusterWidth = cur.clusterWidth;
  execParams(*ex, node)->kernel = std::move(k);
  ++state().counters.execNodeParamUpdates;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v2* p) {
  if (!p) {
    SIM_ENTRY("cuGraphExecKernelNodeSetParams_v2", kNeedCtx);
    return CUDA_ERROR_INVALID_VALUE;
  }
  return execKernelSet("cuGraphExecKernelNodeSetParams_v2", e, h, *p);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  if (!p) {
    SIM_ENTRY("cuGraphExecKernelNodeSetParams", kNeedCtx);
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUDA_KERNEL_NODE_PARAMS_v2 v2{};
  std::memcpy(&v2, p, sizeof *p);
  return execKernelSet("cuGraphExecKernelNodeSetParams", e, h, v2);
}

static CUresult execEventSet(const char* api, CUgraphExec e, CUgraphNode h, NodeKind kind, CUevent ev) {
  SIM_ENTRY(api, kNeedCtx);
  std::shared_ptr<Exec> ex;
  Node* node;
  if (CUresult r = execNodeLookup(e, h, kind, &ex, &node); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Event> event = lookupEvent(ev);
  if (!event) return CUDA_ERROR_INVALID_VALUE;
  // As measured on an H100 (driver 580): once the event a node holds was
  // destroyed, that node's event cannot be set any more.
  if (ex->snap->params[node->index].event->destroyed) return CUDA_ERROR_INVALID_VALUE;
  execParams(*ex, node)->event = std::move(event);
  ++state().counters.execNodeParamUpdates;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecEventRecordNodeSetEvent(CUgraphExec e, CUgraphNode h, CUevent ev) {
  return execEventSet("cuGraphExecEventRecordNodeSetEvent", e, h, NodeKind::EventRecord, ev);
}

CUresult CUDAAPI cuGraphExecEventWaitNodeSetEvent(CUgraphExec e, CUgraphNode h, CUevent ev) {
  return execEventSet("cuGraphExecEventWaitNodeSetEvent", e, h, NodeKind::EventWait, ev);
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec e, CUgraphNode h, const CUDA_MEMCPY3D* p, CUcontext ctx) {
  SIM_ENTRY("cuGraphExecMemcpyNodeSetParams", kNeedCtx);
  (void)ctx;
  std::shared_ptr<Exec> ex;
  Node* node;
  if (CUresult r = execNodeLookup(e, h, NodeKind::Memcpy, &ex, &node); r != CUDA_SUCCESS) return r;
  CopyOp c;
  if (CUresult r = copyFrom3D(p, &c); r != CUDA_SUCCESS) return r;
  const CopyOp& cur = ex->snap->params[node->index].copy;
  // The operand kinds (device vs host) must not change.
  if ((classify(c.src, 1) == MemClass::Device) != (classify(cur.src, 1) == MemClass::Device) ||
      (classify(c.dst, 1) == MemClass::Device) != (classify(cur.dst, 1) == MemClass::Device)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  NodeParams* np = execParams(*ex, node);
  np->copy = c;
  np->copyRaw = *p;
  ++state().counters.execNodeParamUpdates;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS* p,
                                                CUcontext ctx) {
  SIM_ENTRY("cuGraphExecMemsetNodeSetParams", kNeedCtx);
  (void)ctx;
  std::shared_ptr<Exec> ex;
  Node* node;
  if (CUresult r = execNodeLookup(e, h, NodeKind::Memset, &ex, &node); r != CUDA_SUCCESS) return r;
  MemsetOp m;
  if (CUresult r = memsetFromParams(p, &m); r != CUDA_SUCCESS) return r;
  const MemsetOp& cur = ex->snap->params[node->index].memset;
  // As in CUDA: both operands must be 1-D, and the element size must not change.
  if (m.height != 1 || cur.height != 1 || m.elementSize != cur.elementSize) return CUDA_ERROR_INVALID_VALUE;
  execParams(*ex, node)->memset = m;
  ++state().counters.execNodeParamUpdates;
  return CUDA_SUCCESS;
}

}  // extern "C"
