// graft-options: prints the options table (Markdown) generated from options.def.
// `graft-options --markdown` is what README.md's options table must equal.
#include <cstdio>
#include <cstring>

#include "config/options.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--markdown") == 0) {
    std::fputs(graft::config::optionsMarkdownTable().c_str(), stdout);
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--names") == 0) {
    for (auto n : graft::config::optionNames()) std::printf("%.*s\n", int(n.size()), n.data());
    return 0;
  }
  std::fprintf(stderr, "usage: graft-options --markdown | --names\n");
  return 2;
}
