// SPDX-License-Identifier: Apache-2.0
#include "transport/host/call_signature.hpp"

#include <bit>
#include <sstream>

namespace peerplan::transport::host {
namespace {

std::uint64_t kind_word(Operation operation, Route route, DataType dtype,
                        std::uint32_t eps_bits) noexcept {
  return static_cast<std::uint64_t>(operation) | static_cast<std::uint64_t>(route) << 8 |
         static_cast<std::uint64_t>(dtype) << 16 | static_cast<std::uint64_t>(eps_bits) << 32;
}

// The routes the host transport runs, named as its error messages name them
// (the transport layer does not link the routing layer's names).
const char* route_phrase(Route route) noexcept {
  switch (route) {
    case Route::one_shot:
      return "one-shot";
    case Route::two_shot:
      return "two-shot";
    case Route::fused_one_shot:
      return "fused one-shot";
    case Route::hierarchical:
      return "hierarchical";
    default:
      return "another route";
  }
}

}  // namespace

CallSignature all_reduce_signature(Route route, DataType dtype, std::int64_t elements) noexcept {
  return {kind_word(Operation::all_reduce, route, dtype, 0), static_cast<std::uint64_t>(elements),
          0};
}

CallSignature fused_signature(Route route, DataType dtype, std::int64_t elements,
                              std::int64_t hidden, float eps) noexcept {
  return {kind_word(Operation::fused_add_rms_norm, route, dtype, std::bit_cast<std::uint32_t>(eps)),
          static_cast<std::uint64_t>(elements), static_cast<std::uint64_t>(hidden)};
}

std::string describe(const CallSignature& call) {
  std::ostringstream text;
  text << to_string(call.operation()) << " (" << route_phrase(call.route()) << ") of ";
  if (call.operation() == Operation::fused_add_rms_norm && call.row != 0) {
    text << call.elements / call.row << " rows of " << call.row << " " << to_string(call.dtype())
         << ", eps " << std::bit_cast<float>(static_cast<std::uint32_t>(call.kind >> 32));
  } else {
    text << call.elements << " " << to_string(call.dtype()) << " elements";
  }
  return text.str();
}

}  // namespace peerplan::transport::host
