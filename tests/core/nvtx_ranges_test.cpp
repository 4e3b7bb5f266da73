// SPDX-License-Identifier: Apache-2.0
// core/nvtx_ranges without a profiler: what makes a range cost one branch.
// With one (mpi_tests/nvtx/nvtx_ranges_test.cpp) the ranges are recorded.
#include "core/nvtx_ranges.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace peerplan::core::nvtx {
namespace {

TEST(NvtxRanges, OffIsANullDomain) {
  EXPECT_FALSE(domain(false));
  EXPECT_EQ(register_message(domain(false), "text").handle, nullptr);
  const Range range(domain(false), Colour::lifecycle, "nothing");  // and pops nothing
}

TEST(NvtxRanges, NoProfilerIsANullDomainToo) {
  if (std::getenv("NVTX_INJECTION64_PATH") != nullptr)
    GTEST_SKIP() << "NVTX_INJECTION64_PATH is set: a profiler may be attached";
  // NVTX looked for a tool on the first call and found none: every later
  // range on this domain is a branch on null.
  EXPECT_FALSE(domain(true));
  EXPECT_EQ(register_message(domain(true), "text").handle, nullptr);
  const Range range(domain(true), Colour::p2p, Message{}, 1024);
}

}  // namespace
}  // namespace peerplan::core::nvtx
