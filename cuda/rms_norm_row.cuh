// Residual add + RMSNorm of one row, shared by the fused kernels and the
// fallback's standalone kernel, with one rounding order for all of them.
//
// A row is cut into kRowSplits contiguous ranges of packs ("splits"); thread
// t of split k handles packs first_k + t, first_k + t + kSplitThreads, ...
// The sum of squares is added up in a fixed order: each thread over its
// packs in order, a warp by a fixed xor tree, a split's warps in order,
// then the splits in order. That order is the same whether the splits
// are one block of kRowThreads threads (RowInBlock: the fallback, the
// staged fused kernel, GPUs without clusters) or a cluster of kRowSplits
// blocks, one split each, exchanging their partial sums through
// distributed shared memory (RowInCluster: the LL fused kernel on sm_90+,
// where a short row's loads and peer waits spread over kRowSplits SMs
// instead of one). So every path gives the same bits.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>
#include <type_traits>

#include "element_ops.cuh"
#include "launch_shape.cuh"

namespace peerplan::cuda_kernels {

// Element offset of the first element of row `row` (the last dimension).
__device__ __forceinline__ std::int64_t row_offset(const KernelLayout& layout, std::int64_t row,
                                                   std::int64_t hidden) {
  return layout.dense ? row * hidden : offset_over(layout, row, layout.rank - 1);
}

// Packs of one row: 16-byte accesses when the row is a whole number of
// packs and the pointer is aligned, element by element otherwise (zeros
// past `hidden`). The elements of a pack are handled in order either way,
// so the arithmetic - and every rounding - is the same on both paths.
template <class T>
__device__ __forceinline__ Pack<T> load_row_pack(const T* row, std::int64_t first,
                                                 std::int64_t hidden, bool vec) {
  Pack<T> pack;
  if (vec) {
    pack.raw = *reinterpret_cast<const uint4*>(row + first);
    return pack;
  }
  for (int k = 0; k < Pack<T>::kCount && first + k < hidden; ++k) pack.v[k] = row[first + k];
  return pack;
}

template <class T>
__device__ __forceinline__ void store_row_pack(T* row, std::int64_t first, std::int64_t hidden,
                                               bool vec, const Pack<T>& pack) {
  if (vec) {
    *reinterpret_cast<uint4*>(row + first) = pack.raw;
    return;
  }
  for (int k = 0; k < Pack<T>::kCount && first + k < hidden; ++k) row[first + k] = pack.v[k];
}

// Which split of a row this thread works on, and which packs that is.
struct RowPart {
  int split;   // 0 .. kRowSplits - 1
  int thread;  // 0 .. kSplitThreads - 1
  std::int64_t first_pack;
  std::int64_t end_pack;
};

__device__ __forceinline__ RowPart row_part(int split, int thread, std::int64_t packs) {
  const std::int64_t per_split = (packs + kRowSplits - 1) / kRowSplits;
  const std::int64_t first = std::min<std::int64_t>(packs, split * per_split);
  return {split, thread, first, std::min<std::int64_t>(packs, first + per_split)};
}

__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = __fadd_rn(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

inline constexpr int kSplitWarps = kSplitThreads / 32;

// Every split in one block of kRowThreads threads.
class RowInBlock {
 public:
  __device__ explicit RowInBlock(float* scratch) : scratch_(scratch) {}
  __device__ int split() const { return static_cast<int>(threadIdx.x) / kSplitThreads; }
  __device__ int thread() const { return static_cast<int>(threadIdx.x) % kSplitThreads; }
  // The row's sum of squares in the fixed order; `failed` becomes true on
  // every thread when it was true on any. Ends with a block barrier.
  __device__ float row_total(float squares, bool& failed) {
    squares = warp_sum(squares);
    if ((threadIdx.x & 31) == 0) scratch_[threadIdx.x / 32] = squares;
    failed = __syncthreads_or(failed) != 0;
    float total = 0.0f;
    for (int k = 0; k < kRowSplits; ++k) {
      float part = 0.0f;
      for (int w = 0; w < kSplitWarps; ++w) part = __fadd_rn(part, scratch_[k * kSplitWarps + w]);
      total = __fadd_rn(total, part);
    }
    __syncthreads();  // scratch is reused by the next row
    return total;
  }

 private:
  float* scratch_;  // kRowThreads / 32 floats of shared memory
};

// One split per block, kRowSplits blocks per cluster (sm_90+).
class RowInCluster {
 public:
  // `exchange`: shared memory of this block, 2 x kRowSplits floats and as
  // many ints, written by every block of the cluster (two parities, so a
  // block may run ahead into the next row while others still read this one).
  // A block may write into a sibling's shared memory only once that
  // sibling has started: every thread arrives at a cluster barrier here
  // and waits for it just before its first remote write, by when the
  // others have long arrived (the row's loads and peer waits lie between).
  __device__ RowInCluster(float* scratch, float* partials, int* failures)
      : scratch_(scratch), partials_(partials), failures_(failures) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
  }
  __device__ int split() const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    return static_cast<int>(cooperative_groups::this_cluster().block_rank());
#else
    return 0;
#endif
  }
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ float row_total(float squares, bool& failed) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    auto cluster = cooperative_groups::this_cluster();
    squares = warp_sum(squares);
    if ((threadIdx.x & 31) == 0) scratch_[threadIdx.x / 32] = squares;
    const int block_failed = __syncthreads_or(failed);
    const int me = static_cast<int>(cluster.block_rank());
    const int slot = parity_ * kRowSplits + me;
    if (!siblings_started_) {
      asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
      siblings_started_ = true;
    }
    if (threadIdx.x < kRowSplits) {
      float part = 0.0f;
      for (int w = 0; w < kSplitWarps; ++w) part = __fadd_rn(part, scratch_[w]);
      // Thread q hands this split's partial to block q of the cluster.
      *cluster.map_shared_rank(&partials_[slot], threadIdx.x) = part;
      *cluster.map_shared_rank(&failures_[slot], threadIdx.x) = block_failed;
    }
    cluster.sync();  // release/acquire: every block's partial has landed
    float total = 0.0f;
    int any_failed = 0;
    for (int k = 0; k < kRowSplits; ++k) {
      total = __fadd_rn(total, partials_[parity_ * kRowSplits + k]);
      any_failed |= failures_[parity_ * kRowSplits + k];
    }
    parity_ ^= 1;
    failed = any_failed != 0;
    return total;
#else
    __trap();  // launched only where rows_in_clusters_supported()
    return squares;
#endif
  }

 private:
  float* scratch_;  // kSplitWarps floats
  float* partials_;
  int* failures_;
  int parity_ = 0;
  bool siblings_started_ = false;
};

// Shared memory of a row kernel's block, for either kind of row.
struct RowShared {
  float scratch[kRowThreads / 32];
  float partials[2 * kRowSplits];
  int failures[2 * kRowSplits];
};

// How a row kernel's blocks share out rows: kCluster, a row per cluster of
// kRowSplits blocks (RowInCluster); else a row per block (RowInBlock).
template <bool kCluster>
struct RowWorkers {
  using Row = std::conditional_t<kCluster, RowInCluster, RowInBlock>;
  __device__ static Row row(RowShared& shared) {
    if constexpr (kCluster) return RowInCluster(shared.scratch, shared.partials, shared.failures);
    else return RowInBlock(shared.scratch);
  }
  // This block's first row, and the step to its next.
  __device__ static int first_row() { return kCluster ? blockIdx.x / kRowSplits : blockIdx.x; }
  __device__ static int row_step() { return kCluster ? gridDim.x / kRowSplits : gridDim.x; }
};

// Residual add + RMSNorm of this thread's packs of one row (the rounding of
// src/transport/host/rms_norm.hpp):
//   r = round(s + residual) -> residual; var = mean(r^2) (fp32);
//   out = round(r * (1 / sqrt(var + eps)) * weight) -> out.
// `sum_pack(first, s)` fills s[k] with the rounded all-reduced value of
// element first + k as a float and returns false when its data never came:
// then no output of the row is written (residuals already updated from
// data that did come stay), the row's barrier is still reached, and the
// function returns false on every thread of the row (block or cluster);
// the caller gives up after it.
// No contraction into FMAs. `row` is RowInBlock or RowInCluster.
template <class T, class SumPack, class Row>
__device__ bool add_rms_norm_part(SumPack sum_pack, T* residual, const T* weight, T* out,
                                  std::int64_t hidden, float eps, Row& row) {
  constexpr int V = Pack<T>::kCount;
  // A thread's first kKept packs stay in registers between the two passes,
  // with their weights and old residuals loaded before the wait for the
  // sums: no reload on the latency-bound path of short rows.
  constexpr int kKept = 2;
  const std::int64_t packs = (hidden + V - 1) / V;
  const RowPart part = row_part(row.split(), row.thread(), packs);
  const bool whole = hidden % V == 0;
  const bool residual_vec = whole && aligned16(residual);
  const bool out_vec = whole && aligned16(out) && aligned16(weight) && residual_vec;
  float squares = 0.0f;
  bool ok = true;
  auto add_residual = [&](std::int64_t j, const Pack<T>& old, Pack<T>& r) {
    const std::int64_t first = j * V;
    float s[V];
    ok = sum_pack(first, s) && ok;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (first + k >= hidden) break;
      r.v[k] = from_float<T>(__fadd_rn(s[k], to_float(old.v[k])));
      const float rf = to_float(r.v[k]);
      squares = __fadd_rn(squares, __fmul_rn(rf, rf));
    }
    if (ok) store_row_pack(residual, first, hidden, residual_vec, r);  // never a made-up value
  };
  auto pack_index = [&](int it) {
    return part.first_pack + part.thread + static_cast<std::int64_t>(it) * kSplitThreads;
  };
  Pack<T> kept_r[kKept], kept_w[kKept];
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    const std::int64_t j = pack_index(it);
    if (j < part.end_pack) {
      kept_w[it] = load_row_pack(weight, j * V, hidden, out_vec);
      kept_r[it] = load_row_pack(static_cast<const T*>(residual), j * V, hidden, residual_vec);
    }
  }
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    const std::int64_t j = pack_index(it);
    if (j < part.end_pack) add_residual(j, kept_r[it], kept_r[it]);
  }
  for (std::int64_t j = pack_index(kKept); j < part.end_pack; j += kSplitThreads) {
    Pack<T> r;
    add_residual(j, load_row_pack(static_cast<const T*>(residual), j * V, hidden, residual_vec), r);
  }
  bool failed = !ok;
  const float total = row.row_total(squares, failed);
  if (failed) return false;  // every thread of the row alike
  const float variance = __fdiv_rn(total, static_cast<float>(hidden));
  const float inv_rms = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));
  auto normalize = [&](std::int64_t j, const Pack<T>& r, const Pack<T>& w) {
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      o.v[k] = from_float<T>(__fmul_rn(__fmul_rn(to_float(r.v[k]), inv_rms), to_float(w.v[k])));
    }
    store_row_pack(out, j * V, hidden, out_vec, o);
  };
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    const std::int64_t j = pack_index(it);
    if (j < part.end_pack) normalize(j, kept_r[it], kept_w[it]);
  }
  for (std::int64_t j = pack_index(kKept); j < part.end_pack; j += kSplitThreads) {
    normalize(j, load_row_pack(static_cast<const T*>(residual), j * V, hidden, out_vec),
              load_row_pack(weight, j * V, hidden, out_vec));
  }
  return true;
}

}  // namespace peerplan::cuda_kernels
