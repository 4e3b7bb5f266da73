// SPDX-License-Identifier: Apache-2.0
// Residual add + RMSNorm of one row, shared by the fused kernels and the
// fallback's standalone kernel, with one rounding order for all of them.
//
// A row is cut into kRowSplits contiguous ranges of packs ("splits"); thread
// t of split k handles packs first_k + t, first_k + t + kSplitThreads, ...
// The sum of squares is added up in a fixed order: each thread over its
// packs in order, a warp by a fixed xor tree, a split's warps in order,
// then the splits by a fixed xor tree (splits_sum). That order is the same
// whether the splits are one block of kRowThreads threads (RowInBlock: the
// fallback, the staged fused kernel, GPUs without clusters) or a cluster of
// kRowSplits blocks, one split each, exchanging their partial sums through
// distributed shared memory (RowInCluster: the LL and Lamport fused kernels
// on sm_90+, where a short row's loads and peer waits spread over
// kRowSplits SMs instead of one). So every path gives the same bits.
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
  // Unrolled with a guard (not a loop bound): constant indices keep the
  // pack in registers instead of local memory.
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) {
    if (first + k < hidden) pack.v[k] = row[first + k];
  }
  return pack;
}

template <class T>
__device__ __forceinline__ void store_row_pack(T* row, std::int64_t first, std::int64_t hidden,
                                               bool vec, const Pack<T>& pack) {
  if (vec) {
    *reinterpret_cast<uint4*>(row + first) = pack.raw;
    return;
  }
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) {
    if (first + k < hidden) row[first + k] = pack.v[k];
  }
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
static_assert((kRowSplits & (kRowSplits - 1)) == 0 && kRowSplits <= 32,
              "a split's sum per lane, the splits by a xor tree within a warp");

// The row's total from each split's sum, lane l holding split l % kRowSplits's:
// a fixed xor tree over the splits, the same bits in every lane (each step
// adds the same two values). A tree, not a chain: three dependent adds
// instead of eight, and each warp sums a split's kSplitWarps partials, not
// all of the row's.
__device__ __forceinline__ float splits_sum(float part) {
#pragma unroll
  for (int offset = kRowSplits / 2; offset > 0; offset >>= 1) {
    part = __fadd_rn(part, __shfl_xor_sync(0xffffffffu, part, offset));
  }
  return part;
}

// Every split in one block of kRowThreads threads.
class RowInBlock {
 public:
  __device__ explicit RowInBlock(float* scratch) : scratch_(scratch) {}
  __device__ int split() const { return static_cast<int>(threadIdx.x) / kSplitThreads; }
  __device__ int thread() const { return static_cast<int>(threadIdx.x) % kSplitThreads; }
  // The row's sum of squares in the fixed order; `failed` becomes true on
  // every thread when it was true on any. Ends with a block barrier.
  __device__ float row_total(float squares, bool& failed) {
    const float total = splits_sum(split_part(squares, failed));
    __syncthreads();  // scratch is reused by the next row
    return total;
  }
  // The same total for a block that keeps this object across its rows,
  // with one barrier a row, not two: successive rows take the two halves
  // of a scratch of 2 x kRowThreads / 32 floats at a 256-byte boundary
  // (RowShared's) in turn. A half is written again two rows later, by a
  // thread past the next row's barrier, which every thread reaches only
  // after reading it.
  __device__ float row_total_alternating(float squares, bool& failed) {
    const float part = split_part(squares, failed);
    // The other half: its address differs in one bit (no register for a parity).
    scratch_ = reinterpret_cast<float*>(reinterpret_cast<std::uintptr_t>(scratch_) ^ kHalfBytes);
    return splits_sum(part);
  }
  static constexpr std::uintptr_t kHalfBytes = kRowThreads / 32 * sizeof(float);

 private:
  // Each warp's sum into scratch, the block barrier, then this lane's
  // split: the sum of its kSplitWarps warps, in order.
  __device__ float split_part(float squares, bool& failed) {
    squares = warp_sum(squares);
    if ((threadIdx.x & 31) == 0) scratch_[threadIdx.x / 32] = squares;
    failed = __syncthreads_or(failed) != 0;
    const int split = static_cast<int>(threadIdx.x & 31) % kRowSplits;
    float part = 0.0f;
#pragma unroll
    for (int w = 0; w < kSplitWarps; ++w) {
      part = __fadd_rn(part, scratch_[split * kSplitWarps + w]);
    }
    return part;
  }

  float* scratch_;  // kRowThreads / 32 floats of shared memory (two halves: above)
};

// One split per block, kRowSplits blocks per cluster (sm_90+).
//
// Each warp sends its partial sum (and whether it failed) to every block of
// the cluster with st.async, an asynchronous store into the sibling's
// shared memory that also counts its bytes on the sibling's mbarrier; a
// block then waits on its own mbarrier until every warp's partial has
// landed. No fence and no whole-cluster barrier on the row's path: a
// cluster barrier's arrive with release semantics is a GPU-scope fence,
// which would first wait for the row's stores to the peers to complete.
class RowInCluster {
 public:
  // Bytes every block receives for a row: one 8-byte slot per warp of the
  // cluster.
  static constexpr unsigned kRowBytes = kRowSplits * kSplitWarps * 8;

  // `slots`: 2 x kRowSplits x kSplitWarps slots of this block's shared
  // memory, `barriers`: 2 mbarriers of it (two parities, so that a block
  // may run one row ahead into the next while others still read this one:
  // it cannot run two, having to receive every block's partial of the row
  // between).
  // A block may write into a sibling's shared memory only once that
  // sibling has started and initialised its mbarriers: every thread
  // arrives at a cluster barrier here (after thread 0's initialisation and
  // its release fence) and waits for it just before its first remote
  // write, by when the others have long arrived (the row's loads and peer
  // waits lie between).
  __device__ RowInCluster(uint2* slots, unsigned long long* barriers)
      : slots_(slots), barriers_(barriers) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
      for (int k = 0; k < 2; ++k) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&barriers_[k]))
                     : "memory");
      }
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
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
  // Each warp hands its partial (every lane holds the same bits after the
  // xor tree) straight to every block of the cluster, lane q to block q:
  // no block barrier before the exchange. The sum then takes the warps of
  // a split in order, then the splits by splits_sum, as RowInBlock does.
  __device__ float row_total(float squares, bool& failed) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    squares = warp_sum(squares);
    const int warp_failed = __any_sync(0xffffffffu, failed);
    const unsigned me = cooperative_groups::this_cluster().block_rank();
    const unsigned lane = threadIdx.x & 31u;
    const unsigned own_slot = (parity_ * kRowSplits + me) * kSplitWarps + threadIdx.x / 32u;
    const unsigned barrier = shared_address(&barriers_[parity_]);
    if (!siblings_started_) {
      asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
      siblings_started_ = true;
    }
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier),
                   "r"(kRowBytes)
                   : "memory");
    }
    if (lane < kRowSplits) {
      unsigned remote_slot, remote_barrier;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                   : "=r"(remote_slot)
                   : "r"(shared_address(&slots_[own_slot])), "r"(lane));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                   : "=r"(remote_barrier)
                   : "r"(barrier), "r"(lane));
      asm volatile(
          "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::
              "r"(remote_slot),
          "r"(__float_as_uint(squares)), "r"(static_cast<unsigned>(warp_failed)),
          "r"(remote_barrier)
          : "memory");
    }
    // Every warp's partial has landed here once this phase completes.
    const unsigned phase = (phases_ >> parity_) & 1u;
    unsigned done = 0;
    do {
      asm volatile(
          "{\n\t.reg .pred p;\n\t"
          "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
          "selp.u32 %0, 1, 0, p;\n\t}"
          : "=r"(done)
          : "r"(barrier), "r"(phase)
          : "memory");
    } while (done == 0);
    // Lanes leave the wait together; saying so keeps the shuffles below on
    // their converged path (without it ptxas copied them into the wait's
    // retry path in their divergent form).
    __syncwarp();
    phases_ ^= 1u << parity_;
    const unsigned split = lane % kRowSplits;
    float part = 0.0f;
    unsigned any_failed = 0;
#pragma unroll
    for (int w = 0; w < kSplitWarps; ++w) {
      const uint2 slot = slots_[(parity_ * kRowSplits + split) * kSplitWarps + w];
      part = __fadd_rn(part, __uint_as_float(slot.x));
      any_failed |= slot.y;
    }
    parity_ ^= 1u;
    failed = __any_sync(0xffffffffu, any_failed != 0) != 0;
    return splits_sum(part);
#else
    __trap();  // launched only where rows_in_clusters_supported()
    return squares;
#endif
  }

  // Its rows already alternate two parities: the same as row_total.
  __device__ float row_total_alternating(float squares, bool& failed) {
    return row_total(squares, failed);
  }

 private:
  static __device__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
  }

  uint2* slots_;
  unsigned long long* barriers_;
  unsigned parity_ = 0;
  unsigned phases_ = 0;  // bit k: the phase parity barriers_[k] waits for next
  bool siblings_started_ = false;
};

// Shared memory of a row kernel's block, for either kind of row.
struct RowShared {
  // Two halves for RowInBlock::row_total_alternating; row_total uses the first.
  alignas(2 * RowInBlock::kHalfBytes) float scratch[2 * kRowThreads / 32];
  uint2 slots[2 * kRowSplits * kSplitWarps];
  unsigned long long barriers[2];
};

// How a row kernel's blocks share out rows: kCluster, a row per cluster of
// kRowSplits blocks (RowInCluster); else a row per block (RowInBlock).
template <bool kCluster>
struct RowWorkers {
  using Row = std::conditional_t<kCluster, RowInCluster, RowInBlock>;
  __device__ static Row row(RowShared& shared) {
    if constexpr (kCluster)
      return RowInCluster(shared.slots, shared.barriers);
    else
      return RowInBlock(shared.scratch);
  }
  // This block's first row, and the step to its next.
  __device__ static int first_row() { return kCluster ? blockIdx.x / kRowSplits : blockIdx.x; }
  __device__ static int row_step() { return kCluster ? gridDim.x / kRowSplits : gridDim.x; }
};

// The arithmetic of a row, element by element, in the one order every row
// function uses (the steps of src/transport/host/rms_norm.hpp; the host
// adds the squares left to right and rounds 1/sqrt twice, so its bits can
// differ from these in the last place):
//   r = round(s + residual) -> residual; var = mean(r^2) (fp32);
//   out = round(r * (1 / sqrt(var + eps)) * weight) -> out.
// No contraction into FMAs.

// r = round(s + old) for the pack's first `valid` elements, each r^2 added
// to `squares` in element order (r and old may be the same pack).
template <class T>
__device__ __forceinline__ void residual_pack(const float (&s)[Pack<T>::kCount], const Pack<T>& old,
                                              Pack<T>& r, int valid, float& squares) {
  // A whole pack of a 16-bit type: two roundings per conversion
  // (from_float_pair), the squares still added in element order. f32 keeps
  // the loop below: the pair path cost it registers and resident clusters.
  if constexpr (sizeof(T) == 2) {
    constexpr int V = Pack<T>::kCount;
    if (valid == V) {
#pragma unroll
      for (int k = 0; k < V; k += 2) {
        T a, b;
        from_float_pair<T>(__fadd_rn(s[k], to_float(old.v[k])),
                           __fadd_rn(s[k + 1], to_float(old.v[k + 1])), a, b);
        r.v[k] = a;
        r.v[k + 1] = b;
        const float ra = to_float(a), rb = to_float(b);
        squares = __fadd_rn(squares, __fmul_rn(ra, ra));
        squares = __fadd_rn(squares, __fmul_rn(rb, rb));
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) {
    if (k >= valid) break;
    r.v[k] = from_float<T>(__fadd_rn(s[k], to_float(old.v[k])));
    const float rf = to_float(r.v[k]);
    squares = __fadd_rn(squares, __fmul_rn(rf, rf));
  }
}

// 1 / sqrt(mean + eps) from the row's sum of squares.
__device__ __forceinline__ float inv_rms_of(float total, std::int64_t hidden, float eps) {
  const float variance = __fdiv_rn(total, static_cast<float>(hidden));
  return __frsqrt_rn(__fadd_rn(variance, eps));
}

template <class T>
__device__ __forceinline__ Pack<T> normalized_pack(const Pack<T>& r, const Pack<T>& w,
                                                   float inv_rms) {
  Pack<T> o;
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) {
    o.v[k] = from_float<T>(__fmul_rn(__fmul_rn(to_float(r.v[k]), inv_rms), to_float(w.v[k])));
  }
  return o;
}

// Elements of pack j of a row of `hidden` (V a pack) that lie in the row.
template <int V>
__device__ __forceinline__ int valid_in_pack(std::int64_t j, std::int64_t hidden) {
  const std::int64_t left = hidden - j * V;
  return left < V ? static_cast<int>(left) : V;
}

// A thread's first kKeptPacks packs of a row stay in registers between the
// two passes of the row functions, with their weights and old residuals
// loaded before the wait for the sums: no reload on the latency-bound path
// of short rows.
inline constexpr int kKeptPacks = 2;

// A thread's first kKeptPacks packs of a row (row_part's): whether each lies
// in the row, and its first element.
struct KeptPacks {
  std::int64_t element[kKeptPacks];
  bool has[kKeptPacks];
};

template <int V>
__device__ __forceinline__ KeptPacks kept_packs(const RowPart& part) {
  KeptPacks mine;
#pragma unroll
  for (int it = 0; it < kKeptPacks; ++it) {
    const std::int64_t pack = part.first_pack + part.thread + std::int64_t{it} * kSplitThreads;
    mine.has[it] = pack < part.end_pack;
    mine.element[it] = pack * V;
  }
  return mine;
}

// The residuals of a thread's kept packs of a row (whole packs) from their
// sums: r = round(sums + old), the squares added in pack order, and
// `store(it, r[it])` as each is made (the streamed row loops).
template <class T, class Store>
__device__ __forceinline__ void kept_residuals(const KeptPacks& mine,
                                               const Pack<T> (&sums)[kKeptPacks],
                                               const Pack<T> (&old)[kKeptPacks],
                                               Pack<T> (&r)[kKeptPacks], float& squares,
                                               Store store) {
  constexpr int V = Pack<T>::kCount;
#pragma unroll
  for (int it = 0; it < kKeptPacks; ++it) {
    if (!mine.has[it]) continue;
    float s[V];
#pragma unroll
    for (int k = 0; k < V; ++k) s[k] = to_float(sums[it].v[k]);
    residual_pack<T>(s, old[it], r[it], V, squares);
    store(it, r[it]);
  }
}

// Residual add + RMSNorm of this thread's packs of one row (the arithmetic
// above). `sum_pack(first, s)` fills s[k] with the rounded all-reduced
// value of element first + k as a float and returns false when its data
// never came: then no output of the row is written (residuals already
// updated from data that did come stay), the row's barrier is still
// reached, and the function returns false on every thread of the row
// (block or cluster); the caller gives up after it.
// `row` is RowInBlock or RowInCluster.
template <class T, class SumPack, class Row>
__device__ bool add_rms_norm_part(SumPack sum_pack, T* residual, const T* weight, T* out,
                                  std::int64_t hidden, float eps, Row& row) {
  constexpr int V = Pack<T>::kCount;
  constexpr int kKept = kKeptPacks;
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
    residual_pack<T>(s, old, r, valid_in_pack<V>(j, hidden), squares);
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
  const float inv_rms = inv_rms_of(total, hidden, eps);
  auto normalize = [&](std::int64_t j, const Pack<T>& r, const Pack<T>& w) {
    store_row_pack(out, j * V, hidden, out_vec, normalized_pack<T>(r, w, inv_rms));
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

// The same row, all or nothing: neither the residual nor the output of the
// row is written unless every thread of the row got every sum. Same
// arithmetic, same order (the same thread per pack, the same sum of
// squares), hence the same bits as add_rms_norm_part.
// `sum_pack(first, s, again)` fills s as above; with again == false it may
// wait for the data and returns false when the data never came; with
// again == true (second pass, only after every thread's first pass
// succeeded) it must give the same values again without waiting - the
// residual of a pack that is not kept in registers is computed again from
// the same sums and the old residual, which is still in memory then.
template <class T, int kKept = kKeptPacks, class SumPack, class Row>
__device__ bool add_rms_norm_part_whole(SumPack sum_pack, T* residual, const T* weight, T* out,
                                        std::int64_t hidden, float eps, Row& row) {
  constexpr int V = Pack<T>::kCount;
  const std::int64_t packs = (hidden + V - 1) / V;
  const RowPart part = row_part(row.split(), row.thread(), packs);
  const bool whole = hidden % V == 0;
  const bool residual_vec = whole && aligned16(residual);
  const bool weight_vec = whole && aligned16(weight);
  const bool out_vec = whole && aligned16(out);
  auto pack_index = [&](int it) {
    return part.first_pack + part.thread + static_cast<std::int64_t>(it) * kSplitThreads;
  };
  auto old_residual = [&](std::int64_t j) {
    return load_row_pack(static_cast<const T*>(residual), j * V, hidden, residual_vec);
  };
  float squares = 0.0f;
  bool ok = true;
  Pack<T> kept_r[kKept], kept_w[kKept];
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    const std::int64_t j = pack_index(it);
    if (j < part.end_pack) {
      kept_w[it] = load_row_pack(weight, j * V, hidden, weight_vec);
      kept_r[it] = old_residual(j);
    }
  }
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    const std::int64_t j = pack_index(it);
    if (j < part.end_pack) {
      float s[V];
      ok = sum_pack(j * V, s, false) && ok;
      residual_pack<T>(s, kept_r[it], kept_r[it], valid_in_pack<V>(j, hidden), squares);
    }
  }
  for (std::int64_t j = pack_index(kKept); j < part.end_pack; j += kSplitThreads) {
    float s[V];
    ok = sum_pack(j * V, s, false) && ok;
    Pack<T> r;
    residual_pack<T>(s, old_residual(j), r, valid_in_pack<V>(j, hidden), squares);
  }
  bool failed = !ok;
  const float total = row.row_total(squares, failed);
  if (failed) return false;  // every thread of the row alike; nothing of the row written
  const float inv_rms = inv_rms_of(total, hidden, eps);
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    const std::int64_t j = pack_index(it);
    if (j < part.end_pack) {
      store_row_pack(residual, j * V, hidden, residual_vec, kept_r[it]);
      store_row_pack(out, j * V, hidden, out_vec,
                     normalized_pack<T>(kept_r[it], kept_w[it], inv_rms));
    }
  }
  for (std::int64_t j = pack_index(kKept); j < part.end_pack; j += kSplitThreads) {
    float s[V];
    sum_pack(j * V, s, true);
    Pack<T> r;
    float unused = 0.0f;
    residual_pack<T>(s, old_residual(j), r, valid_in_pack<V>(j, hidden), unused);
    store_row_pack(residual, j * V, hidden, residual_vec, r);
    store_row_pack(
        out, j * V, hidden, out_vec,
        normalized_pack<T>(r, load_row_pack(weight, j * V, hidden, weight_vec), inv_rms));
  }
  return true;
}

}  // namespace peerplan::cuda_kernels
