// traps_r15 (helper-written): a fifteenth red-team round of odd but legal CUDA C++ patterns in
// the style of traps_r13.cu and traps_r11.cu (trap_common.cuh, trap_helpers.cuh),
// aimed at what a tool that holds launches back, captures the repeating ones
// into graphs of its own (copies and memsets as kernels of its own), patches
// their parameters and answers some calls itself could get wrong: module
// globals that no launch parameter names, written by synchronous and
// asynchronous symbol copies; one library kernel launched with identical
// parameters into two contexts of one device, op by op; the program's own
// global-mode capture with the thread's capture mode exchanged around an
// allocation; device copies whose ranges touch; ordering that exists only
// through the legacy stream (event-only relays, another thread's synchronous
// copies and per-thread stream); overlapping memsets of every element size.
// Each scenario is deterministic in eager (no races: integer kernels, every
// cross-stream access ordered by a stream, an event, the legacy stream's
// implicit synchronization or a host barrier), prints digests of its buffers
// and of the codes the host saw, and checks its results against a host
// mirror of its kernels (a FAIL line and exit 1 on a mismatch);
// check_traps.py requires the same output under graft. A scenario whose
// feature this machine lacks prints a SKIP line and stops.
//
//   sync_symbol_legacy    a __device__ table that kernels read directly (no
//                         parameter names it) is rewritten every step by a
//                         synchronous cudaMemcpyToSymbol from pageable memory
//                         (scribbled at once after the call), on every 5th step
//                         partly cleared by the synchronous-API cudaMemset
//                         through cudaGetSymbolAddress; kernels before and
//                         after it run on a blocking stream (ordered against
//                         the legacy-stream copy only implicitly), a
//                         non-blocking stream reads the table between them and
//                         the legacy stream waits on its event before the
//                         copy; every 4th step a legacy-stream kernel folds a
//                         buffer into a __device__ word that a synchronous
//                         cudaMemcpyFromSymbol reads back, and the value
//                         becomes the next launch's salt. What graft may get
//                         wrong: a host copy is an eager boundary at its
//                         position, so the held blocking-stream kernels before
//                         it must reach the GPU first (only the implicit
//                         synchronization orders them), the ones after it must
//                         not be replayed from a graph that read the old table,
//                         and the read-back must see held work.
//   symbol_async_cycle    cudaMemcpyToSymbolAsync / cudaMemcpyFromSymbolAsync
//                         device-to-device into and out of a __device__ window
//                         (read by kernels directly) with byte offsets cycling
//                         with period 3, sizes (4 B to 2 KiB) with period 4 and
//                         source offsets with period 5, 16-bit and 8-bit driver
//                         memsets of the window at even and odd offsets in
//                         turn, every 7th step a stream-ordered block copied in
//                         with cudaMemcpyDefault; the read-back on a second
//                         stream joined both ways by events. What graft may get
//                         wrong: copies and memsets of a symbol become its
//                         copy/memset kernels whose patched addresses and
//                         sizes must match each variant; the dependency of
//                         the window's readers exists only through memory no
//                         parameter names.
//   ctx_op_interleave     one library kernel (cuLibraryLoadData: a CUkernel,
//                         no context of its own) launched with IDENTICAL
//                         parameters (portable mapped host memory, the same
//                         address in every context), grid and NULL stream,
//                         op by op alternately in the primary context (made
//                         current by cudaSetDevice or cuCtxSetCurrent in turn)
//                         and a cuCtxCreate'd one; what tells the launches
//                         apart is the library's __device__ globals, which are
//                         per context (a base offset and a launch counter);
//                         driver memsets of per-context device memory between.
//                         What graft may get wrong: a launch matched, graphed
//                         or issued in the other context (its NULL stream, its
//                         globals) than the one current at the call.
//   capture_mode_exchange every 10th step the program captures a side stream
//                         in global mode while the same thread launches on its
//                         main stream (not captured), asks the capture status
//                         of both streams and the legacy stream, exchanges the
//                         thread's capture mode to relaxed around a cudaMalloc,
//                         and in turn makes a cudaMalloc without the exchange,
//                         or queries a completed event and the capturing
//                         stream (calls the driver refuses and that invalidate
//                         the capture); the graph, when the capture survived,
//                         runs on the side stream joined to the main one by
//                         events. Every code is digested. What graft may get
//                         wrong: held main-stream work at the capture's start,
//                         calls of its own that a global capture forbids,
//                         answers it gives itself during the capture, and
//                         picking the loop up after it.
//   adjacent_copy_ranges  device-to-device copies inside one allocation whose
//                         source and destination ranges touch (the destination
//                         right after or right before the source) or are 1 to
//                         3 bytes apart, at every source and destination
//                         alignment modulo 16, sizes 1 B to 4097 B cycling with
//                         period 10, through cudaMemcpyAsync (device-to-device
//                         and default), cuMemcpyDtoDAsync and cuMemcpyAsync,
//                         and 8- and 16-bit memsets touching their ends. What
//                         graft may get wrong: its copy kernel reads aligned
//                         source words and must never take a byte from the
//                         destination next to it; a patched address that
//                         changes the alignment class changes the code path.
//   legacy_event_relay    the legacy stream carries only event records and
//                         waits (and, on irregular steps, a memset): a producer
//                         on one of three blocking streams (cudaStreamCreate,
//                         cuStreamCreate with CU_STREAM_DEFAULT,
//                         cudaStreamPerThread) in turn, a record on the legacy
//                         stream, a consumer on one of two non-blocking streams
//                         that waits on it and reads the producer's buffer, a
//                         legacy-stream wait on the consumer's event, and the
//                         next producer reading the consumer's buffer; every
//                         4th step the host waits on a legacy-stream record
//                         and reads managed memory a blocking stream wrote.
//                         What graft may get wrong: the only path from producer
//                         to consumer (and back) is the legacy stream's
//                         implicit synchronization through event ops, which a
//                         graph must turn into edges (or entry/tail events).
//   helper_legacy_writes  a helper thread in lockstep with the main thread (no
//                         CUDA call while either waits): the main thread's
//                         kernels on a blocking stream read a buffer, then the
//                         helper overwrites it with a synchronous cudaMemcpy
//                         from pageable memory (the legacy stream: ordered
//                         after those kernels only implicitly), clears another
//                         with the synchronous-API cudaMemset, runs a kernel on
//                         its own per-thread stream and a legacy memset behind
//                         it, and every 5th step reads back with cudaMemcpy;
//                         the main thread's next kernel reads both buffers.
//                         What graft may get wrong: another thread's legacy
//                         host copy must come after the main thread's held
//                         blocking-stream kernels, and the main thread's next
//                         held kernels after the helper's per-thread work.
//   memset_overlap_sizes  every step six memsets of one buffer, each
//                         overlapping the one before: cudaMemsetAsync (8-bit)
//                         at an odd offset whose size changes with period 2,
//                         cuMemsetD16Async over its tail, cuMemsetD32Async over
//                         that one's, and 2-D 8-, 16- and 32-bit memsets with
//                         an odd pitch, a pitch of 2 mod 4 and one of 4 mod 16
//                         (rows starting at every phase) across all three,
//                         offsets cycling with periods 3, 4 and 5, values
//                         changing every step, between kernels that stir and
//                         fold the buffer. What graft may get wrong: the order
//                         of overlapping memsets, the element pattern of its
//                         memset kernel at row starts of every alignment, and
//                         values patched into nodes of the right element size.
//
//   traps_r15 NAME [--iters N]     one scenario (see kScenarios)
//   traps_r15 --list               the scenario names
//
// Built like traps_r13 (-rdc=true -lcudadevrt) and linked to libcuda (-lcuda:
// driver copies, memsets, contexts and libraries):
//   nvcc -O2 -std=c++17 -lineinfo -gencode arch=compute_90,code=[sm_90,compute_90]
//        -Xcompiler=-Wall,-Wextra,-Werror -I tests/gpu -rdc=true -o traps_r15 traps_r15.cu -lcudadevrt -lcuda

#include <algorithm>
#include <atomic>
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

// ---------------------------------------------------------------- kernels (helpers: trap_helpers.cuh, trap_mirror.cuh)

__device__ uint32_t g_r15Table[256];
__device__ uint32_t g_r15Word[32];
__device__ uint32_t g_r15Win[1024];

// dst mixes with the __device__ table (no parameter names it).
__global__ void tableMix(uint32_t* dst, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 7) ^ (g_r15Table[(uint32_t(k) * 13u + salt) & 255u] + salt + uint32_t(k));
}
void tableMixHost(std::vector<uint32_t>& dst, const std::vector<uint32_t>& table, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k)
    dst[size_t(k)] = rotl(dst[size_t(k)], 7) ^ (table[(uint32_t(k) * 13u + salt) & 255u] + salt + uint32_t(k));
}

// One warp folds src into the __device__ words.
__global__ void foldWords(const uint32_t* src, int n, uint32_t salt) {
  const unsigned t = threadIdx.x;
  if (t >= 32) return;
  uint32_t acc = salt + t;
  for (int j = int(t); j < n; j += 32) acc = rotl(acc, 1) ^ src[j];
  g_r15Word[t] = acc;
}
void foldWordsHost(std::vector<uint32_t>& words, const std::vector<uint32_t>& src, int n, uint32_t salt) {
  for (unsigned t = 0; t < 32; ++t) {
    uint32_t acc = salt + t;
    for (int j = int(t); j < n; j += 32) acc = rotl(acc, 1) ^ src[size_t(j)];
    words[t] = acc;
  }
}

// dst mixes with the __device__ window (no parameter names it).
__global__ void winMix(uint32_t* dst, int n, uint32_t salt) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) dst[k] = rotl(dst[k], 3) + (g_r15Win[(uint32_t(k) * 5u + salt) & 1023u] ^ salt);
}
void winMixHost(std::vector<uint32_t>& dst, const std::vector<uint32_t>& win, int n, uint32_t salt) {
  for (int k = 0; k < n; ++k)
    dst[size_t(k)] = rotl(dst[size_t(k)], 3) + (win[(uint32_t(k) * 5u + salt) & 1023u] ^ salt);
}

// 64 words of dst (managed memory) from src.
__global__ void copy64(uint32_t* dst, const uint32_t* src, uint32_t salt) {
  const unsigned t = threadIdx.x;
  if (t < 64) dst[t] = src[t * 61u] ^ salt;
}

// ---------------------------------------------------------------- sync_symbol_legacy

// What a tool could get wrong: the table's readers name it nowhere; the
// synchronous copy that rewrites it is a host copy on the legacy stream, which
// a tool issues eagerly at its place, so the blocking-stream kernels it holds
// before it (ordered before the copy only by the legacy stream's implicit
// synchronization) must reach the GPU first, and the held kernels after it
// must read the new table. The read-back of a __device__ word after a
// legacy-stream kernel steers the next launch's salt.
// Eagerly deterministic: B is blocking (the legacy copy waits for it and B's
// later work waits for the copy); N reads the table and a only after waiting
// on B's event, and the legacy stream waits on N's event before the copy.
void syncSymbolLegacy() {
  cudaStream_t B = blockingStream(), N = nonBlockingStream();
  cudaEvent_t eB = untimedEvent(), eN = untimedEvent();
  uint32_t *a = deviceBuffer(15101, kS), *b = deviceBuffer(15102, kS);
  std::vector<uint32_t> ha = hostPattern(15101), hb = hostPattern(15102), table(256, 0u), words(32, 0u);
  uint8_t* tablePtr = nullptr;
  CK(cudaGetSymbolAddress(reinterpret_cast<void**>(&tablePtr), g_r15Table));
  std::vector<uint32_t> zero(256, 0u);
  CK(cudaMemcpyToSymbol(g_r15Table, zero.data(), 1024));
  preload(tableMix);
  preload(foldWords);
  preload(mix);
  Digest salts;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    tableMix<<<kSGrid, kBlock, 0, B>>>(a, kS, u);
    CKL();
    tableMixHost(ha, table, kS, u);
    CK(cudaEventRecord(eB, B));
    CK(cudaStreamWaitEvent(N, eB, 0));
    mix<<<kSGrid, kBlock, 0, N>>>(b, a, kS, u + 1);
    tableMix<<<kSGrid, kBlock, 0, N>>>(b, kS, u + 2);
    CKL();
    mixHost(hb, ha, kS, u + 1);
    tableMixHost(hb, table, kS, u + 2);
    CK(cudaEventRecord(eN, N));
    CK(cudaStreamWaitEvent(cudaStreamLegacy, eN, 0));
    std::vector<uint32_t> fresh(256);  // pageable, scribbled once the call returned
    for (uint32_t k = 0; k < 256; ++k) fresh[k] = hash32(uint32_t(i) * 256u + k);
    CK(cudaMemcpyToSymbol(g_r15Table, fresh.data(), 1024));
    table = fresh;
    std::fill(fresh.begin(), fresh.end(), 0xffffffffu);
    if (i % 5 == 4) {  // the synchronous API's memset of part of the table (legacy stream)
      const size_t off = size_t(i * 37) % 700, count = 1 + size_t(i) % 300;
      const int value = (i * 29) & 0xff;
      CK(cudaMemset(tablePtr + off, value, count));
      std::memset(reinterpret_cast<uint8_t*>(table.data()) + off, value, count);
    }
    tableMix<<<kSGrid, kBlock, 0, B>>>(a, kS, u + 3);
    CKL();
    tableMixHost(ha, table, kS, u + 3);
    if (i % 4 == 3) {
      foldWords<<<1, 32, 0, cudaStreamLegacy>>>(a, kS, u);
      CKL();
      foldWordsHost(words, ha, kS, u);
      uint32_t got[32];
      CK(cudaMemcpyFromSymbol(got, g_r15Word, sizeof got));
      if (std::memcmp(got, words.data(), sizeof got)) {
        std::printf("FAIL step %d: the folded words read back differ from the host mirror\n", i);
        std::exit(1);
      }
      uint32_t salt = 0;
      for (uint32_t w : got) salt = rotl(salt, 3) ^ w;
      salts.add(salt);
      mix<<<kSGrid, kBlock, 0, B>>>(a, b, kS, salt);  // b: N's, ordered through the legacy stream
      CKL();
      mixHost(ha, hb, kS, salt);
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkMirror("a", i, a, ha);
      checkMirror("b", i, b, hb);
      print("salts", i, salts.h);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(a, kS * 4) ^ deviceDigest(b, kS * 4) ^ salts.h);
}

// ---------------------------------------------------------------- symbol_async_cycle

// What a tool could get wrong: asynchronous device-to-device copies into and
// out of a __device__ window at offsets and sizes that cycle with periods 3,
// 4 and 5, memsets of the window of two element sizes, and a stream-ordered
// block copied in with the default kind; the kernels that read the window
// name it nowhere. A tool that makes these copies and memsets kernels of its
// own and patches their addresses must keep each variant's size and address
// together.
// Eagerly deterministic: S1 writes the window and out; S2 reads the window
// only after waiting on S1's event, and S1 waits on S2's event before the
// next step writes the window again.
void symbolAsyncCycle() {
  cudaStream_t S1 = nonBlockingStream(), S2 = nonBlockingStream();
  cudaEvent_t e1 = untimedEvent(), e2 = untimedEvent();
  uint32_t *src = deviceBuffer(15201, kS), *out = deviceBuffer(15202, kS), *dst = deviceBuffer(15203, kS),
           *dst2 = deviceBuffer(15204, kS);
  std::vector<uint32_t> hsrc = hostPattern(15201), hout = hostPattern(15202), hdst = hostPattern(15203),
                        hdst2 = hostPattern(15204), win(1024, 0u);
  std::vector<uint32_t> zero(1024, 0u);
  CK(cudaMemcpyToSymbol(g_r15Win, zero.data(), 4096));
  uint8_t* winPtr = nullptr;
  CK(cudaGetSymbolAddress(reinterpret_cast<void**>(&winPtr), g_r15Win));
  const auto winDev = reinterpret_cast<CUdeviceptr>(winPtr);
  auto* winBytes = reinterpret_cast<uint8_t*>(win.data());
  preload(winMix);
  preload(mix);
  CK(cudaDeviceSynchronize());
  constexpr size_t kSizes[4] = {64, 1024, 4, 2048};
  constexpr size_t kSymOff[3] = {0, 1028, 2044};
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 16u;
    mix<<<kSGrid, kBlock, 0, S1>>>(src, out, kS, u);
    CKL();
    mixHost(hsrc, hout, kS, u);
    const size_t size = kSizes[i % 4], symOff = kSymOff[i % 3], srcOff = size_t(i % 5) * 301;
    CK(cudaMemcpyToSymbolAsync(g_r15Win, src + srcOff, size, symOff, cudaMemcpyDeviceToDevice, S1));
    std::memcpy(winBytes + symOff, hsrc.data() + srcOff, size);
    winMix<<<kSGrid, kBlock, 0, S1>>>(out, kS, u + 1);
    CKL();
    winMixHost(hout, win, kS, u + 1);
    if (i % 2 == 0) {
      const size_t off = 2 + size_t((i / 2) % 3) * 1002;
      const uint16_t v = uint16_t(hash32(uint32_t(i)) >> 7);
      CKD(cuMemsetD16Async(winDev + off, v, 37, reinterpret_cast<CUstream>(S1)));
      for (size_t e = 0; e < 37; ++e) std::memcpy(winBytes + off + 2 * e, &v, 2);
    } else {
      const size_t off = 1 + size_t((i / 2) % 4) * 1001;
      const uint8_t v = uint8_t(i * 11 + 5);
      CKD(cuMemsetD8Async(winDev + off, v, 13, reinterpret_cast<CUstream>(S1)));
      std::memset(winBytes + off, v, 13);
    }
    winMix<<<kSGrid, kBlock, 0, S1>>>(out, kS, u + 2);
    CKL();
    winMixHost(hout, win, kS, u + 2);
    if (i % 7 == 6) {  // a stream-ordered block in, with the default kind
      uint32_t* blk = nullptr;
      CK(cudaMallocAsync(reinterpret_cast<void**>(&blk), 256, S1));
      const size_t from = size_t(i % 11) * 97, symOff2 = size_t(i % 3) * 512;
      CK(cudaMemcpyAsync(blk, src + from, 256, cudaMemcpyDeviceToDevice, S1));
      CK(cudaMemcpyToSymbolAsync(g_r15Win, blk, 256, symOff2, cudaMemcpyDefault, S1));
      CK(cudaFreeAsync(blk, S1));
      std::memcpy(winBytes + symOff2, hsrc.data() + from, 256);
    }
    CK(cudaEventRecord(e1, S1));
    CK(cudaStreamWaitEvent(S2, e1, 0));
    const size_t size2 = kSizes[(i + 1) % 4], symOff3 = kSymOff[(i + 2) % 3], dOff = size_t(i % 3) * 1000;
    CK(cudaMemcpyFromSymbolAsync(dst + dOff, g_r15Win, size2, symOff3, cudaMemcpyDeviceToDevice, S2));
    std::memcpy(hdst.data() + dOff, winBytes + symOff3, size2);
    mix<<<kSGrid, kBlock, 0, S2>>>(dst2, dst, kS, u + 3);
    CKL();
    mixHost(hdst2, hdst, kS, u + 3);
    CK(cudaEventRecord(e2, S2));
    CK(cudaStreamWaitEvent(S1, e2, 0));
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      checkMirror("out", i, out, hout);
      checkMirror("dst", i, dst, hdst);
      checkMirror("dst2", i, dst2, hdst2);
      std::vector<uint32_t> w(1024);
      CK(cudaMemcpyFromSymbol(w.data(), g_r15Win, 4096));
      if (w != win) {
        std::printf("FAIL step %d: the window differs from the host mirror\n", i);
        std::exit(1);
      }
      print("window", i, hostDigest(w.data(), 4096));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", 0, deviceDigest(out, kS * 4) ^ deviceDigest(dst2, kS * 4));
}

// ---------------------------------------------------------------- ctx_op_interleave

// A library of two kernels whose __device__ globals (a base offset and a
// launch counter) exist once per context. Generated by nvcc -ptx -arch=sm_90 from:
//   __device__ unsigned g_base;
//   __device__ unsigned g_count;
//   extern "C" __global__ void ctxStamp(unsigned* out, const unsigned* in, int n, unsigned salt) {
//     int k = blockIdx.x * blockDim.x + threadIdx.x;
//     if (k < n) {
//       unsigned b = g_base, c = g_count;
//       unsigned v = out[b + k];
//       out[b + k] = ((v << 5) | (v >> 27)) ^ (in[b + (k * 7 + 3) % n] + salt + c * 0x9e3779b9u);
//     }
//   }
//   extern "C" __global__ void ctxCount(unsigned* log, unsigned salt) {
//     if (threadIdx.x == 0 && blockIdx.x == 0) {
//       unsigned c = g_count;
//       log[(g_base ? 256u : 0u) + (c & 255u)] = c * 31u + salt;
//       g_count = c + 1u;
//     }
//   }
const char* const kCtxLibPtx = R"PTX(.version 9.0
.target sm_90
.address_size 64
.global .align 4 .u32 g_base;
.global .align 4 .u32 g_count;
.visible .entry ctxStamp(
	.param .u64 ctxStamp_param_0,
	.param .u64 ctxStamp_param_1,
	.param .u32 ctxStamp_param_2,
	.param .u32 ctxStamp_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<19>;
	.reg .b64 	%rd<9>;
	ld.param.u64 	%rd1, [ctxStamp_param_0];
	ld.param.u64 	%rd2, [ctxStamp_param_1];
	ld.param.u32 	%r2, [ctxStamp_param_2];
	ld.param.u32 	%r3, [ctxStamp_param_3];
	mov.u32 	%r4, %ctaid.x;
	mov.u32 	%r5, %ntid.x;
	mov.u32 	%r6, %tid.x;
	mad.lo.s32 	%r1, %r4, %r5, %r6;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd1;
	ld.global.u32 	%r7, [g_base];
	add.s32 	%r8, %r7, %r1;
	mul.wide.u32 	%rd4, %r8, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.u32 	%r9, [%rd5];
	shf.l.wrap.b32 	%r10, %r9, %r9, 5;
	mad.lo.s32 	%r11, %r1, 7, 3;
	rem.s32 	%r12, %r11, %r2;
	add.s32 	%r13, %r12, %r7;
	cvta.to.global.u64 	%rd6, %rd2;
	mul.wide.u32 	%rd7, %r13, 4;
	add.s64 	%rd8, %rd6, %rd7;
	ld.global.u32 	%r14, [g_count];
	mad.lo.s32 	%r15, %r14, -1640531527, %r3;
	ld.global.u32 	%r16, [%rd8];
	add.s32 	%r17, %r15, %r16;
	xor.b32  	%r18, %r17, %r10;
	st.global.u32 	[%rd5], %r18;
$L__BB0_2:
	ret;
}
.visible .entry ctxCount(
	.param .u64 ctxCount_param_0,
	.param .u32 ctxCount_param_1
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<12>;
	.reg .b64 	%rd<5>;
	ld.param.u64 	%rd1, [ctxCount_param_0];
	ld.param.u32 	%r1, [ctxCount_param_1];
	mov.u32 	%r2, %tid.x;
	mov.u32 	%r3, %ctaid.x;
	or.b32  	%r4, %r2, %r3;
	setp.ne.s32 	%p1, %r4, 0;
	@%p1 bra 	$L__BB1_2;
	cvta.to.global.u64 	%rd2, %rd1;
	ld.global.u32 	%r5, [g_count];
	mad.lo.s32 	%r6, %r5, 31, %r1;
	ld.global.u32 	%r7, [g_base];
	setp.eq.s32 	%p2, %r7, 0;
	selp.b32 	%r8, 0, 256, %p2;
	and.b32  	%r9, %r5, 255;
	or.b32  	%r10, %r8, %r9;
	mul.wide.u32 	%rd3, %r10, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.u32 	[%rd4], %r6;
	add.s32 	%r11, %r5, 1;
	st.global.u32 	[g_count], %r11;
$L__BB1_2:
	ret;
}
)PTX";

// What a tool could get wrong: the same CUkernel, the same parameter bytes,
// the same grid and the NULL stream, launched in two contexts in turn: only
// the context current at the call says where it runs (which NULL stream,
// which copy of the library's globals). A tool that matches such a launch
// against one made in the other context, or builds or launches its graph
// there, changes the other context's counter and the half of the output that
// context's base names.
// Eagerly deterministic: each context's work is ordered by its own NULL
// stream; the two contexts write disjoint halves of the output and the log
// and share only read-only input; the host reads after synchronizing both.
void ctxOpInterleave() {
  CK(cudaFree(nullptr));
  CUcontext ctx[2] = {nullptr, nullptr};
  CKD(cuCtxGetCurrent(&ctx[0]));
  CUdevice dev;
  CKD(cuCtxGetDevice(&dev));
  CKD(cuCtxCreate(&ctx[1], nullptr, 0, dev));  // current now
  CKD(cuCtxSetCurrent(ctx[0]));
  CUlibrary lib = nullptr;
  CKD(cuLibraryLoadData(&lib, kCtxLibPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kStamp = nullptr, kCount = nullptr;
  CKD(cuLibraryGetKernel(&kStamp, lib, "ctxStamp"));
  CKD(cuLibraryGetKernel(&kCount, lib, "ctxCount"));
  uint32_t *out = nullptr, *in = nullptr, *log = nullptr;
  const unsigned flags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP;
  CKD(cuMemHostAlloc(reinterpret_cast<void**>(&out), 2 * kS * 4, flags));
  CKD(cuMemHostAlloc(reinterpret_cast<void**>(&in), 2 * kS * 4, flags));
  CKD(cuMemHostAlloc(reinterpret_cast<void**>(&log), 512 * 4, flags));
  std::vector<uint32_t> hout = hostPattern(15301, 2 * kS), hin = hostPattern(15302, 2 * kS), hlog(512, 0u);
  std::memcpy(out, hout.data(), hout.size() * 4);
  std::memcpy(in, hin.data(), hin.size() * 4);
  std::memset(log, 0, 512 * 4);
  CUdeviceptr dOut[2], dIn[2], dLog[2], gBase[2], gCount[2], devBuf[2];
  std::vector<uint32_t> hdev[2];
  uint32_t count[2] = {0, 0};
  for (int c = 0; c < 2; ++c) {
    CKD(cuCtxSetCurrent(ctx[c]));
    CKD(cuMemHostGetDevicePointer(&dOut[c], out, 0));
    CKD(cuMemHostGetDevicePointer(&dIn[c], in, 0));
    CKD(cuMemHostGetDevicePointer(&dLog[c], log, 0));
    size_t bytes = 0;
    CKD(cuLibraryGetGlobal(&gBase[c], &bytes, lib, "g_base"));
    CKD(cuLibraryGetGlobal(&gCount[c], &bytes, lib, "g_count"));
    const uint32_t base = c ? uint32_t(kS) : 0u, zero = 0;
    CKD(cuMemcpyHtoD(gBase[c], &base, 4));
    CKD(cuMemcpyHtoD(gCount[c], &zero, 4));
    CKD(cuMemAlloc(&devBuf[c], 2 * kS * 4));
    hdev[c] = hostPattern(15310 + uint32_t(c), 2 * kS);
    CKD(cuMemcpyHtoD(devBuf[c], hdev[c].data(), 2 * kS * 4));
    CKD(cuCtxSynchronize());
  }
  CKD(cuCtxSetCurrent(ctx[0]));
  if (dOut[0] != dOut[1] || dIn[0] != dIn[1] || dLog[0] != dLog[1]) {
    std::printf("SKIP portable mapped memory has another device address in the second context\n");
    return;
  }
  auto stampHost = [&](int c, const std::vector<uint32_t>& src, uint32_t salt) {
    const size_t b = c ? size_t(kS) : 0;
    for (int k = 0; k < kS; ++k) {
      const uint32_t v = hout[b + size_t(k)];
      hout[b + size_t(k)] = rotl(v, 5) ^ (src[b + size_t((k * 7 + 3) % kS)] + salt + count[c] * 0x9e3779b9u);
    }
  };
  auto launch = [&](CUkernel k, unsigned grid, unsigned block, void** params) {
    CKD(cuLaunchKernel(reinterpret_cast<CUfunction>(k), grid, 1, 1, block, 1, 1, 0, nullptr, params, nullptr));
  };
  int n = kS, setDeviceKept = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 16u;
    const int flip = i % 3 == 2 ? 1 : 0;
    for (int j = 0; j < 6; ++j) {
      const int c = (j + flip) & 1;
      if (c == 0 && i % 2) {  // the primary context, through the runtime
        CK(cudaSetDevice(0));
        CUcontext now = nullptr;
        CKD(cuCtxGetCurrent(&now));
        if (now != ctx[0]) {  // the runtime kept the current context: say so, and switch
          ++setDeviceKept;
          CKD(cuCtxSetCurrent(ctx[0]));
        }
      } else {
        CKD(cuCtxSetCurrent(ctx[c]));
      }
      switch (j / 2) {
        case 0: {  // identical in both contexts
          uint32_t salt = u;
          void* params[] = {&dOut[c], &dIn[c], &n, &salt};
          launch(kStamp, kSGrid, kBlock, params);
          stampHost(c, hin, salt);
          break;
        }
        case 1: {  // this context's device memory: a memset, then a stamp reading it
          const size_t b = c ? size_t(kS) : 0, off = b + size_t(i % 5) * 100 + size_t(c) * 7;
          const uint32_t v = hash32(uint32_t(i) * 2u + uint32_t(c));
          CKD(cuMemsetD32Async(devBuf[c] + 4 * off, v, 64, nullptr));
          std::fill(hdev[c].begin() + ptrdiff_t(off), hdev[c].begin() + ptrdiff_t(off + 64), v);
          uint32_t salt = u + 7;
          void* params[] = {&dOut[c], &devBuf[c], &n, &salt};
          launch(kStamp, kSGrid, kBlock, params);
          stampHost(c, hdev[c], salt);
          break;
        }
        default: {  // identical in both contexts
          uint32_t salt = u + 9;
          void* params[] = {&dLog[c], &salt};
          launch(kCount, 1, 32, params);
          hlog[(c ? 256u : 0u) + (count[c] & 255u)] = count[c] * 31u + salt;
          ++count[c];
          break;
        }
      }
    }
    if (at(i)) {
      uint32_t got[2];
      for (int c = 0; c < 2; ++c) {
        CKD(cuCtxSetCurrent(ctx[c]));
        CKD(cuCtxSynchronize());
        CKD(cuMemcpyDtoH(&got[c], gCount[c], 4));
      }
      CKD(cuCtxSetCurrent(ctx[0]));
      std::printf("step %d: launches counted %u (primary) %u (second), mirror %u %u; cudaSetDevice kept the "
                  "second context %d times\n",
                  i, got[0], got[1], count[0], count[1], setDeviceKept);
      if (got[0] != count[0] || got[1] != count[1] || std::memcmp(out, hout.data(), hout.size() * 4) ||
          std::memcmp(log, hlog.data(), hlog.size() * 4)) {
        std::printf("FAIL step %d: a context's output, log or counter differs from the host mirror\n", i);
        std::exit(1);
      }
      print("out", i, hostDigest(out, 2 * kS * 4));
      print("log", i, hostDigest(log, 512 * 4));
    }
  }
  for (int c = 1; c >= 0; --c) {
    CKD(cuCtxSetCurrent(ctx[c]));
    CKD(cuCtxSynchronize());
    CKD(cuMemFree(devBuf[c]));
  }
  print("end", int(count[0] + count[1]), hostDigest(out, 2 * kS * 4) ^ hostDigest(log, 512 * 4));
  CKD(cuCtxDestroy(ctx[1]));
  CKD(cuCtxSetCurrent(ctx[0]));
  CKD(cuMemFreeHost(out));
  CKD(cuMemFreeHost(in));
  CKD(cuMemFreeHost(log));
}

// ---------------------------------------------------------------- capture_mode_exchange

// What a tool could get wrong: the program's global-mode capture of a side
// stream while the same thread goes on launching on its main stream (not
// captured), asking capture statuses and allocating with the thread's mode
// exchanged to relaxed; in turn a call the global mode forbids (a cudaMalloc
// without the exchange, a query of the capturing stream), which the driver
// refuses and which invalidates the capture, and a query of an event completed
// long ago. A tool must flush what it holds before the capture, make no call
// of its own the capture forbids, not answer for the program, and pick the
// main loop up again afterwards.
// Eagerly deterministic: the captured kernels touch only c and d; the graph
// runs on C after C waited on M's event, and M waits on C's event before it
// reads d; every code is the driver's rule, not a timing.
void captureModeExchange() {
  cudaStream_t M = nonBlockingStream(), C = nonBlockingStream();
  cudaEvent_t eM = untimedEvent(), eC = untimedEvent(), eOld = untimedEvent();
  uint32_t *a = deviceBuffer(15401), *b = deviceBuffer(15402), *c = deviceBuffer(15403), *d = deviceBuffer(15404);
  preload(mix);
  preload(mix2);
  CK(cudaEventRecord(eOld, C));
  CK(cudaDeviceSynchronize());
  Digest codes[3];
  int launched = 0;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    mix<<<kGrid, kBlock, 0, M>>>(a, b, kN, u);
    mix<<<kGrid, kBlock, 0, M>>>(b, a, kN, u + 1);
    CKL();
    if (i % 10 == 5) {
      const int variant = (i / 10) % 3;
      Digest& cd = codes[variant];
      Digest line;
      auto note = [&](int code) {
        addCode(cd, code);
        addCode(line, code);
      };
      CK(cudaStreamBeginCapture(C, cudaStreamCaptureModeGlobal));
      mix<<<kGrid, kBlock, 0, C>>>(d, c, kN, u + 2);  // captured
      note(int(keep(cudaGetLastError())));
      mix<<<kGrid, kBlock, 0, M>>>(a, b, kN, u + 3);  // runs
      CKL();
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      note(int(keep(cudaStreamIsCapturing(M, &st))));
      note(int(st));
      note(int(keep(cudaStreamIsCapturing(C, &st))));
      note(int(st));
      note(int(keep(cudaStreamIsCapturing(cudaStreamLegacy, &st))));
      note(int(st));
      size_t deps = 0;
      const cudaGraphNode_t* depNodes = nullptr;
      note(int(keep(cudaStreamGetCaptureInfo(C, &st, nullptr, nullptr, &depNodes, nullptr, &deps))));
      note(int(st));
      note(int(deps));
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      CK(cudaThreadExchangeStreamCaptureMode(&mode));
      note(int(mode));
      void* p = nullptr;
      note(int(keep(cudaMalloc(&p, 1 << 16))));
      CK(cudaThreadExchangeStreamCaptureMode(&mode));
      note(int(mode));
      void* q = nullptr;
      if (variant == 1) note(int(keep(cudaMalloc(&q, 1 << 16))));  // forbidden in a global capture
      if (variant == 2) {
        note(int(keep(cudaEventQuery(eOld))));
        note(int(keep(cudaStreamQuery(C))));  // the capturing stream: refused, invalidates the capture
      }
      mix<<<kGrid, kBlock, 0, C>>>(c, d, kN, u + 4);  // captured, or refused once invalidated
      note(int(keep(cudaGetLastError())));
      cudaGraph_t g = nullptr;
      const cudaError_t end = keep(cudaStreamEndCapture(C, &g));
      note(int(end));
      if (p) CK(cudaFree(p));
      if (q) CK(cudaFree(q));
      if (end == cudaSuccess && g) {
        cudaGraphExec_t exec = nullptr;
        CK(cudaGraphInstantiate(&exec, g, 0));
        CK(cudaEventRecord(eM, M));
        CK(cudaStreamWaitEvent(C, eM, 0));
        CK(cudaGraphLaunch(exec, C));
        CK(cudaEventRecord(eC, C));
        CK(cudaStreamWaitEvent(M, eC, 0));
        CK(cudaGraphExecDestroy(exec));
        ++launched;
      }
      if (g) CK(cudaGraphDestroy(g));
      if (i < 40) std::printf("step %d: variant %d end %d codes %016llx\n", i, variant, int(end), ull(line.h));
    }
    mix2<<<kGrid, kBlock, 0, M>>>(a, b, d, kN, u + 5);  // d: the graph's, after the join
    CKL();
    if (at(i)) {
      CK(cudaStreamSynchronize(M));
      std::printf("step %d: graphs launched %d\n", i, launched);
      print("codes_exchange", i, codes[0].h);
      print("codes_malloc", i, codes[1].h);
      print("codes_queries", i, codes[2].h);
      print("abd", i, deviceDigest(a, kN * 4) ^ deviceDigest(b, kN * 4) ^ deviceDigest(d, kN * 4));
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", launched, deviceDigest(a, kN * 4) ^ deviceDigest(c, kN * 4) ^ deviceDigest(d, kN * 4));
}

// ---------------------------------------------------------------- adjacent_copy_ranges

// What a tool could get wrong: copies inside one allocation whose source and
// destination touch or are 1 to 3 bytes apart, at every alignment; a copy
// kernel that reads aligned source words must take no byte from the
// destination beside it (which other threads are writing), and a patched
// address that changes the alignment class must take the other code path.
// Eagerly deterministic: one stream; ranges never overlap.
void adjacentCopyRanges() {
  constexpr size_t kBytes = 65536, kQuarter = 16384;
  constexpr size_t kSizes[10] = {1, 3, 15, 16, 17, 63, 64, 65, 255, 4097};
  cudaStream_t S = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(S);
  uint8_t* pool = reinterpret_cast<uint8_t*>(deviceBuffer(15501, int(kBytes / 4)));
  const auto dp = reinterpret_cast<CUdeviceptr>(pool);
  std::vector<uint32_t> init = hostPattern(15501, int(kBytes / 4));
  std::vector<uint8_t> h(kBytes);
  std::memcpy(h.data(), init.data(), kBytes);
  const int words = int(kBytes / 4);
  preload(byteStir);
  Digest shapes;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    byteStir<<<words / kBlock, kBlock, 0, S>>>(reinterpret_cast<uint32_t*>(pool), words, u);
    CKL();
    byteStirHost(h, u);
    size_t ends[4];
    for (int c = 0; c < 4; ++c) {
      const size_t size = kSizes[size_t(i + c) % 10], gap = size_t(i / 10 + c) % 4;
      const size_t srcMod = size_t(i * 3 + c) % 16, dstMod = size_t(i * 5 + c * 7) % 16;
      const size_t base = size_t(c) * kQuarter + 64;
      size_t src, dst;
      if ((i + c) % 2 == 0) {  // the destination right after the source
        src = base + srcMod;
        dst = src + size + gap;
      } else {  // the destination right before the source
        dst = base + dstMod;
        src = dst + size + gap;
      }
      shapes.add(uint64_t(src % 16) << 8 | uint64_t(dst % 16));
      switch (c) {
        case 0: CK(cudaMemcpyAsync(pool + dst, pool + src, size, cudaMemcpyDeviceToDevice, S)); break;
        case 1: CKD(cuMemcpyDtoDAsync(dp + dst, dp + src, size, cs)); break;
        case 2: CK(cudaMemcpyAsync(pool + dst, pool + src, size, cudaMemcpyDefault, S)); break;
        default: CKD(cuMemcpyAsync(dp + dst, dp + src, size, cs)); break;
      }
      std::memcpy(h.data() + dst, h.data() + src, size);
      ends[c] = dst + size;
    }
    // Memsets touching copies' ends: 8-bit right after copy 0's destination,
    // 16-bit at the next even byte after copy 1's.
    const uint8_t v8 = uint8_t(i * 7 + 1);
    CKD(cuMemsetD8Async(dp + ends[0], v8, 7, cs));
    std::memset(h.data() + ends[0], v8, 7);
    const size_t e16 = (ends[1] + 1) & ~size_t(1);
    const uint16_t v16 = uint16_t(0x8001u + uint32_t(i) * 257u);
    CKD(cuMemsetD16Async(dp + e16, v16, 5, cs));
    for (size_t e = 0; e < 5; ++e) std::memcpy(h.data() + e16 + 2 * e, &v16, 2);
    byteStir<<<words / kBlock, kBlock, 0, S>>>(reinterpret_cast<uint32_t*>(pool), words, u + 1);
    CKL();
    byteStirHost(h, u + 1);
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      checkMirror("pool", i, pool, h);
      print("alignments", i, shapes.h);
    }
  }
  CK(cudaStreamSynchronize(S));
  print("end", 0, deviceDigest(pool, kBytes));
}

// ---------------------------------------------------------------- legacy_event_relay

// What a tool could get wrong: the legacy stream does no work here, only event
// records and waits (and a memset on irregular steps), yet it is the only
// path from the producer on a blocking stream to the consumer on a
// non-blocking one (a record on the legacy stream completes after earlier
// blocking-stream work) and back (blocking-stream work waits for the legacy
// stream, which waited on the consumer's event). A graph of these ops must
// carry that implicit synchronization.
// Eagerly deterministic: every cross-stream access is ordered through the
// legacy stream as above; the host reads managed memory after synchronizing
// an event recorded on the legacy stream after the kernel that wrote it.
void legacyEventRelay() {
  cudaStream_t blk[3];
  blk[0] = blockingStream();
  CUstream d = nullptr;
  CKD(cuStreamCreate(&d, CU_STREAM_DEFAULT));
  blk[1] = reinterpret_cast<cudaStream_t>(d);
  blk[2] = cudaStreamPerThread;  // blocking against the legacy stream
  cudaStream_t nb[2] = {nonBlockingStream(), nonBlockingStream()};
  cudaEvent_t eL = untimedEvent(), eL2 = untimedEvent(), eY[2] = {untimedEvent(), untimedEvent()};
  uint32_t* P[3];
  uint32_t* Q[2];
  std::vector<uint32_t> hP[3], hQ[2];
  for (int k = 0; k < 3; ++k) {
    P[k] = deviceBuffer(15601 + uint32_t(k), kS);
    hP[k] = hostPattern(15601 + uint32_t(k));
  }
  for (int k = 0; k < 2; ++k) {
    Q[k] = deviceBuffer(15611 + uint32_t(k), kS);
    hQ[k] = hostPattern(15611 + uint32_t(k));
  }
  uint32_t* Z = deviceBuffer(15621, kS);
  std::vector<uint32_t> hZ = hostPattern(15621);
  const bool managedOk = deviceAttribute(cudaDevAttrConcurrentManagedAccess) != 0;
  uint32_t* Mg = nullptr;
  CK(cudaMallocManaged(&Mg, 64 * 4));
  std::memset(Mg, 0, 64 * 4);
  preload(mix);
  preload(mix2);
  preload(copy64);
  CK(cudaDeviceSynchronize());
  int zsets = 0;
  Digest seen;
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    const int x = i % 3, y = i % 2, x2 = (i + 1) % 3;
    mix<<<kSGrid, kBlock, 0, blk[x]>>>(P[x], Q[1 - y], kS, u);
    CKL();
    mixHost(hP[x], hQ[1 - y], kS, u);
    if (irregular(i, 15, 5)) {
      const int v = (i * 13) & 0xff;
      CK(cudaMemsetAsync(Z, v, 256, cudaStreamLegacy));
      std::memset(hZ.data(), v, 256);
      ++zsets;
    }
    CK(cudaEventRecord(eL, i % 2 ? cudaStreamLegacy : cudaStream_t(0)));
    CK(cudaStreamWaitEvent(nb[y], eL, 0));
    mix2<<<kSGrid, kBlock, 0, nb[y]>>>(Q[y], P[x], Z, kS, u + 1);
    CKL();
    mix2Host(hQ[y], hP[x], hZ, kS, u + 1);
    CK(cudaEventRecord(eY[y], nb[y]));
    CK(cudaStreamWaitEvent(cudaStreamLegacy, eY[y], 0));
    mix<<<kSGrid, kBlock, 0, blk[x2]>>>(P[x2], Q[y], kS, u + 2);
    CKL();
    mixHost(hP[x2], hQ[y], kS, u + 2);
    if (i % 4 == 3) {
      copy64<<<1, 64, 0, blk[x2]>>>(Mg, P[x2], u);
      CKL();
      CK(cudaEventRecord(eL2, cudaStreamLegacy));  // completes after blk[x2]'s kernel
      CK(cudaEventSynchronize(eL2));
      uint32_t got[64];
      if (managedOk) std::memcpy(got, Mg, sizeof got);
      else CK(cudaMemcpy(got, Mg, sizeof got, cudaMemcpyDeviceToHost));
      for (unsigned t = 0; t < 64; ++t) {
        if (got[t] != (hP[x2][t * 61u] ^ u)) {
          std::printf("FAIL step %d: managed word %u differs from the host mirror\n", i, t);
          std::exit(1);
        }
      }
      seen.add(got, sizeof got);
    }
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      std::printf("step %d: legacy memsets %d\n", i, zsets);
      for (int k = 0; k < 3; ++k) checkMirror(k == 0 ? "P0" : k == 1 ? "P1" : "P2", i, P[k], hP[k]);
      checkMirror("Q0", i, Q[0], hQ[0]);
      checkMirror("Q1", i, Q[1], hQ[1]);
      print("managed", i, seen.h);
    }
  }
  CK(cudaDeviceSynchronize());
  print("end", zsets, deviceDigest(P[0], kS * 4) ^ deviceDigest(Q[1], kS * 4) ^ seen.h);
  CK(cudaFree(Mg));
  CKD(cuStreamDestroy(d));
}

// ---------------------------------------------------------------- helper_legacy_writes

// What a tool could get wrong: the helper thread's synchronous copy into X
// (a host copy on the legacy stream, which a tool issues at once) is ordered
// after the main thread's kernels that read X only by the legacy stream's
// implicit synchronization with the main thread's blocking stream; the main
// thread's next kernel reads Y, which the helper's per-thread stream wrote,
// ordered only through the helper's legacy memset behind it. A tool holding
// the main thread's kernels must issue them before the helper's copy reaches
// the driver, and must not hold the helper's legacy memset past them.
// Eagerly deterministic: the threads take turns (atomics; neither makes a
// CUDA call while it waits); every access across streams is ordered by the
// legacy stream's implicit synchronization with blocking streams (B, the
// helper's per-thread stream).
void helperLegacyWrites() {
  cudaStream_t B = blockingStream();
  uint32_t *a = deviceBuffer(15701, kS), *c = deviceBuffer(15702, kS), *X = deviceBuffer(15703, kS),
           *Y = deviceBuffer(15704, kS), *Z = zeroBuffer(4);
  std::vector<uint32_t> ha = hostPattern(15701), hc = hostPattern(15702), hX = hostPattern(15703),
                        hY = hostPattern(15704);
  preload(mix);
  preload(mix2);
  CK(cudaDeviceSynchronize());
  auto xFor = [](int i) {
    std::vector<uint32_t> v(kS);
    for (int k = 0; k < kS; ++k) v[size_t(k)] = hash32(uint32_t(i) * 7919u + uint32_t(k));
    return v;
  };
  auto yStep = [&](std::vector<uint32_t>& y, const std::vector<uint32_t>& x, int i) {  // the helper's writes of Y
    std::memset(y.data(), (i * 7) & 0xff, 512);
    mixHost(y, x, kS, uint32_t(i) * 8u + 3u);
  };
  std::atomic<int> turn{0};
  std::atomic<int> helperFails{0};
  std::thread helper([&] {
    std::vector<uint32_t> myY = hostPattern(15704);
    for (int i = 0; i < g_iters; ++i) {
      while (turn.load(std::memory_order_acquire) != 2 * i + 1) std::this_thread::yield();
      std::vector<uint32_t> fresh = xFor(i);  // pageable, scribbled once the call returned
      CK(cudaMemcpy(X, fresh.data(), kS * 4, cudaMemcpyHostToDevice));
      std::vector<uint32_t> x = fresh;
      std::fill(fresh.begin(), fresh.end(), 0xdeadbeefu);
      CK(cudaMemset(Y, (i * 7) & 0xff, 512));
      mix<<<kSGrid, kBlock, 0, cudaStreamPerThread>>>(Y, X, kS, uint32_t(i) * 8u + 3u);
      CKL();
      CK(cudaMemsetAsync(Z, i & 0xff, 16, cudaStreamLegacy));  // behind the per-thread kernel
      yStep(myY, x, i);
      if (i % 5 == 4) {
        std::vector<uint32_t> got(kS);
        CK(cudaMemcpy(got.data(), Y, kS * 4, cudaMemcpyDeviceToHost));
        if (got != myY) helperFails.fetch_add(1);
      }
      turn.store(2 * i + 2, std::memory_order_release);
    }
  });
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 8u;
    mix<<<kSGrid, kBlock, 0, B>>>(a, X, kS, u);
    mix<<<kSGrid, kBlock, 0, B>>>(c, a, kS, u + 1);
    CKL();
    mixHost(ha, hX, kS, u);
    mixHost(hc, ha, kS, u + 1);
    turn.store(2 * i + 1, std::memory_order_release);
    while (turn.load(std::memory_order_acquire) != 2 * i + 2) std::this_thread::yield();
    hX = xFor(i);
    yStep(hY, hX, i);
    mix2<<<kSGrid, kBlock, 0, B>>>(a, X, Y, kS, u + 2);
    CKL();
    mix2Host(ha, hX, hY, kS, u + 2);
    if (at(i)) {
      CK(cudaDeviceSynchronize());
      if (helperFails.load()) {
        std::printf("FAIL step %d: the helper read Y back unlike its host mirror %d times\n", i, helperFails.load());
        std::exit(1);
      }
      checkMirror("a", i, a, ha);
      checkMirror("c", i, c, hc);
      checkMirror("Y", i, Y, hY);
    }
  }
  helper.join();
  CK(cudaDeviceSynchronize());
  print("end", helperFails.load(), deviceDigest(a, kS * 4) ^ deviceDigest(Y, kS * 4) ^ deviceDigest(Z, 16));
}

// ---------------------------------------------------------------- memset_overlap_sizes

// What a tool could get wrong: six memsets of one buffer per step, each
// overlapping the one before, of three element sizes, 1-D and 2-D, rows
// starting at every alignment phase: their order, the element pattern at row
// starts and values patched into nodes (or memset kernels) of the right
// element size. A refused memset (whatever the driver makes of an odd pitch)
// is digested and left out of the mirror.
// Eagerly deterministic: one stream.
void memsetOverlapSizes() {
  constexpr size_t kBytes = 16384;
  constexpr int kWords = int(kBytes / 4);
  cudaStream_t S = nonBlockingStream();
  const auto cs = reinterpret_cast<CUstream>(S);
  uint32_t* W = deviceBuffer(15801, kWords);
  uint32_t* acc = deviceBuffer(15802, kWords);
  const auto wp = reinterpret_cast<CUdeviceptr>(W);
  auto* wb = reinterpret_cast<uint8_t*>(W);
  std::vector<uint32_t> init = hostPattern(15801, kWords), hacc = hostPattern(15802, kWords);
  std::vector<uint8_t> h(kBytes);
  std::memcpy(h.data(), init.data(), kBytes);
  preload(byteStir);
  preload(accFold);
  Digest codes;
  int refused = 0;
  auto set2D = [&](size_t off, size_t pitch, const void* value, size_t elem, size_t width, size_t height) {
    for (size_t r = 0; r < height; ++r)
      for (size_t e = 0; e < width; ++e) std::memcpy(h.data() + off + r * pitch + e * elem, value, elem);
  };
  auto noted = [&](CUresult r) {
    addCode(codes, int(r));
    if (r != CUDA_SUCCESS) ++refused;
    return r == CUDA_SUCCESS;
  };
  for (int i = 0; i < g_iters; ++i) {
    const uint32_t u = uint32_t(i) * 4u;
    byteStir<<<kWords / kBlock, kBlock, 0, S>>>(W, kWords, u);
    CKL();
    byteStirHost(h, u);
    const size_t o1 = 5 + size_t(i % 3) * 1111, len1 = 300 + size_t(i % 2) * 33;
    const int v1 = (i * 17) & 0xff;
    addCode(codes, int(keep(cudaMemsetAsync(wb + o1, v1, len1, S))));
    std::memset(h.data() + o1, v1, len1);
    const size_t o2 = (o1 + len1 - 10) & ~size_t(1);  // over R1's tail
    const uint16_t v2 = uint16_t((uint32_t(i) * 2654435761u) >> 16);
    if (noted(cuMemsetD16Async(wp + o2, v2, 64, cs))) set2D(o2, 0, &v2, 2, 64, 1);
    const size_t o3 = (o2 + 100) & ~size_t(3);  // over R2's tail
    const uint32_t v3 = hash32(uint32_t(i));
    if (noted(cuMemsetD32Async(wp + o3, v3, 40, cs))) set2D(o3, 0, &v3, 4, 40, 1);
    // 2-D: an odd pitch (rows at every byte phase), period 4.
    const size_t o4 = 3 + size_t(i % 4) * 1500 + 4000;
    const uint8_t v4 = uint8_t(i * 5 + 3);
    if (noted(cuMemsetD2D8Async(wp + o4, 301, v4, 200, 5, cs))) set2D(o4, 301, &v4, 1, 200, 5);
    // A pitch of 2 mod 4 (rows alternately 4-aligned and not), period 5.
    const size_t o5 = 9002 + size_t(i % 5) * 1400;
    const uint16_t v5 = uint16_t(0x1234u + uint32_t(i) * 3u);
    if (noted(cuMemsetD2D16Async(wp + o5, 258, v5, 60, 6, cs))) set2D(o5, 258, &v5, 2, 60, 6);
    // A pitch of 4 mod 16, over R1 to R3, period 3.
    const size_t o6 = 4 * (100 + size_t(i % 3) * 300);
    const uint32_t v6 = 0xa5000000u ^ uint32_t(i);
    if (noted(cuMemsetD2D32Async(wp + o6, 276, v6, 50, 7, cs))) set2D(o6, 276, &v6, 4, 50, 7);
    accFold<<<kWords / kBlock, kBlock, 0, S>>>(acc, W, kWords, u + 1);
    CKL();
    accFoldHost(hacc, h, kWords, u + 1);
    if (at(i)) {
      CK(cudaStreamSynchronize(S));
      std::printf("step %d: memsets refused %d\n", i, refused);
      print("codes", i, codes.h);
      checkMirror("W", i, W, h);
      checkMirror("acc", i, acc, hacc);
    }
  }
  CK(cudaStreamSynchronize(S));
  print("end", refused, deviceDigest(W, kBytes) ^ deviceDigest(acc, kBytes));
}

constexpr Scenario kScenarios[] = {
    {"sync_symbol_legacy", syncSymbolLegacy},
    {"symbol_async_cycle", symbolAsyncCycle},
    {"ctx_op_interleave", ctxOpInterleave},
    {"capture_mode_exchange", captureModeExchange},
    {"adjacent_copy_ranges", adjacentCopyRanges},
    {"legacy_event_relay", legacyEventRelay},
    {"helper_legacy_writes", helperLegacyWrites},
    {"memset_overlap_sizes", memsetOverlapSizes},
};

}  // namespace

int main(int argc, char** argv) { return runScenarios(argc, argv, kScenarios); }
