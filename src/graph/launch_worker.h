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
// Taking over. Jobs run one at a time, in order, by whoever holds the runner
// token: the worker, or the producer while it waits in drain() or slot().
// A producer that must wait anyway and finds the token free (the worker is
// asleep, or not yet back on a core after queue() woke it) runs the queued
// jobs itself instead of waiting for the worker to wake up; the worker then
// finds nothing left to run. Only while the worker is running jobs does the
// producer wait for it.
//
// Idle worker. With pollMicros > 0, queue() makes no system call while the
// program issues launches every few milliseconds (a futex wake of a sleeping
// thread cost the program's thread 3-12 us per launch on the H100 hosts,
// docs/PERF.md):
//   1. it spins for up to spinMicros after its last job, but only while
//      spinning pays: when the idle spell before that job ended within
//      spinMicros (jobs come back to back, as in a C++ launch loop). After a
//      longer spell (PyTorch launches every few milliseconds) it skips the
//      spin, which would only burn a core beside the program's thread, until
//      a job comes within spinMicros of the worker going idle again;
//   2. then it polls: sleeps pollMicros at a time (a futex wait with a
//      timeout, timer slack 5 us) until kPollMillis passed without a job;
//   3. then it sleeps until queue() wakes it (one system call, once per idle
//      spell).
// A job queued while it polls starts at most pollMicros later, unless the
// producer waits for it (drain(), slot()), which wakes it at once. With
// pollMicros 0 the worker goes from spinning straight to step 3.
//
// Threading: slot/queue/drain/failed/finish from the producer only; the run
// function on the worker thread, or on the producer's inside drain()/slot()
// (never both at once: the runner token). Allocates only when the thread starts.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include <linux/futex.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/own_thread.h"

namespace graft::graph {

// A LaunchWorker's statistics (see above).
struct LaunchWorkerStats {
  double cpuSeconds = 0;      // CPU time the worker thread used
  uint64_t deepSleeps = 0;    // times it slept until woken (step 3)
  uint64_t spinsCaught = 0;   // idle spells it spun through to the next job
  uint64_t spinsSkipped = 0;  // idle spells it did not spin in (step 1 skipped)
  uint64_t takenOver = 0;     // jobs the producer ran itself while it waited ("Taking over")
};

template <typename Job, size_t kSlots = 8>
class LaunchWorker {
 public:
  // `run` returns 0, or an error that stops the worker (see drain()).
  // `onThread` (may be null) runs first on the worker thread. pollMicros: see
  // above (0: no polling).
  // spinMicros: see above (0: never spin while idle).
  LaunchWorker(std::function<int(Job&)> run, void (*onThread)(), unsigned pollMicros = 0,
               unsigned spinMicros = kSpinMicros)
      : run_(std::move(run)), on_thread_(onThread), poll_micros_(pollMicros), spin_micros_(spinMicros) {}
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
      waitOrTakeOver(st);
    }
  }
  void queue() {
    ++queued_;
    // seq_cst store, then seq_cst load of idle_: against the worker's store
    // of idle_ and load of queuedShared_ before it sleeps (see idleWait), one
    // side sees the other's store, so a job is never left to a sleeper.
    queuedShared_.store(queued_, std::memory_order_seq_cst);
    wakeWorker(kSleeping);
  }
  bool idle() const { return state_.load(std::memory_order_acquire) == queued_; }
  // Stopped after a failed job: the rest waits for a caller to take over (drain()).
  bool halted() const { return state_.load(std::memory_order_acquire) & kHalted; }
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
      waitOrTakeOver(st);
    }
  }
  // For the report, so far.
  LaunchWorkerStats stats() const {
    return {cpuSeconds(), deep_sleeps_.load(std::memory_order_relaxed), spins_caught_.load(std::memory_order_relaxed),
            spins_skipped_.load(std::memory_order_relaxed), taken_over_.load(std::memory_order_relaxed)};
  }
  double cpuSeconds() const {
    clockid_t clock;
    timespec ts{};
    // 0 in a forked child: the thread is the parent's.
    if (!started_.load(std::memory_order_acquire) || !usable() || pthread_getcpuclockid(thread_, &clock) != 0 ||
        clock_gettime(clock, &ts) != 0)
      return 0;
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
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
      std::thread t = core::startOwnThread([this] {
        prctl(PR_SET_TIMERSLACK, 5000UL, 0UL, 0UL, 0UL);  // polls wake within ~5 us of their time
        if (on_thread_) on_thread_();
        loop();
      });
      thread_ = t.native_handle();
      started_.store(true, std::memory_order_release);
      t.detach();
    } catch (const std::exception&) {
      return false;
    }
    return true;
  }
 private:
  // state_: jobs finished, with kHalted set while the worker waits for the
  // caller to take over after a failure. Every change wakes the waiters.
  static constexpr uint64_t kHalted = uint64_t(1) << 63;
  static constexpr unsigned kSpinMicros = 200;
  static constexpr int kPollMillis = 20;
  // idle_: what the worker does while it has no job.
  static constexpr uint32_t kAwake = 0, kPolling = 1, kSleeping = 2;
  // Producer, with jobs queued after `st` (jobs done): runs them itself if
  // the runner token is free, else waits until the worker has run one more.
  void waitOrTakeOver(uint64_t st) {
    if (tryTakeRunner()) {
      taken_over_.fetch_add(runQueued(), std::memory_order_relaxed);
      return;
    }
    wakeWorker(kPolling);  // the caller waits anyway: no poll period on top
    waitForChange(state_, st);
  }
  bool tryTakeRunner() {
    uint32_t expected = 0;
    return runner_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  // With the runner token: runs the queued jobs in order until none is left
  // or one fails (state_ then holds kHalted), then gives the token back.
  // Returns the number of jobs run.
  uint64_t runQueued() {
    uint64_t next = state_.load(std::memory_order_acquire);
    uint64_t ran = 0;
    while (!(next & kHalted) && jobQueued(next)) {
      const int rc = run_(slots_[next % kSlots]);
      ++ran;
      if (rc != 0) {
        failure_ = rc;
        next |= kHalted;
      } else {
        ++next;
      }
      state_.store(next, std::memory_order_release);
      state_.notify_all();
    }
    runner_.store(0, std::memory_order_release);
    runner_.notify_all();
    return ran;
  }
  // Waits until `a` no longer holds `old`: spins for a while first, since a
  // launch takes tens of microseconds and a futex sleep and wake-up costs
  // several (and the waker's notify is nearly free while nobody sleeps).
  static void waitForChange(const std::atomic<uint64_t>& a, uint64_t old) {
    if (!spinUntil(kSpinMicros, [&] { return a.load(std::memory_order_acquire) != old; }))
      a.wait(old, std::memory_order_acquire);
  }
  // Spins for up to `micros` until done() holds; false if it never did.
  template <typename Done>
  static bool spinUntil(unsigned micros, Done done) {
    if (done()) return true;
    if (!micros) return false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
    for (unsigned i = 1;; ++i) {
      if (done()) return true;
#if defined(__x86_64__)
      _mm_pause();
#endif
      if (i % 64 == 0 && std::chrono::steady_clock::now() > until) return false;
    }
  }

  static long futex(std::atomic<uint32_t>& word, int op, uint32_t value, const timespec* timeout) {
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), op | FUTEX_PRIVATE_FLAG, value, timeout,
                   nullptr, 0);
  }
  // Producer: wakes the worker if it is idle at `atLeast` (kPolling: polling
  // or asleep; kSleeping: asleep).
  void wakeWorker(uint32_t atLeast) {
    if (idle_.load(std::memory_order_seq_cst) < atLeast) return;
    signal_.fetch_add(1, std::memory_order_seq_cst);
    futex(signal_, FUTEX_WAKE, 1, nullptr);
  }
  bool jobQueued(uint64_t next) const { return queuedShared_.load(std::memory_order_seq_cst) != next; }
  // Worker: sleeps at idle level `level` until woken or `timeout` (null:
  // none) passes, unless a job after `next` is queued.
  void sleepUnlessQueued(uint64_t next, uint32_t level, const timespec* timeout) {
    const uint32_t sig = signal_.load(std::memory_order_seq_cst);
    idle_.store(level, std::memory_order_seq_cst);
    if (!jobQueued(next)) {
      if (!timeout) deep_sleeps_.fetch_add(1, std::memory_order_relaxed);
      futex(signal_, FUTEX_WAIT, sig, timeout);
    }
    idle_.store(kAwake, std::memory_order_relaxed);
  }
  // Worker: returns once a job after `next` is queued (or spuriously).
  void idleWait(uint64_t next) {
    const auto idleSince = std::chrono::steady_clock::now();
    if (spin_pays_) {
      if (spinUntil(spin_micros_, [&] { return jobQueued(next); })) {
        spins_caught_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    } else {
      spins_skipped_.fetch_add(1, std::memory_order_relaxed);
      if (jobQueued(next)) return;
    }
    waitUnspun(next);
    // Spin next time only if this spell was short enough for a spin to catch
    // (judged only when a job is left for the worker: one the producer took
    // over says nothing about the worker's spells).
    if (jobQueued(state_.load(std::memory_order_acquire)))
      spin_pays_ = spin_micros_ &&
                   std::chrono::steady_clock::now() - idleSince <= std::chrono::microseconds(spin_micros_);
  }
  // Worker: idleWait after the spin (polling, then sleeping).
  void waitUnspun(uint64_t next) {
    if (poll_micros_) {
      const auto pollUntil = std::chrono::steady_clock::now() + std::chrono::milliseconds(kPollMillis);
      const timespec period{0, long(poll_micros_) * 1000};
      while (!jobQueued(next) && std::chrono::steady_clock::now() < pollUntil)
        sleepUnlessQueued(next, kPolling, &period);
    }
    if (!jobQueued(next)) sleepUnlessQueued(next, kSleeping, nullptr);
  }

  void loop() {
    for (;;) {
      const uint64_t st = state_.load(std::memory_order_acquire);
      if (st & kHalted) {  // until the caller has taken over (finish())
        waitForChange(state_, st);
        continue;
      }
      if (!jobQueued(st)) {
        idleWait(st);
        continue;
      }
      if (!tryTakeRunner()) {  // the producer is running them
        if (!spinUntil(kSpinMicros, [&] { return runner_.load(std::memory_order_acquire) == 0; }))
          runner_.wait(1, std::memory_order_acquire);
        continue;
      }
      runQueued();
    }
  }

  std::function<int(Job&)> run_;
  void (*on_thread_)();
  std::array<Job, kSlots> slots_{};
  uint64_t queued_ = 0;                    // producer's count
  std::atomic<uint64_t> queuedShared_{0};  // ... published to the worker
  std::atomic<uint32_t> signal_{0};        // the worker's futex word: bumped to wake it
  std::atomic<uint32_t> idle_{kAwake};
  std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> runner_{0};  // 1: the worker or the producer is running jobs
  int failure_ = 0;  // written by the runner of the failed job, read by the producer after drain()
  unsigned poll_micros_;
  unsigned spin_micros_;
  bool spin_pays_ = true;  // worker only: spin in the next idle spell
  std::atomic<uint64_t> deep_sleeps_{0};
  std::atomic<uint64_t> spins_caught_{0};
  std::atomic<uint64_t> spins_skipped_{0};
  std::atomic<uint64_t> taken_over_{0};
  pthread_t thread_{};
  std::atomic<bool> started_{false};
  static inline std::atomic<bool> forked_{false};
};

}  // namespace graft::graph
