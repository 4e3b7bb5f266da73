// SPDX-License-Identifier: Apache-2.0
// A two-shot plan larger than RouteCutoffs::two_shot_chunk_bytes runs as
// consecutive two-shot calls on pieces of its message, each a plan launch
// of its own size, so that the staging buffers hold one piece: reserve()
// is sized for the piece, not the message. Every element is reduced in
// rank order within its piece exactly as in one whole call, so the bits
// are the same; every rank runs the same pieces in the same order (the
// cutoffs and the declaration are agreed), each piece a bounded collective.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "transport/transport.hpp"

namespace peerplan::communicator {

struct TwoShotPieces {
  std::size_t piece_bytes = 0;  // every piece but a shorter last one
  std::size_t full_pieces = 0;  // pieces of piece_bytes
  std::size_t tail_bytes = 0;   // the shorter last piece (0: none)
  // The launch of the shorter last piece; the plan's own launch runs the
  // full pieces. Set exactly when tail_bytes != 0.
  std::unique_ptr<transport::PlanLaunch> tail_launch;

  // ", in 4 pieces of 67108864 bytes + 1 of 1024" (for the plan's launch text).
  std::string describe() const;
};

struct PlanLaunches {
  std::unique_ptr<transport::PlanLaunch> launch;
  std::unique_ptr<TwoShotPieces> pieces;  // null: one call runs the whole message
};

// The launches of `whole` (a contiguous two-shot all-reduce) split into
// pieces of `piece_bytes` (routing::two_shot_piece_bytes, nonzero and
// smaller than the message, a multiple of the element size).
PlanLaunches prepare_in_pieces(transport::PeerTransport& peer,
                               const transport::LaunchRequest& whole, std::size_t piece_bytes);

// One call of such a plan: the pieces in order, each on the same stream.
// Returns true when every piece was read in place (zero copy).
bool all_reduce_in_pieces(transport::PeerTransport& peer, const transport::PlanLaunch& piece_launch,
                          const TwoShotPieces& pieces, const transport::AllReduceArgs& args);

}  // namespace peerplan::communicator
