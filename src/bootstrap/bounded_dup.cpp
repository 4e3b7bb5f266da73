// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/bounded_dup.hpp"

#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/collective_count.hpp"
#include "bootstrap/mpi_check.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::bootstrap {
namespace {

// A duplication MPI may still complete: it writes *handle then.
struct Abandoned {
  MPI_Request request;
  MPI_Comm* handle;
  MPI_Comm parent;  // what it duplicates: never freed while it is in progress
};

std::mutex& keeper_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Deliberately never freed (allocated once, never deleted, so no static
// destructor runs after MPI_Finalize either): the handles' storage must
// outlive the requests, which may complete at any time until MPI_Finalize.
// A nonblocking collective's request may not be freed (MPI_Request_free is
// erroneous for it), so the requests are kept too.
std::vector<Abandoned>& keeper() {
  static auto* kept = new std::vector<Abandoned>();
  return *kept;
}

}  // namespace

Duplication::Duplication(MPI_Comm comm, const char* what)
    : handle_(new MPI_Comm(MPI_COMM_NULL)), parent_(comm), what_(what) {
  detail::count_collective();
  const int posted = MPI_Comm_idup(comm, handle_, &request_);
  if (posted != MPI_SUCCESS) {
    delete handle_;
    handle_ = nullptr;
    request_ = MPI_REQUEST_NULL;
    detail::check_mpi(posted, "MPI_Comm_idup", what);
  }
}

Duplication::~Duplication() {
  if (handle_ == nullptr) return;
  if (request_ != MPI_REQUEST_NULL) {
    // MPI may still complete it and write *handle_: keep both.
    const std::lock_guard lock(keeper_mutex());
    keeper().push_back({request_, handle_, parent_});
    return;
  }
  // Completed but never taken (an error came between): free the duplicate.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && *handle_ != MPI_COMM_NULL) MPI_Comm_free(handle_);
  delete handle_;
}

bool Duplication::wait_until(std::chrono::steady_clock::time_point deadline) {
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    // On failure the request's state is unknown: it stays, and the
    // destructor keeps it like one still in progress.
    detail::check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test(MPI_Comm_idup)",
                      what_);
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (polls >= 32) std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
}

MPI_Comm Duplication::take() {
  if (handle_ == nullptr || request_ != MPI_REQUEST_NULL) {
    throw InternalError(std::string(what_) +
                        ": a duplication was taken before it completed; please report this");
  }
  MPI_Comm dup = *handle_;
  delete handle_;
  handle_ = nullptr;
  const int set = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  if (set != MPI_SUCCESS) {
    MPI_Comm_free(&dup);
    detail::check_mpi(set, "MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)", what_);
  }
  return dup;
}

MPI_Comm duplicate_within(MPI_Comm comm, std::chrono::milliseconds timeout, const char* what,
                          const std::string& explanation) {
  Duplication duplication(comm, what);
  if (!duplication.wait_until(std::chrono::steady_clock::now() + timeout)) {
    // The destructor keeps the request and its handle until exit.
    throw Timeout(std::string(what) + ": duplicating the communicator timed out after " +
                  std::to_string(timeout.count()) + " ms: " +
                  (explanation.empty()
                       ? "not every rank of the communicator joined (a rank did not make the "
                         "same collective call, or crashed; raise PEERPLAN_TIMEOUT_MS if ranks "
                         "are merely slow). The abandoned duplication is kept until the process "
                         "exits, since MPI may still complete it"
                       : explanation));
  }
  return duplication.take();
}

bool duplication_in_progress_on(MPI_Comm parent) noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return false;
  const std::lock_guard lock(keeper_mutex());
  for (Abandoned& a : keeper()) {
    if (a.parent != parent || a.request == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_Test(&a.request, &done, MPI_STATUS_IGNORE);
    if (a.request != MPI_REQUEST_NULL) return true;
  }
  return false;
}

std::size_t abandoned_duplications() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  const std::lock_guard lock(keeper_mutex());
  if (finalized) return keeper().size();
  std::size_t pending = 0;
  for (Abandoned& a : keeper()) {
    int done = 0;
    if (a.request != MPI_REQUEST_NULL) MPI_Test(&a.request, &done, MPI_STATUS_IGNORE);
    if (a.request != MPI_REQUEST_NULL) ++pending;
  }
  return pending;
}

}  // namespace peerplan::bootstrap
