// PeriodDetector: finds the period of a repeating token stream in amortized
// O(1) per token.
//
// Candidate periods come from two n-gram indexes (the last position each run
// of kGram tokens, and of kLongGram tokens, was seen; lossy: see GramEntry).
// The short grams find periods at once where tokens are varied; where a few
// kernels make up a long step (tokens name kernels and shapes, not pointers),
// every short gram recurs within a few tokens and proposes only short
// distances, and the long grams (almost never repeated inside a step)
// propose the step, or the two steps of a step that alternates (one long gram
// in four is indexed: longGramSampled). Each candidate keeps the length of
// its current run (consecutive positions i with token[i] == token[i - period]
// or on a hole, below). A candidate is
// confirmed when its run covers `warmup` identical instances of the period,
// i.e. run >= (warmup - 1) * period (at least one period). A confirmed
// candidate is reported once, and stays quiet until its run breaks.
//
// Short periods: a period without a boundary token and with fewer than
// kShortRunOps ops (a loop of a few kernels and no sync) is best replayed
// unrolled, unrollFor(ops) periods per graph. Such a candidate is reported a
// second time, with that unroll factor, once its run covers `warmup`
// instances of the unrolled sequence; a short repeat inside a longer
// iteration (A B A B A B C) never gets there.
//
// Holes: a token that differs in every instance at one place of the period
// (a memset or copy whose size, or a kernel whose grid, changes every step in
// a step otherwise the same) would break every run. A candidate keeps its run
// through a mismatch at up to one place per kShortRunOps ops of its period
// and per 16 of its tokens (at most kMaxHoles; a replayed graph is one token
// of many ops), as long as the token at each such place differs again in
// every later instance (a place that matches once ends the candidate: a
// difference that moves is no hole), and it is confirmed only once each hole
// differed twice. The caller finds the places by comparing the instances,
// and issues those ops eagerly between graphs.
//
// Recurring stretches: a run that repeats, but never `warmup` times in a row
// (a training step between eval passes that differ every time, an optimizer
// step between forward passes whose shapes change), makes candidates that
// break before confirmation. When a candidate never confirmed breaks after
// a run of at least kMinStretchTokens tokens and kShortRunOps ops (holes
// opened in its last instance only cut the run where the first opened; a
// hole seen before makes it no stretch), the stretch it matched, extended
// back to where the two copies first differ, is reported: tokens that equal
// those a period before them. A stretch whose start the ring or max_period_
// cuts off is not reported (it would have another length each time). The
// caller counts the stretches by their tokens and builds one seen often.
//
// Threading: not thread-safe (engine lock). Allocates only in the constructor.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/zeroed_array.h"

namespace graft::core {

class PeriodDetector {
 public:
  static constexpr uint32_t kGram = 4;
  static constexpr uint32_t kLongGram = 32;
  static constexpr size_t kMaxCandidates = 8;
  static constexpr uint64_t kShortRunOps = 32;
  static constexpr uint32_t kMaxHoles = 4;

  PeriodDetector(uint32_t warmup, uint32_t maxPeriod);

  // How many periods of `opsInPeriod` ops make one unrolled sequence of at
  // least kShortRunOps ops (1 for periods that long already).
  static uint64_t unrollFor(uint64_t opsInPeriod) {
    return opsInPeriod >= kShortRunOps ? 1 : (kShortRunOps + opsInPeriod - 1) / std::max<uint64_t>(opsInPeriod, 1);
  }

  struct Confirmation {
    uint32_t period = 0;  // 0: nothing confirmed at this token
    uint32_t unroll = 1;  // periods per graph (> 1: the second report of a short period)
    // The first report of a short period: reported again, unrolled, if its
    // run lasts long enough (the caller may wait for that report).
    bool unrollPending = false;
    // A recurring stretch (see above): its length in tokens (0: none), the
    // distance to its copy, and the tokens pushed after it (this one
    // included: 1 when it ended at the token before this one).
    uint32_t stretch = 0;
    uint32_t stretchPeriod = 0;
    uint32_t stretchAfter = 0;
  };
  static constexpr uint32_t kMinStretchTokens = 16;

  // Feeds the next token hash: `ops` ops it stands for (a replayed segment
  // stands for its length), `boundary` if it splits segments. Returns the
  // period newly confirmed at this token (the largest, if several).
  Confirmation push(uint64_t tokenHash, uint64_t ops = 1, bool boundary = false);
  void reset();
  // Candidates already reported are reported again at the next token whose
  // run still qualifies (what was learned is kept): for a caller that turned
  // a confirmation down and may take it now.
  void rearm() {
    for (size_t c = 0; c < num_candidates_; ++c) candidates_[c].reports = 0;
  }


 private:
  struct Candidate {
    uint32_t period = 0;
    uint64_t run = 0;     // tokens that matched the one a period back, or fell on a hole
    uint8_t reports = 0;  // 0, 1 (at warmup periods), 2 (unrolled as well, or no unroll needed)
    bool reported = false;  // reported once at least (rearm() leaves it): no stretch
    uint8_t holes = 0;
    std::array<uint32_t, kMaxHoles> holePhase{};    // token index % period of each hole
    std::array<uint32_t, kMaxHoles> holeLastHit{};  // low 32 bits of the last token index that differed there
    std::array<uint8_t, kMaxHoles> holeHits{};      // differences seen there (saturating)
    // Token `i` differs from the one a period back: true if it falls on a
    // hole, or may open one (then it does) while fewer than `allowed` are open.
    bool takesHole(uint64_t i, uint64_t allowed);
    // False once a hole went a whole period without a difference.
    bool holesStillDiffer(uint64_t i) const {
      for (uint32_t h = 0; h < holes; ++h)
        if (uint32_t(i) - holeLastHit[h] > period) return false;
      return true;
    }
    // Every hole differed in two instances in a row at least (one that
    // opened less than a period ago may yet match: not confirmed before).
    bool holesSeenTwice() const {
      for (uint32_t h = 0; h < holes; ++h)
        if (holeHits[h] < 2) return false;
      return true;
    }
  };
  uint64_t at(uint64_t index) const { return ring_[index & ring_mask_]; }
  // Ops in the period that ends at token `last`, and whether a boundary token
  // is among them.
  uint64_t opsInPeriod(uint32_t period, uint64_t last) const;
  bool delimited(uint32_t period, uint64_t last) const;
  // The recurring stretch a candidate of `period` left when it broke at
  // token i after `run` matching tokens, extended back while the tokens
  // still agree (within the ring); 0 when too short to report.
  uint32_t stretchBefore(uint64_t i, uint32_t period, uint64_t run) const;
  // Holes a candidate of `period` tokens may have at token `i` (see Holes).
  uint64_t holesAllowed(uint32_t period, uint64_t i) const {
    return std::min<uint64_t>({kMaxHoles, period / 16, opsInPeriod(period, i) / kShortRunOps});
  }

  uint32_t warmup_;
  uint32_t max_period_;
  ZeroedArray<uint64_t> ring_;  // pages touched only as used
  ZeroedArray<uint64_t> ops_before_;  // ops pushed before the token at each position (same ring)
  uint64_t ops_pushed_ = 0;
  uint64_t last_boundary_ = 0;  // position + 1 of the last boundary token; 0: none
  uint64_t ring_mask_;
  uint64_t pushed_ = 0;
  // The n-gram index: buckets of kGramWays 8-byte entries, one cache line
  // each, so a token reads one line of it. An entry holds 32 bits of the
  // gram's hash and the low 32 bits of its position + 1 (0: empty); a full
  // bucket gives up its oldest entry. A lost entry only delays a candidate,
  // and one that names a wrong position is turned down by the tokens.
  static constexpr size_t kGramWays = 8;
  struct GramEntry {
    uint32_t tag = 0;
    uint32_t pos = 0;
  };
  struct alignas(64) GramBucket {
    GramEntry ways[kGramWays];
  };
  // Notes the gram `mixed` that ended at token i - 1 (its last position) and
  // proposes the distance to where it was seen before, when the tokens
  // around both places agree, as a candidate.
  void noteGram(ZeroedArray<GramBucket>& index, uint64_t mask, uint64_t mixed, uint64_t i);
  ZeroedArray<GramBucket> grams_;  // all zero: every entry empty
  ZeroedArray<GramBucket> long_grams_;  // the same for the long grams
  uint64_t pending_gram_ = 0;  // the hash of the gram that ends at the last token pushed
  uint64_t pending_long_gram_ = 0;  // the same for the long gram
  // The long gram's rolling hash: sum of token[i - k] * kRollBase^k over its
  // last kLongGram tokens (mod 2^64), and kRollBase^kLongGram.
  uint64_t rolling_ = 0;
  static constexpr uint64_t kRollBase = 0x100000001b3ull;
  static constexpr uint64_t kRollBasePower = [] {  // kRollBase^kLongGram
    uint64_t p = 1;
    for (uint32_t k = 0; k < kLongGram; ++k) p *= kRollBase;
    return p;
  }();
  // A token as the rolling hash takes it: its high bits folded into the low
  // ones (a multiply carries only upwards, so tokens that differed only in
  // their top bits would otherwise hash alike wherever they sit).
  static uint64_t rollTerm(uint64_t token) { return token ^ (token >> 29); }
  // Only one long gram in four is indexed, chosen by its hash (bits neither
  // the bucket nor the tag use), so the same grams are chosen in every
  // instance of a period: a step still leaves hundreds of them, and the
  // learning path reads the second index at one token in four (a quarter of
  // the short index's buckets).
  static bool longGramSampled(uint64_t mixed) { return ((mixed >> 29) & 3) == 0; }
  uint64_t gram_mask_;       // the short index's bucket mask
  uint64_t long_gram_mask_;  // the long index's
  std::array<Candidate, kMaxCandidates> candidates_{};
  size_t num_candidates_ = 0;
};

}  // namespace graft::core
