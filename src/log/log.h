// graft's log: one logger (stderr or GRAFT_LOG_FILE), spdlog compiled in with
// hidden symbols. Lines are prefixed "[graft]".
//
// Threading: init() once, before any other thread uses graft; write() is
// thread-safe. enabled() is a relaxed atomic load and is the only call allowed
// on the hot path (and only for trace). May allocate (formatting). Never calls
// the CUDA driver. No CUDA headers.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "config/options.h"

namespace graft::log {

using Level = config::LogLevel;

// Opens the sink, appending to `file` (after expandPath) if it is not empty.
// If the file cannot be opened, logs one line saying so and uses stderr.
// Each of `problems` (option parsing) is logged as a warning.
void init(Level level, const std::string& file, const std::vector<std::string>& problems);
// The descriptor a path names where it names one of the process's open
// descriptors (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N): graft
// writes through it, so a redirected stdout or stderr keeps what the program
// and earlier commands wrote there, at the offset they share. -1 otherwise.
int streamDescriptor(const std::string& expandedPath);
// True for an existing path that is not a regular file (a FIFO, a device):
// appended to, never emptied.
bool isSpecialFile(const std::string& expandedPath);
// Creates `file` (after expandPath) and its folders and, unless its first line
// says it is the log of `run` (the run's marker), empties it and writes that
// line: the first process of a run to start graft empties what an earlier run
// left, while what another process of the same run wrote stays. Serialized
// between processes with flock. Never touches a stream or a special file. No
// error if it cannot (init() then says so).
void claimRunFile(const std::string& file, const std::string& run);
// `path` with each "%p" replaced by this process's id (a file per process:
// GRAFT_LOG_FILE, GRAFT_STATS).
std::string expandPath(const std::string& path);

// The level below which nothing is written (set by init()).
extern std::atomic<int> g_level;
// Inline: the per-op path asks it for trace lines (one load, no call).
inline bool enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed) && level != Level::Off;
}
void write(Level level, std::string_view message);
void flush();

}  // namespace graft::log

#define GRAFT_LOG(level, ...)                                                   \
  do {                                                                          \
    if (::graft::log::enabled(level))                                           \
      ::graft::log::write(level, ::fmt::format(__VA_ARGS__));                   \
  } while (0)
#define GRAFT_TRACE(...) GRAFT_LOG(::graft::log::Level::Trace, __VA_ARGS__)
#define GRAFT_DEBUG(...) GRAFT_LOG(::graft::log::Level::Debug, __VA_ARGS__)
#define GRAFT_INFO(...) GRAFT_LOG(::graft::log::Level::Info, __VA_ARGS__)
#define GRAFT_WARN(...) GRAFT_LOG(::graft::log::Level::Warn, __VA_ARGS__)
#define GRAFT_ERROR(...) GRAFT_LOG(::graft::log::Level::Error, __VA_ARGS__)
// An info line of a kind a long-lived process may print without end (a
// server whose shapes keep moving: an eviction, a new segment's fallback):
// info for the first `limit` of its kind, counted in `counter` (an unsigned
// the caller keeps per kind, under its own lock), then one line saying the
// rest go to debug, then debug.
#define GRAFT_INFO_LIMITED(counter, limit, kind, ...)                                            \
  do {                                                                                          \
    const bool graftAsInfo_ = (counter) < (limit);                                              \
    if (graftAsInfo_) ++(counter);                                                              \
    GRAFT_LOG(graftAsInfo_ ? ::graft::log::Level::Info : ::graft::log::Level::Debug, __VA_ARGS__); \
    if (graftAsInfo_ && (counter) == (limit))                                                   \
      GRAFT_INFO("{} such lines ({}) logged: further ones at debug level", (limit), (kind));     \
  } while (0)
