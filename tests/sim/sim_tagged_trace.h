// What the review programs that tag their kernels share (sim_review11_decode,
// sim_review12_variants, sim_review12_release): a host mirror of the device
// words the program expects, stream/event helpers, and the scan of the
// simulated driver's executed-effect trace that checks every tagged kernel
// ran exactly once, after the kernels it waits for, as it was launched.
//
// A tagged kernel takes four 8-byte parameters (dst, src, k, tag); tags count
// from 1 in launch order. Reports go through simtest::modes::expectValue, so a
// difference is a line of the mode's output and a non-zero exit. Single
// threaded unless the caller serializes TaggedTrace::add (decode's threads do).
#pragma once

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim_api.h"
#include "sim_mode_checks.h"

namespace simtest {

// Device word -> the value the program expects there (never written: 0).
class WordMirror {
 public:
  uint64_t get(CUdeviceptr p) const {
    auto it = words_.find(p);
    return it == words_.end() ? 0 : it->second;
  }
  void set(CUdeviceptr p, uint64_t v) { words_[p] = v; }
  // The word is no longer the program's (freed): forgotten.
  void erase(CUdeviceptr p) { words_.erase(p); }

 private:
  std::unordered_map<uint64_t, uint64_t> words_;
};

inline CUstream newStream(const DriverApi& cu, unsigned flags = CU_STREAM_NON_BLOCKING) {
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, flags));
  return s;
}
inline CUevent newEvent(const DriverApi& cu, unsigned flags = CU_EVENT_DISABLE_TIMING) {
  CUevent e = nullptr;
  SIM_CHECK(cu.cuEventCreate(&e, flags));
  return e;
}
// A zeroed device buffer of `bytes`, its words zero in `mirror` too.
inline CUdeviceptr mirroredBuffer(const DriverApi& cu, WordMirror& mirror, size_t bytes) {
  const CUdeviceptr p = zeroedBuffer(cu, bytes);
  for (size_t w = 0; w < bytes / 8; ++w) mirror.set(p + 8 * w, 0);
  return p;
}
// After a full synchronization: each word of `words` read back equals the mirror's.
inline void expectWords(const DriverApi& cu, const WordMirror& mirror, const std::vector<CUdeviceptr>& words,
                        int step) {
  for (CUdeviceptr p : words) {
    uint64_t v = 0;
    SIM_CHECK(cu.cuMemcpyDtoH(&v, p, 8));
    modes::expectValue(v, mirror.get(p), "a word read back", step);
  }
}

// A launch's grid or block shape.
struct Dim {
  unsigned x = 1, y = 1, z = 1;
};

// What every tagged launch records. A program extends it with what it
// checks of the kernel as it ran (grid, shared memory, stream, ...).
struct TaggedLaunch {
  uint32_t seen = 0;            // runs found in the trace
  uint64_t at = 0;              // its trace position (counted over clears) once seen
  std::vector<uint64_t> after;  // tags that must have run before it
  bool runs = true;             // false: launched into a capture that never runs as such
};

template <typename Launch>
class TaggedTrace {
 public:
  // Kernels whose names start with one of `prefixes` are tagged.
  explicit TaggedTrace(std::initializer_list<std::string_view> prefixes) : prefixes_(prefixes) {}

  uint64_t add(Launch launch) {
    launches_.push_back(std::move(launch));
    return launches_.size();
  }
  size_t size() const { return launches_.size(); }
  Launch& operator[](uint64_t tag) { return launches_[tag - 1]; }

  // Scans the executed trace (after a full synchronization): each tagged
  // kernel ran once, only if it runs, after its `after` tags; then
  // check(effect, launch, tag) for what the program checks besides. Clears
  // the trace.
  template <typename Check>
  void scan(int step, Check&& check) {
    const size_t n = simTraceSize();
    for (size_t i = 0; i < n; ++i) {
      SimEffect e;
      if (simTraceGet(i, &e) != 0 || e.kind != SIM_EFFECT_KERNEL || !e.kernelName || !tagged(e.kernelName) ||
          e.paramBytes != 32)
        continue;
      uint64_t tag = 0;
      std::memcpy(&tag, e.params + 24, 8);
      if (tag == 0 || tag > launches_.size()) {
        modes::expectValue(tag, 0, "tag of an executed kernel (unknown)", step);
        continue;
      }
      Launch& x = launches_[tag - 1];
      x.at = base_ + i + 1;
      if (++x.seen != 1) modes::expectValue(x.seen, 1, "runs of a tagged kernel", step);
      if (!x.runs) modes::expectValue(tag, 0, "a captured kernel ran as launched in the capture", step);
      for (uint64_t before : x.after) {
        const Launch& b = launches_[before - 1];
        if (!b.seen || b.at >= x.at) modes::expectValue(tag, before, "a kernel ran before one it waits for", step);
      }
      check(e, x, tag);
    }
    base_ += n;
    simTraceClear();
  }
  void scan(int step) {
    scan(step, [](const SimEffect&, Launch&, uint64_t) {});
  }

  // At the end, after a scan: every launch that runs ran once (the first
  // `maxReports` that did not are reported).
  void expectAllRan(int step, int maxReports = INT_MAX) const {
    int reported = 0;
    for (size_t t = 0; t < launches_.size(); ++t) {
      if (!launches_[t].runs || launches_[t].seen == 1 || reported++ >= maxReports) continue;
      char what[80];
      std::snprintf(what, sizeof what, "runs of tagged kernel %zu", t + 1);
      modes::expectValue(launches_[t].seen, 1, what, step);
    }
  }

  // Where a grid or block dimension differs from what was launched, one report.
  static void expectShape(const SimEffect& e, const unsigned (&want)[6], uint64_t tag, int step) {
    const unsigned got[6] = {e.grid[0], e.grid[1], e.grid[2], e.block[0], e.block[1], e.block[2]};
    for (int d = 0; d < 6; ++d) {
      if (got[d] == want[d]) continue;
      char what[128];
      std::snprintf(what, sizeof what, "%s[%d] of kernel tag %llu (%s)", d < 3 ? "grid" : "block", d % 3,
                    (unsigned long long)tag, e.kernelName);
      modes::expectValue(got[d], want[d], what, step);
      return;
    }
  }

 private:
  bool tagged(const char* name) const {
    for (std::string_view p : prefixes_)
      if (!std::strncmp(name, p.data(), p.size())) return true;
    return false;
  }

  std::vector<std::string_view> prefixes_;
  std::vector<Launch> launches_;
  uint64_t base_ = 0;  // trace positions seen before the last clear
};

}  // namespace simtest
