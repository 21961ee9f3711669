// sim_review16_launch: the sixteenth red-team round's review of how a launch
// is described, compared and patched (src/graph/op_codec.cc: describeLaunch,
// compareLaunch's fast lane, paramsEqual's compact and full layouts,
// writeKernelValue; src/graph/kernel_registry.cc's layouts; node updates in
// src/graph/graph_executor.cc runLaunch). Every step issues a chain long
// enough to be graphed and, at one place, the launches under test. Every
// return code and value must be the simulated driver's, eagerly and under
// graft, and every executed launch of a tracked kernel (names with "_r16_")
// must carry exactly the parameter bytes the program gave, in order:
//   sim_review16_launch --mode MODE [--steps N] [--expect-graphs]
//
// wide-params   layouts off the compact path and far from 8-byte words, each
//               kernel launched once a step with kernelParams, values changing
//               on their own irregular steps in one byte only: 12 parameters
//               (8,8,8,4,8,2,8,1,8,8,4,8: more than the 10 of the compact
//               layout; the 12th and the high byte of the 10th change); a
//               24-byte struct aligned to 16 (its storage's padding bytes hold
//               garbage that changes every step; the driver copies them) and a
//               1-byte parameter aligned to 64; a 5000-byte parameter (its
//               last byte changes) and a 32736-byte one (32760 parameter
//               bytes, the most a kernel takes; a byte in the middle changes).
// extra-sizes   a 3-parameter kernel launched through an `extra` buffer whose
//               keys come in either order (size first on odd steps); on
//               irregular steps first with a size 1 or 8 bytes too large or
//               too small, or 0, each refused (CUDA_ERROR_INVALID_VALUE); and
//               every step a kernel of no parameters launched with an `extra`
//               naming a buffer of 8 bytes (the simulator ignores `extra` for
//               such a kernel and runs it).
//
// No mode found a divergence (round 16): both are regression checks.
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 8, 7); }

void checkWord(const simtest::DriverApi& cu, CUstream s, CUdeviceptr p, uint64_t want, const char* what, int step) {
  SIM_CHECK(cu.cuStreamSynchronize(s));
  expectValue(readWord(cu, p), want, what, step);
}

void chain(const simtest::DriverApi& cu, CUfunction add, CUdeviceptr w, CUstream s, int n, uint64_t* hw) {
  for (int k = 0; k < n; ++k) SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
  *hw += uint64_t(n);
}

// The launches the program made of each tracked kernel, as the simulator packs
// them (each parameter at its offset, gaps zero), in order.
std::map<std::string, std::vector<std::vector<uint8_t>>> g_given;

void noteGiven(CUfunction f, const char* name, void** args) {
  std::vector<uint8_t> packed(simKernelParamBytes(f), 0);
  for (unsigned i = 0;; ++i) {
    size_t offset = 0, size = 0;
    if (simKernelParamLayout(f, i, &offset, &size) != 0) break;
    std::memcpy(packed.data() + offset, args[i], size);
  }
  g_given[name].push_back(std::move(packed));
}

// Every executed launch of each tracked kernel carries the bytes given.
void checkExecuted() {
  std::map<std::string, size_t> seen;
  size_t wrong = 0;
  for (size_t n = 0, count = simTraceSize(); n < count; ++n) {
    SimEffect fx{};
    if (simTraceGet(n, &fx) != 0 || fx.kind != SIM_EFFECT_KERNEL || !fx.kernelName ||
        !std::strstr(fx.kernelName, "_r16_"))
      continue;
    const std::string name = fx.kernelName;
    const size_t i = seen[name]++;
    const auto it = g_given.find(name);
    if (it == g_given.end() || i >= it->second.size()) {
      if (wrong++ < 4) std::printf("sim_review16_launch: %s: an extra launch of %s ran\n", g_mode, name.c_str());
      continue;
    }
    const std::vector<uint8_t>& want = it->second[i];
    if (fx.paramBytes != want.size() || std::memcmp(fx.params, want.data(), want.size()) != 0) {
      size_t at = 0;
      while (at < want.size() && at < fx.paramBytes && fx.params[at] == want[at]) ++at;
      if (wrong++ < 4)
        std::printf("sim_review16_launch: %s: launch %zu of %s ran with other parameter bytes (first at %zu)\n",
                    g_mode, i, name.c_str(), at);
    }
  }
  for (const auto& [name, list] : g_given) {
    if (seen[name] != list.size()) {
      std::printf("sim_review16_launch: %s: %zu launches of %s ran, %zu made\n", g_mode, seen[name], name.c_str(),
                  list.size());
      ++g_wrong;
    }
  }
  expectValue(wrong, 0, "executed launches with other parameter bytes than given", 0);
}

// ------------------------------------------------------------------ modes

void wideParams(const simtest::DriverApi& cu, CUfunction add, int steps) {
  const size_t s12[] = {8, 8, 8, 4, 8, 2, 8, 1, 8, 8, 4, 8};
  const CUfunction k12 = simKernelCreate("sim_add_r16_twelve", SIM_KERNEL_LIBRARY, 12, s12, nullptr);
  const size_t sAl[] = {8, 8, 8, 24, 1, 8};
  const size_t aAl[] = {8, 8, 8, 16, 64, 8};
  const CUfunction kAl = simKernelCreate("sim_add_r16_aligned", SIM_KERNEL_FUNCTION, 6, sAl, aAl);
  const size_t sBig[] = {8, 8, 8, 5000};
  const CUfunction kBig = simKernelCreate("sim_add_r16_big", SIM_KERNEL_LIBRARY, 4, sBig, nullptr);
  const size_t sMax[] = {8, 8, 8, 32736};
  const CUfunction kMax = simKernelCreate("sim_add_r16_max", SIM_KERNEL_FUNCTION, 4, sMax, nullptr);
  if (!k12 || !kAl || !kBig || !kMax || simKernelParamBytes(kMax) != 32760) {
    std::printf("sim_review16_launch: %s: the kernels could not be made\n", g_mode);
    ++g_wrong;
    return;
  }
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr c = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hc = 0, hw = 0;
  std::vector<uint8_t> big(5000, 0x5a), max(32736, 0xa5);
  struct alignas(16) Padded {
    uint64_t a;
    uint32_t b;
    uint8_t pad[12];  // garbage the driver copies with the struct
  } padded{};
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    CUdeviceptr dst = c, src = c;
    uint64_t k = 1 + uint64_t(irregular(i, 1));
    {
      uint32_t p3 = 3;
      uint64_t p4 = 4;
      uint16_t p5 = 5;
      uint64_t p6 = 6;
      uint8_t p7 = 7;
      uint64_t p8 = 8;
      uint64_t p9 = irregular(i, 2) ? 0x0100000000000009ull : 9;  // the high byte only
      uint32_t p10 = 10;
      uint64_t p11 = irregular(i, 3) ? 12 : 11;
      void* args[] = {&dst, &src, &k, &p3, &p4, &p5, &p6, &p7, &p8, &p9, &p10, &p11};
      SIM_CHECK(cu.cuLaunchKernel(k12, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      noteGiven(k12, "sim_add_r16_twelve", args);
      hc += k;
    }
    {
      padded.a = irregular(i, 4) ? 2 : 1;
      padded.b = 7;
      std::memset(padded.pad, i & 0xff, sizeof padded.pad);
      uint8_t one = irregular(i, 5) ? 0x80 : 0x01;
      uint64_t tail = 0x1616161616161616ull;
      uint64_t k1 = 1;
      void* args[] = {&dst, &src, &k1, &padded, &one, &tail};
      SIM_CHECK(cu.cuLaunchKernel(kAl, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      noteGiven(kAl, "sim_add_r16_aligned", args);
      hc += 1;
    }
    {
      big.back() = irregular(i, 6) ? 0x01 : 0x5a;
      uint64_t k1 = 1;
      void* args[] = {&dst, &src, &k1, big.data()};
      SIM_CHECK(cu.cuLaunchKernel(kBig, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      noteGiven(kBig, "sim_add_r16_big", args);
      hc += 1;
    }
    {
      max[16000] = irregular(i, 7) ? 0x00 : 0xa5;
      uint64_t k1 = 1;
      void* args[] = {&dst, &src, &k1, max.data()};
      SIM_CHECK(cu.cuLaunchKernel(kMax, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      noteGiven(kMax, "sim_add_r16_max", args);
      hc += 1;
    }
    g_provoked += irregular(i, 1) + irregular(i, 2) + irregular(i, 3) + irregular(i, 4) + irregular(i, 5) +
                  irregular(i, 6) + irregular(i, 7);
    chain(cu, add, w, s, 4, &hw);
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, c, hc, "c", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkExecuted();
}

void extraSizes(const simtest::DriverApi& cu, CUfunction add, int steps) {
  const size_t s3[] = {8, 8, 8};
  const CUfunction k3 = simKernelCreate("sim_add_r16_extra", SIM_KERNEL_LIBRARY, 3, s3, nullptr);
  const CUfunction none = simKernelCreate("nop_r16_none", SIM_KERNEL_FUNCTION, 0, nullptr, nullptr);
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr c = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hc = 0, hw = 0;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    uint64_t buffer[4] = {c, c, uint64_t(1 + irregular(i, 1)), 0};
    if (irregular(i, 2)) {
      const size_t sizes[] = {25, 23, 32, 16, 0};
      size_t bad = sizes[(i / 3) % 5];
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &bad, CU_LAUNCH_PARAM_END};
      expectCode(cu.cuLaunchKernel(k3, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra), CUDA_ERROR_INVALID_VALUE,
                 "cuLaunchKernel with an extra buffer of another size", i);
      ++g_provoked;
    }
    size_t bytes = 24;
    void* extraA[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
    void* extraB[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_END};
    SIM_CHECK(cu.cuLaunchKernel(k3, 1, 1, 1, 1, 1, 1, 0, s, nullptr, i % 2 ? extraB : extraA));
    void* args[] = {&buffer[0], &buffer[1], &buffer[2]};
    noteGiven(k3, "sim_add_r16_extra", args);
    hc += buffer[2];
    buffer[2] = 1000;  // after the call
    {
      uint64_t eight = 0;
      size_t eightBytes = 8;
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &eight, CU_LAUNCH_PARAM_BUFFER_SIZE, &eightBytes,
                       CU_LAUNCH_PARAM_END};
      SIM_CHECK(cu.cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));
      noteGiven(none, "nop_r16_none", nullptr);
    }
    chain(cu, add, w, s, 4, &hw);
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, c, hc, "c", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkExecuted();
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review16_launch", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review16_launch", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review16");
  if (mode == "wide-params") wideParams(cu, add, steps);
  else if (mode == "extra-sizes") extraSizes(cu, add, steps);
  else {
    std::printf("usage: sim_review16_launch --mode wide-params|extra-sizes [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
