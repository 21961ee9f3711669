#include "core/hot_arena.h"

#include <pthread.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "log/log.h"

namespace graft::core {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr int kClasses = 48;  // 64 B << 47: beyond any reservation

// Size class of a request: block size 64 << class.
int sizeClass(size_t bytes) {
  const size_t b = bytes <= HotArena::kAlign ? HotArena::kAlign : std::bit_ceil(bytes);
  return std::countr_zero(b) - std::countr_zero(HotArena::kAlign);
}

struct FreeBlock {
  FreeBlock* next;
};

struct ArenaState {
  std::mutex mutex;
  bool used = false;                  // a block was handed out: configure() is too late
  size_t wantBytes = HotArena::kDefaultBytes;
  std::atomic<uintptr_t> base{0};     // 0: not reserved (yet, or off, or mmap failed)
  std::atomic<size_t> size{0};
  size_t next = 0;                    // bump offset
  size_t heapBytes = 0;
  std::array<FreeBlock*, kClasses> free{};
};

ArenaState& state();

ArenaState* newState() {
  auto* s = new ArenaState();  // never destroyed: blocks may be freed at exit
  // A fork while another thread allocates must not leave the child's copy of
  // the mutex locked forever: hold it across fork, as malloc does.
  pthread_atfork([] { state().mutex.lock(); }, [] { state().mutex.unlock(); },
                 [] { state().mutex.unlock(); });
  return s;
}

ArenaState& state() {
  static ArenaState* s = newState();
  return *s;
}

// Under the mutex: reserves the range on first use.
void reserve(ArenaState& s) {
  if (s.used) return;
  s.used = true;
  if (s.wantBytes == 0) return;
  const size_t bytes = (s.wantBytes + kHugePage - 1) & ~(kHugePage - 1);
  void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (raw == MAP_FAILED) {
    GRAFT_WARN("hot arena: cannot reserve {} MiB ({}); graft's per-op data stays on the heap", bytes >> 20,
               std::strerror(errno));
    return;
  }
  // Aligned to a huge page, so each 2 MiB of the range can be one.
  const uintptr_t start = (reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  if (madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE) != 0)
    GRAFT_DEBUG("hot arena: no transparent huge pages ({}); it still keeps graft's data together",
                std::strerror(errno));
  s.size.store(bytes, std::memory_order_relaxed);
  s.base.store(start, std::memory_order_release);
}

}  // namespace

bool HotArena::configure(size_t bytes) {
  ArenaState& s = state();
  std::lock_guard lock(s.mutex);
  if (s.used) return false;
  s.wantBytes = bytes;
  return true;
}

void* HotArena::allocate(size_t bytes) {
  ArenaState& s = state();
  const int c = sizeClass(bytes);
  const size_t block = kAlign << c;
  {
    std::lock_guard lock(s.mutex);
    reserve(s);
    const uintptr_t base = s.base.load(std::memory_order_relaxed);
    const size_t size = s.size.load(std::memory_order_relaxed);
    if (base && block <= size / 8) {
      if (FreeBlock* f = s.free[c]) {
        s.free[c] = f->next;
        return f;
      }
      if (s.next + block <= size) {
        void* p = reinterpret_cast<void*>(base + s.next);
        s.next += block;
        return p;
      }
    }
  }
  void* p = ::operator new(bytes, std::align_val_t(kAlign));
  std::lock_guard lock(s.mutex);
  s.heapBytes += bytes;
  return p;
}

void HotArena::deallocate(void* p, size_t bytes) noexcept {
  if (!p) return;
  ArenaState& s = state();
  if (owns(p)) {
    std::lock_guard lock(s.mutex);
    const int c = sizeClass(bytes);
    s.free[c] = new (p) FreeBlock{s.free[c]};
    return;
  }
  {
    std::lock_guard lock(s.mutex);
    s.heapBytes -= bytes;
  }
  ::operator delete(p, std::align_val_t(kAlign));
}

bool HotArena::owns(const void* p) {
  ArenaState& s = state();
  const uintptr_t base = s.base.load(std::memory_order_acquire);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return base && a >= base && a - base < s.size.load(std::memory_order_relaxed);
}

HotArena::Stats HotArena::stats(bool countHugePages) {
  ArenaState& s = state();
  Stats out;
  {
    std::lock_guard lock(s.mutex);
    out.reservedBytes = s.size.load(std::memory_order_relaxed);
    out.usedBytes = s.next;
    out.heapBytes = s.heapBytes;
  }
  const uintptr_t base = s.base.load(std::memory_order_acquire);
  if (!base || !countHugePages) return out;
  out.hugeBytes = hugePageBytesIn(base, base + out.reservedBytes);
  return out;
}

size_t hugePageBytesIn(uintptr_t begin, uintptr_t end) {
  size_t bytes = 0;
  // The AnonHugePages lines of the mappings that overlap [begin, end).
  if (FILE* f = std::fopen("/proc/self/smaps", "r")) {
    char line[512];
    bool inRange = false;
    while (std::fgets(line, sizeof line, f)) {
      unsigned long lo = 0, hi = 0;
      if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
        if (lo >= end) break;  // mappings come in address order: the kernel need not describe the rest
        inRange = hi > begin;
        continue;
      }
      if (inRange && std::strncmp(line, "AnonHugePages:", 14) == 0)
        bytes += size_t(std::strtoul(line + 14, nullptr, 10)) << 10;
    }
    std::fclose(f);
  }
  return bytes;
}

}  // namespace graft::core
