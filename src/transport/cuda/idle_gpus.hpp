// SPDX-License-Identifier: Apache-2.0
// Waiting, together and bounded, until every rank's GPU has finished the work
// queued before: the step before memory that kernels may use is released
// while the communicator lives on (the P2P slabs that reserve() re-creates,
// the peers' buffers that deregister_buffers() unmaps).
//
// A GPU can run something that never ends: a fallback call that a peer never
// made (NCCL's kernels have no timeout). Its rank must not wait without a
// bound, and the other ranks, whose GPUs are idle, must fail in the same step
// rather than time out, out of step, at the next one. One verdict exchange
// after a local wait of timeout + margin cannot do that: the idle ranks would
// give up waiting for the busy rank's verdict after the timeout, before it
// comes. So the wait goes in slices of at most half the timeout, each ended
// by an agreement every rank makes; the last one names the busy ranks.
#pragma once

#include <chrono>
#include <string_view>

#include "bootstrap/bootstrap.hpp"

namespace peerplan::transport::cuda {

// Collective over every rank of `bootstrap`. Returns once every rank's
// `device` has finished what was queued before the call (device_idle_by), or
// throws Timeout on every rank, with the same message naming the ranks whose
// GPU was still busy, after timeout + kTeardownMargin: the caller must then
// release nothing a kernel may still use. `timeout` sets the number of
// rounds: it must be the same on every rank (Config::timeout, which create
// checks). `step` names the caller's step in the message ("re-creating the
// staging slabs"). Throws Timeout too when a rank does not take part.
void wait_for_idle_gpus(bootstrap::Bootstrap& bootstrap, int device,
                        std::chrono::milliseconds timeout, std::string_view step);

}  // namespace peerplan::transport::cuda
