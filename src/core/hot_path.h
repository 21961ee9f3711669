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
// GRAFT_COLD marks a rare path inside it (first sight of a kernel, a failure),
// which then stays out of the hot pages.
#pragma once

#if defined(__GNUC__)
#define GRAFT_HOT __attribute__((hot))
#define GRAFT_FAST_LANE __attribute__((hot, section(".text.sorted.graft_fast_lane")))
#define GRAFT_COLD __attribute__((cold, noinline))
#else
#define GRAFT_HOT
#define GRAFT_FAST_LANE
#define GRAFT_COLD
#endif
