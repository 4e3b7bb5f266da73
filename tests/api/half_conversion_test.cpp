// SPDX-License-Identifier: Apache-2.0
// The public fp32 <-> bf16 / f16 conversions (peerplan/half_conversion.hpp):
// exhaustive round trips, an independent decoding of every bf16 and f16
// pattern, every rounding tie between adjacent representable values,
// hand-worked special cases, and use in constant expressions.
//
// The header under test comes first: it must compile on its own.
#include "peerplan/half_conversion.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace peerplan {
namespace {

// Usable in constant expressions, e.g. to build tables at compile time.
static_assert(float_to_bf16_bits(1.0f) == 0x3f80);
static_assert(bf16_bits_to_float(0xc000) == -2.0f);
static_assert(float_to_f16_bits(1.0f) == 0x3c00);
static_assert(f16_bits_to_float(0x0001) == 0x1p-24f);  // the smallest subnormal
static_assert(f16_bits_to_float(float_to_f16_bits(65504.0f)) == 65504.0f);

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

TEST(HalfConversion, EveryBf16PatternRoundTripsThroughFloat) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto pattern = static_cast<std::uint16_t>(h);
    ASSERT_EQ(float_to_bf16_bits(bf16_bits_to_float(pattern)), pattern) << std::hex << h;
  }
}

TEST(HalfConversion, EveryF16PatternRoundTripsThroughFloat) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto pattern = static_cast<std::uint16_t>(h);
    ASSERT_EQ(float_to_f16_bits(f16_bits_to_float(pattern)), pattern) << std::hex << h;
  }
}

// Decodes binary16 from its definition, in double, independently of the
// bit manipulation under test.
double f16_reference(std::uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else {
    magnitude = std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  }
  return sign ? -magnitude : magnitude;
}

TEST(HalfConversion, F16DecodesToItsDefinedValue) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto pattern = static_cast<std::uint16_t>(h);
    const double expected = f16_reference(pattern);
    const float got = f16_bits_to_float(pattern);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(expected)) << std::hex << h;
    }
  }
}

// Decodes bfloat16 from its definition (8 exponent bits, bias 127, 7
// mantissa bits), in double, independently of the bit shift under test.
double bf16_reference(std::uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 7) & 0xff;
  const int mantissa = h & 0x7f;
  double magnitude;
  if (exponent == 0xff) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -133);  // 2^-126 * m / 128
  } else {
    magnitude = std::ldexp(1.0 + mantissa / 128.0, exponent - 127);
  }
  return sign ? -magnitude : magnitude;
}

TEST(HalfConversion, Bf16DecodesToItsDefinedValue) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto pattern = static_cast<std::uint16_t>(h);
    const double expected = bf16_reference(pattern);
    const float got = bf16_bits_to_float(pattern);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(expected)) << std::hex << h;
    }
  }
}

TEST(HalfConversion, Bf16DecodesToTheUpperHalfOfAFloat) {
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(bf16_bits_to_float(0x0001), from_bits(0x00010000u));  // subnormal
  EXPECT_TRUE(std::isinf(bf16_bits_to_float(0x7f80)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(0x7fc1)));
}

// For every pair of adjacent finite positive values a < b of a 16-bit
// format (given by their patterns p, p+1), the exact midpoint must round to
// the one with the even pattern, and the floats just below/above the
// midpoint to a/b. Negative values are the mirror image.
template <class Decode, class Encode>
void check_all_ties(Decode decode, Encode encode, std::uint16_t last_finite) {
  for (std::uint32_t p = 0; p < last_finite; ++p) {
    const auto lo = static_cast<std::uint16_t>(p);
    const auto hi = static_cast<std::uint16_t>(p + 1);
    const double a = decode(lo);
    const double b = decode(hi);
    const auto mid = static_cast<float>((a + b) / 2);  // exact: 12 significant bits at most
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    const std::uint16_t even = (lo % 2 == 0) ? lo : hi;
    ASSERT_EQ(encode(mid), even) << "tie between patterns " << std::hex << p;
    ASSERT_EQ(encode(-mid), even | 0x8000) << "negative tie " << std::hex << p;
    ASSERT_EQ(encode(std::nextafter(mid, 0.0f)), lo) << std::hex << p;
    ASSERT_EQ(encode(std::nextafter(mid, std::numeric_limits<float>::infinity())), hi)
        << std::hex << p;
  }
}

TEST(HalfConversion, F16RoundsEveryTieToEvenAndEverythingElseToNearest) {
  check_all_ties([](std::uint16_t h) { return f16_reference(h); }, float_to_f16_bits, 0x7bff);
}

TEST(HalfConversion, Bf16RoundsEveryTieToEvenAndEverythingElseToNearest) {
  check_all_ties([](std::uint16_t h) { return bf16_reference(h); }, float_to_bf16_bits, 0x7f7f);
}

TEST(HalfConversion, F16HandWorkedValues) {
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_f16_bits(0.1f), 0x2e66);             // 0.0999755859375
  EXPECT_EQ(float_to_f16_bits(-0.0f), 0x8000);            // sign of zero kept
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x1p-11f), 0x3c00);  // tie -> even mantissa 0
  EXPECT_EQ(float_to_f16_bits(1.0f + 0x3p-11f), 0x3c02);  // tie -> even mantissa 2
  // Largest finite, and overflow: 65520 is the tie with 2^16, which is inf.
  EXPECT_EQ(float_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_f16_bits(-1e6f), 0xfc00);
  EXPECT_EQ(float_to_f16_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  // Subnormals: multiples of 2^-24.
  EXPECT_EQ(float_to_f16_bits(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_f16_bits(0x1p-25f), 0x0000);             // tie with 0 -> 0
  EXPECT_EQ(float_to_f16_bits(0x1.8p-25f), 0x0001);           // 0.75 * 2^-24 -> 1
  EXPECT_EQ(float_to_f16_bits(0x3p-25f), 0x0002);             // 1.5 -> 2 (even)
  EXPECT_EQ(float_to_f16_bits(0x5p-25f), 0x0002);             // 2.5 -> 2 (even)
  EXPECT_EQ(float_to_f16_bits(0x1p-14f), 0x0400);             // smallest normal
  EXPECT_EQ(float_to_f16_bits(0x1p-14f - 0x1p-25f), 0x0400);  // 1023.5 -> 1024
  EXPECT_EQ(float_to_f16_bits(1e-30f), 0x0000);
  EXPECT_EQ(float_to_f16_bits(-1e-30f), 0x8000);
}

TEST(HalfConversion, Bf16HandWorkedValues) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(0.1f), 0x3dcd);  // 0x3dcccccd rounds up
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);                     // tie -> even
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x3p-8f), 0x3f82);                     // tie -> even
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflow
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x7f7f7fffu)), 0x7f7f);             // just below the tie
  EXPECT_EQ(float_to_bf16_bits(from_bits(0x00018000u)), 0x0002);  // subnormal tie -> even
}

TEST(HalfConversion, NanStaysNanWithSignEvenWhenPayloadIsOnlyInDroppedBits) {
  const float low_payload = from_bits(0x7f800001u);  // would truncate to inf
  EXPECT_EQ(float_to_f16_bits(low_payload), 0x7e00);
  EXPECT_EQ(float_to_bf16_bits(low_payload), 0x7fc0);
  const float negative_nan = from_bits(0xffc00000u);
  EXPECT_EQ(float_to_f16_bits(negative_nan), 0xfe00);
  EXPECT_EQ(float_to_bf16_bits(negative_nan), 0xffc0);
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(quiet))));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(quiet))));
}

}  // namespace
}  // namespace peerplan
