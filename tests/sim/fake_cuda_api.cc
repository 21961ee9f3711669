// fake_cuda_api.cc - simulated driver API: init/device/context, kernel handles,
// launches, copies, memsets, host functions, streams and events.
//
// Invariants:
//  - Every stream-ordered function has one *Impl taking `perThread`; the plain
//    export passes false (NULL = legacy stream), the _ptsz/_ptds export true
//    (NULL = the calling thread's per-thread stream).
//  - A stream-ordered op either becomes a capture node, is enqueued, or fails
//    without side effects (see submit()).
//  - Launch parameters are deep-copied at the call into a packed buffer whose
//    padding is zero, so equal launches have equal bytes however they were passed.
//  - Synchronous copies/memsets are enqueued on the legacy (or per-thread) stream
//    and drained before returning; async copies touching pageable host memory
//    stage the source at the call (H2D) or block until done (D2H), like CUDA.
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "fake_cuda_internal.h"

namespace sim {

namespace {

// The per-thread context stack (top = current). Never destroyed: exit
// handlers and static destructors (graft's exit report among them) run after
// the main thread's thread_local destructors and may still call the driver,
// as they may with the real one.
std::vector<CUcontext>& ctxStack() {
  thread_local auto* stack = new std::vector<CUcontext>();
  return *stack;
}

}  // namespace

bool validDevice(CUdevice dev) { return dev >= 0 && dev < state().deviceCount; }

Context* newContext(int device, bool primary) {
  SimState& st = state();
  static unsigned long long nextId = 0;
  auto c = std::make_unique<Context>();
  c->id = ++nextId;
  c->device = device;
  c->primary = primary;
  Context* raw = c.get();
  st.contexts.push_back(std::move(c));
  return raw;
}

namespace {

constexpr unsigned kMaxSharedMem = 227 * 1024;
// CU_LIMIT_SHMEM_SIZE of a CIG context (Context::cigSharedMemFallback).
constexpr unsigned kCigSharedMemBytes = 32 * 1024;

struct ErrorInfo {
  CUresult code;
  const char* name;
  const char* text;
};

#define SIM_ERR(c, t) \
  { c, #c, t }
const ErrorInfo kErrors[] = {
    SIM_ERR(CUDA_SUCCESS, "no error"),
    SIM_ERR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    SIM_ERR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    SIM_ERR(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    SIM_ERR(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    SIM_ERR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    SIM_ERR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    SIM_ERR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    SIM_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    SIM_ERR(CUDA_ERROR_INVALID_RESOURCE_TYPE, "invalid resource type"),
    SIM_ERR(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "invalid resource configuration"),
    SIM_ERR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    SIM_ERR(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    SIM_ERR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    SIM_ERR(CUDA_ERROR_NOT_READY, "device not ready"),
    SIM_ERR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    SIM_ERR(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    SIM_ERR(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    SIM_ERR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped"),
    SIM_ERR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region"),
    SIM_ERR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    SIM_ERR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    SIM_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"),
    SIM_ERR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture"),
    SIM_ERR(CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences"),
    SIM_ERR(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began"),
    SIM_ERR(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work"),
    SIM_ERR(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream"),
    SIM_ERR(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
            "operation would make the legacy stream depend on a capturing blocking stream"),
    SIM_ERR(CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on an event last recorded in a capturing stream"),
    SIM_ERR(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
            "attempt to terminate a thread-local capture sequence from another thread"),
    SIM_ERR(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
            "the graph update was not performed because it included changes which violated constraints specific to "
            "instantiated graph update"),
    SIM_ERR(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef SIM_ERR

// A stream op before it becomes an Item or a capture node.
struct Op {
  ItemKind kind;
  KernelLaunch kernel;
  CopyOp copy;
  MemsetOp memset;
  HostCall host;
};

CUDA_MEMCPY3D copyRawOf(const CopyOp& c) {
  // Captured copies are described as CUDA_MEMCPY3D: each side is CU_MEMORYTYPE_DEVICE
  // (srcDevice/dstDevice) for device memory or CU_MEMORYTYPE_HOST (srcHost/dstHost)
  // for host memory; a 1-D copy of n bytes is WidthInBytes = n, Height = Depth = 1,
  // pitches and heights 0.
  CUDA_MEMCPY3D r{};
  bool srcDev = classify(c.src, 1) == MemClass::Device;
  bool dstDev = classify(c.dst, 1) == MemClass::Device;
  r.srcMemoryType = srcDev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  if (srcDev) {
    r.srcDevice = c.src;
  } else {
    r.srcHost = reinterpret_cast<const void*>(c.src);
  }
  r.dstMemoryType = dstDev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  if (dstDev) {
    r.dstDevice = c.dst;
  } else {
    r.dstHost = reinterpret_cast<void*>(c.dst);
  }
  r.srcPitch = c.srcPitch;
  r.dstPitch = c.dstPitch;
  r.srcHeight = c.srcHeight;
  r.dstHeight = c.dstHeight;
  r.WidthInBytes = c.width;
  r.Height = c.height;
  r.Depth = c.depth;
  return r;
}

CUresult submit(Stream* s, Op&& op) {
  SimState& st = state();
  CaptureCheck cc = captureCheckForOp(s);
  if (cc.result != CUDA_SUCCESS) return cc.result;
  if (cc.capture) {
    if (op.kind == ItemKind::Kernel && !st.refuseCaptureKernel.empty() && op.kernel.kernel &&
        op.kernel.kernel->name == st.refuseCaptureKernel) {
      invalidate(s->capture.get());
      return CUDA_ERROR_INVALID_VALUE;
    }
    NodeParams p;
    switch (op.kind) {
      case ItemKind::Kernel:
        p.kind = NodeKind::Kernel;
        p.kernel = std::move(op.kernel);
        ++st.counters.capturedLaunches;
        break;
      case ItemKind::Memcpy:
        p.kind = NodeKind::Memcpy;
        p.copyRaw = copyRawOf(op.copy);
        p.copy = std::move(op.copy);
        break;
      case ItemKind::Memset:
        p.kind = NodeKind::Memset;
        p.memset = op.memset;
        break;
      case ItemKind::HostFn:
        p.kind = NodeKind::Host;
        p.host = op.host;
        break;
      default:
        fatal("submit: op kind cannot be captured");
    }
    addCaptureNode(s, std::move(p));
    return CUDA_SUCCESS;
  }
  auto item = std::make_unique<Item>();
  item->kind = op.kind;
  item->kernel = std::move(op.kernel);
  item->copy = std::move(op.copy);
  item->memset = op.memset;
  item->host = op.host;
  if (op.kind == ItemKind::Kernel) ++st.counters.eagerLaunches;
  enqueue(s, std::move(item));
  return CUDA_SUCCESS;
}

CUresult resolve(CUstream h, bool pt, Stream** out) {
  CUresult err;
  *out = resolveStream(h, pt, &err);
  return err;
}

// ---------------------------------------------------------------- launches

CUresult buildLaunch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem, void** kernelParams,
                     void** extra, const CUlaunchAttribute* attrs, unsigned numAttrs, KernelLaunch* out) {
  KernelObj* k = lookupKernel(f);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  for (int i = 0; i < 3; ++i) {
    if (grid[i] == 0 || block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (block[0] > 1024 || block[1] > 1024 || block[2] > 64 || uint64_t{block[0]} * block[1] * block[2] > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (grid[1] > 65535 || grid[2] > 65535) return CUDA_ERROR_INVALID_VALUE;
  if (shmem > kMaxSharedMem || shmem > k->maxDynamicShared) return CUDA_ERROR_INVALID_VALUE;
  if (kernelParams && extra) return CUDA_ERROR_INVALID_VALUE;
  if (numAttrs > 0 && !attrs) return CUDA_ERROR_INVALID_VALUE;
  out->kernel = k;
  out->handle = f;
  std::copy(grid, grid + 3, out->grid);
  std::copy(block, block + 3, out->block);
  out->sharedMem = shmem;
  out->clusterWidth = k->requiredClusterWidth;
  out->params.assign(k->totalBytes, 0);
  size_t n = k->sizes.size();
  if (n > 0) {
    if (kernelParams) {
      for (size_t i = 0; i < n; ++i) {
        if (!kernelParams[i]) return CUDA_ERROR_INVALID_VALUE;
        std::memcpy(out->params.data() + k->offsets[i], kernelParams[i], k->sizes[i]);
      }
    } else if (extra) {
      const void* buf = nullptr;
      const size_t* bufSize = nullptr;
      for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
          buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
          bufSize = static_cast<const size_t*>(extra[i + 1]);
        } else {
          return CUDA_ERROR_INVALID_VALUE;
        }
      }
      // The driver refuses a buffer whose size is not the kernel's parameter
      // size (larger too), without reading it.
      if (!buf || !bufSize || *bufSize != k->totalBytes) return CUDA_ERROR_INVALID_VALUE;
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(out->params.data() + k->offsets[i], static_cast<const uint8_t*>(buf) + k->offsets[i], k->sizes[i]);
      }
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (unsigned i = 0; i < numAttrs; ++i) {
    if (attrs[i].id >= CU_LAUNCH_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_IGNORE) continue;
    CUlaunchAttribute a;
    std::memset(&a, 0, sizeof a);
    a.id = attrs[i].id;
    a.value = attrs[i].value;
    out->attrs.push_back(a);
  }
  return CUDA_SUCCESS;
}

CUresult launchImpl(const char* api, bool pt, CUfunction f, const unsigned grid[3], const unsigned block[3],
                    unsigned shmem, CUstream h, void** kernelParams, void** extra, const CUlaunchAttribute* attrs,
                    unsigned numAttrs, bool legacyLaunch = false) {
  SIM_ENTRY(api, kNeedCtx | kSteps);
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  // As in CUDA, a kernel launch fails on a stream of another context (a copy,
  // memset or host function may use one and runs in that stream's context);
  // a primary context and the green contexts made from it are one family
  // (familyOf): a launch on a stream of any of them runs in that stream's.
  // SimState::kernelStreamContext: a CUkernel into a created stream takes
  // the stream's context.
  const KernelObj* named = lookupKernel(f);
  const bool fromStream = state().kernelStreamContext && named && named->family == SIM_KERNEL_LIBRARY &&
                          h != nullptr && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD;
  if (!fromStream && !sameFamily(s->ctx, currentCtx())) return CUDA_ERROR_INVALID_HANDLE;
  Op op{ItemKind::Kernel, {}, {}, {}, {}};
  if (CUresult r = buildLaunch(f, grid, block, shmem, kernelParams, extra, attrs, numAttrs, &op.kernel);
      r != CUDA_SUCCESS) {
    return r;
  }
  KernelObj* kernel = op.kernel.kernel;
  // KernelObj::cachePreference: a cooperative launch too large for the SM
  // share of shared memory that PREFER_L1 leaves.
  constexpr uint64_t kCooperativeBlocksUnderL1 = 64;
  const bool cooperative = std::any_of(op.kernel.attrs.begin(), op.kernel.attrs.end(), [](const CUlaunchAttribute& a) {
    return a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && a.value.cooperative;
  });
  const int preference =
      kernel->cachePreference != CU_FUNC_CACHE_PREFER_NONE ? kernel->cachePreference : s->ctx->cachePreference;
  if (cooperative && preference == CU_FUNC_CACHE_PREFER_L1 &&
      uint64_t{grid[0]} * grid[1] * grid[2] > kCooperativeBlocksUnderL1)
    return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  // Context::cigSharedMemFallback: more shared memory than a CIG context has.
  if (!s->ctx->cigSharedMemFallback && shmem > kCigSharedMemBytes) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  const bool capturing = s->capture != nullptr;
  const CUresult r = submit(s, std::move(op));
  // KernelObj::legacy: a cuLaunchKernel call the driver took invalidates it.
  if (r == CUDA_SUCCESS && !legacyLaunch) kernel->legacy = KernelObj::LegacyLaunchState{};
  if (r == CUDA_SUCCESS && !capturing) growStackFor(s->ctx, *kernel);  // in a capture: when its graph is launched
  return r;
}

CUresult launchKernel(bool pt, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                      unsigned bz, unsigned shmem, CUstream h, void** kernelParams, void** extra) {
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launchImpl("cuLaunchKernel", pt, f, grid, block, shmem, h, kernelParams, extra, nullptr, 0);
}

CUresult launchKernelEx(bool pt, const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  if (!config) {
    SIM_ENTRY("cuLaunchKernelEx", kNeedCtx);
    return CUDA_ERROR_INVALID_VALUE;
  }
  const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  return launchImpl("cuLaunchKernelEx", pt, f, grid, block, config->sharedMemBytes, config->hStream, kernelParams,
                    extra, config->attrs, config->numAttrs);
}

CUresult launchCooperative(bool pt, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shmem, CUstream h, void** kernelParams) {
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  CUlaunchAttribute coop;
  std::memset(&coop, 0, sizeof coop);
  coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  coop.value.cooperative = 1;
  return launchImpl("cuLaunchCooperativeKernel", pt, f, grid, block, shmem, h, kernelParams, nullptr, &coop, 1);
}

// The deprecated launch API (KernelObj::legacy): cuLaunch, cuLaunchGrid and
// cuLaunchGridAsync launch with the state set through cuFuncSetBlockShape,
// cuFuncSetSharedSize and cuParamSet*.
CUresult launchLegacy(const char* api, CUfunction f, unsigned gw, unsigned gh, CUstream h) {
  unsigned block[3], shmem;
  std::vector<uint8_t> bytes;
  std::vector<void*> ptrs;
  {
    SIM_ENTRY(api, kNeedCtx);
    KernelObj* k = lookupKernel(f);
    if (!k) return CUDA_ERROR_INVALID_HANDLE;
    const KernelObj::LegacyLaunchState& l = k->legacy;
    if (l.block[0] == 0 || !l.paramSizeSet || l.params.size() != k->totalBytes) return CUDA_ERROR_INVALID_VALUE;
    std::copy(l.block, l.block + 3, block);
    shmem = l.sharedBytes;
    bytes = l.params;
    for (size_t i = 0; i < k->sizes.size(); ++i) ptrs.push_back(bytes.data() + k->offsets[i]);
  }
  const unsigned grid[3] = {gw, gh, 1};
  return launchImpl(api, false, f, grid, block, shmem, h, ptrs.empty() ? nullptr : ptrs.data(), nullptr, nullptr, 0,
                    /*legacyLaunch=*/true);
}

// ---------------------------------------------------------------- copies / memsets

enum class Need { Any, Device, Host };

bool classOk(MemClass c, Need need) {
  switch (need) {
    case Need::Any:
      return c != MemClass::Invalid;
    case Need::Device:
      return c == MemClass::Device;
    case Need::Host:
      return c == MemClass::PinnedHost || c == MemClass::PageableHost;
  }
  return false;
}

// Issues a copy. `sync` = host-blocking synchronous API.
CUresult copyImpl(Lock& lk, CopyOp c, CUstream h, bool pt, bool sync, Need dstNeed, Need srcNeed) {
  SimState& st = state();
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  // An empty copy does nothing, and a stream capture adds no node for it (a
  // tool must not take the capture's last node for its own).
  if (c.width == 0 || c.height == 0 || c.depth == 0) return CUDA_SUCCESS;
  if (c.height == 1 && c.depth == 1) c.dstPitch = c.srcPitch = 0;
  if (c.depth == 1) c.dstHeight = c.srcHeight = 0;
  if (c.height > 1 && (c.dstPitch < c.width || c.srcPitch < c.width)) return CUDA_ERROR_INVALID_VALUE;
  size_t dstExt = copyExtent(c.width, c.height, c.depth, c.dstPitch, c.dstHeight);
  size_t srcExt = copyExtent(c.width, c.height, c.depth, c.srcPitch, c.srcHeight);
  MemClass dc = classify(c.dst, dstExt), sc = classify(c.src, srcExt);
  if (!classOk(dc, dstNeed) || !classOk(sc, srcNeed)) return CUDA_ERROR_INVALID_VALUE;
  bool pageable = dc == MemClass::PageableHost || sc == MemClass::PageableHost;
  if (sync) {
    if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
    if (s->capture) {
      invalidate(s->capture.get());
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  if (pageable && s->capture && s->capture->active) {
    // Graphs cannot reference pageable host memory.
    invalidate(s->capture.get());
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (sc == MemClass::PageableHost && !(s->capture && s->capture->active)) {
    auto staged = std::make_shared<std::vector<uint8_t>>();
    staged->reserve(c.width * c.height * c.depth);
    for (size_t z = 0; z < c.depth; ++z) {
      for (size_t y = 0; y < c.height; ++y) {
        auto* row = reinterpret_cast<const uint8_t*>(c.src + z * c.srcHeight * c.srcPitch + y * c.srcPitch);
        staged->insert(staged->end(), row, row + c.width);
      }
    }
    c.staged = std::move(staged);
  }
  Op op{ItemKind::Memcpy, {}, std::move(c), {}, {}};
  if (CUresult r = submit(s, std::move(op)); r != CUDA_SUCCESS) return r;
  if (sync || dc == MemClass::PageableHost) {
    if (s->capture) return CUDA_SUCCESS;  // unreachable: refused above
    CompletionPtr done = s->lastDone;
    drainUntil(
        lk, [&] { return done->done; }, sync ? "synchronous copy" : "copy to pageable host memory");
    if (st.sticky != CUDA_SUCCESS) return st.sticky;
  }
  return CUDA_SUCCESS;
}

CopyOp linear(uint64_t dst, uint64_t src, size_t n) {
  CopyOp c;
  c.dst = dst;
  c.src = src;
  c.width = n;
  return c;
}

CUresult copy1D(const char* api, bool pt, bool sync, uint64_t dst, uint64_t src, size_t n, CUstream h, Need dn,
                Need sn) {
  SIM_ENTRY(api, kNeedCtx | kSteps);
  return copyImpl(SIM_LOCK, linear(dst, src, n), h, pt, sync, dn, sn);
}

uint64_t sideAddress(CUmemorytype type, const void* host, CUdeviceptr dev, CUresult* err) {
  switch (type) {
    case CU_MEMORYTYPE_HOST:
      return reinterpret_cast<uint64_t>(host);
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
      return dev;
    default:
      *err = CUDA_ERROR_INVALID_VALUE;
      return 0;  // arrays are not simulated
  }
}

Need sideNeed(CUmemorytype type) {
  return type == CU_MEMORYTYPE_HOST ? Need::Host : (type == CU_MEMORYTYPE_DEVICE ? Need::Device : Need::Any);
}

CUresult copy2D(const char* api, bool pt, bool sync, const CUDA_MEMCPY2D* p, CUstream h) {
  SIM_ENTRY(api, kNeedCtx | kSteps);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult err = CUDA_SUCCESS;
  uint64_t src = sideAddress(p->srcMemoryType, p->srcHost, p->srcDevice, &err);
  uint64_t dst = sideAddress(p->dstMemoryType, p->dstHost, p->dstDevice, &err);
  if (err != CUDA_SUCCESS) return err;
  CopyOp c;
  c.src = src + p->srcY * p->srcPitch + p->srcXInBytes;
  c.dst = dst + p->dstY * p->dstPitch + p->dstXInBytes;
  c.width = p->WidthInBytes;
  c.height = p->Height;
  c.srcPitch = p->srcPitch;
  c.dstPitch = p->dstPitch;
  return copyImpl(SIM_LOCK, c, h, pt, sync, sideNeed(p->dstMemoryType), sideNeed(p->srcMemoryType));
}

CUresult memsetImpl(const char* api, bool pt, bool sync, uint64_t dst, size_t pitch, uint32_t value, unsigned elem,
                    size_t width, size_t height, CUstream h) {
  SIM_ENTRY(api, kNeedCtx | kSteps);
  SimState& st = state();
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  // An empty memset does nothing and adds no capture node (as a copy above);
  // an address not aligned to the element size is refused.
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  if (height == 1) pitch = 0;
  if (dst % elem || pitch % elem || (height > 1 && pitch < width * elem)) return CUDA_ERROR_INVALID_VALUE;
  MemClass c = classify(dst, copyExtent(width * elem, height, 1, pitch, 0));
  if (c != MemClass::Device && c != MemClass::PinnedHost) return CUDA_ERROR_INVALID_VALUE;
  if (sync) {
    if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
    if (s->capture) {
      invalidate(s->capture.get());
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  MemsetOp m;
  m.dst = dst;
  m.elementSize = elem;
  m.value = elem == 1 ? (value & 0xff) : (elem == 2 ? (value & 0xffff) : value);
  m.width = width;
  m.height = height;
  m.pitch = pitch;
  Op op{ItemKind::Memset, {}, {}, m, {}};
  if (CUresult r = submit(s, std::move(op)); r != CUDA_SUCCESS) return r;
  if (sync) {
    CompletionPtr done = s->lastDone;
    drainUntil(
        SIM_LOCK, [&] { return done->done; }, "synchronous memset");
    if (st.sticky != CUDA_SUCCESS) return st.sticky;
  }
  return CUDA_SUCCESS;
}

CUresult hostFuncImpl(bool pt, CUstream h, CUhostFn fn, void* userData) {
  SIM_ENTRY("cuLaunchHostFunc", kNeedCtx | kSteps);
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  Op op{ItemKind::HostFn, {}, {}, {}, HostCall{fn, userData}};
  return submit(s, std::move(op));
}

// ---------------------------------------------------------------- streams

}  // namespace

CUresult createStream(CUstream* ph, unsigned flags, int priority, Context* ctx) {
  SimState& st = state();
  if (!ph || (flags & ~unsigned{CU_STREAM_NON_BLOCKING})) return CUDA_ERROR_INVALID_VALUE;
  auto s = std::make_shared<Stream>();
  s->id = st.nextStreamId++;
  s->ctx = ctx ? ctx : currentCtx();
  s->thread = std::this_thread::get_id();
  if (!st.freedStreamHandles.empty()) {
    s->handle = st.freedStreamHandles.back();
    st.freedStreamHandles.pop_back();
  } else {
    s->handle = reinterpret_cast<CUstream>(s.get());
    // The object landed where a recycled handle still names a live stream.
    if (st.streamByHandle.count(s->handle)) s->handle = reinterpret_cast<CUstream>(freshHandle());
  }
  s->flags = flags;
  s->priority = std::clamp(priority, -5, 0);
  s->blocking = !(flags & CU_STREAM_NON_BLOCKING);
  st.streams.push_back(s);
  st.streamByHandle[s->handle] = s;
  *ph = s->handle;
  return CUDA_SUCCESS;
}

namespace {

CUresult streamQueryImpl(bool pt, CUstream h) {
  SIM_ENTRY("cuStreamQuery", kNeedCtx);
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = checkSyncOfStream(s); r != CUDA_SUCCESS) return r;
  randomSteps(SIM_LOCK, 1);  // time passes: a polling caller always makes progress
  if (state().sticky != CUDA_SUCCESS) return state().sticky;
  if (!streamIdle(s)) return CUDA_ERROR_NOT_READY;
  // The legacy stream's query also answers for its context's blocking streams
  // (per-thread ones included), as the driver does on an H100
  // (tests/gpu/traps_r13.cu, legacy_query_gate); a blocking stream's does not
  // answer for the legacy stream.
  if (s->legacy)
    for (const auto& o : state().streams)
      if (o.get() != s && o->ctx == s->ctx && o->blocking && !o->legacy && !o->destroyed && !streamIdle(o.get()))
        return CUDA_ERROR_NOT_READY;
  return CUDA_SUCCESS;
}

CUresult streamSyncImpl(bool pt, CUstream h) {
  SIM_ENTRY("cuStreamSynchronize", kNeedCtx | kSteps);
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = checkSyncOfStream(s); r != CUDA_SUCCESS) return r;
  drainUntil(
      SIM_LOCK, [s] { return streamIdle(s); }, "cuStreamSynchronize");
  return state().sticky;
}

CUresult streamWaitEventImpl(bool pt, CUstream h, CUevent e, unsigned flags) {
  SIM_ENTRY("cuStreamWaitEvent", kNeedCtx | kSteps);
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Event> ev = lookupEvent(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~unsigned{CU_EVENT_WAIT_EXTERNAL}) return CUDA_ERROR_INVALID_VALUE;
  if (ev->capSession) {
    CaptureSession* cs = ev->capSession.get();
    if (!cs->active) return CUDA_ERROR_CAPTURED_EVENT;
    if (cs->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (s->capture.get() == cs) {
      for (Node* n : ev->capNodes) {
        if (std::find(s->captureDeps.begin(), s->captureDeps.end(), n) == s->captureDeps.end()) {
          s->captureDeps.push_back(n);
        }
      }
      return CUDA_SUCCESS;
    }
    if (s->capture) {
      invalidate(cs);
      invalidate(s->capture.get());
      return CUDA_ERROR_STREAM_CAPTURE_MERGE;
    }
    if (s->legacy) {
      invalidate(cs);
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    // Simplification: a capture stays within one context (one graph = one
    // context), or one family of a primary context and its green contexts.
    if (!sameFamily(s->ctx, cs->ctx)) {
      invalidate(cs);
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    // s joins the capture (fork).
    s->capture = ev->capSession;
    s->captureDeps = ev->capNodes;
    cs->streams.push_back(s);
    return CUDA_SUCCESS;
  }
  CaptureCheck cc = captureCheckForOp(s);
  if (cc.result != CUDA_SUCCESS) return cc.result;
  if (cc.capture) {
    if (flags & CU_EVENT_WAIT_EXTERNAL) {
      NodeParams p;
      p.kind = NodeKind::EventWait;
      p.event = ev;
      addCaptureNode(s, std::move(p));
      return CUDA_SUCCESS;
    }
    if (!ev->lastRecord) return CUDA_SUCCESS;  // never recorded: no dependency
    invalidate(s->capture.get());
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (!ev->lastRecord) return CUDA_SUCCESS;  // never recorded: a no-op, as in CUDA
  auto item = std::make_unique<Item>();
  item->kind = ItemKind::EventWait;
  item->deps.push_back(ev->lastRecord);
  enqueue(s, std::move(item));
  return CUDA_SUCCESS;
}

CUresult eventRecordImpl(const char* api, bool pt, CUevent e, CUstream h, unsigned flags) {
  SIM_ENTRY(api, kNeedCtx | kSteps);
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Event> ev = lookupEvent(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~unsigned{CU_EVENT_RECORD_EXTERNAL}) return CUDA_ERROR_INVALID_VALUE;
  // As in CUDA, an event is recorded only on a stream of its own context (or
  // of its family: a green context's streams take its primary's events).
  if (!sameFamily(ev->ctx, s->ctx)) return CUDA_ERROR_INVALID_HANDLE;
  CaptureCheck cc = captureCheckForOp(s);
  if (cc.result != CUDA_SUCCESS) return cc.result;
  if (cc.capture) {
    if (flags & CU_EVENT_RECORD_EXTERNAL) {
      NodeParams p;
      p.kind = NodeKind::EventRecord;
      p.event = ev;
      addCaptureNode(s, std::move(p));
    }
    ev->capSession = s->capture;
    ev->capNodes = s->captureDeps;
    return CUDA_SUCCESS;
  }
  auto item = std::make_unique<Item>();
  item->kind = ItemKind::EventRecord;
  enqueue(s, std::move(item));
  ev->lastRecord = s->lastDone;
  if (s->blocking && !s->legacy) {
    // Measured on an H100 (tests/gpu/driver_facts.cu): an event recorded on a
    // blocking stream completes only after earlier legacy-stream work, while
    // the stream itself goes on without waiting for that work.
    const CompletionPtr& legacyLast = legacyStreamOf(s->ctx)->lastDone;
    if (legacyLast && !legacyLast->done) ev->lastRecord = joinedCompletion({s->lastDone, legacyLast});
  }
  ev->capSession.reset();
  ev->capNodes.clear();
  return CUDA_SUCCESS;
}

// The device whose pool `pool` is, or -1.
static int poolDevice(CUmemoryPool pool) {
  for (int d = 0; d < state().deviceCount; ++d)
    if (pool == defaultPoolHandle(d)) return d;
  return -1;
}

// cuMemAllocAsync (pool null), and cuMemAllocFromPoolAsync (`name`), whose
// pools are all the device's one pool here (SIM_ASYNC_POOL_BYTES).
CUresult memAllocAsyncImpl(const char* name, bool pt, CUdeviceptr* dptr, size_t bytes, CUstream h,
                           CUmemoryPool pool = nullptr) {
  SIM_ENTRY(name, kNeedCtx | kSteps);
  if (pool && poolDevice(pool) < 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  CaptureCheck cc = captureCheckForOp(s);
  if (cc.result != CUDA_SUCCESS) return cc.result;
  if (cc.capture) {
    // Simplification: memory nodes are not simulated.
    invalidate(s->capture.get());
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  SimState& st = state();
  if (st.asyncPoolBytes && st.asyncPoolInUse + bytes > st.asyncPoolBytes) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t a = deviceAllocLocked(bytes, s->ctx->device);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  st.asyncPoolInUse += bytes;
  const int poolDev = pool ? poolDevice(pool) : s->ctx->device;
  st.asyncPoolBlocks[a] = SimState::AsyncBlock{bytes, poolDev};
  SimState::PoolStats& ps = st.pools[size_t(poolDev)];
  ps.used += bytes;
  ps.usedHigh = std::max(ps.usedHigh, ps.used);
  ps.reserved = std::max(ps.reserved, ps.used);
  ps.reservedHigh = std::max(ps.reservedHigh, ps.reserved);
  ++state().counters.allocsAsync;
  if (state().firstAllocAsyncThread == std::thread::id()) state().firstAllocAsyncThread = std::this_thread::get_id();
  auto item = std::make_unique<Item>();
  item->kind = ItemKind::AllocAsync;
  enqueue(s, std::move(item));
  *dptr = a;
  return CUDA_SUCCESS;
}

CUresult memFreeAsyncImpl(bool pt, CUdeviceptr dptr, CUstream h) {
  SIM_ENTRY("cuMemFreeAsync", kNeedCtx | kSteps);
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  // Only the start of device memory (a pointer into a block, host memory: refused).
  if (!isDeviceAllocationBase(dptr)) return CUDA_ERROR_INVALID_VALUE;
  CaptureCheck cc = captureCheckForOp(s);
  if (cc.result != CUDA_SUCCESS) return cc.result;
  if (cc.capture) {
    invalidate(s->capture.get());
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (state().firstAllocAsyncThread != std::thread::id() &&
      state().firstAllocAsyncThread != std::this_thread::get_id())
    ++state().counters.freesAsyncOffThread;
  // The pool's capacity (SIM_ASYNC_POOL_BYTES) counts a block as free once its
  // free is enqueued: later allocations are ordered after it. So do the
  // pool's statistics (used memory drops at the free's call, as the driver's).
  if (auto it = state().asyncPoolBlocks.find(dptr); it != state().asyncPoolBlocks.end()) {
    state().asyncPoolInUse -= it->second.bytes;
    state().pools[size_t(it->second.device)].used -= it->second.bytes;
    state().asyncPoolBlocks.erase(it);
  }
  auto item = std::make_unique<Item>();
  item->kind = ItemKind::FreeAsync;
  item->ptr = dptr;
  enqueue(s, std::move(item));
  return CUDA_SUCCESS;
}

int deviceAttribute(CUdevice_attribute a) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      return kMaxSharedMem;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      return 233472;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      return 52428800;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return 132;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      return 2048;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return 0;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      return 1;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      return 1;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
      return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      return 0x18;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      return 32;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
      return 1;
    default:
      return 0;
  }
}

}  // namespace

void growStackFor(Context* ctx, const KernelObj& k) {
  if (ctx && k.stackBytes > ctx->stackLimit) ctx->stackLimit = (k.stackBytes + 15) / 16 * 16;
}


CUresult buildKernelFromNodeParams(const CUDA_KERNEL_NODE_PARAMS_v2& p, KernelLaunch* out) {
  CUfunction f = p.func ? p.func : reinterpret_cast<CUfunction>(p.kern);
  const unsigned grid[3] = {p.gridDimX, p.gridDimY, p.gridDimZ};
  const unsigned block[3] = {p.blockDimX, p.blockDimY, p.blockDimZ};
  return buildLaunch(f, grid, block, p.sharedMemBytes, p.kernelParams, p.extra, nullptr, 0, out);
}

CUcontext currentContext() { return ctxStack().empty() ? nullptr : ctxStack().back(); }

Context* lookupContext(CUcontext h) {
  // An ended primary context's handle may name the one made after it.
  for (auto& c : state().contexts) {
    if (c->handle() == h && !c->destroyed) return c.get();
  }
  return nullptr;
}

Context* currentCtx() {
  CUcontext h = currentContext();
  return h ? lookupContext(h) : nullptr;
}

std::shared_ptr<Event> lookupEvent(CUevent e) {
  SimState& st = state();
  auto it = st.events.find(e);
  return it == st.events.end() ? nullptr : it->second;
}

void drainUntilRecorded(Lock& lk, const Event& ev, const char* what) {
  if (!ev.lastRecord) return;
  CompletionPtr rec = ev.lastRecord;
  drainUntil(lk, [&] { return rec->done; }, what);
}

}  // namespace sim

using namespace sim;

extern "C" {

// ---------------------------------------------------------------- init / device / context

CUresult CUDAAPI cuInit(unsigned int flags) {
  SIM_ENTRY("cuInit", kNoInit);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  SimState& st = state();
  if (!st.initialized) {
    initMemoryLocked();
    st.primaryRefs.assign(st.deviceCount, 0);
    st.pools.assign(size_t(st.deviceCount), SimState::PoolStats{});
    for (int d = 0; d < st.deviceCount; ++d) st.primaryCtx.push_back(newContext(d, true));
    legacyStreamOf(st.primaryCtx[0]);  // device 0's legacy stream keeps id 1
    st.initialized = true;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* v) {
  SIM_ENTRY("cuDriverGetVersion", kNoInit | kNoSticky);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* dev, int ordinal) {
  SIM_ENTRY("cuDeviceGet", kNoSticky);
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  SIM_ENTRY("cuDeviceGetCount", kNoSticky);
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = state().deviceCount;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  SIM_ENTRY("cuDeviceGetName", kNoSticky);
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "%s", "NVIDIA H100 80GB HBM3 (graft sim)");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  SIM_ENTRY("cuDeviceGetAttribute", kNoSticky);
  if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pi = deviceAttribute(attrib);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  SIM_ENTRY("cuDeviceTotalMem_v2", kNoSticky);
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = 16ull << 30;
  return CUDA_SUCCESS;
}

static CUresult deviceUuid(CUuuid* uuid, CUdevice dev) {
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  char id[32];
  std::snprintf(id, sizeof id, "graft-sim-dev-%02d", static_cast<int>(dev) % 100);
  std::memcpy(uuid->bytes, id, 16);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  SIM_ENTRY("cuDeviceGetUuid", kNoSticky);
  return deviceUuid(uuid, dev);
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  SIM_ENTRY("cuDeviceGetUuid_v2", kNoSticky);
  return deviceUuid(uuid, dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  SIM_ENTRY("cuDevicePrimaryCtxRetain", 0);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = retainPrimary(dev)->handle();
  return CUDA_SUCCESS;
}

}  // extern "C"

Context* sim::retainPrimary(int dev) {
  SimState& st = state();
  Context*& primary = st.primaryCtx[size_t(dev)];
  if (primary->destroyed) {
    // The last release ended it: a new context, under the same handle (a
    // driver may hand back the same value, as it does streams' and events').
    const CUcontext handle = primary->handle();
    primary = newContext(dev, true);
    primary->handleValue = handle;
  }
  ++st.primaryRefs[size_t(dev)];
  return primary;
}

// As the driver: the last release ends the primary context (everything in it
// with it: endPrimaryContext); a later retain makes a new one.
CUresult sim::primaryRelease(Lock& lk, CUdevice dev) {
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (state().primaryRefs[dev] <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--state().primaryRefs[dev] == 0) endPrimaryContext(lk, state().primaryCtx[size_t(dev)]);
  return CUDA_SUCCESS;
}

extern "C" {

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  SIM_ENTRY("cuDevicePrimaryCtxRelease", kNoSticky);
  return primaryRelease(SIM_LOCK, dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SIM_ENTRY("cuDevicePrimaryCtxRelease_v2", kNoSticky);
  return primaryRelease(SIM_LOCK, dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  SIM_ENTRY("cuDevicePrimaryCtxGetState", kNoSticky);
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  *active = state().primaryRefs[dev] > 0;
  return CUDA_SUCCESS;
}

// A new (non-primary) context of `dev`, with its own legacy stream, pushed on the
// calling thread's stack. Simplification: params and flags are ignored.
CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  SIM_ENTRY("cuCtxCreate_v4", 0);
  (void)params;
  (void)flags;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context* c = newContext(dev, false);
  ctxStack().push_back(c->handle());
  *pctx = c->handle();
  return CUDA_SUCCESS;
}

// A created context: its work is drained, then it is gone (its streams and events
// become invalid handles). A primary context's handle only drops a reference.
static CUresult ctxDestroy(Lock& lk, CUcontext ctx);
CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  SIM_ENTRY("cuCtxDestroy_v2", kNoSticky);
  return ctxDestroy(SIM_LOCK, ctx);
}
// The CUDA 2.0 ABI of the same call (cuGetProcAddress below version 4000): what
// a program gets when it asks for an older ABI than graft's table describes.
CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) {
  SIM_ENTRY("cuCtxDestroy", kNoSticky);
  return ctxDestroy(SIM_LOCK, ctx);
}
static CUresult ctxDestroy(Lock& lk, CUcontext ctx) {
  Context* c = lookupContext(ctx);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  // A green context's converted context ends with cuGreenCtxDestroy only
  // (a choice of the model).
  if (c->green) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ctxStack().empty() && ctxStack().back() == ctx) ctxStack().pop_back();
  if (c->primary) {
    if (state().primaryRefs[c->device] > 0) --state().primaryRefs[c->device];
    return CUDA_SUCCESS;
  }
  drainUntil(
      lk,
      [c] {
        for (auto& s : state().streams) {
          if (s->ctx == c && !streamIdle(s.get())) return false;
        }
        return true;
      },
      "cuCtxDestroy");
  c->destroyed = true;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  SIM_ENTRY("cuCtxGetCurrent", kNoSticky);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = currentContext();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  SIM_ENTRY("cuCtxSetCurrent", kNoSticky);
  if (ctx && !lookupContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ctxStack().empty()) ctxStack().pop_back();
  if (ctx) ctxStack().push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  SIM_ENTRY("cuCtxPushCurrent_v2", kNoSticky);
  if (!lookupContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  ctxStack().push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  SIM_ENTRY("cuCtxPopCurrent_v2", kNoSticky);
  if (ctxStack().empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = ctxStack().back();
  ctxStack().pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* dev) {
  SIM_ENTRY("cuCtxGetDevice", kNeedCtx | kNoSticky);
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  *dev = currentCtx()->device;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long* id) {
  SIM_ENTRY("cuCtxGetId", kNoSticky);
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  Context* c = ctx ? lookupContext(ctx) : currentCtx();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *id = c->id;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice* dev, CUcontext ctx) {
  SIM_ENTRY("cuCtxGetDevice_v2", kNoSticky);
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  Context* c = ctx ? lookupContext(ctx) : currentCtx();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = c->device;
  return CUDA_SUCCESS;
}

// Waits for the work of one context only (every stream created in it, its legacy
// stream and its per-thread streams); a primary context's also for the work of
// the green contexts made from it (cuda.h).
static CUresult ctxSynchronize(Lock& lk, Context* c) {
  if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
  drainUntil(
      lk,
      [c] {
        for (auto& s : state().streams) {
          if ((s->ctx == c || (c->primary && s->ctx->greenOf == c)) && !streamIdle(s.get())) return false;
        }
        return true;
      },
      "cuCtxSynchronize");
  return state().sticky;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  SIM_ENTRY("cuCtxSynchronize", kNeedCtx | kSteps | kNoSticky);
  return ctxSynchronize(SIM_LOCK, currentCtx());
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  SIM_ENTRY("cuCtxSynchronize_v2", kSteps | kNoSticky);
  Context* c = ctx ? lookupContext(ctx) : currentCtx();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  return ctxSynchronize(SIM_LOCK, c);
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  SIM_ENTRY("cuCtxGetApiVersion", kNoSticky);
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  if (ctx && !lookupContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  SIM_ENTRY("cuCtxGetFlags", kNeedCtx | kNoSticky);
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  SIM_ENTRY("cuCtxGetStreamPriorityRange", kNeedCtx | kNoSticky);
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  SIM_ENTRY("cuModuleGetLoadingMode", kNoInit | kNoSticky);
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  *mode = CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  SIM_ENTRY("cuGetErrorName", kNoInit | kNoSticky);
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  for (const ErrorInfo& e : kErrors) {
    if (e.code == error) {
      *pStr = e.name;
      return CUDA_SUCCESS;
    }
  }
  *pStr = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  SIM_ENTRY("cuGetErrorString", kNoInit | kNoSticky);
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  for (const ErrorInfo& e : kErrors) {
    if (e.code == error) {
      *pStr = e.text;
      return CUDA_SUCCESS;
    }
  }
  *pStr = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

// ---------------------------------------------------------------- the driver's error log
// CUDA 12.9's, as on the H100 (driver 580): a failing call logs a line
// "[HH:MM:SS.mmm][pthread_self][CUDA][E] message", callbacks run on the
// failing call's thread (here after the simulator's lock is released), an
// iterator counts lines, cuLogsDumpToFile replaces the file's contents. Only
// the kernel-handle queries log here (one line per failure), which is what
// graft's own probes call.

namespace {
struct DriverLog {
  std::mutex m;
  std::vector<std::string> lines;
  std::vector<std::pair<CUlogsCallback, void*>> callbacks;
};
DriverLog& driverLog() {
  static auto* l = new DriverLog;
  return *l;
}
}  // namespace

// Logs the failure `r` of `api` and calls the callbacks, after releasing `lk`.
static CUresult logFailure(Lock& lk, const char* api, CUresult r) {
  if (r == CUDA_SUCCESS) return r;
  const std::string message = "Returning " + std::to_string(int(r)) + " from " + api;
  std::vector<std::pair<CUlogsCallback, void*>> callbacks;
  {
    DriverLog& log = driverLog();
    std::lock_guard<std::mutex> g(log.m);
    log.lines.push_back("[00:00:00.000][" + std::to_string(uint64_t(pthread_self())) + "][CUDA][E] " + message);
    callbacks = log.callbacks;
  }
  if (lk.owns_lock()) lk.unlock();
  for (const auto& [fn, data] : callbacks) {
    if (!fn) continue;
    std::string copy = message;
    fn(data, CU_LOG_LEVEL_ERROR, copy.data(), copy.size());
  }
  return r;
}

CUresult CUDAAPI cuLogsRegisterCallback(CUlogsCallback callbackFunc, void* userData,
                                        CUlogsCallbackHandle* callback_out) {
  SIM_ENTRY("cuLogsRegisterCallback", kNoInit | kNoSticky);
  if (!callbackFunc) return CUDA_ERROR_INVALID_VALUE;
  DriverLog& log = driverLog();
  std::lock_guard<std::mutex> g(log.m);
  log.callbacks.emplace_back(callbackFunc, userData);
  if (callback_out) *callback_out = reinterpret_cast<CUlogsCallbackHandle>(uintptr_t(log.callbacks.size()));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLogsUnregisterCallback(CUlogsCallbackHandle callback) {
  SIM_ENTRY("cuLogsUnregisterCallback", kNoInit | kNoSticky);
  DriverLog& log = driverLog();
  std::lock_guard<std::mutex> g(log.m);
  const uintptr_t k = reinterpret_cast<uintptr_t>(callback);
  if (k == 0 || k > log.callbacks.size() || !log.callbacks[k - 1].first) return CUDA_ERROR_INVALID_VALUE;
  log.callbacks[k - 1] = {nullptr, nullptr};  // handles stay indices
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLogsCurrent(CUlogIterator* iterator_out, unsigned int flags) {
  SIM_ENTRY("cuLogsCurrent", kNoInit | kNoSticky);
  if (!iterator_out || flags) return CUDA_ERROR_INVALID_VALUE;
  DriverLog& log = driverLog();
  std::lock_guard<std::mutex> g(log.m);
  *iterator_out = CUlogIterator(log.lines.size());
  return CUDA_SUCCESS;
}

static std::string dumpFrom(CUlogIterator* iterator) {
  DriverLog& log = driverLog();
  std::lock_guard<std::mutex> g(log.m);
  std::string text;
  for (size_t k = iterator ? *iterator : 0; k < log.lines.size(); ++k) text += log.lines[k] + "\n";
  if (iterator) *iterator = CUlogIterator(log.lines.size());
  return text;
}

CUresult CUDAAPI cuLogsDumpToMemory(CUlogIterator* iterator, char* buffer, size_t* size, unsigned int flags) {
  SIM_ENTRY("cuLogsDumpToMemory", kNoInit | kNoSticky);
  if (!buffer || !size || flags) return CUDA_ERROR_INVALID_VALUE;
  CUlogIterator probe = iterator ? *iterator : 0;
  const std::string text = dumpFrom(&probe);
  if (text.size() + 1 > *size) {
    *size = 0;
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  *size = text.size();
  if (iterator) *iterator = probe;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLogsDumpToFile(CUlogIterator* iterator, const char* pathToFile, unsigned int flags) {
  SIM_ENTRY("cuLogsDumpToFile", kNoInit | kNoSticky);
  if (!pathToFile || flags) return CUDA_ERROR_INVALID_VALUE;
  const std::string text = dumpFrom(iterator);
  FILE* f = std::fopen(pathToFile, "w");
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- kernel handles

static CUresult paramInfo(void* h, SimKernelFamily family, size_t index, size_t* offset, size_t* size) {
  KernelObj* k = lookupKernel(static_cast<CUfunction>(h));
  if (!k || k->family != family) return CUDA_ERROR_INVALID_HANDLE;
  if (index >= k->sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = k->offsets[index];
  if (size) *size = k->sizes[index];
  return CUDA_SUCCESS;
}

static CUresult kernelName(void* h, SimKernelFamily family, const char** name) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  KernelObj* k = lookupKernel(static_cast<CUfunction>(h));
  if (!k || k->family != family) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->name.c_str();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t* paramOffset, size_t* paramSize) {
  SIM_ENTRY("cuKernelGetParamInfo", kNoSticky);
  return logFailure(SIM_LOCK, "cuKernelGetParamInfo",
                    paramInfo(kernel, SIM_KERNEL_LIBRARY, paramIndex, paramOffset, paramSize));
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t* paramOffset, size_t* paramSize) {
  SIM_ENTRY("cuFuncGetParamInfo", kNoSticky);
  return logFailure(SIM_LOCK, "cuFuncGetParamInfo",
                    paramInfo(func, SIM_KERNEL_FUNCTION, paramIndex, paramOffset, paramSize));
}

CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel hfunc) {
  SIM_ENTRY("cuKernelGetName", kNoSticky);
  return logFailure(SIM_LOCK, "cuKernelGetName", kernelName(hfunc, SIM_KERNEL_LIBRARY, name));
}

CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) {
  SIM_ENTRY("cuFuncGetName", kNoSticky);
  return logFailure(SIM_LOCK, "cuFuncGetName", kernelName(hfunc, SIM_KERNEL_FUNCTION, name));
}

static int functionAttribute(CUfunction_attribute a) {
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      return 1024;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      return 32;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
      return 90;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      return 90;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      return 49152;
    default:
      return 0;
  }
}

static int kernelAttribute(const KernelObj& k, CUfunction_attribute a) {
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return int(k.maxDynamicShared);
  if (a == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH) return int(k.requiredClusterWidth);
  return functionAttribute(a);
}

CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  SIM_ENTRY("cuFuncGetAttribute", kNoSticky);
  if (!pi || attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  KernelObj* k = lookupKernel(hfunc);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *pi = kernelAttribute(*k, attrib);
  return CUDA_SUCCESS;
}

// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (launches check it) and
// CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH (launches get it) are kept; the
// other settable attributes are accepted and have no effect.
static CUresult setFunctionAttribute(KernelObj* k, CUfunction_attribute attrib, int value) {
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      if (value < 0 || unsigned(value) > kMaxSharedMem) return CUDA_ERROR_INVALID_VALUE;
      k->maxDynamicShared = unsigned(value);
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
      if (value < 0 || value > 8) return CUDA_ERROR_INVALID_VALUE;
      k->requiredClusterWidth = unsigned(value);
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  SIM_ENTRY("cuFuncSetAttribute", kNoSticky);
  KernelObj* k = lookupKernel(hfunc);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  return setFunctionAttribute(k, attrib, value);
}

// A library kernel's function in the current context: the simulator uses the
// kernel's handle for both.
CUresult CUDAAPI cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  SIM_ENTRY("cuKernelGetFunction", kNeedCtx);
  if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
  KernelObj* k = lookupKernel(reinterpret_cast<CUfunction>(kernel));
  if (!k || k->family != SIM_KERNEL_LIBRARY) return CUDA_ERROR_INVALID_HANDLE;
  *pFunc = reinterpret_cast<CUfunction>(kernel);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev) {
  SIM_ENTRY("cuKernelSetAttribute", kNoSticky);
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  KernelObj* k = lookupKernel(reinterpret_cast<CUfunction>(kernel));
  if (!k || k->family != SIM_KERNEL_LIBRARY) return CUDA_ERROR_INVALID_HANDLE;
  return setFunctionAttribute(k, attrib, val);
}

// Cache preferences (KernelObj::cachePreference).
CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  SIM_ENTRY("cuFuncSetCacheConfig", kNoSticky);
  KernelObj* k = lookupKernel(hfunc);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
  k->cachePreference = config;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev) {
  SIM_ENTRY("cuKernelSetCacheConfig", kNoSticky);
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  KernelObj* k = lookupKernel(reinterpret_cast<CUfunction>(kernel));
  if (!k || k->family != SIM_KERNEL_LIBRARY) return CUDA_ERROR_INVALID_HANDLE;
  if (config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
  k->cachePreference = config;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config) {
  SIM_ENTRY("cuCtxSetCacheConfig", kNeedCtx);
  if (config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
  currentCtx()->cachePreference = config;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache* pconfig) {
  SIM_ENTRY("cuCtxGetCacheConfig", kNeedCtx);
  if (!pconfig) return CUDA_ERROR_INVALID_VALUE;
  *pconfig = CUfunc_cache(currentCtx()->cachePreference);
  return CUDA_SUCCESS;
}

// CU_LIMIT_STACK_SIZE grows at launches (growStackFor), and a graph made
// before the program lowered it fails to launch (Exec::stackLimit); the printf
// FIFO and the device heap are kept as set. Other limits are refused.
CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) {
  SIM_ENTRY("cuCtxSetLimit", kNeedCtx);
  Context* ctx = currentCtx();
  switch (limit) {
    case CU_LIMIT_STACK_SIZE: {
      const size_t rounded = (value + 15) / 16 * 16;
      ctx->stackLimitSets += rounded != ctx->stackLimit;
      ctx->stackLimit = rounded;
      return CUDA_SUCCESS;
    }
    case CU_LIMIT_PRINTF_FIFO_SIZE: ctx->printfFifoLimit = value; return CUDA_SUCCESS;
    case CU_LIMIT_MALLOC_HEAP_SIZE: ctx->mallocHeapLimit = value; return CUDA_SUCCESS;
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED:
      if (value > 1) return CUDA_ERROR_INVALID_VALUE;
      ctx->cigSharedMemFallback = value != 0;
      return CUDA_SUCCESS;
    case CU_LIMIT_SHMEM_SIZE:
    case CU_LIMIT_CIG_ENABLED:
      return CUDA_ERROR_INVALID_VALUE;  // can only be queried
    default: return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
}

CUresult CUDAAPI cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
  SIM_ENTRY("cuCtxGetLimit", kNeedCtx);
  if (!pvalue) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = currentCtx();
  switch (limit) {
    case CU_LIMIT_STACK_SIZE: *pvalue = ctx->stackLimit; return CUDA_SUCCESS;
    case CU_LIMIT_PRINTF_FIFO_SIZE: *pvalue = ctx->printfFifoLimit; return CUDA_SUCCESS;
    case CU_LIMIT_MALLOC_HEAP_SIZE: *pvalue = ctx->mallocHeapLimit; return CUDA_SUCCESS;
    case CU_LIMIT_SHMEM_SIZE: *pvalue = kCigSharedMemBytes; return CUDA_SUCCESS;
    case CU_LIMIT_CIG_ENABLED: *pvalue = 1; return CUDA_SUCCESS;
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED: *pvalue = ctx->cigSharedMemFallback ? 1 : 0; return CUDA_SUCCESS;
    default: return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
}

CUresult CUDAAPI cuKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev) {
  SIM_ENTRY("cuKernelGetAttribute", kNoSticky);
  if (!pi || attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  KernelObj* k = lookupKernel(reinterpret_cast<CUfunction>(kernel));
  if (!k || k->family != SIM_KERNEL_LIBRARY) return CUDA_ERROR_INVALID_HANDLE;
  *pi = kernelAttribute(*k, attrib);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- launches

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void** kp,
                                void** extra) {
  return launchKernel(false, f, gx, gy, gz, bx, by, bz, shmem, h, kp, extra);
}
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                     unsigned int by, unsigned int bz, unsigned int shmem, CUstream h, void** kp,
                                     void** extra) {
  return launchKernel(true, f, gx, gy, gz, bx, by, bz, shmem, h, kp, extra);
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kp, void** extra) {
  return launchKernelEx(false, config, f, kp, extra);
}

// The deprecated launch API (KernelObj::legacy).
CUresult CUDAAPI cuFuncSetBlockShape(CUfunction f, int x, int y, int z) {
  SIM_ENTRY("cuFuncSetBlockShape", kNeedCtx);
  KernelObj* k = lookupKernel(f);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (x <= 0 || y <= 0 || z <= 0) return CUDA_ERROR_INVALID_VALUE;
  k->legacy.block[0] = unsigned(x), k->legacy.block[1] = unsigned(y), k->legacy.block[2] = unsigned(z);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetSharedSize(CUfunction f, unsigned int bytes) {
  SIM_ENTRY("cuFuncSetSharedSize", kNeedCtx);
  KernelObj* k = lookupKernel(f);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  k->legacy.sharedBytes = bytes;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuParamSetSize(CUfunction f, unsigned int numbytes) {
  SIM_ENTRY("cuParamSetSize", kNeedCtx);
  KernelObj* k = lookupKernel(f);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  k->legacy.params.assign(numbytes, 0);
  k->legacy.paramSizeSet = true;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuParamSetv(CUfunction f, int offset, void* ptr, unsigned int numbytes) {
  SIM_ENTRY("cuParamSetv", kNeedCtx);
  KernelObj* k = lookupKernel(f);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (!ptr || offset < 0 || size_t(offset) + numbytes > k->legacy.params.size()) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(k->legacy.params.data() + offset, ptr, numbytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuParamSeti(CUfunction f, int offset, unsigned int value) {
  return cuParamSetv(f, offset, &value, sizeof value);
}
CUresult CUDAAPI cuLaunchGridAsync(CUfunction f, int gw, int gh, CUstream h) {
  if (gw <= 0 || gh <= 0) {
    SIM_ENTRY("cuLaunchGridAsync", kNeedCtx);
    return CUDA_ERROR_INVALID_VALUE;
  }
  return launchLegacy("cuLaunchGridAsync", f, unsigned(gw), unsigned(gh), h);
}
CUresult CUDAAPI cuLaunchGrid(CUfunction f, int gw, int gh) {
  if (gw <= 0 || gh <= 0) {
    SIM_ENTRY("cuLaunchGrid", kNeedCtx);
    return CUDA_ERROR_INVALID_VALUE;
  }
  return launchLegacy("cuLaunchGrid", f, unsigned(gw), unsigned(gh), nullptr);
}
CUresult CUDAAPI cuLaunch(CUfunction f) { return launchLegacy("cuLaunch", f, 1, 1, nullptr); }
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kp, void** extra) {
  return launchKernelEx(true, config, f, kp, extra);
}
CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                           unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                                           CUstream h, void** kp) {
  return launchCooperative(false, f, gx, gy, gz, bx, by, bz, shmem, h, kp);
}
CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                                unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                                                CUstream h, void** kp) {
  return launchCooperative(true, f, gx, gy, gz, bx, by, bz, shmem, h, kp);
}
CUresult CUDAAPI cuLaunchHostFunc(CUstream h, CUhostFn fn, void* userData) {
  return hostFuncImpl(false, h, fn, userData);
}
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void* userData) {
  return hostFuncImpl(true, h, fn, userData);
}

// ---------------------------------------------------------------- copies

#define SIM_COPY_PAIR(NAME, PT_NAME, API, SYNC, DN, SN, PARAMS, DST, SRC, N, STREAM)                         \
  CUresult CUDAAPI NAME PARAMS { return copy1D(API, false, SYNC, DST, SRC, N, STREAM, Need::DN, Need::SN); } \
  CUresult CUDAAPI PT_NAME PARAMS { return copy1D(API, true, SYNC, DST, SRC, N, STREAM, Need::DN, Need::SN); }

SIM_COPY_PAIR(cuMemcpyAsync, cuMemcpyAsync_ptsz, "cuMemcpyAsync", false, Any, Any,
              (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), dst, src, n, s)
SIM_COPY_PAIR(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, "cuMemcpyHtoDAsync_v2", false, Device, Host,
              (CUdeviceptr dst, const void* src, size_t n, CUstream s), dst, reinterpret_cast<uint64_t>(src), n, s)
SIM_COPY_PAIR(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync_v2", false, Host, Device,
              (void* dst, CUdeviceptr src, size_t n, CUstream s), reinterpret_cast<uint64_t>(dst), src, n, s)
SIM_COPY_PAIR(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, "cuMemcpyDtoDAsync_v2", false, Device, Device,
              (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), dst, src, n, s)
SIM_COPY_PAIR(cuMemcpy, cuMemcpy_ptds, "cuMemcpy", true, Any, Any, (CUdeviceptr dst, CUdeviceptr src, size_t n), dst,
              src, n, nullptr)
SIM_COPY_PAIR(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, "cuMemcpyHtoD_v2", true, Device, Host,
              (CUdeviceptr dst, const void* src, size_t n), dst, reinterpret_cast<uint64_t>(src), n, nullptr)
SIM_COPY_PAIR(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, "cuMemcpyDtoH_v2", true, Host, Device,
              (void* dst, CUdeviceptr src, size_t n), reinterpret_cast<uint64_t>(dst), src, n, nullptr)
SIM_COPY_PAIR(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, "cuMemcpyDtoD_v2", true, Device, Device,
              (CUdeviceptr dst, CUdeviceptr src, size_t n), dst, src, n, nullptr)
#undef SIM_COPY_PAIR

CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* p, CUstream s) {
  return copy2D("cuMemcpy2DAsync_v2", false, false, p, s);
}
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* p, CUstream s) {
  return copy2D("cuMemcpy2DAsync_v2", true, false, p, s);
}
CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D* p) { return copy2D("cuMemcpy2D_v2", false, true, p, nullptr); }
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* p) { return copy2D("cuMemcpy2D_v2", true, true, p, nullptr); }

// ---------------------------------------------------------------- memsets

#define SIM_MEMSET_ASYNC(NAME, PT_NAME, API, T, ELEM)                  \
  CUresult CUDAAPI NAME(CUdeviceptr d, T v, size_t n, CUstream s) {    \
    return memsetImpl(API, false, false, d, 0, v, ELEM, n, 1, s);      \
  }                                                                    \
  CUresult CUDAAPI PT_NAME(CUdeviceptr d, T v, size_t n, CUstream s) { \
    return memsetImpl(API, true, false, d, 0, v, ELEM, n, 1, s);       \
  }
#define SIM_MEMSET_SYNC(NAME, PT_NAME, API, T, ELEM)                   \
  CUresult CUDAAPI NAME(CUdeviceptr d, T v, size_t n) {                \
    return memsetImpl(API, false, true, d, 0, v, ELEM, n, 1, nullptr); \
  }                                                                    \
  CUresult CUDAAPI PT_NAME(CUdeviceptr d, T v, size_t n) {             \
    return memsetImpl(API, true, true, d, 0, v, ELEM, n, 1, nullptr);  \
  }
#define SIM_MEMSET_2D_ASYNC(NAME, PT_NAME, API, T, ELEM)                                       \
  CUresult CUDAAPI NAME(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s) {    \
    return memsetImpl(API, false, false, d, pitch, v, ELEM, w, h, s);                          \
  }                                                                                            \
  CUresult CUDAAPI PT_NAME(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s) { \
    return memsetImpl(API, true, false, d, pitch, v, ELEM, w, h, s);                           \
  }
#define SIM_MEMSET_2D_SYNC(NAME, PT_NAME, API, T, ELEM)                            \
  CUresult CUDAAPI NAME(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h) {    \
    return memsetImpl(API, false, true, d, pitch, v, ELEM, w, h, nullptr);         \
  }                                                                                \
  CUresult CUDAAPI PT_NAME(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h) { \
    return memsetImpl(API, true, true, d, pitch, v, ELEM, w, h, nullptr);          \
  }

SIM_MEMSET_ASYNC(cuMemsetD8Async, cuMemsetD8Async_ptsz, "cuMemsetD8Async", unsigned char, 1)
SIM_MEMSET_ASYNC(cuMemsetD16Async, cuMemsetD16Async_ptsz, "cuMemsetD16Async", unsigned short, 2)
SIM_MEMSET_ASYNC(cuMemsetD32Async, cuMemsetD32Async_ptsz, "cuMemsetD32Async", unsigned int, 4)
SIM_MEMSET_SYNC(cuMemsetD8_v2, cuMemsetD8_v2_ptds, "cuMemsetD8_v2", unsigned char, 1)
SIM_MEMSET_SYNC(cuMemsetD16_v2, cuMemsetD16_v2_ptds, "cuMemsetD16_v2", unsigned short, 2)
SIM_MEMSET_SYNC(cuMemsetD32_v2, cuMemsetD32_v2_ptds, "cuMemsetD32_v2", unsigned int, 4)
SIM_MEMSET_2D_ASYNC(cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz, "cuMemsetD2D8Async", unsigned char, 1)
SIM_MEMSET_2D_ASYNC(cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz, "cuMemsetD2D16Async", unsigned short, 2)
SIM_MEMSET_2D_ASYNC(cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz, "cuMemsetD2D32Async", unsigned int, 4)
SIM_MEMSET_2D_SYNC(cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds, "cuMemsetD2D8_v2", unsigned char, 1)
SIM_MEMSET_2D_SYNC(cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds, "cuMemsetD2D16_v2", unsigned short, 2)
SIM_MEMSET_2D_SYNC(cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds, "cuMemsetD2D32_v2", unsigned int, 4)
#undef SIM_MEMSET_ASYNC
#undef SIM_MEMSET_SYNC
#undef SIM_MEMSET_2D_ASYNC
#undef SIM_MEMSET_2D_SYNC

// ---------------------------------------------------------------- stream-ordered allocation

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  return memAllocAsyncImpl("cuMemAllocAsync", false, dptr, bytes, s);
}
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  return memAllocAsyncImpl("cuMemAllocAsync", true, dptr, bytes, s);
}
CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  SIM_ENTRY("cuDeviceGetDefaultMemPool", 0);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = defaultPoolHandle(dev);
  return CUDA_SUCCESS;
}
// A device pool's statistics and settings (SimState::PoolStats). Resetting a
// high watermark takes 0 and sets it to the current value, as in CUDA.
CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  SIM_ENTRY("cuMemPoolGetAttribute", 0);
  const int dev = poolDevice(pool);
  if (dev < 0 || !value) return CUDA_ERROR_INVALID_VALUE;
  const SimState::PoolStats& ps = state().pools[size_t(dev)];
  auto u64 = [&](uint64_t v) {
    *static_cast<cuuint64_t*>(value) = v;
    return CUDA_SUCCESS;
  };
  auto flag = [&](int v) {
    *static_cast<int*>(value) = v;
    return CUDA_SUCCESS;
  };
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: return flag(ps.reuseFollowEvents);
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: return flag(ps.reuseOpportunistic);
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: return flag(ps.reuseInternalDeps);
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: return u64(ps.releaseThreshold);
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: return u64(ps.reserved);
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: return u64(ps.reservedHigh);
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: return u64(ps.used);
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: return u64(ps.usedHigh);
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  SIM_ENTRY("cuMemPoolSetAttribute", 0);
  const int dev = poolDevice(pool);
  if (dev < 0 || !value) return CUDA_ERROR_INVALID_VALUE;
  SimState::PoolStats& ps = state().pools[size_t(dev)];
  const int flag = *static_cast<const int*>(value);
  const cuuint64_t u64 = *static_cast<const cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: ps.reuseFollowEvents = flag; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: ps.reuseOpportunistic = flag; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: ps.reuseInternalDeps = flag; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: ps.releaseThreshold = u64; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      if (u64 != 0) return CUDA_ERROR_INVALID_VALUE;
      ps.reservedHigh = ps.reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (u64 != 0) return CUDA_ERROR_INVALID_VALUE;
      ps.usedHigh = ps.used;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}
// Memory the pool keeps beyond its allocations goes back down to
// `minBytesToKeep` (never below what is in use).
CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  SIM_ENTRY("cuMemPoolTrimTo", 0);
  const int dev = poolDevice(pool);
  if (dev < 0) return CUDA_ERROR_INVALID_VALUE;
  SimState::PoolStats& ps = state().pools[size_t(dev)];
  ps.reserved = std::max<uint64_t>(ps.used, std::min<uint64_t>(ps.reserved, minBytesToKeep));
  return CUDA_SUCCESS;
}
static CUresult allocFromPool(bool pt, CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream s) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return memAllocAsyncImpl("cuMemAllocFromPoolAsync", pt, dptr, bytes, s, pool);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream s) {
  return allocFromPool(false, dptr, bytes, pool, s);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream s) {
  return allocFromPool(true, dptr, bytes, pool, s);
}
CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream s) { return memFreeAsyncImpl(false, dptr, s); }
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) { return memFreeAsyncImpl(true, dptr, s); }

// ---------------------------------------------------------------- streams

CUresult CUDAAPI cuStreamCreate(CUstream* ph, unsigned int flags) {
  SIM_ENTRY("cuStreamCreate", kNeedCtx);
  return createStream(ph, flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* ph, unsigned int flags, int priority) {
  SIM_ENTRY("cuStreamCreateWithPriority", kNeedCtx);
  return createStream(ph, flags, priority);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream h) {
  SIM_ENTRY("cuStreamDestroy_v2", kNeedCtx | kNoSticky);
  SimState& st = state();
  auto it = st.streamByHandle.find(h);
  if (it == st.streamByHandle.end()) return CUDA_ERROR_INVALID_HANDLE;
  // cuda.h: once its green context is destroyed, cuStreamDestroy too fails.
  if (it->second->ctx->green && it->second->ctx->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  destroyStream(it->second);
  return CUDA_SUCCESS;
}

}  // extern "C"

namespace sim {

// A created stream's end (cuStreamDestroy, or its context's end): its handle
// goes back to be given out again; pending work still runs.
void destroyStream(std::shared_ptr<Stream> s) {
  SimState& st = state();
  st.streamByHandle.erase(s->handle);
  st.freedStreamHandles.push_back(s->handle);
  if (s->capture) {
    invalidate(s->capture.get());
    auto& v = s->capture->streams;
    v.erase(std::remove(v.begin(), v.end(), s.get()), v.end());
    if (s->capture->origin == s.get()) s->capture->origin = nullptr;
    s->capture.reset();
  }
  s->destroyed = true;
  if (streamIdle(s.get())) {
    auto& v = st.streams;
    v.erase(std::remove(v.begin(), v.end(), s), v.end());
  }
}

void endPrimaryContext(Lock& lk, Context* c) {
  SimState& st = state();
  drainUntil(
      lk,
      [c] {
        for (auto& s : state().streams) {
          if (s->ctx == c && !streamIdle(s.get())) return false;
        }
        return true;
      },
      "cuDevicePrimaryCtxRelease");
  c->destroyed = true;
  // Created streams and events, newest first into the lists of handles to
  // give out again (so the program's first new ones get its first old ones).
  std::vector<std::shared_ptr<Stream>> created;
  for (auto& [h, s] : st.streamByHandle)
    if (s->ctx == c) created.push_back(s);
  std::sort(created.begin(), created.end(), [](const auto& a, const auto& b) { return a->id > b->id; });
  for (auto& s : created) destroyStream(s);
  // Its legacy, per-thread and record streams leave the scheduler too.
  auto& all = st.streams;
  all.erase(std::remove_if(all.begin(), all.end(), [c](const auto& s) { return s->ctx == c; }), all.end());
  std::vector<std::pair<uint64_t, CUevent>> events;
  for (auto& [h, ev] : st.events)
    if (ev->ctx == c) events.push_back({ev->serial, h});
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [serial, h] : events) {
    st.events[h]->destroyed = true;
    st.events.erase(h);
    st.freedEventHandles.push_back(h);
  }
  endExecsOf(c);
  unloadModulesOf(c);
}

}  // namespace sim

extern "C" {

#define SIM_STREAM_GETTER(NAME, PT_NAME, API, T, EXPR)                            \
  static CUresult NAME##Impl(bool pt, CUstream h, T* out) {                       \
    SIM_ENTRY(API, kNeedCtx | kNoSticky);                                         \
    Stream* s;                                                                    \
    if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;             \
    if (!out) return CUDA_ERROR_INVALID_VALUE;                                    \
    *out = EXPR;                                                                  \
    return CUDA_SUCCESS;                                                          \
  }                                                                               \
  CUresult CUDAAPI NAME(CUstream h, T* out) { return NAME##Impl(false, h, out); } \
  CUresult CUDAAPI PT_NAME(CUstream h, T* out) { return NAME##Impl(true, h, out); }

SIM_STREAM_GETTER(cuStreamGetFlags, cuStreamGetFlags_ptsz, "cuStreamGetFlags", unsigned int, s->flags)
SIM_STREAM_GETTER(cuStreamGetPriority, cuStreamGetPriority_ptsz, "cuStreamGetPriority", int, s->priority)
SIM_STREAM_GETTER(cuStreamGetId, cuStreamGetId_ptsz, "cuStreamGetId", unsigned long long, s->id)
SIM_STREAM_GETTER(cuStreamGetCtx, cuStreamGetCtx_ptsz, "cuStreamGetCtx", CUcontext, s->ctx->handle())
SIM_STREAM_GETTER(cuStreamGetDevice, cuStreamGetDevice_ptsz, "cuStreamGetDevice", CUdevice, s->ctx->device)
#undef SIM_STREAM_GETTER

static CUresult streamGetCtx2(bool pt, CUstream h, CUcontext* pctx, CUgreenCtx* green) {
  SIM_ENTRY("cuStreamGetCtx_v2", kNeedCtx | kNoSticky);
  Stream* s;
  if (CUresult r = resolve(h, pt, &s); r != CUDA_SUCCESS) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  // A green context's stream: its primary context, and the green context.
  *pctx = familyOf(s->ctx)->handle();
  if (green) *green = s->ctx->green ? s->ctx->green->handle() : nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetCtx_v2(CUstream h, CUcontext* pctx, CUgreenCtx* green) {
  return streamGetCtx2(false, h, pctx, green);
}
CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext* pctx, CUgreenCtx* green) {
  return streamGetCtx2(true, h, pctx, green);
}

CUresult CUDAAPI cuStreamSynchronize(CUstream h) { return streamSyncImpl(false, h); }
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream h) { return streamSyncImpl(true, h); }
CUresult CUDAAPI cuStreamQuery(CUstream h) { return streamQueryImpl(false, h); }
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream h) { return streamQueryImpl(true, h); }
CUresult CUDAAPI cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) {
  return streamWaitEventImpl(false, h, e, flags);
}
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int flags) {
  return streamWaitEventImpl(true, h, e, flags);
}

// ---------------------------------------------------------------- events

CUresult CUDAAPI cuEventCreate(CUevent* ph, unsigned int flags) {
  SIM_ENTRY("cuEventCreate", kNeedCtx);
  const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!ph || (flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
  auto ev = std::make_shared<Event>();
  ev->serial = ++state().nextEventSerial;
  ev->flags = flags;
  ev->ctx = currentCtx();
  auto h = reinterpret_cast<CUevent>(ev.get());
  if (!state().freedEventHandles.empty()) {
    h = state().freedEventHandles.back();
    state().freedEventHandles.pop_back();
  } else if (state().events.count(h)) {
    // The object landed where a recycled handle still names a live event.
    h = reinterpret_cast<CUevent>(freshHandle());
  }
  state().events[h] = ev;
  *ph = h;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent e) {
  SIM_ENTRY("cuEventDestroy_v2", kNeedCtx | kNoSticky);
  auto& ev = state().events;
  auto it = ev.find(e);
  if (it == ev.end()) return CUDA_ERROR_INVALID_HANDLE;
  it->second->destroyed = true;
  ev.erase(it);
  state().freedEventHandles.push_back(e);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream h) { return eventRecordImpl("cuEventRecord", false, e, h, 0); }
CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream h) { return eventRecordImpl("cuEventRecord", true, e, h, 0); }
CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int flags) {
  return eventRecordImpl("cuEventRecordWithFlags", false, e, h, flags);
}
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent e, CUstream h, unsigned int flags) {
  return eventRecordImpl("cuEventRecordWithFlags", true, e, h, flags);
}

CUresult CUDAAPI cuEventQuery(CUevent e) {
  SIM_ENTRY("cuEventQuery", kNeedCtx);
  std::shared_ptr<Event> ev = lookupEvent(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->capSession) {
    if (ev->capSession->active) invalidate(ev->capSession.get());
    return CUDA_ERROR_CAPTURED_EVENT;
  }
  randomSteps(SIM_LOCK, 1);  // time passes: a polling caller always makes progress
  if (state().sticky != CUDA_SUCCESS) return state().sticky;
  return !ev->lastRecord || ev->lastRecord->done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

}  // extern "C"

// A record after all work enqueued so far on every stream of the context: an
// item on a stream of the context's own (named by no handle) that depends on
// each stream's last item. Not modelled: a context with a stream capturing.
// A primary context's record also covers the work of its green contexts, a
// green context's (its converted context's, or cuGreenCtxRecordEvent) only its
// own (cuda.h); the event may be of any context of the family.
CUresult sim::ctxRecordEventImpl(Context* ctx, CUevent e) {
  SimState& st = state();
  std::shared_ptr<Event> ev = lookupEvent(e);
  if (!ev || !sameFamily(ev->ctx, ctx)) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<Stream>& own = ctx->recordStream;
  if (!own) {
    own = std::make_shared<Stream>();
    own->id = st.nextStreamId++;
    own->ctx = ctx;
    own->flags = CU_STREAM_NON_BLOCKING;
    st.streams.push_back(own);
  }
  auto item = std::make_unique<Item>();
  item->kind = ItemKind::EventRecord;
  for (const auto& b : st.streams)
    if ((b->ctx == ctx || (ctx->primary && b->ctx->greenOf == ctx)) && b != own && b->lastDone &&
        !b->lastDone->done)
      item->deps.push_back(b->lastDone);
  enqueue(own.get(), std::move(item));
  ev->lastRecord = own->lastDone;
  ev->capSession.reset();
  ev->capNodes.clear();
  return CUDA_SUCCESS;
}

extern "C" {

CUresult CUDAAPI cuCtxRecordEvent(CUcontext hCtx, CUevent e) {
  SIM_ENTRY("cuCtxRecordEvent", kNeedCtx | kSteps);
  Context* ctx = hCtx ? lookupContext(hCtx) : currentCtx();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  return ctxRecordEventImpl(ctx, e);
}

CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  SIM_ENTRY("cuEventSynchronize", kNeedCtx | kSteps);
  std::shared_ptr<Event> ev = lookupEvent(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->capSession) {
    if (ev->capSession->active) invalidate(ev->capSession.get());
    return CUDA_ERROR_CAPTURED_EVENT;
  }
  drainUntilRecorded(SIM_LOCK, *ev, "cuEventSynchronize");
  return state().sticky;
}

static CUresult elapsed(float* ms, CUevent a, CUevent b) {
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Event> ea = lookupEvent(a), eb = lookupEvent(b);
  if (!ea || !eb) return CUDA_ERROR_INVALID_HANDLE;
  if (ea->capSession || eb->capSession) return CUDA_ERROR_CAPTURED_EVENT;
  if ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!sameFamily(ea->ctx, eb->ctx)) return CUDA_ERROR_INVALID_HANDLE;
  if (!ea->lastRecord || !eb->lastRecord) return CUDA_ERROR_INVALID_HANDLE;
  if (!ea->lastRecord->done || !eb->lastRecord->done) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>((eb->lastRecord->timeUs - ea->lastRecord->timeUs) / 1000.0);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  SIM_ENTRY("cuEventElapsedTime", kNeedCtx);
  return elapsed(ms, a, b);
}

CUresult CUDAAPI cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  SIM_ENTRY("cuEventElapsedTime_v2", kNeedCtx);
  return elapsed(ms, a, b);
}

}  // extern "C"
