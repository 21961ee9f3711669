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
  return s.str();
}

}  // namespace oracle
