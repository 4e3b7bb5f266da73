// SPDX-License-Identifier: Apache-2.0
#include "transport/host/rms_norm.hpp"

#include <vector>

#include "transport/host/strided_copy.hpp"

namespace peerplan::transport::host {

void add_rms_norm(DataType dtype, const TensorLayout& layout, const void* reduced, void* out,
                  void* residual, const void* weight, float eps) {
  const std::int64_t count = layout.numel();
  if (count == 0) return;
  const std::int64_t hidden = layout.last_dim();
  const std::int64_t rows = count / hidden;
  const std::int64_t step = layout.rank() == 0 ? 1 : layout.stride(layout.rank() - 1);
  const auto bytes = static_cast<std::int64_t>(element_size(dtype));
  std::vector<float> values(static_cast<std::size_t>(hidden));
  visit_element(dtype, [&](auto traits) {
    using E = decltype(traits);
    using S = typename E::Storage;
    const auto* sums = static_cast<const S*>(reduced);
    for (std::int64_t row = 0; row < rows; ++row) {
      for (std::int64_t j = 0; j < hidden; ++j) {
        S s;
        std::memcpy(&s, sums + row * hidden + j, sizeof s);
        values[static_cast<std::size_t>(j)] = E::load(s);
      }
      const std::int64_t offset = row_offset(layout, row) * bytes;
      add_rms_norm_row<E>(values.data(), static_cast<std::byte*>(residual) + offset, weight,
                          static_cast<std::byte*>(out) + offset, step, hidden, eps);
    }
  });
}

}  // namespace peerplan::transport::host
