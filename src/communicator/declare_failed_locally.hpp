// SPDX-License-Identifier: Apache-2.0
// For the C interface, which converts each C declaration before the C++
// declare: a value it cannot convert (a dtype or operation outside its enum,
// ndim past kMaxRank, a NULL shape) is known on that rank only. Throwing it
// there would leave the other ranks in declare's first exchange until the
// timeout; this makes the exchange with that error, so every rank raises it
// at once, as for a declaration that fails validation. Not public API.
#pragma once

#include <string>

#include "peerplan/communicator.hpp"

namespace peerplan::communicator {

// Collective, in place of comm.declare(...) on the failing rank (the others
// make their own declare). Always throws: InvalidArgument naming this rank's
// `error` (and any other rank's), the previous declared set staying in force.
[[noreturn]] void declare_failed_locally(Communicator& comm, const std::string& error);

}  // namespace peerplan::communicator
