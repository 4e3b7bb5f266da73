// SPDX-License-Identifier: Apache-2.0
// write_entry: creates the file, replaces its own machine's entry, keeps
// the others and the protocol windows, and leaves a file it cannot parse
// alone; check_out_path refuses, before the sweep, an --out it could not
// update, naming --out.
#include "tuning_output.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "peerplan/errors.hpp"

namespace peerplan::tune {
namespace {

class WriteEntry : public testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("peerplan_tune_output_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
    path_ = (directory_ / "machine.tune").string();
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::string contents() const {
    std::ifstream in(path_);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::filesystem::path directory_;
  std::string path_;
};

TEST_F(WriteEntry, CreatesTheFile) {
  EXPECT_FALSE(write_entry(path_, {"host ranks=2", RouteCutoffs{1, 2, 3, 4}, "run 1", 0, {}, {}},
                           "written by a test"));
  const auto file = routing::read_tuning_file(path_);
  ASSERT_EQ(file.entries.size(), 1u);
  EXPECT_EQ(file.entries[0].cutoffs, (RouteCutoffs{1, 2, 3, 4}));
  EXPECT_EQ(contents().rfind("# written by a test\n", 0), 0u) << contents();
  // No temporary file is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(directory_), {}), 1);
}

TEST_F(WriteEntry, ReplacesItsOwnEntryAndKeepsOthers) {
  write_entry(path_, {"host ranks=2", RouteCutoffs{1, 1, 1, 1}, "run 1", 0, {}, {}}, "");
  write_entry(path_, {"host ranks=4", RouteCutoffs{4, 4, 4, 4}, "other", 0, {}, {}}, "");
  EXPECT_TRUE(
      write_entry(path_, {"host ranks=2", RouteCutoffs{2, 2, 2, 2}, "run 2", 0, {}, {}}, ""));
  const auto file = routing::read_tuning_file(path_);
  ASSERT_EQ(file.entries.size(), 2u);
  EXPECT_EQ(file.entries[0].fingerprint, "host ranks=2");
  EXPECT_EQ(file.entries[0].cutoffs, (RouteCutoffs{2, 2, 2, 2}));
  EXPECT_EQ(file.entries[0].measured, "run 2");
  EXPECT_EQ(file.entries[1].cutoffs, (RouteCutoffs{4, 4, 4, 4}));
}

TEST_F(WriteEntry, KeepsTheProtocolWindows) {
  routing::TuningEntry entry{"cuda ranks=2", RouteCutoffs{1, 2, 3, 4}, "run 1", 0, {}, {}};
  // Fused LL off: never is a value, not auto.
  entry.protocols = {Window::above_bytes(65536), Window{65536, 4194304}, Window::never(),
                     std::nullopt, std::nullopt};
  write_entry(path_, entry, "");
  routing::TuningEntry lamport_never{"cuda ranks=4", RouteCutoffs{1, 2, 3, 4}, "run 2", 0, {}, {}};
  lamport_never.protocols = {Window::every_size(), Window::never(), Window::up_to_bytes(2097152),
                             std::nullopt, std::nullopt};
  write_entry(path_, lamport_never, "");
  const auto file = routing::read_tuning_file(path_);
  ASSERT_EQ(file.entries.size(), 2u);
  EXPECT_EQ(file.entries[0].protocols, entry.protocols);
  EXPECT_EQ(file.entries[1].protocols, lamport_never.protocols);
  // The windows are written in their syntax; auto ones are left out.
  const std::string text = contents();
  EXPECT_NE(text.find("fused_lamport = 64K..4M\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fused_lamport = never\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("two_shot_dma"), std::string::npos) << text;
}

TEST_F(WriteEntry, LeavesAnAutoCutoffOutAndReadsItBackAuto) {
  // An unmeasured fused cutoff (-e below one row of --hidden) stays auto.
  write_entry(path_, {"host ranks=2", RouteCutoffs{1, 2, kAutoCutoff, 0}, "run 1", 0, {}, {}}, "");
  const auto file = routing::read_tuning_file(path_);
  ASSERT_EQ(file.entries.size(), 1u);
  EXPECT_EQ(file.entries[0].cutoffs, (RouteCutoffs{1, 2, kAutoCutoff, 0}));
  EXPECT_EQ(contents().find("fused_max_bytes"), std::string::npos) << contents();
}

TEST_F(WriteEntry, LeavesAFileItCannotParseAlone) {
  std::ofstream(path_) << "not a tuning file\n";
  EXPECT_THROW(write_entry(path_, {"host ranks=2", RouteCutoffs{1, 1, 1, 1}, "", 0, {}, {}}, ""),
               InvalidArgument);
  EXPECT_EQ(contents(), "not a tuning file\n");
}

// The message of check_out_path's (or write_entry's) InvalidArgument, ""
// when it accepts the path.
template <typename Call>
std::string refusal(Call call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

// Errors speak of --out, the option the user gave, not of the library's
// Config::tuning_file / PEERPLAN_TUNING_FILE, which a tool run never sets.
void expect_about_out(const std::string& message, const std::string& path,
                      const std::string& problem) {
  EXPECT_EQ(message.rfind("--out " + path + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(problem), std::string::npos) << message;
  EXPECT_EQ(message.find("Config::tuning_file"), std::string::npos) << message;
  EXPECT_EQ(message.find("PEERPLAN_TUNING_FILE"), std::string::npos) << message;
}

TEST_F(WriteEntry, CheckOutPathTakesANewOrATuningFile) {
  EXPECT_EQ(refusal([&] { check_out_path(path_); }), "");
  write_entry(path_, {"host ranks=2", RouteCutoffs{1, 1, 1, 1}, "run 1", 0, {}, {}}, "");
  EXPECT_EQ(refusal([&] { check_out_path(path_); }), "");
  // Its probe file is gone; the tuning file is the directory's only file.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(directory_), {}), 1);
}

TEST_F(WriteEntry, CheckOutPathRefusesADirectory) {
  const std::string directory = directory_.string();
  expect_about_out(refusal([&] { check_out_path(directory); }), directory, "is a directory");
  // write_entry, should the path become a directory during the sweep, too.
  expect_about_out(refusal([&] {
                     write_entry(directory, {"host ranks=2", RouteCutoffs{}, "", 0, {}, {}}, "");
                   }),
                   directory, "is a directory");
}

TEST_F(WriteEntry, CheckOutPathRefusesAFileThatIsNotATuningFile) {
  std::ofstream(path_) << "not a tuning file\n";
  const std::string message = refusal([&] { check_out_path(path_); });
  expect_about_out(message, path_, "is not a tuning file the tool can update");
  EXPECT_NE(message.find("line 1"), std::string::npos) << message;
  EXPECT_EQ(contents(), "not a tuning file\n");
  expect_about_out(refusal([&] {
                     write_entry(path_, {"host ranks=2", RouteCutoffs{}, "", 0, {}, {}}, "");
                   }),
                   path_, "is not a tuning file");
}

TEST_F(WriteEntry, CheckOutPathRefusesAMissingDirectory) {
  const std::string path = (directory_ / "no_such_dir" / "machine.tune").string();
  expect_about_out(refusal([&] { check_out_path(path); }), path, "does not exist");
  expect_about_out(refusal([&] { check_out_path(""); }), "", "empty");
}

}  // namespace
}  // namespace peerplan::tune
