// sim_review9_newcode: the ninth red-team round's review of session 32's
// changes: sticky-error handling (hook::isStickyError, wrapperBody ->
// noteStickyError -> Engine::stopReplay; Engine::noteStickyError /
// attendToLaunches / handleFailedLaunches / issueHeldEagerly;
// GraphExecutor::takeOverAfterFailure), the pool's forgetting of ended
// contexts (DevicePool::contextsMayHaveEnded, fence events per context), the
// options re-read when graft starts (takeOptionsAtStart) and the log file's
// life across processes (GRAFT_LOG_ROOT_PID, %p). Every mode passes without
// graft; every return code and value must be the simulated driver's, eagerly
// and under graft, with no crash or hang:
//   sim_review9_newcode --mode MODE [--steps N] [--expect-graphs]
//
// (Each "FAILS under graft" below is what graft did when the mode was written;
// tests/sim/meson.build registers what holds now: all pass but queries-held,
// a documented limit.)
//
// sticky-pool-alloc  (run with GRAFT_POOL=1) a graphed loop on s whose
//                temporaries come from cuMemAllocAsync/cuMemFreeAsync on s
//                (graft's pool serves them), one block kept allocated; then a
//                kernel reads unmapped memory (the sticky 700) and
//                cuStreamSynchronize(s) returns 700 to the program (eagerly
//                and under graft: from here on every call fails eagerly);
//                then cuMemAllocAsync on s, cuMemFreeAsync of the kept block
//                and of the new one, cuStreamSynchronize: eagerly all 700.
//                FAILS under graft with GRAFT_POOL=1: cuMemAllocAsync returns
//                CUDA_SUCCESS (and a pointer), and cuMemFreeAsync too, after
//                the program was given 700: the pool serves the allocation
//                without a driver call (interpose.cc:618-623 allocAsync ->
//                DevicePool::allocate, which reuses a block freed on s
//                (device_pool.cc:164-170) or carves one from a mapped chunk,
//                calling only kNoSticky cuCtxGetDevice) and takes the free
//                (interpose.cc:694-704); neither looks at replay having
//                stopped or at a sticky error. Passes without GRAFT_POOL.
// pool-free-other-ctx  (run with GRAFT_POOL=1) device 0's primary context P
//                and a created context C of device 0. In P a graphed loop
//                (pool temporaries on sQ); then a block p from the pool on
//                P's stream sP, p = 5, a kernel on sP behind a closed host
//                gate copies p to out; with C current the program frees p on
//                sP (stream-ordered: after the gated copy; the simulator, as
//                the driver for memory ops, takes another context's stream),
//                then destroys C (cuCtxDestroy waits for C's streams only;
//                sP's work is still gated); in P it allocates q on sQ, writes
//                999 there and synchronizes sQ, then opens the gate: out must
//                be 5. FAILS under graft with GRAFT_POOL=1: out is 999. The
//                pool recorded the free with the CURRENT context (C) as its
//                context (interpose.cc:703 freeAsync(p, key, currentContext())),
//                and contextsMayHaveEnded (device_pool.cc:278-279) makes every
//                block whose recorded context ended plain free (stream 0),
//                although it was freed on a stream of P, whose work is still
//                pending: q got p at once and the gated copy read 999.
// pool-free-other-ctx-end  (run with GRAFT_POOL=1) the mirror: in the created
//                context C a graphed loop (pool temporaries on sC1), a block p
//                from the pool on sC1, then with C current p is freed on P's
//                stream sP; the program releases P's only reference (P ends:
//                sP is destroyed, its handle free) and, in C, allocates on
//                sC2. FAILS under graft with GRAFT_POOL=1: the simulator aborts
//                ("a call named a destroyed stream handle"; 134): p's block
//                kept stream sP and no fence (its recorded context C lives),
//                so contextsMayHaveEnded left it, and DevicePool::allocate
//                fences it now: fenceFor(sP, C) (device_pool.cc:180 ->
//                :126, cuEventRecord(fence, sP)) on the ended context's
//                stream. Passes without GRAFT_POOL and with
//                SIM_STRICT_HANDLES=0 (the record then fails and the block is
//                kept for good).
//                Diagnosis of both pool modes: a free's context is taken as
//                the calling thread's current context, not the stream's
//                (interpose.cc:700/703, GraphExecutor::freeAsync
//                graph_executor.cc:1041 with the deferred free's domain, also
//                the current context at the call: interpose.cc:689). Fix:
//                record the stream's context (cuStreamGetCtx; for the legacy
//                and per-thread streams the current one) as FreeBlock::ctx
//                and in unfenced_/fenceKey, so an ended context releases only
//                blocks freed on its own streams, and blocks freed on its
//                streams become plain free even when the free was made with
//                another context current; and in fenceFor make the fence
//                event in the stream's context (ContextScope), not the
//                current one, so such a block can be reused at all.
// pool-old-abi-release  (run with GRAFT_POOL=1) sim_review8_lifecycle's
//                pool-stale-stream (now passing), but the primary context is
//                released through the CUDA 7.0 ABI of
//                cuDevicePrimaryCtxRelease (cuGetProcAddress at 7000: the
//                simulator's cuDevicePrimaryCtxRelease, not graft's _v2 row,
//                so graft hands out its flushing forwarder). FAILS under graft
//                with GRAFT_POOL=1: the simulator aborts ("a call named a
//                destroyed stream handle"; 134) at the second context's first
//                reuse, exactly as before the fix: contextsMayHaveEnded is
//                called only from the wrapper's ENDS_CONTEXT path
//                (interpose.cc:936-940), and graft_generic_enter
//                (generic_forward.cc:74-76) tells PerThreadStreams
//                (endedUnknown) but not the pool. Fix: the forwarder runs
//                before the real call, so mark the pool "contexts may have
//                ended" there and have the pool run contextsMayHaveEnded
//                lazily at its next allocate/freeAsync/streamDestroyed (it
//                only compares cuCtxGetId answers); the same covers
//                cuCtxDestroy at version < 4000.
// fork-reenabled  (run with GRAFT_DISABLE=1 in the environment) the program
//                clears GRAFT_DISABLE before its first CUDA call (README:
//                options are read when the program first calls CUDA) and
//                makes that call through the exported cuGetProcAddress_v2 (a
//                program linked against libcuda does), so graft starts and
//                replays; then, as sim_fork, it forks children in the middle
//                of steps; each child calls cuStreamQuery once and exits.
//                Eagerly the child's call returns CUDA_ERROR_NOT_INITIALIZED
//                and the child prints nothing else. FAILS under graft
//                (GRAFT_DISABLE=1 at load): the child's cuStreamQuery goes
//                through graft (it answers CUDA_ERROR_NOT_READY itself for
//                held work, or waits for launches the parent's launch thread,
//                absent in the child, never takes) and the child's exit runs
//                graft's exit handler in the child. Cause: loadOnce
//                (runtime.cc:100-101) returns before pthread_atfork when
//                GRAFT_DISABLE was set at load, and ensureStarted
//                (runtime.cc:158-161) starts graft anyway once the start-time
//                options say not disabled; the fork handler that marks a
//                child (forkedChild, active=false) is never registered. Fix:
//                register the atfork handlers unconditionally at load (they
//                only act once g_startBegun), or refuse to start when
//                GRAFT_DISABLE was set at load (as graft_dlsym_lookup,
//                interpose.cc:1217, already does before start: the same
//                program resolving the driver by dlsym stays unhooked, so the
//                two ways into graft disagree too).
// log-child-exec  the program sets GRAFT_LOG_FILE (and GRAFT_LOG_LEVEL=debug)
//                itself before its first CUDA call (README: allowed), uses
//                CUDA, then runs a child (fork + exec of itself, which uses
//                CUDA too: a DataLoader worker, a compiler helper) and waits
//                for it. README: "The first process of a run empties it;
//                processes it starts append." With graft loaded the parent's
//                own start line ("graft started in graph mode (pid P)") must
//                still be in the file after the child ran. (Without graft
//                there is no log: the mode passes trivially.) FAILS under
//                graft: the child emptied the file at its load, and the
//                parent's lines are gone. Cause: GRAFT_LOG_ROOT_PID is
//                exported only by emptyLogFileIfFirstProcess at load, when
//                GRAFT_LOG_FILE was set at load (runtime.cc:66-72);
//                takeOptionsAtStart empties a file named only at start
//                (runtime.cc:82) but exports no marker, so every child's
//                loadOnce empties it again. Fix: at load, always export
//                GRAFT_LOG_ROOT_PID when absent (no file needed), and empty a
//                log file, at load or at start, only in the process whose pid
//                it names.
// log-child-exec-env  (run with GRAFT_LOG_FILE=PATH set at load; the program
//                sets GRAFT_LOG_LEVEL=debug before its first CUDA call) the
//                same with the documented set-up: the parent's lines stay
//                (the child appends), but the log must not warn about graft's
//                own marker. FAILS under graft: every child process logs
//                "[graft] warning: unknown option GRAFT_LOG_ROOT_PID;
//                ignored": the marker graft exports (runtime.cc:70) has the
//                GRAFT_ prefix, and parseOptions (config/options.cc:157,
//                194-195) warns about every unknown GRAFT_* variable. Fix:
//                skip the marker in parseOptions (or name it without the
//                GRAFT_ prefix).
// sticky-other-device  a graphed two-device loop (device 0: s, device 1: t,
//                each its own chain), then a fault on device 1 and
//                cuStreamSynchronize(t) returns 700; then device 0's step:
//                eagerly (the simulator's sticky error is the process's, not
//                the context's) every call returns 700. (Regression check:
//                passes.)
// sticky-own-launch  (SIM_GRAPH_LAUNCH_US=300 SIM_ASYNC_US is set by the mode)
//                a graphed step; at step 40 the step's first kernel faults;
//                the host waits 50 ms (graft's idle flush and launch thread
//                run; the fault runs), then calls cuStreamSynchronize: 700;
//                then the next step's launches and a sync: 700 each.
//                (Regression check: passes.)
// injected-launch-fail  (run with SIM_FAIL=cuGraphLaunch:N:700 or :719, a
//                failure of graft's own graph launch with a sticky code while
//                the context is fine) a two-stream loop with events and
//                read-backs: every value and code as eagerly. (Regression
//                check: passes; graft only stops replaying for good.)
// setenv-after-start  after graft started and replays, the program sets
//                GRAFT_DISABLE=1, GRAFT_MODE=passthrough, GRAFT_WARMUP=999,
//                GRAFT_LOG_FILE, GRAFT_POOL=1 and looks driver functions up
//                again (cuGetProcAddress, dlsym): they must be ignored, with
//                values right and graphs still used. (Regression check:
//                passes.)
// pool-two-devices  (GRAFT_POOL=1) device 0's loop with pool temporaries
//                while device 1's primary context is retained, used (its
//                allocations go to the driver) and released four times
//                (contextsMayHaveEnded runs each time): values right.
//                (Regression check: passes.)
//
// Results with the library reviewed (session 32): sticky-pool-alloc,
// pool-free-other-ctx, pool-free-other-ctx-end and pool-old-abi-release fail
// with GRAFT_POOL=1 (pass without it); fork-reenabled fails with
// GRAFT_DISABLE=1 at load; log-child-exec and log-child-exec-env fail under
// graft (graft's log only); sticky-other-device (SIM_DEVICES=2),
// sticky-own-launch, injected-launch-fail (SIM_FAIL=cuGraphLaunch:5:700,
// :3:719, :12:710), setenv-after-start and pool-two-devices (SIM_DEVICES=2,
// GRAFT_POOL=1) pass, also with GRAFT_ASYNC_LAUNCH=0, SIM_GRAPH_LAUNCH_US=300
// and GRAFT_POOL=1. Not modelled by the simulator: per-context sticky errors
// (its sticky error is the process's: SimState::sticky, so a fault in one
// context fails every context's calls), cuDevicePrimaryCtxReset and any
// recovery from a sticky error (after one, graft never replays again:
// Engine::stopReplay sets config_.replay = false for good; only a speed
// matter, also after a one-off injected failure with a sticky code).
//
// Exit 0: every code and value as the driver gives them; 1: a divergence;
// 3 with --expect-graphs: no kernel ran from a graph (path not taken); a
// simulator abort (134) is a crash.
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"
#include "sim_mode_checks.h"

namespace {

using namespace simtest::modes;

struct Kit {
  simtest::Driver* drv = nullptr;
  const simtest::DriverApi* cu = nullptr;
  CUcontext ctx = nullptr;
  CUfunction add = nullptr;
  CUfunction mix = nullptr;
  CUfunction gate = nullptr;
  CUdeviceptr zero = 0;
  void add3(CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s) const {
    SIM_CHECK(simtest::launchAdd(*cu, add, to, from, v, s));
  }
  void mix3(CUdeviceptr to, CUdeviceptr from, uint64_t v, CUstream s) const {
    SIM_CHECK(simtest::launchAdd(*cu, mix, to, from, v, s));
  }
  void gateOn(CUdeviceptr flag, uint64_t threshold, CUstream s) const {
    SIM_CHECK(simtest::launchAdd(*cu, gate, flag, flag, threshold, s));
  }
};

template <typename F>
F proc(const simtest::Driver& d, const char* name) {
  F f = nullptr;
  if (!simtest::lookupProc(d, name, &f)) std::exit(2);
  return f;
}

CUstream newStream(const simtest::DriverApi& cu, unsigned flags = CU_STREAM_NON_BLOCKING) {
  CUstream s = nullptr;
  SIM_CHECK(cu.cuStreamCreate(&s, flags));
  return s;
}
CUevent newEvent(const simtest::DriverApi& cu) {
  CUevent e = nullptr;
  SIM_CHECK(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  return e;
}

const CUdeviceptr kNowhere = 0x1000;  // unmapped: a kernel reading it faults (sticky 700)

int g_stickyWrong = 0, g_stickyChecked = 0;
void expectSticky(CUresult r, const char* what) {
  ++g_stickyChecked;
  if (r == CUDA_ERROR_ILLEGAL_ADDRESS) return;
  if (g_stickyWrong++ < 4)
    std::printf("sim_review9_newcode: %s: after the program got the sticky error: %s returned %d, the driver "
                "returns %d\n", g_mode, what, int(r), int(CUDA_ERROR_ILLEGAL_ADDRESS));
}
void stickySummary() {
  std::printf("sim_review9_newcode: %s: %d calls after the sticky error, %d did not return it\n", g_mode,
              g_stickyChecked, g_stickyWrong);
  g_wrong += g_stickyWrong;
}

// One pool step on s: t = i + 1 + 5 via a temporary, x = t.
void poolStep(const Kit& k, CUstream s, CUdeviceptr x, int i) {
  auto& cu = *k.cu;
  CUdeviceptr t = 0;
  SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s));
  k.add3(t, k.zero, uint64_t(i) + 1, s);
  for (int j = 0; j < 5; ++j) k.add3(t, t, 1, s);
  k.add3(x, t, 0, s);
  SIM_CHECK(cu.cuMemFreeAsync(t, s));
}

// ------------------------------------------------------ sticky-pool-alloc
void stickyPoolAlloc(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  CUdeviceptr kept = 0;
  SIM_CHECK(cu.cuMemAllocAsync(&kept, 64, s));
  for (int i = 0; i < steps; ++i) {
    poolStep(k, s, x, i);
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(x), uint64_t(i) + 6, "x", i);
  }
  ++g_provoked;
  SIM_CHECK(simtest::launchAdd(cu, k.add, x, kNowhere, 1, s));  // the fault
  // The sync drains s: the fault ran, eagerly and under graft.
  expectSticky(cu.cuStreamSynchronize(s), "cuStreamSynchronize (the fault's)");
  CUdeviceptr t = 0;
  expectSticky(cu.cuMemAllocAsync(&t, 64, s), "cuMemAllocAsync");
  expectSticky(cu.cuMemFreeAsync(kept, s), "cuMemFreeAsync (a block allocated before the fault)");
  if (t) expectSticky(cu.cuMemFreeAsync(t, s), "cuMemFreeAsync (the block just allocated)");
  CUdeviceptr u = 0;
  expectSticky(cu.cuMemAllocAsync(&u, 4096, s), "cuMemAllocAsync (another size)");
  expectSticky(simtest::launchAdd(cu, k.add, x, x, 1, s), "cuLaunchKernel");
  expectSticky(cu.cuStreamSynchronize(s), "cuStreamSynchronize");
  stickySummary();
}

// --------------------------------------------------- pool-free-other-ctx
void poolFreeOtherCtx(const Kit& k, int steps) {
  auto& cu = *k.cu;
  auto ctxCreate = proc<decltype(&::cuCtxCreate_v4)>(*k.drv, "cuCtxCreate");
  auto ctxDestroy = proc<decltype(&::cuCtxDestroy_v2)>(*k.drv, "cuCtxDestroy");
  const CUcontext P = k.ctx;
  const CUstream sP = newStream(cu), sQ = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), out = simtest::zeroedBuffer(cu),
                    flag = simtest::zeroedBuffer(cu), probe = simtest::zeroedBuffer(cu);
  for (int i = 0; i < steps; ++i) {
    poolStep(k, sQ, x, i);
    SIM_CHECK(cu.cuStreamSynchronize(sQ));
    expectValue(peek(x), uint64_t(i) + 6, "x", i);
  }
  CUcontext C = nullptr;
  SIM_CHECK(ctxCreate(&C, nullptr, 0, 0));  // a second context of device 0 (pushed)
  SIM_CHECK(cu.cuCtxSetCurrent(P));
  CUdeviceptr p = 0;
  SIM_CHECK(cu.cuMemAllocAsync(&p, 64, sP));
  k.add3(p, k.zero, 5, sP);  // p = 5
  k.gateOn(flag, 1, sP);
  k.add3(out, p, 0, sP);  // out = p, once the host opened the gate
  ++g_provoked;
  SIM_CHECK(cu.cuCtxSetCurrent(C));
  SIM_CHECK(cu.cuMemFreeAsync(p, sP));  // ordered on sP: after the gated copy
  SIM_CHECK(cu.cuCtxSetCurrent(P));
  SIM_CHECK(ctxDestroy(C));  // waits for C's streams only
  CUdeviceptr q = 0;
  SIM_CHECK(cu.cuMemAllocAsync(&q, 64, sQ));
  k.add3(q, k.zero, 999, sQ);
  k.add3(probe, q, 0, sQ);
  SIM_CHECK(cu.cuStreamSynchronize(sQ));
  expectValue(peek(probe), 999, "q", steps);
  expectCode(cu.cuStreamQuery(sP), CUDA_ERROR_NOT_READY, "cuStreamQuery(sP), gate closed", steps);
  std::printf("sim_review9_newcode: %s: p=%#llx q=%#llx\n", g_mode, (unsigned long long)p, (unsigned long long)q);
  poke(flag, 1);
  SIM_CHECK(cu.cuStreamSynchronize(sP));
  expectValue(peek(out), 5, "out (the gated copy of p, freed after it on sP)", steps);
  SIM_CHECK(cu.cuMemFreeAsync(q, sQ));
  SIM_CHECK(cu.cuCtxSynchronize());
}

// ----------------------------------------------- pool-free-other-ctx-end
void poolFreeOtherCtxEnd(const Kit& k0, int steps) {
  Kit k = k0;
  auto& cu = *k.cu;
  auto ctxCreate = proc<decltype(&::cuCtxCreate_v4)>(*k.drv, "cuCtxCreate");
  const CUcontext P = k.ctx;
  CUdevice dev0 = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev0, 0));
  const CUstream sP = newStream(cu);  // a stream of P
  CUcontext C = nullptr;
  SIM_CHECK(ctxCreate(&C, nullptr, 0, 0));  // current: C
  const CUstream sC1 = newStream(cu), sC2 = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  k.zero = simtest::zeroedBuffer(cu);
  for (int i = 0; i < steps; ++i) {
    poolStep(k, sC1, x, i);
    SIM_CHECK(cu.cuStreamSynchronize(sC1));
    expectValue(peek(x), uint64_t(i) + 6, "x (context C)", i);
  }
  CUdeviceptr p = 0;
  SIM_CHECK(cu.cuMemAllocAsync(&p, 64, sC1));
  k.add3(p, k.zero, 5, sC1);
  k.add3(y, p, 0, sC1);
  SIM_CHECK(cu.cuStreamSynchronize(sC1));
  expectValue(peek(y), 5, "y", steps);
  ++g_provoked;
  SIM_CHECK(cu.cuMemFreeAsync(p, sP));  // C current, P's stream
  (void)P;
  SIM_CHECK(cu.cuDevicePrimaryCtxRelease(dev0));  // P's only reference: P ends, sP with it
  for (int i = 0; i < 20; ++i) {
    CUdeviceptr q = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&q, 64, sC2));
    k.add3(q, k.zero, uint64_t(i) + 7, sC2);
    k.add3(y, q, 0, sC2);
    SIM_CHECK(cu.cuMemFreeAsync(q, sC2));
    SIM_CHECK(cu.cuStreamSynchronize(sC2));
    expectValue(peek(y), uint64_t(i) + 7, "y (after P ended)", steps + i);
  }
}

// ----------------------------------------------------- pool-old-abi-release
// lifecycle's pool-stale-stream, the context ended through the CUDA 7.0 ABI
// of cuDevicePrimaryCtxRelease (what cuGetProcAddress gives below 11000).
void poolOldAbiRelease(const Kit& k0, int steps) {
  Kit k = k0;
  auto& cu = *k.cu;
  CUdevice dev = 0;
  SIM_CHECK(cu.cuDeviceGet(&dev, 0));
  void* fn = nullptr;
  if (k.drv->getProcAddress("cuDevicePrimaryCtxRelease", &fn, 7000, 0, nullptr) != CUDA_SUCCESS || !fn) {
    std::printf("sim_review9_newcode: no cuDevicePrimaryCtxRelease at 7000\n");
    std::exit(2);
  }
  auto releaseV1 = reinterpret_cast<CUresult(CUDAAPI*)(CUdevice)>(fn);
  {
    const CUstream s1 = newStream(cu), s2 = newStream(cu);
    const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
    for (int i = 0; i < steps; ++i) {
      CUdeviceptr t = 0, u = 0;
      SIM_CHECK(cu.cuMemAllocAsync(&t, 64, s1));
      k.add3(t, k.zero, uint64_t(i) + 1, s1);
      for (int j = 0; j < 5; ++j) k.add3(t, t, 1, s1);
      k.add3(x, t, 0, s1);
      SIM_CHECK(cu.cuMemFreeAsync(t, s1));
      SIM_CHECK(cu.cuMemAllocAsync(&u, 64, s2));
      k.add3(u, k.zero, 2 * uint64_t(i), s2);
      for (int j = 0; j < 5; ++j) k.add3(u, u, 1, s2);
      k.add3(y, u, 1, s2);
      SIM_CHECK(cu.cuMemFreeAsync(u, s2));
      SIM_CHECK(cu.cuStreamSynchronize(s1));
      SIM_CHECK(cu.cuStreamSynchronize(s2));
      expectValue(peek(x), uint64_t(i) + 6, "x (first context)", i);
      expectValue(peek(y), 2 * uint64_t(i) + 6, "y (first context)", i);
    }
  }
  ++g_provoked;
  SIM_CHECK(releaseV1(dev));  // the only reference: the context ends, s1 and s2 with it
  CUcontext c = nullptr;
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&c, dev));
  SIM_CHECK(cu.cuCtxSetCurrent(c));
  k.zero = simtest::zeroedBuffer(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  for (int i = 0; i < steps; ++i) {
    CUdeviceptr t = 0;
    SIM_CHECK(cu.cuMemAllocAsync(&t, 64, nullptr));
    k.add3(t, k.zero, uint64_t(i) + 1, nullptr);
    for (int j = 0; j < 5; ++j) k.add3(t, t, 1, nullptr);
    k.add3(x, t, 0, nullptr);
    SIM_CHECK(cu.cuMemFreeAsync(t, nullptr));
    SIM_CHECK(cu.cuStreamSynchronize(nullptr));
    expectValue(peek(x), uint64_t(i) + 6, "x (second context)", i);
  }
}

// --------------------------------------------------------- fork-reenabled
std::string forkQueryChild(const simtest::DriverApi& cu, CUstream stream) {
  int out[2];
  if (pipe(out) != 0) return "pipe failed";
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(out[0]);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[1]);
    const CUresult r = cu.cuStreamQuery(stream);
    std::printf("child: cuStreamQuery -> %d\n", int(r));
    std::exit(0);
  }
  close(out[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      close(out[0]);
      return "the child did not leave within 5 s (hang); its output so far:\n" + text;
    }
    pollfd pf{out[0], POLLIN, 0};
    if (poll(&pf, 1, int(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "the child ended with status " + std::to_string(status) + "; its output:\n" + text;
  const std::string expected = "sim: cuStreamQuery called in a forked child\nchild: cuStreamQuery -> " +
                               std::to_string(int(CUDA_ERROR_NOT_INITIALIZED)) + "\n";
  if (text != expected) return "the child's output differs from eager's; it was:\n" + text;
  return {};
}

void forkReenabled(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  int bad = 0, forks = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 6; ++j) {
      const uint64_t v = uint64_t(i) << 8 | uint64_t(j);
      k.mix3(x, x, v, s);
      hx = simMix64(hx ^ v);
      if (j == 2 && i >= 20 && i % 10 == 0) {  // in the middle of a step: held work
        ++g_provoked;
        ++forks;
        const std::string why = forkQueryChild(cu, s);
        if (!why.empty() && bad++ < 2) std::printf("sim_review9_newcode: %s: step %d: %s\n", g_mode, i, why.c_str());
      }
    }
    if (i % 10 == 9) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(peek(x), hx, "x", i);
    }
  }
  SIM_CHECK(cu.cuStreamSynchronize(s));
  expectValue(peek(x), hx, "x", steps);
  std::printf("sim_review9_newcode: %s: %d children, %d behaved otherwise than eagerly\n", g_mode, forks, bad);
  g_wrong += bad;
}

// ---------------------------------------------------------- log-child-exec
std::string g_self;

bool graftPreloaded() {
  const char* p = std::getenv("LD_PRELOAD");
  return p && std::strstr(p, "libgraft");
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void logChildExec(const Kit& k, int steps, const std::string& logPath) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 4; ++j) {
      const uint64_t v = uint64_t(i) << 8 | uint64_t(j);
      k.mix3(x, x, v, s);
      hx = simMix64(hx ^ v);
    }
    SIM_CHECK(cu.cuStreamSynchronize(s));
  }
  expectValue(peek(x), hx, "x", steps);
  ++g_provoked;
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    execl(g_self.c_str(), g_self.c_str(), "--mode", "log-child", "--steps", "30", (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("sim_review9_newcode: %s: the child failed (status %d)\n", g_mode, status);
    ++g_wrong;
  }
  if (!graftPreloaded()) return;
  const std::string text = slurp(logPath);
  const std::string mine = "(pid " + std::to_string(getpid()) + ")";
  if (text.find(mine) == std::string::npos) {
    std::printf("sim_review9_newcode: %s: graft's log %s lost the parent's start line \"%s\" once the child "
                "ran; it holds %zu bytes:\n%s\n", g_mode, logPath.c_str(), mine.c_str(), text.size(),
                text.substr(0, 400).c_str());
    ++g_wrong;
  } else {
    std::printf("sim_review9_newcode: %s: the parent's start line is still in the log\n", g_mode);
  }
  // graft's own marker is no option of the program's: no warning about it.
  if (const size_t at = text.find("GRAFT_LOG_ROOT_PID"); at != std::string::npos) {
    const size_t from = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
    std::printf("sim_review9_newcode: %s: the log names graft's own marker: \"%s\"\n", g_mode,
                text.substr(from, text.find('\n', at) - from).c_str());
    ++g_wrong;
  }
}

void logChild(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  for (int i = 0; i < steps; ++i) {
    k.mix3(x, x, uint64_t(i), s);
    hx = simMix64(hx ^ uint64_t(i));
    SIM_CHECK(cu.cuStreamSynchronize(s));
  }
  expectValue(peek(x), hx, "x (child)", steps);
}

// ---------------------------------------------------- sticky-other-device
void stickyOtherDevice(const Kit& k, int steps) {
  auto& cu = *k.cu;
  CUdevice dev1 = 0;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS) {
    std::printf("sim_review9_newcode: no device 1 (set SIM_DEVICES=2)\n");
    std::exit(2);
  }
  CUcontext B = nullptr;
  SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&B, dev1));
  SIM_CHECK(cu.cuCtxSetCurrent(B));
  const CUstream t = newStream(cu);
  const CUdeviceptr y = simtest::zeroedBuffer(cu);
  SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
  const CUstream s = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 4; ++j) {
      k.mix3(x, x, uint64_t(i * 8 + j), s);
      hx = simMix64(hx ^ uint64_t(i * 8 + j));
    }
    SIM_CHECK(cu.cuCtxSetCurrent(B));
    for (int j = 0; j < 4; ++j) {
      k.mix3(y, y, uint64_t(i * 8 + j + 4), t);
      hy = simMix64(hy ^ uint64_t(i * 8 + j + 4));
    }
    SIM_CHECK(cu.cuStreamSynchronize(t));
    expectValue(peek(y), hy, "y (device 1)", i);
    SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(x), hx, "x (device 0)", i);
  }
  // Half a step on device 0 (held), then the fault on device 1.
  for (int j = 0; j < 2; ++j) (void)simtest::launchAdd(cu, k.mix, x, x, uint64_t(steps * 8 + j), s);
  SIM_CHECK(cu.cuCtxSetCurrent(B));
  SIM_CHECK(simtest::launchAdd(cu, k.add, y, kNowhere, 1, t));
  ++g_provoked;
  expectSticky(cu.cuStreamSynchronize(t), "cuStreamSynchronize(t) (device 1, the fault's)");
  SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
  for (int j = 2; j < 4; ++j) expectSticky(simtest::launchAdd(cu, k.mix, x, x, uint64_t(steps * 8 + j), s), "device 0 launch");
  for (int j = 0; j < 4; ++j) expectSticky(simtest::launchAdd(cu, k.mix, x, x, uint64_t(j), s), "device 0 launch (next step)");
  CUevent e = nullptr;
  expectSticky(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  expectSticky(cu.cuStreamQuery(s), "cuStreamQuery(s)");
  expectSticky(cu.cuStreamSynchronize(s), "cuStreamSynchronize(s)");
  stickySummary();
}

// ------------------------------------------------------- sticky-own-launch
void stickyOwnLaunch(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu), t = newStream(cu);
  const CUevent e = newEvent(cu), f = newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    const bool fault = i == 40;
    for (int j = 0; j < 6; ++j) {
      const uint64_t v = uint64_t(i) << 8 | uint64_t(j);
      if (fault && j == 0) {
        SIM_CHECK(simtest::launchAdd(cu, k.mix, x, kNowhere, v, s));
        continue;
      }
      if (fault) {
        (void)simtest::launchAdd(cu, k.mix, x, x, v, s);  // schedule-dependent codes
        continue;
      }
      k.mix3(x, x, v, s);
      hx = simMix64(hx ^ v);
    }
    if (fault) {
      ++g_provoked;
      usleep(50000);
      expectSticky(cu.cuStreamSynchronize(s), "cuStreamSynchronize after the fault");
      for (int j = 0; j < 6; ++j) expectSticky(simtest::launchAdd(cu, k.mix, x, x, uint64_t(j), s), "a launch");
      expectSticky(cu.cuEventRecord(e, s), "cuEventRecord");
      expectSticky(cu.cuStreamWaitEvent(t, e, 0), "cuStreamWaitEvent");
      expectSticky(cu.cuEventQuery(f), "cuEventQuery");
      expectSticky(cu.cuStreamSynchronize(t), "cuStreamSynchronize(t)");
      break;
    }
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    k.add3(y, x, 1, t);
    hy = hx + 1;
    SIM_CHECK(cu.cuEventRecord(f, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, f, 0));
    if (i % 5 == 4) {
      SIM_CHECK(cu.cuStreamSynchronize(s));
      expectValue(peek(y), hy, "y", i);
    }
  }
  stickySummary();
}

// -------------------------------------------------- injected-launch-fail
void injectedLaunchFail(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu), t = newStream(cu);
  const CUevent e = newEvent(cu), f = newEvent(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  uint64_t hx = 0, hy = 0;
  for (int i = 0; i < steps; ++i) {
    for (int j = 0; j < 5; ++j) {
      const uint64_t v = uint64_t(i) << 8 | uint64_t(j);
      k.mix3(x, x, v, s);
      hx = simMix64(hx ^ v);
    }
    SIM_CHECK(cu.cuEventRecord(e, s));
    SIM_CHECK(cu.cuStreamWaitEvent(t, e, 0));
    k.mix3(y, x, uint64_t(i), t);
    hy = simMix64(hx ^ uint64_t(i));
    SIM_CHECK(cu.cuMemsetD32Async(y + 8, uint32_t(i), 2, t));
    SIM_CHECK(cu.cuEventRecord(f, t));
    SIM_CHECK(cu.cuStreamWaitEvent(s, f, 0));
    if (i % 3 == 2) {
      const CUresult r = pollUntilDone([&] { return cu.cuEventQuery(f); });
      expectCode(r, CUDA_SUCCESS, "cuEventQuery(f) polled", i);
      expectValue(peek(y), hy, "y", i);
      expectValue(peek(y + 8) & 0xffffffffu, uint64_t(uint32_t(i)), "memset", i);
    }
  }
  SIM_CHECK(cu.cuCtxSynchronize());
  expectValue(peek(x), hx, "x", steps);
}

// --------------------------------------------------- setenv-after-start
void setenvAfterStart(const Kit& k, int steps) {
  auto& cu = *k.cu;
  const CUstream s = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu);
  uint64_t hx = 0;
  auto step = [&](const simtest::DriverApi& api, CUfunction mix, int i) {
    for (int j = 0; j < 5; ++j) {
      const uint64_t v = uint64_t(i) << 8 | uint64_t(j);
      SIM_CHECK(simtest::launchAdd(api, mix, x, x, v, s));
      hx = simMix64(hx ^ v);
    }
    SIM_CHECK(api.cuStreamSynchronize(s));
    expectValue(peek(x), hx, "x", i);
  };
  for (int i = 0; i < steps / 2; ++i) step(cu, k.mix, i);
  ++g_provoked;
  setenv("GRAFT_DISABLE", "1", 1);
  setenv("GRAFT_MODE", "passthrough", 1);
  setenv("GRAFT_WARMUP", "999", 1);
  setenv("GRAFT_POOL", "1", 1);
  setenv("GRAFT_LOG_FILE", "/tmp/graft-review9-setenv-after-start.log", 1);
  // Look the driver up again, by cuGetProcAddress and by dlsym.
  simtest::Driver again;
  std::string err;
  if (!simtest::loadDriver(&again, &err)) {
    std::printf("sim_review9_newcode: %s: loading the driver again failed: %s\n", g_mode, err.c_str());
    ++g_wrong;
    return;
  }
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  void* viaDlsym = h ? dlsym(h, "cuLaunchKernel") : nullptr;
  SimCounters before{};
  simCounters(&before);
  for (int i = steps / 2; i < steps; ++i) step(again.plain, k.mix, i);
  if (viaDlsym) {
    auto launch = reinterpret_cast<decltype(&::cuLaunchKernel)>(viaDlsym);
    for (int i = 0; i < 20; ++i) {
      CUdeviceptr to = x, from = x;
      uint64_t v = 0xabc0 + uint64_t(i);
      void* args[] = {&to, &from, &v};
      SIM_CHECK(launch(k.mix, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
      hx = simMix64(hx ^ v);
    }
    SIM_CHECK(cu.cuStreamSynchronize(s));
    expectValue(peek(x), hx, "x (dlsym'd launches)", steps);
  }
  SimCounters after{};
  simCounters(&after);
  std::printf("sim_review9_newcode: %s: effects from graphs after the setenv: %llu\n", g_mode,
              (unsigned long long)(after.effectsGraph - before.effectsGraph));
  if (graftPreloaded() && after.effectsGraph == before.effectsGraph) {
    std::printf("sim_review9_newcode: %s: graft stopped replaying after a setenv made once it started\n", g_mode);
    ++g_wrong;
  }
}

// ------------------------------------------------------ pool-two-devices
void poolTwoDevices(const Kit& k, int steps) {
  auto& cu = *k.cu;
  CUdevice dev1 = 0;
  if (cu.cuDeviceGet(&dev1, 1) != CUDA_SUCCESS) {
    std::printf("sim_review9_newcode: no device 1 (set SIM_DEVICES=2)\n");
    std::exit(2);
  }
  const CUstream s1 = newStream(cu), s2 = newStream(cu);
  const CUdeviceptr x = simtest::zeroedBuffer(cu), y = simtest::zeroedBuffer(cu);
  for (int life = 0; life < 4; ++life) {
    CUcontext B = nullptr;
    SIM_CHECK(cu.cuDevicePrimaryCtxRetain(&B, dev1));
    SIM_CHECK(cu.cuCtxSetCurrent(B));
    const CUstream t = newStream(cu);
    const CUdeviceptr z = simtest::zeroedBuffer(cu), bz = simtest::zeroedBuffer(cu);
    SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
    for (int i = 0; i < steps; ++i) {
      // s1 frees, s2 allocates: the pool fences s1.
      CUdeviceptr a = 0, b = 0;
      SIM_CHECK(cu.cuMemAllocAsync(&a, 64, s1));
      k.add3(a, k.zero, uint64_t(i) + 1, s1);
      k.add3(x, a, 5, s1);
      SIM_CHECK(cu.cuMemFreeAsync(a, s1));
      SIM_CHECK(cu.cuMemAllocAsync(&b, 64, s2));
      k.add3(b, k.zero, uint64_t(i) * 2, s2);
      k.add3(y, b, 6, s2);
      SIM_CHECK(cu.cuMemFreeAsync(b, s2));
      SIM_CHECK(cu.cuCtxSetCurrent(B));
      CUdeviceptr c = 0;
      SIM_CHECK(cu.cuMemAllocAsync(&c, 64, t));  // device 1: the driver's
      k.add3(c, bz, uint64_t(i) + 3, t);
      k.add3(z, c, 0, t);
      SIM_CHECK(cu.cuMemFreeAsync(c, t));
      SIM_CHECK(cu.cuStreamSynchronize(t));
      expectValue(peek(z), uint64_t(i) + 3, "z (device 1)", life * 1000 + i);
      SIM_CHECK(cu.cuCtxSetCurrent(k.ctx));
      SIM_CHECK(cu.cuStreamSynchronize(s1));
      SIM_CHECK(cu.cuStreamSynchronize(s2));
      expectValue(peek(x), uint64_t(i) + 6, "x", life * 1000 + i);
      expectValue(peek(y), uint64_t(i) * 2 + 6, "y", life * 1000 + i);
    }
    ++g_provoked;
    SIM_CHECK(cu.cuDevicePrimaryCtxRelease(dev1));
  }
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  const ModeArgs args = parseModeArgs(argc, argv, "sim_review9_newcode", 60);
  const std::string& mode = args.mode;
  const int steps = args.steps;
  std::string logPath;
  if (mode == "sticky-own-launch") setenv("SIM_ASYNC_US", "100", 1);
  if (mode == "fork-reenabled") {
    // The program turns graft on itself before its first CUDA call, and
    // makes that call through the exported symbol (linked against libcuda).
    unsetenv("GRAFT_DISABLE");
    void* p = nullptr;
    if (cuGetProcAddress("cuInit", &p, 12000, 0, nullptr) != CUDA_SUCCESS || !p) {
      std::printf("sim_review9_newcode: cuGetProcAddress(cuInit) failed\n");
      return 2;
    }
  }
  if (mode == "log-child-exec") {
    // The program names the log itself, before its first CUDA call.
    logPath = "/tmp/graft-review9-log-child-" + std::to_string(getpid()) + ".log";
    unlink(logPath.c_str());
    setenv("GRAFT_LOG_FILE", logPath.c_str(), 1);
    setenv("GRAFT_LOG_LEVEL", "debug", 1);
  }
  if (mode == "log-child-exec-env") {
    // GRAFT_LOG_FILE (no %p) and GRAFT_LOG_LEVEL=debug were set at load.
    const char* f = std::getenv("GRAFT_LOG_FILE");
    if (!f || std::strstr(f, "%p")) {
      std::printf("sim_review9_newcode: %s: run with GRAFT_LOG_FILE=PATH (no %%p)\n", mode.c_str());
      return 2;
    }
    logPath = f;
    setenv("GRAFT_LOG_LEVEL", "debug", 1);  // read when graft starts
  }
  static simtest::Driver drv;
  Kit k;
  if (int rc = simtest::startProgram("sim_review9_newcode", &drv, &k.ctx)) return rc;
  k.drv = &drv;
  k.cu = &drv.plain;
  k.add = simtest::libraryKernel3("sim_add_review9");
  k.mix = simtest::libraryKernel3("sim_mix_review9");
  k.gate = simtest::libraryKernel3("sim_gate_review9");
  k.zero = simtest::zeroedBuffer(drv.plain);
  if (mode == "sticky-pool-alloc") stickyPoolAlloc(k, steps);
  else if (mode == "pool-free-other-ctx") poolFreeOtherCtx(k, steps);
  else if (mode == "pool-free-other-ctx-end") poolFreeOtherCtxEnd(k, steps);
  else if (mode == "pool-old-abi-release") poolOldAbiRelease(k, steps);
  else if (mode == "fork-reenabled") forkReenabled(k, steps);
  else if (mode == "log-child-exec" || mode == "log-child-exec-env") logChildExec(k, steps, logPath);
  else if (mode == "log-child") logChild(k, steps);
  else if (mode == "sticky-other-device") stickyOtherDevice(k, steps);
  else if (mode == "sticky-own-launch") stickyOwnLaunch(k, steps);
  else if (mode == "injected-launch-fail") injectedLaunchFail(k, steps);
  else if (mode == "setenv-after-start") setenvAfterStart(k, steps);
  else if (mode == "pool-two-devices") poolTwoDevices(k, steps);
  else {
    std::printf("usage: sim_review9_newcode --mode sticky-pool-alloc|pool-free-other-ctx|pool-free-other-ctx-end|"
                "pool-old-abi-release|fork-reenabled|log-child-exec|log-child-exec-env|sticky-other-device|"
                "sticky-own-launch|injected-launch-fail|setenv-after-start|pool-two-devices [--steps N] "
                "[--expect-graphs]\n");
    return 2;
  }
  if (mode == "log-child") return simtest::failedCalls() || g_wrong ? 1 : 0;
  return report(steps, args.expectGraphs);
}
