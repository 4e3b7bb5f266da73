// SPDX-License-Identifier: Apache-2.0
#include "transport/peer_call_state.hpp"

#include "peerplan/errors.hpp"

namespace peerplan::transport {

void refuse_peer_call(std::string_view backend, const PeerCallState& state, std::string_view what,
                      std::size_t message_bytes) {
  const std::string head = std::string(backend) + ": " + std::string(what);
  if (state.closed) {
    throw InvalidUsage(head + " after close(); the P2P transport is gone.");
  }
  if (state.broken) {
    throw InvalidUsage(head + " on a P2P transport broken by an earlier failed call (" +
                       std::string(state.broken_reason) +
                       "); reserve() re-creates it on every rank (the communicator does this at "
                       "the next declare()).");
  }
  if (state.capacity == 0) {
    throw InvalidUsage(head + " before reserve(): no staging memory.");
  }
  throw InvalidArgument(head + " of " + std::to_string(message_bytes) +
                        " bytes exceeds the reserved " + std::to_string(state.capacity) +
                        " bytes; such calls must be routed to the fallback.");
}

std::string peer_timeout_message(std::string_view backend, std::string_view what_happened) {
  return std::string(backend) + ": " + std::string(what_happened) +
         ". A rank probably stopped calling collectives (crashed, hung, or calls them in a "
         "different order than the others). " +
         std::string(kUnusableUntilReserve) +
         " If the ranks are only slow, raise "
         "PEERPLAN_TIMEOUT_MS.";
}

}  // namespace peerplan::transport
