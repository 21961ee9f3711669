// sim_review5_contexts: red-team checks (fifth round) of how graft tells the
// default streams of several contexts apart (the legacy and per-thread stream
// keys name one stream per context: src/core/engine.cc query / noteWait /
// forkedBeforeHeld / pieceCuts, src/graph/graph_executor.cc build and launch,
// src/graph/op_codec.cc context in shapes, src/hook/interpose.cc
// defaultStreamContext). One mode per suspected divergence from eager
// behaviour; every mode passes without graft (the simulated driver's own
// answers), and a mode that also passes under graft is a regression check:
//   sim_review5_contexts --mode MODE [--steps N] [--expect-graphs]
//
// Context A is device 0's primary context; context C is a second context of
// device 0 (cuCtxCreate), or device 1's primary context where a mode says so.
// Every mode also checks, from the executed trace, that each kernel ran in
// the context the program launched it in (counted per context and step).
//
// alternate-legacy   each step runs the SAME kernels with the same parameter
//                  layout on A's legacy stream, then on C's (cuCtxSetCurrent
//                  between), and asks cuStreamQuery(NULL) in each context
//                  between launches: a "ready" answer must mean that
//                  context's legacy work ran (values read at once); every
//                  fourth step synchronizes both legacy streams.
// push-pop-events  A's legacy stream records EA; C (cuCtxPushCurrent) waits
//                  on EA on its legacy stream, copies A's value, records EC
//                  (cuCtxPopCurrent); A's legacy stream waits on EC and
//                  copies C's value back: values checked after each step.
// gate-no-cross-sync  a host-gated kernel on C's legacy stream, then A's
//                  legacy stream and a blocking stream of A: legacy streams
//                  sync implicitly only with their own context's blocking
//                  streams, so cuStreamSynchronize of A's blocking stream and
//                  of A's legacy stream return with C's gate closed.
// ctx-sync-other-held  C's legacy stream: a gate, then work; A's legacy
//                  stream: work; in A cuCtxSynchronize (A only) and a poll of
//                  cuStreamQuery(NULL) must finish with C's gate closed (a
//                  query of A's NULL must not wait for C's held work).
// threads-two-contexts  two threads, one in A and one in C, take turns
//                  (one step each, handed over through an atomic), each
//                  running the same kernels on its context's legacy stream,
//                  querying and synchronizing it; values checked.
// pts-two-contexts one thread, per-thread default streams (the _ptsz
//                  entry points) in A and in C: A's records EA, C's waits on
//                  EA and copies, records EC, A's waits on EC; a gate on A's
//                  legacy stream after that: C's per-thread stream must not
//                  wait for it (cuStreamSynchronize(CU_STREAM_PER_THREAD) in C
//                  with the gate closed).
// switch-context   the step is learned on A's legacy stream; on irregular
//                  steps the same launches (same kernel, same buffers) are
//                  made with C current instead (then on C's legacy stream):
//                  the kernels must run in C, values checked.
// device1-legacy   alternate-legacy with C = device 1's primary context.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 10, 7); }



struct Ctx {
  decltype(&::cuCtxPushCurrent_v2) push = nullptr;
  decltype(&::cuCtxPopCurrent_v2) pop = nullptr;
  decltype(&::cuCtxCreate_v4) create = nullptr;
};

// Kernels launched per context, and the trace position checked up to.
std::map<CUcontext, uint64_t> g_launched;
size_t g_traceFrom = 0;
int g_wrongContext = 0;

// Counts the kernel effects executed since the last call per context and
// compares them with the launches made since then (call once all launched
// work has completed).
void checkTraceContexts(int step) {
  std::map<CUcontext, uint64_t> ran;
  const size_t n = simTraceSize();
  for (size_t i = g_traceFrom; i < n; ++i) {
    SimEffect e;
    if (simTraceGet(i, &e) != 0 || e.kind != SIM_EFFECT_KERNEL) continue;
    if (std::strncmp(e.kernelName, "sim_add", 7) != 0) continue;
    ++ran[e.context];
  }
  g_traceFrom = n;
  for (const auto& [ctx, count] : g_launched) {
    if (ran[ctx] != count && g_wrongContext++ < 5)
      std::printf("sim_review5_contexts: %s: step %d: %llu kernels ran in context %p, %llu were launched there\n",
                  g_mode, step, (unsigned long long)ran[ctx], (void*)ctx, (unsigned long long)count);
  }
  for (const auto& [ctx, count] : ran) {
    if (!g_launched.count(ctx) && count && g_wrongContext++ < 5)
      std::printf("sim_review5_contexts: %s: step %d: %llu kernels ran in context %p, none launched there\n",
                  g_mode, step, (unsigned long long)count, (void*)ctx);
  }
  g_launched.clear();
}

// launchAdd, counted for the context current now.
void add(const simtest::DriverApi& cu, CUfunction k, CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s) {
  CUcontext c = nullptr;
  SIM_CHECK(cu.cuCtxGetCurrent(&c));
  const CUresult r = simtest::launchAdd(cu, k, to, from, v, s);
  SIM_CHECK(r);
  if (r == CUDA_SUCCESS) ++g_launched[c];
}

CUcontext createdContext(const simtest::DriverApi& cu, const Ctx& x, CUcontext back) {
  CUcontext c = nullptr;
  SIM_CHECK(x.create(&c, nullptr, 0, 0));  // device 0, pushed
  SIM_CHECK(cu.cuCtxSetCurrent(back));     // replaces it on the stack
  return c;
}

CUcontext device1Context(const simtest::DriverApi& cu) {
  CUdevice dev1 = 0;
  CUcontext c = nullptr;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&c, dev1) != CUDA_SUCCESS) {
    std::printf("sim_review5_contexts: no device 1\n");
    std::exit(2);
  }
  return c;
}

void syncBoth(const simtest::DriverApi& cu, CUcontext a, CUcontext c) {
  SIM_CHECK(cu.cuCtxSetCurrent(c));
  SIM_CHECK(cu.cuCtxSynchronize());
  SIM_CHECK(cu.cuCtxSetCurrent(a));
  SIM_CHECK(cu.cuCtxSynchronize());
}

// ------------------------------------------------------------------ modes

// alternate-legacy / device1-legacy
void alternateLegacy(const simtest::DriverApi& cu, CUcontext a, CUcontext c, CUfunction k, int steps) {
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), xa = simtest::zeroedBuffer(cu), ma = simtest::zeroedBuffer(cu),
                    xc = simtest::zeroedBuffer(cu), mc = simtest::zeroedBuffer(cu);
  uint64_t hxa = 0, hxc = 0, stale = 0, ready = 0;
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    for (int j = 0; j < 3; ++j) add(cu, k, xa, xa, 1, nullptr);
    hxa += 3;
    add(cu, k, ma, zero, uint64_t(i), nullptr);
    SIM_CHECK(cu.cuCtxSetCurrent(c));
    for (int j = 0; j < 3; ++j) add(cu, k, xc, xc, 1, nullptr);
    hxc += 3;
    add(cu, k, mc, zero, uint64_t(i), nullptr);
    // Queries of each legacy stream, C's work being the latest.
    for (int q = 0; q < 2; ++q) {
      const bool inA = q == 0;
      SIM_CHECK(cu.cuCtxSetCurrent(inA ? a : c));
      const CUresult r = cu.cuStreamQuery(nullptr);
      if (r == CUDA_SUCCESS) {
        ++ready;
        const bool ok = inA ? peek(xa) == hxa && peek(ma) == uint64_t(i) : peek(xc) == hxc && peek(mc) == uint64_t(i);
        if (!ok && stale++ < 5)
          std::printf("sim_review5_contexts: %s: step %d: %s's legacy stream idle but its work has not run\n", g_mode,
                      i, inA ? "A" : "C");
      } else if (r != CUDA_ERROR_NOT_READY) {
        SIM_CHECK(r);
      }
    }
    if (i % 4 == 3) {
      SIM_CHECK(cu.cuCtxSetCurrent(c));
      SIM_CHECK(cu.cuStreamSynchronize(nullptr));
      expectValue(peek(xc), hxc, "xc after C's legacy synchronize", i);
      SIM_CHECK(cu.cuCtxSetCurrent(a));
      SIM_CHECK(cu.cuStreamSynchronize(nullptr));
      expectValue(peek(xa), hxa, "xa after A's legacy synchronize", i);
      checkTraceContexts(i);
    }
  }
  syncBoth(cu, a, c);
  checkTraceContexts(steps);
  expectValue(peek(xa), hxa, "xa", steps);
  expectValue(peek(xc), hxc, "xc", steps);
  g_wrong += int(stale);
  std::printf("sim_review5_contexts: %s: %llu ready answers\n", g_mode, (unsigned long long)ready);
}

// push-pop-events
void pushPopEvents(const simtest::DriverApi& cu, const Ctx& x, CUcontext a, CUcontext c, CUfunction k, int steps) {
  CUevent EA, EC;
  SIM_CHECK(cu.cuEventCreate(&EA, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(x.push(c));
  SIM_CHECK(cu.cuEventCreate(&EC, CU_EVENT_DISABLE_TIMING));
  CUcontext popped = nullptr;
  SIM_CHECK(x.pop(&popped));
  const CUdeviceptr xa = simtest::zeroedBuffer(cu), yc = simtest::zeroedBuffer(cu), za = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 1; i <= steps; ++i) {
    add(cu, k, xa, xa, 1, nullptr);
    add(cu, k, xa, xa, 1, nullptr);
    hx += 2;
    SIM_CHECK(cu.cuEventRecord(EA, nullptr));
    SIM_CHECK(x.push(c));
    SIM_CHECK(cu.cuStreamWaitEvent(nullptr, EA, 0));
    add(cu, k, yc, xa, 0, nullptr);  // yc = xa
    add(cu, k, yc, yc, 1, nullptr);  // yc = xa + 1
    SIM_CHECK(cu.cuEventRecord(EC, nullptr));
    SIM_CHECK(x.pop(&popped));
    expectValue(uint64_t(popped == c), 1, "cuCtxPopCurrent gave C", i);
    SIM_CHECK(cu.cuStreamWaitEvent(nullptr, EC, 0));
    add(cu, k, za, yc, 0, nullptr);  // za = xa + 1
    add(cu, k, za, za, 1, nullptr);  // za = xa + 2
    const CUresult r = cu.cuEventQuery(EC);
    if (r == CUDA_SUCCESS) expectValue(peek(yc), hx + 1, "yc once EC completed", i);
    else if (r != CUDA_ERROR_NOT_READY) SIM_CHECK(r);
    if (i % 3 == 0) {
      SIM_CHECK(cu.cuStreamSynchronize(nullptr));  // A's legacy stream, which waited for C's
      expectValue(peek(za), hx + 2, "za after A's legacy synchronize", i);
      expectValue(peek(yc), hx + 1, "yc after A's legacy synchronize (A waited on EC)", i);
      SIM_CHECK(x.push(c));
      SIM_CHECK(cu.cuCtxSynchronize());
      SIM_CHECK(x.pop(&popped));
      checkTraceContexts(i);
    }
  }
  syncBoth(cu, a, c);
  checkTraceContexts(steps);
  expectValue(peek(za), hx + 2, "za", steps);
}

// gate-no-cross-sync
void gateNoCrossSync(const simtest::DriverApi& cu, CUcontext a, CUcontext c, CUfunction k, CUfunction gate,
                     int steps) {
  CUstream X;
  SIM_CHECK(cu.cuStreamCreate(&X, CU_STREAM_DEFAULT));  // blocking, in A
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), gc = simtest::zeroedBuffer(cu), xa = simtest::zeroedBuffer(cu),
                    la = simtest::zeroedBuffer(cu), ya = simtest::zeroedBuffer(cu);
  uint64_t hgc = 0, hxa = 0, hla = 0;
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(cu.cuCtxSetCurrent(c));
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i), nullptr));  // C's legacy stream waits for the host
    add(cu, k, gc, gc, 1, nullptr);
    add(cu, k, gc, gc, 1, nullptr);
    hgc += 2;
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    add(cu, k, xa, xa, 1, X);
    add(cu, k, xa, xa, 1, X);
    hxa += 2;
    add(cu, k, la, la, 1, nullptr);
    add(cu, k, la, xa, 0, nullptr);  // la = xa (A's legacy stream follows X)
    hla = hxa;
    add(cu, k, ya, la, 1, X);        // ya = la + 1 (X follows A's legacy stream)
    // Nothing of A's waits for C's gate.
    SIM_CHECK(cu.cuStreamSynchronize(X));
    expectValue(peek(ya), hla + 1, "ya after synchronizing X (C's gate closed)", i);
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(la), hla, "la after synchronizing A's legacy stream (C's gate closed)", i);
    expectValue(peek(gc), hgc - 2, "gc while C's gate is closed", i);
    poke(flag, uint64_t(i));
    SIM_CHECK(cu.cuCtxSetCurrent(c));
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(gc), hgc, "gc once C's gate opened", i);
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    checkTraceContexts(i);
  }
}

// ctx-sync-other-held
void ctxSyncOtherHeld(const simtest::DriverApi& cu, CUcontext a, CUcontext c, CUfunction k, CUfunction gate,
                      int steps) {
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), gc = simtest::zeroedBuffer(cu), xa = simtest::zeroedBuffer(cu);
  uint64_t hgc = 0, hxa = 0;
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    add(cu, k, xa, xa, 1, nullptr);
    add(cu, k, xa, xa, 1, nullptr);
    hxa += 2;
    SIM_CHECK(cu.cuCtxSetCurrent(c));
    add(cu, k, gc, gc, 1, nullptr);
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i), nullptr));
    add(cu, k, gc, gc, 1, nullptr);
    add(cu, k, gc, gc, 1, nullptr);
    hgc += 3;
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    if (i % 2) {
      expectCode(pollUntilDone([&] { return cu.cuStreamQuery(nullptr); }), CUDA_SUCCESS,
                 "cuStreamQuery(NULL) in A polled (C's gate closed)", i);
      expectValue(peek(xa), hxa, "xa once A's legacy stream is idle", i);
    } else {
      SIM_CHECK(cu.cuCtxSynchronize());  // A only
      expectValue(peek(xa), hxa, "xa after cuCtxSynchronize in A (C's gate closed)", i);
    }
    poke(flag, uint64_t(i));
    SIM_CHECK(cu.cuCtxSetCurrent(c));
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(gc), hgc, "gc after C's gate opened", i);
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    checkTraceContexts(i);
  }
}

// threads-two-contexts
void threadsTwoContexts(const simtest::DriverApi& cu, CUcontext a, CUcontext c, CUfunction k, int steps) {
  const CUdeviceptr zero = simtest::zeroedBuffer(cu);
  const CUdeviceptr x[2] = {simtest::zeroedBuffer(cu), simtest::zeroedBuffer(cu)};
  const CUdeviceptr m[2] = {simtest::zeroedBuffer(cu), simtest::zeroedBuffer(cu)};
  std::atomic<int> turn{0};  // 2 * step + thread
  std::atomic<int> wrong{0};
  auto body = [&](int t) {
    SIM_CHECK(cu.cuCtxSetCurrent(t ? c : a));
    uint64_t hx = 0;
    for (int i = 1; i <= steps; ++i) {
      while (turn.load() != 2 * i + t) std::this_thread::yield();
      for (int j = 0; j < 3; ++j) SIM_CHECK(simtest::launchAdd(cu, k, x[t], x[t], 1, nullptr));
      hx += 3;
      SIM_CHECK(simtest::launchAdd(cu, k, m[t], zero, uint64_t(i), nullptr));
      const CUresult r = cu.cuStreamQuery(nullptr);
      if (r == CUDA_SUCCESS && (peek(x[t]) != hx || peek(m[t]) != uint64_t(i)) && wrong++ < 5)
        std::printf("sim_review5_contexts: %s: step %d: thread %d's legacy stream idle but its work has not run\n",
                    g_mode, i, t);
      else if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
        SIM_CHECK(r);
      if (i % 5 == 0) {
        SIM_CHECK(cu.cuStreamSynchronize(nullptr));
        if (peek(x[t]) != hx && wrong++ < 5)
          std::printf("sim_review5_contexts: %s: step %d: thread %d: x is %llu after a synchronize, expected %llu\n",
                      g_mode, i, t, (unsigned long long)peek(x[t]), (unsigned long long)hx);
      }
      turn.store(2 * i + t + 1);
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    if (peek(x[t]) != hx && wrong++ < 5)
      std::printf("sim_review5_contexts: %s: thread %d: x is %llu at the end, expected %llu\n", g_mode, t,
                  (unsigned long long)peek(x[t]), (unsigned long long)hx);
  };
  turn.store(2);
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
  g_wrong += wrong.load();
  // Every kernel of context A or C (4 per step per thread).
  g_launched[a] = g_launched[c] = 4ull * uint64_t(steps);
  checkTraceContexts(steps);
}

// pts-two-contexts
void ptsTwoContexts(const simtest::Driver& drv, CUcontext a, CUcontext c, CUfunction k, CUfunction gate,
                    int steps) {
  const simtest::DriverApi& cu = drv.plain;
  const simtest::DriverApi& pt = drv.perThread;
  CUevent EA, EC;
  SIM_CHECK(cu.cuCtxSetCurrent(a));
  SIM_CHECK(cu.cuEventCreate(&EA, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuCtxSetCurrent(c));
  SIM_CHECK(cu.cuEventCreate(&EC, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuCtxSetCurrent(a));
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), xa = simtest::zeroedBuffer(cu), yc = simtest::zeroedBuffer(cu),
                    za = simtest::zeroedBuffer(cu), g = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    add(pt, k, xa, xa, 1, nullptr);
    add(pt, k, xa, xa, 1, nullptr);
    hx += 2;
    SIM_CHECK(pt.cuEventRecord(EA, nullptr));  // on A's per-thread stream
    SIM_CHECK(cu.cuCtxSetCurrent(c));
    SIM_CHECK(pt.cuStreamWaitEvent(nullptr, EA, 0));
    add(pt, k, yc, xa, 0, nullptr);
    add(pt, k, yc, yc, 1, nullptr);
    SIM_CHECK(pt.cuEventRecord(EC, nullptr));
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    SIM_CHECK(pt.cuStreamWaitEvent(nullptr, EC, 0));
    add(pt, k, za, yc, 1, nullptr);  // za = xa + 2
    // A's legacy stream waits for the host (after A's per-thread work, which
    // is blocking: A's later per-thread work would wait for it, C's does not).
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i), nullptr));
    add(cu, k, g, g, 1, nullptr);
    SIM_CHECK(cu.cuCtxSetCurrent(c));
    SIM_CHECK(pt.cuStreamSynchronize(nullptr));  // C's per-thread stream, with A's gate closed
    expectValue(peek(yc), hx + 1, "yc after synchronizing C's per-thread stream (A's gate closed)", i);
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    poke(flag, uint64_t(i));
    SIM_CHECK(pt.cuStreamSynchronize(nullptr));
    expectValue(peek(za), hx + 2, "za after synchronizing A's per-thread stream", i);
    if (i % 4 == 0) {
      syncBoth(cu, a, c);
      expectValue(peek(g), uint64_t(i), "g", i);
      checkTraceContexts(i);
    }
  }
  syncBoth(cu, a, c);
  checkTraceContexts(steps);
}

// switch-context
void switchContext(const simtest::DriverApi& cu, CUcontext a, CUcontext c, CUfunction k, int steps) {
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), m = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 1; i <= steps; ++i) {
    const bool other = irregular(i, 3);
    g_provoked += other;
    SIM_CHECK(cu.cuCtxSetCurrent(other ? c : a));
    for (int j = 0; j < 4; ++j) add(cu, k, x, x, 1, nullptr);
    hx += 4;
    add(cu, k, m, zero, uint64_t(i), nullptr);
    const CUresult r = cu.cuStreamQuery(nullptr);
    if (r == CUDA_SUCCESS) {
      expectValue(peek(x), hx, "x once the current legacy stream is idle", i);
      expectValue(peek(m), uint64_t(i), "m once the current legacy stream is idle", i);
    } else if (r != CUDA_ERROR_NOT_READY) {
      SIM_CHECK(r);
    }
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(x), hx, "x after synchronizing the current legacy stream", i);
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    checkTraceContexts(i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review5_contexts", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext a = nullptr;
  if (int rc = simtest::startProgram("sim_review5_contexts", &drv, &a)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  Ctx x;
  if (!simtest::lookupProc(drv, "cuCtxPushCurrent", &x.push) || !simtest::lookupProc(drv, "cuCtxPopCurrent", &x.pop) ||
      !simtest::lookupProc(drv, "cuCtxCreate", &x.create))
    return 2;
  CUfunction k = simtest::libraryKernel3("sim_add_review5_contexts");
  CUfunction gate = simtest::libraryKernel3("sim_gate_review5_contexts");
  simTraceClear();
  if (mode == "alternate-legacy") alternateLegacy(cu, a, createdContext(cu, x, a), k, steps);
  else if (mode == "device1-legacy") alternateLegacy(cu, a, device1Context(cu), k, steps);
  else if (mode == "push-pop-events") pushPopEvents(cu, x, a, createdContext(cu, x, a), k, steps);
  else if (mode == "gate-no-cross-sync") gateNoCrossSync(cu, a, createdContext(cu, x, a), k, gate, steps);
  else if (mode == "ctx-sync-other-held") ctxSyncOtherHeld(cu, a, createdContext(cu, x, a), k, gate, steps);
  else if (mode == "threads-two-contexts") threadsTwoContexts(cu, a, createdContext(cu, x, a), k, steps);
  else if (mode == "pts-two-contexts") ptsTwoContexts(drv, a, createdContext(cu, x, a), k, gate, steps);
  else if (mode == "switch-context") switchContext(cu, a, createdContext(cu, x, a), k, steps);
  else {
    std::printf("usage: sim_review5_contexts --mode alternate-legacy|device1-legacy|push-pop-events|"
                "gate-no-cross-sync|ctx-sync-other-held|threads-two-contexts|pts-two-contexts|switch-context "
                "[--steps N] [--expect-graphs]\n");
    return 2;
  }
  g_wrong += g_wrongContext;
  return report(steps, args.expectGraphs);
}
