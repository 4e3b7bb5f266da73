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

MPI_Comm duplicate_within(MPI_Comm comm, std::chrono::milliseconds timeout, const char* what,
                          const std::string& explanation) {
  auto* handle = new MPI_Comm(MPI_COMM_NULL);
  MPI_Request request = MPI_REQUEST_NULL;
  detail::count_collective();
  const int posted = MPI_Comm_idup(comm, handle, &request);
  if (posted != MPI_SUCCESS) {
    delete handle;
    detail::check_mpi(posted, "MPI_Comm_idup", what);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    const int tested = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (tested != MPI_SUCCESS) {
      // The request's state is unknown: keep it, and the handle, like a
      // timed-out one.
      const std::lock_guard lock(keeper_mutex());
      keeper().push_back({request, handle});
      detail::check_mpi(tested, "MPI_Test(MPI_Comm_idup)", what);
    }
    if (done) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      {
        const std::lock_guard lock(keeper_mutex());
        keeper().push_back({request, handle});
      }
      throw Timeout(std::string(what) + ": duplicating the communicator timed out after " +
                    std::to_string(timeout.count()) + " ms: " +
                    (explanation.empty()
                         ? "not every rank of the communicator joined (a rank did not make the "
                           "same collective call, or crashed; raise PEERPLAN_TIMEOUT_MS if ranks "
                           "are merely slow). The abandoned duplication is kept until the process "
                           "exits, since MPI may still complete it"
                         : explanation));
    }
    if (polls >= 32) std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  MPI_Comm dup = *handle;
  delete handle;
  const int set = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  if (set != MPI_SUCCESS) {
    MPI_Comm_free(&dup);
    detail::check_mpi(set, "MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)", what);
  }
  return dup;
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
