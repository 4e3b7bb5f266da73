// SPDX-License-Identifier: Apache-2.0
// Names of the collectives a plan can be declared for.
#include "peerplan/operation.hpp"

namespace peerplan {

const char* to_string(Operation op) noexcept {
  switch (op) {
    case Operation::all_reduce:
      return "all_reduce";
    case Operation::fused_add_rms_norm:
      return "fused_add_rms_norm";
  }
  return "invalid_operation";
}

}  // namespace peerplan
