// SPDX-License-Identifier: Apache-2.0
// Protocol windows measured on one machine (peerplan_tune), carried by its
// tuning file entry next to the route cutoffs, and applied to the windows
// a P2P transport reports before the router reads them. Only transports
// whose protocols are tunable (the CUDA kernels: LL lines and Lamport, the
// staged and copy-engine two-shots) take them; a window the Config sets
// explicitly (KernelChoices, or its PEERPLAN_* variable) wins over the
// file's, as a cutoff does.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "peerplan/config.hpp"
#include "routing/protocol_choice.hpp"

namespace peerplan::routing {

// The windows of a tuning file's entry, named as in KernelChoices;
// nullopt where the entry does not set one (the transport's stays).
struct ProtocolTuning {
  std::optional<Window> one_shot_lamport;
  std::optional<Window> fused_lamport;
  std::optional<Window> fused_ll;
  std::optional<Window> two_shot_dma;
  std::optional<Window> two_shot_lamport;

  friend bool operator==(const ProtocolTuning&, const ProtocolTuning&) = default;
};

// One window knob under the name the tuning file, the logs, Config
// (kernels.<name>) and PEERPLAN_<NAME> use, in ProtocolTuning,
// KernelChoices and ProtocolWindows.
struct WindowField {
  const char* name;
  std::optional<Window> ProtocolTuning::*tuned;
  std::optional<Window> KernelChoices::*configured;
  Window ProtocolWindows::*resolved;
};

inline constexpr std::array<WindowField, 5> kWindowFields{{
    {"one_shot_lamport", &ProtocolTuning::one_shot_lamport, &KernelChoices::one_shot_lamport,
     &ProtocolWindows::one_shot_lamport},
    {"fused_lamport", &ProtocolTuning::fused_lamport, &KernelChoices::fused_lamport,
     &ProtocolWindows::fused_lamport},
    {"fused_ll", &ProtocolTuning::fused_ll, &KernelChoices::fused_ll, &ProtocolWindows::fused_ll},
    {"two_shot_dma", &ProtocolTuning::two_shot_dma, &KernelChoices::two_shot_dma,
     &ProtocolWindows::two_shot_dma},
    {"two_shot_lamport", &ProtocolTuning::two_shot_lamport, &KernelChoices::two_shot_lamport,
     &ProtocolWindows::two_shot_lamport},
}};

// The field called `name`, or nullptr.
const WindowField* find_window_field(std::string_view name) noexcept;

// True when no field is set.
bool is_empty(const ProtocolTuning& tuning) noexcept;

// Whether a transport with `windows` runs the protocol of `field` at all,
// so that a tuned window can move it: the one-shot and two-shot windows
// need a push transport (pull has one protocol each), the Lamport ones the
// Lamport region too (`lines`).
bool window_applies(const WindowField& field, const ProtocolWindows& windows) noexcept;

// `windows` (the transport's defaults) with each window `kernels` sets
// explicitly, where the window applies (window_applies).
ProtocolWindows apply_configured_windows(ProtocolWindows windows,
                                         const KernelChoices& kernels) noexcept;

// `windows` (what the transport runs by default) with each tuned window
// applied where the transport's protocols are tunable, the window applies
// (window_applies) and `kernels` (the agreed Config) leaves it automatic.
ProtocolWindows apply_protocol_tuning(ProtocolWindows windows, const ProtocolTuning& tuned,
                                      const KernelChoices& kernels) noexcept;

// "one_shot_lamport=64K.. fused_lamport=64K..4M ...": the windows a
// transport runs (those window_applies to), for the INFO log.
std::string describe_protocol_windows(const ProtocolWindows& windows);

// "one_shot_lamport=64K.. fused_lamport=auto ...": every field, for logs
// and the create-time agreement.
std::string describe_protocol_tuning(const ProtocolTuning& tuning);

}  // namespace peerplan::routing
