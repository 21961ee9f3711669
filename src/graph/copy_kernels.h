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
// Threading: GraphExecutor's (under the engine lock); the launch thread only
// reads CopyKernelArgs it builds itself. Calls the driver (module loads, once
// per context). Allocates only when a context's module is loaded.
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
  // Whether no device other than ctx's has memory the program could name:
  // the process sees one device, or no other device's primary context is
  // active. Loads the module on the first call in a context. `ctx` must be
  // current. For usable(), once per build.
  bool soleDeviceInUse(CUcontext ctx);
  // Whether `op` (a memcpy or memset op of graft's: device-to-device copies
  // and memsets only) may run as graft's kernel in context `ctx`: it is not
  // empty, and its memory is device memory of ctx's device, or no longer
  // allocated while `soleDevice` (soleDeviceInUse: the memory was on a device
  // when the op was issued, and no other device could have held it). Loads
  // the module on the first call in a context (false if that fails; logged
  // once). `ctx` must be current.
  bool usable(const core::OpDesc& op, CUcontext ctx, bool soleDevice);
  // Launches `op` as graft's kernel on `stream` (in a capture: adds its node).
  // After usable(op, ctx) returned true.
  CUresult launch(const core::OpDesc& op, CUcontext ctx, CUstream stream);
  // The program unloads code or destroys a context: every module is unloaded
  // (a context handle may be reused for a new context).
  void forgetAll();

 private:
  struct Module {
    CUmodule module = nullptr;
    CUfunction copy = nullptr;
    CUfunction set = nullptr;
    int device = -1;
    bool failed = false;
  };
  Module* loaded(CUcontext ctx);
  bool local(CUdeviceptr p, const Module& m, bool soleDevice);

  std::unordered_map<CUcontext, Module> modules_;
  int devices_ = -1;  // cuDeviceGetCount, at the first load
  bool logged_failure_ = false;
};

}  // namespace graft::graph
