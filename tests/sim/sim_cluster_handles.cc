// sim_cluster_handles: a kernel's required cluster width changed every 25
// iterations of a loop graft replays, through one of the kernel's handles,
// with the loop launching the same or another one. The driver is
// libsim_cluster_shim.so (sim_cluster_shim.cc), which gives a library
// kernel a function of its own in each context, as the real driver does.
// The kernel adds its launch's width to its result; a graph made under the
// old width must not be replayed after the change (exit 1 on a wrong value).
// (Written by a reviewer of graft's cluster-attribute change; its modes
// fn-launch and other-ctx failed with that change's first version.)
//   sim_cluster_handles SHIM MODE
//  fn-launch   : the loop launches K's function F (cuKernelGetFunction); the
//                program changes K's required cluster width with
//                cuKernelSetAttribute(K) every 25 iterations.
//  kernel-set  : control: the loop launches K; cuKernelSetAttribute(K).
//  fn-set      : control: the loop launches K; cuFuncSetAttribute(F) (same ctx).
//  other-ctx   : K launched a few times in device 0's context first, then the
//                loop launches K in device 1's context and changes the width with
//                cuFuncSetAttribute(F1) (F1 = K's function there).
//  fn1-kset-ctx0 : the loop launches F1 (K's function in device 1's context),
//                which graft resolves; the width for device 1 is set with
//                cuKernelSetAttribute(K, 1) while device 0's context is
//                current (K never launched). F1's name differs from K's here,
//                so graft must find it without the same-name rule;
//  fn1-kset-ctx0-samename: the same with F1 named as K (as on the real
//                driver, where a kernel's functions share its name).
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include "sim_api.h"
#include "sim_driver_loader.h"

constexpr CUfunction_attribute kW = CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH;


int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string mode = argv[2];
  simtest::Driver drv;
  if (std::string err; !simtest::loadDriver(&drv, &err, argv[1])) { std::printf("loading shim failed\n"); return 2; }
  auto& cu = drv.plain;
  auto reg = reinterpret_cast<void (*)(CUkernel, CUcontext, CUfunction)>(dlsym(drv.handle, "shimRegisterFunction"));
  decltype(&cuKernelGetFunction) getFunction = nullptr;
  {
    void* p = nullptr;
    drv.getProcAddress("cuKernelGetFunction", &p, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, nullptr);
    getFunction = reinterpret_cast<decltype(getFunction)>(p);
  }
  if (!reg || !getFunction) { std::printf("no shimRegisterFunction / cuKernelGetFunction\n"); return 2; }
  const bool fn1 = mode.rfind("fn1-kset-ctx0", 0) == 0;
  const bool sameName = mode.find("samename") != std::string::npos;
  const bool otherCtx = mode == "other-ctx" || fn1;
  CUcontext ctx[2] = {};
  for (int d = 0; d < (otherCtx ? 2 : 1); ++d) {
    CUdevice dev;
    if (cu.cuInit(0) != CUDA_SUCCESS || cu.cuDeviceGet(&dev, d) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&ctx[d], dev) != CUDA_SUCCESS) { std::printf("no ctx %d\n", d); return 2; }
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx[0]));
  CUfunction add = simtest::libraryKernel3("sim_add_h");
  CUfunction kf = simtest::libraryKernel3("sim_add_h_k");
  const CUkernel K = reinterpret_cast<CUkernel>(kf);
  const size_t sizes[] = {8, 8, 8};
  CUfunction F0 = simKernelCreate("sim_add_h_f0", SIM_KERNEL_FUNCTION, 3, sizes, nullptr);
  reg(K, ctx[0], F0);
  CUfunction F1 = nullptr;
  if (otherCtx) { F1 = simKernelCreate(sameName ? "sim_add_h_k" : "sim_add_h_f1", SIM_KERNEL_FUNCTION, 3, sizes, nullptr); reg(K, ctx[1], F1); }
  CUfunction F = nullptr;
  SIM_CHECK(getFunction(&F, K));
  if (F != F0) { std::printf("shim: cuKernelGetFunction did not give F0\n"); return 2; }

  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  if (otherCtx) {
    // A few launches of K in device 0's context (graft resolves K there: its function F0).
    if (!fn1) for (int i = 0; i < 3; ++i) SIM_CHECK(simtest::launchAdd(cu, kf, x, x, 1, s));
    SIM_CHECK(cu.cuCtxSynchronize());
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[1]));
    SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
    CUfunction got = nullptr;
    SIM_CHECK(getFunction(&got, K));
    if (got != F1) { std::printf("shim: no F1\n"); return 2; }
  }
  CUfunction launched = mode == "fn-launch" ? F : fn1 ? F1 : kf;
  const int widths[4] = {0, 2, 4, 1};
  int bad = 0;
  SimCounters before{};
  simCounters(&before);
  for (int it = 0; it < 240; ++it) {
    const int w = widths[(it / 25) % 4];
    const bool mid = mode == "kernel-set-mid";
    auto doSet = [&] {
      if (mode == "fn-launch" || mode == "kernel-set" || mid) SIM_CHECK(cu.cuKernelSetAttribute(kW, w, K, otherCtx ? 1 : 0));
      else if (mode == "fn-set") SIM_CHECK(cu.cuFuncSetAttribute(F, kW, w));
      else if (fn1) { SIM_CHECK(cu.cuCtxSetCurrent(ctx[0])); SIM_CHECK(cu.cuKernelSetAttribute(kW, w, K, 1)); SIM_CHECK(cu.cuCtxSetCurrent(ctx[1])); }
      else SIM_CHECK(cu.cuFuncSetAttribute(F1, kW, w));
    };
    if (it % 25 == 0 && !mid) {
      if (mode == "fn-launch" || mode == "kernel-set") SIM_CHECK(cu.cuKernelSetAttribute(kW, w, K, otherCtx ? 1 : 0));
      else if (mode == "fn-set") SIM_CHECK(cu.cuFuncSetAttribute(F, kW, w));
      else if (fn1) { SIM_CHECK(cu.cuCtxSetCurrent(ctx[0])); SIM_CHECK(cu.cuKernelSetAttribute(kW, w, K, 1)); SIM_CHECK(cu.cuCtxSetCurrent(ctx[1])); }
      else SIM_CHECK(cu.cuFuncSetAttribute(F1, kW, w));
    }
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
    if (it % 25 == 0 && mid) doSet();
    SIM_CHECK(simtest::launchAdd(cu, launched, x, z, 7, s));  // x = z + 7 + width
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
    hx += 1 + 2 + 7 + uint64_t(w) + 3 + 4;
    if (it % 10 == 9) {
      uint64_t got = 0;
      SIM_CHECK(cu.cuStreamSynchronize(s));
      SIM_CHECK(cu.cuMemcpyDtoH(&got, x, 8));
      if (got != hx) {
        if (bad < 5) std::printf("iteration %d: value %llu, expected %llu\n", it, (unsigned long long)got, (unsigned long long)hx);
        ++bad;
        hx = got;  // go on from what ran
      }
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_cluster_handles %s: %d wrong values, %d failed calls; kernels from graphs %llu, eager %llu\n", mode.c_str(),
              bad, simtest::failedCalls(), (unsigned long long)(c.effectsGraph - before.effectsGraph),
              (unsigned long long)(c.effectsEager - before.effectsEager));
  return bad || simtest::failedCalls() ? 1 : 0;
}
