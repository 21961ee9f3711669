#include "core/period_detector.h"

#include <algorithm>

#include "core/hash.h"
#include "core/hot_path.h"

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
  // (The long gram's rolling hash reads the token kLongGram back.)
  ring_ = ZeroedArray<uint64_t>(nextPow2(std::max<uint64_t>(uint64_t(maxPeriod) + kGram + 1, kLongGram + 1)));
  ring_mask_ = ring_.size() - 1;
  ops_before_ = ZeroedArray<uint64_t>(ring_.size());
  // Buckets for four grams of the longest period each: a bucket overflows
  // (and loses its oldest gram) only when some hold twice their share.
  const uint64_t buckets = nextPow2((uint64_t(maxPeriod) * 4 + 64) / kGramWays);
  grams_ = ZeroedArray<GramBucket>(buckets);
  gram_mask_ = buckets - 1;
  const uint64_t longBuckets = std::max<uint64_t>(buckets / 4, 1);
  long_grams_ = ZeroedArray<GramBucket>(longBuckets);
  long_gram_mask_ = longBuckets - 1;
}

void PeriodDetector::reset() {
  pushed_ = 0;
  ops_pushed_ = 0;
  last_boundary_ = 0;
  grams_.clear();
  long_grams_.clear();
  rolling_ = 0;
  num_candidates_ = 0;
}

GRAFT_HOT uint64_t PeriodDetector::opsInPeriod(uint32_t period, uint64_t last) const {
  return ops_pushed_ - ops_before_[(last + 1 - period) & ring_mask_];
}

GRAFT_HOT bool PeriodDetector::delimited(uint32_t period, uint64_t last) const {
  // Every window of a period holds the same tokens.
  return last_boundary_ > last + 1 - period;
}

uint32_t PeriodDetector::stretchBefore(uint64_t i, uint32_t period, uint64_t run) const {
  // The run's tokens were compared as they came; going back from its start
  // needs each token's copy, a period earlier, still in the ring (the last
  // ring_.size() tokens pushed, `i` may be older than the last). A stretch
  // whose start the ring or max_period_ cut off would be seen with another
  // length each time (never counted twice): not reported.
  const uint64_t oldest = pushed_ > ring_.size() ? pushed_ - ring_.size() : 0;
  uint64_t start = i - run;
  while (start > period) {  // (at `period`, its copy starts at the first token pushed)
    if (start - 1 - period < oldest) return 0;
    if (at(start - 1) != at(start - 1 - period)) break;
    if (i - start >= max_period_) return 0;
    --start;
  }
  if (start < oldest || i - start > max_period_) return 0;
  const uint64_t ops = ops_before_[i & ring_mask_] - ops_before_[start & ring_mask_];
  return ops >= kShortRunOps ? uint32_t(i - start) : 0;
}

bool PeriodDetector::Candidate::takesHole(uint64_t i, uint64_t allowed) {
  const uint32_t phase = uint32_t(i % period);
  for (uint32_t h = 0; h < holes; ++h) {
    if (holePhase[h] == phase) {
      holeLastHit[h] = uint32_t(i);
      holeHits[h] = uint8_t(std::min(holeHits[h] + 1, 255));
      return true;
    }
  }
  if (holes >= allowed) return false;
  holePhase[holes] = phase;
  holeLastHit[holes] = uint32_t(i);
  holeHits[holes++] = 1;
  return true;
}

GRAFT_HOT void PeriodDetector::noteGram(ZeroedArray<GramBucket>& index, uint64_t mask, uint64_t mixed,
                                        uint64_t i) {
  GramEntry* bucket = index[mixed & mask].ways;
  const uint32_t tag = uint32_t(mixed >> 32);
  const uint32_t now = uint32_t(i) == 0 ? 1 : uint32_t(i);  // (the gram's last position) + 1
  // This gram's entry, else an empty one, else the oldest.
  GramEntry* entry = nullptr;
  GramEntry* oldest = bucket;
  for (size_t w = 0; w < kGramWays; ++w) {
    GramEntry& e = bucket[w];
    if (e.pos != 0 && e.tag == tag) {
      entry = &e;
      break;
    }
    if (oldest->pos != 0 && (e.pos == 0 || uint32_t(now - e.pos) > uint32_t(now - oldest->pos))) oldest = &e;
  }
  // Positions are kept modulo 2^32: `period` is exact for an entry written
  // in the last 2^32 tokens; an older one (or another gram's) may propose
  // a wrong period, which the tokens turn down: a candidate starts with a
  // run of kGram + 1, the last kGram tokens and this one (the ring holds
  // max_period_ + kGram + 1 tokens).
  const uint32_t period = entry ? now - entry->pos : 0;
  bool repeats = period >= 1 && period <= max_period_ && i >= period + kGram;
  for (uint32_t k = 0; repeats && k <= kGram; ++k) repeats = at(i - k) == at(i - k - period);
  if (repeats) {
    bool known = false;
    for (size_t c = 0; c < num_candidates_; ++c) known |= candidates_[c].period == period;
    if (!known) {
      const Candidate fresh{.period = period, .run = kGram + 1};
      if (num_candidates_ < kMaxCandidates) {
        candidates_[num_candidates_++] = fresh;
      } else {
        // Replace the weakest unreported candidate.
        size_t weakest = kMaxCandidates;
        for (size_t c = 0; c < num_candidates_; ++c) {
          if (candidates_[c].reports) continue;
          if (weakest == kMaxCandidates || candidates_[c].run < candidates_[weakest].run) weakest = c;
        }
        if (weakest != kMaxCandidates) candidates_[weakest] = fresh;
      }
    }
  }
  if (!entry) {
    entry = oldest;
    entry->tag = tag;
  }
  entry->pos = now;
}

GRAFT_HOT PeriodDetector::Confirmation PeriodDetector::push(uint64_t tokenHash, uint64_t ops, bool boundary) {
  const uint64_t i = pushed_++;
  ring_[i & ring_mask_] = tokenHash;
  ops_before_[i & ring_mask_] = ops_pushed_;
  ops_pushed_ += ops;
  if (boundary) last_boundary_ = i + 1;

  // Advance or drop each candidate.
  size_t kept = 0;
  Confirmation confirmed;
  for (size_t c = 0; c < num_candidates_; ++c) {
    Candidate cand = candidates_[c];
    if ((at(i - cand.period) == tokenHash || cand.takesHole(i, holesAllowed(cand.period, i))) &&
        (!cand.holes || cand.holesStillDiffer(i)))
        [[likely]] {
      ++cand.run;
      candidates_[kept++] = cand;
    } else if (!cand.reported && cand.run >= kMinStretchTokens) {
      // Holes opened in this instance only (the tokens went on differing
      // before the break) end the stretch where the first of them opened;
      // one that differed before makes the candidate no stretch.
      uint64_t cleanEnd = i;
      bool fresh = true;
      for (uint32_t h = 0; h < cand.holes; ++h) {
        fresh &= cand.holeHits[h] == 1;
        cleanEnd = std::min<uint64_t>(cleanEnd, i - (uint32_t(i) - cand.holeLastHit[h]));
      }
      const uint64_t run = cand.run - (i - cleanEnd);
      const uint32_t stretch = fresh && run >= kMinStretchTokens ? stretchBefore(cleanEnd, cand.period, run) : 0;
      if (stretch > confirmed.stretch) {
        confirmed.stretch = stretch;
        confirmed.stretchPeriod = cand.period;
        confirmed.stretchAfter = uint32_t(i + 1 - cleanEnd);
      }
    }
  }
  num_candidates_ = kept;

  // New candidates from the grams that ended at the previous token: their
  // buckets were prefetched then, while the program ran on.
  if (i >= kGram) noteGram(grams_, gram_mask_, pending_gram_, i);
  if (i >= kLongGram && longGramSampled(pending_long_gram_))
    noteGram(long_grams_, long_gram_mask_, pending_long_gram_, i);
  if (i + 1 >= kGram) {
    uint64_t gram = 0x6a09e667f3bcc909ull;
    for (uint32_t k = 0; k < kGram; ++k) gram = hashCombine(gram, at(i - k));
    pending_gram_ = mix64(gram);
    __builtin_prefetch(&grams_[pending_gram_ & gram_mask_], 1);
  }
  rolling_ = rolling_ * kRollBase + rollTerm(tokenHash);
  if (i >= kLongGram) rolling_ -= rollTerm(at(i - kLongGram)) * kRollBasePower;
  if (i + 1 >= kLongGram) {
    pending_long_gram_ = mix64(rolling_ ^ 0xbb67ae8584caa73bull);
    if (longGramSampled(pending_long_gram_))
      __builtin_prefetch(&long_grams_[pending_long_gram_ & long_gram_mask_], 1);
  }

  const uint64_t base = std::max<uint32_t>(warmup_ - 1, 1);
  for (size_t c = 0; c < num_candidates_; ++c) {
    Candidate& cand = candidates_[c];
    if (cand.reports == 2 || i + 1 < 2ull * cand.period || cand.run < base * cand.period) continue;
    if (cand.holes && !cand.holesSeenTwice()) continue;
    const uint64_t unroll = delimited(cand.period, i) ? 1 : unrollFor(opsInPeriod(cand.period, i));
    Confirmation now;
    if (cand.reports == 0) {
      cand.reports = unroll == 1 ? 2 : 1;
      cand.reported = true;
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
