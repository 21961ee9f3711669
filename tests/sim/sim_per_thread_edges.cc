// sim_per_thread_edges: the per-thread default stream where graft's proxy
// for it (src/graph/per_thread_streams.h) meets the rest of the program.
//   sim_per_thread_edges capture [N]   each step: work on the per-thread
//       stream, then, while the program captures another stream, more work on
//       the per-thread stream that reads the first (not captured: it runs);
//       the host syncs the per-thread stream and reads it back.
//   sim_per_thread_edges release       a kernel on the per-thread stream waits
//       for a host flag; the program retains and releases the primary
//       context (it stays alive) before it sets the flag: the release must
//       not wait for that kernel (the simulator aborts on a deadlock).
//   sim_per_thread_edges pool-free [N] (with GRAFT_POOL=1) each step: a block
//       from a pool allocation, read by a kernel on the per-thread stream issued
//       during another stream's capture, freed on the per-thread stream, then
//       another stream's allocation reuses the memory and writes it.
//   sim_per_thread_edges exit-read [N] N launches on the per-thread stream,
//       then main returns; a static destructor, which runs after graft's exit
//       handler and so without graft, reads the result with a synchronous
//       copy on the per-thread stream.
//   sim_per_thread_edges exit-gate     a kernel on the per-thread stream waits
//       for a host flag that only a static destructor sets (after graft's
//       exit handler): graft's exit must not wait for it.
//   sim_per_thread_edges rest-pool-free [N] (with GRAFT_POOL=1 and graft
//       resting, GRAFT_DORMANT_AFTER_OPS) each step: a pool block read by a
//       kernel on the per-thread stream behind a kernel waiting for the host,
//       freed on the per-thread stream; another stream's allocation must not
//       get the block before the host lets the reader run.
// Exit 1 on a wrong value or a failed call.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

simtest::Driver g_drv;
CUfunction g_add;

// exit-read and exit-gate: in a static destructor, which runs after graft's
// exit handler, first opens the gate a kernel waits for (exit-gate), then
// reads the result on the per-thread stream, which must be `expected`.
struct ExitCheck {
  const char* scenario = nullptr;
  CUcontext ctx = nullptr;
  volatile uint64_t* gate = nullptr;
  CUdeviceptr result = 0;
  uint64_t expected = 0;
  ~ExitCheck() {
    if (!result) return;
    if (gate) *gate = 1;
    uint64_t got = 0;
    g_drv.plain.cuCtxSetCurrent(ctx);
    const CUresult r = g_drv.perThread.cuMemcpyDtoH(&got, result, 8);
    std::printf("sim_per_thread_edges %s: read %llu in a static destructor (rc %d), expected %llu\n", scenario,
                (unsigned long long)got, int(r), (unsigned long long)expected);
    std::fflush(stdout);
    if (got != expected || r != CUDA_SUCCESS) _exit(1);
  }
};
ExitCheck g_exitCheck;  // constructed before graft starts, so destroyed after graft's exit handler

// A pinned host flag a sim_gate kernel waits for (it runs once *flag >= its third parameter).
volatile uint64_t* hostFlag() {
  void* host = nullptr;
  SIM_CHECK(g_drv.plain.cuMemAllocHost(&host, 64));
  auto* flag = static_cast<volatile uint64_t*>(host);
  *flag = 0;
  return flag;
}

int captureScenario(int n) {
  const simtest::DriverApi& pt = g_drv.perThread;
  const simtest::DriverApi& cu = g_drv.plain;
  CUstream other;
  SIM_CHECK(cu.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
              w = simtest::zeroedBuffer(cu);
  int wrong = 0;
  for (int it = 1; it <= n; ++it) {
    SIM_CHECK(simtest::launchAdd(pt, g_add, x, x, 1, nullptr));    // x += 1
    SIM_CHECK(simtest::launchAdd(pt, g_add, y, x, 100, nullptr));  // y = x + 100
    SIM_CHECK(cu.cuStreamBeginCapture(other, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    SIM_CHECK(simtest::launchAdd(cu, g_add, w, w, 1, other));      // captured
    SIM_CHECK(simtest::launchAdd(pt, g_add, z, y, 1, nullptr));    // z = y + 1, runs now
    CUgraph g = nullptr;
    SIM_CHECK(cu.cuStreamEndCapture(other, &g));
    if (g) SIM_CHECK(cu.cuGraphDestroy(g));
    SIM_CHECK(pt.cuStreamSynchronize(nullptr));
    uint64_t got = 0;
    SIM_CHECK(pt.cuMemcpyDtoH(&got, z, 8));
    const uint64_t want = uint64_t(it) + 101;
    if (got != want && wrong++ < 5)
      std::printf("sim_per_thread_edges capture: step %d: z = %llu, expected %llu\n", it, (unsigned long long)got,
                  (unsigned long long)want);
  }
  return wrong;
}

int releaseScenario() {
  const simtest::DriverApi& pt = g_drv.perThread;
  const simtest::DriverApi& cu = g_drv.plain;
  CUfunction gate = simtest::libraryKernel3("sim_gate_per_thread_edges");
  volatile uint64_t* flag = hostFlag();
  CUdeviceptr x = simtest::zeroedBuffer(cu);
  SIM_CHECK(simtest::launchAdd(pt, g_add, x, x, 1, nullptr));
  SIM_CHECK(simtest::launchAdd(pt, gate, CUdeviceptr(flag), x, 1, nullptr));  // runs once *flag >= 1
  SIM_CHECK(simtest::launchAdd(pt, g_add, x, x, 1, nullptr));
  CUdevice dev = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev, 0));
  CUcontext again = nullptr;
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&again, dev));
  SIM_CHECK(cu.cuDevicePrimaryCtxRelease(dev));  // not the last reference: returns at once
  *flag = 1;
  SIM_CHECK(pt.cuStreamSynchronize(nullptr));
  uint64_t got = 0;
  SIM_CHECK(pt.cuMemcpyDtoH(&got, x, 8));
  if (got == 2) return 0;
  std::printf("sim_per_thread_edges release: x = %llu, expected 2\n", (unsigned long long)got);
  return 1;
}

// pool-free and rest-pool-free: each step a pool block (set on stream `a`)
// is read on the per-thread stream, during another stream's capture or
// behind a gate the host opens only after the rest of the step, then freed
// there; stream `b` then allocates (the pool may hand out the same block)
// and writes 999 into it.
int poolFreeScenario(int n, bool behindGate) {
  const simtest::DriverApi& pt = g_drv.perThread;
  const simtest::DriverApi& cu = g_drv.plain;
  CUfunction gate = simtest::libraryKernel3("sim_gate_per_thread_edges");
  volatile uint64_t* flag = behindGate ? hostFlag() : nullptr;
  CUstream captured, a, b;
  SIM_CHECK(cu.cuStreamCreate(&captured, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr q = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
  int wrong = 0;
  for (int it = 1; it <= n; ++it) {
    CUdeviceptr block = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&block, 64, a));
    SIM_CHECK(cu.cuMemsetD32Async(block, 7, 2, a));
    SIM_CHECK(cu.cuStreamSynchronize(a));
    if (behindGate) {
      SIM_CHECK(simtest::launchAdd(pt, gate, CUdeviceptr(flag), w, uint64_t(it), nullptr));
      SIM_CHECK(simtest::launchAdd(pt, g_add, q, block, 1, nullptr));  // q = *block + 1, after the gate
    } else {
      SIM_CHECK(cu.cuStreamBeginCapture(captured, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
      SIM_CHECK(simtest::launchAdd(cu, g_add, w, w, 1, captured));
      SIM_CHECK(simtest::launchAdd(pt, g_add, q, block, 1, nullptr));  // q = *block + 1, runs now
      CUgraph g = nullptr;
      SIM_CHECK(cu.cuStreamEndCapture(captured, &g));
      if (g) SIM_CHECK(cu.cuGraphDestroy(g));
    }
    SIM_CHECK(pt.cuMemFreeAsync(block, nullptr));  // after the reader, in the stream's order
    CUdeviceptr reuse = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&reuse, 64, b));
    SIM_CHECK(cu.cuMemsetD32Async(reuse, 999, 2, b));
    if (behindGate) {
      SIM_CHECK(cu.cuStreamSynchronize(b));
      *flag = uint64_t(it);
    }
    SIM_CHECK(cu.cuCtxSynchronize());
    uint64_t got = 0;
    SIM_CHECK(cu.cuMemcpyDtoH(&got, q, 8));
    const uint64_t want = (uint64_t(7) << 32 | 7) + 1;
    if (got != want && wrong++ < 5)
      std::printf("sim_per_thread_edges %s: step %d: q = %llx, expected %llx\n",
                  behindGate ? "rest-pool-free" : "pool-free", it, (unsigned long long)got,
                  (unsigned long long)want);
    SIM_CHECK(cu.cuMemFreeAsync(reuse, b));
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "";
  const int n = argc > 2 ? std::atoi(argv[2]) : 200;
  if (n < 1 || (std::strcmp(scenario, "capture") && std::strcmp(scenario, "release") &&
                std::strcmp(scenario, "pool-free") && std::strcmp(scenario, "exit-read") &&
                std::strcmp(scenario, "exit-gate") && std::strcmp(scenario, "rest-pool-free"))) {
    std::printf("usage: sim_per_thread_edges capture|release|pool-free|exit-read|exit-gate|rest-pool-free [N]\n");
    return 2;
  }
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_per_thread_edges", &g_drv, &ctx)) return rc;
  g_add = simtest::libraryKernel3("sim_add_per_thread_edges");
  int wrong = 0;
  if (!std::strcmp(scenario, "capture")) {
    wrong = captureScenario(n);
  } else if (!std::strcmp(scenario, "release")) {
    wrong = releaseScenario();
  } else if (!std::strcmp(scenario, "pool-free")) {
    wrong = poolFreeScenario(n, false);
  } else if (!std::strcmp(scenario, "rest-pool-free")) {
    wrong = poolFreeScenario(n, true);
  } else if (!std::strcmp(scenario, "exit-gate")) {
    CUfunction gate = simtest::libraryKernel3("sim_gate_per_thread_edges");
    volatile uint64_t* flag = hostFlag();
    CUdeviceptr x = simtest::zeroedBuffer(g_drv.plain);
    SIM_CHECK(simtest::launchAdd(g_drv.perThread, g_add, x, x, 1, nullptr));
    SIM_CHECK(simtest::launchAdd(g_drv.perThread, gate, CUdeviceptr(flag), x, 1, nullptr));
    SIM_CHECK(simtest::launchAdd(g_drv.perThread, g_add, x, x, 1, nullptr));
    g_exitCheck = {"exit-gate", ctx, flag, 0, 2};
    g_exitCheck.result = x;  // last: a filled check runs at exit
  } else {
    const simtest::DriverApi& cu = g_drv.plain;
    CUdeviceptr x = simtest::zeroedBuffer(cu), result = simtest::zeroedBuffer(cu);
    for (int it = 0; it < n; ++it) SIM_CHECK(simtest::launchAdd(g_drv.perThread, g_add, x, x, 1, nullptr));
    SIM_CHECK(simtest::launchAdd(g_drv.perThread, g_add, result, x, 1000, nullptr));
    g_exitCheck = {"exit-read", ctx, nullptr, 0, uint64_t(n) + 1000};
    g_exitCheck.result = result;  // last: a filled check runs at exit
  }
  std::printf("sim_per_thread_edges %s: %d wrong, %d failed calls\n", scenario, wrong, simtest::failedCalls());
  return wrong || simtest::failedCalls() ? 1 : 0;
}
