// SPDX-License-Identifier: Apache-2.0
// The resolution of the cutoffs a Config leaves at kAutoCutoff (from a
// tuning file's entry, then the defaults of routing/defaults.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "peerplan/config.hpp"
#include "routing/byte_fields.hpp"
#include "routing/defaults.hpp"

namespace peerplan::routing {

// The cutoff fields under the names the tuning file, the logs and the
// PEERPLAN_*_BYTES variables (upper-cased) use, in that order.
using CutoffField = ByteField<RouteCutoffs>;
inline constexpr std::array<CutoffField, 5> kCutoffFields{{
    {"one_shot_max_bytes", &RouteCutoffs::one_shot_max_bytes},
    {"two_shot_min_bytes", &RouteCutoffs::two_shot_min_bytes},
    {"two_shot_max_bytes", &RouteCutoffs::two_shot_max_bytes},
    {"fused_max_bytes", &RouteCutoffs::fused_max_bytes},
    {"two_shot_chunk_bytes", &RouteCutoffs::two_shot_chunk_bytes},
}};

// The piece size a two-shot plan of `message_bytes` is split into
// (RouteCutoffs::two_shot_chunk_bytes, resolved): 0 when it runs as one
// call (a contiguous layout is required to split it, and a message larger
// than the piece).
std::size_t two_shot_piece_bytes(const RouteCutoffs& cutoffs, std::size_t message_bytes,
                                 bool contiguous) noexcept;

// `preferred` with each kAutoCutoff field taken from `fallback`.
RouteCutoffs fill_automatic(RouteCutoffs preferred, const RouteCutoffs& fallback) noexcept;

// `configured` with each kAutoCutoff field replaced by default_cutoffs'.
RouteCutoffs resolve_cutoffs(const RouteCutoffs& configured, int world_size,
                             Backend backend = Backend::host, const NodeLink& link = {}) noexcept;

// Per field: `configured` if set, else `tuned` (a tuning file's entry) if
// set, else default_cutoffs' (for `link`). The result has no kAutoCutoff field.
RouteCutoffs resolve_cutoffs(const RouteCutoffs& configured, const RouteCutoffs& tuned,
                             int world_size, Backend backend, const NodeLink& link = {}) noexcept;

// "one_shot_max_bytes=65536 two_shot_min_bytes=0 two_shot_max_bytes=0
// fused_max_bytes=3670016" ("auto" for kAutoCutoff), for logs and messages.
std::string describe_cutoffs(const RouteCutoffs& cutoffs);

}  // namespace peerplan::routing
