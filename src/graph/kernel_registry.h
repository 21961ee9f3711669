// KernelRegistry: what graft knows about each kernel handle it has seen
// launched (name, parameter layout, whether it must run eagerly), resolved
// once per handle through the real driver.
//
// Library kernels (CUkernel) answer cuKernelGetParamInfo/cuKernelGetName and
// fail cuFunc*; true CUfunctions the other way round (DESIGN.md §1), so both
// families are tried.
//
// Threading: not thread-safe; used under the engine lock. Allocates and calls
// the driver only the first time a handle is seen.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/hot_arena.h"
#include "core/hot_path.h"
#include "core/op.h"

namespace graft::graph {

// Kernels of up to this many parameters (each under 64 KiB, as every kernel's
// are) also keep their layout in KernelInfo's first cache line.
inline constexpr unsigned kCompactParams = 10;
inline constexpr uint8_t kNotCompact = 0xff;

struct alignas(64) KernelInfo {
  // What every launch reads, in its first cache line (core/hot_path.h).
  uint64_t handle = 0;
  uint64_t launches = 0;
  core::EagerCause eager = core::EagerCause::None;  // UnknownParams or EagerKernel
  bool layoutKnown = false;
  bool paramsOrdered = false;  // offsets increase and parameters do not overlap
  uint8_t compactCount = kNotCompact;  // number of parameters if the compact layout holds them
  uint32_t paramBytes = 0;
  uint16_t compactOffsets[kCompactParams] = {};  // == offsets, when compactCount != kNotCompact
  uint16_t compactSizes[kCompactParams] = {};    // == sizes, likewise
  // The kernel's dynamic shared memory allowance
  // (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, the value in effect for
  // launches in `ctx`), read from the driver when the handle was resolved and
  // again after the program changed it (`allowanceStale`, noteAllowanceSet);
  // UINT32_MAX: unknown. A launch asking for more goes to the driver at its
  // position, which refuses it. Second line: read for launches with dynamic
  // shared memory only (allowanceFor).
  uint32_t sharedMemAllowance = UINT32_MAX;
  bool allowanceStale = false;
  // While eager == ReloadedCode: its launches up to this many run eagerly
  // (KernelRegistry::retireUnloaded says how many).
  uint32_t reloadedEagerLaunches = 0;
  uint64_t ctx = 0;  // the context current when the handle was resolved
  // The layout of any kernel (second line).
  core::HotVector<uint32_t> sizes;
  core::HotVector<uint32_t> offsets;
  // For the report.
  uint64_t patches = 0;  // graph node updates of this kernel's launches
  std::string name;
  // Where the code came from (cuKernelGetLibrary for a library kernel,
  // cuFuncGetModule for a function; 0: the driver did not say), and the
  // context current when the handle was resolved: what an unload retires.
  uint64_t owner = 0;
  bool ownerIsLibrary = false;
  // A library kernel's function in `ctx` (cuKernelGetFunction; 0 for a
  // function), whose allowance its launches there get.
  uint64_t function = 0;
};

// The dynamic shared memory allowance in effect for launches of `info`'s
// kernel in the current context `ctx`: the cached value when it holds there
// (or is unknown and was never set: UINT32_MAX), else the driver's answer
// now (kept when `ctx` is the entry's); 0 when the driver does not answer
// (the launch then goes to the driver, which decides). Calls the driver only
// for a stale entry or another context.
uint32_t allowanceFor(KernelInfo& info, CUcontext ctx);

// The kernel's own name inside a C++-mangled symbol: "ncclDevKernel_Generic"
// for "_Z21ncclDevKernel_Generic19ncclDevKernelArgs4K" (no namespaces,
// template arguments, parameters or return type); `name` itself when it is
// not mangled or does not demangle. Allocates: not for the per-op path.
std::string kernelBaseName(const std::string& name);

// True when the kernel's symbol or its base name (above) starts with one of
// `prefixes`: NCCL's kernels are C++ functions, so their symbols start "_Z".
bool matchesEagerPrefix(const std::string& name, const std::vector<std::string>& prefixes);
// The prefixes of kernels that always run eagerly: NCCL's ("nccl"), whose
// kernels read state NCCL's host threads change, then those of `userList`
// (GRAFT_EAGER_KERNELS, comma-separated; blanks around items ignored).
std::vector<std::string> eagerPrefixList(const std::string& userList);

class KernelRegistry {
 public:
  // Kernels that always run eagerly: eagerPrefixList(GRAFT_EAGER_KERNELS).
  void setEagerPrefixes(const std::string& commaSeparated);

  // One line of the index, then the entry's first line (no "last kernel"
  // cache: consecutive launches are mostly of different kernels, and its check
  // would read the previous kernel's entry as well).
  GRAFT_FAST_LANE_INLINE KernelInfo& get(CUfunction f) {
    KernelInfo* info = lookup(reinterpret_cast<uint64_t>(f));
    return info ? *info : *resolve(f);
  }
  const KernelInfo* find(uint64_t handle) const { return lookup(handle); }
  // The driver refused this kernel's launch into a stream capture (`error`):
  // its launches run eagerly from now on (EagerCause::CaptureRefused). Logs
  // once per kernel. No-op for an unknown handle.
  void noteCaptureRefused(uint64_t handle, const char* error);
  // The program set the kernel's launch state for the pre-4.0 launch API
  // (cuFuncSetBlockShape, cuFuncSetSharedSize, cuParamSet*), which any
  // cuLaunchKernel of it clears: its launches, through every handle of it
  // (handlesOfKernel), run eagerly from now on (EagerCause::LegacyLaunchApi),
  // so graft never issues one of them later than the program did nor into a
  // capture of its own. Resolves an unknown handle; calls the driver;
  // allocates; logs once per kernel.
  void noteLegacyLaunchState(CUfunction f);
  // Counts by kernel name, largest first (retired kernels included): of
  // launches, or of graph node updates.
  std::vector<std::pair<std::string, uint64_t>> byLaunches() const { return ranked(&KernelInfo::launches); }
  std::vector<std::pair<std::string, uint64_t>> byPatches() const { return ranked(&KernelInfo::patches); }
  // Replays updated graph nodes of this kernel's `count` times (no-op for an
  // unknown handle).
  void notePatched(uint64_t handle, uint64_t count) {
    if (KernelInfo* info = lookup(handle)) info->patches += count;
  }
  // Code was unloaded: a handle seen before may name another kernel now. Every
  // entry is resolved again on next use (no KernelInfo is held across calls);
  // the old launch counts stay in the report, merged by name.
  void retireAll();
  // The handles an unload of this module (or library) ends: `certain`, its
  // own kernels (for a library also the functions of its module in the
  // current context); `maybe`, those whose code the driver could not place
  // and, for a library, every function resolved in another context (the
  // library may have modules there too). Calls the driver; call before the
  // unload itself.
  struct CodeHandles {
    std::vector<uint64_t> certain, maybe;
  };
  CodeHandles handlesOfCode(uint64_t code, bool library) const;
  // Forgets these handles as retireAll does all of them (counts kept by
  // name); each is resolved again on next use.
  void retire(const std::vector<uint64_t>& handles);
  // The same for the handles of code being unloaded, whose graphs replayed
  // at most `graphReplays[i]` times (one per handle), judging the life of
  // each kernel's code (load to unload; the handles of one name together:
  // a library kernel and its function). A life in which the kernel could go
  // into graphs fails when those graphs replayed fewer than
  // kUnloadPaidReplays times and it ran fewer than kLongLivedLaunches
  // times: code a library loads and unloads every few launches or steps
  // (cuFFT's plans) has its graphs dropped before they pay for their build.
  // After the n-th failure in a row its next 2^(n-1) lives (at most
  // kMostEagerLives) run it eagerly (ReloadedCode, OpEncoder::kernel) for
  // their first reloadedEagerLaunches launches: twice its longest failed
  // life, at least kReloadedEagerLaunches, at most kLongLivedLaunches; then
  // a life tries graphs again. A life run eagerly all along teaches
  // nothing; a life that paid off, or was long, forgets the failures. One
  // short life costs only kReloadedEagerLaunches eager launches, and code
  // whose graphs replay many times in each life keeps them. Known limits:
  // kernels are told apart by name only (the code's handle changes at every
  // load); only graphs alive at the unload are counted; and where the
  // kernel's launches are spread through the step, the pieces left between
  // them when it runs eagerly may be too small for graphs, so its eager
  // lives can put fewer ops through graphs than lives in graphs that
  // replayed 4 to 15 times would have.
  void retireUnloaded(const std::vector<uint64_t>& handles, const std::vector<uint64_t>& graphReplays);
  static constexpr uint32_t kReloadedEagerLaunches = 64;
  static constexpr uint32_t kLongLivedLaunches = 1024;
  static constexpr uint64_t kUnloadPaidReplays = 16;
  static constexpr uint32_t kMostEagerLives = 32;
  // Most kernel names kept after their code is unloaded (short-lived names,
  // counts for the report): code compiled at run time may be named anew at
  // every load.
  static constexpr size_t kMaxNamesKept = 4096;
  // The program changed a dynamic shared memory allowance (the driver took
  // it): through cuFuncSetAttribute on `handle`, or cuKernelSetAttribute on
  // the library kernel `handle` (`function`: its function in the current
  // context, or null). The entries it may concern read the value in effect
  // again at their next launch with dynamic shared memory: those of these
  // handles, those whose function they are, and, for a library kernel,
  // functions resolved in other contexts (they may be its functions there).
  void noteAllowanceSet(CUfunction handle, CUfunction function, bool library);
  // The handles that may name the kernel `handle` names, among those graft
  // has seen launched, and the one it names: itself; for a library kernel,
  // its function in the current context, the functions of it graft resolved
  // and every function graft resolved in another context (it may be one of
  // the kernel's there); for a function, the library kernels whose function
  // in the current context it is (libraryKernelsOfFunction) and their
  // functions; and every handle of a kernel of the same name. Errs towards
  // more handles (they only cost a rebuild). Sorted. Calls the driver;
  // allocates; not for the per-op path.
  std::vector<uint64_t> handlesOfKernel(uint64_t handle) const;
  // The library kernels graft knows of (launched, or set through
  // cuKernelSetAttribute: noteKernelSet) whose function in the current
  // context is `f` (cuKernelGetFunction; the driver gives each library
  // kernel its own function handle per context). Calls the driver once per
  // such kernel (which may load it into the current context); not for the
  // per-op path.
  std::vector<uint64_t> libraryKernelsOfFunction(CUfunction f) const;
  // The program set an attribute of the library kernel `k`
  // (cuKernelSetAttribute): noted, so that libraryKernelsOfFunction finds it
  // also where graft has seen only its functions launched. No driver call.
  void noteKernelSet(CUkernel k) { entries_->kernelsSet.insert(reinterpret_cast<uint64_t>(k)); }
  // The program unloads a library: the kernels noted of it are forgotten
  // (cuKernelGetLibrary; call before the unload). Calls the driver.
  void forgetKernelsSetOf(uint64_t library);

 private:
  KernelInfo* resolve(CUfunction f);
  // The entry of a handle seen before, or nullptr. The index is open
  // addressing over a flat array, so a lookup reads one cache line (the
  // per-op path; see core/hot_path.h); handle 0, which marks its empty
  // slots, is found in the map.
  GRAFT_FAST_LANE_INLINE KernelInfo* lookup(uint64_t handle) const {
    if (handle == 0) {
      auto it = entries_->kernels.find(handle);
      return it == entries_->kernels.end() ? nullptr : it->second.get();
    }
    if (index_.empty()) return nullptr;
    for (size_t i = indexSlot(handle);; i = (i + 1) & (index_.size() - 1)) {
      if (index_[i].handle == handle) return index_[i].info;
      if (index_[i].handle == 0) return nullptr;
    }
  }
  size_t indexSlot(uint64_t handle) const {
    return size_t((handle >> 4) * 0x9e3779b97f4a7c15ull >> 32) & (index_.size() - 1);
  }
  void addToIndex(KernelInfo* info);
  std::vector<std::pair<std::string, uint64_t>> ranked(uint64_t KernelInfo::*count) const;

  // The lookup's fields first, together.
  struct IndexSlot {
    uint64_t handle;  // 0: empty
    KernelInfo* info;
  };
  core::HotVector<IndexSlot> index_;  // of kernels (nonzero handles), at most half full
  // The rest, off the per-op line: the registry is 32 bytes, so the counter
  // after it in the Runtime shares the Runtime's first line (runtime.h).
  // The report's counts for a retired kernel `name` (allocates).
  KernelInfo& retiredCounts(const std::string& name);
  // One life of the code of kernel `name` ended with its unload: it ran
  // `launches` times, eagerly all along (`eagerAllLife`: ReloadedCode), and
  // graphs with it replayed at most `graphReplays` times (retireUnloaded).
  void noteCodeLife(const std::string& name, uint64_t launches, bool eagerAllLife, uint64_t graphReplays);
  struct Entries {
    std::unordered_map<uint64_t, core::HotPtr<KernelInfo>> kernels;
    std::unordered_map<std::string, KernelInfo> retired;  // counts only, by kernel name (retiredCounts)
    std::vector<std::string> eagerPrefixes;
    // Kernels whose code lives failed (retireUnloaded), by name.
    struct ReloadHistory {
      uint32_t failures = 0;        // in a row
      uint32_t eagerLivesLeft = 0;  // lives still to run it eagerly
      uint32_t eagerLaunches = 0;   // launches each of them runs eagerly
    };
    std::unordered_map<std::string, ReloadHistory> reloads;
    // Library kernels the program set attributes of (noteKernelSet).
    std::unordered_set<uint64_t> kernelsSet;
  };
  std::unique_ptr<Entries> entries_ = std::make_unique<Entries>();
};

}  // namespace graft::graph
