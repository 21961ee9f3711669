// PerThreadStreams: the program's per-thread default streams, held and
// graphed like any other stream.
//
// Only the thread that owns a per-thread default stream can name it (the
// handle CU_STREAM_PER_THREAD means the calling thread's stream in the current
// context), but graft issues held work from other threads too (the launch
// thread, the idle flush, another thread's mismatch). So each (thread,
// context) pair gets its own engine key (core::perThreadKey) and a proxy:
// graft's own blocking stream in that context, on which graft issues
// everything it held for that per-thread stream (graph launches, eager
// re-issues, deferred frees). A blocking stream orders against the legacy
// stream as the per-thread stream does. Two event edges keep the proxy in the
// per-thread stream's order, both made by the owner thread:
//  - the stream's stream-ordered ops go to the proxy, the ones the program's
//    call issues at once too (the hook puts the proxy in place of the
//    stream), except while graft steps aside (a program's capture, a rest,
//    replay stopped) and ops whose stream the program may see again (host
//    functions get their stream handle; stream memory operations, attached
//    memory), which go to the stream itself after a join;
//  - join (beforeDriverCall): before any other call of the owner that names
//    its per-thread stream reaches the driver (a sync, a capture's start, a
//    synchronous copy), if graft issued work on the proxy since the last
//    join, the per-thread stream waits on `exit`, which the proxy records
//    right after each piece of work graft issues there (issued()). A query
//    makes no join: it asks the proxy first (queryProxy). graft has then issued every launch queued before the call (the
//    engine drains them for every call that issues or observes GPU work), so
//    `exit` follows all of it;
//  - bridge (bridgeIfPending): when such a call may have given the per-thread
//    stream work itself (a synchronous copy or memset, an op while graft
//    steps aside, a host function), before the owner's next stream-ordered op
//    through the proxy the per-thread stream records `entry` and the proxy
//    waits on it.
//
// Slots are never reused: a key stays bound to one (thread, context) for the
// process's life, so a graph learned on one stream never replays on another.
// When the context ends (trait ENDS_CONTEXT in hook/driver_api.def) its
// proxies are retired; the thread's next per-thread op there gets a new key.
// Past kSlots pairs, when the driver refuses a proxy, or in a green context
// (whose per-thread stream the driver refuses), the op keeps the raw
// core::kPerThreadStream key and runs eagerly as before.
//
// Threading: keyFor, bridgeIfPending, beforeDriverCall and joinAllOwned run
// on the owner thread; proxyOf, noteIssued and contextOf on any thread (the
// launch thread included); the context-end calls on the thread making the
// program's call. keyFor makes driver calls and takes a mutex the first
// time a pair is seen; nothing here allocates. Never calls graft's wrappers.
#pragma once

#include <cuda.h>

#include <atomic>
#include <bitset>
#include <bitset>
#include <cstddef>
#include <cstdint>

#include "core/op.h"

namespace graft::graph {

class PerThreadStreams {
 public:
  static constexpr size_t kSlots = 256;

  // Proxies are made only once enabled (graft replays in this process).
  static void enable();
  // The key of the calling thread's per-thread stream in `ctx`, creating its
  // proxy on first use; core::kPerThreadStream when there is none.
  static core::StreamKey keyFor(CUcontext ctx);
  // The proxy of a per-thread key (nullptr for any other key). Marks the
  // proxy as having work to join: callers issue on it.
  static CUstream proxyOf(core::StreamKey key);
  // Any thread: graft issues work on the proxy of `key` (a graph launched on
  // it, or with a branch it waits for): the owner's next call joins.
  static void noteIssued(core::StreamKey key);
  // Any thread, right after graft issued work on the proxy of `key` (and
  // before anything later reaches the legacy stream): records the proxy's
  // `exit` event, which the next join waits on, and marks the join pending.
  // Recorded at the join instead, on the blocking proxy, it would also wait
  // for legacy-stream work issued after the proxy's (tests/sim
  // sim_review4_copies, pts-join-legacy). Calls the driver.
  static void issued(core::StreamKey key);
  // Any thread, right after graft launched a graph with a branch for the
  // proxy of `key` ending in `branchTail` (recorded in the graph, after the
  // branch waited for the proxy's earlier work) and the proxy waited on it:
  // records `exit` on the proxy's non-blocking marker stream after a wait on
  // `branchTail`. The legacy stream's tail wait comes before the proxy's (see
  // GraphHandle::tailOrder), and a record on the blocking proxy would also
  // wait for it, that is for the legacy branch (tests/sim
  // sim_review7_threads, pts-graph-legacy-gate). `lastRecord` (may be
  // null): the program's event whose record graft issued on the proxy after
  // the tail wait (the branch's last op), which `exit` then follows too, so a
  // host that synchronized the stream finds it complete (tests/sim
  // sim_review49_queries, pts-side-sync). As issued() otherwise.
  static void issuedAfter(core::StreamKey key, CUevent branchTail, CUevent lastRecord);
  // Owner thread, before a query of its per-thread stream in the current
  // context reaches the driver: what graft issued on the proxy since the last
  // join counts as the stream's work, with no join (a join's wait is new work
  // a query would find not done yet): CUDA_SUCCESS when there is none or it
  // is complete, else the driver's answer for the proxy.
  static CUresult queryProxy();
  // The context of a per-thread key's stream (nullptr for any other key).
  static CUcontext contextOf(core::StreamKey key);
  // Owner thread, before an op on `key` is submitted to the engine (held or
  // issued on the proxy): if the per-thread stream got work directly since
  // the last bridge, the proxy now waits for it.
  static void bridgeIfPending(core::StreamKey key);
  // Whether the calling thread has a proxy (cheap: a thread-local read).
  static bool owned() { return t_owned_ != 0; }
  // Owner thread, before a call that names its per-thread stream in the
  // current context reaches the driver other than through the proxy: the
  // join, if graft issued work on the proxy since the last one; `enqueues`:
  // the call may give the stream work (the next op bridges first).
  static void beforeDriverCall(bool enqueues);
  // At exit, after graft issued everything: the calling thread joins each of
  // its proxies (any context), since its calls from then on (exit handlers,
  // static destructors) reach the driver without graft. Stream-ordered: the
  // host does not wait. Calls the driver.
  static void joinAllOwned();
  // The proxies a call that may end a context concerns, taken before the
  // call (a context created meanwhile may get the same handle): those of
  // context `ctx`, of device `device`'s primary context, or of any primary
  // context.
  using Proxies = std::bitset<kSlots>;
  static Proxies proxiesOf(CUcontext ctx);
  static Proxies proxiesOfPrimary(int device);
  static Proxies proxiesOfAnyPrimary();  // those of every device's primary context
  // After such a call succeeded: `proxies` are retired (their work ended with
  // the context; nothing is left to join) if the context is gone: always when
  // `surely`, else when the device's primary context is no longer active
  // (a release that was not the last keeps them).
  static void retireIfEnded(const Proxies& proxies, int device, bool surely);
  // Before a function outside graft's table that may end a context (which
  // one is not known): waits for the proxies' unjoined work and retires every
  // proxy. Calls the driver; not under the engine lock (it may wait long).
  static void endedUnknown();

 private:
  static thread_local unsigned t_owned_;  // proxies this thread owns (any context)
};

}  // namespace graft::graph
