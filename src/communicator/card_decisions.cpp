// SPDX-License-Identifier: Apache-2.0
#include "communicator/card_decisions.hpp"

#include <map>
#include <optional>
#include <string_view>

#include "bootstrap/fail_together.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::communicator {
namespace {

using ErrorOf = std::optional<std::string> RankCard::*;

std::optional<bootstrap::Failures> failures_in(const std::vector<RankCard>& cards, ErrorOf error) {
  std::vector<std::optional<std::string>> by_rank;
  for (const RankCard& card : cards) by_rank.push_back(card.*error);
  return bootstrap::collect_failures(by_rank);
}

// "is 1024 on rank 0 but auto on ranks 1, 3 and 65536 on rank 2"
std::string who_holds_what(const std::vector<RankCard>& cards, std::size_t i) {
  const std::string& first = cards[0].agreed_settings[i].value;
  bootstrap::RanksByText others;
  for (int rank = 1; rank < static_cast<int>(cards.size()); ++rank) {
    const std::string& value = cards[rank].agreed_settings[i].value;
    if (value != first) bootstrap::add_rank(others, value, rank);
  }
  std::string text = "is " + first + " on rank 0 but ";
  for (std::size_t k = 0; k < others.size(); ++k) {
    if (k > 0) text += " and ";
    text += others[k].first + " on " + bootstrap::describe_ranks(others[k].second);
  }
  return text;
}

void check_agreed_settings(const std::vector<RankCard>& cards) {
  const auto& reference = cards[0].agreed_settings;
  for (int rank = 1; rank < static_cast<int>(cards.size()); ++rank) {
    const auto& theirs = cards[rank].agreed_settings;
    bool same_fields = theirs.size() == reference.size();
    for (std::size_t i = 0; same_fields && i < theirs.size(); ++i)
      same_fields = theirs[i].name == reference[i].name;
    if (!same_fields) {
      throw Mismatch("create: rank " + std::to_string(rank) + " sent " +
                     std::to_string(theirs.size()) + " config fields where rank 0 has " +
                     std::to_string(reference.size()) +
                     " (or other ones); run the same peerplan build on every rank");
    }
  }
  std::string differing;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    bool same = true;
    for (const RankCard& card : cards) same = same && card.agreed_settings[i] == reference[i];
    if (same) continue;
    if (!differing.empty()) differing += "; ";
    differing += reference[i].name + " (" + reference[i].variable + ") " + who_holds_what(cards, i);
  }
  if (differing.empty()) return;
  throw Mismatch("create: ranks were given different configurations: " + differing +
                 ". Routing and the kernels' protocols must be identical on every rank: set "
                 "the same value on every rank (the same Config fields and PEERPLAN_* "
                 "variables everywhere)");
}

}  // namespace

void check_settings(const std::vector<RankCard>& cards) {
  if (auto failures = failures_in(cards, &RankCard::settings_error)) {
    throw InvalidArgument("create: " + failures->message);
  }
  check_agreed_settings(cards);
}

void check_tuning_files(const std::vector<RankCard>& cards) {
  if (auto failures = failures_in(cards, &RankCard::tuning_error)) {
    throw InvalidArgument("create: cannot use the tuning file (" + failures->message + ")");
  }
}

Backend decide_backend(Backend requested, bool cuda_built, const std::vector<RankCard>& cards) {
  if (requested == Backend::host) return Backend::host;
  if (!cuda_built) {
    if (requested == Backend::cuda) {
      throw Unsupported(
          "Backend::cuda was requested (Config::backend or PEERPLAN_BACKEND=cuda) but this build "
          "of peerplan has no CUDA backend (configure with the CUDA toolkit installed; NCCL is "
          "optional); "
          "use Backend::automatic or PEERPLAN_BACKEND=host");
    }
    return Backend::host;
  }
  std::vector<std::optional<std::string>> blind;
  for (const RankCard& card : cards)
    blind.push_back(card.sees_gpu ? std::nullopt : std::optional<std::string>("sees no GPU"));
  const auto failures = bootstrap::collect_failures(blind);
  if (!failures) return Backend::cuda;
  if (requested == Backend::cuda) {
    throw Unsupported(
        "Backend::cuda was requested (Config::backend or PEERPLAN_BACKEND=cuda) "
        "but " +
        failures->message +
        " (check CUDA_VISIBLE_DEVICES and the "
        "driver); use Backend::automatic or PEERPLAN_BACKEND=host");
  }
  return Backend::host;
}

std::vector<int> node_ids(const std::vector<RankCard>& cards) {
  // A node's first rank (in rank order) opens it, as in bootstrap/nodes.hpp.
  std::map<std::string_view, int> node_of_key;
  std::vector<int> ids;
  for (const RankCard& card : cards) {
    ids.push_back(
        node_of_key.try_emplace(card.node_key, static_cast<int>(node_of_key.size())).first->second);
  }
  return ids;
}

std::vector<int> local_ranks(const std::vector<RankCard>& cards) {
  std::map<int, int> seen_on_node;
  std::vector<int> locals;
  for (int node : node_ids(cards)) locals.push_back(seen_on_node[node]++);
  return locals;
}

NodeLayout node_layout(const std::vector<RankCard>& cards) {
  return node_layout_of(node_ids(cards));
}

void check_topologies(const std::vector<RankCard>& cards) {
  if (auto failures = failures_in(cards, &RankCard::topology_error)) {
    throw InvalidArgument("create: cannot load the topology (" + failures->message + ")");
  }
}

void check_gpus(const std::vector<RankCard>& cards) {
  if (auto failures = failures_in(cards, &RankCard::gpu_error)) {
    throw InvalidArgument("create: cannot use the GPU as configured (" + failures->message + ")");
  }
}

SharedGpus shared_gpus(const std::vector<RankCard>& cards, bool within_groups) {
  // Keyed by the machine, not the node: ranks posing as different nodes
  // (PEERPLAN_HOST_ID) on one machine still share its GPUs.
  const std::vector<int> locals = local_ranks(cards);
  std::vector<std::string> keys, names;
  for (std::size_t r = 0; r < cards.size(); ++r) {
    const std::string& bus_id = cards[r].gpu.bus_id;
    std::string key = bus_id.empty() ? std::string() : cards[r].machine_key + '/' + bus_id;
    if (within_groups && !key.empty()) key += " local rank " + std::to_string(locals[r]);
    keys.push_back(std::move(key));
    names.push_back(within_groups && !bus_id.empty()
                        ? bus_id + " local rank " + std::to_string(locals[r])
                        : bus_id);
  }
  return group_shared_gpus(keys, names);
}

void check_tuning_agreement(const std::vector<RankCard>& cards, const std::string& fingerprint,
                            bool tuning_applies, const std::string& no_entry_effect) {
  const auto effect_of = [&](const RankCard& card) -> const std::string& {
    if (tuning_applies) {
      for (const auto& entry : card.tuning_entries)
        if (entry.fingerprint == fingerprint) return entry.effect;
    }
    return no_entry_effect;
  };
  const auto described = [&](const RankCard& card) {
    return effect_of(card) + " [fingerprint '" + fingerprint + "', tuning file '" +
           card.tuning_file + "'" +
           (card.tuning_digest.empty() ? std::string() : " digest " + card.tuning_digest) + "]";
  };
  // Ranks of one node usually resolve alike: each distinct text is said
  // once, with its ranks, not once per rank.
  std::vector<int> differing;
  bootstrap::RanksByText others;
  for (int rank = 1; rank < static_cast<int>(cards.size()); ++rank) {
    if (effect_of(cards[rank]) == effect_of(cards[0])) continue;
    differing.push_back(rank);
    bootstrap::add_rank(others, described(cards[rank]), rank);
  }
  if (differing.empty()) return;
  std::string details;
  for (const auto& [text, ranks] : others)
    details += "; " + bootstrap::describe_ranks(ranks) + ": " + text;
  throw Mismatch("create: " + bootstrap::describe_ranks(differing) +
                 " resolved other route cutoffs, protocol windows or launch shapes than rank 0 "
                 "(rank 0: " +
                 described(cards[0]) + details +
                 "). Routing must be identical on every rank: give every rank the same "
                 "PEERPLAN_*_BYTES settings and the same tuning file (PEERPLAN_TUNING_FILE), or "
                 "none");
}

}  // namespace peerplan::communicator
