// The calling process's resident memory (/proc/self/statm), for tests that a
// structure sized for the worst case does not cost that memory up front.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdio>

namespace graft::testing {

inline size_t residentBytes() {
  unsigned long size = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return size_t(resident) * size_t(sysconf(_SC_PAGESIZE));
}

}  // namespace graft::testing
