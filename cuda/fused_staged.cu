// SPDX-License-Identifier: Apache-2.0
// The fused all-reduce + residual add + RMSNorm on staged packs: every rank
// pushes its rows into every rank's slot, a per-block flag barrier, then
// each block reduces its rows from local memory and runs the row function
// (rms_norm_row.cuh). Any row length and layout; the choice for rows that
// are not whole 16-byte packs on a non-dense layout. Twins: fused_ll.cu (LL
// lines), fused_lamport.cu (Lamport region), and two_shot.cu + row_norm.cu
// (dense messages too large for the others).
// Sums are fp32 in fixed rank order 0..n-1 with one rounding, so every
// rank's output is bit-identical. Peer slots are read 16 bytes at a time;
// the caller's tensors use 16-byte accesses only where this rank's pointer
// is aligned (a local choice: it never changes what is exchanged), element
// by element otherwise.
#include <algorithm>
#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "recipe_steps.cuh"
#include "rms_norm_row.cuh"

namespace peerplan::cuda_kernels {
namespace {

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    fused_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual, const T* weight,
                 float eps, const __grid_constant__ KernelLayout layout, std::int64_t rows,
                 std::int64_t hidden) {
  __shared__ float scratch[kRowThreads / 32];
  constexpr int V = Pack<T>::kCount;
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  Signals* own = signals_of(p, p.rank);

  // Rows are packed back to back from a 256-byte aligned sub-slot start, so
  // they are 16-byte aligned exactly when a row is a whole number of packs.
  // Every rank pushes its rows into every slot; the reduction reads locally.
  const bool whole = hidden % V == 0;
  const std::int64_t packs = (hidden + V - 1) / V;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* src = inout + row_offset(layout, row, hidden);
    const bool vec = whole && aligned16(src);
    for (std::int64_t j = threadIdx.x; j < packs; j += blockDim.x) {
      const Pack<T> pack = load_row_pack(src, j * V, hidden, vec);
      for (int q = 0; q < p.size; ++q) {
        store_row_pack(data_of<T>(p, q, p.rank, epoch) + row * hidden, j * V, hidden, whole, pack);
      }
    }
  }
  __syncthreads();
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, own->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) return;

  RowInBlock row_sum(scratch);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::int64_t base = row * hidden;
    auto sum_pack = [&](std::int64_t first, float(&s)[V]) {
      float acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = 0.0f;
      for (int r = 0; r < p.size; ++r) {
        const Pack<T> in =
            load_row_pack(data_of<T>(p, p.rank, r, epoch) + base, first, hidden, whole);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = __fadd_rn(acc[k], to_float(in.v[k]));
      }
      round_to_element<T>(acc, s);
      return true;
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    add_rms_norm_part<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps, row_sum);
  }
}

}  // namespace

namespace detail {

KernelStep fused_staged_step(const PeerSet& shape, ElementType type, std::int64_t rows) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    step.kernel = reinterpret_cast<const void*>(fused_kernel<T>);
  });
  step.blocks = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxBlocks));
  step.threads = kRowThreads;
  step.programmatic = shape.overlap_launch;
  return step;
}

}  // namespace detail

}  // namespace peerplan::cuda_kernels
