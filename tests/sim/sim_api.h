/* sim_api.h - test-only C API exported by the simulated libcuda.so.1 (tests/sim).
 *
 * Invariants:
 *  - None of these functions is a driver call: they take no scheduler steps, are
 *    never subject to failure injection and are not seen by an interposer.
 *  - The executed trace lists every effect (kernel, memcpy, memset, host function)
 *    in the order the simulated device executed it, plus the markers set by simMark.
 *  - Pointers inside a SimEffect stay valid until simTraceClear().
 *
 * Kernels with a real effect on memory (parameters 0..2 are 8-byte values):
 *  - name starts with "sim_add": (uint64_t* dst, const uint64_t* src, uint64_t k)
 *        *dst = *src + k + w, w the kernel's required cluster width
 *        (CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 0 unless set) when the
 *        launch or graph node was made
 *  - name starts with "sim_mix": (uint64_t* dst, const uint64_t* src, uint64_t k)
 *        *dst = simMix64(*src ^ k)
 *  Any further parameters (e.g. a 64-bit tag) are carried but have no effect.
 */
#ifndef GRAFT_TESTS_SIM_SIM_API_H
#define GRAFT_TESTS_SIM_SIM_API_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum SimKernelFamily {
  SIM_KERNEL_LIBRARY = 0,  /* CUkernel: cuKernelGet{ParamInfo,Name} succeed, cuFuncGet* -> 400 */
  SIM_KERNEL_FUNCTION = 1, /* CUfunction: cuFuncGet{ParamInfo,Name} succeed, cuKernelGet* -> 400 */
  SIM_KERNEL_OPAQUE = 2    /* both families fail: callers cannot learn the parameter layout */
} SimKernelFamily;

/* Creates a kernel handle usable as CUfunction (and as CUkernel for the library
 * family). Parameter i is placed at the next multiple of aligns[i] (aligns may be
 * NULL: natural alignment = min(size rounded up to a power of two, 8)).
 * Returns NULL on bad arguments (an effect kernel whose first 3 params are not 8 bytes). */
CUfunction simKernelCreate(const char* name, SimKernelFamily family, unsigned nparams,
                           const size_t* sizes, const size_t* aligns);
/* Stack per thread the kernel needs: each launch of it (eager, or of a graph
 * holding it) grows its context's CU_LIMIT_STACK_SIZE to at least this, as
 * the driver does at launch. Returns 0, or -1 for an unknown kernel. */
int simKernelSetStackBytes(CUfunction kernel, size_t bytes);
/* Packed layout the simulator uses for a kernel (also for opaque kernels). */
size_t simKernelParamBytes(CUfunction kernel);
int simKernelParamLayout(CUfunction kernel, unsigned index, size_t* offset, size_t* size);

typedef enum SimEffectKind {
  SIM_EFFECT_KERNEL = 1,
  SIM_EFFECT_MEMCPY = 2,
  SIM_EFFECT_MEMSET = 3,
  SIM_EFFECT_HOST_FUNC = 4,
  SIM_EFFECT_MARKER = 5
} SimEffectKind;

typedef enum SimOrigin { SIM_ORIGIN_EAGER = 0, SIM_ORIGIN_GRAPH = 1 } SimOrigin;

typedef struct SimEffect {
  uint64_t index;           /* position in the executed trace */
  SimEffectKind kind;
  SimOrigin origin;
  CUgraphExec graphExec;    /* origin GRAPH: the exec that was launched */
  uint64_t graphLaunchId;   /* origin GRAPH: global 1-based number of that cuGraphLaunch */
  CUstream stream;          /* stream the op (or the graph) was enqueued on, as named by the
                               caller: a created handle, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD */
  uint64_t streamId;        /* unique per stream (each thread's per-thread stream differs) */
  /* SIM_EFFECT_KERNEL */
  CUfunction func;
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedMemBytes;
  const CUlaunchAttribute* attrs; /* launch attributes (pad bytes zeroed); cooperative
                                     launches carry CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 1 */
  unsigned numAttrs;
  const unsigned char* params;    /* packed parameter bytes, padding zeroed */
  size_t paramBytes;
  /* SIM_EFFECT_MEMCPY: addresses are device or host addresses (unified addressing).
     A 1-D copy has height = depth = 1 and all pitches/heights 0; depth 1 has heights 0. */
  uint64_t dst;
  uint64_t src;
  size_t widthBytes, height, depth, dstPitch, srcPitch, dstHeight, srcHeight;
  /* SIM_EFFECT_MEMSET: dst, dstPitch (0 when height is 1), height, and: */
  unsigned elementSize;
  uint32_t value;
  size_t widthElements;
  /* SIM_EFFECT_HOST_FUNC */
  CUhostFn fn;
  void* userData;
  /* SIM_EFFECT_MARKER */
  const char* label;
  /* Where it executed (not markers): the device ordinal and the context it ran in.
     Eager work runs in the context of its stream: for a stream of a green context
     (cuGreenCtxStreamCreate, or created while the green context's converted context
     was current) that is the converted context (cuCtxFromGreenCtx's handle), whichever
     context was current at the call. A graph's node runs in the context of the stream
     it was captured on (or given at cuGraphAdd*Node), wherever the graph is launched;
     a host node in its launch stream's. Streams of different contexts have different
     streamIds; CU_STREAM_LEGACY names a different stream in each context. Markers have
     device -1, context NULL. */
  int device;
  CUcontext context;
  /* SIM_EFFECT_KERNEL: the name of the kernel that ran (func may since have been
     unloaded and its handle value reused for another kernel). */
  const char* kernelName;
  /* The green context it ran in (the one `context` was converted from), or NULL. */
  CUgreenCtx greenContext;
} SimEffect;

size_t simTraceSize(void);
int simTraceGet(size_t index, SimEffect* out); /* 0 on success, -1 out of range */
void simTraceClear(void);
void simMark(const char* label);               /* appends a marker effect */

/* Scheduler: seeded (env SIM_SEED, default 1). Every driver call that enqueues or
 * synchronizes first executes a random number 0..maxSteps (env SIM_STEPS, default 3)
 * of runnable items; stream/event queries execute 1..maxSteps (a poller always makes
 * progress). Informational and object-creation calls take no steps, so an
 * interposer's own lookups do not change the schedule. */
void simSetSeed(uint64_t seed);
void simSetMaxSteps(unsigned maxSteps);

/* The nth call (counting from 1 after this call) of driver function `api` fails with
 * `code` and does nothing. `api` is an exported name ("cuGraphLaunch",
 * "cuStreamBeginCapture_v2") or a base name without _vN ("cuStreamBeginCapture"
 * matches both ABIs); _ptsz/_ptds variants count as their plain function.
 * Env: SIM_FAIL="cuGraphInstantiateWithFlags:3:999,cuGraphLaunch:10:700". */
void simInjectFailure(const char* api, int nth, CUresult code);
void simClearFailures(void);

typedef struct SimCounters {
  uint64_t graphInstantiations;   /* successful cuGraphInstantiate* */
  uint64_t graphLaunches;         /* successful cuGraphLaunch */
  uint64_t execNodeParamUpdates;  /* successful cuGraphExec*NodeSetParams */
  uint64_t captures;              /* successful cuStreamBeginCapture* */
  uint64_t eagerLaunches;         /* kernel launches enqueued eagerly (not captured) */
  uint64_t capturedLaunches;      /* kernel launches turned into capture nodes */
  uint64_t injectedFailures;      /* calls failed by simInjectFailure / SIM_FAIL */
  uint64_t effectsEager;          /* executed effects from eager work */
  uint64_t effectsGraph;          /* executed effects from graph launches */
  uint64_t allocsAsync;           /* successful cuMemAllocAsync */
  uint64_t freesAsyncRun;         /* cuMemFreeAsync frees executed (the memory went back) */
  uint64_t freesAsyncOffThread;   /* cuMemFreeAsync calls from another thread than the first
                                     cuMemAllocAsync's (graft's launch thread, in one-thread tests) */
} SimCounters;
void simCounters(SimCounters* out);

/* What another process that opened `event` through its IPC handle sees when it
 * waits on it (cuStreamWaitEvent then a synchronize there): the device runs until
 * the event's most recent record, as enqueued by this process so far, is done.
 * An event never recorded returns at once. 0 on success, -1 for an unknown event. */
int simEventWaitFromPeer(CUevent event);

/* Stream id the driver would use for `stream` named from the calling thread (in its
 * current context); perThreadVariant selects the _ptsz meaning of NULL. 0 if invalid. */
uint64_t simStreamId(CUstream stream, int perThreadVariant);

/* 1 if stream `streamId` is a blocking stream created (cuStreamCreate) by the thread
 * that owns per-thread stream `perThreadStreamId`, in its context: what graft's proxy
 * for that per-thread stream looks like (graft's graph/per_thread_streams.h). */
int simStreamStandsFor(uint64_t streamId, uint64_t perThreadStreamId);

static inline uint64_t simMix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

#ifdef __cplusplus
}
#endif

#endif /* GRAFT_TESTS_SIM_SIM_API_H */
