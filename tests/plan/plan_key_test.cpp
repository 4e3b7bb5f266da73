// SPDX-License-Identifier: Apache-2.0
// Canonical plan keys (docs/design.md, The lookup contract, points 1-3) and
// their hash.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"
#include "plan_test_support.hpp"

namespace peerplan {
namespace {

using plan::test::strided;

static_assert(noexcept(make_all_reduce_key(DataType::bf16, TensorLayout{})));
static_assert(noexcept(make_fused_key(DataType::bf16, TensorLayout{}, nullptr, 0.0f)));
static_assert(noexcept(hash_value(PlanKey{})));

TEST(PlanKey, UnusedDimensionSlotsAreZero) {
  const PlanKey key = make_all_reduce_key(DataType::bf16, TensorLayout{3, 64});
  EXPECT_EQ(key.rank, 2);
  EXPECT_EQ(key.shape[0], 3);
  EXPECT_EQ(key.shape[1], 64);
  EXPECT_EQ(key.strides[0], 64);
  EXPECT_EQ(key.strides[1], 1);
  for (int i = 2; i < kMaxRank; ++i) {
    EXPECT_EQ(key.shape[i], 0) << i;
    EXPECT_EQ(key.strides[i], 0) << i;
  }
}

TEST(PlanKey, StrideOfASizeOneDimensionIsZero) {
  const PlanKey key = make_all_reduce_key(DataType::bf16, strided({1, 4096}, {8192, 1}));
  EXPECT_EQ(key.strides[0], 0);
  EXPECT_EQ(key.strides[1], 1);
  EXPECT_EQ(key, make_all_reduce_key(DataType::bf16, TensorLayout{1, 4096}));
  // Every size-1 dimension, wherever it is, including the innermost.
  const PlanKey odd = make_all_reduce_key(DataType::f32, strided({4, 1, 1}, {3, 99, 5}));
  EXPECT_EQ(odd.strides[0], 3);
  EXPECT_EQ(odd.strides[1], 0);
  EXPECT_EQ(odd.strides[2], 0);
}

TEST(PlanKey, NoStridesMeansContiguousRowMajor) {
  EXPECT_EQ(make_all_reduce_key(DataType::f16, TensorLayout{8, 2, 64}),
            make_all_reduce_key(DataType::f16, strided({8, 2, 64}, {128, 64, 1})));
  EXPECT_NE(make_all_reduce_key(DataType::f16, TensorLayout{8, 2, 64}),
            make_all_reduce_key(DataType::f16, strided({8, 2, 64}, {256, 64, 1})));
}

TEST(PlanKey, AllReduceHasNoWeightAndNoEps) {
  const PlanKey key = make_all_reduce_key(DataType::bf16, TensorLayout{2, 64});
  EXPECT_EQ(key.operation, Operation::all_reduce);
  EXPECT_EQ(key.weight, 0u);
  EXPECT_EQ(key.eps_bits, 0u);
}

TEST(PlanKey, FusedKeyHoldsWeightAddressAndEpsBits) {
  const std::vector<std::uint16_t> weight(64);
  const PlanKey key = make_fused_key(DataType::bf16, TensorLayout{2, 64}, weight.data(), 1e-6f);
  EXPECT_EQ(key.operation, Operation::fused_add_rms_norm);
  EXPECT_EQ(key.weight, reinterpret_cast<std::uintptr_t>(weight.data()));
  EXPECT_EQ(key.eps_bits, std::bit_cast<std::uint32_t>(1e-6f));
}

TEST(PlanKey, NegativeZeroEpsIsTheSameAsPositiveZero) {
  const std::vector<std::uint16_t> weight(64);
  const PlanKey plus = make_fused_key(DataType::bf16, TensorLayout{2, 64}, weight.data(), 0.0f);
  const PlanKey minus = make_fused_key(DataType::bf16, TensorLayout{2, 64}, weight.data(), -0.0f);
  EXPECT_EQ(minus.eps_bits, 0u);
  EXPECT_EQ(plus, minus);
  EXPECT_EQ(hash_value(plus), hash_value(minus));
}

TEST(PlanKey, MakeKeyOfADeclarationEqualsTheKeyOfTheMatchingCall) {
  const std::vector<std::uint16_t> weight(4096);
  const auto fused = Declaration::fused_add_rms_norm("n", DataType::bf16, TensorLayout{4, 4096},
                                                     weight.data(), 1e-5f);
  EXPECT_EQ(make_key(fused),
            make_fused_key(DataType::bf16, TensorLayout{4, 4096}, weight.data(), 1e-5f));
  const auto plain = Declaration::all_reduce("a", DataType::f32, TensorLayout{4, 4096});
  EXPECT_EQ(make_key(plain), make_all_reduce_key(DataType::f32, TensorLayout{4, 4096}));
}

TEST(PlanKey, CanonicallyEqualKeysHashEqually) {
  const PlanKey a = make_all_reduce_key(DataType::bf16, strided({1, 2, 1, 64}, {7, 64, 3, 1}));
  const PlanKey b = make_all_reduce_key(DataType::bf16, TensorLayout{1, 2, 1, 64});
  ASSERT_EQ(a, b);
  EXPECT_EQ(hash_value(a), hash_value(b));
  EXPECT_EQ(PlanKeyHash{}(a), hash_value(b));
}

// Every field takes part in the hash: changing any one changes it.
TEST(PlanKey, EveryFieldChangesTheHash) {
  const std::vector<std::uint16_t> weight(4096);
  const PlanKey base =
      make_fused_key(DataType::bf16, TensorLayout{4, 2, 4096}, weight.data(), 1e-6f);
  std::vector<PlanKey> variants;
  PlanKey k = base;
  k.operation = Operation::all_reduce;
  variants.push_back(k);
  k = base;
  k.dtype = DataType::f16;
  variants.push_back(k);
  k = base;
  k.rank = 2;
  variants.push_back(k);
  k = base;
  k.eps_bits += 1;
  variants.push_back(k);
  k = base;
  k.weight += 2;
  variants.push_back(k);
  for (int i = 0; i < kMaxRank; ++i) {
    k = base;
    k.shape[i] += 1;
    variants.push_back(k);
    k = base;
    k.strides[i] += 1;
    variants.push_back(k);
  }
  for (std::size_t i = 0; i < variants.size(); ++i) {
    EXPECT_NE(hash_value(variants[i]), hash_value(base)) << "variant " << i;
  }
}

// Keys that differ only in a high, aligned weight address (the usual case:
// allocators hand out 256-byte aligned blocks) or only in the row count
// must still spread over the low bits the table indexes with.
TEST(PlanKey, HashSpreadsAlignedWeightAddressesAndRowCountsOverLowBits) {
  constexpr std::size_t kKeys = 4096;
  constexpr std::uint64_t kBuckets = 8192;  // load 1/2, like the index
  std::unordered_set<std::uint64_t> by_weight, by_rows;
  for (std::size_t i = 0; i < kKeys; ++i) {
    const auto* weight = reinterpret_cast<const void*>(0x7f0000000000ull + i * 8192);
    by_weight.insert(
        hash_value(make_fused_key(DataType::bf16, TensorLayout{8, 4096}, weight, 1e-6f)) &
        (kBuckets - 1));
    by_rows.insert(hash_value(make_all_reduce_key(
                       DataType::bf16, TensorLayout{static_cast<std::int64_t>(i + 1), 4096})) &
                   (kBuckets - 1));
  }
  // A uniform hash fills 8192 * (1 - e^-0.5) ~= 3223 buckets with 4096 keys
  // (standard deviation ~ 25); a weak one (e.g. identity on the address)
  // collapses to a handful.
  EXPECT_GT(by_weight.size(), 3100u);
  EXPECT_GT(by_rows.size(), 3100u);
}

TEST(PlanKey, ToStringOfAllReduce) {
  const PlanKey key = make_all_reduce_key(DataType::bf16, strided({1, 4096}, {8192, 1}));
  EXPECT_EQ(key.to_string(), "all_reduce bf16 [1, 4096] strides [0, 1]");
}

TEST(PlanKey, ToStringOfFusedShowsWeightAndShortestEps) {
  const auto* weight = reinterpret_cast<const void*>(0x7f12345600ull);
  const PlanKey key = make_fused_key(DataType::f16, TensorLayout{2, 4096}, weight, 1e-6f);
  EXPECT_EQ(key.to_string(),
            "fused_add_rms_norm f16 [2, 4096] strides [4096, 1] weight 0x7f12345600 eps 1e-06");
  // Neighbouring eps values print differently.
  const PlanKey next =
      make_fused_key(DataType::f16, TensorLayout{2, 4096}, weight, std::nextafter(1e-6f, 1.0f));
  EXPECT_NE(key.to_string(), next.to_string());
}

}  // namespace
}  // namespace peerplan
