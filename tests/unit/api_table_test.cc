// The driver API table: every entry has a class, names are unique, every
// per-thread variant has its own symbol, and the exported symbols are exactly
// the table's (checked against the built library in the preload tier).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "hook/driver_api.h"

namespace graft::hook {
namespace {

TEST(ApiTable, EveryEntryHasAClassAndUniqueSymbol) {
  std::set<std::string_view> symbols;
  for (const ApiInfo& a : kApis) {
    EXPECT_LT(size_t(a.klass), size_t(ApiClass::Count)) << a.base;
    EXPECT_TRUE(symbols.insert(a.symbol).second) << "duplicate symbol " << a.symbol;
    EXPECT_TRUE(a.symbol.substr(0, a.base.size()) == a.base) << a.symbol;
  }
}

TEST(ApiTable, StreamOrderedClassesAreOrderedOrSync) {
  for (const ApiInfo& a : kApis) {
    switch (a.klass) {
      case ApiClass::Launch:
      case ApiClass::EventRecord:
      case ApiClass::StreamWait:
      case ApiClass::HostFunc:
      case ApiClass::GraphLaunch:
      case ApiClass::StreamOrdered:
        EXPECT_TRUE(a.traits & trait::ORDERED) << a.symbol;
        break;
      case ApiClass::Copy:
      case ApiClass::Set:
        EXPECT_TRUE(a.traits & (trait::ORDERED | trait::SYNC)) << a.symbol;
        break;
      case ApiClass::Barrier:
        EXPECT_TRUE(a.traits & trait::SYNC) << a.symbol;
        break;
      default: break;
    }
  }
}

TEST(ApiTable, LookupByBaseNameHonoursTheVersion) {
  EXPECT_EQ(findByBaseName("cuCtxSynchronize", 12080), ApiId::k_cuCtxSynchronize_2000);
  EXPECT_EQ(findByBaseName("cuCtxSynchronize", 13000), ApiId::k_cuCtxSynchronize_13000);
  EXPECT_EQ(findByBaseName("cuGetProcAddress", 11030), ApiId::k_cuGetProcAddress_11030);
  EXPECT_EQ(findByBaseName("cuGetProcAddress", 12000), ApiId::k_cuGetProcAddress_12000);
  EXPECT_EQ(findByBaseName("cuMemcpyDtoHAsync", 13000), ApiId::k_cuMemcpyDtoHAsync_3020);
  EXPECT_EQ(findByBaseName("cuMemcpyDtoHAsync", 2000), ApiId::Count);  // older ABI: not ours
  EXPECT_EQ(findByBaseName("cuNoSuchFunction", 13000), ApiId::Count);
}

TEST(ApiTable, LookupBySymbolFindsPerThreadVariants) {
  bool pt = true;
  EXPECT_EQ(findBySymbol("cuLaunchKernel", &pt), ApiId::k_cuLaunchKernel_4000);
  EXPECT_FALSE(pt);
  EXPECT_EQ(findBySymbol("cuLaunchKernel_ptsz", &pt), ApiId::k_cuLaunchKernel_4000);
  EXPECT_TRUE(pt);
  EXPECT_EQ(findBySymbol("cuMemcpyHtoD_v2_ptds", &pt), ApiId::k_cuMemcpyHtoD_3020);
  EXPECT_TRUE(pt);
  EXPECT_EQ(findBySymbol("cuEventQuery_ptsz", &pt), ApiId::Count);  // no per-thread variant
}

}  // namespace
}  // namespace graft::hook
