// Small, fast, non-cryptographic hashing used for op shapes and sequences.
// Threading: pure functions. Never allocates.
#pragma once

#include <cstdint>
#include <cstring>

namespace graft::core {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

inline uint64_t hashCombine(uint64_t seed, uint64_t v) {
  return mix64(seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2)));
}

// Fast enough for the hot path (a few instructions per 8 bytes); equal
// hashes are always confirmed by an exact byte comparison.
inline uint64_t hashBytes(const void* data, size_t n, uint64_t seed = 0x51ed270b27a3e6d1ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  return mix64(h ^ tail ^ (uint64_t(n) << 56));
}

// Polynomial hash of a sequence of 64-bit element hashes, so that the hash of
// a concatenation can be computed from its parts:
//   H(a ++ b) = H(a) * B^|b| + H(b)
struct SequenceHash {
  static constexpr uint64_t kBase = 0x100000001b3ull * 0x9e37ull + 1;
  uint64_t value = 0;
  uint64_t basePow = 1;  // B^length
  uint32_t length = 0;

  void append(uint64_t elementHash) {
    value = value * kBase + elementHash;
    basePow *= kBase;
    ++length;
  }
  void append(const SequenceHash& other) {
    value = value * other.basePow + other.value;
    basePow *= other.basePow;
    length += other.length;
  }
  bool operator==(const SequenceHash& o) const { return value == o.value && length == o.length; }
};

}  // namespace graft::core
