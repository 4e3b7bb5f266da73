// SPDX-License-Identifier: Apache-2.0
// Which ranks share a node: each rank names its node by a key, the keys are
// allgathered, and every rank derives the same placement from them.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace peerplan::bootstrap::detail {

// This process's node: its host name and the kernel's boot id
// (/proc/sys/kernel/random/boot_id), the way NCCL tells hosts apart. Ranks
// with equal keys share a node (one kernel, so one /dev/shm and one set of
// GPUs): the host name alone can repeat across machines (cloned images,
// containers), the boot id alone is unreadable outside Linux. The one place
// that decides what a node is.
// PEERPLAN_HOST_ID, when set and not empty, is the key instead (like
// NCCL_HOSTID): ranks of one machine given different ids count as different
// nodes, so one machine can run "2 nodes x 2 ranks" for tests; peer
// mappings (shared memory, CUDA IPC) are then never attempted between them.
std::string node_key();

// The machine itself (host name and boot id), whatever PEERPLAN_HOST_ID
// says: for what belongs to the hardware, e.g. whether two ranks drive the
// same GPU (NCCL refuses that even across posed nodes, since it tells hosts
// apart by its own hash).
std::string machine_key();

struct NodePlacement {
  int node_id = 0;  // nodes numbered in the order of their lowest rank
  int num_nodes = 1;
  std::vector<int> members;  // ranks on this rank's node, ascending (members[0]: local rank 0)
  int local_rank = 0;        // this rank's position in `members`
};

// The placement of `rank` given every rank's key (`keys[r]` is rank r's).
NodePlacement place_on_nodes(std::span<const std::string> keys, int rank);

}  // namespace peerplan::bootstrap::detail
