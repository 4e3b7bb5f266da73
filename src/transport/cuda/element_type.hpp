// SPDX-License-Identifier: Apache-2.0
// The kernels' element type of a peerplan dtype (the kernels keep an enum of
// their own, apart from the public API). C++17, for the benchmarks' .cu too.
#pragma once

#include "collective_kernels.hpp"
#include "peerplan/dtype.hpp"

namespace peerplan::transport::cuda {

inline cuda_kernels::ElementType element_type(DataType dtype) noexcept {
  switch (dtype) {
    case DataType::f16:
      return cuda_kernels::ElementType::f16;
    case DataType::bf16:
      return cuda_kernels::ElementType::bf16;
    case DataType::f32:
      break;
  }
  return cuda_kernels::ElementType::f32;
}

}  // namespace peerplan::transport::cuda
