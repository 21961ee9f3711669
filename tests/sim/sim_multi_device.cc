// sim_multi_device.cc - a training-shaped loop over two devices, through the driver
// obtained like cudart does; writes the executed work, per stream, to a file. A test
// runs it with and without LD_PRELOAD=libgraft.so and requires identical files.
//
// Each of 200 iterations, for device 0 then device 1 (cuCtxSetCurrent to each
// primary context): 20 kernels, some on the NULL (legacy) stream and some on a
// stream created in that context (device 0: non-blocking, device 1: blocking),
// with some parameters that change every iteration; an event recorded on the
// device's NULL stream and waited on by its created stream, whose next kernel reads
// what the NULL stream wrote just before the record. Iterations end with
// cuCtxSynchronize on each context, with cuStreamSynchronize of the created
// streams, or with no synchronization.
//
// With SIM_BENCH_SWITCH=1 and graft preloaded (GRAFT_BENCH_SWITCH=1), the program
// also switches graft between graph and passthrough mode every 6 iterations, in
// the middle of an iteration (graft_bench_set_mode): the executed work must not
// change either. SIM_BENCH_SWITCH=refused: every such call must return -1.
//
// Invariants:
//  - Every kernel carries a tag (parameter 3): the device and program stream it was
//    issued to, and its index. The file groups kernels by (device the simulator
//    says it ran on, program stream of the tag), in execution order: that is the
//    per-stream order CUDA guarantees, and it does not depend on whether a kernel
//    ran eagerly or inside a graph (graph nodes are traced on the launch stream).
//    A kernel issued in the wrong context lands in a group ("ran on dev0, issued to
//    dev1/legacy") that the reference run does not have.
//  - Each stream only reads and writes its own device's buffers, except the read
//    of pub[d][it] (written once, ordered by the event), so the final buffer
//    contents are a pure function of the program if CUDA's ordering is kept.
//  - Addresses are written symbolically, so interposer allocations cannot change
//    the file.
#include <dlfcn.h>

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

constexpr int kDevices = 2;
constexpr int kIterations = 200;
constexpr int kKernelsPerDevice = 20;
constexpr int kCells = 16;

int failures = 0;

void check(CUresult r, const char* what, int line) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "sim_multi_device: %s (line %d) returned %d\n", what, line, static_cast<int>(r));
    ++failures;
  }
}
#define CHECK(call) check(call, #call, __LINE__)

struct Buffers {
  CUdeviceptr region[kDevices][2];  // [device][0 legacy, 1 created stream], kCells words each
  CUdeviceptr pub[kDevices];        // [device], one word per iteration
};

Buffers buf;
std::map<CUfunction, std::string> kernelNames;

const char* slotName(int slot) { return slot == 0 ? "legacy" : "stream"; }

std::string addr(uint64_t a) {
  char b[64];
  for (int d = 0; d < kDevices; ++d) {
    for (int s = 0; s < 2; ++s) {
      if (a >= buf.region[d][s] && a < buf.region[d][s] + kCells * 8) {
        std::snprintf(b, sizeof b, "r%d.%s+%" PRIu64, d, slotName(s), uint64_t(a - buf.region[d][s]));
        return b;
      }
    }
    if (a >= buf.pub[d] && a < buf.pub[d] + kIterations * 8) {
      std::snprintf(b, sizeof b, "pub%d+%" PRIu64, d, uint64_t(a - buf.pub[d]));
      return b;
    }
  }
  std::snprintf(b, sizeof b, "0x%" PRIx64, a);
  return b;
}

uint64_t makeTag(int dev, int slot, int index) {
  return (uint64_t(dev) << 56) | (uint64_t(slot) << 48) | uint64_t(index);
}

}  // namespace

int main(int argc, char** argv) {
  simtest::TraceProgramArgs args;
  simtest::Driver drv;
  if (int rc = simtest::startTraceProgram("sim_multi_device", argc, argv, &args, &drv)) return rc;
  const char* outPath = args.outPath;
  const uint64_t seed = args.seed;
  const simtest::DriverApi& cu = drv.plain;
  simSetSeed(seed);
  CHECK(cu.cuInit(0));
  int count = 0;
  CHECK(cu.cuDeviceGetCount(&count));
  if (count < kDevices) {
    std::fprintf(stderr, "sim_multi_device: needs %d devices, the driver reports %d (SIM_DEVICES?)\n", kDevices,
                 count);
    return 2;
  }

  const size_t s4[] = {8, 8, 8, 8};
  CUfunction add = simKernelCreate("sim_add_md", SIM_KERNEL_LIBRARY, 4, s4, nullptr);
  CUfunction mix = simKernelCreate("sim_mix_md", SIM_KERNEL_FUNCTION, 4, s4, nullptr);
  kernelNames = {{add, "sim_add_md"}, {mix, "sim_mix_md"}};

  // Like cudaSetDevice: retain each primary context, make it current.
  CUcontext ctx[kDevices];
  CUstream stream[kDevices];
  CUevent ev[kDevices];
  for (int d = 0; d < kDevices; ++d) {
    CUdevice dev;
    CHECK(cu.cuDeviceGet(&dev, d));
    CHECK(cu.cuDevicePrimaryCtxRetain(&ctx[d], dev));
    CHECK(cu.cuCtxSetCurrent(ctx[d]));
    CHECK(cu.cuStreamCreate(&stream[d], d == 0 ? CU_STREAM_NON_BLOCKING : 0));
    CHECK(cu.cuEventCreate(&ev[d], CU_EVENT_DISABLE_TIMING));
    for (int s = 0; s < 2; ++s) {
      CHECK(cu.cuMemAlloc(&buf.region[d][s], kCells * 8));
      CHECK(cu.cuMemsetD32(buf.region[d][s], 0, kCells * 2));
    }
    CHECK(cu.cuMemAlloc(&buf.pub[d], kIterations * 8));
    CHECK(cu.cuMemsetD32(buf.pub[d], 0, kIterations * 2));
  }
  if (failures) return 1;

  auto launch = [&](int d, int slot, CUfunction k, CUdeviceptr dst, CUdeviceptr src, uint64_t kv, int index) {
    uint64_t tag = makeTag(d, slot, index);
    void* args[] = {&dst, &src, &kv, &tag};
    CHECK(cu.cuLaunchKernel(k, 1 + index % 3, 1, 1, 64, 1, 1, 0, slot == 0 ? nullptr : stream[d], args, nullptr));
  };

  // graft's benchmark switch, when asked for (SIM_BENCH_SWITCH=1, or =refused:
  // every call must be refused) and present (absent without graft).
  using SetModeFn = int (*)(const char*);
  const char* switchEnv = std::getenv("SIM_BENCH_SWITCH");
  const bool expectRefusal = switchEnv && std::strcmp(switchEnv, "refused") == 0;
  SetModeFn setMode = switchEnv && (std::strcmp(switchEnv, "1") == 0 || expectRefusal)
                          ? reinterpret_cast<SetModeFn>(dlsym(RTLD_DEFAULT, "graft_bench_set_mode"))
                          : nullptr;
  const char* preload = std::getenv("LD_PRELOAD");
  if (switchEnv && !setMode && preload && std::strstr(preload, "libgraft")) {
    std::fprintf(stderr, "sim_multi_device: graft is preloaded but graft_bench_set_mode is not found\n");
    return 1;
  }
  int switches = 0;

  for (int it = 0; it < kIterations; ++it) {
    for (int d = 0; d < kDevices; ++d) {
      CHECK(cu.cuCtxSetCurrent(ctx[d]));
      for (int j = 0; j < kKernelsPerDevice; ++j) {
        const int block = it / 6;
        if (setMode && it % 6 == 0 && d == block % 2 && j == (block * 7) % kKernelsPerDevice) {
          const char* mode = block % 2 ? "passthrough" : "graph";
          const int rc = setMode(mode);
          if (expectRefusal ? rc != -1 : rc != 0) {
            std::fprintf(stderr, "sim_multi_device: graft_bench_set_mode(%s) returned %d\n", mode, rc);
            ++failures;
          }
          ++switches;
        }
        if (j == kKernelsPerDevice / 2) {
          // The NULL stream publishes a value for this iteration, then records.
          launch(d, 0, add, buf.pub[d] + 8 * it, buf.region[d][0], uint64_t(it), 100);
          CHECK(cu.cuEventRecord(ev[d], nullptr));
          // The created stream waits for it and consumes it.
          CHECK(cu.cuStreamWaitEvent(stream[d], ev[d], 0));
          launch(d, 1, mix, buf.region[d][1] + 8 * (it % kCells), buf.pub[d] + 8 * it, 7, 101);
        }
        const int slot = j % 3 == 2 ? 1 : 0;
        const uint64_t kv = j % 4 == 0 ? uint64_t(it) * 1000 + j : uint64_t(j);  // per-iteration or fixed
        CUdeviceptr base = buf.region[d][slot];
        launch(d, slot, j % 2 ? add : mix, base + 8 * ((j + 1) % kCells), base + 8 * (j % kCells), kv, j);
      }
    }
    switch (it % 3) {
      case 0:
        for (int d = 0; d < kDevices; ++d) {
          CHECK(cu.cuCtxSetCurrent(ctx[d]));
          CHECK(cu.cuCtxSynchronize());
        }
        break;
      case 1:
        for (int d = 0; d < kDevices; ++d) CHECK(cu.cuStreamSynchronize(stream[d]));
        break;
      default:
        break;  // no synchronization
    }
  }
  for (int d = 0; d < kDevices; ++d) {
    CHECK(cu.cuCtxSetCurrent(ctx[d]));
    CHECK(cu.cuCtxSynchronize());
  }
  simMark("end");
  if (setMode) {
    std::fprintf(stderr, "sim_multi_device: %d benchmark mode switch calls\n", switches);
    if (switches < kIterations / 6) {
      std::fprintf(stderr, "sim_multi_device: expected a switch every 6 iterations\n");
      ++failures;
    }
  }

  // Group the executed kernels by (device they ran on, program stream of the tag).
  std::map<std::string, std::vector<std::string>> lanes;
  size_t wrongDevice = 0;
  for (size_t i = 0; i < simTraceSize(); ++i) {
    SimEffect e;
    simTraceGet(i, &e);
    if (e.kind == SIM_EFFECT_MARKER) continue;
    char b[320];
    if (e.kind != SIM_EFFECT_KERNEL || !kernelNames.count(e.func)) {
      // The program issues no other work after setup; graft's own work is not expected either.
      std::snprintf(b, sizeof b, "ran on dev%d", e.device);
      lanes[std::string(b) + " untagged"].push_back("effect kind " + std::to_string(e.kind));
      continue;
    }
    uint64_t dst, src, kv, tag;
    std::memcpy(&dst, e.params, 8);
    std::memcpy(&src, e.params + 8, 8);
    std::memcpy(&kv, e.params + 16, 8);
    std::memcpy(&tag, e.params + 24, 8);
    const int tagDev = int(tag >> 56), tagSlot = int((tag >> 48) & 0xff), index = int(tag & 0xffff);
    if (tagDev != e.device) {
      if (wrongDevice++ == 0) {
        std::fprintf(stderr,
                     "sim_multi_device: first kernel on the wrong device: trace #%zu %s index %d issued to "
                     "dev%d/%s ran on dev%d (stream id %" PRIu64 ", %s)\n",
                     i, kernelNames[e.func].c_str(), index, tagDev, slotName(tagSlot), e.device, e.streamId,
                     e.origin == SIM_ORIGIN_GRAPH ? "graph" : "eager");
      }
    }
    std::snprintf(b, sizeof b, "ran on dev%d, issued to dev%d/%s", e.device, tagDev, slotName(tagSlot));
    std::string lane = b;
    std::snprintf(b, sizeof b, "%s #%d grid=%u dst=%s src=%s k=%" PRIu64, kernelNames[e.func].c_str(), index,
                  e.grid[0], addr(dst).c_str(), addr(src).c_str(), kv);
    lanes[lane].push_back(b);
  }
  FILE* out = std::fopen(outPath, "w");
  if (!out) {
    std::perror(outPath);
    return 2;
  }
  std::fprintf(out, "kernels that ran on another device than the one they were issued to: %zu\n", wrongDevice);
  for (auto& [lane, items] : lanes) {
    std::fprintf(out, "== %s: %zu\n", lane.c_str(), items.size());
    for (auto& line : items) std::fprintf(out, "%s | %s\n", lane.c_str(), line.c_str());
  }
  for (int d = 0; d < kDevices; ++d) {
    CHECK(cu.cuCtxSetCurrent(ctx[d]));
    for (int s = 0; s < 2; ++s) {
      uint64_t words[kCells];
      CHECK(cu.cuMemcpyDtoH(words, buf.region[d][s], sizeof words));
      std::fprintf(out, "r%d.%s:", d, slotName(s));
      for (uint64_t w : words) std::fprintf(out, " %" PRIx64, w);
      std::fprintf(out, "\n");
    }
    std::vector<uint64_t> pub(kIterations);
    CHECK(cu.cuMemcpyDtoH(pub.data(), buf.pub[d], kIterations * 8));
    uint64_t h = 0;
    for (uint64_t w : pub) h = simMix64(h ^ w);
    std::fprintf(out, "pub%d hash: %" PRIx64 "\n", d, h);
  }
  std::fclose(out);
  size_t kernelsRan = 0;
  for (auto& [lane, items] : lanes)
    if (lane.find("issued to") != std::string::npos) kernelsRan += items.size();
  const char* noKernels = std::getenv("SIM_EXPECT_NO_KERNELS");  // the benchmark floor (GRAFT_MODE=swallow)
  if (noKernels && std::strcmp(noKernels, "1") == 0 && kernelsRan) {
    std::fprintf(stderr, "sim_multi_device: %zu kernels ran; none expected\n", kernelsRan);
    ++failures;
  }
  if (wrongDevice) {
    std::fprintf(stderr, "sim_multi_device: %zu kernel(s) ran on another device than they were issued to\n",
                 wrongDevice);
  }
  return failures ? 1 : 0;
}
