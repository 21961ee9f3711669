// sim_launch_failure: a loop whose replays fail (SIM_FAIL injects driver
// errors into graft's cuGraphLaunch or node updates) must still compute what
// eager computes. Each iteration launches 12 kernels and then adds k to an
// accumulator on the device; k changes once, from 1 to 2, at iteration CHANGE
// (so one replay patches it and the ones after do not). With QUERY=1 the loop
// also queries an idle second stream in the middle of each iteration, so graft
// learns of a failed launch while it holds ops that match its segment.
// With MATCH=M (graft preloaded, GRAFT_BENCH_SWITCH=1) iterations M to M+4 run
// in graft's benchmark-only match mode, where nothing reaches the GPU (they
// add nothing); put CHANGE among them and the first replay after them must
// still add the new k, although its update was skipped while matching. The
// switches come after a synchronize, as a harness does, or with NOSYNC=1 in
// the middle of held work, which must run as the mode it was issued in asks.
//   CHANGE=N QUERY=0|1 [MATCH=M [NOSYNC=1]] sim_launch_failure   exit 0: the accumulator is right
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main() {
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_launch_failure", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction work = simtest::libraryKernel3("spin_work");
  CUfunction add = simtest::libraryKernel3("sim_add_acc");
  CUdeviceptr acc = simtest::zeroedBuffer(cu);
  CUstream s, idle;
  cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  cu.cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING);
  const int change = std::getenv("CHANGE") ? std::atoi(std::getenv("CHANGE")) : 30;
  const bool query = std::getenv("QUERY") && std::atoi(std::getenv("QUERY"));
  const int match = std::getenv("MATCH") ? std::atoi(std::getenv("MATCH")) : 0;
  using SetModeFn = int (*)(const char*);
  auto setMode = reinterpret_cast<SetModeFn>(dlsym(RTLD_DEFAULT, "graft_bench_set_mode"));
  if (match && !setMode) {
    std::fprintf(stderr, "sim_launch_failure: MATCH needs graft preloaded\n");
    return 1;
  }
  uint64_t want = 0;
  for (int it = 1; it <= 60; ++it) {
    const bool matching = match && it >= match && it < match + 5;
    if (match && (it == match || it == match + 5)) {
      const char* noSync = std::getenv("NOSYNC");
      if (!(noSync && std::atoi(noSync))) cu.cuCtxSynchronize();  // as a benchmark harness does
      if (setMode(matching ? "match" : "graph") != 0) {
        std::fprintf(stderr, "sim_launch_failure: graft_bench_set_mode refused\n");
        return 1;
      }
    }
    for (uint64_t k = 0; k < 12; ++k) {
      uint64_t a = k, b = 7, c = 9;
      void* args[] = {&a, &b, &c};
      cu.cuLaunchKernel(work, 1 + k % 3, 1, 1, 32, 1, 1, 0, s, args, nullptr);
      if (query && k == 5) cu.cuStreamQuery(idle);
    }
    uint64_t kk = it < change ? 1 : 2;
    if (!matching) want += kk;
    void* args[] = {&acc, &acc, &kk};
    cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  cu.cuCtxSynchronize();
  const uint64_t got = *reinterpret_cast<volatile uint64_t*>(acc);
  std::printf("sim_launch_failure: accumulator %llu, eager computes %llu: %s\n",
              static_cast<unsigned long long>(got), static_cast<unsigned long long>(want),
              got == want ? "ok" : "WRONG");
  return got == want ? 0 : 1;
}
