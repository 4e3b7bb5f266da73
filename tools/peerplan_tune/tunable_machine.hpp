// SPDX-License-Identifier: Apache-2.0
// What the tool reads from a communicator's fingerprint to decide whether
// it can tune the machine (routing/fingerprint.hpp writes it).
#pragma once

#include <string_view>

namespace peerplan::tune {

// The node count of a fingerprint: N of its " nodes=N" word, which a job on
// several nodes has (routing::topology_fingerprint); 1 without it.
int nodes_in_fingerprint(std::string_view fingerprint) noexcept;

}  // namespace peerplan::tune
