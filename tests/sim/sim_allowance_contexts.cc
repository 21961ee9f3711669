// sim_allowance_contexts: the allowance retry (an eager re-issue refused
// under a lowered allowance) for launches of a library kernel's function F1
// in device 1's context, where the program sets the kernel-level allowance for
// device 1 (cuKernelSetAttribute(.., K, 1)) while another context is current,
// or none, or from another thread; graft never saw K launched. The driver is
// libsim_allowance_shim.so with a function of K per context. A retry that
// raised and put back F1's own value would leave a function-level value that
// overrides the program's later cuKernelSetAttribute (exit 1 on a wrong
// return code). (Written by a reviewer: set-ctx0 and set-thread gave 90
// wrong return codes with cb1d5a5.)
//   sim_allowance_contexts SHIM set-ctx0|set-none|set-ctx1|set-thread
#include <dlfcn.h>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include "sim_api.h"
#include "sim_driver_loader.h"

constexpr CUfunction_attribute kAttr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;


int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string mode = argv[2];
  simtest::Driver drv;
  if (std::string err; !simtest::loadDriver(&drv, &err, argv[1])) { std::printf("loading shim failed\n"); return 2; }
  auto& cu = drv.plain;
  CUcontext ctx[2];
  for (int d = 0; d < 2; ++d) {
    CUdevice dev;
    if (cu.cuInit(0) != CUDA_SUCCESS || cu.cuDeviceGet(&dev, d) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&ctx[d], dev) != CUDA_SUCCESS) { std::printf("no ctx %d\n", d); return 2; }
  }
  auto reg = reinterpret_cast<void (*)(CUkernel, CUcontext, CUfunction)>(dlsym(drv.handle, "shimRegisterFunction"));
  decltype(&cuKernelGetFunction) getFunction = nullptr;
  decltype(&cuFuncGetAttribute) funcGet = nullptr;
  {
    void* p = nullptr;
    drv.getProcAddress("cuKernelGetFunction", &p, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, nullptr);
    getFunction = reinterpret_cast<decltype(getFunction)>(p);
    drv.getProcAddress("cuFuncGetAttribute", &p, 2020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, nullptr);
    funcGet = reinterpret_cast<decltype(funcGet)>(p);
  }
  if (!reg || !getFunction || !funcGet) return 2;
  SIM_CHECK(cu.cuCtxSetCurrent(ctx[1]));
  CUstream s, idle;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING));
  CUfunction add = simtest::libraryKernel3("sim_add_rc");
  CUfunction big = simtest::libraryKernel3("sim_add_rc_big");
  const CUkernel K = reinterpret_cast<CUkernel>(big);
  const size_t sizes[] = {8, 8, 8};
  CUfunction F0 = simKernelCreate("sim_add_rc_big_f0", SIM_KERNEL_FUNCTION, 3, sizes, nullptr);
  CUfunction F1 = simKernelCreate("sim_add_rc_big_f1", SIM_KERNEL_FUNCTION, 3, sizes, nullptr);
  reg(K, ctx[0], F0);
  reg(K, ctx[1], F1);
  CUfunction got = nullptr;
  SIM_CHECK(getFunction(&got, K));
  if (got != F1) { std::printf("shim: no F1\n"); return 2; }
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);

  // The program configures K for device 1 from elsewhere: device 0's context
  // (set-ctx0), no context (set-none), or device 1's own (set-ctx1, control).
  auto setFor1 = [&](int value) {
    if (mode == "set-thread") {  // another thread, device 0's context current there
      std::thread t([&] { SIM_CHECK(cu.cuCtxSetCurrent(ctx[0])); SIM_CHECK(cu.cuKernelSetAttribute(kAttr, value, K, 1)); });
      t.join();
      return;
    }
    if (mode == "set-ctx0") SIM_CHECK(cu.cuCtxSetCurrent(ctx[0]));
    else if (mode == "set-none") SIM_CHECK(cu.cuCtxSetCurrent(nullptr));
    SIM_CHECK(cu.cuKernelSetAttribute(kAttr, value, K, 1));
    SIM_CHECK(cu.cuCtxSetCurrent(ctx[1]));
  };
  uint64_t hx = 0;
  int wrongCodes = 0, wrongValues = 0;
  for (int it = 1; it <= 100; ++it) {
    setFor1(65536);
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
    uint64_t k = 7;
    void* args[] = {&x, &z, &k};
    const CUresult r = cu.cuLaunchKernel(F1, 1, 1, 1, 1, 1, 1, 65536, s, args, nullptr);  // x = z + 7
    if (r != CUDA_SUCCESS && wrongCodes++ < 3)
      std::printf("iteration %d: the 64 KiB launch of F1 returned %d, expected 0 (effective allowance now %d)\n", it,
                  int(r), [&] { int v = -1; funcGet(&v, kAttr, F1); return v; }());
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
    setFor1(49152);
    cu.cuStreamQuery(idle);
    hx += 1 + 2 + (r == CUDA_SUCCESS ? 7 : 0) + 3 + 4;
    if (r != CUDA_SUCCESS) hx = 0;  // not modelled: only the code counts then
    if (it % 10 == 0 && r == CUDA_SUCCESS && wrongCodes == 0) {
      uint64_t v = 0;
      SIM_CHECK(cu.cuStreamSynchronize(s));
      SIM_CHECK(cu.cuMemcpyDtoH(&v, x, 8));
      if (v != hx && wrongValues++ < 3) std::printf("iteration %d: x = %llu, expected %llu\n", it, (unsigned long long)v, (unsigned long long)hx);
      hx = v;
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_allowance_contexts %s: %d wrong return codes, %d wrong values, %d failed calls; kernels from graphs %llu, eager %llu\n",
              mode.c_str(), wrongCodes, wrongValues, simtest::failedCalls(), (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager);
  return wrongCodes || wrongValues || simtest::failedCalls() ? 1 : 0;
}
