// SPDX-License-Identifier: Apache-2.0
// The interposer's pure rules (no NCCL, no CUDA): what is declared, which
// ncclAllReduce calls peerplan takes, the counters of what went where, and
// peerplan's exceptions in NCCL's result codes. Built in every build so its
// unit tests run without a GPU.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peerplan/declaration.hpp"
#include "peerplan/dtype.hpp"

namespace peerplan::nccl_interposer {

// Declared sizes: what the interposer hands to Communicator::declare.
struct DeclaredBuffer {
  DataType dtype;
  std::size_t count;  // count in elements
  // Named on its own (one size, not a range with a step), so the user meant
  // this very size: left out as not declarable, it is a WARN, not an INFO.
  // Not part of the order or equality: repeats are one buffer, named if any is.
  bool named = false;

  // "Sorted" below means in this order: by dtype, then by count.
  friend std::strong_ordering operator<=>(const DeclaredBuffer& a, const DeclaredBuffer& b) {
    if (a.dtype != b.dtype) return a.dtype <=> b.dtype;
    return a.count <=> b.count;
  }
  friend bool operator==(const DeclaredBuffer& a, const DeclaredBuffer& b) {
    return a.dtype == b.dtype && a.count == b.count;
  }
};
// Parses PEERPLAN_NCCL_DECLARE's text; throws peerplan::InvalidArgument naming the bad part.
std::vector<DeclaredBuffer> parse_declare_spec(std::string_view spec);
// Parses a plan file's text (path used in messages only); errors name the line.
std::vector<DeclaredBuffer> parse_plan_file(std::string_view text, std::string_view path);
// Reads both variables (either or both may be set), merges, dedups, sorts.
std::vector<DeclaredBuffer> declared_from_environment();

// A declared size peerplan's own validation (plan::validate_declarations,
// what Communicator::declare runs) refuses, e.g. bf16[4]: its row of 8 bytes
// is not a multiple of the 16 bytes the P2P kernels move. Left to NCCL.
struct NotDeclarable {
  DeclaredBuffer buffer;
  std::string reason;  // peerplan's: "layout.shape[0] is 4: a row of 8 bytes ..."
};
// What the interposer declares: `declared[i]` as `declarations[i]`, and the
// sizes left out. One refused declaration would fail declare() for the whole
// set, so each is validated alone; the rule looks at the type and count
// only, so every rank that parsed the same spec leaves out the same sizes.
struct DeclarationSet {
  std::vector<DeclaredBuffer> declared;  // in the order given
  std::vector<Declaration> declarations;
  std::vector<NotDeclarable> not_declarable;  // in the order given
};
// "nccl_bf16_512": the name of `buffer`'s plan, in peerplan's messages.
std::string plan_name(const DeclaredBuffer& buffer);
// An all-reduce of `buffer.count` elements, named plan_name(buffer).
Declaration declaration_for(const DeclaredBuffer& buffer);
DeclarationSet make_declarations(std::span<const DeclaredBuffer> buffers);
// The create-time message on those of `left_out` whose `named` is `named`
// (a WARN for those, an INFO for the others): each size and peerplan's
// reason, one a line; empty when there are none.
std::string not_declarable_message(std::span<const NotDeclarable> left_out, bool named);

enum class NcclType { int8, uint8, int32, uint32, int64, uint64, f16, f32, f64, bf16, other };
enum class NcclOp { sum, prod, max, min, avg, other };
enum class FallbackCause : std::uint8_t {
  not_all_reduce,
  dtype,
  reduction,
  undeclared_count,
  // Declared, but peerplan cannot declare it (NotDeclarable): left to NCCL.
  not_declarable,
  peerplan_route,  // declared, but peerplan routes it to its own fallback
  group_of_many,
  misaligned,
  capture_refused,
  no_communicator,
  peerplan_error,  // failed in peerplan: NCCL did not run it either
  // A peerplan call on the communicator timed out before: refused with
  // ncclRemoteError, run by neither (NCCL fails every operation of a
  // communicator with an asynchronous error alike).
  after_timeout,
  count_
};
std::string_view to_string(FallbackCause);
// The causes of calls that returned an error and ran nowhere (peerplan_error,
// after_timeout): the summary counts them as failed, not as run by NCCL.
constexpr bool ran_nowhere(FallbackCause cause) noexcept {
  return cause == FallbackCause::peerplan_error || cause == FallbackCause::after_timeout;
}
struct AllReduceCall {
  NcclType type;
  NcclOp op;
  std::size_t count;
  const void* send;
  void* recv;
  bool in_group;
  std::size_t ops_in_group;
};
struct Decision {
  bool to_peerplan;
  FallbackCause cause;  // cause valid when !to_peerplan
  // Where the call's (dtype, count) lies in the declared set, valid when
  // to_peerplan: the caller finds what it keeps per size without a second search.
  std::size_t declared_index = 0;
};
// Pure: is this call one peerplan takes, given the declared set (sorted)?
Decision decide(const AllReduceCall& call, std::span<const DeclaredBuffer> declared);
// Per size: hits and fallbacks by cause, printed at finalize. Calls counted
// under a cause that ran_nowhere are reported as failed, by cause, not as
// run by NCCL. Not synchronised: one per communicator, which NCCL uses from
// one thread at a time.
class DispatchCounters {
 public:
  void hit(std::size_t bytes, std::size_t calls = 1);
  void fallback(std::size_t bytes, FallbackCause cause, std::size_t calls = 1);
  std::string summary() const;

 private:
  struct PerSize {
    std::size_t hits = 0;
    std::array<std::size_t, static_cast<std::size_t>(FallbackCause::count_)> fallbacks{};
  };
  std::map<std::size_t, PerSize> by_bytes_;
};
// peerplan exception -> ncclResult_t value (as int: ncclRemoteError=6, ncclInvalidArgument=4,
// ncclInternalError=3, ncclInvalidUsage=5) — use the numeric values of nccl.h's enum but do
// not include nccl.h here.
int nccl_result_for(const std::exception& error) noexcept;

}  // namespace peerplan::nccl_interposer
