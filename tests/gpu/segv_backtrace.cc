// segv_backtrace: a debugging aid for the GPU machine, which has no gdb.
// Preloaded next to an unstripped libgraft, it prints the faulting address,
// the faulting thread's stack (glibc backtrace) and the mappings of libgraft,
// libcuda and the program on a SIGSEGV, then exits with 139. Resolve graft's
// frames with `addr2line -f -C -i -e build/src/libgraft.so OFFSET`, where
// OFFSET is the frame's address minus the first mapping of libgraft.
//   LD_PRELOAD="$PWD/build/src/libgraft.so $PWD/build/tests/gpu/libsegv_backtrace.so" PROGRAM
// Found the crash in cuStreamGetCtx on a destroyed stream (trap churn_pending).
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

void say(const char* s) { (void)!write(2, s, std::strlen(s)); }

void onSegv(int sig, siginfo_t* info, void*) {
  char line[128];
  std::snprintf(line, sizeof line, "segv_backtrace: signal %d at address %p\n", sig, info->si_addr);
  say(line);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  const int fd = open("/proc/self/maps", O_RDONLY);
  static char maps[1 << 16];
  ssize_t n;
  while (fd >= 0 && (n = read(fd, maps, sizeof maps - 1)) > 0) {
    maps[n] = 0;
    for (char* l = maps; l && *l;) {
      char* end = std::strchr(l, '\n');
      if (end) *end = 0;
      if (std::strstr(l, "libgraft") || std::strstr(l, "libcuda") || std::strstr(l, "r-xp")) {
        say("segv_backtrace: map ");
        say(l);
        say("\n");
      }
      l = end ? end + 1 : nullptr;
    }
  }
  _exit(139);
}

__attribute__((constructor)) void installSegvBacktrace() {
  struct sigaction sa {};
  sa.sa_sigaction = onSegv;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, nullptr);
}

}  // namespace
