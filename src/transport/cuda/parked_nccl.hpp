// SPDX-License-Identifier: Apache-2.0
// NCCL communicators that close() (or a destructor) could not end because a
// CUDA graph that captured one of their calls still existed; see
// nccl_fallback.hpp. Needs no CUDA or NCCL header (for tests, diagnostics).
// Defined by nccl_fallback.cpp, so in builds with NCCL only
// (PEERPLAN_HAVE_NCCL).
#pragma once

#include <cstddef>

namespace peerplan::transport::cuda {

// How many are left open in this process, waiting for their graphs to go.
std::size_t parked_nccl_communicators() noexcept;

// Ends those whose graphs are all destroyed (finalize, bounded like close();
// local: no other rank takes part). Every NcclFallback construction and
// close() does this too.
void release_parked_nccl_communicators() noexcept;

}  // namespace peerplan::transport::cuda
