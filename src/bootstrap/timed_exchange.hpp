// SPDX-License-Identifier: Apache-2.0
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
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace peerplan::bootstrap::detail {

class TimedExchange {
 public:
  // Several exchanges may share one communicator, each in a tag space of
  // its own (lane `index` of `count`: tags index, index + count, ...), so
  // that their sequence-numbered tags never meet.
  struct Lane {
    int index = 0;
    int count = 1;
  };

  // `comm` is borrowed; its error handler must return errors.
  // `rank_names[i]` is how rank i of `comm` is named in messages (ranks of
  // the user's communicator); empty means i itself. Uses every tag of `comm`.
  TimedExchange(MPI_Comm comm, std::chrono::milliseconds timeout, std::vector<int> rank_names = {});
  // Among `members` of `comm` only (ranks of `comm`, ascending, this rank
  // among them), in tag lane `lane`: rank() and size() count members, blobs
  // are indexed by position in `members`, and a Timeout names the missing
  // members by their ranks in `comm`. Messages travel point-to-point
  // between members; the other ranks of `comm` see none.
  TimedExchange(MPI_Comm comm, std::chrono::milliseconds timeout, std::vector<int> members,
                Lane lane);

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

  // Whom a verdict's word reached in time (allgather_by). Members are named
  // as in a Timeout, in the order the messages left.
  struct Said {
    std::vector<int> in_time;  // got `in_time`, sent before the deadline
    std::vector<int> late;     // got `late`: the deadline had passed before their send
    int unsure = -1;           // got `in_time`, but the deadline passed during its send; -1: none

    // Every member got `in_time`, sent before the deadline.
    bool all_in_time() const noexcept { return late.empty() && unsure < 0; }
    // Every member got `late`: the deadline had passed before the first send.
    bool all_late() const noexcept { return in_time.empty() && unsure < 0; }
  };
  // A verdict's allgather. Each message this rank sends carries `in_time`
  // if the clock, read just before it, is before `deadline`, else `late`;
  // the clock is read again after each send, so a stall between two sends
  // is seen. When every member got `in_time` in time, waits as
  // allgather(bound) and returns every blob. Otherwise returns at once with
  // no blobs (the messages stay with MPI): this rank's word is `late` for
  // some members or for all.
  std::vector<Blob> allgather_by(std::span<const std::byte> in_time,
                                 std::span<const std::byte> late,
                                 std::chrono::steady_clock::time_point deadline, Said& said,
                                 const char* operation, std::chrono::milliseconds bound);

 private:
  struct Call;
  void read_comm();
  int begin_call();
  int comm_rank_of(int position) const;
  void start_allgather(Call& call, std::span<const std::byte> mine, const char* operation);
  void post_send(Call& call, int destination, const std::shared_ptr<const Blob>& blob);
  void wait(Call& call, std::chrono::milliseconds bound);
  std::vector<Blob> gathered(Call& call);
  // Frees the call's unfinished sends; MPI may still read their buffers.
  void abandon_sends(Call& call);
  [[noreturn]] void time_out(Call& call, std::chrono::milliseconds bound);

  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
  std::vector<int> rank_names_;   // by position; empty: the rank in comm_
  std::vector<int> members_;      // comm_ rank of each position; empty: all, in order
  std::vector<int> position_of_;  // inverse of members_ (-1: not a member); empty: identity
  Lane lane_;
  int rank_ = 0;
  int size_ = 1;
  int tag_bound_ = 32767;  // MPI_TAG_UB of comm (the standard guarantees at least this)
  std::uint64_t calls_ = 0;
};

}  // namespace peerplan::bootstrap::detail
