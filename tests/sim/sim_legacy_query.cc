// A query of the legacy stream while a blocking stream's work is pending.
//
// On an H100 (driver 580) cuStreamQuery of the legacy stream answers
// CUDA_ERROR_NOT_READY while a blocking stream of its context (or a
// per-thread default stream) has work pending, though the legacy stream itself
// has none; a blocking stream's query does not answer for the legacy stream's
// work (tests/gpu/traps_r13.cu, legacy_query_gate). The simulated driver does
// the same. graft holds the blocking stream's work in a replay, so the driver
// sees none of it: graft must answer the legacy stream's query itself.
//
// Every step: an add, a gate the host opens only after the queries, and two
// adds on stream G; then one query each of the legacy stream (NULL and
// CU_STREAM_LEGACY in turn), of an idle blocking stream and of an idle
// non-blocking stream; then the host opens the gate, adds once more on G and
// synchronizes G.
//
//   --mode gate-blocking      G is a blocking stream: the legacy stream's
//                             query answers CUDA_ERROR_NOT_READY
//   --mode gate-nonblocking   G is non-blocking: CUDA_SUCCESS
//   --mode gate-legacy        G is the legacy stream: its own query answers
//                             CUDA_ERROR_NOT_READY, the idle blocking
//                             stream's CUDA_SUCCESS
//   --mode poll-blocking      G is blocking, the host opens the gate first and
//                             then polls the legacy stream until it answers
//                             CUDA_SUCCESS; G's last add must then be done
//                             (read through host-visible memory, no copy)
//
//   sim_legacy_query --mode M [--steps N] [--expect-graphs]
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"
#include "sim_tagged_trace.h"

namespace {

using namespace simtest::modes;

const simtest::DriverApi* g_cu = nullptr;
CUfunction g_add = nullptr, g_gate = nullptr;

void add(CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s) {
  SIM_CHECK(simtest::launchAdd(*g_cu, g_add, to, from, v, s));
}

void gateSteps(int steps, const std::string& mode) {
  const simtest::DriverApi& cu = *g_cu;
  const CUstream B = simtest::newStream(cu, CU_STREAM_DEFAULT);
  const CUstream idleBlocking = simtest::newStream(cu, CU_STREAM_DEFAULT);
  const CUstream idleNonBlocking = simtest::newStream(cu);
  const CUstream N = simtest::newStream(cu);
  const CUstream G = mode == "gate-nonblocking" ? N : mode == "gate-legacy" ? CU_STREAM_LEGACY : B;
  const bool poll = mode == "poll-blocking";
  const CUdeviceptr flag = simtest::zeroedBuffer(cu), a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  // What each query answers eagerly.
  const CUresult legacyWant = G == N ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  uint64_t want = 0;
  for (int i = 0; i < steps; ++i) {
    const uint64_t open = uint64_t(i) + 1;
    add(a, a, open, G);
    SIM_CHECK(simtest::launchAdd(cu, g_gate, flag, flag, open, G));  // runs once the flag reaches `open`
    add(b, a, 3, G);
    add(a, a, 0, G);
    want += open;
    if (poll) {
      poke(flag, open);
      int tries = 0;
      CUresult r;
      while ((r = cu.cuStreamQuery(i % 2 ? CU_STREAM_LEGACY : nullptr)) == CUDA_ERROR_NOT_READY && ++tries < 10000000) {
      }
      expectCode(r, CUDA_SUCCESS, "the legacy stream's query, polled", i);
      expectValue(peek(b), want + 3, "the blocking stream's last add once the legacy stream's query said done", i);
    } else {
      expectCode(cu.cuStreamQuery(i % 2 ? CU_STREAM_LEGACY : nullptr), legacyWant,
                 "the legacy stream's query with the gate closed", i);
      expectCode(cu.cuStreamQuery(idleBlocking), CUDA_SUCCESS, "an idle blocking stream's query", i);
      expectCode(cu.cuStreamQuery(idleNonBlocking), CUDA_SUCCESS, "an idle non-blocking stream's query", i);
      poke(flag, open);
    }
    add(b, b, 0, G);  // the run goes on past the queries: graft holds the gate while they are asked
    SIM_CHECK(cu.cuStreamSynchronize(G));
    expectValue(readWord(cu, b), want + 3, "the last add, read back", i);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_legacy_query", 200);
  static simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_legacy_query", &drv, &ctx)) return rc;
  g_cu = &drv.plain;
  g_add = simtest::libraryKernel3("sim_add_legacy_query");
  g_gate = simtest::libraryKernel3("sim_gate_legacy_query");
  const std::string& mode = args.mode;
  if (mode != "gate-blocking" && mode != "gate-nonblocking" && mode != "gate-legacy" && mode != "poll-blocking") {
    std::printf("usage: sim_legacy_query --mode gate-blocking|gate-nonblocking|gate-legacy|poll-blocking "
                "[--steps N] [--expect-graphs]\n");
    return 2;
  }
  gateSteps(args.steps, mode);
  return report(args.steps, args.expectGraphs);
}
