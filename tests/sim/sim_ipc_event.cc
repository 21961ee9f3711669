// sim_ipc_event: a producer that hands each iteration's result to another
// process through an interprocess event (CU_EVENT_INTERPROCESS). Each
// iteration adds 1 to x four times on a stream and records the event; the
// host would then tell the peer (a pipe, a socket: no CUDA call), and the peer
// waits on the event and reads x. simEventWaitFromPeer is that peer's wait:
// right after the record call returns, it must cover all four additions of
// this iteration, as it does eagerly. graft cannot see the peer, so a record
// of an interprocess event must reach the driver at its place, after what came
// before it, and not wait inside a held segment.
//
// With --ctx-record the event is a private untimed one, recorded for the whole
// context (cuCtxRecordEvent: after all work enqueued so far on any stream) in
// the middle of the iteration, which goes on with four more additions and a
// stream synchronize. A waiter graft cannot see (simEventWaitFromPeer: another
// process, or a library calling the driver directly) must find the first four
// additions done: the record covers what graft still held at the call.
//   sim_ipc_event [--ctx-record] [--expect-graphs]
// Exit 1 on a wrong value; with --expect-graphs also unless most additions
// ran from graph launches (the kernels between the records still replay).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sim_api.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  bool expectGraphs = false, ctxRecord = false;
  for (int i = 1; i < argc; ++i) {
    expectGraphs |= std::strcmp(argv[i], "--expect-graphs") == 0;
    ctxRecord |= std::strcmp(argv[i], "--ctx-record") == 0;
  }
  simtest::Driver drv;
  CUcontext ctx;
  if (int rc = simtest::startProgram("sim_ipc_event", &drv, &ctx)) return rc;
  auto& cu = drv.plain;
  CUfunction add = simtest::libraryKernel3("sim_add_ipc");
  CUstream s;
  CUevent shared;
  CUdeviceptr x;
  if (cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
      cu.cuEventCreate(&shared, CU_EVENT_DISABLE_TIMING | (ctxRecord ? 0 : CU_EVENT_INTERPROCESS)) != CUDA_SUCCESS ||
      cu.cuMemAlloc(&x, 64) != CUDA_SUCCESS || cu.cuMemsetD8(x, 0, 64) != CUDA_SUCCESS) {
    std::printf("sim_ipc_event: setup failed\n");
    return 1;
  }
  constexpr uint64_t kIterations = 300;
  const uint64_t perIteration = ctxRecord ? 8 : 4;
  for (uint64_t it = 1; it <= kIterations; ++it) {
    for (int k = 0; k < 4; ++k) simtest::launchAdd(cu, add, x, x, 1, s);
    if (ctxRecord) cu.cuCtxRecordEvent(ctx, shared);
    else cu.cuEventRecord(shared, s);
    // The waiter graft cannot see: waits on the event, then reads x (device
    // memory is host-readable in the simulator; no driver call).
    simEventWaitFromPeer(shared);
    const uint64_t seen = *reinterpret_cast<volatile const uint64_t*>(x);
    const uint64_t want = perIteration * (it - 1) + 4;
    if (seen != want) {
      std::printf("sim_ipc_event: iteration %llu: x = %llu after waiting on the event, expected %llu\n",
                  (unsigned long long)it, (unsigned long long)seen, (unsigned long long)want);
      return 1;
    }
    if (ctxRecord) {
      for (int k = 0; k < 4; ++k) simtest::launchAdd(cu, add, x, x, 1, s);
      cu.cuStreamSynchronize(s);
    }
  }
  cu.cuCtxSynchronize();
  SimCounters c{};
  simCounters(&c);
  std::printf("sim_ipc_event: %llu iterations, the peer saw every value; effects from graphs %llu, eager %llu\n",
              (unsigned long long)kIterations, (unsigned long long)c.effectsGraph,
              (unsigned long long)c.effectsEager);
  if (expectGraphs && c.effectsGraph * 10 < (c.effectsGraph + c.effectsEager) * 8) {
    std::printf("sim_ipc_event: fewer than 80 %% of the effects came from graphs\n");
    return 1;
  }
  return 0;
}
