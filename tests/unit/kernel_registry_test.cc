// KernelRegistry's lookup: every handle finds its own entry, through the
// index and its growth, and after code is unloaded (retireAll) handles are
// resolved again. With no driver behind it, a kernel has no name or layout.
#include "graph/kernel_registry.h"

#include <gtest/gtest.h>

#include <unordered_set>
#include <vector>

namespace graft::graph {
namespace {

CUfunction handle(uint64_t i) { return reinterpret_cast<CUfunction>(0x7f0000001000ull + 0x40 * i); }

TEST(KernelRegistry, EveryHandleFindsItsOwnEntryAcrossIndexGrowth) {
  KernelRegistry registry;
  std::vector<KernelInfo*> first;
  for (uint64_t i = 0; i < 3000; ++i) {  // the index starts at 256 slots and grows
    KernelInfo& info = registry.get(handle(i));
    EXPECT_EQ(info.handle, reinterpret_cast<uint64_t>(handle(i)));
    first.push_back(&info);
  }
  std::unordered_set<KernelInfo*> distinct(first.begin(), first.end());
  EXPECT_EQ(distinct.size(), first.size());
  // In another order, each lookup returns the entry made for that handle.
  for (uint64_t i = 3000; i-- > 0;) {
    KernelInfo& info = registry.get(handle(i));
    ASSERT_EQ(&info, first[i]) << "handle " << i;
    ++info.launches;
  }
  EXPECT_EQ(registry.find(reinterpret_cast<uint64_t>(handle(17)))->launches, 1u);
}

// A null handle (the driver rejects its launch) has one entry like any other.
TEST(KernelRegistry, NullHandleIsAnEntryToo) {
  KernelRegistry registry;
  KernelInfo& a = registry.get(nullptr);
  registry.get(handle(1));
  EXPECT_EQ(&registry.get(nullptr), &a);
}

TEST(KernelRegistry, RetireAllResolvesAgainAndKeepsCounts) {
  KernelRegistry registry;
  for (uint64_t i = 0; i < 200; ++i) registry.get(handle(i)).launches += 2;
  registry.retireAll();
  EXPECT_EQ(registry.find(reinterpret_cast<uint64_t>(handle(5))), nullptr);
  KernelInfo& again = registry.get(handle(5));
  EXPECT_EQ(again.launches, 0u);
  EXPECT_EQ(again.handle, reinterpret_cast<uint64_t>(handle(5)));
  uint64_t total = 0;
  for (const auto& [name, n] : registry.byLaunches()) total += n;
  EXPECT_EQ(total, 400u);  // the retired counts stay in the report
}

// What a launch reads (the encoder, and the fast lane's in-place comparison
// of up to kCompactParams parameters): handle, launches, flags, paramBytes and
// the compact layout, all in the first cache line.
TEST(KernelRegistry, PerLaunchFieldsShareOneCacheLine) {
  static_assert(alignof(KernelInfo) == 64);
  EXPECT_LE(offsetof(KernelInfo, compactSizes) + sizeof(KernelInfo::compactSizes), 64u);
  EXPECT_LE(offsetof(KernelInfo, paramBytes) + sizeof(uint32_t), 64u);
}

}  // namespace
}  // namespace graft::graph

namespace graft::graph {
namespace {

// GRAFT_EAGER_KERNELS (default "nccl") must catch NCCL's kernels, whose
// symbols are C++-mangled ("_Z..."), as well as plain extern "C" names.
TEST(KernelRegistry, EagerPrefixesMatchMangledKernelNames) {
  const std::vector<std::string> nccl = {"nccl"};
  // NCCL 2.19+: __global__ void ncclDevKernel_Generic(ncclDevKernelArgs4K)
  EXPECT_EQ(kernelBaseName("_Z21ncclDevKernel_Generic19ncclDevKernelArgs4K"), "ncclDevKernel_Generic");
  EXPECT_TRUE(matchesEagerPrefix("_Z21ncclDevKernel_Generic19ncclDevKernelArgs4K", nccl));
  // Older NCCL: ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)
  EXPECT_EQ(kernelBaseName("_Z38ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclDevCommmP8ncclWork"),
            "ncclKernel_AllReduce_RING_LL_Sum_float");
  EXPECT_TRUE(matchesEagerPrefix("_Z38ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclDevCommmP8ncclWork", nccl));
  // In a namespace, and a template instance (its demangled form carries a return type).
  EXPECT_EQ(kernelBaseName("_ZN2ns10ncclKernelEPi"), "ncclKernel");
  EXPECT_EQ(kernelBaseName("_Z10ncclKernelIiLi4EEvPT_"), "ncclKernel");
  EXPECT_TRUE(matchesEagerPrefix("_Z10ncclKernelIiLi4EEvPT_", nccl));
  // extern "C" names as before; other kernels, including ones that merely
  // mention NCCL in a parameter type, do not match.
  EXPECT_TRUE(matchesEagerPrefix("ncclDevKernel_Generic", nccl));
  EXPECT_FALSE(matchesEagerPrefix("_Z4gemmP11ncclDevCommPf", nccl));
  EXPECT_FALSE(matchesEagerPrefix("_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_", nccl));
  EXPECT_FALSE(matchesEagerPrefix("sim_add", nccl));
  EXPECT_FALSE(matchesEagerPrefix("_Z21ncclDevKernel_Generic19ncclDevKernelArgs4K", {}));
  // Not demangleable: matched as written.
  EXPECT_EQ(kernelBaseName("_Znot_a_symbol"), "_Znot_a_symbol");
}

// GRAFT_EAGER_KERNELS adds to NCCL's kernels: naming a kernel of one's own
// must not let NCCL's kernels (host-managed state) be captured.
TEST(KernelRegistry, EagerKernelsAddToNcclsOwn) {
  const std::string ncclSymbol = "_Z21ncclDevKernel_Generic19ncclDevKernelArgs4K";
  EXPECT_EQ(eagerPrefixList(""), std::vector<std::string>{"nccl"});
  const auto mine = eagerPrefixList(" mykernel , other,,nccl ");
  EXPECT_EQ(mine, (std::vector<std::string>{"nccl", "mykernel", "other"}));
  EXPECT_TRUE(matchesEagerPrefix(ncclSymbol, mine));
  EXPECT_TRUE(matchesEagerPrefix("mykernel_v2", mine));
  EXPECT_FALSE(matchesEagerPrefix("sim_add", mine));
}

}  // namespace
}  // namespace graft::graph
