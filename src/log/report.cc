#include "log/report.h"

#include "log/log.h"

#include "graft/version.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace graft::log {
namespace {

std::string jsonString(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\t': r += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) r += fmt::format("\\u{:04x}", c);
        else r += c;
    }
  }
  return r + "\"";
}

std::string jsonObject(const std::vector<NamedCount>& v) {
  std::string r = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) r += ", ";
    r += jsonString(v[i].first) + ": " + std::to_string(v[i].second);
  }
  return r + "}";
}

std::string jsonList(const std::vector<NamedCount>& v, const char* key, const char* countKey) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) r += ", ";
    r += fmt::format("{{\"{}\": {}, \"{}\": {}}}", key, jsonString(v[i].first), countKey,
                     v[i].second);
  }
  return r + "]";
}

double pct(uint64_t a, uint64_t b) { return b ? 100.0 * double(a) / double(b) : 0.0; }

}  // namespace

std::string reportJson(const Report& r) {
  const auto& p = r.replay;
  std::string j = "{\n";
  j += fmt::format("  \"graft_version\": \"{}\",\n", GRAFT_VERSION);
  j += fmt::format("  \"pid\": {},\n", r.pid);
  j += fmt::format("  \"mode\": {},\n", jsonString(r.mode));
  j += fmt::format("  \"ops\": {{\"total\": {}, \"by_class\": {}}},\n", r.opsTotal,
                   jsonObject(r.opsByClass));
  j += fmt::format("  \"kernels_top\": {},\n", jsonList(r.kernelsTop, "name", "count"));
  j += fmt::format("  \"kernels_patched\": {},\n", jsonList(r.kernelsPatched, "name", "count"));
  j += fmt::format("  \"streams\": {},\n", jsonList(r.streams, "stream", "ops"));
  j += "  \"replay\": {";
  j += fmt::format(
      "\"ops_total\": {}, \"ops_via_graph\": {}, \"ops_eager\": {}, \"coverage_pct\": {:.3f}, "
      "\"graphs_built\": {}, \"build_failures\": {}, \"graphs_dropped_mismatching\": {}, "
      "\"variants_evicted_idle\": {}, \"segments\": {}, \"replays\": {}, "
      "\"patches\": {}, \"patches_per_replay\": {:.3f}, \"first_replay_s\": {:.6f}, "
      "\"ops_fast_lane\": {}, \"queries_answered_not_ready\": {}, \"queries_issued_for_progress\": {}, "
      "\"fallbacks\": {}",
      p.opsTotal, p.opsViaGraph, p.opsEager, pct(p.opsViaGraph, p.opsTotal), p.graphsBuilt,
      p.buildFailures, p.segmentsDropped, p.variantsEvicted, p.segments, p.replays, p.patches,
      p.replays ? double(p.patches) / double(p.replays) : 0.0, p.firstReplaySeconds,
      p.opsFastLane, p.queriesAnsweredNotReady, p.queriesIssuedForProgress, jsonObject(p.fallbacks));
  j += "}";
  if (r.cpuTime.enabled) {
    j += ",\n  \"cpu_time\": {";
    for (size_t i = 0; i < r.cpuTime.stages.size(); ++i) {
      const auto& st = r.cpuTime.stages[i];
      j += fmt::format("{}{}: {{\"calls\": {}, \"us\": {:.1f}, \"us_per_call\": {:.3f}}}", i ? ", " : "",
                       jsonString(st.name), st.calls, st.micros, st.calls ? st.micros / double(st.calls) : 0.0);
    }
    j += "}";
  }
  if (r.hotArena.enabled) {
    j += fmt::format(
        ",\n  \"hot_arena\": {{\"reserved_bytes\": {}, \"used_bytes\": {}, \"heap_bytes\": {}, "
        "\"huge_page_bytes\": {}}}",
        r.hotArena.reservedBytes, r.hotArena.usedBytes, r.hotArena.heapBytes, r.hotArena.hugeBytes);
  }
  if (r.hotText.tried)
    j += fmt::format(",\n  \"hot_text\": {{\"on_huge_page\": {}, \"why_not\": {}}}", r.hotText.moved,
                     jsonString(r.hotText.why));
  if (r.launchThread.enabled)
    j += fmt::format(",\n  \"launch_thread\": {{\"cpu_s\": {:.3f}, \"sleeps_until_woken\": {}, "
                     "\"spins_caught\": {}, \"spins_skipped\": {}, \"launches_taken_over\": {}, "
                     "\"frees_queued\": {}}}",
                     r.launchThread.cpuSeconds, r.launchThread.deepSleeps, r.launchThread.spinsCaught,
                     r.launchThread.spinsSkipped, r.launchThread.takenOver, r.launchThread.freesQueued);
  if (r.pool.enabled) {
    j += fmt::format(
        ",\n  \"pool\": {{\"reserved_bytes\": {}, \"mapped_bytes\": {}, \"peak_in_use_bytes\": {}, "
        "\"allocations\": {}, \"reused\": {}, \"declined\": {}}}",
        r.pool.reservedBytes, r.pool.mappedBytes, r.pool.peakInUseBytes, r.pool.allocations,
        r.pool.reused, r.pool.declined);
  }
  j += "\n}\n";
  return j;
}

namespace {
// "1 graph", "2 graphs" ("1 launch", "2 launches" with the plural given).
std::string counted(uint64_t n, std::string_view noun, std::string_view plural = {}) {
  if (n == 1) return fmt::format("1 {}", noun);
  return plural.empty() ? fmt::format("{} {}s", n, noun) : fmt::format("{} {}", n, plural);
}
}  // namespace

std::string reportSummary(const Report& r) {
  const auto& p = r.replay;
  std::string s = fmt::format("exit report (pid {}, mode {}): {} ops", r.pid, r.mode, r.opsTotal);
  std::string classes;
  for (const auto& [name, n] : r.opsByClass) {
    if (n) classes += fmt::format(" {}={}", name, n);
  }
  s += classes.empty() ? "" : ";" + classes;
  if (!r.kernelsTop.empty()) {
    s += "\n  top kernels:";
    for (size_t i = 0; i < r.kernelsTop.size() && i < 5; ++i)
      s += fmt::format(" {}×{}", r.kernelsTop[i].first, r.kernelsTop[i].second);
  }
  if (r.mode == "graph") {
    s += fmt::format(
        "\n  replay: {:.1f}% of {} stream ops through graphs, {} built, {}, "
        "{:.2f} patches/replay",
        pct(p.opsViaGraph, p.opsTotal), p.opsTotal, counted(p.graphsBuilt, "graph"), counted(p.replays, "replay"),
        p.replays ? double(p.patches) / double(p.replays) : 0.0);
    if (p.firstReplaySeconds >= 0)
      s += fmt::format(", first replay after {:.3f} s", p.firstReplaySeconds);
    if (p.segmentsDropped)
      s += fmt::format(", {} dropped for mismatching more often than {} replayed",
                       counted(p.segmentsDropped, "graph"), p.segmentsDropped == 1 ? "it" : "they");
    if (p.variantsEvicted)
      s += fmt::format(", {} destroyed when long unused (to make room, or after 2^22 ops)",
                       counted(p.variantsEvicted, "graph"));
    if (p.queriesAnsweredNotReady)
      s += fmt::format(", {} of held work answered not ready by graft",
                       counted(p.queriesAnsweredNotReady, "query", "queries"));
    if (p.queriesIssuedForProgress)
      s += fmt::format(", {} issuing it (graft had answered for the target too often without the driver's "
                       "success: a loop that feeds work between its queries)",
                       counted(p.queriesIssuedForProgress, "later query", "later queries"));
    if (!r.kernelsPatched.empty()) {
      s += "\n  most patched kernels:";
      for (size_t i = 0; i < r.kernelsPatched.size() && i < 5; ++i)
        s += fmt::format(" {}×{}", r.kernelsPatched[i].first, r.kernelsPatched[i].second);
    }
    if (!p.fallbacks.empty()) {
      s += "\n  eager ops by reason:";
      for (const auto& [reason, n] : p.fallbacks) s += fmt::format(" {}={}", reason, n);
    }
  }
  if (r.cpuTime.enabled) {
    s += "\n  graft's CPU time (GRAFT_PROFILE), per call:";
    const char* sep = " ";
    for (const auto& st : r.cpuTime.stages) {
      if (!st.calls) continue;
      s += fmt::format("{}{} {:.3f} us × {}", sep, st.name, st.micros / double(st.calls), st.calls);
      sep = ", ";
    }
  }
  if (r.hotArena.enabled) {
    s += fmt::format("\n  per-op data: {:.1f} MiB in graft's arena{}, {:.1f} MiB on the heap",
                     double(r.hotArena.usedBytes) / (1 << 20),
                     !r.hotArena.hugeCounted ? std::string()
                     : r.hotArena.hugeBytes  ? fmt::format(" ({:.0f} MiB on huge pages)", double(r.hotArena.hugeBytes) / (1 << 20))
                                             : std::string(" (no huge pages)"),
                     double(r.hotArena.heapBytes) / (1 << 20));
  }
  if (r.hotText.tried)
    s += r.hotText.moved ? std::string("\n  graft's code: on a huge page")
                         : fmt::format("\n  graft's code: on 4 KiB pages ({})", r.hotText.why);
  if (r.launchThread.enabled)
    s += fmt::format("\n  launch thread: {:.2f} s of CPU time, slept until woken {}; idle "
                     "spells spun through {}, not spun in {}; {} run by the program's thread "
                     "while it waited; {} put behind queued launches",
                     r.launchThread.cpuSeconds, counted(r.launchThread.deepSleeps, "time"),
                     r.launchThread.spinsCaught, r.launchThread.spinsSkipped,
                     counted(r.launchThread.takenOver, "launch", "launches"),
                     counted(r.launchThread.freesQueued, "stream-ordered free", "stream-ordered frees"));
  if (r.pool.enabled) {
    s += fmt::format("\n  pool: {} allocations ({} reused, {} left to the driver), {:.1f} MiB mapped, "
                     "{:.1f} MiB peak in use",
                     r.pool.allocations, r.pool.reused, r.pool.declined,
                     double(r.pool.mappedBytes) / (1 << 20), double(r.pool.peakInUseBytes) / (1 << 20));
  }
  return s;
}

std::string writeReportFile(const Report& r, const std::string& named) {
  const std::string path = expandPath(named);
  {
    const std::filesystem::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  }
  const std::string j = reportJson(r);
  // One of the process's descriptors (GRAFT_STATS=/dev/stdout): written
  // through it, after what the program's streams hold, at the offset it shares
  // with the program (a reopened path would empty or overwrite its file).
  if (const int fd = streamDescriptor(path); fd >= 0) {
    std::fflush(nullptr);
    for (size_t done = 0; done < j.size();) {
      const ssize_t n = ::write(fd, j.data() + done, j.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return "writing GRAFT_STATS=" + path + " failed (" + std::strerror(errno) + ")";
      done += size_t(n);
    }
    return {};
  }
  FILE* f = std::fopen(path.c_str(), isSpecialFile(path) ? "a" : "w");
  if (!f) return "GRAFT_STATS=" + path + " cannot be written (" + std::strerror(errno) + "); no JSON report";
  const bool ok = std::fwrite(j.data(), 1, j.size(), f) == j.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return "writing GRAFT_STATS=" + path + " failed";
  return {};
}

}  // namespace graft::log
