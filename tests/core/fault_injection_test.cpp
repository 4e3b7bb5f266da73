// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_FAULT_INJECT: what it accepts, what it rejects with a message
// naming the problem, and that a point acts for the named rank only. (The
// kill and stop actions are exercised by the fault suite in mpi_tests/.)
#include "core/fault_injection.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "peerplan/errors.hpp"

namespace peerplan {
namespace {

class FaultInjection : public testing::Test {
 protected:
  void TearDown() override { set(nullptr); }
  static void set(const char* value) {
    if (value) {
      ::setenv("PEERPLAN_FAULT_INJECT", value, 1);
    } else {
      ::unsetenv("PEERPLAN_FAULT_INJECT");
    }
    fault::reload_for_tests();
  }
  static std::string error_of(const char* value) {
    set(value);
    try {
      fault::check_configuration();
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(FaultInjection, UnsetMeansNothingIsArmed) {
  set(nullptr);
  EXPECT_FALSE(fault::armed());
  EXPECT_NO_THROW(fault::check_configuration());
  set("");
  EXPECT_FALSE(fault::armed());
}

TEST_F(FaultInjection, WellFormedRulesArm) {
  set("shm.created@1:kill,fallback.posted@0:sleep=5,p2p.arrived@3:stop");
  EXPECT_TRUE(fault::armed());
  EXPECT_NO_THROW(fault::check_configuration());
}

TEST_F(FaultInjection, MalformedValuesAreRejectedNamingTheProblem) {
  EXPECT_NE(error_of("shm.created").find("is not <point>@<rank>:<action>"), std::string::npos);
  const std::string unknown = error_of("shm.typo@1:kill");
  EXPECT_NE(unknown.find("'shm.typo' is not a fault point"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("shm.created"), std::string::npos) << "lists the known points";
  EXPECT_NE(error_of("shm.created@x:kill").find("is not a rank"), std::string::npos);
  EXPECT_NE(error_of("shm.created@1:explode").find("is not kill, stop, abort or sleep=<ms>"),
            std::string::npos);
  EXPECT_NE(error_of("shm.created@1:sleep=").find("needs a number of milliseconds"),
            std::string::npos);
  EXPECT_NE(error_of("shm.created@1:kill,").find("is not <point>@<rank>:<action>"),
            std::string::npos);
  // Past an int: refused, not wrapped onto a small rank or a short sleep.
  EXPECT_NE(error_of("shm.created@4294967297:kill").find("is not a rank"), std::string::npos);
  EXPECT_NE(error_of("shm.created@1:sleep=5000000000").find("needs a number of milliseconds"),
            std::string::npos);
  EXPECT_EQ(error_of("shm.created@1:kill"), "");
  EXPECT_EQ(error_of("shm.created@1:sleep=2147483647"), "");
}

TEST_F(FaultInjection, APointActsOnlyForTheNamedRankAndPoint) {
  set("fallback.posted@1:sleep=300");
  using Clock = std::chrono::steady_clock;
  auto elapsed_ms = [](auto&& body) {
    const auto start = Clock::now();
    body();
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  EXPECT_LT(elapsed_ms([] { PEERPLAN_FAULT_POINT("fallback.posted", 0); }), 100.0);
  EXPECT_LT(elapsed_ms([] { PEERPLAN_FAULT_POINT("fallback.reduced", 1); }), 100.0);
  EXPECT_GE(elapsed_ms([] { PEERPLAN_FAULT_POINT("fallback.posted", 1); }), 290.0);
  // Once: the rule has fired.
  EXPECT_LT(elapsed_ms([] { PEERPLAN_FAULT_POINT("fallback.posted", 1); }), 100.0);
}

}  // namespace
}  // namespace peerplan
