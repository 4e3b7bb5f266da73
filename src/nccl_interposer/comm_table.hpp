// SPDX-License-Identifier: Apache-2.0
// The side table: each NCCL communicator the application made through an
// interposed init, with its peerplan communicator (or why it has none) and
// the counts of where its calls went. The application keeps its real
// ncclComm_t; nothing of NCCL's is wrapped.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/nccl_bootstrap.hpp"
#include "nccl_interposer/dispatch_rules.hpp"
#include "nccl_interposer/shared_counters.hpp"
#include "peerplan/communicator.hpp"
#include "peerplan/layout.hpp"

namespace peerplan::nccl_interposer {

struct CommState {
  // Why peerplan does not serve this communicator, when it does not.
  std::string reason;
  // Every declared size, and those of them whose plans run peer to peer
  // (both in the order declared_from_environment sorts them, as decide()
  // wants them): a declared size peerplan routes to its fallback is NCCL's,
  // counted as peerplan_route.
  std::vector<DeclaredBuffer> declared;
  std::vector<DeclaredBuffer> p2p_declared;
  // p2p_declared[i]'s layout, made once: building a TensorLayout on every
  // call would cost more than the rest of the dispatch.
  std::vector<TensorLayout> p2p_layouts;
  // The declared sizes peerplan routes to its fallback, each with
  // peerplan's reason, for the summary; empty when there are none.
  std::string routed_to_fallback;
  // The declared sizes peerplan cannot declare (NotDeclarable), left out of
  // `declared` and sorted alike: their calls are NCCL's, counted as
  // not_declarable rather than undeclared_count.
  std::vector<DeclaredBuffer> not_declarable;
  int rank = 0;
  // NCCL made the communicator non-blocking: peerplan's bootstrap cannot
  // wait on it, and a split of it with no config is non-blocking too.
  bool non_blocking = false;
  // Set when a peerplan call timed out (break_after_timeout): every later
  // operation on the communicator is refused with ncclRemoteError, and
  // ncclCommGetAsyncError reports ncclRemoteError.
  std::atomic<bool> broken{false};
  std::atomic<int> async_error{0};      // an ncclResult_t; 0 = ncclSuccess
  std::atomic<bool> summarized{false};  // the summary was logged
  // Set by ncclCommAbort (perhaps on another thread) before NCCL's abort:
  // calls that found this state before it left the table go to NCCL.
  std::atomic<bool> aborted{false};
  // Set when an exchange of peerplan's bootstrap over this communicator
  // failed or timed out (at create or close): NCCL may hold an all-gather
  // of it that no rank will match, which NCCL's finalize and destroy would
  // wait for forever, so they abort it instead (abort_instead.hpp).
  std::atomic<bool> out_of_step{false};
  // Set as the interposer aborts NCCL's communicator in place of a finalize
  // or destroy: the handle is freed, and nothing of it may reach NCCL again.
  std::atomic<bool> nccl_freed{false};

  // Null when peerplan does not serve this communicator (`reason` says
  // why). A call holds its own reference, so an abort or destroy on another
  // thread frees the communicator only once that call has returned.
  std::shared_ptr<Communicator> communicator() const {
    // Without the lock when there is none (one rank, nothing declared):
    // every call of such a communicator asks.
    if (!has_communicator()) return nullptr;
    const std::lock_guard lock(peerplan_mutex);
    return peerplan;
  }
  // Whether communicator() would return one now, without its lock or a
  // reference.
  bool has_communicator() const { return has_peerplan.load(std::memory_order_acquire); }
  void set_communicator(std::shared_ptr<Communicator> made) {
    const std::lock_guard lock(peerplan_mutex);
    peerplan = std::move(made);
    has_peerplan.store(peerplan != nullptr, std::memory_order_release);
  }
  std::shared_ptr<Communicator> release_communicator() {
    const std::lock_guard lock(peerplan_mutex);
    has_peerplan.store(false, std::memory_order_release);
    return std::exchange(peerplan, nullptr);
  }

  // Marks the communicator broken by the timeout `what` (the first one's
  // text is kept, for the refusals' ncclGetLastError).
  void break_after_timeout(const std::string& what) {
    {
      const std::lock_guard lock(broken_mutex);
      if (broken_by_.empty()) broken_by_ = what;
    }
    async_error = static_cast<int>(ncclRemoteError);
    broken = true;
  }
  std::string broken_by() const {
    const std::lock_guard lock(broken_mutex);
    return broken_by_;
  }

  void hit(std::size_t bytes) { counters.hit(bytes); }
  void fallback(std::size_t bytes, FallbackCause cause) { counters.fallback(bytes, cause); }
  // The counters' summary, then the declared sizes peerplan routes to its
  // fallback, with its reasons, and those it cannot declare.
  std::string summary() const {
    // Appended piece by piece: " " + ... makes GCC 12 warn falsely (-Wrestrict).
    std::string text = counters.summary();
    if (!routed_to_fallback.empty()) {
      text += "\n  declared, but peerplan routes them to its fallback:";
      text += routed_to_fallback;
    }
    if (!not_declarable.empty()) {
      text += "\n  declared, but peerplan cannot declare them (not_declarable):";
      for (const DeclaredBuffer& buffer : not_declarable) {
        text += ' ';
        text += plan_name(buffer);
      }
    }
    return text;
  }

 private:
  mutable std::mutex broken_mutex;
  std::string broken_by_;
  mutable std::mutex peerplan_mutex;
  std::shared_ptr<Communicator> peerplan;
  std::atomic<bool> has_peerplan{false};  // peerplan != nullptr
  SharedDispatchCounters counters;        // calls may come from several threads
};

// Null for a communicator the interposer did not see made.
std::shared_ptr<CommState> find_comm(ncclComm_t comm);

// After the real init of `comm` (not inside a group): peerplan over it,
// declared from the environment. Never throws: a failure is a WARN, and the
// communicator's calls all go to NCCL. `why_not`: a reason peerplan must
// not be made (a non-blocking communicator, one process for many ranks),
// or empty. `non_blocking`: NCCL made `comm` non-blocking (give a reason
// too); nothing is asked of it, as it may still be initialising.
void attach_peerplan(ncclComm_t comm, const std::string& why_not = {}, bool non_blocking = false);

// How attach_peerplan makes the bootstrap over `comm`: make_nccl_bootstrap,
// unless a test put a stand-in in its place (an empty function puts
// make_nccl_bootstrap back), so that the roll call can be driven without a
// GPU.
using BootstrapMaker = std::function<std::unique_ptr<bootstrap::Bootstrap>(
    ncclComm_t, const bootstrap::NcclFunctions&, std::chrono::milliseconds)>;
void set_bootstrap_maker(BootstrapMaker maker);

// How attach_peerplan makes peerplan's communicator over that bootstrap:
// communicator::create_over_bootstrap, unless a test put a stand-in in its
// place (an empty function puts it back), so that close can be driven
// without a GPU.
using CommunicatorMaker =
    std::function<std::unique_ptr<Communicator>(std::unique_ptr<bootstrap::Bootstrap>, Config)>;
void set_communicator_maker(CommunicatorMaker maker);

// Records `peerplan` as the communicator of `comm`, which has declared
// `declared` (sorted as declared_from_environment sorts), and asks it which
// of them it routes peer to peer (the others go to NCCL): how a test puts a
// communicator of its own in the table.
void install_peerplan(ncclComm_t comm, std::unique_ptr<Communicator> peerplan,
                      std::vector<DeclaredBuffer> declared, int rank);

// Sorts `declared` (which `peerplan` has declared) into the sizes it routes
// peer to peer (`state.p2p_declared`) and the others, with peerplan's
// reasons (`state.routed_to_fallback`).
void learn_routes(const Communicator& peerplan, std::vector<DeclaredBuffer> declared,
                  CommState& state);

// Before the real finalize/destroy of `comm`: closes its peerplan
// communicator (collective when `collective`, else a local release) and
// logs the summary at INFO. `forget` drops the table entry as well.
// Returns the state (null for a communicator not in the table), which says
// whether the real call may run (abort_instead.hpp).
std::shared_ptr<CommState> detach_peerplan(ncclComm_t comm, bool collective, bool forget);

// Takes the entry out of the table (for abort: the caller aborts NCCL
// first, then lets the state go without any collective step).
std::shared_ptr<CommState> take_comm(ncclComm_t comm);

}  // namespace peerplan::nccl_interposer
