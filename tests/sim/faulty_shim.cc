// faulty_shim.cc - negative control for the oracle: an LD_PRELOAD library that
// interposes the driver like graft does (dlsym, the cuGetProcAddress self-lookup,
// exported cu* symbols) and injects one fault into kernel launches:
//
//   FAULTY_SHIM=none    forward everything (must pass: the plumbing is transparent)
//   FAULTY_SHIM=drop    the Nth cuLaunchKernel is not issued
//   FAULTY_SHIM=swap    the Nth cuLaunchKernel is issued after the next launch on the
//                       same stream (flushed in order at any synchronize)
//   FAULTY_SHIM=delay   the Nth cuLaunchKernel is issued only after the next
//                       cuStreamSynchronize / cuCtxSynchronize has returned
//   FAULTY_SHIM=stale   from the Nth launch on, the first launch of a kernel whose
//                       parameters changed since its previous launch is issued with
//                       the previous parameters (an un-patched replay)
//   FAULTY_SHIM=dup     the Nth cuLaunchKernel is issued twice
//   FAULTY_SHIM_NTH=N   (default 40)
//
// Invariants: one wrapper per (function, per-thread variant), each forwarding to
// exactly the pointer it replaced; a held launch is deep-copied (parameter sizes
// from cuKernelGetParamInfo / cuFuncGetParamInfo; kernels whose layout is unknown
// are never held - the fault moves to the next launch).
#include <cuda.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

using DlsymFn = void* (*)(void*, const char*);
using GetProc2Fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using GetProc1Fn = CUresult (*)(const char*, void**, int, cuuint64_t);
using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);
using StreamSyncFn = CUresult (*)(CUstream);
using CtxSyncFn = CUresult (*)();
using ParamInfoFn = CUresult (*)(void*, size_t, size_t*, size_t*);

enum class Mode { None, Drop, Swap, Delay, Stale, Dup };

struct HeldLaunch {
  bool active = false;
  int variant = 0;
  CUfunction f = nullptr;
  unsigned g[3], b[3], shmem = 0;
  CUstream stream = nullptr;
  std::vector<uint8_t> params;
  std::vector<size_t> offsets;
};

struct Shim {
  std::mutex mu;
  Mode mode = Mode::None;
  long nth = 40;
  long launches = 0;
  bool armed = true;
  HeldLaunch held;
  std::map<CUfunction, HeldLaunch> previous;  // stale: last parameters per kernel
  GetProc2Fn realGetProc2 = nullptr;
  GetProc1Fn realGetProc1 = nullptr;
  LaunchFn realLaunch[2] = {nullptr, nullptr};
  StreamSyncFn realStreamSync[2] = {nullptr, nullptr};
  CtxSyncFn realCtxSync = nullptr;
  ParamInfoFn kernelParamInfo = nullptr, funcParamInfo = nullptr;
};

Shim& shim() {
  static Shim* s = [] {
    auto* p = new Shim();
    const char* m = std::getenv("FAULTY_SHIM");
    std::string mode = m ? m : "none";
    p->mode = mode == "drop"    ? Mode::Drop
              : mode == "swap"  ? Mode::Swap
              : mode == "delay" ? Mode::Delay
              : mode == "stale" ? Mode::Stale
              : mode == "dup"   ? Mode::Dup
                                : Mode::None;
    if (const char* n = std::getenv("FAULTY_SHIM_NTH")) p->nth = std::atol(n);
    return p;
  }();
  return *s;
}

DlsymFn realDlsym() {
  static DlsymFn fn = [] {
    auto f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (!f) f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    return f;
  }();
  return fn;
}

// Deep copy of a launch's parameters; false if the layout is unknown.
bool capture(Shim& s, CUfunction f, void** kernelParams, void** extra, HeldLaunch* h) {
  std::vector<size_t> offs, sizes;
  for (ParamInfoFn info : {s.kernelParamInfo, s.funcParamInfo}) {
    if (!info) continue;
    offs.clear();
    sizes.clear();
    size_t off, size;
    size_t i = 0;
    CUresult r;
    while ((r = info(reinterpret_cast<void*>(f), i, &off, &size)) == CUDA_SUCCESS) {
      offs.push_back(off);
      sizes.push_back(size);
      ++i;
    }
    if (r == CUDA_ERROR_INVALID_VALUE && i > 0) break;
    offs.clear();
  }
  if (offs.empty()) return false;
  size_t total = offs.back() + sizes.back();
  h->params.assign(total, 0);
  h->offsets = offs;
  if (kernelParams) {
    for (size_t i = 0; i < offs.size(); ++i) std::memcpy(h->params.data() + offs[i], kernelParams[i], sizes[i]);
  } else if (extra) {
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) std::memcpy(h->params.data(), extra[i + 1], total);
    }
  } else {
    return false;
  }
  return true;
}

CUresult issueHeld(Shim& s) {
  HeldLaunch h = s.held;
  s.held.active = false;
  std::vector<void*> args;
  for (size_t off : h.offsets) args.push_back(h.params.data() + off);
  return s.realLaunch[h.variant](h.f, h.g[0], h.g[1], h.g[2], h.b[0], h.b[1], h.b[2], h.shmem, h.stream, args.data(),
                                 nullptr);
}

CUresult launch(int variant, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shmem, CUstream stream, void** kp, void** extra) {
  Shim& s = shim();
  std::lock_guard<std::mutex> lk(s.mu);
  LaunchFn real = s.realLaunch[variant];
  ++s.launches;
  if (s.held.active && s.mode == Mode::Swap) {
    if (s.held.stream == stream && s.held.variant == variant) {
      CUresult r = real(f, gx, gy, gz, bx, by, bz, shmem, stream, kp, extra);  // the later launch first
      issueHeld(s);
      return r;
    }
  }
  if (s.mode == Mode::Stale && s.armed) {
    HeldLaunch now;
    if (capture(s, f, kp, extra, &now)) {
      auto prev = s.previous.find(f);
      if (s.launches >= s.nth && prev != s.previous.end() && prev->second.params != now.params) {
        s.armed = false;
        std::vector<void*> args;
        for (size_t off : prev->second.offsets) args.push_back(prev->second.params.data() + off);
        return real(f, gx, gy, gz, bx, by, bz, shmem, stream, args.data(), nullptr);
      }
      s.previous[f] = std::move(now);
    }
  }
  if (s.armed && s.mode != Mode::None && s.mode != Mode::Stale && s.launches >= s.nth) {
    if (s.mode == Mode::Drop) {
      s.armed = false;
      return CUDA_SUCCESS;
    }
    if (s.mode == Mode::Dup) {
      s.armed = false;
      real(f, gx, gy, gz, bx, by, bz, shmem, stream, kp, extra);
      return real(f, gx, gy, gz, bx, by, bz, shmem, stream, kp, extra);
    }
    HeldLaunch h;
    if (capture(s, f, kp, extra, &h)) {
      h.active = true;
      h.variant = variant;
      h.f = f;
      h.g[0] = gx, h.g[1] = gy, h.g[2] = gz;
      h.b[0] = bx, h.b[1] = by, h.b[2] = bz;
      h.shmem = shmem;
      h.stream = stream;
      s.held = std::move(h);
      s.armed = false;
      return CUDA_SUCCESS;
    }
  }
  return real(f, gx, gy, gz, bx, by, bz, shmem, stream, kp, extra);
}

CUresult launchPlain(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     unsigned shmem, CUstream stream, void** kp, void** extra) {
  return launch(0, f, gx, gy, gz, bx, by, bz, shmem, stream, kp, extra);
}
CUresult launchPt(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  unsigned shmem, CUstream stream, void** kp, void** extra) {
  return launch(1, f, gx, gy, gz, bx, by, bz, shmem, stream, kp, extra);
}

// Swap: a held launch that found no partner is flushed (in order) before a sync and
// the fault re-arms. Delay: the held launch is issued after a synchronization that
// covers it (context, or its own stream named the same way) has returned.
template <class Call>
CUresult synchronize(bool covers(const HeldLaunch&), Call call) {
  Shim& s = shim();
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.held.active && s.mode == Mode::Swap) {
    issueHeld(s);
    s.armed = true;
  }
  lk.unlock();
  CUresult r = call();
  lk.lock();
  if (s.held.active && s.mode == Mode::Delay && covers(s.held)) issueHeld(s);
  return r;
}

thread_local CUstream tlsSyncStream;
thread_local int tlsSyncVariant;

bool coversStream(const HeldLaunch& h) { return h.stream == tlsSyncStream && h.variant == tlsSyncVariant; }
bool coversAll(const HeldLaunch&) { return true; }

CUresult streamSyncPlain(CUstream h) {
  tlsSyncStream = h;
  tlsSyncVariant = 0;
  return synchronize(coversStream, [&] { return shim().realStreamSync[0](h); });
}
CUresult streamSyncPt(CUstream h) {
  tlsSyncStream = h;
  tlsSyncVariant = 1;
  return synchronize(coversStream, [&] { return shim().realStreamSync[1](h); });
}
CUresult ctxSync() {
  return synchronize(coversAll, [] { return shim().realCtxSync(); });
}

// Replaces the pointer a lookup returned where the shim wraps that function.
void wrap(const char* symbol, void** pfn, cuuint64_t flags) {
  Shim& s = shim();
  int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 1 : 0;
  std::string name = symbol;
  std::lock_guard<std::mutex> lk(s.mu);
  if (name == "cuLaunchKernel") {
    s.realLaunch[pt] = reinterpret_cast<LaunchFn>(*pfn);
    *pfn = reinterpret_cast<void*>(pt ? &launchPt : &launchPlain);
  } else if (name == "cuStreamSynchronize") {
    s.realStreamSync[pt] = reinterpret_cast<StreamSyncFn>(*pfn);
    *pfn = reinterpret_cast<void*>(pt ? &streamSyncPt : &streamSyncPlain);
  } else if (name == "cuCtxSynchronize") {
    s.realCtxSync = reinterpret_cast<CtxSyncFn>(*pfn);
    *pfn = reinterpret_cast<void*>(&ctxSync);
  }
}

void ensureIntrospection() {
  Shim& s = shim();
  if (s.kernelParamInfo || !s.realGetProc2) return;
  void* p = nullptr;
  if (s.realGetProc2("cuKernelGetParamInfo", &p, 12040, 0, nullptr) == CUDA_SUCCESS) {
    s.kernelParamInfo = reinterpret_cast<ParamInfoFn>(p);
  }
  if (s.realGetProc2("cuFuncGetParamInfo", &p, 12040, 0, nullptr) == CUDA_SUCCESS) {
    s.funcParamInfo = reinterpret_cast<ParamInfoFn>(p);
  }
}

CUresult getProc2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                  CUdriverProcAddressQueryResult* status);
CUresult getProc1(const char* symbol, void** pfn, int version, cuuint64_t flags);

CUresult getProc2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                  CUdriverProcAddressQueryResult* status) {
  Shim& s = shim();
  CUresult r = s.realGetProc2(symbol, pfn, version, flags, status);
  if (r != CUDA_SUCCESS || !symbol || !pfn || !*pfn) return r;
  ensureIntrospection();
  if (!std::strcmp(symbol, "cuGetProcAddress")) {
    if (*pfn == reinterpret_cast<void*>(s.realGetProc2)) {
      *pfn = reinterpret_cast<void*>(&getProc2);
    } else {
      s.realGetProc1 = reinterpret_cast<GetProc1Fn>(*pfn);
      *pfn = reinterpret_cast<void*>(&getProc1);
    }
    return r;
  }
  wrap(symbol, pfn, flags);
  return r;
}

CUresult getProc1(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  CUdriverProcAddressQueryResult st;
  return getProc2(symbol, pfn, version, flags, &st);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) {
  void* p = realDlsym()(handle, name);
  if (!p) return p;
  Shim& s = shim();
  if (!std::strcmp(name, "cuGetProcAddress_v2")) {
    s.realGetProc2 = reinterpret_cast<GetProc2Fn>(p);
    return reinterpret_cast<void*>(&getProc2);
  }
  if (!std::strcmp(name, "cuGetProcAddress")) {
    s.realGetProc1 = reinterpret_cast<GetProc1Fn>(p);
    return reinterpret_cast<void*>(&getProc1);
  }
  return p;
}

// Exported like graft's: programs linking libcuda directly reach these.
__attribute__((visibility("default"))) CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                               unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                                               CUstream stream, void** kp, void** extra) {
  Shim& s = shim();
  if (!s.realLaunch[0]) {
    s.realLaunch[0] = reinterpret_cast<LaunchFn>(realDlsym()(RTLD_NEXT, "cuLaunchKernel"));
    if (!s.realGetProc2) s.realGetProc2 = reinterpret_cast<GetProc2Fn>(realDlsym()(RTLD_NEXT, "cuGetProcAddress_v2"));
    ensureIntrospection();
  }
  return launch(0, f, gx, gy, gz, bx, by, bz, shmem, stream, kp, extra);
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                                                    cuuint64_t flags,
                                                                    CUdriverProcAddressQueryResult* status) {
  Shim& s = shim();
  if (!s.realGetProc2) s.realGetProc2 = reinterpret_cast<GetProc2Fn>(realDlsym()(RTLD_NEXT, "cuGetProcAddress_v2"));
  return getProc2(symbol, pfn, version, flags, status);
}

}  // extern "C"
