// traps_r13 (helper-written): a thirteenth red-team round of odd but legal CUDA C++ patterns in
// the style of traps_r11.cu and traps_r6.cu (trap_common.cuh), aimed at what a
// tool that holds launches back, captures the repeating ones into graphs of
// its own, patches their parameters and answers some calls itself could get
// wrong: what the host can learn about held work without synchronizing (a
// query of an idle stream or of an event recorded there, another thread's
// query, a mapped flag watched with a deadline), what a query of the legacy
// stream says while only a blocking stream has work, CUDA_LAUNCH_BLOCKING
// values and when it is set, a device heap whose blocks live across launches
// and streams, the runtime's library API with a reloaded library whose kernel
// changes its parameter layout, a program capture spanning many steps of a
// loop that goes on beside it, the grid ids a kernel reads, and the driver's
// per-thread-stream entry points called with a NULL stream in a legacy-stream
// program. Each scenario is deterministic in eager (no races: integer
// kernels, every cross-stream access ordered by an event, a stream-ordered op
// or a host barrier) and prints digests of its buffers and of what the host
// saw; check_traps.py requires the same output under graft. A scenario whose
// feature this machine lacks prints a SKIP line and stops.
//
//   idle_record_query     each step records an untimed event on a stream that
//                         has nothing else to do (a non-blocking stream, a
//                         blocking one, cudaStreamPerThread, the legacy stream,
//                         or a non-blocking one after a wait on an event that
//                         completed long ago), launches two more kernels on a
//                         busy stream, spins 1 ms on the host, and asks
//                         cudaEventQuery / cudaStreamQuery once. Eagerly the
//                         record on an idle stream completed microseconds
//                         after it was issued: the answer is cudaSuccess, and
//                         the step's last kernel takes a salt from it (a
//                         scheduler that found the stream free). On "not
//                         ready" the program synchronizes the target (never
//                         eagerly). A last phase issues zero-size memsets and
//                         copies (which do nothing) on the idle stream instead
//                         of the record: a control.
//                         What graft may get wrong: it holds the record (an op
//                         of the replayed step) and answers the query itself:
//                         CUDA_ERROR_NOT_READY "for work it holds"
//                         (src/core/engine.cc Engine::query, lines 688-694 and
//                         713-714, 750-752), which an eager run never says
//                         here. The program takes the other branch.
//   stream_pool_pick      a pool of four non-blocking streams: each step gives
//                         one of them a one-warp kernel and an event record,
//                         another a 16-byte device copy; 1 ms later the host
//                         asks cudaStreamQuery of all four (once each, no
//                         polling) and cudaEventQuery of the record, picks the
//                         first free stream starting from the one just used
//                         and reuses the slot only if the event says done (a
//                         caching allocator's record_stream check); the pick
//                         and the reuse decide the salt the main stream folds
//                         the slot in with. Eagerly those tiny ops finished a
//                         millisecond earlier: pick 0, reuse yes, every step.
//                         What graft may get wrong: held ops answered "not
//                         ready" (Engine::query as above), the more so as a
//                         query without a poll keeps being answered by graft.
//   legacy_query_gate     a kernel that spins on a mapped flag the host sets
//                         only after the step's queries sits on a blocking
//                         stream B (phases of 25 steps), or on the legacy
//                         stream (the other phases), between kernels; the
//                         host then asks cudaStreamQuery of the legacy stream
//                         (NULL or cudaStreamLegacy), of B, of a second
//                         blocking stream with no work, of a non-blocking
//                         stream, of cudaStreamPerThread, and cudaEventQuery
//                         of an event completed long ago, once each. Eagerly
//                         every answer is fixed (the gate is pending for sure);
//                         whether a query of the idle legacy stream reports a
//                         blocking stream's pending work (and an idle blocking
//                         stream the legacy stream's) is the driver's to say.
//                         What graft may get wrong: it answers from the ops it
//                         holds on the queried stream key only
//                         (Engine::query 698-716) and otherwise asks the driver,
//                         which sees nothing of the held gate: where the
//                         driver's answer for an idle legacy (blocking) stream
//                         depends on the other kind's pending work, graft's
//                         answer differs.
//   mapped_flag_deadline  a one-thread kernel on an idle stream writes a step
//                         number into mapped host memory; the host, with no
//                         CUDA call, watches the word for at most 3 ms (eagerly
//                         it arrives within microseconds) and picks the next
//                         kernel's salt from whether it came. What graft may
//                         get wrong: the kernel is held until the step's sync;
//                         the idle flush (GRAFT_IDLE_FLUSH_MS=5, two ticks of
//                         quiet: src/hook/runtime.cc 141-149, engine.cc
//                         857-873) comes after the deadline. (A deadline the
//                         program sets, 1000x the eager latency.)
//   launch_blocking_env   this program run again in fresh processes with
//                         CUDA_LAUNCH_BLOCKING unset, "0", "1", "2", "01",
//                         "true", and "1" set only after the driver was
//                         initialized (cudaGetDeviceCount) but before the
//                         context was made. Each child first measures whether
//                         launches block (a kernel that waits up to 0.2 s for
//                         a flag the host sets once the launch returned), then
//                         runs a loop of four launches a step: where launches
//                         block it reads their mapped output and rewrites their
//                         mapped input right after the last launch returns,
//                         with no synchronize; otherwise it synchronizes first.
//                         What graft may get wrong: it goes pass-through only
//                         for the exact value "1" read when graft starts
//                         (src/config/options.cc 219, src/hook/runtime.cc 209);
//                         a value or a moment the driver honours otherwise
//                         leaves graft holding launches the program expects to
//                         have run.
//   device_heap_handoff   device-side malloc in one kernel (stream A), the
//                         blocks' pointers kept in a __device__ table across
//                         launches, used and rewritten in place by a kernel on
//                         stream B, freed by a kernel on stream C a few steps
//                         later (a hashed choice per slot and step), the three
//                         chained by events and back to A; the heap size set
//                         before the first such kernel; allocations, frees and
//                         failures counted in __device__ counters. What graft
//                         may get wrong: the heap's state lives outside every
//                         parameter; a launch replayed twice, dropped or
//                         reordered across the streams double-frees, leaks or
//                         reads freed blocks; graphs of kernels that malloc.
//   runtime_library_reload  a library loaded from PTX with the runtime API
//                         (cudaLibraryLoadData), its kernel taken by
//                         cudaLibraryGetKernel and launched in turn through
//                         cudaLaunchKernel, cudaLaunchKernelExC and
//                         cuLaunchKernel with the cudaKernel_t, its __device__
//                         table (cudaLibraryGetGlobal) written by device copies
//                         at moving offsets, its __managed__ run counter
//                         (cudaLibraryGetManaged) read by the host; every 60
//                         steps the library is unloaded and the other variant
//                         loaded, whose kernel of the same name takes its last
//                         parameter as 64 bits instead of 32 (the driver may
//                         hand the same library and kernel handles back). What
//                         graft may get wrong: a parameter layout or a graph
//                         kept for a handle whose code changed.
//   relaxed_capture_span  the program begins a relaxed-mode capture on a
//                         non-blocking stream at about a quarter of the run and
//                         ends it near the middle: every step in between adds
//                         two kernels (and on some steps a memset) to it, while
//                         the loop's three-stream step (events both ways) goes
//                         on beside it with checkpoints that synchronize and
//                         copy through the legacy stream; then the captured
//                         graph is instantiated and launched three times. What
//                         graft may get wrong: it steps aside for the whole
//                         capture (many steps), must keep its bookkeeping of
//                         the loop's streams and events across it, and pick
//                         the loop up again after it.
//   gridid_sequence       a one-warp kernel logs %gridid (the context's
//                         temporal grid launch number) between the step's
//                         kernels, memset and device copy on one stream; the
//                         host digests the differences between successive ids
//                         within and across steps (never the ids). What graft
//                         may get wrong: a kernel can see how many grids were
//                         launched between two of its launches; graphs, graft's
//                         own copy and memset kernels and re-issued launches
//                         change that count.
//   ptsz_null_mix         a legacy-stream program that also uses the driver's
//                         per-thread-stream entry points (cuLaunchKernel,
//                         cuMemsetD32Async, cuEventRecord, cuStreamWaitEvent,
//                         cuStreamQuery, cuStreamSynchronize, cuMemcpyDtoH from
//                         cudaGetDriverEntryPointByVersion with
//                         cudaEnablePerThreadDefaultStream) with a NULL stream,
//                         which then names the per-thread default stream, and
//                         the plain driver symbols with a NULL stream (the
//                         legacy stream); the two orders against each other
//                         only by the legacy stream's implicit synchronization,
//                         a blocking stream follows the per-thread work only
//                         through a legacy op between, and a non-blocking
//                         stream through an event the per-thread stream
//                         recorded. What graft may get wrong: the per-thread
//                         variant's NULL stream taken for the legacy stream (or
//                         the reverse), or its proxy not ordered as the
//                         per-thread stream is.
//   helper_polls_held     a second thread, in lockstep with the main thread
//                         (atomics, no CUDA call on the main thread while it
//                         waits), asks cudaEventQuery about an event the main
//                         thread recorded after a one-warp kernel on an idle
//                         stream, 1 ms after it, and cudaStreamQuery of that
//                         stream; on "not ready" it synchronizes the event
//                         instead of polling. Eagerly: cudaSuccess, every step.
//                         What graft may get wrong: another thread's query of
//                         work the main thread's run holds is answered by
//                         graft (Engine::query), not by the driver.
//
//   traps_r13 NAME [--iters N]         one scenario (see kScenarios)
//   traps_r13 --list                   the scenario names
//   traps_r13 --probe-blocking V:N     (internal) launch_blocking_env's child
//
// Built like traps_r11 (-rdc=true -lcudadevrt) and linked to libcuda (-lcuda:
// driver copies, memsets and launches):
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -I tests/gpu -rdc=true -o traps_r13 traps_r13.cu -lcudadevrt -lcuda

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trap_common.cuh"
#include "trap_helpers.cuh"

namespace {

// ---------------------------------------------------------------- helpers (and trap_helpers.cuh)

// Busy-waits `us` microseconds on the host, with no CUDA call.
void spinHostUs(int us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

void addCode(Digest& d, int code) { d.add(uint64_t(uint32_t(code))); }

// ---------------------------------------------------------------- kernels

// One warp writes a 32-word slot from a seed that nobody writes.
__global__ void tinyWrite(uint32_t* slot, const uint32_t* seed, uint32_t salt) {
  const unsigned t = threadIdx.x;
  if (t < 32) slot[t] = hash32(seed[t] + salt) ^ t;
}

// dst mixes with a 32-word slot.
__global__ void foldSlot(uint32_t* dst, const uint32_t* slot, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 3) ^ (slot[k & 31] + salt + uint32_t(k));
}

// Writes `value` into (mapped) memory, fenced for the host.
__global__ void signalFlag(uint32_t* flag, uint32_t value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    __threadfence_system();
    *reinterpret_cast<volatile uint32_t*>(flag) = value;
    __threadfence_system();
  }
}

// Spins until a (mapped) word reaches `want`, or counts a timeout.
__global__ void gateWait(const volatile uint32_t* flag, uint32_t want, uint32_t* timeouts, long long maxCycles) {
  const long long t0 = clock64();
  while (*flag < want) {
    if (clock64() - t0 > maxCycles) {
      atomicAdd(timeouts, 1u);
      break;
    }
  }
}

// ---------------------------------------------------------------- idle_record_query

// The target of a step's query: a stream, or an event.
struct QueryTarget {
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
};

// What a tool could get wrong: the record (or the wait and the record) on a
// stream with nothing else to do is an op of the repeating step, so a tool
// replaying the step holds it until the step's later ops match; asked about it
// in the meantime, a tool that answers "not ready" for work it holds tells the
// host the stream is busy, which it was not: eagerly the record completed
// microseconds after its call, a millisecond before the query. The answer picks
// the salt of the step's last kernel, and "not ready" makes the program
// synchronize the target (which an eager run never does). The last phase's
// zero-size memsets and copies (no work at all) are a control.
// Eagerly deterministic: the queried stream's only work is the record (or a
// wait on an event completed long ago, or ops of zero bytes), issued 1 ms
// before the query; the busy stream A is non-blocking, so neither the legacy
// stream nor the blocking streams wait for it.
void idleRecordQuery() {
  cudaStream_t A = nonBlockingStream(), S1 = nonBlockingStream(), S2 = blockingStream();
  auto* c1 = reinterpret_cast<CUstream>(S1);
  auto* c2 = reinterpret_cast<CUstream>(S2);
  cudaEvent_t e = untimedEvent(), eDone = untimedEvent();
  uint32_t *a = deviceBuffer(13001), *b = deviceBuffer(13002), *c = deviceBuffer(13003), *d = deviceBuffer(13004);
  uint32_t* z = deviceBuffer(13005, 1024);
  const auto zp = reinterpret_cast<CUdeviceptr>(z);
  CK(cudaEventRecord(eDone, S1));
  CK(cudaDeviceSynchronize());  // eDone complete; every stream idle
  preload(mix);
  preload(mix2);
  Digest answers, codes;
  int ready = 0, busy = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 16u;
    const int phase = int(int64_t(i) * 6 / g_iters);
    mix<<<kGrid, kBlock, 0, A>>>(a, b, kN, u);
    CKL();
    QueryTarget q;
    switch (phase) {
      case 0:  // a non-blocking stream: the event
        CK(cudaEventRecord(e, S1));
        q.event = e;
        break;
      case 1:  // a blocking stream: the stream
        CK(cudaEventRecord(e, S2));
        q.stream = S2;
        break;
      case 2:  // the per-thread default stream (blocking against the legacy one): the stream
        CK(cudaEventRecord(e, cudaStreamPerThread));
        q.stream = cudaStreamPerThread;
        break;
      case 3:  // the legacy stream (no blocking stream has work): the event, or the stream
        CK(cudaEventRecord(e, i % 2 ? cudaStreamLegacy : cudaStream_t(0)));
        if (i % 2) q.event = e;
        else q.stream = cudaStreamLegacy;
        break;
      case 4:  // a wait on an event completed long ago, then the record: the stream
        CK(cudaStreamWaitEvent(S1, eDone, 0));
        CK(cudaEventRecord(e, S1));
        q.stream = S1;
        break;
      default:  // control: ops of zero bytes, which do nothing: the stream
        addCode(codes, cuMemsetD8Async(zp + uint32_t(i % 64), static_cast<unsigned char>(i), 0, c1));
        addCode(codes, cuMemcpyDtoDAsync(zp + 4u * uint32_t(i % 32), reinterpret_cast<CUdeviceptr>(a), 0, c2));
        addCode(codes, cuMemsetD32Async(zp + 4u * uint32_t(i % 16), u, 0, c1));
        q.stream = i % 2 ? S1 : S2;
        break;
    }
    mix<<<kGrid, kBlock, 0, A>>>(b, a, kN, u + 1);
    mix2<<<kGrid, kBlock, 0, A>>>(c, a, b, kN, u + 2);
    CKL();
    spinHostUs(1000);
    const cudaError_t r = q.event ? cudaEventQuery(q.event) : cudaStreamQuery(q.stream);
    cudaGetLastError();  // a "not ready" must not stay behind as the last error
    addCode(answers, int(r));
    if (r == cudaSuccess) {
      ++ready;
    } else {
      ++busy;
      if (r != cudaErrorNotReady) {
        std::printf("FAIL query at step %d: %s\n", i, cudaGetErrorName(r));
        std::exit(1);
      }
      // Busy: wait for it (never eagerly).
      if (q.event) CK(cudaEventSynchronize(q.event));
      else CK(cudaStreamSynchronize(q.stream));
    }
    // The step's last kernel: the salt of a side stream found free, or busy.
    mix<<<kGrid, kBlock, 0, A>>>(d, c, kN, r == cudaSuccess ? u + 3 : u + 11);
    CKL();
    CK(cudaStreamSynchronize(A));
    if (at(i)) {
      std::printf("step %d: phase %d ready %d busy %d\n", i, phase, ready, busy);
      print("answers", i, answers.h);
      print("codes", i, codes.h);
      print("abcd", i,
            deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", ready, deviceDigest(d, kN * 4) ^ answers.h);
}

// ---------------------------------------------------------------- stream_pool_pick

// What a tool could get wrong: a scheduler that asks every stream of its pool
// whether it is free (once each: no polling) and a caching allocator that asks
// whether a slot's last use completed, a millisecond after the tiny ops they
// ask about were issued. Eagerly those ops (a one-warp kernel, a record, a
// 16-byte device copy) completed long before; a tool that holds them as part of
// the repeating step answers "not ready" and the program picks another stream
// and refuses the reuse, which changes the salts folded into the main buffer.
// Eagerly deterministic: every pool stream's work is tiny and has no
// dependency; the main stream reads a slot only after waiting on its record;
// a slot is written again four steps later, after the main stream's step
// ended in a host synchronize.
void streamPoolPick() {
  constexpr int kPool = 4;
  cudaStream_t M = nonBlockingStream();
  cudaStream_t P[kPool];
  cudaEvent_t done[kPool];
  for (int k = 0; k < kPool; ++k) {
    P[k] = nonBlockingStream();
    done[k] = untimedEvent();
  }
  uint32_t *a = deviceBuffer(13101), *b = deviceBuffer(13102), *c = deviceBuffer(13103);
  uint32_t *slots = zeroBuffer(kPool * 32), *seed = deviceBuffer(13104, 64), *copies = zeroBuffer(kPool * 4);
  preload(tinyWrite);
  preload(foldSlot);
  preload(mix);
  Digest picks;
  int reused = 0, pickedFirst = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const int j = i % kPool, jc = (i + 2) % kPool;
    mix<<<kGrid, kBlock, 0, M>>>(a, b, kN, u);
    tinyWrite<<<1, 32, 0, P[j]>>>(slots + 32 * j, seed, u);
    CKL();
    CK(cudaEventRecord(done[j], P[j]));
    CK(cudaMemcpyAsync(copies + 4 * jc, seed + (i % 16) * 4, 16, cudaMemcpyDeviceToDevice, P[jc]));
    mix<<<kGrid, kBlock, 0, M>>>(b, a, kN, u + 1);
    CKL();
    spinHostUs(1000);
    int chosen = -1;
    for (int t = 0; t < kPool; ++t) {
      const cudaError_t r = cudaStreamQuery(P[(j + t) % kPool]);
      addCode(picks, int(r));
      if (r == cudaSuccess && chosen < 0) chosen = t;
    }
    const cudaError_t slotDone = cudaEventQuery(done[j]);
    cudaGetLastError();
    addCode(picks, int(slotDone));
    picks.add(uint64_t(chosen + 1));
    pickedFirst += chosen == 0;
    reused += slotDone == cudaSuccess;
    CK(cudaStreamWaitEvent(M, done[j], 0));
    foldSlot<<<kGrid, kBlock, 0, M>>>(c, slots + 32 * j, kN,
                                      u + 2 + uint32_t(chosen + 1) * 1000u + (slotDone == cudaSuccess ? 0u : 77u));
    mix<<<kGrid, kBlock, 0, M>>>(a, c, kN, u + 3);
    CKL();
    CK(cudaStreamSynchronize(M));
    if (at(i)) {
      std::printf("step %d: picked first %d reused %d\n", i, pickedFirst, reused);
      print("picks", i, picks.h);
      print("abc", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", reused, deviceDigest(c, kN * 4) ^ deviceDigest(copies, kPool * 16) ^ picks.h);
}

// ---------------------------------------------------------------- legacy_query_gate

constexpr long long kGateCycles = 2000000000LL;  // about a second

// What a tool could get wrong: the gate (and the kernels around it) are ops of
// the repeating step a tool holds when the host asks; for the stream the gate
// is on, it may answer "not ready" itself, but for every other stream it asks
// the driver, which then knows nothing of the held gate. Eagerly a query of
// the idle legacy stream while a blocking stream's gate is pending (and of an
// idle blocking stream while the legacy stream's gate is pending) gets the
// driver's answer for that situation, whatever it is: if it counts the other
// kind's pending work (the implicit synchronization), the tool's answer
// differs. The other answers are controls.
// Eagerly deterministic: the gate spins until the host sets the flag, which it
// does only after the queries, so every query sees the gate pending; each
// target is asked once per step (no polling); the streams asked about that
// have no work this step finished theirs long ago.
void legacyQueryGate() {
  Mapped flag = mappedBuffer(16, 0);
  cudaStream_t B = blockingStream(), B2 = blockingStream(), N = nonBlockingStream();
  cudaEvent_t eOld = untimedEvent();
  uint32_t *a = deviceBuffer(13201), *b = deviceBuffer(13202), *c = deviceBuffer(13203), *x = deviceBuffer(13204);
  uint32_t* timeouts = zeroBuffer(4);
  mix<<<kGrid, kBlock, 0, B2>>>(c, a, kN, 1);  // work long done on the streams asked about
  mix<<<kGrid, kBlock, 0, N>>>(x, b, kN, 2);
  CKL();
  CK(cudaEventRecord(eOld, B2));
  CK(cudaDeviceSynchronize());
  preload(gateWait);
  preload(mix);
  Digest onBlocking, onLegacy;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t want = uint32_t(i) + 1;
    const bool legacyGate = (i / 25) % 2 == 1;
    const cudaStream_t G = legacyGate ? cudaStreamLegacy : B;
    mix<<<kGrid, kBlock, 0, G>>>(a, b, kN, want);
    gateWait<<<1, 1, 0, G>>>(flag.dev, want, timeouts, kGateCycles);
    mix<<<kGrid, kBlock, 0, G>>>(b, a, kN, want + 1);
    mix2<<<kGrid, kBlock, 0, G>>>(c, a, b, kN, want + 3);
    CKL();
    // Each target once, in an order that never asks one twice in a row.
    cudaError_t q[6];
    q[0] = cudaStreamQuery(i % 2 ? cudaStreamLegacy : cudaStream_t(0));
    q[1] = cudaStreamQuery(B);
    q[2] = cudaStreamQuery(B2);
    q[3] = cudaStreamQuery(N);
    q[4] = cudaStreamQuery(cudaStreamPerThread);
    q[5] = cudaEventQuery(eOld);
    cudaGetLastError();
    Digest& d = legacyGate ? onLegacy : onBlocking;
    for (cudaError_t r : q) addCode(d, int(r));
    mix<<<kGrid, kBlock, 0, G>>>(a, b, kN, want + 2);
    CKL();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *reinterpret_cast<volatile uint32_t*>(flag.host) = want;
    CK(cudaStreamSynchronize(G));
    if (i == 0 || i == 25)
      std::printf("step %d: gate on %s: legacy %d B %d B2 %d N %d per-thread %d old event %d\n", i,
                  legacyGate ? "legacy" : "B", int(q[0]), int(q[1]), int(q[2]), int(q[3]), int(q[4]), int(q[5]));
    if (at(i)) {
      print("gate_on_blocking", i, onBlocking.h);
      print("gate_on_legacy", i, onLegacy.h);
      print("ab", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(timeouts, 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(timeouts, 4) ^ onBlocking.h ^
                     onLegacy.h);
}

// ---------------------------------------------------------------- mapped_flag_deadline

// What a tool could get wrong: the host watches zero-copy memory for a word a
// one-thread kernel on an idle stream writes, with a deadline of 3 ms and no
// CUDA call meanwhile (a watchdog, or a latency-bound handshake that falls
// back to another path); eagerly the word arrives within microseconds. A tool
// that holds the kernel until the step's later ops match, and flushes what it
// holds only after GRAFT_IDLE_FLUSH_MS of quiet (5 ms, two ticks), misses
// every deadline; the program then takes the fallback path (another salt).
// Eagerly deterministic: the flag kernel has no dependency, the deadline is
// three orders of magnitude above its latency, and each flag word carries the
// step number, so a late write from an earlier step never counts.
void mappedFlagDeadline() {
  constexpr int kSlots = 64;
  cudaStream_t M = nonBlockingStream(), S = nonBlockingStream();
  Mapped flags = mappedBuffer(kSlots, 0);
  uint32_t *a = deviceBuffer(13301), *b = deviceBuffer(13302), *c = deviceBuffer(13303);
  preload(signalFlag);
  preload(mix);
  signalFlag<<<1, 1, 0, S>>>(flags.dev + kSlots - 1, 0u);  // first launch out of the loop
  CKL();
  CK(cudaDeviceSynchronize());
  Digest seen;
  int late = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const int slot = i % kSlots;
    mix<<<kGrid, kBlock, 0, M>>>(a, b, kN, u);
    signalFlag<<<1, 1, 0, S>>>(flags.dev + slot, uint32_t(i) + 1);
    mix<<<kGrid, kBlock, 0, M>>>(b, a, kN, u + 1);
    CKL();
    const volatile uint32_t* f = flags.host + slot;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3);
    bool got = false;
    while (!(got = *f == uint32_t(i) + 1) && std::chrono::steady_clock::now() < until) {
    }
    seen.add(uint64_t(got));
    late += !got;
    mix<<<kGrid, kBlock, 0, M>>>(c, b, kN, got ? u + 2 : u + 7);
    mix<<<kGrid, kBlock, 0, M>>>(a, c, kN, u + 3);
    CKL();
    CK(cudaStreamSynchronize(M));
    CK(cudaStreamSynchronize(S));
    if (at(i)) {
      std::printf("step %d: late %d\n", i, late);
      print("seen", i, seen.h);
      print("abc", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", late, deviceDigest(c, kN * 4) ^ hostDigest(flags.host, kSlots * 4));
}

// ---------------------------------------------------------------- launch_blocking_env

constexpr int kChildN = 4096;

// Waits (up to maxCycles) for the host to set *flag: 1 if it timed out (the
// launch blocked the host until the kernel ended), 2 if the flag came.
__global__ void blockProbe(const volatile uint32_t* flag, uint32_t* out, long long maxCycles) {
  const long long t0 = clock64();
  uint32_t r = 2;
  while (*flag == 0u) {
    if (clock64() - t0 > maxCycles) {
      r = 1;
      break;
    }
  }
  *reinterpret_cast<volatile uint32_t*>(out) = r;
  __threadfence_system();
}

__global__ void chainIn(uint32_t* dst, const uint32_t* src, const uint32_t* in, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(src[(k * 7 + 3) % n], 5) ^ (in[k] + salt);
}
__global__ void chainMid(uint32_t* dst, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = hash32(src[(k * 13 + 1) % n] + salt) ^ dst[k];
}
__global__ void chainOut(uint32_t* out, const uint32_t* src, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) out[k] = src[k] * 2654435761u + salt;
  __threadfence_system();
}

// The child: `VALUE:ITERS`. VALUE "unset" leaves CUDA_LAUNCH_BLOCKING out of
// the environment; "lateX" sets it to X after the driver was initialized
// (cudaGetDeviceCount) and before the context is made; anything else sets it
// before any CUDA call.
int blockingChild(const char* arg) {
  const std::string all(arg);
  const size_t colon = all.rfind(':');
  if (colon == std::string::npos) return 2;
  const std::string value = all.substr(0, colon);
  g_iters = std::max(10, std::atoi(all.substr(colon + 1).c_str()));
  const bool late = value.rfind("late", 0) == 0;
  const std::string v = late ? value.substr(4) : value;
  if (value == "unset") unsetenv("CUDA_LAUNCH_BLOCKING");
  else if (!late) setenv("CUDA_LAUNCH_BLOCKING", v.c_str(), 1);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  if (late) setenv("CUDA_LAUNCH_BLOCKING", v.c_str(), 1);
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));  // the context
  cudaStream_t s = nonBlockingStream();
  Mapped probe = mappedBuffer(4, 0);
  preload(blockProbe);
  // Warm-up: the flag is set already.
  probe.host[0] = 1;
  blockProbe<<<1, 1, 0, s>>>(probe.dev, probe.dev + 1, 400000000LL);
  CKL();
  CK(cudaStreamSynchronize(s));
  probe.host[0] = 0;
  probe.host[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  blockProbe<<<1, 1, 0, s>>>(probe.dev, probe.dev + 1, 400000000LL);  // about 0.2 s
  CKL();
  *reinterpret_cast<volatile uint32_t*>(probe.host) = 1;  // once the launch returned
  CK(cudaStreamSynchronize(s));
  const bool blocked = *reinterpret_cast<volatile uint32_t*>(probe.host + 1) == 1;
  std::printf("blocked %d\n", int(blocked));
  Mapped in = mappedBuffer(kChildN, 13401), out = mappedBuffer(kChildN, 13402);
  uint32_t *st0 = deviceBuffer(13403, kChildN), *st1 = deviceBuffer(13404, kChildN);
  Digest seen;
  const int grid = kChildN / kBlock;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    chainIn<<<grid, kBlock, 0, s>>>(st0, st1, in.dev, kChildN, u);
    chainMid<<<grid, kBlock, 0, s>>>(st1, st0, kChildN, u + 1);
    chainMid<<<grid, kBlock, 0, s>>>(st0, st1, kChildN, u + 2);
    chainOut<<<grid, kBlock, 0, s>>>(out.dev, st0, kChildN, u + 3);
    CKL();
    // Where launches block, the last one returned after its kernel ran.
    if (!blocked) CK(cudaStreamSynchronize(s));
    const volatile uint32_t* o = out.host;
    uint32_t fold = 0;
    for (int k = 0; k < kChildN; ++k) fold = rotl(fold, 1) ^ o[k];
    seen.add(fold);
    for (int k = 0; k < kChildN; ++k) in.host[k] = hash32(fold + uint32_t(k) * 2654435761u);
    if (at(i)) print("seen", i, seen.h);
  }
  CK(cudaStreamSynchronize(s));
  print("state", 0, deviceDigest(st0, kChildN * 4) ^ deviceDigest(st1, kChildN * 4));
  std::fflush(stdout);
  return 0;
}

// What a tool could get wrong: see the header. Each child's output (whether
// launches blocked, then the digests of what the host read) is printed whole.
// Eagerly deterministic: whether launches block is measured with a 0.2 s
// margin; where they block the host reads only after the launch returned,
// elsewhere after a synchronize.
void launchBlockingEnv() {
  const char* const variants[] = {"unset", "0", "1", "2", "01", "true", "late1"};
  const int iters = std::min(g_iters, 200);
  for (const char* v : variants) {
    const std::string arg = std::string(v) + ":" + std::to_string(iters);
    const ChildRun r = runSelfInChild("traps_r13", "--probe-blocking", arg.c_str());
    std::printf("CUDA_LAUNCH_BLOCKING %s: %s\n", v, r.text.c_str());
  }
}

// ---------------------------------------------------------------- device_heap_handoff

constexpr int kHeapSlots = 512;
__device__ uint32_t* g_heapPtr[kHeapSlots];
__device__ uint32_t g_heapLen[kHeapSlots];
__device__ unsigned long long g_heapStats[3];  // allocations, frees, failures

// Fills the empty slots (most of them) with a new block from the device heap.
__global__ void heapAlloc(const uint32_t* src, int n, uint32_t step) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= kHeapSlots || g_heapPtr[t]) return;
  const uint32_t h = hash32(uint32_t(t) * 0x9e3779b9u + step * 0x85ebca6bu);
  if (h % 5 == 0) return;  // stays empty this step
  const uint32_t len = 8 + h % 249;
  auto* p = static_cast<uint32_t*>(malloc(len * sizeof(uint32_t)));
  if (!p) {
    atomicAdd(&g_heapStats[2], 1ull);
    return;
  }
  for (uint32_t k = 0; k < len; ++k) p[k] = hash32(src[(uint32_t(t) * 31u + k) % uint32_t(n)] ^ (step + k));
  g_heapLen[t] = len;
  g_heapPtr[t] = p;
  atomicAdd(&g_heapStats[0], 1ull);
}

// Reads and rewrites every live block in place.
__global__ void heapUse(uint32_t* acc, uint32_t step) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= kHeapSlots) return;
  uint32_t* p = g_heapPtr[t];
  if (!p) return;
  uint32_t f = step;
  for (uint32_t k = 0; k < g_heapLen[t]; ++k) {
    f = rotl(f, 5) ^ p[k];
    p[k] += f;
  }
  acc[t] = rotl(acc[t], 3) + f;
}

// Frees about a third of the live blocks (all of them with `all`).
__global__ void heapFree(uint32_t* acc, uint32_t step, int all) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= kHeapSlots) return;
  uint32_t* p = g_heapPtr[t];
  if (!p) return;
  if (!all && hash32(uint32_t(t) * 977u + step * 31u) % 3 != 0) return;
  uint32_t f = 0;
  for (uint32_t k = 0; k < g_heapLen[t]; ++k) f = f * 31u + p[k];
  acc[kHeapSlots + t] ^= f + step;
  free(p);
  g_heapPtr[t] = nullptr;
  g_heapLen[t] = 0;
  atomicAdd(&g_heapStats[1], 1ull);
}

void printHeapStats(const char* what, int i) {
  unsigned long long stats[3] = {0, 0, 0};
  CK(cudaMemcpyFromSymbol(stats, g_heapStats, sizeof stats));
  std::printf("%s %d: allocations %llu frees %llu failures %llu\n", what, i, stats[0], stats[1], stats[2]);
}

// What a tool could get wrong: see the header.
// Eagerly deterministic: a slot's pointer and length are written by the
// allocating thread on stream A and read by the same thread index on B and C,
// each after an event on the stream before; A waits for C's previous record;
// the heap is large enough that no allocation fails (failures are counted);
// nothing depends on the addresses malloc returns.
void deviceHeapHandoff() {
  const cudaError_t set = keep(cudaDeviceSetLimit(cudaLimitMallocHeapSize, size_t(32) << 20));
  size_t heap = 0;
  CK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
  std::printf("heap limit: set %s, %zu MiB\n", cudaGetErrorName(set), heap >> 20);
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream(), C = nonBlockingStream();
  cudaEvent_t eA = untimedEvent(), eB = untimedEvent(), eC = untimedEvent();
  uint32_t *src = deviceBuffer(13501), *other = deviceBuffer(13502), *acc = zeroBuffer(2 * kHeapSlots);
  const int grid = kHeapSlots / 128;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i);
    CK(cudaStreamWaitEvent(A, eC, 0));  // step 0: an event never recorded (no-op)
    mix<<<kGrid, kBlock, 0, A>>>(src, other, kN, u);
    heapAlloc<<<grid, 128, 0, A>>>(src, kN, u);
    CKL();
    CK(cudaEventRecord(eA, A));
    CK(cudaStreamWaitEvent(B, eA, 0));
    heapUse<<<grid, 128, 0, B>>>(acc, u);
    CKL();
    CK(cudaEventRecord(eB, B));
    CK(cudaStreamWaitEvent(C, eB, 0));
    heapFree<<<grid, 128, 0, C>>>(acc, u, 0);
    CKL();
    CK(cudaEventRecord(eC, C));
    if (at(i)) {
      CK(cudaStreamSynchronize(C));  // C's record follows all three streams' work
      printHeapStats("step", i);
      print("acc", i, deviceDigest(acc, 2 * kHeapSlots * 4));
    }
  }
  CK(cudaStreamSynchronize(C));
  heapFree<<<grid, 128, 0, C>>>(acc, uint32_t(g_iters), 1);
  CKL();
  CK(cudaStreamSynchronize(C));
  printHeapStats("end", g_iters);
  print("end", 0, deviceDigest(acc, 2 * kHeapSlots * 4) ^ deviceDigest(src, kN * 4));
}

// ---------------------------------------------------------------- runtime_library_reload

// Generated by nvcc -ptx -rdc=true -arch=sm_90 from (variant A):
//   extern "C" { __device__ unsigned int libTable[64]; }
//   extern "C" { __managed__ unsigned int libRuns[4]; }
//   extern "C" __global__ void libStep(unsigned* dst, const unsigned* src, int n, unsigned v) {
//     int k = blockIdx.x * blockDim.x + threadIdx.x;
//     if (k < n) dst[k] = ((dst[k] << 3) | (dst[k] >> 29)) + (src[(k * 11 + 5) % n] ^ libTable[k & 63]) + v;
//     if (k == 0) atomicAdd(&libRuns[0], 1u);
//   }
const char* const kLibAPtx = R"PTX(.version 9.0
.target sm_90
.address_size 64

.visible .global .align 4 .b8 libTable[256];
.visible .global .attribute(.managed) .align 4 .b8 libRuns[16];

.visible .entry libStep(
	.param .u64 libStep_param_0,
	.param .u64 libStep_param_1,
	.param .u32 libStep_param_2,
	.param .u32 libStep_param_3
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<18>;
	.reg .b64 	%rd<14>;
	ld.param.u64 	%rd1, [libStep_param_0];
	ld.param.u64 	%rd2, [libStep_param_1];
	ld.param.u32 	%r2, [libStep_param_2];
	ld.param.u32 	%r3, [libStep_param_3];
	mov.u32 	%r4, %ctaid.x;
	mov.u32 	%r5, %ntid.x;
	mov.u32 	%r6, %tid.x;
	mad.lo.s32 	%r1, %r4, %r5, %r6;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd1;
	mul.wide.s32 	%rd4, %r1, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.u32 	%r7, [%rd5];
	shf.l.wrap.b32 	%r8, %r7, %r7, 3;
	mad.lo.s32 	%r9, %r1, 11, 5;
	rem.s32 	%r10, %r9, %r2;
	cvta.to.global.u64 	%rd6, %rd2;
	mul.wide.s32 	%rd7, %r10, 4;
	add.s64 	%rd8, %rd6, %rd7;
	shl.b32 	%r11, %r1, 2;
	cvt.u64.u32 	%rd9, %r11;
	and.b64  	%rd10, %rd9, 252;
	mov.u64 	%rd11, libTable;
	add.s64 	%rd12, %rd11, %rd10;
	ld.global.u32 	%r12, [%rd12];
	ld.global.u32 	%r13, [%rd8];
	xor.b32  	%r14, %r12, %r13;
	add.s32 	%r15, %r8, %r3;
	add.s32 	%r16, %r15, %r14;
	st.global.u32 	[%rd5], %r16;
$L__BB0_2:
	setp.ne.s32 	%p2, %r1, 0;
	@%p2 bra 	$L__BB0_4;
	mov.u64 	%rd13, libRuns;
	atom.global.add.u32 	%r17, [%rd13], 1;
$L__BB0_4:
	ret;
}
)PTX";

// Variant B: the same names, the last parameter 64 bits wide:
//   extern "C" __global__ void libStep(unsigned* dst, const unsigned* src, int n, unsigned long long v) {
//     int k = blockIdx.x * blockDim.x + threadIdx.x;
//     if (k < n) dst[k] = ((dst[k] << 7) | (dst[k] >> 25)) ^ (src[(k * 13 + 3) % n] + libTable[(k * 5) & 63] +
//                                                             (unsigned)(v >> 32) * 3u + (unsigned)v);
//     if (k == 0) atomicAdd(&libRuns[1], 1u);
//   }
const char* const kLibBPtx = R"PTX(.version 9.0
.target sm_90
.address_size 64

.visible .global .align 4 .b8 libTable[256];
.visible .global .attribute(.managed) .align 4 .b8 libRuns[16];

.visible .entry libStep(
	.param .u64 libStep_param_0,
	.param .u64 libStep_param_1,
	.param .u32 libStep_param_2,
	.param .u64 libStep_param_3
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<20>;
	.reg .b64 	%rd<17>;
	ld.param.u64 	%rd1, [libStep_param_0];
	ld.param.u64 	%rd2, [libStep_param_1];
	ld.param.u32 	%r2, [libStep_param_2];
	ld.param.u64 	%rd3, [libStep_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.u32 	%r6, [%rd6];
	shf.l.wrap.b32 	%r7, %r6, %r6, 7;
	mad.lo.s32 	%r8, %r1, 13, 3;
	rem.s32 	%r9, %r8, %r2;
	cvta.to.global.u64 	%rd7, %rd2;
	mul.wide.s32 	%rd8, %r9, 4;
	add.s64 	%rd9, %rd7, %rd8;
	mul.lo.s32 	%r10, %r1, 20;
	cvt.u64.u32 	%rd10, %r10;
	and.b64  	%rd11, %rd10, 252;
	mov.u64 	%rd12, libTable;
	add.s64 	%rd13, %rd12, %rd11;
	shr.u64 	%rd14, %rd3, 32;
	cvt.u32.u64 	%r11, %rd14;
	cvt.u32.u64 	%r12, %rd3;
	mad.lo.s32 	%r13, %r11, 3, %r12;
	ld.global.u32 	%r14, [%rd9];
	add.s32 	%r15, %r13, %r14;
	ld.global.u32 	%r16, [%rd13];
	add.s32 	%r17, %r15, %r16;
	xor.b32  	%r18, %r17, %r7;
	st.global.u32 	[%rd6], %r18;
$L__BB0_2:
	setp.ne.s32 	%p2, %r1, 0;
	@%p2 bra 	$L__BB0_4;
	mov.u64 	%rd15, libRuns;
	add.s64 	%rd16, %rd15, 4;
	atom.global.add.u32 	%r19, [%rd16], 1;
$L__BB0_4:
	ret;
}
)PTX";

struct RuntimeLibrary {
  cudaLibrary_t lib = nullptr;
  cudaKernel_t kernel = nullptr;
  uint32_t* table = nullptr;  // 64 words, device memory
  uint32_t* runs = nullptr;   // 4 words, managed memory
  int variant = 0;

  void load(int round) {
    variant = round % 2;
    CK(cudaLibraryLoadData(&lib, variant ? kLibBPtx : kLibAPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CK(cudaLibraryGetKernel(&kernel, lib, "libStep"));
    size_t tableBytes = 0, runsBytes = 0;
    CK(cudaLibraryGetGlobal(reinterpret_cast<void**>(&table), &tableBytes, lib, "libTable"));
    CK(cudaLibraryGetManaged(reinterpret_cast<void**>(&runs), &runsBytes, lib, "libRuns"));
    unsigned count = 0;
    CK(cudaLibraryGetKernelCount(&count, lib));
    std::printf("round %d: variant %c, %u kernel, table %zu bytes, counter %zu bytes\n", round, variant ? 'B' : 'A',
                count, tableBytes, runsBytes);
  }
};

// What a tool could get wrong: see the header.
// Eagerly deterministic: one stream; the library is unloaded only after a
// device synchronize, and its managed counter is read by the host then.
void runtimeLibraryReload() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *dst = deviceBuffer(13601), *src = deviceBuffer(13602), *table = deviceBuffer(13603, 1024);
  RuntimeLibrary L;
  int round = 0;
  L.load(round);
  Digest codes;
  for (int i = 0; i < g_iters; ++i) {
    if (i > 0 && i % 60 == 0) {
      CK(cudaDeviceSynchronize());
      std::printf("round %d: runs %u %u\n", round, L.runs[0], L.runs[1]);  // managed, read by the host
      CK(cudaLibraryUnload(L.lib));
      L.load(++round);
    }
    const uint32_t u = uint32_t(i);
    // The library's table, from a device copy at a moving offset.
    const int off = (i % 7) * 8;
    CK(cudaMemcpyAsync(L.table + off, table + (i * 13) % 960, size_t(64 - off) * 4, cudaMemcpyDeviceToDevice, s));
    mix<<<kGrid, kBlock, 0, s>>>(src, dst, kN, u);
    CKL();
    int n = kN;
    uint32_t v32 = u * 2654435761u;
    unsigned long long v64 = (static_cast<unsigned long long>(u + 1) << 32) | v32;
    void* args32[] = {&dst, &src, &n, &v32};
    void* args64[] = {&dst, &src, &n, &v64};
    void** args = L.variant ? args64 : args32;
    switch (i % 3) {
      case 0:
        addCode(codes, int(keep(cudaLaunchKernel(reinterpret_cast<const void*>(L.kernel), dim3(kGrid), dim3(kBlock),
                                                  args, 0, s))));
        break;
      case 1: {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(kGrid);
        cfg.blockDim = dim3(kBlock);
        cfg.stream = s;
        addCode(codes, int(keep(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(L.kernel), args))));
        break;
      }
      default:
        addCode(codes, int(cuLaunchKernel(reinterpret_cast<CUfunction>(L.kernel), kGrid, 1, 1, kBlock, 1, 1, 0,
                                          reinterpret_cast<CUstream>(s), args, nullptr)));
        break;
    }
    mix<<<1024 / kBlock, kBlock, 0, s>>>(table, dst, 1024, u + 1);
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      print("dst", i, deviceDigest(dst, kN * 4) ^ deviceDigest(table, 1024 * 4));
      print("codes", i, codes.h);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("round %d: runs %u %u\n", round, L.runs[0], L.runs[1]);
  print("end", 0, deviceDigest(dst, kN * 4) ^ deviceDigest(src, kN * 4) ^ deviceDigest(L.table, 256));
  CK(cudaLibraryUnload(L.lib));
}

// ---------------------------------------------------------------- relaxed_capture_span

// What a tool could get wrong: see the header.
// Eagerly deterministic: the captured stream is non-blocking, so the loop's
// legacy-stream copies and synchronizes of other streams neither join nor
// break the capture (relaxed mode allows them); the captured kernels touch
// only buffers the loop never touches, and run only when the graph is
// launched; the loop's three streams are ordered by their events.
void relaxedCaptureSpan() {
  cudaStream_t Y = nonBlockingStream(), Z = nonBlockingStream(), X = nonBlockingStream();
  cudaEvent_t eY = untimedEvent(), eZ = untimedEvent();
  uint32_t *a = deviceBuffer(13701), *b = deviceBuffer(13702), *c = deviceBuffer(13703);
  uint32_t *snap0 = deviceBuffer(13704), *snap1 = deviceBuffer(13705);
  int end = std::min(g_iters / 2 + 7, g_iters - 2);
  int begin = std::min(g_iters / 4 + 3, end - 1);
  begin = std::max(begin, 0);
  Digest states;
  int captured = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    if (i == begin) CK(cudaStreamBeginCapture(X, cudaStreamCaptureModeRelaxed));
    mix<<<kGrid, kBlock, 0, Y>>>(a, b, kN, u);
    mix<<<kGrid, kBlock, 0, Y>>>(b, a, kN, u + 1);
    CKL();
    CK(cudaEventRecord(eY, Y));
    CK(cudaStreamWaitEvent(Z, eY, 0));
    mix<<<kGrid, kBlock, 0, Z>>>(c, a, kN, u + 2);
    CKL();
    CK(cudaEventRecord(eZ, Z));
    CK(cudaStreamWaitEvent(Y, eZ, 0));
    mix2<<<kGrid, kBlock, 0, Y>>>(a, b, c, kN, u + 3);
    CKL();
    if (i >= begin && i < end) {
      // Into the capture: nothing runs now.
      mix<<<kGrid, kBlock, 0, X>>>(snap0, snap1, kN, u * 7u);
      if (i % 5 == 0) CK(cudaMemsetAsync(snap1 + (i % 13) * 64, i & 0xff, 1024, X));
      mix<<<kGrid, kBlock, 0, X>>>(snap1, snap0, kN, u * 7u + 1);
      CKL();
      ++captured;
    }
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    CK(cudaStreamIsCapturing(X, &st));
    states.add(uint64_t(st));
    if (st == cudaStreamCaptureStatusActive) {
      cudaStreamCaptureStatus st2 = cudaStreamCaptureStatusNone;
      size_t deps = 0;
      CK(cudaStreamGetCaptureInfo(X, &st2, nullptr, nullptr, nullptr, nullptr, &deps));
      states.add(uint64_t(st2) * 1000u + deps);
    }
    if (i == end) {
      cudaGraph_t graph = nullptr;
      CK(cudaStreamEndCapture(X, &graph));
      size_t nodes = 0;
      CK(cudaGraphGetNodes(graph, nullptr, &nodes));
      std::printf("step %d: captured %d steps, %zu nodes\n", i, captured, nodes);
      cudaGraphExec_t exec = nullptr;
      CK(cudaGraphInstantiate(&exec, graph, 0));
      for (int r = 0; r < 3; ++r) CK(cudaGraphLaunch(exec, Y));
      CK(cudaStreamSynchronize(Y));
      print("snap", i, deviceDigest(snap0, kN * 4) ^ deviceDigest(snap1, kN * 4));
      CK(cudaGraphExecDestroy(exec));
      CK(cudaGraphDestroy(graph));
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(Y));  // Y waited for Z's record
      print("abc", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
      print("states", i, states.h);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", captured, deviceDigest(a, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(snap1, kN * 4));
}

// ---------------------------------------------------------------- gridid_sequence

__device__ __forceinline__ unsigned long long sregGridId() {
  unsigned long long r;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(r));
  return r;
}
__global__ void idLog(unsigned long long* log, int slot) {
  if (threadIdx.x == 0 && blockIdx.x == 0) log[slot] = sregGridId();
}

// What a tool could get wrong: see the header.
// Eagerly deterministic (as far as the driver numbers grids in launch order):
// one stream, the same launches, memset and copy every step; only
// differences of ids are digested.
void gridIdSequence() {
  constexpr int kPer = 5;
  cudaStream_t s = nonBlockingStream();
  unsigned long long* log = nullptr;
  CK(cudaMalloc(&log, size_t(g_iters) * kPer * sizeof(unsigned long long)));
  CK(cudaMemset(log, 0, size_t(g_iters) * kPer * sizeof(unsigned long long)));
  uint32_t *a = deviceBuffer(13801), *b = deviceBuffer(13802), *c = deviceBuffer(13803);
  preload(idLog);
  preload(mix);
  Digest deltas;
  int folded = 0;  // steps digested so far
  unsigned long long prevLast = 0;
  int increasing = 1;
  std::vector<unsigned long long> h;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    const int base = i * kPer;
    idLog<<<1, 32, 0, s>>>(log, base);
    mix<<<kGrid, kBlock, 0, s>>>(a, b, kN, u);
    idLog<<<1, 32, 0, s>>>(log, base + 1);
    CK(cudaMemsetAsync(b + (i % 7) * 256, i & 0xff, 4096, s));
    idLog<<<1, 32, 0, s>>>(log, base + 2);
    CK(cudaMemcpyAsync(c + (i % 5) * 64, a + (i % 3) * 128, 8192, cudaMemcpyDeviceToDevice, s));
    idLog<<<1, 32, 0, s>>>(log, base + 3);
    mix<<<kGrid, kBlock, 0, s>>>(b, c, kN, u + 1);
    idLog<<<1, 32, 0, s>>>(log, base + 4);
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(s));
      const int steps = i + 1 - folded;
      h.resize(size_t(steps) * kPer);
      CK(cudaMemcpy(h.data(), log + size_t(folded) * kPer, h.size() * sizeof(unsigned long long),
                    cudaMemcpyDeviceToHost));
      for (int j = 0; j < steps; ++j) {
        for (int k = 0; k < kPer; ++k) {
          const unsigned long long id = h[size_t(j) * kPer + k];
          if (folded + j > 0 || k > 0) {
            const unsigned long long prev = k > 0 ? h[size_t(j) * kPer + k - 1] : prevLast;
            deltas.add(id - prev);
            increasing &= id > prev;
          }
        }
        prevLast = h[size_t(j) * kPer + kPer - 1];
      }
      if (folded == 0)
        std::printf("step 0: deltas %lld %lld %lld %lld\n", static_cast<long long>(h[1] - h[0]),
                    static_cast<long long>(h[2] - h[1]), static_cast<long long>(h[3] - h[2]),
                    static_cast<long long>(h[4] - h[3]));
      folded = i + 1;
      std::printf("step %d: increasing %d\n", i, increasing);
      print("deltas", i, deltas.h);
      print("ab", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
    }
  }
  CK(cudaStreamSynchronize(s));
  print("end", increasing, deltas.h ^ deviceDigest(c, kN * 4));
}

// ---------------------------------------------------------------- ptsz_null_mix

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);
using MemsetD32AsyncFn = CUresult (*)(CUdeviceptr, unsigned int, size_t, CUstream);
using EventRecordFn = CUresult (*)(CUevent, CUstream);
using StreamWaitEventFn = CUresult (*)(CUstream, CUevent, unsigned int);
using StreamFn = CUresult (*)(CUstream);
using MemcpyDtoHFn = CUresult (*)(void*, CUdeviceptr, size_t);

// A driver function as the runtime hands it out with these flags.
template <typename F>
F driverEntry(const char* name, unsigned long long flags) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  CK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, flags, &q));
  if (!fn || q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "traps: no driver entry point %s (%d)\n", name, int(q));
    std::exit(1);
  }
  return reinterpret_cast<F>(fn);
}

// What a tool could get wrong: see the header.
// Eagerly deterministic: the per-thread stream and the legacy stream order
// against each other (each op of one waits for the other's earlier work);
// the blocking stream S reads what the per-thread stream wrote only after a
// legacy op issued after it; N reads after the per-thread stream's record;
// the per-thread stream waits for S's and N's records of the step before
// before it writes what they read.
void ptszNullMix() {
  const unsigned long long pt = cudaEnablePerThreadDefaultStream;
  const auto ptLaunch = driverEntry<LaunchFn>("cuLaunchKernel", pt);
  const auto ptMemset = driverEntry<MemsetD32AsyncFn>("cuMemsetD32Async", pt);
  const auto ptRecord = driverEntry<EventRecordFn>("cuEventRecord", pt);
  const auto ptWait = driverEntry<StreamWaitEventFn>("cuStreamWaitEvent", pt);
  const auto ptQuery = driverEntry<StreamFn>("cuStreamQuery", pt);
  const auto ptSync = driverEntry<StreamFn>("cuStreamSynchronize", pt);
  const auto ptDtoH = driverEntry<MemcpyDtoHFn>("cuMemcpyDtoH", pt);
  CUfunction fMix = nullptr, fMix2 = nullptr;
  CK(cudaGetFuncBySymbol(&fMix, reinterpret_cast<const void*>(mix)));
  CK(cudaGetFuncBySymbol(&fMix2, reinterpret_cast<const void*>(mix2)));
  cudaStream_t S = blockingStream(), N = nonBlockingStream();
  cudaEvent_t ev = untimedEvent(), eS = untimedEvent(), eN = untimedEvent();
  auto* cev = reinterpret_cast<CUevent>(ev);
  uint32_t *a = deviceBuffer(13901), *b = deviceBuffer(13902), *c = deviceBuffer(13903), *d = deviceBuffer(13904);
  uint32_t *e = deviceBuffer(13905), *f = deviceBuffer(13906);
  Digest reads;
  int n = kN;
  for (int i = 0; i < g_iters; ++i) {
    uint32_t u = uint32_t(i) * 8u;
    // The per-thread stream waits for the readers of the step before (never recorded at step 0: no-ops).
    CKD(ptWait(nullptr, reinterpret_cast<CUevent>(eS), 0));
    CKD(ptWait(nullptr, reinterpret_cast<CUevent>(eN), 0));
    {
      uint32_t* dst = a;
      const uint32_t* src = b;
      void* args[] = {&dst, &src, &n, &u};
      CKD(ptLaunch(fMix, kGrid, 1, 1, kBlock, 1, 1, 0, nullptr, args, nullptr));  // per-thread stream
    }
    CKD(ptMemset(reinterpret_cast<CUdeviceptr>(c + (i % 9) * 512), u * 2654435761u, 1000, nullptr));
    {
      uint32_t* dst = b;
      const uint32_t* src = a;
      uint32_t salt = u + 1;
      void* args[] = {&dst, &src, &n, &salt};
      CKD(cuLaunchKernel(fMix, kGrid, 1, 1, kBlock, 1, 1, 0, nullptr, args, nullptr));  // legacy stream
    }
    {
      uint32_t* dst = c;
      const uint32_t* x = a;
      const uint32_t* y = b;
      uint32_t salt = u + 2;
      void* args[] = {&dst, &x, &y, &n, &salt};
      CKD(ptLaunch(fMix2, kGrid, 1, 1, kBlock, 1, 1, 0, nullptr, args, nullptr));  // per-thread: after the legacy mix
    }
    CKD(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(e + (i % 5) * 64), static_cast<unsigned char>(i), 256,
                        nullptr));  // legacy: after the per-thread mix2
    mix<<<kGrid, kBlock, 0, S>>>(d, c, kN, u + 3);  // blocking: after the legacy memset, so after mix2
    CKL();
    CK(cudaEventRecord(eS, S));
    CKD(ptRecord(cev, nullptr));  // per-thread
    CK(cudaStreamWaitEvent(N, ev, 0));
    mix<<<kGrid, kBlock, 0, N>>>(f, a, kN, u + 4);
    CKL();
    CK(cudaEventRecord(eN, N));
    if (i % 5 == 4) {
      uint32_t v[16];
      CKD(ptDtoH(v, reinterpret_cast<CUdeviceptr>(c + (i * 37) % (kN - 16)), sizeof v));  // per-thread, synchronous
      reads.add(v, sizeof v);
    }
    if (i % 3 == 2) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      CUresult r;
      while ((r = ptQuery(nullptr)) == CUDA_ERROR_NOT_READY && std::chrono::steady_clock::now() < until) {
      }
      if (r != CUDA_SUCCESS) {
        std::printf("FAIL per-thread stream query at step %d: %d\n", i, int(r));
        std::exit(1);
      }
    }
    if (i % 7 == 6) CKD(ptSync(nullptr));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      print("reads", i, reads.h);
      print("abc", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(c, kN * 4));
      print("def", i, deviceDigest(d, kN * 4) ^ deviceDigest(e, kN * 4) ^ deviceDigest(f, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4) ^ deviceDigest(f, kN * 4) ^ reads.h);
}

// ---------------------------------------------------------------- helper_polls_held

// What a tool could get wrong: see the header.
// Eagerly deterministic: the event's record follows only a one-warp kernel on
// an otherwise idle stream, issued a millisecond before the helper asks; the
// main thread makes no CUDA call while the helper asks; the main stream reads
// the slot after waiting on the event, and the slot is written again only
// after the step's host synchronize.
void helperPollsHeld() {
  cudaStream_t M = nonBlockingStream(), S = nonBlockingStream();
  cudaEvent_t e = untimedEvent();
  uint32_t *a = deviceBuffer(14001), *b = deviceBuffer(14002), *slot = zeroBuffer(32), *seed = deviceBuffer(14003, 64);
  preload(tinyWrite);
  preload(foldSlot);
  preload(mix);
  std::atomic<int> go{0}, done{0};
  std::atomic<bool> quit{false};
  int seenEvent = 0, seenStream = 0;  // written by the helper before `done`
  std::thread helper([&] {
    CK(cudaSetDevice(0));
    for (int k = 1;; ++k) {
      while (go.load(std::memory_order_acquire) < k) {
        if (quit.load(std::memory_order_acquire)) return;
        std::this_thread::yield();
      }
      spinHostUs(1000);
      const cudaError_t r = cudaEventQuery(e);
      if (r == cudaErrorNotReady) CK(cudaEventSynchronize(e));  // never eagerly
      const cudaError_t rs = cudaStreamQuery(S);
      cudaGetLastError();
      seenEvent = int(r);
      seenStream = int(rs);
      done.store(k, std::memory_order_release);
    }
  });
  Digest answers;
  int ready = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    mix<<<kGrid, kBlock, 0, M>>>(a, b, kN, u);
    tinyWrite<<<1, 32, 0, S>>>(slot, seed, u);
    CKL();
    CK(cudaEventRecord(e, S));
    mix<<<kGrid, kBlock, 0, M>>>(b, a, kN, u + 1);
    CKL();
    go.store(i + 1, std::memory_order_release);
    while (done.load(std::memory_order_acquire) < i + 1) std::this_thread::yield();
    addCode(answers, seenEvent);
    addCode(answers, seenStream);
    ready += seenEvent == int(cudaSuccess);
    CK(cudaStreamWaitEvent(M, e, 0));
    foldSlot<<<kGrid, kBlock, 0, M>>>(a, slot, kN, seenEvent == int(cudaSuccess) ? u + 2 : u + 9);
    CKL();
    CK(cudaStreamSynchronize(M));
    if (at(i)) {
      std::printf("step %d: ready %d\n", i, ready);
      print("answers", i, answers.h);
      print("ab", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
    }
  }
  quit.store(true, std::memory_order_release);
  helper.join();
  CK(cudaDeviceSynchronize());
  print("end", ready, deviceDigest(a, kN * 4) ^ answers.h);
}

// ---------------------------------------------------------------- feed_until_idle

// A loop that feeds what it waits for (added after r13, for the livelock the
// simulator's sim_review13b_legacy found): each step does the repeating work
// on M, then asks whether a target is idle and, while it answers "not
// ready", launches one more one-warp kernel there (the same write every
// time) and asks again, for at most 500 ms. The target, by step: a
// non-blocking stream S (its own query), the legacy stream while the kernels
// go to a blocking stream B (the legacy stream's query counts B's work), or an
// event recorded on S after each kernel, or a new event each round, recorded
// on S, the previous round's destroyed (PyTorch makes events per step).
// Eagerly the GPU runs a one-warp
// kernel faster than the host launches the next, so the loop ends within a
// few rounds. What graft may get wrong: every query finds the kernel just
// launched held (no query is a poll: a launch came between), and a tool that
// answers "not ready" for held work every time never lets the loop end.
// Prints whether every loop ended and, on stderr, the most rounds a loop
// took (timing: not compared).
void feedUntilIdle() {
  cudaStream_t M = nonBlockingStream(), S = nonBlockingStream(), B = blockingStream();
  cudaEvent_t e = untimedEvent();
  uint32_t *a = deviceBuffer(15001), *b = deviceBuffer(15002), *slot = zeroBuffer(32), *seed = deviceBuffer(15003, 64);
  preload(tinyWrite);
  preload(foldSlot);
  preload(mix);
  int unfinished = 0, mostRounds[4] = {};
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const int target = i % 4;
    cudaEvent_t fresh = nullptr;  // target 3: this round's event
    auto recordFresh = [&] {
      cudaEvent_t next = untimedEvent();
      CK(cudaEventRecord(next, S));
      if (fresh) CK(cudaEventDestroy(fresh));
      fresh = next;
    };
    cudaStream_t fed = target == 1 ? B : S;
    mix<<<kGrid, kBlock, 0, M>>>(a, b, kN, u);
    mix<<<kGrid, kBlock, 0, M>>>(b, a, kN, u + 1);
    CKL();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    auto ask = [&] {
      if (target == 3) return cudaEventQuery(fresh);
      return target == 2 ? cudaEventQuery(e) : cudaStreamQuery(target == 1 ? cudaStreamLegacy : S);
    };
    tinyWrite<<<1, 32, 0, fed>>>(slot, seed, u);
    CKL();
    if (target == 2) CK(cudaEventRecord(e, S));
    if (target == 3) recordFresh();
    cudaError_t r;
    int rounds = 0;
    while ((r = ask()) == cudaErrorNotReady && std::chrono::steady_clock::now() < deadline) {
      tinyWrite<<<1, 32, 0, fed>>>(slot, seed, u);
      CKL();
      if (target == 2) CK(cudaEventRecord(e, S));
      if (target == 3) recordFresh();
      ++rounds;
    }
    cudaGetLastError();
    if (fresh) CK(cudaEventDestroy(fresh));
    mostRounds[target] = std::max(mostRounds[target], rounds);
    if (r != cudaSuccess) ++unfinished;
    CK(cudaDeviceSynchronize());
    foldSlot<<<kGrid, kBlock, 0, M>>>(a, slot, kN, u + 2);
    CKL();
    if (at(i)) {
      std::printf("step %d: loops that did not end %d\n", i, unfinished);
      CK(cudaStreamSynchronize(M));
      print("a", i, deviceDigest(a, kN * 4) ^ deviceDigest(slot, 32 * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  std::fprintf(stderr, "feed_until_idle: most rounds by target (stream, legacy, event, new event): %d %d %d %d\n",
               mostRounds[0], mostRounds[1], mostRounds[2], mostRounds[3]);
  print("end", unfinished, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4));
}

constexpr Scenario kScenarios[] = {
    {"legacy_query_gate", legacyQueryGate},
    {"launch_blocking_env", launchBlockingEnv},
    {"device_heap_handoff", deviceHeapHandoff},
    {"runtime_library_reload", runtimeLibraryReload},
    {"relaxed_capture_span", relaxedCaptureSpan},
    {"ptsz_null_mix", ptszNullMix},
    {"feed_until_idle", feedUntilIdle},
};
// Run by name only (check_traps.py leaves them out): graft differs from eager
// here by design (README, Limits: work held until its run completes or the
// host goes quiet for GRAFT_IDLE_FLUSH_MS; what a kernel reads of %gridid).
// What each gave on the H100 is in docs/PERF.md (thirty-fifth session).
constexpr Scenario kUnlisted[] = {
    {"idle_record_query", idleRecordQuery},
    {"stream_pool_pick", streamPoolPick},
    {"mapped_flag_deadline", mappedFlagDeadline},
    {"gridid_sequence", gridIdSequence},
    {"helper_polls_held", helperPollsHeld},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--probe-blocking")) return blockingChild(argv[2]);
  return runScenarios(argc, argv, kScenarios, kUnlisted);
}
