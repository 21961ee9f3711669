#include "graph/copy_kernels.h"

#include <algorithm>

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
// One 16-byte access a thread per block: a 1 MiB copy gets 256 blocks, about
// two per SM of an H100 (four accesses a thread left half of them idle:
// 1.15x the driver's memcpy node at 1 MiB, 1.5x at an odd source offset).
constexpr uint64_t kBytesPerBlock = uint64_t(kThreads) * 16;
constexpr unsigned kMaxBlocks = 2048;

unsigned blocksFor(uint64_t bytes, unsigned cap) {
  return unsigned(std::clamp<uint64_t>((bytes + kBytesPerBlock - 1) / kBytesPerBlock, 1, std::max(cap, 1u)));
}

unsigned long long contextId(CUcontext ctx) {
  unsigned long long id = 0;
  auto get = real<ApiId::k_cuCtxGetId_12000>();
  return get && get(ctx, &id) == CUDA_SUCCESS ? id : 0;
}

bool isEmpty(const OpDesc& op) {
  if (op.kind == OpKind::Memcpy) return copyShapeOf(op).bytes == 0;
  const SetShape s = setShapeOf(op);
  return s.width == 0 || s.height == 0;
}

// A copy whose source and destination share bytes: the driver's copy and a
// parallel kernel may leave different bytes (the program's result is
// undefined either way); such a copy keeps the driver's node.
bool overlaps(const OpDesc& op) {
  if (op.kind != OpKind::Memcpy) return false;
  const CopyValue v = copyValueOf(op);
  const uint64_t n = copyShapeOf(op).bytes;
  return v.dst < v.src + n && v.src < v.dst + n;
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

const CopyKernels::Module* CopyKernels::find(CUcontext ctx) const {
  auto it = modules_.find(ctx);
  return it == modules_.end() || it->second.failed ? nullptr : &it->second;
}

CopyKernels::Module* CopyKernels::loaded(CUcontext ctx) {
  const unsigned long long id = contextId(ctx);
  auto it = modules_.find(ctx);
  if (it != modules_.end() && (!id || it->second.contextId == id)) return it->second.failed ? nullptr : &it->second;
  // First use in this context, or a new context under an old handle (the old
  // module went with the old context).
  Module& m = modules_[ctx];
  m = Module{};
  m.contextId = id;
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

bool CopyKernels::pointerReachable(CUdeviceptr p, const Module& m, bool write, bool* freed) {
  auto attr = real<ApiId::k_cuPointerGetAttribute_4000>();
  unsigned type = 0;
  int ordinal = -1;
  if (attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS) {
    if (freed) *freed = true;
    return false;
  }
  if (type != CU_MEMORYTYPE_DEVICE ||
      attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) != CUDA_SUCCESS || ordinal != m.device)
    return false;
  // Mapped memory (cuMemMap) the current context's device may not access, or
  // only read. A driver without the attribute: device memory of this device.
  unsigned access = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
  if (attr(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p) != CUDA_SUCCESS)
    access = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
  return access == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE ||
         (!write && access == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ);
}

bool CopyKernels::usable(const OpDesc& op, CUcontext ctx) {
  if ((op.kind != OpKind::Memcpy && op.kind != OpKind::Memset) || isEmpty(op) || overlaps(op)) return false;
  const Module* m = loaded(ctx);
  if (!m) return false;
  // Memory freed since the op was issued cannot be asked about; every launch
  // checks the memory it is given.
  auto freedOrReachable = [&](CUdeviceptr p, bool write) {
    bool freed = false;
    return pointerReachable(p, *m, write, &freed) || freed;
  };
  if (op.kind == OpKind::Memcpy) {
    const CopyValue v = copyValueOf(op);
    return freedOrReachable(v.dst, true) && freedOrReachable(v.src, false);
  }
  return freedOrReachable(setValueOf(op).dst, true);
}

bool CopyKernels::reachable(const OpDesc& op, CUcontext ctx) const {
  const Module* m = find(ctx);
  if (!m || overlaps(op)) return false;
  if (op.kind == OpKind::Memcpy) {
    const CopyValue v = copyValueOf(op);
    return pointerReachable(v.dst, *m, true) && pointerReachable(v.src, *m, false);
  }
  return pointerReachable(setValueOf(op).dst, *m, true);
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
  for (auto it = modules_.begin(); it != modules_.end();)
    it = it->second.contextId ? std::next(it) : modules_.erase(it);
}

}  // namespace graft::graph
