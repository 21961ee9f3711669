// sim_review6_memory: the sixth red-team round's review of memory around held
// and replayed work: the Alloc and Free classes of src/hook/driver_api.def and
// their handling in src/hook/interpose.cc (stream-ordered allocations issued
// at once, stream-ordered frees deferred past the held ops, synchronous frees
// as barriers), the frees queued behind graft's launch thread
// (src/graph/launch_worker.h, GraphExecutor::freeBehindQueuedLaunches), the
// range checks that decide whether a copy or memset is graphable (rangeOf),
// and graft's own pool (src/pool/device_pool.{h,cc}, GRAFT_POOL=1). Every
// step is a loop body long enough to be graphed; the odd pattern comes at some
// steps. Every return code and value must be the simulated driver's, eagerly
// and under graft:
//   sim_review6_memory --mode MODE [--steps N] [--expect-graphs]
//
// two-stream-temps  every step allocates a temporary on stream 1, writes it,
//                records an event; stream 2 waits for it, allocates a second
//                temporary from the first, frees the first (another stream
//                than its allocation's), copies the result to the step's
//                slot, records a second event that stream 1 waits for before
//                it frees the second. Every slot must hold its step's value.
//                Run also with SIM_GRAPH_LAUNCH_US=200 (frees behind queued
//                launches) and GRAFT_POOL=1.
// from-pool-attrs  temporaries from cuMemAllocFromPoolAsync (the device's
//                pool: the simulator has no cuMemPoolCreate), with the pool's
//                release threshold set and read back, cuMemPoolTrimTo(0) and
//                its used and reserved memory read on irregular steps, mid-step
//                (the block live) and right after its free.
// sync-free-held every step allocates device memory (cuMemAlloc), pinned
//                memory (cuMemAllocHost) and registers a host buffer, memsets
//                the first (graphable), writes the others from the host, reads
//                all three with kernels, then frees them
//                with cuMemFree, cuMemFreeHost and cuMemHostUnregister, in an
//                order rotating every step, with no sync before: each is a
//                barrier behind which the held reads must run.
// realloc-smaller  on irregular steps the program frees its 64-byte buffer and
//                allocates 32 bytes again (the simulator, as drivers do, hands
//                back the same address): at the place of the step's 64-byte
//                memset and copy (graph nodes by then), the 64-byte forms and
//                a memset at the old upper half are refused
//                (CUDA_ERROR_INVALID_VALUE), then 32-byte forms run; the next
//                step goes back to 64 bytes.
// registered-copy  host-to-device (cuMemcpyHtoDAsync) and device-to-host
//                (cuMemcpyAsync) copies of registered host memory around
//                kernels, the host buffers' registration dropped on irregular
//                steps (pageable copies) and made again after.
// vmm-remap      memsets, kernels and copies on memory mapped with cuMemMap;
//                on irregular steps the mapping is unmapped, its physical
//                memory released, and new physical memory mapped at the same
//                address (cuMemCreate, cuMemMap, cuMemSetAccess) between steps.
// vmm-free-async on irregular steps, in the middle of a replayed step, the
//                program calls cuMemFreeAsync on the start of memory mapped
//                with cuMemMap (not the stream-ordered allocator's): the driver
//                refuses it (CUDA_ERROR_INVALID_VALUE). graft asks only whether
//                the address is the start of device memory
//                (interpose.cc freeTakenByDriver: RANGE_START_ADDR and
//                MEMORY_TYPE, both true of a mapping), defers the free past the
//                held ops and returns CUDA_SUCCESS; the deferred free then
//                fails unseen (GraphExecutor::issueFree).
// free-before-record  every step allocates 5 GiB with cuMemAllocAsync, uses
//                it, frees it, records an event after the free on the same
//                stream and synchronizes that event: the free ran before the
//                record, so cuMemGetInfo must show the memory back, and on
//                irregular steps a 12 GiB cuMemAlloc (which fits the 16 GiB
//                simulated device only without the 5 GiB) must succeed. graft
//                defers the free past the held ops and issues it after the
//                graph that holds the record (Engine::heldCleared ->
//                GraphExecutor::freeAsync), so the event completes before the
//                free runs.
// pool-other-device  (GRAFT_POOL=1 shows it) with device 0's context current,
//                cuMemAllocAsync on a stream of device 1's context: the driver
//                allocates from the stream's device's pool (pointer attribute
//                DEVICE_ORDINAL 1); graft's pool serves it from device 0
//                (DevicePool::allocate checks the current context's device,
//                not the stream's). The block is then used by device 1's
//                kernels and freed there.
// pool-free-other-context  (GRAFT_POOL=1) a block allocated and read (last, after
//                a chain of 40 kernels) on a stream of context A is freed with
//                cuMemFree while context B (device 0 too) is current; back in
//                A, a new allocation on A's second stream is memset to all
//                ones. cuMemFree waits for the device's work (the simulator
//                drains every context), so the read saw the block's value;
//                graft's pool synchronizes only the current context
//                (interpose.cc freeSync) and hands the block out again at once.
// pool-free-no-context  (GRAFT_POOL=1) on irregular steps cuMemFree of a live
//                block with no context current: refused
//                (CUDA_ERROR_INVALID_CONTEXT), the block stays the program's,
//                which reads it after a new allocation on the same stream was
//                memset to all ones. graft's freeSync returns the refusal of
//                its cuCtxSynchronize but gives the block back to its pool
//                anyway, so the new allocation is the same memory.
// pool-reuse-streams  (GRAFT_POOL=1) a block written on stream 1, read on
//                stream 2 after an event, freed on stream 1 after stream 2's
//                event, then a new block allocated on stream 2 (the pool may
//                hand it the first once its fence completed) and one on stream
//                1 (the same stream: at once), both memset to all ones and
//                read: the reads before the free must see the written values.
//
// With the library this round reviewed, vmm-free-async and free-before-record
// fail under graft (with or without the launch thread; free-before-record
// passes with GRAFT_POOL=1, whose blocks the driver does not see), and the
// three pool-* modes named above fail with GRAFT_POOL=1 (they pass without
// it); every other mode passes with and without GRAFT_POOL=1 and
// SIM_GRAPH_LAUNCH_US=200. The simulator has no cuMemPoolCreate and no
// cuMemAllocManaged (program-made pools and managed memory are not tried).
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

struct Kit {
  simtest::Driver* drv = nullptr;
  const simtest::DriverApi* cu = nullptr;
  CUcontext ctx = nullptr;
  CUfunction add = nullptr;
  CUdeviceptr zero = 0;  // 64 zero bytes
  void add3(CUdeviceptr to, CUdeviceptr from, uint64_t k, CUstream s) const {
    SIM_CHECK(simtest::launchAdd(*cu, add, to, from, k, s));
  }
  void chain(CUdeviceptr w, int n, CUstream s, uint64_t* hw) const {
    for (int j = 0; j < n; ++j) add3(w, w, 1, s);
    if (hw) *hw += uint64_t(n);
  }
};

template <typename F>
F proc(const simtest::Driver& d, const char* name) {
  F f = nullptr;
  if (!simtest::lookupProc(d, name, &f)) std::exit(2);
  return f;
}

CUstream newStream(const simtest::DriverApi& cu) {
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  return s;
}
CUevent newEvent(const simtest::DriverApi& cu) {
  CUevent e = nullptr;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  return e;
}

// Two 32-bit words of `v`, as cuMemsetD32 with 2 elements leaves them.
uint64_t twoWords(uint32_t v) { return uint64_t(v) | (uint64_t(v) << 32); }

void checkSlots(CUdeviceptr results, int steps, uint64_t (*want)(int), const char* what) {
  for (int i = 0; i < steps; ++i) expectValue(peek(results + 8 * uint64_t(i)), want(i), what, i);
}

// ------------------------------------------------------------------ modes

void twoStreamTemps(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s1 = newStream(cu), s2 = newStream(cu);
  const CUevent e1 = newEvent(cu), e2 = newEvent(cu);
  const CUdeviceptr results = simtest::zeroedBuffer(cu, 8 * size_t(steps)), w = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0, u = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s1));
    k.add3(t, k.zero, uint64_t(i) + 1, s1);  // t = i+1
    for (int j = 0; j < 3; ++j) k.add3(t, t, 1, s1);  // t = i+4
    k.chain(w, 4, s1, &hw);
    SIM_CHECK(cu.cuEventRecord(e1, s1));
    SIM_CHECK(cu.cuStreamWaitEvent(s2, e1, 0));
    SIM_CHECK(cu.cuMemAllocAsync(&u, 64, s2));
    k.add3(u, t, 10, s2);  // u = i+14
    SIM_CHECK(cu.cuMemsetD32Async(t, 0xdddddddd, 2, s2));  // t's last use, on stream 2
    SIM_CHECK(cu.cuMemFreeAsync(t, s2));                   // freed on another stream than its allocation's
    SIM_CHECK(cu.cuMemcpyDtoDAsync(results + 8 * uint64_t(i), u, 8, s2));
    SIM_CHECK(cu.cuEventRecord(e2, s2));
    SIM_CHECK(cu.cuStreamWaitEvent(s1, e2, 0));
    SIM_CHECK(cu.cuMemFreeAsync(u, s1));  // allocated on stream 2, freed on stream 1
    if (i % 25 == 24) {
      SIM_CHECK(cu.cuStreamSynchronize(s1));
      expectValue(peek(results + 8 * uint64_t(i)), uint64_t(i) + 14, "the step's slot", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkSlots(results, steps, [](int i) { return uint64_t(i) + 14; }, "a step's slot");
  expectValue(peek(w), hw, "w", steps);
}

void fromPoolAttrs(const Kit& k, int steps) {
  auto& cu = *k.cu;
  auto getAttr = proc<decltype(&::cuMemPoolGetAttribute)>(*k.drv, "cuMemPoolGetAttribute");
  auto setAttr = proc<decltype(&::cuMemPoolSetAttribute)>(*k.drv, "cuMemPoolSetAttribute");
  auto trim = proc<decltype(&::cuMemPoolTrimTo)>(*k.drv, "cuMemPoolTrimTo");
  CUmemoryPool pool = nullptr;
  SIM_CHECK(cu.cuDeviceGetDefaultMemPool(&pool, 0));
  const CUstream s = newStream(cu);
  const CUdeviceptr results = simtest::zeroedBuffer(cu, 8 * size_t(steps)), w = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  auto attr = [&](CUmemPool_attribute a) {
    cuuint64_t v = ~cuuint64_t(0);
    SIM_CHECK(getAttr(pool, a, &v));
    return uint64_t(v);
  };
  const uint64_t base = attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0;
    SIM_CHECK(cu.cuMemAllocFromPoolAsync(&t, 256, pool, s));
    k.add3(t, k.zero, uint64_t(i) + 1, s);
    k.add3(t, t, 2, s);  // t = i+3
    k.chain(w, 4, s, &hw);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(results + 8 * uint64_t(i), t, 8, s));
    if (irregular(i, 1)) {
      expectValue(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), base + 256, "the pool's used memory, the block live", i);
      ++g_provoked;
    }
    SIM_CHECK(cu.cuMemFreeAsync(t, s));
    if (irregular(i, 2)) {
      expectValue(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), base, "the pool's used memory right after the free", i);
      ++g_provoked;
    }
    if (irregular(i, 3)) {
      cuuint64_t threshold = (i % 2) ? (1u << 20) : 0;
      SIM_CHECK(setAttr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
      expectValue(attr(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), threshold, "the release threshold read back", i);
      SIM_CHECK(trim(pool, 0));
      expectValue(attr(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
                  "the pool's reserved memory after cuMemPoolTrimTo(0)", i);
      expectValue(attr(CU_MEMPOOL_ATTR_USED_MEM_CURRENT), base, "the pool's used memory after the trim", i);
      ++g_provoked;
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkSlots(results, steps, [](int i) { return uint64_t(i) + 3; }, "a step's slot");
  expectValue(peek(w), hw, "w", steps);
}

alignas(4096) uint64_t g_regBuf[512];
alignas(4096) uint64_t g_hostIn[512];
alignas(4096) uint64_t g_hostOut[512];

void syncFreeHeld(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr acc1 = simtest::zeroedBuffer(cu), acc2 = simtest::zeroedBuffer(cu),
                    acc3 = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr b = 0;
    void* h = nullptr;
    SIM_CHECK(cu.cuMemAlloc(&b, 64));
    SIM_CHECK(cu.cuMemAllocHost(&h, 64));
    SIM_CHECK(cu.cuMemHostRegister(g_regBuf, sizeof(g_regBuf), 0));
    const uint32_t v = uint32_t(i) + 1;
    // Host memory written by the host (a memset node of pinned memory freed
    // every step could not be updated: graft would issue it eagerly).
    static_cast<uint64_t*>(h)[0] = twoWords(v + 7);
    g_regBuf[0] = twoWords(v + 9);
    SIM_CHECK(cu.cuMemsetD32Async(b, v, 2, s));
    k.add3(acc1, b, 1, s);
    k.add3(acc2, reinterpret_cast<CUdeviceptr>(h), 0, s);
    k.add3(acc3, reinterpret_cast<CUdeviceptr>(g_regBuf), 0, s);
    k.chain(w, 3, s, &hw);
    for (int j = 0; j < 3; ++j) {
      switch ((i + j) % 3) {
        case 0: SIM_CHECK(cu.cuMemFree(b)); break;
        case 1: SIM_CHECK(cu.cuMemFreeHost(h)); break;
        default: SIM_CHECK(cu.cuMemHostUnregister(g_regBuf)); break;
      }
      if (j == 0) {
        // The first of them waited for the device: the held reads ran before it.
        expectValue(peek(acc1), twoWords(v) + 1, "a read of the device memory freed with cuMemFree", i);
        expectValue(peek(acc2), twoWords(v + 7), "a read of the pinned memory freed with cuMemFreeHost", i);
        expectValue(peek(acc3), twoWords(v + 9), "a read of the host memory unregistered", i);
      }
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(w), hw, "w", steps);
}

void reallocSmaller(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  CUdeviceptr a = 0;
  SIM_CHECK(cu.cuMemAlloc(&a, 64));
  const CUdeviceptr b = simtest::zeroedBuffer(cu, 64), acc = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hw = 0, hacc = 0;
  for (int i = 0; i < steps; ++i) {
    const bool odd = irregular(i, 4);
    if (odd) {
      const CUdeviceptr old = a;
      SIM_CHECK(cu.cuMemFree(a));
      SIM_CHECK(cu.cuMemAlloc(&a, 32));
      if (a != old) std::printf("sim_review6_memory: %s: step %d: note: the 32-byte buffer got another address\n", g_mode, i);
      ++g_provoked;
    }
    const uint32_t v = uint32_t(i) * 3 + 1;
    if (odd) {
      expectCode(cu.cuMemsetD32Async(a, v, 16, s), CUDA_ERROR_INVALID_VALUE,
                 "a 64-byte cuMemsetD32Async of the 32-byte buffer", i);
      expectCode(cu.cuMemsetD32Async(a + 32, v, 8, s), CUDA_ERROR_INVALID_VALUE,
                 "a cuMemsetD32Async of the old buffer's upper half", i);
    }
    SIM_CHECK(cu.cuMemsetD32Async(a, v, odd ? 8 : 16, s));
    k.chain(w, 2, s, &hw);
    if (odd)
      expectCode(cu.cuMemcpyDtoDAsync(b, a, 64, s), CUDA_ERROR_INVALID_VALUE,
                 "a 64-byte cuMemcpyDtoDAsync from the 32-byte buffer", i);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(b, a, odd ? 32 : 64, s));
    k.add3(acc, b + 24, uint64_t(i), s);  // acc = b's fourth word + i
    hacc = twoWords(v) + uint64_t(i);
    k.chain(w, 2, s, &hw);
    if (odd) {
      SIM_CHECK(cu.cuMemFree(a));
      SIM_CHECK(cu.cuMemAlloc(&a, 64));
      expectValue(peek(acc), hacc, "acc after the 32-byte step", i);
    }
    if (i % 10 == 9) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(peek(acc), hacc, "acc", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(acc), hacc, "acc", steps);
  expectValue(peek(w), hw, "w", steps);
}

void registeredCopy(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr d = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  SIM_CHECK(cu.cuMemHostRegister(g_hostIn, sizeof(g_hostIn), 0));
  SIM_CHECK(cu.cuMemHostRegister(g_hostOut, sizeof(g_hostOut), 0));
  for (int i = 0; i < steps; ++i) {
    const bool dropIn = irregular(i, 5), dropOut = irregular(i, 6);
    if (dropIn) SIM_CHECK(cu.cuMemHostUnregister(g_hostIn));
    if (dropOut) SIM_CHECK(cu.cuMemHostUnregister(g_hostOut));
    g_provoked += dropIn + dropOut;
    g_hostIn[0] = uint64_t(i) * 3 + 1;
    SIM_CHECK(cu.cuMemcpyHtoDAsync(d, g_hostIn, 8, s));
    k.add3(d, d, 5, s);
    k.chain(w, 3, s, &hw);
    SIM_CHECK(cu.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(g_hostOut), d, 8, s));
    k.chain(w, 4, s, &hw);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(g_hostOut[0], uint64_t(i) * 3 + 6, "the value copied back to the host", i);
    if (dropIn) SIM_CHECK(cu.cuMemHostRegister(g_hostIn, sizeof(g_hostIn), 0));
    if (dropOut) SIM_CHECK(cu.cuMemHostRegister(g_hostOut, sizeof(g_hostOut), 0));
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(w), hw, "w", steps);
}

struct Vmm {
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) setAccess = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  size_t granularity = 2u << 20;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle handle = 0;
  explicit Vmm(const simtest::Driver& d) {
    reserve = proc<decltype(reserve)>(d, "cuMemAddressReserve");
    create = proc<decltype(create)>(d, "cuMemCreate");
    map = proc<decltype(map)>(d, "cuMemMap");
    unmap = proc<decltype(unmap)>(d, "cuMemUnmap");
    setAccess = proc<decltype(setAccess)>(d, "cuMemSetAccess");
    release = proc<decltype(release)>(d, "cuMemRelease");
    SIM_CHECK(reserve(&va, granularity, 0, 0, 0));
    mapNew();
  }
  void mapNew() {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    SIM_CHECK(create(&handle, granularity, &prop, 0));
    SIM_CHECK(map(va, granularity, 0, handle, 0));
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    SIM_CHECK(setAccess(va, granularity, &access, 1));
  }
  void remap() {
    SIM_CHECK(unmap(va, granularity));
    SIM_CHECK(release(handle));
    mapNew();
  }
};

void vmmRemap(const Kit& k, int steps) {
  auto& cu = *k.cu;
  Vmm vmm(*k.drv);
  const CUstream s = newStream(cu);
  const CUdeviceptr x = vmm.va, y = vmm.va + 4096;
  const CUdeviceptr z = simtest::zeroedBuffer(cu), results = simtest::zeroedBuffer(cu, 8 * size_t(steps)),
                    w = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  for (int i = 0; i < steps; ++i) {
    if (irregular(i, 6)) {
      vmm.remap();
      ++g_provoked;
    }
    SIM_CHECK(cu.cuMemsetD32Async(x, uint32_t(i) + 1, 2, s));  // x = V
    k.add3(y, x, 1, s);                                          // y = V+1
    SIM_CHECK(cu.cuMemcpyDtoDAsync(z, y, 8, s));                 // z = V+1
    k.add3(z, z, 2, s);                                          // z = V+3
    SIM_CHECK(cu.cuMemcpyDtoDAsync(results + 8 * uint64_t(i), z, 8, s));
    SIM_CHECK(cu.cuMemcpyDtoDAsync(y + 8, x, 8, s));  // both ends mapped memory
    k.chain(w, 2, s, &hw);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkSlots(results, steps, [](int i) { return twoWords(uint32_t(i) + 1) + 3; }, "a step's slot");
  expectValue(peek(y + 8), twoWords(uint32_t(steps)), "the last copy between mapped addresses", steps);
  expectValue(peek(w), hw, "w", steps);
}

void vmmFreeAsync(const Kit& k, int steps) {
  auto& cu = *k.cu;
  Vmm vmm(*k.drv);
  const CUstream s = newStream(cu);
  const CUdeviceptr results = simtest::zeroedBuffer(cu, 8 * size_t(steps)), w = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  SIM_CHECK(cu.cuMemsetD32(vmm.va, 0x5a5a5a5a, 2));
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s));
    k.add3(t, k.zero, uint64_t(i) + 1, s);
    k.chain(w, 4, s, &hw);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(results + 8 * uint64_t(i), t, 8, s));
    if (irregular(i, 7)) {
      expectCode(cu.cuMemFreeAsync(vmm.va, s), CUDA_ERROR_INVALID_VALUE,
                 "cuMemFreeAsync of memory mapped with cuMemMap", i);
      ++g_provoked;
    }
    k.chain(w, 2, s, &hw);
    SIM_CHECK(cu.cuMemFreeAsync(t, s));
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkSlots(results, steps, [](int i) { return uint64_t(i) + 1; }, "a step's slot");
  expectValue(readWord(cu, vmm.va), twoWords(0x5a5a5a5a), "the mapped memory, never freed", steps);
  expectValue(peek(w), hw, "w", steps);
}

void freeBeforeRecord(const Kit& k, int steps) {
  auto& cu = *k.cu;
  auto getInfo = proc<decltype(&::cuMemGetInfo)>(*k.drv, "cuMemGetInfo");
  const CUstream s = newStream(cu);
  const CUevent e = newEvent(cu);
  const CUdeviceptr results = simtest::zeroedBuffer(cu, 8 * size_t(steps)), w = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  const size_t big = 5ull << 30, bigger = 12ull << 30;
  SIM_CHECK(cu.cuCtxSynchronize());
  size_t free0 = 0, total = 0;
  SIM_CHECK(getInfo(&free0, &total));
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr x = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&x, big, s));
    k.add3(x, k.zero, uint64_t(i) + 1, s);
    k.add3(results + 8 * uint64_t(i), x, 1, s);  // the step's slot = i+2
    k.chain(w, 3, s, &hw);
    SIM_CHECK(cu.cuMemFreeAsync(x, s));
    SIM_CHECK(cu.cuEventRecord(e, s));  // after the free, on its stream
    SIM_CHECK(cu.cuEventSynchronize(e));
    size_t freeNow = 0;
    SIM_CHECK(getInfo(&freeNow, &total));
    expectValue(freeNow, free0, "cuMemGetInfo's free memory once an event recorded after the free completed", i);
    if (irregular(i, 8)) {
      CUdeviceptr y = 0;
      const CUresult r = cu.cuMemAlloc(&y, bigger);
      expectCode(r, CUDA_SUCCESS, "a 12 GiB cuMemAlloc after the event recorded after the 5 GiB free completed", i);
      if (r == CUDA_SUCCESS) SIM_CHECK(cu.cuMemFree(y));
      ++g_provoked;
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkSlots(results, steps, [](int i) { return uint64_t(i) + 2; }, "a step's slot");
  expectValue(peek(w), hw, "w", steps);
}

void poolOtherDevice(const Kit& k, int steps) {
  auto& cu = *k.cu;
  CUdevice dev1 = 0;
  CUcontext ctx1 = nullptr;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS || cu.cuDevicePrimaryCtxRetain(&ctx1, dev1) != CUDA_SUCCESS) {
    std::printf("sim_review6_memory: no device 1 (SIM_DEVICES >= 2)\n");
    std::exit(2);
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  const CUstream s1 = newStream(cu);
  const CUdeviceptr zero1 = simtest::zeroedBuffer(cu), results = simtest::zeroedBuffer(cu, 8 * size_t(steps)),
                    w = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
  uint64_t hw = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr p = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&p, 64, s1));  // device 0's context current, device 1's stream
    int ordinal = -1;
    SIM_CHECK(cu.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    expectValue(uint64_t(ordinal), 1, "the device of memory allocated on device 1's stream", i);
    SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
    unsigned access = 0;
    SIM_CHECK(cu.cuPointerGetAttribute(&access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p));
    expectValue(access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE, "device 1's access to that memory", i);
    k.add3(p, zero1, uint64_t(i) + 1, s1);
    k.add3(p, p, 1, s1);
    k.chain(w, 3, s1, &hw);
    SIM_CHECK(cu.cuMemcpyDtoDAsync(results + 8 * uint64_t(i), p, 8, s1));
    SIM_CHECK(cu.cuMemFreeAsync(p, s1));
    SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  SIM_CHECK(cu.cuCtxSynchronize());
  SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
  checkSlots(results, steps, [](int i) { return uint64_t(i) + 2; }, "a step's slot");
  expectValue(peek(w), hw, "w", steps);
}

void poolFreeOtherContext(const Kit& k, int steps) {
  auto& cu = *k.cu;
  auto ctxCreate = proc<decltype(&::cuCtxCreate_v4)>(*k.drv, "cuCtxCreate");
  CUcontext b = nullptr;
  SIM_CHECK(ctxCreate(&b, nullptr, 0, 0));  // device 0, made current
  SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
  const CUstream sa = newStream(cu), sa2 = newStream(cu);
  const CUdeviceptr results = simtest::zeroedBuffer(cu, 8 * size_t(steps)), w = simtest::zeroedBuffer(cu),
                    w2 = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr p = 0, q = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&p, 64, sa));
    k.add3(p, k.zero, uint64_t(i) + 1, sa);
    k.chain(w, 40, sa, &hw);
    k.add3(results + 8 * uint64_t(i), p, 0, sa);  // read last
    SIM_CHECK(cu.cuCtxSetCurrent(b));
    SIM_CHECK(cu.cuMemFree(p));  // another context current: waits for the device
    SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
    SIM_CHECK(cu.cuMemAllocAsync(&q, 64, sa2));
    SIM_CHECK(cu.cuMemsetD32Async(q, 0xffffffff, 2, sa2));
    k.add3(w2, q, 0, sa2);
    k.add3(w2, w2, 1, sa2);
    SIM_CHECK(cu.cuMemFreeAsync(q, sa2));
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkSlots(results, steps, [](int i) { return uint64_t(i) + 1; }, "what the step read from its block before its free");
  expectValue(peek(w), hw, "w", steps);
}

void poolFreeNoContext(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr results = simtest::zeroedBuffer(cu, 8 * size_t(steps)), w = simtest::zeroedBuffer(cu),
                    w2 = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr p = 0, q = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&p, 64, s));
    k.add3(p, k.zero, uint64_t(i) + 1, s);
    k.chain(w, 4, s, &hw);
    if (irregular(i, 9)) {
      SIM_CHECK(cu.cuCtxSetCurrent(nullptr));
      expectCode(cu.cuMemFree(p), CUDA_ERROR_INVALID_CONTEXT, "cuMemFree with no context current", i);
      SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
      ++g_provoked;
    }
    SIM_CHECK(cu.cuMemAllocAsync(&q, 64, s));
    SIM_CHECK(cu.cuMemsetD32Async(q, 0xffffffff, 2, s));
    k.add3(w2, q, 0, s);
    SIM_CHECK(cu.cuMemFreeAsync(q, s));
    k.add3(results + 8 * uint64_t(i), p, 0, s);  // p is still the program's
    k.chain(w, 2, s, &hw);
    SIM_CHECK(cu.cuMemFreeAsync(p, s));
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkSlots(results, steps, [](int i) { return uint64_t(i) + 1; }, "what the step read from its block");
  expectValue(peek(w), hw, "w", steps);
}

void poolReuseStreams(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s1 = newStream(cu), s2 = newStream(cu);
  const CUevent e1 = newEvent(cu), e2 = newEvent(cu);
  const CUdeviceptr r1 = simtest::zeroedBuffer(cu, 8 * size_t(steps)), r2 = simtest::zeroedBuffer(cu, 8 * size_t(steps)),
                    w = simtest::zeroedBuffer(cu), w2 = simtest::zeroedBuffer(cu);
  uint64_t hw = 0;
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0, u = 0, v = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s1));
    k.add3(t, k.zero, uint64_t(i) + 1, s1);
    k.chain(w, 6, s1, &hw);
    SIM_CHECK(cu.cuEventRecord(e1, s1));
    SIM_CHECK(cu.cuStreamWaitEvent(s2, e1, 0));
    k.chain(w2, 3, s2, nullptr);
    k.add3(r2 + 8 * uint64_t(i), t, 5, s2);  // read on stream 2: i+6
    SIM_CHECK(cu.cuEventRecord(e2, s2));
    k.add3(r1 + 8 * uint64_t(i), t, 0, s1);  // read on stream 1: i+1
    SIM_CHECK(cu.cuStreamWaitEvent(s1, e2, 0));
    SIM_CHECK(cu.cuMemFreeAsync(t, s1));
    SIM_CHECK(cu.cuMemAllocAsync(&u, 64, s2));  // t's block once its fence completed
    SIM_CHECK(cu.cuMemsetD32Async(u, 0xffffffff, 2, s2));
    k.add3(w2, u, 0, s2);
    SIM_CHECK(cu.cuMemFreeAsync(u, s2));
    SIM_CHECK(cu.cuMemAllocAsync(&v, 64, s1));  // the same stream as t's free: at once
    SIM_CHECK(cu.cuMemsetD32Async(v, 0xeeeeeeee, 2, s1));
    k.add3(w, v, 0, s1);
    SIM_CHECK(cu.cuMemFreeAsync(v, s1));
    hw = twoWords(0xeeeeeeee);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkSlots(r1, steps, [](int i) { return uint64_t(i) + 1; }, "stream 1's read before the free");
  checkSlots(r2, steps, [](int i) { return uint64_t(i) + 6; }, "stream 2's read before the free");
  expectValue(peek(w), hw, "w", steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review6_memory", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  Kit k;
  if (int rc = simtest::startProgram("sim_review6_memory", &drv, &k.ctx)) return rc;
  k.drv = &drv;
  k.cu = &drv.plain;
  k.add = simtest::libraryKernel3("sim_add_review6_memory");
  k.zero = simtest::zeroedBuffer(drv.plain);
  if (mode == "two-stream-temps") twoStreamTemps(k, steps);
  else if (mode == "from-pool-attrs") fromPoolAttrs(k, steps);
  else if (mode == "sync-free-held") syncFreeHeld(k, steps);
  else if (mode == "realloc-smaller") reallocSmaller(k, steps);
  else if (mode == "registered-copy") registeredCopy(k, steps);
  else if (mode == "vmm-remap") vmmRemap(k, steps);
  else if (mode == "vmm-free-async") vmmFreeAsync(k, steps);
  else if (mode == "free-before-record") freeBeforeRecord(k, steps);
  else if (mode == "pool-other-device") poolOtherDevice(k, steps);
  else if (mode == "pool-free-other-context") poolFreeOtherContext(k, steps);
  else if (mode == "pool-free-no-context") poolFreeNoContext(k, steps);
  else if (mode == "pool-reuse-streams") poolReuseStreams(k, steps);
  else {
    std::printf("usage: sim_review6_memory --mode two-stream-temps|from-pool-attrs|sync-free-held|realloc-smaller|"
                "registered-copy|vmm-remap|vmm-free-async|free-before-record|pool-other-device|"
                "pool-free-other-context|pool-free-no-context|pool-reuse-streams [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
