// SPDX-License-Identifier: Apache-2.0
// stats() after a known sequence of calls: per-plan hits and fallbacks in
// declaration order, P2P calls and fallbacks by reason (undeclared, over
// cutoff, P2P disabled), reset_stats(), and the protocol and launch each
// plan runs as every view names them.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/plan_key.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

constexpr float kEps = 1e-6f;

struct Expected {
  std::string name;
  Operation operation;
  Route route;
  FallbackReason reason;
  std::uint64_t hits;
  std::uint64_t fallbacks;
};

void expect_plans(const Stats& stats, const std::vector<Expected>& expected,
                  const std::string& when) {
  ASSERT_EQ(stats.plans.size(), expected.size()) << when;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const PlanStats& p = stats.plans[i];
    const Expected& e = expected[i];
    EXPECT_EQ(p.name, e.name) << when << ": plans are listed in declaration order";
    EXPECT_EQ(p.operation, e.operation) << when << ": " << e.name;
    EXPECT_EQ(p.route, e.route) << when << ": " << e.name;
    EXPECT_EQ(p.route_reason, e.reason) << when << ": " << e.name;
    EXPECT_EQ(p.hits, e.hits) << when << ": hits of " << e.name;
    EXPECT_EQ(p.fallbacks, e.fallbacks) << when << ": fallbacks of " << e.name;
  }
}

TEST(CommunicatorStats, CountAKnownSequenceOfCalls) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  Config config;
  config.cutoffs = RouteCutoffs{4096, 32768, 16384};
  auto comm = create_on_world(config);
  ASSERT_TRUE(comm->p2p_enabled());

  const TensorLayout one{2, 64};         // f32 512 B: one-shot
  const TensorLayout two{2, 2048};       // f32 16 KiB: two-shot
  const TensorLayout big{9, 1024};       // f32 36 KiB: over every cutoff
  const TensorLayout norm{2, 1024};      // bf16 4 KiB: fused one-shot
  const TensorLayout big_norm{8, 1024};  // f32 32 KiB: over the fused cutoff
  const Buffer weight = make_weight(DataType::bf16, 1024, next_seed());
  const Buffer weight_f32 = make_weight(DataType::f32, 1024, next_seed());
  const Buffer other_weight = make_weight(DataType::bf16, 1024, next_seed());
  comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("one", DataType::f32, one),
      Declaration::all_reduce("two", DataType::f32, two),
      Declaration::all_reduce("big", DataType::f32, big),
      Declaration::fused_add_rms_norm("norm", DataType::bf16, norm, weight.data(), kEps),
      Declaration::fused_add_rms_norm("big_norm", DataType::f32, big_norm, weight_f32.data(),
                                      kEps)});

  const auto all_reduce = [&](DataType dtype, const TensorLayout& layout, Route route,
                              FallbackReason reason) {
    const AllReduceOutcome o =
        run_all_reduce(*comm, dtype, layout, Inputs::integers, false, next_seed());
    EXPECT_EQ(o.result.route, route) << layout.to_string();
    EXPECT_EQ(o.result.reason, reason) << layout.to_string();
    EXPECT_EQ(o.wrong + o.unwritten, 0) << layout.to_string() << ": " << o.first_problem;
  };
  const auto fused = [&](DataType dtype, const TensorLayout& layout, const Buffer& w, Route route,
                         FallbackReason reason) {
    const FusedOutcome o =
        run_fused(*comm, dtype, layout, w, kEps, Inputs::integers, true, next_seed());
    EXPECT_EQ(o.result.route, route) << layout.to_string();
    EXPECT_EQ(o.result.reason, reason) << layout.to_string();
    EXPECT_EQ(o.wrong_out + o.wrong_residual, 0) << layout.to_string() << ": " << o.first_problem;
  };
  const auto none = FallbackReason::none;
  for (int i = 0; i < 3; ++i) all_reduce(DataType::f32, one, Route::one_shot, none);
  for (int i = 0; i < 2; ++i) all_reduce(DataType::f32, two, Route::two_shot, none);
  all_reduce(DataType::f32, big, Route::fallback, FallbackReason::over_cutoff);
  for (int i = 0; i < 2; ++i) fused(DataType::bf16, norm, weight, Route::fused_one_shot, none);
  fused(DataType::f32, big_norm, weight_f32, Route::fallback, FallbackReason::over_cutoff);
  // Undeclared: another shape, another dtype, another weight.
  all_reduce(DataType::f32, TensorLayout{3, 64}, Route::fallback, FallbackReason::undeclared);
  all_reduce(DataType::bf16, one, Route::fallback, FallbackReason::undeclared);
  fused(DataType::bf16, norm, other_weight, Route::fallback, FallbackReason::undeclared);

  const auto ar = Operation::all_reduce;
  const auto fo = Operation::fused_add_rms_norm;
  const auto over = FallbackReason::over_cutoff;
  Stats stats = comm->stats();
  expect_plans(stats,
               {{"one", ar, Route::one_shot, none, 3, 0},
                {"two", ar, Route::two_shot, none, 2, 0},
                {"big", ar, Route::fallback, over, 0, 1},
                {"norm", fo, Route::fused_one_shot, none, 2, 0},
                {"big_norm", fo, Route::fallback, over, 0, 1}},
               "after the sequence");
  EXPECT_EQ(stats.p2p_calls, 7u);
  EXPECT_EQ(stats.fallback_over_cutoff, 2u);
  EXPECT_EQ(stats.fallback_undeclared, 3u);
  EXPECT_EQ(stats.fallback_p2p_disabled, 0u);

  comm->reset_stats();
  stats = comm->stats();
  expect_plans(stats,
               {{"one", ar, Route::one_shot, none, 0, 0},
                {"two", ar, Route::two_shot, none, 0, 0},
                {"big", ar, Route::fallback, over, 0, 0},
                {"norm", fo, Route::fused_one_shot, none, 0, 0},
                {"big_norm", fo, Route::fallback, over, 0, 0}},
               "after reset_stats");
  EXPECT_EQ(stats.p2p_calls, 0u);
  EXPECT_EQ(stats.fallback_over_cutoff, 0u);
  EXPECT_EQ(stats.fallback_undeclared, 0u);

  // Counting resumes from zero.
  all_reduce(DataType::f32, two, Route::two_shot, none);
  all_reduce(DataType::f32, TensorLayout{3, 64}, Route::fallback, FallbackReason::undeclared);
  stats = comm->stats();
  EXPECT_EQ(stats.plans[1].hits, 1u);
  EXPECT_EQ(stats.plans[0].hits, 0u);
  EXPECT_EQ(stats.p2p_calls, 1u);
  EXPECT_EQ(stats.fallback_undeclared, 1u);

  // Identical on every rank: the ranks made the same calls.
  std::uint64_t digest = stats.p2p_calls * 31 + stats.fallback_undeclared;
  for (const auto& p : stats.plans) digest = digest * 1000003 + p.hits * 17 + p.fallbacks;
  EXPECT_TRUE(ranks_differing_from_rank0(digest).empty());
  comm->close();
}

// The protocol a plan runs and the launch its transport prepared are decided
// once, at declare, and every view names the same: the call's CallResult,
// plan_for and stats(). P2P plans have a protocol and a launch text, the
// fallback neither; on the host backend every route is staged.
TEST(CommunicatorStats, EveryViewNamesTheSameProtocolAndLaunch) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  Config config;
  config.cutoffs = RouteCutoffs{4096, 32768, 16384};
  auto comm = create_on_world(config);
  ASSERT_TRUE(comm->p2p_enabled());
  const TensorLayout one{2, 64}, two{2, 2048}, big{9, 1024}, norm{2, 1024};
  const Buffer weight = make_weight(DataType::bf16, 1024, next_seed());
  comm->declare(std::vector<Declaration>{
      Declaration::all_reduce("one", DataType::f32, one),
      Declaration::all_reduce("two", DataType::f32, two),
      Declaration::all_reduce("big", DataType::f32, big),
      Declaration::fused_add_rms_norm("norm", DataType::bf16, norm, weight.data(), kEps)});
  std::vector<CallResult> results;
  for (const TensorLayout* layout : {&one, &two, &big}) {
    const AllReduceOutcome o =
        run_all_reduce(*comm, DataType::f32, *layout, Inputs::integers, false, next_seed());
    EXPECT_EQ(o.wrong + o.unwritten, 0) << o.first_problem;
    results.push_back(o.result);
  }
  const FusedOutcome f =
      run_fused(*comm, DataType::bf16, norm, weight, kEps, Inputs::integers, true, next_seed());
  EXPECT_EQ(f.wrong_out + f.wrong_residual, 0) << f.first_problem;
  results.push_back(f.result);

  const Stats stats = comm->stats();
  ASSERT_EQ(stats.plans.size(), 4u);
  const PlanKey keys[] = {make_all_reduce_key(DataType::f32, one),
                          make_all_reduce_key(DataType::f32, two),
                          make_all_reduce_key(DataType::f32, big),
                          make_fused_key(DataType::bf16, norm, weight.data(), kEps)};
  for (std::size_t i = 0; i < 4; ++i) {
    const PlanStats& p = stats.plans[i];
    const PlanInfo info = comm->plan_for(keys[i]);
    EXPECT_EQ(results[i].route, p.route) << p.name;
    EXPECT_EQ(results[i].protocol, p.protocol) << p.name;
    EXPECT_EQ(info.protocol, p.protocol) << p.name;
    EXPECT_EQ(info.launch, p.launch) << p.name;
    if (p.route == Route::fallback) {
      EXPECT_EQ(p.protocol, Protocol::none) << p.name;
      EXPECT_EQ(p.launch, "") << p.name;
    } else {
      EXPECT_NE(p.protocol, Protocol::none) << p.name;
      EXPECT_NE(p.launch.find(to_string(i < 3 ? DataType::f32 : DataType::bf16)), std::string::npos)
          << p.name << ": the launch names its dtype: " << p.launch;
    }
    if (comm->backend() == Backend::host && p.route != Route::fallback) {
      EXPECT_EQ(p.protocol, Protocol::staged) << p.name;
    }
  }
  EXPECT_EQ(stats.plans[0].route, Route::one_shot);
  EXPECT_EQ(stats.plans[1].route, Route::two_shot);
  EXPECT_EQ(stats.plans[2].route, Route::fallback);
  EXPECT_EQ(stats.plans[3].route, Route::fused_one_shot);
  // An undeclared call has no protocol either.
  const AllReduceOutcome undeclared = run_all_reduce(*comm, DataType::f32, TensorLayout{3, 64},
                                                     Inputs::integers, true, next_seed());
  EXPECT_EQ(undeclared.result.route, Route::fallback);
  EXPECT_EQ(undeclared.result.protocol, Protocol::none);
  comm->close();
}

TEST(CommunicatorStats, CountFallbacksWithP2PDisabled) {
  Config config;
  config.disable_p2p = true;
  auto comm = create_on_world(config);
  const TensorLayout layout{2, 64};
  comm->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
  for (int i = 0; i < 2; ++i) {
    const AllReduceOutcome o =
        run_all_reduce(*comm, DataType::f32, layout, Inputs::integers, true, next_seed());
    EXPECT_EQ(o.result.reason, FallbackReason::p2p_disabled);
    EXPECT_EQ(o.wrong + o.unwritten, 0) << o.first_problem;
  }
  run_all_reduce(*comm, DataType::f32, TensorLayout{4, 64}, Inputs::integers, true, next_seed());
  const Stats stats = comm->stats();
  expect_plans(stats,
               {{"ar", Operation::all_reduce, Route::fallback, FallbackReason::p2p_disabled, 0, 2}},
               "P2P disabled");
  EXPECT_EQ(stats.p2p_calls, 0u);
  EXPECT_EQ(stats.fallback_p2p_disabled, 2u);
  EXPECT_EQ(stats.fallback_undeclared, 1u);
  EXPECT_EQ(stats.fallback_over_cutoff, 0u);
  comm->close();
}

// A monitoring thread may read the statistics after the communicator was
// closed: stats() keeps returning the counts as they stood at close (per
// plan too), and reset_stats() still zeroes them; neither throws.
TEST(CommunicatorStats, ReadableAfterClose) {
  auto comm = create_on_world();
  const TensorLayout layout{2, 64};
  comm->declare(std::vector<Declaration>{Declaration::all_reduce("ar", DataType::f32, layout)});
  run_all_reduce(*comm, DataType::f32, layout, Inputs::integers, true, next_seed());
  run_all_reduce(*comm, DataType::f32, TensorLayout{3, 64}, Inputs::integers, true, next_seed());
  const Stats open = comm->stats();
  comm->close();

  Stats closed;
  ASSERT_NO_THROW(closed = comm->stats());
  ASSERT_EQ(closed.plans.size(), 1u) << "the per-plan counts of the last declared set are kept";
  EXPECT_EQ(closed.plans[0].name, "ar");
  EXPECT_EQ(closed.plans[0].route, open.plans[0].route);
  EXPECT_EQ(closed.plans[0].hits, open.plans[0].hits);
  EXPECT_EQ(closed.plans[0].fallbacks, open.plans[0].fallbacks);
  EXPECT_EQ(closed.plans[0].hits + closed.plans[0].fallbacks, 1u);
  EXPECT_EQ(closed.p2p_calls, open.p2p_calls);
  EXPECT_EQ(closed.fallback_undeclared, 1u);
  EXPECT_EQ(closed.fallback_p2p_disabled, open.fallback_p2p_disabled);

  ASSERT_NO_THROW(comm->reset_stats());
  closed = comm->stats();
  ASSERT_EQ(closed.plans.size(), 1u);
  EXPECT_EQ(closed.plans[0].hits + closed.plans[0].fallbacks, 0u);
  EXPECT_EQ(closed.fallback_undeclared, 0u);
  EXPECT_EQ(closed.p2p_calls, 0u);
}

// A monitoring thread polls stats() and reset_stats() while the owner
// declares set after set and closes: every snapshot pairs one set's names
// with that set's plans (declare replaced the plans and the index's set
// while stats() paired them, and freed the old ones under it).
TEST(CommunicatorStats, AMonitoringThreadReadsWhileTheOwnerDeclaresAndCloses) {
  auto comm = create_on_world();
  constexpr int kSets = 40;
  std::atomic<bool> done{false};
  std::atomic<int> snapshots{0};
  std::string problem;
  std::thread monitor([&] {
    while (!done.load()) {
      const Stats stats = comm->stats();
      if (stats.plans.empty()) continue;
      // Set k holds k % 3 + 1 plans named "s<k> p<i>".
      const std::string& first = stats.plans[0].name;
      const std::string set = first.substr(0, first.find(' '));
      const int k = std::stoi(set.substr(1));
      bool consistent = stats.plans.size() == static_cast<std::size_t>(k % 3 + 1);
      for (std::size_t i = 0; i < stats.plans.size(); ++i) {
        consistent = consistent && stats.plans[i].name == set + " p" + std::to_string(i);
      }
      if (!consistent && problem.empty()) problem = "a snapshot mixed sets, first plan " + first;
      if (snapshots.fetch_add(1) % 7 == 0) comm->reset_stats();
    }
  });
  for (int k = 0; k < kSets; ++k) {
    std::vector<Declaration> set;
    for (int i = 0; i <= k % 3; ++i) {
      set.push_back(Declaration::all_reduce("s" + std::to_string(k) + " p" + std::to_string(i),
                                            DataType::f32, TensorLayout{i + 1, 64 * (k + 1)}));
    }
    comm->declare(set);
  }
  comm->close();
  for (int i = 0; i < 1000; ++i) comm->stats();  // after close, beside the monitor
  done.store(true);
  monitor.join();
  EXPECT_EQ(problem, "");
  EXPECT_GT(snapshots.load(), 0);
  const Stats closed = comm->stats();
  ASSERT_EQ(closed.plans.size(), static_cast<std::size_t>((kSets - 1) % 3 + 1));
  EXPECT_EQ(closed.plans[0].name, "s" + std::to_string(kSets - 1) + " p0");
}

// Config::undeclared_keys_tracked: the most frequent undeclared keys, in a
// table of that fixed size (A x5, B x3, C x2, then D once: D takes C's slot
// with C's count as overcount; a call with no elements is not listed);
// declared calls and the index are untouched.
TEST(CommunicatorStats, TracksTheMostFrequentUndeclaredKeysInAFixedTable) {
  Config config;
  config.undeclared_keys_tracked = 3;
  auto comm = create_on_world(config);
  const TensorLayout declared{2, 64};
  comm->declare(
      std::vector<Declaration>{Declaration::all_reduce("declared", DataType::f32, declared)});
  const TensorLayout a{5, 7}, b{3, 7}, c{2, 7}, d{1, 7};
  const auto call = [&](const TensorLayout& layout, int times) {
    for (int i = 0; i < times; ++i) {
      expect_all_reduce_correct(
          run_all_reduce(*comm, DataType::f32, layout, Inputs::integers, true, next_seed()),
          layout.to_string());
    }
  };
  call(declared, 2);
  call(a, 5);
  call(b, 3);
  call(c, 2);
  call(d, 1);
  // No elements: counted as undeclared, not listed (no such shape can be declared).
  comm->all_reduce(nullptr, nullptr, DataType::f32, TensorLayout{0, 7});
  const Stats stats = comm->stats();
  ASSERT_EQ(stats.undeclared.size(), 3u) << to_string(stats);
  const auto key = [](const TensorLayout& layout) {
    return make_all_reduce_key(DataType::f32, layout).to_string();
  };
  EXPECT_EQ(stats.undeclared[0].key, key(a));
  EXPECT_EQ(stats.undeclared[0].calls, 5u);
  EXPECT_EQ(stats.undeclared[0].overcount, 0u);
  EXPECT_EQ(stats.undeclared[1].key, key(b));
  EXPECT_EQ(stats.undeclared[1].calls, 3u);
  EXPECT_EQ(stats.undeclared[2].key, key(d));
  EXPECT_EQ(stats.undeclared[2].calls, 3u);
  EXPECT_EQ(stats.undeclared[2].overcount, 2u);
  EXPECT_EQ(stats.fallback_undeclared, 12u);
  EXPECT_FALSE(comm->has_plan_for(make_all_reduce_key(DataType::f32, a)))
      << "a miss inserts nothing into the index";
  EXPECT_NE(to_string(stats).find(key(a)), std::string::npos) << to_string(stats);
  comm->reset_stats();
  EXPECT_TRUE(comm->stats().undeclared.empty());
  comm->close();
  EXPECT_TRUE(comm->stats().undeclared.empty()) << "closed stats keep the reset table";

  auto untracked = create_on_world();  // the default: nothing tracked
  expect_all_reduce_correct(
      run_all_reduce(*untracked, DataType::f32, a, Inputs::integers, true, next_seed()),
      "untracked");
  EXPECT_EQ(untracked->stats().fallback_undeclared, 1u);
  EXPECT_TRUE(untracked->stats().undeclared.empty());
  untracked->close();
}

}  // namespace
}  // namespace peerplan::comm_test
