// The driver API table (driver_api.def) turned into types: ApiId, per-entry
// info, typed pointers to the real driver, and name lookup.
//
// Threading: the real-pointer slots are written once by resolveDriverTable()
// (under a once-flag) and read lock-free afterwards. Never allocates after
// resolution. Calls the driver only in resolveDriverTable().
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <string_view>

namespace graft::hook {

enum class ApiClass : uint8_t {
  Launch, Copy, Set, EventRecord, StreamWait, Barrier, Query, Alloc, Free, HostFunc,
  Capture, GraphLaunch, StreamOrdered, Lifecycle, Setting, DriverLog, Resolver, Internal, Count
};
// Report names of the classes, in ApiClass order (the exit report's by_class keys).
inline constexpr std::string_view kApiClassNames[] = {
  "launch", "copy", "set", "event_record", "stream_wait", "barrier", "query", "alloc", "free",
  "host_func", "capture", "graph_launch", "stream_ordered", "lifecycle", "setting", "driver_log", "resolver", "internal"};
static_assert(std::size(kApiClassNames) == size_t(ApiClass::Count));

enum class Variant : uint8_t { NONE, PTSZ, PTDS };

namespace trait {
inline constexpr uint8_t NONE = 0, SYNC = 1, ORDERED = 2, BEGIN = 4, END = 8, ASYNC_ALLOC = 16,
                         ASYNC_FREE = 32, UNLOADS = 64, ENDS_CONTEXT = 128;
// Unloads code: a barrier, after which the unloaded kernels' handles may be reused.
inline constexpr uint8_t SYNC_UNLOADS = SYNC | UNLOADS;
// May destroy a context (with its code): streams graft made in it go with it.
inline constexpr uint8_t SYNC_ENDS_CONTEXT = SYNC | ENDS_CONTEXT;
inline constexpr uint8_t SYNC_UNLOADS_ENDS_CONTEXT = SYNC | UNLOADS | ENDS_CONTEXT;
}

enum class ApiId : uint16_t {
#define GRAFT_API(base, symbol, version, variant, klass, traits) k_##base##_##version,
#include "hook/driver_api.def"
#undef GRAFT_API
  Count
};
inline constexpr size_t kApiCount = size_t(ApiId::Count);

struct ApiInfo {
  std::string_view base;
  std::string_view symbol;
  int version;
  Variant variant;
  ApiClass klass;
  uint8_t traits;
};

inline constexpr ApiInfo kApis[] = {
#define GRAFT_API(base, symbol, version, variant, klass, traits) \
  {#base, #symbol, version, Variant::variant, ApiClass::klass, trait::traits},
#include "hook/driver_api.def"
#undef GRAFT_API
};
static_assert(std::size(kApis) == kApiCount);

constexpr const ApiInfo& apiInfo(ApiId id) { return kApis[size_t(id)]; }

// Older ABIs that runtimes still ask cuGetProcAddress for, whose typedefs
// cudaTypedefs.h only declares for the driver's own build.
typedef CUresult(CUDAAPI* PFN_cuStreamBeginCapture_v10000)(CUstream hStream);

// The typed pointer of each entry: ApiType<ApiId::k_cuLaunchKernel_4000>::type
// is PFN_cuLaunchKernel_v4000.
template <ApiId Id> struct ApiType;
#define GRAFT_API(base, symbol, version, variant, klass, traits) \
  template <> struct ApiType<ApiId::k_##base##_##version> { using type = PFN_##base##_v##version; };
#include "hook/driver_api.def"
#undef GRAFT_API

class Runtime;
// The hook's per-op globals, together in one page (core/hot_path.h): the real
// driver pointers ([api][0] default variant, [api][1] per-thread variant; the
// per-op entries are first in driver_api.def), the Runtime, whether it is
// active (runtime.h), and whether this process is a child forked after graft
// began to start (then graft stays off in it for good).
struct alignas(4096) HookGlobals {
  std::atomic<void*> realDriver[kApiCount][2];
  Runtime* runtime = nullptr;
  std::atomic<bool> active{false};
  std::atomic<bool> forkedChild{false};
};
static_assert(sizeof(HookGlobals) == 4096, "the hook's per-op globals fit one page");
extern constinit HookGlobals g_hook;

template <ApiId Id>
inline typename ApiType<Id>::type real(int perThread = 0) {
  return reinterpret_cast<typename ApiType<Id>::type>(
      g_hook.realDriver[size_t(Id)][perThread].load(std::memory_order_relaxed));
}

// A sticky error: the context can no longer be used (a device-side assert, a
// fault), and every later call fails with it eagerly. Once graft sees one
// (from the program's call or its own), it holds nothing more, so each call
// reaches the driver and gets that error at its position
// (tests/gpu/traps_driver2.cu, sticky_after_assert).
constexpr bool isStickyError(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
      return true;
    default:
      return false;
  }
}

// Resolves every entry through the real driver's cuGetProcAddress_v2.
// Returns the number of entries that could not be resolved.
int resolveDriverTable(PFN_cuGetProcAddress_v12000 realGetProcAddress);

// The entry cuGetProcAddress(name, version) refers to: the entry with this base
// name and the largest ABI version <= `version`, or ApiId::Count.
ApiId findByBaseName(std::string_view base, int version);
// The entry whose exported symbol is `symbol` (per-thread symbols set *perThread).
ApiId findBySymbol(std::string_view symbol, bool* perThread);

}  // namespace graft::hook
