// SPDX-License-Identifier: Apache-2.0
// All-reduce through the communicator, end to end on the host backend:
// every dtype x every route (one-shot, two-shot, fallback for an undeclared
// key, fallback over the cutoff) x in place / out of place x contiguous /
// padded layouts, checked against a float64 reference of every rank's
// inputs, bit-identical on every rank, exact for integer inputs (#wrong must
// be 0), and equal to what the MPI fallback computes from the same inputs.
//
// Two cutoff profiles put the same kinds of layouts on different routes:
//  - mixed:         one-shot <= 4 KiB < two-shot <= 32 KiB < fallback;
//  - two_shot_only: one-shot disabled (cutoff 0), two-shot <= 32 KiB, which
//    also runs two-shot on messages smaller than the world size's shard
//    count (an empty last shard at 3 ranks).
// Element counts are chosen not to be multiples of 3, so the two-shot
// shards are uneven at 3 ranks (with 16-byte rows every count is a
// multiple of 4, hence even at 2 and 4 ranks).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "support/communicator_test_support.hpp"
#include "support/mpi_test_support.hpp"

namespace peerplan::comm_test {
namespace {

enum class Profile { mixed, two_shot_only };

const char* to_string(Profile p) { return p == Profile::mixed ? "mixed" : "two_shot_only"; }
void PrintTo(Profile p, std::ostream* os) { *os << to_string(p); }

Config config_for(Profile profile) {
  Config config;
  if (profile == Profile::mixed) {
    config.cutoffs = RouteCutoffs{4096, 32768, 16384};
  } else {
    config.cutoffs = RouteCutoffs{0, 32768, 0};
  }
  return config;
}

struct Case {
  std::string name;
  TensorLayout call;                     // the layout of the calls
  std::optional<TensorLayout> declared;  // nullopt: not declared
  Route route;
  FallbackReason reason;
};

// Elements of `dtype` in `bytes` bytes.
std::int64_t el(DataType dtype, std::int64_t bytes) {
  return bytes / static_cast<std::int64_t>(element_size(dtype));
}

std::vector<Case> cases_for(DataType dt, Profile profile) {
  const TensorLayout padded_3d = strided_layout(
      {2, 3, el(dt, 128)}, {3 * el(dt, 160) + el(dt, 64), el(dt, 160), 1});  // 768 bytes
  const TensorLayout trimmed_row = strided_layout({1, el(dt, 1024)}, {el(dt, 1088), 1});
  const TensorLayout one_row = TensorLayout{1, el(dt, 1024)};
  const TensorLayout undeclared = TensorLayout{7, el(dt, 384)};
  const TensorLayout undeclared_padded = strided_layout({5, el(dt, 256)}, {el(dt, 304), 1});
  const TensorLayout over = TensorLayout{9, el(dt, 4096)};  // 36864 bytes > 32 KiB
  const TensorLayout over_padded = strided_layout({3, el(dt, 12288)}, {el(dt, 12304), 1});
  const auto fallback = Route::fallback;
  const auto none = FallbackReason::none;
  const auto undeclared_reason = FallbackReason::undeclared;
  const auto over_cutoff = FallbackReason::over_cutoff;

  if (profile == Profile::mixed) {
    const TensorLayout small = TensorLayout{3, el(dt, 256)};           // 768 bytes
    const TensorLayout at_one_shot = TensorLayout{4, el(dt, 1024)};    // 4096: the cutoff
    const TensorLayout past_one_shot = TensorLayout{1, el(dt, 4112)};  // 4112
    const TensorLayout two_shot_rows = TensorLayout{5, el(dt, 4000)};  // 20000
    const TensorLayout two_shot_padded = strided_layout({6, el(dt, 2048)}, {el(dt, 2080), 1});
    return {
        {"one_shot", small, small, Route::one_shot, none},
        {"one_shot_at_cutoff", at_one_shot, at_one_shot, Route::one_shot, none},
        {"one_shot_padded_3d", padded_3d, padded_3d, Route::one_shot, none},
        {"one_shot_trimmed_row", trimmed_row, one_row, Route::one_shot, none},
        {"two_shot_past_one_shot", past_one_shot, past_one_shot, Route::two_shot, none},
        {"two_shot_rows", two_shot_rows, two_shot_rows, Route::two_shot, none},
        {"two_shot_padded", two_shot_padded, two_shot_padded, Route::two_shot, none},
        {"fallback_over_cutoff", over, over, fallback, over_cutoff},
        {"fallback_over_cutoff_padded", over_padded, over_padded, fallback, over_cutoff},
        {"fallback_undeclared", undeclared, std::nullopt, fallback, undeclared_reason},
        {"fallback_undeclared_padded", undeclared_padded, std::nullopt, fallback,
         undeclared_reason},
    };
  }
  const TensorLayout tiny = TensorLayout{1, el(dt, 16)};  // 4 or 8 elements
  const TensorLayout tiny_rows = TensorLayout{2, el(dt, 16)};
  const TensorLayout small = TensorLayout{3, el(dt, 256)};
  const TensorLayout at_two_shot = TensorLayout{8, el(dt, 4096)};  // 32768: the cutoff
  return {
      {"two_shot_tiny", tiny, tiny, Route::two_shot, none},
      {"two_shot_tiny_rows", tiny_rows, tiny_rows, Route::two_shot, none},
      {"two_shot_small", small, small, Route::two_shot, none},
      {"two_shot_padded_3d", padded_3d, padded_3d, Route::two_shot, none},
      {"two_shot_trimmed_row", trimmed_row, one_row, Route::two_shot, none},
      {"two_shot_at_cutoff", at_two_shot, at_two_shot, Route::two_shot, none},
      {"fallback_over_cutoff", over, over, fallback, over_cutoff},
      {"fallback_undeclared_padded", undeclared_padded, std::nullopt, fallback, undeclared_reason},
  };
}

class AllReduceRoutes : public ::testing::TestWithParam<std::tuple<DataType, Profile>> {};

TEST_P(AllReduceRoutes, MatchReferencesAndFallbackOnEveryRank) {
  const auto [dtype, profile] = GetParam();
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  const int n = test_size();

  auto comm = create_on_world(config_for(profile));
  ASSERT_TRUE(comm->p2p_enabled());
  // The same calls through the fallback only, for the cross-path comparison.
  Config fallback_config;
  fallback_config.disable_p2p = true;
  auto reference = create_on_world(fallback_config);

  const auto cases = cases_for(dtype, profile);
  std::vector<Declaration> declarations;
  for (const auto& c : cases) {
    if (c.declared) declarations.push_back(Declaration::all_reduce(c.name, dtype, *c.declared));
  }
  ASSERT_NO_THROW(comm->declare(declarations));

  for (const auto& c : cases) {
    const PlanKey key = make_all_reduce_key(dtype, c.call);
    EXPECT_EQ(comm->has_plan_for(key), c.declared.has_value()) << c.name;
    if (c.declared) {
      const PlanInfo info = comm->plan_for(key);
      ASSERT_NE(info.declaration, nullptr) << c.name;
      EXPECT_EQ(info.declaration->name, c.name) << "the call's key found another plan";
      EXPECT_EQ(info.route, c.route) << c.name;
      EXPECT_EQ(info.route_reason, c.reason) << c.name;
    }
  }

  const double rel = relative_tolerance(dtype);
  for (const auto& c : cases) {
    for (Inputs inputs : {Inputs::random, Inputs::integers}) {
      for (bool in_place : {false, true}) {
        const std::string label =
            c.name + " " + peerplan::to_string(dtype) + " " + comm_test::to_string(inputs) +
            (in_place ? " in place" : " out of place") + " at " + std::to_string(n) + " ranks";
        const std::uint64_t seed = next_seed();
        const AllReduceOutcome p2p = run_all_reduce(*comm, dtype, c.call, inputs, in_place, seed);
        EXPECT_EQ(p2p.result.route, c.route) << label;
        EXPECT_EQ(p2p.result.reason, c.reason) << label;
        expect_all_reduce_correct(p2p, label);

        const AllReduceOutcome fb =
            run_all_reduce(*reference, dtype, c.call, inputs, in_place, seed);
        EXPECT_EQ(fb.result.route, Route::fallback) << label;
        expect_all_reduce_correct(fb, label + " (fallback-only communicator)");

        // Fallback == P2P: exactly for integer sums; otherwise within the
        // roundings of both paths (one on P2P, n-1 in the fallback's op).
        const auto tolerance = [&](std::size_t i) {
          if (inputs == Inputs::integers) return 0.0;
          double magnitude = 0.0;
          for (int r = 0; r < n; ++r)
            magnitude +=
                std::fabs(input_value(dtype, inputs, seed, r, static_cast<std::int64_t>(i)));
          return (1.0 + std::max(1.0, n - 1.0)) * rel * magnitude + 2 * n * std::ldexp(1.0, -24);
        };
        EXPECT_EQ(count_differences(p2p.values, fb.values, tolerance), 0)
            << label << ": the fallback's result differs from the P2P route's beyond rounding";
      }
    }
  }

  // Each declared case ran 4 times (2 kinds of inputs x in place or not).
  const Stats stats = comm->stats();
  ASSERT_EQ(stats.plans.size(), declarations.size());
  for (std::size_t i = 0; i < stats.plans.size(); ++i) {
    const bool p2p = is_p2p(stats.plans[i].route);
    EXPECT_EQ(stats.plans[i].hits, p2p ? 4u : 0u) << stats.plans[i].name;
    EXPECT_EQ(stats.plans[i].fallbacks, p2p ? 0u : 4u) << stats.plans[i].name;
  }
  comm->close();
  reference->close();
}

INSTANTIATE_TEST_SUITE_P(
    DtypesAndProfiles, AllReduceRoutes,
    ::testing::Combine(::testing::Values(DataType::f32, DataType::bf16, DataType::f16),
                       ::testing::Values(Profile::mixed, Profile::two_shot_only)),
    [](const ::testing::TestParamInfo<AllReduceRoutes::ParamType>& info) {
      return std::string(peerplan::to_string(std::get<0>(info.param))) + "_" +
             to_string(std::get<1>(info.param));
    });

// Many back-to-back calls alternating routes and in-place/out-of-place
// buffers: the double-buffered staging slots are reused (call e+2 reuses
// call e's slot), so a rank racing ahead must not clobber data a slower
// peer still reads. Every call is checked.
TEST(AllReduceSequence, BackToBackCallsReuseStagingSlotsSafely) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  auto comm = create_on_world(config_for(Profile::mixed));
  const TensorLayout small{2, 64};    // f32, 512 bytes: one-shot
  const TensorLayout large{3, 1028};  // f32, 12336 bytes: two-shot
  comm->declare(std::vector<Declaration>{Declaration::all_reduce("small", DataType::f32, small),
                                         Declaration::all_reduce("large", DataType::f32, large)});
  // Checked after the loop: a comparison between calls would synchronise
  // the ranks and hide the race this test is about.
  std::vector<AllReduceOutcome> outcomes;
  std::vector<bool> large_call;
  for (int call = 0; call < 24; ++call) {
    const bool use_large = call % 3 == 2;
    large_call.push_back(use_large);
    outcomes.push_back(run_all_reduce(*comm, DataType::f32, use_large ? large : small,
                                      Inputs::integers, call % 2 == 0, next_seed()));
  }
  for (std::size_t call = 0; call < outcomes.size(); ++call) {
    EXPECT_EQ(outcomes[call].result.route, large_call[call] ? Route::two_shot : Route::one_shot)
        << "call " << call;
    expect_all_reduce_correct(outcomes[call], "call " + std::to_string(call));
  }
  EXPECT_EQ(comm->stats().p2p_calls, 24u);
}

// A two-shot message over RouteCutoffs::two_shot_chunk_bytes runs as
// consecutive two-shots on pieces of it (the last one shorter): the same
// bits as one whole two-shot, for every dtype, whole pieces or a short last
// one, in place or not; the plan's launch text says so; a strided layout
// is never split. Random inputs, so that the bits say something about the
// order of the additions.
TEST(TwoShotPieces, SameBitsAsOneWholeTwoShot) {
  PEERPLAN_MPI_SKIP_IF(!all_ranks_on_one_node(), "P2P routes need every rank on one node");
  constexpr std::size_t kPiece = 4096;
  Config pieces_config, whole_config;
  pieces_config.cutoffs = RouteCutoffs{0, 1 << 20, 0, 0, kPiece};
  whole_config.cutoffs = RouteCutoffs{0, 1 << 20, 0, 0, 0};  // never split
  auto pieces = create_on_world(pieces_config);
  auto whole = create_on_world(whole_config);
  for (DataType dt : {DataType::f32, DataType::bf16, DataType::f16}) {
    const std::int64_t per_piece = el(dt, kPiece);
    const std::vector<std::pair<std::int64_t, std::string>> counts{
        {3 * per_piece, "3 whole pieces"},
        {3 * per_piece + 8, "3 pieces + a short one"},
        {per_piece + 24, "1 piece + a short one"},
        {per_piece, "exactly one piece: not split"}};
    const TensorLayout strided = strided_layout({4, per_piece / 2}, {per_piece / 2 + 8, 1});
    std::vector<Declaration> declarations;
    for (const auto& [count, what] : counts)
      declarations.push_back(Declaration::all_reduce(what, dt, TensorLayout{count}));
    declarations.push_back(Declaration::all_reduce("strided", dt, strided));
    pieces->declare(declarations);
    whole->declare(declarations);
    for (const auto& [count, what] : counts) {
      const TensorLayout layout{count};
      const std::string launch = pieces->plan_for(make_all_reduce_key(dt, layout)).launch;
      const bool split = count > per_piece;
      EXPECT_EQ(launch.find("pieces of 4096 bytes") != std::string::npos, split)
          << to_string(dt) << " " << what << ": " << launch;
      for (bool in_place : {false, true}) {
        const std::uint64_t seed = next_seed();
        const auto a = run_all_reduce(*pieces, dt, layout, Inputs::random, in_place, seed);
        const auto b = run_all_reduce(*whole, dt, layout, Inputs::random, in_place, seed);
        const std::string context =
            std::string(to_string(dt)) + " " + what + (in_place ? " in place" : "");
        EXPECT_EQ(a.result.route, Route::two_shot) << context;
        expect_all_reduce_correct(a, context);
        EXPECT_EQ(a.hash, b.hash) << context << ": other bits than one whole two-shot";
      }
    }
    EXPECT_EQ(pieces->plan_for(make_all_reduce_key(dt, strided)).launch.find("pieces"),
              std::string::npos)
        << "a strided layout is never split";
    expect_all_reduce_correct(
        run_all_reduce(*pieces, dt, strided, Inputs::integers, false, next_seed()),
        std::string(to_string(dt)) + " strided");
  }
  pieces->close();
  whole->close();
}

}  // namespace
}  // namespace peerplan::comm_test
