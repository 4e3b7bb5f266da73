// SPDX-License-Identifier: Apache-2.0
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
// Used by the MPI bootstrap (the first step of create) and by
// OwnedComm::duplicate (the MPI fallback's communicator).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace peerplan::bootstrap {

// Collective over `comm`. Returns the duplicate, with MPI_ERRORS_RETURN set
// on it (errors become return codes, which peerplan turns into MpiError).
// Throws Timeout ("<what>: duplicating the communicator timed out after ...
// <explanation>") when not every rank joined within `timeout`, MpiError
// when MPI fails. An empty `explanation` gives a generic one.
MPI_Comm duplicate_within(MPI_Comm comm, std::chrono::milliseconds timeout, const char* what,
                          const std::string& explanation = {});

// Duplications abandoned by a Timeout whose request MPI has not completed
// (kept until exit). For tests and diagnostics.
std::size_t abandoned_duplications() noexcept;

}  // namespace peerplan::bootstrap
