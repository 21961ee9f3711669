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
#include <cstdint>
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

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_driver_log", 200);
  if (args.mode != "loop" && args.mode != "register-early") {
    std::printf("usage: sim_driver_log --mode loop|register-early [--steps N] [--expect-graphs]\n");
    return 2;
  }
  simtest::Driver drv;
  if (const int rc = simtest::startProgram("sim_driver_log", &drv, nullptr)) return rc;
  LogApi log;
  if (!simtest::lookupProc(drv, "cuLogsRegisterCallback", &log.registerCallback) ||
      !simtest::lookupProc(drv, "cuLogsCurrent", &log.current) ||
      !simtest::lookupProc(drv, "cuLogsDumpToMemory", &log.dumpToMemory) ||
      !simtest::lookupProc(drv, "cuLogsDumpToFile", &log.dumpToFile))
    return 2;
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
