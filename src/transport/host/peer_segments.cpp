// SPDX-License-Identifier: Apache-2.0
#include "transport/host/peer_segments.hpp"

#include <cstdint>
#include <cstring>

#include "bootstrap/fail_together.hpp"
#include "core/fault_injection.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::transport::host {
namespace {

// Published blob: the segment size (8 bytes) then the name (empty when the
// rank failed to create its segment).
bootstrap::Blob encode(std::uint64_t bytes, const std::string& name) {
  bootstrap::Blob blob(sizeof bytes + name.size());
  std::memcpy(blob.data(), &bytes, sizeof bytes);
  std::memcpy(blob.data() + sizeof bytes, name.data(), name.size());
  return blob;
}

struct Published {
  std::uint64_t bytes = 0;
  std::string name;
};

Published decode(const bootstrap::Blob& blob) {
  Published p;
  if (blob.size() < sizeof p.bytes) return p;
  std::memcpy(&p.bytes, blob.data(), sizeof p.bytes);
  p.name.assign(reinterpret_cast<const char*>(blob.data()) + sizeof p.bytes,
                blob.size() - sizeof p.bytes);
  return p;
}

}  // namespace

PeerSegments PeerSegments::establish(bootstrap::Bootstrap& bootstrap,
                                     const std::string& name_prefix, std::size_t bytes) {
  const int me = bootstrap.local_rank();
  const std::string own_name = name_prefix + "l" + std::to_string(me);
  std::string error;  // this rank's failure, if any
  bool size_mismatch = false;

  PeerSegments result;
  result.segments_.resize(static_cast<std::size_t>(bootstrap.local_size()));
  ShmSegment& own = result.segments_[me];
  try {
    own = ShmSegment::create(own_name, bytes);
  } catch (const SystemError& e) {
    error = e.what();
  }
  // A rank killed here leaves its name in /dev/shm; the next host transport
  // created on this node removes it (remove_stale_segments).
  if (own.mapped()) PEERPLAN_FAULT_POINT("shm.created", bootstrap.rank());

  // Publish only a segment that is fully set up (zero-filled inside create).
  const auto published = bootstrap.local_allgather(encode(bytes, own.mapped() ? own_name : ""));

  for (int peer = 0; peer < static_cast<int>(published.size()); ++peer) {
    const Published p = decode(published[peer]);
    if (p.bytes != bytes) size_mismatch = true;
  }
  if (size_mismatch) {
    error =
        "peerplan host backend: the ranks of this node asked for staging segments of "
        "different sizes; reserve() must be called with the same size on every rank "
        "(do all ranks declare the same plans?).";
  } else if (error.empty()) {
    for (int peer = 0; peer < static_cast<int>(published.size()); ++peer) {
      if (peer == me) continue;
      const Published p = decode(published[peer]);
      if (p.name.empty()) continue;  // that rank failed and reports it itself
      try {
        result.segments_[peer] = ShmSegment::open(p.name, bytes);
      } catch (const SystemError& e) {
        error = e.what();
        break;
      }
    }
  }

  // After this agreement no rank opens a name any more: remove ours now.
  // (Should the agreement itself throw, ~ShmSegment removes it.)
  const auto failures = bootstrap::gather_failures(
      bootstrap, error.empty() ? std::nullopt : std::optional<std::string>(error));
  own.unlink();

  if (!failures) return result;
  result.release();
  if (size_mismatch) throw Mismatch(error);
  throw SystemError("peerplan host backend: setting up shared memory failed (" + failures->message +
                    "). Check /dev/shm on those ranks: free space (df -h /dev/shm), docker "
                    "--shm-size, or set PEERPLAN_DISABLE_P2P=1.");
}

}  // namespace peerplan::transport::host
