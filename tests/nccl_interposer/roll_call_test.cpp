// SPDX-License-Identifier: Apache-2.0
// The roll call before peerplan's create over NCCL: peerplan is made only
// when every rank declared something, and otherwise every rank gives it up
// with a reason naming the ranks that declared nothing.
#include "nccl_interposer/roll_call.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace peerplan::nccl_interposer {
namespace {

constexpr auto kDeclared = static_cast<std::uint8_t>(RollCallAnswer::declared);
constexpr auto kNothing = static_cast<std::uint8_t>(RollCallAnswer::nothing_declared);
constexpr auto kUnparsable = static_cast<std::uint8_t>(RollCallAnswer::unparsable);

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RollCall, EveryRankDeclaredCreates) {
  const std::vector<std::uint8_t> answers{kDeclared, kDeclared, kDeclared};
  const RollCallVerdict verdict = judge_roll_call(answers);
  EXPECT_TRUE(verdict.create);
  EXPECT_FALSE(verdict.warn);
  EXPECT_EQ(verdict.reason, "");
}

TEST(RollCall, NoRankDeclaredGivesUpQuietly) {
  const std::vector<std::uint8_t> answers{kNothing, kNothing};
  const RollCallVerdict verdict = judge_roll_call(answers);
  EXPECT_FALSE(verdict.create);
  EXPECT_FALSE(verdict.warn);
  EXPECT_TRUE(contains(verdict.reason, "nothing is declared")) << verdict.reason;
}

TEST(RollCall, OneRankWithNothingDeclaredStopsEveryRankAndIsNamed) {
  const std::vector<std::uint8_t> answers{kDeclared, kNothing, kDeclared, kDeclared};
  const RollCallVerdict verdict = judge_roll_call(answers);
  EXPECT_FALSE(verdict.create);
  EXPECT_TRUE(verdict.warn);
  EXPECT_TRUE(contains(verdict.reason, "rank 1 of 4 declared nothing")) << verdict.reason;
  EXPECT_TRUE(contains(verdict.reason, "PEERPLAN_NCCL_DECLARE")) << verdict.reason;
}

TEST(RollCall, SeveralRanksAreListed) {
  const std::vector<std::uint8_t> answers{kNothing, kDeclared, kNothing, kDeclared, kNothing};
  const RollCallVerdict verdict = judge_roll_call(answers);
  EXPECT_FALSE(verdict.create);
  EXPECT_TRUE(contains(verdict.reason, "ranks 0, 2 and 4 of 5 declared nothing")) << verdict.reason;
}

TEST(RollCall, ARankWhoseDeclarationsDidNotParseStopsEveryRank) {
  const std::vector<std::uint8_t> answers{kDeclared, kUnparsable};
  const RollCallVerdict verdict = judge_roll_call(answers);
  EXPECT_FALSE(verdict.create);
  EXPECT_TRUE(verdict.warn);
  EXPECT_TRUE(contains(verdict.reason, "rank 1 could not read their declarations"))
      << verdict.reason;
}

TEST(RollCall, AnUnknownAnswerStopsEveryRank) {
  const std::vector<std::uint8_t> answers{kDeclared, 7};
  const RollCallVerdict verdict = judge_roll_call(answers);
  EXPECT_FALSE(verdict.create);
  EXPECT_TRUE(contains(verdict.reason, "rank 1 answered the roll call with an unknown value"))
      << verdict.reason;
}

TEST(RollCall, NoAnswersIsNoCreate) {
  const RollCallVerdict verdict = judge_roll_call({});
  EXPECT_FALSE(verdict.create);
  EXPECT_TRUE(verdict.warn);
}

}  // namespace
}  // namespace peerplan::nccl_interposer
