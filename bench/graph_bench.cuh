// Shared by the driver micro-benchmarks (patch_cost.cu, launch_cost.cu): their
// kernels, error check and the two steps of building a graph they both take.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

struct Big { unsigned long long v[400]; };  // 3200 bytes, like a foreach TensorListMetadata

__global__ void small_k(float* p, int n, float s) { if (threadIdx.x == 0 && n < 0) p[0] = s; }
__global__ void big_k(Big b, float* p) { if (threadIdx.x == 0 && b.v[0] == 12345) p[0] = 1; }
__global__ void spin_k(long long cycles) { long long t = clock64(); while (clock64() - t < cycles) {} }

#define CK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { std::printf("error %s at %d\n", cudaGetErrorString(err_), __LINE__); std::exit(1); } } while (0)

// The node the capture on `s` just added (the capture's only dependency).
inline cudaGraphNode_t lastCapturedNode(cudaStream_t s) {
  cudaStreamCaptureStatus st; const cudaGraphNode_t* deps; size_t nd;
  CK(cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, nullptr, &nd));
  return deps[0];
}

// Instantiates `g`, uploads it on `s` and waits for the upload.
inline cudaGraphExec_t instantiateUploaded(cudaGraph_t g, cudaStream_t s) {
  cudaGraphExec_t e = nullptr;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphUpload(e, s));
  CK(cudaStreamSynchronize(s));
  return e;
}
