// SPDX-License-Identifier: Apache-2.0
#include "routing/protocol_tuning.hpp"

namespace peerplan::routing {

bool is_empty(const ProtocolTuning& tuning) noexcept { return tuning == ProtocolTuning{}; }

ProtocolWindows apply_protocol_tuning(ProtocolWindows windows, const ProtocolTuning& tuned,
                                      const KernelChoices& kernels) noexcept {
  if (!windows.tunable) return windows;
  if (windows.lines && !windows.pull && !kernels.one_shot_lamport_above_bytes &&
      tuned.one_shot_ll_max_bytes != kAutoCutoff) {
    windows.one_shot_ll_max_bytes = tuned.one_shot_ll_max_bytes;
  }
  if (!kernels.fused_lamport_above_bytes && tuned.fused_lamport_max_bytes != kAutoCutoff) {
    if (tuned.fused_lamport_max_bytes == 0) {
      windows.fused_lamport_after_bytes = kNoLimit;  // never
    } else {
      if (tuned.fused_lamport_after_bytes != kAutoCutoff)
        windows.fused_lamport_after_bytes = tuned.fused_lamport_after_bytes;
      windows.fused_lamport_max_bytes = tuned.fused_lamport_max_bytes;
    }
  }
  if (kernels.fused_ll_max_bytes == kAutoCutoff && tuned.fused_ll_max_bytes != kAutoCutoff) {
    windows.fused_ll_max_bytes = tuned.fused_ll_max_bytes;
  }
  if (!windows.pull && !kernels.two_shot_dma_above_bytes &&
      tuned.two_shot_dma_after_bytes != kAutoCutoff) {
    windows.two_shot_dma_after_bytes = tuned.two_shot_dma_after_bytes;
  }
  // The two-shot's Lamport writes into the Lamport region, which only a
  // push transport with `lines` has: no other can open the window.
  if (windows.lines && !windows.pull && !kernels.two_shot_lamport_max_bytes &&
      tuned.two_shot_lamport_max_bytes != kAutoCutoff) {
    windows.two_shot_lamport_max_bytes = tuned.two_shot_lamport_max_bytes;
  }
  return windows;
}

std::string describe_protocol_tuning(const ProtocolTuning& tuning) {
  return describe_byte_fields(tuning, kProtocolTuningFields);
}

}  // namespace peerplan::routing
