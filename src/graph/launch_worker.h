// LaunchWorker: one graft thread that runs queued jobs (graph launches) in
// the order they were queued, so the program's thread does not wait for the
// driver's node updates and cuGraphLaunch.
//
// Protocol (one producer at a time: the caller holds the engine lock):
//   start()  starts the worker thread (once, before anything is queued);
//   slot()   the next free job slot (waits while every slot is queued);
//   queue()  publishes it; the worker runs it later, in order;
//   drain()  returns once every queued job has run, or when one failed: the
//            worker then stops until the caller takes over what is left
//            (failed() names it, finish() marks all queued jobs as done).
// Nothing queued is ever dropped: after a failure the worker runs nothing
// more, so the caller can issue the failed work and everything after it in
// order.
//
// Threading: slot/queue/drain/failed/finish from the producer only; the run
// function on the worker thread only. Allocates only when the thread starts.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include <pthread.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace graft::graph {

template <typename Job, size_t kSlots = 8>
class LaunchWorker {
 public:
  // `run` returns 0, or an error that stops the worker (see drain()).
  // `onThread` (may be null) runs first on the worker thread.
  LaunchWorker(std::function<int(Job&)> run, void (*onThread)())
      : run_(std::move(run)), on_thread_(onThread) {}
  ~LaunchWorker() = default;  // the thread is detached and idle at exit
  LaunchWorker(const LaunchWorker&) = delete;
  LaunchWorker& operator=(const LaunchWorker&) = delete;

  // The next free slot, or nullptr when the worker stopped after a failure
  // (the caller must take over first: drain()).
  Job* slot() {
    for (;;) {
      const uint64_t st = state_.load(std::memory_order_acquire);
      if (st & kHalted) return nullptr;
      if (queued_ - st < kSlots) return &slots_[queued_ % kSlots];
      waitForChange(state_, st);
    }
  }
  void queue() {
    ++queued_;
    queuedShared_.store(queued_, std::memory_order_release);
    signal_.fetch_add(1, std::memory_order_release);
    signal_.notify_one();
  }
  bool idle() const { return state_.load(std::memory_order_acquire) == queued_; }
  // False in a child the process forked after the thread started: the thread
  // is not there (and the parent's CUDA context is not usable either).
  static bool usable() { return !forked_.load(std::memory_order_relaxed); }
  // True: every queued job ran. False: the job firstUndone() failed; the
  // worker is stopped, and the caller runs the rest itself, then finish().
  bool drain() {
    for (;;) {
      const uint64_t st = state_.load(std::memory_order_acquire);
      if (st == queued_) return true;
      if (st & kHalted) return false;
      waitForChange(state_, st);
    }
  }
  // After drain() returned false: the failed job, then those queued after it.
  uint64_t firstUndone() const { return state_.load(std::memory_order_acquire) & ~kHalted; }
  uint64_t queuedCount() const { return queued_; }
  Job& job(uint64_t index) { return slots_[index % kSlots]; }
  int failure() const { return failure_; }
  void finish() {
    state_.store(queued_, std::memory_order_release);
    state_.notify_all();
  }

  // Starts the thread; false if it could not be created (nothing queued may
  // then be used).
  bool start() {
    static std::once_flag atfork;
    std::call_once(atfork, [] {
      pthread_atfork(nullptr, nullptr, [] { forked_.store(true, std::memory_order_relaxed); });
    });
    try {
      std::thread([this] {
        if (on_thread_) on_thread_();
        loop();
      }).detach();
    } catch (const std::exception&) {
      return false;
    }
    return true;
  }
 private:
  // state_: jobs finished, with kHalted set while the worker waits for the
  // caller to take over after a failure. Every change wakes the waiters.
  static constexpr uint64_t kHalted = uint64_t(1) << 63;
  // Waits until `a` no longer holds `old`: spins for a while first, since a
  // launch takes tens of microseconds and a futex sleep and wake-up costs
  // several (and the waker's notify is nearly free while nobody sleeps).
  static void waitForChange(const std::atomic<uint64_t>& a, uint64_t old) {
    constexpr int spinMicros = 200;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spinMicros);
    for (unsigned i = 1;; ++i) {
      if (a.load(std::memory_order_acquire) != old) return;
#if defined(__x86_64__)
      _mm_pause();
#endif
      if (i % 64 == 0 && std::chrono::steady_clock::now() > until) break;
    }
    a.wait(old, std::memory_order_acquire);
  }

  void loop() {
    uint64_t next = 0;
    for (;;) {
      const uint64_t sig = signal_.load(std::memory_order_acquire);
      if (queuedShared_.load(std::memory_order_acquire) == next) {
        waitForChange(signal_, sig);  // nothing queued: awake a while, then asleep until queue()
        continue;
      }
      const int rc = run_(slots_[next % kSlots]);
      if (rc != 0) {
        failure_ = rc;
        uint64_t st = next | kHalted;
        state_.store(st, std::memory_order_release);
        state_.notify_all();
        while (st & kHalted) {
          waitForChange(state_, st);
          st = state_.load(std::memory_order_acquire);
        }
        next = st;  // the caller ran the rest
        continue;
      }
      ++next;
      state_.store(next, std::memory_order_release);
      state_.notify_all();
    }
  }

  std::function<int(Job&)> run_;
  void (*on_thread_)();
  std::array<Job, kSlots> slots_{};
  uint64_t queued_ = 0;                    // producer's count
  std::atomic<uint64_t> queuedShared_{0};  // ... published to the worker
  std::atomic<uint64_t> signal_{0};        // bumped by queue(): wakes the worker
  std::atomic<uint64_t> state_{0};
  int failure_ = 0;
  static inline std::atomic<bool> forked_{false};
};

}  // namespace graft::graph
