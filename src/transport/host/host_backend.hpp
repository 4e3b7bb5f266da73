// SPDX-License-Identifier: Apache-2.0
// What the communicator needs to build the host backend's transports,
// without including the implementation headers.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/owned_comm.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::host {

// P2P over POSIX shared memory among the node-local ranks of `bootstrap`.
// Collective over every rank of `bootstrap` (which must outlive the
// result); reserves nothing until reserve(). See host_peer_transport.hpp.
// `across_nodes`: a duplicate of the communicator for the hierarchical
// route's exchange between nodes, when the job spans several nodes holding
// the same number of ranks each (every call is then hierarchical); an empty
// OwnedComm on one node. `node_of_rank`: every rank's node, with
// `across_nodes` (NodeGroupSum).
std::unique_ptr<PeerTransport> make_host_peer_transport(bootstrap::Bootstrap& bootstrap,
                                                        std::chrono::milliseconds timeout,
                                                        bootstrap::OwnedComm across_nodes = {},
                                                        const std::vector<int>& node_of_rank = {});

// MPI fallback on `comm` (the communicator's own duplicate), which it owns
// from now on: it frees it at close(), or keeps it until the process exits
// when a timed-out reduction may still run on it. Not collective.
std::unique_ptr<FallbackTransport> make_mpi_fallback(bootstrap::OwnedComm comm,
                                                     std::chrono::milliseconds timeout);

}  // namespace peerplan::transport::host
