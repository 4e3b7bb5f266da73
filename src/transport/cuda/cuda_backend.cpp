#include "transport/cuda/cuda_backend.hpp"

#include <cstdint>
#include <cuda_runtime_api.h>

#include <string>

#include "peerplan/errors.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/cuda_peer_transport.hpp"
#include "transport/cuda/nccl_fallback.hpp"

namespace peerplan::transport::cuda {

bool cuda_device_visible() noexcept {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not sticky, but keep the slate clean
    return false;
  }
  return count > 0;
}

int select_device(int configured, int local_rank) {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  const int device = configured >= 0 ? configured : (count > 0 ? local_rank % count : 0);
  if (device >= count) {
    throw InvalidArgument("peerplan cuda backend: Config::device / PEERPLAN_DEVICE is " +
                          std::to_string(device) + " but this rank sees " +
                          std::to_string(count) + " GPU(s); use -1 (the local rank) or 0.." +
                          std::to_string(count - 1));
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  check_cuda(cudaFree(nullptr), "creating the CUDA context");
  return device;
}

std::unique_ptr<PeerTransport> make_cuda_peer_transport(bootstrap::Bootstrap& bootstrap,
                                                        std::chrono::milliseconds timeout,
                                                        TransferMode mode) {
  // auto = push: on NVLink the LL push one-shot beats pull at every size
  // measured (benchmarks/RESULTS.md); pull is for zero-copy registered
  // inputs and for links where reads win.
  return std::make_unique<CudaPeerTransport>(bootstrap, timeout, mode == TransferMode::pull);
}

std::unique_ptr<FallbackTransport> make_nccl_fallback(bootstrap::Bootstrap& bootstrap,
                                                      std::chrono::milliseconds timeout) {
  return std::make_unique<NcclFallback>(bootstrap, timeout);
}

}  // namespace peerplan::transport::cuda
