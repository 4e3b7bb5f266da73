// SPDX-License-Identifier: Apache-2.0
// What the fused kernels' short-row twins (fused_ll_short.cu,
// fused_lamport_short.cu) share: the rows a cluster takes and the packs of
// each row a thread holds, in 32 bits, the call's start and the weight's
// packs. The packs are row_part's
// (rms_norm_row.cuh), so the twins and the general kernels give each pack
// to the same thread.
#pragma once

#include <cstdint>
#include <type_traits>

#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "rms_norm_row.cuh"

namespace peerplan::cuda_kernels {

// Threads of a cluster: a row's packs when each thread holds one.
inline constexpr std::int64_t kClusterThreads = std::int64_t{kRowSplits} * kSplitThreads;
// The most packs a short row has: as many a thread as the general kernels
// keep in registers (kKeptPacks), so the two keep the same packs.
inline constexpr std::int64_t kShortRowMaxPacks = kClusterThreads * kKeptPacks;
static_assert(kKeptPacks == 2, "the twins are instantiated for one and for two packs a thread");

// The packs a thread holds of a short row of `packs` (at most kShortRowMaxPacks).
constexpr int short_row_packs_per_thread(std::int64_t packs) {
  return packs <= kClusterThreads ? 1 : 2;
}

struct ShortRowThread {
  int units;  // clusters of the grid: the step from one of a cluster's rows to its next
  int unit;   // this cluster's first row
  int packs;  // packs of a row
  int pack;   // this thread's first pack of every row; its k-th is pack + k * kSplitThreads
  int end;    // the end of its split's packs
  // Whether the thread holds a k-th pack (a thread without one still joins
  // the row's exchange of sums).
  __device__ int pack_of(int k) const { return pack + k * kSplitThreads; }
  __device__ bool has(int k) const { return pack_of(k) < end; }
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
  t.end = min(t.packs, first + per_split);
  return t;
}

// The start both twins make: this thread's packs of its cluster's first row
// (`input_pack(row, k)`; zero where it holds none), loaded while begin_call
// reads the epoch, then the call's epoch. False where the transport is
// broken (begin_call).
template <int kPacks, class Rows, class InputPack>
__device__ __forceinline__ bool begin_short_rows(const PeerSet& p, const ShortRowThread& me,
                                                 Rows rows, InputPack&& input_pack,
                                                 uint4 (&early)[kPacks], std::uint32_t& epoch) {
  wait_for_previous_kernel();
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    early[k] = make_uint4(0u, 0u, 0u, 0u);
    if (me.has(k) && me.unit < rows) early[k] = input_pack(me.unit, k);
  }
  return begin_call(p, epoch);
}

// This thread's packs of the norm's weight, the same for every row.
template <class T, int kPacks>
__device__ __forceinline__ void load_short_row_weight(const ShortRowThread& me, const T* weight,
                                                      Pack<T> (&w)[kPacks]) {
  constexpr int V = Pack<T>::kCount;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if (me.has(k)) w[k].raw = *reinterpret_cast<const uint4*>(weight + me.pack_of(k) * V);
  }
}

namespace detail {

// kernel_of(tag, ranks, packs): the kernel instantiated for the element
// type of `tag`, for exactly two ranks (ranks.value == 2) or any size (0),
// and for `packs_per_thread` (1 or 2) packs a thread.
template <class KernelOf>
const void* short_kernel_for(ElementType type, bool two_ranks, int packs_per_thread,
                             KernelOf&& kernel_of) {
  const void* kernel = nullptr;
  with_element_type(type, [&](auto tag) {
    auto with_packs = [&](auto packs) {
      kernel = two_ranks ? reinterpret_cast<const void*>(
                               kernel_of(tag, std::integral_constant<int, 2>{}, packs))
                         : reinterpret_cast<const void*>(
                               kernel_of(tag, std::integral_constant<int, 0>{}, packs));
    };
    if (packs_per_thread == 1)
      with_packs(std::integral_constant<int, 1>{});
    else
      with_packs(std::integral_constant<int, 2>{});
  });
  return kernel;
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
