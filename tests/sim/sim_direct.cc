// sim_direct.cc - the census program linked directly against libcuda.so.1: every
// driver call is a call of the exported cu* symbol by name (an LD_PRELOAD library
// exporting the same names intercepts them). Per-thread variants are called by
// their _ptsz/_ptds names, as code built with CUDA_API_PER_THREAD_DEFAULT_STREAM
// does. See sim_census_body.inc.
#include <cstdio>
#include <cstring>
#include <vector>

#include "sim_census_common.h"

extern "C" {
decltype(cuLaunchKernel) cuLaunchKernel_ptsz;
decltype(cuMemcpyHtoD_v2) cuMemcpyHtoD_v2_ptds;
decltype(cuMemcpyAsync) cuMemcpyAsync_ptsz;
decltype(cuMemsetD32Async) cuMemsetD32Async_ptsz;
decltype(cuEventRecord) cuEventRecord_ptsz;
decltype(cuLaunchHostFunc) cuLaunchHostFunc_ptsz;
decltype(cuStreamSynchronize) cuStreamSynchronize_ptsz;
}

#define SIM_PT_cuLaunchKernel cuLaunchKernel_ptsz
#define SIM_PT_cuMemcpyHtoD_v2 cuMemcpyHtoD_v2_ptds
#define SIM_PT_cuMemcpyAsync cuMemcpyAsync_ptsz
#define SIM_PT_cuMemsetD32Async cuMemsetD32Async_ptsz
#define SIM_PT_cuEventRecord cuEventRecord_ptsz
#define SIM_PT_cuLaunchHostFunc cuLaunchHostFunc_ptsz
#define SIM_PT_cuStreamSynchronize cuStreamSynchronize_ptsz

int main(int argc, char** argv) {
  simtest::Census census("sim_direct");
  {
#define CU(fn) ::fn
#define CU_PT(fn) SIM_PT_##fn
#include "sim_census_body.inc"
#undef CU
#undef CU_PT
  }
  return simtest::finishCensus(census, argc, argv);
}
