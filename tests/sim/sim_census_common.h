// sim_census_common.h - bookkeeping for the census programs (sim_census,
// sim_direct): counts every driver call by base name and every launch by kernel,
// and prints them as JSON for check_census.py.
//
// Invariant: a call is counted whatever it returns; a result other than the one the
// program expects is reported on stderr and makes the program exit 1.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "sim_api.h"

namespace simtest {

class Census {
 public:
  explicit Census(std::string program) : program_(std::move(program)) {}

  // Counts a call that must succeed.
  void issue(const char* name, CUresult r, int line) {
    ++calls_[name];
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "%s: %s (line %d) returned %d\n", program_.c_str(), name, line, static_cast<int>(r));
      ++errors_;
    }
  }
  // Counts a query (CUDA_SUCCESS or CUDA_ERROR_NOT_READY).
  void issueAny(const char* name, CUresult r) {
    ++calls_[name];
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
      std::fprintf(stderr, "%s: %s returned %d\n", program_.c_str(), name, static_cast<int>(r));
      ++errors_;
    }
  }
  CUfunction kernel(const char* name, SimKernelFamily family, unsigned n, const size_t* sizes) {
    CUfunction f = simKernelCreate(name, family, n, sizes, nullptr);
    kernels_[f] = Kernel{name, family, 0};
    order_.push_back(f);
    return f;
  }
  void launch(CUfunction f, int n) { kernels_[f].count += n; }
  CUhostFn hostFn() const { return &Census::onHost; }
  bool ok() const { return errors_ == 0; }

  void print(FILE* out) const {
    std::fprintf(out, "{\n  \"program\": \"%s\",\n  \"errors\": %d,\n  \"calls\": {", program_.c_str(), errors_);
    const char* sep = "\n";
    for (auto& [name, n] : calls_) {
      std::fprintf(out, "%s    \"%s\": %d", sep, name.c_str(), n);
      sep = ",\n";
    }
    std::fprintf(out, "\n  },\n  \"kernels\": [");
    sep = "\n";
    for (CUfunction f : order_) {
      const Kernel& k = kernels_.at(f);
      static const char* fam[] = {"library", "function", "opaque"};
      std::fprintf(out, "%s    {\"name\": \"%s\", \"family\": \"%s\", \"count\": %d}", sep, k.name.c_str(),
                   fam[k.family], k.count);
      sep = ",\n";
    }
    std::fprintf(out, "\n  ]\n}\n");
  }

 private:
  struct Kernel {
    std::string name;
    SimKernelFamily family = SIM_KERNEL_LIBRARY;
    int count = 0;
  };
  static void CUDA_CB onHost(void*) {}

  std::string program_;
  std::map<std::string, int> calls_;
  std::map<CUfunction, Kernel> kernels_;
  std::vector<CUfunction> order_;
  int errors_ = 0;
};

// Writes the census to the file named by "--out PATH" (default: stdout).
inline int finishCensus(const Census& c, int argc, char** argv) {
  FILE* out = stdout;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--out") out = std::fopen(argv[i + 1], "w");
  }
  if (!out) {
    std::perror("census output");
    return 2;
  }
  c.print(out);
  if (out != stdout) std::fclose(out);
  return c.ok() ? 0 : 1;
}

}  // namespace simtest
