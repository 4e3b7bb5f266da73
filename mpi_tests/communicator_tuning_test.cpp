// SPDX-License-Identifier: Apache-2.0
// Tuning files end to end on the host backend: a file whose entry matches
// the communicator's fingerprint sets cutoffs() and the routes of declared
// plans (two-shot's window included); explicit settings win over it; a
// file without a matching entry warns and keeps the defaults; unreadable
// or malformed files, and ranks resolving different cutoffs, fail create()
// on every rank alike.
#include <mpi.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "routing/cutoffs.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

// The entry these tests write for this communicator: each window edge is a
// size some declaration below sits on.
// one-shot, two-shot max, fused, two-shot min, two-shot pieces (16 KiB
// runs as two 8 KiB two-shots)
const RouteCutoffs kTuned{1024, 16384, 2048, 4096, 8192};

std::string expected_fingerprint() { return "host ranks=" + std::to_string(test_size()); }

// A tuning file in the temporary directory, written by rank 0 and removed
// by it at the end; every rank gets the same path. Collective.
class SharedTuningFile {
 public:
  SharedTuningFile(const std::string& name, const std::string& text) {
    std::int64_t pid = ::getpid();
    MPI_Bcast(&pid, 1, MPI_INT64_T, 0, test_comm());
    path_ = (std::filesystem::temp_directory_path() /
             ("peerplan_tuning_test_" + std::to_string(pid) + "_" + name))
                .string();
    if (test_rank() == 0) std::ofstream(path_, std::ios::binary) << text;
    MPI_Barrier(test_comm());
  }
  ~SharedTuningFile() {
    MPI_Barrier(test_comm());
    if (test_rank() == 0) std::filesystem::remove(path_);
  }
  SharedTuningFile(const SharedTuningFile&) = delete;
  SharedTuningFile& operator=(const SharedTuningFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string entry_text(const std::string& fingerprint, const RouteCutoffs& c) {
  return "[entry]\nfingerprint = " + fingerprint +
         "\none_shot_max_bytes = " + std::to_string(c.one_shot_max_bytes) +
         "\ntwo_shot_min_bytes = " + std::to_string(c.two_shot_min_bytes) +
         "\ntwo_shot_max_bytes = " + std::to_string(c.two_shot_max_bytes) +
         "\nfused_max_bytes = " + std::to_string(c.fused_max_bytes) +
         (c.two_shot_chunk_bytes == kAutoCutoff
              ? std::string()
              : "\ntwo_shot_chunk_bytes = " + std::to_string(c.two_shot_chunk_bytes)) +
         "\nmeasured = communicator_tuning_test\n";
}

// A file with an entry for another rank count before this machine's, so
// that the matching one is not simply the first.
std::string file_for_this_machine() {
  return "# written by communicator_tuning_test\npeerplan-tuning 1\n\n" +
         entry_text("host ranks=999", RouteCutoffs{1, 1, 1, 1}) + "\n" +
         entry_text(expected_fingerprint(), kTuned);
}

struct CreateOutcome {
  std::unique_ptr<Communicator> comm;
  ErrorCode code = ErrorCode::ok;
  std::string message;
};

CreateOutcome try_create(Config config) {
  CreateOutcome outcome;
  try {
    outcome.comm = create_on_world(std::move(config));
  } catch (const Error& e) {
    outcome.code = e.code();
    outcome.message = e.what();
  }
  return outcome;
}

void expect_same_failure_everywhere(const CreateOutcome& o, ErrorCode expected,
                                    const std::string& what) {
  EXPECT_EQ(o.comm, nullptr) << what << ": create() succeeded on this rank";
  EXPECT_EQ(o.code, expected) << what << ": " << o.message;
  const auto differing = ranks_differing_from_rank0(fnv1a(o.message) ^ static_cast<int>(o.code));
  EXPECT_TRUE(differing.empty()) << what << ": ranks " << join(differing)
                                 << " failed differently from rank 0; here: " << o.message;
}

Route route_of(Communicator& comm, const PlanKey& key) { return comm.plan_for(key).route; }

class CommunicatorTuning : public testing::Test {
 protected:
  // Settings the runner may have inherited would change what is resolved.
  void SetUp() override {
    for (const char* name :
         {"PEERPLAN_TUNING_FILE", "PEERPLAN_ONE_SHOT_MAX_BYTES", "PEERPLAN_TWO_SHOT_MIN_BYTES",
          "PEERPLAN_TWO_SHOT_MAX_BYTES", "PEERPLAN_FUSED_MAX_BYTES", "PEERPLAN_DISABLE_P2P",
          "PEERPLAN_ONE_SHOT_MAX_BLOCKS", "PEERPLAN_DEBUG"})
      cleared_.push_back(std::make_unique<ScopedEnv>(name, nullptr));
  }
  std::vector<std::unique_ptr<ScopedEnv>> cleared_;
};

TEST_F(CommunicatorTuning, FingerprintAndDefaultsWithoutAFile) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  auto comm = create_on_world();
  EXPECT_EQ(comm->topology_fingerprint(), expected_fingerprint());
  EXPECT_EQ(comm->cutoffs(), routing::default_cutoffs(test_size(), Backend::host));
  comm->close();
}

TEST_F(CommunicatorTuning, MatchingEntrySetsCutoffsAndRoutes) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  const SharedTuningFile file("matching.tune", file_for_this_machine());
  Config config;
  config.tuning_file = file.path();
  auto comm = create_on_world(config);
  ASSERT_TRUE(comm->p2p_enabled()) << comm->p2p_disabled_reason();
  EXPECT_EQ(comm->cutoffs(), kTuned);

  // f32 all-reduces of 1 KiB (one-shot), 2 KiB (above one-shot, below the
  // two-shot window), 4 KiB and 16 KiB (the window's edges), 32 KiB (above
  // it); fused rows of 64 f32: 2 KiB (fused) and 4 KiB (over).
  const Buffer weight = make_weight(DataType::f32, 64, next_seed());
  const std::vector<std::pair<std::int64_t, Route>> all_reduces{{256, Route::one_shot},
                                                                {512, Route::fallback},
                                                                {1024, Route::two_shot},
                                                                {4096, Route::two_shot},
                                                                {8192, Route::fallback}};
  std::vector<Declaration> declarations;
  for (const auto& [count, route] : all_reduces)
    declarations.push_back(
        Declaration::all_reduce("ar" + std::to_string(count), DataType::f32, TensorLayout{count}));
  declarations.push_back(Declaration::fused_add_rms_norm(
      "fused8", DataType::f32, TensorLayout{8, 64}, weight.data(), 1e-6f));
  declarations.push_back(Declaration::fused_add_rms_norm(
      "fused16", DataType::f32, TensorLayout{16, 64}, weight.data(), 1e-6f));
  comm->declare(declarations);

  for (const auto& [count, route] : all_reduces) {
    const PlanKey key = make_all_reduce_key(DataType::f32, TensorLayout{count});
    EXPECT_EQ(route_of(*comm, key), route) << count * 4 << " bytes";
    if (route == Route::fallback) {
      EXPECT_EQ(comm->plan_for(key).route_reason, FallbackReason::over_cutoff) << count * 4;
    }
  }
  EXPECT_EQ(
      route_of(*comm, make_fused_key(DataType::f32, TensorLayout{8, 64}, weight.data(), 1e-6f)),
      Route::fused_one_shot);
  EXPECT_EQ(
      route_of(*comm, make_fused_key(DataType::f32, TensorLayout{16, 64}, weight.data(), 1e-6f)),
      Route::fallback);

  // The calls take those routes and compute the sum; 16 KiB, over the
  // entry's two-shot piece size, runs as two 8 KiB two-shots.
  for (std::int64_t count : {512, 1024, 4096}) {
    const auto outcome = run_all_reduce(*comm, DataType::f32, TensorLayout{count}, Inputs::integers,
                                        false, next_seed());
    expect_all_reduce_correct(outcome, std::to_string(count * 4) + " bytes");
    EXPECT_EQ(outcome.result.route, count == 512 ? Route::fallback : Route::two_shot);
  }
  const std::string pieces =
      comm->plan_for(make_all_reduce_key(DataType::f32, TensorLayout{4096})).launch;
  EXPECT_NE(pieces.find("in 2 pieces of 8192 bytes"), std::string::npos) << pieces;
  EXPECT_EQ(
      comm->plan_for(make_all_reduce_key(DataType::f32, TensorLayout{1024})).launch.find("pieces"),
      std::string::npos);
  comm->close();
}

TEST_F(CommunicatorTuning, EnvironmentVariableIsAlsoRead) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  const SharedTuningFile file("from_env.tune", file_for_this_machine());
  const ScopedEnv tuning("PEERPLAN_TUNING_FILE", file.path().c_str());
  Config config;
  config.tuning_file = "/nonexistent/ignored.tune";  // the variable overrides it
  auto comm = create_on_world(config);
  EXPECT_EQ(comm->config().tuning_file, file.path());
  EXPECT_EQ(comm->cutoffs(), kTuned);
  comm->close();
}

TEST_F(CommunicatorTuning, ExplicitSettingsWinOverTheFile) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  const SharedTuningFile file("overridden.tune", file_for_this_machine());
  const ScopedEnv one_shot("PEERPLAN_ONE_SHOT_MAX_BYTES", "512");
  Config config;
  config.tuning_file = file.path();
  config.cutoffs.two_shot_min_bytes = 0;  // from code
  auto comm = create_on_world(config);
  RouteCutoffs expected = kTuned;
  expected.one_shot_max_bytes = 512;
  expected.two_shot_min_bytes = 0;
  EXPECT_EQ(comm->cutoffs(), expected);
  // 1 KiB is over the variable's one-shot cutoff; no lower bound any more.
  comm->declare(
      std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, TensorLayout{256})});
  EXPECT_EQ(route_of(*comm, make_all_reduce_key(DataType::f32, TensorLayout{256})),
            Route::two_shot);
  comm->close();
}

TEST_F(CommunicatorTuning, NoMatchingEntryWarnsAndKeepsTheDefaults) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  const SharedTuningFile file(
      "other_machine.tune",
      "peerplan-tuning 1\n" + entry_text("cuda ranks=2 gpu=\"NVIDIA H200\" links=NV18", kTuned));
  Config config;
  config.tuning_file = file.path();
  config.log_level = LogLevel::warn;
  testing::internal::CaptureStderr();
  auto comm = create_on_world(config);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(comm->cutoffs(), routing::default_cutoffs(test_size(), Backend::host));
  if (test_rank() == 0) {
    // Names the file and this machine's fingerprint, so the user sees why.
    EXPECT_NE(log.find("tuning file " + file.path() + " has no entry"), std::string::npos) << log;
    EXPECT_NE(log.find("'" + expected_fingerprint() + "'"), std::string::npos) << log;
  } else {
    EXPECT_EQ(log.find("has no entry"), std::string::npos) << "warned on every rank:\n" << log;
  }
  comm->close();
}

TEST_F(CommunicatorTuning, MalformedFileFailsOnEveryRankNamingTheLine) {
  const SharedTuningFile file(
      "malformed.tune", "peerplan-tuning 1\n[entry]\nfingerprint = host ranks=2\nfused_max = 1\n");
  Config config;
  config.tuning_file = file.path();
  const CreateOutcome o = try_create(config);
  expect_same_failure_everywhere(o, ErrorCode::invalid_argument, "malformed tuning file");
  EXPECT_NE(o.message.find("tuning file " + file.path() + ", line 4: unknown key 'fused_max'"),
            std::string::npos)
      << o.message;
}

TEST_F(CommunicatorTuning, MissingFileFailsOnEveryRank) {
  Config config;
  config.tuning_file = "/nonexistent/peerplan/node.tune";
  const CreateOutcome o = try_create(config);
  expect_same_failure_everywhere(o, ErrorCode::invalid_argument, "missing tuning file");
  EXPECT_NE(o.message.find("/nonexistent/peerplan/node.tune does not exist"), std::string::npos)
      << o.message;
}

TEST_F(CommunicatorTuning, RanksResolvingDifferentCutoffsAreAMismatch) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  // The usual way: PEERPLAN_TUNING_FILE set on some ranks (nodes) only.
  const SharedTuningFile file("one_rank.tune", file_for_this_machine());
  const int last = test_size() - 1;
  Config config;
  if (test_rank() == last) config.tuning_file = file.path();
  const CreateOutcome o = try_create(config);
  expect_same_failure_everywhere(o, ErrorCode::mismatch, "tuning file on the last rank only");
  EXPECT_TRUE(names_rank(o.message, last)) << o.message;
  EXPECT_NE(o.message.find("PEERPLAN_TUNING_FILE"), std::string::npos) << o.message;
}

// Protocol windows in an entry: the host backend's windows are fixed (one
// protocol, staged copies), so its plans keep it; and the windows are part
// of what every rank must resolve alike, so an entry that differs only in
// them on one rank is a Mismatch too.
const char* const kProtocolKeys = "one_shot_lamport = 4K..\nfused_lamport = 1M\nfused_ll = never\n";

TEST_F(CommunicatorTuning, ProtocolWindowsLeaveTheHostBackendsProtocolAlone) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  const SharedTuningFile file(
      "protocols.tune",
      "peerplan-tuning 1\n" + entry_text(expected_fingerprint(), kTuned) + kProtocolKeys);
  Config config;
  config.tuning_file = file.path();
  auto comm = create_on_world(config);
  EXPECT_EQ(comm->cutoffs(), kTuned) << "the entry's cutoffs apply with its protocol keys";
  const auto declared = Declaration::all_reduce("small", DataType::f32, TensorLayout{256});
  comm->declare(std::vector<Declaration>{declared});
  const PlanInfo info = comm->plan_for(make_key(declared));
  EXPECT_EQ(info.route, Route::one_shot);
  EXPECT_EQ(info.protocol, Protocol::staged) << "the host backend has one protocol";
  comm->close();
}

TEST_F(CommunicatorTuning, RanksResolvingDifferentProtocolWindowsAreAMismatch) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  const std::string plain = "peerplan-tuning 1\n" + entry_text(expected_fingerprint(), kTuned);
  const SharedTuningFile without("no_protocols.tune", plain);
  const SharedTuningFile with("with_protocols.tune", plain + kProtocolKeys);
  const int last = test_size() - 1;
  Config config;
  config.tuning_file = test_rank() == last ? with.path() : without.path();
  const CreateOutcome o = try_create(config);
  expect_same_failure_everywhere(o, ErrorCode::mismatch, "protocol windows on the last rank only");
  EXPECT_TRUE(names_rank(o.message, last)) << o.message;
  EXPECT_NE(o.message.find("one_shot_lamport=4K.."), std::string::npos)
      << "the message shows the differing windows: " << o.message;
}

// A one-shot grid in an entry: the host backend has no grid to shape, but
// the entry is read, logged with the rest at INFO, and agreed like the
// cutoffs, so ranks that loaded different grids fail create() alike.
const char* const kGridKey = "one_shot_grid = 64K:8 1M:64\n";

TEST_F(CommunicatorTuning, OneShotGridIsLoggedWithTheEntry) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  const SharedTuningFile file(
      "grid.tune", "peerplan-tuning 1\n" + entry_text(expected_fingerprint(), kTuned) + kGridKey);
  Config config;
  config.tuning_file = file.path();
  config.log_level = LogLevel::info;
  testing::internal::CaptureStderr();
  auto comm = create_on_world(config);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(comm->cutoffs(), kTuned) << "the entry's cutoffs apply with its grid";
  if (test_rank() == 0) {
    EXPECT_NE(log.find("the entry's one-shot grid (bytes:blocks): 65536:8 1048576:64;"),
              std::string::npos)
        << log;
  }
  comm->close();
}

TEST_F(CommunicatorTuning, RanksResolvingDifferentOneShotGridsAreAMismatch) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "the ranks span several nodes");
  const std::string plain = "peerplan-tuning 1\n" + entry_text(expected_fingerprint(), kTuned);
  const SharedTuningFile without("no_grid.tune", plain);
  const SharedTuningFile with("with_grid.tune", plain + kGridKey);
  const int last = test_size() - 1;
  Config config;
  config.tuning_file = test_rank() == last ? with.path() : without.path();
  const CreateOutcome o = try_create(config);
  expect_same_failure_everywhere(o, ErrorCode::mismatch, "a one-shot grid on the last rank only");
  EXPECT_TRUE(names_rank(o.message, last)) << o.message;
  EXPECT_NE(o.message.find("one-shot grid 65536:8 1048576:64"), std::string::npos)
      << "the message shows the differing grids: " << o.message;
  EXPECT_NE(o.message.find("one-shot grid default"), std::string::npos) << o.message;
}

}  // namespace
}  // namespace peerplan::comm_test
