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

// A duplication in progress: MPI_Comm_idup's request and the storage MPI
// writes the new handle to. Destroying one that MPI has not completed keeps
// both until the process exits (counted by abandoned_duplications()).
class Duplication {
 public:
  // Collective over `comm`: starts MPI_Comm_idup. MpiError (naming `what`)
  // when MPI fails.
  Duplication(MPI_Comm comm, const char* what);
  ~Duplication();
  Duplication(const Duplication&) = delete;
  Duplication& operator=(const Duplication&) = delete;

  // Polls until MPI completes the duplication (true) or `deadline` passes
  // (false; it stays in progress and may be waited on again).
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  // Whether MPI has completed it, without waiting.
  bool completed() { return wait_until(std::chrono::steady_clock::time_point::min()); }
  // The duplicate, once wait_until returned true, with MPI_ERRORS_RETURN set
  // on it; the caller owns it.
  MPI_Comm take();

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  MPI_Comm* handle_ = nullptr;  // on the heap: MPI may write it after we gave up
  MPI_Comm parent_ = MPI_COMM_NULL;
  const char* what_;
};

// Collective over `comm`. Returns the duplicate, with MPI_ERRORS_RETURN set
// on it (errors become return codes, which peerplan turns into MpiError).
// Throws Timeout ("<what>: duplicating the communicator timed out after ...
// <explanation>") when not every rank joined within `timeout`, MpiError
// when MPI fails. An empty `explanation` gives a generic one.
MPI_Comm duplicate_within(MPI_Comm comm, std::chrono::milliseconds timeout, const char* what,
                          const std::string& explanation = {});

// Whether a duplication of `parent` that was given up is still in progress.
// Such a parent must never be freed: Open MPI crashes when the duplication
// goes on after its parent was freed (seen with Open MPI 4.1).
bool duplication_in_progress_on(MPI_Comm parent) noexcept;

// Duplications abandoned by a Timeout whose request MPI has not completed
// (kept until exit). For tests and diagnostics.
std::size_t abandoned_duplications() noexcept;

}  // namespace peerplan::bootstrap
