// SPDX-License-Identifier: Apache-2.0
// MPI return-code checking for every layer that calls MPI (bootstrap,
// fallback, communicator): failures become peerplan::MpiError carrying MPI's
// own description of the error.
#pragma once

#include <mpi.h>

namespace peerplan::bootstrap::detail {

// Throws MpiError("<context>: <call> failed: <MPI error string>") unless
// rc == MPI_SUCCESS. Only meaningful on communicators whose error handler
// returns errors (MPI_ERRORS_RETURN); with the default handler MPI aborts first.
void check_mpi(int rc, const char* call, const char* context = "bootstrap");

// Throws InvalidUsage unless MPI is initialised and not yet finalised.
void require_mpi_running(const char* what);

}  // namespace peerplan::bootstrap::detail
