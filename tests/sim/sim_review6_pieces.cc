// sim_review6_pieces: the sixth red-team round's review of how graft cuts a
// repeating run into pieces and launches them (src/core/engine.cc: pieceCuts,
// scheduleCuts, alignCuts, buildPiece, launchHeld, resolveHeld,
// forkedBeforeHeld; src/core/launch_plan.cc; src/core/segment.cc; the launch
// of a piece in src/graph/graph_executor.cc: entry and tail events, the join
// stream, records after the tail wait, superseded records). Every step is
// long enough to be graphed, run under several piece sizes (GRAFT_SEGMENT_OPS
// 2, 3, 5, automatic; GRAFT_MIN_SEGMENT_OPS=2 for the smallest), with the odd
// pattern at some steps. Every return code and value must be the simulated
// driver's, eagerly and under graft:
//   sim_review6_pieces --mode MODE [--steps N] [--expect-graphs]
//
// event-across-pieces  streams A and B hand a buffer back and forth four
//                times a step with one event each way (A records EA, B waits
//                on it and reads a, B records EB, A waits on it before it
//                writes a again): the same two events recorded four times a
//                step, so a piece may hold a record another piece waits on,
//                or two records of one event (the first superseded). On
//                irregular steps the host synchronizes EA right after one of
//                its records and reads a and b (nothing later on B issued).
// host-between-pieces  the same hand-off; every step, right after B's second
//                record of EB, the host asks cuEventQuery(EB) once, and right
//                after A's third record cuStreamQuery(A) once: a "complete"
//                answer must mean the work before was done (b, a read then).
//                On irregular steps a cuStreamSynchronize(B) at a place that
//                moves (a sync between pieces).
// moving-sync    one stream, 40 kernels a step, a read-back (DtoH copy and
//                stream sync) after kernel 24; on irregular steps after
//                kernel 7 or 33 instead: the run between two syncs changes
//                length and phase; every read-back checked.
// variants       a head of 20 kernels shared by three variants of the step's
//                tail (one stream; two streams joined by events; another
//                kernel and another length), each variant for six steps in a
//                row and on irregular steps one at random, then a read-back
//                (the recurring sync). Run also with GRAFT_MAX_VARIANTS=1, 2.
// odd-length     a 37-op step over three streams (events both ways) with no
//                sync: pieces of GRAFT_SEGMENT_OPS cross the step's end at a
//                phase that moves; on irregular steps one more kernel on C.
// default-streams  three rounds a step of the legacy stream, the per-thread
//                stream, a blocking and a non-blocking stream ordered by
//                implicit synchronization and events recorded on the
//                per-thread and non-blocking streams (values flow through
//                all four); on irregular steps the host synchronizes the
//                per-thread stream mid-step and reads what it wrote.
// host-func      a host function on B after B waited on A's record reads a
//                and b (written by the pieces before it); one on the legacy
//                stream reads what a blocking stream wrote before it; one on
//                the per-thread stream reads what the per-thread stream
//                wrote (through graft's proxy). Each host function's reads
//                checked.
// join-stream    PyTorch's fork and join: main M records F, side S waits on F
//                and computes from M's output, records J, M waits on J and
//                reads S's output; twice a step, so a piece may start with S
//                already forked (launched on M: forkedBeforeHeld). On
//                irregular steps M issues one more kernel between the record
//                and S's wait (the fork no longer right before the piece).
// gated-record   a piece boundary right after a record of E on A, then a
//                kernel on A that waits for the host (sim_gate); the host
//                synchronizes E (and, on irregular steps, polls
//                cuEventQuery(E)) and only then opens the gate: a sync of E
//                must not wait for the gated kernel after the record.
// event-churn    two events created every step, recorded in its first half
//                and waited on in its second, destroyed with that work maybe
//                pending (the next step's events may get their handles); on
//                irregular steps the host synchronizes the first mid-step.
// per-thread-query  a chain on the per-thread stream named both ways (the
//                per-thread table's NULL, CU_STREAM_PER_THREAD), queried
//                mid-step through both names and through a record on it; a
//                "complete" answer must mean its work ran (graft holds it:
//                its own "not ready"); irregular steps synchronize it.
// fuzz-SEED      a generated step (SEED picks it): two to four streams
//                (created blocking or not, the legacy and the per-thread
//                stream, each op naming its stream one of two ways),
//                kernels, device copies and memsets on shared buffers,
//                records and waits of a few events, race-free by
//                construction under a conservative model of the driver's
//                ordering (an access not ordered after the earlier
//                conflicting ones gets a record on the other stream and a
//                wait), a fork and a join around each step; one or two host
//                observations at a place in the body (an event or stream
//                synchronized or queried once, or the context synchronized),
//                every step or on irregular steps, check every buffer whose
//                last write the target covers; irregular steps add a kernel
//                (a mismatch); every 7 steps everything is checked.
// fuzzx-SEED     the same without the fork and join: the step repeated is
//                made race-free over four steps, so waits bind to records of
//                the step before and pieces span the steps' ends.
// fuzzh-SEED, fuzzhx-SEED  the same two with host functions reading a
//                buffer and copies between a buffer and pinned memory in the
//                body (ops graft issues eagerly at their place: pieces end
//                there); what each read is checked.
//                (REVIEW6_PRINT=1 prints the generated step.)
//
// Every mode passes eagerly and under graft with GRAFT_SEGMENT_OPS 2
// (GRAFT_MIN_SEGMENT_OPS=2), 3, 4, 5, 6, 7, 1000 and automatic,
// GRAFT_SYNC_TAIL_OPS=2, GRAFT_MAX_VARIANTS 1 and 2, GRAFT_WARMUP 1 and 3,
// GRAFT_ASYNC_LAUNCH=0 and several SIM_SEED / SIM_STEPS (the fuzz modes
// over seeds 1-1500, each run with --expect-graphs): no divergence found. (A model that keeps the waits
// out fails 32 of 40 fuzz seeds eagerly: the checks see misordering.)
//
// --expect-graphs: also exit 3 (the path under test was not taken) unless
// some kernels ran from graphs. Exit 1 on a wrong code or value.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;
using simtest::DriverApi;

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 8, 7); }

uint64_t mixv(uint64_t src, uint64_t k) { return simMix64(src ^ k); }

struct Kit {
  const simtest::Driver* drv;
  CUfunction add, mix, gate;
  const DriverApi& cu() const { return drv->plain; }
  const DriverApi& pt() const { return drv->perThread; }
};

CUresult launch3(const DriverApi& api, CUfunction f, CUdeviceptr to, CUdeviceptr from, uint64_t k, CUstream s) {
  void* args[] = {&to, &from, &k};
  return api.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
}

// ------------------------------------------------------------------ event-across-pieces, host-between-pieces

// One hand-off round r of step i: A waits EB, writes a twice, records EA; B
// waits EA, b = a + r, b = mix(b ^ i), records EB; A writes c (independent).
struct HandOff {
  const Kit& k;
  CUstream A, B;
  CUevent EA, EB;
  CUdeviceptr a, b, c;
  uint64_t ha = 0, hb = 0, hc = 0;
  void aPart(int i, int r) {
    const DriverApi& cu = k.cu();
    SIM_CHECK(cu.cuStreamWaitEvent(A, EB, 0));
    SIM_CHECK(launch3(cu, k.mix, a, a, uint64_t(i) * 4 + uint64_t(r), A));
    SIM_CHECK(launch3(cu, k.mix, a, a, 7, A));
    ha = mixv(mixv(ha, uint64_t(i) * 4 + uint64_t(r)), 7);
    SIM_CHECK(cu.cuEventRecord(EA, A));
  }
  void bPart(int i, int r) {
    const DriverApi& cu = k.cu();
    SIM_CHECK(cu.cuStreamWaitEvent(B, EA, 0));
    SIM_CHECK(launch3(cu, k.add, b, a, uint64_t(r), B));
    SIM_CHECK(launch3(cu, k.mix, b, b, uint64_t(i), B));
    hb = mixv(ha + uint64_t(r), uint64_t(i));
    SIM_CHECK(cu.cuEventRecord(EB, B));
  }
  void cPart() {
    SIM_CHECK(launch3(k.cu(), k.add, c, c, 1, A));
    hc += 1;
  }
  void checkAll(int i) {
    SIM_CHECK(k.cu().cuCtxSynchronize());
    expectValue(peek(a), ha, "a", i);
    expectValue(peek(b), hb, "b", i);
    expectValue(peek(c), hc, "c", i);
  }
};

HandOff makeHandOff(const Kit& k) {
  const DriverApi& cu = k.cu();
  HandOff h{k, nullptr, nullptr, nullptr, nullptr, 0, 0, 0};
  SIM_CHECK(cu.cuStreamCreate(&h.A, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&h.B, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuEventCreate(&h.EA, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&h.EB, CU_EVENT_DISABLE_TIMING));
  h.a = simtest::zeroedBuffer(cu);
  h.b = simtest::zeroedBuffer(cu);
  h.c = simtest::zeroedBuffer(cu);
  return h;
}

void eventAcrossPieces(const Kit& k, int steps) {
  HandOff h = makeHandOff(k);
  for (int i = 0; i < steps; ++i) {
    const int syncRound = irregular(i, 1) ? (i / 3) % 4 : -1;
    for (int r = 0; r < 4; ++r) {
      h.aPart(i, r);
      if (r == syncRound) {
        // Right after A's record: B's work of this round is not issued yet.
        expectCode(k.cu().cuEventSynchronize(h.EA), CUDA_SUCCESS, "cuEventSynchronize(EA)", i);
        expectValue(peek(h.a), h.ha, "a after a sync of EA", i);
        expectValue(peek(h.b), h.hb, "b after a sync of EA", i);
        ++g_provoked;
      }
      h.bPart(i, r);
      h.cPart();
    }
    if (i % 10 == 9 || i == steps - 1) h.checkAll(i);
  }
  h.checkAll(steps);
}

void hostBetweenPieces(const Kit& k, int steps) {
  HandOff h = makeHandOff(k);
  int eventReady = 0, streamReady = 0;
  for (int i = 0; i < steps; ++i) {
    const int syncAt = irregular(i, 2) ? (i / 3) % 4 : -1;
    for (int r = 0; r < 4; ++r) {
      h.aPart(i, r);
      if (r == 2) {
        const CUresult q = k.cu().cuStreamQuery(h.A);
        if (q != CUDA_ERROR_NOT_READY) expectCode(q, CUDA_SUCCESS, "cuStreamQuery(A)", i);
        if (q == CUDA_SUCCESS) {
          ++streamReady;
          expectValue(peek(h.a), h.ha, "a after cuStreamQuery(A) said complete", i);
          expectValue(peek(h.b), h.hb, "b after cuStreamQuery(A) said complete", i);
        }
      }
      h.bPart(i, r);
      if (r == 1) {
        const CUresult q = k.cu().cuEventQuery(h.EB);
        if (q != CUDA_ERROR_NOT_READY) expectCode(q, CUDA_SUCCESS, "cuEventQuery(EB)", i);
        if (q == CUDA_SUCCESS) {
          ++eventReady;
          expectValue(peek(h.b), h.hb, "b after cuEventQuery(EB) said complete", i);
        }
      }
      if (r == syncAt) {
        expectCode(k.cu().cuStreamSynchronize(h.B), CUDA_SUCCESS, "cuStreamSynchronize(B)", i);
        expectValue(peek(h.b), h.hb, "b after a sync of B", i);
        ++g_provoked;
      }
      h.cPart();
    }
    if (i % 10 == 9 || i == steps - 1) h.checkAll(i);
  }
  h.checkAll(steps);
  std::printf("sim_review6_pieces: %s: queries answered complete: event %d, stream %d\n", g_mode, eventReady,
              streamReady);
}

// ------------------------------------------------------------------ moving-sync

void movingSync(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    int at = 24;
    if (irregular(i, 3)) {
      at = (i % 2) ? 7 : 33;
      ++g_provoked;
    }
    for (int j = 0; j < 40; ++j) {
      const uint64_t kk = (j % 5 == 0) ? uint64_t(i) : uint64_t(j);
      SIM_CHECK(launch3(cu, k.mix, x, x, kk, s));
      hx = mixv(hx, kk);
      if (j + 1 == at) {
        uint64_t got = 0;
        SIM_CHECK(cu.cuMemcpyDtoHAsync(&got, x, 8, s));
        SIM_CHECK(cu.cuStreamSynchronize(s));
        expectValue(got, hx, "x read back mid-step", i);
      }
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), hx, "x", steps);
}

// ------------------------------------------------------------------ variants

void variants(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent f, j;
  SIM_CHECK(cu.cuEventCreate(&f, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&j, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    int v = (i / 6) % 3;
    if (irregular(i, 4)) {
      v = int(simMix64(uint64_t(i)) % 3);
      ++g_provoked;
    }
    for (int n = 0; n < 20; ++n) {
      SIM_CHECK(launch3(cu, k.mix, x, x, uint64_t(n), s));
      hx = mixv(hx, uint64_t(n));
    }
    if (v == 0) {
      for (int n = 0; n < 12; ++n) {
        SIM_CHECK(launch3(cu, k.mix, x, x, uint64_t(100 + n) + uint64_t(i), s));
        hx = mixv(hx, uint64_t(100 + n) + uint64_t(i));
      }
    } else if (v == 1) {
      for (int n = 0; n < 8; ++n) {
        SIM_CHECK(launch3(cu, k.mix, x, x, uint64_t(200 + n), s));
        hx = mixv(hx, uint64_t(200 + n));
      }
      SIM_CHECK(cu.cuEventRecord(f, s));
      SIM_CHECK(cu.cuStreamWaitEvent(t, f, 0));
      SIM_CHECK(launch3(cu, k.add, y, x, uint64_t(i), t));  // y = x + i
      hy = hx + uint64_t(i);
      for (int n = 0; n < 5; ++n) {
        SIM_CHECK(launch3(cu, k.mix, y, y, uint64_t(300 + n), t));
        hy = mixv(hy, uint64_t(300 + n));
      }
      SIM_CHECK(cu.cuEventRecord(j, t));
      SIM_CHECK(cu.cuStreamWaitEvent(s, j, 0));
      SIM_CHECK(launch3(cu, k.add, x, y, 1, s));  // x = y + 1
      hx = hy + 1;
    } else {
      for (int n = 0; n < 18; ++n) {
        SIM_CHECK(launch3(cu, k.add, x, x, uint64_t(n + 1), s));
        hx += uint64_t(n + 1);
      }
    }
    uint64_t got = 0;
    SIM_CHECK(cu.cuMemcpyDtoHAsync(&got, x, 8, s));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(got, hx, "x read back", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(y), hy, "y", steps);
}

// ------------------------------------------------------------------ odd-length

void oddLength(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  CUstream A, B, C;
  SIM_CHECK(cu.cuStreamCreate(&A, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&B, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&C, CU_STREAM_DEFAULT));
  CUevent e1, e2, e3;
  SIM_CHECK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&e3, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu),
                    z = simtest::zeroedBuffer(cu);
  uint64_t ha = 0, hb = 0, hc = 0, hz = 0;
  for (int i = 0; i < steps; ++i) {
    // 37 ops: A 9 kernels + record e1 (10); B waits e1 (the join of last step's C via e3 first), 8 kernels,
    // record e2 (11); C waits e2, 9 kernels, record e3 (11); A waits e3, 4 kernels (5).
    SIM_CHECK(cu.cuStreamWaitEvent(A, e3, 0));  // (counted in A's part below: A has 10 + 5 + 1 ops)
    for (int n = 0; n < 9; ++n) {
      SIM_CHECK(launch3(cu, k.mix, a, a, uint64_t(n) + uint64_t(i) * (n == 3), A));
      ha = mixv(ha, uint64_t(n) + uint64_t(i) * (n == 3));
    }
    SIM_CHECK(cu.cuEventRecord(e1, A));
    SIM_CHECK(cu.cuStreamWaitEvent(B, e1, 0));
    SIM_CHECK(launch3(cu, k.add, b, a, 3, B));
    hb = ha + 3;
    for (int n = 0; n < 7; ++n) {
      SIM_CHECK(launch3(cu, k.mix, b, b, uint64_t(10 + n), B));
      hb = mixv(hb, uint64_t(10 + n));
    }
    SIM_CHECK(cu.cuEventRecord(e2, B));
    SIM_CHECK(cu.cuStreamWaitEvent(C, e2, 0));
    SIM_CHECK(launch3(cu, k.add, c, b, uint64_t(i), C));
    hc = hb + uint64_t(i);
    for (int n = 0; n < 8; ++n) {
      SIM_CHECK(launch3(cu, k.mix, c, c, uint64_t(20 + n), C));
      hc = mixv(hc, uint64_t(20 + n));
    }
    if (irregular(i, 5)) {
      SIM_CHECK(launch3(cu, k.add, z, z, 1, C));
      hz += 1;
      ++g_provoked;
    }
    SIM_CHECK(cu.cuEventRecord(e3, C));
    SIM_CHECK(cu.cuStreamWaitEvent(A, e3, 0));
    SIM_CHECK(launch3(cu, k.add, a, c, 1, A));
    ha = hc + 1;
    for (int n = 0; n < 3; ++n) {
      SIM_CHECK(launch3(cu, k.mix, a, a, uint64_t(30 + n), A));
      ha = mixv(ha, uint64_t(30 + n));
    }
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(a), ha, "a", i);
      expectValue(peek(b), hb, "b", i);
      expectValue(peek(c), hc, "c", i);
      expectValue(peek(z), hz, "z", i);
    }
  }
}

// ------------------------------------------------------------------ default-streams

void defaultStreams(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  const DriverApi& pt = k.pt();
  CUstream b, n;
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_DEFAULT));
  SIM_CHECK(cu.cuStreamCreate(&n, CU_STREAM_NON_BLOCKING));
  CUevent E, F;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu),
                    w = simtest::zeroedBuffer(cu), u = simtest::zeroedBuffer(cu), v = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hz = 0, hw = 0, hu = 0, hv = 0;
  for (int i = 0; i < steps; ++i) {
    const int syncRound = irregular(i, 6) ? i % 3 : -1;
    for (int r = 0; r < 3; ++r) {
      const uint64_t kr = uint64_t(i) * 3 + uint64_t(r);
      SIM_CHECK(launch3(cu, k.mix, x, x, kr, nullptr));  // legacy
      hx = mixv(hx, kr);
      SIM_CHECK(launch3(pt, k.add, y, x, 1, nullptr));  // per-thread: after the legacy work
      SIM_CHECK(launch3(pt, k.mix, y, y, 2, nullptr));
      hy = mixv(hx + 1, 2);
      SIM_CHECK(launch3(cu, k.add, z, x, 3, b));  // blocking: after the legacy work
      hz = hx + 3;
      SIM_CHECK(pt.cuEventRecord(E, nullptr));  // per-thread
      if (r == syncRound) {
        expectCode(pt.cuStreamSynchronize(nullptr), CUDA_SUCCESS, "cuStreamSynchronize(per-thread)", i);
        expectValue(peek(y), hy, "y after a sync of the per-thread stream", i);
        ++g_provoked;
      }
      SIM_CHECK(cu.cuStreamWaitEvent(n, E, 0));
      SIM_CHECK(launch3(cu, k.add, w, y, 5, n));  // w = y + 5
      hw = hy + 5;
      SIM_CHECK(cu.cuEventRecord(F, n));
      SIM_CHECK(cu.cuStreamWaitEvent(nullptr, F, 0));  // legacy waits on n
      SIM_CHECK(launch3(cu, k.add, u, w, 1, CU_STREAM_LEGACY));
      hu = hw + 1;
      SIM_CHECK(launch3(cu, k.add, v, z, 1, nullptr));  // after b implicitly
      hv = hz + 1;
    }
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(x), hx, "x", i);
      expectValue(peek(y), hy, "y", i);
      expectValue(peek(z), hz, "z", i);
      expectValue(peek(w), hw, "w", i);
      expectValue(peek(u), hu, "u", i);
      expectValue(peek(v), hv, "v", i);
    }
  }
}

// ------------------------------------------------------------------ host-func

struct HostRead {
  CUdeviceptr p[2] = {0, 0};
  std::vector<uint64_t> seen;
};
void CUDA_CB readHost(void* user) {
  auto* h = static_cast<HostRead*>(user);
  for (CUdeviceptr p : h->p)
    if (p) h->seen.push_back(peek(p));
}

void hostFunc(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  const DriverApi& pt = k.pt();
  CUstream A, B, bl;
  SIM_CHECK(cu.cuStreamCreate(&A, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&B, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&bl, CU_STREAM_DEFAULT));
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu), c = simtest::zeroedBuffer(cu),
                    d = simtest::zeroedBuffer(cu);
  uint64_t ha = 0, hb = 0, hc = 0, hd = 0;
  HostRead onB, onLegacy, onPt;
  onB.p[0] = a;
  onB.p[1] = b;
  onLegacy.p[0] = c;
  onPt.p[0] = d;
  std::vector<uint64_t> wantB, wantLegacy, wantPt;
  CUevent J;
  SIM_CHECK(cu.cuEventCreate(&J, CU_EVENT_DISABLE_TIMING));
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(cu.cuStreamWaitEvent(A, J, 0));  // B's last step is done with a
    for (int n = 0; n < 6; ++n) {
      SIM_CHECK(launch3(cu, k.mix, a, a, uint64_t(n) + uint64_t(i), A));
      ha = mixv(ha, uint64_t(n) + uint64_t(i));
    }
    SIM_CHECK(cu.cuEventRecord(E, A));
    SIM_CHECK(cu.cuStreamWaitEvent(B, E, 0));
    for (int n = 0; n < 5; ++n) {
      SIM_CHECK(launch3(cu, k.mix, b, b, uint64_t(n * 7) + uint64_t(i), B));
      hb = mixv(hb, uint64_t(n * 7) + uint64_t(i));
    }
    SIM_CHECK(cu.cuLaunchHostFunc(B, readHost, &onB));
    wantB.push_back(ha);
    wantB.push_back(hb);
    SIM_CHECK(cu.cuEventRecord(J, B));
    for (int n = 0; n < 6; ++n) {
      SIM_CHECK(launch3(cu, k.mix, c, c, uint64_t(n + 40), bl));
      hc = mixv(hc, uint64_t(n + 40));
    }
    SIM_CHECK(cu.cuLaunchHostFunc(nullptr, readHost, &onLegacy));  // legacy: after bl's work
    wantLegacy.push_back(hc);
    for (int n = 0; n < 6; ++n) {
      SIM_CHECK(launch3(pt, k.mix, d, d, uint64_t(n + 60) + uint64_t(i % 3), nullptr));
      hd = mixv(hd, uint64_t(n + 60) + uint64_t(i % 3));
    }
    SIM_CHECK(pt.cuLaunchHostFunc(nullptr, readHost, &onPt));
    wantPt.push_back(hd);
    if (irregular(i, 7)) {
      SIM_CHECK(launch3(cu, k.mix, b, b, 99, B));
      hb = mixv(hb, 99);
      ++g_provoked;
    }
    if (i % 10 == 9) SIM_CHECK(cu.cuCtxSynchronize());
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  SIM_CHECK(pt.cuStreamSynchronize(nullptr));
  auto compare = [&](const HostRead& h, const std::vector<uint64_t>& want, const char* what) {
    expectValue(h.seen.size(), want.size(), what, steps);
    for (size_t n = 0; n < want.size() && n < h.seen.size(); ++n)
      expectValue(h.seen[n], want[n], what, int(n / (h.p[1] ? 2 : 1)));
  };
  compare(onB, wantB, "a and b seen by B's host function");
  compare(onLegacy, wantLegacy, "c seen by the legacy stream's host function");
  compare(onPt, wantPt, "d seen by the per-thread stream's host function");
}

// ------------------------------------------------------------------ join-stream

void joinStream(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  CUstream M, S;
  SIM_CHECK(cu.cuStreamCreate(&M, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&S, CU_STREAM_NON_BLOCKING));
  CUevent F, J;
  SIM_CHECK(cu.cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&J, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr m = simtest::zeroedBuffer(cu), s = simtest::zeroedBuffer(cu), o = simtest::zeroedBuffer(cu);
  uint64_t hm = 0, hs = 0, ho = 0;
  for (int i = 0; i < steps; ++i) {
    for (int r = 0; r < 2; ++r) {
      for (int n = 0; n < 4; ++n) {
        SIM_CHECK(launch3(cu, k.mix, m, m, uint64_t(n + 10 * r), M));
        hm = mixv(hm, uint64_t(n + 10 * r));
      }
      SIM_CHECK(cu.cuEventRecord(F, M));
      if (irregular(i, 8) && r == 1) {
        SIM_CHECK(launch3(cu, k.add, o, o, 1, M));  // M works on between the fork's record and wait
        ho += 1;
        ++g_provoked;
      }
      SIM_CHECK(cu.cuStreamWaitEvent(S, F, 0));
      SIM_CHECK(launch3(cu, k.add, s, m, uint64_t(i), S));
      hs = hm + uint64_t(i);
      for (int n = 0; n < 5; ++n) {
        SIM_CHECK(launch3(cu, k.mix, s, s, uint64_t(n + 20), S));
        hs = mixv(hs, uint64_t(n + 20));
      }
      SIM_CHECK(cu.cuEventRecord(J, S));
      for (int n = 0; n < 3; ++n) {
        SIM_CHECK(launch3(cu, k.add, o, o, 2, M));
        ho += 2;
      }
      SIM_CHECK(cu.cuStreamWaitEvent(M, J, 0));
      SIM_CHECK(launch3(cu, k.add, m, s, 1, M));  // m = s + 1
      hm = hs + 1;
    }
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(M));
      expectValue(peek(m), hm, "m", i);
      expectValue(peek(s), hs, "s", i);
      expectValue(peek(o), ho, "o", i);
    }
  }
}

// ------------------------------------------------------------------ gated-record

void gatedRecord(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  CUstream A;
  SIM_CHECK(cu.cuStreamCreate(&A, CU_STREAM_NON_BLOCKING));
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), flag = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 1; i <= steps; ++i) {
    for (int n = 0; n < 9; ++n) {
      SIM_CHECK(launch3(cu, k.mix, x, x, uint64_t(n) + uint64_t(i) * (n == 0), A));
      hx = mixv(hx, uint64_t(n) + uint64_t(i) * (n == 0));
    }
    SIM_CHECK(cu.cuEventRecord(E, A));
    {
      CUdeviceptr f = flag;
      uint64_t unused = 0, it = uint64_t(i);
      void* args[] = {&f, &unused, &it};
      SIM_CHECK(cu.cuLaunchKernel(k.gate, 1, 1, 1, 1, 1, 1, 0, A, args, nullptr));
    }
    for (int n = 0; n < 6; ++n) {
      SIM_CHECK(launch3(cu, k.add, y, y, 1, A));
      hy += 1;
    }
    if (irregular(i, 9)) {
      const CUresult r = pollUntilDone([&] { return cu.cuEventQuery(E); });
      expectCode(r, CUDA_SUCCESS, "cuEventQuery(E), polled (the gate comes after the record)", i);
      ++g_provoked;
    }
    expectCode(cu.cuEventSynchronize(E), CUDA_SUCCESS, "cuEventSynchronize(E)", i);
    expectValue(peek(x), hx, "x after a sync of E", i);
    poke(flag, uint64_t(i));  // open the gate
    if (i % 10 == 0 || i == steps) {
      SIM_CHECK(cu.cuStreamSynchronize(A));
      expectValue(peek(y), hy, "y", i);
    }
  }
}

// ------------------------------------------------------------------ event-churn

// Two events created every step, recorded in the step's first half and
// waited on in its second (a record in one piece, its wait in another), then
// destroyed while that work may still be pending; the next step's events get
// the same handles (the simulator gives a destroyed handle to the next one
// created). On irregular steps the host synchronizes the first event before
// the second half and reads what its record covers.
void eventChurn(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  CUstream A, B;
  SIM_CHECK(cu.cuStreamCreate(&A, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&B, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr a = simtest::zeroedBuffer(cu), b = simtest::zeroedBuffer(cu);
  uint64_t ha = 0, hb = 0;
  CUevent J;  // B's end, which A waits on before it writes a again
  SIM_CHECK(cu.cuEventCreate(&J, CU_EVENT_DISABLE_TIMING));
  for (int i = 0; i < steps; ++i) {
    CUevent e1, e2;
    SIM_CHECK(cu.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu.cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    SIM_CHECK(cu.cuStreamWaitEvent(A, J, 0));
    for (int n = 0; n < 5; ++n) {
      SIM_CHECK(launch3(cu, k.mix, a, a, uint64_t(n) + uint64_t(i), A));
      ha = mixv(ha, uint64_t(n) + uint64_t(i));
    }
    SIM_CHECK(cu.cuEventRecord(e1, A));
    const uint64_t aAtE1 = ha;
    for (int n = 0; n < 3; ++n) {
      SIM_CHECK(launch3(cu, k.mix, a, a, uint64_t(n + 50), A));
      ha = mixv(ha, uint64_t(n + 50));
    }
    SIM_CHECK(cu.cuEventRecord(e2, A));
    if (irregular(i, 13)) {
      expectCode(cu.cuEventSynchronize(e1), CUDA_SUCCESS, "cuEventSynchronize(e1)", i);
      const uint64_t got = peek(a);
      if (got != aAtE1 && got != mixv(aAtE1, 50) && got != mixv(mixv(aAtE1, 50), 51) && got != ha)
        expectValue(got, aAtE1, "a after a sync of e1 (its value at e1 or later)", i);
      ++g_provoked;
    }
    for (int n = 0; n < 4; ++n) {  // B: independent work first
      SIM_CHECK(launch3(cu, k.add, b, b, 1, B));
      hb += 1;
    }
    SIM_CHECK(cu.cuStreamWaitEvent(B, e2, 0));
    SIM_CHECK(launch3(cu, k.add, b, a, uint64_t(i), B));  // b = a + i
    hb = ha + uint64_t(i);
    SIM_CHECK(launch3(cu, k.mix, b, b, 9, B));
    hb = mixv(hb, 9);
    SIM_CHECK(cu.cuEventRecord(J, B));
    SIM_CHECK(cu.cuEventDestroy(e1));
    SIM_CHECK(cu.cuEventDestroy(e2));
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuCtxSynchronize());
      expectValue(peek(a), ha, "a", i);
      expectValue(peek(b), hb, "b", i);
    }
  }
}

// ------------------------------------------------------------------ per-thread-query

// The per-thread stream, named three ways (the per-thread table's NULL,
// CU_STREAM_PER_THREAD through the plain table, and implicitly through
// events), holds a chain with a record; a created stream waits on it. Every
// step the host asks cuStreamQuery of the per-thread stream (through both
// names, at two places) and cuEventQuery of its record once; a "complete"
// answer must mean its work ran. On irregular steps it synchronizes the
// per-thread stream through CU_STREAM_PER_THREAD mid-step.
void perThreadQuery(const Kit& k, int steps) {
  const DriverApi& cu = k.cu();
  const DriverApi& pt = k.pt();
  CUstream n;
  SIM_CHECK(cu.cuStreamCreate(&n, CU_STREAM_NON_BLOCKING));
  CUevent E, F;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr p = simtest::zeroedBuffer(cu), q = simtest::zeroedBuffer(cu);
  uint64_t hp = 0, hq = 0;
  int ready = 0;
  for (int i = 0; i < steps; ++i) {
    SIM_CHECK(pt.cuStreamWaitEvent(nullptr, F, 0));  // n's last step is done with p
    for (int r = 0; r < 2; ++r) {
      for (int m = 0; m < 4; ++m) {
        const DriverApi& api = (m % 2) ? pt : cu;
        const CUstream h = (m % 2) ? nullptr : CU_STREAM_PER_THREAD;
        SIM_CHECK(launch3(api, k.mix, p, p, uint64_t(m + 4 * r) + uint64_t(i), h));
        hp = mixv(hp, uint64_t(m + 4 * r) + uint64_t(i));
      }
      const CUresult s1 = r ? cu.cuStreamQuery(CU_STREAM_PER_THREAD) : pt.cuStreamQuery(nullptr);
      if (s1 != CUDA_ERROR_NOT_READY) expectCode(s1, CUDA_SUCCESS, "cuStreamQuery(per-thread)", i);
      if (s1 == CUDA_SUCCESS) {
        ++ready;
        expectValue(peek(p), hp, "p after the per-thread stream's query said complete", i);
      }
    }
    SIM_CHECK(pt.cuEventRecord(E, nullptr));
    const CUresult s2 = cu.cuEventQuery(E);
    if (s2 != CUDA_ERROR_NOT_READY) expectCode(s2, CUDA_SUCCESS, "cuEventQuery(E)", i);
    if (s2 == CUDA_SUCCESS) expectValue(peek(p), hp, "p after its record's query said complete", i);
    if (irregular(i, 14)) {
      expectCode(cu.cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS, "cuStreamSynchronize(per-thread)", i);
      expectValue(peek(p), hp, "p after a sync of the per-thread stream", i);
      ++g_provoked;
    }
    SIM_CHECK(cu.cuStreamWaitEvent(n, E, 0));
    SIM_CHECK(launch3(cu, k.add, q, p, 1, n));
    hq = hp + 1;
    for (int m = 0; m < 3; ++m) {
      SIM_CHECK(launch3(cu, k.mix, q, q, uint64_t(m), n));
      hq = mixv(hq, uint64_t(m));
    }
    SIM_CHECK(cu.cuEventRecord(F, n));
    if (i % 10 == 9 || i == steps - 1) {
      SIM_CHECK(cu.cuStreamSynchronize(n));
      SIM_CHECK(pt.cuStreamSynchronize(nullptr));
      expectValue(peek(p), hp, "p", i);
      expectValue(peek(q), hq, "q", i);
    }
  }
  std::printf("sim_review6_pieces: %s: per-thread stream queries answered complete: %d\n", g_mode, ready);
}

}  // namespace

// ------------------------------------------------------------------ fuzz
namespace {

enum class SK { NonBlocking, Blocking, Legacy, PerThread };
enum class OK { Kernel, Memset, Copy, Record, Wait, HostFn, DtoH, HtoD };

bool reads(OK k) { return k == OK::Kernel || k == OK::Copy || k == OK::HostFn || k == OK::DtoH; }
bool writes(OK k) { return k == OK::Kernel || k == OK::Copy || k == OK::Memset || k == OK::HtoD; }

struct FOp {
  OK kind;
  int s;
  bool mix = false;  // Kernel: sim_mix, else sim_add
  int dst = -1, src = -1;
  uint64_t k0 = 0;
  bool kStep = false;  // k = k0 + step (patched every step)
  int ev = -1;
  bool alt = false;  // the other way to name the stream
};

struct Access {
  int stream = -1;  // -1: before the step (ordered before everything)
  uint32_t count = 0;
};
using Clock = std::vector<uint32_t>;

struct Observe {
  size_t at = 0;      // before body op `at`
  int kind = 0;       // 0 event sync, 1 event query, 2 stream sync, 3 stream query, 4 ctx sync
  int target = 0;     // event or stream
  bool every = false;  // every step, else irregular steps
  uint64_t checkMask = 0;
};

struct Fuzz {
  const Kit& k;
  std::mt19937_64 rng;
  int n = 0;
  std::vector<SK> kinds;
  std::vector<CUstream> handles;
  int nBuf = 0;
  std::vector<CUdeviceptr> bufs;
  std::vector<CUdeviceptr> scratch;  // per stream, touched by that stream only
  int nPool = 0;
  std::vector<CUevent> events;  // pool, fix per stream, start, end per stream
  std::vector<FOp> body;
  std::vector<Observe> obs;
  std::string text;
  bool forkAlt = false;
  bool forkJoin = true;  // a fork and a join around each step
  bool hostOps = false;  // host functions and copies to and from pinned memory in the body

  explicit Fuzz(const Kit& kit, uint64_t seed) : k(kit), rng(seed) {}

  int fixEvent(int s) const { return nPool + s; }
  int startEvent() const { return nPool + n; }
  int endEvent(int s) const { return nPool + n + 1 + s; }
  bool blocking(int s) const { return kinds[size_t(s)] == SK::Blocking || kinds[size_t(s)] == SK::PerThread; }
  int legacyIndex() const {
    for (int s = 0; s < n; ++s)
      if (kinds[size_t(s)] == SK::Legacy) return s;
    return -1;
  }
  uint64_t rnd(uint64_t m) { return rng() % m; }

  // --- the happens-before model used to generate (conservative: only what
  // the driver guarantees)
  struct Model {
    std::vector<Clock> vc;
    std::vector<Access> lastWrite;
    std::vector<std::vector<Access>> readers;
    std::vector<Clock> rec;  // per event: the clock of its record in this step (empty: none this step)
  };
  Clock clockFor(const Model& m, int s, OK kind) const {
    Clock c = m.vc[size_t(s)];
    const int l = legacyIndex();
    auto join = [&](const Clock& o) {
      for (int j = 0; j < n; ++j) c[size_t(j)] = std::max(c[size_t(j)], o[size_t(j)]);
    };
    if (s == l && kind != OK::Wait) {  // (a wait on an event never recorded is no work at all)
      for (int j = 0; j < n; ++j)
        if (j != s && blocking(j)) join(m.vc[size_t(j)]);
    } else if (blocking(s) && l >= 0 && kind != OK::Record && kind != OK::Wait) {
      join(m.vc[size_t(l)]);
    }
    return c;
  }
  static bool hb(const Access& a, const Clock& c) { return a.stream < 0 || c[size_t(a.stream)] >= a.count; }
  void apply(Model& m, const FOp& op) const {
    Clock c = clockFor(m, op.s, op.kind);
    if (op.kind == OK::Wait && !m.rec[size_t(op.ev)].empty())
      for (int j = 0; j < n; ++j) c[size_t(j)] = std::max(c[size_t(j)], m.rec[size_t(op.ev)][size_t(j)]);
    ++c[size_t(op.s)];
    const Access me{op.s, c[size_t(op.s)]};
    if (op.kind == OK::Record) m.rec[size_t(op.ev)] = c;
    if (reads(op.kind)) m.readers[size_t(op.src)].push_back(me);
    if (writes(op.kind)) {
      m.lastWrite[size_t(op.dst)] = me;
      m.readers[size_t(op.dst)].clear();
    }
    m.vc[size_t(op.s)] = std::move(c);
  }
  // Accesses `op` conflicts with that are not ordered before it.
  std::vector<Access> conflicts(const Model& m, const FOp& op) const {
    std::vector<Access> out;
    if (op.kind == OK::Record || op.kind == OK::Wait) return out;
    const Clock c = clockFor(m, op.s, op.kind);
    if (reads(op.kind) && !hb(m.lastWrite[size_t(op.src)], c)) out.push_back(m.lastWrite[size_t(op.src)]);
    if (writes(op.kind)) {
      if (!hb(m.lastWrite[size_t(op.dst)], c)) out.push_back(m.lastWrite[size_t(op.dst)]);
      for (const Access& r : m.readers[size_t(op.dst)])
        if (r.stream != op.s && !hb(r, c)) out.push_back(r);
    }
    return out;
  }
  Model freshModel() const {
    Model m;
    m.vc.assign(size_t(n), Clock(size_t(n), 0));
    m.lastWrite.assign(size_t(nBuf), Access{});
    m.readers.assign(size_t(nBuf), {});
    m.rec.assign(events.size(), Clock());
    return m;
  }

  bool setup() {
    const DriverApi& cu = k.cu();
    n = 2 + int(rnd(3));
    bool haveLegacy = false, havePt = false;
    for (int s = 0; s < n; ++s) {
      SK kind = SK(rnd(4));
      if ((kind == SK::Legacy && haveLegacy) || (kind == SK::PerThread && havePt)) kind = SK(rnd(2));
      haveLegacy |= kind == SK::Legacy;
      havePt |= kind == SK::PerThread;
      kinds.push_back(kind);
      CUstream h = nullptr;
      if (kind == SK::NonBlocking || kind == SK::Blocking)
        SIM_CHECK(cu.cuStreamCreate(&h, kind == SK::NonBlocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
      handles.push_back(h);
      const char* names[] = {"nb", "blk", "legacy", "pts"};
      text += std::string(s ? " " : "") + "s" + std::to_string(s) + "=" + names[int(kind)];
    }
    nBuf = 2 * n;
    for (int b = 0; b < nBuf; ++b) bufs.push_back(simtest::zeroedBuffer(cu));
    for (int s = 0; s < n; ++s) scratch.push_back(simtest::zeroedBuffer(cu));
    nPool = 1 + int(rnd(3));
    forkAlt = rnd(2) == 0;
    const int nEvents = nPool + n + 1 + n;
    for (int e = 0; e < nEvents; ++e) {
      CUevent ev;
      SIM_CHECK(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
      events.push_back(ev);
    }
    // The body.
    Model m = freshModel();
    const int target = 24 + int(rnd(40));
    while (int(body.size()) < target) {
      FOp op{};
      op.s = int(rnd(uint64_t(n)));
      op.alt = rnd(2) == 0;
      const uint64_t r = rnd(100);
      if (hostOps && rnd(100) < 10) {
        const uint64_t h = rnd(3);
        op.kind = h == 0 ? OK::HostFn : h == 1 ? OK::DtoH : OK::HtoD;
        op.src = op.dst = int(rnd(uint64_t(nBuf)));
        if (op.kind == OK::HtoD) op.src = -1;
        else op.dst = -1;
      } else if (r < 62) {
        op.kind = OK::Kernel;
        op.mix = rnd(3) != 0;
        op.dst = int(rnd(uint64_t(nBuf)));
        op.src = rnd(2) ? op.dst : int(rnd(uint64_t(nBuf)));
        op.k0 = rnd(1000);
        op.kStep = rnd(4) == 0;
      } else if (r < 68) {
        op.kind = OK::Memset;
        op.dst = int(rnd(uint64_t(nBuf)));
        op.k0 = rnd(1000);
        op.kStep = rnd(2) == 0;
      } else if (r < 74) {
        op.kind = OK::Copy;
        op.dst = int(rnd(uint64_t(nBuf)));
        op.src = int(rnd(uint64_t(nBuf)));
        if (op.src == op.dst) op.src = (op.dst + 1) % nBuf;
      } else if (r < 87) {
        op.kind = OK::Record;
        op.ev = int(rnd(uint64_t(nPool)));
      } else {
        op.kind = OK::Wait;
        op.ev = int(rnd(uint64_t(nPool)));
      }
      // Make it race-free: a record and a wait per conflicting stream.
      for (int guard = 0; guard < 8; ++guard) {
        const std::vector<Access> bad = conflicts(m, op);
        if (bad.empty()) break;
        const Access a = bad.front();
        FOp rec{};
        rec.kind = OK::Record;
        rec.s = a.stream;
        rec.ev = fixEvent(a.stream);
        rec.alt = rnd(2) == 0;
        FOp wait{};
        wait.kind = OK::Wait;
        wait.s = op.s;
        wait.ev = fixEvent(a.stream);
        wait.alt = rnd(2) == 0;
        apply(m, rec);
        body.push_back(rec);
        apply(m, wait);
        body.push_back(wait);
      }
      if (!conflicts(m, op).empty()) return false;
      apply(m, op);
      body.push_back(op);
    }
    // Without a fork and join around each step, the step repeated must be
    // race-free too: fix the first conflict found in four steps in a row,
    // and look again.
    if (!forkJoin) {
      for (int round = 0;; ++round) {
        if (round > 400) return false;
        Model m = freshModel();
        bool changed = false;
        for (int pass = 0; pass < 4 && !changed; ++pass) {
          for (size_t j = 0; j < body.size() && !changed; ++j) {
            const std::vector<Access> bad = conflicts(m, body[j]);
            if (bad.empty()) {
              apply(m, body[j]);
              continue;
            }
            const int u = bad.front().stream, at = body[j].s;
            FOp rec{OK::Record, u, false, -1, -1, 0, false, fixEvent(u), rnd(2) == 0};
            FOp wait{OK::Wait, at, false, -1, -1, 0, false, fixEvent(u), rnd(2) == 0};
            body.insert(body.begin() + std::ptrdiff_t(j), {rec, wait});
            changed = true;
          }
        }
        if (!changed) break;
      }
    }
    // Host observations: one or two, each at a place in the body.
    const int nObs = 1 + int(rnd(2));
    for (int o = 0; o < nObs; ++o) {
      Observe ob;
      ob.at = size_t(1 + rnd(body.size() - 1));
      ob.kind = int(rnd(5));
      ob.every = rnd(2) == 0;
      if (ob.kind <= 1) {  // an event recorded before `at` in the step
        std::vector<int> recorded;
        for (size_t j = 0; j < ob.at; ++j)
          if (body[j].kind == OK::Record && std::find(recorded.begin(), recorded.end(), body[j].ev) == recorded.end())
            recorded.push_back(body[j].ev);
        if (recorded.empty()) ob.kind = 4;
        else ob.target = recorded[rnd(recorded.size())];
      }
      if (ob.kind == 2 || ob.kind == 3) ob.target = int(rnd(uint64_t(n)));
      // The buffers whose last write before `at` the target's work covers, in
      // each of the first four steps (with a fork and join, every step is the
      // first).
      ob.checkMask = ~uint64_t(0);
      Model mm = freshModel();
      for (int pass = 0; pass < (forkJoin ? 1 : 4); ++pass) {
        for (size_t j = 0; j < ob.at; ++j) apply(mm, body[j]);
        Clock target;
        if (ob.kind <= 1) target = mm.rec[size_t(ob.target)];
        if (ob.kind == 2 || ob.kind == 3) target = mm.vc[size_t(ob.target)];
        uint64_t mask = 0;
        for (int b = 0; b < nBuf; ++b)
          if (ob.kind == 4 || hb(mm.lastWrite[size_t(b)], target)) mask |= uint64_t(1) << b;
        ob.checkMask &= mask;
        for (size_t j = ob.at; j < body.size(); ++j) apply(mm, body[j]);
      }
      obs.push_back(ob);
    }
    std::sort(obs.begin(), obs.end(), [](const Observe& a, const Observe& b) { return a.at < b.at; });
    return true;
  }

  const DriverApi& apiOf(const FOp& op) const { return apiFor(op.s, op.alt); }
  const DriverApi& apiFor(int s, bool alt) const {
    const SK kind = kinds[size_t(s)];
    if (kind == SK::PerThread) return alt ? k.cu() : k.pt();
    if (kind == SK::Legacy) return alt ? k.pt() : k.cu();
    return alt ? k.pt() : k.cu();
  }
  CUstream streamFor(int s, bool alt) const {
    const SK kind = kinds[size_t(s)];
    if (kind == SK::PerThread) return alt ? CU_STREAM_PER_THREAD : nullptr;
    if (kind == SK::Legacy) return alt ? CU_STREAM_LEGACY : nullptr;
    return handles[size_t(s)];
  }

  std::vector<uint64_t> host;  // the buffers' values in program order
  struct Probe {
    CUdeviceptr p = 0;
    std::vector<uint64_t> want, seen;
  };
  static void CUDA_CB probeFn(void* user) {
    auto* pr = static_cast<Probe*>(user);
    pr->seen.push_back(peek(pr->p));
  }
  std::vector<Probe> probes;  // per body op (host functions)
  uint64_t* pinned = nullptr;  // per step and body op (copies to and from the host)
  std::vector<std::pair<size_t, uint64_t>> dtohWant;
  size_t dtohChecked = 0;
  void checkHostOps(int step) {
    for (; dtohChecked < dtohWant.size(); ++dtohChecked)
      expectValue(pinned[dtohWant[dtohChecked].first], dtohWant[dtohChecked].second,
                  "a word copied to the host", int(dtohWant[dtohChecked].first / body.size()));
    for (Probe& pr : probes) {
      expectValue(pr.seen.size(), pr.want.size(), "host functions run", step);
      for (size_t j = 0; j < pr.want.size() && j < pr.seen.size(); ++j)
        expectValue(pr.seen[j], pr.want[j], "a word a host function read", step);
      pr.want.clear();
      pr.seen.clear();
    }
  }
  std::vector<uint64_t> hostScratch;

  void issue(const FOp& op, int step) {
    const DriverApi& api = apiOf(op);
    const CUstream h = streamFor(op.s, op.alt);
    const uint64_t kk = op.k0 + (op.kStep ? uint64_t(step) : 0);
    switch (op.kind) {
      case OK::Kernel:
        SIM_CHECK(launch3(api, op.mix ? k.mix : k.add, bufs[size_t(op.dst)], bufs[size_t(op.src)], kk, h));
        host[size_t(op.dst)] = op.mix ? mixv(host[size_t(op.src)], kk) : host[size_t(op.src)] + kk;
        break;
      case OK::Memset:
        SIM_CHECK(api.cuMemsetD32Async(bufs[size_t(op.dst)], uint32_t(kk), 2, h));
        host[size_t(op.dst)] = uint64_t(uint32_t(kk)) | uint64_t(uint32_t(kk)) << 32;
        break;
      case OK::Copy:
        SIM_CHECK(api.cuMemcpyDtoDAsync(bufs[size_t(op.dst)], bufs[size_t(op.src)], 8, h));
        host[size_t(op.dst)] = host[size_t(op.src)];
        break;
      case OK::HostFn: {
        Probe& pr = probes[size_t(&op - body.data())];
        pr.p = bufs[size_t(op.src)];
        pr.want.push_back(host[size_t(op.src)]);
        SIM_CHECK(api.cuLaunchHostFunc(h, probeFn, &pr));
        break;
      }
      case OK::DtoH: {
        const size_t slot = size_t(step) * body.size() + size_t(&op - body.data());
        SIM_CHECK(api.cuMemcpyDtoHAsync(pinned + slot, bufs[size_t(op.src)], 8, h));
        dtohWant.push_back({slot, host[size_t(op.src)]});
        break;
      }
      case OK::HtoD: {
        const size_t slot = size_t(step) * body.size() + size_t(&op - body.data());
        pinned[slot] = simMix64(uint64_t(slot) + 12345);
        SIM_CHECK(api.cuMemcpyHtoDAsync(bufs[size_t(op.dst)], pinned + slot, 8, h));
        host[size_t(op.dst)] = pinned[slot];
        break;
      }
      case OK::Record: SIM_CHECK(api.cuEventRecord(events[size_t(op.ev)], h)); break;
      case OK::Wait: SIM_CHECK(api.cuStreamWaitEvent(h, events[size_t(op.ev)], 0)); break;
    }
  }

  void observe(const Observe& ob, int step) {
    const DriverApi& cu = k.cu();
    CUresult r = CUDA_SUCCESS;
    const char* what = "";
    switch (ob.kind) {
      case 0:
        r = cu.cuEventSynchronize(events[size_t(ob.target)]);
        expectCode(r, CUDA_SUCCESS, "cuEventSynchronize", step);
        what = "after cuEventSynchronize";
        break;
      case 1:
        r = cu.cuEventQuery(events[size_t(ob.target)]);
        if (r != CUDA_ERROR_NOT_READY) expectCode(r, CUDA_SUCCESS, "cuEventQuery", step);
        what = "after cuEventQuery said complete";
        break;
      case 2:
        r = apiFor(ob.target, false).cuStreamSynchronize(streamFor(ob.target, false));
        expectCode(r, CUDA_SUCCESS, "cuStreamSynchronize", step);
        what = "after cuStreamSynchronize";
        break;
      case 3:
        r = apiFor(ob.target, true).cuStreamQuery(streamFor(ob.target, true));
        if (r != CUDA_ERROR_NOT_READY) expectCode(r, CUDA_SUCCESS, "cuStreamQuery", step);
        what = "after cuStreamQuery said complete";
        break;
      default:
        r = cu.cuCtxSynchronize();
        expectCode(r, CUDA_SUCCESS, "cuCtxSynchronize", step);
        what = "after cuCtxSynchronize";
        break;
    }
    if (r != CUDA_SUCCESS) return;
    for (int b = 0; b < nBuf; ++b) {
      if (!(ob.checkMask >> b & 1)) continue;
      char line[160];
      std::snprintf(line, sizeof line, "buffer %d %s (observation at op %zu, kind %d, target %d)", b, what, ob.at,
                    ob.kind, ob.target);
      expectValue(peek(bufs[size_t(b)]), host[size_t(b)], line, step);
    }
  }

  void run(int steps) {
    host.assign(size_t(nBuf), 0);
    probes.assign(body.size(), Probe{});
    void* mem = nullptr;
    SIM_CHECK(k.cu().cuMemAllocHost(&mem, size_t(steps) * body.size() * 8 + 8));
    pinned = static_cast<uint64_t*>(mem);
    hostScratch.assign(size_t(n), 0);
    for (int i = 0; i < steps; ++i) {
      // Fork: stream 0 records the start, the others wait on it.
      if (forkJoin) issue(FOp{OK::Record, 0, false, -1, -1, 0, false, startEvent(), forkAlt}, i);
      for (int s = 1; forkJoin && s < n; ++s) issue(FOp{OK::Wait, s, false, -1, -1, 0, false, startEvent(), false}, i);
      const bool odd = irregularStep(i, 11, 8, 13);
      const size_t extraAt = odd ? size_t(simMix64(uint64_t(i)) % body.size()) : ~size_t(0);
      size_t o = 0;
      for (size_t j = 0; j <= body.size(); ++j) {
        for (; o < obs.size() && obs[o].at == j; ++o)
          if (obs[o].every || irregularStep(i, 12 + o, 8, 13)) observe(obs[o], i);
        if (j == extraAt) {
          const int s = int(simMix64(uint64_t(i) + 5) % uint64_t(n));
          SIM_CHECK(launch3(apiFor(s, false), k.add, scratch[size_t(s)], scratch[size_t(s)], 1, streamFor(s, false)));
          hostScratch[size_t(s)] += 1;
          ++g_provoked;
        }
        if (j < body.size()) issue(body[j], i);
      }
      o = 0;
      // Join: every other stream records its end, stream 0 waits on each.
      for (int s = 1; forkJoin && s < n; ++s) {
        issue(FOp{OK::Record, s, false, -1, -1, 0, false, endEvent(s), false}, i);
        issue(FOp{OK::Wait, 0, false, -1, -1, 0, false, endEvent(s), forkAlt}, i);
      }
      if (i % 7 == 6 || i == steps - 1) {
        SIM_CHECK(k.cu().cuCtxSynchronize());
        SIM_CHECK(k.pt().cuStreamSynchronize(nullptr));
        for (int b = 0; b < nBuf; ++b) {
          char line[64];
          std::snprintf(line, sizeof line, "buffer %d (all synchronized)", b);
          expectValue(peek(bufs[size_t(b)]), host[size_t(b)], line, i);
        }
        for (int s = 0; s < n; ++s)
          expectValue(peek(scratch[size_t(s)]), hostScratch[size_t(s)], "scratch (all synchronized)", i);
        checkHostOps(i);
      }
    }
  }

  std::string describe() const {
    std::string s = text + "; " + std::to_string(nPool) + " events; body:";
    const char* names[] = {"k", "set", "cpy", "rec", "wait", "hostfn", "dtoh", "htod"};
    for (const FOp& op : body) {
      s += " " + std::string(names[int(op.kind)]) + "@" + std::to_string(op.s);
      if (op.ev >= 0) s += "/e" + std::to_string(op.ev);
      if (op.dst >= 0 || op.src >= 0) s += ":" + std::to_string(op.dst) + (op.src >= 0 ? "<" + std::to_string(op.src) : "");
    }
    for (const Observe& ob : obs)
      s += "; observe kind " + std::to_string(ob.kind) + " target " + std::to_string(ob.target) + " before op " +
           std::to_string(ob.at) + (ob.every ? " every step" : " irregular steps");
    return s;
  }
};

void fuzz(const Kit& k, uint64_t seed, bool forkJoin, bool hostOps, int steps) {
  Fuzz f(k, seed * 0x9e3779b97f4a7c15ull + 1);
  f.forkJoin = forkJoin;
  f.hostOps = hostOps;
  if (!f.setup()) {
    std::printf("sim_review6_pieces: %s: could not make the step race-free\n", g_mode);
    ++g_wrong;
    return;
  }
  if (std::getenv("REVIEW6_PRINT")) std::printf("sim_review6_pieces: %s: %s\n", g_mode, f.describe().c_str());
  f.run(steps);
}

}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review6_pieces", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review6_pieces", &drv, &ctx)) return rc;
  Kit k{&drv, simtest::libraryKernel3("sim_add_review6"), simtest::libraryKernel3("sim_mix_review6"),
        simtest::libraryKernel3("sim_gate_review6")};
  if (mode == "event-across-pieces") eventAcrossPieces(k, steps);
  else if (mode == "host-between-pieces") hostBetweenPieces(k, steps);
  else if (mode == "moving-sync") movingSync(k, steps);
  else if (mode == "variants") variants(k, steps);
  else if (mode == "odd-length") oddLength(k, steps);
  else if (mode == "default-streams") defaultStreams(k, steps);
  else if (mode == "host-func") hostFunc(k, steps);
  else if (mode == "join-stream") joinStream(k, steps);
  else if (mode == "gated-record") gatedRecord(k, steps);
  else if (mode == "event-churn") eventChurn(k, steps);
  else if (mode == "per-thread-query") perThreadQuery(k, steps);
  else if (mode.rfind("fuzz-", 0) == 0) fuzz(k, std::strtoull(mode.c_str() + 5, nullptr, 10), true, false, steps);
  else if (mode.rfind("fuzzx-", 0) == 0) fuzz(k, std::strtoull(mode.c_str() + 6, nullptr, 10), false, false, steps);
  else if (mode.rfind("fuzzh-", 0) == 0) fuzz(k, std::strtoull(mode.c_str() + 6, nullptr, 10), true, true, steps);
  else if (mode.rfind("fuzzhx-", 0) == 0) fuzz(k, std::strtoull(mode.c_str() + 7, nullptr, 10), false, true, steps);
  else {
    std::printf("usage: sim_review6_pieces --mode event-across-pieces|host-between-pieces|moving-sync|variants|"
                "odd-length|default-streams|host-func|join-stream|gated-record|event-churn|per-thread-query|"
                "fuzz[x|h|hx]-SEED [--steps N] "
                "[--expect-graphs]\n");
    return 2;
  }
  return report(steps, args.expectGraphs);
}
