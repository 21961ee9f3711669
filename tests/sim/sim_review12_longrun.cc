// sim_review12_longrun: red-team round 12, LONG-RUNNING processes (a training
// job running for days, an inference server serving millions of requests).
// Each mode compresses into seconds what a long-lived process does to
// graft's counters and tables: shapes that never come back, handles the
// driver gives out again, code loaded and unloaded, threads that come and
// go, op counts that drift, memory freed and allocated again at one address.
// Every value the program reads back and every return code is checked
// against what the simulated driver gives eagerly. Long modes read the
// process's VmRSS (/proc/self/status) at the start, after a quarter of the
// steps (warm-up done) and at the end, print it, and fail when the growth
// over the last three quarters exceeds --rss-limit-mb (default 8 MiB; the
// simulator's own trace is cleared as the program goes, so eagerly the
// growth is ~0).
//
//   sim_review12_longrun --mode M [--steps N] [--rss-limit-mb M] [--expect-graphs]
//
// With --expect-graphs: exit 3 unless kernels ran from graphs; modes with a
// final phase also need kernels from graphs in that phase (coverage must not
// collapse for good as the process ages).
//
// Modes:
//  serve-lengths  an inference server: request r has its own sequence length
//                 L = 1 + r (every kernel's grid is L, the first one's too), 4
//                 decode steps each read back (cuMemcpyDtoH). N requests
//                 (default 8000), thousands of distinct shapes. graft builds a
//                 graph per length; none is ever used again. Risk: graphs and
//                 segments kept for shapes never seen again (memory), and once
//                 GRAFT_MAX_SEGMENTS graphs are live, nothing new is graphed
//                 for the rest of the process (graph share of the last phase).
//  serve-retry    (run with GRAFT_MAX_VARIANTS=1 GRAFT_DORMANT_AFTER_OPS=0)
//                 variant A (a head kernel of one shape, body of grid 3) is
//                 replayed; between A's turns, N (default 4200) request
//                 shapes V_r (same head, body grid 4 + r) come 3 times each,
//                 each refused at the variant limit (A replayed recently) and
//                 noted in Engine::runs_to_retry_. Final phase: A three times,
//                 then shape Z for 8000 steps (96,000 ops): A goes idle, so Z
//                 should be built once A could be evicted (the
//                 evict-direct fix of session 33). Risk: runs_to_retry_ only
//                 ever shrinks when a refused run comes back, so after 4096
//                 refused shapes that never return no refusal is recorded
//                 and Z stays eager for good.
//  module-churn   a library loading and unloading its code: each cycle loads
//                 a module (cuModuleLoadData), runs 40 steps of 6 launches
//                 with a read-back (graphs built and replayed), unloads it.
//                 N cycles (default 400). Risk: an unload retires every
//                 segment (Engine::forgetRecordedCode) but SegmentStore::all_
//                 keeps them (ops, bytes) for the process's life: memory grows
//                 by every cycle's segments; kernel handles reused by the next
//                 module must never replay the old code.
//  handle-churn   every step creates two streams and two events, forks and
//                 joins through them, destroys them all (the driver hands the
//                 same handle values out again); every 5th step the second
//                 stream is blocking and the legacy stream does work between
//                 (a reused handle with other flags). N steps (default 6000).
//                 Risk: per-handle caches (Engine::streams_, blocking_,
//                 stream_ctx_, event_records_, event nodes) applying the old
//                 object's facts to the new one; tables growing per handle.
//  drift          a training loop whose per-step op count slowly drifts: step
//                 s has 6 + (s / 8) % 40 kernels (a ramp up, then back down),
//                 read back every step. N steps (default 6000). Risk: a longer
//                 variant whose prefix is a shorter one, variant eviction and
//                 retry, held prefixes issued in order; memory of retired
//                 variants.
//  realloc        memory freed and allocated again at the same address with
//                 different sizes every step (cuMemFree/cuMemAlloc of 256,
//                 4096 or 1024 bytes), then a memset and a device copy over
//                 the whole buffer and two kernels, read back. Every 7th step
//                 the program memsets 4096 bytes of a buffer that is now 256
//                 or 1024 bytes (the driver refuses: CUDA_ERROR_INVALID_VALUE).
//                 N steps (default 6000). Risk: a graph node (graft's copy and
//                 memset kernels, which the driver does not check) built for
//                 the 4096-byte allocation replayed on the smaller one.
//  thread-churn   threads created and exited over time: N threads (default
//                 320, more than PerThreadStreams::kSlots = 256), one after
//                 the other, each runs 12 steps of 6 launches on its
//                 per-thread default stream with a read-back, then exits.
//                 Risk: proxies are never reused (a new (thread, context) slot
//                 each time; past 256 the per-thread stream runs eagerly for
//                 the rest of the process: graph share of the last phase is
//                 0), and every thread's graphs stay live after it exits
//                 (memory).
//  pool-sizes     (run with GRAFT_POOL=1) a server whose scratch size moves
//                 with the request: cuMemAllocAsync of (1 + r % 96) x 2 MiB +
//                 4 KiB, a memset and kernel on it, cuMemFreeAsync, read back;
//                 only one block live at a time (<= 194 MiB). N requests
//                 (default 600). Measures the simulated device memory graft
//                 keeps mapped (memfd "graft-sim-phys" mappings in
//                 /proc/self/maps; 0 eagerly). Risk: DevicePool classes above
//                 the granularity are exact multiples, blocks never move
//                 between classes and mapped memory is never unmapped, so the
//                 pool holds the sum of every size ever used (device memory
//                 the program no longer has). Fails when graft holds more than
//                 4x the program's largest live block.
//  event-reuse    a graph's event nodes and reused event handles: each step
//                 creates an event, records it on s inside the replayed run,
//                 t waits on it, destroys it (with work pending); the next
//                 step's new event gets the same handle. N steps (default
//                 6000). Risk: forgetEvent/placeholder bookkeeping per handle
//                 over thousands of destroy/create cycles.
//
// Memory verdict: VmRSS less graft's fixed rings (ringKb: they fill over a
// run and stay, ~36 MiB at most) over the second half of the run.
//
// Results (this snapshot; eager passes every mode; graft: every value and
// code equal in every mode, also SIM_SEED 1-3, SIM_ASYNC_US=50):
//   serve-lengths  FAILS under graft (--expect-graphs, exit 3): graft keeps
//     ~48 MiB for 4096 live graphs of lengths never seen again, then the last
//     1/8 of requests get 0 % from graphs. Diagnosis: a segment is only ever
//     evicted among variants with the same first op (engine.cc:1377 ->
//     evictIdleVariant); when the first op differs per shape, nothing is ever
//     evicted, live segments reach GRAFT_MAX_SEGMENTS (engine.cc:1370) and
//     from then on every new shape stays eager for the process's life
//     (segment_limit), holding 4096 graph execs (device memory on a GPU).
//   serve-retry    FAILS under graft (GRAFT_MAX_VARIANTS=1
//     GRAFT_DORMANT_AFTER_OPS=0 --expect-graphs, exit 3): Z 0 % from graphs
//     after 4200 refused shapes; with --steps 100 Z reaches 23.4 %.
//     Diagnosis: runs_to_retry_ entries are erased only when that run comes
//     back (engine.cc:1167) or at an unload; 4096 refused runs that never
//     return fill it (kMaxRunsToRetry) and engine.cc:1175 then drops every
//     later refusal; built_runs_ already has the run (engine.cc:1161), so it
//     is never offered to buildPiece again: the session-33 evict-direct fix
//     silently stops working in an aged process.
//   module-churn   FAILS under graft (exit 1, memory): +12.9 MiB over the
//     second half of 12000 cycles (linear, ~1 KiB per cycle; eager +0).
//     Diagnosis: forgetRecordedCode (engine.cc:828) / forgetSegmentsWith
//     (engine.cc:856) / evictIdleVariant (engine.cc:1356) retire segments,
//     but SegmentStore::all_ (segment.cc:12) keeps every Segment with its
//     OpBuffer and bytes for the process's life (op_buffer.h:7 relies on it:
//     held ops borrow segment bytes), and by_first_ keeps an empty vector
//     per first-op hash ever seen.
//   thread-churn   FAILS under graft (--expect-graphs, exit 3): threads
//     1-255 get 58 % from graphs, every later thread 0 %. Diagnosis:
//     per_thread_streams.cc:123, slots never reused (documented limit); also
//     each exited thread's graphs stay live (keys never come back).
//   pool-sizes     FAILS under graft with GRAFT_POOL=1 (exit 1): graft keeps
//     9504 MiB of simulated device memory mapped for a program whose largest
//     live block is 192 MiB. Diagnosis: device_pool.cc:54 gives every
//     multiple of the granularity its own class, free blocks stay in their
//     class (device_pool.cc:214) and mapped memory is never unmapped, so the
//     pool holds the sum over sizes ever used (a real GPU runs out of memory:
//     cuMemAlloc/cuMemAllocAsync elsewhere fail where eager succeeds).
//   drift, realloc, event-reuse: pass with graphs, memory flat.
//   handle-churn: passes, memory flat, no graphs (documented: runs on a
//     stream destroyed since are not built); run without --expect-graphs.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

simtest::Driver g_drv;
const simtest::DriverApi* cu = nullptr;
CUcontext g_ctx = nullptr;
CUfunction g_add = nullptr, g_mix = nullptr;
double g_rssLimitMb = 8;
bool g_needFinalGraphs = false;
uint64_t g_finalPhaseGraphEffects = 0;
bool g_haveFinalPhase = false;
int g_memWrong = 0;

uint64_t mixv(uint64_t x, uint64_t k) { return simMix64(x ^ k); }

long rssKbRaw() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (!std::strncmp(line, "VmRSS:", 6)) kb = std::strtol(line + 6, nullptr, 10);
  std::fclose(f);
  return kb;
}

// Resident KiB of anonymous MAP_NORESERVE mappings without MADV_HUGEPAGE
// (VmFlags "nr", no "hg"): graft's fixed-size rings (core/zeroed_array.h:
// the history's 32 MiB byte ring and its op/token/event rings), which fill
// as ops are recorded (slowly while graft rests) and then stay: bounded by
// construction, so left out of the verdict. (The hot arena, where segments
// live, is advised for huge pages and stays counted.)
long ringKb() {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return 0;
  char line[512];
  long rss = 0, total = 0;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) rss = 0;
    else if (!std::strncmp(line, "Rss:", 4)) rss = std::strtol(line + 4, nullptr, 10);
    else if (!std::strncmp(line, "VmFlags:", 8) && std::strstr(line, " nr") && !std::strstr(line, " hg"))
      total += rss;
  }
  std::fclose(f);
  return total;
}

// Bytes of simulated physical device memory mapped (cuMemCreate + cuMemMap:
// memfd "graft-sim-phys"); the program itself maps none.
uint64_t simPhysMappedBytes() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return 0;
  char line[512];
  uint64_t total = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (!std::strstr(line, "graft-sim-phys")) continue;
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2) total += hi - lo;
  }
  std::fclose(f);
  return total;
}

bool graftLoaded() { return dlsym(RTLD_DEFAULT, "graft_bench_set_mode") != nullptr; }

uint64_t graphEffects() {
  SimCounters c{};
  simCounters(&c);
  return c.effectsGraph;
}
uint64_t eagerEffects() {
  SimCounters c{};
  simCounters(&c);
  return c.effectsEager;
}

// Debug aid (LR_SMAPS=1): the mappings holding the most resident memory.
void dumpSmaps() {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return;
  char line[512], head[512] = "";
  std::vector<std::pair<long, std::string>> rows;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) std::snprintf(head, sizeof head, "%s", line);
    else if (!std::strncmp(line, "Rss:", 4)) rows.push_back({std::strtol(line + 4, nullptr, 10), head});
  }
  std::fclose(f);
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.first > b.first; });
  if (std::getenv("LR_SMAPS_FULL")) {
    f = std::fopen("/proc/self/smaps", "r");
    bool on = false;
    while (f && std::fgets(line, sizeof line, f)) {
      unsigned long lo, hi;
      if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) on = rows.size() && rows[0].second == line;
      if (on) std::fputs(line, stdout);
    }
    if (f) std::fclose(f);
  }
  for (size_t i = 0; i < rows.size() && i < 6; ++i) std::printf("  rss %ld KiB: %s", rows[i].first, rows[i].second.c_str());
}

// VmRSS less graft's rings (ringKb).
long rssKb() { return rssKbRaw() - ringKb(); }

// Memory watch: VmRSS at the start, at every eighth of the run (tick(i, n))
// and at the end. graft's rings (recent ops and their bytes, about 36 MiB at
// GRAFT_MAX_PERIOD=16384) fill as ops are recorded and then stay, so the
// verdict is on the second half of the run only: the run must be long
// enough for the rings to have filled by then (the defaults are).
struct RssWatch {
  long start = rssKb(), half = -1, end = -1;
  std::vector<long> marks;
  int next = 1;
  void tick(long i, long n) {
    if (n < 8 || i != n * next / 8 || next > 7) return;
    marks.push_back(rssKb());
    if (next == 4) half = marks.back();
    ++next;
  }
  void finish(const char* what) {
    end = rssKb();
    if (std::getenv("LR_SMAPS")) dumpSmaps();
    if (half < 0) half = start;
    const double growMb = double(end - half) / 1024.0;
    std::string line;
    for (long m : marks) line += " " + std::to_string(m / 1024);
    std::printf("%s: %s: VmRSS less graft's rings, MiB: start %ld, eighths%s, end %ld (second half +%.1f MiB, limit "
                "%.0f; VmRSS %ld MiB, rings %ld MiB)\n",
                g_program, what, start / 1024, line.c_str(), end / 1024, growMb, g_rssLimitMb, rssKbRaw() / 1024,
                ringKb() / 1024);
    if (growMb > g_rssLimitMb) {
      std::printf("%s: %s: memory grows with steps: +%.1f MiB over the second half (limit %.0f MiB)\n", g_program,
                  what, growMb, g_rssLimitMb);
      ++g_memWrong;
    }
  }
};

CUresult launch(CUfunction f, unsigned grid, CUdeviceptr to, CUdeviceptr from, uint64_t k, CUstream s,
                const simtest::DriverApi* api = nullptr) {
  void* args[] = {&to, &from, &k};
  return (api ? api : cu)->cuLaunchKernel(f, grid, 1, 1, 1, 1, 1, 0, s, args, nullptr);
}

uint64_t readBack(CUdeviceptr p, const simtest::DriverApi* api = nullptr) {
  uint64_t v = 0;
  SIM_CHECK((api ? api : cu)->cuMemcpyDtoH(&v, p, 8));
  return v;
}

CUstream newStream(unsigned flags = CU_STREAM_NON_BLOCKING) {
  CUstream s = nullptr;
  SIM_CHECK(cu->cuStreamCreate(&s, flags));
  return s;
}
CUevent newEvent() {
  CUevent e = nullptr;
  SIM_CHECK(cu->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  return e;
}

// Phase accounting: graph effects in the last phase.
struct Phase {
  uint64_t g0 = graphEffects(), e0 = eagerEffects();
  void report(const char* name) {
    const uint64_t g = graphEffects() - g0, e = eagerEffects() - e0;
    std::printf("%s: %s: phase %s: effects from graphs %llu, eager %llu (%.1f %% from graphs)\n", g_program, g_mode,
                name, (unsigned long long)g, (unsigned long long)e, g + e ? 100.0 * double(g) / double(g + e) : 0.0);
  }
  void final(const char* name) {
    report(name);
    g_haveFinalPhase = true;
    g_finalPhaseGraphEffects = graphEffects() - g0;
  }
};

// ---------------------------------------------------------------- serve-lengths
void serveLengths(int requests) {
  CUstream s = newStream();
  CUdeviceptr a = simtest::zeroedBuffer(*cu), b = simtest::zeroedBuffer(*cu);
  uint64_t ha = 0, hb = 0;
  RssWatch rss;
  Phase phase;
  Phase* last = nullptr;
  Phase lastPhase;
  for (int r = 0; r < requests; ++r) {
    rss.tick(r, requests);
    if (r == requests - requests / 8) {
      phase.report("first 7/8");
      lastPhase = Phase();
      last = &lastPhase;
    }
    const unsigned L = 1 + unsigned(r);
    for (int d = 0; d < 4; ++d) {
      SIM_CHECK(launch(g_mix, L, a, a, uint64_t(d), s));
      ha = mixv(ha, uint64_t(d));
      SIM_CHECK(launch(g_add, L, b, a, L, s));
      hb = ha + L;
      SIM_CHECK(launch(g_mix, L, a, b, uint64_t(r), s));
      ha = mixv(hb, uint64_t(r));
      SIM_CHECK(launch(g_add, L, a, a, 3, s));
      ha += 3;
      SIM_CHECK(launch(g_mix, L, b, a, 7, s));
      hb = mixv(ha, 7);
      SIM_CHECK(cu->cuStreamSynchronize(s));
      expectValue(readBack(b), hb, "b (token read back)", r);
    }
    expectValue(readBack(a), ha, "a", r);
    if (r % 64 == 63) simTraceClear();
  }
  SIM_CHECK(cu->cuCtxSynchronize());
  expectValue(readBack(a), ha, "a (end)", requests);
  if (last) last->final("last 1/8");
  rss.finish(g_mode);
}

// ---------------------------------------------------------------- serve-retry
void serveRetry(int shapes) {
  CUstream s = newStream();
  CUdeviceptr a = simtest::zeroedBuffer(*cu), b = simtest::zeroedBuffer(*cu);
  uint64_t ha = 0, hb = 0;
  int gi = 0;
  // head (one shape for every variant), then a body of grid `g`, then a sync.
  auto step = [&](unsigned g) {
    SIM_CHECK(launch(g_mix, 1, a, a, uint64_t(gi), s));
    ha = mixv(ha, uint64_t(gi));
    for (int k = 0; k < 5; ++k) {
      SIM_CHECK(launch(g_add, g, b, a, uint64_t(k), s));
      hb = ha + uint64_t(k);
      SIM_CHECK(launch(g_mix, g, a, b, g, s));
      ha = mixv(hb, g);
    }
    SIM_CHECK(cu->cuStreamSynchronize(s));
    expectValue(readBack(a), ha, "a", gi);
    ++gi;
  };
  RssWatch rss;
  for (int i = 0; i < 6; ++i) step(3);  // A built
  for (int r = 0; r < shapes; ++r) {
    rss.tick(r, shapes);
    for (int i = 0; i < 2; ++i) step(3);            // A replayed (not idle)
    for (int i = 0; i < 3; ++i) step(4 + unsigned(r));  // V_r: refused at the variant limit
    if (r % 64 == 63) simTraceClear();
  }
  Phase p1;
  p1.report("shapes");
  for (int i = 0; i < 3; ++i) step(3);
  Phase fin;
  const unsigned Z = 4 + unsigned(shapes) + 17;
  const int zSteps = 8000;  // 8000 x 12 ops: > 65536 ops after A's last replay
  for (int i = 0; i < zSteps; ++i) {
    step(Z);
    if (i % 64 == 63) simTraceClear();
  }
  fin.final("Z after A went idle");
  rss.finish(g_mode);
}

// ---------------------------------------------------------------- module-churn
void moduleChurn(int cycles) {
  simtest::CodeApi code;
  if (!simtest::loadCodeApi(g_drv, &code)) {
    ++g_wrong;
    return;
  }
  CUstream s = newStream();
  CUdeviceptr a = simtest::zeroedBuffer(*cu), b = simtest::zeroedBuffer(*cu);
  uint64_t ha = 0, hb = 0;
  RssWatch rss;
  Phase* last = nullptr;
  Phase lastPhase;
  // Two images alternate: the same handle values may name other kernels.
  const char* kImg[2] = {"sim-image: sim_add_mc(8,8,8); sim_mix_mc(8,8,8)",
                         "sim-image: sim_mix_md(8,8,8); sim_add_md(8,8,8)"};
  int gi = 0;
  for (int c = 0; c < cycles; ++c) {
    rss.tick(c, cycles);
    if (c == cycles - cycles / 8) {
      lastPhase = Phase();
      last = &lastPhase;
    }
    const int img = c % 2;
    CUmodule mod = nullptr;
    SIM_CHECK(code.moduleLoadData(&mod, kImg[img]));
    CUfunction f0 = nullptr, f1 = nullptr;  // f0: the image's first kernel
    SIM_CHECK(code.moduleGetFunction(&f0, mod, img ? "sim_mix_md" : "sim_add_mc"));
    SIM_CHECK(code.moduleGetFunction(&f1, mod, img ? "sim_add_md" : "sim_mix_mc"));
    CUfunction add = img ? f1 : f0, mix = img ? f0 : f1;
    for (int i = 0; i < 40; ++i, ++gi) {
      // img 0: add, mix, add, mix, add, mix; img 1: the same kernels by
      // position, the other effect (a replay of the old code would differ).
      CUfunction first = f0, second = f1;
      for (int k = 0; k < 3; ++k) {
        SIM_CHECK(launch(first, 1, b, a, uint64_t(k + 1), s));
        hb = first == add ? ha + uint64_t(k + 1) : mixv(ha, uint64_t(k + 1));
        SIM_CHECK(launch(second, 1, a, b, uint64_t(gi), s));
        ha = second == add ? hb + uint64_t(gi) : mixv(hb, uint64_t(gi));
      }
      SIM_CHECK(cu->cuStreamSynchronize(s));
      expectValue(readBack(a), ha, "a", gi);
    }
    (void)mix;
    SIM_CHECK(code.moduleUnload(mod));
    simTraceClear();
  }
  if (last) last->final("last 1/8");
  rss.finish(g_mode);
}

// ---------------------------------------------------------------- handle-churn
void handleChurn(int steps) {
  CUstream s = newStream();
  CUdeviceptr a = simtest::zeroedBuffer(*cu), b = simtest::zeroedBuffer(*cu), c = simtest::zeroedBuffer(*cu),
              g = simtest::zeroedBuffer(*cu);
  uint64_t ha = 0, hb = 0, hc = 0, hg = 0;
  RssWatch rss;
  for (int i = 0; i < steps; ++i) {
    rss.tick(i, steps);
    const bool blockingStep = i % 5 == 4;
    CUstream t = newStream(), u = newStream(blockingStep ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING);
    CUevent e1 = newEvent(), e2 = newEvent(), e3 = newEvent();
    SIM_CHECK(launch(g_mix, 1, a, a, uint64_t(i), s));
    ha = mixv(ha, uint64_t(i));
    SIM_CHECK(cu->cuEventRecord(e1, s));
    SIM_CHECK(cu->cuStreamWaitEvent(t, e1, 0));
    SIM_CHECK(cu->cuStreamWaitEvent(u, e1, 0));
    SIM_CHECK(launch(g_add, 1, b, a, 1, t));
    hb = ha + 1;
    SIM_CHECK(launch(g_mix, 1, b, b, 9, t));
    hb = mixv(hb, 9);
    SIM_CHECK(cu->cuEventRecord(e3, t));
    SIM_CHECK(launch(g_add, 1, c, a, 2, u));
    hc = ha + 2;
    if (blockingStep) {
      // Legacy-stream work: orders against u only when u is blocking.
      SIM_CHECK(launch(g_add, 1, g, g, 1, CU_STREAM_LEGACY));
      hg += 1;
    }
    SIM_CHECK(launch(g_mix, 1, c, c, 5, u));
    hc = mixv(hc, 5);
    SIM_CHECK(cu->cuEventRecord(e2, u));
    SIM_CHECK(cu->cuStreamWaitEvent(s, e2, 0));
    SIM_CHECK(cu->cuStreamWaitEvent(s, e3, 0));
    SIM_CHECK(launch(g_add, 1, a, c, 3, s));
    ha = hc + 3;
    SIM_CHECK(cu->cuStreamDestroy(t));  // work pending
    SIM_CHECK(cu->cuStreamDestroy(u));
    SIM_CHECK(cu->cuEventDestroy(e1));
    SIM_CHECK(cu->cuEventDestroy(e2));
    SIM_CHECK(cu->cuEventDestroy(e3));
    if (i % 3 == 2) {
      SIM_CHECK(cu->cuCtxSynchronize());
      expectValue(readBack(a), ha, "a", i);
      expectValue(readBack(b), hb, "b", i);
      expectValue(readBack(c), hc, "c", i);
      expectValue(readBack(g), hg, "g", i);
    }
    if (i % 64 == 63) simTraceClear();
  }
  SIM_CHECK(cu->cuCtxSynchronize());
  expectValue(readBack(a), ha, "a (end)", steps);
  expectValue(readBack(b), hb, "b (end)", steps);
  rss.finish(g_mode);
}

// ---------------------------------------------------------------- drift
void drift(int steps) {
  CUstream s = newStream();
  CUdeviceptr a = simtest::zeroedBuffer(*cu), b = simtest::zeroedBuffer(*cu);
  uint64_t ha = 0, hb = 0;
  RssWatch rss;
  for (int i = 0; i < steps; ++i) {
    rss.tick(i, steps);
    const int ramp = (i / 8) % 80;
    const int n = 6 + (ramp < 40 ? ramp : 79 - ramp);
    for (int k = 0; k < n; ++k) {
      if (k % 2 == 0) {
        SIM_CHECK(launch(g_add, 1, b, a, uint64_t(k + i), s));
        hb = ha + uint64_t(k + i);
      } else {
        SIM_CHECK(launch(g_mix, 1, a, b, uint64_t(k), s));
        ha = mixv(hb, uint64_t(k));
      }
    }
    SIM_CHECK(cu->cuStreamSynchronize(s));
    expectValue(readBack(a), ha, "a", i);
    expectValue(readBack(b), hb, "b", i);
    if (i % 64 == 63) simTraceClear();
  }
  rss.finish(g_mode);
}

// ---------------------------------------------------------------- realloc
void reallocMode(int steps) {
  CUstream s = newStream();
  CUdeviceptr q = simtest::zeroedBuffer(*cu, 4096), acc = simtest::zeroedBuffer(*cu);
  uint64_t hacc = 0;
  const size_t kSizes[3] = {256, 4096, 1024};
  RssWatch rss;
  for (int i = 0; i < steps; ++i) {
    rss.tick(i, steps);
    // The size changes in runs of 6 steps, so each size's steps repeat.
    const size_t bytes = kSizes[(i / 6) % 3];
    CUdeviceptr p = 0;
    SIM_CHECK(cu->cuMemAlloc(&p, bytes));
    const unsigned char v = static_cast<unsigned char>(1 + (i / 6) % 3);
    SIM_CHECK(cu->cuMemsetD8Async(p, v, bytes, s));
    if (i % 7 == 6) {
      // 4096 bytes of a buffer that may be smaller now: the driver decides.
      const CUresult want = bytes >= 4096 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      expectCode(cu->cuMemsetD8Async(p, v, 4096, s), want, "cuMemsetD8Async(p, 4096)", i);
      ++g_provoked;
    }
    SIM_CHECK(cu->cuMemcpyDtoDAsync(q, p, bytes, s));
    // acc += q[bytes - 8] word; then mix.
    SIM_CHECK(launch(g_add, 1, acc, acc, uint64_t(i), s));
    hacc += uint64_t(i);
    SIM_CHECK(launch(g_mix, 1, acc, acc, uint64_t(bytes), s));
    hacc = mixv(hacc, bytes);
    SIM_CHECK(cu->cuStreamSynchronize(s));
    uint64_t word = 0;
    SIM_CHECK(cu->cuMemcpyDtoH(&word, q + bytes - 8, 8));
    uint64_t want = 0;
    std::memset(&want, v, 8);
    expectValue(word, want, "q's last word (copied from p)", i);
    expectValue(readBack(acc), hacc, "acc", i);
    SIM_CHECK(cu->cuMemFree(p));
    if (i % 64 == 63) simTraceClear();
  }
  rss.finish(g_mode);
}

// ---------------------------------------------------------------- thread-churn
struct ThreadResult {
  int wrong = 0;
  int failed = 0;
};
void threadBody(CUdeviceptr a, CUdeviceptr b, int t, ThreadResult* out) {
  const simtest::DriverApi& pt = g_drv.perThread;
  if (pt.cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS) {
    ++out->failed;
    return;
  }
  uint64_t ha = 0, hb = 0;
  if (pt.cuMemsetD8(a, 0, 8) != CUDA_SUCCESS) ++out->failed;
  for (int i = 0; i < 12; ++i) {
    for (int k = 0; k < 3; ++k) {
      if (launch(g_add, 1, b, a, uint64_t(k + t), nullptr, &pt) != CUDA_SUCCESS) ++out->failed;
      hb = ha + uint64_t(k + t);
      if (launch(g_mix, 1, a, b, uint64_t(i), nullptr, &pt) != CUDA_SUCCESS) ++out->failed;
      ha = mixv(hb, uint64_t(i));
    }
    if (pt.cuStreamSynchronize(nullptr) != CUDA_SUCCESS) ++out->failed;
    uint64_t v = 0;
    if (pt.cuMemcpyDtoH(&v, a, 8) != CUDA_SUCCESS) ++out->failed;
    if (v != ha) ++out->wrong;
  }
}
void threadChurn(int threads) {
  CUdeviceptr a = simtest::zeroedBuffer(*cu), b = simtest::zeroedBuffer(*cu);
  RssWatch rss;
  Phase first;
  Phase lastPhase;
  Phase* last = nullptr;
  for (int t = 0; t < threads; ++t) {
    rss.tick(t, threads);
    if (t == threads - threads / 8) {
      first.report("first 7/8");
      lastPhase = Phase();
      last = &lastPhase;
    }
    ThreadResult res;
    std::thread th(threadBody, a, b, t, &res);
    th.join();
    if (res.failed && g_wrong < 8) std::printf("%s: %s: thread %d: %d failed calls\n", g_program, g_mode, t, res.failed);
    if (res.wrong && g_wrong < 8) std::printf("%s: %s: thread %d: %d wrong values\n", g_program, g_mode, t, res.wrong);
    g_wrong += res.wrong + res.failed;
    simTraceClear();
  }
  if (last) last->final("last 1/8 of the threads");
  rss.finish(g_mode);
}

// ---------------------------------------------------------------- pool-sizes
void poolSizes(int requests) {
  CUstream s = newStream();
  CUdeviceptr acc = simtest::zeroedBuffer(*cu);
  uint64_t hacc = 0;
  RssWatch rss;
  const uint64_t before = simPhysMappedBytes();
  uint64_t largest = 0;
  for (int r = 0; r < requests; ++r) {
    rss.tick(r, requests);
    const size_t bytes = size_t(1 + r % 96) * (2u << 20) + 4096;
    largest = std::max<uint64_t>(largest, bytes);
    for (int d = 0; d < 3; ++d) {
      CUdeviceptr p = 0;
      SIM_CHECK(cu->cuMemAllocAsync(&p, bytes, s));
      SIM_CHECK(cu->cuMemsetD32Async(p + bytes - 8, uint32_t(r), 2, s));
      SIM_CHECK(launch(g_add, 1, acc, p + bytes - 8, uint64_t(d), s));
      hacc = (uint64_t(uint32_t(r)) << 32 | uint32_t(r)) + uint64_t(d);
      SIM_CHECK(launch(g_mix, 1, acc, acc, uint64_t(bytes), s));
      hacc = mixv(hacc, bytes);
      SIM_CHECK(cu->cuMemFreeAsync(p, s));
      SIM_CHECK(cu->cuStreamSynchronize(s));
      expectValue(readBack(acc), hacc, "acc", r);
    }
    if (r % 32 == 31) simTraceClear();
  }
  const uint64_t held = simPhysMappedBytes() - before;
  std::printf("%s: %s: simulated device memory mapped by graft: %.1f MiB (largest live block %.1f MiB)\n", g_program,
              g_mode, double(held) / 1048576.0, double(largest) / 1048576.0);
  if (held > 4 * largest) {
    std::printf("%s: %s: graft keeps %.1f MiB of device memory mapped for a program that never has more than %.1f "
                "MiB live\n",
                g_program, g_mode, double(held) / 1048576.0, double(largest) / 1048576.0);
    ++g_memWrong;
  }
  rss.finish(g_mode);
}

// ---------------------------------------------------------------- event-reuse
void eventReuse(int steps) {
  CUstream s = newStream(), t = newStream();
  CUevent f = newEvent();
  CUdeviceptr a = simtest::zeroedBuffer(*cu), b = simtest::zeroedBuffer(*cu);
  uint64_t ha = 0, hb = 0;
  RssWatch rss;
  for (int i = 0; i < steps; ++i) {
    rss.tick(i, steps);
    CUevent e = newEvent();
    SIM_CHECK(launch(g_mix, 1, a, a, uint64_t(i), s));
    ha = mixv(ha, uint64_t(i));
    SIM_CHECK(launch(g_add, 1, a, a, 2, s));
    ha += 2;
    SIM_CHECK(cu->cuEventRecord(e, s));
    SIM_CHECK(cu->cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(launch(g_add, 1, b, a, 1, t));
    hb = ha + 1;
    SIM_CHECK(launch(g_mix, 1, b, b, 4, t));
    hb = mixv(hb, 4);
    SIM_CHECK(cu->cuEventRecord(f, t));
    SIM_CHECK(cu->cuEventDestroy(e));  // the record and the wait may be held
    SIM_CHECK(cu->cuStreamWaitEvent(s, f, 0));
    SIM_CHECK(launch(g_add, 1, a, a, 5, s));
    ha += 5;
    if (i % 4 == 3) {
      SIM_CHECK(cu->cuStreamSynchronize(t));
      expectValue(readBack(b), hb, "b", i);
      SIM_CHECK(cu->cuStreamSynchronize(s));
      expectValue(readBack(a), ha, "a", i);
    }
    if (i % 64 == 63) simTraceClear();
  }
  SIM_CHECK(cu->cuCtxSynchronize());
  expectValue(readBack(a), ha, "a (end)", steps);
  expectValue(readBack(b), hb, "b (end)", steps);
  rss.finish(g_mode);
}

}  // namespace

int main(int argc, char** argv) {
  // --rss-limit-mb is ours; the rest goes to parseModeArgs.
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rss-limit-mb") && i + 1 < argc) {
      g_rssLimitMb = std::atof(argv[++i]);
      continue;
    }
    rest.push_back(argv[i]);
  }
  ModeArgs args = parseModeArgs(int(rest.size()), rest.data(), "sim_review12_longrun", 0);
  const std::string mode = args.mode;
  int steps = args.steps;
  if (int rc = simtest::startProgram("sim_review12_longrun", &g_drv, &g_ctx)) return rc;
  cu = &g_drv.plain;
  g_add = simtest::libraryKernel3("sim_add_review12");
  g_mix = simtest::libraryKernel3("sim_mix_review12");
  auto dflt = [&](int d) { return steps > 0 ? steps : (steps = d); };
  if (mode == "serve-lengths") serveLengths(dflt(8000));
  else if (mode == "serve-retry") serveRetry(dflt(4200));
  else if (mode == "module-churn") moduleChurn(dflt(400));
  else if (mode == "handle-churn") handleChurn(dflt(6000));
  else if (mode == "drift") drift(dflt(6000));
  else if (mode == "realloc") reallocMode(dflt(6000));
  else if (mode == "thread-churn") threadChurn(dflt(320));
  else if (mode == "pool-sizes") poolSizes(dflt(600));
  else if (mode == "event-reuse") eventReuse(dflt(6000));
  else {
    std::printf("usage: sim_review12_longrun --mode serve-lengths|serve-retry|module-churn|handle-churn|drift|realloc|"
                "thread-churn|pool-sizes|event-reuse [--steps N] [--rss-limit-mb M] [--expect-graphs]\n");
    return 2;
  }
  std::printf("%s: %s: graft %s\n", g_program, g_mode, graftLoaded() ? "loaded" : "not loaded");
  if (g_memWrong) {
    report(steps, false);
    std::printf("%s: %s: memory grows without bound (see above)\n", g_program, g_mode);
    return 1;
  }
  const int rc = report(steps, args.expectGraphs);
  if (rc != 0) return rc;
  if (args.expectGraphs && g_haveFinalPhase && g_finalPhaseGraphEffects == 0) {
    std::printf("%s: %s: no kernel ran from a graph in the final phase: graphing stopped for good\n", g_program,
                g_mode);
    return 3;
  }
  return 0;
}
