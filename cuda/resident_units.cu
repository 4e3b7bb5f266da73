// SPDX-License-Identifier: Apache-2.0
#include "resident_units.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "launch_shape.cuh"

namespace peerplan::cuda_kernels::detail {

std::int64_t resident_row_units(const void* kernel, bool cluster, std::int64_t most,
                                ResidentCache& cache) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kResidentCacheDevices) {
    cudaGetLastError();
    return most;
  }
  int units = cache[device].load(std::memory_order_relaxed);
  if (units > 0) return units;
  cudaError_t status = cudaSuccess;
  if (cluster) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(most * kRowSplits));
    config.blockDim = dim3(kSplitThreads);
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = kRowSplits;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    status = cudaOccupancyMaxActiveClusters(&units, kernel, &config);
  } else {
    int per_sm = 0, sms = 0;
    status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kRowThreads, 0);
    if (status == cudaSuccess) {
      status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    }
    units = per_sm * sms;
  }
  if (status != cudaSuccess || units <= 0) {
    cudaGetLastError();
    units = static_cast<int>(most);  // kept: no call may ask (launch_recipe.hpp)
  }
  units = static_cast<int>(std::min<std::int64_t>(units, most));
  cache[device].store(units, std::memory_order_relaxed);
  return units;
}

}  // namespace peerplan::cuda_kernels::detail
