// SPDX-License-Identifier: Apache-2.0
// Resolution of the cutoffs a Config leaves at kAutoCutoff; the built-in
// defaults are in routing/defaults.cpp.
#include "routing/cutoffs.hpp"

#include <string>

namespace peerplan::routing {

std::size_t two_shot_piece_bytes(const RouteCutoffs& cutoffs, std::size_t message_bytes,
                                 bool contiguous) noexcept {
  // A message up to the configured size runs whole even where the piece
  // rounds below it (the default maximum at 3 ranks is no multiple of 256).
  // 1..255 would round to no piece: Config, the environment and the tuning
  // file refuse them, so only 0 means "never split" here.
  const std::size_t piece =
      cutoffs.two_shot_chunk_bytes / kTwoShotPieceAlignment * kTwoShotPieceAlignment;
  if (!contiguous || piece == 0 || message_bytes <= cutoffs.two_shot_chunk_bytes) return 0;
  return piece;
}

RouteCutoffs fill_automatic(RouteCutoffs preferred, const RouteCutoffs& fallback) noexcept {
  for (const CutoffField& field : kCutoffFields) {
    if (preferred.*field.member == kAutoCutoff) preferred.*field.member = fallback.*field.member;
  }
  return preferred;
}

RouteCutoffs resolve_cutoffs(const RouteCutoffs& configured, int world_size, Backend backend,
                             const NodeLink& link) noexcept {
  return fill_automatic(configured, default_cutoffs(world_size, backend, link));
}

RouteCutoffs resolve_cutoffs(const RouteCutoffs& configured, const RouteCutoffs& tuned,
                             int world_size, Backend backend, const NodeLink& link) noexcept {
  return resolve_cutoffs(fill_automatic(configured, tuned), world_size, backend, link);
}

std::string describe_cutoffs(const RouteCutoffs& cutoffs) {
  return describe_byte_fields(cutoffs, kCutoffFields);
}

}  // namespace peerplan::routing
