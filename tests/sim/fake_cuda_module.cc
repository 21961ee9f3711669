// fake_cuda_module.cc - simulated modules and libraries: cuModuleLoadData(Ex),
// cuModuleGetFunction, cuModuleUnload, cuLibraryLoadData, cuLibraryGetKernel,
// cuLibraryUnload, and which code a kernel came from: cuFuncGetModule,
// cuKernelGetLibrary, cuLibraryGetModule.
//
// An "image" is NUL-terminated text naming the kernels it contains and their
// parameter sizes in bytes (natural alignment, as simKernelCreate):
//     "sim-image: sim_add_a(8,8,8,8); scale_a(8,4,8)"
// PTX text is read for its entries and their parameter sizes (graft loads its
// copy kernels so). Anything else is CUDA_ERROR_INVALID_IMAGE. Kernels named
// sim_add* / sim_mix* have the memory effect sim_api.h describes, graft_copy
// and graft_memset that of the copy or memset they stand for.
//
// Invariants:
//  - A module's kernels are CUfunctions (SIM_KERNEL_FUNCTION family), a library's
//    are CUkernels (SIM_KERNEL_LIBRARY); both are created at load time, in image
//    order, and cuModuleGetFunction / cuLibraryGetKernel return the same handle
//    for the same name until the unload.
//  - Kernel handles come from one slot arena with a lowest-free-first allocator:
//    after an unload the next load reuses the freed handle values, so one handle
//    value can name kernels with different names, layouts and effects over time,
//    as the real driver may.
//  - Unload waits until every stream of every context is idle (simplification of
//    "work using the module's kernels"), then unmaps the handles: a launch or
//    attribute query through them fails with CUDA_ERROR_INVALID_HANDLE (until the
//    value is reused), and an exec or graph holding an unloaded kernel fails to
//    launch / instantiate with CUDA_ERROR_INVALID_HANDLE. The KernelObj itself
//    stays allocated (graph nodes and trace entries point at it).
//  - A module belongs to the context current at its load: the end of that
//    context (the last cuDevicePrimaryCtxRelease) unloads it, as the driver
//    does. Libraries are context-independent and stay. Simplification: any
//    context may launch a module's functions.
//  - A library's "module" (cuLibraryGetModule) is the library's handle; cuFuncGetModule refuses library kernels' handles (which
//    the simulator also uses as their functions). Kernels made by simKernelCreate belong to one
//    built-in module (functions) or one built-in library (library kernels),
//    which are never unloaded.
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "fake_cuda_internal.h"

namespace sim {
namespace {

constexpr size_t kSlots = 4096;
alignas(64) std::array<std::array<uint8_t, 64>, kSlots> kernelSlots;  // handle values for kernels
alignas(64) std::array<std::array<uint8_t, 64>, 1024> moduleSlots;   // handle values for modules/libraries

struct ModuleObj {
  bool library = false;
  Context* ctx = nullptr;  // a module's context (libraries: null)
  std::vector<std::pair<std::string, void*>> kernels;  // name -> handle, image order
};

struct ModuleState {
  std::set<size_t> freeKernelSlots;  // below nextKernelSlot
  size_t nextKernelSlot = 0;
  std::set<size_t> freeModuleSlots;
  size_t nextModuleSlot = 0;
  std::unordered_map<void*, ModuleObj> modules;   // live modules and libraries
  std::unordered_map<void*, void*> owner;         // kernel handle -> its live module or library
  std::vector<std::unique_ptr<KernelObj>> retired;  // unloaded kernels, kept allocated
};

ModuleState& ms() {
  static ModuleState* s = new ModuleState();
  return *s;
}

bool takeSlot(std::set<size_t>& freeSlots, size_t& next, size_t limit, size_t* out) {
  if (!freeSlots.empty()) {
    *out = *freeSlots.begin();
    freeSlots.erase(freeSlots.begin());
    return true;
  }
  if (next >= limit) return false;
  *out = next++;
  return true;
}

size_t kernelSlotOf(void* h) {
  return static_cast<size_t>(static_cast<uint8_t*>(h) - kernelSlots[0].data()) / kernelSlots[0].size();
}
size_t moduleSlotOf(void* h) {
  return static_cast<size_t>(static_cast<uint8_t*>(h) - moduleSlots[0].data()) / moduleSlots[0].size();
}

struct ParsedKernel {
  std::string name;
  std::vector<size_t> sizes;
};

// PTX text (graft's copy kernels): each ".entry NAME(" and the sizes of its
// ".param .<type><bits>" declarations, up to the closing parenthesis.
bool parsePtx(const char* p, std::vector<ParsedKernel>* out) {
  static const char kEntry[] = ".entry ";
  for (const char* e = std::strstr(p, kEntry); e; e = std::strstr(e, kEntry)) {
    e += sizeof kEntry - 1;
    ParsedKernel k;
    while (*e && (std::isalnum(static_cast<unsigned char>(*e)) || *e == '_')) k.name += *e++;
    if (k.name.empty() || *e != '(') return false;
    const char* close = std::strchr(e, ')');
    if (!close) return false;
    for (const char* q = std::strstr(e, ".param ."); q && q < close; q = std::strstr(q, ".param .")) {
      q += 8;
      while (std::isalpha(static_cast<unsigned char>(*q))) ++q;
      const unsigned long bits = std::strtoul(q, nullptr, 10);
      if (bits == 0 || bits % 8 != 0) return false;
      k.sizes.push_back(bits / 8);
    }
    out->push_back(std::move(k));
    e = close;
  }
  return !out->empty();
}

bool parseImage(const void* image, std::vector<ParsedKernel>* out) {
  static const char kMagic[] = "sim-image:";
  if (!image) return false;
  const char* p = static_cast<const char*>(image);
  if (std::strstr(p, ".version ") && std::strstr(p, ".entry ")) return parsePtx(p, out);
  if (std::strncmp(p, kMagic, sizeof kMagic - 1) != 0) return false;
  p += sizeof kMagic - 1;
  auto skipWs = [&] {
    while (*p && std::isspace(static_cast<unsigned char>(*p))) ++p;
  };
  for (;;) {
    skipWs();
    if (!*p) break;
    ParsedKernel k;
    while (*p && (std::isalnum(static_cast<unsigned char>(*p)) || *p == '_')) k.name += *p++;
    skipWs();
    if (k.name.empty() || *p != '(') return false;
    ++p;
    skipWs();
    if (*p == ')') {
      ++p;
    } else {
      for (;;) {
        skipWs();
        char* end = nullptr;
        unsigned long v = std::strtoul(p, &end, 10);
        if (end == p || v == 0 || v > 4096) return false;
        k.sizes.push_back(v);
        p = end;
        skipWs();
        if (*p == ',') {
          ++p;
          continue;
        }
        if (*p != ')') return false;
        ++p;
        break;
      }
    }
    for (const ParsedKernel& other : *out) {
      if (other.name == k.name) return false;
    }
    out->push_back(std::move(k));
    skipWs();
    if (*p == ';') ++p;
  }
  return !out->empty();
}

CUresult loadImpl(void** handleOut, const void* image, bool library, Context* ctx = nullptr) {
  if (!handleOut) return CUDA_ERROR_INVALID_VALUE;
  std::vector<ParsedKernel> parsed;
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  if (!parseImage(image, &parsed)) return CUDA_ERROR_INVALID_IMAGE;
  ModuleState& m = ms();
  std::vector<std::unique_ptr<KernelObj>> objs;
  for (const ParsedKernel& k : parsed) {
    auto obj = makeKernelObj(k.name.c_str(), library ? SIM_KERNEL_LIBRARY : SIM_KERNEL_FUNCTION,
                             static_cast<unsigned>(k.sizes.size()), k.sizes.data(), nullptr);
    if (!obj) return CUDA_ERROR_INVALID_IMAGE;
    objs.push_back(std::move(obj));
  }
  if (m.freeKernelSlots.size() + (kSlots - m.nextKernelSlot) < objs.size()) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t modSlot;
  if (!takeSlot(m.freeModuleSlots, m.nextModuleSlot, moduleSlots.size(), &modSlot)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* modHandle = moduleSlots[modSlot].data();
  ModuleObj mod;
  mod.library = library;
  mod.ctx = ctx;
  for (auto& obj : objs) {
    size_t slot;
    takeSlot(m.freeKernelSlots, m.nextKernelSlot, kSlots, &slot);
    void* h = kernelSlots[slot].data();
    mod.kernels.emplace_back(obj->name, h);
    state().kernels.emplace(h, std::move(obj));
    m.owner[h] = modHandle;
  }
  m.modules[modHandle] = std::move(mod);
  *handleOut = modHandle;
  return CUDA_SUCCESS;
}

CUresult getImpl(void** out, void* modHandle, const char* name, bool library) {
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  auto it = ms().modules.find(modHandle);
  if (it == ms().modules.end() || it->second.library != library) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& [n, h] : it->second.kernels) {
    if (n == name) {
      *out = h;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

void unloadLocked(std::unordered_map<void*, ModuleObj>::iterator it);

CUresult unloadImpl(Lock& lk, void* modHandle, bool library, const char* api) {
  ModuleState& m = ms();
  auto it = m.modules.find(modHandle);
  if (it == m.modules.end() || it->second.library != library) return CUDA_ERROR_INVALID_HANDLE;
  // Outstanding work may use the module's kernels: wait for the device to be idle.
  drainAll(lk, api);
  it = m.modules.find(modHandle);  // a host function may have run meanwhile
  if (it == m.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  unloadLocked(it);
  return CUDA_SUCCESS;
}

// Unmaps a module's or library's kernels and frees its handle (the device has
// nothing left to run with them).
void unloadLocked(std::unordered_map<void*, ModuleObj>::iterator it) {
  ModuleState& m = ms();
  void* modHandle = it->first;
  SimState& st = state();
  for (auto& [n, h] : it->second.kernels) {
    auto k = st.kernels.find(h);
    if (k != st.kernels.end()) {
      k->second->unloaded = true;
      m.retired.push_back(std::move(k->second));
      st.kernels.erase(k);
    }
    m.freeKernelSlots.insert(kernelSlotOf(h));
    m.owner.erase(h);
  }
  m.modules.erase(it);
  m.freeModuleSlots.insert(moduleSlotOf(modHandle));
}

// The built-in module and library of simKernelCreate's kernels.
char builtinModule, builtinLibrary;

// The module or library `h` came from, for a live kernel of `family` (either
// family when 0).
CUresult ownerOf(void* h, int family, void** out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  KernelObj* k = lookupKernel(static_cast<CUfunction>(h));
  if (!k || (family && k->family != family)) return CUDA_ERROR_INVALID_HANDLE;
  auto it = ms().owner.find(h);
  if (it != ms().owner.end()) *out = it->second;
  else *out = k->family == SIM_KERNEL_LIBRARY ? static_cast<void*>(&builtinLibrary) : &builtinModule;
  return CUDA_SUCCESS;
}

}  // namespace

void unloadModulesOf(Context* ctx) {
  ModuleState& m = ms();
  std::vector<void*> ended;
  for (auto& [h, mod] : m.modules)
    if (!mod.library && mod.ctx == ctx) ended.push_back(h);
  for (void* h : ended) unloadLocked(m.modules.find(h));
}

}  // namespace sim

using namespace sim;

extern "C" {

CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  SIM_ENTRY("cuModuleLoadData", kNeedCtx);
  return loadImpl(reinterpret_cast<void**>(module), image, false, currentCtx());
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option*,
                                    void** optionValues) {
  SIM_ENTRY("cuModuleLoadDataEx", kNeedCtx);
  if (numOptions > 0 && !optionValues) return CUDA_ERROR_INVALID_VALUE;
  return loadImpl(reinterpret_cast<void**>(module), image, false, currentCtx());
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  SIM_ENTRY("cuModuleGetFunction", 0);
  return getImpl(reinterpret_cast<void**>(hfunc), hmod, name, false);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  SIM_ENTRY("cuModuleUnload", kSteps | kNoSticky);
  return unloadImpl(SIM_LOCK, hmod, false, "cuModuleUnload");
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void** jitOptionsValues,
                                   unsigned int numJitOptions, CUlibraryOption*, void** libraryOptionValues,
                                   unsigned int numLibraryOptions) {
  SIM_ENTRY("cuLibraryLoadData", 0);
  if ((numJitOptions > 0 && !jitOptionsValues) || (numLibraryOptions > 0 && !libraryOptionValues)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return loadImpl(reinterpret_cast<void**>(library), code, true);
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  SIM_ENTRY("cuLibraryGetKernel", 0);
  return getImpl(reinterpret_cast<void**>(pKernel), library, name, true);
}

// Like the other cuFunc* calls, for CUfunctions only (a library kernel's
// handle is refused, as cuFuncGetName refuses it).
CUresult CUDAAPI cuFuncGetModule(CUmodule* hmod, CUfunction hfunc) {
  SIM_ENTRY("cuFuncGetModule", kNoSticky);
  return ownerOf(hfunc, SIM_KERNEL_FUNCTION, reinterpret_cast<void**>(hmod));
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary* pLib, CUkernel kernel) {
  SIM_ENTRY("cuKernelGetLibrary", kNoSticky);
  return ownerOf(kernel, SIM_KERNEL_LIBRARY, reinterpret_cast<void**>(pLib));
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  SIM_ENTRY("cuLibraryGetModule", kNeedCtx);
  if (!pMod) return CUDA_ERROR_INVALID_VALUE;
  auto it = ms().modules.find(library);
  if (it == ms().modules.end() || !it->second.library) return CUDA_ERROR_INVALID_HANDLE;
  *pMod = reinterpret_cast<CUmodule>(library);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  SIM_ENTRY("cuLibraryUnload", kSteps | kNoSticky);
  return unloadImpl(SIM_LOCK, library, true, "cuLibraryUnload");
}

}  // extern "C"
