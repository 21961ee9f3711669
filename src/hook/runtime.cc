#include "hook/runtime.h"

#include "graph/per_thread_streams.h"

#include "core/hot_text.h"
#include "core/own_thread.h"
#include "core/stage_clock.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "log/log.h"
#include "log/report.h"

extern char** environ;

namespace graft::hook {

thread_local constinit bool t_inGraft __attribute__((tls_model("initial-exec"))) = false;
thread_local constinit uint32_t t_submitter __attribute__((tls_model("initial-exec"))) = 0;

GRAFT_COLD uint32_t firstSubmitterToken() {
  static std::atomic<uint32_t> next{0};
  uint32_t t = next.fetch_add(1, std::memory_order_relaxed) + 1;
  if (t == 0) t = next.fetch_add(1, std::memory_order_relaxed) + 1;  // after 2^32 threads
  t_submitter = t;
  return t;
}

// The launch counter must stay in the Runtime's first line (runtime.h).
static_assert(sizeof(graph::KernelRegistry) <= 40);


namespace {

// The options as the environment held them at load, then, from the moment
// graft starts (the program's first CUDA call), as the program left them: a
// script may set GRAFT_* before it first uses CUDA, as it may
// CUDA_LAUNCH_BLOCKING or PYTORCH_CUDA_ALLOC_CONF. (The first snapshot stays
// valid: a reader that took it keeps a good reference.)
const config::ParsedOptions& loadTimeOptions() {
  static const config::ParsedOptions parsed = config::parseOptions(environ);
  return parsed;
}
constinit std::atomic<const config::ParsedOptions*> g_startOptions{nullptr};

const config::ParsedOptions& parsedOptions() {
  if (const config::ParsedOptions* p = g_startOptions.load(std::memory_order_acquire)) return *p;
  return loadTimeOptions();
}

// A run: the first process to load graft (no marker in its environment) and
// the processes it starts, which inherit the marker it exports at load: its
// pid and the time it loaded. GRAFT_LOG_FILE is claimed by each process of
// the run that starts graft (its first CUDA call): the file's first line names
// the run whose log it is, and a file another run wrote is emptied first. So
// a helper process (a compiler worker, a DataLoader, `system()`) or a rank
// never erases what another process of the run wrote, and a process that never
// uses CUDA (`cat` of the log with LD_PRELOAD exported) never touches the file.
// (Not GRAFT_*: the options warn of unknown GRAFT_* names.)
constexpr const char* kRunRootVariable = "LIBGRAFT_RUN_ROOT_PID";

// True for the first process of a run (it exports the marker).
bool markRunRoot() {
  if (std::getenv(kRunRootVariable)) return false;
  // At load: no thread of the program's runs yet (setenv is not thread-safe).
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  setenv(kRunRootVariable,
         fmt::format("{} {}", getpid(), std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()).c_str(),
         0);
  return true;
}

// The run's marker (an older graft's holds the pid alone).
std::string runMarker() {
  const char* marker = std::getenv(kRunRootVariable);
  return marker ? marker : std::to_string(getpid());
}

// Once, as graft starts: the options as the program left them, and the log.
void takeOptionsAtStart() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto* p = new config::ParsedOptions(config::parseOptions(environ));  // never freed (see above)
    // GRAFT_DISABLE at load holds for the whole process: graft's fork
    // handlers and its answers to dlsym were set up (or not) by it.
    if (loadTimeOptions().options.disable) p->options.disable = true;
    g_startOptions.store(p, std::memory_order_release);
    if (p->options.disable) return;
    log::claimRunFile(p->options.logFile, runMarker());
    log::init(p->options.logLevel, p->options.logFile, p->problems);
  });
}

PFN_cuGetProcAddress_v12000 g_realGpa = nullptr;
std::once_flag g_startOnce;

// Set when graft begins to start (ensureStarted), read by the fork handler.
std::atomic<bool> g_startBegun{false};

// Options, log and the fork handlers; nothing touches the driver here. Runs
// at load (graftLoad), or earlier where a library the program links reaches
// graft from its own constructor: the loader initializes a preloaded library
// after the program's libraries (interpose.cc, kWrappers).
void loadOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const config::ParsedOptions& p = loadTimeOptions();
    if (p.options.disable) {
      // Off, so no log; but a kill switch taken from a value it did not
      // understand (GRAFT_DISABLE=2) says so, once in a run (its first
      // process), where the log would go, unless the log is off.
      if (!markRunRoot() || p.options.logLevel == config::LogLevel::Off) return;
      for (const std::string& problem : p.problems) {
        if (problem.rfind("GRAFT_DISABLE=", 0) != 0) continue;
        const std::string line = "[graft] warning: " + problem + "\n";
        const std::string path = log::expandPath(p.options.logFile);
        const int fd = p.options.logFile.empty() ? 2 : log::streamDescriptor(path);
        if (fd >= 0) {
          (void)!::write(fd, line.data(), line.size());
        } else if (FILE* f = std::fopen(path.c_str(), "a")) {
          std::fputs(line.c_str(), f);
          std::fclose(f);
        }
      }
      return;
    }
    // The log opens when graft starts (takeOptionsAtStart): a process that
    // never uses CUDA neither writes it nor repeats the options' problems.
    markRunRoot();
    // A child forked once graft began to start gets none of graft: the ops
    // graft holds, its threads and its lock states are the parent's, and its
    // exit must not issue, log or report anything. Its calls go straight to the
    // driver, as they would eagerly (which refuses them anyway once the parent
    // initialized CUDA). The log is flushed first, so the child's exit does not
    // write the parent's buffered lines a second time. (A child forked before
    // graft began to start starts graft itself, if it uses CUDA.)
    pthread_atfork([] { log::flush(); }, nullptr, [] {
      if (!g_startBegun.load(std::memory_order_relaxed)) return;
      g_hook.forkedChild.store(true, std::memory_order_relaxed);
      g_hook.active.store(false, std::memory_order_relaxed);
    });
  });
}

__attribute__((constructor)) void graftLoad() { loadOnce(); }

// At exit() or std::quick_exit(), whichever comes first (once).
void onExit() {
  static std::atomic<bool> reported{false};
  if (!Runtime::active() || reported.exchange(true)) return;
  t_inGraft = true;
  Runtime::get().writeExitReport();
}

// Issues held ops when the program has gone quiet (GRAFT_IDLE_FLUSH_MS), so a
// host waiting for the GPU without any CUDA call still sees its work run.
void idleFlushLoop(Runtime* rt, long long periodMs) {
  t_inGraft = true;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(periodMs));
    auto lock = rt->engine().lock();
    if (rt->exiting()) return;
    rt->engine().flushIfIdle();
  }
}

}  // namespace

// dlsym resolved past graft (interpose.cc).
void* realDlsym(void* handle, const char* name);

bool insideGraft(const void* address) {
  static const void* base = [] {
    Dl_info self{};
    return dladdr(reinterpret_cast<const void*>(&insideGraft), &self) ? self.dli_fbase : nullptr;
  }();
  Dl_info info{};
  return base && dladdr(address, &info) && info.dli_fbase == base;
}

const config::Options& Runtime::options() { return parsedOptions().options; }

PFN_cuGetProcAddress_v12000 Runtime::realGetProcAddress() { return g_realGpa; }

void Runtime::ensureStarted(void* hint) {
  takeOptionsAtStart();
  if (options().disable) return;
  loadOnce();
  // Loading the driver may run code that looks up driver symbols again; the
  // lookups made while graft starts on this thread must not wait for it.
  static thread_local bool starting = false;
  if (starting) return;
  starting = true;
  std::call_once(g_startOnce, [hint] {
    // A child forked while the parent was starting graft may run this again.
    if (g_hook.forkedChild.load(std::memory_order_relaxed)) return;
    g_startBegun.store(true, std::memory_order_relaxed);
    t_inGraft = true;
    // The driver behind `hint` if it is one (a handle whose lookup reaches
    // graft's own exports, such as RTLD_DEFAULT, is not), else libcuda.so.1.
    void* lib = nullptr;
    if (hint) {
      void* gpa = realDlsym(hint, "cuGetProcAddress_v2");
      if (gpa && !insideGraft(gpa)) lib = hint;
    }
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib) g_realGpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(realDlsym(lib, "cuGetProcAddress_v2"));
    if (g_realGpa && insideGraft(reinterpret_cast<void*>(g_realGpa))) g_realGpa = nullptr;
    if (!g_realGpa) {
      GRAFT_ERROR("libcuda.so.1 with cuGetProcAddress_v2 not found ({}); graft forwards only",
                  dlerror() ? dlerror() : "no error text");
      t_inGraft = false;
      return;
    }
    const int missing = resolveDriverTable(g_realGpa);
    if (missing) GRAFT_DEBUG("{} driver functions of graft's table are not in this driver", missing);
    if (options().hotText) {
      const core::HotTextResult t = core::moveHotText(reinterpret_cast<const void*>(&insideGraft));
      if (t.moved) GRAFT_DEBUG("graft's code moved onto a huge page at {:#x}", t.window);
      else GRAFT_DEBUG("graft's code stays on 4 KiB pages: {}", t.why);
    }
    // The Runtime is the first block of the arena (it holds the per-op fields).
    core::HotArena::configure(size_t(options().hotArenaMb) << 20);
    std::string launchBlocking;
    const config::Mode mode = config::startMode(options().mode, std::getenv("CUDA_LAUNCH_BLOCKING"), &launchBlocking);
    if (!launchBlocking.empty()) GRAFT_WARN("{}", launchBlocking);
    g_hook.runtime = new (core::HotArena::allocate(sizeof(Runtime))) Runtime(mode);  // lives until process exit
    std::atexit(onExit);
    std::at_quick_exit(onExit);  // std::quick_exit runs no atexit handler; the report is written all the same
    // A per-thread default stream's ops get a proxy only where graft may hold them.
    if (config::replays(mode)) graph::PerThreadStreams::enable();
    // Without its idle flush graft could hold work a program then waits for
    // without a CUDA call: where the thread cannot start (the process is out
    // of threads), graft stays off and every call goes to the driver as is.
    bool idleFlushRuns = true;
    if (config::replays(mode) && options().idleFlushMs > 0) {
      try {
        core::startOwnThread([rt = g_hook.runtime, ms = options().idleFlushMs] { idleFlushLoop(rt, ms); }).detach();
      } catch (const std::exception& e) {
        idleFlushRuns = false;
        GRAFT_ERROR("graft could not start its idle-flush thread ({}); it stays off: every call goes to the driver "
                    "as it is",
                    e.what());
      }
    }
    // Not in a child forked meanwhile: its fork handler ran before this store.
    if (idleFlushRuns && !g_hook.forkedChild.load(std::memory_order_relaxed))
      g_hook.active.store(true, std::memory_order_release);
    t_inGraft = false;
  });
  starting = false;
}

Runtime::Runtime(config::Mode startMode) : mode_(startMode), start_mode_(startMode) {
  const config::Options& o = options();
  if (o.profile) core::StageClock::enable();
  kernels_.setEagerPrefixes(o.eagerKernels);
  if (o.pool && mode_ != config::Mode::Passthrough) {
    pool::PoolDriver d;
    d.getGranularity = real<ApiId::k_cuMemGetAllocationGranularity_10020>();
    d.addressReserve = real<ApiId::k_cuMemAddressReserve_10020>();
    d.create = real<ApiId::k_cuMemCreate_10020>();
    d.map = real<ApiId::k_cuMemMap_10020>();
    d.setAccess = real<ApiId::k_cuMemSetAccess_10020>();
    d.release = real<ApiId::k_cuMemRelease_10020>();
    d.ctxGetDevice = real<ApiId::k_cuCtxGetDevice_2000>();
    d.eventCreate = real<ApiId::k_cuEventCreate_2000>();
    d.eventRecord = real<ApiId::k_cuEventRecord_2000>();
    d.eventQuery = real<ApiId::k_cuEventQuery_2000>();
    d.ctxGetCurrent = real<ApiId::k_cuCtxGetCurrent_4000>();
    d.ctxGetId = real<ApiId::k_cuCtxGetId_12000>();
    pool_ = std::make_unique<pool::DevicePool>(d, uint64_t(o.poolGb) << 30);
  }
  // graft's launch thread is graft's own: nothing it calls is intercepted.
  executor_ = std::make_unique<graph::GraphExecutor>(kernels_, pool_.get(),
                                                     o.asyncLaunch && config::replays(mode_),
                                                     [] { t_inGraft = true; }, unsigned(o.launchPollUs),
                                                     unsigned(o.launchSpinUs));
  core::EngineConfig c;
  c.replay = config::replays(start_mode_);
  c.warmup = uint32_t(o.warmup);
  c.maxPeriod = uint32_t(o.maxPeriod);
  c.minSegmentOps = uint32_t(o.minSegmentOps);
  c.segmentOps = uint32_t(o.segmentOps);
  c.syncTailOps = uint32_t(o.syncTailOps);
  c.maxVariants = uint32_t(o.maxVariants);
  c.maxSegments = uint32_t(o.maxSegments);
  c.dormantAfterOps = uint64_t(o.dormantAfterOps);
  c.restBelowGraphPct = uint32_t(o.restBelowGraphPct);
  engine_ = core::makeHot<core::Engine>(c, *executor_);
  executor_->setDryRun(start_mode_ == config::Mode::Match);
  GRAFT_DEBUG("graft started in {} mode (pid {})", config::toString(mode_), getpid());
  if (start_mode_ == config::Mode::Swallow || start_mode_ == config::Mode::Match)
    GRAFT_WARN("GRAFT_MODE={} is for benchmarks only: kernels, memsets and device copies are dropped, so the "
               "program's results are garbage",
               config::toString(start_mode_));
}

void Runtime::settleStart() {
  // Not before a context is current: an op that fails for want of one (before
  // cuInit) comes before the driver read the variable.
  CUcontext current = nullptr;
  if (real<ApiId::k_cuCtxGetCurrent_4000>()(&current) != CUDA_SUCCESS || !current) return;
  start_settled_ = true;
  if (mode_.load(std::memory_order_relaxed) != config::Mode::Graph) return;
  std::string launchBlocking;
  if (config::startMode(config::Mode::Graph, std::getenv("CUDA_LAUNCH_BLOCKING"), &launchBlocking) !=
      config::Mode::Passthrough)
    return;
  GRAFT_WARN("{} (read again at the program's first stream-ordered op)", launchBlocking);
  engine_->flushAll();  // nothing is held before the first op; for certainty
  engine_->pauseReplay();
  engine_->drainLaunches();
  mode_.store(config::Mode::Passthrough, std::memory_order_relaxed);
}

bool Runtime::switchModeForBenchmark(std::string_view name) {
  const config::Options& o = options();
  if (!o.benchSwitch || start_mode_ != config::Mode::Graph) {
    GRAFT_ERROR("graft_bench_set_mode(\"{}\") refused: it needs GRAFT_BENCH_SWITCH=1 and graft started in "
                "graph mode (GRAFT_MODE=graph, CUDA_LAUNCH_BLOCKING not 1)",
                name);
    return false;
  }
  config::Mode next;
  if (!config::parseMode(name, &next)) {
    GRAFT_ERROR("graft_bench_set_mode(\"{}\"): unknown mode (graph, passthrough, swallow, match)", name);
    return false;
  }
  auto lock = engine_->lock();
  const bool dryRun = next == config::Mode::Match;
  if (dryRun != (mode_.load(std::memory_order_relaxed) == config::Mode::Match)) {
    // Ops held so far run as the mode they were issued in asked: for real
    // when leaving graph mode for match, dropped when leaving match.
    engine_->flushAll();
  }
  if (config::replays(next)) engine_->resumeReplay();
  else engine_->pauseReplay();
  engine_->drainLaunches();  // launches queued in graph mode reach the driver
  executor_->setDryRun(dryRun);
  mode_.store(next, std::memory_order_relaxed);
  GRAFT_DEBUG("benchmark switch: {} mode", config::toString(next));
  return true;
}

void Runtime::noteUnwrapped(std::string_view name, int requestedVersion) {
  if (unwrapped_noted_.exchange(true)) return;
  GRAFT_WARN("the program uses {} (ABI version {}) in a way graft cannot follow; to stay exact, "
             "graft stops replaying (counts may be incomplete)",
             name, requestedVersion);
  auto lock = engine_->lock();
  engine_->stopReplay();
}

void Runtime::codeUnloading(UnloadedCode code) {
  // Kernel handles may name other kernels from now on: the next preference
  // set through any of them counts as a change (cachePreferenceDiffers).
  cache_preferences_.clear();
  if (exiting_) {
    engine_->stopReplay();
    kernels_.retireAll();
    return;
  }
  if (code.kind == UnloadedCode::Everything) {
    engine_->forgetRecordedCode();
    return;
  }
  // Only this code's kernels (and any graft cannot place) may get new
  // meanings: graphs with them go, the rest stay, and learning goes on (a
  // library that loads and unloads code as it goes, like cuFFT's plans, no
  // longer resets graft every time).
  if (code.kind == UnloadedCode::Library) kernels_.forgetKernelsSetOf(code.handle);
  graph::KernelRegistry::CodeHandles handles = kernels_.handlesOfCode(code.handle, code.kind == UnloadedCode::Library);
  size_t dropped = 0;
  // How far the graphs with each of its own kernels got (KernelRegistry::retireUnloaded).
  std::vector<uint64_t> replays(handles.certain.size());
  for (size_t i = 0; i < handles.certain.size(); ++i) {
    const uint64_t h = handles.certain[i];
    replays[i] = engine_->mostReplaysOfGraphsWith(
        [h](const core::OpDesc& op) { return op.kind == core::OpKind::Kernel && graph::kernelShapeOf(op).func == h; });
  }
  // Graphs with kernels only perhaps of this code are built again whenever
  // their runs repeat (the code they ran may well be there still).
  for (std::vector<uint64_t>* list : {&handles.certain, &handles.maybe}) {
    std::vector<uint64_t> sorted = *list;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.empty()) continue;
    dropped += engine_->forgetSegmentsWith(
        [&](const core::OpDesc& op) {
          return op.kind == core::OpKind::Kernel &&
                 std::binary_search(sorted.begin(), sorted.end(), graph::kernelShapeOf(op).func);
        },
        /*certain=*/list == &handles.certain);
  }
  executor_->countPatches();  // (by the handles' current names)
  kernels_.retireUnloaded(handles.certain, replays);
  kernels_.retire(handles.maybe);
  GRAFT_DEBUG("the program unloads {} {:#x}: {} kernel handles of it forgotten, {} that may be, {} graphs with "
              "them dropped (replayed at most {} times)", code.kind == UnloadedCode::Library ? "library" : "module",
              code.handle, handles.certain.size(), handles.maybe.size(), dropped,
              replays.empty() ? 0 : *std::max_element(replays.begin(), replays.end()));
}

void Runtime::kernelAttributeChanged(CUfunction handle) {
  if (exiting_ || !handle) return;
  const std::vector<uint64_t> handles = kernels_.handlesOfKernel(reinterpret_cast<uint64_t>(handle));
  const size_t dropped = engine_->forgetSegmentsWith(
      [&](const core::OpDesc& op) {
        return op.kind == core::OpKind::Kernel &&
               std::binary_search(handles.begin(), handles.end(), graph::kernelShapeOf(op).func);
      },
      /*certain=*/false);
  GRAFT_DEBUG("an attribute, cache preference or launch state of kernel {:#x} changed: {} graphs with it dropped",
              reinterpret_cast<uint64_t>(handle), dropped);
}

void Runtime::everyKernelAttributeChanged(std::string_view why) {
  if (exiting_) return;
  const size_t dropped = engine_->forgetSegmentsWith(
      [](const core::OpDesc& op) { return op.kind == core::OpKind::Kernel; }, /*certain=*/false);
  GRAFT_DEBUG("{}: {} graphs with kernels dropped", why, dropped);
}

bool Runtime::cachePreferenceDiffers(uint64_t key, int value) const {
  const auto it = cache_preferences_.find(key);
  return it == cache_preferences_.end() || it->second != value;  // not known before: taken for a change
}

void Runtime::writeExitReport() {
  core::EngineStats s;
  log::Report r;
  {
    auto lock = engine_->lock();
    // Nothing is held from here on: this thread's calls from now on bypass
    // graft (no barrier would issue what it held), the idle flush stops, and
    // other threads may go on launching meanwhile (tests/gpu/traps_threads2.cu,
    // exit_late_spin, exit_late_sync).
    engine_->stopReplay();
    // This thread's calls from here on (exit handlers, static destructors)
    // reach the driver without graft, so they could not join its per-thread
    // streams to their proxies: they are joined now. (Other threads go on
    // through graft.)
    graph::PerThreadStreams::joinAllOwned();
    executor_->countPatches();
    exiting_ = true;  // the idle-flush thread stops touching the driver
    s = engine_->stats();
    // Under the lock: another thread still launching may add kernels to the
    // registry meanwhile.
    for (const auto& [name, launches] : kernels_.byLaunches()) {
      if (r.kernelsTop.size() == 20 || !launches) break;
      r.kernelsTop.emplace_back(name, launches);
    }
    for (const auto& [name, patches] : kernels_.byPatches()) {
      if (r.kernelsPatched.size() == 20 || !patches) break;
      r.kernelsPatched.emplace_back(name, patches);
    }
    if (core::StageClock::enabled()) {
      const core::StageClock::Totals t = core::StageClock::totals();
      r.cpuTime.enabled = true;
      for (size_t i = 0; i < size_t(core::Stage::Count); ++i)
        r.cpuTime.stages.push_back({std::string(core::kStageNames[i]), t.calls[i], t.micros[i]});
    }
  }
  r.pid = int64_t(getpid());
  r.mode = std::string(config::toString(start_mode_));  // as started (a benchmark switch may change it)
  for (size_t c = 0; c < size_t(ApiClass::Resolver); ++c) {
    const uint64_t n = class_counts_[c].load(std::memory_order_relaxed);
    r.opsTotal += n;
    r.opsByClass.emplace_back(std::string(kApiClassNames[c]), n);
  }
  // A per-thread default stream with a proxy is named by its (thread, context) slot.
  for (const auto& [stream, n] : s.opsByStream)
    r.streams.emplace_back(core::isPerThreadKey(stream) ? fmt::format("per-thread #{}", core::perThreadSlot(stream))
                                                        : fmt::format("{:#x}", stream),
                           n);
  r.replay.opsTotal = s.opsTotal;
  r.replay.opsViaGraph = s.opsViaGraph;
  r.replay.opsEager = s.opsEager();
  r.replay.graphsBuilt = s.graphsBuilt;
  r.replay.buildFailures = s.buildFailures;
  r.replay.segmentsDropped = s.segmentsDropped;
  r.replay.variantsEvicted = s.variantsEvicted;
  r.replay.replays = s.replays;
  r.replay.patches = s.patches;
  r.replay.firstReplaySeconds = s.firstReplaySeconds;
  r.replay.segments = s.liveSegments;
  r.replay.opsFastLane = s.opsSoleExpected;
  r.replay.queriesAnsweredNotReady = s.queriesAnsweredNotReady;
  r.replay.queriesIssuedForProgress = s.queriesIssuedForProgress;
  for (size_t c = 1; c < size_t(core::EagerCause::Count); ++c) {
    if (s.eagerByCause[c])
      r.replay.fallbacks.emplace_back(std::string(core::toString(core::EagerCause(c))),
                                      s.eagerByCause[c]);
  }
  // Huge pages are counted (reading /proc/self/smaps, ~13 ms in a PyTorch
  // process) only where someone asked for details: a stats file, a debug log.
  const bool countHuge = !options().statsFile.empty() || options().logLevel <= config::LogLevel::Debug;
  if (const core::HotArena::Stats a = core::HotArena::stats(countHuge); a.reservedBytes)
    r.hotArena = log::Report::HotArena{true, a.reservedBytes, a.usedBytes, a.heapBytes, a.hugeBytes, countHuge};
  if (options().hotText) {
    const core::HotTextResult t = core::hotTextResult();
    r.hotText = log::Report::HotText{true, t.moved, t.moved ? std::string() : std::string(t.why)};
  }
  if (graph::LaunchWorkerStats t; executor_->launchThreadStats(&t))
    r.launchThread = {true,          t.cpuSeconds, t.deepSleeps, t.spinsCaught, t.spinsSkipped, t.takenOver,
                      executor_->freesQueued()};
  if (pool_) {
    const pool::PoolStats p = pool_->stats();
    r.pool = log::Report::Pool{true, p.reservedBytes, p.mappedBytes, p.peakInUseBytes, p.allocations,
                               p.reusedSameStream + p.reusedAfterFence, p.declined};
  }
  const config::Options& o = options();
  // A program that never called the driver through graft (one linked against
  // cuBLAS starts graft from cuBLAS's constructor, then may never use CUDA)
  // gets no summary: there is nothing to say.
  if (o.summary && r.opsTotal) GRAFT_INFO("{}", log::reportSummary(r));
  if (!o.statsFile.empty()) {
    const std::string err = log::writeReportFile(r, o.statsFile);
    if (!err.empty()) GRAFT_WARN("{}", err);
  }
  log::flush();
}

}  // namespace graft::hook
