// SPDX-License-Identifier: Apache-2.0
#include "kernel_loop_reference.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "peerplan/half_conversion.hpp"

namespace peerplan::bench::loop {
namespace {

float load(DataType dtype, const Bytes& data, std::int64_t i) {
  if (dtype == DataType::f32) {
    float v;
    std::memcpy(&v, &data[static_cast<std::size_t>(i) * 4], sizeof v);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, &data[static_cast<std::size_t>(i) * 2], sizeof h);
  return dtype == DataType::bf16 ? bf16_bits_to_float(h) : f16_bits_to_float(h);
}

void store(DataType dtype, Bytes& data, std::int64_t i, float v) {
  if (dtype == DataType::f32) {
    std::memcpy(&data[static_cast<std::size_t>(i) * 4], &v, sizeof v);
    return;
  }
  const std::uint16_t h = dtype == DataType::bf16 ? float_to_bf16_bits(v) : float_to_f16_bits(v);
  std::memcpy(&data[static_cast<std::size_t>(i) * 2], &h, sizeof h);
}

float round_to(DataType dtype, float v) {
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

// Small integers: every partial sum over 8 ranks is exact in f16 and bf16.
float all_reduce_value(std::int64_t i, int rank) {
  return static_cast<float>(static_cast<int>((i * 7 + rank * 3) % 16) - 8);
}
float fused_inout_value(std::int64_t i, int rank) {
  return static_cast<float>(static_cast<int>((i * 5 + rank * 3) % 8) - 4);
}
float fused_residual_value(std::int64_t i, int rank) {
  return static_cast<float>(static_cast<int>((i * 3 + rank) % 6) - 3);
}

template <class ValueOf>
Bytes filled(DataType dtype, std::int64_t count, ValueOf&& value_of) {
  Bytes data(static_cast<std::size_t>(count) * element_size(dtype));
  for (std::int64_t i = 0; i < count; ++i) store(dtype, data, i, value_of(i));
  return data;
}

}  // namespace

DataType parse_dtype(std::string_view text) {
  if (text == "f16") return DataType::f16;
  if (text == "bf16") return DataType::bf16;
  if (text == "f32") return DataType::f32;
  throw std::invalid_argument("--dtype: '" + std::string(text) + "' is not f16, bf16 or f32");
}

const char* dtype_name(DataType dtype) noexcept {
  switch (dtype) {
    case DataType::f16:
      return "f16";
    case DataType::bf16:
      return "bf16";
    case DataType::f32:
      break;
  }
  return "f32";
}

Bytes all_reduce_input(DataType dtype, std::int64_t count, int rank) {
  return filled(dtype, count, [&](std::int64_t i) { return all_reduce_value(i, rank); });
}

std::int64_t count_all_reduce_wrong(DataType dtype, const Bytes& out, std::int64_t count,
                                    int ranks) {
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int q = 0; q < ranks; ++q) expected += all_reduce_value(i, q);
    if (load(dtype, out, i) != expected) ++wrong;
  }
  return wrong;
}

Bytes fused_inout_input(DataType dtype, std::int64_t count, int rank) {
  return filled(dtype, count, [&](std::int64_t i) { return fused_inout_value(i, rank); });
}

Bytes fused_residual_input(DataType dtype, std::int64_t count, int rank) {
  return filled(dtype, count, [&](std::int64_t i) { return fused_residual_value(i, rank); });
}

Bytes fused_weight(DataType dtype, std::int64_t hidden) {
  return filled(dtype, hidden,
                [](std::int64_t j) { return 0.5f + static_cast<float>(j % 8) / 16.0f; });
}

std::int64_t count_fused_wrong(DataType dtype, const Bytes& inout, const Bytes& residual,
                               std::int64_t rows, std::int64_t hidden, int rank, int ranks,
                               float eps) {
  const Bytes weight = fused_weight(dtype, hidden);
  std::vector<float> r(static_cast<std::size_t>(hidden));
  std::int64_t wrong = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    float sum_of_squares = 0;
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::int64_t i = row * hidden + j;
      float s = 0;
      for (int q = 0; q < ranks; ++q) s += fused_inout_value(i, q);
      const float value = round_to(dtype, round_to(dtype, s) + fused_residual_value(i, rank));
      r[static_cast<std::size_t>(j)] = value;
      sum_of_squares += value * value;
      if (load(dtype, residual, i) != value) ++wrong;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_of_squares / static_cast<float>(hidden) + eps);
    for (std::int64_t j = 0; j < hidden; ++j) {
      const float y =
          round_to(dtype, r[static_cast<std::size_t>(j)] * inv_rms * load(dtype, weight, j));
      const float x = load(dtype, inout, row * hidden + j);
      if (!(std::fabs(x - y) <= 0.02f * std::fabs(y) + 0.02f)) ++wrong;
    }
  }
  return wrong;
}

}  // namespace peerplan::bench::loop
