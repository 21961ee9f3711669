// Helpers shared by the helper-written trap programs of the later rounds
// (traps_r11.cu, traps_r13.cu), on top of trap_common.cuh: checkpoints, zeroed
// buffers, untimed events, blocking streams, kernels loaded ahead, mapped
// pinned memory. Every call checks its CUDA status (exit 1 on failure).
#pragma once

#include <condition_variable>
#include <mutex>

#include "trap_common.cuh"

namespace {

// A checkpoint every 50 steps and at the last one.
bool at(int i) { return i % 50 == 49 || i == g_iters - 1; }

uint32_t* zeroBuffer(size_t words) {
  uint32_t* d = nullptr;
  CK(cudaMalloc(&d, words * 4));
  CK(cudaMemset(d, 0, words * 4));
  return d;
}

cudaEvent_t untimedEvent() {
  cudaEvent_t e = nullptr;
  CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

cudaStream_t blockingStream() {
  cudaStream_t s = nullptr;
  CK(cudaStreamCreate(&s));
  return s;
}

// Loads a kernel now (lazy loading): its first launch then loads nothing.
template <typename K>
void preload(K kernel) {
  cudaFuncAttributes a;
  CK(cudaFuncGetAttributes(&a, kernel));
}

// Mapped pinned memory: the host pointer and the device pointer.
struct Mapped {
  uint32_t* host = nullptr;
  uint32_t* dev = nullptr;
};
// Filled with a pattern from `seed`, or zeros for seed 0.
Mapped mappedBuffer(size_t words, uint32_t seed) {
  Mapped m;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&m.host), words * 4, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.dev), m.host, 0));
  for (size_t k = 0; k < words; ++k) m.host[k] = seed ? seed * 2654435761u + uint32_t(k) * 2246822519u : 0u;
  return m;
}

// A texture object over a CUDA array: unnormalized coordinates, clamped,
// point sampled, elements as stored.
cudaTextureObject_t pointTexture(cudaArray_t a) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = a;
  cudaTextureDesc td = {};
  td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
  td.filterMode = cudaFilterModePoint;
  td.readMode = cudaReadModeElementType;
  td.normalizedCoords = 0;
  cudaTextureObject_t t = 0;
  CK(cudaCreateTextureObject(&t, &res, &td, nullptr));
  return t;
}

// Turns between host threads: waitFor(n) returns once n turns have passed;
// pass() ends the current turn.
struct Turns {
  std::mutex m;
  std::condition_variable cv;
  long turn = 0;
  void waitFor(long want) {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return turn == want; });
  }
  void pass() {
    {
      std::lock_guard<std::mutex> l(m);
      ++turn;
    }
    cv.notify_all();
  }
};

}  // namespace
