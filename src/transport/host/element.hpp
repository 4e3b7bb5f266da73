// Element conversions of the host backend: fp32 <-> bf16 and fp32 <-> f16
// (IEEE binary16), both rounding to nearest, ties to even, written with
// integer bit manipulation so that the result does not depend on compiler
// support for _Float16 / __bf16 or on the FPU's rounding mode. NaNs stay
// NaN with their sign and leading payload bits, so every one of the 65536
// 16-bit patterns survives a round trip through float unchanged.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "peerplan/dtype.hpp"

namespace peerplan::transport::host {

constexpr float bf16_bits_to_float(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

constexpr std::uint16_t float_to_bf16_bits(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
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

constexpr float f16_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
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

constexpr std::uint16_t float_to_f16_bits(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
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

// Compile-time element traits, so that inner loops are specialised per dtype
// instead of switching on every element.
struct F32Element {
  using Storage = float;
  static constexpr DataType dtype = DataType::f32;
  static float load(Storage v) noexcept { return v; }
  static Storage store(float v) noexcept { return v; }
};
struct BF16Element {
  using Storage = std::uint16_t;
  static constexpr DataType dtype = DataType::bf16;
  static float load(Storage v) noexcept { return bf16_bits_to_float(v); }
  static Storage store(float v) noexcept { return float_to_bf16_bits(v); }
};
struct F16Element {
  using Storage = std::uint16_t;
  static constexpr DataType dtype = DataType::f16;
  static float load(Storage v) noexcept { return f16_bits_to_float(v); }
  static Storage store(float v) noexcept { return float_to_f16_bits(v); }
};

// Calls fn(ElementTraits{}) for the traits of `dtype`.
template <class Fn>
decltype(auto) visit_element(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::bf16: return fn(BF16Element{});
    case DataType::f16: return fn(F16Element{});
    case DataType::f32: break;
  }
  return fn(F32Element{});
}

// Rounds a float to the nearest value representable in `dtype`.
inline float round_to(DataType dtype, float v) noexcept {
  switch (dtype) {
    case DataType::bf16: return bf16_bits_to_float(float_to_bf16_bits(v));
    case DataType::f16: return f16_bits_to_float(float_to_f16_bits(v));
    case DataType::f32: break;
  }
  return v;
}

// One element of any dtype at `p` (no alignment required), as float.
inline float load_as_float(DataType dtype, const void* p) noexcept {
  if (dtype == DataType::f32) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return dtype == DataType::bf16 ? bf16_bits_to_float(h) : f16_bits_to_float(h);
}

// Stores `v` rounded to `dtype` at `p` (no alignment required).
inline void store_from_float(DataType dtype, float v, void* p) noexcept {
  if (dtype == DataType::f32) {
    std::memcpy(p, &v, sizeof v);
    return;
  }
  const std::uint16_t h = dtype == DataType::bf16 ? float_to_bf16_bits(v) : float_to_f16_bits(v);
  std::memcpy(p, &h, sizeof h);
}

}  // namespace peerplan::transport::host
