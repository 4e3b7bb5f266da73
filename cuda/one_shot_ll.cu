// SPDX-License-Identifier: Apache-2.0
// The push one-shot all-reduce on LL lines (ll_lines.cuh): every rank
// writes its whole input, as lines, into sub-slot <own rank> of every
// rank's slot, then sums the lines of every source as they arrive - no
// flag barrier. Its twin on the Lamport protocol is one_shot_lamport.cu.
// Sums are fp32 in fixed rank order 0..n-1 with one rounding, so every
// rank's output is bit-identical. Peer slots are read 16 bytes at a time;
// the caller's tensors use 16-byte accesses only where this rank's pointer
// is aligned (a local choice: it never changes what is exchanged), element
// by element otherwise. An instantiation for exactly two ranks runs beside
// the general one (one_shot_ll_step).
#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "ll_lines.cuh"
#include "rank_loop.cuh"
#include "recipe_steps.cuh"

namespace peerplan::cuda_kernels {
namespace {

// kRanks: 2 for exactly two ranks, 0 for any size (rank_loop.cuh). Launched
// with kOneShotLlThreads threads; bounded for kThreads, which leaves ptxas
// the register budget the kernel was measured with.
template <class T, int kRanks>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(const __grid_constant__ PeerSet p, const T* in, T* out,
                    const __grid_constant__ KernelLayout layout, std::int64_t count) {
  constexpr int kRankBound = RankLoop<kRanks>::kBound;
  const int ranks = RankLoop<kRanks>::count(p.size);
  constexpr int E = 8 / sizeof(T);  // elements per line
  const std::int64_t lines = (count + E - 1) / E;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_vec = layout.dense && (reinterpret_cast<std::uintptr_t>(in) & 7u) == 0;
  const bool out_vec = layout.dense && (reinterpret_cast<std::uintptr_t>(out) & 7u) == 0;
  auto load_input = [&](std::int64_t i) {
    Half8<T> data;
    data.raw = make_uint2(0u, 0u);
    if (i >= lines) return data;
    if (in_vec && (i + 1) * E <= count) {
      data.raw = *reinterpret_cast<const uint2*>(in + i * E);
    } else {
      for (int k = 0; k < E && i * E + k < count; ++k) data.v[k] = in[offset_of(layout, i * E + k)];
    }
    return data;
  };

  // The first line's input load is in flight while begin_call reads the
  // epoch (a small message is one line per thread: one latency, not two).
  wait_for_previous_kernel();
  const Half8<T> first = load_input(begin);
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;

  for (std::int64_t i = begin; i < lines; i += stride) {
    const Half8<T> data = i == begin ? first : load_input(i);
    for (int q = 0; q < ranks; ++q) {
      store_line(data_of<uint4>(p, q, p.rank, epoch) + i, data.raw, epoch);
    }
  }

  // Each thread takes kLinesAtOnce of its lines from every source per
  // step: all those loads are in flight together, then each line is summed
  // (waiting only for lines that had not arrived).
  constexpr int kLinesAtOnce = 2;
  bool ok = true;
  for (std::int64_t i = begin; ok && i < lines; i += kLinesAtOnce * stride) {
    uint4 seen[kLinesAtOnce][kRankBound];
#pragma unroll
    for (int u = 0; u < kLinesAtOnce; ++u) {
      const std::int64_t line = i + u * stride;
#pragma unroll
      for (int r = 0; r < kRankBound; ++r) {
        if (r < ranks && line < lines)
          seen[u][r] = load_volatile_pack(data_of<uint4>(p, p.rank, r, epoch) + line);
      }
    }
#pragma unroll
    for (int u = 0; u < kLinesAtOnce; ++u) {
      const std::int64_t line = i + u * stride;
      if (!ok || line >= lines) break;
      float acc[E];
#pragma unroll
      for (int k = 0; k < E; ++k) acc[k] = 0.0f;
#pragma unroll
      for (int r = 0; r < kRankBound; ++r) {
        if (r >= ranks) break;
        Half8<T> data;
        if (!take_line(p, data_of<uint4>(p, p.rank, r, epoch) + line, seen[u][r], r, epoch,
                       data.raw)) {
          ok = false;
          break;
        }
#pragma unroll
        for (int k = 0; k < E; ++k) acc[k] = __fadd_rn(acc[k], to_float(data.v[k]));
      }
      if (!ok) break;
      Half8<T> sum;
#pragma unroll
      for (int k = 0; k < E; ++k) sum.v[k] = from_float<T>(acc[k]);
      if (out_vec && (line + 1) * E <= count) {
        *reinterpret_cast<uint2*>(out + line * E) = sum.raw;
      } else {
        for (int k = 0; k < E && line * E + k < count; ++k)
          out[offset_of(layout, line * E + k)] = sum.v[k];
      }
    }
  }
}

}  // namespace

namespace detail {

// No per-block flags: the grid size is this rank's choice (a line of 8
// data bytes per thread, kOneShotLlThreads a block, up to the one-shot's
// largest grid).
KernelStep one_shot_ll_step(const PeerSet& shape, ElementType type, std::int64_t count) {
  return grid_step(
      type,
      [&](auto tag) {
        using T = decltype(tag);
        return shape.size == 2 ? one_shot_kernel<T, 2> : one_shot_kernel<T, 0>;
      },
      [&](auto tag) {
        constexpr std::int64_t kPerLine = 8 / sizeof(tag);
        return (count + kPerLine - 1) / kPerLine;
      },
      shape.one_shot_max_blocks, shape.overlap_launch, kOneShotLlThreads);
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
