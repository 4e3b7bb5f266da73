// SPDX-License-Identifier: Apache-2.0
// The prologue both peer transports start each P2P call with, and the
// Timeout text both give: what they refuse, with which error, and that the
// messages say what happened and what to do.
#include "transport/peer_call_state.hpp"

#include <gtest/gtest.h>

#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::transport {
namespace {

constexpr std::string_view kBackend = "peerplan test backend";

template <class E>
std::string refusal(const PeerCallState& state, std::size_t bytes) {
  try {
    begin_peer_call(kBackend, state, "all_reduce (one-shot)", bytes);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "not refused";
}

void expect_has(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "\"" << part << "\" missing in: " << message;
}

TEST(PeerCallState, AReadyTransportRunsCallsUpToItsCapacity) {
  const PeerCallState ready{false, false, {}, 4096};
  EXPECT_NO_THROW(begin_peer_call(kBackend, ready, "x", 0));
  EXPECT_NO_THROW(begin_peer_call(kBackend, ready, "x", 4096));
}

TEST(PeerCallState, RefusesClosedBrokenUnreservedAndOversizedCallsSayingWhy) {
  const std::string closed = refusal<InvalidUsage>({true, false, {}, 4096}, 16);
  expect_has(closed, "peerplan test backend: all_reduce (one-shot) after close()");

  // Closed wins over the rest: the transport is gone.
  expect_has(refusal<InvalidUsage>({true, true, "x", 0}, 1 << 20), "after close()");

  const std::string broken =
      refusal<InvalidUsage>({false, true, "all_reduce (one-shot) call #7 timed out", 4096}, 16);
  expect_has(broken, "peerplan test backend: all_reduce (one-shot) on a P2P transport broken");
  expect_has(broken, "(all_reduce (one-shot) call #7 timed out)");  // what broke it
  expect_has(broken, "reserve() re-creates it on every rank");
  expect_has(broken, "next declare()");

  const std::string unreserved = refusal<InvalidUsage>({false, false, {}, 0}, 16);
  expect_has(unreserved, "before reserve(): no staging memory");

  const std::string oversized = refusal<InvalidArgument>({false, false, {}, 4096}, 4097);
  expect_has(oversized, "all_reduce (one-shot) of 4097 bytes exceeds the reserved 4096 bytes");
  expect_has(oversized, "routed to the fallback");
}

TEST(PeerCallState, TimeoutMessageSaysWhatHappenedWhyAndWhatToChange) {
  const std::string message = peer_timeout_message(
      kBackend, "all_reduce (two-shot) call #3 timed out after 500 ms waiting for rank(s) 2");
  EXPECT_EQ(message.rfind("peerplan test backend: all_reduce (two-shot) call #3 timed out after "
                          "500 ms waiting for rank(s) 2. ",
                          0),
            0u)
      << message;
  expect_has(message, "A rank probably stopped calling collectives");
  expect_has(message, std::string(kUnusableUntilReserve));
  expect_has(message, "raise PEERPLAN_TIMEOUT_MS");
}

}  // namespace
}  // namespace peerplan::transport
