// SPDX-License-Identifier: Apache-2.0
// PEERPLAN_DEBUG filtering, the host:pid and rank prefix, multi-line
// messages, and whole lines under concurrent writers. The subsystem filter
// (PEERPLAN_DEBUG_SUBSYS) and the log file (PEERPLAN_DEBUG_FILE):
// log_file_test.cpp. stderr is captured with GoogleTest's
// CaptureStderr (it redirects file descriptor 2, which is what fwrite hits).
#include "core/log.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace peerplan {
namespace {

// "host:pid" as the prefix must show it, worked out here independently:
// the host name up to its first '.', then this process's id.
std::string host_pid() {
  char host[256] = {};
  EXPECT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string full(host);
  return full.substr(0, full.find('.')) + ':' + std::to_string(::getpid());
}

// The prefix of every line: "peerplan[host:pid] " or "peerplan[host:pid rank R] ".
std::string prefix(int rank = -1) {
  return "peerplan[" + host_pid() + (rank >= 0 ? " rank " + std::to_string(rank) : "") + "] ";
}

class Log : public testing::Test {
 protected:
  void SetUp() override {
    saved_level_ = log::level();
    log::set_rank(-1);
  }
  void TearDown() override {
    log::set_level(saved_level_);
    log::set_rank(-1);
  }

  // What the three helpers print at `level`.
  static std::string emitted_at(LogLevel level) {
    log::set_level(level);
    testing::internal::CaptureStderr();
    log::warn("w");
    log::info(log::Subsystem::init, "i");
    log::trace(log::Subsystem::call, "t");
    return testing::internal::GetCapturedStderr();
  }

  LogLevel saved_level_ = LogLevel::warn;
};

TEST_F(Log, DefaultLevelIsWarnLikeConfig) {
  // Set nowhere before this point in a fresh process; Config's default too.
  EXPECT_EQ(saved_level_, Config{}.log_level);
}

TEST_F(Log, NoneSilencesEverything) { EXPECT_EQ(emitted_at(LogLevel::none), ""); }

TEST_F(Log, WarnShowsOnlyWarnings) {
  EXPECT_EQ(emitted_at(LogLevel::warn), prefix() + "WARN: w\n");
}

TEST_F(Log, InfoShowsWarningsAndInfo) {
  EXPECT_EQ(emitted_at(LogLevel::info), prefix() + "WARN: w\n" + prefix() + "INFO: i\n");
}

TEST_F(Log, TraceShowsEverything) {
  EXPECT_EQ(emitted_at(LogLevel::trace),
            prefix() + "WARN: w\n" + prefix() + "INFO: i\n" + prefix() + "TRACE: t\n");
}

TEST_F(Log, EnabledFollowsTheLevel) {
  log::set_level(LogLevel::info);
  EXPECT_TRUE(log::enabled(LogLevel::warn));
  EXPECT_TRUE(log::enabled(LogLevel::info));
  EXPECT_FALSE(log::enabled(LogLevel::trace));
  EXPECT_FALSE(log::enabled(LogLevel::none));  // "none" is not a level to log at
  EXPECT_EQ(log::level(), LogLevel::info);
}

TEST_F(Log, DirectWriteIsFilteredToo) {
  log::set_level(LogLevel::warn);
  testing::internal::CaptureStderr();
  log::write(LogLevel::trace, "hidden");
  log::write(LogLevel::none, "hidden");
  log::write(LogLevel::warn, "shown");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), prefix() + "WARN: shown\n");
}

TEST_F(Log, RankAppearsInThePrefixOnceSet) {
  log::set_level(LogLevel::info);
  log::set_rank(3);
  testing::internal::CaptureStderr();
  log::info(log::Subsystem::init, "declared 4 plans");
  log::set_rank(-1);
  log::info(log::Subsystem::init, "no rank");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            prefix(3) + "INFO: declared 4 plans\n" + prefix() + "INFO: no rank\n");
}

TEST_F(Log, PrefixNamesTheShortHostAndThisProcess) {
  log::set_level(LogLevel::warn);
  log::set_rank(0);
  testing::internal::CaptureStderr();
  log::warn("x");
  const std::string line = testing::internal::GetCapturedStderr();
  // Spelled out, so that a prefix built from the same helper as above
  // cannot hide a wrong shape: "peerplan[<host>:<pid> rank 0] WARN: x".
  const std::regex shape(R"(peerplan\[([^ :.\]]+):([0-9]+) rank 0\] WARN: x\n)");
  std::smatch match;
  ASSERT_TRUE(std::regex_match(line, match, shape)) << line;
  EXPECT_EQ(std::stol(match[2].str()), static_cast<long>(::getpid()));
}

TEST_F(Log, EveryLineOfAMultiLineMessageIsPrefixed) {
  log::set_level(LogLevel::info);
  log::set_rank(0);
  testing::internal::CaptureStderr();
  log::info(log::Subsystem::init,
            "name  route\nqkv   one_shot\n");  // the trailing newline adds no empty line
  log::info(log::Subsystem::init, "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), prefix(0) + "INFO: name  route\n" + prefix(0) +
                                                        "INFO: qkv   one_shot\n" + prefix(0) +
                                                        "INFO: \n");
}

TEST_F(Log, ConcurrentWritersNeverSplitALine) {
  log::set_level(LogLevel::info);
  log::set_rank(1);
  constexpr int kThreads = 4;
  constexpr int kLines = 2000;
  testing::internal::CaptureStderr();
  {
    std::vector<std::jthread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([t] {
        // Long enough that a line written in pieces would be cut into.
        const std::string payload(200, static_cast<char>('a' + t));
        for (int i = 0; i < kLines; ++i)
          log::info(log::Subsystem::init, "thread " + std::to_string(t) + " " + payload);
      });
    }
  }
  const std::string captured = testing::internal::GetCapturedStderr();
  const std::regex whole_line("peerplan\\[" + host_pid() +
                              R"( rank 1\] INFO: thread ([0-3]) ([a-d]{200}))");
  std::istringstream lines(captured);
  std::string line;
  std::vector<int> per_thread(kThreads, 0);
  int total = 0;
  while (std::getline(lines, line)) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, whole_line)) << "torn line: " << line;
    const int t = std::stoi(match[1]);
    ASSERT_EQ(match[2].str(), std::string(200, static_cast<char>('a' + t))) << line;
    ++per_thread[t];
    ++total;
  }
  EXPECT_EQ(total, kThreads * kLines);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(per_thread[t], kLines) << "thread " << t;
}

}  // namespace
}  // namespace peerplan
