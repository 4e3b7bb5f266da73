// What the communicator needs to build the host backend's transports,
// without including the implementation headers.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::host {

// P2P over POSIX shared memory among the node-local ranks of `bootstrap`.
// Collective over every rank of `bootstrap` (which must outlive the
// result); reserves nothing until reserve(). See host_peer_transport.hpp.
std::unique_ptr<PeerTransport> make_host_peer_transport(bootstrap::Bootstrap& bootstrap,
                                                        std::chrono::milliseconds timeout);

// MPI fallback on `comm` (the communicator's own duplicate, which it keeps
// owning and must keep valid until close()). Not collective.
std::unique_ptr<FallbackTransport> make_mpi_fallback(MPI_Comm comm,
                                                     std::chrono::milliseconds timeout);

}  // namespace peerplan::transport::host
