// traps_r19 (helper-written): a nineteenth red-team round of odd but legal CUDA C++ patterns in
// the style of traps_r17.cu and traps_r15.cu (trap_common.cuh, trap_helpers.cuh,
// trap_mirror.cuh), aimed at what a tool that holds launches back, captures the
// repeating ones into graphs of its own (device copies and memsets as kernels of
// its own), patches their parameters, defers stream-ordered frees and answers
// some queries itself could get wrong: programmatic dependent launches right
// after ops that are not kernels, events recorded by launch attributes and
// asked about while a gate holds their stream, one event recorded on two
// streams before a third waits on it, memset values wider than a byte and 3-D
// memsets, a stream with held work joining the program's own capture, a launch
// attribute only graphs accept, one host buffer that is pinned and pageable in
// turn, and a caching allocator that reuses device blocks once an event query
// says their last reader finished. Each scenario is deterministic in eager (no
// races: integer kernels, every cross-stream access ordered by a stream, an
// event, the legacy stream's implicit synchronization or a host barrier),
// prints digests of its buffers and of the codes and values the host saw, and
// checks its results against a host mirror of its kernels (a FAIL line and exit
// 1 on a mismatch); check_traps.py requires the same output under graft. A
// scenario whose feature this machine lacks prints a SKIP line and stops.
//
//   pdl_after_copy        launches with programmatic stream serialization
//                         (cudaLaunchKernelEx / cudaLaunchKernelExC, in turn)
//                         right after ops that are not kernels: a device-to-
//                         device cudaMemcpyAsync of one size from a moving offset, a 2-D
//                         device copy, an 8-bit cudaMemsetAsync, a 32-bit
//                         cuMemsetD32Async and a host function that writes
//                         mapped memory; each dependent reads what that op
//                         wrote, and on two steps in three does NOT call
//                         cudaGridDependencySynchronize (a flag parameter):
//                         eagerly an op that is not a kernel is not a primary,
//                         so the launch is fully ordered after it. A plain
//                         kernel and a dependent that waits close the step.
//                         What graft may get wrong: in its graph the copy and
//                         memset are ITS kernels, so the capture turns the
//                         attribute into a programmatic edge from them and the
//                         dependent may start (and read) before their writes
//                         are visible; the wait flag is a patched parameter.
//   attr_event_query_gate every step a host function (a HostGate) blocks stream
//                         S; behind it a kernel records an event through the
//                         cudaLaunchAttributeLaunchCompletionEvent attribute,
//                         through cudaLaunchAttributeProgrammaticEvent
//                         (triggerAtBlockStart alternating), or, the control,
//                         a plain cudaEventRecord before it; stream T waits on
//                         that event and reads what S wrote before the gate.
//                         With the gate still shut the host asks
//                         cudaEventQuery(event), cudaStreamQuery(S) and
//                         cudaStreamQuery(T) (eagerly all cudaErrorNotReady),
//                         then opens the gate, synchronizes the event and asks
//                         again (cudaSuccess). Every code is digested. What
//                         graft may get wrong: an event recorded by a launch
//                         attribute is a record it must see; answering the
//                         query itself as for an event never recorded says
//                         cudaSuccess, and holding the launch past the event
//                         synchronize stalls until the gate times out.
//   event_rerecord_streams  one event recorded on stream A (by cudaEventRecord,
//                         or cudaEventRecordWithFlags with
//                         cudaEventRecordExternal outside any capture, which
//                         the driver refuses: its code digested, a plain
//                         record instead; the same for the external wait), then
//                         recorded again on B (a non-blocking stream,
//                         cudaStreamPerThread or the legacy stream in turn)
//                         after a slow kernel, before C waits on it (with
//                         cudaEventWaitExternal on every 4th step) and reads
//                         only B's buffer; on every 5th step the order is
//                         reversed (B's record first, A's last) and C reads
//                         A's buffer. Every 10 steps the host synchronizes on
//                         the event and reads the buffer of the stream that
//                         recorded it last through a fourth stream with no
//                         other ordering. What graft may get wrong: a wait
//                         binds to the record that came last at the call; held
//                         records reaching the driver in another order than
//                         the calls (per stream) bind it to the other stream.
//   memset_wide_values    cudaMemsetAsync, cudaMemset2DAsync and
//                         cudaMemset3DAsync (a cudaMalloc3D block, the pointer
//                         moved by 0-6 bytes, extents changing with periods 5,
//                         6 and 5) with int values wider than a byte: high bits
//                         set, negative, INT_MIN plus a little, and a plain
//                         byte, of which only the low byte counts; 1-, 2- and
//                         3-byte device copies at odd addresses; zero-size
//                         memsets and copies with null pointers, a 0-wide 2-D
//                         memset and a 0-high 2-D copy, a 0-deep 3-D memset on
//                         irregular steps (their codes digested). What graft
//                         may get wrong: a memset kernel of its own that takes
//                         the whole int (or sign-extends it), 3-D memset rows
//                         and slices (the slice height is the pitched
//                         pointer's ysize, not the extent's), and empty ops
//                         turned into launches of empty grids or refused for
//                         their null pointers.
//   capture_join_held     every step stream Y runs eager kernels (which graft
//                         may hold), then the program captures X (thread-local
//                         and relaxed mode in turn): a memset, a device copy,
//                         an event Y waits on (Y joins the capture with its
//                         eager work still pending), a kernel on Y, a kernel
//                         node the program adds itself to the graph being
//                         captured (cudaStreamGetCaptureInfo, cudaGraphAddKernelNode,
//                         cudaStreamUpdateCaptureDependencies), the join back
//                         and a kernel on X; stream Z runs eager work during
//                         the capture. The captured graph is inspected (node
//                         count and types, edge count, the memset's and copy's
//                         parameters, the kernels' salts), the executable
//                         graph updated from it and launched. What graft may
//                         get wrong: Y's held kernels issued after Y joined
//                         the capture land in the program's graph; copies and
//                         memsets captured as graft's kernels change the node
//                         types; held waits issued into the capture.
//   device_updatable_refused  a launch with
//                         cudaLaunchAttributeDeviceUpdatableKernelNode on a
//                         stream that is not capturing, which the driver
//                         refuses (the attribute is graphs-only): through
//                         cudaLaunchKernelExC, cudaLaunchKernelEx with a
//                         priority, cuLaunchKernelEx and after an ignored entry,
//                         the attribute left out on irregular steps (then it
//                         runs); the runtime's last error read back by
//                         cudaPeekAtLastError after a later plain launch and
//                         cleared by cudaGetLastError. The program's own graph
//                         of one device-updatable node (captured on another
//                         stream) gets its kernel parameters from the host
//                         every step, is uploaded and launched; every 50 steps
//                         cudaGraphExecUpdate and a second instantiation (both
//                         refused for such graphs). A fresh process (the probe)
//                         first makes sure the refusal leaves the context
//                         usable. What graft may get wrong: capturing the launch
//                         into its own graph makes the driver take it (the
//                         stream is capturing then): the kernel runs and the
//                         codes differ; a refusal returned at another call, or
//                         the last error lost or cleared.
//   register_toggle_copies  one malloc'ed host buffer, registered
//                         (cudaHostRegister, mapped) and unregistered in turn
//                         every 10 steps at the same address: each step a
//                         device-to-host copy into it (cudaMemcpyAsync and
//                         cuMemcpyDtoHAsync in turn) that the host reads at
//                         once while it is pageable (the call returns once the
//                         copy completed) and after a stream synchronize while
//                         it is pinned, then a host-to-device copy out of it
//                         that the host scribbles over at once while it is
//                         pageable (the source was staged at the call); while
//                         pinned a kernel also reads it through its device
//                         pointer. What graft may get wrong: what it learned
//                         of an address (pinned, so copies may be held) must
//                         not outlive cudaHostUnregister: a held device-to-host
//                         copy leaves the host reading stale data, a held
//                         host-to-device copy reads the scribbles.
//   record_stream_reuse   a caching allocator of four device blocks as
//                         PyTorch's record_stream makes it: stream A fills a
//                         block and B reads it with a slow kernel, then the
//                         block is "freed" by an event recorded on B; the next
//                         allocation on A takes the first block whose event
//                         cudaEventQuery reports complete (or all of them after
//                         cudaStreamQuery(B) on every 7th step), else
//                         synchronizes on the least recently used one. A never
//                         waits on B. Which block a step gets depends on timing;
//                         the results do not. What graft may get wrong: a query
//                         it answers itself with cudaSuccess while B's read is
//                         held lets A overwrite a block B has not read yet.
//   legacy_launch_state   (added after the round, from a review of settings)
//                         a module function launched by cuLaunchKernel, then
//                         its pre-4.0 launch state set (cuFuncSetBlockShape,
//                         cuParamSetSize, cuParamSetv) and read by
//                         cuLaunchGridAsync after another kernel (a different
//                         one every 7th step). cuda.h: a cuLaunchKernel of the
//                         function invalidates that state. What graft may get
//                         wrong: its held cuLaunchKernel, or one it issues into
//                         a capture of its own, reaches the driver after the
//                         state was set and wipes it.
//
//   traps_r19 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r19 --list               the scenario names
//   traps_r19 --probe-updatable 0  (internal) device_updatable_refused's probe
//
// Built like traps_r17 (-rdc=true -lcudadevrt) and linked to libcuda (-lcuda:
// driver memsets, copies and launches):
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -I tests/gpu -rdc=true -o traps_r19 traps_r19.cu -lcudadevrt -lcuda

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "trap_common.cuh"
#include "trap_helpers.cuh"
#include "trap_mirror.cuh"

namespace {

// ---------------------------------------------------------------- helpers (and trap_helpers.cuh, trap_mirror.cuh)

[[maybe_unused]] int computeMajor() { return deviceAttribute(cudaDevAttrComputeCapabilityMajor); }

// ---------------------------------------------------------------- kernels

// dst mixes with m words of src at other indices; with wait != 0 it first
// waits for the grids it depends on (a no-op without a programmatic launch).
__global__ void pdlRead(uint32_t* dst, int n, const uint32_t* src, int m, uint32_t salt, int wait) {
  if (wait) cudaGridDependencySynchronize();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 7) ^ (src[(k * 13 + 5) % m] + salt + uint32_t(k));
}
void pdlReadHost(std::vector<uint32_t>& dst, const uint32_t* src, int m, uint32_t salt) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k) dst[size_t(k)] = rotl(dst[size_t(k)], 7) ^ (src[(k * 13 + 5) % m] + salt + uint32_t(k));
}

// dst mixes with src after `spin` rounds of hashing whose result goes to sink
// (time spent before the read and the write; no part of dst).
__global__ void spinMix(uint32_t* dst, const uint32_t* src, int n, uint32_t salt, int spin, uint32_t* sink) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  uint32_t x = uint32_t(k) ^ salt;
  for (int j = 0; j < spin; ++j) x = hash32(x + uint32_t(j));
  sink[k] = x;
  dst[k] = rotl(dst[k], 3) + (src[(k * 5 + 1) % n] ^ salt);
}
void spinMixHost(std::vector<uint32_t>& dst, const std::vector<uint32_t>& src, uint32_t salt) {
  const int n = int(dst.size());
  for (int k = 0; k < n; ++k) dst[size_t(k)] = rotl(dst[size_t(k)], 3) + (src[size_t((k * 5 + 1) % n)] ^ salt);
}

// A block of the caching allocator, filled from a and the step.
__global__ void fillBlock(uint32_t* blk, const uint32_t* a, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) blk[k] = a[(k * 7 + 3) % n] ^ hash32(uint32_t(k) + salt);
}
std::vector<uint32_t> fillBlockHost(const std::vector<uint32_t>& a, uint32_t salt) {
  const int n = int(a.size());
  std::vector<uint32_t> blk(a.size());
  for (int k = 0; k < n; ++k) blk[size_t(k)] = a[size_t((k * 7 + 3) % n)] ^ hash32(uint32_t(k) + salt);
  return blk;
}

// ---------------------------------------------------------------- pdl_after_copy

constexpr int kPN = 1 << 16;  // words per buffer in pdl_after_copy
constexpr int kPGrid = kPN / kBlock;

// The host function's state: it writes 64 words of mapped memory from its own
// call count (host functions on one stream run in order).
struct PdlHostWrite {
  uint32_t* words;
  uint32_t calls;
};
void CUDART_CB pdlHostWrite(void* p) {
  auto* w = static_cast<PdlHostWrite*>(p);
  for (uint32_t t = 0; t < 64; ++t) w->words[t] = hash32(w->calls * 64u + t + 0x51u);
  ++w->calls;
}

// What a tool could get wrong: a launch that allows programmatic stream
// serialization overlaps only with the KERNEL before it; after a copy, a
// memset or a host function it is fully ordered, and a dependent that does
// not call cudaGridDependencySynchronize may read what that op wrote. A tool
// whose graph holds the copy or memset as a kernel of its own gets a
// programmatic edge from it out of the capture: the dependent may start
// before the copy's writes are visible. The wait flag, a patched parameter,
// changes from step to step.
// Eagerly deterministic: one stream; every dependent that does not wait comes
// right after a copy, a memset or a host function (not kernels); the one that
// follows a kernel waits before it reads or writes.
void pdlAfterCopy() {
  if (computeMajor() < 9) {
    std::printf("SKIP pdl_after_copy: no programmatic dependent launch before compute capability 9.0\n");
    return;
  }
  cudaStream_t S = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(S);
  uint32_t *a = deviceBuffer(19101, kPN), *b = deviceBuffer(19102, kPN), *c = deviceBuffer(19103, kPN);
  uint32_t *d = deviceBuffer(19104, kPN), *e = deviceBuffer(19105, kPN), *f = deviceBuffer(19106, kPN);
  std::vector<uint32_t> ha = hostPattern(19101, kPN), hb = hostPattern(19102, kPN), hc = hostPattern(19103, kPN);
  std::vector<uint32_t> hd = hostPattern(19104, kPN), he = hostPattern(19105, kPN), hf = hostPattern(19106, kPN);
  Mapped m = mappedBuffer(64, 0);
  PdlHostWrite hw{m.host, 0};
  PdlHostWrite mirrorHw{nullptr, 0};
  std::vector<uint32_t> hm(64);
  preload(mix);
  preload(pdlRead);
  CK(cudaDeviceSynchronize());
  // A dependent: programmatic stream serialization allowed, through the
  // template or the void** form.
  auto dependent = [&](uint32_t* dst, const uint32_t* src, int mWords, uint32_t salt, int wait, bool exC) {
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kPGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = S;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (exC) {
      int n = kPN;
      void* args[] = {&dst, &n, &src, &mWords, &salt, &wait};
      CK(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(pdlRead), args));
    } else {
      CK(cudaLaunchKernelEx(&cfg, pdlRead, dst, int(kPN), src, mWords, salt, wait));
    }
  };
  int waited = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 16u;
    const int w = i % 3 == 2 ? 1 : 0;
    const bool exC = i % 2 == 1;
    waited += w;
    mix<<<kPGrid, kBlock, 0, S>>>(a, b, kPN, u);
    CKL();
    mixHost(ha, hb, kPN, u);
    // 1. A device copy from a moving offset, then a dependent reading it
    // (one size every step, so that the step repeats and is replayed).
    const int off = (i * 37) % 1024;
    CK(cudaMemcpyAsync(c, a + off, size_t(kPN - 1024) * 4, cudaMemcpyDeviceToDevice, S));
    std::copy(ha.begin() + off, ha.begin() + off + (kPN - 1024), hc.begin());
    dependent(d, c, kPN, u + 1, w, exC);
    pdlReadHost(hd, hc.data(), kPN, u + 1);
    // 2. An 8-bit memset, then a dependent reading it.
    const int o2 = (i * 13) % 512, v2 = (i * 29 + 3) & 0xff;
    CK(cudaMemsetAsync(e + o2, v2, size_t(kPN / 2) * 4, S));
    std::fill(he.begin() + o2, he.begin() + o2 + kPN / 2, uint32_t(v2) * 0x01010101u);
    dependent(f, e, kPN, u + 2, w, exC);
    pdlReadHost(hf, he.data(), kPN, u + 2);
    // 3. A 32-bit driver memset, then a dependent reading it.
    const int o3 = kPN / 2 + (i * 7) % 256;
    const uint32_t v3 = hash32(u + 3u);
    CKD(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(e + o3), v3, size_t(kPN / 4), cs));
    std::fill(he.begin() + o3, he.begin() + o3 + kPN / 4, v3);
    dependent(d, e, kPN, u + 3, w, exC);
    pdlReadHost(hd, he.data(), kPN, u + 3);
    // 4. A 2-D device copy (64 rows of 300 words), then a dependent reading it.
    const int o4 = (i * 11) % 1000;
    CK(cudaMemcpy2DAsync(c + o4, 640 * 4, b, 512 * 4, 300 * 4, 64, cudaMemcpyDeviceToDevice, S));
    for (int r = 0; r < 64; ++r)
      std::copy(hb.begin() + r * 512, hb.begin() + r * 512 + 300, hc.begin() + o4 + r * 640);
    dependent(f, c, kPN, u + 4, w, exC);
    pdlReadHost(hf, hc.data(), kPN, u + 4);
    // 5. A host function writing mapped memory, then a dependent reading it
    // (never waiting: a host function is no primary).
    CK(cudaLaunchHostFunc(S, pdlHostWrite, &hw));
    for (uint32_t t = 0; t < 64; ++t) hm[t] = hash32(mirrorHw.calls * 64u + t + 0x51u);
    ++mirrorHw.calls;
    dependent(d, m.dev, 64, u + 5, 0, exC);
    pdlReadHost(hd, hm.data(), 64, u + 5);
    // 6. A kernel, and a dependent that waits for it (the usual pair).
    mix<<<kPGrid, kBlock, 0, S>>>(b, d, kPN, u + 6);
    CKL();
    mixHost(hb, hd, kPN, u + 6);
    dependent(f, b, kPN, u + 7, 1, exC);
    pdlReadHost(hf, hb.data(), kPN, u + 7);
    mix<<<kPGrid, kBlock, 0, S>>>(a, f, kPN, u + 8);
    CKL();
    mixHost(ha, hf, kPN, u + 8);
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      std::printf("step %d: dependents that waited after a copy or memset: %d steps of %d; host functions %u\n", i,
                  waited, i + 1, hw.calls);
      checkMirror("a", i, a, ha);
      checkMirror("b", i, b, hb);
      checkMirror("c", i, c, hc);
      checkMirror("d", i, d, hd);
      checkMirror("e", i, e, he);
      checkMirror("f", i, f, hf);
    }
  }
  CK(cudaStreamSynchronize(S));
  print("end", int(hw.calls), deviceDigest(a, kPN * 4) ^ deviceDigest(d, kPN * 4) ^ deviceDigest(f, kPN * 4));
  CK(cudaFreeHost(m.host));
}

// ---------------------------------------------------------------- attr_event_query_gate

// What a tool could get wrong: the event a step waits on and asks about is
// recorded by a launch attribute (when the kernel's blocks have begun, or
// when they trigger or exit), not by cudaEventRecord, and the kernel sits
// behind a host function that blocks its stream until the host opens the
// gate, which it does only after asking. A tool that answers the query itself
// without having seen the record answers cudaSuccess; one that holds the
// launch past the event synchronize leaves it waiting until the gate's
// timeout.
// Eagerly deterministic: nothing behind the gate can start before the host
// opens it, so every code asked before is cudaErrorNotReady and every code
// after the event synchronize is cudaSuccess; T reads only what S wrote
// before the gate (done before the kernel that records the event began), and
// S's next writes wait for T's event.
void attrEventQueryGate() {
  if (computeMajor() < 9) {
    std::printf("SKIP attr_event_query_gate: no programmatic events before compute capability 9.0\n");
    return;
  }
  cudaStream_t S = nonBlockingStream(), T = nonBlockingStream();
  cudaEvent_t ev[3] = {untimedEvent(), untimedEvent(), untimedEvent()}, join = untimedEvent();
  uint32_t *a = deviceBuffer(19201, kS), *b = deviceBuffer(19202, kS), *c = deviceBuffer(19203, kS),
           *d = deviceBuffer(19204, kS);
  std::vector<uint32_t> ha = hostPattern(19201), hb = hostPattern(19202), hc = hostPattern(19203),
                        hd = hostPattern(19204);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  // The kernel that records the event: mix(c, a) with the attribute of variant v.
  auto recordingLaunch = [&](int v, int triggerAtStart, uint32_t salt) {
    cudaLaunchAttribute attr[1] = {};
    if (v == 0) {
      attr[0].id = cudaLaunchAttributeLaunchCompletionEvent;
      attr[0].val.launchCompletionEvent.event = ev[0];
      attr[0].val.launchCompletionEvent.flags = 0;
    } else {
      attr[0].id = cudaLaunchAttributeProgrammaticEvent;
      attr[0].val.programmaticEvent.event = ev[1];
      attr[0].val.programmaticEvent.flags = 0;
      attr[0].val.programmaticEvent.triggerAtBlockStart = triggerAtStart;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kSGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = S;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return keep(cudaLaunchKernelEx(&cfg, mix, c, static_cast<const uint32_t*>(a), int(kS), salt));
  };
  // Both attributes once, ungated: a refusal here is a SKIP.
  const cudaError_t p0 = recordingLaunch(0, 0, 7u), p1 = recordingLaunch(1, 0, 8u);
  CK(cudaStreamSynchronize(S));
  if (p0 != cudaSuccess || p1 != cudaSuccess) {
    std::printf("SKIP attr_event_query_gate: launches recording events refused (%d, %d)\n", int(p0), int(p1));
    return;
  }
  mixHost(hc, ha, kS, 7u);
  mixHost(hc, ha, kS, 8u);
  CK(cudaEventSynchronize(ev[0]));
  CK(cudaEventSynchronize(ev[1]));
  HostGate gate(2000);
  std::vector<HostGateCall> calls(static_cast<size_t>(g_iters));
  Digest codes;
  int notReadyBefore[3] = {0, 0, 0}, readyAfter[3] = {0, 0, 0};
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const int v = i % 3;  // launch completion event, programmatic event, cudaEventRecord (control)
    mix<<<kSGrid, kBlock, 0, S>>>(a, b, kS, u);
    CKL();
    mixHost(ha, hb, kS, u);
    calls[size_t(i)] = HostGateCall{&gate, uint32_t(i + 1)};
    CK(cudaLaunchHostFunc(S, hostGateWait, &calls[size_t(i)]));
    if (v == 2) {
      CK(cudaEventRecord(ev[2], S));
      mix<<<kSGrid, kBlock, 0, S>>>(c, a, kS, u + 1);
      CKL();
    } else {
      const cudaError_t r = recordingLaunch(v, (i / 3) % 2, u + 1);
      if (r != cudaSuccess) {
        std::printf("FAIL step %d: a launch recording an event refused (%d)\n", i, int(r));
        std::exit(1);
      }
    }
    mixHost(hc, ha, kS, u + 1);
    CK(cudaStreamWaitEvent(T, ev[v], 0));
    mix<<<kSGrid, kBlock, 0, T>>>(d, a, kS, u + 2);
    CKL();
    mixHost(hd, ha, kS, u + 2);
    // The gate is shut: nothing behind it has started.
    const cudaError_t qe = keep(cudaEventQuery(ev[v])), qs = keep(cudaStreamQuery(S)), qt = keep(cudaStreamQuery(T));
    addCode(codes, int(qe));
    addCode(codes, int(qs));
    addCode(codes, int(qt));
    notReadyBefore[v] += (qe == cudaErrorNotReady) + (qs == cudaErrorNotReady) + (qt == cudaErrorNotReady);
    gate.open.store(uint32_t(i + 1), std::memory_order_release);
    const cudaError_t se = keep(cudaEventSynchronize(ev[v]));
    const cudaError_t qe2 = keep(cudaEventQuery(ev[v]));
    addCode(codes, int(se));
    addCode(codes, int(qe2));
    readyAfter[v] += (se == cudaSuccess) + (qe2 == cudaSuccess);
    CK(cudaEventRecord(join, T));
    CK(cudaStreamWaitEvent(S, join, 0));
    mix2<<<kSGrid, kBlock, 0, S>>>(b, c, d, kS, u + 3);
    CKL();
    mix2Host(hb, hc, hd, kS, u + 3);
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      std::printf("step %d: not ready before the gate opened (of 3 asks a step): completion event %d, programmatic "
                  "event %d, record %d; ready after: %d %d %d; gate timeouts %u, ran %u\n",
                  i, notReadyBefore[0], notReadyBefore[1], notReadyBefore[2], readyAfter[0], readyAfter[1],
                  readyAfter[2], gate.timeouts.load(), gate.ran.load());
      print("codes", i, codes.h);
      checkMirror("a", i, a, ha);
      checkMirror("b", i, b, hb);
      checkMirror("c", i, c, hc);
      checkMirror("d", i, d, hd);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", int(gate.timeouts.load()), deviceDigest(b, kS * 4) ^ deviceDigest(d, kS * 4) ^ codes.h);
}

// ---------------------------------------------------------------- event_rerecord_streams

constexpr int kSpin = 6000;  // rounds: about 0.1 ms of a 4096-thread grid

// What a tool could get wrong: cudaStreamWaitEvent binds to the record of the
// event that came last at the call, whichever stream made it. Here the event
// is recorded on A and then again on B (or on B and then on A) before C waits
// on it; C reads only the buffer of the stream that recorded last. A tool
// that holds records per stream and issues A's after B's (or answers the
// host's event synchronize from A's record) binds C, or the host, to the
// wrong stream: the reader sees the slow writer's old data.
// Eagerly deterministic: C's first kernel reads only the last recorder's
// buffer; it waits on eA and eB before it touches anything else; A and B wait
// on eC before they write what C read; the host's read through D follows its
// synchronize on the event (the last record) and nothing writes that buffer
// until the next step.
void eventRerecordStreams() {
  cudaStream_t A = nonBlockingStream(), B0 = nonBlockingStream(), C = nonBlockingStream(), D = nonBlockingStream();
  cudaEvent_t e = untimedEvent(), eA = untimedEvent(), eB = untimedEvent(), eC = untimedEvent();
  uint32_t *a = deviceBuffer(19301, kS), *b = deviceBuffer(19302, kS), *c = deviceBuffer(19303, kS),
           *c1 = deviceBuffer(19304, kS), *z = deviceBuffer(19305, kS), *sink = zeroBuffer(kS);
  std::vector<uint32_t> ha = hostPattern(19301), hb = hostPattern(19302), hc = hostPattern(19303),
                        hc1 = hostPattern(19304), hz = hostPattern(19305);
  uint32_t* peek = nullptr;
  CK(cudaMallocHost(&peek, 64 * 4));
  preload(mix);
  preload(mix2);
  preload(spinMix);
  CK(cudaDeviceSynchronize());
  Digest seen, codes;
  int reads = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const int bv = i % 3;
    cudaStream_t B = bv == 0 ? B0 : bv == 1 ? cudaStreamPerThread : cudaStreamLegacy;
    const bool aLast = i % 5 == 4;
    const bool external = i % 2 == 1;
    // Outside a capture the driver refuses an external record
    // (cudaErrorIllegalState on an H100, driver 580): its code is digested
    // and a plain record takes its place. A tool must refuse it the same way.
    auto recordOnA = [&] {
      if (external) {
        const cudaError_t r = keep(cudaEventRecordWithFlags(e, A, cudaEventRecordExternal));
        addCode(codes, int(r));
        if (r == cudaSuccess) return;
      }
      CK(cudaEventRecord(e, A));
    };
    auto workOnA = [&] {
      CK(cudaStreamWaitEvent(A, eC, 0));  // c as C left it
      mix<<<kSGrid, kBlock, 0, A>>>(a, c, kS, u);
      CKL();
      mixHost(ha, hc, kS, u);
      CK(cudaEventRecord(eA, A));
    };
    auto workOnB = [&] {
      CK(cudaStreamWaitEvent(B, eC, 0));  // z as C left it, b read by C
      spinMix<<<kSGrid, kBlock, 0, B>>>(b, z, kS, u + 1, kSpin, sink);
      CKL();
      spinMixHost(hb, hz, u + 1);
      CK(cudaEventRecord(eB, B));
    };
    if (!aLast) {
      workOnA();
      recordOnA();
      workOnB();
      CK(cudaEventRecord(e, B));  // recorded again: the wait below binds to this one
    } else {
      workOnB();
      CK(cudaEventRecord(e, B));
      workOnA();
      recordOnA();  // recorded again: the wait below binds to this one
    }
    if (i % 4 == 3) {  // an external wait outside a capture: its code digested, a plain wait if refused
      const cudaError_t r = keep(cudaStreamWaitEvent(C, e, cudaEventWaitExternal));
      addCode(codes, int(r));
      if (r != cudaSuccess) CK(cudaStreamWaitEvent(C, e, 0));
    } else {
      CK(cudaStreamWaitEvent(C, e, 0));
    }
    // Reads only the last recorder's buffer.
    mix<<<kSGrid, kBlock, 0, C>>>(c1, aLast ? a : b, kS, u + 2);
    CKL();
    mixHost(hc1, aLast ? ha : hb, kS, u + 2);
    CK(cudaStreamWaitEvent(C, eA, 0));
    CK(cudaStreamWaitEvent(C, eB, 0));
    mix2<<<kSGrid, kBlock, 0, C>>>(c, a, c1, kS, u + 3);
    mix<<<kSGrid, kBlock, 0, C>>>(z, c, kS, u + 4);
    CKL();
    mix2Host(hc, ha, hc1, kS, u + 3);
    mixHost(hz, hc, kS, u + 4);
    CK(cudaEventRecord(eC, C));
    if (i % 10 == 7 || i % 10 == 9) {
      // The host waits on the event (the last record) and reads that
      // stream's buffer through D, which has no other ordering.
      CK(cudaEventSynchronize(e));
      const uint32_t* src = aLast ? a : b;
      CK(cudaMemcpyAsync(peek, src, 64 * 4, cudaMemcpyDeviceToHost, D));
      CK(cudaStreamSynchronize(D));
      const std::vector<uint32_t>& want = aLast ? ha : hb;
      for (int t = 0; t < 64; ++t) {
        if (peek[t] != want[size_t(t)]) {
          std::printf("FAIL step %d: after the event synchronize, word %d of %s is %x, the host mirror says %x\n", i,
                      t, aLast ? "a" : "b", peek[t], want[size_t(t)]);
          std::exit(1);
        }
      }
      seen.add(peek, 64 * 4);
      ++reads;
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      // An event never recorded: queried, waited on (no-ops), destroyed.
      cudaEvent_t fresh = untimedEvent();
      addCode(codes, int(keep(cudaEventQuery(fresh))));
      addCode(codes, int(keep(cudaStreamWaitEvent(C, fresh, 0))));
      addCode(codes, int(keep(cudaStreamQuery(C))));
      CK(cudaEventDestroy(fresh));
      std::printf("step %d: host reads after an event synchronize %d\n", i, reads);
      print("seen", i, seen.h);
      print("codes", i, codes.h);
      checkMirror("a", i, a, ha);
      checkMirror("b", i, b, hb);
      checkMirror("c", i, c, hc);
      checkMirror("c1", i, c1, hc1);
      checkMirror("z", i, z, hz);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", reads, deviceDigest(c, kS * 4) ^ deviceDigest(z, kS * 4) ^ seen.h);
  CK(cudaFreeHost(peek));
}

// ---------------------------------------------------------------- memset_wide_values

// A memset value wider than a byte, of four kinds in turn: high bits set,
// negative, INT_MIN plus a little, a plain byte. Only the low byte counts.
int wideValue(int i) {
  switch (i % 4) {
    case 0: return 0x100 * (i + 1) + (i & 0xff);
    case 1: return -(i + 1);
    case 2: return INT_MIN + i * 7919;
    default: return (i * 37) & 0xff;
  }
}

// What a tool could get wrong: the runtime's memsets take an int of which only
// the low byte is set; a memset kernel of its own that takes the whole value
// (value * 0x01010101, or a sign-extended char) writes other bytes, and the
// value is a patched parameter that changes every step. A 3-D memset's slices
// start ysize rows apart (the pitched pointer's, not the extent's height).
// Empty memsets and copies with null pointers do nothing (or are refused,
// identically every time); a tool must neither launch an empty grid for them
// nor refuse them for their pointers.
// Eagerly deterministic: one stream; the copies' ranges never overlap; a
// refused op (whatever the driver makes of it) is digested and left out of the
// mirror.
void memsetWideValues() {
  constexpr size_t kBytes = 16384;
  constexpr int kWords = int(kBytes / 4);
  cudaStream_t S = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(S);
  auto* W = reinterpret_cast<uint8_t*>(deviceBuffer(19401, kWords));
  uint32_t* acc = deviceBuffer(19402, kWords);
  std::vector<uint32_t> init = hostPattern(19401, kWords), hacc = hostPattern(19402, kWords);
  std::vector<uint8_t> h(kBytes);
  std::memcpy(h.data(), init.data(), kBytes);
  // A 3-D block: rows of 96 bytes, 6 rows a slice, 5 slices.
  constexpr size_t kX = 96, kY = 6, kZ = 5;
  cudaPitchedPtr P3 = {};
  CK(cudaMalloc3D(&P3, make_cudaExtent(kX, kY, kZ)));
  const size_t bytes3 = P3.pitch * P3.ysize * kZ;
  if (P3.pitch < kX || P3.ysize != kY || bytes3 % 4 != 0) {
    std::printf("SKIP memset_wide_values: a 3-D block of pitch %zu, %zu rows a slice\n", P3.pitch, P3.ysize);
    return;
  }
  const int words3 = int(bytes3 / 4), grid3 = (words3 + kBlock - 1) / kBlock;
  CK(cudaMemset(P3.ptr, 0x11, bytes3));
  std::vector<uint8_t> h3(bytes3, 0x11);
  uint32_t* acc3 = deviceBuffer(19403, words3);
  std::vector<uint32_t> hacc3 = hostPattern(19403, words3);
  auto* p3 = static_cast<uint8_t*>(P3.ptr);
  std::printf("block3: pitch %zu, %zu bytes\n", P3.pitch, bytes3);
  preload(byteStir);
  preload(accFold);
  CK(cudaDeviceSynchronize());
  Digest codes;
  int refused = 0;
  auto noted = [&](cudaError_t r) {
    addCode(codes, int(r));
    if (r != cudaSuccess) ++refused;
    return r == cudaSuccess;
  };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    byteStir<<<kWords / kBlock, kBlock, 0, S>>>(reinterpret_cast<uint32_t*>(W), kWords, u);
    byteStir<<<grid3, kBlock, 0, S>>>(static_cast<uint32_t*>(P3.ptr), words3, u + 1);
    CKL();
    byteStirHost(h, u);
    byteStirHost(h3, u + 1);
    // 1-D: at odd offsets, sizes of period 3.
    const int v1 = wideValue(i);
    const size_t o1 = 3 + size_t(i % 5) * 701, len1 = 257 + size_t(i % 3) * 64;
    if (noted(keep(cudaMemsetAsync(W + o1, v1, len1, S)))) std::memset(h.data() + o1, v1 & 0xff, len1);
    // 2-D: pitch 300, widths of period 4, heights of period 3, odd starts.
    const int v2 = wideValue(i + 1);
    const size_t o2 = 8001 + size_t(i % 3) * 17, w2 = 37 + size_t(i % 4) * 10, rows2 = 4 + size_t(i % 3);
    if (noted(keep(cudaMemset2DAsync(W + o2, 300, v2, w2, rows2, S))))
      for (size_t r = 0; r < rows2; ++r) std::memset(h.data() + o2 + r * 300, v2 & 0xff, w2);
    // 3-D: the pointer moved by 0-6 bytes, extents of periods 5, 6 and 5.
    const int v3 = wideValue(i + 2);
    const size_t off3 = size_t(i % 7), w3 = 20 + size_t(i % 5) * 13, ht3 = 1 + size_t(i % 6),
                 d3 = 1 + size_t((i / 2) % 5);
    const cudaPitchedPtr pp = make_cudaPitchedPtr(p3 + off3, P3.pitch, P3.xsize, P3.ysize);
    if (noted(keep(cudaMemset3DAsync(pp, v3, make_cudaExtent(w3, ht3, d3), S))))
      for (size_t zz = 0; zz < d3; ++zz)
        for (size_t r = 0; r < ht3; ++r)
          std::memset(h3.data() + off3 + zz * P3.pitch * P3.ysize + r * P3.pitch, v3 & 0xff, w3);
    // Device copies of 1, 2 and 3 bytes between odd addresses (far apart).
    const size_t n5 = 1 + size_t(i % 3), d5 = 12001 + size_t(i % 9) * 3, s5 = 14003 + size_t(i % 11) * 5;
    if (noted(keep(cudaMemcpyAsync(W + d5, W + s5, n5, cudaMemcpyDeviceToDevice, S))))
      std::memcpy(h.data() + d5, h.data() + s5, n5);
    const size_t n6 = 3 - size_t(i % 3), d6 = 13001 + size_t(i % 7) * 2, s6 = 15001 + size_t(i % 13);
    const CUresult r6 =
        cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(W + d6), reinterpret_cast<CUdeviceptr>(W + s6), n6, cs);
    addCode(codes, int(r6));
    if (r6 == CUDA_SUCCESS) std::memcpy(h.data() + d6, h.data() + s6, n6);
    else ++refused;
    // Empty ops: nothing to do (or refused the same way every time).
    addCode(codes, int(keep(cudaMemsetAsync(nullptr, v1, 0, S))));
    addCode(codes, int(keep(cudaMemcpyAsync(nullptr, nullptr, 0, cudaMemcpyDeviceToDevice, S))));
    addCode(codes, int(keep(cudaMemcpyAsync(W + 5, nullptr, 0, cudaMemcpyDefault, S))));
    addCode(codes, int(keep(cudaMemset2DAsync(W + 64, 64, v2, 0, 3, S))));
    addCode(codes, int(keep(cudaMemcpy2DAsync(W + 128, 64, W + 4096, 64, 32, 0, cudaMemcpyDeviceToDevice, S))));
    if (irregular(i, 194, 5))
      addCode(codes, int(keep(cudaMemset3DAsync(pp, v3, make_cudaExtent(w3, ht3, 0), S))));
    accFold<<<kWords / kBlock, kBlock, 0, S>>>(acc, reinterpret_cast<const uint32_t*>(W), kWords, u + 2);
    accFold<<<grid3, kBlock, 0, S>>>(acc3, static_cast<const uint32_t*>(P3.ptr), words3, u + 3);
    CKL();
    accFoldHost(hacc, h, kWords, u + 2);
    accFoldHost(hacc3, h3, words3, u + 3);
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      std::printf("step %d: ops refused %d\n", i, refused);
      print("codes", i, codes.h);
      checkMirror("W", i, W, h);
      checkMirror("block3", i, P3.ptr, h3);
      checkMirror("acc", i, acc, hacc);
      checkMirror("acc3", i, acc3, hacc3);
    }
  }
  CK(cudaStreamSynchronize(S));
  print("end", refused, deviceDigest(W, kBytes) ^ deviceDigest(P3.ptr, bytes3) ^ deviceDigest(acc, kBytes));
  CK(cudaFree(P3.ptr));
}

// ---------------------------------------------------------------- capture_join_held

// What a tool could get wrong: stream Y's eager kernels of the step are
// pending (held, under a tool) when Y joins the program's capture by waiting
// on an event recorded in it; whatever a tool issues to Y after that goes into
// the program's graph. The program inspects the graph it got (nodes, their
// types and parameters, edges), adds a node of its own through the capture's
// dependency API, and runs it. Copies and memsets captured as kernels change
// the node types; held work issued into the capture adds nodes or is refused.
// Eagerly deterministic: X waits on Y's and Z's events (recorded after their
// eager reads) before the capture, so the graph launched on X later runs
// after them; Y and Z wait on the event recorded after the graph's launch
// before they touch what it wrote; Z's kernel during the capture uses only
// Z's buffers.
void captureJoinHeld() {
  cudaStream_t X = nonBlockingStream(), Y = nonBlockingStream(), Z = nonBlockingStream();
  cudaEvent_t eY = untimedEvent(), eZ = untimedEvent(), fork = untimedEvent(), join = untimedEvent(),
              post = untimedEvent();
  uint32_t *p = deviceBuffer(19501, kS), *q = deviceBuffer(19502, kS), *r = deviceBuffer(19503, kS),
           *r2 = deviceBuffer(19504, kS), *s = deviceBuffer(19505, kS), *t = deviceBuffer(19506, kS);
  std::vector<uint32_t> hp = hostPattern(19501), hq = hostPattern(19502), hr = hostPattern(19503),
                        hr2 = hostPattern(19504), hs = hostPattern(19505), ht = hostPattern(19506);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  // A stream's capture status, and its number of dependencies while capturing.
  auto status = [](cudaStream_t st) -> uint64_t {
    cudaStreamCaptureStatus cst = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t* deps = nullptr;
    size_t n = 0;
    CK(cudaStreamGetCaptureInfo(st, &cst, nullptr, nullptr, &deps, nullptr, &n));
    return uint64_t(cst) * 1000u + (cst == cudaStreamCaptureStatusActive ? n : 0);
  };
  cudaGraphExec_t exec = nullptr;
  Digest shape, codes;
  int instantiations = 0, updates = 0;
  size_t lastNodes = 0, lastEdges = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    // Eager work on Y and Z, after the last graph launch.
    CK(cudaStreamWaitEvent(Y, post, 0));
    mix<<<kSGrid, kBlock, 0, Y>>>(q, p, kS, u);
    mix<<<kSGrid, kBlock, 0, Y>>>(q, s, kS, u + 1);
    CKL();
    mixHost(hq, hp, kS, u);
    mixHost(hq, hs, kS, u + 1);
    CK(cudaEventRecord(eY, Y));
    CK(cudaStreamWaitEvent(Z, post, 0));
    mix<<<kSGrid, kBlock, 0, Z>>>(r, p, kS, u + 2);
    CKL();
    mixHost(hr, hp, kS, u + 2);
    CK(cudaEventRecord(eZ, Z));
    CK(cudaStreamWaitEvent(X, eY, 0));
    CK(cudaStreamWaitEvent(X, eZ, 0));
    // The program's capture.
    const cudaStreamCaptureMode mode = i % 2 ? cudaStreamCaptureModeRelaxed : cudaStreamCaptureModeThreadLocal;
    CK(cudaStreamBeginCapture(X, mode));
    const int v = (i * 7 + 1) & 0xff;
    CK(cudaMemsetAsync(t, v, 256, X));
    CK(cudaMemcpyAsync(p, q, kS * 4, cudaMemcpyDeviceToDevice, X));
    CK(cudaEventRecord(fork, X));
    shape.add(status(Y));  // not capturing yet
    CK(cudaStreamWaitEvent(Y, fork, 0));
    shape.add(status(Y));  // joined
    mix<<<kSGrid, kBlock, 0, Y>>>(s, p, kS, u + 3);
    CKL();
    // A node of the program's own after Y's kernel.
    cudaStreamCaptureStatus cst = cudaStreamCaptureStatusNone;
    cudaGraph_t capturing = nullptr;
    const cudaGraphNode_t* deps = nullptr;
    size_t nDeps = 0;
    CK(cudaStreamGetCaptureInfo(Y, &cst, nullptr, &capturing, &deps, nullptr, &nDeps));
    shape.add(uint64_t(cst) * 1000u + nDeps);
    uint32_t* mDst = t;
    const uint32_t* mSrc = s;
    int mN = kS;
    uint32_t mSalt = u + 4;
    void* mArgs[] = {&mDst, &mSrc, &mN, &mSalt};
    cudaKernelNodeParams kp = {};
    kp.func = reinterpret_cast<void*>(mix);
    kp.gridDim = dim3(kSGrid);
    kp.blockDim = dim3(kBlock);
    kp.sharedMemBytes = 0;
    kp.kernelParams = mArgs;
    kp.extra = nullptr;
    cudaGraphNode_t manual = nullptr;
    CK(cudaGraphAddKernelNode(&manual, capturing, deps, nDeps, &kp));
    CK(cudaStreamUpdateCaptureDependencies(Y, &manual, nullptr, 1, cudaStreamSetCaptureDependencies));
    CK(cudaEventRecord(join, Y));
    CK(cudaStreamWaitEvent(X, join, 0));
    // Eager work on Z during the capture (Z is not capturing).
    mix<<<kSGrid, kBlock, 0, Z>>>(r2, r, kS, u + 6);
    CKL();
    mixHost(hr2, hr, kS, u + 6);
    mix2<<<kSGrid, kBlock, 0, X>>>(p, s, t, kS, u + 5);
    CKL();
    shape.add(status(X));
    shape.add(status(Z));
    cudaGraph_t g = nullptr;
    CK(cudaStreamEndCapture(X, &g));
    shape.add(status(Y));
    // The graph the program got.
    size_t nNodes = 0, nEdges = 0;
    CK(cudaGraphGetNodes(g, nullptr, &nNodes));
    std::vector<cudaGraphNode_t> nodes(nNodes);
    CK(cudaGraphGetNodes(g, nodes.data(), &nNodes));
    CK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &nEdges));
    std::vector<uint64_t> facts;  // order-free: sorted before the digest
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
      CK(cudaGraphNodeGetType(node, &type));
      uint64_t fact = uint64_t(type) << 56;
      if (type == cudaGraphNodeTypeKernel) {
        cudaKernelNodeParams got = {};
        CK(cudaGraphKernelNodeGetParams(node, &got));
        const int which = got.func == reinterpret_cast<void*>(mix)    ? 1
                          : got.func == reinterpret_cast<void*>(mix2) ? 2
                                                                      : 3;
        const int saltAt = which == 2 ? 4 : 3;
        const uint32_t salt = got.kernelParams ? *static_cast<const uint32_t*>(got.kernelParams[saltAt]) : 0u;
        fact |= uint64_t(which) << 40 | uint64_t(uint32_t(salt - u)) << 8 | uint64_t(got.gridDim.x);
      } else if (type == cudaGraphNodeTypeMemset) {
        cudaMemsetParams mp = {};
        CK(cudaGraphMemsetNodeGetParams(node, &mp));
        fact |= uint64_t(mp.dst == t) << 48 | uint64_t(mp.value & 0xffffu) << 32 | uint64_t(mp.elementSize) << 24 |
                uint64_t(mp.width & 0xffffu) << 8 | uint64_t(mp.height & 0xffu);
        fact ^= uint64_t(mp.value == uint32_t(v)) << 50;
      } else if (type == cudaGraphNodeTypeMemcpy) {
        cudaMemcpy3DParms cp = {};
        CK(cudaGraphMemcpyNodeGetParams(node, &cp));
        fact |= uint64_t(cp.srcPtr.ptr == q) << 49 | uint64_t(cp.dstPtr.ptr == p) << 48 | uint64_t(cp.kind) << 40 |
                uint64_t(cp.extent.width & 0xffffffu) << 16 | uint64_t(cp.extent.height & 0xffu) << 8 |
                uint64_t(cp.extent.depth & 0xffu);
      }
      facts.push_back(fact);
    }
    std::sort(facts.begin(), facts.end());
    shape.add(uint64_t(nNodes) << 32 | nEdges);
    for (uint64_t f : facts) shape.add(f);
    lastNodes = nNodes;
    lastEdges = nEdges;
    if (!exec) {
      CK(cudaGraphInstantiate(&exec, g, 0));
      ++instantiations;
    } else {
      cudaGraphExecUpdateResultInfo info = {};
      const cudaError_t ru = keep(cudaGraphExecUpdate(exec, g, &info));
      addCode(codes, int(ru));
      addCode(codes, int(info.result));
      if (ru != cudaSuccess) {
        CK(cudaGraphExecDestroy(exec));  // its last launch may be in flight
        CK(cudaGraphInstantiate(&exec, g, 0));
        ++instantiations;
      } else {
        ++updates;
      }
    }
    CK(cudaGraphDestroy(g));
    CK(cudaGraphLaunch(exec, X));
    CK(cudaEventRecord(post, X));
    std::fill(ht.begin(), ht.begin() + 64, uint32_t(v) * 0x01010101u);
    hp = hq;
    mixHost(hs, hp, kS, u + 3);
    mixHost(ht, hs, kS, u + 4);
    mix2Host(hp, hs, ht, kS, u + 5);
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      std::printf("step %d: graph of %zu nodes and %zu edges; instantiations %d, updates %d\n", i, lastNodes,
                  lastEdges, instantiations, updates);
      print("shape", i, shape.h);
      print("codes", i, codes.h);
      checkMirror("p", i, p, hp);
      checkMirror("q", i, q, hq);
      checkMirror("r", i, r, hr);
      checkMirror("r2", i, r2, hr2);
      checkMirror("s", i, s, hs);
      checkMirror("t", i, t, ht);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", instantiations, deviceDigest(p, kS * 4) ^ deviceDigest(q, kS * 4) ^ deviceDigest(r2, kS * 4) ^ shape.h);
  CK(cudaGraphExecDestroy(exec));
}

// ---------------------------------------------------------------- device_updatable_refused

// The probe (a fresh process): the refused launch, then a plain kernel and a
// synchronize. Exit 0 when the context is still usable after the refusal.
int probeUpdatable() {
  cudaStream_t s = nonBlockingStream();
  uint32_t *a = deviceBuffer(19601, kS), *b = deviceBuffer(19602, kS);
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeDeviceUpdatableKernelNode;
  attr[0].val.deviceUpdatableKernelNode.deviceUpdatable = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kSGrid);
  cfg.blockDim = dim3(kBlock);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t r1 = cudaLaunchKernelEx(&cfg, mix, a, static_cast<const uint32_t*>(b), int(kS), 1u);
  const cudaError_t r2 = cudaGetLastError();
  mix<<<kSGrid, kBlock, 0, s>>>(b, a, kS, 2u);
  const cudaError_t r3 = cudaGetLastError();
  const cudaError_t r4 = cudaStreamSynchronize(s);
  std::printf("probe: refused launch %d, last error %d, then a launch %d and a synchronize %d\n", int(r1), int(r2),
              int(r3), int(r4));
  return r3 == cudaSuccess && r4 == cudaSuccess ? 0 : 3;
}

// What a tool could get wrong: cudaLaunchAttributeDeviceUpdatableKernelNode
// is graphs-only; a launch carrying it into a stream that is not capturing is
// refused at the call (and sets the runtime's last error, which a later
// successful launch does not clear). A tool that captures the launch into its
// own graph has the driver take it (the stream is capturing then): the kernel
// runs, the codes differ. The program's own graph holding such a node takes
// host-side parameter updates, not cudaGraphExecUpdate nor a second
// instantiation.
// Eagerly deterministic: one stream for the eager work; the program's graph
// is launched on it too; the codes are the driver's, the same every run, and
// the mirror applies a launch only where the launch was taken.
void deviceUpdatableRefused() {
  const ChildRun probe = runSelfInChild("traps_r19", "--probe-updatable", "0");
  std::printf("%s\n", probe.out.c_str());
  if (probe.exitCode != 0) {
    std::printf("SKIP device_updatable_refused: the refused launch leaves no usable context here (%s)\n",
                probe.text.c_str());
    return;
  }
  cudaStream_t S = nonBlockingStream(), P = nonBlockingStream();
  uint32_t *a = deviceBuffer(19611, kS), *b = deviceBuffer(19612, kS), *c = deviceBuffer(19613, kS),
           *d = deviceBuffer(19614, kS);
  std::vector<uint32_t> ha = hostPattern(19611), hb = hostPattern(19612), hc = hostPattern(19613),
                        hd = hostPattern(19614);
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaFunction_t fn = nullptr;
  CK(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(mix)));
  preload(mix);
  CK(cudaDeviceSynchronize());
  Digest codes;
  // The program's own graph: one device-updatable node, captured on P.
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaGraphNode_t node = nullptr;
  uint32_t graphSalt = 0x5eedu;
  {
    CK(cudaStreamBeginCapture(P, cudaStreamCaptureModeThreadLocal));
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeDeviceUpdatableKernelNode;
    attr[0].val.deviceUpdatableKernelNode.deviceUpdatable = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kSGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = P;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const uint32_t* src = c;
    int n = kS;
    void* args[] = {&d, &src, &n, &graphSalt};
    const cudaError_t rc = keep(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(mix), args));
    const cudaError_t re = keep(cudaStreamEndCapture(P, &g));
    size_t nNodes = 0;
    if (re == cudaSuccess) CK(cudaGraphGetNodes(g, nullptr, &nNodes));
    if (re == cudaSuccess && nNodes == 1) {
      nNodes = 1;
      CK(cudaGraphGetNodes(g, &node, &nNodes));
    }
    cudaLaunchAttributeValue got = {};
    const cudaError_t ra = node ? keep(cudaGraphKernelNodeGetAttribute(
                                      node, cudaLaunchAttributeDeviceUpdatableKernelNode, &got))
                                : cudaErrorInvalidValue;
    const cudaError_t ri = node ? keep(cudaGraphInstantiate(&exec, g, 0)) : cudaErrorInvalidValue;
    if (ri != cudaSuccess) exec = nullptr;
    std::printf("program graph: captured %d, ended %d, nodes %zu, attribute %d (updatable %d), instantiated %d\n",
                int(rc), int(re), nNodes, int(ra),
                ra == cudaSuccess ? got.deviceUpdatableKernelNode.deviceUpdatable : -1, int(ri));
  }
  // The refused launch of mix(b, a) in variant v; true where it was taken.
  auto updatableLaunch = [&](int v, bool withAttr, uint32_t salt) -> int {
    uint32_t* dst = b;
    const uint32_t* src = a;
    int n = kS;
    if (v == 2) {  // the driver
      CUlaunchAttribute attr[1];
      std::memset(attr, 0, sizeof attr);
      attr[0].id = CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE;
      attr[0].value.deviceUpdatableKernelNode.deviceUpdatable = 1;
      CUlaunchConfig cfg = {};
      cfg.gridDimX = kSGrid;
      cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = kBlock;
      cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = reinterpret_cast<CUstream>(S);
      cfg.attrs = attr;
      cfg.numAttrs = withAttr ? 1 : 0;
      void* args[] = {&dst, &src, &n, &salt};
      return int(cuLaunchKernelEx(&cfg, reinterpret_cast<CUfunction>(fn), args, nullptr));
    }
    cudaLaunchAttribute attr[2] = {};
    unsigned count = 0;
    if (v == 1) {
      attr[count].id = cudaLaunchAttributePriority;
      attr[count++].val.priority = greatest;
    } else if (v == 3) {
      std::memset(&attr[count], 0xa5 ^ (salt & 0xff), sizeof attr[count]);
      attr[count++].id = cudaLaunchAttributeIgnore;
    }
    if (withAttr) {
      std::memset(&attr[count], 0, sizeof attr[count]);
      attr[count].id = cudaLaunchAttributeDeviceUpdatableKernelNode;
      attr[count++].val.deviceUpdatableKernelNode.deviceUpdatable = v == 1 ? 0 : 1;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kSGrid);
    cfg.blockDim = dim3(kBlock);
    cfg.stream = S;
    cfg.attrs = attr;
    cfg.numAttrs = count;
    if (v == 1) return int(cudaLaunchKernelEx(&cfg, mix, dst, src, n, salt));
    void* args[] = {&dst, &src, &n, &salt};
    return int(cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(mix), args));
  };
  int refused = 0, taken = 0, graphRuns = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const int v = i % 4;
    const bool withAttr = !irregular(i, 196, 9);
    mix<<<kSGrid, kBlock, 0, S>>>(a, b, kS, u);
    CKL();
    mixHost(ha, hb, kS, u);
    const int r = updatableLaunch(v, withAttr, u + 1);
    if (r == 0) {
      mixHost(hb, ha, kS, u + 1);
      ++taken;
    } else {
      ++refused;
    }
    // A plain launch leaves the runtime's last error as it was.
    mix<<<kSGrid, kBlock, 0, S>>>(c, b, kS, u + 2);
    mixHost(hc, hb, kS, u + 2);
    const cudaError_t peek = cudaPeekAtLastError(), last = cudaGetLastError(), after = cudaGetLastError();
    addCode(codes, r);
    addCode(codes, int(peek));
    addCode(codes, int(last));
    if (after != cudaSuccess) {
      std::printf("FAIL step %d: the last error survived cudaGetLastError (%d)\n", i, int(after));
      std::exit(1);
    }
    if (r == 0)  // the irregular steps without the attribute (and any launch the driver took)
      std::printf("step %d: variant %d with%s the attribute: taken, last error %d\n", i, v, withAttr ? "" : "out",
                  int(peek));
    if (exec) {
      if (i % 50 == 25) {  // both refused for graphs holding device-updatable nodes
        cudaGraphExecUpdateResultInfo info = {};
        addCode(codes, int(keep(cudaGraphExecUpdate(exec, g, &info))));
        cudaGraphExec_t second = nullptr;
        const cudaError_t r2 = keep(cudaGraphInstantiate(&second, g, 0));
        addCode(codes, int(r2));
        if (r2 == cudaSuccess) CK(cudaGraphExecDestroy(second));
      }
      // Host-side parameters for the next launch (all of them), an upload, the launch.
      uint32_t* dst = d;
      const uint32_t* src = c;
      int n = kS;
      uint32_t salt = u + 3;
      void* args[] = {&dst, &src, &n, &salt};
      cudaKernelNodeParams kp = {};
      kp.func = reinterpret_cast<void*>(mix);
      kp.gridDim = dim3(kSGrid);
      kp.blockDim = dim3(kBlock);
      kp.kernelParams = args;
      const cudaError_t rs = keep(cudaGraphExecKernelNodeSetParams(exec, node, &kp));
      addCode(codes, int(rs));
      if (rs == cudaSuccess) graphSalt = salt;
      addCode(codes, int(keep(cudaGraphUpload(exec, S))));
      CK(cudaGraphLaunch(exec, S));
      mixHost(hd, hc, kS, graphSalt);
      ++graphRuns;
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      std::printf("step %d: launches with the attribute refused %d, taken %d; graph launches %d\n", i, refused, taken,
                  graphRuns);
      print("codes", i, codes.h);
      checkMirror("a", i, a, ha);
      checkMirror("b", i, b, hb);
      checkMirror("c", i, c, hc);
      checkMirror("d", i, d, hd);
    }
  }
  CK(cudaStreamSynchronize(S));
  print("end", refused, deviceDigest(b, kS * 4) ^ deviceDigest(d, kS * 4) ^ codes.h);
  if (exec) CK(cudaGraphExecDestroy(exec));
  if (g) CK(cudaGraphDestroy(g));
}

// ---------------------------------------------------------------- register_toggle_copies

// What a tool could get wrong: one host buffer at one address is pinned
// (registered, mapped) for 10 steps and pageable for the next 10. A copy from
// the device into pageable memory has completed when the call returns, and a
// copy out of it has read its source; into or out of pinned memory both are
// asynchronous. A tool that remembers the address as pinned after
// cudaHostUnregister holds copies the host relies on at the call: it reads
// stale data, or the device gets the scribbles.
// Eagerly deterministic: one stream; while the buffer is pinned the host
// touches it only after a stream synchronize; it is registered and
// unregistered only after one.
void registerToggleCopies() {
  constexpr size_t kHostBytes = size_t(kS) * 4;
  cudaStream_t S = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(S);
  auto* H = static_cast<uint32_t*>(std::aligned_alloc(4096, kHostBytes));
  if (!H) {
    std::fprintf(stderr, "traps: aligned_alloc failed\n");
    std::exit(1);
  }
  std::memset(H, 0, kHostBytes);
  uint32_t *a = deviceBuffer(19701, kS), *b = deviceBuffer(19702, kS), *c = deviceBuffer(19703, kS),
           *d = deviceBuffer(19704, kS);
  std::vector<uint32_t> ha = hostPattern(19701), hb = hostPattern(19702), hc = hostPattern(19703),
                        hd = hostPattern(19704), up(kS);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  bool pinned = false;
  uint32_t* Hdev = nullptr;
  int toggles = 0;
  Digest seen;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    if (i % 10 == 0) {
      CK(cudaStreamSynchronize(S));
      if (pinned) {
        CK(cudaHostUnregister(H));
        Hdev = nullptr;
      } else {
        const unsigned flags =
            (i / 20) % 2 ? cudaHostRegisterMapped | cudaHostRegisterPortable : cudaHostRegisterMapped;
        CK(cudaHostRegister(H, kHostBytes, flags));
        CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&Hdev), H, 0));
      }
      pinned = !pinned;
      ++toggles;
    }
    mix<<<kSGrid, kBlock, 0, S>>>(a, b, kS, u);
    CKL();
    mixHost(ha, hb, kS, u);
    if (i % 2) CKD(cuMemcpyDtoHAsync(H, reinterpret_cast<CUdeviceptr>(a), kHostBytes, cs));
    else CK(cudaMemcpyAsync(H, a, kHostBytes, cudaMemcpyDeviceToHost, S));
    if (pinned) CK(cudaStreamSynchronize(S));  // pageable: complete at the return
    for (int k = 0; k < kS; ++k) {
      if (H[k] != ha[size_t(k)]) {
        std::printf("FAIL step %d (%s): word %d copied to the host is %x, the host mirror says %x\n", i,
                    pinned ? "pinned" : "pageable", k, H[k], ha[size_t(k)]);
        std::exit(1);
      }
    }
    seen.add(H, 256);
    for (int k = 0; k < kS; ++k) up[size_t(k)] = H[k] ^ hash32(uint32_t(k) + u);
    std::memcpy(H, up.data(), kHostBytes);
    if (i % 2) CKD(cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(c), H, kHostBytes, cs));
    else CK(cudaMemcpyAsync(c, H, kHostBytes, cudaMemcpyHostToDevice, S));
    hc = up;
    if (pinned) {
      // The device reads the buffer in place (it stays untouched until the
      // next step's synchronize).
      mix<<<kSGrid, kBlock, 0, S>>>(d, Hdev, kS, u + 1);
      CKL();
      mixHost(hd, up, kS, u + 1);
    } else {
      for (int k = 0; k < kS; ++k) H[k] = 0xdeadbeefu ^ uint32_t(k);  // pageable: staged at the call
    }
    mix2<<<kSGrid, kBlock, 0, S>>>(b, c, a, kS, u + 2);
    CKL();
    mix2Host(hb, hc, ha, kS, u + 2);
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      std::printf("step %d: %s, toggles %d\n", i, pinned ? "pinned" : "pageable", toggles);
      print("seen", i, seen.h);
      checkMirror("a", i, a, ha);
      checkMirror("b", i, b, hb);
      checkMirror("c", i, c, hc);
      checkMirror("d", i, d, hd);
    }
  }
  CK(cudaStreamSynchronize(S));
  if (pinned) CK(cudaHostUnregister(H));
  print("end", toggles, deviceDigest(b, kS * 4) ^ deviceDigest(d, kS * 4) ^ seen.h);
  std::free(H);
}

// ---------------------------------------------------------------- record_stream_reuse

constexpr int kReuseBlocks = 4;

// What a tool could get wrong: a caching allocator (PyTorch's, with
// record_stream) hands a block back to stream A once cudaEventQuery says the
// event recorded after its last reader on stream B completed; A never waits
// on B. A tool that answers that query itself with cudaSuccess while it
// still holds B's read lets A's next fill of the block run before B read it.
// Eagerly deterministic: a block is refilled only after the host saw its
// event complete (a query, a stream query of B, or an event synchronize);
// every fill rewrites the whole block; B reads a block only after A's event;
// a is A's alone, acc and sink are B's alone. Which block a step gets depends
// on timing, the values do not (nothing printed tells the blocks apart).
void recordStreamReuse() {
  cudaStream_t A = nonBlockingStream(), B = nonBlockingStream();
  uint32_t* blk[kReuseBlocks];
  cudaEvent_t freed[kReuseBlocks];
  bool pending[kReuseBlocks];
  int lastUse[kReuseBlocks];
  for (int k = 0; k < kReuseBlocks; ++k) {
    blk[k] = zeroBuffer(kS);
    freed[k] = untimedEvent();
    pending[k] = false;
    lastUse[k] = -1;
  }
  cudaEvent_t eA = untimedEvent();
  uint32_t *a = deviceBuffer(19801, kS), *x = deviceBuffer(19802, kS), *acc = deviceBuffer(19803, kS),
           *sink = zeroBuffer(kS);
  std::vector<uint32_t> ha = hostPattern(19801), hx = hostPattern(19802), hacc = hostPattern(19803);
  preload(mix);
  preload(fillBlock);
  preload(spinMix);
  CK(cudaDeviceSynchronize());
  int badQueries = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    // The allocator: B idle frees everything; else the first block whose event
    // completed; else the least recently used one after its event.
    if (i % 7 == 6 && keep(cudaStreamQuery(B)) == cudaSuccess)
      for (int k = 0; k < kReuseBlocks; ++k) pending[k] = false;
    int pick = -1;
    for (int j = 0; j < kReuseBlocks && pick < 0; ++j) {
      const int k = (i + j) % kReuseBlocks;
      if (!pending[k]) {
        pick = k;
        break;
      }
      const cudaError_t q = keep(cudaEventQuery(freed[k]));
      if (q == cudaSuccess) {
        pending[k] = false;
        pick = k;
      } else if (q != cudaErrorNotReady) {
        ++badQueries;
      }
    }
    if (pick < 0) {
      pick = 0;
      for (int k = 1; k < kReuseBlocks; ++k)
        if (lastUse[k] < lastUse[pick]) pick = k;
      CK(cudaEventSynchronize(freed[pick]));
      pending[pick] = false;
    }
    uint32_t* block = blk[pick];
    mix<<<kSGrid, kBlock, 0, A>>>(a, x, kS, u);
    fillBlock<<<kSGrid, kBlock, 0, A>>>(block, a, kS, u + 1);
    CKL();
    mixHost(ha, hx, kS, u);
    const std::vector<uint32_t> hblock = fillBlockHost(ha, u + 1);
    CK(cudaEventRecord(eA, A));
    CK(cudaStreamWaitEvent(B, eA, 0));
    spinMix<<<kSGrid, kBlock, 0, B>>>(acc, block, kS, u + 2, kSpin, sink);
    CKL();
    spinMixHost(hacc, hblock, u + 2);
    CK(cudaEventRecord(freed[pick], B));  // the block's "free" (record_stream)
    pending[pick] = true;
    lastUse[pick] = i;
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      std::printf("step %d: queries answered other than ready or not ready %d\n", i, badQueries);
      checkMirror("a", i, a, ha);
      checkMirror("acc", i, acc, hacc);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", badQueries, deviceDigest(a, kS * 4) ^ deviceDigest(acc, kS * 4));
}

// ---------------------------------------------------------------- legacy_launch_state

// The pre-4.0 launch API, as an old C++ app or a JIT that never moved on
// uses it: cuFuncSetBlockShape, cuParamSetSize and cuParamSetv set a module
// function's launch state, which cuLaunchGridAsync reads; cuda.h says a
// cuLaunchKernel of the function invalidates that state. Every step: a
// runtime kernel, a cuLaunchKernel of the function, its legacy state set,
// another runtime kernel (a different one every 7th step, so that a run a
// tool holds ends there), then cuLaunchGridAsync. What a tool may get wrong:
// it holds the cuLaunchKernel (or issues it into a capture of its own) and
// issues it after the state was set: the state is wiped and the
// cuLaunchGridAsync refused or run with other parameters. The codes are
// digested; the host mirror applies a launch only where it was taken.
using SetBlockShapeFn = CUresult(CUDAAPI*)(CUfunction, int, int, int);
using ParamSetSizeFn = CUresult(CUDAAPI*)(CUfunction, unsigned);
using ParamSetvFn = CUresult(CUDAAPI*)(CUfunction, int, void*, unsigned);
using LaunchGridAsyncFn = CUresult(CUDAAPI*)(CUfunction, int, int, CUstream);

template <typename F>
bool driverProc(const char* name, F* out) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult found{};
  if (cuGetProcAddress(name, &p, 2000, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || !p) return false;
  *out = reinterpret_cast<F>(p);
  return true;
}

// trapInc's host mirror (trap_common.cuh, kIncPtx).
void incHost(std::vector<uint32_t>& dst, const std::vector<uint32_t>& src, int n, uint32_t v) {
  for (int k = 0; k < n; ++k) dst[size_t(k)] = rotl(dst[size_t(k)], 3) + src[size_t((k * 11 + 5) % n)] + v;
}

void legacyLaunchState() {
  SetBlockShapeFn setBlockShape = nullptr;
  ParamSetSizeFn paramSetSize = nullptr;
  ParamSetvFn paramSetv = nullptr;
  LaunchGridAsyncFn launchGridAsync = nullptr;
  if (!driverProc("cuFuncSetBlockShape", &setBlockShape) || !driverProc("cuParamSetSize", &paramSetSize) ||
      !driverProc("cuParamSetv", &paramSetv) || !driverProc("cuLaunchGridAsync", &launchGridAsync)) {
    std::printf("SKIP legacy_launch_state: this driver has no pre-4.0 launch API\n");
    return;
  }
  CK(cudaFree(nullptr));
  CUmodule module = nullptr;
  CUfunction inc = nullptr;
  CKD(cuModuleLoadData(&module, kIncPtx));
  CKD(cuModuleGetFunction(&inc, module, "trapInc"));
  cudaStream_t S = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(S);
  uint32_t *a = deviceBuffer(19901, kS), *b = deviceBuffer(19902, kS), *c = deviceBuffer(19903, kS),
           *d = deviceBuffer(19904, kS);
  std::vector<uint32_t> ha = hostPattern(19901), hb = hostPattern(19902), hc = hostPattern(19903),
                        hd = hostPattern(19904);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  Digest codes;
  int gridLaunches = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 16u;
    // A few kernels first, so that a tool holds a run that the function's
    // cuLaunchKernel continues.
    for (uint32_t j = 0; j < 3; ++j) {
      mix<<<kSGrid, kBlock, 0, S>>>(d, c, kS, u + 8 + j);
      mix<<<kSGrid, kBlock, 0, S>>>(c, d, kS, u + 12 + j);
      CKL();
      mixHost(hd, hc, kS, u + 8 + j);
      mixHost(hc, hd, kS, u + 12 + j);
    }
    mix<<<kSGrid, kBlock, 0, S>>>(a, c, kS, u);
    CKL();
    mixHost(ha, hc, kS, u);
    {  // cuLaunchKernel of the function: a += b
      CUdeviceptr dst = CUdeviceptr(a), src = CUdeviceptr(b);
      int n = kS;
      uint32_t v = u + 1;
      void* params[] = {&dst, &src, &n, &v};
      CKD(cuLaunchKernel(inc, kSGrid, 1, 1, kBlock, 1, 1, 0, cs, params, nullptr));
      incHost(ha, hb, kS, u + 1);
    }
    // Its legacy state, for the cuLaunchGridAsync below: b += a.
    struct {
      uint64_t dst, src;
      int32_t n;
      uint32_t v;
    } legacy{uint64_t(uintptr_t(b)), uint64_t(uintptr_t(a)), kS, u + 2};
    static_assert(sizeof(legacy) == 24, "trapInc's parameters: 8, 8, 4 and 4 bytes");
    addCode(codes, int(setBlockShape(inc, kBlock, 1, 1)));
    addCode(codes, int(paramSetSize(inc, sizeof legacy)));
    addCode(codes, int(paramSetv(inc, 0, &legacy, sizeof legacy)));
    if (i % 7 == 3) {
      mix2<<<kSGrid, kBlock, 0, S>>>(c, a, b, kS, u + 3);
      CKL();
      mix2Host(hc, ha, hb, kS, u + 3);
    } else {
      mix<<<kSGrid, kBlock, 0, S>>>(c, a, kS, u + 3);
      CKL();
      mixHost(hc, ha, kS, u + 3);
    }
    mix<<<kSGrid, kBlock, 0, S>>>(d, c, kS, u + 4);
    mix<<<kSGrid, kBlock, 0, S>>>(c, d, kS, u + 5);
    CKL();
    mixHost(hd, hc, kS, u + 4);
    mixHost(hc, hd, kS, u + 5);
    const CUresult r = launchGridAsync(inc, kSGrid, 1, cs);
    addCode(codes, int(r));
    if (r == CUDA_SUCCESS) {
      incHost(hb, ha, kS, u + 2);
      ++gridLaunches;
    }
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      std::printf("step %d: cuLaunchGridAsync taken %d times\n", i, gridLaunches);
      print("codes", i, codes.h);
      checkMirror("a", i, a, ha);
      checkMirror("b", i, b, hb);
      checkMirror("c", i, c, hc);
      checkMirror("d", i, d, hd);
    }
  }
  CK(cudaStreamSynchronize(S));
  print("end", gridLaunches, deviceDigest(a, kS * 4) ^ deviceDigest(b, kS * 4) ^ codes.h);
  CKD(cuModuleUnload(module));
}

constexpr Scenario kScenarios[] = {
    {"pdl_after_copy", pdlAfterCopy},
    {"attr_event_query_gate", attrEventQueryGate},
    {"event_rerecord_streams", eventRerecordStreams},
    {"memset_wide_values", memsetWideValues},
    {"capture_join_held", captureJoinHeld},
    {"device_updatable_refused", deviceUpdatableRefused},
    {"register_toggle_copies", registerToggleCopies},
    {"record_stream_reuse", recordStreamReuse},
    {"legacy_launch_state", legacyLaunchState},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--probe-updatable")) return probeUpdatable();
  return runScenarios(argc, argv, kScenarios);
}
