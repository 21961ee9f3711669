// sim_review5_events: red-team checks (fifth round) of graft's event and query
// bookkeeping (src/core/engine.cc: Engine::query, noteActivity / noteWait,
// event_records_, event epochs and the fork claims built on them,
// deferEventDestroy, releaseStream; the query and event paths of
// src/hook/interpose.cc). One mode per suspected divergence from eager
// behaviour; every mode passes without graft (the simulated driver's own
// answers), and a mode that also passes under graft is a regression check:
//   sim_review5_events --mode MODE [--steps N] [--expect-graphs]
//
// refused-record-fork  (regression check) two non-blocking streams P and b. Each step: a gate
//                  kernel on P (it runs only once the host opens it), a
//                  host-memory copy on P (eager in sequence), then
//                  cuEventRecordWithFlags(E, P, 2): the driver refuses it
//                  (CUDA_ERROR_INVALID_VALUE, an unknown flag), so E's latest
//                  record stays the one made before the loop (complete); b
//                  waits on E (nothing to wait for), a host-memory copy on b,
//                  then a fork/join step (work on b and P, b's record joined
//                  into P). The host synchronizes b, then opens the gate.
//                  Eagerly b never waits for the gate. A tool that believes
//                  the refused record is E's latest takes b's wait as a fork
//                  from P's latest op and launches the step's graph on P,
//                  behind the gate: b's synchronize never returns.
// refused-wait-fork  (regression check) the same with a valid record of E on P right after the
//                  gate, and b's wait refused (cuStreamWaitEvent flags 4:
//                  CUDA_ERROR_INVALID_VALUE, no wait): b again never waits for
//                  the gate eagerly.
// rerecord-values  E recorded mid-step on s, then again on t (one step, one
//                  graph: the first record superseded); on irregular steps the
//                  second record is left out (a mismatch after E's record on
//                  s was held). The host then asks cuEventQuery(E),
//                  cuStreamQuery(s) and cuStreamQuery(t) between launches and
//                  polls E until complete: a complete answer must mean the
//                  work before E's latest record ran (values read from
//                  device memory at once).
// legacy-record    work on the legacy stream, then a record of E on a blocking
//                  stream d (which completes only after the earlier legacy
//                  work, as measured on an H100), and d's own work; the host
//                  asks cuEventQuery(E) between launches and polls it: a
//                  complete E means the legacy work ran. On irregular steps
//                  the legacy work comes from the step before (the record is
//                  the first op of the step).
// destroyed-stream-record  E recorded mid-step on s; on irregular steps the
//                  program then destroys s (with the record held) and creates
//                  it again (the simulator gives back the same handle); t
//                  waits on E and works; cuEventSynchronize(E) on other
//                  irregular steps, cuStreamSynchronize(t) every step, values
//                  checked.
// destroy-recreate-query  every step creates E, records it mid-step, waits on
//                  it on t, destroys it while graft holds both; a second event
//                  F created right after (a new handle while E's destroy is
//                  deferred, E's handle once it is not) is recorded at the end
//                  of the step and polled until complete; values checked.
//
// legacy-wait-other-context  device 0's context A and device 1's context B;
//                  a non-blocking stream P of A. Each step: in A, a gate
//                  kernel on P, a host-memory copy on P, a record of E on P;
//                  in B, cuStreamWaitEvent(NULL, E) (B's legacy stream waits
//                  for the gate) and a host-memory copy there; in A, a
//                  fork/join step (A's legacy stream and P, the legacy
//                  stream's record joined into P). The host synchronizes A's
//                  legacy stream, then opens the gate. Eagerly A's legacy
//                  stream never waits for the gate (only B's waited on E). A
//                  tool that keeps one "waited on P's latest record" claim
//                  for the legacy stream key of every context launches A's
//                  step on P, behind the gate: the synchronize never returns.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 10, 7); }



// ------------------------------------------------------------------ modes

// refused-record-fork / refused-wait-fork.
void refusedFork(const simtest::DriverApi& cu, CUfunction add, CUfunction gate, int steps, bool refuseWait) {
  CUstream P, b;
  SIM_CHECK(cu.cuStreamCreate(&P, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent E, E2;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&E2, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    z = simtest::zeroedBuffer(cu), hd = simtest::zeroedBuffer(cu), hd2 = simtest::zeroedBuffer(cu);
  void* pinned = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&pinned, 64));
  std::memset(pinned, 0, 64);
  // E's only successful record (refused-record-fork): complete before the loop.
  if (!refuseWait) {
    SIM_CHECK(cu.cuEventRecord(E, P));
    SIM_CHECK(cu.cuStreamSynchronize(P));
  }
  uint64_t hx = 0, hy = 0, hz = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i + 1), P));  // runs once flag >= i + 1
    SIM_CHECK(cu.cuMemcpyHtoDAsync(hd, pinned, 8, P));                       // eager in sequence
    if (refuseWait) {
      SIM_CHECK(cu.cuEventRecord(E, P));  // after the gate
      ++g_provoked;
      expectCode(cu.cuStreamWaitEvent(b, E, 4), CUDA_ERROR_INVALID_VALUE, "cuStreamWaitEvent(b, E, flags 4)", i);
    } else {
      ++g_provoked;
      expectCode(cu.cuEventRecordWithFlags(E, P, 2), CUDA_ERROR_INVALID_VALUE, "cuEventRecordWithFlags(E, P, 2)", i);
      SIM_CHECK(cu.cuStreamWaitEvent(b, E, 0));  // E's record before the loop: complete
    }
    SIM_CHECK(cu.cuMemcpyHtoDAsync(hd2, pinned, 8, b));  // eager in sequence
    // The fork/join step: b's work first, P's, b's record joined into P.
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, b));
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, b));
    hx += 2;
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, P));
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, P));
    hy += 2;
    SIM_CHECK(cu.cuEventRecord(E2, b));
    SIM_CHECK(cu.cuStreamWaitEvent(P, E2, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, z, x, 0, P));  // z = x
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, P));
    hz = hx;
    hy += 1;
    // b's work does not depend on the gate: its synchronize returns with the
    // gate closed. Then the gate opens.
    SIM_CHECK(cu.cuStreamSynchronize(b));
    expectValue(peek(x), hx, "x after synchronizing b (gate closed)", i);
    poke(flag, uint64_t(i + 1));
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(y), hy, "y", i);
    expectValue(peek(z), hz, "z", i);
  }
  SIM_CHECK(cu.cuMemFreeHost(pinned));
}

// rerecord-values: E recorded on s, then on t, in one step.
void rerecordValues(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), ms = simtest::zeroedBuffer(cu), mt = simtest::zeroedBuffer(cu),
                    as = simtest::zeroedBuffer(cu), at = simtest::zeroedBuffer(cu);
  uint64_t has = 0, hat = 0, stale = 0, complete = 0;
  for (int i = 1; i <= steps; ++i) {
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, as, as, 1, s));
    has += 4;
    SIM_CHECK(simtest::launchAdd(cu, add, ms, zero, uint64_t(i), s));  // ms = i
    SIM_CHECK(cu.cuEventRecord(E, s));
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, at, at, 1, t));
    hat += 4;
    SIM_CHECK(simtest::launchAdd(cu, add, mt, zero, uint64_t(i), t));  // mt = i
    const bool odd = irregular(i, 5);
    g_provoked += odd;
    if (!odd) SIM_CHECK(cu.cuEventRecord(E, t));
    // After the second record: s's later work.
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, as, as, 1, s));
    has += 3;
    const CUdeviceptr mark = odd ? ms : mt;  // written before E's latest record
    for (int k = 0; k < 6; ++k) {
      SIM_CHECK(simtest::launchAdd(cu, add, at, at, 1, t));
      ++hat;
      const int which = k % 3;
      const CUresult r = which == 0 ? cu.cuEventQuery(E) : which == 1 ? cu.cuStreamQuery(s) : cu.cuStreamQuery(t);
      if (r == CUDA_SUCCESS) {
        ++complete;
        if (which == 0 && peek(mark) != uint64_t(i) && stale++ < 5)
          std::printf("sim_review5_events: %s: step %d: E complete but its mark is %llu\n", g_mode, i,
                      (unsigned long long)peek(mark));
        if (which == 1 && (peek(as) != has || peek(ms) != uint64_t(i)) && stale++ < 5)
          std::printf("sim_review5_events: %s: step %d: s idle but as=%llu (want %llu)\n", g_mode, i,
                      (unsigned long long)peek(as), (unsigned long long)has);
        if (which == 2 && (peek(at) != hat || peek(mt) != uint64_t(i)) && stale++ < 5)
          std::printf("sim_review5_events: %s: step %d: t idle but at=%llu (want %llu)\n", g_mode, i,
                      (unsigned long long)peek(at), (unsigned long long)hat);
      } else if (r != CUDA_ERROR_NOT_READY) {
        SIM_CHECK(r);
      }
    }
    expectCode(pollUntilDone([&] { return cu.cuEventQuery(E); }), CUDA_SUCCESS, "cuEventQuery(E) polled", i);
    expectValue(peek(mark), uint64_t(i), "the mark before E's latest record, once E completed", i);
    if (i % 5 == 0) {
      expectCode(pollUntilDone([&] { return cu.cuStreamQuery(t); }), CUDA_SUCCESS, "cuStreamQuery(t) polled", i);
      expectValue(peek(at), hat, "at once t is idle", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(as), has, "as", steps);
  expectValue(peek(at), hat, "at", steps);
  g_wrong += int(stale);
  std::printf("sim_review5_events: %s: %llu complete answers\n", g_mode, (unsigned long long)complete);
}

// legacy-record: a record on a blocking stream after legacy-stream work.
void legacyRecord(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream d;
  SIM_CHECK(cu.cuStreamCreate(&d, CU_STREAM_DEFAULT));  // blocking
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), ml = simtest::zeroedBuffer(cu), al = simtest::zeroedBuffer(cu),
                    ad = simtest::zeroedBuffer(cu);
  uint64_t hl = 0, hd = 0, stale = 0, complete = 0;
  uint64_t lastMark = 0;
  for (int i = 1; i <= steps; ++i) {
    const bool odd = irregular(i, 7);
    g_provoked += odd;
    if (!odd) {
      for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, al, al, 1, nullptr));
      hl += 3;
      SIM_CHECK(simtest::launchAdd(cu, add, ml, zero, uint64_t(i), nullptr));  // ml = i on the legacy stream
      lastMark = uint64_t(i);
    }
    SIM_CHECK(cu.cuEventRecord(E, d));  // completes after the legacy work before it
    for (int k = 0; k < 6; ++k) {
      SIM_CHECK(simtest::launchAdd(cu, add, ad, ad, 1, d));
      ++hd;
      if (k % 2) continue;
      const CUresult r = cu.cuEventQuery(E);
      if (r == CUDA_SUCCESS) {
        ++complete;
        if ((peek(ml) != lastMark || peek(al) != hl) && stale++ < 5)
          std::printf("sim_review5_events: %s: step %d: E complete but the legacy mark is %llu (want %llu)\n",
                      g_mode, i, (unsigned long long)peek(ml), (unsigned long long)lastMark);
      } else if (r != CUDA_ERROR_NOT_READY) {
        SIM_CHECK(r);
      }
    }
    expectCode(pollUntilDone([&] { return cu.cuEventQuery(E); }), CUDA_SUCCESS, "cuEventQuery(E) polled", i);
    expectValue(peek(ml), lastMark, "the legacy mark once E completed", i);
    expectValue(peek(al), hl, "the legacy work once E completed", i);
    if (i % 6 == 0) {
      SIM_CHECK(cu.cuStreamSynchronize(d));
      expectValue(peek(ad), hd, "ad", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(ad), hd, "ad", steps);
  g_wrong += int(stale);
  std::printf("sim_review5_events: %s: %llu complete answers\n", g_mode, (unsigned long long)complete);
}

// destroyed-stream-record: E's record held on a stream the program destroys.
void destroyedStreamRecord(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream t;
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < steps; ++i) {
    const bool recreate = irregular(i, 13);
    g_provoked += recreate;
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 4;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, s));  // snap = x
    SIM_CHECK(cu.cuEventRecord(E, s));
    if (recreate) {
      SIM_CHECK(cu.cuStreamDestroy(s));  // its work still runs
      SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    }
    SIM_CHECK(cu.cuStreamWaitEvent(t, E, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap, 0, t));  // y = snap
    hy = hx;
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, t));
    ++hy;
    if (irregular(i, 11)) {
      SIM_CHECK(cu.cuEventSynchronize(E));
      expectValue(peek(x), hx, "x after cuEventSynchronize(E)", i);
      expectValue(peek(snap), hx, "snap after cuEventSynchronize(E)", i);
    }
    SIM_CHECK(cu.cuStreamSynchronize(t));
    expectValue(peek(y), hy, "y", i);
    expectValue(peek(x), hx, "x (before E, which t waited on)", i);
  }
}

// destroy-recreate-query: events destroyed while held, new ones created and polled.
void destroyRecreateQuery(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    snap = simtest::zeroedBuffer(cu), mark = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 1; i <= steps; ++i) {
    CUevent E, F;
    SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, s));
    SIM_CHECK(cu.cuEventRecord(E, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, E, 0));
    SIM_CHECK(cu.cuEventDestroy(E));
    SIM_CHECK(cu.cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
    expectCode(cu.cuEventQuery(F), CUDA_SUCCESS, "cuEventQuery of a new event never recorded", i);
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap, 0, t));
    hy = hx;
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(simtest::launchAdd(cu, add, mark, zero, uint64_t(i), t));
    SIM_CHECK(cu.cuEventRecord(F, t));
    expectCode(pollUntilDone([&] { return cu.cuEventQuery(F); }), CUDA_SUCCESS, "cuEventQuery(F) polled", i);
    expectValue(peek(mark), uint64_t(i), "mark once F completed", i);
    expectValue(peek(y), hy, "y once F completed", i);
    SIM_CHECK(cu.cuEventDestroy(F));
    if (i % 7 == 0) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(x), hx, "x", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), hx, "x", steps);
}

// legacy-wait-other-context: B's legacy stream waits on P's latest record; A's
// legacy stream forks with P without waiting.
void legacyWaitOtherContext(const simtest::DriverApi& cu, CUcontext ctxA, CUfunction add, CUfunction gate,
                            int steps) {
  CUdevice dev1 = 0;
  CUcontext ctxB = nullptr;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&ctxB, dev1) != CUDA_SUCCESS) {
    std::printf("sim_review5_events: no device 1\n");
    std::exit(2);
  }
  CUstream P;
  SIM_CHECK(cu.cuStreamCreate(&P, CU_STREAM_NON_BLOCKING));
  CUevent E, E2;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&E2, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    z = simtest::zeroedBuffer(cu), hd = simtest::zeroedBuffer(cu), hd2 = simtest::zeroedBuffer(cu);
  void* pinned = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&pinned, 64));
  std::memset(pinned, 0, 64);
  uint64_t hx = 0, hy = 0, hz = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i + 1), P));  // runs once flag >= i + 1
    SIM_CHECK(cu.cuMemcpyHtoDAsync(hd, pinned, 8, P));                       // eager in sequence
    SIM_CHECK(cu.cuEventRecord(E, P));                                        // after the gate
    SIM_CHECK(cu.cuCtxSetCurrent(ctxB));
    ++g_provoked;
    SIM_CHECK(cu.cuStreamWaitEvent(nullptr, E, 0));           // B's legacy stream waits for the gate
    SIM_CHECK(cu.cuMemcpyHtoDAsync(hd2, pinned, 8, nullptr));  // eager in sequence, on B's legacy stream
    SIM_CHECK(cu.cuCtxSetCurrent(ctxA));
    // The fork/join step in A: the legacy stream's work first, P's, the
    // legacy stream's record joined into P.
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, nullptr));
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, nullptr));
    hx += 2;
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, P));
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, P));
    hy += 2;
    SIM_CHECK(cu.cuEventRecord(E2, nullptr));
    SIM_CHECK(cu.cuStreamWaitEvent(P, E2, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, z, x, 0, P));  // z = x
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, P));
    hz = hx;
    hy += 1;
    // A's legacy stream does not depend on the gate.
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(x), hx, "x after synchronizing A's legacy stream (gate closed)", i);
    poke(flag, uint64_t(i + 1));
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(y), hy, "y", i);
    expectValue(peek(z), hz, "z", i);
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctxB));
  SIM_CHECK(cu.cuCtxSynchronize());
  SIM_CHECK(cu.cuCtxSetCurrent(ctxA));
  SIM_CHECK(cu.cuMemFreeHost(pinned));
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review5_events", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review5_events", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review5_events");
  CUfunction gate = simtest::libraryKernel3("sim_gate_review5_events");
  if (mode == "refused-record-fork") refusedFork(cu, add, gate, steps, false);
  else if (mode == "refused-wait-fork") refusedFork(cu, add, gate, steps, true);
  else if (mode == "rerecord-values") rerecordValues(cu, add, steps);
  else if (mode == "legacy-record") legacyRecord(cu, add, steps);
  else if (mode == "destroyed-stream-record") destroyedStreamRecord(cu, add, steps);
  else if (mode == "destroy-recreate-query") destroyRecreateQuery(cu, add, steps);
  else if (mode == "legacy-wait-other-context") legacyWaitOtherContext(cu, ctx, add, gate, steps);
  else {
    std::printf("usage: sim_review5_events --mode refused-record-fork|refused-wait-fork|rerecord-values|"
                "legacy-record|destroyed-stream-record|destroy-recreate-query|legacy-wait-other-context [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
