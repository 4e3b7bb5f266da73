// SPDX-License-Identifier: Apache-2.0
// The warning for a fused call that misses its plans only by the weight:
// it names the plan (or, where every layer's norm shares the shape, how
// many plans and the first), once per shape; other misses, all-reduces and
// plans every rank sends to the fallback anyway say nothing.
#include "communicator/fused_weight_misses.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peerplan::communicator {
namespace {

const float kWeights[3][512] = {};
constexpr float kEps = 1e-6f;

Declaration norm(const char* name, int layer, std::int64_t rows = 2) {
  return Declaration::fused_add_rms_norm(name, DataType::f32, TensorLayout{rows, 512},
                                         kWeights[layer], kEps);
}

PlanKey call_with(const void* weight, std::int64_t rows = 2) {
  return make_fused_key(DataType::f32, TensorLayout{rows, 512}, weight, kEps);
}

TEST(FusedWeightMisses, NamesTheOnePlanOfTheShapeOnce) {
  FusedWeightMisses misses;
  misses.rebuild(std::vector<Declaration>{norm("only", 0)}, {true});
  const float other[512] = {};
  const auto warning = misses.warning_for_miss(call_with(other));
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("\"only\" but for its weight"), std::string::npos) << *warning;
  EXPECT_FALSE(misses.warning_for_miss(call_with(other)).has_value()) << "once per shape";
}

TEST(FusedWeightMisses, CountsThePlansThatShareTheShapeWithoutNamingOneAsTheMatch) {
  FusedWeightMisses misses;
  misses.rebuild(std::vector<Declaration>{norm("layer0", 0), norm("layer1", 1), norm("layer2", 2)},
                 {true, true, true});
  const float other[512] = {};
  const auto warning = misses.warning_for_miss(call_with(other));
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("3 declared plans (the first \"layer0\") but none of their weights"),
            std::string::npos)
      << *warning;
  EXPECT_EQ(warning->find("but for its weight"), std::string::npos) << *warning;
}

TEST(FusedWeightMisses, OtherShapesAndFallbackPlansSayNothing) {
  FusedWeightMisses misses;
  misses.rebuild(std::vector<Declaration>{norm("p2p", 0), norm("fallback", 1, 4)}, {true, false});
  const float other[512] = {};
  EXPECT_FALSE(misses.warning_for_miss(call_with(other, 3)).has_value()) << "never declared";
  EXPECT_FALSE(misses.warning_for_miss(call_with(other, 4)).has_value())
      << "every rank sends that plan to the fallback";
  EXPECT_FALSE(misses.warning_for_miss(make_all_reduce_key(DataType::f32, TensorLayout{2, 512}))
                   .has_value());
  misses.clear();
  EXPECT_FALSE(misses.warning_for_miss(call_with(other)).has_value()) << "cleared";
}

}  // namespace
}  // namespace peerplan::communicator
