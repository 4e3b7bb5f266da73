// SPDX-License-Identifier: Apache-2.0
// Element-level device helpers shared by the push and the pull kernels:
// fp32 conversions, 16-byte packs, logical-index -> offset walks over a
// KernelLayout, and tensor loads/stores that use 16-byte accesses only when
// the pointer is aligned and the range is whole (element by element
// otherwise, zeros past the end).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "collective_kernels.hpp"

namespace peerplan::cuda_kernels {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// a and b rounded to a 16-bit T, as from_float rounds each: the same bits,
// by one packed conversion for both (F2FP on sm_90); rounding one float and
// reading it back compiles to F2F instead, whose latency the fused row
// functions wait on at one warp per scheduler (benchmarks/kernel-loop.md).
template <class T>
__device__ __forceinline__ void from_float_pair(float a, float b, T& ta, T& tb) {
  static_assert(sizeof(T) == 2, "f32 rounds nothing");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    ta = h.x;
    tb = h.y;
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    ta = h.x;
    tb = h.y;
  }
}

template <class T>
struct Pack {
  static constexpr int kCount = static_cast<int>(kPackBytes / sizeof(T));
  union {
    uint4 raw;
    T v[kCount];
  };
  __device__ Pack() : raw{0u, 0u, 0u, 0u} {}
};

// s[k] = acc[k] rounded to T and read back as a float (a reduced pack's
// values as the row functions take them), two at a time for 16-bit types.
template <class T>
__device__ __forceinline__ void round_to_element(const float (&acc)[Pack<T>::kCount],
                                                 float (&s)[Pack<T>::kCount]) {
  constexpr int V = Pack<T>::kCount;
  if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int k = 0; k < V; k += 2) {
      T a, b;
      from_float_pair<T>(acc[k], acc[k + 1], a, b);
      s[k] = to_float(a);
      s[k + 1] = to_float(b);
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) s[k] = to_float(from_float<T>(acc[k]));
  }
}

// Packs that cover `count` elements (the last one may be partial).
template <class T>
__host__ __device__ constexpr std::int64_t packs_for(std::int64_t count) {
  return (count + Pack<T>::kCount - 1) / Pack<T>::kCount;
}

// Element offset of logical (row-major) index i over dimensions [0, end):
// end = rank for an element, rank - 1 for the first element of a row.
inline __device__ __noinline__ std::int64_t offset_over(const KernelLayout& layout, std::int64_t i,
                                                        int end) {
  std::int64_t offset = 0;
  for (int d = end - 1; d >= 0; --d) {
    const std::int64_t dim = layout.dims[d];
    const std::int64_t q = i / dim;
    offset += (i - q * dim) * layout.strides[d];
    i = q;
  }
  return offset;
}

__device__ __forceinline__ std::int64_t element_offset(const KernelLayout& layout, std::int64_t i) {
  return offset_over(layout, i, layout.rank);
}

__device__ __forceinline__ std::int64_t offset_of(const KernelLayout& layout, std::int64_t i) {
  return layout.dense ? i : element_offset(layout, i);
}

// Also the launch's host-side choice between a kernel and its unaligned twin.
__host__ __device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & (kPackBytes - 1)) == 0;
}

// The order every kernel sums in, so that every route gives the same bits:
// fp32, starting from 0.0f, the sources added in rank order, one rounding
// at the end. Kernels that wait for each source add it as it arrives.
template <class T>
struct RankOrderSum {
  float acc[Pack<T>::kCount];

  __device__ __forceinline__ RankOrderSum() {
#pragma unroll
    for (int k = 0; k < Pack<T>::kCount; ++k) acc[k] = 0.0f;
  }
  // The next rank's pack.
  __device__ __forceinline__ void add(const Pack<T>& source) {
#pragma unroll
    for (int k = 0; k < Pack<T>::kCount; ++k) acc[k] = __fadd_rn(acc[k], to_float(source.v[k]));
  }
  __device__ __forceinline__ Pack<T> rounded() const {
    Pack<T> sum;
#pragma unroll
    for (int k = 0; k < Pack<T>::kCount; ++k) sum.v[k] = from_float<T>(acc[k]);
    return sum;
  }
};

// The rank-order sum of two ranks' packs from this rank's own and its
// peer's, whichever rank this is: (0 + a) + b and (0 + b) + a are the same
// bits for every a and b (an IEEE add commutes, and the GPU's NaN results
// are canonical), so the two-rank kernels need no branch on the rank.
template <class T>
__device__ __forceinline__ RankOrderSum<T> two_rank_sum(const uint4& own, const uint4& peer) {
  RankOrderSum<T> acc;
  Pack<T> part;
  part.raw = own;
  acc.add(part);
  part.raw = peer;
  acc.add(part);
  return acc;
}

// The sum of parts[0..size) element by element, in that order.
template <class T>
__device__ __forceinline__ Pack<T> sum_in_rank_order(const Pack<T> (&parts)[kMaxRanks], int size) {
  RankOrderSum<T> sum;
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r) {
    if (r >= size) break;
    sum.add(parts[r]);
  }
  return sum.rounded();
}

// Elements [first, first + kCount) of the tensor (zeros past `count`).
template <class T>
__device__ __forceinline__ Pack<T> load_tensor(const T* tensor, const KernelLayout& layout,
                                               bool vector_ok, std::int64_t first,
                                               std::int64_t count) {
  Pack<T> pack;
  if (vector_ok && first + Pack<T>::kCount <= count) {
    pack.raw = *reinterpret_cast<const uint4*>(tensor + first);
    return pack;
  }
  // Unrolled with a guard per element (no early exit), so that every
  // index into the pack is a constant and the pack stays in registers.
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) {
    if (first + k < count) pack.v[k] = tensor[offset_of(layout, first + k)];
  }
  return pack;
}

template <class T>
__device__ __forceinline__ void store_tensor(T* tensor, const KernelLayout& layout, bool vector_ok,
                                             std::int64_t first, std::int64_t count,
                                             const Pack<T>& pack) {
  if (vector_ok && first + Pack<T>::kCount <= count) {
    *reinterpret_cast<uint4*>(tensor + first) = pack.raw;
    return;
  }
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) {
    if (first + k < count) tensor[offset_of(layout, first + k)] = pack.v[k];
  }
}

}  // namespace peerplan::cuda_kernels
