// SPDX-License-Identifier: Apache-2.0
// route_declaration: every rule at its boundaries (a message exactly at a
// cutoff, and one element over), disabled routes, disabled P2P, several
// nodes (even: hierarchical; uneven: node_layout), a single rank, automatic cutoffs, and rank invariance.
#include "routing/router.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "routing/cutoffs.hpp"

namespace peerplan::routing {
namespace {

constexpr std::size_t kMiB = 1024 * 1024;

// An f16 all-reduce of exactly `bytes` bytes (bytes must be even).
Declaration all_reduce_of(std::size_t bytes) {
  return Declaration::all_reduce("ar", DataType::f16,
                                 TensorLayout{static_cast<std::int64_t>(bytes / 2)});
}

float g_weight_storage[4];

Declaration fused_of(std::size_t bytes, const void* weight = g_weight_storage) {
  // Rows of 2 f16 elements (4 bytes); bytes must be a multiple of 4.
  return Declaration::fused_add_rms_norm(
      "fused", DataType::f16, TensorLayout{static_cast<std::int64_t>(bytes / 4), 2}, weight, 1e-6f);
}

RoutingContext node_of(int world_size, RouteCutoffs cutoffs) {
  return RoutingContext{world_size, 1, true, cutoffs};
}

const RouteCutoffs kCutoffs{1000, 4000, 2000};  // one-shot, two-shot, fused

RouteDecision expect_route(const Declaration& d, const RoutingContext& context, Route route,
                           FallbackReason reason) {
  const RouteDecision decision = route_declaration(d, context);
  EXPECT_EQ(decision.route, route)
      << to_string(decision.route) << " for " << decision.message_bytes << " bytes";
  EXPECT_EQ(decision.reason, reason) << to_string(decision.reason);
  EXPECT_EQ(decision.message_bytes, message_bytes(d));
  return decision;
}

TEST(MessageBytes, ElementsTimesElementSize) {
  EXPECT_EQ(message_bytes(Declaration::all_reduce("a", DataType::f32, {8, 4096})), 8u * 4096 * 4);
  EXPECT_EQ(message_bytes(Declaration::all_reduce("a", DataType::bf16, {8, 4096})), 8u * 4096 * 2);
  EXPECT_EQ(message_bytes(Declaration::all_reduce("a", DataType::f16, {3, 5, 7})), 3u * 5 * 7 * 2);
  EXPECT_EQ(message_bytes(Declaration::all_reduce("a", DataType::f32, {})), 4u);  // a scalar
}

TEST(MessageBytes, StridesDoNotCount) {
  // One row out of a padded buffer: the padding is not reduced.
  const std::int64_t shape[] = {4, 4096};
  const std::int64_t strides[] = {8192, 1};
  const auto padded =
      Declaration::all_reduce("a", DataType::bf16, TensorLayout::strided(shape, strides));
  EXPECT_EQ(message_bytes(padded), 4u * 4096 * 2);
}

TEST(MessageBytes, SaturatesInsteadOfWrapping) {
  // 2^40 x 2^40 x 4 bytes overflows 64 bits; wrapping would give 0.
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_EQ(message_bytes(Declaration::all_reduce("a", DataType::f32, {big, big})),
            std::numeric_limits<std::size_t>::max());
  // And such a message is over every cutoff, even the largest finite one.
  const RouteCutoffs huge{std::numeric_limits<std::size_t>::max() - 1, 0, 0};
  expect_route(Declaration::all_reduce("a", DataType::f32, {big, big}), node_of(2, huge),
               Route::fallback, FallbackReason::over_cutoff);
}

TEST(MessageBytes, NonPositiveDimensionIsZeroBytes) {
  EXPECT_EQ(message_bytes(Declaration::all_reduce("a", DataType::f32, {0, 16})), 0u);
  EXPECT_EQ(message_bytes(Declaration::all_reduce("a", DataType::f32, {16, -1})), 0u);
}

TEST(Router, AllReduceOneShotBoundary) {
  const auto context = node_of(4, kCutoffs);
  expect_route(all_reduce_of(2), context, Route::one_shot, FallbackReason::none);
  expect_route(all_reduce_of(1000), context, Route::one_shot, FallbackReason::none);
  expect_route(all_reduce_of(1002), context, Route::two_shot, FallbackReason::none);
}

TEST(Router, AllReduceCutoffIsInclusiveToTheByte) {
  // Same 1000-byte message; the one-shot cutoff one byte below it.
  RouteCutoffs cutoffs = kCutoffs;
  cutoffs.one_shot_max_bytes = 999;
  expect_route(all_reduce_of(1000), node_of(4, cutoffs), Route::two_shot, FallbackReason::none);
  cutoffs.two_shot_max_bytes = 999;
  expect_route(all_reduce_of(1000), node_of(4, cutoffs), Route::fallback,
               FallbackReason::over_cutoff);
  cutoffs.two_shot_max_bytes = 1000;
  expect_route(all_reduce_of(1000), node_of(4, cutoffs), Route::two_shot, FallbackReason::none);
}

TEST(Router, AllReduceTwoShotBoundary) {
  const auto context = node_of(4, kCutoffs);
  expect_route(all_reduce_of(4000), context, Route::two_shot, FallbackReason::none);
  expect_route(all_reduce_of(4002), context, Route::fallback, FallbackReason::over_cutoff);
  expect_route(all_reduce_of(64 * kMiB), context, Route::fallback, FallbackReason::over_cutoff);
}

TEST(Router, FusedBoundary) {
  const auto context = node_of(4, kCutoffs);
  expect_route(fused_of(4), context, Route::fused_one_shot, FallbackReason::none);
  expect_route(fused_of(2000), context, Route::fused_one_shot, FallbackReason::none);
  // Over the fused cutoff the fused op falls back, although the plain
  // routes' cutoffs (two-shot 4000) would admit that size: there is no
  // fused two-shot.
  expect_route(fused_of(2004), context, Route::fallback, FallbackReason::over_cutoff);
}

TEST(Router, FusedCutoffIsInclusiveToTheByte) {
  RouteCutoffs cutoffs = kCutoffs;
  cutoffs.fused_max_bytes = 1999;
  expect_route(fused_of(2000), node_of(4, cutoffs), Route::fallback, FallbackReason::over_cutoff);
}

TEST(Router, AllReduceNeverTakesTheFusedRoute) {
  RouteCutoffs cutoffs{0, 0, 1 * kMiB};
  expect_route(all_reduce_of(16), node_of(2, cutoffs), Route::fallback,
               FallbackReason::over_cutoff);
}

TEST(Router, ZeroOneShotCutoffSendsSmallMessagesToTwoShot) {
  const RouteCutoffs cutoffs{0, 4000, 2000};
  expect_route(all_reduce_of(2), node_of(4, cutoffs), Route::two_shot, FallbackReason::none);
}

TEST(Router, ZeroCutoffsDisableEveryRoute) {
  const RouteCutoffs none{0, 0, 0};
  const auto context = node_of(4, none);
  expect_route(all_reduce_of(2), context, Route::fallback, FallbackReason::over_cutoff);
  expect_route(fused_of(4), context, Route::fallback, FallbackReason::over_cutoff);
  // Even an empty message: 0 means "route disabled", not "up to 0 bytes".
  expect_route(all_reduce_of(0), context, Route::fallback, FallbackReason::over_cutoff);
}

TEST(Router, P2PDisabledSendsEverythingToTheFallback) {
  RoutingContext context = node_of(4, kCutoffs);
  context.p2p_enabled = false;
  expect_route(all_reduce_of(2), context, Route::fallback, FallbackReason::p2p_disabled);
  expect_route(all_reduce_of(64 * kMiB), context, Route::fallback, FallbackReason::p2p_disabled);
  expect_route(fused_of(4), context, Route::fallback, FallbackReason::p2p_disabled);
}

TEST(Router, SeveralEvenNodesTakeTheHierarchicalRouteWithinTheWindows) {
  for (int nodes : {2, 3, 4}) {
    SCOPED_TRACE(nodes);
    RoutingContext context = node_of(2 * nodes, kCutoffs);
    context.num_nodes = nodes;
    context.ranks_per_node = 2;
    // What one node would route one-shot, two-shot or fused goes hierarchical ...
    expect_route(all_reduce_of(2), context, Route::hierarchical, FallbackReason::none);
    expect_route(all_reduce_of(kCutoffs.two_shot_max_bytes), context, Route::hierarchical,
                 FallbackReason::none);
    expect_route(fused_of(kCutoffs.fused_max_bytes), context, Route::hierarchical,
                 FallbackReason::none);
    // ... and what it would send to the fallback still goes there.
    expect_route(all_reduce_of(kCutoffs.two_shot_max_bytes + 2), context, Route::fallback,
                 FallbackReason::over_cutoff);
    expect_route(fused_of(kCutoffs.fused_max_bytes + 4), context, Route::fallback,
                 FallbackReason::over_cutoff);
    // P2P off still wins over the node layout's route.
    context.p2p_enabled = false;
    expect_route(all_reduce_of(2), context, Route::fallback, FallbackReason::p2p_disabled);
  }
}

TEST(Router, UnevenNodesOrOneRankPerNodeFallBackForTheirLayout) {
  for (int ranks_per_node : {0, 1}) {  // 0: the nodes hold different numbers of ranks
    SCOPED_TRACE(ranks_per_node);
    RoutingContext context = node_of(8, kCutoffs);
    context.num_nodes = 2;
    context.ranks_per_node = ranks_per_node;
    expect_route(all_reduce_of(2), context, Route::fallback, FallbackReason::node_layout);
    expect_route(fused_of(4), context, Route::fallback, FallbackReason::node_layout);
  }
  // On one node the per-node count is not looked at.
  RoutingContext one_node = node_of(2, kCutoffs);
  one_node.ranks_per_node = 0;
  expect_route(all_reduce_of(2), one_node, Route::one_shot, FallbackReason::none);
}

TEST(Router, OneRankHasNobodyToExchangeWith) {
  for (int world_size : {1, 0}) {
    const auto context = node_of(world_size, kCutoffs);
    expect_route(all_reduce_of(2), context, Route::fallback, FallbackReason::p2p_disabled);
    expect_route(fused_of(4), context, Route::fallback, FallbackReason::p2p_disabled);
  }
  // Two ranks is the smallest world with P2P routes.
  expect_route(all_reduce_of(2), node_of(2, kCutoffs), Route::one_shot, FallbackReason::none);
}

TEST(Router, AutomaticCutoffsFollowTheWorldSize) {
  for (int world_size : {2, 3, 4, 5, 8, 16}) {
    SCOPED_TRACE(world_size);
    const RouteCutoffs table = default_cutoffs(world_size);
    const auto context = node_of(world_size, RouteCutoffs{});  // all kAutoCutoff
    expect_route(all_reduce_of(table.one_shot_max_bytes), context, Route::one_shot,
                 FallbackReason::none);
    expect_route(all_reduce_of(table.one_shot_max_bytes + 2), context, Route::two_shot,
                 FallbackReason::none);
    expect_route(all_reduce_of(table.two_shot_max_bytes), context, Route::two_shot,
                 FallbackReason::none);
    expect_route(all_reduce_of(table.two_shot_max_bytes + 2), context, Route::fallback,
                 FallbackReason::over_cutoff);
    expect_route(fused_of(table.fused_max_bytes), context, Route::fused_one_shot,
                 FallbackReason::none);
    expect_route(fused_of(table.fused_max_bytes + 4), context, Route::fallback,
                 FallbackReason::over_cutoff);
  }
}

TEST(Router, ExplicitCutoffsBeatTheDefaults) {
  RouteCutoffs cutoffs;  // auto, except one-shot
  cutoffs.one_shot_max_bytes = 1000;
  const auto context = node_of(2, cutoffs);
  ASSERT_GT(default_cutoffs(2).one_shot_max_bytes, 1002u);
  expect_route(all_reduce_of(1002), context, Route::two_shot, FallbackReason::none);
}

// Two-shot's window: [two_shot_min_bytes, two_shot_max_bytes], above the
// one-shot cutoff.
TEST(Router, TwoShotWindowLowerBound) {
  RouteCutoffs cutoffs = kCutoffs;  // one-shot 1000, two-shot max 4000
  cutoffs.two_shot_min_bytes = 3000;
  const auto context = node_of(4, cutoffs);
  // Above one-shot, below the window: nothing admits it.
  expect_route(all_reduce_of(1002), context, Route::fallback, FallbackReason::over_cutoff);
  expect_route(all_reduce_of(2998), context, Route::fallback, FallbackReason::over_cutoff);
  // The bound is inclusive to the byte, like the maxima.
  expect_route(all_reduce_of(3000), context, Route::two_shot, FallbackReason::none);
  expect_route(all_reduce_of(4000), context, Route::two_shot, FallbackReason::none);
  expect_route(all_reduce_of(4002), context, Route::fallback, FallbackReason::over_cutoff);
  cutoffs.two_shot_min_bytes = 3001;
  expect_route(all_reduce_of(3000), node_of(4, cutoffs), Route::fallback,
               FallbackReason::over_cutoff);
}

TEST(Router, OneShotStillPreferredBelowItsCutoff) {
  // A window that reaches below the one-shot cutoff does not take those
  // sizes from one-shot.
  RouteCutoffs cutoffs = kCutoffs;  // one-shot 1000
  cutoffs.two_shot_min_bytes = 500;
  const auto context = node_of(4, cutoffs);
  expect_route(all_reduce_of(500), context, Route::one_shot, FallbackReason::none);
  expect_route(all_reduce_of(1000), context, Route::one_shot, FallbackReason::none);
  expect_route(all_reduce_of(1002), context, Route::two_shot, FallbackReason::none);
  // With one-shot off, the window alone decides.
  cutoffs.one_shot_max_bytes = 0;
  expect_route(all_reduce_of(498), node_of(4, cutoffs), Route::fallback,
               FallbackReason::over_cutoff);
  expect_route(all_reduce_of(500), node_of(4, cutoffs), Route::two_shot, FallbackReason::none);
}

TEST(Router, TwoShotMinimumAboveMaximumDisablesTwoShot) {
  RouteCutoffs cutoffs = kCutoffs;  // two-shot max 4000
  cutoffs.two_shot_min_bytes = 4002;
  const auto context = node_of(4, cutoffs);
  for (std::size_t bytes : {1002u, 2000u, 4000u, 4002u, 8000u})
    expect_route(all_reduce_of(bytes), context, Route::fallback, FallbackReason::over_cutoff);
  // One-shot and fused are not affected.
  expect_route(all_reduce_of(1000), context, Route::one_shot, FallbackReason::none);
  expect_route(fused_of(2000), context, Route::fused_one_shot, FallbackReason::none);
}

TEST(Router, TwoShotMinimumDoesNotApplyToTheFusedOp) {
  RouteCutoffs cutoffs = kCutoffs;  // fused 2000
  cutoffs.two_shot_min_bytes = 100000;
  expect_route(fused_of(4), node_of(4, cutoffs), Route::fused_one_shot, FallbackReason::none);
}

TEST(Router, AutomaticTwoShotMinimumIsTheDefault) {
  // kCutoffs leaves the minimum at kAutoCutoff: the host default (0) applies,
  // so the window starts right above one-shot.
  ASSERT_EQ(kCutoffs.two_shot_min_bytes, kAutoCutoff);
  ASSERT_EQ(default_cutoffs(4).two_shot_min_bytes, 0u);
  expect_route(all_reduce_of(1002), node_of(4, kCutoffs), Route::two_shot, FallbackReason::none);
}

TEST(Router, PerRankDifferencesDoNotChangeTheRoute) {
  // Weight addresses differ on every rank; the route must not.
  float weight_rank0[8];
  float weight_rank1[8];
  const auto context = node_of(2, kCutoffs);
  for (std::size_t bytes : {4u, 2000u, 2004u}) {
    EXPECT_EQ(route_declaration(fused_of(bytes, weight_rank0), context),
              route_declaration(fused_of(bytes, weight_rank1), context))
        << bytes;
  }
}

TEST(Router, RouteDeclarationsKeepsOrderAndCount) {
  const std::vector<Declaration> declarations{all_reduce_of(2), all_reduce_of(2000),
                                              all_reduce_of(8000), fused_of(4)};
  const auto context = node_of(4, kCutoffs);
  const auto decisions = route_declarations(declarations, context);
  ASSERT_EQ(decisions.size(), declarations.size());
  for (std::size_t i = 0; i < declarations.size(); ++i)
    EXPECT_EQ(decisions[i], route_declaration(declarations[i], context)) << i;
  EXPECT_EQ(decisions[0].route, Route::one_shot);
  EXPECT_EQ(decisions[1].route, Route::two_shot);
  EXPECT_EQ(decisions[2].route, Route::fallback);
  EXPECT_EQ(decisions[3].route, Route::fused_one_shot);
}

}  // namespace
}  // namespace peerplan::routing
