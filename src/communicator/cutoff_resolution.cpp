// SPDX-License-Identifier: Apache-2.0
#include "communicator/cutoff_resolution.hpp"

#include <mutex>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "bootstrap/fail_together.hpp"
#include "core/log.hpp"
#include "peerplan/errors.hpp"
#include "routing/cutoffs.hpp"
#include "routing/fingerprint.hpp"
#include "routing/launch_shape_tuning.hpp"

namespace peerplan::communicator {
namespace {

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string as_text(const bootstrap::Blob& blob) {
  return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
}

// Warned (file, fingerprint) pairs: a program that creates several
// communicators on one machine hears about a missing entry once.
bool first_warning_for(const std::string& file, const std::string& fingerprint) {
  static std::mutex mutex;
  static std::set<std::pair<std::string, std::string>> warned;
  const std::lock_guard lock(mutex);
  return warned.emplace(file, fingerprint).second;
}

void warn_no_entry(const std::string& file, const std::string& fingerprint,
                   const routing::TuningFile& tuning) {
  if (!first_warning_for(file, fingerprint)) return;
  std::string entries;
  for (const auto& entry : tuning.entries)
    entries += (entries.empty() ? "'" : ", '") + entry.fingerprint + "'";
  log::warn("tuning file " + file + " has no entry for this machine's fingerprint '" + fingerprint +
            "' (its entries: " + (entries.empty() ? "none" : entries) +
            "); using the built-in cutoffs. Run peerplan_tune with this many ranks on this "
            "machine to add one");
}

const char* source_of(std::size_t RouteCutoffs::*member, const Config& config,
                      const routing::TuningEntry* entry) {
  if (config.cutoffs.*member != kAutoCutoff) return "config";
  if (entry != nullptr && entry->cutoffs.*member != kAutoCutoff) return "tuning file";
  return "default";
}

void log_resolution(const Config& config, const std::string& fingerprint,
                    const routing::TuningEntry* entry, const RouteCutoffs& resolved) {
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
  log::info(line);
}

// What the one-shot grid steps say, for the agreement text.
std::string grid_text(const routing::LaunchShapeTuning& shapes) {
  if (shapes.one_shot_grid.empty()) return "one-shot grid default";
  return "one-shot grid " + routing::describe_one_shot_grid(shapes.one_shot_grid);
}

// Every rank must route alike: compare the resolved cutoffs with rank 0's.
// The launch shapes are compared too: a grid is a local choice that no peer
// depends on, but ranks that loaded different entries (or files) are
// misconfigured all the same, and should hear it as they do for cutoffs.
void check_agreement(bootstrap::Bootstrap& bootstrap, const ResolvedRouting& resolved,
                     const Config& config, const std::string& fingerprint) {
  const std::string cutoffs = routing::describe_cutoffs(resolved.cutoffs) + ", " +
                              routing::describe_protocol_tuning(resolved.protocols) + ", " +
                              grid_text(resolved.shapes);
  const std::string mine =
      cutoffs + " [fingerprint '" + fingerprint + "', tuning file '" + config.tuning_file + "']";
  const auto all = bootstrap.allgather(bytes_of(mine));
  const auto cutoffs_of = [&all](int rank) {
    const std::string text = as_text(all[rank]);
    return text.substr(0, text.find(" ["));
  };
  // Ranks of one node usually resolve alike: each distinct text is said
  // once, with its ranks, not once per rank.
  std::vector<int> differing;
  bootstrap::RanksByText others;
  for (int rank = 1; rank < static_cast<int>(all.size()); ++rank) {
    if (cutoffs_of(rank) == cutoffs_of(0)) continue;
    differing.push_back(rank);
    bootstrap::add_rank(others, as_text(all[rank]), rank);
  }
  if (differing.empty()) return;
  std::string details;
  for (const auto& [text, ranks] : others)
    details += "; " + bootstrap::describe_ranks(ranks) + ": " + text;
  throw Mismatch("create: " + bootstrap::describe_ranks(differing) +
                 " resolved other route cutoffs, protocol windows or launch shapes than rank 0 "
                 "(rank 0: " +
                 as_text(all[0]) + details +
                 "). Routing must be identical on every rank: give every rank the same "
                 "PEERPLAN_*_BYTES settings and the same tuning file (PEERPLAN_TUNING_FILE), or "
                 "none");
}

}  // namespace

std::optional<routing::TuningFile> load_tuning_file(bootstrap::Bootstrap& bootstrap,
                                                    const Config& config) {
  std::optional<routing::TuningFile> file;
  // Always collective, even without a file here: another rank may have one.
  // Every rank reads the same file, so the error is usually the same on
  // every rank: it is said once, with the ranks that hit it.
  if (auto failures = bootstrap::run_together(bootstrap, [&] {
        if (!config.tuning_file.empty()) file = routing::read_tuning_file(config.tuning_file);
      })) {
    throw InvalidArgument("create: cannot use the tuning file (" + failures->message + ")");
  }
  return file;
}

ResolvedRouting resolve_route_cutoffs(bootstrap::Bootstrap& bootstrap, const Config& config,
                                      Backend backend, const std::string& fingerprint,
                                      const std::optional<routing::TuningFile>& tuning) {
  // Ranks sharing a GPU are for testing: no measurement describes them.
  const bool shared = routing::fingerprint_says_shared(fingerprint);
  const routing::TuningEntry* entry =
      tuning && !shared ? routing::find_entry(*tuning, fingerprint) : nullptr;
  const ResolvedRouting resolved{
      routing::resolve_cutoffs(config.cutoffs, entry ? entry->cutoffs : RouteCutoffs{},
                               bootstrap.size(), backend),
      entry ? entry->protocols : routing::ProtocolTuning{},
      entry ? entry->shapes : routing::LaunchShapeTuning{}};
  if (bootstrap.rank() == 0) {
    if (tuning && shared) {
      log::info("tuning file " + config.tuning_file + " not applied: ranks share a GPU (" +
                fingerprint + ")");
    } else if (tuning && entry == nullptr) {
      warn_no_entry(config.tuning_file, fingerprint, *tuning);
    }
    if (log::enabled(LogLevel::info)) log_resolution(config, fingerprint, entry, resolved.cutoffs);
  }
  check_agreement(bootstrap, resolved, config, fingerprint);
  return resolved;
}

}  // namespace peerplan::communicator
