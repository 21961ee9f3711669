// sim_review47_reload: a review of 4ffb5ca (reloaded code: a kernel whose
// code lives failed runs eagerly in its next loads; KernelRegistry::
// noteCodeLife), helper-written. Each mode checks every value and prints the
// share of effects from graphs; run it under graft with GRAFT_STATS
// (run_with_report.py, or read replay.coverage_pct / graphs_built) and
// compare with the library before 4ffb5ca or with the mode's control.
//   sim_review47_reload --mode shared-name|plan-cache|drop-before-unload|many-names|reload-every
//                       [--iters N] [--same-name 0|1] [--long-every N] [--long-per-iter N]
//                       [--short-every N] [--short-per-iter N] [--long-gap N] [--carveout N]
//                       [--plans N] [--cache N] [--phase N] [--per-iter N] [--train N] [--eval N]
//                       [--names N]
//
// shared-name: two modules whose kernels have one name (two plans of one
//   library, or two JIT modules whose entry is called "kernel"): L, loaded
//   again every --long-every iterations (64), launched --long-per-iter times
//   an iteration (1): its graphs replay about 40-60 times a life, each life
//   pays off; S, loaded again every --short-every iterations (8), launched
//   --short-per-iter times an iteration (4): 32 launches a life, its graphs
//   never replay 16 times. The reload history is kept by kernel name: L's
//   paid lives erase S's failures (S never backs off past 4 lives and builds
//   graphs again every few lives for good), and S's failures can make L run
//   eagerly. --same-name 0 (S's kernel named otherwise) is the control.
//   --long-gap N: L is unloaded N iterations before it is loaded again, and
//   not launched meanwhile. --carveout N: S's kernel gets its shared memory
//   carveout set to N after each load (a library that sets it for the
//   kernels it loads): graft drops the graphs of every kernel of that name
//   (Runtime::kernelAttributeChanged, handlesOfKernel), L's too, so L's graphs
//   alive at its unload replayed fewer than 16 times and L, whose lives would
//   pay off, is judged to fail and runs eagerly from then on.
// plan-cache: --plans modules (5), one per resolution, each with its own
//   kernel sim_add_rK, used --per-iter times an iteration (2) in phases of
//   --phase iterations (100) in turn, under a cache of --cache plans (4) that
//   unloads the plan used longest ago to load another: each plan is loaded
//   for 4 phases but used in one (its graphs stay alive: no change expected).
// drop-before-unload: --train iterations with T (graphs replay ~95 times),
//   then --eval iterations whose steps start alike and differ every time,
//   then T's module is unloaded and loaded again (no change expected: the
//   graph with T is not dropped before the unload here).
// many-names: --names modules (4100), each with a kernel of its own name run
//   twice and unloaded (autotuning candidates, JIT code named anew), then
//   sim_partial_unload's reload-often loop: past KernelRegistry::
//   kMaxNamesKept failed names 4ffb5ca's reload history took no new name,
//   so the loop got nothing from it (0.9 % through graphs); the history
//   makes room now (meson: sim_review47_reload_many_names_graft; --names 0
//   is the control).
// reload-every: one module kernel T, loaded again every --short-every
//   iterations; an iteration is --per-iter times (T, one persistent kernel)
//   and two persistent kernels, so T is spread through the step. With lives
//   whose graphs replay 4 to 15 times the library before 4ffb5ca built one
//   graph a life (60-75 % through graphs); 4ffb5ca runs T eagerly at its
//   places, which leaves nothing around them worth a graph (3-5 %).
// Exit 1 on a wrong value or a failed program call.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

simtest::CodeApi code;
decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "shared-name";
  int iters = 512, sameName = 1, longEvery = 64, longPerIter = 1, shortEvery = 8, shortPerIter = 4, longGap = 0;
  int plans = 5, cache = 4, phase = 100, perIter = 2, train = 100, eval = 50, carveout = 0, names = 4100;
  for (int i = 1; i < argc; ++i) {
    auto intArg = [&](const char* name, int* out) {
      if (std::strcmp(argv[i], name) != 0 || i + 1 >= argc) return false;
      *out = std::atoi(argv[++i]);
      return true;
    };
    if (std::strcmp(argv[i], "--mode") == 0 && i + 1 < argc) mode = argv[++i];
    else if (intArg("--iters", &iters) || intArg("--same-name", &sameName) || intArg("--long-every", &longEvery) ||
             intArg("--long-per-iter", &longPerIter) || intArg("--short-every", &shortEvery) ||
             intArg("--short-per-iter", &shortPerIter) || intArg("--long-gap", &longGap) ||
             intArg("--plans", &plans) || intArg("--cache", &cache) || intArg("--phase", &phase) ||
             intArg("--per-iter", &perIter) || intArg("--train", &train) || intArg("--eval", &eval) ||
             intArg("--carveout", &carveout) || intArg("--names", &names)) {
    } else {
      std::printf("usage: sim_review47_reload --mode shared-name|plan-cache|drop-before-unload|many-names|"
                  "reload-every [--iters N] [--same-name 0|1] [--long-every N] [--long-per-iter N] "
                  "[--short-every N] [--short-per-iter N] [--long-gap N] [--carveout N] [--plans N] [--cache N] "
                  "[--phase N] [--per-iter N] [--train N] [--eval N] [--names N]\n");
      return 2;
    }
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_review47_reload", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  if (!simtest::loadCodeApi(drv, &code) || !simtest::lookupProc(drv, "cuFuncSetAttribute", &funcSetAttribute))
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
      std::printf("sim_review47_reload: iteration %d: y = %llu, expected %llu\n", it, (unsigned long long)got,
                  (unsigned long long)hy);
  };
  CUfunction p = simtest::libraryKernel3("sim_add_persistent");
  // Four persistent launches, then `k`, then one more.
  auto block = [&](CUfunction k, uint64_t add) {
    for (int j = 0; j < 2; ++j) {
      SIM_CHECK(simtest::launchAdd(cu, p, y, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
      hy = hx + 1, hx = hy + 1;
    }
    SIM_CHECK(simtest::launchAdd(cu, k, y, x, add, s));
    SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
    hy = hx + add, hx = hy + 1;
  };
  SimCounters before{};

  if (mode == "shared-name") {
    const char* imageL = "sim-image: sim_add_t(8,8,8)";
    const char* imageS = sameName ? imageL : "sim-image: sim_add_u(8,8,8)";
    const char* nameS = sameName ? "sim_add_t" : "sim_add_u";
    CUmodule mL = nullptr, mS = nullptr;
    CUfunction tL = nullptr, tS = nullptr;
    SIM_CHECK(code.moduleLoadData(&mL, imageL));
    SIM_CHECK(code.moduleGetFunction(&tL, mL, "sim_add_t"));
    SIM_CHECK(code.moduleLoadData(&mS, imageS));
    SIM_CHECK(code.moduleGetFunction(&tS, mS, nameS));
    simCounters(&before);
    bool loadedL = true;
    for (int it = 1; it <= iters; ++it) {
      // With a gap, L is unloaded longGap iterations before it is loaded again.
      if (longGap && it % longEvery == longEvery - longGap) {
        SIM_CHECK(code.moduleUnload(mL));
        loadedL = false;
      }
      if (it % longEvery == 0) {
        if (loadedL) SIM_CHECK(code.moduleUnload(mL));
        SIM_CHECK(code.moduleLoadData(&mL, imageL));
        SIM_CHECK(code.moduleGetFunction(&tL, mL, "sim_add_t"));
        loadedL = true;
      }
      if (it % shortEvery == 0) {
        SIM_CHECK(code.moduleUnload(mS));
        SIM_CHECK(code.moduleLoadData(&mS, imageS));
        SIM_CHECK(code.moduleGetFunction(&tS, mS, nameS));
        // A library that sets each kernel's carveout when it loads it.
        if (carveout)
          SIM_CHECK(funcSetAttribute(tS, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, carveout));
      }
      for (int k = 0; k < shortPerIter; ++k) block(tS, 7);
      if (loadedL)
        for (int k = 0; k < longPerIter; ++k) block(tL, 5);
      SIM_CHECK(cu.cuStreamSynchronize(s));
      if (it % 10 == 0) checkY(it);
    }
  } else if (mode == "plan-cache") {
    // Plans of `plans` resolutions, one module each (kernel sim_add_rK), used
    // in phases of `phase` iterations in turn; a cache of `cache` plans that
    // unloads the one used longest ago to load another.
    std::vector<CUmodule> mod(plans, nullptr);
    std::vector<CUfunction> fn(plans, nullptr);
    std::vector<int> lastUsed(plans, -1);
    auto image = [](int k) { return "sim-image: sim_add_r" + std::to_string(k) + "(8,8,8)"; };
    simCounters(&before);
    for (int it = 1; it <= iters; ++it) {
      const int k = ((it - 1) / phase) % plans;
      if (!mod[k]) {
        int loaded = 0, lru = -1;
        for (int j = 0; j < plans; ++j)
          if (mod[j]) {
            ++loaded;
            if (lru < 0 || lastUsed[j] < lastUsed[lru]) lru = j;
          }
        if (loaded >= cache) {
          SIM_CHECK(code.moduleUnload(mod[lru]));
          mod[lru] = nullptr;
        }
        SIM_CHECK(code.moduleLoadData(&mod[k], image(k).c_str()));
        SIM_CHECK(code.moduleGetFunction(&fn[k], mod[k], ("sim_add_r" + std::to_string(k)).c_str()));
      }
      lastUsed[k] = it;
      for (int j = 0; j < perIter; ++j) block(fn[k], 3);
      block(p, 1);
      SIM_CHECK(cu.cuStreamSynchronize(s));
      if (it % 10 == 0) checkY(it);
    }
  } else if (mode == "drop-before-unload") {
    // A cycle: `train` iterations of a step with T (its graph replays about
    // train - 5 times), then `eval` iterations whose steps start alike and
    // then differ every time (a kernel with a new grid each step), then T's
    // module is unloaded and loaded again.
    CUmodule m = nullptr;
    CUfunction t = nullptr;
    SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
    simCounters(&before);
    const int cycle = train + eval;
    for (int it = 1; it <= iters; ++it) {
      if (it % cycle == 0) {
        SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
      }
      if (it % cycle < train) {
        for (int j = 0; j < perIter; ++j) block(t, 3);
        block(p, 1);
      } else {
        for (int j = 0; j < 2; ++j) {
          SIM_CHECK(simtest::launchAdd(cu, p, y, x, 1, s));
          SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
          hy = hx + 1, hx = hy + 1;
        }
        SIM_CHECK(simtest::launchAdd(cu, p, y, x, uint64_t(100 + it), s));  // a new value every step
        hy = hx + uint64_t(100 + it);
        SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
        hx = hy + 1;
      }
      SIM_CHECK(cu.cuStreamSynchronize(s));
      if (it % 10 == 0) checkY(it);
    }
  } else if (mode == "many-names") {
    // First `names` modules, each with a kernel of its own name, launched
    // twice and unloaded (an autotuner's candidates, JIT code named anew at
    // every load); then reload-often's loop (sim_partial_unload.cc): T run
    // 4 times an iteration, its module loaded again every 8 iterations.
    for (int n = 0; n < names; ++n) {
      const std::string name = "sim_add_jit" + std::to_string(n);
      CUmodule m = nullptr;
      CUfunction f = nullptr;
      SIM_CHECK(code.moduleLoadData(&m, ("sim-image: " + name + "(8,8,8)").c_str()));
      SIM_CHECK(code.moduleGetFunction(&f, m, name.c_str()));
      for (int j = 0; j < 2; ++j) block(f, 2);
      SIM_CHECK(cu.cuStreamSynchronize(s));
      SIM_CHECK(code.moduleUnload(m));
    }
    CUmodule m = nullptr;
    CUfunction t = nullptr;
    SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
    simCounters(&before);
    for (int it = 1; it <= iters; ++it) {
      if (it % 8 == 0) {
        SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
      }
      for (int k = 0; k < 4; ++k) block(t, 7);
      block(p, 1);
      SIM_CHECK(cu.cuStreamSynchronize(s));
      if (it % 10 == 0) checkY(it);
    }
  } else if (mode == "reload-every") {
    // One module kernel T, loaded again every `shortEvery` iterations; an
    // iteration is `perIter` times (T, then a persistent kernel), then two
    // persistent kernels: most of the step is T.
    CUmodule m = nullptr;
    CUfunction t = nullptr;
    SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
    simCounters(&before);
    for (int it = 1; it <= iters; ++it) {
      if (it % shortEvery == 0) {
        SIM_CHECK(simtest::loadModuleKernel(code, &m, &t, "sim_add_t"));
      }
      for (int j = 0; j < perIter; ++j) {
        SIM_CHECK(simtest::launchAdd(cu, t, y, x, 3, s));
        SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
        hy = hx + 3, hx = hy + 1;
      }
      SIM_CHECK(simtest::launchAdd(cu, p, y, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, p, x, y, 1, s));
      hy = hx + 1, hx = hy + 1;
      SIM_CHECK(cu.cuStreamSynchronize(s));
      if (it % 10 == 0) checkY(it);
    }
  } else {
    std::printf("sim_review47_reload: unknown mode %s\n", mode.c_str());
    return 2;
  }
  checkY(iters);
  simtest::printEffectsSince("sim_review47_reload", before);
  if (bad || simtest::failedCalls()) return 1;
  std::printf("sim_review47_reload: every value right\n");
  return 0;
}
