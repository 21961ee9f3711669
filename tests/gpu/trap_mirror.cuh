// Host mirrors for the helper-written trap programs that check every
// scenario against the host (traps_r15.cu, traps_r17.cu, traps_r19.cu), on top of
// trap_helpers.cuh: mirrored buffers of kS words, device-to-host fetches, the
// check of a buffer against its mirror, and host copies of trap_common.cuh's
// mix and mix2. Every call checks its CUDA status (exit 1 on failure).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "trap_helpers.cuh"

namespace {

constexpr int kS = 4096;  // words per buffer in this program's mirrored scenarios
constexpr int kSGrid = kS / kBlock;

void addCode(Digest& d, int code) { d.add(uint64_t(uint32_t(code))); }

// The host's copy of deviceBuffer(seed, n).
std::vector<uint32_t> hostPattern(uint32_t seed, int n = kS) {
  std::vector<uint32_t> h(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) h[size_t(i)] = seed * 2654435761u + uint32_t(i) * 40503u;
  return h;
}

template <typename T>
std::vector<T> fetch(const void* d, size_t count) {
  std::vector<T> h(count);
  CK(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// Compares device memory with its host mirror (FAIL and exit 1 on a
// mismatch), then prints the mirror's digest.
template <typename T>
void checkMirror(const char* what, int at, const void* d, const std::vector<T>& mirror) {
  const std::vector<T> got = fetch<T>(d, mirror.size());
  for (size_t k = 0; k < mirror.size(); ++k) {
    if (got[k] != mirror[k]) {
      std::printf("FAIL %s at step %d: element %zu is %llx, the host mirror says %llx\n", what, at, k,
                  static_cast<unsigned long long>(got[k]), static_cast<unsigned long long>(mirror[k]));
      std::exit(1);
    }
  }
  print(what, at, hostDigest(mirror.data(), mirror.size() * sizeof(T)));
}

// Host mirrors of trap_common.cuh's mix and mix2.
void mixHost(std::vector<uint32_t>& dst, const std::vector<uint32_t>& src, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k)
    dst[size_t(k)] = rotl(dst[size_t(k)], 5) ^ (src[size_t((k * 7 + 4099) % n)] + salt + uint32_t(k));
}
void mix2Host(std::vector<uint32_t>& dst, const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, int n,
              uint32_t salt) {
  for (int k = 0; k < n; ++k)
    dst[size_t(k)] =
        rotl(dst[size_t(k)], 3) + (a[size_t((k * 5 + 77) % n)] ^ rotl(b[size_t((k * 3 + 11) % n)], 7)) + salt;
}

// Word-wise kernels over a buffer seen as bytes on the host (memory pools,
// mappings), with their mirrors: traps_r15 and traps_r19.
// Every word changes on its own (no other index is read).
__global__ void byteStir(uint32_t* w, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) w[k] = rotl(w[k], 9) ^ hash32(uint32_t(k) ^ salt);
}
[[maybe_unused]] void byteStirHost(std::vector<uint8_t>& bytes, uint32_t salt) {
  for (size_t k = 0; k < bytes.size() / 4; ++k) {
    uint32_t v;
    std::memcpy(&v, &bytes[4 * k], 4);
    v = rotl(v, 9) ^ hash32(uint32_t(k) ^ salt);
    std::memcpy(&bytes[4 * k], &v, 4);
  }
}

// acc folds in the buffer's words at other indices.
__global__ void accFold(uint32_t* acc, const uint32_t* w, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) acc[k] = rotl(acc[k], 1) ^ (w[(uint32_t(k) * 3u + salt) % uint32_t(n)] + uint32_t(k));
}
[[maybe_unused]] void accFoldHost(std::vector<uint32_t>& acc, const std::vector<uint8_t>& bytes, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k) {
    uint32_t v;
    std::memcpy(&v, &bytes[4 * size_t((uint32_t(k) * 3u + salt) % uint32_t(n))], 4);
    acc[size_t(k)] = rotl(acc[size_t(k)], 1) ^ (v + uint32_t(k));
  }
}

// The driver API's names for the runtime's handles.
CUstream cu(cudaStream_t s) { return reinterpret_cast<CUstream>(s); }
CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// A MISMATCH line and exit 1 where host-visible words differ from their mirror.
[[maybe_unused]] void expectWords(const char* what, int at, const uint32_t* got, const uint32_t* want, size_t words) {
  for (size_t k = 0; k < words; ++k) {
    if (got[k] != want[k]) {
      std::printf("MISMATCH %s at step %d: word %zu is %08x, the host mirror says %08x\n", what, at, k, got[k],
                  want[k]);
      std::fflush(stdout);
      std::exit(1);
    }
  }
}
// The same, then the mirror's digest.
[[maybe_unused]] void checkWords(const char* what, int at, const uint32_t* got, const std::vector<uint32_t>& want) {
  expectWords(what, at, got, want.data(), want.size());
  print(what, at, hostDigest(want.data(), want.size() * 4));
}
// Device memory against its mirror (a synchronous copy on the legacy stream:
// the caller has made sure the buffer's writers are done).
[[maybe_unused]] void checkDev(const char* what, int at, const void* d, const std::vector<uint32_t>& want) {
  const std::vector<uint32_t> got = fetch<uint32_t>(d, want.size());
  checkWords(what, at, got.data(), want);
}

// A kernel's threads wait about `cycles` clock cycles (results never depend on it).
__device__ __forceinline__ void spinCycles(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// Three word-wise functions of one signature (fn 0, 1, 2), for kernels whose
// launches on one buffer must keep their order (any two differ when swapped),
// and for their host mirrors (traps_r29, traps_r31). dst must not alias src.
__host__ __device__ inline void orderedOpAt(int fn, uint32_t* dst, const uint32_t* src, int n, uint32_t salt,
                                            int k) {
  switch (fn) {
    case 0:
      dst[k] = rotl(dst[k], 5) + (src[(uint32_t(k) + salt) % uint32_t(n)] ^ salt);
      break;
    case 1:
      dst[k] = (dst[k] ^ src[(k * 3 + 1) % n]) * 0x9e3779b1u + salt;
      break;
    default:
      dst[k] = rotl(dst[k] ^ salt, 13) - src[n - 1 - k];
      break;
  }
}

// A surface object over the whole of array `a`.
inline cudaSurfaceObject_t surfaceOver(cudaArray_t a) {
  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeArray;
  res.res.array.array = a;
  cudaSurfaceObject_t s = 0;
  CK(cudaCreateSurfaceObject(&s, &res));
  return s;
}

}  // namespace
