#include "graph/driver_log.h"

#include <pthread.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hook/driver_api.h"

namespace graft::graph {

using hook::ApiId;
using hook::real;

namespace {

constinit thread_local int t_ownDepth = 0;

// Indices in the driver's log of the lines graft's own calls logged (the
// most recent kMaxRemembered; `forgotten` counts the older ones, all below).
// The program sees the log without them: its iterators count only the other
// lines (programIndex, driverIndex).
constexpr size_t kMaxRemembered = 1 << 16;
struct OwnLines {
  std::mutex m;
  std::set<CUlogIterator> indices;
  uint64_t forgotten = 0;

  // Lines of graft's below `index` of the driver's.
  uint64_t below(CUlogIterator index) const {
    return forgotten + uint64_t(std::distance(indices.begin(), indices.lower_bound(index)));
  }
  CUlogIterator programIndex(CUlogIterator index) const { return CUlogIterator(index - below(index)); }
  // The driver's index of the program's line `index` (or of where it will be).
  CUlogIterator driverIndex(CUlogIterator index) const {
    CUlogIterator r = index;
    for (CUlogIterator next; (next = CUlogIterator(index + below(r))) != r;) r = next;
    while (indices.count(r)) ++r;
    return r;
  }
  bool empty() const { return indices.empty() && !forgotten; }
};
OwnLines& ownLines() {
  static auto* o = new OwnLines;  // never destroyed: dumps may come from exit handlers
  return *o;
}

// The largest dump the driver keeps (cuda.h: 25600 bytes), with room.
constexpr size_t kDumpBytes = 64 << 10;

// The driver's dump of the lines from `from` (nullptr: all it keeps), and the
// iterator past the last of them; false where it cannot say.
bool dumpRange(const CUlogIterator* from, std::string* text, CUlogIterator* end) {
  const auto dump = real<ApiId::k_cuLogsDumpToMemory_12090>();
  const auto current = real<ApiId::k_cuLogsCurrent_12090>();
  if (!dump || !current) return false;
  text->assign(kDumpBytes, '\0');
  size_t size = text->size();
  CUlogIterator it = from ? *from : 0;
  if (dump(from ? &it : nullptr, text->data(), &size, 0) != CUDA_SUCCESS || size >= text->size()) return false;
  text->resize(size);
  if (from) {
    *end = it;
  } else if (current(end, 0) != CUDA_SUCCESS) {
    return false;
  }
  return true;
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
// the last ones before `end`, in order.
std::vector<std::pair<std::string_view, int64_t>> indexedLines(std::string_view text, CUlogIterator end) {
  std::vector<std::pair<std::string_view, int64_t>> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const size_t stop = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.emplace_back(text.substr(pos, stop - pos), -1);
    pos = stop;
  }
  int64_t index = int64_t(end);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (threadOfLine(it->first)) it->second = --index;
  return lines;
}

// The program's dump from its `iterator` (nullptr: all): the driver's,
// without graft's lines, and the program's iterator past them. False where
// graft has none to leave out or cannot tell (the caller then asks the driver).
bool filteredDump(const CUlogIterator* iterator, std::string* out, CUlogIterator* programEnd) {
  CUlogIterator from = 0;
  {
    std::lock_guard<std::mutex> lock(ownLines().m);
    if (ownLines().empty()) return false;
    if (iterator) from = ownLines().driverIndex(*iterator);
  }
  std::string text;
  CUlogIterator end = 0;
  ++t_ownDepth;  // graft's own dump (its failure would be graft's line)
  const bool dumped = dumpRange(iterator ? &from : nullptr, &text, &end);
  --t_ownDepth;
  if (!dumped) return false;
  out->clear();
  std::lock_guard<std::mutex> lock(ownLines().m);
  for (const auto& [line, index] : indexedLines(text, end))
    if (index < 0 || !ownLines().indices.count(CUlogIterator(index))) out->append(line);
  *programEnd = ownLines().programIndex(end);
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
  if (const auto current = real<ApiId::k_cuLogsCurrent_12090>())
    tracking_ = current(&start_, 0) == CUDA_SUCCESS;
}

OwnDriverCalls::~OwnDriverCalls() {
  if (tracking_) rememberOwnLines();
  --t_ownDepth;  // after the calls above, which are graft's own too
}

void OwnDriverCalls::rememberOwnLines() const {
  CUlogIterator end = 0;
  if (real<ApiId::k_cuLogsCurrent_12090>()(&end, 0) != CUDA_SUCCESS || end == start_) return;
  std::string text;
  CUlogIterator from = start_, dumpedEnd = 0;
  if (!dumpRange(&from, &text, &dumpedEnd)) return;
  const uint64_t self = uint64_t(pthread_self());
  OwnLines& own = ownLines();
  std::lock_guard<std::mutex> lock(own.m);
  for (const auto& [line, index] : indexedLines(text, dumpedEnd))
    if (index >= 0 && threadOfLine(line) == self) own.indices.insert(CUlogIterator(index));
  for (; own.indices.size() > kMaxRemembered; ++own.forgotten) own.indices.erase(own.indices.begin());
}

CUresult currentLogIndex(PFN_cuLogsCurrent_v12090 real, CUlogIterator* iterator, unsigned int flags) {
  const CUresult r = real(iterator, flags);
  if (r == CUDA_SUCCESS && iterator) {
    std::lock_guard<std::mutex> lock(ownLines().m);
    *iterator = ownLines().programIndex(*iterator);
  }
  return r;
}

CUresult registerProgramLogCallback(PFN_cuLogsRegisterCallback_v12090 real, CUlogsCallback callback, void* data,
                                    CUlogsCallbackHandle* handle) {
  if (!callback) return real(callback, data, handle);
  // Never freed: the driver may call it until the program unregisters it,
  // which graft does not follow (a few bytes a registration).
  auto* forward = new ProgramCallback{callback, data};
  const CUresult r = real(forwardToProgram, forward, handle);
  if (r != CUDA_SUCCESS) delete forward;
  return r;
}

CUresult dumpLogsToMemory(PFN_cuLogsDumpToMemory_v12090 real, CUlogIterator* iterator, char* buffer, size_t* size,
                          unsigned int flags) {
  std::string text;
  CUlogIterator end = 0;
  if (flags != 0 || !buffer || !size || !filteredDump(iterator, &text, &end) || text.size() + 1 > *size)
    return real(iterator, buffer, size, flags);
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
  if (flags != 0 || !path || !filteredDump(iterator, &text, &end)) return real(iterator, path, flags);
  // As the driver: the file holds the dump alone.
  FILE* f = std::fopen(path, "w");
  if (!f) return real(iterator, path, flags);
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) return real(iterator, path, flags);
  if (iterator) *iterator = end;
  return CUDA_SUCCESS;
}

}  // namespace graft::graph
