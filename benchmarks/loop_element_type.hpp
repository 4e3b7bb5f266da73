// SPDX-License-Identifier: Apache-2.0
// The kernels' element type of a benchmark dtype (kernel_loop.cu,
// row_norm_bench.cu).
#pragma once

#include "collective_kernels.hpp"
#include "kernel_loop_reference.hpp"

namespace peerplan::bench::loop {

inline cuda_kernels::ElementType element_type(LoopDtype dtype) {
  switch (dtype) {
    case LoopDtype::f16:
      return cuda_kernels::ElementType::f16;
    case LoopDtype::bf16:
      return cuda_kernels::ElementType::bf16;
    case LoopDtype::f32:
      break;
  }
  return cuda_kernels::ElementType::f32;
}

}  // namespace peerplan::bench::loop
