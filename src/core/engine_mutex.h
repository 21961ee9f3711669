// EngineMutex: the engine lock. Taking and releasing it uncontended is one
// atomic instruction each, inline: no call into the C library, whose code and
// relocations would be more cache lines on every op (core/hot_path.h). A
// contended lock spins briefly, then sleeps in the kernel (futex) until the
// holder releases it; a release wakes one sleeper.
//
// Threading: any thread. Not recursive. Satisfies Lockable, so it works with
// std::unique_lock. May not allocate; the slow paths make system calls.
#pragma once

#include <atomic>
#include <cstdint>

namespace graft::core {

class EngineMutex {
 public:
  EngineMutex() = default;
  EngineMutex(const EngineMutex&) = delete;
  EngineMutex& operator=(const EngineMutex&) = delete;

  void lock() {
    uint32_t expected = kFree;
    if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed)) [[likely]]
      return;
    lockContended();
  }
  bool try_lock() {
    uint32_t expected = kFree;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kSleepers) [[unlikely]] wakeOne();
  }

 private:
  static constexpr uint32_t kFree = 0, kLocked = 1, kSleepers = 2;  // kSleepers: locked, may have sleepers
  void lockContended();
  void wakeOne();
  std::atomic<uint32_t> state_{kFree};
};

}  // namespace graft::core
