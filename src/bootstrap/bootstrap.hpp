// SPDX-License-Identifier: Apache-2.0
// The bootstrap: how the ranks of a communicator find each other and
// exchange small opaque blobs (IPC handles, digests, flags). An interface so
// that MPI is one implementation among possible others (MSCCL++'s habit).
// Every operation is collective over all ranks and bounded by the timeout
// given at construction: a rank that never arrives makes the others throw
// peerplan::Timeout naming the missing ranks, never hang.
//
// Ranks must make the same calls in the same order (calls are matched by
// their sequence number). A rank that was merely late catches up; but once
// a rank has skipped a call, the ranks are out of step for good: after a
// Timeout, discard the bootstrap (its destructor is safe) and stop, or build
// a new one on every rank. One object is used by one thread at a time.
// The MPI implementation: make_mpi_bootstrap in "bootstrap/mpi_bootstrap.hpp".
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace peerplan::bootstrap {

using Blob = std::vector<std::byte>;

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  // Rank and size among the ranks sharing this node (shared memory domain).
  virtual int local_rank() const noexcept = 0;
  virtual int local_size() const noexcept = 0;
  // Index of this rank's node, 0..num_nodes()-1, numbered by lowest rank.
  virtual int node_id() const noexcept = 0;
  virtual int num_nodes() const noexcept = 0;

  // Every rank contributes a blob of any size; all receive all, by rank.
  virtual std::vector<Blob> allgather(std::span<const std::byte> mine) = 0;
  // Same, among the ranks of this node only; result indexed by local rank.
  virtual std::vector<Blob> local_allgather(std::span<const std::byte> mine) = 0;
  // Root's blob is returned on every rank (others pass anything).
  virtual Blob broadcast(std::span<const std::byte> blob, int root) = 0;
  virtual void barrier() = 0;
  // True iff `ok` is true on every rank. Every rank gets the same answer.
  // (A step that can fail on some ranks ends with run_together or
  // gather_failures, bootstrap/fail_together.hpp, which also say who failed.)
  virtual bool agree(bool ok) = 0;
};

}  // namespace peerplan::bootstrap
