// A fake Executor for engine unit tests: it "executes" ops by appending them to
// a trace, expands a graph launch into the segment's ops with the values the
// launch supplied, and can be told to fail builds, launches or patches.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "core/executor.h"
#include "core/op_buffer.h"

namespace graft::core {

struct GraphHandle {
  std::vector<OpDesc> shapes;  // views into `storage`
  OpBuffer storage;
  std::vector<std::vector<uint8_t>> values;  // what the "executable graph" holds
  int id = 0;
};

}  // namespace graft::core

namespace graft::test {

using core::Bytes;
using core::OpDesc;
using core::OpKind;

struct Executed {
  OpKind kind;
  uint64_t stream;
  uint64_t shapeHash;
  uint64_t event;
  std::vector<uint8_t> value;
  bool viaGraph;
  bool operator==(const Executed& o) const {
    return kind == o.kind && stream == o.stream && shapeHash == o.shapeHash && value == o.value &&
           event == o.event;
  }
};

class FakeExecutor : public core::Executor {
 public:
  std::vector<Executed> trace;
  int builds = 0, launches = 0, patches = 0, issues = 0;
  std::vector<size_t> builtSizes;  // ops per graph, in build order
  bool streamIsDomain = false;     // domainOf(op) = op.stream (a stand-in for contexts)
  int mixedDomainBuilds = 0;       // graphs asked for with ops of two domains
  int destroyed = 0, kernelForgets = 0;
  bool failBuilds = false;
  int failLaunchAt = -1;  // fail the n-th launch (0-based)
  int failPatchAt = -1;   // fail the n-th patch

  // As graft's executor: kernels know their context, event ops do not.
  uint64_t domainOf(const OpDesc& op) override {
    return streamIsDomain && op.kind == OpKind::Kernel ? op.stream : 0;
  }
  int issue(const OpDesc& op) override {
    ++issues;
    append(op, op.value, false);
    return 0;
  }
  core::GraphHandle* build(const core::BuildRequest& req, std::string* why) override {
    if (failBuilds) {
      *why = "injected build failure";
      return nullptr;
    }
    auto* g = new core::GraphHandle();
    g->id = builds++;
    builtSizes.push_back(req.ops.size());
    uint64_t domain = 0;
    for (const OpDesc& op : req.ops) {
      const uint64_t d = streamIsDomain ? op.stream : 0;  // the truth, events included
      if (d && domain && d != domain) {
        ++mixedDomainBuilds;
        break;
      }
      if (d) domain = d;
    }
    for (const OpDesc& op : req.ops) {
      g->storage.push(op);
      g->values.emplace_back(op.value.data, op.value.data + op.value.size);
    }
    for (size_t i = 0; i < g->storage.size(); ++i) g->shapes.push_back(g->storage.view(i));
    return g;
  }
  int launch(core::GraphHandle* g, const core::OpRange& ops, std::span<const uint32_t> patch,
             bool /*onJoinStream*/, std::string* why) override {
    for (uint32_t k : patch) {
      if (patches++ == failPatchAt) {
        *why = "injected patch failure";
        return 1;
      }
      const OpDesc op = ops[k];
      g->values[k].assign(op.value.data, op.value.data + op.value.size);
    }
    if (launches++ == failLaunchAt) {
      *why = "injected launch failure";
      return 2;
    }
    for (size_t k = 0; k < g->shapes.size(); ++k) {
      // The graph executes what it holds: its shapes and its current values,
      // and the program's event handles of this instance (re-recorded after).
      OpDesc d = g->shapes[k];
      d.event = ops[k].event;
      append(d, Bytes{g->values[k].data(), uint32_t(g->values[k].size())}, true);
    }
    return 0;
  }
  void destroy(core::GraphHandle* g) override {
    ++destroyed;
    delete g;
  }
  void forgetKernels() override { ++kernelForgets; }
  std::vector<uint64_t> destroyedEvents;
  void destroyEvent(uint64_t e, uint64_t /*domain*/) override {
    // An event must not be destroyed while a held op still uses it.
    destroyedEvents.push_back(e);
    destroyedWhileTraceSize.push_back(trace.size());
  }
  std::vector<size_t> destroyedWhileTraceSize;
  std::vector<std::pair<uint64_t, size_t>> freed;  // pointer, trace size when freed
  std::vector<uint64_t> freedOnStream;             // the stream of each free
  void freeAsync(uint64_t p, uint64_t stream, uint64_t) override {
    freed.emplace_back(p, trace.size());
    freedOnStream.push_back(stream);
  }
  // As graft's executor while its launch thread has launches queued: a free
  // made with nothing held waits here until the next drain.
  bool launchesQueued = false;
  std::vector<std::pair<uint64_t, uint64_t>> pendingFrees;  // pointer, stream
  int drains = 0;
  bool freeBehindQueuedLaunches(uint64_t p, uint64_t stream, uint64_t) override {
    if (!launchesQueued || stream == core::kPerThreadStream) return false;
    pendingFrees.emplace_back(p, stream);
    return true;
  }
  bool freesPending() const override { return !pendingFrees.empty(); }
  void drain(std::vector<core::FailedLaunch>*) override {
    ++drains;
    for (const auto& [p, stream] : pendingFrees) freeAsync(p, stream, 0);
    pendingFrees.clear();
  }
  std::string describe(const OpDesc& op) override { return "op " + std::to_string(op.shapeHash); }
  std::string describeDifference(const OpDesc&, const OpDesc&) override { return "differs"; }

 private:
  void append(const OpDesc& op, Bytes value, bool viaGraph) {
    trace.push_back(Executed{op.kind, op.stream, op.shapeHash, op.event,
                             std::vector<uint8_t>(value.data, value.data + value.size), viaGraph});
  }
};

// Builds ops for tests: shape = {id}, value = {payload}.
struct TestOp {
  OpKind kind = OpKind::Kernel;
  uint64_t stream = 0x100;
  uint64_t shape = 0;
  uint64_t value = 0;
  uint64_t event = 0;
  core::EagerCause cause = core::EagerCause::None;

  OpDesc desc() const {
    OpDesc d;
    d.kind = kind;
    d.cause = cause;
    d.api = 1;
    d.stream = stream;
    d.event = event;
    d.shape = {reinterpret_cast<const uint8_t*>(&shape), sizeof(shape)};
    d.value = {reinterpret_cast<const uint8_t*>(&value), kind == OpKind::Kernel ? uint32_t(sizeof(value)) : 0u};
    d.shapeHash = shape * 0x9e3779b97f4a7c15ull ^ stream ^ (uint64_t(kind) << 40);
    return d;
  }
  Executed expected() const {
    OpDesc d = desc();
    return Executed{d.kind, d.stream, d.shapeHash, d.event,
                    std::vector<uint8_t>(d.value.data, d.value.data + d.value.size), false};
  }
};

}  // namespace graft::test
