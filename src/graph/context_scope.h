// ContextScope: makes a CUDA context current for a scope if it is not already
// (cuCtxPushCurrent / cuCtxPopCurrent through the real driver pointers).
//
// Threading: per thread (the current context is). Calls the driver; no allocation.
#pragma once

#include <cuda.h>

#include "hook/driver_api.h"

namespace graft::graph {

class ContextScope {
 public:
  explicit ContextScope(CUcontext ctx) {
    if (!ctx) return;
    CUcontext current = nullptr;
    hook::real<hook::ApiId::k_cuCtxGetCurrent_4000>()(&current);
    if (current != ctx && hook::real<hook::ApiId::k_cuCtxPushCurrent_4000>()(ctx) == CUDA_SUCCESS) pushed_ = true;
  }
  ~ContextScope() {
    if (pushed_) {
      CUcontext popped = nullptr;
      hook::real<hook::ApiId::k_cuCtxPopCurrent_4000>()(&popped);
    }
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace graft::graph
