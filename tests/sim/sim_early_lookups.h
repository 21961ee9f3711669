// sim_early_lookups.h - what libsim_early_lookups.so found from its constructor
// (sim_early_lookups_lib.cc), for sim_early_lookups.cc.
#pragma once

#include "sim_driver_loader.h"

struct EarlyLookups {
  bool loaded = false;    // the driver table, as the CUDA runtime fills it
  bool byName = false;    // dlsym on the driver's handle, by symbol name
  bool exported = false;  // an exported driver symbol, called directly
  const simtest::Driver* driver = nullptr;
};

const EarlyLookups& earlyLookups();
