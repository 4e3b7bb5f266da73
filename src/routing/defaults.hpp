// SPDX-License-Identifier: Apache-2.0
// Every built-in default of the library, keyed by backend and world size:
// what a Config field left "auto" becomes when no tuning file sets it. Each
// value's one-line reason is in defaults.cpp; the measurements behind the
// CUDA ones are in benchmarks/RESULTS.md. peerplan_tune measures a
// machine's own values and writes them to a tuning file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "peerplan/config.hpp"
#include "routing/protocol_choice.hpp"
#include "routing/protocol_tuning.hpp"

namespace peerplan::routing {

// The link between one node's GPUs, as far as the CUDA defaults depend on
// it (communicator/node_link.hpp works it out from the ranks' cards). The
// defaults were measured over NVLink; nothing set means NVLink or unknown.
struct NodeLink {
  // Some pair of a node's GPUs reaches each other over PCIe only.
  bool pcie = false;
  // The slowest of those GPUs' own PCIe links, MB/s per direction (NVML's
  // capacity, else hwloc's current speed); 0 when neither says.
  std::uint32_t mb_per_s = 0;

  friend bool operator==(const NodeLink&, const NodeLink&) = default;
};

// The PCIe speed assumed where the topology gives none: PCIe 4.0 x16.
inline constexpr std::uint32_t kAssumedPcieMbPerS = 31508;

// The route cutoffs a backend uses for `world_size` ranks. Every field is
// a finite byte count (never kAutoCutoff). World sizes below 2 get the
// 2-rank row (they never take a P2P route anyway). Over a PCIe `link` the
// CUDA one-shot limit at 3+ ranks, a crossover of link bytes against
// latency, scales with the link's bandwidth over NVLink's.
RouteCutoffs default_cutoffs(int world_size, Backend backend = Backend::host,
                             const NodeLink& link = {}) noexcept;

// The protocol windows a backend runs for `world_size` ranks, in `pull`
// or push mode, before the Config's and the tuning file's windows apply
// (apply_configured_windows, apply_protocol_tuning). The host backend has
// one protocol for everything: ProtocolWindows{}.
ProtocolWindows default_protocol_windows(Backend backend, int world_size, bool pull) noexcept;

// The default protocol windows that move over `link`, with the values they
// take there, as a tuning file's entry would set them (apply_protocol_tuning
// applies them where the Config leaves a window automatic); no field set
// over NVLink or an unknown link. Over PCIe, LL lines (8 data bytes in
// 16) give way to Lamport at the measured size scaled by the link's
// bandwidth over NVLink's.
ProtocolTuning default_link_windows(const NodeLink& link) noexcept;

// "PCIe at 31.5 GB/s" (or "at an unknown speed, taken as 31.5 GB/s"),
// "NVLink or unknown", for logs.
std::string describe_node_link(const NodeLink& link);

// The CUDA one-shot kernels' largest grid when KernelChoices::
// one_shot_max_blocks is 0 and no tuning file step applies: this many
// blocks per multiprocessor.
inline constexpr int kOneShotBlocksPerMultiprocessor = 1;

// Each piece of a copy-engine two-shot message aims at this many bytes
// (the kernels' cuda_kernels::kDmaPieceTargetBytes is tied to it).
inline constexpr std::size_t kDmaPieceTargetBytes = std::size_t{8} << 20;

}  // namespace peerplan::routing
