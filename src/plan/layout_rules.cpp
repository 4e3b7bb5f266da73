// SPDX-License-Identifier: Apache-2.0
#include "plan/layout_rules.hpp"

#include <array>
#include <string>

namespace peerplan::plan {
namespace {

std::string dim_field(const char* what, int i) {
  return std::string("layout.") + what + "[" + std::to_string(i) + "]";
}

bool is_call(LayoutUse use) noexcept { return use != LayoutUse::declaration; }

std::optional<LayoutProblem> check_rank(const TensorLayout& layout) {
  if (layout.rank() >= 1 && layout.rank() <= kMaxRank) return std::nullopt;
  return LayoutProblem{"layout.rank", "is " + std::to_string(layout.rank()) + "; give 1 to " +
                                          std::to_string(kMaxRank) + " dimensions"};
}

std::optional<LayoutProblem> check_dimensions(const TensorLayout& layout, LayoutUse use) {
  for (int i = 0; i < layout.rank(); ++i) {
    const std::int64_t dim = layout.dim(i);
    if (use == LayoutUse::declaration && dim <= 0) {
      return LayoutProblem{dim_field("shape", i),
                           "is " + std::to_string(dim) +
                               "; every dimension must be positive (declare the sizes the "
                               "calls will actually use)"};
    }
    if (dim < 0) {
      return LayoutProblem{dim_field("shape", i),
                           "is " + std::to_string(dim) +
                               "; dimensions must not be negative (0 makes a call without "
                               "elements, which does nothing)"};
    }
  }
  return std::nullopt;
}

bool has_no_elements(const TensorLayout& layout) noexcept {
  for (int i = 0; i < layout.rank(); ++i)
    if (layout.dim(i) == 0) return true;
  return false;
}

// Only strides of dimensions larger than 1 are ever used.
std::optional<LayoutProblem> check_stride_signs(const TensorLayout& layout) {
  for (int i = 0; i < layout.rank(); ++i) {
    if (layout.dim(i) > 1 && layout.stride(i) <= 0) {
      return LayoutProblem{dim_field("strides", i),
                           "is " + std::to_string(layout.stride(i)) +
                               "; strides of dimensions larger than 1 must be positive (no "
                               "broadcast or reversed views: pass a materialised tensor)"};
    }
  }
  return std::nullopt;
}

std::optional<LayoutProblem> check_contiguous_rows(const TensorLayout& layout) {
  const int last = layout.rank() - 1;
  if (layout.dim(last) <= 1 || layout.stride(last) == 1) return std::nullopt;
  return LayoutProblem{dim_field("strides", last),
                       "is " + std::to_string(layout.stride(last)) +
                           "; the innermost dimension must be contiguous (stride 1): make the "
                           "rows contiguous, e.g. with .contiguous()"};
}

// The largest element offset plus one, times the element size, or nullopt
// when that overflows 63 bits. Strides of dimensions > 1 are positive here.
std::optional<std::int64_t> checked_span_bytes(const TensorLayout& layout, DataType dtype) {
  std::int64_t last_offset = 0;
  for (int i = 0; i < layout.rank(); ++i) {
    std::int64_t step = 0;
    if (layout.dim(i) > 1 && (__builtin_mul_overflow(layout.dim(i) - 1, layout.stride(i), &step) ||
                              __builtin_add_overflow(last_offset, step, &last_offset))) {
      return std::nullopt;
    }
  }
  std::int64_t bytes = 0;
  if (__builtin_add_overflow(last_offset, 1, &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<std::int64_t>(element_size(dtype)), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

std::optional<LayoutProblem> check_span(const TensorLayout& layout, DataType dtype) {
  const auto bytes = checked_span_bytes(layout, dtype);
  if (bytes && *bytes <= kMaxSpanBytes) return std::nullopt;
  const std::string size =
      bytes ? std::to_string(*bytes) + " bytes" : std::string("more than 2^63 bytes");
  std::string problem = "(";  // appended, not "(" + ...: GCC 12 warns falsely (-Wrestrict)
  problem += layout.to_string();
  problem += ") spans " + size;
  problem +=
      "; a tensor may span at most 2^48 bytes (256 TiB, more than any rank can hold): check "
      "the shape and strides for a mistake";
  return LayoutProblem{"layout", problem};
}

// Non-overlapping: taking the dimensions larger than 1 from the smallest
// stride up, each stride steps over the whole extent of the one before.
// Declarations must be row-major, so their order is fixed (innermost
// first); a call's order is that of its strides (a transposed tensor is
// fine for the fallback). Row-major layouts that pass as declarations have
// strides rising from the inside out, so every declarable layout passes as
// a call too. Runs after check_span: the products cannot overflow.
std::optional<LayoutProblem> check_non_overlap(const TensorLayout& layout, LayoutUse use) {
  std::array<int, kMaxRank> order{};
  int count = 0;
  for (int i = layout.rank() - 1; i >= 0; --i) {
    if (layout.dim(i) > 1) order[count++] = i;
  }
  if (is_call(use)) {
    // Insertion sort by stride, stable, so equal strides keep innermost
    // first and the message names the outer dimension.
    for (int k = 1; k < count; ++k) {
      const int moving = order[k];
      int j = k;
      for (; j > 0 && layout.stride(order[j - 1]) > layout.stride(moving); --j) {
        order[j] = order[j - 1];
      }
      order[j] = moving;
    }
  }
  for (int k = 1; k < count; ++k) {
    const int inner = order[k - 1];
    const int outer = order[k];
    const std::int64_t needed = layout.stride(inner) * layout.dim(inner);
    if (layout.stride(outer) >= needed) continue;
    const std::string which =
        "strides[" + std::to_string(inner) + "] * shape[" + std::to_string(inner) + "]";
    const std::string remedy =
        use == LayoutUse::declaration
            ? "elements would overlap or the layout is not row-major; declare a row-major, "
              "non-overlapping layout"
            : "elements would overlap; pass a tensor whose elements do not overlap, e.g. "
              "with .contiguous()";
    return LayoutProblem{dim_field("strides", outer),
                         "is " + std::to_string(layout.stride(outer)) + " but must be at least " +
                             std::to_string(needed) + " (" + which + "): " + remedy};
  }
  return std::nullopt;
}

std::optional<LayoutProblem> check_vector_alignment(const TensorLayout& layout, DataType dtype) {
  const auto elem = static_cast<std::int64_t>(element_size(dtype));
  const int last = layout.rank() - 1;
  const std::int64_t run_bytes = layout.dim(last) * elem;
  if (run_bytes % kVectorBytes != 0) {
    return LayoutProblem{
        dim_field("shape", last),
        "is " + std::to_string(layout.dim(last)) + ": a row of " + std::to_string(run_bytes) +
            " bytes is not a multiple of 16 bytes; the P2P kernels move 16-byte vectors, so "
            "make the innermost dimension a multiple of " +
            std::to_string(kVectorBytes / elem) + " elements for " + to_string(dtype)};
  }
  for (int i = 0; i < last; ++i) {
    if (layout.dim(i) == 1) continue;  // its stride is never used
    const std::int64_t stride_bytes = layout.stride(i) * elem;
    if (stride_bytes % kVectorBytes != 0) {
      return LayoutProblem{dim_field("strides", i),
                           "is " + std::to_string(layout.stride(i)) +
                               " elements = " + std::to_string(stride_bytes) +
                               " bytes, not a multiple of 16 bytes; pad the rows so that every "
                               "outer stride is 16-byte aligned"};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<LayoutProblem> find_dtype_problem(DataType dtype) {
  if (is_supported_dtype(dtype)) return std::nullopt;
  return LayoutProblem{"dtype", "has the unsupported value " +
                                    std::to_string(static_cast<int>(dtype)) +
                                    "; use DataType::f16, DataType::bf16 or DataType::f32"};
}

std::optional<LayoutProblem> find_layout_problem(const TensorLayout& layout, DataType dtype,
                                                 LayoutUse use) {
  if (auto p = check_rank(layout)) return p;
  if (auto p = check_dimensions(layout, use)) return p;
  if (is_call(use) && has_no_elements(layout)) return std::nullopt;  // nothing to place
  // Strides the layout computed itself are positive unless the shape's
  // product wrapped: then the span check names the real problem, the size.
  if (layout.has_explicit_strides()) {
    if (auto p = check_stride_signs(layout)) return p;
  }
  if (use != LayoutUse::all_reduce_call) {
    if (auto p = check_contiguous_rows(layout)) return p;
  }
  if (auto p = check_span(layout, dtype)) return p;
  if (auto p = check_non_overlap(layout, use)) return p;
  if (use == LayoutUse::declaration) {
    if (auto p = check_vector_alignment(layout, dtype)) return p;
  }
  return std::nullopt;
}

std::int64_t span_bytes(const TensorLayout& layout, DataType dtype) noexcept {
  std::int64_t last_offset = 0;
  for (int i = 0; i < layout.rank(); ++i) {
    if (layout.dim(i) == 0) return 0;
    if (layout.dim(i) > 1) last_offset += (layout.dim(i) - 1) * layout.stride(i);
  }
  return (last_offset + 1) * static_cast<std::int64_t>(element_size(dtype));
}

}  // namespace peerplan::plan
