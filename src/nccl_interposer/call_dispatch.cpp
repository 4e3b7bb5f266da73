// SPDX-License-Identifier: Apache-2.0
#include "nccl_interposer/call_dispatch.hpp"

#include <cuda_runtime_api.h>

#include <optional>
#include <string>

#include "core/log.hpp"
#include "nccl_interposer/last_error.hpp"
#include "nccl_interposer/nccl_types.hpp"
#include "nccl_interposer/real_nccl.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {
namespace {

std::size_t bytes_of(const NcclAllReduce& call) { return call_bytes(call.count, call.type); }

// False when CUDA cannot tell (its error cleared): peerplan's failure is
// then reported as it is.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

// Counted under peerplan_error, which the summary reports as failed: NCCL
// did not run it.
ncclResult_t peerplan_failed(const std::exception& error, CommState& state, std::size_t bytes) {
  const int code = nccl_result_for(error);
  state.fallback(bytes, FallbackCause::peerplan_error);
  const bool timed_out = dynamic_cast<const Timeout*>(&error) != nullptr;
  if (timed_out) {
    state.break_after_timeout("an all-reduce of " + std::to_string(bytes) +
                              " bytes timed out: " + error.what());
  }
  record_peerplan_error(error.what());
  log::warn("NCCL interposer: ncclAllReduce on peerplan failed: " + std::string(error.what()) +
            (timed_out ? "; every later operation on this communicator fails with "
                         "ncclRemoteError until it is aborted"
                       : ""));
  return static_cast<ncclResult_t>(code);
}

// NCCL's answer on a communicator with an asynchronous error, with
// peerplan's reason as the process's last error.
ncclResult_t refuse(const CommState* state) {
  const std::string why = state != nullptr ? state->broken_by() : "";
  record_peerplan_error(
      "the operation is refused: a peerplan call on this communicator timed out earlier" +
      (why.empty() ? std::string() : " (" + why + ")") +
      ", and every later operation on it fails with ncclRemoteError, as on an NCCL "
      "communicator with an asynchronous error; abort the communicator (ncclCommAbort), as "
      "NCCL requires after ncclRemoteError");
  return ncclRemoteError;
}

}  // namespace

Choice choose(const NcclAllReduce& call, bool in_group, std::size_t ops_in_group) {
  Choice choice;
  choice.state = find_comm(call.comm);
  CommState* state = choice.state.get();
  // The communicator itself (a lock, a reference) is taken only for a call
  // it runs; one released meanwhile sends the call to NCCL all the same.
  if (state == nullptr) return choice;  // no_communicator
  // Before the others: refused until the program aborts or destroys it, a
  // communicator being aborted and one finalized included.
  if (state->broken) {
    choice.decision = {false, FallbackCause::after_timeout};
    return choice;
  }
  if (state->aborted || !state->has_communicator()) {
    choice.decision = {false, FallbackCause::no_communicator};
    return choice;
  }
  const AllReduceCall rules_call{to_nccl_type(call.type),
                                 to_nccl_op(call.op),
                                 call.count,
                                 call.send,
                                 call.recv,
                                 in_group,
                                 ops_in_group};
  choice.decision = decide(rules_call, state->p2p_declared);
  // Declared, but not on a P2P route: peerplan would only hand it to its
  // own fallback, which the interposer does not have.
  if (choice.decision.cause == FallbackCause::undeclared_count &&
      decide(rules_call, state->declared).cause != FallbackCause::undeclared_count) {
    choice.decision.cause = FallbackCause::peerplan_route;
  }
  // Declared, but left out of peerplan's declarations: its declare refuses it.
  if (choice.decision.cause == FallbackCause::undeclared_count && !state->not_declarable.empty() &&
      decide(rules_call, state->not_declarable).cause != FallbackCause::undeclared_count) {
    choice.decision.cause = FallbackCause::not_declarable;
  }
  // Whatever the rules say, a group of several operations is NCCL's: the
  // others are already queued in NCCL's group.
  if (choice.decision.to_peerplan && (!to_data_type(call.type) || ops_in_group > 1)) {
    choice.decision = {false,
                       ops_in_group > 1 ? FallbackCause::group_of_many : FallbackCause::dtype};
  }
  if (!choice.decision.to_peerplan) return choice;
  choice.peerplan = state->communicator();
  if (choice.peerplan == nullptr) {
    choice.decision = {false, FallbackCause::no_communicator};
    return choice;
  }
  // comm_table.cpp fills and clears p2p_declared and p2p_layouts side by side.
  choice.layout = &state->p2p_layouts[choice.decision.declared_index];
  return choice;
}

ncclResult_t run_on_nccl(const NcclAllReduce& call, CommState* state, FallbackCause cause) {
  const RealNccl& real = real_nccl();
  if (real.all_reduce == nullptr) return ncclInternalError;
  if (state != nullptr) state->fallback(bytes_of(call), cause);
  return note_nccl_result(real.all_reduce(call.send, call.recv, call.count, call.type, call.op,
                                          call.comm, call.stream));
}

bool refuses(const Choice& choice) {
  return !choice.decision.to_peerplan && choice.decision.cause == FallbackCause::after_timeout;
}

ncclResult_t run(const NcclAllReduce& call, const Choice& choice) {
  CommState* state = choice.state.get();
  if (refuses(choice)) {
    state->fallback(bytes_of(call), FallbackCause::after_timeout);
    return refuse(state);
  }
  if (!choice.decision.to_peerplan) return run_on_nccl(call, state, choice.decision.cause);
  try {
    choice.peerplan->all_reduce(call.send, call.recv, *to_data_type(call.type), *choice.layout,
                                call.stream);
    state->hit(bytes_of(call));
    return ncclSuccess;
  } catch (const std::exception& error) {
    if (capturing(call.stream) && dynamic_cast<const Timeout*>(&error) == nullptr) {
      log::info(log::Subsystem::call,
                std::string("NCCL interposer: peerplan refused a call under CUDA graph "
                            "capture, NCCL takes it: ") +
                    error.what());
      return run_on_nccl(call, state, FallbackCause::capture_refused);
    }
    return peerplan_failed(error, *state, bytes_of(call));
  }
}

void count_other(ncclComm_t comm, std::size_t bytes) {
  if (auto state = find_comm(comm)) state->fallback(bytes, FallbackCause::not_all_reduce);
}

std::optional<ncclResult_t> refuse_if_broken(ncclComm_t comm, std::size_t bytes, bool count) {
  const auto state = find_comm(comm);
  if (state == nullptr || !state->broken) return std::nullopt;
  if (count) state->fallback(bytes, FallbackCause::after_timeout);
  return refuse(state.get());
}

ncclResult_t refusal(ncclComm_t comm) { return refuse(find_comm(comm).get()); }

void fail_nccl_group(ncclComm_t comm) {
  const auto state = find_comm(comm);
  // A handle a finalize freed (abort_instead.hpp) must not reach NCCL.
  if (real_nccl().all_reduce == nullptr || (state != nullptr && state->nccl_freed)) return;
  // No elements, no buffers, and a type NCCL's argument check refuses, which
  // fails the open group (NCCL's group error): nothing is read, nothing runs.
  real_nccl().all_reduce(nullptr, nullptr, 0, ncclNumTypes, ncclSum, comm, nullptr);
}

}  // namespace peerplan::nccl_interposer
