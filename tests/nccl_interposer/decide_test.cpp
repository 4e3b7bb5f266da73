// SPDX-License-Identifier: Apache-2.0
// What runs where: one test per cause, the boundaries, and which cause a
// call failing several rules is counted under.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "nccl_interposer/dispatch_rules.hpp"

namespace peerplan::nccl_interposer {
namespace {

void* address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

// Sorted, as declared_from_environment returns it.
const std::vector<DeclaredBuffer> kDeclared = {
    {DataType::f16, 1024}, {DataType::bf16, 512}, {DataType::f32, 256}};

// A call peerplan takes; each test changes one thing.
AllReduceCall taken() {
  return {NcclType::bf16, NcclOp::sum, 512, address(0x10000), address(0x20000), false, 0};
}

Decision decide_call(const AllReduceCall& call) { return decide(call, kDeclared); }

void expect_nccl(const AllReduceCall& call, FallbackCause cause) {
  const Decision decision = decide_call(call);
  EXPECT_FALSE(decision.to_peerplan);
  if (!decision.to_peerplan) {
    EXPECT_EQ(to_string(decision.cause), to_string(cause));
  }
}

TEST(Decide, DeclaredSumOfEachTypeGoesToPeerplan) {
  EXPECT_TRUE(decide_call(taken()).to_peerplan);
  AllReduceCall call = taken();
  call.type = NcclType::f16;
  call.count = 1024;
  EXPECT_TRUE(decide_call(call).to_peerplan);
  call.type = NcclType::f32;
  call.count = 256;
  EXPECT_TRUE(decide_call(call).to_peerplan);
}

// The index names the declared entry of the call's own dtype and count:
// the interposer takes that size's cached layout by it.
TEST(Decide, NamesTheDeclaredEntryOfTheCall) {
  struct Case {
    NcclType type;
    DataType dtype;
    std::size_t count;
  };
  for (const Case c :
       {Case{NcclType::f16, DataType::f16, 1024}, Case{NcclType::bf16, DataType::bf16, 512},
        Case{NcclType::f32, DataType::f32, 256}}) {
    AllReduceCall call = taken();
    call.type = c.type;
    call.count = c.count;
    const Decision decision = decide_call(call);
    ASSERT_TRUE(decision.to_peerplan);
    ASSERT_LT(decision.declared_index, kDeclared.size());
    EXPECT_EQ(kDeclared[decision.declared_index].count, c.count);
    EXPECT_EQ(kDeclared[decision.declared_index].dtype, c.dtype);
  }
}

TEST(Decide, OtherTypesGoToNccl) {
  for (const NcclType type : {NcclType::int8, NcclType::uint8, NcclType::int32, NcclType::uint32,
                              NcclType::int64, NcclType::uint64, NcclType::f64, NcclType::other}) {
    AllReduceCall call = taken();
    call.type = type;
    SCOPED_TRACE(static_cast<int>(type));
    expect_nccl(call, FallbackCause::dtype);
  }
}

TEST(Decide, OtherReductionsGoToNccl) {
  for (const NcclOp op : {NcclOp::prod, NcclOp::max, NcclOp::min, NcclOp::avg, NcclOp::other}) {
    AllReduceCall call = taken();
    call.op = op;
    SCOPED_TRACE(static_cast<int>(op));
    expect_nccl(call, FallbackCause::reduction);
  }
}

TEST(Decide, CountMustBeDeclaredExactlyForThatType) {
  AllReduceCall call = taken();
  for (const std::size_t count : {std::size_t{511}, std::size_t{513}, std::size_t{1024}}) {
    call.count = count;
    SCOPED_TRACE(count);
    expect_nccl(call, FallbackCause::undeclared_count);
  }
  call = taken();
  call.type = NcclType::f32;  // 512 is declared for bf16 only
  expect_nccl(call, FallbackCause::undeclared_count);
  EXPECT_FALSE(decide(taken(), {}).to_peerplan);
}

TEST(Decide, CountZeroGoesToNcclEvenIfDeclared) {
  AllReduceCall call = taken();
  call.count = 0;
  expect_nccl(call, FallbackCause::undeclared_count);
  const std::vector<DeclaredBuffer> with_zero = {{DataType::bf16, 0}};
  EXPECT_FALSE(decide(call, with_zero).to_peerplan);
}

TEST(Decide, AloneInItsGroupGoesToPeerplanAGroupOfTwoToNccl) {
  AllReduceCall call = taken();
  call.in_group = true;
  call.ops_in_group = 1;
  EXPECT_TRUE(decide_call(call).to_peerplan);
  call.ops_in_group = 2;
  expect_nccl(call, FallbackCause::group_of_many);
  call.in_group = false;  // outside a group the count is not looked at
  EXPECT_TRUE(decide_call(call).to_peerplan);
}

TEST(Decide, PointersMustBeSixteenByteAligned) {
  AllReduceCall call = taken();
  call.send = address(0x10008);
  expect_nccl(call, FallbackCause::misaligned);
  call = taken();
  call.recv = address(0x20004);
  expect_nccl(call, FallbackCause::misaligned);
  call = taken();
  call.send = nullptr;
  expect_nccl(call, FallbackCause::misaligned);
  call = taken();
  call.send = address(0x10010);
  call.recv = address(0x10010);  // in place
  EXPECT_TRUE(decide_call(call).to_peerplan);
}

TEST(Decide, FirstFailedRuleIsTheCause) {
  const AllReduceCall everything_wrong = {NcclType::int32, NcclOp::max, 3, address(0x1),
                                          address(0x2),    true,        2};
  expect_nccl(everything_wrong, FallbackCause::dtype);
  AllReduceCall call = everything_wrong;
  call.type = NcclType::bf16;
  expect_nccl(call, FallbackCause::reduction);
  call.op = NcclOp::sum;
  expect_nccl(call, FallbackCause::undeclared_count);
  call.count = 512;
  expect_nccl(call, FallbackCause::group_of_many);
  call.ops_in_group = 1;
  expect_nccl(call, FallbackCause::misaligned);
}

}  // namespace
}  // namespace peerplan::nccl_interposer
