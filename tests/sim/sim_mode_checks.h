// The harness of the simulator programs that check one odd pattern per
// `--mode` (sim_driver_checks, sim_review_engine, sim_review_graph,
// sim_review_hook): every return code and value the program gets is compared
// with what the simulated driver gives eagerly, and main ends with report().
// Single-threaded use, but for the *Mt checks and impliedQuery (the query
// reviews: sim_review49_queries, sim_review50_records).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace simtest::modes {

inline const char* g_program = "";  // the program's name, for its lines
inline const char* g_mode = "";
inline int g_wrong = 0;     // wrong codes and values
inline int g_provoked = 0;  // odd calls made

// The command line: --mode M, --steps N, --expect-graphs (anything else
// makes the mode "?", which the program answers with its usage). Names the
// program's lines and their mode (g_program, g_mode).
struct ModeArgs {
  std::string mode;
  int steps = 0;
  bool expectGraphs = false;
  uint64_t minGraphPct = 0;  // --min-graph-pct P: report() also wants P % of effects from graphs
};
inline std::string g_modeText;
inline ModeArgs parseModeArgs(int argc, char** argv, const char* program, int defaultSteps) {
  ModeArgs a;
  a.steps = defaultSteps;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) a.mode = argv[++i];
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) a.steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--expect-graphs")) a.expectGraphs = true;
    else if (!std::strcmp(argv[i], "--min-graph-pct") && i + 1 < argc) a.minGraphPct = std::strtoull(argv[++i], nullptr, 10);
    else a.mode = "?";
  }
  g_program = program;
  g_modeText = a.mode;
  g_mode = g_modeText.c_str();
  return a;
}

// Device memory is host memory in the simulator: a word read or written
// directly (what the work before a completed record or sync wrote).
inline uint64_t peek(CUdeviceptr p) { return *reinterpret_cast<volatile const uint64_t*>(p); }
inline void poke(CUdeviceptr p, uint64_t v) { *reinterpret_cast<volatile uint64_t*>(p) = v; }

// Polls `query` until it is not CUDA_ERROR_NOT_READY (at most `limit` times).
template <typename Q>
CUresult pollUntilDone(Q query, int limit = 100000) {
  CUresult r = CUDA_ERROR_NOT_READY;
  for (int n = 0; n < limit && r == CUDA_ERROR_NOT_READY; ++n) r = query();
  return r;
}

// Steps (from `from` on) where a mode makes its odd call: about one in
// `every`, with no period (different steps for each salt).
inline bool irregularStep(int step, uint64_t salt, int from, uint64_t every) {
  return step >= from && simMix64(uint64_t(step) * 0x9e3779b97f4a7c15ull + salt * 0x632be59bd9b4e019ull) % every == 0;
}

inline void expectCode(CUresult got, CUresult want, const char* what, int step) {
  if (got == want) return;
  if (g_wrong++ < 8)
    std::printf("%s: %s: step %d: %s returned %d, the driver returns %d\n", g_program, g_mode, step, what, int(got),
                int(want));
}

inline void expectValue(uint64_t got, uint64_t want, const char* what, int step) {
  if (got == want) return;
  if (g_wrong++ < 8)
    std::printf("%s: %s: step %d: %s is %llu, expected %llu\n", g_program, g_mode, step, what,
                (unsigned long long)got, (unsigned long long)want);
}

inline uint64_t readWord(const simtest::DriverApi& cu, CUdeviceptr p) {
  uint64_t v = 0;
  SIM_CHECK(cu.cuMemcpyDtoH(&v, p, 8));
  return v;
}

// ------------------------------------------------- checks from several threads
// Thread-safe counterparts of expectCode / expectValue (the ones above are
// single-threaded). Every wrong answer is also tallied by what was asked
// (printTally).
inline std::mutex g_checkMutex;
inline std::vector<std::pair<std::string, int>> g_tally;
inline void tally(const char* what) {
  for (auto& t : g_tally)
    if (t.first == what) {
      ++t.second;
      return;
    }
  g_tally.emplace_back(what, 1);
}
inline bool g_verbose = false;  // --verbose: every wrong answer, not only the first 8
inline void expectCodeMt(CUresult got, CUresult want, const char* what, int step) {
  std::lock_guard<std::mutex> lk(g_checkMutex);
  if (got != want) tally(what);
  if (got != want && g_verbose) std::printf("%s: %s: step %d: %s returned %d, the driver returns %d\n", g_program, g_mode, step, what, int(got), int(want));
  expectCode(got, want, what, step);
}
inline void expectValueMt(uint64_t got, uint64_t want, const char* what, int step) {
  std::lock_guard<std::mutex> lk(g_checkMutex);
  if (got != want) tally(what);
  expectValue(got, want, what, step);
}
// --implied-poll: a query whose work a synchronization already implied
// complete (impliedQuery) may first say CUDA_ERROR_NOT_READY (counted, not
// wrong); it is asked again (no op between) until it says something else,
// 100000 times at most, which must be CUDA_SUCCESS. Without it the first
// answer must be CUDA_SUCCESS, as eagerly.
inline bool g_impliedPoll = false;
inline std::atomic<long> g_impliedNotReady{0};
template <typename Q>
CUresult impliedQuery(Q query) {
  CUresult r = query();
  if (!g_impliedPoll || r != CUDA_ERROR_NOT_READY) return r;
  g_impliedNotReady.fetch_add(1);
  for (int n = 0; n < 100000 && r == CUDA_ERROR_NOT_READY; ++n) r = query();
  return r;
}
// parseModeArgs for the query reviews (sim_review49_queries,
// sim_review50_records), which also take --verbose (g_verbose) and
// --implied-poll (g_impliedPoll).
inline ModeArgs parseQueryModeArgs(int argc, char** argv, const char* program, int defaultSteps) {
  static std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && !std::strcmp(argv[i], "--verbose")) g_verbose = true;
    else if (i > 0 && !std::strcmp(argv[i], "--implied-poll")) g_impliedPoll = true;
    else rest.push_back(argv[i]);
  }
  return parseModeArgs(int(rest.size()), rest.data(), program, defaultSteps);
}
inline void printTally() {
  if (g_impliedPoll)
    std::printf("%s: %s: %ld implied-complete queries first said CUDA_ERROR_NOT_READY\n", g_program, g_mode,
                g_impliedNotReady.load());
  for (const auto& t : g_tally) std::printf("%s: %s: wrong %d times: %s\n", g_program, g_mode, t.second, t.first.c_str());
}

// main's exit code: 1 for a wrong code or value or a failed call, 3 when
// `expectGraphs` and no kernel ran from a graph (the path under test was not
// taken), else 0; with one line saying which.
inline int report(int steps, bool expectGraphs, uint64_t minGraphPct = 0) {
  SimCounters c{};
  simCounters(&c);
  std::printf("%s: %s: %d steps, %d odd calls; effects from graphs %llu, eager %llu\n", g_program, g_mode, steps,
              g_provoked, (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager);
  if (g_wrong || simtest::failedCalls()) {
    std::printf("%s: %s: %d wrong codes or values, %d failed calls\n", g_program, g_mode, g_wrong,
                simtest::failedCalls());
    return 1;
  }
  if (expectGraphs && c.effectsGraph == 0) {
    std::printf("%s: %s: no kernel ran from a graph: the path under test was not taken\n", g_program, g_mode);
    return 3;
  }
  std::printf("%s: %s: every code and value as the driver gives them\n", g_program, g_mode);
  if (minGraphPct && simtest::tooFewFromGraphs(g_program, c, minGraphPct)) return 3;
  return 0;
}

// A host model of a program's buffers (zeroed when tracked): the program
// applies every op it issues to it in issue order (one stream), and after a
// synchronize check() compares it with the memory, 8 bytes at a time, the
// first difference of each buffer counted as a wrong value. Unknown
// addresses end the program (exit 2).
struct ShadowMemory {
  struct Region {
    uint64_t base;
    std::vector<uint8_t> bytes;
    std::string name;
  };
  std::vector<Region> regions;
  void track(uint64_t base, size_t n, const std::string& name) {
    regions.push_back({base, std::vector<uint8_t>(n, 0), name});
  }
  uint8_t* at(uint64_t a, size_t n) {
    for (Region& r : regions)
      if (a >= r.base && a + n <= r.base + r.bytes.size()) return r.bytes.data() + (a - r.base);
    std::printf("%s: %s: the model has no buffer at %#llx (+%zu)\n", g_program, g_mode, (unsigned long long)a, n);
    std::exit(2);
  }
  uint64_t read64(uint64_t a) {
    uint64_t v;
    std::memcpy(&v, at(a, 8), 8);
    return v;
  }
  void write64(uint64_t a, uint64_t v) { std::memcpy(at(a, 8), &v, 8); }
  void check(int step) const {
    for (const Region& r : regions) {
      const auto* mem = reinterpret_cast<const uint8_t*>(r.base);
      for (size_t i = 0; i < r.bytes.size(); i += 8) {
        uint64_t got = 0, want = 0;
        const size_t n = std::min<size_t>(8, r.bytes.size() - i);
        std::memcpy(&got, mem + i, n);
        std::memcpy(&want, r.bytes.data() + i, n);
        if (got != want) {
          char what[96];
          std::snprintf(what, sizeof what, "%s bytes %zu..%zu", r.name.c_str(), i, i + n - 1);
          expectValue(got, want, what, step);
          break;
        }
      }
    }
  }
};

}  // namespace simtest::modes
