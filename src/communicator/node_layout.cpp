// SPDX-License-Identifier: Apache-2.0
#include "communicator/node_layout.hpp"

#include <algorithm>
#include <vector>

namespace peerplan::communicator {

NodeLayout node_layout_of(const std::vector<int>& node_of_rank) {
  NodeLayout layout;
  for (int node : node_of_rank) layout.num_nodes = std::max(layout.num_nodes, node + 1);
  std::vector<int> ranks_on(static_cast<std::size_t>(layout.num_nodes), 0);
  for (int node : node_of_rank)
    if (node >= 0) ++ranks_on[node];
  bool even = true;
  for (int count : ranks_on) even = even && count == ranks_on[0];
  layout.ranks_per_node = even ? ranks_on[0] : 0;
  const std::string nodes =
      std::to_string(layout.num_nodes) + (layout.num_nodes == 1 ? " node" : " nodes");
  if (layout.num_nodes == 1) {
    layout.text = nodes;
  } else if (even) {
    layout.text = nodes + " with " + std::to_string(ranks_on[0]) +
                  (ranks_on[0] == 1 ? " rank each" : " ranks each");
  } else {
    layout.text = nodes + " with ";
    for (std::size_t i = 0; i < ranks_on.size(); ++i)
      layout.text += (i ? ", " : "") + std::to_string(ranks_on[i]);
    layout.text += " ranks";
  }
  return layout;
}

}  // namespace peerplan::communicator
