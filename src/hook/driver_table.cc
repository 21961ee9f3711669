#include "hook/driver_api.h"

#include <algorithm>

namespace graft::hook {

// One page: the first table entries, the Runtime pointer and the active flag
// are on the per-op path (driver_api.h).
constinit HookGlobals g_hook;

int resolveDriverTable(PFN_cuGetProcAddress_v12000 gpa) {
  int missing = 0;
  for (size_t i = 0; i < kApiCount; ++i) {
    const ApiInfo& info = kApis[i];
    char name[128];
    const size_t n = info.base.copy(name, sizeof(name) - 1);
    name[n] = '\0';
    for (int perThread = 0; perThread < 2; ++perThread) {
      if (perThread && info.variant == Variant::NONE) continue;
      void* fn = nullptr;
      CUdriverProcAddressQueryResult status{};
      const cuuint64_t flags = perThread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                         : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
      // The default variant at exactly the entry's ABI version; the per-thread
      // variant at the newest version this entry covers (per-thread symbols
      // appeared later, e.g. cuLaunchKernel_ptsz at 7000).
      int newest = std::max(info.version, CUDA_VERSION);
      for (const ApiInfo& other : kApis)
        if (other.base == info.base && other.version > info.version)
          newest = std::min(newest, other.version - 1);
      const int version = perThread ? newest : info.version;
      if (gpa(name, &fn, version, flags, &status) == CUDA_SUCCESS && fn) {
        g_hook.realDriver[i][perThread].store(fn, std::memory_order_relaxed);
      } else if (!perThread) {
        ++missing;
      }
    }
  }
  return missing;
}

ApiId findByBaseName(std::string_view base, int version) {
  ApiId best = ApiId::Count;
  int bestVersion = -1;
  for (size_t i = 0; i < kApiCount; ++i) {
    if (kApis[i].base == base && kApis[i].version <= version && kApis[i].version > bestVersion) {
      best = ApiId(i);
      bestVersion = kApis[i].version;
    }
  }
  return best;
}

ApiId findBySymbol(std::string_view symbol, bool* perThread) {
  *perThread = false;
  for (size_t i = 0; i < kApiCount; ++i) {
    const ApiInfo& info = kApis[i];
    if (info.symbol == symbol) return ApiId(i);
    if (info.variant != Variant::NONE && symbol.size() == info.symbol.size() + 5 &&
        symbol.substr(0, info.symbol.size()) == info.symbol &&
        symbol.substr(info.symbol.size()) == (info.variant == Variant::PTSZ ? "_ptsz" : "_ptds")) {
      *perThread = true;
      return ApiId(i);
    }
  }
  return ApiId::Count;
}

}  // namespace graft::hook
