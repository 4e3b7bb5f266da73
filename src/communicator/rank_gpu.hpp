// SPDX-License-Identifier: Apache-2.0
// One rank's GPU as the ranks exchange it through the bootstrap (the
// machine fingerprint, the P2P level check): where it sits on PCI, its
// model and where its NVLinks lead. Plain values, no CUDA types.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "topology/nvlink_counts.hpp"

namespace peerplan::communicator {

struct RankGpu {
  std::string bus_id;  // PCI bus id in any spelling PciAddress::parse takes; empty if unknown
  std::string name;    // model, e.g. "NVIDIA H200"
  topology::NvlinkEnds nvlinks;
  friend bool operator==(const RankGpu&, const RankGpu&) = default;
};

// Text, one line per field (a line break in the name becomes a space).
std::string encode_rank_gpu(const RankGpu& gpu);
// The inverse of encode_rank_gpu; NVLink peers that are not PCI addresses
// are dropped, a missing field reads as empty.
RankGpu decode_rank_gpu(std::span<const std::byte> blob);

}  // namespace peerplan::communicator
