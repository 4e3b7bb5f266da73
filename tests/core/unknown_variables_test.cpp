// SPDX-License-Identifier: Apache-2.0
#include "core/unknown_variables.hpp"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace peerplan::core {
namespace {

std::vector<UnknownVariable> unknown_in(std::vector<std::string_view> environment) {
  return unknown_variables(environment);
}

TEST(UnknownVariables, MisspellingsAreNamedWithTheClosestKnownVariable) {
  const auto unknown =
      unknown_in({"PEERPLAN_TIMOUT_MS=5000", "PEERPLAN_DEBGU=INFO", "PEERPLAN_TIMEOUT=3000"});
  ASSERT_EQ(unknown.size(), 3u);
  EXPECT_EQ(unknown[0], (UnknownVariable{"PEERPLAN_TIMOUT_MS", "PEERPLAN_TIMEOUT_MS"}));
  EXPECT_EQ(unknown[1], (UnknownVariable{"PEERPLAN_DEBGU", "PEERPLAN_DEBUG"}));
  EXPECT_EQ(unknown[2], (UnknownVariable{"PEERPLAN_TIMEOUT", "PEERPLAN_TIMEOUT_MS"}));
  EXPECT_EQ(describe(unknown[0]),
            "unknown variable PEERPLAN_TIMOUT_MS (did you mean PEERPLAN_TIMEOUT_MS?)");
}

TEST(UnknownVariables, KnownNamesAndOtherPrefixesAreLeftAlone) {
  EXPECT_TRUE(unknown_in({"PEERPLAN_TIMEOUT_MS=5000", "PEERPLAN_DEBUG=", "PEERPLAN_HOST_ID=a",
                          "PEERPLAN_LIBRARY=/x.so", "PEERPLAN_FAULT_INJECT=p@1:kill",
                          "PEERPLAN_SKIP_SANITIZERS=1", "PEERPLAN_ONE_SHOT_LAMPORT=never",
                          "NCCL_DEBUG=INFO", "PATH=/bin", "PEERPLANX=1"})
                  .empty());
}

// Read by the NCCL interposer only, never by create, but known all the same.
TEST(UnknownVariables, TheNcclInterposersVariablesAreKnown) {
  EXPECT_TRUE(unknown_in({"PEERPLAN_NCCL_DECLARE=bf16:1M", "PEERPLAN_PLAN_FILE=/x.plans"}).empty());
}

TEST(UnknownVariables, RetiredNamesAreNotUnknownTheirRefusalSaysMore) {
  EXPECT_TRUE(unknown_in({"PEERPLAN_ONE_SHOT_PROTOCOL=ll"}).empty());
}

TEST(UnknownVariables, FarFromEveryKnownNameNoSuggestion) {
  const auto unknown = unknown_in({"PEERPLAN_QUANTUM_ENTANGLEMENT=1"});
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0].suggestion, "");
  EXPECT_EQ(describe(unknown[0]), "unknown variable PEERPLAN_QUANTUM_ENTANGLEMENT");
}

}  // namespace
}  // namespace peerplan::core
