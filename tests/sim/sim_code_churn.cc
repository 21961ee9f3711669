// sim_code_churn: a loop whose library loads code, launches it once and
// unloads it again in the middle of every iteration (as cuFFT does with a
// plan cache too small for the plans a step needs), among launches of kernels
// that stay loaded.
//
// Each iteration: six launches of persistent kernels (sim_add, a built-in
// library kernel) on a created stream, then a module (or, every other
// iteration, a library) with one sim_add kernel is loaded, its kernel run
// once and the code unloaded, then six more persistent launches. The
// simulator reuses the freed handle values, so the transient kernel's handle
// is the same every iteration. Values are read back every 10 iterations
// (exit 1 on a wrong value or a failed call).
//   sim_code_churn [--expect-graphs PCT]
// --expect-graphs: at least PCT % of the kernels' effects came from graphs
// (the persistent launches are twelve of every thirteen): an unload must
// drop only what used the unloaded code, and a kernel whose code lives for
// one launch must not pull the graphs around it down with it every time.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

constexpr int kIterations = 120;
constexpr char kImage[] = "sim-image: sim_add_transient(8,8,8)";

}  // namespace

int main(int argc, char** argv) {
  int expectGraphs = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expect-graphs") == 0 && i + 1 < argc) {
      expectGraphs = std::atoi(argv[++i]);
    } else {
      std::printf("usage: sim_code_churn [--expect-graphs PCT]\n");
      return 2;
    }
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_code_churn", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  simtest::CodeApi code;
  if (!simtest::loadCodeApi(drv, &code)) return 2;
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUfunction add = simtest::libraryKernel3("sim_add_persistent");
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSynchronize());
  SimCounters before{};
  simCounters(&before);
  uint64_t hx = 0, hy = 0;
  int bad = 0;
  for (int it = 1; it <= kIterations; ++it) {
    for (int k = 0; k < 3; ++k) {
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, add, x, y, 2, s));
      hy = hx + 1, hx = hy + 2;
    }
    // The transient code: y = x + it.
    CUfunction transient = nullptr;
    CUmodule module = nullptr;
    CUlibrary library = nullptr;
    if (it % 2) {
      SIM_CHECK(code.moduleLoadData(&module, kImage));
      SIM_CHECK(code.moduleGetFunction(&transient, module, "sim_add_transient"));
    } else {
      CUkernel kernel = nullptr;
      SIM_CHECK(code.libraryLoadData(&library, kImage, nullptr, nullptr, 0, nullptr, nullptr, 0));
      SIM_CHECK(code.libraryGetKernel(&kernel, library, "sim_add_transient"));
      transient = reinterpret_cast<CUfunction>(kernel);
    }
    if (simtest::failedCalls()) break;
    SIM_CHECK(simtest::launchAdd(cu, transient, y, x, uint64_t(it), s));
    hy = hx + uint64_t(it);
    SIM_CHECK(module ? code.moduleUnload(module) : code.libraryUnload(library));
    for (int k = 0; k < 3; ++k) {
      SIM_CHECK(simtest::launchAdd(cu, add, x, y, 3, s));
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 4, s));
      hx = hy + 3, hy = hx + 4;
    }
    if (it % 10 == 0) {
      uint64_t got = 0;
      SIM_CHECK(cu.cuStreamSynchronize(s));
      SIM_CHECK(cu.cuMemcpyDtoH(&got, y, 8));
      if (got != hy && bad++ < 5)
        std::printf("sim_code_churn: iteration %d: y = %llu, expected %llu\n", it, (unsigned long long)got,
                    (unsigned long long)hy);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  SimCounters after{};
  simCounters(&after);
  const uint64_t graph = after.effectsGraph - before.effectsGraph;
  const uint64_t eager = after.effectsEager - before.effectsEager;
  std::printf("sim_code_churn: kernels from graphs %llu, eager %llu\n", (unsigned long long)graph,
              (unsigned long long)eager);
  if (bad || simtest::failedCalls()) {
    std::printf("sim_code_churn: %d wrong values, %d failed calls\n", bad, simtest::failedCalls());
    return 1;
  }
  if (expectGraphs >= 0 && graph * 100 < uint64_t(expectGraphs) * (graph + eager)) {
    std::printf("sim_code_churn: under %d %% of the kernels ran from graphs\n", expectGraphs);
    return 1;
  }
  std::printf("sim_code_churn: every value right\n");
  return 0;
}
