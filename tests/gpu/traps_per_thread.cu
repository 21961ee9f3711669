// Trap programs built with `nvcc --default-stream per-thread`: stream 0 (and
// every runtime call without a stream, cudaMemcpy included) is the calling
// thread's per-thread default stream, which graft issues through a proxy
// stream of its own (src/graph/per_thread_streams.h). Each scenario is
// compared with eager line for line by check_traps.py, like traps.cu.
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <thread>
#include <vector>

#include "trap_common.cuh"

namespace {

// The per-thread stream with the legacy stream (implicit ordering both
// ways), a device copy, a memset, and a non-blocking stream forked from and
// joined back into it with events.
void ptLoop() {
  cudaStream_t side = nonBlockingStream();
  cudaEvent_t fork, join;
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  uint32_t *a = deviceBuffer(301), *b = deviceBuffer(302), *c = deviceBuffer(303), *d = deviceBuffer(304);
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock>>>(a, b, kN, i);                       // per-thread stream
    mix<<<kGrid, kBlock, 0, cudaStreamLegacy>>>(b, a, kN, i);  // after it (legacy waits)
    mix<<<kGrid, kBlock, 0, cudaStreamPerThread>>>(c, b, kN, i);  // after the legacy launch
    CK(cudaMemcpyAsync(d, c, 4096, cudaMemcpyDeviceToDevice));
    CK(cudaMemsetAsync(d + 2048, i & 0xff, 512));
    CK(cudaEventRecord(fork, 0));
    CK(cudaStreamWaitEvent(side, fork, 0));
    mix<<<kGrid, kBlock, 0, side>>>(b, d, kN, i + 7);
    CK(cudaEventRecord(join, side));
    CK(cudaStreamWaitEvent(0, join, 0));
    mix2<<<kGrid, kBlock>>>(a, b, d, kN, i);
    CKL();
    checkpoint(i, 0, "a", a);
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^
                      deviceDigest(d, kN * 4));
}

// Synchronous copies on the per-thread stream every step: a value read back
// steers the host, which writes the next step's input with cudaMemcpy.
void ptSyncCopies() {
  uint32_t *a = deviceBuffer(311), *b = deviceBuffer(312), *in = deviceBuffer(313, 64);
  uint64_t acc = 0;
  for (int i = 0; i < g_iters; ++i) {
    uint32_t host[4] = {uint32_t(i), uint32_t(acc), uint32_t(acc >> 32), 7};
    CK(cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice));
    mix<<<kGrid, kBlock>>>(a, in, 64, i);
    mix<<<kGrid, kBlock>>>(b, a, kN, i);
    mix<<<kGrid, kBlock>>>(a, b, kN, i + 1);
    CKL();
    uint32_t out[2] = {};
    CK(cudaMemcpy(out, a + (i % 1000), sizeof out, cudaMemcpyDeviceToHost));
    acc = acc * 31 + out[0] + (uint64_t(out[1]) << 20);
    if (i % 100 == 99) print("acc", i, acc);
  }
  print("end", 0, acc ^ deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Polling the per-thread stream (cudaStreamQuery(0)), then a synchronize of
// it, then stream-ordered allocations on it every step.
void ptQueryAlloc() {
  uint32_t *a = deviceBuffer(321), *b = deviceBuffer(322);
  for (int i = 0; i < g_iters; ++i) {
    uint32_t* t = nullptr;
    CK(cudaMallocAsync(&t, kN * 4, 0));
    CK(cudaMemcpyAsync(t, a, kN * 4, cudaMemcpyDeviceToDevice));
    mix<<<kGrid, kBlock>>>(t, b, kN, i);
    mix<<<kGrid, kBlock>>>(b, t, kN, i + 3);
    CK(cudaFreeAsync(t, 0));
    mix<<<kGrid, kBlock>>>(a, b, kN, i + 5);
    CKL();
    if (i % 10 == 9) {
      while (cudaStreamQuery(0) == cudaErrorNotReady) {
      }
      CK(cudaStreamSynchronize(cudaStreamPerThread));
    }
    checkpoint(i, 0, "a", a);
  }
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Part of each step captured by the program on its per-thread stream and
// launched there; launches around it go straight to the stream.
void ptProgramCapture() {
  uint32_t *a = deviceBuffer(331), *b = deviceBuffer(332);
  cudaGraphExec_t exec = nullptr;
  for (int i = 0; i < g_iters; ++i) {
    mix<<<kGrid, kBlock>>>(a, b, kN, i);
    if (i == 5) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal));
      mix<<<kGrid, kBlock, 0, cudaStreamPerThread>>>(b, a, kN, 99);
      mix<<<kGrid, kBlock, 0, cudaStreamPerThread>>>(a, b, kN, 98);
      CK(cudaStreamEndCapture(cudaStreamPerThread, &g));
      CK(cudaGraphInstantiate(&exec, g, 0));
      CK(cudaGraphDestroy(g));
    }
    if (exec) CK(cudaGraphLaunch(exec, 0));
    mix<<<kGrid, kBlock>>>(b, a, kN, i + 1);
    CKL();
    checkpoint(i, 0, "a", a);
  }
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

// Four threads run a loop each on their own per-thread stream and buffers at
// once; every thread's digests are printed afterwards in thread order.
void ptThreads() {
  constexpr int kThreads = 4;
  uint64_t digests[kThreads][4] = {};
  std::atomic<int> failed{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([t, &digests, &failed] {
      uint32_t *a = deviceBuffer(340 + t), *b = deviceBuffer(350 + t);
      for (int i = 0; i < g_iters; ++i) {
        mix<<<kGrid, kBlock>>>(a, b, kN, i + t);
        mix<<<kGrid, kBlock>>>(b, a, kN, i);
        CK(cudaMemsetAsync(b + 100, (i + t) & 0xff, 64));
        if (cudaGetLastError() != cudaSuccess) failed = 1;
        if (i % 100 == 99) {
          CK(cudaStreamSynchronize(0));
          digests[t][i / 100 % 4] = deviceDigest(a, kN * 4);
        }
      }
      CK(cudaStreamSynchronize(0));
    });
  }
  for (std::thread& w : workers) w.join();
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < 4; ++k) print("thread", t * 10 + k, digests[t][k]);
  print("end", failed.load(), 0);
}

constexpr Scenario kScenarios[] = {
    {"pt_loop", ptLoop},
    {"pt_sync_copies", ptSyncCopies},
    {"pt_query_alloc", ptQueryAlloc},
    {"pt_program_capture", ptProgramCapture},
    {"pt_threads", ptThreads},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
