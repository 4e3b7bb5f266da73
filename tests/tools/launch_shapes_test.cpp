// SPDX-License-Identifier: Apache-2.0
// The one-shot grid sweep's decisions: the candidate caps for a GPU's
// multiprocessor count, the fastest cap at one size (ties to the largest
// grid), and derive_launch_shapes (no steps when the default always wins,
// one step for small sizes that prefer fewer blocks, several for
// alternating winners, trailing default steps dropped); and, over every
// winner pattern of a few sizes, that the derived steps applied the way
// the transport applies them (routing::one_shot_grid_for) give every
// measured size its winner, and that the tuning file reads them back.
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "crossovers.hpp"
#include "routing/launch_shape_tuning.hpp"

namespace peerplan::tune {
namespace {

constexpr std::size_t KiB = 1024;

// An H200's 132 multiprocessors: the candidates are 16, 33, 66 and 132.
const std::vector<int> kCandidates = one_shot_grid_candidates(132);
constexpr int kDefault = 132;

// Rows from 1 KiB up, doubling: the winner's candidate takes 1 µs, the
// others 2.
std::vector<OneShotGridTimes> rows_won_by(const std::vector<int>& winners) {
  std::vector<OneShotGridTimes> rows;
  std::size_t bytes = 1 * KiB;
  for (int winner : winners) {
    OneShotGridTimes row{bytes, {}};
    for (int blocks : kCandidates) row.us_by_candidate.push_back(blocks == winner ? 1.0 : 2.0);
    rows.push_back(row);
    bytes *= 2;
  }
  return rows;
}

std::vector<routing::GridStep> steps_for(const std::vector<int>& winners) {
  return derive_launch_shapes(rows_won_by(winners), kCandidates).one_shot_grid;
}

// The grid the transport launches for `bytes` with these steps and no
// configured cap.
int applied_grid(const routing::LaunchShapeTuning& shapes, std::size_t bytes) {
  return routing::one_shot_grid_for(0, shapes, bytes, kDefault);
}

TEST(OneShotGridCandidates, AnEighthAQuarterAHalfAndEveryMultiprocessor) {
  EXPECT_EQ(kCandidates, (std::vector<int>{16, 33, 66, 132}));
  EXPECT_EQ(one_shot_grid_candidates(108), (std::vector<int>{13, 27, 54, 108}));
  EXPECT_EQ(one_shot_grid_candidates(8), (std::vector<int>{1, 2, 4, 8}));
  // Small GPUs: at least one block, and no cap twice.
  EXPECT_EQ(one_shot_grid_candidates(4), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(one_shot_grid_candidates(3), (std::vector<int>{1, 3}));
  EXPECT_EQ(one_shot_grid_candidates(1), (std::vector<int>{1}));
  EXPECT_TRUE(one_shot_grid_candidates(0).empty());
}

TEST(FastestGrid, TheStrictlyFastestWinsAndTiesGoToTheLargestGrid) {
  EXPECT_EQ(fastest_grid({1 * KiB, {3.0, 2.0, 4.0, 5.0}}, kCandidates), 33);
  EXPECT_EQ(fastest_grid({1 * KiB, {2.0, 2.0, 3.0, 3.0}}, kCandidates), 33);
  EXPECT_EQ(fastest_grid({1 * KiB, {2.0, 3.0, 2.0, 3.0}}, kCandidates), 66);
  EXPECT_EQ(fastest_grid({1 * KiB, {2.0, 2.0, 2.0, 2.0}}, kCandidates), kDefault);
  EXPECT_EQ(fastest_grid({1 * KiB, {1.9, 2.0, 2.0, 2.0}}, kCandidates), 16);
}

TEST(FastestGrid, RowsThatDoNotMatchTheCandidatesAreRefused) {
  EXPECT_THROW(fastest_grid({1 * KiB, {1.0, 2.0}}, kCandidates), std::invalid_argument);
  EXPECT_THROW(fastest_grid({1 * KiB, {}}, std::vector<int>{}), std::invalid_argument);
}

TEST(DeriveLaunchShapes, TheDefaultWinningEverySizeGivesNoSteps) {
  EXPECT_TRUE(steps_for({kDefault, kDefault, kDefault, kDefault}).empty());
  EXPECT_TRUE(derive_launch_shapes({}, kCandidates).one_shot_grid.empty()) << "nothing measured";
  // Every candidate equally fast: a tie, which the default takes.
  std::vector<OneShotGridTimes> ties = rows_won_by({16, 33, 66});
  for (OneShotGridTimes& row : ties) row.us_by_candidate.assign(kCandidates.size(), 5.0);
  EXPECT_TRUE(derive_launch_shapes(ties, kCandidates).one_shot_grid.empty());
}

TEST(DeriveLaunchShapes, SmallSizesPreferringFewerBlocksGiveOneStep) {
  // 1 KiB .. 8 KiB on 16 blocks, 16 KiB up on the default.
  const std::vector<routing::GridStep> expected{{8 * KiB, 16}};
  EXPECT_EQ(steps_for({16, 16, 16, 16, kDefault, kDefault}), expected);
  // Fewer blocks at every size: one step up to the largest size measured
  // (past it the default applies: nothing was measured there).
  EXPECT_EQ(steps_for({33, 33, 33}), (std::vector<routing::GridStep>{{4 * KiB, 33}}));
}

TEST(DeriveLaunchShapes, AlternatingWinnersGiveSeveralSteps) {
  // A default win between two other winners is a step of its own; the
  // trailing ones are dropped.
  const std::vector<routing::GridStep> expected{
      {2 * KiB, 16}, {4 * KiB, 33}, {8 * KiB, kDefault}, {16 * KiB, 66}};
  EXPECT_EQ(steps_for({16, 16, 33, kDefault, 66, kDefault, kDefault}), expected);
  EXPECT_EQ(steps_for({kDefault, 16, kDefault, 16}),
            (std::vector<routing::GridStep>{
                {1 * KiB, kDefault}, {2 * KiB, 16}, {4 * KiB, kDefault}, {8 * KiB, 16}}));
}

TEST(DeriveLaunchShapes, TiesInARowGoToTheLargestGrid) {
  // 16 and 33 tie at 1 KiB and 2 KiB (66 and the default slower): 33.
  std::vector<OneShotGridTimes> rows = rows_won_by({16, 16, kDefault});
  for (std::size_t i = 0; i < 2; ++i) rows[i].us_by_candidate = {1.0, 1.0, 2.0, 2.0};
  EXPECT_EQ(derive_launch_shapes(rows, kCandidates).one_shot_grid,
            (std::vector<routing::GridStep>{{2 * KiB, 33}}));
}

TEST(DeriveLaunchShapes, MessagesBetweenMeasuredSizesTakeTheLargerSizesStep) {
  const routing::LaunchShapeTuning shapes =
      derive_launch_shapes(rows_won_by({16, 66, kDefault}), kCandidates);
  EXPECT_EQ(applied_grid(shapes, 512), 16) << "below the smallest size measured";
  EXPECT_EQ(applied_grid(shapes, 1 * KiB + 16), 66);
  EXPECT_EQ(applied_grid(shapes, 3 * KiB), kDefault);
  EXPECT_EQ(applied_grid(shapes, 1 << 30), kDefault) << "past every step";
}

// Every pattern of winners over five sizes: applied as the transport does,
// the steps give each measured size its winner; they are in increasing
// size and read back from the tuning file's form unchanged.
TEST(DeriveLaunchShapes, AppliedStepsGiveEveryMeasuredSizeItsWinner) {
  constexpr std::size_t kSizes = 5;
  std::size_t patterns = 1;
  for (std::size_t i = 0; i < kSizes; ++i) patterns *= kCandidates.size();
  for (std::size_t pattern = 0; pattern < patterns; ++pattern) {
    std::vector<int> winners;
    for (std::size_t rest = pattern, i = 0; i < kSizes; ++i, rest /= kCandidates.size())
      winners.push_back(kCandidates[rest % kCandidates.size()]);
    const std::vector<OneShotGridTimes> rows = rows_won_by(winners);
    const routing::LaunchShapeTuning shapes = derive_launch_shapes(rows, kCandidates);
    std::string trace;
    for (int w : winners) trace += std::to_string(w) + " ";
    SCOPED_TRACE("winners " + trace + "-> " +
                 routing::describe_one_shot_grid(shapes.one_shot_grid));
    for (std::size_t i = 0; i < rows.size(); ++i)
      EXPECT_EQ(applied_grid(shapes, rows[i].bytes), winners[i]) << rows[i].bytes << " bytes";
    if (!shapes.one_shot_grid.empty()) {
      EXPECT_NE(shapes.one_shot_grid.back().blocks, kDefault) << "a trailing default step";
    }
    std::string error;
    const auto parsed =
        routing::parse_one_shot_grid(routing::describe_one_shot_grid(shapes.one_shot_grid), error);
    ASSERT_TRUE(parsed.has_value()) << error;
    EXPECT_EQ(*parsed, shapes.one_shot_grid);
  }
}

}  // namespace
}  // namespace peerplan::tune
