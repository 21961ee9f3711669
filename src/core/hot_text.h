// HotText: graft's own machine code moved onto one transparent huge page.
//
// Between two intercepted ops the program runs its own code (an interpreter,
// a dispatcher over hundreds of MiB of libraries), which evicts graft's code
// pages from the instruction TLB. graft's fast lane spans about five 4 KiB
// code pages per op (docs/PERF.md), so each op pays several page walks for
// code alone. The kernel does not put a shared library's file-backed text on
// huge pages, so HotText copies the executable segment into anonymous memory
// that it asks to be one huge page, and moves that copy onto the segment's own
// addresses (mremap): the code, its addresses and every pointer to it stay the
// same; only the page tables change.
//
// It needs a 2 MiB window around the segment that belongs to the object alone:
// libgraft is linked with -z max-page-size=0x200000, so its segments sit 2 MiB
// apart with holes between them (glibc 2.35+ also loads it 2 MiB-aligned).
// planHotText decides that from the segment list, and refuses with a reason
// otherwise. The copy is made executable before it replaces the
// original, so any refusal or failure leaves the original mapping untouched.
//
// Threading: moveHotText is for start-up (once); other threads may run the
// object's code meanwhile (the replacement is atomic and byte-identical).
// Allocates and reads /proc/self/smaps: never on the per-op path. Never calls
// the driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace graft::core {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;

// One PT_LOAD segment of an object, at its loaded addresses [start, end).
struct LoadSegment {
  uintptr_t start = 0;
  uintptr_t end = 0;
  bool executable = false;
};

struct HotTextPlan {
  uintptr_t window = 0;         // 2 MiB-aligned start of the window to replace (0: refused)
  uintptr_t copyStart = 0;      // the executable bytes inside it, page-rounded
  uintptr_t copyEnd = 0;
  const char* refusal = nullptr;  // why not, when window == 0
};

// Pure: the window holding the (first 2 MiB of the) object's executable
// segment, if that window contains no other segment of the object and lies
// inside the object's own address range (its holes are the object's).
HotTextPlan planHotText(std::span<const LoadSegment> segments);

struct HotTextResult {
  bool moved = false;           // the code now runs from the copy
  bool huge = false;            // the copy is one huge page
  uintptr_t window = 0;
  const char* why = "not tried";  // when !moved: the reason
};

// Moves the executable segment of the loaded object that contains `inside`.
// requireHuge: refuse (leaving the code where it is) unless the kernel backed
// the copy with a huge page; tests pass false to exercise the move itself.
// A second call in a process returns the first call's result.
HotTextResult moveHotText(const void* inside, bool requireHuge = true);

// The result of the call above, for the exit report ("not tried" before it).
HotTextResult hotTextResult();

}  // namespace graft::core
