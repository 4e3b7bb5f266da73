// SPDX-License-Identifier: Apache-2.0
// Built only where NCCL is: the values the rules name without nccl.h are
// nccl.h's.
#include <nccl.h>

#include "nccl_interposer/nccl_errors.hpp"

namespace peerplan::nccl_interposer {

static_assert(kNcclSuccess == ncclSuccess);
static_assert(kNcclInternalError == ncclInternalError);
static_assert(kNcclInvalidArgument == ncclInvalidArgument);
static_assert(kNcclInvalidUsage == ncclInvalidUsage);
static_assert(kNcclRemoteError == ncclRemoteError);

}  // namespace peerplan::nccl_interposer
