// SPDX-License-Identifier: Apache-2.0
// The fallback of a communicator whose caller keeps the declined calls to
// itself (FallbackSetup::none): it refuses every call, so that a call the
// caller should have kept never reaches a fallback it does not have.
#pragma once

#include <memory>

#include "transport/transport.hpp"

namespace peerplan::communicator {

// Every call throws InvalidUsage saying the caller should have run it.
std::unique_ptr<transport::FallbackTransport> make_no_fallback();

}  // namespace peerplan::communicator
