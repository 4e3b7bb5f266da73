// SPDX-License-Identifier: Apache-2.0
// Validation of call arguments (all_reduce, fused_add_rms_norm), split by
// what the index lookup already proved.
//
// - Before the lookup: the dtype (one comparison), so that a value outside
//   the enum never reaches a key, a transport or MPI.
// - On a hit: the key equals that of a declaration validated at declare
//   (dtype, shape, strides, and for the fused op weight and eps), so the
//   layout needs no work. Only what the key does not fix is checked: the
//   pointers are non-null, aligned to the declaration's input_alignment,
//   in and out are one buffer or apart, and (fused) residual does not
//   overlap inout. A few integer operations.
// - On a miss (the fallback): everything, with the layout rules of
//   plan/layout_rules.hpp for calls, then the pointers (non-null when the
//   call has elements, aligned to the element size, out equal to in or
//   apart from it, residual apart from inout) and eps.
//
// Every failure throws InvalidArgument "<call>: <field> <problem>" before
// anything is read, written, reduced or counted.
#pragma once

#include <cstdint>

#include "communicator/prepared_plan.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/dtype.hpp"
#include "peerplan/layout.hpp"
#include "plan/layout_rules.hpp"

namespace peerplan::communicator {

[[noreturn]] void throw_unsupported_dtype(const char* what, DataType dtype);
[[noreturn]] void throw_bad_declared_pointers(const char* what, const Declaration& declaration,
                                              const PreparedPlan& plan, const void* first,
                                              const void* second);

inline std::uintptr_t address(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p);
}

// Whether [a, a + bytes) and [b, b + bytes) share a byte.
inline bool ranges_overlap(std::uintptr_t a, std::uintptr_t b, std::uint64_t bytes) noexcept {
  return a < b + bytes && b < a + bytes;
}

inline void check_dtype(const char* what, DataType dtype) {
  if (!plan::is_supported_dtype(dtype)) [[unlikely]]
    throw_unsupported_dtype(what, dtype);
}

// Whether `in` and `out` overlap other than as one buffer (in == out): the
// pieces of a two-shot, the staged kernels and NCCL would overwrite input
// not yet read.
inline bool overlap_partly(const void* in, const void* out, std::uint64_t bytes) noexcept {
  return in != out && ranges_overlap(address(in), address(out), bytes);
}

// Hit path of all_reduce: `in` and `out` (equal, or apart).
inline void check_declared_all_reduce(const void* in, const void* out,
                                      const Declaration& declaration, const PreparedPlan& plan) {
  if (in == nullptr || out == nullptr ||
      ((address(in) | address(out)) & plan.alignment_mask) != 0 ||
      overlap_partly(in, out, plan.span_bytes)) [[unlikely]] {
    throw_bad_declared_pointers("all_reduce", declaration, plan, in, out);
  }
}

// Hit path of fused_add_rms_norm: `inout` and `residual`. The weight is
// part of the key, so it is the declared (validated) one.
inline void check_declared_fused(const void* inout, const void* residual,
                                 const Declaration& declaration, const PreparedPlan& plan) {
  if (inout == nullptr || residual == nullptr ||
      ((address(inout) | address(residual)) & plan.alignment_mask) != 0 ||
      ranges_overlap(address(inout), address(residual), plan.span_bytes)) [[unlikely]] {
    throw_bad_declared_pointers("fused_add_rms_norm", declaration, plan, inout, residual);
  }
}

// Miss path: the whole call.
void check_undeclared_all_reduce(const void* in, const void* out, DataType dtype,
                                 const TensorLayout& layout);
void check_undeclared_fused(const void* inout, const void* residual, const void* weight, float eps,
                            DataType dtype, const TensorLayout& layout);

}  // namespace peerplan::communicator
