// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/mpi_bootstrap.hpp"

#include "bootstrap/bounded_dup.hpp"

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/launch_check.hpp"
#include "bootstrap/mpi_check.hpp"
#include "bootstrap/nodes.hpp"
#include "bootstrap/pending_duplication.hpp"
#include "bootstrap/timed_exchange.hpp"
#include "core/fault_injection.hpp"
#include "core/log.hpp"
#include "peerplan/config.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::bootstrap {
namespace {

using detail::check_mpi;
using detail::TimedExchange;

// What is bounded how. The construction makes exactly one collective call on
// the user's communicator, MPI_Comm_idup, and bounds it by polling with a
// deadline. Everything after it is point-to-point on the private duplicate
// with a deadline (TimedExchange): nothing after the duplication is an
// unbounded MPI collective, so no rank can hang, whatever the others did.
//
// Why not MPI_Comm_split_type(SHARED) for the node-local ranks, even after a
// bounded roll call on the duplicate: a bounded exchange can complete on one
// rank and time out on another (a rank that got every message may still
// have been too late for a peer whose deadline had passed), and the rank
// that completed would then enter split_type without that peer and block
// forever. The same holds for a late rank whose MPI_Comm_idup matched
// duplications the others had abandoned: its duplication completes, but the
// others are gone. So nodes are found by an allgather of node keys (the
// first exchange on the duplicate, which is also the roll call: a rank that
// is not there is named), and node-local exchanges are point-to-point among
// the node's ranks on the same duplicate, in a tag lane of their own so
// that the two sequences of tags never meet.
constexpr TimedExchange::Lane kWorldLane{0, 2};
constexpr TimedExchange::Lane kNodeLane{1, 2};

// The one collective on the user's communicator, bounded. Which rank is
// missing cannot be known here: a collective says nothing about who has
// joined it, and peerplan never sends point-to-point messages on the user's
// communicator (the application's wildcard receives could take them). A
// duplication that times out stays in progress, and the next create on this
// communicator waits on it again (pending_duplication.hpp says why).
MPI_Comm duplicate_user_comm(MPI_Comm user_comm, std::chrono::milliseconds timeout) {
  int rank = 0;
  int size = 0;
  check_mpi(MPI_Comm_rank(user_comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(user_comm, &size), "MPI_Comm_size");
  detail::UserCommDuplications& record = detail::duplications_of(user_comm);
  if (record.pending && record.pending->completed()) {
    // It completed while this rank was elsewhere: the rank that completed it
    // may have come, timed out and gone, leaving its roll-call message here,
    // which would pass for a present rank. Start the next attempt instead
    // (every rank that gave up on this one does, so they stay in step).
    log::info(log::Subsystem::bootstrap,
              "bootstrap: rank " + std::to_string(rank) + ": attempt #" +
                  std::to_string(record.started) +
                  " completed while this rank was not in create; starting the next one");
    (void)record.pending->take();  // never freed: late messages may still arrive on it
    record.pending.reset();
  }
  const bool again = record.pending.has_value();
  if (!again) {
    record.pending.emplace(user_comm, "bootstrap (the first step of create)");
    ++record.started;
  }
  const std::string attempt = "attempt #" + std::to_string(record.started);
  log::info(
      log::Subsystem::bootstrap,
      "bootstrap: rank " + std::to_string(rank) + " of " + std::to_string(size) +
          (again ? " is waiting again for its duplication of the communicator (" + attempt +
                       ", which an earlier create on this communicator started and gave up "
                       "on; the first step of create"
                 : " is duplicating the communicator (" + attempt + "; the first step of create") +
          "; waits at most " + std::to_string(timeout.count()) +
          " ms for every rank to get there)");
  const auto start = std::chrono::steady_clock::now();
  if (!record.pending->wait_until(start + timeout)) {
    throw Timeout(
        "bootstrap (the first step of create): duplicating the communicator timed out after " +
        std::to_string(timeout.count()) + " ms: not every one of the " + std::to_string(size) +
        " ranks joined (seen on rank " + std::to_string(rank) +
        "). peerplan cannot tell which rank is missing here: a collective on your "
        "communicator does not say who has joined it, and peerplan never sends "
        "point-to-point messages on your communicator (your wildcard receives could take "
        "them). A rank did not call create(), crashed, or called it after this rank's "
        "timeout; with PEERPLAN_DEBUG=INFO every rank logs 'rank R of N is duplicating the "
        "communicator' when it gets there, so the rank without that line is the one "
        "missing. Raise PEERPLAN_TIMEOUT_MS if ranks are merely slow to get there. To "
        "recover, create() again on every rank (after close() of a communicator you had): "
        "the next create() on this communicator waits for this duplication again, so a rank "
        "that fell behind meets the others there");
  }
  const MPI_Comm dup = record.pending->take();
  record.pending.reset();
  log::info(log::Subsystem::bootstrap,
            "bootstrap: rank " + std::to_string(rank) + " duplicated the communicator in " +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count()) +
                " ms");
  return dup;
}

std::vector<int> all_ranks(MPI_Comm comm) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  std::vector<int> ranks(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) ranks[r] = r;
  return ranks;
}

class MpiBootstrap final : public Bootstrap {
 public:
  MpiBootstrap(MPI_Comm user_comm, std::chrono::milliseconds timeout) {
    try {
      comm_ = duplicate_user_comm(user_comm, timeout);
      world_.emplace(comm_, timeout, all_ranks(comm_), kWorldLane);
      PEERPLAN_FAULT_POINT("bootstrap.duplicated", world_->rank());
      find_nodes(timeout);
    } catch (...) {
      release_communicator();
      throw;
    }
  }

  // Local: MPI_Comm_free does not wait for the other ranks (a test destroys
  // one rank's bootstrap while the others keep theirs).
  ~MpiBootstrap() override { release_communicator(); }

  MpiBootstrap(const MpiBootstrap&) = delete;
  MpiBootstrap& operator=(const MpiBootstrap&) = delete;

  MPI_Comm communicator() const noexcept { return comm_; }

  int rank() const noexcept override { return world_->rank(); }
  int size() const noexcept override { return world_->size(); }
  int local_rank() const noexcept override { return local_->rank(); }
  int local_size() const noexcept override { return local_->size(); }
  int node_id() const noexcept override { return node_id_; }
  int num_nodes() const noexcept override { return num_nodes_; }

  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    return exchange([&] { return world_->allgather(mine, "allgather"); });
  }
  std::vector<Blob> local_allgather(std::span<const std::byte> mine) override {
    return exchange([&] { return local_->allgather(mine, "local_allgather"); });
  }
  Blob broadcast(std::span<const std::byte> blob, int root) override {
    return exchange([&] { return world_->broadcast(blob, root, "broadcast"); });
  }
  void barrier() override {
    exchange([&] { return world_->allgather({}, "barrier"); });
  }
  bool agree(bool ok) override {
    const std::byte mine{static_cast<unsigned char>(ok ? 1 : 0)};
    const std::vector<Blob> all = exchange([&] { return world_->allgather({&mine, 1}, "agree"); });
    for (const Blob& blob : all) {
      if (blob.size() != 1 || blob[0] != std::byte{1}) return false;
    }
    return true;
  }

 private:
  // Runs one exchange on the duplicate; one that fails (a Timeout, above
  // all) leaves the ranks out of step, and peers may still send this rank
  // messages of calls it will never make (see release_communicator).
  template <class Exchange>
  auto exchange(Exchange&& run) -> decltype(run()) {
    try {
      return run();
    } catch (...) {
      out_of_step_ = true;
      throw;
    }
  }

  // The first exchange on the duplicate: every rank's node key. It is also
  // the roll call: a rank that is not on the duplicate (it gave up on the
  // duplication, or stalled right after it) is named in the Timeout.
  void find_nodes(std::chrono::milliseconds timeout) {
    const std::string key = detail::node_key();
    std::vector<Blob> all;
    try {
      all = exchange([&] {
        return world_->allgather(std::as_bytes(std::span(key.data(), key.size())),
                                 "roll call after duplicating the communicator");
      });
    } catch (const Timeout& e) {
      throw Timeout(std::string(e.what()) +
                    ". The ranks named did not reach the step right after the duplication: they "
                    "gave up on create() before this rank got there (then they time out too, "
                    "and a new create() on every rank works), or stopped right after it");
    }
    std::vector<std::string> keys;
    keys.reserve(all.size());
    for (const Blob& blob : all) {
      keys.emplace_back(reinterpret_cast<const char*>(blob.data()), blob.size());
    }
    const detail::NodePlacement placement = detail::place_on_nodes(keys, world_->rank());
    node_id_ = placement.node_id;
    num_nodes_ = placement.num_nodes;
    local_.emplace(comm_, timeout, placement.members, kNodeLane);
    log::info(log::Subsystem::bootstrap, "bootstrap: rank " + std::to_string(world_->rank()) +
                                             " is local rank " +
                                             std::to_string(placement.local_rank) + " of " +
                                             std::to_string(placement.members.size()) +
                                             " on node " + std::to_string(node_id_) + " of " +
                                             std::to_string(num_nodes_) + " (" + key + ")");
  }

  // Frees the duplicate, unless an exchange on it failed: then it is kept
  // until exit on purpose. A peer that was late (or resumed after a stop)
  // may still send this rank messages of calls it will never make. On a
  // kept communicator they wait, unread, in its queue; had it been freed,
  // MPI (Open MPI, at least) would hand them to the next communicator that
  // reuses its context id (a later bootstrap, or the application's own), whose
  // exchanges would take them for their own. Healthy bootstraps, the normal
  // case, are freed.
  void release_communicator() noexcept {
    if (comm_ == MPI_COMM_NULL) return;
    // Nor while a duplication of it that create gave up on (the fallback's
    // communicator, made from this one) is in progress (bounded_dup.hpp).
    if (out_of_step_ || duplication_in_progress_on(comm_)) {
      comm_ = MPI_COMM_NULL;  // deliberately not freed (see above)
      return;
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // MPI already released it; freeing now is erroneous
    MPI_Comm_free(&comm_);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool out_of_step_ = false;            // an exchange failed: the duplicate is never freed
  std::optional<TimedExchange> world_;  // every rank, tag lane kWorldLane
  std::optional<TimedExchange> local_;  // this node's ranks, tag lane kNodeLane
  int node_id_ = 0;
  int num_nodes_ = 1;
};

}  // namespace

std::unique_ptr<Bootstrap> make_mpi_bootstrap(MPI_Comm user_comm,
                                              std::chrono::milliseconds timeout) {
  detail::require_mpi_running("peerplan bootstrap");
  if (user_comm == MPI_COMM_NULL) {
    throw InvalidArgument(
        "bootstrap: the communicator is MPI_COMM_NULL; pass the MPI_Comm of "
        "the ranks that share the communicator (e.g. MPI_COMM_WORLD)");
  }
  if (timeout.count() <= 0 || timeout > kMaxTimeout) {
    throw InvalidArgument("bootstrap: the timeout must be 1 to " +
                          std::to_string(kMaxTimeout.count()) + " ms, got " +
                          std::to_string(timeout.count()) + " ms (PEERPLAN_TIMEOUT_MS)");
  }
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(user_comm, &inter), "MPI_Comm_test_inter");
  if (inter) {
    throw InvalidArgument(
        "bootstrap: intercommunicators are not supported; pass an "
        "intracommunicator (MPI_Intercomm_merge makes one)");
  }
  // Only MPI_COMM_WORLD's size is read here (no traffic on it): a singleton
  // world inside a multi-process launch means a broken launch, whatever
  // communicator the caller passes.
  int world_size = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "MPI_Comm_size(MPI_COMM_WORLD)");
  check_launch(world_size);
  return std::make_unique<MpiBootstrap>(user_comm, timeout);
}

MPI_Comm private_communicator(const Bootstrap& bootstrap) noexcept {
  const auto* mpi = dynamic_cast<const MpiBootstrap*>(&bootstrap);
  return mpi != nullptr ? mpi->communicator() : MPI_COMM_NULL;
}

}  // namespace peerplan::bootstrap
