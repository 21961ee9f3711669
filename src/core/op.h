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
// The default streams' keys name one stream per context (per thread too, for
// the per-thread stream).
inline constexpr bool isDefaultStream(StreamKey s) { return s == kLegacyStream || s == kPerThreadStream; }
// A per-thread default stream whose ops graft may hold: one key per (thread,
// context), `slot` >= 1 (graph/per_thread_streams.h). The top bit set, which
// no user-space address has, so never a driver handle.
inline constexpr StreamKey kPerThreadKeyTag = StreamKey(1) << 63;
inline constexpr StreamKey perThreadKey(uint32_t slot) { return kPerThreadKeyTag | slot; }
inline constexpr bool isPerThreadKey(StreamKey s) { return (s & kPerThreadKeyTag) != 0; }
inline constexpr uint32_t perThreadSlot(StreamKey s) { return uint32_t(s & ~kPerThreadKeyTag); }
// Either kind of per-thread stream key (only its owner thread can name it).
inline constexpr bool isAnyPerThread(StreamKey s) { return s == kPerThreadStream || isPerThreadKey(s); }

enum class OpKind : uint8_t {
  Kernel,       // graphable
  Memcpy,       // graphable (device-to-device)
  Memset,       // graphable
  EventRecord,  // graphable; `event` holds the program's event
  EventWait,    // graphable; `event` holds the program's event
  Boundary,     // issued eagerly at its position (see EagerCause); splits segments
};

// Why an op was issued eagerly rather than through one of graft's graphs.
// The names are the keys of the exit report's "fallbacks" object; the
// descriptions are README.md's table of them (graft-reasons --markdown,
// scripts/update-readme; a test fails if they differ).
#define GRAFT_EAGER_CAUSES(X)                                                                              \
  X(NotCaptured, "not_captured", "warm-up, or a sequence that has not repeated (yet)")                     \
  X(Mismatch, "mismatch",                                                                                  \
    "held ops issued eagerly because the program diverged from a captured segment (kernel, launch "        \
    "configuration, stream or event structure differed, or a stream handle now names a stream with other " \
    "flags)")                                                                                              \
  X(SyncInSegment, "sync_in_segment", "the host synchronized in the middle of a segment")                  \
  X(QueryInSegment, "query_in_segment",                                                                    \
    "the host queried held work in the middle of a segment (a query issues it, so polling makes progress)") \
  X(BoundaryInSegment, "boundary_in_segment", "an op that must run eagerly arrived in the middle of a segment") \
  X(HostMemoryCopy, "host_memory_copy", "copies touching host memory run eagerly at their position")       \
  X(HostFunc, "host_func", "host functions and stream callbacks run eagerly at their position")            \
  X(TimingEvent, "timing_event",                                                                           \
    "records of timing events run eagerly, so elapsed times measure the work")                             \
  X(InterprocessEvent, "interprocess_event",                                                               \
    "records of and waits on interprocess events (`CU_EVENT_INTERPROCESS`) run eagerly, after everything " \
    "before them is issued: another process may wait or record again as soon as the call returns")         \
  X(UnseenEvent, "event_not_seen_created",                                                                 \
    "records of and waits on events graft did not see created (opened with `cuIpcOpenEventHandle`, or "    \
    "created before graft started) run eagerly, for the same reason")                                      \
  X(AboveSharedMemAllowance, "shared_memory_above_allowance",                                             \
    "launches asking for more dynamic shared memory than their kernel's allowance "                         \
    "(`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`, as the program last set it) go to the driver at "  \
    "their position, which refuses them as it would without graft")                                        \
  X(UnknownParams, "param_sizes_unknown", "the driver could not tell a kernel's parameter layout")          \
  X(EagerKernel, "eager_kernel_prefix", "kernels named by `GRAFT_EAGER_KERNELS` (NCCL by default)")         \
  X(PerThreadStream, "per_thread_default_stream", "ops on a per-thread default stream that has no proxy stream (over 256 thread and context pairs, or the driver refused one)")                     \
  X(UnsupportedLaunch, "unsupported_launch",                                                               \
    "launches graft does not put in graphs (a launch attribute it does not know, too many attributes or "  \
    "parameter bytes, an unreadable `extra` buffer)")                                                      \
  X(UnsupportedCopy, "unsupported_copy",                                                                   \
    "copies graft does not put in graphs (2-D, 3-D, array, peer and batched copies)")                          \
  X(DriverChecks, "driver_checks",                                                                       \
    "ops whose outcome only the driver decides, which a graph node would not reproduce: empty copies and "  \
    "memsets (they make no node), memsets at an address not aligned to their element size, device copies " \
    "and memsets of memory the driver does not know as such or past the end of its allocation, launches "  \
    "given both parameter forms, attributes counted but not given or a parameter buffer of another size " \
    "than the kernel's, waits on an event last recorded in the program's capture: they go to the driver "  \
    "at their position, which refuses or skips them as it would without graft")                           \
  X(ProgramGraph, "program_graph_launch", "the program's own graph launches run eagerly at their position") \
  X(OtherStreamOrdered, "unmodelled_stream_op",                                                            \
    "other stream-ordered ops run eagerly at their position (stream memory operations, prefetches, "       \
    "external semaphores, event ops with flags)")                                                          \
  X(ProgramCapture, "program_capture_active", "the program was capturing its own graph; graft steps aside (the capture splits runs as a sync does; what the program issues around a capture it makes every step is still learned)") \
  X(LaunchFailed, "graph_launch_failed",                                                                   \
    "a graft graph failed to launch or patch; its ops ran eagerly and it is not used again")               \
  X(IdleFlush, "idle_flush", "held ops issued because the program issued nothing for `GRAFT_IDLE_FLUSH_MS`") \
  X(VariantLimit, "variant_limit", "more shape variants than `GRAFT_MAX_VARIANTS` start the same way (counts sequences refused a graph, not ops)")    \
  X(CaptureRefused, "capture_refused",                                                                     \
    "launches of a kernel the driver refused to put in a stream capture when graft built a graph with it "  \
    "(for example cuDNN's single-pass batch-norm kernels): from then on they run eagerly at their position") \
  X(LegacyLaunchApi, "legacy_launch_api",                                                                 \
    "launches of a kernel whose launch state the program sets for the pre-4.0 launch API "                 \
    "(`cuFuncSetBlockShape`, `cuFuncSetSharedSize`, `cuParamSet*`), which a launch of it clears: from then " \
    "on they run eagerly at their position")                                                               \
  X(ReloadedCode, "reloaded_code",                                                                         \
    "launches of a kernel whose code the program unloaded and loaded again (a library that loads code "    \
    "per plan or per call) before graphs with it replayed 16 times or it ran 1024 times: they run eagerly " \
    "at their position, so the graphs around them outlive the next unload (twice its longest such life, "   \
    "64 to 1024 launches, in each of its next 1 to 32 loads; then it tries graphs again)")                  \
  X(Dormant, "dormant",                                                                                    \
    "graft had no graph and nothing had repeated for `GRAFT_DORMANT_AFTER_OPS` ops: it only counted these " \
    "ops, then looked again")                                                                              \
  X(ThreadsInterleave, "threads_interleave",                                                               \
    "threads issued ops at the same time, so their order changed from run to run and little went through " \
    "graphs: graft only counted these ops (a rest as for `dormant`), then looked again")                  \
  X(SegmentLimit, "segment_limit", "`GRAFT_MAX_SEGMENTS` graphs were live, so a repeating sequence got none (counts sequences, not ops)")

#define GRAFT_ENUM_MEMBER(name, text, doc) name,
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

// Event records and waits: their event handle is a value, named per use.
inline bool isEventOp(OpKind k) { return k == OpKind::EventRecord || k == OpKind::EventWait; }

// Ops match for replay when these are equal (values may differ: patching).
inline bool sameShape(const OpDesc& a, const OpDesc& b) {
  return a.shapeHash == b.shapeHash && a.kind == b.kind && a.api == b.api &&
         a.stream == b.stream && a.shape == b.shape && a.value.size == b.value.size;
}

}  // namespace graft::core
