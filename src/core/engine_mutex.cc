#include "core/engine_mutex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/hot_path.h"

namespace graft::core {

GRAFT_COLD void EngineMutex::lockContended() {
  // A short spin first: the engine lock is held for a few hundred nanoseconds.
  for (int i = 0; i < 100; ++i) {
    uint32_t expected = kFree;
    if (state_.load(std::memory_order_relaxed) == kFree &&
        state_.compare_exchange_weak(expected, kLocked, std::memory_order_acquire,
                                     std::memory_order_relaxed))
      return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  // Then sleep. Whoever takes the lock from here on marks it kSleepers, so
  // the release that follows wakes the next sleeper (at worst one spurious wake).
  while (state_.exchange(kSleepers, std::memory_order_acquire) != kFree)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, kSleepers, nullptr,
            nullptr, 0);
}

GRAFT_COLD void EngineMutex::wakeOne() {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

}  // namespace graft::core
