// SPDX-License-Identifier: Apache-2.0
#include "communicator/call_checks.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "peerplan/errors.hpp"

namespace peerplan::communicator {
namespace {

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

[[noreturn]] void fail(const char* what, const std::string& field, const std::string& problem) {
  throw InvalidArgument(std::string(what) + ": " + field + ' ' + problem);
}

[[noreturn]] void fail_layout(const char* what, const plan::LayoutProblem& problem,
                              const TensorLayout& layout) {
  std::string text = problem.problem;
  // The span problem prints the layout itself; the others name one field.
  if (problem.field != "layout") text += " (the call's layout is " + layout.to_string() + ")";
  fail(what, problem.field, text);
}

void check_layout(const char* what, DataType dtype, const TensorLayout& layout,
                  plan::LayoutUse use) {
  if (auto problem = plan::find_layout_problem(layout, dtype, use)) {
    fail_layout(what, *problem, layout);
  }
}

void check_not_null(const char* what, const char* name, const void* p) {
  if (p == nullptr) {
    fail(what, name,
         "is null; pass the tensor's data pointer (only calls with a dimension of 0 "
         "may pass null)");
  }
}

void check_element_aligned(const char* what, const char* name, const void* p, DataType dtype) {
  const std::size_t elem = element_size(dtype);
  if (address(p) % elem != 0) {
    std::string problem = "(";  // appended, not "(" + ...: GCC 12 warns falsely (-Wrestrict)
    problem += hex(p);
    problem += ") is not " + std::to_string(elem) + "-byte aligned, the size of a ";
    problem += to_string(dtype);
    problem += " element; pass a pointer to the tensor's first element";
    fail(what, name, problem);
  }
}

[[noreturn]] void fail_overlap(const char* what, const void* first, const void* second,
                               std::uint64_t bytes, bool fused) {
  const std::string extent = ", +" + std::to_string(bytes) + " bytes)";
  std::string problem = "[";
  problem += hex(second);
  problem += extent;
  problem += fused ? " overlaps inout [" : " overlaps in [";
  problem += hex(first);
  problem += extent;
  problem += fused ? "; pass separate buffers (the residual is read and rewritten while inout is "
                     "reduced and normalised)"
                   : " without being the same buffer; pass out == in (in place) or a separate "
                     "buffer (the sum is written while parts of in are still to be read)";
  fail(what, fused ? "residual" : "out", problem);
}

}  // namespace

void throw_unsupported_dtype(const char* what, DataType dtype) {
  fail(what, "dtype",
       "has the unsupported value " + std::to_string(static_cast<int>(dtype)) +
           "; use DataType::f16, DataType::bf16 or DataType::f32");
}

void throw_bad_declared_pointers(const char* what, const Declaration& declaration,
                                 const PreparedPlan& plan, const void* first, const void* second) {
  const bool fused = declaration.operation == Operation::fused_add_rms_norm;
  const char* first_name = fused ? "inout" : "in";
  const char* second_name = fused ? "residual" : "out";
  if (first == nullptr) fail(what, first_name, "is null; pass the tensor's data pointer");
  if (second == nullptr) fail(what, second_name, "is null; pass the tensor's data pointer");
  const std::size_t alignment = plan.alignment_mask + 1;
  for (const auto& [name, p] : {std::pair{first_name, first}, std::pair{second_name, second}}) {
    if ((address(p) & plan.alignment_mask) != 0) {
      fail(what, name,
           "(" + hex(p) + ") is not " + std::to_string(alignment) +
               "-byte aligned, which declaration \"" + declaration.name + "\" (input_alignment " +
               std::to_string(alignment) +
               ") promises for every call of its key; pass buffers aligned to " +
               std::to_string(alignment) +
               " bytes, or leave this shape undeclared (the fallback needs element alignment "
               "only)");
    }
  }
  fail_overlap(what, first, second, plan.span_bytes, fused);
}

void check_undeclared_all_reduce(const void* in, const void* out, DataType dtype,
                                 const TensorLayout& layout) {
  constexpr const char* what = "all_reduce";
  check_layout(what, dtype, layout, plan::LayoutUse::all_reduce_call);
  if (layout.numel() == 0) return;  // no element is read or written
  check_not_null(what, "in", in);
  check_not_null(what, "out", out);
  check_element_aligned(what, "in", in, dtype);
  check_element_aligned(what, "out", out, dtype);
  const auto bytes = static_cast<std::uint64_t>(plan::span_bytes(layout, dtype));
  if (overlap_partly(in, out, bytes)) fail_overlap(what, in, out, bytes, /*fused=*/false);
}

void check_undeclared_fused(const void* inout, const void* residual, const void* weight, float eps,
                            DataType dtype, const TensorLayout& layout) {
  constexpr const char* what = "fused_add_rms_norm";
  check_layout(what, dtype, layout, plan::LayoutUse::fused_call);
  if (!(eps >= 0.0f) || !std::isfinite(eps)) {
    char text[32];  // shortest exact text: to_string's six decimals print -1e-9 as -0.000000
    const auto end = std::to_chars(text, text + sizeof text, eps).ptr;
    fail(what, "eps", "is " + std::string(text, end) + "; epsilon must be finite and >= 0");
  }
  if (layout.numel() == 0) return;
  check_not_null(what, "inout", inout);
  check_not_null(what, "residual", residual);
  check_not_null(what, "weight", weight);
  check_element_aligned(what, "inout", inout, dtype);
  check_element_aligned(what, "residual", residual, dtype);
  check_element_aligned(what, "weight", weight, dtype);
  const auto bytes = static_cast<std::uint64_t>(plan::span_bytes(layout, dtype));
  if (ranges_overlap(address(inout), address(residual), bytes)) {
    fail_overlap(what, inout, residual, bytes, /*fused=*/true);
  }
}

}  // namespace peerplan::communicator
