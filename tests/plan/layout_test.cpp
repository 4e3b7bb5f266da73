// SPDX-License-Identifier: Apache-2.0
// TensorLayout: construction limits, default strides, and derived values.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "peerplan/errors.hpp"
#include "peerplan/layout.hpp"

namespace peerplan {
namespace {

TEST(TensorLayout, DefaultStridesAreContiguousRowMajor) {
  const TensorLayout layout{2, 3, 4096};
  EXPECT_EQ(layout.rank(), 3);
  EXPECT_FALSE(layout.has_explicit_strides());
  EXPECT_EQ(layout.stride(0), 3 * 4096);
  EXPECT_EQ(layout.stride(1), 4096);
  EXPECT_EQ(layout.stride(2), 1);
  EXPECT_TRUE(layout.is_contiguous());
  EXPECT_EQ(layout.last_dim(), 4096);
}

TEST(TensorLayout, ContiguousFactoryMatchesInitializerList) {
  const std::vector<std::int64_t> shape{5, 7, 16};
  const TensorLayout a = TensorLayout::contiguous(shape);
  const TensorLayout b{5, 7, 16};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.dim(i), b.dim(i));
    EXPECT_EQ(a.stride(i), b.stride(i));
  }
}

TEST(TensorLayout, MoreThanEightDimensionsThrow) {
  const std::vector<std::int64_t> nine(9, 2);
  EXPECT_THROW(TensorLayout::contiguous(nine), InvalidArgument);
  EXPECT_THROW(TensorLayout::strided(nine, nine), InvalidArgument);
  EXPECT_THROW((TensorLayout{1, 2, 3, 4, 5, 6, 7, 8, 9}), InvalidArgument);
  const std::vector<std::int64_t> eight(8, 2);
  EXPECT_NO_THROW(TensorLayout::contiguous(eight));
}

TEST(TensorLayout, StrideCountMustEqualDimensionCount) {
  const std::vector<std::int64_t> shape{4, 16};
  const std::vector<std::int64_t> one{1};
  const std::vector<std::int64_t> three{64, 16, 1};
  try {
    TensorLayout::strided(shape, one);
    FAIL() << "a stride count mismatch was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("2 dimensions but 1 strides"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(TensorLayout::strided(shape, three), InvalidArgument);
}

TEST(TensorLayout, ExplicitStridesAreKept) {
  const std::vector<std::int64_t> shape{4, 16};
  const std::vector<std::int64_t> strides{32, 1};
  const TensorLayout layout = TensorLayout::strided(shape, strides);
  EXPECT_TRUE(layout.has_explicit_strides());
  EXPECT_EQ(layout.stride(0), 32);
  EXPECT_FALSE(layout.is_contiguous());
}

TEST(TensorLayout, NumelMultipliesDimensionsAndIsZeroForNonPositive) {
  EXPECT_EQ((TensorLayout{2, 3, 4}).numel(), 24);
  EXPECT_EQ(TensorLayout{}.numel(), 1);
  EXPECT_EQ((TensorLayout{2, 0, 4}).numel(), 0);
  EXPECT_EQ((TensorLayout{2, -3}).numel(), 0);
}

TEST(TensorLayout, ContiguityIgnoresTheStrideOfSizeOneDimensions) {
  const std::vector<std::int64_t> shape{1, 4096};
  const std::vector<std::int64_t> padded{8192, 1};
  EXPECT_TRUE(TensorLayout::strided(shape, padded).is_contiguous());
  const std::vector<std::int64_t> shape3{2, 1, 64};
  const std::vector<std::int64_t> odd_middle{64, 7, 1};
  EXPECT_TRUE(TensorLayout::strided(shape3, odd_middle).is_contiguous());
  const std::vector<std::int64_t> padded_rows{128, 7, 1};
  EXPECT_FALSE(TensorLayout::strided(shape3, padded_rows).is_contiguous());
}

TEST(TensorLayout, ToStringShowsShapeAndStrides) {
  EXPECT_EQ((TensorLayout{2, 4096}).to_string(), "[2, 4096] strides [4096, 1]");
  EXPECT_EQ(TensorLayout{}.to_string(), "[] strides []");
}

}  // namespace
}  // namespace peerplan
