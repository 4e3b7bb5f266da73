#include "bootstrap/mpi_bootstrap.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/launch_check.hpp"
#include "bootstrap/mpi_check.hpp"
#include "bootstrap/timed_exchange.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::bootstrap {
namespace {

using detail::check_mpi;
using detail::TimedExchange;

// MPI_Comm_dup cannot be bounded; MPI_Comm_idup can. If some rank never
// calls create() the request is abandoned (a nonblocking collective can be
// neither cancelled nor freed) and we report which communicator stalled.
MPI_Comm duplicate_within(MPI_Comm user_comm, std::chrono::milliseconds timeout) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Comm_idup(user_comm, &dup, &request), "MPI_Comm_idup");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test(MPI_Comm_idup)");
    if (done) return dup;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Timeout("bootstrap: duplicating the communicator timed out after " +
                    std::to_string(timeout.count()) +
                    " ms: not every rank of the communicator joined (a rank did not make the "
                    "same collective call, or crashed; raise PEERPLAN_TIMEOUT_MS if ranks are "
                    "merely slow to start)");
    }
    if (polls >= 32) std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
}

class MpiBootstrap final : public Bootstrap {
 public:
  MpiBootstrap(MPI_Comm user_comm, std::chrono::milliseconds timeout) {
    try {
      comm_ = duplicate_within(user_comm, timeout);
      check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      world_.emplace(comm_, timeout);
      // Key = rank: local rank 0 is the node's lowest rank.
      check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, world_->rank(), MPI_INFO_NULL,
                                    &local_comm_),
                "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
      check_mpi(MPI_Comm_set_errhandler(local_comm_, MPI_ERRORS_RETURN),
                "MPI_Comm_set_errhandler");
      std::vector<int> ranks_of_local = ranks_in_comm_of(local_comm_);
      local_.emplace(local_comm_, timeout, ranks_of_local);
      number_nodes(ranks_of_local.front());
    } catch (...) {
      free_communicators();
      throw;
    }
  }

  ~MpiBootstrap() override { free_communicators(); }

  MpiBootstrap(const MpiBootstrap&) = delete;
  MpiBootstrap& operator=(const MpiBootstrap&) = delete;

  int rank() const noexcept override { return world_->rank(); }
  int size() const noexcept override { return world_->size(); }
  int local_rank() const noexcept override { return local_->rank(); }
  int local_size() const noexcept override { return local_->size(); }
  int node_id() const noexcept override { return node_id_; }
  int num_nodes() const noexcept override { return num_nodes_; }

  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    return world_->allgather(mine, "allgather");
  }
  std::vector<Blob> local_allgather(std::span<const std::byte> mine) override {
    return local_->allgather(mine, "local_allgather");
  }
  Blob broadcast(std::span<const std::byte> blob, int root) override {
    return world_->broadcast(blob, root, "broadcast");
  }
  void barrier() override { world_->allgather({}, "barrier"); }
  bool agree(bool ok) override {
    const std::byte mine{static_cast<unsigned char>(ok ? 1 : 0)};
    for (const Blob& blob : world_->allgather({&mine, 1}, "agree")) {
      if (blob.size() != 1 || blob[0] != std::byte{1}) return false;
    }
    return true;
  }

 private:
  // rank in comm_ of each rank of `sub` (a communicator derived from comm_).
  std::vector<int> ranks_in_comm_of(MPI_Comm sub) {
    MPI_Group sub_group = MPI_GROUP_NULL;
    MPI_Group group = MPI_GROUP_NULL;
    check_mpi(MPI_Comm_group(sub, &sub_group), "MPI_Comm_group");
    check_mpi(MPI_Comm_group(comm_, &group), "MPI_Comm_group");
    int sub_size = 0;
    MPI_Group_size(sub_group, &sub_size);
    std::vector<int> sub_ranks(sub_size);
    for (int i = 0; i < sub_size; ++i) sub_ranks[i] = i;
    std::vector<int> ranks(sub_size);
    const int rc = MPI_Group_translate_ranks(sub_group, sub_size, sub_ranks.data(), group,
                                             ranks.data());
    MPI_Group_free(&sub_group);
    MPI_Group_free(&group);
    check_mpi(rc, "MPI_Group_translate_ranks");
    return ranks;
  }

  // Node ids in the order of each node's lowest rank, the same on every rank.
  void number_nodes(int my_leader) {
    Blob mine(sizeof(int));
    std::memcpy(mine.data(), &my_leader, sizeof(int));
    const std::vector<Blob> all = world_->allgather(mine, "node numbering");
    std::vector<int> leaders;
    for (const Blob& blob : all) {
      int leader = 0;
      std::memcpy(&leader, blob.data(), sizeof(int));
      leaders.push_back(leader);
    }
    const int on_my_node = static_cast<int>(std::count(leaders.begin(), leaders.end(), my_leader));
    std::sort(leaders.begin(), leaders.end());
    leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
    num_nodes_ = static_cast<int>(leaders.size());
    node_id_ = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), my_leader) -
                                leaders.begin());
    if (on_my_node != local_->size()) {
      throw InternalError("bootstrap: " + std::to_string(on_my_node) +
                          " ranks name rank " + std::to_string(my_leader) +
                          " as their node's first rank, but the node-local communicator has " +
                          std::to_string(local_->size()) + "; please report this");
    }
  }

  void free_communicators() noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // MPI already released them; freeing now is erroneous
    if (local_comm_ != MPI_COMM_NULL) MPI_Comm_free(&local_comm_);
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm local_comm_ = MPI_COMM_NULL;
  std::optional<TimedExchange> world_;
  std::optional<TimedExchange> local_;
  int node_id_ = 0;
  int num_nodes_ = 1;
};

}  // namespace

std::unique_ptr<Bootstrap> make_mpi_bootstrap(MPI_Comm user_comm,
                                              std::chrono::milliseconds timeout) {
  detail::require_mpi_running("peerplan bootstrap");
  if (user_comm == MPI_COMM_NULL) {
    throw InvalidArgument("bootstrap: the communicator is MPI_COMM_NULL; pass the MPI_Comm of "
                          "the ranks that share the communicator (e.g. MPI_COMM_WORLD)");
  }
  if (timeout.count() <= 0) {
    throw InvalidArgument("bootstrap: the timeout must be positive, got " +
                          std::to_string(timeout.count()) + " ms (PEERPLAN_TIMEOUT_MS)");
  }
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(user_comm, &inter), "MPI_Comm_test_inter");
  if (inter) {
    throw InvalidArgument("bootstrap: intercommunicators are not supported; pass an "
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

}  // namespace peerplan::bootstrap
