// SPDX-License-Identifier: Apache-2.0
// Packing strided tensors into contiguous staging buffers and back, checked
// against an independent element-by-element offset computation.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "peerplan/layout.hpp"
#include "transport/host/strided_copy.hpp"

namespace peerplan::transport::host {
namespace {

TensorLayout make(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides) {
  return TensorLayout::strided(shape, strides);
}

// Offset of row-major logical element i, by plain division.
std::int64_t reference_offset(const TensorLayout& layout, std::int64_t i) {
  std::int64_t offset = 0;
  for (int d = layout.rank() - 1; d >= 0; --d) {
    offset += (i % layout.dim(d)) * layout.stride(d);
    i /= layout.dim(d);
  }
  return offset;
}

std::int64_t span_elements(const TensorLayout& layout) {
  std::int64_t last = 0;
  for (int d = 0; d < layout.rank(); ++d) last += (layout.dim(d) - 1) * layout.stride(d);
  return last + 1;
}

template <class T>
void check_layout(const TensorLayout& layout) {
  const std::int64_t n = layout.numel();
  ASSERT_GT(n, 0);
  // Tensor memory: every slot holds a distinct value; padding is recognisable.
  std::vector<T> tensor(static_cast<std::size_t>(span_elements(layout)));
  for (std::size_t k = 0; k < tensor.size(); ++k) tensor[k] = static_cast<T>(k + 1);

  std::vector<T> packed(static_cast<std::size_t>(n), T{0});
  pack(layout, sizeof(T), tensor.data(), packed.data());
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(packed[i], tensor[reference_offset(layout, i)]) << layout.to_string() << " i=" << i;
  }

  // Every sub-range, including ones that start and end mid-row.
  for (std::int64_t first = 0; first < n; first += 3) {
    for (std::int64_t count : {std::int64_t{1}, std::int64_t{4}, n - first}) {
      if (first + count > n) continue;
      std::vector<T> part(static_cast<std::size_t>(count));
      pack_range(layout, sizeof(T), tensor.data(), first, count, part.data());
      for (std::int64_t i = 0; i < count; ++i) ASSERT_EQ(part[i], packed[first + i]);
    }
  }

  // Unpack new values; padding (slots no element maps to) stays untouched.
  std::vector<T> values(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) values[i] = static_cast<T>(10000 + i);
  std::vector<T> target(tensor.size(), T{7});
  unpack(layout, sizeof(T), values.data(), target.data());
  std::vector<bool> written(tensor.size(), false);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto at = reference_offset(layout, i);
    written[at] = true;
    ASSERT_EQ(target[at], values[i]) << layout.to_string() << " i=" << i;
  }
  for (std::size_t k = 0; k < target.size(); ++k) {
    if (!written[k]) {
      ASSERT_EQ(target[k], T{7}) << "padding overwritten at " << k;
    }
  }

  // A range unpack writes exactly that range.
  if (n >= 3) {
    std::vector<T> partial(tensor.size(), T{7});
    unpack_range(layout, sizeof(T), values.data() + 1, 1, n - 2, partial.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const T expected = (i >= 1 && i < n - 1) ? values[i] : T{7};
      ASSERT_EQ(partial[reference_offset(layout, i)], expected) << "i=" << i;
    }
  }
}

TEST(StridedCopy, ContiguousLayoutIsDense) {
  EXPECT_TRUE(is_dense(TensorLayout{3, 5}));
  EXPECT_TRUE(is_dense(make({1, 5}, {999, 1})));  // size-1 stride ignored
  EXPECT_TRUE(is_dense(make({3, 1, 5}, {5, 77, 1})));
  EXPECT_FALSE(is_dense(make({3, 5}, {8, 1})));
  EXPECT_FALSE(is_dense(make({4, 3}, {1, 4})));
  check_layout<std::uint32_t>(TensorLayout{3, 5});
  check_layout<std::uint16_t>(TensorLayout{7});
}

TEST(StridedCopy, PaddedRows) {
  check_layout<std::uint16_t>(make({3, 5}, {8, 1}));
  check_layout<std::uint32_t>(make({1, 5}, {4096, 1}));  // one-row output, padded row stride
}

TEST(StridedCopy, TransposedAndInnerStride) {
  check_layout<std::uint32_t>(make({4, 3}, {1, 4}));
  check_layout<std::uint16_t>(make({2, 3, 4}, {40, 12, 2}));
}

TEST(StridedCopy, EightDimensions) {
  check_layout<std::uint16_t>(make({2, 1, 2, 1, 2, 1, 2, 3}, {200, 5, 90, 3, 40, 1, 12, 2}));
}

TEST(StridedCopy, CountsAndRowOffsets) {
  EXPECT_EQ((TensorLayout{}).numel(), 1);  // rank 0: one element
  EXPECT_EQ((TensorLayout{2, 0, 3}).numel(), 0);
  EXPECT_EQ((TensorLayout{2, 3, 4}).numel(), 24);
  const TensorLayout padded = make({2, 3, 4}, {40, 12, 1});
  EXPECT_EQ(row_offset(padded, 0), 0);
  EXPECT_EQ(row_offset(padded, 2), 24);
  EXPECT_EQ(row_offset(padded, 4), 52);  // (1, 1): 40 + 12
}

TEST(StridedCopy, ScalarLayout) {
  const TensorLayout scalar;
  const std::uint32_t value = 42;
  std::uint32_t packed = 0;
  pack(scalar, sizeof value, &value, &packed);
  EXPECT_EQ(packed, 42u);
  std::uint32_t out = 0;
  unpack(scalar, sizeof value, &packed, &out);
  EXPECT_EQ(out, 42u);
}

}  // namespace
}  // namespace peerplan::transport::host
