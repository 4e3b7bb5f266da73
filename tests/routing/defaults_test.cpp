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

TEST(BuiltinDefaults, LaunchShapes) {
  EXPECT_EQ(kOneShotBlocksPerMultiprocessor, 1);
  EXPECT_EQ(kDmaPieceTargetBytes, 8 * MiB);
}

}  // namespace
}  // namespace peerplan::routing
