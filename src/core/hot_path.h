// Code placement for the per-op path.
//
// Every intercepted stream-ordered op runs through a few dozen functions
// across the hook, graph and core layers. Between two ops the program runs
// its own code (an interpreter, a dispatcher), which evicts graft's code from
// the instruction cache and its pages from the TLB, so what an op costs
// depends mostly on how many lines and pages its path touches.
//
// GRAFT_HOT marks a function on that path: GCC puts it in .text.hot, which the
// linker groups, so the path spans a few pages instead of the whole library.
// GRAFT_FAST_LANE marks a function of the fast lane (a launch that a replay
// expects, compared and held in place; Engine::soleExpected), the path of most
// ops in a replay: the linker sorts these sections right after .text.hot
// (`SORT(.text.sorted.*)` in the default GNU ld script), so the fast lane's
// functions share one or two pages instead of lying among the other hot ones.
// GRAFT_FAST_LANE_INLINE is GRAFT_FAST_LANE for a function defined in a
// header. Where the compiler emits such a function out of line next to the
// fast lane's own (-O0, sanitizers, profile instrumentation), it lands in a
// COMDAT group, and GCC refuses one section name for grouped and ungrouped
// functions ("section type conflict"): there it gets a section of its own,
// sorted right after the fast lane's. An optimized, uninstrumented build
// (meson.build defines GRAFT_FAST_LANE_ONE_SECTION) keeps the one section and
// the layout docs/PERF.md measured.
// GRAFT_COLD marks a rare path inside it (first sight of a kernel, a failure),
// which then stays out of the hot pages.
#pragma once

#if defined(__GNUC__)
#define GRAFT_HOT __attribute__((hot))
#define GRAFT_FAST_LANE __attribute__((hot, section(".text.sorted.graft_fast_lane")))
#if defined(GRAFT_FAST_LANE_ONE_SECTION)
#define GRAFT_FAST_LANE_INLINE GRAFT_FAST_LANE
#else
#define GRAFT_FAST_LANE_INLINE __attribute__((hot, section(".text.sorted.graft_fast_lane_inline")))
#endif
#define GRAFT_COLD __attribute__((cold, noinline))
#else
#define GRAFT_HOT
#define GRAFT_FAST_LANE
#define GRAFT_FAST_LANE_INLINE
#define GRAFT_COLD
#endif
