// sim_review8_options: the eighth red-team round's review of graft's options
// at non-default values (src/config/options.def, options.cc; what each one
// changes: src/core/engine.cc scheduleCuts / buildPiece / rest*, the period
// detector and history sizes, src/graph/launch_worker.h, the idle flush in
// src/hook/runtime.cc, src/core/hot_arena.cc, src/pool/device_pool.cc,
// src/graph/kernel_registry.cc's eager prefixes, src/log/log.cc). Every mode
// is one "fork-join" training-like step, long enough to be graphed, with
// something that is tricky for some option; every return code and value must
// be the simulated driver's, eagerly and under graft:
//   sim_review8_options --mode MODE [--steps N] [--expect-graphs]
// (a MODE with the suffix -late starts its irregular steps at step 120, not 6,
// so GRAFT_WARMUP=20 or 50 sees that many equal steps first).
//
// (Each "FAILS under graft" below is what graft did when the mode was written;
// tests/sim/meson.build registers what holds now: all pass; sticky-held, a
// documented limit, runs eagerly only.)
//
// The step (words w0..w12 on the device, mirrored on the host in program
// order): streams M (non-blocking), A (blocking), B (non-blocking), events F,
// EA, EB. M: a cuMemAllocAsync temporary, a memset of it, two kernels reading
// it, record F. A: wait F, three kernels (one with a parameter that changes
// every step: a node update), record EA. B: wait F, a kernel, a host function
// that reads w3 and writes w4 (checked: what it read), a kernel, record EB.
// Then, on irregular steps, the host's mid-step action (one of:
// cuEventSynchronize(EA), cuStreamSynchronize(B), a poll of cuEventQuery(EB),
// one cuStreamQuery(A) whose "done" must mean done, cuCtxSynchronize, a
// synchronous cuMemcpyDtoH on the legacy stream (waits for blocking A), a
// DtoH copy on B and its synchronize, a poll of cuStreamQuery(A)) and the
// words it covers checked. M: wait EA and EB, kernels, the temporary's
// cuMemFreeAsync, a kernel; then a DtoH read-back of w8 and
// cuStreamSynchronize(M) (every step, or every tenth for -nosync), every
// word checked.
//
// forkjoin, forkjoin-nosync   the step as above.
// variants       the step in three shapes (a kernel of another grid on A, a
//                kernel of another name on B), in runs of four and on
//                irregular steps at random (for GRAFT_MAX_VARIANTS=1,
//                GRAFT_MAX_SEGMENTS=1..3).
// eager-mix, eager-mix-nosync  kernels named sim_mix_eager*/sim_add_eager*
//                in the middle of M's head (before the fork's record), of A's
//                chain and of the join (before the free); run with
//                GRAFT_EAGER_KERNELS=sim_mix_eager and/or sim_add_eager (eager
//                kernels between graphed pieces, around events and a free).
// eager-pts, eager-pts-nosync  the same with M the per-thread default stream
//                (CU_STREAM_PER_THREAD) and A the legacy stream.
// poll           the step ends with a poll of cuStreamQuery(M) instead of a
//                synchronize (polls of held work).
// timing         timing events T0/T1 recorded on M around the step;
//                cuEventElapsedTime(T0, T1) after M's synchronize must succeed
//                and be >= 0.
// idle-spin      (sets SIM_ASYNC_US=100) on irregular steps the host waits
//                for w8 without any CUDA call (3 s limit); for
//                GRAFT_IDLE_FLUSH_MS=1, 200, and 0 (documented to hang then).
// pool-big, pool-big-nosync  B also allocates a 400 MiB block every step
//                (cuMemAllocAsync on B), memsets it, reads it, and M frees it
//                after the join (freed on another stream than allocated): for
//                GRAFT_POOL=1 GRAFT_POOL_GB=1 graft's pool runs out after two
//                blocks (declined allocations go to the driver; its exit report
//                said 175 served, 25 declined).
// inner2, inner2-nosync  A's part gets an inner loop of (kernel, record EA)
//                x 40 (39 or 41 on irregular steps): a period of 2 ops, built
//                unrolled (for GRAFT_MAX_PERIOD=2..16, whose history then no
//                longer holds the unrolled run: it is built from the rotated
//                window).
// inner6, inner6-nosync  a ping-pong loop between A and B, 6 ops a round (two
//                waits, two records, two kernels), 10 rounds (9 or 11).
// pts-legacy, pts-legacy-nosync  M the per-thread default stream, A the legacy
//                stream.
// churn, churn-pts, churn-eager  irregular steps add a burst of 40 to 200
//                kernels of grids that never repeat on B (for
//                GRAFT_DORMANT_AFTER_OPS=1 with GRAFT_MAX_PERIOD 2..64 and
//                GRAFT_REST_BELOW_PCT=100: rests begin and end mid-step).
// relay, relay-nosync, relay-eager-pts  thread X issues M's parts, thread Y
//                A's and B's (and the mid-step actions), in turns.
// relay-noise, noise, noise-nosync  as relay / forkjoin (noise-nosync with
//                inner6), and a third thread runs a loop of its own on a
//                stream C all the while (threads interleave: rests for
//                threads_interleave, GRAFT_DORMANT_AFTER_OPS=0 too).
//
// All the modes above pass eagerly and under graft (with --expect-graphs
// where graft can graph them) at default options and with GRAFT_WARMUP 1,
// 20, 50 (-late); GRAFT_SEGMENT_OPS 2, 3 (GRAFT_MIN_SEGMENT_OPS=2), 5,
// 1000000; GRAFT_SYNC_TAIL_OPS 2, 1024; GRAFT_MIN_SEGMENT_OPS 12;
// GRAFT_MAX_PERIOD 2, 4, 8, 16, 24, 1048576; GRAFT_DORMANT_AFTER_OPS 0, 1
// (with GRAFT_MAX_PERIOD 2..64); GRAFT_REST_BELOW_PCT 0, 100;
// GRAFT_MAX_VARIANTS 1, 1024; GRAFT_MAX_SEGMENTS 1, 2, 3; GRAFT_IDLE_FLUSH_MS
// 1, 200, 100000; GRAFT_ASYNC_LAUNCH=0; GRAFT_LAUNCH_SPIN_US 0, 100000;
// GRAFT_LAUNCH_POLL_US 1, 30, 10000; GRAFT_HOT_ARENA_MB 0, 1, 4096;
// GRAFT_POOL=1 with GRAFT_POOL_GB 1, 64, 4096; GRAFT_EAGER_KERNELS naming
// some of the kernels; GRAFT_HOT_TEXT=1; GRAFT_PROFILE=1; GRAFT_LOG_LEVEL
// trace; GRAFT_MODE=passthrough; and 600 random combinations of these (with
// SIM_SEED, SIM_STEPS, SIM_GRAPH_LAUNCH_US), several seeds each: no divergence.
// (The earlier review programs' 155 modes were also run under each of these
// settings: no mode failed that does not fail at default options, except the
// documented GRAFT_POOL limits and GRAFT_IDLE_FLUSH_MS=0 or slow flushes with
// idle-spin.) Runs where graft builds no graph (GRAFT_MAX_PERIOD below the
// step's period, GRAFT_WARMUP above the regular run, GRAFT_MIN_SEGMENT_OPS
// above a piece) exit 3 with --expect-graphs: not a divergence.
//
// setenv-passthrough  the program sets GRAFT_MODE=passthrough in its own
//                environment (setenv) before it first uses CUDA, as a Python
//                script does with os.environ (README: CUDA_LAUNCH_BLOCKING set
//                so is honoured), then runs forkjoin; it checks that no graph
//                was launched. FAILS under graft: graft parsed its options
//                once, from the environment at load (src/hook/runtime.cc:42-45,
//                parsedOptions() in the graftLoad constructor, :57-78), so
//                every GRAFT_* a program sets for itself is ignored without a
//                word: 391 graph launches. (sim_review7_threads' queue-takeover
//                relies on setenv("GRAFT_SEGMENT_OPS", "4") the same way and so
//                never ran with 4-op pieces: 145 replays in 50 steps, 490 with
//                GRAFT_SEGMENT_OPS=4 in the environment.)
// exec-child     forkjoin (with SIM_FAIL=cuGraphLaunch:4:2, set by the
//                program: graft logs a warning, flushed at once, early on);
//                after step N/2 the program runs a helper process,
//                system("/bin/true"), which inherits LD_PRELOAD and GRAFT_*;
//                with GRAFT_LOG_FILE set it checks that the log file did not
//                shrink. FAILS under graft with GRAFT_LOG_FILE=path: the
//                helper's graft opens the log with truncation at load
//                (src/log/log.cc:44, basic_file_sink_mt(file, truncate=true),
//                called from loadOnce in every process that loads libgraft,
//                CUDA or not), so the parent's warnings written so far are
//                erased (234 bytes -> 0); its buffered info lines survive
//                (written later). Passes without GRAFT_LOG_FILE.
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;
using simtest::DriverApi;

// Irregular steps start at step g_from (a "-late" mode: 120, so GRAFT_WARMUP=20 sees 20 equal steps first).
int g_from = 6;
bool irregular(int step, uint64_t salt, uint64_t every = 5) { return irregularStep(step, salt, g_from, every); }
uint64_t draw(int step, uint64_t salt) {
  return simMix64(uint64_t(step) * 0x2545f4914f6cdd1dull + salt * 0x9e3779b97f4a7c15ull);
}

// Thread-safe checks, counted into g_wrong at the end (settle()).
std::atomic<int> t_wrong{0};
std::mutex t_print;
void tExpectValue(uint64_t got, uint64_t want, const char* what, int step) {
  if (got == want) return;
  if (t_wrong++ < 8) {
    std::lock_guard<std::mutex> g(t_print);
    std::printf("sim_review8_options: %s: step %d: %s is %llu, expected %llu\n", g_mode, step, what,
                (unsigned long long)got, (unsigned long long)want);
  }
}
[[maybe_unused]] void tExpectCode(CUresult got, CUresult want, const char* what, int step) {
  if (got == want) return;
  if (t_wrong++ < 8) {
    std::lock_guard<std::mutex> g(t_print);
    std::printf("sim_review8_options: %s: step %d: %s returned %d, expected %d\n", g_mode, step, what, int(got),
                int(want));
  }
}
void settle() { g_wrong += t_wrong.exchange(0); }

struct Kernels {
  CUfunction mix = nullptr, mix2 = nullptr, add = nullptr;
  CUfunction mixE = nullptr, addE = nullptr;  // names GRAFT_EAGER_KERNELS=sim_mix_eager,sim_add_eager match
};

constexpr int kWords = 32;

// The step's words on the device and their host mirror (every op applied at
// its call, in program order: the streams only read each other's words after
// an event, so that is the eager result).
struct Words {
  CUdeviceptr base = 0;
  uint64_t h[kWords] = {};
  CUdeviceptr at(int i) const { return base + CUdeviceptr(8 * i); }
};

struct HostFnArgs {
  CUdeviceptr src = 0, dst = 0;
  uint64_t add = 0;
  std::atomic<uint64_t> seen{0};
  std::atomic<int> ran{0};
};
void CUDA_CB hostTriple(void* p) {
  auto* h = static_cast<HostFnArgs*>(p);
  const uint64_t v = peek(h->src);
  h->seen.store(v);
  poke(h->dst, 3 * v + h->add);
  h->ran.fetch_add(1);
}

// ------------------------------------------------------------------ the fork-join step
//
// Streams M (non-blocking, the main one), A (blocking), B (non-blocking);
// events F, EA, EB (no timing). Per step i:
//   M: tmp = cuMemAllocAsync(256, M); memset tmp = i + 7; w0 = tmp + 1; w1 = mix(w0 ^ 0x11);
//      [eager: w1 = mixE(w1 ^ 0x12)]; record F
//   A: wait F; w2 = mix(w1 ^ 0x21); [variant 1: w2 = mix(w2 ^ 0x22), grid 2];
//      [eager: w2 = addE(w2 + 5)]; w2 = mix(w2 ^ i); record EA
//   B: wait F; w3 = w1 + 3; host fn w4 = 3 * w3 + i; w5 = w4 + 1;
//      [variant 2: w5 = mix2(w5 ^ 0x51)]; [big: big = allocAsync(B); memset; w9 = big + 1]; record EB
//   (the host's mid-step action, on irregular steps)
//   M: wait EA; wait EB; w6 = w2 + 1; w7 = mix(w5 ^ 0x71); [eager: w7 = mixE(w7 ^ 0x72)];
//      free tmp (M); [big: free big (M)]; w8 = w6 + w7-ish (w8 = mix(w6 ^ 0x81))
//   end: sync (DtoH of w8 to pinned + cuStreamSynchronize(M), checked) per `syncEvery`,
//        or a poll of M, or a spin on w8 without CUDA calls.
struct Step {
  const simtest::Driver* drv = nullptr;
  const DriverApi* cu = nullptr;
  Kernels k;
  Words w;
  CUstream M = nullptr, A = nullptr, B = nullptr;
  CUevent F = nullptr, EA = nullptr, EB = nullptr;
  CUevent T0 = nullptr, T1 = nullptr;  // timing events (timing option)
  uint64_t* pinned = nullptr;
  std::vector<HostFnArgs> hostArgs;
  // options
  bool eager = false;       // the eager-named kernels
  bool variants = false;    // shapes change in runs
  bool big = false;         // a large block on B, freed on M
  bool timing = false;      // timing events around the step
  bool midActions = true;   // the host's mid-step actions on irregular steps
  int syncEvery = 1;        // the end-of-step read-back every N steps (others: nothing)
  int endKind = 0;          // 0: read-back + sync; 1: poll M with cuStreamQuery; 2: spin on w8 (no CUDA call)
  size_t bigBytes = size_t(400) << 20;
  int spawnAt = -1;
  bool ptsM = false;        // M is the per-thread default stream (CU_STREAM_PER_THREAD)
  bool legacyA = false;     // A is the legacy default stream (NULL)
  bool relay = false;       // two threads issue the step's parts in turns
  bool noise = false;       // a third thread runs a loop of its own meanwhile
  bool churn = false;       // irregular steps add a burst of kernels of shapes that never repeat (on B)         // the step after which the program runs a helper process
  int inner = 0;            // 2: A's part gets an inner loop of (kernel, record EA) x n;
                            // 6: a ping-pong loop between A and B (6 ops a round); n = 10, 9 or 11

  void mixOn(CUstream s, int dst, int src, uint64_t kk, unsigned grid = 1, CUfunction f = nullptr) {
    CUdeviceptr to = w.at(dst), from = w.at(src);
    void* args[] = {&to, &from, &kk};
    SIM_CHECK(cu->cuLaunchKernel(f ? f : k.mix, grid, 1, 1, 1, 1, 1, 0, s, args, nullptr));
    w.h[dst] = simMix64(w.h[src] ^ kk);
  }
  void addOn(CUstream s, int dst, int src, uint64_t kk, CUfunction f = nullptr) {
    CUdeviceptr to = w.at(dst), from = w.at(src);
    void* args[] = {&to, &from, &kk};
    SIM_CHECK(cu->cuLaunchKernel(f ? f : k.add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
    w.h[dst] = w.h[src] + kk;
  }
  void addFrom(CUstream s, int dst, CUdeviceptr from, uint64_t fromValue, uint64_t kk) {
    CUdeviceptr to = w.at(dst);
    void* args[] = {&to, &from, &kk};
    SIM_CHECK(cu->cuLaunchKernel(k.add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
    w.h[dst] = fromValue + kk;
  }
  void check(const char* what, int step, std::initializer_list<int> words) {
    for (int i : words) {
      char text[96];
      std::snprintf(text, sizeof text, "word %d (%s)", i, what);
      expectValue(peek(w.at(i)), w.h[i], text, step);
    }
  }
  void checkAll(const char* what, int step) {
    for (int i = 0; i < 13; ++i) {
      char text[96];
      std::snprintf(text, sizeof text, "word %d (%s)", i, what);
      expectValue(peek(w.at(i)), w.h[i], text, step);
    }
  }

  void setup(int steps) {
    SIM_CHECK(cu->cuStreamCreate(&M, CU_STREAM_NON_BLOCKING));
    SIM_CHECK(cu->cuStreamCreate(&A, 0));
    if (ptsM) M = CU_STREAM_PER_THREAD;
    if (legacyA) A = nullptr;
    SIM_CHECK(cu->cuStreamCreate(&B, CU_STREAM_NON_BLOCKING));
    SIM_CHECK(cu->cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu->cuEventCreate(&EA, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu->cuEventCreate(&EB, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu->cuEventCreate(&T0, CU_EVENT_DEFAULT));
    SIM_CHECK(cu->cuEventCreate(&T1, CU_EVENT_DEFAULT));
    w.base = simtest::zeroedBuffer(*cu, 8 * kWords);
    void* p = nullptr;
    SIM_CHECK(cu->cuMemAllocHost(&p, 64));
    pinned = static_cast<uint64_t*>(p);
    hostArgs = std::vector<HostFnArgs>(size_t(steps) + 1);
  }

  int variantOf(int i) const {
    if (!variants) return 0;
    if (irregular(i, 91, 7)) return int(draw(i, 92) % 3);
    return i < g_from ? 0 : (i / 4) % 3;  // runs of four steps of each shape
  }

  // The host's action in the middle of the step (after A's and B's parts).
  void midAction(int i) {
    if (!midActions || !irregular(i, 17, 4)) return;
    ++g_provoked;
    switch (draw(i, 18) % 8) {
      case 0:
        SIM_CHECK(cu->cuEventSynchronize(EA));
        check("after cuEventSynchronize(EA)", i, {0, 1, 2});
        break;
      case 1:
        SIM_CHECK(cu->cuStreamSynchronize(B));
        check("after cuStreamSynchronize(B)", i, {0, 1, 3, 4, 5});
        break;
      case 2: {
        const CUresult r = pollUntilDone([&] { return cu->cuEventQuery(EB); });
        expectCode(r, CUDA_SUCCESS, "polling cuEventQuery(EB)", i);
        check("after polling EB", i, {3, 4, 5});
        break;
      }
      case 3: {
        const CUresult r = cu->cuStreamQuery(A);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) expectCode(r, CUDA_SUCCESS, "cuStreamQuery(A)", i);
        if (r == CUDA_SUCCESS) check("after cuStreamQuery(A) said done", i, {2});
        break;
      }
      case 4:
        SIM_CHECK(cu->cuCtxSynchronize());
        check("after cuCtxSynchronize", i, {0, 1, 2, 3, 4, 5});
        break;
      case 5: {
        // A synchronous copy on the legacy stream waits for the blocking stream A.
        uint64_t v = 0;
        SIM_CHECK(cu->cuMemcpyDtoH(&v, w.at(2), 8));
        expectValue(v, w.h[2], "w2 read by a synchronous cuMemcpyDtoH", i);
        break;
      }
      case 6: {
        pinned[1] = 0;
        SIM_CHECK(cu->cuMemcpyDtoHAsync(pinned + 1, w.at(3), 8, B));
        SIM_CHECK(cu->cuStreamSynchronize(B));
        expectValue(pinned[1], w.h[3], "w3 read back on B", i);
        break;
      }
      default: {
        const CUresult r = pollUntilDone([&] { return cu->cuStreamQuery(A); });
        expectCode(r, CUDA_SUCCESS, "polling cuStreamQuery(A)", i);
        check("after polling A", i, {2});
        break;
      }
    }
  }

  // The step in three parts (head on M, A's and B's parts, the join and tail
  // on M), so that two threads can issue them in turns (relay).
  int v_ = 0;
  CUdeviceptr tmp_ = 0, big_ = 0;
  uint64_t w3_ = 0;
  HostFnArgs* h_ = nullptr;
  void head(int i) {
    v_ = variantOf(i);
    if (timing) SIM_CHECK(cu->cuEventRecord(T0, M));
    SIM_CHECK(cu->cuMemAllocAsync(&tmp_, 256, M));
    const uint32_t tv = uint32_t(i + 7);
    SIM_CHECK(cu->cuMemsetD32Async(tmp_, tv, 2, M));
    addFrom(M, 0, tmp_, uint64_t(tv) | uint64_t(tv) << 32, 1);
    mixOn(M, 1, 0, 0x11);
    if (eager) mixOn(M, 1, 1, 0x12, 1, k.mixE);
    SIM_CHECK(cu->cuEventRecord(F, M));
  }
  void middle(int i) {
    const int v = v_;
    // A
    SIM_CHECK(cu->cuStreamWaitEvent(A, F, 0));
    mixOn(A, 2, 1, 0x21);
    if (v == 1) mixOn(A, 2, 2, 0x22, 2);
    if (eager) addOn(A, 2, 2, 5, k.addE);
    mixOn(A, 2, 2, uint64_t(i));
    const int base = inner == 2 ? 40 : 10;
    const int rounds = !inner ? 0 : irregular(i, 61, 6) ? base - 1 + 2 * int(draw(i, 62) % 2) : base;
    if (inner == 2) {
      for (int j = 0; j < rounds; ++j) {
        mixOn(A, 2, 2, uint64_t(i) * 1000 + uint64_t(j));
        SIM_CHECK(cu->cuEventRecord(EA, A));
      }
    }
    if (inner == 6) {
      // w2 (A) and w11 (B) handed back and forth.
      SIM_CHECK(cu->cuEventRecord(EA, A));
      for (int j = 0; j < rounds; ++j) {
        SIM_CHECK(cu->cuStreamWaitEvent(B, EA, 0));
        mixOn(B, 11, 2, uint64_t(j) + 0x600);
        SIM_CHECK(cu->cuEventRecord(EB, B));
        SIM_CHECK(cu->cuStreamWaitEvent(A, EB, 0));
        mixOn(A, 2, 11, uint64_t(i) * 1000 + uint64_t(j));
        SIM_CHECK(cu->cuEventRecord(EA, A));
      }
    }
    SIM_CHECK(cu->cuEventRecord(EA, A));
    // B
    SIM_CHECK(cu->cuStreamWaitEvent(B, F, 0));
    addOn(B, 3, 1, 3);
    HostFnArgs& h = hostArgs[size_t(i) % hostArgs.size()];
    h_ = &h;
    h.src = w.at(3);
    h.dst = w.at(4);
    h.add = uint64_t(i);
    SIM_CHECK(cu->cuLaunchHostFunc(B, hostTriple, &h));
    w3_ = w.h[3];
    w.h[4] = 3 * w3_ + uint64_t(i);
    addOn(B, 5, 4, 1);
    if (v == 2) mixOn(B, 5, 5, 0x51, 1, k.mix2);
    big_ = 0;
    if (big) {
      SIM_CHECK(cu->cuMemAllocAsync(&big_, bigBytes, B));
      SIM_CHECK(cu->cuMemsetD32Async(big_, uint32_t(i), 2, B));
      addFrom(B, 9, big_, uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32, 2);
    }
    if (churn && irregular(i, 71, 3)) {
      const int n = 40 + int(draw(i, 72) % 160);
      for (int j = 0; j < n; ++j) mixOn(B, 12, 12, uint64_t(j), 1 + unsigned(draw(i * 1000 + j, 73) % 97));
    }
    SIM_CHECK(cu->cuEventRecord(EB, B));
    midAction(i);
  }
  void tail(int i) {
    SIM_CHECK(cu->cuStreamWaitEvent(M, EA, 0));
    SIM_CHECK(cu->cuStreamWaitEvent(M, EB, 0));
    addOn(M, 6, 2, 1);
    mixOn(M, 7, 5, 0x71);
    if (eager) mixOn(M, 7, 7, 0x72, 1, k.mixE);
    SIM_CHECK(cu->cuMemFreeAsync(tmp_, M));
    if (big) SIM_CHECK(cu->cuMemFreeAsync(big_, M));
    mixOn(M, 8, 6, 0x81);
    if (timing) SIM_CHECK(cu->cuEventRecord(T1, M));
    end(i);
    if (h_->ran.load() && h_->seen.load() != w3_) expectValue(h_->seen.load(), w3_, "w3 as the host function saw it", i);
  }
  void run(int i) {
    head(i);
    middle(i);
    tail(i);
  }

  void end(int i) {
    if (endKind == 2 && irregular(i, 33, 3)) {
      // The host waits for w8 without any CUDA call (SIM_ASYNC_US).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (peek(w.at(8)) != w.h[8] && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      expectValue(peek(w.at(8)), w.h[8], "w8, waited for without a CUDA call", i);
      return;
    }
    if ((i + 1) % syncEvery != 0) return;
    if (endKind == 1 || (endKind == 2 && i % 2)) {
      const CUresult r = pollUntilDone([&] { return cu->cuStreamQuery(M); });
      expectCode(r, CUDA_SUCCESS, "polling cuStreamQuery(M)", i);
      checkAll("after polling M", i);
    } else {
      pinned[0] = 0;
      SIM_CHECK(cu->cuMemcpyDtoHAsync(pinned, w.at(8), 8, M));
      SIM_CHECK(cu->cuStreamSynchronize(M));
      expectValue(pinned[0], w.h[8], "w8 read back", i);
      checkAll("after the step's synchronize", i);
    }
    if (timing) {
      float ms = -1;
      const CUresult r = cu->cuEventElapsedTime(&ms, T0, T1);
      expectCode(r, CUDA_SUCCESS, "cuEventElapsedTime(T0, T1) after M's synchronize", i);
      if (r == CUDA_SUCCESS && ms < 0) expectValue(1, 0, "elapsed time >= 0", i);
    }
  }
  void finish(int steps) {
    SIM_CHECK(cu->cuCtxSynchronize());
    checkAll("at the end", steps);
  }
};

// Turns between two threads: the owner of the turn runs until it passes it.
class Baton {
 public:
  void await(int who) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return turn_ == who; });
  }
  void pass(int to) {
    std::lock_guard<std::mutex> l(m_);
    turn_ = to;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int turn_ = 0;
};

// The size of the file GRAFT_LOG_FILE names (-1: none).
long logFileSize() {
  const char* path = std::getenv("GRAFT_LOG_FILE");
  if (!path || !*path) return -1;
  FILE* f = std::fopen(path, "rb");
  if (!f) return -1;
  std::fseek(f, 0, SEEK_END);
  const long n = std::ftell(f);
  std::fclose(f);
  return n;
}

void forkJoin(const simtest::Driver& drv, CUcontext ctx, const Kernels& k, int steps,
              const std::function<void(Step&)>& tune) {
  Step st;
  st.drv = &drv;
  st.cu = &drv.plain;
  st.k = k;
  tune(st);
  st.setup(steps);
  // noise: a thread with a loop of its own on stream C (words 20..23) all the while.
  std::atomic<bool> done{false};
  std::thread noise;
  if (st.noise) {
    noise = std::thread([&] {
      SIM_CHECK(drv.plain.cuCtxSetCurrent(ctx));
      CUstream C;
      SIM_CHECK(drv.plain.cuStreamCreate(&C, CU_STREAM_NON_BLOCKING));
      const CUdeviceptr x = st.w.at(20);
      uint64_t hx = 0;
      for (int i = 0; !done.load(); ++i) {
        for (int m = 0; m < 9; ++m) {
          const uint64_t key = uint64_t(i % 5) * 100 + uint64_t(m);
          CUdeviceptr to = x, from = x;
          uint64_t kk = key;
          void* args[] = {&to, &from, &kk};
          SIM_CHECK(drv.plain.cuLaunchKernel(k.mix, 1, 1, 1, 1, 1, 1, 0, C, args, nullptr));
          hx = simMix64(hx ^ key);
        }
        if (i % 4 == 3) {
          SIM_CHECK(drv.plain.cuStreamSynchronize(C));
          tExpectValue(peek(x), hx, "the noise thread's word after its synchronize", i);
        }
      }
      SIM_CHECK(drv.plain.cuStreamSynchronize(C));
      tExpectValue(peek(x), hx, "the noise thread's word at its end", 0);
    });
  }
  auto afterStep = [&](int i) {
    if (st.spawnAt != i) return;
    // A helper process; it inherits the environment (LD_PRELOAD, GRAFT_*).
    const long before = logFileSize();
    const int rc = std::system("/bin/true");
    expectValue(uint64_t(rc), 0, "system(\"/bin/true\")", i);
    const long after = logFileSize();
    if (before > 0 && after < before)
      expectValue(uint64_t(after), uint64_t(before), "GRAFT_LOG_FILE's size after a helper process ran (bytes)", i);
  };
  if (!st.relay) {
    for (int i = 0; i < steps; ++i) {
      st.run(i);
      afterStep(i);
    }
  } else {
    // Thread X issues M's parts, thread Y A's and B's, in turns.
    Baton baton;
    std::thread y([&] {
      SIM_CHECK(drv.plain.cuCtxSetCurrent(ctx));
      for (int i = 0; i < steps; ++i) {
        baton.await(1);
        st.middle(i);
        baton.pass(0);
      }
    });
    for (int i = 0; i < steps; ++i) {
      st.head(i);
      baton.pass(1);
      baton.await(0);
      st.tail(i);
      afterStep(i);
    }
    y.join();
  }
  done.store(true);
  if (noise.joinable()) noise.join();
  st.finish(steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review8_options", 200);
  std::string mode = args.mode;
  const int steps = args.steps;
  if (mode.size() > 5 && mode.compare(mode.size() - 5, 5, "-late") == 0) {
    mode.resize(mode.size() - 5);
    g_from = 120;
  }
  if (mode == "idle-spin") setenv("SIM_ASYNC_US", "100", 0);
  // As a Python script does with os.environ before it first uses CUDA (and
  // sim_review7_threads' queue-takeover with GRAFT_SEGMENT_OPS).
  const bool setenvMode = mode == "setenv-passthrough";
  if (setenvMode) setenv("GRAFT_MODE", "passthrough", 1);
  // exec-child: one of graft's graph launches fails, so graft logs a warning
  // (flushed at once) well before the helper process runs.
  if (mode == "exec-child") setenv("SIM_FAIL", "cuGraphLaunch:4:2", 0);
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review8_options", &drv, &ctx)) return rc;
  Kernels k;
  k.mix = simtest::libraryKernel3("sim_mix_review8");
  k.mix2 = simtest::libraryKernel3("sim_mix_review8_other");
  k.add = simtest::libraryKernel3("sim_add_review8");
  k.mixE = simtest::libraryKernel3("sim_mix_eager_review8");
  k.addE = simtest::libraryKernel3("sim_add_eager_review8");
  using Tune = std::function<void(Step&)>;
  Tune tune;
  if (mode == "forkjoin") tune = [](Step&) {};
  else if (mode == "forkjoin-nosync") tune = [](Step& s) { s.syncEvery = 10; };
  else if (mode == "variants") tune = [](Step& s) { s.variants = true; };
  else if (mode == "eager-mix") tune = [](Step& s) { s.eager = true; };
  else if (mode == "eager-mix-nosync") tune = [](Step& s) { s.eager = true; s.syncEvery = 10; };
  else if (mode == "poll") tune = [](Step& s) { s.endKind = 1; };
  else if (mode == "timing") tune = [](Step& s) { s.timing = true; };
  else if (mode == "idle-spin") tune = [](Step& s) { s.endKind = 2; s.midActions = false; };
  else if (mode == "pool-big") tune = [](Step& s) { s.big = true; };
  else if (mode == "inner2") tune = [](Step& s) { s.inner = 2; };
  else if (mode == "inner2-nosync") tune = [](Step& s) { s.inner = 2; s.syncEvery = 10; };
  else if (mode == "inner6") tune = [](Step& s) { s.inner = 6; };
  else if (mode == "inner6-nosync") tune = [](Step& s) { s.inner = 6; s.syncEvery = 10; };
  else if (mode == "exec-child") tune = [steps](Step& s) { s.spawnAt = steps / 2; };
  else if (mode == "pts-legacy") tune = [](Step& s) { s.ptsM = true; s.legacyA = true; };
  else if (mode == "pts-legacy-nosync") tune = [](Step& s) { s.ptsM = true; s.legacyA = true; s.syncEvery = 10; };
  else if (mode == "eager-pts") tune = [](Step& s) { s.eager = true; s.ptsM = true; s.legacyA = true; };
  else if (mode == "eager-pts-nosync") tune = [](Step& s) { s.eager = true; s.ptsM = true; s.legacyA = true; s.syncEvery = 10; };
  else if (mode == "relay") tune = [](Step& s) { s.relay = true; };
  else if (mode == "relay-nosync") tune = [](Step& s) { s.relay = true; s.syncEvery = 10; };
  else if (mode == "relay-eager-pts") tune = [](Step& s) { s.relay = true; s.eager = true; s.ptsM = true; };
  else if (mode == "relay-noise") tune = [](Step& s) { s.relay = true; s.noise = true; };
  else if (mode == "noise") tune = [](Step& s) { s.noise = true; };
  else if (mode == "noise-nosync") tune = [](Step& s) { s.noise = true; s.syncEvery = 10; s.inner = 6; };
  else if (mode == "setenv-passthrough") tune = [](Step&) {};
  else if (mode == "churn") tune = [](Step& s) { s.churn = true; };
  else if (mode == "churn-pts") tune = [](Step& s) { s.churn = true; s.ptsM = true; s.legacyA = true; };
  else if (mode == "churn-eager") tune = [](Step& s) { s.churn = true; s.eager = true; s.syncEvery = 3; };
  else if (mode == "pool-big-nosync") tune = [](Step& s) { s.big = true; s.syncEvery = 10; };
  if (tune) forkJoin(drv, ctx, k, steps, tune);
  else {
    std::printf("usage: sim_review8_options --mode forkjoin|forkjoin-nosync|variants|eager-mix|eager-mix-nosync|"
                "eager-pts|eager-pts-nosync|poll|timing|idle-spin|pool-big|pool-big-nosync|inner2|inner2-nosync|"
                "inner6|inner6-nosync|pts-legacy|pts-legacy-nosync|churn|churn-pts|churn-eager|relay|relay-nosync|"
                "relay-eager-pts|relay-noise|noise|noise-nosync|setenv-passthrough|exec-child[-late]"
                " [--steps N] [--expect-graphs]\n");
    return 2;
  }
  settle();
  if (setenvMode) {
    SimCounters c{};
    simCounters(&c);
    expectValue(c.graphLaunches, 0, "graph launches under GRAFT_MODE=passthrough (set by the program before it "
                "first used CUDA)", steps);
  }
  return report(steps, args.expectGraphs && !setenvMode);
}
