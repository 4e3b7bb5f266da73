// SPDX-License-Identifier: Apache-2.0
// The layout rules shared by declarations and calls (layout_rules.hpp):
// one test per rule and use, each checking the field the problem names;
// and the property that makes the two paths agree: every layout accepted
// as a declaration is accepted as a call.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "peerplan/layout.hpp"
#include "plan/layout_rules.hpp"
#include "plan_test_support.hpp"

namespace peerplan::plan {
namespace {

using test::strided;

constexpr LayoutUse kDeclaration = LayoutUse::declaration;
constexpr LayoutUse kAllReduce = LayoutUse::all_reduce_call;
constexpr LayoutUse kFused = LayoutUse::fused_call;
constexpr std::int64_t kBig = std::int64_t{1} << 62;

// The field named by the first problem, "" when there is none.
std::string problem_field(const TensorLayout& layout, LayoutUse use,
                          DataType dtype = DataType::f32) {
  const auto problem = find_layout_problem(layout, dtype, use);
  return problem ? problem->field : std::string();
}

std::string problem_text(const TensorLayout& layout, LayoutUse use,
                         DataType dtype = DataType::f32) {
  const auto problem = find_layout_problem(layout, dtype, use);
  return problem ? problem->to_string() : std::string();
}

TEST(LayoutRules, DtypeMustBeKnown) {
  EXPECT_FALSE(find_dtype_problem(DataType::f16));
  EXPECT_FALSE(find_dtype_problem(DataType::bf16));
  EXPECT_FALSE(find_dtype_problem(DataType::f32));
  const auto problem = find_dtype_problem(static_cast<DataType>(7));
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->field, "dtype");
  EXPECT_NE(problem->problem.find("7"), std::string::npos) << problem->problem;
}

TEST(LayoutRules, RankMustBeOneToEight) {
  for (LayoutUse use : {kDeclaration, kAllReduce, kFused}) {
    EXPECT_EQ(problem_field(TensorLayout{}, use), "layout.rank");
  }
}

TEST(LayoutRules, NegativeDimensionsAreRejectedEverywhere) {
  for (LayoutUse use : {kDeclaration, kAllReduce, kFused}) {
    EXPECT_EQ(problem_field(TensorLayout{4, -64}, use), "layout.shape[1]");
  }
}

TEST(LayoutRules, ZeroDimensionsAreNoOpCallsButNotDeclarations) {
  EXPECT_EQ(problem_field(TensorLayout{0, 64}, kDeclaration), "layout.shape[0]");
  EXPECT_EQ(problem_field(TensorLayout{0, 64}, kAllReduce), "");
  EXPECT_EQ(problem_field(TensorLayout{0, 64}, kFused), "");
  // No element is placed, so strides do not matter.
  EXPECT_EQ(problem_field(strided({4, 0}, {-3, 0}), kAllReduce), "");
  EXPECT_EQ(span_bytes(TensorLayout{0, 64}, DataType::f32), 0);
}

TEST(LayoutRules, StridesOfDimensionsLargerThanOneMustBePositive) {
  for (LayoutUse use : {kDeclaration, kAllReduce, kFused}) {
    EXPECT_EQ(problem_field(strided({4, 64}, {0, 1}), use), "layout.strides[0]");
    EXPECT_EQ(problem_field(strided({4, 64}, {-64, 1}), use), "layout.strides[0]");
  }
  EXPECT_EQ(problem_field(strided({4, 64}, {64, 0}), kAllReduce), "layout.strides[1]");
  // A size-1 dimension's stride is never used.
  EXPECT_EQ(problem_field(strided({1, 64}, {-5, 1}), kAllReduce), "");
  EXPECT_EQ(problem_field(strided({1, 64}, {-4, 1}), kDeclaration), "");
}

TEST(LayoutRules, RowsMustBeContiguousForDeclarationsAndFusedCalls) {
  const TensorLayout inner_two = strided({4, 64}, {128, 2});
  EXPECT_EQ(problem_field(inner_two, kDeclaration), "layout.strides[1]");
  EXPECT_EQ(problem_field(inner_two, kFused), "layout.strides[1]");
  EXPECT_EQ(problem_field(inner_two, kAllReduce), "");
}

TEST(LayoutRules, SpanMustNotOverflowNorExceed2To48Bytes) {
  const std::vector<TensorLayout> too_big{
      TensorLayout{kBig + 16},                                     // bytes wrap to 64
      TensorLayout{kBig, 2},                                       // elements wrap to 2^63
      TensorLayout{std::int64_t{1} << 32, std::int64_t{1} << 32},  // elements wrap to 0
      TensorLayout{std::int64_t{1} << 40, 1024},                   // 2^52 bytes
      strided({2, 64}, {kBig, 1}),                                 // a wild stride
  };
  for (const auto& layout : too_big) {
    for (LayoutUse use : {kDeclaration, kAllReduce, kFused}) {
      EXPECT_EQ(problem_field(layout, use), "layout") << layout.to_string();
    }
  }
  EXPECT_NE(problem_text(TensorLayout{std::int64_t{1} << 40, 1024}, kAllReduce)
                .find("spans 4503599627370496 bytes"),
            std::string::npos);
  EXPECT_NE(problem_text(TensorLayout{kBig + 16}, kAllReduce).find("more than 2^63 bytes"),
            std::string::npos);
  // Without strides given, a shape whose product wraps is reported as a
  // span, not as a wrapped stride the user never wrote.
  for (const TensorLayout& layout :
       {TensorLayout{3, std::int64_t{1} << 62, 8}, TensorLayout{2, std::int64_t{1} << 60, 12}}) {
    for (LayoutUse use : {kDeclaration, kAllReduce, kFused}) {
      const std::string text = problem_text(layout, use);
      EXPECT_NE(text.find("spans"), std::string::npos) << layout.to_string() << ": " << text;
      EXPECT_EQ(text.find("layout.strides["), std::string::npos)
          << layout.to_string() << ": " << text;
    }
  }
  // The limit itself is fine; one element more is not.
  const std::int64_t floats = kMaxSpanBytes / 4;
  EXPECT_EQ(problem_field(TensorLayout{floats / 1024, 1024}, kAllReduce), "");
  EXPECT_EQ(span_bytes(TensorLayout{floats / 1024, 1024}, DataType::f32), kMaxSpanBytes);
  EXPECT_EQ(problem_field(TensorLayout{floats + 1}, kAllReduce), "layout");
}

TEST(LayoutRules, DeclarationsMustBeRowMajorAndNotOverlap) {
  EXPECT_EQ(problem_field(strided({4, 64}, {32, 1}), kDeclaration), "layout.strides[0]");
  EXPECT_EQ(problem_field(strided({2, 4, 64}, {64, 128, 1}), kDeclaration), "layout.strides[0]");
  EXPECT_NE(problem_text(strided({4, 64}, {32, 1}), kDeclaration).find("at least 64"),
            std::string::npos);
}

TEST(LayoutRules, CallsMayTakeAnyOrderOfNonOverlappingDimensions) {
  EXPECT_EQ(problem_field(strided({24, 3}, {1, 24}), kAllReduce), "");  // column-major
  EXPECT_EQ(problem_field(strided({2, 4, 64}, {64, 128, 1}), kAllReduce), "");
  EXPECT_EQ(problem_field(strided({2, 4, 64}, {64, 128, 1}), kFused), "");
  EXPECT_EQ(problem_field(strided({3, 20}, {48, 2}), kAllReduce), "");  // inner stride 2
  // Overlapping rows, and two dimensions on one stride.
  EXPECT_EQ(problem_field(strided({4, 64}, {32, 1}), kAllReduce), "layout.strides[0]");
  EXPECT_EQ(problem_field(strided({8, 8}, {1, 1}), kAllReduce), "layout.strides[0]");
  EXPECT_EQ(problem_field(strided({8, 8}, {8, 7}), kAllReduce), "layout.strides[0]");
  // Interleaved: the inner stride 2 leaves gaps, but the outer one steps
  // into them.
  EXPECT_EQ(problem_field(strided({4, 8}, {1, 2}), kAllReduce), "layout.strides[1]");
  const std::string text = problem_text(strided({4, 64}, {32, 1}), kAllReduce);
  EXPECT_NE(text.find("at least 64"), std::string::npos) << text;
  EXPECT_NE(text.find("overlap"), std::string::npos) << text;
}

TEST(LayoutRules, DeclaredRowsAndOuterStridesAreMultiplesOf16Bytes) {
  EXPECT_EQ(problem_field(TensorLayout{4, 12}, kDeclaration, DataType::bf16), "layout.shape[1]");
  EXPECT_EQ(problem_field(strided({4, 64}, {68, 1}), kDeclaration, DataType::bf16),
            "layout.strides[0]");
  // The fallback does not care.
  EXPECT_EQ(problem_field(TensorLayout{4, 12}, kAllReduce, DataType::bf16), "");
  EXPECT_EQ(problem_field(strided({4, 64}, {68, 1}), kFused, DataType::bf16), "");
}

TEST(LayoutRules, EveryDeclarableLayoutIsAcceptedAsACall) {
  // Exhaustive over small 2-D and 3-D layouts with strides 0..9 (and a
  // few negative ones): whatever passes as a declaration passes as a call
  // of either operation, with the same span.
  int declarable = 0;
  for (std::int64_t d0 : {1, 2, 3}) {
    for (std::int64_t d1 : {1, 4, 8}) {
      for (std::int64_t d2 : {1, 4, 8}) {
        for (std::int64_t s0 = -1; s0 < 80; s0 += 3) {
          for (std::int64_t s1 = -1; s1 < 24; ++s1) {
            const TensorLayout layout = strided({d0, d1, d2}, {s0, s1, 1});
            if (find_layout_problem(layout, DataType::f32, kDeclaration)) continue;
            ++declarable;
            EXPECT_FALSE(find_layout_problem(layout, DataType::f32, kAllReduce))
                << layout.to_string();
            EXPECT_FALSE(find_layout_problem(layout, DataType::f32, kFused)) << layout.to_string();
          }
        }
      }
    }
  }
  EXPECT_GT(declarable, 100);
}

TEST(LayoutRules, SpanBytesIsTheExtentOfTheElements) {
  EXPECT_EQ(span_bytes(TensorLayout{2, 64}, DataType::f32), 512);
  EXPECT_EQ(span_bytes(strided({2, 64}, {80, 1}), DataType::bf16), (80 + 64) * 2);
  EXPECT_EQ(span_bytes(strided({1, 64}, {1000, 1}), DataType::f32), 256);  // size-1 stride unused
  EXPECT_EQ(span_bytes(strided({24, 3}, {1, 24}), DataType::f32), 72 * 4);
}

}  // namespace
}  // namespace peerplan::plan
