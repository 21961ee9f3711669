// sim_partial_unload: unloads of some code among kernels that stay loaded,
// where graft forgets only the unloaded code (Runtime::codeUnloading); each
// mode is run under graft by tests/sim/meson.build, which checks its report.
//   sim_partial_unload --mode unplaced|otherctx|stale-extra|reload-once|reload-often [--iters N]
//
// unplaced: persistent library kernels whose owner the driver does not report
//   (cuKernelGetLibrary / cuFuncGetModule fail, as on a driver without
//   cuKernelGetLibrary); one module is loaded, run once and unloaded at
//   iteration 3 only: the persistent kernels may have been of that code, so
//   their graphs go, but are built again (>= 90 % through graphs).
// otherctx: persistent function kernels in device 0's context; at iteration 3
//   a library is loaded, run once and unloaded with device 1's context
//   current (the library may have had a module in device 0's context): as
//   unplaced.
// stale-extra: a module kernel T launched 16 times per iteration through
//   `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER), its module unloaded and loaded
//   again every iteration, so that a period is confirmed right after a load
//   and before T's launches; the next iteration has no T, unloads and loads
//   another image whose kernel U gets T's handle; then iterations with U.
//   A run built from ops recorded before an unload must not put the dead
//   handle in a graph (the simulator refuses to launch such a graph: graft
//   would report graph_launch_failed).
// reload-once: a module kernel run in 5 iterations, its module unloaded and
//   loaded again once, then 195 more iterations: one short life of the code
//   does not make its kernel eager for good (>= 90 % through graphs).
// reload-often: a module kernel run 4 times in each iteration, each after 8
//   launches of a kernel that stays loaded, its module unloaded and loaded again every
//   8 iterations (32 launches of it each time, as cuFFT's plans of one
//   resolution live for a few steps): the graphs around it must not be
//   dropped and built again at every unload (meson bounds graphs built).
// Exit 1 on a wrong value or a failed program call.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

simtest::CodeApi code;
decltype(&::cuCtxPushCurrent) ctxPush = nullptr;
decltype(&::cuCtxPopCurrent) ctxPop = nullptr;

CUresult launchAddExtra(const simtest::DriverApi& cu, CUfunction k, CUdeviceptr to, CUdeviceptr from, uint64_t add,
                        unsigned grid, CUstream s) {
  uint64_t buf[3] = {to, from, add};
  size_t size = sizeof buf;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  return cu.cuLaunchKernel(k, grid, 1, 1, 1, 1, 1, 0, s, nullptr, extra);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "unplaced";
  int iters = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mode") == 0 && i + 1 < argc) mode = argv[++i];
    else if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) iters = std::atoi(argv[++i]);
    else {
      std::printf("usage: sim_partial_unload --mode unplaced|otherctx|stale-extra|reload-once|reload-often "
                  "[--iters N]\n");
      return 2;
    }
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_partial_unload", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  if (!simtest::loadCodeApi(drv, &code) || !simtest::lookupProc(drv, "cuCtxPushCurrent", &ctxPush) ||
      !simtest::lookupProc(drv, "cuCtxPopCurrent", &ctxPop))
    return 2;
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSynchronize());
  uint64_t hx = 0, hy = 0;
  int bad = 0;
  auto checkY = [&](int it) {
    uint64_t got = 0;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    SIM_CHECK(cu.cuMemcpyDtoH(&got, y, 8));
    if (got != hy && bad++ < 5)
      std::printf("sim_partial_unload: iteration %d: y = %llu, expected %llu\n", it, (unsigned long long)got,
                  (unsigned long long)hy);
  };
  SimCounters before{};

  if (mode == "unplaced" || mode == "otherctx") {
    CUfunction a, b;
    if (mode == "unplaced") {
      // A driver that cannot say whose code a kernel is.
      for (int k = 1; k <= 100000; ++k) {
        simInjectFailure("cuKernelGetLibrary", k, CUDA_ERROR_NOT_SUPPORTED);
        simInjectFailure("cuFuncGetModule", k, CUDA_ERROR_NOT_SUPPORTED);
      }
      a = simtest::libraryKernel3("sim_add_p1");
      b = simtest::libraryKernel3("sim_add_p2");
    } else {
      const size_t sizes[] = {8, 8, 8};
      a = simKernelCreate("sim_add_f1", SIM_KERNEL_FUNCTION, 3, sizes, nullptr);
      b = simKernelCreate("sim_add_f2", SIM_KERNEL_FUNCTION, 3, sizes, nullptr);
    }
    CUdevice dev1;
    CUcontext ctx1 = nullptr;
    if (mode == "otherctx") {
      SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
      SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx1, dev1));
    }
    simCounters(&before);
    for (int it = 1; it <= iters; ++it) {
      for (int k = 0; k < 3; ++k) {
        SIM_CHECK(simtest::launchAdd(cu, a, y, x, 1, s));
        SIM_CHECK(simtest::launchAdd(cu, b, x, y, 2, s));
        hy = hx + 1, hx = hy + 2;
      }
      SIM_CHECK(cu.cuMemcpyDtoH(&hx, x, 0));  // (no-op copy: a host barrier)
      if (it == 3) {
        if (mode == "unplaced") {
          CUmodule m;
          CUfunction t;
          SIM_CHECK(code.moduleLoadData(&m, "sim-image: sim_add_once(8,8,8)"));
          SIM_CHECK(code.moduleGetFunction(&t, m, "sim_add_once"));
          SIM_CHECK(simtest::launchAdd(cu, t, y, x, 5, s));
          hy = hx + 5;
          SIM_CHECK(code.moduleUnload(m));
        } else {
          SIM_CHECK(ctxPush(ctx1));
          CUlibrary l;
          CUkernel t;
          CUdeviceptr z = simtest::zeroedBuffer(cu);
          SIM_CHECK(code.libraryLoadData(&l, "sim-image: sim_add_once(8,8,8)", nullptr, nullptr, 0, nullptr, nullptr, 0));
          SIM_CHECK(code.libraryGetKernel(&t, l, "sim_add_once"));
          SIM_CHECK(simtest::launchAdd(cu, reinterpret_cast<CUfunction>(t), z, z, 5, nullptr));
          SIM_CHECK(code.libraryUnload(l));
          CUcontext popped;
          SIM_CHECK(ctxPop(&popped));
        }
      }
      SIM_CHECK(cu.cuStreamSynchronize(s));
      if (it % 10 == 0) checkY(it);
    }
  } else if (mode == "stale-extra") {
    CUfunction p = simtest::libraryKernel3("sim_add_persistent");
    const char* imageA = "sim-image: sim_add_t(8,8,8)";
    const char* imageB = "sim-image: sim_add_u(8,8,8)";
    CUmodule m = nullptr;
    CUfunction t = nullptr;
    SIM_CHECK(code.moduleLoadData(&m, imageA));
    SIM_CHECK(code.moduleGetFunction(&t, m, "sim_add_t"));
    const CUfunction tHandle = t;
    simCounters(&before);
    // Iteration: V, T x16 (extra), Y, unload, load, Z. The period is
    // confirmed at Z of iteration 2 (GRAFT_WARMUP=2), after the load.
    const int confirmIter = 2;
    for (int it = 1; it <= iters; ++it) {
      const bool withT = it != confirmIter + 1;
      SIM_CHECK(simtest::launchAdd(cu, p, y, x, 1, s));  // V
      hy = hx + 1;
      if (withT) {
        for (unsigned g = 1; g <= 16; ++g) {
          SIM_CHECK(launchAddExtra(cu, t, x, y, g, g, s));  // T (or U), grid g
          hx = hy + g;
          SIM_CHECK(simtest::launchAdd(cu, p, y, x, 0, s));
          hy = hx;
        }
      }
      SIM_CHECK(simtest::launchAdd(cu, p, y, x, 2, s));  // Y
      hy = hx + 2;
      SIM_CHECK(code.moduleUnload(m));
      // From the iteration without T on, image B: its kernel gets T's handle.
      const bool b = it >= confirmIter + 1;
      SIM_CHECK(code.moduleLoadData(&m, b ? imageB : imageA));
      SIM_CHECK(code.moduleGetFunction(&t, m, b ? "sim_add_u" : "sim_add_t"));
      if (t != tHandle) std::printf("sim_partial_unload: handle not reused at iteration %d\n", it);
      SIM_CHECK(simtest::launchAdd(cu, p, x, y, 3, s));  // Z
      hx = hy + 3;
      checkY(it);
    }
  } else if (mode == "reload-once") {
    // A module loaded, its kernel T run in 5 iterations, the module unloaded
    // and loaded again (same image), then the loop goes on for good.
    CUfunction p = simtest::libraryKernel3("sim_add_persistent");
    CUmodule m = nullptr;
    CUfunction t = nullptr;
    SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
    simCounters(&before);
    for (int it = 1; it <= iters; ++it) {
      if (it == 6) {
        SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
      }
      for (int k = 0; k < 3; ++k) {
        SIM_CHECK(simtest::launchAdd(cu, p, y, x, 1, s));
        SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
        hy = hx + 1, hx = hy + 1;
      }
      SIM_CHECK(simtest::launchAdd(cu, t, y, x, 7, s));
      hy = hx + 7;
      for (int k = 0; k < 3; ++k) {
        SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
        SIM_CHECK(simtest::launchAdd(cu, p, y, x, 1, s));
        hx = hy + 1, hy = hx + 1;
      }
      SIM_CHECK(cu.cuStreamSynchronize(s));
      if (it % 10 == 0) checkY(it);
    }
  } else if (mode == "reload-often") {
    CUfunction p = simtest::libraryKernel3("sim_add_persistent");
    CUmodule m = nullptr;
    CUfunction t = nullptr;
    SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
    simCounters(&before);
    for (int it = 1; it <= iters; ++it) {
      if (it % 8 == 0) {
        SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
      }
      for (int k = 0; k < 4; ++k) {
        for (int j = 0; j < 4; ++j) {
          SIM_CHECK(simtest::launchAdd(cu, p, y, x, 1, s));
          SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
          hy = hx + 1, hx = hy + 1;
        }
        SIM_CHECK(simtest::launchAdd(cu, t, y, x, 7, s));
        SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
        hy = hx + 7, hx = hy + 1;
      }
      SIM_CHECK(simtest::launchAdd(cu, p, y, x, 1, s));
      hy = hx + 1;
      SIM_CHECK(cu.cuStreamSynchronize(s));
      if (it % 10 == 0) checkY(it);
    }
  } else {
    std::printf("sim_partial_unload: unknown mode %s\n", mode.c_str());
    return 2;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  simtest::printEffectsSince("sim_partial_unload", before);
  if (bad || simtest::failedCalls()) {
    std::printf("sim_partial_unload: %d wrong values, %d failed calls\n", bad, simtest::failedCalls());
    return 1;
  }
  std::printf("sim_partial_unload: every value right\n");
  return 0;
}
