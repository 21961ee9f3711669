// sim_census.cc - issues a known mix of every op class through the driver obtained
// the way cudart does (sim_driver_loader) and prints what it issued as JSON
// (calls by base name, launches by kernel). check_census.py compares that with
// graft's exit report in pass-through mode. See sim_census_body.inc.
#include <cstdio>
#include <cstring>
#include <vector>

#include "sim_census_common.h"
#include "sim_driver_loader.h"

int main(int argc, char** argv) {
  simtest::Driver drv;
  std::string err;
  if (!simtest::loadDriver(&drv, &err)) {
    std::fprintf(stderr, "sim_census: %s\n", err.c_str());
    return 2;
  }
  simtest::Census census("sim_census");
  {
#define CU(fn) drv.plain.fn
#define CU_PT(fn) drv.perThread.fn
#include "sim_census_body.inc"
#undef CU
#undef CU_PT
  }
  return simtest::finishCensus(census, argc, argv);
}
