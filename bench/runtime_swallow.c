/* runtime_swallow: a benchmark-only preload that measures what the CUDA
 * runtime's launch layer costs inside a program. Preloaded before libgraft
 * (LD_PRELOAD=runtime_swallow.so:libgraft.so GRAFT_BENCH_SWITCH=1), it wraps
 * the runtime's launch entries (__cudaLaunchKernel[_ptsz], which nvcc 13's
 * launch stubs call, cudaLaunchKernel[_ptsz] and cudaLaunchKernelExC) and
 * graft_bench_set_mode: mode "rtswallow" returns from those entries at once
 * (and puts graft in "swallow", which drops what reaches the driver any
 * other way); any other mode forwards everything. So the floor with the
 * runtime's launch work removed can be timed interleaved with graft's floor
 * (`swallow`, which drops launches at the driver), eager and graft:
 *   workloads.py CASE --interleave passthrough,swallow,rtswallow,graph
 * Results are garbage in rtswallow, as in swallow. Built on the GPU machine
 * by scripts/gpu-session25.sh (part rtlayer) with gcc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static volatile int g_swallow = 0;
static unsigned long g_calls = 0, g_swallowed = 0;

typedef int (*set_mode_t)(const char*);
int graft_bench_set_mode(const char* m) {
  static set_mode_t next = 0;
  if (!next) next = (set_mode_t)dlsym(RTLD_NEXT, "graft_bench_set_mode");
  if (!next) return -1;
  g_swallow = m && strcmp(m, "rtswallow") == 0;
  return next(g_swallow ? "swallow" : m);
}

typedef struct { unsigned x, y, z; } dim3_t;
typedef int (*launch_t)(const void*, dim3_t, dim3_t, void**, size_t, void*);
#define WRAP(name)                                                            \
  int name(const void* f, dim3_t g, dim3_t b, void** a, size_t s, void* st) { \
    static launch_t next = 0;                                                 \
    ++g_calls;                                                                \
    if (g_swallow) {                                                          \
      ++g_swallowed;                                                          \
      return 0;                                                               \
    }                                                                         \
    if (!next) next = (launch_t)dlsym(RTLD_NEXT, #name);                      \
    return next(f, g, b, a, s, st);                                           \
  }
WRAP(cudaLaunchKernel)
WRAP(cudaLaunchKernel_ptsz)
WRAP(__cudaLaunchKernel)
WRAP(__cudaLaunchKernel_ptsz)

typedef int (*launch_ex_t)(const void*, const void*, void**);
int cudaLaunchKernelExC(const void* config, const void* f, void** args) {
  static launch_ex_t next = 0;
  ++g_calls;
  if (g_swallow) {
    ++g_swallowed;
    return 0;
  }
  if (!next) next = (launch_ex_t)dlsym(RTLD_NEXT, "cudaLaunchKernelExC");
  return next(config, f, args);
}

__attribute__((destructor)) static void report(void) {
  fprintf(stderr, "runtime_swallow: %lu runtime launches, %lu swallowed\n", g_calls, g_swallowed);
}
