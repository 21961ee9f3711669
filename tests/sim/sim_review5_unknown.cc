// sim_review5_unknown: review of driver functions graft's table does not
// describe (src/hook/driver_api.def), reached other than through graft's
// wrappers. One mode per suspected divergence from eager behaviour; every mode
// passes without graft:
//   sim_review5_unknown --mode MODE [--steps N] [--expect-graphs]
//
// release-direct   device 1's primary context runs a one-stream loop graft
//                  replays (6 launches, then a synchronize, per step); after
//                  the loop half of one more step's launches are made (held:
//                  they match the step's graph so far) and the program
//                  releases the context (its only reference) with the first
//                  ABI of cuDevicePrimaryCtxRelease, called through the symbol
//                  the program links against libcuda (as a binary built with
//                  CUDA <= 10.2 headers does). The driver finishes the
//                  context's work before it ends it, so the last step's adds
//                  reach the memory (pinned host memory of device 0's context).
//                  graft exports only the _v2 symbol: the call reaches the
//                  driver with the step still held.
// release-gpa      the same, with the first ABI obtained by cuGetProcAddress
//                  at version 7000 (graft's flushing forwarder). Regression check.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

// The first ABI's symbol (cuda.h maps the name to _v2).
extern "C" CUresult firstAbiPrimaryCtxRelease(CUdevice dev) __asm__("cuDevicePrimaryCtxRelease");

namespace {

using namespace simtest::modes;

void releaseLoop(const simtest::Driver& drv, CUcontext ctx0, CUfunction add, int steps, bool direct) {
  const simtest::DriverApi& cu = drv.plain;
  CUresult (*release)(CUdevice) = nullptr;
  if (direct) {
    release = &firstAbiPrimaryCtxRelease;
  } else {
    void* p = nullptr;
    CUdriverProcAddressQueryResult st{};
    if (drv.getProcAddress("cuDevicePrimaryCtxRelease", &p, 7000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS ||
        !p) {
      std::printf("sim_review5_unknown: no cuDevicePrimaryCtxRelease at 7000\n");
      std::exit(2);
    }
    release = reinterpret_cast<CUresult (*)(CUdevice)>(p);
  }
  void* host = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&host, 64));
  std::memset(host, 0, 64);
  const CUdeviceptr x = reinterpret_cast<CUdeviceptr>(host);
  CUdevice dev1 = 0;
  CUcontext ctx1 = nullptr;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&ctx1, dev1) != CUDA_SUCCESS) {
    std::printf("sim_review5_unknown: no device 1\n");
    std::exit(2);
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 6; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 6;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(*static_cast<volatile uint64_t*>(host), hx, "x", i);
  }
  // The last step, half of it (a replay holds it: the step matches the
  // graph so far), then the context's only reference released.
  for (int k = 0; k < 3; ++k) SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
  hx += 3;
  ++g_provoked;
  expectCode(release(dev1), CUDA_SUCCESS, direct ? "cuDevicePrimaryCtxRelease (first ABI, linked)"
                                                 : "cuDevicePrimaryCtxRelease (first ABI, cuGetProcAddress 7000)",
             steps);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  expectValue(*static_cast<volatile uint64_t*>(host), hx, "x right after the release", steps);
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(*static_cast<volatile uint64_t*>(host), hx, "x after cuCtxSynchronize", steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review5_unknown", 60);
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review5_unknown", &drv, &ctx)) return rc;
  CUfunction add = simtest::libraryKernel3("sim_add_review5_unknown");
  if (args.mode == "release-direct") releaseLoop(drv, ctx, add, args.steps, true);
  else if (args.mode == "release-gpa") releaseLoop(drv, ctx, add, args.steps, false);
  else {
    std::printf("usage: sim_review5_unknown --mode release-direct|release-gpa [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(args.steps, args.expectGraphs);
}
