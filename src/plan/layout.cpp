// SPDX-License-Identifier: Apache-2.0
// TensorLayout: shape plus element strides, stored inline (no heap) so that
// building a lookup key from a layout never allocates.
#include "peerplan/layout.hpp"

#include <cstdint>
#include <string>

#include "peerplan/errors.hpp"
#include "plan/list_format.hpp"

namespace peerplan {
namespace {

void check_rank(std::size_t rank) {
  if (rank > static_cast<std::size_t>(kMaxRank)) {
    throw InvalidArgument("a tensor layout has " + std::to_string(rank) +
                          " dimensions; peerplan supports at most " + std::to_string(kMaxRank) +
                          ": merge contiguous dimensions before declaring or calling");
  }
}

// Products are formed in unsigned arithmetic so that absurd shapes wrap
// instead of invoking undefined behaviour; validation rejects them later,
// naming the declaration.
std::int64_t wrapping_mul(std::int64_t a, std::int64_t b) noexcept {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}

}  // namespace

TensorLayout::TensorLayout(std::initializer_list<std::int64_t> shape)
    : TensorLayout(contiguous(std::span<const std::int64_t>(shape.begin(), shape.size()))) {}

TensorLayout TensorLayout::contiguous(std::span<const std::int64_t> shape) {
  check_rank(shape.size());
  TensorLayout layout;
  layout.rank_ = static_cast<std::uint8_t>(shape.size());
  std::int64_t running = 1;
  for (int i = layout.rank_ - 1; i >= 0; --i) {
    layout.shape_[i] = shape[i];
    layout.strides_[i] = running;
    running = wrapping_mul(running, shape[i]);
  }
  return layout;
}

TensorLayout TensorLayout::strided(std::span<const std::int64_t> shape,
                                   std::span<const std::int64_t> strides) {
  check_rank(shape.size());
  if (strides.size() != shape.size()) {
    throw InvalidArgument("a tensor layout has " + std::to_string(shape.size()) +
                          " dimensions but " + std::to_string(strides.size()) +
                          " strides: give one stride per dimension, or none for a "
                          "contiguous row-major tensor");
  }
  TensorLayout layout;
  layout.rank_ = static_cast<std::uint8_t>(shape.size());
  layout.explicit_strides_ = true;
  for (int i = 0; i < layout.rank_; ++i) {
    layout.shape_[i] = shape[i];
    layout.strides_[i] = strides[i];
  }
  return layout;
}

std::int64_t TensorLayout::numel() const noexcept {
  std::int64_t product = 1;
  for (int i = 0; i < rank_; ++i) {
    if (shape_[i] <= 0) return 0;
    product = wrapping_mul(product, shape_[i]);
  }
  return product;
}

bool TensorLayout::is_contiguous() const noexcept {
  std::int64_t expected = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected = wrapping_mul(expected, shape_[i]);
  }
  return true;
}

std::string TensorLayout::to_string() const {
  std::string out;
  out.reserve(16 + 24 * static_cast<std::size_t>(rank_));
  plan::append_list(out, shape_.data(), rank_);
  out += " strides ";
  plan::append_list(out, strides_.data(), rank_);
  return out;
}

}  // namespace peerplan
