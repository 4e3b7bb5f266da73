#include "plan/validation.hpp"

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "peerplan/dtype.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/operation.hpp"

namespace peerplan::plan {
namespace {

constexpr std::int64_t kAlignmentBytes = 16;

class DeclarationChecker {
 public:
  DeclarationChecker(const Declaration& declaration, std::size_t position)
      : d_(declaration), position_(position) {}

  void check_all() {
    check_kind();
    check_shape();
    check_stride_signs();
    check_extent();  // after this, products of strides and dims cannot overflow
    check_non_overlap();
    check_alignment();
    if (d_.operation == Operation::fused_add_rms_norm) {
      check_fused_operands();
    } else {
      check_all_reduce_operands();
    }
  }

  [[noreturn]] void fail(std::string_view field, const std::string& problem) const {
    std::string message = "declarations[" + std::to_string(position_) + "] ";
    message += d_.name.empty() ? std::string("(unnamed)") : "(\"" + d_.name + "\")";
    message += ": ";
    message += field;
    message += ' ';
    message += problem;
    throw InvalidArgument(message);
  }

 private:
  std::int64_t elem() const { return static_cast<std::int64_t>(element_size(d_.dtype)); }
  std::string dim_field(const char* what, int i) const {
    return std::string("layout.") + what + "[" + std::to_string(i) + "]";
  }

  void check_kind() const {
    if (d_.operation != Operation::all_reduce && d_.operation != Operation::fused_add_rms_norm) {
      fail("operation", "has the unknown value " + std::to_string(static_cast<int>(d_.operation)) +
                            "; use Operation::all_reduce or Operation::fused_add_rms_norm");
    }
    if (d_.dtype != DataType::f16 && d_.dtype != DataType::bf16 && d_.dtype != DataType::f32) {
      fail("dtype", "has the unsupported value " + std::to_string(static_cast<int>(d_.dtype)) +
                        "; use DataType::f16, DataType::bf16 or DataType::f32");
    }
  }

  void check_shape() const {
    const auto& layout = d_.layout;
    if (layout.rank() < 1 || layout.rank() > kMaxRank) {
      fail("layout.rank", "is " + std::to_string(layout.rank()) + "; give 1 to " +
                              std::to_string(kMaxRank) + " dimensions");
    }
    for (int i = 0; i < layout.rank(); ++i) {
      if (layout.dim(i) <= 0) {
        fail(dim_field("shape", i), "is " + std::to_string(layout.dim(i)) +
                                        "; every dimension must be positive (declare the "
                                        "sizes the calls will actually use)");
      }
    }
  }

  // Contiguous default strides are right by construction; the stride checks
  // matter for explicit ones, but run for both so no layout escapes them.
  void check_stride_signs() const {
    const auto& layout = d_.layout;
    const int last = layout.rank() - 1;
    for (int i = 0; i <= last; ++i) {
      if (layout.dim(i) > 1 && layout.stride(i) <= 0) {
        fail(dim_field("strides", i),
             "is " + std::to_string(layout.stride(i)) +
                 "; strides of dimensions larger than 1 must be positive (no broadcast or "
                 "reversed views: pass a materialised tensor)");
      }
    }
    if (layout.dim(last) > 1 && layout.stride(last) != 1) {
      fail(dim_field("strides", last),
           "is " + std::to_string(layout.stride(last)) +
               "; the innermost dimension must be contiguous (stride 1): make the rows "
               "contiguous, e.g. with .contiguous()");
    }
  }

  void check_non_overlap() const {
    const auto& layout = d_.layout;
    // Row-major and non-overlapping: each dimension of size > 1 must step
    // over the whole extent of the next one of size > 1 (size-1 dimensions
    // have no stride that matters).
    int inner = -1;
    for (int i = layout.rank() - 1; i >= 0; --i) {
      if (layout.dim(i) == 1) continue;
      if (inner >= 0) {
        const std::int64_t needed = layout.stride(inner) * layout.dim(inner);
        if (layout.stride(i) < needed) {
          fail(dim_field("strides", i),
               "is " + std::to_string(layout.stride(i)) + " but must be at least " +
                   std::to_string(needed) + " (strides[" + std::to_string(inner) + "] * shape[" +
                   std::to_string(inner) +
                   "]): elements would overlap or the layout is not row-major; "
                   "declare a row-major, non-overlapping layout");
        }
      }
      inner = i;
    }
  }

  void check_alignment() const {
    const auto& layout = d_.layout;
    const int last = layout.rank() - 1;
    const std::int64_t run_bytes = layout.dim(last) * elem();
    if (run_bytes % kAlignmentBytes != 0) {
      fail(dim_field("shape", last),
           "is " + std::to_string(layout.dim(last)) + ": a row of " + std::to_string(run_bytes) +
               " bytes is not a multiple of 16 bytes; the P2P kernels move 16-byte vectors, so "
               "make the innermost dimension a multiple of " +
               std::to_string(kAlignmentBytes / elem()) + " elements for " +
               to_string(d_.dtype));
    }
    for (int i = 0; i < last; ++i) {
      if (layout.dim(i) == 1) continue;  // its stride is never used
      const std::int64_t stride_bytes = layout.stride(i) * elem();
      if (stride_bytes % kAlignmentBytes != 0) {
        fail(dim_field("strides", i),
             "is " + std::to_string(layout.stride(i)) + " elements = " +
                 std::to_string(stride_bytes) +
                 " bytes, not a multiple of 16 bytes; pad the rows so that every outer stride "
                 "is 16-byte aligned");
      }
    }
    const std::size_t a = d_.input_alignment;
    if (a < static_cast<std::size_t>(kAlignmentBytes) || (a & (a - 1)) != 0) {
      fail("input_alignment", "is " + std::to_string(a) +
                                  "; it must be a power of two of at least 16 bytes (the "
                                  "alignment every call's pointers are guaranteed to have)");
    }
  }

  void check_extent() const {
    const auto& layout = d_.layout;
    std::int64_t last_offset = 0;
    for (int i = 0; i < layout.rank(); ++i) {
      std::int64_t step = 0;
      if (layout.dim(i) > 1 &&
          (__builtin_mul_overflow(layout.dim(i) - 1, layout.stride(i), &step) ||
           __builtin_add_overflow(last_offset, step, &last_offset))) {
        overflow();
      }
    }
    std::int64_t bytes = 0;
    if (__builtin_add_overflow(last_offset, 1, &bytes) ||
        __builtin_mul_overflow(bytes, elem(), &bytes)) {
      overflow();
    }
  }

  [[noreturn]] void overflow() const {
    fail("layout", "spans more than 2^63 bytes (" + d_.layout.to_string() +
                       "); check the shape and strides for a mistake");
  }

  void check_fused_operands() const {
    const auto& layout = d_.layout;
    if (d_.weights.size() != 1) {
      fail("weights", "holds " + std::to_string(d_.weights.size()) +
                          " weights; fused_add_rms_norm needs exactly one norm weight of shape "
                          "[hidden] (use Declaration::fused_add_rms_norm)");
    }
    const NormWeight& weight = d_.weights.front();
    if (weight.length != layout.last_dim()) {
      fail("weights[0].length", "is " + std::to_string(weight.length) +
                                    " but the innermost dimension (hidden) is " +
                                    std::to_string(layout.last_dim()) +
                                    "; the norm weight must have shape [hidden]");
    }
    if (weight.data == nullptr) {
      fail("weights[0].data", "is null; pass the address of the norm weight the calls will use "
                              "(plans are keyed by that address)");
    }
    if (!d_.eps.has_value()) {
      fail("eps", "is missing; fused_add_rms_norm needs the epsilon the calls will pass");
    }
    const float eps = *d_.eps;
    if (!std::isfinite(eps) || eps < 0.0f) {
      char text[32];
      const auto end = std::to_chars(text, text + sizeof text, eps).ptr;
      fail("eps", "is " + std::string(text, end) + "; epsilon must be finite and >= 0");
    }
  }

  void check_all_reduce_operands() const {
    if (!d_.weights.empty()) {
      fail("weights", "holds " + std::to_string(d_.weights.size()) +
                          " weights but all_reduce takes none; remove them, or declare "
                          "fused_add_rms_norm");
    }
    if (d_.eps.has_value()) {
      fail("eps", "is set but all_reduce takes no epsilon; leave it empty, or declare "
                  "fused_add_rms_norm");
    }
  }

  const Declaration& d_;
  std::size_t position_;
};

}  // namespace

void validate_declarations(std::span<const Declaration> declarations) {
  std::unordered_map<std::string_view, std::size_t> first_use;
  first_use.reserve(declarations.size());
  for (std::size_t position = 0; position < declarations.size(); ++position) {
    const Declaration& d = declarations[position];
    DeclarationChecker checker(d, position);
    if (d.name.empty()) {
      checker.fail("name", "is empty; give every declaration a unique, non-empty name (it "
                           "appears in messages and statistics)");
    }
    const auto [it, inserted] = first_use.emplace(d.name, position);
    if (!inserted) {
      checker.fail("name", "is already used by declarations[" + std::to_string(it->second) +
                               "]; names must be unique within one declared set");
    }
    checker.check_all();
  }
}

}  // namespace peerplan::plan
