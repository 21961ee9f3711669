#include "core/hot_text.h"

#include <link.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/hot_arena.h"

namespace graft::core {
namespace {

constexpr uintptr_t kPage = 4096;

uintptr_t pageDown(uintptr_t a) { return a & ~(kPage - 1); }
uintptr_t pageUp(uintptr_t a) { return (a + kPage - 1) & ~(kPage - 1); }

struct FindObject {
  uintptr_t inside = 0;
  std::vector<LoadSegment> segments;
};

int collectSegments(dl_phdr_info* info, size_t, void* data) {
  auto* find = static_cast<FindObject*>(data);
  std::vector<LoadSegment> segments;
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || ph.p_memsz == 0) continue;
    LoadSegment s{info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz,
                  (ph.p_flags & PF_X) != 0};
    contains |= find->inside >= s.start && find->inside < s.end;
    segments.push_back(s);
  }
  if (!contains) return 0;
  find->segments = std::move(segments);
  return 1;  // stop
}

struct HotTextState {
  std::mutex mutex;
  bool tried = false;
  HotTextResult result;
};

HotTextState& state() {
  static HotTextState* s = new HotTextState();  // never destroyed
  return *s;
}

HotTextResult refuse(HotTextResult r, const char* why) {
  r.moved = false;
  r.why = why;
  return r;
}

}  // namespace

HotTextPlan planHotText(std::span<const LoadSegment> segments) {
  HotTextPlan plan;
  const LoadSegment* text = nullptr;
  uintptr_t spanStart = UINTPTR_MAX, spanEnd = 0;
  for (const LoadSegment& s : segments) {
    spanStart = std::min(spanStart, pageDown(s.start));
    spanEnd = std::max(spanEnd, pageUp(s.end));
    if (s.executable) {
      if (text) {
        plan.refusal = "the object has more than one executable segment";
        return plan;
      }
      text = &s;
    }
  }
  if (!text) {
    plan.refusal = "the object has no executable segment";
    return plan;
  }
  const uintptr_t window = text->start & ~uintptr_t(kHugePageBytes - 1);
  const uintptr_t windowEnd = window + kHugePageBytes;
  if (window < spanStart || windowEnd > spanEnd) {
    plan.refusal = "the 2 MiB window around graft's code reaches outside graft's own mapping";
    return plan;
  }
  for (const LoadSegment& s : segments) {
    if (&s == text) continue;
    if (pageDown(s.start) < windowEnd && pageUp(s.end) > window) {
      plan.refusal = "another segment of graft shares the 2 MiB window of its code";
      return plan;
    }
  }
  plan.window = window;
  plan.copyStart = pageDown(text->start);
  plan.copyEnd = std::min(pageUp(text->end), windowEnd);
  return plan;
}

HotTextResult moveHotText(const void* inside, bool requireHuge) {
  HotTextState& st = state();
  std::lock_guard lock(st.mutex);
  if (st.tried) return st.result;
  st.tried = true;
  HotTextResult r;

  FindObject find;
  find.inside = reinterpret_cast<uintptr_t>(inside);
  dl_iterate_phdr(collectSegments, &find);
  if (find.segments.empty()) return st.result = refuse(r, "the loaded object holding graft's code was not found");
  const HotTextPlan plan = planHotText(find.segments);
  if (!plan.window) return st.result = refuse(r, plan.refusal);
  r.window = plan.window;

  // A 2 MiB-aligned anonymous range, asked to be a huge page.
  void* raw = mmap(nullptr, 2 * kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return st.result = refuse(r, "cannot map memory for the copy");
  const uintptr_t rawStart = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t copy = (rawStart + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1);
  if (copy > rawStart) munmap(raw, copy - rawStart);
  if (copy + kHugePageBytes < rawStart + 2 * kHugePageBytes)
    munmap(reinterpret_cast<void*>(copy + kHugePageBytes), rawStart + 2 * kHugePageBytes - copy - kHugePageBytes);
  auto* copyPtr = reinterpret_cast<unsigned char*>(copy);
  auto dropCopy = [&](const char* why) {
    munmap(copyPtr, kHugePageBytes);
    return st.result = refuse(r, why);
  };
  const bool advised = madvise(copyPtr, kHugePageBytes, MADV_HUGEPAGE) == 0;
  if (!advised && requireHuge) return dropCopy("the kernel has no transparent huge pages for this process");
  // Outside the segment the window was inaccessible; int3 keeps a stray jump
  // there a fault rather than a slide through zeros.
  std::memset(copyPtr, 0xCC, kHugePageBytes);
  std::memcpy(copyPtr + (plan.copyStart - plan.window), reinterpret_cast<const void*>(plan.copyStart),
              plan.copyEnd - plan.copyStart);
  r.huge = hugePageBytesIn(copy, copy + kHugePageBytes) >= kHugePageBytes;
  if (!r.huge && requireHuge) return dropCopy("the kernel gave no huge page for the copy");
  // Executable before it replaces the original: a policy that forbids
  // executable anonymous memory refuses here, with the original untouched.
  if (mprotect(copyPtr, kHugePageBytes, PROT_READ | PROT_EXEC) != 0)
    return dropCopy("executable anonymous memory is not allowed here");
  if (mremap(copyPtr, kHugePageBytes, kHugePageBytes, MREMAP_MAYMOVE | MREMAP_FIXED,
             reinterpret_cast<void*>(plan.window)) == MAP_FAILED)
    return dropCopy("mremap onto graft's code failed");
  r.moved = true;
  r.why = "";
  return st.result = r;
}

HotTextResult hotTextResult() {
  HotTextState& st = state();
  std::lock_guard lock(st.mutex);
  return st.result;
}

// The fast lane's functions (GRAFT_FAST_LANE, core/hot_path.h) start at a
// page boundary: the linker sorts `.text.sorted.*` sections by name, this
// one's name sorts before theirs, and its alignment puts what follows it at
// a page start. So they span as few pages as their size allows, whatever the
// code before them weighs (a shifted layout put them across three pages,
// one more page per op; scripts/footprint).
[[gnu::used, gnu::aligned(4096), gnu::section(".text.sorted.graft_fast_lan")]] void fastLanePageStart() {}

}  // namespace graft::core
