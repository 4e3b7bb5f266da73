// SPDX-License-Identifier: Apache-2.0
// Fused all-reduce + residual add + RMSNorm through the communicator:
//   residual = allreduce(inout) + residual;  inout = rmsnorm(residual) * weight
// for every dtype, hidden sizes 64, 1024 and 4096, 1 to 8 rows, contiguous
// and padded rows, on the fused one-shot route and the fallback (over the
// cutoff, undeclared), checked against a float64 reference of every rank's
// inputs; bit-identical on every rank; fallback == P2P bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

constexpr float kEps = 1e-6f;
constexpr std::size_t kFusedCutoff = 64 * 1024;

Config fused_config() {
  Config config;
  config.cutoffs.fused_max_bytes = kFusedCutoff;
  return config;
}

struct FusedCase {
  std::string name;
  TensorLayout layout;
  Route route;
  FallbackReason reason;
};

std::vector<FusedCase> fused_cases(DataType dtype) {
  std::vector<FusedCase> cases;
  const auto add = [&](std::string name, TensorLayout layout) {
    const auto bytes = static_cast<std::size_t>(layout.numel()) * element_size(dtype);
    const bool fits = bytes <= kFusedCutoff;
    cases.push_back({std::move(name), layout, fits ? Route::fused_one_shot : Route::fallback,
                     fits ? FallbackReason::none : FallbackReason::over_cutoff});
  };
  for (std::int64_t hidden : {64, 1024, 4096}) {
    for (std::int64_t rows : {1, 3, 8}) {
      add("h" + std::to_string(hidden) + "_r" + std::to_string(rows), TensorLayout{rows, hidden});
    }
  }
  // Padded rows (a slice of a wider buffer) and, for 16-bit types whose
  // [8, 4096] still fits, one shape over the cutoff.
  add("h1024_r4_padded", strided_layout({4, 1024}, {1024 + 64, 1}));
  if (dtype != DataType::f32) add("h4096_r9", TensorLayout{9, 4096});
  return cases;
}

// The weights of one dtype, one per hidden size, keyed by hidden size.
std::map<std::int64_t, Buffer> make_weights(DataType dtype, std::uint64_t seed) {
  std::map<std::int64_t, Buffer> weights;
  for (std::int64_t hidden : {64, 1024, 4096})
    weights.emplace(hidden, make_weight(dtype, hidden, seed + hidden));
  return weights;
}

// Compares two runs of the same inputs: exactly for integer inputs, else
// within the sum of both runs' tolerances.
// The fallback sums like the P2P route (rank order, fp32, one rounding; at
// 3+ ranks by gathering every rank's message), then the same add + RMSNorm:
// the same bits at every world size.
void expect_same_bits(const FusedOutcome& a, const FusedOutcome& b, const std::string& what) {
  EXPECT_EQ(a.residual, b.residual) << what << ": residual";
  EXPECT_EQ(a.out, b.out) << what << ": output";
}

class FusedAddRmsNorm : public ::testing::TestWithParam<DataType> {};

TEST_P(FusedAddRmsNorm, MatchesReferenceAndFallbackOnEveryRank) {
  const DataType dtype = GetParam();
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  const int n = test_size();
  auto comm = create_on_world(fused_config());
  ASSERT_TRUE(comm->p2p_enabled());
  Config fallback_config = fused_config();
  fallback_config.disable_p2p = true;
  auto reference = create_on_world(fallback_config);

  const auto weights = make_weights(dtype, next_seed());
  const auto cases = fused_cases(dtype);
  std::vector<Declaration> declarations;
  for (const auto& c : cases) {
    declarations.push_back(Declaration::fused_add_rms_norm(
        c.name, dtype, c.layout, weights.at(c.layout.last_dim()).data(), kEps));
  }
  ASSERT_NO_THROW(comm->declare(declarations));

  for (const auto& c : cases) {
    const Buffer& weight = weights.at(c.layout.last_dim());
    for (Inputs inputs : {Inputs::random, Inputs::integers}) {
      const std::string label = c.name + " " + peerplan::to_string(dtype) + " " +
                                comm_test::to_string(inputs) + " at " + std::to_string(n) +
                                " ranks";
      const std::uint64_t seed = next_seed();
      const FusedOutcome p2p = run_fused(*comm, dtype, c.layout, weight, kEps, inputs,
                                         /*shared_residual=*/true, seed);
      EXPECT_EQ(p2p.result.route, c.route) << label;
      EXPECT_EQ(p2p.result.reason, c.reason) << label;
      expect_fused_correct(p2p, label, /*expect_identical_on_every_rank=*/true);

      const FusedOutcome fb = run_fused(*reference, dtype, c.layout, weight, kEps, inputs,
                                        /*shared_residual=*/true, seed);
      EXPECT_EQ(fb.result.route, Route::fallback) << label;
      expect_fused_correct(fb, label + " (fallback-only communicator)", true);
      expect_same_bits(p2p, fb, label + ": fallback vs P2P");
    }
  }
  comm->close();
  reference->close();
}

// Each rank keeps its own residual (not replicated): the add must use this
// rank's residual, so results differ by rank and match each rank's
// reference.
TEST_P(FusedAddRmsNorm, UsesEachRanksOwnResidual) {
  const DataType dtype = GetParam();
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  auto comm = create_on_world(fused_config());
  const Buffer weight = make_weight(dtype, 1024, next_seed());
  const TensorLayout layout{2, 1024};
  comm->declare(std::vector<Declaration>{
      Declaration::fused_add_rms_norm("rows", dtype, layout, weight.data(), kEps)});
  for (Inputs inputs : {Inputs::random, Inputs::integers}) {
    const FusedOutcome o = run_fused(*comm, dtype, layout, weight, kEps, inputs,
                                     /*shared_residual=*/false, next_seed());
    EXPECT_EQ(o.result.route, Route::fused_one_shot);
    expect_fused_correct(o, std::string("per-rank residual, ") + comm_test::to_string(inputs),
                         /*expect_identical_on_every_rank=*/false);
  }
}

// Plans are keyed by the weight's address: a different weight tensor with
// equal values misses (fallback, undeclared), and computes the same result.
TEST_P(FusedAddRmsNorm, EqualValuedWeightElsewhereMissesWithSameResult) {
  const DataType dtype = GetParam();
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  auto comm = create_on_world(fused_config());
  const std::uint64_t weight_seed = next_seed();
  const Buffer weight = make_weight(dtype, 4096, weight_seed);
  const Buffer copy = make_weight(dtype, 4096, weight_seed);
  ASSERT_EQ(std::memcmp(weight.data(), copy.data(), weight.bytes()), 0);
  ASSERT_NE(weight.data(), copy.data());
  const TensorLayout layout{2, 4096};
  comm->declare(std::vector<Declaration>{
      Declaration::fused_add_rms_norm("declared_weight", dtype, layout, weight.data(), kEps)});
  EXPECT_TRUE(comm->has_plan_for(make_fused_key(dtype, layout, weight.data(), kEps)));
  EXPECT_FALSE(comm->has_plan_for(make_fused_key(dtype, layout, copy.data(), kEps)));

  for (Inputs inputs : {Inputs::random, Inputs::integers}) {
    const std::uint64_t seed = next_seed();
    const std::string label = std::string(comm_test::to_string(inputs)) + " inputs";
    const FusedOutcome hit = run_fused(*comm, dtype, layout, weight, kEps, inputs, true, seed);
    const FusedOutcome miss = run_fused(*comm, dtype, layout, copy, kEps, inputs, true, seed);
    EXPECT_EQ(hit.result.route, Route::fused_one_shot) << label;
    EXPECT_EQ(miss.result.route, Route::fallback) << label;
    EXPECT_EQ(miss.result.reason, FallbackReason::undeclared) << label;
    expect_fused_correct(hit, label + " declared weight", true);
    expect_fused_correct(miss, label + " equal-valued copy", true);
    expect_same_bits(hit, miss, label + ": copy vs declared weight");
  }
  const Stats stats = comm->stats();
  ASSERT_EQ(stats.plans.size(), 1u);
  EXPECT_EQ(stats.plans[0].hits, 2u);
  EXPECT_EQ(stats.plans[0].fallbacks, 0u) << "a miss must not be counted on the declared plan";
  EXPECT_EQ(stats.fallback_undeclared, 2u);
}

// A one-row call whose row stride is padded has the same canonical key as
// the contiguous one-row declaration (the stride of a size-1 dimension does
// not matter), so it takes the declared fused route.
TEST_P(FusedAddRmsNorm, TrimmedRowWithPaddedStrideHitsContiguousPlan) {
  const DataType dtype = GetParam();
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  auto comm = create_on_world(fused_config());
  const Buffer weight = make_weight(dtype, 4096, next_seed());
  comm->declare(std::vector<Declaration>{Declaration::fused_add_rms_norm(
      "one_row", dtype, TensorLayout{1, 4096}, weight.data(), kEps)});
  const TensorLayout trimmed = strided_layout({1, 4096}, {4096 + 128, 1});
  ASSERT_TRUE(comm->has_plan_for(make_fused_key(dtype, trimmed, weight.data(), kEps)));
  for (Inputs inputs : {Inputs::random, Inputs::integers}) {
    const FusedOutcome o =
        run_fused(*comm, dtype, trimmed, weight, kEps, inputs, true, next_seed());
    EXPECT_EQ(o.result.route, Route::fused_one_shot);
    expect_fused_correct(o, std::string("trimmed row, ") + comm_test::to_string(inputs), true);
  }
  EXPECT_EQ(comm->stats().plans.at(0).hits, 2u);
}

TEST(FusedAddRmsNormLayout, RowsWithAnInnerStrideAreRejectedOnEveryRank) {
  auto comm = create_on_world(fused_config());
  const Buffer weight = make_weight(DataType::f32, 8, next_seed());
  std::vector<float> inout(32, 1.0f), residual(32, 0.0f);
  // [4, 8] stored column-major: a row is not contiguous.
  const TensorLayout transposed = strided_layout({4, 8}, {1, 4});
  try {
    comm->fused_add_rms_norm(inout.data(), residual.data(), weight.data(), kEps, DataType::f32,
                             transposed);
    ADD_FAILURE() << "a fused call whose rows are not contiguous must be rejected";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("layout.strides[1] is 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(residual, std::vector<float>(32, 0.0f)) << "nothing may be written";
}

// A fused call misses its plan when its weight pointer or eps differ from
// the declaration's; the TRACE line of each call shows both, in the form
// the INFO route table shows the declared ones, so a miss can be explained.
TEST(FusedAddRmsNormTrace, EachCallsLineShowsItsWeightAddressAndEps) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  Config config = fused_config();
  config.log_level = LogLevel::trace;
  auto comm = create_on_world(config);
  const Buffer weight = make_weight(DataType::f32, 8, next_seed());
  const Buffer copy = make_weight(DataType::f32, 8, next_seed());
  const TensorLayout layout{1, 8};
  comm->declare(std::vector<Declaration>{
      Declaration::fused_add_rms_norm("norm", DataType::f32, layout, weight.data(), kEps)});
  std::vector<float> inout(8, 1.0f), residual(8, 0.0f);
  testing::internal::CaptureStderr();
  for (const auto& [w, eps] : {std::pair{weight.data(), kEps}, std::pair{copy.data(), kEps},
                               std::pair{weight.data(), 1e-5f}}) {
    comm->fused_add_rms_norm(inout.data(), residual.data(), w, eps, DataType::f32, layout);
  }
  const std::string log = testing::internal::GetCapturedStderr();
  comm->close();
  const auto address = [](const void* p) {
    char text[32];
    std::snprintf(text, sizeof text, "0x%llx",
                  static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
    return std::string(text);
  };
  const std::string call = "TRACE: fused_add_rms_norm f32 [1, 8] strides [8, 1] weight ";
  for (const std::string& line :
       {call + address(weight.data()) +
            " eps 1e-06 -> fused_one_shot protocol staged (plan 'norm')",
        call + address(copy.data()) + " eps 1e-06 -> fallback reason undeclared",
        call + address(weight.data()) + " eps 1e-05 -> fallback reason undeclared"}) {
    EXPECT_NE(log.find(line + "\n"), std::string::npos) << "no line '" << line << "' in:\n" << log;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedAddRmsNorm,
                         ::testing::Values(DataType::f32, DataType::bf16, DataType::f16),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(peerplan::to_string(info.param));
                         });

}  // namespace
}  // namespace peerplan::comm_test
