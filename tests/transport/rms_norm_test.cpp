// SPDX-License-Identifier: Apache-2.0
// The standalone add + RMSNorm shared by the P2P fused route and the
// fallback: against a float64 reference, exactly on inputs whose result is
// exact, with the documented rounding of the residual, and on strided rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "peerplan/layout.hpp"
#include "transport/host/element.hpp"
#include "transport/host/rms_norm.hpp"

namespace peerplan::transport::host {
namespace {

// Elements of `dtype` in a byte vector, written and read as float.
struct Buffer {
  DataType dtype;
  std::vector<std::byte> bytes;
  Buffer(DataType d, std::size_t n) : dtype(d), bytes(n * element_size(d)) {}
  float get(std::size_t i) const {
    return load_as_float(dtype, bytes.data() + i * element_size(dtype));
  }
  void set(std::size_t i, float v) {
    store_from_float(dtype, v, bytes.data() + i * element_size(dtype));
  }
  void* data() { return bytes.data(); }
};

double tolerance(DataType dtype) {
  switch (dtype) {
    case DataType::bf16:
      return 1.6e-2;  // 2^-7 relative, plus the residual's own rounding
    case DataType::f16:
      return 2e-3;
    case DataType::f32:
      break;
  }
  return 1e-5;
}

class RmsNormDtype : public ::testing::TestWithParam<DataType> {};

TEST_P(RmsNormDtype, MatchesFloat64Reference) {
  const DataType dtype = GetParam();
  const std::int64_t rows = 5, hidden = 384;
  const auto n = static_cast<std::size_t>(rows * hidden);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  Buffer reduced(dtype, n), residual(dtype, n), weight(dtype, hidden), out(dtype, n);
  for (std::size_t i = 0; i < n; ++i) {
    reduced.set(i, dist(rng));
    residual.set(i, dist(rng));
  }
  for (std::int64_t j = 0; j < hidden; ++j) weight.set(j, 0.5f + dist(rng) / 4);
  const Buffer residual_in = residual;
  const float eps = 1e-6f;

  add_rms_norm(dtype, TensorLayout{rows, hidden}, reduced.data(), out.data(), residual.data(),
               weight.data(), eps);

  double worst = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    std::vector<double> r(static_cast<std::size_t>(hidden));
    double squares = 0;
    for (std::int64_t j = 0; j < hidden; ++j) {
      const std::size_t i = row * hidden + j;
      r[j] = static_cast<double>(reduced.get(i)) + residual_in.get(i);
      squares += r[j] * r[j];
      // The stored residual is the sum rounded once to the dtype.
      ASSERT_EQ(residual.get(i), round_to(dtype, static_cast<float>(r[j]))) << i;
    }
    const double inv = 1.0 / std::sqrt(squares / hidden + eps);
    for (std::int64_t j = 0; j < hidden; ++j) {
      const double expected = r[j] * inv * weight.get(j);
      const double error =
          std::abs(out.get(row * hidden + j) - expected) / (std::abs(expected) + 1e-3);
      worst = std::max(worst, error);
    }
  }
  EXPECT_LT(worst, tolerance(dtype));
  // And it actually normalised: not a copy of the input.
  EXPECT_NE(out.get(0), reduced.get(0));
}

TEST_P(RmsNormDtype, ExactOnExactInputsAndStridedRows) {
  // Rows with r = +-2 everywhere: var = 4, 1/sqrt(4) = 0.5, out = +-w exactly.
  const DataType dtype = GetParam();
  const std::int64_t rows = 3, hidden = 4, row_stride = 7;
  const TensorLayout layout = TensorLayout::strided(std::vector<std::int64_t>{rows, hidden},
                                                    std::vector<std::int64_t>{row_stride, 1});
  const auto span = static_cast<std::size_t>((rows - 1) * row_stride + hidden);
  Buffer reduced(dtype, rows * hidden), residual(dtype, span), weight(dtype, hidden),
      out(dtype, span);
  for (std::size_t k = 0; k < span; ++k) {
    residual.set(k, 99.0f);  // padding sentinels
    out.set(k, 99.0f);
  }
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t j = 0; j < hidden; ++j) {
      const float sign = ((row + j) % 2 == 0) ? 1.0f : -1.0f;
      reduced.set(row * hidden + j, sign * 3.0f);
      residual.set(row * row_stride + j, -sign * 1.0f);  // r = sign * 2
    }
  }
  for (std::int64_t j = 0; j < hidden; ++j) weight.set(j, 0.25f * static_cast<float>(j + 1));

  add_rms_norm(dtype, layout, reduced.data(), out.data(), residual.data(), weight.data(), 0.0f);

  for (std::size_t k = 0; k < span; ++k) {
    const std::int64_t row = static_cast<std::int64_t>(k) / row_stride;
    const std::int64_t j = static_cast<std::int64_t>(k) % row_stride;
    if (j >= hidden) {
      EXPECT_EQ(out.get(k), 99.0f) << "padding written at " << k;
      EXPECT_EQ(residual.get(k), 99.0f) << "padding written at " << k;
      continue;
    }
    const float sign = ((row + j) % 2 == 0) ? 1.0f : -1.0f;
    EXPECT_EQ(residual.get(k), sign * 2.0f) << k;
    EXPECT_EQ(out.get(k), sign * weight.get(j)) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RmsNormDtype,
                         ::testing::Values(DataType::f16, DataType::bf16, DataType::f32),
                         [](const auto& info) {
                           return std::string(info.param == DataType::f16    ? "f16"
                                              : info.param == DataType::bf16 ? "bf16"
                                                                             : "f32");
                         });

TEST(RmsNorm, ResidualIsRoundedBeforeTheStatistics) {
  // bf16: s = 1, residual = 2^-8 -> r = round(1 + 2^-8) = 1 (tie to even), so
  // the stored residual is 1 and, with a single element, out = w * 1/sqrt(1).
  Buffer reduced(DataType::bf16, 1), residual(DataType::bf16, 1), weight(DataType::bf16, 1),
      out(DataType::bf16, 1);
  reduced.set(0, 1.0f);
  residual.set(0, 0x1p-8f);
  weight.set(0, 3.0f);
  add_rms_norm(DataType::bf16, TensorLayout{1, 1}, reduced.data(), out.data(), residual.data(),
               weight.data(), 0.0f);
  EXPECT_EQ(residual.get(0), 1.0f);
  EXPECT_EQ(out.get(0), 3.0f);
}

}  // namespace
}  // namespace peerplan::transport::host
