#include "communicator/owned_comm.hpp"

#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::communicator {

OwnedComm OwnedComm::duplicate(MPI_Comm comm) {
  OwnedComm owned;
  const int rc = MPI_Comm_dup(comm, &owned.comm_);
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, text, &length);
    throw MpiError("MPI_Comm_dup failed: " + std::string(text, length));
  }
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
