// SPDX-License-Identifier: Apache-2.0
#include "transport/host/reduce.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "transport/host/element.hpp"

namespace peerplan::transport::host {
namespace {

// Accumulates a chunk at a time so that the per-rank inner loop runs over
// contiguous memory (vectorisable) while each element still sums its
// sources in order 0..n-1.
constexpr std::int64_t kChunk = 512;

template <class E, class Emit>
void reduce_chunks(const void* const* sources, int n, std::int64_t first, std::int64_t count,
                   Emit&& emit) {
  using S = typename E::Storage;
  std::array<float, kChunk> acc;
  for (std::int64_t begin = 0; begin < count; begin += kChunk) {
    const std::int64_t len = std::min(kChunk, count - begin);
    const S* src0 = static_cast<const S*>(sources[0]) + first + begin;
    for (std::int64_t i = 0; i < len; ++i) acc[i] = E::load(src0[i]);
    for (int r = 1; r < n; ++r) {
      const S* src = static_cast<const S*>(sources[r]) + first + begin;
      for (std::int64_t i = 0; i < len; ++i) acc[i] += E::load(src[i]);
    }
    emit(begin, len, acc.data());
  }
}

}  // namespace

void reduce_sources(DataType dtype, const void* const* sources, int n, std::int64_t first,
                    std::int64_t count, void* dst) {
  visit_element(dtype, [&](auto traits) {
    using E = decltype(traits);
    auto* out = static_cast<typename E::Storage*>(dst);
    reduce_chunks<E>(sources, n, first, count,
                     [&](std::int64_t begin, std::int64_t len, const float* acc) {
                       for (std::int64_t i = 0; i < len; ++i) out[begin + i] = E::store(acc[i]);
                     });
  });
}

void sum_sources_to_float(DataType dtype, const void* const* sources, int n, std::int64_t first,
                          std::int64_t count, float* dst) {
  visit_element(dtype, [&](auto traits) {
    using E = decltype(traits);
    reduce_chunks<E>(sources, n, first, count,
                     [&](std::int64_t begin, std::int64_t len, const float* acc) {
                       std::copy(acc, acc + len, dst + begin);
                     });
  });
}

void reduce_sources_to_float(DataType dtype, const void* const* sources, int n, std::int64_t first,
                             std::int64_t count, float* dst) {
  visit_element(dtype, [&](auto traits) {
    using E = decltype(traits);
    reduce_chunks<E>(sources, n, first, count,
                     [&](std::int64_t begin, std::int64_t len, const float* acc) {
                       for (std::int64_t i = 0; i < len; ++i)
                         dst[begin + i] = E::load(E::store(acc[i]));
                     });
  });
}

}  // namespace peerplan::transport::host
