// SPDX-License-Identifier: Apache-2.0
// The parts of Communicator::create that decide what this communicator can
// do: the world-size check, the backend, and whether the P2P fast path is
// enabled (on every rank or on none). The config itself is checked before,
// from the rank cards (card_decisions.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "bootstrap/bootstrap.hpp"
#include "communicator/node_layout.hpp"
#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"
#include "transport/transport.hpp"

namespace peerplan::communicator {

// Throws InvalidArgument on every rank when Config::expected_world_size
// (PEERPLAN_WORLD_SIZE) is set and differs from the communicator's size.
void check_world_size(const bootstrap::Bootstrap& bootstrap, const Config& config);

struct BackendSetup {
  Backend backend = Backend::host;
  std::unique_ptr<transport::PeerTransport> peer;  // null: P2P disabled on every rank
  std::unique_ptr<transport::FallbackTransport> fallback;
  Fallback fallback_kind = Fallback::mpi;  // nccl or mpi: what `fallback` is
  bool gpus_shared = false;                // some ranks drive the same GPU
  std::string p2p_disabled_reason;         // empty when peer is set
  NodeLayout nodes;                        // how the ranks spread over nodes
};

// What takes the calls peerplan declines. `own`: a fallback transport of
// its own, as Config::fallback says. `none`: none at all, for a caller that
// keeps the declined calls to itself (the NCCL interposer hands them to the
// real NCCL): a call routed to the fallback throws InvalidUsage. With
// `none`, nothing touches MPI (comm may be MPI_COMM_NULL): the backend
// must be cuda (Unsupported otherwise) and P2P stays within one node, the
// hierarchical route's step between nodes needing an MPI or NCCL
// communicator of its own.
enum class FallbackSetup { own, none };

// Collective. Resolves Backend::automatic, creates the fallback and, when
// P2P is allowed (>= 2 ranks, not disabled; one node, or several nodes
// holding the same number >= 2 of ranks each, for the hierarchical route,
// whose step between nodes the peer transport then owns), the peer transport; an agreement at the end
// makes every rank enable P2P or none.
// Every rank's card (`cards`, exchanged before) decides the backend, the
// node layout and, on the cuda backend, the GPUs; `locality` (this rank's
// card's topology text) is logged at INFO.
BackendSetup select_backend(MPI_Comm comm, bootstrap::Bootstrap& bootstrap, const Config& config,
                            const std::vector<RankCard>& cards, const std::string& locality,
                            FallbackSetup fallback = FallbackSetup::own);

}  // namespace peerplan::communicator
