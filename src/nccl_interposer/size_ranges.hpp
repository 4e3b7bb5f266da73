// SPDX-License-Identifier: Apache-2.0
// The size syntax PEERPLAN_NCCL_DECLARE and plan files share: one size
// ("1M") or a range with a step ("1K-64M" with "x2" or "+N"), sizes as
// digits with an optional K, M or G (1024 multiples), the way nccl-tests'
// -b/-e/-f/-i take them. Errors are peerplan::InvalidArgument reading
// "problem; what to change", for the caller to prefix with where it was.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "nccl_interposer/dispatch_rules.hpp"
#include "peerplan/dtype.hpp"

namespace peerplan::nccl_interposer {

// One range may name at most this many sizes: each is a plan every rank
// prepares, and a huge list is a step written wrong.
inline constexpr std::size_t kMaxSizesPerRange = 1024;

// What the values count, for messages: bytes of a buffer, or its elements
// (a plan file's count=).
enum class SizeUnit { bytes, elements };

// The values `sizes` (and `step`, empty when none was written) name, in
// increasing order. A range needs a step unless it starts where it ends;
// a single value takes none. No value may be 0.
std::vector<std::size_t> expand_sizes(std::string_view sizes, std::string_view step,
                                      SizeUnit unit = SizeUnit::bytes);

// "bf16,f32": the types of a comma-separated list, each named as
// parse_data_type accepts (nccl-tests' half, float and bfloat16 included).
std::vector<DataType> parse_dtype_list(std::string_view list);

// One buffer per type and size, each size in bytes of the whole buffer:
// each must be a multiple of the type's element size. `named`: the size
// was written on its own (DeclaredBuffer::named).
void append_buffers_of_bytes(std::span<const DataType> dtypes, std::span<const std::size_t> bytes,
                             std::vector<DeclaredBuffer>& out, bool named = false);

// The merged list without repeats, sorted; a buffer is named if any of its
// repeats is.
void sort_and_dedup(std::vector<DeclaredBuffer>& buffers);

}  // namespace peerplan::nccl_interposer
