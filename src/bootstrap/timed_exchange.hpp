// Collectives over one MPI communicator in which every wait has a deadline.
//
// MPI's own collectives cannot be bounded: a rank that never arrives blocks
// MPI_Allgather forever, and nothing says who is missing. Here each call is
// built from nonblocking point-to-point messages carrying a per-call tag
// (the call's sequence number, identical on every rank because ranks make
// the same calls in the same order). Receives are matched by probe
// (MPI_Improbe, then MPI_Imrecv), so the size travels with the message and
// nothing is posted for a rank that never sends: on expiry there is no
// receive to cancel, and a late message stays unmatched under its own tag,
// where no later call can mistake it for its own.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace peerplan::bootstrap::detail {

class TimedExchange {
 public:
  // `comm` is borrowed; its error handler must return errors.
  // `rank_names[i]` is how rank i of `comm` is named in messages (ranks of
  // the user's communicator); empty means i itself. `label` prefixes the
  // names of operations ("allgather", "local_allgather", ...).
  TimedExchange(MPI_Comm comm, std::chrono::milliseconds timeout, std::vector<int> rank_names = {});

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }

  // Every rank's blob, by rank. `operation` names the call in a Timeout.
  std::vector<Blob> allgather(std::span<const std::byte> mine, const char* operation);
  // Same, waiting at most `bound` instead of the timeout given at
  // construction (e.g. a short roll call after another wait expired).
  std::vector<Blob> allgather(std::span<const std::byte> mine, const char* operation,
                              std::chrono::milliseconds bound);
  // Root's blob on every rank.
  Blob broadcast(std::span<const std::byte> blob, int root, const char* operation);

 private:
  struct Call;
  int begin_call();
  void post_send(Call& call, int destination);
  void wait(Call& call, std::chrono::milliseconds bound);
  [[noreturn]] void time_out(Call& call, std::chrono::milliseconds bound);

  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  std::vector<int> rank_names_;
  int rank_ = 0;
  int size_ = 1;
  int tag_bound_ = 32767;  // MPI_TAG_UB of comm (the standard guarantees at least this)
  std::uint64_t calls_ = 0;
};

}  // namespace peerplan::bootstrap::detail
