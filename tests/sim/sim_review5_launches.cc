// sim_review5_launches: the fifth red-team round's review of how graft
// describes, compares and patches a kernel launch (src/graph/op_codec.cc,
// src/graph/kernel_registry.cc, the launch encoders in src/hook/interpose.cc,
// node updates in src/graph/graph_executor.cc). Every step issues a chain of
// launches long enough to be graphed and, at one place, the launch under test;
// on irregular steps that place gets an odd launch. Every return code and
// value must be the simulated driver's, eagerly and under graft:
//   sim_review5_launches --mode MODE [--steps N] [--expect-graphs]
//
// null-param-entry  on irregular steps the launch at the place is first made
//                with kernelParams[1] == NULL (the other entries valid): the
//                simulator refuses it (CUDA_ERROR_INVALID_VALUE), then the
//                program makes the right launch. (Whether the real driver
//                refuses it or reads through the NULL pointer is not known.)
//                graft reads through the NULL entry and crashes (SIGSEGV in
//                OpEncoder::writeKernelValue, from kernel() while recording or
//                compareLaunch on the fast lane), replaying or not.
// null-params    a kernel of three parameters launched at the place with
//                kernelParams NULL and extra NULL, with an extra holding only
//                CU_LAUNCH_PARAM_END, with an extra without a buffer pointer,
//                and with a NULL buffer pointer: refused
//                (CUDA_ERROR_INVALID_VALUE); and every step a kernel of no
//                parameters, launched with kernelParams NULL, with a
//                non-NULL array, and through cuLaunchKernelEx with an empty
//                parameter buffer: each must run (counted in the trace).
// bad-dims       at the place, launches the driver refuses for their
//                configuration: a grid dimension of 0, a grid y of 65536, a
//                block of 1025 threads, a block z of 65, a block of 2048
//                threads (through cuLaunchKernel and cuLaunchKernelEx).
// attr-entries   the place's launch is a cuLaunchKernelEx with an IGNORE
//                entry whose value bytes change every step, a cluster
//                dimension of 1x1x1 and programmatic stream serialization;
//                on irregular steps it carries 17 attributes (16 IGNORE),
//                and on others attrs != NULL with numAttrs 0: all run.
// shared-storage one kernelParams array and its storage reused for two
//                launches in a row with the storage changed between them
//                (and right after the second), entries that alias one
//                another (dst and src the same storage), and one `extra`
//                buffer reused likewise: each launch must run with the
//                values at its call.
// same-name-relayout  code reloaded every 20 steps, alternating a module
//                image "sim_add_r(8,8,8,8)" (a CUfunction) and a library
//                image "sim_add_r(8,8,8,4,4)" (a CUkernel): the same name,
//                the same handle value (the simulator reuses freed slots) and
//                the same 32 parameter bytes, but another layout. Executed
//                launches must carry exactly the bytes the program gave in
//                the layout in effect (the trace is checked).
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// Executed launches of kernel `name` in the trace.
size_t executedOf(const char* name) {
  size_t n = 0;
  for (size_t i = 0, count = simTraceSize(); i < count; ++i) {
    SimEffect fx{};
    if (simTraceGet(i, &fx) == 0 && fx.kind == SIM_EFFECT_KERNEL && fx.kernelName &&
        std::strcmp(fx.kernelName, name) == 0)
      ++n;
  }
  return n;
}

CUlaunchConfig config1(CUstream s) {
  CUlaunchConfig c{};
  c.gridDimX = c.gridDimY = c.gridDimZ = 1;
  c.blockDimX = c.blockDimY = c.blockDimZ = 1;
  c.hStream = s;
  return c;
}

// ------------------------------------------------------------------ modes

void nullParamEntry(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0;
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    CUdeviceptr to = y, from = x;
    uint64_t k = uint64_t(i);
    if (irregular(i, 1)) {
      void* bad[] = {&to, nullptr, &k};
      expectCode(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, bad, nullptr), CUDA_ERROR_INVALID_VALUE,
                 "cuLaunchKernel with kernelParams[1] NULL", i);
      ++g_provoked;
    }
    void* args[] = {&to, &from, &k};
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));  // y = x + i
    hy = hx + uint64_t(i);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));  // x = y + 1
    hx = hy + 1;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

void nullParams(const simtest::DriverApi& cu, CUfunction add, int steps) {
  const CUfunction none = simKernelCreate("sim_none_review5", SIM_KERNEL_LIBRARY, 0, nullptr, nullptr);
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0;
  size_t noneLaunches = 0;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    // The kernel of no parameters, three ways.
    SIM_CHECK(cu.cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr));
    void* dummy[] = {nullptr};
    SIM_CHECK(cu.cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 0, s, dummy, nullptr));
    {
      uint64_t scratch = 0;
      size_t zero = 0;
      void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &scratch, CU_LAUNCH_PARAM_BUFFER_SIZE, &zero,
                       CU_LAUNCH_PARAM_END};
      CUlaunchConfig c = config1(s);
      SIM_CHECK(cu.cuLaunchKernelEx(&c, none, nullptr, extra));
    }
    noneLaunches += 3;
    CUdeviceptr to = y, from = x;
    uint64_t k = uint64_t(i);
    const size_t bytes = 24;
    if (irregular(i, 2)) {
      switch (i % 4) {
        case 0:
          expectCode(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE,
                     "cuLaunchKernel with kernelParams and extra NULL", i);
          break;
        case 1: {
          void* extra[] = {CU_LAUNCH_PARAM_END};
          expectCode(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra), CUDA_ERROR_INVALID_VALUE,
                     "cuLaunchKernel with an empty extra", i);
          break;
        }
        case 2: {
          void* extra[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, const_cast<size_t*>(&bytes), CU_LAUNCH_PARAM_END};
          expectCode(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra), CUDA_ERROR_INVALID_VALUE,
                     "cuLaunchKernel with an extra without a buffer", i);
          break;
        }
        default: {
          void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, nullptr, CU_LAUNCH_PARAM_BUFFER_SIZE,
                           const_cast<size_t*>(&bytes), CU_LAUNCH_PARAM_END};
          CUlaunchConfig c = config1(s);
          expectCode(cu.cuLaunchKernelEx(&c, add, nullptr, extra), CUDA_ERROR_INVALID_VALUE,
                     "cuLaunchKernelEx with a NULL parameter buffer", i);
          break;
        }
      }
      ++g_provoked;
    }
    void* args[] = {&to, &from, &k};
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));  // y = x + i
    hy = hx + uint64_t(i);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));  // x = y + 1
    hx = hy + 1;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(executedOf("sim_none_review5"), noneLaunches, "executed launches of the kernel of no parameters",
              steps);
}

void badDims(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0;
  struct Dims {
    unsigned g[3], b[3];
    const char* what;
  };
  const Dims bad[] = {
      {{0, 1, 1}, {1, 1, 1}, "a launch with grid x 0"},
      {{1, 65536, 1}, {1, 1, 1}, "a launch with grid y 65536"},
      {{1, 1, 1}, {1025, 1, 1}, "a launch of 1025 threads a block"},
      {{1, 1, 1}, {1, 1, 65}, "a launch with block z 65"},
      {{1, 1, 1}, {32, 32, 2}, "a launch of 2048 threads a block"},
  };
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    CUdeviceptr to = y, from = x;
    uint64_t k = uint64_t(i);
    void* args[] = {&to, &from, &k};
    if (irregular(i, 3)) {
      const Dims& d = bad[(i / 7) % 5];
      CUresult r;
      if (i % 2) {
        r = cu.cuLaunchKernel(add, d.g[0], d.g[1], d.g[2], d.b[0], d.b[1], d.b[2], 0, s, args, nullptr);
      } else {
        CUlaunchConfig c = config1(s);
        c.gridDimX = d.g[0];
        c.gridDimY = d.g[1];
        c.gridDimZ = d.g[2];
        c.blockDimX = d.b[0];
        c.blockDimY = d.b[1];
        c.blockDimZ = d.b[2];
        r = cu.cuLaunchKernelEx(&c, add, args, nullptr);
      }
      expectCode(r, CUDA_ERROR_INVALID_VALUE, d.what, i);
      ++g_provoked;
    }
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));  // y = x + i
    hy = hx + uint64_t(i);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));  // x = y + 1
    hx = hy + 1;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

void attrEntries(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0;
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    CUdeviceptr to = y, from = x;
    uint64_t k = uint64_t(i);
    void* args[] = {&to, &from, &k};
    CUlaunchAttribute attrs[17];
    std::memset(attrs, 0, sizeof attrs);
    unsigned n = 0;
    const bool many = irregular(i, 4), zero = irregular(i, 5);
    const unsigned ignores = many ? 16 : 1;
    for (unsigned j = 0; j < ignores; ++j) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_IGNORE;
      std::memset(&attrs[n].value, int(i * 13 + j) & 0xff, sizeof attrs[n].value);  // ignored bytes
      ++n;
    }
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = attrs[n].value.clusterDim.y = attrs[n].value.clusterDim.z = 1;
    ++n;
    if (!many) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n].value.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    CUlaunchConfig c = config1(s);
    c.attrs = attrs;
    c.numAttrs = zero ? 0 : n;
    SIM_CHECK(cu.cuLaunchKernelEx(&c, add, args, nullptr));  // y = x + i
    g_provoked += many + zero;
    hy = hx + uint64_t(i);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));  // x = y + 1
    hx = hy + 1;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

void sharedStorage(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu),
                    v = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0, hv = 0;
  // One array and one storage for every launch at the place.
  struct {
    CUdeviceptr to, from;
    uint64_t k;
  } st{};
  void* args[] = {&st.to, &st.from, &st.k};
  uint64_t buffer[3] = {};
  size_t bytes = sizeof buffer;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 12, &hw);
    st = {y, x, uint64_t(i)};
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));  // y = x + i
    hy = hx + uint64_t(i);
    st = {x, y, irregular(i, 6) ? 5u : 1u};
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));  // x = y + 1 (or 5)
    hx = hy + (irregular(i, 6) ? 5 : 1);
    st = {w, w, 1000};  // changed right after the call: must not reach that launch
    // dst and src the same storage: v = v + v's address low bits? No: both are
    // the address of v, k a separate value.
    CUdeviceptr same = v;
    uint64_t kv = uint64_t(i % 3);
    void* alias[] = {&same, &same, &kv};
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, alias, nullptr));  // v += i % 3
    hv += uint64_t(i % 3);
    same = w;  // after the call
    kv = 77;
    // The extra buffer, reused.
    buffer[0] = v;
    buffer[1] = v;
    buffer[2] = 2;
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));  // v += 2
    hv += 2;
    buffer[2] = irregular(i, 7) ? 9 : 3;
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));  // v += 3 (or 9)
    hv += irregular(i, 7) ? 9 : 3;
    buffer[0] = buffer[1] = w;  // after the call
    buffer[2] = 1000;
    g_provoked += irregular(i, 6) + irregular(i, 7);
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
      checkWord(cu, s, v, hv, "v", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

// Module image A (sim_add_r(8,8,8,8)) and library image B
// (sim_add_r(8,8,8,4,4)) in turn, every 20 steps.
void sameNameRelayout(const simtest::Driver& drv, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  simtest::CodeApi code;
  if (!simtest::loadCodeApi(drv, &code)) {
    ++g_wrong;
    return;
  }
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hw = 0;
  CUmodule mod = nullptr;
  CUlibrary lib = nullptr;
  CUfunction r = nullptr;
  std::vector<uint64_t> handles;
  auto tailOf = [](int step, bool library) -> uint64_t {
    if (!library) return uint64_t(step) * 0x100000001ull + 7;  // one 8-byte tag
    const uint32_t a = uint32_t(step) * 3u + 1u, b = uint32_t(step) * 5u + 2u;  // two 4-byte tags
    return uint64_t(a) | uint64_t(b) << 32;
  };
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    const bool library = (i / 20) % 2 == 1;
    if (i % 20 == 0) {
      if (mod) SIM_CHECK(code.moduleUnload(mod));
      if (lib) SIM_CHECK(code.libraryUnload(lib));
      mod = nullptr;
      lib = nullptr;
      if (library) {
        SIM_CHECK(code.libraryLoadData(&lib, "sim-image: sim_add_r(8,8,8,4,4)", nullptr, nullptr, 0, nullptr,
                                       nullptr, 0));
        CUkernel k = nullptr;
        SIM_CHECK(code.libraryGetKernel(&k, lib, "sim_add_r"));
        r = reinterpret_cast<CUfunction>(k);
      } else {
        SIM_CHECK(code.moduleLoadData(&mod, "sim-image: sim_add_r(8,8,8,8)"));
        SIM_CHECK(code.moduleGetFunction(&r, mod, "sim_add_r"));
      }
      handles.push_back(reinterpret_cast<uint64_t>(r));
      ++g_provoked;
    }
    chain(cu, add, w, s, 12, &hw);
    CUdeviceptr to = y, from = x;
    uint64_t k = uint64_t(i);
    const uint64_t tail = tailOf(i, library);
    uint64_t tag64 = tail;
    uint32_t tagA = uint32_t(tail), tagB = uint32_t(tail >> 32);
    void* argsA[] = {&to, &from, &k, &tag64};
    void* argsB[] = {&to, &from, &k, &tagA, &tagB};
    SIM_CHECK(cu.cuLaunchKernel(r, 1, 1, 1, 1, 1, 1, 0, s, library ? argsB : argsA, nullptr));  // y = x + i
    hy = hx + uint64_t(i);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));  // x = y + 1
    hx = hy + 1;
    if (i % 10 == 9 || i == steps - 1) {
      checkWord(cu, s, x, hx, "x", i);
      checkWord(cu, s, w, hw, "w", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  if (mod) SIM_CHECK(code.moduleUnload(mod));
  if (lib) SIM_CHECK(code.libraryUnload(lib));
  bool reused = true;
  for (uint64_t h : handles) reused &= h == handles[0];
  if (!reused) std::printf("sim_review5_launches: %s: note: the handle was not reused every load\n", g_mode);
  size_t seen = 0, wrong = 0;
  for (size_t n = 0, count = simTraceSize(); n < count; ++n) {
    SimEffect fx{};
    if (simTraceGet(n, &fx) != 0 || fx.kind != SIM_EFFECT_KERNEL || !fx.kernelName ||
        std::strcmp(fx.kernelName, "sim_add_r") != 0)
      continue;
    ++seen;
    uint64_t kk = 0, got = 0;
    if (fx.paramBytes != 32) {
      if (wrong++ < 4) std::printf("sim_review5_launches: %s: a launch ran with %zu parameter bytes\n", g_mode,
                                   fx.paramBytes);
      continue;
    }
    std::memcpy(&kk, fx.params + 16, 8);
    std::memcpy(&got, fx.params + 24, 8);
    const uint64_t want = tailOf(int(kk), (kk / 20) % 2 == 1);
    if (got != want && wrong++ < 4)
      std::printf("sim_review5_launches: %s: the launch of step %llu ran with tail %#llx, given %#llx\n", g_mode,
                  (unsigned long long)kk, (unsigned long long)got, (unsigned long long)want);
  }
  expectValue(seen, uint64_t(steps), "executed launches of sim_add_r", steps);
  expectValue(wrong, 0, "executed launches of sim_add_r with other parameter bytes than given", steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review5_launches", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review5_launches", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review5");
  if (mode == "null-param-entry") nullParamEntry(cu, add, steps);
  else if (mode == "null-params") nullParams(cu, add, steps);
  else if (mode == "bad-dims") badDims(cu, add, steps);
  else if (mode == "attr-entries") attrEntries(cu, add, steps);
  else if (mode == "shared-storage") sharedStorage(cu, add, steps);
  else if (mode == "same-name-relayout") sameNameRelayout(drv, add, steps);
  else {
    std::printf("usage: sim_review5_launches --mode null-param-entry|null-params|bad-dims|attr-entries|"
                "shared-storage|same-name-relayout [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
