// ZeroedArray: a fixed-size array whose elements start as all-zero bytes,
// backed by memory only where it has been written.
//
// graft sizes its rings (the history, the period detector's index) for the
// longest period it can find: tens of MiB. A std::vector of that size writes
// every element when it is made, so every process graft starts in paid for
// all of it at once, in page faults (about 5 ms on the development machine,
// most of graft's start-up), and kept it resident, though a short program
// touches a sliver. Here the pages come from an anonymous mapping, which the
// kernel gives as zero pages and backs on first write.
//
// T must be trivially copyable and destructible, and all-zero bytes must be
// a valid T (its "empty" state where the owner reads unwritten elements).
// Allocates (mmap) only in the constructor; a failed mapping throws
// std::bad_alloc, as a vector's allocation would. Not thread-safe; never
// calls the driver.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace graft::core {

template <typename T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "ZeroedArray holds plain data only");
  static_assert(alignof(T) <= 4096, "page alignment");

 public:
  ZeroedArray() = default;
  explicit ZeroedArray(size_t count) : size_(count) {
    if (count == 0) return;
    bytes_ = count * sizeof(T);
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
  }
  ZeroedArray(const ZeroedArray&) = delete;
  ZeroedArray& operator=(const ZeroedArray&) = delete;
  ZeroedArray(ZeroedArray&& o) noexcept { swap(o); }
  ZeroedArray& operator=(ZeroedArray&& o) noexcept {
    ZeroedArray(std::move(o)).swap(*this);
    return *this;
  }
  ~ZeroedArray() {
    if (data_) munmap(data_, bytes_);
  }

  size_t size() const { return size_; }
  // Every element zero again; large arrays give their pages back (they read
  // as zero pages until written), so clearing never brings the whole array
  // into memory. A system call for large arrays: not for the per-op path.
  void clear() {
    if (!data_) return;
    if (bytes_ >= kReleaseBytes && madvise(data_, bytes_, MADV_DONTNEED) == 0) return;
    std::memset(static_cast<void*>(data_), 0, bytes_);
  }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void swap(ZeroedArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(bytes_, o.bytes_);
  }
  static constexpr size_t kReleaseBytes = 64 * 1024;
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t bytes_ = 0;
};

}  // namespace graft::core
