// SPDX-License-Identifier: Apache-2.0
// main() of every MPI test binary (library peerplan_mpi_test_main).
//
// Every rank runs the same GoogleTest program. After each test a listener
// merges the ranks' verdicts, so that
//   - a test that fails on any rank fails on every rank, and rank 0 prints
//     each failing rank's messages as "rank 2: <message>";
//   - a test skipped on some ranks but run on others fails everywhere (a rank
//     must never skip alone: its peers would wait for it in a collective);
//   - ranks that ran different tests (different filters, shuffles) fail;
//   - the exit code is the global verdict, identical on every rank;
//   - a program whose tests all skipped says so last ("[ ALL SKIPPED ]"), for
//     ctest to report it as skipped.
// Only rank 0's result printer prints, so the output reads like one process.
// Every synchronisation here is bounded: a rank that hangs inside a test makes
// the others abort the job after PEERPLAN_MPI_TEST_SYNC_TIMEOUT_S seconds
// (default 60; the ctest registration sets it below the ctest timeout) with
// the name of the test, instead of hanging until ctest's
// timeout kills everything without a word.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/mpi_test_support.hpp"

namespace {

// A private duplicate of MPI_COMM_WORLD: the verdict exchange must never
// match (or be matched by) messages of the tests themselves.
MPI_Comm g_sync_comm = MPI_COMM_NULL;
// The tests' own communicator (mpi_test::test_comm()).
MPI_Comm g_test_comm = MPI_COMM_NULL;
int g_rank = 0;
int g_size = 1;
int g_thread_level = MPI_THREAD_SINGLE;

std::chrono::seconds sync_timeout() {
  static const std::chrono::seconds value = [] {
    const char* text = std::getenv("PEERPLAN_MPI_TEST_SYNC_TIMEOUT_S");
    const long seconds = text != nullptr ? std::strtol(text, nullptr, 10) : 0;
    return std::chrono::seconds(seconds > 0 ? seconds : 60);
  }();
  return value;
}

// Completes `request` or aborts the whole job once the deadline passes.
// Polls politely: CI oversubscribes ranks onto 2 cores, and a spinning rank
// would steal the core of the rank it waits for.
void wait_or_abort(MPI_Request& request, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + sync_timeout();
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "rank %d: %s: not every rank got there within %lld s (a rank hangs or "
                   "crashed; raise PEERPLAN_MPI_TEST_SYNC_TIMEOUT_S if it is merely slow). "
                   "Aborting the job.\n",
                   g_rank, what.c_str(), static_cast<long long>(sync_timeout().count()));
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::uint32_t fnv1a(std::string_view text) {
  std::uint32_t hash = 2166136261u;
  for (unsigned char c : text) hash = (hash ^ c) * 16777619u;
  return hash;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

enum Outcome : int { passed = 0, failed = 1, skipped = 2 };

// What one rank tells rank 0 about a test that went wrong somewhere:
// the test's full name, then (file, line, message) of each reported part.
struct Part {
  std::string file;
  int line = 0;
  std::string message;
};

std::string serialize(const std::string& test_name, const std::vector<Part>& parts) {
  std::string out = test_name;
  out.push_back('\0');
  for (const Part& p : parts) {
    out += p.file;
    out.push_back('\0');
    out += std::to_string(p.line);
    out.push_back('\0');
    out += p.message;
    out.push_back('\0');
  }
  return out;
}

void deserialize(std::string_view in, std::string& test_name, std::vector<Part>& parts) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\0') {
      fields.emplace_back(in.substr(start, i - start));
      start = i + 1;
    }
  }
  if (fields.empty()) return;
  test_name = fields[0];
  for (std::size_t i = 1; i + 2 < fields.size(); i += 3) {
    parts.push_back(Part{fields[i], std::atoi(fields[i + 1].c_str()), fields[i + 2]});
  }
}

class RankVerdictListener : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const std::string name = std::string(info.test_suite_name()) + "." + info.name();
    const ::testing::TestResult& result = *info.result();
    const int mine = result.Failed() ? failed : result.Skipped() ? skipped : passed;

    // Everyone learns everyone's outcome and which test they ran.
    int status[2] = {mine, static_cast<int>(fnv1a(name))};
    std::vector<int> all(2 * static_cast<std::size_t>(g_size));
    MPI_Request request;
    MPI_Iallgather(status, 2, MPI_INT, all.data(), 2, MPI_INT, g_sync_comm, &request);
    wait_or_abort(request, "after test " + name);

    std::vector<int> failing, skipping, not_skipping, other_test;
    for (int r = 0; r < g_size; ++r) {
      const int outcome = all[2 * r];
      if (outcome == failed) failing.push_back(r);
      (outcome == skipped ? skipping : not_skipping).push_back(r);
      if (all[2 * r + 1] != all[1]) other_test.push_back(r);
    }
    const bool lone_skip = !skipping.empty() && skipping.size() != static_cast<std::size_t>(g_size);
    if (failing.empty() && !lone_skip && other_test.empty()) return;

    // Rank 0 collects the reports of every rank (decided identically
    // everywhere from the allgathered statuses, so all ranks join).
    std::vector<Part> parts;
    for (int i = 0; i < result.total_part_count(); ++i) {
      const ::testing::TestPartResult& part = result.GetTestPartResult(i);
      if (part.failed() || part.skipped()) {
        parts.push_back(
            Part{part.file_name() ? part.file_name() : "", part.line_number(), part.message()});
      }
    }
    const std::string report = serialize(name, parts);
    const std::vector<std::string> reports = gather_to_root(report, name);

    // Make the verdict fail here too. On rank 0 each other rank's messages
    // become failures of this test, so the printer shows them in place.
    if (g_rank == 0) {
      for (int r : failing) {
        if (r == 0) continue;
        std::string remote_name;
        std::vector<Part> remote_parts;
        deserialize(reports[r], remote_name, remote_parts);
        for (const Part& p : remote_parts) {
          ADD_FAILURE_AT(p.file.empty() ? "unknown" : p.file.c_str(), p.line)
              << "rank " << r << ": " << p.message;
        }
        if (remote_parts.empty()) ADD_FAILURE() << "rank " << r << ": failed (no message)";
      }
      if (lone_skip) {
        std::string why;
        for (int r : skipping) {
          std::string remote_name;
          std::vector<Part> remote_parts;
          deserialize(reports[r], remote_name, remote_parts);
          for (const Part& p : remote_parts)
            why += "\n  rank " + std::to_string(r) + ": " + p.message;
        }
        ADD_FAILURE() << "skipped on ranks " << ranks_text(skipping) << " but not on ranks "
                      << ranks_text(not_skipping)
                      << ": a rank must never skip alone (decide skips with "
                         "PEERPLAN_MPI_SKIP_IF, which is collective)"
                      << why;
      }
      for (int r : other_test) {
        std::string remote_name;
        std::vector<Part> remote_parts;
        deserialize(reports[r], remote_name, remote_parts);
        ADD_FAILURE() << "rank " << r << " ran test " << remote_name << " while rank 0 ran " << name
                      << ": every rank must run the same tests in the same order";
      }
    } else if (mine != failed) {
      ADD_FAILURE() << "failed on ranks " << ranks_text(failing)
                    << (lone_skip ? " (or skipped on some ranks only)" : "")
                    << (other_test.empty() ? "" : " (or ranks ran different tests)")
                    << "; rank 0 prints the messages";
    }
  }

 private:
  // Gathers every rank's report on rank 0 (others get an empty vector).
  std::vector<std::string> gather_to_root(const std::string& report, const std::string& name) {
    int length = static_cast<int>(report.size());
    std::vector<int> lengths(g_size);
    MPI_Request request;
    MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, g_sync_comm, &request);
    wait_or_abort(request, "gathering the failure reports of test " + name);

    std::vector<int> offsets(g_size, 0);
    int total = 0;
    for (int r = 0; r < g_size && g_rank == 0; ++r) {
      offsets[r] = total;
      total += lengths[r];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Igatherv(report.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                 MPI_CHAR, 0, g_sync_comm, &request);
    wait_or_abort(request, "gathering the failure reports of test " + name);

    std::vector<std::string> reports;
    if (g_rank == 0) {
      for (int r = 0; r < g_size; ++r) reports.push_back(all.substr(offsets[r], lengths[r]));
    }
    return reports;
  }
};

int max_over_ranks(int value, const std::string& what) {
  int result = value;
  MPI_Request request;
  MPI_Iallreduce(&value, &result, 1, MPI_INT, MPI_MAX, g_sync_comm, &request);
  wait_or_abort(request, what);
  return result;
}

}  // namespace

namespace peerplan::mpi_test {

int world_rank() { return g_rank; }
int world_size() { return g_size; }
int thread_level() { return g_thread_level; }
MPI_Comm test_comm() { return g_test_comm; }

void meet_or_abort(const char* where, MPI_Comm comm, std::chrono::seconds bound) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm == MPI_COMM_NULL ? test_comm() : comm, &request);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "rank %d: %s: not every rank arrived within %lld s (a rank hangs in the code "
                   "under test). Aborting the job.\n",
                   world_rank(), where, static_cast<long long>(bound.count()));
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool any_rank(bool value) { return max_over_ranks(value ? 1 : 0, "any_rank()") != 0; }
bool all_ranks(bool value) { return max_over_ranks(value ? 0 : 1, "all_ranks()") == 0; }

}  // namespace peerplan::mpi_test

int main(int argc, char** argv) {
  // MULTIPLE where the library offers it: some tests drive MPI from helper
  // threads; they check thread_level() and skip (collectively) otherwise.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &g_thread_level);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_sync_comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_test_comm);

  ::testing::InitGoogleTest(&argc, argv);

  // With --gtest_shuffle every rank must shuffle alike: use rank 0's seed.
  if (GTEST_FLAG_GET(shuffle)) {
    int seed = GTEST_FLAG_GET(random_seed);
    if (seed == 0) seed = static_cast<int>(std::time(nullptr) % 99989) + 1;
    MPI_Bcast(&seed, 1, MPI_INT, 0, g_sync_comm);
    GTEST_FLAG_SET(random_seed, seed);
  }

  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (g_rank != 0) delete listeners.Release(listeners.default_result_printer());
  // Appended after the printer: OnTestEnd runs in reverse order, so the
  // merged verdict is in place before the printer reports the test.
  listeners.Append(new RankVerdictListener);

  const int local = RUN_ALL_TESTS();
  // Tests' verdicts already agree; this also covers failures outside tests
  // (a suite's SetUpTestSuite, environments).
  const int global = max_over_ranks(local, "the end of the test program");
  // The verdicts agree on every rank, so rank 0's counts are everyone's.
  // ctest reports a program that printed this line as skipped
  // (SKIP_REGULAR_EXPRESSION of the GPU tests): gtest's own "[  SKIPPED ]"
  // lines appear as soon as one test skips, also beside tests that ran.
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (g_rank == 0 && global == 0 && unit.successful_test_count() == 0 &&
      unit.skipped_test_count() > 0) {
    std::printf("[ ALL SKIPPED ] every test of this program skipped on every rank\n");
    std::fflush(stdout);
  }

  MPI_Comm_free(&g_test_comm);
  MPI_Comm_free(&g_sync_comm);
  MPI_Finalize();
  return global;
}
