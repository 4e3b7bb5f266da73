// SPDX-License-Identifier: Apache-2.0
// The one-GPU kernel loop's inputs and host reference (kernel_loop.cu):
// what each virtual rank starts from and what one call must leave, so that
// a fast wrong kernel cannot pass. All-reduce inputs are small integers
// whose sum is exact in every dtype; the fused op's reference follows the
// library's add + RMSNorm definition (src/transport/host/rms_norm.hpp) in
// fp32 and is compared within rounding. Pure C++ (no CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "peerplan/dtype.hpp"

namespace peerplan::bench::loop {

// "f16", "bf16" or "f32"; throws std::invalid_argument otherwise.
DataType parse_dtype(std::string_view text);
// peerplan::to_string's names, without linking the library.
const char* dtype_name(DataType dtype) noexcept;

using Bytes = std::vector<std::uint8_t>;

// Virtual rank `rank`'s all-reduce input of `count` elements.
Bytes all_reduce_input(DataType dtype, std::int64_t count, int rank);
// Elements of `out` (count elements) that differ from the exact sum of the
// `ranks` virtual ranks' all_reduce_input().
std::int64_t count_all_reduce_wrong(DataType dtype, const Bytes& out, std::int64_t count,
                                    int ranks);

// The fused op's inputs: rank `rank`'s inout and residual (rows * hidden
// elements, dense) and the weight (hidden elements, the same on every rank).
Bytes fused_inout_input(DataType dtype, std::int64_t count, int rank);
Bytes fused_residual_input(DataType dtype, std::int64_t count, int rank);
Bytes fused_weight(DataType dtype, std::int64_t hidden);
// Elements of rank `rank`'s inout and residual after one fused call that
// differ from the reference (residual: exactly; inout: beyond rounding).
std::int64_t count_fused_wrong(DataType dtype, const Bytes& inout, const Bytes& residual,
                               std::int64_t rows, std::int64_t hidden, int rank, int ranks,
                               float eps);

}  // namespace peerplan::bench::loop
