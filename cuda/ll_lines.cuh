// SPDX-License-Identifier: Apache-2.0
// LL lines, the push one-shot's (one_shot_ll.cu) and the LL fused op's
// (fused_ll.cu) way to move data without a flag barrier: a 16-byte line
// carries 8 data bytes and two flag words (ll_flags.cuh), written by one
// store, so the data's arrival is seen in the line itself.
#pragma once

#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "ll_flags.cuh"

namespace peerplan::cuda_kernels {

// One-shot uses NCCL's "LL" idea: every 16-byte line carries 8 bytes of
// data and two flag words, written with one 16-byte store, so a reader
// knows the data has arrived when it sees the flags: no separate flag
// write, hence no fence that would wait for the data writes to be
// acknowledged across the link. Line i of source r lies in sub-slot r.
__device__ __forceinline__ void store_line(uint4* line, uint2 data, std::uint32_t flag) {
  store_volatile_pack(line, make_line(data, flag));  // flags: ll_flags.cuh
}

// Waits (bounded) until `line` carries `epoch`; false when the call failed
// (timeout, or a peer or another block of this rank gave up).
__device__ __forceinline__ bool wait_line(const PeerSet& p, const uint4* line, int source,
                                          std::uint32_t epoch, uint2& data) {
  uint4 v = load_volatile_pack(line);
  std::uint64_t start = 0;
  for (std::uint32_t spins = 0; !carries(v, epoch); v = load_volatile_pack(line)) {
    if ((++spins & 255u) != 0u) continue;
    const Signals* own = signals_of(p, p.rank);
    if (!may_wait_on(p, own, source, Phase::arrive, epoch, start)) return false;
  }
  data = make_uint2(v.x, v.z);
  return true;
}

// `seen` is a first look at `line`, loaded early with others so that their
// latencies overlap; only a line that had not arrived then is waited for.
__device__ __forceinline__ bool take_line(const PeerSet& p, const uint4* line, uint4 seen,
                                          int source, std::uint32_t epoch, uint2& data) {
  if (carries(seen, epoch)) {
    data = make_uint2(seen.x, seen.z);
    return true;
  }
  return wait_line(p, line, source, epoch, data);
}

template <class T>
union Half8 {  // the 8 data bytes of a line
  uint2 raw;
  T v[8 / sizeof(T)];
};

}  // namespace peerplan::cuda_kernels
