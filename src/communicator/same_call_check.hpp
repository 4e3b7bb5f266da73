// SPDX-License-Identifier: Apache-2.0
// Config::check_calls (PEERPLAN_CHECK_CALLS): before each all-reduce or fused
// call, the ranks exchange their call's key and raise Mismatch together when
// they differ, before anything is launched. A debugging aid, as
// TORCH_DISTRIBUTED_DEBUG=DETAIL is for torch.distributed: the CUDA P2P
// kernels cannot tell different calls apart (docs/faults.md), and the
// exchange costs every call a round trip among all ranks.
#pragma once

#include "bootstrap/bootstrap.hpp"
#include "peerplan/plan_key.hpp"

namespace peerplan::communicator {

// Collective over every rank of `bootstrap` (bounded by its timeout: a rank
// that makes no call makes the others raise Timeout naming it). Throws
// Mismatch on every rank, listing each rank's call, when the keys differ in
// anything but the fused op's weight address (each rank has its own).
void require_same_call(bootstrap::Bootstrap& bootstrap, const PlanKey& key);

}  // namespace peerplan::communicator
