#include "pool/device_pool.h"

#include <algorithm>

#include "log/log.h"

namespace graft::pool {
namespace {
constexpr uint64_t kMinClassBytes = 256;
}  // namespace

bool DevicePool::initLocked() {
  if (initialized_) return usable_;
  initialized_ = true;
  usable_ = setUpLocked();
  if (!usable_)
    GRAFT_WARN("GRAFT_POOL=1: graft's pool could not be set up on this device (virtual memory management, or "
               "GRAFT_POOL_GB={} GiB of addresses); stream-ordered allocations go to the driver",
               reserve_bytes_ >> 30);
  return usable_;
}

bool DevicePool::setUpLocked() {
  if (!driver_.getGranularity || !driver_.addressReserve || !driver_.create || !driver_.map ||
      !driver_.setAccess || !driver_.release || !driver_.ctxGetDevice || !driver_.eventCreate ||
      !driver_.eventRecord || !driver_.eventQuery)
    return false;
  if (driver_.ctxGetDevice(&device_) != CUDA_SUCCESS) return false;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  if (driver_.getGranularity(&granularity_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
      granularity_ == 0)
    return false;
  reserve_bytes_ = (reserve_bytes_ + granularity_ - 1) / granularity_ * granularity_;
  if (driver_.addressReserve(&base_, reserve_bytes_, 0, 0, 0) != CUDA_SUCCESS) return false;
  stats_.reservedBytes = reserve_bytes_;
  return true;
}

uint32_t DevicePool::classOf(size_t bytes, uint64_t* classBytes) const {
  // Powers of two up to the granularity; multiples of the granularity above.
  uint64_t b = std::max<uint64_t>(bytes, kMinClassBytes);
  if (b <= granularity_) {
    uint64_t c = kMinClassBytes;
    uint32_t k = 0;
    while (c < b) c <<= 1, ++k;
    *classBytes = c;
    return k;
  }
  const uint64_t units = (b + granularity_ - 1) / granularity_;
  *classBytes = units * granularity_;
  return uint32_t(64 + units);  // distinct from the power-of-two classes
}

bool DevicePool::mapLocked(uint64_t bytes, CUdeviceptr* out) {
  if (next_ + bytes > reserve_bytes_) return false;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  CUmemGenericAllocationHandle handle = 0;
  if (driver_.create(&handle, bytes, &prop, 0) != CUDA_SUCCESS) return false;
  const CUdeviceptr at = base_ + next_;
  if (driver_.map(at, bytes, 0, handle, 0) != CUDA_SUCCESS) {
    driver_.release(handle);
    return false;
  }
  driver_.release(handle);  // the mapping keeps the memory alive
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (driver_.setAccess(at, bytes, &access, 1) != CUDA_SUCCESS) return false;
  next_ += bytes;
  stats_.mappedBytes += bytes;
  *out = at;
  return true;
}

bool DevicePool::carveLocked(uint32_t cls, uint64_t classBytes, CUdeviceptr* out) {
  if (classBytes >= granularity_) return mapLocked(classBytes, out);
  auto& cursor = carving_[cls];
  if (cursor.second < classBytes) {
    CUdeviceptr chunk = 0;
    if (!mapLocked(granularity_, &chunk)) return false;
    cursor = {chunk, granularity_};
  }
  *out = cursor.first;
  cursor.first += classBytes;
  cursor.second -= classBytes;
  return true;
}

void DevicePool::noteContextLocked(uint64_t ctx) {
  if (!ctx || !driver_.ctxGetId || known_contexts_.count(ctx)) return;
  unsigned long long id = 0;
  if (driver_.ctxGetId(reinterpret_cast<CUcontext>(ctx), &id) == CUDA_SUCCESS) known_contexts_[ctx] = id;
}

uint64_t DevicePool::currentContextLocked() {
  CUcontext c = nullptr;
  if (!driver_.ctxGetCurrent || driver_.ctxGetCurrent(&c) != CUDA_SUCCESS) return 0;
  noteContextLocked(reinterpret_cast<uint64_t>(c));
  return reinterpret_cast<uint64_t>(c);
}

CUevent DevicePool::fenceFor(uint64_t stream, uint64_t ctx) {
  const uint64_t key = fenceKey(stream, ctx);
  auto current = stream_fence_.find(key);
  if (current != stream_fence_.end() && unfenced_[key] == 0) return current->second;
  // Frees on `stream` since its last fence: record a new fence after them,
  // with an event of the current context (a spare one made in it, or new).
  const uint64_t madeIn = currentContextLocked();
  CUevent e = nullptr;
  for (size_t i = spare_events_.size(); i-- > 0 && !e;) {
    if (event_context_[spare_events_[i]] != madeIn) continue;
    e = spare_events_[i];
    spare_events_.erase(spare_events_.begin() + std::ptrdiff_t(i));
  }
  if (!e) {
    if (driver_.eventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return nullptr;
    event_context_[e] = madeIn;
  }
  if (driver_.eventRecord(e, reinterpret_cast<CUstream>(stream)) != CUDA_SUCCESS) {
    spare_events_.push_back(e);
    return nullptr;
  }
  if (current != stream_fence_.end() && fence_refs_[current->second] == 0) {
    spare_events_.push_back(current->second);
    fence_refs_.erase(current->second);
  }
  stream_fence_[key] = e;
  unfenced_[key] = 0;
  return e;
}

void DevicePool::takeLocked(std::vector<FreeBlock>& list, size_t index, CUdeviceptr* out) {
  const FreeBlock b = list[index];
  list.erase(list.begin() + std::ptrdiff_t(index));
  if (b.fence && --fence_refs_[b.fence] == 0) {
    auto current = stream_fence_.find(fenceKey(b.stream, b.ctx));
    if (current == stream_fence_.end() || current->second != b.fence) {
      spare_events_.push_back(b.fence);
      fence_refs_.erase(b.fence);
    }
  }
  *out = b.ptr;
}

bool DevicePool::allocate(size_t bytes, uint64_t stream, uint64_t ctx, CUdeviceptr* out) {
  std::lock_guard<std::mutex> guard(mutex_);
  checkContextsIfAskedLocked();
  CUdevice current = 0;
  if (bytes == 0 || !initLocked() || driver_.ctxGetDevice(&current) != CUDA_SUCCESS || current != device_) {
    ++stats_.declined;
    return false;
  }
  uint64_t classBytes = 0;
  const uint32_t cls = classOf(bytes, &classBytes);
  auto& list = free_[cls];
  bool found = false;
  // Freed on this stream (or after a device synchronize): reusable at once.
  for (size_t i = list.size(); i-- > 0 && !found;) {
    // (The legacy stream's key names every context's legacy stream.)
    if ((list[i].stream == stream && (stream != kLegacyStream || list[i].ctx == ctx)) || list[i].stream == 0) {
      takeLocked(list, i, out);
      ++stats_.reusedSameStream;
      found = true;
    }
  }
  // Freed on another stream: once a fence recorded after the free has completed.
  for (size_t i = list.size(); i-- > 0 && !found;) {
    FreeBlock& b = list[i];
    // Another context's legacy stream: a fence recorded now would go on this
    // context's.
    if (b.stream == kLegacyStream && b.ctx != ctx) continue;
    if (!b.fence) {
      if (b.stream == kDestroyedStream) continue;  // its fence failed: kept, never reused
      b.fence = fenceFor(b.stream, b.ctx);
      if (!b.fence) continue;
      ++fence_refs_[b.fence];
    }
    if (driver_.eventQuery(b.fence) == CUDA_SUCCESS) {
      takeLocked(list, i, out);
      ++stats_.reusedAfterFence;
      found = true;
    }
  }
  if (!found && !carveLocked(cls, classBytes, out)) {
    ++stats_.declined;
    return false;
  }
  noteContextLocked(ctx);
  live_[*out] = Live{cls, classBytes, ctx};
  ++stats_.allocations;
  stats_.inUseBytes += classBytes;
  stats_.peakInUseBytes = std::max(stats_.peakInUseBytes, stats_.inUseBytes);
  return true;
}

bool DevicePool::owns(CUdeviceptr p) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return live_.count(p) != 0;
}

void DevicePool::freeAsync(CUdeviceptr p, uint64_t stream, uint64_t ctx) {
  std::lock_guard<std::mutex> guard(mutex_);
  checkContextsIfAskedLocked();
  auto it = live_.find(p);
  if (it == live_.end()) return;
  noteContextLocked(ctx);
  free_[it->second.sizeClass].push_back(FreeBlock{p, stream ? stream : 1, nullptr, ctx});
  ++unfenced_[fenceKey(stream ? stream : kLegacyStream, ctx)];
  stats_.inUseBytes -= it->second.bytes;
  live_.erase(it);
}

void DevicePool::freeNow(CUdeviceptr p) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = live_.find(p);
  if (it == live_.end()) return;
  free_[it->second.sizeClass].push_back(FreeBlock{p, 0, nullptr, 0});
  stats_.inUseBytes -= it->second.bytes;
  live_.erase(it);
}

uint64_t DevicePool::allocationContext(CUdeviceptr p) const {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = live_.find(p);
  return it == live_.end() ? 0 : it->second.ctx;
}

void DevicePool::streamDestroyed(uint64_t stream) {
  std::lock_guard<std::mutex> guard(mutex_);
  checkContextsIfAskedLocked();
  if (!stream || stream == kLegacyStream) return;
  for (auto& [cls, list] : free_) {
    for (FreeBlock& b : list) {
      if (b.stream != stream) continue;
      // Fenced on the stream while it exists (a block whose fence fails is
      // kept and never reused: nothing can be recorded on a destroyed stream).
      if (!b.fence) {
        b.fence = fenceFor(stream, b.ctx);
        if (b.fence) ++fence_refs_[b.fence];
      }
      b.stream = kDestroyedStream;
    }
  }
  // A new stream with this handle starts with no frees and no fence (the
  // fences the blocks hold stay theirs, counted in fence_refs_).
  if (auto current = stream_fence_.find(stream); current != stream_fence_.end()) {
    if (fence_refs_[current->second] == 0) {
      spare_events_.push_back(current->second);
      fence_refs_.erase(current->second);
    }
    stream_fence_.erase(current);
  }
  unfenced_.erase(stream);
}

void DevicePool::contextsMayHaveEnded() {
  std::lock_guard<std::mutex> guard(mutex_);
  check_contexts_.store(false, std::memory_order_relaxed);
  contextsMayHaveEndedLocked();
}

void DevicePool::contextsMayHaveEndedLocked() {
  if (!driver_.ctxGetId) return;
  std::vector<uint64_t> ended;
  for (const auto& [ctx, id] : known_contexts_) {
    unsigned long long now = 0;
    if (driver_.ctxGetId(reinterpret_cast<CUcontext>(ctx), &now) != CUDA_SUCCESS || now != id) ended.push_back(ctx);
  }
  if (ended.empty()) return;
  auto isEnded = [&](uint64_t ctx) { return ctx && std::find(ended.begin(), ended.end(), ctx) != ended.end(); };
  auto eventEnded = [&](CUevent e) {
    auto it = event_context_.find(e);
    return it != event_context_.end() && isEnded(it->second);
  };
  // Blocks freed in an ended context: its end finished their stream's work.
  // A fence made in an ended context is gone: a new one is recorded when needed.
  for (auto& [cls, list] : free_) {
    for (FreeBlock& b : list) {
      if (isEnded(b.ctx)) b = FreeBlock{b.ptr, 0, nullptr, 0};
      else if (b.fence && eventEnded(b.fence)) b.fence = nullptr;
    }
  }
  for (auto it = stream_fence_.begin(); it != stream_fence_.end();) {
    if (eventEnded(it->second) || (it->first & 1 && isEnded(it->first & ~uint64_t(1)))) {
      unfenced_.erase(it->first);
      it = stream_fence_.erase(it);
    } else {
      ++it;
    }
  }
  for (uint64_t ctx : ended) unfenced_.erase(ctx | 1);
  std::erase_if(spare_events_, eventEnded);
  // The fences blocks still wait on, counted again.
  fence_refs_.clear();
  for (auto& [cls, list] : free_)
    for (const FreeBlock& b : list)
      if (b.fence) ++fence_refs_[b.fence];
  std::erase_if(event_context_, [&](const auto& kv) { return isEnded(kv.second); });
  for (uint64_t ctx : ended) known_contexts_.erase(ctx);
}

PoolStats DevicePool::stats() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return stats_;
}

}  // namespace graft::pool
