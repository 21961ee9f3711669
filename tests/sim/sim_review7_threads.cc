// sim_review7_threads: the seventh red-team round's review of what happens
// when several program threads use CUDA at once: the engine lock
// (src/core/engine_mutex.{h,cc}), graft's launch thread and its hand-off with
// the program's threads (src/graph/launch_worker.h, GraphExecutor::launch,
// drain, takeOverAfterFailure), the idle flush (Engine::flushIfIdle), the
// per-thread default streams' proxies (src/graph/per_thread_streams.{h,cc},
// their exit events and joins), the interleave rest (Engine::noteSubmitter)
// and the hook's paths that forward outside the lock. Every step is long
// enough to be graphed; threads hand work over in a fixed order (a mutex
// passes the turn after each call returns) or run freely, and only what holds
// for every schedule is checked: every return code and value must be the
// simulated driver's, eagerly and under graft, and no run may hang:
//   sim_review7_threads --mode MODE [--steps N] [--expect-graphs]
//
// failed-launch-spin  one stream; each step a copy from pinned memory (a
//                boundary that does not wait), twelve kernels, the last
//                writing flag; the host then waits for flag without any CUDA
//                call (the program sets SIM_ASYNC_US=100: the simulated GPU
//                runs on its own; 3 s limit per step). With
//                SIM_FAIL=cuGraphLaunch:4:2 graft's fourth graph launch fails
//                on its launch thread, which then stops until a program
//                thread takes over: FAILS under graft (flag never arrives;
//                the idle flush issues held ops and deferred frees, but
//                nothing held is left and the halted launch thread's queue is
//                never taken over). Passes without the injection and with
//                GRAFT_ASYNC_LAUNCH=0.
// pts-free-legacy-gate  thread A's loop on its per-thread default stream (the
//                _ptsz table, NULL stream): a cuMemAllocAsync temporary, a
//                memset of it, kernels, its cuMemFreeAsync in the middle of
//                the step (deferred by graft), more kernels; on irregular
//                steps thread B then copies from pinned memory and launches a
//                kernel on the legacy stream that waits for the host
//                (sim_gate). A synchronizes its per-thread stream, reads x,
//                and only then opens the gate. Eagerly the per-thread
//                stream's synchronize never waits for legacy work issued after
//                its own. FAILS under graft: a simulated deadlock (graft's
//                deferred free reached the proxy with no `exit` record after
//                it, so the join records `exit` then, on the blocking proxy,
//                after the gate). Passes without the free.
// pts-graph-legacy-gate  the same without the temporary, and B's gate on the
//                legacy stream comes every step right after A's per-thread
//                work, so one graph holds a branch for A's proxy and one for
//                the legacy stream. FAILS under graft: a simulated deadlock
//                (the proxy's `exit` is recorded after every tail wait, the
//                legacy stream's included, so it waits for the gate).
// blocking-record-legacy-gate  the analogue on a blocking stream s: A's work
//                and a record of E on s, B's gate on the legacy stream, A
//                synchronizes E, then opens the gate. (Regression check: the
//                tail record is kept in its node beside legacy ops.)
// same-stream-relay  threads A and B issue on ONE stream in turns (A three
//                kernels, B two, twice a step), each kernel x = mix(x ^ k)
//                with k unique, so x depends on the order of all ten; A
//                synchronizes and checks at the end of the step. On irregular
//                steps B issues one more kernel, or synchronizes or polls
//                cuStreamQuery(s) in its second turn (A's ops held) and
//                checks x. Also with SIM_GRAPH_LAUNCH_US=300.
// same-stream-relay-legacy  the same on the legacy stream (NULL).
// cross-thread-events  A: work on a, record E; B: b waits on E, work, record
//                F; A: a waits on F, work, synchronize. In B's turn, on
//                irregular steps: polls cuEventQuery(E), synchronizes E,
//                polls cuStreamQuery(a), records G on A's stream and
//                synchronizes it, destroys E (A's record and B's wait held)
//                and creates the event A records next, makes a wait on an
//                event it recorded on b. Also with SIM_GRAPH_LAUNCH_US=300.
// destroy-other-stream  A issues twelve kernels and a record of E on s and
//                hands s over; B destroys s at once (A's work held or its
//                launch queued), polls cuEventQuery(E), checks x, creates the
//                next s (the handle comes back). Also SIM_GRAPH_LAUNCH_US=300.
// sync-other-queued  A loops on a freely (publishing what it issued), B on b,
//                calling cuCtxSynchronize, cuStreamSynchronize(a) or
//                cuEventSynchronize(E) in turn: x must then hold at least what
//                A had published. The program sets SIM_GRAPH_LAUNCH_US=300.
// many-threads, many-threads-pts  eight threads, each its own non-blocking
//                stream (or its per-thread default stream), the same loop at
//                once with no turns (x = mix(x ^ k), k per step and thread),
//                checked at every fourth step's synchronize and at the end.
// host-fn-sleep  A's step: kernels, a host function that sleeps 2 ms, reads x
//                and writes y (device memory is host memory here, as mapped
//                memory is on a GPU), kernels reading y; two more threads
//                launch on their own streams all the while. Also
//                SIM_ASYNC_US=100.
// pts-legacy-switch  two threads, each alternating between its per-thread
//                stream and the legacy stream on its own chain (ordered only by
//                the default streams' implicit synchronization); on irregular
//                steps a synchronous DtoH read through the per-thread table.
// other-context  two threads, one at home in device 0's primary context and
//                one in device 1's, each right after its step's last kernel
//                (the graph launch queued: the program sets
//                SIM_GRAPH_LAUNCH_US=300) switches to the other context
//                (cuCtxSetCurrent), runs and synchronizes work on its legacy
//                stream, and switches back.
// queue-takeover  a 64-kernel step cut into pieces of four ops (the program
//                sets GRAFT_SEGMENT_OPS=4, SIM_GRAPH_LAUNCH_US=300): more
//                launches than graft's eight slots are queued, so the
//                program's thread runs queued launches itself; B's stream
//                feeds each step through an event.
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken); a
// simulated deadlock aborts.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

// ------------------------------------------------------------------ helpers

bool irregular(int step, uint64_t salt) { return irregularStep(step, salt, 10, 7); }

// Thread-safe checks (the harness's counters are for one thread): counted
// into g_wrong by the main thread at the end (settle()).
std::atomic<int> t_wrong{0};
std::mutex t_print;
void tExpectValue(uint64_t got, uint64_t want, const char* what, int step) {
  if (got == want) return;
  if (t_wrong++ < 8) {
    std::lock_guard<std::mutex> g(t_print);
    std::printf("sim_review7_threads: %s: step %d: %s is %llu, expected %llu\n", g_mode, step, what,
                (unsigned long long)got, (unsigned long long)want);
  }
}
void tExpectCode(CUresult got, CUresult want, const char* what, int step) {
  if (got == want) return;
  if (t_wrong++ < 8) {
    std::lock_guard<std::mutex> g(t_print);
    std::printf("sim_review7_threads: %s: step %d: %s returned %d, the driver returns %d\n", g_mode, step, what,
                int(got), int(want));
  }
}
void settle() { g_wrong += t_wrong.exchange(0); }

CUresult launch3(const simtest::DriverApi& cu, CUfunction f, CUdeviceptr to, CUdeviceptr from, uint64_t k,
                 CUstream s) {
  void* args[] = {&to, &from, &k};
  return cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
}

void launchGate(const simtest::DriverApi& cu, CUfunction gate, CUdeviceptr flag, uint64_t threshold, CUstream s) {
  uint64_t unused = 0;
  void* args[] = {&flag, &unused, &threshold};
  SIM_CHECK(cu.cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
}

// A one-shot hand-off between two threads: the owner of the turn runs until it
// passes the turn.
class Baton {
 public:
  void await(int who) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return turn_ == who; });
  }
  void pass(int to) {
    std::lock_guard<std::mutex> l(m_);
    turn_ = to;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int turn_ = 0;
};

// Runs `turns` turns over `threads` threads (each with `ctx` current): turn t
// belongs to thread owner(t) and runs body(thread, t) only after turn t-1 has
// returned, so the order of every thread's calls is fixed (a program whose
// threads hand work over with a mutex).
void relay(CUcontext ctx, const simtest::DriverApi& cu, int threads, int turns, const std::function<int(int)>& owner,
           const std::function<void(int, int)>& body) {
  std::mutex m;
  std::condition_variable cv;
  int next = 0;
  std::vector<std::thread> ts;
  for (int th = 0; th < threads; ++th) {
    ts.emplace_back([&, th] {
      SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      for (;;) {
        int t;
        {
          std::unique_lock<std::mutex> l(m);
          cv.wait(l, [&] {
            while (next < turns && owner(next) < 0) ++next;  // (no owner: skipped)
            return next >= turns || owner(next) == th;
          });
          if (next >= turns) return;
          t = next;
        }
        body(th, t);
        {
          std::lock_guard<std::mutex> l(m);
          ++next;
          cv.notify_all();
        }
      }
    });
  }
  for (auto& t : ts) t.join();
}

struct Kernels {
  CUfunction add = nullptr, mix = nullptr, gate = nullptr;
};

// ------------------------------------------------------------------ modes

// failed-launch-spin: one stream; each step an async copy from pinned memory
// (a boundary that does not wait: the step's run starts after it), twelve
// kernels, the last writing flag = i + 11; the host then waits for flag
// without any CUDA call (SIM_ASYNC_US: the simulated GPU runs on its own).
// With SIM_FAIL=cuGraphLaunch:N:2 one of graft's graph launches fails on its
// launch thread.
void failedLaunchSpin(const simtest::DriverApi& cu, const Kernels& k, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void* pinned = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&pinned, 64));
  const CUdeviceptr y = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), flag = simtest::zeroedBuffer(cu);
  for (int i = 1; i <= steps; ++i) {
    *static_cast<volatile uint64_t*>(pinned) = uint64_t(i);
    SIM_CHECK(cu.cuMemcpyHtoDAsync(y, pinned, 8, s));
    SIM_CHECK(launch3(cu, k.add, x, y, 1, s));
    for (int n = 0; n < 10; ++n) SIM_CHECK(launch3(cu, k.add, x, x, 1, s));
    SIM_CHECK(launch3(cu, k.add, flag, x, 0, s));
    const uint64_t want = uint64_t(i) + 11;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (peek(flag) != want && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    expectValue(peek(flag), want, "flag, waited for 3 s without a CUDA call", i);
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}


// A helper thread that issues legacy-stream work when asked (the program's
// second thread, which uses the legacy default stream).
class LegacyHelper {
 public:
  LegacyHelper(const simtest::DriverApi& cu, CUcontext ctx) : cu_(cu), t_([this, ctx] { run(ctx); }) {}
  ~LegacyHelper() {
    post(nullptr);
    t_.join();
  }
  // Runs `job` on the helper thread and returns once it ran.
  void call(std::function<void()> job) { post(std::move(job)); }

 private:
  void post(std::function<void()> job) {
    std::unique_lock<std::mutex> l(m_);
    job_ = std::move(job);
    pending_ = true;
    cv_.notify_all();
    cv_.wait(l, [&] { return !pending_; });
  }
  void run(CUcontext ctx) {
    SIM_CHECK(cu_.cuCtxSetCurrent(ctx));
    for (;;) {
      std::unique_lock<std::mutex> l(m_);
      cv_.wait(l, [&] { return pending_; });
      const bool quit = !job_;
      if (job_) job_();
      pending_ = false;
      cv_.notify_all();
      if (quit) return;
    }
  }
  const simtest::DriverApi& cu_;
  std::mutex m_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool pending_ = false;
  std::thread t_;  // last: started once the members above exist
};

// pts-free-legacy-gate: thread A's loop on its per-thread default stream (the
// _ptsz table, NULL stream): a cuMemAllocAsync temporary, a memset of it, a
// kernel reading it, the temporary's cuMemFreeAsync in the middle of the
// step's kernels, more kernels. On irregular steps thread B then launches a
// kernel on the legacy stream that waits for the host (sim_gate; eagerly it
// waits for A's per-thread work before it). A then synchronizes its
// per-thread stream, reads x, and only then opens the gate. Eagerly the
// per-thread stream never waits for legacy work issued after its own.
void ptsFreeLegacyGate(const simtest::Driver& drv, CUcontext ctx, const Kernels& k, int steps) {
  const simtest::DriverApi& pt = drv.perThread;
  const simtest::DriverApi& cu = drv.plain;
  const CUdeviceptr x = simtest::zeroedBuffer(cu), flag = simtest::zeroedBuffer(cu), g = simtest::zeroedBuffer(cu);
  void* pinned = nullptr;
  SIM_CHECK(cu.cuMemAllocHost(&pinned, 64));
  LegacyHelper b(cu, ctx);
  for (int i = 1; i <= steps; ++i) {
    CUdeviceptr tmp = 0;
    SIM_CHECK(pt.cuMemAllocAsync(&tmp, 64, nullptr));
    SIM_CHECK(pt.cuMemsetD32Async(tmp, uint32_t(i), 2, nullptr));
    SIM_CHECK(launch3(pt, k.add, x, tmp, 1, nullptr));  // x = tmp + 1
    SIM_CHECK(launch3(pt, k.add, x, x, 1, nullptr));
    SIM_CHECK(pt.cuMemFreeAsync(tmp, nullptr));
    for (int n = 0; n < 3; ++n) SIM_CHECK(launch3(pt, k.add, x, x, 1, nullptr));
    const uint64_t want = (uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32) + 5;
    const bool gated = irregular(i, 1);
    if (gated) {
      ++g_provoked;
      b.call([&] {
        // A copy from pinned memory first (run at its position; it keeps the
        // gate out of any graph with A's ops), then the gate.
        SIM_CHECK(cu.cuMemcpyHtoDAsync(g, pinned, 8, nullptr));
        launchGate(cu, k.gate, flag, uint64_t(i), nullptr);
      });
    }
    SIM_CHECK(pt.cuStreamSynchronize(nullptr));  // eagerly: the per-thread stream's work only
    expectValue(peek(x), want, "x after the per-thread stream's synchronize", i);
    if (gated) {
      poke(flag, uint64_t(i));  // open the gate
      b.call([&] { SIM_CHECK(cu.cuStreamSynchronize(nullptr)); });
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

// pts-graph-legacy-gate: the same without the temporary, and thread B's gate
// kernel on the legacy stream comes every step right after A's per-thread
// work (so graft graphs both threads' ops in one piece, a branch for the
// per-thread stream's proxy and one for the legacy stream). A synchronizes
// its per-thread stream, reads x, then opens the gate.
void ptsGraphLegacyGate(const simtest::Driver& drv, CUcontext ctx, const Kernels& k, int steps) {
  const simtest::DriverApi& pt = drv.perThread;
  const simtest::DriverApi& cu = drv.plain;
  const CUdeviceptr a = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), flag = simtest::zeroedBuffer(cu);
  LegacyHelper b(cu, ctx);
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(pt.cuMemsetD32Async(a, uint32_t(i), 2, nullptr));
    SIM_CHECK(launch3(pt, k.add, x, a, 1, nullptr));  // x = a + 1
    for (int n = 0; n < 4; ++n) SIM_CHECK(launch3(pt, k.add, x, x, 1, nullptr));
    const uint64_t want = (uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32) + 5;
    b.call([&] { launchGate(cu, k.gate, flag, uint64_t(i), nullptr); });
    ++g_provoked;
    SIM_CHECK(pt.cuStreamSynchronize(nullptr));  // eagerly: the per-thread stream's work only
    expectValue(peek(x), want, "x after the per-thread stream's synchronize", i);
    poke(flag, uint64_t(i));  // open the gate
    b.call([&] { SIM_CHECK(cu.cuStreamSynchronize(nullptr)); });
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}


// blocking-record-legacy-gate: thread A's step on a blocking stream s
// (created with flags 0): a memset, five kernels, then a record of E on s;
// right after it thread B launches a kernel on the legacy stream that waits
// for the host (sim_gate; eagerly it waits for s's work, the record
// included). A then synchronizes E, reads x, and only then opens the gate.
// Eagerly E's record completes when s's work before it and the legacy work
// issued before it are done: the gate, issued after it, is not among them.
void blockingRecordLegacyGate(const simtest::DriverApi& cu, CUcontext ctx, const Kernels& k, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_DEFAULT));
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr a = simtest::zeroedBuffer(cu), x = simtest::zeroedBuffer(cu), flag = simtest::zeroedBuffer(cu);
  LegacyHelper b(cu, ctx);
  for (int i = 1; i <= steps; ++i) {
    SIM_CHECK(cu.cuMemsetD32Async(a, uint32_t(i), 2, s));
    SIM_CHECK(launch3(cu, k.add, x, a, 1, s));  // x = a + 1
    for (int n = 0; n < 4; ++n) SIM_CHECK(launch3(cu, k.add, x, x, 1, s));
    SIM_CHECK(cu.cuEventRecord(E, s));
    const uint64_t want = (uint64_t(uint32_t(i)) | uint64_t(uint32_t(i)) << 32) + 5;
    b.call([&] { launchGate(cu, k.gate, flag, uint64_t(i), nullptr); });
    ++g_provoked;
    SIM_CHECK(cu.cuEventSynchronize(E));  // eagerly: s's work before the record
    expectValue(peek(x), want, "x after cuEventSynchronize(E)", i);
    poke(flag, uint64_t(i));  // open the gate
    b.call([&] { SIM_CHECK(cu.cuStreamSynchronize(nullptr)); });
  }
  SIM_CHECK(cu.cuCtxSynchronize());
}

// same-stream-relay: threads A and B issue on ONE stream s in turns (A three
// kernels, B two, twice a step; a mutex hands the turn over after each
// call returns), every kernel x = mix(x ^ k) with k unique per op, so the
// result depends on the order of all ten. A synchronizes s at the end of the
// step and checks x against the host's chain (in call order). On irregular
// steps B issues a third kernel in its first turn (the step's shape
// changes), and on others B synchronizes or queries s (polling) in its
// second turn, while A's ops are held, and checks the value then.
void sameStreamRelay(const simtest::DriverApi& cu, CUcontext ctx, const Kernels& k, int steps, bool legacy) {
  CUstream s = nullptr;  // legacy: the legacy default stream, which both threads name as NULL
  if (!legacy) SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;  // the host's chain, advanced by whoever issues (one at a time)
  auto mixOn = [&](uint64_t key) {
    SIM_CHECK(launch3(cu, k.mix, x, x, key, s));
    hx = simMix64(hx ^ key);
  };
  // Turns per step: 0 A, 1 B, 2 A, 3 B, 4 A (sync and check).
  relay(ctx, cu, 2, steps * 5, [](int t) { return (t % 5) % 2; },
        [&](int th, int t) {
          const int i = t / 5, phase = t % 5;
          const uint64_t base = uint64_t(i) * 1000 + uint64_t(phase) * 10;
          if (th == 0 && phase < 4) {
            for (int n = 0; n < 3; ++n) mixOn(base + uint64_t(n));
          } else if (th == 1) {
            for (int n = 0; n < 2; ++n) mixOn(base + uint64_t(n));
            if (phase == 1 && irregular(i, 11)) {
              ++g_provoked;
              mixOn(base + 7);
            }
            if (phase == 3 && irregular(i, 12)) {
              ++g_provoked;
              SIM_CHECK(cu.cuStreamSynchronize(s));
              tExpectValue(peek(x), hx, "x after B's cuStreamSynchronize(s) mid-step", i);
            } else if (phase == 3 && irregular(i, 13)) {
              ++g_provoked;
              const CUresult r = pollUntilDone([&] { return cu.cuStreamQuery(s); });
              tExpectCode(r, CUDA_SUCCESS, "B's cuStreamQuery(s), polled", i);
              if (r == CUDA_SUCCESS) tExpectValue(peek(x), hx, "x after B's query of s said idle", i);
            }
          } else {  // A, phase 4
            SIM_CHECK(cu.cuStreamSynchronize(s));
            tExpectValue(peek(x), hx, "x after A's cuStreamSynchronize(s)", i);
          }
        });
}

// cross-thread-events: A works on stream a (x = x + 1 six times, y = x,
// record E on a); then B makes its stream b wait on E and computes z = y + 1
// (five kernels), records F on b; then A makes a wait on F and continues x
// from z. A synchronizes a every step and checks x, y; B checks z at its
// synchronize of b every third step. In B's turn, on irregular steps
// (each its own): B asks cuEventQuery(E) until complete and reads y; B
// synchronizes E; B polls cuStreamQuery(a); B records its own event G on A's
// stream a (after A's held work) and synchronizes G; B destroys E (A's
// record and B's wait held or queued) and creates the event A records next
// step; B makes A's stream a wait on an event H it recorded on b.
void crossThreadEvents(const simtest::DriverApi& cu, CUcontext ctx, const Kernels& k, int steps) {
  CUstream a, b;
  SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent E, F, G, H;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&F, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&G, CU_EVENT_DISABLE_TIMING));
  SIM_CHECK(cu.cuEventCreate(&H, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0, hz = 0;
  // Turns per step: 0 A (work, record E), 1 B (wait E, work, record F, odd
  // calls), 2 A (wait F, continue, sync, check).
  relay(ctx, cu, 2, steps * 3, [](int t) { return t % 3 == 1 ? 1 : 0; },
        [&](int th, int t) {
          const int i = t / 3, phase = t % 3;
          if (th == 0 && phase == 0) {
            for (int n = 0; n < 6; ++n) SIM_CHECK(launch3(cu, k.add, x, x, 1, a));
            hx += 6;
            SIM_CHECK(launch3(cu, k.add, y, x, 0, a));
            hy = hx;
            SIM_CHECK(cu.cuEventRecord(E, a));
          } else if (th == 1) {
            SIM_CHECK(cu.cuStreamWaitEvent(b, E, 0));
            SIM_CHECK(launch3(cu, k.add, z, y, 1, b));
            for (int n = 0; n < 4; ++n) SIM_CHECK(launch3(cu, k.add, z, z, 1, b));
            hz = hy + 5;
            SIM_CHECK(cu.cuEventRecord(F, b));
            if (irregular(i, 21)) {
              ++g_provoked;
              const CUresult r = pollUntilDone([&] { return cu.cuEventQuery(E); });
              tExpectCode(r, CUDA_SUCCESS, "B's cuEventQuery(E), polled", i);
              tExpectValue(peek(y), hy, "y after E completed", i);
            }
            if (irregular(i, 22)) {
              ++g_provoked;
              SIM_CHECK(cu.cuEventSynchronize(E));
              tExpectValue(peek(y), hy, "y after B's cuEventSynchronize(E)", i);
            }
            if (irregular(i, 23)) {
              ++g_provoked;
              const CUresult r = pollUntilDone([&] { return cu.cuStreamQuery(a); });
              tExpectCode(r, CUDA_SUCCESS, "B's cuStreamQuery(a), polled", i);
              tExpectValue(peek(x), hx, "x after B saw a idle", i);
            }
            if (irregular(i, 24)) {
              ++g_provoked;
              SIM_CHECK(cu.cuEventRecord(G, a));  // on A's stream, after A's work
              SIM_CHECK(cu.cuEventSynchronize(G));
              tExpectValue(peek(y), hy, "y after B's record of G on a completed", i);
            }
            if (irregular(i, 25)) {
              ++g_provoked;
              SIM_CHECK(cu.cuEventDestroy(E));  // A's record and B's wait may be held
              SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
            }
            if (irregular(i, 26)) {
              ++g_provoked;
              SIM_CHECK(launch3(cu, k.add, z, z, 100, b));
              hz += 100;
              SIM_CHECK(cu.cuEventRecord(H, b));
              SIM_CHECK(cu.cuStreamWaitEvent(a, H, 0));  // A's next work follows it
            }
            if (i % 3 == 2) {
              SIM_CHECK(cu.cuStreamSynchronize(b));
              tExpectValue(peek(z), hz, "z after B's synchronize", i);
            }
          } else {  // A, phase 2
            SIM_CHECK(cu.cuStreamWaitEvent(a, F, 0));
            SIM_CHECK(launch3(cu, k.add, x, z, 1, a));  // x = z + 1
            for (int n = 0; n < 3; ++n) SIM_CHECK(launch3(cu, k.add, x, x, 1, a));
            hx = hz + 4;
            SIM_CHECK(cu.cuStreamSynchronize(a));
            tExpectValue(peek(x), hx, "x after A's synchronize", i);
            tExpectValue(peek(y), hy, "y after A's synchronize", i);
          }
        });
  SIM_CHECK(cu.cuCtxSynchronize());
}

// destroy-other-stream: A issues twelve kernels on stream s (x += 1) and
// records E on s, then hands s to B, which destroys it at once (A's work held
// by graft or its graph launch queued on graft's launch thread), polls
// cuEventQuery(E) until complete, checks x, and creates the stream A uses
// next step (the simulator gives the destroyed handle out again). Run also
// with SIM_GRAPH_LAUNCH_US=500 (a slow graph launch: still queued when B
// destroys s).
void destroyOtherStream(const simtest::DriverApi& cu, CUcontext ctx, const Kernels& k, int steps) {
  CUstream s;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  relay(ctx, cu, 2, steps * 2, [](int t) { return t % 2; },
        [&](int th, int t) {
          const int i = t / 2;
          if (th == 0) {
            for (int n = 0; n < 12; ++n) SIM_CHECK(launch3(cu, k.add, x, x, 1, s));
            hx += 12;
            SIM_CHECK(cu.cuEventRecord(E, s));
            return;
          }
          ++g_provoked;
          SIM_CHECK(cu.cuStreamDestroy(s));
          const CUresult r = pollUntilDone([&] { return cu.cuEventQuery(E); });
          tExpectCode(r, CUDA_SUCCESS, "B's cuEventQuery(E) after destroying s, polled", i);
          tExpectValue(peek(x), hx, "x once E completed", i);
          SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        });
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), hx, "x at the end", steps);
}

// sync-other-queued: A loops on stream a (x += 1 twelve times, record E; a
// synchronize every eighth step) and publishes after each call what it has
// issued; B loops on its own stream b and, every step, calls cuCtxSynchronize,
// cuStreamSynchronize(a) or cuEventSynchronize(E) in turn: afterwards x must
// hold at least what A had published before the call. The threads run freely
// (not in turns). The program sets SIM_GRAPH_LAUNCH_US=300 (graft's graph
// launches still queued on its launch thread when B synchronizes).
void syncOtherQueued(const simtest::DriverApi& cu, CUcontext ctx, const Kernels& k, int steps) {
  CUstream a, b;
  SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  std::atomic<uint64_t> issuedX{0}, recordedX{0};
  std::atomic<bool> done{false};
  std::thread ta([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    uint64_t hx = 0;
    for (int i = 0; i < steps; ++i) {
      for (int n = 0; n < 12; ++n) {
        SIM_CHECK(launch3(cu, k.add, x, x, 1, a));
        issuedX.store(++hx);
      }
      SIM_CHECK(cu.cuEventRecord(E, a));
      recordedX.store(hx);
      if (i % 8 == 7) {
        SIM_CHECK(cu.cuStreamSynchronize(a));
        tExpectValue(peek(x), hx, "x after A's synchronize", i);
      }
    }
    done.store(true);
  });
  std::thread tb([&] {
    SIM_CHECK(cu.cuCtxSetCurrent(ctx));
    uint64_t hy = 0;
    for (int i = 0; !done.load() || i < steps; ++i) {
      for (int n = 0; n < 6; ++n) SIM_CHECK(launch3(cu, k.add, y, y, 1, b));
      hy += 6;
      switch (i % 3) {
        case 0: {
          const uint64_t want = issuedX.load();
          SIM_CHECK(cu.cuCtxSynchronize());
          if (peek(x) < want) tExpectValue(peek(x), want, "x after B's cuCtxSynchronize (at least)", i);
          tExpectValue(peek(y), hy, "y after B's cuCtxSynchronize", i);
          break;
        }
        case 1: {
          const uint64_t want = issuedX.load();
          SIM_CHECK(cu.cuStreamSynchronize(a));
          if (peek(x) < want) tExpectValue(peek(x), want, "x after B's cuStreamSynchronize(a) (at least)", i);
          break;
        }
        default: {
          const uint64_t want = recordedX.load();
          SIM_CHECK(cu.cuEventSynchronize(E));
          if (peek(x) < want) tExpectValue(peek(x), want, "x after B's cuEventSynchronize(E) (at least)", i);
        }
      }
      ++g_provoked;
      if (i > 50 * steps) break;
    }
    SIM_CHECK(cu.cuStreamSynchronize(b));
    tExpectValue(peek(y), hy, "y at B's end", steps);
  });
  ta.join();
  tb.join();
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), uint64_t(steps) * 12, "x at the end", steps);
}

// many-threads: eight threads, each with its own non-blocking stream (or,
// --pts variant, its own per-thread default stream) and buffer, run the same
// loop at once with no turns (interleaved as the scheduler likes: graft's
// interleave rest may start and end): x = mix(x ^ k) eleven times with k
// from the step, a synchronize every fourth step, x checked there and at the
// end against the thread's own chain.
void manyThreads(const simtest::Driver& drv, CUcontext ctx, const Kernels& k, int steps, bool pts) {
  const simtest::DriverApi& cu = pts ? drv.perThread : drv.plain;
  const int n = 8;
  std::vector<std::thread> ts;
  for (int th = 0; th < n; ++th) {
    ts.emplace_back([&, th] {
      SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      CUstream s = nullptr;
      if (!pts) SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      const CUdeviceptr x = simtest::zeroedBuffer(cu);
      uint64_t hx = 0;
      for (int i = 0; i < steps; ++i) {
        for (int m = 0; m < 11; ++m) {
          const uint64_t key = uint64_t(i) * 100 + uint64_t(m) + uint64_t(th) * 7;
          SIM_CHECK(launch3(cu, k.mix, x, x, key, s));
          hx = simMix64(hx ^ key);
        }
        if (i % 4 == 3) {
          SIM_CHECK(cu.cuStreamSynchronize(s));
          tExpectValue(peek(x), hx, "a thread's x after its synchronize", i);
        }
      }
      SIM_CHECK(cu.cuStreamSynchronize(s));
      tExpectValue(peek(x), hx, "a thread's x at its end", steps);
    });
  }
  for (auto& t : ts) t.join();
}

// host-fn-sleep: thread A's step on stream a: four kernels (x += 1), a host
// function that sleeps 2 ms, reads x and writes y = 3x + i (device memory is
// host memory in the simulator, as mapped pinned memory is on a GPU), four
// kernels z = y + 1, then z += 1; a synchronize every step, z checked.
// Threads B and C launch on their own streams all the while (checked too).
struct HostFnArgs {
  CUdeviceptr x, y;
  uint64_t i;
  std::atomic<uint64_t> seenX{0};
};
void CUDA_CB sleepyHost(void* p) {
  auto* h = static_cast<HostFnArgs*>(p);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const uint64_t x = peek(h->x);
  h->seenX.store(x);
  poke(h->y, 3 * x + h->i);
}
void hostFnSleep(const simtest::DriverApi& cu, CUcontext ctx, const Kernels& k, int steps) {
  std::atomic<bool> done{false};
  std::vector<std::thread> others;
  for (int th = 0; th < 2; ++th) {
    others.emplace_back([&] {
      SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      CUstream s;
      SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      const CUdeviceptr w = simtest::zeroedBuffer(cu);
      uint64_t hw = 0;
      for (int i = 0; !done.load(); ++i) {
        for (int m = 0; m < 8; ++m) SIM_CHECK(launch3(cu, k.add, w, w, 1, s));
        hw += 8;
        if (i % 5 == 4) {
          SIM_CHECK(cu.cuStreamSynchronize(s));
          tExpectValue(peek(w), hw, "another thread's w", i);
        }
      }
      SIM_CHECK(cu.cuStreamSynchronize(s));
      tExpectValue(peek(w), hw, "another thread's w at its end", 0);
    });
  }
  CUstream a;
  SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu), z = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  std::vector<HostFnArgs> hargs(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    for (int m = 0; m < 4; ++m) SIM_CHECK(launch3(cu, k.add, x, x, 1, a));
    hx += 4;
    HostFnArgs& h = hargs[size_t(i)];
    h.x = x;
    h.y = y;
    h.i = uint64_t(i);
    SIM_CHECK(cu.cuLaunchHostFunc(a, sleepyHost, &h));
    SIM_CHECK(launch3(cu, k.add, z, y, 1, a));
    for (int m = 0; m < 3; ++m) SIM_CHECK(launch3(cu, k.add, z, z, 1, a));
    SIM_CHECK(cu.cuStreamSynchronize(a));
    expectValue(h.seenX.load(), hx, "x as the host function read it", i);
    expectValue(peek(z), 3 * hx + uint64_t(i) + 4, "z", i);
  }
  done.store(true);
  for (auto& t : others) t.join();
}

// pts-legacy-switch: thread A alternates between its per-thread default
// stream (the _ptsz table, NULL) and the legacy stream (the plain table,
// NULL) on one chain x = mix(x ^ k): two kernels per-thread, two legacy, two
// per-thread, one legacy, ordered only by the implicit synchronization of
// the two default streams; thread B does the same on its own chain at the
// same time (its legacy kernels are ordered with A's per-thread ones too).
// Each synchronizes its per-thread stream, then the legacy stream, every
// third step and checks its chain. On irregular steps A also makes a
// synchronous copy through the per-thread table (a DtoH read of x) between
// the per-thread and legacy parts, and checks it.
void ptsLegacySwitch(const simtest::Driver& drv, CUcontext ctx, const Kernels& k, int steps) {
  const simtest::DriverApi& pt = drv.perThread;
  const simtest::DriverApi& cu = drv.plain;
  std::vector<std::thread> ts;
  for (int th = 0; th < 2; ++th) {
    ts.emplace_back([&, th] {
      SIM_CHECK(cu.cuCtxSetCurrent(ctx));
      const CUdeviceptr x = simtest::zeroedBuffer(cu);
      uint64_t hx = 0;
      auto on = [&](const simtest::DriverApi& api, uint64_t key) {
        SIM_CHECK(launch3(api, k.mix, x, x, key, nullptr));
        hx = simMix64(hx ^ key);
      };
      for (int i = 0; i < steps; ++i) {
        const uint64_t b = uint64_t(i) * 100 + uint64_t(th) * 50;
        on(pt, b + 1);
        on(pt, b + 2);
        if (th == 0 && irregular(i, 31)) {
          ++g_provoked;
          uint64_t v = 0;
          SIM_CHECK(pt.cuMemcpyDtoH(&v, x, 8));
          tExpectValue(v, hx, "x read through the per-thread stream mid-step", i);
        }
        on(cu, b + 3);
        on(cu, b + 4);
        on(pt, b + 5);
        on(pt, b + 6);
        on(cu, b + 7);
        if (i % 3 == 2) {
          SIM_CHECK(pt.cuStreamSynchronize(nullptr));
          SIM_CHECK(cu.cuStreamSynchronize(nullptr));
          tExpectValue(peek(x), hx, "x after both default streams' synchronize", i);
        }
      }
      SIM_CHECK(cu.cuCtxSynchronize());
      tExpectValue(peek(x), hx, "x at the end", steps);
    });
  }
  for (auto& t : ts) t.join();
}

// other-context: thread A loops on its stream a in device 0's primary
// context (graphed; SIM_GRAPH_LAUNCH_US=300, set by the program, keeps its
// graph launches queued on graft's launch thread); right after each step's
// last kernel, while that launch is queued, A makes device 1's primary
// context current (cuCtxSetCurrent), runs four kernels on its legacy stream
// (NULL) and synchronizes it, checks w, and switches back; every fourth step
// A synchronizes a and checks x. Thread B does the same in device 1 with a
// stream b there and device 0's legacy stream, at the same time.
void otherContext(const simtest::DriverApi& cu, CUcontext ctx0, const Kernels& k, int steps) {
  CUdevice dev1 = 0;
  CUcontext ctx1 = nullptr;
  SIM_CHECK(cu.cuDeviceGet(&dev1, 1));
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&ctx1, dev1));
  std::vector<std::thread> ts;
  for (int th = 0; th < 2; ++th) {
    ts.emplace_back([&, th] {
      const CUcontext home = th == 0 ? ctx0 : ctx1, away = th == 0 ? ctx1 : ctx0;
      SIM_CHECK(cu.cuCtxSetCurrent(home));
      CUstream a;
      SIM_CHECK(cu.cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
      const CUdeviceptr x = simtest::zeroedBuffer(cu), w = simtest::zeroedBuffer(cu);
      uint64_t hx = 0, hw = 0;
      for (int i = 0; i < steps; ++i) {
        for (int m = 0; m < 10; ++m) SIM_CHECK(launch3(cu, k.add, x, x, 1, a));
        hx += 10;
        SIM_CHECK(cu.cuCtxSetCurrent(away));
        for (int m = 0; m < 4; ++m) SIM_CHECK(launch3(cu, k.add, w, w, 1, nullptr));
        hw += 4;
        SIM_CHECK(cu.cuStreamSynchronize(nullptr));
        tExpectValue(peek(w), hw, "w after the other context's legacy stream's synchronize", i);
        SIM_CHECK(cu.cuCtxSetCurrent(home));
        if (i % 4 == 3) {
          SIM_CHECK(cu.cuStreamSynchronize(a));
          tExpectValue(peek(x), hx, "x after a's synchronize", i);
        }
      }
      SIM_CHECK(cu.cuStreamSynchronize(a));
      tExpectValue(peek(x), hx, "x at the end", steps);
    });
  }
  for (auto& t : ts) t.join();
}

// queue-takeover: one long step (64 kernels on stream s) cut into pieces of
// four ops (GRAFT_SEGMENT_OPS=4, set by the program) under a slow graph
// launch (SIM_GRAPH_LAUNCH_US=300): more than graft's eight launch slots are
// queued, so the program's thread waits for a slot and runs queued launches
// itself ("taken over"). Thread B meanwhile loops on its own stream t with a
// record of E on t every step, which A's stream s waits on at the start of
// each step (A's first kernel reads B's value); A synchronizes every step.
void queueTakeover(const simtest::DriverApi& cu, CUcontext ctx, const Kernels& k, int steps) {
  CUstream s, t;
  SIM_CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  SIM_CHECK(cu.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  CUevent E;
  SIM_CHECK(cu.cuEventCreate(&E, CU_EVENT_DISABLE_TIMING));
  const CUdeviceptr x = simtest::zeroedBuffer(cu), v = simtest::zeroedBuffer(cu);
  uint64_t hv = 0;
  relay(ctx, cu, 2, steps * 2, [](int tn) { return 1 - tn % 2; },
        [&](int th, int tn) {
          const int i = tn / 2;
          if (th == 1) {  // B first: v += 1 four times, record E on t
            for (int m = 0; m < 4; ++m) SIM_CHECK(launch3(cu, k.add, v, v, 1, t));
            hv += 4;
            SIM_CHECK(cu.cuEventRecord(E, t));
            return;
          }
          SIM_CHECK(cu.cuStreamWaitEvent(s, E, 0));
          SIM_CHECK(launch3(cu, k.add, x, v, 0, s));  // x = v
          for (int m = 0; m < 63; ++m) SIM_CHECK(launch3(cu, k.add, x, x, 1, s));
          SIM_CHECK(cu.cuStreamSynchronize(s));
          tExpectValue(peek(x), hv + 63, "x after A's synchronize", i);
        });
  SIM_CHECK(cu.cuCtxSynchronize());
}
}  // namespace

int main(int argc, char** argv) {
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review7_threads", 200);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  if (mode == "failed-launch-spin") setenv("SIM_ASYNC_US", "100", 0);  // the simulated GPU runs while the host spins
  if (mode == "sync-other-queued" || mode == "other-context" || mode == "queue-takeover")
    setenv("SIM_GRAPH_LAUNCH_US", "300", 0);  // graft's graph launches stay queued on its launch thread
  if (mode == "queue-takeover") setenv("GRAFT_SEGMENT_OPS", "4", 0);
  simtest::Driver drv;
  CUcontext ctx = nullptr;
  if (int rc = simtest::startProgram("sim_review7_threads", &drv, &ctx)) return rc;
  const simtest::DriverApi& cu = drv.plain;
  Kernels k;
  k.add = simtest::libraryKernel3("sim_add_review7");
  k.mix = simtest::libraryKernel3("sim_mix_review7");
  k.gate = simtest::libraryKernel3("sim_gate_review7");
  if (mode == "failed-launch-spin") failedLaunchSpin(cu, k, steps);
  else if (mode == "pts-free-legacy-gate") ptsFreeLegacyGate(drv, ctx, k, steps);
  else if (mode == "pts-graph-legacy-gate") ptsGraphLegacyGate(drv, ctx, k, steps);
  else if (mode == "blocking-record-legacy-gate") blockingRecordLegacyGate(cu, ctx, k, steps);
  else if (mode == "same-stream-relay") sameStreamRelay(cu, ctx, k, steps, false);
  else if (mode == "same-stream-relay-legacy") sameStreamRelay(cu, ctx, k, steps, true);
  else if (mode == "cross-thread-events") crossThreadEvents(cu, ctx, k, steps);
  else if (mode == "destroy-other-stream") destroyOtherStream(cu, ctx, k, steps);
  else if (mode == "sync-other-queued") syncOtherQueued(cu, ctx, k, steps);
  else if (mode == "many-threads") manyThreads(drv, ctx, k, steps, false);
  else if (mode == "many-threads-pts") manyThreads(drv, ctx, k, steps, true);
  else if (mode == "host-fn-sleep") hostFnSleep(cu, ctx, k, steps);
  else if (mode == "pts-legacy-switch") ptsLegacySwitch(drv, ctx, k, steps);
  else if (mode == "other-context") otherContext(cu, ctx, k, steps);
  else if (mode == "queue-takeover") queueTakeover(cu, ctx, k, steps);
  else {
    std::printf("usage: sim_review7_threads --mode failed-launch-spin|pts-free-legacy-gate|pts-graph-legacy-gate|"
                "blocking-record-legacy-gate|same-stream-relay|same-stream-relay-legacy|cross-thread-events|"
                "destroy-other-stream|sync-other-queued|many-threads|many-threads-pts|host-fn-sleep|"
                "pts-legacy-switch|other-context|queue-takeover [--steps N] [--expect-graphs]\n");
    return 2;
  }
  settle();
  return report(steps, args.expectGraphs);
}
