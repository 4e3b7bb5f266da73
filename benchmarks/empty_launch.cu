// SPDX-License-Identifier: Apache-2.0
#include "empty_launch.hpp"

namespace peerplan::bench {
namespace {

__global__ void empty_kernel() {}

}  // namespace

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

}  // namespace peerplan::bench
