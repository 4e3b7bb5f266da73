// SPDX-License-Identifier: Apache-2.0
// Every Config field as text, in one table: the INFO log of the config and
// the cross-rank agreement check (communicator/config_agreement.cpp) both
// read it, so a new field is logged and, when it must agree, checked by
// adding one row.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "peerplan/config.hpp"

namespace peerplan::core {

struct ConfigField {
  std::string name;      // the Config member, e.g. "kernels.fused_ll_max_bytes"
  const char* variable;  // the PEERPLAN_* variable that sets it
  std::string value;     // in a form that variable accepts where it has one ("auto", "65536")
  // Must be the same on every rank: routing, or which kernel or protocol
  // runs, depends on it (a rank that disagrees deadlocks or reads garbage).
  bool agreed;
};

// The fields in Config's order, the nested structs flattened.
std::vector<ConfigField> config_fields(const Config& config);

// "name=value name=value ..." of every field, for the INFO log.
std::string describe_config(const Config& config);

// "auto" for kAutoCutoff, else the number.
std::string bytes_or_auto(std::size_t bytes);

// A protocol threshold (KernelChoices): "auto", "ll", "lamport" or the number.
std::string protocol_text(const std::optional<std::size_t>& lamport_above_bytes);

// The two-shot's threshold (KernelChoices::two_shot_dma_above_bytes):
// "auto", "staged", "dma" or the number.
std::string two_shot_protocol_text(const std::optional<std::size_t>& dma_above_bytes);

// The two-shot's Lamport window (KernelChoices::two_shot_lamport_max_bytes):
// "auto", "off", "all" or the number.
std::string two_shot_lamport_text(const std::optional<std::size_t>& lamport_max_bytes);

}  // namespace peerplan::core
