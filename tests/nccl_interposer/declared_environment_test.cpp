// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_NCCL_DECLARE and PEERPLAN_PLAN_FILE together.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include "test_support.hpp"
#include "nccl_interposer/declared_environment.hpp"
#include "nccl_interposer/dispatch_rules.hpp"

namespace peerplan::nccl_interposer {
namespace {

using test::Buffers;
using test::invalid_argument_message;
using test::says;
using test::Sizes;

class DeclaredEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() /
              ("peerplan_declared_env_" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }

  std::string write_file(const std::string& name, const std::string& text) {
    const auto path = folder_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  std::vector<DeclaredBuffer> declared() {
    return declared_from([this](const char* name) -> const char* {
      const auto found = variables_.find(name);
      return found == variables_.end() ? nullptr : found->second.c_str();
    });
  }
  std::string error() {
    return invalid_argument_message([this] { declared(); });
  }

  std::filesystem::path folder_;
  std::map<std::string, std::string> variables_;
};

TEST_F(DeclaredEnvironment, NeitherSetOrEmptyDeclaresNothing) {
  EXPECT_TRUE((declared()).empty());
  variables_ = {{"PEERPLAN_NCCL_DECLARE", ""}, {"PEERPLAN_PLAN_FILE", ""}};
  EXPECT_TRUE((declared()).empty());
}

TEST_F(DeclaredEnvironment, EitherAlone) {
  variables_ = {{"PEERPLAN_NCCL_DECLARE", "f32:8"}};
  EXPECT_EQ(declared(), (Buffers{DeclaredBuffer{DataType::f32, 2}}));
  variables_ = {{"PEERPLAN_PLAN_FILE",
                 write_file("a.plans", "peerplan-plans 1\nall_reduce dtype=f16 count=3\n")}};
  EXPECT_EQ(declared(), (Buffers{DeclaredBuffer{DataType::f16, 3}}));
}

TEST_F(DeclaredEnvironment, BothMergeSortedWithoutRepeats) {
  variables_ = {{"PEERPLAN_NCCL_DECLARE", "f32:8;bf16:2"},
                {"PEERPLAN_PLAN_FILE", write_file("a.plans",
                                                  "peerplan-plans 1\n"
                                                  "all_reduce dtype=f32 count=2\n"
                                                  "all_reduce dtype=f16 count=7\n")}};
  EXPECT_EQ(declared(),
            (Buffers{DeclaredBuffer{DataType::f16, 7}, DeclaredBuffer{DataType::bf16, 1},
                     DeclaredBuffer{DataType::f32, 2}}));
}

TEST_F(DeclaredEnvironment, ErrorsNameTheVariableOrTheFileLine) {
  variables_ = {{"PEERPLAN_NCCL_DECLARE", "f32:6"}};
  EXPECT_TRUE(says(error(), {"PEERPLAN_NCCL_DECLARE: in 'f32:6'"}));
  const std::string path = write_file("bad.plans", "peerplan-plans 1\nall_reduce dtype=f32\n");
  variables_ = {{"PEERPLAN_PLAN_FILE", path}};
  EXPECT_TRUE(says(error(), {"plan file " + path + ":2:"}));
}

TEST_F(DeclaredEnvironment, UnreadablePlanFile) {
  const std::string missing = (folder_ / "missing.plans").string();
  variables_ = {{"PEERPLAN_PLAN_FILE", missing}};
  EXPECT_TRUE(says(error(), {"PEERPLAN_PLAN_FILE=" + missing,
                             "cannot be read (No such file or directory)", "or unset it"}));
  variables_ = {{"PEERPLAN_PLAN_FILE", folder_.string()}};
  EXPECT_TRUE(says(error(), {"cannot be read (it is a folder)"}));
}

TEST_F(DeclaredEnvironment, ProcessEnvironment) {
  const std::string path =
      write_file("p.plans", "peerplan-plans 1\nall_reduce dtype=bf16 bytes=1K\n");
  ASSERT_EQ(::setenv("PEERPLAN_NCCL_DECLARE", "f32:4", 1), 0);
  ASSERT_EQ(::setenv("PEERPLAN_PLAN_FILE", path.c_str(), 1), 0);
  const auto buffers = declared_from_environment();
  ::unsetenv("PEERPLAN_NCCL_DECLARE");
  ::unsetenv("PEERPLAN_PLAN_FILE");
  EXPECT_EQ(buffers,
            (Buffers{DeclaredBuffer{DataType::bf16, 512}, DeclaredBuffer{DataType::f32, 1}}));
}

}  // namespace
}  // namespace peerplan::nccl_interposer
