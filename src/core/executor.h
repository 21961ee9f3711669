// Executor: the engine's only way to affect the GPU. Implemented by the graph
// layer on the real (or simulated) driver; unit tests inject a fake.
//
// Threading: called by the engine under its lock, on whatever program thread
// holds it. Implementations may call the driver and may allocate on build;
// issue() and launch() must not allocate in steady state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/launch_plan.h"
#include "core/op.h"
#include "core/op_buffer.h"

namespace graft::core {

// An executable graph built from a segment. Opaque to the engine.
struct GraphHandle;

// One queued launch that failed and whose ops were issued eagerly instead
// (see Executor::drain). `graph` is null when the graph was destroyed since.
struct FailedLaunch {
  GraphHandle* graph;
  uint32_t ops;
  // The error that leaves the context unusable (Executor::isStickyError)
  // which the launch or the eager issue of its ops got; 0: none.
  int stickyError = 0;
};

struct BuildRequest {
  std::span<const OpDesc> ops;
  // Per op: for EventWait, the record instance it waits on inside the
  // sequence, or EventInstances::kExternal; ignored for other kinds.
  std::span<const int32_t> waitInstance;
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Issues one graphable op exactly as the program issued it. Returns 0 or the
  // driver's error code.
  virtual int issue(const OpDesc& op) = 0;

  // Whether a driver error code (from issue() or launch()) leaves the context
  // unusable: every later call of the program fails with it eagerly, so the
  // engine stops holding ops (hook::isStickyError). Pure.
  virtual bool isStickyError(int /*rc*/) const { return false; }

  // Builds an executable graph of the ops, re-issued into graft's own capture
  // streams. Returns nullptr and a one-line reason on failure.
  virtual GraphHandle* build(const BuildRequest& request, std::string* whyNot) = 0;

  // Launches `graph` for one matched instance of its segment. `ops` are the
  // program's ops of this instance (same shapes as built); `patch` lists the
  // indices whose value bytes differ from what the executable graph holds and
  // must be updated first. Keeps streams and events as DESIGN.md §2.5 says.
  // Returns 0, or an error code and a one-line reason; on error nothing of
  // the segment's work was enqueued, so the caller may issue `ops` eagerly.
  // kGraphOutdated: the graph was built for streams that have since been
  // destroyed and created again under the same handles with other flags; it
  // must be dropped, not used again.
  // onJoinStream: launch on the graph's ForkCandidate::joinsInto stream; the
  // engine asks for it only when, at the start of this instance, every stream
  // of forkNeeded followed all of that stream's earlier work.
  static constexpr int kGraphOutdated = -1;
  virtual int launch(GraphHandle* graph, const OpRange& ops,
                     std::span<const uint32_t> patch, bool onJoinStream, std::string* whyNot) = 0;

  // A graph on several streams that joins into one of them without forking
  // from it in the graph itself (core/launch_plan.h); null: none. Valid as
  // long as the graph.
  virtual const ForkCandidate* forkCandidate(const GraphHandle* /*graph*/) { return nullptr; }
  // The context current when the program issued an event op (which has no
  // domain of its own, see domainOf); 0: unknown. Pure function of the op.
  virtual uint64_t contextOfEventOp(const OpDesc& /*op*/) { return 0; }
  // Whether pending work on `stream` makes a query of the legacy stream of
  // context `context` answer "not ready": a blocking stream or a per-thread
  // default stream created in that context (observed on an H100,
  // tests/gpu/traps_r13.cu, legacy_query_gate). The stream's own context, not
  // the one current when an op was issued on it (a copy may name another
  // context's stream). Under the engine lock; may ask the driver once per
  // stream.
  virtual bool pendsLegacyQuery(StreamKey /*stream*/, uint64_t /*context*/) { return false; }

  // An executor may run launches on a thread of its own (launch() then only
  // queues the launch and returns 0). drain() returns once every launch queued
  // so far has been handed to the driver; the engine calls it before the
  // program's own calls that issue or observe GPU work, so nothing overtakes
  // a queued launch. A queued launch that failed was issued eagerly from the
  // graph's own copy of its ops; each such launch is appended to `failed`,
  // and the engine stops using its graph (the executor refuses to launch it
  // again: launch() returns an error and queues nothing). Every other member
  // drains first by itself.
  virtual void drain(std::vector<FailedLaunch>* /*failed*/) {}
  // A hint: the engine began holding ops that may become a launch soon, the
  // first since the host waited for the GPU, which is then likely idle (an
  // executor with a launch thread runs that launch on the calling thread when
  // nothing is queued before it, rather than wait for its thread to be
  // scheduled). Cheap; never blocks.
  virtual void expectLaunch() {}

  virtual void destroy(GraphHandle* graph) = 0;

  // Destroys a program event whose destruction the engine deferred until the
  // held ops using it were issued, in `domain` (the context current at the
  // program's call).
  virtual void destroyEvent(uint64_t event, uint64_t domain) = 0;
  // The program destroys `event` now (not deferred): forget what refers to it
  // before the driver does (may call the driver).
  virtual void forgetEvent(uint64_t /*event*/) {}
  // Issues a stream-ordered free the engine deferred until the held ops
  // before it were issued. An executor that launches on a thread of its own
  // may issue it later, after the launches queued before it, but before any
  // op the program issues after it (a free that comes later only keeps the
  // memory from being reused sooner).
  // `domain`: the context current at the program's call (0: unknown), which
  // decides what a default stream names.
  virtual void freeAsync(uint64_t pointer, StreamKey stream, uint64_t domain) = 0;
  // A stream-ordered free the program makes while nothing is held: true when
  // graph launches are still queued and the free was put behind them (as
  // freeAsync may), so the program's thread does not wait for them. False:
  // nothing is queued (or the executor cannot queue it); the caller issues
  // it after draining.
  virtual bool freeBehindQueuedLaunches(uint64_t /*pointer*/, StreamKey /*stream*/, uint64_t /*domain*/) {
    return false;
  }
  // Frees put behind queued launches wait for the next queued launch or the
  // next drain (a program that goes quiet needs the idle flush to drain).
  virtual bool freesPending() const { return false; }
  // A queued launch failed and the launch thread stopped: that launch's ops
  // and those queued after it wait for the next drain (as above).
  virtual bool launchesHalted() const { return false; }

  // Which execution domain (device context) an op runs in; 0 when it has none
  // of its own (an event op on a program stream). Ops of two different
  // nonzero domains never share a graph. Pure function of the op (the same
  // answer for as long as its stream lives); at most one driver call per stream.
  virtual uint64_t domainOf(const OpDesc&) { return 0; }

  // The program unloads code or destroys a context; every graph was destroyed
  // before. Drop what is cached per kernel handle (the driver may hand the
  // same handle to another kernel) and per context. May call the driver and
  // allocate; not on the hot path.
  virtual void forgetKernels() {}

  // For the fallback log only (may allocate): a short description of an op
  // ("kernel sgd_update") and of how two ops differ ("grid 128→96").
  virtual std::string describe(const OpDesc& op) = 0;
  virtual std::string describeDifference(const OpDesc& expected, const OpDesc& actual) = 0;
};

}  // namespace graft::core
