// sim_settings_review: calls that change what a later launch does or whether
// the driver takes it ("settings"), around a loop graft replays; every return
// code and value must be what the simulated driver gives eagerly (helper-
// written review of the settings calls; one --mode per suspected divergence).
//
//   cig      a loop of five launches whose middle one asks for 40 KiB of
//            dynamic shared memory (under the kernel's 48 KiB allowance);
//            after 100 iterations the program turns the CIG shared memory
//            fallback off (cuCtxSetLimit(CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED,
//            0)), under which cuda.h says the driver fails a launch that uses
//            more shared memory than the context has (CU_LIMIT_SHMEM_SIZE,
//            32 KiB in the simulator: Context::cigSharedMemFallback); every
//            later 40 KiB launch must be refused at its call and change
//            nothing, although it matches the graph graft made before.
//   legacy   a loop that launches a kernel with cuLaunchKernel, then sets its
//            deprecated launch state (cuFuncSetBlockShape, cuParamSetSize,
//            cuParamSetv) and launches it again with cuLaunchGridAsync after
//            one more kernel; cuda.h: "Calling cuLaunchKernel() invalidates
//            the persistent function state set through" those calls, so the
//            cuLaunchKernel must reach the driver before the state is set
//            (KernelObj::legacy). Every 7th iteration the kernel between is
//            another one (the run graft holds mismatches there and its held
//            launches are issued then). Every cuLaunchGridAsync must succeed
//            and add its value.
//   cig-control, legacy-control  the same loops without the change (the
//            fallback stays on; the kernel between never changes): they pass
//            under graft, and cig-control with --expect-graphs shows that
//            its loop is graphed (graft runs a kernel whose old-API launch
//            state the program sets eagerly, so legacy-control's loop is
//            graphed only in part).
//
//   sim_settings_review --mode MODE [--expect-graphs]
// Values are read back every 10 iterations; exit 1 on a wrong value, a return
// code other than eager's, or a failed call.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

struct Counts {
  uint64_t graph = 0, eager = 0;
};
Counts countsSince(const SimCounters& before) {
  SimCounters c{};
  simCounters(&c);
  return {c.effectsGraph - before.effectsGraph, c.effectsEager - before.effectsEager};
}

bool readBack(const simtest::DriverApi& cu, CUstream s, const char* part, int it, CUdeviceptr d, uint64_t want) {
  uint64_t got = 0;
  SIM_CHECK(cu.cuStreamSynchronize(s));
  SIM_CHECK(cu.cuMemcpyDtoH(&got, d, 8));
  if (got == want) return true;
  std::printf("sim_settings_review: %s, iteration %d: value %llu, expected %llu\n", part, it,
              (unsigned long long)got, (unsigned long long)want);
  return false;
}

int finish(const char* mode, int bad, int wrongCodes, const Counts& c, bool expectGraphs) {
  std::printf("sim_settings_review: %s: %d wrong values, %d wrong codes, %d failed calls; kernels from graphs %llu, "
              "eager %llu\n",
              mode, bad, wrongCodes, simtest::failedCalls(), (unsigned long long)c.graph,
              (unsigned long long)c.eager);
  if (bad || wrongCodes || simtest::failedCalls()) return 1;
  if (expectGraphs && c.graph * 2 < c.graph + c.eager) {
    std::printf("sim_settings_review: %s: under half of the kernels ran from graphs\n", mode);
    return 1;
  }
  return 0;
}

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
  if (mode != "cig" && mode != "cig-control" && mode != "legacy" && mode != "legacy-control") {
    std::printf("usage: sim_settings_review --mode cig|cig-control|legacy|legacy-control [--expect-graphs]\n");
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_settings_review", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUfunction add = simtest::libraryKernel3("sim_add_settings");
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  int bad = 0, wrongCodes = 0;
  uint64_t hx = 0;
  SimCounters before{};
  simCounters(&before);

  if (mode == "cig" || mode == "cig-control") {
    CUfunction big = simtest::libraryKernel3("sim_add_cig_shared");
    for (int it = 0; it < 160; ++it) {
      if (it == 100 && mode == "cig") SIM_CHECK(cu.cuCtxSetLimit(CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED, 0));
      const bool refused = mode == "cig" && it >= 100;
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
      uint64_t seven = 7;
      void* args[] = {&x, &z, &seven};
      const CUresult r = cu.cuLaunchKernel(big, 1, 1, 1, 1, 1, 1, 40 * 1024, s, args, nullptr);  // x = z + 7
      const CUresult want = refused ? CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES : CUDA_SUCCESS;
      if (r != want && wrongCodes++ < 5)
        std::printf("sim_settings_review: cig, iteration %d: the 40 KiB launch returned %d, expected %d\n", it,
                    int(r), int(want));
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
      SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
      hx += (refused ? 0 : 1 + 2 + 7) + 3 + 4;
      if (it % 10 == 9 && !readBack(cu, s, mode.c_str(), it, x, hx)) ++bad;
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    return finish(mode.c_str(), bad, wrongCodes, countsSince(before), expectGraphs);
  }

  // legacy, legacy-control
  CUresult (*setBlockShape)(CUfunction, int, int, int) = nullptr;
  CUresult (*paramSetSize)(CUfunction, unsigned) = nullptr;
  CUresult (*paramSetv)(CUfunction, int, void*, unsigned) = nullptr;
  CUresult (*launchGridAsync)(CUfunction, int, int, CUstream) = nullptr;
  if (!simtest::lookupProc(drv, "cuFuncSetBlockShape", &setBlockShape) ||
      !simtest::lookupProc(drv, "cuParamSetSize", &paramSetSize) ||
      !simtest::lookupProc(drv, "cuParamSetv", &paramSetv) ||
      !simtest::lookupProc(drv, "cuLaunchGridAsync", &launchGridAsync))
    return 2;
  const size_t sizes[] = {8, 8, 8};
  // A module function (the deprecated calls take CUfunctions).
  CUfunction old = simKernelCreate("sim_add_legacy", SIM_KERNEL_FUNCTION, 3, sizes, nullptr);
  CUfunction other = simtest::libraryKernel3("sim_add_other");
  for (int it = 0; it < 160; ++it) {
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
    SIM_CHECK(simtest::launchAdd(cu, old, x, z, 7, s));  // cuLaunchKernel: invalidates old's legacy state
    // The state for the cuLaunchGridAsync below: x = y + 100.
    SIM_CHECK(setBlockShape(old, 1, 1, 1));
    SIM_CHECK(paramSetSize(old, 24));
    uint64_t params[3] = {uint64_t(x), uint64_t(y), 100};
    SIM_CHECK(paramSetv(old, 0, params, sizeof params));
    const bool mismatch = mode == "legacy" && it % 7 == 3;
    SIM_CHECK(simtest::launchAdd(cu, mismatch ? other : add, y, x, 3, s));
    const CUresult r = launchGridAsync(old, 1, 1, s);  // x = y + 100
    if (r != CUDA_SUCCESS && wrongCodes++ < 5)
      std::printf("sim_settings_review: %s, iteration %d: cuLaunchGridAsync returned %d, expected 0\n", mode.c_str(),
                  it, int(r));
    hx += 1 + 2 + 7 + 3 + 100;
    if (it % 10 == 9 && !readBack(cu, s, mode.c_str(), it, x, hx)) ++bad;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  return finish(mode.c_str(), bad, wrongCodes, countsSince(before), expectGraphs);
}
