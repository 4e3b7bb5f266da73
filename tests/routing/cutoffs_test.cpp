// SPDX-License-Identifier: Apache-2.0
// The default cutoff table and the resolution of kAutoCutoff fields.
#include "routing/cutoffs.hpp"

#include <gtest/gtest.h>

namespace peerplan::routing {
namespace {

TEST(DefaultCutoffs, FiniteAndNonZeroForEveryWorldSize) {
  for (Backend backend : {Backend::host, Backend::cuda}) {
    for (int n = -1; n <= 64; ++n) {
      const RouteCutoffs c = default_cutoffs(n, backend);
      for (std::size_t v :
           {c.one_shot_max_bytes, c.two_shot_min_bytes, c.two_shot_max_bytes, c.fused_max_bytes}) {
        EXPECT_NE(v, kAutoCutoff) << "world size " << n;
      }
      EXPECT_GT(c.one_shot_max_bytes, 0u) << "world size " << n;
      EXPECT_GT(c.fused_max_bytes, 0u) << "world size " << n;
      if (backend == Backend::host) {
        EXPECT_GT(c.two_shot_max_bytes, 0u) << "world size " << n;
      }
    }
  }
}

TEST(DefaultCutoffs, CudaTwoRanksAreTheMeasuredCrossovers) {
  // Measured on 2x H200 (CHANGELOG.md): one-shot (Lamport)
  // fastest up to 4 MiB, two-shot beats NCCL from there to 64 MiB (at
  // 256 MiB by 3%, not worth its 1 GiB of staging), fused beats NCCL +
  // add/RMSNorm up to 16 MiB.
  const RouteCutoffs c = default_cutoffs(2, Backend::cuda);
  EXPECT_EQ(c.one_shot_max_bytes, 4u * 1024 * 1024);
  EXPECT_EQ(c.two_shot_max_bytes, 64u * 1024 * 1024);
  EXPECT_EQ(c.fused_max_bytes, 16u * 1024 * 1024);
  // More ranks push (n-1) copies: the limits shrink, stay whole packs, never grow.
  for (int n = 3; n <= 16; ++n) {
    const RouteCutoffs m = default_cutoffs(n, Backend::cuda);
    EXPECT_LE(m.one_shot_max_bytes, default_cutoffs(n - 1, Backend::cuda).one_shot_max_bytes) << n;
    EXPECT_LE(m.fused_max_bytes, default_cutoffs(n - 1, Backend::cuda).fused_max_bytes) << n;
    EXPECT_LE(m.two_shot_max_bytes, default_cutoffs(n - 1, Backend::cuda).two_shot_max_bytes) << n;
    EXPECT_EQ(m.fused_max_bytes % 16, 0u) << n;
    EXPECT_EQ(m.two_shot_max_bytes % 16, 0u) << n;
    // Two-shot takes over right above one-shot.
    EXPECT_GT(m.two_shot_max_bytes, m.one_shot_max_bytes) << n;
  }
}

TEST(DefaultCutoffs, OverPcieTheOneShotLimitBeyondTwoRanksScalesWithTheLink) {
  // The same model with B x the link's speed over NV18's 450 GB/s: one-shot
  // sends (n-1) M, two-shot 2 (n-1)/n M, and over PCIe those bytes cost
  // 7-15x more. Two ranks send M either way: their measured limit stays.
  constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;
  const NodeLink gen4{true, 31508}, gen5{true, 63015};
  EXPECT_EQ(default_cutoffs(2, Backend::cuda, gen4), default_cutoffs(2, Backend::cuda));
  const std::pair<int, std::size_t> at_gen4[] = {{3, 64 * KiB}, {4, 32 * KiB}, {5, 16 * KiB},
                                                 {6, 16 * KiB}, {7, 16 * KiB}, {8, 8 * KiB}};
  for (auto [n, limit] : at_gen4) {
    const RouteCutoffs pcie = default_cutoffs(n, Backend::cuda, gen4);
    EXPECT_EQ(pcie.one_shot_max_bytes, limit) << n;
    RouteCutoffs others = pcie;
    others.one_shot_max_bytes = default_cutoffs(n, Backend::cuda).one_shot_max_bytes;
    EXPECT_EQ(others, default_cutoffs(n, Backend::cuda)) << "only the one-shot limit moves, " << n;
  }
  EXPECT_EQ(default_cutoffs(3, Backend::cuda, gen5).one_shot_max_bytes, 128 * KiB);
  EXPECT_EQ(default_cutoffs(4, Backend::cuda, gen5).one_shot_max_bytes, 64 * KiB);
  EXPECT_EQ(default_cutoffs(8, Backend::cuda, gen5).one_shot_max_bytes, 16 * KiB);
  EXPECT_EQ(default_cutoffs(4, Backend::cuda, NodeLink{true, 0}),
            default_cutoffs(4, Backend::cuda, gen4))
      << "an unknown speed is taken as PCIe 4.0 x16";
  EXPECT_EQ(default_cutoffs(4, Backend::host, gen4), default_cutoffs(4, Backend::host));
  EXPECT_EQ(resolve_cutoffs(RouteCutoffs{}, RouteCutoffs{}, 4, Backend::cuda, gen4),
            default_cutoffs(4, Backend::cuda, gen4));
  EXPECT_EQ(default_cutoffs(4, Backend::cuda, gen4).two_shot_max_bytes, 32 * MiB);
}

TEST(DefaultCutoffs, CudaBeyondTwoRanksFollowTheLinkBytesModel) {
  // src/routing/cutoffs.cpp and docs/concepts.md "World sizes": one-shot up to
  // a B n / ((n-1)(n-2)) with a B = 1.1 MB, as a power of two; two-shot up
  // to 128 MiB / n (constant staging); fused 16 MiB / (n-1).
  constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;
  const std::pair<int, std::size_t> one_shot[] = {{3, 1 * MiB},   {4, 512 * KiB}, {5, 256 * KiB},
                                                  {6, 256 * KiB}, {7, 128 * KiB}, {8, 128 * KiB}};
  for (auto [n, limit] : one_shot)
    EXPECT_EQ(default_cutoffs(n, Backend::cuda).one_shot_max_bytes, limit) << n;
  EXPECT_EQ(default_cutoffs(4, Backend::cuda).two_shot_max_bytes, 32 * MiB);
  EXPECT_EQ(default_cutoffs(8, Backend::cuda).two_shot_max_bytes, 16 * MiB);
  EXPECT_EQ(default_cutoffs(3, Backend::cuda).two_shot_max_bytes, 128 * MiB / 3 / 16 * 16);
  EXPECT_EQ(default_cutoffs(4, Backend::cuda).fused_max_bytes, 16 * MiB / 3 / 16 * 16);
  EXPECT_EQ(default_cutoffs(8, Backend::cuda).fused_max_bytes, 16 * MiB / 7 / 16 * 16);
}

TEST(DefaultCutoffs, TwoShotHasNoLowerBoundByDefault) {
  // Not measured yet on either backend: the window starts right above
  // one-shot.
  for (Backend backend : {Backend::host, Backend::cuda})
    for (int n = 1; n <= 16; ++n)
      EXPECT_EQ(default_cutoffs(n, backend).two_shot_min_bytes, 0u) << n;
}

TEST(DefaultCutoffs, BelowTwoRanksUseTheTwoRankRow) {
  EXPECT_EQ(default_cutoffs(1), default_cutoffs(2));
  EXPECT_EQ(default_cutoffs(0), default_cutoffs(2));
}

TEST(DefaultCutoffs, OneShotShrinksAsTheWorldGrows) {
  // The documented design: the bytes a rank pulls per one-shot call,
  // (n-1) x limit, stay at or under 1 MiB, and the limit never grows with n.
  std::size_t previous = default_cutoffs(2).one_shot_max_bytes;
  for (int n = 2; n <= 64; ++n) {
    const RouteCutoffs c = default_cutoffs(n);
    EXPECT_LE(c.one_shot_max_bytes, previous) << n;
    EXPECT_LE(static_cast<std::size_t>(n - 1) * c.one_shot_max_bytes, std::size_t{1} << 20) << n;
    EXPECT_GE(c.two_shot_max_bytes, c.one_shot_max_bytes) << n;
    // The fused op is a one-shot reduction: same limit.
    EXPECT_EQ(c.fused_max_bytes, c.one_shot_max_bytes) << n;
    previous = c.one_shot_max_bytes;
  }
  EXPECT_LT(default_cutoffs(8).one_shot_max_bytes, default_cutoffs(2).one_shot_max_bytes);
}

TEST(DefaultCutoffs, OneShotIsTheLargestPowerOfTwoWithinTheBudget) {
  // Doubling the limit would break the 1 MiB budget or the 512 KiB cap.
  for (int n = 2; n <= 1024; ++n) {
    const std::size_t limit = default_cutoffs(n).one_shot_max_bytes;
    EXPECT_EQ(limit & (limit - 1), 0u) << n;
    const bool at_cap = limit == 512 * 1024;
    const bool budget_full = static_cast<std::size_t>(n - 1) * 2 * limit > (std::size_t{1} << 20);
    EXPECT_TRUE(at_cap || budget_full) << n << ": " << limit;
  }
  EXPECT_EQ(default_cutoffs(2).one_shot_max_bytes, 512u * 1024);
  EXPECT_EQ(default_cutoffs(4).one_shot_max_bytes, 256u * 1024);
  EXPECT_EQ(default_cutoffs(8).one_shot_max_bytes, 128u * 1024);
}

TEST(ResolveCutoffs, ReplacesOnlyAutomaticFields) {
  const RouteCutoffs defaults = default_cutoffs(4);
  const RouteCutoffs all_auto;
  EXPECT_EQ(resolve_cutoffs(all_auto, 4), defaults);

  RouteCutoffs mixed;
  mixed.one_shot_max_bytes = 0;  // disabled stays disabled
  mixed.fused_max_bytes = 12345;
  const RouteCutoffs resolved = resolve_cutoffs(mixed, 4);
  EXPECT_EQ(resolved.one_shot_max_bytes, 0u);
  EXPECT_EQ(resolved.two_shot_max_bytes, defaults.two_shot_max_bytes);
  EXPECT_EQ(resolved.fused_max_bytes, 12345u);
}

TEST(ResolveCutoffs, ExplicitBeatsTunedBeatsDefault) {
  const RouteCutoffs defaults = default_cutoffs(2, Backend::cuda);
  RouteCutoffs configured;            // only one-shot explicit
  configured.one_shot_max_bytes = 0;  // even 0 (route off) is explicit
  RouteCutoffs tuned;                 // a tuning entry without fused_max_bytes
  tuned.one_shot_max_bytes = 32768;
  tuned.two_shot_min_bytes = 1 << 20;
  tuned.two_shot_max_bytes = 16 << 20;
  const RouteCutoffs resolved = resolve_cutoffs(configured, tuned, 2, Backend::cuda);
  EXPECT_EQ(resolved.one_shot_max_bytes, 0u);                     // config
  EXPECT_EQ(resolved.two_shot_min_bytes, 1u << 20);               // tuning file
  EXPECT_EQ(resolved.two_shot_max_bytes, 16u << 20);              // tuning file
  EXPECT_EQ(resolved.fused_max_bytes, defaults.fused_max_bytes);  // default
}

TEST(ResolveCutoffs, NoTunedValuesMeansTheDefaults) {
  for (Backend backend : {Backend::host, Backend::cuda}) {
    EXPECT_EQ(resolve_cutoffs(RouteCutoffs{}, RouteCutoffs{}, 4, backend),
              default_cutoffs(4, backend));
  }
}

TEST(ResolveCutoffs, FillAutomaticTakesOnlyMissingFields) {
  const RouteCutoffs preferred{1, kAutoCutoff, 3, kAutoCutoff};
  const RouteCutoffs fallback{10, 20, 30, 40};
  EXPECT_EQ(fill_automatic(preferred, fallback), (RouteCutoffs{1, 20, 3, 40}));
}

TEST(DescribeCutoffs, NamesEveryFieldInFileOrder) {
  EXPECT_EQ(describe_cutoffs(RouteCutoffs{65536, 0, 3670016, 1048576, 4096}),
            "one_shot_max_bytes=65536 two_shot_min_bytes=1048576 two_shot_max_bytes=0 "
            "fused_max_bytes=3670016 two_shot_chunk_bytes=4096");
  EXPECT_EQ(describe_cutoffs(RouteCutoffs{}),
            "one_shot_max_bytes=auto two_shot_min_bytes=auto two_shot_max_bytes=auto "
            "fused_max_bytes=auto two_shot_chunk_bytes=auto");
}

TEST(ResolveCutoffs, ConfigDefaultsAreAutomatic) {
  // A Config nobody touched routes by the world-size table.
  const RouteCutoffs untouched = Config{}.cutoffs;
  EXPECT_EQ(resolve_cutoffs(untouched, 8), default_cutoffs(8));
  EXPECT_EQ(resolve_cutoffs(untouched, 2), default_cutoffs(2));
}

// A two-shot is split only when its layout is contiguous and its message
// exceeds the piece size, which is rounded down to 256 bytes (0 and less
// than 256: never split).
TEST(TwoShotPieceBytes, SplitsOnlyContiguousMessagesAboveThePiece) {
  RouteCutoffs c;
  c.two_shot_chunk_bytes = 4096;
  EXPECT_EQ(two_shot_piece_bytes(c, 4096, true), 0u);
  EXPECT_EQ(two_shot_piece_bytes(c, 4097, true), 4096u);
  EXPECT_EQ(two_shot_piece_bytes(c, 1 << 20, true), 4096u);
  EXPECT_EQ(two_shot_piece_bytes(c, 1 << 20, false), 0u) << "strided";
  c.two_shot_chunk_bytes = 4096 + 255;
  EXPECT_EQ(two_shot_piece_bytes(c, 1 << 20, true), 4096u) << "rounded down to 256 bytes";
  EXPECT_EQ(two_shot_piece_bytes(c, 4096 + 255, true), 0u) << "up to the configured size: whole";
  c.two_shot_chunk_bytes = 255;
  EXPECT_EQ(two_shot_piece_bytes(c, 1 << 20, true), 0u);
  c.two_shot_chunk_bytes = 0;
  EXPECT_EQ(two_shot_piece_bytes(c, 1 << 20, true), 0u);
}

// By default only messages above the default two-shot maximum are split:
// the staging the defaults need stays enough. On the host backend the
// pieces are that maximum.
TEST(TwoShotPieceBytes, HostPieceIsTheDefaultTwoShotMaximum) {
  for (int n = 2; n <= 8; ++n) {
    const RouteCutoffs d = default_cutoffs(n, Backend::host);
    EXPECT_EQ(d.two_shot_chunk_bytes, d.two_shot_max_bytes) << n;
    EXPECT_EQ(two_shot_piece_bytes(d, d.two_shot_max_bytes, true), 0u);
  }
}

// On the CUDA backend the pieces are 64 MiB at two ranks (what peerplan_tune
// measures the two-shot with), scaled as the two-shot's maximum is, and they
// do not follow that maximum: a measured maximum above 64 MiB runs in pieces.
TEST(TwoShotPieceBytes, CudaPieceIsItsOwnDefaultScaledLikeTheMaximum) {
  constexpr std::size_t MiB = 1024 * 1024;
  EXPECT_EQ(default_cutoffs(2, Backend::cuda).two_shot_chunk_bytes, 64 * MiB);
  EXPECT_EQ(default_cutoffs(4, Backend::cuda).two_shot_chunk_bytes, 32 * MiB);
  EXPECT_EQ(default_cutoffs(3, Backend::cuda).two_shot_chunk_bytes, 128 * MiB / 3 / 16 * 16);
  for (int n = 2; n <= 8; ++n) {
    const RouteCutoffs d = default_cutoffs(n, Backend::cuda);
    EXPECT_EQ(two_shot_piece_bytes(d, d.two_shot_chunk_bytes, true), 0u) << n;
    EXPECT_EQ(two_shot_piece_bytes(d, 4 * d.two_shot_chunk_bytes, true),
              d.two_shot_chunk_bytes / kTwoShotPieceAlignment * kTwoShotPieceAlignment)
        << n;
  }
}

}  // namespace
}  // namespace peerplan::routing
