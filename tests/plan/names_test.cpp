// SPDX-License-Identifier: Apache-2.0
// Names and parsing of data types and operations.
#include <gtest/gtest.h>

#include <string>

#include "peerplan/dtype.hpp"
#include "peerplan/operation.hpp"

namespace peerplan {
namespace {

TEST(DataTypeNames, ToStringNamesEachType) {
  EXPECT_STREQ(to_string(DataType::f16), "f16");
  EXPECT_STREQ(to_string(DataType::bf16), "bf16");
  EXPECT_STREQ(to_string(DataType::f32), "f32");
  EXPECT_STREQ(to_string(static_cast<DataType>(9)), "invalid_dtype");
}

TEST(DataTypeNames, ElementSizes) {
  EXPECT_EQ(element_size(DataType::f16), 2u);
  EXPECT_EQ(element_size(DataType::bf16), 2u);
  EXPECT_EQ(element_size(DataType::f32), 4u);
}

TEST(DataTypeNames, ParseAcceptsCommonSpellingsCaseInsensitively) {
  for (const char* text : {"f16", "fp16", "half", "HALF", "Float16"}) {
    EXPECT_EQ(parse_data_type(text), DataType::f16) << text;
  }
  for (const char* text : {"bf16", "BF16", "bfloat16"}) {
    EXPECT_EQ(parse_data_type(text), DataType::bf16) << text;
  }
  for (const char* text : {"f32", "fp32", "float", "FLOAT32"}) {
    EXPECT_EQ(parse_data_type(text), DataType::f32) << text;
  }
}

TEST(DataTypeNames, ParseRejectsEverythingElse) {
  for (const char* text : {"", "f64", "int8", "bf", "bfloat16x", "f16 ", "float32float32"}) {
    EXPECT_EQ(parse_data_type(text), std::nullopt) << '"' << text << '"';
  }
}

TEST(DataTypeNames, RoundTripsThroughToString) {
  for (DataType dtype : {DataType::f16, DataType::bf16, DataType::f32}) {
    EXPECT_EQ(parse_data_type(to_string(dtype)), dtype);
  }
}

TEST(OperationNames, ToStringNamesEachOperation) {
  EXPECT_STREQ(to_string(Operation::all_reduce), "all_reduce");
  EXPECT_STREQ(to_string(Operation::fused_add_rms_norm), "fused_add_rms_norm");
  EXPECT_STREQ(to_string(static_cast<Operation>(5)), "invalid_operation");
}

}  // namespace
}  // namespace peerplan
