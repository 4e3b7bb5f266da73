// SPDX-License-Identifier: Apache-2.0
// The standalone residual add + RMSNorm of already reduced rows: the MPI
// and NCCL fallbacks' (launch_add_rms_norm) and the second step of the
// fused op's two-shot + row norm path (launch_recipe.cu). The row function
// is rms_norm_row.cuh's, so its bits equal the fused kernels'.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "recipe_steps.cuh"
#include "resident_units.hpp"
#include "rms_norm_row.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Rows of the row kernels in flight at once: blocks of kRowThreads, or
// clusters of kRowSplits blocks of kSplitThreads.
constexpr std::int64_t kMaxRowBlocks = 1024;

// kCluster: a row per cluster of kRowSplits blocks (sm_90+), else a row
// per block; with `clusters` on (row_norm_step) either is a programmatic
// dependent launch, hence the wait.
template <class T, bool kCluster>
__global__ void __launch_bounds__(kCluster ? kSplitThreads : kRowThreads)
    add_rms_norm_kernel(const T* reduced, T* inout, T* residual, const T* weight, float eps,
                        const __grid_constant__ KernelLayout layout, std::int64_t rows,
                        std::int64_t hidden, const std::uint32_t* aborted) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  wait_for_previous_kernel();  // at once unless launched as a programmatic dependent
  // After the fused op's two-shot gave up, its sums are incomplete: leave
  // residual and output as they are. The word no longer changes once the
  // two-shot kernel has finished, so every block decides alike (a cluster
  // leaves whole, before its first barrier).
  if (aborted != nullptr && *static_cast<const volatile std::uint32_t*>(aborted) != 0u) return;
  auto row_sum = RowWorkers<kCluster>::row(shared);
  for (std::int64_t row = RowWorkers<kCluster>::first_row(); row < rows;
       row += RowWorkers<kCluster>::row_step()) {
    const T* sums = reduced + row * hidden;
    const bool vec = hidden % V == 0 && aligned16(sums);
    auto sum_pack = [&](std::int64_t first, float(&s)[V]) {
      const Pack<T> in = load_row_pack(sums, first, hidden, vec);
#pragma unroll
      for (int k = 0; k < V; ++k) s[k] = to_float(in.v[k]);
      return true;
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    add_rms_norm_part<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps, row_sum);
  }
}

// Dense rows of at most kKeptPacks packs a thread, every tensor 16-byte
// aligned: a unit (cluster or block) works through its rows with the next
// row's sums and old residual loaded before this row's total is exchanged,
// so that one row's loads overlap another's arithmetic and stores, and the
// weight is loaded once. The grid is what the device holds at once. Same
// threads per pack and same order as add_rms_norm_part, hence the same
// bits. The parameters are add_rms_norm_kernel's (the layout is dense).
template <class T, bool kCluster>
__global__ void __launch_bounds__(kCluster ? kSplitThreads : kRowThreads)
    streamed_rows_kernel(const T* reduced, T* inout, T* residual, const T* weight, float eps,
                         const __grid_constant__ KernelLayout /*layout*/, std::int64_t rows,
                         std::int64_t hidden, const std::uint32_t* aborted) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  constexpr int kKept = kKeptPacks;
  wait_for_previous_kernel();  // at once unless launched as a programmatic dependent
  if (aborted != nullptr && *static_cast<const volatile std::uint32_t*>(aborted) != 0u) return;
  auto row_sum = RowWorkers<kCluster>::row(shared);
  const KeptPacks mine = kept_packs<V>(row_part(row_sum.split(), row_sum.thread(), hidden / V));
  Pack<T> w[kKept];
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    if (mine.has[it]) w[it].raw = *reinterpret_cast<const uint4*>(weight + mine.element[it]);
  }
  Pack<T> sums[kKept], old[kKept];
  auto load_row = [&](std::int64_t row, Pack<T>(&s)[kKept], Pack<T>(&o)[kKept]) {
#pragma unroll
    for (int it = 0; it < kKept; ++it) {
      if (!mine.has[it]) continue;
      s[it].raw = *reinterpret_cast<const uint4*>(reduced + row * hidden + mine.element[it]);
      o[it].raw = *reinterpret_cast<const uint4*>(residual + row * hidden + mine.element[it]);
    }
  };
  const std::int64_t step = RowWorkers<kCluster>::row_step();
  std::int64_t row = RowWorkers<kCluster>::first_row();
  if (row < rows) load_row(row, sums, old);
  for (; row < rows; row += step) {
    Pack<T> next_sums[kKept], next_old[kKept];
    if (row + step < rows) load_row(row + step, next_sums, next_old);
    float squares = 0.0f;
    Pack<T> r[kKept];
    kept_residuals<T>(mine, sums, old, r, squares, [&](int it, const Pack<T>& made) {
      *reinterpret_cast<uint4*>(residual + row * hidden + mine.element[it]) = made.raw;
    });
    bool failed = false;
    const float inv_rms = inv_rms_of(row_sum.row_total_alternating(squares, failed), hidden, eps);
#pragma unroll
    for (int it = 0; it < kKept; ++it) {
      if (!mine.has[it]) continue;
      *reinterpret_cast<uint4*>(inout + row * hidden + mine.element[it]) =
          normalized_pack<T>(r[it], w[it], inv_rms).raw;
      sums[it] = next_sums[it];
      old[it] = next_old[it];
    }
  }
}

}  // namespace

namespace detail {

// `clusters` as PeerSet::cluster_rows. Rows that streamed_rows_kernel
// takes get it, with add_rms_norm_kernel for calls whose tensors are not
// aligned: in clusters while each cluster has one row, in blocks of
// kRowThreads once there are more rows than resident clusters (streamed,
// the blocks then beat clusters: they run more threads per SM). With
// `clusters` on every launch is a programmatic dependent one (each kernel
// waits for the previous one on the device); otherwise a plain launch.
KernelStep row_norm_step(ElementType type, const KernelLayout& layout, std::int64_t rows,
                         std::int64_t hidden, bool clusters) {
  KernelStep step;
  std::int64_t most = kMaxRowBlocks;
  bool in_clusters = clusters;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    constexpr std::int64_t V = Pack<T>::kCount;
    const bool streamed = layout.dense && hidden % V == 0 && hidden / V <= kKeptPacks * kRowThreads;
    auto streamed_units = [](auto cluster) {
      constexpr bool kCluster = decltype(cluster)::value;
      static ResidentCache cache;
      return resident_row_units(reinterpret_cast<const void*>(streamed_rows_kernel<T, kCluster>),
                                kCluster, kMaxRowBlocks, cache);
    };
    auto pick = [&](auto cluster) {
      constexpr bool kCluster = decltype(cluster)::value;
      step.kernel = reinterpret_cast<const void*>(add_rms_norm_kernel<T, kCluster>);
      if (streamed) {
        step.unaligned_kernel = step.kernel;
        step.kernel = reinterpret_cast<const void*>(streamed_rows_kernel<T, kCluster>);
        most = streamed_units(cluster);
      }
    };
    if (clusters) {
      pick(std::true_type{});
    } else {
      pick(std::false_type{});
    }
    if (streamed && clusters && rows > most) {  // more rows than resident clusters
      in_clusters = false;
      pick(std::false_type{});
    }
  });
  const auto units = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, most));
  step.programmatic = clusters;
  if (in_clusters) {
    step.blocks = units * kRowSplits;
    step.threads = kSplitThreads;
    step.cluster = kRowSplits;
  } else {
    step.blocks = units;
    step.threads = kRowThreads;
  }
  return step;
}

KernelStep for_tensors(KernelStep step, std::initializer_list<const void*> tensors) {
  if (step.unaligned_kernel == nullptr) return step;
  for (const void* tensor : tensors) {
    if (!aligned16(tensor)) {
      step.kernel = step.unaligned_kernel;
      break;
    }
  }
  return step;
}

}  // namespace detail

void prepare_add_rms_norm(bool clusters) noexcept {
  KernelLayout dense{};
  for (const ElementType type : {ElementType::f16, ElementType::bf16, ElementType::f32}) {
    const auto pack = static_cast<std::int64_t>(kPackBytes / detail::element_bytes(type));
    // A row per unit, and more rows than units: both kernels' grids.
    detail::row_norm_step(type, dense, 1, pack, clusters);
    detail::row_norm_step(type, dense, kMaxRowBlocks + 1, pack, clusters);
  }
}

cudaError_t launch_add_rms_norm(ElementType type, const void* reduced, void* inout, void* residual,
                                const void* weight, float eps, const KernelLayout& layout,
                                std::int64_t rows, std::int64_t hidden, bool clusters,
                                cudaStream_t stream) {
  const KernelStep step =
      detail::for_tensors(detail::row_norm_step(type, layout, rows, hidden, clusters),
                          {reduced, inout, residual, weight});
  if (step.kernel == nullptr) return cudaGetLastError();
  // (const T* reduced, T* inout, T* residual, const T* weight, eps,
  // KernelLayout, rows, hidden, const uint32_t* aborted: none here)
  const std::uint32_t* aborted = nullptr;
  void* args[] = {&reduced, &inout,  &residual, &weight, &eps, const_cast<KernelLayout*>(&layout),
                  &rows,    &hidden, &aborted};
  detail::launch_step(step, args, stream);
  return cudaGetLastError();
}

}  // namespace peerplan::cuda_kernels
