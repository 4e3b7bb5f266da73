// SPDX-License-Identifier: Apache-2.0
// The values of nccl.h's ncclResult_t the interposer returns for peerplan's
// errors (nccl_result_for, dispatch_rules.hpp), named here so that the pure
// rules need no nccl.h; a test checks them against nccl.h where NCCL is built.
#pragma once

namespace peerplan::nccl_interposer {

inline constexpr int kNcclSuccess = 0;
inline constexpr int kNcclInternalError = 3;
inline constexpr int kNcclInvalidArgument = 4;
inline constexpr int kNcclInvalidUsage = 5;
inline constexpr int kNcclRemoteError = 6;

}  // namespace peerplan::nccl_interposer
