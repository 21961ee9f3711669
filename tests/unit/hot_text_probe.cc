// A small shared object laid out like libgraft (2 MiB segment alignment), for
// hot_text_test: its code is what the test moves onto a huge page.
#include <cstdint>

extern "C" __attribute__((visibility("default"), noinline)) uint64_t hotTextProbeMix(uint64_t x) {
  // Enough arithmetic that a wrong byte anywhere in it changes the result.
  for (int i = 0; i < 16; ++i) x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ull + uint64_t(i);
  return x;
}

extern "C" __attribute__((visibility("default"))) uint64_t (*hotTextProbeMixPointer())(uint64_t) {
  return &hotTextProbeMix;
}
