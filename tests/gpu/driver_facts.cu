// Driver behaviours graft's launch plans rely on (src/graph/graph_executor.cc,
// "Launch plan"), asserted on the real driver, without graft.
//
// A segment that uses the legacy default stream is launched on a stream of
// graft's (non-blocking); each program stream records an entry event before
// the launch and waits on its branch's tail event after it. That keeps the
// legacy stream's implicit synchronization with blocking streams only if:
//   record_*  an event record is work for implicit synchronization: recorded
//             on the legacy stream it completes after earlier work on blocking
//             streams, and on a blocking stream after earlier legacy work;
//   wait_*    a stream wait is work too: later legacy work waits for a
//             blocking stream's pending wait, and later blocking work for the
//             legacy stream's pending wait;
//   graph_*   a graph launch is work too, whole: launched on the legacy
//             stream (a segment on it alone is), later blocking work waits for
//             all of it, also for a branch that does not end the graph;
//   control   none of this reaches a non-blocking stream (shows that the
//             probe can tell both outcomes apart).
// And what the driver checks once a kernel's dynamic shared memory allowance
// is lowered below what a graph's kernel node asks for (src/hook/interpose.cc,
// kernel attributes):
//   allowance_update_refused    updating that node is refused, so graft lets
//                               queued launches that update such a node reach
//                               the driver before the program's call;
//   allowance_launch_unchecked  launching the graph is not, so queued launches
//                               without such an update need not wait.
// Each fact is probed with a kernel that spins until the host writes a mapped
// flag: the probed event must still be pending while the kernel spins.
//
// Exit: 0 every fact holds; 1 one does not (graft's legacy plan would be
// looser than eager); 77 no GPU.
#include <cuda.h>  // types only: driver functions come from cudaGetDriverEntryPointByVersion
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#define CK(x)                                                                           \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

namespace {

__global__ void spinUntil(const volatile unsigned* flag, unsigned want) {
  const long long t0 = clock64();
  while (*flag < want && clock64() - t0 < 20000000000LL) {
  }
}

unsigned* g_host = nullptr;
unsigned* g_dev = nullptr;
unsigned g_round = 0;

cudaStream_t stream(unsigned flags) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, flags));
  return s;
}

// Runs `setup` (which issues a spinning kernel and then the probed event, or
// sets *queried to a stream to probe instead), waits a little, asks whether
// the event (stream) is still pending, then releases the kernel. Returns true
// when it was pending.
template <typename F>
bool pendingWhileSpinning(F setup) {
  ++g_round;
  cudaEvent_t probe;
  CK(cudaEventCreateWithFlags(&probe, cudaEventDisableTiming));
  cudaStream_t queried = nullptr;
  setup(probe, [](cudaStream_t s) { spinUntil<<<1, 1, 0, s>>>(g_dev, g_round); }, &queried);
  CK(cudaGetLastError());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const cudaError_t q = queried ? cudaStreamQuery(queried) : cudaEventQuery(probe);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *reinterpret_cast<volatile unsigned*>(g_host) = g_round;
  CK(cudaDeviceSynchronize());
  CK(cudaEventDestroy(probe));
  if (q != cudaErrorNotReady && q != cudaSuccess) {
    std::fprintf(stderr, "query: %s\n", cudaGetErrorString(q));
    std::exit(2);
  }
  return q == cudaErrorNotReady;
}

__global__ void useShared(int* out, int n) {
  extern __shared__ int buf[];
  buf[threadIdx.x] = int(threadIdx.x) + n;
  __syncthreads();
  if (threadIdx.x == 0) out[0] += buf[0];
}

// The two allowance facts (see the top): {update refused, launch unchecked}.
std::pair<bool, bool> allowanceFacts() {
  int* out;
  CK(cudaMalloc(&out, 4));
  cudaStream_t s = stream(cudaStreamNonBlocking);
  CK(cudaFuncSetAttribute(useShared, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  cudaGraph_t graph;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  useShared<<<1, 32, 65536, s>>>(out, 1);
  CK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphNode_t node;
  size_t n = 1;
  CK(cudaGraphGetNodes(graph, &node, &n));
  cudaKernelNodeParams params;
  CK(cudaGraphKernelNodeGetParams(node, &params));
  int v = 2;
  void* args[] = {&out, &v};
  params.kernelParams = args;
  // Control: under the allowance the node was captured with, the update is taken.
  const bool updatedBefore = cudaGraphExecKernelNodeSetParams(exec, node, &params) == cudaSuccess;
  CK(cudaMemset(out, 0, 4));
  CK(cudaFuncSetAttribute(useShared, cudaFuncAttributeMaxDynamicSharedMemorySize, 8192));
  int ran = 0;
  const bool launched = cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess &&
                        cudaMemcpy(&ran, out, 4, cudaMemcpyDeviceToHost) == cudaSuccess && ran == 2;
  v = 3;
  const cudaError_t update = cudaGraphExecKernelNodeSetParams(exec, node, &params);
  const bool refused = updatedBefore && update == cudaErrorInvalidValue;
  cudaGetLastError();
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaFuncSetAttribute(useShared, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  CK(cudaFree(out));
  return {refused, launched};
}

// Observed, not asserted: what the driver answers when a library kernel's
// handle (CUkernel, as nvcc 13's launch stubs pass) is given to cuFuncGetAttribute
// and cuFuncSetAttribute for the dynamic shared memory allowance, and whether a
// set through that handle changes the value cuKernelGetAttribute reads. graft's
// retry of a launch refused over the allowance (src/graph/op_codec.cc,
// launchUnderAllowance) reads and raises the allowance through the launch's handle.
void observeKernelHandleAttributes() {
  using GetFn = int (*)(int*, int, void*);
  using SetFn = int (*)(void*, int, int);
  using KGetFn = int (*)(int*, int, void*, int);
  void *get = nullptr, *set = nullptr, *kget = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuFuncGetAttribute", &get, 12000, cudaEnableDefault, &q));
  CK(cudaGetDriverEntryPointByVersion("cuFuncSetAttribute", &set, 12000, cudaEnableDefault, &q));
  CK(cudaGetDriverEntryPointByVersion("cuKernelGetAttribute", &kget, 12000, cudaEnableDefault, &q));
  cudaKernel_t kernel;
  CK(cudaGetKernel(&kernel, useShared));
  constexpr int kMaxDynamicShared = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int value = -1, after = -1, kernelValue = -1;
  const int rget = GetFn(get)(&value, kMaxDynamicShared, kernel);
  const int rset = SetFn(set)(kernel, kMaxDynamicShared, 4096);
  const int rget2 = GetFn(get)(&after, kMaxDynamicShared, kernel);
  const int rkget = KGetFn(kget)(&kernelValue, kMaxDynamicShared, kernel, 0);
  std::printf("%-48s observed (cuFuncGetAttribute rc %d value %d; cuFuncSetAttribute(4096) rc %d; then "
              "cuFuncGetAttribute rc %d value %d, cuKernelGetAttribute rc %d value %d)\n",
              "kernel_handle_func_attribute", rget, value, rset, rget2, after, rkget, kernelValue);
  CK(cudaFuncSetAttribute(useShared, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
}

// What graft's handling of stream-ordered frees relies on (src/hook/interpose.cc,
// freeHandlingOf): a block of cudaMallocAsync names its pool
// (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE), other device memory names none, so
// only pool blocks' frees are deferred past held work. Asserted: the first
// two; observed: what cuMemFreeAsync says of cudaMalloc memory and of a
// cuMemMap mapping (graft issues those after everything it holds and
// returns the driver's answer).
bool poolHandleFacts() {
  using AttrFn = int (*)(void*, int, unsigned long long);
  using FreeAsyncFn = int (*)(unsigned long long, cudaStream_t);
  void *attr = nullptr, *freeAsync = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &attr, 4000, cudaEnableDefault, &q));
  CK(cudaGetDriverEntryPointByVersion("cuMemFreeAsync", &freeAsync, 11020, cudaEnableDefault, &q));
  constexpr int kMempoolHandle = 17;  // CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
  void *pooled = nullptr, *plain = nullptr;
  CK(cudaMallocAsync(&pooled, 1 << 20, 0));
  CK(cudaMalloc(&plain, 1 << 20));
  CK(cudaDeviceSynchronize());
  void *poolOfPooled = nullptr, *poolOfPlain = reinterpret_cast<void*>(1);
  const int r1 = AttrFn(attr)(&poolOfPooled, kMempoolHandle, reinterpret_cast<unsigned long long>(pooled));
  const int r2 = AttrFn(attr)(&poolOfPlain, kMempoolHandle, reinterpret_cast<unsigned long long>(plain));
  const bool pooledNamed = r1 == 0 && poolOfPooled, plainNone = r2 == 0 && !poolOfPlain;
  std::printf("%-48s %s (rc %d, pool %p)\n", "mempool_handle_of_async_block", pooledNamed ? "holds" : "DOES NOT HOLD", r1,
              poolOfPooled);
  std::printf("%-48s %s (rc %d, pool %p)\n", "mempool_handle_of_cudaMalloc", plainNone ? "holds" : "DOES NOT HOLD", r2,
              poolOfPlain);
  CK(cudaFreeAsync(pooled, 0));
  const int rPlain = FreeAsyncFn(freeAsync)(reinterpret_cast<unsigned long long>(plain), 0);
  const cudaError_t syncPlain = cudaDeviceSynchronize();
  (void)cudaGetLastError();
  std::printf("%-48s observed (cuMemFreeAsync rc %d, then synchronize %d)\n", "free_async_of_cudaMalloc", rPlain,
              int(syncPlain));
  if (rPlain != 0) CK(cudaFree(plain));
  // A cuMemMap mapping (granularity-sized, device 0).
  void *gran = nullptr, *reserve = nullptr, *create = nullptr, *map = nullptr, *access = nullptr;
  CK(cudaGetDriverEntryPointByVersion("cuMemGetAllocationGranularity", &gran, 10020, cudaEnableDefault, &q));
  CK(cudaGetDriverEntryPointByVersion("cuMemAddressReserve", &reserve, 10020, cudaEnableDefault, &q));
  CK(cudaGetDriverEntryPointByVersion("cuMemCreate", &create, 10020, cudaEnableDefault, &q));
  CK(cudaGetDriverEntryPointByVersion("cuMemMap", &map, 10020, cudaEnableDefault, &q));
  CK(cudaGetDriverEntryPointByVersion("cuMemSetAccess", &access, 10020, cudaEnableDefault, &q));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  const CUmemAccessDesc desc{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  size_t g = 0;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle handle = 0;
  if (PFN_cuMemGetAllocationGranularity_v10020(gran)(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == 0 &&
      PFN_cuMemAddressReserve_v10020(reserve)(&va, g, 0, 0, 0) == 0 &&
      PFN_cuMemCreate_v10020(create)(&handle, g, &prop, 0) == 0 && PFN_cuMemMap_v10020(map)(va, g, 0, handle, 0) == 0 &&
      PFN_cuMemSetAccess_v10020(access)(va, g, &desc, 1) == 0) {
    void* poolOfMapped = reinterpret_cast<void*>(1);
    const int r3 = AttrFn(attr)(&poolOfMapped, kMempoolHandle, va);
    const int rMapped = FreeAsyncFn(freeAsync)(va, 0);
    const cudaError_t syncMapped = cudaDeviceSynchronize();
    (void)cudaGetLastError();
    std::printf("%-48s observed (pool rc %d %p; cuMemFreeAsync rc %d, then synchronize %d)\n",
                "free_async_of_cuMemMap_mapping", r3, poolOfMapped, rMapped, int(syncMapped));
  } else {
    std::printf("%-48s observed (no mapping made)\n", "free_async_of_cuMemMap_mapping");
  }
  return pooledNamed && plainNone;
}

// A graph of a spinning kernel, alone or beside an independent empty branch.
cudaGraphExec_t spinGraph(bool withSideBranch) {
  cudaStream_t cs, side;
  CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  cudaGraph_t graph;
  CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed));
  if (withSideBranch) {
    CK(cudaEventRecord(fork, cs));
    CK(cudaStreamWaitEvent(side, fork, 0));
  }
  spinUntil<<<1, 1, 0, cs>>>(g_dev, g_round);  // built inside the round it is launched in
  if (withSideBranch) {
    spinUntil<<<1, 1, 0, side>>>(g_dev, 0);  // returns at once
    CK(cudaEventRecord(join, side));
    CK(cudaStreamWaitEvent(cs, join, 0));
  }
  CK(cudaStreamEndCapture(cs, &graph));
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphDestroy(graph));
  CK(cudaStreamDestroy(cs));
  CK(cudaStreamDestroy(side));
  return exec;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("driver_facts: no CUDA device\n");
    return 77;
  }
  CK(cudaHostAlloc(&g_host, 64, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&g_dev, g_host, 0));
  *g_host = 0;
  spinUntil<<<1, 1>>>(g_dev, 0);  // load the kernel
  CK(cudaDeviceSynchronize());

  const cudaStream_t legacy = cudaStreamLegacy;
  const cudaStream_t blocking = stream(cudaStreamDefault), nonBlocking = stream(cudaStreamNonBlocking);
  cudaEvent_t mid;
  CK(cudaEventCreateWithFlags(&mid, cudaEventDisableTiming));

  // expect: 1 pending, 0 complete, -1 only observed (graft does not rely on it).
  struct Fact {
    const char* name;
    int expect;
    bool pending;
  };
  Fact facts[] = {
      {"record_legacy_after_blocking", 1, pendingWhileSpinning([&](cudaEvent_t e, auto spin, auto*) {
         spin(blocking);
         CK(cudaEventRecord(e, legacy));
       })},
      {"record_blocking_after_legacy", 1, pendingWhileSpinning([&](cudaEvent_t e, auto spin, auto*) {
         spin(legacy);
         CK(cudaEventRecord(e, blocking));
       })},
      {"wait_blocking_then_record_legacy", 1, pendingWhileSpinning([&](cudaEvent_t e, auto spin, auto*) {
         spin(nonBlocking);
         CK(cudaEventRecord(mid, nonBlocking));
         CK(cudaStreamWaitEvent(blocking, mid, 0));
         CK(cudaEventRecord(e, legacy));
       })},
      {"wait_legacy_then_record_blocking", 1, pendingWhileSpinning([&](cudaEvent_t e, auto spin, auto*) {
         spin(nonBlocking);
         CK(cudaEventRecord(mid, nonBlocking));
         CK(cudaStreamWaitEvent(legacy, mid, 0));
         CK(cudaEventRecord(e, blocking));
       })},
      {"graph_on_legacy_then_record_blocking", 1, pendingWhileSpinning([&](cudaEvent_t e, auto, auto*) {
         CK(cudaGraphLaunch(spinGraph(false), legacy));
         CK(cudaEventRecord(e, blocking));
       })},
      {"graph_on_blocking_then_record_legacy", 1, pendingWhileSpinning([&](cudaEvent_t e, auto, auto*) {
         CK(cudaGraphLaunch(spinGraph(false), blocking));
         CK(cudaEventRecord(e, legacy));
       })},
      {"branched_graph_on_legacy_then_record_blocking", 1, pendingWhileSpinning([&](cudaEvent_t e, auto, auto*) {
         CK(cudaGraphLaunch(spinGraph(true), legacy));
         CK(cudaEventRecord(e, blocking));
       })},
      {"branched_graph_on_legacy_then_kernel_blocking", 1, pendingWhileSpinning([&](cudaEvent_t e, auto, auto*) {
         CK(cudaGraphLaunch(spinGraph(true), legacy));
         spinUntil<<<1, 1, 0, blocking>>>(g_dev, 0);
         CK(cudaEventRecord(e, blocking));
       })},
      {"kernel_blocking_after_legacy_stream_query", 1, pendingWhileSpinning([&](cudaEvent_t, auto spin, auto* q) {
         spin(legacy);
         spinUntil<<<1, 1, 0, blocking>>>(g_dev, 0);
         *q = blocking;
       })},
      {"wait_blocking_after_legacy_stream_query", -1, pendingWhileSpinning([&](cudaEvent_t, auto spin, auto* q) {
         spin(legacy);
         CK(cudaEventRecord(mid, nonBlocking));
         CK(cudaStreamWaitEvent(blocking, mid, 0));
         *q = blocking;
       })},
      {"wait_legacy_after_blocking_stream_query", -1, pendingWhileSpinning([&](cudaEvent_t, auto spin, auto* q) {
         spin(blocking);
         CK(cudaEventRecord(mid, nonBlocking));
         CK(cudaStreamWaitEvent(legacy, mid, 0));
         *q = legacy;
       })},
      {"record_blocking_after_legacy_stream_query", -1, pendingWhileSpinning([&](cudaEvent_t e, auto spin, auto* q) {
         spin(legacy);
         CK(cudaEventRecord(e, blocking));
         *q = blocking;
       })},
      {"control_record_legacy_after_non_blocking", 0, pendingWhileSpinning([&](cudaEvent_t e, auto spin, auto*) {
         spin(nonBlocking);
         CK(cudaEventRecord(e, legacy));
       })},
      {"control_record_non_blocking_after_legacy", 0, pendingWhileSpinning([&](cudaEvent_t e, auto spin, auto*) {
         spin(legacy);
         CK(cudaEventRecord(e, nonBlocking));
       })},
  };
  int wrong = 0, asserted = 0;
  for (const Fact& f : facts) {
    const bool ok = f.expect < 0 || f.pending == bool(f.expect);
    wrong += !ok;
    asserted += f.expect >= 0;
    std::printf("%-48s %s (probed %s while the kernel spun)\n", f.name,
                f.expect < 0 ? "observed" : ok ? "holds" : "DOES NOT HOLD", f.pending ? "pending" : "complete");
  }
  const auto [updateRefused, launchUnchecked] = allowanceFacts();
  for (const auto& [name, holds] : {std::pair{"allowance_update_refused", updateRefused},
                                    std::pair{"allowance_launch_unchecked", launchUnchecked}}) {
    wrong += !holds;
    ++asserted;
    std::printf("%-48s %s\n", name, holds ? "holds" : "DOES NOT HOLD");
  }
  observeKernelHandleAttributes();
  ++asserted;
  wrong += !poolHandleFacts();
  std::printf("driver_facts: %d of %d hold\n", asserted - wrong, asserted);
  return wrong ? 1 : 0;
}
