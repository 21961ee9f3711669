// sim_trace_replay: issues, on the simulator, the op sequence a real program
// issued, as graft's trace log wrote it (GRAFT_LOG_LEVEL=trace, with graft
// building nothing: GRAFT_WARMUP=1000 GRAFT_DORMANT_AFTER_OPS=0), so graft's
// learning and matching can be studied on a real program's order of ops
// without its GPU (a cuDNN LSTM's nested loops, a library's streams).
//
//   sim_trace_replay TRACE[.gz] [--loop FIRST:END] [--times N] [--expect-graphs PCT] [--max-builds N]
//
// traces/ holds such traces (README there says where each came from).
// Each trace line `token H op stream S DESC [event E] [(boundary)]` becomes:
//   - an event record or wait (DESC "event record" / "stream wait on event")
//     of the program event E on stream S;
//   - an op with "(boundary)": a synchronous copy (the host waits), graft's
//     boundary;
//   - any other op: a kernel launch whose shape stands for the token H (one
//     kernel, the grid telling tokens apart), on stream S.
// Lines `token H barrier` become a cuCtxSynchronize. Stream 0x1 is the legacy
// stream, 0x2 the per-thread one; every other stream value gets a created
// non-blocking stream, every event value a created event, at first use.
// Kernels add a constant to one buffer (their values never change, so
// replays need no patches); only the share of effects from graphs is checked.
// The trace's lines are replayed once, then lines [FIRST, END) (0-based,
// counting only the lines above) N more times.
// Exit 1 when fewer than PCT % of the effects came from graphs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

enum class Kind { Kernel, Record, Wait, Boundary, Barrier };

struct TraceOp {
  Kind kind;
  uint32_t token;   // index of its token hash (kernels' grids)
  uint64_t stream;  // the trace's stream value
  uint64_t event;   // the trace's event value
};

uint64_t hexAfter(const std::string& line, const char* key) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return 0;
  return std::strtoull(line.c_str() + at + std::strlen(key), nullptr, 16);
}

// The trace's lines; a path ending in .gz is read through `gzip -dc`.
bool readLines(const std::string& path, std::vector<std::string>* lines) {
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    FILE* f = popen(("gzip -dc '" + path + "'").c_str(), "r");
    if (!f) return false;
    std::string line;
    for (int c; (c = std::fgetc(f)) != EOF;) {
      if (c != '\n') {
        line += char(c);
        continue;
      }
      lines->push_back(std::move(line));
      line.clear();
    }
    if (!line.empty()) lines->push_back(std::move(line));
    return pclose(f) == 0;
  }
  std::ifstream in(path);
  if (!in) return false;
  for (std::string line; std::getline(in, line);) lines->push_back(std::move(line));
  return true;
}

bool parseTrace(const char* path, std::vector<TraceOp>* ops) {
  std::vector<std::string> lines;
  if (!readLines(path, &lines)) return false;
  std::unordered_map<uint64_t, uint32_t> tokens;
  for (const std::string& line : lines) {
    const size_t t = line.find("token 0x");
    if (t == std::string::npos) continue;
    const uint64_t hash = std::strtoull(line.c_str() + t + 6, nullptr, 16);
    const uint32_t token = tokens.emplace(hash, uint32_t(tokens.size())).first->second;
    if (line.find(" barrier", t) != std::string::npos && line.find(" op stream ", t) == std::string::npos) {
      ops->push_back({Kind::Barrier, token, 0, 0});
      continue;
    }
    const uint64_t stream = hexAfter(line, " op stream ");
    Kind kind = Kind::Kernel;
    if (line.find("(boundary)") != std::string::npos) kind = Kind::Boundary;
    else if (line.find(" event record event ") != std::string::npos) kind = Kind::Record;
    else if (line.find(" stream wait on event event ") != std::string::npos) kind = Kind::Wait;
    ops->push_back({kind, token, stream, hexAfter(line, " event 0x")});
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: sim_trace_replay TRACE [--loop FIRST:END] [--times N] [--expect-graphs PCT] [--max-builds N]\n");
    return 2;
  }
  uint64_t first = 0, end = 0, times = 0, expectPct = 0, maxBuilds = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--loop") {
      char* colon = nullptr;
      first = std::strtoull(argv[i + 1], &colon, 10);
      end = colon && *colon == ':' ? std::strtoull(colon + 1, nullptr, 10) : 0;
    } else if (a == "--times") {
      times = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (a == "--expect-graphs") {
      expectPct = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (a == "--max-builds") {
      maxBuilds = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::printf("sim_trace_replay: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<TraceOp> ops;
  if (!parseTrace(argv[1], &ops) || ops.empty()) {
    std::printf("sim_trace_replay: no trace lines in %s\n", argv[1]);
    return 2;
  }
  if (times && (end <= first || end > ops.size())) {
    std::printf("sim_trace_replay: --loop FIRST:END must lie within the trace's %zu ops\n", ops.size());
    return 2;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_trace_replay", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_trace");
  CUdeviceptr x = simtest::zeroedBuffer(cu);
  std::unordered_map<uint64_t, CUstream> streams{{1, CU_STREAM_LEGACY}, {2, CU_STREAM_PER_THREAD}};
  std::unordered_map<uint64_t, CUevent> events;
  // The handle for a trace value, created at its first use.
  auto handleFor = [](auto& handles, uint64_t value, auto create) {
    auto it = handles.find(value);
    if (it != handles.end()) return it->second;
    typename std::remove_reference_t<decltype(handles)>::mapped_type created = nullptr;
    SIM_CHECK(create(&created));
    return handles.emplace(value, created).first->second;
  };
  auto streamOf = [&](uint64_t s) {
    return handleFor(streams, s, [&](CUstream* h) { return cu.cuStreamCreate(h, CU_STREAM_NON_BLOCKING); });
  };
  auto eventOf = [&](uint64_t e) {
    return handleFor(events, e, [&](CUevent* h) { return cu.cuEventCreate(h, CU_EVENT_DISABLE_TIMING); });
  };
  auto issue = [&](const TraceOp& op) {
    switch (op.kind) {
      case Kind::Kernel: {
        uint64_t one = 1;
        void* args[] = {&x, &x, &one};
        SIM_CHECK(cu.cuLaunchKernel(add, 1 + op.token % 1024, 1 + op.token / 1024, 1, 1, 1, 1, 0, streamOf(op.stream),
                                    args, nullptr));
        break;
      }
      case Kind::Record: SIM_CHECK(cu.cuEventRecord(eventOf(op.event), streamOf(op.stream))); break;
      case Kind::Wait: SIM_CHECK(cu.cuStreamWaitEvent(streamOf(op.stream), eventOf(op.event), 0)); break;
      case Kind::Boundary: {
        uint64_t got = 0;
        SIM_CHECK(cu.cuStreamSynchronize(streamOf(op.stream)));
        SIM_CHECK(cu.cuMemcpyDtoH(&got, x, 8));
        break;
      }
      case Kind::Barrier: SIM_CHECK(cu.cuCtxSynchronize()); break;
    }
  };
  for (const TraceOp& op : ops) issue(op);
  for (uint64_t n = 0; n < times; ++n)
    for (uint64_t i = first; i < end; ++i) issue(ops[i]);
  SIM_CHECK(cu.cuCtxSynchronize());
  SimCounters c{};
  simCounters(&c);
  const bool ok = simtest::failedCalls() == 0;
  std::printf("sim_trace_replay: %zu trace ops, then [%llu, %llu) %llu times, %s; effects from graphs %llu, eager "
              "%llu, graph launches %llu\n",
              ops.size(), (unsigned long long)first, (unsigned long long)end, (unsigned long long)times,
              ok ? "every call succeeded" : "FAILED CALLS", (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager, (unsigned long long)c.graphLaunches);
  if (!ok) return 1;
  if (expectPct && simtest::tooFewFromGraphs("sim_trace_replay", c, expectPct)) return 1;
  if (maxBuilds && c.graphInstantiations > maxBuilds) {
    std::printf("sim_trace_replay: %llu graphs instantiated, more than --max-builds %llu\n",
                (unsigned long long)c.graphInstantiations, (unsigned long long)maxBuilds);
    return 1;
  }
  return 0;
}
