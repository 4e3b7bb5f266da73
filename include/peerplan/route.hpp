// SPDX-License-Identifier: Apache-2.0
// Routes a call can take, why a call fell back, and the statistics that
// let users see which shapes they forgot to declare.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peerplan/export.h"
#include "peerplan/operation.hpp"

namespace peerplan {

enum class Route : std::uint8_t {
  one_shot = 0,        // every rank reads every peer's slot and reduces
  two_shot = 1,        // reduce-scatter then all-gather
  fused_one_shot = 2,  // one-shot reduction + residual add + RMSNorm
  fallback = 3,        // NCCL (cuda backend) or MPI (host backend)
  // The job spans several nodes with the same number of ranks on each:
  // reduce-scatter among each node's ranks, all-reduce of every shard
  // between the nodes, all-gather among each node's ranks (docs/multi-node.md). Both operations take it on such a job.
  hierarchical = 4,
  // The fused op as a two-shot all-reduce in place, then residual add +
  // RMSNorm row by row: fused messages too large for the fused one-shot
  // protocols (dense layouts only).
  fused_two_shot = 5,
};

// How a P2P route moves the bytes between ranks, chosen per plan at
// declare (routing/protocol_choice.hpp) and named in CallResult, PlanInfo,
// PlanStats and the INFO route table. The results are the same bits
// whichever protocol runs; only speed and staging memory differ.
enum class Protocol : std::uint8_t {
  none = 0,     // the fallback: NCCL or MPI choose their own
  staged = 1,   // copies into the peers' staging slots, then a flag barrier
                // (the host backend's shared memory, the CUDA two-shot)
  ll = 2,       // LL lines: each 16-byte store carries 8 data bytes and a
                // flag, so a reader needs no barrier (twice the link bytes)
  lamport = 3,  // the data is its own flag: plain stores into a region
                // filled with a sentinel value that no result can take
  pull = 4,     // every rank reads its peers' inputs (registered inputs in
                // place, others from the owner's staging slot)
  dma = 5,      // two-shot by copy engines: they move the shards to their
                // owners and the reduced shards back, the SMs only reduce
};

enum class FallbackReason : std::uint8_t {
  none = 0,          // the call ran on a P2P route
  undeclared = 1,    // no declaration has the call's exact key
  over_cutoff = 2,   // declared, but larger than every admitted route's cutoff
  p2p_disabled = 3,  // declared, but P2P is off (config, topology, agreement)
  // declared, but the job spans several nodes that hold different numbers
  // of ranks, or one rank each: no hierarchical route fits
  node_layout = 4,
};

PEERPLAN_API const char* to_string(Route route) noexcept;
PEERPLAN_API const char* to_string(FallbackReason reason) noexcept;
PEERPLAN_API const char* to_string(Protocol protocol) noexcept;

// What one call did.
struct CallResult {
  Route route = Route::fallback;
  FallbackReason reason = FallbackReason::undeclared;
  // The peers read this rank's input in place from a registered buffer
  // (pull transfer mode), without a staging copy.
  bool zero_copy = false;
  // How the P2P route moved the bytes (none on the fallback).
  Protocol protocol = Protocol::none;
};

struct PlanStats {
  std::string name;
  Operation operation = Operation::all_reduce;
  Route route = Route::fallback;                       // the route chosen at declare
  FallbackReason route_reason = FallbackReason::none;  // why fallback, if it is
  std::uint64_t hits = 0;                              // calls that ran on the P2P route
  std::uint64_t fallbacks = 0;  // calls of this plan that went to the fallback
  // Last, so that brace initialisations of the fields above keep working:
  Protocol protocol = Protocol::none;  // chosen at declare with the route
  // What a hit launches, as the INFO route table prints it (e.g. "bf16
  // one-shot Lamport: 132 blocks x 512 threads, PDL"); empty on the fallback.
  std::string launch;
};

// One undeclared key among the most frequent (Config::undeclared_keys_tracked).
// The table keeps a fixed number of keys: when a new key arrives with the
// table full, it takes the place of the least counted one and inherits
// that count as `overcount` ("space saving"), so a key's true number of
// calls lies in [calls - overcount, calls], and every key called more
// often than (undeclared calls) / (table size) is in the table.
struct UndeclaredKeyStats {
  std::string key;  // as PlanKey::to_string prints it
  std::uint64_t calls = 0;
  std::uint64_t overcount = 0;
};

struct Stats {
  std::vector<PlanStats> plans;  // in declaration order
  std::uint64_t p2p_calls = 0;
  std::uint64_t zero_copy_calls = 0;  // P2P calls whose input was read in place
  std::uint64_t fallback_undeclared = 0;
  std::uint64_t fallback_over_cutoff = 0;
  std::uint64_t fallback_p2p_disabled = 0;
  std::uint64_t fallback_node_layout = 0;
  // The most frequent undeclared keys, most calls first; empty unless
  // Config::undeclared_keys_tracked > 0.
  std::vector<UndeclaredKeyStats> undeclared;
};

// The counters as a few lines of text: totals, one row per plan (route,
// hits, fallbacks), and the tracked undeclared keys. For logs and examples.
PEERPLAN_API std::string to_string(const Stats& stats);

}  // namespace peerplan
