// sim_allowance_devices: graft's tracked dynamic shared memory allowance
// (KernelInfo::sharedMemAllowance) against the driver's real one where the
// allowance is per device and a function-level value overrides the
// kernel-level one, as cuda.h documents for cuKernelSetAttribute. The driver
// is libsim_allowance_shim.so (the simulator behind a model of those rules),
// loaded the way cudart loads libcuda.
//   sim_allowance_devices SHIM MODE
// A loop of five launches (the middle one a library kernel with 64 KiB of
// dynamic shared memory, arguments fixed) runs 60 times under a 64 KiB
// allowance, so graft replays it; then the allowance the loop's launches get is
// lowered to 48 KiB, and the loop runs 40 times more: the 64 KiB launch must be
// refused every time (CUDA_ERROR_INVALID_VALUE) and not run, as eagerly.
// MODE:
//   devices         the loop on device 1; lowered there with
//                   cuKernelSetAttribute(.., dev 1) while device 1's context is
//                   current, then raised to 64 KiB for device 0 with
//                   cuKernelSetAttribute(.., dev 0) while device 0's context is
//                   current (a program configuring each device in turn);
//   devices-control the same without the raise for device 0;
//   override        the loop on device 0 under a function-level 64 KiB
//                   (cuFuncSetAttribute), lowered to 48 KiB the same way, then
//                   cuKernelSetAttribute(.., 64 KiB, dev 0): a kernel-level
//                   value, which the function-level one overrides;
//   override-control the same without the cuKernelSetAttribute.
//   retry           (run with SIM_FAIL=cuGraphLaunch:N:1 and slow graph launches)
//                   every iteration sets the kernel-level allowance to 64 KiB
//                   (cuKernelSetAttribute, device 0), runs the loop and lowers it
//                   to 48 KiB, so a graph launch that fails on graft's launch
//                   thread is re-issued eagerly under 48 KiB: graft raises the
//                   allowance for that launch and puts it back. It must put back
//                   the kernel-level value it raised: a function-level value
//                   left behind overrides the next iteration's
//                   cuKernelSetAttribute, and the 64 KiB launches after it are
//                   refused. All 100 iterations' launches must run.
//   retry-fn        retry, the kernel given a function of its own (the shim's
//                   shimRegisterFunction, as on the real driver) and the loop
//                   launching that function: graft must find the kernel it is
//                   of and raise and put back the kernel-level value there too;
//   retry-kfn       the same, the loop launching the kernel (control);
//   retry-both      retry, with the function-level value also set to 64 KiB and
//                   lowered to 48 KiB with the kernel's: the kernel-level
//                   value equals the one in effect but does not decide it, so
//                   graft must raise the function's own value.
// Exit 1 on a wrong return code or value.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

constexpr CUfunction_attribute kAttr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::printf("usage: sim_allowance_devices SHIM devices|devices-control|override|override-control|retry|retry-fn|retry-kfn|retry-both\n");
    return 2;
  }
  const std::string mode = argv[2];
  const bool devices = mode.rfind("devices", 0) == 0;
  const bool control = mode.find("control") != std::string::npos;
  const bool both = mode == "retry-both";
  const bool viaFn = mode == "retry-fn" || mode == "retry-kfn";
  const bool launchFn = mode == "retry-fn";
  const bool retry = mode == "retry" || both || viaFn;
  if (!devices && !retry && mode.rfind("override", 0) != 0) return 2;
  simtest::Driver drv;
  if (std::string err; !simtest::loadDriver(&drv, &err, argv[1])) {
    std::printf("sim_allowance_devices: loading %s failed\n", argv[1]);
    return 2;
  }
  auto& cu = drv.plain;
  CUcontext ctx[2];
  for (int d = 0; d < 2; ++d) {
    CUdevice dev;
    if (cu.cuInit(0) != CUDA_SUCCESS || cu.cuDeviceGet(&dev, d) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&ctx[d], dev) != CUDA_SUCCESS) {
      std::printf("sim_allowance_devices: no context on device %d (SIM_DEVICES=2)\n", d);
      return 2;
    }
  }
  const int loopDevice = devices ? 1 : 0;
  SIM_CHECK(cu.cuCtxSetCurrent(ctx[loopDevice]));
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUfunction add = simtest::libraryKernel3("sim_add_allow");
  CUfunction big = simtest::libraryKernel3("sim_add_allow_big");
  CUfunction fnHandle = nullptr;
  if (viaFn) {
    // big's function: a handle distinct from the CUkernel (as on the real driver); the loop launches it.
    auto reg = reinterpret_cast<void (*)(CUkernel, CUcontext, CUfunction)>(dlsym(drv.handle, "shimRegisterFunction"));
    const size_t sizes[] = {8, 8, 8};
    CUfunction fn = simKernelCreate("sim_add_allow_big_fn", SIM_KERNEL_FUNCTION, 3, sizes, nullptr);
    if (!reg) return 2;
    reg(reinterpret_cast<CUkernel>(big), ctx[loopDevice], fn);
    decltype(&cuKernelGetFunction) getFunction = nullptr;
    if (!simtest::lookupProc(drv, "cuKernelGetFunction", &getFunction)) return 2;
    CUfunction got = nullptr;
    SIM_CHECK(getFunction(&got, reinterpret_cast<CUkernel>(big)));
    if (got != fn) { std::printf("no distinct function\n"); return 2; }
    fnHandle = fn;
  }
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  if (devices || retry) SIM_CHECK(cu.cuKernelSetAttribute(kAttr, 65536, reinterpret_cast<CUkernel>(big), loopDevice));
  else SIM_CHECK(cu.cuFuncSetAttribute(big, kAttr, 65536));
  CUstream idle;
  SIM_CHECK(cu.cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING));

  uint64_t hx = 0, hy = 0, hz = 0;
  int wrongCodes = 0, wrongValues = 0;
  auto iteration = [&](const char* part, int it, bool allowed) {
    if (retry) SIM_CHECK(cu.cuKernelSetAttribute(kAttr, 65536, reinterpret_cast<CUkernel>(big), loopDevice));
    if (both) SIM_CHECK(cu.cuFuncSetAttribute(big, kAttr, 65536));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
    uint64_t k = 7;
    void* args[] = {&x, &z, &k};
    const CUresult r = cu.cuLaunchKernel(launchFn ? fnHandle : big, 1, 1, 1, 1, 1, 1, 65536, s, args, nullptr);  // x = z + 7
    const CUresult want = allowed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r != want && wrongCodes++ < 3)
      std::printf("sim_allowance_devices: %s, iteration %d: the 64 KiB launch returned %d, expected %d\n", part, it,
                  int(r), int(want));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
    if (retry) {
      SIM_CHECK(cu.cuKernelSetAttribute(kAttr, 49152, reinterpret_cast<CUkernel>(big), loopDevice));
      if (both) SIM_CHECK(cu.cuFuncSetAttribute(big, kAttr, 49152));
      cu.cuStreamQuery(idle);  // graft drains its launch thread before asking the driver
    }
    hy = hx + 1, hz = hy + 2;
    if (allowed) hx = hz + 7;
    hy = hx + 3, hx = hy + 4;
    if (it % 10 == 0) {
      uint64_t got = 0;
      SIM_CHECK(cu.cuStreamSynchronize(s));
      SIM_CHECK(cu.cuMemcpyDtoH(&got, x, 8));
      if (got != hx && wrongValues++ < 3)
        std::printf("sim_allowance_devices: %s, iteration %d: x = %llu, expected %llu\n", part, it,
                    (unsigned long long)got, (unsigned long long)hx);
      hx = got;  // go on from what ran, so each read-back shows only its own stretch
    }
  };
  for (int it = 1; it <= 60; ++it) iteration("under 64 KiB", it, true);
  if (retry) {
    for (int it = 61; it <= 100; ++it) iteration("under 64 KiB", it, true);
    SIM_CHECK(cu.cuCtxSynchronize());
    SimCounters c{};
    simCounters(&c);
    std::printf("sim_allowance_devices: retry: %d wrong return codes, %d wrong values, %d failed calls; kernels "
                "from graphs %llu, eager %llu\n",
                wrongCodes, wrongValues, simtest::failedCalls(), (unsigned long long)c.effectsGraph,
                (unsigned long long)c.effectsEager);
    return wrongCodes || wrongValues || simtest::failedCalls() ? 1 : 0;
  }

  // Lower the allowance the loop's launches get to 48 KiB ...
  if (devices) {
    SIM_CHECK(cu.cuKernelSetAttribute(kAttr, 49152, reinterpret_cast<CUkernel>(big), loopDevice));
  } else {
    SIM_CHECK(cu.cuFuncSetAttribute(big, kAttr, 49152));
  }
  // ... then set something that leaves it there.
  if (!control && devices) {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[0]));
    SIM_CHECK(cu.cuKernelSetAttribute(kAttr, 65536, reinterpret_cast<CUkernel>(big), 0));
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[loopDevice]));
  } else if (!control) {
    SIM_CHECK(cu.cuKernelSetAttribute(kAttr, 65536, reinterpret_cast<CUkernel>(big), 0));
  }
  int effective = -1;
  if (decltype(&cuFuncGetAttribute) get = nullptr; simtest::lookupProc(drv, "cuFuncGetAttribute", &get))
    SIM_CHECK(get(&effective, kAttr, big));
  std::printf("sim_allowance_devices: %s: the driver's allowance for the loop's launches is now %d\n", mode.c_str(),
              effective);
  for (int it = 1; it <= 40; ++it) iteration("under 48 KiB", it, false);
  SIM_CHECK(cu.cuCtxSynchronize());

  SimCounters c{};
  simCounters(&c);
  std::printf("sim_allowance_devices: %s: %d wrong return codes, %d wrong values, %d failed calls; kernels from "
              "graphs %llu, eager %llu\n",
              mode.c_str(), wrongCodes, wrongValues, simtest::failedCalls(), (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager);
  return wrongCodes || wrongValues || simtest::failedCalls() ? 1 : 0;
}
