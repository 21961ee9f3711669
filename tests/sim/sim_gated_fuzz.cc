// sim_gated_fuzz: generated steps in which the host releases a gate kernel
// only after it synchronized work that, eagerly, never waits for the gate.
//
// A seed gives one step, repeated 40 times (so graft captures and replays it):
// kernels on two to four created streams (blocking or not), records of one to
// three events and waits on events recorded earlier in the step, and one
// sim_gate kernel, which runs only once the host writes the iteration number
// into a flag. Sometimes the gate is issued before the step (a stream query
// in between). The host then synchronizes a stream or an event whose work,
// by eager CUDA semantics (stream order, each wait on the event's latest
// record), does not include the gate, and only then opens the gate. Eagerly
// that always finishes; a replay that makes the synchronized work wait for
// the gate is a simulated deadlock (the simulator aborts).
// With --legacy the last stream is the legacy default stream (its implicit
// synchronization with the blocking streams counts among the dependencies;
// the model below is stricter than the driver, which does not hold a wait or
// a record on a blocking stream for earlier legacy work, so a chosen sync
// target excludes the gate on the real driver too).
//   sim_gated_fuzz --seed S [--legacy] [--expect-graphs]
// Exit 1 on a wrong count, or with --expect-graphs unless most kernels ran
// from graphs; 2 on a setup failure.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

constexpr uint64_t kIterations = 40;

enum class Kind { Kernel, Record, Wait, Gate };

struct Op {
  Kind kind;
  int stream;
  int event = -1;
};

struct Step {
  int streams = 0;
  std::vector<bool> blocking;
  int legacy = -1;  // with --legacy: the index of the legacy default stream
  std::vector<Op> ops;
  bool gateBefore = false;  // the gate (ops[0]) is issued, then its stream queried, before the rest
  // What the host synchronizes before it opens the gate: a stream's or an event's index.
  bool syncEvent = false;
  int syncTarget = 0;
  std::string describe() const {
    std::string s = std::to_string(streams) + " streams, ops:";
    for (const Op& op : ops) {
      const char* k = op.kind == Kind::Kernel ? "k" : op.kind == Kind::Record ? "rec" : op.kind == Kind::Wait ? "wait" : "GATE";
      s += " " + std::string(k) + "@" + (op.stream == legacy ? "L" : "s" + std::to_string(op.stream));
      if (op.event >= 0) s += "/e" + std::to_string(op.event);
    }
    s += gateBefore ? "; gate before the step" : "";
    s += "; host syncs " + std::string(syncEvent ? "event e" : "stream s") + std::to_string(syncTarget);
    return s;
  }
};

// Ops whose completion op `i` waits for eagerly (itself included).
std::vector<bool> closureOf(const Step& step, int i) {
  std::vector<bool> in(step.ops.size(), false);
  std::vector<int> todo{i};
  while (!todo.empty()) {
    const int k = todo.back();
    todo.pop_back();
    if (in[k]) continue;
    in[k] = true;
    for (int j = k - 1; j >= 0; --j) {  // the previous op on the same stream
      if (step.ops[j].stream == step.ops[k].stream) {
        todo.push_back(j);
        break;
      }
    }
    // The legacy stream's implicit synchronization: a legacy-stream op waits
    // for every blocking stream's previous op, and a blocking stream's op for
    // the legacy stream's previous op.
    const int sk = step.ops[k].stream;
    if (sk == step.legacy) {
      for (int t = 0; t < step.streams; ++t) {
        if (t == sk || !step.blocking[t]) continue;
        for (int j = k - 1; j >= 0; --j) {
          if (step.ops[j].stream == t) {
            todo.push_back(j);
            break;
          }
        }
      }
    } else if (step.legacy >= 0 && step.blocking[sk]) {
      for (int j = k - 1; j >= 0; --j) {
        if (step.ops[j].stream == step.legacy) {
          todo.push_back(j);
          break;
        }
      }
    }
    if (step.ops[k].kind == Kind::Wait) {
      for (int j = k - 1; j >= 0; --j) {  // the event's latest record before the wait
        if (step.ops[j].kind == Kind::Record && step.ops[j].event == step.ops[k].event) {
          todo.push_back(j);
          break;
        }
      }
    }
  }
  return in;
}

bool generate(uint32_t seed, bool withLegacy, Step* out) {
  std::mt19937 rng(seed);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    Step step;
    step.streams = 2 + int(rng() % 3);
    for (int s = 0; s < step.streams; ++s) step.blocking.push_back(rng() % 2);
    if (withLegacy) step.legacy = step.streams - 1;
    const int events = 1 + int(rng() % 3);
    const int n = 6 + int(rng() % 11);
    step.gateBefore = rng() % 3 == 0;
    const int gateAt = step.gateBefore ? 0 : int(rng() % n);
    std::vector<bool> recorded(events, false);
    for (int i = 0; i < n; ++i) {
      Op op{Kind::Kernel, int(rng() % step.streams)};
      if (i == gateAt) {
        op.kind = Kind::Gate;
      } else if (!step.gateBefore || i > 0) {
        const unsigned r = rng() % 10;
        if (r < 2) {
          op.kind = Kind::Record;
          op.event = int(rng() % events);
          recorded[op.event] = true;
        } else if (r < 4) {
          std::vector<int> choices;
          for (int e = 0; e < events; ++e)
            if (recorded[e]) choices.push_back(e);
          if (!choices.empty()) {
            op.kind = Kind::Wait;
            op.event = choices[rng() % choices.size()];
          }
        }
      }
      step.ops.push_back(op);
    }
    // Candidates: each stream's last op, each event's last record, if the gate
    // is not among what it waits for.
    struct Candidate {
      bool event;
      int target;
    };
    std::vector<Candidate> candidates;
    for (int s = 0; s < step.streams; ++s) {
      for (int j = n - 1; j >= 0; --j) {
        if (step.ops[j].stream != s) continue;
        if (!closureOf(step, j)[gateAt]) candidates.push_back({false, s});
        break;
      }
    }
    for (int e = 0; e < events; ++e) {
      for (int j = n - 1; j >= 0; --j) {
        if (step.ops[j].kind != Kind::Record || step.ops[j].event != e) continue;
        if (!closureOf(step, j)[gateAt]) candidates.push_back({true, e});
        break;
      }
    }
    if (candidates.empty()) continue;
    const Candidate c = candidates[rng() % candidates.size()];
    step.syncEvent = c.event;
    step.syncTarget = c.target;
    *out = step;
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t seed = 0;
  bool haveSeed = false, expectGraphs = false, withLegacy = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = uint32_t(std::strtoul(argv[++i], nullptr, 10));
      haveSeed = true;
    } else if (!std::strcmp(argv[i], "--expect-graphs")) {
      expectGraphs = true;
    } else if (!std::strcmp(argv[i], "--legacy")) {
      withLegacy = true;
    } else {
      haveSeed = false;
      break;
    }
  }
  if (!haveSeed) {
    std::fprintf(stderr, "usage: sim_gated_fuzz --seed S [--legacy] [--expect-graphs]\n");
    return 2;
  }
  Step step;
  if (!generate(seed, withLegacy, &step)) {
    std::fprintf(stderr, "sim_gated_fuzz: seed %u: no step with a synchronization independent of the gate\n", seed);
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_gated_fuzz", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction gate = simtest::libraryKernel3("sim_gate");
  CUfunction add = simtest::libraryKernel3("sim_add_step");
  CUdeviceptr flag = simtest::zeroedBuffer(cu);
  std::vector<CUstream> streams(step.streams);
  std::vector<CUdeviceptr> counts(step.streams);
  std::vector<uint64_t> perStep(step.streams, 0);
  for (int s = 0; s < step.streams; ++s) {
    if (s == step.legacy) streams[s] = nullptr;  // the legacy default stream
    else SIM_CHECK(cu.cuStreamCreate(&streams[s], step.blocking[s] ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
    counts[s] = simtest::zeroedBuffer(cu);
  }
  for (const Op& op : step.ops)
    if (op.kind == Kind::Kernel) ++perStep[op.stream];
  std::vector<CUevent> events(3);
  for (CUevent& e : events) SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));

  for (uint64_t it = 1; it <= kIterations; ++it) {
    for (size_t i = 0; i < step.ops.size(); ++i) {
      const Op& op = step.ops[i];
      const CUstream s = streams[op.stream];
      switch (op.kind) {
        case Kind::Kernel:
          SIM_CHECK(simtest::launchAdd(cu, add, counts[op.stream], counts[op.stream], 1, s));
          break;
        case Kind::Record:
          SIM_CHECK(cu.cuEventRecord(events[op.event], s));
          break;
        case Kind::Wait:
          SIM_CHECK(cu.cuStreamWaitEvent(s, events[op.event], 0));
          break;
        case Kind::Gate: {
          uint64_t unused = 0, threshold = it;
          void* args[] = {&flag, &unused, &threshold};
          SIM_CHECK(cu.cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
          if (step.gateBefore) cu.cuStreamQuery(s);  // the gate is issued before the step
          break;
        }
      }
    }
    if (step.syncEvent) SIM_CHECK(cu.cuEventSynchronize(events[step.syncTarget]));
    else SIM_CHECK(cu.cuStreamSynchronize(streams[step.syncTarget]));
    *reinterpret_cast<volatile uint64_t*>(flag) = it;  // open the gate
    SIM_CHECK(cu.cuCtxSynchronize());
  }
  for (int s = 0; s < step.streams; ++s) {
    const uint64_t got = *reinterpret_cast<volatile const uint64_t*>(counts[s]);
    if (got != kIterations * perStep[s]) {
      std::printf("sim_gated_fuzz seed %u: stream s%d counted %llu kernels, expected %llu (%s)\n", seed, s,
                  static_cast<unsigned long long>(got), static_cast<unsigned long long>(kIterations * perStep[s]),
                  step.describe().c_str());
      return 1;
    }
  }
  if (simtest::failedCalls()) return 1;
  SimCounters counters{};
  simCounters(&counters);
  std::printf("sim_gated_fuzz seed %u: %s; kernels from graphs %llu, eager %llu\n", seed, step.describe().c_str(),
              static_cast<unsigned long long>(counters.effectsGraph),
              static_cast<unsigned long long>(counters.effectsEager));
  if (expectGraphs && counters.effectsGraph * 2 < counters.effectsEager) {
    std::printf("sim_gated_fuzz seed %u: most work ran eagerly, so the check proved nothing\n", seed);
    return 1;
  }
  return 0;
}
