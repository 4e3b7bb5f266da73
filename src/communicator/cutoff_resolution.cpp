#include "communicator/cutoff_resolution.hpp"

#include <mutex>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "peerplan/errors.hpp"
#include "routing/cutoffs.hpp"

namespace peerplan::communicator {
namespace {

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string as_text(const bootstrap::Blob& blob) {
  return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

// Every rank reads the same file, so its error is usually the same on every
// rank: say it once, with the ranks that hit it. nullopt when no rank failed.
std::optional<std::string> gather_distinct_errors(bootstrap::Bootstrap& bootstrap,
                                                  const std::optional<std::string>& local) {
  const std::string mine = local ? "!" + *local : std::string();
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // message -> ranks
  const auto all = bootstrap.allgather(bytes_of(mine));
  for (int rank = 0; rank < static_cast<int>(all.size()); ++rank) {
    const std::string text = as_text(all[rank]);
    if (text.empty()) continue;
    const std::string message = text.substr(1);
    auto group = groups.begin();
    while (group != groups.end() && group->first != message) ++group;
    if (group == groups.end()) group = groups.insert(groups.end(), {message, {}});
    group->second.push_back(rank);
  }
  if (groups.empty()) return std::nullopt;
  std::string joined;
  for (const auto& [message, ranks] : groups)
    joined += (joined.empty() ? "" : "; ") + rank_list(ranks) + ": " + message;
  return joined;
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
  log::warn("tuning file " + file + " has no entry for this machine's fingerprint '" +
            fingerprint + "' (its entries: " + (entries.empty() ? "none" : entries) +
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
  if (entry != nullptr) {
    line += "; applied the entry of tuning file " + config.tuning_file + " line " +
            std::to_string(entry->line);
    if (!entry->measured.empty()) line += " (measured: " + entry->measured + ")";
  } else if (config.tuning_file.empty()) {
    line += "; no tuning file (PEERPLAN_TUNING_FILE)";
  }
  log::info(line);
}

// Every rank must route alike: compare the resolved cutoffs with rank 0's.
void check_agreement(bootstrap::Bootstrap& bootstrap, const RouteCutoffs& resolved,
                     const Config& config, const std::string& fingerprint) {
  const std::string cutoffs = routing::describe_cutoffs(resolved);
  const std::string mine = cutoffs + " [fingerprint '" + fingerprint + "', tuning file '" +
                           config.tuning_file + "']";
  const auto all = bootstrap.allgather(bytes_of(mine));
  const auto cutoffs_of = [&all](int rank) {
    const std::string text = as_text(all[rank]);
    return text.substr(0, text.find(" ["));
  };
  std::vector<int> differing;
  std::string details;
  for (int rank = 1; rank < static_cast<int>(all.size()); ++rank) {
    if (cutoffs_of(rank) == cutoffs_of(0)) continue;
    differing.push_back(rank);
    details += "; rank " + std::to_string(rank) + ": " + as_text(all[rank]);
  }
  if (differing.empty()) return;
  throw Mismatch("create: " + rank_list(differing) +
                 " resolved other route cutoffs than rank 0 (rank 0: " + as_text(all[0]) +
                 details +
                 "). Routing must be identical on every rank: give every rank the same "
                 "PEERPLAN_*_BYTES settings and the same tuning file (PEERPLAN_TUNING_FILE), or "
                 "none");
}

}  // namespace

std::optional<routing::TuningFile> load_tuning_file(bootstrap::Bootstrap& bootstrap,
                                                    const Config& config) {
  std::optional<routing::TuningFile> file;
  std::optional<std::string> error;
  if (!config.tuning_file.empty()) {
    try {
      file = routing::read_tuning_file(config.tuning_file);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  // Always collective, even without a file here: another rank may have one.
  if (auto failures = gather_distinct_errors(bootstrap, error))
    throw InvalidArgument("create: cannot use the tuning file (" + *failures + ")");
  return file;
}

RouteCutoffs resolve_route_cutoffs(bootstrap::Bootstrap& bootstrap, const Config& config,
                                   Backend backend, const std::string& fingerprint,
                                   const std::optional<routing::TuningFile>& tuning) {
  const routing::TuningEntry* entry = tuning ? routing::find_entry(*tuning, fingerprint) : nullptr;
  const RouteCutoffs resolved = routing::resolve_cutoffs(
      config.cutoffs, entry ? entry->cutoffs : RouteCutoffs{}, bootstrap.size(), backend);
  if (bootstrap.rank() == 0) {
    if (tuning && entry == nullptr) warn_no_entry(config.tuning_file, fingerprint, *tuning);
    if (log::enabled(LogLevel::info)) log_resolution(config, fingerprint, entry, resolved);
  }
  check_agreement(bootstrap, resolved, config, fingerprint);
  return resolved;
}

}  // namespace peerplan::communicator
