// op_cost: graft's CPU cost per intercepted op, measured against the null
// driver (bench/null_cuda.cc), which does nothing. Loads the driver the way
// the CUDA runtime does (dlopen + dlsym(cuGetProcAddress_v2) + self-lookup),
// then times ITERS iterations of OPS kernel launches followed by a stream
// synchronize. Run it with and without LD_PRELOAD=libgraft.so; the difference
// per op is graft's cost. Prints: ns_per_op=<median over 5 repetitions>.
//   op_cost [OPS] [ITERS] [--vary] [--big N] [--thrash KB [--stride B] [--huge]] [--code KB] [--distinct] [--novel] [--calls] [--mark]
// --vary: one parameter of every eighth kernel changes every iteration (as
// RNG offsets and optimizer scalars do in a training step). --big N: every
// N-th of the 64 kernels has a 4 KiB parameter (multi-tensor-apply style). --thrash KB: between two
// launches the program touches KB kilobytes of a 256 MiB buffer (a new part
// each time), as an interpreter does between launches, so graft's data and
// the driver's are no longer in the caches (or the TLB); the thrash costs the
// same with and without graft, so the difference is still graft's cost.
// --stride B: the thrash's step (default 4160: a new page every touch; 64
// evicts cache lines without touching more pages than it must; 4096 touches
// a new page each time at the same offset, which misses the TLB while it
// evicts only a few cache sets). --huge: the buffer is on transparent huge
// pages (madvise), so the thrash evicts cache lines but hardly any TLB
// entries; without it the buffer is explicitly on 4 KiB pages. Together they
// tell whether graft's per-op cost in a real program is TLB or cache misses.
// --code KB: between two launches the program also runs KB kilobytes of code
// (one jump per 64-byte line, a new part of a 16 MiB region each time), as an
// interpreter and a dispatcher do, so graft's code is no longer in the
// instruction cache or the L2 either (--thrash evicts data lines only).
// --distinct: every launch of an iteration is of its own kernel (by default
// 64 kernels repeat, so pieces of a replay look alike and several candidates
// stay live: more ops take the general path than in a real step).
// --novel: the launches' grid sizes change every iteration, so no sequence
// repeats and every op takes graft's learning path (recording, the period
// detector), as in a program whose shapes change every step before graft
// rests (GRAFT_DORMANT_AFTER_OPS; set it high to time the learning path only).
// --calls: also prints calls_ns_per_op, the time inside the launch calls
// alone (TSC-timed around each call; the thrash and the loop are left out),
// which isolates graft's per-op cost under --thrash.
// --mark: reads op_cost_marker before each launch, so a memory trace
// (scripts/footprint) can split graft's accesses by op.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <sys/mman.h>

#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <vector>

// Read before each launch under --mark; its address ends in a known pattern.
volatile unsigned long long op_cost_marker = 0;

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::atoi(argv[1]) : 200;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20000;
  bool vary = false;
  bool mark = false;
  bool calls = false;
  bool huge = false;
  int bigEvery = 0;
  size_t thrashBytes = 0;
  size_t thrashStride = 4096 + 64;
  size_t codeBytes = 0;
  bool distinct = false;
  bool novel = false;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--vary") == 0) vary = true;
    else if (std::strcmp(argv[i], "--mark") == 0) mark = true;
    else if (std::strcmp(argv[i], "--calls") == 0) calls = true;
    else if (std::strcmp(argv[i], "--huge") == 0) huge = true;
    else if (std::strcmp(argv[i], "--big") == 0 && i + 1 < argc) bigEvery = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--thrash") == 0 && i + 1 < argc) thrashBytes = size_t(std::atol(argv[++i])) << 10;
    else if (std::strcmp(argv[i], "--stride") == 0 && i + 1 < argc) thrashStride = size_t(std::atol(argv[++i]));
    else if (std::strcmp(argv[i], "--distinct") == 0) distinct = true;
    else if (std::strcmp(argv[i], "--novel") == 0) novel = true;
    else if (std::strcmp(argv[i], "--code") == 0 && i + 1 < argc) codeBytes = size_t(std::atol(argv[++i])) << 10;
  }
  const size_t poolBytes = size_t(256) << 20;
  unsigned char* pool = nullptr;
  if (thrashBytes) {
    const size_t hugePage = size_t(2) << 20;
    void* raw = mmap(nullptr, poolBytes + hugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      std::perror("op_cost: mmap");
      return 1;
    }
    pool = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + hugePage - 1) & ~(hugePage - 1));
    if (madvise(pool, poolBytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) std::perror("op_cost: madvise");
    std::memset(pool, 1, poolBytes);
    if (huge) {  // how much of the buffer the kernel really put on huge pages
      if (FILE* smaps = std::fopen("/proc/self/smaps_rollup", "r")) {
        char line[256];
        while (std::fgets(line, sizeof line, smaps))
          if (std::strncmp(line, "AnonHugePages:", 14) == 0) std::printf("huge_kb=%ld\n", std::atol(line + 14));
        std::fclose(smaps);
      }
    }
  }
  // --code: windows of codeBytes, each line a jump to the next, the last a return.
  const size_t codeRegion = size_t(16) << 20;
  unsigned char* code = nullptr;
  size_t codeWindows = 0, codeCursor = 0;
  if (codeBytes) {
    codeBytes = std::min(std::max<size_t>(codeBytes, 64), codeRegion);
    void* raw = mmap(nullptr, codeRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      std::perror("op_cost: mmap code");
      return 1;
    }
    code = static_cast<unsigned char*>(raw);
    std::memset(code, 0xcc, codeRegion);
    codeWindows = codeRegion / codeBytes;
    for (size_t w = 0; w < codeWindows; ++w)
      for (size_t line = 0; line < codeBytes; line += 64) {
        unsigned char* at = code + w * codeBytes + line;
        if (line + 64 < codeBytes) {
          at[0] = 0xeb;  // jmp rel8
          at[1] = 62;    // to the next line
        } else {
          at[0] = 0xc3;  // ret
        }
      }
    if (mprotect(code, codeRegion, PROT_READ | PROT_EXEC) != 0) {
      std::perror("op_cost: mprotect");
      return 1;
    }
  }
  auto runCode = [&] {
    reinterpret_cast<void (*)()>(code + (codeCursor++ % codeWindows) * codeBytes)();
  };
  size_t cursor = 0;
  unsigned sink = 0;
  auto thrash = [&] {
    for (size_t n = 0; n < thrashBytes; n += 64) {
      sink += pool[cursor];
      cursor = (cursor + thrashStride) % poolBytes;  // by default a new page every touch
    }
  };
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    std::fprintf(stderr, "op_cost: %s\n", dlerror());
    return 1;
  }
  auto gpa0 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
  PFN_cuGetProcAddress_v12000 gpa = nullptr;
  gpa0("cuGetProcAddress", reinterpret_cast<void**>(&gpa), 12000, 0, nullptr);
  PFN_cuLaunchKernel_v4000 launch = nullptr;
  PFN_cuStreamSynchronize_v2000 sync = nullptr;
  gpa("cuLaunchKernel", reinterpret_cast<void**>(&launch), 13000, 0, nullptr);
  gpa("cuStreamSynchronize", reinterpret_cast<void**>(&sync), 13000, 0, nullptr);
  std::vector<CUfunction> kernels(ops);
  // 64 distinct kernels, like a training step's mix; bit 0x20 of a handle
  // tells the null driver that its last parameter is 4 KiB.
  auto isBig = [&](int k) { return bigEvery > 0 && (k % 64) % bigEvery == 0; };
  for (int k = 0; k < ops; ++k)
    kernels[k] = reinterpret_cast<CUfunction>(0x10000 + 64 * (distinct ? k : k % 64) + (isBig(k) ? 0x20 : 0));
  unsigned long long a = 1, b = 2, c = 3, d = 4, fixed = 5;
  static unsigned char big[2][4096];  // [0]: fixed, [1]: varies with --vary
  void* params[2][4] = {{&a, &b, &c, &fixed}, {&a, &b, &c, &d}};
  void* bigParams[2][4] = {{&a, &b, &c, big[0]}, {&a, &b, &c, big[1]}};
  std::vector<double> reps, callReps;
  for (int rep = 0; rep < 5; ++rep) {
    unsigned long long callTicks = 0;
    const unsigned long long tsc0 = __rdtsc();
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) {
      if (vary) {
        d = it;
        std::memcpy(big[1], &it, sizeof(it));
      }
      for (int k = 0; k < ops; ++k) {
        if (thrashBytes) thrash();
        if (codeBytes) runCode();
        if (mark) sink += unsigned(op_cost_marker);
        const int varying = vary && k % 8 == 0;
        unsigned aux;
        const unsigned long long c0 = calls ? __rdtscp(&aux) : 0;
        const unsigned grid = novel ? 1 + unsigned(((size_t(rep) * iters + it) * ops + k) % 1000003) : 1 + k % 4;
        launch(kernels[k], grid, 1, 1, 128, 1, 1, 0, nullptr,
               isBig(k) ? bigParams[varying] : params[varying], nullptr);
        if (calls) callTicks += __rdtscp(&aux) - c0;
      }
      sync(nullptr);
    }
    const auto t1 = std::chrono::steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    reps.push_back(ns / (double(iters) * ops));
    callReps.push_back(double(callTicks) * ns / double(__rdtsc() - tsc0) / (double(iters) * ops));
  }
  std::sort(callReps.begin(), callReps.end());
  if (calls) std::printf("calls_ns_per_op=%.1f\n", callReps[callReps.size() / 2]);
  std::sort(reps.begin(), reps.end());
  std::printf("ns_per_op=%.1f\n", reps[reps.size() / 2]);
  if (mark) {
    // The mappings, so a trace's addresses can be told apart by library.
    if (FILE* maps = std::fopen("/proc/self/maps", "r")) {
      char line[512];
      while (std::fgets(line, sizeof line, maps)) std::printf("map %s", line);
      std::fclose(maps);
    }
    std::printf("marker=%p\n", static_cast<void*>(const_cast<unsigned long long*>(&op_cost_marker)));
  }
  if (sink == 12345) std::printf(" \n");
  return 0;
}
