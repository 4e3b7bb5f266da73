// SPDX-License-Identifier: Apache-2.0
// A tensor's shape and element strides, up to kMaxRank dimensions, stored
// inline so that building a lookup key never allocates.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "peerplan/export.h"

namespace peerplan {

inline constexpr int kMaxRank = 8;

class PEERPLAN_API TensorLayout {
 public:
  TensorLayout() = default;
  // Contiguous row-major layout of the given shape.
  TensorLayout(std::initializer_list<std::int64_t> shape);

  // Throw InvalidArgument when more than kMaxRank dimensions are given or
  // the stride count differs from the dimension count. Values are not
  // otherwise checked here: declaration validation reports bad values with
  // the declaration's name.
  static TensorLayout contiguous(std::span<const std::int64_t> shape);
  static TensorLayout strided(std::span<const std::int64_t> shape,
                              std::span<const std::int64_t> strides);

  int rank() const noexcept { return rank_; }
  std::int64_t dim(int i) const noexcept { return shape_[i]; }
  // Explicit stride if given, else the contiguous row-major stride.
  std::int64_t stride(int i) const noexcept { return strides_[i]; }
  bool has_explicit_strides() const noexcept { return explicit_strides_; }

  // Product of the dimensions (1 for rank 0); 0 if any dimension is <= 0.
  std::int64_t numel() const noexcept;
  // Innermost dimension (1 for rank 0).
  std::int64_t last_dim() const noexcept { return rank_ == 0 ? 1 : shape_[rank_ - 1]; }
  // True when the strides are those of a contiguous row-major tensor,
  // ignoring the stride of size-1 dimensions.
  bool is_contiguous() const noexcept;

  std::string to_string() const;  // "[2, 4096] strides [4096, 1]"

 private:
  std::array<std::int64_t, kMaxRank> shape_{};
  std::array<std::int64_t, kMaxRank> strides_{};
  std::uint8_t rank_ = 0;
  bool explicit_strides_ = false;
};

}  // namespace peerplan
