// SPDX-License-Identifier: Apache-2.0
// declare() end to end: cross-rank agreement (a set that differs on some
// ranks fails on EVERY rank with a Mismatch naming the first differing
// declaration and the differing ranks; an invalid declaration on one rank
// is an InvalidArgument on every rank; after a failure the previous set
// stays in force), and the lookup contract through the communicator
// (docs/design.md, The lookup contract): probe and strict lookup, first
// declared wins, refresh replaces the whole set.
#include <gtest/gtest.h>

#include <cstdio>

#include <string>
#include <utility>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

constexpr float kEps = 1e-6f;

// A small transformer-like set: two all-reduces (one-shot with the default
// cutoffs) and a fused op. The weight lives as long as the fixture.
// A pointer as the WARN prints it.
std::string address_text(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(pointer)));
  return text;
}

class DeclareTest : public ::testing::Test {
 protected:
  void SetUp() override { comm_ = create_on_world(); }
  void TearDown() override {
    if (comm_) comm_->close();
  }

  std::vector<Declaration> base_set() const {
    return {Declaration::all_reduce("attn_out", DataType::bf16, TensorLayout{2, 512}),
            Declaration::all_reduce("mlp_out", DataType::bf16, TensorLayout{4, 512}),
            Declaration::fused_add_rms_norm("post_norm", DataType::bf16, TensorLayout{2, 512},
                                            weight_.data(), kEps)};
  }

  // What declare() threw on this rank.
  struct Failure {
    bool threw = false;
    ErrorCode code = ErrorCode::ok;
    std::string message;
  };
  Failure try_declare(const std::vector<Declaration>& set) {
    Failure f;
    try {
      comm_->declare(set);
    } catch (const Error& e) {
      f = {true, e.code(), e.what()};
    }
    return f;
  }

  // Same code and same message on every rank.
  static void expect_failed_everywhere(const Failure& f, ErrorCode code, const std::string& what) {
    EXPECT_TRUE(f.threw) << what << ": declare() succeeded on this rank";
    EXPECT_EQ(f.code, code) << what << ": " << f.message;
    const auto differing = ranks_differing_from_rank0(fnv1a(f.message));
    EXPECT_TRUE(differing.empty()) << what << ": the message differs from rank 0's on ranks "
                                   << join(differing) << "; here: " << f.message;
  }

  // The base set is still declared and its plans still run on P2P.
  void expect_base_set_in_force(const std::string& what) {
    const PlanKey attn = make_all_reduce_key(DataType::bf16, TensorLayout{2, 512});
    EXPECT_TRUE(comm_->has_plan_for(attn)) << what;
    EXPECT_TRUE(comm_->has_plan_for(
        make_fused_key(DataType::bf16, TensorLayout{2, 512}, weight_.data(), kEps)))
        << what;
    EXPECT_EQ(comm_->stats().plans.size(), 3u) << what;
    if (comm_->has_plan_for(attn)) {
      EXPECT_EQ(comm_->plan_for(attn).declaration->name, "attn_out");
    }
    const AllReduceOutcome o = run_all_reduce(*comm_, DataType::bf16, TensorLayout{4, 512},
                                              Inputs::integers, false, next_seed());
    EXPECT_EQ(o.result.route, comm_->p2p_enabled() ? Route::one_shot : Route::fallback) << what;
    expect_all_reduce_correct(o, what + ": a call of the previous set");
  }

  std::unique_ptr<Communicator> comm_;
  Buffer weight_ = make_weight(DataType::bf16, 512, 1234);
};

TEST_F(DeclareTest, ShapeDifferingOnOneRankIsMismatchEverywhere) {
  ASSERT_NO_THROW(comm_->declare(base_set()));
  const int odd = test_size() - 1;
  auto set = base_set();
  if (test_rank() == odd) set[1].layout = TensorLayout{8, 512};
  const Failure f = try_declare(set);
  expect_failed_everywhere(f, ErrorCode::mismatch, "shape differing on the last rank");
  EXPECT_NE(f.message.find("mlp_out"), std::string::npos)
      << "must name the first differing declaration: " << f.message;
  EXPECT_NE(f.message.find("[1]"), std::string::npos) << "its position: " << f.message;
  EXPECT_TRUE(names_rank(f.message, odd)) << "must name the differing rank: " << f.message;
  for (int r = 1; r < odd; ++r) {
    EXPECT_FALSE(names_rank(f.message, r))
        << "rank " << r << " agrees with rank 0 and must not be named: " << f.message;
  }
  EXPECT_FALSE(comm_->has_plan_for(make_all_reduce_key(DataType::bf16, TensorLayout{8, 512})));
  expect_base_set_in_force("after a shape mismatch");
}

TEST_F(DeclareTest, DifferentOrderIsMismatchEverywhere) {
  ASSERT_NO_THROW(comm_->declare(base_set()));
  auto set = base_set();
  if (test_rank() % 2 == 1) std::swap(set[0], set[1]);
  const Failure f = try_declare(set);
  expect_failed_everywhere(f, ErrorCode::mismatch, "order differing on odd ranks");
  EXPECT_NE(f.message.find("attn_out"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("mlp_out"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("[0]"), std::string::npos) << "first difference is at 0: " << f.message;
  EXPECT_TRUE(names_rank(f.message, 1)) << f.message;
  expect_base_set_in_force("after an order mismatch");
}

TEST_F(DeclareTest, OneRankDeclaringMoreIsMismatchEverywhere) {
  ASSERT_NO_THROW(comm_->declare(base_set()));
  const int odd = test_size() - 1;
  auto set = base_set();
  if (test_rank() == odd)
    set.push_back(Declaration::all_reduce("extra", DataType::f32, TensorLayout{1, 64}));
  const Failure f = try_declare(set);
  expect_failed_everywhere(f, ErrorCode::mismatch, "one rank declaring more");
  EXPECT_NE(f.message.find("extra"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("[3]"), std::string::npos) << f.message;
  EXPECT_TRUE(names_rank(f.message, odd)) << f.message;
  EXPECT_FALSE(comm_->has_plan_for(make_all_reduce_key(DataType::f32, TensorLayout{1, 64})));
  expect_base_set_in_force("after one rank declared more");
}

TEST_F(DeclareTest, EpsilonDifferingOnOneRankIsMismatchButWeightAddressesMayDiffer) {
  // Weight addresses differ per rank by nature (each rank owns its copy):
  // that is not a mismatch.
  ASSERT_NO_THROW(comm_->declare(base_set()));
  const int odd = test_size() - 1;
  auto set = base_set();
  if (test_rank() == odd) set[2].eps = 1e-5f;
  const Failure f = try_declare(set);
  expect_failed_everywhere(f, ErrorCode::mismatch, "eps differing on the last rank");
  EXPECT_NE(f.message.find("post_norm"), std::string::npos) << f.message;
  EXPECT_TRUE(names_rank(f.message, odd)) << f.message;
  expect_base_set_in_force("after an eps mismatch");
}

// The agreement compares keys, as the lookup does: a size-1 dimension's
// stride (a one-row view of a buffer padded differently per rank), implicit
// against explicit row-major strides, and eps -0.0 against +0.0 are equal.
TEST_F(DeclareTest, DeclarationsWithEqualKeysAgreeWhateverTheirSpelling) {
  const int odd = test_size() - 1;
  const bool mine = test_rank() == odd;
  const std::vector<Declaration> set{
      Declaration::all_reduce(
          "one_row", DataType::f32,
          mine ? strided_layout({1, 64}, {128, 1}) : strided_layout({1, 64}, {64, 1})),
      Declaration::all_reduce("rows", DataType::f32,
                              mine ? strided_layout({4, 64}, {64, 1}) : TensorLayout{4, 64}),
      Declaration::fused_add_rms_norm("norm", DataType::bf16, TensorLayout{2, 512}, weight_.data(),
                                      mine ? -0.0f : 0.0f)};
  const Failure f = try_declare(set);
  EXPECT_FALSE(f.threw) << f.message;
  EXPECT_TRUE(comm_->has_plan_for(make_all_reduce_key(DataType::f32, TensorLayout{1, 64})));
}

TEST_F(DeclareTest, InvalidOnOneRankIsInvalidArgumentEverywhere) {
  ASSERT_NO_THROW(comm_->declare(base_set()));
  const int odd = test_size() - 1;
  auto set = base_set();
  // 12-byte rows break the 16-byte alignment rule on that rank only.
  if (test_rank() == odd) set[1].layout = TensorLayout{4, 6};
  const Failure f = try_declare(set);
  expect_failed_everywhere(f, ErrorCode::invalid_argument, "invalid on the last rank");
  EXPECT_NE(f.message.find("mlp_out"), std::string::npos) << f.message;
  EXPECT_TRUE(names_rank(f.message, odd)) << "must name the rank with the bad set: " << f.message;
  expect_base_set_in_force("after an invalid declaration on one rank");

  // Invalid everywhere (duplicate names): also InvalidArgument, same text.
  auto duplicate = base_set();
  duplicate[1].name = "attn_out";
  const Failure g = try_declare(duplicate);
  expect_failed_everywhere(g, ErrorCode::invalid_argument, "duplicate names");
  EXPECT_NE(g.message.find("attn_out"), std::string::npos) << g.message;
  expect_base_set_in_force("after duplicate names");
}

TEST_F(DeclareTest, ProbeAndStrictLookup) {
  ASSERT_NO_THROW(comm_->declare(base_set()));
  const TensorLayout layout{2, 512};
  const PlanKey declared = make_all_reduce_key(DataType::bf16, layout);
  EXPECT_TRUE(comm_->has_plan_for(declared));
  const PlanInfo info = comm_->plan_for(declared);
  ASSERT_NE(info.declaration, nullptr);
  EXPECT_EQ(info.declaration->name, "attn_out");
  EXPECT_EQ(info.route, comm_->p2p_enabled() ? Route::one_shot : Route::fallback);
  const PlanInfo fused =
      comm_->plan_for(make_fused_key(DataType::bf16, layout, weight_.data(), kEps));
  EXPECT_EQ(fused.declaration->name, "post_norm");
  EXPECT_EQ(fused.route, comm_->p2p_enabled() ? Route::fused_one_shot : Route::fallback);
  // index: the declaration's position, where stats() lists the plan.
  const Stats stats = comm_->stats();
  ASSERT_LT(info.index, stats.plans.size());
  ASSERT_LT(fused.index, stats.plans.size());
  EXPECT_EQ(stats.plans[info.index].name, "attn_out");
  EXPECT_EQ(stats.plans[fused.index].name, "post_norm");
  EXPECT_EQ(info.index, 0u);
  EXPECT_EQ(fused.index, 2u);

  // Every field of the key matters.
  const Buffer equal_weight = make_weight(DataType::bf16, 512, 1234);
  const std::vector<std::pair<std::string, PlanKey>> misses{
      {"other dtype", make_all_reduce_key(DataType::f16, layout)},
      {"other shape", make_all_reduce_key(DataType::bf16, TensorLayout{3, 512})},
      {"padded rows", make_all_reduce_key(DataType::bf16, strided_layout({2, 512}, {520, 1}))},
      {"equal-valued weight elsewhere",
       make_fused_key(DataType::bf16, layout, equal_weight.data(), kEps)},
      {"other eps", make_fused_key(DataType::bf16, layout, weight_.data(), 2e-6f)},
      {"dtype f32", make_all_reduce_key(DataType::f32, layout)},
  };
  for (const auto& [what, key] : misses) {
    EXPECT_FALSE(comm_->has_plan_for(key)) << what;
    try {
      comm_->plan_for(key);
      ADD_FAILURE() << what << ": plan_for must throw UndeclaredPlan";
    } catch (const UndeclaredPlan& e) {
      EXPECT_NE(std::string(e.what()).find(key.to_string()), std::string::npos)
          << what << ": the message must name the key " << key.to_string() << "; got " << e.what();
    }
  }
  // The trimmed one-row layout with a padded stride is the same key.
  comm_->declare(std::vector<Declaration>{
      Declaration::all_reduce("row", DataType::bf16, TensorLayout{1, 512})});
  EXPECT_TRUE(comm_->has_plan_for(
      make_all_reduce_key(DataType::bf16, strided_layout({1, 512}, {1024, 1}))));
}

TEST_F(DeclareTest, FirstDeclaredWins) {
  const TensorLayout layout{2, 512};
  ASSERT_NO_THROW(comm_->declare(std::vector<Declaration>{
      Declaration::all_reduce("first", DataType::bf16, layout),
      Declaration::all_reduce("second", DataType::bf16, layout),  // same key
      Declaration::all_reduce("other", DataType::bf16, TensorLayout{1, 512})}));
  EXPECT_EQ(comm_->plan_for(make_all_reduce_key(DataType::bf16, layout)).declaration->name,
            "first");
  const AllReduceOutcome o =
      run_all_reduce(*comm_, DataType::bf16, layout, Inputs::random, false, next_seed());
  expect_all_reduce_correct(o, "a call of the shared key");
  const Stats stats = comm_->stats();
  ASSERT_EQ(stats.plans.size(), 3u);
  EXPECT_EQ(stats.plans[0].name, "first");
  EXPECT_EQ(stats.plans[0].hits + stats.plans[0].fallbacks, 1u) << "the call is counted on 'first'";
  EXPECT_EQ(stats.plans[1].hits + stats.plans[1].fallbacks, 0u) << "and never on 'second'";
}

// A declaration whose key an earlier one already has can never be hit:
// declare() warns once, on rank 0, naming each such declaration and the one
// that wins; a set without repeated keys logs nothing.
TEST_F(DeclareTest, RepeatedKeyIsWarnedAboutOnceOnRankZero) {
  const TensorLayout layout{2, 512};
  const std::vector<Declaration> set{
      Declaration::all_reduce("first", DataType::bf16, layout),
      Declaration::all_reduce("second", DataType::bf16, layout),
      Declaration::all_reduce("other", DataType::bf16, TensorLayout{1, 512}),
      Declaration::all_reduce("third", DataType::bf16, strided_layout({2, 512}, {512, 1}))};
  testing::internal::CaptureStderr();
  comm_->declare(set);
  const std::string log = testing::internal::GetCapturedStderr();
  std::size_t warnings = 0;
  for (std::size_t at = log.find("WARN"); at != std::string::npos; at = log.find("WARN", at + 1))
    ++warnings;
  if (test_rank() == 0) {
    EXPECT_EQ(warnings, 1u) << "one warning per declare:\n" << log;
    for (const std::string piece : {"declarations[1] (\"second\")", "declarations[3] (\"third\")",
                                    "declarations[0] (\"first\")", "never"}) {
      EXPECT_NE(log.find(piece), std::string::npos) << "missing " << piece << " in:\n" << log;
    }
    EXPECT_EQ(log.find("\"other\""), std::string::npos) << log;
  } else {
    EXPECT_EQ(warnings, 0u) << "only rank 0 warns:\n" << log;
  }

  testing::internal::CaptureStderr();
  comm_->declare(base_set());
  const std::string quiet = testing::internal::GetCapturedStderr();
  EXPECT_EQ(quiet.find("WARN"), std::string::npos) << quiet;
}

// A fused call that misses its declared plan only by the weight address (a
// weight reallocated after declare()) takes the fallback on this rank while
// ranks passing the declared weight would wait for it on the P2P route: the
// rank says so in one WARN per plan, naming the plan and both addresses.
// Here every rank passes the copy, so the calls complete on the fallback.
TEST_F(DeclareTest, FusedCallWithAnotherWeightThanDeclaredIsWarnedAboutOncePerPlan) {
  ASSERT_NO_THROW(comm_->declare(base_set()));
  const TensorLayout layout{2, 512};
  Buffer copy = make_weight(DataType::bf16, 512, 1234);  // same values, another address
  Buffer inout(DataType::bf16, layout.numel()), residual(DataType::bf16, layout.numel());
  auto call = [&](const Buffer& weight) {
    for (std::int64_t i = 0; i < layout.numel(); ++i) {
      inout.set(i, 1.0f);
      residual.set(i, 0.0f);
    }
    testing::internal::CaptureStderr();
    const CallResult result = comm_->fused_add_rms_norm(
        inout.data(), residual.data(), weight.data(), kEps, DataType::bf16, layout);
    return std::make_pair(result, testing::internal::GetCapturedStderr());
  };
  const auto [missed, log] = call(copy);
  EXPECT_EQ(missed.route, Route::fallback);
  EXPECT_NE(log.find("WARN"), std::string::npos) << log;
  for (const std::string& piece : {std::string("\"post_norm\""), std::string("but for its weight"),
                                   address_text(weight_.data()), address_text(copy.data())}) {
    EXPECT_NE(log.find(piece), std::string::npos) << "missing " << piece << " in:\n" << log;
  }
  const auto [again, quiet] = call(copy);
  EXPECT_EQ(again.route, Route::fallback);
  EXPECT_EQ(quiet.find("WARN"), std::string::npos) << "once per plan:\n" << quiet;
  const auto [hit, silent] = call(weight_);
  EXPECT_NE(hit.route, Route::fallback);
  EXPECT_EQ(silent.find("WARN"), std::string::npos) << silent;
  Buffer one_row(DataType::bf16, 512), one_residual(DataType::bf16, 512);
  for (std::int64_t i = 0; i < 512; ++i) {
    one_row.set(i, 1.0f);
    one_residual.set(i, 0.0f);
  }
  testing::internal::CaptureStderr();
  comm_->fused_add_rms_norm(one_row.data(), one_residual.data(), copy.data(), kEps, DataType::bf16,
                            TensorLayout{1, 512});
  const std::string undeclared = testing::internal::GetCapturedStderr();
  EXPECT_EQ(undeclared.find("WARN"), std::string::npos)
      << "a shape never declared is an ordinary miss:\n"
      << undeclared;
}

TEST_F(DeclareTest, RefreshReplacesTheWholeSet) {
  ASSERT_NO_THROW(comm_->declare(base_set()));
  const PlanKey attn = make_all_reduce_key(DataType::bf16, TensorLayout{2, 512});
  expect_all_reduce_correct(run_all_reduce(*comm_, DataType::bf16, TensorLayout{2, 512},
                                           Inputs::random, false, next_seed()),
                            "before refresh");

  // New set: one larger plan (a two-shot message: the staging grows).
  // bf16, 1 MiB: over the default one-shot cutoff at every world size
  // (512 KiB at most), under the two-shot one (8 MiB).
  const TensorLayout big{128, 4096};
  ASSERT_NO_THROW(comm_->declare(
      std::vector<Declaration>{Declaration::all_reduce("prefill", DataType::bf16, big)}));
  EXPECT_FALSE(comm_->has_plan_for(attn)) << "keys no longer declared must miss";
  EXPECT_THROW(comm_->plan_for(attn), UndeclaredPlan);
  EXPECT_TRUE(comm_->has_plan_for(make_all_reduce_key(DataType::bf16, big)));
  Stats stats = comm_->stats();
  ASSERT_EQ(stats.plans.size(), 1u) << "stats show the new set only";
  EXPECT_EQ(stats.plans[0].name, "prefill");
  EXPECT_EQ(stats.plans[0].hits, 0u);

  const AllReduceOutcome old_key = run_all_reduce(*comm_, DataType::bf16, TensorLayout{2, 512},
                                                  Inputs::random, true, next_seed());
  EXPECT_EQ(old_key.result.route, Route::fallback);
  EXPECT_EQ(old_key.result.reason, FallbackReason::undeclared);
  expect_all_reduce_correct(old_key, "a key of the replaced set");
  const AllReduceOutcome new_key =
      run_all_reduce(*comm_, DataType::bf16, big, Inputs::integers, false, next_seed());
  EXPECT_EQ(new_key.result.route, comm_->p2p_enabled() ? Route::two_shot : Route::fallback);
  expect_all_reduce_correct(new_key, "the refreshed plan");
  stats = comm_->stats();
  EXPECT_EQ(stats.plans[0].hits, comm_->p2p_enabled() ? 1u : 0u);

  // The empty set releases everything; every key misses, calls still work.
  ASSERT_NO_THROW(comm_->declare(std::vector<Declaration>{}));
  EXPECT_FALSE(comm_->has_plan_for(make_all_reduce_key(DataType::bf16, big)));
  EXPECT_TRUE(comm_->stats().plans.empty());
  expect_all_reduce_correct(run_all_reduce(*comm_, DataType::bf16, TensorLayout{2, 512},
                                           Inputs::integers, false, next_seed()),
                            "with nothing declared");

  // And back: the staging is re-created and the old plans hit again.
  ASSERT_NO_THROW(comm_->declare(base_set()));
  const AllReduceOutcome again = run_all_reduce(*comm_, DataType::bf16, TensorLayout{2, 512},
                                                Inputs::random, false, next_seed());
  EXPECT_EQ(again.result.route, comm_->p2p_enabled() ? Route::one_shot : Route::fallback);
  expect_all_reduce_correct(again, "after declaring the first set again");
}

}  // namespace
}  // namespace peerplan::comm_test
