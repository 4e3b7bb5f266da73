#include "communicator/owned_comm.hpp"

#include "bootstrap/mpi_check.hpp"

namespace peerplan::communicator {

OwnedComm OwnedComm::duplicate(MPI_Comm comm) {
  OwnedComm owned;
  bootstrap::detail::check_mpi(MPI_Comm_dup(comm, &owned.comm_), "MPI_Comm_dup", "create");
  return owned;
}

void OwnedComm::reset() noexcept {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

}  // namespace peerplan::communicator
