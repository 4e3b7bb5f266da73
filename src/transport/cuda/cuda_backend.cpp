// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/cuda_backend.hpp"

#include <cstdint>
#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "peerplan/errors.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/cuda_peer_transport.hpp"
#include "transport/cuda/mpi_device_fallback.hpp"
#include "transport/cuda/row_clusters.hpp"
#ifndef PEERPLAN_HAVE_NCCL
#error "PEERPLAN_HAVE_NCCL (1 or 0) comes from peerplan_internal (src/CMakeLists.txt)"
#endif
#if PEERPLAN_HAVE_NCCL
#include "transport/cuda/nccl_fallback.hpp"
#endif

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
                          std::to_string(device) + " but this rank sees " + std::to_string(count) +
                          " GPU(s); use -1 (the local rank) or 0.." + std::to_string(count - 1));
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  check_cuda(cudaFree(nullptr), "creating the CUDA context");
  return device;
}

void check_kernel_choices(const KernelChoices& kernels, int device) {
  if (kernels.row_clusters == RowClusters::on && !row_clusters_supported(device)) {
    throw InvalidArgument(
        "Config::kernels.row_clusters / PEERPLAN_ROW_CLUSTERS is on, but GPU " +
        std::to_string(device) +
        " or this build of peerplan has no thread-block clusters "
        "(they need compute capability 9.0+ and sm_90+ device code, CMAKE_CUDA_ARCHITECTURES); "
        "set it to auto or off");
  }
}

std::unique_ptr<PeerTransport> make_cuda_peer_transport(
    bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout, TransferMode mode,
    const KernelChoices& kernels, std::unique_ptr<NodeExchange> across_nodes) {
  // auto = push: on NVLink the LL push one-shot beats pull at every size
  // measured (benchmarks/RESULTS.md); pull is for zero-copy registered
  // inputs and for links where reads win.
  return std::make_unique<CudaPeerTransport>(bootstrap, timeout, mode == TransferMode::pull,
                                             kernels, std::move(across_nodes));
}

bool nccl_built() noexcept { return PEERPLAN_HAVE_NCCL != 0; }

std::unique_ptr<FallbackTransport> make_nccl_fallback(
    [[maybe_unused]] bootstrap::Bootstrap& bootstrap,
    [[maybe_unused]] std::chrono::milliseconds timeout, [[maybe_unused]] RowClusters row_clusters) {
#if PEERPLAN_HAVE_NCCL
  return std::make_unique<NcclFallback>(bootstrap, timeout, row_clusters);
#else
  throw Unsupported(
      "peerplan cuda backend: the NCCL fallback was asked for, but this build of peerplan has "
      "no NCCL (PEERPLAN_WITH_NCCL=OFF or NCCL not found at configure time); use the MPI "
      "fallback: Config::fallback / PEERPLAN_FALLBACK=mpi (or rebuild peerplan with NCCL: "
      "-DPEERPLAN_WITH_NCCL=ON, NCCL_ROOT=<NCCL's folder>)");
#endif
}

std::unique_ptr<FallbackTransport> make_mpi_device_fallback(bootstrap::OwnedComm comm,
                                                            std::chrono::milliseconds timeout,
                                                            RowClusters row_clusters) {
  return std::make_unique<MpiDeviceFallback>(std::move(comm), timeout, row_clusters);
}

}  // namespace peerplan::transport::cuda
