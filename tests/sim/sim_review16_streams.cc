// sim_review16_streams: red-team round 16, streams and events of one segment
// turned into a graph (src/graph/graph_executor.cc build and launch,
// src/core/launch_plan.cc, Engine::forkedBeforeHeld, per-thread proxies).
//
// The looser direction: work that eagerly waits (stream order, an event, the
// legacy stream's implicit synchronization) for a host-gated kernel must not
// run before the host opens the gate under graft either. (sim_gated_fuzz
// checks the other direction: work that eagerly does not wait for the gate
// must not be made to.)
//
//   sim_review16_streams --seed S [--legacy] [--pts] [--recreate] [--queries] [--forkjoin]
//                        [--steps N] [--expect-graphs]
//
// A seed gives one step, repeated (default 30 steps; a cuCtxSynchronize after
// each): kernels on two to four created streams (blocking or not), with
// --legacy the legacy default stream, with --pts the per-thread default
// stream (CU_STREAM_PER_THREAD), records of one to three events (some twice a
// step), waits on them (some on a record of the step before), and one
// sim_gate kernel. Each kernel writes the step number into a cell of its own.
// The host issues the step with the gate closed, lets the simulated GPU run
// (SIM_ASYNC_US, set here) past graft's idle flush, then checks that no kernel
// whose eager dependencies include the gate wrote its cell; with --queries
// also that each event and stream whose eager latest work includes the gate
// answers CUDA_ERROR_NOT_READY. Then it opens the gate, synchronizes, and
// checks every cell. --recreate: every 7 steps a created stream is destroyed
// and created again (the simulator gives the same handle) with the other
// flag.
//
// The eager model mirrors the simulator's (fake_cuda_core.cc enqueue): stream
// order; a legacy-stream item waits for the last item of every blocking
// stream (the per-thread stream included); a blocking stream's item other than
// a record or a wait waits for the legacy stream's last item; a record's event
// on a blocking stream completes only after the legacy stream's last item
// then; a wait waits for its event's latest record.
//
// Exit 0: as eagerly; 1: a kernel ran before the gate it waits for, a wrong
// answer or value; 2: usage or setup; 3 with --expect-graphs: most kernels ran
// eagerly.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

enum class Kind { Kernel, Record, Wait, Gate };

struct Op {
  Kind kind;
  int stream;
  int event = -1;
};

struct Step {
  int created = 0;          // created streams: indices 0..created-1
  std::vector<bool> blocking;  // per stream index (legacy and per-thread: true)
  int legacy = -1, pts = -1;   // stream indices of the default streams, or -1
  int streams = 0;
  int events = 0;
  std::vector<Op> ops;
  std::string describe() const {
    std::string s;
    for (int i = 0; i < streams; ++i)
      s += (i ? "," : "") + std::string(i == legacy ? "L" : i == pts ? "PT" : blocking[i] ? "b" : "n") +
           std::to_string(i);
    s += ":";
    for (const Op& op : ops) {
      const char* k = op.kind == Kind::Kernel ? "k" : op.kind == Kind::Record ? "rec" : op.kind == Kind::Wait ? "wait" : "GATE";
      s += " " + std::string(k) + "@" + std::to_string(op.stream);
      if (op.event >= 0) s += "/e" + std::to_string(op.event);
    }
    return s;
  }
};

// Per op: the ops it waits for, eagerly (transitively, itself excluded), as
// the simulator orders them; and per event op: what its completion covers.
struct Model {
  std::vector<std::set<int>> before;  // an item's start waits for these items' completion
  std::vector<std::set<int>> covers;  // what this item's completion implies (itself included)
  std::vector<std::set<int>> eventCovers;  // records: what the event's completion implies
};

Model modelOf(const Step& st, const std::vector<bool>& blocking, bool firstStep) {
  const size_t n = st.ops.size();
  Model m;
  m.before.resize(n);
  m.covers.resize(n);
  m.eventCovers.resize(n);
  std::vector<int> last(st.streams, -1);
  std::vector<int> latestRecord(st.events, -1);
  // A wait on an event never recorded is no item at all (the simulator's
  // streamWaitEventImpl); one on the step before's record is one.
  std::vector<bool> recorded(st.events, false);
  for (const Op& op : st.ops)
    if (op.kind == Kind::Record && !firstStep) recorded[op.event] = true;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = st.ops[i];
    if (op.kind == Kind::Wait && !recorded[op.event]) continue;
    std::set<int> deps;
    auto add = [&](const std::set<int>& s) { deps.insert(s.begin(), s.end()); };
    if (last[op.stream] >= 0) add(m.covers[last[op.stream]]);
    if (op.stream == st.legacy) {
      for (int b = 0; b < st.streams; ++b)
        if (b != op.stream && blocking[b] && last[b] >= 0) add(m.covers[last[b]]);
    } else if (blocking[op.stream] && st.legacy >= 0 && op.kind != Kind::Record && op.kind != Kind::Wait) {
      if (last[st.legacy] >= 0) add(m.covers[last[st.legacy]]);
    }
    if (op.kind == Kind::Wait && latestRecord[op.event] >= 0) add(m.eventCovers[latestRecord[op.event]]);
    m.before[i] = deps;
    m.covers[i] = deps;
    m.covers[i].insert(int(i));
    if (op.kind == Kind::Record) {
      m.eventCovers[i] = m.covers[i];
      if (op.stream != st.legacy && blocking[op.stream] && st.legacy >= 0 && last[st.legacy] >= 0)
        m.eventCovers[i].insert(m.covers[last[st.legacy]].begin(), m.covers[last[st.legacy]].end());
      latestRecord[op.event] = int(i);
      recorded[op.event] = true;
    }
    last[op.stream] = int(i);
  }
  return m;
}

// --forkjoin: PyTorch's side.wait_stream(main) ... main.wait_stream(side):
// the main stream (a random one) records e0, the other streams wait on it,
// work, record an event each, and the main stream waits on those; kernels of
// the main stream before, between and after; the gate anywhere. So graphs
// launched on a program stream (launch_plan.h) and forks claimed before a
// piece (GRAFT_SEGMENT_OPS) are taken.
void forkJoin(std::mt19937& rng, Step& st) {
  st.ops.clear();
  st.events = std::min(3, st.streams);
  const int main = int(rng() % st.streams);
  auto kernels = [&](int s, int n) {
    for (int k = 0; k < n; ++k) st.ops.push_back({Kind::Kernel, s});
  };
  kernels(main, 1 + int(rng() % 3));
  st.ops.push_back({Kind::Record, main, 0});
  int ev = 1;
  std::vector<int> sides;
  for (int s = 0; s < st.streams; ++s)
    if (s != main) sides.push_back(s);
  for (int s : sides) {
    st.ops.push_back({Kind::Wait, s, 0});
    kernels(s, 1 + int(rng() % 3));
    if (rng() % 2) kernels(main, 1);
  }
  for (int s : sides) {
    const int e = ev < st.events ? ev++ : 0;
    st.ops.push_back({Kind::Record, s, e});
    st.ops.push_back({Kind::Wait, main, e});
  }
  kernels(main, 1 + int(rng() % 3));
  const size_t at = rng() % st.ops.size();
  st.ops.insert(st.ops.begin() + long(at), Op{Kind::Gate, st.ops[at].stream});
}

Step generate(uint32_t seed, bool withLegacy, bool withPts, bool forkjoin) {
  std::mt19937 rng(seed);
  Step st;
  st.created = 2 + int(rng() % 3);
  for (int s = 0; s < st.created; ++s) st.blocking.push_back(rng() % 2);
  st.streams = st.created;
  if (withLegacy) {
    st.legacy = st.streams++;
    st.blocking.push_back(true);
  }
  if (withPts) {
    st.pts = st.streams++;
    st.blocking.push_back(true);
  }
  st.events = 1 + int(rng() % 3);
  const int n = 8 + int(rng() % 12);
  const int gateAt = int(rng() % (n / 2 + 1));  // early enough that much may follow it
  for (int i = 0; i < n; ++i) {
    Op op{Kind::Kernel, int(rng() % st.streams)};
    if (i == gateAt) {
      op.kind = Kind::Gate;
    } else {
      const unsigned r = rng() % 10;
      if (r < 2) {
        op.kind = Kind::Record;
        op.event = int(rng() % st.events);
      } else if (r < 4) {
        op.kind = Kind::Wait;
        op.event = int(rng() % st.events);
      }
    }
    st.ops.push_back(op);
  }
  if (forkjoin) forkJoin(rng, st);
  return st;
}

uint64_t peek(CUdeviceptr p) { return *reinterpret_cast<volatile const uint64_t*>(p); }

}  // namespace

int main(int argc, char** argv) {
  uint32_t seed = 0;
  bool haveSeed = false, expectGraphs = false, withLegacy = false, withPts = false, recreate = false, queries = false, forkjoin = false;
  int steps = 30;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = uint32_t(std::strtoul(argv[++i], nullptr, 10));
      haveSeed = true;
    } else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--expect-graphs")) {
      expectGraphs = true;
    } else if (!std::strcmp(argv[i], "--legacy")) {
      withLegacy = true;
    } else if (!std::strcmp(argv[i], "--pts")) {
      withPts = true;
    } else if (!std::strcmp(argv[i], "--recreate")) {
      recreate = true;
    } else if (!std::strcmp(argv[i], "--forkjoin")) {
      forkjoin = true;
    } else if (!std::strcmp(argv[i], "--queries")) {
      queries = true;
    } else {
      haveSeed = false;
      break;
    }
  }
  if (!haveSeed) {
    std::fprintf(stderr, "usage: sim_review16_streams --seed S [--legacy] [--pts] [--recreate] [--queries] [--forkjoin] "
                         "[--steps N] [--expect-graphs]\n");
    return 2;
  }
  if (!std::getenv("SIM_ASYNC_US")) setenv("SIM_ASYNC_US", "20", 1);
  const Step st = generate(seed, withLegacy, withPts, forkjoin);
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_review16_streams", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction gate = simtest::libraryKernel3("sim_gate_r16");
  CUfunction add = simtest::libraryKernel3("sim_add_r16");
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), zero = simtest::zeroedBuffer(cu);
  std::vector<CUstream> streams(st.streams);
  std::vector<bool> blocking = st.blocking;
  for (int s = 0; s < st.streams; ++s) {
    if (s == st.legacy) streams[s] = CU_STREAM_LEGACY;
    else if (s == st.pts) streams[s] = CU_STREAM_PER_THREAD;
    else SIM_CHECK(cu.cuStreamCreate(&streams[s], blocking[s] ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
  }
  std::vector<CUdeviceptr> cells(st.ops.size());
  for (CUdeviceptr& c : cells) c = simtest::zeroedBuffer(cu, 8);
  std::vector<CUevent> events(st.events);
  for (CUevent& e : events) SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  int gateAt = -1;
  for (size_t i = 0; i < st.ops.size(); ++i)
    if (st.ops[i].kind == Kind::Gate) gateAt = int(i);

  int wrong = 0;
  uint64_t held = 0;  // kernels the gate held back, eagerly
  for (int it = 1; it <= steps; ++it) {
    if (recreate && it % 7 == 0 && st.created > 0) {
      const int s = it / 7 % st.created;
      const CUstream old = streams[s];
      SIM_CHECK(cu.cuStreamDestroy(streams[s]));
      blocking[s] = !blocking[s];
      SIM_CHECK(cu.cuStreamCreate(&streams[s], blocking[s] ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
      if (streams[s] != old) std::printf("sim_review16_streams: the new stream got another handle\n");
    }
    const Model m = modelOf(st, blocking, it == 1);
    for (size_t i = 0; i < st.ops.size(); ++i) {
      const Op& op = st.ops[i];
      const CUstream s = streams[op.stream];
      switch (op.kind) {
        case Kind::Kernel:
          SIM_CHECK(simtest::launchAdd(cu, add, cells[i], zero, uint64_t(it), s));
          break;
        case Kind::Record:
          SIM_CHECK(cu.cuEventRecord(events[op.event], s));
          break;
        case Kind::Wait:
          SIM_CHECK(cu.cuStreamWaitEvent(s, events[op.event], 0));
          break;
        case Kind::Gate: {
          uint64_t unused = 0, threshold = uint64_t(it);
          void* args[] = {const_cast<CUdeviceptr*>(&flag), &unused, &threshold};
          SIM_CHECK(cu.cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
          break;
        }
      }
    }
    // Past graft's idle flush: everything graft holds reaches the driver, and
    // the simulated GPU runs what it can.
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    for (size_t i = 0; i < st.ops.size(); ++i) {
      if (st.ops[i].kind != Kind::Kernel || !m.before[i].count(gateAt)) continue;
      ++held;
      if (peek(cells[i]) == uint64_t(it) && wrong++ < 5)
        std::printf("sim_review16_streams seed %u: step %d: op %zu ran before the gate it waits for (%s)\n", seed,
                    it, i, st.describe().c_str());
    }
    if (queries) {
      for (int e = 0; e < st.events; ++e) {
        int lastRec = -1;
        for (size_t i = 0; i < st.ops.size(); ++i)
          if (st.ops[i].kind == Kind::Record && st.ops[i].event == e) lastRec = int(i);
        if (lastRec < 0 || !m.eventCovers[lastRec].count(gateAt)) continue;
        const CUresult r = cu.cuEventQuery(events[e]);
        if (r != CUDA_ERROR_NOT_READY && wrong++ < 5)
          std::printf("sim_review16_streams seed %u: step %d: cuEventQuery(e%d) returned %d before the gate its "
                      "record waits for opened (%s)\n", seed, it, e, int(r), st.describe().c_str());
      }
      for (int s = 0; s < st.streams; ++s) {
        int lastOp = -1;
        for (size_t i = 0; i < st.ops.size(); ++i)
          if (st.ops[i].stream == s) lastOp = int(i);
        if (lastOp < 0 || !m.covers[lastOp].count(gateAt)) continue;
        if (s == st.legacy) continue;  // the legacy query also answers for blocking streams: not modelled here
        const CUresult r = cu.cuStreamQuery(streams[s]);
        if (r != CUDA_ERROR_NOT_READY && wrong++ < 5)
          std::printf("sim_review16_streams seed %u: step %d: cuStreamQuery(stream %d) returned %d before the gate "
                      "its last op waits for opened (%s)\n", seed, it, s, int(r), st.describe().c_str());
      }
    }
    *reinterpret_cast<volatile uint64_t*>(flag) = uint64_t(it);  // open the gate
    SIM_CHECK(cu.cuCtxSynchronize());
    for (size_t i = 0; i < st.ops.size(); ++i) {
      if (st.ops[i].kind != Kind::Kernel || peek(cells[i]) == uint64_t(it)) continue;
      if (wrong++ < 5)
        std::printf("sim_review16_streams seed %u: step %d: op %zu wrote %llu, expected %d\n", seed, it, i,
                    (unsigned long long)peek(cells[i]), it);
    }
  }
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_review16_streams seed %u: %s; %llu kernels held by the gate; from graphs %llu, eager %llu\n", seed,
              st.describe().c_str(), (unsigned long long)held, (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager);
  if (wrong || simtest::failedCalls()) return 1;
  if (expectGraphs && c.effectsGraph * 2 < c.effectsEager) {
    std::printf("sim_review16_streams seed %u: most kernels ran eagerly: the check proved little\n", seed);
    return 3;
  }
  return 0;
}
