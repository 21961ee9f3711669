// sim_review17_copies: red-team checks of graft's copy and memset kernels
// (round 17, helper-written; src/graph/copy_kernels.{h,cc}, the copy and
// memset encoders of src/hook/interpose.cc).
//   sim_review17_copies --mode MODE [--steps N] [--expect-graphs]
//
// foreign-stream   CUDA lets a copy or a memset go to a stream of another
//                  device than the current one (a kernel launch may not): the
//                  copy runs on that stream's device. Device 0's primary
//                  context stays current; every step memsets, copies and
//                  copies again device 0's memory on a stream of device 1's
//                  context, then synchronizes it. Eagerly the driver's copies
//                  reach device 0's memory from device 1 (UVA); graft's copy
//                  kernel, put on device 1's stream, does not (the simulator
//                  faults it, as a GPU without peer access would).
// foreign-stream-peer  the same with the copies' destination on device 1 and
//                  the source on device 0.
// refused-pitch    every step a kernel, a 2-D 32-bit memset whose pitch is
//                  not a multiple of 4 (refused) or whose rows overlap
//                  (refused), and a kernel; codes and values as eagerly.
//
// Needs SIM_DEVICES >= 2 (foreign-stream*). Exit 0: every code and value as the
// driver gives them; 1: a divergence; 3 with --expect-graphs: too few effects
// from graphs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

int foreignStream(const simtest::DriverApi& cu, CUcontext ctx0, int steps, bool peer) {
  int devices = 0;
  if (cu.cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices < 2) {
    std::printf("sim_review17_copies: needs 2 devices (SIM_DEVICES), the driver reports %d\n", devices);
    return 2;
  }
  CUdevice dev1;
  CUcontext ctx1;
  SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx1, dev1));
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  CUstream s1;
  SIM_CHECK(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CUdeviceptr far = simtest::zeroedBuffer(cu);  // device 1's
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu);
  const CUdeviceptr out = peer ? far : c;
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(cu.cuMemsetD32Async(a, uint32_t(i), 2, s1));  // a = i, i
    SIM_CHECK(cu.cuMemcpyAsync(b, a, 8, s1));               // b = a
    SIM_CHECK(cu.cuMemcpyAsync(out, b, 8, s1));             // out = b
    SIM_CHECK(cu.cuMemsetD32Async(b, 0, 2, s1));            // b = 0
    SIM_CHECK(cu.cuStreamSynchronize(s1));
    uint32_t got[2] = {};
    SIM_CHECK(cu.cuMemcpyDtoH(got, out, 8));
    if (got[0] != uint32_t(i) || got[1] != uint32_t(i)) {
      std::printf("sim_review17_copies: step %d: out = %u %u, expected %d\n", i, got[0], got[1], i);
      return 1;
    }
    if (simtest::failedCalls()) return 1;
  }
  return 0;
}

int refusedPitch(const simtest::DriverApi& cu, int steps) {
  CUfunction add = simtest::libraryKernel3("sim_add_r17");
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x = simtest::zeroedBuffer(cu, 4096), y = simtest::zeroedBuffer(cu, 64);
  uint64_t hy = 0;
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, s));
    const bool overlapRows = i % 2 == 0;
    // pitch 6 (not a multiple of 4), or pitch 8 under rows of 16 bytes.
    const CUresult r = cu.cuMemsetD2D32Async(x + 64, overlapRows ? 8 : 6, uint32_t(i), 4, 3, s);
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 2, s));
    hy += 3;
    if (r != CUDA_ERROR_INVALID_VALUE) {
      std::printf("sim_review17_copies: step %d: refused memset answered %d\n", i, int(r));
      return 1;
    }
    if (i % 8 == 0) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      uint64_t got = 0;
      uint8_t bytes[256];
      SIM_CHECK(cu.cuMemcpyDtoH(&got, y, 8));
      SIM_CHECK(cu.cuMemcpyDtoH(bytes, x, sizeof bytes));
      if (got != hy) {
        std::printf("sim_review17_copies: step %d: y = %llu, expected %llu\n", i, (unsigned long long)got,
                    (unsigned long long)hy);
        return 1;
      }
      for (uint8_t v : bytes)
        if (v) {
          std::printf("sim_review17_copies: step %d: a refused memset wrote\n", i);
          return 1;
        }
    }
    if (simtest::failedCalls()) return 1;
  }
  SIM_CHECK(cu.cuStreamSynchronize(s));
  return simtest::failedCalls() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode;
  int steps = 120;
  bool expectGraphs = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) mode = argv[++i];
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--expect-graphs")) expectGraphs = true;
    else {
      std::printf("usage: sim_review17_copies --mode MODE [--steps N] [--expect-graphs]\n");
      return 2;
    }
  }
  simtest::Driver drv;
  CUcontext ctx0;
  if (int rc = simtest::startProgram("sim_review17_copies", &drv, &ctx0)) return rc;
  const auto& cu = drv.plain;
  int rc = 2;
  if (mode == "foreign-stream") rc = foreignStream(cu, ctx0, steps, false);
  else if (mode == "foreign-stream-peer") rc = foreignStream(cu, ctx0, steps, true);
  else if (mode == "refused-pitch") rc = refusedPitch(cu, steps);
  else std::printf("sim_review17_copies: unknown mode %s\n", mode.c_str());
  if (rc) return rc;
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_review17_copies %s: every code and value right; effects from graphs %llu, eager %llu\n",
              mode.c_str(), (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager);
  return expectGraphs && simtest::tooFewFromGraphs("sim_review17_copies", c, 20) ? 3 : 0;
}
