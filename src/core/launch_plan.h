// Which program stream a graph spanning several streams can be launched on,
// so that launching it there makes nothing wait for more than graft's
// per-branch plan does (DESIGN.md §2.5; src/graph/graph_executor.cc, "Launch
// plan").
//
// The per-branch plan launches on a stream of graft's: every branch starts
// after its own program stream's earlier work (an entry event) and every
// program stream waits for its own branch only (a tail event). Launching on
// program stream P instead makes every branch wait for P's earlier work and P
// wait for every branch. That is no stricter when, in the graph itself, every
// other branch's first op already follows an op of P, and P's last op follows
// every other branch's last op: the fork and join of PyTorch's
// `side.wait_stream(main)` ... `main.wait_stream(side)`. Then P needs no
// entry or tail event, and P's work after the graph is ordered by the stream
// itself.
//
// Pure computation: no driver calls. Allocates (small vectors per call; it
// runs once per graph build, never per op).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace graft::core {

struct PlanOp {
  enum class Kind : uint8_t { Work, Record, Wait } kind = Kind::Work;
  uint32_t stream = 0;        // index into the streams of the segment
  int32_t waitInstance = -1;  // Wait: the index of the segment's record it waits on (records counted in
                              // order), or negative for an event recorded before the segment
};

struct PlanStream {
  bool legacy = false;    // the legacy default stream
  bool blocking = false;  // a created blocking stream (implicitly ordered against the legacy one)
};

// The dependencies a graph of these ops gets, as graph_executor's capture
// adds them: stream order, waits on records of the segment, and the legacy
// stream's implicit ordering (a legacy-stream op follows every blocking
// stream's ops so far; a blocking stream's op follows the legacy stream's).
// A blocking stream is never chosen when the legacy stream is among the
// streams: the legacy stream's tail wait would wait for the whole launch
// through implicit synchronization.
struct LaunchPlan {
  // A stream the graph can always be launched on as above, the first such in
  // stream order (streams are numbered in order of first use); -1: none.
  int launchOn = -1;
  // Else a stream P whose last op follows every other branch's last op, the
  // first such; -1: none. The graph may be launched on P for an instance in
  // which each stream of forkNeeded (whose first op in the graph follows no
  // op of P) already followed all of P's earlier work when the segment began
  // (it waited on an event P recorded last; the engine tracks that).
  int joinsInto = -1;
  std::vector<uint32_t> forkNeeded;
};
LaunchPlan planLaunch(std::span<const PlanOp> ops, std::span<const PlanStream> streams);

// An instance's fork into the branches of a graph, as the engine checks it
// (stream handles; see LaunchPlan::joinsInto).
struct ForkCandidate {
  uint64_t joinsInto = 0;  // 0: none
  std::vector<uint64_t> forkNeeded;
  // The join stream is the legacy stream or a blocking one: a launch on it
  // also waits for work the implicit synchronization orders before it.
  bool joinSyncsImplicitly = false;
  uint64_t context = 0;  // the graph's: a default stream key names one stream per context
};

}  // namespace graft::core
