// SPDX-License-Identifier: Apache-2.0
#include "transport/host/strided_copy.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace peerplan::transport::host {

bool is_dense(const TensorLayout& layout) noexcept {
  std::int64_t expected = 1;
  for (int d = layout.rank() - 1; d >= 0; --d) {
    if (layout.dim(d) == 1) continue;
    if (layout.stride(d) != expected) return false;
    expected *= layout.dim(d);
  }
  return true;
}

std::int64_t row_offset(const TensorLayout& layout, std::int64_t row) noexcept {
  std::int64_t offset = 0;
  for (int d = layout.rank() - 2; d >= 0; --d) {
    const std::int64_t extent = layout.dim(d);
    offset += (row % extent) * layout.stride(d);
    row /= extent;
  }
  return offset;
}

namespace {

// Walks elements [first, first + count) in row-major order, calling
// copy_run(tensor_offset, inner_stride, logical_index, run_length) for each
// stretch along the innermost dimension.
template <class CopyRun>
void for_each_run(const TensorLayout& layout, std::int64_t first, std::int64_t count,
                  CopyRun&& copy_run) {
  const int rank = layout.rank();
  if (count <= 0) return;
  if (rank == 0) {
    copy_run(std::int64_t{0}, std::int64_t{1}, std::int64_t{0}, std::int64_t{1});
    return;
  }
  std::array<std::int64_t, kMaxRank> index{};
  std::int64_t rest = first;
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = rest % layout.dim(d);
    rest /= layout.dim(d);
  }
  const int inner = rank - 1;
  const std::int64_t inner_extent = layout.dim(inner);
  std::int64_t logical = first;
  const std::int64_t end = first + count;
  while (logical < end) {
    std::int64_t offset = 0;
    for (int d = 0; d < rank; ++d) offset += index[d] * layout.stride(d);
    const std::int64_t run = std::min(inner_extent - index[inner], end - logical);
    copy_run(offset, layout.stride(inner), logical - first, run);
    logical += run;
    // Advance the multi-index to the start of the next row.
    index[inner] = 0;
    for (int d = inner - 1; d >= 0; --d) {
      if (++index[d] < layout.dim(d)) break;
      index[d] = 0;
    }
  }
}

// Copies n elements of Bytes bytes between two byte strides.
template <std::size_t Bytes>
void copy_elements(const std::byte* from, std::int64_t from_step, std::byte* to,
                   std::int64_t to_step, std::int64_t n) {
  constexpr auto unit = static_cast<std::int64_t>(Bytes);
  if (n == 1 || (from_step == unit && to_step == unit)) {
    std::memcpy(to, from, static_cast<std::size_t>(n) * Bytes);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(to + i * to_step, from + i * from_step, Bytes);
}

template <std::size_t Bytes, bool ToContiguous>
void strided_copy(const TensorLayout& layout, const void* source, std::int64_t first,
                  std::int64_t count, void* target) {
  constexpr auto unit = static_cast<std::int64_t>(Bytes);
  for_each_run(
      layout, first, count,
      [&](std::int64_t offset, std::int64_t stride, std::int64_t pos, std::int64_t run) {
        if constexpr (ToContiguous) {
          copy_elements<Bytes>(static_cast<const std::byte*>(source) + offset * unit, stride * unit,
                               static_cast<std::byte*>(target) + pos * unit, unit, run);
        } else {
          copy_elements<Bytes>(static_cast<const std::byte*>(source) + pos * unit, unit,
                               static_cast<std::byte*>(target) + offset * unit, stride * unit, run);
        }
      });
}

template <bool ToContiguous>
void dispatch_copy(const TensorLayout& layout, std::size_t element_bytes, const void* from,
                   std::int64_t first, std::int64_t count, void* to) {
  if (count <= 0) return;
  if (is_dense(layout)) {  // fast path: one memcpy
    const auto bytes = static_cast<std::size_t>(count) * element_bytes;
    const auto skip = static_cast<std::size_t>(first) * element_bytes;
    if (ToContiguous)
      std::memcpy(to, static_cast<const std::byte*>(from) + skip, bytes);
    else
      std::memcpy(static_cast<std::byte*>(to) + skip, from, bytes);
    return;
  }
  if (element_bytes == 2)
    strided_copy<2, ToContiguous>(layout, from, first, count, to);
  else
    strided_copy<4, ToContiguous>(layout, from, first, count, to);
}

}  // namespace

void pack_range(const TensorLayout& layout, std::size_t element_bytes, const void* tensor,
                std::int64_t first, std::int64_t count, void* contiguous) {
  dispatch_copy<true>(layout, element_bytes, tensor, first, count, contiguous);
}

void unpack_range(const TensorLayout& layout, std::size_t element_bytes, const void* contiguous,
                  std::int64_t first, std::int64_t count, void* tensor) {
  dispatch_copy<false>(layout, element_bytes, contiguous, first, count, tensor);
}

}  // namespace peerplan::transport::host
