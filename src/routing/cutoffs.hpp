// Default size cutoffs per world size, and the resolution of the cutoffs a
// Config leaves at kAutoCutoff.
#pragma once

#include "peerplan/config.hpp"

namespace peerplan::routing {

// The cutoffs a backend uses for `world_size` ranks when the config leaves
// them at kAutoCutoff. Every field is a finite byte count (never
// kAutoCutoff). World sizes below 2 get the 2-rank row (they never take a
// P2P route anyway).
RouteCutoffs default_cutoffs(int world_size, Backend backend = Backend::host) noexcept;

// `configured` with each kAutoCutoff field replaced by default_cutoffs'.
RouteCutoffs resolve_cutoffs(const RouteCutoffs& configured, int world_size,
                             Backend backend = Backend::host) noexcept;

}  // namespace peerplan::routing
