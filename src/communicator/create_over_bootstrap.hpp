// SPDX-License-Identifier: Apache-2.0
// An internal way to create a communicator: over a bootstrap the caller
// made (not MPI's), with no fallback transport of its own. For the NCCL
// interposer (src/nccl_interposer), which bootstraps over the application's
// NCCL communicator and hands every declined call to the real NCCL itself.
// Not part of the public API.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "peerplan/communicator.hpp"
#include "peerplan/config.hpp"

namespace peerplan::communicator {

// Collective over the ranks of `boot`, like Communicator::create (the
// environment applies to `config`, every decision is agreed), but nothing
// on this path calls MPI, and the communicator has no fallback
// (FallbackSetup::none, backend_selection.hpp): an all_reduce or
// fused_add_rms_norm that would take the fallback throws InvalidUsage, so
// the caller asks has_plan_for/plan_for first and calls only for plans on a
// peer-to-peer route. The cuda backend only (Unsupported otherwise); P2P
// within one node only.
std::unique_ptr<Communicator> create_over_bootstrap(std::unique_ptr<bootstrap::Bootstrap> boot,
                                                    Config config);

}  // namespace peerplan::communicator
