// OpEncoder's in-place comparison of a launch with the op a replay expects
// (compareLaunch, the fast lane's; kernel() with setExpected, the general
// path's) must decide exactly as encoding the launch and comparing bytes
// would: same shape and value -> Equal, same shape -> ValueDiffers with the
// launch's value bytes, else Differs. A differential test over random pairs of
// launches that differ in one field at a time (no driver behind it).
#include "graph/op_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace graft::graph {
namespace {

using core::OpDesc;

// A kernel with a known layout: `sizes` parameters in order, naturally aligned.
KernelInfo makeKernel(uint64_t handle, std::vector<uint32_t> sizes) {
  KernelInfo k;
  k.handle = handle;
  k.layoutKnown = true;
  k.paramsOrdered = true;
  uint32_t end = 0;
  for (uint32_t s : sizes) {
    const uint32_t align = s >= 8 ? 8 : s;
    end = (end + align - 1) / align * align;
    k.offsets.push_back(end);
    k.sizes.push_back(s);
    end += s;
  }
  k.paramBytes = end;
  if (sizes.size() <= kCompactParams) {
    k.compactCount = uint8_t(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      k.compactOffsets[i] = uint16_t(k.offsets[i]);
      k.compactSizes[i] = uint16_t(k.sizes[i]);
    }
  }
  return k;
}

// One launch, owning its parameter storage.
struct Launch {
  KernelInfo* info;
  CUcontext ctx;
  core::StreamKey stream;
  hook::ApiId api = hook::ApiId::k_cuLaunchKernelEx_11060;
  unsigned grid[3], block[3], shmem;
  std::vector<CUlaunchAttribute> attrs;
  std::vector<std::vector<uint8_t>> params;  // one buffer per parameter
  bool bufferForm = false;                   // `extra` with one packed buffer
  std::vector<uint8_t> packed;
  size_t packedSize = 0;
  std::vector<void*> pointers;
  std::vector<void*> extra;

  LaunchArgs args() {
    pointers.clear();
    for (auto& p : params) pointers.push_back(p.data());
    LaunchArgs a{reinterpret_cast<CUfunction>(info->handle), {grid[0], grid[1], grid[2]},
                 {block[0], block[1], block[2]}, shmem, attrs.data(), unsigned(attrs.size()),
                 nullptr, nullptr};
    if (bufferForm) {
      packed.assign(info->paramBytes, 0);
      for (size_t i = 0; i < params.size(); ++i)
        std::memcpy(packed.data() + info->offsets[i], params[i].data(), info->sizes[i]);
      packedSize = packed.size();
      extra = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, &packedSize,
               CU_LAUNCH_PARAM_END};
      a.extra = extra.data();
    } else {
      a.kernelParams = pointers.data();
    }
    return a;
  }
};

// An encoded op with its own copy of the bytes (the encoder's scratch is reused).
struct Owned {
  OpDesc op;
  std::vector<uint8_t> shape, value;
  explicit Owned(const OpDesc& d) : op(d), shape(d.shape.data, d.shape.data + d.shape.size),
                                    value(d.value.data, d.value.data + d.value.size) {
    op.shape = {shape.data(), uint32_t(shape.size())};
    op.value = {value.data(), uint32_t(value.size())};
  }
};

TEST(OpCodec, InPlaceComparisonDecidesAsEncodingDoes) {
  std::mt19937_64 rng(12345);
  auto pick = [&](uint64_t n) { return rng() % n; };
  std::vector<KernelInfo> kernels = {
      makeKernel(0x1000, {8, 8, 4}),                               // compact
      makeKernel(0x2000, {8, 8, 8, 8, 4, 8, 16, 1, 8, 8, 2, 8}),   // more than kCompactParams
      makeKernel(0x3000, {}),                                      // no parameters
      makeKernel(0x4000, {8, 24, 8})};
  KernelInfo unknown;  // layout unknown: always Differs (runs eagerly)
  unknown.handle = 0x5000;
  unknown.eager = core::EagerCause::UnknownParams;
  const CUcontext contexts[] = {reinterpret_cast<CUcontext>(0xc0), reinterpret_cast<CUcontext>(0xc1)};

  auto randomLaunch = [&]() {
    Launch l;
    l.info = &kernels[pick(kernels.size())];
    l.ctx = contexts[pick(2)];
    l.stream = 0x100 + pick(2);
    for (int d = 0; d < 3; ++d) {
      l.grid[d] = d == 0 ? 1 + unsigned(pick(4)) : 1;
      l.block[d] = d == 0 ? 128 : 1;
    }
    l.shmem = pick(4) == 0 ? 1024 : 0;
    if (pick(6) == 0) {
      CUlaunchAttribute at;
      std::memset(&at, 0x5a, sizeof at);  // bytes normalizing must clear
      at.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      at.value.priority = int(pick(2));
      l.attrs.push_back(at);
    }
    l.bufferForm = l.info->paramBytes > 0 && pick(6) == 0;  // (an empty buffer runs eagerly)
    for (uint32_t s : l.info->sizes) {
      std::vector<uint8_t> p(s);
      for (auto& b : p) b = uint8_t(pick(3));  // often equal, sometimes not
      l.params.push_back(p);
    }
    return l;
  };
  // `b` is `a` with one thing changed (or nothing).
  auto mutate = [&](Launch b) {
    switch (pick(12)) {
      case 0: b.grid[pick(3)] += 1; break;
      case 1: b.block[pick(3)] += 32; break;
      case 2: b.shmem += 16; break;
      case 3: b.ctx = b.ctx == contexts[0] ? contexts[1] : contexts[0]; break;
      case 4: b.info = &kernels[pick(kernels.size())]; break;
      case 5:
        if (!b.params.empty()) {
          auto& p = b.params[pick(b.params.size())];
          p[pick(p.size())] ^= 1;
        }
        break;
      case 6:
        if (!b.attrs.empty()) {
          b.attrs[0].value.priority ^= 1;
        } else {
          CUlaunchAttribute at;
          std::memset(&at, 0, sizeof at);
          at.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
          b.attrs.push_back(at);
        }
        break;
      case 7: b.bufferForm = !b.bufferForm; break;
      case 8: b.info = &unknown; break;
      default: break;  // unchanged: Equal
    }
    // Another kernel: its own parameters, of its own sizes (a program passes storage
    // of each parameter's size; a smaller one would be read past its end).
    bool ownSizes = b.params.size() == b.info->sizes.size();
    for (size_t i = 0; ownSizes && i < b.params.size(); ++i) ownSizes = b.params[i].size() == b.info->sizes[i];
    if (!ownSizes) {
      b.params.clear();
      for (uint32_t s : b.info->sizes) b.params.emplace_back(s, uint8_t(1));
    }
    return b;
  };

  int counts[3] = {};
  for (int trial = 0; trial < 20000; ++trial) {
    OpEncoder encoder;
    Launch a = randomLaunch();
    if (a.info->eager != core::EagerCause::None) continue;
    LaunchArgs aa = a.args();
    const Owned recorded(encoder.kernel(a.api, a.stream, a.ctx, *a.info, aa));
    ASSERT_EQ(recorded.op.kind, core::OpKind::Kernel) << core::toString(recorded.op.cause);

    Launch b = mutate(a);
    LaunchArgs ba = b.args();
    // What encoding says.
    const Owned encoded(encoder.kernel(b.api, b.stream, b.ctx, *b.info, ba));
    OpEncoder::Sameness want = OpEncoder::Sameness::Differs;
    if (encoded.op.kind == core::OpKind::Kernel && core::sameShape(recorded.op, encoded.op))
      want = encoded.value == recorded.value ? OpEncoder::Sameness::Equal : OpEncoder::Sameness::ValueDiffers;

    // The fast lane's answer.
    core::Bytes value;
    const OpEncoder::Sameness got = encoder.compareLaunch(recorded.op, b.ctx, *b.info, ba, &value);
    ASSERT_EQ(int(got), int(want)) << "trial " << trial;
    if (got != OpEncoder::Sameness::Differs) {
      ASSERT_EQ(value.size, encoded.value.size());
      // (No parameters: no bytes to compare, and memcmp must not be given null.)
      ASSERT_TRUE(value.size == 0 || std::memcmp(value.data, encoded.value.data(), value.size) == 0)
          << "trial " << trial;
    }
    if (got == OpEncoder::Sameness::Equal) {
      EXPECT_EQ(value.data, recorded.op.value.data);  // borrowed
    }
    ++counts[int(got)];

    // The general path with the expected op set: the same op as encoding.
    encoder.setExpected(&recorded.op);
    const Owned viaExpected(encoder.kernel(b.api, b.stream, b.ctx, *b.info, ba));
    encoder.setExpected(nullptr);
    EXPECT_EQ(viaExpected.op.kind, encoded.op.kind);
    EXPECT_EQ(viaExpected.op.shapeHash, encoded.op.shapeHash) << "trial " << trial;
    EXPECT_EQ(viaExpected.shape, encoded.shape) << "trial " << trial;
    EXPECT_EQ(viaExpected.value, encoded.value) << "trial " << trial;
  }
  // Every answer occurred often enough to have been tested.
  EXPECT_GT(counts[0], 1000);
  EXPECT_GT(counts[1], 500);
  EXPECT_GT(counts[2], 1000);
}

}  // namespace
}  // namespace graft::graph

namespace graft::graph {
namespace {

// Which event records and waits graft may hold inside a graph: records only
// of events it saw created untimed; waits also on timing events. Records of
// and waits on interprocess events (another process may wait, or record
// again, as soon as the call returns) and on events graft did not see created
// (opened from another process) run eagerly at their position, with reasons.
TEST(OpCodec, EventOpsHeldOnlyForPrivateEventsGraftSawCreated) {
  const auto kCtx = reinterpret_cast<CUcontext>(0x7000);
  OpEncoder enc;
  const auto untimed = reinterpret_cast<CUevent>(0x1000);
  const auto timing = reinterpret_cast<CUevent>(0x2000);
  const auto shared = reinterpret_cast<CUevent>(0x3000);
  const auto unseen = reinterpret_cast<CUevent>(0x4000);
  enc.noteEventCreated(untimed, CU_EVENT_DISABLE_TIMING, kCtx);
  enc.noteEventCreated(timing, CU_EVENT_DEFAULT, kCtx);
  enc.noteEventCreated(shared, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS, kCtx);
  auto record = [&](CUevent e) {
    return enc.eventRecord(hook::ApiId::k_cuEventRecord_2000, core::StreamKey(0x5000), nullptr, e, 0, kCtx);
  };
  auto wait = [&](CUevent e) {
    return enc.eventWait(hook::ApiId::k_cuStreamWaitEvent_3020, core::StreamKey(0x5000), nullptr, e, 0);
  };
  EXPECT_EQ(record(untimed).kind, core::OpKind::EventRecord);
  EXPECT_EQ(wait(untimed).kind, core::OpKind::EventWait);
  EXPECT_EQ(record(timing).kind, core::OpKind::Boundary);
  EXPECT_EQ(record(timing).cause, core::EagerCause::TimingEvent);
  EXPECT_EQ(wait(timing).kind, core::OpKind::EventWait);
  EXPECT_EQ(record(shared).kind, core::OpKind::Boundary);
  EXPECT_EQ(record(shared).cause, core::EagerCause::InterprocessEvent);
  EXPECT_EQ(wait(shared).kind, core::OpKind::Boundary);
  EXPECT_EQ(wait(shared).cause, core::EagerCause::InterprocessEvent);
  EXPECT_EQ(record(unseen).cause, core::EagerCause::UnseenEvent);
  EXPECT_EQ(wait(unseen).kind, core::OpKind::Boundary);
  EXPECT_EQ(wait(unseen).cause, core::EagerCause::UnseenEvent);

  // A handle value reused by the driver takes the new event's kind.
  enc.noteEventDestroyed(shared);
  EXPECT_EQ(wait(shared).cause, core::EagerCause::UnseenEvent);
  enc.noteEventCreated(shared, CU_EVENT_DISABLE_TIMING, kCtx);
  EXPECT_EQ(record(shared).kind, core::OpKind::EventRecord);
  enc.noteEventDestroyed(untimed);
  enc.noteEventCreated(untimed, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS, kCtx);
  EXPECT_EQ(record(untimed).cause, core::EagerCause::InterprocessEvent);
}

// A record may be held only on a stream of the event's own context (the
// context current when it was created): elsewhere the driver refuses it, so
// it goes to the driver, with the reason an eager event has if it has one.
TEST(OpCodec, RecordsHeldOnlyInTheEventsContext) {
  const auto ctxA = reinterpret_cast<CUcontext>(0x7000);
  const auto ctxB = reinterpret_cast<CUcontext>(0x8000);
  OpEncoder enc;
  const auto untimed = reinterpret_cast<CUevent>(0x1000);
  const auto timing = reinterpret_cast<CUevent>(0x2000);
  const auto unseen = reinterpret_cast<CUevent>(0x4000);
  enc.noteEventCreated(untimed, CU_EVENT_DISABLE_TIMING, ctxA);
  enc.noteEventCreated(timing, CU_EVENT_DEFAULT, ctxA);
  auto record = [&](CUevent e, CUcontext streamCtx) {
    return enc.eventRecord(hook::ApiId::k_cuEventRecord_2000, core::StreamKey(0x5000), nullptr, e, 0, streamCtx);
  };
  EXPECT_EQ(record(untimed, ctxA).kind, core::OpKind::EventRecord);
  EXPECT_EQ(record(untimed, ctxB).kind, core::OpKind::Boundary);
  EXPECT_EQ(record(untimed, ctxB).cause, core::EagerCause::DriverChecks);
  EXPECT_EQ(record(untimed, nullptr).cause, core::EagerCause::DriverChecks) << "a stream the driver does not know";
  EXPECT_EQ(record(timing, ctxB).cause, core::EagerCause::TimingEvent);
  EXPECT_EQ(record(unseen, ctxA).cause, core::EagerCause::UnseenEvent);
  // A green context's stream (its own context ctxB, made from ctxA) records
  // ctxA's events, as the driver does; another context's stream does not.
  const auto ctxC = reinterpret_cast<CUcontext>(0x9000);
  auto recordOnGreen = [&](CUevent e, CUcontext streamCtx, CUcontext regular) {
    return enc.eventRecord(hook::ApiId::k_cuEventRecord_2000, core::StreamKey(0x5000), nullptr, e, 0, streamCtx,
                           regular);
  };
  EXPECT_EQ(recordOnGreen(untimed, ctxB, ctxA).kind, core::OpKind::EventRecord);
  EXPECT_EQ(recordOnGreen(untimed, ctxB, ctxC).cause, core::EagerCause::DriverChecks);
  EXPECT_EQ(recordOnGreen(untimed, ctxB, ctxB).cause, core::EagerCause::DriverChecks);
  EXPECT_EQ(recordOnGreen(untimed, nullptr, nullptr).cause, core::EagerCause::DriverChecks);
  // Waits may name another context's event (the driver takes them).
  EXPECT_EQ(enc.eventWait(hook::ApiId::k_cuStreamWaitEvent_3020, core::StreamKey(0x5000), nullptr, untimed, 0).kind,
            core::OpKind::EventWait);
}

}  // namespace
}  // namespace graft::graph
