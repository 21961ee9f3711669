// sim_module_reload.cc - a loop that loads a module (or library), runs a few
// iterations of launches with its kernels and unloads it again, through the
// driver obtained like cudart does; writes the executed work, per stream, to a
// file. A test runs it with and without LD_PRELOAD=libgraft.so and requires
// identical files.
//
// Each of 30 epochs loads image A or B (alternating; epochs 2,3 mod 4 through
// cuLibraryLoadData / cuLibraryGetKernel, the others through cuModuleLoadData /
// cuModuleGetFunction), gets its 3 kernels, runs 10 iterations of 15 launches on
// the NULL stream and a created stream with parameters that change per iteration,
// synchronizes at the end of each iteration, and unloads it. The simulator reuses
// freed kernel handles lowest-first, so A's and B's kernels get the same handle
// values although their names, parameter counts, sizes and effects differ: an
// interposer that keeps anything keyed by a handle across an unload (parameter
// layout, name, recorded graphs) launches the wrong bytes or a dead kernel.
//
// Invariants:
//  - Every kernel's last parameter is an 8-byte tag (program stream, epoch,
//    iteration, index). The file groups kernels by the program stream of the tag,
//    in execution order (the per-stream order CUDA guarantees, whether a kernel ran
//    eagerly or in a graph) and prints, per kernel, the name the simulator ran and
//    every parameter decoded with that kernel's layout.
//  - Each stream reads and writes only its own region, so the final contents are a
//    pure function of the program. Addresses are written symbolically.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

constexpr int kEpochs = 30;
constexpr int kIterations = 10;
constexpr int kLaunches = 15;
constexpr int kCells = 16;

struct KernelSpec {
  const char* name;
  std::vector<size_t> sizes;  // last one: the 8-byte tag
};

// Image order = handle order: index i of A and of B get the same handle value.
const char* const kImageA = "sim-image: sim_add_a(8,8,8,8); scale_a(8,4,8); sim_mix_a(8,8,8,2,8)";
const char* const kImageB = "sim-image: sim_mix_b(8,8,8,4,1,8); shift_b(8,8); sim_add_b(8,8,8,8,8)";
const std::vector<KernelSpec> kSpecA = {
    {"sim_add_a", {8, 8, 8, 8}}, {"scale_a", {8, 4, 8}}, {"sim_mix_a", {8, 8, 8, 2, 8}}};
const std::vector<KernelSpec> kSpecB = {
    {"sim_mix_b", {8, 8, 8, 4, 1, 8}}, {"shift_b", {8, 8}}, {"sim_add_b", {8, 8, 8, 8, 8}}};

int failures = 0;

void check(CUresult r, const char* what, int line) {
  if (r != CUDA_SUCCESS) {
    if (failures < 10) {
      std::fprintf(stderr, "sim_module_reload: %s (line %d) returned %d\n", what, line, static_cast<int>(r));
    }
    ++failures;
  }
}
#define CHECK(call) check(call, #call, __LINE__)

CUdeviceptr region[2];  // [0 legacy, 1 created stream], kCells words each

const char* slotName(int slot) { return slot == 0 ? "legacy" : "stream"; }

std::string value(uint64_t v, size_t size) {
  char b[64];
  if (size == 8) {
    for (int s = 0; s < 2; ++s) {
      if (v >= region[s] && v < region[s] + kCells * 8) {
        std::snprintf(b, sizeof b, "r.%s+%" PRIu64, slotName(s), uint64_t(v - region[s]));
        return b;
      }
    }
  }
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

// Natural alignment, as the simulator packs parameters.
std::vector<size_t> offsetsOf(const KernelSpec& k, size_t* total) {
  std::vector<size_t> offs;
  size_t off = 0;
  for (size_t sz : k.sizes) {
    size_t a = 1;
    while (a < sz && a < 8) a <<= 1;
    off = (off + a - 1) / a * a;
    offs.push_back(off);
    off += sz;
  }
  *total = off;
  return offs;
}

const KernelSpec* specByName(const char* name) {
  if (!name) return nullptr;
  for (const auto* set : {&kSpecA, &kSpecB}) {
    for (const KernelSpec& k : *set) {
      if (!std::strcmp(k.name, name)) return &k;
    }
  }
  return nullptr;
}

uint64_t makeTag(int slot, int epoch, int it, int index) {
  return (uint64_t(slot) << 56) | (uint64_t(epoch) << 32) | (uint64_t(it) << 16) | uint64_t(index);
}

}  // namespace

int main(int argc, char** argv) {
  simtest::TraceProgramArgs args;
  simtest::Driver drv;
  if (int rc = simtest::startTraceProgram("sim_module_reload", argc, argv, &args, &drv)) return rc;
  const char* outPath = args.outPath;
  const uint64_t seed = args.seed;
  const simtest::DriverApi& cu = drv.plain;
  simtest::CodeApi code;
  if (!simtest::loadCodeApi(drv, &code)) return 2;
  simSetSeed(seed);
  CUcontext ctx;
  if (!simtest::openPrimaryContext(cu, &ctx)) {
    std::fprintf(stderr, "sim_module_reload: no primary context\n");
    return 2;
  }
  CUstream stream;
  CHECK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  for (int s = 0; s < 2; ++s) {
    CHECK(cu.cuMemAlloc(&region[s], kCells * 8));
    CHECK(cu.cuMemsetD32(region[s], 0, kCells * 2));
  }
  CHECK(cu.cuCtxSynchronize());
  if (failures) return 1;

  std::map<int, std::vector<CUfunction>> handlesByEpoch;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    const bool imageB = epoch % 2 == 1;
    const bool library = epoch % 4 >= 2;
    const std::vector<KernelSpec>& spec = imageB ? kSpecB : kSpecA;
    CUmodule mod = nullptr;
    CUlibrary lib = nullptr;
    std::vector<CUfunction> fn(spec.size(), nullptr);
    if (library) {
      CHECK(code.libraryLoadData(&lib, imageB ? kImageB : kImageA, nullptr, nullptr, 0, nullptr, nullptr, 0));
      for (size_t i = 0; i < spec.size(); ++i) {
        CUkernel k = nullptr;
        CHECK(code.libraryGetKernel(&k, lib, spec[i].name));
        fn[i] = reinterpret_cast<CUfunction>(k);
      }
    } else {
      CHECK(code.moduleLoadData(&mod, imageB ? kImageB : kImageA));
      for (size_t i = 0; i < spec.size(); ++i) CHECK(code.moduleGetFunction(&fn[i], mod, spec[i].name));
    }
    if (failures) return 1;
    handlesByEpoch[epoch] = fn;

    for (int it = 0; it < kIterations; ++it) {
      for (int j = 0; j < kLaunches; ++j) {
        const int slot = j % 3 == 2 ? 1 : 0;
        const size_t ki = size_t(j + j / 3) % spec.size();
        const KernelSpec& k = spec[ki];
        const CUdeviceptr base = region[slot];
        // Per-iteration values for some launches, fixed for the others.
        const uint64_t kv = j % 4 == 0 ? uint64_t(epoch) * 100000 + uint64_t(it) * 100 + j : uint64_t(j + 1);
        std::vector<uint64_t> vals(k.sizes.size());
        for (size_t p = 0; p < vals.size(); ++p) {
          if (p + 1 == vals.size()) {
            vals[p] = makeTag(slot, epoch, it, j);
          } else if (p == 0) {
            vals[p] = base + 8 * ((j + 1) % kCells);
          } else if (p == 1 && k.sizes[1] == 8) {
            vals[p] = base + 8 * (j % kCells);
          } else {
            vals[p] = (kv * 0x9e3779b97f4a7c15ULL + p) >> (64 - 8 * k.sizes[p]);
          }
        }
        // Each parameter in storage of exactly its own size.
        std::vector<std::vector<uint8_t>> storage(vals.size());
        std::vector<void*> args(vals.size());
        for (size_t p = 0; p < vals.size(); ++p) {
          storage[p].resize(k.sizes[p]);
          std::memcpy(storage[p].data(), &vals[p], k.sizes[p]);  // little endian
          args[p] = storage[p].data();
        }
        CHECK(cu.cuLaunchKernel(fn[ki], 1 + j % 2, 1, 1, 32, 1, 1, 0, slot == 0 ? nullptr : stream, args.data(),
                                nullptr));
      }
      if (it % 2 == 0) {
        CHECK(cu.cuCtxSynchronize());
      } else {
        CHECK(cu.cuStreamSynchronize(stream));
        CHECK(cu.cuStreamSynchronize(nullptr));
      }
    }
    if (library) {
      CHECK(code.libraryUnload(lib));
    } else {
      CHECK(code.moduleUnload(mod));
    }
  }
  CHECK(cu.cuCtxSynchronize());
  simMark("end");

  // The point of the test: handles were reused across images.
  bool reused = handlesByEpoch[0] == handlesByEpoch[1] && handlesByEpoch[0] == handlesByEpoch[3];

  std::map<std::string, std::vector<std::string>> lanes;
  for (size_t i = 0; i < simTraceSize(); ++i) {
    SimEffect e;
    simTraceGet(i, &e);
    if (e.kind == SIM_EFFECT_MARKER) continue;
    if (e.kind != SIM_EFFECT_KERNEL) {
      // The program issues no other work after setup; graft's own work is not expected either.
      lanes["untagged"].push_back("effect kind " + std::to_string(e.kind));
      continue;
    }
    const KernelSpec* k = specByName(e.kernelName);
    if (!k) {
      lanes["untagged"].push_back(std::string("unknown kernel ") + (e.kernelName ? e.kernelName : "?"));
      continue;
    }
    size_t total;
    std::vector<size_t> offs = offsetsOf(*k, &total);
    if (e.paramBytes != total) {
      lanes["untagged"].push_back(std::string(k->name) + " with " + std::to_string(e.paramBytes) + " param bytes");
      continue;
    }
    uint64_t tag = 0;
    std::memcpy(&tag, e.params + offs.back(), 8);
    const int slot = int(tag >> 56);
    char b[128];
    std::snprintf(b, sizeof b, "e%u.it%u.#%u grid=%u %s(", unsigned(tag >> 32) & 0xffffff, unsigned(tag >> 16) & 0xffff,
                  unsigned(tag & 0xffff), e.grid[0], k->name);
    std::string line = b;
    for (size_t p = 0; p + 1 < k->sizes.size(); ++p) {
      uint64_t v = 0;
      std::memcpy(&v, e.params + offs[p], k->sizes[p]);
      line += (p ? ", " : "") + value(v, k->sizes[p]);
    }
    line += ")";
    lanes[slot == 0 || slot == 1 ? slotName(slot) : "bad tag"].push_back(line);
  }
  FILE* out = std::fopen(outPath, "w");
  if (!out) {
    std::perror(outPath);
    return 2;
  }
  std::fprintf(out, "kernel handles reused across images: %s\n", reused ? "yes" : "no");
  for (auto& [lane, items] : lanes) {
    std::fprintf(out, "== %s: %zu\n", lane.c_str(), items.size());
    for (auto& line : items) std::fprintf(out, "%s | %s\n", lane.c_str(), line.c_str());
  }
  for (int s = 0; s < 2; ++s) {
    uint64_t words[kCells];
    CHECK(cu.cuMemcpyDtoH(words, region[s], sizeof words));
    std::fprintf(out, "r.%s:", slotName(s));
    for (uint64_t w : words) std::fprintf(out, " %" PRIx64, w);
    std::fprintf(out, "\n");
  }
  std::fclose(out);
  if (!reused) std::fprintf(stderr, "sim_module_reload: the simulator did not reuse kernel handles\n");
  return failures || !reused ? 1 : 0;
}
