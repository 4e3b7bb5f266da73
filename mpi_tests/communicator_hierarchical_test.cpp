// SPDX-License-Identifier: Apache-2.0
// Several nodes on one machine (PEERPLAN_HOST_ID gives each rank the node
// a test picks): the host backend's hierarchical route at 2x2 (ranks
// grouped and interleaved), 3x2, 2x3 and 3x2 interleaved, for every dtype,
// short last shards and shards that cut rows, strided layouts, the fused op,
// long mixed sequences of calls, and a late rank; against a float64
// reference, bit-identical on every rank, the documented order of the sum
// (node sums in node order), and the flat fallback. Nodes that hold
// different numbers of ranks, or one rank each, fall back with the reason
// node_layout.
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "support/communicator_test_support.hpp"
#include "support/fault_test_support.hpp"
#include "support/mpi_test_support.hpp"
#include "support/posed_nodes.hpp"

namespace peerplan::comm_test {
namespace {

using namespace std::chrono_literals;

constexpr float kEps = 1e-6f;

Config fallback_only(Config config) {
  config.disable_p2p = true;
  return config;
}

struct Shape {
  std::string name;
  TensorLayout layout;
};

// Declared rows are whole 16-byte vectors (validation), so counts are
// multiples of 8: a single vector, counts that 3 ranks per node split into
// a short last shard (1000 = 334 + 334 + 332), shards that cut rows, a
// strided slice, and sizes on both sides of the two-shot cutoff.
std::vector<Shape> all_reduce_shapes() {
  return {{"8", TensorLayout{8}},
          {"1000", TensorLayout{1000}},
          {"3x1032", TensorLayout{3, 1032}},
          {"4x1000_padded", strided_layout({4, 1000}, {1024, 1})},
          {"40000", TensorLayout{40000}},
          {"70000", TensorLayout{70000}}};
}

class Hierarchical : public ::testing::TestWithParam<DataType> {};

TEST_P(Hierarchical, AllReduceMatchesReferenceModelAndFallbackOnEveryRank) {
  const DataType dtype = GetParam();
  const auto layouts = even_layouts(test_size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), "no even layout of several nodes at this world size");
  for (const Nodes& nodes : layouts) {
    const PoseAsNodes pose(nodes);
    auto comm = create_on_world(hierarchical_config());
    auto flat = create_on_world(fallback_only(hierarchical_config()));
    ASSERT_TRUE(comm->p2p_enabled()) << describe(nodes) << ": " << comm->p2p_disabled_reason();
    EXPECT_NE(comm->topology_fingerprint().find("nodes=" + std::to_string(nodes.size())),
              std::string::npos)
        << comm->topology_fingerprint();
    std::vector<Declaration> declarations;
    for (const auto& s : all_reduce_shapes())
      declarations.push_back(Declaration::all_reduce(s.name, dtype, s.layout));
    ASSERT_NO_THROW(comm->declare(declarations));

    for (const auto& s : all_reduce_shapes()) {
      const std::size_t bytes = static_cast<std::size_t>(s.layout.numel()) * element_size(dtype);
      const bool admitted = bytes <= hierarchical_config().cutoffs.two_shot_max_bytes;
      for (Inputs inputs : {Inputs::random, Inputs::integers}) {
        const std::string label = describe(nodes) + " " + s.name + " " +
                                  peerplan::to_string(dtype) + " " + comm_test::to_string(inputs);
        const std::uint64_t seed = next_seed();
        const bool in_place = inputs == Inputs::integers;
        const auto got = run_all_reduce(*comm, dtype, s.layout, inputs, in_place, seed);
        EXPECT_EQ(got.result.route, admitted ? Route::hierarchical : Route::fallback) << label;
        expect_all_reduce_correct(got, label);
        const auto reference = run_all_reduce(*flat, dtype, s.layout, inputs, in_place, seed);
        expect_all_reduce_correct(reference, label + " (flat fallback)");
        // Integer sums are exact on both: the same values. Random inputs:
        // both are within the stated rounding of the float64 sum (above).
        if (inputs == Inputs::integers) {
          EXPECT_EQ(got.values, reference.values) << label;
        }
      }
    }
    const Stats stats = comm->stats();
    EXPECT_EQ(stats.fallback_node_layout, 0u);
    EXPECT_GT(stats.p2p_calls, 0u);
    comm->close();
    flat->close();
  }
}

TEST_P(Hierarchical, FusedMatchesReferenceAndFallbackOnEveryRank) {
  const DataType dtype = GetParam();
  const auto layouts = even_layouts(test_size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), "no even layout of several nodes at this world size");
  const std::vector<Shape> shapes = {{"r1_h64", TensorLayout{1, 64}},
                                     {"r3_h1000", TensorLayout{3, 1000}},
                                     {"r5_h264", TensorLayout{5, 264}},
                                     {"r4_h1024_padded", strided_layout({4, 1024}, {1088, 1})}};
  for (const Nodes& nodes : layouts) {
    const PoseAsNodes pose(nodes);
    auto comm = create_on_world(hierarchical_config());
    auto flat = create_on_world(fallback_only(hierarchical_config()));
    std::vector<Buffer> weights;
    std::vector<Declaration> declarations;
    for (const auto& s : shapes)
      weights.push_back(make_weight(dtype, s.layout.last_dim(), next_seed()));
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      declarations.push_back(Declaration::fused_add_rms_norm(
          shapes[k].name, dtype, shapes[k].layout, weights[k].data(), kEps));
    }
    ASSERT_NO_THROW(comm->declare(declarations));
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      for (Inputs inputs : {Inputs::random, Inputs::integers}) {
        const std::string label = describe(nodes) + " fused " + shapes[k].name + " " +
                                  peerplan::to_string(dtype) + " " + comm_test::to_string(inputs);
        const std::uint64_t seed = next_seed();
        const auto got = run_fused(*comm, dtype, shapes[k].layout, weights[k], kEps, inputs,
                                   /*shared_residual=*/true, seed);
        EXPECT_EQ(got.result.route, Route::hierarchical) << label;
        expect_fused_correct(got, label, /*expect_identical_on_every_rank=*/true);
        const auto reference = run_fused(*flat, dtype, shapes[k].layout, weights[k], kEps, inputs,
                                         /*shared_residual=*/true, seed);
        expect_fused_correct(reference, label + " (flat fallback)", true);
        // Exact integer sums: the same reduced values, so the same bits after
        // the same add + RMSNorm.
        if (inputs == Inputs::integers) {
          EXPECT_EQ(got.residual, reference.residual) << label;
          EXPECT_EQ(got.out, reference.out) << label;
        }
      }
    }
    comm->close();
    flat->close();
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Hierarchical,
                         ::testing::Values(DataType::f32, DataType::f16, DataType::bf16),
                         [](const auto& info) {
                           return std::string(peerplan::to_string(info.param));
                         });

// A long sequence mixing the hierarchical route (both operations) with
// undeclared and over-cutoff calls, which go to the fallback in between:
// the two engines' exchanges must stay in step call after call.
TEST(HierarchicalSequence, MixedCallsStayCorrectAndCounted) {
  const auto layouts = even_layouts(test_size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), "no even layout of several nodes at this world size");
  const PoseAsNodes pose(layouts.back());
  auto comm = create_on_world(hierarchical_config());
  const DataType dtype = DataType::bf16;
  const TensorLayout small{2, 336}, large{300000}, undeclared{5, 77}, rows{2, 512};
  const Buffer weight = make_weight(dtype, 512, next_seed());
  comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("small", dtype, small),
      Declaration::all_reduce("large", dtype, large),
      Declaration::fused_add_rms_norm("rows", dtype, rows, weight.data(), kEps)});
  constexpr int kRounds = 12;
  for (int round = 0; round < kRounds; ++round) {
    const std::string label = describe(layouts.back()) + " round " + std::to_string(round);
    const auto a = run_all_reduce(*comm, dtype, small, Inputs::random, round % 2 == 0, next_seed());
    EXPECT_EQ(a.result.route, Route::hierarchical) << label;
    expect_all_reduce_correct(a, label + " small");
    const auto b = run_all_reduce(*comm, dtype, undeclared, Inputs::integers, false, next_seed());
    EXPECT_EQ(b.result.reason, FallbackReason::undeclared) << label;
    expect_all_reduce_correct(b, label + " undeclared");
    const auto f = run_fused(*comm, dtype, rows, weight, kEps, Inputs::random, true, next_seed());
    EXPECT_EQ(f.result.route, Route::hierarchical) << label;
    expect_fused_correct(f, label + " fused", true);
    if (round % 4 == 0) {
      const auto c = run_all_reduce(*comm, dtype, large, Inputs::integers, true, next_seed());
      EXPECT_EQ(c.result.reason, FallbackReason::over_cutoff) << label;
      expect_all_reduce_correct(c, label + " over the cutoff");
    }
  }
  const Stats stats = comm->stats();
  EXPECT_EQ(stats.p2p_calls, 2u * kRounds);
  EXPECT_EQ(stats.fallback_undeclared, static_cast<std::uint64_t>(kRounds));
  EXPECT_EQ(stats.fallback_over_cutoff, static_cast<std::uint64_t>((kRounds + 3) / 4));
  comm->close();
}

// Nodes holding different numbers of ranks, or one each: P2P is off, every
// declared plan falls back with the reason node_layout, results correct.
TEST(HierarchicalLayout, UnfitNodesFallBackWithTheNodeLayoutReason) {
  for (const Nodes& nodes : unfit_layouts(test_size())) {
    const PoseAsNodes pose(nodes);
    auto comm = create_on_world(hierarchical_config());
    EXPECT_FALSE(comm->p2p_enabled()) << describe(nodes);
    EXPECT_NE(comm->p2p_disabled_reason().find("same number of ranks"), std::string::npos)
        << comm->p2p_disabled_reason();
    const TensorLayout layout{3, 104};
    const Buffer weight = make_weight(DataType::f32, 104, next_seed());
    comm->declare(std::vector<Declaration>{
        Declaration::all_reduce("ar", DataType::f32, layout),
        Declaration::fused_add_rms_norm("fused", DataType::f32, layout, weight.data(), kEps)});
    EXPECT_EQ(comm->plan_for(make_all_reduce_key(DataType::f32, layout)).route_reason,
              FallbackReason::node_layout);
    const auto a = run_all_reduce(*comm, DataType::f32, layout, Inputs::random, false, next_seed());
    EXPECT_EQ(a.result.route, Route::fallback) << describe(nodes);
    EXPECT_EQ(a.result.reason, FallbackReason::node_layout) << describe(nodes);
    expect_all_reduce_correct(a, describe(nodes));
    const auto f =
        run_fused(*comm, DataType::f32, layout, weight, kEps, Inputs::random, true, next_seed());
    EXPECT_EQ(f.result.reason, FallbackReason::node_layout) << describe(nodes);
    expect_fused_correct(f, describe(nodes) + " fused", true);
    const Stats stats = comm->stats();
    EXPECT_EQ(stats.fallback_node_layout, 2u);
    EXPECT_EQ(stats.fallback_p2p_disabled, 0u);
    comm->close();
  }
}

// The last rank is late for a hierarchical call: every other rank raises
// Timeout within the bound, naming a rank that did not arrive where it
// waited (the late rank, or the late rank's node peer its counterpart
// waited for between nodes); the late rank does not hang nor return a
// result; a new communicator works.
TEST(HierarchicalTimeout, LateRankIsNamedAndANewCommunicatorWorks) {
  const auto layouts = even_layouts(test_size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), "no even layout of several nodes at this world size");
  const Nodes& nodes = layouts.front();
  const PoseAsNodes pose(nodes);
  constexpr auto kTimeout = 1000ms;
  constexpr auto kSlack = 3000ms;
  Config config = hierarchical_config();
  config.timeout = kTimeout;
  const int late = test_size() - 1;
  const std::vector<int>& late_node = nodes.back();  // the late rank's node
  const TensorLayout layout{2, 100};
  {
    auto comm = create_on_world(config);
    comm->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
    expect_all_reduce_correct(
        run_all_reduce(*comm, DataType::f32, layout, Inputs::integers, false, next_seed()),
        "before the late call");
    Buffer in = Buffer::for_layout(DataType::f32, layout);
    Buffer out = Buffer::for_layout(DataType::f32, layout);
    for (std::int64_t i = 0; i < layout.numel(); ++i) in.set(i, 1.0f);
    if (test_rank() != late) {
      const Attempt a =
          attempt([&] { comm->all_reduce(in.data(), out.data(), DataType::f32, layout); });
      EXPECT_TRUE(a.timed_out) << a.message;
      EXPECT_LT(a.elapsed, kTimeout + kSlack) << a.message;
      bool named = false;
      for (int r : late_node) named = named || names_rank(a.message, r);
      EXPECT_TRUE(named) << "the message must name a rank of the late rank's node: " << a.message;
    } else {
      std::this_thread::sleep_for(kTimeout + 500ms);
      const auto start = std::chrono::steady_clock::now();
      EXPECT_THROW(comm->all_reduce(in.data(), out.data(), DataType::f32, layout), Error)
          << "the peers gave up on this call: the late rank must not return a result";
      EXPECT_LT(std::chrono::steady_clock::now() - start, kTimeout + kSlack);
    }
    MPI_Barrier(test_comm());
  }  // destroyed: local, fine on ranks that are out of step
  MPI_Barrier(test_comm());
  auto fresh = create_on_world(config);
  fresh->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
  for (int call = 0; call < 2; ++call) {
    const auto o =
        run_all_reduce(*fresh, DataType::f32, layout, Inputs::integers, call == 0, next_seed());
    EXPECT_EQ(o.result.route, Route::hierarchical);
    expect_all_reduce_correct(o, "call " + std::to_string(call) + " on a new communicator");
  }
  fresh->close();
}

// Rank 0 makes another call than every other rank. Its node's ranks see
// it as they arrive and raise Mismatch listing the calls; the other nodes
// fail within their timeout. Every rank's communicator is then unusable
// (the exchange between nodes is out of step), close() returns without
// waiting for peers that skip its barrier, and a new communicator works.
TEST(HierarchicalMismatch, RankThatMakesAnotherCallFailsEveryRankAndCloseDoesNotWait) {
  const auto layouts = even_layouts(test_size());
  PEERPLAN_MPI_SKIP_IF(layouts.empty(), "no even layout of several nodes at this world size");
  const Nodes& nodes = layouts.front();
  const PoseAsNodes pose(nodes);
  constexpr auto kTimeout = 1000ms;
  constexpr auto kSlack = 3000ms;
  Config config = hierarchical_config();
  config.timeout = kTimeout;
  const TensorLayout shorter{1024}, longer{2048};
  const std::vector<Declaration> declared{Declaration::all_reduce("short", DataType::f32, shorter),
                                          Declaration::all_reduce("long", DataType::f32, longer)};
  bool on_rank_0s_node = false;
  for (const auto& node : nodes) {
    bool has_0 = false, has_me = false;
    for (int r : node) {
      has_0 = has_0 || r == 0;
      has_me = has_me || r == test_rank();
    }
    on_rank_0s_node = on_rank_0s_node || (has_0 && has_me);
  }
  {
    auto comm = create_on_world(config);
    comm->declare(declared);
    const TensorLayout& mine = test_rank() == 0 ? shorter : longer;
    Buffer in = Buffer::for_layout(DataType::f32, mine);
    Buffer out = Buffer::for_layout(DataType::f32, mine);
    const auto start = std::chrono::steady_clock::now();
    std::string error_type, message;
    try {
      comm->all_reduce(in.data(), out.data(), DataType::f32, mine);
      error_type = "none";
    } catch (const Mismatch& e) {
      error_type = "Mismatch";
      message = e.what();
    } catch (const Timeout& e) {
      error_type = "Timeout";
      message = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, kTimeout + kSlack) << message;
    if (on_rank_0s_node) {
      EXPECT_EQ(error_type, "Mismatch") << message;
      EXPECT_NE(message.find("1024"), std::string::npos) << message;
      EXPECT_NE(message.find("2048"), std::string::npos) << message;
    } else {
      EXPECT_NE(error_type, "none") << "a rank completed a call that another rank made differently";
    }
    EXPECT_THROW(comm->all_reduce(in.data(), out.data(), DataType::f32, mine), InvalidUsage)
        << "the exchange between nodes is out of step: the communicator must refuse calls";
    MPI_Barrier(test_comm());
    const auto closing = std::chrono::steady_clock::now();
    comm->close();
    EXPECT_LT(std::chrono::steady_clock::now() - closing, kTimeout / 2)
        << "close() waited for peers that skip its barrier";
  }
  MPI_Barrier(test_comm());
  auto fresh = create_on_world(config);
  fresh->declare(declared);
  const auto o =
      run_all_reduce(*fresh, DataType::f32, longer, Inputs::integers, false, next_seed());
  EXPECT_EQ(o.result.route, Route::hierarchical);
  expect_all_reduce_correct(o, "on a new communicator");
  fresh->close();
}

}  // namespace
}  // namespace peerplan::comm_test
