// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/nccl_bootstrap.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/nodes.hpp"
#include "core/log.hpp"
#include "peerplan/config.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

// Room per rank the buffers start with: a rank card and the IPC handles
// of a few slabs fit, so most communicators never grow them (growing
// frees the old buffers, and cudaFree waits for the whole device).
constexpr std::size_t kInitialBytesPerRank = 64 * 1024;

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw CudaError(std::string("bootstrap over NCCL: ") + what + " failed: " +
                    cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

// The calling thread's device is `device` for the guard's lifetime.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

class NcclBootstrap final : public Bootstrap {
 public:
  NcclBootstrap(ncclComm_t comm, const NcclFunctions& nccl, std::chrono::milliseconds timeout)
      : comm_(comm), nccl_(nccl), timeout_(timeout) {
    if (!nccl_.all_gather || !nccl_.get_async_error || !nccl_.user_rank || !nccl_.count ||
        !nccl_.cu_device || !nccl_.error_string) {
      throw InvalidArgument("bootstrap over NCCL: a real NCCL function was not resolved");
    }
    if (timeout_.count() <= 0 || timeout_ > kMaxTimeout) {
      throw InvalidArgument("bootstrap over NCCL: the timeout must be 1 to " +
                            std::to_string(kMaxTimeout.count()) + " ms, got " +
                            std::to_string(timeout_.count()) + " ms");
    }
    check_nccl(nccl_.user_rank(comm_, &rank_), "ncclCommUserRank");
    check_nccl(nccl_.count(comm_, &size_), "ncclCommCount");
    check_nccl(nccl_.cu_device(comm_, &device_), "ncclCommCuDevice");
    const DeviceGuard on_device(device_);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    try {
      find_nodes();
    } catch (...) {
      release();
      throw;
    }
  }

  ~NcclBootstrap() override { release(); }

  NcclBootstrap(const NcclBootstrap&) = delete;
  NcclBootstrap& operator=(const NcclBootstrap&) = delete;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int local_rank() const noexcept override { return local_rank_; }
  int local_size() const noexcept override { return static_cast<int>(members_.size()); }
  int node_id() const noexcept override { return node_id_; }
  int num_nodes() const noexcept override { return num_nodes_; }

  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    return gather(mine, "allgather");
  }

  // Through the whole communicator, keeping this node's: a node-local
  // NCCL communicator would need a split, a collective of its own that the
  // application did not ask for.
  std::vector<Blob> local_allgather(std::span<const std::byte> mine) override {
    std::vector<Blob> all = gather(mine, "local_allgather");
    std::vector<Blob> local;
    local.reserve(members_.size());
    for (const int member : members_) local.push_back(std::move(all[member]));
    return local;
  }

  Blob broadcast(std::span<const std::byte> blob, int root) override {
    if (root < 0 || root >= size_) {
      throw InvalidArgument("bootstrap over NCCL: broadcast root " + std::to_string(root) +
                            " is not a rank of the " + std::to_string(size_) + " ranks");
    }
    // The others contribute nothing, so only the root's bytes travel.
    std::vector<Blob> all =
        gather(rank_ == root ? blob : std::span<const std::byte>{}, "broadcast");
    return std::move(all[root]);
  }

  void barrier() override { gather({}, "barrier"); }

  bool agree(bool ok) override {
    const std::byte mine{static_cast<unsigned char>(ok ? 1 : 0)};
    const std::vector<Blob> all = gather({&mine, 1}, "agree");
    return std::all_of(all.begin(), all.end(), [](const Blob& blob) {
      return blob.size() == 1 && blob[0] == std::byte{1};
    });
  }

 private:
  void check_nccl(ncclResult_t status, const char* what) const {
    if (status != ncclSuccess && status != ncclInProgress) {
      throw NcclError(std::string("bootstrap over NCCL: ") + what +
                      " failed: " + nccl_.error_string(status) +
                      ". Set NCCL_DEBUG=WARN for NCCL's own explanation.");
    }
  }

  // Every rank's node key; the first exchange, so also the roll call.
  void find_nodes() {
    const std::string key = detail::node_key();
    const std::vector<Blob> all =
        gather(std::as_bytes(std::span(key.data(), key.size())), "roll call (node keys)");
    std::vector<std::string> keys;
    keys.reserve(all.size());
    for (const Blob& blob : all) {
      keys.emplace_back(reinterpret_cast<const char*>(blob.data()), blob.size());
    }
    const detail::NodePlacement placement = detail::place_on_nodes(keys, rank_);
    node_id_ = placement.node_id;
    num_nodes_ = placement.num_nodes;
    members_ = placement.members;
    local_rank_ = placement.local_rank;
    log::info(log::Subsystem::bootstrap, "bootstrap over NCCL: rank " + std::to_string(rank_) +
                                             " is local rank " + std::to_string(local_rank_) +
                                             " of " + std::to_string(members_.size()) +
                                             " on node " + std::to_string(node_id_) + " of " +
                                             std::to_string(num_nodes_) + " (" + key + ")");
  }

  // Any-size blobs in two allgathers under one deadline: every rank's
  // size, then every blob padded to the largest.
  std::vector<Blob> gather(std::span<const std::byte> mine, const char* what) {
    if (out_of_step_) {
      throw InvalidUsage(std::string("bootstrap over NCCL: ") + what +
                         ": an earlier exchange timed out or failed, so the ranks are out of "
                         "step; this communicator cannot be used by peerplan any more");
    }
    const DeviceGuard on_device(device_);
    const auto deadline = Clock::now() + timeout_;
    try {
      const std::uint64_t my_size = mine.size();
      exchange(std::as_bytes(std::span(&my_size, 1)), sizeof my_size, deadline, what);
      std::vector<std::uint64_t> sizes(static_cast<std::size_t>(size_));
      std::memcpy(sizes.data(), host_recv_, sizes.size() * sizeof(std::uint64_t));
      const std::uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
      std::vector<Blob> all(static_cast<std::size_t>(size_));
      if (largest == 0) return all;
      exchange(mine, static_cast<std::size_t>(largest), deadline, what);
      for (int r = 0; r < size_; ++r) {
        const auto* from = static_cast<const std::byte*>(host_recv_) + r * largest;
        all[r].assign(from, from + sizes[r]);
      }
      return all;
    } catch (...) {
      out_of_step_ = true;
      throw;
    }
  }

  // One allgather of `per_rank` bytes per rank, `mine` zero-padded to it;
  // the result lands in host_recv_.
  void exchange(std::span<const std::byte> mine, std::size_t per_rank, Clock::time_point deadline,
                const char* what) {
    reserve(per_rank);
    std::memset(host_send_, 0, per_rank);
    if (!mine.empty()) std::memcpy(host_send_, mine.data(), mine.size());
    const std::size_t total = per_rank * static_cast<std::size_t>(size_);
    check_cuda(cudaMemcpyAsync(device_send_, host_send_, per_rank, cudaMemcpyHostToDevice, stream_),
               "cudaMemcpyAsync (to the device)");
    check_nccl(nccl_.all_gather(device_send_, device_recv_, per_rank, ncclUint8, comm_, stream_),
               "ncclAllGather");
    check_cuda(cudaMemcpyAsync(host_recv_, device_recv_, total, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (to the host)");
    wait(deadline, what);
  }

  // Polls the stream and the communicator's asynchronous error, never
  // past the deadline (a rank that never calls leaves the allgather
  // running for good).
  void wait(Clock::time_point deadline, const char* what) {
    for (int polls = 0;; ++polls) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) check_cuda(status, what);
      ncclResult_t async = ncclSuccess;
      check_nccl(nccl_.get_async_error(comm_, &async), "ncclCommGetAsyncError");
      check_nccl(async, what);
      if (Clock::now() >= deadline) {
        throw Timeout("bootstrap over NCCL: " + std::string(what) + " on rank " +
                      std::to_string(rank_) + " of " + std::to_string(size_) +
                      " did not complete within " + std::to_string(timeout_.count()) +
                      " ms (PEERPLAN_TIMEOUT_MS): some rank did not make the same call (NCCL "
                      "cannot say which). peerplan stops using this communicator");
      }
      if (polls < 100) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(polls < 1000 ? 20 : 200));
      }
    }
  }

  // Buffers of at least `per_rank` bytes per rank.
  void reserve(std::size_t per_rank) {
    if (per_rank <= capacity_) return;
    std::size_t capacity = std::max(capacity_, kInitialBytesPerRank);
    while (capacity < per_rank) capacity *= 2;
    free_buffers();
    const std::size_t total = capacity * static_cast<std::size_t>(size_);
    check_cuda(cudaMallocHost(&host_send_, capacity), "cudaMallocHost");
    check_cuda(cudaMallocHost(&host_recv_, total), "cudaMallocHost");
    check_cuda(cudaMalloc(&device_send_, capacity), "cudaMalloc");
    check_cuda(cudaMalloc(&device_recv_, total), "cudaMalloc");
    capacity_ = capacity;
  }

  void free_buffers() noexcept {
    if (host_send_) cudaFreeHost(host_send_);
    if (host_recv_) cudaFreeHost(host_recv_);
    if (device_send_) cudaFree(device_send_);
    if (device_recv_) cudaFree(device_recv_);
    host_send_ = host_recv_ = device_send_ = device_recv_ = nullptr;
    capacity_ = 0;
  }

  // An allgather that timed out may still write the buffers whenever the
  // missing rank comes: they are then left allocated until exit on purpose.
  void release() noexcept {
    int previous = 0;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    if (!out_of_step_) free_buffers();
    if (stream_) cudaStreamDestroy(stream_);  // its work, if any, completes first
    stream_ = nullptr;
    if (switched) cudaSetDevice(previous);
  }

  ncclComm_t comm_;
  NcclFunctions nccl_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  int local_rank_ = 0;
  int node_id_ = 0;
  int num_nodes_ = 1;
  std::vector<int> members_;
  cudaStream_t stream_ = nullptr;
  void* host_send_ = nullptr;
  void* host_recv_ = nullptr;
  void* device_send_ = nullptr;
  void* device_recv_ = nullptr;
  std::size_t capacity_ = 0;  // bytes per rank of every buffer
  bool out_of_step_ = false;
};

}  // namespace

std::unique_ptr<Bootstrap> make_nccl_bootstrap(ncclComm_t comm, const NcclFunctions& nccl,
                                               std::chrono::milliseconds timeout) {
  return std::make_unique<NcclBootstrap>(comm, nccl, timeout);
}

}  // namespace peerplan::bootstrap
