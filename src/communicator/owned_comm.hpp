// An MPI communicator the communicator duplicated and must free. The
// duplicate keeps the fallback's traffic apart from the user's and the
// bootstrap's, whatever tags they use.
#pragma once

#include <mpi.h>

#include <utility>

namespace peerplan::communicator {

class OwnedComm {
 public:
  OwnedComm() = default;
  // Collective over `comm`; callers pass a barrier first (bounded by the
  // bootstrap) so that every rank is known to be here and the unbounded
  // MPI_Comm_dup cannot hang. Throws MpiError.
  static OwnedComm duplicate(MPI_Comm comm);
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
  // Frees the duplicate unless MPI is already finalised (then there is
  // nothing left to free). Idempotent.
  void reset() noexcept;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace peerplan::communicator
