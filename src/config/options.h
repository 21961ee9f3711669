// graft's options: one immutable snapshot, parsed once at load from the
// environment (see options.def, the single table of options).
//
// Threading: parseOptions() is pure; the snapshot it returns is never mutated
// afterwards and may be read from any thread. May allocate. Never calls the
// CUDA driver. No CUDA headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace graft::config {

#define GRAFT_MODE_VALUES(X) \
  X(Passthrough, "passthrough") X(Graph, "graph") X(Swallow, "swallow") X(Match, "match")
#define GRAFT_LOGLEVEL_VALUES(X) \
  X(Trace, "trace") X(Debug, "debug") X(Info, "info") X(Warn, "warn") X(Error, "error") X(Off, "off")

#define GRAFT_ENUM_MEMBER(name, text) name,
enum class Mode : uint8_t { GRAFT_MODE_VALUES(GRAFT_ENUM_MEMBER) };
enum class LogLevel : uint8_t { GRAFT_LOGLEVEL_VALUES(GRAFT_ENUM_MEMBER) };
#undef GRAFT_ENUM_MEMBER

std::string_view toString(Mode m);
// A GRAFT_MODE value by name ("graph", ...); false for an unknown name.
bool parseMode(std::string_view text, Mode* out);
// Modes in which graft matches and replays (graph, and the benchmark's match).
inline bool replays(Mode m) { return m == Mode::Graph || m == Mode::Match; }
std::string_view toString(LogLevel l);

struct Options {
#define GRAFT_OPT_BOOL(field, env, def, doc) bool field = def;
#define GRAFT_OPT_INT(field, env, def, lo, hi, doc) long long field = def;
#define GRAFT_OPT_ENUM(field, env, type, def, doc) type field = def;
#define GRAFT_OPT_TEXT(field, env, def, placeholder, doc) std::string field = def;
#include "config/options.def"
#undef GRAFT_OPT_BOOL
#undef GRAFT_OPT_INT
#undef GRAFT_OPT_ENUM
#undef GRAFT_OPT_TEXT
};

struct ParsedOptions {
  Options options;
  // One clear line per problem (bad value, unknown GRAFT_* name); the default
  // was used for each. Logged once the logger exists.
  std::vector<std::string> problems;
};

// Parses the GRAFT_* entries of a NULL-terminated environment array (like
// `environ`). Entries that do not start with "GRAFT_" are ignored.
ParsedOptions parseOptions(const char* const* envp);

// Whether a CUDA_LAUNCH_BLOCKING value (or null) makes the driver block each
// launch, as the driver reads it: its leading number is 1 ("1", "01"; not
// "2", "true").
bool launchBlockingOn(const char* value);
// The mode graft starts in: `requested`, except that graph mode becomes
// passthrough when CUDA_LAUNCH_BLOCKING is on (`cudaLaunchBlocking` is its
// value, or null), with the line to log in `why`. Read when graft starts, not
// at load, since a program may set the variable after loading graft, and read
// again at the first stream-ordered op (the driver reads it when it creates a
// context, which may be after graft started: hook/runtime.h, settleStart).
Mode startMode(Mode requested, const char* cudaLaunchBlocking, std::string* why);

// Markdown table of every option (name, default, accepted values, meaning),
// the source of the README's options table.
std::string optionsMarkdownTable();

// Names of all known options, e.g. "GRAFT_MODE".
std::vector<std::string_view> optionNames();

}  // namespace graft::config
