// Duplicating an MPI communicator within a deadline.
//
// MPI_Comm_dup is a blocking collective: a rank that never joins blocks it
// forever, and nothing says so. Here the duplication is MPI_Comm_idup polled
// against a deadline. On expiry MPI still owns the request and will write the
// new handle when (if) the missing ranks join, so the storage of that handle
// lives on the heap and, with the request, is kept until the process exits
// (the message of the Timeout says so): a late completion never writes into
// freed memory.
//
// Used by OwnedComm::duplicate (the MPI fallback's communicator). The MPI
// bootstrap has its own copy (duplicate_within in mpi_bootstrap.cpp, whose
// handle lives on the stack) that can switch to this one.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>

namespace peerplan::bootstrap {

// Collective over `comm`. Returns the duplicate, with MPI_ERRORS_RETURN set
// on it (errors become return codes, which peerplan turns into MpiError).
// Throws Timeout ("<what>: duplicating the communicator timed out after ...")
// when not every rank joined within `timeout`, MpiError when MPI fails.
MPI_Comm duplicate_within(MPI_Comm comm, std::chrono::milliseconds timeout, const char* what);

// Duplications abandoned by a Timeout whose request MPI has not completed
// (kept until exit). For tests and diagnostics.
std::size_t abandoned_duplications() noexcept;

}  // namespace peerplan::bootstrap
