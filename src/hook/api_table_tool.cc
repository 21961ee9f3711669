// graft-api-table: prints the driver API table (driver_api.def).
//   --exports   the symbols libgraft.so must export besides dlsym, one per line
//   --markdown  the table as Markdown (docs)
#include <cstdio>
#include <cstring>

#include "hook/driver_api.h"

using namespace graft::hook;

namespace {
const char* variantText(Variant v) {
  return v == Variant::PTSZ ? "_ptsz" : v == Variant::PTDS ? "_ptds" : "";
}
}  // namespace

int main(int argc, char** argv) {
  const bool exports = argc == 2 && std::strcmp(argv[1], "--exports") == 0;
  const bool markdown = argc == 2 && std::strcmp(argv[1], "--markdown") == 0;
  if (!exports && !markdown) {
    std::fprintf(stderr, "usage: graft-api-table --exports | --markdown\n");
    return 2;
  }
  if (markdown) std::printf("| function | symbol | ABI | per-thread | class |\n|---|---|---|---|---|\n");
  for (const ApiInfo& a : kApis) {
    if (exports) {
      if (a.klass == ApiClass::Internal) continue;
      std::printf("%.*s\n", int(a.symbol.size()), a.symbol.data());
      if (a.variant != Variant::NONE)
        std::printf("%.*s%s\n", int(a.symbol.size()), a.symbol.data(), variantText(a.variant));
    } else {
      std::printf("| %.*s | %.*s | %d | %s | %.*s |\n", int(a.base.size()), a.base.data(),
                  int(a.symbol.size()), a.symbol.data(), a.version,
                  a.variant == Variant::NONE ? "" : variantText(a.variant) + 1,
                  int(kApiClassNames[size_t(a.klass)].size()), kApiClassNames[size_t(a.klass)].data());
    }
  }
  return 0;
}
