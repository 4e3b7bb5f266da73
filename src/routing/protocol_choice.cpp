// SPDX-License-Identifier: Apache-2.0
#include "routing/protocol_choice.hpp"

namespace peerplan::routing {
namespace {

constexpr std::size_t kPackBytes = 16;  // one vector store: LL and Lamport move whole packs
// The Lamport kernels index the region's packs with 32-bit integers.
constexpr std::size_t kLamportMaxPacks = 0x7fffffffu;

// The push two-shot all-reduce's protocol for a message of `bytes` bytes:
// Lamport inside its window first (small messages, where a barrier's
// latency weighs most), then copy engines inside theirs (contiguous
// layouts only), else the staged kernel.
Protocol push_two_shot_protocol(const TensorLayout& layout, std::size_t bytes,
                                const ProtocolWindows& w) noexcept {
  if (w.lines && w.two_shot_lamport.contains(bytes) && bytes / kPackBytes <= kLamportMaxPacks) {
    return Protocol::lamport;
  }
  if (w.two_shot_dma.contains(bytes) && layout.is_contiguous()) {
    return Protocol::dma;
  }
  return Protocol::staged;
}

RouteAndProtocol fused_protocol(const Declaration& declaration, std::size_t bytes,
                                const ProtocolWindows& w) noexcept {
  const TensorLayout& layout = declaration.layout;
  const std::size_t row_bytes =
      layout.rank() > 0 && layout.last_dim() > 0
          ? static_cast<std::size_t>(layout.last_dim()) * element_size(declaration.dtype)
          : 0;
  const bool whole_packs = row_bytes != 0 && row_bytes % kPackBytes == 0;
  if (whole_packs && w.fused_lamport.contains(bytes) && bytes / kPackBytes <= kLamportMaxPacks) {
    return {Route::fused_one_shot, Protocol::lamport};
  }
  if (whole_packs && w.fused_ll.contains(bytes)) return {Route::fused_one_shot, Protocol::ll};
  // The two-shot all-reduce in place, on the protocol a plain two-shot of
  // the same bytes takes, then the row kernel.
  if (w.fused_two_shot && layout.is_contiguous()) {
    return {Route::fused_two_shot, push_two_shot_protocol(layout, bytes, w)};
  }
  return {Route::fused_one_shot, Protocol::staged};
}

}  // namespace

RouteAndProtocol choose_protocol(Route route, const Declaration& declaration, std::size_t bytes,
                                 const ProtocolWindows& w) noexcept {
  switch (route) {
    case Route::one_shot:
      if (w.pull) return {route, Protocol::pull};
      if (!w.lines) return {route, Protocol::staged};
      return {route, w.one_shot_lamport.contains(bytes) ? Protocol::lamport : Protocol::ll};
    case Route::two_shot:
      if (w.pull) return {route, Protocol::pull};
      return {route, push_two_shot_protocol(declaration.layout, bytes, w)};
    case Route::fused_one_shot:
    case Route::fused_two_shot:
      return fused_protocol(declaration, bytes, w);
    case Route::hierarchical:
      return {route, Protocol::staged};
    case Route::fallback:
      break;
  }
  return {Route::fallback, Protocol::none};
}

}  // namespace peerplan::routing
