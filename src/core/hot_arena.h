// HotArena: graft's per-op data kept together, apart from the program's heap.
//
// Between two intercepted ops the program runs its own code (an interpreter,
// a dispatcher), which evicts graft's pages from the TLB as well as its lines
// from the caches. On the normal heap graft's per-op objects (the runtime, the
// engine, the kernel index, the held and recorded ops) are scattered among
// the program's allocations, one page each, so every op pays a page walk per
// object. The arena is one reserved range, on transparent huge pages where the
// kernel grants them (madvise), so those objects share one TLB entry, or at
// least a few neighbouring pages (core/hot_path.h, docs/PERF.md).
//
// Only containers on the per-op path use it (HotAllocator, HotVector,
// makeHot); the rest of graft stays on the normal heap. Blocks are 64-byte
// aligned power-of-two size classes, reused through free lists; a block that
// does not fit (larger than an eighth of the arena, or the arena full) comes
// from the normal heap, so the arena never fails an allocation.
//
// Threading: allocate/deallocate are thread-safe (one mutex); they are never
// on the per-op path (graft does not allocate there). Never calls the driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace graft::core {

class HotArena {
 public:
  static constexpr size_t kAlign = 64;
  static constexpr size_t kDefaultBytes = size_t(64) << 20;
  // The reservation, before first use (0: off, every block from the normal
  // heap). Returns false, changing nothing, once a block has been allocated.
  static bool configure(size_t bytes);
  // A kAlign-aligned block of at least `bytes`; throws std::bad_alloc only if
  // the normal heap does.
  static void* allocate(size_t bytes);
  // `bytes` as passed to allocate.
  static void deallocate(void* p, size_t bytes) noexcept;
  // True for a block that came from the arena (tests, the exit report).
  static bool owns(const void* p);

  struct Stats {
    size_t reservedBytes = 0;  // 0: off, or not used yet
    size_t usedBytes = 0;      // handed out from the range so far (high-water mark)
    size_t heapBytes = 0;      // blocks that did not fit, from the normal heap (live)
    size_t hugeBytes = 0;      // of the range, on huge pages (from /proc/self/smaps; 0 if not counted)
  };
  // With countHugePages, reads /proc/self/smaps for hugeBytes (about 13 ms in
  // a PyTorch process on the H100 host): never on the per-op path.
  static Stats stats(bool countHugePages = false);
};

// Bytes of the mappings overlapping [begin, end) that are on transparent huge
// pages (/proc/self/smaps, AnonHugePages). Reads a file: not for the per-op path.
size_t hugePageBytesIn(uintptr_t begin, uintptr_t end);

// std allocator over the arena; every allocation is line-aligned, so an
// element array starts a cache line (core/hot_path.h).
template <typename T>
struct HotAllocator {
  static_assert(alignof(T) <= HotArena::kAlign, "HotArena aligns to 64 bytes");
  using value_type = T;
  HotAllocator() = default;
  template <typename U>
  HotAllocator(const HotAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(HotArena::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { HotArena::deallocate(p, n * sizeof(T)); }
  bool operator==(const HotAllocator&) const { return true; }
};

template <typename T>
using HotVector = std::vector<T, HotAllocator<T>>;

template <typename T>
struct HotDelete {
  void operator()(T* p) const noexcept {
    p->~T();
    HotArena::deallocate(p, sizeof(T));
  }
};
template <typename T>
using HotPtr = std::unique_ptr<T, HotDelete<T>>;

// `new T(args...)` in the arena.
template <typename T, typename... A>
HotPtr<T> makeHot(A&&... args) {
  static_assert(alignof(T) <= HotArena::kAlign, "HotArena aligns to 64 bytes");
  void* p = HotArena::allocate(sizeof(T));
  try {
    return HotPtr<T>(new (p) T(std::forward<A>(args)...));
  } catch (...) {
    HotArena::deallocate(p, sizeof(T));
    throw;
  }
}

}  // namespace graft::core
