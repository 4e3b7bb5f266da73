// SPDX-License-Identifier: Apache-2.0
// The declarations the interposer makes of the parsed sizes: sizes
// peerplan's own validation refuses (a row not a multiple of 16 bytes) are
// left out, with peerplan's reason, and the rest declared.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.hpp"
#include "nccl_interposer/dispatch_rules.hpp"
#include "plan/validation.hpp"

namespace peerplan::nccl_interposer {
namespace {

using test::Buffers;
using test::says;

std::vector<std::int64_t> counts_of(const std::vector<Declaration>& declarations) {
  std::vector<std::int64_t> counts;
  for (const Declaration& declaration : declarations) counts.push_back(declaration.layout.numel());
  return counts;
}

// The documented "bf16:8-256M:x2" starts at 8 bytes, bf16[4]: declared with
// the rest, it made peerplan refuse the whole set, and every call went to NCCL.
TEST(Declarations, ASizePeerplanCannotDeclareIsLeftOutWithItsReasonAndTheRestDeclared) {
  const Buffers parsed = parse_declare_spec("bf16:8-64:x2");
  ASSERT_EQ(parsed.size(), 4u);
  const DeclarationSet set = make_declarations(parsed);
  // 16, 32 and 64 bytes are declared, in the order given.
  EXPECT_EQ(set.declared,
            (Buffers{DeclaredBuffer{DataType::bf16, 8}, DeclaredBuffer{DataType::bf16, 16},
                     DeclaredBuffer{DataType::bf16, 32}}));
  EXPECT_EQ(counts_of(set.declarations), (std::vector<std::int64_t>{8, 16, 32}));
  ASSERT_EQ(set.declarations.size(), 3u);
  EXPECT_EQ(set.declarations[0].name, "nccl_bf16_8");
  EXPECT_EQ(set.declarations[0].operation, Operation::all_reduce);
  EXPECT_EQ(set.declarations[0].dtype, DataType::bf16);
  // As a set, what declare() validates, they pass.
  EXPECT_NO_THROW(plan::validate_declarations(set.declarations));
  // 8 bytes is left out, with peerplan's reason, without its position in
  // a set the user never wrote.
  ASSERT_EQ(set.not_declarable.size(), 1u);
  EXPECT_EQ(set.not_declarable[0].buffer, (DeclaredBuffer{DataType::bf16, 4}));
  EXPECT_FALSE(set.not_declarable[0].buffer.named) << "swept in by a range";
  EXPECT_TRUE(says(set.not_declarable[0].reason,
                   {"layout.shape[0] is 4", "a row of 8 bytes is not a multiple of 16 bytes"}));
  EXPECT_EQ(set.not_declarable[0].reason.find("declarations["), std::string::npos)
      << set.not_declarable[0].reason;
}

// What the interposer declared before: every parsed size, which peerplan's
// declare refuses as a whole for the one 8-byte size.
TEST(Declarations, EveryParsedSizeTogetherIsWhatPeerplanRefuses) {
  std::vector<Declaration> all;
  for (const DeclaredBuffer& buffer : parse_declare_spec("bf16:8-64:x2")) {
    all.push_back(declaration_for(buffer));
  }
  EXPECT_THROW(plan::validate_declarations(all), InvalidArgument);
}

TEST(Declarations, EveryTypesSixteenByteRuleIsPeerplans) {
  const DeclarationSet set =
      make_declarations(parse_declare_spec("f32:4-64:x2;f16:2-32:x2;bf16:48;f32:24"));
  // Multiples of 16 bytes only: f16[8], f16[16], f32[4], f32[8], f32[16], bf16[24].
  EXPECT_EQ(set.declared,
            (Buffers{DeclaredBuffer{DataType::f16, 8}, DeclaredBuffer{DataType::f16, 16},
                     DeclaredBuffer{DataType::bf16, 24}, DeclaredBuffer{DataType::f32, 4},
                     DeclaredBuffer{DataType::f32, 8}, DeclaredBuffer{DataType::f32, 16}}));
  Buffers left_out;
  for (const NotDeclarable& size : set.not_declarable) left_out.push_back(size.buffer);
  // f16 at 2, 4, 8 bytes; f32 at 4, 8 and the single 24 bytes.
  EXPECT_EQ(left_out,
            (Buffers{DeclaredBuffer{DataType::f16, 1}, DeclaredBuffer{DataType::f16, 2},
                     DeclaredBuffer{DataType::f16, 4}, DeclaredBuffer{DataType::f32, 1},
                     DeclaredBuffer{DataType::f32, 2}, DeclaredBuffer{DataType::f32, 6}}));
}

TEST(Declarations, NothingDeclarableLeavesNothingToDeclare) {
  const DeclarationSet set = make_declarations(parse_declare_spec("f32:4"));
  EXPECT_TRUE(set.declared.empty());
  EXPECT_TRUE(set.declarations.empty());
  ASSERT_EQ(set.not_declarable.size(), 1u);
  EXPECT_TRUE(set.not_declarable[0].buffer.named);
}

// One size written on its own is named (a WARN when left out); a range's
// sizes are not (an INFO): nccl-tests' usual -b 8 starts under 16 bytes.
TEST(Declarations, OneSizeWrittenOnItsOwnIsNamedInTheSpecAndInPlanFiles) {
  const auto named = [](const Buffers& buffers) {
    std::vector<bool> flags;
    for (const DeclaredBuffer& buffer : buffers) flags.push_back(buffer.named);
    return flags;
  };
  EXPECT_EQ(named(parse_declare_spec("f32:4;bf16:8-32:x2")),
            (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(named(parse_declare_spec("bf16:8-8")), (std::vector<bool>{true}));
  EXPECT_EQ(named(parse_declare_spec("bf16:8-8:x2")), (std::vector<bool>{false}));
  // A repeat named anywhere is named.
  EXPECT_EQ(named(parse_declare_spec("bf16:8-32:x2;bf16:8")),
            (std::vector<bool>{true, false, false}));
  EXPECT_EQ(named(parse_declare_spec("bf16:8;bf16:8-32:x2")),
            (std::vector<bool>{true, false, false}));
  EXPECT_EQ(named(parse_plan_file("peerplan-plans 1\n"
                                  "all_reduce dtype=f32 bytes=4\n"
                                  "all_reduce dtype=bf16 count=4\n"
                                  "all_reduce dtype=f16 bytes=8-32 step=x2\n",
                                  "p")),
            (std::vector<bool>{false, false, false, true, true}));
}

TEST(Declarations, ThePlanFilePathLeavesOutTheSameSizes) {
  const DeclarationSet set =
      make_declarations(parse_plan_file("peerplan-plans 1\n"
                                        "all_reduce dtype=bf16 count=4\n"
                                        "all_reduce dtype=bf16 count=8\n",
                                        "p"));
  EXPECT_EQ(set.declared, (Buffers{DeclaredBuffer{DataType::bf16, 8}}));
  ASSERT_EQ(set.not_declarable.size(), 1u);
  EXPECT_EQ(set.not_declarable[0].buffer, (DeclaredBuffer{DataType::bf16, 4}));
  EXPECT_TRUE(set.not_declarable[0].buffer.named);
}

TEST(Declarations, TheMessageNamesEachSizeLeftOutAndWhy) {
  const DeclarationSet set = make_declarations(parse_declare_spec("bf16:8-64:x2;f32:4"));
  const std::string warned = not_declarable_message(set.not_declarable, true);
  EXPECT_TRUE(says(warned, {"1 declared size is left to NCCL", "not_declarable",
                            "\n  nccl_f32_1 (4 bytes): layout.shape[0] is 1: a row of 4 bytes"}))
      << warned;
  EXPECT_EQ(warned.find("nccl_bf16_4"), std::string::npos) << warned;
  const std::string told = not_declarable_message(set.not_declarable, false);
  EXPECT_TRUE(says(told, {"\n  nccl_bf16_4 (8 bytes): layout.shape[0] is 4"})) << told;
  EXPECT_EQ(not_declarable_message({}, true), "");
  EXPECT_EQ(not_declarable_message(
                make_declarations(parse_declare_spec("f32:4-12:+4")).not_declarable, true),
            "");
}

TEST(Declarations, ALongListIsCounted) {
  // 2, 4, ..., 2048 bytes of f16: 128 multiples of 16 among 1024 sizes.
  const DeclarationSet set = make_declarations(parse_declare_spec("f16:2-2048:+2"));
  EXPECT_EQ(set.declared.size(), 128u);
  EXPECT_EQ(set.not_declarable.size(), 896u);
  const std::string told = not_declarable_message(set.not_declarable, false);
  EXPECT_TRUE(says(told, {"896 declared sizes are left to NCCL", "\n  and 864 more"})) << told;
}

}  // namespace
}  // namespace peerplan::nccl_interposer
