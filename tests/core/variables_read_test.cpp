// SPDX-License-Identifier: Apache-2.0
// Every PEERPLAN_* variable that the project's own code, scripts and test
// harness read from the environment is a known name: create() must not warn
// "peerplan ignores it" about a variable the scripts set for the programs they
// start (PEERPLAN_BUILD) or one the tests read to replay a run (PEERPLAN_TEST_SEED).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <string_view>

#include "core/unknown_variables.hpp"

namespace peerplan::core {
namespace {

namespace fs = std::filesystem;

// The forms that read a variable: getenv("X") in C and C++, os.environ.get("X")
// and os.environ["X"] in Python, ${X:-...} (and :? :=) in shell.
const std::regex kReads(
    R"re(getenv\("(PEERPLAN_[A-Z0-9_]+)"|environ(?:\.get\(|\[)"(PEERPLAN_[A-Z0-9_]+)"|\$\{(PEERPLAN_[A-Z0-9_]+):[-?=])re");

bool scanned(const fs::path& file) {
  static const std::set<std::string> kExtensions{".c", ".cpp", ".hpp", ".cu", ".cuh", ".py", ".sh"};
  return kExtensions.contains(file.extension().string()) || file.filename() == "run";
}

std::set<std::string> variables_read(const fs::path& root) {
  std::set<std::string> names;
  for (const char* folder : {"src", "include", "python", "scripts", ".ci", "tests", "mpi_tests",
                             "benchmarks", "tools", "examples"}) {
    if (!fs::is_directory(root / folder)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      if (!entry.is_regular_file() || !scanned(entry.path())) continue;
      std::ifstream in(entry.path());
      const std::string text{std::istreambuf_iterator<char>(in), {}};
      for (std::sregex_iterator m(text.begin(), text.end(), kReads), end; m != end; ++m) {
        for (std::size_t group = 1; group < m->size(); ++group) {
          if ((*m)[group].matched) names.insert((*m)[group].str());
        }
      }
    }
  }
  return names;
}

TEST(VariablesRead, EveryVariableTheProjectReadsIsKnown) {
  const std::set<std::string> names = variables_read(PEERPLAN_SOURCE_DIR);
  // The scan finds the forms it looks for (a wrong pattern would find nothing).
  EXPECT_TRUE(names.contains("PEERPLAN_HOST_ID")) << "getenv form not found";
  EXPECT_TRUE(names.contains("PEERPLAN_LIBRARY")) << "os.environ form not found";
  EXPECT_TRUE(names.contains("PEERPLAN_CMAKE_ARGS")) << "shell form not found";
  for (const std::string& name : names) {
    const std::string assignment = name + "=1";
    const std::string_view environment[] = {assignment};
    EXPECT_TRUE(unknown_variables(environment).empty())
        << name << " is read by the project but create() would call it unknown: add it to "
        << "kOtherKnownNames in src/core/unknown_variables.cpp";
  }
}

}  // namespace
}  // namespace peerplan::core
