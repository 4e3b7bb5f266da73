// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's MPI fallback (Config::fallback = mpi): for builds
// without NCCL, for sites whose MPI is their collective library, and for
// ranks that share a GPU (NCCL refuses those; peerplan's P2P kernels do not).
//
// Each call stages the GPU tensor through pinned host memory: the device
// copy is made on the caller's stream, the stream is waited for (bounded by
// the timeout), the host MPI fallback (transport/host/mpi_fallback.hpp)
// reduces it with everything that fallback guarantees (bounded waits, one
// verdict on every rank, f16/bf16 added in fp32), and the result goes back
// on the stream. The fused op is that all-reduce followed by the same add +
// RMSNorm kernel as the NCCL fallback's, so both fallbacks round the norm
// the same way.
//
// It blocks the calling thread until the reduction is done and cannot be
// captured into a CUDA graph: a call during capture raises InvalidUsage
// before touching the stream (declare the shape so that a P2P route runs,
// or use the NCCL fallback). Messages never pass through the MPI library as
// device pointers, so any MPI works, CUDA-aware or not.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "bootstrap/owned_comm.hpp"
#include "peerplan/config.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::host {
class MpiFallback;
}

namespace peerplan::transport::cuda {

class MpiDeviceFallback final : public FallbackTransport {
 public:
  // Takes `comm` (the communicator's own duplicate) for the host MPI
  // fallback. Not collective. `row_clusters` picks the add + RMSNorm
  // kernel's row shape on the current device.
  MpiDeviceFallback(bootstrap::OwnedComm comm, std::chrono::milliseconds timeout,
                    RowClusters row_clusters);
  ~MpiDeviceFallback() override;

  // Collective. Throws what the host MPI fallback throws (Timeout,
  // Mismatch, MpiError), Timeout when the caller's stream does not reach
  // the call within the timeout, InvalidUsage during CUDA graph capture or
  // after close(), CudaError.
  void all_reduce(const AllReduceArgs& args) override;
  void fused_add_rms_norm(const FusedArgs& args) override;
  // Local, idempotent, bounded by about the timeout.
  void close() override;

 private:
  // Reduces `bytes` of contiguous device memory at `source` across the
  // ranks through the pinned buffer; the result lands at `destination`
  // (may be `source`), queued on `stream`, which has queued everything that
  // produces `source`.
  void reduce_staged(const void* source, void* destination, std::size_t bytes, DataType dtype,
                     cudaStream_t stream, bool fused);
  void* device_scratch(std::size_t bytes);
  void* pinned(std::size_t bytes);
  // Orders this call after the previous one's last use of the staging
  // buffers (it may have run on another stream).
  void after_previous_call(cudaStream_t stream, const char* what);
  void record_last_use(cudaStream_t stream);
  // Waits (bounded by the timeout) until `stream` has run everything queued.
  void wait_for_stream(cudaStream_t stream, const char* what);
  void release_buffers() noexcept;

  std::unique_ptr<host::MpiFallback> host_;
  std::chrono::milliseconds timeout_;
  int device_ = 0;
  bool rows_in_clusters_ = false;
  // Recorded after each call's last use of the buffers below.
  cudaEvent_t last_use_ = nullptr;
  void* pinned_ = nullptr;
  std::size_t pinned_bytes_ = 0;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  // Buffers that a growth replaced, freed with the others at close():
  // cudaFree and cudaFreeHost wait for every kernel of the device, which may
  // never end (another library's, a fallback call a peer never made). A
  // growth at least doubles a buffer, so these hold less than it.
  std::vector<void*> retired_pinned_;
  std::vector<void*> retired_scratch_;
  bool closed_ = false;
};

}  // namespace peerplan::transport::cuda
