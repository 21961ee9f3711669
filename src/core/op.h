// The op model: what the engine knows about one intercepted stream-ordered
// operation. Pure C++: no CUDA types. The hook layer encodes driver arguments
// into `shape` (bytes that must match exactly for a replay: kernel, launch
// configuration, attributes, parameter layout, copy sizes) and `value` (bytes a
// replay may patch: kernel parameter bytes, copy/memset pointers and values).
//
// Threading: plain values. OpDesc is a non-owning view. May not allocate.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace graft::core {

// A stream as the engine sees it: the driver handle, with the legacy and
// per-thread default streams given their explicit handles (0x1, 0x2).
using StreamKey = uint64_t;
inline constexpr StreamKey kLegacyStream = 0x1;
inline constexpr StreamKey kPerThreadStream = 0x2;

enum class OpKind : uint8_t {
  Kernel,       // graphable
  Memcpy,       // graphable (device-to-device)
  Memset,       // graphable
  EventRecord,  // graphable; `event` holds the program's event
  EventWait,    // graphable; `event` holds the program's event
  Boundary,     // issued eagerly at its position (see EagerCause); splits segments
};

// Why an op was issued eagerly rather than through one of graft's graphs.
// The names are the keys of the exit report's "fallbacks" object.
#define GRAFT_EAGER_CAUSES(X)                                                   \
  X(NotCaptured, "not_captured")               /* warm-up, or never repeated */ \
  X(Mismatch, "mismatch")                      /* diverged from a segment */    \
  X(SyncInSegment, "sync_in_segment")                                           \
  X(QueryInSegment, "query_in_segment")                                         \
  X(BoundaryInSegment, "boundary_in_segment")                                   \
  X(HostMemoryCopy, "host_memory_copy")                                         \
  X(HostFunc, "host_func")                                                      \
  X(TimingEvent, "timing_event")               /* record of a timing event */   \
  X(UnknownParams, "param_sizes_unknown")                                       \
  X(EagerKernel, "eager_kernel_prefix")                                         \
  X(PerThreadStream, "per_thread_default_stream")                               \
  X(UnsupportedLaunch, "unsupported_launch")                                    \
  X(UnsupportedCopy, "unsupported_copy")                                        \
  X(ProgramGraph, "program_graph_launch")                                       \
  X(OtherStreamOrdered, "unmodelled_stream_op")                                 \
  X(ProgramCapture, "program_capture_active")                                   \
  X(LaunchFailed, "graph_launch_failed")                                        \
  X(IdleFlush, "idle_flush")                   /* the program went quiet */     \
  X(VariantLimit, "variant_limit")                                              \
  X(Disabled, "segment_disabled")

#define GRAFT_ENUM_MEMBER(name, text) name,
enum class EagerCause : uint8_t { None, GRAFT_EAGER_CAUSES(GRAFT_ENUM_MEMBER) Count };
#undef GRAFT_ENUM_MEMBER

std::string_view toString(EagerCause c);

struct Bytes {
  const uint8_t* data = nullptr;
  uint32_t size = 0;

  bool operator==(const Bytes& o) const {
    return size == o.size && (size == 0 || data == o.data || std::memcmp(data, o.data, size) == 0);
  }
};

// A view of one op. For Boundary ops, `cause` says why it runs eagerly.
struct OpDesc {
  OpKind kind = OpKind::Boundary;
  EagerCause cause = EagerCause::None;
  uint16_t api = 0;        // the hook's id of the driver function; opaque here
  StreamKey stream = 0;
  uint64_t event = 0;      // EventRecord / EventWait: the program's event handle
  uint64_t shapeHash = 0;  // hash of kind, api, stream and shape (see shapeHashOf)
  Bytes shape;
  Bytes value;
};

// Ops match for replay when these are equal (values may differ: patching).
inline bool sameShape(const OpDesc& a, const OpDesc& b) {
  return a.shapeHash == b.shapeHash && a.kind == b.kind && a.api == b.api &&
         a.stream == b.stream && a.shape == b.shape && a.value.size == b.value.size;
}

}  // namespace graft::core
