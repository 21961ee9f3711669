#include "graph/kernel_registry.h"

#include <cxxabi.h>

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "core/hot_path.h"
#include "graph/driver_log.h"
#include "hook/driver_api.h"
#include "log/log.h"

namespace graft::graph {

using hook::ApiId;
using hook::real;

std::string kernelBaseName(const std::string& name) {
  if (name.compare(0, 2, "_Z") != 0) return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !demangled) return name;
  std::string s(demangled);
  std::free(demangled);
  // "void ns::kernel<int, 4>(Args)" -> "kernel"
  s = s.substr(0, s.find('('));
  s = s.substr(0, s.find('<'));
  if (const size_t space = s.rfind(' '); space != std::string::npos) s = s.substr(space + 1);
  if (const size_t scope = s.rfind("::"); scope != std::string::npos) s = s.substr(scope + 2);
  return s.empty() ? name : s;
}

bool matchesEagerPrefix(const std::string& name, const std::vector<std::string>& prefixes) {
  for (const auto& prefix : prefixes) {
    if (name.compare(0, prefix.size(), prefix) == 0) return true;
    // A mangled symbol holds its base name verbatim: demangle (costly, once
    // per kernel) only when the prefix occurs in it at all.
    if (name.find(prefix) != std::string::npos && kernelBaseName(name).compare(0, prefix.size(), prefix) == 0)
      return true;
  }
  return false;
}

std::vector<std::string> eagerPrefixList(const std::string& list) {
  std::vector<std::string> prefixes = {"nccl"};
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty() && std::find(prefixes.begin(), prefixes.end(), item) == prefixes.end())
      prefixes.push_back(item);
    start = end + 1;
  }
  return prefixes;
}

void KernelRegistry::setEagerPrefixes(const std::string& list) { entries_->eagerPrefixes = eagerPrefixList(list); }

GRAFT_COLD KernelInfo* KernelRegistry::resolve(CUfunction f) {
  auto info = core::makeHot<KernelInfo>();
  info->handle = reinterpret_cast<uint64_t>(f);

  // The probes below fail by design (a handle of the other kind, the
  // parameter past the last): kept out of the program's view of the driver's
  // log (graph/driver_log.h).
  OwnDriverCalls ownProbes;
  // Its kind: a function (what the runtime launches) answers cuFuncGetName,
  // a library kernel (CUkernel) cuKernelGetName; each refuses the other's.
  const char* name = nullptr;
  auto kernelName = real<ApiId::k_cuKernelGetName_12030>();
  auto funcName = real<ApiId::k_cuFuncGetName_12030>();
  bool libraryKernel = false;
  if (!(funcName && funcName(&name, f) == CUDA_SUCCESS && name)) {
    name = nullptr;
    libraryKernel = kernelName && kernelName(&name, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS && name;
    if (!libraryKernel) name = nullptr;
  }
  info->name = name ? name : "kernel@" + std::to_string(info->handle);

  // Parameter layout: the family of its kind first, then the other.
  auto kernelParam = real<ApiId::k_cuKernelGetParamInfo_12040>();
  auto funcParam = real<ApiId::k_cuFuncGetParamInfo_12040>();
  for (int attempt = 0; attempt < 2 && !info->layoutKnown; ++attempt) {
    const int family = libraryKernel ? attempt : 1 - attempt;  // 0: library kernel, 1: function
    info->offsets.clear();
    info->sizes.clear();
    // A kernel's parameters take at most 32764 bytes, so at most that many
    // parameters: the driver answers "past the last" before the cap, and a
    // layout that reached it is not known (never a truncated one).
    constexpr size_t kMaxParams = 32768;
    bool ok = false;
    for (size_t index = 0; index < kMaxParams; ++index) {
      size_t offset = 0, size = 0;
      CUresult r = CUDA_ERROR_NOT_SUPPORTED;
      if (family == 0 && kernelParam)
        r = kernelParam(reinterpret_cast<CUkernel>(f), index, &offset, &size);
      if (family == 1 && funcParam) r = funcParam(f, index, &offset, &size);
      if (r == CUDA_SUCCESS) {
        info->offsets.push_back(uint32_t(offset));
        info->sizes.push_back(uint32_t(size));
        continue;
      }
      // Past the last parameter (at index 0 for a kernel without any) the
      // driver answers CUDA_ERROR_INVALID_VALUE; a handle of the other family
      // answers CUDA_ERROR_INVALID_HANDLE.
      ok = r == CUDA_ERROR_INVALID_VALUE;
      break;
    }
    if (ok) {
      info->layoutKnown = true;
      uint32_t end = 0;
      info->paramsOrdered = true;
      for (size_t i = 0; i < info->sizes.size(); ++i) {
        if (info->offsets[i] < end) info->paramsOrdered = false;
        end = std::max(end, info->offsets[i] + info->sizes[i]);
      }
      info->paramBytes = end;
      if (info->sizes.size() <= kCompactParams && end <= 0xffff) {
        info->compactCount = uint8_t(info->sizes.size());
        for (size_t i = 0; i < info->sizes.size(); ++i) {
          info->compactOffsets[i] = uint16_t(info->offsets[i]);
          info->compactSizes[i] = uint16_t(info->sizes[i]);
        }
      }
    }
  }
  if (!info->layoutKnown) {
    info->offsets.clear();
    info->sizes.clear();
    info->eager = core::EagerCause::UnknownParams;
    GRAFT_INFO("kernel {}: parameter sizes unknown (cuKernelGetParamInfo and cuFuncGetParamInfo "
               "both failed); it runs eagerly in sequence",
               info->name);
  }
  // Whose code it is (KernelRegistry::handlesOfCode).
  if (auto getLibrary = real<ApiId::k_cuKernelGetLibrary_12050>(); getLibrary && libraryKernel) {
    CUlibrary library = nullptr;
    if (getLibrary(&library, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS && library) {
      info->owner = reinterpret_cast<uint64_t>(library);
      info->ownerIsLibrary = true;
    }
  }
  if (auto getModule = real<ApiId::k_cuFuncGetModule_11000>(); getModule && !info->owner) {
    CUmodule module = nullptr;
    if (getModule(&module, f) == CUDA_SUCCESS && module) info->owner = reinterpret_cast<uint64_t>(module);
  }
  if (auto current = real<ApiId::k_cuCtxGetCurrent_4000>()) {
    CUcontext ctx = nullptr;
    if (current(&ctx) == CUDA_SUCCESS) info->ctx = reinterpret_cast<uint64_t>(ctx);
  }
  // The allowance launches in this context get: a library kernel's through
  // its function here.
  CUfunction function = f;
  if (auto getFunction = real<ApiId::k_cuKernelGetFunction_12000>(); libraryKernel && getFunction) {
    CUfunction fn = nullptr;
    if (getFunction(&fn, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS && fn) {
      info->function = reinterpret_cast<uint64_t>(fn);
      function = fn;
    } else {
      function = nullptr;
    }
  }
  if (auto getAttribute = real<ApiId::k_cuFuncGetAttribute_2020>(); getAttribute && function) {
    int allowance = 0;
    if (getAttribute(&allowance, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, function) == CUDA_SUCCESS &&
        allowance >= 0)
      info->sharedMemAllowance = uint32_t(allowance);
  }
  if (auto it = entries_->reloads.find(info->name); it != entries_->reloads.end() && it->second.eagerLivesLeft) {
    info->eager = core::EagerCause::ReloadedCode;
    info->reloadedEagerLaunches = it->second.eagerLaunches;
  }
  if (matchesEagerPrefix(info->name, entries_->eagerPrefixes)) {
    info->eager = core::EagerCause::EagerKernel;
    GRAFT_DEBUG("kernel {}: matches a GRAFT_EAGER_KERNELS prefix; it runs eagerly", info->name);
  }
  KernelInfo* raw = info.get();
  entries_->kernels.emplace(raw->handle, std::move(info));
  if (raw->handle != 0) addToIndex(raw);
  return raw;
}

void KernelRegistry::noteCaptureRefused(uint64_t handle, const char* error) {
  KernelInfo* info = lookup(handle);
  if (!info || info->eager != core::EagerCause::None) return;
  info->eager = core::EagerCause::CaptureRefused;
  GRAFT_INFO("kernel {}: the driver refused it in a stream capture ({}), although it ran eagerly; its "
             "launches run eagerly at their position from now on",
             info->name, error);
}

void KernelRegistry::noteLegacyLaunchState(CUfunction f) {
  if (!f) return;
  get(f);  // known from now on, so that its launches find the mark
  const KernelInfo* marked = nullptr;
  for (const uint64_t h : handlesOfKernel(reinterpret_cast<uint64_t>(f))) {
    KernelInfo* info = lookup(h);
    // Eager already for good (an unknown layout, GRAFT_EAGER_KERNELS, a
    // refused capture): that cause stays.
    if (!info || (info->eager != core::EagerCause::None && info->eager != core::EagerCause::ReloadedCode)) continue;
    info->eager = core::EagerCause::LegacyLaunchApi;
    marked = info;
  }
  if (marked)
    GRAFT_INFO("kernel {}: the program sets its launch state for cuLaunch/cuLaunchGrid (cuFuncSetBlockShape, "
               "cuParamSet*); its launches run eagerly at their position from now on",
               marked->name);
}

void KernelRegistry::addToIndex(KernelInfo* info) {
  if (2 * (entries_->kernels.size() + 1) > index_.size()) {
    index_.assign(std::bit_ceil(std::max<size_t>(256, 4 * entries_->kernels.size())), IndexSlot{0, nullptr});
    for (const auto& [h, k] : entries_->kernels)
      if (h != 0 && k.get() != info) addToIndex(k.get());
  }
  size_t i = indexSlot(info->handle);
  while (index_[i].handle != 0) i = (i + 1) & (index_.size() - 1);
  index_[i] = {info->handle, info};
}

std::vector<std::pair<std::string, uint64_t>> KernelRegistry::ranked(uint64_t KernelInfo::*count) const {
  std::unordered_map<std::string, uint64_t> byName;
  for (const auto& [name, k] : entries_->retired) byName[name] += k.*count;
  for (const auto& [h, k] : entries_->kernels) byName[k->name] += (*k).*count;
  std::vector<std::pair<std::string, uint64_t>> v(byName.begin(), byName.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return v;
}

std::vector<uint64_t> KernelRegistry::libraryKernelsOfFunction(CUfunction f) const {
  std::vector<uint64_t> out;
  const auto getFunction = real<ApiId::k_cuKernelGetFunction_12000>();
  if (!getFunction || !f) return out;
  auto isItsFunction = [&](uint64_t kernel) {
    CUfunction fn = nullptr;
    return getFunction(&fn, reinterpret_cast<CUkernel>(kernel)) == CUDA_SUCCESS && fn == f;
  };
  for (uint64_t k : entries_->kernelsSet)
    if (isItsFunction(k)) out.push_back(k);
  for (const auto& [h, info] : entries_->kernels)
    if ((info->ownerIsLibrary || info->function) && !entries_->kernelsSet.count(h) && isItsFunction(h))
      out.push_back(h);
  return out;
}

void KernelRegistry::forgetKernelsSetOf(uint64_t library) {
  const auto getLibrary = real<ApiId::k_cuKernelGetLibrary_12050>();
  std::erase_if(entries_->kernelsSet, [&](uint64_t k) {
    CUlibrary of = nullptr;
    return !getLibrary || getLibrary(&of, reinterpret_cast<CUkernel>(k)) != CUDA_SUCCESS ||
           reinterpret_cast<uint64_t>(of) == library;
  });
}

std::vector<uint64_t> KernelRegistry::handlesOfKernel(uint64_t handle) const {
  std::vector<uint64_t> out{handle};
  if (!handle) return out;
  // Its name: the registry's, else the driver's (a handle graft has not seen
  // launched, such as a kernel launched only through its function).
  std::string name;
  bool library = false;
  if (const KernelInfo* info = lookup(handle)) {
    name = info->name;
    library = info->ownerIsLibrary || info->function;
  } else {
    OwnDriverCalls ownProbes;  // one of the two fails (graph/driver_log.h)
    const char* n = nullptr;
    if (auto funcName = real<ApiId::k_cuFuncGetName_12030>();
        funcName && funcName(&n, reinterpret_cast<CUfunction>(handle)) == CUDA_SUCCESS && n) {
      name = n;
    } else if (auto kernelName = real<ApiId::k_cuKernelGetName_12030>();
               kernelName && kernelName(&n, reinterpret_cast<CUkernel>(handle)) == CUDA_SUCCESS && n) {
      name = n;
      library = true;
    }
  }
  std::vector<uint64_t> kernels;  // the library kernels `handle` is or is a function of
  if (library) {
    kernels.push_back(handle);
    CUfunction fn = nullptr;
    if (auto getFunction = real<ApiId::k_cuKernelGetFunction_12000>();
        getFunction && getFunction(&fn, reinterpret_cast<CUkernel>(handle)) == CUDA_SUCCESS && fn)
      out.push_back(reinterpret_cast<uint64_t>(fn));
  } else {
    kernels = libraryKernelsOfFunction(reinterpret_cast<CUfunction>(handle));
  }
  uint64_t here = 0;
  if (CUcontext ctx = nullptr; library && real<ApiId::k_cuCtxGetCurrent_4000>() &&
                               real<ApiId::k_cuCtxGetCurrent_4000>()(&ctx) == CUDA_SUCCESS)
    here = reinterpret_cast<uint64_t>(ctx);
  for (const auto& [h, info] : entries_->kernels) {
    const bool ofKernel = std::find(kernels.begin(), kernels.end(), h) != kernels.end();
    // A function resolved in another context may be this library kernel's there.
    const bool elsewhere = library && !info->ownerIsLibrary && !info->function && info->ctx != here;
    if (ofKernel || elsewhere || info->function == handle || (!name.empty() && info->name == name)) {
      out.push_back(h);
      if (info->function) out.push_back(info->function);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

KernelRegistry::CodeHandles KernelRegistry::handlesOfCode(uint64_t code, bool library) const {
  CodeHandles out;
  uint64_t currentCtx = 0;
  if (library) {
    CUcontext ctx = nullptr;
    if (auto current = real<ApiId::k_cuCtxGetCurrent_4000>(); current && current(&ctx) == CUDA_SUCCESS)
      currentCtx = reinterpret_cast<uint64_t>(ctx);
  }
  // The library's module in the current context, asked for only if a
  // function of this context may be of it (asking may load the module).
  bool moduleAsked = false;
  uint64_t libraryModule = 0;
  auto moduleOfLibrary = [&] {
    if (!moduleAsked) {
      moduleAsked = true;
      CUmodule m = nullptr;
      if (auto getModule = real<ApiId::k_cuLibraryGetModule_12000>();
          getModule && getModule(&m, reinterpret_cast<CUlibrary>(code)) == CUDA_SUCCESS)
        libraryModule = reinterpret_cast<uint64_t>(m);
    }
    return libraryModule;
  };
  for (const auto& [h, k] : entries_->kernels) {
    if (k->owner == 0) {
      out.maybe.push_back(h);  // unplaced: may be any code's
    } else if (k->ownerIsLibrary) {
      if (library && k->owner == code) out.certain.push_back(h);
    } else if (!library) {
      if (k->owner == code) out.certain.push_back(h);
    } else if (k->ctx != currentCtx) {
      out.maybe.push_back(h);
    } else if (moduleOfLibrary() && k->owner == libraryModule) {
      out.certain.push_back(h);
    }
  }
  return out;
}

void KernelRegistry::noteCodeLife(const std::string& name, uint64_t launches, bool eagerAllLife,
                                  uint64_t graphReplays) {
  auto known = entries_->reloads.find(name);
  if (eagerAllLife) {
    // Nothing learned (its graphs had none of its launches); one eager life
    // fewer to go.
    if (known != entries_->reloads.end() && known->second.eagerLivesLeft && !--known->second.eagerLivesLeft)
      GRAFT_DEBUG("kernel {}: after {} lives run eagerly, its next one tries graphs again", name,
                  std::min(kMostEagerLives, 1u << (known->second.failures - 1)));
    return;
  }
  if (launches >= kLongLivedLaunches || graphReplays >= kUnloadPaidReplays) {
    if (known != entries_->reloads.end()) entries_->reloads.erase(known);
    return;
  }
  if (known == entries_->reloads.end()) {
    // Bounded (code compiled at run time may bring a new name with every
    // load): make room, first from names about to try graphs again.
    if (entries_->reloads.size() >= kMaxNamesKept) {
      auto victim = std::find_if(entries_->reloads.begin(), entries_->reloads.end(),
                                 [](const auto& e) { return e.second.eagerLivesLeft == 0; });
      entries_->reloads.erase(victim != entries_->reloads.end() ? victim : entries_->reloads.begin());
    }
    known = entries_->reloads.emplace(name, Entries::ReloadHistory{}).first;
  }
  Entries::ReloadHistory& h = known->second;
  h.failures = std::min(h.failures + 1, 6u);  // (2^5 lives: kMostEagerLives)
  h.eagerLivesLeft = std::min(kMostEagerLives, 1u << (h.failures - 1));
  h.eagerLaunches = uint32_t(std::clamp<uint64_t>(std::max<uint64_t>(h.eagerLaunches, 2 * launches),
                                                  kReloadedEagerLaunches, kLongLivedLaunches));
  GRAFT_DEBUG("kernel {}: its code is unloaded after {} launches, graphs with it replayed at most {} times; its "
              "next {} lives run its first {} launches eagerly",
              name, launches, graphReplays, h.eagerLivesLeft, h.eagerLaunches);
}

void KernelRegistry::retireUnloaded(const std::vector<uint64_t>& handles, const std::vector<uint64_t>& graphReplays) {
  struct Life {
    const std::string* name;
    uint64_t launches = 0, replays = 0;
    bool eagerAllLife = true;
  };
  std::vector<Life> lives;
  for (size_t i = 0; i < handles.size(); ++i) {
    auto it = entries_->kernels.find(handles[i]);
    if (it == entries_->kernels.end()) continue;
    const KernelInfo& info = *it->second;
    auto life = std::find_if(lives.begin(), lives.end(), [&](const Life& l) { return *l.name == info.name; });
    if (life == lives.end()) life = lives.insert(lives.end(), Life{&info.name});
    life->launches += info.launches;
    life->replays = std::max(life->replays, i < graphReplays.size() ? graphReplays[i] : 0);
    life->eagerAllLife = life->eagerAllLife && info.eager == core::EagerCause::ReloadedCode;
  }
  for (const Life& l : lives) noteCodeLife(*l.name, l.launches, l.eagerAllLife, l.replays);
  retire(handles);
}

void KernelRegistry::retire(const std::vector<uint64_t>& handles) {
  if (handles.empty()) return;
  for (uint64_t h : handles) {
    auto it = entries_->kernels.find(h);
    if (it == entries_->kernels.end()) continue;
    KernelInfo& r = retiredCounts(it->second->name);
    r.launches += it->second->launches;
    r.patches += it->second->patches;
    entries_->kernels.erase(it);
  }
  // The open-addressing index is made again from the entries left.
  index_.clear();
  for (const auto& [h, k] : entries_->kernels) {
    if (h != 0) {
      addToIndex(k.get());  // into an empty index: adds every entry
      break;
    }
  }
}

void KernelRegistry::noteAllowanceSet(CUfunction handle, CUfunction function, bool library) {
  const uint64_t h = reinterpret_cast<uint64_t>(handle), f = reinterpret_cast<uint64_t>(function);
  CUcontext here = nullptr;
  if (auto current = real<ApiId::k_cuCtxGetCurrent_4000>(); !current || current(&here) != CUDA_SUCCESS)
    here = nullptr;
  for (const auto& [e, k] : entries_->kernels) {
    const bool concerned = e == h || (f && e == f) || (k->function && (k->function == h || k->function == f)) ||
                           (library && !k->ownerIsLibrary && k->ctx != reinterpret_cast<uint64_t>(here));
    if (concerned) k->allowanceStale = true;
  }
}

uint32_t allowanceFor(KernelInfo& info, CUcontext ctx) {
  const bool own = reinterpret_cast<uint64_t>(ctx) == info.ctx;
  // (Unknown since it was resolved, and never set since: trusted, as the
  // driver could not say.)
  if ((own || info.sharedMemAllowance == UINT32_MAX) && !info.allowanceStale) return info.sharedMemAllowance;
  // The kernel's function in this context: a library kernel's through
  // cuKernelGetFunction, a function is its own.
  CUfunction fn = reinterpret_cast<CUfunction>(info.handle);
  if (info.ownerIsLibrary || info.function) {
    const auto getFunction = real<ApiId::k_cuKernelGetFunction_12000>();
    if (!getFunction || getFunction(&fn, reinterpret_cast<CUkernel>(info.handle)) != CUDA_SUCCESS) fn = nullptr;
  }
  int value = 0;
  const auto getAttribute = real<ApiId::k_cuFuncGetAttribute_2020>();
  if (!fn || !getAttribute ||
      getAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn) != CUDA_SUCCESS || value < 0)
    value = 0;
  if (own) {
    info.sharedMemAllowance = uint32_t(value);
    info.allowanceStale = false;
  }
  return uint32_t(value);
}

KernelInfo& KernelRegistry::retiredCounts(const std::string& name) {
  // Past kMaxNamesKept names (JIT code named anew at every load), the counts
  // of further names go together under one.
  auto it = entries_->retired.find(name);
  if (it != entries_->retired.end()) return it->second;
  if (entries_->retired.size() < kMaxNamesKept) return entries_->retired[name];
  return entries_->retired["(other unloaded kernels)"];
}

void KernelRegistry::retireAll() {
  // Only the launch and patch counts stay, by name, for the report: a program that
  // reloads code in a loop must not grow this without bound.
  for (const auto& [h, k] : entries_->kernels) {
    KernelInfo& r = retiredCounts(k->name);
    r.launches += k->launches;
    r.patches += k->patches;
  }
  entries_->kernels.clear();
  entries_->kernelsSet.clear();
  index_.clear();
}

}  // namespace graft::graph
