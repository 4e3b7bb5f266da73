// SPDX-License-Identifier: Apache-2.0
// How the communicator's ranks spread over nodes, as far as routing cares:
// the hierarchical route needs every node to hold the same number of ranks,
// two or more.
#pragma once

#include <string>

#include <vector>

namespace peerplan::communicator {

struct NodeLayout {
  int num_nodes = 1;
  // Ranks on each node when every node holds the same number, else 0.
  int ranks_per_node = 1;
  // "2 nodes with 2 ranks each", "2 nodes with 3, 1 ranks" (node order).
  std::string text;

  // Several nodes that the hierarchical route cannot serve.
  bool unfit_for_hierarchical() const noexcept { return num_nodes > 1 && ranks_per_node < 2; }
};

// From each rank's node (`node_of_rank[r]`, numbered 0.. in the order of
// each node's lowest rank). Pure: the same on every rank.
NodeLayout node_layout_of(const std::vector<int>& node_of_rank);

}  // namespace peerplan::communicator
