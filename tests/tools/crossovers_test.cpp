// SPDX-License-Identifier: Apache-2.0
// derive_cutoffs: the one-shot prefix, the two-shot window (its lower
// bound, the longest run, none at all), the fused prefix, and ties.
#include "crossovers.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace peerplan::tune {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

// A row where `winner` takes 1 µs and the others 2 µs.
AllReduceTimes row(std::size_t bytes, Winner winner) {
  AllReduceTimes t{bytes, 2, 2, 2};
  (winner == Winner::one_shot   ? t.one_shot_us
   : winner == Winner::two_shot ? t.two_shot_us
                                : t.fallback_us) = 1;
  return t;
}

std::vector<AllReduceTimes> rows(std::size_t first, std::initializer_list<Winner> winners) {
  std::vector<AllReduceTimes> out;
  std::size_t bytes = first;
  for (Winner w : winners) {
    out.push_back(row(bytes, w));
    bytes *= 2;
  }
  return out;
}

constexpr Winner O = Winner::one_shot, T = Winner::two_shot, F = Winner::fallback;

TEST(Fastest, StrictWinsAndTies) {
  EXPECT_EQ(fastest({0, 1, 2, 3}), Winner::one_shot);
  EXPECT_EQ(fastest({0, 3, 1, 2}), Winner::two_shot);
  EXPECT_EQ(fastest({0, 3, 2, 1}), Winner::fallback);
  // A P2P route must beat the fallback: a tie is the fallback's.
  EXPECT_EQ(fastest({0, 1, 2, 1}), Winner::fallback);
  EXPECT_EQ(fastest({0, 2, 1, 1}), Winner::fallback);
  // One-shot and two-shot tied, both ahead: one-shot (taken first anyway).
  EXPECT_EQ(fastest({0, 1, 1, 2}), Winner::one_shot);
}

TEST(DeriveCutoffs, TheGpuShape) {
  // One-shot up to 64 KiB, the fallback at 128 and 256 KiB, two-shot from
  // 512 KiB to 4 MiB, the fallback above: the window of the H200 numbers.
  const auto times = rows(16 * KiB, {O, O, O, F, F, T, T, T, T, F, F});
  const RouteCutoffs c = derive_cutoffs(times, {});
  EXPECT_EQ(c.one_shot_max_bytes, 64 * KiB);
  EXPECT_EQ(c.two_shot_min_bytes, 512 * KiB);
  EXPECT_EQ(c.two_shot_max_bytes, 4 * MiB);
  EXPECT_EQ(c.fused_max_bytes, kAutoCutoff);  // no fused rows: not measured
}

TEST(DeriveCutoffs, OneShotNeedsToWinEverySizeUpToItsCutoff) {
  // A one-shot win after a loss does not extend its cutoff.
  const auto times = rows(1 * KiB, {O, O, F, O, O});
  EXPECT_EQ(derive_cutoffs(times, {}).one_shot_max_bytes, 2 * KiB);
  // Not even at the smallest size: 0 (route off).
  EXPECT_EQ(derive_cutoffs(rows(1 * KiB, {F, O, O}), {}).one_shot_max_bytes, 0u);
}

TEST(DeriveCutoffs, WindowRightAboveOneShotHasNoLowerBound) {
  // Nothing measured between one-shot's last win and two-shot's first lost
  // to the fallback: the window reaches down to one-shot's cutoff.
  const RouteCutoffs c = derive_cutoffs(rows(1 * KiB, {O, O, T, T, F}), {});
  EXPECT_EQ(c.one_shot_max_bytes, 2 * KiB);
  EXPECT_EQ(c.two_shot_min_bytes, 0u);
  EXPECT_EQ(c.two_shot_max_bytes, 8 * KiB);
  // Also when two-shot wins from the smallest size on.
  const RouteCutoffs d = derive_cutoffs(rows(1 * KiB, {T, T, F}), {});
  EXPECT_EQ(d.one_shot_max_bytes, 0u);
  EXPECT_EQ(d.two_shot_min_bytes, 0u);
  EXPECT_EQ(d.two_shot_max_bytes, 2 * KiB);
}

TEST(DeriveCutoffs, LongestTwoShotRunWins) {
  // A lone (noisy) win at 4 KiB, a real window 32..128 KiB.
  const RouteCutoffs c = derive_cutoffs(rows(1 * KiB, {O, F, T, F, F, T, T, T, F}), {});
  EXPECT_EQ(c.two_shot_min_bytes, 32 * KiB);
  EXPECT_EQ(c.two_shot_max_bytes, 128 * KiB);
  // Equal runs: the lower one.
  const RouteCutoffs d = derive_cutoffs(rows(1 * KiB, {F, T, T, F, T, T}), {});
  EXPECT_EQ(d.two_shot_min_bytes, 2 * KiB);
  EXPECT_EQ(d.two_shot_max_bytes, 4 * KiB);
}

TEST(DeriveCutoffs, TwoShotMustBeatOneShotToo) {
  // Above one-shot's region one-shot still wins at 8 KiB: not two-shot's.
  const RouteCutoffs c = derive_cutoffs(rows(1 * KiB, {O, F, T, O, F}), {});
  EXPECT_EQ(c.one_shot_max_bytes, 1 * KiB);
  EXPECT_EQ(c.two_shot_min_bytes, 4 * KiB);
  EXPECT_EQ(c.two_shot_max_bytes, 4 * KiB);
}

TEST(DeriveCutoffs, NoTwoShotWinMeansNoWindow) {
  const RouteCutoffs c = derive_cutoffs(rows(1 * KiB, {O, O, F, F}), {});
  EXPECT_EQ(c.two_shot_min_bytes, 0u);
  EXPECT_EQ(c.two_shot_max_bytes, 0u);
}

TEST(DeriveCutoffs, FusedPrefix) {
  const std::vector<FusedTimes> fused{
      {14336, 1, 5, 9}, {28672, 2, 6, 9}, {57344, 4, 9, 9}, {114688, 8, 7, 9}};
  // 57344 ties (not a win), so the later win does not count.
  EXPECT_EQ(derive_cutoffs({}, fused).fused_max_bytes, 28672u);
  EXPECT_EQ(derive_cutoffs({}, std::vector<FusedTimes>{{14336, 1, 9, 5}}).fused_max_bytes, 0u);
}

TEST(DeriveCutoffs, NoAllReduceMeasuredDisablesItsRoutes) {
  EXPECT_EQ(derive_cutoffs({}, {}), (RouteCutoffs{0, 0, kAutoCutoff, 0}));
}

TEST(DeriveCutoffs, NoFusedRowLeavesTheFusedCutoffAuto) {
  // -e below one row of --hidden: no fused size was timed, so the entry
  // must not turn the fused route off (0) but keep the default (auto).
  const RouteCutoffs c = derive_cutoffs(rows(1 * KiB, {O, O, F}), {});
  EXPECT_EQ(c.one_shot_max_bytes, 2 * KiB);
  EXPECT_EQ(c.fused_max_bytes, kAutoCutoff);
  // A fused row that lost is a measurement: the route is off.
  EXPECT_EQ(derive_cutoffs({}, std::vector<FusedTimes>{{14336, 1, 9, 5}}).fused_max_bytes, 0u);
}

}  // namespace
}  // namespace peerplan::tune
