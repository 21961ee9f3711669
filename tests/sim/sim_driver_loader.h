// sim_driver_loader.h - obtains the CUDA driver the way the CUDA runtime does.
//
// Invariants:
//  - The library is reached only through dlopen("libcuda.so.1") and
//    dlsym(handle, "cuGetProcAddress_v2"); that pointer is used once, for the
//    self-lookup cuGetProcAddress("cuGetProcAddress", 12000), and every other
//    function comes from the pointer the self-lookup returned.
//  - Each function is requested twice, like cudart does: `plain` with
//    CU_GET_PROC_ADDRESS_LEGACY_STREAM (NULL stream = legacy stream) and `perThread`
//    with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (NULL = per-thread stream;
//    functions without such a variant get the same pointer in both).
//  - Members are named like cuda.h's API names, which cuda.h maps to the versioned
//    symbols (drv.cuMemFree is drv.cuMemFree_v2); the requested version is the one
//    whose ABI matches that prototype.
#pragma once

#include <cuda.h>
#include <cstdint>

#include <string>

#include "sim_api.h"

namespace simtest {

// X(name as cuGetProcAddress knows it, CUDA version to request)
#define SIM_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit, 13000) X(cuDriverGetVersion, 13000) X(cuDeviceGet, 13000) X(cuDeviceGetCount, 13000)  \
  X(cuDeviceGetName, 13000) X(cuDeviceGetAttribute, 13000) X(cuDevicePrimaryCtxRetain, 13000)     \
  X(cuDevicePrimaryCtxRelease, 13000) X(cuCtxSetCurrent, 13000) X(cuCtxGetCurrent, 13000)         \
  X(cuCtxSynchronize, 12080) X(cuCtxRecordEvent, 13000) X(cuGetErrorName, 13000)                 \
  X(cuGetErrorString, 13000) X(cuCtxSetLimit, 13000) X(cuCtxGetLimit, 13000)                      \
  X(cuFuncSetAttribute, 13000) X(cuKernelSetAttribute, 13000) X(cuFuncSetCacheConfig, 13000)     \
  X(cuKernelSetCacheConfig, 13000) X(cuCtxSetCacheConfig, 13000)                                  \
  X(cuKernelGetParamInfo, 13000) X(cuFuncGetParamInfo, 13000) X(cuKernelGetName, 13000)           \
  X(cuFuncGetName, 13000) X(cuLaunchKernel, 13000) X(cuLaunchKernelEx, 13000)                     \
  X(cuLaunchCooperativeKernel, 13000) X(cuLaunchHostFunc, 13000) X(cuMemAlloc, 13000)             \
  X(cuMemFree, 13000) X(cuMemAllocAsync, 13000) X(cuMemFreeAsync, 13000) X(cuMemAllocFromPoolAsync, 13000) \
  X(cuDeviceGetDefaultMemPool, 13000) X(cuMemAllocHost, 13000) \
  X(cuMemHostAlloc, 13000) X(cuMemFreeHost, 13000) X(cuMemHostRegister, 13000)                    \
  X(cuMemHostUnregister, 13000) X(cuPointerGetAttribute, 13000) X(cuMemGetAddressRange, 13000)    \
  X(cuMemcpyAsync, 13000) X(cuMemcpyHtoDAsync, 13000) X(cuMemcpyDtoHAsync, 13000)                 \
  X(cuMemcpyDtoDAsync, 13000) X(cuMemcpy2DAsync, 13000) X(cuMemcpy, 13000) X(cuMemcpyHtoD, 13000) \
  X(cuMemcpyDtoH, 13000) X(cuMemcpyDtoD, 13000) X(cuMemsetD8Async, 13000)                         \
  X(cuMemsetD16Async, 13000) X(cuMemsetD32Async, 13000) X(cuMemsetD2D8Async, 13000)               \
  X(cuMemsetD2D32Async, 13000) X(cuMemsetD8, 13000) X(cuMemsetD16, 13000) X(cuMemsetD32, 13000)   \
  X(cuStreamCreate, 13000) X(cuStreamCreateWithPriority, 13000) X(cuStreamDestroy, 13000)         \
  X(cuStreamGetFlags, 13000) X(cuStreamGetCtx, 12000) X(cuStreamGetId, 13000)                     \
  X(cuStreamSynchronize, 13000) X(cuStreamQuery, 13000) X(cuStreamWaitEvent, 13000)               \
  X(cuStreamIsCapturing, 13000) X(cuStreamGetCaptureInfo, 13000) X(cuStreamBeginCapture, 13000)   \
  X(cuStreamEndCapture, 13000) X(cuThreadExchangeStreamCaptureMode, 13000)                        \
  X(cuEventCreate, 13000) X(cuEventDestroy, 13000) X(cuEventRecord, 13000)                        \
  X(cuEventRecordWithFlags, 13000) X(cuEventQuery, 13000) X(cuEventSynchronize, 13000)            \
  X(cuEventElapsedTime, 13000) X(cuGraphCreate, 13000) X(cuGraphDestroy, 13000)                   \
  X(cuGraphInstantiateWithFlags, 13000) X(cuGraphExecDestroy, 13000) X(cuGraphLaunch, 13000)      \
  X(cuGraphUpload, 13000) X(cuGraphGetNodes, 13000) X(cuGraphNodeGetType, 13000)                  \
  X(cuGraphKernelNodeGetParams, 13000) X(cuGraphMemcpyNodeGetParams, 13000)                       \
  X(cuGraphMemsetNodeGetParams, 13000) X(cuGraphExecKernelNodeSetParams, 13000)                   \
  X(cuGraphExecMemcpyNodeSetParams, 13000) X(cuGraphExecMemsetNodeSetParams, 13000)               \
  X(cuGraphKernelNodeSetAttribute, 13000) X(cuGraphKernelNodeGetAttribute, 13000)

struct DriverApi {
#define SIM_DRIVER_MEMBER(name, version) decltype(&::name) name = nullptr;
  SIM_DRIVER_FUNCTIONS(SIM_DRIVER_MEMBER)
#undef SIM_DRIVER_MEMBER
};

struct Driver {
  DriverApi plain;      // NULL stream = legacy default stream
  DriverApi perThread;  // NULL stream = the calling thread's per-thread stream
  void* handle = nullptr;
  // The pointer returned by the self-lookup of "cuGetProcAddress" at 12000.
  CUresult (*getProcAddress)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*) = nullptr;
};

// Loads libcuda.so.1 (or `library`, a driver shim in front of the simulator)
// and fills `out`; on failure returns false and sets *error.
bool loadDriver(Driver* out, std::string* error, const char* library = "libcuda.so.1");

// cuInit, device 0's primary context made current. False on any failure.
bool openPrimaryContext(const DriverApi& api, CUcontext* ctx);

// The start shared by the sim test programs: loads the driver and, when `ctx`
// is not null, makes device 0's primary context current. Returns 0, or the
// exit code 2 after printing why (prefixed with `program`).
int startProgram(const char* program, Driver* drv, CUcontext* ctx);

// A SIM_KERNEL_LIBRARY kernel of three 8-byte parameters; the simulator gives
// it the behaviour its name asks for (sim_add*, spin_work, timed_work, ...).
CUfunction libraryKernel3(const char* name);

// `bytes` of device memory, zeroed (cuMemAlloc and cuMemsetD8; 0 on failure).
CUdeviceptr zeroedBuffer(const DriverApi& api, size_t bytes = 64);

// SIM_CHECK(call): counts the call if it failed, printing the first five
// failures (prefixed with the name given to startProgram); failedCalls()
// says how many failed.
void noteCall(CUresult r, const char* call);
int failedCalls();

// True, after printing why (prefixed with `program`), when fewer than
// `percent` % of the effects counted in `c` (SimCounters) came from graphs.
bool tooFewFromGraphs(const char* program, const SimCounters& c, uint64_t percent);
#define SIM_CHECK(call) simtest::noteCall((call), #call)

// One single-thread launch of a libraryKernel3 named sim_add*:
// *to = *from + add, on `stream`.
CUresult launchAdd(const DriverApi& api, CUfunction kernel, CUdeviceptr to, CUdeviceptr from, uint64_t add,
                   CUstream stream);

// One driver entry point by name (cuGetProcAddress at version 13000, legacy
// default stream); false, after printing why, when the driver has none.
bool lookupProc(const Driver& drv, const char* name, void** out);
template <typename F>
bool lookupProc(const Driver& drv, const char* name, F* out) {
  void* p = nullptr;
  if (!lookupProc(drv, name, &p)) return false;
  *out = reinterpret_cast<F>(p);
  return true;
}

// The entry points that load and unload code, for the programs that do.
struct CodeApi {
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuLibraryLoadData) libraryLoadData = nullptr;
  decltype(&::cuLibraryGetKernel) libraryGetKernel = nullptr;
  decltype(&::cuLibraryUnload) libraryUnload = nullptr;
};
bool loadCodeApi(const Driver& drv, CodeApi* out);
// Loads a module of the one sim_add-like kernel `kernel` (three 8-byte
// parameters) into *m, its function into *f; unloads *m first when set (the
// same code loaded again).
CUresult loadModuleKernel(const CodeApi& code, CUmodule* m, CUfunction* f, const char* kernel);

// Prints "PROGRAM: effects from graphs G, eager E (P %), graph launches L",
// counted since `before` (simCounters).
void printEffectsSince(const char* program, const SimCounters& before);

// The start shared by the trace-comparison programs (compare_trace.py runs
// them): parses `--out FILE [--seed S]` and loads the driver. Returns 0, or
// the exit code 2 after printing why (prefixed with `program`).
struct TraceProgramArgs {
  const char* outPath = nullptr;
  uint64_t seed = 7;
};
int startTraceProgram(const char* program, int argc, char** argv, TraceProgramArgs* args, Driver* drv);

}  // namespace simtest
