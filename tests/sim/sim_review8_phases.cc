// sim_review8_phases: the eighth red-team round's review of long programs
// whose behaviour changes over time, and of graft's state machine over them:
// learning, graphs live, variants, resting (GRAFT_DORMANT_AFTER_OPS,
// GRAFT_REST_BELOW_PCT) and looking again, dropped segments, pieces
// (src/core/engine.cc: submit, tryStart, resolveHeld, countTry,
// restIfNothingRepeats, rest, buildFromPeriod, buildRun, pieceCuts;
// period_detector.cc; history.cc; segment.cc; and the hook's rest branch,
// src/hook/interpose.cc submitOp). Every kernel, memset and copy is mirrored
// on the host in program order (the eager result: cross-stream accesses are
// ordered by events or by the legacy stream's implicit synchronization), and
// every value the program reads back (pinned, pageable, polled) and every
// return code must be the simulated driver's, eagerly and under graft:
//   sim_review8_phases --mode MODE [--steps N] [--expect-graphs]
// Modes print the share of effects that ran from graphs in each phase.
//
// (Each "FAILS under graft" below is what graft did when the mode was written;
// tests/sim/meson.build registers what holds now: all pass; sticky-held, a
// documented limit, runs eagerly only.)
//
// train          a training loop on the legacy stream: a batch uploaded from
//                pinned memory, forward (8 kernels), loss, backward, gradient
//                reduction on a blocking side stream joined by events, an
//                optimizer whose learning rate (a kernel scalar) warms up for
//                25 steps, stays, decays again at steps 120-140, and
//                loss.item() every step; an eval pass every 7 steps (other
//                kernels, no backward, a synchronous cuMemcpyDtoH); a
//                checkpoint every 11 steps (parameters to pinned memory on
//                the side stream, gradients to pageable memory on the main
//                one, both checked), and a restore of edited parameters from
//                pinned memory every 22 steps.
// train-nb       the same with a non-blocking side stream.
// seq-grow       a sequence length that grows by one every step (grids and a
//                scalar change every step: graft rests), plateaus, grows
//                again, plateaus; two streams joined by events, a read-back
//                every step.
// alloc-shift    a caching allocator warming up: for 30 steps a
//                cuMemAllocAsync block of a growing size and a new cuMemAlloc
//                block every step (new addresses, patched), then the same
//                sizes (addresses settle); the block freed with
//                cuMemFreeAsync at the step's end. Also with GRAFT_POOL=1.
// serve          a server: 12 request shapes that start alike (two common
//                kernels) in a seeded random order, in runs of 1-4; upload
//                from pinned memory, read-back per request (more shapes than
//                GRAFT_MAX_VARIANTS).
// serve-phases   the same with kinds 0-7 for a third of the requests, then
//                8-11, then all.
// rest-wake      phases of step A (two streams, events both ways and a wait
//                on the previous step's record), noise (a new grid every
//                launch), A again, another step B, A and B alternating, ...;
//                for GRAFT_DORMANT_AFTER_OPS=256 GRAFT_MAX_PERIOD=64 (rests
//                that begin and end at moving places, mid-step included).
// rest-wake-nb   the same with non-blocking streams.
// rest-pts       the same on the per-thread default stream and the legacy
//                stream (implicit synchronization both ways, synchronous
//                cuMemcpyDtoH reads): rests start and end with graft's
//                per-thread proxy joins and bridges in between.
// two-loops      two independent loops interleaved op by op on two streams,
//                periods 5 and 7 (the sequence repeats every 70 ops),
//                read-backs every 97 ticks.
// two-loops-sync the same, t reading back at its loop's end (every 7 ticks).
// two-loops-shift  two-loops where s's loop has 4 ops from tick 1000 to 1600.
// alt-ab, alt-aab  one step shape whose scalars come in two sets (A, B) in
//                the order A,B,A,B or A,A,B, then A only, then B only
//                (patches toggle, stop, change once); read-back every step.
// alt-ab-nosync, alt-aab-nosync  the same, read-back every 10 steps.
// early-stop     data-dependent control flow: per step an inner loop whose
//                iterations each read a residual back and stop once it is a
//                multiple of 5 (at most 9), then a kernel whose scalar is the
//                residual and whose grid depends on it.
// early-stop-poll  the same, the residual read by polling cuEventQuery on a
//                record after the copy (even steps) or cuStreamQuery (odd).
// grow-layers    a model that gains a layer (3 ops) every 25 steps: the old
//                run's pieces are a prefix of the new one.
// drop-return    a 40-kernel step graphed; 80 steps with a kernel of a new
//                grid at op 30 (the graph mismatches late every step, and is
//                dropped after 16 costly mismatches); then the clean step.
// capture-in-rest  a step graphed (a wait of s2 on the step's record), a
//                one-kernel loop graphed (a probe), then noise until a probe
//                launch reaches the driver at its call (graft rests); then
//                the program captures a kernel and a record of eCap on s3
//                (relaxed, graph thrown away); noise until a probe is held
//                again; then the step, with s2's wait naming eCap every
//                third step: the driver refuses it (CUDA_ERROR_CAPTURED_EVENT,
//                907). Exit 3 unless graft rests (GRAFT_DORMANT_AFTER_OPS=256
//                GRAFT_MAX_PERIOD=64). FAILS under graft: the waits return
//                CUDA_SUCCESS (40 of 40, also with 64/16, 512/128,
//                GRAFT_ASYNC_LAUNCH=0); graft holds them in the replayed
//                step's graph. The hook's rest branch (interpose.cc:499-511,
//                submitOp) forwards a record without
//                OpEncoder::noteEventRecord(event, recordInCapture)
//                (interpose.cc:520/589), so a record made in the program's
//                capture while graft rests never enters captured_records_
//                (op_codec.h:129), and op_codec.cc:352 takes a later wait
//                on it for a graphable one (driver_checks otherwise).
// sticky-in-rest a one-kernel loop graphed, noise until graft rests (probe as
//                above), a kernel reading unmapped memory (a fault: the
//                sticky CUDA_ERROR_ILLEGAL_ADDRESS, 700), the host works 50
//                ms (SIM_ASYNC_US lets the simulated GPU run; the program
//                sets it), then 5000 launches of the loop's kernel and a
//                sync: eagerly all return 700. FAILS under graft (with
//                GRAFT_DORMANT_AFTER_OPS=256 GRAFT_MAX_PERIOD=64, 64/16,
//                512/128, 1024/64 with GRAFT_REST_BELOW_PCT=100): the calls
//                in the rest return 700, but once the rest ends (by op
//                count) 32 launches (one unrolled segment) return
//                CUDA_SUCCESS after 1006 calls had returned 700 to the
//                program: the rest branch (interpose.cc:499-511) returns the
//                driver's result without isStickyError/stopAfterStickyError
//                (which the normal path does at interpose.cc:591), so graft
//                never learns of the fault and replays after its rest. Exit 3
//                (path not taken) when graft never rests.
// sticky-after-copy, sticky-after-alloc, sticky-after-event  a step of 8
//                kernels, an upload from pinned memory, 8 kernels, a
//                read-back (graphed). At step 40 the first kernel faults; the
//                host works 50 ms without a CUDA call (graft's idle flush
//                issues what it holds; the GPU runs the fault), then calls
//                cuMemcpyHtoDAsync (the upload), or first cuMemAllocAsync or
//                cuEventCreate: each returns 700, eagerly and under graft;
//                then the 8 kernels: eagerly 700 each. FAILS under graft (any
//                options): they return CUDA_SUCCESS (held as the graphed
//                second half) after the program was given 700. Same cause
//                on other forwarding paths: the host-memory copy's early
//                return (interpose.cc:562-581), allocAsync/directOn
//                (interpose.cc:638, 887), cuEventCreate (interpose.cc:903-910),
//                and every call forwarded "as is" (interpose.cc:1034) never
//                look at a sticky result; only submitOp's normal path (591),
//                synchronizations (949) and queries (1009/1011) stop replay.
// sticky-held    a step of 200 kernels in a chain (pieces) and a read-back; at
//                step 40 kernel 10 faults and after kernel 20 the host works
//                50 ms without a CUDA call; the 179 later launches return
//                700 eagerly. FAILS under graft (any options): all 179 return
//                CUDA_SUCCESS. Partly inherent (a held launch cannot know of
//                an asynchronous fault, as README says for graft's own query
//                answers), but graft's own cuGraphLaunch already returned 700
//                for the piece holding the fault (graph_executor.cc:957,
//                "a graph launch failed") and handleFailedLaunches
//                (engine.cc:215) only disables that one segment: the next
//                pieces (variants starting with the same op) keep holding
//                the program's launches; nothing stops replay until the
//                program synchronizes.
//
// Suggested fix for the sticky modes: test every result graft hands back or
// gets from its own driver calls (wrapperBody after dispatch; the rest and
// pass-through branches; the launch thread's cuGraphLaunch and the eager
// re-issues) with isStickyError, and stop replay (issue what is held; no op
// held from then on) at the first one. For capture-in-rest: in the rest
// branch, note event records (noteEventRecord with programCaptureActive()),
// or do not take the rest branch while the program captures.
//
// Every other mode passes eagerly and under graft with --expect-graphs at
// default options and with: GRAFT_DORMANT_AFTER_OPS=256 GRAFT_MAX_PERIOD=64
// (also with GRAFT_REST_BELOW_PCT=100), GRAFT_DORMANT_AFTER_OPS=64
// GRAFT_MAX_PERIOD=16, GRAFT_SEGMENT_OPS=4, GRAFT_SEGMENT_OPS=2
// GRAFT_MIN_SEGMENT_OPS=2, GRAFT_MAX_VARIANTS=1, GRAFT_MAX_VARIANTS=2
// GRAFT_MAX_SEGMENTS=3, GRAFT_MAX_SEGMENTS=1, GRAFT_WARMUP=1 and 3,
// GRAFT_ASYNC_LAUNCH=0, GRAFT_POOL=1, GRAFT_MAX_PERIOD=8,
// GRAFT_SYNC_TAIL_OPS=2, SIM_GRAPH_LAUNCH_US=200 GRAFT_IDLE_FLUSH_MS=1,
// GRAFT_HOT_ARENA_MB=0, SIM_SEED 1 and 5 (eagerly also SIM_SEED 3, 7 with
// SIM_STEPS=6); a few find no graph with the smallest GRAFT_MAX_PERIOD
// (exit 3, expected: their period is longer). train, serve, alloc-shift and
// early-stop-poll also for 600-5000 steps.
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

uint64_t draw(uint64_t a, uint64_t salt) {
  return simMix64(a * 0x2545f4914f6cdd1dull + salt * 0x9e3779b97f4a7c15ull + 0x1234567ull);
}

// A stream as the program names it: the API table (plain or per-thread) and the handle.
struct Str {
  const simtest::DriverApi* api = nullptr;
  CUstream h = nullptr;
};

constexpr int kWords = 512;
constexpr int kPinned = 512;

// Kernels: names differ (eval, optimizer, ... are other kernels), effects are
// sim_mix (dst = mix(src ^ k)) or sim_add (dst = src + k).
struct Kernels {
  CUfunction fwd, bwd, opt, red, evalk, loss, emb, noise, addk, tail;
};

struct Kit {
  const simtest::DriverApi* cu = nullptr;  // plain
  const simtest::DriverApi* pt = nullptr;  // per-thread
  Kernels k{};
  CUdeviceptr base = 0;
  uint64_t h[kWords] = {};
  uint64_t* pin = nullptr;  // pinned host words
  int step = 0;
  CUdeviceptr at(int i) const { return base + CUdeviceptr(8 * i); }

  void mix(const Str& s, CUfunction f, int dst, int src, uint64_t kk, unsigned grid = 1) {
    CUdeviceptr to = at(dst), from = at(src);
    void* args[] = {&to, &from, &kk};
    SIM_CHECK(s.api->cuLaunchKernel(f, grid, 1, 1, 1, 1, 1, 0, s.h, args, nullptr));
    h[dst] = simMix64(h[src] ^ kk);
  }
  void add(const Str& s, int dst, int src, uint64_t kk, unsigned grid = 1) {
    CUdeviceptr to = at(dst), from = at(src);
    void* args[] = {&to, &from, &kk};
    SIM_CHECK(s.api->cuLaunchKernel(k.addk, grid, 1, 1, 1, 1, 1, 0, s.h, args, nullptr));
    h[dst] = h[src] + kk;
  }
  // A kernel on raw pointers (blocks allocated outside the word array).
  void mixRaw(const Str& s, CUfunction f, CUdeviceptr to, CUdeviceptr from, uint64_t kk, uint64_t* hto,
              const uint64_t* hfrom, unsigned grid = 1) {
    void* args[] = {&to, &from, &kk};
    SIM_CHECK(s.api->cuLaunchKernel(f, grid, 1, 1, 1, 1, 1, 0, s.h, args, nullptr));
    *hto = simMix64(*hfrom ^ kk);
  }
  void memset32(const Str& s, int dst, uint32_t v) {
    SIM_CHECK(s.api->cuMemsetD32Async(at(dst), v, 2, s.h));
    h[dst] = uint64_t(v) | (uint64_t(v) << 32);
  }
  void copy(const Str& s, int dst, int src) {
    SIM_CHECK(s.api->cuMemcpyDtoDAsync(at(dst), at(src), 8, s.h));
    h[dst] = h[src];
  }
  void record(CUevent e, const Str& s) { SIM_CHECK(s.api->cuEventRecord(e, s.h)); }
  void waitOn(const Str& s, CUevent e) { SIM_CHECK(s.api->cuStreamWaitEvent(s.h, e, 0)); }
  // Host-to-device from pinned memory (slot), value v.
  void upload(const Str& s, int dst, int slot, uint64_t v) {
    pin[slot] = v;
    SIM_CHECK(s.api->cuMemcpyHtoDAsync(at(dst), &pin[slot], 8, s.h));
    h[dst] = v;
  }
  // The program reads word idx back: async copy to pinned memory, then a sync of s.
  void readBack(const Str& s, int idx, int slot, const char* what) {
    pin[slot] = 0xdeadbeefdeadbeefull;
    SIM_CHECK(s.api->cuMemcpyDtoHAsync(&pin[slot], at(idx), 8, s.h));
    SIM_CHECK(s.api->cuStreamSynchronize(s.h));
    expectValue(pin[slot], h[idx], what, step);
  }
  // A synchronous read (legacy stream, pageable memory): after the legacy
  // stream's and the blocking streams' earlier work.
  uint64_t readSync(int idx, const char* what) {
    uint64_t v = 0xdeadbeefdeadbeefull;
    SIM_CHECK(cu->cuMemcpyDtoH(&v, at(idx), 8));
    expectValue(v, h[idx], what, step);
    return v;
  }
  void checkAll(const char* what) {
    SIM_CHECK(cu->cuCtxSynchronize());
    for (int i = 0; i < kWords; ++i) {
      if (peek(at(i)) == h[i]) continue;
      char text[96];
      std::snprintf(text, sizeof text, "%s: word %d", what, i);
      expectValue(peek(at(i)), h[i], text, step);
    }
  }
};

CUstream blocking(const simtest::DriverApi& cu) {
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_DEFAULT));
  return s;
}
CUstream nonBlocking(const simtest::DriverApi& cu) {
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}
CUevent untimed(const simtest::DriverApi& cu) {
  CUevent e = nullptr;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  return e;
}

// Graph share of the effects since `from` (informational, per phase).
struct PhaseMeter {
  SimCounters from{};
  void start() { simCounters(&from); }
  void print(const char* name) {
    SimCounters c{};
    simCounters(&c);
    const uint64_t g = c.effectsGraph - from.effectsGraph, e = c.effectsEager - from.effectsEager;
    std::printf("sim_review8_phases: %s: phase %-14s graph %6llu eager %6llu (%3llu %%)\n", g_mode, name,
                (unsigned long long)g, (unsigned long long)e, (unsigned long long)(g + e ? 100 * g / (g + e) : 0));
    start();
  }
};

// ------------------------------------------------------------------ train
// Word layout of the training step.
enum : int {
  P0 = 8,     // 8 parameters
  A0 = 16,    // 9 activations
  G0 = 32,    // 8 gradients
  R0 = 48,    // 8 reduced gradients (side stream)
  IN = 60, LOSS = 61, EVL = 62, EV0 = 64,  // eval activations
  LR = 80,
};

void trainEvalCkpt(Kit& k, int steps, bool sideNonBlocking) {
  const Str s{k.cu, nullptr};  // the legacy stream, as PyTorch's default
  const Str t{k.cu, sideNonBlocking ? nonBlocking(*k.cu) : blocking(*k.cu)};
  CUevent eFwd = untimed(*k.cu), eRed = untimed(*k.cu), eOpt = untimed(*k.cu);
  std::vector<uint64_t> page(64, 0);
  PhaseMeter meter;
  meter.start();
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    // Data loading: a new batch from pinned memory.
    k.upload(s, IN, 0, draw(i, 1));
    k.copy(s, A0, IN);
    for (int l = 0; l < 8; ++l) k.mix(s, k.k.fwd, A0 + l + 1, A0 + l, uint64_t(l + 2), 4);
    k.mix(s, k.k.loss, LOSS, A0 + 8, 99, 1);
    for (int l = 7; l >= 0; --l) k.mix(s, k.k.bwd, G0 + l, A0 + l + 1, uint64_t(100 + l), 2);
    // Gradient reduction on the side stream.
    k.record(eFwd, s);
    k.waitOn(t, eFwd);
    for (int l = 0; l < 8; ++l) {
      k.copy(t, R0 + l, G0 + l);
      k.mix(t, k.k.red, R0 + l, R0 + l, 7, 8);
    }
    k.record(eRed, t);
    k.waitOn(s, eRed);
    // Optimizer, learning rate warm-up over the first 25 steps, then constant;
    // a second decay phase changes it every step again from step 120 to 140.
    const uint64_t lr = i < 25 ? uint64_t(i + 1) : (i >= 120 && i < 140 ? uint64_t(1000 - i) : 25);
    for (int l = 0; l < 8; ++l) k.mix(s, k.k.opt, P0 + l, R0 + l, lr, 1);
    k.add(s, LR, LR, lr);
    // loss.item()
    k.readBack(s, LOSS, 1, "loss read back");
    // An eval pass every 7 steps: other kernels, no backward, a synchronous read.
    if (i % 7 == 6) {
      k.copy(s, EV0, P0 + (i % 8));
      for (int l = 0; l < 6; ++l) k.mix(s, k.k.evalk, EV0 + l + 1, EV0 + l, uint64_t(l), 8);
      k.mix(s, k.k.loss, EVL, EV0 + 6, 98, 1);
      k.readSync(EVL, "eval loss (cuMemcpyDtoH)");
    }
    // A checkpoint every 11 steps: parameters to pinned memory on the side
    // stream, gradients to pageable memory on the main one, then a restore of
    // the parameters (host values changed) every 22 steps.
    if (i % 11 == 10) {
      k.record(eOpt, s);
      k.waitOn(t, eOpt);
      for (int l = 0; l < 8; ++l) {
        k.pin[16 + l] = 0;
        SIM_CHECK(t.api->cuMemcpyDtoHAsync(&k.pin[16 + l], k.at(P0 + l), 8, t.h));
      }
      for (int l = 0; l < 8; ++l) SIM_CHECK(s.api->cuMemcpyDtoHAsync(&page[l], k.at(G0 + l), 8, s.h));
      // A pageable destination: the call returns once the copy is done.
      for (int l = 0; l < 8; ++l) expectValue(page[l], k.h[G0 + l], "checkpoint gradient (pageable)", i);
      SIM_CHECK(t.api->cuStreamSynchronize(t.h));
      for (int l = 0; l < 8; ++l) expectValue(k.pin[16 + l], k.h[P0 + l], "checkpoint parameter (pinned)", i);
      if (i % 22 == 21) {
        // Restore (host edits the checkpoint, uploads it on the main stream).
        for (int l = 0; l < 8; ++l) k.upload(s, P0 + l, 32 + l, k.pin[16 + l] ^ uint64_t(i));
        k.readBack(s, P0 + 3, 2, "restored parameter");
      }
    }
    if (i == 59) meter.print("warm-up");
    if (i == 119) meter.print("steady");
    if (i == 139) meter.print("decay");
  }
  meter.print("end");
  k.checkAll("train end");
}


// ---------------------------------------------------------------- seq-grow
// A sequence length that grows by one every step (a new grid and scalar each
// step: nothing repeats, graft rests), then plateaus; grows again, plateaus.
enum : int { X0 = 100, Y0 = 120, SL = 130 };

unsigned seqLen(int i) {
  if (i < 40) return unsigned(1 + i);
  if (i < 190) return 41;
  if (i < 230) return unsigned(42 + (i - 190));
  return 81;
}

void seqGrow(Kit& k, int steps) {
  const Str s{k.cu, blocking(*k.cu)}, t{k.cu, blocking(*k.cu)};
  CUevent e1 = untimed(*k.cu), e2 = untimed(*k.cu);
  PhaseMeter meter;
  meter.start();
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    const unsigned len = seqLen(i);
    k.mix(s, k.k.emb, X0, X0, len, len);
    for (int l = 0; l < 4; ++l) k.mix(s, k.k.fwd, X0 + l + 1, X0 + l, uint64_t(l), len * 2);
    k.record(e1, s);
    k.waitOn(t, e1);
    k.mix(t, k.k.red, Y0, X0 + 4, len, 1);
    k.add(t, Y0 + 1, Y0, 1);
    k.record(e2, t);
    k.waitOn(s, e2);
    k.mix(s, k.k.loss, SL, Y0 + 1, 5, 1);
    k.readBack(s, SL, 3, "sequence step read back");
    if (i == 39 || i == 189 || i == 229) meter.print(i == 39 ? "grow" : i == 189 ? "plateau" : "grow again");
  }
  meter.print("plateau 2");
  k.checkAll("seq-grow end");
}

// ------------------------------------------------------------- alloc-shift
// A caching allocator warming up: for the first 30 steps every step gets
// blocks at new addresses (a stream-ordered block of a growing size, freed at
// the step's end, and a cuMemAlloc block kept), then the same sizes every
// step (addresses settle).
enum : int { ACC = 140, ACC2 = 141 };

void allocShift(Kit& k, int steps) {
  const Str s{k.cu, nonBlocking(*k.cu)};
  std::vector<CUdeviceptr> kept;
  CUdeviceptr fixed = 0;
  SIM_CHECK(k.cu->cuMemAlloc(&fixed, 64));
  PhaseMeter meter;
  meter.start();
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    const size_t size = i < 30 ? size_t(64 + 256 * i) : 64;
    CUdeviceptr b = 0;
    SIM_CHECK(k.cu->cuMemAllocAsync(&b, size, s.h));
    CUdeviceptr c = fixed;
    if (i < 30) {
      SIM_CHECK(k.cu->cuMemAlloc(&c, 64 + 64 * size_t(i)));
      kept.push_back(c);
    }
    uint64_t hb = 0, hc = 0;
    SIM_CHECK(k.cu->cuMemsetD32Async(b, uint32_t(i + 1), 2, s.h));
    hb = uint64_t(uint32_t(i + 1)) * 0x100000001ull;
    SIM_CHECK(k.cu->cuMemsetD32Async(c, uint32_t(i + 7), 2, s.h));
    hc = uint64_t(uint32_t(i + 7)) * 0x100000001ull;
    for (int l = 0; l < 6; ++l) {
      k.mixRaw(s, k.k.fwd, b, b, uint64_t(l), &hb, &hb, 1);
      k.mixRaw(s, k.k.bwd, c, b, uint64_t(l), &hc, &hb, 2);
    }
    k.mixRaw(s, k.k.loss, k.at(ACC), c, 1, &k.h[ACC], &hc, 1);
    SIM_CHECK(k.cu->cuMemcpyDtoDAsync(k.at(ACC2), b, 8, s.h));
    k.h[ACC2] = hb;
    SIM_CHECK(k.cu->cuMemFreeAsync(b, s.h));
    k.readBack(s, ACC, 4, "accumulator read back");
    if (i % 5 == 4) k.readBack(s, ACC2, 5, "copied block word");
    if (i == 29) meter.print("shifting");
  }
  meter.print("settled");
  k.checkAll("alloc-shift end");
  for (CUdeviceptr c : kept) SIM_CHECK(k.cu->cuMemFree(c));
  SIM_CHECK(k.cu->cuMemFree(fixed));
}

// ------------------------------------------------------------------- serve
// A server: requests of 12 shapes that start alike (the same first two
// kernels) and differ after them, arriving in a seeded random order in runs
// of one to four; each request uploads its input from pinned memory and
// reads its output back. `phased`: kinds 0-7 first, then 8-11, then all.
enum : int { SIN = 150, SX = 152, SOUT = 170 };

void serve(Kit& k, int steps, bool phased) {
  const Str s{k.cu, nonBlocking(*k.cu)};
  PhaseMeter meter;
  meter.start();
  int kind = 0, left = 0;
  for (int r = 0; r < steps; ++r) {
    k.step = r;
    if (left == 0) {
      left = 1 + int(draw(r, 11) % 4);
      if (!phased) kind = int(draw(r, 12) % 12);
      else if (r < steps / 3) kind = int(draw(r, 12) % 8);
      else if (r < 2 * steps / 3) kind = 8 + int(draw(r, 12) % 4);
      else kind = int(draw(r, 12) % 12);
    }
    --left;
    k.upload(s, SIN, 6, draw(r, 13));
    k.mix(s, k.k.emb, SX, SIN, 1, 1);
    k.mix(s, k.k.emb, SX + 1, SX, 2, 1);
    const int n = 4 + kind % 4;
    for (int l = 0; l < n; ++l) k.mix(s, k.k.fwd, SX + 2 + l, SX + 1 + l, uint64_t(kind), unsigned(1 + kind));
    k.mix(s, k.k.tail, SOUT, SX + 1 + n, 9, 1);
    k.readBack(s, SOUT, 7, "response");
    if (phased && (r == steps / 3 - 1 || r == 2 * steps / 3 - 1)) meter.print(r < steps / 2 ? "kinds 0-7" : "kinds 8-11");
  }
  meter.print(phased ? "all kinds" : "all");
  k.checkAll("serve end");
}

// --------------------------------------------------------------- rest-wake
// Phases of a repeating step A, noise (a new grid every launch: graft rests),
// A again, another step B, noise, A and B alternating, ... Meant for
// GRAFT_DORMANT_AFTER_OPS=256 GRAFT_MAX_PERIOD=64 (rests of 1024 ops that
// begin and end at places that move with the phase lengths).
enum : int { WA = 200, WT = 210, WB = 220, WN = 230 };

struct Phase {
  char what;  // 'A', 'B', 'X' (A and B alternating), 'N' (noise, count in ops)
  int count;
};

void restWake(Kit& k, int scale, bool nonBlock, bool perThread) {
  // perThread: s is the per-thread default stream (per-thread table, NULL),
  // t the legacy stream (per-thread and legacy streams order implicitly);
  // otherwise two created streams joined by events.
  const Str s = perThread ? Str{k.pt, nullptr} : Str{k.cu, nonBlock ? nonBlocking(*k.cu) : blocking(*k.cu)};
  const Str t = perThread ? Str{k.cu, nullptr} : Str{k.cu, nonBlock ? nonBlocking(*k.cu) : blocking(*k.cu)};
  CUevent e1 = untimed(*k.cu), e2 = untimed(*k.cu), e3 = untimed(*k.cu);
  bool e3Recorded = false;
  unsigned grid = 1;
  int stepNo = 0;
  auto stepA = [&] {
    if (e3Recorded) k.waitOn(s, e3);  // t's work of the previous A step
    for (int l = 0; l < 6; ++l) k.mix(s, k.k.fwd, WA + l + 1, WA + l, uint64_t(l), 1);
    k.copy(s, WA, WA + 6);
    k.record(e1, s);
    k.waitOn(t, e1);
    for (int l = 0; l < 3; ++l) k.mix(t, k.k.red, WT + l + 1, l ? WT + l : WA + 6, uint64_t(l), 2);
    k.record(e2, t);
    k.waitOn(s, e2);
    k.mix(s, k.k.opt, WA + 8, WT + 3, 3, 1);
    k.mix(s, k.k.opt, WA + 9, WA + 8, 4, 1);
    k.record(e3, t);
    e3Recorded = true;
  };
  auto stepB = [&] {
    k.memset32(s, WB, uint32_t(stepNo));
    for (int l = 0; l < 7; ++l) k.mix(s, k.k.bwd, WB + l + 1, WB + l, uint64_t(l + 10), 3);
    k.copy(s, WB + 9, WB + 7);
    k.add(s, WB + 8, WB + 8, 1);
  };
  const std::vector<Phase> phases = {{'A', 60}, {'N', 500},  {'A', 40}, {'N', 900}, {'B', 50}, {'N', 1300},
                                     {'X', 60}, {'N', 333},  {'A', 25}, {'B', 25},  {'N', 1777}, {'X', 41},
                                     {'A', 30}};
  PhaseMeter meter;
  meter.start();
  for (const Phase& p : phases) {
    const int count = p.what == 'N' ? p.count : p.count * scale;
    for (int n = 0; n < count; ++n) {
      k.step = stepNo++;
      switch (p.what) {
        case 'A': stepA(); break;
        case 'B': stepB(); break;
        case 'X': if (n % 2) stepB(); else stepA(); break;
        case 'N': {
          k.mix(s, k.k.noise, WN, WN, uint64_t(n), ++grid);
          if (n % 50 == 49) k.readBack(s, WN, 8, "noise word read back");
          continue;
        }
      }
      if (n % 5 == 4) {
        if (p.what != 'B') k.readBack(t, WT + 3, 9, "A: t's word read back");
        k.readBack(s, p.what == 'B' ? WB + 9 : WA + 9, 10, "s's word read back");
      }
      if (perThread && n % 7 == 3) k.readSync(WA + 6, "A: synchronous read (legacy stream)");
    }
    char name[32];
    std::snprintf(name, sizeof name, "%c x%d", p.what, count);
    meter.print(name);
  }
  k.checkAll("rest-wake end");
}

// --------------------------------------------------------------- two-loops
// Two independent loops on two streams, one op of each per tick: s repeats 5
// ops (grids 1..5), t repeats 7 (grids 1..7); the sequence graft sees repeats
// every 70 ops. `tSyncs`: t reads back every 7 ticks (its loop's end), s
// only every 97 ticks.
enum : int { LS = 240, LT = 250 };

void twoLoops(Kit& k, int ticks, bool tSyncs, bool shift) {
  const Str s{k.cu, nonBlocking(*k.cu)}, t{k.cu, nonBlocking(*k.cu)};
  PhaseMeter meter;
  meter.start();
  for (int j = 0; j < ticks; ++j) {
    k.step = j;
    // shift: from tick 1000 on s's loop has 4 ops (its fifth op dropped), from 1600 on 5 again.
    const int a = shift && j >= 1000 && j < 1600 ? j % 4 : j % 5, b = j % 7;
    if (shift && (j == 1000 || j == 1600)) meter.print(j == 1000 ? "5 and 7" : "4 and 7");
    k.mix(s, k.k.fwd, LS + a, LS + (a + 4) % 5, uint64_t(a), unsigned(1 + a));  // (a + 4) % 5: word 4 is kept
    k.mix(t, k.k.bwd, LT + b, LT + (b + 6) % 7, uint64_t(b), unsigned(1 + b));
    if (tSyncs && b == 6) k.readBack(t, LT + 6, 11, "t's loop read back");
    if (j % 97 == 96) {
      k.readBack(s, LS + a, 12, "s's loop read back");
      k.readBack(t, LT + b, 13, "t's loop read back (97)");
    }
  }
  meter.print("all");
  k.checkAll("two-loops end");
}

// -------------------------------------------------------------- alt-values
// Steps of one shape whose scalar parameters come in two sets (A: k = l, B:
// k = l + 1000 at every third kernel), in the order A,B,A,B or A,A,B, then
// from step 150 on A only, then B only from step 200 (patches toggle, then
// stop, then change once more).
enum : int { VW = 270 };

void altValues(Kit& k, int steps, int pattern, bool syncEach) {
  const Str s{k.cu, nonBlocking(*k.cu)};
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    bool b = pattern == 2 ? i % 2 == 1 : i % 3 == 2;
    if (i >= 150) b = i >= 200;
    for (int l = 0; l < 12; ++l)
      k.mix(s, k.k.fwd, VW + (l + 1) % 13, VW + l, uint64_t(l) + (b && l % 3 == 0 ? 1000 : 0), 1);
    if (syncEach || i % 10 == 9) k.readBack(s, VW + 12, 14, "alt-values read back");
  }
  k.checkAll("alt-values end");
}

// --------------------------------------------------------------- early-stop
// Data-dependent control flow: each step runs an inner loop whose iterations
// each read a residual back (sync) and stop once it is a multiple of 5 (at
// most 9 iterations); then a tail kernel whose scalar is the residual and
// whose grid depends on it. The next step's kernel sequence depends on values
// the GPU computed.
enum : int { Z0 = 300, Z1, RES, ZOUT, ZACC };

void earlyStop(Kit& k, int steps, bool poll) {
  const Str s{k.cu, blocking(*k.cu)};
  CUevent ready = untimed(*k.cu);
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    k.upload(s, Z0, 15, draw(i % 13, 21));  // inputs repeat every 13 steps
    uint64_t v = 0;
    int it = 0;
    do {
      k.mix(s, k.k.fwd, Z0, Z0, uint64_t(it), 1);
      for (int l = 0; l < 5; ++l) k.mix(s, k.k.bwd, Z1, l ? Z1 : Z0, uint64_t(3 + l), 1);
      k.mix(s, k.k.red, RES, Z1, 5, 1);
      if (!poll) {
        k.readBack(s, RES, 16, "residual");
      } else {
        // The host polls for the residual instead of synchronizing: a record
        // after the copy and cuEventQuery (even steps) or cuStreamQuery (odd).
        k.pin[16] = 0xdeadbeefdeadbeefull;
        SIM_CHECK(s.api->cuMemcpyDtoHAsync(&k.pin[16], k.at(RES), 8, s.h));
        if (i % 2 == 0) k.record(ready, s);
        const CUresult r = pollUntilDone([&] { return i % 2 ? s.api->cuStreamQuery(s.h) : k.cu->cuEventQuery(ready); });
        expectCode(r, CUDA_SUCCESS, "polling for the residual", i);
        expectValue(k.pin[16], k.h[RES], "residual (polled)", i);
        // A kernel right after the poll, on the polled stream, then the next iteration.
        k.add(s, ZACC + 1, ZACC + 1, 1);
      }
      v = k.pin[16];
      ++it;
    } while (v % 5 != 0 && it < 9);
    k.mix(s, k.k.tail, ZOUT, Z1, v, unsigned(1 + v % 3));
    k.add(s, ZACC, ZACC, v & 0xff);
    k.readBack(s, ZOUT, 17, "early-stop output");
  }
  k.checkAll("early-stop end");
}

// ---------------------------------------------------------- grow-layers
// A model that gains a layer every 25 steps (the step's run grows by three
// ops, so the pieces of the old run are a prefix of the new one), with a
// read-back every step.
enum : int { GL = 320 };

void growLayers(Kit& k, int steps) {
  const Str s{k.cu, nonBlocking(*k.cu)};
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    const int layers = 10 + i / 25;
    for (int l = 0; l < layers; ++l) {
      const int w = GL + l % 40;
      k.mix(s, k.k.fwd, w + 1, w, uint64_t(l), 1);
      k.memset32(s, GL + 60 + l % 20, uint32_t(l + i % 3));
      k.copy(s, GL + 80 + l % 20, w + 1);
    }
    k.mix(s, k.k.loss, GL + 100, GL + 80, 1, 1);
    k.readBack(s, GL + 100, 18, "grow-layers read back");
  }
  k.checkAll("grow-layers end");
}

// ------------------------------------------------------------ drop-return
// A 40-kernel step graphed; then 80 steps where a kernel of a grid never
// seen before comes at op 30 (the graph mismatches late every step and is
// dropped), then the clean step again.
enum : int { DW = 400 };

void dropReturn(Kit& k, int steps) {
  const Str s{k.cu, nonBlocking(*k.cu)};
  PhaseMeter meter;
  meter.start();
  unsigned grid = 100;
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    const bool noisy = i >= 40 && i < 120;
    for (int l = 0; l < 40; ++l) {
      if (noisy && l == 30) k.mix(s, k.k.noise, DW + 45, DW + 45, uint64_t(i), ++grid);
      k.mix(s, k.k.fwd, DW + (l + 1) % 41, DW + l, uint64_t(l), 1);
    }
    k.readBack(s, DW + 40, 19, "drop-return read back");
    if (i == 39 || i == 119) meter.print(i == 39 ? "clean" : "late noise");
  }
  meter.print("clean again");
  k.checkAll("drop-return end");
}


// ------------------------------------------------------ capture-in-rest
// A step graft graphs: y = x + i on s, a record of eStep, a sync of s, s2
// waits on eStep, x = y + 1 on s2, s2 records eBack, s waits on it; and a
// loop of one kernel on s4 (graphed unrolled; used as a probe below). Then
// noise (a new grid every launch: graft rests), with one launch of the
// probe kernel every 10 ops: when the simulator's counters show that it
// reached the driver at its call (graft rests), the program captures a
// kernel and a record of a new event eCap on s3 (relaxed mode, the graph
// thrown away); the noise goes on until a probe is held again (graft looks
// again). Then the step again, where on every third step s2's wait names
// eCap (its last record was captured): the driver refuses it
// (CUDA_ERROR_CAPTURED_EVENT) every time.
enum : int { CX = 420, CY, CZ, CN, CP };

void captureInRest(Kit& k, int steps) {
  const Str s{k.cu, nonBlocking(*k.cu)}, s2{k.cu, nonBlocking(*k.cu)}, s3{k.cu, nonBlocking(*k.cu)},
      s4{k.cu, nonBlocking(*k.cu)};
  CUevent eStep = untimed(*k.cu), eBack = untimed(*k.cu), eCap = untimed(*k.cu);
  unsigned grid = 1;
  int i = 0, refused = 0;
  auto step = [&](CUevent waitFor) {
    k.step = i;
    k.add(s, CY, CX, uint64_t(i));
    k.record(eStep, s);
    SIM_CHECK(s.api->cuStreamSynchronize(s.h));
    if (waitFor) {
      expectCode(s2.api->cuStreamWaitEvent(s2.h, waitFor, 0), CUDA_ERROR_CAPTURED_EVENT,
                 "cuStreamWaitEvent on an event last recorded in a capture (made while graft rested)", i);
      ++g_provoked;
      ++refused;
    } else {
      k.waitOn(s2, eStep);
    }
    k.add(s2, CX, CY, 1);
    k.record(eBack, s2);
    k.waitOn(s, eBack);
    if (i % 10 == 9) k.readBack(s2, CX, 20, "x");
    ++i;
  };
  // Whether a launch of the probe kernel reached the driver at its call.
  auto probeIssued = [&] {
    SimCounters before{}, after{};
    simCounters(&before);
    k.add(s4, CP, CP, 1);
    simCounters(&after);
    return after.eagerLaunches > before.eagerLaunches;
  };
  PhaseMeter meter;
  meter.start();
  for (int n = 0; n < 60; ++n) step(nullptr);
  for (int n = 0; n < 300; ++n) k.add(s4, CP, CP, 1);
  k.readBack(s4, CP, 25, "probe word");
  meter.print("steps");
  int phase = 0;  // 0: before the rest, 1: captured in the rest, 2: awake again
  for (int n = 0; n < 100000 && phase < 2; ++n) {
    k.step = n;
    k.mix(s, k.k.noise, CN, CN, uint64_t(n), ++grid);
    if (n % 10 != 9) continue;
    const bool issued = probeIssued();
    if (phase == 0 && issued) {
      SIM_CHECK(s3.api->cuStreamBeginCapture(s3.h, CU_STREAM_CAPTURE_MODE_RELAXED));
      CUdeviceptr z = k.at(CZ);
      uint64_t one = 1;
      void* args[] = {&z, &z, &one};
      SIM_CHECK(s3.api->cuLaunchKernel(k.k.addk, 1, 1, 1, 1, 1, 1, 0, s3.h, args, nullptr));
      SIM_CHECK(s3.api->cuEventRecord(eCap, s3.h));
      CUgraph g = nullptr;
      SIM_CHECK(s3.api->cuStreamEndCapture(s3.h, &g));
      SIM_CHECK(k.cu->cuGraphDestroy(g));
      phase = 1;
    } else if (phase == 1 && !issued) {
      phase = 2;
    } else if (phase == 0 && n > 20000) {
      break;
    }
  }
  if (phase == 0) {  // eagerly the first probe reaches the driver
    std::printf("sim_review8_phases: %s: graft never rested: the path under test was not taken (run with "
                "GRAFT_DORMANT_AFTER_OPS=256 GRAFT_MAX_PERIOD=64)\n", g_mode);
    std::exit(3);
  }
  meter.print("noise");
  for (int n = 0; n < steps; ++n) step(n % 3 == 2 ? eCap : nullptr);
  meter.print("steps again");
  std::printf("sim_review8_phases: %s: %d waits on the captured event\n", g_mode, refused);
  k.checkAll("capture-in-rest end");
}

// ------------------------------------------------------- sticky-in-rest
// A loop of one kernel (x = x + 1, graphed unrolled), then noise (a new grid
// every launch: graft rests). Every 10 noise ops the program launches the
// loop's kernel once more; when the simulator's counters show that launch
// reached the driver at its call (graft rests: it did not hold it), 10 noise
// ops later a kernel reads unmapped memory (a fault: the context's sticky
// CUDA_ERROR_ILLEGAL_ADDRESS) and the host works 50 ms without a CUDA call
// (the simulated GPU runs on: SIM_ASYNC_US). Every call after that returns
// the sticky error eagerly: the loop's kernel, loopOps times, then a sync.
enum : int { KX = 430, KN };

void stickyInRest(Kit& k, int loopOps) {
  const Str s{k.cu, nonBlocking(*k.cu)};
  unsigned grid = 1;
  auto launchK = [&] {
    CUdeviceptr p = k.at(KX);
    uint64_t one = 1;
    void* args[] = {&p, &p, &one};
    return s.api->cuLaunchKernel(k.k.addk, 1, 1, 1, 1, 1, 1, 0, s.h, args, nullptr);
  };
  for (int n = 0; n < 300; ++n) {
    SIM_CHECK(launchK());
    ++k.h[KX];
  }
  k.readBack(s, KX, 21, "x");
  int faultAt = -1;
  for (int n = 0; n < 20000 && faultAt < 0; ++n) {
    k.step = n;
    k.mix(s, k.k.noise, KN, KN, uint64_t(n), ++grid);
    if (n % 10 != 9) continue;
    SimCounters before{}, after{};
    simCounters(&before);
    SIM_CHECK(launchK());
    ++k.h[KX];
    simCounters(&after);
    if (after.eagerLaunches > before.eagerLaunches) faultAt = n + 10;  // graft rests
  }
  if (faultAt < 0) {
    std::printf("sim_review8_phases: %s: graft never rested: the path under test was not taken (run with "
                "GRAFT_DORMANT_AFTER_OPS=256 GRAFT_MAX_PERIOD=64)\n", g_mode);
    std::exit(3);
  }
  for (int n = 0; n < 10; ++n) k.mix(s, k.k.noise, KN, KN, uint64_t(n), ++grid);
  // The fault, then the host does something else.
  const CUdeviceptr nowhere = 0x1000;
  CUdeviceptr to = k.at(KN);
  uint64_t one = 1;
  void* fargs[] = {&to, const_cast<CUdeviceptr*>(&nowhere), &one};
  SIM_CHECK(s.api->cuLaunchKernel(k.k.addk, 1, 1, 1, 1, 1, 1, 0, s.h, fargs, nullptr));
  ++g_provoked;
  usleep(50000);
  int wrong = 0, checked = 0, seenSticky = 0;
  auto expectSticky = [&](CUresult r, const char* what, int n) {
    ++checked;
    if (r == CUDA_ERROR_ILLEGAL_ADDRESS) {
      ++seenSticky;
      return;
    }
    if (wrong++ < 3)
      std::printf("sim_review8_phases: %s: call %d after the fault: %s returned %d, the driver returns %d (%d "
                  "earlier calls returned it to the program)\n",
                  g_mode, n, what, int(r), int(CUDA_ERROR_ILLEGAL_ADDRESS), seenSticky);
  };
  for (int n = 0; n < loopOps; ++n) expectSticky(launchK(), "the loop's launch", n);
  expectSticky(s.api->cuStreamSynchronize(s.h), "cuStreamSynchronize", loopOps);
  std::printf("sim_review8_phases: %s: %d calls after the fault, %d did not return the sticky error\n", g_mode,
              checked, wrong);
  g_wrong += wrong;
}

// --------------------------------------------------- sticky-after-call
// A step of 8 kernels, a host-to-device upload, 8 more kernels, a read-back
// (graphed in two runs split by the upload). At step 40 the first kernel
// reads unmapped memory (a fault); the host then works for 50 ms without a
// CUDA call (graft's idle flush issues what it holds; the simulated GPU runs
// on, SIM_ASYNC_US) and its next call is `how`: the upload itself
// ("copy"), a cuMemAllocAsync ("alloc") or a cuEventCreate ("event"), which
// the driver answers with the sticky error; then the second half's kernels,
// which eagerly all return it too.
enum : int { SA = 440, SB = 460, SIN2 = 470 };

void stickyAfterCall(Kit& k, int steps, char how) {
  const Str s{k.cu, nonBlocking(*k.cu)};
  const CUdeviceptr nowhere = 0x1000;
  int wrong = 0, checked = 0;
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    const bool fault = i == 40;
    for (int l = 0; l < 8; ++l) {
      if (fault && l == 0) {
        CUdeviceptr to = k.at(SA + 1);
        uint64_t kk = 0;
        void* fargs[] = {&to, const_cast<CUdeviceptr*>(&nowhere), &kk};
        SIM_CHECK(s.api->cuLaunchKernel(k.k.fwd, 1, 1, 1, 1, 1, 1, 0, s.h, fargs, nullptr));
        continue;
      }
      if (fault) {  // the fault may run during these calls: their codes depend on the schedule
        CUdeviceptr to = k.at(SA + l + 1), from = k.at(SA + l);
        uint64_t kk = uint64_t(l);
        void* args[] = {&to, &from, &kk};
        (void)s.api->cuLaunchKernel(k.k.fwd, 1, 1, 1, 1, 1, 1, 0, s.h, args, nullptr);
        continue;
      }
      k.mix(s, k.k.fwd, SA + l + 1, SA + l, uint64_t(l), 1);
    }
    if (!fault) {
      k.upload(s, SIN2, 22, draw(i, 31));
      for (int l = 0; l < 8; ++l) k.mix(s, k.k.bwd, SB + l + 1, l ? SB + l : SIN2, uint64_t(l), 1);
      k.readBack(s, SB + 8, 23, "second half read back");
      continue;
    }
    ++g_provoked;
    // Time for the fault to run: graft's idle flush issues the held launch
    // within GRAFT_IDLE_FLUSH_MS (5 ms); 50 ms once fell short with two test
    // processes and a CI build sharing two cores.
    usleep(250000);
    auto expectSticky = [&](CUresult r, const char* what) {
      ++checked;
      if (r == CUDA_ERROR_ILLEGAL_ADDRESS) return;
      if (wrong++ < 3)
        std::printf("sim_review8_phases: %s: after the fault: %s returned %d, the driver returns %d\n", g_mode, what,
                    int(r), int(CUDA_ERROR_ILLEGAL_ADDRESS));
    };
    if (how == 'a') {
      CUdeviceptr b = 0;
      expectSticky(k.cu->cuMemAllocAsync(&b, 64, s.h), "cuMemAllocAsync");
    } else if (how == 'e') {
      CUevent e = nullptr;
      expectSticky(k.cu->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    }
    k.pin[22] = 5;
    expectSticky(s.api->cuMemcpyHtoDAsync(k.at(SIN2), &k.pin[22], 8, s.h), "cuMemcpyHtoDAsync (the upload)");
    for (int l = 0; l < 8; ++l) {
      CUdeviceptr to = k.at(SB + l + 1), from = k.at(l ? SB + l : SIN2);
      uint64_t kk = uint64_t(l);
      void* args[] = {&to, &from, &kk};
      expectSticky(s.api->cuLaunchKernel(k.k.bwd, 1, 1, 1, 1, 1, 1, 0, s.h, args, nullptr), "a kernel launch");
    }
    k.pin[23] = 0;
    expectSticky(s.api->cuMemcpyDtoHAsync(&k.pin[23], k.at(SB + 8), 8, s.h), "cuMemcpyDtoHAsync");
    expectSticky(s.api->cuStreamSynchronize(s.h), "cuStreamSynchronize");
    break;
  }
  std::printf("sim_review8_phases: %s: %d calls after the fault, %d did not return the sticky error\n", g_mode,
              checked, wrong);
  g_wrong += wrong;
}


// ----------------------------------------------------------- sticky-held
// A step of 200 kernels in a chain with a read-back at its end (graphed in
// pieces). At step 40 kernel 10 reads unmapped memory (a fault); after kernel
// 20 the host works for 50 ms without a CUDA call (graft's idle flush issues
// what it holds; the simulated GPU runs the fault: SIM_ASYNC_US); the 179
// launches after that all return the sticky error eagerly, and no call
// returned it to the program before them.
enum : int { HW = 480 };

void stickyHeld(Kit& k, int steps) {
  const Str s{k.cu, nonBlocking(*k.cu)};
  const CUdeviceptr nowhere = 0x1000;
  int wrong = 0, checked = 0;
  for (int i = 0; i < steps; ++i) {
    k.step = i;
    const bool fault = i == 40;
    for (int l = 0; l < 200; ++l) {
      CUdeviceptr to = k.at(HW + (l + 1) % 20), from = fault && l == 10 ? nowhere : k.at(HW + l % 20);
      uint64_t kk = uint64_t(l);
      void* args[] = {&to, &from, &kk};
      const CUresult r = s.api->cuLaunchKernel(k.k.fwd, 1, 1, 1, 1, 1, 1, 0, s.h, args, nullptr);
      if (!fault) {
        SIM_CHECK(r);
        k.h[HW + (l + 1) % 20] = simMix64(k.h[HW + l % 20] ^ kk);
      } else if (l > 20) {
        ++checked;
        if (r != CUDA_ERROR_ILLEGAL_ADDRESS && wrong++ < 3)
          std::printf("sim_review8_phases: %s: launch %d after the fault and the host's wait returned %d, the driver "
                      "returns %d\n", g_mode, l, int(r), int(CUDA_ERROR_ILLEGAL_ADDRESS));
      }
      if (fault && l == 20) {
        ++g_provoked;
        usleep(50000);
      }
    }
    if (fault) break;
    k.readBack(s, HW + 0, 24, "chain read back");
  }
  std::printf("sim_review8_phases: %s: %d launches after the fault, %d did not return the sticky error\n", g_mode,
              checked, wrong);
  g_wrong += wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review8_phases", 0);
  const std::string& mode = args.mode;
  // The sticky modes let the simulated GPU run while the host makes no call.
  if (mode.rfind("sticky", 0) == 0) setenv("SIM_ASYNC_US", "100", 1);
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review8_phases", &drv, &ctx)) return rc;
  Kit k;
  k.cu = &drv.plain;
  k.pt = &drv.perThread;
  k.k = {simtest::libraryKernel3("sim_mix_fwd"),  simtest::libraryKernel3("sim_mix_bwd"),
         simtest::libraryKernel3("sim_mix_opt"),  simtest::libraryKernel3("sim_mix_reduce"),
         simtest::libraryKernel3("sim_mix_eval"), simtest::libraryKernel3("sim_mix_loss"),
         simtest::libraryKernel3("sim_mix_embed"), simtest::libraryKernel3("sim_mix_noise"),
         simtest::libraryKernel3("sim_add_acc"),  simtest::libraryKernel3("sim_mix_tail")};
  k.base = simtest::zeroedBuffer(*k.cu, 8 * kWords);
  SIM_CHECK(k.cu->cuMemAllocHost(reinterpret_cast<void**>(&k.pin), 8 * kPinned));
  auto steps = [&](int d) { return args.steps ? args.steps : d; };
  int n = 0;
  if (mode == "train") trainEvalCkpt(k, n = steps(200), false);
  else if (mode == "train-nb") trainEvalCkpt(k, n = steps(200), true);
  else if (mode == "seq-grow") seqGrow(k, n = steps(380));
  else if (mode == "alloc-shift") allocShift(k, n = steps(120));
  else if (mode == "serve") serve(k, n = steps(600), false);
  else if (mode == "serve-phases") serve(k, n = steps(600), true);
  else if (mode == "rest-wake") restWake(k, n = steps(1), false, false);
  else if (mode == "rest-wake-nb") restWake(k, n = steps(1), true, false);
  else if (mode == "rest-pts") restWake(k, n = steps(1), false, true);
  else if (mode == "two-loops") twoLoops(k, n = steps(2000), false, false);
  else if (mode == "two-loops-sync") twoLoops(k, n = steps(2000), true, false);
  else if (mode == "two-loops-shift") twoLoops(k, n = steps(2400), false, true);
  else if (mode == "alt-ab") altValues(k, n = steps(260), 2, true);
  else if (mode == "alt-aab") altValues(k, n = steps(260), 3, true);
  else if (mode == "alt-ab-nosync") altValues(k, n = steps(260), 2, false);
  else if (mode == "alt-aab-nosync") altValues(k, n = steps(260), 3, false);
  else if (mode == "early-stop") earlyStop(k, n = steps(200), false);
  else if (mode == "early-stop-poll") earlyStop(k, n = steps(200), true);
  else if (mode == "grow-layers") growLayers(k, n = steps(200));
  else if (mode == "drop-return") dropReturn(k, n = steps(180));
  else if (mode == "capture-in-rest") captureInRest(k, n = steps(120));
  else if (mode == "sticky-in-rest") stickyInRest(k, n = steps(5000));
  else if (mode == "sticky-after-copy") stickyAfterCall(k, n = steps(60), 'c');
  else if (mode == "sticky-after-alloc") stickyAfterCall(k, n = steps(60), 'a');
  else if (mode == "sticky-after-event") stickyAfterCall(k, n = steps(60), 'e');
  else if (mode == "sticky-held") stickyHeld(k, n = steps(60));
  else {
    std::printf("usage: sim_review8_phases --mode train|train-nb|seq-grow|alloc-shift|serve|serve-phases|"
                "rest-wake|rest-wake-nb|rest-pts|two-loops|two-loops-sync|alt-ab|alt-aab|alt-ab-nosync|"
                "alt-aab-nosync|early-stop|early-stop-poll|grow-layers|drop-return|two-loops-shift|capture-in-rest|"
                "sticky-in-rest|sticky-after-copy|sticky-after-alloc|sticky-after-event|sticky-held [--steps N] "
                "[--expect-graphs]\n");
    return 2;
  }
  return report(n, args.expectGraphs);
}
