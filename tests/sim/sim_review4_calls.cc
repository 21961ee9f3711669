// sim_review4_calls: red-team review of the driver calls that are not kernel
// launches (src/hook/driver_api.def's classes, src/hook/interpose.cc,
// src/hook/generic_forward.cc): calls made in a loop graft replays, between
// ops graft holds, whose outcome eagerly depends on the work issued before
// them. Every return code and value must be the simulated driver's, eagerly
// and under graft:
//   sim_review4_calls --mode MODE [--steps N] [--expect-graphs]
//
// capture-global-own  the program's own CU_STREAM_CAPTURE_MODE_GLOBAL capture
//                of another stream begun between held launches, the step's
//                launches going on outside it, capture queries of both
//                streams and the legacy stream (regression check).
// own-graph-mid-step  the program's own graph (a kernel and an external
//                event record node) launched mid-step; another stream waits
//                on that event (regression check).
// host-func-values  host functions on two streams between replayed kernels
//                read device memory (regression check).
// sync-ops-legacy  synchronous copies and memsets on the legacy stream in
//                the middle of a replayed loop on a blocking stream
//                (regression check).
// ctx-push-pop   cuCtxPushCurrent / cuCtxPopCurrent of another device's
//                context between held legacy-stream launches, with queries,
//                limits and a synchronize there (regression check).
// alloc-blocking-query  cuMemAllocAsync on a blocking stream between held
//                legacy-stream launches, then a poll of that stream: FAILS
//                under graft (the allocation reaches the driver ahead of the
//                held launches; see the function for the caveat).
// coop-mixed     cooperative and plain launches of one kernel at one place
//                of a replayed step (regression check).
// captured-refused-record  an event last recorded in a program's capture,
//                then a refused record of it, then a wait at a place graft
//                holds: FAILS under graft (the refused record cleared
//                graft's note that the event's last record is a captured
//                one, so the wait was held and returned success).
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 10, 7); }


struct Kit {
  const simtest::Driver* drv;
  const simtest::DriverApi* cu;
  CUfunction add;
  CUresult add1(CUdeviceptr to, CUdeviceptr from, uint64_t k, CUstream s) const {
    return simtest::launchAdd(*cu, add, to, from, k, s);
  }
};

}  // namespace

// ------------------------------------------------------------------ modes
namespace {

// capture-global-own: a one-stream loop (s) graft replays; on irregular
// steps the program, between the step's launches on s (held by a replay),
// begins its own capture of stream c in CU_STREAM_CAPTURE_MODE_GLOBAL, makes
// the rest of the step's launches on s (not captured: allowed), asks
// cuStreamIsCapturing / cuStreamGetCaptureInfo of s, c and the legacy stream
// (c is non-blocking: the legacy stream's answer is NONE), ends the capture,
// launches its graph on c and synchronizes. Values and answers checked.
void captureGlobalOwn(const Kit& k, int steps) {
  const simtest::DriverApi& cu = *k.cu;
  CUstream s, c;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
  CUevent ev;
  SIM_CHECK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hz = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 4; ++j) SIM_CHECK(k.add1(x, x, 1, s));
    hx += 4;
    SIM_CHECK(k.add1(snap, x, 0, s));
    SIM_CHECK(cu.cuEventRecord(ev, s));
    const bool odd = irregular(i, 1);
    CUgraph g = nullptr;
    if (odd) {
      ++g_provoked;
      SIM_CHECK(cu.cuStreamWaitEvent(c, ev, 0));  // before the capture: the graph's launch follows it
      SIM_CHECK(cu.cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_GLOBAL));
      SIM_CHECK(k.add1(z, snap, 10, c));  // z = snap + 10, in the program's graph
    }
    for (int j = 0; j < 4; ++j) SIM_CHECK(k.add1(x, x, 1, s));
    hx += 4;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    expectCode(cu.cuStreamIsCapturing(s, &st), CUDA_SUCCESS, "cuStreamIsCapturing(s)", i);
    expectValue(st, CU_STREAM_CAPTURE_STATUS_NONE, "s's capture status", i);
    st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    expectCode(cu.cuStreamIsCapturing(c, &st), CUDA_SUCCESS, "cuStreamIsCapturing(c)", i);
    expectValue(st, odd ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE, "c's capture status", i);
    st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    expectCode(cu.cuStreamIsCapturing(nullptr, &st), CUDA_SUCCESS, "cuStreamIsCapturing(legacy)", i);
    expectValue(st, CU_STREAM_CAPTURE_STATUS_NONE, "the legacy stream's capture status", i);
    cuuint64_t id = 0;
    size_t numDeps = 99;
    st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    expectCode(cu.cuStreamGetCaptureInfo(s, &st, &id, nullptr, nullptr, nullptr, &numDeps), CUDA_SUCCESS,
               "cuStreamGetCaptureInfo(s)", i);
    expectValue(st, CU_STREAM_CAPTURE_STATUS_NONE, "s's capture info status", i);
    if (odd) {
      numDeps = 99;
      expectCode(cu.cuStreamGetCaptureInfo(c, &st, &id, nullptr, nullptr, nullptr, &numDeps), CUDA_SUCCESS,
                 "cuStreamGetCaptureInfo(c)", i);
      expectValue(st, CU_STREAM_CAPTURE_STATUS_ACTIVE, "c's capture info status", i);
      expectValue(numDeps, 1, "c's capture dependencies", i);
      SIM_CHECK(cu.cuStreamEndCapture(c, &g));
      CUgraphExec ge = nullptr;
      SIM_CHECK(cu.cuGraphInstantiateWithFlags(&ge, g, 0));
      SIM_CHECK(cu.cuGraphLaunch(ge, c));
      hz = hx - 4 + 10;
      SIM_CHECK(cu.cuStreamSynchronize(c));
      expectValue(readWord(cu, z), hz, "z (the program's graph)", i);
      SIM_CHECK(cu.cuGraphExecDestroy(ge));
      SIM_CHECK(cu.cuGraphDestroy(g));
    }
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(readWord(cu, x), hx, "x", i);
  }
}

// own-graph-mid-step: the program's own graph (captured once before the
// loop on c: y = x + 100, then an external event record node of E) is
// launched in the middle of every step on s, between kernels graft replays;
// stream t waits on E (recorded by the graph's node) and copies y; on
// irregular steps the program also records E itself on s right before the
// graph (the graph's record must still be the one t waits for).
void ownGraphMidStep(const Kit& k, int steps) {
  const simtest::DriverApi& cu = *k.cu;
  CUstream s, t, c;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  CUgraph g = nullptr;
  CUgraphExec ge = nullptr;
  SIM_CHECK(cu.cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
  SIM_CHECK(k.add1(y, x, 100, c));
  SIM_CHECK(cu.cuEventRecordWithFlags(e, c, CU_EVENT_RECORD_EXTERNAL));
  SIM_CHECK(cu.cuStreamEndCapture(c, &g));
  SIM_CHECK(cu.cuGraphInstantiateWithFlags(&ge, g, 0));
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 3; ++j) SIM_CHECK(k.add1(x, x, 1, s));
    hx += 3;
    if (irregular(i, 2)) {
      ++g_provoked;
      SIM_CHECK(cu.cuEventRecord(e, s));
    }
    SIM_CHECK(cu.cuGraphLaunch(ge, s));  // y = x + 100, then E
    const uint64_t hy = hx + 100;
    for (int j = 0; j < 3; ++j) SIM_CHECK(k.add1(x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(k.add1(w, y, 0, t));  // w = y (after the graph's record)
    SIM_CHECK(cu.cuStreamSynchronize(t));
    expectValue(readWord(cu, w), hy, "w (y after the program's graph)", i);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(readWord(cu, x), hx, "x", i);
  }
  SIM_CHECK(cu.cuGraphExecDestroy(ge));
  SIM_CHECK(cu.cuGraphDestroy(g));
}

// Host functions: what each one saw, written by the host function itself.
struct HostLog {
  CUdeviceptr src = 0;
  std::vector<uint64_t> seen;
};
void CUDA_CB logValue(void* p) {
  auto* log = static_cast<HostLog*>(p);
  log->seen.push_back(peek(log->src));
}

// host-func-values: every step kernels on s compute x; a host function on s
// reads x (device memory is host memory in the simulator); s records E, t
// waits on E and a host function on t reads x again; more kernels follow.
// What each host function saw must be the value of x at its place.
void hostFuncValues(const Kit& k, int steps) {
  const simtest::DriverApi& cu = *k.cu;
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  HostLog onS, onT;
  onS.src = x;
  onT.src = y;
  std::vector<uint64_t> wantS, wantT;
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 3; ++j) SIM_CHECK(k.add1(x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuLaunchHostFunc(s, logValue, &onS));
    wantS.push_back(hx);
    SIM_CHECK(k.add1(y, x, 0, s));  // y = x
    SIM_CHECK(cu.cuEventRecord(e, s));
    for (int j = 0; j < 3; ++j) SIM_CHECK(k.add1(x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(cu.cuLaunchHostFunc(t, logValue, &onT));
    wantT.push_back(hx - 3);
    if (i % 5 == 4 || i == steps - 1) SIM_CHECK(cu.cuCtxSynchronize());
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(onS.seen.size(), wantS.size(), "host functions run on s", steps);
  expectValue(onT.seen.size(), wantT.size(), "host functions run on t", steps);
  for (size_t i = 0; i < wantS.size() && i < onS.seen.size(); ++i)
    expectValue(onS.seen[i], wantS[i], "x seen by s's host function", int(i));
  // (t's host function runs after E: y holds that step's x at least; a later
  // step's copy may have changed y meanwhile only after t's function ran.)
  for (size_t i = 0; i < wantT.size() && i < onT.seen.size(); ++i)
    if (onT.seen[i] < wantT[i]) expectValue(onT.seen[i], wantT[i], "y seen by t's host function (at least)", int(i));
}

// sync-ops-legacy: a loop on a blocking stream b (replayed); in the middle
// of every step (kernels held), a synchronous cuMemcpyDtoH of x (legacy
// stream: it waits for b's earlier work), then a synchronous cuMemsetD32 of
// m on the legacy stream, which b's later kernels read (they follow it
// implicitly), and on irregular steps a cuMemcpy (unified, synchronous) of x
// into a second buffer and a cuMemcpyHtoD of a host value into k that b's
// next kernel reads.
void syncOpsLegacy(const Kit& k, int steps) {
  const simtest::DriverApi& cu = *k.cu;
  CUstream b;
  SIM_CHECK(cu.cuStreamCreate(&b, 0));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), m = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    x2 = simtest::zeroedBuffer(cu), kk = simtest::zeroedBuffer(cu), v = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 4; ++j) SIM_CHECK(k.add1(x, x, 1, b));
    hx += 4;
    uint64_t seen = 0;
    expectCode(cu.cuMemcpyDtoH(&seen, x, 8), CUDA_SUCCESS, "cuMemcpyDtoH", i);
    expectValue(seen, hx, "x read by a synchronous copy", i);
    expectCode(cu.cuMemsetD32(m, unsigned(i + 1), 2), CUDA_SUCCESS, "cuMemsetD32", i);
    SIM_CHECK(k.add1(y, m, 0, b));  // y = m (after the legacy memset)
    const bool odd = irregular(i, 4);
    if (odd) {
      ++g_provoked;
      expectCode(cu.cuMemcpy(x2, x, 8), CUDA_SUCCESS, "cuMemcpy", i);
      const uint64_t hk = 1000 + i;
      expectCode(cu.cuMemcpyHtoD(kk, &hk, 8), CUDA_SUCCESS, "cuMemcpyHtoD", i);
      SIM_CHECK(k.add1(v, kk, 0, b));  // v = kk
    }
    for (int j = 0; j < 4; ++j) SIM_CHECK(k.add1(x, x, 1, b));
    hx += 4;
    SIM_CHECK(cu.cuStreamSynchronize(b));
    const uint64_t m64 = (uint64_t(i + 1) << 32) | uint64_t(i + 1);
    expectValue(readWord(cu, y), m64, "y (m after the synchronous memset)", i);
    expectValue(readWord(cu, x), hx, "x", i);
    if (odd) {
      expectValue(readWord(cu, x2), hx - 4, "x2 (cuMemcpy of x)", i);
      expectValue(readWord(cu, v), 1000 + uint64_t(i), "v (kk after cuMemcpyHtoD)", i);
    }
  }
}

// ctx-push-pop: a loop on the legacy stream of context A (device 0); in the
// middle of every step (A's launches held) the program pushes device 1's
// context B, launches on B's legacy stream, asks cuStreamQuery(NULL) (B's:
// nothing of A's counts), synchronizes B (cuCtxSynchronize waits for B only),
// pops back to A and goes on; on irregular steps it also asks cuCtxGetLimit
// and cuStreamIsCapturing(NULL) while B is current.
void ctxPushPop(const Kit& k, CUcontext ctxA, int steps) {
  const simtest::DriverApi& cu = *k.cu;
  CUfunction push = nullptr, pop = nullptr;
  if (!simtest::lookupProc(*k.drv, "cuCtxPushCurrent", &push) || !simtest::lookupProc(*k.drv, "cuCtxPopCurrent", &pop))
    std::exit(2);
  auto pushFn = reinterpret_cast<decltype(&::cuCtxPushCurrent)>(push);
  auto popFn = reinterpret_cast<decltype(&::cuCtxPopCurrent)>(pop);
  CUdevice dev1 = 0;
  CUcontext ctxB = nullptr;
  SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctxB, dev1));
  SIM_CHECK(cu.cuCtxSetCurrent(ctxA));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), xb = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hb = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 4; ++j) SIM_CHECK(k.add1(x, x, 1, nullptr));
    hx += 4;
    SIM_CHECK(pushFn(ctxB));
    SIM_CHECK(k.add1(xb, xb, 1, nullptr));
    ++hb;
    const CUresult q = cu.cuStreamQuery(nullptr);
    if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY) expectCode(q, CUDA_SUCCESS, "cuStreamQuery(B's legacy)", i);
    if (irregular(i, 5)) {
      ++g_provoked;
      size_t limit = 0;
      expectCode(cu.cuCtxGetLimit(&limit, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS, "cuCtxGetLimit in B", i);
      CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
      expectCode(cu.cuStreamIsCapturing(nullptr, &st), CUDA_SUCCESS, "cuStreamIsCapturing(B's legacy)", i);
      expectValue(st, CU_STREAM_CAPTURE_STATUS_NONE, "B's legacy capture status", i);
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(xb), hb, "xb (B's work after B's synchronize)", i);
    CUcontext popped = nullptr;
    SIM_CHECK(popFn(&popped));
    expectValue(reinterpret_cast<uint64_t>(popped), reinterpret_cast<uint64_t>(ctxB), "the popped context", i);
    SIM_CHECK(k.add1(snap, x, 0, nullptr));
    for (int j = 0; j < 4; ++j) SIM_CHECK(k.add1(x, x, 1, nullptr));
    hx += 4;
    if (i % 3 == 2 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(x), hx, "x", i);
      expectValue(peek(snap), hx - 4, "snap", i);
    }
  }
}

// alloc-blocking-query: a loop on the legacy stream; in the middle of every
// step (its launches held) the program allocates on a blocking stream b
// (cuMemAllocAsync: stream-ordered, so b's queue now follows the legacy
// stream's earlier work), then polls cuStreamQuery(b) until it is ready and
// reads x (host-visible here) without another call: eagerly b can only be
// ready once the legacy stream's earlier kernels ran. The block is freed on b.
// Caveat: this holds where a stream-ordered allocation is work in its stream
// that follows the legacy stream implicitly (the simulator's model); whether
// the real driver enqueues anything for an allocation that reuses no memory
// is not known (not measured on a GPU).
void allocBlockingQuery(const Kit& k, int steps) {
  const simtest::DriverApi& cu = *k.cu;
  CUstream b;
  SIM_CHECK(cu.cuStreamCreate(&b, 0));
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 4; ++j) SIM_CHECK(k.add1(x, x, 1, nullptr));
    hx += 4;
    CUdeviceptr p = 0;
    ++g_provoked;
    SIM_CHECK(cu.cuMemAllocAsync(&p, 64, b));
    CUresult q;
    int polls = 0;
    while ((q = cu.cuStreamQuery(b)) == CUDA_ERROR_NOT_READY && polls < 1000000) ++polls;
    expectCode(q, CUDA_SUCCESS, "cuStreamQuery(b)", i);
    expectValue(peek(x), hx, "x once b (after the legacy stream's kernels) is idle", i);
    SIM_CHECK(cu.cuMemFreeAsync(p, b));
    for (int j = 0; j < 4; ++j) SIM_CHECK(k.add1(x, x, 1, nullptr));
    hx += 4;
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(readWord(cu, x), hx, "x", i);
  }
}

// coop-mixed: a one-stream loop whose third launch is cooperative
// (cuLaunchCooperativeKernel) on regular steps and plain (cuLaunchKernel)
// on irregular ones, same kernel and shape: the executed launches must carry
// the cooperative attribute exactly where the program asked for it.
void coopMixed(const Kit& k, int steps) {
  const simtest::DriverApi& cu = *k.cu;
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  std::vector<bool> wantCoop;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 6; ++j) {
      CUdeviceptr to = x, from = x;
      uint64_t one = 1;
      void* args[] = {&to, &from, &one};
      const bool coop = j == 2 && !irregular(i, 6);
      if (j == 2 && !coop) ++g_provoked;
      SIM_CHECK(coop ? cu.cuLaunchCooperativeKernel(k.add, 1, 1, 1, 1, 1, 1, 0, s, args)
                     : cu.cuLaunchKernel(k.add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      wantCoop.push_back(coop);
      ++hx;
    }
    SIM_CHECK(cu.cuStreamSynchronize(s));
  }
  expectValue(readWord(cu, x), hx, "x", steps);
  size_t n = 0;
  for (size_t i = 0; i < simTraceSize(); ++i) {
    SimEffect e;
    if (simTraceGet(i, &e) != 0 || e.kind != SIM_EFFECT_KERNEL || e.func != k.add) continue;
    bool coop = false;
    for (unsigned a = 0; a < e.numAttrs; ++a)
      if (e.attrs[a].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && e.attrs[a].value.cooperative) coop = true;
    if (n < wantCoop.size() && coop != wantCoop[n]) expectValue(coop, wantCoop[n], "a launch's cooperative attribute", int(n / 6));
    ++n;
  }
  expectValue(n, wantCoop.size(), "launches executed", steps);
}


// captured-refused-record: a two-stream loop: s computes x, snap = x and
// records E, then synchronizes (a segment boundary); t waits on E and copies
// snap. On irregular steps, between the synchronize and t's wait, the
// program captures c (relaxed) with one record of E on it and throws the
// graph away, so E's last record is a captured one; then it tries to record
// E again with an invalid flag (cuEventRecordWithFlags(E, s, 0x4): refused,
// CUDA_ERROR_INVALID_VALUE, nothing recorded). t's wait on E must then be
// refused: CUDA_ERROR_CAPTURED_EVENT (cuda.h: an event last recorded in a
// capture cannot be waited on outside it).
void capturedRefusedRecord(const Kit& k, int steps) {
  const simtest::DriverApi& cu = *k.cu;
  CUstream s, t, c;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), snap = simtest::zeroedBuffer(cu),
                    scratch = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 3; ++j) SIM_CHECK(k.add1(x, x, 1, s));
    hx += 3;
    SIM_CHECK(k.add1(snap, x, 0, s));
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    const bool odd = irregular(i, 7);
    if (odd) {
      ++g_provoked;
      CUgraph g = nullptr;
      SIM_CHECK(cu.cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED));
      SIM_CHECK(k.add1(scratch, scratch, 1, c));
      SIM_CHECK(cu.cuEventRecord(e, c));
      SIM_CHECK(cu.cuStreamEndCapture(c, &g));
      SIM_CHECK(cu.cuGraphDestroy(g));
      expectCode(cu.cuEventRecordWithFlags(e, s, 0x4), CUDA_ERROR_INVALID_VALUE,
                 "cuEventRecordWithFlags with an invalid flag", i);
    }
    expectCode(cu.cuStreamWaitEvent(t, e, 0), odd ? CUDA_ERROR_CAPTURED_EVENT : CUDA_SUCCESS,
               odd ? "cuStreamWaitEvent on an event last recorded in a capture" : "cuStreamWaitEvent", i);
    SIM_CHECK(k.add1(y, snap, 0, t));  // y = snap
    for (int j = 0; j < 3; ++j) SIM_CHECK(k.add1(x, x, 1, s));
    hx += 3;
    SIM_CHECK(cu.cuStreamSynchronize(t));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(readWord(cu, y), hx - 3, "y", i);
    expectValue(readWord(cu, x), hx, "x", i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review4_calls", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review4_calls", &drv, &ctx)) return rc;
  Kit k{&drv, &drv.plain, simtest::libraryKernel3("sim_add_review4")};
  if (mode == "capture-global-own") captureGlobalOwn(k, steps);
  else if (mode == "own-graph-mid-step") ownGraphMidStep(k, steps);
  else if (mode == "host-func-values") hostFuncValues(k, steps);
  else if (mode == "sync-ops-legacy") syncOpsLegacy(k, steps);
  else if (mode == "ctx-push-pop") ctxPushPop(k, ctx, steps);
  else if (mode == "alloc-blocking-query") allocBlockingQuery(k, steps);
  else if (mode == "coop-mixed") coopMixed(k, steps);
  else if (mode == "captured-refused-record") capturedRefusedRecord(k, steps);
  else {
    std::printf("usage: sim_review4_calls --mode capture-global-own|own-graph-mid-step|host-func-values|"
                "sync-ops-legacy|ctx-push-pop|alloc-blocking-query|coop-mixed|captured-refused-record [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
