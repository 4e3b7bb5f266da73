// SPDX-License-Identifier: Apache-2.0
// Every built-in default of the library, keyed by backend and world size:
// what a Config field left "auto" becomes when no tuning file sets it. Each
// value's one-line reason is in defaults.cpp; the measurements behind the
// CUDA ones are in benchmarks/RESULTS.md. peerplan_tune measures a
// machine's own values and writes them to a tuning file.
#pragma once

#include <cstddef>

#include "peerplan/config.hpp"
#include "routing/protocol_choice.hpp"

namespace peerplan::routing {

// The route cutoffs a backend uses for `world_size` ranks. Every field is
// a finite byte count (never kAutoCutoff). World sizes below 2 get the
// 2-rank row (they never take a P2P route anyway).
RouteCutoffs default_cutoffs(int world_size, Backend backend = Backend::host) noexcept;

// The protocol windows a backend runs for `world_size` ranks, in `pull`
// or push mode, before the Config's and the tuning file's windows apply
// (apply_configured_windows, apply_protocol_tuning). The host backend has
// one protocol for everything: ProtocolWindows{}.
ProtocolWindows default_protocol_windows(Backend backend, int world_size, bool pull) noexcept;

// The CUDA one-shot kernels' largest grid when KernelChoices::
// one_shot_max_blocks is 0 and no tuning file step applies: this many
// blocks per multiprocessor.
inline constexpr int kOneShotBlocksPerMultiprocessor = 1;

// Each piece of a copy-engine two-shot message aims at this many bytes
// (the kernels' cuda_kernels::kDmaPieceTargetBytes is tied to it).
inline constexpr std::size_t kDmaPieceTargetBytes = std::size_t{8} << 20;

}  // namespace peerplan::routing
