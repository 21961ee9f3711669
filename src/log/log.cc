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

bool isStreamPath(const std::string& path) {
  if (path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0) return true;
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

int64_t coarseRealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void claimRunFile(const std::string& file, int64_t runStartNs) {
  if (file.empty()) return;
  const std::string path = expandPath(file);
  if (isStreamPath(path)) return;
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) return;
  ::flock(fd, LOCK_EX);
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
      int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec < runStartNs)
    (void)::ftruncate(fd, 0);
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

void init(Level level, const std::string& file, const std::vector<std::string>& problems) {
  std::string fileProblem;
  if (g_logger) return;  // once
  if (!file.empty()) {
    try {
      auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(expandPath(file), /*truncate=*/false);
      g_logger = new spdlog::logger("graft", std::move(sink));
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
