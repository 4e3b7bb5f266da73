// SPDX-License-Identifier: Apache-2.0
// make_plan: peerplan_tune's options, checked before anything is measured.
// Each value the tool cannot use is refused with InvalidArgument naming the
// option; none overflows on the way (a --hidden near 2^62 once overflowed
// hidden * element size and slipped through).
#include "sweep_plan.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::tune {
namespace {

Options small() {
  Options options;
  options.min_text = "1K";
  options.max_text = "4K";
  options.hidden = 1024;
  return options;
}

// The message of make_plan's InvalidArgument, "" when it accepts `options`.
std::string refusal(const Options& options) {
  try {
    make_plan(options);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(MakePlan, TakesTheValuesAsGiven) {
  Options options = small();
  options.dtype_text = "f32";
  options.protocols_max_text = "0";
  options.graph = 1;
  const SweepPlan plan = make_plan(options);
  EXPECT_EQ(plan.min_bytes, 1024u);
  EXPECT_EQ(plan.max_bytes, 4096u);
  EXPECT_EQ(plan.dtype, DataType::f32);
  EXPECT_EQ(plan.hidden, 1024);
  EXPECT_EQ(plan.protocols_max_bytes, 0u);
  EXPECT_TRUE(plan.timing.graph);
}

TEST(MakePlan, RefusesAHiddenWhoseRowBytesWouldOverflow) {
  Options options = small();
  options.hidden = std::int64_t{1} << 62;  // * 2 bytes wraps to a multiple of 16
  const std::string message = refusal(options);
  EXPECT_NE(message.find("--hidden 4611686018427387904"), std::string::npos) << message;
  EXPECT_NE(message.find("lower --hidden"), std::string::npos) << message;
  options.hidden = INT64_MAX;
  EXPECT_NE(refusal(options).find("--hidden"), std::string::npos);
}

TEST(MakePlan, BoundsTheRowByTheLargestTensor) {
  Options options = small();
  options.dtype_text = "f32";
  options.hidden = (std::int64_t{1} << 48) / 4;  // exactly 2^48 bytes
  EXPECT_EQ(refusal(options), "");
  options.hidden += 4;
  EXPECT_NE(refusal(options).find("--hidden"), std::string::npos);
  // A row larger than -e is not an error: the fused op is then not
  // measured (the entry leaves fused_max_bytes auto).
  options.dtype_text = "bf16";
  options.hidden = std::int64_t{1} << 40;
  EXPECT_EQ(refusal(options), "");
}

TEST(MakePlan, RefusesRowsThatAreNotWhole16BytePacksOrEmpty) {
  Options options = small();
  options.hidden = 1001;
  const std::string message = refusal(options);
  EXPECT_NE(message.find("--hidden 1001"), std::string::npos) << message;
  EXPECT_NE(message.find("multiple of 8"), std::string::npos) << message;  // bf16: 8 per pack
  options.hidden = 0;
  EXPECT_NE(refusal(options).find("--hidden 0"), std::string::npos);
  options.hidden = -8;
  EXPECT_NE(refusal(options).find("--hidden -8"), std::string::npos);
}

TEST(MakePlan, RefusesSizesItCannotUseNamingTheOption) {
  const auto message_for = [](std::string min, std::string max) {
    Options options = small();
    options.min_text = std::move(min);
    options.max_text = std::move(max);
    return refusal(options);
  };
  EXPECT_EQ(message_for("abc", "4K").rfind("-b abc: ", 0), 0u);
  EXPECT_EQ(message_for("1K", "1T").rfind("-e 1T: ", 0), 0u);
  EXPECT_EQ(message_for("1K", "10x").rfind("-e 10x: ", 0), 0u);
  EXPECT_EQ(message_for("-1K", "4K").rfind("-b -1K: ", 0), 0u);
  // Larger than any tensor (and than size_t would hold after a few more G).
  const std::string huge = message_for("1K", "1000000G");
  EXPECT_EQ(huge.rfind("-e 1000000G: at most 281474976710656 bytes", 0), 0u) << huge;
  EXPECT_EQ(message_for("1K", "99999999999999999999").rfind("-e ", 0), 0u);
  EXPECT_EQ(message_for("256M", "256M"), "");
  EXPECT_EQ(message_for("256T", "256T").rfind("-b 256T", 0), 0u);
  EXPECT_NE(message_for("8", "4K").find("multiple of 16"), std::string::npos);
  EXPECT_NE(message_for("4K", "1K").find("-b must be <= -e"), std::string::npos);
  Options options = small();
  options.protocols_max_text = "16MB";
  EXPECT_EQ(refusal(options).rfind("--protocols-max 16MB: ", 0), 0u);
}

TEST(MakePlan, RefusesCountsBelowOne) {
  Options options = small();
  options.timing.iters = 0;
  EXPECT_EQ(refusal(options).rfind("-n 0", 0), 0u);
  options = small();
  options.timing.batches = 0;
  EXPECT_EQ(refusal(options).rfind("--batches 0", 0), 0u);
  options = small();
  options.timing.warmup = -1;
  EXPECT_EQ(refusal(options).rfind("-w -1", 0), 0u);
  options = small();
  options.dtype_text = "fp8";
  EXPECT_EQ(refusal(options).rfind("--dtype fp8", 0), 0u);
}

}  // namespace
}  // namespace peerplan::tune
