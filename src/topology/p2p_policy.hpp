// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_P2P_LEVEL applied to the GPUs of a node's ranks, like
// NCCL_P2P_LEVEL: every pair of ranks' GPUs is classified (link_class.hpp)
// and one pair farther than the level is a reason to leave P2P off for the
// whole communicator. Plain data in, text out, so that every rank computes
// the same verdict from the same gathered facts, and the policy is tested
// on the hwloc fixtures without GPUs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "peerplan/config.hpp"
#include "topology/gpu_location.hpp"
#include "topology/link_class.hpp"

namespace peerplan::topology {

// One rank's GPU as the policy sees it.
struct RankGpuPlacement {
  int rank = -1;       // the rank's number in the communicator, for messages
  std::string bus_id;  // PCI bus id as the rank reported it; empty when unknown
  // Where the topology places that GPU; nullopt when it cannot (a GPU the
  // hwloc topology does not list, a topology that failed to load).
  std::optional<GpuLocation> location;
};

struct P2PLevelVerdict {
  // Why P2P must stay off: the first pair (in the order of `ranks`) whose
  // link is farther than the level, its class in nvidia-smi's vocabulary
  // (or why its link is unknown), the level, and what would allow it.
  // nullopt when every pair is within the level. Two GPUs of unknown link
  // count as beyond every explicit level but SYS, as NCCL leaves P2P off
  // for a GPU missing from its topology; auto allows them.
  std::optional<std::string> obstacle;
  // Ranks whose GPU could not be placed, in pairs of unknown link not held
  // against the level (at auto or SYS, or a rank without a bus id; the
  // backend's peer-access check still decides). nullopt when there are
  // none. Worth an INFO line.
  std::optional<std::string> unknown_links;
  // The level, the counts below, then one line per pair with its class
  // and verdict, for INFO.
  std::string summary;
  int pairs = 0;          // pairs of ranks, n (n - 1) / 2
  int allowed_pairs = 0;  // link known and within the level (LOC pairs included)
  int beyond_pairs = 0;   // farther than the level, or unknown at an explicit level below SYS
  int unknown_pairs = 0;  // link unknown, not held against the level
};

// Classifies every pair of `ranks` (two ranks on the same GPU are LOC,
// allowed at every level) and checks it against `level`
// (P2PLevel::automatic acts as effective_p2p_level(level)). nvlinks[i][j]
// is the NVLink count between ranks[i]'s and ranks[j]'s GPUs
// (count_nvlinks over the ranks' bus ids), or empty when none is known; a
// pair with NVLinks is NV# even when a GPU could not be placed. Two ranks
// known to use different GPUs whose link is unknown are beyond every
// explicit level but SYS (not beyond auto). Deterministic: the same input
// gives the same text on every rank.
// Throws InvalidArgument if nvlinks is neither empty nor ranks.size() square.
P2PLevelVerdict check_p2p_level(const std::vector<RankGpuPlacement>& ranks,
                                const NvlinkCounts& nvlinks, P2PLevel level);

// "SYS (across NUMA nodes, over the CPU interconnect)": a class with what
// it means, for messages.
std::string describe_link(LinkClass link);
// "NODE", or "auto (= NODE, the default)": the level as the user set it.
std::string describe_level(P2PLevel level);

}  // namespace peerplan::topology
