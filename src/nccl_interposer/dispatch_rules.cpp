// SPDX-License-Identifier: Apache-2.0
// What runs where: the rules an ncclAllReduce call passes to run on
// peerplan, checked in a fixed order so that a call failing several of them
// is counted under the first (docs/nccl-interposer.md lists them).
#include "nccl_interposer/dispatch_rules.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace peerplan::nccl_interposer {
namespace {

// The pointer alignment peerplan admits for a declared plan: the default
// Declaration::input_alignment, which the interposer's declarations keep.
constexpr std::uintptr_t kAdmittedAlignment = 16;

std::optional<DataType> peerplan_type(NcclType type) noexcept {
  switch (type) {
    case NcclType::f16:
      return DataType::f16;
    case NcclType::bf16:
      return DataType::bf16;
    case NcclType::f32:
      return DataType::f32;
    default:
      return std::nullopt;
  }
}

// Null counts as misaligned: peerplan refuses it; NCCL reports its own error.
bool admitted(const void* pointer) noexcept {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  return address != 0 && address % kAdmittedAlignment == 0;
}

Decision to_nccl(FallbackCause cause) noexcept { return {false, cause}; }

}  // namespace

std::string_view to_string(FallbackCause cause) {
  switch (cause) {
    case FallbackCause::not_all_reduce:
      return "not_all_reduce";
    case FallbackCause::dtype:
      return "dtype";
    case FallbackCause::reduction:
      return "reduction";
    case FallbackCause::undeclared_count:
      return "undeclared_count";
    case FallbackCause::not_declarable:
      return "not_declarable";
    case FallbackCause::peerplan_route:
      return "peerplan_route";
    case FallbackCause::group_of_many:
      return "group_of_many";
    case FallbackCause::misaligned:
      return "misaligned";
    case FallbackCause::capture_refused:
      return "capture_refused";
    case FallbackCause::no_communicator:
      return "no_communicator";
    case FallbackCause::peerplan_error:
      return "peerplan_error";
    case FallbackCause::after_timeout:
      return "after_timeout";
    case FallbackCause::count_:
      break;
  }
  return "no_cause";
}

Decision decide(const AllReduceCall& call, std::span<const DeclaredBuffer> declared) {
  const std::optional<DataType> dtype = peerplan_type(call.type);
  if (!dtype) return to_nccl(FallbackCause::dtype);
  if (call.op != NcclOp::sum) return to_nccl(FallbackCause::reduction);
  // A call without elements is NCCL's no-op, whatever was declared.
  const DeclaredBuffer key{*dtype, call.count};
  const auto found = std::lower_bound(declared.begin(), declared.end(), key);
  if (call.count == 0 || found == declared.end() || !(*found == key))
    return to_nccl(FallbackCause::undeclared_count);
  // A group of several operations must run as one unit, which only NCCL can do.
  if (call.in_group && call.ops_in_group > 1) return to_nccl(FallbackCause::group_of_many);
  if (!admitted(call.send) || !admitted(call.recv)) return to_nccl(FallbackCause::misaligned);
  return {true, FallbackCause::count_, static_cast<std::size_t>(found - declared.begin())};
}

}  // namespace peerplan::nccl_interposer
