// OpCodec: turns driver-call arguments into core::OpDesc (shape + value bytes)
// and back into driver calls (eager re-issue, capture, patch).
//
// Shape bytes hold everything a replay must match exactly; value bytes hold
// what a replay may patch (kernel parameter bytes; copy and memset pointers
// and values). Padding is always zeroed so equal ops have equal bytes.
//
// Threading: an encoder writes into its own scratch buffer and is used under
// the engine lock. Encoding never allocates; decoding helpers may call the
// driver (issue) but never allocate in steady state.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/op.h"
#include "graph/kernel_registry.h"
#include "hook/driver_api.h"

namespace graft::graph {

inline constexpr unsigned kMaxLaunchAttrs = 16;

struct KernelShape {
  uint64_t func;
  uint64_t ctx;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t sharedMem;
  uint32_t paramBytes;
  uint8_t paramMode;  // kParamsArray or kParamsBuffer
  uint8_t numAttrs;
  uint8_t pad[6];
  // followed by numAttrs CUlaunchAttribute, normalized
};
inline constexpr uint8_t kParamsArray = 0;   // kernelParams: one pointer per parameter
inline constexpr uint8_t kParamsBuffer = 1;  // extra: CU_LAUNCH_PARAM_BUFFER_POINTER

struct CopyShape {
  uint64_t ctx;
  uint64_t bytes;
};
struct CopyValue {
  uint64_t dst;
  uint64_t src;
};
struct SetShape {
  uint64_t ctx;
  uint64_t width;   // elements per row
  uint64_t height;  // rows (1 for 1-D)
  uint64_t pitch;   // bytes (0 for 1-D)
  uint32_t elementSize;
  uint32_t pad;
};
struct SetValue {
  uint64_t dst;
  uint32_t value;
  uint32_t pad;
};
struct EventShape {
  uint32_t flags;
  uint32_t pad;
  // The context current at the call when the stream is a default stream (the
  // NULL stream means that context's default stream), else 0.
  uint64_t ctx;
};

// Launch configuration as the driver gave it, before encoding.
struct LaunchArgs {
  CUfunction func;
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedMem;
  const CUlaunchAttribute* attrs;
  unsigned numAttrs;
  void** kernelParams;
  void** extra;
};

class OpEncoder {
 public:
  OpEncoder();
  // Each returns a view into this encoder's scratch; valid until the next call.
  const core::OpDesc& kernel(hook::ApiId api, core::StreamKey stream, CUcontext ctx,
                             KernelInfo& info, const LaunchArgs& args);
  const core::OpDesc& memcpy(hook::ApiId api, core::StreamKey stream, CUcontext ctx,
                             CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  const core::OpDesc& memset(hook::ApiId api, core::StreamKey stream, CUcontext ctx,
                             CUdeviceptr dst, size_t pitch, unsigned value, unsigned elementSize,
                             size_t width, size_t height);
  // A record or wait that must stay eager comes back as a boundary (see
  // noteEventCreated).
  // `streamCtx` (records): the context of the stream a record names (null:
  // unknown), which must be the event's; or `streamRegularCtx`, for a green
  // context's stream the primary context it was made from, whose events the
  // driver records there too (null or streamCtx: none other).
  const core::OpDesc& eventRecord(hook::ApiId api, core::StreamKey stream, CUcontext ctx, CUevent event,
                                  unsigned flags, CUcontext streamCtx, CUcontext streamRegularCtx = nullptr);
  const core::OpDesc& eventWait(hook::ApiId api, core::StreamKey stream, CUcontext ctx, CUevent event,
                                unsigned flags);
  // The events the program created, by kind; which of their records and
  // waits a graph may hold:
  //   untimed (CU_EVENT_DISABLE_TIMING): records and waits;
  //   timing: waits only. A record stays eager at its position: inside a
  //     graph it would be recorded again after the graph, and
  //     cuEventElapsedTime would measure nothing;
  //   interprocess (CU_EVENT_INTERPROCESS): neither. Another process may
  //     wait on a record as soon as the call returns, or record again as soon
  //     as a wait call returns (told through a pipe or a socket, which graft
  //     cannot see), so both must reach the driver at their position;
  //   not seen created (opened with cuIpcOpenEventHandle, or created before
  //     graft started): neither, for the same reasons.
  // `ctx`: the context current at its creation, the event's. A record on a
  // stream of another context stays eager: the driver's to refuse
  // (eventRecord's streamCtx; tests/sim/sim_review_hook.cc, event-other-context).
  void noteEventCreated(CUevent event, unsigned flags, CUcontext ctx);
  void noteEventDestroyed(CUevent event) {
    events_.erase(reinterpret_cast<uint64_t>(event));
    if (!captured_records_.empty()) captured_records_.erase(reinterpret_cast<uint64_t>(event));
  }
  // A record of `event` (inCapture: made while the program captured). A wait
  // on an event whose last record was captured is the driver's to judge (it
  // refuses some), so it stays eager (tests/gpu/traps_driver2.cu,
  // captured_event_wait).
  void noteEventRecord(CUevent event, bool inCapture) {
    if (inCapture) captured_records_.insert(reinterpret_cast<uint64_t>(event));
    else if (!captured_records_.empty()) captured_records_.erase(reinterpret_cast<uint64_t>(event));
  }

  // An op issued eagerly in sequence (never graphed).
  const core::OpDesc& boundary(hook::ApiId api, core::StreamKey stream, core::EagerCause cause);

  // A launch compared in place with `expected`, a recorded kernel op of the
  // same api and stream: is it that op (Equal), that op with other parameter
  // values (ValueDiffers: *value views them, in this encoder's scratch until
  // the next call), or another op (Differs, also for a launch that must run
  // eagerly)? Decides exactly as kernel() followed by a comparison of the
  // encoded bytes would, without encoding. Counts nothing.
  enum class Sameness : uint8_t { Differs, ValueDiffers, Equal };
  Sameness compareLaunch(const core::OpDesc& expected, CUcontext ctx, KernelInfo& info,
                         const LaunchArgs& args, core::Bytes* value);

  // The op a replay expects next (Engine::expectedNext), or nullptr; the
  // caller resets it to nullptr before `*expected` ends. A kernel() launch
  // equal to it comes back as a view of its bytes (no copy, no hashing);
  // those bytes must stay unchanged until the op is consumed, which the
  // engine guarantees for the op it expects.
  void setExpected(const core::OpDesc* expected) { expected_ = expected; }

 private:
  const core::OpDesc& finish(core::OpKind kind, hook::ApiId api, core::StreamKey stream,
                             uint64_t event, size_t shapeSize, size_t valueSize);
  // A launch's shape bytes: *ks, then its normalized attributes written into
  // the scratch after it; *buffer: the `extra` form's parameter buffer.
  // Returns why the launch must run eagerly, or EagerCause::None.
  core::EagerCause describeLaunch(CUcontext ctx, KernelInfo& info, const LaunchArgs& args,
                                  KernelShape* ks, const void** buffer);
  Sameness compareDescribed(const core::OpDesc& expected, const KernelShape& ks,
                            const KernelInfo& info, const LaunchArgs& args, const void* buffer,
                            core::Bytes* value);
  void writeKernelValue(const KernelInfo& info, const LaunchArgs& args, const void* buffer, size_t valueSize);
  core::HotVector<uint8_t> shape_;
  core::HotVector<uint8_t> value_;
  core::OpDesc op_;
  const core::OpDesc* expected_ = nullptr;
  enum class EventKind : uint8_t { Untimed, Timing, Interprocess };
  // Why a record (or a wait) of `event` must stay eager; None if a graph may hold it.
  // Why an op on `event` stays eager (None: it may be held). A record also
  // needs `streamCtx` or `streamRegularCtx` to be the event's context.
  core::EagerCause eventOpEagerCause(CUevent event, bool record, CUcontext streamCtx = nullptr,
                                     CUcontext streamRegularCtx = nullptr) const;
  struct EventInfo {
    EventKind kind;
    uint64_t ctx;  // the context current at its creation
  };
  std::unordered_map<uint64_t, EventInfo> events_;
  std::unordered_set<uint64_t> captured_records_;  // events whose last record the program captured
};

// Views of an encoded op's bytes.
inline const KernelShape& kernelShapeOf(const core::OpDesc& op) {
  return *reinterpret_cast<const KernelShape*>(op.shape.data);
}
std::span<const CUlaunchAttribute> kernelAttrsOf(const core::OpDesc& op);
CopyShape copyShapeOf(const core::OpDesc& op);
CopyValue copyValueOf(const core::OpDesc& op);
SetShape setShapeOf(const core::OpDesc& op);
SetValue setValueOf(const core::OpDesc& op);
EventShape eventShapeOf(const core::OpDesc& op);

// Issues a recorded graphable op on `stream` (the op's own stream, or a capture
// stream), through the same driver function the program used. `paramPointers`
// is scratch of at least the kernel's parameter count. Returns the driver status.
// A kernel the driver refuses for asking more dynamic shared memory than its
// kernel allows now (lowered since the program's call) is launched again under
// the allowance it asks for, outside a capture (see op_codec.cc).
CUresult issueOp(const core::OpDesc& op, CUstream stream, const KernelRegistry& kernels,
                 std::vector<void*>& paramPointers);
// issueOp without that second try.
CUresult issueOpOnce(const core::OpDesc& op, CUstream stream, const KernelRegistry& kernels,
                     std::vector<void*>& paramPointers);

// Fills `pointers` (kernelParams form) or `extra` (buffer form) for a recorded
// kernel op; returns false when the layout is unknown.
// The same with the parameter offsets given (the launch thread's copy of the
// layout; the registry is not used off the engine lock).
bool kernelParamsOf(const core::OpDesc& op, std::span<const uint32_t> offsets,
                    std::vector<void*>& pointers, void** extra, size_t* extraSize);
bool kernelParamsOf(const core::OpDesc& op, const KernelRegistry& kernels,
                    std::vector<void*>& pointers, void** extra, size_t* extraSize);

CUcontext contextOf(const core::OpDesc& op);

std::string describeOp(const core::OpDesc& op, const KernelRegistry& kernels);
// describeOp plus, for a kernel, how it is launched: the API, grid, block,
// dynamic shared memory, parameter bytes and launch attributes (for messages
// about a launch the driver refused). Allocates.
std::string describeLaunch(const core::OpDesc& op, const KernelRegistry& kernels);
std::string describeDifference(const core::OpDesc& expected, const core::OpDesc& actual,
                               const KernelRegistry& kernels);

}  // namespace graft::graph
