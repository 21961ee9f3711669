// sim_green_contexts: a loop on a stream of a CUDA green context, which an
// interposer learns and replays; every kernel must run in the context its
// stream belongs to (the simulator's executed trace says where each ran:
// SimEffect::context, the green context's converted CUcontext for a kernel
// on one of its streams; fake_cuda_green.cc), whatever context is current at
// the launch and however the kernel reached the driver (eagerly or as a node
// of a graph the interposer captured).
//
//   primary-current  the primary context current; 300 steps of four kernels
//                    (sim_add / sim_mix, each reading the one before) on a
//                    stream made by cuGreenCtxStreamCreate, the host reading
//                    the values back every 10 steps. The driver takes a
//                    launch on a green context's stream while its primary
//                    context is current and runs it in the green context: a
//                    tool that captures it in the current context moves it.
//   green-current    the green context's converted context pushed current;
//                    three kernels of each step on the green stream, the
//                    fourth on the green context's NULL stream, joined both
//                    ways by events.
//   mixed            the primary context current; each step a kernel on a
//                    primary-context stream, two on the green stream, one
//                    more on the primary stream, joined by events both ways
//                    (a fork and join like PyTorch's wait_stream pair).
//   destroy          primary-current's loop for 200 steps, then six more
//                    kernels on the green stream with no synchronization and
//                    cuGreenCtxDestroy right after: eagerly the driver runs
//                    them before the green context ends, so their values
//                    must be there; a call naming the green stream then fails
//                    with CUDA_ERROR_CONTEXT_IS_DESTROYED (cuda.h); the
//                    program goes on with 200 steps on a primary-context
//                    stream.
//   per-thread       the green context's converted context pushed current;
//                    400 steps of green-current's loop (the green stream and
//                    the converted context's NULL stream), each with two
//                    launches into the per-thread default stream: one by
//                    cuLaunchKernel into CU_STREAM_PER_THREAD (mid-step in
//                    the first 100 steps, at the step's end after them), one
//                    by the _ptsz entry point with a NULL stream (the step's
//                    end); every 10 steps cuStreamQuery and
//                    cuStreamSynchronize of it both ways too. The driver
//                    refuses the per-thread stream in a green context (H100,
//                    driver 580: CUDA_ERROR_INVALID_HANDLE for every one of
//                    these calls; fake_cuda_green.cc): every such call must
//                    return it, none of those kernels may run (their buffer
//                    stays 0, no sim_add_pt_* in the trace), and the green
//                    stream's loop must still compute the host's values. A
//                    tool that gives the per-thread stream a stream of its
//                    own there turns the refusals into successes.
//
//   sim_green_contexts --mode MODE [--expect-graphs]
// Exit 1 on a kernel that ran in another context than its stream's, a wrong
// value (against the host's mirror of the loop), a failed call or a wrong
// return code (per-thread: any per-thread call not refused, or a sim_add_pt_*
// kernel that ran); --expect-graphs: also when under a quarter of the loop's
// kernels on the streams of either context (in each phase, in destroy; in
// per-thread, of its last 300 steps: a per-thread op mid-step leaves nothing
// to replay) ran from graph launches, so a pass shows that the interposer
// replayed them and not only passed them through.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_green_api.h"

namespace {

const char* kProgram = "sim_green_contexts";

using simtest::GreenApi;
using simtest::loadGreenApi;
using simtest::makeGreen;

// The loop's kernels: *dst = *src + k (sim_add*) or simMix64(*src ^ k)
// (sim_mix*). Those named *_green_* are launched only on streams of the green
// context, *_main_* only on streams of the primary context.
struct Kernels {
  CUfunction greenAdd1, greenMix2, greenAdd3, greenMix4, mainAdd1, mainMix2, ptAdd;
};

// The return codes of one kind of call on the per-thread stream (per-thread
// mode), every one expected to be CUDA_ERROR_INVALID_HANDLE.
struct Codes {
  const char* what;
  uint64_t calls = 0, refused = 0;
  int firstOther = -1;  // the first code that was not the refusal
  void note(CUresult r) {
    ++calls;
    if (r == CUDA_ERROR_INVALID_HANDLE) ++refused;
    else if (firstOther < 0) firstOther = int(r);
  }
};

CUresult launch(const simtest::DriverApi& cu, CUfunction k, CUdeviceptr dst, CUdeviceptr src, uint64_t v,
                CUstream s) {
  return simtest::launchAdd(cu, k, dst, src, v, s);
}

uint64_t read(const simtest::DriverApi& cu, CUdeviceptr p) {
  uint64_t v = 0;
  SIM_CHECK(cu.cuMemcpyDtoH(&v, p, 8));
  return v;
}

struct Checker {
  const simtest::DriverApi& cu;
  int bad = 0;
  void value(const char* what, int step, CUdeviceptr p, uint64_t want) {
    const uint64_t got = read(cu, p);
    if (got == want) return;
    if (bad++ < 5)
      std::printf("%s: %s, step %d: value %llu, expected %llu\n", kProgram, what, step, (unsigned long long)got,
                  (unsigned long long)want);
  }
};

// Every kernel effect of the trace from `from` on: in the primary context
// for a *_main_* kernel, in the green context for a *_green_* one. Counts the
// loop's kernels and those that ran from graphs.
struct TraceCheck {
  int wrongContext = 0;
  uint64_t perThreadKernels = 0;  // sim_add_pt_*: launched only where the driver refuses them
  uint64_t kernels[2] = {0, 0}, fromGraphs[2] = {0, 0};  // [0] *_main_*, [1] *_green_*
};
TraceCheck checkTrace(size_t from, size_t to, CUcontext primary, CUcontext green, CUgreenCtx greenHandle) {
  TraceCheck tc;
  for (size_t i = from; i < to; ++i) {
    SimEffect e{};
    if (simTraceGet(i, &e) != 0 || e.kind != SIM_EFFECT_KERNEL || !e.kernelName) continue;
    if (std::strncmp(e.kernelName, "sim_add_pt_", 11) == 0) ++tc.perThreadKernels;
    const bool isGreen = std::strncmp(e.kernelName, "sim_add_green_", 14) == 0 ||
                         std::strncmp(e.kernelName, "sim_mix_green_", 14) == 0;
    const bool isMain = std::strncmp(e.kernelName, "sim_add_main_", 13) == 0 ||
                        std::strncmp(e.kernelName, "sim_mix_main_", 13) == 0;
    if (!isGreen && !isMain) continue;
    ++tc.kernels[isGreen];
    if (e.origin == SIM_ORIGIN_GRAPH) ++tc.fromGraphs[isGreen];
    const CUcontext want = isGreen ? green : primary;
    const CUgreenCtx wantGreen = isGreen ? greenHandle : nullptr;
    if (e.context == want && e.greenContext == wantGreen) continue;
    if (tc.wrongContext++ < 5)
      std::printf("%s: kernel %s (trace entry %llu, %s) ran in context %p (%s), expected %p (%s)\n", kProgram,
                  e.kernelName, (unsigned long long)e.index, e.origin == SIM_ORIGIN_GRAPH ? "from a graph" : "eager",
                  static_cast<void*>(e.context),
                  e.context == primary ? "the primary context" : (e.context == green ? "the green context" : "another"),
                  static_cast<void*>(want), isGreen ? "the green context" : "the primary context");
  }
  return tc;
}

// --expect-graphs: at least a quarter of the kernels of each stream's context
// (of those the phase launched) ran from graphs.
bool tooFewGraphs(const char* what, const TraceCheck& tc) {
  bool few = false;
  for (int green = 0; green < 2; ++green) {
    if (tc.kernels[green] == 0 || tc.fromGraphs[green] * 4 >= tc.kernels[green]) continue;
    std::printf("%s: %s: %llu of the %llu kernels on %s streams ran from graphs (under a quarter)\n", kProgram,
                what, (unsigned long long)tc.fromGraphs[green], (unsigned long long)tc.kernels[green],
                green ? "green-context" : "primary-context");
    few = true;
  }
  return few;
}

// The host's mirror of one step of the four-kernel chain (b = d + 1,
// c = mix(b ^ 3), a = c + 5, d = mix(a ^ 7)).
struct Chain {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  void step() {
    b = d + 1;
    c = simMix64(b ^ 3);
    a = c + 5;
    d = simMix64(a ^ 7);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string mode;
  bool expectGraphs = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
      mode = argv[++i];
    } else if (std::strcmp(argv[i], "--expect-graphs") == 0) {
      expectGraphs = true;
    } else {
      mode.clear();
      break;
    }
  }
  if (mode != "primary-current" && mode != "green-current" && mode != "mixed" && mode != "destroy" &&
      mode != "per-thread") {
    std::printf("usage: %s --mode primary-current|green-current|mixed|destroy|per-thread [--expect-graphs]\n",
                kProgram);
    return 2;
  }
  simtest::Driver drv;
  CUcontext primary = nullptr;
  if (int rc = simtest::startProgram(kProgram, &drv, &primary)) return rc;
  auto& cu = drv.plain;
  GreenApi ga;
  if (!loadGreenApi(drv, &ga)) return 2;
  CUgreenCtx green = nullptr;
  CUcontext gctx = nullptr;
  if (!makeGreen(ga, &green, &gctx)) {
    std::printf("%s: could not make a green context\n", kProgram);
    return 2;
  }
  CUstream gs = nullptr;
  SIM_CHECK(ga.streamCreate(&gs, green, CU_STREAM_NON_BLOCKING, 0));
  Kernels k;
  k.greenAdd1 = simtest::libraryKernel3("sim_add_green_1");
  k.greenMix2 = simtest::libraryKernel3("sim_mix_green_2");
  k.greenAdd3 = simtest::libraryKernel3("sim_add_green_3");
  k.greenMix4 = simtest::libraryKernel3("sim_mix_green_4");
  k.mainAdd1 = simtest::libraryKernel3("sim_add_main_1");
  k.mainMix2 = simtest::libraryKernel3("sim_mix_main_2");
  k.ptAdd = simtest::libraryKernel3("sim_add_pt_1");
  const CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu),
                    d = simtest::zeroedBuffer(cu);
  Checker check{cu};
  int wrongCodes = 0;
  const size_t traceFrom = simTraceSize();
  std::vector<TraceCheck> phases;
  std::vector<const char*> phaseNames;
  int wrongContextAside = 0;  // of trace checked outside `phases` (no graphs asked for)
  uint64_t perThreadRan = 0;  // per-thread: sim_add_pt_* kernels that ran

  // The four-kernel chain of one step on the green stream (green-current:
  // its fourth kernel on the green context's NULL stream, joined by events).
  CUevent toNull = nullptr, fromNull = nullptr;
  auto chainStep = [&](CUstream fourthOn) {
    SIM_CHECK(launch(cu, k.greenAdd1, b, d, 1, gs));
    SIM_CHECK(launch(cu, k.greenMix2, c, b, 3, gs));
    SIM_CHECK(launch(cu, k.greenAdd3, a, c, 5, gs));
    if (fourthOn == gs) {
      SIM_CHECK(launch(cu, k.greenMix4, d, a, 7, gs));
      return;
    }
    SIM_CHECK(cu.cuEventRecord(toNull, gs));
    SIM_CHECK(cu.cuStreamWaitEvent(fourthOn, toNull, 0));
    SIM_CHECK(launch(cu, k.greenMix4, d, a, 7, fourthOn));
    SIM_CHECK(cu.cuEventRecord(fromNull, fourthOn));
    SIM_CHECK(cu.cuStreamWaitEvent(gs, fromNull, 0));
  };
  auto readChain = [&](const char* what, int step, const Chain& m, CUstream s) {
    SIM_CHECK(cu.cuStreamSynchronize(s));
    check.value(what, step, a, m.a);
    check.value(what, step, d, m.d);
  };

  if (mode == "primary-current" || mode == "green-current") {
    const bool greenCurrent = mode == "green-current";
    if (greenCurrent) {
      SIM_CHECK(ga.push(gctx));
      SIM_CHECK(cu.cuEventCreate(&toNull, CU_EVENT_DISABLE_TIMING));
      SIM_CHECK(cu.cuEventCreate(&fromNull, CU_EVENT_DISABLE_TIMING));
    }
    Chain m;
    for (int step = 0; step < 300; ++step) {
      chainStep(greenCurrent ? nullptr : gs);
      m.step();
      if (step % 10 == 9) readChain(mode.c_str(), step, m, gs);
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    if (greenCurrent) {
      CUcontext popped = nullptr;
      SIM_CHECK(ga.pop(&popped));
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    phases.push_back(checkTrace(traceFrom, simTraceSize(), primary, gctx, green));
    phaseNames.push_back(mode.c_str());
  } else if (mode == "per-thread") {
    const CUdeviceptr p = simtest::zeroedBuffer(cu);  // the refused kernels' target: stays 0
    const auto& pt = drv.perThread;                    // NULL = the per-thread stream (_ptsz)
    Codes launchPlain{"cuLaunchKernel into CU_STREAM_PER_THREAD"};
    Codes launchPtsz{"cuLaunchKernel_ptsz into NULL"};
    Codes queryPlain{"cuStreamQuery(CU_STREAM_PER_THREAD)"};
    Codes queryPtsz{"cuStreamQuery_ptsz(NULL)"};
    Codes syncPlain{"cuStreamSynchronize(CU_STREAM_PER_THREAD)"};
    Codes syncPtsz{"cuStreamSynchronize_ptsz(NULL)"};
    SIM_CHECK(ga.push(gctx));
    SIM_CHECK(cu.cuEventCreate(&toNull, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu.cuEventCreate(&fromNull, CU_EVENT_DISABLE_TIMING));
    Chain m;
    // Steps 0-99 launch into CU_STREAM_PER_THREAD mid-step (the per-thread
    // op splits the green stream's work: a tool that holds the step must
    // issue what it held, and it cannot replay the step); steps 100-399 at
    // the step's end beside the _ptsz launch, so the green stream's eight
    // ops between them are a step a tool can replay.
    constexpr int kMidSteps = 100, kSteps = 400;
    size_t phaseFrom = traceFrom;
    for (int step = 0; step < kSteps; ++step) {
      const bool midStep = step < kMidSteps;
      SIM_CHECK(launch(cu, k.greenAdd1, b, d, 1, gs));
      SIM_CHECK(launch(cu, k.greenMix2, c, b, 3, gs));
      if (midStep) launchPlain.note(launch(cu, k.ptAdd, p, p, 1, CU_STREAM_PER_THREAD));
      SIM_CHECK(launch(cu, k.greenAdd3, a, c, 5, gs));
      SIM_CHECK(cu.cuEventRecord(toNull, gs));
      SIM_CHECK(cu.cuStreamWaitEvent(nullptr, toNull, 0));
      SIM_CHECK(launch(cu, k.greenMix4, d, a, 7, nullptr));  // the converted context's legacy stream
      SIM_CHECK(cu.cuEventRecord(fromNull, nullptr));
      SIM_CHECK(cu.cuStreamWaitEvent(gs, fromNull, 0));
      if (!midStep) launchPlain.note(launch(cu, k.ptAdd, p, p, 1, CU_STREAM_PER_THREAD));
      launchPtsz.note(launch(pt, k.ptAdd, p, p, 1, nullptr));
      m.step();
      if (step % 10 == 9) {
        queryPlain.note(cu.cuStreamQuery(CU_STREAM_PER_THREAD));
        queryPtsz.note(pt.cuStreamQuery(nullptr));
        syncPlain.note(cu.cuStreamSynchronize(CU_STREAM_PER_THREAD));
        syncPtsz.note(pt.cuStreamSynchronize(nullptr));
        readChain("per-thread", step, m, gs);
        check.value("per-thread, the refused kernels' buffer", step, p, 0);
      }
      if (step == kMidSteps - 1) {
        // Mid-step per-thread ops leave nothing to replay: no graphs asked for.
        const TraceCheck tc = checkTrace(phaseFrom, simTraceSize(), primary, gctx, green);
        perThreadRan += tc.perThreadKernels;
        wrongContextAside += tc.wrongContext;
        std::printf("%s: per-thread, launches mid-step: kernels on green-context streams %llu (%llu from graphs), "
                    "%d in the wrong context\n",
                    kProgram, (unsigned long long)tc.kernels[1], (unsigned long long)tc.fromGraphs[1],
                    tc.wrongContext);
        phaseFrom = simTraceSize();
      }
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    CUcontext popped = nullptr;
    SIM_CHECK(ga.pop(&popped));
    SIM_CHECK(cu.cuCtxSynchronize());
    check.value("per-thread, the refused kernels' buffer at the end", kSteps, p, 0);
    for (const Codes* cc : {&launchPlain, &launchPtsz, &queryPlain, &queryPtsz, &syncPlain, &syncPtsz}) {
      std::printf("%s: per-thread: %s: %llu calls, %llu refused with %d\n", kProgram, cc->what,
                  (unsigned long long)cc->calls, (unsigned long long)cc->refused, int(CUDA_ERROR_INVALID_HANDLE));
      if (cc->refused == cc->calls) continue;
      wrongCodes += int(cc->calls - cc->refused);
      std::printf("%s: per-thread: %s: %llu calls not refused, the first returned %d, expected %d\n", kProgram,
                  cc->what, (unsigned long long)(cc->calls - cc->refused), cc->firstOther,
                  int(CUDA_ERROR_INVALID_HANDLE));
    }
    phases.push_back(checkTrace(phaseFrom, simTraceSize(), primary, gctx, green));
    phaseNames.push_back("per-thread, launches at the step's end");
    perThreadRan += phases.back().perThreadKernels;
    if (perThreadRan) {
      ++wrongCodes;
      std::printf("%s: per-thread: %llu kernels launched into the refused per-thread stream ran\n", kProgram,
                  (unsigned long long)perThreadRan);
    }
  } else if (mode == "mixed") {
    CUstream ps = nullptr;
    CUevent e1 = nullptr, e2 = nullptr;
    SIM_CHECK(cu.cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
    SIM_CHECK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu.cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    uint64_t ha = 0, hb = 0, hc = 0;
    for (int step = 0; step < 300; ++step) {
      SIM_CHECK(launch(cu, k.mainAdd1, a, a, 1, ps));  // a = a + 1
      SIM_CHECK(cu.cuEventRecord(e1, ps));
      SIM_CHECK(cu.cuStreamWaitEvent(gs, e1, 0));
      SIM_CHECK(launch(cu, k.greenMix2, b, a, 3, gs));  // b = mix(a ^ 3)
      SIM_CHECK(launch(cu, k.greenAdd3, c, b, 5, gs));  // c = b + 5
      SIM_CHECK(cu.cuEventRecord(e2, gs));
      SIM_CHECK(cu.cuStreamWaitEvent(ps, e2, 0));
      SIM_CHECK(launch(cu, k.mainMix2, a, c, 7, ps));  // a = mix(c ^ 7)
      ha += 1;
      hb = simMix64(ha ^ 3);
      hc = hb + 5;
      ha = simMix64(hc ^ 7);
      if (step % 10 == 9) {
        SIM_CHECK(cu.cuStreamSynchronize(ps));
        check.value("mixed", step, a, ha);
        check.value("mixed", step, c, hc);
      }
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    phases.push_back(checkTrace(traceFrom, simTraceSize(), primary, gctx, green));
    phaseNames.push_back("mixed");
  } else {  // destroy
    Chain m;
    for (int step = 0; step < 200; ++step) {
      chainStep(gs);
      m.step();
      if (step % 10 == 9) readChain("destroy, before cuGreenCtxDestroy", step, m, gs);
    }
    // Six launches right before the end of the green context, no sync between.
    chainStep(gs);
    m.step();
    SIM_CHECK(launch(cu, k.greenAdd1, b, d, 1, gs));
    SIM_CHECK(launch(cu, k.greenMix2, c, b, 3, gs));
    m.b = m.d + 1;
    m.c = simMix64(m.b ^ 3);
    const CUresult dr = ga.destroy(green);
    if (dr != CUDA_SUCCESS && wrongCodes++ < 5)
      std::printf("%s: cuGreenCtxDestroy returned %d, expected 0\n", kProgram, int(dr));
    phases.push_back(checkTrace(traceFrom, simTraceSize(), primary, gctx, green));
    phaseNames.push_back("destroy, the green context's loop");
    // What was launched before the end ran (the read is on the primary
    // context's legacy stream, which does not wait for the green stream:
    // the destroy did).
    check.value("destroy, after cuGreenCtxDestroy", 200, a, m.a);
    check.value("destroy, after cuGreenCtxDestroy", 200, b, m.b);
    check.value("destroy, after cuGreenCtxDestroy", 200, c, m.c);
    check.value("destroy, after cuGreenCtxDestroy", 200, d, m.d);
    const CUresult qr = cu.cuStreamQuery(gs);
    if (qr != CUDA_ERROR_CONTEXT_IS_DESTROYED && wrongCodes++ < 5)
      std::printf("%s: cuStreamQuery of the destroyed green context's stream returned %d, expected %d\n", kProgram,
                  int(qr), int(CUDA_ERROR_CONTEXT_IS_DESTROYED));
    // The program goes on in the primary context.
    const size_t mainFrom = simTraceSize();
    CUstream ps = nullptr;
    SIM_CHECK(cu.cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
    uint64_t ha = m.a, hb = m.b;
    for (int step = 0; step < 200; ++step) {
      SIM_CHECK(launch(cu, k.mainAdd1, a, a, 1, ps));  // a = a + 1
      SIM_CHECK(launch(cu, k.mainMix2, b, a, 3, ps));  // b = mix(a ^ 3)
      SIM_CHECK(launch(cu, k.mainAdd1, a, b, 5, ps));  // a = b + 5
      ha += 1;
      hb = simMix64(ha ^ 3);
      ha = hb + 5;
      if (step % 10 == 9) {
        SIM_CHECK(cu.cuStreamSynchronize(ps));
        check.value("destroy, primary context after", step, a, ha);
        check.value("destroy, primary context after", step, b, hb);
      }
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    phases.push_back(checkTrace(mainFrom, simTraceSize(), primary, gctx, green));
    phaseNames.push_back("destroy, the primary context's loop after");
  }

  int wrongContext = wrongContextAside;
  bool fewGraphs = false;
  for (size_t i = 0; i < phases.size(); ++i) {
    const TraceCheck& tc = phases[i];
    wrongContext += tc.wrongContext;
    std::printf("%s: %s: kernels on green-context streams %llu (%llu from graphs), on primary-context streams %llu "
                "(%llu from graphs), %d in the wrong context\n",
                kProgram, phaseNames[i], (unsigned long long)tc.kernels[1], (unsigned long long)tc.fromGraphs[1],
                (unsigned long long)tc.kernels[0], (unsigned long long)tc.fromGraphs[0], tc.wrongContext);
    if (expectGraphs && tooFewGraphs(phaseNames[i], tc)) fewGraphs = true;
  }
  std::printf("%s: %s: %d kernels in the wrong context, %d wrong values, %d wrong codes, %d failed calls\n", kProgram,
              mode.c_str(), wrongContext, check.bad, wrongCodes, simtest::failedCalls());
  return wrongContext || check.bad || wrongCodes || simtest::failedCalls() || fewGraphs ? 1 : 0;
}
