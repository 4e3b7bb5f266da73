// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/abort_instead.hpp"

#include <string>

#include "core/log.hpp"
#include "nccl_interposer/last_error.hpp"
#include "nccl_interposer/real_nccl.hpp"

namespace peerplan::nccl_interposer {
namespace {

constexpr const char* kWhy =
    "an exchange of peerplan's bootstrap over it failed or timed out (a peer that skipped or "
    "never reached it, see the earlier WARN), which leaves NCCL an all-gather that may never "
    "complete, and NCCL's finalize and destroy would wait for it forever";

// ncclGetLastError's text after the finalize: what happened, what to do.
std::string finalize_error() {
  return std::string("ncclCommFinalize aborted the communicator instead of finalizing it: ") +
         kWhy +
         ". Its resources are freed and its unfinished operations did not complete; call "
         "ncclCommDestroy or ncclCommAbort on it as usual (both return at once), and make a new "
         "communicator to go on";
}

}  // namespace

ncclResult_t abort_instead(ncclComm_t comm, CommState& state, Teardown call) {
  const bool finalize = call == Teardown::finalize;
  const RealNccl& real = real_nccl();
  if (real.comm_abort == nullptr) return ncclInternalError;
  // Claimed before the abort: an abort or finalize on another thread must
  // not free it twice.
  if (state.nccl_freed.exchange(true)) {
    // A finalize aborted it already: the handle is NCCL's no more.
    if (!finalize) return ncclSuccess;
    record_peerplan_error(finalize_error());
    return ncclRemoteError;
  }
  log::warn(std::string("NCCL interposer: ") + (finalize ? "ncclCommFinalize" : "ncclCommDestroy") +
            " on rank " + std::to_string(state.rank) +
            " aborts the NCCL communicator instead: " + kWhy +
            (finalize ? "; it returns ncclRemoteError, and a later ncclCommDestroy or "
                        "ncclCommAbort of it returns at once"
                      : ""));
  // Freed from here on even if the abort fails: NCCL may have freed part
  // of it, and a second abort or destroy could free it twice.
  const ncclResult_t aborted = note_nccl_result(real.comm_abort(comm));
  if (!finalize || aborted != ncclSuccess) return aborted;
  record_peerplan_error(finalize_error());
  return ncclRemoteError;
}

}  // namespace peerplan::nccl_interposer
