// SPDX-License-Identifier: Apache-2.0
#include "transport/host/host_backend.hpp"

#include "transport/host/host_peer_transport.hpp"
#include "transport/host/mpi_fallback.hpp"

#include <utility>

namespace peerplan::transport::host {

std::unique_ptr<PeerTransport> make_host_peer_transport(bootstrap::Bootstrap& bootstrap,
                                                        std::chrono::milliseconds timeout,
                                                        bootstrap::OwnedComm across_nodes,
                                                        const std::vector<int>& node_of_rank) {
  std::unique_ptr<NodeGroupSum> group;
  if (across_nodes) {
    group =
        std::make_unique<NodeGroupSum>(std::move(across_nodes), bootstrap, node_of_rank, timeout);
  }
  return std::make_unique<HostPeerTransport>(bootstrap, timeout, std::move(group));
}

std::unique_ptr<FallbackTransport> make_mpi_fallback(bootstrap::OwnedComm comm,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<MpiFallback>(std::move(comm), timeout);
}

}  // namespace peerplan::transport::host
