// SPDX-License-Identifier: Apache-2.0
// Host-side conversions between float and the 16-bit floating-point types
// peerplan reduces (DataType::bf16 and DataType::f16), for applications
// that fill or check tensors on the CPU without a half-precision type of
// their own.
//
// Each conversion is written with integer bit manipulation, so the result
// is the same on every compiler and does not depend on _Float16 / __bf16
// support or on the FPU's rounding mode:
//  - float -> 16 bits rounds to nearest, ties to even (as CUDA's
//    __float2bfloat16_rn / __float2half_rn do); values beyond the largest
//    finite become infinity, tiny values become subnormals or zero.
//  - 16 bits -> float is exact (float holds every bf16 and f16 value,
//    subnormals included).
//  - NaNs stay NaN with their sign and leading payload bits, so every one of
//    the 65536 patterns of either type survives a round trip through float
//    unchanged.
// The host backend computes with these same functions. C++20, std only.
#pragma once

#include <bit>
#include <cstdint>

namespace peerplan {

// bf16 (bfloat16): the upper half of a float, 8 exponent bits, 7 mantissa bits.
constexpr float bf16_bits_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

constexpr std::uint16_t float_to_bf16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep the top payload bits; if they were all in the dropped half,
    // set the quiet bit so that the value does not collapse to infinity.
    std::uint16_t h = static_cast<std::uint16_t>(bits >> 16);
    if ((h & 0x7f) == 0) h |= 0x40;
    return h;
  }
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even;
  // a carry out of the mantissa correctly bumps the exponent (up to inf).
  const std::uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

// f16 (IEEE 754 binary16): 5 exponent bits (bias 15), 10 mantissa bits.
constexpr float f16_bits_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) {  // inf or NaN: payload moves to the top of float's
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);  // signed zero
    // Subnormal half = mantissa * 2^-24: normalise it, float has the range.
    int e = 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    mantissa &= 0x3ffu;
    return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(e + 112) << 23) |
                                (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

constexpr std::uint16_t float_to_f16_bits(float value) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude > 0x7f800000u) {  // NaN: keep the top payload bits, stay NaN
    std::uint16_t payload = static_cast<std::uint16_t>((magnitude >> 13) & 0x3ffu);
    if (payload == 0) payload = 0x200;
    return static_cast<std::uint16_t>(sign | 0x7c00u | payload);
  }
  // 65520 is halfway between the largest half (65504) and 2^16; the tie goes
  // to the even neighbour, 2^16, which is infinity. Covers inf itself too.
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);

  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half or zero
    // 2^-25 is half the smallest subnormal; it and anything smaller round to 0.
    if (magnitude <= 0x33000000u) return sign;
    const std::uint32_t exponent = magnitude >> 23;  // 102..112
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    // value / 2^-24 = mantissa * 2^(exponent - 126): shift right by 126 - e.
    const std::uint32_t shift = 126u - exponent;  // 14..24
    std::uint32_t q = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (q & 1u) != 0)) ++q;  // may become 0x400: fine
    return static_cast<std::uint16_t>(sign | q);
  }

  // Normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits.
  std::uint32_t h = (magnitude >> 13) - (112u << 10);
  const std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;  // carry ok
  return static_cast<std::uint16_t>(sign | h);
}

}  // namespace peerplan
