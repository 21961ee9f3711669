// sim_fake_test.cc - unit tests of the simulated driver's semantics (no graft).
//
// Invariants checked: cuGetProcAddress versioning and per-thread variants, kernel
// handle families, parameter packing, lazy execution, legacy-stream implicit
// ordering, event binding, capture rules, exec updates, failure injection, memory
// classification. All tests share one process-wide simulator; each uses its own
// streams and ends every capture it begins.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

simtest::Driver& drv() {
  static simtest::Driver* d = [] {
    auto* p = new simtest::Driver();
    std::string err;
    if (!simtest::loadDriver(p, &err)) {
      ADD_FAILURE() << err;
      std::abort();
    }
    CUcontext ctx;
    p->plain.cuInit(0);
    p->plain.cuDevicePrimaryCtxRetain(&ctx, 0);
    p->plain.cuCtxSetCurrent(ctx);
    return p;
  }();
  return *d;
}

const simtest::DriverApi& api() { return drv().plain; }

void setCurrent() {
  CUcontext ctx;
  api().cuDevicePrimaryCtxRetain(&ctx, 0);
  api().cuCtxSetCurrent(ctx);
}

CUfunction addKernel(SimKernelFamily fam = SIM_KERNEL_LIBRARY) {
  const size_t sizes[] = {8, 8, 8, 8};
  return simKernelCreate("sim_add_test", fam, 4, sizes, nullptr);
}

CUresult launchAdd(CUfunction k, CUstream s, CUdeviceptr dst, CUdeviceptr src, uint64_t add, uint64_t tag = 0) {
  void* args[] = {&dst, &src, &add, &tag};
  return api().cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr);
}

std::vector<SimEffect> traceSince(size_t from) {
  std::vector<SimEffect> v;
  for (size_t i = from; i < simTraceSize(); ++i) {
    SimEffect e;
    simTraceGet(i, &e);
    v.push_back(e);
  }
  return v;
}

struct Steps {
  explicit Steps(unsigned n) { simSetMaxSteps(n); }
  ~Steps() { simSetMaxSteps(3); }
};

TEST(SimProcs, VersionsAndVariants) {
  auto gp = drv().getProcAddress;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CUdriverProcAddressQueryResult st;
  ASSERT_EQ(gp("cuStreamGetCaptureInfo", &a, 11030, 0, &st), CUDA_SUCCESS);
  ASSERT_EQ(gp("cuStreamGetCaptureInfo", &b, 12030, 0, &st), CUDA_SUCCESS);
  ASSERT_EQ(gp("cuStreamGetCaptureInfo", &c, 10010, 0, &st), CUDA_SUCCESS);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
  void* ab = nullptr;
  ASSERT_EQ(gp("cuStreamGetCaptureInfo", &ab, 12020, 0, &st), CUDA_SUCCESS);
  EXPECT_EQ(ab, a);  // highest ABI <= requested
  void *pl = nullptr, *pt = nullptr;
  gp("cuLaunchKernel", &pl, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st);
  gp("cuLaunchKernel", &pt, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
  EXPECT_NE(pl, pt);
  gp("cuInit", &pl, 12000, 0, &st);
  gp("cuInit", &pt, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st);
  EXPECT_EQ(pl, pt);
  void *self12 = nullptr, *self11 = nullptr;
  gp("cuGetProcAddress", &self12, 12000, 0, &st);
  gp("cuGetProcAddress", &self11, 11030, 0, &st);
  EXPECT_EQ(self12, reinterpret_cast<void*>(gp));
  EXPECT_NE(self11, self12);
  EXPECT_EQ(gp("cuNoSuchThing", &a, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(gp("cuLaunchKernelEx", &a, 11000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  void *g10 = nullptr, *g12 = nullptr;
  gp("cuGraphInstantiate", &g10, 10000, 0, &st);
  gp("cuGraphInstantiate", &g12, 12000, 0, &st);
  EXPECT_NE(g10, g12);
  void* wf = nullptr;
  gp("cuGraphInstantiateWithFlags", &wf, 12000, 0, &st);
  EXPECT_EQ(g12, wf);
}

TEST(SimKernels, Families) {
  setCurrent();
  const size_t sizes[] = {4, 8, 1, 16};
  CUfunction lib = simKernelCreate("libk", SIM_KERNEL_LIBRARY, 4, sizes, nullptr);
  CUfunction fn = simKernelCreate("fnk", SIM_KERNEL_FUNCTION, 4, sizes, nullptr);
  CUfunction op = simKernelCreate("opk", SIM_KERNEL_OPAQUE, 4, sizes, nullptr);
  size_t off = 0, sz = 0;
  EXPECT_EQ(api().cuKernelGetParamInfo(reinterpret_cast<CUkernel>(lib), 1, &off, &sz), CUDA_SUCCESS);
  EXPECT_EQ(off, 8u);
  EXPECT_EQ(sz, 8u);
  EXPECT_EQ(api().cuKernelGetParamInfo(reinterpret_cast<CUkernel>(lib), 3, &off, &sz), CUDA_SUCCESS);
  EXPECT_EQ(off, 24u);  // 1-byte param at 16, 16-byte param aligned to 8
  EXPECT_EQ(api().cuKernelGetParamInfo(reinterpret_cast<CUkernel>(lib), 4, &off, &sz), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(api().cuFuncGetParamInfo(lib, 0, &off, &sz), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(api().cuFuncGetParamInfo(fn, 0, &off, &sz), CUDA_SUCCESS);
  EXPECT_EQ(api().cuKernelGetParamInfo(reinterpret_cast<CUkernel>(fn), 0, &off, &sz), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(api().cuFuncGetParamInfo(op, 0, &off, &sz), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(api().cuKernelGetParamInfo(reinterpret_cast<CUkernel>(op), 0, &off, &sz), CUDA_ERROR_INVALID_HANDLE);
  const char* name = nullptr;
  EXPECT_EQ(api().cuKernelGetName(&name, reinterpret_cast<CUkernel>(lib)), CUDA_SUCCESS);
  EXPECT_STREQ(name, "libk");
  EXPECT_EQ(api().cuFuncGetName(&name, lib), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(api().cuFuncGetName(&name, fn), CUDA_SUCCESS);
  EXPECT_EQ(api().cuFuncGetName(&name, op), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(api().cuKernelGetName(&name, reinterpret_cast<CUkernel>(op)), CUDA_ERROR_INVALID_HANDLE);
}

TEST(SimLaunch, ParamsPackedAndExtraEquivalent) {
  setCurrent();
  const size_t sizes[] = {4, 8, 2};
  CUfunction k = simKernelCreate("packk", SIM_KERNEL_FUNCTION, 3, sizes, nullptr);
  uint32_t a = 0x11223344;
  uint64_t b = 0x5566778899aabbccull;
  uint16_t c = 0xddee;
  void* args[] = {&a, &b, &c};
  size_t before = simTraceSize();
  ASSERT_EQ(api().cuLaunchKernel(k, 2, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr), CUDA_SUCCESS);
  unsigned char buf[18];
  std::memset(buf, 0xab, sizeof buf);  // garbage padding must not matter
  std::memcpy(buf, &a, 4);
  std::memcpy(buf + 8, &b, 8);
  std::memcpy(buf + 16, &c, 2);
  size_t size = sizeof buf;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  ASSERT_EQ(api().cuLaunchKernel(k, 2, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  EXPECT_EQ(api().cuLaunchKernel(k, 0, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(api().cuLaunchKernel(k, 1, 1, 1, 64, 1, 1, 0, nullptr, args, extra), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
  auto t = traceSince(before);
  ASSERT_EQ(t.size(), 2u);
  ASSERT_EQ(t[0].paramBytes, 18u);
  EXPECT_EQ(std::memcmp(t[0].params, t[1].params, 18), 0);
  EXPECT_EQ(t[0].params[5], 0);  // padding zeroed
  EXPECT_EQ(t[0].stream, CU_STREAM_LEGACY);
}

TEST(SimLaunch, ExAttributesAndCooperative) {
  setCurrent();
  CUfunction k = addKernel();
  CUdeviceptr d;
  ASSERT_EQ(api().cuMemAlloc(&d, 64), CUDA_SUCCESS);
  uint64_t add = 1, tag = 0;
  void* args[] = {&d, &d, &add, &tag};
  CUlaunchAttribute attrs[2];
  std::memset(attrs, 0, sizeof attrs);
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[0].value.clusterDim.x = 2;
  attrs[0].value.clusterDim.y = 1;
  attrs[0].value.clusterDim.z = 1;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attrs[1].value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 32;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  size_t before = simTraceSize();
  ASSERT_EQ(api().cuLaunchKernelEx(&cfg, k, args, nullptr), CUDA_SUCCESS);
  cfg.attrs = nullptr;
  EXPECT_EQ(api().cuLaunchKernelEx(&cfg, k, args, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api().cuLaunchCooperativeKernel(k, 1, 1, 1, 32, 1, 1, 0, nullptr, args), CUDA_SUCCESS);
  ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
  auto t = traceSince(before);
  ASSERT_EQ(t.size(), 2u);
  ASSERT_EQ(t[0].numAttrs, 2u);
  EXPECT_EQ(t[0].attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(t[0].attrs[0].value.clusterDim.x, 2u);
  ASSERT_EQ(t[1].numAttrs, 1u);
  EXPECT_EQ(t[1].attrs[0].id, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
  api().cuMemFree(d);
}

TEST(SimExec, LazyAndEffects) {
  setCurrent();
  Steps steps(0);
  CUfunction k = addKernel();
  CUdeviceptr d;
  ASSERT_EQ(api().cuMemAlloc(&d, 16), CUDA_SUCCESS);
  uint64_t init[2] = {5, 0};
  ASSERT_EQ(api().cuMemcpyHtoD(d, init, 16), CUDA_SUCCESS);
  CUstream s;
  ASSERT_EQ(api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  size_t before = simTraceSize();
  ASSERT_EQ(launchAdd(k, s, d + 8, d, 10), CUDA_SUCCESS);
  EXPECT_EQ(simTraceSize(), before);  // nothing runs at enqueue
  ASSERT_EQ(api().cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(simTraceSize(), before + 1);
  uint64_t out[2];
  ASSERT_EQ(api().cuMemcpyDtoH(out, d, 16), CUDA_SUCCESS);
  EXPECT_EQ(out[1], 15u);
  api().cuStreamDestroy(s);
  api().cuMemFree(d);
}

TEST(SimExec, LegacyImplicitOrdering) {
  setCurrent();
  Steps steps(0);
  CUfunction k = addKernel();
  CUdeviceptr d;
  ASSERT_EQ(api().cuMemAlloc(&d, 16), CUDA_SUCCESS);
  CUstream blocking, nonblocking;
  api().cuStreamCreate(&blocking, 0);
  api().cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING);
  for (int rep = 0; rep < 20; ++rep) {
    simSetSeed(rep + 1);
    size_t before = simTraceSize();
    ASSERT_EQ(launchAdd(k, blocking, d, d, 1, 1), CUDA_SUCCESS);
    ASSERT_EQ(launchAdd(k, nullptr, d, d, 1, 2), CUDA_SUCCESS);   // legacy: after blocking
    ASSERT_EQ(launchAdd(k, blocking, d, d, 1, 3), CUDA_SUCCESS);  // blocking: after legacy
    ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
    auto t = traceSince(before);
    ASSERT_EQ(t.size(), 3u);
    uint64_t tags[3];
    for (int i = 0; i < 3; ++i) std::memcpy(&tags[i], t[i].params + 24, 8);
    EXPECT_EQ(tags[0], 1u);
    EXPECT_EQ(tags[1], 2u);
    EXPECT_EQ(tags[2], 3u);
  }
  // Non-blocking streams are not ordered with the legacy stream: both orders occur.
  bool sawReorder = false;
  for (int rep = 0; rep < 40 && !sawReorder; ++rep) {
    simSetSeed(100 + rep);
    size_t before = simTraceSize();
    launchAdd(k, nullptr, d, d, 1, 1);
    launchAdd(k, nonblocking, d + 8, d + 8, 1, 2);
    api().cuCtxSynchronize();
    auto t = traceSince(before);
    uint64_t first;
    std::memcpy(&first, t[0].params + 24, 8);
    sawReorder = first == 2;
  }
  EXPECT_TRUE(sawReorder);
  api().cuStreamDestroy(blocking);
  api().cuStreamDestroy(nonblocking);
  api().cuMemFree(d);
}

TEST(SimExec, EventWaitBindsToLatestRecordAtCallTime) {
  setCurrent();
  Steps steps(0);
  CUfunction k = addKernel();
  CUdeviceptr d;
  api().cuMemAlloc(&d, 16);
  CUstream a, b;
  api().cuStreamCreate(&a, CU_STREAM_NON_BLOCKING);
  api().cuStreamCreate(&b, CU_STREAM_NON_BLOCKING);
  CUevent e;
  api().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
  EXPECT_EQ(api().cuStreamWaitEvent(b, e, 0), CUDA_SUCCESS);  // never recorded: no-op
  EXPECT_EQ(api().cuEventQuery(e), CUDA_SUCCESS);
  for (int rep = 0; rep < 20; ++rep) {
    simSetSeed(rep + 7);
    size_t before = simTraceSize();
    launchAdd(k, a, d, d, 1, 1);
    api().cuEventRecord(e, a);
    api().cuStreamWaitEvent(b, e, 0);
    launchAdd(k, a, d, d, 1, 3);  // not covered by the wait
    launchAdd(k, b, d + 8, d + 8, 1, 2);
    api().cuCtxSynchronize();
    auto t = traceSince(before);
    ASSERT_EQ(t.size(), 3u);
    size_t pos1 = 9, pos2 = 9;
    for (size_t i = 0; i < 3; ++i) {
      uint64_t tag;
      std::memcpy(&tag, t[i].params + 24, 8);
      if (tag == 1) pos1 = i;
      if (tag == 2) pos2 = i;
    }
    EXPECT_LT(pos1, pos2);
  }
  api().cuEventDestroy(e);
  api().cuStreamDestroy(a);
  api().cuStreamDestroy(b);
  api().cuMemFree(d);
}

TEST(SimExec, QueryAndPageableCopies) {
  setCurrent();
  Steps steps(0);
  CUdeviceptr d;
  api().cuMemAlloc(&d, 64);
  CUstream s;
  api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  std::vector<uint64_t> host(8, 7), back(8, 0);
  ASSERT_EQ(api().cuMemcpyHtoDAsync(d, host.data(), 64, s), CUDA_SUCCESS);
  host.assign(8, 9);  // staged at the call: the copy still moves 7s
  ASSERT_EQ(api().cuMemcpyDtoHAsync(back.data(), d, 64, s), CUDA_SUCCESS);  // pageable: blocks
  EXPECT_EQ(back[3], 7u);
  EXPECT_EQ(api().cuStreamQuery(s), CUDA_SUCCESS);
  void* pinned;
  ASSERT_EQ(api().cuMemAllocHost(&pinned, 64), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemcpyDtoHAsync(pinned, d, 64, s), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemcpyDtoHAsync(pinned, d, 64, s), CUDA_SUCCESS);
  // With max 0 steps per call, a query still advances one step.
  int polls = 0;
  while (api().cuStreamQuery(s) == CUDA_ERROR_NOT_READY) ++polls;
  EXPECT_GE(polls, 1);
  unsigned type = 0;
  EXPECT_EQ(api().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(api().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(pinned)),
            CUDA_SUCCESS);
  EXPECT_EQ(type, CU_MEMORYTYPE_HOST);
  EXPECT_EQ(
      api().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(host.data())),
      CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api().cuMemHostRegister(host.data(), 64, 0), CUDA_SUCCESS);
  EXPECT_EQ(api().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        reinterpret_cast<CUdeviceptr>(host.data() + 2)),
            CUDA_SUCCESS);
  EXPECT_EQ(type, CU_MEMORYTYPE_HOST);
  EXPECT_EQ(api().cuMemHostUnregister(host.data()), CUDA_SUCCESS);
  CUdeviceptr base;
  size_t size;
  EXPECT_EQ(api().cuMemGetAddressRange(&base, &size, d + 10), CUDA_SUCCESS);
  EXPECT_EQ(base, d);
  EXPECT_EQ(size, 64u);
  api().cuMemFreeHost(pinned);
  api().cuStreamDestroy(s);
  api().cuMemFree(d);
}

struct HostProbe {
  const simtest::DriverApi* api;
  CUresult inner = CUDA_SUCCESS;
  int runs = 0;
};

void CUDA_CB hostProbe(void* p) {
  auto* h = static_cast<HostProbe*>(p);
  ++h->runs;
  h->inner = h->api->cuCtxSynchronize();
}

TEST(SimExec, HostFunctionsRunWithoutApiAccess) {
  setCurrent();
  HostProbe probe{&api()};
  CUstream s;
  api().cuStreamCreate(&s, 0);
  ASSERT_EQ(api().cuLaunchHostFunc(s, hostProbe, &probe), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(probe.runs, 1);
  EXPECT_EQ(probe.inner, CUDA_ERROR_NOT_PERMITTED);
  api().cuStreamDestroy(s);
}

TEST(SimCapture, ForkJoinInfoAndReplay) {
  setCurrent();
  CUfunction k = addKernel();
  CUdeviceptr d;
  api().cuMemAlloc(&d, 32);
  api().cuMemsetD8(d, 0, 32);
  CUstream a, b;
  api().cuStreamCreate(&a, CU_STREAM_NON_BLOCKING);
  api().cuStreamCreate(&b, CU_STREAM_NON_BLOCKING);
  CUevent fork, join;
  api().cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING);
  api().cuEventCreate(&join, CU_EVENT_DISABLE_TIMING);
  ASSERT_EQ(api().cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(launchAdd(k, a, d, d, 1, 1), CUDA_SUCCESS);
  CUstreamCaptureStatus status;
  cuuint64_t id;
  CUgraph g;
  const CUgraphNode* deps;
  size_t ndeps;
  ASSERT_EQ(api().cuStreamGetCaptureInfo(a, &status, &id, &g, &deps, nullptr, &ndeps), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_EQ(ndeps, 1u);
  CUgraphNode first = deps[0];
  CUgraphNodeType type;
  ASSERT_EQ(api().cuGraphNodeGetType(first, &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_KERNEL);
  api().cuEventRecord(fork, a);
  ASSERT_EQ(api().cuStreamWaitEvent(b, fork, 0), CUDA_SUCCESS);  // b joins
  ASSERT_EQ(api().cuStreamIsCapturing(b, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_EQ(launchAdd(k, b, d + 8, d, 1, 2), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemsetD32Async(d + 16, 7, 2, a), CUDA_SUCCESS);
  api().cuEventRecord(join, b);
  CUgraph out = nullptr;
  // Unjoined fork: end capture fails.
  {
    CUstream c;
    api().cuStreamCreate(&c, CU_STREAM_NON_BLOCKING);
    ASSERT_EQ(api().cuStreamBeginCapture(c, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CUevent f2;
    api().cuEventCreate(&f2, CU_EVENT_DISABLE_TIMING);
    launchAdd(k, c, d, d, 1, 9);
    api().cuEventRecord(f2, c);
    CUstream c2;
    api().cuStreamCreate(&c2, CU_STREAM_NON_BLOCKING);
    api().cuStreamWaitEvent(c2, f2, 0);
    launchAdd(k, c2, d, d, 1, 9);
    EXPECT_EQ(api().cuStreamEndCapture(c, &out), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    EXPECT_EQ(out, nullptr);
    EXPECT_EQ(api().cuStreamIsCapturing(c2, &status), CUDA_SUCCESS);
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
    api().cuEventDestroy(f2);
    api().cuStreamDestroy(c);
    api().cuStreamDestroy(c2);
  }
  ASSERT_EQ(api().cuStreamWaitEvent(a, join, 0), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamEndCapture(a, &out), CUDA_SUCCESS);
  size_t n = 0;
  ASSERT_EQ(api().cuGraphGetNodes(out, nullptr, &n), CUDA_SUCCESS);
  EXPECT_EQ(n, 3u);
  CUgraphExec ex;
  ASSERT_EQ(api().cuGraphInstantiateWithFlags(&ex, out, 0), CUDA_SUCCESS);
  size_t before = simTraceSize();
  ASSERT_EQ(api().cuGraphLaunch(ex, a), CUDA_SUCCESS);
  // Patch the first kernel: only future launches see it.
  CUDA_KERNEL_NODE_PARAMS kp;
  ASSERT_EQ(api().cuGraphKernelNodeGetParams(first, &kp), CUDA_SUCCESS);
  uint64_t add = 100, tag = 5;
  CUdeviceptr dd = d, ss = d;
  void* args[] = {&dd, &ss, &add, &tag};
  kp.kernelParams = args;
  ASSERT_EQ(api().cuGraphExecKernelNodeSetParams(ex, first, &kp), CUDA_SUCCESS);
  ASSERT_EQ(api().cuGraphLaunch(ex, a), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS other = kp;
  other.func = simKernelCreate("sim_add_other", SIM_KERNEL_LIBRARY, 4, std::vector<size_t>(4, 8).data(), nullptr);
  EXPECT_EQ(api().cuGraphExecKernelNodeSetParams(ex, first, &other), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(api().cuStreamSynchronize(a), CUDA_SUCCESS);
  auto t = traceSince(before);
  ASSERT_EQ(t.size(), 6u);
  std::vector<uint64_t> kernelTags;
  for (auto& e : t) {
    EXPECT_EQ(e.origin, SIM_ORIGIN_GRAPH);
    if (e.kind == SIM_EFFECT_KERNEL) {
      uint64_t tg;
      std::memcpy(&tg, e.params + 24, 8);
      kernelTags.push_back(tg);
    }
  }
  // Launch 1: tags {1,2}; launch 2: {5,2}; launches of one exec never overlap.
  ASSERT_EQ(kernelTags.size(), 4u);
  EXPECT_TRUE((kernelTags[0] == 1 && kernelTags[1] == 2) || (kernelTags[0] == 2 && kernelTags[1] == 1));
  EXPECT_TRUE(kernelTags[2] == 5 || kernelTags[3] == 5);
  SimCounters c;
  simCounters(&c);
  EXPECT_GE(c.execNodeParamUpdates, 1u);
  api().cuGraphExecDestroy(ex);
  api().cuGraphDestroy(out);
  api().cuEventDestroy(fork);
  api().cuEventDestroy(join);
  api().cuStreamDestroy(a);
  api().cuStreamDestroy(b);
  api().cuMemFree(d);
}

TEST(SimCapture, IllegalOperationsInvalidate) {
  setCurrent();
  CUstream s;
  api().cuStreamCreate(&s, 0);  // blocking
  CUfunction k = addKernel();
  CUdeviceptr d;
  api().cuMemAlloc(&d, 16);
  ASSERT_EQ(api().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(launchAdd(k, nullptr, d, d, 1), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);  // legacy vs blocking capture
  CUgraph g = nullptr;
  EXPECT_EQ(api().cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT_EQ(api().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(api().cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(launchAdd(k, s, d, d, 1), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(api().cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // Global mode: another thread's cuMemAlloc is refused; relaxed mode allows it.
  ASSERT_EQ(api().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  CUresult other = CUDA_SUCCESS;
  std::thread([&] {
    setCurrent();
    CUdeviceptr p;
    other = api().cuMemAlloc(&p, 16);
  }).join();
  EXPECT_EQ(other, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(api().cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT_EQ(api().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  std::thread([&] {
    setCurrent();
    CUdeviceptr p;
    other = api().cuMemAlloc(&p, 16);
    if (other == CUDA_SUCCESS) api().cuMemFree(p);
  }).join();
  EXPECT_EQ(other, CUDA_SUCCESS);
  EXPECT_EQ(launchAdd(k, s, d, d, 1), CUDA_SUCCESS);
  EXPECT_EQ(api().cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  api().cuGraphDestroy(g);
  api().cuStreamDestroy(s);
  api().cuMemFree(d);
}

TEST(SimCapture, ExecSetterRules) {
  setCurrent();
  CUstream s;
  api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUdeviceptr d;
  api().cuMemAlloc(&d, 256);
  ASSERT_EQ(api().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  api().cuMemsetD32Async(d, 1, 4, s);
  api().cuMemcpyDtoDAsync(d + 64, d, 16, s);
  CUgraph g;
  ASSERT_EQ(api().cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  CUgraphNode nodes[2];
  size_t n = 2;
  api().cuGraphGetNodes(g, nodes, &n);
  CUgraphExec ex;
  api().cuGraphInstantiateWithFlags(&ex, g, 0);
  CUDA_MEMSET_NODE_PARAMS mp;
  ASSERT_EQ(api().cuGraphMemsetNodeGetParams(nodes[0], &mp), CUDA_SUCCESS);
  mp.dst = d + 128;
  EXPECT_EQ(api().cuGraphExecMemsetNodeSetParams(ex, nodes[0], &mp, nullptr), CUDA_SUCCESS);
  mp.height = 2;
  mp.pitch = 64;
  EXPECT_EQ(api().cuGraphExecMemsetNodeSetParams(ex, nodes[0], &mp, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D cp;
  ASSERT_EQ(api().cuGraphMemcpyNodeGetParams(nodes[1], &cp), CUDA_SUCCESS);
  EXPECT_EQ(cp.srcMemoryType, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(cp.WidthInBytes, 16u);
  EXPECT_EQ(cp.Height, 1u);
  cp.dstDevice = d + 96;
  EXPECT_EQ(api().cuGraphExecMemcpyNodeSetParams(ex, nodes[1], &cp, nullptr), CUDA_SUCCESS);
  std::vector<char> pageable(16);
  cp.dstMemoryType = CU_MEMORYTYPE_HOST;
  cp.dstHost = pageable.data();
  EXPECT_EQ(api().cuGraphExecMemcpyNodeSetParams(ex, nodes[1], &cp, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(api().cuGraphExecMemcpyNodeSetParams(ex, nodes[0], &cp, nullptr), CUDA_ERROR_INVALID_VALUE);
  size_t before = simTraceSize();
  api().cuGraphLaunch(ex, s);
  api().cuStreamSynchronize(s);
  auto t = traceSince(before);
  ASSERT_EQ(t.size(), 2u);
  for (auto& e : t) {
    if (e.kind == SIM_EFFECT_MEMSET) {
      EXPECT_EQ(e.dst, d + 128);
    }
    if (e.kind == SIM_EFFECT_MEMCPY) {
      EXPECT_EQ(e.dst, d + 96);
    }
  }
  api().cuGraphExecDestroy(ex);
  api().cuGraphDestroy(g);
  api().cuStreamDestroy(s);
  api().cuMemFree(d);
}

TEST(SimInject, NthCallFails) {
  setCurrent();
  CUstream s;
  api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  simInjectFailure("cuStreamSynchronize", 2, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(api().cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(api().cuStreamSynchronize(s), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(api().cuStreamSynchronize(s), CUDA_SUCCESS);
  simInjectFailure("cuStreamBeginCapture", 1, CUDA_ERROR_UNKNOWN);  // base name matches _v2
  EXPECT_EQ(api().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_UNKNOWN);
  CUstreamCaptureStatus st;
  api().cuStreamIsCapturing(s, &st);
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_NONE);
  SimCounters c;
  simCounters(&c);
  EXPECT_GE(c.injectedFailures, 2u);
  api().cuStreamDestroy(s);
}

TEST(SimStreams, PerThreadVariantAndIds) {
  setCurrent();
  const simtest::DriverApi& pt = drv().perThread;
  uint64_t legacyId = simStreamId(nullptr, 0), ptId = simStreamId(nullptr, 1);
  EXPECT_NE(legacyId, ptId);
  EXPECT_EQ(simStreamId(CU_STREAM_PER_THREAD, 0), ptId);
  unsigned long long id = 0;
  ASSERT_EQ(pt.cuStreamGetId(nullptr, &id), CUDA_SUCCESS);
  EXPECT_EQ(id, ptId);
  ASSERT_EQ(api().cuStreamGetId(nullptr, &id), CUDA_SUCCESS);
  EXPECT_EQ(id, legacyId);
  uint64_t otherThread = 0;
  std::thread([&] { otherThread = simStreamId(CU_STREAM_PER_THREAD, 0); }).join();
  EXPECT_NE(otherThread, ptId);
  CUfunction k = addKernel();
  CUdeviceptr d;
  api().cuMemAlloc(&d, 8);
  uint64_t add = 1, tag = 0;
  void* args[] = {&d, &d, &add, &tag};
  size_t before = simTraceSize();
  ASSERT_EQ(pt.cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(pt.cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  auto t = traceSince(before);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].streamId, ptId);
  EXPECT_EQ(t[0].stream, CU_STREAM_PER_THREAD);
  api().cuMemFree(d);
}

}  // namespace

namespace {

// Several devices (SIM_DEVICES, default 2): per-context legacy streams, streams and
// events bound to their context, per-context synchronization, one-context graphs.
TEST(SimContexts, PerDeviceStreamsEventsAndGraphs) {
  setCurrent();
  int n = 0;
  ASSERT_EQ(api().cuDeviceGetCount(&n), CUDA_SUCCESS);
  if (n < 2) GTEST_SKIP() << "one device";
  CUcontext c0, c1;
  ASSERT_EQ(api().cuDevicePrimaryCtxRetain(&c0, 0), CUDA_SUCCESS);
  ASSERT_EQ(api().cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
  ASSERT_NE(c0, c1);
  using GetDeviceFn = CUresult (*)(CUdevice*);
  using PushFn = CUresult (*)(CUcontext);
  using PopFn = CUresult (*)(CUcontext*);
  GetDeviceFn getDevice = nullptr;
  PushFn push = nullptr;
  PopFn pop = nullptr;
  CUdriverProcAddressQueryResult q;
  ASSERT_EQ(drv().getProcAddress("cuCtxGetDevice", reinterpret_cast<void**>(&getDevice), 2000, 0, &q), CUDA_SUCCESS);
  ASSERT_EQ(drv().getProcAddress("cuCtxPushCurrent", reinterpret_cast<void**>(&push), 4000, 0, &q), CUDA_SUCCESS);
  ASSERT_EQ(drv().getProcAddress("cuCtxPopCurrent", reinterpret_cast<void**>(&pop), 4000, 0, &q), CUDA_SUCCESS);

  const uint64_t legacy0 = simStreamId(nullptr, 0);
  ASSERT_EQ(push(c1), CUDA_SUCCESS);
  CUdevice dev = -1;
  ASSERT_EQ(getDevice(&dev), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);
  const uint64_t legacy1 = simStreamId(nullptr, 0);
  EXPECT_NE(legacy0, legacy1);
  EXPECT_NE(simStreamId(nullptr, 1), simStreamId(nullptr, 0));

  CUfunction k = addKernel();
  CUdeviceptr d;
  ASSERT_EQ(api().cuMemAlloc(&d, 64), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemsetD32(d, 0, 16), CUDA_SUCCESS);
  CUstream s1;
  ASSERT_EQ(api().cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUcontext sc = nullptr;
  ASSERT_EQ(api().cuStreamGetCtx(s1, &sc), CUDA_SUCCESS);
  EXPECT_EQ(sc, c1);
  CUevent e1;
  ASSERT_EQ(api().cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  size_t from = simTraceSize();
  {
    Steps none(0);
    ASSERT_EQ(launchAdd(k, nullptr, d, d, 1), CUDA_SUCCESS);  // device 1's legacy stream
    ASSERT_EQ(launchAdd(k, s1, d + 8, d + 8, 1), CUDA_SUCCESS);
    CUcontext popped = nullptr;
    ASSERT_EQ(pop(&popped), CUDA_SUCCESS);
    EXPECT_EQ(popped, c1);
    ASSERT_EQ(getDevice(&dev), CUDA_SUCCESS);
    EXPECT_EQ(dev, 0);
    // Kernels cannot go to another context's stream; events record in their own.
    EXPECT_EQ(launchAdd(k, s1, d, d, 1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(api().cuEventRecord(e1, nullptr), CUDA_ERROR_INVALID_HANDLE);
    // Device 0's synchronization does not wait for device 1's work.
    ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(simTraceSize(), from);
    ASSERT_EQ(api().cuCtxSetCurrent(c1), CUDA_SUCCESS);
    ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
  }
  auto t = traceSince(from);
  ASSERT_EQ(t.size(), 2u);
  for (const SimEffect& e : t) {
    EXPECT_EQ(e.device, 1);
    EXPECT_EQ(e.context, c1);
  }
  EXPECT_EQ(t[0].streamId == legacy1 ? t[1].streamId : t[0].streamId, simStreamId(s1, 0));

  // A capture stays within one context; an exec launches only in its own.
  ASSERT_EQ(api().cuCtxSetCurrent(c0), CUDA_SUCCESS);
  CUstream s0;
  CUevent e0;
  ASSERT_EQ(api().cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(api().cuEventCreate(&e0, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(api().cuEventRecord(e0, s0), CUDA_SUCCESS);
  EXPECT_EQ(api().cuStreamWaitEvent(s1, e0, 0), CUDA_ERROR_INVALID_CONTEXT);
  CUgraph g = nullptr;
  EXPECT_EQ(api().cuStreamEndCapture(s0, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ASSERT_EQ(api().cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(launchAdd(k, s0, d + 16, d + 16, 1), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamEndCapture(s0, &g), CUDA_SUCCESS);
  CUgraphExec ex;
  ASSERT_EQ(api().cuGraphInstantiateWithFlags(&ex, g, 0), CUDA_SUCCESS);
  EXPECT_EQ(api().cuGraphLaunch(ex, s1), CUDA_ERROR_INVALID_VALUE);
  from = simTraceSize();
  ASSERT_EQ(api().cuGraphLaunch(ex, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
  t = traceSince(from);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].device, 0);
  EXPECT_EQ(t[0].streamId, legacy0);
  api().cuGraphExecDestroy(ex);
  api().cuGraphDestroy(g);
  api().cuMemFree(d);
  setCurrent();
}

}  // namespace

namespace {
template <class F>
F proc(const char* name, int version) {
  void* p = nullptr;
  EXPECT_EQ(drv().getProcAddress(name, &p, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, nullptr), CUDA_SUCCESS)
      << name;
  return reinterpret_cast<F>(p);
}
}  // namespace

TEST(SimModules, LoadUnloadReuseAndStaleHandles) {
  setCurrent();
  // ABI versions: nothing below the first version of each entry point.
  void* p = nullptr;
  CUdriverProcAddressQueryResult q;
  EXPECT_EQ(drv().getProcAddress("cuLibraryUnload", &p, 11080, 0, &q), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(q, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  auto load = proc<decltype(&::cuModuleLoadData)>("cuModuleLoadData", 2000);
  auto get = proc<decltype(&::cuModuleGetFunction)>("cuModuleGetFunction", 2000);
  auto unload = proc<decltype(&::cuModuleUnload)>("cuModuleUnload", 2000);
  auto libLoad = proc<decltype(&::cuLibraryLoadData)>("cuLibraryLoadData", 12000);
  auto libGet = proc<decltype(&::cuLibraryGetKernel)>("cuLibraryGetKernel", 12000);
  auto libUnload = proc<decltype(&::cuLibraryUnload)>("cuLibraryUnload", 12000);
  ASSERT_TRUE(load && get && unload && libLoad && libGet && libUnload);

  CUmodule m;
  EXPECT_EQ(load(&m, "not an image"), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(load(&m, "sim-image: k(8,"), CUDA_ERROR_INVALID_IMAGE);
  ASSERT_EQ(load(&m, "sim-image: sim_add_ma(8,8,8,8); other_ma(4)"), CUDA_SUCCESS);
  CUfunction f, f2, g;
  ASSERT_EQ(get(&f, m, "sim_add_ma"), CUDA_SUCCESS);
  ASSERT_EQ(get(&f2, m, "sim_add_ma"), CUDA_SUCCESS);
  EXPECT_EQ(f, f2);
  ASSERT_EQ(get(&g, m, "other_ma"), CUDA_SUCCESS);
  EXPECT_EQ(get(&f2, m, "missing"), CUDA_ERROR_NOT_FOUND);
  size_t off, size;
  ASSERT_EQ(api().cuFuncGetParamInfo(g, 0, &off, &size), CUDA_SUCCESS);
  EXPECT_EQ(size, 4u);
  const char* name;
  ASSERT_EQ(api().cuFuncGetName(&name, f), CUDA_SUCCESS);
  EXPECT_STREQ(name, "sim_add_ma");

  CUdeviceptr d;
  api().cuMemAlloc(&d, 16);
  api().cuMemsetD8(d, 0, 16);
  CUstream s;
  api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  size_t mark = simTraceSize();
  ASSERT_EQ(launchAdd(f, s, d + 8, d, 5, 1), CUDA_SUCCESS);
  // A graph holding f, instantiated before the unload.
  CUgraph graph;
  ASSERT_EQ(api().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(launchAdd(f, s, d + 8, d, 6, 2), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
  CUgraphExec exec;
  ASSERT_EQ(api().cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);

  // Unload waits for the outstanding launch, then the handles are dead.
  ASSERT_EQ(unload(m), CUDA_SUCCESS);
  auto tr = traceSince(mark);
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_STREQ(tr[0].kernelName, "sim_add_ma");
  EXPECT_EQ(launchAdd(f, s, d + 8, d, 5, 1), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(api().cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(unload(m), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(get(&f2, m, "sim_add_ma"), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(api().cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_HANDLE);
  CUgraphExec exec2;
  EXPECT_EQ(api().cuGraphInstantiateWithFlags(&exec2, graph, 0), CUDA_ERROR_INVALID_HANDLE);

  // The next load reuses the freed handle values for other kernels and layouts
  // (a library: CUkernel family).
  CUlibrary lib;
  ASSERT_EQ(libLoad(&lib, "sim-image: k2_lb(2, 8, 1)", nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  CUkernel k;
  ASSERT_EQ(libGet(&k, lib, "k2_lb"), CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<void*>(k), reinterpret_cast<void*>(f));
  ASSERT_EQ(api().cuKernelGetParamInfo(k, 1, &off, &size), CUDA_SUCCESS);
  EXPECT_EQ(off, 8u);
  EXPECT_EQ(size, 8u);
  EXPECT_EQ(api().cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_HANDLE);  // still the old kernel
  uint16_t a = 0x1234;
  uint64_t b = 77;
  uint8_t c = 9;
  void* args[] = {&a, &b, &c};
  mark = simTraceSize();
  ASSERT_EQ(api().cuLaunchKernel(reinterpret_cast<CUfunction>(k), 1, 1, 1, 1, 1, 1, 0, s, args, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(libUnload(lib), CUDA_SUCCESS);
  tr = traceSince(mark);
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_STREQ(tr[0].kernelName, "k2_lb");
  EXPECT_EQ(tr[0].paramBytes, 17u);
  EXPECT_EQ(libUnload(lib), CUDA_ERROR_INVALID_HANDLE);
  api().cuGraphExecDestroy(exec);
  api().cuGraphDestroy(graph);
  api().cuStreamDestroy(s);
  api().cuMemFree(d);
}

// The last release of a primary context ends it, with its streams, events,
// executable graphs and modules; the next retain makes a new context under
// the same handle, and the ended context's stream and event handles are
// given out again (as a real driver may).
TEST(SimContexts, LastPrimaryReleaseEndsTheContext) {
  setCurrent();
  int n = 0;
  ASSERT_EQ(api().cuDeviceGetCount(&n), CUDA_SUCCESS);
  if (n < 2) GTEST_SKIP() << "one device";
  auto getState = proc<decltype(&::cuDevicePrimaryCtxGetState)>("cuDevicePrimaryCtxGetState", 7000);
  auto getId = proc<decltype(&::cuCtxGetId)>("cuCtxGetId", 12000);
  auto load = proc<decltype(&::cuModuleLoadData)>("cuModuleLoadData", 2000);
  auto get = proc<decltype(&::cuModuleGetFunction)>("cuModuleGetFunction", 2000);
  ASSERT_TRUE(getState && getId && load && get);
  CUcontext c1 = nullptr;
  ASSERT_EQ(api().cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
  ASSERT_EQ(api().cuCtxSetCurrent(c1), CUDA_SUCCESS);
  unsigned long long id1 = 0;
  ASSERT_EQ(getId(c1, &id1), CUDA_SUCCESS);
  CUstream s;
  CUevent e;
  ASSERT_EQ(api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(api().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  CUmodule m;
  CUfunction f;
  ASSERT_EQ(load(&m, "sim-image: sim_add_ended(8,8,8)"), CUDA_SUCCESS);
  ASSERT_EQ(get(&f, m, "sim_add_ended"), CUDA_SUCCESS);
  CUdeviceptr d;
  ASSERT_EQ(api().cuMemAlloc(&d, 64), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemsetD8(d, 0, 64), CUDA_SUCCESS);
  CUgraph g;
  ASSERT_EQ(api().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  uint64_t add = 1;
  void* args[] = {&d, &d, &add};
  ASSERT_EQ(api().cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  CUgraphExec ex;
  ASSERT_EQ(api().cuGraphInstantiateWithFlags(&ex, g, 0), CUDA_SUCCESS);
  ASSERT_EQ(api().cuGraphLaunch(ex, s), CUDA_SUCCESS);
  const size_t from = simTraceSize();
  // Release every reference (other tests retained device 1 too): the last one
  // runs the context's work, then ends it.
  unsigned flags = 0;
  int active = 1;
  ASSERT_EQ(api().cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  for (int k = 0; k < 100 && active; ++k) {
    ASSERT_EQ(api().cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    ASSERT_EQ(getState(1, &flags, &active), CUDA_SUCCESS);
  }
  ASSERT_EQ(active, 0);
  EXPECT_EQ(traceSince(from).size(), 1u);  // the graph's kernel ran first
  EXPECT_EQ(api().cuDevicePrimaryCtxRelease(1), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(api().cuCtxSetCurrent(c1), CUDA_ERROR_INVALID_CONTEXT);
  setCurrent();  // device 0's context, for the calls that need one
  EXPECT_EQ(getId(c1, &id1), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(api().cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
  const char* name = nullptr;
  EXPECT_EQ(api().cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);  // its module went with it
  EXPECT_EQ(api().cuGraphExecDestroy(ex), CUDA_ERROR_INVALID_VALUE);
  CUgraphExec ex2;
  EXPECT_EQ(api().cuGraphInstantiateWithFlags(&ex2, g, 0), CUDA_ERROR_INVALID_HANDLE);  // its kernel is gone
  // A new context under the same handle; the ended one's handles come back.
  CUcontext again = nullptr;
  ASSERT_EQ(api().cuDevicePrimaryCtxRetain(&again, 1), CUDA_SUCCESS);
  EXPECT_EQ(again, c1);
  ASSERT_EQ(getState(1, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1);
  unsigned long long id2 = 0;
  ASSERT_EQ(getId(again, &id2), CUDA_SUCCESS);
  EXPECT_NE(id2, id1);
  ASSERT_EQ(api().cuCtxSetCurrent(again), CUDA_SUCCESS);
  // (The ended context also had the streams and events of the test before.)
  std::vector<CUstream> streams(4);
  std::vector<CUevent> events(4);
  for (CUstream& t : streams) ASSERT_EQ(api().cuStreamCreate(&t, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  for (CUevent& t : events) ASSERT_EQ(api().cuEventCreate(&t, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  EXPECT_NE(std::find(streams.begin(), streams.end(), s), streams.end());
  EXPECT_NE(std::find(events.begin(), events.end(), e), events.end());
  CUcontext sc = nullptr;
  ASSERT_EQ(api().cuStreamGetCtx(s, &sc), CUDA_SUCCESS);
  EXPECT_EQ(sc, again);
  for (CUstream t : streams) ASSERT_EQ(api().cuStreamDestroy(t), CUDA_SUCCESS);
  for (CUevent t : events) ASSERT_EQ(api().cuEventDestroy(t), CUDA_SUCCESS);
  api().cuGraphDestroy(g);
  api().cuMemFree(d);
  setCurrent();
}

// A pool's used memory counts a stream-ordered block from its allocation's
// call to its free's call (not until the free runs); the high watermark
// resets to the current value.
TEST(SimMemory, PoolStatisticsChangeAtTheCalls) {
  setCurrent();
  auto getAttr = proc<decltype(&::cuMemPoolGetAttribute)>("cuMemPoolGetAttribute", 11020);
  auto setAttr = proc<decltype(&::cuMemPoolSetAttribute)>("cuMemPoolSetAttribute", 11020);
  auto trim = proc<decltype(&::cuMemPoolTrimTo)>("cuMemPoolTrimTo", 11020);
  ASSERT_TRUE(getAttr && setAttr && trim);
  CUmemoryPool pool;
  ASSERT_EQ(api().cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
  auto attr = [&](CUmemPool_attribute a) {
    cuuint64_t v = 0;
    EXPECT_EQ(getAttr(pool, a, &v), CUDA_SUCCESS);
    return uint64_t(v);
  };
  CUstream s;
  ASSERT_EQ(api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  const uint64_t base = attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
  cuuint64_t zero = 0, one = 1;
  ASSERT_EQ(setAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
  EXPECT_EQ(setAttr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(attr(CU_MEMPOOL_ATTR_USED_MEM_HIGH), base);
  {
    Steps none(0);  // nothing runs: the counts follow the calls
    CUdeviceptr a, b;
    ASSERT_EQ(api().cuMemAllocAsync(&a, 4096, s), CUDA_SUCCESS);
    EXPECT_EQ(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), base + 4096);
    ASSERT_EQ(api().cuMemFreeAsync(a, s), CUDA_SUCCESS);
    EXPECT_EQ(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), base);
    ASSERT_EQ(api().cuMemAllocAsync(&b, 1024, s), CUDA_SUCCESS);
    EXPECT_EQ(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), base + 1024);
    EXPECT_EQ(attr(CU_MEMPOOL_ATTR_USED_MEM_HIGH), base + 4096);
    EXPECT_GE(attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), base + 4096);
    EXPECT_EQ(api().cuMemFreeAsync(b + 16, s), CUDA_ERROR_INVALID_VALUE);  // not a block's start
    ASSERT_EQ(api().cuMemFreeAsync(b, s), CUDA_SUCCESS);
  }
  ASSERT_EQ(api().cuStreamSynchronize(s), CUDA_SUCCESS);
  ASSERT_EQ(trim(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), base);
  api().cuStreamDestroy(s);
}

// Green contexts (fake_cuda_green.cc): resources and handles, streams, launches
// across a primary context and its green contexts (each kernel runs in its
// stream's context), graphs whose nodes keep their capture's context, the
// primary context's synchronize, the context-wide record and wait, and the end.
TEST(SimGreenContexts, StreamsLaunchesGraphsAndEnd) {
  setCurrent();
  using PushFn = CUresult (*)(CUcontext);
  using PopFn = CUresult (*)(CUcontext*);
  auto devRes = proc<decltype(&::cuDeviceGetDevResource)>("cuDeviceGetDevResource", 12040);
  auto split = proc<decltype(&::cuDevSmResourceSplitByCount)>("cuDevSmResourceSplitByCount", 12040);
  auto genDesc = proc<decltype(&::cuDevResourceGenerateDesc)>("cuDevResourceGenerateDesc", 12040);
  auto create = proc<decltype(&::cuGreenCtxCreate)>("cuGreenCtxCreate", 12040);
  auto destroy = proc<decltype(&::cuGreenCtxDestroy)>("cuGreenCtxDestroy", 12040);
  auto fromGreen = proc<decltype(&::cuCtxFromGreenCtx)>("cuCtxFromGreenCtx", 12040);
  auto streamCreate = proc<decltype(&::cuGreenCtxStreamCreate)>("cuGreenCtxStreamCreate", 12050);
  auto getGreen = proc<decltype(&::cuStreamGetGreenCtx)>("cuStreamGetGreenCtx", 12040);
  auto getCtx2 = proc<decltype(&::cuStreamGetCtx_v2)>("cuStreamGetCtx", 12050);
  auto greenRecord = proc<decltype(&::cuGreenCtxRecordEvent)>("cuGreenCtxRecordEvent", 12040);
  auto greenWait = proc<decltype(&::cuGreenCtxWaitEvent)>("cuGreenCtxWaitEvent", 12040);
  auto getState = proc<decltype(&::cuDevicePrimaryCtxGetState)>("cuDevicePrimaryCtxGetState", 7000);
  auto push = proc<PushFn>("cuCtxPushCurrent", 4000);
  auto pop = proc<PopFn>("cuCtxPopCurrent", 4000);
  ASSERT_TRUE(devRes && split && genDesc && create && destroy && fromGreen && streamCreate && getGreen && getCtx2 &&
              greenRecord && greenWait && getState && push && pop);
  CUcontext primary = nullptr;
  ASSERT_EQ(api().cuCtxGetCurrent(&primary), CUDA_SUCCESS);

  // 132 SMs; groups of 16 (a multiple of 8): 8 of them, 4 SMs left.
  CUdevResource dev{};
  ASSERT_EQ(devRes(0, &dev, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
  EXPECT_EQ(dev.sm.smCount, 132u);
  unsigned n = 0;
  ASSERT_EQ(split(nullptr, &n, &dev, nullptr, 0, 12), CUDA_SUCCESS);
  EXPECT_EQ(n, 8u);
  CUdevResource groups[2], rest{};
  n = 2;
  ASSERT_EQ(split(groups, &n, &dev, &rest, 0, 16), CUDA_SUCCESS);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(groups[0].sm.smCount, 16u);
  EXPECT_EQ(rest.sm.smCount, 100u);
  EXPECT_EQ(split(groups, &n, &groups[0], nullptr, 0, 8), CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
  CUdevResourceDesc desc = nullptr, desc2 = nullptr;
  ASSERT_EQ(genDesc(&desc, &groups[0], 1), CUDA_SUCCESS);
  ASSERT_EQ(genDesc(&desc2, &groups[1], 1), CUDA_SUCCESS);
  CUgreenCtx g = nullptr, g2 = nullptr;
  EXPECT_EQ(create(&g, desc, 0, 0), CUDA_ERROR_INVALID_VALUE);  // CU_GREEN_CTX_DEFAULT_STREAM is required
  ASSERT_EQ(create(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
  ASSERT_EQ(create(&g2, desc2, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
  CUcontext gc = nullptr, again = nullptr;
  ASSERT_EQ(fromGreen(&gc, g), CUDA_SUCCESS);
  ASSERT_EQ(fromGreen(&again, g), CUDA_SUCCESS);
  EXPECT_EQ(gc, again);
  EXPECT_NE(gc, primary);

  // Streams: made in the green context whatever is current.
  CUstream gs = nullptr, ps = nullptr, gs2 = nullptr;
  EXPECT_EQ(streamCreate(&gs, g, 0, 0), CUDA_ERROR_INVALID_VALUE);  // CU_STREAM_NON_BLOCKING is required
  ASSERT_EQ(streamCreate(&gs, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUcontext sc = nullptr;
  CUgreenCtx sg = nullptr;
  ASSERT_EQ(api().cuStreamGetCtx(gs, &sc), CUDA_SUCCESS);
  EXPECT_EQ(sc, gc);
  ASSERT_EQ(getCtx2(gs, &sc, &sg), CUDA_SUCCESS);
  EXPECT_EQ(sc, primary);
  EXPECT_EQ(sg, g);
  ASSERT_EQ(getCtx2(ps, &sc, &sg), CUDA_SUCCESS);
  EXPECT_EQ(sc, primary);
  EXPECT_EQ(sg, nullptr);
  ASSERT_EQ(push(gc), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamCreate(&gs2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);  // in the green context
  ASSERT_EQ(getGreen(gs2, &sg), CUDA_SUCCESS);
  EXPECT_EQ(sg, g);
  ASSERT_EQ(getGreen(nullptr, &sg), CUDA_SUCCESS);  // its own NULL stream
  EXPECT_EQ(sg, g);
  EXPECT_NE(simStreamId(nullptr, 0), simStreamId(gs, 0));
  CUcontext popped = nullptr;
  ASSERT_EQ(pop(&popped), CUDA_SUCCESS);
  EXPECT_EQ(popped, gc);

  // Launches: each kernel runs in its stream's context, whichever of the
  // family is current; another device's context is still refused.
  CUfunction k = addKernel();
  CUdeviceptr d;
  ASSERT_EQ(api().cuMemAlloc(&d, 64), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemsetD8(d, 0, 64), CUDA_SUCCESS);
  size_t from = simTraceSize();
  ASSERT_EQ(launchAdd(k, gs, d, d, 1), CUDA_SUCCESS);       // primary current, green stream
  ASSERT_EQ(push(gc), CUDA_SUCCESS);
  ASSERT_EQ(launchAdd(k, ps, d + 8, d + 8, 1), CUDA_SUCCESS);  // green current, primary stream
  ASSERT_EQ(launchAdd(k, nullptr, d + 16, d + 16, 1), CUDA_SUCCESS);  // the green context's NULL stream
  // Its per-thread default stream is refused (H100, driver 580), whichever
  // way it is named; nothing of it runs.
  {
    const simtest::DriverApi& pt = drv().perThread;
    uint64_t dst = d + 24, src = d + 24, add = 1, tag = 0;
    void* args[] = {&dst, &src, &add, &tag};
    EXPECT_EQ(launchAdd(k, CU_STREAM_PER_THREAD, d + 24, d + 24, 1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(pt.cuLaunchKernel(k, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(api().cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(pt.cuStreamQuery(nullptr), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(api().cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(pt.cuStreamSynchronize(nullptr), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(getCtx2(CU_STREAM_PER_THREAD, &sc, &sg), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(pt.cuMemsetD8Async(d + 24, 7, 8, nullptr), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(simStreamId(CU_STREAM_PER_THREAD, 0), 0u);
    EXPECT_EQ(api().cuStreamSynchronize(nullptr), CUDA_SUCCESS);  // its legacy stream stays usable
    EXPECT_EQ(api().cuStreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
  }
  ASSERT_EQ(pop(&popped), CUDA_SUCCESS);
  // The primary context's synchronize waits for its green contexts' work too.
  ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
  auto t = traceSince(from);
  ASSERT_EQ(t.size(), 3u);
  for (const SimEffect& e : t) {
    const bool onPrimary = e.streamId == simStreamId(ps, 0);
    EXPECT_EQ(e.context, onPrimary ? primary : gc);
    EXPECT_EQ(e.greenContext, onPrimary ? nullptr : g);
    EXPECT_EQ(e.device, 0);
  }
  int count = 0;
  ASSERT_EQ(api().cuDeviceGetCount(&count), CUDA_SUCCESS);
  if (count > 1) {
    CUcontext c1 = nullptr;
    ASSERT_EQ(api().cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
    ASSERT_EQ(push(c1), CUDA_SUCCESS);
    EXPECT_EQ(launchAdd(k, gs, d, d, 1), CUDA_ERROR_INVALID_HANDLE);
    ASSERT_EQ(pop(&popped), CUDA_SUCCESS);
    ASSERT_EQ(api().cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
  }

  // Graphs: a node runs in the context of the stream it was captured on,
  // wherever the graph is launched in the family.
  CUgraph gg, pg;
  CUgraphExec gx, px;
  ASSERT_EQ(api().cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(launchAdd(k, gs, d, d, 10), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamEndCapture(gs, &gg), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamBeginCapture(ps, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(launchAdd(k, ps, d + 8, d + 8, 10), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamEndCapture(ps, &pg), CUDA_SUCCESS);
  ASSERT_EQ(api().cuGraphInstantiateWithFlags(&gx, gg, 0), CUDA_SUCCESS);
  ASSERT_EQ(api().cuGraphInstantiateWithFlags(&px, pg, 0), CUDA_SUCCESS);
  from = simTraceSize();
  ASSERT_EQ(api().cuGraphLaunch(gx, ps), CUDA_SUCCESS);
  ASSERT_EQ(api().cuGraphLaunch(px, gs), CUDA_SUCCESS);
  ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
  t = traceSince(from);
  ASSERT_EQ(t.size(), 2u);
  for (const SimEffect& e : t) {
    uint64_t dst = 0;
    std::memcpy(&dst, e.params, 8);
    EXPECT_EQ(e.origin, SIM_ORIGIN_GRAPH);
    EXPECT_EQ(e.context, dst == d ? gc : primary);
  }
  // A capture may span the family: each node in its own stream's context.
  CUevent ev, ev2;
  ASSERT_EQ(api().cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  ASSERT_EQ(api().cuEventCreate(&ev2, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  CUgraph mg;
  CUgraphExec mx;
  ASSERT_EQ(api().cuStreamBeginCapture(ps, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  ASSERT_EQ(api().cuEventRecord(ev, ps), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamWaitEvent(gs, ev, 0), CUDA_SUCCESS);
  ASSERT_EQ(launchAdd(k, gs, d, d, 100), CUDA_SUCCESS);
  ASSERT_EQ(api().cuEventRecord(ev2, gs), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamWaitEvent(ps, ev2, 0), CUDA_SUCCESS);
  ASSERT_EQ(launchAdd(k, ps, d + 8, d, 100), CUDA_SUCCESS);
  ASSERT_EQ(api().cuStreamEndCapture(ps, &mg), CUDA_SUCCESS);
  ASSERT_EQ(api().cuGraphInstantiateWithFlags(&mx, mg, 0), CUDA_SUCCESS);
  from = simTraceSize();
  ASSERT_EQ(api().cuGraphLaunch(mx, ps), CUDA_SUCCESS);
  ASSERT_EQ(api().cuCtxSynchronize(), CUDA_SUCCESS);
  t = traceSince(from);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].context, gc);
  EXPECT_EQ(t[1].context, primary);
  uint64_t h[3] = {};
  ASSERT_EQ(api().cuMemcpyDtoH(h, d, 24), CUDA_SUCCESS);
  EXPECT_EQ(h[0], 1u + 10 + 100);
  EXPECT_EQ(h[1], h[0] + 100);
  EXPECT_EQ(h[2], 1u);

  // The context-wide record covers the green context's streams; its wait
  // holds later work of the green context.
  ASSERT_EQ(launchAdd(k, gs, d + 24, d + 24, 1), CUDA_SUCCESS);
  ASSERT_EQ(greenRecord(g, ev), CUDA_SUCCESS);
  ASSERT_EQ(api().cuEventSynchronize(ev), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemcpyDtoH(h, d + 24, 8), CUDA_SUCCESS);
  EXPECT_EQ(h[0], 1u);
  {
    Steps none(0);
    const size_t sizes[] = {8, 8, 8};
    CUfunction gate = simKernelCreate("sim_gate_green", SIM_KERNEL_LIBRARY, 3, sizes, nullptr);
    CUdeviceptr flag = d + 32;
    uint64_t one = 1, zero = 0;
    void* gargs[] = {&flag, &zero, &one};
    ASSERT_EQ(api().cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, ps, gargs, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(api().cuEventRecord(ev, ps), CUDA_SUCCESS);
    ASSERT_EQ(greenWait(g, ev), CUDA_SUCCESS);
    ASSERT_EQ(launchAdd(k, gs2, d + 24, d + 24, 1), CUDA_SUCCESS);  // waits for the gate
    EXPECT_EQ(api().cuStreamQuery(gs2), CUDA_ERROR_NOT_READY);
    ASSERT_EQ(api().cuMemsetD8(flag, 1, 1), CUDA_SUCCESS);  // opens the gate
    ASSERT_EQ(api().cuStreamSynchronize(gs2), CUDA_SUCCESS);
  }
  ASSERT_EQ(api().cuMemcpyDtoH(h, d + 24, 8), CUDA_SUCCESS);
  EXPECT_EQ(h[0], 2u);

  // The end: submitted work runs first, the streams' handles then fail, a
  // graph with a node of it no longer launches, the primary is released.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(launchAdd(k, gs, d + 40, d + 40, 1), CUDA_SUCCESS);
  ASSERT_EQ(destroy(g), CUDA_SUCCESS);
  ASSERT_EQ(api().cuMemcpyDtoH(h, d + 40, 8), CUDA_SUCCESS);
  EXPECT_EQ(h[0], 5u);
  EXPECT_EQ(api().cuStreamQuery(gs), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  EXPECT_EQ(api().cuStreamQuery(gs2), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  EXPECT_EQ(launchAdd(k, gs, d, d, 1), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  EXPECT_EQ(api().cuStreamDestroy(gs), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  EXPECT_EQ(api().cuGraphLaunch(gx, ps), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  EXPECT_EQ(api().cuGraphLaunch(mx, ps), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  ASSERT_EQ(api().cuGraphLaunch(px, ps), CUDA_SUCCESS);  // the primary context's graph still runs
  EXPECT_EQ(fromGreen(&again, g), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(destroy(g), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  EXPECT_EQ(api().cuCtxSetCurrent(gc), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_EQ(destroy(g2), CUDA_SUCCESS);
  unsigned flags = 0;
  int active = 0;
  ASSERT_EQ(getState(0, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1);  // the other references of device 0's primary context remain
  ASSERT_EQ(api().cuStreamSynchronize(ps), CUDA_SUCCESS);
  for (CUgraphExec x : {gx, px, mx}) api().cuGraphExecDestroy(x);
  for (CUgraph x : {gg, pg, mg}) api().cuGraphDestroy(x);
  api().cuEventDestroy(ev);
  api().cuEventDestroy(ev2);
  api().cuStreamDestroy(ps);
  api().cuMemFree(d);
}
