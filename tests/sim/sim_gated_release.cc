// sim_gated_release: the host releases a kernel only after it has seen other
// work of the same step finish, work that eagerly never waits for that kernel.
//
// The gate is a sim_gate kernel: it cannot run until the host writes its
// iteration number into a flag (a kernel spinning on mapped memory). Each
// scenario repeats one step 40 times, so graft captures the step and replays
// it; a replay that makes the awaited work depend on the gate hangs (the
// simulator reports a deadlock and aborts), where eager always finishes.
//   exit        gate on stream A and work on stream B in one step; the host
//               synchronizes B, then opens the gate. (B must not wait for all
//               of a graph that spans A and B.)
//   exit-legacy the same with A the legacy default stream (B non-blocking).
//   entry       the gate is issued on A before the step (a stream query
//               between them); the step has work on A and B; the host
//               synchronizes B, then opens the gate. (B's work must not wait
//               for what A held before the step.)
//   mid-record  on A: work, record E, the gate; the host synchronizes E, then
//               opens the gate. (E must not cover work recorded after it.)
//   mid-wait    on C: the gate, record E, then a query of C; on A: work, record
//               F, wait E, more work; the host synchronizes F, then opens the
//               gate. (The work before the wait must not wait for E, the work
//               after it must.) E and F are created and destroyed every step,
//               like PyTorch's events, so their handles recur.
//   legacy-mixed-exit   the gate and work on C (non-blocking), work on the
//               legacy stream, then work on a blocking stream D reading the
//               legacy stream's result; the host synchronizes D, then opens
//               the gate. (D waits for the legacy stream, not for C.)
//   legacy-mixed-entry  the gate issued on C before the step; the step as in
//               legacy-mixed-exit; the host synchronizes the legacy stream,
//               then opens the gate. (The legacy stream's work must not wait
//               for what C held before the step.)
//   fork-join   PyTorch's side stream: on the legacy stream work, record E;
//               on C wait E, work, record F; on the legacy stream wait F,
//               work; the host synchronizes the legacy stream (no gate: the
//               graph may run on the legacy stream).
//   fork-join-late-gate  the same, then the gate on C. (Now the graph may
//               not run on the legacy stream.)
//   fork-before  PyTorch's side stream with host copies: the legacy stream
//               records E, C waits on E, copies from pinned host memory
//               (which graft issues eagerly, so the graph begins after them),
//               works and records F; the legacy stream waits on F and works;
//               the host synchronizes the legacy stream. (The graph joins
//               into the legacy stream and may run on it: C forked from it
//               before the graph.)
//   fork-stale  the same, but the legacy stream runs the gate after E, and
//               the host synchronizes C, then opens the gate. (C forked from
//               the legacy stream before the gate: the graph must not run on
//               the legacy stream.)
//   fork-blocking  as fork-before, but a blocking stream D runs the gate after
//               C's wait, and the host synchronizes C, then opens the gate.
//               (A launch on the legacy stream would wait for D's gate.)
//   fork-pts    A runs the gate and records E, E is recorded again on the
//               per-thread default stream, C waits on E, then as fork-before
//               with A as the join stream. (C did not fork from A.)
//   fork-blocking-join  as fork-before with a blocking join stream D; the
//               legacy stream runs the gate after E.
//   fork-xctx   device 1's legacy stream runs the gate; device 0's legacy
//               stream records E; device 1's stream C1 waits on E, then as
//               fork-before on device 1. (C1 did not fork from device 1's
//               legacy stream.)
//   fork-recreate  as fork-blocking-join, with the join stream non-blocking
//               for 20 iterations, then destroyed and created blocking under
//               the same handle.
//   sim_gated_release SCENARIO [--expect-graphs]
// Exit 1 on a wrong value, or with --expect-graphs unless most kernels ran
// from graphs; 2 on a setup failure.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

constexpr uint64_t kIterations = 40;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: sim_gated_release exit|exit-legacy|entry|mid-record|mid-wait|legacy-mixed-exit|"
                 "legacy-mixed-entry|fork-join|fork-join-late-gate|fork-before|fork-stale|fork-blocking|fork-pts|fork-blocking-join|fork-xctx|fork-recreate [--expect-graphs]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const bool expectGraphs = argc > 2 && std::strcmp(argv[2], "--expect-graphs") == 0;
  if (scenario != "exit" && scenario != "exit-legacy" && scenario != "entry" && scenario != "mid-record" &&
      scenario != "mid-wait" && scenario != "legacy-mixed-exit" && scenario != "legacy-mixed-entry" &&
      scenario != "fork-join" && scenario != "fork-join-late-gate" && scenario != "fork-before" &&
      scenario != "fork-stale" && scenario != "fork-blocking" && scenario != "fork-pts" &&
      scenario != "fork-blocking-join" && scenario != "fork-xctx" && scenario != "fork-recreate") {
    std::fprintf(stderr, "sim_gated_release: unknown scenario '%s'\n", scenario.c_str());
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_gated_release", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction gate = simtest::libraryKernel3("sim_gate");
  CUfunction add = simtest::libraryKernel3("sim_add_step");
  CUdeviceptr flag = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
              z = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  void* pinned = nullptr;  // pinned host memory: graft issues copies from it eagerly
  SIM_CHECK(cu.cuMemAllocHost(&pinned, 64));
  CUstream a, b, c, d;
  SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&d, CU_STREAM_DEFAULT));  // blocking
  auto launchGate = [&](uint64_t it, CUstream s) {
    uint64_t unused = 0;
    void* args[] = {&flag, &unused, &it};
    SIM_CHECK(cu.cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
  };
  auto addTo = [&](CUdeviceptr p, uint64_t k, CUstream s) { SIM_CHECK(simtest::launchAdd(cu, add, p, p, k, s)); };
  auto open = [&](uint64_t it) { *reinterpret_cast<volatile uint64_t*>(flag) = it; };
  // The fork scenarios' step after the side stream's fork: copy `it` from
  // pinned host memory to x (graft issues it eagerly, so the graph starts
  // after it), z = x + 2 on `side`, record `f` there, `join` waits on it and
  // computes w = z + 1.
  auto sideStepJoinedInto = [&](CUstream side, CUstream join, CUevent f, uint64_t it) {
    *reinterpret_cast<volatile uint64_t*>(pinned) = it;
    SIM_CHECK(cu.cuMemcpyHtoDAsync(x, reinterpret_cast<const void*>(pinned), 8, side));
    SIM_CHECK(simtest::launchAdd(cu, add, z, x, 0, side));  // z = x
    addTo(z, 1, side);
    addTo(z, 1, side);
    SIM_CHECK(cu.cuEventRecord(f, side));
    SIM_CHECK(cu.cuStreamWaitEvent(join, f, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, w, z, 1, join));  // w = z + 1
  };
  auto read = [](CUdeviceptr p) { return *reinterpret_cast<volatile const uint64_t*>(p); };
  // After sideStepJoinedInto: waits for `side`, reads z (the side step's
  // result, it + 2 when the step ran after the pinned copy), then opens the
  // gate and waits for the current context.
  auto sideResultThenOpen = [&](CUstream side, uint64_t it) {
    SIM_CHECK(cu.cuStreamSynchronize(side));
    const uint64_t result = read(z);
    open(it);
    SIM_CHECK(cu.cuCtxSynchronize());
    return result;
  };

  for (uint64_t it = 1; it <= kIterations; ++it) {
    uint64_t expectX = 0, gotX = 0;
    if (scenario == "exit-legacy") a = nullptr;  // the legacy default stream
    if (scenario == "exit" || scenario == "exit-legacy" || scenario == "entry") {
      launchGate(it, a);
      if (scenario == "entry") cu.cuStreamQuery(a);  // the gate is issued before the step
      addTo(y, 1, a);
      addTo(x, 1, b);
      addTo(x, 2, b);
      addTo(x, 3, b);
      SIM_CHECK(cu.cuStreamSynchronize(b));
      gotX = read(x);
      expectX = 6 * it;
      open(it);
      SIM_CHECK(cu.cuStreamSynchronize(a));
    } else if (scenario == "legacy-mixed-exit" || scenario == "legacy-mixed-entry") {
      launchGate(it, c);
      if (scenario == "legacy-mixed-entry") cu.cuStreamQuery(c);  // the gate is issued before the step
      addTo(z, 1, c);
      addTo(x, 1, nullptr);
      SIM_CHECK(simtest::launchAdd(cu, add, w, x, 0, d));  // w = x, after the legacy stream's add
      addTo(w, 1, d);
      SIM_CHECK(cu.cuStreamSynchronize(scenario == "legacy-mixed-exit" ? d : nullptr));
      const bool exit = scenario == "legacy-mixed-exit";
      gotX = read(x) + (exit ? read(w) : 0);  // x is the legacy stream's; w, D's
      expectX = exit ? it + it + 1 : it;
      open(it);
      SIM_CHECK(cu.cuStreamSynchronize(c));
      SIM_CHECK(cu.cuStreamSynchronize(d));
      addTo(y, 1, c);  // y counts iterations, as in the other scenarios
    } else if (scenario == "fork-join" || scenario == "fork-join-late-gate") {
      CUevent e, f;
      SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
      SIM_CHECK(cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING));
      addTo(y, 1, nullptr);  // y counts iterations, as in the other scenarios
      addTo(x, 1, nullptr);
      SIM_CHECK(cu.cuEventRecord(e, nullptr));
      SIM_CHECK(cu.cuStreamWaitEvent(c, e, 0));
      SIM_CHECK(simtest::launchAdd(cu, add, z, x, 0, c));  // z = x, after the legacy stream's add
      SIM_CHECK(cu.cuEventRecord(f, c));
      SIM_CHECK(cu.cuStreamWaitEvent(nullptr, f, 0));
      SIM_CHECK(simtest::launchAdd(cu, add, w, z, 1, nullptr));  // w = z + 1, after C's copy
      if (scenario == "fork-join-late-gate") launchGate(it, c);
      SIM_CHECK(cu.cuStreamSynchronize(nullptr));
      gotX = read(x) + read(w);
      expectX = it + it + 1;
      open(it);
      SIM_CHECK(cu.cuStreamSynchronize(c));
      SIM_CHECK(cu.cuEventDestroy(f));
      SIM_CHECK(cu.cuEventDestroy(e));
    } else if (scenario == "fork-before" || scenario == "fork-stale" || scenario == "fork-blocking") {
      const bool stale = scenario != "fork-before";
      CUevent e, f;
      SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
      SIM_CHECK(cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING));
      addTo(y, 1, nullptr);  // y counts iterations, as in the other scenarios
      SIM_CHECK(cu.cuEventRecord(e, nullptr));
      SIM_CHECK(cu.cuStreamWaitEvent(c, e, 0));
      if (scenario == "fork-stale") launchGate(it, nullptr);  // after E: C does not wait for it
      if (scenario == "fork-blocking") launchGate(it, d);     // C does not wait for it
      sideStepJoinedInto(c, nullptr, f, it);
      SIM_CHECK(cu.cuStreamSynchronize(stale ? c : nullptr));
      gotX = read(z) + (stale ? 0 : read(w));
      expectX = stale ? it + 2 : it + 2 + it + 3;
      open(it);
      SIM_CHECK(cu.cuCtxSynchronize());
      SIM_CHECK(cu.cuEventDestroy(f));
      SIM_CHECK(cu.cuEventDestroy(e));
    } else if (scenario == "fork-pts" || scenario == "fork-blocking-join" || scenario == "fork-recreate") {
      // fork-pts: fork "from" A (A: gate, record E), but E is re-recorded on the per-thread stream.
      // fork-blocking-join: join stream D is blocking; the gate runs on the legacy stream after E.
      // fork-recreate: as fork-blocking-join, but the join stream J is non-blocking for 20
      // iterations (graphs built), then destroyed and created blocking under the same handle.
      const bool pts = scenario == "fork-pts";
      CUstream j = pts ? a : d;
      if (scenario == "fork-recreate") {
        static CUstream jj = nullptr;
        if (!jj) SIM_CHECK(cu.cuStreamCreate(&jj, CU_STREAM_NON_BLOCKING));
        if (it == 21) {
          CUstream old = jj;
          SIM_CHECK(cu.cuStreamDestroy(jj));
          SIM_CHECK(cu.cuStreamCreate(&jj, CU_STREAM_DEFAULT));
          if (jj != old) { std::printf("handle not reused\n"); return 2; }
        }
        j = jj;
      }
      CUevent e, f;
      SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
      SIM_CHECK(cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING));
      addTo(y, 1, c);
      if (pts) launchGate(it, a);
      SIM_CHECK(cu.cuEventRecord(e, j));
      if (pts) SIM_CHECK(cu.cuEventRecord(e, CU_STREAM_PER_THREAD));
      SIM_CHECK(cu.cuStreamWaitEvent(c, e, 0));
      if (!pts) launchGate(it, nullptr);
      sideStepJoinedInto(c, j, f, it);
      gotX = sideResultThenOpen(c, it);
      expectX = it + 2;
      SIM_CHECK(cu.cuEventDestroy(f));
      SIM_CHECK(cu.cuEventDestroy(e));
    } else if (scenario == "fork-xctx") {
      // Device 1's legacy stream runs the gate; device 0's legacy stream records E; C1 (device 1,
      // non-blocking) waits on E: eagerly C1 never waits for the gate.
      static CUcontext ctxB = nullptr;
      static CUstream c1 = nullptr;
      if (!ctxB) {
        CUdevice dev1;
        SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
        SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctxB, dev1));
        SIM_CHECK(cu.cuCtxSetCurrent(ctxB));
        SIM_CHECK(cu.cuStreamCreate(&c1, CU_STREAM_NON_BLOCKING));
        SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      }
      CUevent e, f;
      SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
      addTo(y, 1, c);
      SIM_CHECK(cu.cuCtxSetCurrent(ctxB));
      SIM_CHECK(cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING));
      launchGate(it, nullptr);
      SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      SIM_CHECK(cu.cuEventRecord(e, nullptr));
      SIM_CHECK(cu.cuCtxSetCurrent(ctxB));
      SIM_CHECK(cu.cuStreamWaitEvent(c1, e, 0));
      sideStepJoinedInto(c1, nullptr, f, it);
      gotX = sideResultThenOpen(c1, it);
      expectX = it + 2;
      SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      SIM_CHECK(cu.cuCtxSynchronize());
      SIM_CHECK(cu.cuEventDestroy(f));
      SIM_CHECK(cu.cuEventDestroy(e));
    } else if (scenario == "mid-record") {
      CUevent e;
      SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
      addTo(x, 1, a);
      addTo(x, 2, a);
      SIM_CHECK(cu.cuEventRecord(e, a));
      launchGate(it, a);
      addTo(y, 1, a);
      SIM_CHECK(cu.cuEventSynchronize(e));
      gotX = read(x);
      expectX = 3 * it;
      open(it);
      SIM_CHECK(cu.cuStreamSynchronize(a));
      SIM_CHECK(cu.cuEventDestroy(e));
    } else {  // mid-wait
      CUevent e, f;
      SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
      SIM_CHECK(cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING));
      launchGate(it, c);
      addTo(z, 1, c);
      SIM_CHECK(cu.cuEventRecord(e, c));
      cu.cuStreamQuery(c);  // the gate, z's step and the record are issued before the step
      addTo(x, 1, a);
      addTo(x, 2, a);
      SIM_CHECK(cu.cuEventRecord(f, a));
      SIM_CHECK(cu.cuStreamWaitEvent(a, e, 0));
      addTo(y, 1, a);
      SIM_CHECK(simtest::launchAdd(cu, add, w, z, 0, a));  // w = z, after the wait
      SIM_CHECK(cu.cuEventSynchronize(f));
      gotX = read(x);
      expectX = 3 * it;
      open(it);
      SIM_CHECK(cu.cuStreamSynchronize(a));
      if (read(w) != it) {
        std::printf("sim_gated_release mid-wait: iteration %llu: A read z = %llu after waiting on C's event, "
                    "expected %llu\n", static_cast<unsigned long long>(it), static_cast<unsigned long long>(read(w)),
                    static_cast<unsigned long long>(it));
        return 1;
      }
      SIM_CHECK(cu.cuEventDestroy(f));  // in this order each gets its handle back
      SIM_CHECK(cu.cuEventDestroy(e));
    }
    if (gotX != expectX) {
      std::printf("sim_gated_release %s: iteration %llu: x = %llu when the host opened the gate, expected %llu\n",
                  scenario.c_str(), static_cast<unsigned long long>(it), static_cast<unsigned long long>(gotX),
                  static_cast<unsigned long long>(expectX));
      return 1;
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  if (read(y) != kIterations) {
    std::printf("sim_gated_release %s: y = %llu, expected %llu\n", scenario.c_str(),
                static_cast<unsigned long long>(read(y)), static_cast<unsigned long long>(kIterations));
    return 1;
  }
  if (simtest::failedCalls()) return 1;
  SimCounters counters{};
  simCounters(&counters);
  std::printf("sim_gated_release %s: %llu iterations right; kernels from graphs %llu, eager %llu\n",
              scenario.c_str(), static_cast<unsigned long long>(kIterations),
              static_cast<unsigned long long>(counters.effectsGraph),
              static_cast<unsigned long long>(counters.effectsEager));
  if (expectGraphs && counters.effectsGraph * 2 < counters.effectsEager) {
    std::printf("sim_gated_release %s: most work ran eagerly, so the check proved nothing\n", scenario.c_str());
    return 1;
  }
  return 0;
}
