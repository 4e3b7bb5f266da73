// SPDX-License-Identifier: Apache-2.0
// The built-in defaults table: the protocol windows it gives the CUDA
// backend at 2 and 8 ranks are those the transport ran before the table
// existed (LL up to 64 KiB then Lamport; fused Lamport in (64 KiB, 4 MiB],
// fused LL up to 2 MiB; the two-shot's copy engines and Lamport off), pull
// mode keeps only the fused windows, and the host backend has one protocol.
#include "routing/defaults.hpp"

#include <gtest/gtest.h>

#include "cuda_push_windows.hpp"

namespace peerplan::routing {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

TEST(DefaultProtocolWindows, CudaPushAtTwoAndEightRanks) {
  for (int ranks : {2, 8}) {
    const ProtocolWindows w = default_protocol_windows(Backend::cuda, ranks, false);
    EXPECT_EQ(w.one_shot_lamport, Window::above_bytes(64 * KiB)) << ranks;
    EXPECT_EQ(w.fused_lamport, (Window{64 * KiB, 4 * MiB})) << ranks;
    EXPECT_EQ(w.fused_ll, Window::up_to_bytes(2 * MiB)) << ranks;
    EXPECT_EQ(w.two_shot_dma, Window::never()) << ranks;
    EXPECT_EQ(w.two_shot_lamport, Window::never()) << ranks;
    EXPECT_TRUE(w.lines && w.fused_two_shot && w.tunable && !w.pull) << ranks;
    EXPECT_EQ(w, test::cuda_push_windows()) << "the routing tests' statement of them";
  }
}

TEST(DefaultProtocolWindows, CudaPullKeepsTheFusedWindowsOnly) {
  for (int ranks : {2, 8}) {
    const ProtocolWindows w = default_protocol_windows(Backend::cuda, ranks, true);
    EXPECT_TRUE(w.pull);
    EXPECT_FALSE(w.lines) << "no Lamport region for the pull one-shot";
    EXPECT_EQ(w.one_shot_lamport, Window::never());
    EXPECT_EQ(w.two_shot_dma, Window::never());
    EXPECT_EQ(w.two_shot_lamport, Window::never());
    EXPECT_EQ(w.fused_lamport, (Window{64 * KiB, 4 * MiB})) << "the fused op always pushes";
    EXPECT_EQ(w.fused_ll, Window::up_to_bytes(2 * MiB));
    EXPECT_TRUE(w.fused_two_shot && w.tunable);
  }
}

TEST(DefaultProtocolWindows, HostHasOneProtocol) {
  for (bool pull : {false, true})
    EXPECT_EQ(default_protocol_windows(Backend::host, 2, pull), ProtocolWindows{});
}

TEST(DefaultProtocolWindows, TheRouterRunsTheOldChoicesAtTheirEdges) {
  const ProtocolWindows w = default_protocol_windows(Backend::cuda, 2, false);
  EXPECT_FALSE(w.one_shot_lamport.contains(64 * KiB)) << "LL up to 64 KiB";
  EXPECT_TRUE(w.one_shot_lamport.contains(64 * KiB + 16));
  EXPECT_FALSE(w.fused_lamport.contains(64 * KiB));
  EXPECT_TRUE(w.fused_lamport.contains(4 * MiB));
  EXPECT_FALSE(w.fused_lamport.contains(4 * MiB + 16));
  EXPECT_TRUE(w.fused_ll.contains(2 * MiB));
  EXPECT_FALSE(w.fused_ll.contains(2 * MiB + 16));
}

// Over PCIe the LL lines' doubled bytes cost 7-15x more than over NV18
// (450 GB/s): the Lamport windows start at 64 KiB x the speed ratio, as a
// power of two; their upper edges and every other window stay.
TEST(DefaultLinkWindows, NvlinkOrUnknownMovesNothing) {
  EXPECT_EQ(default_link_windows(NodeLink{}), ProtocolTuning{});
  EXPECT_EQ(default_link_windows(NodeLink{false, 31508}), ProtocolTuning{});
  EXPECT_EQ(describe_node_link(NodeLink{}), "NVLink or unknown");
}

TEST(DefaultLinkWindows, PcieMovesTheLamportEdgesByTheSpeedRatio) {
  const ProtocolTuning gen4 = default_link_windows(NodeLink{true, 31508});
  EXPECT_EQ(gen4.one_shot_lamport, Window::above_bytes(4 * KiB));  // 64 KiB x 0.070 = 4.5 KiB
  EXPECT_EQ(gen4.fused_lamport, (Window{4 * KiB, 4 * MiB}));
  EXPECT_FALSE(gen4.fused_ll || gen4.two_shot_dma || gen4.two_shot_lamport);
  EXPECT_EQ(describe_node_link(NodeLink{true, 31508}), "PCIe at 31.5 GB/s");

  const ProtocolTuning gen5 = default_link_windows(NodeLink{true, 63015});
  EXPECT_EQ(gen5.one_shot_lamport, Window::above_bytes(8 * KiB));  // 9.0 KiB
  EXPECT_EQ(gen5.fused_lamport, (Window{8 * KiB, 4 * MiB}));

  // An unknown speed is taken as PCIe 4.0 x16; a very slow link keeps one pack.
  EXPECT_EQ(default_link_windows(NodeLink{true, 0}), gen4);
  EXPECT_EQ(describe_node_link(NodeLink{true, 0}), "PCIe at an unknown speed, taken as 31.5 GB/s");
  EXPECT_EQ(default_link_windows(NodeLink{true, 1}).one_shot_lamport, Window::above_bytes(16));
}

TEST(DefaultLinkWindows, AFasterLinkThanTheMeasuredOneMovesNothingUp) {
  const ProtocolTuning fast = default_link_windows(NodeLink{true, 900000});
  EXPECT_EQ(fast.one_shot_lamport, Window::above_bytes(64 * KiB));
  EXPECT_EQ(fast.fused_lamport, (Window{64 * KiB, 4 * MiB}));
}

TEST(DefaultLinkWindows, AppliedLikeATuningEntryTheConfigStillWins) {
  const ProtocolTuning gen4 = default_link_windows(NodeLink{true, 31508});
  const ProtocolWindows moved = apply_protocol_tuning(test::cuda_push_windows(), gen4, {});
  EXPECT_TRUE(moved.one_shot_lamport.contains(4 * KiB + 16));
  EXPECT_FALSE(moved.one_shot_lamport.contains(4 * KiB));
  EXPECT_TRUE(moved.fused_lamport.contains(8 * KiB));
  EXPECT_EQ(moved.fused_ll, Window::up_to_bytes(2 * MiB)) << "rows Lamport cannot take";
  KernelChoices kernels;
  kernels.one_shot_lamport = Window::above_bytes(64 * KiB);
  const ProtocolWindows configured =
      apply_protocol_tuning(test::cuda_push_windows(), gen4, kernels);
  EXPECT_EQ(configured.one_shot_lamport, Window::above_bytes(64 * KiB));
  EXPECT_EQ(configured.fused_lamport, (Window{4 * KiB, 4 * MiB}));
}

TEST(BuiltinDefaults, LaunchShapes) {
  EXPECT_EQ(kOneShotBlocksPerMultiprocessor, 1);
  EXPECT_EQ(kDmaPieceTargetBytes, 8 * MiB);
}

}  // namespace
}  // namespace peerplan::routing
