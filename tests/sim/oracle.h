// oracle.h - the equivalence oracle: generated training-loop-shaped CUDA programs,
// the issue log, the happens-before model and the checks (see sim_oracle.cc).
//
// Invariants:
//  - A Program is a pure function of (seed, options); the operations it issues,
//    with their exact content, are a pure function of the Program: they never
//    depend on the schedule, on query results or on an interposer.
//  - Every issued effect (kernel, copy, memset, host function) is logged with its
//    canonical content key (the same bytes the simulator's trace yields) and the
//    vector clock the program established for it: Clock[l] = the number of ops on
//    lane l that CUDA guarantees to complete before it (stream order, event waits,
//    legacy-stream implicit synchronization, host synchronization).
//  - Generated programs are race-free under that clock: an op whose memory access
//    would race is "demoted" to the issuing lane's private scratch memory, so the
//    final memory equals a sequential interpretation of the log.
//  - Kernel attributes the program sets (feature "settings": the dynamic shared
//    memory allowance, the required cluster width) are program state, changed only
//    by host calls of the main thread or of the helper it hands off to (never at the
//    same time), on kernels the concurrent thread never launches: what a launch gets
//    (refused when it asks for more dynamic shared memory than the allowance in
//    effect at its call; the width in effect at its call, which a sim_add kernel adds
//    to its result) is a pure function of the program too.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "sim_api.h"
#include "sim_driver_loader.h"

namespace oracle {

constexpr int kMaxLanes = 10;  // up to 7 device-0 lanes + 2 device-1 lanes
using Clock = std::array<uint32_t, kMaxLanes>;

inline void join(Clock& a, const Clock& b) {
  for (int i = 0; i < kMaxLanes; ++i) a[i] = a[i] > b[i] ? a[i] : b[i];
}

using Rng = std::mt19937_64;

// ---------------------------------------------------------------- program

enum class Kind : uint8_t {
  Kernel,
  Copy,
  Memset,
  HostFn,  // effects
  EventRecord,
  StreamWait,
  GraphLaunch,  // stream ops (a graph launch expands to effects)
  AllocAsync,   // cuMemAllocAsync + memset + cuMemFreeAsync
  StreamSync,
  EventSync,
  CtxSync,
  Poll,  // host synchronization
  StreamQuery,
  EventQuery,
  AllocFree,    // other calls
  TimingCheck,  // cuEventSynchronize(end) + cuEventElapsedTime(begin, end) >= ops between
  SetAttr,      // cuFuncSetAttribute / cuKernelSetAttribute (feature "settings")
};

// Kernel attributes a SetAttr op sets, and the simulator's rules for them
// (tests/sim/fake_cuda_api.cc: setFunctionAttribute, buildLaunch).
enum class Attr : uint8_t { MaxDynamicShared, ClusterWidth };
constexpr int kDefaultSharedAllowance = 49152;  // a kernel's allowance until the program sets it
constexpr int kSimMaxSharedMem = 227 * 1024;    // kMaxSharedMem: the most an allowance (or a launch) may be
constexpr int kSimMaxClusterWidth = 8;          // the widest required cluster width the simulator accepts
inline bool attrValueValid(Attr a, int v) {
  return v >= 0 && v <= (a == Attr::MaxDynamicShared ? kSimMaxSharedMem : kSimMaxClusterWidth);
}

enum class CopyDir : uint8_t { D2D, H2D, D2H };

// Memory an op refers to. Buffers are laid out by the Runner in a fixed order;
// `scratch` regions are resolved to the issuing lane's private buffers.
enum class Region : uint8_t {
  Dev,
  Scratch,
  PinnedSrc,
  PinnedDst,
  PinnedScratch,
  PageableSrc,
  PageableDst,
  PageableScratch,
  Graph
};

struct CellRef {
  Region region = Region::Dev;
  int buffer = 0;  // index within the region (Dev: home buffers)
  int cell = 0;    // 8-byte cell index within the buffer
};

constexpr int kCellsPerBuffer = 64;

struct KernelSpec {
  std::string name;
  CUfunction fn = nullptr;
  SimKernelFamily family = SIM_KERNEL_LIBRARY;
  int effect = 0;  // 0 none, 1 sim_add, 2 sim_mix
  std::vector<size_t> sizes, offsets;
  size_t padFrom = 0;  // parameters from here on hold fixed bytes (see makeKernel)
  size_t bytes = 0;
  struct Config {
    unsigned grid[3], block[3], shmem;
  };
  std::vector<Config> configs;
};

struct Op {
  Kind kind = Kind::Kernel;
  int tindex = -1;               // template position; -1 for perturbation extras
  int slot = 0;                  // 0 legacy, 1 per-thread default stream, 2.. created streams
  bool viaPerThreadApi = false;  // issue through the per-thread table (handle named explicitly)
  bool legacyByHandle = false;   // name the legacy stream CU_STREAM_LEGACY instead of NULL
  // kernel
  int kernel = 0;
  int config = 0;
  int variant = 0;  // 0 kernelParams, 1 extra buffer, 2 cuLaunchKernelEx, 3 cooperative
  std::vector<CUlaunchAttribute> attrs;
  CellRef dst, src;  // effect kernels: *dst = f(*src, k); others: dst is a pointer param
  uint64_t k = 0;
  bool uniqueTag = false;  // tag changes every iteration
  bool rngParam = false;   // k changes every iteration (like an RNG offset)
  uint64_t tagBase = 0;
  std::vector<uint8_t> extras;  // bytes of the parameters after the fixed ones
  // copy / memset
  CopyDir dir = CopyDir::D2D;
  int cells = 1;
  int rows = 1;     // 2-D copies/memsets: rows of `cells` cells with a pitch
  int copyApi = 0;  // 0 typed (HtoD/DtoH/DtoD), 1 cuMemcpyAsync, 2 cuMemcpy2DAsync
  unsigned elem = 4;
  uint32_t value = 0;
  // host function / events / program graph
  int hostId = 0;
  int event = 0;
  int timingBegin = -1;  // TimingCheck: the begin event (op.event is the end event)
  bool demoted = false;
  // SetAttr: on `kernel`, set `attr` to values[(iteration / period) % values.size()]
  // (period 0: values[0] every iteration). setApi: 0 cuFuncSetAttribute on the
  // kernel's handle, 1 cuKernelSetAttribute (library kernels), 2 cuFuncSetAttribute on
  // cuKernelGetFunction's function (library kernels). With two devices the value is
  // set on both (device 1 first when dev1First), so the simulator's one value per
  // kernel is also what a real driver's per-device/per-context values would give.
  Attr attr = Attr::MaxDynamicShared;
  int setApi = 0;
  bool readBack = false;  // and read it back (cuFuncGetAttribute / cuKernelGetAttribute): the model's value
  bool dev1First = false;
  int period = 0;
  std::vector<int> values;
  int settingValue(int iteration) const {
    if (values.empty()) return 0;
    return period ? values[static_cast<size_t>(iteration / period) % values.size()] : values[0];
  }
};

// Device 1 (feature "two devices"): ops on these slots run with device 1's primary
// context current (the runner calls cuCtxSetCurrent when the device changes).
constexpr int kDev1LegacySlot = 50;  // NULL / CU_STREAM_LEGACY with device 1 current
constexpr int kDev1StreamSlot = 51;  // a stream created in device 1's primary context
inline int deviceOfSlot(int slot) { return slot == kDev1LegacySlot || slot == kDev1StreamSlot ? 1 : 0; }

enum class IterSync : uint8_t { None, StreamSync, CtxSync, EventSync, Poll, PageableD2H };

struct Program {
  uint64_t seed = 0;
  bool threads = false;  // a concurrent second thread on its own stream
  bool inject = false;   // failure injection into graft's graph APIs (no program graphs)
  int numCreated = 1;
  std::vector<bool> createdBlocking;
  int numEvents = 2;
  int numDevBuffers = 2;
  int numHostFns = 0;
  std::vector<KernelSpec> kernels;
  std::vector<Op> tmpl;
  int bodyLen = 0;                         // tmpl[bodyLen..] is the per-iteration synchronization
  int handoffBegin = -1, handoffEnd = -1;  // template range issued by a helper thread
  IterSync iterSync = IterSync::None;
  double perturbRate = 0;
  int iterations = 1;
  unsigned schedSteps = 3;
  // A graph the program captures itself (slot, ops); launched by GraphLaunch ops.
  int graphSlot = -1;
  std::vector<Op> graphOps;
  CUstreamCaptureMode graphMode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  // Randomly enabled features (drawn from their own generator; the base program
  // above does not depend on them):
  //  - twoDevices: blocks of ops on device 1 (kDev1*Slot), cross-device event waits
  //    both ways; event numEvents+1 is device 1's.
  //  - numTimingPairs: events numEvents+2.. are timing events (recorded in pairs
  //    around runs of ops, checked by TimingCheck).
  //  - reloadPeriod: kernels[baseKernels..] come from a module/library image A;
  //    every reloadPeriod iterations the runner unloads the current image and loads
  //    the other (reloadAlt: same handles, other names and parameter layouts).
  bool twoDevices = false;
  bool dev1Blocking = false;
  int numTimingPairs = 0;
  int reloadPeriod = 0;
  bool reloadLibrary = false;  // cuLibraryLoadData instead of cuModuleLoadData
  int baseKernels = 0;
  std::vector<KernelSpec> reloadAlt;  // image B, parallel to kernels[baseKernels..]
  //  - settings: SetAttr ops in the template on `tunedKernels` (never on kernels 0
  //    and 1 with a concurrent thread, which launches those), and launch configs
  //    asking for more than the default dynamic shared memory allowance.
  //    Some also set once before the loop (setupOps, issued before the program
  //    captures its own graph, which may then ask for more than the default).
  std::vector<int> tunedKernels;
  int numSettingOps = 0;
  std::vector<Op> setupOps;
  int dev1Event() const { return numEvents + 1; }
  int timingEvent(int i) const { return numEvents + 2 + i; }
  int totalEvents() const { return numEvents + 2 + 2 * numTimingPairs; }
  std::string summary() const;
  std::string listing() const;  // the template, one op a line (sim_oracle --print-program)
};

// Feature bits for generateProgram's `features` (which may be enabled at random).
enum : unsigned { kFeatureDev1 = 1, kFeatureTiming = 2, kFeatureReload = 4, kFeatureSettings = 8, kFeatureAll = 15 };
Program generateProgram(uint64_t seed, long targetOps, bool threads, bool inject, unsigned features = kFeatureAll);

// Ops of one iteration: the template with this iteration's perturbations.
std::vector<Op> planIteration(const Program& p, int iteration, Rng& rng, std::vector<std::string>* notes);

// ---------------------------------------------------------------- issue log

struct LogOp {
  int id = 0;
  int iteration = -1;  // -1 setup / final
  int tindex = -1;
  int thread = 0;
  Kind kind = Kind::Kernel;
  int lane = -1;       // -1: not a stream op
  uint32_t stamp = 0;  // position on the lane (1-based), 0: not a stream op
  bool effect = false;
  bool demoted = false;
  int marker = -1;  // host syncs: marker id
  Clock vc{};
  std::string key;   // canonical effect content
  std::string what;  // short description for messages
  std::string kernelName;  // kernels: the name that must execute
};

struct Marker {
  int id;
  int logId;
  Clock vc;
  std::string label;
};

struct Lane {
  std::string name;
  bool legacy = false;
  bool blocking = false;
  int device = 0;
  CUstream handle = nullptr;
  uint64_t simId = 0;
  uint32_t count = 0;
  Clock vc{};
  std::vector<int> effects;  // log ids of effect ops in stamp order
};

// Canonical content keys (identical for an issued op and its executed effect).
std::string kernelKey(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                      const CUlaunchAttribute* attrs, unsigned numAttrs, const uint8_t* params, size_t bytes);
std::string copyKey(uint64_t dst, uint64_t src, size_t width, size_t height, size_t dstPitch, size_t srcPitch);
std::string memsetKey(uint64_t dst, unsigned elem, uint32_t value, size_t width, size_t height, size_t pitch);
std::string hostKey(CUhostFn fn, void* userData);
std::string effectKey(const SimEffect& e);

struct Divergence {
  int order;  // sort key: the log id (or trace index) where it shows
  std::string text;
};

struct RunResult {
  long ops = 0;
  std::vector<Divergence> divergences;
  SimCounters counters{};
  size_t graphEffects = 0, eagerEffects = 0;
  long demoted = 0;  // effects redirected to scratch memory to stay race-free
  long settings = 0, refusedSettings = 0;  // attribute settings issued, of them with a value the driver refuses
  long refusedLaunches = 0;                // launches above their kernel's allowance (refused, no effect)
};

// Generates, issues and checks one program; the driver must already be loaded.
RunResult runOracle(const simtest::Driver& drv, const Program& p, bool verbose);

}  // namespace oracle
