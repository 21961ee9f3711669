#include "graph/op_codec.h"

#include <fmt/format.h>

#include <cstring>

#include "core/hot_path.h"
#include "core/hash.h"
#include "core/stage_clock.h"

namespace graft::graph {

using core::OpDesc;
using core::OpKind;
using hook::ApiId;
using hook::real;

namespace {

constexpr size_t kMaxParamBytes = 64 * 1024;

// Copies the fields that matter for `in.id` into a zeroed attribute, so equal
// attributes compare equal byte for byte. False for attributes graft cannot
// re-issue faithfully (they carry events or device-side node handles).
bool normalizeAttr(const CUlaunchAttribute& in, CUlaunchAttribute* out) {
  std::memset(out, 0, sizeof(*out));
  out->id = in.id;
  const CUlaunchAttributeValue& v = in.value;
  CUlaunchAttributeValue& o = out->value;
  switch (in.id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE: return true;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: o.accessPolicyWindow = v.accessPolicyWindow; return true;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: o.cooperative = v.cooperative; return true;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY: o.syncPolicy = v.syncPolicy; return true;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: o.clusterDim = v.clusterDim; return true;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      o.clusterSchedulingPolicyPreference = v.clusterSchedulingPolicyPreference;
      return true;
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
      o.programmaticStreamSerializationAllowed = v.programmaticStreamSerializationAllowed;
      return true;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: o.priority = v.priority; return true;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: o.memSyncDomainMap = v.memSyncDomainMap; return true;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: o.memSyncDomain = v.memSyncDomain; return true;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: o.preferredClusterDim = v.preferredClusterDim; return true;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: o.sharedMemCarveout = v.sharedMemCarveout; return true;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      o.nvlinkUtilCentricScheduling = v.nvlinkUtilCentricScheduling;
      return true;
    default: return false;  // programmatic/launch-completion events, device-updatable nodes, unknown
  }
}

template <typename T>
T readAs(core::Bytes b, size_t offset = 0) {
  T t{};
  if (b.size >= offset + sizeof(T)) std::memcpy(&t, b.data + offset, sizeof(T));
  return t;
}

}  // namespace

OpEncoder::OpEncoder() {
  shape_.resize(sizeof(KernelShape) + kMaxLaunchAttrs * sizeof(CUlaunchAttribute));
  value_.resize(kMaxParamBytes);
}

GRAFT_HOT const OpDesc& OpEncoder::finish(OpKind kind, ApiId api, core::StreamKey stream, uint64_t event,
                                size_t shapeSize, size_t valueSize) {
  op_.kind = kind;
  op_.cause = core::EagerCause::None;
  op_.api = uint16_t(api);
  op_.stream = stream;
  op_.event = event;
  op_.shape = {shape_.data(), uint32_t(shapeSize)};
  op_.value = {value_.data(), uint32_t(valueSize)};
  uint64_t h = core::hashBytes(shape_.data(), shapeSize);
  h = core::hashCombine(h, (uint64_t(kind) << 16) | uint64_t(api));
  op_.shapeHash = core::hashCombine(h, stream);
  return op_;
}

GRAFT_HOT const OpDesc& OpEncoder::boundary(ApiId api, core::StreamKey stream, core::EagerCause cause) {
  finish(OpKind::Boundary, api, stream, 0, 0, 0);
  op_.cause = cause;
  return op_;
}

// Each parameter of the launch (kernelParams form) equals its bytes in `recorded`,
// a value encoded by writeKernelValue (gaps zeroed, as this launch's would be).
GRAFT_FAST_LANE static bool paramsEqual(const KernelInfo& info, void* const* params, const uint8_t* recorded) {
  auto same = [](const uint8_t* r, const void* p, size_t n) {
    if (n == 8) {  // most parameters: a pointer or a 64-bit scalar
      uint64_t x, y;
      std::memcpy(&x, r, 8);
      std::memcpy(&y, p, 8);
      return x == y;
    }
    return std::memcmp(r, p, n) == 0;
  };
  // (A null entry is not equal: the caller finds it, hasNullParam.)
  if (info.compactCount != kNotCompact) {
    for (unsigned i = 0; i < info.compactCount; ++i)
      if (!params[i] || !same(recorded + info.compactOffsets[i], params[i], info.compactSizes[i])) return false;
    return true;
  }
  for (size_t i = 0; i < info.sizes.size(); ++i)
    if (!params[i] || !same(recorded + info.offsets[i], params[i], info.sizes[i])) return false;
  return true;
}

// A null entry among the kernel's parameters (kernelParams form): the launch
// is the driver's to judge; graft must not read it.
static bool hasNullParam(const KernelInfo& info, void* const* params) {
  for (size_t i = 0; i < info.sizes.size(); ++i)
    if (!params[i]) return true;
  return false;
}

GRAFT_FAST_LANE core::EagerCause OpEncoder::describeLaunch(CUcontext ctx, KernelInfo& info,
                                                     const LaunchArgs& a, KernelShape* ks,
                                                     const void** buffer) {
  if (info.eager != core::EagerCause::None) return info.eager;
  if (a.sharedMem && a.sharedMem > allowanceFor(info, ctx)) return core::EagerCause::AboveSharedMemAllowance;
  if (a.numAttrs > kMaxLaunchAttrs) return core::EagerCause::UnsupportedLaunch;
  // Attributes counted but not given: the driver refuses the launch (graft
  // must not read them).
  if (a.numAttrs && !a.attrs) return core::EagerCause::DriverChecks;
  // Both parameter forms at once: the driver refuses the launch
  // (CUDA_ERROR_INVALID_VALUE), so it goes to the driver, as eagerly.
  if (a.kernelParams && a.extra) return core::EagerCause::DriverChecks;
  std::memset(ks, 0, sizeof(*ks));
  ks->func = reinterpret_cast<uint64_t>(a.func);
  ks->ctx = reinterpret_cast<uint64_t>(ctx);
  for (int d = 0; d < 3; ++d) {
    ks->grid[d] = a.grid[d];
    ks->block[d] = a.block[d];
  }
  ks->sharedMem = a.sharedMem;
  ks->numAttrs = uint8_t(a.numAttrs);
  if (a.numAttrs) {
    auto* attrs = reinterpret_cast<CUlaunchAttribute*>(shape_.data() + sizeof(KernelShape));
    for (unsigned i = 0; i < a.numAttrs; ++i) {
      if (!normalizeAttr(a.attrs[i], &attrs[i])) return core::EagerCause::UnsupportedLaunch;
    }
  }

  // Parameters: the `extra` buffer form, or one pointer per parameter.
  *buffer = nullptr;
  size_t bufferSize = 0;
  bool extraOk = true;
  if (a.extra) {
    for (void** e = a.extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        *buffer = e[1];
      } else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        if (!e[1]) return core::EagerCause::DriverChecks;  // the driver refuses it; graft must not read it
        bufferSize = *static_cast<size_t*>(e[1]);
      } else {
        extraOk = false;
      }
    }
  }
  size_t valueSize = 0;
  if (a.kernelParams || !a.extra) {
    if (a.kernelParams && !info.layoutKnown) return core::EagerCause::UnknownParams;
    if (a.kernelParams && hasNullParam(info, a.kernelParams)) return core::EagerCause::DriverChecks;
    ks->paramMode = kParamsArray;
    valueSize = a.kernelParams ? info.paramBytes : 0;
    *buffer = nullptr;
  } else {
    if (!extraOk || !*buffer) return core::EagerCause::UnsupportedLaunch;
    // A buffer whose size is not the kernel's parameter size: the driver
    // refuses the launch without reading it, and graft must not read it either
    // (it may end before the size claimed).
    if (!info.layoutKnown || bufferSize != info.paramBytes) return core::EagerCause::DriverChecks;
    ks->paramMode = kParamsBuffer;
    valueSize = bufferSize;
  }
  if (valueSize > kMaxParamBytes) return core::EagerCause::UnsupportedLaunch;  // value_'s size
  ks->paramBytes = uint32_t(valueSize);
  return core::EagerCause::None;
}

GRAFT_FAST_LANE OpEncoder::Sameness OpEncoder::compareDescribed(const OpDesc& expected, const KernelShape& ks,
                                                          const KernelInfo& info, const LaunchArgs& a,
                                                          const void* buffer, core::Bytes* value) {
  // Equal shape bytes: the KernelShape, then the normalized attributes.
  const size_t attrBytes = ks.numAttrs * sizeof(CUlaunchAttribute);
  if (expected.kind != OpKind::Kernel || expected.shape.size != sizeof(ks) + attrBytes ||
      expected.value.size != ks.paramBytes || std::memcmp(&ks, expected.shape.data, sizeof(ks)) != 0 ||
      (attrBytes && std::memcmp(shape_.data() + sizeof(ks), expected.shape.data + sizeof(ks), attrBytes) != 0))
    return Sameness::Differs;
  const size_t valueSize = ks.paramBytes;
  const bool valueEqual = valueSize == 0 ||
                          (ks.paramMode == kParamsBuffer
                               ? std::memcmp(expected.value.data, buffer, valueSize) == 0
                               : paramsEqual(info, a.kernelParams, expected.value.data));
  if (valueEqual) {
    *value = expected.value;
    return Sameness::Equal;
  }
  writeKernelValue(info, a, buffer, valueSize);
  *value = {value_.data(), uint32_t(valueSize)};
  return Sameness::ValueDiffers;
}

GRAFT_FAST_LANE OpEncoder::Sameness OpEncoder::compareLaunch(const OpDesc& expected, CUcontext ctx,
                                                       KernelInfo& info, const LaunchArgs& a,
                                                       core::Bytes* value) {
  if (a.numAttrs || a.extra || !a.kernelParams || info.eager != core::EagerCause::None ||
      !info.layoutKnown ||
      (a.sharedMem && (a.sharedMem > info.sharedMemAllowance || info.allowanceStale ||
                       reinterpret_cast<uint64_t>(ctx) != info.ctx))) [[unlikely]] {
    core::StageTimer timer(core::Stage::FastLaneDescribed);
    KernelShape ks;
    const void* buffer;
    if (describeLaunch(ctx, info, a, &ks, &buffer) != core::EagerCause::None) return Sameness::Differs;
    return compareDescribed(expected, ks, info, a, buffer, value);
  }
  // The common launch (parameter pointers, no attributes), field by field:
  // describeLaunch would make exactly these fields, with zeroed padding, as
  // it made the recorded ones.
  const KernelShape& ks = kernelShapeOf(expected);
  if (expected.kind != OpKind::Kernel || expected.shape.size != sizeof(KernelShape) ||
      ks.func != reinterpret_cast<uint64_t>(a.func) || ks.ctx != reinterpret_cast<uint64_t>(ctx) ||
      ks.grid[0] != a.grid[0] || ks.grid[1] != a.grid[1] || ks.grid[2] != a.grid[2] ||
      ks.block[0] != a.block[0] || ks.block[1] != a.block[1] || ks.block[2] != a.block[2] ||
      ks.sharedMem != a.sharedMem || ks.paramMode != kParamsArray || ks.numAttrs != 0 ||
      ks.paramBytes != info.paramBytes || expected.value.size != info.paramBytes)
    return Sameness::Differs;
  core::StageTimer timer(core::Stage::FastLaneValue);
  if (info.paramBytes == 0 || paramsEqual(info, a.kernelParams, expected.value.data)) {
    *value = expected.value;
    return Sameness::Equal;
  }
  if (hasNullParam(info, a.kernelParams)) [[unlikely]] return Sameness::Differs;
  writeKernelValue(info, a, nullptr, info.paramBytes);
  *value = {value_.data(), info.paramBytes};
  return Sameness::ValueDiffers;
}

GRAFT_HOT const OpDesc& OpEncoder::kernel(ApiId api, core::StreamKey stream, CUcontext ctx, KernelInfo& info,
                                          const LaunchArgs& a) {
  ++info.launches;
  // Reloaded code that lived through its eager launches this time
  // (KernelRegistry::retire) is let into graphs again.
  if (info.eager == core::EagerCause::ReloadedCode && info.launches > info.reloadedEagerLaunches) [[unlikely]]
    info.eager = core::EagerCause::None;
  KernelShape ks;
  const void* buffer;
  if (const core::EagerCause why = describeLaunch(ctx, info, a, &ks, &buffer); why != core::EagerCause::None)
    return boundary(api, stream, why);

  // The op a replay expects here (setExpected): when the launch equals it,
  // its bytes are used in place, with no copy and no hashing. Equal bytes are
  // the same op, so this only saves work.
  if (const core::OpDesc* expected = expected_;
      expected && expected->api == uint16_t(api) && expected->stream == stream) {
    core::Bytes value;
    if (compareDescribed(*expected, ks, info, a, buffer, &value) != Sameness::Differs) {
      op_ = *expected;
      op_.cause = core::EagerCause::None;
      op_.value = value;
      return op_;
    }
  }

  writeKernelValue(info, a, buffer, ks.paramBytes);
  std::memcpy(shape_.data(), &ks, sizeof(ks));
  return finish(OpKind::Kernel, api, stream, 0, sizeof(ks) + ks.numAttrs * sizeof(CUlaunchAttribute),
                ks.paramBytes);
}

GRAFT_FAST_LANE void OpEncoder::writeKernelValue(const KernelInfo& info, const LaunchArgs& a, const void* buffer,
                                 size_t valueSize) {
  if (!valueSize) return;
  uint8_t* out = value_.data();
  if (buffer && !a.kernelParams) {
    std::memcpy(out, buffer, valueSize);
  } else if (info.paramsOrdered) {
    // Padding between parameters is zeroed, so equal launches have equal
    // bytes; when parameters come in order only the gaps are written twice.
    uint32_t end = 0;
    for (size_t i = 0; i < info.sizes.size(); ++i) {
      if (info.offsets[i] > end) std::memset(out + end, 0, info.offsets[i] - end);
      std::memcpy(out + info.offsets[i], a.kernelParams[i], info.sizes[i]);
      end = info.offsets[i] + info.sizes[i];
    }
  } else {
    std::memset(out, 0, valueSize);
    for (size_t i = 0; i < info.sizes.size(); ++i)
      std::memcpy(out + info.offsets[i], a.kernelParams[i], info.sizes[i]);
  }
}

GRAFT_HOT const OpDesc& OpEncoder::memcpy(ApiId api, core::StreamKey stream, CUcontext ctx, CUdeviceptr dst,
                                CUdeviceptr src, size_t bytes) {
  // An empty copy makes no graph node (a capture adds none): the driver
  // checks it and does nothing, at its position.
  if (bytes == 0) return boundary(api, stream, core::EagerCause::DriverChecks);
  const CopyShape s{reinterpret_cast<uint64_t>(ctx), bytes};
  const CopyValue v{dst, src};
  std::memcpy(shape_.data(), &s, sizeof(s));
  std::memcpy(value_.data(), &v, sizeof(v));
  return finish(OpKind::Memcpy, api, stream, 0, sizeof(s), sizeof(v));
}

GRAFT_HOT const OpDesc& OpEncoder::memset(ApiId api, core::StreamKey stream, CUcontext ctx, CUdeviceptr dst,
                                size_t pitch, unsigned value, unsigned elementSize, size_t width,
                                size_t height) {
  // Empty (no graph node, as above), or at an address the driver refuses for
  // this element size: the driver's, at its position.
  if (width == 0 || height == 0 || dst % elementSize != 0)
    return boundary(api, stream, core::EagerCause::DriverChecks);
  const SetShape s{reinterpret_cast<uint64_t>(ctx), width, height, pitch, elementSize, 0};
  const SetValue v{dst, value, 0};
  std::memcpy(shape_.data(), &s, sizeof(s));
  std::memcpy(value_.data(), &v, sizeof(v));
  return finish(OpKind::Memset, api, stream, 0, sizeof(s), sizeof(v));
}

void OpEncoder::noteEventCreated(CUevent event, unsigned flags, CUcontext ctx) {
  const EventKind kind = (flags & CU_EVENT_INTERPROCESS)     ? EventKind::Interprocess
                         : (flags & CU_EVENT_DISABLE_TIMING) ? EventKind::Untimed
                                                             : EventKind::Timing;
  events_[reinterpret_cast<uint64_t>(event)] = {kind, reinterpret_cast<uint64_t>(ctx)};
}

core::EagerCause OpEncoder::eventOpEagerCause(CUevent event, bool record, CUcontext streamCtx,
                                              CUcontext streamRegularCtx) const {
  const auto it = events_.find(reinterpret_cast<uint64_t>(event));
  if (it == events_.end()) return core::EagerCause::UnseenEvent;
  if (it->second.kind == EventKind::Interprocess) return core::EagerCause::InterprocessEvent;
  if (record && it->second.kind == EventKind::Timing) return core::EagerCause::TimingEvent;
  if (record && (!streamCtx || it->second.ctx != reinterpret_cast<uint64_t>(streamCtx)) &&
      (!streamRegularCtx || it->second.ctx != reinterpret_cast<uint64_t>(streamRegularCtx)))
    return core::EagerCause::DriverChecks;
  return core::EagerCause::None;
}

GRAFT_HOT const OpDesc& OpEncoder::eventRecord(ApiId api, core::StreamKey stream, CUcontext ctx, CUevent event,
                                     unsigned flags, CUcontext streamCtx, CUcontext streamRegularCtx) {
  if (const core::EagerCause c = eventOpEagerCause(event, true, streamCtx, streamRegularCtx);
      c != core::EagerCause::None)
    return boundary(api, stream, c);
  const EventShape s{flags, 0, reinterpret_cast<uint64_t>(ctx)};
  std::memcpy(shape_.data(), &s, sizeof(s));
  return finish(OpKind::EventRecord, api, stream, reinterpret_cast<uint64_t>(event), sizeof(s), 0);
}

GRAFT_HOT const OpDesc& OpEncoder::eventWait(ApiId api, core::StreamKey stream, CUcontext ctx, CUevent event,
                                   unsigned flags) {
  if (const core::EagerCause c = eventOpEagerCause(event, false); c != core::EagerCause::None)
    return boundary(api, stream, c);
  if (!captured_records_.empty() && captured_records_.count(reinterpret_cast<uint64_t>(event)))
    return boundary(api, stream, core::EagerCause::DriverChecks);
  const EventShape s{flags, 0, reinterpret_cast<uint64_t>(ctx)};
  std::memcpy(shape_.data(), &s, sizeof(s));
  return finish(OpKind::EventWait, api, stream, reinterpret_cast<uint64_t>(event), sizeof(s), 0);
}

// ---------------------------------------------------------------------------

std::span<const CUlaunchAttribute> kernelAttrsOf(const OpDesc& op) {
  const KernelShape& ks = kernelShapeOf(op);
  return {reinterpret_cast<const CUlaunchAttribute*>(op.shape.data + sizeof(KernelShape)),
          ks.numAttrs};
}
CopyShape copyShapeOf(const OpDesc& op) { return readAs<CopyShape>(op.shape); }
CopyValue copyValueOf(const OpDesc& op) { return readAs<CopyValue>(op.value); }
SetShape setShapeOf(const OpDesc& op) { return readAs<SetShape>(op.shape); }
SetValue setValueOf(const OpDesc& op) { return readAs<SetValue>(op.value); }
EventShape eventShapeOf(const OpDesc& op) { return readAs<EventShape>(op.shape); }

CUcontext contextOf(const OpDesc& op) {
  switch (op.kind) {
    case OpKind::Kernel: return reinterpret_cast<CUcontext>(kernelShapeOf(op).ctx);
    case OpKind::Memcpy: return reinterpret_cast<CUcontext>(copyShapeOf(op).ctx);
    case OpKind::Memset: return reinterpret_cast<CUcontext>(setShapeOf(op).ctx);
    case OpKind::EventRecord:
    case OpKind::EventWait: return reinterpret_cast<CUcontext>(eventShapeOf(op).ctx);
    default: return nullptr;
  }
}

bool kernelParamsOf(const OpDesc& op, const KernelRegistry& kernels, std::vector<void*>& pointers,
                    void** extra, size_t* extraSize) {
  const KernelShape& ks = kernelShapeOf(op);
  if (ks.paramMode == kParamsBuffer)
    return kernelParamsOf(op, std::span<const uint32_t>{}, pointers, extra, extraSize);
  const KernelInfo* info = kernels.find(ks.func);
  if (!info || !info->layoutKnown) return false;
  return kernelParamsOf(op, info->offsets, pointers, extra, extraSize);
}

bool kernelParamsOf(const OpDesc& op, std::span<const uint32_t> offsets, std::vector<void*>& pointers,
                    void** extra, size_t* extraSize) {
  const KernelShape& ks = kernelShapeOf(op);
  auto* data = const_cast<uint8_t*>(op.value.data);
  if (ks.paramMode == kParamsBuffer) {
    *extraSize = op.value.size;
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = data;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = extraSize;
    extra[4] = CU_LAUNCH_PARAM_END;
    pointers.clear();
    return true;
  }
  pointers.resize(offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) pointers[i] = data + offsets[i];
  return true;
}

namespace {

// A launch the driver refused that asks for more dynamic shared memory than
// its kernel allows now: the program asked for it under a larger allowance and
// lowered it since, while graft held the launch or queued its graph (graft
// issues what it holds before a lowering it sees refuse a held launch, but a
// launch re-issued after its graph failed, or named by another handle of the
// kernel, can still meet the lower value). Launched again with the allowance
// raised to what it asks for, then put back; `launch` is not called when the
// allowance is not the reason (or in a capture, which the refusal ended).
//
// Where the value in effect comes from: the driver refuses cuFuncGetAttribute
// and cuFuncSetAttribute on a library kernel's handle (CUDA_ERROR_INVALID_HANDLE
// on the H100, tests/gpu/driver_facts.cu, kernel_handle_func_attribute), and
// nvcc 13's launch stubs launch those. A library kernel's launches in a context
// get its function's own value there if one was set, else the kernel's value
// for the context's device (cuda.h, cuKernelSetAttribute), whether the launch
// names the kernel or its function. So for a library kernel (or a function of
// one) the kernel's value for this device is raised when it is the value in
// effect and the raise takes effect, and otherwise the function's own value
// is; that level alone is put back, so no value the program did not set is
// left behind (a function-level value left behind would override the
// program's later cuKernelSetAttribute calls).
//
// `kernels`: the registry (a library kernel has a function; for a function
// handle, the library kernel it is the function of is looked up). Under the
// engine lock (re-issued launches are issued by the program's thread).
template <typename Launch>
CUresult launchUnderAllowance(const KernelRegistry& kernels, CUfunction handle, unsigned sharedMem, CUstream stream,
                              Launch launch) {
  constexpr CUfunction_attribute kAllowance = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
  const auto get = real<ApiId::k_cuFuncGetAttribute_2020>();
  const auto set = real<ApiId::k_cuFuncSetAttribute_9000>();
  const auto capturing = real<ApiId::k_cuStreamIsCapturing_10000>();
  const auto kernelFunction = real<ApiId::k_cuKernelGetFunction_12000>();
  const auto kernelGet = real<ApiId::k_cuKernelGetAttribute_12000>();
  const auto kernelSet = real<ApiId::k_cuKernelSetAttribute_12000>();
  const auto ctxDevice = real<ApiId::k_cuCtxGetDevice_2000>();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!get || !set || (capturing && capturing(stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE))
    return CUDA_ERROR_INVALID_VALUE;
  // The function whose value is in effect here, and its library kernel if any.
  CUfunction function = handle;
  CUkernel kernel = nullptr;
  const KernelInfo* info = kernels.find(reinterpret_cast<uint64_t>(handle));
  if (info && info->function && kernelFunction &&
      kernelFunction(&function, reinterpret_cast<CUkernel>(handle)) == CUDA_SUCCESS && function) {
    kernel = reinterpret_cast<CUkernel>(handle);
  } else {
    function = handle;
  }
  int allowed = 0;
  if (get(&allowed, kAllowance, function) != CUDA_SUCCESS || sharedMem <= unsigned(allowed))
    return CUDA_ERROR_INVALID_VALUE;  // (not the reason: before any lookup)
  if (!kernel) {
    const std::vector<uint64_t> of = kernels.libraryKernelsOfFunction(handle);
    if (of.size() == 1) kernel = reinterpret_cast<CUkernel>(of[0]);
  }
  CUdevice device = 0;
  int kernelValue = -1;
  if (kernel && kernelGet && kernelSet && ctxDevice && ctxDevice(&device) == CUDA_SUCCESS &&
      kernelGet(&kernelValue, kAllowance, kernel, device) == CUDA_SUCCESS && kernelValue == allowed &&
      kernelSet(kAllowance, int(sharedMem), kernel, device) == CUDA_SUCCESS) {
    int now = 0;
    if (get(&now, kAllowance, function) == CUDA_SUCCESS && unsigned(now) >= sharedMem) {
      const CUresult r = launch();
      kernelSet(kAllowance, allowed, kernel, device);
      return r;
    }
    // The function's own value decides (equal to the kernel's by chance).
    kernelSet(kAllowance, kernelValue, kernel, device);
  }
  if (set(function, kAllowance, int(sharedMem)) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = launch();
  set(function, kAllowance, allowed);
  return r;
}

}  // namespace

CUresult issueOp(const OpDesc& op, CUstream stream, const KernelRegistry& kernels,
                 std::vector<void*>& paramPointers) {
  const CUresult r = issueOpOnce(op, stream, kernels, paramPointers);
  if (r != CUDA_ERROR_INVALID_VALUE || op.kind != OpKind::Kernel || kernelShapeOf(op).sharedMem == 0) return r;
  const KernelShape& ks = kernelShapeOf(op);
  return launchUnderAllowance(kernels, reinterpret_cast<CUfunction>(ks.func), ks.sharedMem, stream,
                              [&] { return issueOpOnce(op, stream, kernels, paramPointers); });
}

CUresult issueOpOnce(const OpDesc& op, CUstream stream, const KernelRegistry& kernels,
                     std::vector<void*>& paramPointers) {
  const ApiId api = ApiId(op.api);
  switch (op.kind) {
    case OpKind::Kernel: {
      const KernelShape& ks = kernelShapeOf(op);
      void* extra[5];
      size_t extraSize = 0;
      if (!kernelParamsOf(op, kernels, paramPointers, extra, &extraSize))
        return CUDA_ERROR_INVALID_VALUE;
      void** params = ks.paramMode == kParamsArray ? paramPointers.data() : nullptr;
      void** ex = ks.paramMode == kParamsBuffer ? extra : nullptr;
      auto f = reinterpret_cast<CUfunction>(ks.func);
      if (api == ApiId::k_cuLaunchKernel_4000) {
        return real<ApiId::k_cuLaunchKernel_4000>()(f, ks.grid[0], ks.grid[1], ks.grid[2],
                                                    ks.block[0], ks.block[1], ks.block[2],
                                                    ks.sharedMem, stream, params, ex);
      }
      if (api == ApiId::k_cuLaunchCooperativeKernel_9000) {
        return real<ApiId::k_cuLaunchCooperativeKernel_9000>()(
            f, ks.grid[0], ks.grid[1], ks.grid[2], ks.block[0], ks.block[1], ks.block[2],
            ks.sharedMem, stream, params);
      }
      auto attrs = kernelAttrsOf(op);
      CUlaunchAttribute copy[kMaxLaunchAttrs];
      std::memcpy(copy, attrs.data(), attrs.size_bytes());
      CUlaunchConfig cfg{};
      cfg.gridDimX = ks.grid[0];
      cfg.gridDimY = ks.grid[1];
      cfg.gridDimZ = ks.grid[2];
      cfg.blockDimX = ks.block[0];
      cfg.blockDimY = ks.block[1];
      cfg.blockDimZ = ks.block[2];
      cfg.sharedMemBytes = ks.sharedMem;
      cfg.hStream = stream;
      cfg.attrs = attrs.empty() ? nullptr : copy;
      cfg.numAttrs = unsigned(attrs.size());
      return real<ApiId::k_cuLaunchKernelEx_11060>()(&cfg, f, params, ex);
    }
    case OpKind::Memcpy: {
      const CopyShape s = copyShapeOf(op);
      const CopyValue v = copyValueOf(op);
      if (api == ApiId::k_cuMemcpyDtoDAsync_3020)
        return real<ApiId::k_cuMemcpyDtoDAsync_3020>()(v.dst, v.src, s.bytes, stream);
      return real<ApiId::k_cuMemcpyAsync_4000>()(v.dst, v.src, s.bytes, stream);
    }
    case OpKind::Memset: {
      const SetShape s = setShapeOf(op);
      const SetValue v = setValueOf(op);
      switch (api) {
        case ApiId::k_cuMemsetD8Async_3020:
          return real<ApiId::k_cuMemsetD8Async_3020>()(v.dst, (unsigned char)v.value, s.width, stream);
        case ApiId::k_cuMemsetD16Async_3020:
          return real<ApiId::k_cuMemsetD16Async_3020>()(v.dst, (unsigned short)v.value, s.width, stream);
        case ApiId::k_cuMemsetD32Async_3020:
          return real<ApiId::k_cuMemsetD32Async_3020>()(v.dst, v.value, s.width, stream);
        case ApiId::k_cuMemsetD2D8Async_3020:
          return real<ApiId::k_cuMemsetD2D8Async_3020>()(v.dst, s.pitch, (unsigned char)v.value,
                                                          s.width, s.height, stream);
        case ApiId::k_cuMemsetD2D16Async_3020:
          return real<ApiId::k_cuMemsetD2D16Async_3020>()(v.dst, s.pitch, (unsigned short)v.value,
                                                           s.width, s.height, stream);
        case ApiId::k_cuMemsetD2D32Async_3020:
          return real<ApiId::k_cuMemsetD2D32Async_3020>()(v.dst, s.pitch, v.value, s.width,
                                                           s.height, stream);
        default: return CUDA_ERROR_INVALID_VALUE;
      }
    }
    case OpKind::EventRecord: {
      const EventShape s = eventShapeOf(op);
      auto e = reinterpret_cast<CUevent>(op.event);
      if (api == ApiId::k_cuEventRecordWithFlags_11010)
        return real<ApiId::k_cuEventRecordWithFlags_11010>()(e, stream, s.flags);
      return real<ApiId::k_cuEventRecord_2000>()(e, stream);
    }
    case OpKind::EventWait:
      return real<ApiId::k_cuStreamWaitEvent_3020>()(stream, reinterpret_cast<CUevent>(op.event),
                                                     eventShapeOf(op).flags);
    case OpKind::Boundary: break;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// ---------------------------------------------------------------------------

std::string describeOp(const OpDesc& op, const KernelRegistry& kernels) {
  switch (op.kind) {
    case OpKind::Kernel: {
      const KernelInfo* k = kernels.find(kernelShapeOf(op).func);
      return "kernel " + (k ? k->name : std::string("?"));
    }
    case OpKind::Memcpy: return fmt::format("memcpy of {} bytes", copyShapeOf(op).bytes);
    case OpKind::Memset: {
      const SetShape s = setShapeOf(op);
      return fmt::format("memset of {}x{} elements of {} bytes", s.width, s.height, s.elementSize);
    }
    case OpKind::EventRecord: return "event record";
    case OpKind::EventWait: return "stream wait on event";
    case OpKind::Boundary:
      return fmt::format("{} ({})", hook::apiInfo(ApiId(op.api)).base, core::toString(op.cause));
  }
  return "op";
}

std::string describeLaunch(const OpDesc& op, const KernelRegistry& kernels) {
  std::string d = describeOp(op, kernels);
  if (op.kind != OpKind::Kernel) return d;
  const KernelShape& ks = kernelShapeOf(op);
  const KernelInfo* k = kernels.find(ks.func);
  d += fmt::format(" ({}, grid ({},{},{}), block ({},{},{}), {} B shared, {} parameter bytes{}", 
                   hook::apiInfo(ApiId(op.api)).base, ks.grid[0], ks.grid[1], ks.grid[2], ks.block[0],
                   ks.block[1], ks.block[2], ks.sharedMem, ks.paramBytes,
                   ks.paramMode == kParamsBuffer ? " in an extra buffer"
                   : (k && k->layoutKnown) ? "" : ", layout unknown");
  for (const CUlaunchAttribute& a : kernelAttrsOf(op)) {
    uint32_t words[4];
    std::memcpy(words, &a.value, sizeof(words));
    d += fmt::format(", attribute {} = {:#x} {:#x} {:#x}", int(a.id), words[0], words[1], words[2]);
  }
  return d + ")";
}

std::string describeDifference(const OpDesc& e, const OpDesc& a, const KernelRegistry& kernels) {
  auto dims = [](const uint32_t* d) { return fmt::format("({},{},{})", d[0], d[1], d[2]); };
  if (e.kind != a.kind || e.api != a.api) return "got " + describeOp(a, kernels);
  if (e.stream != a.stream) return fmt::format("stream {:#x}→{:#x}", e.stream, a.stream);
  std::string d;
  auto add = [&d](const std::string& s) { d += d.empty() ? s : ", " + s; };
  switch (e.kind) {
    case OpKind::Kernel: {
      const KernelShape& x = kernelShapeOf(e);
      const KernelShape& y = kernelShapeOf(a);
      if (x.func != y.func) return "got " + describeOp(a, kernels);
      if (std::memcmp(x.grid, y.grid, sizeof(x.grid))) add("grid " + dims(x.grid) + "→" + dims(y.grid));
      if (std::memcmp(x.block, y.block, sizeof(x.block)))
        add("block " + dims(x.block) + "→" + dims(y.block));
      if (x.sharedMem != y.sharedMem) add(fmt::format("shared memory {}→{}", x.sharedMem, y.sharedMem));
      if (x.ctx != y.ctx) add("context differs");
      if (x.paramBytes != y.paramBytes || x.paramMode != y.paramMode)
        add(fmt::format("parameter bytes {}→{}", x.paramBytes, y.paramBytes));
      if (x.numAttrs != y.numAttrs ||
          std::memcmp(e.shape.data + sizeof(KernelShape), a.shape.data + sizeof(KernelShape),
                      x.numAttrs * sizeof(CUlaunchAttribute)))
        add("launch attributes differ");
      break;
    }
    case OpKind::Memcpy:
      if (copyShapeOf(e).bytes != copyShapeOf(a).bytes)
        add(fmt::format("size {}→{} bytes", copyShapeOf(e).bytes, copyShapeOf(a).bytes));
      break;
    case OpKind::Memset: {
      const SetShape x = setShapeOf(e), y = setShapeOf(a);
      if (x.width != y.width || x.height != y.height) add(fmt::format("size {}x{}→{}x{}", x.width, x.height, y.width, y.height));
      if (x.pitch != y.pitch) add("pitch differs");
      break;
    }
    case OpKind::EventRecord:
    case OpKind::EventWait:
      if (eventShapeOf(e).flags != eventShapeOf(a).flags) add("flags differ");
      if (eventShapeOf(e).ctx != eventShapeOf(a).ctx) add("context differs");
      break;
    case OpKind::Boundary: break;
  }
  return d.empty() ? "event dependencies differ" : d;
}

}  // namespace graft::graph
