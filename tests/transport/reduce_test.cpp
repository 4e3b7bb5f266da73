// SPDX-License-Identifier: Apache-2.0
// The reduction every P2P route uses: fp32 accumulation in fixed source
// order 0..n-1 and a single rounding at the end.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "transport/host/element.hpp"
#include "transport/host/reduce.hpp"

namespace peerplan::transport::host {
namespace {

TEST(Reduce, SumsInFixedRankOrder) {
  // ((1e8 + 1) - 1e8) is 0 in fp32 (1 is below half an ulp of 1e8), while
  // any order that adds the two big values first gives 1.
  const std::vector<float> a{1e8f}, b{1.0f}, c{-1e8f};
  const void* sources[] = {a.data(), b.data(), c.data()};
  float out = -1;
  reduce_sources(DataType::f32, sources, 3, 0, 1, &out);
  EXPECT_EQ(out, 0.0f);
  const void* reordered[] = {a.data(), c.data(), b.data()};
  reduce_sources(DataType::f32, reordered, 3, 0, 1, &out);
  EXPECT_EQ(out, 1.0f);
}

TEST(Reduce, RoundsOnceAfterAccumulatingInFloat) {
  // bf16: 1 + 2^-8 + 2^-8 = 1 + 2^-7 is representable; rounding after each
  // addition would lose both halves (each step is a tie back to 1).
  const std::uint16_t one = float_to_bf16_bits(1.0f);
  const std::uint16_t small = float_to_bf16_bits(0x1p-8f);
  const void* sources[] = {&one, &small, &small};
  std::uint16_t out = 0;
  reduce_sources(DataType::bf16, sources, 3, 0, 1, &out);
  EXPECT_EQ(bf16_bits_to_float(out), 1.0f + 0x1p-7f);

  float as_float = 0;
  reduce_sources_to_float(DataType::bf16, sources, 3, 0, 1, &as_float);
  EXPECT_EQ(as_float, 1.0f + 0x1p-7f);
  const void* two[] = {&one, &small};
  reduce_sources_to_float(DataType::bf16, two, 2, 0, 1, &as_float);
  EXPECT_EQ(as_float, 1.0f);  // rounded to bf16 (tie to even), not 1 + 2^-8
}

TEST(Reduce, RangesAcrossChunkBoundaries) {
  // 1500 elements over several internal chunks, from an offset.
  const int n = 3;
  const std::int64_t count = 1500, first = 37;
  std::vector<std::vector<std::uint16_t>> data(n);
  std::vector<const void*> sources;
  for (int r = 0; r < n; ++r) {
    data[r].resize(static_cast<std::size_t>(first + count));
    for (std::int64_t i = 0; i < first + count; ++i) {
      data[r][i] = float_to_f16_bits(static_cast<float>((i * (r + 3)) % 97) - 40.0f);
    }
    sources.push_back(data[r].data());
  }
  std::vector<std::uint16_t> out(static_cast<std::size_t>(count));
  reduce_sources(DataType::f16, sources.data(), n, first, count, out.data());
  for (std::int64_t i = 0; i < count; ++i) {
    double exact = 0;
    for (int r = 0; r < n; ++r) exact += f16_bits_to_float(data[r][first + i]);
    ASSERT_EQ(f16_bits_to_float(out[i]), exact) << i;  // small integers: exact
  }
}

}  // namespace
}  // namespace peerplan::transport::host
