// oracle_gen.cc - generates training-loop-shaped programs and their per-iteration
// perturbations for the oracle.
//
// Invariants: everything here is a pure function of the seed (one mt19937_64 per
// purpose, consumed in a fixed order); kernels are created through the sim API
// (not a driver call). Template ops name memory by CellRef, never by address.
#include <algorithm>
#include <cstring>
#include <sstream>

#include "oracle.h"

namespace oracle {

namespace {

struct Gen {
  Rng rng;
  explicit Gen(uint64_t seed) : rng(seed) {}
  int pick(int n) { return n <= 1 ? 0 : static_cast<int>(rng() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return static_cast<double>(rng() % 1000000) < p * 1e6; }
};

const char* familyName(SimKernelFamily f) {
  return f == SIM_KERNEL_LIBRARY ? "lib" : (f == SIM_KERNEL_FUNCTION ? "fn" : "opaque");
}

KernelSpec makeKernel(Gen& g, int index, int effect, uint64_t seed) {
  KernelSpec k;
  int fam = g.pick(100);
  k.family = fam < 60 ? SIM_KERNEL_LIBRARY : (fam < 85 ? SIM_KERNEL_FUNCTION : SIM_KERNEL_OPAQUE);
  k.effect = effect;
  std::string base = effect == 1 ? "sim_add_" : (effect == 2 ? "sim_mix_" : "k");
  k.name = base + std::to_string(index) + "_" + familyName(k.family) + "_s" + std::to_string(seed % 1000);
  k.sizes = effect ? std::vector<size_t>{8, 8, 8, 8} : std::vector<size_t>{8, 8};
  int extras = (effect && g.chance(0.5)) ? 0 : g.pick(4);
  static const size_t kExtraSizes[] = {1, 2, 4, 8, 16, 24};
  for (int i = 0; i < extras; ++i) k.sizes.push_back(kExtraSizes[g.pick(6)]);
  if (g.chance(0.05)) k.sizes.push_back(264);  // > 256 bytes of parameters
  // One kernel in seven has more parameters than graft's compact layout holds
  // (graph::kCompactParams): nine more with fixed bytes, decided and filled
  // without drawing from g, so every seed's program is otherwise as before.
  k.padFrom = k.sizes.size();
  if (index % 7 == 3)
    for (int i = 0; i < 9; ++i) k.sizes.push_back(kExtraSizes[(seed + uint64_t(i)) % 6]);
  int nconf = 2 + g.pick(2);
  static const unsigned kBlocks[] = {32, 64, 128, 256, 512, 1024};
  static const unsigned kShmem[] = {0, 0, 0, 1024, 49152};
  for (int i = 0; i < nconf; ++i) {
    KernelSpec::Config c{};
    c.grid[0] = 1u << g.pick(12);
    c.grid[1] = g.chance(0.2) ? 1 + g.pick(8) : 1;
    c.grid[2] = 1;
    c.block[0] = kBlocks[g.pick(6)];
    c.block[1] = c.block[2] = 1;
    c.shmem = kShmem[g.pick(5)];
    k.configs.push_back(c);
  }
  k.fn = simKernelCreate(k.name.c_str(), k.family, static_cast<unsigned>(k.sizes.size()), k.sizes.data(), nullptr);
  for (unsigned i = 0; i < k.sizes.size(); ++i) {
    size_t off = 0;
    simKernelParamLayout(k.fn, i, &off, nullptr);
    k.offsets.push_back(off);
  }
  k.bytes = simKernelParamBytes(k.fn);
  return k;
}

int homeBuffer(const Program& p, int slot) {
  if (deviceOfSlot(slot)) return p.numDevBuffers + 1;  // device 1's ops
  return slot >= 2 ? slot - 2 : p.numCreated + (slot == 0 ? 0 : 1);
}

int pickSlot(Gen& g, const Program& p) {
  int r = g.pick(100);
  if (r < 15) return 0;
  if (r < 30) return 1;
  return 2 + g.pick(p.numCreated);
}

CellRef homeCell(Gen& g, const Program& p, int slot, int span = 1) {
  return CellRef{Region::Dev, homeBuffer(p, slot), g.pick(kCellsPerBuffer - span + 1)};
}

CellRef anyDevCell(Gen& g, const Program& p, int span = 1) {
  return CellRef{Region::Dev, g.pick(p.numDevBuffers), g.pick(kCellsPerBuffer - span + 1)};
}

void fillExtras(Gen& g, const KernelSpec& k, Op* op) {
  size_t fixed = k.effect ? 4 : 2;
  op->extras.clear();
  for (size_t i = fixed; i < k.sizes.size(); ++i) {
    for (size_t j = 0; j < k.sizes[i]; ++j)
      op->extras.push_back(i < k.padFrom ? static_cast<uint8_t>(g.rng()) : static_cast<uint8_t>(i * 16 + j));
  }
}

Op makeKernelOp(Gen& g, const Program& p, int slot, int tindex) {
  Op op;
  op.kind = Kind::Kernel;
  op.tindex = tindex;
  op.slot = slot;
  op.viaPerThreadApi = g.chance(0.3);
  op.legacyByHandle = g.chance(0.5);
  op.kernel = g.pick(static_cast<int>(p.kernels.size()));
  const KernelSpec& k = p.kernels[op.kernel];
  op.config = g.chance(0.85) ? 0 : g.pick(static_cast<int>(k.configs.size()));
  int v = g.pick(100);
  op.variant = v < 70 ? 0 : (v < 80 ? 1 : (v < 95 ? 2 : 3));
  if (op.variant == 2) {
    CUlaunchAttribute a;
    std::memset(&a, 0, sizeof a);
    if (g.chance(0.5)) {
      a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      a.value.clusterDim.x = 1 + g.pick(2);
      a.value.clusterDim.y = 1;
      a.value.clusterDim.z = 1;
      op.attrs.push_back(a);
      std::memset(&a, 0, sizeof a);
    }
    if (g.chance(0.5)) {
      a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      a.value.programmaticStreamSerializationAllowed = 1;
      op.attrs.push_back(a);
      std::memset(&a, 0, sizeof a);
    }
    if (op.attrs.empty() || g.chance(0.3)) {
      a.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      a.value.priority = g.pick(3);
      op.attrs.push_back(a);
    }
  }
  if (k.effect) {
    op.dst = homeCell(g, p, slot);
    op.src = g.chance(0.75) ? homeCell(g, p, slot) : anyDevCell(g, p);
    op.k = g.rng();
    op.rngParam = g.chance(0.2);
  } else {
    op.dst = anyDevCell(g, p);
  }
  op.uniqueTag = g.chance(0.3);
  op.tagBase = (static_cast<uint64_t>(tindex + 1) << 20) | (p.seed & 0xfffff);
  fillExtras(g, k, &op);
  return op;
}

Op makeCopyOp(Gen& g, const Program& p, int slot, int tindex, CopyDir dir) {
  Op op;
  op.kind = Kind::Copy;
  op.tindex = tindex;
  op.slot = slot;
  op.viaPerThreadApi = g.chance(0.3);
  op.legacyByHandle = g.chance(0.5);
  op.dir = dir;
  int api = g.pick(100);
  op.copyApi = api < 60 ? 0 : (api < 85 ? 1 : 2);
  op.rows = op.copyApi == 2 ? 2 : 1;
  op.cells = op.rows > 1 ? 1 + g.pick(4) : 1 + g.pick(8);
  int span = (op.rows - 1) * 16 + op.cells;
  switch (dir) {
    case CopyDir::D2D:
      op.src = g.chance(0.6) ? homeCell(g, p, slot, span) : anyDevCell(g, p, span);
      op.dst = homeCell(g, p, slot, span);
      break;
    case CopyDir::H2D:
      op.src = CellRef{g.chance(0.6) ? Region::PinnedSrc : Region::PageableSrc, 0, g.pick(kCellsPerBuffer - span + 1)};
      op.dst = homeCell(g, p, slot, span);
      break;
    case CopyDir::D2H:
      op.src = g.chance(0.7) ? homeCell(g, p, slot, span) : anyDevCell(g, p, span);
      op.dst = CellRef{g.chance(0.6) ? Region::PinnedDst : Region::PageableDst, 0, g.pick(kCellsPerBuffer - span + 1)};
      break;
  }
  return op;
}

Op makeMemsetOp(Gen& g, const Program& p, int slot, int tindex) {
  Op op;
  op.kind = Kind::Memset;
  op.tindex = tindex;
  op.slot = slot;
  op.viaPerThreadApi = g.chance(0.3);
  op.legacyByHandle = g.chance(0.5);
  op.rows = g.chance(0.15) ? 2 : 1;
  op.elem = op.rows > 1 ? 4 : (1u << g.pick(3));
  op.cells = op.rows > 1 ? 1 + g.pick(4) : 1 + g.pick(8);
  op.value = static_cast<uint32_t>(g.rng());
  op.dst = homeCell(g, p, slot, (op.rows - 1) * 16 + op.cells);
  return op;
}

Op simpleOp(Kind kind, int slot, int tindex) {
  Op op;
  op.kind = kind;
  op.slot = slot;
  op.tindex = tindex;
  return op;
}

void makeTemplate(Gen& g, Program& p, int length) {
  std::vector<std::pair<int, int>> records;  // (event, slot)
  for (int i = 0; i < length; ++i) {
    int r = g.pick(1000);
    int slot = pickSlot(g, p);
    if (r < 520) {
      p.tmpl.push_back(makeKernelOp(g, p, slot, i));
    } else if (r < 590) {
      p.tmpl.push_back(makeCopyOp(g, p, slot, i, CopyDir::D2D));
    } else if (r < 650) {
      p.tmpl.push_back(makeMemsetOp(g, p, slot, i));
    } else if (r < 730) {
      Op op = simpleOp(Kind::EventRecord, slot, i);
      op.event = g.pick(p.numEvents);
      op.viaPerThreadApi = g.chance(0.3);
      records.emplace_back(op.event, slot);
      p.tmpl.push_back(op);
    } else if (r < 800) {
      Op op = simpleOp(Kind::StreamWait, slot, i);
      op.viaPerThreadApi = g.chance(0.3);
      if (!records.empty() && g.chance(0.95)) {
        auto [ev, from] = records[g.pick(static_cast<int>(records.size()))];
        op.event = ev;
        if (from == slot) op.slot = (slot + 1 + g.pick(p.numCreated + 1)) % (p.numCreated + 2);
      } else {
        op.event = g.pick(p.numEvents);
      }
      p.tmpl.push_back(op);
    } else if (r < 840) {
      p.tmpl.push_back(makeCopyOp(g, p, slot, i, CopyDir::H2D));
    } else if (r < 870) {
      p.tmpl.push_back(makeCopyOp(g, p, slot, i, CopyDir::D2H));
    } else if (r < 895) {
      Op op = simpleOp(Kind::HostFn, slot, i);
      op.hostId = p.numHostFns++;
      op.viaPerThreadApi = g.chance(0.3);
      p.tmpl.push_back(op);
    } else if (r < 920) {
      int q = g.pick(3);
      Op op = simpleOp(q == 0 ? Kind::StreamQuery : (q == 1 ? Kind::EventQuery : Kind::StreamQuery), slot, i);
      op.event = g.pick(p.numEvents);
      op.variant = q == 2;  // 1: cuStreamIsCapturing
      p.tmpl.push_back(op);
    } else if (r < 935) {
      Op op = simpleOp(Kind::AllocAsync, slot, i);
      op.cells = 1 + g.pick(16);
      op.value = static_cast<uint32_t>(g.rng());
      p.tmpl.push_back(op);
    } else if (r < 950 && p.graphSlot >= 0) {
      p.tmpl.push_back(simpleOp(Kind::GraphLaunch, p.graphSlot, i));
    } else if (r < 957) {
      Op op = simpleOp(g.chance(0.5) ? Kind::StreamSync : Kind::EventSync, slot, i);
      op.event = g.pick(p.numEvents);
      p.tmpl.push_back(op);
    } else {
      p.tmpl.push_back(makeKernelOp(g, p, slot, i));
    }
  }
  // The per-iteration synchronization at the usual place.
  int i = length;
  int slot = 2 + g.pick(p.numCreated);
  switch (p.iterSync) {
    case IterSync::None:
      break;
    case IterSync::StreamSync:
      p.tmpl.push_back(simpleOp(Kind::StreamSync, slot, i));
      break;
    case IterSync::CtxSync:
      p.tmpl.push_back(simpleOp(Kind::CtxSync, 0, i));
      break;
    case IterSync::EventSync:
    case IterSync::Poll: {
      Op rec = simpleOp(Kind::EventRecord, slot, i);
      rec.event = p.numEvents - 1;
      p.tmpl.push_back(rec);
      Op s = simpleOp(p.iterSync == IterSync::Poll ? Kind::Poll : Kind::EventSync, slot, i + 1);
      s.event = rec.event;
      p.tmpl.push_back(s);
      break;
    }
    case IterSync::PageableD2H: {
      Op op = makeCopyOp(g, p, slot, i, CopyDir::D2H);
      op.copyApi = 0;
      op.rows = 1;
      op.cells = 1;
      op.src = homeCell(g, p, slot);
      op.dst = CellRef{Region::PageableDst, 0, 63};
      p.tmpl.push_back(op);
      break;
    }
  }
}

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Kernel:
      return "kernel";
    case Kind::Copy:
      return "copy";
    case Kind::Memset:
      return "memset";
    case Kind::HostFn:
      return "host-fn";
    case Kind::EventRecord:
      return "record";
    case Kind::StreamWait:
      return "wait";
    case Kind::GraphLaunch:
      return "graph-launch";
    case Kind::AllocAsync:
      return "alloc-async";
    case Kind::StreamSync:
      return "stream-sync";
    case Kind::EventSync:
      return "event-sync";
    case Kind::CtxSync:
      return "ctx-sync";
    case Kind::Poll:
      return "poll";
    case Kind::StreamQuery:
      return "query";
    case Kind::EventQuery:
      return "event-query";
    case Kind::AllocFree:
      return "alloc-free";
    case Kind::TimingCheck:
      return "timing-check";
    case Kind::SetAttr:
      return "set-attribute";
  }
  return "?";
}

// A module/library kernel without memory effect: (pointer, tag, extras...), extras
// of at most 40 bytes (ops carry 48 bytes of extras; the runner takes what it needs).
KernelSpec makeReloadKernel(Gen& g, const std::string& name) {
  KernelSpec k;
  k.name = name;
  k.sizes = {8, 8};
  static const size_t kExtraSizes[] = {1, 2, 4, 8, 16};
  size_t total = 0;
  int n = 1 + g.pick(4);
  for (int i = 0; i < n; ++i) {
    size_t sz = kExtraSizes[g.pick(5)];
    if (total + sz > 40) break;
    total += sz;
    k.sizes.push_back(sz);
  }
  return k;
}

// The randomly enabled features, added to a finished base program with their own
// generator: with every feature off the program is exactly the base program.
void addFeatures(Program& p, uint64_t seed, unsigned features) {
  Gen g(seed * 0xd1b54a32d192ed03ull + 0x8cb92ba72f3d8dd7ull);
  bool dev1 = g.chance(0.35) && (features & kFeatureDev1);
  bool timing = g.chance(0.35) && (features & kFeatureTiming);
  bool reload = g.chance(0.3) && (features & kFeatureReload);
  int len = p.bodyLen;
  if (len < 4) return;
  std::vector<std::pair<int, std::vector<Op>>> inserts;  // (before template position, ops)
  if (dev1) {
    p.twoDevices = true;
    p.dev1Blocking = g.chance(0.5);
    int blocks = 1 + g.pick(3);
    for (int b = 0; b < blocks; ++b) {
      int pos = 1 + g.pick(len - 1);
      std::vector<Op> ops;
      // A device-1 stream waits for an event recorded on a device-0 stream.
      int ev = -1;
      for (int i = pos - 1; i >= 0 && ev < 0; --i) {
        if (p.tmpl[i].kind == Kind::EventRecord && p.tmpl[i].event < p.numEvents && g.chance(0.5)) ev = p.tmpl[i].event;
      }
      if (ev < 0) {
        Op rec = simpleOp(Kind::EventRecord, g.chance(0.3) ? 0 : 2 + g.pick(p.numCreated), -1);
        rec.event = ev = g.pick(p.numEvents);
        ops.push_back(rec);
      }
      int waitSlot = g.chance(0.5) ? kDev1LegacySlot : kDev1StreamSlot;
      Op w = simpleOp(Kind::StreamWait, waitSlot, -1);
      w.event = ev;
      w.viaPerThreadApi = g.chance(0.3);
      ops.push_back(w);
      int n = 2 + g.pick(5);
      int lastSlot = waitSlot;
      for (int i = 0; i < n; ++i) {
        int slot = g.chance(0.5) ? kDev1LegacySlot : kDev1StreamSlot;
        int r = g.pick(10);
        Op op = r < 6 ? makeKernelOp(g, p, slot, -1)
                      : (r < 8 ? makeMemsetOp(g, p, slot, -1) : makeCopyOp(g, p, slot, -1, CopyDir::D2D));
        if (op.kind == Kind::Kernel) {
          op.tagBase = (1ull << 60) | (static_cast<uint64_t>(b) << 40) | (static_cast<uint64_t>(i) << 32) |
                       (p.seed & 0xfffff);
        }
        ops.push_back(op);
        lastSlot = slot;
      }
      if (g.chance(0.7)) {  // and a device-0 stream waits for device 1's work
        Op rec = simpleOp(Kind::EventRecord, lastSlot, -1);
        rec.event = p.dev1Event();
        ops.push_back(rec);
        Op w0 = simpleOp(Kind::StreamWait, g.chance(0.3) ? 0 : 2 + g.pick(p.numCreated), -1);
        w0.event = p.dev1Event();
        ops.push_back(w0);
      }
      inserts.emplace_back(pos, std::move(ops));
    }
  }
  if (timing) {
    p.numTimingPairs = 1 + g.pick(2);
    for (int t = 0; t < p.numTimingPairs; ++t) {
      int a = g.pick(len - 2);
      int b = std::min(len - 1, a + 2 + g.pick(30));
      int slot = g.chance(0.3) ? 0 : 2 + g.pick(p.numCreated);
      Op begin = simpleOp(Kind::EventRecord, slot, -1);
      begin.event = p.timingEvent(2 * t);
      begin.viaPerThreadApi = g.chance(0.3);
      Op end = simpleOp(Kind::EventRecord, slot, -1);
      end.event = p.timingEvent(2 * t + 1);
      Op chk = simpleOp(Kind::TimingCheck, slot, -1);
      chk.event = end.event;
      chk.timingBegin = begin.event;
      inserts.emplace_back(a, std::vector<Op>{begin});
      inserts.emplace_back(b, std::vector<Op>{end, chk});
    }
  }
  if (reload) {
    p.reloadPeriod = 2 + g.pick(6);
    p.reloadLibrary = g.chance(0.4);
    int n = 1 + g.pick(3);
    std::string sfx = "_s" + std::to_string(p.seed % 1000);
    for (int r = 0; r < n; ++r) {
      KernelSpec a = makeReloadKernel(g, "ldA" + std::to_string(r) + sfx);
      a.configs = p.kernels[g.pick(p.baseKernels)].configs;
      KernelSpec b = makeReloadKernel(g, "ldB" + std::to_string(r) + "_other" + sfx);
      if (b.sizes == a.sizes) b.sizes.push_back(2);
      b.configs = a.configs;
      p.kernels.push_back(a);
      p.reloadAlt.push_back(b);
    }
    bool any = false;
    for (int i = 0; i < len; ++i) {
      Op& op = p.tmpl[i];
      if (op.kind != Kind::Kernel || !(g.chance(0.25) || (!any && i + 1 == len))) continue;
      op.kernel = p.baseKernels + g.pick(n);
      op.config = 0;
      op.dst = anyDevCell(g, p);
      op.extras.resize(48);
      for (auto& x : op.extras) x = static_cast<uint8_t>(g.rng());
      any = true;
    }
    if (!any) {  // no kernel in the body: add one
      Op op = makeKernelOp(g, p, 2 + g.pick(p.numCreated), -1);
      op.kernel = p.baseKernels + g.pick(n);
      op.config = 0;
      op.extras.resize(48);
      for (auto& x : op.extras) x = static_cast<uint8_t>(g.rng());
      op.tagBase = (1ull << 59) | (p.seed & 0xfffff);
      inserts.emplace_back(len - 1, std::vector<Op>{op});
    }
  }
  // Insert from the back; an inserted block takes the template index of the op it
  // precedes (so it stays in the body and in or out of a handoff with it).
  std::stable_sort(inserts.begin(), inserts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (auto& [pos, ops] : inserts) {
    for (Op& op : ops) op.tindex = p.tmpl[pos].tindex;
    p.tmpl.insert(p.tmpl.begin() + pos, ops.begin(), ops.end());
  }
}

// A kernel op of `kernel` (config `config`), for a program that has none of it.
Op kernelOpOf(Gen& g, const Program& p, int kernel, int config, int slot, uint64_t tagBase) {
  Op op = makeKernelOp(g, p, slot, -1);
  op.kernel = kernel;
  op.config = config;
  const KernelSpec& k = p.kernels[kernel];
  if (k.effect) {
    op.dst = homeCell(g, p, slot);
    op.src = g.chance(0.75) ? homeCell(g, p, slot) : anyDevCell(g, p);
  } else {
    op.dst = anyDevCell(g, p);
    op.src = CellRef{};
  }
  if (kernel >= p.baseKernels) {  // a reloaded kernel: bytes for either image's layout
    op.extras.resize(48);
    for (auto& x : op.extras) x = static_cast<uint8_t>(g.rng());
  } else {
    fillExtras(g, k, &op);
  }
  op.tagBase = tagBase;
  return op;
}

// Kernel attributes set between launches, as libraries do (feature "settings"),
// added to the finished program with a generator of its own (so a seed's program
// without it is the program it was before). For 1-3 kernels (not kernels 0 and 1
// when a concurrent thread launches those; module/library kernels that are
// reloaded too):
//  - the dynamic shared memory allowance: launch configs asking for more than
//    the default 49152 bytes (some kernel ops switched to them, or one added),
//    set before such launches to what they ask for (the same value every
//    iteration: the value it already has from the second iteration on), lowered
//    after some of them, and raised and lowered by ops whose value changes every
//    few iterations (now and then to a value the driver refuses); a launch asking
//    for more than the allowance in effect at its call is refused
//    (CUDA_ERROR_INVALID_VALUE) and has no effect;
//  - the required cluster width (0, 1, 2, 4; now and then 16, refused), set
//    before launches or every few iterations; a sim_add kernel adds its launch's
//    width to its result.
// A kernel's values change within every iteration, or (steady) every few
// iterations at most; some are also set once before the loop (setupOps), and a
// quarter of the settings read the value back. Through cuFuncSetAttribute on the
// kernel's handle or, for library kernels, cuKernelSetAttribute or
// cuFuncSetAttribute on cuKernelGetFunction's function.
// The ops stay in the iteration (template positions that repeat); each takes the
// template index of the op it precedes (after: follows), so it stays in or out of a
// handoff with it (the helper thread runs while the main thread waits: the host
// calls of one iteration are never concurrent).
void addSettings(Program& p, uint64_t seed, unsigned features) {
  Gen g(seed * 0xa0761d6478bd642full + 0xe7037ed1a0b428dbull);
  if (!g.chance(0.5) || !(features & kFeatureSettings) || p.bodyLen < 4) return;
  std::vector<int> cands;
  for (int k = p.threads ? 2 : 0; k < static_cast<int>(p.kernels.size()); ++k) cands.push_back(k);
  if (cands.empty()) return;
  std::shuffle(cands.begin(), cands.end(), g.rng);
  int n = 1 + g.pick(std::min<int>(3, static_cast<int>(cands.size())));
  std::vector<int> tuned(cands.begin(), cands.begin() + n);
  // Most programs tune a sim_add kernel, whose results show the cluster width.
  bool hasAdd = false;
  for (int k : tuned) hasAdd |= p.kernels[k].effect == 1;
  if (!hasAdd && g.chance(0.7)) {
    for (int k : cands) {
      if (p.kernels[k].effect == 1) {
        tuned.push_back(k);
        break;
      }
    }
  }
  struct Insert {
    int pos;     // index in p.tmpl before which it goes
    bool after;  // placed after tmpl[pos - 1]: takes that op's template index
    std::vector<Op> ops;
  };
  std::vector<Insert> inserts;
  static const int kHigh[] = {65536, 98304, 131072, kSimMaxSharedMem};
  static const int kAllowances[] = {0, 1024, 49152, 65536, 98304, 131072, kSimMaxSharedMem};
  static const int kWidths[] = {0, 1, 2, 4};
  int added = 0;
  for (int K : tuned) {
    const bool reloaded = K >= p.baseKernels;
    const bool library = reloaded ? p.reloadLibrary : p.kernels[K].family == SIM_KERNEL_LIBRARY;
    bool shmem = g.chance(0.75);
    bool cluster = g.chance(p.kernels[K].effect == 1 ? 0.8 : 0.35);
    if (!shmem && !cluster) shmem = true;
    // A steady kernel's values change every few iterations at most (graft can
    // build graphs across its settings and replay them in between); the others'
    // change within every iteration too.
    const bool steady = g.chance(0.4);
    auto period = [&]() { return steady ? 3 + g.pick(6) : 1 + g.pick(4); };
    auto setting = [&](Attr attr, std::vector<int> values, int period) {
      Op op;
      op.kind = Kind::SetAttr;
      op.slot = 0;
      op.kernel = K;
      op.attr = attr;
      op.values = std::move(values);
      op.period = period;
      op.setApi = library ? g.pick(3) : 0;
      op.dev1First = p.twoDevices && g.chance(0.5);
      op.readBack = g.chance(0.25);
      return op;
    };
    auto newLaunch = [&](int config) {
      return kernelOpOf(g, p, K, config, 2 + g.pick(p.numCreated),
                        (1ull << 58) | (static_cast<uint64_t>(added++) << 32) | (p.seed & 0xfffff));
    };
    std::vector<int> at;  // template positions of K's launches
    for (size_t i = 0; i < p.tmpl.size(); ++i) {
      if (p.tmpl[i].kind == Kind::Kernel && p.tmpl[i].kernel == K && p.tmpl[i].tindex < p.bodyLen) {
        at.push_back(static_cast<int>(i));
      }
    }
    int first = 0, nh = 0, maxAsk = 0;  // K's configs above the default allowance
    if (shmem) {
      std::vector<KernelSpec::Config>& configs = p.kernels[K].configs;
      first = static_cast<int>(configs.size());
      nh = 1 + g.pick(2);
      for (int i = 0; i < nh; ++i) {
        KernelSpec::Config c = configs[0];
        c.shmem = static_cast<unsigned>(kHigh[g.pick(4)]);
        configs.push_back(c);
        if (reloaded) p.reloadAlt[K - p.baseKernels].configs.push_back(c);
      }
      // Half the kernels are only ever raised to what their launches ask for or
      // more (no launch refused: graft can keep them in graphs), the others are
      // lowered too.
      const bool raiseOnly = g.chance(0.5);
      for (int i = first; i < first + nh; ++i) maxAsk = std::max(maxAsk, static_cast<int>(configs[i].shmem));
      std::vector<int> raised;  // the allowances a raise-only kernel gets
      for (int v : kAllowances) {
        if (v >= maxAsk) raised.push_back(v);
      }
      std::vector<int> high;  // launches asking for more than the default
      for (int i : at) {
        if (g.chance(0.5)) {
          p.tmpl[i].config = first + g.pick(nh);
          high.push_back(i);
        }
      }
      if (high.empty()) high.push_back(-1);  // one more launch, at a random place in the body
      for (int h : high) {
        Op launch = h < 0 ? newLaunch(first + g.pick(nh)) : p.tmpl[h];
        int asks = static_cast<int>(configs[launch.config].shmem);
        std::vector<Op> before, after;
        if (g.chance(0.6)) {  // set to what the launch asks for, right before it (every iteration)
          int v = steady ? maxAsk : g.chance(0.8) ? (raiseOnly ? maxAsk : asks) : kSimMaxSharedMem;
          before.push_back(setting(Attr::MaxDynamicShared, {v}, 0));
        }
        if (!raiseOnly && !steady && g.chance(0.35)) {  // and lowered again right after it
          after.push_back(setting(Attr::MaxDynamicShared, {kAllowances[g.pick(3)]}, 0));
        }
        if (h < 0) {
          before.push_back(launch);
          before.insert(before.end(), after.begin(), after.end());
          inserts.push_back({g.pick(p.bodyLen), false, before});
        } else {
          if (!before.empty()) inserts.push_back({h, false, before});
          if (!after.empty()) inserts.push_back({h + 1, true, after});
        }
      }
      int np = g.pick(steady ? 2 : 3);  // changed every few iterations
      for (int i = 0; i < np; ++i) {
        std::vector<int> values;
        int nv = 2 + g.pick(2);
        for (int j = 0; j < nv; ++j) {
          values.push_back(raiseOnly ? raised[g.pick(static_cast<int>(raised.size()))] : kAllowances[g.pick(7)]);
        }
        if (g.chance(0.08)) values[g.pick(nv)] = g.chance(0.5) ? kSimMaxSharedMem + 1 : -1;  // refused
        inserts.push_back({g.pick(p.bodyLen), false, {setting(Attr::MaxDynamicShared, values, period())}});
      }
    }
    if (cluster) {
      const int steadyWidth = kWidths[g.pick(4)];
      for (int i : at) {
        if (g.chance(0.3)) {
          inserts.push_back({i, false, {setting(Attr::ClusterWidth, {steady ? steadyWidth : kWidths[g.pick(4)]}, 0)}});
        }
      }
      int np = steady ? g.pick(2) : 1 + g.pick(2);
      for (int i = 0; i < np; ++i) {
        std::vector<int> values;
        int nv = 2 + g.pick(2);
        for (int j = 0; j < nv; ++j) values.push_back(kWidths[g.pick(4)]);
        if (g.chance(0.08)) values[g.pick(nv)] = 16;  // refused
        inserts.push_back({g.pick(p.bodyLen), false, {setting(Attr::ClusterWidth, values, period())}});
      }
      if (at.empty() && g.chance(0.7)) inserts.push_back({g.pick(p.bodyLen), false, {newLaunch(0)}});  // shows it
    }
    // Set once before the loop too, before the program captures its graph (whose
    // kernel nodes keep the width they were captured under; graph launches are
    // not checked against the allowance, so its launches asking for more than a
    // later allowance still run).
    if (g.chance(0.4)) {
      int allowance = -1;
      if (shmem && g.chance(0.7)) {
        allowance = g.chance(0.7) ? maxAsk : kSimMaxSharedMem;
        p.setupOps.push_back(setting(Attr::MaxDynamicShared, {allowance}, 0));
      }
      if (cluster && g.chance(0.8)) p.setupOps.push_back(setting(Attr::ClusterWidth, {1 << g.pick(3)}, 0));
      for (Op& op : p.graphOps) {
        if (allowance >= 0 && op.kind == Kind::Kernel && op.kernel == K && g.chance(0.5)) {
          op.config = first + g.pick(nh);
        }
      }
    }
    p.tunedKernels.push_back(K);
  }
  // Template indices first (from the template as it was), then insert from the back.
  for (Insert& in : inserts) {
    int pos = in.pos;
    int tindex = in.after || pos >= static_cast<int>(p.tmpl.size()) ? p.tmpl[pos - 1].tindex : p.tmpl[pos].tindex;
    for (Op& op : in.ops) {
      op.tindex = tindex;
      if (op.kind == Kind::SetAttr) ++p.numSettingOps;
    }
  }
  std::stable_sort(inserts.begin(), inserts.end(), [](const Insert& x, const Insert& y) { return x.pos > y.pos; });
  for (Insert& in : inserts) p.tmpl.insert(p.tmpl.begin() + in.pos, in.ops.begin(), in.ops.end());
}

}  // namespace

Program generateProgram(uint64_t seed, long targetOps, bool threads, bool inject, unsigned features) {
  Gen g(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
  Program p;
  p.seed = seed;
  p.threads = threads;
  p.inject = inject;
  p.numCreated = 1 + g.pick(3);
  for (int i = 0; i < p.numCreated; ++i) p.createdBlocking.push_back(g.chance(0.5));
  p.numEvents = 2 + g.pick(4);
  p.numDevBuffers = p.numCreated + 2;
  static const unsigned kSteps[] = {0, 1, 2, 3, 3, 5, 8};
  p.schedSteps = kSteps[g.pick(7)];
  int nk = 3 + g.pick(6);
  for (int i = 0; i < nk; ++i) p.kernels.push_back(makeKernel(g, i, i < 2 ? i + 1 : g.pick(3), seed));
  p.baseKernels = nk;
  static const double kRates[] = {0, 0, 0.05, 0.15, 0.4};
  p.perturbRate = kRates[g.pick(5)];
  static const IterSync kSyncs[] = {IterSync::None,      IterSync::None, IterSync::StreamSync, IterSync::CtxSync,
                                    IterSync::EventSync, IterSync::Poll, IterSync::PageableD2H};
  p.iterSync = kSyncs[g.pick(7)];
  if (!inject && g.chance(0.3)) {
    p.graphSlot = 2 + g.pick(p.numCreated);
    p.graphMode = static_cast<CUstreamCaptureMode>(g.pick(3));
    int n = 2 + g.pick(3);
    for (int i = 0; i < n; ++i) {
      Op op;
      if (i == 1) {
        op.kind = Kind::Memset;
        op.elem = 4;
        op.cells = 2;
        op.value = static_cast<uint32_t>(g.rng());
        op.dst = CellRef{Region::Graph, 0, 8 * i};
      } else {
        op = makeKernelOp(g, p, p.graphSlot, -1);
        op.kernel = g.pick(2);  // an effect kernel
        op.config = 0;
        op.variant = 0;
        op.attrs.clear();
        op.uniqueTag = false;
        op.rngParam = false;
        op.tagBase = (1ull << 62) | (1ull << 61) | static_cast<uint64_t>(i);
        fillExtras(g, p.kernels[op.kernel], &op);
        op.dst = CellRef{Region::Graph, 0, 8 * i};
        op.src = CellRef{Region::Graph, 0, 8 * i + (i > 0 ? -8 : 1)};
      }
      op.slot = p.graphSlot;
      p.graphOps.push_back(op);
    }
  }
  long maxLen = std::max(20L, targetOps / 8);  // at least ~8 iterations
  int length = 20 + g.pick(381);
  if (g.chance(0.3)) length = 20 + g.pick(60);
  length = static_cast<int>(std::min<long>(length, maxLen));
  p.bodyLen = length;
  makeTemplate(g, p, length);
  if (g.chance(0.25) && length >= 6) {
    p.handoffBegin = g.pick(length / 2);
    p.handoffEnd = p.handoffBegin + 1 + g.pick(length / 3);
  }
  addFeatures(p, seed, features);
  addSettings(p, seed, features);
  p.iterations = static_cast<int>(std::max<long>(1, targetOps / static_cast<long>(p.tmpl.size() + 1)));
  return p;
}

std::vector<Op> planIteration(const Program& p, int iteration, Rng& rng, std::vector<std::string>* notes) {
  Gen g(rng());
  std::vector<Op> plan = p.tmpl;
  if (!g.chance(p.perturbRate) || plan.empty()) return plan;
  int n = 1 + g.pick(2);
  int bodyLen = p.bodyLen;
  auto randomKernel = [&]() -> int {
    std::vector<int> idx;
    for (size_t i = 0; i < plan.size(); ++i) {
      if (plan[i].kind == Kind::Kernel) idx.push_back(static_cast<int>(i));
    }
    return idx.empty() ? -1 : idx[g.pick(static_cast<int>(idx.size()))];
  };
  auto note = [&](const std::string& s) {
    if (notes) notes->push_back("iteration " + std::to_string(iteration) + ": " + s);
  };
  for (int j = 0; j < n; ++j) {
    int kind = g.pick(11);
    int ki = randomKernel();
    switch (kind) {
      case 0:
        if (ki >= 0) {
          Op& op = plan[ki];
          if (p.kernels[op.kernel].effect) {
            op.k ^= g.rng() | 1;
          } else if (!op.extras.empty()) {
            op.extras[g.pick(static_cast<int>(op.extras.size()))] ^= 0x5a;
          } else {
            op.dst.cell = (op.dst.cell + 1) % kCellsPerBuffer;
          }
          note("scalar parameter changed at template op " + std::to_string(op.tindex));
        }
        break;
      case 1:
        if (ki >= 0 && p.kernels[plan[ki].kernel].effect) {
          plan[ki].src = anyDevCell(g, p);
          note("pointer parameter changed at template op " + std::to_string(plan[ki].tindex));
        }
        break;
      case 2:
        if (ki >= 0) {
          Op& op = plan[ki];
          op.config = (op.config + 1) % static_cast<int>(p.kernels[op.kernel].configs.size());
          note("launch shape changed at template op " + std::to_string(op.tindex));
        }
        break;
      case 3:
        if (ki >= 0) {
          Op& op = plan[ki];
          for (size_t k = 0; k < p.kernels.size(); ++k) {
            if (static_cast<int>(k) != op.kernel && p.kernels[k].sizes == p.kernels[op.kernel].sizes &&
                p.kernels[k].effect != 0 && p.kernels[op.kernel].effect != 0) {
              op.kernel = static_cast<int>(k);
              op.config = 0;
              note("kernel swapped at template op " + std::to_string(op.tindex));
              break;
            }
          }
        }
        break;
      case 4: {
        int pos = g.pick(static_cast<int>(plan.size()) + 1);
        Op op = makeKernelOp(g, p, pickSlot(g, p), -1);
        op.uniqueTag = true;
        op.tagBase = (1ull << 62) | (static_cast<uint64_t>(iteration) << 24) | static_cast<uint64_t>(j);
        plan.insert(plan.begin() + pos, op);
        note("extra kernel inserted at position " + std::to_string(pos));
        break;
      }
      case 5: {
        int pos = g.pick(bodyLen);
        if (pos < static_cast<int>(plan.size())) {
          note(std::string("op missing: ") + kindName(plan[pos].kind) + " at template op " +
               std::to_string(plan[pos].tindex));
          plan.erase(plan.begin() + pos);
        }
        break;
      }
      case 6: {
        int pos = g.pick(static_cast<int>(plan.size()) + 1);
        int s = g.pick(4);
        Op op = simpleOp(s == 0 ? Kind::StreamSync : (s == 1 ? Kind::CtxSync : (s == 2 ? Kind::EventSync : Kind::Poll)),
                         pickSlot(g, p), -1);
        op.event = g.pick(p.numEvents);
        plan.insert(plan.begin() + pos, op);
        note(std::string("unusual ") + kindName(op.kind) + " at position " + std::to_string(pos));
        break;
      }
      case 7: {
        size_t before = plan.size();
        plan.erase(std::remove_if(plan.begin(), plan.end(), [&](const Op& op) { return op.tindex >= p.bodyLen; }),
                   plan.end());
        if (plan.size() != before) note("usual synchronization skipped");
        break;
      }
      case 8: {
        int pos = g.pick(static_cast<int>(plan.size()) + 1);
        Op op = simpleOp(g.chance(0.5) ? Kind::StreamQuery : Kind::EventQuery, pickSlot(g, p), -1);
        op.event = g.pick(p.numEvents);
        op.variant = g.chance(0.3);
        plan.insert(plan.begin() + pos, op);
        note("extra query at position " + std::to_string(pos));
        break;
      }
      case 9: {
        int pos = g.pick(static_cast<int>(plan.size()) + 1);
        plan.insert(plan.begin() + pos, simpleOp(Kind::AllocFree, 0, -1));
        note("cuMemAlloc/cuMemFree at position " + std::to_string(pos));
        break;
      }
      default: {
        int pos = g.pick(static_cast<int>(plan.size()) + 1);
        Op op = makeMemsetOp(g, p, pickSlot(g, p), -1);
        plan.insert(plan.begin() + pos, op);
        note("extra memset at position " + std::to_string(pos));
        break;
      }
    }
  }
  return plan;
}

std::string Program::summary() const {
  static const char* kSyncNames[] = {"none", "stream-sync", "ctx-sync", "event-sync", "poll", "pageable-D2H"};
  std::ostringstream s;
  s << "seed " << seed << ": " << tmpl.size() << " template ops x " << iterations << " iterations, " << numCreated
    << " created stream(s) (";
  for (int i = 0; i < numCreated; ++i) s << (i ? "," : "") << (createdBlocking[i] ? "blocking" : "non-blocking");
  s << "), " << numEvents << " events, " << kernels.size() << " kernels, perturbation rate " << perturbRate
    << ", iteration sync " << kSyncNames[static_cast<int>(iterSync)] << ", scheduler steps " << schedSteps;
  if (handoffBegin >= 0) s << ", handoff [" << handoffBegin << "," << handoffEnd << ")";
  if (graphSlot >= 0) s << ", program graph on slot " << graphSlot << " (" << graphOps.size() << " ops)";
  if (threads) s << ", concurrent thread";
  if (inject) s << ", failure injection";
  if (twoDevices) s << ", device-1 blocks (" << (dev1Blocking ? "blocking" : "non-blocking") << " stream)";
  if (numTimingPairs) s << ", " << numTimingPairs << " timing-event pair(s)";
  if (reloadPeriod) {
    s << ", " << reloadAlt.size() << " " << (reloadLibrary ? "library" : "module") << " kernel(s) reloaded every "
      << reloadPeriod << " iterations";
  }
  if (!tunedKernels.empty()) {
    s << ", " << numSettingOps << " attribute setting(s)";
    if (!setupOps.empty()) s << " (and " << setupOps.size() << " before the loop)";
    s << " on kernel(s)";
    for (size_t i = 0; i < tunedKernels.size(); ++i) s << (i ? "," : " ") << tunedKernels[i];
  }
  return s.str();
}

std::string Program::listing() const {
  std::ostringstream s;
  auto cell = [](const CellRef& c) {
    static const char* kRegions[] = {"dev",          "scratch",      "pinned-src",       "pinned-dst", "pinned-scratch",
                                     "pageable-src", "pageable-dst", "pageable-scratch", "graph"};
    return std::string(kRegions[static_cast<int>(c.region)]) + std::to_string(c.buffer) + "[" + std::to_string(c.cell) +
           "]";
  };
  std::vector<std::pair<std::string, const Op*>> ops;
  for (const Op& op : setupOps) ops.emplace_back("before the loop", &op);
  for (const Op& op : graphOps) ops.emplace_back("program graph", &op);
  for (size_t i = 0; i < tmpl.size(); ++i)
    ops.emplace_back("[" + std::to_string(i) + "] t" + std::to_string(tmpl[i].tindex), &tmpl[i]);
  for (const auto& [where, opp] : ops) {
    const Op& op = *opp;
    s << "  " << where << " " << kindName(op.kind) << " slot " << op.slot;
    switch (op.kind) {
      case Kind::Kernel: {
        const KernelSpec& k = kernels[op.kernel];
        const KernelSpec::Config& c = k.configs[op.config];
        s << " kernel " << op.kernel << " (" << k.name << ") config " << op.config << " (grid " << c.grid[0] << ","
          << c.grid[1] << " block " << c.block[0] << " shmem " << c.shmem << ") variant " << op.variant;
        if (k.effect) s << " " << cell(op.dst) << " <- " << cell(op.src);
        break;
      }
      case Kind::Copy:
      case Kind::Memset:
        s << " " << op.rows << "x" << op.cells << " cells to " << cell(op.dst);
        if (op.kind == Kind::Copy) s << " from " << cell(op.src);
        break;
      case Kind::EventRecord:
      case Kind::StreamWait:
      case Kind::EventSync:
      case Kind::Poll:
      case Kind::EventQuery:
        s << " event " << op.event;
        break;
      case Kind::SetAttr:
        s << " kernel " << op.kernel << (op.attr == Attr::MaxDynamicShared ? " allowance" : " cluster width") << " = ";
        for (size_t j = 0; j < op.values.size(); ++j) s << (j ? "," : "") << op.values[j];
        if (op.period) s << " (each for " << op.period << " iterations)";
        s << " api " << op.setApi << (op.readBack ? " read back" : "");
        break;
      default:
        break;
    }
    s << "\n";
  }
  return s.str();
}

}  // namespace oracle
