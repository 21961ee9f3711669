// sim_early_lookups_lib.cc - a library (libsim_early_lookups.so) that finds the
// driver from its own constructor, as cuBLASLt does: the loader runs the
// constructors of a program's libraries before those of a preloaded library,
// so an interposer is reached before its own constructors ran. The driver is
// found the way the CUDA runtime does (dlopen, dlsym of cuGetProcAddress_v2 on
// the handle, the self-lookup, one lookup per function), and a few more
// lookups by name (dlsym on the handle, as cuBLASLt does for cuModuleUnload)
// and an exported symbol called directly.
#include <dlfcn.h>

#include <string>

#include "sim_early_lookups.h"

namespace {
simtest::Driver g_driver;
EarlyLookups g_early;
}  // namespace

__attribute__((constructor)) static void findDriverEarly() {
  std::string err;
  g_early.loaded = simtest::loadDriver(&g_driver, &err);
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  g_early.byName = h && dlsym(h, "cuModuleUnload") && dlsym(h, "cuLaunchKernel") && dlsym(h, "cuMemcpyAsync_ptsz");
  int version = 0;
  g_early.exported = cuDriverGetVersion(&version) == CUDA_SUCCESS && version > 0;
}

const EarlyLookups& earlyLookups() {
  g_early.driver = &g_driver;
  return g_early;
}
