// fake_cuda_internal.h - state of the simulated CUDA driver (tests/sim).
//
// Invariants:
//  - All state below is guarded by the one global mutex (SimState::mutex); the only
//    code that runs without it is a host function (eager or graph node).
//  - Nothing executes at enqueue time. Each stream is a FIFO of Items; an Item runs
//    only when it is its stream's head and every Completion in `deps` is done.
//  - Completions only point at earlier-enqueued work, so the dependency graph is
//    acyclic; a drain that finds nothing runnable (and no host function in flight)
//    is a "sim deadlock" and aborts.
//  - Exported cu* functions never call each other: internal code calls the *Impl /
//    helper functions, and the library is linked -Bsymbolic, so an interposer that
//    exports the same names can never be re-entered from inside the simulator.
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim_api.h"

namespace sim {

struct Completion {
  bool done = false;
  double timeUs = 0;  // simulated time at which it completed (event timing)
};
using CompletionPtr = std::shared_ptr<Completion>;

// ---------------------------------------------------------------- kernels

// Gate: runnable only once the 8 bytes at its first parameter hold at least
// its third (a kernel that spins until the host releases it); no effect.
// Copy, Set: graft's own copy and memset kernels (src/graph/copy_kernels.cu,
// loaded from PTX): they do what the driver's copy or memset would, and the
// trace shows that copy or memset, as the real GPU's memory would.
enum class KernelEffect { None, Add, Mix, Gate, Copy, Set };

struct KernelObj {
  std::string name;
  SimKernelFamily family;
  std::vector<size_t> sizes, offsets;
  size_t totalBytes = 0;
  KernelEffect effect = KernelEffect::None;
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (cuFuncSetAttribute): a
  // launch or kernel node asking for more dynamic shared memory is refused.
  unsigned maxDynamicShared = 49152;
  // Stack per thread the kernel needs (simKernelSetStackBytes): a launch of it
  // grows its context's CU_LIMIT_STACK_SIZE to at least this, as the driver
  // does (a graph launch for each of its kernel nodes).
  size_t stackBytes = 0;
  // CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH (cuFuncSetAttribute,
  // cuKernelSetAttribute): every launch made while it is set gets clusters of
  // that width, and a graph's kernel node keeps the width it was made or
  // captured under, through node updates too (what graft must assume of the
  // driver: tests/gpu/traps_odd.cu, cluster_attr_toggle). A sim_add kernel
  // adds its launch's width to its result, so a test sees which width ran.
  unsigned requiredClusterWidth = 0;
  // cuFuncSetCacheConfig / cuKernelSetCacheConfig (PREFER_NONE: the
  // context's, cuCtxSetCacheConfig). A model of what the H200 showed
  // (tests/gpu/traps_r17.cu, cache_config_cooperative): under PREFER_L1 less
  // of an SM is shared memory, so a cooperative launch of more than
  // kCooperativeBlocksUnderL1 blocks is refused with
  // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE at its call (and in a capture);
  // a graph's kernel node is not checked again when the graph is launched.
  int cachePreference = CU_FUNC_CACHE_PREFER_NONE;
  // The launch state of the deprecated launch API (cuFuncSetBlockShape,
  // cuFuncSetSharedSize, cuParamSetSize, cuParamSeti / cuParamSetv), read by
  // cuLaunch / cuLaunchGrid / cuLaunchGridAsync. As cuda.h documents at
  // cuLaunchKernel, a cuLaunchKernel (Ex, Cooperative) call of the kernel
  // that the driver takes invalidates it (into a capture too: it is a call);
  // nothing documents that a graph launch does, so it does not. A legacy
  // launch with no block shape or a parameter size other than the kernel's
  // is refused (CUDA_ERROR_INVALID_VALUE).
  struct LegacyLaunchState {
    unsigned block[3] = {0, 0, 0};
    unsigned sharedBytes = 0;
    std::vector<uint8_t> params;
    bool paramSizeSet = false;
  } legacy;
  // Module/library kernels (fake_cuda_module.cc): the handle is a slot that is
  // reused after an unload; an unloaded KernelObj stays allocated (graph nodes
  // still point at it) but is no longer reachable through any handle.
  bool unloaded = false;
};

// Builds a kernel with the packed layout simKernelCreate documents; null on bad
// arguments (see sim_api.h).
std::unique_ptr<KernelObj> makeKernelObj(const char* name, SimKernelFamily family, unsigned nparams,
                                         const size_t* sizes, const size_t* aligns);

// A deep copy of one kernel launch; params are packed with zeroed padding.
struct KernelLaunch {
  KernelObj* kernel = nullptr;
  CUfunction handle = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned sharedMem = 0;
  unsigned clusterWidth = 0;  // the kernel's required cluster width when the launch was made
  std::vector<CUlaunchAttribute> attrs;
  std::vector<uint8_t> params;
};

// A copy of a (pitched, up to 3-D) region. 1-D: height = depth = 1, pitches 0.
struct CopyOp {
  uint64_t dst = 0, src = 0;
  size_t width = 0, height = 1, depth = 1;
  size_t dstPitch = 0, srcPitch = 0, dstHeight = 0, srcHeight = 0;
  // Pageable host source of an async copy: bytes staged at enqueue time, as the
  // real driver does; the trace still names the program's source address.
  std::shared_ptr<std::vector<uint8_t>> staged;
};

struct MemsetOp {
  uint64_t dst = 0;
  unsigned elementSize = 1;
  uint32_t value = 0;
  size_t width = 0, height = 1, pitch = 0;
};

struct HostCall {
  CUhostFn fn = nullptr;
  void* userData = nullptr;
};

// ---------------------------------------------------------------- graphs

enum class NodeKind { Kernel, Memcpy, Memset, Host, Empty, EventRecord, EventWait };

struct Event;
struct Context;

struct NodeParams {
  NodeKind kind = NodeKind::Empty;
  Context* ctx = nullptr;  // context the node runs in; null: any (host, empty, event wait)
  KernelLaunch kernel;
  CopyOp copy;
  CUDA_MEMCPY3D copyRaw{};  // as reported by cuGraphMemcpyNodeGetParams
  MemsetOp memset;
  HostCall host;
  std::shared_ptr<Event> event;
};

struct Graph;

struct Node {
  Graph* graph = nullptr;
  size_t index = 0;
  NodeParams params;
  std::vector<Node*> deps;
  std::vector<void*> paramPtrs;  // kernelParams view for cuGraphKernelNodeGetParams
};

struct Graph {
  std::vector<std::unique_ptr<Node>> nodes;
  ~Graph();
};

// Immutable per-launch view of an exec: params of every node + dependency lists.
struct ExecSnapshot {
  std::vector<NodeParams> params;
  std::vector<std::vector<size_t>> preds, succs;
};

struct Exec {
  Context* ctx = nullptr;              // the context of its nodes (several of one family: the family's)
  // The context's stack limit when instantiated, and its count of the
  // program's changes then: launched after the program lowered the limit
  // below it, it fails (CUDA_ERROR_LAUNCH_FAILED, sticky), as on an H200
  // (tests/gpu/traps_r37.cu, stack_limit_epochs).
  size_t stackLimit = 0;
  uint64_t stackLimitSets = 0;
  std::shared_ptr<Graph> source;       // keeps node handles alive
  std::shared_ptr<ExecSnapshot> snap;  // copy-on-write on node updates
  CompletionPtr lastLaunch;            // launches of one exec are serialized
};

struct GraphRun {
  std::shared_ptr<const ExecSnapshot> snap;
  CUgraphExec exec = nullptr;
  uint64_t launchId = 0;
  bool started = false;
  std::vector<int> pendingPreds;
  std::vector<uint8_t> state;  // 0 waiting, 1 running, 2 done
  size_t doneCount = 0;
  std::vector<CompletionPtr> recordTokens;  // per EventRecord node
  std::vector<CompletionPtr> waitTokens;    // per EventWait node (may be null)
};

// ---------------------------------------------------------------- streams/events

enum class ItemKind { Kernel, Memcpy, Memset, HostFn, EventRecord, EventWait, GraphLaunch, AllocAsync, FreeAsync };

struct Item {
  ItemKind kind;
  uint64_t seq = 0;
  std::vector<CompletionPtr> deps;
  CompletionPtr done;
  KernelLaunch kernel;
  CopyOp copy;
  MemsetOp memset;
  HostCall host;
  std::unique_ptr<GraphRun> graph;
  uint64_t ptr = 0;  // FreeAsync
};

struct CaptureSession;

struct Stream {
  uint64_t id = 0;
  Context* ctx = nullptr;     // the context current when it was created
  CUstream handle = nullptr;  // canonical name: created handle, LEGACY or PER_THREAD
  unsigned flags = 0;
  int priority = 0;
  bool legacy = false;
  bool perThread = false;
  bool blocking = true;  // syncs implicitly with the legacy stream
  bool destroyed = false;
  std::thread::id thread;  // the thread that created it (a per-thread stream: its owner)
  std::deque<std::unique_ptr<Item>> queue;
  bool hostBusy = false;   // head host function is running without the lock
  CompletionPtr lastDone;  // completion of the last enqueued item
  // capture state
  std::shared_ptr<CaptureSession> capture;
  std::vector<Node*> captureDeps;
  std::vector<CUgraphNode> infoDeps;  // storage returned by GetCaptureInfo
  std::vector<CUgraphEdgeData> infoEdges;
};

struct CaptureSession {
  uint64_t id = 0;
  std::shared_ptr<Graph> graph;
  Stream* origin = nullptr;
  Context* ctx = nullptr;  // the origin stream's context; every joining stream must share it
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id owner;
  bool invalidated = false;
  bool active = true;
  std::vector<Stream*> streams;  // every stream that joined (origin first)
};

struct Event {
  uint64_t serial = 0;  // creation order (a context's end frees its events' handles newest first)
  unsigned flags = 0;
  Context* ctx = nullptr;                      // the context current when it was created
  CompletionPtr lastRecord;                    // most recent eager record (null: never recorded)
  std::shared_ptr<CaptureSession> capSession;  // last record happened in this capture
  std::vector<Node*> capNodes;
  bool destroyed = false;
};

// ---------------------------------------------------------------- memory

enum class MemClass { Invalid, Device, PinnedHost, PageableHost };

struct Injection {
  std::string api;
  int remaining;  // calls left until the failing one (1 = next call fails)
  CUresult code;
};

struct TraceEntry {
  SimEffect e{};
  std::vector<CUlaunchAttribute> attrs;
  std::vector<uint8_t> params;
  std::string label;
};

// A device's context: its own legacy stream (created lazily for devices > 0, so a
// single-device program sees the same stream ids as before contexts existed),
// per-thread default streams and synchronization domain. Never freed: a destroyed
// context stays allocated so stale handles are detected, not dereferenced.
struct Context {
  unsigned long long id = 0;  // unique in the process (cuCtxGetId)
  int device = 0;
  bool primary = false;
  bool destroyed = false;
  // The handle the program sees: the object's address, or (a primary context
  // made again after the last release ended the one before) the ended
  // context's handle, as a driver may hand back the same value. Only one live
  // context has a given handle.
  CUcontext handleValue = nullptr;
  std::shared_ptr<Stream> legacy;
  std::shared_ptr<Stream> recordStream;  // cuCtxRecordEvent's, named by no handle
  size_t stackLimit = 1024;              // CU_LIMIT_STACK_SIZE; grows at launches (KernelObj::stackBytes)
  uint64_t stackLimitSets = 0;           // cuCtxSetLimit calls that changed stackLimit (Exec::stackLimitSets)
  size_t printfFifoLimit = 1 << 20, mallocHeapLimit = 8 << 20;
  int cachePreference = CU_FUNC_CACHE_PREFER_NONE;  // cuCtxSetCacheConfig (KernelObj::cachePreference)
  // CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED (cuCtxSetLimit). A model of what
  // cuda.h documents for a CIG (CUDA in Graphics) context: with the fallback
  // off, "CUDA will fail to launch a kernel ... if the kernel uses more shared
  // memory than available" (CU_LIMIT_SHMEM_SIZE, kCigSharedMemBytes here).
  // Simplification: every simulated context is taken for a CIG context for
  // these limits (CU_LIMIT_CIG_ENABLED reads 1). A launch asking for more
  // dynamic shared memory than that is refused with
  // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES at its call (and in a capture) while the
  // fallback is off; a graph's kernel node is not checked again when the
  // graph is launched (as for the cache preference, KernelObj).
  bool cigSharedMemFallback = true;
  // Green contexts (fake_cuda_green.cc): the context cuCtxFromGreenCtx gives
  // for a green context is a Context of its own (its own handle, id, legacy
  // and per-thread streams) whose greenOf is the device's primary context it
  // was made from; `green` is the green context it stands for. A context and
  // the green contexts made from its primary are one family (familyOf): they
  // share memory and code, a kernel may be launched on a stream of any of
  // them whichever of them is current (it runs in its stream's context), and
  // events and captures may cross between them. Null for other contexts.
  Context* greenOf = nullptr;
  struct GreenCtx* green = nullptr;
  // cuGreenCtxWaitEvent / cuCtxWaitEvent: every item enqueued later on a
  // stream of this context waits for these (done ones are dropped).
  std::vector<CompletionPtr> waits;
  CUcontext handle() { return handleValue ? handleValue : reinterpret_cast<CUcontext>(this); }
};

// A green context (cuGreenCtxCreate): SMs of a device, and the Context that
// cuCtxFromGreenCtx converts it to (made at creation). Never freed, so a stale
// handle is detected (CUDA_ERROR_CONTEXT_IS_DESTROYED), not dereferenced.
struct GreenCtx {
  unsigned long long id = 0;  // cuGreenCtxGetId
  int device = 0;
  unsigned smCount = 0;
  Context* ctx = nullptr;  // the converted context
  bool destroyed = false;
  CUgreenCtx handle() { return reinterpret_cast<CUgreenCtx>(this); }
};

// The family a context belongs to: a green context's converted context
// belongs to its primary context's, every other context is its own.
inline Context* familyOf(Context* c) { return c && c->greenOf ? c->greenOf : c; }
inline bool sameFamily(Context* a, Context* b) { return familyOf(a) == familyOf(b); }

struct EffectSource {
  Stream* stream = nullptr;
  bool graph = false;
  CUgraphExec exec = nullptr;
  uint64_t launchId = 0;
  // The context the effect runs in, when not its stream's: a graph node's
  // (the context of the stream it was captured on, or given at cuGraphAdd*Node),
  // which may be another context of the launch stream's family.
  Context* ctx = nullptr;
};

struct Join {
  CompletionPtr joined;
  std::vector<CompletionPtr> parts;
};

struct SimState {
  std::vector<Join> joins;  // joinedCompletion's, not yet done
  std::mutex mutex;
  std::condition_variable cv;
  bool envParsed = false;
  bool initialized = false;
  CUresult sticky = CUDA_SUCCESS;
  int deviceCount = 2;                            // env SIM_DEVICES (1..8)
  std::vector<std::unique_ptr<Context>> contexts; // every context ever created
  std::vector<Context*> primaryCtx;               // per device
  std::vector<std::unique_ptr<GreenCtx>> greenCtxs;  // every green context ever created
  std::vector<int> primaryRefs;                   // per device
  std::mt19937_64 rng{1};
  unsigned maxSteps = 3;
  uint64_t seq = 0;
  uint64_t nextStreamId = 1;
  uint64_t nextFreshHandle = 0;  // freshHandle()
  uint64_t nextCaptureId = 1;
  uint64_t nextLaunchId = 1;
  double timeUs = 0;
  int hostCallsInFlight = 0;

  std::vector<std::shared_ptr<Stream>> streams;  // creation order (scheduler order)
  std::unordered_map<CUstream, std::shared_ptr<Stream>> streamByHandle;
  // Handles of destroyed streams, reused (last freed first) by the next
  // streams created, as a real driver's recycled allocations are: a tool must
  // not keep what it learned about a stream past its destruction.
  std::vector<CUstream> freedStreamHandles;
  std::unordered_map<CUevent, std::shared_ptr<Event>> events;
  uint64_t nextEventSerial = 0;
  std::vector<CUevent> freedEventHandles;  // recycled like freedStreamHandles
  std::unordered_map<CUgraph, std::shared_ptr<Graph>> graphs;
  std::unordered_set<const Node*> liveNodes;
  std::unordered_map<CUgraphExec, std::shared_ptr<Exec>> execs;
  // Execs of a context that ended (the last cuDevicePrimaryCtxRelease): kept
  // allocated so their handles are never given out again, and a launch or
  // update naming one aborts (the real driver crashed replaying a graph of a
  // destroyed primary context; SIM_STRICT_HANDLES=0 makes it an error).
  std::vector<std::shared_ptr<Exec>> endedExecs;
  std::unordered_set<CUgraphExec> endedExecHandles;
  std::unordered_map<void*, std::unique_ptr<KernelObj>> kernels;
  std::vector<std::shared_ptr<CaptureSession>> sessions;  // active ones

  std::vector<Injection> injections;
  // SIM_REFUSE_CAPTURE=name: launching that kernel into a stream capture fails
  // with CUDA_ERROR_INVALID_VALUE and invalidates the capture (as the real
  // driver did for cuDNN's single-pass batch-norm kernel); eagerly it runs.
  std::string refuseCaptureKernel;
  unsigned graphLaunchMicros = 0;  // SIM_GRAPH_LAUNCH_US: each cuGraphLaunch takes that long first
  std::thread::id firstAllocAsyncThread;  // see SimCounters::freesAsyncOffThread
  // SIM_ASYNC_POOL_BYTES: cuMemAllocAsync fails with CUDA_ERROR_OUT_OF_MEMORY
  // beyond this many bytes of stream-ordered allocations whose free has not
  // been enqueued yet (0: no limit). A simplification of the driver's pool:
  // an enqueued free makes room for any later allocation, on any stream.
  uint64_t asyncPoolBytes = 0;
  uint64_t asyncPoolInUse = 0;
  struct AsyncBlock {
    size_t bytes;
    int device;  // whose pool (the device's one pool) it came from
  };
  // Stream-ordered allocations whose free has not been enqueued yet.
  std::unordered_map<uint64_t, AsyncBlock> asyncPoolBlocks;
  // Per device, its pool's statistics (cuMemPoolGetAttribute). As the driver
  // does, an allocation counts as used from its call and stops counting at
  // the call of its free (the pool may hand the memory out again to later
  // work on the stream at once), not when the free runs. Simplifications:
  // used memory counts requested bytes; reserved memory grows with used
  // memory and shrinks only at cuMemPoolTrimTo (no release at synchronizes).
  struct PoolStats {
    uint64_t used = 0, usedHigh = 0, reserved = 0, reservedHigh = 0;
    uint64_t releaseThreshold = 0;
    int reuseFollowEvents = 1, reuseOpportunistic = 1, reuseInternalDeps = 1;
  };
  std::vector<PoolStats> pools;  // per device (sized at cuInit)
  // A call naming a stream handle that was destroyed (and not handed out
  // again) aborts the process, as the real driver may crash on one (it did in
  // cuStreamGetCtx on an H100). SIM_STRICT_HANDLES=0: it fails with
  // CUDA_ERROR_INVALID_HANDLE instead.
  bool strictHandles = true;
  // SIM_KERNEL_STREAM_CONTEXT=1: a library kernel (CUkernel, SIM_KERNEL_LIBRARY)
  // launched into a created stream runs in that stream's context whatever
  // context is current, as cuda.h documents for cuLaunchKernel(Ex) ("the
  // context to launch the kernel on will either be taken from the specified
  // stream hStream or the current context in case of NULL stream"); by
  // default the simulator refuses a launch into an unrelated context's
  // stream for every kernel (CUDA_ERROR_INVALID_HANDLE), as the CUDA
  // programming guide says of runtime launches. Not measured on a GPU.
  bool kernelStreamContext = false;
  std::deque<TraceEntry> trace;
  SimCounters counters{};
};

SimState& state();

// One pool per device, the one cuMemAllocAsync uses (its statistics:
// SimState::PoolStats, cuMemPoolGetAttribute; a stream-ordered block's
// CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE).
inline CUmemoryPool defaultPoolHandle(int device) { return reinterpret_cast<CUmemoryPool>(uintptr_t(0x9000 + device)); }
using Lock = std::unique_lock<std::mutex>;

// ---------------------------------------------------------------- API entry

enum EntryFlags : unsigned {
  kNoInit = 1u << 0,    // callable before cuInit
  kNeedCtx = 1u << 1,   // needs a current context
  kSteps = 1u << 2,     // queue-touching: run random scheduler steps first
  kNoSticky = 1u << 3,  // still works after a sticky error
};

// Common prologue of every exported driver function: host-function re-entry
// check, lock, environment, failure injection, init/context checks, scheduler steps.
class ApiGuard {
 public:
  ApiGuard(const char* api, unsigned flags);
  bool failed() const { return result_ != CUDA_SUCCESS; }
  CUresult result() const { return result_; }
  Lock& lock() { return lock_; }

 private:
  Lock lock_;
  CUresult result_ = CUDA_SUCCESS;
};

#define SIM_ENTRY(NAME, FLAGS)            \
  ::sim::ApiGuard simGuard_(NAME, FLAGS); \
  if (simGuard_.failed()) return simGuard_.result()
#define SIM_LOCK simGuard_.lock()

// ---------------------------------------------------------------- core helpers

void parseEnvLocked();
void randomSteps(Lock& lk, unsigned minSteps = 0);
bool step(Lock& lk);
// Runs steps until pred() holds; aborts with a "sim deadlock" message otherwise.
void drainAll(Lock& lk, const char* what);
bool allIdle();

bool validDevice(CUdevice dev);
// A new context of `device` (fake_cuda_api.cc); not made current.
Context* newContext(int device, bool primary);
// A reference to the device's primary context (a new one if the last release
// ended it), and its release (the last one ends it: endPrimaryContext).
Context* retainPrimary(int dev);
CUresult primaryRelease(Lock& lk, CUdevice dev);
// A created stream in `ctx` (null: the current context).
CUresult createStream(CUstream* ph, unsigned flags, int priority, Context* ctx = nullptr);
CUcontext currentContext();
Context* currentCtx();                  // null when none is current (or it was destroyed)
// A launch of `k` in `ctx` grows its CU_LIMIT_STACK_SIZE to the kernel's need.
void growStackFor(Context* ctx, const KernelObj& k);
Context* lookupContext(CUcontext h);    // null unless a live context
Stream* legacyStreamOf(Context* ctx);   // creates it on first use
Stream* threadPerThreadStream();        // of the current context (null: none current)
Stream* perThreadStreamOf(Context* ctx); // the calling thread's, in `ctx`
// A completion done as soon as all of `all` are (settleJoins, called whenever
// a completion is done).
CompletionPtr joinedCompletion(std::vector<CompletionPtr> all);
void settleJoins();
Stream* resolveStream(CUstream h, bool perThreadVariant, CUresult* err);
bool streamIdle(const Stream* s);

void enqueue(Stream* s, std::unique_ptr<Item> item);
void recordEffect(TraceEntry&& entry, const EffectSource& src);
[[noreturn]] void fatal(const std::string& msg);
void setSticky(CUresult code, const std::string& why);

// Effect executors (lock held; host functions are run by the scheduler).
void execKernel(const KernelLaunch& k, const EffectSource& src);
void execCopy(const CopyOp& c, const EffectSource& src);
void execMemset(const MemsetOp& m, const EffectSource& src);

KernelObj* lookupKernel(CUfunction f);
// Validates and deep-copies a kernel launch described by node params (no attributes).
CUresult buildKernelFromNodeParams(const CUDA_KERNEL_NODE_PARAMS_v2& p, KernelLaunch* out);

// Memory (fake_cuda_memory.cc).
MemClass classify(uint64_t addr, size_t len);
// A handle value no object address or recycled handle can take (a range of
// its own, 16-byte steps), for an object whose address a live handle names.
uintptr_t freshHandle();
bool isDevice(uint64_t addr, size_t len);
uint64_t deviceAllocLocked(size_t bytes, int device);  // 0 on failure
// The device whose context allocated device memory at `addr` (mapped memory:
// 0); -1 for anything else.
int deviceOfMemory(uint64_t addr);
bool deviceFreeLocked(uint64_t addr);      // false if not an allocation base
bool isDeviceAllocationBase(uint64_t addr);
// A created stream's end (cuStreamDestroy, or its context's end).
void destroyStream(std::shared_ptr<Stream> s);
// The primary context `ctx` ended (its last release): its work is drained,
// then its streams, events, executable graphs and modules are gone (their
// handles may be given out again), and the next retain makes a new context.
void endPrimaryContext(Lock& lk, Context* ctx);
// Modules (not libraries) loaded while `ctx` was current are unloaded
// (fake_cuda_module.cc).
void unloadModulesOf(Context* ctx);
// Execs of `ctx` become ended (fake_cuda_graph.cc).
void endExecsOf(Context* ctx);
void initMemoryLocked();
size_t copyExtent(size_t width, size_t height, size_t depth, size_t pitch, size_t slice);

// Capture (fake_cuda_graph.cc).
struct CaptureCheck {
  bool capture = false;  // op becomes a node (when result is success)
  CUresult result = CUDA_SUCCESS;
};
// Decides what an op issued to `s` does: enqueue, capture or fail.
CaptureCheck captureCheckForOp(Stream* s);
Node* addCaptureNode(Stream* s, NodeParams&& p);
// "Potentially unsafe" API (sync copies, cuMemAlloc, ...): fails while a capture
// that the calling thread's capture mode respects is active; invalidates it.
CUresult checkUnsafeCall();
// Synchronizing/querying `s` while it (or, for the legacy stream, a blocking
// stream) is capturing is illegal and invalidates the capture.
CUresult checkSyncOfStream(Stream* s);
void invalidate(CaptureSession* cs);
// Active captures that include a blocking (non-legacy) stream of `ctx`.
bool blockingStreamCapturing(Context* ctx, std::vector<CaptureSession*>* out);
std::shared_ptr<Event> lookupEvent(CUevent e);
// cuCtxRecordEvent / cuGreenCtxRecordEvent of `ctx` (fake_cuda_api.cc).
CUresult ctxRecordEventImpl(Context* ctx, CUevent e);
// cuCtxWaitEvent / cuGreenCtxWaitEvent of `ctx` (fake_cuda_green.cc).
CUresult ctxWaitEventImpl(Context* ctx, CUevent e);
// Runs the device until the event's most recent record is done (at once if never recorded).
void drainUntilRecorded(Lock& lk, const Event& ev, const char* what);

[[noreturn]] void deadlock(const char* what);

template <class Pred>
void drainUntil(Lock& lk, Pred pred, const char* what) {
  SimState& st = state();
  while (!pred()) {
    if (step(lk)) continue;
    if (st.hostCallsInFlight > 0) {
      st.cv.wait(lk);
      continue;
    }
    deadlock(what);
  }
}

}  // namespace sim
