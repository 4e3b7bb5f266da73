// SPDX-License-Identifier: Apache-2.0
// The rules a dtype and a tensor layout must follow, written once for both
// paths that take them: declaration validation (validation.cpp) and the
// call path (the communicator checks every call that misses the index
// against them). Both therefore accept and reject the same things for the
// same reasons, in the same words.
//
// A problem is returned, not thrown, so that each path prefixes it with
// where the value came from ("declarations[3] (\"attn\"): " or
// "all_reduce: ") and the checks allocate nothing unless something is
// wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "peerplan/dtype.hpp"
#include "peerplan/layout.hpp"

namespace peerplan::plan {

// The P2P kernels move 16-byte vectors.
inline constexpr std::int64_t kVectorBytes = 16;

// Largest byte span of one tensor: 2^48 bytes (256 TiB). No rank can hold
// a larger tensor (x86-64 gives a process 128 TiB of addresses with 4-level
// page tables; GPUs hold well under 1 TiB), so a larger span is a mistake
// in the shape or strides, e.g. an uninitialised dimension. The bound also
// keeps every byte count and offset the transports compute far from
// overflowing.
inline constexpr std::int64_t kMaxSpanBytes = std::int64_t{1} << 48;

// Who a layout is for.
enum class LayoutUse : std::uint8_t {
  // A declared plan, which P2P kernels may run: rank 1..8, every dimension
  // > 0, row-major, innermost stride 1, rows and outer strides multiples of
  // 16 bytes, positive non-overlapping strides, span <= kMaxSpanBytes.
  declaration,
  // An all-reduce call that missed the index (the fallback packs any
  // layout): rank 1..8, dimensions >= 0 (a 0 means no elements: the call is
  // a no-op and nothing else is checked), strides of dimensions larger than
  // 1 positive and non-overlapping in some order of the dimensions (the
  // inner stride may exceed 1), span <= kMaxSpanBytes.
  all_reduce_call,
  // A fused call that missed the index: as all_reduce_call, and rows (the
  // last dimension) contiguous, since RMSNorm reads a row as one run.
  fused_call,
};

struct LayoutProblem {
  std::string field;    // what is wrong: "dtype", "layout.strides[1]", "layout"
  std::string problem;  // the value found and what to change: "is 0; ..."

  std::string to_string() const { return field + ' ' + problem; }
};

inline bool is_supported_dtype(DataType dtype) noexcept {
  return dtype == DataType::f16 || dtype == DataType::bf16 || dtype == DataType::f32;
}

// nullopt when `dtype` is f16, bf16 or f32.
std::optional<LayoutProblem> find_dtype_problem(DataType dtype);

// The first broken rule of `use` (see LayoutUse), nullopt when none is.
// `dtype` must be supported (element sizes enter the byte rules).
std::optional<LayoutProblem> find_layout_problem(const TensorLayout& layout, DataType dtype,
                                                 LayoutUse use);

// Bytes from a tensor's first element to one past its last: (largest
// element offset + 1) * element size; 0 when a dimension is 0. Only for
// layouts find_layout_problem accepted (then it cannot overflow).
std::int64_t span_bytes(const TensorLayout& layout, DataType dtype) noexcept;

}  // namespace peerplan::plan
