// SPDX-License-Identifier: Apache-2.0
// Names of routes and fallback reasons, as the route table, TRACE lines and
// stats print them.
#include "peerplan/route.hpp"

namespace peerplan {

const char* to_string(Route route) noexcept {
  switch (route) {
    case Route::one_shot:
      return "one_shot";
    case Route::two_shot:
      return "two_shot";
    case Route::fused_one_shot:
      return "fused_one_shot";
    case Route::fallback:
      return "fallback";
    case Route::hierarchical:
      return "hierarchical";
    case Route::fused_two_shot:
      return "fused_two_shot";
  }
  return "unknown";
}

const char* to_string(FallbackReason reason) noexcept {
  switch (reason) {
    case FallbackReason::none:
      return "none";
    case FallbackReason::undeclared:
      return "undeclared";
    case FallbackReason::over_cutoff:
      return "over_cutoff";
    case FallbackReason::p2p_disabled:
      return "p2p_disabled";
    case FallbackReason::node_layout:
      return "node_layout";
  }
  return "unknown";
}

const char* to_string(Protocol protocol) noexcept {
  switch (protocol) {
    case Protocol::none:
      return "none";
    case Protocol::staged:
      return "staged";
    case Protocol::ll:
      return "ll";
    case Protocol::lamport:
      return "lamport";
    case Protocol::pull:
      return "pull";
    case Protocol::dma:
      return "dma";
  }
  return "unknown";
}

}  // namespace peerplan
