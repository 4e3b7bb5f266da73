// SPDX-License-Identifier: Apache-2.0
// The communicator's topology fingerprint (routing/fingerprint.hpp), from
// facts gathered from every rank so that every rank computes the same one.
#pragma once

#include <string>

#include "bootstrap/bootstrap.hpp"
#include "peerplan/config.hpp"

namespace peerplan::communicator {

// Collective when `backend` is cuda and the communicator is on one node
// (one allgather of each rank's GPU model, PCI bus id and NVLink ends;
// the topology is read from config.topology_file or the live machine).
// Call after select_backend: the cuda backend's device must be selected.
// Never throws for lack of facts: what cannot be found reads as "unknown".
std::string machine_fingerprint(bootstrap::Bootstrap& bootstrap, const Config& config,
                                Backend backend);

}  // namespace peerplan::communicator
