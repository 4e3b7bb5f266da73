// SPDX-License-Identifier: Apache-2.0
// Several nodes posed on one machine, for the tests of the hierarchical
// route (communicator_hierarchical_test on the host backend,
// cuda_hierarchical_test on the CUDA backend): PEERPLAN_HOST_ID gives each
// rank the node a test picks, and posed_nodes() (the reference model of the
// sum in communicator_test_support.hpp) follows it. The layouts each world
// size can pose, fit for the hierarchical route or not.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "support/communicator_test_support.hpp"

namespace peerplan::comm_test {

// The ranks of each node, nodes in order of their lowest rank.
using Nodes = std::vector<std::vector<int>>;

// While alive, this rank says it is on the node of `nodes` that holds it
// (PEERPLAN_HOST_ID, read when a communicator is created), and the support
// code's model of the hierarchical sum follows `nodes`.
class PoseAsNodes {
 public:
  explicit PoseAsNodes(const Nodes& nodes) {
    for (std::size_t node = 0; node < nodes.size(); ++node)
      for (int rank : nodes[node])
        if (rank == test_rank())
          ::setenv("PEERPLAN_HOST_ID", ("node" + std::to_string(node)).c_str(), 1);
    posed_nodes() = nodes;
  }
  ~PoseAsNodes() {
    ::unsetenv("PEERPLAN_HOST_ID");
    posed_nodes().clear();
  }
  PoseAsNodes(const PoseAsNodes&) = delete;
  PoseAsNodes& operator=(const PoseAsNodes&) = delete;
};

// "{0,1} {2,3}".
inline std::string describe(const Nodes& nodes) {
  std::string text;
  for (const auto& node : nodes) {
    text += text.empty() ? "{" : " {";
    for (std::size_t k = 0; k < node.size(); ++k) text += (k ? "," : "") + std::to_string(node[k]);
    text += "}";
  }
  return text;
}

// Layouts with the same number (>= 2) of ranks on every node, for this
// world size (none at 2, 3, 5 and 7 ranks): ranks grouped and interleaved.
inline std::vector<Nodes> even_layouts(int n) {
  switch (n) {
    case 4:
      return {{{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}};
    case 6:
      return {{{0, 1}, {2, 3}, {4, 5}}, {{0, 1, 2}, {3, 4, 5}}, {{0, 3}, {1, 4}, {2, 5}}};
    case 8:
      return {{{0, 1, 2, 3}, {4, 5, 6, 7}}, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}};
    default:
      return {};
  }
}

// Layouts the hierarchical route cannot serve: one rank on each node
// (every world size), and, from 3 ranks on, nodes holding different
// numbers of ranks (n-1 ranks and 1 rank; at 2 ranks that would be the
// first layout again).
inline std::vector<Nodes> unfit_layouts(int n) {
  Nodes one_each;
  for (int r = 0; r < n; ++r) one_each.push_back({r});
  std::vector<Nodes> layouts{one_each};
  if (n >= 3) {
    Nodes uneven{{}, {}};
    for (int r = 0; r < n; ++r) uneven[r < n - 1 ? 0 : 1].push_back(r);
    layouts.push_back(uneven);
  }
  return layouts;
}

// Cutoffs that admit every declared shape of the hierarchical tests to P2P
// (the all-reduces up to 256 KiB, the fused op up to 64 KiB); larger
// declared all-reduces go to the fallback as over_cutoff.
inline Config hierarchical_config() {
  Config config;
  config.cutoffs.one_shot_max_bytes = 16 * 1024;
  config.cutoffs.two_shot_max_bytes = 256 * 1024;
  config.cutoffs.two_shot_min_bytes = 0;
  config.cutoffs.fused_max_bytes = 64 * 1024;
  return config;
}

}  // namespace peerplan::comm_test
