// oracle_check.cc - canonical effect keys and the checks of an executed trace
// against the issue log.
//
// Invariants:
//  - An executed effect matches a not-yet-matched issued effect with the same
//    content key (normally the earliest; see the matching loop) (kernel handle, launch shape, attributes, parameter
//    bytes; copy/memset arguments; host function + user data). Keys carry no stream: ops replayed in a graph execute on
//    the graph's launch stream.
//  - Order checks use the issue-time vector clocks: if CUDA guarantees x before y,
//    x must execute before y. Checking, for every effect y and lane l, only the
//    latest effect of l that y's clock covers is enough, because the same check
//    orders each lane.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "oracle.h"

namespace oracle {

namespace {

template <class T>
void put(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

constexpr int kMaxReported = 40;

struct KernelKeyView {
  uint64_t func;
  unsigned grid[3], block[3], shmem, numAttrs;
  std::string attrs, params;
};

bool parseKernelKey(const std::string& k, KernelKeyView* v) {
  size_t need = 1 + 8 + 12 + 12 + 4 + 4;
  if (k.size() < need || k[0] != 'K') return false;
  const char* p = k.data() + 1;
  std::memcpy(&v->func, p, 8);
  std::memcpy(v->grid, p + 8, 12);
  std::memcpy(v->block, p + 20, 12);
  std::memcpy(&v->shmem, p + 32, 4);
  std::memcpy(&v->numAttrs, p + 36, 4);
  size_t attrBytes = static_cast<size_t>(v->numAttrs) * (4 + sizeof(CUlaunchAttributeValue));
  if (k.size() < need + attrBytes) return false;
  v->attrs = k.substr(need, attrBytes);
  v->params = k.substr(need + attrBytes);
  return true;
}

const KernelSpec* specOf(const Program& p, uint64_t func) {
  for (const KernelSpec& k : p.kernels) {
    if (reinterpret_cast<uint64_t>(k.fn) == func) return &k;
  }
  return nullptr;
}

std::string keyDiff(const Program& p, const std::string& issued, const std::string& executed) {
  KernelKeyView a, b;
  if (!parseKernelKey(issued, &a) || !parseKernelKey(executed, &b)) return "copy/memset arguments differ";
  char buf[256];
  if (a.func != b.func) return "kernel handle differs";
  if (std::memcmp(a.grid, b.grid, 12) || std::memcmp(a.block, b.block, 12) || a.shmem != b.shmem) {
    std::snprintf(buf, sizeof buf,
                  "launch shape differs: issued grid %u,%u,%u block %u,%u,%u smem %u, executed grid %u,%u,%u block "
                  "%u,%u,%u smem %u",
                  a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2], a.shmem, b.grid[0], b.grid[1],
                  b.grid[2], b.block[0], b.block[1], b.block[2], b.shmem);
    return buf;
  }
  if (a.attrs != b.attrs) {
    return "launch attributes differ (issued " + std::to_string(a.numAttrs) + ", executed " +
           std::to_string(b.numAttrs) + ")";
  }
  const KernelSpec* k = specOf(p, a.func);
  for (size_t i = 0; k && i < k->sizes.size(); ++i) {
    size_t off = k->offsets[i], sz = k->sizes[i];
    if (a.params.compare(off, sz, b.params, off, sz) == 0) continue;
    if (sz == 8) {
      uint64_t x, y;
      std::memcpy(&x, a.params.data() + off, 8);
      std::memcpy(&y, b.params.data() + off, 8);
      std::snprintf(buf, sizeof buf, "parameter %zu differs: issued 0x%" PRIx64 ", executed 0x%" PRIx64, i, x, y);
    } else {
      std::snprintf(buf, sizeof buf, "parameter %zu (%zu bytes at offset %zu) differs", i, sz, off);
    }
    return buf;
  }
  return "parameter bytes differ";
}

std::string describeEffect(const Program& p, const SimEffect& e, const std::vector<Lane>& lanes) {
  std::string s;
  char buf[200];
  switch (e.kind) {
    case SIM_EFFECT_KERNEL: {
      const KernelSpec* k = specOf(p, reinterpret_cast<uint64_t>(e.func));
      s = "kernel " + (k ? k->name : std::string(e.kernelName ? e.kernelName : "?"));
      if (k) {
        size_t tagIdx = k->effect ? 3 : 1;
        uint64_t tag;
        std::memcpy(&tag, e.params + k->offsets[tagIdx], 8);
        std::snprintf(buf, sizeof buf, " tag=0x%" PRIx64, tag);
        s += buf;
      }
      std::snprintf(buf, sizeof buf, " grid %u,%u,%u block %u,%u,%u", e.grid[0], e.grid[1], e.grid[2], e.block[0],
                    e.block[1], e.block[2]);
      s += buf;
      break;
    }
    case SIM_EFFECT_MEMCPY:
      std::snprintf(buf, sizeof buf, "memcpy 0x%" PRIx64 " <- 0x%" PRIx64 " (%zu x %zu bytes)", e.dst, e.src, e.height,
                    e.widthBytes);
      s = buf;
      break;
    case SIM_EFFECT_MEMSET:
      std::snprintf(buf, sizeof buf, "memset 0x%" PRIx64 " = 0x%x (%zu x %zu elements of %u bytes)", e.dst, e.value,
                    e.height, e.widthElements, e.elementSize);
      s = buf;
      break;
    case SIM_EFFECT_HOST_FUNC:
      s = "host function";
      break;
    default:
      s = "marker";
      break;
  }
  std::string stream = "stream id " + std::to_string(e.streamId);
  for (const Lane& l : lanes) {
    if (l.simId == e.streamId) stream = l.name;
  }
  s += e.origin == SIM_ORIGIN_GRAPH ? " from graph launch #" + std::to_string(e.graphLaunchId) + " on " + stream
                                    : " eagerly on " + stream;
  return s;
}

// Latest effect of `lane` whose stamp is <= `stamp`, other than `exclude`; -1 if none.
int latestCovered(const std::vector<Lane>& lanes, const std::vector<LogOp>& log, int lane, uint32_t stamp,
                  int exclude) {
  const std::vector<int>& eff = lanes[lane].effects;
  auto it = std::upper_bound(eff.begin(), eff.end(), stamp, [&](uint32_t s, int id) { return s < log[id].stamp; });
  while (it != eff.begin()) {
    --it;
    if (*it != exclude) return *it;
  }
  return -1;
}

// How `y` came to be ordered after `x`: for every lane, the first op after `x` that
// was ordered after it, in issue order (e.g. record on A -> wait on B -> legacy op).
std::string explainLink(const std::vector<LogOp>& log, const LogOp& x, const LogOp& y, const std::vector<Lane>& lanes) {
  if (y.lane == x.lane) return "same stream";
  std::vector<int> first(lanes.size(), -1);
  std::string chain;
  for (int i = x.id + 1; i <= y.id; ++i) {
    const LogOp& l = log[i];
    if (l.vc[x.lane] < x.stamp) continue;
    bool hostOp = l.lane < 0;
    if (!hostOp && (l.lane == x.lane || first[l.lane] >= 0) && i != y.id) continue;
    if (hostOp && l.thread != y.thread) continue;
    if (!hostOp) first[l.lane] = i;
    chain += (chain.empty() ? "" : " -> ") + l.what;
    if (hostOp) {
      chain += " [host synchronization]";
    } else if (l.kind != Kind::StreamWait && lanes[l.lane].legacy) {
      chain += " [the legacy stream waits for blocking streams]";
    } else if (l.kind != Kind::StreamWait && l.kind != Kind::EventRecord && lanes[l.lane].blocking) {
      chain += " [a blocking stream waits for the legacy stream]";
    }
    if (i == y.id) break;
  }
  return "ordered via: " + chain;
}

}  // namespace

std::string kernelKey(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                      const CUlaunchAttribute* attrs, unsigned numAttrs, const uint8_t* params, size_t bytes) {
  std::string s = "K";
  put(s, reinterpret_cast<uint64_t>(f));
  for (int i = 0; i < 3; ++i) put(s, grid[i]);
  for (int i = 0; i < 3; ++i) put(s, block[i]);
  put(s, shmem);
  put(s, numAttrs);
  for (unsigned i = 0; i < numAttrs; ++i) {
    put(s, static_cast<uint32_t>(attrs[i].id));
    put(s, attrs[i].value);
  }
  s.append(reinterpret_cast<const char*>(params), bytes);
  return s;
}

std::string copyKey(uint64_t dst, uint64_t src, size_t width, size_t height, size_t dstPitch, size_t srcPitch) {
  std::string s = "C";
  for (uint64_t v : {dst, src, uint64_t{width}, uint64_t{height}, uint64_t{1}, uint64_t{dstPitch}, uint64_t{srcPitch},
                     uint64_t{0}, uint64_t{0}}) {
    put(s, v);
  }
  return s;
}

std::string memsetKey(uint64_t dst, unsigned elem, uint32_t value, size_t width, size_t height, size_t pitch) {
  std::string s = "S";
  put(s, dst);
  put(s, elem);
  put(s, value);
  for (uint64_t v : {uint64_t{width}, uint64_t{height}, uint64_t{pitch}}) put(s, v);
  return s;
}

std::string hostKey(CUhostFn fn, void* userData) {
  std::string s = "H";
  put(s, reinterpret_cast<uint64_t>(fn));
  put(s, reinterpret_cast<uint64_t>(userData));
  return s;
}

std::string effectKey(const SimEffect& e) {
  switch (e.kind) {
    case SIM_EFFECT_KERNEL:
      return kernelKey(e.func, e.grid, e.block, e.sharedMemBytes, e.attrs, e.numAttrs, e.params, e.paramBytes);
    case SIM_EFFECT_MEMCPY: {
      std::string s = "C";
      for (uint64_t v : {e.dst, e.src, uint64_t{e.widthBytes}, uint64_t{e.height}, uint64_t{e.depth},
                         uint64_t{e.dstPitch}, uint64_t{e.srcPitch}, uint64_t{e.dstHeight}, uint64_t{e.srcHeight}}) {
        put(s, v);
      }
      return s;
    }
    case SIM_EFFECT_MEMSET:
      return memsetKey(e.dst, e.elementSize, e.value, e.widthElements, e.height, e.dstPitch);
    case SIM_EFFECT_HOST_FUNC:
      return hostKey(e.fn, e.userData);
    default:
      return "M";
  }
}

std::vector<Divergence> checkTrace(const Program& p, const std::vector<LogOp>& log, const std::vector<Lane>& lanes,
                                   const std::vector<Marker>& markers, RunResult* result) {
  std::vector<Divergence> out;
  auto report = [&](int order, const std::string& text) {
    if (static_cast<int>(out.size()) < kMaxReported) out.push_back({order, text});
  };
  size_t n = simTraceSize();
  std::unordered_map<std::string, std::deque<int>> pending;
  for (const LogOp& lo : log) {
    if (lo.effect) pending[lo.key].push_back(lo.id);
  }
  std::vector<long> execPos(log.size(), -1);
  std::vector<int> prevEffect(log.size(), -1), nextEffect(log.size(), -1);
  for (const Lane& l : lanes) {
    for (size_t i = 1; i < l.effects.size(); ++i) {
      prevEffect[l.effects[i]] = l.effects[i - 1];
      nextEffect[l.effects[i - 1]] = l.effects[i];
    }
  }
  std::unordered_map<std::string, int> lastMatched;
  std::unordered_map<std::string, long> markerPos;
  std::vector<std::pair<long, std::string>> unmatched;  // trace index, key
  for (size_t i = 0; i < n; ++i) {
    SimEffect e;
    simTraceGet(i, &e);
    if (e.kind == SIM_EFFECT_MARKER) {
      markerPos[e.label] = static_cast<long>(i);
      continue;
    }
    if (e.origin == SIM_ORIGIN_GRAPH) {
      ++result->graphEffects;
    } else {
      ++result->eagerEffects;
    }
    std::string key = effectKey(e);
    auto it = pending.find(key);
    auto last = lastMatched.find(key);
    // Same content as the op matched last for this key while its lane has not moved
    // past it yet: a duplicate, not the next instance.
    bool duplicate = last != lastMatched.end() &&
                     (nextEffect[last->second] < 0 || execPos[nextEffect[last->second]] < 0) &&
                     (it == pending.end() || it->second.empty() || prevEffect[it->second.front()] < 0 ||
                      execPos[prevEffect[it->second.front()]] < 0);
    if (it == pending.end() || it->second.empty() || duplicate) {
      if (last != lastMatched.end()) {
        report(static_cast<int>(i), std::string(duplicate ? "duplicated" : "stale or duplicated") + ": " +
                                        describeEffect(p, e, lanes) + " executed with the content of " +
                                        log[last->second].what + ", which already executed at trace position " +
                                        std::to_string(execPos[last->second]));
      } else {
        unmatched.emplace_back(static_cast<long>(i), key);
      }
      continue;
    }
    // Among equal-content candidates take the latest one whose predecessor on its
    // lane already executed: in-order execution always picks the oldest, and a lost
    // op is then reported as lost instead of shifting every later match.
    std::deque<int>& dq = it->second;
    auto ready = [&](int id) { return prevEffect[id] < 0 || execPos[prevEffect[id]] >= 0; };
    size_t pick = 0;
    if (ready(dq[0])) {
      while (pick + 1 < dq.size() && ready(dq[pick + 1])) ++pick;
    }
    int id = dq[pick];
    dq.erase(dq.begin() + static_cast<long>(pick));
    execPos[id] = static_cast<long>(i);
    lastMatched[key] = id;
    const LogOp& lo = log[id];
    // A reused kernel handle: the kernel that ran must be the one the program named.
    if (!lo.kernelName.empty() && e.kind == SIM_EFFECT_KERNEL &&
        lo.kernelName != (e.kernelName ? e.kernelName : "")) {
      report(static_cast<int>(i), "wrong kernel: " + lo.what + " executed as kernel " +
                                      (e.kernelName ? e.kernelName : "?") + " (same handle and parameter bytes)");
    }
    // graft issues a per-thread stream's ops on a proxy stream of its own,
    // which the order checks below hold to the per-thread stream's order.
    if (e.origin == SIM_ORIGIN_EAGER && lo.lane >= 0 && e.streamId != lanes[lo.lane].simId &&
        !simStreamStandsFor(e.streamId, lanes[lo.lane].simId)) {
      report(static_cast<int>(i), "wrong stream: " + lo.what + " executed eagerly on " + describeEffect(p, e, lanes));
    }
  }
  // Executed content that was never issued: show the nearest unmatched issued op.
  for (auto& [i, key] : unmatched) {
    SimEffect e;
    simTraceGet(static_cast<size_t>(i), &e);
    std::string text = "executed an effect that was never issued: " + describeEffect(p, e, lanes);
    for (const LogOp& lo : log) {  // a launch the driver refused (a kernel attribute setting) must not run
      if (!lo.effect && lo.kind == Kind::Kernel && lo.key == key) {
        text += "\n    with the content of " + lo.what;
        break;
      }
    }
    for (const LogOp& lo : log) {
      if (!lo.effect || execPos[lo.id] >= 0 || lo.key[0] != key[0]) continue;
      if (key[0] == 'K' && lo.key.compare(1, 8, key, 1, 8) != 0) continue;
      text += "\n    expected (first unexecuted issued op of that kind): " + lo.what +
              "\n    difference: " + keyDiff(p, lo.key, key);
      break;
    }
    report(static_cast<int>(i), text);
  }
  for (const LogOp& lo : log) {
    if (lo.effect && execPos[lo.id] < 0) {
      report(static_cast<int>(n + static_cast<size_t>(lo.id)), "lost: " + lo.what + " was issued but never executed");
    }
  }
  // Happens-before: stream order, event waits, legacy-stream implicit ordering.
  for (const LogOp& y : log) {
    if (!y.effect || execPos[y.id] < 0) continue;
    for (int l = 0; l < static_cast<int>(lanes.size()); ++l) {
      if (!y.vc[l]) continue;
      int x = latestCovered(lanes, log, l, y.vc[l], y.id);
      if (x < 0 || execPos[x] < 0 || execPos[x] < execPos[y.id]) continue;
      const LogOp& xo = log[x];
      std::string what = l == y.lane ? "stream order violated on " + lanes[l].name
                                     : "cross-stream dependency violated (" + explainLink(log, xo, y, lanes) + ")";
      report(static_cast<int>(execPos[y.id]), what + ":\n    " + y.what + " executed at trace position " +
                                                  std::to_string(execPos[y.id]) + "\n    before " + xo.what +
                                                  " (trace position " + std::to_string(execPos[x]) +
                                                  "), which the program ordered before it");
    }
  }
  // Host synchronization: everything a sync covered executed before it returned.
  for (const Marker& m : markers) {
    auto it = markerPos.find(m.label);
    if (it == markerPos.end()) {
      report(1 << 29, "marker " + m.label + " missing from the trace");
      continue;
    }
    for (int l = 0; l < static_cast<int>(lanes.size()); ++l) {
      if (!m.vc[l]) continue;
      int x = latestCovered(lanes, log, l, m.vc[l], -1);
      if (x < 0 || execPos[x] < 0 || execPos[x] < it->second) continue;
      report(static_cast<int>(it->second), "host synchronization violated: " + log[m.logId].what +
                                               " returned (trace position " + std::to_string(it->second) + ") before " +
                                               log[x].what + " executed (trace position " + std::to_string(execPos[x]) +
                                               ")");
    }
  }
  return out;
}

}  // namespace oracle
