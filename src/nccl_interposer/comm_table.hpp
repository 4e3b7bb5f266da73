// SPDX-License-Identifier: Apache-2.0
// The side table: each NCCL communicator the application made through an
// interposed init, with its peerplan communicator (or why it has none) and
// the counts of where its calls went. The application keeps its real
// ncclComm_t; nothing of NCCL's is wrapped.
#pragma once

#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nccl_interposer/dispatch_rules.hpp"
#include "peerplan/communicator.hpp"

namespace peerplan::nccl_interposer {

struct CommState {
  // Null when peerplan does not serve this communicator; `reason` says why.
  std::unique_ptr<Communicator> peerplan;
  std::string reason;
  // The declared sizes whose plans run peer to peer (in the order
  // declared_from_environment sorts them, as decide() wants them): a declared size peerplan routes to its fallback is NCCL's
  // like an undeclared one.
  std::vector<DeclaredBuffer> p2p_declared;
  int rank = 0;
  // Set when a peerplan call timed out: later calls go to NCCL, and
  // ncclCommGetAsyncError reports ncclRemoteError.
  std::atomic<bool> broken{false};
  std::atomic<int> async_error{0};      // an ncclResult_t; 0 = ncclSuccess
  std::atomic<bool> summarized{false};  // the summary was logged

  void hit(std::size_t bytes) {
    const std::lock_guard lock(counters_mutex);
    counters.hit(bytes);
  }
  void fallback(std::size_t bytes, FallbackCause cause) {
    const std::lock_guard lock(counters_mutex);
    counters.fallback(bytes, cause);
  }
  std::string summary() const {
    const std::lock_guard lock(counters_mutex);
    return counters.summary();
  }

 private:
  mutable std::mutex counters_mutex;  // stats may come from several threads
  DispatchCounters counters;
};

// Null for a communicator the interposer did not see made.
std::shared_ptr<CommState> find_comm(ncclComm_t comm);

// After the real init of `comm` (not inside a group): peerplan over it,
// declared from the environment. Never throws: a failure is a WARN, and the
// communicator's calls all go to NCCL. `why_not`: a reason peerplan must
// not be made (a non-blocking communicator, one process for many ranks),
// or empty.
void attach_peerplan(ncclComm_t comm, const std::string& why_not = {});

// Records `peerplan` as the communicator of `comm`, running the sizes
// `p2p_declared` peer to peer (sorted as declared_from_environment sorts):
// attach_peerplan's last step, and how a test puts a communicator of its
// own in the table.
void install_peerplan(ncclComm_t comm, std::unique_ptr<Communicator> peerplan,
                      std::vector<DeclaredBuffer> p2p_declared, int rank);

// Before the real finalize/destroy of `comm`: closes its peerplan
// communicator (collective when `collective`, else a local release) and
// logs the summary at INFO. `forget` drops the table entry as well.
void detach_peerplan(ncclComm_t comm, bool collective, bool forget);

// Takes the entry out of the table (for abort: the caller aborts NCCL
// first, then lets the state go without any collective step).
std::shared_ptr<CommState> take_comm(ncclComm_t comm);

}  // namespace peerplan::nccl_interposer
