// SPDX-License-Identifier: Apache-2.0
// derive_protocols: the one-shot LL prefix, the fused Lamport window (its
// lower bound, the longest run, none at all), the fused LL prefix outside
// that window, the two-shot's Lamport prefix and copy-engine window, ties,
// empty input, winner patterns the windows cannot say; and, over every
// pattern of a few sizes, what the router then runs when the derived
// windows are applied (apply_protocol_tuning, choose_protocol; for the
// two-shot's Lamport, the router's documented order).
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "crossovers.hpp"
#include "routing/protocol_choice.hpp"
#include "routing/protocol_tuning.hpp"
#include "../routing/cuda_push_windows.hpp"

namespace peerplan::tune {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::int64_t kHidden = 1024;  // bf16: 2 KiB rows
constexpr std::size_t kRowBytes = kHidden * 2;

constexpr ProtocolWinner L = ProtocolWinner::ll, M = ProtocolWinner::lamport,
                         T = ProtocolWinner::two_shot, S = ProtocolWinner::staged,
                         D = ProtocolWinner::dma;

// One-shot rows from 1 KiB up, doubling: `winner` takes 1 µs, the other 2.
std::vector<OneShotProtocolTimes> one_shot_rows(std::initializer_list<ProtocolWinner> winners) {
  std::vector<OneShotProtocolTimes> out;
  std::size_t bytes = 1 * KiB;
  for (ProtocolWinner w : winners) {
    out.push_back({bytes, w == L ? 1.0 : 2.0, w == M ? 1.0 : 2.0});
    bytes *= 2;
  }
  return out;
}

FusedProtocolTimes fused_row(std::int64_t rows, ProtocolWinner w) {
  return {static_cast<std::size_t>(rows) * kRowBytes, rows, w == L ? 1.0 : 2.0, w == M ? 1.0 : 2.0,
          w == T ? 1.0 : 2.0};
}

// Fused rows of 1, 2, 4, ... rows (2 KiB, 4 KiB, 8 KiB, ...).
std::vector<FusedProtocolTimes> fused_rows(const std::vector<ProtocolWinner>& winners) {
  std::vector<FusedProtocolTimes> out;
  std::int64_t rows = 1;
  for (ProtocolWinner w : winners) {
    out.push_back(fused_row(rows, w));
    rows *= 2;
  }
  return out;
}

// Two-shot rows from 1 MiB up, doubling: `winner` takes 1 µs, the others
// 2 (staged, Lamport and dma all timed).
std::vector<TwoShotProtocolTimes> two_shot_rows(const std::vector<ProtocolWinner>& winners) {
  std::vector<TwoShotProtocolTimes> out;
  std::size_t bytes = 1 * MiB;
  for (ProtocolWinner w : winners) {
    out.push_back({bytes, w == S ? 1.0 : 2.0, w == D ? 1.0 : 2.0, w == M ? 1.0 : 2.0});
    bytes *= 2;
  }
  return out;
}

// The size above which the derived copy-engine window runs (it has no ceiling).
std::size_t dma_after(const std::vector<TwoShotProtocolTimes>& rows) {
  const std::optional<Window> dma = derive_protocols({}, {}, rows).two_shot_dma;
  EXPECT_TRUE(dma && dma->up_to == kNoLimit);
  return dma ? dma->above : kNoLimit;
}

std::size_t dma_after(const std::vector<ProtocolWinner>& winners) {
  return dma_after(two_shot_rows(winners));
}

// The size up to which the derived two-shot Lamport window runs (from the
// smallest size); 0 when it is never.
std::size_t lamport_max(const std::vector<TwoShotProtocolTimes>& rows) {
  const std::optional<Window> lamport = derive_protocols({}, {}, rows).two_shot_lamport;
  EXPECT_TRUE(lamport && lamport->above == 0);
  return !lamport || lamport->is_never() ? 0 : lamport->up_to;
}

std::size_t lamport_max(const std::vector<ProtocolWinner>& winners) {
  return lamport_max(two_shot_rows(winners));
}

routing::ProtocolTuning fused_only(const std::vector<ProtocolWinner>& winners) {
  return derive_protocols({}, fused_rows(winners));
}

TEST(ProtocolFastest, LlMustBeStrictlyFaster) {
  EXPECT_EQ(fastest_protocol(OneShotProtocolTimes{0, 1, 2}), L);
  EXPECT_EQ(fastest_protocol(OneShotProtocolTimes{0, 2, 1}), M);
  EXPECT_EQ(fastest_protocol(OneShotProtocolTimes{0, 1, 1}), M);  // a tie: Lamport
}

TEST(ProtocolFastest, FusedTiesGoToTwoShotThenLamport) {
  EXPECT_EQ(fastest_protocol(FusedProtocolTimes{0, 1, 1, 2, 3}), L);
  EXPECT_EQ(fastest_protocol(FusedProtocolTimes{0, 1, 3, 1, 2}), M);
  EXPECT_EQ(fastest_protocol(FusedProtocolTimes{0, 1, 3, 2, 1}), T);
  EXPECT_EQ(fastest_protocol(FusedProtocolTimes{0, 1, 1, 1, 2}), M);  // LL = Lamport, ahead
  EXPECT_EQ(fastest_protocol(FusedProtocolTimes{0, 1, 1, 2, 1}), T);  // LL = two-shot, ahead
  EXPECT_EQ(fastest_protocol(FusedProtocolTimes{0, 1, 2, 1, 1}), T);  // Lamport = two-shot, ahead
  EXPECT_EQ(fastest_protocol(FusedProtocolTimes{0, 1, 1, 1, 1}), T);
}

TEST(ProtocolFastest, DmaMustBeStrictlyFaster) {
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 2, 1}), D);
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 1, 2}), S);
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 1, 1}), S);  // a tie: the staged kernel
  EXPECT_STREQ(to_string(S), "staged");
  EXPECT_STREQ(to_string(D), "dma");
}

TEST(ProtocolFastest, TwoShotTiesGoToStagedThenLamport) {
  // {bytes, staged, dma, lamport}
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 2, 3, 1}), M);
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 2, 1, 3}), D);
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 1, 2, 3}), S);
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 1, 2, 1}), S);  // Lamport = staged, ahead
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 1, 1, 2}), S);  // dma = staged, ahead
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 2, 1, 1}), M);  // Lamport = dma, ahead
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 1, 1, 1}), S);
  // A row without a Lamport time (the fields before it only) is staged or
  // dma, as before Lamport was timed.
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 2, 3}), S);
  EXPECT_EQ(fastest_protocol(TwoShotProtocolTimes{0, 3, 2}), D);
  EXPECT_STREQ(to_string(M), "Lamport");
}

TEST(DeriveProtocols, NothingMeasuredLeavesEveryFieldAuto) {
  EXPECT_EQ(derive_protocols({}, {}), routing::ProtocolTuning{});
  EXPECT_TRUE(routing::is_empty(derive_protocols({}, {})));
  EXPECT_TRUE(routing::is_empty(derive_protocols({}, {}, {})));
}

TEST(DeriveProtocols, TwoShotRowsSetOnlyTheTwoShotWindows) {
  routing::ProtocolTuning expected;
  expected.two_shot_dma = Window::above_bytes(1 * MiB);
  expected.two_shot_lamport = Window::never();  // measured, never the fastest: off
  EXPECT_EQ(derive_protocols({}, {}, two_shot_rows({S, D})), expected);
  // Pull mode (or the host backend) times no two-shot protocols: auto.
  const auto others = derive_protocols(one_shot_rows({L, M}), fused_rows({L, M, T}));
  EXPECT_EQ(others.two_shot_dma, std::nullopt);
  EXPECT_EQ(others.two_shot_lamport, std::nullopt);
  EXPECT_EQ(derive_protocols(one_shot_rows({L, M}), fused_rows({L, M, T}), two_shot_rows({M, D})),
            [&] {
              auto with_two_shot = others;
              with_two_shot.two_shot_lamport = Window::up_to_bytes(1 * MiB);
              with_two_shot.two_shot_dma = Window::above_bytes(1 * MiB);
              return with_two_shot;
            }())
      << "the two-shot rows change no other window";
}

TEST(DeriveProtocols, TwoShotLamportSmallStagedMiddleDmaLarge) {
  // Rows of 1, 2, 4, ... 64 MiB: the shape the three protocols are built
  // for (no barrier for small messages, copy engines for large ones).
  const auto rows = two_shot_rows({M, M, S, S, D, D, D});
  const auto t = derive_protocols({}, {}, rows);
  EXPECT_EQ(t.two_shot_lamport, Window::up_to_bytes(2 * MiB));
  EXPECT_EQ(t.two_shot_dma, Window::above_bytes(8 * MiB));
  // Lamport straight into dma: dma's window starts where Lamport's ends.
  const auto no_staged = derive_protocols({}, {}, two_shot_rows({M, M, M, D}));
  EXPECT_EQ(no_staged.two_shot_lamport, Window::up_to_bytes(4 * MiB));
  EXPECT_EQ(no_staged.two_shot_dma, Window::above_bytes(4 * MiB));
  // Lamport everywhere: up to the largest measured size, and no dma.
  EXPECT_EQ(lamport_max({M, M, M}), 4 * MiB);
  EXPECT_EQ(dma_after({M, M, M}), 4 * MiB);
}

TEST(DeriveProtocols, TwoShotLamportPrefix) {
  // Lamport must win the smallest size, and its window ends at its first loss.
  EXPECT_EQ(lamport_max({S, M, M}), 0u);  // off: a later win does not open it
  EXPECT_EQ(lamport_max({D, M}), 0u);
  EXPECT_EQ(lamport_max({M, S, M, M}), 1 * MiB);
  EXPECT_EQ(lamport_max({M, D, M}), 1 * MiB);
  // Lamport winning above a staged size keeps dma's window above it too:
  // it is not dma's win.
  EXPECT_EQ(dma_after({M, S, M, D}), 4 * MiB);
}

TEST(DeriveProtocols, TwoShotLamportNeverWinsMeansOff) {
  EXPECT_EQ(lamport_max({S, S, D, D}), 0u);
  EXPECT_EQ(dma_after({S, S, D, D}), 2 * MiB);  // as when only staged and dma were timed
  EXPECT_EQ(lamport_max({D, D}), 0u);
  EXPECT_EQ(dma_after({D, D}), 0u);
  // Second everywhere (faster than staged, slower than dma): never the fastest.
  const std::vector<TwoShotProtocolTimes> second{{1 * MiB, 3, 1, 2}, {2 * MiB, 3, 1, 2}};
  EXPECT_EQ(lamport_max(second), 0u);
  EXPECT_EQ(dma_after(second), 0u);
}

TEST(DeriveProtocols, TwoShotWindowsOnTies) {
  // {bytes, staged, dma, lamport}. Lamport tied with staged is staged's:
  // the prefix ends there, and dma (slower) starts above.
  const std::vector<TwoShotProtocolTimes> lamport_ties_staged{
      {1 * MiB, 2, 3, 1}, {2 * MiB, 1, 3, 1}, {4 * MiB, 2, 1, 3}};
  EXPECT_EQ(lamport_max(lamport_ties_staged), 1 * MiB);
  EXPECT_EQ(dma_after(lamport_ties_staged), 2 * MiB);
  // Lamport tied with dma (both faster than staged) is Lamport's: the
  // prefix goes on, and dma's window stays above it.
  const std::vector<TwoShotProtocolTimes> lamport_ties_dma{
      {1 * MiB, 2, 3, 1}, {2 * MiB, 2, 1, 1}, {4 * MiB, 2, 1, 3}};
  EXPECT_EQ(lamport_max(lamport_ties_dma), 2 * MiB);
  EXPECT_EQ(dma_after(lamport_ties_dma), 2 * MiB);
  // Every protocol tied: staged everywhere measured.
  const std::vector<TwoShotProtocolTimes> all_ties{{1 * MiB, 1, 1, 1}, {2 * MiB, 2, 2, 2}};
  EXPECT_EQ(lamport_max(all_ties), 0u);
  EXPECT_EQ(dma_after(all_ties), 2 * MiB);
}

TEST(DeriveProtocols, TwoShotDmaAfterTheLastStagedWin) {
  // Rows of 1, 2, 4, 8, 16 MiB.
  EXPECT_EQ(dma_after({S, S, S, D, D}), 4 * MiB);  // dma only at the largest sizes
  EXPECT_EQ(dma_after({D, D, D}), 0u);             // dma everywhere: at every size
  EXPECT_EQ(dma_after({D}), 0u);
  // A staged win above a dma win: the window starts after it.
  EXPECT_EQ(dma_after({S, D, S, D, D}), 4 * MiB);
  EXPECT_EQ(dma_after({D, S, D}), 2 * MiB);
  // A tie is the staged kernel's, so it moves the window up.
  const std::vector<TwoShotProtocolTimes> tie{{1 * MiB, 2, 1}, {2 * MiB, 1, 1}, {4 * MiB, 2, 1}};
  EXPECT_EQ(dma_after(tie), 2 * MiB);
}

TEST(DeriveProtocols, NoDmaWinAtTheTopMeansStagedAtEveryMeasuredSize) {
  // dma wins nowhere, or not at the largest size: the window starts past
  // the largest measured size, where the tuned two-shot cutoff ends (an
  // explicit value: the transport's default does not decide instead).
  EXPECT_EQ(dma_after({S, S, S}), 4 * MiB);
  EXPECT_EQ(dma_after({S}), 1 * MiB);
  EXPECT_EQ(dma_after({D, D, S}), 4 * MiB);
  const std::vector<TwoShotProtocolTimes> all_ties{{1 * MiB, 1, 1}, {2 * MiB, 3, 3}};
  EXPECT_EQ(dma_after(all_ties), 2 * MiB);
}

TEST(DeriveProtocols, EachPartWithoutRowsStaysAuto) {
  // Pull mode measures no one-shot protocols; -e below one row, no fused.
  const auto fused = fused_only({L, M, T});
  EXPECT_EQ(fused.one_shot_lamport, std::nullopt);
  EXPECT_NE(fused.fused_lamport, std::nullopt);
  const auto one_shot = derive_protocols(one_shot_rows({L, M}), {});
  EXPECT_EQ(one_shot.one_shot_lamport, Window::above_bytes(1 * KiB));
  EXPECT_EQ(one_shot.fused_lamport, std::nullopt);
  EXPECT_EQ(one_shot.fused_ll, std::nullopt);
}

TEST(DeriveProtocols, OneShotLlPrefix) {
  // The size above which the derived one-shot Lamport window runs: LL up to it.
  auto ll_max = [](std::initializer_list<ProtocolWinner> w) {
    const std::optional<Window> lamport = derive_protocols(one_shot_rows(w), {}).one_shot_lamport;
    EXPECT_TRUE(lamport && lamport->up_to == kNoLimit);
    return lamport ? lamport->above : kNoLimit;
  };
  EXPECT_EQ(ll_max({L, L, L, M, M}), 4 * KiB);
  EXPECT_EQ(ll_max({L, L, L}), 4 * KiB);     // LL everywhere: up to the largest measured size
  EXPECT_EQ(ll_max({M, L, L}), 0u);          // Lamport at the smallest: Lamport everywhere
  EXPECT_EQ(ll_max({L, M, L, L}), 1 * KiB);  // a win after a loss does not extend it
  // A tie is Lamport's, so it ends the prefix.
  const std::vector<OneShotProtocolTimes> tie{{1 * KiB, 1, 2}, {2 * KiB, 2, 2}, {4 * KiB, 1, 2}};
  EXPECT_EQ(derive_protocols(tie, {}).one_shot_lamport, Window::above_bytes(1 * KiB));
}

TEST(DeriveProtocols, TheGpuShape) {
  // LL for small messages, Lamport in the middle, the two-shot for large
  // ones: the shape of the built-in windows.
  const auto t = fused_only({L, L, L, M, M, M, T, T});
  EXPECT_EQ(t.fused_lamport, (Window{8 * KiB, 64 * KiB}));
  EXPECT_EQ(t.fused_ll, Window::up_to_bytes(8 * KiB));
}

TEST(DeriveProtocols, LamportFromTheSmallestSizeHasNoLowerBound) {
  const auto t = fused_only({M, M, T});
  EXPECT_EQ(t.fused_lamport, (Window{0, 4 * KiB}));
  EXPECT_EQ(t.fused_ll, Window::never());  // the two-shot wins the only size outside
}

TEST(DeriveProtocols, LamportWindowIsTheLongestRunTheLowestOnATie) {
  // A lone win at 4 KiB, a longer run 16..64 KiB.
  const auto longest = fused_only({L, M, L, M, M, M, T});
  EXPECT_EQ(longest.fused_lamport, (Window{8 * KiB, 64 * KiB}));
  // Equal runs: the lower one.
  const auto lower = fused_only({L, M, M, T, M, M});
  EXPECT_EQ(lower.fused_lamport, (Window{2 * KiB, 8 * KiB}));
}

TEST(DeriveProtocols, NoLamportWinMeansNever) {
  const auto t = fused_only({L, L, T});
  EXPECT_EQ(t.fused_lamport, Window::never());
  EXPECT_EQ(t.fused_ll, Window::up_to_bytes(4 * KiB));
  // A Lamport tie with the two-shot is not a win.
  const std::vector<FusedProtocolTimes> tie{{2 * KiB, 1, 3, 1, 1}};
  EXPECT_EQ(derive_protocols({}, tie).fused_lamport, Window::never());
}

TEST(DeriveProtocols, FusedLlPrefixSkipsTheLamportWindow) {
  // LL below and above the window: one LL region around it.
  const auto around = fused_only({L, M, M, L, L, T});
  EXPECT_EQ(around.fused_lamport, (Window{2 * KiB, 8 * KiB}));
  EXPECT_EQ(around.fused_ll, Window::up_to_bytes(32 * KiB));
  // LL everywhere: up to the largest measured size.
  EXPECT_EQ(fused_only({L, L, L}).fused_ll, Window::up_to_bytes(8 * KiB));
  // The two-shot at the smallest size outside the window: LL off.
  EXPECT_EQ(fused_only({T, L, L}).fused_ll, Window::never());
  // Every size inside the window: nothing says where LL would win.
  EXPECT_EQ(fused_only({M, M}).fused_ll, Window::never());
}

TEST(DeriveProtocols, FusedLlAgainstTheTwoShotOnlyOutsideTheWindow) {
  // At 4 KiB Lamport is the fastest but outside the (longer) window; LL
  // beats the two-shot there, so the LL region goes on through it.
  const std::vector<FusedProtocolTimes> rows{{2 * KiB, 1, 1, 3, 3},   {4 * KiB, 2, 2, 1, 3},
                                             {8 * KiB, 4, 1, 3, 3},   {16 * KiB, 8, 3, 1, 3},
                                             {32 * KiB, 16, 3, 1, 3}, {64 * KiB, 32, 3, 3, 1}};
  const auto t = derive_protocols({}, rows);
  EXPECT_EQ(t.fused_lamport, (Window{8 * KiB, 32 * KiB}));
  EXPECT_EQ(t.fused_ll, Window::up_to_bytes(8 * KiB));
  // LL tied with the two-shot ends the LL region.
  const std::vector<FusedProtocolTimes> tie{
      {2 * KiB, 1, 1, 3, 3}, {4 * KiB, 2, 2, 3, 2}, {8 * KiB, 4, 1, 3, 3}};
  EXPECT_EQ(derive_protocols({}, tie).fused_ll, Window::up_to_bytes(2 * KiB));
}

TEST(DeriveProtocols, PatternsTheWindowsCannotSay) {
  // LL above a size the two-shot won: the LL region stops below it.
  const auto late_ll = fused_only({L, T, L});
  EXPECT_EQ(late_ll.fused_ll, Window::up_to_bytes(2 * KiB));
  EXPECT_EQ(late_ll.fused_lamport, Window::never());
  // Two Lamport runs: only the lower (equally long) one is a window; the
  // other's sizes get the two-shot (LL ties with it there).
  const auto two_runs = fused_only({M, L, M});
  EXPECT_EQ(two_runs.fused_lamport, (Window{0, 2 * KiB}));
  EXPECT_EQ(two_runs.fused_ll, Window::up_to_bytes(4 * KiB));
}

// --- What the router runs with the derived windows -----------------------

float g_weight[kHidden];

// The CUDA push windows as the transport reports them, with the tuning
// applied as the communicator does (a Config leaving every window auto).
routing::ProtocolWindows tuned_cuda_push(const routing::ProtocolTuning& tuning) {
  return routing::apply_protocol_tuning(routing::test::cuda_push_windows(), tuning,
                                        KernelChoices{});
}

ProtocolWinner routed(const FusedProtocolTimes& row, const routing::ProtocolWindows& w) {
  const auto d = Declaration::fused_add_rms_norm("f", DataType::bf16,
                                                 TensorLayout{row.rows, kHidden}, g_weight, 1e-6f);
  const routing::RouteAndProtocol chosen =
      routing::choose_protocol(Route::fused_one_shot, d, row.bytes, w);
  if (chosen.route == Route::fused_two_shot) return T;
  return chosen.protocol == Protocol::lamport ? M : L;
}

// Whether the windows can give every size its winner: one run of Lamport
// wins at most, and outside it LL wins, then two-shot wins.
bool expressible(const std::vector<ProtocolWinner>& winners) {
  std::vector<ProtocolWinner> outside;
  int lamport_runs = 0;
  for (std::size_t i = 0; i < winners.size(); ++i) {
    if (winners[i] == M) {
      if (i == 0 || winners[i - 1] != M) ++lamport_runs;
      continue;
    }
    outside.push_back(winners[i]);
  }
  for (std::size_t i = 1; i < outside.size(); ++i)
    if (outside[i - 1] == T && outside[i] == L) return false;
  return lamport_runs <= 1;
}

std::vector<ProtocolWinner> pattern_of(int code, int sizes) {
  std::vector<ProtocolWinner> winners;
  for (int i = 0; i < sizes; ++i, code /= 3)
    winners.push_back(static_cast<ProtocolWinner>(code % 3));
  return winners;
}

TEST(DeriveProtocols, RouterGivesEverySizeItsWinnerWhereTheWindowsCan) {
  constexpr int kSizes = 6;
  int expressible_patterns = 0;
  for (int code = 0; code < 729; ++code) {  // 3^6: every winner pattern of 6 sizes
    const auto winners = pattern_of(code, kSizes);
    const auto rows = fused_rows(winners);
    const auto w = tuned_cuda_push(derive_protocols({}, rows));
    const bool exact = expressible(winners);
    expressible_patterns += exact;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const ProtocolWinner ran = routed(rows[i], w);
      SCOPED_TRACE(testing::Message() << "pattern " << code << ", size " << rows[i].bytes);
      if (exact) {
        EXPECT_EQ(ran, winners[i]);
      }
      // Never an unmeasured win: Lamport only where it won, LL only where
      // it beat the two-shot (here: where it won).
      if (ran == M) {
        EXPECT_EQ(winners[i], M);
      }
      if (ran == L) {
        EXPECT_EQ(winners[i], L);
      }
    }
  }
  EXPECT_GT(expressible_patterns, 50);  // 98 of the 729: the exact check did run
}

// Whether one window can give every size its winner: staged wins, then dma wins.
bool expressible_two_shot(const std::vector<ProtocolWinner>& winners) {
  for (std::size_t i = 1; i < winners.size(); ++i)
    if (winners[i - 1] == D && winners[i] == S) return false;
  return true;
}

TEST(DeriveProtocols, RouterRunsDmaOnlyWhereItWon) {
  constexpr int kSizes = 6;
  int expressible_patterns = 0;
  for (int code = 0; code < (1 << kSizes); ++code) {  // every staged/dma pattern of 6 sizes
    std::vector<ProtocolWinner> winners;
    for (int i = 0; i < kSizes; ++i) winners.push_back((code >> i) & 1 ? D : S);
    const auto rows = two_shot_rows(winners);
    const auto w = tuned_cuda_push(derive_protocols({}, {}, rows));
    const bool exact = expressible_two_shot(winners);
    expressible_patterns += exact;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto d = Declaration::all_reduce(
          "ar", DataType::bf16, TensorLayout{static_cast<std::int64_t>(rows[i].bytes / 2)});
      const Protocol ran = routing::choose_protocol(Route::two_shot, d, rows[i].bytes, w).protocol;
      SCOPED_TRACE(testing::Message() << "pattern " << code << ", size " << rows[i].bytes);
      if (exact) {
        EXPECT_EQ(ran, winners[i] == D ? Protocol::dma : Protocol::staged);
      }
      // Never an unmeasured win: dma only where it won.
      if (ran == Protocol::dma) {
        EXPECT_EQ(winners[i], D);
      }
    }
  }
  EXPECT_EQ(expressible_patterns, kSizes + 1);  // S...S D...D: the exact check did run
}

// What the router runs for a bf16 two-shot of `bytes` under the derived windows.
ProtocolWinner two_shot_run(std::size_t bytes, const routing::ProtocolWindows& w) {
  const auto d = Declaration::all_reduce("ar", DataType::bf16,
                                         TensorLayout{static_cast<std::int64_t>(bytes / 2)});
  switch (routing::choose_protocol(Route::two_shot, d, bytes, w).protocol) {
    case Protocol::lamport:
      return M;
    case Protocol::dma:
      return D;
    default:
      return S;
  }
}

// Whether the two windows can give every size its winner: Lamport wins,
// then staged wins, then dma wins (each run possibly empty).
bool expressible_three_way(const std::vector<ProtocolWinner>& winners) {
  const auto rank = [](ProtocolWinner w) { return w == M ? 0 : w == S ? 1 : 2; };
  for (std::size_t i = 1; i < winners.size(); ++i)
    if (rank(winners[i - 1]) > rank(winners[i])) return false;
  return true;
}

TEST(DeriveProtocols, TwoShotWindowsRunLamportAndDmaOnlyWhereTheyWon) {
  constexpr int kSizes = 6;
  constexpr ProtocolWinner kTwoShotWinners[] = {S, M, D};
  int expressible_patterns = 0;
  for (int code = 0; code < 729; ++code) {  // 3^6: every winner pattern of 6 sizes
    std::vector<ProtocolWinner> winners;
    for (int i = 0, c = code; i < kSizes; ++i, c /= 3) winners.push_back(kTwoShotWinners[c % 3]);
    const auto rows = two_shot_rows(winners);
    const auto w = tuned_cuda_push(derive_protocols({}, {}, rows));
    const bool exact = expressible_three_way(winners);
    expressible_patterns += exact;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const ProtocolWinner ran = two_shot_run(rows[i].bytes, w);
      SCOPED_TRACE(testing::Message() << "pattern " << code << ", size " << rows[i].bytes);
      if (exact) {
        EXPECT_EQ(ran, winners[i]);
      }
      // Never an unmeasured win: Lamport and dma only where they won.
      if (ran != S) {
        EXPECT_EQ(ran, winners[i]);
      }
    }
  }
  EXPECT_EQ(expressible_patterns, 28);  // M...M S...S D...D: C(8, 2) patterns
}

TEST(DeriveProtocols, RouterRunsTheOneShotWinners) {
  const auto rows = one_shot_rows({L, L, L, M, M});
  const auto w = tuned_cuda_push(derive_protocols(rows, {}));
  for (const OneShotProtocolTimes& row : rows) {
    const auto d = Declaration::all_reduce("ar", DataType::bf16,
                                           TensorLayout{static_cast<std::int64_t>(row.bytes / 2)});
    EXPECT_EQ(routing::choose_protocol(Route::one_shot, d, row.bytes, w).protocol,
              fastest_protocol(row) == L ? Protocol::ll : Protocol::lamport)
        << row.bytes;
  }
}

}  // namespace
}  // namespace peerplan::tune
