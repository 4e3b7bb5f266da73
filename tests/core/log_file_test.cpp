// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_DEBUG_SUBSYS and PEERPLAN_DEBUG_FILE: which subsystems' lines
// show (WARN always), "^" inversion, unknown names refused by the
// environment and by Config validation; the log file gets the lines, %h,
// %p and %% expand, and a file that cannot be opened leaves the lines on
// stderr with one WARN.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/config_validation.hpp"
#include "core/environment.hpp"
#include "core/log.hpp"
#include "peerplan/errors.hpp"

namespace peerplan {
namespace {

namespace fs = std::filesystem;
using log::Subsystem;

std::string short_host() {
  char host[256] = {};
  EXPECT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string full(host);
  return full.substr(0, full.find('.'));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LogTarget : public testing::Test {
 protected:
  void SetUp() override {
    saved_level_ = log::level();
    log::set_rank(-1);
    dir_ = fs::temp_directory_path() / ("peerplan_log_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    log::set_file("");
    log::set_subsystems(log::kAllSubsystems);
    log::set_level(saved_level_);
    fs::remove_all(dir_);
  }

  LogLevel saved_level_ = LogLevel::warn;
  fs::path dir_;
};

TEST_F(LogTarget, SubsystemFilterPassesTheChosenAndBlocksTheRest) {
  log::set_level(LogLevel::trace);
  log::set_subsystems(*log::parse_subsystems("plan,CALL"));
  testing::internal::CaptureStderr();
  log::info(Subsystem::plan, "plan line");
  log::info(Subsystem::init, "init line");
  log::trace(Subsystem::call, "call line");
  log::trace(Subsystem::transport, "transport line");
  log::warn("warning");  // never filtered by subsystem
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("INFO: plan line"), std::string::npos) << out;
  EXPECT_NE(out.find("TRACE: call line"), std::string::npos) << out;
  EXPECT_NE(out.find("WARN: warning"), std::string::npos) << out;
  EXPECT_EQ(out.find("init line"), std::string::npos) << out;
  EXPECT_EQ(out.find("transport line"), std::string::npos) << out;
  EXPECT_TRUE(log::enabled(LogLevel::info, Subsystem::plan));
  EXPECT_FALSE(log::enabled(LogLevel::info, Subsystem::route));
}

TEST_F(LogTarget, CaretInvertsTheList) {
  log::set_level(LogLevel::trace);
  log::set_subsystems(*log::parse_subsystems("^CALL"));
  testing::internal::CaptureStderr();
  log::trace(Subsystem::call, "per call");
  log::info(Subsystem::init, "config");
  log::trace(Subsystem::fallback, "fallback");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find("per call"), std::string::npos) << out;
  EXPECT_NE(out.find("INFO: config"), std::string::npos) << out;
  EXPECT_NE(out.find("TRACE: fallback"), std::string::npos) << out;
}

TEST(LogSubsystems, ParsesNamesAllEmptyAndInversion) {
  const auto bit = [](Subsystem s) { return static_cast<std::uint32_t>(s); };
  EXPECT_EQ(log::parse_subsystems("INIT"), bit(Subsystem::init));
  EXPECT_EQ(log::parse_subsystems(" init , Bootstrap "),
            bit(Subsystem::init) | bit(Subsystem::bootstrap));
  EXPECT_EQ(log::parse_subsystems("ALL"), log::kAllSubsystems);
  EXPECT_EQ(log::parse_subsystems(""), log::kAllSubsystems);
  EXPECT_EQ(log::parse_subsystems("^ALL"), 0U);
  EXPECT_EQ(log::parse_subsystems("^ROUTE,TRANSPORT"),
            log::kAllSubsystems & ~(bit(Subsystem::route) | bit(Subsystem::transport)));
  for (const char* bad : {"BOGUS", "INIT,,PLAN", "INIT,", "^", "INIT;PLAN", "^^INIT"})
    EXPECT_EQ(log::parse_subsystems(bad), std::nullopt) << bad;
  for (Subsystem s : {Subsystem::init, Subsystem::bootstrap, Subsystem::plan, Subsystem::route,
                      Subsystem::transport, Subsystem::fallback, Subsystem::call})
    EXPECT_EQ(log::parse_subsystems(log::to_string(s)), bit(s)) << log::to_string(s);
}

TEST(LogSubsystems, UnknownNamesAreRefusedNamingTheValidOnes) {
  Config config;
  config.log_subsystems = "INIT,NETWORK";
  try {
    core::validate_config(config);
    ADD_FAILURE() << "INIT,NETWORK accepted";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("INIT,NETWORK"), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_DEBUG_SUBSYS"), std::string::npos) << message;
    EXPECT_NE(message.find("INIT, BOOTSTRAP, PLAN, ROUTE, TRANSPORT, FALLBACK, CALL or ALL"),
              std::string::npos)
        << message;
  }
  EXPECT_NO_THROW(core::validate_config(Config{}));

  const auto lookup = [](const char* name) -> const char* {
    return std::string_view(name) == "PEERPLAN_DEBUG_SUBSYS" ? "PLAN,NETWORK" : nullptr;
  };
  try {
    apply_environment_from(Config{}, lookup);
    ADD_FAILURE() << "PEERPLAN_DEBUG_SUBSYS=PLAN,NETWORK accepted";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("PEERPLAN_DEBUG_SUBSYS"), std::string::npos) << message;
    EXPECT_NE(message.find("\"PLAN,NETWORK\""), std::string::npos) << message;
    EXPECT_NE(message.find("FALLBACK, CALL or ALL"), std::string::npos) << message;
  }
  const auto good = [](const char* name) -> const char* {
    return std::string_view(name) == "PEERPLAN_DEBUG_SUBSYS" ? "^call" : nullptr;
  };
  EXPECT_EQ(apply_environment_from(Config{}, good).log_subsystems, "^call");
}

TEST_F(LogTarget, FileNamesExpandHostPidAndPercent) {
  const std::string pid = std::to_string(::getpid());
  EXPECT_EQ(log::expand_file_name("log.%h.%p"), "log." + short_host() + "." + pid);
  EXPECT_EQ(log::expand_file_name("100%%-%x-%"), "100%-%x-%");
  EXPECT_EQ(log::expand_file_name("plain"), "plain");
  EXPECT_EQ(log::expand_file_name("%p%p"), pid + pid);
}

TEST_F(LogTarget, TheFileGetsTheLinesAndStderrNone) {
  log::set_level(LogLevel::info);
  log::set_rank(2);
  const std::string pattern = (dir_ / "log.%h.%p").string();
  const fs::path expected = dir_ / ("log." + short_host() + "." + std::to_string(::getpid()));
  testing::internal::CaptureStderr();
  log::set_file(pattern);
  log::info(Subsystem::init, "to the file");
  log::warn("a warning too");
  const std::string on_stderr = testing::internal::GetCapturedStderr();
  log::set_rank(-1);
  EXPECT_EQ(on_stderr, "");
  ASSERT_TRUE(fs::exists(expected)) << expected;
  const std::string text = read_file(expected);  // flushed after every message
  EXPECT_NE(text.find("rank 2] INFO: to the file\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2] WARN: a warning too\n"), std::string::npos) << text;

  // Back to stderr with an empty pattern; the file keeps what it had.
  log::set_file("");
  testing::internal::CaptureStderr();
  log::info(Subsystem::init, "to stderr");
  EXPECT_NE(testing::internal::GetCapturedStderr().find("INFO: to stderr"), std::string::npos);
  EXPECT_EQ(read_file(expected), text);
}

TEST_F(LogTarget, AnUnopenableFileWarnsOnceAndKeepsStderr) {
  log::set_level(LogLevel::info);
  const std::string pattern = (dir_ / "no-such-dir" / "log.%p").string();
  testing::internal::CaptureStderr();
  log::set_file(pattern);
  log::info(Subsystem::init, "still logged");
  log::set_file("");
  log::set_file(pattern);  // the same pattern again: no second warning
  const std::string out = testing::internal::GetCapturedStderr();
  const std::string warning =
      "WARN: PEERPLAN_DEBUG_FILE: cannot open " +
      (dir_ / "no-such-dir" / ("log." + std::to_string(::getpid()))).string();
  const auto first = out.find(warning);
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find(warning, first + 1), std::string::npos) << "warned twice:\n" << out;
  EXPECT_NE(out.find("INFO: still logged"), std::string::npos) << out;
}

}  // namespace
}  // namespace peerplan
