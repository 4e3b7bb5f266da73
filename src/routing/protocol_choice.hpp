// SPDX-License-Identifier: Apache-2.0
// Which protocol each P2P route runs a declared plan on, and, for the fused
// op, whether its route is the one-shot or the two-shot one. Decided once
// per plan at declare, in the router, from the windows the transport
// reports (PeerTransport::protocol_windows) - never on a call's path, and
// never inside a transport, so the route table, stats and CallResult name
// exactly what runs.
//
// Every input is rank-invariant (agreed config, the declaration's key), so
// every rank picks the same protocol: sender and receiver must run the same
// one, or they wait for each other forever.
#pragma once

#include <cstddef>
#include <cstdint>

#include "peerplan/declaration.hpp"
#include "peerplan/route.hpp"
#include "peerplan/window.hpp"

namespace peerplan::routing {

// What a P2P transport can run, by message size: the same Windows, under
// the same names, as KernelChoices (there with "auto" resolved). The
// defaults describe a transport with one protocol for everything (the host
// backend: staged copies through shared memory).
struct ProtocolWindows {
  // One-shot and two-shot all-reduces move data by pull (TransferMode::pull).
  bool pull = false;
  // The transport has the LL and Lamport protocols at all (CUDA push).
  bool lines = false;
  // Push one-shot all-reduce: Lamport inside, LL lines outside. Only read
  // with `lines`.
  Window one_shot_lamport = Window::never();
  // Fused op: the Lamport kernel for messages of whole 16-byte rows in
  // fused_lamport; else LL lines for rows of whole packs in fused_ll; else
  // a dense message takes the two-shot all-reduce + row norm when
  // `fused_two_shot` (its all-reduce on the protocol a plain two-shot of
  // the same bytes takes: the two-shot windows below), everything else
  // the staged fused kernel.
  Window fused_lamport = Window::never();
  Window fused_ll = Window::never();
  bool fused_two_shot = false;
  // Two-shot all-reduce of a contiguous layout: copy engines
  // (Protocol::dma) inside. Read only by a push transport (`pull` false).
  Window two_shot_dma = Window::never();
  // Two-shot all-reduce (any layout): the Lamport protocol inside. It
  // comes before the copy-engine window: a message in both takes Lamport.
  // Read only with `lines` (a push transport that has the Lamport region).
  Window two_shot_lamport = Window::never();
  // The windows above may be moved by a tuning file's entry
  // (routing/protocol_tuning.hpp): the transport runs every protocol they
  // choose between (the CUDA kernels). False: they are fixed.
  bool tunable = false;

  friend bool operator==(const ProtocolWindows&, const ProtocolWindows&) = default;
};

struct RouteAndProtocol {
  Route route = Route::fallback;
  Protocol protocol = Protocol::none;

  friend bool operator==(const RouteAndProtocol&, const RouteAndProtocol&) = default;
};

// The protocol for a declaration the cutoffs admitted to `route` (one_shot,
// two_shot, fused_one_shot or hierarchical), `bytes` its message size. A
// fused declaration may come back as fused_two_shot. The fallback stays
// (fallback, none).
RouteAndProtocol choose_protocol(Route route, const Declaration& declaration, std::size_t bytes,
                                 const ProtocolWindows& windows) noexcept;

}  // namespace peerplan::routing
