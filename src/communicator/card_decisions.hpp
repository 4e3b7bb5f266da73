// SPDX-License-Identifier: Apache-2.0
// The decisions of Communicator::create, each a pure function of every
// rank's card (rank_card.hpp, gathered once): every rank computes the same
// verdict from the same cards, so every rank throws the same error, or
// none, without a further exchange. `cards[r]` is rank r's card.
#pragma once

#include <string>
#include <vector>

#include "communicator/gpu_sharing.hpp"
#include "communicator/node_layout.hpp"
#include "communicator/rank_card.hpp"
#include "peerplan/config.hpp"

namespace peerplan::communicator {

// Settings first: throws InvalidArgument naming every rank whose settings
// are unusable and why (a PEERPLAN_* value that does not parse, a Config
// value out of range); else Mismatch naming every agreed field that
// differs, its variable, and which ranks hold which value.
void check_settings(const std::vector<RankCard>& cards);

// Throws InvalidArgument naming the ranks that could not read their tuning file.
void check_tuning_files(const std::vector<RankCard>& cards);

// Backend::automatic -> cuda when the build has the CUDA backend and every
// rank sees a GPU, else host. Throws Unsupported when cuda was asked for
// and cannot run (not built, or a rank sees no GPU).
Backend decide_backend(Backend requested, bool cuda_built, const std::vector<RankCard>& cards);

// Each rank's node (numbered in the order of each node's lowest rank) and
// local rank (its position among its node's ranks), from the node keys.
std::vector<int> node_ids(const std::vector<RankCard>& cards);
std::vector<int> local_ranks(const std::vector<RankCard>& cards);
NodeLayout node_layout(const std::vector<RankCard>& cards);

// Throws InvalidArgument naming the ranks whose topology did not load.
void check_topologies(const std::vector<RankCard>& cards);

// CUDA backend: throws InvalidArgument naming the ranks whose GPU cannot
// be used as configured.
void check_gpus(const std::vector<RankCard>& cards);

// Ranks driving the same GPU of the same machine (posed nodes of one
// machine count as one). `within_groups`: only ranks that also hold the
// same local rank (the hierarchical route's groups between nodes).
SharedGpus shared_gpus(const std::vector<RankCard>& cards, bool within_groups = false);

// Throws Mismatch when ranks would resolve different route cutoffs,
// protocol windows or launch shapes: each rank's tuning entry effect for
// `fingerprint` (none when `tuning_applies` is false or the rank's file
// has no entry), `no_entry_effect` where there is none.
void check_tuning_agreement(const std::vector<RankCard>& cards, const std::string& fingerprint,
                            bool tuning_applies, const std::string& no_entry_effect);

}  // namespace peerplan::communicator
