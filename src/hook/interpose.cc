// The preload layer: the only extern "C" in graft.
//
//   dlsym             runtimes fetch cuGetProcAddress_v2 from libcuda's handle
//   cuGetProcAddress  ... and every driver function through it (itself too)
//   cu* exports       for programs that link libcuda directly
//
// Every wrapper is generated from driver_api.def: one per (function, variant),
// each forwarding to exactly the pointer it replaced. A wrapper classifies the
// call by its semantic class and hands stream-ordered ops to the engine.
//
// Hot path rules: no allocation, no getenv, no logging above trace; graft's
// own driver calls go through the real pointers, and t_inGraft keeps anything
// the driver might call back from being intercepted again.

#include <dlfcn.h>

#include <cstring>
#include <type_traits>

#include "core/hot_path.h"
#include "core/stage_clock.h"
#include "hook/driver_api.h"
#include "hook/generic_forward.h"
#include "hook/runtime.h"
#include "graph/driver_log.h"
#include "graph/context_scope.h"
#include "graph/per_thread_streams.h"
#include "log/log.h"

// A function a sanitizer's runtime may call before it has set itself up (see
// realDlsymFn): not instrumented in a sanitizer build.
#if defined(__GNUC__)
#define GRAFT_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined")))
#else
#define GRAFT_UNINSTRUMENTED
#endif

namespace graft::hook {
// dlsym past graft (below).
void* realDlsym(void* handle, const char* name);
namespace {

using core::EagerCause;
using core::OpDesc;
using core::OpKind;
using core::StreamKey;

// ---------------------------------------------------------------------------
// Argument helpers

template <typename T>
T firstOf() {
  return T{};
}
template <typename T, typename A0, typename... A>
T firstOf(A0 a0, A... rest) {
  if constexpr (std::is_same_v<A0, T>) return a0;
  else return firstOf<T>(rest...);
}

// The engine's key for a stream: NULL means the legacy default stream in the
// plain variant and the calling thread's default stream in the per-thread one.
// The calling thread's per-thread default stream gets a key of its own per
// context (graph/per_thread_streams.h).
inline StreamKey perThreadStreamKey();
inline StreamKey streamKey(CUstream s, int perThread) {
  if (!s) return perThread ? perThreadStreamKey() : core::kLegacyStream;
  if (s == CU_STREAM_PER_THREAD) [[unlikely]] return perThreadStreamKey();
  return reinterpret_cast<StreamKey>(s);
}

[[gnu::always_inline]] inline CUcontext currentContextUntimed() {
  CUcontext ctx = nullptr;
  real<ApiId::k_cuCtxGetCurrent_4000>()(&ctx);
  return ctx;
}

[[gnu::always_inline]] inline CUcontext currentContext() {
  core::StageTimer timer(core::Stage::Context);
  return currentContextUntimed();
}

inline StreamKey perThreadStreamKey() { return graph::PerThreadStreams::keyFor(currentContextUntimed()); }

// Whether a call names the calling thread's per-thread default stream: a
// stream argument that is CU_STREAM_PER_THREAD, or NULL in a per-thread
// variant, whose functions without a stream argument use that stream.
template <int PT, typename... A>
bool namesPerThreadStream(A... a) {
  bool names = false, hasStream = false;
  [[maybe_unused]] auto one = [&](auto x) {
    if constexpr (std::is_same_v<decltype(x), CUstream>) {
      hasStream = true;
      names |= x == CU_STREAM_PER_THREAD || (PT && !x);
    } else if constexpr (std::is_same_v<decltype(x), const CUlaunchConfig*>) {
      hasStream = true;
      names |= x && (x->hStream == CU_STREAM_PER_THREAD || (PT && !x->hStream));
    }
  };
  (one(a), ...);
  return names || (PT && !hasStream);
}

// Before a call that is not stream-ordered reaches the driver (a sync, a
// query, a capture's start, a synchronous copy): one naming the calling
// thread's per-thread stream first makes that stream wait for what graft
// issued on its proxy; `enqueues`: the call may give the stream work, which
// graft's later work there must follow.
template <int PT, typename... A>
void beforePerThreadCall(bool enqueues, A... a) {
  if (graph::PerThreadStreams::owned() && namesPerThreadStream<PT>(a...)) [[unlikely]]
    graph::PerThreadStreams::beforeDriverCall(enqueues);
}

// The program's arguments with its per-thread default stream replaced by the
// stream's proxy: graft issues all of that stream's stream-ordered work there.
template <int PT, typename T>
T onProxy(T a, CUstream proxy, const CUlaunchConfig* config) {
  if constexpr (std::is_same_v<T, CUstream>) {
    return a == CU_STREAM_PER_THREAD || (PT && !a) ? proxy : a;
  } else if constexpr (std::is_same_v<T, const CUlaunchConfig*>) {
    return config;
  } else {
    return a;
  }
}

// A stream-ordered call the program's thread issues itself (not held) on a
// per-thread stream with a proxy (`key`): through the proxy, while graft may
// hold that stream's ops; else on the stream itself (while graft steps aside:
// a program's capture, which may include that stream, a rest, replay
// stopped; and ops whose stream the program may see again, PerThreadStreams),
// after a join, and graft's later work there then follows it (bridge). Out of
// line: the wrappers' hot path only tests the key.
template <ApiId Id>
inline constexpr bool kThroughProxy = apiInfo(Id).klass != ApiClass::HostFunc &&
                                      apiInfo(Id).klass != ApiClass::StreamOrdered;
template <ApiId Id, int PT, typename Real, typename... A>
GRAFT_COLD CUresult forwardPerThread(StreamKey key, bool mayHold, Real realFn, A... a) {
  if (!mayHold || !kThroughProxy<Id>) {
    graph::PerThreadStreams::beforeDriverCall(true);
    return realFn(a...);
  }
  graph::PerThreadStreams::bridgeIfPending(key);
  const CUstream proxy = graph::PerThreadStreams::proxyOf(key);
  if (!proxy) return realFn(a...);  // not a handed-out key: cannot happen
  CUlaunchConfig config{};
  if (const CUlaunchConfig* c = firstOf<const CUlaunchConfig*>(a...)) {
    config = *c;
    config.hStream = proxy;
  }
  const CUresult r = realFn(onProxy<PT>(a, proxy, &config)...);
  graph::PerThreadStreams::issued(key);  // the join's event, before any later legacy-stream work
  return r;
}
template <ApiId Id, int PT, typename Real, typename... A>
[[gnu::always_inline]] inline CUresult forwardDirect(StreamKey key, bool mayHold, Real realFn, A... a) {
  if (core::isPerThreadKey(key)) [[unlikely]] return forwardPerThread<Id, PT>(key, mayHold, realFn, a...);
  return realFn(a...);
}

// `realFn` as forwardDirect calls it, for calls outside submitOp.
template <ApiId Id, int PT, typename Real>
auto directOn(Runtime& rt, StreamKey key, Real realFn) {
  bool mayHold = true;
  if (core::isPerThreadKey(key)) [[unlikely]] {
    auto lock = rt.engine().lock();
    mayHold = rt.engine().mayHold();
  }
  return [=](auto... a) { return forwardDirect<Id, PT>(key, mayHold, realFn, a...); };
}

[[gnu::always_inline]] inline graph::KernelInfo& kernelInfo(Runtime& rt, CUfunction f) {
  core::StageTimer timer(core::Stage::KernelLookup);
  return rt.kernels().get(f);
}

// For event ops: which context's default stream a NULL stream names. Ops on a
// program stream carry no context (the stream has one).
inline CUcontext defaultStreamContext(CUstream s) {
  return !s || s == CU_STREAM_LEGACY ? currentContext() : nullptr;
}

// Where [p, p + bytes) lies, as the driver knows memory (one call): not in
// memory it knows (pageable host memory, a freed block), in device memory or
// host memory it knows, or running past the end of its allocation (which the
// driver refuses in a copy or memset, at the call: tests/gpu/traps_driver2.cu,
// range_past_end).
enum class Range { Unknown, Device, Host, PastEnd };
inline Range rangeOf(CUdeviceptr p, size_t bytes) {
  unsigned type = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&type, &start, &size};
  // (Not an error for an unknown pointer: its attributes read 0.)
  if (real<ApiId::k_cuPointerGetAttributes_7000>()(3, attributes, data, p) != CUDA_SUCCESS || !type)
    return Range::Unknown;
  if (size && (p < start || bytes > size || p - start > size - bytes)) return Range::PastEnd;
  return type == CU_MEMORYTYPE_DEVICE ? Range::Device : Range::Host;
}

// Under the engine lock.
GRAFT_COLD inline void stopAfterStickyError(Runtime& rt, CUresult r) {
  if (!rt.engine().replaying()) return;
  rt.engine().stopReplay();
  GRAFT_WARN("the program's context hit a sticky error ({}): graft replays nothing more, so every later call "
             "gets it from the driver as it would without graft", int(r));
}
// Not under the engine lock.
inline CUresult noteStickyError(Runtime& rt, CUresult r) {
  if (isStickyError(r)) [[unlikely]] {
    rt.noteStickyError(r);
    auto lock = rt.engine().lock();
    stopAfterStickyError(rt, r);
  }
  return r;
}

// Why an ordered op that graft does not model is issued eagerly in sequence.
constexpr EagerCause boundaryCause(ApiId id) {
  switch (apiInfo(id).klass) {
    case ApiClass::Copy:
      return id == ApiId::k_cuMemcpyHtoDAsync_3020 || id == ApiId::k_cuMemcpyDtoHAsync_3020
                 ? EagerCause::HostMemoryCopy
                 : EagerCause::UnsupportedCopy;
    case ApiClass::HostFunc: return EagerCause::HostFunc;
    case ApiClass::GraphLaunch: return EagerCause::ProgramGraph;
    default: return EagerCause::OtherStreamOrdered;
  }
}

// ---------------------------------------------------------------------------
// Encoders: driver arguments -> OpDesc, for the functions graft can graph.
// A function without a specialization here is issued eagerly in sequence.

template <ApiId Id>
struct Encoder;

template <ApiId Id>
concept HasEncoder = requires { Encoder<Id>::kGraphable; };

template <>
struct Encoder<ApiId::k_cuLaunchKernel_4000> {
  static constexpr bool kGraphable = true;
  // The launch's arguments and stream; false if it has none (see Ex).
  [[gnu::always_inline]] static bool launch(int pt, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                            CUstream s, void** params, void** extra,
                                            graph::LaunchArgs* out, StreamKey* stream) {
    *out = {f, {gx, gy, gz}, {bx, by, bz}, shmem, nullptr, 0, params, extra};
    *stream = streamKey(s, pt);
    return true;
  }
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUfunction f, unsigned gx, unsigned gy,
                              unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                              CUstream s, void** params, void** extra) {
    graph::LaunchArgs a{f, {gx, gy, gz}, {bx, by, bz}, shmem, nullptr, 0, params, extra};
    return rt.encoder().kernel(ApiId::k_cuLaunchKernel_4000, streamKey(s, pt), currentContext(),
                               kernelInfo(rt, f), a);
  }
};

template <>
struct Encoder<ApiId::k_cuLaunchKernelEx_11060> {
  static constexpr bool kGraphable = true;
  [[gnu::always_inline]] static bool launch(int pt, const CUlaunchConfig* c, CUfunction f, void** params,
                                            void** extra, graph::LaunchArgs* out, StreamKey* stream) {
    if (!c) return false;
    *out = {f,           {c->gridDimX, c->gridDimY, c->gridDimZ},
            {c->blockDimX, c->blockDimY, c->blockDimZ},
            c->sharedMemBytes, c->attrs, c->numAttrs, params, extra};
    *stream = streamKey(c->hStream, pt);
    return true;
  }
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, const CUlaunchConfig* c, CUfunction f,
                              void** params, void** extra) {
    if (!c)
      return rt.encoder().boundary(ApiId::k_cuLaunchKernelEx_11060, core::kLegacyStream,
                                   EagerCause::UnsupportedLaunch);
    graph::LaunchArgs a{f,           {c->gridDimX, c->gridDimY, c->gridDimZ},
                        {c->blockDimX, c->blockDimY, c->blockDimZ},
                        c->sharedMemBytes, c->attrs, c->numAttrs, params, extra};
    return rt.encoder().kernel(ApiId::k_cuLaunchKernelEx_11060, streamKey(c->hStream, pt),
                               currentContext(), kernelInfo(rt, f), a);
  }
};

template <>
struct Encoder<ApiId::k_cuLaunchCooperativeKernel_9000> {
  static constexpr bool kGraphable = true;
  [[gnu::always_inline]] static bool launch(int pt, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                            CUstream s, void** params, graph::LaunchArgs* out,
                                            StreamKey* stream) {
    *out = {f, {gx, gy, gz}, {bx, by, bz}, shmem, nullptr, 0, params, nullptr};
    *stream = streamKey(s, pt);
    return true;
  }
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUfunction f, unsigned gx, unsigned gy,
                              unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                              CUstream s, void** params) {
    graph::LaunchArgs a{f, {gx, gy, gz}, {bx, by, bz}, shmem, nullptr, 0, params, nullptr};
    return rt.encoder().kernel(ApiId::k_cuLaunchCooperativeKernel_9000, streamKey(s, pt),
                               currentContext(), kernelInfo(rt, f), a);
  }
};

template <>
struct Encoder<ApiId::k_cuMemcpyDtoDAsync_3020> {
  static constexpr bool kGraphable = true;
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUdeviceptr dst, CUdeviceptr src, size_t n,
                              CUstream s) {
    // Memory that is not device memory (pageable host memory, a freed block)
    // or a range past its allocation's end is the driver's to refuse or copy,
    // at the call: a held copy would already have returned success
    // (tests/gpu/traps_edge.cu, refused_values).
    if (n && (rangeOf(dst, n) != Range::Device || rangeOf(src, n) != Range::Device))
      return rt.encoder().boundary(ApiId::k_cuMemcpyDtoDAsync_3020, streamKey(s, pt), EagerCause::DriverChecks);
    return rt.encoder().memcpy(ApiId::k_cuMemcpyDtoDAsync_3020, streamKey(s, pt), currentContext(),
                               dst, src, n);
  }
};

template <>
struct Encoder<ApiId::k_cuMemcpyAsync_4000> {
  static constexpr bool kGraphable = true;
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUdeviceptr dst, CUdeviceptr src, size_t n,
                              CUstream s) {
    // Unified addressing: only device-to-device copies are graphed; a copy
    // touching host memory runs eagerly at its position (DESIGN.md §2.6).
    const Range to = rangeOf(dst, n), from = rangeOf(src, n);
    if (to == Range::PastEnd || from == Range::PastEnd)
      return rt.encoder().boundary(ApiId::k_cuMemcpyAsync_4000, streamKey(s, pt), EagerCause::DriverChecks);
    if (to != Range::Device || from != Range::Device)
      return rt.encoder().boundary(ApiId::k_cuMemcpyAsync_4000, streamKey(s, pt),
                                   EagerCause::HostMemoryCopy);
    return rt.encoder().memcpy(ApiId::k_cuMemcpyAsync_4000, streamKey(s, pt), currentContext(), dst,
                               src, n);
  }
};

template <ApiId Id, unsigned ElementSize, typename V>
struct MemsetEncoder {
  static constexpr bool kGraphable = true;
  // Memory the driver does not know is its to refuse, at the call (as for
  // device copies above).
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUdeviceptr dst, V value, size_t n, CUstream s) {
    if (const Range r = n ? rangeOf(dst, n * ElementSize) : Range::Device; r == Range::Unknown || r == Range::PastEnd)
      return rt.encoder().boundary(Id, streamKey(s, pt), EagerCause::DriverChecks);
    return rt.encoder().memset(Id, streamKey(s, pt), currentContext(), dst, 0, unsigned(value),
                               ElementSize, n, 1);
  }
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUdeviceptr dst, size_t pitch, V value,
                              size_t width, size_t height, CUstream s) {
    if (const Range r = width && height ? rangeOf(dst, pitch * (height - 1) + width * ElementSize) : Range::Device;
        r == Range::Unknown || r == Range::PastEnd)
      return rt.encoder().boundary(Id, streamKey(s, pt), EagerCause::DriverChecks);
    return rt.encoder().memset(Id, streamKey(s, pt), currentContext(), dst, pitch, unsigned(value),
                               ElementSize, width, height);
  }
};
template <> struct Encoder<ApiId::k_cuMemsetD8Async_3020>
    : MemsetEncoder<ApiId::k_cuMemsetD8Async_3020, 1, unsigned char> {};
template <> struct Encoder<ApiId::k_cuMemsetD16Async_3020>
    : MemsetEncoder<ApiId::k_cuMemsetD16Async_3020, 2, unsigned short> {};
template <> struct Encoder<ApiId::k_cuMemsetD32Async_3020>
    : MemsetEncoder<ApiId::k_cuMemsetD32Async_3020, 4, unsigned int> {};
template <> struct Encoder<ApiId::k_cuMemsetD2D8Async_3020>
    : MemsetEncoder<ApiId::k_cuMemsetD2D8Async_3020, 1, unsigned char> {};
template <> struct Encoder<ApiId::k_cuMemsetD2D16Async_3020>
    : MemsetEncoder<ApiId::k_cuMemsetD2D16Async_3020, 2, unsigned short> {};
template <> struct Encoder<ApiId::k_cuMemsetD2D32Async_3020>
    : MemsetEncoder<ApiId::k_cuMemsetD2D32Async_3020, 4, unsigned int> {};

// The context of the stream a record names: the current one for a default
// stream; a program stream's from graft's cache (one driver call per stream;
// null for a stream the driver does not know).
inline CUcontext recordStreamContext(Runtime& rt, CUstream s, CUcontext defaultCtx) {
  if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return defaultCtx ? defaultCtx : currentContextUntimed();
  return rt.executor().streamContext(reinterpret_cast<StreamKey>(s));
}
// For a record on a green context's stream: the primary context it was made
// from, whose events the driver records there too (null for a default stream).
inline CUcontext recordStreamRegularContext(Runtime& rt, CUstream s) {
  if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return nullptr;
  return rt.executor().streamRegularContext(reinterpret_cast<StreamKey>(s));
}

template <>
struct Encoder<ApiId::k_cuEventRecord_2000> {
  static constexpr bool kGraphable = true;
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUevent e, CUstream s) {
    const CUcontext ctx = defaultStreamContext(s);
    return rt.encoder().eventRecord(ApiId::k_cuEventRecord_2000, streamKey(s, pt), ctx, e, 0,
                                    recordStreamContext(rt, s, ctx), recordStreamRegularContext(rt, s));
  }
};

template <>
struct Encoder<ApiId::k_cuEventRecordWithFlags_11010> {
  static constexpr bool kGraphable = true;
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUevent e, CUstream s, unsigned flags) {
    if (flags != CU_EVENT_RECORD_DEFAULT)
      return rt.encoder().boundary(ApiId::k_cuEventRecordWithFlags_11010, streamKey(s, pt),
                                   EagerCause::OtherStreamOrdered);
    const CUcontext ctx = defaultStreamContext(s);
    return rt.encoder().eventRecord(ApiId::k_cuEventRecordWithFlags_11010, streamKey(s, pt), ctx, e, flags,
                                    recordStreamContext(rt, s, ctx), recordStreamRegularContext(rt, s));
  }
};

template <>
struct Encoder<ApiId::k_cuStreamWaitEvent_3020> {
  static constexpr bool kGraphable = true;
  GRAFT_HOT static const OpDesc& encode(Runtime& rt, int pt, CUstream s, CUevent e, unsigned flags) {
    if (flags != CU_EVENT_WAIT_DEFAULT)
      return rt.encoder().boundary(ApiId::k_cuStreamWaitEvent_3020, streamKey(s, pt),
                                   EagerCause::OtherStreamOrdered);
    return rt.encoder().eventWait(ApiId::k_cuStreamWaitEvent_3020, streamKey(s, pt), defaultStreamContext(s), e,
                                  flags);
  }
};

// ---------------------------------------------------------------------------
// Handling by semantic class

// The stream an ordered call is issued to.
template <ApiId Id, int PT, typename... A>
StreamKey streamOfCall(A... a) {
  if constexpr (Id == ApiId::k_cuLaunchKernelEx_11060) {
    const CUlaunchConfig* c = firstOf<const CUlaunchConfig*>(a...);
    return streamKey(c ? c->hStream : nullptr, PT);
  } else {
    return streamKey(firstOf<CUstream>(a...), PT);
  }
}

// Kernel launches, which have a fast lane (holdIfExpected).
template <ApiId Id>
concept IsKernelLaunch = requires { Encoder<Id>::launch; };

// The fast lane (Engine::soleExpected): while a replay holds ops and one
// candidate is live, a launch is compared in place with the op it expects
// and, when it is that op (its parameter values may differ), held at once,
// without encoding or matching. False: take the general path. Under the
// engine lock.
template <ApiId Id, int PT, typename... A>
[[gnu::always_inline]] inline bool holdIfExpected(Runtime& rt, A... a) {
  const OpDesc* expected = rt.engine().soleExpected();
  if (!expected) return false;
  core::StageTimer timer(core::Stage::FastLane);
  graph::LaunchArgs args;
  StreamKey stream;
  if (!Encoder<Id>::launch(PT, a..., &args, &stream) || expected->api != uint16_t(Id) ||
      expected->stream != stream ||
      graph::kernelShapeOf(*expected).func != reinterpret_cast<uint64_t>(args.func))
    return false;
  // Untimed: the fast lane's time includes the context and the lookup.
  graph::KernelInfo& info = rt.kernels().get(args.func);
  core::Bytes value;
  if (rt.encoder().compareLaunch(*expected, currentContextUntimed(), info, args, &value) ==
      graph::OpEncoder::Sameness::Differs)
    return false;
  ++info.launches;
  if (core::isPerThreadKey(stream)) [[unlikely]] graph::PerThreadStreams::bridgeIfPending(stream);
  // An armed start begins a run: its thread is noted as submitOp notes it
  // for the ops it submits (off the fast lane's lines).
  if (rt.engine().holdsNothing()) [[unlikely]] rt.engine().noteSubmitter(submitterToken());
  rt.engine().holdSoleExpected(value);
  return true;
}

// A stream-ordered op: the engine holds it for a replay or has it issued now.
template <ApiId Id, int PT, typename Real, typename... A>
[[gnu::always_inline]] inline CUresult submitOp(Runtime& rt, Real realFn, A... a) {
  if constexpr (apiInfo(Id).klass == ApiClass::Launch || apiInfo(Id).klass == ApiClass::Set) {
    // The benchmark floor drops kernels and memsets before any work of graft's
    // own (not even encoding), so it is the program's CPU time alone.
    if (rt.mode() == config::Mode::Swallow) return CUDA_SUCCESS;
  }
  std::unique_lock<core::EngineMutex> lock = [&] {
    core::StageTimer timer(core::Stage::Lock);
    return rt.engine().lock();
  }();
  if (!rt.startSettled()) [[unlikely]] rt.settleStart();  // the first op: CUDA_LAUNCH_BLOCKING again
  // Read under the lock: a benchmark mode switch (graft_bench_set_mode) takes
  // it too, so no op is held after the switch flushed what was held.
  const config::Mode mode = rt.mode();
  if (mode == config::Mode::Passthrough) {
    // Count only (class, stream, kernel): no recording, no copies.
    if constexpr (apiInfo(Id).klass == ApiClass::Launch)
      ++rt.kernels().get(firstOf<CUfunction>(a...)).launches;
    const StreamKey key = streamOfCall<Id, PT>(a...);
    rt.engine().countPassthrough(key);
    const bool mayHold = rt.engine().mayHold();
    lock.unlock();
    return forwardDirect<Id, PT>(key, mayHold, realFn, a...);
  }
  if (rt.engine().dormant() && mode == config::Mode::Graph) [[unlikely]] {
    // Resting: nothing repeated for a long time and no graph exists, or
    // threads issue ops at the same time; counted as in pass-through, issued
    // in place. (The benchmark's match mode goes
    // on below, where submit() steps aside and the op is dropped.)
    if constexpr (apiInfo(Id).klass == ApiClass::Launch)
      ++rt.kernels().get(firstOf<CUfunction>(a...)).launches;
    const StreamKey key = streamOfCall<Id, PT>(a...);
    rt.engine().noteSubmitter(submitterToken());  // a rest for interleaved threads ends when they stop
    rt.engine().countDormant(key);
    const bool mayHold = rt.engine().mayHold();
    if constexpr (apiInfo(Id).klass == ApiClass::EventRecord) {
      // What the encoder knows of records made in a program capture must
      // hold after the rest: a later wait on such an event stays eager.
      const bool inCapture = rt.engine().programCaptureActive();
      lock.unlock();
      const CUresult r = forwardDirect<Id, PT>(key, mayHold, realFn, a...);
      if (r == CUDA_SUCCESS) {
        lock.lock();
        rt.encoder().noteEventRecord(firstOf<CUevent>(a...), inCapture);
      }
      return r;
    }
    lock.unlock();
    return forwardDirect<Id, PT>(key, mayHold, realFn, a...);
  }
  if constexpr (IsKernelLaunch<Id>) {
    if (holdIfExpected<Id, PT>(rt, a...)) return CUDA_SUCCESS;
  }
  // Whether a record is made in the program's capture, as the call finds it
  // (noted once the record is held or the driver took it: a refused record
  // leaves the event's last record as it was).
  [[maybe_unused]] bool recordInCapture = false;
  if constexpr (apiInfo(Id).klass == ApiClass::EventRecord) recordInCapture = rt.engine().programCaptureActive();
  rt.engine().noteSubmitter(submitterToken());
  const OpDesc* op;
  core::OpDesc expected;  // see OpEncoder::setExpected
  {
    core::StageTimer timer(core::Stage::Encode);
    if constexpr (HasEncoder<Id>) {
      if constexpr (apiInfo(Id).klass == ApiClass::Launch) {
        // A replay in progress compares the launch with the op it expects.
        rt.encoder().setExpected(rt.engine().expectedNext(&expected) ? &expected : nullptr);
        op = &Encoder<Id>::encode(rt, PT, a...);
        rt.encoder().setExpected(nullptr);  // `expected` ends with this call
      } else {
        op = &Encoder<Id>::encode(rt, PT, a...);
      }
    } else {
      op = &rt.encoder().boundary(Id, streamKey(firstOf<CUstream>(a...), PT), boundaryCause(Id));
    }
    if (op->stream == core::kPerThreadStream && op->kind != OpKind::Boundary)
      op = &rt.encoder().boundary(Id, op->stream, EagerCause::PerThreadStream);
  }
  // The floor's device-to-device copies (kernels and memsets never get here).
  if (mode == config::Mode::Swallow && op->kind == OpKind::Memcpy) return CUDA_SUCCESS;
  if (core::isPerThreadKey(op->stream) && rt.engine().mayHold() && kThroughProxy<Id>) [[unlikely]]
    graph::PerThreadStreams::bridgeIfPending(op->stream);
  core::Decision decision;
  {
    core::StageTimer timer(core::Stage::Match);
    decision = rt.engine().submit(*op);
  }
  if (decision == core::Decision::Held) {
    if constexpr (apiInfo(Id).klass == ApiClass::EventRecord)
      rt.encoder().noteEventRecord(firstOf<CUevent>(a...), false);  // held: never inside a program capture
    return CUDA_SUCCESS;
  }
  if (mode == config::Mode::Match && (op->kind == OpKind::Kernel || op->kind == OpKind::Memset ||
                                     op->kind == OpKind::Memcpy)) [[unlikely]] {
    // Benchmark-only: graft's work without the GPU's (see GRAFT_MODE).
    rt.engine().completeIssued(*op, true);
    return CUDA_SUCCESS;
  }
  if constexpr (apiInfo(Id).klass == ApiClass::Copy) {
    if (op->kind == OpKind::Boundary) {
      // A copy graft does not graph (host memory, 2-D, 3-D, arrays) may block
      // the host until the stream's earlier work is done (a copy with
      // pageable memory), which may wait on a host function that waits for
      // another thread's CUDA call: not under the engine lock, which that
      // call needs (tests/gpu/traps_edge.cu, pageable_copy_gate). Everything
      // before it is issued already (submit() issued what was held and
      // drained the queued launches).
      // It is recorded first, as issued (a refused copy then counts as a
      // boundary that did nothing): recorded after the call, under the lock
      // again, it would come after ops other threads got held meanwhile, and
      // their event records would look settled by it (Engine::query).
      const StreamKey stream = op->stream;
      {
        core::StageTimer timer(core::Stage::Record);
        rt.engine().completeIssued(*op, true);
      }
      const bool mayHold = rt.engine().mayHold();
      lock.unlock();
      return core::isPerThreadKey(stream) ? forwardPerThread<Id, PT>(stream, mayHold, realFn, a...) : realFn(a...);
    }
  }
  const CUresult r = core::isPerThreadKey(op->stream)
                        ? forwardPerThread<Id, PT>(op->stream, rt.engine().mayHold(), realFn, a...)
                        : realFn(a...);
  core::StageTimer timer(core::Stage::Record);
  if constexpr (apiInfo(Id).klass == ApiClass::EventRecord)
    if (r == CUDA_SUCCESS) rt.encoder().noteEventRecord(firstOf<CUevent>(a...), recordInCapture);
  rt.engine().completeIssued(*op, r == CUDA_SUCCESS);
  return r;
}

// A stream-ordered allocation, retried once when the driver is out of memory:
// frees graft still holds back (past held ops or queued launches) might have
// made room, as they would have eagerly, so graft issues them first. (With
// the device's pool the device's memory may run out; a pool the program made
// with a maximum size runs out sooner.)
template <typename Real, typename... A>
CUresult allocRetryingAfterFlush(Runtime& rt, Real realFn, A... a) {
  CUresult r = realFn(a...);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    {
      auto lock = rt.engine().lock();
      rt.engine().flushAll();
    }
    r = realFn(a...);
  }
  return r;
}

// cuMemAllocAsync: from graft's pool when GRAFT_POOL=1 (not while the program
// captures, where the allocation must become its graph's node, and not on a
// per-thread default stream, whose handle names a different stream per thread).
template <int PT, typename Real>
CUresult allocAsync(Runtime& rt, Real realFn, CUdeviceptr* out, size_t bytes, CUstream s) {
  const StreamKey key = streamKey(s, PT);
  if (pool::DevicePool* pool = rt.pool(); pool && out && rt.stickyError() == CUDA_SUCCESS) {
    bool capturing;
    CUcontext streamContext;
    {
      auto lock = rt.engine().lock();
      capturing = rt.engine().programCaptureActive();
      streamContext = recordStreamContext(rt, s, nullptr);
    }
    // The driver allocates from the pool of the stream's device: graft's pool
    // serves only streams of the current context (its device's).
    const CUcontext ctx = currentContext();
    if (!capturing && !core::isAnyPerThread(key) && streamContext == ctx &&
        pool->allocate(bytes, key, reinterpret_cast<uint64_t>(ctx), out))
      return CUDA_SUCCESS;
  }
  // Issued at once, before the launches queued on graft's launch thread, as it
  // is before the ops graft holds: none of them can use memory allocated after
  // them, and memory it may reuse was freed before it in driver order (a free
  // reaches the driver only after the launches queued before it).
  return allocRetryingAfterFlush(rt, directOn<ApiId::k_cuMemAllocAsync_11020, PT>(rt, key, realFn), out, bytes, s);
}

// cuMemFreeAsync: deferred past the ops graft holds, then to the driver or the pool.
// What graft may do with a stream-ordered free of `p`, as the driver knows the
// memory (one call; no lock needed):
//   Defer     a block of a memory pool (cuMemAllocAsync, cuMemAllocFromPoolAsync):
//             the driver takes its free; it may go behind the held ops;
//   AfterHeld the start of other device memory (cuMemAlloc, a cuMemMap
//             mapping): whether the driver takes it is the driver's to say
//             (the H100's takes cuMemAlloc memory and refuses a mapping:
//             tests/gpu/driver_facts.cu), so it is issued in place, after
//             everything graft holds;
//   Now       anything else (a pointer into a block, host memory, null, an
//             unknown address): the driver refuses it or frees nothing, with
//             the code it returns eagerly (tests/gpu/traps_edge.cu,
//             refused_values), whatever graft holds.
enum class FreeHandling { Defer, AfterHeld, Now };
inline FreeHandling freeHandlingOf(CUdeviceptr p) {
  if (!p) return FreeHandling::Now;
  CUdeviceptr start = 0;
  unsigned type = 0;
  CUmemoryPool pool = nullptr;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
  void* values[] = {&start, &type, &pool};
  // Not known: it goes to the driver, but only after what graft holds, which
  // may use it.
  if (real<ApiId::k_cuPointerGetAttributes_7000>()(3, attributes, values, p) != CUDA_SUCCESS)
    return FreeHandling::AfterHeld;
  if (start != p || type != CU_MEMORYTYPE_DEVICE) return FreeHandling::Now;  // the driver refuses it
  return pool ? FreeHandling::Defer : FreeHandling::AfterHeld;
}

template <int PT, typename Real>
CUresult freeAsync(Runtime& rt, Real realFn, CUdeviceptr p, CUstream s) {
  pool::DevicePool* pool = rt.pool();
  const bool pooled = pool && pool->owns(p);
  // The driver refuses every call after a sticky error; a block of graft's
  // pool is never the driver's to refuse, so graft answers as it would.
  if (pooled && rt.stickyError() != CUDA_SUCCESS) [[unlikely]] return rt.stickyError();
  StreamKey key = streamKey(s, PT);
  // The free is the stream's context's (the current one for a default stream).
  CUcontext freeContext = nullptr;
  // A free graft would hold back must be one the driver takes (freeHandlingOf).
  if (const FreeHandling handling = pooled ? FreeHandling::Defer : freeHandlingOf(p);
      handling != FreeHandling::Defer) {
    if (handling == FreeHandling::AfterHeld) {
      auto lock = rt.engine().lock();
      rt.engine().flushAll();
    }
    return directOn<ApiId::k_cuMemFreeAsync_11020, PT>(rt, key, realFn)(p, s);
  }
  {
    auto lock = rt.engine().lock();
    // Deferred, queued or to graft's pool, the free is ordered on the proxy,
    // which must first follow what the stream got directly (also while graft
    // steps aside; not inside a program's capture, which may include the
    // stream, where a pool block is kept and any other free goes to the
    // stream itself).
    if (core::isPerThreadKey(key) && !rt.engine().programCaptureActive()) [[unlikely]]
      graph::PerThreadStreams::bridgeIfPending(key);
    if (pooled && rt.engine().programCaptureActive()) {
      // The free would run when the program's graph runs; graft cannot follow
      // that, so the block is simply never reused.
      GRAFT_DEBUG("a pool block freed inside a program capture is kept");
      return CUDA_SUCCESS;
    }
    freeContext = recordStreamContext(rt, s, nullptr);
    if (rt.engine().deferFree(uint64_t(p), key, reinterpret_cast<uint64_t>(freeContext)))
      return CUDA_SUCCESS;
  }
  if (!pooled) return directOn<ApiId::k_cuMemFreeAsync_11020, PT>(rt, key, realFn)(p, s);
  if (key == core::kPerThreadStream) {
    // Only this thread can name its stream: wait for it, then reuse anywhere.
    real<ApiId::k_cuStreamSynchronize_2000>(1)(nullptr);
    pool->freeNow(p);
  } else if (core::isPerThreadKey(key)) {
    // Its work is on its proxy (graph/per_thread_streams.h).
    pool->freeAsync(p, reinterpret_cast<uint64_t>(graph::PerThreadStreams::proxyOf(key)),
                    reinterpret_cast<uint64_t>(freeContext));
  } else {
    pool->freeAsync(p, key, reinterpret_cast<uint64_t>(freeContext));
  }
  return CUDA_SUCCESS;
}

// cuMemFree: a barrier; pool blocks go back to the pool after a device sync.
template <typename Real>
CUresult freeSync(Runtime& rt, Real realFn, CUdeviceptr p) {
  {
    auto lock = rt.engine().lock();
    rt.engine().hostBarrier(core::hashCombine(uint64_t(ApiId::k_cuMemFree_3020), 0));
  }
  pool::DevicePool* pool = rt.pool();
  if (!pool || !pool->owns(p)) return realFn(p);
  // As cuMemFree waits for the device: the current context (with none current,
  // the driver's error, and the block stays the program's) and the one the
  // block was allocated in, whose work may still use it.
  if (const CUresult r = real<ApiId::k_cuCtxSynchronize_2000>()(); r != CUDA_SUCCESS) return r;
  if (const auto allocatedIn = reinterpret_cast<CUcontext>(pool->allocationContext(p));
      allocatedIn && allocatedIn != currentContextUntimed()) {
    graph::ContextScope scope(allocatedIn);
    if (const CUresult r = real<ApiId::k_cuCtxSynchronize_2000>()(); r != CUDA_SUCCESS) return r;
  }
  pool->freeNow(p);
  return CUDA_SUCCESS;
}

template <ApiId Id, typename... A>
uint64_t barrierHash(A... a) {
  return core::hashCombine(uint64_t(Id), reinterpret_cast<uint64_t>(firstOf<CUstream>(a...)) ^
                                             reinterpret_cast<uint64_t>(firstOf<CUevent>(a...)));
}

// What a Setting call (driver_api.def) means for the launches graft holds,
// which were asked for under the attribute's current value.
struct SettingChange {
  enum Kind { None, Any, SharedMemAbove } kind = None;
  int value = 0;              // SharedMemAbove, allowance: the new allowance
  CUfunction funcs[2] = {};   // SharedMemAbove, allowance: the kernel's handles (a CUkernel and its function here)
  // The dynamic shared memory allowance changes (or may: unreadable before):
  // the kernel registry reads it again once the driver took it
  // (KernelRegistry::noteAllowanceSet).
  bool allowance = false;
  bool everyKernel = false;  // Any, for every kernel (the context's cache preference)
  uint64_t preferenceKey = 0;  // a kernel's cache preference: Runtime::noteCachePreference once the driver took it
};
// kind None: the call changes nothing they depend on (the same value again,
// a preference such as the carveout); SharedMemAbove: a lowered dynamic shared
// memory allowance refuses only a held launch of this kernel that asks for
// more; Any: another change (an unreadable current value counts as one).
inline SettingChange settingChange(bool read, CUfunction_attribute attrib, int current, int value) {
  SettingChange c;
  if (read) {
    switch (attrib) {
      case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (value >= current) return c;  // a larger allowance refuses no launch made under the smaller one
        c.kind = SettingChange::SharedMemAbove;
        c.value = value;
        return c;
      case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return c;  // a preference: the same results either way
      // (The shared-memory carveout is more than a preference: it sets how
      // many blocks fit on an SM, so whether the driver takes a cooperative
      // launch of the kernel; tests/gpu/traps_driver2.cu, carveout_cooperative.
      // A change is handled as any other, below.)
      default:
        if (value == current) return c;
        break;
    }
  }
  GRAFT_TRACE("kernel attribute {} set from {} to {}: the launches graft holds are issued first", int(attrib),
              current, value);
  c.kind = SettingChange::Any;
  return c;
}
template <ApiId Id>
SettingChange settingChange(CUfunction f, CUfunction_attribute attrib, int value) {
  static_assert(Id == ApiId::k_cuFuncSetAttribute_9000);
  int current = 0;
  const auto get = real<ApiId::k_cuFuncGetAttribute_2020>();
  const bool read = get && get(&current, attrib, f) == CUDA_SUCCESS;  // before `current` is passed on
  SettingChange c = settingChange(read, attrib, current, value);
  c.funcs[0] = f;
  c.allowance = attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && (!read || value != current);
  c.value = value;
  return c;
}
template <ApiId Id>
SettingChange settingChange(CUfunction_attribute attrib, int value, CUkernel kernel, CUdevice device) {
  static_assert(Id == ApiId::k_cuKernelSetAttribute_12000);
  int current = 0;
  const auto get = real<ApiId::k_cuKernelGetAttribute_12000>();
  const bool read = get && get(&current, attrib, kernel, device) == CUDA_SUCCESS;  // before `current` is passed on
  SettingChange c = settingChange(read, attrib, current, value);
  // A launch names the kernel by its handle or by its function in the
  // current context (another device's launches cannot be held here).
  c.funcs[0] = reinterpret_cast<CUfunction>(kernel);
  c.allowance = attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && (!read || value != current);
  c.value = value;
  // For another device than the current context's: held launches there name
  // the kernel's function in that context, which graft cannot tell from
  // here, so a lowering issues everything held first.
  CUdevice here = -1;
  if (const auto ctxDevice = real<ApiId::k_cuCtxGetDevice_2000>();
      c.kind == SettingChange::SharedMemAbove && (!ctxDevice || ctxDevice(&here) != CUDA_SUCCESS || here != device)) {
    c.kind = SettingChange::Any;
    return c;
  }
  const auto function = real<ApiId::k_cuKernelGetFunction_12000>();
  if ((c.kind == SettingChange::SharedMemAbove || c.allowance) &&
      (!function || function(&c.funcs[1], kernel) != CUDA_SUCCESS)) {
    c.funcs[1] = nullptr;
    if (c.kind == SettingChange::SharedMemAbove) c.kind = SettingChange::Any;
  }
  return c;
}
// A cache preference (cuFuncSetCacheConfig, cuKernelSetCacheConfig,
// cuCtxSetCacheConfig): Any when it changes (driver_api.def says why), None
// for the value the program last set there (the context's is read back).
// Under the engine lock.
template <ApiId Id>
constexpr bool kIsCachePreference = Id == ApiId::k_cuFuncSetCacheConfig_3000 ||
                                    Id == ApiId::k_cuKernelSetCacheConfig_12000 ||
                                    Id == ApiId::k_cuCtxSetCacheConfig_3020;
template <ApiId Id, typename... A>
SettingChange cachePreferenceChange(Runtime& rt, A... a) {
  SettingChange c;
  const int value = int(firstOf<CUfunc_cache>(a...));
  bool changes = true;
  if constexpr (Id == ApiId::k_cuCtxSetCacheConfig_3020) {
    CUfunc_cache current{};
    const auto get = real<ApiId::k_cuCtxGetCacheConfig_3020>();
    changes = !get || get(&current) != CUDA_SUCCESS || int(current) != value;
    c.everyKernel = true;
  } else if constexpr (Id == ApiId::k_cuKernelSetCacheConfig_12000) {
    const CUkernel kernel = firstOf<CUkernel>(a...);
    c.funcs[0] = reinterpret_cast<CUfunction>(kernel);
    c.preferenceKey =
        core::hashCombine(reinterpret_cast<uint64_t>(kernel), uint64_t(firstOf<CUdevice>(a...)) + 1);
    changes = rt.cachePreferenceDiffers(c.preferenceKey, value);
  } else {
    c.funcs[0] = firstOf<CUfunction>(a...);
    c.preferenceKey = reinterpret_cast<uint64_t>(c.funcs[0]);
    changes = rt.cachePreferenceDiffers(c.preferenceKey, value);
  }
  c.value = value;
  if (changes) {
    GRAFT_TRACE("cache preference set to {}: the launches graft holds are issued first", value);
    c.kind = SettingChange::Any;
  }
  return c;
}

// The launch state of the pre-4.0 launch API (cuFuncSetBlockShape,
// cuFuncSetSharedSize, cuParamSet*; driver_api.def says why): a change of
// the function named, until graft runs its launches eagerly (then none of
// them is held or in a graph). Under the engine lock.
template <ApiId Id>
constexpr bool kIsLegacyLaunchState =
    Id == ApiId::k_cuFuncSetBlockShape_2000 || Id == ApiId::k_cuFuncSetSharedSize_2000 ||
    Id == ApiId::k_cuParamSetSize_2000 || Id == ApiId::k_cuParamSeti_2000 || Id == ApiId::k_cuParamSetf_2000 ||
    Id == ApiId::k_cuParamSetv_2000 || Id == ApiId::k_cuParamSetTexRef_2000;
template <ApiId Id, typename... A>
SettingChange legacyLaunchStateChange(Runtime& rt, A... a) {
  SettingChange c;
  c.funcs[0] = firstOf<CUfunction>(a...);
  const graph::KernelInfo* info = rt.kernels().find(reinterpret_cast<uint64_t>(c.funcs[0]));
  if (!info || info->eager != core::EagerCause::LegacyLaunchApi) c.kind = SettingChange::Any;
  return c;
}

// A texture or surface reference's binding or sampling state (driver_api.def
// says why): what graft holds is issued first; no graph has a kernel that
// reads one (the driver refuses such a kernel in a capture), so none goes.
template <ApiId Id>
constexpr bool kIsTextureReference = apiInfo(Id).base.starts_with("cuTexRefSet") || Id == ApiId::k_cuSurfRefSetArray_3000;
inline SettingChange textureReferenceChange() {
  SettingChange c;
  c.kind = SettingChange::Any;
  return c;
}

// Whether the launches graft holds must be issued before the setting applies.
// (Under the engine lock.)
inline bool settingNeedsHeldIssued(const core::Engine& engine, const SettingChange& c) {
  if (c.kind != SettingChange::SharedMemAbove) return c.kind == SettingChange::Any;
  const bool refused = engine.anyHeld([&](const OpDesc& op) {
    if (op.kind != OpKind::Kernel) return false;
    const graph::KernelShape& ks = graph::kernelShapeOf(op);
    return (ks.func == reinterpret_cast<uint64_t>(c.funcs[0]) || ks.func == reinterpret_cast<uint64_t>(c.funcs[1])) &&
           ks.func != 0 && ks.sharedMem > uint32_t(c.value);
  });
  if (refused)
    GRAFT_TRACE("a kernel's dynamic shared memory allowance lowered to {} below a launch graft holds: the "
                "launches graft holds are issued first", c.value);
  return refused;
}

// cuCtxSetLimit of a limit a graph's kernels may have been made under
// (driver_api.def says which): whether the call changes its value (an
// unreadable value counts as a change). Calls the driver; not under the
// engine lock.
inline bool limitChangeDropsGraphs(CUlimit limit, size_t value) {
  switch (limit) {
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED: break;
    // The driver grows the stack for each launch as far as the kernel's code
    // says it needs, but a kernel whose depth the compiler cannot bound (a
    // recursion) needs the limit the program set. A graph made under a
    // smaller limit keeps it: raised later, such a kernel faulted from the
    // graph where its eager launch ran (an illegal address on an H200,
    // tests/gpu/traps_r37.cu, stack_limit_epochs). Lowered, a graph made
    // under the larger limit failed to launch (CUDA_ERROR_LAUNCH_FAILED,
    // the same trap; its kernels needed less than the new limit).
    case CU_LIMIT_STACK_SIZE: break;
    default: return false;  // set only before any launch, or a hint
  }
  size_t current = 0;
  const auto get = real<ApiId::k_cuCtxGetLimit_3010>();
  return !get || get(&current, limit) != CUDA_SUCCESS || current != value;
}

// What an UNLOADS call ends (Runtime::codeUnloading).
template <ApiId Id, typename... A>
UnloadedCode unloadedCode(A... a) {
  if constexpr (Id == ApiId::k_cuModuleUnload_2000)
    return {UnloadedCode::Module, reinterpret_cast<uint64_t>(firstOf<CUmodule>(a...))};
  else if constexpr (Id == ApiId::k_cuLibraryUnload_12000)
    return {UnloadedCode::Library, reinterpret_cast<uint64_t>(firstOf<CUlibrary>(a...))};
  else
    return {};
}

// A call that may end a context (trait ENDS_CONTEXT) names it by handle
// (cuCtxDestroy), as a device's primary one (cuDevicePrimaryCtxReset,
// cuDevicePrimaryCtxRelease) or through a green context made from a primary
// one (cuGreenCtxDestroy): the per-thread streams' proxies in it, taken
// before the call, and the device (-1: a handle, which may also be a primary
// context's, whose end the call's UNLOADS trait does not promise then).
inline std::pair<graph::PerThreadStreams::Proxies, int> proxiesEndedBy(CUcontext ctx) {
  return {graph::PerThreadStreams::proxiesOf(ctx), -1};
}
inline std::pair<graph::PerThreadStreams::Proxies, int> proxiesEndedBy(CUdevice device) {
  return {graph::PerThreadStreams::proxiesOfPrimary(device), device};
}
// cuGreenCtxDestroy: the primary context the green context was made from may
// end with it (its last reference); which device's is not asked here, so every
// primary context's proxies are candidates, each retired only if its primary
// context is no longer active afterwards.
inline std::pair<graph::PerThreadStreams::Proxies, int> proxiesEndedBy(CUgreenCtx) {
  return {graph::PerThreadStreams::proxiesOfAnyPrimary(), -1};
}

CUresult getProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status);

template <ApiId Id, int PT, typename Real, typename... A>
[[gnu::always_inline]] inline CUresult dispatch(Real realFn, A... a) {
  constexpr ApiInfo info = apiInfo(Id);
  if constexpr (info.klass == ApiClass::Resolver) {
    if constexpr (Id == ApiId::k_cuGetProcAddress_12000) {
      return getProcAddress(a...);
    } else {
      return getProcAddress(a..., nullptr);
    }
  } else {
    Runtime& rt = Runtime::get();
    rt.countClass(info.klass);
    if constexpr (info.klass == ApiClass::DriverLog) {
      if constexpr (Id == ApiId::k_cuLogsRegisterCallback_12090) {
        return graph::registerProgramLogCallback(realFn, a...);
      } else if constexpr (Id == ApiId::k_cuLogsCurrent_12090) {
        return graph::currentLogIndex(realFn, a...);
      } else if constexpr (Id == ApiId::k_cuLogsDumpToMemory_12090) {
        return graph::dumpLogsToMemory(realFn, a...);
      } else {
        static_assert(Id == ApiId::k_cuLogsDumpToFile_12090);
        return graph::dumpLogsToFile(realFn, a...);
      }
    } else if constexpr (info.traits & trait::ORDERED) {
      return submitOp<Id, PT>(rt, realFn, a...);
    } else if constexpr (info.traits & trait::ASYNC_ALLOC) {
      if constexpr (Id == ApiId::k_cuMemAllocAsync_11020) {
        return allocAsync<PT>(rt, realFn, a...);
      } else {
        // From a pool the program chose: the driver's.
        return allocRetryingAfterFlush(rt, directOn<Id, PT>(rt, streamKey(firstOf<CUstream>(a...), PT), realFn), a...);
      }
    } else if constexpr (info.traits & trait::ASYNC_FREE) {
      return freeAsync<PT>(rt, realFn, a...);
    } else if constexpr (Id == ApiId::k_cuMemFree_3020) {
      return freeSync(rt, realFn, a...);
    } else if constexpr (Id == ApiId::k_cuStreamCreate_2000 || Id == ApiId::k_cuStreamCreateWithPriority_5050 ||
                         Id == ApiId::k_cuGreenCtxStreamCreate_12050) {
      const CUresult r = realFn(a...);
      if (r == CUDA_SUCCESS) {
        auto lock = rt.engine().lock();
        const CUstream created = *firstOf<CUstream*>(a...);
        // A green context's stream is in that green context (its converted
        // CUcontext, which cuStreamGetCtx names), not in the current one.
        CUcontext ctx = currentContextUntimed();
        if constexpr (Id == ApiId::k_cuGreenCtxStreamCreate_12050) {
          CUcontext own = nullptr;
          if (real<ApiId::k_cuStreamGetCtx_9020>()(created, &own) == CUDA_SUCCESS && own) ctx = own;
        }
        rt.executor().noteStreamCreated(created, ctx);
        rt.engine().streamCreated(reinterpret_cast<StreamKey>(created), reinterpret_cast<uint64_t>(ctx));
      }
      return r;
    } else if constexpr (Id == ApiId::k_cuEventCreate_2000) {
      const CUresult r = realFn(a...);
      if (r == CUDA_SUCCESS) {
        auto lock = rt.engine().lock();
        rt.encoder().noteEventCreated(*firstOf<CUevent*>(a...), firstOf<unsigned int>(a...),
                                      currentContextUntimed());
      }
      return r;
    } else if constexpr (info.traits & trait::BEGIN) {
      {
        auto lock = rt.engine().lock();
        rt.engine().programCaptureBegin();
      }
      beforePerThreadCall<PT>(true, a...);
      const CUresult r = realFn(a...);
      if (r != CUDA_SUCCESS) {
        auto lock = rt.engine().lock();
        rt.engine().programCaptureEnd();
      }
      return r;
    } else if constexpr (info.traits & trait::END) {
      const CUresult r = realFn(a...);
      if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
          r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED) {
        auto lock = rt.engine().lock();
        rt.engine().programCaptureEnd();
      }
      return r;
    } else if constexpr (info.traits & trait::SYNC) {
      [[maybe_unused]] bool dropsGraphs = false;
      if constexpr (Id == ApiId::k_cuCtxSetLimit_3010) dropsGraphs = limitChangeDropsGraphs(a...);
      {
        auto lock = rt.engine().lock();
        rt.engine().hostBarrier(barrierHash<Id>(a...));
        if constexpr (info.traits & trait::UNLOADS) rt.codeUnloading(unloadedCode<Id>(a...));
      }
      beforePerThreadCall<PT>(info.klass == ApiClass::Copy || info.klass == ApiClass::Set, a...);
      if constexpr (info.traits & trait::ENDS_CONTEXT) {
        // A reset or a destroy ends the context (UNLOADS); a release (or a
        // detach, or a green context's destroy, which releases its primary
        // context) ends it only if it was the last reference.
        // (A release is taken for an unload, but whether it ended the context
        // is asked.)
        const auto [proxies, device] = proxiesEndedBy(a...);
        const CUresult r = realFn(a...);
        constexpr bool surelyEnds = (info.traits & trait::UNLOADS) && info.base != "cuDevicePrimaryCtxRelease" &&
                                    info.base != "cuCtxDetach" && info.base != "cuGreenCtxDestroy";
        if (r == CUDA_SUCCESS) {
          graph::PerThreadStreams::retireIfEnded(proxies, device, surelyEnds);
          if (pool::DevicePool* pool = rt.pool()) pool->contextsMayHaveEnded();
        }
        return r;
      }
      const CUresult r = realFn(a...);
      if constexpr (Id == ApiId::k_cuCtxSetLimit_3010) {
        // A graph's kernel nodes keep what they were made under, and a graph
        // launch is not checked against the new value.
        if (r == CUDA_SUCCESS && dropsGraphs) {
          auto lock = rt.engine().lock();
          rt.everyKernelAttributeChanged("a limit of the context changed");
        }
      }
      // The host waited for the GPU: graft's driver modes for queries end
      // (Engine::NotReadyStreak).
      if constexpr (info.base == "cuCtxSynchronize" || info.base == "cuStreamSynchronize" ||
                    info.base == "cuEventSynchronize") {
        if (r == CUDA_SUCCESS && rt.engine().streaksMayBeOpen()) [[unlikely]] {
          auto lock = rt.engine().lock();
          rt.engine().hostWaited();
        }
      }
      return r;
    } else if constexpr (info.klass == ApiClass::Setting) {
      // A kernel attribute that launches read when issued: those graft holds
      // were asked for under the value the call replaces.
      // Graph launches queued on graft's launch thread update their nodes
      // under the old value too: those with such a kernel node reach the
      // driver first.
      // Under the engine lock from reading the current value to noting the
      // new one, so that graft's launches (and its own retries under a raised
      // allowance, issueOp) and other threads' settings come before or after
      // it whole (two threads setting one kernel's attribute at once would
      // otherwise each read the value before the other's change).
      std::unique_lock<core::EngineMutex> lock = rt.engine().lock();
      if constexpr (Id == ApiId::k_cuKernelSetAttribute_12000 || Id == ApiId::k_cuKernelSetCacheConfig_12000)
        rt.kernels().noteKernelSet(firstOf<CUkernel>(a...));
      const SettingChange change = [&] {
        if constexpr (kIsCachePreference<Id>) return cachePreferenceChange<Id>(rt, a...);
        else if constexpr (kIsLegacyLaunchState<Id>) return legacyLaunchStateChange<Id>(rt, a...);
        else if constexpr (kIsTextureReference<Id>) return textureReferenceChange();
        else return settingChange<Id>(a...);
      }();
      if (change.kind != SettingChange::None) {
        if (settingNeedsHeldIssued(rt.engine(), change))
          rt.engine().hostBarrier(barrierHash<Id>(a...));
        else if (rt.executor().queuedLaunchNeedsSharedMem(change.funcs[0], change.funcs[1], uint32_t(change.value)))
          rt.engine().drainLaunches();
      }
      const CUresult r = realFn(a...);
      // Launches from now on are checked against the allowance in effect
      // (read again from the driver: a function's own value overrides its
      // kernel's, and a kernel's is per device): one asking for more is
      // refused at its call, as eagerly, not held.
      if (r == CUDA_SUCCESS && change.allowance)
        rt.kernels().noteAllowanceSet(change.funcs[0], change.funcs[1], Id == ApiId::k_cuKernelSetAttribute_12000);
      // Any other change (a required cluster shape, the permission for
      // non-portable cluster sizes): a graph's kernel node keeps what it was
      // made under, and a graph launch is not checked against the new value,
      // so the graphs with this kernel go (tests/gpu/traps_odd.cu,
      // cluster_attr_toggle).
      if constexpr (kIsCachePreference<Id>)
        if (r == CUDA_SUCCESS && change.preferenceKey) rt.noteCachePreference(change.preferenceKey, change.value);
      // Refused or not, the program uses the old launch API with this kernel.
      if constexpr (kIsLegacyLaunchState<Id>)
        if (change.kind != SettingChange::None) rt.kernels().noteLegacyLaunchState(change.funcs[0]);
      if (r == CUDA_SUCCESS && change.kind == SettingChange::Any && !change.allowance && !kIsTextureReference<Id>) {
        if (change.everyKernel) rt.everyKernelAttributeChanged("the context's cache preference changed");
        else rt.kernelAttributeChanged(change.funcs[0]);
      }
      return r;
    } else if constexpr (info.klass == ApiClass::Query) {
      const CUevent e = firstOf<CUevent>(a...);
      // A null event names nothing (not the legacy stream): the driver's error.
      if (Id == ApiId::k_cuEventQuery_2000 && !e) return realFn(a...);
      const StreamKey stream = e ? 0 : streamKey(firstOf<CUstream>(a...), PT);
      // A default stream is the current context's: with none current, the
      // driver's error; in another context, not the stream graft holds work on
      // (tests/gpu/traps_threads2.cu, ctx_legacy_query, thread_no_context_query).
      uint64_t context = 0;
      if (!e && core::isDefaultStream(stream)) {
        context = reinterpret_cast<uint64_t>(currentContext());
        if (!context) return realFn(a...);
      }
      {
        auto lock = rt.engine().lock();
        // An event the program destroyed while graft held its record: the
        // handle names no event for the program (Engine::eventDestroyDeferred).
        if (e && rt.engine().eventDestroyDeferred(reinterpret_cast<uint64_t>(e))) [[unlikely]]
          return CUDA_ERROR_INVALID_HANDLE;
        // Held work is not complete: graft answers for it (Engine::query).
        if (rt.engine().query(stream, reinterpret_cast<uint64_t>(e), barrierHash<Id>(a...), context) ==
            core::QueryAnswer::NotReady)
          return CUDA_ERROR_NOT_READY;
      }
      // A query of the per-thread stream makes no join (its wait would be new
      // work not done yet): the proxy's work is asked about first.
      if (graph::PerThreadStreams::owned() && namesPerThreadStream<PT>(a...)) [[unlikely]] {
        if (const CUresult proxy = graph::PerThreadStreams::queryProxy(); proxy != CUDA_SUCCESS)
          return proxy;
      }
      const CUresult r = realFn(a...);
      // The driver's CUDA_SUCCESS ends graft's streak of answers for the
      // target (Engine::NotReadyStreak), while one may be open.
      if (r == CUDA_SUCCESS && rt.engine().streaksMayBeOpen()) [[unlikely]] {
        auto lock = rt.engine().lock();
        rt.engine().queryCompleted(stream, reinterpret_cast<uint64_t>(e), context);
      }
      return r;
    } else if constexpr (info.klass == ApiClass::Lifecycle) {
      const CUstream s = firstOf<CUstream>(a...);
      const CUevent e = firstOf<CUevent>(a...);
      {
        auto lock = rt.engine().lock();
        if (e && rt.engine().eventDestroyDeferred(reinterpret_cast<uint64_t>(e))) [[unlikely]]
          return CUDA_ERROR_INVALID_HANDLE;  // destroyed already (its destruction deferred)
        if (e) rt.encoder().noteEventDestroyed(e);
        if (e && rt.engine().deferEventDestroy(reinterpret_cast<uint64_t>(e),
                                               reinterpret_cast<uint64_t>(currentContextUntimed())))
          return CUDA_SUCCESS;
        if (s) {
          // The context it had (the engine compares a later creation of its
          // handle with it: Engine::streamCreated), asked while it exists.
          rt.engine().noteStreamContext(streamKey(s, PT),
                                        reinterpret_cast<uint64_t>(rt.executor().streamContext(streamKey(s, PT))));
          rt.engine().releaseStream(streamKey(s, PT));
          rt.executor().forgetStream(s);
          // Its pool blocks: fenced while it exists, and no longer its handle's.
          if (pool::DevicePool* pool = rt.pool()) pool->streamDestroyed(reinterpret_cast<uint64_t>(s));
        }
      }
      return realFn(a...);
    } else {
      return realFn(a...);  // allocation, capture queries: forwarded as they are
    }
  }
}

// ---------------------------------------------------------------------------
// Wrappers: one per (function, variant), forwarding to the pointer replaced.

template <ApiId Id, int PT, typename Fn>
struct Wrapper;

// The wrapper's body, shared by the hot (stream-ordered) and the other wrappers.
template <ApiId Id, int PT, typename Fn, typename... A>
[[gnu::always_inline]] inline CUresult wrapperBody(A... a) {
  Fn realFn = reinterpret_cast<Fn>(g_hook.realDriver[size_t(Id)][PT].load(std::memory_order_relaxed));
  if (!realFn) [[unlikely]] {
    Runtime::ensureStarted(nullptr);
    realFn = reinterpret_cast<Fn>(g_hook.realDriver[size_t(Id)][PT].load(std::memory_order_relaxed));
    if constexpr (apiInfo(Id).klass == ApiClass::Resolver) {
      // graft did not start (GRAFT_DISABLE): the program linked against
      // libcuda still gets the driver's own resolver.
      if (!realFn) realFn = reinterpret_cast<Fn>(realDlsym(RTLD_NEXT, apiInfo(Id).symbol.data()));
      if (!realFn)
        if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL))
          realFn = reinterpret_cast<Fn>(realDlsym(lib, apiInfo(Id).symbol.data()));
    }
    if (!realFn) return CUDA_ERROR_NOT_FOUND;
  }
  if constexpr (apiInfo(Id).klass == ApiClass::Resolver) {
    if (Runtime::options().disable || Runtime::forkedChild()) return realFn(a...);
  } else if constexpr (apiInfo(Id).klass == ApiClass::DriverLog) {
    // Also from inside graft (t_inGraft): a callback of the program's runs
    // inside the failing call graft forwarded, or on graft's launch thread,
    // and reads the log as the program sees it. Takes no lock of graft's.
    if (!Runtime::active()) return realFn(a...);
    return dispatch<Id, PT>(realFn, a...);
  } else {
    if (t_inGraft || !Runtime::active()) [[unlikely]] return realFn(a...);
  }
  t_inGraft = true;
  const CUresult r = dispatch<Id, PT>(realFn, a...);
  // Whatever path the call took (held, forwarded in a rest, a host copy, an
  // allocation, a query): a sticky error ends replay before the next call.
  if constexpr (apiInfo(Id).klass != ApiClass::Resolver)
    if (r != CUDA_SUCCESS) [[unlikely]] noteStickyError(Runtime::get(), r);
  t_inGraft = false;
  return r;
}

// The ops a replay can hold (launches, device copies, memsets, event records
// and waits) are the per-op path: their wrappers are placed with it
// (core/hot_path.h).
template <ApiId Id, int PT, typename... A>
  requires(HasEncoder<Id>)
struct Wrapper<Id, PT, CUresult(CUDAAPI*)(A...)> {
  GRAFT_HOT static CUresult CUDAAPI call(A... a) {
    // Its exclusive time is what the stages inside leave out (the guard,
    // the mode checks, releasing the lock) and, for an op graft issues, the
    // driver's call.
    core::StageTimer timer(core::Stage::Intercept);
    return wrapperBody<Id, PT, CUresult(CUDAAPI*)(A...)>(a...);
  }
};

template <ApiId Id, int PT, typename... A>
struct Wrapper<Id, PT, CUresult(CUDAAPI*)(A...)> {
  static CUresult CUDAAPI call(A... a) { return wrapperBody<Id, PT, CUresult(CUDAAPI*)(A...)>(a...); }
};

// Wrapper addresses, [api][variant]; nullptr where graft does not wrap.
//
// Initialized statically (addresses the loader fills in), never by code that
// runs at load: a library the program links (cuBLAS, cuFFT, ...) may look up
// driver symbols from its own constructor, and the loader runs that before
// graft's constructors (a preloaded library is initialized last). The same
// holds for the exported symbols' slots below and every other global graft
// reaches from a lookup (tests: sim_early_lookups, and the preload check
// library-no-dynamic-initializers).
template <ApiId Id, int PT,
          bool Wrapped = apiInfo(Id).klass != ApiClass::Internal && (PT == 0 || apiInfo(Id).variant != Variant::NONE)>
struct WrapperOf {
  static constexpr typename ApiType<Id>::type fn = nullptr;
};
template <ApiId Id, int PT>
struct WrapperOf<Id, PT, true> {
  static constexpr typename ApiType<Id>::type fn = &Wrapper<Id, PT, typename ApiType<Id>::type>::call;
};
#define GRAFT_WRAPPER_ADDRESS(id, pt) reinterpret_cast<void*>(::graft::hook::WrapperOf<id, pt>::fn)

void* const kWrappers[kApiCount][2] = {
#define GRAFT_API(base, symbol, version, variant, klass, traits) \
  {GRAFT_WRAPPER_ADDRESS(ApiId::k_##base##_##version, 0), GRAFT_WRAPPER_ADDRESS(ApiId::k_##base##_##version, 1)},
#include "hook/driver_api.def"
#undef GRAFT_API
};

// Which wrapper stands for the real pointer `fn` of entry `id`: the default or
// the per-thread variant, or none (another ABI than graft's table).
void* wrapperForReal(ApiId id, void* fn) {
  for (int pt = 0; pt < 2; ++pt) {
    if (kWrappers[size_t(id)][pt] && fn == g_hook.realDriver[size_t(id)][pt].load(std::memory_order_relaxed))
      return kWrappers[size_t(id)][pt];
  }
  return nullptr;
}


// A driver function graft has no wrapper for (an ABI its table does not
// describe, or a function it does not know): what the program gets instead of
// `real`. Functions that may enqueue work or wait for it get a flushing
// forwarder, so nothing is reordered around what graft holds; a program
// capture graft cannot follow makes graft stop replaying.
void* undecodable(ApiId id, std::string_view name, void* real, int version) {
  bool flush = false;
  if (id != ApiId::Count) {
    const ApiInfo& info = apiInfo(id);
    if (info.klass == ApiClass::Internal || info.klass == ApiClass::Resolver) return real;
    if (info.traits & (trait::BEGIN | trait::END)) {
      Runtime::ensureStarted(nullptr);
      if (Runtime::active()) Runtime::get().noteUnwrapped(name, version);
      return real;
    }
    flush = (info.traits & (trait::ORDERED | trait::SYNC)) || info.klass == ApiClass::Query ||
            info.klass == ApiClass::Lifecycle || info.klass == ApiClass::Free;
  } else {
    flush = looksStreamOrdered(name);
  }
  if (!flush) return real;
  if (void* forwarder = flushingForwarder(real, name, version, id != ApiId::Count ? apiInfo(id).traits : 0))
    return forwarder;
  Runtime::ensureStarted(nullptr);
  if (Runtime::active()) Runtime::get().noteUnwrapped(name, version);
  return real;
}

CUresult getProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status) {
  PFN_cuGetProcAddress_v12000 gpa = Runtime::realGetProcAddress();
  if (!gpa) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = gpa(symbol, pfn, version, flags, status);
  if (r != CUDA_SUCCESS || !pfn || !*pfn || !symbol || Runtime::options().disable) return r;
  const ApiId id = findByBaseName(symbol, version);
  if (id != ApiId::Count && apiInfo(id).klass == ApiClass::Resolver) {
    // The resolver's lookup of itself must return graft's resolver too.
    *pfn = kWrappers[size_t(version >= 12000 ? ApiId::k_cuGetProcAddress_12000
                                             : ApiId::k_cuGetProcAddress_11030)][0];
    return r;
  }
  if (id != ApiId::Count) {
    if (apiInfo(id).klass == ApiClass::Internal) return r;
    if (void* w = wrapperForReal(id, *pfn)) {
      *pfn = w;
      return r;
    }
  }
  const ApiId anyAbi = id != ApiId::Count ? id : findByBaseName(symbol, 1 << 30);
  *pfn = undecodable(anyAbi, symbol, *pfn, version);
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------
// dlsym

using DlsymFn = void* (*)(void*, const char*);

// Not instrumented in a sanitizer build (GRAFT_UNINSTRUMENTED): a sanitizer's
// runtime, loaded after graft, resolves its interceptors through dlsym, which
// is graft's, before it has set itself up.
GRAFT_UNINSTRUMENTED DlsymFn realDlsymFn() {
  // Atomic builtins, not std::atomic's (instrumented) functions; two threads
  // that race here look the same pointer up twice.
  static DlsymFn fn = nullptr;
  DlsymFn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
  if (!f) {
    f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (!f) f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
  }
  return f;
}

void* realDlsym(void* handle, const char* name) { return realDlsymFn()(handle, name); }

}  // namespace graft::hook

using graft::hook::ApiClass;
using graft::hook::ApiId;
using graft::hook::Runtime;

// Benchmark-only (GRAFT_BENCH_SWITCH): 0 on success, -1 when refused (with a
// logged reason, except before the program uses CUDA).
extern "C" __attribute__((visibility("default"))) int graft_bench_set_mode(const char* mode) {
  using namespace graft::hook;
  if (!mode || !Runtime::active() || t_inGraft) return -1;
  t_inGraft = true;  // graft's own driver calls (flushing held ops) go straight through
  const bool ok = Runtime::get().switchModeForBenchmark(mode);
  t_inGraft = false;
  return ok ? 0 : -1;
}

// Decides whether graft answers a dlsym itself. Returns nullptr when it does
// not, and the stub below then tail-jumps to the real dlsym with the caller's
// return address intact (so RTLD_NEXT keeps meaning "after the caller").
// Both are `used`: only the stub's top-level asm names them, which link-time
// optimization (-Db_lto=true) does not see, so it would drop them.
extern "C" {
__attribute__((visibility("hidden"), used)) void* graft_real_dlsym_ptr = nullptr;
}

// Uninstrumented up to the name check (see realDlsymFn); driver names go on in
// driverSymbolLookup.
static void* driverSymbolLookup(void* handle, const char* name);

extern "C" __attribute__((visibility("hidden"), used)) GRAFT_UNINSTRUMENTED void* graft_dlsym_lookup(
    void* handle, const char* name) {
  if (!graft_real_dlsym_ptr) graft_real_dlsym_ptr = reinterpret_cast<void*>(graft::hook::realDlsymFn());
  // Driver functions are named cu + capital letter (cublas…, cudnn…, cufft… are not).
  if (!name || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z') return nullptr;
  return driverSymbolLookup(handle, name);
}

static void* driverSymbolLookup(void* handle, const char* name) {
  if (Runtime::options().disable) return nullptr;
  bool perThread = false;
  const ApiId id = graft::hook::findBySymbol(name, &perThread);
  if (id != ApiId::Count && graft::hook::apiInfo(id).klass == ApiClass::Internal) return nullptr;
  void* fn = graft::hook::realDlsym(handle, name);
  if (!fn) return nullptr;
  if (graft::hook::insideGraft(fn)) return fn;  // graft's own export (e.g. via RTLD_DEFAULT)
  Runtime::ensureStarted(id != ApiId::Count ? handle : nullptr);
  if (!Runtime::active()) return nullptr;
  if (id != ApiId::Count) {
    void* w = graft::hook::kWrappers[size_t(id)][perThread ? 1 : 0];
    if (w && (graft::hook::apiInfo(id).klass == ApiClass::Resolver ||
              fn == graft::hook::g_hook.realDriver[size_t(id)][perThread ? 1 : 0].load()))
      return w;
  }
  // An exported symbol graft has no wrapper for: e.g. an older ABI's name.
  const ApiId anyAbi = id != ApiId::Count ? id : graft::hook::findByBaseName(name, 1 << 30);
  void* answer = graft::hook::undecodable(anyAbi, name, fn, 0);
  return answer == fn ? nullptr : answer;
}

#if defined(__x86_64__)
// Top-level asm restores the section it found (.pushsection/.popsection): the
// compiler does not know the asm changed it, and without optimization (which
// keeps top-level statements in source order) it would emit the data that
// follows into .text.
asm(R"(
  .pushsection .text
  .globl dlsym
  .type dlsym, @function
dlsym:
  .cfi_startproc
  push %rdi
  .cfi_adjust_cfa_offset 8
  push %rsi
  .cfi_adjust_cfa_offset 8
  sub $8, %rsp
  .cfi_adjust_cfa_offset 8
  call graft_dlsym_lookup
  add $8, %rsp
  .cfi_adjust_cfa_offset -8
  pop %rsi
  .cfi_adjust_cfa_offset -8
  pop %rdi
  .cfi_adjust_cfa_offset -8
  test %rax, %rax
  jnz 1f
  jmp *graft_real_dlsym_ptr(%rip)
1:
  ret
  .cfi_endproc
  .size dlsym, .-dlsym
  .popsection
)");
#else
extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  if (void* p = graft_dlsym_lookup(handle, name)) return p;
  return graft::hook::realDlsym(handle, name);  // note: RTLD_NEXT is then relative to graft
}
#endif

// ---------------------------------------------------------------------------
// Exported cu* symbols for programs linked against libcuda: each is a jump
// through a slot holding the matching wrapper.

#define GRAFT_SLOT_NONE(slot, id)
// Nested macros get pre-pasted names and strings only: a table symbol may
// also be a macro in cuda.h (cuStreamBeginCapture -> ..._v2).
#define GRAFT_SLOT_PTSZ(slot, id)                                     \
  extern "C" {                                                        \
  __attribute__((visibility("hidden"), used)) void* slot##_ptsz =     \
      GRAFT_WRAPPER_ADDRESS(id, 1);                                   \
  }
#define GRAFT_SLOT_PTDS(slot, id)                                     \
  extern "C" {                                                        \
  __attribute__((visibility("hidden"), used)) void* slot##_ptds =     \
      GRAFT_WRAPPER_ADDRESS(id, 1);                                   \
  }
#define GRAFT_EXPORT_ASM(name)                                                  \
  asm(".pushsection .text\n.globl " name "\n.type " name ", @function\n" name ":\n" \
      "  jmp *graft_slot_" name "(%rip)\n.size " name ", .-" name "\n.popsection\n");
#define GRAFT_EXPORT_NONE(name)
#define GRAFT_EXPORT_PTSZ(name) GRAFT_EXPORT_ASM(name "_ptsz")
#define GRAFT_EXPORT_PTDS(name) GRAFT_EXPORT_ASM(name "_ptds")

#define GRAFT_EXPORTED_Launch 1
#define GRAFT_EXPORTED_Copy 1
#define GRAFT_EXPORTED_Set 1
#define GRAFT_EXPORTED_EventRecord 1
#define GRAFT_EXPORTED_StreamWait 1
#define GRAFT_EXPORTED_Barrier 1
#define GRAFT_EXPORTED_Query 1
#define GRAFT_EXPORTED_Alloc 1
#define GRAFT_EXPORTED_Free 1
#define GRAFT_EXPORTED_HostFunc 1
#define GRAFT_EXPORTED_Capture 1
#define GRAFT_EXPORTED_GraphLaunch 1
#define GRAFT_EXPORTED_StreamOrdered 1
#define GRAFT_EXPORTED_Lifecycle 1
#define GRAFT_EXPORTED_Setting 1
#define GRAFT_EXPORTED_DriverLog 1
#define GRAFT_EXPORTED_Resolver 1
#define GRAFT_EXPORTED_Internal 0

#define GRAFT_IF_0(...)
#define GRAFT_IF_1(...) __VA_ARGS__
#define GRAFT_IF(c, ...) GRAFT_IF_(c, __VA_ARGS__)
#define GRAFT_IF_(c, ...) GRAFT_IF_##c(__VA_ARGS__)

#define GRAFT_API(base, symbol, version, variant, klass, traits)                                  \
  GRAFT_IF(GRAFT_EXPORTED_##klass,                                                              \
           extern "C" {                                                                         \
             __attribute__((visibility("hidden"), used)) void* graft_slot_##symbol =              \
                 GRAFT_WRAPPER_ADDRESS(ApiId::k_##base##_##version, 0);                         \
           }                                                                                    \
           GRAFT_SLOT_##variant(graft_slot_##symbol, ApiId::k_##base##_##version)              \
               GRAFT_EXPORT_ASM(#symbol) GRAFT_EXPORT_##variant(#symbol))
#include "hook/driver_api.def"
#undef GRAFT_API
