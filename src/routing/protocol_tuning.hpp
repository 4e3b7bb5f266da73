// SPDX-License-Identifier: Apache-2.0
// Protocol windows measured on one machine (peerplan_tune), carried by its
// tuning file entry next to the route cutoffs, and applied to the windows
// a P2P transport reports before the router reads them. Only transports
// whose protocols are tunable (the CUDA kernels: LL lines and Lamport, the
// staged and copy-engine two-shots) take them; a window the Config sets
// explicitly (KernelChoices, or its PEERPLAN_* variable) wins over the
// file's, as a cutoff does.
//
// Every field is a byte count, or kAutoCutoff where the entry does not set
// it (the transport's built-in window stays).
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "peerplan/config.hpp"
#include "routing/byte_fields.hpp"
#include "routing/protocol_choice.hpp"

namespace peerplan::routing {

struct ProtocolTuning {
  // Push one-shot all-reduce: LL lines up to this many bytes, Lamport above.
  std::size_t one_shot_ll_max_bytes = kAutoCutoff;
  // Fused op: Lamport for messages in (after, max]; max = 0: never Lamport.
  std::size_t fused_lamport_after_bytes = kAutoCutoff;
  std::size_t fused_lamport_max_bytes = kAutoCutoff;
  // Fused op outside the Lamport window: LL lines up to this many bytes
  // (0: never), the two-shot all-reduce + row norm above.
  std::size_t fused_ll_max_bytes = kAutoCutoff;
  // Push two-shot all-reduce of a contiguous layout: the staged kernel up
  // to this many bytes, copy engines (Protocol::dma) above; 0: dma at
  // every size.
  std::size_t two_shot_dma_after_bytes = kAutoCutoff;
  // Push two-shot all-reduce, any layout: the Lamport protocol up to this
  // many bytes, the window above (staged or dma) past it; 0: never
  // Lamport. (Last: brace initialisations of the fields above keep their
  // meaning.)
  std::size_t two_shot_lamport_max_bytes = kAutoCutoff;

  friend bool operator==(const ProtocolTuning&, const ProtocolTuning&) = default;
};

// The fields under the names the tuning file and the logs use.
using ProtocolTuningField = ByteField<ProtocolTuning>;
inline constexpr std::array<ProtocolTuningField, 6> kProtocolTuningFields{{
    {"one_shot_ll_max_bytes", &ProtocolTuning::one_shot_ll_max_bytes},
    {"fused_lamport_after_bytes", &ProtocolTuning::fused_lamport_after_bytes},
    {"fused_lamport_max_bytes", &ProtocolTuning::fused_lamport_max_bytes},
    {"fused_ll_max_bytes", &ProtocolTuning::fused_ll_max_bytes},
    {"two_shot_dma_after_bytes", &ProtocolTuning::two_shot_dma_after_bytes},
    {"two_shot_lamport_max_bytes", &ProtocolTuning::two_shot_lamport_max_bytes},
}};

// True when no field is set.
bool is_empty(const ProtocolTuning& tuning) noexcept;

// `windows` (what the transport runs by default) with the tuned windows
// applied where the transport's protocols are tunable and `kernels` (the
// agreed Config) leaves the window automatic:
//  - one_shot_ll_max_bytes, unless kernels.one_shot_lamport_above_bytes is
//    set or the transport pulls (pull has one one-shot protocol);
//  - the fused Lamport window (after and max), unless
//    kernels.fused_lamport_above_bytes is set; max = 0 turns Lamport off;
//    an automatic `after` with a set `max` keeps the transport's `after`;
//  - fused_ll_max_bytes, unless kernels.fused_ll_max_bytes is set;
//  - two_shot_dma_after_bytes, unless kernels.two_shot_dma_above_bytes is
//    set or the transport pulls (the pull two-shot has one protocol);
//  - two_shot_lamport_max_bytes, unless kernels.two_shot_lamport_max_bytes
//    is set, the transport pulls or it has no Lamport region (`lines`
//    false); 0 turns the two-shot's Lamport off.
ProtocolWindows apply_protocol_tuning(ProtocolWindows windows, const ProtocolTuning& tuned,
                                      const KernelChoices& kernels) noexcept;

// "one_shot_ll_max_bytes=65536 fused_lamport_after_bytes=auto ...": every
// field, for logs and the create-time agreement.
std::string describe_protocol_tuning(const ProtocolTuning& tuning);

}  // namespace peerplan::routing
