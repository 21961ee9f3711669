// A program that finds the driver through dlsym(RTLD_DEFAULT, ...) after
// loading libcuda globally: under LD_PRELOAD the lookup reaches graft's own
// exports first. graft must still find the real driver (not itself), and the
// program must run. Exit 0 on success.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdio>

int main() {
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
    std::printf("rtld_default: %s\n", dlerror());
    return 2;
  }
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
  auto init = reinterpret_cast<PFN_cuInit_v2000>(dlsym(RTLD_DEFAULT, "cuInit"));
  auto sync = reinterpret_cast<PFN_cuCtxSynchronize_v2000>(dlsym(RTLD_DEFAULT, "cuCtxSynchronize"));
  if (!gpa || !init || !sync) {
    std::printf("rtld_default: lookups failed\n");
    return 1;
  }
  PFN_cuDeviceGet_v2000 deviceGet = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 retain = nullptr;
  PFN_cuCtxSetCurrent_v4000 setCurrent = nullptr;
  PFN_cuStreamSynchronize_v2000 streamSync = nullptr;
  gpa("cuDeviceGet", reinterpret_cast<void**>(&deviceGet), 13000, 0, nullptr);
  gpa("cuDevicePrimaryCtxRetain", reinterpret_cast<void**>(&retain), 13000, 0, nullptr);
  gpa("cuCtxSetCurrent", reinterpret_cast<void**>(&setCurrent), 13000, 0, nullptr);
  gpa("cuStreamSynchronize", reinterpret_cast<void**>(&streamSync), 13000, 0, nullptr);
  CUdevice dev;
  CUcontext ctx;
  if (init(0) || deviceGet(&dev, 0) || retain(&ctx, dev) || setCurrent(ctx) || streamSync(nullptr) ||
      sync()) {
    std::printf("rtld_default: a driver call failed\n");
    return 1;
  }
  std::printf("rtld_default: ok\n");
  return 0;
}
