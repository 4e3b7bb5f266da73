// SPDX-License-Identifier: Apache-2.0
// Routing: which path each declared plan takes - one-shot, two-shot, fused
// one-shot, or the fallback and why.
//
// Every input is rank-invariant (world size, node count, the agreed P2P
// flag, the config's cutoffs, the declaration's rank-invariant fields), and
// the decision is a pure function of them, so every rank routes every
// declaration identically. That matters: a rank on the P2P path waits for
// its peers' flags, so ranks that disagree deadlock. Nothing here looks at
// pointers or other per-rank state.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "peerplan/config.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/route.hpp"
#include "routing/protocol_choice.hpp"

namespace peerplan::routing {

struct RoutingContext {
  int world_size = 1;
  int num_nodes = 1;
  // True only when create()'s agreement enabled the fast path on every rank
  // and the config does not disable it.
  bool p2p_enabled = false;
  // Cutoffs at kAutoCutoff take default_cutoffs(world_size, backend). The
  // communicator passes cutoffs already resolved (config, tuning file,
  // defaults), which have none.
  RouteCutoffs cutoffs{};
  Backend backend = Backend::host;
  // Ranks on each node when every node holds the same number, else 0
  // (agreed at create; communicator/node_layout.hpp). Read only when
  // num_nodes > 1.
  int ranks_per_node = 1;
  // What the P2P transport can run (PeerTransport::protocol_windows; the
  // same on every rank): each admitted plan's protocol is chosen from it.
  ProtocolWindows protocols{};
};

struct RouteDecision {
  Route route = Route::fallback;
  FallbackReason reason = FallbackReason::p2p_disabled;  // none on a P2P route
  std::size_t message_bytes = 0;
  Protocol protocol = Protocol::none;  // none on the fallback

  friend bool operator==(const RouteDecision&, const RouteDecision&) = default;
};

// Bytes one rank contributes: elements of the layout's shape times the
// element size (strides do not count: padding is not reduced). Saturates at
// SIZE_MAX, so an absurd shape is over every cutoff instead of wrapping into
// a small size; 0 when a dimension is not positive (validation rejects
// those before routing).
std::size_t message_bytes(const Declaration& declaration) noexcept;

// The rules, in order:
//  1. More than one node, and the nodes hold different numbers of ranks or
//     one rank each -> fallback / node_layout (no hierarchical route fits:
//     with one rank per node it would be the fallback's own all-reduce).
//  2. P2P not enabled, or fewer than 2 ranks -> fallback / p2p_disabled.
//     (One rank has nobody to exchange with; the fallback handles it as a
//     local copy, so no P2P route is set up.)
//  3. all-reduce: bytes <= one-shot cutoff -> one_shot; else two-shot
//     minimum <= bytes <= two-shot cutoff -> two_shot; else fallback /
//     over_cutoff (also below the two-shot minimum: the call is outside
//     every route's window).
//  4. fused add + RMSNorm: bytes <= fused cutoff -> fused_one_shot; else
//     fallback / over_cutoff.
//  5. An admitted plan's protocol: choose_protocol (protocol_choice.hpp),
//     which may turn a fused_one_shot into fused_two_shot.
//  On several (even) nodes, rules 3 and 4 admit by the same windows, and
//  every admitted plan takes `hierarchical` (its node-local phases are the
//  two-shot's, between them the nodes exchange each rank's shard).
// A cutoff of 0 disables its route (even for a 0-byte message); a two-shot
// minimum of 0 is no lower bound, one above the maximum disables two-shot.
RouteDecision route_declaration(const Declaration& declaration,
                                const RoutingContext& context) noexcept;

// route_declaration for each declaration, in order.
std::vector<RouteDecision> route_declarations(std::span<const Declaration> declarations,
                                              const RoutingContext& context);

// The table logged at INFO after declare: a header and one row per
// declaration with columns name, op, dtype, shape, norm, bytes, route,
// protocol, reason (reason "-" on a P2P route), and, when `launches` has an
// entry for the row that is not empty, a second line "  launch: <text>"
// under it (what the transport prepared for the plan). Strides are shown only for a layout that is
// not contiguous. Each line ends with '\n'. Pairs declarations and decisions
// by position; if the counts differ, the extra entries are reported on a
// last line rather than silently dropped.
std::string format_route_table(std::span<const Declaration> declarations,
                               std::span<const RouteDecision> decisions,
                               std::span<const std::string> launches = {});

}  // namespace peerplan::routing
