// SPDX-License-Identifier: Apache-2.0
#include "communicator/node_layout.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

namespace peerplan::communicator {

NodeLayout find_node_layout(bootstrap::Bootstrap& bootstrap) {
  NodeLayout layout;
  layout.num_nodes = bootstrap.num_nodes();
  // Each rank says its node; counting them gives every node's size.
  const std::int32_t mine = bootstrap.node_id();
  bootstrap::Blob blob(sizeof mine);
  std::memcpy(blob.data(), &mine, sizeof mine);
  std::vector<int> ranks_on(static_cast<std::size_t>(layout.num_nodes), 0);
  for (const auto& theirs : bootstrap.allgather(blob)) {
    std::int32_t node = -1;
    if (theirs.size() == sizeof node) std::memcpy(&node, theirs.data(), sizeof node);
    if (node >= 0 && node < layout.num_nodes) ++ranks_on[node];
  }
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
