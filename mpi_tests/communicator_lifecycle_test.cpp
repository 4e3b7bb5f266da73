// SPDX-License-Identifier: Apache-2.0
// Communicator lifecycle end to end: create (backend, rank/size, the P2P
// agreement, Config::disable_p2p, world-size and configuration checks that
// fail on every rank alike, the CUDA kernel knobs included), close
// (idempotent; every later call is a clear InvalidUsage), and destruction
// without close.
#include <mpi.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

// What create() threw on this rank, if anything.
struct CreateOutcome {
  bool threw = false;
  ErrorCode code = ErrorCode::ok;
  std::string message;
};

CreateOutcome try_create(Config config) {
  CreateOutcome outcome;
  try {
    auto comm = create_on_world(std::move(config));
  } catch (const Error& e) {
    outcome.threw = true;
    outcome.code = e.code();
    outcome.message = e.what();
  }
  return outcome;
}

// The failure must be the same on every rank: same code, same message.
void expect_same_failure_everywhere(const CreateOutcome& o, ErrorCode expected,
                                    const std::string& what) {
  EXPECT_TRUE(o.threw) << what << ": create() succeeded on this rank";
  EXPECT_EQ(o.code, expected) << what << ": " << o.message;
  const auto differing = ranks_differing_from_rank0(fnv1a(o.message) ^ static_cast<int>(o.code));
  EXPECT_TRUE(differing.empty()) << what << ": ranks " << join(differing)
                                 << " failed differently from rank 0; here: " << o.message;
}

TEST(CommunicatorCreate, AutomaticBackendIsHostWhereNoGpuIsVisible) {
  PEERPLAN_MPI_SKIP_IF(std::filesystem::exists("/dev/nvidiactl"),
                       "an NVIDIA driver is present: Backend::automatic may pick cuda here "
                       "(the cuda_* tests cover that backend)");
  auto comm = Communicator::create(MPI_COMM_WORLD);
  EXPECT_EQ(comm->backend(), Backend::host);
}

TEST(CommunicatorCreate, HostBackendWithRankSizeAndAgreedP2P) {
  const bool one_node = all_ranks_on_one_node();
  auto comm = create_on_world();
  EXPECT_EQ(comm->backend(), Backend::host);
  EXPECT_EQ(comm->cuda_device(), -1);
  EXPECT_EQ(comm->rank(), test_rank());
  EXPECT_EQ(comm->size(), test_size());
  EXPECT_FALSE(comm->is_closed());
  // On one node with >= 2 ranks shared memory works, so create's agreement
  // must enable the fast path (on every rank: checked by the listener).
  EXPECT_EQ(comm->p2p_enabled(), one_node && test_size() >= 2);
  EXPECT_EQ(comm->p2p_disabled_reason().empty(), comm->p2p_enabled());
  const auto flags = allgather_value(static_cast<int>(comm->p2p_enabled()));
  for (std::size_t r = 0; r < flags.size(); ++r)
    EXPECT_EQ(flags[r], flags[0]) << "rank " << r << " disagrees on p2p_enabled()";
  comm->close();
}

// A communicator over a sub-communicator sees only its own ranks (halves of
// the world, by parity); a one-rank half has nobody to exchange with, so P2P
// is off there and declared calls fall back, still correct.
TEST(CommunicatorCreate, WorksOnASubCommunicator) {
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(test_comm(), test_rank() % 2, test_rank(), &half);
  int half_rank = 0, half_size = 0;
  MPI_Comm_rank(half, &half_rank);
  MPI_Comm_size(half, &half_size);
  {
    auto comm = Communicator::create(half, host_config());
    EXPECT_EQ(comm->rank(), half_rank);
    EXPECT_EQ(comm->size(), half_size);
    if (all_ranks_on_one_node()) {
      EXPECT_EQ(comm->p2p_enabled(), half_size >= 2);
    }
    const TensorLayout layout{3, 64};
    comm->declare(std::vector<Declaration>{Declaration::all_reduce("x", DataType::f32, layout)});
    const AllReduceOutcome o =
        run_all_reduce(*comm, DataType::f32, layout, Inputs::integers, false, next_seed());
    EXPECT_EQ(o.result.route, half_size >= 2 ? Route::one_shot : Route::fallback);
    if (half_size < 2) {
      EXPECT_EQ(o.result.reason, FallbackReason::p2p_disabled);
    }
    EXPECT_EQ(o.wrong + o.unwritten + o.padding_written, 0) << o.first_problem;
    comm->close();
  }
  MPI_Comm_free(&half);
}

TEST(CommunicatorCreate, DisableP2PSendsDeclaredCallsToTheFallback) {
  Config config;
  config.disable_p2p = true;
  auto comm = create_on_world(config);
  EXPECT_FALSE(comm->p2p_enabled());
  EXPECT_NE(comm->p2p_disabled_reason().find("disable_p2p"), std::string::npos)
      << "the reason must name the setting: " << comm->p2p_disabled_reason();

  const TensorLayout layout{2, 256};
  const Buffer weight = make_weight(DataType::bf16, 256, next_seed());
  comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("ar", DataType::f32, layout),
      Declaration::fused_add_rms_norm("norm", DataType::bf16, layout, weight.data(), 1e-5f)});
  const PlanInfo info = comm->plan_for(make_all_reduce_key(DataType::f32, layout));
  EXPECT_EQ(info.route, Route::fallback);
  EXPECT_EQ(info.route_reason, FallbackReason::p2p_disabled);

  const AllReduceOutcome ar =
      run_all_reduce(*comm, DataType::f32, layout, Inputs::random, false, next_seed());
  EXPECT_EQ(ar.result.route, Route::fallback);
  EXPECT_EQ(ar.result.reason, FallbackReason::p2p_disabled);
  expect_all_reduce_correct(ar, "declared all-reduce with P2P disabled");

  const FusedOutcome fused =
      run_fused(*comm, DataType::bf16, layout, weight, 1e-5f, Inputs::random, true, next_seed());
  EXPECT_EQ(fused.result.route, Route::fallback);
  EXPECT_EQ(fused.result.reason, FallbackReason::p2p_disabled);
  expect_fused_correct(fused, "declared fused op with P2P disabled", true);

  // An undeclared key is still reported as undeclared: the reason tells
  // the user what to change.
  const AllReduceOutcome undeclared = run_all_reduce(*comm, DataType::f32, TensorLayout{5, 64},
                                                     Inputs::integers, true, next_seed());
  EXPECT_EQ(undeclared.result.reason, FallbackReason::undeclared);
  expect_all_reduce_correct(undeclared, "undeclared all-reduce with P2P disabled");
  comm->close();
}

TEST(CommunicatorCreate, DisableP2PFromTheEnvironment) {
  ScopedEnv env("PEERPLAN_DISABLE_P2P", "1");
  auto comm = create_on_world();
  EXPECT_FALSE(comm->p2p_enabled());
  EXPECT_TRUE(comm->config().disable_p2p) << "config() must show the applied override";
  comm->close();
}

TEST(CommunicatorCreate, WorldSizeMismatchIsInvalidArgumentOnEveryRank) {
  const int n = test_size();
  {
    Config config;
    config.expected_world_size = n + 1;
    const CreateOutcome o = try_create(config);
    expect_same_failure_everywhere(o, ErrorCode::invalid_argument, "expected_world_size");
    EXPECT_NE(o.message.find(std::to_string(n + 1)), std::string::npos) << o.message;
    EXPECT_NE(o.message.find(std::to_string(n)), std::string::npos) << o.message;
  }
  {
    const std::string value = std::to_string(n + 2);
    ScopedEnv env("PEERPLAN_WORLD_SIZE", value.c_str());
    const CreateOutcome o = try_create({});
    expect_same_failure_everywhere(o, ErrorCode::invalid_argument, "PEERPLAN_WORLD_SIZE");
    EXPECT_NE(o.message.find(value), std::string::npos) << o.message;
  }
  // The right size passes, and nothing is left hanging by the failures.
  Config config;
  config.expected_world_size = n;
  auto comm = create_on_world(config);
  EXPECT_EQ(comm->size(), n);
  comm->close();
}

// The INFO line saying where a rank runs shows CPU and NUMA node *sets*
// in braces: "cpus 0, NUMA nodes 0" read as counts of zero.
TEST(CommunicatorCreate, LocalityLineShowsSetsNotCounts) {
  Config config;
  config.log_level = LogLevel::info;
  config.topology_file = std::string(PEERPLAN_TEST_FIXTURES) + "/topology/8gpu-two-sockets.xml";
  testing::internal::CaptureStderr();
  create_on_world(config)->close();
  std::string log = testing::internal::GetCapturedStderr();
  const std::string from_file = "topology " + config.topology_file +
                                ": the file's machine has cpus {0-63}, NUMA node(s) {0,1}, "
                                "8 GPU(s) visible\n";
  EXPECT_NE(log.find(from_file), std::string::npos) << log;

  config.topology_file.clear();  // the live machine: this process's binding
  testing::internal::CaptureStderr();
  create_on_world(config)->close();
  log = testing::internal::GetCapturedStderr();
  const std::regex live(R"(topology live machine: this process is bound to cpus \{[0-9,-]+\}, )"
                        R"(NUMA node\(s\) \{[0-9,]*\}, [0-9]+ GPU\(s\) visible\n)");
  EXPECT_TRUE(std::regex_search(log, live)) << log;
}

TEST(CommunicatorCreate, DifferentConfigsAreMismatchOnEveryRank) {
  const int last = test_size() - 1;
  {
    Config config;
    if (test_rank() == last) config.cutoffs.one_shot_max_bytes = 1234;
    const CreateOutcome o = try_create(config);
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "cutoff differing on the last rank");
    EXPECT_TRUE(names_rank(o.message, last)) << o.message;
    // The other ranks' value is kAutoCutoff, shown as the word users set.
    EXPECT_NE(o.message.find("cutoffs.one_shot_max_bytes (PEERPLAN_ONE_SHOT_MAX_BYTES) is auto on "
                             "rank 0 but 1234 on rank " +
                             std::to_string(last)),
              std::string::npos)
        << o.message;
  }
  {
    Config config;
    if (test_rank() == 0) config.timeout = std::chrono::milliseconds(12345);
    const CreateOutcome o = try_create(config);
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "timeout differing on rank 0");
  }
  {
    // The usual way this happens: an environment variable set on one node only.
    ScopedEnv env("PEERPLAN_TWO_SHOT_MAX_BYTES", test_rank() == last ? "64K" : nullptr);
    const CreateOutcome o = try_create({});
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "env var set on the last rank only");
    EXPECT_TRUE(names_rank(o.message, last)) << o.message;
  }
  auto comm = create_on_world();  // agreeing configs still work afterwards
  comm->close();
}

// The CUDA kernel knobs (Config::kernels) are checked with the rest of the
// config, in backend-independent code, so this runs on the host backend.
TEST(CommunicatorCreate, KernelChoicesThatMustAgreeFailCreateOnEveryRank) {
  const int last = test_size() - 1;
  const auto expect_names = [](const CreateOutcome& o, const char* field, const char* variable) {
    EXPECT_NE(o.message.find(field), std::string::npos) << o.message;
    EXPECT_NE(o.message.find(variable), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("set the same value on every rank"), std::string::npos) << o.message;
  };
  {
    Config config;
    if (test_rank() == last) config.kernels.fused_lamport = Window::never();
    const CreateOutcome o = try_create(config);
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "fused protocol on the last rank");
    expect_names(o, "kernels.fused_lamport", "PEERPLAN_FUSED_LAMPORT");
    EXPECT_NE(o.message.find("is auto on rank 0 but never on rank " + std::to_string(last)),
              std::string::npos)
        << o.message;
  }
  {
    ScopedEnv env("PEERPLAN_ONE_SHOT_LAMPORT", test_rank() == 0 ? "all" : "never");
    const CreateOutcome o = try_create({});
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "one-shot protocol on rank 0");
    expect_names(o, "kernels.one_shot_lamport", "PEERPLAN_ONE_SHOT_LAMPORT");
    EXPECT_TRUE(names_rank(o.message, last)) << o.message;
  }
  {
    // Set on one node only: the usual way it happens.
    ScopedEnv env("PEERPLAN_FUSED_LL", test_rank() == last ? "64K" : nullptr);
    const CreateOutcome o = try_create({});
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "fused LL limit on the last rank");
    expect_names(o, "kernels.fused_ll", "PEERPLAN_FUSED_LL");
    EXPECT_TRUE(names_rank(o.message, last)) << o.message;
  }
  {
    // The two-shot's copy engines: both ranks must stage, or both use dma.
    ScopedEnv env("PEERPLAN_TWO_SHOT_DMA", test_rank() == last ? "all" : "16M..");
    const CreateOutcome o = try_create({});
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "two-shot protocol on the last rank");
    expect_names(o, "kernels.two_shot_dma", "PEERPLAN_TWO_SHOT_DMA");
    EXPECT_NE(o.message.find("is 16M.. on rank 0 but all on rank " + std::to_string(last)),
              std::string::npos)
        << o.message;
  }
  {
    // The two-shot's Lamport window: a rank that runs Lamport writes into a
    // region its peer, running the staged kernel, never reads.
    ScopedEnv env("PEERPLAN_TWO_SHOT_LAMPORT", test_rank() == last ? "all" : "1M");
    const CreateOutcome o = try_create({});
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "two-shot Lamport on the last rank");
    expect_names(o, "kernels.two_shot_lamport", "PEERPLAN_TWO_SHOT_LAMPORT");
    EXPECT_NE(o.message.find("is 1M on rank 0 but all on rank " + std::to_string(last)),
              std::string::npos)
        << o.message;
  }
  {
    // Two fields at once: both named.
    Config config;
    if (test_rank() == last) {
      config.kernels.fused_ll = Window::never();
      config.kernels.one_shot_lamport = Window::above_bytes(4096);
    }
    const CreateOutcome o = try_create(config);
    expect_same_failure_everywhere(o, ErrorCode::mismatch, "two knobs on the last rank");
    expect_names(o, "kernels.fused_ll", "PEERPLAN_FUSED_LL");
    expect_names(o, "kernels.one_shot_lamport", "PEERPLAN_ONE_SHOT_LAMPORT");
  }
  // Local launch shapes may differ between ranks.
  Config config;
  config.kernels.fused_lamport = Window::above_bytes(1u << 20);  // the same everywhere
  if (test_rank() == last) {
    config.kernels.one_shot_max_blocks = 64;
    config.kernels.row_clusters = RowClusters::off;
  }
  auto comm = create_on_world(config);
  EXPECT_EQ(comm->config().kernels.one_shot_max_blocks, test_rank() == last ? 64 : 0);
  EXPECT_EQ(comm->config().kernels.fused_lamport, Window::above_bytes(std::size_t{1} << 20));
  comm->close();
}

TEST(CommunicatorCreate, OutOfRangeKernelChoiceIsInvalidArgumentOnEveryRank) {
  const int last = test_size() - 1;
  Config config;
  if (test_rank() == last) config.kernels.one_shot_max_blocks = kOneShotMaxBlocksLimit + 1;
  const CreateOutcome o = try_create(config);
  expect_same_failure_everywhere(o, ErrorCode::invalid_argument, "one_shot_max_blocks 1025");
  EXPECT_NE(o.message.find("Config::kernels.one_shot_max_blocks is 1025"), std::string::npos)
      << o.message;
  EXPECT_TRUE(names_rank(o.message, last)) << o.message;
  auto comm = create_on_world();  // nothing left hanging
  comm->close();
}

TEST(CommunicatorClose, IsIdempotentAndEveryLaterCallIsInvalidUsage) {
  auto comm = create_on_world();
  const TensorLayout layout{2, 64};
  const Buffer weight = make_weight(DataType::f32, 64, next_seed());
  comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("ar", DataType::f32, layout),
      Declaration::fused_add_rms_norm("norm", DataType::f32, layout, weight.data(), 1e-6f)});
  const PlanKey ar_key = make_all_reduce_key(DataType::f32, layout);
  const PlanKey fused_key = make_fused_key(DataType::f32, layout, weight.data(), 1e-6f);
  ASSERT_TRUE(comm->has_plan_for(ar_key));
  expect_all_reduce_correct(
      run_all_reduce(*comm, DataType::f32, layout, Inputs::integers, false, next_seed()),
      "before close");

  comm->close();
  EXPECT_TRUE(comm->is_closed());
  EXPECT_NO_THROW(comm->close()) << "close() must be idempotent";
  EXPECT_TRUE(comm->is_closed());

  EXPECT_FALSE(comm->has_plan_for(ar_key)) << "close() removes every plan";
  EXPECT_FALSE(comm->has_plan_for(fused_key));
  Buffer data = Buffer::for_layout(DataType::f32, layout);
  Buffer residual = Buffer::for_layout(DataType::f32, layout);
  const std::vector<Declaration> again{Declaration::all_reduce("ar", DataType::f32, layout)};
  EXPECT_THROW(comm->declare(again), InvalidUsage);
  EXPECT_THROW(comm->plan_for(ar_key), InvalidUsage);
  EXPECT_THROW(comm->all_reduce(data.data(), data.data(), DataType::f32, layout), InvalidUsage);
  EXPECT_THROW(comm->fused_add_rms_norm(data.data(), residual.data(), weight.data(), 1e-6f,
                                        DataType::f32, layout),
               InvalidUsage);
  // Undeclared keys too: a closed communicator has no fallback either.
  EXPECT_THROW(comm->all_reduce(data.data(), data.data(), DataType::f32, TensorLayout{4, 4}),
               InvalidUsage);
  try {
    comm->all_reduce(data.data(), data.data(), DataType::f32, layout);
  } catch (const InvalidUsage& e) {
    EXPECT_NE(std::string(e.what()).find("closed"), std::string::npos)
        << "the message should say the communicator is closed: " << e.what();
  }
  EXPECT_EQ(comm->rank(), test_rank());
  EXPECT_EQ(comm->size(), test_size());
}

// Destroying a communicator without close() (e.g. while an exception
// unwinds) must not hang or leave anything that breaks the next one.
TEST(CommunicatorClose, DestroyWithoutCloseThenCreateAgain) {
  const TensorLayout layout{2, 64};
  for (int round = 0; round < 2; ++round) {
    auto comm = create_on_world();
    comm->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
    expect_all_reduce_correct(
        run_all_reduce(*comm, DataType::f32, layout, Inputs::integers, true, next_seed()),
        "round " + std::to_string(round));
    // Destroyed here without close(): each rank releases only its own share.
  }
}

}  // namespace
}  // namespace peerplan::comm_test
