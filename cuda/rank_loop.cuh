// SPDX-License-Identifier: Apache-2.0
// How far a kernel's loops over ranks run. A kernel that two-rank calls use
// has an instantiation for exactly two ranks (kRanks = 2) beside the
// general one (kRanks = 0: the call's size, up to kMaxRanks). The general
// loops unroll to kMaxRanks, so a two-rank call would jump over the code for
// the absent ranks, each jump an instruction-cache miss on the
// latency-bound path.
#pragma once

#include "collective_kernels.hpp"

namespace peerplan::cuda_kernels {

template <int kRanks>
struct RankLoop {
  static_assert(kRanks == 0 || kRanks == 2, "two ranks, or any size");
  // What the loops unroll to.
  static constexpr int kBound = kRanks > 0 ? kRanks : kMaxRanks;
  // How many ranks the call has (`size`: the PeerSet's).
  __device__ static constexpr int count(int size) { return kRanks > 0 ? kRanks : size; }
};

}  // namespace peerplan::cuda_kernels
