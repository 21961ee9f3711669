// sim_oracle.cc - the equivalence oracle (DESIGN.md §2, §5).
//
//   sim_oracle --seed S --ops N [--verbose] [--print-program] [--threads] [--inject]
//              [--features all|none|dev1,timing,reload,settings]
//
// Generates a random CUDA program shaped like a training loop (oracle_gen.cc),
// issues it through the driver obtained like cudart does - under LD_PRELOAD this is
// the interposer - and checks that what the simulated GPU executed equals what the
// program issued (oracle_check.cc, oracle_run.cc):
//   1. every issued effect executed exactly once with exactly the issued content;
//   2. per stream, execution order equals issue order;
//   3. cross-stream event waits are respected;
//   4. at every host synchronization, everything it covered executed before it
//      returned;
//   5. legacy-stream implicit ordering is respected;
//   6. data: values read back during the run (pageable D2H, like loss.item()) and
//      the final contents of every buffer equal a sequential re-execution of the
//      issued program by the oracle's own interpreter (valid because generated
//      programs are race-free under CUDA's ordering rules).
// --threads adds a concurrent thread on its own stream; --inject makes driver calls
// that graft uses to build and replay graphs fail at random points (the program
// itself then never captures or launches graphs). --features picks the features a
// seed may enable (oracle.h, Program); "settings": kernel attributes set between
// launches (dynamic shared memory allowance, required cluster width): a launch
// above its allowance must be refused with CUDA_ERROR_INVALID_VALUE and have no
// effect, and a sim_add kernel's result includes its launch's cluster width.
// --print-program lists the generated template, one op a line.
// Output: divergences first (readable), then the last line
//   oracle: N ops, K divergences
// Exit status: 0 when K = 0, 1 on divergence, 2 on usage or setup errors.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "oracle.h"

namespace {

void injectFailures(uint64_t seed, bool verbose) {
  oracle::Rng rng(seed ^ 0xfeedface12345ull);
  struct Target {
    const char* api;
    int maxNth;
  };
  static const Target kTargets[] = {
      {"cuStreamBeginCapture_v2", 4},
      {"cuStreamEndCapture", 4},
      {"cuGraphInstantiateWithFlags", 4},
      {"cuGraphLaunch", 40},
      {"cuGraphExecKernelNodeSetParams_v2", 40},
      {"cuGraphExecMemcpyNodeSetParams", 10},
      {"cuGraphExecMemsetNodeSetParams", 10},
  };
  static const CUresult kCodes[] = {CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_UNKNOWN,
                                    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_NOT_SUPPORTED};
  int n = 2 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) {
    const Target& t = kTargets[rng() % (sizeof kTargets / sizeof kTargets[0])];
    int nth = 1 + static_cast<int>(rng() % static_cast<uint64_t>(t.maxNth));
    CUresult code = kCodes[rng() % (sizeof kCodes / sizeof kCodes[0])];
    simInjectFailure(t.api, nth, code);
    if (verbose) std::printf("inject: call %d of %s fails with %d\n", nth, t.api, static_cast<int>(code));
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: sim_oracle --seed S --ops N [--verbose] [--print-program] [--threads] [--inject]\n"
               "                  [--features all|none|dev1,timing,reload,settings]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  long ops = 2000;
  bool verbose = false, threads = false, inject = false, printProgram = false;
  unsigned features = oracle::kFeatureAll;
  std::string featureArg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 0);
    } else if (a == "--ops" && i + 1 < argc) {
      ops = std::strtol(argv[++i], nullptr, 0);
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--print-program") {
      printProgram = true;
    } else if (a == "--threads") {
      threads = true;
    } else if (a == "--inject") {
      inject = true;
    } else if (a == "--features" && i + 1 < argc) {
      featureArg = argv[++i];
      features = 0;
      std::string rest = featureArg + ",";
      for (size_t pos; (pos = rest.find(',')) != std::string::npos; rest.erase(0, pos + 1)) {
        std::string f = rest.substr(0, pos);
        if (f == "all") {
          features |= oracle::kFeatureAll;
        } else if (f == "dev1") {
          features |= oracle::kFeatureDev1;
        } else if (f == "timing") {
          features |= oracle::kFeatureTiming;
        } else if (f == "reload") {
          features |= oracle::kFeatureReload;
        } else if (f == "settings") {
          features |= oracle::kFeatureSettings;
        } else if (f != "none" && !f.empty()) {
          return usage();
        }
      }
    } else {
      return usage();
    }
  }
  if (ops < 1) return usage();
  simtest::Driver drv;
  std::string err;
  if (!simtest::loadDriver(&drv, &err)) {
    std::fprintf(stderr, "sim_oracle: %s\n", err.c_str());
    return 2;
  }
  simSetSeed(seed);
  oracle::Program program = oracle::generateProgram(seed, ops, threads, inject, features);
  if (verbose || printProgram) std::printf("program: %s\n", program.summary().c_str());
  if (printProgram) std::printf("%s", program.listing().c_str());
  if (inject) injectFailures(seed, verbose);
  oracle::RunResult res = oracle::runOracle(drv, program, verbose);
  auto& div = res.divergences;
  std::stable_sort(div.begin(), div.end(),
                   [](const oracle::Divergence& a, const oracle::Divergence& b) { return a.order < b.order; });
  const SimCounters& c = res.counters;
  std::printf(
      "sim: effects %zu eager / %zu from graphs (%ld demoted); graph launches %llu, instantiations %llu, "
      "exec updates %llu, captures %llu, injected failures %llu\n",
      res.eagerEffects, res.graphEffects, res.demoted, static_cast<unsigned long long>(c.graphLaunches),
      static_cast<unsigned long long>(c.graphInstantiations), static_cast<unsigned long long>(c.execNodeParamUpdates),
      static_cast<unsigned long long>(c.captures), static_cast<unsigned long long>(c.injectedFailures));
  if (res.settings) {
    std::printf("settings: %ld attribute settings (%ld with a value the driver refuses), %ld launches refused\n",
                res.settings, res.refusedSettings, res.refusedLaunches);
  }
  if (!div.empty()) {
    size_t shown = verbose ? div.size() : std::min<size_t>(div.size(), 3);
    std::printf("DIVERGENCE: seed %llu (%s)\n", static_cast<unsigned long long>(seed), program.summary().c_str());
    for (size_t i = 0; i < shown; ++i) std::printf("  [%zu] %s\n", i + 1, div[i].text.c_str());
    if (shown < div.size()) std::printf("  ... %zu more\n", div.size() - shown);
    std::printf("reproduce: sim_oracle --seed %llu --ops %ld%s%s%s%s --verbose\n",
                static_cast<unsigned long long>(seed), ops, threads ? " --threads" : "", inject ? " --inject" : "",
                featureArg.empty() ? "" : " --features ", featureArg.c_str());
  }
  std::printf("oracle: %ld ops, %zu divergences\n", res.ops, div.size());
  std::fflush(stdout);
  return div.empty() ? 0 : 1;
}
