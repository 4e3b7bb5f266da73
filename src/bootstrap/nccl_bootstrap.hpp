// SPDX-License-Identifier: Apache-2.0
// A bootstrap over an NCCL communicator the application already has: what
// the NCCL interposer (libpeerplan_nccl.so) creates peerplan over, so that
// it needs no MPI (torchrun as well as mpirun). Built only with CUDA and
// NCCL.
//
// It reaches NCCL only through the function pointers it is given, never
// through the NCCL symbols themselves: inside the interposer those are the
// interposed ones, and a bootstrap step must never be taken for one of the
// application's calls.
#pragma once

#include <nccl.h>

#include <chrono>
#include <memory>

#include "bootstrap/bootstrap.hpp"

namespace peerplan::bootstrap {

// The real NCCL functions the bootstrap calls (resolved by the caller, e.g.
// with dlsym(RTLD_NEXT, ...)). Every pointer must be set.
struct NcclFunctions {
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&::ncclCommUserRank) user_rank = nullptr;
  decltype(&::ncclCommCount) count = nullptr;
  decltype(&::ncclCommCuDevice) cu_device = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
};

// Collective over every rank of `comm` (which must stay valid, and be
// neither inside a ncclGroupStart/End nor non-blocking, while the result is
// used). Its exchanges are ncclAllGather calls on device buffers (allocated
// once, grown when a larger blob comes) on a stream of its own, on the
// communicator's device; every exchange is bounded by `timeout` (polling the
// stream and ncclCommGetAsyncError until a deadline) and throws
// peerplan::Timeout past it, NcclError when NCCL reports an error. NCCL
// cannot say which rank is missing, so Timeout cannot name it. After a
// Timeout the ranks are out of step: every later exchange throws
// InvalidUsage, and the buffers a stuck allgather may still write are never
// freed. Aborting `comm` is the owner's business, never the bootstrap's.
// Ranks share a node when their node keys (detail::node_key) match, as in
// the MPI bootstrap.
std::unique_ptr<Bootstrap> make_nccl_bootstrap(ncclComm_t comm, const NcclFunctions& nccl,
                                               std::chrono::milliseconds timeout);

}  // namespace peerplan::bootstrap
