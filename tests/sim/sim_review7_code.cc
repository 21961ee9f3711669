// sim_review7_code: the seventh red-team round's review of how graft knows
// kernels and the code they live in (src/graph/kernel_registry.cc, the
// Setting and SYNC_UNLOADS handling in src/hook/interpose.cc and
// Runtime::codeUnloading, graft's copy kernels in src/graph/copy_kernels.cc,
// the launch encoders). Every step issues work long enough to be graphed and,
// at some places, the pattern under test. Every return code and value must be
// the simulated driver's, eagerly and under graft, and every executed launch
// of a tracked kernel (names "sim_add_r7*", parameter 3 a tag naming its
// place) must carry exactly the bytes, grid, dynamic shared memory and
// context the program gave, in the order the program launched them at that
// place (executed trace):
//   sim_review7_code --mode MODE [--steps N] [--expect-graphs]
//
// kernel-two-contexts  one library kernel (CUkernel K) launched every step in
//                device 0's context A and device 1's context B, through K and
//                through the function cuKernelGetFunction gives in each
//                context (asked every step), some launches with 40000 bytes
//                of dynamic shared memory. On irregular steps, from B while
//                A's launches are held, the allowance is lowered to 30000 for
//                both devices (cuKernelSetAttribute), launches asking 40000
//                must be refused in both contexts and ones asking 30000 run,
//                then it is raised again from A; on others B's function gets
//                45000 through cuFuncSetAttribute and back. (The simulator
//                gives a library kernel's function the kernel's own handle,
//                so the two handles of one kernel, and per-context values,
//                are not told apart here.)
// global-writes  a "global" word (device memory no launch names as its
//                destination) read by replayed kernels on a blocking stream,
//                written between held launches with cuMemcpyHtoDAsync from
//                pageable and from pinned memory, with a synchronous
//                cuMemcpyHtoD (legacy stream: after the blocking stream's
//                earlier launches, before its later ones) and with
//                cuMemsetD32Async; each read must see the latest write.
//                (The simulator has no cuModuleGetGlobal: the word is a
//                cuMemAlloc block, which is all a __device__ variable is to
//                graft.)
// load-mid-step  a step launches the kernel of the module loaded last 6
//                times; on irregular steps a new module is loaded between
//                held launches and its kernel launched at once (and the
//                previous one's after it), then at the usual place from then
//                on. Every 20 steps the older modules are unloaded, so later
//                loads get their kernel handles again; the images cycle
//                through two names and layouts of the same 40 parameter bytes
//                ((8,8,8,8,8), (8,8,8,8,4,4), (8,8,8,8,1,4)), some with
//                another kernel first. Executed bytes checked.
// unload-other-library  library L1's kernel launched 6 times a step with the
//                same values (graphed, no patch) around L2's kernel; on
//                irregular steps L2 is unloaded and loaded again (another
//                layout of the same size under the reused handle) between
//                L1's held launches. L1's launches must keep running from
//                graphs after L2's unloads (counted in the trace), and every
//                executed launch must carry its bytes.
// queries-between  a module function fetched with cuModuleGetFunction every
//                step (same handle back) and a library kernel;
//                cuFuncGetAttribute, cuKernelGetAttribute, cuFuncGetParamInfo
//                and cuKernelGetParamInfo asked between held launches; the
//                function's dynamic shared memory allowance set to a new
//                value on irregular steps between held launches asking 48000
//                (lowered below, raised above, set equal); launches asking
//                exactly the allowance run, one byte more is refused.
// cluster-width  a library kernel whose REQUIRED_CLUSTER_WIDTH (which the
//                simulator adds to a sim_add kernel's result) changes on
//                irregular steps: at a step's start, right after the previous
//                step's graph launch was queued (cuKernelSetAttribute for
//                device 0), and mid-step between held launches
//                (cuFuncSetAttribute on cuKernelGetFunction's handle); set to
//                its current value on others. Each launch must add 1 + the
//                width in effect at its call.
// copy-kernels-new-context  device copies and memsets in device 1's primary
//                context B (graphed with graft's copy kernels); every 40
//                steps B's last reference is released (the context ends: the
//                simulator unloads graft's copy-kernel module with it) and B
//                is retained again, and the program loads a module of its own
//                there first (it gets the freed kernel handles). Copies,
//                memsets and the program's kernel must keep their values.
//
// No mode found a divergence (round 7): all are regression checks. Not
// modelled, as the simulator lacks them: a library kernel's own function
// handle per context (cuKernelGetFunction returns the kernel's handle),
// per-device kernel attributes, cuModuleGetGlobal / cuLibraryGetGlobal,
// cuCtxSetCacheConfig / cuCtxSetSharedMemConfig, and launches refused for a
// grid that is not a multiple of the required cluster width.
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 8, 7); }

// ------------------------------------------------------------------ tracked launches

struct Expected {
  std::string name;
  std::vector<uint8_t> bytes;  // packed as the kernel's layout, padding zeroed
  unsigned grid = 1;
  unsigned sharedMem = 0;
  CUcontext ctx = nullptr;
  int step = 0;
};
std::map<uint64_t, std::deque<Expected>> g_expected;  // by place (the tag, parameter 3)
uint64_t g_executedGraph = 0;                         // tracked launches run from graphs
std::map<std::string, uint64_t> g_graphByName;        // ... by name
uint64_t g_copiesFromGraphs = 0;                      // copies and memsets run from graphs

enum class Form { Params, Extra, Ex };

// Launches `f` (named `name`, its layout read from the simulator now) with
// one value per parameter (the low bytes of `vals[i]`; the storage's other
// bytes hold garbage) and vals[3] = place. Expects `want`; on success the
// launch is expected in the trace.
CUresult launchTracked(const simtest::DriverApi& cu, CUfunction f, const char* name, std::vector<uint64_t> vals,
                       uint64_t place, unsigned shm, CUstream s, Form form, CUresult want, const char* what, int step,
                       unsigned grid = 1) {
  vals[3] = place;
  const size_t n = vals.size();
  std::vector<size_t> off(n), size(n);
  for (size_t i = 0; i < n; ++i) {
    if (simKernelParamLayout(f, unsigned(i), &off[i], &size[i]) != 0) {
      std::printf("sim_review7_code: %s: step %d: %s: no layout for parameter %zu\n", g_mode, step, what, i);
      ++g_wrong;
      return CUDA_ERROR_UNKNOWN;
    }
  }
  const size_t total = simKernelParamBytes(f);
  Expected e;
  e.name = name;
  e.bytes.assign(total, 0);
  e.grid = grid;
  e.sharedMem = shm;
  cu.cuCtxGetCurrent(&e.ctx);
  e.step = step;
  for (size_t i = 0; i < n; ++i) std::memcpy(e.bytes.data() + off[i], &vals[i], size[i]);
  // Storage with garbage above each value's size, and a buffer with garbage padding.
  std::vector<uint64_t> slots(n);
  std::vector<void*> ptrs(n);
  const uint64_t junk = simMix64(uint64_t(step) * 977 + place) | 0x0101010101010101ull;
  for (size_t i = 0; i < n; ++i) {
    slots[i] = size[i] >= 8 ? vals[i] : (vals[i] & ((1ull << (8 * size[i])) - 1)) | (junk << (8 * size[i]));
    ptrs[i] = &slots[i];
  }
  std::vector<uint8_t> buffer(total + 8);
  for (size_t b = 0; b < buffer.size(); ++b) buffer[b] = uint8_t(junk >> (8 * (b % 8))) ^ uint8_t(b);
  for (size_t i = 0; i < n; ++i) std::memcpy(buffer.data() + off[i], &vals[i], size[i]);
  size_t bytes = total;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
                   CU_LAUNCH_PARAM_END};
  CUresult r;
  if (form == Form::Params) {
    r = cu.cuLaunchKernel(f, grid, 1, 1, 1, 1, 1, shm, s, ptrs.data(), nullptr);
  } else if (form == Form::Extra) {
    r = cu.cuLaunchKernel(f, grid, 1, 1, 1, 1, 1, shm, s, nullptr, extra);
  } else {
    CUlaunchConfig c{};
    c.gridDimX = grid;
    c.gridDimY = c.gridDimZ = 1;
    c.blockDimX = c.blockDimY = c.blockDimZ = 1;
    c.sharedMemBytes = shm;
    c.hStream = s;
    r = cu.cuLaunchKernelEx(&c, f, ptrs.data(), nullptr);
  }
  // Garbage written over everything right after the call.
  for (auto& v : slots) v = ~v;
  for (auto& b : buffer) b = uint8_t(~b);
  expectCode(r, want, what, step);
  if (r == CUDA_SUCCESS) g_expected[place].push_back(std::move(e));
  return r;
}

// Compares every executed tracked launch (after a full synchronization) with
// the launches made at its place, in order, then clears the trace.
void checkTrace(int step) {
  int bad = 0;
  for (size_t n = 0, count = simTraceSize(); n < count; ++n) {
    SimEffect fx{};
    if (simTraceGet(n, &fx) != 0) continue;
    if ((fx.kind == SIM_EFFECT_MEMCPY || fx.kind == SIM_EFFECT_MEMSET) && fx.origin == SIM_ORIGIN_GRAPH)
      ++g_copiesFromGraphs;
    if (fx.kind != SIM_EFFECT_KERNEL || !fx.kernelName || std::strncmp(fx.kernelName, "sim_add_r7", 10) != 0) continue;
    if (fx.origin == SIM_ORIGIN_GRAPH) {
      ++g_executedGraph;
      ++g_graphByName[fx.kernelName];
    }
    uint64_t place = 0;
    if (fx.paramBytes >= 32) std::memcpy(&place, fx.params + 24, 8);
    auto it = g_expected.find(place);
    if (it == g_expected.end() || it->second.empty()) {
      if (bad++ < 4)
        std::printf("sim_review7_code: %s: step %d: %s ran at place %llu, where no launch is outstanding\n", g_mode,
                    step, fx.kernelName, (unsigned long long)place);
      continue;
    }
    Expected e = std::move(it->second.front());
    it->second.pop_front();
    std::string diff;
    if (e.name != fx.kernelName) diff += " kernel " + std::string(fx.kernelName) + " (given " + e.name + ")";
    if (fx.paramBytes != e.bytes.size() || std::memcmp(fx.params, e.bytes.data(), e.bytes.size()) != 0) {
      diff += " bytes";
      for (size_t b = 0; b < fx.paramBytes; ++b) diff += (b % 8 ? "" : " ") + std::to_string(fx.params[b]) + ".";
      diff += " (given";
      for (size_t b = 0; b < e.bytes.size(); ++b) diff += (b % 8 ? "" : " ") + std::to_string(e.bytes[b]) + ".";
      diff += ")";
    }
    if (fx.grid[0] != e.grid) diff += " grid " + std::to_string(fx.grid[0]);
    if (fx.sharedMemBytes != e.sharedMem) diff += " shared memory " + std::to_string(fx.sharedMemBytes);
    if (fx.context != e.ctx) diff += " another context";
    if (!diff.empty() && bad++ < 4)
      std::printf("sim_review7_code: %s: step %d: the launch of step %d at place %llu ran with%s\n", g_mode, step,
                  e.step, (unsigned long long)place, diff.c_str());
  }
  for (auto& [place, q] : g_expected) {
    if (!q.empty() && bad++ < 4)
      std::printf("sim_review7_code: %s: step %d: %zu launches at place %llu never ran (first of step %d)\n", g_mode,
                  step, q.size(), (unsigned long long)place, q.front().step);
    q.clear();
  }
  g_wrong += bad;
  simTraceClear();
}

void chain(const simtest::DriverApi& cu, CUfunction add, CUdeviceptr w, CUstream s, int n, uint64_t* hw) {
  for (int k = 0; k < n; ++k) SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
  *hw += uint64_t(n);
}

struct Extra {
  decltype(&::cuKernelGetFunction) kernelGetFunction = nullptr;
  decltype(&::cuKernelGetAttribute) kernelGetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) funcGetAttribute = nullptr;
  decltype(&::cuCtxPushCurrent_v2) push = nullptr;
  decltype(&::cuCtxPopCurrent_v2) pop = nullptr;
  simtest::CodeApi code;
};
bool loadExtra(const simtest::Driver& drv, Extra* x) {
  return simtest::lookupProc(drv, "cuKernelGetFunction", &x->kernelGetFunction) &&
         simtest::lookupProc(drv, "cuKernelGetAttribute", &x->kernelGetAttribute) &&
         simtest::lookupProc(drv, "cuFuncGetAttribute", &x->funcGetAttribute) &&
         simtest::lookupProc(drv, "cuCtxPushCurrent", &x->push) && simtest::lookupProc(drv, "cuCtxPopCurrent", &x->pop) &&
         simtest::loadCodeApi(drv, &x->code);
}

CUcontext device1Primary(const simtest::DriverApi& cu) {
  CUdevice dev1 = 0;
  CUcontext c = nullptr;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&c, dev1) != CUDA_SUCCESS) {
    std::printf("sim_review7_code: no device 1\n");
    std::exit(2);
  }
  return c;
}

void syncAll(const simtest::DriverApi& cu, const std::vector<CUcontext>& ctxs, CUcontext back) {
  for (CUcontext c : ctxs) {
    SIM_CHECK(cu.cuCtxSetCurrent(c));
    SIM_CHECK(cu.cuCtxSynchronize());
  }
  SIM_CHECK(cu.cuCtxSetCurrent(back));
}

constexpr CUfunction_attribute kAllow = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;

// ------------------------------------------------------------------ modes

void kernelTwoContexts(const simtest::Driver& drv, CUcontext a, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  Extra x;
  if (!loadExtra(drv, &x)) return void(++g_wrong);
  const CUcontext b = device1Primary(cu);
  CUlibrary lib = nullptr;
  SIM_CHECK(x.code.libraryLoadData(&lib, "sim-image: sim_add_r7k(8,8,8,8)", nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kk = nullptr;
  SIM_CHECK(x.code.libraryGetKernel(&kk, lib, "sim_add_r7k"));
  const CUfunction K = reinterpret_cast<CUfunction>(kk);
  CUstream sa, sb;
  SIM_CHECK(cu.cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(x.push(b));
  SIM_CHECK(cu.cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
  CUcontext popped = nullptr;
  SIM_CHECK(x.pop(&popped));
  const CUdeviceptr xa = simtest::zeroedBuffer(cu), xb = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hxa = 0, hxb = 0, hw = 0;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    CUfunction fa = nullptr;
    SIM_CHECK(x.kernelGetFunction(&fa, kk));
    chain(cu, add, w, sa, 4, &hw);
    for (int j = 0; j < 3; ++j)
      launchTracked(cu, K, "sim_add_r7k", {xa, xa, 1, 0}, 1, 0, sa, Form::Params, CUDA_SUCCESS, "A: K", i);
    launchTracked(cu, fa, "sim_add_r7k", {xa, xa, 2, 0}, 2, 40000, sa, Form::Params, CUDA_SUCCESS, "A: FA, 40000", i);
    hxa += 5;
    SIM_CHECK(x.push(b));
    CUfunction fb = nullptr;
    SIM_CHECK(x.kernelGetFunction(&fb, kk));
    for (int j = 0; j < 3; ++j)
      launchTracked(cu, fb, "sim_add_r7k", {xb, xb, 1, 0}, 3, 0, sb, Form::Params, CUDA_SUCCESS, "B: FB", i);
    launchTracked(cu, K, "sim_add_r7k", {xb, xb, 3, 0}, 4, 40000, sb, Form::Ex, CUDA_SUCCESS, "B: K, 40000", i);
    hxb += 6;
    if (irregular(i, 1)) {
      ++g_provoked;
      // Lowered for both devices from B while A's launches asking 40000 are held.
      expectCode(cu.cuKernelSetAttribute(kAllow, 30000, kk, 1), CUDA_SUCCESS, "lowering for device 1", i);
      expectCode(cu.cuKernelSetAttribute(kAllow, 30000, kk, 0), CUDA_SUCCESS, "lowering for device 0", i);
      launchTracked(cu, K, "sim_add_r7k", {xb, xb, 7, 0}, 5, 40000, sb, Form::Params, CUDA_ERROR_INVALID_VALUE,
                    "B: K asking 40000 after the lowering", i);
      launchTracked(cu, fb, "sim_add_r7k", {xb, xb, 5, 0}, 5, 30000, sb, Form::Params, CUDA_SUCCESS,
                    "B: FB asking 30000", i);
      hxb += 5;
      SIM_CHECK(x.pop(&popped));
      launchTracked(cu, fa, "sim_add_r7k", {xa, xa, 7, 0}, 6, 40000, sa, Form::Params, CUDA_ERROR_INVALID_VALUE,
                    "A: FA asking 40000 after the lowering", i);
      launchTracked(cu, K, "sim_add_r7k", {xa, xa, 4, 0}, 6, 30000, sa, Form::Ex, CUDA_SUCCESS, "A: K asking 30000",
                    i);
      hxa += 4;
      expectCode(cu.cuKernelSetAttribute(kAllow, 49152, kk, 1), CUDA_SUCCESS, "raising for device 1", i);
      expectCode(cu.cuKernelSetAttribute(kAllow, 49152, kk, 0), CUDA_SUCCESS, "raising for device 0", i);
      launchTracked(cu, fa, "sim_add_r7k", {xa, xa, 2, 0}, 2, 40000, sa, Form::Params, CUDA_SUCCESS,
                    "A: FA, 40000 after the raise", i);
      hxa += 2;
    } else if (irregular(i, 2)) {
      ++g_provoked;
      expectCode(cu.cuFuncSetAttribute(fb, kAllow, 45000), CUDA_SUCCESS, "B: FB's allowance 45000", i);
      launchTracked(cu, fb, "sim_add_r7k", {xb, xb, 3, 0}, 4, 45000, sb, Form::Ex, CUDA_SUCCESS, "B: FB, 45000", i);
      launchTracked(cu, fb, "sim_add_r7k", {xb, xb, 3, 0}, 4, 45001, sb, Form::Ex, CUDA_ERROR_INVALID_VALUE,
                    "B: FB, 45001", i);
      hxb += 3;
      expectCode(cu.cuFuncSetAttribute(fb, kAllow, 49152), CUDA_SUCCESS, "B: FB's allowance back", i);
      SIM_CHECK(x.pop(&popped));
      launchTracked(cu, fa, "sim_add_r7k", {xa, xa, 2, 0}, 2, 40000, sa, Form::Params, CUDA_SUCCESS,
                    "A: FA, 40000 after B's change", i);
      hxa += 2;
    } else {
      SIM_CHECK(x.pop(&popped));
    }
    chain(cu, add, w, sa, 4, &hw);
    if (i % 10 == 9 || i == steps - 1) {
      syncAll(cu, {b, a}, a);
      expectValue(peek(xa), hxa, "xa", i);
      expectValue(peek(xb), hxb, "xb", i);
      expectValue(peek(w), hw, "w", i);
      checkTrace(i);
    }
  }
  syncAll(cu, {b, a}, a);
  checkTrace(steps);
}

void globalWrites(const simtest::Driver& drv, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, 0));  // blocking: the legacy stream's synchronous copy orders with it
  const CUdeviceptr g = simtest::zeroedBuffer(cu), out = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t* pinned = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(reinterpret_cast<void**>(&pinned), 64));
  uint64_t hg = 0, hw = 0;
  for (int i = 0; i < steps; ++i) {
    if (i % 5 == 0) {
      const uint64_t v = uint64_t(i) * 1000 + 1;
      SIM_CHECK(cu.cuMemcpyHtoD(g, &v, 8));  // between replays
      hg = v;
    }
    chain(cu, add, w, s, 4, &hw);
    SIM_CHECK(simtest::launchAdd(cu, add, out, g, uint64_t(i), s));  // out[0] = g + i
    const uint64_t want0 = hg + uint64_t(i);
    if (irregular(i, 1)) {  // pageable
      ++g_provoked;
      uint64_t v = uint64_t(i) * 7 + 3;
      SIM_CHECK(cu.cuMemcpyHtoDAsync(g, &v, 8, s));
      v = 0xdead;  // a pageable copy is staged at the call
      hg = uint64_t(i) * 7 + 3;
    } else if (irregular(i, 2)) {  // pinned
      ++g_provoked;
      pinned[0] = uint64_t(i) * 11 + 5;
      SIM_CHECK(cu.cuMemcpyHtoDAsync(g, pinned, 8, s));
      hg = uint64_t(i) * 11 + 5;
    } else if (irregular(i, 3)) {  // synchronous, legacy stream
      ++g_provoked;
      const uint64_t v = uint64_t(i) * 13 + 9;
      SIM_CHECK(cu.cuMemcpyHtoD(g, &v, 8));
      hg = v;
    } else if (irregular(i, 4)) {  // a memset of its two halves
      ++g_provoked;
      const uint32_t v = uint32_t(i) * 17 + 1;
      SIM_CHECK(cu.cuMemsetD32Async(g, v, 2, s));
      hg = uint64_t(v) | uint64_t(v) << 32;
    }
    SIM_CHECK(simtest::launchAdd(cu, add, out + 8, g, 1, s));  // out[1] = g + 1
    const uint64_t want1 = hg + 1;
    chain(cu, add, w, s, 4, &hw);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    if (pinned) pinned[0] = 0;
    uint64_t got[2] = {};
    SIM_CHECK(cu.cuMemcpyDtoH(got, out, 16));
    expectValue(got[0], want0, "the read before the write", i);
    expectValue(got[1], want1, "the read after the write", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(w), hw, "w", steps);
  SIM_CHECK(cu.cuMemFreeHost(pinned));
}

const char* kLayouts[3] = {"(8,8,8,8,8)", "(8,8,8,8,4,4)", "(8,8,8,8,1,4)"};
std::vector<uint64_t> tailValues(int layout, int step, int j) {
  // Values that repeat every other step (so some launches equal the graph's).
  const uint64_t v = uint64_t((step / 2) % 3) * 0x1111 + uint64_t(j);
  if (layout == 0) return {v * 0x100000001ull};
  if (layout == 1) return {v + 1, v + 2};
  return {v & 0xff, v * 3};
}

void loadMidStep(const simtest::Driver& drv, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  Extra x;
  if (!loadExtra(drv, &x)) return void(++g_wrong);
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr v = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hv = 0, hw = 0;
  struct Loaded {
    CUmodule mod = nullptr;
    CUfunction f = nullptr;
    std::string name;
    int layout = 0;
  };
  std::vector<Loaded> live;  // the last is the current one
  std::vector<uint64_t> handles;
  int loads = 0;
  auto load = [&] {
    Loaded m;
    const int cycle = loads++ % 6;
    m.name = cycle % 2 ? "sim_add_r7m_b" : "sim_add_r7m_a";
    m.layout = cycle % 3;
    std::string image = "sim-image: ";
    if (cycle == 4) image += "sim_mix_r7filler(8,8,8); ";
    image += m.name + kLayouts[m.layout];
    SIM_CHECK(x.code.moduleLoadData(&m.mod, image.c_str()));
    SIM_CHECK(x.code.moduleGetFunction(&m.f, m.mod, m.name.c_str()));
    handles.push_back(reinterpret_cast<uint64_t>(m.f));
    live.push_back(m);
  };
  auto launchOf = [&](const Loaded& m, int i, int count, uint64_t place) {
    for (int j = 0; j < count; ++j) {
      std::vector<uint64_t> vals = {v, v, 1, 0};
      for (uint64_t t : tailValues(m.layout, i, j % 2)) vals.push_back(t);
      launchTracked(cu, m.f, m.name.c_str(), vals, place, 0, s, j % 3 == 2 ? Form::Extra : Form::Params,
                    CUDA_SUCCESS, "the loaded module's kernel", i);
      ++hv;
    }
  };
  load();
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    if (i % 20 == 0 && live.size() > 1) {  // between steps: the old modules go, their handles are given out again
      for (size_t k = 0; k + 1 < live.size(); ++k) SIM_CHECK(x.code.moduleUnload(live[k].mod));
      live.erase(live.begin(), live.end() - 1);
    }
    chain(cu, add, w, s, 4, &hw);
    if (irregular(i, 1)) {  // loaded between held launches, launched at once
      ++g_provoked;
      const Loaded before = live.back();
      load();
      launchOf(live.back(), i, 2, 21);
      launchOf(before, i, 2, 22);
    }
    launchOf(live.back(), i, 6, 20);
    chain(cu, add, w, s, 4, &hw);
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(v), hv, "v", i);
      expectValue(peek(w), hw, "w", i);
      checkTrace(i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkTrace(steps);
  for (auto& m : live) SIM_CHECK(x.code.moduleUnload(m.mod));
  std::map<uint64_t, int> distinct;
  for (uint64_t h : handles) ++distinct[h];
  std::printf("sim_review7_code: %s: %zu distinct kernel handles over %zu loads\n", g_mode, distinct.size(),
              handles.size());
}

void unloadOtherLibrary(const simtest::Driver& drv, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  Extra x;
  if (!loadExtra(drv, &x)) return void(++g_wrong);
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr p = simtest::zeroedBuffer(cu), q = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hp = 0, hq = 0, hw = 0;
  CUlibrary l1 = nullptr, l2 = nullptr;
  SIM_CHECK(x.code.libraryLoadData(&l1, "sim-image: sim_add_r7p(8,8,8,8,8)", nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel k1 = nullptr, k2 = nullptr;
  SIM_CHECK(x.code.libraryGetKernel(&k1, l1, "sim_add_r7p"));
  int l2Layout = 0;
  auto loadL2 = [&](int layout) {
    std::string image = std::string("sim-image: sim_add_r7q") + kLayouts[layout];
    SIM_CHECK(x.code.libraryLoadData(&l2, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    SIM_CHECK(x.code.libraryGetKernel(&k2, l2, "sim_add_r7q"));
    l2Layout = layout;
  };
  loadL2(0);
  const CUfunction K1 = reinterpret_cast<CUfunction>(k1);
  int unloads = 0;
  uint64_t graphBefore = 0;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 2, &hw);
    for (int j = 0; j < 3; ++j) {
      launchTracked(cu, K1, "sim_add_r7p", {p, p, 1, 0, 0x5151}, 30, 0, s, Form::Params, CUDA_SUCCESS, "L1", i);
      ++hp;
    }
    if (irregular(i, 1)) {  // L1's launches held
      ++g_provoked;
      if (unloads++ == 0) graphBefore = g_executedGraph;
      SIM_CHECK(x.code.libraryUnload(l2));
      loadL2((l2Layout + 1 + i % 2) % 3);
    }
    std::vector<uint64_t> vals = {q, q, 2, 0};
    for (uint64_t t : tailValues(l2Layout, i, 0)) vals.push_back(t);
    launchTracked(cu, reinterpret_cast<CUfunction>(k2), "sim_add_r7q", vals, 31, 0, s,
                  i % 2 ? Form::Extra : Form::Params, CUDA_SUCCESS, "L2", i);
    hq += 2;
    for (int j = 0; j < 3; ++j) {
      launchTracked(cu, K1, "sim_add_r7p", {p, p, 1, 0, 0x5151}, 32, 0, s, Form::Params, CUDA_SUCCESS, "L1 after",
                    i);
      ++hp;
    }
    chain(cu, add, w, s, 2, &hw);
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(p), hp, "p", i);
      expectValue(peek(q), hq, "q", i);
      expectValue(peek(w), hw, "w", i);
      checkTrace(i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkTrace(steps);
  SIM_CHECK(x.code.libraryUnload(l2));
  SIM_CHECK(x.code.libraryUnload(l1));
  std::printf("sim_review7_code: %s: %d unloads; tracked launches from graphs %llu (%llu before the first unload); "
              "sim_add_r7p %llu, sim_add_r7q %llu\n",
              g_mode, unloads, (unsigned long long)g_executedGraph, (unsigned long long)graphBefore,
              (unsigned long long)g_graphByName["sim_add_r7p"], (unsigned long long)g_graphByName["sim_add_r7q"]);
}

void queriesBetween(const simtest::Driver& drv, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  Extra x;
  if (!loadExtra(drv, &x)) return void(++g_wrong);
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr v = simtest::zeroedBuffer(cu), u = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hv = 0, hu = 0, hw = 0;
  CUmodule mod = nullptr;
  SIM_CHECK(x.code.moduleLoadData(&mod, "sim-image: sim_add_r7g(8,8,8,8,2,8)"));
  CUfunction f0 = nullptr;
  SIM_CHECK(x.code.moduleGetFunction(&f0, mod, "sim_add_r7g"));
  CUlibrary lib = nullptr;
  SIM_CHECK(x.code.libraryLoadData(&lib, "sim-image: sim_add_r7h(8,8,8,8)", nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kl = nullptr;
  SIM_CHECK(x.code.libraryGetKernel(&kl, lib, "sim_add_r7h"));
  int allowance = 49152;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    chain(cu, add, w, s, 4, &hw);
    CUfunction f = nullptr;
    SIM_CHECK(x.code.moduleGetFunction(&f, mod, "sim_add_r7g"));
    expectValue(reinterpret_cast<uint64_t>(f), reinterpret_cast<uint64_t>(f0), "cuModuleGetFunction's handle", i);
    const unsigned ask = 48000;
    auto launchF = [&](unsigned shm, uint64_t place, const char* what) {
      const CUresult want = int(shm) <= allowance ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      if (launchTracked(cu, f, "sim_add_r7g", {v, v, 1, 0, uint64_t(i % 3), 77}, place, shm, s,
                        place % 2 ? Form::Ex : Form::Params, want, what, i) == CUDA_SUCCESS)
        ++hv;
    };
    launchF(ask, 40, "f asking 48000");
    launchF(ask, 40, "f asking 48000");
    launchTracked(cu, reinterpret_cast<CUfunction>(kl), "sim_add_r7h", {u, u, 3, 0}, 41, 1024, s, Form::Params,
                  CUDA_SUCCESS, "library kernel", i);
    hu += 3;
    // Questions between held launches.
    int value = -1;
    expectCode(x.funcGetAttribute(&value, kAllow, f), CUDA_SUCCESS, "cuFuncGetAttribute", i);
    expectValue(uint64_t(value), uint64_t(allowance), "f's allowance", i);
    value = -1;
    expectCode(x.funcGetAttribute(&value, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, f), CUDA_SUCCESS,
               "cuFuncGetAttribute (cluster width)", i);
    expectValue(uint64_t(value), 0, "f's cluster width", i);
    value = -1;
    expectCode(x.kernelGetAttribute(&value, kAllow, kl, 0), CUDA_SUCCESS, "cuKernelGetAttribute", i);
    expectValue(uint64_t(value), 49152, "the library kernel's allowance", i);
    size_t off = 0, size = 0;
    expectCode(cu.cuFuncGetParamInfo(f, 4, &off, &size), CUDA_SUCCESS, "cuFuncGetParamInfo", i);
    expectValue(off * 1000 + size, 32 * 1000 + 2, "f's parameter 4", i);
    expectCode(cu.cuFuncGetParamInfo(f, 6, &off, &size), CUDA_ERROR_INVALID_VALUE, "cuFuncGetParamInfo past the last",
               i);
    expectCode(cu.cuKernelGetParamInfo(kl, 3, &off, &size), CUDA_SUCCESS, "cuKernelGetParamInfo", i);
    expectValue(off * 1000 + size, 24 * 1000 + 8, "the library kernel's parameter 3", i);
    expectCode(cu.cuKernelGetParamInfo(reinterpret_cast<CUkernel>(f), 0, &off, &size), CUDA_ERROR_INVALID_HANDLE,
               "cuKernelGetParamInfo of a function", i);
    const char* name = nullptr;
    expectCode(cu.cuFuncGetName(&name, f), CUDA_SUCCESS, "cuFuncGetName", i);
    if (name && std::strcmp(name, "sim_add_r7g") != 0) expectValue(1, 0, "cuFuncGetName's name", i);
    if (irregular(i, 1)) {
      ++g_provoked;
      // Lowered below the held launches' 48000, raised, or set to 48000 itself.
      static const int kValues[] = {30000, 48000, 47999, 49152, 60000, 65536};
      allowance = kValues[(i / 7) % 6];
      expectCode(cu.cuFuncSetAttribute(f, kAllow, allowance), CUDA_SUCCESS, "cuFuncSetAttribute", i);
      value = -1;
      expectCode(x.funcGetAttribute(&value, kAllow, f), CUDA_SUCCESS, "cuFuncGetAttribute after the set", i);
      expectValue(uint64_t(value), uint64_t(allowance), "f's allowance after the set", i);
      launchF(unsigned(allowance), 42, "f asking exactly the allowance");
      launchF(unsigned(allowance) + 1, 42, "f asking one byte more");
    }
    launchF(ask, 43, "f asking 48000 after the questions");
    chain(cu, add, w, s, 4, &hw);
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(v), hv, "v", i);
      expectValue(peek(u), hu, "u", i);
      expectValue(peek(w), hw, "w", i);
      checkTrace(i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkTrace(steps);
}

void clusterWidth(const simtest::Driver& drv, CUfunction add, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  Extra x;
  if (!loadExtra(drv, &x)) return void(++g_wrong);
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr v = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hv = 0, hw = 0;
  CUlibrary lib = nullptr;
  SIM_CHECK(x.code.libraryLoadData(&lib, "sim-image: sim_add_r7c(8,8,8,8)", nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kk = nullptr;
  SIM_CHECK(x.code.libraryGetKernel(&kk, lib, "sim_add_r7c"));
  const CUfunction K = reinterpret_cast<CUfunction>(kk);
  int width = 0;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    if (irregular(i, 1)) {  // the previous step's graph launch may be queued
      ++g_provoked;
      width = (width + 1 + i % 2) % 4;
      expectCode(cu.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, width, kk, 0), CUDA_SUCCESS,
                 "cuKernelSetAttribute (cluster width)", i);
    } else if (irregular(i, 3)) {
      expectCode(cu.cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, width, kk, 0), CUDA_SUCCESS,
                 "cuKernelSetAttribute (the same width)", i);
    }
    chain(cu, add, w, s, 4, &hw);
    for (int j = 0; j < 3; ++j) {
      launchTracked(cu, K, "sim_add_r7c", {v, v, 1, 0}, 50, 0, s, Form::Params, CUDA_SUCCESS, "K", i);
      hv += 1 + uint64_t(width);
    }
    if (irregular(i, 2)) {  // mid-step, K's launches held
      ++g_provoked;
      CUfunction f = nullptr;
      SIM_CHECK(x.kernelGetFunction(&f, kk));
      width = (width + 3) % 4;
      expectCode(cu.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, width), CUDA_SUCCESS,
                 "cuFuncSetAttribute (cluster width)", i);
    }
    for (int j = 0; j < 3; ++j) {
      launchTracked(cu, K, "sim_add_r7c", {v, v, 1, 0}, 51, 0, s, Form::Params, CUDA_SUCCESS, "K after", i);
      hv += 1 + uint64_t(width);
    }
    chain(cu, add, w, s, 4, &hw);
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(v), hv, "v", i);
      expectValue(peek(w), hw, "w", i);
      checkTrace(i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkTrace(steps);
}

void copyKernelsNewContext(const simtest::Driver& drv, CUcontext a, int steps) {
  const simtest::DriverApi& cu = drv.plain;
  Extra x;
  if (!loadExtra(drv, &x)) return void(++g_wrong);
  CUdevice dev1 = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
  const CUfunction add = simtest::libraryKernel3("sim_add_c7ctx");
  CUcontext b = nullptr;
  CUstream s = nullptr;
  CUmodule mod = nullptr;
  CUfunction mk = nullptr;
  CUdeviceptr buf = 0, v = 0;  // device 1's memory (allocated in B; it stays across B's ends)
  std::vector<uint8_t> model(512, 0);
  uint64_t hv = 0;
  int epochs = 0;
  bool wide = false;  // the module's kernel launched: sim_add_r7mb (6 parameters) or sim_add_r7ma
  auto open = [&] {
    wide = epochs % 2 == 1;
    SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&b, dev1));
    SIM_CHECK(cu.cuCtxSetCurrent(b));
    // The program's own module first: it gets the kernel handles graft's
    // copy-kernel module had in the ended context.
    SIM_CHECK(x.code.moduleLoadData(&mod, "sim-image: sim_add_r7ma(8,8,8,8); sim_add_r7mb(8,8,8,8,8,8)"));
    SIM_CHECK(x.code.moduleGetFunction(&mk, mod, wide ? "sim_add_r7mb" : "sim_add_r7ma"));
    SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ++epochs;
  };
  auto close = [&] {
    SIM_CHECK(cu.cuCtxSetCurrent(b));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    SIM_CHECK(cu.cuStreamDestroy(s));
    SIM_CHECK(cu.cuCtxSetCurrent(a));
    SIM_CHECK(cu.cuDevicePrimaryCtxRelease(dev1));  // the last reference: B ends with its modules
  };
  open();
  buf = simtest::zeroedBuffer(cu, 512);
  v = simtest::zeroedBuffer(cu);
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    if (i > 0 && i % 40 == 0) {
      ++g_provoked;
      close();
      open();
    }
    SIM_CHECK(cu.cuCtxSetCurrent(b));
    const size_t o = size_t(i % 3) * 8;
    SIM_CHECK(simtest::launchAdd(cu, add, v, v, 1, s));
    SIM_CHECK(cu.cuMemsetD32Async(buf + o, uint32_t(i), 10, s));
    for (size_t k = 0; k < 10; ++k) std::memcpy(model.data() + o + 4 * k, &i, 4);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(buf + 128 + o, buf + o, 40, s));
    std::memmove(model.data() + 128 + o, model.data() + o, 40);
    SIM_CHECK(cu.cuMemsetD8Async(buf + 256 + o + 1, uint8_t(i * 3), 13, s));
    std::memset(model.data() + 256 + o + 1, uint8_t(i * 3), 13);
    SIM_CHECK(cu.cuMemsetD16Async(buf + 320 + o, uint16_t(i * 5 + 1), 7, s));
    for (size_t k = 0; k < 7; ++k) {
      const uint16_t h = uint16_t(i * 5 + 1);
      std::memcpy(model.data() + 320 + o + 2 * k, &h, 2);
    }
    std::vector<uint64_t> vals = {v, v, 2, 0};
    if (wide) vals.insert(vals.end(), {uint64_t(i), 9});
    launchTracked(cu, mk, wide ? "sim_add_r7mb" : "sim_add_r7ma", vals, 60, 0, s, Form::Params, CUDA_SUCCESS,
                  "the program's module kernel", i);
    hv += 3;
    SIM_CHECK(simtest::launchAdd(cu, add, v, v, 0, s));
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      std::vector<uint8_t> got(512);
      SIM_CHECK(cu.cuMemcpyDtoH(got.data(), buf, 512));
      size_t firstBad = 512;
      for (size_t k = 0; k < 512 && firstBad == 512; ++k)
        if (got[k] != model[k]) firstBad = k;
      expectValue(firstBad, 512, "first wrong byte of the copies and memsets", i);
      expectValue(peek(v), hv, "v", i);
      checkTrace(i);
    }
  }
  close();
  SIM_CHECK(cu.cuCtxSetCurrent(a));
  checkTrace(steps);
  std::printf("sim_review7_code: %s: %d contexts; %llu copies and memsets ran from graphs\n", g_mode, epochs,
              (unsigned long long)g_copiesFromGraphs);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review7_code", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review7_code", &drv, &ctx)) return rc;
  CUfunction add = simtest::libraryKernel3("sim_add_review7");
  if (mode == "kernel-two-contexts") kernelTwoContexts(drv, ctx, add, steps);
  else if (mode == "global-writes") globalWrites(drv, add, steps);
  else if (mode == "load-mid-step") loadMidStep(drv, add, steps);
  else if (mode == "unload-other-library") unloadOtherLibrary(drv, add, steps);
  else if (mode == "queries-between") queriesBetween(drv, add, steps);
  else if (mode == "cluster-width") clusterWidth(drv, add, steps);
  else if (mode == "copy-kernels-new-context") copyKernelsNewContext(drv, ctx, steps);
  else {
    std::printf("usage: sim_review7_code --mode kernel-two-contexts|global-writes|load-mid-step|"
                "unload-other-library|queries-between|cluster-width|copy-kernels-new-context [--steps N] "
                "[--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
