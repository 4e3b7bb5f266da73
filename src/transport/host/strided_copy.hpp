// SPDX-License-Identifier: Apache-2.0
// Copies between a strided tensor (TensorLayout: shape and element strides,
// up to kMaxRank dimensions) and a contiguous staging buffer, in row-major
// logical order. The transports stage every message contiguously, so these
// are the only places that know about strides. Uses only the inline
// accessors of TensorLayout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "peerplan/layout.hpp"

namespace peerplan::transport::host {

// True when element i (row-major) lives at offset i, i.e. a plain memcpy
// moves the tensor. Strides of size-1 dimensions do not matter.
bool is_dense(const TensorLayout& layout) noexcept;

// Elements [first, first + count) of the tensor (row-major logical order)
// to/from `count` contiguous elements. `element_bytes` is 2 or 4.
void pack_range(const TensorLayout& layout, std::size_t element_bytes, const void* tensor,
                std::int64_t first, std::int64_t count, void* contiguous);
void unpack_range(const TensorLayout& layout, std::size_t element_bytes, const void* contiguous,
                  std::int64_t first, std::int64_t count, void* tensor);

// The whole tensor.
inline void pack(const TensorLayout& layout, std::size_t element_bytes, const void* tensor,
                 void* contiguous) {
  pack_range(layout, element_bytes, tensor, 0, layout.numel(), contiguous);
}
inline void unpack(const TensorLayout& layout, std::size_t element_bytes, const void* contiguous,
                   void* tensor) {
  unpack_range(layout, element_bytes, contiguous, 0, layout.numel(), tensor);
}

// Element offset (in elements, may be negative for negative strides) of row
// `row` of the tensor, a row being the last dimension.
std::int64_t row_offset(const TensorLayout& layout, std::int64_t row) noexcept;

}  // namespace peerplan::transport::host
