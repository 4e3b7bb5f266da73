// SPDX-License-Identifier: Apache-2.0
// choose_protocol: each window at its boundaries (exactly at a limit and
// one pack over), the fused op's order of preference (Lamport, LL lines,
// two-shot + row norm for dense layouts, the staged kernel), pull mode,
// the host backend's single protocol, and that the router applies it.
#include "routing/protocol_choice.hpp"

#include <gtest/gtest.h>

#include <cstdint>

#include "cuda_push_windows.hpp"

#include "routing/router.hpp"

namespace peerplan::routing {
namespace {

constexpr std::size_t kKiB = 1024;

float g_weight[8192];

// A bf16 all-reduce of `bytes` bytes (even).
Declaration all_reduce_of(std::size_t bytes) {
  return Declaration::all_reduce("ar", DataType::bf16,
                                 TensorLayout{static_cast<std::int64_t>(bytes / 2)});
}

// A bf16 fused op of `rows` rows of `hidden` elements; `row_stride` > hidden
// pads the rows (not dense).
Declaration fused_of(std::int64_t rows, std::int64_t hidden, std::int64_t row_stride = 0) {
  if (row_stride == 0) {
    return Declaration::fused_add_rms_norm("f", DataType::bf16, TensorLayout{rows, hidden},
                                           g_weight, 1e-6f);
  }
  const std::int64_t shape[] = {rows, hidden};
  const std::int64_t strides[] = {row_stride, 1};
  return Declaration::fused_add_rms_norm("f", DataType::bf16, TensorLayout::strided(shape, strides),
                                         g_weight, 1e-6f);
}

ProtocolWindows cuda_push() { return test::cuda_push_windows(); }

RouteAndProtocol choose(Route route, const Declaration& d, const ProtocolWindows& w) {
  return choose_protocol(route, d, message_bytes(d), w);
}

TEST(ProtocolChoice, OneShotLinesUpToTheirLimitLamportAbove) {
  const auto w = cuda_push();
  EXPECT_EQ(choose(Route::one_shot, all_reduce_of(64 * kKiB), w),
            (RouteAndProtocol{Route::one_shot, Protocol::ll}));
  EXPECT_EQ(choose(Route::one_shot, all_reduce_of(64 * kKiB + 2), w),
            (RouteAndProtocol{Route::one_shot, Protocol::lamport}));
  ProtocolWindows never = w;
  never.one_shot_lamport = Window::never();
  EXPECT_EQ(choose(Route::one_shot, all_reduce_of(64 * kKiB * 1024), never).protocol, Protocol::ll);
  ProtocolWindows always = w;
  always.one_shot_lamport = Window::every_size();
  EXPECT_EQ(choose(Route::one_shot, all_reduce_of(2), always).protocol, Protocol::lamport);
}

TEST(ProtocolChoice, TwoShotStagesOrPulls) {
  auto w = cuda_push();
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(8 * kKiB * kKiB), w),
            (RouteAndProtocol{Route::two_shot, Protocol::staged}));
  w.pull = true;
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(8 * kKiB * kKiB), w).protocol, Protocol::pull);
  EXPECT_EQ(choose(Route::one_shot, all_reduce_of(2), w).protocol, Protocol::pull);
  EXPECT_EQ(choose(Route::one_shot, all_reduce_of(1024 * kKiB), w).protocol, Protocol::pull);
}

TEST(ProtocolChoice, TwoShotTakesCopyEnginesAboveItsWindowOnContiguousLayoutsOnly) {
  auto w = cuda_push();
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(64 * kKiB * kKiB), w).protocol, Protocol::staged)
      << "the default window is empty";
  w.two_shot_dma = Window::above_bytes(16 * kKiB * kKiB);
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(16 * kKiB * kKiB), w).protocol, Protocol::staged)
      << "the window starts above its bound";
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(16 * kKiB * kKiB + 2), w),
            (RouteAndProtocol{Route::two_shot, Protocol::dma}));
  // Rows with a padded stride: copy engines move contiguous bytes only.
  const std::int64_t shape[] = {4, 4 * kKiB * kKiB};
  const std::int64_t strides[] = {8 * kKiB * kKiB, 1};
  const Declaration strided =
      Declaration::all_reduce("ar", DataType::bf16, TensorLayout::strided(shape, strides));
  EXPECT_EQ(choose(Route::two_shot, strided, w).protocol, Protocol::staged);
  w.two_shot_dma = Window::every_size();
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(2), w).protocol, Protocol::dma);
  // Neither the one-shot, the hierarchical route nor pull take it.
  EXPECT_EQ(choose(Route::one_shot, all_reduce_of(2), w).protocol, Protocol::ll);
  EXPECT_EQ(choose(Route::hierarchical, all_reduce_of(64 * kKiB * kKiB), w).protocol,
            Protocol::staged);
  w.pull = true;
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(64 * kKiB * kKiB), w).protocol, Protocol::pull);
}

TEST(ProtocolChoice, TwoShotTakesLamportUpToItsWindowOnAnyLayoutBeforeCopyEngines) {
  auto w = cuda_push();
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(2), w).protocol, Protocol::staged)
      << "the default window is closed";
  w.two_shot_lamport = Window::up_to_bytes(4 * kKiB * kKiB);
  w.two_shot_dma = Window::every_size();  // copy engines everywhere else: Lamport still comes first
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(4 * kKiB * kKiB), w),
            (RouteAndProtocol{Route::two_shot, Protocol::lamport}))
      << "the window includes its bound";
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(4 * kKiB * kKiB + 2), w).protocol, Protocol::dma);
  // Strided rows travel as packs of their elements, like the one-shot's.
  const std::int64_t shape[] = {4, 128 * kKiB};
  const std::int64_t strides[] = {256 * kKiB, 1};
  const Declaration strided =
      Declaration::all_reduce("ar", DataType::bf16, TensorLayout::strided(shape, strides));
  EXPECT_EQ(choose(Route::two_shot, strided, w).protocol, Protocol::lamport);
  w.two_shot_dma = Window::never();
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(4 * kKiB * kKiB + 2), w).protocol,
            Protocol::staged);
  w.two_shot_lamport = Window::every_size();
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(1024 * kKiB * kKiB), w).protocol,
            Protocol::lamport);
  // The one-shot keeps its own window; pull and the host backend have no Lamport.
  EXPECT_EQ(choose(Route::one_shot, all_reduce_of(2), w).protocol, Protocol::ll);
  ProtocolWindows pull = w;
  pull.pull = true;
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(2), pull).protocol, Protocol::pull);
  ProtocolWindows host;
  host.two_shot_lamport = Window::every_size();
  EXPECT_EQ(choose(Route::two_shot, all_reduce_of(2), host).protocol, Protocol::staged);
}

TEST(ProtocolChoice, HostBackendStagesEveryRoute) {
  const ProtocolWindows host;  // the defaults
  for (Route route : {Route::one_shot, Route::two_shot, Route::hierarchical}) {
    EXPECT_EQ(choose(route, all_reduce_of(1024), host), (RouteAndProtocol{route, Protocol::staged}))
        << to_string(route);
  }
  // Every fused size, dense or not: the one-shot route, staged.
  for (std::int64_t rows : {1, 64, 4096}) {
    EXPECT_EQ(choose(Route::fused_one_shot, fused_of(rows, 4096), host),
              (RouteAndProtocol{Route::fused_one_shot, Protocol::staged}))
        << rows;
  }
  EXPECT_EQ(choose(Route::hierarchical, fused_of(4, 4096), host),
            (RouteAndProtocol{Route::hierarchical, Protocol::staged}));
}

TEST(ProtocolChoice, FusedLamportWindowIsOpenBelowAndClosedAbove) {
  const auto w = cuda_push();
  // 8 rows x 4096 bf16 = 64 KiB: at the threshold, not above it -> LL lines.
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(8, 4096), w),
            (RouteAndProtocol{Route::fused_one_shot, Protocol::ll}));
  // One more row is above it.
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(9, 4096), w).protocol, Protocol::lamport);
  // 512 rows = 4 MiB: the window's top, still Lamport; 513 rows past it and
  // past the LL limit: dense, so two-shot + row norm.
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(512, 4096), w).protocol, Protocol::lamport);
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(513, 4096), w),
            (RouteAndProtocol{Route::fused_two_shot, Protocol::staged}));
}

TEST(ProtocolChoice, FusedRowsThatAreNotWholePacksNeverTakeLinesOrLamport) {
  const auto w = cuda_push();
  // 100 bf16 = 200 bytes a row, not a multiple of 16.
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(1, 100), w),
            (RouteAndProtocol{Route::fused_two_shot, Protocol::staged}));
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(1000, 100), w),
            (RouteAndProtocol{Route::fused_two_shot, Protocol::staged}));
  // Not dense either: the staged fused kernel.
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(4, 100, 128), w),
            (RouteAndProtocol{Route::fused_one_shot, Protocol::staged}));
}

TEST(ProtocolChoice, PaddedFusedRowsKeepTheOneShotRoute) {
  const auto w = cuda_push();
  // Whole-pack rows, padded: Lamport and LL take strided rows.
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(4, 4096, 4352), w).protocol, Protocol::ll);
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(64, 4096, 4352), w).protocol, Protocol::lamport);
  // Past both windows a padded message cannot run two-shot in place.
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(1024, 4096, 4352), w),
            (RouteAndProtocol{Route::fused_one_shot, Protocol::staged}));
}

TEST(ProtocolChoice, FusedWindowsCanBeClosed) {
  auto w = cuda_push();
  w.fused_lamport = Window::never();  // PEERPLAN_FUSED_LAMPORT=never
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(64, 4096), w).protocol, Protocol::ll);
  w.fused_ll = Window::never();  // LL off too
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(1, 4096), w),
            (RouteAndProtocol{Route::fused_two_shot, Protocol::staged}));
  w.fused_two_shot = false;
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(1, 4096), w),
            (RouteAndProtocol{Route::fused_one_shot, Protocol::staged}));
}

TEST(ProtocolChoice, FusedTwoShotReducesOnThePlainTwoShotsProtocolForTheSameBytes) {
  auto w = cuda_push();
  w.two_shot_lamport = Window::up_to_bytes(4 * kKiB * kKiB);
  w.two_shot_dma = Window::above_bytes(8 * kKiB * kKiB);
  // 8 MiB and 16 MiB + 8 KiB dense messages past the fused windows (4 MiB).
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(1024, 4096), w),
            (RouteAndProtocol{Route::fused_two_shot, Protocol::staged}));
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(2049, 4096), w),
            (RouteAndProtocol{Route::fused_two_shot, Protocol::dma}));
  // Below the fused windows' end only when they are closed: then Lamport.
  w.fused_lamport = Window::never();
  w.fused_ll = Window::never();
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(64, 4096), w),
            (RouteAndProtocol{Route::fused_two_shot, Protocol::lamport}));
  // Padded rows never take the two-shot (it reduces in place).
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(64, 4096, 4352), w),
            (RouteAndProtocol{Route::fused_one_shot, Protocol::staged}));
  // Pull mode has no Lamport and no copy engines (the transport closes
  // the dma window; `lines` is off): the staged two-shot.
  w.lines = false;
  w.two_shot_dma = Window::never();
  EXPECT_EQ(choose(Route::fused_one_shot, fused_of(64, 4096), w),
            (RouteAndProtocol{Route::fused_two_shot, Protocol::staged}));
}

TEST(ProtocolChoice, FallbackHasNoProtocol) {
  EXPECT_EQ(choose(Route::fallback, all_reduce_of(2), cuda_push()),
            (RouteAndProtocol{Route::fallback, Protocol::none}));
}

TEST(ProtocolChoice, TheRouterAppliesItToEveryAdmittedPlan) {
  RoutingContext context{2, 1, true, RouteCutoffs{1024 * kKiB, 64 * 1024 * kKiB, 64 * 1024 * kKiB}};
  context.protocols = cuda_push();
  const auto small = route_declaration(all_reduce_of(1024), context);
  EXPECT_EQ(small.route, Route::one_shot);
  EXPECT_EQ(small.protocol, Protocol::ll);
  const auto large_fused = route_declaration(fused_of(1024, 4096), context);  // 8 MiB
  EXPECT_EQ(large_fused.route, Route::fused_two_shot);
  EXPECT_EQ(large_fused.protocol, Protocol::staged);
  EXPECT_EQ(large_fused.reason, FallbackReason::none);
  // The cutoffs still decide admission: over the fused cutoff is the fallback.
  const auto too_large = route_declaration(fused_of(16384, 4096), context);  // 128 MiB
  EXPECT_EQ(too_large.route, Route::fallback);
  EXPECT_EQ(too_large.protocol, Protocol::none);
  // Several nodes: hierarchical, staged, whatever the single-node windows say.
  context.num_nodes = 2;
  context.world_size = 4;
  context.ranks_per_node = 2;
  const auto across = route_declaration(fused_of(1024, 4096), context);
  EXPECT_EQ(across.route, Route::hierarchical);
  EXPECT_EQ(across.protocol, Protocol::staged);
}

}  // namespace
}  // namespace peerplan::routing
