// SPDX-License-Identifier: Apache-2.0
// Every Config field as text, in one table: the INFO log of the config and
// the cross-rank agreement check (communicator/card_decisions.cpp) both
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
  std::string name;      // the Config member, e.g. "kernels.fused_ll"
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

}  // namespace peerplan::core
