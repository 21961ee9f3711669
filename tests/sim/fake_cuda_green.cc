// fake_cuda_green.cc - simulated green contexts (cuda.h, "GREEN CONTEXTS"):
// SM resources, descriptors, green contexts, their converted contexts and
// streams, and the context-wide event record / wait calls.
//
// Model (README "Green contexts"):
//  - A device has 132 SMs (cuDeviceGetDevResource). cuDevSmResourceSplitByCount
//    makes groups of minCount SMs rounded up to a multiple of 8 (of 2 with
//    CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING), as many as fit or as asked
//    for; the rest goes to `remaining`. A group cannot be split again.
//    cuDevResourceGenerateDesc adds up the SMs of resources of one device (and,
//    when several, of one split). The SM counts are bookkeeping only: every
//    context runs every kernel.
//  - cuGreenCtxCreate (CU_GREEN_CTX_DEFAULT_STREAM required) retains the device's
//    primary context and makes the green context's converted context at once
//    (Context::greenOf, Context::green): cuCtxFromGreenCtx returns its handle,
//    the same every time. A primary context and its green contexts are one
//    family (familyOf): memory and code are shared, a kernel launched on a stream
//    of any of them runs in that stream's context whichever of them is current,
//    events and captures may cross between them, and a graph's nodes run in the
//    contexts they were captured in, wherever it is launched in the family.
//  - cuGreenCtxStreamCreate (CU_STREAM_NON_BLOCKING required) makes a stream of
//    the green context whatever is current; so does cuStreamCreate while its
//    converted context is current. The converted context has its own legacy
//    stream (NULL names it while it is current) but no usable per-thread
//    stream: while it is current, every call naming CU_STREAM_PER_THREAD (or
//    NULL through a _ptsz/_ptds entry point) fails with
//    CUDA_ERROR_INVALID_HANDLE (resolveStream), as measured on an H100
//    (driver 580) and as cuda.h documents for cuStreamGetCtx_v2.
//  - cuGreenCtxDestroy waits for the work already submitted to the green
//    context's streams (its legacy stream too), then ends it:
//    its streams keep their handles (not given out again: cuda.h says the call
//    does not destroy them) and every later call naming one fails with
//    CUDA_ERROR_CONTEXT_IS_DESTROYED, cuStreamDestroy too; a capture a stream
//    of it is in is invalidated; a graph launch of an exec with a node of it
//    fails with CUDA_ERROR_CONTEXT_IS_DESTROYED; the primary context is released.
//    Not modelled: destroying a green context whose converted context is
//    current somewhere (calls there then fail with CUDA_ERROR_INVALID_CONTEXT).
#include <algorithm>
#include <cstring>

#include "fake_cuda_internal.h"

namespace sim {

namespace {

constexpr unsigned kDeviceSms = 132;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr uint32_t kResourceMagic = 0x47534d31;  // "GSM1"

// What the simulator keeps in a CUdevResource's internal padding.
struct ResourceInfo {
  uint32_t magic;
  int32_t device;
  uint64_t splitId;  // 0: not the output of a split
};
static_assert(sizeof(ResourceInfo) <= sizeof(CUdevResource::_internal_padding));

struct ResourceDesc {
  int device;
  unsigned smCount;
};

std::vector<std::unique_ptr<ResourceDesc>>& descs() {
  static auto* v = new std::vector<std::unique_ptr<ResourceDesc>>();
  return *v;
}
uint64_t g_nextSplitId = 0;
unsigned long long g_nextGreenId = 0;

void fillSm(CUdevResource* r, int device, unsigned sms, unsigned minPartition, unsigned alignment,
            uint64_t splitId) {
  std::memset(r, 0, sizeof *r);
  r->type = CU_DEV_RESOURCE_TYPE_SM;
  r->sm.smCount = sms;
  r->sm.minSmPartitionSize = minPartition;
  r->sm.smCoscheduledAlignment = alignment;
  const ResourceInfo info{kResourceMagic, device, splitId};
  std::memcpy(r->_internal_padding, &info, sizeof info);
}

bool infoOf(const CUdevResource* r, ResourceInfo* out) {
  std::memcpy(out, r->_internal_padding, sizeof *out);
  return out->magic == kResourceMagic;
}

GreenCtx* lookupGreen(CUgreenCtx h) {
  for (auto& g : state().greenCtxs)
    if (g->handle() == h) return g.get();
  return nullptr;
}

// The green context `h`, or the error for a null, unknown or destroyed one.
CUresult liveGreen(CUgreenCtx h, GreenCtx** out) {
  GreenCtx* g = h ? lookupGreen(h) : nullptr;
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  if (g->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = g;
  return CUDA_SUCCESS;
}

// cuda.h: the context-wide record and wait fail while a stream of the green
// context captures, and invalidate those captures.
bool capturingIn(Context* ctx) {
  bool any = false;
  for (auto& cs : state().sessions) {
    if (!cs->active) continue;
    for (Stream* t : cs->streams) {
      if (t->ctx == ctx) {
        invalidate(cs.get());
        any = true;
        break;
      }
    }
  }
  return any;
}

CUresult smResource(unsigned sms, int device, CUdevResource* resource, CUdevResourceType type) {
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  fillSm(resource, device, sms, 8, sms == kDeviceSms ? 2 : 8, 0);
  return CUDA_SUCCESS;
}

}  // namespace

CUresult ctxWaitEventImpl(Context* ctx, CUevent e) {
  std::shared_ptr<Event> ev = lookupEvent(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->capSession) {
    if (ev->capSession->active) invalidate(ev->capSession.get());
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (!ev->lastRecord || ev->lastRecord->done) return CUDA_SUCCESS;
  ctx->waits.push_back(ev->lastRecord);
  // A primary context's wait also holds its green contexts (cuda.h).
  if (ctx->primary)
    for (auto& c : state().contexts)
      if (c->greenOf == ctx && !c->destroyed) c->waits.push_back(ev->lastRecord);
  return CUDA_SUCCESS;
}

}  // namespace sim

using namespace sim;

extern "C" {

CUresult CUDAAPI cuDeviceGetDevResource(CUdevice dev, CUdevResource* resource, CUdevResourceType type) {
  SIM_ENTRY("cuDeviceGetDevResource", 0);
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return smResource(kDeviceSms, dev, resource, type);
}

CUresult CUDAAPI cuCtxGetDevResource(CUcontext hCtx, CUdevResource* resource, CUdevResourceType type) {
  SIM_ENTRY("cuCtxGetDevResource", 0);
  Context* c = lookupContext(hCtx);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  return smResource(c->green ? c->green->smCount : kDeviceSms, c->device, resource, type);
}

CUresult CUDAAPI cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource* resource, CUdevResourceType type) {
  SIM_ENTRY("cuGreenCtxGetDevResource", 0);
  GreenCtx* g;
  if (CUresult r = liveGreen(hCtx, &g); r != CUDA_SUCCESS) return r;
  return smResource(g->smCount, g->device, resource, type);
}

CUresult CUDAAPI cuDevSmResourceSplitByCount(CUdevResource* result, unsigned int* nbGroups, const CUdevResource* input,
                                             CUdevResource* remaining, unsigned int useFlags, unsigned int minCount) {
  SIM_ENTRY("cuDevSmResourceSplitByCount", 0);
  if (!nbGroups || !input) return CUDA_ERROR_INVALID_VALUE;
  if (input->type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  ResourceInfo in;
  if (!infoOf(input, &in)) return CUDA_ERROR_INVALID_VALUE;
  if (in.splitId != 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;  // a group is not split again
  const unsigned known = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING | CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
  if (useFlags & ~known) return CUDA_ERROR_INVALID_VALUE;
  const unsigned total = input->sm.smCount;
  if (minCount > total) return CUDA_ERROR_INVALID_VALUE;
  const unsigned align = (useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) ? 2 : 8;
  const unsigned count = std::max(align, (minCount + align - 1) / align * align);
  const unsigned possible = total / count;
  if (!result) {
    *nbGroups = possible;
    return CUDA_SUCCESS;
  }
  const unsigned n = std::min(*nbGroups, possible);
  const uint64_t split = ++g_nextSplitId;
  for (unsigned i = 0; i < n; ++i) fillSm(&result[i], in.device, count, align, align, split);
  *nbGroups = n;
  if (remaining) fillSm(remaining, in.device, total - n * count, align, 2, split);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevResourceGenerateDesc(CUdevResourceDesc* phDesc, CUdevResource* resources, unsigned int nb) {
  SIM_ENTRY("cuDevResourceGenerateDesc", 0);
  if (!phDesc || !resources || nb == 0) return CUDA_ERROR_INVALID_VALUE;
  ResourceInfo first;
  unsigned sms = 0;
  for (unsigned i = 0; i < nb; ++i) {
    if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    ResourceInfo info;
    if (!infoOf(&resources[i], &info)) return CUDA_ERROR_INVALID_VALUE;
    if (i == 0) first = info;
    if (info.device != first.device) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    if (nb > 1 && (info.splitId == 0 || info.splitId != first.splitId))
      return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    sms += resources[i].sm.smCount;
  }
  if (sms == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  descs().push_back(std::make_unique<ResourceDesc>(ResourceDesc{first.device, sms}));
  *phDesc = reinterpret_cast<CUdevResourceDesc>(descs().back().get());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  SIM_ENTRY("cuGreenCtxCreate", 0);
  if (!phCtx || !desc) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (flags != CU_GREEN_CTX_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;  // required
  const auto& d = descs();
  auto it = std::find_if(d.begin(), d.end(),
                         [desc](const auto& p) { return reinterpret_cast<CUdevResourceDesc>(p.get()) == desc; });
  if (it == d.end() || (*it)->device != dev) return CUDA_ERROR_INVALID_VALUE;
  SimState& st = state();
  auto g = std::make_unique<GreenCtx>();
  g->id = ++g_nextGreenId;
  g->device = dev;
  g->smCount = (*it)->smCount;
  Context* primary = retainPrimary(dev);
  g->ctx = newContext(dev, false);
  g->ctx->greenOf = primary;
  g->ctx->green = g.get();
  *phCtx = g->handle();
  st.greenCtxs.push_back(std::move(g));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxDestroy(CUgreenCtx hCtx) {
  SIM_ENTRY("cuGreenCtxDestroy", kNoSticky);
  GreenCtx* g;
  if (CUresult r = liveGreen(hCtx, &g); r != CUDA_SUCCESS) return r;
  SimState& st = state();
  Context* c = g->ctx;
  for (auto& cs : st.sessions) {
    if (!cs->active) continue;
    for (Stream* t : cs->streams)
      if (t->ctx == c) invalidate(cs.get());
  }
  // Work already submitted completes first.
  drainUntil(
      SIM_LOCK,
      [c] {
        for (auto& s : state().streams)
          if (s->ctx == c && !streamIdle(s.get())) return false;
        return true;
      },
      "cuGreenCtxDestroy");
  c->destroyed = true;
  g->destroyed = true;
  for (auto& s : st.streams) {
    if (s->ctx != c || !s->capture) continue;
    auto& v = s->capture->streams;
    v.erase(std::remove(v.begin(), v.end(), s.get()), v.end());
    if (s->capture->origin == s.get()) s->capture->origin = nullptr;
    s->capture.reset();
  }
  // Its streams leave the scheduler (idle now); created ones keep their handles.
  auto& all = st.streams;
  all.erase(std::remove_if(all.begin(), all.end(), [c](const auto& s) { return s->ctx == c; }), all.end());
  return primaryRelease(SIM_LOCK, g->device);
}

CUresult CUDAAPI cuCtxFromGreenCtx(CUcontext* pContext, CUgreenCtx hCtx) {
  SIM_ENTRY("cuCtxFromGreenCtx", 0);
  if (!pContext) return CUDA_ERROR_INVALID_VALUE;
  GreenCtx* g = hCtx ? lookupGreen(hCtx) : nullptr;
  if (!g || g->destroyed) return CUDA_ERROR_INVALID_CONTEXT;
  *pContext = g->ctx->handle();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxStreamCreate(CUstream* phStream, CUgreenCtx greenCtx, unsigned int flags, int priority) {
  SIM_ENTRY("cuGreenCtxStreamCreate", 0);
  GreenCtx* g;
  if (CUresult r = liveGreen(greenCtx, &g); r != CUDA_SUCCESS) return r;
  if (flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;  // required
  return createStream(phStream, flags, priority, g->ctx);
}

static CUresult streamGetGreen(bool pt, CUstream h, CUgreenCtx* out) {
  SIM_ENTRY("cuStreamGetGreenCtx", kNoSticky);
  CUresult err;
  Stream* s = resolveStream(h, pt, &err);
  if (!s) return err;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  *out = s->ctx->green ? s->ctx->green->handle() : nullptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetGreenCtx(CUstream h, CUgreenCtx* out) { return streamGetGreen(false, h, out); }

CUresult CUDAAPI cuGreenCtxGetId(CUgreenCtx greenCtx, unsigned long long* id) {
  SIM_ENTRY("cuGreenCtxGetId", kNoSticky);
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  if (!greenCtx) {
    Context* c = currentCtx();
    if (!c || !c->green) return CUDA_ERROR_INVALID_CONTEXT;
    *id = c->green->id;
    return CUDA_SUCCESS;
  }
  GreenCtx* g;
  if (CUresult r = liveGreen(greenCtx, &g); r != CUDA_SUCCESS) return r;
  *id = g->id;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGreenCtxRecordEvent(CUgreenCtx hCtx, CUevent e) {
  SIM_ENTRY("cuGreenCtxRecordEvent", kSteps);
  GreenCtx* g;
  if (CUresult r = liveGreen(hCtx, &g); r != CUDA_SUCCESS) return r;
  if (capturingIn(g->ctx)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return ctxRecordEventImpl(g->ctx, e);
}

CUresult CUDAAPI cuGreenCtxWaitEvent(CUgreenCtx hCtx, CUevent e) {
  SIM_ENTRY("cuGreenCtxWaitEvent", kSteps);
  GreenCtx* g;
  if (CUresult r = liveGreen(hCtx, &g); r != CUDA_SUCCESS) return r;
  if (capturingIn(g->ctx)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return ctxWaitEventImpl(g->ctx, e);
}

// Work submitted later to the context (a primary context: and to its green
// contexts) waits for the event's most recent record (cuda.h).
CUresult CUDAAPI cuCtxWaitEvent(CUcontext hCtx, CUevent e) {
  SIM_ENTRY("cuCtxWaitEvent", kNeedCtx | kSteps);
  Context* ctx = hCtx ? lookupContext(hCtx) : currentCtx();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  return ctxWaitEventImpl(ctx, e);
}

}  // extern "C"
