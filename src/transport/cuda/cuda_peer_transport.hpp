// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's P2P transport: one-shot, two-shot and fused one-shot
// kernels (cuda/collective_kernels.hpp) over CUDA IPC slabs shared by the
// node-local ranks.
//
// Slab of each rank: [signal area 20 KiB | staging slot 0 | staging slot 1
// | copy-engine region (two-shot on Protocol::dma) | Lamport region (push
// one-shot, KernelChoices::one_shot_lamport;
// fused op, KernelChoices::fused_lamport; two-shot, two_shot_lamport)].
// The call epoch lives on the device (the owner's signal area), so eager
// calls and CUDA-graph replays of captured calls interleave freely and
// replays need no host patching; the host keeps no per-call state. A
// kernel whose wait exceeds the timeout writes the error word (pinned,
// mapped host memory) and exits; the next call on the host sees it and
// throws Timeout. The slabs (and captured graphs' pointers into them) stay
// valid until reserve() re-creates them with a different capacity or after
// a timeout.
//
// Transfer mode: push (default: every rank writes its input into the
// peers' slots; one-shot uses the Lamport protocol or LL lines) or pull
// (every rank reads its peers' inputs; inputs inside registered buffers
// are read in place, zero copy). The mode is part of the config every rank agrees on, so all ranks
// run the same protocol. The fused op always pushes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "collective_kernels.hpp"
#include "launch_recipe.hpp"
#include "peerplan/config.hpp"
#include "transport/cuda/buffer_registry.hpp"
#include "transport/cuda/ipc_slabs.hpp"
#include "transport/cuda/node_exchange.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::cuda {

class CudaPeerTransport final : public PeerTransport {
 public:
  // Collective. Checks that every pair of node-local devices can map each
  // other (distinct devices, cudaDeviceCanAccessPeer, then a real peer read
  // of a probe slab); throws CudaError/Unsupported on this rank otherwise.
  // `kernels` must agree on every rank where KernelChoices says so: the
  // communicator checks that (communicator/card_decisions.hpp), not this.
  // `across_nodes`: the step between nodes of the hierarchical route when
  // the communicator spans several nodes (then every plan is hierarchical),
  // else null.
  CudaPeerTransport(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout, bool pull,
                    const KernelChoices& kernels,
                    std::unique_ptr<NodeExchange> across_nodes = nullptr);
  ~CudaPeerTransport() override;

  void reserve(std::size_t max_message_bytes, std::size_t max_lamport_bytes = 0,
               std::size_t max_dma_bytes = 0) override;
  std::size_t capacity_bytes() const noexcept override { return capacity_; }
  // From the agreed KernelChoices and transfer mode (the same on every rank).
  routing::ProtocolWindows protocol_windows() const noexcept override { return windows_; }
  // The one-shot's grid by message size (routing/launch_shape_tuning.hpp),
  // unless KernelChoices::one_shot_max_blocks fixes it; used by every later
  // prepare() of a one-shot plan.
  void set_launch_shapes(const routing::LaunchShapeTuning& shapes) override;
  // The plan's kernel recipe (cuda/launch_recipe.hpp): kernel, grid, shard
  // geometry and launch attributes, with the occupancy queries made here.
  std::unique_ptr<PlanLaunch> prepare(const LaunchRequest& request) override;
  // Lookup done: check the error word, fill in pointers and stream, launch.
  bool all_reduce(const PlanLaunch& launch, const AllReduceArgs& args) override;
  void fused_add_rms_norm(const PlanLaunch& launch, const FusedArgs& args) override;
  // Registered buffers are read in place by pull calls; push calls ignore
  // them (a push transport still registers, so that switching modes needs
  // no code change, but reports them as not readable in place: count 0).
  void register_buffers(std::span<const BufferRegion> buffers) override;
  void deregister_buffers() override;
  std::size_t registered_buffer_count() const noexcept override {
    return pull_ ? registry_.own_count() : 0;
  }
  void close() override;

 private:
  void begin_call(const char* what, std::size_t message_bytes);
  void check_error_word(const char* what);
  void check_launch(cudaError_t status, const char* what);
  void probe_peer_access();
  // Collective, bounded; throws Timeout on every rank (idle_gpus.hpp).
  void wait_until_no_kernel_uses_buffers(const char* step);
  cuda_kernels::PullSource pull_source(const AllReduceArgs& args, std::size_t bytes) const noexcept;
  std::unique_ptr<PlanLaunch> prepare_hierarchical(const LaunchRequest& request);
  void run_hierarchical(const cuda_kernels::LaunchRecipe& before,
                        const cuda_kernels::LaunchRecipe& after, std::size_t exchange_count,
                        const char* what, const void* in, cuda_kernels::CallPointers after_pointers,
                        DataType dtype, cudaStream_t stream);
  // The hierarchical route's device buffers (reserve): this rank's shard of
  // the node's sum, and the fused op's dense reduced message.
  void allocate_node_buffers(std::size_t max_message_bytes);
  void release_node_buffers() noexcept;

  bootstrap::Bootstrap& bootstrap_;
  std::chrono::milliseconds timeout_;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::vector<int> global_ranks_;  // by local rank
  bool pull_ = false;
  IpcSlabs slabs_;
  IpcSlabs probe_slabs_;  // create()'s peer-access probe, freed at close()
  BufferRegistry registry_;
  cuda_kernels::PeerSet peers_{};
  // The agreed KernelChoices and transfer mode, resolved: which protocol
  // the router gives which plan.
  routing::ProtocolWindows windows_;
  int configured_one_shot_blocks_ = 0;  // KernelChoices::one_shot_max_blocks (0: auto)
  routing::LaunchShapeTuning shapes_;   // a tuning file's, for "auto"
  // The copy-engine pipeline's streams and events, created at the first
  // plan that runs in pipelined pieces (null before).
  std::unique_ptr<cuda_kernels::DmaStreams> dma_streams_;
  std::size_t slot_capacity_ = 0;     // the largest plan the staging slots hold
  std::size_t lamport_capacity_ = 0;  // the largest Lamport plan the region holds
  std::size_t dma_capacity_ = 0;      // the largest copy-engine plan its region holds
  std::unique_ptr<NodeExchange> across_nodes_;
  void* node_shard_ = nullptr;                       // device: [shard of the node's sum]
  void* node_reduced_ = nullptr;                     // device: [dense reduced message] (fused op)
  cuda_kernels::DeviceError* error_host_ = nullptr;  // pinned, mapped
  std::size_t capacity_ = 0;
  bool broken_ = false;
  bool closed_ = false;
  std::string broken_reason_;
};

}  // namespace peerplan::transport::cuda
