// SPDX-License-Identifier: Apache-2.0
#include "communicator/two_shot_pieces.hpp"

#include <cstdint>

#include "peerplan/layout.hpp"

namespace peerplan::communicator {
namespace {

TensorLayout flat(std::size_t bytes, DataType dtype) {
  return TensorLayout{static_cast<std::int64_t>(bytes / element_size(dtype))};
}

}  // namespace

std::string TwoShotPieces::describe() const {
  std::string text = ", in " + std::to_string(full_pieces) + " pieces of " +
                     std::to_string(piece_bytes) + " bytes";
  if (tail_bytes != 0) text += " + 1 of " + std::to_string(tail_bytes);
  return text;
}

PlanLaunches prepare_in_pieces(transport::PeerTransport& peer,
                               const transport::LaunchRequest& whole, std::size_t piece_bytes) {
  PlanLaunches launches;
  auto pieces = std::make_unique<TwoShotPieces>();
  pieces->piece_bytes = piece_bytes;
  pieces->full_pieces = whole.message_bytes / piece_bytes;
  pieces->tail_bytes = whole.message_bytes % piece_bytes;
  transport::LaunchRequest request = whole;
  const TensorLayout piece_layout = flat(piece_bytes, whole.dtype);
  request.layout = &piece_layout;
  request.message_bytes = piece_bytes;
  launches.launch = peer.prepare(request);
  if (pieces->tail_bytes != 0) {
    const TensorLayout tail_layout = flat(pieces->tail_bytes, whole.dtype);
    request.layout = &tail_layout;
    request.message_bytes = pieces->tail_bytes;
    pieces->tail_launch = peer.prepare(request);
  }
  launches.pieces = std::move(pieces);
  return launches;
}

bool all_reduce_in_pieces(transport::PeerTransport& peer, const transport::PlanLaunch& piece_launch,
                          const TwoShotPieces& pieces, const transport::AllReduceArgs& args) {
  const auto* in = static_cast<const std::byte*>(args.in);
  auto* out = static_cast<std::byte*>(args.out);
  bool zero_copy = true;
  const TensorLayout piece_layout = flat(pieces.piece_bytes, args.dtype);
  for (std::size_t i = 0; i < pieces.full_pieces; ++i) {
    const std::size_t offset = i * pieces.piece_bytes;
    zero_copy &= peer.all_reduce(
        piece_launch, {in + offset, out + offset, args.dtype, &piece_layout, args.stream});
  }
  if (pieces.tail_bytes != 0) {
    const std::size_t offset = pieces.full_pieces * pieces.piece_bytes;
    const TensorLayout tail_layout = flat(pieces.tail_bytes, args.dtype);
    zero_copy &= peer.all_reduce(
        *pieces.tail_launch, {in + offset, out + offset, args.dtype, &tail_layout, args.stream});
  }
  return zero_copy;
}

}  // namespace peerplan::communicator
