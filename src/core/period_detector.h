// PeriodDetector: finds the period of a repeating token stream in amortized
// O(1) per token.
//
// Candidate periods come from an n-gram index (the last position each run of
// kGram tokens was seen); each candidate keeps the length of its current run
// (consecutive positions i with token[i] == token[i - period]). A candidate is
// confirmed when its run covers `warmup` identical instances of the period,
// i.e. run >= (warmup - 1) * period (at least one period). A confirmed
// candidate is reported once, and stays quiet until its run breaks.
//
// Threading: not thread-safe (engine lock). Allocates only in the constructor.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace graft::core {

class PeriodDetector {
 public:
  static constexpr uint32_t kGram = 4;
  static constexpr size_t kMaxCandidates = 8;

  PeriodDetector(uint32_t warmup, uint32_t maxPeriod);

  // Feeds the next token hash. Returns the period newly confirmed at this
  // token (the largest, if several), or 0.
  uint32_t push(uint64_t tokenHash);
  void reset();


 private:
  struct Candidate {
    uint32_t period = 0;
    uint64_t run = 0;
    bool reported = false;
  };
  uint64_t at(uint64_t index) const { return ring_[index & ring_mask_]; }
  uint64_t required(uint32_t period) const;

  uint32_t warmup_;
  uint32_t max_period_;
  std::vector<uint64_t> ring_;
  uint64_t ring_mask_;
  uint64_t pushed_ = 0;
  std::vector<uint64_t> gram_keys_;
  std::vector<uint64_t> gram_pos_;  // position + 1; 0 = empty
  uint64_t gram_mask_;
  std::array<Candidate, kMaxCandidates> candidates_{};
  size_t num_candidates_ = 0;
};

}  // namespace graft::core
