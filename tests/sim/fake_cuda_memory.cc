// fake_cuda_memory.cc - simulated device, pinned and virtual (VMM) memory.
//
// Invariants:
//  - Device memory is real host memory in a fixed-address arena, so copies,
//    memsets and effect kernels move real bytes and the addresses are the same in
//    every run that makes the same allocation calls (interposer allocations in
//    other regions do not shift them).
//  - classify() is the single source of truth for what an address is: a live device
//    allocation or VMM mapping (Device), pinned or registered host memory
//    (PinnedHost), an unallocated part of a simulator region (Invalid), or any other
//    host address (PageableHost).
//  - Freed device memory is poisoned with 0xdd so use-after-free shows up in data.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "fake_cuda_internal.h"

namespace sim {

namespace {

constexpr uint64_t kDevBase = 0x200000000000ull;
constexpr size_t kDevSize = 16ull << 30;
constexpr uint64_t kPinnedBase = 0x210000000000ull;
constexpr size_t kPinnedSize = 4ull << 30;
constexpr uint64_t kVmmBase = 0x220000000000ull;
constexpr size_t kVmmSize = 64ull << 30;
constexpr size_t kAlign = 512;
constexpr size_t kGranularity = 2ull << 20;
constexpr size_t kPoisonLimit = 1ull << 20;

// First-fit allocator over one region; deterministic for a given call sequence.
class RangeAllocator {
 public:
  void init(uint64_t base, size_t size) {
    base_ = base;
    size_ = size;
    free_[base] = size;
  }
  bool inRegion(uint64_t a) const { return a >= base_ && a < base_ + size_; }
  uint64_t alloc(size_t bytes, int device = 0) {
    size_t need = (std::max(bytes, size_t{1}) + kAlign - 1) / kAlign * kAlign;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < need) continue;
      uint64_t a = it->first;
      size_t rest = it->second - need;
      free_.erase(it);
      if (rest) free_[a + need] = rest;
      live_[a] = Block{bytes, need, device};
      return a;
    }
    return 0;
  }
  bool release(uint64_t a) {
    auto it = live_.find(a);
    if (it == live_.end()) return false;
    size_t len = it->second.reserved;
    live_.erase(it);
    std::memset(reinterpret_cast<void*>(a), 0xdd, std::min(len, kPoisonLimit));
    auto next = free_.find(a + len);
    if (next != free_.end()) {
      len += next->second;
      free_.erase(next);
    }
    auto prev = free_.lower_bound(a);
    if (prev != free_.begin()) {
      --prev;
      if (prev->first + prev->second == a) {
        prev->second += len;
        return true;
      }
    }
    free_[a] = len;
    return true;
  }
  // The live allocation containing [a, a+len), if any.
  bool find(uint64_t a, size_t len, uint64_t* base, size_t* size, int* device = nullptr) const {
    auto it = live_.upper_bound(a);
    if (it == live_.begin()) return false;
    --it;
    if (a + std::max(len, size_t{1}) > it->first + std::max(it->second.bytes, size_t{1})) return false;
    if (base) *base = it->first;
    if (size) *size = it->second.bytes;
    if (device) *device = it->second.device;
    return true;
  }
  bool isBase(uint64_t a) const { return live_.count(a) != 0; }
  size_t liveBytes() const {
    size_t n = 0;
    for (auto& [a, b] : live_) n += b.reserved;
    return n;
  }

 private:
  struct Block {
    size_t bytes;
    size_t reserved;
    int device;  // the device of the context that allocated it
  };
  uint64_t base_ = 0;
  size_t size_ = 0;
  std::map<uint64_t, size_t> free_;
  std::map<uint64_t, Block> live_;
};

struct Phys {
  int fd = -1;
  size_t size = 0;
  int maps = 0;
  bool released = false;
};

struct Mapping {
  size_t size = 0;
  uint64_t handle = 0;
  bool access = false;
};

struct MemState {
  bool ready = false;
  RangeAllocator dev, pinned;
  std::map<uint64_t, size_t> registered;
  uint64_t vmmNext = kVmmBase;
  std::map<uint64_t, size_t> reservations;
  std::map<uint64_t, Phys> phys;
  uint64_t nextHandle = 1;
  std::map<uint64_t, Mapping> mappings;
};

MemState& mem() {
  static MemState* m = new MemState();
  return *m;
}

void* mapRegion(uint64_t base, size_t size, int prot) {
  void* p = mmap(reinterpret_cast<void*>(base), size, prot,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED || p != reinterpret_cast<void*>(base)) {
    fatal("cannot map the simulated memory region at fixed address " + std::to_string(base));
  }
  return p;
}

void ensureMem() {
  MemState& m = mem();
  if (m.ready) return;
  mapRegion(kDevBase, kDevSize, PROT_READ | PROT_WRITE);
  mapRegion(kPinnedBase, kPinnedSize, PROT_READ | PROT_WRITE);
  mapRegion(kVmmBase, kVmmSize, PROT_NONE);
  m.dev.init(kDevBase, kDevSize);
  m.pinned.init(kPinnedBase, kPinnedSize);
  m.ready = true;
}

bool inVmm(uint64_t a) { return a >= kVmmBase && a < kVmmBase + kVmmSize; }

// Contiguous accessible VMM mappings covering [a, a+len).
bool vmmMapped(uint64_t a, size_t len, uint64_t* base, size_t* size) {
  MemState& m = mem();
  uint64_t end = a + std::max(len, size_t{1});
  auto it = m.mappings.upper_bound(a);
  if (it == m.mappings.begin()) return false;
  --it;
  if (base) *base = it->first;
  if (size) *size = it->second.size;
  uint64_t cur = a;
  while (it != m.mappings.end() && it->first <= cur) {
    if (!it->second.access) return false;
    cur = it->first + it->second.size;
    if (cur >= end) return true;
    ++it;
  }
  return false;
}

bool registeredRange(uint64_t a, size_t len, uint64_t* base, size_t* size) {
  MemState& m = mem();
  auto it = m.registered.upper_bound(a);
  if (it == m.registered.begin()) return false;
  --it;
  if (a + std::max(len, size_t{1}) > it->first + it->second) return false;
  if (base) *base = it->first;
  if (size) *size = it->second;
  return true;
}

// Allocation range of any simulator-known address.
bool rangeOf(uint64_t a, uint64_t* base, size_t* size, MemClass* cls) {
  MemState& m = mem();
  if (m.dev.find(a, 1, base, size)) {
    *cls = MemClass::Device;
    return true;
  }
  if (inVmm(a) && vmmMapped(a, 1, base, size)) {
    *cls = MemClass::Device;
    return true;
  }
  if (m.pinned.find(a, 1, base, size) || registeredRange(a, 1, base, size)) {
    *cls = MemClass::PinnedHost;
    return true;
  }
  return false;
}

}  // namespace

MemClass classify(uint64_t addr, size_t len) {
  MemState& m = mem();
  if (!m.ready) return MemClass::PageableHost;
  if (m.dev.inRegion(addr)) return m.dev.find(addr, len, nullptr, nullptr) ? MemClass::Device : MemClass::Invalid;
  if (m.pinned.inRegion(addr)) {
    return m.pinned.find(addr, len, nullptr, nullptr) ? MemClass::PinnedHost : MemClass::Invalid;
  }
  if (inVmm(addr)) return vmmMapped(addr, len, nullptr, nullptr) ? MemClass::Device : MemClass::Invalid;
  if (registeredRange(addr, len, nullptr, nullptr)) return MemClass::PinnedHost;
  if (addr == 0) return MemClass::Invalid;
  return MemClass::PageableHost;
}

bool isDevice(uint64_t addr, size_t len) { return classify(addr, len) == MemClass::Device; }

uint64_t deviceAllocLocked(size_t bytes, int device) {
  ensureMem();
  return mem().dev.alloc(bytes, device);
}

int deviceOfMemory(uint64_t addr) {
  MemState& m = mem();
  int device = 0;
  if (m.ready && m.dev.inRegion(addr)) return m.dev.find(addr, 1, nullptr, nullptr, &device) ? device : -1;
  return classify(addr, 1) == MemClass::Device ? 0 : -1;  // mapped (VMM) memory: device 0's
}

bool deviceFreeLocked(uint64_t addr) { return mem().dev.release(addr); }

bool isDeviceAllocationBase(uint64_t addr) { return mem().ready && mem().dev.isBase(addr); }

void initMemoryLocked() { ensureMem(); }

}  // namespace sim

using namespace sim;

extern "C" {

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  SIM_ENTRY("cuMemAlloc_v2", kNeedCtx);
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
  uint64_t a = deviceAllocLocked(bytesize, currentCtx()->device);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  *dptr = a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  SIM_ENTRY("cuMemFree_v2", kNeedCtx);
  if (dptr == 0) return CUDA_SUCCESS;
  if (!mem().dev.isBase(dptr)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
  drainAll(SIM_LOCK, "cuMemFree");  // like cudaFree: waits for the device to be idle
  deviceFreeLocked(dptr);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) {
  SIM_ENTRY("cuMemAllocHost_v2", kNeedCtx);
  if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
  ensureMem();
  uint64_t a = mem().pinned.alloc(bytesize);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  *pp = reinterpret_cast<void*>(a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  SIM_ENTRY("cuMemHostAlloc", kNeedCtx);
  if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
  ensureMem();
  uint64_t a = mem().pinned.alloc(bytesize);
  if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
  *pp = reinterpret_cast<void*>(a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
  SIM_ENTRY("cuMemFreeHost", kNeedCtx);
  auto a = reinterpret_cast<uint64_t>(p);
  if (!mem().pinned.isBase(a)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
  drainAll(SIM_LOCK, "cuMemFreeHost");
  mem().pinned.release(a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  SIM_ENTRY("cuMemHostRegister_v2", kNeedCtx);
  (void)flags;
  auto a = reinterpret_cast<uint64_t>(p);
  if (!p || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (classify(a, bytesize) != MemClass::PageableHost) {
    MemClass c = classify(a, bytesize);
    return c == MemClass::PinnedHost ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED : CUDA_ERROR_INVALID_VALUE;
  }
  // Overlap with an existing registration?
  MemState& m = mem();
  auto it = m.registered.lower_bound(a);
  if (it != m.registered.end() && it->first < a + bytesize) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
  m.registered[a] = bytesize;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostUnregister(void* p) {
  SIM_ENTRY("cuMemHostUnregister", kNeedCtx);
  auto a = reinterpret_cast<uint64_t>(p);
  MemState& m = mem();
  if (!m.registered.count(a)) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  if (CUresult r = checkUnsafeCall(); r != CUDA_SUCCESS) return r;
  drainAll(SIM_LOCK, "cuMemHostUnregister");
  m.registered.erase(a);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int flags) {
  SIM_ENTRY("cuMemHostGetDevicePointer_v2", kNeedCtx);
  if (!pdptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (classify(reinterpret_cast<uint64_t>(p), 1) != MemClass::PinnedHost) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  SIM_ENTRY("cuMemGetAddressRange_v2", kNeedCtx);
  uint64_t base;
  size_t size;
  MemClass cls;
  if (!rangeOf(dptr, &base, &size, &cls) || cls != MemClass::Device) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = base;
  if (psize) *psize = size;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  SIM_ENTRY("cuMemGetInfo_v2", kNeedCtx);
  ensureMem();
  size_t used = mem().dev.liveBytes();
  if (total) *total = kDevSize;
  if (free) *free = kDevSize - used;
  return CUDA_SUCCESS;
}

}  // extern "C"

namespace {

// Writes one pointer attribute; `known` false means unregistered host memory.
CUresult pointerAttribute(void* data, CUpointer_attribute attr, uint64_t ptr, bool strict) {
  uint64_t base = 0;
  size_t size = 0;
  MemClass cls = MemClass::PageableHost;
  bool known = rangeOf(ptr, &base, &size, &cls);
  if (!known && strict) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = known ? currentContext() : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) =
          !known ? 0u : static_cast<unsigned>(cls == MemClass::Device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      if (!known) return strict ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!known || cls == MemClass::Device) {
        if (strict) return CUDA_ERROR_INVALID_VALUE;
        *static_cast<void**>(data) = nullptr;
        return CUDA_SUCCESS;
      }
      *static_cast<void**>(data) = reinterpret_cast<void*>(ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = known ? base : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = !known ? -2 : cls == MemClass::Device ? deviceOfMemory(ptr) : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: {
      // No peer access: another device's memory is out of the current device's reach.
      const Context* ctx = lookupContext(currentContext());
      const bool reach = known && (cls != MemClass::Device || (ctx && deviceOfMemory(ptr) == ctx->device));
      *static_cast<unsigned*>(data) = reach ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: {
      // A stream-ordered allocation's pool (the device's one pool); null for
      // any other memory.
      const auto it = known ? state().asyncPoolBlocks.find(base) : state().asyncPoolBlocks.end();
      *static_cast<CUmemoryPool*>(data) =
          it != state().asyncPoolBlocks.end() ? defaultPoolHandle(it->second.device) : nullptr;
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  SIM_ENTRY("cuPointerGetAttribute", kNeedCtx);
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  return pointerAttribute(data, attribute, ptr, true);
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes, void** data,
                                        CUdeviceptr ptr) {
  SIM_ENTRY("cuPointerGetAttributes", kNeedCtx);
  if (numAttributes && (!attributes || !data)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < numAttributes; ++i) {
    if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = pointerAttribute(data[i], attributes[i], ptr, false); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- VMM

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                               CUmemAllocationGranularity_flags option) {
  SIM_ENTRY("cuMemGetAllocationGranularity", 0);
  (void)option;
  if (!granularity || !prop) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags) {
  SIM_ENTRY("cuMemAddressReserve", 0);
  (void)addr;
  (void)flags;
  if (!ptr || size == 0 || size % kGranularity) return CUDA_ERROR_INVALID_VALUE;
  ensureMem();
  MemState& m = mem();
  size_t align = std::max(alignment, kGranularity);
  uint64_t a = (m.vmmNext + align - 1) / align * align;
  if (a + size > kVmmBase + kVmmSize) return CUDA_ERROR_OUT_OF_MEMORY;
  m.vmmNext = a + size;
  m.reservations[a] = size;
  *ptr = a;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SIM_ENTRY("cuMemAddressFree", 0);
  MemState& m = mem();
  auto it = m.reservations.find(ptr);
  if (it == m.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  auto mp = m.mappings.lower_bound(ptr);
  if (mp != m.mappings.end() && mp->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
  m.reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) {
  SIM_ENTRY("cuMemCreate", kNeedCtx);
  if (!handle || !prop || flags != 0 || size == 0 || size % kGranularity) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      prop->location.id != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int fd = memfd_create("graft-sim-phys", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  MemState& m = mem();
  uint64_t h = m.nextHandle++;
  m.phys[h] = Phys{fd, size, 0, false};
  *handle = h;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  SIM_ENTRY("cuMemRelease", 0);
  MemState& m = mem();
  auto it = m.phys.find(handle);
  if (it == m.phys.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  if (it->second.maps == 0) {
    close(it->second.fd);
    m.phys.erase(it);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags) {
  SIM_ENTRY("cuMemMap", 0);
  MemState& m = mem();
  auto ph = m.phys.find(handle);
  if (flags != 0 || ph == m.phys.end() || ph->second.released || size == 0 || size % kGranularity ||
      offset % kGranularity || offset + size > ph->second.size || ptr % kGranularity) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto rv = m.reservations.upper_bound(ptr);
  if (rv == m.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --rv;
  if (ptr + size > rv->first + rv->second) return CUDA_ERROR_INVALID_VALUE;
  auto mp = m.mappings.lower_bound(ptr);
  if (mp != m.mappings.end() && mp->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (mp != m.mappings.begin()) {
    auto prev = std::prev(mp);
    if (prev->first + prev->second.size > ptr) return CUDA_ERROR_INVALID_VALUE;
  }
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->second.fd,
                 static_cast<off_t>(offset));
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  ++ph->second.maps;
  m.mappings[ptr] = Mapping{size, handle, false};
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SIM_ENTRY("cuMemUnmap", 0);
  MemState& m = mem();
  // Must cover whole mappings exactly.
  uint64_t cur = ptr;
  std::vector<uint64_t> victims;
  while (cur < ptr + size) {
    auto it = m.mappings.find(cur);
    if (it == m.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    victims.push_back(cur);
    cur += it->second.size;
  }
  if (cur != ptr + size) return CUDA_ERROR_INVALID_VALUE;
  drainAll(SIM_LOCK, "cuMemUnmap");
  for (uint64_t v : victims) {
    Mapping mp = m.mappings[v];
    mmap(reinterpret_cast<void*>(v), mp.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
         0);
    m.mappings.erase(v);
    auto ph = m.phys.find(mp.handle);
    if (ph != m.phys.end() && --ph->second.maps == 0 && ph->second.released) {
      close(ph->second.fd);
      m.phys.erase(ph);
    }
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  SIM_ENTRY("cuMemSetAccess", 0);
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  MemState& m = mem();
  uint64_t cur = ptr;
  std::vector<uint64_t> hits;
  while (cur < ptr + size) {
    auto it = m.mappings.find(cur);
    if (it == m.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    hits.push_back(cur);
    cur += it->second.size;
  }
  bool rw = false;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE && desc[i].location.id == 0) {
      rw = desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
  }
  for (uint64_t h : hits) {
    Mapping& mp = m.mappings[h];
    mprotect(reinterpret_cast<void*>(h), mp.size, rw ? PROT_READ | PROT_WRITE : PROT_NONE);
    mp.access = rw;
  }
  return CUDA_SUCCESS;
}

}  // extern "C"
