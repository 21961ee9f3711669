#include "config/options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace graft::config {
namespace {

#define GRAFT_ENUM_TEXT(name, text) text,
constexpr std::string_view kModeNames[] = {GRAFT_MODE_VALUES(GRAFT_ENUM_TEXT)};
constexpr std::string_view kLogLevelNames[] = {GRAFT_LOGLEVEL_VALUES(GRAFT_ENUM_TEXT)};
#undef GRAFT_ENUM_TEXT

const std::string_view* namesOf(Mode) { return kModeNames; }
const std::string_view* namesOf(LogLevel) { return kLogLevelNames; }
template <typename E> constexpr size_t countOf();
template <> constexpr size_t countOf<Mode>() { return std::size(kModeNames); }
template <> constexpr size_t countOf<LogLevel>() { return std::size(kLogLevelNames); }

template <typename E>
std::string choicesOf() {
  std::string s;
  for (size_t i = 0; i < countOf<E>(); ++i) {
    if (i) s += ", ";
    s += namesOf(E{})[i];
  }
  return s;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Blanks around a value (GRAFT_WARMUP=" 5", a trailing newline from a
// shell's $(...)) are not part of it.
std::string_view trimmed(std::string_view v) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!v.empty() && blank(v.front())) v.remove_prefix(1);
  while (!v.empty() && blank(v.back())) v.remove_suffix(1);
  return v;
}

// Case-insensitive, as booleans are (GRAFT_MODE=Passthrough); GRAFT_LOG_LEVEL
// also takes `warning`, the word the log itself prints.
template <typename E>
bool parseEnumValue(std::string_view text, E* out) {
  const std::string t = lower(trimmed(text));
  if constexpr (std::is_same_v<E, LogLevel>) {
    if (t == "warning") return *out = LogLevel::Warn, true;
  }
  for (size_t i = 0; i < countOf<E>(); ++i) {
    if (lower(namesOf(E{})[i]) == t) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

bool parseBool(std::string_view text, bool* out) {
  const std::string t = lower(trimmed(text));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return *out = true, true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return *out = false, true;
  return false;
}

bool parseInt(std::string_view text, long long lo, long long hi, long long* out) {
  text = trimmed(text);
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || text.empty()) return false;
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string boolText(bool b) { return b ? "1" : "0"; }
std::string intText(long long v) { return std::to_string(v); }
template <typename E>
std::string enumText(E v) {
  return std::string(namesOf(E{})[static_cast<size_t>(v)]);
}

// A value as the warning shows it: as given, or quoted with escapes when it
// is empty or holds blanks, quotes or control characters (a trailing space
// would not show; a newline would split the line).
std::string shownValue(std::string_view value) {
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && c != 0x7f && c != '"' && c != '\\';
  });
  if (plain) return std::string(value);
  std::string s = "\"";
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      s += '\\';
      s += c;
    } else if (c == '\n') {
      s += "\\n";
    } else if (c == '\t') {
      s += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      s += "\\x";
      s += kHex[u >> 4];
      s += kHex[u & 15];
    } else {
      s += c;
    }
  }
  s += '"';
  return s;
}

std::string invalid(std::string_view env, std::string_view value, std::string_view expected,
                    std::string_view fallback) {
  std::string s(env);
  s += "=";
  s += shownValue(value);
  s += " is not valid (expected ";
  s += expected;
  s += "); using ";
  s += fallback.empty() ? std::string_view("the default") : fallback;
  return s;
}

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string_view toString(Mode m) { return kModeNames[static_cast<size_t>(m)]; }
bool parseMode(std::string_view text, Mode* out) { return parseEnumValue(text, out); }
std::string_view toString(LogLevel l) { return kLogLevelNames[static_cast<size_t>(l)]; }

std::vector<std::string_view> optionNames() {
  return {
#define GRAFT_OPT_BOOL(field, env, def, doc) #env,
#define GRAFT_OPT_INT(field, env, def, lo, hi, doc) #env,
#define GRAFT_OPT_ENUM(field, env, type, def, doc) #env,
#define GRAFT_OPT_TEXT(field, env, def, placeholder, doc) #env,
#include "config/options.def"
#undef GRAFT_OPT_BOOL
#undef GRAFT_OPT_INT
#undef GRAFT_OPT_ENUM
#undef GRAFT_OPT_TEXT
  };
}

ParsedOptions parseOptions(const char* const* envp) {
  ParsedOptions parsed;
  Options& o = parsed.options;
  if (!envp) return parsed;
  for (const char* const* e = envp; *e; ++e) {
    std::string_view entry(*e);
    if (entry.substr(0, 6) != "GRAFT_") {
      // graft_mode=...: names are case-sensitive, so this one is not read.
      if (entry.size() > 6 && lower(entry.substr(0, 6)) == "graft_") {
        const std::string_view name = entry.substr(0, entry.find('='));
        for (std::string_view candidate : optionNames()) {
          if (lower(candidate) == lower(name)) {
            parsed.problems.push_back("unknown option " + std::string(name) + " (did you mean " +
                                      std::string(candidate) + "? names are case-sensitive); ignored");
            break;
          }
        }
      }
      continue;
    }
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = entry.substr(0, eq);
    const std::string_view value = entry.substr(eq + 1);
    bool known = false;
#define GRAFT_OPT_BOOL(field, env, def, doc)                                            \
  if (name == #env) {                                                                   \
    known = true;                                                                       \
    if (!parseBool(value, &o.field)) {                                                  \
      /* The kill switch fails closed: whoever set it wanted graft off. */              \
      const bool killSwitch = &o.field == &o.disable;                                   \
      if (killSwitch && trimmed(value).empty()) continue; /* GRAFT_DISABLE= : unset */   \
      if (killSwitch) o.field = true;                                                   \
      parsed.problems.push_back(invalid(name, value, "1, 0, true, false, yes, no, on or off", \
                                        killSwitch ? "1 (graft off)" : boolText(def)));  \
    }                                                                                   \
  }
#define GRAFT_OPT_INT(field, env, def, lo, hi, doc)                                    \
  if (name == #env) {                                                                  \
    known = true;                                                                      \
    if (!parseInt(value, lo, hi, &o.field))                                            \
      parsed.problems.push_back(invalid(                                               \
          name, value, "an integer from " + intText(lo) + " to " + intText(hi), intText(def))); \
  }
#define GRAFT_OPT_ENUM(field, env, type, def, doc)                                      \
  if (name == #env) {                                                                   \
    known = true;                                                                       \
    if (!parseEnumValue(value, &o.field))                                               \
      parsed.problems.push_back(invalid(name, value, "one of " + choicesOf<type>(),      \
                                        enumText(def)));                                 \
  }
#define GRAFT_OPT_TEXT(field, env, def, placeholder, doc) \
  if (name == #env) {                                     \
    known = true;                                         \
    o.field = std::string(value);                         \
  }
#include "config/options.def"
#undef GRAFT_OPT_BOOL
#undef GRAFT_OPT_INT
#undef GRAFT_OPT_ENUM
#undef GRAFT_OPT_TEXT
    if (!known) {
      std::string line = "unknown option ";
      line += name;
      std::string_view best;
      size_t bestDist = 4;
      for (std::string_view candidate : optionNames()) {
        const size_t d = editDistance(name, candidate);
        if (d < bestDist) bestDist = d, best = candidate;
      }
      if (!best.empty()) {
        line += " (did you mean ";
        line += best;
        line += "?)";
      }
      line += "; ignored";
      parsed.problems.push_back(std::move(line));
    }
  }
  if (o.minSegmentOps > o.maxPeriod)
    parsed.problems.push_back("GRAFT_MIN_SEGMENT_OPS=" + intText(o.minSegmentOps) + " is above GRAFT_MAX_PERIOD=" +
                              intText(o.maxPeriod) + ": no repeating sequence can be long enough for a graph");
  return parsed;
}

bool launchBlockingOn(const char* value) {
  // As the driver reads it (H100, driver 580: "1" and "01" block, "2" and
  // "true" do not; tests/gpu/traps_r13.cu, launch_blocking_env): the number
  // the value starts with, after blanks, is 1.
  if (!value) return false;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(value, &end, 10);
  return end != value && errno == 0 && n == 1;
}

Mode startMode(Mode requested, const char* cudaLaunchBlocking, std::string* why) {
  // The driver then returns from each launch only once its kernel finished (a
  // debugging setting: a fault is reported at the launch that caused it). A
  // held launch would return before it ran, so graft only forwards.
  if (requested != Mode::Graph || !launchBlockingOn(cudaLaunchBlocking)) return requested;
  *why = std::string("CUDA_LAUNCH_BLOCKING=") + cudaLaunchBlocking +
         " makes every launch wait for its kernel; graft only forwards (GRAFT_MODE=passthrough), so each launch "
         "still returns after its kernel ran";
  return Mode::Passthrough;
}

namespace {
std::string escapePipes(std::string_view s) {
  std::string r;
  for (char c : s) {
    if (c == '|') r += "\\|";
    else r += c;
  }
  return r;
}
}  // namespace

std::string optionsMarkdownTable() {
  std::string t = "| variable | default | accepted | meaning |\n|---|---|---|---|\n";
  auto row = [&t](std::string_view env, std::string_view def, std::string_view accepted,
                  std::string_view doc) {
    t += "| `";
    t += env;
    t += "` | ";
    t += def.empty() ? std::string("(empty)") : "`" + std::string(def) + "`";
    t += " | ";
    t += escapePipes(accepted);
    t += " | ";
    t += escapePipes(doc);
    t += " |\n";
  };
#define GRAFT_OPT_BOOL(field, env, def, doc) row(#env, boolText(def), "0 or 1", doc);
#define GRAFT_OPT_INT(field, env, def, lo, hi, doc) \
  row(#env, intText(def), intText(lo) + " to " + intText(hi), doc);
#define GRAFT_OPT_ENUM(field, env, type, def, doc) row(#env, enumText(def), choicesOf<type>(), doc);
#define GRAFT_OPT_TEXT(field, env, def, placeholder, doc) row(#env, def, placeholder, doc);
#include "config/options.def"
#undef GRAFT_OPT_BOOL
#undef GRAFT_OPT_INT
#undef GRAFT_OPT_ENUM
#undef GRAFT_OPT_TEXT
  return t;
}

}  // namespace graft::config
