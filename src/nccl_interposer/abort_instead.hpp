// SPDX-License-Identifier: Apache-2.0
// NCCL's finalize and destroy wait for the communicator's operations. Once
// an exchange of peerplan's bootstrap over it failed or timed out
// (CommState::out_of_step), NCCL may hold an all-gather that no rank will
// ever match, and they would wait forever: the interposer aborts the real
// communicator instead (abort is destroy without waiting).
//  - ncclCommDestroy returns the abort's result: the communicator is freed,
//    as asked.
//  - ncclCommFinalize cannot flush what will never complete: it aborts too,
//    returns ncclRemoteError (as a peerplan timeout does) and ncclGetLastError
//    says why. The handle is freed then: a later ncclCommDestroy or
//    ncclCommAbort of it returns ncclSuccess, and ncclCommGetAsyncError
//    reports ncclRemoteError, without reaching NCCL.
// Never a non-blocking communicator: peerplan makes no bootstrap over one.
#pragma once

#include <nccl.h>

#include "nccl_interposer/comm_table.hpp"

namespace peerplan::nccl_interposer {

enum class Teardown { finalize, destroy };

// Whether the real finalize or destroy of `state`'s communicator must not run.
inline bool must_abort_instead(const CommState& state) {
  return state.out_of_step || state.nccl_freed;
}

// In place of the real finalize or destroy of `comm`, whose state
// must_abort_instead: aborts it (with a WARN), unless the interposer already
// did, and returns what the application's call returns.
ncclResult_t abort_instead(ncclComm_t comm, CommState& state, Teardown call);

}  // namespace peerplan::nccl_interposer
