// SPDX-License-Identifier: Apache-2.0
#include "core/config_fields.hpp"

#include "core/window_text.hpp"

namespace peerplan::core {

std::string bytes_or_auto(std::size_t bytes) {
  return bytes == kAutoCutoff ? std::string("auto") : std::to_string(bytes);
}

std::vector<ConfigField> config_fields(const Config& c) {
  const RouteCutoffs& r = c.cutoffs;
  const KernelChoices& k = c.kernels;
  // Local fields: the device and the files differ per rank by design (the
  // resolved cutoffs are compared after the tuning file is applied);
  // the log level, file and subsystems change no decision; the one-shot grid and row clusters
  // are launch shapes no peer depends on.
  return {
      {"backend", "PEERPLAN_BACKEND", to_string(c.backend), true},
      {"device", "PEERPLAN_DEVICE", std::to_string(c.device), false},
      {"timeout_ms", "PEERPLAN_TIMEOUT_MS", std::to_string(c.timeout.count()), true},
      {"cutoffs.one_shot_max_bytes", "PEERPLAN_ONE_SHOT_MAX_BYTES",
       bytes_or_auto(r.one_shot_max_bytes), true},
      {"cutoffs.two_shot_max_bytes", "PEERPLAN_TWO_SHOT_MAX_BYTES",
       bytes_or_auto(r.two_shot_max_bytes), true},
      {"cutoffs.fused_max_bytes", "PEERPLAN_FUSED_MAX_BYTES", bytes_or_auto(r.fused_max_bytes),
       true},
      {"cutoffs.two_shot_min_bytes", "PEERPLAN_TWO_SHOT_MIN_BYTES",
       bytes_or_auto(r.two_shot_min_bytes), true},
      {"cutoffs.two_shot_chunk_bytes", "PEERPLAN_TWO_SHOT_CHUNK_BYTES",
       bytes_or_auto(r.two_shot_chunk_bytes), true},
      {"transfer_mode", "PEERPLAN_TRANSFER_MODE", to_string(c.transfer_mode), true},
      {"disable_p2p", "PEERPLAN_DISABLE_P2P", c.disable_p2p ? "1" : "0", true},
      {"p2p_level", "PEERPLAN_P2P_LEVEL", to_string(c.p2p_level), true},
      {"log_level", "PEERPLAN_DEBUG", to_string(c.log_level), false},
      {"log_file", "PEERPLAN_DEBUG_FILE", c.log_file, false},
      {"log_subsystems", "PEERPLAN_DEBUG_SUBSYS", c.log_subsystems, false},
      {"topology_file", "PEERPLAN_TOPO_FILE", c.topology_file, false},
      {"tuning_file", "PEERPLAN_TUNING_FILE", c.tuning_file, false},
      {"expected_world_size", "PEERPLAN_WORLD_SIZE", std::to_string(c.expected_world_size), true},
      {"kernels.one_shot_max_blocks", "PEERPLAN_ONE_SHOT_MAX_BLOCKS",
       k.one_shot_max_blocks == 0 ? std::string("auto") : std::to_string(k.one_shot_max_blocks),
       false},
      // Sender and receiver must run the same protocol.
      {"kernels.one_shot_lamport", "PEERPLAN_ONE_SHOT_LAMPORT", window_text(k.one_shot_lamport),
       true},
      {"kernels.fused_lamport", "PEERPLAN_FUSED_LAMPORT", window_text(k.fused_lamport), true},
      {"kernels.fused_ll", "PEERPLAN_FUSED_LL", window_text(k.fused_ll), true},
      {"kernels.row_clusters", "PEERPLAN_ROW_CLUSTERS", to_string(k.row_clusters), false},
      {"kernels.two_shot_dma", "PEERPLAN_TWO_SHOT_DMA", window_text(k.two_shot_dma), true},
      {"kernels.two_shot_lamport", "PEERPLAN_TWO_SHOT_LAMPORT", window_text(k.two_shot_lamport),
       true},
      // Every rank must take the same fallback: the calls are collectives.
      {"fallback", "PEERPLAN_FALLBACK", to_string(c.fallback), true},
      // What this rank's Stats keep: no peer depends on it.
      {"undeclared_keys_tracked", "PEERPLAN_TRACK_UNDECLARED",
       std::to_string(c.undeclared_keys_tracked), false},
      // Profiler ranges change nothing a peer sees.
      {"nvtx", "PEERPLAN_NVTX", c.nvtx ? "1" : "0", false},
      // Every rank must take part in each call's comparison.
      {"check_calls", "PEERPLAN_CHECK_CALLS", c.check_calls ? "1" : "0", true},
  };
}

std::string describe_config(const Config& config) {
  std::string line;
  for (const ConfigField& field : config_fields(config)) {
    if (!line.empty()) line += ' ';
    line += field.name + '=' + (field.value.empty() ? std::string("\"\"") : field.value);
  }
  return line;
}

}  // namespace peerplan::core
