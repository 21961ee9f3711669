// sim_signals: a program that takes its signals with sigtimedwait, the usual
// pattern of a server. After the driver has started and the loop has run for
// a while (so a tool's own threads exist by then, started with the signals
// still open), the main thread blocks SIGUSR1, SIGCHLD and SIGTERM and is the
// only thread of the program; then, between launches of a repeating loop, it
// sends itself each signal and waits for it in sigtimedwait (2 s at most).
//   sim_signals [--expect-graphs]
// Checks, exit 1 on a failure:
//  - every signal sent reaches the main thread's sigtimedwait: none runs the
//    SIGUSR1 handler (which counts deliveries anywhere else), none is lost
//    (SIGCHLD's default action drops it where it lands), and SIGTERM does not
//    end the process (its default action where it lands; eagerly the program
//    takes it in sigtimedwait and goes on);
//  - the loop's values are right.
// --expect-graphs: also that most kernels ran from graph launches, so that
// the signals were sent while an interposer replayed with its threads.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

std::atomic<int> g_usr1Elsewhere{0};
void onUsr1(int) { g_usr1Elsewhere.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

int main(int argc, char** argv) {
  bool expectGraphs = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expect-graphs") == 0) {
      expectGraphs = true;
    } else {
      std::printf("usage: sim_signals [--expect-graphs]\n");
      return 2;
    }
  }
  struct sigaction sa = {};
  sa.sa_handler = onUsr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);

  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_signals", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_signals");
  CUstream s;
  cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  constexpr uint64_t kSteps = 400, kPerStep = 5, kMaskAt = 40;
  const int kSignals[] = {SIGUSR1, SIGCHLD, SIGTERM};
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kSignals) sigaddset(&set, sig);
  int sent = 0, taken = 0, lost = 0;
  for (uint64_t step = 1; step <= kSteps; ++step) {
    for (uint64_t k = 0; k < kPerStep; ++k) simtest::launchAdd(cu, add, x, x, 1, s);
    if (step == kMaskAt) pthread_sigmask(SIG_BLOCK, &set, nullptr);
    if (step > kMaskAt && step % 20 == 0) {
      const int sig = kSignals[(step / 20) % 3];
      ++sent;
      kill(getpid(), sig);
      // Pending for the process until taken: a thread that does not block it
      // takes it meanwhile (eagerly there is none).
      const timespec pause{0, 3 * 1000 * 1000};
      nanosleep(&pause, nullptr);
      const timespec wait{2, 0};
      siginfo_t info;
      if (sigtimedwait(&set, &info, &wait) == sig) {
        ++taken;
      } else {
        ++lost;
        std::printf("sim_signals: step %llu: signal %d did not reach the main thread's sigtimedwait\n",
                    (unsigned long long)step, sig);
      }
    }
    if (step % 50 == 0) {
      uint64_t got = 0;
      cu.cuStreamSynchronize(s);
      cu.cuMemcpyDtoH(&got, x, 8);
      if (got != step * kPerStep) {
        std::printf("sim_signals: step %llu: x = %llu, expected %llu\n", (unsigned long long)step,
                    (unsigned long long)got, (unsigned long long)(step * kPerStep));
        return 1;
      }
    }
  }
  SimCounters c{};
  simCounters(&c);
  const int elsewhere = g_usr1Elsewhere.load();
  std::printf("sim_signals: %d signals sent, %d taken by sigtimedwait, %d lost, SIGUSR1 handled elsewhere %d; "
              "kernels from graphs %llu, eager %llu\n",
              sent, taken, lost, elsewhere, (unsigned long long)c.effectsGraph, (unsigned long long)c.effectsEager);
  if (lost || elsewhere || taken != sent) return 1;
  if (expectGraphs && c.effectsGraph * 2 < c.effectsGraph + c.effectsEager) {
    std::printf("sim_signals: fewer than half of the kernels ran from graphs\n");
    return 1;
  }
  return 0;
}
