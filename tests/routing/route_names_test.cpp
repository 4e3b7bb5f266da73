// SPDX-License-Identifier: Apache-2.0
// Names of routes, fallback reasons and protocols: distinct, and safe for values
// outside the enums.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "peerplan/route.hpp"

namespace peerplan {
namespace {

TEST(RouteNames, DistinctPerValue) {
  std::set<std::string> routes;
  for (Route r : {Route::one_shot, Route::two_shot, Route::fused_one_shot, Route::fallback,
                  Route::hierarchical, Route::fused_two_shot})
    EXPECT_TRUE(routes.insert(to_string(r)).second) << to_string(r);
  EXPECT_EQ(routes.count("unknown"), 0u);
  EXPECT_STREQ(to_string(Route::fused_two_shot), "fused_two_shot");
  EXPECT_STREQ(to_string(static_cast<Route>(6)), "unknown");

  std::set<std::string> reasons;
  for (FallbackReason r :
       {FallbackReason::none, FallbackReason::undeclared, FallbackReason::over_cutoff,
        FallbackReason::p2p_disabled, FallbackReason::node_layout})
    EXPECT_TRUE(reasons.insert(to_string(r)).second) << to_string(r);
  EXPECT_EQ(reasons.count("unknown"), 0u);
  EXPECT_STREQ(to_string(static_cast<FallbackReason>(5)), "unknown");

  std::set<std::string> protocols;
  for (Protocol p : {Protocol::none, Protocol::staged, Protocol::ll, Protocol::lamport,
                     Protocol::pull, Protocol::dma})
    EXPECT_TRUE(protocols.insert(to_string(p)).second) << to_string(p);
  EXPECT_EQ(protocols.count("unknown"), 0u);
  EXPECT_STREQ(to_string(Protocol::lamport), "lamport");
  EXPECT_STREQ(to_string(Protocol::dma), "dma");
  EXPECT_STREQ(to_string(static_cast<Protocol>(6)), "unknown");
}

}  // namespace
}  // namespace peerplan
