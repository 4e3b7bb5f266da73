// SPDX-License-Identifier: Apache-2.0
// The standalone residual add + RMSNorm of already reduced rows: the MPI
// and NCCL fallbacks' (launch_add_rms_norm) and the second step of the
// fused op's two-shot + row norm path (launch_recipe.cu). The row function
// is rms_norm_row.cuh's, so its bits equal the fused kernels'.
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

// Rows of the row kernels in flight at once: blocks of kRowThreads, or
// clusters of kRowSplits blocks of kSplitThreads.
constexpr std::int64_t kMaxRowBlocks = 1024;

// kCluster: a row per cluster of kRowSplits blocks (sm_90+; launched as a
// programmatic dependent launch, hence the wait), else a row per block.
template <class T, bool kCluster>
__global__ void __launch_bounds__(kCluster ? kSplitThreads : kRowThreads)
    add_rms_norm_kernel(const T* reduced, T* inout, T* residual, const T* weight, float eps,
                        const __grid_constant__ KernelLayout layout, std::int64_t rows,
                        std::int64_t hidden, const std::uint32_t* aborted) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  if constexpr (kCluster) wait_for_previous_kernel();
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

}  // namespace

namespace detail {

// `clusters` as PeerSet::cluster_rows; the cluster kernel waits for the
// previous kernel on the device (it is a programmatic dependent launch
// whatever PeerSet::overlap_launch says), the block kernel is a plain launch.
KernelStep row_norm_step(ElementType type, std::int64_t rows, bool clusters) {
  KernelStep step;
  const auto units = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxRowBlocks));
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    if (clusters) {
      step.kernel = reinterpret_cast<const void*>(add_rms_norm_kernel<T, true>);
    } else {
      step.kernel = reinterpret_cast<const void*>(add_rms_norm_kernel<T, false>);
    }
  });
  if (clusters) {
    step.blocks = units * kRowSplits;
    step.threads = kSplitThreads;
    step.cluster = kRowSplits;
    step.programmatic = true;
  } else {
    step.blocks = units;
    step.threads = kRowThreads;
  }
  return step;
}

}  // namespace detail

cudaError_t launch_add_rms_norm(ElementType type, const void* reduced, void* inout, void* residual,
                                const void* weight, float eps, const KernelLayout& layout,
                                std::int64_t rows, std::int64_t hidden, bool clusters,
                                cudaStream_t stream) {
  const KernelStep step = detail::row_norm_step(type, rows, clusters);
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
