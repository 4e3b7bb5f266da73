// SPDX-License-Identifier: Apache-2.0
// The add + RMSNorm half of the fused op, defined once for every path so that
// the P2P route and the fallback round identically. Per row of `hidden`
// elements, with s the all-reduced value already rounded to the dtype:
//   r   = round(float(s) + float(residual))     -> stored into residual
//   var = (sum over the row, in order, of r*r) / hidden      (fp32)
//   out = round(r * (1 / sqrt(var + eps)) * float(weight))  -> stored into inout
// round() is round-to-nearest-even into the dtype; all arithmetic is fp32.
// The CUDA row kernels (cuda/rms_norm_row.cuh) take the same steps but add
// the squares in a fixed tree order and round 1/sqrt once: their bits can
// differ from these in the last place.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "peerplan/dtype.hpp"
#include "peerplan/layout.hpp"
#include "transport/host/element.hpp"

namespace peerplan::transport::host {

// One row. `values` holds the rounded sums on entry and is used as scratch.
// residual_row/out_row point at the row's first element; consecutive
// elements are `step` elements apart; weight is contiguous.
template <class E>
void add_rms_norm_row(float* values, void* residual_row, const void* weight, void* out_row,
                      std::int64_t step, std::int64_t hidden, float eps) {
  using S = typename E::Storage;
  auto* residual = static_cast<std::byte*>(residual_row);
  auto* out = static_cast<std::byte*>(out_row);
  const auto* w = static_cast<const S*>(weight);
  const std::int64_t stride_bytes = step * static_cast<std::int64_t>(sizeof(S));

  float sum_of_squares = 0.0f;
  for (std::int64_t j = 0; j < hidden; ++j) {
    S res;
    std::memcpy(&res, residual + j * stride_bytes, sizeof res);
    const S r = E::store(values[j] + E::load(res));
    std::memcpy(residual + j * stride_bytes, &r, sizeof r);
    const float rf = E::load(r);
    values[j] = rf;
    sum_of_squares += rf * rf;
  }
  const float variance = sum_of_squares / static_cast<float>(hidden);
  const float inv_rms = 1.0f / std::sqrt(variance + eps);
  for (std::int64_t j = 0; j < hidden; ++j) {
    S wj;
    std::memcpy(&wj, w + j, sizeof wj);
    const S o = E::store(values[j] * inv_rms * E::load(wj));
    std::memcpy(out + j * stride_bytes, &o, sizeof o);
  }
}

// Standalone add + RMSNorm over a whole tensor. `reduced` holds the
// all-reduced values as layout.numel() contiguous elements of
// `dtype` (row-major); `out` (the op's inout) and `residual` share
// `layout`, whose last dimension is the hidden size; weight is a contiguous
// [hidden]. `reduced` may not alias out or residual.
void add_rms_norm(DataType dtype, const TensorLayout& layout, const void* reduced, void* out,
                  void* residual, const void* weight, float eps);

}  // namespace peerplan::transport::host
