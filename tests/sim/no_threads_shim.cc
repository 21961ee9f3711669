// no_threads_shim: preloaded ahead of libgraft, makes every pthread_create of
// the process fail with EAGAIN, as a process at its thread limit sees it
// (RLIMIT_NPROC, a cgroup's pids.max). graft must then stay off and leave the
// program to the driver, not end it with an exception from its start-up
// (sim_no_threads_graft).
#include <pthread.h>

#include <cerrno>

extern "C" __attribute__((visibility("default"))) int pthread_create(pthread_t*, const pthread_attr_t*,
                                                                     void* (*)(void*), void*) {
  return EAGAIN;
}
