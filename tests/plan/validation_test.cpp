// SPDX-License-Identifier: Apache-2.0
// Declaration validation (docs/design.md, Declare): one test per rule, each
// checking that the message names the offending declaration (position and
// name) and the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "peerplan/declaration.hpp"
#include "peerplan/errors.hpp"
#include "plan/validation.hpp"
#include "plan_test_support.hpp"

namespace peerplan::plan {
namespace {

using test::strided;

class Validation : public ::testing::Test {
 protected:
  // A valid set; each test breaks declaration 1 ("target") in one way.
  Validation() : weight_(4096), other_weight_(4096) {
    set_.push_back(Declaration::all_reduce("first", DataType::bf16, TensorLayout{8, 4096}));
    set_.push_back(Declaration::fused_add_rms_norm("target", DataType::bf16, TensorLayout{4, 4096},
                                                   weight_.data(), 1e-6f));
    set_.push_back(Declaration::all_reduce("last", DataType::f32, TensorLayout{2, 1024}));
  }

  Declaration& target() { return set_[1]; }
  void make_target_all_reduce() {
    target() = Declaration::all_reduce("target", DataType::bf16, TensorLayout{4, 4096});
  }

  // Expects rejection naming declarations[position], its name and `field`.
  void expect_rejected(const std::string& field, std::size_t position = 1,
                       const std::string& name = "target") {
    try {
      validate_declarations(set_);
      ADD_FAILURE() << "accepted a set whose declaration " << position << " has a bad " << field;
    } catch (const InvalidArgument& error) {
      const std::string message = error.what();
      EXPECT_EQ(error.code(), ErrorCode::invalid_argument);
      const std::string where = "declarations[" + std::to_string(position) + "]";
      EXPECT_NE(message.find(where), std::string::npos) << message;
      const std::string quoted = name.empty() ? "(unnamed)" : "\"" + name + "\"";
      EXPECT_NE(message.find(quoted), std::string::npos) << message;
      EXPECT_NE(message.find(": " + field + " "), std::string::npos)
          << "field " << field << " not named: " << message;
      last_message_ = message;
    }
  }

  std::vector<std::uint16_t> weight_, other_weight_;
  std::vector<Declaration> set_;
  std::string last_message_;
};

TEST_F(Validation, AcceptsAValidSet) { EXPECT_NO_THROW(validate_declarations(set_)); }

TEST_F(Validation, AcceptsEdgeCasesThatAreValid) {
  // Trimmed one-row output with a padded row stride; a size-1 middle dimension
  // with an odd (irrelevant) stride; eps 0; f32 rows of 4 elements (16 bytes);
  // padded rows whose stride is 16-byte aligned; a larger input alignment.
  set_.push_back(Declaration::all_reduce("one_row", DataType::bf16, strided({1, 4096}, {8192, 1})));
  set_.push_back(
      Declaration::all_reduce("odd_middle", DataType::bf16, strided({2, 1, 64}, {64, 7, 1})));
  set_.push_back(Declaration::fused_add_rms_norm("eps0", DataType::bf16, TensorLayout{2, 4096},
                                                 other_weight_.data(), 0.0f));
  set_.push_back(Declaration::all_reduce("f32_rows", DataType::f32, TensorLayout{3, 4}));
  set_.push_back(Declaration::all_reduce("padded", DataType::bf16, strided({4, 64}, {72, 1})));
  auto aligned = Declaration::all_reduce("aligned", DataType::f16, TensorLayout{8});
  aligned.input_alignment = 256;
  set_.push_back(aligned);
  EXPECT_NO_THROW(validate_declarations(set_));
}

TEST_F(Validation, AcceptsAnEmptySet) {
  EXPECT_NO_THROW(validate_declarations(std::vector<Declaration>{}));
}

TEST_F(Validation, NameMustNotBeEmpty) {
  target().name.clear();
  expect_rejected("name", 1, "");
}

TEST_F(Validation, NamesMustBeUnique) {
  target().name = "first";
  expect_rejected("name", 1, "first");
  EXPECT_NE(last_message_.find("declarations[0]"), std::string::npos) << last_message_;
}

TEST_F(Validation, OperationMustBeKnown) {
  target().operation = static_cast<Operation>(7);
  expect_rejected("operation");
}

TEST_F(Validation, DtypeMustBeF16Bf16OrF32) {
  target().dtype = static_cast<DataType>(3);
  expect_rejected("dtype");
}

TEST_F(Validation, RankMustBeAtLeastOne) {
  target().layout = TensorLayout{};
  expect_rejected("layout.rank");
}

TEST_F(Validation, EveryDimensionMustBePositive) {
  target().layout = TensorLayout{0, 4096};
  expect_rejected("layout.shape[0]");
  target().layout = TensorLayout{4, -4096};
  expect_rejected("layout.shape[1]");
}

TEST_F(Validation, StridesOfDimensionsLargerThanOneMustBePositive) {
  make_target_all_reduce();
  target().layout = strided({4, 4096}, {0, 1});
  expect_rejected("layout.strides[0]");
  target().layout = strided({4, 4096}, {-4096, 1});
  expect_rejected("layout.strides[0]");
}

TEST_F(Validation, InnermostStrideMustBeOne) {
  make_target_all_reduce();
  target().layout = strided({4, 4096}, {8192, 2});
  expect_rejected("layout.strides[1]");
}

TEST_F(Validation, StridesMustNotOverlapAndBeRowMajor) {
  make_target_all_reduce();
  target().layout = strided({4, 64}, {32, 1});  // rows overlap
  expect_rejected("layout.strides[0]");
  // Outer dimensions transposed: row-major order is violated.
  target().layout = strided({2, 4, 64}, {64, 128, 1});
  expect_rejected("layout.strides[0]");
}

TEST_F(Validation, RowBytesMustBeAMultipleOf16) {
  make_target_all_reduce();
  target().layout = TensorLayout{4, 12};  // 24 bytes of bf16
  expect_rejected("layout.shape[1]");
}

TEST_F(Validation, OuterStridesInBytesMustBeMultiplesOf16) {
  make_target_all_reduce();
  target().layout = strided({4, 64}, {68, 1});  // 136 bytes
  expect_rejected("layout.strides[0]");
}

TEST_F(Validation, InputAlignmentMustBeAPowerOfTwoOfAtLeast16) {
  target().input_alignment = 8;
  expect_rejected("input_alignment");
  target().input_alignment = 48;
  expect_rejected("input_alignment");
}

TEST_F(Validation, ByteExtentMustFitIn63Bits) {
  make_target_all_reduce();
  target().layout = TensorLayout{std::int64_t{1} << 40, std::int64_t{1} << 30};
  expect_rejected("layout");
}

TEST_F(Validation, ByteExtentMustNotExceed2To48) {
  make_target_all_reduce();
  target().layout = TensorLayout{std::int64_t{1} << 40, 1024};  // 2^51 bytes of bf16
  expect_rejected("layout");
  EXPECT_NE(last_message_.find("2^48"), std::string::npos) << last_message_;
}

TEST_F(Validation, FusedNeedsExactlyOneWeight) {
  target().weights.clear();
  expect_rejected("weights");
  target().weights = {{weight_.data(), 4096}, {other_weight_.data(), 4096}};
  expect_rejected("weights");
}

TEST_F(Validation, FusedWeightLengthMustEqualTheInnermostDimension) {
  target().weights[0].length = 2048;
  expect_rejected("weights[0].length");
}

TEST_F(Validation, FusedWeightMustNotBeNull) {
  target().weights[0].data = nullptr;
  expect_rejected("weights[0].data");
}

TEST_F(Validation, FusedWeightMustBeAlignedToItsElement) {
  target().weights[0].data = reinterpret_cast<const std::byte*>(weight_.data()) + 1;
  expect_rejected("weights[0].data");
}

TEST_F(Validation, FusedNeedsEps) {
  target().eps.reset();
  expect_rejected("eps");
}

TEST_F(Validation, FusedEpsMustBeFiniteAndNonNegative) {
  for (float eps :
       {-1e-6f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    target().eps = eps;
    expect_rejected("eps");
  }
  target().eps = -0.0f;  // the same epsilon as +0.0
  EXPECT_NO_THROW(validate_declarations(set_));
}

TEST_F(Validation, AllReduceTakesNoWeight) {
  make_target_all_reduce();
  target().weights.push_back({weight_.data(), 4096});
  expect_rejected("weights");
}

TEST_F(Validation, AllReduceTakesNoEps) {
  make_target_all_reduce();
  target().eps = 1e-6f;
  expect_rejected("eps");
}

TEST_F(Validation, TheFirstBadDeclarationIsReported) {
  set_[2].layout = TensorLayout{0, 4};
  target().dtype = static_cast<DataType>(9);
  expect_rejected("dtype");
}

}  // namespace
}  // namespace peerplan::plan
