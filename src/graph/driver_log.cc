#include "graph/driver_log.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hook/driver_api.h"

namespace graft::graph {

using hook::ApiId;
using hook::real;

namespace {

constinit thread_local int t_ownDepth = 0;

// What graft knows of its own lines in the driver's log, under `m`:
// `remembered`, the indices of the lines its closed scopes logged (sorted; the
// most recent kMaxRemembered, `forgotten` counting older ones, all below), and
// `open`, the scopes open now (their thread and the log's index when they
// opened: every line of that thread from there on is graft's). A scope
// registers, reading its start, under `m`, so a line of graft's in a dump
// belongs to a scope that was open or remembered by the time the dump
// returned. No driver call is made under `m` except that read (a program's
// callback may call the log functions from inside a failing driver call).
constexpr size_t kMaxRemembered = 1 << 16;
struct OpenScope {
  uint64_t thread;
  CUlogIterator start;
};
struct OwnLines {
  std::mutex m;
  std::vector<CUlogIterator> remembered;
  uint64_t forgotten = 0;
  std::vector<OpenScope> open;
};
OwnLines& ownLines() {
  static auto* o = new OwnLines;  // never destroyed: dumps may come from exit handlers
  return *o;
}

// A copy of it, taken under its lock.
struct Snapshot {
  std::vector<CUlogIterator> remembered;
  uint64_t forgotten = 0;
  std::vector<OpenScope> open;

  bool rememberedLine(CUlogIterator index) const {
    return std::binary_search(remembered.begin(), remembered.end(), index);
  }
  bool pendingLine(uint64_t thread, CUlogIterator index) const {
    for (const OpenScope& s : open)
      if (s.thread == thread && index >= s.start) return true;
    return false;
  }
  // Remembered lines below `index` of the driver's.
  uint64_t rememberedBelow(CUlogIterator index) const {
    return forgotten + uint64_t(std::lower_bound(remembered.begin(), remembered.end(), index) - remembered.begin());
  }
  // The driver's index of the program's `index` (no scope open): the smallest
  // j with remembered[j] - j > index + forgotten places it after j of graft's
  // lines (remembered[j] - j does not decrease).
  CUlogIterator driverIndex(CUlogIterator index) const {
    const uint64_t want = uint64_t(index) + forgotten;
    size_t lo = 0, hi = remembered.size();
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (uint64_t(remembered[mid]) - mid > want) hi = mid;
      else lo = mid + 1;
    }
    return CUlogIterator(want + lo);
  }
};
Snapshot snapshot() {
  OwnLines& own = ownLines();
  std::lock_guard<std::mutex> lock(own.m);
  return {own.remembered, own.forgotten, own.open};
}

// The largest dump the driver keeps (cuda.h: 25600 bytes), with room; larger
// buffers are tried where a driver keeps more.
constexpr size_t kDumpBytes = 64 << 10, kDumpBytesMax = 16 << 20;

// The driver's dump of its lines from `from` on, and the iterator past the
// last of them (both from the one call); false where it cannot give them.
// `firstBytes`: the buffer tried first (larger ones follow while the dump
// does not fit).
bool dumpFrom(CUlogIterator from, std::string* text, CUlogIterator* end, size_t firstBytes = kDumpBytes) {
  const auto dump = real<ApiId::k_cuLogsDumpToMemory_12090>();
  if (!dump) return false;
  for (size_t bytes = firstBytes; bytes <= kDumpBytesMax; bytes *= 16) {
    text->assign(bytes, '\0');
    size_t size = text->size();
    CUlogIterator it = from;
    ++t_ownDepth;  // graft's own call (its failure would be graft's line)
    const CUresult r = dump(&it, text->data(), &size, 0);
    --t_ownDepth;
    if (r == CUDA_SUCCESS && size + 1 < text->size()) {
      text->resize(size);
      *end = it;
      return true;
    }
  }
  return false;
}

// A line of the log, "[time][thread][CUDA][E] message": its thread; 0 for a
// line of another form (the driver's note that lines were dropped).
uint64_t threadOfLine(std::string_view line) {
  if (line.empty() || line[0] != '[') return 0;
  const size_t open = line.find("][");
  if (open == std::string_view::npos) return 0;
  uint64_t t = 0;
  size_t k = open + 2;
  for (; k < line.size() && line[k] >= '0' && line[k] <= '9'; ++k) t = t * 10 + uint64_t(line[k] - '0');
  return k < line.size() && line[k] == ']' ? t : 0;
}

// The lines of `text` with their indices: the lines of the standard form are
// the last ones before `end`, in order (-1: another form).
std::vector<std::pair<std::string_view, int64_t>> indexedLines(std::string_view text, CUlogIterator end) {
  std::vector<std::pair<std::string_view, int64_t>> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const size_t stop = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.emplace_back(text.substr(pos, stop - pos), -1);
    pos = stop;
  }
  int64_t index = int64_t(end);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (threadOfLine(it->first)) it->second = --index;
  return lines;
}

// The log as the program sees it from its `iterator` (nullptr: all): the
// driver's lines without graft's, and the program's iterator past them.
// False where graft cannot tell.
bool programView(const CUlogIterator* iterator, std::string* out, CUlogIterator* programEnd) {
  // Not left to the driver where graft has no line yet: a scope may open on
  // another thread and log before the dump (it is in `now` below).
  const Snapshot before = snapshot();
  // The dump starts at or below the program's iterator in the driver's
  // numbering (graft's lines still pending make it higher, never lower) and
  // below every open scope's start, so each of graft's lines at or above it
  // is in the dump and classified there.
  CUlogIterator scan = iterator ? before.driverIndex(*iterator) : 0;
  for (const OpenScope& s : before.open) scan = std::min(scan, s.start);
  std::string text;
  CUlogIterator end = 0;
  if (!dumpFrom(scan, &text, &end)) return false;
  // Every scope that logged a line of this dump is open or remembered now.
  const Snapshot now = snapshot();
  const auto lines = indexedLines(text, end);
  CUlogIterator first = end;
  for (const auto& [line, index] : lines)
    if (index >= 0) {
      first = CUlogIterator(index);
      break;
    }
  uint64_t graftBelow = now.rememberedBelow(first);
  out->clear();
  for (const auto& [line, index] : lines) {
    if (index < 0) {
      out->append(line);  // the driver's note that older lines were dropped
      continue;
    }
    const auto r = CUlogIterator(index);
    if (now.rememberedLine(r) || now.pendingLine(threadOfLine(line), r)) {
      ++graftBelow;
      continue;
    }
    if (!iterator || CUlogIterator(r - graftBelow) >= *iterator) out->append(line);
  }
  *programEnd = CUlogIterator(end - graftBelow);
  return true;
}

struct ProgramCallback {
  CUlogsCallback fn;
  void* data;
};

void CUDA_CB forwardToProgram(void* data, CUlogLevel level, char* message, size_t length) {
  if (t_ownDepth > 0) return;  // logged by graft's own call on this thread
  auto* callback = static_cast<ProgramCallback*>(data);
  callback->fn(callback->data, level, message, length);
}

}  // namespace

OwnDriverCalls::OwnDriverCalls() {
  if (t_ownDepth++ > 0) return;
  const auto current = real<ApiId::k_cuLogsCurrent_12090>();
  if (!current) return;
  OwnLines& own = ownLines();
  std::lock_guard<std::mutex> lock(own.m);
  if (current(&start_, 0) != CUDA_SUCCESS) return;
  tracking_ = true;
  own.open.push_back({uint64_t(pthread_self()), start_});
}

OwnDriverCalls::~OwnDriverCalls() {
  if (tracking_) rememberOwnLines();
  --t_ownDepth;  // after the calls above, which are graft's own too
}

void OwnDriverCalls::rememberOwnLines() const {
  const uint64_t self = uint64_t(pthread_self());
  std::string text;
  CUlogIterator end = 0;
  std::vector<CUlogIterator> mine;
  // The log's iterator counts lines: where no thread logged one since the
  // scope opened (none of the probes failed, or a driver that keeps no such
  // log) there is nothing to find, and no dump is made. Otherwise the dump
  // starts with room for those lines alone (a resolution's one or two), not
  // the whole log's.
  CUlogIterator now = start_;
  const auto current = real<ApiId::k_cuLogsCurrent_12090>();
  const bool logged = !(current && current(&now, 0) == CUDA_SUCCESS && now == start_);
  const size_t newLines = now > start_ ? size_t(now - start_) : 0;
  const size_t firstBytes = newLines ? std::min(kDumpBytes, std::max<size_t>(4096, newLines * 512)) : kDumpBytes;
  const bool dumped = logged && dumpFrom(start_, &text, &end, firstBytes);
  if (dumped)
    for (const auto& [line, index] : indexedLines(text, end))
      if (index >= 0 && threadOfLine(line) == self) mine.push_back(CUlogIterator(index));
  OwnLines& own = ownLines();
  std::lock_guard<std::mutex> lock(own.m);
  for (auto it = own.open.begin(); it != own.open.end(); ++it) {
    if (it->thread == self && it->start == start_) {
      own.open.erase(it);
      break;
    }
  }
  for (CUlogIterator index : mine)
    own.remembered.insert(std::upper_bound(own.remembered.begin(), own.remembered.end(), index), index);
  if (own.remembered.size() > kMaxRemembered) {
    const size_t drop = own.remembered.size() - kMaxRemembered;
    own.remembered.erase(own.remembered.begin(), own.remembered.begin() + ptrdiff_t(drop));
    own.forgotten += drop;
  }
}

CUresult currentLogIndex(PFN_cuLogsCurrent_v12090 real, CUlogIterator* iterator, unsigned int flags) {
  if (flags != 0 || !iterator) return real(iterator, flags);
  // Even where graft has no line yet: a scope may open on another thread and
  // log before the driver's answer (it is in the second snapshot).
  Snapshot s = snapshot();
  if (s.open.empty()) {
    CUlogIterator driver = 0;
    const CUresult r = real(&driver, flags);
    if (r != CUDA_SUCCESS) return r;
    // A scope that opened meanwhile and closed is remembered now; one still
    // open has lines to find in the log.
    s = snapshot();
    if (s.open.empty()) {
      *iterator = CUlogIterator(driver - s.rememberedBelow(driver));
      return CUDA_SUCCESS;
    }
  }
  // Scopes are open: their lines so far are found in a dump from the first
  // one's start (each line of the dump counted once, remembered or pending).
  CUlogIterator scan = s.open.front().start;
  for (const OpenScope& o : s.open) scan = std::min(scan, o.start);
  std::string text;
  CUlogIterator end = 0;
  if (!dumpFrom(scan, &text, &end)) return real(iterator, flags);
  const Snapshot now = snapshot();
  uint64_t pending = 0;
  for (const auto& [line, index] : indexedLines(text, end))
    if (index >= 0 && !now.rememberedLine(CUlogIterator(index)) &&
        now.pendingLine(threadOfLine(line), CUlogIterator(index)))
      ++pending;
  *iterator = CUlogIterator(end - now.rememberedBelow(end) - pending);
  return CUDA_SUCCESS;
}

CUresult registerProgramLogCallback(PFN_cuLogsRegisterCallback_v12090 real, CUlogsCallback callback, void* data,
                                    CUlogsCallbackHandle* handle) {
  if (!callback) return real(callback, data, handle);
  // Never freed: the driver may call it until the program unregisters it,
  // which graft does not follow (16 bytes a registration).
  auto* forward = new ProgramCallback{callback, data};
  const CUresult r = real(forwardToProgram, forward, handle);
  if (r != CUDA_SUCCESS) delete forward;
  return r;
}

namespace {
// The driver's own call where graft cannot make the program's view: its
// iterator in the driver's numbering going in, the program's coming out.
template <typename Call>
CUresult asDriverDoes(CUlogIterator* iterator, Call call) {
  if (!iterator) return call(iterator);
  const Snapshot s = snapshot();
  CUlogIterator driver = s.driverIndex(*iterator);
  const CUresult r = call(&driver);
  if (r == CUDA_SUCCESS) *iterator = CUlogIterator(driver - snapshot().rememberedBelow(driver));
  return r;
}
}  // namespace

CUresult dumpLogsToMemory(PFN_cuLogsDumpToMemory_v12090 real, CUlogIterator* iterator, char* buffer, size_t* size,
                          unsigned int flags) {
  std::string text;
  CUlogIterator end = 0;
  if (flags != 0 || !buffer || !size) return real(iterator, buffer, size, flags);
  if (!programView(iterator, &text, &end) || text.size() + 1 > *size)
    return asDriverDoes(iterator, [&](CUlogIterator* it) { return real(it, buffer, size, flags); });
  std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  *size = text.size();
  if (iterator) *iterator = end;
  return CUDA_SUCCESS;
}

CUresult dumpLogsToFile(PFN_cuLogsDumpToFile_v12090 real, CUlogIterator* iterator, const char* path,
                        unsigned int flags) {
  std::string text;
  CUlogIterator end = 0;
  if (flags != 0 || !path) return real(iterator, path, flags);
  auto driverDump = [&](CUlogIterator* it) { return real(it, path, flags); };
  if (!programView(iterator, &text, &end)) return asDriverDoes(iterator, driverDump);
  // As the driver: the file holds the dump alone.
  FILE* f = std::fopen(path, "w");
  if (!f) return asDriverDoes(iterator, driverDump);
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) return asDriverDoes(iterator, driverDump);
  if (iterator) *iterator = end;
  return CUDA_SUCCESS;
}

}  // namespace graft::graph
