// SPDX-License-Identifier: Apache-2.0
// Conversions from the transport's arguments to the kernels'.
#pragma once

#include <cstdint>

#include "collective_kernels.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/layout.hpp"
#include "transport/cuda/element_type.hpp"

namespace peerplan::transport::cuda {

// Dense: element i at offset i, i.e. contiguous once size-1 dimensions'
// strides are ignored.
inline cuda_kernels::KernelLayout kernel_layout(const TensorLayout& layout) noexcept {
  cuda_kernels::KernelLayout k;
  k.rank = layout.rank();
  k.dense = layout.is_contiguous() ? 1 : 0;
  for (int i = 0; i < layout.rank(); ++i) {
    k.dims[i] = layout.dim(i);
    k.strides[i] = layout.stride(i);
  }
  return k;
}

}  // namespace peerplan::transport::cuda
