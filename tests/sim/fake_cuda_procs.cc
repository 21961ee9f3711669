// fake_cuda_procs.cc - cuGetProcAddress / cuGetProcAddress_v2 over the one table
// in fake_cuda_procs.def.
//
// Invariants:
//  - The name -> pointer mapping exists only in fake_cuda_procs.def.
//  - Pointers are the simulator's own functions (the library is linked
//    -Bsymbolic), never an interposer's export of the same name.
//  - Lookups take no scheduler steps and never fail for want of a context.
#include <cstring>
#include <string>
#include <unordered_map>

#include "fake_cuda_internal.h"

namespace sim {
namespace {

struct ProcRow {
  int version;
  void* fn;
  void* ptFn;  // null: no per-thread variant
};

const std::unordered_map<std::string, std::vector<ProcRow>>& procTable() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, std::vector<ProcRow>>();
#define SIM_PROC(NAME, VERSION, FN) (*t)[NAME].push_back({VERSION, reinterpret_cast<void*>(&FN), nullptr});
#define SIM_PROC_PT(NAME, VERSION, FN, PT_FN) \
  (*t)[NAME].push_back({VERSION, reinterpret_cast<void*>(&FN), reinterpret_cast<void*>(&PT_FN)});
#include "fake_cuda_procs.def"
#undef SIM_PROC
#undef SIM_PROC_PT
    return t;
  }();
  return *table;
}

CUresult lookup(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~cuuint64_t{CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pfn = nullptr;
  const auto& table = procTable();
  auto it = table.find(symbol);
  if (it == table.end()) {
    if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  const ProcRow* best = nullptr;
  for (const ProcRow& r : it->second) {
    if (r.version <= cudaVersion && (!best || r.version > best->version)) best = &r;
  }
  if (!best) {
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  bool pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  *pfn = pt && best->ptFn ? best->ptFn : best->fn;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace sim

extern "C" {

CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* status) {
  SIM_ENTRY("cuGetProcAddress_v2", sim::kNoInit | sim::kNoSticky);
  return sim::lookup(symbol, pfn, cudaVersion, flags, status);
}

CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  SIM_ENTRY("cuGetProcAddress", sim::kNoInit | sim::kNoSticky);
  return sim::lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"
