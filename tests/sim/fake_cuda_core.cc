// fake_cuda_core.cc - simulator state, API prologue, seeded scheduler, effect
// execution, executed trace and the test-only sim* API.
//
// Invariants:
//  - The scheduler only ever executes the head item of a stream (or a ready node of
//    the graph at a stream's head), so per-stream FIFO order is structural.
//  - Random choices come from one seeded generator consumed in a deterministic
//    order for a single-threaded caller; informational driver calls (names,
//    attributes, proc lookups) take no steps, so an interposer that adds such calls
//    does not change the schedule.
//  - Every executed effect is appended to the trace at the moment it executes.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <pthread.h>

#include "fake_cuda_internal.h"

namespace sim {

namespace {

thread_local int tlsInHostFn = 0;

// True in a child process forked after cuInit. Every call there fails with
// CUDA_ERROR_NOT_INITIALIZED (the real driver refuses them too:
// cudaErrorInitializationError in the fork_child trap on an H100) and is named
// on stderr, so a test sees which calls a forked child made.
std::atomic<bool> g_forkedChild{false};
[[maybe_unused]] const bool g_forkWatch = [] {
  // The child has one thread: reading the state without its lock is safe.
  pthread_atfork(nullptr, nullptr, [] {
    if (state().initialized) g_forkedChild.store(true, std::memory_order_relaxed);
  });
  return true;
}();
// The calling thread's per-thread streams, per context; never destroyed (see
// ctxStack in fake_cuda_api.cc).
std::map<Context*, Stream*>& perThreadStreams() {
  thread_local auto* streams = new std::map<Context*, Stream*>();
  return *streams;
}

bool apiMatches(const std::string& spec, const char* api) {
  if (spec == api) return true;
  // Base name: strip a trailing _v<digits>.
  std::string name(api);
  size_t pos = name.rfind("_v");
  if (pos != std::string::npos && pos + 2 < name.size() &&
      std::all_of(name.begin() + pos + 2, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return spec == name.substr(0, pos);
  }
  return false;
}

void parseFailSpec(const char* spec) {
  SimState& st = state();
  std::string s(spec);
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(start, end - start);
    size_t c1 = item.find(':');
    size_t c2 = c1 == std::string::npos ? std::string::npos : item.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) {
      fatal("SIM_FAIL: bad entry '" + item + "' (want api:nth:code)");
    }
    Injection inj;
    inj.api = item.substr(0, c1);
    inj.remaining = std::atoi(item.substr(c1 + 1, c2 - c1 - 1).c_str());
    inj.code = static_cast<CUresult>(std::atoi(item.substr(c2 + 1).c_str()));
    if (inj.remaining < 1) fatal("SIM_FAIL: nth must be >= 1 in '" + item + "'");
    st.injections.push_back(inj);
    start = end + 1;
  }
}

std::string describeItem(const Item& it) {
  switch (it.kind) {
    case ItemKind::Kernel:
      return "kernel " + (it.kernel.kernel ? it.kernel.kernel->name : "?");
    case ItemKind::Memcpy:
      return "memcpy";
    case ItemKind::Memset:
      return "memset";
    case ItemKind::HostFn:
      return "host function";
    case ItemKind::EventRecord:
      return "event record";
    case ItemKind::EventWait:
      return "event wait";
    case ItemKind::GraphLaunch:
      return "graph launch";
    case ItemKind::AllocAsync:
      return "alloc async";
    case ItemKind::FreeAsync:
      return "free async";
  }
  return "?";
}

// A gate kernel (KernelEffect::Gate) not yet released by the host.
bool gateClosed(const KernelLaunch& k) {
  const KernelObj* ko = k.kernel;
  if (!ko || ko->effect != KernelEffect::Gate) return false;
  uint64_t flag, threshold;
  std::memcpy(&flag, k.params.data() + ko->offsets[0], 8);
  std::memcpy(&threshold, k.params.data() + ko->offsets[2], 8);
  if (classify(flag, 8) == MemClass::Invalid) return false;  // faults when it runs
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const void*>(flag), 8);
  return v < threshold;
}

bool graphNodeRunnable(const GraphRun& g, size_t i) {
  if (g.state[i] != 0 || g.pendingPreds[i] != 0) return false;
  const NodeParams& p = g.snap->params[i];
  if (p.kind == NodeKind::Kernel && gateClosed(p.kernel)) return false;
  const CompletionPtr& w = g.waitTokens[i];
  return !w || w->done;
}

bool graphHasRunnableNode(const GraphRun& g) {
  for (size_t i = 0; i < g.state.size(); ++i) {
    if (graphNodeRunnable(g, i)) return true;
  }
  return false;
}

bool headReady(Stream* s) {
  if (s->hostBusy || s->queue.empty()) return false;
  Item* it = s->queue.front().get();
  if (it->kind == ItemKind::GraphLaunch && it->graph->started) {
    return graphHasRunnableNode(*it->graph);
  }
  if (it->kind == ItemKind::Kernel && gateClosed(it->kernel)) return false;
  auto& deps = it->deps;
  deps.erase(std::remove_if(deps.begin(), deps.end(), [](const CompletionPtr& c) { return c->done; }), deps.end());
  return deps.empty();
}

void runHost(Lock& lk, const HostCall& hc, const EffectSource& src) {
  SimState& st = state();
  TraceEntry t;
  t.e.kind = SIM_EFFECT_HOST_FUNC;
  t.e.fn = hc.fn;
  t.e.userData = hc.userData;
  recordEffect(std::move(t), src);
  ++st.hostCallsInFlight;
  ++tlsInHostFn;
  lk.unlock();
  hc.fn(hc.userData);
  lk.lock();
  --tlsInHostFn;
  --st.hostCallsInFlight;
  st.cv.notify_all();
}

void finishHead(Stream* s) {
  SimState& st = state();
  st.timeUs += 1.0;
  Item* it = s->queue.front().get();
  it->done->done = true;
  it->done->timeUs = st.timeUs;
  s->queue.pop_front();
  if (!st.joins.empty()) settleJoins();
  if (s->destroyed && streamIdle(s)) {
    auto& v = st.streams;
    v.erase(std::remove_if(v.begin(), v.end(), [s](const std::shared_ptr<Stream>& p) { return p.get() == s; }),
            v.end());
  }
}

void startGraph(GraphRun& g) {
  size_t n = g.snap->params.size();
  g.pendingPreds.resize(n);
  g.state.assign(n, 0);
  for (size_t i = 0; i < n; ++i) g.pendingPreds[i] = static_cast<int>(g.snap->preds[i].size());
  g.started = true;
}

// Executes one random runnable node of a started graph; false if none is runnable.
bool runOneNode(Lock& lk, GraphRun& g, const EffectSource& src) {
  SimState& st = state();
  std::vector<size_t> ready;
  for (size_t i = 0; i < g.state.size(); ++i) {
    if (graphNodeRunnable(g, i)) ready.push_back(i);
  }
  if (ready.empty()) return false;
  size_t i = ready[st.rng() % ready.size()];
  const NodeParams& p = g.snap->params[i];
  g.state[i] = 1;
  // A node runs in its own context (of the launch stream's family), a host
  // or empty node in the launch stream's.
  EffectSource nsrc = src;
  nsrc.ctx = p.ctx;
  switch (p.kind) {
    case NodeKind::Kernel:
      execKernel(p.kernel, nsrc);
      break;
    case NodeKind::Memcpy:
      execCopy(p.copy, nsrc);
      break;
    case NodeKind::Memset:
      execMemset(p.memset, nsrc);
      break;
    case NodeKind::Host:
      runHost(lk, p.host, nsrc);
      break;
    case NodeKind::EventRecord:
      if (g.recordTokens[i]) {
        g.recordTokens[i]->done = true;
        g.recordTokens[i]->timeUs = st.timeUs;
        if (!st.joins.empty()) settleJoins();
      }
      break;
    case NodeKind::EventWait:
    case NodeKind::Empty:
      break;
  }
  st.timeUs += 1.0;
  g.state[i] = 2;
  ++g.doneCount;
  for (size_t succ : g.snap->succs[i]) --g.pendingPreds[succ];
  return true;
}

void executeHead(Lock& lk, const std::shared_ptr<Stream>& keep) {
  Stream* s = keep.get();
  Item* it = s->queue.front().get();
  EffectSource src{s, false, nullptr, 0};
  switch (it->kind) {
    case ItemKind::Kernel:
      execKernel(it->kernel, src);
      break;
    case ItemKind::Memcpy:
      execCopy(it->copy, src);
      break;
    case ItemKind::Memset:
      execMemset(it->memset, src);
      break;
    case ItemKind::HostFn:
      s->hostBusy = true;
      runHost(lk, it->host, src);
      s->hostBusy = false;
      break;
    case ItemKind::EventRecord:
    case ItemKind::EventWait:
    case ItemKind::AllocAsync:
      break;
    case ItemKind::FreeAsync:
      if (deviceFreeLocked(it->ptr)) ++state().counters.freesAsyncRun;
      break;
    case ItemKind::GraphLaunch: {
      GraphRun& g = *it->graph;
      if (!g.started) startGraph(g);
      EffectSource gsrc{s, true, g.exec, g.launchId};
      runOneNode(lk, g, gsrc);
      // Another thread may have finished the graph while a host node ran unlocked.
      if (s->queue.empty() || s->queue.front().get() != it) return;
      if (g.doneCount < g.state.size()) return;
      break;
    }
  }
  finishHead(s);
}

}  // namespace

SimState& state() {
  static SimState* s = new SimState();  // never destroyed: host threads may outlive exit
  return *s;
}

Graph::~Graph() {
  SimState& st = state();
  for (auto& n : nodes) st.liveNodes.erase(n.get());
}

void fatal(const std::string& msg) {
  std::fprintf(stderr, "sim fatal: %s\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

void setSticky(CUresult code, const std::string& why) {
  SimState& st = state();
  if (st.sticky == CUDA_SUCCESS) {
    std::fprintf(stderr, "sim: sticky error %d: %s\n", static_cast<int>(code), why.c_str());
    st.sticky = code;
  }
}

void parseEnvLocked() {
  SimState& st = state();
  if (st.envParsed) return;
  st.envParsed = true;
  if (const char* s = std::getenv("SIM_SEED")) st.rng.seed(std::strtoull(s, nullptr, 0));
  if (const char* s = std::getenv("SIM_STEPS")) st.maxSteps = static_cast<unsigned>(std::atoi(s));
  if (const char* s = std::getenv("SIM_DEVICES")) st.deviceCount = std::clamp(std::atoi(s), 1, 8);
  if (const char* s = std::getenv("SIM_FAIL")) parseFailSpec(s);
  if (const char* s = std::getenv("SIM_REFUSE_CAPTURE")) st.refuseCaptureKernel = s;
  if (const char* s = std::getenv("SIM_GRAPH_LAUNCH_US")) st.graphLaunchMicros = static_cast<unsigned>(std::atoi(s));
  if (const char* s = std::getenv("SIM_ASYNC_POOL_BYTES")) st.asyncPoolBytes = std::strtoull(s, nullptr, 0);
  if (const char* s = std::getenv("SIM_STRICT_HANDLES")) st.strictHandles = std::strcmp(s, "0") != 0;
  if (const char* s = std::getenv("SIM_KERNEL_STREAM_CONTEXT")) st.kernelStreamContext = std::strcmp(s, "1") == 0;
  // SIM_ASYNC_US=N: a "GPU" thread also makes progress every N microseconds,
  // so work runs even while the host makes no driver call (not deterministic).
  if (const char* s = std::getenv("SIM_ASYNC_US")) {
    const unsigned us = static_cast<unsigned>(std::atoi(s));
    if (us) {
      std::thread([us] {
        for (;;) {
          std::this_thread::sleep_for(std::chrono::microseconds(us));
          Lock lk(state().mutex);
          while (step(lk)) {
          }
        }
      }).detach();
    }
  }
}

ApiGuard::ApiGuard(const char* api, unsigned flags) {
  if (g_forkedChild.load(std::memory_order_relaxed)) {
    std::fprintf(stderr, "sim: %s called in a forked child\n", api);
    result_ = CUDA_ERROR_NOT_INITIALIZED;
    return;
  }
  if (tlsInHostFn > 0) {
    result_ = CUDA_ERROR_NOT_PERMITTED;  // CUDA calls are illegal inside host functions
    return;
  }
  lock_ = Lock(state().mutex);
  SimState& st = state();
  parseEnvLocked();
  CUresult injected = CUDA_SUCCESS;
  for (auto it = st.injections.begin(); it != st.injections.end();) {
    if (apiMatches(it->api, api) && --it->remaining == 0) {
      if (injected == CUDA_SUCCESS) injected = it->code;
      it = st.injections.erase(it);
    } else {
      ++it;
    }
  }
  if (injected != CUDA_SUCCESS) {
    ++st.counters.injectedFailures;
    result_ = injected;
    return;
  }
  if (!(flags & kNoInit) && !st.initialized) {
    result_ = CUDA_ERROR_NOT_INITIALIZED;
    return;
  }
  if (!(flags & kNoSticky) && st.sticky != CUDA_SUCCESS) {
    result_ = st.sticky;
    return;
  }
  if (flags & kNeedCtx) {
    if (currentCtx() == nullptr) {
      result_ = CUDA_ERROR_INVALID_CONTEXT;
      return;
    }
  }
  if (flags & kSteps) randomSteps(lock_);
}

bool step(Lock& lk) {
  SimState& st = state();
  std::vector<std::shared_ptr<Stream>> cands;
  for (auto& s : st.streams) {
    if (headReady(s.get())) cands.push_back(s);
  }
  if (cands.empty()) return false;
  std::shared_ptr<Stream> s = cands[st.rng() % cands.size()];
  executeHead(lk, s);
  return true;
}

void randomSteps(Lock& lk, unsigned minSteps) {
  SimState& st = state();
  unsigned n = static_cast<unsigned>(st.rng() % (st.maxSteps + 1));
  n = std::max(n, minSteps);
  for (unsigned i = 0; i < n; ++i) {
    if (!step(lk)) break;
  }
}

uintptr_t freshHandle() { return uintptr_t{0x5117} << 32 | (++state().nextFreshHandle << 4); }

bool streamIdle(const Stream* s) { return s->queue.empty() && !s->hostBusy; }

bool allIdle() {
  for (auto& s : state().streams) {
    if (!streamIdle(s.get())) return false;
  }
  return true;
}

void drainAll(Lock& lk, const char* what) {
  drainUntil(
      lk, [] { return allIdle(); }, what);
}

void deadlock(const char* what) {
  SimState& st = state();
  std::fprintf(stderr, "sim deadlock: %s: nothing is runnable but the condition is not met\n", what);
  for (auto& s : st.streams) {
    if (s->queue.empty()) continue;
    const Item& head = *s->queue.front();
    std::fprintf(stderr, "  stream %" PRIu64 " (device %d)%s: %zu pending, head = %s waiting on %zu unfinished item(s)\n",
                 s->id, s->ctx ? s->ctx->device : -1,
                 s->legacy ? " (legacy)" : (s->perThread ? " (per-thread)" : ""), s->queue.size(),
                 describeItem(head).c_str(), head.deps.size());
  }
  std::fprintf(stderr, "  (this indicates a dependency on work that was never issued)\n");
  std::fflush(stderr);
  std::abort();
}

Stream* legacyStreamOf(Context* ctx) {
  if (!ctx->legacy) {
    SimState& st = state();
    auto l = std::make_shared<Stream>();
    l->id = st.nextStreamId++;
    l->ctx = ctx;
    l->handle = CU_STREAM_LEGACY;
    l->legacy = true;
    l->blocking = true;
    ctx->legacy = l;
    st.streams.push_back(l);
  }
  return ctx->legacy.get();
}

CompletionPtr joinedCompletion(std::vector<CompletionPtr> all) {
  SimState& st = state();
  auto joined = std::make_shared<Completion>();
  st.joins.push_back({joined, std::move(all)});
  settleJoins();
  return joined;
}

void settleJoins() {
  SimState& st = state();
  auto& joins = st.joins;
  for (size_t i = 0; i < joins.size();) {
    Join& j = joins[i];
    if (std::any_of(j.parts.begin(), j.parts.end(), [](const CompletionPtr& c) { return !c->done; })) {
      ++i;
      continue;
    }
    j.joined->timeUs = 0;
    for (const CompletionPtr& c : j.parts) j.joined->timeUs = std::max(j.joined->timeUs, c->timeUs);
    j.joined->done = true;
    joins.erase(joins.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

Stream* threadPerThreadStream() {
  Context* ctx = currentCtx();
  return ctx ? perThreadStreamOf(ctx) : nullptr;
}

Stream* perThreadStreamOf(Context* ctx) {
  Stream*& slot = perThreadStreams()[ctx];
  if (slot) return slot;
  SimState& st = state();
  auto s = std::make_shared<Stream>();
  s->id = st.nextStreamId++;
  s->ctx = ctx;
  s->handle = CU_STREAM_PER_THREAD;
  s->perThread = true;
  s->thread = std::this_thread::get_id();
  s->blocking = true;
  st.streams.push_back(s);
  slot = s.get();
  return slot;
}

// NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name streams of the current
// context; a created handle names its own stream, whichever context is current.
// A green context's converted context has no usable per-thread stream: while
// it is current, CU_STREAM_PER_THREAD (or NULL through a _ptsz/_ptds entry
// point) is refused with CUDA_ERROR_INVALID_HANDLE, as measured on an H100
// (driver 580: launches, cuStreamQuery, cuStreamSynchronize; cuda.h documents
// it for cuStreamGetCtx_v2). Its legacy stream stays usable.
Stream* resolveStream(CUstream h, bool perThreadVariant, CUresult* err) {
  SimState& st = state();
  *err = CUDA_SUCCESS;
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    Context* ctx = currentCtx();
    if (!ctx) {
      *err = CUDA_ERROR_INVALID_CONTEXT;
      return nullptr;
    }
    bool pt = h == CU_STREAM_PER_THREAD || (h == nullptr && perThreadVariant);
    if (pt && ctx->green) {
      *err = CUDA_ERROR_INVALID_HANDLE;
      return nullptr;
    }
    return pt ? threadPerThreadStream() : legacyStreamOf(ctx);
  }
  auto it = st.streamByHandle.find(h);
  // A stream of a destroyed green context keeps its handle (cuGreenCtxDestroy
  // does not destroy it); every call naming it fails, as cuda.h documents.
  if (it != st.streamByHandle.end() && it->second->ctx->destroyed && it->second->ctx->green) {
    *err = CUDA_ERROR_CONTEXT_IS_DESTROYED;
    return nullptr;
  }
  if (it == st.streamByHandle.end() || it->second->ctx->destroyed) {
    if (st.strictHandles && it == st.streamByHandle.end() &&
        std::find(st.freedStreamHandles.begin(), st.freedStreamHandles.end(), h) != st.freedStreamHandles.end())
      fatal("a call named a destroyed stream handle (the real driver may crash; SIM_STRICT_HANDLES=0 makes it an error)");
    *err = CUDA_ERROR_INVALID_HANDLE;
    return nullptr;
  }
  return it->second.get();
}

void enqueue(Stream* s, std::unique_ptr<Item> item) {
  SimState& st = state();
  item->seq = ++st.seq;
  if (s->legacy) {
    // Waits for everything already enqueued on every blocking stream of its context.
    for (auto& b : st.streams) {
      if (b.get() != s && b->ctx == s->ctx && b->blocking && b->lastDone && !b->lastDone->done) {
        item->deps.push_back(b->lastDone);
      }
    }
  } else if (s->blocking && item->kind != ItemKind::EventRecord && item->kind != ItemKind::EventWait) {
    // Waits for everything already enqueued on its context's legacy stream.
    // Measured on an H100 (tests/gpu/driver_facts.cu): a wait or a record on
    // a blocking stream does not hold the stream for earlier legacy work (a
    // record's event still covers that work: eventRecordImpl).
    const CompletionPtr& l = legacyStreamOf(s->ctx)->lastDone;
    if (l && !l->done) item->deps.push_back(l);
  }
  // cuGreenCtxWaitEvent / cuCtxWaitEvent: later work of the context waits.
  if (!s->ctx->waits.empty()) {
    auto& w = s->ctx->waits;
    w.erase(std::remove_if(w.begin(), w.end(), [](const CompletionPtr& c) { return c->done; }), w.end());
    for (const CompletionPtr& c : w) item->deps.push_back(c);
  }
  item->done = std::make_shared<Completion>();
  s->lastDone = item->done;
  s->queue.push_back(std::move(item));
}

void recordEffect(TraceEntry&& entry, const EffectSource& src) {
  SimState& st = state();
  entry.e.index = st.trace.size();
  entry.e.origin = src.graph ? SIM_ORIGIN_GRAPH : SIM_ORIGIN_EAGER;
  entry.e.graphExec = src.exec;
  entry.e.graphLaunchId = src.launchId;
  entry.e.stream = src.stream ? src.stream->handle : nullptr;
  entry.e.streamId = src.stream ? src.stream->id : 0;
  Context* ctx = src.ctx ? src.ctx : (src.stream ? src.stream->ctx : nullptr);
  entry.e.device = ctx ? ctx->device : -1;
  entry.e.context = ctx ? ctx->handle() : nullptr;
  entry.e.greenContext = ctx && ctx->green ? ctx->green->handle() : nullptr;
  if (entry.e.kind != SIM_EFFECT_MARKER) {
    if (src.graph) {
      ++st.counters.effectsGraph;
    } else {
      ++st.counters.effectsEager;
    }
  }
  st.trace.push_back(std::move(entry));
  TraceEntry& t = st.trace.back();
  t.e.attrs = t.attrs.empty() ? nullptr : t.attrs.data();
  t.e.numAttrs = static_cast<unsigned>(t.attrs.size());
  t.e.params = t.params.empty() ? nullptr : t.params.data();
  t.e.paramBytes = t.params.size();
  t.e.label = t.label.c_str();
}

std::unique_ptr<KernelObj> makeKernelObj(const char* name, SimKernelFamily family, unsigned nparams,
                                         const size_t* sizes, const size_t* aligns) {
  if (!name || (nparams > 0 && !sizes)) return nullptr;
  auto k = std::make_unique<KernelObj>();
  k->name = name;
  k->family = family;
  size_t off = 0;
  for (unsigned i = 0; i < nparams; ++i) {
    size_t sz = sizes[i];
    if (sz == 0) return nullptr;
    size_t a = 1;
    if (aligns && aligns[i]) {
      a = aligns[i];
    } else {
      while (a < sz && a < 8) a <<= 1;
    }
    off = (off + a - 1) / a * a;
    k->offsets.push_back(off);
    k->sizes.push_back(sz);
    off += sz;
  }
  k->totalBytes = off;
  if (k->name.rfind("sim_add", 0) == 0) k->effect = KernelEffect::Add;
  if (k->name.rfind("sim_mix", 0) == 0) k->effect = KernelEffect::Mix;
  if (k->name.rfind("sim_gate", 0) == 0) k->effect = KernelEffect::Gate;
  if (k->name == "graft_copy" || k->name == "graft_memset") {
    // graft_copy(u64 dst, u64 src, u64 bytes), graft_memset(u64 dst, u64 pitch,
    // u64 width, u64 height, u32 value, u32 elementSize)
    const bool copy = k->name == "graft_copy";
    const std::vector<size_t> want = copy ? std::vector<size_t>{8, 8, 8} : std::vector<size_t>{8, 8, 8, 8, 4, 4};
    if (k->sizes != want) return nullptr;
    k->effect = copy ? KernelEffect::Copy : KernelEffect::Set;
    return k;
  }
  if (k->effect != KernelEffect::None) {
    if (nparams < 3) return nullptr;
    for (int i = 0; i < 3; ++i) {
      if (k->sizes[i] != 8 || k->offsets[i] % 8 != 0) return nullptr;
    }
  }
  return k;
}

KernelObj* lookupKernel(CUfunction f) {
  SimState& st = state();
  auto it = st.kernels.find(reinterpret_cast<void*>(f));
  return it == st.kernels.end() ? nullptr : it->second.get();
}

void execKernel(const KernelLaunch& k, const EffectSource& src) {
  const KernelObj* kernel = k.kernel;
  if (kernel->effect == KernelEffect::Copy || kernel->effect == KernelEffect::Set) {
    auto word = [&](unsigned i) {
      uint64_t v = 0;
      std::memcpy(&v, k.params.data() + kernel->offsets[i], kernel->sizes[i]);
      return v;
    };
    // A kernel reaches device memory of its own device and pinned host
    // memory only (no peer access is simulated); the driver's copy reaches
    // more.
    const int device = src.ctx ? src.ctx->device : (src.stream ? src.stream->ctx->device : 0);
    auto reachable = [&](uint64_t a) {
      const MemClass c = classify(a, 1);
      return c == MemClass::PinnedHost || (c == MemClass::Device && deviceOfMemory(a) == device);
    };
    if (!reachable(word(0)) || (kernel->effect == KernelEffect::Copy && !reachable(word(1)))) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "kernel %s on device %d: memory out of its reach (dst=0x%" PRIx64 " src=0x%" PRIx64 ")",
                    kernel->name.c_str(), device, word(0), kernel->effect == KernelEffect::Copy ? word(1) : 0);
      setSticky(CUDA_ERROR_ILLEGAL_ADDRESS, buf);
      return;
    }
    if (kernel->effect == KernelEffect::Copy) {
      CopyOp c;
      c.dst = word(0);
      c.src = word(1);
      c.width = word(2);
      execCopy(c, src);
    } else {
      MemsetOp m;
      m.dst = word(0);
      m.pitch = word(1);
      m.width = word(2);
      m.height = word(3);
      m.elementSize = unsigned(word(5));
      const uint64_t v = word(4);
      m.value = uint32_t(m.elementSize == 1 ? (v & 0xff) : (m.elementSize == 2 ? (v & 0xffff) : v));
      execMemset(m, src);
    }
    return;
  }
  TraceEntry t;
  t.e.kind = SIM_EFFECT_KERNEL;
  t.e.func = k.handle;
  t.e.kernelName = k.kernel->name.c_str();  // KernelObjs are never freed
  std::copy(k.grid, k.grid + 3, t.e.grid);
  std::copy(k.block, k.block + 3, t.e.block);
  t.e.sharedMemBytes = k.sharedMem;
  t.attrs = k.attrs;
  t.params = k.params;
  recordEffect(std::move(t), src);
  const KernelObj* ko = k.kernel;
  if (ko->effect == KernelEffect::None || ko->effect == KernelEffect::Gate) return;
  uint64_t dst, srcp, kval;
  std::memcpy(&dst, k.params.data() + ko->offsets[0], 8);
  std::memcpy(&srcp, k.params.data() + ko->offsets[1], 8);
  std::memcpy(&kval, k.params.data() + ko->offsets[2], 8);
  MemClass cd = classify(dst, 8), cs = classify(srcp, 8);
  if ((cd != MemClass::Device && cd != MemClass::PinnedHost) ||
      (cs != MemClass::Device && cs != MemClass::PinnedHost)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "kernel %s: illegal address dst=0x%" PRIx64 " src=0x%" PRIx64, ko->name.c_str(), dst,
                  srcp);
    setSticky(CUDA_ERROR_ILLEGAL_ADDRESS, buf);
    return;
  }
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const void*>(srcp), 8);
  v = ko->effect == KernelEffect::Add ? v + kval + k.clusterWidth : simMix64(v ^ kval);
  std::memcpy(reinterpret_cast<void*>(dst), &v, 8);
}

size_t copyExtent(size_t width, size_t height, size_t depth, size_t pitch, size_t slice) {
  if (width == 0 || height == 0 || depth == 0) return 0;
  return (depth - 1) * slice * pitch + (height - 1) * pitch + width;
}

void execCopy(const CopyOp& c, const EffectSource& src) {
  TraceEntry t;
  t.e.kind = SIM_EFFECT_MEMCPY;
  t.e.dst = c.dst;
  t.e.src = c.src;
  t.e.widthBytes = c.width;
  t.e.height = c.height;
  t.e.depth = c.depth;
  t.e.dstPitch = c.dstPitch;
  t.e.srcPitch = c.srcPitch;
  t.e.dstHeight = c.dstHeight;
  t.e.srcHeight = c.srcHeight;
  recordEffect(std::move(t), src);
  size_t dstExt = copyExtent(c.width, c.height, c.depth, c.dstPitch, c.dstHeight);
  size_t srcExt = copyExtent(c.width, c.height, c.depth, c.srcPitch, c.srcHeight);
  if (classify(c.dst, dstExt) == MemClass::Invalid || (!c.staged && classify(c.src, srcExt) == MemClass::Invalid)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "memcpy: illegal address dst=0x%" PRIx64 " src=0x%" PRIx64 " (%zu bytes)", c.dst,
                  c.src, c.width);
    setSticky(CUDA_ERROR_ILLEGAL_ADDRESS, buf);
    return;
  }
  size_t row = 0;
  for (size_t z = 0; z < c.depth; ++z) {
    for (size_t y = 0; y < c.height; ++y, ++row) {
      auto* d = reinterpret_cast<uint8_t*>(c.dst + z * c.dstHeight * c.dstPitch + y * c.dstPitch);
      const uint8_t* s = c.staged
                             ? c.staged->data() + row * c.width
                             : reinterpret_cast<const uint8_t*>(c.src + z * c.srcHeight * c.srcPitch + y * c.srcPitch);
      std::memmove(d, s, c.width);
    }
  }
}

void execMemset(const MemsetOp& m, const EffectSource& src) {
  TraceEntry t;
  t.e.kind = SIM_EFFECT_MEMSET;
  t.e.dst = m.dst;
  t.e.elementSize = m.elementSize;
  t.e.value = m.value;
  t.e.widthElements = m.width;
  t.e.height = m.height;
  t.e.dstPitch = m.pitch;
  recordEffect(std::move(t), src);
  size_t ext = copyExtent(m.width * m.elementSize, m.height, 1, m.pitch, 0);
  if (classify(m.dst, ext) == MemClass::Invalid) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "memset: illegal address dst=0x%" PRIx64, m.dst);
    setSticky(CUDA_ERROR_ILLEGAL_ADDRESS, buf);
    return;
  }
  for (size_t y = 0; y < m.height; ++y) {
    auto* row = reinterpret_cast<uint8_t*>(m.dst + y * m.pitch);
    for (size_t i = 0; i < m.width; ++i) {
      std::memcpy(row + i * m.elementSize, &m.value, m.elementSize);  // little endian
    }
  }
}

}  // namespace sim

// ---------------------------------------------------------------- test-only API

using namespace sim;

extern "C" {

CUfunction simKernelCreate(const char* name, SimKernelFamily family, unsigned nparams, const size_t* sizes,
                           const size_t* aligns) {
  std::unique_ptr<KernelObj> k = makeKernelObj(name, family, nparams, sizes, aligns);
  if (!k) return nullptr;
  Lock lk(state().mutex);
  auto handle = reinterpret_cast<CUfunction>(k.get());
  state().kernels.emplace(k.get(), std::move(k));
  return handle;
}

int simKernelSetStackBytes(CUfunction kernel, size_t bytes) {
  Lock lk(state().mutex);
  KernelObj* k = lookupKernel(kernel);
  if (!k) return -1;
  k->stackBytes = bytes;
  return 0;
}

size_t simKernelParamBytes(CUfunction kernel) {
  Lock lk(state().mutex);
  KernelObj* k = lookupKernel(kernel);
  return k ? k->totalBytes : 0;
}

int simKernelParamLayout(CUfunction kernel, unsigned index, size_t* offset, size_t* size) {
  Lock lk(state().mutex);
  KernelObj* k = lookupKernel(kernel);
  if (!k || index >= k->sizes.size()) return -1;
  if (offset) *offset = k->offsets[index];
  if (size) *size = k->sizes[index];
  return 0;
}

size_t simTraceSize(void) {
  Lock lk(state().mutex);
  return state().trace.size();
}

int simTraceGet(size_t index, SimEffect* out) {
  Lock lk(state().mutex);
  SimState& st = state();
  if (index >= st.trace.size() || !out) return -1;
  *out = st.trace[index].e;
  return 0;
}

void simTraceClear(void) {
  Lock lk(state().mutex);
  state().trace.clear();
}

void simMark(const char* label) {
  Lock lk(state().mutex);
  TraceEntry t;
  t.e.kind = SIM_EFFECT_MARKER;
  t.label = label ? label : "";
  recordEffect(std::move(t), EffectSource{});
}

void simSetSeed(uint64_t seed) {
  Lock lk(state().mutex);
  parseEnvLocked();
  state().rng.seed(seed);
}

void simSetMaxSteps(unsigned maxSteps) {
  Lock lk(state().mutex);
  parseEnvLocked();
  state().maxSteps = maxSteps;
}

void simInjectFailure(const char* api, int nth, CUresult code) {
  if (!api || nth < 1) return;
  Lock lk(state().mutex);
  parseEnvLocked();
  state().injections.push_back(Injection{api, nth, code});
}

void simClearFailures(void) {
  Lock lk(state().mutex);
  parseEnvLocked();
  state().injections.clear();
}

void simCounters(SimCounters* out) {
  if (!out) return;
  Lock lk(state().mutex);
  *out = state().counters;
}

int simEventWaitFromPeer(CUevent event) {
  Lock lk(state().mutex);
  std::shared_ptr<Event> ev = lookupEvent(event);
  if (!ev) return -1;
  drainUntilRecorded(lk, *ev, "simEventWaitFromPeer");
  return 0;
}

uint64_t simStreamId(CUstream stream, int perThreadVariant) {
  Lock lk(state().mutex);
  SimState& st = state();
  if (!st.initialized) return 0;
  Context* ctx = currentCtx();
  if (!ctx && (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)) {
    // A thread with no current context asks about device 0's primary context.
    ctx = st.primaryCtx[0];
    bool pt = stream == CU_STREAM_PER_THREAD || (stream == nullptr && perThreadVariant);
    return pt ? perThreadStreamOf(ctx)->id : legacyStreamOf(ctx)->id;
  }
  CUresult err;
  Stream* s = resolveStream(stream, perThreadVariant != 0, &err);
  return s ? s->id : 0;
}

int simStreamStandsFor(uint64_t streamId, uint64_t perThreadStreamId) {
  Lock lk(state().mutex);
  const Stream* created = nullptr;
  const Stream* perThread = nullptr;
  for (const auto& s : state().streams) {
    if (s->id == streamId) created = s.get();
    if (s->id == perThreadStreamId) perThread = s.get();
  }
  return created && perThread && perThread->perThread && !created->perThread && !created->legacy &&
         created->blocking && created->ctx == perThread->ctx && created->thread == perThread->thread;
}

}  // extern "C"
