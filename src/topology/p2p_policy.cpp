// SPDX-License-Identifier: Apache-2.0
#include "topology/p2p_policy.hpp"

#include <algorithm>
#include <sstream>

#include "peerplan/errors.hpp"
#include "topology/pci_address.hpp"

namespace peerplan::topology {
namespace {

// What is known about the link between two ranks' GPUs.
struct PairLink {
  std::optional<LinkClass> link;  // nullopt: unknown
  bool distinct_gpus = false;     // known to be two GPUs, even when the link is not
};

std::optional<PciAddress> address_of(const RankGpuPlacement& rank) {
  if (rank.location) return rank.location->address;
  return PciAddress::parse(rank.bus_id);
}

// The GPU's bus id as messages show it, in one spelling whatever the rank
// reported (lstopo's: CUDA writes an 8-digit domain), so that two ranks on
// one GPU read alike.
std::string bus_id_text(const RankGpuPlacement& rank) {
  if (const auto address = address_of(rank)) return address->to_string();
  return rank.bus_id.empty() ? std::string("(no bus id)") : rank.bus_id;
}

// A pair whose GPUs were not both placed still has a known link when they
// are the same GPU (two ranks sharing one), or when NVLink joins them
// (NVML sees it without hwloc).
PairLink link_between(const RankGpuPlacement& a, const RankGpuPlacement& b, int nvlinks) {
  if (a.location && b.location)
    return {classify(*a.location, *b.location, nvlinks),
            a.location->address != b.location->address};
  const auto address_a = address_of(a);
  const auto address_b = address_of(b);
  const bool both_known = address_a && address_b;
  if (both_known && *address_a == *address_b) return {LinkClass{LinkKind::loc, 0}, false};
  if (nvlinks > 0) return {LinkClass{LinkKind::nv, nvlinks}, true};
  return {std::nullopt, both_known};
}

void check_nvlink_matrix(const NvlinkCounts& nvlinks, std::size_t n) {
  if (nvlinks.empty()) return;
  bool square = nvlinks.size() == n;
  for (const auto& row : nvlinks) square = square && row.size() == n;
  if (!square)
    throw InvalidArgument("check_p2p_level: NVLink counts must be a " + std::to_string(n) + "x" +
                          std::to_string(n) + " matrix (one row and column per rank) or empty");
  for (const auto& row : nvlinks)
    for (int count : row)
      if (count < 0)
        throw InvalidArgument("check_p2p_level: NVLink count " + std::to_string(count) +
                              " is negative; pass 0 for GPUs that share no NVLink");
}

std::string pair_name(const RankGpuPlacement& a, const RankGpuPlacement& b) {
  return "ranks " + std::to_string(a.rank) + " and " + std::to_string(b.rank);
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

// The first pair beyond the level, and what allowing every such pair takes.
struct Beyond {
  std::size_t first_i = 0, first_j = 0;
  PairLink first_link;
  int pairs = 0;
  int unknown_pairs = 0;                   // of `pairs`, those whose link is unknown
  P2PLevel level_for_all = P2PLevel::loc;  // over the pairs whose link is known
};

// Whether a pair of two GPUs whose link the topology does not show counts
// as beyond `level`. A level the user chose on purpose is honoured, as
// NCCL leaves P2P off for a GPU missing from its topology; SYS allows every
// link anyway, and auto keeps allowing them (the backend's peer-access
// check still applies) so that containers that hide /sys keep P2P.
bool unknown_link_beyond(P2PLevel level) {
  return level != P2PLevel::automatic && level != P2PLevel::sys;
}

// Why a topology lacks a GPU, for messages.
constexpr const char* kWhyUnplaced =
    "as when /sys hides PCI devices (some containers), PEERPLAN_TOPO_FILE lacks the GPU, or its "
    "PCI domain is above 0xffff (hwloc drops those)";
constexpr const char* kTopoFileAdvice =
    "set PEERPLAN_TOPO_FILE to an hwloc XML of this machine that lists its GPUs (`lstopo --of "
    "xml`, where /sys shows them) so that the links are known";

// "does not list GPU 0000:99:00.0 (rank 1)": the GPUs of a pair that
// their rank's topology did not place, the reason their link is unknown.
std::string unplaced_of_pair(const RankGpuPlacement& a, const RankGpuPlacement& b) {
  const auto gpu = [](const RankGpuPlacement& rank) {
    return "GPU " + bus_id_text(rank) + " (rank " + std::to_string(rank.rank) + ")";
  };
  if (!a.location && !b.location) return "lists neither " + gpu(a) + " nor " + gpu(b);
  return "does not list " + gpu(a.location ? b : a);
}

std::string obstacle_text(const std::vector<RankGpuPlacement>& ranks, const Beyond& beyond,
                          P2PLevel level, int pair_count) {
  const RankGpuPlacement& a = ranks[beyond.first_i];
  const RankGpuPlacement& b = ranks[beyond.first_j];
  std::string text = pair_name(a, b);
  if (beyond.first_link.link) {
    text += ": GPUs " + bus_id_text(a) + " and " + bus_id_text(b) + " are linked through " +
            describe_link(*beyond.first_link.link);
  } else {
    // Say why the link is unknown: the fix is to let the topology see the GPU.
    text += " use different GPUs (" + bus_id_text(a) + " and " + bus_id_text(b) +
            ") whose link the topology does not show: it " + unplaced_of_pair(a, b) + ", " +
            kWhyUnplaced + "; an unknown link counts as";
  }
  text += (beyond.first_link.link ? ", beyond" : " beyond");
  text += " PEERPLAN_P2P_LEVEL=" + describe_level(level);
  const int others = beyond.pairs - 1;
  if (others > 0)
    text += ", as are " + std::to_string(others) + " more of the " + std::to_string(pair_count) +
            " GPU pairs";
  const char* them = others > 0 ? "them all" : "it";
  if (beyond.unknown_pairs == 0) {
    text += std::string("; set PEERPLAN_P2P_LEVEL=") + to_string(beyond.level_for_all) +
            " to allow " + them;
  } else {
    // Only SYS allows every unknown link, and auto too when it allows every known one.
    const bool auto_allows = beyond.level_for_all <= effective_p2p_level(P2PLevel::automatic);
    text += std::string("; ") + kTopoFileAdvice + ", or PEERPLAN_P2P_LEVEL=SYS" +
            (auto_allows ? " or auto" : "") + " to allow " + them;
  }
  return text;
}

}  // namespace

std::string describe_link(LinkClass link) {
  const std::string name = to_string(link);
  switch (link.kind) {
    case LinkKind::loc:
      return name + " (the same GPU)";
    case LinkKind::nv:
      return name + " (" + std::to_string(link.nvlinks) +
             (link.nvlinks == 1 ? " NVLink)" : " NVLinks)");
    case LinkKind::pix:
      return name + " (one PCIe switch)";
    case LinkKind::pxb:
      return name + " (several PCIe switches)";
    case LinkKind::phb:
      return name + " (a PCIe host bridge)";
    case LinkKind::node:
      return name + " (two PCIe host bridges of one NUMA node and socket)";
    case LinkKind::sys:
      return name +
             " (across NUMA nodes or sockets, over the CPU interconnect, or where either GPU's "
             "node or socket is unknown)";
  }
  return name;
}

std::string describe_level(P2PLevel level) {
  const std::string name = to_string(level);
  switch (level) {
    case P2PLevel::loc:
      return name + " (the same GPU only)";
    case P2PLevel::nvl:
      return name + " (NVLink only)";
    case P2PLevel::pix:
      return name + " (up to one PCIe switch)";
    case P2PLevel::pxb:
      return name + " (up to several PCIe switches, no host bridge)";
    case P2PLevel::phb:
      return name + " (up to a PCIe host bridge)";
    case P2PLevel::node:
      return name + " (within one NUMA node)";
    case P2PLevel::sys:
      return name + " (every link)";
    case P2PLevel::automatic:
      return name + " (the default: " + to_string(effective_p2p_level(level)) +
             ", within one NUMA node)";
  }
  return name;
}

P2PLevelVerdict check_p2p_level(const std::vector<RankGpuPlacement>& ranks,
                                const NvlinkCounts& nvlinks, P2PLevel level) {
  const std::size_t n = ranks.size();
  check_nvlink_matrix(nvlinks, n);
  const P2PLevel effective = effective_p2p_level(level);

  P2PLevelVerdict verdict;
  std::optional<Beyond> beyond;
  std::vector<bool> in_unknown_pair(n, false);
  std::ostringstream lines;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      ++verdict.pairs;
      const PairLink pair = link_between(ranks[i], ranks[j], nvlinks.empty() ? 0 : nvlinks[i][j]);
      const bool known_beyond = pair.link && !p2p_allowed(*pair.link, effective);
      const bool unknown_beyond = !pair.link && pair.distinct_gpus && unknown_link_beyond(level);
      lines << "\n  " << pair_name(ranks[i], ranks[j]) << " (" << bus_id_text(ranks[i]) << ", "
            << bus_id_text(ranks[j]) << "): " << (pair.link ? to_string(*pair.link) : "unknown");
      if (known_beyond || unknown_beyond) {
        if (!beyond) beyond = Beyond{i, j, pair, 0, 0, P2PLevel::loc};
        ++beyond->pairs;
        if (pair.link)
          beyond->level_for_all = std::max(beyond->level_for_all, level_needed_for(*pair.link));
        else
          ++beyond->unknown_pairs;
        lines << (pair.link ? ", beyond the level"
                            : ", beyond the level (a GPU the topology does not place)");
      } else if (pair.link) {
        ++verdict.allowed_pairs;
        lines << ", allowed";
      } else {
        ++verdict.unknown_pairs;
        in_unknown_pair[i] = !ranks[i].location || in_unknown_pair[i];
        in_unknown_pair[j] = !ranks[j].location || in_unknown_pair[j];
        lines << ", not checked (a GPU the topology does not place)";
      }
    }
  }

  if (beyond) {
    verdict.beyond_pairs = beyond->pairs;
    verdict.obstacle = obstacle_text(ranks, *beyond, level, verdict.pairs);
  }
  std::vector<int> unplaced;
  std::string unplaced_ids;
  for (std::size_t i = 0; i < n; ++i) {
    if (!in_unknown_pair[i]) continue;
    unplaced.push_back(ranks[i].rank);
    unplaced_ids += (unplaced_ids.empty() ? "" : ", ") + bus_id_text(ranks[i]);
  }
  if (!unplaced.empty()) {
    // At auto these pairs are allowed: say why their GPU is missing and how
    // to have them checked or refused.
    const bool automatic = level == P2PLevel::automatic;
    std::string text = "the topology does not place the GPU of " + join_ranks(unplaced) + " (" +
                       unplaced_ids + ")" +
                       (automatic ? std::string(", ") + kWhyUnplaced : std::string()) + ": " +
                       std::to_string(verdict.unknown_pairs) + " GPU pair(s) of unknown link";
    if (automatic) {
      text += std::string(
                  ", allowed by PEERPLAN_P2P_LEVEL=auto (the backend's peer-access check still "
                  "applies); ") +
              kTopoFileAdvice +
              ", or set an explicit PEERPLAN_P2P_LEVEL below SYS to count them as beyond it";
    } else {
      text +=
          ", not checked against PEERPLAN_P2P_LEVEL (the backend's peer-access check still "
          "applies)";
    }
    verdict.unknown_links = std::move(text);
  }
  std::ostringstream summary;
  summary << "PEERPLAN_P2P_LEVEL=" << describe_level(level) << ": " << verdict.pairs
          << " GPU pair(s), " << verdict.allowed_pairs << " allowed, " << verdict.beyond_pairs
          << " beyond the level, " << verdict.unknown_pairs << " unknown" << lines.str();
  verdict.summary = summary.str();
  return verdict;
}

}  // namespace peerplan::topology
