// SPDX-License-Identifier: Apache-2.0
// The prologue every P2P call of a peer transport starts with, and the
// texts both peer transports (host shared memory, CUDA IPC) give when a
// call is refused or a wait times out, so that the two backends say the
// same thing the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace peerplan::transport {

// What a peer transport knows at the start of a call. Each transport keeps
// these facts in its own members (reserve() and close() update them) and
// passes a view of them here.
struct PeerCallState {
  bool closed = false;
  // A call failed (a wait timed out, a peer gave up) since the last
  // reserve(); broken_reason says what happened, e.g. "all_reduce
  // (one-shot) call #3 timed out after 500 ms waiting for rank(s) 1 to ...".
  bool broken = false;
  std::string_view broken_reason;
  std::size_t capacity = 0;  // the largest message reserve() made room for
};

// Refuses a call that cannot run: throws InvalidUsage when the transport is
// closed, broken, or has nothing reserved (capacity 0), InvalidArgument
// when `message_bytes` exceeds the capacity. `backend` starts the message
// ("peerplan host backend"), `what` names the call ("all_reduce
// (one-shot)"). Inline fast path: nothing but compares when the call runs.
[[noreturn]] void refuse_peer_call(std::string_view backend, const PeerCallState& state,
                                   std::string_view what, std::size_t message_bytes);
inline void begin_peer_call(std::string_view backend, const PeerCallState& state,
                            std::string_view what, std::size_t message_bytes) {
  if (state.closed || state.broken || state.capacity == 0 || message_bytes > state.capacity) {
    refuse_peer_call(backend, state, what, message_bytes);
  }
}

// The sentence both transports end a failed call's message with.
inline constexpr std::string_view kUnusableUntilReserve =
    "The P2P transport is unusable until reserve() re-creates it (the communicator's next "
    "declare()).";

// The text of the Timeout a P2P call raises when a wait expired or a peer
// gave up: "<backend>: <what_happened>. A rank probably stopped calling
// collectives ... raise PEERPLAN_TIMEOUT_MS." `what_happened` names the
// call, its number and the ranks waited for (the transport knows them).
std::string peer_timeout_message(std::string_view backend, std::string_view what_happened);

}  // namespace peerplan::transport
