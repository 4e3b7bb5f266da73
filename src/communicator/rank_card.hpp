// SPDX-License-Identifier: Apache-2.0
// One rank's card: everything Communicator::create needs to know about a
// rank to decide, identically on every rank, what the communicator is.
// Each rank fills its card from local facts (its settings or their parse
// error, its node, its GPU, its tuning file), the cards are allgathered
// once, and every create-time decision is a pure function of the cards
// (card_decisions.hpp). A failure found while filling the card travels in
// it, so every rank raises the same error after the one exchange.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "communicator/rank_gpu.hpp"
#include "topology/gpu_location.hpp"

namespace peerplan::communicator {

// One agreed configuration field (core::config_fields rows marked agreed).
struct CardSetting {
  std::string name;      // "kernels.fused_ll"
  std::string variable;  // "PEERPLAN_FUSED_LL"
  std::string value;     // "auto", "65536", ...
  friend bool operator==(const CardSetting&, const CardSetting&) = default;
};

// What one entry of the rank's tuning file does to routing, as text
// (cutoffs the Config leaves automatic, protocol windows, launch shapes):
// ranks whose texts for the agreed fingerprint differ would route apart.
struct CardTuningEntry {
  std::string fingerprint;
  std::string effect;
  friend bool operator==(const CardTuningEntry&, const CardTuningEntry&) = default;
};

struct RankCard {
  // Bumped whenever the encoding changes: a rank of another build is
  // then named instead of being misread.
  static constexpr std::uint32_t kVersion = 2;

  std::string node_key;     // bootstrap::detail::node_key(): which ranks share a node
  std::string machine_key;  // the hardware itself, whatever PEERPLAN_HOST_ID says
  // Why this rank's settings are unusable (a PEERPLAN_* value that does not
  // parse, or a Config value out of range), or nullopt.
  std::optional<std::string> settings_error;
  std::vector<CardSetting> agreed_settings;
  std::string tuning_file;    // the path, empty when none
  std::string tuning_digest;  // of the file's bytes, empty when none was read
  std::optional<std::string> tuning_error;
  std::vector<CardTuningEntry> tuning_entries;  // in file order
  std::optional<std::string> topology_error;    // the topology could not be loaded
  bool sees_gpu = false;                        // the CUDA backend could run here
  // The GPU this rank will drive on the CUDA backend (selected from its
  // local rank), or why it cannot; empty on the host backend.
  std::optional<std::string> gpu_error;
  RankGpu gpu;
  // Where this rank's own topology places its GPU (the input of the P2P
  // level check); nullopt when the topology does not list it.
  std::optional<topology::GpuLocation> gpu_location;

  friend bool operator==(const RankCard&, const RankCard&);
};

// A versioned, explicit little-endian byte encoding (strings and lists
// length-prefixed), the same on every platform.
std::vector<std::byte> encode_rank_card(const RankCard& card);

// The inverse of encode_rank_card. Throws Mismatch saying what is wrong
// (not a card, another version, truncated in which field, trailing bytes):
// such bytes come from a rank running another build, or out of step.
RankCard decode_rank_card(std::span<const std::byte> bytes);

}  // namespace peerplan::communicator
