// SPDX-License-Identifier: Apache-2.0
// The host backend's P2P transport: the one-shot, two-shot and fused
// one-shot algorithms of the CUDA kernels, run by the CPU over POSIX shared
// memory among the ranks of one node.
//
// Each rank owns one segment: [signal area | staging slot 0 | staging slot 1].
// A call with epoch e (1, 2, ... counted identically on every rank, since
// calls are collective and made in the same order) stages into slot e % 2,
// so a rank that races ahead into call e+1 cannot clobber what its peers
// still read for call e; before reusing a slot (call e+2) a rank checks that
// every peer marked `done` for call e. Every rank sums the slots in fp32 in
// fixed rank order 0..n-1 and rounds once, so results are bit-identical on
// every rank. Every wait is bounded by the timeout.
//
// On a job that spans several nodes (same number of ranks on each), every
// call takes the hierarchical route instead: the node's ranks sum shard i
// (two-shot's shards) in fp32 in local rank order, without rounding; the
// ranks with local rank i, one per node, add those partial sums in node
// order (NodeGroupSum); each rank rounds its shard once and the node's
// ranks gather the shards. The fused op adds the residual and normalises
// every row after the gather, as on one node. So a result is
// round(sum over nodes in node order of (sum over the node's ranks in local
// rank order)): bit-identical on every rank, and within fp32 reassociation
// of the one-node sum (docs/multi-node.md). Each call then ends with a
// verdict among every rank (agree_between_nodes), so that no node completes
// a call another node fails. A Timeout between nodes leaves the group out
// of step: the communicator is unusable from then on.
//
// Each wait is decided once for the node's ranks, success or failure, on a
// verdict word in shared memory (wait_for_peers): a rank never completes a
// call a node peer reported as failed. Each rank publishes its call's
// signature with its input, so ranks that made different calls raise
// Mismatch before anything is reduced (require_same_calls).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "transport/host/node_group_sum.hpp"
#include "transport/host/peer_segments.hpp"
#include "transport/host/signal_area.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::host {

class HostPeerTransport final : public PeerTransport {
 public:
  // Collective over every rank of `bootstrap`: removes the segments of
  // dead jobs from /dev/shm (remove_stale_segments), picks a job-unique
  // segment name prefix and probes shared memory with one page per rank (throws
  // SystemError on every rank if any rank cannot create or map it; leaves
  // nothing in /dev/shm). Only node-local ranks exchange data: the
  // communicator uses this transport only when the job is on one node.
  // `bootstrap` must outlive this object. No staging memory is reserved yet.
  // `across_nodes`: the group of this rank's counterparts on the other
  // nodes when the job spans several; then every call takes the
  // hierarchical route (all_reduce wants Route::hierarchical).
  HostPeerTransport(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                    std::unique_ptr<NodeGroupSum> across_nodes = nullptr);
  ~HostPeerTransport() override;

  // Collective, same argument on every rank. Re-creates the segments when
  // the capacity changes or when any rank's transport is broken (a wait
  // timed out): all ranks agree first, and re-creation resets the epochs, so
  // this is also how the ranks resynchronise after a Timeout. 0 releases.
  // Throws SystemError on every rank when any rank cannot create or map its
  // segment (capacity_bytes() is then 0), Mismatch when ranks pass
  // different sizes, Timeout from the bootstrap.
  void reserve(std::size_t max_message_bytes, std::size_t max_lamport_bytes = 0,
               std::size_t max_dma_bytes = 0) override;
  std::size_t capacity_bytes() const noexcept override { return capacity_; }

  // Every route stages through shared memory: one protocol.
  routing::ProtocolWindows protocol_windows() const noexcept override { return {}; }
  // Throws InvalidArgument unless the request is an all-reduce on
  // one_shot/two_shot (one node) or hierarchical (several), or a fused op
  // on fused_one_shot (one node) or hierarchical (several), protocol
  // staged, within capacity_bytes().
  std::unique_ptr<PlanLaunch> prepare(const LaunchRequest& request) override;
  // Collective. Throws InvalidArgument (a launch of another transport),
  // InvalidUsage (closed, nothing reserved, broken by an earlier timeout),
  // Timeout.
  bool all_reduce(const PlanLaunch& launch, const AllReduceArgs& args) override;
  void fused_add_rms_norm(const PlanLaunch& launch, const FusedArgs& args) override;

  // Processes cannot map each other's private memory: the host backend
  // always stages. Registration is accepted (so code written for the cuda
  // backend runs unchanged) and reads nothing in place.
  void register_buffers(std::span<const BufferRegion>) override {}
  void deregister_buffers() override {}
  std::size_t registered_buffer_count() const noexcept override { return 0; }

  // Unmaps everything. Local (a peer keeps its own mappings alive), so it
  // is safe even when peers are gone; idempotent.
  void close() override;

  // Diagnostics and tests.
  // Every segment of this job on this node starts with this prefix (the
  // same on every rank): "<prefix>n<pid namespace>-p<pid>-g<gen>l<rank>"
  // (segment_names.hpp); in /dev/shm it appears without the leading '/'.
  const std::string& segment_name_prefix() const noexcept { return name_prefix_; }
  std::uint64_t epoch() const noexcept { return epoch_; }
  bool broken() const noexcept { return broken_; }

 private:
  struct Call;  // per-call context (epoch, deadline, what to name in errors)
  bool run_all_reduce(Route route, const AllReduceArgs& args);
  void run_fused(const FusedArgs& args);

  Call begin_call(const char* what, std::int64_t message_bytes);
  // Stages this rank's input and its call's signature, waits for the node's
  // ranks, and throws Mismatch (on every rank alike) when their calls differ.
  void stage_input(Call& call, const CallSignature& signature, const TensorLayout& layout,
                   const void* input);
  void require_same_calls(const Call& call, const CallSignature& mine);
  // Waits, bounded, until every node peer's `which` flag reaches `target`,
  // and decides that wait with the node's ranks (the verdict word): returns
  // where they decided success, throws Timeout where they decided failure.
  void wait_for_peers(Call& call, Signal which, std::uint64_t target);
  [[noreturn]] void fail_wait(const Call& call, Signal which, std::uint64_t target,
                              bool timed_out_here);
  // Breaks the transport and throws Mismatch (`different_calls`) or Timeout.
  [[noreturn]] void fail_transport(const std::string& message, bool different_calls);
  // Their global ranks, this one marked "(this rank)", for an error message.
  std::string name_local_ranks(const std::vector<int>& local_ranks) const;
  static std::uint64_t verdict_failed(std::uint64_t epoch, Signal which) noexcept;
  void finish_call(const Call& call);
  std::byte* input_region(int local_rank, std::uint64_t epoch) const noexcept;
  std::byte* result_region(int local_rank, std::uint64_t epoch) const noexcept;
  std::byte* own_segment() const noexcept { return segments_.base(local_rank_); }

  void one_shot(Call& call, const AllReduceArgs& args, std::int64_t count);
  void two_shot(Call& call, const AllReduceArgs& args, std::int64_t count);
  // Hierarchical: this rank's shard summed over its node and then over the
  // nodes, left in its result region as fp32 for the node's ranks.
  void sum_shard_across_nodes(Call& call, DataType dtype, std::int64_t count);
  // Runs a step between nodes; if it throws, decides the node's next wait
  // (`next_wait`) as failed, so that the node's ranks fail at once, and
  // breaks the transport before rethrowing.
  template <class Step>
  void between_nodes(const Call& call, Signal next_wait, Step&& step);
  // The job-wide verdict of a hierarchical call (host_peer_transport.cpp).
  void agree_between_nodes(const Call& call);
  [[noreturn]] void fail_between_nodes(const std::string& message);
  // Element range [first, last) of `owner`'s shard (ceil(count / ranks) each).
  std::pair<std::int64_t, std::int64_t> shard_range(int owner, std::int64_t count) const noexcept;
  void hierarchical_all_reduce(Call& call, const AllReduceArgs& args, std::int64_t count);
  void hierarchical_fused(Call& call, const FusedArgs& args, std::int64_t count);

  bootstrap::Bootstrap& bootstrap_;
  std::chrono::milliseconds timeout_;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::vector<int> global_ranks_;  // by local rank, for error messages
  std::string name_prefix_;        // the job's
  std::string own_name_prefix_;    // this rank's: name_prefix_ + creator
  std::uint64_t generation_ = 0;

  std::unique_ptr<NodeGroupSum> across_nodes_;  // several nodes only

  PeerSegments segments_;
  std::size_t capacity_ = 0;     // largest message, bytes
  std::size_t input_bytes_ = 0;  // per slot: staged input
  std::size_t slot_bytes_ = 0;   // input region + two-shot result region
  std::uint64_t epoch_ = 0;
  bool broken_ = false;
  std::string broken_reason_;  // what broke it, for the calls refused until reserve()
  bool closed_ = false;
  std::vector<const void*> sources_;  // scratch: slot pointers of one call
  std::vector<float> row_values_;     // scratch: one row of the fused op
  std::vector<float> shard_sum_;      // scratch: the hierarchical route's shard
  std::vector<std::byte> chunk_;      // scratch: reduced values for strided outputs
  // Scratch of a failed wait (wait_for_peers, fail_wait): local ranks.
  std::vector<int> missing_scratch_, gave_up_scratch_, waiting_scratch_;
};

}  // namespace peerplan::transport::host
