// sim_cluster_shim (for sim_cluster_handles.cc):
// A "driver" in front of the simulator modelling a library kernel's functions
// as handles distinct from the CUkernel (as the real driver does), one per
// context, and CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH as cuda.h documents:
// a kernel-level value (cuKernelSetAttribute) and a function-level value per
// function (cuFuncSetAttribute) that overrides it. cuFunc{Get,Set}Attribute
// on a CUkernel handle: CUDA_ERROR_INVALID_HANDLE (H100 observation).
// Launches of K or F get the effective width of the current context's function;
// the shim writes it into the simulator's kernel object right before the
// launch (eager or captured), so graph nodes keep what they were made under.
#include <cuda.h>
#include <dlfcn.h>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

namespace {
using Gpa = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using DlsymFn = void* (*)(void*, const char*);
constexpr CUfunction_attribute kW = CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH;

struct Fn { uintptr_t kernel; int functionLevel = -1; };
struct Kern { int kernelLevel = 0; std::map<uintptr_t, uintptr_t> fnByCtx; };
std::mutex g_mu;
std::map<uintptr_t, Kern> g_kernels;
std::map<uintptr_t, Fn> g_fns;

Gpa g_simGpa = nullptr;
decltype(&cuFuncSetAttribute) g_funcSet = nullptr;
decltype(&cuFuncGetAttribute) g_funcGet = nullptr;
decltype(&cuKernelSetAttribute) g_kernelSet = nullptr;
decltype(&cuKernelGetAttribute) g_kernelGet = nullptr;
decltype(&cuKernelGetFunction) g_kernelGetFunction = nullptr;
decltype(&cuCtxGetCurrent) g_ctxGetCurrent = nullptr;
decltype(&cuLaunchKernel) g_launch[2] = {};
decltype(&cuLaunchKernelEx) g_launchEx[2] = {};

template <class F> void lookup(const char* name, int version, cuuint64_t flags, F* out) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult st{};
  if (g_simGpa(name, &p, version, flags, &st) == CUDA_SUCCESS && p) *out = reinterpret_cast<F>(p);
}
void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto realDlsym = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (!realDlsym) realDlsym = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    void* sim = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!realDlsym || !sim) return;
    g_simGpa = reinterpret_cast<Gpa>(realDlsym(sim, "cuGetProcAddress_v2"));
    if (!g_simGpa) return;
    lookup("cuFuncSetAttribute", 9000, 0, &g_funcSet);
    lookup("cuFuncGetAttribute", 2020, 0, &g_funcGet);
    lookup("cuKernelSetAttribute", 12000, 0, &g_kernelSet);
    lookup("cuKernelGetAttribute", 12000, 0, &g_kernelGet);
    lookup("cuKernelGetFunction", 12000, 0, &g_kernelGetFunction);
    lookup("cuCtxGetCurrent", 4000, 0, &g_ctxGetCurrent);
    for (int v = 0; v < 2; ++v) {
      const cuuint64_t flags = v ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
      lookup("cuLaunchKernel", 13000, flags, &g_launch[v]);
      lookup("cuLaunchKernelEx", 13000, flags, &g_launchEx[v]);
    }
  });
}
uintptr_t currentCtx() {
  CUcontext c = nullptr;
  if (g_ctxGetCurrent) g_ctxGetCurrent(&c);
  return reinterpret_cast<uintptr_t>(c);
}
// Under g_mu.
int effective(uintptr_t h) {
  if (auto f = g_fns.find(h); f != g_fns.end())
    return f->second.functionLevel >= 0 ? f->second.functionLevel : g_kernels[f->second.kernel].kernelLevel;
  if (auto k = g_kernels.find(h); k != g_kernels.end()) {
    auto fc = k->second.fnByCtx.find(currentCtx());
    if (fc != k->second.fnByCtx.end()) return effective(fc->second);
    return k->second.kernelLevel;
  }
  return -1;
}
void prepare(CUfunction f) {
  std::lock_guard<std::mutex> lock(g_mu);
  const int w = effective(reinterpret_cast<uintptr_t>(f));
  if (w >= 0) g_funcSet(f, kW, w);  // the simulator's own value, which its launch takes
}
CUresult CUDAAPI shimKernelGetFunction(CUfunction* out, CUkernel k) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_kernels.find(reinterpret_cast<uintptr_t>(k));
    if (it != g_kernels.end() && out) {
      auto fc = it->second.fnByCtx.find(currentCtx());
      if (fc != it->second.fnByCtx.end()) { *out = reinterpret_cast<CUfunction>(fc->second); return CUDA_SUCCESS; }
    }
  }
  return g_kernelGetFunction(out, k);
}
CUresult CUDAAPI shimFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto h = reinterpret_cast<uintptr_t>(f);
  if (g_kernels.count(h)) return CUDA_ERROR_INVALID_HANDLE;
  if (a == kW) {
    auto it = g_fns.find(h);
    if (it != g_fns.end()) { if (v < 0 || v > 8) return CUDA_ERROR_INVALID_VALUE; it->second.functionLevel = v; return CUDA_SUCCESS; }
  }
  return g_funcSet(f, a, v);
}
CUresult CUDAAPI shimFuncGetAttribute(int* pi, CUfunction_attribute a, CUfunction f) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto h = reinterpret_cast<uintptr_t>(f);
  if (g_kernels.count(h)) return CUDA_ERROR_INVALID_HANDLE;
  if (a == kW && g_fns.count(h) && pi) { *pi = effective(h); return CUDA_SUCCESS; }
  return g_funcGet(pi, a, f);
}
CUresult CUDAAPI shimKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_kernels.find(reinterpret_cast<uintptr_t>(k));
  if (a == kW && it != g_kernels.end()) { if (v < 0 || v > 8) return CUDA_ERROR_INVALID_VALUE; it->second.kernelLevel = v; return CUDA_SUCCESS; }
  return g_kernelSet(a, v, k, d);
}
CUresult CUDAAPI shimKernelGetAttribute(int* pi, CUfunction_attribute a, CUkernel k, CUdevice d) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_kernels.find(reinterpret_cast<uintptr_t>(k));
  if (a == kW && it != g_kernels.end() && pi) { *pi = it->second.kernelLevel; return CUDA_SUCCESS; }
  return g_kernelGet(pi, a, k, d);
}
template <int V>
CUresult CUDAAPI shimLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned shmem, CUstream s, void** params, void** extra) {
  prepare(f);
  return g_launch[V](f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}
template <int V>
CUresult CUDAAPI shimLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  prepare(f);
  return g_launchEx[V](c, f, params, extra);
}
CUresult CUDAAPI shimGetProcAddressOld(const char* symbol, void** pfn, int version, cuuint64_t flags);
CUresult CUDAAPI shimGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status) {
  init();
  if (!g_simGpa) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = g_simGpa(symbol, pfn, version, flags, status);
  if (r != CUDA_SUCCESS || !pfn || !*pfn || !symbol) return r;
  const int v = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 1 : 0;
  void* mine = nullptr;
  if (!std::strcmp(symbol, "cuGetProcAddress"))
    mine = version >= 12000 ? reinterpret_cast<void*>(&shimGetProcAddress) : reinterpret_cast<void*>(&shimGetProcAddressOld);
  else if (!std::strcmp(symbol, "cuFuncSetAttribute")) mine = reinterpret_cast<void*>(&shimFuncSetAttribute);
  else if (!std::strcmp(symbol, "cuFuncGetAttribute")) mine = reinterpret_cast<void*>(&shimFuncGetAttribute);
  else if (!std::strcmp(symbol, "cuKernelSetAttribute")) mine = reinterpret_cast<void*>(&shimKernelSetAttribute);
  else if (!std::strcmp(symbol, "cuKernelGetAttribute")) mine = reinterpret_cast<void*>(&shimKernelGetAttribute);
  else if (!std::strcmp(symbol, "cuKernelGetFunction")) mine = reinterpret_cast<void*>(&shimKernelGetFunction);
  else if (!std::strcmp(symbol, "cuLaunchKernel"))
    mine = v ? reinterpret_cast<void*>(&shimLaunchKernel<1>) : reinterpret_cast<void*>(&shimLaunchKernel<0>);
  else if (!std::strcmp(symbol, "cuLaunchKernelEx"))
    mine = v ? reinterpret_cast<void*>(&shimLaunchKernelEx<1>) : reinterpret_cast<void*>(&shimLaunchKernelEx<0>);
  if (mine) *pfn = mine;
  return r;
}
CUresult CUDAAPI shimGetProcAddressOld(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return shimGetProcAddress(symbol, pfn, version, flags, nullptr);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  return shimGetProcAddress(symbol, pfn, version, flags, status);
}
// The program registers F as K's function in context ctx.
extern "C" __attribute__((visibility("default"))) void shimRegisterFunction(CUkernel k, CUcontext ctx, CUfunction f) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_kernels[reinterpret_cast<uintptr_t>(k)].fnByCtx[reinterpret_cast<uintptr_t>(ctx)] = reinterpret_cast<uintptr_t>(f);
  g_fns[reinterpret_cast<uintptr_t>(f)].kernel = reinterpret_cast<uintptr_t>(k);
}
