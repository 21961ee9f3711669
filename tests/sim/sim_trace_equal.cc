// sim_trace_equal.cc - runs one fixed, single-threaded program through the driver
// obtained like cudart does and writes the executed trace (and the final contents
// of its buffers) to a file. A test runs it with and without LD_PRELOAD=libgraft.so
// (GRAFT_MODE=passthrough) and requires identical files.
//
// Invariants: the schedule is seeded (simSetSeed) and the program is
// single-threaded, so without interposition the file is a pure function of the
// seed. Addresses, handles and function pointers are written symbolically
// ("d2+16", "sA", "sim_add_t"), so an interposer's own allocations or handle values
// cannot change the file - only a change in what executed, in which order, can.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace {

struct Symbols {
  std::vector<std::pair<std::string, std::pair<uint64_t, size_t>>> buffers;
  std::map<CUstream, std::string> streams;
  std::map<CUfunction, std::string> kernels;
  std::map<void*, std::string> hostFns;

  std::string addr(uint64_t a) const {
    for (auto& [name, range] : buffers) {
      if (a >= range.first && a < range.first + range.second) return name + "+" + std::to_string(a - range.first);
    }
    char b[32];
    std::snprintf(b, sizeof b, "0x%" PRIx64, a);
    return b;
  }
  std::string stream(CUstream s) const {
    auto it = streams.find(s);
    return it == streams.end() ? "?" : it->second;
  }
};

Symbols sym;
int failures = 0;

void check(CUresult r, const char* what, int line) {
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
    std::fprintf(stderr, "sim_trace_equal: %s (line %d) returned %d\n", what, line, static_cast<int>(r));
    ++failures;
  }
}
#define CHECK(call) check(call, #call, __LINE__)

void CUDA_CB hostFnA(void*) {}
void CUDA_CB hostFnB(void*) {}

std::string describe(const SimEffect& e) {
  std::string s = "#" + std::to_string(e.index);
  s += e.origin == SIM_ORIGIN_GRAPH ? " graph(launch " + std::to_string(e.graphLaunchId) + ")" : " eager";
  if (e.kind != SIM_EFFECT_MARKER) s += " stream=" + sym.stream(e.stream);
  char b[256];
  switch (e.kind) {
    case SIM_EFFECT_KERNEL: {
      std::snprintf(b, sizeof b, " kernel %s grid=%u,%u,%u block=%u,%u,%u smem=%u", sym.kernels[e.func].c_str(),
                    e.grid[0], e.grid[1], e.grid[2], e.block[0], e.block[1], e.block[2], e.sharedMemBytes);
      s += b;
      s += " attrs=[";
      for (unsigned i = 0; i < e.numAttrs; ++i) {
        s += std::to_string(e.attrs[i].id) + ":";
        for (size_t j = 0; j < 16; ++j) {
          std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(e.attrs[i].value.pad[j]));
          s += b;
        }
        s += " ";
      }
      s += "] params=[";
      for (unsigned i = 0;; ++i) {
        size_t off, size;
        if (simKernelParamLayout(e.func, i, &off, &size) != 0) break;
        if (size == 8) {
          uint64_t v;
          std::memcpy(&v, e.params + off, 8);
          s += sym.addr(v);
        } else {
          for (size_t j = 0; j < size; ++j) {
            std::snprintf(b, sizeof b, "%02x", e.params[off + j]);
            s += b;
          }
        }
        s += " ";
      }
      s += "]";
      break;
    }
    case SIM_EFFECT_MEMCPY:
      std::snprintf(b, sizeof b, " memcpy %s <- %s width=%zu height=%zu depth=%zu pitch=%zu/%zu",
                    sym.addr(e.dst).c_str(), sym.addr(e.src).c_str(), e.widthBytes, e.height, e.depth, e.dstPitch,
                    e.srcPitch);
      s += b;
      break;
    case SIM_EFFECT_MEMSET:
      std::snprintf(b, sizeof b, " memset %s elem=%u value=0x%x width=%zu height=%zu pitch=%zu",
                    sym.addr(e.dst).c_str(), e.elementSize, e.value, e.widthElements, e.height, e.dstPitch);
      s += b;
      break;
    case SIM_EFFECT_HOST_FUNC:
      s += " host " + sym.hostFns[reinterpret_cast<void*>(e.fn)] + " " +
           sym.addr(reinterpret_cast<uint64_t>(e.userData));
      break;
    case SIM_EFFECT_MARKER:
      s += std::string(" marker ") + e.label;
      break;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  simtest::TraceProgramArgs args;
  simtest::Driver drv;
  if (int rc = simtest::startTraceProgram("sim_trace_equal", argc, argv, &args, &drv)) return rc;
  const char* outPath = args.outPath;
  const uint64_t seed = args.seed;
  const simtest::DriverApi& cu = drv.plain;
  const simtest::DriverApi& pt = drv.perThread;
  simSetSeed(seed);
  CUcontext ctx;
  CHECK(cu.cuInit(0));
  CHECK(cu.cuDevicePrimaryCtxRetain(&ctx, 0));
  CHECK(cu.cuCtxSetCurrent(ctx));

  const size_t s4[] = {8, 8, 8, 8};
  const size_t sOpaque[] = {8, 4, 24, 8};
  CUfunction add = simKernelCreate("sim_add_t", SIM_KERNEL_LIBRARY, 4, s4, nullptr);
  CUfunction mix = simKernelCreate("sim_mix_t", SIM_KERNEL_FUNCTION, 4, s4, nullptr);
  CUfunction opq = simKernelCreate("opaque_t", SIM_KERNEL_OPAQUE, 4, sOpaque, nullptr);
  sym.kernels = {{add, "sim_add_t"}, {mix, "sim_mix_t"}, {opq, "opaque_t"}};
  sym.hostFns = {{reinterpret_cast<void*>(&hostFnA), "hostFnA"}, {reinterpret_cast<void*>(&hostFnB), "hostFnB"}};

  CUstream sA, sB;
  CHECK(cu.cuStreamCreate(&sA, 0));
  CHECK(cu.cuStreamCreate(&sB, CU_STREAM_NON_BLOCKING));
  sym.streams = {{sA, "sA"}, {sB, "sB"}, {CU_STREAM_LEGACY, "legacy"}, {CU_STREAM_PER_THREAD, "per-thread"}};
  CUevent ev, ev2;
  CHECK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CHECK(cu.cuEventCreate(&ev2, 0));
  CUdeviceptr d[4];
  for (int i = 0; i < 4; ++i) {
    CHECK(cu.cuMemAlloc(&d[i], 256));
    sym.buffers.push_back({"d" + std::to_string(i), {d[i], 256}});
  }
  sym.buffers.push_back({"dArray", {reinterpret_cast<uint64_t>(d), sizeof d}});
  void* pinned;
  CHECK(cu.cuMemAllocHost(&pinned, 256));
  std::vector<uint64_t> pageable(32);
  sym.buffers.push_back({"pinned", {reinterpret_cast<uint64_t>(pinned), 256}});
  sym.buffers.push_back({"pageable", {reinterpret_cast<uint64_t>(pageable.data()), 256}});
  for (int i = 0; i < 32; ++i) static_cast<uint64_t*>(pinned)[i] = 1000 + i;
  CHECK(cu.cuMemsetD32(d[0], 0, 64));

  auto launch = [&](const simtest::DriverApi& api, CUfunction k, CUstream s, CUdeviceptr dst, CUdeviceptr src,
                    uint64_t kv, uint64_t tag, unsigned grid) {
    void* args[] = {&dst, &src, &kv, &tag};
    CHECK(api.cuLaunchKernel(k, grid, 1, 1, 64, 1, 1, 0, s, args, nullptr));
  };
  for (int it = 0; it < 6; ++it) {
    CHECK(cu.cuMemsetD8Async(d[0] + 128, static_cast<unsigned char>(it), 64, sA));
    CHECK(cu.cuMemcpyHtoDAsync(d[1], pinned, 64, sB));
    launch(cu, add, sB, d[2], d[1], it, 1, 2);
    CHECK(cu.cuEventRecord(ev, sB));
    CHECK(cu.cuStreamWaitEvent(sA, ev, 0));
    launch(cu, mix, sA, d[3], d[2], 0x9e37 + it, 2, 1);
    CHECK(cu.cuMemcpyDtoDAsync(d[0], d[3], 32, nullptr));
    CHECK(cu.cuLaunchHostFunc(sA, hostFnA, d + 1));
    launch(pt, add, nullptr, d[0] + 64, d[0], 3, 3, 1);
    uint32_t small = 77;
    uint8_t blob[24] = {1, 2, 3};
    uint64_t tag = 4;
    void* oargs[] = {&d[1], &small, blob, &tag};
    CHECK(cu.cuLaunchKernel(opq, 1, 1, 1, 32, 1, 1, 128, sB, oargs, nullptr));
    cu.cuStreamQuery(sA);
    if (it % 2 == 1) CHECK(cu.cuCtxSynchronize());
    pageable[it] = 50 + it;
    CHECK(cu.cuMemcpyHtoDAsync(d[1] + 128, pageable.data(), 64, sB));
    CHECK(cu.cuMemcpyDtoHAsync(static_cast<uint64_t*>(pinned) + 16, d[3], 64, sA));
    CUlaunchAttribute attr;
    std::memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = it;
    CUlaunchConfig cfg{};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = sB;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    CUdeviceptr dst = d[2] + 8, src = d[1] + 128;
    uint64_t kv = 5, tg = 5;
    void* args[] = {&dst, &src, &kv, &tg};
    CHECK(cu.cuLaunchKernelEx(&cfg, add, args, nullptr));
    CHECK(cu.cuEventRecord(ev2, sA));
    while (cu.cuEventQuery(ev2) == CUDA_ERROR_NOT_READY) {
    }
    CHECK(cu.cuMemcpyDtoH(pageable.data() + 16, d[2], 64));
  }
  // The program's own capture and graph.
  CHECK(cu.cuStreamBeginCapture(sB, CU_STREAM_CAPTURE_MODE_GLOBAL));
  launch(cu, add, sB, d[0], d[0], 11, 6, 1);
  CHECK(cu.cuMemsetD32Async(d[1], 0xabcd, 8, sB));
  CHECK(cu.cuLaunchHostFunc(sB, hostFnB, d + 2));
  launch(cu, mix, sB, d[1] + 8, d[0], 12, 7, 1);
  CUgraph graph;
  CHECK(cu.cuStreamEndCapture(sB, &graph));
  CUgraphExec exec;
  CHECK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
  CHECK(cu.cuGraphLaunch(exec, sB));
  CHECK(cu.cuGraphLaunch(exec, sA));
  CHECK(cu.cuCtxSynchronize());
  simMark("end");

  FILE* out = std::fopen(outPath, "w");
  if (!out) {
    std::perror(outPath);
    return 2;
  }
  for (size_t i = 0; i < simTraceSize(); ++i) {
    SimEffect e;
    simTraceGet(i, &e);
    std::fprintf(out, "%s\n", describe(e).c_str());
  }
  for (int i = 0; i < 4; ++i) {
    uint64_t words[32];
    CHECK(cu.cuMemcpyDtoH(words, d[i], 256));
    std::fprintf(out, "d%d:", i);
    for (uint64_t w : words) std::fprintf(out, " %" PRIx64, w);
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "pinned/pageable:");
  for (int i = 0; i < 32; ++i)
    std::fprintf(out, " %" PRIx64 "/%" PRIx64, static_cast<uint64_t*>(pinned)[i], pageable[i]);
  std::fprintf(out, "\n");
  std::fclose(out);
  CHECK(cu.cuGraphExecDestroy(exec));
  CHECK(cu.cuGraphDestroy(graph));
  return failures ? 1 : 0;
}
