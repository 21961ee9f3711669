// sim_review_hook: a red-team review of graft's hook and encoding layers
// (src/hook/interpose.cc, src/graph/op_codec.cc, src/graph/kernel_registry.cc):
// calls made in a loop graft replays whose outcome eagerly differs from what
// a tool holding them would give. Every return code and value must be the
// simulated driver's, eagerly and under graft:
//   sim_review_hook --mode MODE [--steps N] [--expect-graphs]
//
// event-other-context  every step a kernel on stream S (the program's
//                context, device 0), then an event record on S of the step's
//                event, a cross-stream wait on it and a kernel on T; on
//                irregular steps the record names an event created in device
//                1's primary context instead (on S, or on the legacy stream of
//                the current context on other steps): CUDA forbids a record
//                of an event on a stream of another context
//                (CUDA_ERROR_INVALID_HANDLE, "event and stream must be on the
//                same context"); the program then records the right event. A
//                tool that holds the record returns success.
// event-no-context  as above, but on irregular steps the record (or the
//                wait) is made with no context current (cuCtxSetCurrent(NULL)),
//                which the simulator refuses (CUDA_ERROR_INVALID_CONTEXT);
//                the program then makes it again with its context. (Whether
//                the real driver refuses a record or a wait on a created
//                stream with no context current is not known: the GPU trap
//                traps_threads2 no_context_calls makes the same calls and was
//                EQUAL on an H100, so the real driver may take them.)
// query-no-context  kernels held on a created stream; on irregular steps
//                cuStreamQuery of that stream and cuEventQuery of an event
//                recorded on it, with no context current: the simulator
//                refuses both (CUDA_ERROR_INVALID_CONTEXT). (As above: not
//                known for the real driver.)
// wide-kernel    a kernel of 4100 parameters (3 of 8 bytes, 4097 of 4: 16412
//                bytes, under CUDA 12.1's 32764-byte limit) whose last
//                parameters change every step: the executed launches must
//                carry the parameter bytes the program gave (the executed
//                trace's parameter bytes are checked). graft learns only the
//                first 4096 parameters (kernel_registry.cc's lookup loop) and
//                re-issues the launch into its capture with a 4096-entry
//                parameter array, which the driver reads past; the simulator
//                happens to find NULL there and refuses the capture, so the
//                kernel runs eagerly (not registered as a test: it passes on
//                an out-of-bounds read).
// copy-other-context  device copies and memsets on a stream of device 1's
//                context issued while device 0's context is current (allowed:
//                they run in the stream's context), between kernels on that
//                stream issued with device 1's context current: values and
//                codes as eagerly. (A regression check.)
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
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

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 8, 9); }

void checkWord(const simtest::DriverApi& cu, CUstream s, CUdeviceptr p, uint64_t want, const char* what, int step) {
  SIM_CHECK(cu.cuStreamSynchronize(s));
  expectValue(readWord(cu, p), want, what, step);
}

// Device 1's primary context, retained (device 0's stays current).
CUcontext secondContext(const simtest::DriverApi& cu, CUcontext ctx0) {
  CUdevice dev1 = 0;
  CUcontext ctx1 = nullptr;
  SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx1, dev1));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  return ctx1;
}

// ------------------------------------------------------------------ modes

// A chain of kernels long enough for a graph of its own (32 ops or more a step).
void chain(const simtest::DriverApi& cu, CUfunction add, CUdeviceptr w, CUstream s, int n, uint64_t* hw) {
  for (int k = 0; k < n; ++k) SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
  *hw += uint64_t(n);
}

void eventOtherContext(const simtest::DriverApi& cu, CUcontext ctx0, CUfunction add, int steps) {
  const CUcontext ctx1 = secondContext(cu, ctx0);
  CUevent foreign = nullptr;  // an event of device 1's context
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  SIM_CHECK(cu.cuEventCreate(&foreign, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent e, back;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&back, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu),
                    c = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0, hc = 0;
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, uint64_t(i), s));  // y = x + i
    hy = hx + uint64_t(i);
    const bool odd = irregular(i, 1);
    expectCode(cu.cuEventRecord(odd ? foreign : e, s), odd ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS,
               odd ? "cuEventRecord of another context's event on a stream" : "cuEventRecord", i);
    if (odd) SIM_CHECK(cu.cuEventRecord(e, s));  // the program's retry, as it would after the error
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    chain(cu, add, w, t, 0, &hw);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, t));  // x = y + 1
    hx = hy + 1;
    SIM_CHECK(cu.cuEventRecord(back, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, back, 0));
    // The legacy stream of the current context: its own buffer and event.
    SIM_CHECK(simtest::launchAdd(cu, add, c, c, 2, nullptr));
    hc += 2;
    const bool oddLegacy = irregular(i, 2);
    expectCode(cu.cuEventRecord(oddLegacy ? foreign : e, nullptr),
               oddLegacy ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS,
               oddLegacy ? "cuEventRecord of another context's event on the legacy stream" : "cuEventRecord(NULL)",
               i);
    SIM_CHECK(simtest::launchAdd(cu, add, c, c, 3, nullptr));
    hc += 3;
    g_provoked += odd + oddLegacy;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
      checkWord(cu, nullptr, c, hc, "c", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

void eventNoContext(const simtest::DriverApi& cu, CUcontext ctx0, CUfunction add, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent e, back;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&back, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0;
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, uint64_t(i), s));  // y = x + i
    hy = hx + uint64_t(i);
    const bool odd = irregular(i, 3);
    if (odd) SIM_CHECK(cu.cuCtxSetCurrent(nullptr));
    const CUresult r = cu.cuEventRecord(e, s);
    if (odd) SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
    expectCode(r, odd ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS,
               odd ? "cuEventRecord on a created stream with no context current" : "cuEventRecord", i);
    if (r != CUDA_SUCCESS) SIM_CHECK(cu.cuEventRecord(e, s));
    const bool oddWait = irregular(i, 4);
    if (oddWait) SIM_CHECK(cu.cuCtxSetCurrent(nullptr));
    const CUresult r2 = cu.cuStreamWaitEvent(t, e, 0);
    if (oddWait) SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
    expectCode(r2, oddWait ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS,
               oddWait ? "cuStreamWaitEvent on a created stream with no context current" : "cuStreamWaitEvent", i);
    if (r2 != CUDA_SUCCESS) SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, t));  // x = y + 1
    hx = hy + 1;
    SIM_CHECK(cu.cuEventRecord(back, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, back, 0));
    g_provoked += odd + oddWait;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

void queryNoContext(const simtest::DriverApi& cu, CUcontext ctx0, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hw = 0;
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    SIM_CHECK(cu.cuEventRecord(e, s));
    chain(cu, add, w, s, 12, &hw);
    if (irregular(i, 5)) {
      SIM_CHECK(cu.cuCtxSetCurrent(nullptr));
      const CUresult q1 = cu.cuStreamQuery(s);
      const CUresult q2 = cu.cuEventQuery(e);
      SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
      expectCode(q1, CUDA_ERROR_INVALID_CONTEXT, "cuStreamQuery of a created stream with no context current", i);
      expectCode(q2, CUDA_ERROR_INVALID_CONTEXT, "cuEventQuery with no context current", i);
      ++g_provoked;
    }
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, uint64_t(i), s));
    hx += uint64_t(i);
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

void wideKernel(const simtest::DriverApi& cu, CUfunction add, int steps) {
  constexpr unsigned kParams = 4100;
  std::vector<size_t> sizes(kParams, 4);
  sizes[0] = sizes[1] = sizes[2] = 8;
  const CUfunction wide = simKernelCreate("sim_add_wide", SIM_KERNEL_LIBRARY, kParams, sizes.data(), nullptr);
  if (!wide) {
    std::printf("sim_review_hook: %s: the simulator made no kernel of %u parameters\n", g_mode, kParams);
    ++g_wrong;
    return;
  }
  size_t lastOffset = 0, lastSize = 0;
  simKernelParamLayout(wide, kParams - 1, &lastOffset, &lastSize);
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0;
  std::vector<uint32_t> tags(kParams, 0);
  std::vector<void*> args(kParams, nullptr);
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    CUdeviceptr to = y, from = x;
    uint64_t k = uint64_t(i);
    args[0] = &to;
    args[1] = &from;
    args[2] = &k;
    for (unsigned j = 3; j < kParams; ++j) {
      tags[j] = uint32_t(i) * 7919u + j;  // every parameter changes every step
      args[j] = &tags[j];
    }
    SIM_CHECK(cu.cuLaunchKernel(wide, 1, 1, 1, 1, 1, 1, 0, s, args.data(), nullptr));  // y = x + i
    hy = hx + uint64_t(i);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));  // x = y + 1
    hx = hy + 1;
    ++g_provoked;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  // Every executed launch of the wide kernel: its last parameter is the one
  // given with its `k` (parameter 2).
  size_t seen = 0, wrong = 0;
  for (size_t n = 0, count = simTraceSize(); n < count; ++n) {
    SimEffect fx{};
    if (simTraceGet(n, &fx) != 0 || fx.kind != SIM_EFFECT_KERNEL || !fx.kernelName ||
        std::strcmp(fx.kernelName, "sim_add_wide") != 0)
      continue;
    ++seen;
    uint64_t kk = 0;
    uint32_t last = 0;
    if (fx.paramBytes >= lastOffset + lastSize) {
      std::memcpy(&kk, fx.params + 16, 8);
      std::memcpy(&last, fx.params + lastOffset, 4);
    }
    if (last != uint32_t(kk) * 7919u + (kParams - 1) && wrong++ < 4)
      std::printf("sim_review_hook: %s: a launch with k=%llu ran with its last parameter %u, given %u\n", g_mode,
                  (unsigned long long)kk, last, uint32_t(kk) * 7919u + (kParams - 1));
  }
  expectValue(seen, uint64_t(steps), "executed launches of the wide kernel", steps);
  expectValue(wrong, 0, "executed launches of the wide kernel with parameter bytes other than given", steps);
}

void copyOtherContext(const simtest::DriverApi& cu, CUcontext ctx0, CUfunction add, int steps) {
  const CUcontext ctx1 = secondContext(cu, ctx0);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  CUstream s1;
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr a = simtest::zeroedBuffer(cu, 256), b = simtest::zeroedBuffer(cu, 256),
                    w = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  const CUdeviceptr z = simtest::zeroedBuffer(cu, 256);  // device 0's memory
  uint64_t ha = 0, hb = 0, hw = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
    chain(cu, add, w, s1, 10, &hw);
    SIM_CHECK(simtest::launchAdd(cu, add, a, b, uint64_t(i), s1));  // a = b + i
    ha = hb + uint64_t(i);
    SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
    // With device 0's context current, on device 1's stream: a copy into
    // device 0's memory and back, and a memset.
    expectCode(cu.cuMemcpyDtoDAsync(z + 64, a, 8, s1), CUDA_SUCCESS, "cuMemcpyDtoDAsync on another context's stream",
               i);
    expectCode(cu.cuMemsetD32Async(z + 128, uint32_t(i) * 3u + 1u, 2, s1), CUDA_SUCCESS,
               "cuMemsetD32Async on another context's stream", i);
    expectCode(cu.cuMemcpyDtoDAsync(b, z + 64, 8, s1), CUDA_SUCCESS, "cuMemcpyDtoDAsync back", i);
    expectCode(cu.cuMemcpyDtoDAsync(b + 8, z + 128, 8, s1), CUDA_SUCCESS, "cuMemcpyDtoDAsync of the memset", i);
    hb = ha;
    SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
    SIM_CHECK(simtest::launchAdd(cu, add, b, b, 1, s1));  // b += 1
    hb += 1;
    chain(cu, add, w, s1, 10, &hw);
    ++g_provoked;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s1, b, hb, "b", i);
      const uint32_t v = uint32_t(i) * 3u + 1u;
      checkWord(cu, s1, b + 8, uint64_t(v) | uint64_t(v) << 32, "b[1] (the memset's words)", i);
      checkWord(cu, s1, w, hw, "w", i);
    }
    SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  SIM_CHECK(cu.cuCtxSynchronize());
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review_hook", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  const bool expectGraphs = args.expectGraphs;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review_hook", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review_hook");
  if (mode == "event-other-context") eventOtherContext(cu, ctx, add, steps);
  else if (mode == "event-no-context") eventNoContext(cu, ctx, add, steps);
  else if (mode == "query-no-context") queryNoContext(cu, ctx, add, steps);
  else if (mode == "wide-kernel") wideKernel(cu, add, steps);
  else if (mode == "copy-other-context") copyOtherContext(cu, ctx, add, steps);
  else {
    std::printf("usage: sim_review_hook --mode event-other-context|event-no-context|query-no-context|wide-kernel|"
                "copy-other-context [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, expectGraphs);
}
