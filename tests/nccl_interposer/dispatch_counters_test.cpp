// SPDX-License-Identifier: Apache-2.0
// The finalize summary: per size, hits and fallbacks by cause.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "nccl_interposer/dispatch_rules.hpp"

namespace peerplan::nccl_interposer {
namespace {

TEST(DispatchCounters, NothingCounted) {
  EXPECT_EQ(DispatchCounters{}.summary(), "all-reduce calls: none");
}

TEST(DispatchCounters, PerSizeSmallestFirstCausesInOrder) {
  DispatchCounters counters;
  counters.hit(1048576);
  counters.hit(1048576);
  counters.fallback(1048576, FallbackCause::misaligned);
  counters.fallback(1048576, FallbackCause::group_of_many);
  counters.fallback(1048576, FallbackCause::misaligned);
  counters.fallback(1024, FallbackCause::undeclared_count);
  counters.hit(4096);
  EXPECT_EQ(counters.summary(),
            "all-reduce calls: 3 to peerplan, 4 to NCCL, over 3 sizes\n"
            "  1024 bytes: 0 to peerplan, 1 to NCCL (undeclared_count 1)\n"
            "  4096 bytes: 1 to peerplan, 0 to NCCL\n"
            "  1048576 bytes: 2 to peerplan, 3 to NCCL (group_of_many 1, misaligned 2)");
}

TEST(DispatchCounters, OneSize) {
  DispatchCounters counters;
  counters.fallback(8, FallbackCause::no_communicator);
  EXPECT_EQ(counters.summary(),
            "all-reduce calls: 0 to peerplan, 1 to NCCL, over 1 size\n"
            "  8 bytes: 0 to peerplan, 1 to NCCL (no_communicator 1)");
}

// Calls peerplan failed, and those refused after a timeout, ran nowhere:
// counted as failed, by cause, not as run by NCCL.
TEST(DispatchCounters, CallsThatRanNowhereAreCountedAsFailedByCause) {
  DispatchCounters counters;
  counters.hit(8);
  counters.fallback(8, FallbackCause::misaligned);
  counters.fallback(8, FallbackCause::peerplan_error);
  counters.fallback(8, FallbackCause::after_timeout);
  counters.fallback(8, FallbackCause::after_timeout);
  counters.fallback(16, FallbackCause::peerplan_error);
  EXPECT_EQ(counters.summary(),
            "all-reduce calls: 1 to peerplan, 1 to NCCL, 4 failed, over 2 sizes\n"
            "  8 bytes: 1 to peerplan, 1 to NCCL (misaligned 1), 3 failed (peerplan_error 1, "
            "after_timeout 2)\n"
            "  16 bytes: 0 to peerplan, 0 to NCCL, 1 failed (peerplan_error 1)");
}

TEST(DispatchCounters, ADeclaredSizePeerplanRoutesToItsFallbackHasItsOwnCause) {
  DispatchCounters counters;
  counters.fallback(64, FallbackCause::peerplan_route);
  counters.fallback(64, FallbackCause::undeclared_count);
  EXPECT_EQ(counters.summary(),
            "all-reduce calls: 0 to peerplan, 2 to NCCL, over 1 size\n"
            "  64 bytes: 0 to peerplan, 2 to NCCL (undeclared_count 1, peerplan_route 1)");
}

TEST(DispatchCounters, EveryCauseHasItsOwnName) {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(FallbackCause::count_); ++i) {
    const std::string name(to_string(static_cast<FallbackCause>(i)));
    EXPECT_FALSE(name.empty());
    EXPECT_NE(name, "no_cause");
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(FallbackCause::count_));
  EXPECT_EQ(to_string(FallbackCause::count_), "no_cause");
}

}  // namespace
}  // namespace peerplan::nccl_interposer
