// SPDX-License-Identifier: Apache-2.0
// The roll call every rank takes part in before peerplan's create over an
// NCCL communicator: each rank says whether its environment declares
// anything, and peerplan is made only when every rank does. A rank that
// skipped the bootstrap's exchanges while the others entered them would
// leave their all-gathers queued on the application's communicator, and the
// application's next NCCL calls would pair with them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace peerplan::nccl_interposer {

// One rank's answer (one byte on the wire).
enum class RollCallAnswer : std::uint8_t {
  nothing_declared = 0,
  declared = 1,
  unparsable = 2,  // the declarations did not parse (that rank WARNs why)
};

// Every rank's answer, in rank order, as the roll call's bytes.
struct RollCallVerdict {
  bool create = false;  // every rank declared something: peerplan's create goes ahead
  bool warn = false;    // some ranks declared and some did not: a WARN, not an INFO
  std::string reason;   // why peerplan is given up on every rank (empty when create)
};
RollCallVerdict judge_roll_call(std::span<const std::uint8_t> answers);

}  // namespace peerplan::nccl_interposer
