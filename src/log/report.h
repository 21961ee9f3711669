// The exit report: what graft saw and did, as a human summary for the log and
// as JSON for GRAFT_STATS. Plain data; filled by the engine at exit.
//
// Threading: pure functions on a snapshot. May allocate. Never calls the CUDA
// driver. No CUDA headers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace graft::log {

using NamedCount = std::pair<std::string, uint64_t>;

struct Report {
  int64_t pid = 0;  // the process the report is of (several may share a log)
  std::string mode;
  uint64_t opsTotal = 0;
  std::vector<NamedCount> opsByClass;   // every class, in table order
  std::vector<NamedCount> kernelsTop;   // most launched first
  std::vector<NamedCount> kernelsPatched;  // most graph node updates first (graph mode)
  std::vector<NamedCount> streams;      // ops per stream ("0x1" = legacy default stream)
  struct Replay {
    uint64_t opsTotal = 0;       // stream-ordered ops seen while replay was possible
    uint64_t opsViaGraph = 0;    // of those, issued through graft's graphs
    uint64_t opsEager = 0;       // of those, issued eagerly
    uint64_t graphsBuilt = 0;
    uint64_t buildFailures = 0;
    uint64_t segmentsDropped = 0;  // graphs dropped for mismatching more often than they replayed
    uint64_t variantsEvicted = 0;  // idle variants' graphs retired for new variants
    uint64_t replays = 0;        // graph launches
    uint64_t patches = 0;        // executable-graph node updates
    double firstReplaySeconds = -1;  // from graft's first intercepted op; -1 = never
    uint64_t segments = 0;       // live graphs at exit
    uint64_t opsFastLane = 0;    // launches held on the fast lane (Engine::soleExpected)
    uint64_t queriesAnsweredNotReady = 0;  // stream/event queries of held work graft answered itself
    uint64_t queriesIssuedForProgress = 0; // queries that issued held work after graft had answered for their target too often (core::NotReadyStreak)
    std::vector<NamedCount> fallbacks;  // ops issued eagerly, by reason
  } replay;
  // GRAFT_PROFILE=1: graft's own CPU time by stage (exclusive of nested stages).
  struct CpuTime {
    bool enabled = false;
    struct Stage {
      std::string name;
      uint64_t calls = 0;
      double micros = 0;
    };
    std::vector<Stage> stages;
  } cpuTime;
  struct HotArena {
    bool enabled = false;
    uint64_t reservedBytes = 0, usedBytes = 0, heapBytes = 0, hugeBytes = 0;
    bool hugeCounted = false;  // hugeBytes read (GRAFT_STATS or a debug log): smaps is slow in a large process
  } hotArena;
  struct HotText {
    bool tried = false;
    bool moved = false;
    std::string why;  // when tried and not moved
  } hotText;
  // GRAFT_ASYNC_LAUNCH: graft's launch thread.
  struct LaunchThread {
    bool enabled = false;
    double cpuSeconds = 0;   // its CPU time
    uint64_t deepSleeps = 0;  // times it slept until woken (GRAFT_LAUNCH_POLL_US)
    uint64_t spinsCaught = 0;   // idle spells it spun through to the next launch
    uint64_t spinsSkipped = 0;  // idle spells it did not spin in (GRAFT_LAUNCH_SPIN_US)
    uint64_t takenOver = 0;     // launches the program's thread ran itself while it waited
    uint64_t freesQueued = 0;   // stream-ordered frees put behind queued launches (no wait)
  } launchThread;
  struct Pool {
    bool enabled = false;
    uint64_t reservedBytes = 0, mappedBytes = 0, peakInUseBytes = 0;
    uint64_t allocations = 0, reused = 0, declined = 0;
  } pool;
};

std::string reportJson(const Report& r);
std::string reportSummary(const Report& r);

// Writes reportJson(r) to `path`. Returns an empty string or a one-line error.
std::string writeReportFile(const Report& r, const std::string& path);

}  // namespace graft::log
