// The green-context driver calls the simulator programs look up
// (sim_green_contexts, sim_review42_contexts), and a green context made the
// way cuda.h's four steps make one. Test code: no threading rule of its own.
#pragma once

#include <cuda.h>

#include "sim_driver_loader.h"

namespace simtest {

struct GreenApi {
  decltype(&::cuDeviceGetDevResource) devResource = nullptr;
  decltype(&::cuDevSmResourceSplitByCount) split = nullptr;
  decltype(&::cuDevResourceGenerateDesc) generateDesc = nullptr;
  decltype(&::cuGreenCtxCreate) create = nullptr;
  decltype(&::cuGreenCtxDestroy) destroy = nullptr;
  decltype(&::cuCtxFromGreenCtx) fromGreen = nullptr;
  decltype(&::cuGreenCtxStreamCreate) streamCreate = nullptr;
  CUresult (*push)(CUcontext) = nullptr;
  CUresult (*pop)(CUcontext*) = nullptr;
};

inline bool loadGreenApi(const Driver& drv, GreenApi* g) {
  return lookupProc(drv, "cuDeviceGetDevResource", &g->devResource) &&
         lookupProc(drv, "cuDevSmResourceSplitByCount", &g->split) &&
         lookupProc(drv, "cuDevResourceGenerateDesc", &g->generateDesc) &&
         lookupProc(drv, "cuGreenCtxCreate", &g->create) && lookupProc(drv, "cuGreenCtxDestroy", &g->destroy) &&
         lookupProc(drv, "cuCtxFromGreenCtx", &g->fromGreen) &&
         lookupProc(drv, "cuGreenCtxStreamCreate", &g->streamCreate) &&
         lookupProc(drv, "cuCtxPushCurrent", &g->push) && lookupProc(drv, "cuCtxPopCurrent", &g->pop);
}

// A green context of 16 SMs of device 0 and its converted context.
inline bool makeGreen(const GreenApi& g, CUgreenCtx* green, CUcontext* converted) {
  CUdevResource dev{}, group{}, rest{};
  unsigned n = 1;
  CUdevResourceDesc desc = nullptr;
  return g.devResource(0, &dev, CU_DEV_RESOURCE_TYPE_SM) == CUDA_SUCCESS &&
         g.split(&group, &n, &dev, &rest, 0, 16) == CUDA_SUCCESS && n == 1 &&
         g.generateDesc(&desc, &group, 1) == CUDA_SUCCESS &&
         g.create(green, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM) == CUDA_SUCCESS &&
         g.fromGreen(converted, *green) == CUDA_SUCCESS;
}

}  // namespace simtest
