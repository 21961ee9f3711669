// launch_cost: what cuGraphLaunch costs on the CPU for a chain of small kernel
// nodes, with and without node updates just before the launch, on the legacy
// stream and on a created stream, with the GPU idle or busy. Prints one line per
// case: median microseconds per cuGraphLaunch call (the updates are not timed).
//   launch_cost [nodes ...]     default: 40 500
#include <algorithm>
#include <chrono>
#include <vector>

#include "graph_bench.cuh"

static double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { std::printf("launch_cost: no CUDA device\n"); return 77; }
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {40, 500};
  float* p;
  CK(cudaMalloc(&p, 1024));
  cudaStream_t created, cap;
  CK(cudaStreamCreate(&created));
  CK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
  for (int nodesN : sizes) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeRelaxed));
    std::vector<cudaGraphNode_t> nodes;
    for (int i = 0; i < nodesN; ++i) {
      small_k<<<1, 32, 0, cap>>>(p, i, 1.0f);
      nodes.push_back(lastCapturedNode(cap));
    }
    CK(cudaStreamEndCapture(cap, &g));
    cudaGraphExec_t e = instantiateUploaded(g, cap);
    for (int streamKind = 0; streamKind < 2; ++streamKind) {
      cudaStream_t s = streamKind == 0 ? cudaStreamLegacy : created;
      for (int busy = 0; busy < 2; ++busy) {
        for (int updates : {0, 1, 8}) {
          std::vector<double> us;
          for (int rep = 0; rep < 200; ++rep) {
            if (rep % 10 == 0) {
              CK(cudaStreamSynchronize(s));
              if (busy) spin_k<<<1, 1, 0, s>>>(20000000);  // ~10 ms: the launches stay queued
            }
            for (int k = 0; k < updates; ++k) {
              cudaKernelNodeParams kp{};
              int ni = rep + k; float sc = float(rep); float* pp = p;
              void* args[3] = {&pp, &ni, &sc};
              kp.func = (void*)small_k; kp.gridDim = dim3(1); kp.blockDim = dim3(32); kp.kernelParams = args;
              CK(cudaGraphExecKernelNodeSetParams(e, nodes[(k * 7) % nodesN], &kp));
            }
            auto t0 = std::chrono::steady_clock::now();
            CK(cudaGraphLaunch(e, s));
            auto t1 = std::chrono::steady_clock::now();
            if (rep >= 10) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          }
          CK(cudaStreamSynchronize(s));
          std::printf("launch_cost: %4d nodes, %-7s stream, GPU %-4s, %d updates before: %6.2f us per cuGraphLaunch\n",
                      nodesN, streamKind == 0 ? "legacy" : "created", busy ? "busy" : "idle", updates, medianOf(us));
        }
      }
    }
    CK(cudaGraphExecDestroy(e));
    CK(cudaGraphDestroy(g));
  }
  return 0;
}
