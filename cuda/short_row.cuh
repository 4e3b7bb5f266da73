// SPDX-License-Identifier: Apache-2.0
// What the fused kernels' short-row twins (fused_ll_short.cu,
// fused_lamport_short.cu) share: the rows a cluster takes and the one pack
// of each row a thread holds, in 32 bits. The pack is row_part's
// (rms_norm_row.cuh), so the twins and the general kernels give each pack
// to the same thread.
#pragma once

#include <cstdint>
#include <type_traits>

#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "rms_norm_row.cuh"

namespace peerplan::cuda_kernels {

// The most packs a short row has: one for every thread of a cluster.
inline constexpr std::int64_t kShortRowMaxPacks = std::int64_t{kRowSplits} * kSplitThreads;

struct ShortRowThread {
  int units;      // clusters of the grid: the step from one of a cluster's rows to its next
  int unit;       // this cluster's first row
  int packs;      // packs of a row
  int pack;       // this thread's pack of every row
  bool has_pack;  // false past the row's end (the thread still joins the row's exchange)
};

// `split`: the block's rank in its cluster; `V`: elements per pack.
__device__ __forceinline__ ShortRowThread short_row_thread(int split, std::int64_t hidden, int V) {
  ShortRowThread t;
  t.units = static_cast<int>(gridDim.x) / kRowSplits;
  t.unit = static_cast<int>(blockIdx.x) / kRowSplits;
  t.packs = static_cast<int>(hidden / V);
  const int per_split = (t.packs + kRowSplits - 1) / kRowSplits;
  const int first = min(t.packs, split * per_split);
  t.pack = first + static_cast<int>(threadIdx.x);
  t.has_pack = t.pack < min(t.packs, first + per_split);
  return t;
}

namespace detail {

// kernel_of(tag, ranks): the kernel instantiated for the element type of
// `tag` and for exactly two ranks (ranks.value == 2) or any size (0).
template <class KernelOf>
const void* kernel_for_ranks(ElementType type, bool two_ranks, KernelOf&& kernel_of) {
  const void* kernel = nullptr;
  with_element_type(type, [&](auto tag) {
    kernel = two_ranks
                 ? reinterpret_cast<const void*>(kernel_of(tag, std::integral_constant<int, 2>{}))
                 : reinterpret_cast<const void*>(kernel_of(tag, std::integral_constant<int, 0>{}));
  });
  return kernel;
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
