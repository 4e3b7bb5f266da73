// SPDX-License-Identifier: Apache-2.0
// peerplan's exceptions as ncclResult_t values.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

#include "nccl_interposer/dispatch_rules.hpp"
#include "nccl_interposer/nccl_errors.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::nccl_interposer {
namespace {

TEST(NcclResultFor, TimeoutIsARemoteError) {
  EXPECT_EQ(nccl_result_for(Timeout("rank 1 did not arrive")), kNcclRemoteError);
  EXPECT_EQ(kNcclRemoteError, 6);
}

TEST(NcclResultFor, InvalidArgumentAndInvalidUsageKeepTheirMeaning) {
  EXPECT_EQ(nccl_result_for(InvalidArgument("x")), kNcclInvalidArgument);
  EXPECT_EQ(nccl_result_for(InvalidUsage("x")), kNcclInvalidUsage);
  EXPECT_EQ(kNcclInvalidArgument, 4);
  EXPECT_EQ(kNcclInvalidUsage, 5);
}

TEST(NcclResultFor, EveryOtherPeerplanErrorIsInternal) {
  EXPECT_EQ(kNcclInternalError, 3);
  EXPECT_EQ(nccl_result_for(UndeclaredPlan("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(Mismatch("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(CudaError("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(NcclError("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(MpiError("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(SystemError("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(Unsupported("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(InternalError("x")), kNcclInternalError);
}

TEST(NcclResultFor, TheCodeDecidesNotTheClass) {
  EXPECT_EQ(nccl_result_for(Error(ErrorCode::timeout, "x")), kNcclRemoteError);
  EXPECT_EQ(nccl_result_for(Error(ErrorCode::invalid_argument, "x")), kNcclInvalidArgument);
}

TEST(NcclResultFor, ExceptionsNotPeerplansAreInternal) {
  EXPECT_EQ(nccl_result_for(std::runtime_error("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(std::invalid_argument("x")), kNcclInternalError);
  EXPECT_EQ(nccl_result_for(std::bad_alloc()), kNcclInternalError);
}

}  // namespace
}  // namespace peerplan::nccl_interposer
