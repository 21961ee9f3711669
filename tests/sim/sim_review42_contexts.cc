// sim_review42_contexts: a code review of the context handling of 33fd94d..07a7575
// (ops run in their stream's context, the per-thread default stream under a
// green context, records of a primary context's events on green streams,
// cuGreenCtxDestroy): loops graft learns and replays around the calls those
// commits changed; every return code and value must be what the simulated
// driver gives eagerly (helper-written review; one --mode per probe).
//
//   green-destroy-ends-primary  the program's thread uses its per-thread
//            default stream in device 0's primary context (100 steps of four
//            launches into CU_STREAM_PER_THREAD, values read back every 10),
//            makes a green context (which retains the primary context), drops
//            its own reference (cuDevicePrimaryCtxRelease: the green context
//            now holds the last one), runs 50 more steps, then destroys the
//            green context: cuda.h, cuGreenCtxDestroy "releas[es] the primary
//            context of the device that this green context was created for",
//            so the primary context ends with its streams (the simulator gives
//            their handles out again). The program retains the primary
//            context again (the same handle in the simulator, as a driver may
//            give) and runs 100 more steps on its per-thread stream: every
//            launch must succeed and every value be right. A tool that keeps
//            a stream of its own for that per-thread stream past the end of
//            the context (graft's proxy) issues the program's work on a
//            destroyed stream handle.
//   release-ends-primary  the control: the same steps, but the green context
//            is destroyed first and the last reference goes with the
//            program's own cuDevicePrimaryCtxRelease.
//   other-context-launch  devices 0 and 1, a non-blocking stream in each
//            primary context (s0, s1); each step, with device 1's context
//            current, three launches on s1 and one into s0 (refused:
//            CUDA_ERROR_INVALID_HANDLE); then with device 0's context current
//            a memset, a copy and a record of device 1's event on s1 (copies
//            and memsets may use another context's stream; they run in its
//            context), a wait of s0 on that event, launches on s0 and the
//            same cuLaunchKernel and cuLaunchKernelEx into s1 that the step
//            made with device 1's context current (refused, nothing runs).
//            Every code and the values of both chains must be eager's.
//   per-thread-switch  one thread alternates the primary context and a green
//            context's converted context every step: with the primary current
//            four launches into CU_STREAM_PER_THREAD (they run), with the
//            converted context pushed launches into CU_STREAM_PER_THREAD and
//            through the _ptsz entry point and a cuStreamQuery of it (all
//            refused: CUDA_ERROR_INVALID_HANDLE) between four launches on the
//            converted context's NULL stream (they run). (Fails with
//            33fd94d's library, which gave that stream a proxy.)
//   per-thread-switch-threads  the same on two threads at once, in
//            opposite phase (each with buffers of its own).
//   green-record-events  the primary context current; each step a launch on a
//            primary-context stream sP, a record of the primary's event on sP
//            and a wait of the green stream on it, a launch on the green
//            stream, then on the green stream: a record of the primary's
//            event (the driver takes it), of device 1's event (refused,
//            CUDA_ERROR_INVALID_HANDLE) and of an event made with the
//            converted context current (taken); sP waits on the primary's
//            event and launches the chain's last kernel.
//   cukernel-other-context  (run with SIM_KERNEL_STREAM_CONTEXT=1: the
//            simulator then launches a CUkernel into a created stream in that
//            stream's context, as cuda.h documents for cuLaunchKernel) device
//            0's context current throughout; each step two CUkernel launches
//            on device 0's stream s0, four CUkernel launches into device 1's
//            stream s1, a record of device 1's event on s1, a wait of s0 on
//            it and a launch on s0 reading what s1 wrote. Every kernel must
//            run in its stream's context (the executed trace's context and
//            device), every value be eager's.
//
//   sim_review42_contexts --mode MODE [--expect-graphs]
// Exit 1 on a wrong value, a return code other than the driver's, or a
// failed call; --expect-graphs: also when under a quarter of the simulator's
// effects (in the two primary-context modes: of the phase before the green
// context and of the one after the context's end) ran from graph launches.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_green_api.h"
#include "sim_mode_checks.h"

namespace {

const char* kProgram = "sim_review42_contexts";
int g_wrongCodes = 0;
int g_wrongValues = 0;

void expectCode(CUresult got, CUresult want, const char* what, int step) {
  if (got == want) return;
  if (g_wrongCodes++ < 8)
    std::printf("%s: %s, step %d: returned %d, expected %d\n", kProgram, what, step, int(got), int(want));
}

uint64_t readWord(const simtest::DriverApi& cu, CUdeviceptr p) {
  uint64_t v = 0;
  SIM_CHECK(cu.cuMemcpyDtoH(&v, p, 8));
  return v;
}

void expectValue(uint64_t got, uint64_t want, const char* what, int step) {
  if (got == want) return;
  if (g_wrongValues++ < 8)
    std::printf("%s: %s, step %d: value %llu, expected %llu\n", kProgram, what, step, (unsigned long long)got,
                (unsigned long long)want);
}

using simtest::GreenApi;
using simtest::loadGreenApi;
using simtest::makeGreen;

struct Counts {
  uint64_t graph = 0, eager = 0;
};
SimCounters countersNow() {
  SimCounters c{};
  simCounters(&c);
  return c;
}
Counts countsSince(const SimCounters& before) {
  const SimCounters c = countersNow();
  return {c.effectsGraph - before.effectsGraph, c.effectsEager - before.effectsEager};
}
bool tooFewGraphs(const char* what, const Counts& c) {
  std::printf("%s: %s: effects from graphs %llu, eager %llu\n", kProgram, what, (unsigned long long)c.graph,
              (unsigned long long)c.eager);
  if (c.graph * 4 >= c.graph + c.eager) return false;
  std::printf("%s: %s: under a quarter of the effects ran from graphs\n", kProgram, what);
  return true;
}

CUresult launchEx(const simtest::DriverApi& cu, CUfunction k, CUdeviceptr to, CUdeviceptr from, uint64_t add,
                  CUstream s) {
  void* args[] = {&to, &from, &add};
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.hStream = s;
  return cu.cuLaunchKernelEx(&config, k, args, nullptr);
}

// ---------------------------------------------------------------- primary context's end

// `steps` steps of four launches into the calling thread's per-thread stream
// (x += 1, 2, 3, 4), values read back every 10.
void perThreadLoop(const simtest::DriverApi& cu, CUfunction add, CUdeviceptr x, uint64_t* hx, int steps,
                   const char* what) {
  for (int step = 0; step < steps; ++step) {
    for (uint64_t k = 1; k <= 4; ++k) {
      expectCode(simtest::launchAdd(cu, add, x, x, k, CU_STREAM_PER_THREAD), CUDA_SUCCESS, what, step);
      *hx += k;
    }
    if (step % 10 == 9) {
      expectCode(cu.cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS, what, step);
      expectValue(readWord(cu, x), *hx, what, step);
    }
  }
}

bool primaryEnd(const simtest::Driver& drv, const GreenApi& ga, CUcontext primary, bool viaGreen,
                bool expectGraphs) {
  const auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_pt");
  CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  bool few = false;
  SimCounters before = countersNow();
  perThreadLoop(cu, add, x, &hx, 100, "per-thread loop before the green context");
  if (expectGraphs) few |= tooFewGraphs("before the green context", countsSince(before));
  CUgreenCtx green = nullptr;
  CUcontext converted = nullptr;
  if (!makeGreen(ga, &green, &converted)) {
    std::printf("%s: could not make a green context\n", kProgram);
    std::exit(2);
  }
  if (viaGreen) {
    // The green context holds the last reference to the primary context.
    SIM_CHECK(cu.cuDevicePrimaryCtxRelease(0));
    perThreadLoop(cu, add, x, &hx, 50, "per-thread loop, the green context holding the primary context");
    SIM_CHECK(ga.destroy(green));  // releases the last reference: the primary context ends
  } else {
    SIM_CHECK(ga.destroy(green));
    perThreadLoop(cu, add, x, &hx, 50, "per-thread loop after cuGreenCtxDestroy");
    SIM_CHECK(cu.cuDevicePrimaryCtxRelease(0));  // the last reference: the primary context ends
  }
  CUcontext again = nullptr;
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&again, 0));
  SIM_CHECK(cu.cuCtxSetCurrent(again));
  std::printf("%s: the primary context retained again: %s handle\n", kProgram,
              again == primary ? "the same" : "another");
  CUdeviceptr y = simtest::zeroedBuffer(cu);
  uint64_t hy = 0;
  before = countersNow();
  perThreadLoop(cu, add, y, &hy, 100, "per-thread loop in the primary context retained again");
  if (expectGraphs) few |= tooFewGraphs("after the primary context's end", countsSince(before));
  return few;
}

// ---------------------------------------------------------------- other-context-launch

bool otherContextLaunch(const simtest::DriverApi& cu, CUcontext p0, bool expectGraphs) {
  CUcontext p1 = nullptr;
  if (cu.cuDevicePrimaryCtxRetain(&p1, 1) != CUDA_SUCCESS) {
    std::printf("%s: no device 1\n", kProgram);
    std::exit(2);
  }
  CUfunction ka = simtest::libraryKernel3("sim_add_dev0"), kb = simtest::libraryKernel3("sim_add_dev1");
  CUstream s0 = nullptr, s1 = nullptr;
  CUevent e1 = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(p1));
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr y = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(p0));
  uint64_t hx = 0, hy = 0;
  const SimCounters before = countersNow();
  for (int step = 0; step < 300; ++step) {
    // Device 1's context current: three launches on s1, one into s0 (refused).
    SIM_CHECK(cu.cuCtxSetCurrent(p1));
    expectCode(simtest::launchAdd(cu, kb, y, y, 3, s1), CUDA_SUCCESS, "cuLaunchKernel on s1", step);
    expectCode(simtest::launchAdd(cu, ka, x, x, 1, s0), CUDA_ERROR_INVALID_HANDLE,
               "cuLaunchKernel into device 0's stream, device 1's context current", step);
    expectCode(launchEx(cu, kb, y, y, 4, s1), CUDA_SUCCESS, "cuLaunchKernelEx on s1", step);
    expectCode(simtest::launchAdd(cu, kb, y, y, 5, s1), CUDA_SUCCESS, "cuLaunchKernel on s1", step);
    hy += 12;
    // Device 0's context current: a memset, a copy and a record on s1 (taken;
    // they run in device 1's context), s0 waits, launches on s0, and the
    // launches just made on s1 made again (refused).
    SIM_CHECK(cu.cuCtxSetCurrent(p0));
    const unsigned v = unsigned(step % 5) + 1;
    expectCode(cu.cuMemsetD32Async(z, v, 2, s1), CUDA_SUCCESS, "cuMemsetD32Async on device 1's stream", step);
    expectCode(cu.cuMemcpyDtoDAsync(w, z, 8, s1), CUDA_SUCCESS, "cuMemcpyDtoDAsync on device 1's stream", step);
    expectCode(cu.cuEventRecord(e1, s1), CUDA_SUCCESS, "cuEventRecord of device 1's event on s1", step);
    expectCode(cu.cuStreamWaitEvent(s0, e1, 0), CUDA_SUCCESS, "cuStreamWaitEvent of s0", step);
    expectCode(simtest::launchAdd(cu, ka, x, x, 1, s0), CUDA_SUCCESS, "cuLaunchKernel on s0", step);
    expectCode(simtest::launchAdd(cu, ka, x, x, 2, s0), CUDA_SUCCESS, "cuLaunchKernel on s0", step);
    expectCode(simtest::launchAdd(cu, kb, y, y, 3, s1), CUDA_ERROR_INVALID_HANDLE,
               "cuLaunchKernel into device 1's stream, device 0's context current", step);
    expectCode(launchEx(cu, kb, y, y, 4, s1), CUDA_ERROR_INVALID_HANDLE,
               "cuLaunchKernelEx into device 1's stream, device 0's context current", step);
    expectCode(simtest::launchAdd(cu, ka, x, x, 3, s0), CUDA_SUCCESS, "cuLaunchKernel on s0", step);
    expectCode(simtest::launchAdd(cu, ka, x, x, 4, s0), CUDA_SUCCESS, "cuLaunchKernel on s0", step);
    hx += 10;
    if (step % 10 == 9) {
      SIM_CHECK(cu.cuStreamSynchronize(s0));
      SIM_CHECK(cu.cuStreamSynchronize(s1));
      expectValue(readWord(cu, x), hx, "x (device 0's chain)", step);
      expectValue(readWord(cu, y), hy, "y (device 1's chain)", step);
      expectValue(readWord(cu, w), uint64_t(v) | (uint64_t(v) << 32), "w (copied on s1)", step);
    }
  }
  return expectGraphs && tooFewGraphs("other-context-launch", countsSince(before));
}

// ---------------------------------------------------------------- per-thread-switch

// One thread's loop: the primary context and the green context's converted
// context alternately; `phase` picks which comes first.
void perThreadSwitch(const simtest::Driver& drv, const GreenApi& ga, CUcontext primary, CUcontext converted,
                     int phase, int steps) {
  const auto& cu = drv.plain;
  SIM_CHECK(cu.cuCtxSetCurrent(primary));
  CUfunction add = simtest::libraryKernel3(phase ? "sim_add_switch_b" : "sim_add_switch_a");
  CUfunction refused = simtest::libraryKernel3(phase ? "sim_add_refused_b" : "sim_add_refused_a");
  const CUdeviceptr x = simtest::zeroedBuffer(cu), g = simtest::zeroedBuffer(cu), r = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hg = 0;
  for (int step = 0; step < steps; ++step) {
    const bool green = (step + phase) % 2 == 1;
    if (!green) {
      for (uint64_t k = 1; k <= 4; ++k) {
        expectCode(simtest::launchAdd(cu, add, x, x, k, CU_STREAM_PER_THREAD), CUDA_SUCCESS,
                   "cuLaunchKernel into CU_STREAM_PER_THREAD, the primary context current", step);
        hx += k;
      }
    } else {
      SIM_CHECK(ga.push(converted));
      for (uint64_t k = 1; k <= 2; ++k)
        expectCode(simtest::launchAdd(cu, add, g, g, k, nullptr), CUDA_SUCCESS,
                   "cuLaunchKernel into the converted context's NULL stream", step);
      expectCode(simtest::launchAdd(cu, refused, r, r, 1, CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE,
                 "cuLaunchKernel into CU_STREAM_PER_THREAD, the converted context current", step);
      expectCode(simtest::launchAdd(drv.perThread, refused, r, r, 1, nullptr), CUDA_ERROR_INVALID_HANDLE,
                 "cuLaunchKernel_ptsz into NULL, the converted context current", step);
      expectCode(cu.cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE,
                 "cuStreamQuery(CU_STREAM_PER_THREAD), the converted context current", step);
      for (uint64_t k = 3; k <= 4; ++k)
        expectCode(simtest::launchAdd(cu, add, g, g, k, nullptr), CUDA_SUCCESS,
                   "cuLaunchKernel into the converted context's NULL stream", step);
      hg += 10;
      CUcontext popped = nullptr;
      SIM_CHECK(ga.pop(&popped));
    }
    if (step % 10 == 9) {
      expectCode(cu.cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS,
                 "cuStreamSynchronize(CU_STREAM_PER_THREAD), the primary context current", step);
      SIM_CHECK(ga.push(converted));
      SIM_CHECK(cu.cuStreamSynchronize(nullptr));
      CUcontext popped = nullptr;
      SIM_CHECK(ga.pop(&popped));
      expectValue(readWord(cu, x), hx, "the per-thread stream's chain", step);
      expectValue(readWord(cu, g), hg, "the converted context's NULL-stream chain", step);
      expectValue(readWord(cu, r), 0, "the refused launches' buffer", step);
    }
  }
}

// ---------------------------------------------------------------- green-record-events

bool greenRecordEvents(const simtest::DriverApi& cu, const GreenApi& ga, CUcontext primary, bool expectGraphs) {
  CUgreenCtx green = nullptr;
  CUcontext converted = nullptr;
  if (!makeGreen(ga, &green, &converted)) {
    std::printf("%s: could not make a green context\n", kProgram);
    std::exit(2);
  }
  CUcontext p1 = nullptr;
  if (cu.cuDevicePrimaryCtxRetain(&p1, 1) != CUDA_SUCCESS) {
    std::printf("%s: no device 1\n", kProgram);
    std::exit(2);
  }
  CUstream gs = nullptr, sp = nullptr;
  CUevent ep = nullptr, eg = nullptr, e1 = nullptr;
  SIM_CHECK(ga.streamCreate(&gs, green, CU_STREAM_NON_BLOCKING, 0));
  SIM_CHECK(cu.cuStreamCreate(&sp, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuEventCreate(&ep, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(ga.push(converted));
  SIM_CHECK(cu.cuEventCreate(&eg, CU_EVENT_DISABLE_TIMING));
  CUcontext popped = nullptr;
  SIM_CHECK(ga.pop(&popped));
  SIM_CHECK(cu.cuCtxSetCurrent(p1));
  SIM_CHECK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuCtxSetCurrent(primary));
  CUfunction kp = simtest::libraryKernel3("sim_add_main"), kg = simtest::libraryKernel3("sim_mix_green");
  const CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  uint64_t ha = 0, hb = 0;
  const SimCounters before = countersNow();
  for (int step = 0; step < 300; ++step) {
    expectCode(simtest::launchAdd(cu, kp, a, a, 1, sp), CUDA_SUCCESS, "cuLaunchKernel on sP", step);  // a += 1
    expectCode(cu.cuEventRecord(ep, sp), CUDA_SUCCESS, "cuEventRecord(eP, sP)", step);
    expectCode(cu.cuStreamWaitEvent(gs, ep, 0), CUDA_SUCCESS, "cuStreamWaitEvent(green stream, eP)", step);
    expectCode(simtest::launchAdd(cu, kg, b, a, 3, gs), CUDA_SUCCESS, "cuLaunchKernel on the green stream",
               step);  // b = mix(a ^ 3)
    expectCode(cu.cuEventRecord(ep, gs), CUDA_SUCCESS, "cuEventRecord of the primary's event on the green stream",
               step);
    expectCode(cu.cuEventRecord(e1, gs), CUDA_ERROR_INVALID_HANDLE,
               "cuEventRecord of device 1's event on the green stream", step);
    expectCode(cu.cuEventRecord(eg, gs), CUDA_SUCCESS,
               "cuEventRecord of the converted context's event on the green stream", step);
    expectCode(cu.cuStreamWaitEvent(sp, ep, 0), CUDA_SUCCESS, "cuStreamWaitEvent(sP, eP)", step);
    expectCode(simtest::launchAdd(cu, kp, a, b, 5, sp), CUDA_SUCCESS, "cuLaunchKernel on sP", step);  // a = b + 5
    ha += 1;
    hb = simMix64(ha ^ 3);
    ha = hb + 5;
    if (step % 10 == 9) {
      SIM_CHECK(cu.cuStreamSynchronize(sp));
      expectValue(readWord(cu, a), ha, "a", step);
      expectValue(readWord(cu, b), hb, "b", step);
      SIM_CHECK(cu.cuEventSynchronize(eg));
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  return expectGraphs && tooFewGraphs("green-record-events", countsSince(before));
}

// ---------------------------------------------------------------- cukernel-other-context

bool cukernelOtherContext(const simtest::DriverApi& cu, CUcontext p0, bool expectGraphs) {
  CUcontext p1 = nullptr;
  if (cu.cuDevicePrimaryCtxRetain(&p1, 1) != CUDA_SUCCESS) {
    std::printf("%s: no device 1\n", kProgram);
    std::exit(2);
  }
  CUfunction ka = simtest::libraryKernel3("sim_add_ctx0"), kb = simtest::libraryKernel3("sim_add_ctx1");
  CUstream s0 = nullptr, s1 = nullptr;
  CUevent e1 = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(p1));
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr y = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(p0));
  if (CUresult r = simtest::launchAdd(cu, kb, y, y, 0, s1); r != CUDA_SUCCESS) {
    std::printf("%s: a CUkernel launch into device 1's stream with device 0's context current returned %d: "
                "run with SIM_KERNEL_STREAM_CONTEXT=1\n", kProgram, int(r));
    std::exit(2);
  }
  uint64_t hx = 0, hy = 0;
  const size_t traceFrom = simTraceSize();
  const SimCounters before = countersNow();
  for (int step = 0; step < 300; ++step) {
    expectCode(simtest::launchAdd(cu, ka, x, x, 1, s0), CUDA_SUCCESS, "CUkernel launch on s0", step);
    expectCode(simtest::launchAdd(cu, ka, x, x, 2, s0), CUDA_SUCCESS, "CUkernel launch on s0", step);
    for (uint64_t k = 1; k <= 4; ++k)
      expectCode(simtest::launchAdd(cu, kb, y, y, k, s1), CUDA_SUCCESS,
                 "CUkernel launch into device 1's stream, device 0's context current", step);
    expectCode(cu.cuEventRecord(e1, s1), CUDA_SUCCESS, "cuEventRecord of device 1's event on s1", step);
    expectCode(cu.cuStreamWaitEvent(s0, e1, 0), CUDA_SUCCESS, "cuStreamWaitEvent of s0", step);
    expectCode(simtest::launchAdd(cu, ka, x, y, 0, s0), CUDA_SUCCESS, "CUkernel launch on s0", step);  // x = y
    hy += 10;
    hx = hy;
    if (step % 10 == 9) {
      SIM_CHECK(cu.cuStreamSynchronize(s0));
      expectValue(readWord(cu, x), hx, "x", step);
      expectValue(readWord(cu, y), hy, "y", step);
    }
  }
  SIM_CHECK(cu.cuStreamSynchronize(s0));
  SIM_CHECK(cu.cuStreamSynchronize(s1));
  int wrong = 0;
  for (size_t i = traceFrom; i < simTraceSize(); ++i) {
    SimEffect e{};
    if (simTraceGet(i, &e) != 0 || e.kind != SIM_EFFECT_KERNEL || !e.kernelName) continue;
    const bool onS1 = std::strcmp(e.kernelName, "sim_add_ctx1") == 0;
    const CUcontext want = onS1 ? p1 : p0;
    if (e.context == want && e.device == (onS1 ? 1 : 0)) continue;
    if (wrong++ < 5)
      std::printf("%s: kernel %s (%s) ran in context %p on device %d, expected %p on device %d\n", kProgram,
                  e.kernelName, e.origin == SIM_ORIGIN_GRAPH ? "from a graph" : "eager",
                  static_cast<void*>(e.context), e.device, static_cast<void*>(want), onS1 ? 1 : 0);
  }
  if (wrong) {
    std::printf("%s: %d kernels ran in another context than their stream's\n", kProgram, wrong);
    g_wrongValues += wrong;
  }
  return expectGraphs && tooFewGraphs("cukernel-other-context", countsSince(before));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // what was printed survives an abort
  const simtest::modes::ModeArgs args = simtest::modes::parseModeArgs(argc, argv, kProgram, 0);
  const std::string& mode = args.mode;
  const bool expectGraphs = args.expectGraphs;
  const char* modes[] = {"green-destroy-ends-primary", "release-ends-primary", "other-context-launch",
                         "per-thread-switch", "per-thread-switch-threads", "green-record-events",
                         "cukernel-other-context"};
  bool known = false;
  for (const char* m : modes) known |= mode == m;
  if (!known) {
    std::printf("usage: %s --mode green-destroy-ends-primary|release-ends-primary|other-context-launch|"
                "per-thread-switch|per-thread-switch-threads|green-record-events|cukernel-other-context [--expect-graphs]\n",
                kProgram);
    return 2;
  }
  simtest::Driver drv;
  CUcontext primary = nullptr;
  if (int rc = simtest::startProgram(kProgram, &drv, &primary)) return rc;
  const auto& cu = drv.plain;
  GreenApi ga;
  if (!loadGreenApi(drv, &ga)) return 2;
  bool fewGraphs = false;
  if (mode == "green-destroy-ends-primary" || mode == "release-ends-primary") {
    fewGraphs = primaryEnd(drv, ga, primary, mode == "green-destroy-ends-primary", expectGraphs);
  } else if (mode == "other-context-launch") {
    fewGraphs = otherContextLaunch(cu, primary, expectGraphs);
  } else if (mode == "per-thread-switch" || mode == "per-thread-switch-threads") {
    CUgreenCtx green = nullptr;
    CUcontext converted = nullptr;
    if (!makeGreen(ga, &green, &converted)) {
      std::printf("%s: could not make a green context\n", kProgram);
      return 2;
    }
    const SimCounters before = countersNow();
    if (mode == "per-thread-switch") {
      perThreadSwitch(drv, ga, primary, converted, 0, 400);
      fewGraphs = expectGraphs && tooFewGraphs("per-thread-switch", countsSince(before));
    } else {
      std::thread t0([&] { perThreadSwitch(drv, ga, primary, converted, 0, 200); });
      std::thread t1([&] { perThreadSwitch(drv, ga, primary, converted, 1, 200); });
      t0.join();
      t1.join();
    }
    SIM_CHECK(cu.cuCtxSynchronize());
  } else if (mode == "green-record-events") {
    fewGraphs = greenRecordEvents(cu, ga, primary, expectGraphs);
  } else {
    fewGraphs = cukernelOtherContext(cu, primary, expectGraphs);
  }
  std::printf("%s: %s: %d wrong values, %d wrong codes, %d failed calls\n", kProgram, mode.c_str(), g_wrongValues,
              g_wrongCodes, simtest::failedCalls());
  return g_wrongValues || g_wrongCodes || simtest::failedCalls() || fewGraphs ? 1 : 0;
}
