// sim_driver_loader.cc - see sim_driver_loader.h.
#include "sim_driver_loader.h"

#include "sim_api.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace simtest {

namespace {

using GetProcFn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

template <class Fn>
bool fetch(GetProcFn getProc, const char* name, int version, cuuint64_t flags, Fn* out, std::string* error) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = getProc(name, &p, version, flags, &status);
  if (r != CUDA_SUCCESS || !p || status != CU_GET_PROC_ADDRESS_SUCCESS) {
    *error = std::string("cuGetProcAddress(\"") + name + "\", " + std::to_string(version) + ", flags " +
             std::to_string(flags) + ") failed: result " + std::to_string(r) + ", status " + std::to_string(status);
    return false;
  }
  *out = reinterpret_cast<Fn>(p);
  return true;
}

}  // namespace

bool loadDriver(Driver* out, std::string* error, const char* library) {
  out->handle = dlopen(library, RTLD_NOW | RTLD_GLOBAL);
  if (!out->handle) {
    *error = std::string("dlopen(") + library + "): " + dlerror();
    return false;
  }
  auto entry = reinterpret_cast<GetProcFn>(dlsym(out->handle, "cuGetProcAddress_v2"));
  if (!entry) {
    *error = "dlsym(cuGetProcAddress_v2) failed";
    return false;
  }
  // Self-lookups, as cudart does: from here on only the 12000 result is used.
  void* old = nullptr;
  if (entry("cuGetProcAddress", &old, 11030, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) != CUDA_SUCCESS || !old) {
    *error = "self-lookup cuGetProcAddress(\"cuGetProcAddress\", 11030) failed";
    return false;
  }
  if (!fetch(entry, "cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT, &out->getProcAddress, error)) {
    return false;
  }
  GetProcFn getProc = out->getProcAddress;
#define SIM_DRIVER_LOAD(name, version)                                                                               \
  if (!fetch(getProc, #name, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &out->plain.name, error) ||                 \
      !fetch(getProc, #name, version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &out->perThread.name, error)) { \
    return false;                                                                                                    \
  }
  SIM_DRIVER_FUNCTIONS(SIM_DRIVER_LOAD)
#undef SIM_DRIVER_LOAD
  return true;
}

bool openPrimaryContext(const DriverApi& api, CUcontext* ctx) {
  CUdevice dev = 0;
  return api.cuInit(0) == CUDA_SUCCESS && api.cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
         api.cuDevicePrimaryCtxRetain(ctx, dev) == CUDA_SUCCESS &&
         api.cuCtxSetCurrent(*ctx) == CUDA_SUCCESS;
}

CUfunction libraryKernel3(const char* name) {
  const size_t sizes[] = {8, 8, 8};
  return simKernelCreate(name, SIM_KERNEL_LIBRARY, 3, sizes, nullptr);
}

CUdeviceptr zeroedBuffer(const DriverApi& api, size_t bytes) {
  CUdeviceptr p = 0;
  if (api.cuMemAlloc(&p, bytes) != CUDA_SUCCESS || api.cuMemsetD8(p, 0, bytes) != CUDA_SUCCESS) return 0;
  return p;
}

CUresult launchAdd(const DriverApi& api, CUfunction kernel, CUdeviceptr to, CUdeviceptr from, uint64_t add,
                   CUstream stream) {
  void* args[] = {&to, &from, &add};
  return api.cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr);
}

namespace {
const char* g_program = "sim";
int g_failedCalls = 0;
}  // namespace

void noteCall(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS && g_failedCalls++ < 5) std::fprintf(stderr, "%s: %s failed: %d\n", g_program, call, int(r));
}

int failedCalls() { return g_failedCalls; }

bool tooFewFromGraphs(const char* program, const SimCounters& c, uint64_t percent) {
  if (c.effectsGraph * 100 >= percent * (c.effectsGraph + c.effectsEager)) return false;
  std::printf("%s: fewer than %llu %% of the effects came from graphs\n", program, (unsigned long long)percent);
  return true;
}

bool lookupProc(const Driver& drv, const char* name, void** out) {
  CUdriverProcAddressQueryResult status;
  *out = nullptr;
  if (drv.getProcAddress(name, out, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) == CUDA_SUCCESS && *out)
    return true;
  std::fprintf(stderr, "%s: cuGetProcAddress(%s) failed\n", g_program, name);
  return false;
}

bool loadCodeApi(const Driver& drv, CodeApi* out) {
  return lookupProc(drv, "cuModuleLoadData", &out->moduleLoadData) &&
         lookupProc(drv, "cuModuleGetFunction", &out->moduleGetFunction) &&
         lookupProc(drv, "cuModuleUnload", &out->moduleUnload) &&
         lookupProc(drv, "cuLibraryLoadData", &out->libraryLoadData) &&
         lookupProc(drv, "cuLibraryGetKernel", &out->libraryGetKernel) &&
         lookupProc(drv, "cuLibraryUnload", &out->libraryUnload);
}

int startProgram(const char* program, Driver* drv, CUcontext* ctx) {
  g_program = program;
  std::string err;
  if (!loadDriver(drv, &err)) {
    std::fprintf(stderr, "%s: %s\n", program, err.c_str());
    return 2;
  }
  if (ctx && !openPrimaryContext(drv->plain, ctx)) {
    std::fprintf(stderr, "%s: no context\n", program);
    return 2;
  }
  return 0;
}

int startTraceProgram(const char* program, int argc, char** argv, TraceProgramArgs* args, Driver* drv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--out")) args->outPath = argv[i + 1];
    if (!std::strcmp(argv[i], "--seed")) args->seed = std::strtoull(argv[i + 1], nullptr, 0);
  }
  if (!args->outPath) {
    std::fprintf(stderr, "usage: %s --out FILE [--seed S]\n", program);
    return 2;
  }
  return startProgram(program, drv, nullptr);
}

void printEffectsSince(const char* program, const SimCounters& before) {
  SimCounters after{};
  simCounters(&after);
  const uint64_t graph = after.effectsGraph - before.effectsGraph;
  const uint64_t eager = after.effectsEager - before.effectsEager;
  std::printf("%s: effects from graphs %llu, eager %llu (%.1f %%), graph launches %llu\n", program,
              (unsigned long long)graph, (unsigned long long)eager,
              graph + eager ? 100.0 * double(graph) / double(graph + eager) : 0.0,
              (unsigned long long)(after.graphLaunches - before.graphLaunches));
}

CUresult loadModuleKernel(const CodeApi& code, CUmodule* m, CUfunction* f, const char* kernel) {
  if (*m) {
    if (CUresult r = code.moduleUnload(*m); r != CUDA_SUCCESS) return r;
    *m = nullptr;
  }
  const std::string image = std::string("sim-image: ") + kernel + "(8,8,8)";
  if (CUresult r = code.moduleLoadData(m, image.c_str()); r != CUDA_SUCCESS) return r;
  return code.moduleGetFunction(f, *m, kernel);
}

}  // namespace simtest
