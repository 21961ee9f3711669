#include "graph/copy_kernels.h"

#include <algorithm>

#include "graph/context_scope.h"
#include "graph/op_codec.h"
#include "hook/driver_api.h"
#include "log/log.h"

namespace graft::graph {

using core::OpDesc;
using core::OpKind;
using hook::ApiId;
using hook::real;

namespace {

const char kPtx[] =
#include "graph/copy_kernels_ptx.inc"
    ;

constexpr unsigned kThreads = 256;
constexpr uint64_t kBytesPerBlock = uint64_t(kThreads) * 16 * 4;  // four 16-byte accesses a thread
constexpr unsigned kMaxBlocks = 2048;

unsigned blocksFor(uint64_t bytes, unsigned cap) {
  return unsigned(std::clamp<uint64_t>((bytes + kBytesPerBlock - 1) / kBytesPerBlock, 1, std::max(cap, 1u)));
}

}  // namespace

CopyKernelArgs::CopyKernelArgs(const OpDesc& op) {
  if (op.kind == OpKind::Memcpy) {
    const CopyShape s = copyShapeOf(op);
    const CopyValue v = copyValueOf(op);
    words[0] = v.dst;  // graft_copy(dst, src, bytes)
    words[1] = v.src;
    words[2] = s.bytes;
    for (int i = 0; i < 3; ++i) pointers[i] = &words[i];
  } else {
    const SetShape s = setShapeOf(op);
    const SetValue v = setValueOf(op);
    words[0] = v.dst;  // graft_memset(dst, pitch, width, height, value, elementSize)
    words[1] = s.pitch;
    words[2] = s.width;
    words[3] = s.height;
    halves[0] = v.value;
    halves[1] = s.elementSize;
    for (int i = 0; i < 4; ++i) pointers[i] = &words[i];
    pointers[4] = &halves[0];
    pointers[5] = &halves[1];
  }
}

CopyKernels::Module* CopyKernels::loaded(CUcontext ctx) {
  auto [it, fresh] = modules_.try_emplace(ctx);
  Module& m = it->second;
  if (!fresh) return m.failed ? nullptr : &m;
  auto load = real<ApiId::k_cuModuleLoadData_2000>();
  auto get = real<ApiId::k_cuModuleGetFunction_2000>();
  auto device = real<ApiId::k_cuCtxGetDevice_2000>();
  CUresult r = CUDA_ERROR_NOT_FOUND;
  CUdevice dev = -1;
  if (load && get && device && (r = device(&dev)) == CUDA_SUCCESS && (r = load(&m.module, kPtx)) == CUDA_SUCCESS &&
      (r = get(&m.copy, m.module, "graft_copy")) == CUDA_SUCCESS)
    r = get(&m.set, m.module, "graft_memset");
  if (r == CUDA_SUCCESS) {
    // Loaded now rather than at its first launch, which may be inside a
    // capture (lazy loading): asking for an attribute loads a function.
    int regs = 0;
    if (auto attr = real<ApiId::k_cuFuncGetAttribute_2020>()) {
      attr(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, m.copy);
      attr(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, m.set);
    }
    m.device = int(dev);
    if (devices_ < 0) {
      int n = 0;
      auto count = real<ApiId::k_cuDeviceGetCount_2000>();
      devices_ = count && count(&n) == CUDA_SUCCESS ? n : 0;
    }
    return &m;
  }
  m.failed = true;
  if (!logged_failure_) {
    logged_failure_ = true;
    const char* name = nullptr;
    if (auto f = real<ApiId::k_cuGetErrorName_6000>()) f(r, &name);
    GRAFT_INFO("graft's copy kernels could not be loaded ({}): graphs hold device copies and memsets as memcpy "
               "and memset nodes, which cannot be updated once their memory is freed",
               name ? name : "unknown error");
  }
  return nullptr;
}

bool CopyKernels::soleDeviceInUse(CUcontext ctx) {
  const Module* m = loaded(ctx);
  if (!m) return false;
  if (devices_ == 1) return true;
  auto get = real<ApiId::k_cuDeviceGet_2000>();
  auto state = real<ApiId::k_cuDevicePrimaryCtxGetState_7000>();
  if (!get || !state) return false;
  for (int ordinal = 0; ordinal < devices_; ++ordinal) {
    CUdevice dev = -1;
    unsigned flags = 0;
    int active = 1;
    if (get(&dev, ordinal) != CUDA_SUCCESS || state(dev, &flags, &active) != CUDA_SUCCESS) return false;
    if (active && int(dev) != m->device) return false;
  }
  return true;
}

bool CopyKernels::local(CUdeviceptr p, const Module& m, bool soleDevice) {
  auto attr = real<ApiId::k_cuPointerGetAttribute_4000>();
  unsigned type = 0;
  if (attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS) return soleDevice;  // freed since
  if (type != CU_MEMORYTYPE_DEVICE) return false;
  int ordinal = -1;
  return attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS && ordinal == m.device;
}

bool CopyKernels::usable(const OpDesc& op, CUcontext ctx, bool soleDevice) {
  if (op.kind == OpKind::Memcpy) {
    if (copyShapeOf(op).bytes == 0) return false;
  } else if (op.kind == OpKind::Memset) {
    const SetShape s = setShapeOf(op);
    if (s.width == 0 || s.height == 0) return false;
  } else {
    return false;
  }
  const Module* m = loaded(ctx);
  if (!m) return false;
  if (op.kind == OpKind::Memcpy) {
    const CopyValue v = copyValueOf(op);
    return local(v.dst, *m, soleDevice) && local(v.src, *m, soleDevice);
  }
  return local(setValueOf(op).dst, *m, soleDevice);
}

CUresult CopyKernels::launch(const OpDesc& op, CUcontext ctx, CUstream stream) {
  const Module* m = loaded(ctx);
  if (!m) return CUDA_ERROR_NOT_FOUND;
  CopyKernelArgs args(op);
  unsigned gx = 1, gy = 1;
  CUfunction f = m->copy;
  if (op.kind == OpKind::Memcpy) {
    gx = blocksFor(copyShapeOf(op).bytes, kMaxBlocks);
  } else {
    const SetShape s = setShapeOf(op);
    f = m->set;
    gy = unsigned(std::min<uint64_t>(s.height, 512));
    gx = blocksFor(s.width * s.elementSize, kMaxBlocks / gy);
  }
  return real<ApiId::k_cuLaunchKernel_4000>()(f, gx, gy, 1, kThreads, 1, 1, 0, stream, args.pointers, nullptr);
}

void CopyKernels::forgetAll() {
  auto unload = real<ApiId::k_cuModuleUnload_2000>();
  for (auto& [ctx, m] : modules_) {
    if (!m.module || !unload) continue;
    ContextScope scope(ctx);
    unload(m.module);  // the graphs using it were destroyed first
  }
  modules_.clear();
}

}  // namespace graft::graph
