// SPDX-License-Identifier: Apache-2.0
// One ncclAllReduce: to peerplan or to the real NCCL, counted either way,
// and peerplan's failures in NCCL's terms.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <optional>

#include "nccl_interposer/comm_table.hpp"
#include "nccl_interposer/dispatch_rules.hpp"

namespace peerplan::nccl_interposer {

struct NcclAllReduce {
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// Where a call goes: `state` is null for a communicator the interposer did
// not see made (then nothing is counted). `peerplan` is the communicator
// that runs it when the decision is peerplan's, held for the call's length.
struct Choice {
  std::shared_ptr<CommState> state;
  std::shared_ptr<Communicator> peerplan;
  // The call's layout, kept in `state` for its declared size; set when the
  // decision is peerplan's.
  const TensorLayout* layout = nullptr;
  Decision decision{false, FallbackCause::no_communicator};
};

// The rules (dispatch_rules.hpp) applied to this communicator's state.
// `ops_in_group`: the operations of the enclosing group (1 outside one).
Choice choose(const NcclAllReduce& call, bool in_group, std::size_t ops_in_group);

// Runs the call where `choice` says and counts it. A peerplan failure
// during a CUDA graph capture passes the call to NCCL (capture_refused);
// any other returns its NCCL code (a Timeout also marks the communicator
// broken, and ncclCommGetAsyncError reports it). On a broken communicator
// the call is refused (`refuses`): ncclRemoteError, run by neither library.
ncclResult_t run(const NcclAllReduce& call, const Choice& choice);

// Whether `choice` refuses its call: a peerplan call on the communicator
// timed out before (after_timeout).
bool refuses(const Choice& choice);

// The real ncclAllReduce, counted as a fallback for `cause`.
ncclResult_t run_on_nccl(const NcclAllReduce& call, CommState* state, FallbackCause cause);

// Counts an operation other than an all-reduce that goes to NCCL.
void count_other(ncclComm_t comm, std::size_t bytes);

// An operation other than an all-reduce on `comm`: refused as `run` refuses
// an all-reduce (counted as after_timeout when `count`) where a peerplan
// timeout broke `comm`; nullopt otherwise, and it goes to NCCL.
std::optional<ncclResult_t> refuse_if_broken(ncclComm_t comm, std::size_t bytes, bool count);

// A refusal's ncclRemoteError, its reason recorded again as the process's
// last error (after the group end NCCL failed for it).
ncclResult_t refusal(ncclComm_t comm);

// Makes the open NCCL group fail as a whole at its end, as NCCL's does when
// one of its operations fails: NCCL is handed an all-reduce of `comm` that
// it refuses by its arguments.
void fail_nccl_group(ncclComm_t comm);

}  // namespace peerplan::nccl_interposer
