// Flushing forwarders for driver functions graft cannot decode: an older or
// newer ABI of a function in driver_api.def, or an unknown function that looks
// stream-ordered. Calling one issues everything graft holds (a host barrier),
// then runs the real function with the caller's arguments untouched, so
// nothing is reordered even though graft cannot see inside the call.
//
// Threading: flushingForwarder() may be called from any thread (it takes a
// mutex; lookups are rare). The forwarders themselves are lock-free until they
// flush through the engine lock. Never allocates on the call path.
#pragma once

#include <cstdint>
#include <string_view>

namespace graft::hook {

// A forwarder for `real` (`name` as asked for under `version`, 0 if by symbol;
// both only for the log), or nullptr when all forwarders are in use.
// `traits`: of the function's row in driver_api.def under another ABI (0 for
// an unknown function); of them, UNLOADS (the function unloads code or
// destroys a context: after the flush graft also forgets every graph and what
// it learned per kernel) and ENDS_CONTEXT (graft retires its per-thread
// stream proxies) act as in graft's own wrapper.
void* flushingForwarder(void* real, std::string_view name, int version, uint8_t traits = 0);

// True for an unknown driver function name that may enqueue work or wait for
// it (…Async, cuLaunch…, cuMemcpy…, cuMemset…, …Synchronize, …RecordEvent, …WaitEvent, …): such a
// function gets a flushing forwarder rather than being passed through blind.
bool looksStreamOrdered(std::string_view name);

}  // namespace graft::hook
