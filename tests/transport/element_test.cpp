// SPDX-License-Identifier: Apache-2.0
// The host backend's element helpers (transport/host/element.hpp): loads and
// stores of any dtype through float, and rounding to a dtype. The
// conversions themselves are the public ones, tested exhaustively in
// tests/api/half_conversion_test.cpp.
#include "transport/host/element.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <limits>

namespace peerplan::transport::host {
namespace {

TEST(Element, ConversionsAreThePublicOnes) {
  // One implementation: what an application computes with
  // peerplan/half_conversion.hpp is what the host backend computes.
  EXPECT_EQ(&host::float_to_bf16_bits, &peerplan::float_to_bf16_bits);
  EXPECT_EQ(&host::bf16_bits_to_float, &peerplan::bf16_bits_to_float);
  EXPECT_EQ(&host::float_to_f16_bits, &peerplan::float_to_f16_bits);
  EXPECT_EQ(&host::f16_bits_to_float, &peerplan::f16_bits_to_float);
}

TEST(Element, LoadAndStoreAnyDtypeAsFloat) {
  std::byte buffer[4];
  store_from_float(DataType::f32, 0.1f, buffer);
  EXPECT_EQ(load_as_float(DataType::f32, buffer), 0.1f);
  store_from_float(DataType::f16, 0.1f, buffer);
  EXPECT_EQ(load_as_float(DataType::f16, buffer), 0.0999755859375f);  // f16 0x2e66
  store_from_float(DataType::bf16, 0.1f, buffer);
  EXPECT_EQ(load_as_float(DataType::bf16, buffer), std::bit_cast<float>(0x3dcd0000u));
  EXPECT_EQ(round_to(DataType::bf16, 1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(round_to(DataType::f32, 1.0f + 0x1p-8f), 1.0f + 0x1p-8f);
  EXPECT_TRUE(std::isnan(round_to(DataType::f16, std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace peerplan::transport::host
