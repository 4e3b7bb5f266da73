// SPDX-License-Identifier: Apache-2.0
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
#include "plan/layout_rules.hpp"

namespace peerplan::plan {
namespace {

class DeclarationChecker {
 public:
  DeclarationChecker(const Declaration& declaration, std::size_t position)
      : d_(declaration), position_(position) {}

  void check_all() {
    check_operation();
    if (auto problem = find_dtype_problem(d_.dtype)) fail(*problem);
    if (auto problem = find_layout_problem(d_.layout, d_.dtype, LayoutUse::declaration)) {
      fail(*problem);
    }
    check_input_alignment();
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
  [[noreturn]] void fail(const LayoutProblem& problem) const {
    fail(problem.field, problem.problem);
  }

 private:
  void check_operation() const {
    if (d_.operation != Operation::all_reduce && d_.operation != Operation::fused_add_rms_norm) {
      fail("operation", "has the unknown value " + std::to_string(static_cast<int>(d_.operation)) +
                            "; use Operation::all_reduce or Operation::fused_add_rms_norm");
    }
  }

  void check_input_alignment() const {
    const std::size_t a = d_.input_alignment;
    if (a < static_cast<std::size_t>(kVectorBytes) || (a & (a - 1)) != 0) {
      fail("input_alignment", "is " + std::to_string(a) +
                                  "; it must be a power of two of at least 16 bytes (the "
                                  "alignment every call's pointers are guaranteed to have)");
    }
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
      fail("weights[0].length",
           "is " + std::to_string(weight.length) + " but the innermost dimension (hidden) is " +
               std::to_string(layout.last_dim()) + "; the norm weight must have shape [hidden]");
    }
    if (weight.data == nullptr) {
      fail("weights[0].data",
           "is null; pass the address of the norm weight the calls will use "
           "(plans are keyed by that address)");
    }
    // Calls that hit this plan pass exactly this address, unchecked.
    const std::size_t elem = element_size(d_.dtype);
    if (reinterpret_cast<std::uintptr_t>(weight.data) % elem != 0) {
      fail("weights[0].data", "is not aligned to its " + std::to_string(elem) + "-byte " +
                                  to_string(d_.dtype) +
                                  " elements; pass the address of a properly allocated weight");
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
      fail("eps",
           "is set but all_reduce takes no epsilon; leave it empty, or declare "
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
      checker.fail("name",
                   "is empty; give every declaration a unique, non-empty name (it "
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
