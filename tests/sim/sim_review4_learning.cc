// sim_review4_learning: red-team checks of the learning and matching core
// (review of src/core/period_detector, history, segment, event_instances,
// op.h's sameShape, and engine.cc's tryStart / advance / resolveHeld /
// matchesAt / longestCompleteMatch / launchHeld). One mode per suspected
// divergence from eager behaviour; every mode passes without graft (the
// simulated driver's own answers), and a mode that also passes under graft
// is a regression check:
//   sim_review4_learning --mode MODE [--steps N] [--expect-graphs]
//
// ping-pong-events  a double-buffered pipeline on two streams: step i writes
//                  snap[i%2] on s and records E[i%2]; t waits on E[(i+1)%2]
//                  (the record of the step before: an external wait whose
//                  event alternates) and reads snap[(i+1)%2], then records
//                  F[(i+1)%2], which s waits on before it overwrites that
//                  buffer two steps later. Shapes repeat every step; event
//                  handles and pointers alternate (patched every replay).
// record-twice     one event recorded twice a step, on s after s's work and
//                  on t after t's; on irregular steps a third stream waits on
//                  it after the step and reads what t wrote: the event's
//                  latest record is t's (a graph holding both records must
//                  leave the event with t's).
// wait-then-record t waits on E at the start of the step (E was recorded on s
//                  at the end of the step before) and reads what s wrote
//                  then; s waits for t's read (F) and records E again at the
//                  end of the step: one graph holds a wait on E that binds to
//                  an earlier step and a later record of E.
// legacy-two-contexts  the NULL stream of device 0's and of device 1's
//                  primary context in one step, joined by events both ways
//                  (same stream key, other context: ops must not be matched
//                  across contexts, and each wait must bind to its record).
// swapped-streams  two variants of a step with the same kernels and event ops
//                  on two streams in swapped roles (s produces and t consumes,
//                  or t produces and s consumes), chosen irregularly: both are
//                  learned; each replay must run on its own streams.
// memsets-copies   32-, 16- and 8-bit memsets and device copies with values
//                  and addresses that change every step (double buffers),
//                  handed from s to t through an event: every byte checked.
// short-loop-events  a loop of a few ops and no sync (built unrolled): s
//                  makes a value after waiting for t (F), t copies it after
//                  waiting for s (E); every 50 iterations a third stream waits
//                  on F and reads t's copy: one graph holds many records of
//                  each event, only the last of which is the program's latest.
// refused-record-captured  sim_driver_checks' captured-event-wait with one
//                  refused call more: after the program's capture records
//                  eCap, a cuEventRecordWithFlags of eCap with an unknown flag
//                  (CUDA_ERROR_INVALID_VALUE) leaves eCap's last record in the
//                  capture, so the wait on it at the place of the step's wait
//                  is refused (CUDA_ERROR_CAPTURED_EVENT). graft forgot the
//                  captured record at the refused call (interpose.cc calls
//                  OpEncoder::noteEventRecord before the driver's verdict) and
//                  holds the wait: success.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 10, 7); }

CUcontext device1Context(const simtest::DriverApi& cu) {
  CUdevice dev1 = 0;
  CUcontext c = nullptr;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&c, dev1) != CUDA_SUCCESS) return nullptr;
  return c;
}

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

// ------------------------------------------------------------------ modes

void pingPongEvents(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s = nonBlocking(cu), t = nonBlocking(cu);
  CUevent es[2] = {untimedEvent(cu), untimedEvent(cu)}, ft[2] = {untimedEvent(cu), untimedEvent(cu)};
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), acc = simtest::zeroedBuffer(cu);
  const CUdeviceptr snap[2] = {simtest::zeroedBuffer(cu), simtest::zeroedBuffer(cu)};
  uint64_t hx = 0;
  uint64_t prevSnap = 0;  // snap of the step before (0 before step 0)
  for (int i = 0; i < steps; ++i) {
    const int b = i % 2;
    SIM_CHECK(cu.cuStreamWaitEvent(s, ft[b], 0));  // t read snap[b] (two steps back)
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 3;
    SIM_CHECK(simtest::launchAdd(cu, add, snap[b], x, 0, s));  // snap[b] = x
    SIM_CHECK(cu.cuEventRecord(es[b], s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, es[1 - b], 0));  // the step before's snap
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap[1 - b], 0, t));  // y = snap[1-b]
    SIM_CHECK(simtest::launchAdd(cu, add, acc, acc, 0, t));
    SIM_CHECK(cu.cuEventRecord(ft[1 - b], t));
    SIM_CHECK(cu.cuStreamSynchronize(t));
    expectValue(readWord(cu, y), prevSnap, "y (the step before's snapshot)", i);
    prevSnap = hx;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(readWord(cu, x), hx, "x", steps);
}

void recordTwice(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s = nonBlocking(cu), t = nonBlocking(cu), u = nonBlocking(cu);
  CUevent e = untimedEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 3; ++k) {
      SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, t));
    }
    hx += 3;
    hy += 3;
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuEventRecord(e, t));  // the event's latest record: after t's work
    if (irregular(i, 1)) {
      ++g_provoked;
      SIM_CHECK(cu.cuStreamWaitEvent(u, e, 0));
      SIM_CHECK(simtest::launchAdd(cu, add, z, y, 0, u));  // z = y, after t's work
      SIM_CHECK(cu.cuStreamSynchronize(u));
      expectValue(readWord(cu, z), hy, "z (y after the event's latest record)", i);
    }
    if (irregular(i, 2)) {
      ++g_provoked;
      SIM_CHECK(cu.cuEventSynchronize(e));
      // Device memory is host memory here: read y without a driver call.
      expectValue(*reinterpret_cast<volatile const uint64_t*>(y), hy, "y after cuEventSynchronize", i);
    }
    SIM_CHECK(cu.cuStreamSynchronize(s));
    SIM_CHECK(cu.cuStreamSynchronize(t));
  }
  expectValue(readWord(cu, x), hx, "x", steps);
  expectValue(readWord(cu, y), hy, "y", steps);
}

void waitThenRecord(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s = nonBlocking(cu), t = nonBlocking(cu);
  CUevent e = untimedEvent(cu), f = untimedEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, prev = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));                // E: recorded at the end of the step before
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap, 0, t));  // y = snap (of the step before)
    SIM_CHECK(cu.cuEventRecord(f, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, f, 0));  // s overwrites snap only after t read it
    for (int k = 0; k < 2; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 2;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, s));
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamSynchronize(t));
    expectValue(readWord(cu, y), prev, "y (snap of the step before)", i);
    prev = hx;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(readWord(cu, x), hx, "x", steps);
}

void legacyTwoContexts(const simtest::DriverApi& cu, CUcontext ctx0, CUfunction add, int steps) {
  CUcontext ctx1 = device1Context(cu);
  if (!ctx1) {
    std::printf("sim_review4_learning: no device 1\n");
    std::exit(2);
  }
  CUevent e0 = untimedEvent(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  CUevent e1 = untimedEvent(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    // Device 0's legacy stream.
    for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, nullptr));
    hx += 3;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, nullptr));
    SIM_CHECK(cu.cuEventRecord(e0, nullptr));
    // Device 1's legacy stream: after device 0's snap.
    SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
    SIM_CHECK(cu.cuStreamWaitEvent(nullptr, e0, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap, 1, nullptr));  // y = snap + 1
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, nullptr));     // y = snap + 2
    SIM_CHECK(cu.cuEventRecord(e1, nullptr));
    // Device 0's legacy stream again: after device 1's y.
    SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
    SIM_CHECK(cu.cuStreamWaitEvent(nullptr, e1, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, w, y, 1, nullptr));  // w = y + 1
    SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, nullptr));  // w = y + 2
    SIM_CHECK(cu.cuCtxSynchronize());                           // device 0 (it waited for device 1's y)
    expectValue(readWord(cu, w), hx + 4, "w (device 0, after device 1)", i);
    expectValue(readWord(cu, y), hx + 2, "y (device 1)", i);
  }
}

void swappedStreams(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s = nonBlocking(cu), t = nonBlocking(cu);
  CUevent e = untimedEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                    snap = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    const bool swap = irregularStep(i, 4, 0, 3);
    g_provoked += swap;
    CUstream producer = swap ? t : s, consumer = swap ? s : t;
    for (int k = 0; k < 4; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, producer));
    hx += 4;
    SIM_CHECK(simtest::launchAdd(cu, add, snap, x, 0, producer));  // snap = x
    SIM_CHECK(cu.cuEventRecord(e, producer));
    SIM_CHECK(cu.cuStreamWaitEvent(consumer, e, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, snap, 0, consumer));  // y = snap
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 1, consumer));     // z = snap + 1
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, producer));     // after the record (snap keeps the value)
    SIM_CHECK(cu.cuStreamSynchronize(consumer));
    expectValue(readWord(cu, y), hx, "y (x at the record)", i);
    expectValue(readWord(cu, z), hx + 1, "z", i);
    SIM_CHECK(cu.cuStreamSynchronize(producer));
    hx += 1;
    expectValue(readWord(cu, x), hx, "x", i);
  }
}

void memsetsCopies(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s = nonBlocking(cu), t = nonBlocking(cu);
  CUevent e = untimedEvent(cu), f = untimedEvent(cu);
  constexpr size_t kBytes = 64;
  CUdeviceptr a[2] = {simtest::zeroedBuffer(cu, kBytes), simtest::zeroedBuffer(cu, kBytes)};
  CUdeviceptr out[2] = {simtest::zeroedBuffer(cu, kBytes), simtest::zeroedBuffer(cu, kBytes)};
  const CUdeviceptr mark = simtest::zeroedBuffer(cu), copyMark = simtest::zeroedBuffer(cu);
  for (int i = 0; i < steps; ++i) {
    const int b = i % 2;
    const uint32_t v32 = 0x01000000u * uint32_t(i % 200) + uint32_t(i), v16 = uint32_t(i * 7) & 0xffff,
                   v8 = uint32_t(i * 13 + 1) & 0xff;
    SIM_CHECK(cu.cuStreamWaitEvent(s, f, 0));  // t is done with the buffers of the step before
    SIM_CHECK(cu.cuMemsetD32Async(a[b], v32, 8, s));            // bytes 0..31
    SIM_CHECK(cu.cuMemsetD16Async(a[b] + 32, (unsigned short)v16, 8, s));  // bytes 32..47
    SIM_CHECK(cu.cuMemsetD8Async(a[b] + 48, (unsigned char)v8, 16, s));    // bytes 48..63
    SIM_CHECK(simtest::launchAdd(cu, add, mark, mark, 1, s));
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(cu.cuMemcpyDtoDAsync(out[b], a[b], kBytes, t));
    SIM_CHECK(simtest::launchAdd(cu, add, copyMark, copyMark, 1, t));
    SIM_CHECK(cu.cuEventRecord(f, t));
    SIM_CHECK(cu.cuStreamSynchronize(t));
    unsigned char bytes[kBytes];
    SIM_CHECK(cu.cuMemcpyDtoH(bytes, out[b], kBytes));
    unsigned char want[kBytes];
    for (int k = 0; k < 8; ++k) std::memcpy(want + 4 * k, &v32, 4);
    for (int k = 0; k < 8; ++k) {
      const uint16_t h = uint16_t(v16);
      std::memcpy(want + 32 + 2 * k, &h, 2);
    }
    std::memset(want + 48, int(v8), 16);
    for (size_t k = 0; k < kBytes; ++k) {
      if (bytes[k] != want[k]) {
        expectValue(bytes[k], want[k], "a copied byte", i);
        break;
      }
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(readWord(cu, mark), uint64_t(steps), "mark", steps);
  expectValue(readWord(cu, copyMark), uint64_t(steps), "copyMark", steps);
}

void shortLoopEvents(const simtest::DriverApi& cu, CUfunction add, int steps) {
  // A loop of a few ops and no sync (built unrolled): s makes a value, t
  // waits for it and copies it, s waits for t before the next; a third
  // stream waits on the last record of s after every 50 iterations.
  CUstream s = nonBlocking(cu), t = nonBlocking(cu), u = nonBlocking(cu);
  CUevent e = untimedEvent(cu), f = untimedEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps * 4; ++i) {
    SIM_CHECK(cu.cuStreamWaitEvent(s, f, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));  // x = y + 1
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 0, t));  // y = x
    SIM_CHECK(cu.cuEventRecord(f, t));
    hx += 1;
    if (i % 50 == 49) {
      SIM_CHECK(cu.cuStreamWaitEvent(u, f, 0));
      SIM_CHECK(simtest::launchAdd(cu, add, z, y, 0, u));
      SIM_CHECK(cu.cuStreamSynchronize(u));
      expectValue(readWord(cu, z), hx, "z (y after the last iteration)", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(readWord(cu, x), hx, "x", steps);
}


void refusedRecordCaptured(const simtest::DriverApi& cu, CUfunction add, int steps) {
  // As sim_driver_checks' captured-event-wait, with one refused call more:
  // after the capture that records eCap, a record of eCap that the driver
  // refuses (an unknown flag: CUDA_ERROR_INVALID_VALUE) changes nothing, so
  // eCap's last record is still the captured one and the wait naming it is
  // refused (CUDA_ERROR_CAPTURED_EVENT). A tool that forgets "last recorded
  // in a capture" at any record call, refused or not, holds that wait.
  CUstream s = nonBlocking(cu), s2 = nonBlocking(cu), s3 = nonBlocking(cu);
  CUevent eStep = untimedEvent(cu), eCap = untimedEvent(cu), eBack = untimedEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    const bool captured = irregular(i, 16);
    if (captured) {  // a kernel and a record of eCap, captured and thrown away
      SIM_CHECK(cu.cuStreamBeginCapture(s3, CU_STREAM_CAPTURE_MODE_RELAXED));
      SIM_CHECK(simtest::launchAdd(cu, add, z, z, 1, s3));
      SIM_CHECK(cu.cuEventRecord(eCap, s3));
      CUgraph g = nullptr;
      SIM_CHECK(cu.cuStreamEndCapture(s3, &g));
      SIM_CHECK(cu.cuGraphDestroy(g));
      // 0x4: no flag of cuEventRecordWithFlags (CU_EVENT_RECORD_EXTERNAL is 0x1).
      expectCode(cu.cuEventRecordWithFlags(eCap, s3, 0x4), CUDA_ERROR_INVALID_VALUE,
                 "cuEventRecordWithFlags with an unknown flag", i);
    }
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, uint64_t(i), s));  // y = x + i
    SIM_CHECK(cu.cuEventRecord(eStep, s));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    if (captured) {
      expectCode(cu.cuStreamWaitEvent(s2, eCap, 0), CUDA_ERROR_CAPTURED_EVENT,
                 "cuStreamWaitEvent on an event last recorded in a capture (a later record refused)", i);
      ++g_provoked;
    } else {
      SIM_CHECK(cu.cuStreamWaitEvent(s2, eStep, 0));
    }
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s2));  // x = y + 1
    SIM_CHECK(cu.cuEventRecord(eBack, s2));
    SIM_CHECK(cu.cuStreamWaitEvent(s, eBack, 0));
    hy = hx + uint64_t(i), hx = hy + 1;
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(readWord(cu, x), hx, "x", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(readWord(cu, z), 0, "z (written only by captured kernels)", steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review4_learning", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review4_learning", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review4_learning");
  if (mode == "ping-pong-events") pingPongEvents(cu, add, steps);
  else if (mode == "record-twice") recordTwice(cu, add, steps);
  else if (mode == "wait-then-record") waitThenRecord(cu, add, steps);
  else if (mode == "legacy-two-contexts") legacyTwoContexts(cu, ctx, add, steps);
  else if (mode == "swapped-streams") swappedStreams(cu, add, steps);
  else if (mode == "memsets-copies") memsetsCopies(cu, add, steps);
  else if (mode == "short-loop-events") shortLoopEvents(cu, add, steps);
  else if (mode == "refused-record-captured") refusedRecordCaptured(cu, add, steps);
  else {
    std::printf("usage: sim_review4_learning --mode ping-pong-events|record-twice|wait-then-record|"
                "legacy-two-contexts|swapped-streams|memsets-copies|short-loop-events|refused-record-captured "
                "[--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
