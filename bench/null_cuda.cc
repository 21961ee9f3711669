// A "null" libcuda.so.1 for measuring graft's own CPU cost per intercepted op:
// every driver function graft and the op-cost benchmark use exists and returns
// immediately, so the time left is graft's. Not a simulator (see tests/sim for
// that): it executes nothing and checks nothing.
#include <cuda.h>

#include <cstring>
#include <string_view>

namespace {

CUresult ok() { return CUDA_SUCCESS; }

// Each launch adds a node to a capture (graft checks that a captured op added
// one): the node a capture ends on is a new handle after every launch.
uintptr_t g_lastNode = 0x8000;
CUresult launchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, CUstream, void**, void**) {
  g_lastNode += 16;
  return CUDA_SUCCESS;
}
CUresult launchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**) {
  g_lastNode += 16;
  return CUDA_SUCCESS;
}
// Four parameters; a handle with bit 0x20 set (op_cost --big) has a 4 KiB
// last parameter, like PyTorch's multi-tensor-apply kernels.
CUresult kernelGetParamInfo(CUkernel k, size_t index, size_t* offset, size_t* size) {
  if (index >= 4) return CUDA_ERROR_INVALID_VALUE;
  *offset = index * 8;
  *size = index == 3 && (reinterpret_cast<uintptr_t>(k) & 0x20) ? 4096 : 8;
  return CUDA_SUCCESS;
}
CUresult kernelGetName(const char** name, CUkernel) {
  *name = "null_kernel";
  return CUDA_SUCCESS;
}
CUresult ctxGetCurrent(CUcontext* c) {
  *c = reinterpret_cast<CUcontext>(0x1000);
  return CUDA_SUCCESS;
}
CUresult streamSync(CUstream) { return CUDA_SUCCESS; }
CUresult streamCreate(CUstream* s, unsigned) {
  static uintptr_t next = 0x5000;
  *s = reinterpret_cast<CUstream>(next += 16);
  return CUDA_SUCCESS;
}
CUresult eventCreate(CUevent* e, unsigned) {
  static uintptr_t next = 0x9000;
  *e = reinterpret_cast<CUevent>(next += 16);
  return CUDA_SUCCESS;
}
CUresult eventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult streamWaitEvent(CUstream, CUevent, unsigned) { return CUDA_SUCCESS; }
CUresult beginCapture(CUstream, CUstreamCaptureMode) { return CUDA_SUCCESS; }
CUresult endCapture(CUstream, CUgraph* g) {
  *g = reinterpret_cast<CUgraph>(0x7000);
  return CUDA_SUCCESS;
}
CUgraphNode g_node;
CUresult captureInfo(CUstream, CUstreamCaptureStatus* st, cuuint64_t*, CUgraph*,
                     const CUgraphNode** deps, const CUgraphEdgeData**, size_t* n) {
  *st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  g_node = reinterpret_cast<CUgraphNode>(g_lastNode);
  if (deps) *deps = &g_node;
  if (n) *n = 1;
  return CUDA_SUCCESS;
}
CUresult instantiate(CUgraphExec* e, CUgraph, unsigned long long) {
  *e = reinterpret_cast<CUgraphExec>(0x7100);
  return CUDA_SUCCESS;
}
CUresult kernelNodeGetParams(CUgraphNode, CUDA_KERNEL_NODE_PARAMS* p) {
  std::memset(p, 0, sizeof(*p));
  return CUDA_SUCCESS;
}
CUresult execKernelNodeSetParams(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) { return CUDA_SUCCESS; }
CUresult graphLaunch(CUgraphExec, CUstream) { return CUDA_SUCCESS; }
CUresult streamGetFlags(CUstream, unsigned* f) {
  *f = CU_STREAM_NON_BLOCKING;
  return CUDA_SUCCESS;
}

struct Entry {
  const char* name;
  void* fn;
};
const Entry kEntries[] = {
    {"cuLaunchKernel", reinterpret_cast<void*>(&launchKernel)},
    {"cuLaunchKernelEx", reinterpret_cast<void*>(&launchKernelEx)},
    {"cuKernelGetParamInfo", reinterpret_cast<void*>(&kernelGetParamInfo)},
    {"cuKernelGetName", reinterpret_cast<void*>(&kernelGetName)},
    {"cuCtxGetCurrent", reinterpret_cast<void*>(&ctxGetCurrent)},
    {"cuStreamSynchronize", reinterpret_cast<void*>(&streamSync)},
    {"cuStreamCreate", reinterpret_cast<void*>(&streamCreate)},
    {"cuEventCreate", reinterpret_cast<void*>(&eventCreate)},
    {"cuEventRecord", reinterpret_cast<void*>(&eventRecord)},
    {"cuStreamWaitEvent", reinterpret_cast<void*>(&streamWaitEvent)},
    {"cuStreamBeginCapture", reinterpret_cast<void*>(&beginCapture)},
    {"cuStreamEndCapture", reinterpret_cast<void*>(&endCapture)},
    {"cuStreamGetCaptureInfo", reinterpret_cast<void*>(&captureInfo)},
    {"cuGraphInstantiateWithFlags", reinterpret_cast<void*>(&instantiate)},
    {"cuGraphKernelNodeGetParams", reinterpret_cast<void*>(&kernelNodeGetParams)},
    {"cuGraphExecKernelNodeSetParams", reinterpret_cast<void*>(&execKernelNodeSetParams)},
    {"cuGraphLaunch", reinterpret_cast<void*>(&graphLaunch)},
    {"cuStreamGetFlags", reinterpret_cast<void*>(&streamGetFlags)},
};

}  // namespace

extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.name, symbol) == 0) {
      *pfn = e.fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  }
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    *pfn = reinterpret_cast<void*>(&cuGetProcAddress_v2);
    return CUDA_SUCCESS;
  }
  // Everything else: a function that succeeds and does nothing.
  *pfn = reinterpret_cast<void*>(&ok);
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
