// SPDX-License-Identifier: Apache-2.0
#include "empty_launch.hpp"

namespace peerplan::bench {
namespace {

__global__ void empty_kernel() {}

struct LaunchParams {
  unsigned char bytes[kLaunchParamBytes];
};

__global__ void empty_kernel_with_params(const __grid_constant__ LaunchParams) {}

}  // namespace

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_empty_kernel_ex(cudaStream_t stream, bool large_params, bool programmatic,
                                   unsigned cluster) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(cluster > 1 ? cluster : 1);
  config.blockDim = dim3(32);
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (programmatic) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  static LaunchParams params{};
  void* args[] = {&params};
  const void* kernel = large_params ? reinterpret_cast<const void*>(empty_kernel_with_params)
                                    : reinterpret_cast<const void*>(empty_kernel);
  return cudaLaunchKernelExC(&config, kernel, large_params ? args : nullptr);
}

}  // namespace peerplan::bench
