// sim_review49_params: a red-team review of kernel parameter handling end to
// end (helper-written): how graft decodes a launch's arguments (kernelParams,
// `extra` buffers, cuLaunchKernelEx; src/graph/op_codec.cc), learns layouts
// (src/graph/kernel_registry.cc), compares and holds values (the fast lane in
// src/hook/interpose.cc, src/core/engine.cc) and patches differing values
// into its graphs (src/graph/graph_executor.cc). Every step issues work long
// enough to be graphed; the parameter bytes change in odd ways. A host model
// of every buffer is compared after each synchronization, and every launch of
// a checked kernel (named sim_add_r49_* / sim_mix_r49_*) must have run with
// exactly the bytes the program gave at its call (the simulator's executed
// trace: packed parameters, padding between parameters zeroed), in order:
//   sim_review49_params --mode MODE [--steps N] [--expect-graphs]
//                       [--min-graph-pct P]
//
// big-compact    a kernel (8,8,8,4, a 32732-byte struct): 32764 parameter
//                bytes, CUDA's limit (the simulator has none), five
//                parameters, so graft's compact layout. Three launches a
//                step: kernelParams whose struct changes in 3 scattered
//                bytes, or reverts to its value of 5 steps before, or
//                changes only in bytes the program treats as padding inside
//                the struct, or stays; kernelParams whose struct changes
//                only in its first or last byte; and an `extra` buffer
//                (garbage in the padding before the struct, changing every
//                step; the buffer overwritten right after the call); on
//                irregular steps the host then sleeps 8 ms (graft's idle
//                flush issues the held launches).
// big-wide       a kernel of 1003 parameters of 1..64 bytes with alignments
//                up to 16 (padding between many of them), 16021 bytes; one packed
//                storage block the kernelParams entries point into (its
//                padding holds garbage), rewritten between the launches: two
//                cuLaunchKernel, one cuLaunchKernelEx with a priority
//                attribute (graft's described path), one
//                cuLaunchCooperativeKernel; a few scattered parameters change
//                each step, sometimes back to the values of 6 steps before.
// form-switch    one kernel (8,8,8,4,2,1,8,12 aligned 16: padding at 31 and
//                40..47) at one place launched by kernelParams, by an
//                `extra` buffer (cuLaunchKernel and cuLaunchKernelEx) in a
//                5-step pattern and other forms on irregular steps, with the
//                same bytes; a second place always by `extra`, from a buffer
//                at an odd address that moves, with BUFFER_SIZE first on odd
//                steps, whose size variable and buffer are overwritten after
//                the call; a third place (through cuLaunchKernelEx on the
//                pattern's fourth step) whose `extra` buffer holds dst and
//                src swapped on irregular steps (another effect).
//                Synchronized every step: six shapes of the step.
// value-cycle    four launches whose increments cycle with periods 9, 16, 17
//                and 31 and a 40-byte struct cycling with period 23 (values
//                go back to older ones; no shape changes): all patches.
// variant-cycle  a run of 8 launches whose grid cycles with period 7 and a
//                place whose form (kernelParams / `extra`) cycles with period
//                5 (7 shapes of the run, 35 of the step, beyond
//                GRAFT_MAX_VARIANTS=3 with which it is registered), values
//                changing every step.
// piece-edges    24 sim_mix launches a step over four buffers, synchronized
//                every step; increments change only at the first and last
//                ops of 6-op pieces (registered with GRAFT_SEGMENT_OPS=6 and
//                without), the step's first and last op every step.
// host-struct-after  a kernel with a 200-byte struct by value whose storage
//                is a host struct rewritten with garbage right after each
//                call, or a helper function's stack frame, overwritten by the
//                next call; a cuLaunchKernelEx whose config and attributes
//                live in such a frame too; launches whose kernelParams array
//                and storage, or `extra` array, buffer and size, live in a
//                page unmapped right after the call (a later read faults).
//                Synchronized every 6 steps only; on irregular steps the host
//                sleeps 8 ms after the launches (graft's idle flush).
// shared-args    three kernels of different layouts launched from one
//                `void*` array and one storage block whose entries move by
//                3 bytes a step (unaligned) and alias each other (dst and src
//                one storage), rewritten between every two calls and after
//                the last.
// shared-layout  24 kernels of one layout (12 of one name, sim_add_r49_same;
//                12 sim_mix_r49_same_N), in a fixed order with their own
//                buffers; increments change per kernel on irregular steps, and
//                on other irregular steps two adjacent kernels swap places.
//                The trace check also compares the kernel handle.
// unknown-layout  kernels whose layout the driver does not say
//                (SIM_KERNEL_OPAQUE: cuKernelGetParamInfo and
//                cuFuncGetParamInfo fail) at the step's first op, in the
//                middle (kernelParams, or an `extra` buffer on some steps) and
//                at its last op, between graphable runs of a library kernel
//                and a module function (CUfunction); graft runs them eagerly
//                in sequence.
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs; --min-graph-pct P: exit 3 unless at least P %
// of the executed effects came from graphs. Exit 1 on a wrong code or value.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 8, 7); }
uint64_t mix(uint64_t a, uint64_t b) { return simMix64(a * 0x9e3779b97f4a7c15ull + b * 0x632be59bd9b4e019ull + 1); }

[[noreturn]] void fatal(const char* what) {
  std::printf("sim_review49_params: %s: %s\n", g_mode, what);
  std::exit(2);
}

// A kernel made by simKernelCreate and its packed layout.
struct Kern {
  CUfunction f = nullptr;
  std::string name;
  std::vector<size_t> off, size;
  size_t total = 0;
};

Kern makeKern(const char* name, SimKernelFamily family, const std::vector<size_t>& sizes,
              const std::vector<size_t>& aligns = {}) {
  Kern k;
  k.name = name;
  k.f = simKernelCreate(name, family, unsigned(sizes.size()), sizes.data(), aligns.empty() ? nullptr : aligns.data());
  if (!k.f) fatal("simKernelCreate refused a kernel");
  k.total = simKernelParamBytes(k.f);
  k.off.resize(sizes.size());
  k.size.resize(sizes.size());
  for (unsigned i = 0; i < sizes.size(); ++i) simKernelParamLayout(k.f, i, &k.off[i], &k.size[i]);
  return k;
}

// Packed bytes (padding zeroed) from one pointer per parameter, or from a
// buffer in the kernel's layout: what the driver gives the kernel.
std::vector<uint8_t> packArgs(const Kern& k, void* const* args) {
  std::vector<uint8_t> out(k.total, 0);
  for (size_t i = 0; i < k.size.size(); ++i) std::memcpy(out.data() + k.off[i], args[i], k.size[i]);
  return out;
}
std::vector<uint8_t> packBuffer(const Kern& k, const uint8_t* buffer) {
  std::vector<uint8_t> out(k.total, 0);
  for (size_t i = 0; i < k.size.size(); ++i) std::memcpy(out.data() + k.off[i], buffer + k.off[i], k.size[i]);
  return out;
}

// A host model of the program's buffers (zeroed at the start), one stream.
struct Shadow : ShadowMemory {
  // The effect of a sim_add / sim_mix launch with these packed bytes.
  void apply(const Kern& k, const std::vector<uint8_t>& p) {
    uint64_t dst, src, kk;
    std::memcpy(&dst, p.data() + k.off[0], 8);
    std::memcpy(&src, p.data() + k.off[1], 8);
    std::memcpy(&kk, p.data() + k.off[2], 8);
    const uint64_t v = read64(src);
    write64(dst, k.name.rfind("sim_add", 0) == 0 ? v + kk : simMix64(v ^ kk));
  }
};

// The checked launches given since the last trace check, in issue order.
struct Want {
  CUfunction f;
  std::string name;
  std::vector<uint8_t> bytes;
  unsigned gridX;
};

struct Program {
  const simtest::DriverApi& cu;
  CUstream s = nullptr;
  Shadow m;
  std::vector<Want> want;
  Kern chain;  // unchecked sim_add of three 8-byte parameters
  CUdeviceptr w = 0;
  bool checkHandles = false;

  explicit Program(const simtest::DriverApi& api) : cu(api) {
    SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    chain = makeKern("sim_add_chain49", SIM_KERNEL_LIBRARY, {8, 8, 8});
    w = buffer("w");
  }
  CUdeviceptr buffer(const std::string& name, size_t bytes = 64) {
    const CUdeviceptr p = simtest::zeroedBuffer(cu, bytes);
    if (!p) fatal("no memory");
    m.track(p, bytes, name);
    return p;
  }
  void noteLaunch(const Kern& k, const std::vector<uint8_t>& bytes, unsigned gridX) {
    m.apply(k, bytes);
    want.push_back({k.f, k.name, bytes, gridX});
  }
  // w += 1, n times (graphable filler).
  void filler(int n) {
    for (int c = 0; c < n; ++c) {
      CUdeviceptr a = w, b = w;
      uint64_t one = 1;
      void* args[] = {&a, &b, &one};
      SIM_CHECK(cu.cuLaunchKernel(chain.f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      m.apply(chain, packArgs(chain, args));
    }
  }
  CUresult launchParams(const Kern& k, void** args, unsigned gridX = 1) {
    noteLaunch(k, packArgs(k, args), gridX);
    return cu.cuLaunchKernel(k.f, gridX, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  // An `extra` launch of `buffer` (the kernel's total size), BUFFER_SIZE
  // first when sizeFirst; through cuLaunchKernelEx when ex.
  CUresult launchExtra(const Kern& k, uint8_t* buffer, size_t* size, bool sizeFirst, bool ex, unsigned gridX = 1) {
    noteLaunch(k, packBuffer(k, buffer), gridX);
    void* extra[5];
    if (sizeFirst) {
      extra[0] = CU_LAUNCH_PARAM_BUFFER_SIZE;
      extra[1] = size;
      extra[2] = CU_LAUNCH_PARAM_BUFFER_POINTER;
      extra[3] = buffer;
    } else {
      extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
      extra[1] = buffer;
      extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
      extra[3] = size;
    }
    extra[4] = CU_LAUNCH_PARAM_END;
    if (!ex) return cu.cuLaunchKernel(k.f, gridX, 1, 1, 1, 1, 1, 0, s, nullptr, extra);
    CUlaunchConfig cfg{};
    cfg.gridDimX = gridX;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    return cu.cuLaunchKernelEx(&cfg, k.f, nullptr, extra);
  }
  void syncCheck(int step) {
    SIM_CHECK(cu.cuStreamSynchronize(s));
    m.check(step);
  }
  // Every checked launch since the last call ran, in order, with the bytes
  // (and grid, and with checkHandles the handle) given. Clears the trace.
  void checkTrace(int step) {
    SIM_CHECK(cu.cuCtxSynchronize());
    size_t seen = 0;
    int shown = 0;
    for (size_t n = 0, count = simTraceSize(); n < count; ++n) {
      SimEffect fx{};
      if (simTraceGet(n, &fx) != 0 || fx.kind != SIM_EFFECT_KERNEL || !fx.kernelName) continue;
      if (std::strncmp(fx.kernelName, "sim_add_r49_", 12) && std::strncmp(fx.kernelName, "sim_mix_r49_", 12)) continue;
      const size_t idx = seen++;
      if (idx >= want.size()) continue;
      const Want& wnt = want[idx];
      const bool sameBytes = fx.paramBytes == wnt.bytes.size() && std::memcmp(fx.params, wnt.bytes.data(), fx.paramBytes) == 0;
      const bool same = sameBytes && wnt.name == fx.kernelName && fx.grid[0] == wnt.gridX &&
                        (!checkHandles || fx.func == wnt.f);
      if (same) continue;
      ++g_wrong;
      if (shown++ < 4) {
        std::printf("sim_review49_params: %s: before step %d: launch %zu ran %s (given %s) grid %u (given %u), %s;",
                    g_mode, step, idx, fx.kernelName, wnt.name.c_str(), fx.grid[0], wnt.gridX,
                    checkHandles && fx.func != wnt.f ? "another handle" : "its handle");
        int diffs = 0;
        for (size_t b = 0; b < std::min(fx.paramBytes, wnt.bytes.size()) && diffs < 6; ++b)
          if (fx.params[b] != wnt.bytes[b]) {
            std::printf(" [%zu] %02x (given %02x)", b, fx.params[b], wnt.bytes[b]);
            ++diffs;
          }
        if (fx.paramBytes != wnt.bytes.size()) std::printf(" %zu bytes (given %zu)", fx.paramBytes, wnt.bytes.size());
        std::printf("\n");
      }
    }
    expectValue(seen, want.size(), "executed checked launches", step);
    want.clear();
    simTraceClear();
  }
};

// ------------------------------------------------------------------ modes

void bigCompact(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  const Kern big = makeKern("sim_add_r49_big", SIM_KERNEL_LIBRARY, {8, 8, 8, 4, 32732});
  if (big.total != 32764 || big.off[4] != 32) fatal("unexpected layout");
  const size_t S = big.size[4];
  const CUdeviceptr x = p.buffer("x"), y = p.buffer("y"), z = p.buffer("z");
  std::vector<uint8_t> s1(S), s2(S);
  for (size_t b = 0; b < S; ++b) s1[b] = uint8_t(mix(b, 1)), s2[b] = uint8_t(mix(b, 2));
  std::vector<std::vector<uint8_t>> history(16, s1);
  std::vector<uint8_t> extraBuf(big.total);
  size_t extraSize = big.total;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    p.filler(6);
    // Launch 1: scattered bytes, a revert, padding-only bytes, or nothing.
    if (irregular(i, 1) && i >= 5) {
      s1 = history[size_t(i - 5) % 16];
      ++g_provoked;
    } else if (irregular(i, 2)) {
      for (int j = 0; j < 2; ++j) {  // "padding": bytes 56..63 of every 64 (read by no field of the program's)
        const size_t pos = (mix(uint64_t(i), uint64_t(j)) % (S / 64)) * 64 + 56 + (mix(uint64_t(i), 9) % 8);
        s1[pos] ^= uint8_t(1 + j);
      }
      ++g_provoked;
    } else if (i % 3) {
      for (int j = 0; j < 3; ++j) s1[mix(uint64_t(i), uint64_t(j) + 10) % S] = uint8_t(mix(uint64_t(i), uint64_t(j) + 20));
    }
    history[size_t(i) % 16] = s1;
    CUdeviceptr d1 = x, s1p = x;
    uint64_t k1 = irregular(i, 3) ? uint64_t(i) : 1;
    uint32_t tag1 = uint32_t(i % 4);
    void* a1[] = {&d1, &s1p, &k1, &tag1, s1.data()};
    SIM_CHECK(p.launchParams(big, a1));
    p.filler(3);
    // Launch 2: its struct's first byte on even steps, last on odd ones.
    if (i % 2) s2[S - 1] = uint8_t(i);
    else s2[0] = uint8_t(i);
    CUdeviceptr d2 = y, s2p = x;
    uint64_t k2 = 2;
    uint32_t tag2 = 7;
    void* a2[] = {&d2, &s2p, &k2, &tag2, s2.data()};
    SIM_CHECK(p.launchParams(big, a2));
    // Launch 3: an `extra` buffer, garbage in the padding (bytes 28..31).
    const CUdeviceptr d3 = z, s3p = y;
    const uint64_t k3 = uint64_t(i) << 20;
    const uint32_t tag3 = 0xabc00000u + uint32_t(i);
    std::memcpy(extraBuf.data(), &d3, 8);
    std::memcpy(extraBuf.data() + 8, &s3p, 8);
    std::memcpy(extraBuf.data() + 16, &k3, 8);
    std::memcpy(extraBuf.data() + 24, &tag3, 4);
    const uint32_t garbage = uint32_t(mix(uint64_t(i), 77));
    std::memcpy(extraBuf.data() + 28, &garbage, 4);
    std::memcpy(extraBuf.data() + 32, s1.data(), S);
    extraBuf[32 + size_t(i) % S] ^= 0x5a;
    SIM_CHECK(p.launchExtra(big, extraBuf.data(), &extraSize, false, false));
    std::memset(extraBuf.data(), 0xee, extraBuf.size());  // right after the call
    if (irregular(i, 4)) {  // graft's idle flush issues what it holds meanwhile
      usleep(8000);
      ++g_provoked;
    }
    p.filler(3);
    if (i % 4 == 3 || i == steps - 1) p.syncCheck(i);
    if (i % 16 == 15 || i == steps - 1) p.checkTrace(i);
  }
}

void bigWide(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  static const size_t kSizes[] = {1, 2, 4, 8, 12, 16, 24, 64, 3, 5};
  static const size_t kAligns[] = {1, 2, 4, 8, 4, 16, 8, 16, 1, 1};
  std::vector<size_t> sizes = {8, 8, 8}, aligns = {8, 8, 8};
  for (int j = 0; j < 1000; ++j) {
    sizes.push_back(kSizes[j % 10]);
    aligns.push_back(kAligns[(j * 7) % 10]);
  }
  const Kern wide = makeKern("sim_add_r49_wide", SIM_KERNEL_LIBRARY, sizes, aligns);
  if (wide.total > 32764) fatal("wide kernel over 32764 bytes");
  const size_t n = wide.size.size();
  const CUdeviceptr x = p.buffer("x"), y = p.buffer("y");
  // One packed storage block; the kernelParams entries point into it.
  std::vector<uint8_t> store(wide.total);
  for (size_t b = 0; b < store.size(); ++b) store[b] = uint8_t(mix(b, 3));
  std::vector<void*> args(n);
  for (size_t j = 0; j < n; ++j) args[j] = store.data() + wide.off[j];
  std::vector<std::vector<uint8_t>> history(8, store);
  auto setHead = [&](CUdeviceptr d, CUdeviceptr src, uint64_t k) {
    std::memcpy(store.data() + wide.off[0], &d, 8);
    std::memcpy(store.data() + wide.off[1], &src, 8);
    std::memcpy(store.data() + wide.off[2], &k, 8);
  };
  auto scribblePadding = [&](int i) {  // the bytes between parameters: read by nobody
    size_t end = 0;
    for (size_t j = 0; j < n; ++j) {
      for (size_t b = end; b < wide.off[j]; ++b) store[b] = uint8_t(mix(uint64_t(i), b));
      end = wide.off[j] + wide.size[j];
    }
  };
  CUlaunchAttribute prio;
  std::memset(&prio, 0, sizeof prio);
  prio.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    p.filler(5);
    if (irregular(i, 4) && i >= 6) {
      store = history[size_t(i - 6) % 8];  // every parameter back to 6 steps before
      for (size_t j = 0; j < n; ++j) args[j] = store.data() + wide.off[j];
      ++g_provoked;
    } else {
      for (int c = 0; c < 3; ++c) {
        const size_t j = 3 + mix(uint64_t(i), uint64_t(c)) % (n - 3);
        std::memset(store.data() + wide.off[j], int(mix(uint64_t(i), 100 + uint64_t(c)) & 0xff), wide.size[j]);
      }
    }
    history[size_t(i) % 8] = store;
    scribblePadding(i);
    setHead(x, x, 1);
    SIM_CHECK(p.launchParams(wide, args.data()));
    // The same storage rewritten for the next launch.
    setHead(y, x, irregular(i, 5) ? 5 : 3);
    const size_t j = 3 + size_t(i) % (n - 3);
    store[wide.off[j]] ^= 0x80;
    SIM_CHECK(p.launchParams(wide, args.data()));
    p.filler(2);
    // cuLaunchKernelEx with an attribute (the described comparison).
    setHead(x, y, uint64_t(i));
    prio.value.priority = irregular(i, 6) ? -1 : 0;
    {
      CUlaunchConfig cfg{};
      cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = p.s;
      cfg.attrs = &prio;
      cfg.numAttrs = 1;
      p.noteLaunch(wide, packArgs(wide, args.data()), 1);
      SIM_CHECK(cu.cuLaunchKernelEx(&cfg, wide.f, args.data(), nullptr));
    }
    // A cooperative launch of it.
    setHead(y, y, 1);
    store[wide.off[n - 1]] = uint8_t(i);
    p.noteLaunch(wide, packArgs(wide, args.data()), 1);
    SIM_CHECK(cu.cuLaunchCooperativeKernel(wide.f, 1, 1, 1, 1, 1, 1, 0, p.s, args.data()));
    std::memset(store.data(), 0xcd, store.size());  // after the last call of the step
    std::memcpy(store.data(), history[size_t(i) % 8].data(), store.size());
    p.filler(3);
    if (i % 3 == 2 || i == steps - 1) p.syncCheck(i);
    if (i % 20 == 19 || i == steps - 1) p.checkTrace(i);
  }
}

void formSwitch(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  const Kern k = makeKern("sim_mix_r49_form", SIM_KERNEL_LIBRARY, {8, 8, 8, 4, 2, 1, 8, 12}, {8, 8, 8, 4, 2, 1, 8, 16});
  if (k.total != 60 || k.off[7] != 48) fatal("unexpected layout");
  const CUdeviceptr x = p.buffer("x"), y = p.buffer("y"), z = p.buffer("z");
  // Parameter storage of the kernelParams form.
  struct Vals {
    CUdeviceptr dst, src;
    uint64_t k;
    uint32_t a;
    uint16_t h;
    uint8_t b;
    uint64_t t;
    uint8_t tail[12];
  } v{};
  void* args[] = {&v.dst, &v.src, &v.k, &v.a, &v.h, &v.b, &v.t, v.tail};
  uint8_t storage[256];
  auto fill = [&](uint8_t* buf, int i) {  // the kernel's layout, garbage in its padding
    for (size_t b = 0; b < k.total; ++b) buf[b] = uint8_t(mix(uint64_t(i), b + 300));
    for (size_t j = 0; j < 8; ++j) std::memcpy(buf + k.off[j], args[j], k.size[j]);
  };
  size_t size = k.total;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    p.filler(5);
    // Place 1: the form follows a 5-step pattern, another on irregular steps.
    static const int kPattern[] = {0, 1, 0, 2, 1};  // 0 kernelParams, 1 extra, 2 extra through Ex
    int form = kPattern[i % 5];
    if (irregular(i, 7)) {
      form = (form + 1 + int(mix(uint64_t(i), 5) % 2)) % 3;
      ++g_provoked;
    }
    v = Vals{};
    v.dst = y;
    v.src = x;
    v.k = irregular(i, 8) ? uint64_t(i) : 11;
    v.a = uint32_t(i % 3);
    v.h = 0x0100;
    v.b = uint8_t(i % 2);
    v.t = 0x1234;
    std::memset(v.tail, i % 5, sizeof v.tail);
    if (form == 0) {
      SIM_CHECK(p.launchParams(k, args));
    } else {
      fill(storage, i);
      SIM_CHECK(p.launchExtra(k, storage, &size, false, form == 2));
      std::memset(storage, 0xee, sizeof storage);
    }
    p.filler(3);
    // Place 2: an `extra` buffer at an odd, moving address; its size
    // variable overwritten after the call.
    v.dst = z;
    v.src = y;
    v.k = 3;
    uint8_t* at = storage + 1 + 2 * (i % 4);
    fill(at, i);
    SIM_CHECK(p.launchExtra(k, at, &size, i % 2 == 1, false));
    size = 0;  // after the call
    std::memset(storage, 0xee, sizeof storage);
    size = k.total;
    // Place 3: dst and src swapped in the buffer on irregular steps.
    const bool swapped = irregular(i, 9);
    g_provoked += swapped;
    v.dst = swapped ? z : x;
    v.src = swapped ? x : z;
    v.k = 5;
    fill(storage + 8, i);
    SIM_CHECK(p.launchExtra(k, storage + 8, &size, false, i % 5 == 3));
    std::memset(storage, 0xee, sizeof storage);
    p.filler(3);
    p.syncCheck(i);
    if (i % 25 == 24 || i == steps - 1) p.checkTrace(i);
  }
}

void valueCycle(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  const Kern add = makeKern("sim_add_r49_cycle", SIM_KERNEL_LIBRARY, {8, 8, 8});
  const Kern st = makeKern("sim_mix_r49_cycle_struct", SIM_KERNEL_LIBRARY, {8, 8, 8, 40});
  CUdeviceptr b[5];
  for (int j = 0; j < 5; ++j) b[j] = p.buffer("b" + std::to_string(j));
  static const int kPeriods[] = {9, 16, 17, 31};
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    p.filler(4);
    for (int j = 0; j < 4; ++j) {
      CUdeviceptr d = b[j + 1], src = b[j];
      uint64_t k = mix(uint64_t(i % kPeriods[j]), uint64_t(j));
      if (j == 2) k &= 0xff;  // small values: a revert to an older one changes one byte
      void* a[] = {&d, &src, &k};
      SIM_CHECK(p.launchParams(add, a));
      p.filler(2);
    }
    uint8_t blob[40];
    for (int c = 0; c < 40; ++c) blob[c] = uint8_t(mix(uint64_t(i % 23), uint64_t(c)) & 0x3);
    CUdeviceptr d = b[0], src = b[4];
    uint64_t k = 1;
    void* a[] = {&d, &src, &k, blob};
    SIM_CHECK(p.launchParams(st, a));
    p.syncCheck(i);
    if (i % 25 == 24 || i == steps - 1) p.checkTrace(i);
  }
}

void variantCycle(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  const Kern g = makeKern("sim_add_r49_grid", SIM_KERNEL_LIBRARY, {8, 8, 8, 4});
  const Kern f = makeKern("sim_mix_r49_form2", SIM_KERNEL_LIBRARY, {8, 8, 8, 2});
  const CUdeviceptr x = p.buffer("x"), y = p.buffer("y");
  size_t size = f.total;
  uint8_t buf[64];
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    p.filler(8);
    // A run of 8 launches whose grid cycles with period 7 (one shape of the
    // run per grid), values changing every step.
    for (int c = 0; c < 8; ++c) {
      CUdeviceptr d = c % 2 ? x : y, src = c % 2 ? y : x;
      uint64_t k = uint64_t(i * 8 + c);
      uint32_t tag = uint32_t(i % 13);
      void* a[] = {&d, &src, &k, &tag};
      SIM_CHECK(p.launchParams(g, a, 1 + unsigned(i % 7)));
    }
    p.filler(8);
    CUdeviceptr d2 = y, s2 = x;
    uint64_t k2 = uint64_t(i % 11);
    uint16_t h = uint16_t(i);
    void* a2[] = {&d2, &s2, &k2, &h};
    if (i % 5 < 2) {
      SIM_CHECK(p.launchParams(f, a2));
    } else {
      std::memset(buf, 0x77, sizeof buf);
      for (int j = 0; j < 4; ++j) std::memcpy(buf + f.off[j], a2[j], f.size[j]);
      SIM_CHECK(p.launchExtra(f, buf, &size, i % 5 == 4, false));
    }
    p.filler(8);
    p.syncCheck(i);
    if (i % 25 == 24 || i == steps - 1) p.checkTrace(i);
  }
}

void pieceEdges(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  const Kern mx = makeKern("sim_mix_r49_piece", SIM_KERNEL_LIBRARY, {8, 8, 8, 4});
  CUdeviceptr b[4];
  for (int j = 0; j < 4; ++j) b[j] = p.buffer("b" + std::to_string(j));
  constexpr int kOps = 24, kPiece = 6;
  uint64_t ks[kOps];
  for (int j = 0; j < kOps; ++j) ks[j] = uint64_t(j) * 1000 + 1;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < kOps; ++j) {
      const bool edge = j % kPiece == 0 || j % kPiece == kPiece - 1;
      if (j == 0 || j == kOps - 1) ks[j] = uint64_t(i) * 7 + uint64_t(j);  // every step
      else if (edge && irregular(i, 20 + uint64_t(j))) {
        ks[j] ^= uint64_t(1) << (i % 64);
        ++g_provoked;
      }
      CUdeviceptr d = b[j % 4], src = b[(j + 1) % 4];
      uint32_t tag = uint32_t(j);
      void* a[] = {&d, &src, &ks[j], &tag};
      SIM_CHECK(p.launchParams(mx, a));
    }
    p.syncCheck(i);
    if (i % 25 == 24 || i == steps - 1) p.checkTrace(i);
  }
}

struct Big200 {
  uint64_t words[25];
};

// A launch whose parameter storage is this function's frame: gone when it
// returns (legal: the driver copies the values at the call).
__attribute__((noinline)) CUresult launchFromFrame(Program& p, const Kern& k, CUdeviceptr d, CUdeviceptr src,
                                                   uint64_t kk, int i, bool ex) {
  Big200 blob;
  for (int c = 0; c < 25; ++c) blob.words[c] = mix(uint64_t(i / 3), uint64_t(c));
  blob.words[i % 25] ^= uint64_t(i);
  void* args[] = {&d, &src, &kk, &blob};
  if (!ex) return p.launchParams(k, args);
  CUlaunchAttribute attrs[2];
  std::memset(attrs, 0, sizeof attrs);
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[0].value.priority = -(i % 2);
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[1].value.clusterDim.x = attrs[1].value.clusterDim.y = attrs[1].value.clusterDim.z = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = p.s;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  p.noteLaunch(k, packArgs(k, args), 1);
  return p.cu.cuLaunchKernelEx(&cfg, k.f, args, nullptr);
}

// A launch whose kernelParams array and storage (or `extra` array, buffer
// and size) live in a page unmapped right after the call: reading them later
// faults.
CUresult launchFromUnmapped(Program& p, const Kern& k, CUdeviceptr d, CUdeviceptr src, uint64_t kk, int i,
                            bool extraForm) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) fatal("mmap failed");
  auto* bytes = static_cast<uint8_t*>(mem);
  for (size_t b = 0; b < page; ++b) bytes[b] = uint8_t(mix(uint64_t(i), b));
  uint8_t* buf = bytes + 64;  // the kernel's layout
  std::memcpy(buf + k.off[0], &d, 8);
  std::memcpy(buf + k.off[1], &src, 8);
  std::memcpy(buf + k.off[2], &kk, 8);
  CUresult r;
  if (extraForm) {
    auto* size = reinterpret_cast<size_t*>(bytes + 2048);
    *size = k.total;
    auto** extra = reinterpret_cast<void**>(bytes + 2112);
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = buf;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = size;
    extra[4] = CU_LAUNCH_PARAM_END;
    p.noteLaunch(k, packBuffer(k, buf), 1);
    r = p.cu.cuLaunchKernel(k.f, 1, 1, 1, 1, 1, 1, 0, p.s, nullptr, extra);
  } else {
    auto** args = reinterpret_cast<void**>(bytes + 3072);
    for (size_t j = 0; j < k.size.size(); ++j) args[j] = buf + k.off[j];
    p.noteLaunch(k, packArgs(k, args), 1);
    r = p.cu.cuLaunchKernel(k.f, 1, 1, 1, 1, 1, 1, 0, p.s, args, nullptr);
  }
  munmap(mem, page);
  return r;
}

// Overwrites the stack where the frame above was.
__attribute__((noinline)) uint64_t scribbleStack(int i) {
  volatile uint8_t junk[4096];
  for (size_t b = 0; b < sizeof junk; ++b) junk[b] = uint8_t(b * 31 + unsigned(i));
  return junk[i % 4096];
}

void hostStructAfter(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  const Kern k = makeKern("sim_add_r49_host", SIM_KERNEL_LIBRARY, {8, 8, 8, sizeof(Big200)});
  const CUdeviceptr x = p.buffer("x"), y = p.buffer("y"), z = p.buffer("z");
  static Big200 shared;  // one host struct for every launch
  static CUdeviceptr d, src;
  static uint64_t kk;
  void* args[] = {&d, &src, &kk, &shared};
  uint64_t sink = 0;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    p.filler(4);
    for (int c = 0; c < 25; ++c) shared.words[c] = mix(uint64_t(i % 5), uint64_t(c));
    d = x;
    src = x;
    kk = irregular(i, 30) ? 2 : 1;
    SIM_CHECK(p.launchParams(k, args));
    std::memset(&shared, 0xa5, sizeof shared);  // right after the call
    d = src = z;  // what a held launch must not see
    kk = 1000;
    p.filler(2);
    SIM_CHECK(launchFromFrame(p, k, y, x, uint64_t(i % 4), i, false));
    sink += scribbleStack(i);
    SIM_CHECK(launchFromFrame(p, k, z, y, 3, i, true));
    sink += scribbleStack(i + 1);
    SIM_CHECK(launchFromUnmapped(p, k, y, z, uint64_t(i % 3), i, false));
    SIM_CHECK(launchFromUnmapped(p, k, z, z, 1, i, true));
    if (irregular(i, 31)) {  // graft's idle flush issues what it holds meanwhile
      usleep(8000);
      ++g_provoked;
    }
    p.filler(2);
    if (i % 6 == 5 || i == steps - 1) p.syncCheck(i);
    if (i % 30 == 29 || i == steps - 1) p.checkTrace(i);
  }
  if (sink == 1) std::printf(" ");
}

void sharedArgs(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  const Kern ka = makeKern("sim_add_r49_sa", SIM_KERNEL_LIBRARY, {8, 8, 8});
  const Kern kb = makeKern("sim_mix_r49_sb", SIM_KERNEL_LIBRARY, {8, 8, 8, 4, 1, 8});
  const Kern kc = makeKern("sim_add_r49_sc", SIM_KERNEL_LIBRARY, {8, 8, 8, 2, 16});
  const CUdeviceptr x = p.buffer("x"), y = p.buffer("y"), z = p.buffer("z");
  alignas(16) static uint8_t storage[4096];
  void* args[16];
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    p.filler(4);
    const size_t shift = size_t(i % 5) * 3 + 64;  // entries move every step, to odd addresses too
    uint8_t* base = storage + shift;
    auto put = [&](size_t at, const void* v, size_t n) { std::memcpy(base + at, v, n); };
    // a: x = x + 1 (dst and src one storage)
    const CUdeviceptr d = x;
    const uint64_t one = irregular(i, 40) ? 4 : 1;
    put(0, &d, 8);
    put(16, &one, 8);
    args[0] = base;
    args[1] = base;  // aliases args[0]
    args[2] = base + 16;
    SIM_CHECK(p.launchParams(ka, args));
    std::memset(storage, 0x5c, sizeof storage);
    // b: y = mix(x ^ k), the same array and storage, other offsets
    const CUdeviceptr dy = y, sx = x;
    const uint64_t kb8 = uint64_t(i % 6);
    const uint32_t a4 = 0xdead0000u | uint32_t(i % 2);
    const uint8_t b1 = uint8_t(i % 3);
    const uint64_t t8 = 42;
    put(8, &dy, 8);
    put(24, &sx, 8);
    put(40, &kb8, 8);
    put(48, &a4, 4);
    put(52, &b1, 1);
    put(56, &t8, 8);
    args[0] = base + 8;
    args[1] = base + 24;
    args[2] = base + 40;
    args[3] = base + 48;
    args[4] = base + 52;
    args[5] = base + 56;
    SIM_CHECK(p.launchParams(kb, args));
    std::memset(storage, 0x6d, sizeof storage);
    // c: z = y + k, its 2-byte and 16-byte values shared with k's storage
    const CUdeviceptr dz = z, sy = y;
    const uint64_t kc8 = uint64_t(i);
    put(0, &dz, 8);
    put(8, &sy, 8);
    put(16, &kc8, 8);
    args[0] = base;
    args[1] = base + 8;
    args[2] = base + 16;
    args[3] = base + 16;  // the low 2 bytes of k
    args[4] = base + 8;   // 16 bytes: src and k
    SIM_CHECK(p.launchParams(kc, args));
    std::memset(storage, 0x7e, sizeof storage);
    for (void*& a : args) a = storage;  // after the last call
    p.filler(2);
    if (i % 3 == 2 || i == steps - 1) p.syncCheck(i);
    if (i % 30 == 29 || i == steps - 1) p.checkTrace(i);
  }
}

void sharedLayout(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  p.checkHandles = true;
  constexpr int kKernels = 24;
  std::vector<Kern> ks;
  std::vector<CUdeviceptr> bufs;
  for (int j = 0; j < kKernels; ++j) {
    const std::string name = j % 2 ? "sim_add_r49_same" : "sim_mix_r49_same_" + std::to_string(j);
    ks.push_back(makeKern(name.c_str(), SIM_KERNEL_LIBRARY, {8, 8, 8, 4}));
    bufs.push_back(p.buffer("b" + std::to_string(j)));
  }
  std::vector<uint64_t> inc(kKernels);
  for (int j = 0; j < kKernels; ++j) inc[j] = uint64_t(j) + 1;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < kKernels; ++j)
      if (irregular(i, 50 + uint64_t(j))) {
        inc[j] += uint64_t(1) << (j % 40);
        ++g_provoked;
      }
    std::vector<int> order(kKernels);
    for (int j = 0; j < kKernels; ++j) order[j] = j;
    if (irregular(i, 49)) {
      const int at = int(mix(uint64_t(i), 3) % (kKernels - 1));
      std::swap(order[at], order[at + 1]);
      ++g_provoked;
    }
    for (int j : order) {
      CUdeviceptr d = bufs[j], src = bufs[(j + kKernels - 1) % kKernels];
      uint32_t tag = uint32_t(j);
      void* a[] = {&d, &src, &inc[j], &tag};
      SIM_CHECK(p.launchParams(ks[j], a));
    }
    p.syncCheck(i);
    if (i % 25 == 24 || i == steps - 1) p.checkTrace(i);
  }
}

void unknownLayout(const simtest::DriverApi& cu, int steps) {
  Program p(cu);
  const Kern opaque = makeKern("sim_add_r49_opaque", SIM_KERNEL_OPAQUE, {8, 8, 8, 4});
  const Kern opaqueMix = makeKern("sim_mix_r49_opaque", SIM_KERNEL_OPAQUE, {8, 8, 8});
  const Kern lib = makeKern("sim_add_r49_lib", SIM_KERNEL_LIBRARY, {8, 8, 8, 4});
  const Kern fn = makeKern("sim_mix_r49_fn", SIM_KERNEL_FUNCTION, {8, 8, 8, 2});
  const CUdeviceptr x = p.buffer("x"), y = p.buffer("y"), z = p.buffer("z");
  size_t size = opaque.total;
  uint8_t buf[64];
  auto run = [&](const Kern& k, CUdeviceptr d, CUdeviceptr src, uint64_t kk, uint32_t tag) {
    void* a[] = {&d, &src, &kk, &tag};
    SIM_CHECK(p.launchParams(k, a));
  };
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    run(opaque, x, x, uint64_t(i % 3) + 1, 1);  // the step's first op
    for (int c = 0; c < 6; ++c) run(lib, y, x, uint64_t(c + i), uint32_t(c));
    run(fn, z, y, uint64_t(i), 2);
    for (int c = 0; c < 3; ++c) run(fn, z, z, 3, uint32_t(c));
    // The middle: an opaque kernel by kernelParams, or an `extra` buffer.
    if (irregular(i, 60)) {
      const CUdeviceptr d = x, src = z;
      const uint64_t kk = uint64_t(i);
      const uint32_t tag = 9;
      std::memset(buf, 0x33, sizeof buf);
      std::memcpy(buf, &d, 8);
      std::memcpy(buf + 8, &src, 8);
      std::memcpy(buf + 16, &kk, 8);
      std::memcpy(buf + 24, &tag, 4);
      SIM_CHECK(p.launchExtra(opaque, buf, &size, false, i % 2 == 0));
      ++g_provoked;
    } else {
      run(opaque, x, z, uint64_t(i), 9);
    }
    for (int c = 0; c < 6; ++c) run(lib, y, y, 1, uint32_t(c));
    for (int c = 0; c < 4; ++c) run(fn, z, y, uint64_t(c), uint32_t(c));
    {
      CUdeviceptr d = y, src = z;
      uint64_t kk = uint64_t(i % 4);
      void* a[] = {&d, &src, &kk};
      SIM_CHECK(p.launchParams(opaqueMix, a));  // the step's last op
    }
    p.syncCheck(i);
    if (i % 25 == 24 || i == steps - 1) p.checkTrace(i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review49_params", 120);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review49_params", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  if (mode == "big-compact") bigCompact(cu, steps);
  else if (mode == "big-wide") bigWide(cu, steps);
  else if (mode == "form-switch") formSwitch(cu, steps);
  else if (mode == "value-cycle") valueCycle(cu, steps);
  else if (mode == "variant-cycle") variantCycle(cu, steps);
  else if (mode == "piece-edges") pieceEdges(cu, steps);
  else if (mode == "host-struct-after") hostStructAfter(cu, steps);
  else if (mode == "shared-args") sharedArgs(cu, steps);
  else if (mode == "shared-layout") sharedLayout(cu, steps);
  else if (mode == "unknown-layout") unknownLayout(cu, steps);
  else {
    std::printf("usage: sim_review49_params --mode big-compact|big-wide|form-switch|value-cycle|variant-cycle|"
                "piece-edges|host-struct-after|shared-args|shared-layout|unknown-layout [--steps N] "
                "[--expect-graphs] [--min-graph-pct P]\n");
    return 2;
  }
  return report(steps, args.expectGraphs, args.minGraphPct);
}
