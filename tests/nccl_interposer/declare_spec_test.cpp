// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_NCCL_DECLARE's syntax: types:sizes[:step] groups separated by ';'.
#include <gtest/gtest.h>

#include "test_support.hpp"
#include "nccl_interposer/dispatch_rules.hpp"
#include "nccl_interposer/size_ranges.hpp"

namespace peerplan::nccl_interposer {
namespace {

using test::Buffers;
using test::invalid_argument_message;
using test::says;
using test::Sizes;

std::string spec_error(std::string_view spec) {
  return invalid_argument_message([&] { parse_declare_spec(spec); });
}

TEST(DeclareSpec, EmptyOrBlankDeclaresNothing) {
  EXPECT_TRUE((parse_declare_spec("")).empty());
  EXPECT_TRUE((parse_declare_spec("  ;  ; ")).empty());
}

TEST(DeclareSpec, SingleSizeIsBytesOfTheWholeBuffer) {
  EXPECT_EQ(parse_declare_spec("bf16:1K"), (Buffers{DeclaredBuffer{DataType::bf16, 512}}));
  EXPECT_EQ(parse_declare_spec("f32:1M"), (Buffers{DeclaredBuffer{DataType::f32, 262144}}));
  EXPECT_EQ(parse_declare_spec("f16:6"), (Buffers{DeclaredBuffer{DataType::f16, 3}}));
}

TEST(DeclareSpec, MultiplyingStepLikeNcclTestsF) {
  EXPECT_EQ(parse_declare_spec("f32:1K-8K:x2"),
            (Buffers{DeclaredBuffer{DataType::f32, 256}, DeclaredBuffer{DataType::f32, 512},
                     DeclaredBuffer{DataType::f32, 1024}, DeclaredBuffer{DataType::f32, 2048}}));
  EXPECT_EQ(parse_declare_spec("f32:1K-8K:X4"),
            (Buffers{DeclaredBuffer{DataType::f32, 256}, DeclaredBuffer{DataType::f32, 1024}}));
}

TEST(DeclareSpec, AddingStepLikeNcclTestsI) {
  EXPECT_EQ(parse_declare_spec("f16:1K-4K:+1K"),
            (Buffers{DeclaredBuffer{DataType::f16, 512}, DeclaredBuffer{DataType::f16, 1024},
                     DeclaredBuffer{DataType::f16, 1536}, DeclaredBuffer{DataType::f16, 2048}}));
}

TEST(DeclareSpec, RangeStopsAtTheLastStepNotAboveTheEnd) {
  EXPECT_EQ(expand_sizes("1K-5K", "x2"), (Sizes{1024, 2048, 4096}));
  EXPECT_EQ(expand_sizes("8-30", "+8"), (Sizes{8, 16, 24}));
  EXPECT_EQ(expand_sizes("4K-4K", ""), (Sizes{4096}));
  EXPECT_EQ(expand_sizes("4K-4K", "x2"), (Sizes{4096}));
}

TEST(DeclareSpec, RangeNearTheTopOfSizeTDoesNotOverflow) {
  // 17179869183G is the largest G size below 2^64.
  const auto sizes = expand_sizes("1-17179869183G", "x2");
  ASSERT_EQ(sizes.size(), 64u);
  EXPECT_EQ(sizes.back(), std::size_t{1} << 63);
  EXPECT_EQ(expand_sizes("17179869182G-17179869183G", "+1G"),
            (Sizes{17179869182ull << 30, 17179869183ull << 30}));
}

TEST(DeclareSpec, TheIssuesExampleDeclaresEveryTypeAtEverySize) {
  const auto buffers = parse_declare_spec("bf16,f16,f32:1K-64M:x2");
  ASSERT_EQ(buffers.size(), 3u * 17u);  // 1K, 2K, ..., 64M
  EXPECT_EQ(buffers.front(), (DeclaredBuffer{DataType::f16, 512}));
  EXPECT_EQ(buffers.back(), (DeclaredBuffer{DataType::f32, 16u << 20}));
}

TEST(DeclareSpec, AcceptsNcclTestsTypeNamesAndBlanks) {
  EXPECT_EQ(parse_declare_spec(" half , float,bfloat16 : 4K ;"),
            (Buffers{DeclaredBuffer{DataType::f16, 2048}, DeclaredBuffer{DataType::bf16, 2048},
                     DeclaredBuffer{DataType::f32, 1024}}));
}

TEST(DeclareSpec, GroupsMergeSortedWithoutRepeats) {
  EXPECT_EQ(parse_declare_spec("f32:8;bf16:1K-2K:x2;bf16:1K;f16:4"),
            (Buffers{DeclaredBuffer{DataType::f16, 2}, DeclaredBuffer{DataType::bf16, 512},
                     DeclaredBuffer{DataType::bf16, 1024}, DeclaredBuffer{DataType::f32, 2}}));
}

TEST(DeclareSpec, SizeNotAWholeNumberOfElementsIsAnError) {
  EXPECT_TRUE(says(spec_error("bf16,f32:6"),
                   {"PEERPLAN_NCCL_DECLARE", "'bf16,f32:6'",
                    "6 bytes is not a whole number of f32 elements", "multiples of 4 bytes"}));
  EXPECT_TRUE(says(spec_error("f16:3"), {"multiples of 2 bytes"}));
  EXPECT_TRUE(says(spec_error("f32:8-20:+6"), {"14 bytes"}));
}

TEST(DeclareSpec, ErrorsNameTheGroupAtFault) {
  EXPECT_TRUE(
      says(spec_error("bf16:1K;f32:1Q"), {"in 'f32:1Q'", "'1Q' is not a size", "K, M or G"}));
}

TEST(DeclareSpec, TypesPeerplanDoesNotReduceAreErrors) {
  EXPECT_TRUE(says(spec_error("int32:1K"),
                   {"'int32' is not a type peerplan reduces", "f16 (half), bf16 (bfloat16)"}));
  EXPECT_TRUE(says(spec_error("double:1K"), {"'double'"}));
  EXPECT_TRUE(says(spec_error("bf16,,f32:1K"), {"empty item"}));
  EXPECT_TRUE(says(spec_error(":1K"), {"empty item"}));
}

TEST(DeclareSpec, WrongNumberOfPartsShowsTheForm) {
  EXPECT_TRUE(says(spec_error("bf16"), {"1 ':'-separated parts", "types:sizes[:step]"}));
  EXPECT_TRUE(says(spec_error("bf16:1K-2K:x2:x2"), {"4 ':'-separated parts"}));
}

TEST(DeclareSpec, RangeNeedsAStepAndASingleSizeTakesNone) {
  EXPECT_TRUE(says(spec_error("bf16:1K-64M"), {"has no step", "x2"}));
  EXPECT_TRUE(says(spec_error("bf16:1M:x2"), {"a step belongs to a range"}));
  EXPECT_TRUE(says(spec_error("bf16:1K-64M:"), {"has no step"}));
}

TEST(DeclareSpec, BadRangesAndStepsAreErrors) {
  EXPECT_TRUE(says(spec_error("bf16:64M-1K:x2"), {"starts above its end"}));
  EXPECT_TRUE(says(spec_error("bf16:1K-2K:x1"), {"never grows"}));
  EXPECT_TRUE(says(spec_error("bf16:1K-2K:+0"), {"never grows"}));
  EXPECT_TRUE(says(spec_error("bf16:1K-2K:y2"), {"not x<factor> or +<amount>"}));
  EXPECT_TRUE(says(spec_error("bf16:1K-2K:x2K"), {"is not a number"}));
  EXPECT_TRUE(says(spec_error("bf16:1K-2K:x-2"), {"is not a number"}));
  EXPECT_TRUE(says(spec_error("bf16:0"), {"a size of 0 declares nothing"}));
  EXPECT_TRUE(says(spec_error("bf16:0-1K:x2"), {"a size of 0"}));
  EXPECT_TRUE(says(spec_error("bf16:-1K"), {"is not a size"}));
  EXPECT_TRUE(says(spec_error("bf16:99999999999999999999"), {"is not a size"}));
}

TEST(DeclareSpec, RangeOfTooManySizesIsAnError) {
  EXPECT_TRUE(says(spec_error("bf16:8-64M:+8"), {"names 8388608 sizes", "more than the 1024"}));
  EXPECT_EQ(expand_sizes("2-2048", "+2").size(), kMaxSizesPerRange);
  EXPECT_TRUE(says(spec_error("f16:2-2050:+2"), {"names 1025 sizes"}));
}

}  // namespace
}  // namespace peerplan::nccl_interposer
