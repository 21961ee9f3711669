// StageClock: graft's own CPU time, by stage (GRAFT_PROFILE=1), so a user can
// see what graft costs per op inside their program, where caches are cold
// and a tight-loop benchmark says little (docs/PERF.md).
//
// Stages nest (a match can launch a graph, a launch updates nodes); each
// stage is charged its exclusive time, its nested stages' time excluded.
// Counted in timestamp-counter ticks on x86-64 (steady_clock nanoseconds
// elsewhere), converted with a rate calibrated between enable() and report().
//
// Threading: timers run under the engine lock or on graft's launch thread;
// totals are relaxed atomics, the nesting pointer is thread-local. Off (the
// default): one predictable branch per timer. No allocation, no logging, no
// driver calls.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace graft::core {

#define GRAFT_STAGES(X)                                                                  \
  X(Intercept, "intercept")          /* a stream-ordered op's wrapper, its other stages left out */ \
  X(Lock, "lock")                    /* taking the engine lock for a stream-ordered op */ \
  X(Encode, "encode")                /* driver arguments -> op description (hook) */      \
  X(Context, "context")              /* asking the driver for the current context */      \
  X(KernelLookup, "kernel_lookup")   /* finding the kernel's parameter layout */          \
  X(Match, "match")                  /* matching, holding, the patch list (engine) */     \
  X(FastLane, "fast_lane")           /* a launch compared in place and held (fast lane) */ \
  X(FastLaneDescribed, "fast_lane_described") /* ... one with attributes, `extra` or shared memory, described in full */ \
  X(FastLaneValue, "fast_lane_value") /* ... its parameter bytes compared with the expected op's */ \
  X(Record, "record")                /* recording an op the program's call issued */      \
  X(Build, "build")                  /* building one piece's graph */                     \
  X(Launch, "launch")                /* a segment's graph launch: stream joins, events */ \
  X(LaunchQueue, "launch_queue")     /* ... of it, handing the job to the launch thread (a wake) */ \
  X(NodeUpdate, "node_update")       /* one executable-graph node update */               \
  X(GraphLaunchCall, "cuGraphLaunch") /* the driver's cuGraphLaunch itself */             \
  X(Reissue, "reissue")              /* issuing one held op eagerly (the driver call) */  \
  X(DrainWait, "drain_wait")         /* waiting for queued graph launches to reach the driver */

#define GRAFT_STAGE_MEMBER(name, text) name,
enum class Stage : uint8_t { GRAFT_STAGES(GRAFT_STAGE_MEMBER) Count };
#undef GRAFT_STAGE_MEMBER

#define GRAFT_STAGE_NAME(name, text) text,
inline constexpr std::string_view kStageNames[] = {GRAFT_STAGES(GRAFT_STAGE_NAME)};
#undef GRAFT_STAGE_NAME

class StageClock {
 public:
  struct Totals {
    std::array<uint64_t, size_t(Stage::Count)> calls{};
    std::array<double, size_t(Stage::Count)> micros{};
  };

  static bool enabled() { return enabled_.load(std::memory_order_relaxed); }
  // Once, before any timer runs (at start-up).
  static void enable() {
    start_ticks_ = now();
    start_time_ = std::chrono::steady_clock::now();
    enabled_.store(true, std::memory_order_release);
  }
  static uint64_t now() {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count());
#endif
  }
  static void add(Stage s, uint64_t ticks) {
    ticks_[size_t(s)].fetch_add(ticks, std::memory_order_relaxed);
    calls_[size_t(s)].fetch_add(1, std::memory_order_relaxed);
  }
  // Totals so far, in microseconds (call under the engine lock).
  static Totals totals() {
    Totals t;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
    const uint64_t ticks = now() - start_ticks_;
    const double ticksPerMicro = seconds > 0 && ticks ? double(ticks) / (seconds * 1e6) : 1e3;
    for (size_t i = 0; i < size_t(Stage::Count); ++i) {
      t.calls[i] = calls_[i].load(std::memory_order_relaxed);
      t.micros[i] = double(ticks_[i].load(std::memory_order_relaxed)) / ticksPerMicro;
    }
    return t;
  }

 private:
  static inline std::atomic<bool> enabled_{false};
  static inline uint64_t start_ticks_ = 0;
  static inline std::chrono::steady_clock::time_point start_time_{};
  // Atomic: graft's launch thread times its node updates and launches too.
  static inline std::array<std::atomic<uint64_t>, size_t(Stage::Count)> ticks_{};
  static inline std::array<std::atomic<uint64_t>, size_t(Stage::Count)> calls_{};
};

// Charges its scope's exclusive time to a stage when the clock is on.
class StageTimer {
 public:
  // Inline and a single test when the clock is off (the per-op path).
  [[gnu::always_inline]] explicit StageTimer(Stage s) : stage_(s) {
    if (StageClock::enabled()) [[unlikely]] begin();
  }
  [[gnu::always_inline]] ~StageTimer() {
    if (on_) [[unlikely]] end();
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  [[gnu::noinline]] void begin() {
    on_ = true;
    parent_ = current_;
    current_ = this;
    start_ = StageClock::now();
  }
  [[gnu::noinline]] void end() {
    const uint64_t elapsed = StageClock::now() - start_;
    StageClock::add(stage_, elapsed > nested_ ? elapsed - nested_ : 0);
    if (parent_) parent_->nested_ += elapsed;
    current_ = parent_;
  }

  static inline thread_local StageTimer* current_ __attribute__((tls_model("initial-exec"))) = nullptr;
  Stage stage_;
  bool on_ = false;
  StageTimer* parent_ = nullptr;
  uint64_t start_ = 0;
  uint64_t nested_ = 0;
};

}  // namespace graft::core
