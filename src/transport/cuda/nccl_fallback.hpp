// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's fallback: NCCL all-reduce for every call the index or
// the cutoffs decline; the fused op is NCCL all-reduce plus the standalone
// add + RMSNorm kernel, which rounds exactly like the fused P2P kernel.
// Non-contiguous tensors go through a scratch buffer (grown outside CUDA
// graph capture only: capturing such a call before one eager call of that
// size is an InvalidUsage naming the fix). A buffer that growing replaces is
// kept until close(): graphs captured earlier replay into it.
//
// Every host wait is bounded by the timeout. The NCCL communicator is
// blocking (a non-blocking one costs a thread per call: 64 us instead of
// 8.7 per eager call, measured), so the waits are bounded around it: the
// rendezvous and a warm-up that makes NCCL connect the ranks run on helper
// threads until the deadline, so that later calls do not wait on the host for
// a peer (docs/faults.md: what NCCL still connects lazily); teardown waits for the device with a bound
// and never finalizes while GPU work may still need a peer (see below).
// NCCL's kernels themselves cannot be bounded: a fallback kernel whose peer
// never calls waits on the GPU until the communicator is aborted.
//
// CUDA graphs: NCCL cannot finalize, destroy or even abort a communicator
// while a graph that captured one of its calls exists (it waits for the
// graph's destruction, without a bound). Every graph that captures a
// fallback call is therefore tracked (a CUDA user object whose destructor
// runs when the graph and its instantiations are gone). close() with such a
// graph alive leaves the communicator open, with a WARN, instead of hanging;
// such communicators are finalized at a later NcclFallback construction or
// close() in the process once their graphs are gone, else left to the end
// of the process.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "peerplan/config.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::cuda {

class NcclFallback final : public FallbackTransport {
 public:
  // Collective over every rank of `bootstrap`. NCCL's rendezvous is bounded
  // by max(timeout, 10 s) (NCCL's own set-up work counts against it): past
  // it the communicator is aborted and Timeout thrown. Every rank throws
  // when any rank failed. `row_clusters` (Config::kernels) picks the add +
  // RMSNorm kernel's row shape on this rank.
  NcclFallback(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout,
               RowClusters row_clusters);
  // Without close(): aborts the NCCL communicator (peers may be gone),
  // bounded like close().
  ~NcclFallback() override;

  void all_reduce(const AllReduceArgs& args) override;
  void fused_add_rms_norm(const FusedArgs& args) override;
  // Bounded by about timeout + 2 s; never throws. See the class comment.
  void close() override;

  // Tracks graphs that captured a fallback call (shared with the CUDA user
  // objects attached to them, which may outlive this object).
  struct CapturedGraphs;

  // Scratch buffers replaced by a larger one and kept until shut-down (for
  // tests).
  std::size_t retired_scratch_buffers() const noexcept {
    return scratch_buffers_.empty() ? 0 : scratch_buffers_.size() - 1;
  }

 private:
  // The constructor's work: NCCL unique id, rendezvous, agreement.
  void init(bootstrap::Bootstrap& bootstrap, RowClusters row_clusters);
  // One small and one large all-reduce of zeros, bounded by `bound`, so
  // that NCCL connects the ranks now (see kWarmUpSmallElements). Returns
  // what went wrong, or an empty text.
  std::string warm_up(int rank, std::chrono::milliseconds bound);
  // Aborts (bounded) and forgets a communicator that init() gives up on.
  void abandon_comm() noexcept;
  void* scratch(std::size_t bytes, cudaStream_t stream, const char* what);
  // Puts one NCCL all-reduce on `stream`, waiting (bounded) until NCCL has.
  void enqueue_all_reduce(const void* in, void* out, std::size_t count, ncclDataType_t type,
                          cudaStream_t stream);
  void track_capture(cudaStream_t stream);
  // Graphs that captured a fallback call and still exist, once the device
  // is idle (by `deadline`) and CUDA had a moment to run the destructors of
  // graphs destroyed just before.
  int graphs_still_alive(std::chrono::steady_clock::time_point deadline) noexcept;
  // Releases the communicator and the scratch buffer: finalize when
  // `finalize`, else abort.
  void shut_down(bool finalize) noexcept;

  std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  // NCCL_COMM_BLOCKING=1 overrides the config: calls then block inside NCCL.
  bool blocking_ = false;
  int device_ = 0;
  CapturedGraphs* graphs_ = nullptr;
  unsigned long long last_capture_id_ = 0;
  // Every scratch buffer, the one in use (of scratch_bytes_) last. Those it
  // replaced stay allocated until shut-down: a graph captured earlier may
  // replay into them, an eager call queued earlier may still use them.
  std::vector<void*> scratch_buffers_;
  std::size_t scratch_bytes_ = 0;
  // The add + RMSNorm kernel's row clusters (same bits either way).
  bool rows_in_clusters_ = false;
};

}  // namespace peerplan::transport::cuda
