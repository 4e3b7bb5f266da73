// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/mpi_check.hpp"

#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::bootstrap::detail {

void check_mpi(int rc, const char* call, const char* context) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  throw MpiError(std::string(context) + ": " + call + " failed: " +
                 (length > 0 ? std::string(text, static_cast<std::size_t>(length))
                             : "MPI error code " + std::to_string(rc)));
}

void require_mpi_running(const char* what) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized) {
    throw InvalidUsage(std::string(what) +
                       ": MPI is not initialised; call MPI_Init (or MPI_Init_thread) first");
  }
  if (finalized) {
    throw InvalidUsage(std::string(what) +
                       ": MPI has already been finalised; create and close peerplan "
                       "communicators between MPI_Init and MPI_Finalize");
  }
}

}  // namespace peerplan::bootstrap::detail
