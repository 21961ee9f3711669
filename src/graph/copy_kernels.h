// CopyKernels: graft's own copy and memset kernels (copy_kernels.cu, embedded
// as PTX), which a graph uses in place of a memcpy or memset node when the
// memory is device memory of the graph's own device.
//
// Why: the driver validates the memory a memcpy or memset node names, when the
// graph is instantiated and at every node update: memory freed meanwhile (a
// stream-ordered free, cudaFree, PyTorch's empty_cache or its cudaMallocAsync
// backend) makes both fail with CUDA_ERROR_INVALID_VALUE (measured on an H100,
// docs/PERF.md), so a loop that frees and allocates its buffers every step
// could never be graphed, and a graph built before such a free broke at its
// next update. A kernel node's parameters are never validated. The kernels
// copy or set exactly the bytes the driver's copy or memset would.
//
// Since nothing validates them, every launch of a graph checks that each of
// its copies and memsets in kernel form names memory the kernel can reach
// (reachable()); the driver's own copy reaches more (another device's memory
// without peer access, host memory), and such an instance runs eagerly.
//
// Threading: GraphExecutor's (under the engine lock); the launch thread only
// reads CopyKernelArgs it builds itself. Calls the driver (a module load once
// per context, pointer attributes). Allocates only when a context's module is
// loaded.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <unordered_map>

#include "core/op.h"

namespace graft::graph {

// The kernel parameters of a copy or memset op in kernel form: `pointers` is
// the kernelParams array (it points into this object, so it must not move
// after the constructor).
struct CopyKernelArgs {
  explicit CopyKernelArgs(const core::OpDesc& op);
  CopyKernelArgs(const CopyKernelArgs&) = delete;
  CopyKernelArgs& operator=(const CopyKernelArgs&) = delete;
  uint64_t words[4] = {};
  uint32_t halves[2] = {};
  void* pointers[6] = {};
};

class CopyKernels {
 public:
  // At build: whether `op` (a memcpy or memset op of graft's: device copies
  // and memsets only) may become graft's kernel in context `ctx`: it is not
  // empty, a copy's ranges do not overlap, and its memory is reachable (see
  // reachable()) or no longer allocated (every launch checks the memory it is
  // then given). Loads the module on the first call in a context (false if
  // that fails; logged once). `ctx` must be current.
  bool usable(const core::OpDesc& op, CUcontext ctx);
  // At each launch, for an op built in kernel form, with this instance's
  // values: its memory is device memory of ctx's device that ctx may read
  // (a source) and write (a destination), and a copy's ranges do not overlap.
  // `ctx` must be current. No allocation.
  bool reachable(const core::OpDesc& op, CUcontext ctx) const;
  // Launches `op` as graft's kernel on `stream` (in a capture: adds its node).
  // After usable(op, ctx) returned true.
  CUresult launch(const core::OpDesc& op, CUcontext ctx, CUstream stream);
  // The program unloads code or destroys a context. graft's modules do not
  // depend on the program's code, and a context handle reused by a new
  // context is told apart by its id (cuCtxGetId), so the modules stay; only
  // where the driver cannot tell context ids are they forgotten (not
  // unloaded: their context may be going).
  void forgetAll();

 private:
  struct Module {
    CUmodule module = nullptr;
    CUfunction copy = nullptr;
    CUfunction set = nullptr;
    int device = -1;
    unsigned long long contextId = 0;  // 0: the driver cannot tell
    bool failed = false;
  };
  Module* loaded(CUcontext ctx);
  const Module* find(CUcontext ctx) const;
  // Device memory of `m`'s device that the current context may write
  // (`write`) or read. `freed` (may be null): set when the driver knows no
  // allocation at `p`.
  static bool pointerReachable(CUdeviceptr p, const Module& m, bool write, bool* freed = nullptr);

  std::unordered_map<CUcontext, Module> modules_;
  bool logged_failure_ = false;
};

}  // namespace graft::graph
