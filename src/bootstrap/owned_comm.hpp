// SPDX-License-Identifier: Apache-2.0
// An MPI communicator peerplan duplicated and must free. The duplicate keeps
// a component's traffic (the MPI fallback's) apart from the user's and the
// bootstrap's, whatever tags they use.
#pragma once

#include <mpi.h>

#include <chrono>
#include <utility>

namespace peerplan::bootstrap {

class OwnedComm {
 public:
  OwnedComm() = default;
  // Collective over `comm`, bounded by `timeout` (MPI_Comm_idup polled
  // against a deadline; see bounded_dup.hpp). The duplicate returns errors
  // (MPI_ERRORS_RETURN). Throws Timeout naming `what` when not every rank
  // joined in time, MpiError when MPI fails.
  static OwnedComm duplicate(MPI_Comm comm, std::chrono::milliseconds timeout,
                             const char* what = "create");
  // Takes ownership of `comm` (freed by reset() or the destructor).
  static OwnedComm adopt(MPI_Comm comm) noexcept {
    OwnedComm owned;
    owned.comm_ = comm;
    return owned;
  }
  ~OwnedComm() { reset(); }
  OwnedComm(OwnedComm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  OwnedComm& operator=(OwnedComm&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    }
    return *this;
  }
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;

  MPI_Comm get() const noexcept { return comm_; }
  explicit operator bool() const noexcept { return comm_ != MPI_COMM_NULL; }
  // Frees the duplicate unless MPI is already finalised (then there is
  // nothing left to free). Idempotent. Only when nothing MPI may still run
  // uses it: pending operations on a freed communicator crash Open MPI.
  void reset() noexcept;
  // Gives the handle up without freeing it: for a communicator that MPI
  // operations abandoned by a timeout may still use (kept until exit).
  MPI_Comm release() noexcept { return std::exchange(comm_, MPI_COMM_NULL); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace peerplan::bootstrap
