// sim_driver_log: the driver's error log (CUDA 12.9: cuLogsRegisterCallback,
// cuLogsDumpToMemory, cuLogsDumpToFile) must hold the program's own failed
// calls only, as eagerly. graft probes each kernel it first sees (its kind:
// function or library kernel; the parameter past its last one), and those
// probes fail by design; the driver logs every failure (the simulator logs
// its kernel-handle queries' failures, one line each, as the H100's driver
// does: tests/sim/fake_cuda_api.cc). Under graft the program's callback must
// not get graft's lines and its dumps must not hold them (traps_r25
// driver_logs on the H100: 31 lines where eagerly 23).
//
//   --mode loop            the callback registered after start; a step launches
//                          two kernels, a new function every 40th step and a new
//                          library kernel every 60th (first seen by graft
//                          there); on irregular steps the program's own failing
//                          calls, whose lines read as graft's probes' do
//                          (cuFuncGetParamInfo past the last parameter of a
//                          kernel graft probed too, cuKernelGetName on a
//                          function, cuFuncGetName on a library kernel).
//                          Every 10th step a dump from its iterator must hold
//                          exactly the lines of its failures since the last
//                          dump, in order, and the callback have counted all
//                          of them; every 50th a dump of the whole log and a
//                          dump to a file, the same.
//   --mode register-early  the same, with the callback registered before cuInit.
//   --mode threads         (from a review) thread B launches a new kernel every
//                          round while thread A takes cuLogsCurrent, makes one
//                          failing call and dumps from its iterator: exactly
//                          A's line (graft's scope on B was still open).
//   --mode threads-null    the same with whole-log dumps (NULL iterator); not
//                          registered: the simulator's log is never trimmed,
//                          so its 10000 whole-log dumps take minutes.
//   --mode null-race       whole-log dumps while thread C makes failing calls:
//                          C's lines only, never fewer than before.
//   --mode quadratic       --steps new kernels (graft's lines), then the
//                          program's iterator, one failing call and a dump from
//                          the iterator: that one line (the dump's time shown).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <pthread.h>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"
#include "sim_tagged_trace.h"

namespace {

using namespace simtest::modes;

struct Seen {
  int count = 0;
  std::vector<std::string> messages;
};

void CUDA_CB onLog(void* data, CUlogLevel, char* message, size_t length) {
  auto* seen = static_cast<Seen*>(data);
  ++seen->count;
  seen->messages.emplace_back(message, strnlen(message, length));
}

struct LogApi {
  decltype(&::cuLogsRegisterCallback) registerCallback = nullptr;
  decltype(&::cuLogsCurrent) current = nullptr;
  decltype(&::cuLogsDumpToMemory) dumpToMemory = nullptr;
  decltype(&::cuLogsDumpToFile) dumpToFile = nullptr;
};

// The log functions, looked up as the runtime does.
bool loadLogApi(const simtest::Driver& drv, LogApi* log) {
  return simtest::lookupProc(drv, "cuLogsRegisterCallback", &log->registerCallback) &&
         simtest::lookupProc(drv, "cuLogsCurrent", &log->current) &&
         simtest::lookupProc(drv, "cuLogsDumpToMemory", &log->dumpToMemory) &&
         simtest::lookupProc(drv, "cuLogsDumpToFile", &log->dumpToFile);
}

// The start of the modes that need no callback: the driver, the log
// functions, device 0's primary context current. 0, or main's exit code.
int startWithLog(simtest::Driver* drv, LogApi* log, CUcontext* ctx) {
  if (const int rc = simtest::startProgram("sim_driver_log", drv, nullptr)) return rc;
  if (!loadLogApi(*drv, log) || !simtest::openPrimaryContext(drv->plain, ctx)) return 2;
  return 0;
}

// The messages of a dump's lines ("[time][thread][CUDA][E] message").
std::vector<std::string> messagesOf(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    const size_t tag = line.find("[CUDA][E] ");
    out.push_back(tag == std::string::npos ? line : line.substr(tag + 10));
    pos = nl + 1;
  }
  return out;
}

void expectMessages(const std::vector<std::string>& got, const std::vector<std::string>& want, const char* what,
                    int step) {
  expectValue(got.size(), want.size(), what, step);
  for (size_t k = 0; k < got.size() && k < want.size(); ++k)
    if (got[k] != want[k] && g_wrong++ < 8)
      std::printf("%s: %s: step %d: %s: line %zu reads '%s', expected '%s'\n", g_program, g_mode, step, what, k,
                  got[k].c_str(), want[k].c_str());
}

CUfunction newKernel(const char* prefix, int n, SimKernelFamily family) {
  const std::string name = std::string("sim_add_log_") + prefix + std::to_string(n);
  const size_t sizes[3] = {8, 8, 8};
  return simKernelCreate(name.c_str(), family, 3, sizes, nullptr);
}


// The dump's lines ("[time][thread][CUDA][E] message") split: thread, message.
std::vector<std::pair<uint64_t, std::string>> linesOf(const std::string& text) {
  std::vector<std::pair<uint64_t, std::string>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    const size_t a = line.find("]["), b = line.find("][CUDA]");
    uint64_t t = 0;
    if (a != std::string::npos && b != std::string::npos) t = std::stoull(line.substr(a + 2, b - a - 2));
    out.emplace_back(t, line);
    pos = nl + 1;
  }
  return out;
}

// threads: thread B launches a new kernel every round (graft probes it: its
// scope logs failing lines on B); thread A, the program, asks cuLogsCurrent,
// makes one failing call of its own, and dumps from its iterator: the dump
// must hold exactly A's one line (eagerly it always does).
// threads-null: thread A dumps the whole log (NULL iterator) every round
// while thread C makes failing calls of its own: every line must be one
// of A's or C's (graft's lines left out, none of the program's dropped).
int threadsMode(const ModeArgs& args) {
  simtest::Driver drv;
  LogApi log;
  CUcontext ctx = nullptr;
  if (const int rc = startWithLog(&drv, &log, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  CUfunction lib = newKernel("lib", 0, SIM_KERNEL_LIBRARY);
  std::atomic<bool> stop{false};
  std::atomic<int> launched{0};
  const bool nullMode = args.mode == "threads-null";
  std::thread b([&] {
    cu.cuCtxSetCurrent(ctx);
    const CUstream s = simtest::newStream(cu);
    const CUdeviceptr a = simtest::zeroedBuffer(cu);
    for (int i = 0; !stop.load(); ++i) {
      CUfunction k = newKernel("thr", i, (i & 1) ? SIM_KERNEL_LIBRARY : SIM_KERNEL_FUNCTION);
      simtest::launchAdd(cu, k, a, a, 1, s);
      launched.fetch_add(1);
    }
    cu.cuStreamSynchronize(s);
  });
  std::thread c;
  std::atomic<uint64_t> cThread{0};
  if (nullMode)
    c = std::thread([&] {
      cu.cuCtxSetCurrent(ctx);
      cThread = uint64_t(pthread_self());
      const char* name = nullptr;
      while (!stop.load()) cu.cuFuncGetName(&name, lib);
    });
  const uint64_t self = uint64_t(pthread_self());
  std::vector<char> text(1 << 20);
  int bad = 0, extra = 0, missing = 0;
  for (int i = 0; i < args.steps * 50; ++i) {
    const char* name = nullptr;
    if (!nullMode) {
      CUlogIterator it = 0;
      const CUresult rc = log.current(&it, 0);
      const CUlogIterator it0 = it;
      cu.cuFuncGetName(&name, lib);  // fails: one line of A's
      size_t size = text.size();
      if (log.dumpToMemory(&it, text.data(), &size, 0) != CUDA_SUCCESS) { ++bad; continue; }
      int mine = 0, others = 0;
      for (const auto& [t, line] : linesOf(std::string(text.data(), size))) (t == self ? mine : others)++;
      if (mine != 1) { if (missing++ < 3 || mine > 1) std::printf("round %d: %d of A's lines in A's dump (1 expected); cuLogsCurrent rc %d it %u -> %u\n", i, mine, int(rc), it0, it); }
      if (others) { if (extra++ < 3) std::printf("round %d: %d lines of another thread in A's dump\n", i, others); }
    } else {
      size_t size = text.size();
      if (log.dumpToMemory(nullptr, text.data(), &size, 0) != CUDA_SUCCESS) { ++bad; continue; }
      for (const auto& [t, line] : linesOf(std::string(text.data(), size)))
        if (t != self && t != cThread.load()) { if (extra++ < 3) std::printf("round %d: a line of graft's thread in a whole dump: %s\n", i, line.c_str()); break; }
      cu.cuFuncGetName(&name, lib);
    }
  }
  stop = true;
  b.join();
  if (c.joinable()) c.join();
  std::printf("%s: %d rounds, %d kernels launched by B; dumps failed %d, with A's line missing/doubled %d, with other threads' lines %d\n",
              args.mode.c_str(), args.steps * 50, launched.load(), bad, missing, extra);
  return (bad || missing || extra) ? 1 : 0;
}

// quadratic: the program takes an iterator, then launches --steps new kernels
// (graft probes each: one or two failing lines, a dense block of graft's
// lines), then makes one failing call and dumps from its iterator, timed.
int quadraticMode(const ModeArgs& args) {
  simtest::Driver drv;
  LogApi log;
  CUcontext ctx = nullptr;
  if (const int rc = startWithLog(&drv, &log, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  const CUstream s = simtest::newStream(cu);
  const CUdeviceptr a = simtest::zeroedBuffer(cu);
  CUfunction lib = newKernel("lib", 0, SIM_KERNEL_LIBRARY);
  const char* name = nullptr;
  // graft's lines first (the kernels of a warm-up), then the program's iterator.
  for (int i = 0; i < args.steps; ++i) SIM_CHECK(simtest::launchAdd(cu, newKernel("q", i, SIM_KERNEL_FUNCTION), a, a, 1, s));
  cu.cuFuncGetName(&name, lib);
  CUlogIterator it = 0;
  SIM_CHECK(log.current(&it, 0));
  cu.cuFuncGetName(&name, lib);  // the program's line to find
  std::vector<char> text(1 << 20);
  size_t size = text.size();
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = log.dumpToMemory(&it, text.data(), &size, 0);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("quadratic: %d new kernels first (graft probe lines), then the iterator; a dump from it: rc %d, %zu bytes, %.1f ms\n", args.steps,
              int(r), size, ms);
  SIM_CHECK(cu.cuStreamSynchronize(s));
  // The time is shown, not checked; the dump must hold the program's one line.
  const std::vector<std::string> lines = messagesOf(std::string(text.data(), r == CUDA_SUCCESS ? size : 0));
  if (r != CUDA_SUCCESS || lines.size() != 1 || lines[0] != "Returning 400 from cuFuncGetName") {
    std::printf("quadratic: the dump holds %zu lines, expected the program's one\n", lines.size());
    return 1;
  }
  return simtest::failedCalls() ? 1 : 0;
}

// null-race: graft's probe lines first (30 new kernels), then thread C makes
// 600 failing calls of its own (cuFuncGetName) while the main thread dumps
// the whole log (NULL iterator) in a loop: every dump must hold C's lines
// only (never graft's cuFuncGetParamInfo probes), and never fewer than before.
int nullRaceMode(const ModeArgs&) {
  simtest::Driver drv;
  LogApi log;
  CUcontext ctx = nullptr;
  if (const int rc = startWithLog(&drv, &log, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  const CUstream s = simtest::newStream(cu);
  const CUdeviceptr a = simtest::zeroedBuffer(cu);
  for (int i = 0; i < 30; ++i) SIM_CHECK(simtest::launchAdd(cu, newKernel("nr", i, SIM_KERNEL_FUNCTION), a, a, 1, s));
  CUfunction lib = newKernel("lib", 0, SIM_KERNEL_LIBRARY);
  std::atomic<bool> done{false}, go{false};
  std::thread c([&] {
    cu.cuCtxSetCurrent(ctx);
    const char* name = nullptr;
    while (!go.load()) {}
    for (int i = 0; i < 700; ++i) {
      cu.cuFuncGetName(&name, lib);
      for (int k = 0; k < 3000; ++k) asm volatile("");
    }
    done = true;
  });
  std::vector<char> text(1 << 20);
  int leaked = 0, dropped = 0, dumps = 0;
  size_t most = 0;
  go = true;
  while (!done.load()) {
    size_t size = text.size();
    if (log.dumpToMemory(nullptr, text.data(), &size, 0) != CUDA_SUCCESS) continue;
    ++dumps;
    size_t mine = 0;
    for (const std::string& m : messagesOf(std::string(text.data(), size))) {
      if (m.find("cuFuncGetParamInfo") != std::string::npos) { if (leaked++ < 3) std::printf("dump %d holds graft's line: %s\n", dumps, m.c_str()); }
      else ++mine;
    }
    if (mine < most && dropped++ < 3) std::printf("dump %d holds %zu of the program's lines, an earlier one %zu\n", dumps, mine, most);
    most = std::max(most, mine);
  }
  c.join();
  std::printf("null-race: %d whole-log dumps; %d with a graft line, %d with fewer program lines than before\n", dumps, leaked, dropped);
  SIM_CHECK(cu.cuStreamSynchronize(s));
  return leaked || dropped;
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_driver_log", 200);
  if (args.mode == "threads" || args.mode == "threads-null") return threadsMode(args);
  if (args.mode == "quadratic") return quadraticMode(args);
  if (args.mode == "null-race") return nullRaceMode(args);
  if (args.mode != "loop" && args.mode != "register-early") {
    std::printf("usage: sim_driver_log --mode loop|register-early [--steps N] [--expect-graphs]\n");
    return 2;
  }
  simtest::Driver drv;
  if (const int rc = simtest::startProgram("sim_driver_log", &drv, nullptr)) return rc;
  LogApi log;
  if (!loadLogApi(drv, &log)) return 2;
  Seen seen;
  CUlogsCallbackHandle handle = nullptr;
  if (args.mode == "register-early") SIM_CHECK(log.registerCallback(onLog, &seen, &handle));
  const simtest::DriverApi& cu = drv.plain;
  CUcontext ctx = nullptr;
  if (!simtest::openPrimaryContext(cu, &ctx)) return 2;
  if (args.mode == "loop") SIM_CHECK(log.registerCallback(onLog, &seen, &handle));
  CUlogIterator it = 0;
  SIM_CHECK(log.current(&it, 0));
  const CUlogIterator start = it;

  const CUstream s = simtest::newStream(cu);
  const CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  CUfunction base = newKernel("base", 0, SIM_KERNEL_FUNCTION), other = newKernel("other", 0, SIM_KERNEL_LIBRARY);
  CUfunction fresh = base, freshLibrary = other;
  std::vector<std::string> all, sinceDump;  // the program's own failures' messages
  auto failed = [&](CUresult r, const char* api) {
    if (r == CUDA_SUCCESS) return;
    ++g_provoked;
    const std::string m = "Returning " + std::to_string(int(r)) + " from " + api;
    all.push_back(m);
    sinceDump.push_back(m);
  };
  uint64_t want = 0;
  std::vector<char> text(1 << 20);
  for (int i = 0; i < args.steps; ++i) {
    if (i % 40 == 20) fresh = newKernel("f", i, SIM_KERNEL_FUNCTION);
    if (i % 60 == 30) freshLibrary = newKernel("k", i, SIM_KERNEL_LIBRARY);
    SIM_CHECK(simtest::launchAdd(cu, base, a, a, 1, s));
    SIM_CHECK(simtest::launchAdd(cu, other, a, a, 2, s));
    SIM_CHECK(simtest::launchAdd(cu, fresh, a, a, 3, s));
    SIM_CHECK(simtest::launchAdd(cu, freshLibrary, b, a, 4, s));
    want += 6;
    if (irregularStep(i, 41, 0, 5)) {
      size_t offset = 0, size = 0;
      const char* name = nullptr;
      failed(cu.cuFuncGetParamInfo(fresh, 3, &offset, &size), "cuFuncGetParamInfo");
      failed(cu.cuKernelGetName(&name, reinterpret_cast<CUkernel>(base)), "cuKernelGetName");
      failed(cu.cuFuncGetName(&name, freshLibrary), "cuFuncGetName");
    }
    if (i % 10 == 9) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(peek(a), want, "the sum", i);
      size_t size = text.size();
      SIM_CHECK(log.dumpToMemory(&it, text.data(), &size, 0));
      expectMessages(messagesOf(std::string(text.data(), size)), sinceDump, "the dump since the last one", i);
      sinceDump.clear();
      expectValue(uint64_t(seen.count), all.size(), "messages the callback got", i);
      expectMessages(seen.messages, all, "the callback's messages", i);
      CUlogIterator now = 0;
      SIM_CHECK(log.current(&now, 0));
      expectValue(now - start, all.size(), "lines the log holds since the start (cuLogsCurrent)", i);
      expectValue(it, now, "the dump's iterator", i);
    }
    if (i % 50 == 49) {
      size_t size = text.size();
      CUlogIterator from = start;
      SIM_CHECK(log.dumpToMemory(&from, text.data(), &size, 0));
      expectMessages(messagesOf(std::string(text.data(), size)), all, "the dump of the whole run", i);
      const std::string path = "/tmp/sim_driver_log." + std::to_string(uint64_t(getpid())) + ".txt";
      from = start;
      SIM_CHECK(log.dumpToFile(&from, path.c_str(), 0));
      std::string file;
      if (FILE* f = std::fopen(path.c_str(), "r")) {
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) file.append(buf, n);
        std::fclose(f);
      }
      std::remove(path.c_str());
      expectMessages(messagesOf(file), all, "the dump to a file", i);
    }
  }
  SIM_CHECK(cu.cuStreamSynchronize(s));
  return report(args.steps, args.expectGraphs);
}
