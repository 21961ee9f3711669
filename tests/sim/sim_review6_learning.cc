// sim_review6_learning: the sixth red-team round's review of how graft learns
// what repeats and matches the program's ops against it, and of what it does
// with held ops when a match breaks (src/core/period_detector, history,
// op_buffer, hot_arena, and engine.cc's submit / tryStart / advance /
// resolveHeld, the candidates, rests, the idle flush and hostBarrier). Each
// mode runs a loop of steps graft graphs, with an odd pattern on some steps;
// every step's words are mirrored on the host (each kernel, memset and copy
// applied at its call, in program order, which is the eager result since the
// streams only read each other's words after an event), and every return code
// and value must be the simulated driver's, eagerly and under graft:
//   sim_review6_learning --mode MODE [--steps N] [--expect-graphs]
//
// late-diverge   a step of 42 ops on three streams (kernels, 32-bit memsets,
//                device copies, records and waits of four events, joined
//                back into s); on irregular steps one op is inserted at a
//                place drawn anew (any of 43): a kernel of another grid, a
//                memset, a wait on an event already waited on, a record of a
//                spare event, a host function on s that reads a word s wrote
//                before it (what it saw is checked), a cuMemcpyDtoHAsync to
//                pinned memory on t, a copy on u, a kernel of another name or
//                of another kind; or the step ends early there (the sync
//                arrives in the middle of a segment). Held ops before the
//                place must be issued in order with their values.
// alternate-ab, alternate-aab  the step of late-diverge in two shapes, A and
//                B (B has a kernel of another grid inserted at op 36),
//                alternating A,B,A,B or A,A,B (both shapes start alike and
//                differ late), with odd steps as in late-diverge among them.
// alternate-nosync  A,B,A,B with the step's closing synchronize only every
//                tenth step (runs undelimited by syncs).
// rematch-inner  three step shapes: X (8 ops over three streams, a record of
//                E and waits on it), Y = X Z X v (23 ops: Z records and waits
//                on two more events), and W = X Z X q, whose last op differs
//                from Y's: W's held ops must be issued as X's graph, Z's ops
//                eagerly, X's graph again (resolveHeld's longestCompleteMatch
//                at a later held index), then q; W2 = X z1 z2 q likewise.
// inner-loop     a step whose inner loop (a body of 6 ops on two streams
//                joined both ways by events) runs 10 times, then a tail of 10
//                ops; meant to be run with GRAFT_MAX_PERIOD=8 (the body is
//                found and built unrolled, the whole step is longer than the
//                longest period), =2 and =16; irregular steps run the inner
//                loop 9 or 11 times.
// stream-only    the same ops on stream s or on stream t (chosen irregularly
//                per step; both repeat), then the same six ops on both in an
//                order swapped irregularly: sequences equal but for their
//                stream must never match each other's graphs.
// idle-spin      late-diverge's step; on irregular steps the host, after the
//                op at a place drawn anew, waits for the word that op (or the
//                latest op before it that wrote one) wrote, reading memory
//                without any CUDA call (SIM_ASYNC_US lets the simulated GPU
//                run by itself; the program sets it): GRAFT_IDLE_FLUSH_MS must
//                issue what graft holds. Every step also allocates a block
//                (cuMemAllocAsync) that two kernels at op 22 use and frees it
//                right after them, while graft holds them (the free is
//                deferred; after a spin graft's idle-flush thread issues it):
//                every block's free must have run at the end (simulator
//                counters). Also with SIM_GRAPH_LAUNCH_US=3000,
//                GRAFT_ASYNC_LAUNCH=0 and GRAFT_IDLE_FLUSH_MS=1 or 50.
// idle-spin-every  the same, waiting after op 20 of every step (the place is
//                never learned as a boundary: each step waits for the flush);
//                prints the mean time of a step.
// idle-spin-pts  idle-spin with s the per-thread default stream.
// idle-spin-ctx1 idle-spin in device 1's primary context, with s its legacy
//                (NULL) stream.
// idle-destroy   idle-spin, and every step creates an event, records it on t
//                (op 14), has s wait on it (op 21) and destroys it at once,
//                while graft holds both ops (the destroy is deferred until
//                they are issued). Eagerly the next step's cuEventCreate gets
//                the destroyed handle back (the simulator, as drivers do,
//                gives a freed handle out again); from step 30 on every step
//                must. FAILS under graft: where a spin made graft's
//                idle-flush thread issue the held ops, that thread (no
//                context current) also made the deferred cuEventDestroy,
//                which the simulator refuses with CUDA_ERROR_INVALID_CONTEXT
//                (GraphExecutor::destroyEvent calls it without a ContextScope
//                and ignores the result): the event is never destroyed (a
//                leak per such step), and the next step's event gets a new
//                handle (15 of the 170 steps checked). Whether the driver needs a
//                current context for cuEventDestroy is not known (CUDA lists
//                CUDA_ERROR_INVALID_CONTEXT among its results).
// rest-churn     a 12-op step over two streams with events (graphed), with,
//                on irregular steps, a burst of 40 to 200 ops of shapes that
//                never repeat (a grid drawn per op) with records and waits;
//                meant for GRAFT_DORMANT_AFTER_OPS=64 GRAFT_MAX_PERIOD=16
//                (rests begin and end in the middle of steps), also with
//                GRAFT_REST_BELOW_PCT=100 (a rest whenever any op ran eagerly
//                in a window).
// arena-spill    steps of 1500 launches of a kernel with an 8216-byte
//                parameter list (an 8192-byte struct after the three words)
//                whose struct carries a tag that changes every step for one
//                launch in three (grids drawn per launch: the step is the
//                only period): every executed launch's tag is checked
//                (trace); for GRAFT_HOT_ARENA_MB=0 and =1 (held and recorded
//                ops on the heap, the held buffer grown past its reserve).
// variants       late-diverge's step in three shapes (none, a kernel of
//                another grid at op 20, a kernel of another name at op 30),
//                each for four steps in a row, the order irregular; for
//                GRAFT_MAX_VARIANTS=1, GRAFT_MAX_SEGMENTS=1 and =2.
// warmup1        late-diverge's step in a shape changing every two steps
//                (five shapes, irregular order); for GRAFT_WARMUP=1 (which
//                learns exactly as GRAFT_WARMUP=2: a period is confirmed once
//                it repeated once either way).
// tail-extension late-diverge's step, or the step with one more op at its
//                end (a kernel of another grid, a memset or a record: three
//                longer variants that start with the whole short one), in
//                runs of two to five steps: a complete candidate waits for a
//                longer one, and the closing synchronize must launch it.
// events-only    per step a kernel on s and on t, then 12 rounds of four
//                event ops with no kernel between (s records, t waits, t
//                records, s waits; built unrolled into graphs of event ops
//                only), then a kernel on each stream reading the other's
//                word; 11 or 13 rounds on irregular steps.
//
// Every mode but idle-destroy passes eagerly and under graft, at default
// options and with the GRAFT_* settings named above, for SIM_SEED 1, 3 and 5;
// also with GRAFT_SEGMENT_OPS=4, GRAFT_SEGMENT_OPS=2 GRAFT_MIN_SEGMENT_OPS=2,
// GRAFT_HOT_ARENA_MB=0, GRAFT_MAX_VARIANTS=1, GRAFT_SYNC_TAIL_OPS=2.
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt, uint64_t every = 5) { return irregularStep(step, salt, 6, every); }
uint64_t draw(int step, uint64_t salt) { return simMix64(uint64_t(step) * 0x2545f4914f6cdd1dull + salt * 0x9e3779b97f4a7c15ull); }

struct Kernels {
  CUfunction mix = nullptr;   // sim_mix: dst = mix(src ^ k)
  CUfunction mix2 = nullptr;  // the same effect, another kernel
  CUfunction add = nullptr;   // sim_add: dst = src + k
};

// A stream as the program names it: the API table (plain or per-thread) and the handle.
struct Str {
  const simtest::DriverApi* api = nullptr;
  CUstream h = nullptr;
};

constexpr int kWords = 96;

// Device words and their host mirror.
struct Words {
  CUdeviceptr base = 0;
  uint64_t h[kWords] = {};
  CUdeviceptr at(int i) const { return base + CUdeviceptr(8 * i); }
};

struct Kit {
  const simtest::DriverApi* cu = nullptr;
  Kernels k;
  Words w;
  int step = 0;
  int lastWritten = -1;  // the word the latest op wrote

  void mixOn(const Str& s, int dst, int src, uint64_t kk, unsigned grid = 1, CUfunction f = nullptr) {
    CUdeviceptr to = w.at(dst), from = w.at(src);
    void* args[] = {&to, &from, &kk};
    SIM_CHECK(s.api->cuLaunchKernel(f ? f : k.mix, grid, 1, 1, 1, 1, 1, 0, s.h, args, nullptr));
    w.h[dst] = simMix64(w.h[src] ^ kk);
    lastWritten = dst;
  }
  void addOn(const Str& s, int dst, int src, uint64_t kk) {
    CUdeviceptr to = w.at(dst), from = w.at(src);
    void* args[] = {&to, &from, &kk};
    SIM_CHECK(s.api->cuLaunchKernel(k.add, 1, 1, 1, 1, 1, 1, 0, s.h, args, nullptr));
    w.h[dst] = w.h[src] + kk;
    lastWritten = dst;
  }
  void memsetOn(const Str& s, int dst, uint32_t v) {
    SIM_CHECK(s.api->cuMemsetD32Async(w.at(dst), v, 2, s.h));
    w.h[dst] = uint64_t(v) | (uint64_t(v) << 32);
    lastWritten = dst;
  }
  void copyOn(const Str& s, int dst, int src) {
    SIM_CHECK(s.api->cuMemcpyDtoDAsync(w.at(dst), w.at(src), 8, s.h));
    w.h[dst] = w.h[src];
    lastWritten = dst;
  }
  void record(CUevent e, const Str& s) { SIM_CHECK(s.api->cuEventRecord(e, s.h)); }
  void waitOn(const Str& s, CUevent e) { SIM_CHECK(s.api->cuStreamWaitEvent(s.h, e, 0)); }
  void syncAll() { SIM_CHECK(cu->cuCtxSynchronize()); }
  void checkWords(const char* what, int step) {
    for (int i = 0; i < kWords; ++i) {
      if (peek(w.at(i)) == w.h[i]) continue;
      char text[96];
      std::snprintf(text, sizeof text, "%s: word %d", what, i);
      expectValue(peek(w.at(i)), w.h[i], text, step);
    }
  }
};

CUevent untimedEvent(const simtest::DriverApi& cu) {
  CUevent e = nullptr;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  return e;
}

CUstream nonBlocking(const simtest::DriverApi& cu) {
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}

// ------------------------------------------------------------ host functions

struct HostSeen {
  CUdeviceptr src = 0;
  uint64_t want = 0;
  std::atomic<uint64_t> seen{0};
  std::atomic<int> ran{0};
};
void CUDA_CB readWordFn(void* p) {
  auto* h = static_cast<HostSeen*>(p);
  h->seen.store(peek(h->src));
  h->ran.fetch_add(1);
}

// ---------------------------------------------------------------- the step

// Word layout of the 42-op step.
enum : int {
  A0 = 0, A1, A2, A3, A4, A5, C0, M0,  // s
  B0 = 8, B1, B2, B3, B4, MT, CT,      // t
  D0 = 16, D1, D2, D3, D4, CU,         // u
  XS = 24, XT, XU,                     // spare words
  E0 = 28, E1w, E2w, E3w, E4w, E5w, E6w, E7w, E8w, M2,  // s's tail
  FLAG = 40, ZERO = 41, TMP = 42,
};

// An odd op inserted before op `at` of a step (or the step ended there).
enum OddKind : int {
  kGrid = 0, kMemset, kExtraWait, kSpareRecord, kHostFunc, kPinnedCopy, kEndEarly, kCopyU, kOtherName, kOtherKind,
  kOddKinds,
  kSpin = 100,  // the host waits, with no CUDA call, for the latest word written (after op at - 1)
  kNone = -1,
};

struct Odd {
  int at = -1;
  int kind = kNone;
};

struct StepEnv {
  Kit* kit;
  Str s, t, u;
  CUevent e1, e2, e3, f, g, spare;
  uint64_t* pinned = nullptr;  // pinned host words for kPinnedCopy
  std::vector<std::pair<HostSeen*, uint64_t>>* hostChecks = nullptr;
  std::vector<std::pair<int, uint64_t>>* pinnedChecks = nullptr;  // (slot, want)
  int pinnedSlot = 0;
  // Per-step extras (idle modes): a block allocated with cuMemAllocAsync and an event, both
  // used by the step and let go while ops are held.
  bool extras = false;       // the block
  bool extraEvent = false;   // the event (with extras)
  CUdeviceptr block = 0;
  CUevent stepEvent = nullptr;
  uint64_t* blockMirror = nullptr;
  bool ended = false;
  int spinTimeouts = 0;
};

// Spins (no CUDA call) until the word `idx` holds `want`; false after `seconds`.
bool spinFor(const Kit& kit, int idx, uint64_t want, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (peek(kit.w.at(idx)) != want) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

void doOdd(StepEnv& env, const Odd& odd, int i) {
  Kit& k = *env.kit;
  switch (odd.kind) {
    case kGrid: k.mixOn(env.s, XS, XS, uint64_t(i), 2); break;
    case kMemset: k.memsetOn(env.t, XT, uint32_t(i * 5 + 1)); break;
    case kExtraWait: k.waitOn(env.u, env.e1); break;
    case kSpareRecord: k.record(env.spare, env.t); break;
    case kHostFunc: {
      auto* h = new HostSeen;
      h->src = k.w.at(A0);
      h->want = k.w.h[A0];
      SIM_CHECK(env.s.api->cuLaunchHostFunc(env.s.h, readWordFn, h));
      env.hostChecks->push_back({h, h->want});
      break;
    }
    case kPinnedCopy: {
      const int slot = env.pinnedSlot++ % 64;
      env.pinned[slot] = ~uint64_t(0);
      SIM_CHECK(env.t.api->cuMemcpyDtoHAsync(&env.pinned[slot], k.w.at(B1), 8, env.t.h));
      env.pinnedChecks->push_back({slot, k.w.h[B1]});
      break;
    }
    case kEndEarly: env.ended = true; break;
    case kCopyU: k.copyOn(env.u, XU, CU); break;
    case kOtherName: k.mixOn(env.s, XS, XS, uint64_t(i) + 3, 1, k.k.mix2); break;
    case kOtherKind: k.addOn(env.s, XS, XS, uint64_t(i) + 7); break;
    case kSpin: {
      if (k.lastWritten < 0) break;
      ++g_provoked;
      if (!spinFor(k, k.lastWritten, k.w.h[k.lastWritten], 20.0)) {
        ++env.spinTimeouts;
        expectValue(peek(k.w.at(k.lastWritten)), k.w.h[k.lastWritten],
                    "a word the host waited for without a CUDA call (20 s)", i);
      }
      break;
    }
    default: break;
  }
}

// One step of 42 ops (numbered from 0); `odds` are applied before the op at their place (at == 42:
// after the last op, before the closing synchronize). Returns after the step's ops (no sync).
void runStep(StepEnv& env, int i, const std::vector<Odd>& odds) {
  Kit& k = *env.kit;
  env.ended = false;
  k.lastWritten = -1;
  int n = 0;
  auto before = [&]() -> bool {  // false: the step ended early
    for (const Odd& o : odds)
      if (o.at == n && !env.ended) doOdd(env, o, i);
    ++n;
    return !env.ended;
  };
  const uint64_t ii = uint64_t(i);
  const Str &s = env.s, &t = env.t, &u = env.u;
  if (env.extras) {
    // Not counted as ops of the 42: an allocation and an event of the step.
    SIM_CHECK(s.api->cuMemAllocAsync(&env.block, 64, s.h));
    if (env.extraEvent) SIM_CHECK(k.cu->cuEventCreate(&env.stepEvent, CU_EVENT_DISABLE_TIMING));
  }
#define STEP_OP(...) \
  {                   \
    if (!before()) break; \
    __VA_ARGS__;        \
  }
  do {
    STEP_OP(k.mixOn(s, A0, A5, ii));               // 0
    STEP_OP(k.mixOn(s, A1, A0, 1));                // 1
    STEP_OP(k.mixOn(s, A2, A1, 2));                // 2
    STEP_OP(k.mixOn(s, A3, A2, 3));                // 3
    STEP_OP(k.memsetOn(s, M0, uint32_t(i)));       // 4
    STEP_OP(k.mixOn(s, A4, A3, ii * 7));           // 5
    STEP_OP(k.copyOn(s, C0, A4));                  // 6
    STEP_OP(k.record(env.e1, s));                  // 7
    STEP_OP(k.waitOn(t, env.e1));                  // 8
    STEP_OP(k.mixOn(t, B0, C0, 5));                // 9
    STEP_OP(k.mixOn(t, B1, B0, ii));               // 10
    STEP_OP(k.memsetOn(t, MT, uint32_t(i + 100))); // 11
    STEP_OP(k.mixOn(t, B2, B1, 7));                // 12
    STEP_OP(k.copyOn(t, CT, B2));                  // 13
    STEP_OP(k.record(env.extraEvent ? env.stepEvent : env.e2, t));  // 14
    STEP_OP(k.waitOn(u, env.e1));                  // 15
    STEP_OP(k.mixOn(u, D0, A4, 9));                // 16
    STEP_OP(k.mixOn(u, D1, D0, ii));               // 17
    STEP_OP(k.copyOn(u, CU, D1));                  // 18
    STEP_OP(k.mixOn(u, D2, D1, 11));               // 19
    STEP_OP(k.record(env.e3, u));                  // 20
    STEP_OP(k.waitOn(s, env.extraEvent ? env.stepEvent : env.e2));  // 21
    if (env.extraEvent) SIM_CHECK(k.cu->cuEventDestroy(env.stepEvent));  // recorded and waited on: let go
    if (!before()) break;  // 22
    if (env.extras) {  // the step's block: written and read on s, then freed (ops held)
      CUdeviceptr to = env.block, from = k.w.at(B2);
      uint64_t kk = 13;
      void* args[] = {&to, &from, &kk};
      SIM_CHECK(s.api->cuLaunchKernel(k.k.mix, 1, 1, 1, 1, 1, 1, 0, s.h, args, nullptr));
      *env.blockMirror = simMix64(k.w.h[B2] ^ 13);
      to = k.w.at(E0), from = env.block, kk = 0;
      SIM_CHECK(s.api->cuLaunchKernel(k.k.mix, 1, 1, 1, 1, 1, 1, 0, s.h, args, nullptr));
      k.w.h[E0] = simMix64(*env.blockMirror);
      k.lastWritten = E0;
      SIM_CHECK(s.api->cuMemFreeAsync(env.block, s.h));
    } else {
      k.mixOn(s, E0, B2, 13);
    }
    STEP_OP(k.waitOn(s, env.e3));                  // 23
    STEP_OP(k.mixOn(s, E1w, D2, ii));              // 24
    STEP_OP(k.mixOn(s, E2w, E1w, 19));             // 25
    STEP_OP(k.mixOn(t, B3, B2, 21));               // 26
    STEP_OP(k.mixOn(t, B4, B3, ii));               // 27
    STEP_OP(k.mixOn(u, D3, D2, 25));               // 28
    STEP_OP(k.mixOn(s, E3w, E2w, 27));             // 29
    STEP_OP(k.copyOn(s, E4w, E0));                 // 30
    STEP_OP(k.mixOn(s, E5w, E3w, ii));             // 31
    STEP_OP(k.record(env.f, t));                   // 32
    STEP_OP(k.waitOn(s, env.f));                   // 33
    STEP_OP(k.mixOn(s, E6w, B4, 29));              // 34
    STEP_OP(k.mixOn(u, D4, D3, ii));               // 35
    STEP_OP(k.mixOn(s, E7w, E6w, 31));             // 36
    STEP_OP(k.memsetOn(s, M2, uint32_t(i * 3)));   // 37
    STEP_OP(k.mixOn(s, A5, E7w, 33));              // 38
    STEP_OP(k.record(env.g, u));                   // 39
    STEP_OP(k.waitOn(s, env.g));                   // 40
    STEP_OP(k.mixOn(s, E8w, D4, 35));              // 41
    before();  // 42: odds after the last op
  } while (false);
#undef STEP_OP
  if (env.extras && env.ended) {
    // Ended before the block's free or the event's destroy: make them now.
    if (n <= 23) SIM_CHECK(s.api->cuMemFreeAsync(env.block, s.h));
    if (n <= 22 && env.extraEvent) SIM_CHECK(k.cu->cuEventDestroy(env.stepEvent));
  }
}

struct StepRig {
  Kit kit;
  StepEnv env;
  std::vector<std::pair<HostSeen*, uint64_t>> hostChecks;
  std::vector<std::pair<int, uint64_t>> pinnedChecks;
  uint64_t blockMirror = 0;

  void init(const simtest::DriverApi& cu, const Kernels& k, Str s, Str t, Str u) {
    kit.cu = &cu;
    kit.k = k;
    kit.w.base = simtest::zeroedBuffer(cu, 8 * kWords);
    env.kit = &kit;
    env.s = s, env.t = t, env.u = u;
    env.e1 = untimedEvent(cu), env.e2 = untimedEvent(cu), env.e3 = untimedEvent(cu);
    env.f = untimedEvent(cu), env.g = untimedEvent(cu), env.spare = untimedEvent(cu);
    void* p = nullptr;
    SIM_CHECK(cu.cuMemAllocHost(&p, 64 * 8));
    env.pinned = static_cast<uint64_t*>(p);
    env.hostChecks = &hostChecks;
    env.pinnedChecks = &pinnedChecks;
    env.blockMirror = &blockMirror;
  }
  // After the step's synchronize.
  void check(int i) {
    kit.checkWords("word", i);
    for (auto& [h, want] : hostChecks) {
      expectValue(uint64_t(h->ran.load()), 1, "host function runs", i);
      expectValue(h->seen.load(), want, "word seen by a host function", i);
      delete h;
    }
    hostChecks.clear();
    for (auto& [slot, want] : pinnedChecks) expectValue(env.pinned[slot], want, "word copied to pinned memory", i);
    pinnedChecks.clear();
  }
};

Odd drawOdd(int i, uint64_t salt) {
  const uint64_t r = draw(i, salt);
  return {int(r % 43), int((r >> 16) % kOddKinds)};
}

std::vector<Str> threeStreams(const simtest::DriverApi& cu) {
  return {{&cu, nonBlocking(cu)}, {&cu, nonBlocking(cu)}, {&cu, nonBlocking(cu)}};
}

// ------------------------------------------------------------------ modes

void lateDiverge(const simtest::DriverApi& cu, const Kernels& k, int steps) {
  StepRig rig;
  auto st = threeStreams(cu);
  rig.init(cu, k, st[0], st[1], st[2]);
  for (int i = 0; i < steps; ++i) {
    std::vector<Odd> odds;
    if (irregular(i, 1, 3)) {
      odds.push_back(drawOdd(i, 2));
      ++g_provoked;
    }
    runStep(rig.env, i, odds);
    rig.kit.syncAll();
    rig.check(i);
  }
}

// pattern: "ab" (A,B,A,B), "aab" (A,A,B); nosync: the closing synchronize every tenth step only.
void alternate(const simtest::DriverApi& cu, const Kernels& k, int steps, const std::string& pattern, bool nosync) {
  StepRig rig;
  auto st = threeStreams(cu);
  rig.init(cu, k, st[0], st[1], st[2]);
  for (int i = 0; i < steps; ++i) {
    std::vector<Odd> odds;
    const bool b = pattern == "ab" ? i % 2 == 1 : i % 3 == 2;
    if (b) odds.push_back({36, kGrid});
    // Odd steps (not in nosync: an odd host-visible op would need its sync).
    if (!nosync && irregular(i, 3, 7)) {
      Odd o = drawOdd(i, 4);
      if (o.kind == kEndEarly) o.kind = kMemset;
      odds.push_back(o);
      ++g_provoked;
    }
    runStep(rig.env, i, odds);
    if (!nosync || i % 10 == 9 || i == steps - 1) {
      rig.kit.syncAll();
      rig.check(i);
    }
  }
}

// rematch-inner: X, Y = X Z X v, W = X Z X q, W2 = X z1 z2 q.
void rematchInner(const simtest::DriverApi& cu, const Kernels& k, int steps) {
  Kit kit;
  kit.cu = &cu;
  kit.k = k;
  kit.w.base = simtest::zeroedBuffer(cu, 8 * kWords);
  const Str s{&cu, nonBlocking(cu)}, t{&cu, nonBlocking(cu)}, u{&cu, nonBlocking(cu)};
  CUevent e1 = untimedEvent(cu), e2 = untimedEvent(cu), e4 = untimedEvent(cu), e3 = untimedEvent(cu);
  enum { a0 = 0, a1, a2, a3, b0 = 8, b1, d0 = 16, d1, m = 24, xs = 25 };
  auto X = [&](uint64_t kk) {
    kit.mixOn(s, a0, a0, kk);
    kit.record(e1, s);
    kit.waitOn(t, e1);
    kit.mixOn(t, b0, a0, 3);
    kit.mixOn(s, a1, a1, kk + 1);
    kit.waitOn(u, e1);
    kit.mixOn(u, d0, a0, 5);
    kit.memsetOn(s, m, uint32_t(kk));
  };
  auto Z = [&](int upTo) {  // its first `upTo` ops (6: all)
    int n = 0;
    if (n++ < upTo) kit.record(e2, t);
    if (n++ < upTo) kit.waitOn(s, e2);
    if (n++ < upTo) kit.record(e4, u);
    if (n++ < upTo) kit.waitOn(s, e4);
    if (n++ < upTo) kit.mixOn(s, a2, b0, 1);
    if (n++ < upTo) kit.mixOn(u, d1, d0, 7);
  };
  for (int i = 0; i < steps; ++i) {
    const uint64_t ii = uint64_t(i);
    // 0-7: X steps; 8-15: Y steps; then mostly Y, some X, some W / W2.
    int shape = i < 8 ? 0 : i < 16 ? 1 : 1;
    if (i >= 16) {
      const uint64_t r = draw(i, 5) % 10;
      shape = r < 5 ? 1 : r < 7 ? 0 : r < 9 ? 2 : 3;
    }
    X(ii * 4);
    if (shape == 1 || shape == 2) {
      Z(6);
      X(ii * 4 + 2);
      if (shape == 1) {
        kit.mixOn(s, a3, a1, 9);  // v
      } else {
        kit.mixOn(s, xs, xs, ii, 2 + unsigned(draw(i, 17) % 40));  // q (a grid drawn anew)
        ++g_provoked;
      }
    } else if (shape == 3) {
      Z(2);
      kit.mixOn(s, xs, xs, ii, 2 + unsigned(draw(i, 17) % 40));  // q (a grid drawn anew)
      ++g_provoked;
    }
    (void)e3;
    kit.syncAll();
    kit.checkWords("word", i);
  }
}

// inner-loop: a body of 6 ops run 10 times (9 or 11 on irregular steps), then 10 ops.
void innerLoop(const simtest::DriverApi& cu, const Kernels& k, int steps) {
  Kit kit;
  kit.cu = &cu;
  kit.k = k;
  kit.w.base = simtest::zeroedBuffer(cu, 8 * kWords);
  const Str s{&cu, nonBlocking(cu)}, t{&cu, nonBlocking(cu)}, u{&cu, nonBlocking(cu)};
  CUevent e = untimedEvent(cu), f = untimedEvent(cu), g = untimedEvent(cu);
  enum { a0 = 0, a1, b0 = 8, b1, d0 = 16, d1, m = 24 };
  for (int i = 0; i < steps; ++i) {
    const uint64_t ii = uint64_t(i);
    int iterations = 10;
    if (irregular(i, 6, 4)) {
      iterations = draw(i, 7) % 2 ? 9 : 11;
      ++g_provoked;
    }
    for (int j = 0; j < iterations; ++j) {
      kit.waitOn(s, f);
      kit.mixOn(s, a0, a0, ii * 16 + uint64_t(j));
      kit.record(e, s);
      kit.waitOn(t, e);
      kit.mixOn(t, b0, a0, uint64_t(j));
      kit.record(f, t);
    }
    kit.waitOn(u, f);
    kit.mixOn(u, d0, b0, ii);
    kit.memsetOn(u, m, uint32_t(i));
    kit.mixOn(u, d1, d0, 3);
    kit.record(g, u);
    kit.waitOn(s, g);
    kit.mixOn(s, a1, d1, 5);
    kit.mixOn(s, a0, a1, ii);
    kit.mixOn(t, b1, b0, 7);
    kit.waitOn(t, g);
    kit.syncAll();
    kit.checkWords("word", i);
  }
}

// stream-only: the same ops on s or t; the same six ops on both, in either order.
void streamOnly(const simtest::DriverApi& cu, const Kernels& k, int steps) {
  Kit kit;
  kit.cu = &cu;
  kit.k = k;
  kit.w.base = simtest::zeroedBuffer(cu, 8 * kWords);
  const Str s{&cu, nonBlocking(cu)}, t{&cu, nonBlocking(cu)}, u{&cu, nonBlocking(cu)};
  CUevent e = untimedEvent(cu), g = untimedEvent(cu), es = untimedEvent(cu), et = untimedEvent(cu);
  for (int i = 0; i < steps; ++i) {
    const uint64_t ii = uint64_t(i);
    const bool onT = irregular(i, 8, 3);
    const Str& x = onT ? t : s;
    const int base = onT ? 8 : 0;  // x's words
    for (int j = 0; j < 8; ++j) kit.mixOn(x, base + j, base + (j + 7) % 8, ii + uint64_t(j));
    kit.record(e, x);
    kit.waitOn(u, e);
    kit.mixOn(u, 16, base + 7, ii);
    kit.record(g, u);
    kit.waitOn(x, g);
    kit.mixOn(x, base, 16, 1);
    // The same six ops on s and on t (own words), in an order that swaps irregularly.
    auto six = [&](const Str& y, int wb, CUevent ev) {
      kit.mixOn(y, wb, wb + 1, ii);
      kit.memsetOn(y, wb + 2, uint32_t(i));
      kit.copyOn(y, wb + 3, wb);
      kit.mixOn(y, wb + 1, wb + 3, 3);
      kit.record(ev, y);
      kit.mixOn(y, wb + 4, wb + 1, 5);
    };
    if (irregular(i, 9, 3)) {
      six(t, 40, et);
      six(s, 32, es);
      ++g_provoked;
    } else {
      six(s, 32, es);
      six(t, 40, et);
    }
    kit.waitOn(u, es);
    kit.waitOn(u, et);
    kit.mixOn(u, 17, 33, ii);
    kit.mixOn(u, 18, 41, ii);
    kit.syncAll();
    kit.checkWords("word", i);
  }
}

// idle modes: every: the place (20) every step; else irregular places.
void idleSpin(StepRig& rig, int steps, bool every, bool destroy = false) {
  rig.env.extras = true;
  rig.env.extraEvent = destroy;
  std::set<CUevent> handlesLate;
  CUevent prev = nullptr;
  int reused = 0, notReused = 0;
  double spinSteps = 0, spinSeconds = 0;
  for (int i = 0; i < steps; ++i) {
    std::vector<Odd> odds;
    bool spin = false;
    if (every) {
      odds.push_back({20, kSpin});
      spin = true;
    } else if (irregular(i, 10, 3)) {
      odds.push_back({int(1 + draw(i, 11) % 42), kSpin});
      spin = true;
    }
    const auto t0 = std::chrono::steady_clock::now();
    runStep(rig.env, i, odds);
    if (spin) {
      spinSteps += 1;
      spinSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    rig.kit.syncAll();
    rig.check(i);
    // The step's event handle: eagerly the destroyed one is reused by the next create.
    if (i >= 30 && prev) (rig.env.stepEvent == prev ? reused : notReused)++;
    prev = rig.env.stepEvent;
    if (rig.env.spinTimeouts) break;
  }
  if (destroy)
    expectValue(uint64_t(notReused), 0, "steps whose new event did not get the handle destroyed the step before",
                steps);
  SIM_CHECK(rig.kit.cu->cuCtxSynchronize());
  SimCounters c{};
  simCounters(&c);
  expectValue(c.freesAsyncRun, c.allocsAsync, "stream-ordered frees run (of the blocks allocated)", steps);
  if (spinSteps > 0)
    std::printf("sim_review6_learning: %s: %d steps waited for a word with no CUDA call: %.2f ms a step\n", g_mode,
                int(spinSteps), 1000.0 * spinSeconds / spinSteps);
}

// rest-churn: a 12-op step; irregular bursts of ops whose shapes never repeat.
void restChurn(const simtest::DriverApi& cu, const Kernels& k, int steps) {
  Kit kit;
  kit.cu = &cu;
  kit.k = k;
  kit.w.base = simtest::zeroedBuffer(cu, 8 * kWords);
  const Str s{&cu, nonBlocking(cu)}, t{&cu, nonBlocking(cu)};
  CUevent e = untimedEvent(cu), f = untimedEvent(cu), be = untimedEvent(cu), bf = untimedEvent(cu);
  uint64_t burstCounter = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t ii = uint64_t(i);
    auto twelve = [&] {
      kit.mixOn(s, 0, 0, ii);
      kit.mixOn(s, 1, 0, 1);
      kit.memsetOn(s, 2, uint32_t(i));
      kit.record(e, s);
      kit.waitOn(t, e);
      kit.mixOn(t, 8, 1, 2);
      kit.copyOn(t, 9, 8);
      kit.mixOn(t, 10, 9, ii);
      kit.record(f, t);
      kit.waitOn(s, f);
      kit.mixOn(s, 3, 10, 3);
      kit.mixOn(s, 0, 3, 4);
    };
    // The burst comes before, in the middle of, or after the step's ops.
    const bool burst = irregular(i, 12, 4);
    const int where = int(draw(i, 13) % 3);
    auto doBurst = [&] {
      const int n = 40 + int(draw(i, 14) % 160);
      for (int j = 0; j < n; ++j) {
        const uint64_t r = simMix64(++burstCounter);
        const unsigned grid = 1 + unsigned(r % 97);  // shapes that hardly repeat
        switch ((r >> 8) % 6) {
          case 0: kit.mixOn(s, 16 + int(r >> 20) % 4, 16 + int(r >> 24) % 4, r, grid); break;
          case 1: kit.mixOn(t, 24 + int(r >> 20) % 4, 24 + int(r >> 24) % 4, r, grid); break;
          case 2: kit.record(be, s); kit.waitOn(t, be); break;
          case 3: kit.record(bf, t); kit.waitOn(s, bf); break;
          case 4: kit.memsetOn(s, 20, uint32_t(r)); break;
          default: kit.mixOn(s, 16, 16, r, 1, grid % 2 ? k.mix2 : k.mix); break;
        }
      }
      // Words read across streams in the burst are only written by their own stream.
      ++g_provoked;
    };
    if (burst && where == 0) doBurst();
    twelve();
    if (burst && where == 1) doBurst();
    kit.syncAll();
    if (burst && where == 2) doBurst(), kit.syncAll();
    kit.checkWords("word", i);
  }
}

// arena-spill: 1500 launches a step of a kernel with an 8192-byte struct parameter.
void arenaSpill(const simtest::DriverApi& cu, int steps) {
  constexpr size_t kBig = 8192;
  constexpr int kLaunches = 1500;
  const size_t sizes[] = {8, 8, 8, kBig};
  const CUfunction big = simKernelCreate("sim_add_big_review6", SIM_KERNEL_LIBRARY, 4, sizes, nullptr);
  CUstream s = nonBlocking(cu);
  const CUdeviceptr w = simtest::zeroedBuffer(cu);
  std::vector<uint64_t> structure(kBig / 8, 0);
  uint64_t hw = 0;
  size_t offset = 0, size = 0;
  simKernelParamLayout(big, 3, &offset, &size);
  std::vector<uint64_t> wantTags;
  wantTags.reserve(kLaunches);
  for (int i = 0; i < steps; ++i) {
    simTraceClear();
    wantTags.clear();
    for (int j = 0; j < kLaunches; ++j) {
      const uint64_t tag = j % 3 == 0 ? (uint64_t(i) << 32 | uint64_t(j)) : (0xc0ffee00ull | uint64_t(j % 7));
      structure[0] = tag;
      structure[kBig / 8 - 1] = ~tag;
      structure[(j % 100) + 1] = tag * 3;
      CUdeviceptr to = w, from = w;
      uint64_t one = 1;
      void* args[] = {&to, &from, &one, structure.data()};
      const unsigned grid = 1 + unsigned(simMix64(uint64_t(j)) % 61);  // the step is the only period
      SIM_CHECK(cu.cuLaunchKernel(big, grid, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      structure[(j % 100) + 1] = 0;
      wantTags.push_back(tag);
      ++hw;
    }
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(w), hw, "w (launches so far)", i);
    size_t seen = 0;
    for (size_t e = 0, count = simTraceSize(); e < count; ++e) {
      SimEffect fx{};
      if (simTraceGet(e, &fx) != 0 || fx.kind != SIM_EFFECT_KERNEL || !fx.kernelName ||
          std::strcmp(fx.kernelName, "sim_add_big_review6") != 0)
        continue;
      if (seen < wantTags.size() && fx.paramBytes >= offset + kBig) {
        uint64_t got[3];
        std::memcpy(&got[0], fx.params + offset, 8);
        std::memcpy(&got[1], fx.params + offset + kBig - 8, 8);
        std::memcpy(&got[2], fx.params + offset + 8 * ((seen % 100) + 1), 8);
        const uint64_t want = wantTags[seen];
        if (got[0] != want || got[1] != ~want || got[2] != want * 3) {
          expectValue(got[0], want, "tag of an executed launch's struct", i);
          expectValue(got[1], ~want, "last word of an executed launch's struct", i);
          expectValue(got[2], want * 3, "a middle word of an executed launch's struct", i);
        }
      }
      ++seen;
    }
    expectValue(seen, wantTags.size(), "executed launches of the big kernel", i);
  }
}

// variants / warmup1: late-diverge's step in a few shapes.
void shapes(const simtest::DriverApi& cu, const Kernels& k, int steps, bool warmup1) {
  StepRig rig;
  auto st = threeStreams(cu);
  rig.init(cu, k, st[0], st[1], st[2]);
  const Odd shapesOf[5] = {{-1, kNone}, {20, kGrid}, {30, kOtherName}, {12, kMemset}, {38, kSpareRecord}};
  for (int i = 0; i < steps; ++i) {
    const int shape = warmup1 ? int(draw(i / 2, 15) % 5) : int(draw(i / 4, 16) % 3);
    std::vector<Odd> odds;
    if (shapesOf[shape].kind != kNone) odds.push_back(shapesOf[shape]);
    runStep(rig.env, i, odds);
    rig.kit.syncAll();
    rig.check(i);
  }
}


// tail-extension: the step, or the step with one op more at its end (three such
// extensions, in runs of two to five steps, irregular order).
void tailExtension(const simtest::DriverApi& cu, const Kernels& k, int steps) {
  StepRig rig;
  auto st = threeStreams(cu);
  rig.init(cu, k, st[0], st[1], st[2]);
  const int kinds[4] = {kNone, kGrid, kMemset, kSpareRecord};
  int shape = 0, left = 0, run = 0;
  for (int i = 0; i < steps; ++i) {
    if (left == 0) {
      shape = int(draw(run, 18) % 4);
      left = 2 + int(draw(run, 19) % 4);
      ++run;
    }
    --left;
    std::vector<Odd> odds;
    if (kinds[shape] != kNone) odds.push_back({42, kinds[shape]});
    runStep(rig.env, i, odds);
    rig.kit.syncAll();
    rig.check(i);
  }
}

// events-only: per step, 12 rounds of four event ops (s records, t waits,
// t records, s waits) with no kernel between, then one kernel on each stream
// that reads the other's word, on irregular steps 11 or 13 rounds.
void eventsOnly(const simtest::DriverApi& cu, const Kernels& k, int steps) {
  Kit kit;
  kit.cu = &cu;
  kit.k = k;
  kit.w.base = simtest::zeroedBuffer(cu, 8 * kWords);
  const Str s{&cu, nonBlocking(cu)}, t{&cu, nonBlocking(cu)};
  CUevent e1 = untimedEvent(cu), e2 = untimedEvent(cu);
  for (int i = 0; i < steps; ++i) {
    int rounds = 12;
    if (irregular(i, 20, 4)) {
      rounds = draw(i, 21) % 2 ? 11 : 13;
      ++g_provoked;
    }
    kit.mixOn(s, 0, 0, uint64_t(i));
    kit.mixOn(t, 8, 8, uint64_t(i) + 1);
    for (int j = 0; j < rounds; ++j) {
      kit.record(e1, s);
      kit.waitOn(t, e1);
      kit.record(e2, t);
      kit.waitOn(s, e2);
    }
    kit.mixOn(s, 1, 8, 3);  // t's word: s waited on t's record after it
    kit.mixOn(t, 9, 0, 5);  // s's word: t waited on s's record after it
    kit.syncAll();
    kit.checkWords("word", i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review6_learning", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  const bool idle = mode.rfind("idle-", 0) == 0;
  if (idle) setenv("SIM_ASYNC_US", "100", 0);  // the simulated GPU runs while the host spins
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review6_learning", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  Kernels k;
  k.mix = simtest::libraryKernel3("sim_mix_review6");
  k.mix2 = simtest::libraryKernel3("sim_mix_review6_other");
  k.add = simtest::libraryKernel3("sim_add_review6");
  if (mode == "late-diverge") lateDiverge(cu, k, steps);
  else if (mode == "alternate-ab") alternate(cu, k, steps, "ab", false);
  else if (mode == "alternate-aab") alternate(cu, k, steps, "aab", false);
  else if (mode == "alternate-nosync") alternate(cu, k, steps, "ab", true);
  else if (mode == "rematch-inner") rematchInner(cu, k, steps);
  else if (mode == "inner-loop") innerLoop(cu, k, steps);
  else if (mode == "stream-only") streamOnly(cu, k, steps);
  else if (mode == "idle-spin" || mode == "idle-spin-every" || mode == "idle-destroy") {
    StepRig rig;
    auto st = threeStreams(cu);
    rig.init(cu, k, st[0], st[1], st[2]);
    idleSpin(rig, steps, mode == "idle-spin-every", mode == "idle-destroy");
  } else if (mode == "idle-spin-pts") {
    StepRig rig;
    rig.init(cu, k, {&drv.perThread, nullptr}, {&cu, nonBlocking(cu)}, {&cu, nonBlocking(cu)});
    idleSpin(rig, steps, false);
  } else if (mode == "idle-spin-ctx1") {
    CUdevice dev1 = 0;
    CUcontext ctx1 = nullptr;
    if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&ctx1, dev1) != CUDA_SUCCESS) {
      std::printf("sim_review6_learning: no device 1\n");
      return 2;
    }
    SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
    StepRig rig;
    rig.init(cu, k, {&cu, nullptr}, {&cu, nonBlocking(cu)}, {&cu, nonBlocking(cu)});
    idleSpin(rig, steps, false);
  } else if (mode == "rest-churn") restChurn(cu, k, steps);
  else if (mode == "arena-spill") arenaSpill(cu, steps);
  else if (mode == "variants") shapes(cu, k, steps, false);
  else if (mode == "warmup1") shapes(cu, k, steps, true);
  else if (mode == "tail-extension") tailExtension(cu, k, steps);
  else if (mode == "events-only") eventsOnly(cu, k, steps);
  else {
    std::printf("usage: sim_review6_learning --mode late-diverge|alternate-ab|alternate-aab|alternate-nosync|"
                "rematch-inner|inner-loop|stream-only|idle-spin|idle-spin-every|idle-spin-pts|idle-spin-ctx1|idle-destroy|"
                "rest-churn|arena-spill|variants|warmup1|tail-extension|events-only [--steps N] [--expect-graphs]\n");
    return 2;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  return report(steps, args.expectGraphs);
}
