// sim_fork: a training-shaped loop (six launches a step on one stream, no
// sync, a read-back every 50 steps) that forks a child process in the middle
// of steps, as programs do to run a helper or a data-loader worker. The child
// asks the driver about the stream once (the driver refuses every call in a
// forked child) and leaves with exit(), which runs the atexit handlers.
//   sim_fork [--expect-graphs]
// Checks, exit 1 on a failure:
//  - every read-back in the parent is right, before and after each fork;
//  - each child leaves within 10 s with status 0;
//  - each child's output (stdout and stderr, read through a pipe) is exactly
//    what it is eagerly: the simulator's note of the one call the child made,
//    and the child's own line. Anything more is work the parent's interposer
//    did in the child: issuing the parent's held ops there, a log line, an
//    exit report.
// --expect-graphs: also that most kernels ran from graph launches, so that
// the forks happened while an interposer was replaying (and held ops).
// --fork-first: first forks a child, before any driver call, that runs this
// whole program itself (it must succeed, graphs included with
// --expect-graphs: graft starts in such a child), then goes on.
// --graft-log FILE: the file graft logs to (GRAFT_LOG_FILE, debug level):
// graft's start line must be in it at most once, since a child's exit must
// not write the parent's buffered log lines again.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

// Forks; the child queries `stream`, prints the result and leaves through
// exit(). Returns an empty string if the child behaved as it does eagerly,
// else what went wrong.
std::string forkChild(const simtest::DriverApi& cu, CUstream stream) {
  int out[2];
  if (pipe(out) != 0) return "pipe failed";
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(out[0]);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[1]);
    const CUresult r = cu.cuStreamQuery(stream);
    std::printf("child: cuStreamQuery -> %d\n", int(r));
    std::exit(0);  // atexit handlers run here
  }
  close(out[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(out[0]);
      return "the child did not leave within 10 s; its output so far:\n" + text;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, int(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;  // every copy of the write end is closed: the child is gone
    text.append(buf, size_t(n));
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "the child ended with status " + std::to_string(status) + "; its output:\n" + text;
  const std::string expected = "sim: cuStreamQuery called in a forked child\nchild: cuStreamQuery -> " +
                               std::to_string(int(CUDA_ERROR_NOT_INITIALIZED)) + "\n";
  if (text != expected) return "the child's output differs from eager's; it was:\n" + text;
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  bool expectGraphs = false, forkFirst = false;
  const char* graftLog = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expect-graphs") == 0) expectGraphs = true;
    else if (std::strcmp(argv[i], "--fork-first") == 0) forkFirst = true;
    else if (std::strcmp(argv[i], "--graft-log") == 0 && i + 1 < argc) graftLog = argv[++i];
    else {
      std::printf("usage: sim_fork [--expect-graphs] [--fork-first] [--graft-log FILE]\n");
      return 2;
    }
  }
  if (forkFirst) {
    if (graftLog) {
      std::printf("sim_fork: --fork-first and --graft-log do not go together (two processes log)\n");
      return 2;
    }
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid > 0) {
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::printf("sim_fork: the child forked before any driver call failed (status %d)\n", status);
        return 1;
      }
    } else {
      std::printf("sim_fork: (child forked before any driver call) ");
    }
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_fork", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_fork");
  CUstream s;
  cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  CUdeviceptr x;
  cu.cuMemAlloc(&x, 64);
  cu.cuMemsetD8(x, 0, 64);
  constexpr uint64_t kSteps = 300, kPerStep = 6;
  int forks = 0;
  for (uint64_t step = 1; step <= kSteps; ++step) {
    for (uint64_t k = 0; k < kPerStep; ++k) {
      simtest::launchAdd(cu, add, x, x, 1, s);
      // In the middle of a step, where a replaying interposer holds ops.
      if (k == 2 && step % 75 == 0) {
        if (std::string why = forkChild(cu, s); !why.empty()) {
          std::printf("sim_fork: step %llu: %s\n", (unsigned long long)step, why.c_str());
          return 1;
        }
        ++forks;
      }
    }
    if (step % 50 == 0) {
      uint64_t got = 0;
      cu.cuStreamSynchronize(s);
      cu.cuMemcpyDtoH(&got, x, 8);
      if (got != step * kPerStep) {
        std::printf("sim_fork: step %llu: x = %llu, expected %llu\n", (unsigned long long)step,
                    (unsigned long long)got, (unsigned long long)(step * kPerStep));
        return 1;
      }
    }
  }
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_fork: %d children behaved as eagerly, every value right; kernels from graphs %llu, eager %llu\n",
              forks, (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager);
  if (expectGraphs && c.effectsGraph * 2 < c.effectsGraph + c.effectsEager) {
    std::printf("sim_fork: fewer than half of the kernels ran from graphs\n");
    return 1;
  }
  if (graftLog) {
    std::FILE* f = std::fopen(graftLog, "r");
    if (!f) {
      std::printf("sim_fork: cannot read %s\n", graftLog);
      return 1;
    }
    int starts = 0;
    char line[4096];
    while (std::fgets(line, sizeof line, f)) starts += std::strstr(line, "graft started") != nullptr;
    std::fclose(f);
    if (starts > 1) {
      std::printf("sim_fork: graft's start line is %d times in %s: the children wrote the parent's log again\n",
                  starts, graftLog);
      return 1;
    }
  }
  return 0;
}
