// copy_bench: what graphing device copies and memsets costs on the GPU, per
// size. One step = a copy of N bytes between two buffers, a memset of N bytes
// and a small kernel, on one stream; `--mode eager` issues the steps, `--mode
// graph` captures one step with the runtime (memcpy and memset nodes) and
// launches that graph. Under graft (LD_PRELOAD, eager mode) the steps are
// replayed from graft's graphs, where copies and memsets of device memory are
// graft's own kernels (src/graph/copy_kernels.h): graft against `--mode graph`
// at a size is graft's kernels against the driver's nodes.
// --offset K moves both copies' sources and the memset's destination K bytes
// into their buffers (K not a multiple of 4: what a slice of a byte tensor at
// an odd offset gives), the copies' destinations stay aligned.
//   copy_bench --bytes N [--iters I] [--mode eager|graph] [--offset K]
// Prints one line: bytes, mode, microseconds per step (median of 5 blocks).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "copy_bench: %s -> %s\n", #call, cudaGetErrorName(e_));                 \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__global__ void touch(unsigned* p, unsigned v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) p[0] += v;
}

int main(int argc, char** argv) {
  size_t bytes = 1 << 20;
  int iters = 200;
  bool graph = false;
  size_t offset = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bytes") && i + 1 < argc) bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) graph = !std::strcmp(argv[++i], "graph");
    else if (!std::strcmp(argv[i], "--offset") && i + 1 < argc) offset = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: copy_bench --bytes N [--iters I] [--mode eager|graph] [--offset K]\n");
      return 2;
    }
  }
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned char *a, *b, *c;
  CK(cudaMalloc(&a, bytes + offset));
  CK(cudaMalloc(&b, bytes + offset));
  CK(cudaMalloc(&c, bytes + offset));
  CK(cudaMemset(a, 1, bytes + offset));
  auto step = [&](int i) {
    CK(cudaMemcpyAsync(b, a + offset, bytes, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemsetAsync(c + offset, i & 0xff, bytes, s));
    touch<<<1, 32, 0, s>>>(reinterpret_cast<unsigned*>(b), 1);
    CK(cudaMemcpyAsync(a, c + offset, bytes, cudaMemcpyDeviceToDevice, s));
  };
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    step(7);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
  }
  std::vector<double> blocks;
  for (int blk = 0; blk < 6; ++blk) {
    CK(cudaStreamSynchronize(s));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      if (graph) CK(cudaGraphLaunch(exec, s));
      else step(7);  // the same values every step (no node updates)
    }
    CK(cudaStreamSynchronize(s));
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (blk > 0) blocks.push_back(us / iters);  // the first block warms up (and lets graft capture)
  }
  std::sort(blocks.begin(), blocks.end());
  std::printf("%zu %s %.2f offset %zu\n", bytes, graph ? "graph" : "eager", blocks[blocks.size() / 2], offset);
  return 0;
}
