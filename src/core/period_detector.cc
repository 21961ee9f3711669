#include "core/period_detector.h"

#include <algorithm>

#include "core/hash.h"

namespace graft::core {
namespace {
uint64_t nextPow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
}  // namespace

PeriodDetector::PeriodDetector(uint32_t warmup, uint32_t maxPeriod)
    : warmup_(std::max<uint32_t>(warmup, 1)), max_period_(maxPeriod) {
  ring_.resize(nextPow2(uint64_t(maxPeriod) + kGram + 1));
  ring_mask_ = ring_.size() - 1;
  gram_keys_.resize(nextPow2(uint64_t(maxPeriod) * 4 + 64));
  gram_pos_.resize(gram_keys_.size());
  gram_mask_ = gram_keys_.size() - 1;
}

void PeriodDetector::reset() {
  pushed_ = 0;
  std::fill(gram_pos_.begin(), gram_pos_.end(), 0);
  num_candidates_ = 0;
}

uint64_t PeriodDetector::required(uint32_t period) const {
  return uint64_t(std::max<uint32_t>(warmup_ - 1, 1)) * period;
}

uint32_t PeriodDetector::push(uint64_t tokenHash) {
  const uint64_t i = pushed_++;
  ring_[i & ring_mask_] = tokenHash;

  // Advance or drop each candidate.
  size_t kept = 0;
  for (size_t c = 0; c < num_candidates_; ++c) {
    Candidate cand = candidates_[c];
    if (at(i - cand.period) == tokenHash) {
      ++cand.run;
      candidates_[kept++] = cand;
    }
  }
  num_candidates_ = kept;

  // New candidate from the last kGram tokens.
  if (i + 1 >= kGram) {
    uint64_t gram = 0x6a09e667f3bcc909ull;
    for (uint32_t k = 0; k < kGram; ++k) gram = hashCombine(gram, at(i - k));
    if (gram == 0) gram = 1;
    uint64_t slot = mix64(gram) & gram_mask_;
    for (uint64_t probe = 0; probe < 8; ++probe, slot = (slot + 1) & gram_mask_) {
      if (gram_pos_[slot] == 0 || gram_keys_[slot] == gram) break;
    }
    if (gram_pos_[slot] != 0 && gram_keys_[slot] == gram) {
      const uint64_t previous = gram_pos_[slot] - 1;
      const uint64_t period = i - previous;
      if (period >= 1 && period <= max_period_) {
        bool known = false;
        for (size_t c = 0; c < num_candidates_; ++c) known |= candidates_[c].period == period;
        if (!known) {
          Candidate fresh{static_cast<uint32_t>(period), kGram, false};
          if (num_candidates_ < kMaxCandidates) {
            candidates_[num_candidates_++] = fresh;
          } else {
            // Replace the weakest unreported candidate.
            size_t weakest = kMaxCandidates;
            for (size_t c = 0; c < num_candidates_; ++c) {
              if (candidates_[c].reported) continue;
              if (weakest == kMaxCandidates || candidates_[c].run < candidates_[weakest].run)
                weakest = c;
            }
            if (weakest != kMaxCandidates) candidates_[weakest] = fresh;
          }
        }
      }
    }
    gram_keys_[slot] = gram;
    gram_pos_[slot] = i + 1;
  }

  uint32_t confirmed = 0;
  for (size_t c = 0; c < num_candidates_; ++c) {
    Candidate& cand = candidates_[c];
    if (!cand.reported && cand.run >= required(cand.period) && i + 1 >= 2ull * cand.period) {
      cand.reported = true;
      confirmed = std::max(confirmed, cand.period);
    }
  }
  return confirmed;
}

}  // namespace graft::core
