// patch_cost: what cuGraphExecKernelNodeSetParams costs on the CPU, for small
// and large kernel parameter blocks, with the graph idle and with launches of
// it still queued on the GPU. Prints one line per case: microseconds per update.
#include <chrono>
#include <vector>

#include "graph_bench.cuh"

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { std::printf("patch_cost: no CUDA device\n"); return 77; }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  float* p;
  CK(cudaMalloc(&p, 1024));
  const int kNodes = 64;
  Big big{};
  for (int variant = 0; variant < 2; ++variant) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    spin_k<<<1, 1, 0, s>>>(2000000);  // ~1 ms of GPU time so launches stay queued
    std::vector<cudaGraphNode_t> nodes;
    for (int i = 0; i < kNodes; ++i) {
      if (variant == 0) small_k<<<1, 32, 0, s>>>(p, i, 1.0f); else big_k<<<1, 32, 0, s>>>(big, p);
      nodes.push_back(lastCapturedNode(s));
    }
    CK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t e = instantiateUploaded(g, s);
    for (int inflight = 0; inflight < 2; ++inflight) {
      double total = 0; int count = 0;
      for (int rep = 0; rep < 50; ++rep) {
        if (inflight) CK(cudaGraphLaunch(e, s)); else CK(cudaStreamSynchronize(s));
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kNodes; ++i) {
          cudaKernelNodeParams kp{};
          int ni = rep + i; float sc = rep; float* pp = p; Big bb = big; bb.v[1] = rep;
          void* args_small[3] = {&pp, &ni, &sc};
          void* args_big[2] = {&bb, &pp};
          kp.func = variant == 0 ? (void*)small_k : (void*)big_k;
          kp.gridDim = dim3(1); kp.blockDim = dim3(32);
          kp.kernelParams = variant == 0 ? args_small : args_big;
          CK(cudaGraphExecKernelNodeSetParams(e, nodes[i], &kp));
        }
        auto t1 = std::chrono::steady_clock::now();
        total += std::chrono::duration<double, std::micro>(t1 - t0).count(); count += kNodes;
      }
      CK(cudaStreamSynchronize(s));
      std::printf("patch_cost: %s params, graph %s: %.2f us per node update\n",
                  variant == 0 ? "16-byte" : "3208-byte", inflight ? "queued/running" : "idle", total / count);
    }
  }
  return 0;
}
