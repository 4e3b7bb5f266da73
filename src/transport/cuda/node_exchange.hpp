// SPDX-License-Identifier: Apache-2.0
// The hierarchical route's step between nodes on the cuda backend: the
// ranks that hold the same local rank, one on each node, add up this
// rank's shard of their node's sum (cuda/node_shards.cu writes it, reads
// the result back). Two engines, chosen at create (backend_selection.cpp):
//   NCCL: an all-reduce on a NCCL communicator of the group (its unique id
//     exchanged through the communicator's bootstrap: bootstrap/
//     member_group.hpp), queued on the caller's stream, so CUDA graphs
//     capture it. The order of the sum across nodes is NCCL's; every member
//     gets the same bits.
//   MPI: where NCCL cannot serve (a build without it, Config::fallback =
//     mpi, or two members of a group on one GPU, which NCCL refuses): the
//     shard goes through pinned host memory to the host backend's node
//     sum (transport/host/node_group_sum.hpp: fp32 in node order, one
//     rounding). It blocks the calling thread and cannot be captured.
// No CUDA header here (cuda_backend.hpp includes this): streams are
// StreamHandles. Every wait is bounded by the timeout; a failed step leaves the group out
// of step (the communicator then refuses further calls, as after any
// Timeout between nodes).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/owned_comm.hpp"
#include "peerplan/config.hpp"
#include "peerplan/dtype.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::cuda {

class NodeExchange {
 public:
  virtual ~NodeExchange() = default;
  // Collective among this rank's group, in the same order on every member:
  // `count` elements of `dtype` at `shard` (device memory, produced by work
  // queued on `stream`) become their sum over the nodes, queued on
  // `stream`. `what` names the call in errors.
  virtual void sum(void* shard, std::size_t count, DataType dtype, StreamHandle stream,
                   const char* what) = 0;
  // Local, before the call queues anything: throws InvalidUsage when this
  // engine cannot run on `stream` (MPI during CUDA graph capture), so that
  // a refused call leaves the stream untouched.
  virtual void check_stream(StreamHandle stream, const char* what) const = 0;
  // "NCCL" or "MPI", for the route table and INFO.
  virtual const char* engine() const noexcept = 0;
  // Bounded, never throws; idempotent.
  virtual void close() = 0;
};

// Collective over every rank of `parent` (all groups at once), which must
// outlive the result. Throws what the NCCL fallback's construction throws.
std::unique_ptr<NodeExchange> make_nccl_node_exchange(bootstrap::Bootstrap& parent,
                                                      std::chrono::milliseconds timeout,
                                                      RowClusters row_clusters);

// Local (host/node_group_sum.hpp). `comm`: a duplicate of the communicator
// `parent` runs on, which it owns from now on; `node_of_rank`: every rank's
// node, as the communicator's rank cards say.
std::unique_ptr<NodeExchange> make_mpi_node_exchange(bootstrap::OwnedComm comm,
                                                     bootstrap::Bootstrap& parent,
                                                     const std::vector<int>& node_of_rank,
                                                     std::chrono::milliseconds timeout);

}  // namespace peerplan::transport::cuda
