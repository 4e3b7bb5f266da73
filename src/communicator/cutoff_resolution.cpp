// SPDX-License-Identifier: Apache-2.0
#include "communicator/cutoff_resolution.hpp"

#include <mutex>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "communicator/card_decisions.hpp"
#include "communicator/node_link.hpp"
#include "core/log.hpp"
#include "core/window_text.hpp"
#include "peerplan/errors.hpp"
#include "routing/cutoffs.hpp"
#include "routing/fingerprint.hpp"
#include "routing/launch_shape_tuning.hpp"

namespace peerplan::communicator {
namespace {

// Warned (file, fingerprint) pairs: a program that creates several
// communicators on one machine hears about a missing entry once.
bool first_warning_for(const std::string& file, const std::string& fingerprint) {
  static std::mutex mutex;
  static std::set<std::pair<std::string, std::string>> warned;
  const std::lock_guard lock(mutex);
  return warned.emplace(file, fingerprint).second;
}

// peerplan_tune measures one node and refuses a job on several (a
// " nodes=" fingerprint): such an entry is written by hand.
std::string how_to_add_entry(const std::string& fingerprint) {
  if (fingerprint.find(" nodes=") != std::string::npos) {
    return "peerplan_tune measures one node only: write this fingerprint's entry by hand "
           "(docs/tuning.md, \"Several nodes\")";
  }
  return "Run peerplan_tune with this many ranks on this machine to add one";
}

void warn_no_entry(const std::string& file, const std::string& fingerprint,
                   const routing::TuningFile& tuning) {
  if (!first_warning_for(file, fingerprint)) return;
  std::string entries;
  for (const auto& entry : tuning.entries)
    entries += (entries.empty() ? "'" : ", '") + entry.fingerprint + "'";
  log::warn("tuning file " + file + " has no entry for this machine's fingerprint '" + fingerprint +
            "' (its entries: " + (entries.empty() ? "none" : entries) +
            "); using the built-in cutoffs. " + how_to_add_entry(fingerprint));
}

const char* source_of(std::size_t RouteCutoffs::*member, const Config& config,
                      const routing::TuningEntry* entry) {
  if (config.cutoffs.*member != kAutoCutoff) return "config";
  if (entry != nullptr && entry->cutoffs.*member != kAutoCutoff) return "tuning file";
  return "default";
}

// The entry's windows, and the defaults' moves for the node's link where
// the entry sets none (the Config's, where it sets one, win over both).
routing::ProtocolTuning entry_over_link(const routing::TuningEntry* entry,
                                        const routing::ProtocolTuning& link_windows) {
  routing::ProtocolTuning windows = entry != nullptr ? entry->protocols : routing::ProtocolTuning{};
  for (const auto& field : routing::kWindowFields) {
    if (!(windows.*field.tuned)) windows.*field.tuned = link_windows.*field.tuned;
  }
  return windows;
}

// "; GPUs linked by PCIe at 31.5 GB/s: the defaults scale with it (the
// one-shot limit at 3+ ranks, one_shot_lamport=4K.. fused_lamport=4K..4M)",
// or nothing.
std::string link_text(const routing::NodeLink& link, const routing::ProtocolTuning& moved) {
  if (!link.pcie) return "";
  std::string text = "; GPUs linked by " + routing::describe_node_link(link) +
                     ": the defaults scale with it (the one-shot limit at 3+ ranks,";
  for (const auto& field : routing::kWindowFields) {
    if (moved.*field.tuned)
      text += std::string(" ") + field.name + "=" + core::window_text(moved.*field.tuned);
  }
  return text + "; docs/concepts.md, \"PCIe-only GPUs\")";
}

void log_resolution(const Config& config, const std::string& fingerprint,
                    const routing::TuningEntry* entry, const RouteCutoffs& resolved,
                    const std::string& link_note) {
  std::string line = "route cutoffs for '" + fingerprint + "':";
  for (const auto& field : routing::kCutoffFields) {
    line += std::string(" ") + field.name + "=" + std::to_string(resolved.*field.member) + " (" +
            source_of(field.member, config, entry) + ")";
  }
  if (entry != nullptr && !routing::is_empty(entry->protocols)) {
    // Where the Config sets a window too, the Config's wins (applied by
    // the communicator to the transport's windows).
    line +=
        "; the entry's protocol windows: " + routing::describe_protocol_tuning(entry->protocols);
  }
  if (entry != nullptr && !entry->shapes.one_shot_grid.empty()) {
    line += "; the entry's one-shot grid (bytes:blocks): " +
            routing::describe_one_shot_grid(entry->shapes.one_shot_grid);
    // The transport applies the Config's fixed grid instead (a local
    // choice, so the entry is still agreed and logged).
    if (config.kernels.one_shot_max_blocks > 0) {
      line += " (not applied: one_shot_max_blocks is " +
              std::to_string(config.kernels.one_shot_max_blocks) +
              " from code or PEERPLAN_ONE_SHOT_MAX_BLOCKS)";
    }
  }
  if (entry != nullptr) {
    line += "; applied the entry of tuning file " + config.tuning_file + " line " +
            std::to_string(entry->line);
    if (!entry->measured.empty()) line += " (measured: " + entry->measured + ")";
  } else if (config.tuning_file.empty()) {
    line += "; no tuning file (PEERPLAN_TUNING_FILE)";
  }
  log::info(log::Subsystem::route, line + link_note);
}

// What the one-shot grid steps say, for the agreement text.
std::string grid_text(const routing::LaunchShapeTuning& shapes) {
  if (shapes.one_shot_grid.empty()) return "one-shot grid default";
  return "one-shot grid " + routing::describe_one_shot_grid(shapes.one_shot_grid);
}

}  // namespace

std::string tuning_entry_effect(const Config& config, const routing::TuningEntry* entry) {
  // Per field, what the entry decides: nothing where the Config is explicit
  // (the Config agrees on every rank), else its value or "auto". With the
  // defaults the same on every rank, equal effects mean equal resolutions.
  RouteCutoffs decided;
  for (const auto& field : routing::kCutoffFields) {
    if (config.cutoffs.*field.member == kAutoCutoff && entry != nullptr)
      decided.*field.member = entry->cutoffs.*field.member;
  }
  const routing::TuningEntry none;
  const routing::TuningEntry& used = entry != nullptr ? *entry : none;
  return routing::describe_cutoffs(decided) + ", " +
         routing::describe_protocol_tuning(used.protocols) + ", " + grid_text(used.shapes);
}

ResolvedRouting resolve_route_cutoffs(const std::vector<RankCard>& cards, int rank,
                                      const Config& config, Backend backend,
                                      const std::string& fingerprint,
                                      const std::optional<routing::TuningFile>& tuning) {
  // Ranks sharing a GPU are for testing: no measurement describes them.
  const bool shared = routing::fingerprint_says_shared(fingerprint);
  const routing::TuningEntry* entry =
      tuning && !shared ? routing::find_entry(*tuning, fingerprint) : nullptr;
  const routing::NodeLink link = node_link(cards, backend);
  const routing::ProtocolTuning link_windows = routing::default_link_windows(link);
  const ResolvedRouting resolved{
      routing::resolve_cutoffs(config.cutoffs, entry ? entry->cutoffs : RouteCutoffs{},
                               static_cast<int>(cards.size()), backend, link),
      entry_over_link(entry, link_windows), entry ? entry->shapes : routing::LaunchShapeTuning{}};
  if (rank == 0) {
    if (tuning && shared) {
      log::info(log::Subsystem::route, "tuning file " + config.tuning_file +
                                           " not applied: ranks share a GPU (" + fingerprint + ")");
    } else if (tuning && entry == nullptr) {
      warn_no_entry(config.tuning_file, fingerprint, *tuning);
    }
    if (log::enabled(LogLevel::info, log::Subsystem::route))
      log_resolution(config, fingerprint, entry, resolved.cutoffs, link_text(link, link_windows));
  }
  // Every rank must route alike; the cards say what each rank's file decides.
  check_tuning_agreement(cards, fingerprint, !shared, tuning_entry_effect(config, nullptr));
  return resolved;
}

}  // namespace peerplan::communicator
