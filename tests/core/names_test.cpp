// SPDX-License-Identifier: Apache-2.0
// Names of error codes and Config enums: one distinct name per value, and
// a readable answer for a value outside the enum (e.g. from the C ABI).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "peerplan/config.hpp"
#include "peerplan/errors.hpp"

namespace peerplan {
namespace {

template <typename Enum>
void expect_distinct_names(std::initializer_list<Enum> values) {
  std::set<std::string> names;
  for (Enum value : values) {
    const std::string name = to_string(value);
    EXPECT_NE(name, "unknown") << static_cast<int>(value);
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
  }
  // One past the last value is not a member and must not crash.
  const auto past = static_cast<Enum>(static_cast<int>(*(values.end() - 1)) + 1);
  EXPECT_STREQ(to_string(past), "unknown");
}

TEST(Names, ErrorCodes) {
  expect_distinct_names({ErrorCode::ok, ErrorCode::invalid_argument, ErrorCode::invalid_usage,
                         ErrorCode::undeclared_plan, ErrorCode::mismatch, ErrorCode::timeout,
                         ErrorCode::cuda_error, ErrorCode::nccl_error, ErrorCode::mpi_error,
                         ErrorCode::system_error, ErrorCode::unsupported, ErrorCode::internal});
  EXPECT_STREQ(to_string(ErrorCode::timeout), "timeout");
  EXPECT_EQ(Timeout("x").code(), ErrorCode::timeout);
}

TEST(Names, ConfigEnums) {
  expect_distinct_names({Backend::automatic, Backend::cuda, Backend::host});
  expect_distinct_names({LogLevel::none, LogLevel::warn, LogLevel::info, LogLevel::trace});
  expect_distinct_names({TransferMode::automatic, TransferMode::pull, TransferMode::push});
  expect_distinct_names({P2PLevel::loc, P2PLevel::nvl, P2PLevel::pix, P2PLevel::pxb, P2PLevel::phb,
                         P2PLevel::node, P2PLevel::sys, P2PLevel::automatic});
  expect_distinct_names({RowClusters::automatic, RowClusters::on, RowClusters::off});
  // The names users know from NCCL_P2P_LEVEL and nvidia-smi topo -m.
  EXPECT_STREQ(to_string(P2PLevel::phb), "PHB");
  EXPECT_STREQ(to_string(LogLevel::info), "INFO");
}

}  // namespace
}  // namespace peerplan
