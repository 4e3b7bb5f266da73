// SPDX-License-Identifier: Apache-2.0
// The one-shot grid steps: which step a message takes (at each bound and
// one byte over), the config's explicit grid winning over them, and their
// tuning-file text read back and refused where malformed.
#include "routing/launch_shape_tuning.hpp"

#include <gtest/gtest.h>

#include "peerplan/config.hpp"

namespace peerplan::routing {
namespace {

const LaunchShapeTuning kSteps{{{64 * 1024, 8}, {1 << 20, 64}, {4 << 20, 132}}};

TEST(LaunchShapeTuning, AMessageTakesTheFirstStepThatHoldsIt) {
  EXPECT_EQ(tuned_one_shot_grid(kSteps, 2), 8);
  EXPECT_EQ(tuned_one_shot_grid(kSteps, 64 * 1024), 8);
  EXPECT_EQ(tuned_one_shot_grid(kSteps, 64 * 1024 + 1), 64);
  EXPECT_EQ(tuned_one_shot_grid(kSteps, 4 << 20), 132);
  EXPECT_EQ(tuned_one_shot_grid(kSteps, (4 << 20) + 1), std::nullopt) << "past the last step";
  EXPECT_EQ(tuned_one_shot_grid(LaunchShapeTuning{}, 2), std::nullopt);
}

TEST(LaunchShapeTuning, TheConfiguredGridWinsThenTheStepThenTheDefault) {
  EXPECT_EQ(one_shot_grid_for(16, kSteps, 2, 132), 16);
  EXPECT_EQ(one_shot_grid_for(0, kSteps, 2, 132), 8);
  EXPECT_EQ(one_shot_grid_for(0, kSteps, 1 << 30, 132), 132);
  EXPECT_EQ(one_shot_grid_for(0, kSteps, 1 << 30, 78), 78);
  EXPECT_EQ(one_shot_grid_for(0, LaunchShapeTuning{}, 2, 78), 78);
}

TEST(LaunchShapeTuning, TheFileTextReadsBack) {
  EXPECT_EQ(describe_one_shot_grid(kSteps.one_shot_grid), "65536:8 1048576:64 4194304:132");
  EXPECT_EQ(describe_one_shot_grid({}), "");
  std::string error;
  EXPECT_EQ(parse_one_shot_grid("65536:8 1048576:64 4194304:132", error), kSteps.one_shot_grid);
  EXPECT_EQ(parse_one_shot_grid("64K:8  1M:64 4m:132", error), kSteps.one_shot_grid)
      << "suffixes, and several blanks between pairs";
  EXPECT_EQ(parse_one_shot_grid("", error), std::vector<GridStep>{});
}

TEST(LaunchShapeTuning, MalformedTextSaysWhatIsWrong) {
  const auto refused = [](std::string_view text) {
    std::string error;
    const auto steps = parse_one_shot_grid(text, error);
    EXPECT_FALSE(steps.has_value()) << text;
    return error;
  };
  EXPECT_NE(refused("64K").find("is not <size>:<blocks>"), std::string::npos);
  EXPECT_NE(refused("64K:x").find("is not <size>:<blocks>"), std::string::npos);
  EXPECT_NE(refused("1.5M:8").find("is not <size>:<blocks>"), std::string::npos);
  EXPECT_NE(refused("64K:0").find("blocks must be 1..1024"), std::string::npos);
  EXPECT_NE(refused("64K:1025").find("blocks must be 1..1024"), std::string::npos);
  EXPECT_NE(refused("1M:8 64K:16").find("sizes must increase"), std::string::npos);
  EXPECT_NE(refused("1M:8 1M:16").find("sizes must increase"), std::string::npos);
}

}  // namespace
}  // namespace peerplan::routing
