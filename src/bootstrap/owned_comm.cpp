// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/owned_comm.hpp"

#include "bootstrap/bounded_dup.hpp"

namespace peerplan::bootstrap {

OwnedComm OwnedComm::duplicate(MPI_Comm comm, std::chrono::milliseconds timeout, const char* what) {
  return adopt(duplicate_within(comm, timeout, what));
}

void OwnedComm::reset() noexcept {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  // One with a duplication of it still in progress is kept (bounded_dup.hpp).
  if (!finalized && !duplication_in_progress_on(comm_)) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

}  // namespace peerplan::bootstrap
