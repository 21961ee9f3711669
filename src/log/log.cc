#include "log/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>

namespace graft::log {

std::atomic<int> g_level{static_cast<int>(Level::Warn)};

namespace {
// Never destroyed: graft logs from its exit handler, which may run after this
// file's static destructors would have (a library's constructor that reached
// graft before graft's own constructors registered the handler early).
constinit spdlog::logger* g_logger = nullptr;

spdlog::level::level_enum toSpd(Level l) {
  switch (l) {
    case Level::Trace: return spdlog::level::trace;
    case Level::Debug: return spdlog::level::debug;
    case Level::Info: return spdlog::level::info;
    case Level::Warn: return spdlog::level::warn;
    case Level::Error: return spdlog::level::err;
    case Level::Off: return spdlog::level::off;
  }
  return spdlog::level::info;
}

spdlog::logger* stderrLogger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  return new spdlog::logger("graft", std::move(sink));
}

}  // namespace

std::string expandPath(const std::string& path) {
  std::string r;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
      r += std::to_string(getpid());
      ++i;
    } else {
      r += path[i];
    }
  }
  return r;
}

int streamDescriptor(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  const std::string self = "/proc/" + std::to_string(getpid()) + "/fd/";
  for (const std::string prefix : {std::string("/dev/fd/"), std::string("/proc/self/fd/"), self}) {
    if (path.rfind(prefix, 0) != 0 || path.size() == prefix.size()) continue;
    int fd = 0;
    for (size_t k = prefix.size(); k < path.size(); ++k) {
      if (path[k] < '0' || path[k] > '9' || fd > 100000000) return -1;
      fd = fd * 10 + (path[k] - '0');
    }
    return fd;
  }
  return -1;
}

bool isSpecialFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

void claimRunFile(const std::string& file, const std::string& run) {
  if (file.empty()) return;
  const std::string path = expandPath(file);
  if (streamDescriptor(path) >= 0 || isSpecialFile(path)) return;
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) return;
  ::flock(fd, LOCK_EX);
  const std::string header = "[graft] log of run " + run + " (its processes append; the next run empties it)\n";
  std::string head(header.size(), '\0');
  struct stat st;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const ssize_t got = regular ? ::pread(fd, head.data(), head.size(), 0) : -1;
  if (regular && (got != ssize_t(head.size()) || head != header)) {
    // Another run's log (or none): emptied, and marked as this run's.
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, header.data(), header.size(), 0);
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

void init(Level level, const std::string& file, const std::vector<std::string>& problems) {
  std::string fileProblem;
  if (g_logger) return;  // once
  if (!file.empty()) {
    try {
      // stdout and stderr by their streams (a reopened /dev/stderr would
      // write at an offset of its own over what the program writes there).
      const std::string path = expandPath(file);
      const int fd = streamDescriptor(path);
      if (fd == 1) {
        g_logger = new spdlog::logger("graft", std::make_shared<spdlog::sinks::stdout_sink_mt>());
      } else if (fd == 2) {
        g_logger = stderrLogger();
      } else {
        auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
        g_logger = new spdlog::logger("graft", std::move(sink));
      }
    } catch (const std::exception& e) {
      fileProblem = "GRAFT_LOG_FILE=" + file + " cannot be opened (" + e.what() +
                    "); logging to stderr";
    }
  }
  if (!g_logger) g_logger = stderrLogger();
  g_logger->set_pattern("[graft] %^%l%$: %v");
  g_logger->flush_on(spdlog::level::warn);
  // Problems with the options themselves are shown at any level but `off`.
  if (level != Level::Off) {
    g_logger->set_level(spdlog::level::trace);
    for (const auto& p : problems) g_logger->log(spdlog::level::warn, p);
    if (!fileProblem.empty()) g_logger->log(spdlog::level::warn, fileProblem);
  }
  g_logger->set_level(toSpd(level));
  g_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

void write(Level level, std::string_view message) {
  if (!g_logger) return;
  g_logger->log(toSpd(level), "{}", message);
}

void flush() {
  if (g_logger) g_logger->flush();
}

}  // namespace graft::log
