// sim_review12_release: red-team round 12 (r12.diff) of the replay engine's
// segment LIFETIME and RE-BUILD machinery (src/core/engine.cc,
// src/core/segment.cc): retired segments are now freed (SegmentStore::release
// via Engine::releaseRetired, at buildPiece's start and after
// forgetRecordedCode / forgetSegmentsWith), a dropped segment is built again
// after a doubling cool-off (countTry -> noteRunToRetry, run_drops_), drops
// weigh the waste against the whole group that starts alike,
// evictIdleSegment at GRAFT_MAX_SEGMENTS, retireLongIdle (2^22 ops), and the
// wait-instance structure folded into segment and run keys.
// Every kernel carries a unique tag (a 4th by-value parameter); at each check
// the executed trace is scanned: every tagged kernel ran exactly once, with
// the grid it was launched with, and after the kernels it must follow
// (events); the host mirrors every device word and reads results back with
// checked copies; every return code is checked against the simulated
// driver's. A freed segment touched by graft would show as a crash, a wrong
// kernel/grid/value, or a lost/duplicated kernel (run also with the
// poisoning build: /tmp/rt12c/g, HotArena::deallocate fills freed blocks with
// 0xA5 and never reuses them; MALLOC_PERTURB_=165 MALLOC_CHECK_=3).
//
//   sim_review12_release --mode M [--steps N] [--expect-graphs]
//
// Modes:
// unload-held      persistent kernels on s and t (a fork/join through events)
//                  plus two kernels of a module (or, every other cycle, a
//                  library) on t; no sync per step, so a replay holds ops
//                  when the program calls cuModuleUnload / cuLibraryUnload,
//                  at irregular steps and sometimes in the middle of a step
//                  (the unload's host barrier flushes them, forgetSegmentsWith
//                  retires and frees segments, the very next ops start
//                  matching and builds follow). Reloaded images alternate
//                  (add <-> mix under the same names and, often, the same
//                  handle values): a graph or held op of the old code would
//                  give a wrong value. An unrelated module is also loaded and
//                  unloaded while ops are held (a release with nothing
//                  matching). Risk: a freed segment's bytes borrowed by held
//                  ops, named by candidates / last_mismatch_ / the fast lane,
//                  or expanded from the history.
//                  Each load uses new kernel names (graphed at once), so
//                  segments with them are built, replayed, retired at the
//                  unload and freed (run with GRAFT_SEGMENT_OPS=3 and
//                  GRAFT_DORMANT_AFTER_OPS=0: ~800 graphs built in 6000 steps).
// unload-burst     the same, but the module is unloaded and loaded again
//                  every 1-3 steps for thousands of steps: segments built,
//                  retired and freed in a tight cycle, runs_dropped_early_.
// unload-reload    unload-burst with the same kernel names every load
//                  ("reloaded code": eager for its first 64 launches; the
//                  driver hands out the same handle values for other code).
// drop-churn       three variants of a 16-op step that share a 12-op prefix
//                  and differ at op 13 (its grid), in phases of 400 steps
//                  whose dominant variant changes (60 %/20 %/20 %, then
//                  round-robin phases, then bursts): with
//                  GRAFT_MAX_VARIANTS=1/2 segments are dropped by mismatches
//                  and built again after the cool-off over and over; a sync
//                  and check every step. Risk: a dropped segment's graph or
//                  bytes used after the drop (freed at the next build),
//                  cool-off rebuilds in a tight loop, a stale variant.
// drop-churn-nosync the same without a sync per step (a check every 64
//                  steps): drops and frees in the middle of unsynced runs,
//                  builds while ops are held.
// seg-limit        four sequences with different first ops (A, B, C, D, 8
//                  ops each): phases ABAB, then A alone long enough for B to
//                  go idle (> 65536 ops), then CDCD (evictIdleSegment evicts
//                  the idlest), then B and A back, then random. Run with
//                  GRAFT_MAX_SEGMENTS=1..4. Risk: the evicted graph's
//                  segment freed while its ops are held, a graph replayed for
//                  the wrong sequence.
// wait-instance    s and t, events E1, E2, E3: s runs 8 kernels on a, records
//                  E1, a kernel writes b from a, records E2; t waits on E1
//                  (variant 0, its kernel reads a), E2 (variant 1, reads b)
//                  or E3 (variant 2: the previous step's join record, an
//                  "external" instance; reads c); then t records E3 and s
//                  waits on it. The variants have equal op shapes and differ
//                  only in which record the wait names (and the by-value
//                  source pointer). Random order with bursts. Risk: a
//                  variant replayed for another (t's kernel before the s
//                  kernel it must follow; the trace order check and the
//                  value catch it), wrong run keys.
// fuzz-held        twelve variants of 4..24 ops that are prefixes of each
//                  other or diverge late (grid per op from a variant table),
//                  random order, no syncs, random cuStreamQuery/cuEventQuery
//                  of held work, a check every 40 steps. Run with
//                  GRAFT_MAX_VARIANTS=1/2: resolveHeld launches several
//                  complete segments in one flush while builds, evictions
//                  and drops happen in that loop.
// idle-sweep       sequence A (a rare phase: 24 ops) replayed a few times,
//                  then B (32 ops, a different first op) for 4.3 million ops,
//                  so retireLongIdle destroys A's graph at a build; then A
//                  and B again, and again. Default 140000 steps of B. Risk:
//                  A's freed segment still named (history, built_runs_),
//                  never rebuilt, or a stale replay.
//
// Results (snapshot /tmp/snap/lib/libgraft.so and the poisoning build
// /tmp/rt12c/g of the same tree; MALLOC_PERTURB_=165 MALLOC_CHECK_=3): every
// mode passes eagerly and under graft, no mode FAILS: 11 modes x 13
// configurations at 3000-4000 steps (GRAFT_MAX_VARIANTS 1/2/8,
// GRAFT_MAX_SEGMENTS 1/2/3/4, SIM_ASYNC_US 0/3, SIM_SEED 1-4,
// GRAFT_SEGMENT_OPS 2/3/4, GRAFT_WARMUP 1/2, GRAFT_ASYNC_LAUNCH 0,
// GRAFT_DORMANT_AFTER_OPS 0), 30000 steps for unload-burst, fuzz-held,
// drop-churn-nosync, wait-instance, 10000 for the unload modes, idle-sweep
// at 140000 steps (4.5 M ops; with GRAFT_MAX_VARIANTS=1 retireLongIdle
// destroys A's graphs, "not replayed for 4194440 ops"). No crash, no stale
// or wrong kernel, grid, order, value or code.
// Weaknesses seen (coverage, not divergences):
// 1. A sequence refused at GRAFT_MAX_SEGMENTS is never offered again:
//    buildPiece returns true there (engine.cc:1515-1520), so no
//    noteRunToRetry, and its run stays in built_runs_; evictIdleSegment,
//    a drop or retireLongIdle making room later does not help it (contrary
//    to options.def "makes room for a new one" for a run seen before).
//    seg-limit, GRAFT_MAX_SEGMENTS=1, 40000 steps: AB's graph dropped at op
//    16665, the A-alone run (refused at 16000) never built; 5 % via graphs,
//    then graft rests.
// 2. A variant-limit refusal's retry time (oldest + 65536,
//    engine.cc:1535) is not brought forward when the variant that blocked
//    it is dropped (countTry, engine.cc:490-499) or retired: seg-limit,
//    GRAFT_MAX_VARIANTS=1: the blocker dropped at op 16665, the refused
//    run still waits till ~81500, and graft rests (nothing live) first.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graft graph.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"
#include "sim_tagged_trace.h"

namespace {

using namespace simtest::modes;

simtest::Driver g_drv;
const simtest::DriverApi* g_cu = nullptr;
simtest::CodeApi g_code;
CUfunction g_add = nullptr, g_mix = nullptr;
CUstream g_s = nullptr, g_t = nullptr;

// ------------------------------------------------------------ host mirror
simtest::WordMirror g_mem;
uint64_t M(CUdeviceptr p) { return g_mem.get(p); }
void setM(CUdeviceptr p, uint64_t v) { g_mem.set(p, v); }

// ------------------------------------------------------------ tagged kernels
struct Expected : simtest::TaggedLaunch {
  unsigned grid = 1;
  bool add = true;
};
simtest::TaggedTrace<Expected> g_expected{"sim_add_rc", "sim_mix_rc"};
uint64_t g_lastTag = 0;  // the latest tag launched

// `f` has the effect `add` (sim_add*) or mix (sim_mix*).
uint64_t launchF(CUfunction f, bool add, CUstream s, CUdeviceptr dst, CUdeviceptr src, uint64_t k, unsigned grid = 1,
                 std::vector<uint64_t> after = {}) {
  Expected x;
  x.after = std::move(after);
  x.grid = grid, x.add = add;
  const uint64_t tag = g_expected.add(std::move(x));
  void* args[] = {&dst, &src, &k, (void*)&tag};
  SIM_CHECK(g_cu->cuLaunchKernel(f, grid, 1, 1, 1, 1, 1, 0, s, args, nullptr));
  setM(dst, add ? M(src) + k : simMix64(M(src) ^ k));
  g_lastTag = tag;
  return tag;
}
uint64_t addK(CUdeviceptr dst, CUdeviceptr src, uint64_t k, CUstream s, unsigned grid = 1,
              std::vector<uint64_t> after = {}) {
  return launchF(g_add, true, s, dst, src, k, grid, std::move(after));
}
uint64_t mixK(CUdeviceptr dst, CUdeviceptr src, uint64_t k, CUstream s, unsigned grid = 1,
              std::vector<uint64_t> after = {}) {
  return launchF(g_mix, false, s, dst, src, k, grid, std::move(after));
}

void traceCheck(int step) {
  g_expected.scan(step, [step](const SimEffect& e, Expected& x, uint64_t) {
    if (e.grid[0] != x.grid) expectValue(e.grid[0], x.grid, "grid of a tagged kernel", step);
    const bool ranAdd = !std::strncmp(e.kernelName, "sim_add", 7);
    if (ranAdd != x.add) expectValue(ranAdd, x.add, "kernel that ran is an add (code of the handle then)", step);
  });
}
void fullCheck(const std::vector<CUdeviceptr>& words, int step) {
  SIM_CHECK(g_cu->cuCtxSynchronize());
  traceCheck(step);
  simtest::expectWords(*g_cu, g_mem, words, step);
}
void traceFinal(int step) {
  SIM_CHECK(g_cu->cuCtxSynchronize());
  traceCheck(step);
  g_expected.expectAllRan(step, 4);
}

CUstream newStream() { return simtest::newStream(*g_cu); }
CUevent newEvent() { return simtest::newEvent(*g_cu); }
CUdeviceptr buf(size_t bytes = 64) { return simtest::mirroredBuffer(*g_cu, g_mem, bytes); }

// ------------------------------------------------------------ unload-held / unload-burst
// Code loaded as a module or a library; image `img` gives name X the add or
// mix effect (img 0: rcX0 = add, rcX1 = mix; img 1: swapped, names kept).
struct Code {
  bool library = false;
  CUmodule mod = nullptr;
  CUlibrary lib = nullptr;
  CUfunction f[2] = {nullptr, nullptr};
  bool isAdd[2] = {true, false};
};
// `suffix`: a name suffix (code under a new name is graphed at once; the
// same names loaded again are "reloaded code", eager for a while).
Code loadCode(int img, bool library, int suffix) {
  Code c;
  c.library = library;
  char n0[64], n1[64], image[200];
  std::snprintf(n0, sizeof n0, "%s_rcX0_%d", img ? "sim_mix" : "sim_add", suffix);
  std::snprintf(n1, sizeof n1, "%s_rcX1_%d", img ? "sim_add" : "sim_mix", suffix);
  std::snprintf(image, sizeof image, "sim-image: %s(8,8,8,8); %s(8,8,8,8)", n0, n1);
  if (library) {
    SIM_CHECK(g_code.libraryLoadData(&c.lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CUkernel k0 = nullptr, k1 = nullptr;
    SIM_CHECK(g_code.libraryGetKernel(&k0, c.lib, n0));
    SIM_CHECK(g_code.libraryGetKernel(&k1, c.lib, n1));
    c.f[0] = reinterpret_cast<CUfunction>(k0);
    c.f[1] = reinterpret_cast<CUfunction>(k1);
  } else {
    SIM_CHECK(g_code.moduleLoadData(&c.mod, image));
    SIM_CHECK(g_code.moduleGetFunction(&c.f[0], c.mod, n0));
    SIM_CHECK(g_code.moduleGetFunction(&c.f[1], c.mod, n1));
  }
  c.isAdd[0] = img == 0;
  c.isAdd[1] = img != 0;
  return c;
}
void unloadCode(Code& c) {
  if (c.library) SIM_CHECK(g_code.libraryUnload(c.lib));
  else SIM_CHECK(g_code.moduleUnload(c.mod));
  c = Code();
}

void unloadHeld(int steps, bool burst, bool reload) {
  CUdeviceptr a = buf(), b = buf(), c = buf();
  CUevent E = newEvent(), J = newEvent();
  int img = 0, cycle = 0;
  Code code = loadCode(img, false, 0);
  std::mt19937_64 rng(burst ? 31 : 17);
  int nextUnload = burst ? 2 : 9;
  auto unloadNow = [&](int i) {
    unloadCode(code);
    ++cycle;
    img = (rng() % 3 == 0) ? img : 1 - img;  // usually the other image: same names, swapped effects
    code = loadCode(img, cycle % 2 == 1, reload ? 0 : cycle);
    nextUnload = i + (burst ? 1 + int(rng() % 3) : 12 + int(rng() % 40));
  };
  for (int i = 0; i < steps; ++i) {
    const uint64_t x = uint64_t(i);
    // A prefix on s, a fork to t with the module's kernels, a join, a tail on s.
    mixK(a, a, x, g_s);
    for (int r = 0; r < 5; ++r) addK(a, a, uint64_t(r + 1), g_s);
    const uint64_t lastS = g_lastTag;
    SIM_CHECK(g_cu->cuEventRecord(E, g_s));
    SIM_CHECK(g_cu->cuStreamWaitEvent(g_t, E, 0));
    const uint64_t t0 = launchF(code.f[0], code.isAdd[0], g_t, b, a, x + 3, 1, {lastS});
    if (i == nextUnload && rng() % 4 == 0) {
      // In the middle of the step: the held prefix and fork are flushed.
      ++g_provoked;
      unloadNow(i);
      if (i % 2) {  // also an unrelated module, with nothing of it anywhere
        CUmodule m = nullptr;
        SIM_CHECK(g_code.moduleLoadData(&m, "sim-image: sim_add_rcZ_0(8,8,8,8)"));
        SIM_CHECK(g_code.moduleUnload(m));
      }
    }
    launchF(code.f[1], code.isAdd[1], g_t, b, b, x + 5, 1, {t0});
    addK(c, b, 1, g_t);
    SIM_CHECK(g_cu->cuEventRecord(J, g_t));
    SIM_CHECK(g_cu->cuStreamWaitEvent(g_s, J, 0));
    const uint64_t lastT = g_lastTag;
    addK(a, c, 2, g_s, 1, {lastT});
    mixK(a, a, x ^ 7, g_s);
    if (i >= nextUnload) {
      ++g_provoked;
      if (rng() % 3 == 0) {  // an unrelated module, while ops are held
        CUmodule m = nullptr;
        SIM_CHECK(g_code.moduleLoadData(&m, "sim-image: sim_add_rcZ_0(8,8,8,8)"));
        SIM_CHECK(g_code.moduleUnload(m));
      }
      unloadNow(i);
    }
    if (i % 50 == 49) fullCheck({a, b, c}, i);
  }
  fullCheck({a, b, c}, steps);
  unloadCode(code);
}

// ------------------------------------------------------------ drop-churn
void dropChurn(int steps, bool sync) {
  CUdeviceptr a = buf(), b = buf(), c = buf();
  std::mt19937_64 rng(sync ? 5 : 6);
  const int phase = 400;
  for (int i = 0; i < steps; ++i) {
    const int p = i / phase;
    int v;
    if (p % 3 == 0) {  // a dominant variant, changing each such phase
      const int dom = (p / 3) % 3;
      const unsigned r = unsigned(rng() % 10);
      v = r < 6 ? dom : (dom + 1 + int(r % 2)) % 3;
    } else if (p % 3 == 1) {
      v = i % 3;
    } else {
      v = (i / (2 + p % 5)) % 3;
    }
    const uint64_t x = uint64_t(i);
    mixK(a, a, x, g_s);
    for (int r = 0; r < 11; ++r) {
      if (r % 4 == 0) mixK(b, a, x + r, g_s);
      else addK(a, b, uint64_t(r), g_s);
    }
    addK(c, a, x, g_s, unsigned(v + 1));  // op 13: where the variants differ
    addK(a, c, 3, g_s);
    mixK(b, a, 9, g_s);
    addK(a, b, 1, g_s);
    if (sync) {
      SIM_CHECK(g_cu->cuStreamSynchronize(g_s));
      expectValue(peek(a), M(a), "a", i);
      if (i % 31 == 30) traceCheck(i);
    } else if (i % 64 == 63) {
      fullCheck({a, b, c}, i);
    }
  }
  fullCheck({a, b, c}, steps);
}

// ------------------------------------------------------------ seg-limit
void seq(int which, CUdeviceptr a, CUdeviceptr b, uint64_t x) {
  // Distinct first ops: A add grid 1, B add grid 2, C mix grid 1, D mix grid 3.
  switch (which) {
    case 0: addK(a, a, x, g_s, 1); break;
    case 1: addK(a, a, x, g_s, 2); break;
    case 2: mixK(a, a, x, g_s, 1); break;
    default: mixK(a, a, x, g_s, 3); break;
  }
  for (int r = 0; r < 6; ++r) {
    if ((r + which) % 3 == 0) mixK(b, a, x + r, g_s, unsigned(1 + which));
    else addK(a, b, uint64_t(r + which), g_s);
  }
  addK(b, a, 1, g_s);
}
void segLimit(int steps) {
  CUdeviceptr a = buf(), b = buf();
  std::mt19937_64 rng(44);
  const int longPhase = 9000;  // 9000 steps of 8 ops > 65536 ops
  for (int i = 0; i < steps; ++i) {
    int w;
    const int q = i % (4 * longPhase);
    if (q < 2000) w = i % 2;                              // ABAB
    else if (q < 2000 + longPhase) w = 0;                 // A alone: B idle
    else if (q < 4000 + longPhase) w = 2 + i % 2;         // CDCD: evictions
    else if (q < 6000 + longPhase) w = (i / 3) % 2;       // B and A back
    else if (q < 6000 + 2 * longPhase) w = int(rng() % 4);
    else w = (i / 50) % 4;                                // bursts
    seq(w, a, b, uint64_t(i));
    if (i % 2 == 1 || w == 3) {
      SIM_CHECK(g_cu->cuStreamSynchronize(g_s));
      expectValue(peek(a), M(a), "a", i);
      expectValue(peek(b), M(b), "b", i);
    }
    if (i % 97 == 96) traceCheck(i);
  }
  fullCheck({a, b}, steps);
}

// ------------------------------------------------------------ wait-instance
void waitInstance(int steps) {
  CUdeviceptr a = buf(), b = buf(), c = buf();
  CUevent E1 = newEvent(), E2 = newEvent(), E3 = newEvent();
  std::mt19937_64 rng(71);
  // The first step's "external" E3 needs a record to wait for.
  SIM_CHECK(g_cu->cuEventRecord(E3, g_t));
  uint64_t lastJoin = 0;
  for (int i = 0; i < steps; ++i) {
    const int v = (i / 500) % 2 ? int(rng() % 3) : (i / 7) % 3;
    const uint64_t x = uint64_t(i);
    mixK(a, a, x, g_s, 1, lastJoin ? std::vector<uint64_t>{lastJoin} : std::vector<uint64_t>{});
    for (int r = 0; r < 7; ++r) addK(a, a, uint64_t(r + 1), g_s);
    const uint64_t lastA = g_lastTag;
    SIM_CHECK(g_cu->cuEventRecord(E1, g_s));
    const uint64_t kb = mixK(b, a, x, g_s);
    SIM_CHECK(g_cu->cuEventRecord(E2, g_s));
    CUevent w = v == 0 ? E1 : v == 1 ? E2 : E3;
    SIM_CHECK(g_cu->cuStreamWaitEvent(g_t, w, 0));
    uint64_t kt;
    if (v == 0) kt = addK(c, a, x, g_t, 1, {lastA});
    else if (v == 1) kt = addK(c, b, x, g_t, 1, {kb});
    else kt = addK(c, c, x, g_t);
    SIM_CHECK(g_cu->cuEventRecord(E3, g_t));
    SIM_CHECK(g_cu->cuStreamWaitEvent(g_s, E3, 0));
    addK(b, c, 1, g_s, 1, {kt});
    lastJoin = g_lastTag;
    if (i % 3 == 2) {
      SIM_CHECK(g_cu->cuStreamSynchronize(g_s));
      expectValue(peek(b), M(b), "b", i);
      expectValue(peek(c), M(c), "c", i);
    }
    if (i % 41 == 40) fullCheck({a, b, c}, i);
  }
  fullCheck({a, b, c}, steps);
}

// ------------------------------------------------------------ fuzz-held
void fuzzHeld(int steps) {
  CUdeviceptr a = buf(), b = buf();
  CUevent E = newEvent();
  std::mt19937_64 rng(909);
  struct Variant {
    std::vector<unsigned> grids;
  };
  std::vector<Variant> vs;
  std::mt19937_64 gen(3);
  for (int k = 0; k < 12; ++k) {
    Variant v;
    const int len = 4 + int(gen() % 21);
    // A long common prefix (grid 1), then a tail specific to the variant, or
    // a prefix of another variant.
    for (int j = 0; j < len; ++j) v.grids.push_back(j < len / 2 ? 1 : unsigned(1 + (gen() % 3)));
    if (k >= 8) {
      v.grids = vs[k - 8].grids;
      v.grids.resize(std::max<size_t>(4, v.grids.size() * 2 / 3));
    }
    vs.push_back(v);
  }
  for (int i = 0; i < steps; ++i) {
    const int v = (i / 300) % 2 ? int(rng() % 12) : int((i / (1 + (i / 600) % 4)) % 12);
    const uint64_t x = uint64_t(i);
    const std::vector<unsigned>& g = vs[v].grids;
    for (size_t j = 0; j < g.size(); ++j) {
      if (j % 5 == 4) mixK(b, a, x + j, g_s, g[j]);
      else addK(a, j % 5 == 0 ? b : a, uint64_t(j), g_s, g[j]);
      if (j == g.size() / 2 && rng() % 16 == 0) {
        // A query of held work (graft may answer NOT_READY itself).
        ++g_provoked;
        const CUresult r = g_cu->cuStreamQuery(g_s);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) expectCode(r, CUDA_SUCCESS, "cuStreamQuery", i);
      }
    }
    SIM_CHECK(g_cu->cuEventRecord(E, g_s));
    if (rng() % 20 == 0) {
      ++g_provoked;
      const CUresult r = g_cu->cuEventQuery(E);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) expectCode(r, CUDA_SUCCESS, "cuEventQuery", i);
    }
    if (i % 40 == 39) fullCheck({a, b}, i);
  }
  fullCheck({a, b}, steps);
}

// ------------------------------------------------------------ idle-sweep
void idleSweep(int steps) {
  CUdeviceptr a = buf(), b = buf();
  auto A = [&](uint64_t x) {
    mixK(a, a, x, g_s, 2);
    for (int r = 0; r < 22; ++r) addK(a, a, uint64_t(r), g_s, 2);
    mixK(b, a, x, g_s, 2);
  };
  auto B = [&](uint64_t x) {
    addK(a, a, x, g_s, 1);
    for (int r = 0; r < 30; ++r) addK(a, a, uint64_t(r), g_s, 1);
    addK(b, a, x, g_s, 1);
  };
  int i = 0;
  for (int round = 0; round < 3 && i < steps; ++round) {
    for (int k = 0; k < 6; ++k, ++i) {
      A(uint64_t(i));
      SIM_CHECK(g_cu->cuStreamSynchronize(g_s));
      expectValue(peek(a), M(a), "a after A", i);
      traceCheck(i);
    }
    const int bSteps = round == 0 ? steps : steps / 8;
    for (int k = 0; k < bSteps; ++k, ++i) {
      B(uint64_t(i));
      if (k % 4 == 3) {
        SIM_CHECK(g_cu->cuStreamSynchronize(g_s));
        expectValue(peek(a), M(a), "a after B", i);
      }
      if (k % 512 == 511) traceCheck(i);
    }
  }
  fullCheck({a, b}, i);
}

CUfunction kernel4(const char* name) {
  const size_t sizes[4] = {8, 8, 8, 8};
  return simKernelCreate(name, SIM_KERNEL_LIBRARY, 4, sizes, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review12_release", 3000);
  const std::string mode = args.mode;
  const int steps = args.steps;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review12_release", &g_drv, &ctx)) return rc;
  g_cu = &g_drv.plain;
  if (!simtest::loadCodeApi(g_drv, &g_code)) return 2;
  g_add = kernel4("sim_add_rc");
  g_mix = kernel4("sim_mix_rc");
  if (!g_add || !g_mix) return 2;
  g_s = newStream();
  g_t = newStream();
  simTraceClear();
  if (mode == "unload-held") unloadHeld(steps, false, false);
  else if (mode == "unload-burst") unloadHeld(steps, true, false);
  else if (mode == "unload-reload") unloadHeld(steps, true, true);
  else if (mode == "drop-churn") dropChurn(steps, true);
  else if (mode == "drop-churn-nosync") dropChurn(steps, false);
  else if (mode == "seg-limit") segLimit(steps);
  else if (mode == "wait-instance") waitInstance(steps);
  else if (mode == "fuzz-held") fuzzHeld(steps);
  else if (mode == "idle-sweep") idleSweep(steps);
  else {
    std::printf("usage: sim_review12_release --mode unload-held|unload-burst|unload-reload|drop-churn|drop-churn-nosync|seg-limit|"
                "wait-instance|fuzz-held|idle-sweep [--steps N] [--expect-graphs]\n");
    return 2;
  }
  traceFinal(steps);
  return report(steps, args.expectGraphs);
}
