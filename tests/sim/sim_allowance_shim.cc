// sim_allowance_shim: a "driver" in front of the simulator (the program
// dlopens this library and asks it for cuGetProcAddress_v2; graft, preloaded,
// takes it as the driver) that models the dynamic shared memory allowance
// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) as the real driver
// documents it and the simulator does not:
//   - a library kernel's allowance is per device: cuKernelSetAttribute(attr,
//     v, kernel, dev) sets it for `dev` only, and cuKernelGetAttribute returns
//     that kernel-level value (cuda.h, cuKernelSetAttribute);
//   - a library kernel registered with shimRegisterFunction(K, ctx, F) has a
//     function F of its own in context ctx, distinct from K (as on the real
//     driver, one per context): cuKernelGetFunction(K) returns the current
//     context's (CUDA_ERROR_INVALID_CONTEXT with none current), launches of F run K, and
//     cuFunc{Get,Set}Attribute on K are refused (CUDA_ERROR_INVALID_HANDLE,
//     as the H100 answered: tests/gpu/driver_facts.cu). Other library kernels
//     keep the simulator's model, where a kernel is its own function;
//   - cuFuncSetAttribute on a kernel's function sets a
//     function-level value for the current context's device that overrides
//     the kernel-level one "irrespective of whether the call to
//     cuFuncSetAttribute() is made before or after" cuKernelSetAttribute
//     (cuda.h); cuFuncGetAttribute returns the effective value;
//   - an eager launch (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel)
//     asking for more than the effective value of the current context's device
//     is refused with CUDA_ERROR_INVALID_VALUE (passed to the simulator with an
//     impossible size, so a capture is invalidated as the simulator does);
//     graph launches are not checked (tests/gpu/driver_facts.cu).
// Not modelled: kernel node updates (cuGraphExecKernelNodeSetParams), which the
// real driver also checks; the test keeps launch arguments fixed so graft never
// updates a node. Everything else goes to the simulator unchanged.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

namespace {

using Gpa = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using DlsymFn = void* (*)(void*, const char*);
constexpr CUfunction_attribute kAttr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
constexpr int kDefault = 49152;
constexpr int kMax = 227 * 1024;  // the simulator's kMaxSharedMem
constexpr int kDevices = 8;

struct Allowance {
  int kernelLevel[kDevices];
  int functionLevel[kDevices];  // -1: not set through cuFuncSetAttribute
  Allowance() {
    for (int d = 0; d < kDevices; ++d) kernelLevel[d] = kDefault, functionLevel[d] = -1;
  }
  int effective(int dev) const { return functionLevel[dev] >= 0 ? functionLevel[dev] : kernelLevel[dev]; }
};

std::mutex g_mu;
std::map<uintptr_t, Allowance> g_table;
std::map<uintptr_t, uintptr_t> g_kernelOfFn;  // F -> K
std::map<uintptr_t, std::map<uintptr_t, uintptr_t>> g_fnOfKernel;  // K -> ctx -> F (a function per context, as the real driver)
decltype(&cuCtxGetCurrent) g_ctxGetCurrent = nullptr;
decltype(&cuKernelGetFunction) g_kernelGetFunction = nullptr;

Gpa g_simGpa = nullptr;
decltype(&cuFuncSetAttribute) g_funcSet = nullptr;
decltype(&cuFuncGetAttribute) g_funcGet = nullptr;
decltype(&cuKernelSetAttribute) g_kernelSet = nullptr;
decltype(&cuKernelGetAttribute) g_kernelGet = nullptr;
decltype(&cuCtxGetDevice) g_ctxGetDevice = nullptr;
decltype(&cuLaunchKernel) g_launch[2] = {};
decltype(&cuLaunchKernelEx) g_launchEx[2] = {};
decltype(&cuLaunchCooperativeKernel) g_launchCoop[2] = {};

template <class Fn>
void lookup(const char* name, int version, cuuint64_t flags, Fn* out) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult st{};
  if (g_simGpa(name, &p, version, flags, &st) == CUDA_SUCCESS && p) *out = reinterpret_cast<Fn>(p);
}

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The real dlsym (a preloaded interposer may answer dlsym for cu* names).
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
    lookup("cuCtxGetDevice", 2000, 0, &g_ctxGetDevice);
    lookup("cuKernelGetFunction", 12000, 0, &g_kernelGetFunction);
    lookup("cuCtxGetCurrent", 4000, 0, &g_ctxGetCurrent);
    for (int v = 0; v < 2; ++v) {
      const cuuint64_t flags = v ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
      lookup("cuLaunchKernel", 13000, flags, &g_launch[v]);
      lookup("cuLaunchKernelEx", 13000, flags, &g_launchEx[v]);
      lookup("cuLaunchCooperativeKernel", 13000, flags, &g_launchCoop[v]);
    }
  });
}

int currentDevice() {
  CUdevice d = 0;
  if (!g_ctxGetDevice || g_ctxGetDevice(&d) != CUDA_SUCCESS || d < 0 || d >= kDevices) return 0;
  return d;
}

// The kernel's entry; the first time, the simulator's own (single) allowance is
// opened wide so that only this model refuses.
Allowance& entryOf(const void* f) {
  if (auto k = g_kernelOfFn.find(reinterpret_cast<uintptr_t>(f)); k != g_kernelOfFn.end()) f = reinterpret_cast<const void*>(k->second);
  auto [it, fresh] = g_table.try_emplace(reinterpret_cast<uintptr_t>(f));
  if (fresh) g_funcSet(reinterpret_cast<CUfunction>(const_cast<void*>(f)), kAttr, kMax);
  return it->second;
}

bool refused(CUfunction f, unsigned sharedMem) {
  std::lock_guard<std::mutex> lock(g_mu);
  return sharedMem > unsigned(entryOf(f).effective(currentDevice()));
}

bool isKernelWithFn(CUfunction f) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_fnOfKernel.count(reinterpret_cast<uintptr_t>(f)) != 0;
}
CUresult CUDAAPI shimFuncSetAttribute(CUfunction f, CUfunction_attribute attrib, int value) {
  if (isKernelWithFn(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (attrib != kAttr) return g_funcSet(f, attrib, value);
  int unused = 0;
  if (const CUresult r = g_funcGet(&unused, attrib, f); r != CUDA_SUCCESS) return r;
  if (value < 0 || value > kMax) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  entryOf(f).functionLevel[currentDevice()] = value;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI shimFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction f) {
  if (isKernelWithFn(f)) return CUDA_ERROR_INVALID_HANDLE;
  const CUresult r = g_funcGet(pi, attrib, f);
  if (r != CUDA_SUCCESS || attrib != kAttr) return r;
  std::lock_guard<std::mutex> lock(g_mu);
  *pi = entryOf(f).effective(currentDevice());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI shimKernelSetAttribute(CUfunction_attribute attrib, int value, CUkernel k, CUdevice dev) {
  if (attrib != kAttr) return g_kernelSet(attrib, value, k, dev);
  int unused = 0;
  if (const CUresult r = g_kernelGet(&unused, attrib, k, dev); r != CUDA_SUCCESS) return r;
  if (value < 0 || value > kMax || dev < 0 || dev >= kDevices) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  entryOf(k).kernelLevel[dev] = value;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI shimKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel k, CUdevice dev) {
  const CUresult r = g_kernelGet(pi, attrib, k, dev);
  if (r != CUDA_SUCCESS || attrib != kAttr) return r;
  if (dev < 0 || dev >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  *pi = entryOf(k).kernelLevel[dev];  // the kernel-level value, as documented
  return CUDA_SUCCESS;
}

template <int V>
CUresult CUDAAPI shimLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned shmem, CUstream s, void** params, void** extra) {
  if (refused(f, shmem)) shmem = kMax + 1;  // the simulator refuses it (and ends a capture)
  return g_launch[V](f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

template <int V>
CUresult CUDAAPI shimLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  if (c && refused(f, c->sharedMemBytes)) {
    CUlaunchConfig copy = *c;
    copy.sharedMemBytes = kMax + 1;
    return g_launchEx[V](&copy, f, params, extra);
  }
  return g_launchEx[V](c, f, params, extra);
}

template <int V>
CUresult CUDAAPI shimLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                             unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params) {
  if (refused(f, shmem)) shmem = kMax + 1;
  return g_launchCoop[V](f, gx, gy, gz, bx, by, bz, shmem, s, params);
}

CUresult CUDAAPI shimKernelGetFunction(CUfunction* out, CUkernel k) {
  {
    CUcontext c = nullptr;
    if (g_ctxGetCurrent(&c) != CUDA_SUCCESS || !c) return CUDA_ERROR_INVALID_CONTEXT;  // as the real driver
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_fnOfKernel.find(reinterpret_cast<uintptr_t>(k));
    if (it != g_fnOfKernel.end()) {
      auto f = it->second.find(reinterpret_cast<uintptr_t>(c));
      if (f == it->second.end() || !out) return CUDA_ERROR_INVALID_HANDLE;
      *out = reinterpret_cast<CUfunction>(f->second);
      return CUDA_SUCCESS;
    }
  }
  return g_kernelGetFunction(out, k);
}
CUresult CUDAAPI shimGetProcAddressOld(const char* symbol, void** pfn, int version, cuuint64_t flags);

// (The exported cuGetProcAddress_v2 below calls this; its own address would
// be resolved to the simulator's export of the same name.)
CUresult CUDAAPI shimGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status) {
  init();
  if (!g_simGpa) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = g_simGpa(symbol, pfn, version, flags, status);
  if (r != CUDA_SUCCESS || !pfn || !*pfn || !symbol) return r;
  const int v = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 1 : 0;
  void* mine = nullptr;
  if (!std::strcmp(symbol, "cuGetProcAddress"))
    mine = version >= 12000 ? reinterpret_cast<void*>(&shimGetProcAddress)
                            : reinterpret_cast<void*>(&shimGetProcAddressOld);
  else if (!std::strcmp(symbol, "cuFuncSetAttribute")) mine = reinterpret_cast<void*>(&shimFuncSetAttribute);
  else if (!std::strcmp(symbol, "cuFuncGetAttribute")) mine = reinterpret_cast<void*>(&shimFuncGetAttribute);
  else if (!std::strcmp(symbol, "cuKernelSetAttribute")) mine = reinterpret_cast<void*>(&shimKernelSetAttribute);
  else if (!std::strcmp(symbol, "cuKernelGetAttribute")) mine = reinterpret_cast<void*>(&shimKernelGetAttribute);
  else if (!std::strcmp(symbol, "cuKernelGetFunction")) mine = reinterpret_cast<void*>(&shimKernelGetFunction);
  else if (!std::strcmp(symbol, "cuLaunchKernel"))
    mine = v ? reinterpret_cast<void*>(&shimLaunchKernel<1>) : reinterpret_cast<void*>(&shimLaunchKernel<0>);
  else if (!std::strcmp(symbol, "cuLaunchKernelEx"))
    mine = v ? reinterpret_cast<void*>(&shimLaunchKernelEx<1>) : reinterpret_cast<void*>(&shimLaunchKernelEx<0>);
  else if (!std::strcmp(symbol, "cuLaunchCooperativeKernel"))
    mine = v ? reinterpret_cast<void*>(&shimLaunchCooperativeKernel<1>)
             : reinterpret_cast<void*>(&shimLaunchCooperativeKernel<0>);
  if (mine) *pfn = mine;
  return r;
}

CUresult CUDAAPI shimGetProcAddressOld(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return shimGetProcAddress(symbol, pfn, version, flags, nullptr);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult* status) {
  return shimGetProcAddress(symbol, pfn, version, flags, status);
}

extern "C" __attribute__((visibility("default"))) void shimRegisterFunction(CUkernel k, CUcontext ctx, CUfunction f) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_kernelOfFn[reinterpret_cast<uintptr_t>(f)] = reinterpret_cast<uintptr_t>(k);
  g_fnOfKernel[reinterpret_cast<uintptr_t>(k)][reinterpret_cast<uintptr_t>(ctx)] = reinterpret_cast<uintptr_t>(f);
  g_funcSet(f, kAttr, kMax);
}
