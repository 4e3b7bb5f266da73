// SPDX-License-Identifier: Apache-2.0
#include "core/config_validation.hpp"

#include <optional>
#include <string>

#include "core/log_subsystems.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::core {
namespace {

void add(std::string& errors, const std::string& problem) {
  if (!errors.empty()) errors += "; ";
  errors += problem;
}

}  // namespace

void validate_config(const Config& config) {
  std::string errors;
  const KernelChoices& k = config.kernels;
  if (k.one_shot_max_blocks < 0 || k.one_shot_max_blocks > kOneShotMaxBlocksLimit) {
    add(errors, "Config::kernels.one_shot_max_blocks is " + std::to_string(k.one_shot_max_blocks) +
                    ": set 0 (one block per multiprocessor, the default) or a block count from "
                    "1 to " +
                    std::to_string(kOneShotMaxBlocksLimit) + " (PEERPLAN_ONE_SHOT_MAX_BLOCKS)");
  }
  // A backwards range would silently mean "never"; never() says so.
  struct NamedWindow {
    const char* name;
    const char* variable;
    const std::optional<Window>& window;
  };
  const NamedWindow windows[] = {
      {"one_shot_lamport", "PEERPLAN_ONE_SHOT_LAMPORT", k.one_shot_lamport},
      {"fused_lamport", "PEERPLAN_FUSED_LAMPORT", k.fused_lamport},
      {"fused_ll", "PEERPLAN_FUSED_LL", k.fused_ll},
      {"two_shot_dma", "PEERPLAN_TWO_SHOT_DMA", k.two_shot_dma},
      {"two_shot_lamport", "PEERPLAN_TWO_SHOT_LAMPORT", k.two_shot_lamport},
  };
  for (const NamedWindow& w : windows) {
    if (w.window && !w.window->is_valid()) {
      add(errors,
          std::string("Config::kernels.") + w.name + " is {above " +
              std::to_string(w.window->above) + ", up_to " + std::to_string(w.window->up_to) +
              "}, which holds no size: set above < up_to, or Window::never() (" + w.variable + ")");
    }
  }
  if (config.device < -1) {
    add(errors, "Config::device is " + std::to_string(config.device) +
                    ": set -1 (the local rank's GPU, the default) or a device index from 0 "
                    "(PEERPLAN_DEVICE)");
  }
  if (config.timeout.count() < 1 || config.timeout > kMaxTimeout) {
    add(errors, "Config::timeout is " + std::to_string(config.timeout.count()) + " ms: set 1 to " +
                    std::to_string(kMaxTimeout.count()) + " ms (PEERPLAN_TIMEOUT_MS)");
  }
  // An enum is a byte: a value cast from an integer can fall outside it.
  if (config.backend != Backend::automatic && config.backend != Backend::cuda &&
      config.backend != Backend::host) {
    add(errors, "Config::backend is " + std::to_string(static_cast<int>(config.backend)) +
                    ": set Backend::automatic, cuda or host (PEERPLAN_BACKEND)");
  }
  if (config.transfer_mode != TransferMode::automatic &&
      config.transfer_mode != TransferMode::pull && config.transfer_mode != TransferMode::push) {
    add(errors, "Config::transfer_mode is " +
                    std::to_string(static_cast<int>(config.transfer_mode)) +
                    ": set TransferMode::automatic, pull or push (PEERPLAN_TRANSFER_MODE)");
  }
  if (config.log_level > LogLevel::trace) {
    add(errors, "Config::log_level is " + std::to_string(static_cast<int>(config.log_level)) +
                    ": set LogLevel::none, warn, info or trace (PEERPLAN_DEBUG)");
  }
  if (k.row_clusters != RowClusters::automatic && k.row_clusters != RowClusters::on &&
      k.row_clusters != RowClusters::off) {
    add(errors, "Config::kernels.row_clusters is " +
                    std::to_string(static_cast<int>(k.row_clusters)) +
                    ": set RowClusters::automatic, on or off (PEERPLAN_ROW_CLUSTERS)");
  }
  if (config.fallback != Fallback::automatic && config.fallback != Fallback::nccl &&
      config.fallback != Fallback::mpi) {
    add(errors, "Config::fallback is " + std::to_string(static_cast<int>(config.fallback)) +
                    ": set Fallback::automatic, nccl or mpi (PEERPLAN_FALLBACK)");
  }
  // Past SYS a level would allow every link without saying so.
  if (config.p2p_level > P2PLevel::automatic) {
    add(errors, "Config::p2p_level is " + std::to_string(static_cast<int>(config.p2p_level)) +
                    ": set P2PLevel::automatic (the default) or loc, nvl, pix, pxb, phb, node, "
                    "sys (PEERPLAN_P2P_LEVEL)");
  }
  // create() checks the world size only when it is above 0: below, silently never.
  if (config.expected_world_size < 0) {
    add(errors, "Config::expected_world_size is " + std::to_string(config.expected_world_size) +
                    ": set 0 (not checked, the default) or the number of ranks create() must "
                    "find (PEERPLAN_WORLD_SIZE)");
  }
  // Pieces round down to multiples of 256 bytes: 1..255 would silently never split.
  const std::size_t chunk = config.cutoffs.two_shot_chunk_bytes;
  if (chunk > 0 && chunk < kTwoShotPieceAlignment) {
    add(errors, "Config::cutoffs.two_shot_chunk_bytes is " + std::to_string(chunk) +
                    ", which would never split (pieces are rounded down to a multiple of 256 "
                    "bytes): use 0 to never split, or at least 256, or kAutoCutoff for the "
                    "default (PEERPLAN_TWO_SHOT_CHUNK_BYTES)");
  }
  if (config.undeclared_keys_tracked < 0 ||
      config.undeclared_keys_tracked > kMaxUndeclaredKeysTracked) {
    add(errors, "Config::undeclared_keys_tracked is " +
                    std::to_string(config.undeclared_keys_tracked) + ": set 0 (off) to " +
                    std::to_string(kMaxUndeclaredKeysTracked) + " (PEERPLAN_TRACK_UNDECLARED)");
  }
  if (!log::parse_subsystems(config.log_subsystems)) {
    add(errors, "Config::log_subsystems is '" + config.log_subsystems + "': set a comma list of " +
                    log::subsystem_names() +
                    ", optionally after a ^ for all but those (PEERPLAN_DEBUG_SUBSYS)");
  }
  if (!errors.empty()) throw InvalidArgument("invalid configuration: " + errors);
}

}  // namespace peerplan::core
