// SPDX-License-Identifier: Apache-2.0
#include "communicator/p2p_level_check.hpp"

#include <utility>
#include <vector>

#include "peerplan/errors.hpp"
#include "topology/pci_address.hpp"

namespace peerplan::communicator {
namespace {

using topology::P2PLevelVerdict;

// How much a verdict tells: an obstacle most, then unknown links.
int weight(const P2PLevelVerdict& verdict) {
  if (verdict.obstacle) return 2;
  return verdict.unknown_links ? 1 : 0;
}

}  // namespace

P2PLevelVerdict p2p_level_verdict(const std::vector<RankCard>& cards,
                                  const std::vector<int>& node_of_rank, P2PLevel level) {
  std::optional<P2PLevelVerdict> agreed;
  std::vector<bool> done(cards.size(), false);
  // Nodes in the order of their lowest rank, so that the first most telling
  // verdict is the one of the lowest rank, as when ranks gather verdicts.
  for (std::size_t first = 0; first < cards.size(); ++first) {
    if (done[first]) continue;
    std::vector<topology::RankGpuPlacement> placements;
    std::vector<topology::PciAddress> addresses;
    std::vector<topology::NvlinkEnds> ends;
    for (std::size_t r = first; r < cards.size(); ++r) {
      if (node_of_rank[r] != node_of_rank[first]) continue;
      done[r] = true;
      const RankGpu& gpu = cards[r].gpu;
      placements.push_back({static_cast<int>(r), gpu.bus_id, cards[r].gpu_location});
      // An unreadable bus id has no NVLink peer pointing at it; its pairs
      // are unknown anyway (check_p2p_level).
      addresses.push_back(topology::PciAddress::parse(gpu.bus_id).value_or(topology::PciAddress{}));
      ends.push_back(gpu.nvlinks);
    }
    P2PLevelVerdict verdict;
    try {
      verdict =
          topology::check_p2p_level(placements, topology::count_nvlinks(addresses, ends), level);
    } catch (const Error& e) {
      // A bug rather than a fact about the machine; say so instead of blocking P2P.
      verdict.unknown_links = std::string("the P2P level could not be checked: ") + e.what();
    }
    if (!agreed || weight(verdict) > weight(*agreed)) agreed = std::move(verdict);
  }
  return agreed.value_or(P2PLevelVerdict{});
}

std::string topology_file_lacks_gpu(const std::string& topology_file, const std::string& bus_id,
                                    std::size_t file_gpus, P2PLevel level) {
  const auto address = topology::PciAddress::parse(bus_id);
  std::string text = "Config::topology_file / PEERPLAN_TOPO_FILE '" + topology_file +
                     "' does not list this rank's GPU " +
                     (address ? address->to_string() : bus_id) + " (it lists " +
                     std::to_string(file_gpus) + " GPU(s); a file from another machine?): ";
  // Mirrors check_p2p_level: only an explicit level below SYS refuses unknown links.
  if (level == P2PLevel::automatic || level == P2PLevel::sys) {
    text += "its links to the other GPUs are unknown and not checked against PEERPLAN_P2P_LEVEL=" +
            std::string(to_string(level));
  } else {
    text += "its links to the other GPUs are unknown and count as beyond PEERPLAN_P2P_LEVEL=" +
            std::string(to_string(level)) +
            ", so P2P stays off if this node's ranks use other GPUs too (set "
            "PEERPLAN_P2P_LEVEL=SYS or auto to allow them)";
  }
  return text +
         "; point it at an hwloc XML of this machine that lists its GPUs (`lstopo --of xml`), or "
         "unset it to use the live topology";
}

}  // namespace peerplan::communicator
