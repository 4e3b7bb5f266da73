// SPDX-License-Identifier: Apache-2.0
// The shared-memory segments of all ranks of this node, each mapped in this
// process: the collective setup protocol of the host P2P transport.
//   1. every rank creates, sizes, maps and zero-fills its own segment;
//   2. only then are the names published (local_allgather);
//   3. every rank maps every peer's segment;
//   4. an agreement: once it returns, every rank has mapped everything it
//      will map, so each rank removes its own name (shm_unlink) right away.
// From then on nothing of the job is visible in /dev/shm: the memory goes
// away with the last mapping, even if every process is killed. A rank
// killed between 1 and 4 leaves its name behind; names carry their
// creator's pid so that a later job removes it (segment_names.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "transport/host/shm_segment.hpp"

namespace peerplan::transport::host {

class PeerSegments {
 public:
  PeerSegments() = default;

  // Collective over every rank of `bootstrap`; the segments are those of
  // the node-local ranks. Own segment name: name_prefix + "l<local rank>".
  // `bytes` must be equal on every rank (Mismatch otherwise). Throws
  // SystemError (naming the OS error and what to check) when any rank
  // could not create or map a segment, on every rank; Timeout from the
  // bootstrap. Leaves no name behind in any case.
  static PeerSegments establish(bootstrap::Bootstrap& bootstrap, const std::string& name_prefix,
                                std::size_t bytes);

  int count() const noexcept { return static_cast<int>(segments_.size()); }
  std::byte* base(int local_rank) const noexcept { return segments_[local_rank].data(); }
  std::size_t bytes() const noexcept { return segments_.empty() ? 0 : segments_[0].size(); }
  // Unmaps everything (local, no communication).
  void release() noexcept { segments_.clear(); }

 private:
  std::vector<ShmSegment> segments_;  // indexed by local rank
};

}  // namespace peerplan::transport::host
