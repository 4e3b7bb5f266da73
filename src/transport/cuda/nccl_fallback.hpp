// The CUDA backend's fallback: NCCL all-reduce for every call the index or
// the cutoffs decline; the fused op is NCCL all-reduce plus the standalone
// add + RMSNorm kernel, which rounds exactly like the fused P2P kernel.
// Non-contiguous tensors go through a scratch buffer (grown outside CUDA
// graph capture only: capturing such a call before one eager call of that
// size is an InvalidUsage naming the fix).
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>

#include "bootstrap/bootstrap.hpp"
#include "transport/transport.hpp"

namespace peerplan::transport::cuda {

class NcclFallback final : public FallbackTransport {
 public:
  // Collective over every rank of `bootstrap`.
  NcclFallback(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout);
  ~NcclFallback() override;

  void all_reduce(const AllReduceArgs& args) override;
  void fused_add_rms_norm(const FusedArgs& args) override;
  void close() override;

 private:
  void* scratch(std::size_t bytes, cudaStream_t stream, const char* what);

  ncclComm_t comm_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  // The add + RMSNorm kernel's row clusters (same bits either way).
  bool rows_in_clusters_ = false;
};

}  // namespace peerplan::transport::cuda
