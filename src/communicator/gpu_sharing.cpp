// SPDX-License-Identifier: Apache-2.0
#include "communicator/gpu_sharing.hpp"

#include <map>

namespace peerplan::communicator {

std::string SharedGpus::text() const {
  std::string out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!out.empty()) out += "; ";
    out += "ranks ";
    for (std::size_t i = 0; i < groups[g].size(); ++i)
      out += (i ? ", " : "") + std::to_string(groups[g][i]);
    out += " share GPU " + gpus[g];
  }
  return out;
}

SharedGpus group_shared_gpus(const std::vector<std::string>& keys,
                             const std::vector<std::string>& names) {
  std::map<std::string, std::vector<int>> by_key;
  for (std::size_t r = 0; r < keys.size(); ++r)
    if (!keys[r].empty()) by_key[keys[r]].push_back(static_cast<int>(r));
  // Ordered by the first rank of each group, not by key: messages then read
  // in rank order.
  std::map<int, const std::vector<int>*> by_first_rank;
  for (const auto& [key, ranks] : by_key)
    if (ranks.size() > 1) by_first_rank[ranks.front()] = &ranks;
  SharedGpus shared;
  for (const auto& [first, ranks] : by_first_rank) {
    shared.groups.push_back(*ranks);
    shared.gpus.push_back(static_cast<std::size_t>(first) < names.size() ? names[first] : "?");
  }
  return shared;
}

}  // namespace peerplan::communicator
