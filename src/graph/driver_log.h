// The driver's error log (CUDA 12.9+: cuLogsRegisterCallback,
// cuLogsDumpToMemory, cuLogsDumpToFile) as the program would see it eagerly.
//
// Some of graft's own driver calls fail by design: asking a kernel handle for
// the parameter past its last one (the only way the driver tells how many it
// has), or asking a handle whether it is of the other kind (a CUkernel or a
// CUfunction). The driver logs each failure: a callback the program
// registered gets it, on the failing call's thread, and the program's dumps of
// the log contain it. OwnDriverCalls marks such calls: the program's callbacks
// are not called for what is logged meanwhile on that thread, and the lines it
// logs there (found by their index in the log and their thread) are left out of
// the program's dumps, whose iterators (cuLogsCurrent, the dumps') count
// only the other lines. Facts measured on the H100 (driver 580.159.04):
// callbacks run on the failing call's thread; a log iterator counts lines; a
// dump line reads "[HH:MM:SS.mmm][pthread_self][CUDA][E] message";
// cuLogsDumpToFile replaces the file's contents.
//
// Left as they are: failures of graft's other own calls (a capture the driver
// refuses, say), and the log's lines of the program's own refused calls that
// graft issues from its launch thread (another thread number in the line).
//
// Threading: any thread; the remembered lines are under a mutex. Allocates on
// the cold paths only (a scope that saw lines logged, a program's dump). Calls
// the driver (cuLogsCurrent, cuLogsDumpToMemory) only where the driver has the
// log API.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

namespace graft::graph {

// Marks graft's own driver calls that may fail, on this thread, for its
// lifetime (nested scopes: the outermost counts).
class OwnDriverCalls {
 public:
  OwnDriverCalls();
  ~OwnDriverCalls();
  OwnDriverCalls(const OwnDriverCalls&) = delete;
  OwnDriverCalls& operator=(const OwnDriverCalls&) = delete;

 private:
  void rememberOwnLines() const;

  CUlogIterator start_ = 0;
  bool tracking_ = false;
};

// cuLogsRegisterCallback for the program: its callback, behind one of graft's
// that leaves out what graft's own calls logged.
CUresult registerProgramLogCallback(PFN_cuLogsRegisterCallback_v12090 real, CUlogsCallback callback, void* data,
                                    CUlogsCallbackHandle* handle);
// cuLogsCurrent for the program: an iterator that counts the lines graft's
// own calls did not log, as the program's dumps take it.
CUresult currentLogIndex(PFN_cuLogsCurrent_v12090 real, CUlogIterator* iterator, unsigned int flags);
// cuLogsDumpToMemory and cuLogsDumpToFile for the program: the driver's
// dump without the lines of graft's own calls (the driver's own call where
// graft has none to leave out, or cannot tell).
CUresult dumpLogsToMemory(PFN_cuLogsDumpToMemory_v12090 real, CUlogIterator* iterator, char* buffer, size_t* size,
                          unsigned int flags);
CUresult dumpLogsToFile(PFN_cuLogsDumpToFile_v12090 real, CUlogIterator* iterator, const char* path,
                        unsigned int flags);

}  // namespace graft::graph
