// graft-reasons: prints the table of reasons an op ran eagerly (core/op.h,
// GRAFT_EAGER_CAUSES), as README.md shows it.
//   --markdown  the table as Markdown
#include <cstdio>
#include <cstring>

#include "core/op.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--markdown") != 0) {
    std::fprintf(stderr, "usage: graft-reasons --markdown\n");
    return 2;
  }
  std::printf("| reason | meaning |\n|---|---|\n");
#define GRAFT_REASON_ROW(name, text, doc) std::printf("| `%s` | %s |\n", text, doc);
  GRAFT_EAGER_CAUSES(GRAFT_REASON_ROW)
#undef GRAFT_REASON_ROW
  return 0;
}
