#include "core/launch_plan.h"

#include <algorithm>

namespace graft::core {

LaunchPlan planLaunch(std::span<const PlanOp> ops, std::span<const PlanStream> streams) {
  LaunchPlan plan;
  const size_t n = streams.size();
  if (n < 2) return plan;
  using Clock = std::vector<uint32_t>;  // per stream: how many of its ops are followed
  auto join = [](Clock& into, const Clock& from) {
    for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], from[i]);
  };
  std::vector<Clock> clock(n, Clock(n, 0)), first(n);
  std::vector<Clock> records;
  int legacy = -1;
  for (size_t s = 0; s < n; ++s)
    if (streams[s].legacy) legacy = int(s);
  for (const PlanOp& op : ops) {
    const uint32_t s = op.stream;
    if (s >= n) return plan;
    Clock vc = clock[s];
    if (streams[s].legacy) {
      for (size_t j = 0; j < n; ++j)
        if (j != s && streams[j].blocking) join(vc, clock[j]);
    } else if (streams[s].blocking && legacy >= 0) {
      join(vc, clock[size_t(legacy)]);
    }
    if (op.kind == PlanOp::Kind::Wait && op.waitInstance >= 0) {
      if (size_t(op.waitInstance) >= records.size()) return plan;
      join(vc, records[size_t(op.waitInstance)]);
    }
    ++vc[s];
    if (op.kind == PlanOp::Kind::Record) records.push_back(vc);
    if (first[s].empty()) first[s] = vc;
    clock[s] = std::move(vc);
  }
  for (size_t p = 0; p < n; ++p) {
    // Not a blocking stream beside the legacy one: the legacy stream's tail
    // wait would wait for the whole launch on it (implicit synchronization),
    // where eagerly a sync of the legacy stream right after the segment waits
    // only for the blocking stream's ops issued before the legacy one's last.
    bool joins = !first[p].empty() && !(legacy >= 0 && streams[p].blocking);
    std::vector<uint32_t> forkNeeded;
    for (size_t b = 0; joins && b < n; ++b) {
      if (b == p || first[b].empty()) continue;
      joins = clock[p][b] == clock[b][b];             // P's last op follows b's last op
      if (first[b][p] == 0) forkNeeded.push_back(uint32_t(b));  // b's first op follows no op of P
    }
    if (!joins) continue;
    if (forkNeeded.empty()) {
      plan.launchOn = int(p);
      plan.joinsInto = -1;
      plan.forkNeeded.clear();
      return plan;
    }
    if (plan.joinsInto < 0) {
      plan.joinsInto = int(p);
      plan.forkNeeded = std::move(forkNeeded);
    }
  }
  return plan;
}

}  // namespace graft::core
