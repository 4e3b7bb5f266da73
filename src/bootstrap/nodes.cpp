// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/nodes.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string_view>

#include "peerplan/errors.hpp"

namespace peerplan::bootstrap::detail {
namespace {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::string boot_id() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

}  // namespace

std::string machine_key() { return host_name() + "/" + boot_id(); }

std::string node_key() {
  // Like NCCL_HOSTID: one machine can pose as several nodes (tests), or
  // machines whose names and boot ids look alike can be told apart.
  if (const char* id = std::getenv("PEERPLAN_HOST_ID"); id != nullptr && *id != '\0') {
    return std::string("host id ") + id;
  }
  return machine_key();
}

NodePlacement place_on_nodes(std::span<const std::string> keys, int rank) {
  const int size = static_cast<int>(keys.size());
  if (rank < 0 || rank >= size) {
    throw InternalError("bootstrap: rank " + std::to_string(rank) + " is not among the " +
                        std::to_string(size) + " ranks whose nodes are known; please report this");
  }
  NodePlacement placement;
  // A node's first rank (in rank order) opens it: node ids follow lowest ranks.
  std::map<std::string_view, int> node_of_key;
  std::vector<int> node_of(keys.size());
  for (int r = 0; r < size; ++r) {
    node_of[r] =
        node_of_key.try_emplace(keys[r], static_cast<int>(node_of_key.size())).first->second;
  }
  placement.num_nodes = static_cast<int>(node_of_key.size());
  placement.node_id = node_of[rank];
  for (int r = 0; r < size; ++r) {
    if (node_of[r] != placement.node_id) continue;
    if (r == rank) placement.local_rank = static_cast<int>(placement.members.size());
    placement.members.push_back(r);
  }
  return placement;
}

}  // namespace peerplan::bootstrap::detail
