// sim_review11_decode: the eleventh red-team round's review of LLM inference
// engine patterns (llama.cpp/ggml-cuda, vLLM-like servers) as they reach the
// driver, on graft's simulated driver. A "request" is a decode loop: a token
// goes up (cuMemcpyHtoDAsync), an embedding gather (a source pointer that
// depends on the token), L = 2 layers of (q = mix(h); KV row append at
// kv + 8 * n_past: a destination that moves by a row every step; attention
// reading an older row with n_past passed by value and a grid of
// ceil((n_past + 1) / B) blocks, so the grid changes every B steps; ffn),
// an lm head and a sampler, and the next token comes back
// (cuMemcpyDtoHAsync). The host computes every value alongside (a mirror of
// every device word the kernels touch) and reads results back with checked
// copies. Every kernel carries a unique tag (a 4th by-value parameter); after
// full synchronizations the executed trace is scanned: every tagged kernel
// must have run exactly once, with the grid, block, dynamic shared memory
// and (pdl-attrs) launch attributes it was launched with (a replay of a
// stale grid, a lost or duplicated kernel is caught even where values cannot
// show it). --expect-graphs counts only graft's graph effects (the
// program's own graph launches are subtracted from the simulator's count).
//
//   sim_review11_decode --mode MODE [--steps N] [--expect-graphs]
// (N: decode steps; default 200.)
//
// decode-grid       one request on a non-blocking stream; the token goes up
//                   from pinned memory and comes back to pinned memory with a
//                   cuStreamSynchronize every step; B = 16. graft must patch
//                   the moving pointers and n_past, and take each new grid
//                   for a new variant (or fall back), never replay a stale one.
// decode-nosync     teacher-forced decode (tokens known to the host, sent
//                   from pageable memory, staged at the call), no per-step
//                   sync; B = 4; a pageable read-back every 37 steps, a full
//                   check every 50.
// ggml-update       as ggml-cuda: each step the program captures its decode
//                   body on s (cuStreamBeginCapture relaxed / EndCapture),
//                   instantiates once and then updates its exec from the new
//                   capture (cuGraphKernelNodeGetParams of the new graph's
//                   nodes -> cuGraphExecKernelNodeSetParams on the exec, new
//                   grids included, as cuGraphExecUpdate would), destroys the
//                   new graph and launches the exec; the embedding (HtoD of
//                   the token + two kernels) runs eagerly before, the read-back
//                   (DtoHAsync + sync) after.
// ggml-topology     the same, but the body gets one more kernel while n_past
//                   lies in odd 24-step buckets (node count changes): the
//                   "update" fails and the program destroys the exec and the
//                   old graph and instantiates again. Meanwhile a second
//                   request runs eagerly on stream t (graft may learn and hold
//                   it), joined both ways with events: t waits on an event s
//                   records after the graph launch and reads s's logits, s
//                   waits on t's event before its next embedding and reads t.
// ggml-fallback     ggml-like phases: 20 steps through the program's graph,
//                   then (too many updates) 40 steps of the same body issued
//                   eagerly (graft learns them), then graphs again, ...
// ggml-spoiled      ggml-topology where, on irregular steps, the capture is
//                   invalidated at its end (a cuMemcpyDtoHAsync to pageable
//                   memory in it: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, then
//                   EndCapture CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) and the
//                   program runs the body eagerly instead.
// graph-static      older ggml-cuda: the body is captured once; every later
//                   step the program sets each kernel node of its exec itself
//                   (cuGraphExecKernelNodeSetParams, not intercepted by graft;
//                   new pointers, n_past and grids) and launches it; an eager
//                   request on t is joined both ways, as in ggml-topology.
// prefill-decode    three requests on one stream and the same buffers: a
//                   prefill (P tokens up from pageable memory, P x L row
//                   kernels, a batched attention of grid (ceil(P / B), P)),
//                   then decode from n_past = P; P = 13, 29, 13 (the first
//                   request's shapes come back with the third), decode
//                   lengths 45 %, 35 %, 20 % of N.
// sample-pageable   greedy sampling through pageable host memory only: the
//                   token comes back by a DtoHAsync into a pageable buffer (the
//                   driver returns once it is written; no sync call) and goes up
//                   by an HtoDAsync from the same buffer.
// sample-pinned     the same through ONE pinned buffer used both ways (HtoD
//                   from it, DtoH into it, cuStreamSynchronize, the host
//                   writes the next token into it).
// batch-join        batched serving: 1..8 sequences join and leave every 5
//                   steps (grid.y = number of sequences); their positions go
//                   up every step by an HtoDAsync from a pinned staging array
//                   into a device array the kernels read; per-sequence KV
//                   rows at moving addresses; the batch's result comes back.
// vmm-grow          the KV cache lives in a virtual range (cuMemAddressReserve
//                   once); rows of 256 KiB; when the cache grows the program
//                   maps another 2 MiB chunk (cuMemCreate + cuMemMap +
//                   cuMemSetAccess) while graft may hold earlier steps (a sync
//                   only every 10 steps); each step memsets its row
//                   (cuMemsetD32Async), a kernel writes its first and last
//                   word, a DtoD copy takes the row's last 4 KiB into a ring,
//                   and a 16-byte "seam" copy reads across into the next row
//                   (over two mappings every 8th row: the driver takes it,
//                   graft's rangeOf says past-end and issues it eagerly).
// pool-async        per-step scratch from cuMemAllocAsync / cuMemFreeAsync
//                   (size by n_past bucket), KV blocks of 16 rows allocated
//                   stream-ordered as the request grows and freed at its end
//                   (three requests); a sync every 8 steps. (Also with
//                   GRAFT_POOL=1.)
// event-ring        no stream sync: each step's result goes to a pinned slot
//                   (DtoHAsync) and event E[i % 3] is recorded after it; the
//                   host polls cuEventQuery on the event recorded 2 steps
//                   before until it is ready and then reads that slot; right
//                   after each record it also asks about the new record
//                   (SUCCESS or NOT_READY both allowed); every 16 steps it
//                   polls cuStreamQuery(s) until ready and checks every word.
// two-requests      two requests on streams s1 and s2 issued alternately, with
//                   their own tokens read back; s2 waits on an event s1
//                   records after its embedding and reads it, s1 waits on an
//                   event s2 records after its lm head before its next step;
//                   the grids change at different steps (B = 16 and 12).
// spec-decode       speculative decoding: a draft of k = 3 small steps, then
//                   a verify pass of grid (ceil((n + k) / B), k); the accepted
//                   count (0..k, from the read-back) decides how many draft
//                   rows are copied into the KV cache (1..k+1 DtoD copies: the
//                   step's op count varies) and how far n_past moves.
// async-output      vLLM's async output processing: the sampled token stays on
//                   the device (the next step's embedding reads it there,
//                   double-buffered); a copy stream c waits on an event after
//                   the sampler, copies it to pinned slot i % 2 and records
//                   Ec[i % 2]; the host cuEventSynchronizes the previous
//                   step's Ec and reads that slot; no stream sync in the loop.
// device-feedback   the same without any copy: no host traffic at all, a
//                   sync every 64 steps; B = 5, so the runs graft unrolls over
//                   several steps straddle grid changes at every phase.
// layer-split       llama.cpp's layer split over two devices from one thread:
//                   embedding and layer 0 on device 0 (stream s0), an event,
//                   context switch, s1 waits, a cross-device DtoD copy of the
//                   hidden state, layer 1, lm head and sampler on device 1,
//                   read-back there; s0 waits on s1's event before the next
//                   step overwrites what s1 copied.
// output-thread     a server's output thread: the main thread issues teacher-
//                   forced steps (per-step outputs at moving addresses) and
//                   records E[i % 3]; a second host thread, for each published
//                   step, makes its copy stream wait on that event, copies
//                   the step's output to pinned memory and synchronizes its
//                   stream; the main thread syncs every 8 steps only.
// pts-threads       a thread per request: two threads decode at once, each on
//                   its per-thread default stream (the _ptsz functions, NULL),
//                   each reading its token back every step.
// pdl-attrs         the body through cuLaunchKernelEx with programmatic stream
//                   serialization and a launch priority, both changing every
//                   50 steps (checked in the trace as the kernels ran).
// smem-buckets      the attention kernel's dynamic shared memory follows the
//                   grid (48, 64, 80 KiB); before every attention launch the
//                   program sets the kernel's allowance (cuKernelSetAttribute)
//                   to exactly that, lowering and raising it, and on irregular
//                   steps first tries a launch 8 KiB above it (refused:
//                   CUDA_ERROR_INVALID_VALUE, and it must never run).
// event-recreate    per request of 40 steps, two events created anew and
//                   destroyed at its end right after the last step's ops,
//                   with no sync (driver handles come back); s records after
//                   the embedding, t waits and reads, t records, s waits
//                   before its next step.
// stream-cancel     a stream per request (non-blocking, blocking, non-blocking
//                   with a priority, in turn), 25 steps each; the last step
//                   is cancelled: the stream is destroyed right after its ops
//                   and read-back were issued, with no sync; the next request's
//                   stream gets the same handle back (other flags).
// legacy-decode     the naive C++ loop on the legacy stream: synchronous
//                   cuMemcpyHtoD / cuMemcpyDtoH for the token; the KV append on
//                   a blocking stream and the attention (legacy) reading the row
//                   just written, ordered only by implicit synchronization.
//
// Results (session snapshot's libgraft): every mode passes eagerly and under
// graft, with and without --expect-graphs (exit 3, by design of the mode:
// ggml-update, ggml-topology, ggml-spoiled, device-feedback; below), over
// --steps 200..1000, SIM_SEED 1..60 (1..150 for all but the last three
// modes written), GRAFT_SEGMENT_OPS 0/2/3/4/5/6/9 (MIN 2),
// GRAFT_MAX_VARIANTS 1/2/4/8/16/32, GRAFT_WARMUP 1/2/3/5,
// GRAFT_ASYNC_LAUNCH 0/1, GRAFT_POOL 0/1, GRAFT_IDLE_FLUSH_MS 1,
// GRAFT_LAUNCH_SPIN_US 0, SIM_ASYNC_US 0/3/5/10/20, SIM_GRAPH_LAUNCH_US
// 0/15/30/40, SIM_STEPS 0/9. No divergence found: no stale grid, block,
// shared memory or attribute, no lost, duplicated or reordered kernel, every
// code as the driver's. Weaknesses found (performance only, not divergences):
//
// 1. Variants past the 4th are built but never replayed (decode-grid,
//    sample-*, legacy-decode, batch-join, smem-buckets, device-feedback).
//    Engine::tryStart (src/core/engine.cc:281-291) takes at most
//    candidates_.size() segments from SegmentStore::startingWith(), and
//    candidates_ is std::array<Candidate, 4> (engine.h:407), while
//    GRAFT_MAX_VARIANTS defaults to 8. The list is in build order, so once
//    4 variants start with the same op (a decode step's first kernel does not
//    change with the context length; the attention grid does), the 5th and
//    later ones (here: every grid after the 4th) are never candidates: each
//    costs a capture and instantiation and is never launched; the first 4
//    then mismatch every step and are dropped ("graphs_dropped_mismatching")
//    without the window ever reaching the current grid. decode-grid, 400
//    steps: 12 % of ops through graphs, 21 graphs built, 56 replays, 14
//    dropped; GRAFT_MAX_VARIANTS=4 gives more (36 % at 200 steps) than 8 or
//    16 (24 %). A copy of graft built with candidates_ (and
//    candidate_events_) of 16 (/tmp/r11decode/candidates16.patch, built as
//    libgraft_candidates16.so there; not committed):
//    39 % (182 replays, 5 dropped), 48.6 % with GRAFT_MAX_VARIANTS=32, every
//    mode still passing. LLM decode, whose attention grid grows with the
//    context, gets graphs for its first 4 grid sizes only. Fix: offer the
//    variants most recently built or replayed first, or more candidates (up
//    to GRAFT_MAX_VARIANTS), or key variants beyond the first op.
// 2. A program that captures every step (ggml-cuda) keeps graft from ever
//    learning the eager work around its captures or on other streams
//    (ggml-topology, ggml-spoiled: 0 graft graphs; t's eager request is
//    graphed in graph-static, which captures once): Engine::programCaptureBegin
//    (engine.cc:771-777) calls detector_.reset() at every program capture,
//    so no period ever spans two steps. A copy with that reset
//    replaced by ++event_epoch_ and a boundary token (as a host barrier
//    pushes; capture_boundary.patch, libgraft_capture_boundary.so) graphs
//    t's request in ggml-topology / ggml-spoiled (520 / 526
//    graph effects at 400 steps) and passes the 9 modes tried with it
//    (ggml-*, graph-static, decode-grid, event-recreate, two-requests,
//    output-thread; 3 configurations).
// 3. device-feedback, decode-nosync (B = 4, 5), vmm-grow: graphs are built
//    for a shape only after it repeated (warm-up x an unrolled run of
//    several steps), which is after that grid is gone: device-feedback 19-32
//    graphs built, 0 replayed (0 %); decode-nosync 3.7 %. Inherent to
//    learning by repetition; noted for the attention-grid pattern of decode.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graft graph.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"
#include "sim_tagged_trace.h"

namespace {

using namespace simtest::modes;

constexpr int kLayers = 2;

thread_local const simtest::DriverApi* g_cu = nullptr;  // per thread: pts-threads uses the _ptsz table
simtest::Driver* g_drv = nullptr;
CUfunction g_add = nullptr, g_mix = nullptr;
uint64_t g_programGraphEffects = 0;  // effects of the program's own graph launches

template <typename F>
F proc(const char* name) {
  F f = nullptr;
  if (!simtest::lookupProc(*g_drv, name, &f)) std::exit(2);
  return f;
}

// ------------------------------------------------------------ host mirror

thread_local simtest::WordMirror g_mem;  // per thread: each request thread models its own
uint64_t M(CUdeviceptr p) { return g_mem.get(p); }
void setM(CUdeviceptr p, uint64_t v) { g_mem.set(p, v); }

// ------------------------------------------------------------ tagged kernels

using simtest::Dim;
struct Expected : simtest::TaggedLaunch {
  Dim grid, block;
  int pdl = -1, prio = -1;  // pdl-attrs: the launch attributes (-1: launched without attributes)
  unsigned smem = 0;
};
simtest::TaggedTrace<Expected> g_expected{"sim_add_r11", "sim_mix_r11"};
Expected expected(Dim grid, Dim block, int pdl = -1, int prio = -1, unsigned smem = 0) {
  Expected x;
  x.grid = grid, x.block = block, x.pdl = pdl, x.prio = prio, x.smem = smem;
  return x;
}

// pdl-attrs: launches go through cuLaunchKernelEx with these attributes.
bool g_useEx = false;
int g_pdl = 0, g_prio = 0;
// smem-buckets: the next launch's dynamic shared memory and kernel.
unsigned g_smem = 0;
CUfunction g_kernelOverride = nullptr;

// graph-static: the body's kernels are recorded (not launched) while this is set.
struct Call {
  bool add;
  Dim grid, block;
  CUdeviceptr dst, src;
  uint64_t k;
};
std::vector<Call>* g_record = nullptr;

// One tagged launch (dst, src, k, tag) on `s`; the mirror follows (unless
// `model` is false: a capture whose effect is modelled at the graph launch).
std::mutex g_expectedMutex;
CUresult launchRaw(bool add, Dim grid, Dim block, CUstream s, CUdeviceptr dst, CUdeviceptr src, uint64_t k,
                   uint64_t* tagOut = nullptr) {
  uint64_t tag;
  {
    std::lock_guard<std::mutex> lock(g_expectedMutex);
    tag = g_expected.add(expected(grid, block, g_useEx ? g_pdl : -1, g_useEx ? g_prio : -1, g_smem));
  }
  if (tagOut) *tagOut = tag;
  const CUfunction f = g_kernelOverride ? g_kernelOverride : add ? g_add : g_mix;
  void* args[] = {&dst, &src, &k, &tag};
  if (g_useEx) {
    CUlaunchAttribute attrs[2];
    std::memset(attrs, 0, sizeof attrs);
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[0].value.programmaticStreamSerializationAllowed = g_pdl;
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attrs[1].value.priority = g_prio;
    CUlaunchConfig cfg{};
    cfg.gridDimX = grid.x, cfg.gridDimY = grid.y, cfg.gridDimZ = grid.z;
    cfg.blockDimX = block.x, cfg.blockDimY = block.y, cfg.blockDimZ = block.z;
    cfg.hStream = s;
    cfg.sharedMemBytes = g_smem;
    cfg.attrs = attrs;
    cfg.numAttrs = 2;
    return g_cu->cuLaunchKernelEx(&cfg, f, args, nullptr);
  }
  return g_cu->cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, g_smem, s, args, nullptr);
}
void addK(CUdeviceptr dst, CUdeviceptr src, uint64_t k, CUstream s, Dim grid = {}, Dim block = {}) {
  if (g_record) {
    g_record->push_back({true, grid, block, dst, src, k});
    return;
  }
  SIM_CHECK(launchRaw(true, grid, block, s, dst, src, k));
  setM(dst, M(src) + k);
}
void mixK(CUdeviceptr dst, CUdeviceptr src, uint64_t k, CUstream s, Dim grid = {}, Dim block = {}) {
  if (g_record) {
    g_record->push_back({false, grid, block, dst, src, k});
    return;
  }
  SIM_CHECK(launchRaw(false, grid, block, s, dst, src, k));
  setM(dst, simMix64(M(src) ^ k));
}

// Scans the executed trace (after a full synchronization): every tagged
// kernel ran once, with its grid, block, shared memory and attributes. Then
// clears the trace.
void traceCheck(int step) {
  g_expected.scan(step, [step](const SimEffect& e, Expected& x, uint64_t tag) {
    if (e.sharedMemBytes != x.smem) expectValue(e.sharedMemBytes, x.smem, "the dynamic shared memory of a kernel as it ran", step);
    if (x.pdl >= 0) {
      int pdl = -1, prio = -1;
      for (unsigned a = 0; a < e.numAttrs; ++a) {
        if (e.attrs[a].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
          pdl = int(e.attrs[a].value.programmaticStreamSerializationAllowed);
        if (e.attrs[a].id == CU_LAUNCH_ATTRIBUTE_PRIORITY) prio = e.attrs[a].value.priority;
      }
      if (pdl != x.pdl) expectValue(uint64_t(pdl), uint64_t(x.pdl), "the PDL attribute of a kernel as it ran", step);
      if (prio != x.prio) expectValue(uint64_t(prio), uint64_t(x.prio), "the priority attribute of a kernel as it ran", step);
    }
    decltype(g_expected)::expectShape(e, {x.grid.x, x.grid.y, x.grid.z, x.block.x, x.block.y, x.block.z}, tag, step);
  });
}
// At the end: every launched tagged kernel that should run ran.
void traceFinal(int step) {
  SIM_CHECK(g_cu->cuCtxSynchronize());
  traceCheck(step);
  g_expected.expectAllRan(step);
}

// A checked read of one word against the mirror.
void checkWord(CUdeviceptr p, const char* what, int step) {
  uint64_t v = 0;
  SIM_CHECK(g_cu->cuMemcpyDtoH(&v, p, 8));
  expectValue(v, M(p), what, step);
}

CUstream newStream(unsigned flags = CU_STREAM_NON_BLOCKING) { return simtest::newStream(*g_cu, flags); }
CUevent newEvent() { return simtest::newEvent(*g_cu); }
CUdeviceptr zeroed(size_t bytes) { return simtest::zeroedBuffer(*g_cu, bytes); }
void* pinned(size_t bytes) {
  void* h = nullptr;
  SIM_CHECK(g_cu->cuMemAllocHost(&h, bytes));
  std::memset(h, 0, bytes);
  return h;
}

unsigned ceilDiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

// ------------------------------------------------------------ one request

// smem-buckets: the attention kernel's dynamic shared memory follows the
// context length; the program sets the kernel's allowance to exactly what the
// launch needs before every launch (lowering and raising it), and on
// irregular steps first tries a launch above it (refused).
bool g_smemBuckets = false;
CUfunction g_attn = nullptr;
int g_step = 0;
void attention(CUdeviceptr dst, CUdeviceptr src, uint64_t k, CUstream s, Dim grid) {
  if (!g_smemBuckets) {
    mixK(dst, src, k, s, grid, {128, 1, 1});
    return;
  }
  const unsigned need = 49152 + 16384 * ((grid.x / 2) % 3);
  auto allow = [](unsigned v) {
    SIM_CHECK(g_cu->cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(v),
                                         reinterpret_cast<CUkernel>(g_attn), 0));
  };
  allow(need);
  g_kernelOverride = g_attn;
  if (irregularStep(g_step, k, 5, 9)) {
    ++g_provoked;
    g_smem = need + 8192;
    uint64_t tag = 0;
    expectCode(launchRaw(false, grid, {128, 1, 1}, s, dst, src, k, &tag), CUDA_ERROR_INVALID_VALUE,
               "a launch above its kernel's shared memory allowance", g_step);
    g_expected[tag].runs = false;
  }
  g_smem = need;
  mixK(dst, src, k, s, grid, {128, 1, 1});
  g_smem = 0;
  g_kernelOverride = nullptr;
}

constexpr int kVocab = 64;

struct Req {
  CUstream s = nullptr;
  CUdeviceptr tok = 0, x = 0, h = 0, q = 0, logits = 0, next = 0, emb = 0, aux = 0;
  CUdeviceptr kv[kLayers] = {};
  size_t cap = 0;      // KV rows
  int n = 0;           // n_past
  unsigned B = 16;     // tokens per attention block
  uint64_t token = 1;  // the host's current token
  bool extraNode = false;  // ggml-topology: one more kernel in the body

  void init(CUstream stream, size_t rows, unsigned blockTokens, uint64_t salt) {
    s = stream;
    cap = rows;
    B = blockTokens;
    tok = zeroed(8), x = zeroed(8), h = zeroed(8), q = zeroed(8), logits = zeroed(8), next = zeroed(8);
    aux = zeroed(8);
    emb = zeroed(8 * kVocab);
    std::vector<uint64_t> table(kVocab);
    for (int v = 0; v < kVocab; ++v) {
      table[size_t(v)] = simMix64(uint64_t(v) * 0x9e3779b97f4a7c15ull + salt);
      setM(emb + 8 * uint64_t(v), table[size_t(v)]);
    }
    SIM_CHECK(g_cu->cuMemcpyHtoD(emb, table.data(), 8 * kVocab));
    for (auto& k : kv) k = zeroed(8 * rows);
    token = salt % kVocab + 1;
  }
  // The token is at `tok` already (uploaded by the caller, mirror set).
  void embed() {
    addK(x, tok, uint64_t(n), s);                                            // reads the uploaded token
    addK(h, emb + 8 * (token % kVocab), M(x), s);                            // gather: pointer by token
  }
  // The body a ggml program captures: layers, lm head, sampler.
  void body(unsigned nseq = 1) {
    const uint64_t p = uint64_t(n);
    for (int l = 0; l < kLayers; ++l) {
      mixK(q, h, uint64_t(l) + 1, s);
      addK(kv[l] + 8 * p, q, 1, s);                                          // KV append: moving row
      attention(h, kv[l] + 8 * (p / 2), p + uint64_t(l), s, {ceilDiv(unsigned(p) + 1, B), nseq, 1});
      addK(h, h, uint64_t(l), s);                                            // ffn
      if (extraNode && l == 0) mixK(h, h, 0x5eed, s);                        // topology change
    }
    mixK(logits, h, 99, s, {4, 1, 1}, {256, 1, 1});
    addK(next, logits, 0, s);
  }
  uint64_t sampled() const { return M(next); }
};

// Uploads `token` into r.tok from `host` (pinned or pageable, 8 bytes).
void upload(Req& r, uint64_t token, void* host) {
  std::memcpy(host, &token, 8);
  SIM_CHECK(g_cu->cuMemcpyHtoDAsync(r.tok, host, 8, r.s));
  setM(r.tok, token);
  r.token = token;
}
// Reads r.next back into `host` and synchronizes (pinned: with a sync call).
uint64_t readBack(Req& r, void* host, bool syncCall, int step) {
  SIM_CHECK(g_cu->cuMemcpyDtoHAsync(host, r.next, 8, r.s));
  if (syncCall) SIM_CHECK(g_cu->cuStreamSynchronize(r.s));
  uint64_t v;
  std::memcpy(&v, host, 8);
  expectValue(v, r.sampled(), "the sampled token read back", step);
  return v;
}
void checkReq(Req& r, const char* name, int step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s.h", name);
  checkWord(r.h, buf, step);
  std::snprintf(buf, sizeof buf, "%s.next", name);
  checkWord(r.next, buf, step);
  std::snprintf(buf, sizeof buf, "%s.aux", name);
  checkWord(r.aux, buf, step);
  for (int l = 0; l < kLayers; ++l) {
    if (r.n > 0) {
      std::snprintf(buf, sizeof buf, "%s.kv[%d][n-1]", name, l);
      checkWord(r.kv[l] + 8 * uint64_t(r.n - 1), buf, step);
    }
  }
}

// A single request's full check: everything done, its values, the trace
// (every 50th step, and at the end).
void syncAndCheck(Req& r, int step, bool last = false) {
  SIM_CHECK(g_cu->cuCtxSynchronize());
  checkReq(r, "r", step);
  if (last) traceFinal(step);
  else traceCheck(step);
}

// ------------------------------------------------------------ modes

// decode-grid / sample-pageable / sample-pinned
enum class TokenPath { PinnedTwo, Pageable, PinnedOne };
void decodeLoop(int steps, TokenPath path) {
  Req r;
  r.init(newStream(), size_t(steps) + 8, 16, 7);
  void* in = path == TokenPath::Pageable ? std::malloc(8) : pinned(8);
  void* out = path == TokenPath::PinnedTwo ? pinned(8) : in;
  uint64_t token = r.token;
  for (int i = 0; i < steps; ++i) {
    g_step = i;
    upload(r, token, in);
    r.embed();
    r.body();
    token = readBack(r, out, path != TokenPath::Pageable, i);
    ++r.n;
    if (i % 50 == 49) {
      SIM_CHECK(g_cu->cuCtxSynchronize());
      checkReq(r, "r", i);
      traceCheck(i);
    }
  }
  checkReq(r, "r", steps);
  traceFinal(steps);
}

// decode-nosync: teacher forcing, pageable uploads, no per-step sync.
void decodeNoSync(int steps) {
  Req r;
  r.init(newStream(), size_t(steps) + 8, 4, 11);
  std::vector<uint64_t> page(1);
  for (int i = 0; i < steps; ++i) {
    const uint64_t token = simMix64(uint64_t(i) + 3) % kVocab;
    upload(r, token, page.data());
    r.embed();
    r.body();
    if (i % 37 == 36) {
      uint64_t v = 0;
      SIM_CHECK(g_cu->cuMemcpyDtoHAsync(&v, r.next, 8, r.s));  // pageable: returns once written
      expectValue(v, r.sampled(), "the sampled token (pageable read-back)", i);
    }
    ++r.n;
    if (i % 50 == 49) syncAndCheck(r, i);
  }
  syncAndCheck(r, steps, /*last=*/true);
}

// The program's own graph (ggml-cuda): capture, instantiate or update, launch.
struct ProgramGraph {
  CUgraph graph = nullptr;  // the graph the exec was instantiated from (its nodes name the exec's)
  CUgraphExec exec = nullptr;
  size_t nodes = 0;
  int instantiations = 0, updates = 0;

  // Captures `fill` on s; then instantiates, or updates the exec from the new
  // capture (same node count), or (another node count) destroys and
  // instantiates again. Returns false if the capture failed.
  // `spoil`: the capture is invalidated at its end (a copy to pageable memory,
  // which a capture refuses); the program then runs the body eagerly.
  template <typename F>
  bool captureAndLaunch(CUstream s, F fill, int step, bool spoil = false, CUdeviceptr spoilSrc = 0) {
    auto& cu = *g_cu;
    SIM_CHECK(cu.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    SIM_CHECK(cu.cuStreamIsCapturing(s, &st));
    expectValue(st, CU_STREAM_CAPTURE_STATUS_ACTIVE, "capture status during the program's capture", step);
    const size_t firstTag = g_expected.size();
    const auto memBefore = g_mem;
    fill();
    if (spoil) {
      uint64_t page = 0;  // pageable: a capture cannot take it
      expectCode(cu.cuMemcpyDtoHAsync(&page, spoilSrc, 8, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                 "a copy to pageable memory in the program's capture", step);
      ++g_provoked;
    }
    CUgraph g = nullptr;
    const CUresult r = cu.cuStreamEndCapture(s, &g);
    expectCode(r, spoil ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS, "cuStreamEndCapture", step);
    if (r != CUDA_SUCCESS) {
      for (size_t t = firstTag; t < g_expected.size(); ++t) g_expected[t + 1].runs = false;
      g_mem = memBefore;
      return false;
    }
    size_t n = 0;
    SIM_CHECK(cu.cuGraphGetNodes(g, nullptr, &n));
    expectValue(n, g_expected.size() - firstTag, "nodes of the program's capture", step);
    if (exec && n == nodes) {
      std::vector<CUgraphNode> fresh(n), old(n);
      SIM_CHECK(cu.cuGraphGetNodes(g, fresh.data(), &n));
      SIM_CHECK(cu.cuGraphGetNodes(graph, old.data(), &n));
      for (size_t k = 0; k < n; ++k) {
        CUDA_KERNEL_NODE_PARAMS p{};
        SIM_CHECK(cu.cuGraphKernelNodeGetParams(fresh[k], &p));
        SIM_CHECK(cu.cuGraphExecKernelNodeSetParams(exec, old[k], &p));
      }
      SIM_CHECK(cu.cuGraphDestroy(g));
      ++updates;
    } else {
      if (exec) {
        SIM_CHECK(cu.cuGraphExecDestroy(exec));
        SIM_CHECK(cu.cuGraphDestroy(graph));
      }
      graph = g;
      nodes = n;
      SIM_CHECK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
      ++instantiations;
    }
    SIM_CHECK(cu.cuGraphLaunch(exec, s));
    g_programGraphEffects += nodes;
    return true;
  }
  void destroy() {
    if (exec) SIM_CHECK(g_cu->cuGraphExecDestroy(exec));
    if (graph) SIM_CHECK(g_cu->cuGraphDestroy(graph));
    exec = nullptr;
    graph = nullptr;
  }
};

bool g_spoil = false;
// ggml-update / ggml-topology / ggml-fallback / ggml-spoiled
void ggml(int steps, bool topology, bool fallback) {
  Req r;
  r.init(newStream(), size_t(steps) + 8, 16, 5);
  void* in = pinned(8);
  void* out = pinned(8);
  ProgramGraph pg;
  // ggml-topology: a second request, eager, on t, joined both ways.
  Req t;
  CUevent es = nullptr, et = nullptr;
  if (topology) {
    t.init(newStream(), size_t(steps) + 8, 12, 9);
    es = newEvent();
    et = newEvent();
  }
  std::vector<uint64_t> tpage(1);
  uint64_t token = r.token;
  for (int i = 0; i < steps; ++i) {
    if (topology && i > 0) SIM_CHECK(g_cu->cuStreamWaitEvent(r.s, et, 0));
    upload(r, token, in);
    r.embed();
    if (topology && i > 0) addK(r.aux, t.h, uint64_t(i), r.s);  // reads t's state after the join
    r.extraNode = topology && (r.n / 24) % 2 == 1;
    const bool viaGraph = !fallback || (i % 60) < 20;
    if (viaGraph) {
      // ggml-spoiled: now and then the capture is invalidated; the body then runs eagerly.
      const bool spoil = g_spoil && irregularStep(i, 77, 3, 6);
      if (!pg.captureAndLaunch(r.s, [&] { r.body(); }, i, spoil, r.next)) r.body();
    } else {
      r.body();
    }
    if (topology) {
      SIM_CHECK(g_cu->cuEventRecord(es, r.s));
      SIM_CHECK(g_cu->cuStreamWaitEvent(t.s, es, 0));
      // t: teacher-forced, eager, reads r's logits after the join.
      const uint64_t tt = simMix64(uint64_t(i) * 5 + 1) % kVocab;
      upload(t, tt, tpage.data());
      t.embed();
      addK(t.aux, r.logits, uint64_t(i), t.s);
      t.body();
      SIM_CHECK(g_cu->cuEventRecord(et, t.s));
      ++t.n;
    }
    token = readBack(r, out, true, i);
    ++r.n;
    if (i % 50 == 49) {
      SIM_CHECK(g_cu->cuCtxSynchronize());
      checkReq(r, "r", i);
      if (topology) checkReq(t, "t", i);
      traceCheck(i);
    }
  }
  SIM_CHECK(g_cu->cuCtxSynchronize());
  checkReq(r, "r", steps);
  if (topology) checkReq(t, "t", steps);
  traceFinal(steps);
  g_provoked += pg.instantiations;
  pg.destroy();
}

// prefill-decode
void prefillDecode(int steps) {
  Req r;
  const int P[3] = {13, 29, 13};
  const int D[3] = {steps * 45 / 100, steps * 35 / 100, steps - steps * 45 / 100 - steps * 35 / 100};
  r.init(newStream(), size_t(steps) + 40, 16, 3);
  const CUdeviceptr tokarr = zeroed(8 * 32);
  void* io = pinned(8);
  int gi = 0;
  for (int req = 0; req < 3; ++req) {
    // Prefill: P tokens up from pageable memory, P x L row kernels.
    std::vector<uint64_t> prompt(static_cast<size_t>(P[req]));  // (not size_t(...): a declaration to clang)
    for (int k = 0; k < P[req]; ++k) {
      prompt[size_t(k)] = simMix64(uint64_t(req * 100 + k)) % kVocab;
      setM(tokarr + 8 * uint64_t(k), prompt[size_t(k)]);
    }
    SIM_CHECK(g_cu->cuMemcpyHtoDAsync(tokarr, prompt.data(), 8 * size_t(P[req]), r.s));
    for (int l = 0; l < kLayers; ++l)
      for (int k = 0; k < P[req]; ++k) addK(r.kv[l] + 8 * uint64_t(k), tokarr + 8 * uint64_t(k), uint64_t(l), r.s);
    mixK(r.h, r.kv[kLayers - 1] + 8 * uint64_t(P[req] - 1), uint64_t(P[req]), r.s,
         {ceilDiv(unsigned(P[req]), r.B), unsigned(P[req]), 1}, {128, 1, 1});
    mixK(r.logits, r.h, 99, r.s, {4, 1, 1}, {256, 1, 1});
    addK(r.next, r.logits, 0, r.s);
    r.n = P[req];
    uint64_t token = readBack(r, io, true, gi);
    for (int i = 0; i < D[req]; ++i, ++gi) {
      upload(r, token, io);
      r.embed();
      r.body();
      token = readBack(r, io, true, gi);
      ++r.n;
    }
    SIM_CHECK(g_cu->cuCtxSynchronize());
    checkReq(r, "r", gi);
    traceCheck(gi);
  }
  traceFinal(gi);
}

// batch-join
void batchJoin(int steps) {
  constexpr int kMaxSeq = 8;
  const CUstream s = newStream();
  const size_t cap = size_t(steps) + 8;
  const CUdeviceptr pos = zeroed(8 * kMaxSeq), acc = zeroed(8), hs = zeroed(8 * kMaxSeq),
                    kv = zeroed(8 * kMaxSeq * cap);
  auto* stage = static_cast<uint64_t*>(pinned(8 * kMaxSeq));
  auto* out = static_cast<uint64_t*>(pinned(8));
  std::vector<int> posOf(kMaxSeq, 0);
  int nseq = 1;
  for (int i = 0; i < steps; ++i) {
    if (i % 5 == 0) {
      // Sequences join and leave: the count follows a walk over 1..8; a
      // leaving sequence's slot is taken by a new one (position 0).
      const int next = 1 + int(simMix64(uint64_t(i) + 17) % kMaxSeq);
      if (next < nseq) {
        for (int j = next; j < nseq; ++j) posOf[size_t(j)] = 0;
      }
      nseq = next;
      if (i % 15 == 0) posOf[0] = 0;  // the first sequence finished: a new request in its slot
    }
    for (int j = 0; j < nseq; ++j) {
      stage[j] = uint64_t(posOf[size_t(j)]);
      setM(pos + 8 * uint64_t(j), stage[j]);
    }
    SIM_CHECK(g_cu->cuMemcpyHtoDAsync(pos, stage, 8 * size_t(nseq), s));
    int maxPos = 0;
    for (int j = 0; j < nseq; ++j) {
      addK(hs + 8 * uint64_t(j), pos + 8 * uint64_t(j), uint64_t(j) * 1000 + uint64_t(i), s);
      addK(kv + 8 * (uint64_t(j) * cap + uint64_t(posOf[size_t(j)])), hs + 8 * uint64_t(j), 1, s);
      maxPos = std::max(maxPos, posOf[size_t(j)]);
    }
    mixK(acc, kv + 8 * (uint64_t(nseq - 1) * cap + uint64_t(posOf[size_t(nseq - 1)])), uint64_t(i), s,
         {ceilDiv(unsigned(maxPos) + 1, 8), unsigned(nseq), 1}, {64, 1, 1});
    addK(acc, acc, uint64_t(nseq), s);
    SIM_CHECK(g_cu->cuMemcpyDtoHAsync(out, acc, 8, s));
    SIM_CHECK(g_cu->cuStreamSynchronize(s));
    expectValue(*out, M(acc), "the batch's result", i);
    for (int j = 0; j < nseq; ++j) ++posOf[size_t(j)];
    if (i % 50 == 49) {
      SIM_CHECK(g_cu->cuCtxSynchronize());
      for (int j = 0; j < kMaxSeq; ++j) checkWord(hs + 8 * uint64_t(j), "hs[j]", i);
      traceCheck(i);
    }
  }
  traceFinal(steps);
}

// vmm-grow
void vmmGrow(int steps) {
  auto reserve = proc<decltype(&::cuMemAddressReserve)>("cuMemAddressReserve");
  auto create = proc<decltype(&::cuMemCreate)>("cuMemCreate");
  auto map = proc<decltype(&::cuMemMap)>("cuMemMap");
  auto setAccess = proc<decltype(&::cuMemSetAccess)>("cuMemSetAccess");
  auto unmap = proc<decltype(&::cuMemUnmap)>("cuMemUnmap");
  auto release = proc<decltype(&::cuMemRelease)>("cuMemRelease");
  auto addressFree = proc<decltype(&::cuMemAddressFree)>("cuMemAddressFree");
  constexpr size_t kChunk = 2u << 20, kRow = 256u << 10, kTail = 4096;
  const size_t reserved = ((size_t(steps) + 3) * kRow / kChunk + 2) * kChunk;
  CUdeviceptr base = 0;
  SIM_CHECK(reserve(&base, reserved, 0, 0, 0));
  const CUstream s = newStream();
  const CUdeviceptr ring = zeroed(4 * kTail), h = zeroed(8), seam = zeroed(16 * 4);
  std::vector<CUmemGenericAllocationHandle> handles;
  size_t mapped = 0;
  auto grow = [&](size_t need) {
    while (mapped < need) {
      CUmemAllocationProp prop{};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = 0;
      CUmemGenericAllocationHandle hd = 0;
      SIM_CHECK(create(&hd, kChunk, &prop, 0));
      SIM_CHECK(map(base + mapped, kChunk, 0, hd, 0));
      CUmemAccessDesc acc{};
      acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      acc.location.id = 0;
      acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      SIM_CHECK(setAccess(base + mapped, kChunk, &acc, 1));
      handles.push_back(hd);
      mapped += kChunk;
      ++g_provoked;
    }
  };
  std::vector<uint8_t> ringModel(4 * kTail, 0);
  for (int i = 0; i < steps; ++i) {
    const CUdeviceptr row = base + uint64_t(i) * kRow;
    grow(size_t(i + 2) * kRow);  // the next row is mapped too (the seam copy reads into it)
    const uint32_t v = uint32_t(i) * 0x01010101u + 0x80000001u;
    SIM_CHECK(g_cu->cuMemsetD32Async(row, v, kRow / 4, s));
    const uint64_t vv = uint64_t(v) | (uint64_t(v) << 32);
    setM(row, vv);
    setM(row + kRow - 8, vv);
    setM(row + kRow / 2, vv);
    addK(row, row + kRow / 2, uint64_t(i), s);          // first word
    mixK(row + kRow - 8, row, uint64_t(i), s, {ceilDiv(unsigned(i) + 1, 16), 1, 1}, {128, 1, 1});  // last word
    const CUdeviceptr slot = ring + kTail * uint64_t(i % 4);
    SIM_CHECK(g_cu->cuMemcpyDtoDAsync(slot, row + kRow - kTail, kTail, s));
    for (size_t b = 0; b + 8 <= kTail; b += 8) {
      const uint64_t w = b + 8 == kTail ? M(row + kRow - 8) : vv;
      std::memcpy(ringModel.data() + kTail * size_t(i % 4) + b, &w, 8);
    }
    setM(slot + kTail - 8, M(row + kRow - 8));
    addK(h, slot + kTail - 8, 1, s);
    // The seam: 16 bytes from this row's last word into the next row's first
    // (two mappings every 8th row: one copy over a chunk boundary).
    SIM_CHECK(g_cu->cuMemcpyDtoDAsync(seam + 16 * uint64_t(i % 4), row + kRow - 8, 16, s));
    setM(seam + 16 * uint64_t(i % 4), M(row + kRow - 8));
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(g_cu->cuStreamSynchronize(s));
      for (int j = std::max(0, i - 9); j <= i; ++j) {
        const CUdeviceptr rj = base + uint64_t(j) * kRow;
        expectValue(peek(rj), M(rj), "a row's first word", i);
        expectValue(peek(rj + kRow - 8), M(rj + kRow - 8), "a row's last word", i);
        expectValue(peek(rj + 8), M(rj + kRow / 2), "a row's memset word", i);
      }
      std::vector<uint8_t> got(4 * kTail);
      SIM_CHECK(g_cu->cuMemcpyDtoH(got.data(), ring, got.size()));
      expectValue(std::memcmp(got.data(), ringModel.data(), got.size()) == 0, 1, "the ring of row tails", i);
      checkWord(h, "h", i);
      checkWord(seam + 16 * uint64_t(i % 4), "the seam copy", i);
    }
    if (i % 50 == 49) {
      SIM_CHECK(g_cu->cuCtxSynchronize());
      traceCheck(i);
    }
  }
  traceFinal(steps);
  SIM_CHECK(unmap(base, mapped));
  for (auto hd : handles) SIM_CHECK(release(hd));
  SIM_CHECK(addressFree(base, reserved));
}

// pool-async
void poolAsync(int steps) {
  const CUstream s = newStream();
  const CUdeviceptr h = zeroed(8), out = zeroed(8);
  constexpr int kBlockRows = 16;
  int gi = 0;
  const int lens[3] = {steps / 2, steps / 3, steps - steps / 2 - steps / 3};
  for (int req = 0; req < 3; ++req) {
    std::vector<CUdeviceptr> blocks;
    for (int n = 0; n < lens[req]; ++n, ++gi) {
      if (n % kBlockRows == 0) {
        CUdeviceptr b = 0;
        SIM_CHECK(g_cu->cuMemAllocAsync(&b, 8 * kBlockRows, s));
        SIM_CHECK(g_cu->cuMemsetD32Async(b, 0, 2 * kBlockRows, s));
        for (int k = 0; k < kBlockRows; ++k) setM(b + 8 * uint64_t(k), 0);
        blocks.push_back(b);
      }
      const size_t scratchBytes = 64 * size_t(1 + n / 32);
      CUdeviceptr tmp = 0;
      SIM_CHECK(g_cu->cuMemAllocAsync(&tmp, scratchBytes, s));
      const CUdeviceptr row = blocks.back() + 8 * uint64_t(n % kBlockRows);
      addK(tmp, h, uint64_t(n), s);
      mixK(row, tmp, uint64_t(req), s);
      // attention over the blocks: reads the first block's first row
      mixK(tmp + scratchBytes - 8, blocks.front(), uint64_t(n), s, {unsigned(blocks.size()), 1, 1}, {128, 1, 1});
      addK(h, tmp + scratchBytes - 8, 1, s);
      addK(out, row, 0, s);
      SIM_CHECK(g_cu->cuMemFreeAsync(tmp, s));
      g_mem.erase(tmp);
      g_mem.erase(tmp + scratchBytes - 8);
      if (gi % 8 == 7) {
        SIM_CHECK(g_cu->cuStreamSynchronize(s));
        expectValue(peek(h), M(h), "h", gi);
        expectValue(peek(out), M(out), "out", gi);
        expectValue(peek(row), M(row), "the KV row", gi);
      }
      if (gi % 50 == 49) {
        SIM_CHECK(g_cu->cuCtxSynchronize());
        traceCheck(gi);
      }
    }
    for (CUdeviceptr b : blocks) {
      SIM_CHECK(g_cu->cuMemFreeAsync(b, s));
      for (int k = 0; k < kBlockRows; ++k) g_mem.erase(b + 8 * uint64_t(k));
    }
  }
  SIM_CHECK(g_cu->cuCtxSynchronize());
  checkWord(h, "h", gi);
  checkWord(out, "out", gi);
  traceFinal(gi);
}

// event-ring
void eventRing(int steps) {
  constexpr int kR = 3;
  Req r;
  r.init(newStream(), size_t(steps) + 8, 16, 13);
  CUevent ev[kR];
  for (auto& e : ev) e = newEvent();
  auto* slots = static_cast<uint64_t*>(pinned(8 * kR));
  std::vector<uint64_t> expectSlot(kR, 0);
  std::vector<uint64_t> page(1);
  for (int i = 0; i < steps; ++i) {
    const uint64_t token = simMix64(uint64_t(i) * 3 + 7) % kVocab;
    upload(r, token, page.data());
    r.embed();
    r.body();
    SIM_CHECK(g_cu->cuMemcpyDtoHAsync(slots + i % kR, r.next, 8, r.s));
    expectSlot[size_t(i % kR)] = r.sampled();
    SIM_CHECK(g_cu->cuEventRecord(ev[i % kR], r.s));
    const CUresult now = g_cu->cuEventQuery(ev[i % kR]);
    if (now != CUDA_SUCCESS && now != CUDA_ERROR_NOT_READY) expectCode(now, CUDA_ERROR_NOT_READY, "cuEventQuery (new)", i);
    ++r.n;
    if (i >= kR - 1) {
      const int j = i - (kR - 1);
      expectCode(pollUntilDone([&] { return g_cu->cuEventQuery(ev[j % kR]); }), CUDA_SUCCESS,
                 "cuEventQuery polled on an older step's event", i);
      expectValue(slots[j % kR], expectSlot[size_t(j % kR)], "an older step's slot after its event", i);
    }
    if (i % 16 == 15) {
      expectCode(pollUntilDone([&] { return g_cu->cuStreamQuery(r.s); }), CUDA_SUCCESS, "cuStreamQuery polled", i);
      expectValue(peek(r.h), M(r.h), "h after the stream query", i);
      expectValue(peek(r.next), M(r.next), "next after the stream query", i);
      expectValue(slots[i % kR], expectSlot[size_t(i % kR)], "this step's slot after the stream query", i);
    }
    if (i % 50 == 49) syncAndCheck(r, i);
  }
  syncAndCheck(r, steps, /*last=*/true);
}

// two-requests
void twoRequests(int steps) {
  Req a, b;
  a.init(newStream(), size_t(steps) + 8, 16, 21);
  b.init(newStream(), size_t(steps) + 8, 12, 22);
  const CUevent ea = newEvent(), eb = newEvent();
  void* ia = pinned(8);
  void* oa = pinned(8);
  void* ib = pinned(8);
  void* ob = pinned(8);
  uint64_t ta = a.token, tb = b.token;
  for (int i = 0; i < steps; ++i) {
    if (i > 0) SIM_CHECK(g_cu->cuStreamWaitEvent(a.s, eb, 0));
    upload(a, ta, ia);
    a.embed();
    SIM_CHECK(g_cu->cuEventRecord(ea, a.s));
    a.body();
    upload(b, tb, ib);
    SIM_CHECK(g_cu->cuStreamWaitEvent(b.s, ea, 0));
    addK(b.aux, a.x, uint64_t(i), b.s);  // a's x stays until a's next step, which waits on eb
    b.embed();
    b.body();
    SIM_CHECK(g_cu->cuEventRecord(eb, b.s));
    ta = readBack(a, oa, true, i);
    tb = readBack(b, ob, true, i);
    ++a.n;
    ++b.n;
    if (i % 50 == 49) {
      SIM_CHECK(g_cu->cuCtxSynchronize());
      checkReq(a, "a", i);
      checkReq(b, "b", i);
      traceCheck(i);
    }
  }
  SIM_CHECK(g_cu->cuCtxSynchronize());
  checkReq(a, "a", steps);
  checkReq(b, "b", steps);
  traceFinal(steps);
}

// spec-decode
void specDecode(int steps) {
  constexpr int kDraft = 3;
  Req r;
  r.init(newStream(), size_t(steps) * (kDraft + 1) + 8, 16, 31);
  const CUdeviceptr draftRows = zeroed(8 * kDraft), dh = zeroed(8), verify = zeroed(8);
  void* io = pinned(8);
  uint64_t token = r.token;
  for (int i = 0; i < steps; ++i) {
    upload(r, token, io);
    r.embed();
    // Draft: k small steps.
    addK(dh, r.h, 1, r.s);
    for (int d = 0; d < kDraft; ++d) {
      mixK(dh, dh, uint64_t(d), r.s);
      addK(draftRows + 8 * uint64_t(d), dh, uint64_t(r.n + d), r.s);
    }
    // Verify: one batched pass over the k draft tokens.
    const uint64_t p = uint64_t(r.n);
    mixK(verify, draftRows + 8 * (kDraft - 1), p, r.s, {ceilDiv(unsigned(p) + kDraft, r.B), kDraft, 1},
         {128, 1, 1});
    addK(r.kv[0] + 8 * p, r.h, 0, r.s);
    mixK(r.logits, verify, 99, r.s, {4, 1, 1}, {256, 1, 1});
    addK(r.next, r.logits, 0, r.s);
    const uint64_t got = readBack(r, io, true, i);
    const int accepted = int(got % (kDraft + 1));  // 0..k draft tokens accepted
    // Accepted draft rows go into the KV cache (1..k+1 copies).
    for (int d = 0; d < accepted; ++d) {
      const CUdeviceptr dst = r.kv[1] + 8 * (p + uint64_t(d));
      SIM_CHECK(g_cu->cuMemcpyDtoDAsync(dst, draftRows + 8 * uint64_t(d), 8, r.s));
      setM(dst, M(draftRows + 8 * uint64_t(d)));
    }
    SIM_CHECK(g_cu->cuMemcpyDtoDAsync(r.kv[1] + 8 * (p + uint64_t(accepted)), verify, 8, r.s));
    setM(r.kv[1] + 8 * (p + uint64_t(accepted)), M(verify));
    r.n += accepted + 1;
    token = got;
    if (i % 50 == 49) {
      SIM_CHECK(g_cu->cuCtxSynchronize());
      for (int k = std::max(0, r.n - 6); k < r.n; ++k) checkWord(r.kv[1] + 8 * uint64_t(k), "kv[1] row", i);
      checkReq(r, "r", i);
      traceCheck(i);
    }
  }
  SIM_CHECK(g_cu->cuCtxSynchronize());
  for (int k = 0; k < r.n; ++k) checkWord(r.kv[1] + 8 * uint64_t(k), "kv[1] row", steps);
  checkReq(r, "r", steps);
  traceFinal(steps);
}

// async-output
void asyncOutput(int steps) {
  Req r;
  r.init(newStream(), size_t(steps) + 8, 16, 41);
  const CUstream c = newStream();
  const CUdeviceptr nexts[2] = {r.next, zeroed(8)};  // double-buffered: c may still copy the other
  CUevent sampled = newEvent();
  CUevent copied[2] = {newEvent(), newEvent()};
  auto* slots = static_cast<uint64_t*>(pinned(16));
  uint64_t expectSlot[2] = {0, 0};
  // The first token goes up once; afterwards the embedding reads `next`.
  std::vector<uint64_t> page(1);
  upload(r, r.token, page.data());
  for (int i = 0; i < steps; ++i) {
    const CUdeviceptr in = i == 0 ? r.tok : r.next;
    r.next = nexts[i % 2];
    addK(r.x, in, uint64_t(r.n), r.s);
    addK(r.h, r.emb + 8 * uint64_t(i % kVocab), M(r.x), r.s);  // position-dependent gather (token not on host)
    r.body();
    SIM_CHECK(g_cu->cuEventRecord(sampled, r.s));
    SIM_CHECK(g_cu->cuStreamWaitEvent(c, sampled, 0));
    SIM_CHECK(g_cu->cuMemcpyDtoHAsync(slots + i % 2, r.next, 8, c));
    expectSlot[i % 2] = r.sampled();
    SIM_CHECK(g_cu->cuEventRecord(copied[i % 2], c));
    ++r.n;
    if (i > 0) {
      SIM_CHECK(g_cu->cuEventSynchronize(copied[(i - 1) % 2]));
      expectValue(slots[(i - 1) % 2], expectSlot[(i - 1) % 2], "the previous step's token (async output)", i);
    }
    if (i % 50 == 49) {
      SIM_CHECK(g_cu->cuCtxSynchronize());
      checkReq(r, "r", i);
      traceCheck(i);
    }
  }
  SIM_CHECK(g_cu->cuCtxSynchronize());
  expectValue(slots[(steps - 1) % 2], expectSlot[(steps - 1) % 2], "the last token", steps);
  checkReq(r, "r", steps);
  traceFinal(steps);
}

// layer-split: llama.cpp's layer split over two devices, one host thread.
void layerSplit(int steps) {
  auto& cu = *g_cu;
  CUcontext ctx0 = nullptr, ctx1 = nullptr;
  SIM_CHECK(cu.cuCtxGetCurrent(&ctx0));
  CUdevice dev1 = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx1, dev1));
  // Device 0: embedding and layer 0; device 1: layer 1, lm head, sampler.
  Req a, b;
  a.init(newStream(), size_t(steps) + 8, 16, 51);
  const CUevent e0 = newEvent();
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  b.init(newStream(), size_t(steps) + 8, 16, 52);
  const CUevent e1 = newEvent();
  void* io = pinned(8);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  uint64_t token = a.token;
  for (int i = 0; i < steps; ++i) {
    if (i > 0) SIM_CHECK(cu.cuStreamWaitEvent(a.s, e1, 0));  // b has copied a.h
    upload(a, token, io);
    a.embed();
    {  // layer 0 on device 0
      const uint64_t p = uint64_t(a.n);
      mixK(a.q, a.h, 1, a.s);
      addK(a.kv[0] + 8 * p, a.q, 1, a.s);
      mixK(a.h, a.kv[0] + 8 * (p / 2), p, a.s, {ceilDiv(unsigned(p) + 1, a.B), 1, 1}, {128, 1, 1});
      addK(a.h, a.h, 0, a.s);
    }
    SIM_CHECK(cu.cuEventRecord(e0, a.s));
    SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
    SIM_CHECK(cu.cuStreamWaitEvent(b.s, e0, 0));
    SIM_CHECK(cu.cuMemcpyDtoDAsync(b.h, a.h, 8, b.s));  // device 0 -> device 1
    setM(b.h, M(a.h));
    {  // layer 1 on device 1
      const uint64_t p = uint64_t(b.n);
      mixK(b.q, b.h, 2, b.s);
      addK(b.kv[1] + 8 * p, b.q, 1, b.s);
      mixK(b.h, b.kv[1] + 8 * (p / 2), p + 1, b.s, {ceilDiv(unsigned(p) + 1, b.B), 1, 1}, {128, 1, 1});
      addK(b.h, b.h, 1, b.s);
    }
    mixK(b.logits, b.h, 99, b.s, {4, 1, 1}, {256, 1, 1});
    addK(b.next, b.logits, 0, b.s);
    SIM_CHECK(cu.cuEventRecord(e1, b.s));
    token = readBack(b, io, true, i);
    SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
    ++a.n;
    ++b.n;
    if (i % 50 == 49) {
      SIM_CHECK(cu.cuCtxSynchronize());
      SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
      SIM_CHECK(cu.cuCtxSynchronize());
      checkReq(b, "b", i);
      SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
      checkReq(a, "a", i);
      traceCheck(i);
    }
  }
  SIM_CHECK(cu.cuCtxSetCurrent(ctx1));
  SIM_CHECK(cu.cuCtxSynchronize());
  checkReq(b, "b", steps);
  SIM_CHECK(cu.cuCtxSetCurrent(ctx0));
  checkReq(a, "a", steps);
  traceFinal(steps);
}

// output-thread: a second host thread processes the outputs.
void outputThread(int steps) {
  constexpr int kR = 3;
  Req r;
  r.init(newStream(), size_t(steps) + 8, 16, 61);
  const CUstream c = newStream();
  CUevent ev[kR];
  for (auto& e : ev) e = newEvent();
  const CUdeviceptr outs = zeroed(8 * size_t(steps));
  std::vector<uint64_t> expect(static_cast<size_t>(steps));
  std::atomic<int> published{0};
  auto* slots = static_cast<uint64_t*>(pinned(16));
  CUcontext ctx = nullptr;
  SIM_CHECK(g_cu->cuCtxGetCurrent(&ctx));
  const simtest::DriverApi* api = g_cu;
  std::thread out([&] {
    g_cu = api;
    SIM_CHECK(g_cu->cuCtxSetCurrent(ctx));
    for (int j = 0; j < steps; ++j) {
      while (published.load(std::memory_order_acquire) <= j) std::this_thread::yield();
      SIM_CHECK(g_cu->cuStreamWaitEvent(c, ev[j % kR], 0));
      SIM_CHECK(g_cu->cuMemcpyDtoHAsync(slots + j % 2, outs + 8 * uint64_t(j), 8, c));
      SIM_CHECK(g_cu->cuStreamSynchronize(c));
      expectValue(slots[j % 2], expect[size_t(j)], "a step's output (output thread)", j);
    }
  });
  std::vector<uint64_t> page(1);
  for (int i = 0; i < steps; ++i) {
    const uint64_t token = simMix64(uint64_t(i) * 11 + 5) % kVocab;
    upload(r, token, page.data());
    r.embed();
    r.body();
    addK(outs + 8 * uint64_t(i), r.next, 0, r.s);
    expect[size_t(i)] = M(outs + 8 * uint64_t(i));
    SIM_CHECK(g_cu->cuEventRecord(ev[i % kR], r.s));
    published.store(i + 1, std::memory_order_release);
    ++r.n;
    // Back-pressure as a server has it: at most 8 steps ahead of the output thread.
    if (i % 8 == 7) SIM_CHECK(g_cu->cuStreamSynchronize(r.s));
  }
  out.join();
  SIM_CHECK(g_cu->cuCtxSynchronize());
  checkReq(r, "r", steps);
  traceFinal(steps);
}

// pdl-attrs: the body through cuLaunchKernelEx with programmatic stream
// serialization and a priority, both changing per request of 50 steps.
void pdlAttrs(int steps) {
  g_useEx = true;
  Req r;
  r.init(newStream(), size_t(steps) + 8, 16, 71);
  void* io = pinned(8);
  uint64_t token = r.token;
  for (int i = 0; i < steps; ++i) {
    g_pdl = (i / 50) % 2;
    g_prio = -((i / 50) % 3);
    upload(r, token, io);
    r.embed();
    r.body();
    token = readBack(r, io, true, i);
    ++r.n;
    if (i % 50 == 49) {
      SIM_CHECK(g_cu->cuCtxSynchronize());
      checkReq(r, "r", i);
      traceCheck(i);
    }
  }
  checkReq(r, "r", steps);
  traceFinal(steps);
  g_useEx = false;
}

// event-recreate: per request (40 steps) two events created anew and
// destroyed at its end without a sync (the driver's handles come back).
void eventRecreate(int steps) {
  Req r;
  r.init(newStream(), size_t(steps) + 8, 16, 81);
  const CUstream t = newStream();
  void* io = pinned(8);
  CUevent ea = nullptr, eb = nullptr;
  uint64_t token = r.token;
  for (int i = 0; i < steps; ++i) {
    if (i % 40 == 0) {
      if (ea) {
        SIM_CHECK(g_cu->cuEventDestroy(ea));
        SIM_CHECK(g_cu->cuEventDestroy(eb));
      }
      ea = newEvent();
      eb = newEvent();
      ++g_provoked;
    }
    upload(r, token, io);
    r.embed();
    SIM_CHECK(g_cu->cuEventRecord(ea, r.s));
    SIM_CHECK(g_cu->cuStreamWaitEvent(t, ea, 0));
    addK(r.aux, r.x, uint64_t(i), t);
    mixK(r.aux, r.aux, 3, t);
    SIM_CHECK(g_cu->cuEventRecord(eb, t));
    r.body();
    SIM_CHECK(g_cu->cuStreamWaitEvent(r.s, eb, 0));  // the next step's embedding rewrites x
    if (i % 40 == 39) {
      // The request's last step: no read-back sync before its events go.
      SIM_CHECK(g_cu->cuEventDestroy(ea));
      SIM_CHECK(g_cu->cuEventDestroy(eb));
      ea = eb = nullptr;
    }
    token = readBack(r, io, true, i);
    ++r.n;
    if (i % 50 == 49) syncAndCheck(r, i);
  }
  syncAndCheck(r, steps, /*last=*/true);
}

// graph-static: older ggml-cuda: the body is captured once; each step the
// program updates its exec's kernel nodes itself (cuGraphExecKernelNodeSetParams,
// new grids included) and launches it; an eager request on t is joined both ways.
void graphStatic(int steps) {
  auto& cu = *g_cu;
  Req r, t;
  r.init(newStream(), size_t(steps) + 8, 16, 91);
  t.init(newStream(), size_t(steps) + 8, 12, 92);
  const CUevent es = newEvent(), et = newEvent();
  void* in = pinned(8);
  void* out = pinned(8);
  std::vector<uint64_t> tpage(1);
  ProgramGraph pg;
  std::vector<CUgraphNode> nodes;
  uint64_t token = r.token;
  for (int i = 0; i < steps; ++i) {
    if (i > 0) SIM_CHECK(cu.cuStreamWaitEvent(r.s, et, 0));
    upload(r, token, in);
    r.embed();
    if (i > 0) addK(r.aux, t.h, uint64_t(i), r.s);
    if (i == 0) {
      pg.captureAndLaunch(r.s, [&] { r.body(); }, i);
      size_t n = pg.nodes;
      nodes.resize(n);
      SIM_CHECK(cu.cuGraphGetNodes(pg.graph, nodes.data(), &n));
    } else {
      std::vector<Call> calls;
      g_record = &calls;
      r.body();
      g_record = nullptr;
      expectValue(calls.size(), nodes.size(), "the body's kernels", i);
      for (size_t k = 0; k < calls.size() && k < nodes.size(); ++k) {
        Call& c = calls[k];
        uint64_t tag = g_expected.add(expected(c.grid, c.block));
        void* args[] = {&c.dst, &c.src, &c.k, &tag};
        CUDA_KERNEL_NODE_PARAMS p{};
        p.func = c.add ? g_add : g_mix;
        p.gridDimX = c.grid.x, p.gridDimY = c.grid.y, p.gridDimZ = c.grid.z;
        p.blockDimX = c.block.x, p.blockDimY = c.block.y, p.blockDimZ = c.block.z;
        p.kernelParams = args;
        SIM_CHECK(cu.cuGraphExecKernelNodeSetParams(pg.exec, nodes[k], &p));
        setM(c.dst, c.add ? M(c.src) + c.k : simMix64(M(c.src) ^ c.k));
      }
      SIM_CHECK(cu.cuGraphLaunch(pg.exec, r.s));
      g_programGraphEffects += pg.nodes;
    }
    SIM_CHECK(cu.cuEventRecord(es, r.s));
    SIM_CHECK(cu.cuStreamWaitEvent(t.s, es, 0));
    const uint64_t tt = simMix64(uint64_t(i) * 7 + 2) % kVocab;
    upload(t, tt, tpage.data());
    t.embed();
    addK(t.aux, r.logits, uint64_t(i), t.s);
    t.body();
    SIM_CHECK(cu.cuEventRecord(et, t.s));
    ++t.n;
    token = readBack(r, out, true, i);
    ++r.n;
    if (i % 50 == 49) {
      SIM_CHECK(cu.cuCtxSynchronize());
      checkReq(r, "r", i);
      checkReq(t, "t", i);
      traceCheck(i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  checkReq(r, "r", steps);
  checkReq(t, "t", steps);
  traceFinal(steps);
  pg.destroy();
}

// device-feedback: the sampled token never leaves the device (the next
// step's embedding reads `next`); no copy and no sync in the loop but every
// 64 steps; B = 5: the grid changes every 5 steps, so runs graft unrolls
// over several steps straddle grid changes at every phase.
void deviceFeedback(int steps) {
  Req r;
  r.init(newStream(), size_t(steps) + 8, 5, 101);
  std::vector<uint64_t> page(1);
  upload(r, r.token, page.data());
  const CUdeviceptr nexts[2] = {r.next, zeroed(8)};
  for (int i = 0; i < steps; ++i) {
    const CUdeviceptr in = i == 0 ? r.tok : r.next;
    r.next = nexts[i % 2];
    addK(r.x, in, uint64_t(r.n), r.s);
    addK(r.h, r.emb + 8 * uint64_t(r.n % kVocab), M(r.x), r.s);
    r.body();
    ++r.n;
    if (i % 64 == 63) {
      SIM_CHECK(g_cu->cuStreamSynchronize(r.s));
      checkReq(r, "r", i);
      SIM_CHECK(g_cu->cuCtxSynchronize());
      traceCheck(i);
    }
  }
  SIM_CHECK(g_cu->cuCtxSynchronize());
  checkReq(r, "r", steps);
  traceFinal(steps);
}

// stream-cancel: a request per stream of its own (non-blocking, blocking,
// non-blocking with a priority, in turn), 25 steps each; its last step is
// cancelled: the stream is destroyed right after the step's ops and the
// read-back were issued, with no sync (its work still completes); the next
// request's stream often gets the same handle back.
void streamCancel(int steps) {
  Req r;
  r.init(newStream(), size_t(steps) + 8, 16, 111);
  SIM_CHECK(g_cu->cuStreamDestroy(r.s));
  void* io = pinned(8);
  uint64_t token = r.token;
  int i = 0;
  for (int req = 0; i < steps; ++req) {
    CUstream s = nullptr;
    if (req % 3 == 2) SIM_CHECK(g_cu->cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -1));
    else SIM_CHECK(g_cu->cuStreamCreate(&s, req % 3 == 0 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
    r.s = s;
    r.n = 0;
    for (int k = 0; k < 25 && i < steps; ++k, ++i) {
      g_step = i;
      upload(r, token, io);
      r.embed();
      r.body();
      if (k == 24 || i == steps - 1) {
        SIM_CHECK(g_cu->cuMemcpyDtoHAsync(io, r.next, 8, r.s));
        SIM_CHECK(g_cu->cuStreamDestroy(r.s));  // cancelled: no sync
        ++g_provoked;
        SIM_CHECK(g_cu->cuCtxSynchronize());
        uint64_t v;
        std::memcpy(&v, io, 8);
        expectValue(v, r.sampled(), "the cancelled request's last token", i);
        token = v;
        checkReq(r, "r", i);
      } else {
        token = readBack(r, io, true, i);
      }
      ++r.n;
    }
    if (req % 2 == 1) traceCheck(i);
  }
  traceFinal(steps);
}

// legacy-decode: the naive C++ decode loop on the legacy default stream:
// the token goes up by a synchronous cuMemcpyHtoD and comes back by a
// synchronous cuMemcpyDtoH; the KV row append runs on a blocking stream b
// and the attention (legacy) reads the row b has just written: ordered only by
// the legacy stream's implicit synchronization with blocking streams, no event.
void legacyDecode(int steps) {
  Req r;
  r.init(nullptr, size_t(steps) + 8, 16, 121);
  const CUstream b = newStream(CU_STREAM_DEFAULT);
  uint64_t token = r.token;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(g_cu->cuMemcpyHtoD(r.tok, &token, 8));
    setM(r.tok, token);
    r.token = token;
    r.embed();
    const uint64_t p = uint64_t(r.n);
    for (int l = 0; l < kLayers; ++l) {
      mixK(r.q, r.h, uint64_t(l) + 1, nullptr);
      addK(r.kv[l] + 8 * p, r.q, 1, b);  // blocking stream: after the legacy work before it
      mixK(r.h, r.kv[l] + 8 * p, p + uint64_t(l), nullptr, {ceilDiv(unsigned(p) + 1, r.B), 1, 1},
           {128, 1, 1});                 // legacy: after b's append
      addK(r.h, r.h, uint64_t(l), nullptr);
    }
    mixK(r.logits, r.h, 99, nullptr, {4, 1, 1}, {256, 1, 1});
    addK(r.next, r.logits, 0, nullptr);
    uint64_t v = 0;
    SIM_CHECK(g_cu->cuMemcpyDtoH(&v, r.next, 8));
    expectValue(v, r.sampled(), "the sampled token (synchronous read-back)", i);
    token = v;
    ++r.n;
    if (i % 50 == 49) syncAndCheck(r, i);
  }
  syncAndCheck(r, steps, /*last=*/true);
}

// pts-threads: a server with a thread per request: two threads decode at
// once, each on its per-thread default stream (the _ptsz functions, NULL),
// each reading its token back every step.
void ptsThreads(int steps, simtest::Driver& drv) {
  CUcontext ctx = nullptr;
  SIM_CHECK(g_cu->cuCtxGetCurrent(&ctx));
  auto serve = [&](int id) {
    g_cu = &drv.perThread;
    SIM_CHECK(g_cu->cuCtxSetCurrent(ctx));
    Req r;
    r.init(nullptr, size_t(steps) + 8, id ? 12 : 16, 131 + uint64_t(id));
    void* io = pinned(8);
    uint64_t token = r.token;
    for (int i = 0; i < steps; ++i) {
      upload(r, token, io);
      r.embed();
      r.body();
      token = readBack(r, io, true, i);
      ++r.n;
    }
    SIM_CHECK(g_cu->cuStreamSynchronize(nullptr));
    checkReq(r, id ? "r1" : "r0", steps);
  };
  std::thread a(serve, 0), b(serve, 1);
  a.join();
  b.join();
  traceFinal(steps);
}

CUfunction kernel4(const char* name) {
  const size_t sizes[] = {8, 8, 8, 8};
  return simKernelCreate(name, SIM_KERNEL_LIBRARY, 4, sizes, nullptr);
}

int finish(int steps, bool expectGraphs) {
  SimCounters c{};
  simCounters(&c);
  const uint64_t graft = c.effectsGraph >= g_programGraphEffects ? c.effectsGraph - g_programGraphEffects : 0;
  std::printf("%s: %s: effects from graft's graphs %llu, from the program's graphs %llu\n", g_program, g_mode,
              (unsigned long long)graft, (unsigned long long)g_programGraphEffects);
  const int rc = report(steps, false);
  if (rc == 0 && expectGraphs && graft == 0) {
    std::printf("%s: %s: no kernel ran from a graft graph: the path under test was not taken\n", g_program, g_mode);
    return 3;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review11_decode", 200);
  const std::string mode = args.mode;
  const int steps = args.steps;
  static simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review11_decode", &drv, &ctx)) return rc;
  g_drv = &drv;
  g_cu = &drv.plain;
  g_add = kernel4("sim_add_r11");
  g_mix = kernel4("sim_mix_r11");
  g_attn = kernel4("sim_mix_r11_attn");
  if (!g_add || !g_mix || !g_attn) return 2;
  simTraceClear();
  if (mode == "decode-grid") decodeLoop(steps, TokenPath::PinnedTwo);
  else if (mode == "decode-nosync") decodeNoSync(steps);
  else if (mode == "ggml-update") ggml(steps, false, false);
  else if (mode == "ggml-topology") ggml(steps, true, false);
  else if (mode == "ggml-fallback") ggml(steps, false, true);
  else if (mode == "ggml-spoiled") {
    g_spoil = true;
    ggml(steps, true, false);
  }
  else if (mode == "prefill-decode") prefillDecode(steps);
  else if (mode == "sample-pageable") decodeLoop(steps, TokenPath::Pageable);
  else if (mode == "sample-pinned") decodeLoop(steps, TokenPath::PinnedOne);
  else if (mode == "batch-join") batchJoin(steps);
  else if (mode == "vmm-grow") vmmGrow(steps);
  else if (mode == "pool-async") poolAsync(steps);
  else if (mode == "event-ring") eventRing(steps);
  else if (mode == "two-requests") twoRequests(steps);
  else if (mode == "spec-decode") specDecode(steps);
  else if (mode == "async-output") asyncOutput(steps);
  else if (mode == "layer-split") layerSplit(steps);
  else if (mode == "output-thread") outputThread(steps);
  else if (mode == "pdl-attrs") pdlAttrs(steps);
  else if (mode == "event-recreate") eventRecreate(steps);
  else if (mode == "graph-static") graphStatic(steps);
  else if (mode == "device-feedback") deviceFeedback(steps);
  else if (mode == "stream-cancel") streamCancel(steps);
  else if (mode == "legacy-decode") legacyDecode(steps);
  else if (mode == "pts-threads") ptsThreads(steps, drv);
  else if (mode == "smem-buckets") {
    g_smemBuckets = true;
    decodeLoop(steps, TokenPath::PinnedTwo);
  }
  else {
    std::printf("usage: sim_review11_decode --mode decode-grid|decode-nosync|ggml-update|ggml-topology|"
                "ggml-fallback|prefill-decode|sample-pageable|sample-pinned|batch-join|vmm-grow|pool-async|"
                "event-ring|two-requests|spec-decode|async-output|layer-split|output-thread|pdl-attrs|event-recreate|"
                "graph-static|device-feedback|smem-buckets|stream-cancel|ggml-spoiled|legacy-decode|pts-threads [--steps N] [--expect-graphs]\n");
    return 2;
  }
  return finish(steps, args.expectGraphs);
}
