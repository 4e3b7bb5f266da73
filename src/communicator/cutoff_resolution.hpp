// SPDX-License-Identifier: Apache-2.0
// The route cutoffs a communicator uses: per field, the config's explicit
// value (code or PEERPLAN_*_BYTES), else the tuning file's entry for this
// machine's fingerprint, else the built-in default table — checked to be
// the same on every rank, since ranks that route differently deadlock. The
// entry's protocol windows come with them (applied to the P2P transport's
// windows by routing::apply_protocol_tuning), checked alike, and so do its
// launch shapes (the one-shot grid by message size, which the transport
// applies unless KernelChoices::one_shot_max_blocks is set).
#pragma once

#include <optional>
#include <string>

#include <vector>

#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"
#include "routing/tuning_file.hpp"

namespace peerplan::communicator {

// What `entry` of a tuning file (nullptr: none) decides of routing given
// `config`, as text: equal texts on two ranks resolve equal cutoffs,
// protocol windows and launch shapes. Carried in every rank's card.
std::string tuning_entry_effect(const Config& config, const routing::TuningEntry* entry);

struct ResolvedRouting {
  RouteCutoffs cutoffs;  // no field at kAutoCutoff
  // The entry's windows; where it sets none, the defaults' moves for the
  // link between the node's GPUs (routing::default_link_windows); every
  // field auto on NVLink without an entry.
  routing::ProtocolTuning protocols;
  routing::LaunchShapeTuning shapes;  // the entry's (no steps without one)
};

// Resolves the cutoffs, warns once (rank 0) when the file has no entry for
// `fingerprint`, logs the result and where each field came from at INFO
// (`rank` 0). No exchange: from every rank's card (`cards`, which carry
// what each rank's tuning file decides), throws Mismatch on every rank,
// naming the ranks, when the ranks' results would differ.
ResolvedRouting resolve_route_cutoffs(const std::vector<RankCard>& cards, int rank,
                                      const Config& config, Backend backend,
                                      const std::string& fingerprint,
                                      const std::optional<routing::TuningFile>& tuning);

}  // namespace peerplan::communicator
