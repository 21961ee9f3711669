// sim_review6_patching: the sixth red-team round's review of how a replay is
// patched to the values the program gave this time and how graph instances
// are launched (src/graph/op_codec.cc, node updates and instances in
// src/graph/graph_executor.cc, src/core/event_instances.h,
// src/graph/launch_worker.h, the fast lane in src/hook/interpose.cc and
// src/core/engine.cc). Every step issues work long enough to be graphed; the
// values it gives change in odd ways. Every return code and value must be the
// simulated driver's, eagerly and under graft:
//   sim_review6_patching --mode MODE [--steps N] [--expect-graphs]
//
// same-kernel-many  one kernel launched 8 times a step with one shape, from one
//                kernelParams array whose storage is rewritten between the
//                launches; each launch's increment changes on its own
//                irregular steps (by 1, or only in its high 32 bits), one
//                launch's source and another's destination switch buffers.
//                Every buffer checked every step.
// byte-diffs     a kernel of parameters (8,8,8,4,8,2,1,8), launched twice a
//                step (kernelParams, and an `extra` buffer whose padding bytes
//                hold garbage that changes every step); values that change in
//                one byte only: an increment of 0 or 1<<63 (the bits of 0.0
//                and -0.0), a 4-byte parameter whose storage's (unread) high
//                half changes every step, NaN payloads, a 16-bit parameter's
//                high byte, the high half of a pointer-sized parameter. Every
//                executed launch must carry exactly the given bytes (trace).
// rewrite-after  cuLaunchKernelEx whose CUlaunchConfig (grid), attribute
//                array (cluster dimension, priority), kernelParams storage and
//                `extra` buffer are all rewritten right after each call, and
//                reused by the next launch of the step; synchronized every 4
//                steps, so held launches must have been copied. Values, and
//                each executed launch's grid and attributes (trace), checked.
// copy-set-values  device copies (cuMemcpyDtoDAsync, cuMemcpyAsync) whose
//                destination offsets rotate, memsets D8/D16/D32 whose value
//                changes in one byte and whose destination moves, a 2-D D32
//                memset moving by 4 bytes, a copy into device 1's memory (a
//                driver memcpy node, patched) read back by the next copy. A
//                host model of every buffer is compared every step.
// pinned-memset, pinned-2d-memset  a memset of pinned host memory (graft
//                captures it as a driver memset node) whose value changes
//                every step (1-D D32), or whose value and row offset change
//                (2-D D8). The simulator refuses memset node updates naming
//                host memory (and 2-D ones), so the segment is disabled at its
//                first update: values stay right, nothing runs from a graph
//                (exit 3 with --expect-graphs: a performance loss only).
// copy-kind-switch  cuMemcpyAsync of 16 bytes at one place whose direction
//                and memory change on irregular steps: device to device
//                (graphed), device to pinned host, pinned host to device,
//                from device 1's memory, into device 1's memory.
// overlap-replays  no synchronization for 16 steps of ~35 ops; each step
//                patches a kernel (i*i + 1), a device memset (moving), a copy
//                into a rotating slot that the next kernel reads, and a copy
//                into device 1's memory (a memcpy node). Run with
//                SIM_GRAPH_LAUNCH_US=200: the graph is replayed with new
//                values while earlier replays are queued or running. Also run
//                with SIM_FAIL=cuGraphExecKernelNodeSetParams:20:999,
//                cuGraphExecMemcpyNodeSetParams:5:999, cuGraphLaunch:7:999,
//                and GRAFT_ASYNC_LAUNCH=0: node updates or launches failing
//                mid-run, with launches queued behind them.
// layers         four "layers" a step, the same 10 ops (kernels, a memset, a
//                device copy) on each layer's buffers: one graph replayed four
//                times back to back with other values (also with
//                SIM_GRAPH_LAUNCH_US=200 and the SIM_FAIL variants above).
// record-refused-gate  a step x += 2; record F; a kernel the host releases
//                (sim_gate); y = x + 1. The host synchronizes F, reads x, then
//                opens the gate. Passes as is. With
//                SIM_FAIL=cuGraphExecEventRecordNodeSetEvent:1:1 (the driver
//                refuses graft's first update of F's record node) graft issues
//                F's record beside the launch, after the whole graph, gate
//                included: cuEventSynchronize(F) never returns (simulated
//                deadlock), where eagerly F completes before the gate.
// wait-refused-gate  a stream t runs a gate kernel and records E; after an
//                eager host copy on s (a boundary), s: x += 2; record F;
//                wait E; y = x + 1. The host synchronizes F (eagerly not
//                behind the gate), opens the gate, synchronizes s. With
//                SIM_FAIL=cuGraphExecEventWaitNodeSetEvent:1:1 graft issues
//                the wait beside the launch, before the whole graph, so F's
//                record waits for the gate: a simulated deadlock.
// record-swap-gate  a step x += 2; record A; gate; y = x + 5; record B;
//                z = y + 1, where (A, B) is (E1, E2), on irregular steps
//                (E2, E1) or (E1, E3). The host synchronizes A, reads x, opens
//                the gate, synchronizes B, reads y: each record node must get
//                this step's event (a wrong one is a deadlock or a wrong
//                value). With SIM_FAIL=cuGraphExecEventRecordNodeSetEvent:1:1,
//                as record-refused-gate.
// attrs-change   cuLaunchKernelEx (grid 2) with cluster dimension, priority
//                and cooperative attributes; on irregular steps cooperative
//                1, cluster 2x1x1, priority -1, the attributes in another
//                order, or cuLaunchCooperativeKernel at the place. Values and
//                each executed launch's attributes (trace) checked.
// extra-alternating  one kernel at one place launched through kernelParams
//                for three steps and through an `extra` buffer (cuLaunchKernel
//                or cuLaunchKernelEx) for three, and on irregular steps the
//                other form; the buffer's storage is rewritten right after
//                each call.
// tail-record-gate, tail-record-joined-gate  streams a (a gate kernel, then
//                x += 1) and b (y += 3, then a record of F, b's last op, which
//                graft issues after b's tail wait); F alternates with G. With
//                -joined-gate a forks b (E) and joins it after the gate (the
//                graph runs on a). The host synchronizes F, reads y, then opens
//                the gate.
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <algorithm>
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

CUcontext device1Context(const simtest::DriverApi& cu) {
  CUdevice dev1 = 0;
  CUcontext c = nullptr;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&c, dev1) != CUDA_SUCCESS) return nullptr;
  return c;
}

// Device 1's memory (zeroed), allocated with its context current.
CUdeviceptr device1Buffer(const simtest::DriverApi& cu, CUcontext ctx, size_t bytes) {
  CUcontext ctx1 = device1Context(cu);
  if (!ctx1) {
    std::printf("sim_review6_patching: no device 1\n");
    std::exit(2);
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  const CUdeviceptr p = simtest::zeroedBuffer(cu, bytes);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx));
  return p;
}

CUdeviceptr pinnedBuffer(const simtest::DriverApi& cu, size_t bytes) {
  void* p = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&p, bytes));
  if (p) std::memset(p, 0, bytes);
  return reinterpret_cast<CUdeviceptr>(p);
}

// A host model of the program's buffers (all zeroed at the start): every op
// the program issues is applied to it in issue order (one stream), and after a
// synchronize it must equal the memory.
struct Shadow : ShadowMemory {
  void add(uint64_t dst, uint64_t src, uint64_t k) { write64(dst, read64(src) + k); }
  void copy(uint64_t dst, uint64_t src, size_t n) {
    std::vector<uint8_t> tmp(at(src, n), at(src, n) + n);
    std::memcpy(at(dst, n), tmp.data(), n);
  }
  void set(uint64_t dst, size_t pitch, uint32_t value, unsigned elem, size_t width, size_t height) {
    for (size_t r = 0; r < height; ++r) {
      uint8_t* row = at(dst + r * pitch, width * elem);
      for (size_t e = 0; e < width; ++e) std::memcpy(row + e * elem, &value, elem);  // little-endian low bytes
    }
  }
};

// A launch as the trace shows it.
struct Launch {
  std::vector<uint8_t> params;
  std::vector<CUlaunchAttribute> attrs;  // as the simulator keeps them: IGNORE dropped, value copied
  unsigned grid[3] = {1, 1, 1};
};

std::vector<Launch> executedOf(const char* name) {
  std::vector<Launch> out;
  for (size_t i = 0, count = simTraceSize(); i < count; ++i) {
    SimEffect fx{};
    if (simTraceGet(i, &fx) != 0 || fx.kind != SIM_EFFECT_KERNEL || !fx.kernelName || std::strcmp(fx.kernelName, name))
      continue;
    Launch l;
    l.params.assign(fx.params, fx.params + fx.paramBytes);
    l.attrs.assign(fx.attrs, fx.attrs + fx.numAttrs);
    std::copy(fx.grid, fx.grid + 3, l.grid);
    out.push_back(std::move(l));
  }
  return out;
}

// The executed launches of `name` must be `want`, in order (one stream).
void expectLaunches(const char* name, const std::vector<Launch>& want, bool attrs, bool grid) {
  const std::vector<Launch> got = executedOf(name);
  expectValue(got.size(), want.size(), "executed launches", -1);
  int shown = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const Launch& g = got[i];
    const Launch& w = want[i];
    bool same = g.params == w.params;
    if (attrs) {
      same &= g.attrs.size() == w.attrs.size();
      for (size_t a = 0; same && a < g.attrs.size(); ++a)
        same &= std::memcmp(&g.attrs[a], &w.attrs[a], sizeof(CUlaunchAttribute)) == 0;
    }
    if (grid) same &= std::equal(g.grid, g.grid + 3, w.grid);
    if (same) continue;
    ++g_wrong;
    if (shown++ < 4) {
      std::printf("sim_review6_patching: %s: launch %zu of %s ran with other bytes than given:", g_mode, i, name);
      for (size_t b = 0; b < g.params.size(); ++b) {
        if (b < w.params.size() && g.params[b] == w.params[b]) continue;
        std::printf(" [%zu] %02x (given %02x)", b, g.params[b], b < w.params.size() ? w.params[b] : 0);
      }
      if (attrs && g.attrs.size() != w.attrs.size())
        std::printf(" %zu attributes (given %zu)", g.attrs.size(), w.attrs.size());
      else if (attrs)
        for (size_t a = 0; a < g.attrs.size(); ++a)
          if (std::memcmp(&g.attrs[a], &w.attrs[a], sizeof(CUlaunchAttribute)))
            std::printf(" attribute %zu: id %d (given id %d)", a, int(g.attrs[a].id), int(w.attrs[a].id));
      if (grid && !std::equal(g.grid, g.grid + 3, w.grid)) std::printf(" grid x %u (given %u)", g.grid[0], w.grid[0]);
      std::printf("\n");
    }
  }
}

CUlaunchAttribute attr(CUlaunchAttributeID id) {
  CUlaunchAttribute a;
  std::memset(&a, 0, sizeof a);
  a.id = id;
  return a;
}

// ------------------------------------------------------------------ modes

void sameKernelMany(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr buf[10];
  Shadow m;
  for (int b = 0; b < 10; ++b) {
    buf[b] = simtest::zeroedBuffer(cu);
    m.track(buf[b], 64, ("buf" + std::to_string(b)).c_str());
  }
  uint64_t k[8];
  for (int j = 0; j < 8; ++j) k[j] = uint64_t(j + 1);
  // One array, one storage for every launch of the step.
  CUdeviceptr to = 0, from = 0;
  uint64_t kk = 0;
  void* args[] = {&to, &from, &kk};
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 8; ++j) {
      if (irregular(i, 10 + uint64_t(j))) {
        k[j] += (j % 2) ? (uint64_t(1) << 32) : 1;
        ++g_provoked;
      }
    }
    for (int j = 0; j < 8; ++j) {
      to = buf[j];
      from = buf[j];
      if (j == 6 && irregular(i, 30)) from = buf[0];
      if (j == 7 && irregular(i, 31)) to = buf[8 + i % 2];
      kk = k[j];
      SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      m.add(to, from, kk);
    }
    to = from = buf[9];  // after the last launch: must not reach it
    kk = 1000;
    SIM_CHECK(cu.cuStreamSynchronize(s));
    m.check(i);
  }
}

void byteDiffs(const simtest::DriverApi& cu, CUfunction add, int steps) {
  const size_t sizes[] = {8, 8, 8, 4, 8, 2, 1, 8};
  CUfunction bytes = simKernelCreate("sim_add_bytes_r6", SIM_KERNEL_LIBRARY, 8, sizes, nullptr);
  size_t off[8], total = simKernelParamBytes(bytes);
  for (unsigned p = 0; p < 8; ++p) {
    size_t sz = 0;
    simKernelParamLayout(bytes, p, &off[p], &sz);
  }
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  Shadow m;
  m.track(x, 64, "x");
  m.track(y, 64, "y");
  m.track(w, 64, "w");
  const uint64_t nans[] = {0x7ff8000000000001ull, 0x7ff8000000000002ull, 0xfff8000000000001ull};
  std::vector<Launch> want;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    for (int c = 0; c < 4; ++c) {
      SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
      m.add(w, w, 1);
    }
    CUdeviceptr dst = x, src = x;
    uint64_t k = irregular(i, 40) ? 0x8000000000000000ull : 0;            // -0.0 / 0.0
    uint64_t a32store = (uint64_t(uint32_t(i) * 0x9e3779b9u) << 32) |      // unread garbage
                        (irregular(i, 41) ? 0x01000000u : 0u);              // one byte of the 4
    uint64_t d64 = nans[(i / 3) % 3];
    uint16_t h16 = irregular(i, 43) ? 0x0100 : 0x0000;
    uint8_t b8 = irregular(i, 44) ? 1 : 0;
    uint64_t t64 = (uint64_t(i % 3) << 32) | 0x1000;  // the high half of a pointer
    void* args[] = {&dst, &src, &k, &a32store, &d64, &h16, &b8, &t64};
    SIM_CHECK(cu.cuLaunchKernel(bytes, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
    m.add(x, x, k);
    Launch l;
    l.params.assign(total, 0);
    const void* vals[] = {&dst, &src, &k, &a32store, &d64, &h16, &b8, &t64};
    for (unsigned p = 0; p < 8; ++p) std::memcpy(l.params.data() + off[p], vals[p], sizes[p]);
    want.push_back(l);
    g_provoked += irregular(i, 40) + irregular(i, 41) + irregular(i, 43) + irregular(i, 44);
    // The `extra` form: padding holds garbage that changes every step.
    std::vector<uint8_t> buffer(total);
    for (size_t b = 0; b < total; ++b) buffer[b] = uint8_t(i * 31 + b * 7);
    const uint64_t k2 = irregular(i, 45) ? 0x8000000000000000ull : 2;
    const uint64_t nan2 = nans[(i / 2) % 3];
    const void* vals2[] = {&y, &x, &k2, &a32store, &nan2, &h16, &b8, &t64};
    Launch l2;
    l2.params.assign(total, 0);
    for (unsigned p = 0; p < 8; ++p) {
      std::memcpy(buffer.data() + off[p], vals2[p], sizes[p]);
      std::memcpy(l2.params.data() + off[p], vals2[p], sizes[p]);
    }
    size_t bufferSize = total;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &bufferSize,
                     CU_LAUNCH_PARAM_END};
    SIM_CHECK(cu.cuLaunchKernel(bytes, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));
    std::fill(buffer.begin(), buffer.end(), 0xee);  // right after the call
    m.add(y, x, k2);
    want.push_back(l2);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    m.check(i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectLaunches("sim_add_bytes_r6", want, false, false);
}

void rewriteAfter(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUfunction ex = simtest::libraryKernel3("sim_add_ex_r6");
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                    w = simtest::zeroedBuffer(cu);
  Shadow m;
  m.track(x, 64, "x");
  m.track(y, 64, "y");
  m.track(z, 64, "z");
  m.track(w, 64, "w");
  CUlaunchConfig cfg{};
  CUlaunchAttribute attrs[2];
  struct {
    CUdeviceptr to, from;
    uint64_t k;
  } st{};
  void* args[] = {&st.to, &st.from, &st.k};
  uint64_t buffer[3] = {};
  size_t bytes = sizeof buffer;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
  std::vector<Launch> want;
  auto setConfig = [&](int i) {
    cfg = CUlaunchConfig{};
    cfg.gridDimX = 2;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    attrs[0] = attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    attrs[0].value.clusterDim.x = attrs[0].value.clusterDim.y = attrs[0].value.clusterDim.z = 1;
    attrs[1] = attr(CU_LAUNCH_ATTRIBUTE_PRIORITY);
    attrs[1].value.priority = irregular(i, 20) ? -1 : 0;
    cfg.attrs = attrs;
    cfg.numAttrs = 2;
  };
  auto rewrite = [&]() {  // right after a call: none of it may reach that launch
    cfg.gridDimX = 7;
    attrs[0].value.clusterDim.x = 4;
    attrs[1].value.priority = -3;
    st = {w, w, 999};
    buffer[0] = buffer[1] = w;
    buffer[2] = 999;
  };
  auto expectEx = [&](CUdeviceptr to, CUdeviceptr from, uint64_t k, int i) {
    Launch l;
    l.params.resize(24);
    std::memcpy(l.params.data(), &to, 8);
    std::memcpy(l.params.data() + 8, &from, 8);
    std::memcpy(l.params.data() + 16, &k, 8);
    CUlaunchAttribute a0 = attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION), a1 = attr(CU_LAUNCH_ATTRIBUTE_PRIORITY);
    a0.value.clusterDim.x = a0.value.clusterDim.y = a0.value.clusterDim.z = 1;
    a1.value.priority = irregular(i, 20) ? -1 : 0;
    l.attrs = {a0, a1};
    l.grid[0] = 2;
    want.push_back(l);
  };
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    for (int c = 0; c < 6; ++c) {
      SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
      m.add(w, w, 1);
    }
    g_provoked += irregular(i, 20);
    setConfig(i);
    st = {y, x, uint64_t(i)};
    SIM_CHECK(cu.cuLaunchKernelEx(&cfg, ex, args, nullptr));  // y = x + i
    m.add(y, x, uint64_t(i));
    expectEx(y, x, uint64_t(i), i);
    rewrite();
    st = {x, y, irregular(i, 21) ? 3u : 1u};
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));  // x = y + 1 (or 3)
    m.add(x, y, st.k);
    rewrite();
    buffer[0] = z;
    buffer[1] = x;
    buffer[2] = irregular(i, 22) ? 7 : 2;
    m.add(z, x, buffer[2]);
    SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));  // z = x + 2 (or 7)
    rewrite();
    // The config and storage again, for a second launch of the step.
    setConfig(i);
    buffer[0] = z;
    buffer[1] = z;
    buffer[2] = uint64_t(i) << 32;
    SIM_CHECK(cu.cuLaunchKernelEx(&cfg, ex, nullptr, extra));  // z += i << 32
    m.add(z, z, uint64_t(i) << 32);
    expectEx(z, z, uint64_t(i) << 32, i);
    rewrite();
    if (i % 4 == 3 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      m.check(i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectLaunches("sim_add_ex_r6", want, true, true);
}

void copySetValues(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), srcA = simtest::zeroedBuffer(cu),
                    srcB = simtest::zeroedBuffer(cu), bank = simtest::zeroedBuffer(cu),
                    d2a = simtest::zeroedBuffer(cu), d2b = simtest::zeroedBuffer(cu), m8 = simtest::zeroedBuffer(cu),
                    m16 = simtest::zeroedBuffer(cu), m32 = simtest::zeroedBuffer(cu),
                    m2d = simtest::zeroedBuffer(cu, 128), dstC = simtest::zeroedBuffer(cu),
                    w = simtest::zeroedBuffer(cu);
  const CUdeviceptr far0 = device1Buffer(cu, ctx, 64), far1 = device1Buffer(cu, ctx, 64);
  Shadow m;
  const std::pair<CUdeviceptr, const char*> named[] = {
      {zero, "zero"}, {srcA, "srcA"}, {srcB, "srcB"}, {bank, "bank"}, {d2a, "d2a"},   {d2b, "d2b"},
      {m8, "m8"},     {m16, "m16"},   {m32, "m32"},   {dstC, "dstC"}, {w, "w"},       {far0, "far0"},
      {far1, "far1"}};
  for (const auto& [p, name] : named) m.track(p, 64, name);
  m.track(m2d, 128, "m2d");
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, srcA, zero, uint64_t(i) * 7 + 1, s));
    m.add(srcA, zero, uint64_t(i) * 7 + 1);
    const uint64_t kb = (uint64_t(i) * 13 + 5) | (uint64_t(i % 2) << 40);
    SIM_CHECK(simtest::launchAdd(cu, add, srcB, zero, kb, s));
    m.add(srcB, zero, kb);
    const CUdeviceptr to1 = bank + 8 * uint64_t((i / 2) % 4);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(to1, srcA, 8, s));
    m.copy(to1, srcA, 8);
    const CUdeviceptr to2 = (i / 3) % 2 ? d2b : d2a;
    SIM_CHECK(cu.cuMemcpyAsync(to2, srcB, 16, s));
    m.copy(to2, srcB, 16);
    const CUdeviceptr at8 = m8 + (irregular(i, 50) ? 8 : 0);
    SIM_CHECK(cu.cuMemsetD8Async(at8, (unsigned char)(i * 5), 8, s));
    m.set(at8, 0, uint8_t(i * 5), 1, 8, 1);
    const unsigned short v16 = irregular(i, 51) ? 0x0100 : 0x0001;
    SIM_CHECK(cu.cuMemsetD16Async(m16, v16, 4, s));
    m.set(m16, 0, v16, 2, 4, 1);
    const unsigned v32 = 0x00abcdefu | (irregular(i, 52) ? 0x80000000u : 0u);
    SIM_CHECK(cu.cuMemsetD32Async(m32, v32, 2, s));
    m.set(m32, 0, v32, 4, 2, 1);
    const CUdeviceptr at2d = m2d + 4 * uint64_t(i % 2);
    SIM_CHECK(cu.cuMemsetD2D32Async(at2d, 32, unsigned(i), 2, 3, s));
    m.set(at2d, 32, unsigned(i), 4, 2, 3);
    const CUdeviceptr far = i % 2 ? far1 : far0;
    SIM_CHECK(cu.cuMemcpyDtoDAsync(far, srcA, 8, s));  // device 1's memory: a memcpy node
    m.copy(far, srcA, 8);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(dstC, far, 8, s));
    m.copy(dstC, far, 8);
    for (int c = 0; c < 3; ++c) {
      SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
      m.add(w, w, 1);
    }
    g_provoked += irregular(i, 50) + irregular(i, 51) + irregular(i, 52);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    m.check(i);
  }
}

// A memset of pinned host memory (a driver memset node): 1-D whose value
// changes every step, or (`twoD`) 2-D whose value and row offset change.
void pinnedMemset(const simtest::DriverApi& cu, CUfunction add, int steps, bool twoD) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr w = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu);
  const CUdeviceptr pinned = pinnedBuffer(cu, 64);
  Shadow m;
  m.track(w, 64, "w");
  m.track(x, 64, "x");
  m.track(pinned, 64, "pinned");
  for (int i = 0; i < steps; ++i) {
    for (int c = 0; c < 4; ++c) {
      SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
      m.add(w, w, 1);
    }
    if (twoD) {
      const CUdeviceptr at = pinned + (irregular(i, 55) ? 2 : 0);
      SIM_CHECK(cu.cuMemsetD2D8Async(at, 16, (unsigned char)(i & 0xff), 4, 2, s));
      m.set(at, 16, uint8_t(i & 0xff), 1, 4, 2);
      g_provoked += irregular(i, 55);
    } else {
      SIM_CHECK(cu.cuMemsetD32Async(pinned, unsigned(i) + 1, 2, s));
      m.set(pinned, 0, unsigned(i) + 1, 4, 2, 1);
    }
    SIM_CHECK(simtest::launchAdd(cu, add, x, pinned, 1, s));  // x = the pinned word + 1
    m.add(x, pinned, 1);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    m.check(i);
  }
}

void copyKindSwitch(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr zero = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu),
                    w = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu);
  const CUdeviceptr far = device1Buffer(cu, ctx, 64);
  const CUdeviceptr pinned = pinnedBuffer(cu, 64);
  Shadow m;
  const std::pair<CUdeviceptr, const char*> named[] = {{zero, "zero"}, {a, "a"},     {b, "b"},
                                                       {w, "w"},       {c, "c"},     {far, "far"},
                                                       {pinned, "pinned"}};
  for (const auto& [p, name] : named) m.track(p, 64, name);
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, a, zero, uint64_t(i) + 1, s));  // a = i + 1
    m.add(a, zero, uint64_t(i) + 1);
    const uint64_t hostWord = uint64_t(i) * 3 + 2;
    std::memcpy(reinterpret_cast<void*>(pinned + 32), &hostWord, 8);  // no work pending on it
    m.write64(pinned + 32, hostWord);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(far, a, 8, s));  // device 1's memory holds a too
    m.copy(far, a, 8);
    CUdeviceptr dst = b, src = a;
    if (irregular(i, 60)) dst = pinned;             // device to host
    else if (irregular(i, 61)) src = pinned + 32;   // host to device
    else if (irregular(i, 62)) src = far;           // from device 1
    else if (irregular(i, 63)) dst = far + 16;      // into device 1
    g_provoked += dst != b || src != a;
    SIM_CHECK(cu.cuMemcpyAsync(dst, src, 16, s));
    m.copy(dst, src, 16);
    SIM_CHECK(simtest::launchAdd(cu, add, c, b, 0, s));  // c = b
    m.add(c, b, 0);
    for (int k = 0; k < 3; ++k) {
      SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
      m.add(w, w, 1);
    }
    SIM_CHECK(cu.cuStreamSynchronize(s));
    m.check(i);
  }
}

void overlapReplays(const simtest::DriverApi& cu, CUcontext ctx, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), acc = simtest::zeroedBuffer(cu), slot = simtest::zeroedBuffer(cu),
                    hist = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  const CUdeviceptr far = device1Buffer(cu, ctx, 64);
  Shadow m;
  const std::pair<CUdeviceptr, const char*> named[] = {{x, "x"},     {acc, "acc"}, {slot, "slot"},    {hist, "hist"},
                                                       {y, "y"},     {far, "far"}};
  for (const auto& [p, name] : named) m.track(p, 64, name);
  for (int i = 0; i < steps; ++i) {
    for (int k = 0; k < 30; ++k) {
      SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
      m.add(x, x, 1);
    }
    const uint64_t kk = uint64_t(i) * uint64_t(i) + 1;
    SIM_CHECK(simtest::launchAdd(cu, add, acc, acc, kk, s));
    m.add(acc, acc, kk);
    const CUdeviceptr sl = slot + 8 * uint64_t(i % 4);
    SIM_CHECK(cu.cuMemsetD32Async(sl, unsigned(i), 2, s));
    m.set(sl, 0, unsigned(i), 4, 2, 1);
    const CUdeviceptr h = hist + 8 * uint64_t(i % 8);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(h, acc, 8, s));
    m.copy(h, acc, 8);
    SIM_CHECK(simtest::launchAdd(cu, add, y, h, uint64_t(i), s));  // y = hist[i % 8] + i
    m.add(y, h, uint64_t(i));
    const CUdeviceptr f = far + 8 * uint64_t(i % 2);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(f, y, 8, s));  // a memcpy node
    m.copy(f, y, 8);
    if (i % 16 == 15 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      m.check(i);
    }
  }
}

// x += 2; record F; gate; y = x + 1. The host waits for F, then opens the gate.
void recordRefusedGate(const simtest::DriverApi& cu, CUfunction add, CUfunction gate, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent F;
  SIM_CHECK(cu.cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 2;
    SIM_CHECK(cu.cuEventRecord(F, s));
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i + 1), s));  // runs once flag >= i + 1
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 0, s));
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, s));
    SIM_CHECK(cu.cuEventSynchronize(F));  // eagerly not behind the gate
    expectValue(peek(x), hx, "x after F", i);
    poke(flag, uint64_t(i + 1));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(y), hx + 1, "y", i);
  }
}

// t: gate; record E. s (after an eager copy): x += 2; record F; wait E; y = x + 1.
void waitRefusedGate(const simtest::DriverApi& cu, CUfunction add, CUfunction gate, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent E, F;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    hd = simtest::zeroedBuffer(cu);
  const CUdeviceptr pinned = pinnedBuffer(cu, 64);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i + 1), t));  // runs once flag >= i + 1
    SIM_CHECK(cu.cuEventRecord(E, t));
    SIM_CHECK(cu.cuMemcpyHtoDAsync(hd, reinterpret_cast<void*>(pinned), 8, s));  // eager: a boundary
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 2;
    SIM_CHECK(cu.cuEventRecord(F, s));
    SIM_CHECK(cu.cuStreamWaitEvent(s, E, 0));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 0, s));
    SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, s));
    SIM_CHECK(cu.cuEventSynchronize(F));  // eagerly not behind the gate
    expectValue(peek(x), hx, "x after F", i);
    poke(flag, uint64_t(i + 1));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(y), hx + 1, "y", i);
    SIM_CHECK(cu.cuStreamSynchronize(t));
  }
}

// x += 2; record A; gate; y = x + 5; record B; z = y + 1.
void recordSwapGate(const simtest::DriverApi& cu, CUfunction add, CUfunction gate, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent E1, E2, E3;
  SIM_CHECK(cu.cuEventCreate(&E1, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&E2, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&E3, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    CUevent A = E1, B = E2;
    if (irregular(i, 70)) std::swap(A, B);
    else if (irregular(i, 71)) B = E3;
    g_provoked += A != E1 || B != E2;
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, s));
    hx += 2;
    SIM_CHECK(cu.cuEventRecord(A, s));
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i + 1), s));
    SIM_CHECK(simtest::launchAdd(cu, add, y, x, 5, s));
    SIM_CHECK(cu.cuEventRecord(B, s));
    SIM_CHECK(simtest::launchAdd(cu, add, z, y, 1, s));
    SIM_CHECK(cu.cuEventSynchronize(A));  // eagerly not behind the gate
    expectValue(peek(x), hx, "x after A", i);
    poke(flag, uint64_t(i + 1));
    SIM_CHECK(cu.cuEventSynchronize(B));
    expectValue(peek(y), hx + 5, "y after B", i);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(z), hx + 6, "z", i);
  }
}

void attrsChange(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUfunction k = simtest::libraryKernel3("sim_add_attr_r6");
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  Shadow m;
  m.track(x, 64, "x");
  m.track(y, 64, "y");
  m.track(w, 64, "w");
  std::vector<Launch> want;
  simTraceClear();
  for (int i = 0; i < steps; ++i) {
    for (int c = 0; c < 6; ++c) {
      SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
      m.add(w, w, 1);
    }
    CUdeviceptr to = y, from = x;
    uint64_t kk = uint64_t(i);
    void* args[] = {&to, &from, &kk};
    Launch l;
    l.params.resize(24);
    std::memcpy(l.params.data(), &to, 8);
    std::memcpy(l.params.data() + 8, &from, 8);
    std::memcpy(l.params.data() + 16, &kk, 8);
    l.grid[0] = 2;
    if (irregular(i, 83)) {
      SIM_CHECK(cu.cuLaunchCooperativeKernel(k, 2, 1, 1, 1, 1, 1, 0, s, args));
      CUlaunchAttribute coop = attr(CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
      coop.value.cooperative = 1;
      l.attrs = {coop};
      ++g_provoked;
    } else {
      CUlaunchAttribute a[3] = {attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION), attr(CU_LAUNCH_ATTRIBUTE_PRIORITY),
                                attr(CU_LAUNCH_ATTRIBUTE_COOPERATIVE)};
      a[0].value.clusterDim.x = irregular(i, 81) ? 2 : 1;
      a[0].value.clusterDim.y = a[0].value.clusterDim.z = 1;
      a[1].value.priority = irregular(i, 82) ? -1 : 0;
      a[2].value.cooperative = irregular(i, 80) ? 1 : 0;
      if (irregular(i, 84)) std::swap(a[0], a[2]);
      g_provoked += irregular(i, 80) + irregular(i, 81) + irregular(i, 82) + irregular(i, 84);
      CUlaunchConfig c{};
      c.gridDimX = 2;
      c.gridDimY = c.gridDimZ = 1;
      c.blockDimX = c.blockDimY = c.blockDimZ = 1;
      c.hStream = s;
      c.attrs = a;
      c.numAttrs = 3;
      SIM_CHECK(cu.cuLaunchKernelEx(&c, k, args, nullptr));
      l.attrs.assign(a, a + 3);
    }
    want.push_back(l);
    m.add(y, x, kk);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));
    m.add(x, y, 1);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    m.check(i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectLaunches("sim_add_attr_r6", want, true, true);
}

void extraAlternating(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  Shadow m;
  m.track(x, 64, "x");
  m.track(y, 64, "y");
  m.track(w, 64, "w");
  uint64_t buffer[3] = {};
  size_t bytes = sizeof buffer;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &bytes, CU_LAUNCH_PARAM_END};
  for (int i = 0; i < steps; ++i) {
    for (int c = 0; c < 6; ++c) {
      SIM_CHECK(simtest::launchAdd(cu, add, w, w, 1, s));
      m.add(w, w, 1);
    }
    bool useExtra = (i / 3) % 2 == 1;
    if (irregular(i, 90)) {
      useExtra = !useExtra;
      ++g_provoked;
    }
    const uint64_t kk = uint64_t(i) * 5 + 1;
    CUdeviceptr to = y, from = x;
    uint64_t kv = kk;
    void* args[] = {&to, &from, &kv};
    if (useExtra) {
      buffer[0] = y;
      buffer[1] = x;
      buffer[2] = kk;
      if (i % 2) {
        CUlaunchConfig c{};
        c.gridDimX = c.gridDimY = c.gridDimZ = 1;
        c.blockDimX = c.blockDimY = c.blockDimZ = 1;
        c.hStream = s;
        SIM_CHECK(cu.cuLaunchKernelEx(&c, add, nullptr, extra));
      } else {
        SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));
      }
      buffer[0] = buffer[1] = w;  // right after the call
      buffer[2] = 999;
    } else {
      SIM_CHECK(cu.cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      to = from = w;
      kv = 999;
    }
    m.add(y, x, kk);
    SIM_CHECK(simtest::launchAdd(cu, add, x, y, 1, s));
    m.add(x, y, 1);
    if (i % 2 == 1 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      m.check(i);
    }
  }
}

// Four layers a step, each the same 10 ops (kernels, a device copy, a memset)
// on its own buffers: one graph replayed four times back to back with other
// values, the step synchronized every other step.
void layers(const simtest::DriverApi& cu, CUfunction add, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Shadow m;
  CUdeviceptr act[5], wt[4], tmp[4];
  for (int l = 0; l < 5; ++l) {
    act[l] = simtest::zeroedBuffer(cu);
    m.track(act[l], 64, ("act" + std::to_string(l)).c_str());
  }
  for (int l = 0; l < 4; ++l) {
    wt[l] = simtest::zeroedBuffer(cu);
    tmp[l] = simtest::zeroedBuffer(cu);
    m.track(wt[l], 64, ("wt" + std::to_string(l)).c_str());
    m.track(tmp[l], 64, ("tmp" + std::to_string(l)).c_str());
  }
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(simtest::launchAdd(cu, add, act[0], act[0], uint64_t(i) + 1, s));
    m.add(act[0], act[0], uint64_t(i) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint64_t k = uint64_t(l + 1) * 1000 + uint64_t(i) * (irregular(i, 100 + uint64_t(l)) ? 3 : 1);
      SIM_CHECK(simtest::launchAdd(cu, add, wt[l], wt[l], uint64_t(l) + 1, s));
      m.add(wt[l], wt[l], uint64_t(l) + 1);
      SIM_CHECK(simtest::launchAdd(cu, add, tmp[l], act[l], k, s));
      m.add(tmp[l], act[l], k);
      SIM_CHECK(cu.cuMemsetD32Async(tmp[l] + 8, unsigned(i * 4 + l), 2, s));
      m.set(tmp[l] + 8, 0, unsigned(i * 4 + l), 4, 2, 1);
      for (int c = 0; c < 5; ++c) {
        SIM_CHECK(simtest::launchAdd(cu, add, tmp[l], tmp[l], 1, s));
        m.add(tmp[l], tmp[l], 1);
      }
      SIM_CHECK(cu.cuMemcpyDtoDAsync(act[l + 1], tmp[l], 16, s));
      m.copy(act[l + 1], tmp[l], 16);
      SIM_CHECK(simtest::launchAdd(cu, add, act[l + 1], wt[l], 0, s));  // act = wt (over the copied word; the memset word stays)
      m.add(act[l + 1], wt[l], 0);
      g_provoked += irregular(i, 100 + uint64_t(l));
    }
    if (i % 2 == 1 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      m.check(i);
    }
  }
}

// Two streams a and b. a: gate; x += 1. b: y += 3 (three kernels); record
// F, b's last op (graft issues such a record after b's tail wait). With
// `joined`, a first records E and b waits on it, and a waits on F after the
// gate (the graph forks from and joins into a). The host synchronizes F (not
// behind the gate eagerly), reads y, opens the gate; F alternates with G on
// irregular steps.
void tailRecordGate(const simtest::DriverApi& cu, CUfunction add, CUfunction gate, int steps, bool joined) {
  CUstream a, b;
  SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent E, F, G;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&G, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu),
                    z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    const CUevent R = irregular(i, 110) ? G : F;
    g_provoked += R == G;
    if (joined) {
      SIM_CHECK(simtest::launchAdd(cu, add, z, z, 1, a));
      SIM_CHECK(cu.cuEventRecord(E, a));
      SIM_CHECK(cu.cuStreamWaitEvent(b, E, 0));
    }
    SIM_CHECK(simtest::launchAdd(cu, gate, flag, flag, uint64_t(i + 1), a));
    SIM_CHECK(simtest::launchAdd(cu, add, x, x, 1, a));
    ++hx;
    for (int c = 0; c < 3; ++c) SIM_CHECK(simtest::launchAdd(cu, add, y, y, 1, b));
    hy += 3;
    SIM_CHECK(cu.cuEventRecord(R, b));
    if (joined) {
      SIM_CHECK(cu.cuStreamWaitEvent(a, R, 0));
      SIM_CHECK(simtest::launchAdd(cu, add, z, y, 0, a));
    }
    SIM_CHECK(cu.cuEventSynchronize(R));  // eagerly not behind the gate
    expectValue(peek(y), hy, "y after the record", i);
    poke(flag, uint64_t(i + 1));
    SIM_CHECK(cu.cuCtxSynchronize());
    expectValue(peek(x), hx, "x", i);
    if (joined) expectValue(peek(z), hy, "z", i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review6_patching", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review6_patching", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_review6");
  CUfunction gate = simtest::libraryKernel3("sim_gate_review6");
  if (mode == "same-kernel-many") sameKernelMany(cu, add, steps);
  else if (mode == "byte-diffs") byteDiffs(cu, add, steps);
  else if (mode == "rewrite-after") rewriteAfter(cu, add, steps);
  else if (mode == "copy-set-values") copySetValues(cu, ctx, add, steps);
  else if (mode == "pinned-memset") pinnedMemset(cu, add, steps, false);
  else if (mode == "pinned-2d-memset") pinnedMemset(cu, add, steps, true);
  else if (mode == "copy-kind-switch") copyKindSwitch(cu, ctx, add, steps);
  else if (mode == "overlap-replays") overlapReplays(cu, ctx, add, steps);
  else if (mode == "record-refused-gate") recordRefusedGate(cu, add, gate, steps);
  else if (mode == "wait-refused-gate") waitRefusedGate(cu, add, gate, steps);
  else if (mode == "record-swap-gate") recordSwapGate(cu, add, gate, steps);
  else if (mode == "attrs-change") attrsChange(cu, add, steps);
  else if (mode == "extra-alternating") extraAlternating(cu, add, steps);
  else if (mode == "layers") layers(cu, add, steps);
  else if (mode == "tail-record-gate") tailRecordGate(cu, add, gate, steps, false);
  else if (mode == "tail-record-joined-gate") tailRecordGate(cu, add, gate, steps, true);
  else {
    std::printf("usage: sim_review6_patching --mode same-kernel-many|byte-diffs|rewrite-after|copy-set-values|"
                "pinned-memset|pinned-2d-memset|copy-kind-switch|overlap-replays|record-refused-gate|wait-refused-gate|"
                "record-swap-gate|attrs-change|extra-alternating|layers|tail-record-gate|tail-record-joined-gate [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
