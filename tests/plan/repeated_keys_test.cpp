// SPDX-License-Identifier: Apache-2.0
// find_repeated_keys: the declarations a set can never hit because an
// earlier declaration has the same key (the first declared wins).
#include <gtest/gtest.h>

#include <vector>

#include "peerplan/declaration.hpp"
#include "plan/repeated_keys.hpp"
#include "plan_test_support.hpp"

namespace peerplan::plan {
namespace {

TEST(RepeatedKeys, NoneInASetOfDistinctKeys) {
  const float weight[64] = {};
  const std::vector<Declaration> set{
      Declaration::all_reduce("a", DataType::bf16, TensorLayout{2, 64}),
      Declaration::all_reduce("b", DataType::f32, TensorLayout{2, 64}),  // another dtype
      Declaration::fused_add_rms_norm("c", DataType::bf16, TensorLayout{2, 64}, weight, 1e-6f),
      Declaration::fused_add_rms_norm("d", DataType::bf16, TensorLayout{2, 64}, weight, 1e-5f)};
  EXPECT_TRUE(find_repeated_keys(set).empty());
  EXPECT_TRUE(find_repeated_keys(std::vector<Declaration>{}).empty());
}

TEST(RepeatedKeys, EachLaterDeclarationOfAKeyNamesTheFirst) {
  const std::vector<Declaration> set{
      Declaration::all_reduce("first", DataType::bf16, TensorLayout{2, 64}),
      Declaration::all_reduce("other", DataType::bf16, TensorLayout{1, 64}),
      Declaration::all_reduce("second", DataType::bf16, TensorLayout{2, 64}),
      // Canonical strides: a size-1 dimension's stride does not count.
      Declaration::all_reduce("padded_row", DataType::bf16, test::strided({1, 64}, {128, 1})),
      Declaration::all_reduce("third", DataType::bf16, test::strided({2, 64}, {64, 1}))};
  const auto repeats = find_repeated_keys(set);
  ASSERT_EQ(repeats.size(), 3u);
  EXPECT_EQ(repeats[0].repeat, 2u);
  EXPECT_EQ(repeats[0].first, 0u);
  EXPECT_EQ(repeats[1].repeat, 3u);
  EXPECT_EQ(repeats[1].first, 1u);
  EXPECT_EQ(repeats[2].repeat, 4u);
  EXPECT_EQ(repeats[2].first, 0u);
}

}  // namespace
}  // namespace peerplan::plan
