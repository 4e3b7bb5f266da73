// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/node_exchange.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/member_group.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/layout.hpp"
#include "transport/cuda/bounded_wait.hpp"
#include "transport/cuda/cuda_backend.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/stream_capture.hpp"
#include "transport/host/element.hpp"
#include "transport/host/node_group_sum.hpp"

namespace peerplan::transport::cuda {
namespace {

constexpr const char* kContext = "peerplan cuda backend, hierarchical route";

// The group's NCCL communicator is a NCCL fallback over the group: its
// bounded rendezvous, its tracking of captured graphs and its bounded
// teardown come with it.
class NcclNodeExchange final : public NodeExchange {
 public:
  NcclNodeExchange(bootstrap::Bootstrap& parent, std::chrono::milliseconds timeout,
                   RowClusters row_clusters)
      : group_(bootstrap::make_member_group(parent, parent.local_rank(), parent.node_id())),
        nccl_(make_nccl_fallback(*group_, timeout, row_clusters)) {}
  ~NcclNodeExchange() override { close(); }

  void sum(void* shard, std::size_t count, DataType dtype, StreamHandle stream,
           const char*) override {
    const TensorLayout layout{static_cast<std::int64_t>(count)};
    nccl_->all_reduce(AllReduceArgs{shard, shard, dtype, &layout, stream});
  }
  void check_stream(StreamHandle, const char*) const override {}  // NCCL calls can be captured
  const char* engine() const noexcept override { return "NCCL"; }
  void close() override {
    if (nccl_) nccl_->close();
  }

 private:
  std::unique_ptr<bootstrap::Bootstrap> group_;  // outlives nccl_ (declared first)
  std::unique_ptr<FallbackTransport> nccl_;
};

class MpiNodeExchange final : public NodeExchange {
 public:
  MpiNodeExchange(bootstrap::OwnedComm comm, bootstrap::Bootstrap& parent,
                  const std::vector<int>& node_of_rank, std::chrono::milliseconds timeout)
      : sum_(std::move(comm), parent, node_of_rank, timeout), timeout_(timeout) {}
  ~MpiNodeExchange() override { close(); }

  void sum(void* shard, std::size_t count, DataType dtype, StreamHandle handle,
           const char* what) override {
    const auto stream = static_cast<cudaStream_t>(handle);
    check_stream(handle, what);
    const std::size_t bytes = count * element_size(dtype);
    std::byte* host = pinned(bytes);
    check_cuda(cudaMemcpyAsync(host, shard, bytes, cudaMemcpyDeviceToHost, stream),
               "copying the node's shard to the host");
    wait_for(stream, what, "the node's shard to reach the host");
    values_.resize(count);
    for (std::size_t i = 0; i < count; ++i)
      values_[i] = host::load_as_float(dtype, host + i * element_size(dtype));
    sum_.sum(values_, what);
    for (std::size_t i = 0; i < count; ++i)
      host::store_from_float(dtype, values_[i], host + i * element_size(dtype));
    check_cuda(cudaMemcpyAsync(shard, host, bytes, cudaMemcpyHostToDevice, stream),
               "copying the sum over the nodes back to the GPU");
    // The pinned buffer is reused by the next call: wait until it is read.
    wait_for(stream, what, "the sum over the nodes to reach the GPU");
  }
  void check_stream(StreamHandle stream, const char* what) const override {
    if (!capturing(static_cast<cudaStream_t>(stream))) return;
    throw InvalidUsage(std::string(kContext) + ": " + what +
                       ": the step between nodes runs on MPI here (ranks of one group share a "
                       "GPU, or Config::fallback is mpi, or this build has no NCCL) and MPI "
                       "cannot run inside CUDA graph capture; call it eagerly, or give every "
                       "rank of a group its own GPU with NCCL available");
  }
  const char* engine() const noexcept override { return "MPI"; }
  void close() override {
    // Every call waited for its copies, except one whose wait timed out:
    // its copy may still land in the buffer, and freeing it could block on
    // that copy. Leaked on purpose then (as the slabs after a stuck kernel).
    if (copy_in_flight_) {
      pinned_ = nullptr;
      pinned_bytes_ = 0;
      return;
    }
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    cudaGetLastError();
    pinned_ = nullptr;
    pinned_bytes_ = 0;
  }

 private:
  std::byte* pinned(std::size_t bytes) {
    if (copy_in_flight_) {
      throw InvalidUsage(std::string(kContext) +
                         ": an earlier call's copy between the GPU and "
                         "the host did not finish in time; close() the communicator and create "
                         "a new one");
    }
    if (bytes <= pinned_bytes_) return pinned_;
    close();
    void* buffer = nullptr;
    check_cuda(cudaHostAlloc(&buffer, bytes, cudaHostAllocDefault),
               "cudaHostAlloc of " + std::to_string(bytes) + " bytes for the step between nodes");
    pinned_ = static_cast<std::byte*>(buffer);
    pinned_bytes_ = bytes;
    return pinned_;
  }

  void wait_for(cudaStream_t stream, const char* what, const char* waited) {
    if (poll_until_done([stream] { return cudaStreamQuery(stream); }, timeout_, waited)) return;
    copy_in_flight_ = true;
    const std::string why = std::string(what) + " waited longer than PEERPLAN_TIMEOUT_MS=" +
                            milliseconds_text(timeout_) + " for " + waited;
    sum_.abandon(why);
    throw Timeout(std::string(kContext) + ": " + why +
                  " (a kernel before it waits for a peer that does not come); the ranks of the "
                  "other nodes raise Timeout naming this one. Close the communicator and create "
                  "a new one.");
  }

  host::NodeGroupSum sum_;
  std::chrono::milliseconds timeout_;
  std::vector<float> values_;
  std::byte* pinned_ = nullptr;
  std::size_t pinned_bytes_ = 0;
  bool copy_in_flight_ = false;  // a wait for a copy timed out
};

}  // namespace

std::unique_ptr<NodeExchange> make_nccl_node_exchange(bootstrap::Bootstrap& parent,
                                                      std::chrono::milliseconds timeout,
                                                      RowClusters row_clusters) {
  return std::make_unique<NcclNodeExchange>(parent, timeout, row_clusters);
}

std::unique_ptr<NodeExchange> make_mpi_node_exchange(bootstrap::OwnedComm comm,
                                                     bootstrap::Bootstrap& parent,
                                                     const std::vector<int>& node_of_rank,
                                                     std::chrono::milliseconds timeout) {
  return std::make_unique<MpiNodeExchange>(std::move(comm), parent, node_of_rank, timeout);
}

}  // namespace peerplan::transport::cuda
