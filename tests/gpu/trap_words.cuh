// Mirrored buffers of kW words for the red-team rounds traps_r33, traps_r35
// and traps_r37, on top of trap_mirror.cuh: a device buffer with its host
// mirror, trap_common.cuh's mix and mix2 over it with their mirrors, and the
// MISMATCH line a scenario ends with when the GPU and the mirror disagree.
// Every call checks its CUDA status (exit 1 on failure).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trap_mirror.cuh"

namespace {

constexpr int kW = 2048;  // words per buffer
constexpr int kWGrid = kW / kBlock;

// A device buffer (deviceBuffer's pattern) and its host mirror.
struct Buf {
  uint32_t* d = nullptr;
  std::vector<uint32_t> h;
  explicit Buf(uint32_t seed, int n = kW) : d(deviceBuffer(seed, n)), h(hostPattern(seed, n)) {}
  void check(const char* tag, const char* what, int at) const {
    const std::string name = std::string(tag) + "_" + what;
    checkDev(name.c_str(), at, d, h);
  }
};

// trap_common.cuh's mix and mix2 over kW words, with their mirrors. dst must
// not alias a source.
inline void mixRaw(cudaStream_t s, uint32_t* dst, std::vector<uint32_t>& hdst, const uint32_t* src,
                   const std::vector<uint32_t>& hsrc, uint32_t salt) {
  mix<<<kWGrid, kBlock, 0, s>>>(dst, src, kW, salt);
  CKL();
  mixHost(hdst, hsrc, kW, salt);
}
inline void mixOn(cudaStream_t s, Buf& dst, const Buf& src, uint32_t salt) {
  mixRaw(s, dst.d, dst.h, src.d, src.h, salt);
}
inline void mix2On(cudaStream_t s, Buf& dst, const Buf& a, const Buf& b, uint32_t salt) {
  mix2<<<kWGrid, kBlock, 0, s>>>(dst.d, a.d, b.d, kW, salt);
  CKL();
  mix2Host(dst.h, a.h, b.h, kW, salt);
}

[[noreturn]] inline void mismatch(const char* scenario, int step, const std::string& what) {
  std::printf("MISMATCH %s at step %d: %s\n", scenario, step, what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

}  // namespace
