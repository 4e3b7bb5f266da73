// SPDX-License-Identifier: Apache-2.0
#include "routing/protocol_tuning.hpp"

#include "core/window_text.hpp"

namespace peerplan::routing {

const WindowField* find_window_field(std::string_view name) noexcept {
  for (const WindowField& field : kWindowFields)
    if (name == field.name) return &field;
  return nullptr;
}

bool is_empty(const ProtocolTuning& tuning) noexcept { return tuning == ProtocolTuning{}; }

bool window_applies(const WindowField& field, const ProtocolWindows& windows) noexcept {
  // The fused op always pushes: its windows apply to every tunable transport.
  if (field.resolved == &ProtocolWindows::fused_lamport ||
      field.resolved == &ProtocolWindows::fused_ll)
    return true;
  if (windows.pull) return false;
  // The Lamport windows write into the Lamport region, which only a push
  // transport with `lines` has.
  return field.resolved == &ProtocolWindows::two_shot_dma || windows.lines;
}

ProtocolWindows apply_configured_windows(ProtocolWindows windows,
                                         const KernelChoices& kernels) noexcept {
  for (const WindowField& field : kWindowFields) {
    const std::optional<Window>& window = kernels.*field.configured;
    if (window && window_applies(field, windows)) windows.*field.resolved = *window;
  }
  return windows;
}

ProtocolWindows apply_protocol_tuning(ProtocolWindows windows, const ProtocolTuning& tuned,
                                      const KernelChoices& kernels) noexcept {
  if (!windows.tunable) return windows;
  for (const WindowField& field : kWindowFields) {
    const std::optional<Window>& window = tuned.*field.tuned;
    if (window && !(kernels.*field.configured) && window_applies(field, windows))
      windows.*field.resolved = *window;
  }
  return windows;
}

std::string describe_protocol_windows(const ProtocolWindows& windows) {
  std::string text;
  for (const WindowField& field : kWindowFields) {
    if (!window_applies(field, windows)) continue;
    if (!text.empty()) text += ' ';
    text += std::string(field.name) + '=' + core::window_text(windows.*field.resolved);
  }
  return text;
}

std::string describe_protocol_tuning(const ProtocolTuning& tuning) {
  std::string text;
  for (const WindowField& field : kWindowFields) {
    if (!text.empty()) text += ' ';
    text += std::string(field.name) + '=' + core::window_text(tuning.*field.tuned);
  }
  return text;
}

}  // namespace peerplan::routing
