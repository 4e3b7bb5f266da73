// SPDX-License-Identifier: Apache-2.0
#include "topology/nvlink_counts.hpp"

#include <algorithm>
#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::topology {
namespace {

int links_to(const NvlinkEnds& ends, const PciAddress& peer) {
  return static_cast<int>(std::count(ends.gpu_peers.begin(), ends.gpu_peers.end(), peer));
}

}  // namespace

NvlinkCounts count_nvlinks(const std::vector<PciAddress>& gpus,
                           const std::vector<NvlinkEnds>& ends) {
  if (gpus.size() != ends.size()) {
    throw InvalidArgument("count_nvlinks: " + std::to_string(gpus.size()) + " GPUs but " +
                          std::to_string(ends.size()) + " NVLink reports; pass one per GPU");
  }
  const std::size_t n = gpus.size();
  NvlinkCounts counts(n, std::vector<int>(n, 0));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j || gpus[i] == gpus[j]) continue;
      const int direct = std::max(links_to(ends[i], gpus[j]), links_to(ends[j], gpus[i]));
      const int switched = std::min(ends[i].switch_links, ends[j].switch_links);
      counts[i][j] = direct + switched;
    }
  }
  return counts;
}

}  // namespace peerplan::topology
