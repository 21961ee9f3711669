// startOwnThread: how graft starts a thread of its own (the launch thread,
// the idle flush), deaf to the program's signals.
//
// A signal sent to the process (kill, a child's SIGCHLD, a terminal's
// SIGINT) goes to any one thread that does not block it. A program that
// blocks a signal in its threads and takes it with sigwait (the usual pattern
// of a server), or that counts on a handler running in one of its threads,
// would lose it to a graft thread that happened not to block it: a SIGCHLD
// dropped there, a SIGTERM's default action there instead of the program's
// orderly shutdown. So graft's threads block every signal that can be sent
// from outside. Signals a fault raises in the thread itself (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGTRAP, SIGSYS) stay open: blocking them would not stop
// them, only change how the process dies.
//
// The thread starts with the mask already in place (blocked in the calling
// thread around its creation, then restored), so no signal can reach it
// before its first instruction. Threading: any thread. May allocate (the
// std::thread); never calls the driver. Throws what std::thread throws.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace graft::core {

template <typename Body>
std::thread startOwnThread(Body&& body) {
  sigset_t deaf, before;
  sigfillset(&deaf);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&deaf, sig);
  pthread_sigmask(SIG_BLOCK, &deaf, &before);
  try {
    std::thread t(std::forward<Body>(body));
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    return t;
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    throw;
  }
}

}  // namespace graft::core
