// Names of routes and fallback reasons: distinct, and safe for values
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
                  Route::hierarchical})
    EXPECT_TRUE(routes.insert(to_string(r)).second) << to_string(r);
  EXPECT_EQ(routes.count("unknown"), 0u);
  EXPECT_STREQ(to_string(static_cast<Route>(5)), "unknown");

  std::set<std::string> reasons;
  for (FallbackReason r : {FallbackReason::none, FallbackReason::undeclared,
                           FallbackReason::over_cutoff, FallbackReason::p2p_disabled,
                           FallbackReason::node_layout})
    EXPECT_TRUE(reasons.insert(to_string(r)).second) << to_string(r);
  EXPECT_EQ(reasons.count("unknown"), 0u);
  EXPECT_STREQ(to_string(static_cast<FallbackReason>(5)), "unknown");
}

}  // namespace
}  // namespace peerplan
