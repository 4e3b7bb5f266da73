// SPDX-License-Identifier: Apache-2.0
#include "routing/router.hpp"

#include <limits>

#include "routing/cutoffs.hpp"

namespace peerplan::routing {
namespace {

constexpr std::size_t kSaturated = std::numeric_limits<std::size_t>::max();

// a * b, or SIZE_MAX when the product does not fit.
std::size_t saturating_mul(std::size_t a, std::size_t b) noexcept {
  if (a != 0 && b > kSaturated / a) return kSaturated;
  return a * b;
}

bool admits(std::size_t cutoff, std::size_t bytes) noexcept {
  return cutoff != 0 && bytes <= cutoff;
}

bool admits_two_shot(const RouteCutoffs& cutoffs, std::size_t bytes) noexcept {
  return admits(cutoffs.two_shot_max_bytes, bytes) && bytes >= cutoffs.two_shot_min_bytes;
}

RouteDecision p2p(RouteAndProtocol chosen, std::size_t bytes) noexcept {
  return {chosen.route, FallbackReason::none, bytes, chosen.protocol};
}

RouteDecision fallback(FallbackReason reason, std::size_t bytes) noexcept {
  return {Route::fallback, reason, bytes};
}

}  // namespace

std::size_t message_bytes(const Declaration& declaration) noexcept {
  const TensorLayout& layout = declaration.layout;
  std::size_t bytes = element_size(declaration.dtype);
  for (int i = 0; i < layout.rank(); ++i) {
    if (layout.dim(i) <= 0) return 0;
    bytes = saturating_mul(bytes, static_cast<std::size_t>(layout.dim(i)));
  }
  return bytes;
}

RouteDecision route_declaration(const Declaration& declaration,
                                const RoutingContext& context) noexcept {
  const std::size_t bytes = message_bytes(declaration);
  const bool several_nodes = context.num_nodes > 1;
  // P2P mappings never cross nodes: several nodes need the hierarchical
  // route, which needs every node to hold the same number (>= 2) of ranks.
  if (several_nodes && context.ranks_per_node < 2)
    return fallback(FallbackReason::node_layout, bytes);
  if (!context.p2p_enabled || context.world_size < 2)
    return fallback(FallbackReason::p2p_disabled, bytes);
  const auto admitted = [&](Route single_node_route) {
    return p2p(choose_protocol(several_nodes ? Route::hierarchical : single_node_route, declaration,
                               bytes, context.protocols),
               bytes);
  };

  const RouteCutoffs cutoffs =
      resolve_cutoffs(context.cutoffs, context.world_size, context.backend);
  switch (declaration.operation) {
    case Operation::all_reduce:
      if (admits(cutoffs.one_shot_max_bytes, bytes)) return admitted(Route::one_shot);
      if (admits_two_shot(cutoffs, bytes)) return admitted(Route::two_shot);
      return fallback(FallbackReason::over_cutoff, bytes);
    case Operation::fused_add_rms_norm:
      if (admits(cutoffs.fused_max_bytes, bytes)) return admitted(Route::fused_one_shot);
      return fallback(FallbackReason::over_cutoff, bytes);
  }
  // An operation value outside the enum has no P2P route (validation
  // rejects it before routing).
  return fallback(FallbackReason::p2p_disabled, bytes);
}

std::vector<RouteDecision> route_declarations(std::span<const Declaration> declarations,
                                              const RoutingContext& context) {
  std::vector<RouteDecision> decisions;
  decisions.reserve(declarations.size());
  for (const Declaration& declaration : declarations)
    decisions.push_back(route_declaration(declaration, context));
  return decisions;
}

}  // namespace peerplan::routing
