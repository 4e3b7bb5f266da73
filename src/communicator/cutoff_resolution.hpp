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

#include "bootstrap/bootstrap.hpp"
#include "peerplan/config.hpp"
#include "routing/tuning_file.hpp"

namespace peerplan::communicator {

// Reads Config::tuning_file on every rank (each rank reads the file itself;
// nullopt where none is configured). Collective: if any rank cannot read
// or parse it, throws InvalidArgument on every rank with the file, the line
// and what to change.
std::optional<routing::TuningFile> load_tuning_file(bootstrap::Bootstrap& bootstrap,
                                                    const Config& config);

struct ResolvedRouting {
  RouteCutoffs cutoffs;               // no field at kAutoCutoff
  routing::ProtocolTuning protocols;  // the entry's (every field auto without one)
  routing::LaunchShapeTuning shapes;  // the entry's (no steps without one)
};

// Resolves the cutoffs, warns once (rank 0) when the file has no entry for
// `fingerprint`, logs the result and where each field came from at INFO
// (rank 0). Collective: throws Mismatch on every rank, naming the ranks,
// when the ranks' results differ.
ResolvedRouting resolve_route_cutoffs(bootstrap::Bootstrap& bootstrap, const Config& config,
                                      Backend backend, const std::string& fingerprint,
                                      const std::optional<routing::TuningFile>& tuning);

}  // namespace peerplan::communicator
