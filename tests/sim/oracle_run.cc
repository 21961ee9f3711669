// oracle_run.cc - issues a generated program through the driver (as loaded by
// sim_driver_loader) and keeps the issue log, the happens-before model and a
// sequential model of memory.
//
// Invariants:
//  - Threads: 0 = main, 1 = helper (issues part of an iteration while main waits:
//    the "autograd" handoff), 2 = concurrent thread on its own non-blocking stream
//    with its own memory. Model state is guarded by mu_; a driver call is made
//    without it and committed to the model after it returns.
//  - Lanes (logical streams): 0 legacy, 1 main thread's per-thread stream,
//    2.. created streams, then the helper's per-thread stream, then the concurrent
//    thread's stream.
//  - Before an op with memory effects is issued it is checked against the cells'
//    last writer/readers under its clock; if CUDA would not order it with them the
//    op is demoted to the lane's scratch memory, so the program stays race-free and
//    the final memory is the sequential interpretation of the log.
//  - A host synchronization is followed by simMark("oracle-m<N>") once it returned;
//    its clock says what it covered.
#include <atomic>
#include <cinttypes>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <set>
#include <thread>
#include <type_traits>

#include "oracle.h"

namespace oracle {

std::vector<Divergence> checkTrace(const Program& p, const std::vector<LogOp>& log, const std::vector<Lane>& lanes,
                                   const std::vector<Marker>& markers, RunResult* result);

namespace {

constexpr int kPollBound = 100000;
constexpr int kConcurrentSlot = 100;
constexpr size_t kBufferBytes = kCellsPerBuffer * 8;
constexpr size_t kRowPitch = 16 * 8;  // 2-D copies and memsets: rows 16 cells apart

struct CellState {
  int writerLane = -1;
  uint32_t writerStamp = 0;
  int writerLog = -1;
  std::array<uint32_t, kMaxLanes> reads{};
};

struct Buffer {
  std::string name;
  uint64_t base = 0;
  enum Type { Device, Pinned, Pageable } type = Device;
  std::vector<uint8_t> model;
  std::vector<CellState> cells;
  std::vector<uint64_t> pageable;  // storage of pageable buffers
};

struct Access {
  int buffer;
  int cell;
  bool write;
};

void CUDA_CB hostFnEntry(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1, std::memory_order_relaxed); }

const char* kindText(Kind k) {
  switch (k) {
    case Kind::Kernel:
      return "kernel";
    case Kind::Copy:
      return "memcpy";
    case Kind::Memset:
      return "memset";
    case Kind::HostFn:
      return "host function";
    case Kind::EventRecord:
      return "cuEventRecord";
    case Kind::StreamWait:
      return "cuStreamWaitEvent";
    case Kind::GraphLaunch:
      return "cuGraphLaunch (program graph)";
    case Kind::AllocAsync:
      return "cuMemAllocAsync/cuMemFreeAsync";
    case Kind::StreamSync:
      return "cuStreamSynchronize";
    case Kind::EventSync:
      return "cuEventSynchronize";
    case Kind::CtxSync:
      return "cuCtxSynchronize";
    case Kind::Poll:
      return "cuEventQuery poll loop";
    case Kind::StreamQuery:
      return "cuStreamQuery";
    case Kind::EventQuery:
      return "cuEventQuery";
    case Kind::AllocFree:
      return "cuMemAlloc/cuMemFree";
    case Kind::TimingCheck:
      return "cuEventSynchronize + cuEventElapsedTime";
    case Kind::SetAttr:
      return "kernel attribute setting";
  }
  return "?";
}

// Runs jobs on a helper thread, one at a time, while the caller waits.
class Helper {
 public:
  Helper() : thread_([this] { loop(); }) {}
  ~Helper() {
    {
      std::lock_guard<std::mutex> lk(m_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void run(std::function<void()> job) {
    std::unique_lock<std::mutex> lk(m_);
    job_ = std::move(job);
    done_ = false;
    cv_.notify_all();
    cv_.wait(lk, [this] { return done_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      cv_.wait(lk, [this] { return quit_ || job_; });
      if (quit_) return;
      auto job = std::move(job_);
      job_ = nullptr;
      lk.unlock();
      job();
      lk.lock();
      done_ = true;
      cv_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool done_ = false, quit_ = false;
  std::thread thread_;
};

class Runner {
 public:
  Runner(const simtest::Driver& drv, const Program& p, bool verbose) : drv_(drv), p_(p), verbose_(verbose) {}
  RunResult run();

 private:
  struct Target {
    const simtest::DriverApi* api;
    CUstream stream;
    int lane;
  };
  struct EventState {
    CUevent handle = nullptr;
    bool recorded = false;
    Clock vc{};
    int lane = -1;           // of the last record
    long seq = 0;            // record order (all events)
    size_t effectsAt = 0;    // effects logged on `lane` before the last record
  };
  struct GraphEffect {
    std::string key;
    std::string what;
    Op op;
    int width = 0;  // the kernel's required cluster width when it was captured
  };

  const simtest::DriverApi& cu() const { return drv_.plain; }
  void setup();
  void runIterations();
  void runConcurrent(long ops);
  void finish();
  void issue(const Op& op, int thread, int iteration);
  void issueEffect(const Op& op, int thread, int iteration);
  void hostSync(const Op& op, int thread, int iteration);
  void queryAnsweredComplete(int thread, const Clock& covered, LogOp lo);
  void timingCheck(const Op& op, int thread, int iteration);
  void issueSetting(const Op& op, int thread, int iteration);
  void ensureCtx(int device, int thread);
  void loadImage(int phase, int iteration);
  const KernelSpec& spec(int kernel) const {
    return kernel >= p_.baseKernels && !reload_[phase_].empty() ? reload_[phase_][kernel - p_.baseKernels]
                                                                : p_.kernels[kernel];
  }
  int legacyLaneOf(int device) const { return device ? dev1LegacyLane_ : 0; }

  int laneOf(int slot, int thread) const;
  Target target(const Op& op, int thread);
  int bufferOf(const CellRef& r, int lane) const;
  uint64_t addressOf(const CellRef& r, int lane) const {
    return buffers_[bufferOf(r, lane)].base + static_cast<uint64_t>(r.cell) * 8;
  }
  void accesses(const Op& op, int lane, std::vector<Access>* out) const;
  bool safe(const Clock& vc, const std::vector<Access>& acc) const;
  Op demote(const Op& op) const;
  void commitCells(const std::vector<Access>& acc, int lane, uint32_t stamp, int logId);
  void applyModel(const Op& op, int lane, uint64_t k, int width);
  // The clock of the next op on `lane`. eventOp: a record or a wait, which on
  // a blocking stream does not wait for earlier legacy work (measured,
  // tests/gpu/driver_facts.cu; a record's event still covers it: eventClock).
  Clock nextClock(int lane, int thread, bool eventOp = false) const;
  Clock eventClock(int lane, const Clock& recordVc) const;
  void commitLane(int lane, const Clock& vc) {
    lanes_[lane].vc = vc;
    lanes_[lane].count = vc[lane];
  }
  int pushLog(LogOp lo);
  void mark(int thread, int logId);
  bool check(CUresult r, const char* call, int iteration, const Op* op, bool allowNotReady = false);
  std::string describe(const Op& op, int lane, int iteration, uint64_t tag) const;
  uint64_t tagOf(const Op& op, int iteration) const {
    return op.uniqueTag ? (op.tagBase ^ (static_cast<uint64_t>(iteration + 1) << 44)) | (1ull << 63) : op.tagBase;
  }
  uint64_t kOf(const Op& op, int iteration) const {
    return op.rngParam ? op.k + static_cast<uint64_t>(iteration) * 0x9e3779b97f4a7c15ull : op.k;
  }
  void divergence(int order, const std::string& text) {
    std::lock_guard<std::mutex> lk(mu_);
    divergences_.push_back({order, text});
  }
  bool inHandoff(const Op& op) const {
    return p_.handoffBegin >= 0 && op.tindex >= p_.handoffBegin && op.tindex < p_.handoffEnd;
  }
  void compareMemory(size_t buffer, const uint8_t* actual);

  const simtest::Driver& drv_;
  const Program& p_;
  bool verbose_;
  std::mutex mu_;
  std::vector<Lane> lanes_;
  std::array<Clock, 3> hostVc_{};
  std::vector<EventState> events_;
  std::vector<LogOp> log_;
  std::vector<Marker> markers_;
  std::vector<Buffer> buffers_;
  std::vector<Divergence> divergences_;
  std::vector<CUstream> created_;
  CUstream concurrentStream_ = nullptr;
  int ptdsHelperLane_ = 0, concurrentLane_ = 0;
  int devScratch_ = 0, graphBuf_ = 0, pinnedSrc_ = 0, pinnedDst_ = 0, pinnedScratch_ = 0;
  int pageableSrc_ = 0, pageableDst_ = 0, pageableScratch_ = 0;
  std::unique_ptr<std::atomic<int>[]> hostTokens_;
  CUgraphExec programExec_ = nullptr;
  CUgraph programGraph_ = nullptr;
  std::vector<GraphEffect> graphEffects_;
  std::unique_ptr<Helper> helper_;
  long loopOps_ = 0;
  bool inLoop_ = false;
  std::set<std::pair<int, int>> stickyDemoted_;  // (template index, lane)
  long demoted_ = 0;
  // Two devices.
  std::array<CUcontext, 2> ctx_{};
  std::array<int, 3> curDev_{};  // per thread: the device whose primary context is current
  int dev1LegacyLane_ = -1, dev1StreamLane_ = -1;
  CUstream dev1Stream_ = nullptr;
  long recordSeq_ = 0;
  // Module reload: the loaded image (phase 0 = A, 1 = B) and its kernels.
  int phase_ = 0;
  std::array<std::vector<KernelSpec>, 2> reload_;
  void* image_ = nullptr;  // CUmodule or CUlibrary
  decltype(&::cuModuleLoadData) moduleLoadData_ = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction_ = nullptr;
  decltype(&::cuModuleUnload) moduleUnload_ = nullptr;
  decltype(&::cuLibraryLoadData) libraryLoadData_ = nullptr;
  decltype(&::cuLibraryGetKernel) libraryGetKernel_ = nullptr;
  decltype(&::cuLibraryUnload) libraryUnload_ = nullptr;
  // Kernel attribute settings (feature "settings"), per kernel index: the program's
  // values in effect (model state, guarded by mu_; a reloaded kernel's go back to
  // the defaults with each load).
  std::vector<int> allowance_, width_;
  long settings_ = 0, refusedSettings_ = 0, refusedLaunches_ = 0;
  std::array<CUdevice, 2> devices_{};
  decltype(&::cuKernelGetFunction) kernelGetFunction_ = nullptr;
  decltype(&::cuFuncGetAttribute) funcGetAttribute_ = nullptr;
  decltype(&::cuKernelGetAttribute) kernelGetAttribute_ = nullptr;
};

int Runner::laneOf(int slot, int thread) const {
  if (slot == kConcurrentSlot) return concurrentLane_;
  if (slot == 0) return 0;
  if (slot == 1) return thread == 1 ? ptdsHelperLane_ : 1;
  if (slot == kDev1LegacySlot) return dev1LegacyLane_;
  if (slot == kDev1StreamSlot) return dev1StreamLane_;
  return slot;
}

Runner::Target Runner::target(const Op& op, int thread) {
  Target t;
  t.lane = laneOf(op.slot, thread);
  t.api = op.viaPerThreadApi ? &drv_.perThread : &drv_.plain;
  if (op.slot == kConcurrentSlot) {
    t.stream = concurrentStream_;
  } else if (op.slot == 0 || op.slot == kDev1LegacySlot) {
    t.stream = op.viaPerThreadApi || op.legacyByHandle ? CU_STREAM_LEGACY : nullptr;
  } else if (op.slot == kDev1StreamSlot) {
    t.stream = dev1Stream_;
  } else if (op.slot == 1) {
    t.stream = op.viaPerThreadApi ? nullptr : CU_STREAM_PER_THREAD;
  } else {
    t.stream = created_[op.slot - 2];
  }
  return t;
}

int Runner::bufferOf(const CellRef& r, int lane) const {
  switch (r.region) {
    case Region::Dev:
      return r.buffer;
    case Region::Scratch:
      return devScratch_ + lane;
    case Region::PinnedSrc:
      return pinnedSrc_;
    case Region::PinnedDst:
      return pinnedDst_;
    case Region::PinnedScratch:
      return pinnedScratch_ + lane;
    case Region::PageableSrc:
      return pageableSrc_;
    case Region::PageableDst:
      return pageableDst_;
    case Region::PageableScratch:
      return pageableScratch_ + lane;
    case Region::Graph:
      return graphBuf_;
  }
  return 0;
}

void Runner::accesses(const Op& op, int lane, std::vector<Access>* out) const {
  switch (op.kind) {
    case Kind::Kernel:
      if (spec(op.kernel).effect) {
        out->push_back({bufferOf(op.src, lane), op.src.cell, false});
        out->push_back({bufferOf(op.dst, lane), op.dst.cell, true});
      }
      break;
    case Kind::Copy:
      for (int r = 0; r < op.rows; ++r) {
        for (int c = 0; c < op.cells; ++c) {
          if (op.src.region != Region::PageableSrc) {  // pageable sources are staged at the call
            out->push_back({bufferOf(op.src, lane), op.src.cell + r * 16 + c, false});
          }
          out->push_back({bufferOf(op.dst, lane), op.dst.cell + r * 16 + c, true});
        }
      }
      break;
    case Kind::Memset:
      for (int r = 0; r < op.rows; ++r) {
        for (int c = 0; c < op.cells; ++c) out->push_back({bufferOf(op.dst, lane), op.dst.cell + r * 16 + c, true});
      }
      break;
    default:
      break;
  }
}

bool Runner::safe(const Clock& vc, const std::vector<Access>& acc) const {
  for (const Access& a : acc) {
    const CellState& cs = buffers_[a.buffer].cells[a.cell];
    if (cs.writerLane >= 0 && vc[cs.writerLane] < cs.writerStamp) return false;
    if (a.write) {
      for (int l = 0; l < kMaxLanes; ++l) {
        if (cs.reads[l] && vc[l] < cs.reads[l]) return false;
      }
    }
  }
  return true;
}

Op Runner::demote(const Op& op) const {
  Op d = op;
  d.demoted = true;
  switch (op.kind) {
    case Kind::Kernel:
      d.dst = CellRef{Region::Scratch, 0, 56 + ((op.tindex + 8) & 7)};
      d.src = d.dst;
      break;
    case Kind::Copy:
      if (op.dir != CopyDir::H2D) d.src = CellRef{Region::Scratch, 0, 0};
      if (op.dir == CopyDir::D2H) {
        d.dst = CellRef{op.dst.region == Region::PageableDst || op.dst.region == Region::PageableScratch
                            ? Region::PageableScratch
                            : Region::PinnedScratch,
                        0, 0};
      } else {
        d.dst = CellRef{Region::Scratch, 0, 24};
      }
      break;
    case Kind::Memset:
      d.dst = CellRef{Region::Scratch, 0, 44};
      break;
    default:
      break;
  }
  return d;
}

void Runner::commitCells(const std::vector<Access>& acc, int lane, uint32_t stamp, int logId) {
  for (const Access& a : acc) {
    CellState& cs = buffers_[a.buffer].cells[a.cell];
    if (!a.write) cs.reads[lane] = std::max(cs.reads[lane], stamp);
  }
  for (const Access& a : acc) {
    CellState& cs = buffers_[a.buffer].cells[a.cell];
    if (a.write) {
      cs.writerLane = lane;
      cs.writerStamp = stamp;
      cs.writerLog = logId;
      cs.reads.fill(0);
    }
  }
}

void Runner::applyModel(const Op& op, int lane, uint64_t k, int width) {
  switch (op.kind) {
    case Kind::Kernel: {
      int effect = spec(op.kernel).effect;
      if (!effect) return;
      uint64_t v;
      std::memcpy(&v, &buffers_[bufferOf(op.src, lane)].model[op.src.cell * 8], 8);
      // sim_add adds the required cluster width its launch got (fake_cuda_core.cc: execKernel).
      v = effect == 1 ? v + k + static_cast<uint64_t>(width) : simMix64(v ^ k);
      std::memcpy(&buffers_[bufferOf(op.dst, lane)].model[op.dst.cell * 8], &v, 8);
      return;
    }
    case Kind::Copy: {
      Buffer& dst = buffers_[bufferOf(op.dst, lane)];
      const Buffer& src = buffers_[bufferOf(op.src, lane)];
      for (int r = 0; r < op.rows; ++r) {
        size_t so = (op.src.cell + r * 16) * 8, dof = (op.dst.cell + r * 16) * 8;
        const uint8_t* from = src.type == Buffer::Pageable ? reinterpret_cast<const uint8_t*>(src.pageable.data()) + so
                                                           : src.model.data() + so;
        std::memmove(dst.model.data() + dof, from, op.cells * 8);
      }
      return;
    }
    case Kind::Memset: {
      Buffer& dst = buffers_[bufferOf(op.dst, lane)];
      for (int r = 0; r < op.rows; ++r) {
        uint8_t* row = dst.model.data() + (op.dst.cell + r * 16) * 8;
        for (size_t i = 0; i < static_cast<size_t>(op.cells) * 8 / op.elem; ++i) {
          std::memcpy(row + i * op.elem, &op.value, op.elem);
        }
      }
      return;
    }
    default:
      return;
  }
}

Clock Runner::nextClock(int lane, int thread, bool eventOp) const {
  const Lane& l = lanes_[lane];
  Clock vc = l.vc;
  join(vc, hostVc_[thread]);
  if (l.legacy) {  // the legacy stream of a context waits for that context's blocking streams
    for (const Lane& b : lanes_) {
      if (&b != &l && b.blocking && b.device == l.device) join(vc, b.vc);
    }
  } else if (l.blocking && !eventOp) {
    join(vc, lanes_[legacyLaneOf(l.device)].vc);
  }
  vc[lane] = l.count + 1;
  return vc;
}

Clock Runner::eventClock(int lane, const Clock& recordVc) const {
  const Lane& l = lanes_[lane];
  Clock vc = recordVc;
  if (l.blocking && !l.legacy) join(vc, lanes_[legacyLaneOf(l.device)].vc);
  return vc;
}

int Runner::pushLog(LogOp lo) {
  lo.id = static_cast<int>(log_.size());
  if (inLoop_) ++loopOps_;
  log_.push_back(std::move(lo));
  return log_.back().id;
}

void Runner::mark(int thread, int logId) {
  Marker m;
  {
    std::lock_guard<std::mutex> lk(mu_);
    m.id = static_cast<int>(markers_.size());
    m.logId = logId;
    m.vc = hostVc_[thread];
    m.label = "oracle-m" + std::to_string(m.id);
    markers_.push_back(m);
    log_[logId].marker = m.id;
  }
  simMark(m.label.c_str());
}

bool Runner::check(CUresult r, const char* call, int iteration, const Op* op, bool allowNotReady) {
  if (r == CUDA_SUCCESS || (allowNotReady && r == CUDA_ERROR_NOT_READY)) return true;
  const char* name = nullptr;
  cu().cuGetErrorName(r, &name);
  std::string what = std::string(call) + " returned " + std::to_string(r) + " (" + (name ? name : "?") + ")";
  if (op) what += " for " + describe(*op, laneOf(op->slot, 0), iteration, tagOf(*op, iteration));
  divergence(-1, "iteration " + std::to_string(iteration) + ": driver call failed: " + what +
                     " (the program itself issued a valid call)");
  return false;
}

std::string Runner::describe(const Op& op, int lane, int iteration, uint64_t tag) const {
  std::string s = kindText(op.kind);
  char b[96];
  if (op.kind == Kind::SetAttr) {
    static const char* kApis[] = {"cuFuncSetAttribute", "cuKernelSetAttribute",
                                  "cuFuncSetAttribute(cuKernelGetFunction(...))"};
    s = std::string(kApis[op.setApi]) + " " + spec(op.kernel).name +
        (op.attr == Attr::MaxDynamicShared ? " MAX_DYNAMIC_SHARED_SIZE_BYTES = " : " REQUIRED_CLUSTER_WIDTH = ") +
        std::to_string(op.settingValue(iteration < 0 ? 0 : iteration));
    if (op.period) s += " (changes every " + std::to_string(op.period) + " iterations)";
    if (p_.twoDevices) s += op.dev1First ? " on devices 1 and 0" : " on devices 0 and 1";
    lane = -1;
  } else if (op.kind == Kind::Kernel) {
    std::snprintf(b, sizeof b, " %s tag=0x%" PRIx64, spec(op.kernel).name.c_str(), tag);
    s += b;
  } else if (op.kind == Kind::Copy) {
    s += op.dir == CopyDir::D2D ? " D2D" : (op.dir == CopyDir::H2D ? " H2D" : " D2H");
    s += " " + std::to_string(op.cells * 8 * op.rows) + "B";
  }
  if (op.kind == Kind::EventRecord || op.kind == Kind::StreamWait || op.kind == Kind::EventSync ||
      op.kind == Kind::Poll || op.kind == Kind::EventQuery || op.kind == Kind::TimingCheck) {
    s += " event " + std::to_string(op.event);
  }
  if (lane >= 0) s += " on " + lanes_[lane].name;
  s += iteration >= 0 ? " (iteration " + std::to_string(iteration) : std::string(" (setup/final");
  if (op.tindex >= 0) s += ", template op " + std::to_string(op.tindex);
  if (op.tindex < 0 && iteration >= 0) s += ", inserted";
  if (op.demoted) s += ", demoted to scratch";
  return s + ")";
}

void Runner::setup() {
  CUcontext ctx;
  check(cu().cuInit(0), "cuInit", -1, nullptr);
  allowance_.assign(p_.kernels.size(), kDefaultSharedAllowance);
  width_.assign(p_.kernels.size(), 0);
  if (!p_.tunedKernels.empty()) {
    check(cu().cuDeviceGet(&devices_[0], 0), "cuDeviceGet", -1, nullptr);
    if (p_.twoDevices) check(cu().cuDeviceGet(&devices_[1], 1), "cuDeviceGet", -1, nullptr);
    auto lookup = [&](const char* name, auto* out) {
      void* f = nullptr;
      CUdriverProcAddressQueryResult status;
      if (drv_.getProcAddress(name, &f, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS || !f) {
        divergence(-1, std::string("setup: cuGetProcAddress(") + name + ") failed");
      }
      *out = reinterpret_cast<std::remove_pointer_t<decltype(out)>>(f);
    };
    lookup("cuKernelGetFunction", &kernelGetFunction_);
    lookup("cuFuncGetAttribute", &funcGetAttribute_);
    lookup("cuKernelGetAttribute", &kernelGetAttribute_);
  }
  check(cu().cuDevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain", -1, nullptr);
  check(cu().cuCtxSetCurrent(ctx), "cuCtxSetCurrent", -1, nullptr);
  ctx_[0] = ctx;
  simSetMaxSteps(p_.schedSteps);
  // Lanes.
  auto addLane = [&](const std::string& name, bool legacy, bool blocking) {
    Lane l;
    l.name = name;
    l.legacy = legacy;
    l.blocking = blocking;
    lanes_.push_back(l);
  };
  addLane("legacy stream", true, false);
  addLane("per-thread stream (main thread)", false, true);
  for (int i = 0; i < p_.numCreated; ++i) {
    CUstream s;
    check(cu().cuStreamCreate(&s, p_.createdBlocking[i] ? 0 : CU_STREAM_NON_BLOCKING), "cuStreamCreate", -1, nullptr);
    created_.push_back(s);
    addLane("stream s" + std::to_string(i + 2) + (p_.createdBlocking[i] ? " (blocking)" : " (non-blocking)"), false,
            p_.createdBlocking[i]);
    lanes_.back().handle = s;
  }
  ptdsHelperLane_ = static_cast<int>(lanes_.size());
  addLane("per-thread stream (helper thread)", false, true);
  concurrentLane_ = static_cast<int>(lanes_.size());
  addLane("stream of the concurrent thread (non-blocking)", false, false);
  check(cu().cuStreamCreate(&concurrentStream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate", -1, nullptr);
  lanes_[concurrentLane_].handle = concurrentStream_;
  lanes_[0].simId = simStreamId(nullptr, 0);
  lanes_[1].simId = simStreamId(nullptr, 1);
  for (int i = 0; i < p_.numCreated; ++i) lanes_[2 + i].simId = simStreamId(created_[i], 0);
  lanes_[concurrentLane_].simId = simStreamId(concurrentStream_, 0);
  if (p_.twoDevices) {  // device 1's legacy stream and a stream created in its primary context
    check(cu().cuDevicePrimaryCtxRetain(&ctx_[1], 1), "cuDevicePrimaryCtxRetain(device 1)", -1, nullptr);
    check(cu().cuCtxSetCurrent(ctx_[1]), "cuCtxSetCurrent", -1, nullptr);
    dev1LegacyLane_ = static_cast<int>(lanes_.size());
    addLane("device-1 legacy stream", true, false);
    lanes_.back().device = 1;
    lanes_.back().simId = simStreamId(nullptr, 0);
    check(cu().cuStreamCreate(&dev1Stream_, p_.dev1Blocking ? 0 : CU_STREAM_NON_BLOCKING), "cuStreamCreate", -1,
          nullptr);
    dev1StreamLane_ = static_cast<int>(lanes_.size());
    addLane(std::string("device-1 stream d1") + (p_.dev1Blocking ? " (blocking)" : " (non-blocking)"), false,
            p_.dev1Blocking);
    lanes_.back().device = 1;
    lanes_.back().handle = dev1Stream_;
    lanes_.back().simId = simStreamId(dev1Stream_, 0);
    check(cu().cuCtxSetCurrent(ctx_[0]), "cuCtxSetCurrent", -1, nullptr);
  }
  helper_ = std::make_unique<Helper>();
  helper_->run([&] {
    CUcontext c;
    cu().cuDevicePrimaryCtxRetain(&c, 0);
    cu().cuCtxSetCurrent(c);
    lanes_[ptdsHelperLane_].simId = simStreamId(nullptr, 1);
  });
  // Events (the last one belongs to the concurrent thread).
  // Then device 1's event (created in its context), then the timing events.
  events_.resize(p_.totalEvents());
  for (int i = 0; i < p_.totalEvents(); ++i) {
    if (i == p_.dev1Event() && !p_.twoDevices) continue;
    if (i == p_.dev1Event()) check(cu().cuCtxSetCurrent(ctx_[1]), "cuCtxSetCurrent", -1, nullptr);
    check(cu().cuEventCreate(&events_[i].handle, i >= p_.timingEvent(0) ? 0 : CU_EVENT_DISABLE_TIMING),
          "cuEventCreate", -1, nullptr);
    if (i == p_.dev1Event()) check(cu().cuCtxSetCurrent(ctx_[0]), "cuCtxSetCurrent", -1, nullptr);
  }
  // Buffers.
  auto addBuffer = [&](const std::string& name, Buffer::Type type) {
    Buffer b;
    b.name = name;
    b.type = type;
    b.model.assign(kBufferBytes, 0);
    b.cells.resize(kCellsPerBuffer);
    if (type == Buffer::Device) {
      CUdeviceptr d = 0;
      check(cu().cuMemAlloc(&d, kBufferBytes), "cuMemAlloc", -1, nullptr);
      b.base = d;
    } else if (type == Buffer::Pinned) {
      void* h = nullptr;
      check(cu().cuMemAllocHost(&h, kBufferBytes), "cuMemAllocHost", -1, nullptr);
      std::memset(h, 0, kBufferBytes);
      b.base = reinterpret_cast<uint64_t>(h);
    } else {
      b.pageable.assign(kCellsPerBuffer, 0);
    }
    buffers_.push_back(std::move(b));
    if (type == Buffer::Pageable) buffers_.back().base = reinterpret_cast<uint64_t>(buffers_.back().pageable.data());
    return static_cast<int>(buffers_.size()) - 1;
  };
  // Home buffers of the lanes, then the concurrent thread's, then device 1's.
  for (int i = 0; i <= p_.numDevBuffers + 1; ++i) addBuffer("dev" + std::to_string(i), Buffer::Device);
  devScratch_ = static_cast<int>(buffers_.size());
  for (int l = 0; l < kMaxLanes; ++l) addBuffer("scratch(lane " + std::to_string(l) + ")", Buffer::Device);
  graphBuf_ = addBuffer("graph", Buffer::Device);
  pinnedSrc_ = addBuffer("pinned-src", Buffer::Pinned);
  pinnedDst_ = addBuffer("pinned-dst", Buffer::Pinned);
  pinnedScratch_ = static_cast<int>(buffers_.size());
  for (int l = 0; l < kMaxLanes; ++l) addBuffer("pinned-scratch(lane " + std::to_string(l) + ")", Buffer::Pinned);
  pageableSrc_ = addBuffer("pageable-src", Buffer::Pageable);
  pageableDst_ = addBuffer("pageable-dst", Buffer::Pageable);
  pageableScratch_ = static_cast<int>(buffers_.size());
  for (int l = 0; l < kMaxLanes; ++l) addBuffer("pageable-scratch(lane " + std::to_string(l) + ")", Buffer::Pageable);
  // Initial contents: device buffers through synchronous copies, pinned source by the host.
  for (size_t b = 0; b < buffers_.size(); ++b) {
    Buffer& buf = buffers_[b];
    if (buf.type == Buffer::Pageable) continue;
    for (int c = 0; c < kCellsPerBuffer; ++c) {
      uint64_t v = simMix64(p_.seed * 1315423911u + b * 131 + c);
      if (buf.type == Buffer::Pinned && static_cast<int>(b) != pinnedSrc_) v = 0;
      std::memcpy(&buf.model[c * 8], &v, 8);
    }
    if (buf.type == Buffer::Pinned) {
      std::memcpy(reinterpret_cast<void*>(buf.base), buf.model.data(), kBufferBytes);
      continue;
    }
    check(cu().cuMemcpyHtoD(buf.base, buf.model.data(), kBufferBytes), "cuMemcpyHtoD", -1, nullptr);
    int id;
    {
      std::lock_guard<std::mutex> lk(mu_);
      Clock vc = nextClock(0, 0);
      commitLane(0, vc);
      LogOp lo;
      lo.kind = Kind::Copy;
      lo.lane = 0;
      lo.stamp = vc[0];
      lo.vc = vc;
      lo.effect = true;
      lo.key = copyKey(buf.base, reinterpret_cast<uint64_t>(buf.model.data()), kBufferBytes, 1, 0, 0);
      lo.what = "initial upload of " + buf.name + " (setup)";
      id = pushLog(lo);
      lanes_[0].effects.push_back(id);
      join(hostVc_[0], vc);  // a synchronous copy returns after it completed
    }
    mark(0, id);
  }
  hostTokens_ = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(p_.numHostFns) + 1);
  if (p_.reloadPeriod) {
    auto lookup = [&](const char* name, auto* out) {
      void* f = nullptr;
      CUdriverProcAddressQueryResult status;
      if (drv_.getProcAddress(name, &f, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS || !f) {
        divergence(-1, std::string("setup: cuGetProcAddress(") + name + ") failed");
      }
      *out = reinterpret_cast<std::remove_pointer_t<decltype(out)>>(f);
    };
    lookup("cuModuleLoadData", &moduleLoadData_);
    lookup("cuModuleGetFunction", &moduleGetFunction_);
    lookup("cuModuleUnload", &moduleUnload_);
    lookup("cuLibraryLoadData", &libraryLoadData_);
    lookup("cuLibraryGetKernel", &libraryGetKernel_);
    lookup("cuLibraryUnload", &libraryUnload_);
    reload_[0].assign(p_.kernels.begin() + p_.baseKernels, p_.kernels.end());
    reload_[1] = p_.reloadAlt;
    loadImage(0, -1);
  }
  // Kernel attributes set before the loop (and before the program's capture).
  for (const Op& op : p_.setupOps) issueSetting(op, 0, -1);
  ensureCtx(0, 0);
  // The program's own graph: captured once, launched by GraphLaunch template ops.
  if (p_.graphSlot >= 0) {
    CUstream s = created_[p_.graphSlot - 2];
    int lane = p_.graphSlot;
    check(cu().cuStreamBeginCapture(s, p_.graphMode), "cuStreamBeginCapture", -1, nullptr);
    for (const Op& op : p_.graphOps) {
      GraphEffect ge;
      ge.op = op;
      if (op.kind == Kind::Kernel) {
        const KernelSpec& k = p_.kernels[op.kernel];
        std::vector<uint8_t> packed(k.bytes, 0);
        uint64_t dst = addressOf(op.dst, lane), src = addressOf(op.src, lane), kv = op.k, tag = op.tagBase;
        std::memcpy(packed.data() + k.offsets[0], &dst, 8);
        std::memcpy(packed.data() + k.offsets[1], &src, 8);
        std::memcpy(packed.data() + k.offsets[2], &kv, 8);
        std::memcpy(packed.data() + k.offsets[3], &tag, 8);
        size_t e = 0;
        for (size_t i = 4; i < k.sizes.size(); ++i) {
          std::memcpy(packed.data() + k.offsets[i], op.extras.data() + e, k.sizes[i]);
          e += k.sizes[i];
        }
        std::vector<void*> args;
        for (size_t off : k.offsets) args.push_back(packed.data() + off);
        const KernelSpec::Config& c = k.configs[op.config];
        check(cu().cuLaunchKernel(k.fn, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shmem, s,
                                  args.data(), nullptr),
              "cuLaunchKernel (capture)", -1, nullptr);
        ge.key = kernelKey(k.fn, c.grid, c.block, c.shmem, nullptr, 0, packed.data(), packed.size());
        ge.what = "program-graph kernel " + k.name;
        ge.width = width_[op.kernel];
      } else {
        uint64_t dst = addressOf(op.dst, lane);
        check(cu().cuMemsetD32Async(dst, op.value, op.cells * 2, s), "cuMemsetD32Async (capture)", -1, nullptr);
        ge.key = memsetKey(dst, 4, op.value, op.cells * 2, 1, 0);
        ge.what = "program-graph memset";
      }
      graphEffects_.push_back(ge);
    }
    check(cu().cuStreamEndCapture(s, &programGraph_), "cuStreamEndCapture", -1, nullptr);
    check(cu().cuGraphInstantiateWithFlags(&programExec_, programGraph_, 0), "cuGraphInstantiateWithFlags", -1,
          nullptr);
  }
}

void Runner::ensureCtx(int device, int thread) {
  if (!p_.twoDevices || curDev_[thread] == device) return;
  check(cu().cuCtxSetCurrent(ctx_[device]), "cuCtxSetCurrent", -1, nullptr);
  curDev_[thread] = device;
}

// Unloads the loaded image (if any) and loads image `phase`; the freed kernel handles
// are reused for the new image's kernels (other names, other parameter layouts).
void Runner::loadImage(int phase, int iteration) {
  if (!moduleLoadData_ || !moduleGetFunction_ || !moduleUnload_ || !libraryLoadData_ || !libraryGetKernel_ ||
      !libraryUnload_) {
    return;
  }
  const char* kind = p_.reloadLibrary ? "library" : "module";
  if (image_) {
    CUresult r = p_.reloadLibrary ? libraryUnload_(static_cast<CUlibrary>(image_))
                                  : moduleUnload_(static_cast<CUmodule>(image_));
    check(r, p_.reloadLibrary ? "cuLibraryUnload" : "cuModuleUnload", iteration, nullptr);
    image_ = nullptr;
  }
  std::vector<KernelSpec>& ks = reload_[phase];
  std::string text = "sim-image: ";
  for (size_t i = 0; i < ks.size(); ++i) {
    text += (i ? "; " : "") + ks[i].name + "(";
    for (size_t j = 0; j < ks[i].sizes.size(); ++j) text += (j ? "," : "") + std::to_string(ks[i].sizes[j]);
    text += ")";
  }
  CUresult r;
  if (p_.reloadLibrary) {
    CUlibrary lib = nullptr;
    r = libraryLoadData_(&lib, text.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    image_ = lib;
  } else {
    CUmodule mod = nullptr;
    r = moduleLoadData_(&mod, text.c_str());
    image_ = mod;
  }
  if (!check(r, p_.reloadLibrary ? "cuLibraryLoadData" : "cuModuleLoadData", iteration, nullptr)) return;
  std::vector<CUfunction> before;
  for (const KernelSpec& k : reload_[1 - phase]) before.push_back(k.fn);
  for (size_t i = 0; i < ks.size(); ++i) {
    KernelSpec& k = ks[i];
    if (p_.reloadLibrary) {
      CUkernel kern = nullptr;
      check(libraryGetKernel_(&kern, static_cast<CUlibrary>(image_), k.name.c_str()), "cuLibraryGetKernel", iteration,
            nullptr);
      k.fn = reinterpret_cast<CUfunction>(kern);
    } else {
      check(moduleGetFunction_(&k.fn, static_cast<CUmodule>(image_), k.name.c_str()), "cuModuleGetFunction",
            iteration, nullptr);
    }
    k.family = p_.reloadLibrary ? SIM_KERNEL_LIBRARY : SIM_KERNEL_FUNCTION;
    k.offsets.clear();
    for (unsigned j = 0; j < k.sizes.size(); ++j) {
      size_t off = 0;
      simKernelParamLayout(k.fn, j, &off, nullptr);
      k.offsets.push_back(off);
    }
    k.bytes = simKernelParamBytes(k.fn);
  }
  phase_ = phase;
  {
    std::lock_guard<std::mutex> lk(mu_);  // a loaded kernel has the driver's defaults
    for (size_t i = p_.baseKernels; i < allowance_.size(); ++i) {
      allowance_[i] = kDefaultSharedAllowance;
      width_[i] = 0;
    }
  }
  if (verbose_) {
    std::printf("  iteration %d: %s image %c loaded (%zu kernels%s)\n", iteration, kind, phase ? 'B' : 'A', ks.size(),
                before[0] == ks[0].fn ? ", handles reused" : "");
  }
}

// A timing-event pair: wait for the end record, then the elapsed simulated time must
// cover every op issued between the two records on their stream (1 unit each).
void Runner::timingCheck(const Op& op, int thread, int iteration) {
  Op s = op;
  s.kind = Kind::EventSync;
  hostSync(s, thread, iteration);
  long count;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const EventState& b = events_[op.timingBegin];
    const EventState& e = events_[op.event];
    if (!b.recorded || !e.recorded || b.lane != e.lane || b.seq >= e.seq) return;  // a record was left out
    count = static_cast<long>(e.effectsAt - b.effectsAt);
  }
  float ms = -1;
  if (!check(cu().cuEventElapsedTime(&ms, events_[op.timingBegin].handle, events_[op.event].handle),
             "cuEventElapsedTime", iteration, &op)) {
    return;
  }
  double units = static_cast<double>(ms) * 1000.0;
  if (units + 0.5 < static_cast<double>(count)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ": elapsed %.1f units between the records, but %ld ops were issued between them",
                  units, count);
    divergence(static_cast<int>(log_.size()), "iteration " + std::to_string(iteration) +
                                                  ": timing events " + std::to_string(op.timingBegin) + " -> " +
                                                  std::to_string(op.event) + " on " + lanes_[laneOf(op.slot, thread)].name +
                                                  buf);
  }
}

// cuFuncSetAttribute / cuKernelSetAttribute: on every device the program uses
// (the simulator keeps one value per kernel; a driver one per device or context).
// A value the driver refuses (CUDA_ERROR_INVALID_VALUE) changes nothing.
void Runner::issueSetting(const Op& op, int thread, int iteration) {
  const KernelSpec& k = spec(op.kernel);
  const int v = op.settingValue(iteration);
  const bool valid = attrValueValid(op.attr, v);
  const CUfunction_attribute attr = op.attr == Attr::MaxDynamicShared ? CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                                                                      : CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH;
  const std::string what = describe(op, -1, iteration, 0);
  std::vector<int> devs{0};
  if (p_.twoDevices) devs = op.dev1First ? std::vector<int>{1, 0} : std::vector<int>{0, 1};
  for (int d : devs) {
    CUresult r;
    const char* call;
    if (op.setApi == 1) {
      call = "cuKernelSetAttribute";
      r = cu().cuKernelSetAttribute(attr, v, reinterpret_cast<CUkernel>(k.fn), devices_[d]);
    } else {
      ensureCtx(d, thread);
      CUfunction f = k.fn;
      if (op.setApi == 2) {
        if (!kernelGetFunction_ ||
            !check(kernelGetFunction_(&f, reinterpret_cast<CUkernel>(k.fn)), "cuKernelGetFunction", iteration, &op)) {
          continue;
        }
      }
      call = "cuFuncSetAttribute";
      r = cu().cuFuncSetAttribute(f, attr, v);
    }
    if (r != (valid ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE)) {
      const char* name = nullptr;
      cu().cuGetErrorName(r, &name);
      divergence(-1, "iteration " + std::to_string(iteration) + ": " + call + " (device " + std::to_string(d) +
                         ") returned " + std::to_string(r) + " (" + (name ? name : "?") + ") for " + what +
                         (valid ? ": a valid value (CUDA_SUCCESS)" : ": a value the driver refuses"));
    }
  }
  std::vector<int>& model = op.attr == Attr::MaxDynamicShared ? allowance_ : width_;
  if (op.readBack && funcGetAttribute_ && kernelGetAttribute_) {  // what the program set (or had, if refused)
    int want, got = -12345;
    {
      std::lock_guard<std::mutex> lk(mu_);
      want = valid ? v : model[op.kernel];
    }
    const bool viaKernel = op.setApi != 0;  // library kernels
    ensureCtx(0, thread);
    const CUresult r = viaKernel ? kernelGetAttribute_(&got, attr, reinterpret_cast<CUkernel>(k.fn), devices_[0])
                                 : funcGetAttribute_(&got, attr, k.fn);
    if (check(r, viaKernel ? "cuKernelGetAttribute" : "cuFuncGetAttribute", iteration, &op) && got != want) {
      divergence(-1, "iteration " + std::to_string(iteration) + ": after " + what + ", " +
                         (viaKernel ? "cuKernelGetAttribute" : "cuFuncGetAttribute") + " reads " + std::to_string(got) +
                         ", but the program's settings give " + std::to_string(want));
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (valid) model[op.kernel] = v;
  ++settings_;
  if (!valid) ++refusedSettings_;
  LogOp lo;
  lo.iteration = iteration;
  lo.tindex = op.tindex;
  lo.thread = thread;
  lo.kind = op.kind;
  lo.what = what;
  pushLog(std::move(lo));
}

void Runner::issue(const Op& op, int thread, int iteration) {
  ensureCtx(deviceOfSlot(op.slot), thread);
  switch (op.kind) {
    case Kind::TimingCheck:
      timingCheck(op, thread, iteration);
      return;
    case Kind::SetAttr:
      issueSetting(op, thread, iteration);
      return;
    case Kind::Kernel:
    case Kind::Copy:
    case Kind::Memset:
    case Kind::HostFn:
      issueEffect(op, thread, iteration);
      return;
    case Kind::StreamSync:
    case Kind::EventSync:
    case Kind::CtxSync:
    case Kind::Poll:
      hostSync(op, thread, iteration);
      return;
    default:
      break;
  }
  Target t = target(op, thread);
  LogOp lo;
  lo.iteration = iteration;
  lo.tindex = op.tindex;
  lo.thread = thread;
  lo.kind = op.kind;
  lo.what = describe(op, t.lane, iteration, 0);
  switch (op.kind) {
    case Kind::EventRecord: {
      CUevent ev = events_[op.event].handle;
      CUresult r =
          op.viaPerThreadApi ? t.api->cuEventRecordWithFlags(ev, t.stream, 0) : t.api->cuEventRecord(ev, t.stream);
      if (!check(r, "cuEventRecord", iteration, &op)) return;
      std::lock_guard<std::mutex> lk(mu_);
      Clock vc = nextClock(t.lane, thread, true);
      commitLane(t.lane, vc);
      events_[op.event].recorded = true;
      events_[op.event].vc = eventClock(t.lane, vc);
      events_[op.event].lane = t.lane;
      events_[op.event].seq = ++recordSeq_;
      events_[op.event].effectsAt = lanes_[t.lane].effects.size();
      lo.lane = t.lane;
      lo.stamp = vc[t.lane];
      lo.vc = vc;
      pushLog(lo);
      return;
    }
    case Kind::StreamWait: {
      if (!check(t.api->cuStreamWaitEvent(t.stream, events_[op.event].handle, 0), "cuStreamWaitEvent", iteration,
                 &op)) {
        return;
      }
      std::lock_guard<std::mutex> lk(mu_);
      if (events_[op.event].recorded) {  // a wait on a never-recorded event is a no-op
        Clock vc = nextClock(t.lane, thread, true);
        join(vc, events_[op.event].vc);
        commitLane(t.lane, vc);
        lo.lane = t.lane;
        lo.stamp = vc[t.lane];
        lo.vc = vc;
      }
      pushLog(lo);
      return;
    }
    case Kind::GraphLaunch: {
      if (!check(t.api->cuGraphLaunch(programExec_, t.stream), "cuGraphLaunch", iteration, &op)) return;
      std::lock_guard<std::mutex> lk(mu_);
      pushLog(lo);
      for (const GraphEffect& ge : graphEffects_) {
        std::vector<Access> acc;
        accesses(ge.op, t.lane, &acc);
        Clock vc = nextClock(t.lane, thread);
        commitLane(t.lane, vc);
        LogOp e;
        e.iteration = iteration;
        e.tindex = op.tindex;
        e.thread = thread;
        e.kind = ge.op.kind;
        e.lane = t.lane;
        e.stamp = vc[t.lane];
        e.vc = vc;
        e.effect = true;
        e.key = ge.key;
        e.what = ge.what + " on " + lanes_[t.lane].name + " (iteration " + std::to_string(iteration) + ")";
        int id = pushLog(e);
        lanes_[t.lane].effects.push_back(id);
        commitCells(acc, t.lane, vc[t.lane], id);
        applyModel(ge.op, t.lane, ge.op.k, ge.width);
      }
      return;
    }
    case Kind::AllocAsync: {
      CUdeviceptr d = 0;
      if (!check(t.api->cuMemAllocAsync(&d, op.cells * 8, t.stream), "cuMemAllocAsync", iteration, &op)) return;
      {
        std::lock_guard<std::mutex> lk(mu_);
        Clock vc = nextClock(t.lane, thread);
        commitLane(t.lane, vc);
        lo.lane = t.lane;
        lo.stamp = vc[t.lane];
        lo.vc = vc;
        pushLog(lo);
      }
      bool ok = check(t.api->cuMemsetD32Async(d, op.value, op.cells * 2, t.stream), "cuMemsetD32Async", iteration, &op);
      if (ok) {
        std::lock_guard<std::mutex> lk(mu_);
        Clock vc = nextClock(t.lane, thread);
        commitLane(t.lane, vc);
        LogOp e = lo;
        e.kind = Kind::Memset;
        e.stamp = vc[t.lane];
        e.vc = vc;
        e.effect = true;
        e.key = memsetKey(d, 4, op.value, op.cells * 2, 1, 0);
        e.what = "memset of cuMemAllocAsync memory on " + lanes_[t.lane].name + " (iteration " +
                 std::to_string(iteration) + ")";
        int id = pushLog(e);
        lanes_[t.lane].effects.push_back(id);
      }
      if (!check(t.api->cuMemFreeAsync(d, t.stream), "cuMemFreeAsync", iteration, &op)) return;
      std::lock_guard<std::mutex> lk(mu_);
      Clock vc = nextClock(t.lane, thread);
      commitLane(t.lane, vc);
      lo.stamp = vc[t.lane];
      lo.vc = vc;
      pushLog(lo);
      return;
    }
    case Kind::StreamQuery: {
      if (op.variant == 1) {
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (!check(t.api->cuStreamIsCapturing(t.stream, &st), "cuStreamIsCapturing", iteration, &op)) return;
        if (st != CU_STREAM_CAPTURE_STATUS_NONE) {
          divergence(-1, "iteration " + std::to_string(iteration) + ": cuStreamIsCapturing(" + lanes_[t.lane].name +
                             ") reports status " + std::to_string(st) + " but the program never captures it");
        }
      } else {
        Clock covered;
        {
          std::lock_guard<std::mutex> lk(mu_);
          covered = lanes_[t.lane].vc;
        }
        const CUresult r = t.api->cuStreamQuery(t.stream);
        check(r, "cuStreamQuery", iteration, &op, true);
        if (r == CUDA_SUCCESS) return queryAnsweredComplete(thread, covered, lo);
      }
      std::lock_guard<std::mutex> lk(mu_);
      pushLog(lo);
      return;
    }
    case Kind::EventQuery: {
      Clock covered;
      bool knows;
      {
        std::lock_guard<std::mutex> lk(mu_);
        knows = events_[op.event].recorded;
        covered = events_[op.event].vc;
      }
      const CUresult r = cu().cuEventQuery(events_[op.event].handle);
      check(r, "cuEventQuery", iteration, &op, true);
      if (r == CUDA_SUCCESS && knows) return queryAnsweredComplete(thread, covered, lo);
      std::lock_guard<std::mutex> lk(mu_);
      pushLog(lo);
      return;
    }
    case Kind::AllocFree: {
      CUdeviceptr d = 0;
      if (check(cu().cuMemAlloc(&d, 4096), "cuMemAlloc", iteration, &op)) {
        check(cu().cuMemFree(d), "cuMemFree", iteration, &op);
      }
      std::lock_guard<std::mutex> lk(mu_);
      pushLog(lo);
      pushLog(lo);
      return;
    }
    default:
      return;
  }
}

void Runner::issueEffect(const Op& opIn, int thread, int iteration) {
  Target t = target(opIn, thread);
  Op op = opIn;
  std::vector<Access> acc;
  // A kernel launch gets the attributes in effect at its call; asking for more
  // dynamic shared memory than its allowance, it is refused and has no effect.
  int allowance = kDefaultSharedAllowance, width = 0;
  unsigned asks = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (op.kind == Kind::Kernel) {
      allowance = allowance_[op.kernel];
      width = width_[op.kernel];
      asks = spec(op.kernel).configs[op.config].shmem;
    }
    Clock vc = nextClock(t.lane, thread);
    accesses(op, t.lane, &acc);
    // Demotion is sticky per template op, so a steady-state loop stays periodic.
    bool sticky = op.tindex >= 0 && stickyDemoted_.count({op.tindex, t.lane});
    if (sticky || !safe(vc, acc)) {
      op = demote(op);
      acc.clear();
      accesses(op, t.lane, &acc);
      if (op.tindex >= 0) stickyDemoted_.insert({op.tindex, t.lane});
      ++demoted_;
    }
  }
  uint64_t tag = tagOf(op, iteration), kv = kOf(op, iteration);
  std::string key, kernelName;
  CUresult r = CUDA_SUCCESS;
  const char* call = "";
  bool pageableD2H = false;
  switch (op.kind) {
    case Kind::Kernel: {
      const KernelSpec& k = spec(op.kernel);
      const KernelSpec::Config& c = k.configs[op.config];
      std::vector<uint8_t> packed(k.bytes, 0);
      uint64_t first = addressOf(op.dst, t.lane);
      size_t fixed;
      if (k.effect) {
        uint64_t src = addressOf(op.src, t.lane);
        std::memcpy(packed.data() + k.offsets[0], &first, 8);
        std::memcpy(packed.data() + k.offsets[1], &src, 8);
        std::memcpy(packed.data() + k.offsets[2], &kv, 8);
        std::memcpy(packed.data() + k.offsets[3], &tag, 8);
        fixed = 4;
      } else {
        std::memcpy(packed.data() + k.offsets[0], &first, 8);
        std::memcpy(packed.data() + k.offsets[1], &tag, 8);
        fixed = 2;
      }
      size_t e = 0;
      for (size_t i = fixed; i < k.sizes.size(); ++i) {  // reloaded kernels: other layouts, bytes as available
        size_t n = e >= op.extras.size() ? 0 : std::min(k.sizes[i], op.extras.size() - e);
        if (n) std::memcpy(packed.data() + k.offsets[i], op.extras.data() + e, n);
        e += k.sizes[i];
      }
      kernelName = k.name;
      std::vector<void*> args;
      for (size_t off : k.offsets) args.push_back(packed.data() + off);
      std::vector<CUlaunchAttribute> attrs;
      if (op.variant == 0) {
        call = "cuLaunchKernel";
        r = t.api->cuLaunchKernel(k.fn, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shmem,
                                  t.stream, args.data(), nullptr);
      } else if (op.variant == 1) {
        call = "cuLaunchKernel (extra)";
        std::vector<uint8_t> buf(k.bytes, 0xcd);  // padding garbage must not matter
        for (size_t i = 0; i < k.sizes.size(); ++i) {
          std::memcpy(buf.data() + k.offsets[i], packed.data() + k.offsets[i], k.sizes[i]);
        }
        size_t size = buf.size();
        void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         CU_LAUNCH_PARAM_END};
        r = t.api->cuLaunchKernel(k.fn, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shmem,
                                  t.stream, nullptr, extra);
      } else if (op.variant == 2) {
        call = "cuLaunchKernelEx";
        attrs = op.attrs;
        CUlaunchConfig cfg{};
        cfg.gridDimX = c.grid[0];
        cfg.gridDimY = c.grid[1];
        cfg.gridDimZ = c.grid[2];
        cfg.blockDimX = c.block[0];
        cfg.blockDimY = c.block[1];
        cfg.blockDimZ = c.block[2];
        cfg.sharedMemBytes = c.shmem;
        cfg.hStream = t.stream;
        std::vector<CUlaunchAttribute> passed = attrs;
        cfg.attrs = passed.data();
        cfg.numAttrs = static_cast<unsigned>(passed.size());
        r = t.api->cuLaunchKernelEx(&cfg, k.fn, args.data(), nullptr);
      } else {
        call = "cuLaunchCooperativeKernel";
        CUlaunchAttribute coop;
        std::memset(&coop, 0, sizeof coop);
        coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        coop.value.cooperative = 1;
        attrs.push_back(coop);
        r = t.api->cuLaunchCooperativeKernel(k.fn, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2],
                                             c.shmem, t.stream, args.data());
      }
      key = kernelKey(k.fn, c.grid, c.block, c.shmem, attrs.data(), static_cast<unsigned>(attrs.size()), packed.data(),
                      packed.size());
      break;
    }
    case Kind::Copy: {
      uint64_t dst = addressOf(op.dst, t.lane), src = addressOf(op.src, t.lane);
      size_t w = static_cast<size_t>(op.cells) * 8;
      if (op.rows > 1) {
        call = "cuMemcpy2DAsync";
        CUDA_MEMCPY2D c{};
        c.srcMemoryType = op.dir == CopyDir::H2D ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        c.srcHost = reinterpret_cast<const void*>(src);
        c.srcDevice = src;
        c.srcPitch = kRowPitch;
        c.dstMemoryType = op.dir == CopyDir::D2H ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        c.dstHost = reinterpret_cast<void*>(dst);
        c.dstDevice = dst;
        c.dstPitch = kRowPitch;
        c.WidthInBytes = w;
        c.Height = static_cast<size_t>(op.rows);
        r = t.api->cuMemcpy2DAsync(&c, t.stream);
      } else if (op.copyApi == 1) {
        call = "cuMemcpyAsync";
        r = t.api->cuMemcpyAsync(dst, src, w, t.stream);
      } else if (op.dir == CopyDir::D2D) {
        call = "cuMemcpyDtoDAsync";
        r = t.api->cuMemcpyDtoDAsync(dst, src, w, t.stream);
      } else if (op.dir == CopyDir::H2D) {
        call = "cuMemcpyHtoDAsync";
        r = t.api->cuMemcpyHtoDAsync(dst, reinterpret_cast<const void*>(src), w, t.stream);
      } else {
        call = "cuMemcpyDtoHAsync";
        r = t.api->cuMemcpyDtoHAsync(reinterpret_cast<void*>(dst), src, w, t.stream);
      }
      pageableD2H = op.dir == CopyDir::D2H && buffers_[bufferOf(op.dst, t.lane)].type == Buffer::Pageable;
      key =
          copyKey(dst, src, w, static_cast<size_t>(op.rows), op.rows > 1 ? kRowPitch : 0, op.rows > 1 ? kRowPitch : 0);
      break;
    }
    case Kind::Memset: {
      uint64_t dst = addressOf(op.dst, t.lane);
      size_t width = static_cast<size_t>(op.cells) * 8 / op.elem;
      uint32_t value = op.elem == 1 ? (op.value & 0xff) : (op.elem == 2 ? (op.value & 0xffff) : op.value);
      op.value = value;
      if (op.rows > 1) {
        call = "cuMemsetD2D32Async";
        r = t.api->cuMemsetD2D32Async(dst, kRowPitch, value, width, static_cast<size_t>(op.rows), t.stream);
      } else if (op.elem == 1) {
        call = "cuMemsetD8Async";
        r = t.api->cuMemsetD8Async(dst, static_cast<unsigned char>(value), width, t.stream);
      } else if (op.elem == 2) {
        call = "cuMemsetD16Async";
        r = t.api->cuMemsetD16Async(dst, static_cast<unsigned short>(value), width, t.stream);
      } else {
        call = "cuMemsetD32Async";
        r = t.api->cuMemsetD32Async(dst, value, width, t.stream);
      }
      key = memsetKey(dst, op.elem, value, width, static_cast<size_t>(op.rows), op.rows > 1 ? kRowPitch : 0);
      break;
    }
    case Kind::HostFn: {
      call = "cuLaunchHostFunc";
      void* user = &hostTokens_[op.hostId];
      r = t.api->cuLaunchHostFunc(t.stream, hostFnEntry, user);
      key = hostKey(hostFnEntry, user);
      break;
    }
    default:
      return;
  }
  if (op.kind == Kind::Kernel && (asks > static_cast<unsigned>(allowance) || r != CUDA_SUCCESS)) {
    const bool refused = asks > static_cast<unsigned>(allowance);
    char b[200];
    std::snprintf(b, sizeof b, "asks for %u bytes of dynamic shared memory, the kernel's allowance is %d", asks,
                  allowance);
    if (refused) {  // no effect (an effect with its content is named as such by the checker)
      std::lock_guard<std::mutex> lk(mu_);
      LogOp lo;
      lo.iteration = iteration;
      lo.tindex = op.tindex;
      lo.thread = thread;
      lo.kind = op.kind;
      lo.what = describe(op, t.lane, iteration, tag) + " (refused: " + b + ")";
      lo.key = std::move(key);
      pushLog(std::move(lo));
      ++refusedLaunches_;
      if (r == CUDA_ERROR_INVALID_VALUE) return;  // as the program's semantics say
    }
    const char* name = nullptr;
    cu().cuGetErrorName(r, &name);
    divergence(-1, "iteration " + std::to_string(iteration) + ": " + call + " returned " + std::to_string(r) + " (" +
                       (name ? name : "?") + ") for " + describe(op, t.lane, iteration, tag) + ", which " + b +
                       (refused ? ": the driver refuses it (CUDA_ERROR_INVALID_VALUE, no effect)"
                                : ": a valid launch (CUDA_SUCCESS)"));
    return;  // not issued (an accepted refused launch: what runs was never issued)
  }
  if (!check(r, call, iteration, &op)) return;
  int id;
  Clock vc;
  {
    std::lock_guard<std::mutex> lk(mu_);
    vc = nextClock(t.lane, thread);
    commitLane(t.lane, vc);
    LogOp lo;
    lo.iteration = iteration;
    lo.tindex = op.tindex;
    lo.thread = thread;
    lo.kind = op.kind;
    lo.lane = t.lane;
    lo.stamp = vc[t.lane];
    lo.vc = vc;
    lo.effect = true;
    lo.demoted = op.demoted;
    lo.key = std::move(key);
    lo.kernelName = std::move(kernelName);
    lo.what = describe(op, t.lane, iteration, tag);
    id = pushLog(std::move(lo));
    lanes_[t.lane].effects.push_back(id);
    commitCells(acc, t.lane, vc[t.lane], id);
    applyModel(op, t.lane, kv, width);
    if (pageableD2H) join(hostVc_[thread], vc);  // the call returned after the copy completed
  }
  if (pageableD2H) {
    mark(thread, id);
    // Like loss.item(): the value is visible now and must equal the sequential model.
    const Buffer& b = buffers_[bufferOf(op.dst, t.lane)];
    for (int c = 0; c < op.cells; ++c) {
      uint64_t want, got = b.pageable[op.dst.cell + c];
      std::memcpy(&want, &b.model[(op.dst.cell + c) * 8], 8);
      if (want != got) {
        char buf[200];
        std::snprintf(buf, sizeof buf, ": host read 0x%" PRIx64 " but the program's semantics give 0x%" PRIx64, got,
                      want);
        divergence(id, "iteration " + std::to_string(iteration) + ": value copied to pageable memory by " +
                           log_[id].what + buf);
        break;
      }
    }
  }
}

// A one-shot query that said complete: the host now knows the work it covers
// has run, as after a sync (a marker the trace check holds graft to).
void Runner::queryAnsweredComplete(int thread, const Clock& covered, LogOp lo) {
  int id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    join(hostVc_[thread], covered);
    lo.vc = hostVc_[thread];
    id = pushLog(lo);
  }
  mark(thread, id);
}

void Runner::hostSync(const Op& op, int thread, int iteration) {
  ensureCtx(deviceOfSlot(op.slot), thread);
  Target t = target(op, thread);
  Clock covered{};
  bool knows = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    switch (op.kind) {
      case Kind::StreamSync:
        covered = lanes_[t.lane].vc;
        break;
      case Kind::EventSync:
      case Kind::Poll:
        knows = events_[op.event].recorded;
        covered = events_[op.event].vc;
        break;
      default:  // cuCtxSynchronize: the current context's streams
        for (const Lane& l : lanes_) {
          if (l.device == deviceOfSlot(op.slot)) join(covered, l.vc);
        }
        break;
    }
  }
  CUresult r = CUDA_SUCCESS;
  const char* call = "";
  switch (op.kind) {
    case Kind::StreamSync:
      call = "cuStreamSynchronize";
      r = t.api->cuStreamSynchronize(t.stream);
      break;
    case Kind::EventSync:
      call = "cuEventSynchronize";
      r = cu().cuEventSynchronize(events_[op.event].handle);
      break;
    case Kind::CtxSync:
      call = "cuCtxSynchronize";
      r = cu().cuCtxSynchronize();
      break;
    case Kind::Poll: {
      call = "cuEventQuery";
      int polls = 0;
      while ((r = cu().cuEventQuery(events_[op.event].handle)) == CUDA_ERROR_NOT_READY && polls < kPollBound) ++polls;
      if (r == CUDA_ERROR_NOT_READY) {
        divergence(-1, "iteration " + std::to_string(iteration) + ": poll never completed: cuEventQuery(event " +
                           std::to_string(op.event) + ") still CUDA_ERROR_NOT_READY after " +
                           std::to_string(kPollBound) + " polls (" + describe(op, t.lane, iteration, 0) + ")");
        std::lock_guard<std::mutex> lk(mu_);
        LogOp lo;
        lo.iteration = iteration;
        lo.kind = op.kind;
        lo.what = describe(op, t.lane, iteration, 0);
        pushLog(lo);
        return;
      }
      break;
    }
    default:
      return;
  }
  if (!check(r, call, iteration, &op)) return;
  int id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (knows) join(hostVc_[thread], covered);
    LogOp lo;
    lo.iteration = iteration;
    lo.tindex = op.tindex;
    lo.thread = thread;
    lo.kind = op.kind;
    lo.vc = hostVc_[thread];
    lo.what = describe(op, op.kind == Kind::StreamSync ? t.lane : -1, iteration, 0);
    id = pushLog(lo);
  }
  mark(thread, id);
}

void Runner::runIterations() {
  Rng pert(p_.seed * 0x2545f4914f6cdd1dull + 17);
  std::vector<std::string> notes;
  for (int it = 0; it < p_.iterations; ++it) {
    Buffer& src = buffers_[pageableSrc_];
    for (int c = 0; c < kCellsPerBuffer; ++c) src.pageable[c] = simMix64((p_.seed << 20) ^ (uint64_t(it) << 8) ^ c);
    if (p_.reloadPeriod && it > 0 && it % p_.reloadPeriod == 0) loadImage(1 - phase_, it);
    std::vector<Op> plan = planIteration(p_, it, pert, &notes);
    if (verbose_) {
      for (const std::string& n : notes) std::printf("  %s\n", n.c_str());
    }
    notes.clear();
    for (size_t i = 0; i < plan.size();) {
      if (!inHandoff(plan[i])) {
        issue(plan[i++], 0, it);
        continue;
      }
      size_t j = i;
      while (j < plan.size() && inHandoff(plan[j])) ++j;
      {
        std::lock_guard<std::mutex> lk(mu_);
        join(hostVc_[1], hostVc_[0]);
      }
      helper_->run([&, i, j] {
        for (size_t k = i; k < j; ++k) issue(plan[k], 1, it);
      });
      {
        std::lock_guard<std::mutex> lk(mu_);
        join(hostVc_[0], hostVc_[1]);
      }
      i = j;
    }
  }
}

void Runner::runConcurrent(long ops) {
  CUcontext c;
  cu().cuDevicePrimaryCtxRetain(&c, 0);
  cu().cuCtxSetCurrent(c);
  const int home = p_.numDevBuffers;
  Rng rng(p_.seed + 99);
  long issued = 0;
  for (int it = 0; issued < ops; ++it) {
    for (int j = 0; j < 6; ++j, ++issued) {
      Op op;
      op.slot = kConcurrentSlot;
      op.tindex = 1000 + j;
      op.viaPerThreadApi = j % 2;
      if (j < 3) {
        op.kind = Kind::Kernel;
        op.kernel = j % 2;
        op.dst = CellRef{Region::Dev, home, static_cast<int>(rng() % kCellsPerBuffer)};
        op.src = CellRef{Region::Dev, home, static_cast<int>(rng() % kCellsPerBuffer)};
        op.k = j + 1;
        op.uniqueTag = j == 0;
        op.tagBase = (1ull << 61) | static_cast<uint64_t>(j);
        const KernelSpec& k = p_.kernels[op.kernel];
        for (size_t i = 4; i < k.sizes.size(); ++i) op.extras.insert(op.extras.end(), k.sizes[i], 0x11);
      } else if (j == 3) {
        op.kind = Kind::Memset;
        op.elem = 4;
        op.cells = 2;
        op.value = static_cast<uint32_t>(it);
        op.dst = CellRef{Region::Dev, home, 32 + (it % 8) * 2};
      } else if (j == 4) {
        op.kind = Kind::Copy;
        op.dir = CopyDir::D2D;
        op.cells = 4;
        op.src = CellRef{Region::Dev, home, 0};
        op.dst = CellRef{Region::Dev, home, 50};
      } else if (it % 3 == 0) {
        op.kind = Kind::EventRecord;
        op.event = p_.numEvents;
        issue(op, 2, it);
        op.kind = Kind::Poll;
      } else {
        op.kind = Kind::StreamSync;
      }
      issue(op, 2, it);
    }
  }
}

void Runner::compareMemory(size_t b, const uint8_t* actual) {
  const Buffer& buf = buffers_[b];
  for (int c = 0; c < kCellsPerBuffer; ++c) {
    uint64_t want, got;
    std::memcpy(&want, &buf.model[c * 8], 8);
    std::memcpy(&got, actual + c * 8, 8);
    if (want == got) continue;
    const CellState& cs = buf.cells[c];
    char text[400];
    std::snprintf(text, sizeof text,
                  "data: final contents of %s cell %d (address 0x%" PRIx64 ") are 0x%" PRIx64
                  " but re-executing the issued program sequentially gives 0x%" PRIx64 "; last issued writer: %s",
                  buf.name.c_str(), c, buf.base + c * 8, got, want,
                  cs.writerLog >= 0 ? log_[cs.writerLog].what.c_str() : "(initial contents)");
    divergence(1 << 30, text);
    return;  // one report per buffer
  }
}

void Runner::finish() {
  if (p_.twoDevices) {
    Op sync1;
    sync1.kind = Kind::CtxSync;
    sync1.slot = kDev1LegacySlot;
    hostSync(sync1, 0, -1);
  }
  Op sync;
  sync.kind = Kind::CtxSync;
  hostSync(sync, 0, -1);
  for (size_t b = 0; b < buffers_.size(); ++b) {
    Buffer& buf = buffers_[b];
    std::vector<uint8_t> actual(kBufferBytes);
    if (buf.type == Buffer::Device) {
      if (!check(cu().cuMemcpyDtoH(actual.data(), buf.base, kBufferBytes), "cuMemcpyDtoH", -1, nullptr)) continue;
      std::lock_guard<std::mutex> lk(mu_);
      Clock vc = nextClock(0, 0);
      commitLane(0, vc);
      LogOp lo;
      lo.kind = Kind::Copy;
      lo.lane = 0;
      lo.stamp = vc[0];
      lo.vc = vc;
      lo.effect = true;
      lo.key = copyKey(reinterpret_cast<uint64_t>(actual.data()), buf.base, kBufferBytes, 1, 0, 0);
      lo.what = "final read-back of " + buf.name;
      lanes_[0].effects.push_back(pushLog(lo));
    } else {
      std::memcpy(actual.data(), reinterpret_cast<const void*>(buf.base), kBufferBytes);
    }
    if (static_cast<int>(b) == pageableSrc_) continue;  // host-written input
    compareMemory(b, actual.data());
  }
}

RunResult Runner::run() {
  setup();
  inLoop_ = true;
  std::thread concurrent;
  if (p_.threads) {
    long ops = std::max<long>(60, static_cast<long>(p_.iterations) * static_cast<long>(p_.tmpl.size()) / 4);
    concurrent = std::thread([this, ops] { runConcurrent(ops); });
  }
  runIterations();
  if (concurrent.joinable()) concurrent.join();
  helper_.reset();
  finish();
  inLoop_ = false;
  RunResult res;
  res.ops = loopOps_;
  res.demoted = demoted_;
  res.settings = settings_;
  res.refusedSettings = refusedSettings_;
  res.refusedLaunches = refusedLaunches_;
  std::vector<Divergence> traceDiv = checkTrace(p_, log_, lanes_, markers_, &res);
  res.divergences = std::move(divergences_);
  res.divergences.insert(res.divergences.end(), traceDiv.begin(), traceDiv.end());
  simCounters(&res.counters);
  return res;
}

}  // namespace

RunResult runOracle(const simtest::Driver& drv, const Program& p, bool verbose) {
  Runner r(drv, p, verbose);
  return r.run();
}

}  // namespace oracle
