// SPDX-License-Identifier: Apache-2.0
// Element conversions of the host backend: fp32 <-> bf16 and fp32 <-> f16
// (IEEE binary16), rounding to nearest, ties to even. The conversions are
// the public ones of peerplan/half_conversion.hpp (one implementation, so
// what an application computes on the CPU with them matches the host
// backend bit for bit); this header adds the per-dtype traits and
// load/store helpers the reduction loops use.
#pragma once

#include <cstdint>
#include <cstring>

#include "peerplan/dtype.hpp"
#include "peerplan/half_conversion.hpp"

namespace peerplan::transport::host {

using peerplan::bf16_bits_to_float;
using peerplan::f16_bits_to_float;
using peerplan::float_to_bf16_bits;
using peerplan::float_to_f16_bits;

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
    case DataType::bf16:
      return fn(BF16Element{});
    case DataType::f16:
      return fn(F16Element{});
    case DataType::f32:
      break;
  }
  return fn(F32Element{});
}

// Rounds a float to the nearest value representable in `dtype`.
inline float round_to(DataType dtype, float v) noexcept {
  switch (dtype) {
    case DataType::bf16:
      return bf16_bits_to_float(float_to_bf16_bits(v));
    case DataType::f16:
      return f16_bits_to_float(float_to_f16_bits(v));
    case DataType::f32:
      break;
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
