// SPDX-License-Identifier: Apache-2.0
// Ranks that drive the same GPU. Several ranks of a node may share one GPU
// (PEERPLAN_DEVICE, CUDA_VISIBLE_DEVICES, or more ranks than GPUs): CUDA IPC
// works between processes of one device and the P2P kernels make progress
// as the GPU time-slices the processes, so such a job runs correctly, but
// never fast: it is for testing. NCCL refuses it, so the fallback is MPI.
#pragma once

#include <string>
#include <vector>

namespace peerplan::communicator {

struct SharedGpus {
  // Global ranks that share one GPU, one group per shared GPU (groups of
  // two or more, each in rank order; groups ordered by their first rank).
  std::vector<std::vector<int>> groups;
  // The GPU of each group ("0000:17:00.0"), for messages.
  std::vector<std::string> gpus;

  bool any() const noexcept { return !groups.empty(); }
  // "ranks 0, 2 share GPU 0000:17:00.0; ranks 1, 3 share GPU ..."
  std::string text() const;
};

// From every rank's GPU key (anything that names one GPU of one node, e.g.
// "<node>/<PCI bus id>"), in rank order; an empty key matches nothing.
// `names[i]` is what messages call rank i's GPU. Pure: the same on every
// rank given the same inputs (create derives the keys from the rank cards:
// card_decisions.hpp, shared_gpus).
SharedGpus group_shared_gpus(const std::vector<std::string>& keys,
                             const std::vector<std::string>& names);

}  // namespace peerplan::communicator
