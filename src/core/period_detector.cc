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
  ops_before_.resize(ring_.size());
  gram_keys_.resize(nextPow2(uint64_t(maxPeriod) * 4 + 64));
  gram_pos_.resize(gram_keys_.size());
  gram_mask_ = gram_keys_.size() - 1;
}

void PeriodDetector::reset() {
  pushed_ = 0;
  ops_pushed_ = 0;
  last_boundary_ = 0;
  std::fill(gram_pos_.begin(), gram_pos_.end(), 0);
  num_candidates_ = 0;
}

uint64_t PeriodDetector::opsInPeriod(uint32_t period, uint64_t last) const {
  return ops_pushed_ - ops_before_[(last + 1 - period) & ring_mask_];
}

bool PeriodDetector::delimited(uint32_t period, uint64_t last) const {
  // Every window of a period holds the same tokens.
  return last_boundary_ > last + 1 - period;
}

PeriodDetector::Confirmation PeriodDetector::push(uint64_t tokenHash, uint64_t ops, bool boundary) {
  const uint64_t i = pushed_++;
  ring_[i & ring_mask_] = tokenHash;
  ops_before_[i & ring_mask_] = ops_pushed_;
  ops_pushed_ += ops;
  if (boundary) last_boundary_ = i + 1;

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
          Candidate fresh{static_cast<uint32_t>(period), kGram, 0};
          if (num_candidates_ < kMaxCandidates) {
            candidates_[num_candidates_++] = fresh;
          } else {
            // Replace the weakest unreported candidate.
            size_t weakest = kMaxCandidates;
            for (size_t c = 0; c < num_candidates_; ++c) {
              if (candidates_[c].reports) continue;
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

  Confirmation confirmed;
  const uint64_t base = std::max<uint32_t>(warmup_ - 1, 1);
  for (size_t c = 0; c < num_candidates_; ++c) {
    Candidate& cand = candidates_[c];
    if (cand.reports == 2 || i + 1 < 2ull * cand.period || cand.run < base * cand.period) continue;
    const uint64_t unroll = delimited(cand.period, i) ? 1 : unrollFor(opsInPeriod(cand.period, i));
    Confirmation now;
    if (cand.reports == 0) {
      cand.reports = unroll == 1 ? 2 : 1;
      now = {cand.period, 1, unroll > 1};
    } else if (cand.run >= base * cand.period * unroll) {
      cand.reports = 2;
      now = {cand.period, uint32_t(unroll)};
    }
    if (now.period > confirmed.period) confirmed = now;
  }
  return confirmed;
}

}  // namespace graft::core
