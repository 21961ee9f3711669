// sim_review8_lifecycle: the eighth red-team round's review of lifecycle and
// teardown while graft holds work or graphs: process exit (graft's exit
// handler, src/hook/runtime.cc onExit / Runtime::writeExitReport, and what
// runs after it), threads that end with work held, contexts that end
// (cuDevicePrimaryCtxRelease, cuCtxDestroy: the SYNC_UNLOADS_ENDS_CONTEXT
// path of src/hook/interpose.cc dispatch, Runtime::codeUnloading,
// Engine::forgetRecordedCode, GraphExecutor::forgetKernels,
// PerThreadStreams::retireIfEnded) and the handles the simulator then gives
// out again, streams, events and memory destroyed under held work and made
// again under the same handle or address, and graft's pool
// (src/pool/device_pool.cc, GRAFT_POOL=1) across a context's end. Every mode
// passes without graft; every return code and value must be the simulated
// driver's, eagerly and under graft, with no crash or hang:
//   sim_review8_lifecycle --mode MODE [--steps N] [--expect-graphs]
//
// (Each "FAILS under graft" below is what graft did when the mode was written;
// tests/sim/meson.build registers what holds now: all pass; sticky-held, a
// documented limit, runs eagerly only.)
//
// pool-stale-stream  (run with GRAFT_POOL=1) device 0's primary context runs
//                a two-stream loop whose temporaries come from
//                cuMemAllocAsync/cuMemFreeAsync on s1 and s2 (graft's pool
//                serves them); the program leaves s1 and s2 to the context's
//                end and releases its only reference (the context ends, and
//                its streams and events with it), retains the primary context
//                again (same handle) and runs the temporaries' loop on the
//                legacy stream. FAILS under graft with GRAFT_POOL=1: the
//                simulator aborts ("a call named a destroyed stream handle";
//                the real driver crashed on such handles, cf. churn_pending):
//                the pool still holds blocks freed on the ended context's s1,
//                unfenced, and to let the legacy stream reuse one it records a
//                fence on s1 (DevicePool::allocate device_pool.cc:152 ->
//                fenceFor :98, cuEventRecord(fence, s1)). Passes without
//                GRAFT_POOL, and with SIM_STRICT_HANDLES=0 (the record then
//                fails and the block is never reused).
// pool-event-hijack  (run with GRAFT_POOL=1) the same first context; in the
//                second one the program creates eight events first (they get
//                the ended context's event handles back, among them the
//                fence events graft's pool created there and still keeps),
//                records them on a stream g behind a kernel that waits for
//                the host (sim_gate), then runs a loop whose temporaries are
//                freed on s1 and allocated on s2 (the pool fences s1 every
//                step); cuEventQuery of each event must stay
//                CUDA_ERROR_NOT_READY while the gate is closed, and a stream
//                that waits on each event and copies what g writes after the
//                gate must see that value. FAILS under graft with
//                GRAFT_POOL=1: from step 2 on two of the program's events
//                answer CUDA_SUCCESS with the gate closed, and the streams
//                waiting on them copy the old value (0 instead of 77): the
//                pool took its ended context's fence events (stream_fence_,
//                then spare_events_) for live ones and recorded them on s1
//                (fenceFor, device_pool.cc:94-98: a spare popped and
//                cuEventRecord'ed), which now records the PROGRAM's event
//                there, moving its latest record off the gated stream.
//                Passes without GRAFT_POOL.
//                Diagnosis of both: DevicePool is never told that a context
//                ended. The ENDS_CONTEXT path (interpose.cc:932-946:
//                hostBarrier, Runtime::codeUnloading -> forgetRecordedCode,
//                PerThreadStreams::retireIfEnded) drops graphs, capture
//                streams, copy kernels and proxies, but the pool keeps driver
//                handles of the ended context: free blocks' `stream` and
//                `fence`, stream_fence_ / unfenced_ keyed by stream handles,
//                spare_events_. Fix: a DevicePool::contextEnded(ctx) called
//                from that path after a successful call that ended the
//                context (as retireIfEnded decides; for the flushing
//                forwarder, PerThreadStreams::endedUnknown's place: every
//                context): remember each fence event's context (and each
//                stream key's) and forget, not destroy, those of ctx (the
//                driver freed them); make every block freed on a stream of
//                ctx or its legacy stream plain free (stream 0, fence null:
//                the context's end drained its work) and drop the
//                stream_fence_ / unfenced_ entries of ctx. Also: spare events are
//                shared across contexts, so a spare of another context (its
//                record refused: "event and stream of different contexts")
//                is pushed back and fails every later fence
//                (device_pool.cc:98-100), keeping freed blocks from being
//                reused (see pool-created-context); keep spares per context.
// pool-created-context  (GRAFT_POOL=1 shows it) the pool serves a created
//                context of device 0 (cuCtxCreate) whose streams free blocks;
//                the context is destroyed; back in the primary context s1
//                frees and s2 allocates every step. Values and codes as
//                eagerly (regression check), but the pool carves a new block
//                about every other allocation (report: 830 allocations, 426
//                reused at --steps 400): blocks freed on the destroyed
//                context's streams and its fence events are kept for good (a
//                leak that grows with the blocks' size, not a divergence).
// atexit-calls   a two-stream loop (kernels of a library kernel and of a
//                module's, E and F between the streams) graft replays; main
//                ends with half a step held and returns; an atexit handler
//                registered before the driver was first used (so it runs
//                after graft's exit handler, and its calls reach the driver
//                without graft, as static destructors' do) polls
//                cuEventQuery(E) and cuStreamQuery(s), synchronizes, runs the
//                step six more times, queries, reads back, and frees memory,
//                destroys an event and a stream, unloads the module and
//                releases the primary context; with GRAFT_STATS set it also
//                reads graft's exit report: ops_via_graph + ops_eager must be
//                ops_total, graphs built and replays nonzero, and kernels_top
//                must count exactly the launches the program made of its
//                kernel. (Regression check; also SIM_GRAPH_LAUNCH_US=300 and
//                SIM_FAIL=cuGraphLaunch:N:999 for N = 3..9.)
// atexit-queued  the same, main ending right after a whole step, so its
//                graph launch may still be queued on graft's launch thread at
//                exit (SIM_GRAPH_LAUNCH_US=300, with SIM_FAIL=cuGraphLaunch:N
//                making it fail there). (Regression check.)
// quick-exit     main ends with half a step held and calls std::quick_exit
//                (no atexit handler runs, graft's included); the
//                at_quick_exit handler waits for the step's last kernel by
//                reading memory, with no CUDA call (the program sets
//                SIM_ASYNC_US=100), then synchronizes through graft: graft's
//                idle flush must issue what it held. (Regression check;
//                this handler ends the process before graft's.)
// quick-exit-report  atexit-calls, ended by std::quick_exit: the exit
//                handler's checks run as an at_quick_exit handler registered
//                before graft's (so it runs after it): what graft held ran,
//                and graft's exit report is there and adds up (GRAFT_STATS;
//                registered with run_with_report.py, which requires it).
// exit-thread-midstep, exit-thread-midstep-pts  main loops on s (with -pts:
//                its per-thread default stream) and t, x = mix(x ^ k) so x
//                depends on the order of every kernel; another thread calls
//                exit(0) in the middle of a step; the exit handler (on that
//                thread, after graft's) has main park between two calls (it
//                may have issued more through graft, replay now stopped),
//                then synchronizes the context, checks x and y, and goes on
//                as atexit-calls (on the legacy stream with -pts, which
//                follows the per-thread stream). (Regression check.)
// ctx-reset-loop, ctx-reset-loop-pts  four lives of device 1's primary
//                context, each retained, used for the same loop (s: with -pts
//                the per-thread default stream; t blocking; E and F; a memset;
//                each step's result written into portable pinned memory of
//                device 0) and released (the only reference) with half a
//                step held: the driver finishes it before the context ends.
//                The new context has the old handle and its streams and
//                events get the old ones back (18 of them). (Regression
//                check.)
// ctx-create-loop, ctx-create-loop-pts  the same with a created context of
//                device 0 (cuCtxCreate / cuCtxDestroy). (Regression check.)
// swap-recreate  s blocking and t non-blocking, the legacy stream reading
//                what t wrote after an event; every ninth step both streams
//                and E are destroyed in the middle of the step (their work
//                and E's record held) and made again, the new s getting t's
//                old handle and the new t s's, with the flags swapped every
//                time. (Regression check.)
// free-realloc-midstep  device copies and memsets of buf (graft's copy
//                kernels in the graph) and a kernel reading it on a second
//                stream; every eleventh step, with those ops held, cuMemFree
//                of buf and cuMemAlloc giving the same address back, poisoned
//                at once: the held ops must have run before the free.
//                (Regression check, also with GRAFT_POOL=1.)
// thread-exit-stream  eight worker threads one after another, each creating
//                a stream (even workers destroy theirs, so the next one gets
//                the handle back), looping on it and ending with half a step
//                held (and the stream destroyed under it, or left); main
//                polls the last record's event and checks the value.
//                (Regression check.)
//
// With the library this round reviewed, pool-stale-stream and
// pool-event-hijack fail under graft with GRAFT_POOL=1 (they pass without
// it); every other mode passes with and without GRAFT_POOL=1,
// SIM_GRAPH_LAUNCH_US=300 and GRAFT_ASYNC_LAUNCH=0. Not modelled by the
// simulator: cuDevicePrimaryCtxReset, device memory and VMM mappings freed
// with their context (the simulator keeps them; were the pool's mappings
// freed with the context it was first used in, its later blocks would not be
// mapped at all), host functions run on a driver thread (exit() from one).
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken); a
// simulator abort (134) is a crash.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

struct Kit {
  simtest::Driver* drv = nullptr;
  const simtest::DriverApi* cu = nullptr;
  CUcontext ctx = nullptr;
  CUfunction add = nullptr;
  CUfunction mix = nullptr;
  CUfunction gate = nullptr;
  CUdeviceptr zero = 0;
  void add3(CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s) const {
    SIM_CHECK(simtest::launchAdd(*cu, add, to, from, v, s));
  }
  void mix3(CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s) const {
    SIM_CHECK(simtest::launchAdd(*cu, mix, to, from, v, s));
  }
  // A kernel that runs only once the host wrote at least `threshold` to `flag`.
  void gateOn(CUdeviceptr flag, uint64_t threshold, CUstream s) const {
    SIM_CHECK(simtest::launchAdd(*cu, gate, flag, flag, threshold, s));
  }
};

template <typename F>
F proc(const simtest::Driver& d, const char* name) {
  F f = nullptr;
  if (!simtest::lookupProc(d, name, &f)) std::exit(2);
  return f;
}

CUstream newStream(const simtest::DriverApi& cu, unsigned flags = CU_STREAM_NON_BLOCKING) {
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, flags));
  return s;
}
CUevent newEvent(const simtest::DriverApi& cu) {
  CUevent e = nullptr;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  return e;
}

// Ends device `dev`'s primary context (the caller holds its only reference)
// and makes a new one current: the simulator, as drivers may, gives the new
// context the old handle, and the ended context's streams and events handles
// go back to the lists new ones are taken from.
CUcontext resetPrimary(const simtest::DriverApi& cu, CUdevice dev) {
  SIM_CHECK(cu.cuDevicePrimaryCtxRelease(dev));
  CUcontext c = nullptr;
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&c, dev));
  SIM_CHECK(cu.cuCtxSetCurrent(c));
  return c;
}

// ------------------------------------------------------------------ modes

// One step of two streams with stream-ordered temporaries (graft's pool
// serves them under GRAFT_POOL=1): t on s1, u (and, with `second`, u2) on s2.
void poolStep(const Kit& k, CUstream s1, CUstream s2, CUdeviceptr x, CUdeviceptr y, int i, bool second) {
  auto& cu = *k.cu;
  CUdeviceptr t = 0, u = 0, u2 = 0;
  SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s1));
  k.add3(t, k.zero, uint64_t(i) + 1, s1);
  for (int j = 0; j < 5; ++j) k.add3(t, t, 1, s1);
  k.add3(x, t, 0, s1);  // x = i + 6
  SIM_CHECK(cu.cuMemFreeAsync(t, s1));
  SIM_CHECK(cu.cuMemAllocAsync(&u, 64, s2));
  if (second) SIM_CHECK(cu.cuMemAllocAsync(&u2, 64, s2));
  k.add3(u, k.zero, 2 * uint64_t(i), s2);
  for (int j = 0; j < 5; ++j) k.add3(u, u, 1, s2);
  if (second) k.add3(u2, u, 1, s2), k.add3(y, u2, 0, s2);  // y = 2i + 6
  else k.add3(y, u, 1, s2);
  SIM_CHECK(cu.cuMemFreeAsync(u, s2));
  if (second) SIM_CHECK(cu.cuMemFreeAsync(u2, s2));
}

// pool-stale-stream
void poolStaleStream(const Kit& k0, int steps) {
  Kit k = k0;
  auto& cu = *k.cu;
  CUdevice dev = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev, 0));
  {
    const CUstream s1 = newStream(cu), s2 = newStream(cu);
    const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
    for (int i = 0; i < steps; ++i) {
      poolStep(k, s1, s2, x, y, i, false);
      SIM_CHECK(cu.cuStreamSynchronize(s1));
      SIM_CHECK(cu.cuStreamSynchronize(s2));
      expectValue(peek(x), uint64_t(i) + 6, "x (first context)", i);
      expectValue(peek(y), 2 * uint64_t(i) + 6, "y (first context)", i);
    }
    // s1 and s2 are left to the context's end (legal: they go with it).
  }
  ++g_provoked;
  resetPrimary(cu, dev);
  k.zero = simtest::zeroedBuffer(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, nullptr));
    k.add3(t, k.zero, uint64_t(i) + 1, nullptr);
    for (int j = 0; j < 5; ++j) k.add3(t, t, 1, nullptr);
    k.add3(x, t, 0, nullptr);
    SIM_CHECK(cu.cuMemFreeAsync(t, nullptr));
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(x), uint64_t(i) + 6, "x (second context)", i);
  }
}

// pool-event-hijack
void poolEventHijack(const Kit& k0, int steps) {
  Kit k = k0;
  auto& cu = *k.cu;
  CUdevice dev = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev, 0));
  {
    const CUstream s1 = newStream(cu), s2 = newStream(cu);
    const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
    for (int i = 0; i < steps; ++i) {
      poolStep(k, s1, s2, x, y, i, true);
      SIM_CHECK(cu.cuStreamSynchronize(s1));
      SIM_CHECK(cu.cuStreamSynchronize(s2));
      expectValue(peek(x), uint64_t(i) + 6, "x (first context)", i);
      expectValue(peek(y), 2 * uint64_t(i) + 6, "y (first context)", i);
    }
  }
  ++g_provoked;
  resetPrimary(cu, dev);
  k.zero = simtest::zeroedBuffer(cu);
  const CUstream s1 = newStream(cu), s2 = newStream(cu), g = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), flag = simtest::zeroedBuffer(cu);
  // The program's events, recorded behind a closed gate: not complete until
  // the host opens it at the end.
  std::vector<CUevent> events;
  for (int e = 0; e < 8; ++e) events.push_back(newEvent(cu));
  const CUdeviceptr w = simtest::zeroedBuffer(cu), slots = simtest::zeroedBuffer(cu, 8 * events.size());
  k.gateOn(flag, 1, g);
  k.add3(w, k.zero, 77, g);  // w = 77 once the gate opened
  for (CUevent e : events) SIM_CHECK(cu.cuEventRecord(e, g));
  const CUevent join = newEvent(cu);
  int early = 0;
  for (int i = 0; i < steps; ++i) {
    // Blocks are freed on s1 only, and s2 allocates every step: graft's pool
    // fences s1's frees (an event it records on s1) before s2 may reuse them.
    CUdeviceptr t = 0, u = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s1));
    k.add3(t, k.zero, uint64_t(i) + 1, s1);
    for (int j = 0; j < 5; ++j) k.add3(t, t, 1, s1);
    k.add3(x, t, 0, s1);  // x = i + 6
    SIM_CHECK(cu.cuMemFreeAsync(t, s1));
    SIM_CHECK(cu.cuMemAllocAsync(&u, 64, s2));
    k.add3(u, k.zero, 2 * uint64_t(i), s2);
    for (int j = 0; j < 5; ++j) k.add3(u, u, 1, s2);
    k.add3(y, u, 1, s2);  // y = 2i + 6
    SIM_CHECK(cu.cuEventRecord(join, s2));
    SIM_CHECK(cu.cuStreamWaitEvent(s1, join, 0));
    SIM_CHECK(cu.cuMemFreeAsync(u, s1));
    SIM_CHECK(cu.cuStreamSynchronize(s1));
    SIM_CHECK(cu.cuStreamSynchronize(s2));
    expectValue(peek(x), uint64_t(i) + 6, "x (second context)", i);
    expectValue(peek(y), 2 * uint64_t(i) + 6, "y (second context)", i);
    for (size_t e = 0; e < events.size(); ++e) {
      const CUresult r = cu.cuEventQuery(events[e]);
      if (r != CUDA_ERROR_NOT_READY && early++ < 3)
        std::printf("sim_review8_lifecycle: %s: step %d: event %zu (recorded behind the closed gate) answers %d\n",
                    g_mode, i, e, int(r));
    }
  }
  g_wrong += early;
  // z follows each event (its record behind the gate) and copies w.
  // A stream z[e] per event follows it (its record behind the gate) and copies w.
  std::vector<CUstream> z;
  for (size_t e = 0; e < events.size(); ++e) {
    z.push_back(newStream(cu));
    SIM_CHECK(cu.cuStreamWaitEvent(z[e], events[e], 0));
    k.add3(slots + 8 * e, w, 0, z[e]);
  }
  // Eagerly each z[e] waits for the gate: it never turns idle while the gate is closed.
  for (int q = 0; q < 20; ++q)
    for (CUstream s : z) expectCode(cu.cuStreamQuery(s), CUDA_ERROR_NOT_READY, "cuStreamQuery(z), gate closed", steps);
  poke(flag, 1);
  SIM_CHECK(cu.cuCtxSynchronize());
  int stale = 0;
  for (size_t e = 0; e < events.size(); ++e) {
    expectCode(cu.cuEventQuery(events[e]), CUDA_SUCCESS, "an event once the gate opened", steps);
    if (peek(slots + 8 * e) != 77) {
      ++stale;
      std::printf("sim_review8_lifecycle: %s: z's copy after waiting on event %zu read w = %llu, expected 77\n", g_mode,
                  e, (unsigned long long)peek(slots + 8 * e));
    }
  }
  g_wrong += stale;
}


// ctx-reset-loop / ctx-reset-loop-pts / ctx-create-loop
void ctxResetLoop(const Kit& k, int steps, bool perThread, bool created) {
  auto& cu = *k.cu;
  const simtest::DriverApi& pt = perThread ? k.drv->perThread : cu;
  auto ctxCreate = proc<decltype(&::cuCtxCreate_v4)>(*k.drv, "cuCtxCreate");
  auto ctxDestroy = proc<decltype(&::cuCtxDestroy_v2)>(*k.drv, "cuCtxDestroy");
  CUdevice dev1 = 0;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS) {
    std::printf("sim_review8_lifecycle: no device 1\n");
    std::exit(2);
  }
  const int lives = 4;
  // Every step's result, in portable pinned memory of device 0's context,
  // which outlives device 1's contexts.
  void* host = nullptr;
  SIM_CHECK(cu.cuMemHostAlloc(&host, 8 * size_t(lives) * size_t(steps + 1),
                              CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  std::memset(host, 0, 8 * size_t(lives) * size_t(steps + 1));
  const CUdeviceptr res = reinterpret_cast<CUdeviceptr>(host);
  std::vector<uint64_t> want(size_t(lives) * size_t(steps + 1), 0);
  std::vector<void*> handles;  // streams and events of each life, to see them come back
  for (int life = 0; life < lives; ++life) {
    CUcontext b = nullptr;
    if (created) {
      SIM_CHECK(ctxCreate(&b, nullptr, 0, 0));  // a second context of device 0, pushed
    } else {
      SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&b, dev1));
    }
    SIM_CHECK(cu.cuCtxSetCurrent(b));
    // s: the per-thread stream (with -pts) or a non-blocking stream; t: blocking.
    const CUstream s = perThread ? nullptr : newStream(cu), t = newStream(cu, CU_STREAM_DEFAULT);
    const CUevent e = newEvent(cu), f = newEvent(cu);
    handles.insert(handles.end(), {(void*)t, (void*)e, (void*)f});
    const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
    uint64_t hx = 0;
    auto step = [&](int i, bool half) {
      const size_t slot = size_t(life) * size_t(steps + 1) + size_t(i);
      for (int j = 0; j < 3; ++j) {
        const uint64_t v = uint64_t(life) << 32 | uint64_t(i) << 8 | uint64_t(j);
        SIM_CHECK(simtest::launchAdd(pt, k.mix, x, x, v, s));
        hx = simMix64(hx ^ v);
      }
      SIM_CHECK(pt.cuEventRecord(e, s));
      SIM_CHECK(pt.cuStreamWaitEvent(t, e, 0));
      SIM_CHECK(simtest::launchAdd(pt, k.add, y, x, 1, t));
      SIM_CHECK(pt.cuMemsetD32Async(y + 8, uint32_t(i), 2, t));
      SIM_CHECK(simtest::launchAdd(pt, k.add, res + 8 * slot, y, 0, t));  // res[slot] = x + 1
      want[slot] = hx + 1;
      if (half) return;
      SIM_CHECK(pt.cuEventRecord(f, t));
      SIM_CHECK(pt.cuStreamWaitEvent(s, f, 0));
    };
    for (int i = 0; i < steps; ++i) {
      step(i, false);
      if (i % 7 == 6) {
        SIM_CHECK(pt.cuStreamSynchronize(s));
        expectValue(peek(res + 8 * (size_t(life) * size_t(steps + 1) + size_t(i))), hx + 1, "res (this life)", i);
      }
    }
    // Half a step more (held), then the context ends with it pending: the
    // driver finishes the work before it ends the context.
    step(steps, true);
    ++g_provoked;
    SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
    if (created) SIM_CHECK(ctxDestroy(b));
    else SIM_CHECK(cu.cuDevicePrimaryCtxRelease(dev1));
    for (int i = 0; i <= steps; ++i) {
      const size_t slot = size_t(life) * size_t(steps + 1) + size_t(i);
      expectValue(peek(res + 8 * slot), want[slot], "res after device 1's context ended", life * 1000 + i);
    }
  }
  int reused = 0;
  for (size_t a = 0; a < handles.size(); ++a)
    for (size_t b = a + 1; b < handles.size(); ++b) reused += handles[a] == handles[b];
  std::printf("sim_review8_lifecycle: %s: %d lives, %d stream and event handles came back in a later life\n", g_mode,
              lives, reused);
}

// swap-recreate
void swapRecreate(const Kit& k, int steps) {
  auto& cu = *k.cu;
  // s blocking and t non-blocking at first; every so often both are destroyed
  // in the middle of a step (their work held) and made again, the new s
  // getting t's old handle and the new t s's (the simulator hands back the
  // last freed handle first), so the handles swap flags; E and F likewise.
  CUstream s = newStream(cu, CU_STREAM_DEFAULT), t = newStream(cu);
  CUevent e = newEvent(cu), f = newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), l = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hl = 0;
  int swaps = 0, swapped = 0;
  for (int i = 0; i < steps; ++i) {
    // The legacy stream: l = x (after s's earlier work while s is blocking;
    // the step orders it with events otherwise).
    SIM_CHECK(cu.cuStreamWaitEvent(nullptr, f, 0));
    k.add3(l, y, 0, nullptr);
    hl = hy;
    for (int j = 0; j < 3; ++j) {
      const uint64_t v = uint64_t(i) << 8 | uint64_t(j);
      k.mix3(x, x, v, s);
      hx = simMix64(hx ^ v);
    }
    SIM_CHECK(cu.cuEventRecord(e, s));
    const bool churn = i % 9 == 8;
    if (churn) {
      // Mid-step: both streams and E go while graft holds their work.
      ++g_provoked;
      const CUstream olds = s, oldt = t;
      const CUevent olde = e;
      SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
      k.add3(y, x, 1, t);
      hy = hx + 1;
      SIM_CHECK(cu.cuEventRecord(f, t));
      SIM_CHECK(cu.cuEventDestroy(e));
      SIM_CHECK(cu.cuStreamDestroy(s));
      SIM_CHECK(cu.cuStreamDestroy(t));
      ++swaps;
      // New ones: the blocking one first (it gets t's handle back).
      unsigned sFlags = CU_STREAM_DEFAULT, tFlags = CU_STREAM_NON_BLOCKING;
      if (swaps % 2) std::swap(sFlags, tFlags);
      s = newStream(cu, sFlags);
      t = newStream(cu, tFlags);
      e = newEvent(cu);
      swapped += (s == oldt) + (t == olds) + (e == olde);
      SIM_CHECK(cu.cuStreamWaitEvent(s, f, 0));  // the new s follows the old t's work
    } else {
      SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
      k.add3(y, x, 1, t);
      hy = hx + 1;
      SIM_CHECK(cu.cuEventRecord(f, t));
      SIM_CHECK(cu.cuStreamWaitEvent(s, f, 0));
    }
    if (i % 4 == 3) {
      SIM_CHECK(cu.cuStreamSynchronize(nullptr));
      expectValue(peek(l), hl, "l", i);
      SIM_CHECK(cu.cuEventSynchronize(f));
      expectValue(peek(y), hy, "y", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), hx, "x", steps);
  expectValue(peek(y), hy, "y", steps);
  std::printf("sim_review8_lifecycle: %s: %d recreations, %d handles came back swapped\n", g_mode, swaps, swapped);
}

// free-realloc-midstep
void freeReallocMidstep(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu), t = newStream(cu);
  const CUevent e = newEvent(cu), f = newEvent(cu);
  CUdeviceptr buf = simtest::zeroedBuffer(cu, 64);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), out = simtest::zeroedBuffer(cu, 64);
  uint64_t hx = 0;
  int same = 0, reallocs = 0;
  for (int i = 0; i < steps; ++i) {
    // s: x += 2; buf[0..8) = x (a device copy); buf[8..16) = i (memset); E;
    // t: out[0..16) = buf[0..16) (a device copy), out[16..24) = buf[0] + 1; F.
    k.add3(x, x, 1, s);
    k.add3(x, x, 1, s);
    hx += 2;
    SIM_CHECK(cu.cuMemcpyDtoDAsync(buf, x, 8, s));
    SIM_CHECK(cu.cuMemsetD32Async(buf + 8, uint32_t(i), 2, s));
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(cu.cuMemcpyDtoDAsync(out, buf, 16, t));
    k.add3(out + 16, buf, 1, t);
    if (i % 11 == 10) {
      // Mid-step, with the step's ops held: buf freed (cuMemFree waits for
      // the device, and the held ops that use buf must run before it) and
      // allocated again, at the same address here; poisoned, so a use of
      // buf that ran late shows.
      ++g_provoked;
      ++reallocs;
      const CUdeviceptr old = buf;
      SIM_CHECK(cu.cuMemFree(buf));
      SIM_CHECK(cu.cuMemAlloc(&buf, 64));
      same += buf == old;
      SIM_CHECK(cu.cuMemsetD8(buf, 0xee, 64));
    }
    SIM_CHECK(cu.cuEventRecord(f, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, f, 0));
    if (i % 3 == 2 || i % 11 == 10) {
      SIM_CHECK(cu.cuEventSynchronize(f));
      expectValue(peek(out), hx, "out[0]", i);
      expectValue(peek(out + 8), uint64_t(uint32_t(i)) * 0x100000001ull, "out[1]", i);
      expectValue(peek(out + 16), hx + 1, "out[2]", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  std::printf("sim_review8_lifecycle: %s: %d frees mid-step, %d allocations got the freed address back\n", g_mode,
              reallocs, same);
}

// pool-created-context
void poolCreatedContext(const Kit& k, int steps) {
  auto& cu = *k.cu;
  auto ctxCreate = proc<decltype(&::cuCtxCreate_v4)>(*k.drv, "cuCtxCreate");
  auto ctxDestroy = proc<decltype(&::cuCtxDestroy_v2)>(*k.drv, "cuCtxDestroy");
  {
    CUcontext c = nullptr;
    SIM_CHECK(ctxCreate(&c, nullptr, 0, 0));  // device 0, pushed
    Kit kc = k;
    kc.zero = simtest::zeroedBuffer(cu);
    const CUstream s1 = newStream(cu), s2 = newStream(cu);
    const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
    for (int i = 0; i < 10; ++i) {
      poolStep(kc, s1, s2, x, y, i, true);
      SIM_CHECK(cu.cuStreamSynchronize(s1));
      SIM_CHECK(cu.cuStreamSynchronize(s2));
      expectValue(peek(x), uint64_t(i) + 6, "x (created context)", i);
      expectValue(peek(y), 2 * uint64_t(i) + 6, "y (created context)", i);
    }
    ++g_provoked;
    SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
    SIM_CHECK(ctxDestroy(c));
  }
  const CUstream s1 = newStream(cu), s2 = newStream(cu);
  const CUevent join = newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0, u = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s1));
    k.add3(t, k.zero, uint64_t(i) + 1, s1);
    for (int j = 0; j < 5; ++j) k.add3(t, t, 1, s1);
    k.add3(x, t, 0, s1);
    SIM_CHECK(cu.cuMemFreeAsync(t, s1));
    SIM_CHECK(cu.cuMemAllocAsync(&u, 64, s2));
    k.add3(u, k.zero, 2 * uint64_t(i), s2);
    for (int j = 0; j < 5; ++j) k.add3(u, u, 1, s2);
    k.add3(y, u, 1, s2);
    SIM_CHECK(cu.cuEventRecord(join, s2));
    SIM_CHECK(cu.cuStreamWaitEvent(s1, join, 0));
    SIM_CHECK(cu.cuMemFreeAsync(u, s1));
    SIM_CHECK(cu.cuStreamSynchronize(s1));
    expectValue(peek(x), uint64_t(i) + 6, "x", i);
    expectValue(peek(y), 2 * uint64_t(i) + 6, "y", i);
  }
}

// thread-exit-stream
void threadExitStream(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUevent e = newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  const int workers = 8;
  int sameHandle = 0;
  CUstream previous = nullptr;
  for (int w = 0; w < workers; ++w) {
    CUstream used = nullptr;
    std::thread([&] {
      SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
      const CUstream s = newStream(cu);  // the previous worker's handle, if it destroyed its stream
      used = s;
      for (int i = 0; i < steps; ++i) {
        for (int j = 0; j < 4; ++j) {
          const uint64_t v = uint64_t(w) << 32 | uint64_t(i) << 8 | uint64_t(j);
          k.mix3(x, x, v, s);
          hx = simMix64(hx ^ v);
        }
        SIM_CHECK(cu.cuEventRecord(e, s));
        if (i % 10 == 9) {
          SIM_CHECK(cu.cuEventSynchronize(e));
          expectValue(peek(x), hx, "x (worker)", i);
        }
      }
      // Half a step more (held), then the worker ends: on even workers it
      // destroys its stream first (the work still completes), on odd ones it
      // leaves it.
      for (int j = 0; j < 2; ++j) {
        const uint64_t v = uint64_t(w) << 32 | uint64_t(steps) << 8 | uint64_t(j);
        k.mix3(x, x, v, s);
        hx = simMix64(hx ^ v);
      }
      SIM_CHECK(cu.cuEventRecord(e, s));
      if (w % 2 == 0) SIM_CHECK(cu.cuStreamDestroy(s));
    }).join();
    sameHandle += used == previous;
    previous = used;
    // The worker is gone; its last record's work must complete.
    expectCode(pollUntilDone([&] { return cu.cuEventQuery(e); }), CUDA_SUCCESS, "cuEventQuery(E) after the worker ended",
               w);
    expectValue(peek(x), hx, "x once E completed after the worker ended", w);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), hx, "x", steps);
  std::printf("sim_review8_lifecycle: %s: %d workers, %d got the previous worker's stream handle\n", g_mode, workers,
              sameHandle);
}

// ------------------------------------------------------------------ exit

// What the exit handler (registered before the driver was first used, so it
// runs after graft's own exit handler and its calls reach the driver without
// graft) checks.
struct ExitState {
  bool active = false;
  int mainRc = 0;            // report()'s code from main, if main got that far
  bool expectGraphs = false;
  Kit k;
  CUstream s = nullptr, t = nullptr;
  CUevent e = nullptr, f = nullptr;  // E: s -> t; F: t -> s (t read x before s writes it again)
  CUdeviceptr x = 0, y = 0;
  uint64_t hx = 0, hy = 0;   // x and y once everything issued so far ran
  uint64_t addLaunches = 0;  // launches of k.add the program made through graft
  simtest::CodeApi code;
  CUmodule mod = nullptr;
  CUfunction mk = nullptr;
  // exit-thread-midstep: the main thread's loop
  std::atomic<bool> stop{false};
  std::atomic<bool> parked{false};
  std::atomic<int> step{0};
};
ExitState g_exit;

void launchCount(const Kit& k, CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s) {
  k.add3(to, from, v, s);
  ++g_exit.addLaunches;
}

// One step of the exit modes: x += 4 on s (three launches of k.add and one of
// the module's kernel), E recorded on s, t waits on E, y = x + 1 on t, y += 2,
// F recorded on t, s waits on F.
void exitStep(ExitState& st, bool counted) {
  const Kit& k = st.k;
  for (int j = 0; j < 3; ++j) counted ? launchCount(k, st.x, st.x, 1, st.s) : k.add3(st.x, st.x, 1, st.s);
  SIM_CHECK(simtest::launchAdd(*k.cu, st.mk, st.x, st.x, 1, st.s));
  st.hx += 4;
  SIM_CHECK(k.cu->cuEventRecord(st.e, st.s));
  SIM_CHECK(k.cu->cuStreamWaitEvent(st.t, st.e, 0));
  counted ? launchCount(k, st.y, st.x, 1, st.t) : k.add3(st.y, st.x, 1, st.t);
  counted ? launchCount(k, st.y, st.y, 2, st.t) : k.add3(st.y, st.y, 2, st.t);
  st.hy = st.hx + 3;
  SIM_CHECK(k.cu->cuEventRecord(st.f, st.t));
  SIM_CHECK(k.cu->cuStreamWaitEvent(st.s, st.f, 0));
}

// A number after `"key": ` in the exit report's JSON (the first one), or -1.
double jsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

// The exit report (GRAFT_STATS), read once graft wrote it: its numbers must
// add up, and the kernel counts must be the launches the program made.
int checkExitReport() {
  const char* path = std::getenv("GRAFT_STATS");
  if (!path || !std::getenv("LD_PRELOAD")) return 0;
  std::ifstream f(path);
  if (!f) {
    std::printf("sim_review8_lifecycle: %s: no exit report at %s\n", g_mode, path);
    return 1;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string j = ss.str();
  int bad = 0;
  const double total = jsonNumber(j, "ops_total"), via = jsonNumber(j, "ops_via_graph"),
               eager = jsonNumber(j, "ops_eager"), built = jsonNumber(j, "graphs_built"),
               replays = jsonNumber(j, "replays"), coverage = jsonNumber(j, "coverage_pct");
  std::printf("sim_review8_lifecycle: %s: exit report: ops_total %.0f via_graph %.0f eager %.0f coverage %.1f%% "
              "graphs_built %.0f replays %.0f\n", g_mode, total, via, eager, coverage, built, replays);
  if (total <= 0 || via + eager != total || built < 1 || replays < 1 || via <= 0) {
    std::printf("sim_review8_lifecycle: %s: exit report numbers do not add up\n", g_mode);
    ++bad;
  }
  // kernels_top: {"name": "sim_add_review8", "count": N}
  const std::string key = "\"name\": \"sim_add_review8\", \"count\": ";
  const size_t at = j.find(key);
  const double launches = at == std::string::npos ? -1 : std::strtod(j.c_str() + at + key.size(), nullptr);
  if (g_exit.addLaunches && launches != double(g_exit.addLaunches)) {
    std::printf("sim_review8_lifecycle: %s: exit report counts %.0f launches of sim_add_review8, the program made "
                "%llu through graft\n", g_mode, launches, (unsigned long long)g_exit.addLaunches);
    ++bad;
  }
  return bad;
}

void atExitHandler() {
  ExitState& st = g_exit;
  if (!st.active) return;
  auto& cu = *st.k.cu;
  const std::string mode = g_mode;
  if (mode.rfind("exit-thread-midstep", 0) == 0) {
    // On the exiting thread: the main thread stops issuing and parks.
    st.stop.store(true);
    for (int n = 0; n < 3000 && !st.parked.load(); ++n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!st.parked.load()) std::printf("sim_review8_lifecycle: %s: the main thread did not park\n", g_mode), ++g_wrong;
    SIM_CHECK(cu.cuCtxSetCurrent(st.k.ctx));
  }
  // Work the program issued before exit is all there: the event's latest
  // record completes and means the work before it ran.
  expectCode(pollUntilDone([&] { return cu.cuEventQuery(st.e); }), CUDA_SUCCESS, "cuEventQuery(E) polled at exit", -1);
  expectCode(pollUntilDone([&] { return cu.cuStreamQuery(st.s); }), CUDA_SUCCESS, "cuStreamQuery(s) polled at exit",
             -1);
  if (mode.rfind("exit-thread-midstep", 0) != 0) expectValue(peek(st.x), st.hx, "x once E completed at exit", -1);
  SIM_CHECK(cu.cuStreamSynchronize(st.t));
  if (mode.rfind("exit-thread-midstep", 0) != 0) expectValue(peek(st.y), st.hy, "y at exit", -1);
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(st.x), st.hx, "x after cuCtxSynchronize at exit", -1);
  expectValue(peek(st.y), st.hy, "y after cuCtxSynchronize at exit", -1);
  // The step again, and the calls that end things, from the exit handler.
  for (int i = 0; i < 6; ++i) exitStep(st, false);
  const CUresult q = cu.cuEventQuery(st.e);
  if (q == CUDA_SUCCESS) expectValue(peek(st.x), st.hx, "x once E answered complete at exit", -1);
  else expectCode(q, CUDA_ERROR_NOT_READY, "cuEventQuery(E) at exit", -1);
  SIM_CHECK(cu.cuStreamSynchronize(st.t));
  expectValue(peek(st.y), st.hy, "y after the exit handler's steps", -1);
  uint64_t v = 0;
  expectCode(cu.cuMemcpyDtoH(&v, st.x, 8), CUDA_SUCCESS, "cuMemcpyDtoH at exit", -1);
  expectValue(v, st.hx, "x read back at exit", -1);
  expectCode(cu.cuMemFree(st.y), CUDA_SUCCESS, "cuMemFree at exit", -1);
  expectCode(cu.cuEventDestroy(st.e), CUDA_SUCCESS, "cuEventDestroy at exit", -1);
  expectCode(cu.cuStreamDestroy(st.t), CUDA_SUCCESS, "cuStreamDestroy at exit", -1);
  expectCode(st.code.moduleUnload(st.mod), CUDA_SUCCESS, "cuModuleUnload at exit", -1);
  CUdevice dev = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev, 0));
  expectCode(cu.cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS, "cuDevicePrimaryCtxRelease at exit", -1);
  const int reportBad = checkExitReport();
  int rc = st.mainRc;
  if (g_wrong || simtest::failedCalls() || reportBad) {
    std::printf("sim_review8_lifecycle: %s: at exit: %d wrong codes or values, %d failed calls, %d report problems\n",
                g_mode, g_wrong, simtest::failedCalls(), reportBad);
    rc = 1;
  } else {
    std::printf("sim_review8_lifecycle: %s: exit handler: every code and value as the driver gives them\n", g_mode);
  }
  SimCounters c{};
  simCounters(&c);
  if (rc == 0 && st.expectGraphs && c.effectsGraph == 0) {
    std::printf("sim_review8_lifecycle: %s: no kernel ran from a graph: the path under test was not taken\n", g_mode);
    rc = 3;
  }
  std::fflush(stdout);
  _exit(rc);
}

// quick-exit: std::quick_exit runs no atexit handler (graft's exit handling
// included); the program's at_quick_exit handler waits for the last kernel's
// result by reading memory, with no CUDA call (SIM_ASYNC_US: the simulated GPU
// runs by itself), then synchronizes through graft.
void quickExitHandler() {
  ExitState& st = g_exit;
  auto& cu = *st.k.cu;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (peek(st.y) != st.hy && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  expectValue(peek(st.y), st.hy, "y, read without a CUDA call after quick_exit", -1);
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(st.x), st.hx, "x after cuCtxSynchronize in the at_quick_exit handler", -1);
  int rc = g_wrong || simtest::failedCalls() ? 1 : 0;
  SimCounters c{};
  simCounters(&c);
  if (rc == 0 && st.expectGraphs && c.effectsGraph == 0) rc = 3;
  std::printf("sim_review8_lifecycle: %s: at_quick_exit handler: %s (graphs %llu)\n", g_mode,
              rc == 1 ? "wrong codes or values" : "every code and value as the driver gives them",
              (unsigned long long)c.effectsGraph);
  std::fflush(stdout);
  _exit(rc);
}

[[noreturn]] void quickExit(const Kit& k, int steps);

void exitSetup(const Kit& k, int steps) {
  ExitState& st = g_exit;
  st.k = k;
  if (!simtest::loadCodeApi(*k.drv, &st.code)) std::exit(2);
  SIM_CHECK(st.code.moduleLoadData(&st.mod, "sim-image: sim_add_m8(8,8,8)"));
  SIM_CHECK(st.code.moduleGetFunction(&st.mk, st.mod, "sim_add_m8"));
  st.s = newStream(*k.cu);
  st.t = newStream(*k.cu);
  st.e = newEvent(*k.cu);
  st.f = newEvent(*k.cu);
  st.x = simtest::zeroedBuffer(*k.cu);
  st.y = simtest::zeroedBuffer(*k.cu);
  (void)steps;
}

// atexit-calls / atexit-queued
void atexitCalls(const Kit& k, int steps, bool half) {
  ExitState& st = g_exit;
  exitSetup(k, steps);
  for (int i = 0; i < steps; ++i) {
    exitStep(st, true);
    if (i % 10 == 9 && i < steps - 10) {
      SIM_CHECK(k.cu->cuStreamSynchronize(st.t));
      expectValue(peek(st.y), st.hy, "y", i);
    }
  }
  st.active = true;
  if (!half) return;  // the last steps' graph launches may still be queued
  // Half a step more, held (it matches the step's graph so far), then exit.
  for (int j = 0; j < 3; ++j) launchCount(k, st.x, st.x, 1, st.s);
  SIM_CHECK(simtest::launchAdd(*k.cu, st.mk, st.x, st.x, 1, st.s));
  st.hx += 4;
  SIM_CHECK(k.cu->cuEventRecord(st.e, st.s));
  st.active = true;
}

void quickExit(const Kit& k, int steps) {
  ExitState& st = g_exit;
  exitSetup(k, steps);
  for (int i = 0; i < steps; ++i) {
    exitStep(st, true);
    if (i % 10 == 9 && i < steps - 10) SIM_CHECK(k.cu->cuStreamSynchronize(st.t));
  }
  // Half a step (held: it matches the step's graph so far), ending in y.
  for (int j = 0; j < 3; ++j) launchCount(k, st.x, st.x, 1, st.s);
  SIM_CHECK(simtest::launchAdd(*k.cu, st.mk, st.x, st.x, 1, st.s));
  st.hx += 4;
  SIM_CHECK(k.cu->cuEventRecord(st.e, st.s));
  SIM_CHECK(k.cu->cuStreamWaitEvent(st.t, st.e, 0));
  launchCount(k, st.y, st.x, 1, st.t);
  st.hy = st.hx + 1;
  std::at_quick_exit(quickExitHandler);
  std::fflush(stdout);
  std::quick_exit(0);
}

// exit-thread-midstep / exit-thread-midstep-pts
[[noreturn]] void exitThreadMidstep(const Kit& k, int steps, bool perThread) {
  ExitState& st = g_exit;
  exitSetup(k, steps);
  // With -pts the main thread's s is its per-thread default stream (the
  // exit handler, on the exiting thread, then names the legacy stream, which
  // follows every blocking stream's work, the per-thread one's included).
  if (perThread) st.s = nullptr;
  const simtest::DriverApi& pt = perThread ? k.drv->perThread : *k.cu;
  st.active = true;
  std::thread([steps] {
    while (g_exit.step.load() < steps) std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::fflush(stdout);
    std::exit(0);
  }).detach();
  for (int i = 0;; ++i) {
    // Stops between ops (the exit handler asked), then waits to be ended.
    auto op = [&](auto f) {
      if (st.stop.load()) {
        st.parked.store(true);
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      f();
    };
    for (int j = 0; j < 3; ++j)
      op([&] {
        const uint64_t v = uint64_t(i) << 8 | uint64_t(j);
        SIM_CHECK(simtest::launchAdd(pt, k.mix, st.x, st.x, v, st.s));
        st.hx = simMix64(st.hx ^ v);
      });
    op([&] { SIM_CHECK(simtest::launchAdd(pt, st.mk, st.x, st.x, 1, st.s)); st.hx += 1; });
    op([&] { SIM_CHECK(pt.cuEventRecord(st.e, st.s)); });
    op([&] { SIM_CHECK(pt.cuStreamWaitEvent(st.t, st.e, 0)); });
    op([&] { SIM_CHECK(simtest::launchAdd(pt, k.add, st.y, st.x, 1, st.t)); st.hy = st.hx + 1; });
    op([&] { SIM_CHECK(simtest::launchAdd(pt, k.add, st.y, st.y, 2, st.t)); st.hy += 2; });
    op([&] { SIM_CHECK(pt.cuEventRecord(st.f, st.t)); });
    op([&] { SIM_CHECK(pt.cuStreamWaitEvent(st.s, st.f, 0)); });
    if (i % 10 == 9)
      op([&] { SIM_CHECK(pt.cuStreamSynchronize(st.t)); expectValue(peek(st.y), st.hy, "y", i); });
    st.step.store(i + 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review8_lifecycle", 60);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  std::atexit(atExitHandler);  // before the driver is used: runs after graft's exit handler
  std::at_quick_exit(atExitHandler);  // the same for std::quick_exit
  if (mode == "quick-exit") setenv("SIM_ASYNC_US", "100", 0);  // the simulated GPU runs while the host spins
  static simtest::Driver drv;
  Kit k;
  if (int rc = simtest::startProgram("sim_review8_lifecycle", &drv, &k.ctx)) return rc;
  k.drv = &drv;
  k.cu = &drv.plain;
  k.add = simtest::libraryKernel3("sim_add_review8");
  k.mix = simtest::libraryKernel3("sim_mix_review8");
  k.gate = simtest::libraryKernel3("sim_gate_review8");
  k.zero = simtest::zeroedBuffer(drv.plain);
  g_exit.expectGraphs = args.expectGraphs;
  if (mode == "pool-stale-stream") poolStaleStream(k, steps);
  else if (mode == "pool-event-hijack") poolEventHijack(k, steps);
  else if (mode == "atexit-calls") atexitCalls(k, steps, true);
  else if (mode == "atexit-queued") atexitCalls(k, steps, false);
  else if (mode == "quick-exit") quickExit(k, steps);
  else if (mode == "quick-exit-report") {
    atexitCalls(k, steps, true);
    std::fflush(stdout);
    std::quick_exit(0);
  }
  else if (mode == "swap-recreate") swapRecreate(k, steps);
  else if (mode == "free-realloc-midstep") freeReallocMidstep(k, steps);
  else if (mode == "pool-created-context") poolCreatedContext(k, steps);
  else if (mode == "thread-exit-stream") threadExitStream(k, steps);
  else if (mode == "ctx-reset-loop") ctxResetLoop(k, steps, false, false);
  else if (mode == "ctx-reset-loop-pts") ctxResetLoop(k, steps, true, false);
  else if (mode == "ctx-create-loop") ctxResetLoop(k, steps, false, true);
  else if (mode == "ctx-create-loop-pts") ctxResetLoop(k, steps, true, true);
  else if (mode == "exit-thread-midstep") exitThreadMidstep(k, steps, false);
  else if (mode == "exit-thread-midstep-pts") exitThreadMidstep(k, steps, true);
  else {
    std::printf("usage: sim_review8_lifecycle --mode pool-stale-stream|pool-event-hijack|pool-created-context|"
                "atexit-calls|atexit-queued|quick-exit|quick-exit-report|exit-thread-midstep|exit-thread-midstep-pts|ctx-reset-loop|"
                "ctx-reset-loop-pts|ctx-create-loop|ctx-create-loop-pts|swap-recreate|free-realloc-midstep|"
                "thread-exit-stream [--steps N] [--expect-graphs]\n");
    return 2;
  }
  g_exit.mainRc = report(steps, args.expectGraphs);
  return g_exit.mainRc;
}
