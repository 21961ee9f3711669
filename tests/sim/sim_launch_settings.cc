// sim_launch_settings: settings that launches change, or that change launches,
// around a loop graft replays.
//   stack    each iteration lowers CU_LIMIT_STACK_SIZE to 1024, launches six
//            kernels, one of which needs a 1536-byte stack (the driver grows
//            the limit at its launch), and reads the limit back: 1536, as
//            eagerly, which a launch still held by graft would leave at 1024.
//            Every change of the limit drops graft's graphs (a graph keeps
//            the stack it was made under: tests/gpu/traps_r37.cu,
//            stack_limit_epochs, on an H200), so this part runs eagerly.
//   epochs   (--stack-epochs, alone) the limit set to 8 KiB, then to 1 KiB and back
//            every 40 iterations of five launches: a graph made under 8 KiB
//            and launched after the lowering fails (the simulator's model of
//            the H200, sticky), so graft must drop its graphs at each change
//            and build them again within each epoch.
//   attr     each iteration raises a kernel's dynamic shared memory allowance
//            to 64 KiB, launches it with 64 KiB among four other kernels and
//            lowers the allowance to 48 KiB again: every launch was made under
//            64 KiB, so each must run (a held launch issued after the lowering
//            would be refused).
//   same     the allowance set to the value it already has before every
//            launch of that kernel, as libraries do: a call that changes
//            nothing, which must not end graft's graphs.
//   refused  the attr loop, but every fifth iteration the allowance is
//            lowered to 48 KiB before the 64 KiB launch: that launch is
//            refused at its call (CUDA_ERROR_INVALID_VALUE) and runs not, as
//            eagerly, although it matches the graph built from the other
//            iterations (a graph launch does not check the allowance).
//   failed   (--failed, alone) the attr loop with the same arguments every
//            iteration (no node update, so nothing is issued or waited for at
//            the lowering) and a query of an idle stream after it; run with
//            SIM_FAIL=cuGraphLaunch:N:1, a graph launch that fails on graft's
//            launch thread is re-issued eagerly after the lowering, and its
//            64 KiB launch must still run.
//   cluster  (--cluster, alone) a loop of five launches whose middle kernel's
//            required cluster width the program sets every 25 iterations
//            (0, 2, 4, 1 in turn; the simulator's sim_add kernels add their
//            launch's width to the result, and a graph node keeps the width
//            it was made under): every launch must run with the width in
//            effect at its call, which a graph made before the change would
//            not give.
//   cache    (--cache, alone) the same loop with a cooperative launch of 128
//            blocks in the middle; on every 25th iteration the kernel's cache
//            preference is PREFER_L1 for that launch (set through
//            cuFuncSetCacheConfig, cuKernelSetCacheConfig or the context's
//            cuCtxSetCacheConfig in turn, and set back after it), under which
//            the simulator refuses it with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
//            (what the H200 does: tests/gpu/traps_r17.cu,
//            cache_config_cooperative); every iteration the function's
//            preference is also set to PREFER_NONE again, which changes
//            nothing. Each launch must return what it returns eagerly and
//            the refused one must not run, although it matches the graph made
//            from the other iterations (a graph launch is not checked).
// Values are read back every 10 iterations (exit 1 on a wrong value or a
// failed call).
//   sim_launch_settings [--expect-graphs] [--failed | --cluster | --cache]
// --expect-graphs: at least 80 % of the `same` part's kernels ran from graphs
// (of the cluster part's, a seventh),
// in under one graph launch per 3 iterations, and at least half of the
// `stack` part's kernels.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

constexpr int kIterations = 60;

struct Counts {
  uint64_t graph = 0, eager = 0, launches = 0;  // effects from graphs, eager effects, graph launches
};
Counts countsSince(const SimCounters& before) {
  SimCounters c{};
  simCounters(&c);
  return {c.effectsGraph - before.effectsGraph, c.effectsEager - before.effectsEager,
          c.graphLaunches - before.graphLaunches};
}

bool readBack(const simtest::DriverApi& cu, CUstream s, const char* part, int it, CUdeviceptr d, uint64_t want) {
  uint64_t got = 0;
  SIM_CHECK(cu.cuStreamSynchronize(s));
  SIM_CHECK(cu.cuMemcpyDtoH(&got, d, 8));
  if (got == want) return true;
  std::printf("sim_launch_settings: %s, iteration %d: value %llu, expected %llu\n", part, it,
              (unsigned long long)got, (unsigned long long)want);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  bool expectGraphs = false, failed = false, cluster = false, cache = false, stackEpochs = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expect-graphs") == 0) {
      expectGraphs = true;
    } else if (std::strcmp(argv[i], "--failed") == 0) {
      failed = true;
    } else if (std::strcmp(argv[i], "--cluster") == 0) {
      cluster = true;
    } else if (std::strcmp(argv[i], "--cache") == 0) {
      cache = true;
    } else if (std::strcmp(argv[i], "--stack-epochs") == 0) {
      stackEpochs = true;
    } else {
      std::printf("usage: sim_launch_settings [--expect-graphs] [--failed | --cluster | --cache | --stack-epochs]\n");
      return 2;
    }
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_launch_settings", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUfunction add = simtest::libraryKernel3("sim_add_settings");
  CUfunction deep = simtest::libraryKernel3("sim_add_deep_stack");
  CUfunction big = simtest::libraryKernel3("sim_add_big_shared");
  if (simKernelSetStackBytes(deep, 1536) != 0) {
    std::printf("sim_launch_settings: simKernelSetStackBytes failed\n");
    return 1;
  }
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  int bad = 0;
  if (stackEpochs) {
    uint64_t hx = 0, hy = 0, hz = 0;
    SimCounters before{};
    simCounters(&before);
    for (int it = 0; it < 4 * kIterations; ++it) {
      if (it % 40 == 0) SIM_CHECK(cu.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, (it / 40) % 2 ? 1024 : 8192));
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
      SIM_CHECK(simtest::launchAdd(cu, add, x, z, uint64_t(it), s));
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
      SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
      hy = hx + 1, hz = hy + 2, hx = hz + uint64_t(it), hy = hx + 3, hx = hy + 4;
      if (it % 8 == 7 && !readBack(cu, s, "epochs", it, x, hx)) ++bad;
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    const Counts counts = countsSince(before);
    std::printf("sim_launch_settings: epochs part: kernels from graphs %llu, eager %llu\n",
                (unsigned long long)counts.graph, (unsigned long long)counts.eager);
    if (bad || simtest::failedCalls()) {
      std::printf("sim_launch_settings: %d wrong values, %d failed calls\n", bad, simtest::failedCalls());
      return 1;
    }
    if (expectGraphs && counts.graph * 10 < (counts.graph + counts.eager) * 3) {
      std::printf("sim_launch_settings: too few kernels from graphs\n");
      return 3;
    }
    return 0;
  }
  if (cluster) {
    CUfunction shaped = simtest::libraryKernel3("sim_add_cluster_shaped");
    const int widths[4] = {0, 2, 4, 1};
    uint64_t hx = 0;
    SimCounters before{};
    simCounters(&before);
    for (int it = 0; it < 4 * kIterations; ++it) {
      const int w = widths[(it / 25) % 4];
      if (it % 25 == 0) SIM_CHECK(cu.cuFuncSetAttribute(shaped, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, w));
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
      SIM_CHECK(simtest::launchAdd(cu, shaped, x, z, 7, s));  // x = z + 7 + width
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
      SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
      hx += 1 + 2 + 7 + uint64_t(w) + 3 + 4;
      if (it % 10 == 9 && !readBack(cu, s, "cluster", it, x, hx)) ++bad;
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    const Counts c = countsSince(before);
    std::printf("sim_launch_settings: cluster part: %d wrong values; kernels from graphs %llu, eager %llu\n", bad,
                (unsigned long long)c.graph, (unsigned long long)c.eager);
    if (bad || simtest::failedCalls()) return 1;
    // Each change drops the graphs with that kernel, which come back when
    // the loop repeats (25.7 % here, with a change every 25 iterations).
    if (expectGraphs && c.graph * 7 < c.graph + c.eager) {
      std::printf("sim_launch_settings: cluster part: under a seventh of the kernels ran from graphs\n");
      return 1;
    }
    return 0;
  }
  if (cache) {
    CUfunction coop = simtest::libraryKernel3("sim_add_cache_coop");
    uint64_t hx = 0;
    int wrongCodes = 0;
    SimCounters before{};
    simCounters(&before);
    auto prefer = [&](int how, CUfunc_cache config) {
      if (how == 0) SIM_CHECK(cu.cuFuncSetCacheConfig(coop, config));
      else if (how == 1) SIM_CHECK(cu.cuKernelSetCacheConfig(reinterpret_cast<CUkernel>(coop), config, 0));
      else SIM_CHECK(cu.cuCtxSetCacheConfig(config));
    };
    for (int it = 0; it < 6 * kIterations; ++it) {
      const bool l1 = it % 25 == 12;
      const int how = (it / 25) % 3;
      SIM_CHECK(cu.cuFuncSetCacheConfig(coop, CU_FUNC_CACHE_PREFER_NONE));  // the value it has
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
      if (l1) prefer(how, CU_FUNC_CACHE_PREFER_L1);
      CUdeviceptr to = x, from = z;
      uint64_t seven = 7;
      void* args[] = {&to, &from, &seven};
      const CUresult r = cu.cuLaunchCooperativeKernel(coop, 128, 1, 1, 1, 1, 1, 0, s, args);  // x = z + 7
      if (l1) prefer(how, CU_FUNC_CACHE_PREFER_NONE);
      const CUresult want = l1 ? CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE : CUDA_SUCCESS;
      if (r != want && wrongCodes++ < 5)
        std::printf("sim_launch_settings: cache, iteration %d: the cooperative launch returned %d, expected %d\n", it,
                    int(r), int(want));
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
      SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
      // x = (l1 ? x : x + 1 + 2 + 7) + 3 + 4
      hx += (l1 ? 0 : 1 + 2 + 7) + 3 + 4;
      if (it % 10 == 9 && !readBack(cu, s, "cache", it, x, hx)) ++bad;
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    const Counts c = countsSince(before);
    std::printf("sim_launch_settings: cache part: %d wrong values, %d wrong codes; kernels from graphs %llu, eager %llu\n",
                bad, wrongCodes, (unsigned long long)c.graph, (unsigned long long)c.eager);
    if (bad || wrongCodes || simtest::failedCalls()) return 1;
    // Each change drops the graphs with that kernel (all of them, for the
    // context's), which come back when the loop repeats (27 % here, with two
    // changes every 25 iterations; 96 % with none); the same value again
    // drops nothing.
    if (expectGraphs && c.graph * 6 < c.graph + c.eager) {
      std::printf("sim_launch_settings: cache part: under a sixth of the kernels ran from graphs\n");
      return 1;
    }
    return 0;
  }
  if (failed) {
    CUstream idle;
    SIM_CHECK(cu.cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING));
    uint64_t hx = 0, hy = 0, hz = 0;
    for (int it = 1; it <= kIterations; ++it) {
      SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
      SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
      uint64_t k = 7;
      void* args[] = {&x, &z, &k};
      SIM_CHECK(cu.cuLaunchKernel(big, 1, 1, 1, 1, 1, 1, 65536, s, args, nullptr));  // x = z + 7
      SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
      SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
      SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152));
      cu.cuStreamQuery(idle);  // graft drains its launch thread before asking the driver
      hy = hx + 1, hz = hy + 2, hx = hz + 7, hy = hx + 3, hx = hy + 4;
      if (it % 10 == 0 && !readBack(cu, s, "failed", it, x, hx)) ++bad;
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    if (bad || simtest::failedCalls()) {
      std::printf("sim_launch_settings: %d wrong values, %d failed calls\n", bad, simtest::failedCalls());
      return 1;
    }
    std::printf("sim_launch_settings: failed part: every value right\n");
    return 0;
  }

  // stack
  SimCounters before{};
  simCounters(&before);
  uint64_t hx = 0, hy = 0, hz = 0;
  for (int it = 1; it <= kIterations; ++it) {
    SIM_CHECK(cu.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
    SIM_CHECK(simtest::launchAdd(cu, deep, x, z, uint64_t(it), s));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 4, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, z, 5, s));
    hy = hx + 1, hz = hy + 2, hx = hz + it, hy = hx + 3, hz = hy + 4, hx = hz + 5;
    size_t stack = 0;
    SIM_CHECK(cu.cuCtxGetLimit(&stack, CU_LIMIT_STACK_SIZE));
    if (stack != 1536) {
      if (bad++ < 5)
        std::printf("sim_launch_settings: stack, iteration %d: the stack limit reads %zu after the launch that "
                    "needs 1536, expected 1536\n", it, stack);
    }
    if (it % 10 == 0 && !readBack(cu, s, "stack", it, x, hx)) ++bad;
  }
  const Counts stackCounts = countsSince(before);

  // attr
  for (int it = 1; it <= kIterations; ++it) {
    SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
    uint64_t k = uint64_t(it);
    void* args[] = {&x, &z, &k};
    SIM_CHECK(cu.cuLaunchKernel(big, 1, 1, 1, 1, 1, 1, 65536, s, args, nullptr));  // x = z + it
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
    // Lowered through either call (the runtime sets a CUkernel's attributes).
    if (it % 2)
      SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152));
    else
      SIM_CHECK(cu.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152,
                                        reinterpret_cast<CUkernel>(big), 0));
    hy = hx + 1, hz = hy + 2, hx = hz + it, hy = hx + 3, hx = hy + 4;
    if (it % 10 == 0 && !readBack(cu, s, "attr", it, x, hx)) ++bad;
  }

  // same
  simCounters(&before);
  SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
  for (int it = 1; it <= 3 * kIterations; ++it) {
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
    SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    uint64_t k = uint64_t(it);
    void* args[] = {&x, &z, &k};
    SIM_CHECK(cu.cuLaunchKernel(big, 1, 1, 1, 1, 1, 1, 65536, s, args, nullptr));  // x = z + it
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
    hy = hx + 1, hz = hy + 2, hx = hz + it, hy = hx + 3, hx = hy + 4;
    if (it % 10 == 0 && !readBack(cu, s, "same", it, x, hx)) ++bad;
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  const Counts sameCounts = countsSince(before);

  // refused
  for (int it = 1; it <= kIterations; ++it) {
    SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 2, s));
    const bool lowered = it % 5 == 0;
    if (lowered && it % 2)
      SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152));
    else if (lowered)
      SIM_CHECK(cu.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152,
                                        reinterpret_cast<CUkernel>(big), 0));
    uint64_t k = uint64_t(it);
    void* args[] = {&x, &z, &k};
    // x = z + it, or refused under the lowered allowance (and x is left alone).
    const CUresult r = cu.cuLaunchKernel(big, 1, 1, 1, 1, 1, 1, 65536, s, args, nullptr);
    if (r != (lowered ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS) && bad++ < 5)
      std::printf("sim_launch_settings: refused, iteration %d: the 64 KiB launch returned %d, expected %d\n", it,
                  int(r), int(lowered ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 3, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 4, s));
    SIM_CHECK(cu.cuFuncSetAttribute(big, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152));
    hy = hx + 1, hz = hy + 2;
    if (!lowered) hx = hz + uint64_t(it);
    hy = hx + 3, hx = hy + 4;
    if (it % 10 == 0 && !readBack(cu, s, "refused", it, x, hx)) ++bad;
  }

  std::printf("sim_launch_settings: stack part: kernels from graphs %llu, eager %llu; same part: %llu, %llu, "
              "in %llu graph launches\n",
              (unsigned long long)stackCounts.graph, (unsigned long long)stackCounts.eager,
              (unsigned long long)sameCounts.graph, (unsigned long long)sameCounts.eager,
              (unsigned long long)sameCounts.launches);
  if (bad || simtest::failedCalls()) {
    std::printf("sim_launch_settings: %d wrong values, %d failed calls\n", bad, simtest::failedCalls());
    return 1;
  }
  if (expectGraphs && sameCounts.graph * 10 < (sameCounts.graph + sameCounts.eager) * 8) {
    std::printf("sim_launch_settings: too few kernels from graphs\n");
    return 1;
  }
  // A setting that changes nothing does not cut graphs: the loop's runs
  // between read-backs (10 iterations, 60 kernels) take a few pieces each,
  // under one launch per 3 iterations; cut at each such call, they take about
  // one per iteration.
  if (expectGraphs && sameCounts.launches >= uint64_t(kIterations)) {
    std::printf("sim_launch_settings: the same part took %llu graph launches for %d iterations\n",
                (unsigned long long)sameCounts.launches, 3 * kIterations);
    return 1;
  }
  std::printf("sim_launch_settings: every value and limit right\n");
  return 0;
}
