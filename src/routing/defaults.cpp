// SPDX-License-Identifier: Apache-2.0
// The built-in defaults, one place for all (defaults.hpp). The CUDA values
// at two ranks were measured on 2x H200 (NVLink NV18, bf16, CUDA graphs and
// eager); benchmarks/RESULTS.md has the runs. The host backend's are a
// starting point, not a measurement.
//
// Other world sizes are not measured; their CUDA cutoffs come from the
// link bytes per rank of an M-byte message at n ranks: one-shot sends
// (n-1) M in one hop, two-shot 2 (n-1)/n M in two hops and a barrier, so
// one-shot is the faster while M <= a B n / ((n-1)(n-2)), with a = 3 us
// (two-shot's extra hop and barrier) and B = 366 GB/s (SM stores over
// NVLink; over PCIe-only GPUs B x the link's speed over NVLink's, as the
// LL windows: link_ratio). docs/concepts.md ("World sizes") has the
// derivation.
#include "routing/defaults.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>

namespace peerplan::routing {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t kPackAlignment = 16;  // declared messages are whole 16-byte packs

// Host backend (shared memory, CPU copies).
// One-shot: (n-1) x limit <= 1 MiB pulled per call, as a power of two.
constexpr std::size_t kHostOneShotPullBudget = 1 * MiB;
// The one-shot cap, where custom all-reduce kernels commonly start at 2 ranks.
constexpr std::size_t kHostOneShotCap = 512 * KiB;
// Two-shot up to here; above it the fallback's pipelined algorithms compete.
constexpr std::size_t kHostTwoShotMax = 8 * MiB;

// The two-shot's pieces at two ranks: messages above this run as
// consecutive two-shots of this size, so its staging stays what a 64 MiB
// message needs. peerplan_tune measures two-shot with these pieces, so they
// stay when the measured two-shot maximum moves.
constexpr std::size_t kCudaTwoShotPieceTwoRanks = 64 * MiB;
// a x B of the world-size model above, in bytes.
constexpr double kTwoShotLatencyBytes = 3e-6 * 366e9;

// BEGIN two-rank CUDA defaults: scripts/defaults_from_tune.py writes this
// block from a peerplan_tune entry (benchmarks/results/defaults.tune).
// Entry: cuda ranks=2 gpu="NVIDIA H200" links=NV18. Measured: not by peerplan_tune: set by hand
// from the FULL run of dd9c13b on 2x H200 (benchmarks/RESULTS.md)
// One-shot was the fastest route at every measured size up to here.
constexpr std::size_t kCudaOneShotTwoRanks = 4 * MiB;
// Two-shot was the fastest route from its minimum (0: right above one-shot)
// up to its maximum; outside that window, the fallback.
constexpr std::size_t kCudaTwoShotMinTwoRanks = 0;
constexpr std::size_t kCudaTwoShotMaxTwoRanks = 64 * MiB;
// The fused op beat its fallback (NCCL + add + RMSNorm) at every size up to here.
constexpr std::size_t kCudaFusedTwoRanks = 16 * MiB;
// The protocol windows (the same at every world size until measured): where
// each protocol won, by the rules of docs/tuning.md ("Protocol windows").
constexpr Window kCudaOneShotLamport = Window::above_bytes(64 * KiB);
constexpr Window kCudaFusedLamport = Window{64 * KiB, 4 * MiB};
constexpr Window kCudaFusedLl = Window::up_to_bytes(2 * MiB);
constexpr Window kCudaTwoShotDma = Window::never();
constexpr Window kCudaTwoShotLamport = Window::never();
// END two-rank CUDA defaults

// The link the CUDA windows above were measured over: NV18, 18 NVLinks of
// 25 GB/s per direction (hwloc's PCIe speeds are per direction too).
constexpr double kMeasuredLinkMbPerS = 450000.0;

// A PCIe link's MB/s, the assumed one where the topology gave none.
std::uint32_t pcie_speed(const NodeLink& link) noexcept {
  return link.mb_per_s > 0 ? link.mb_per_s : kAssumedPcieMbPerS;
}

// What a byte on `link` costs next to one on the link the defaults were
// measured over: 1 there, the bandwidth ratio (below 1) over PCIe.
double link_ratio(const NodeLink& link) noexcept {
  if (!link.pcie) return 1.0;
  return std::min(1.0, pcie_speed(link) / kMeasuredLinkMbPerS);
}

// `window` with its lower edge, where LL lines give way to Lamport, moved
// for `link`. There the extra 8 bytes of each LL line cost what Lamport's
// fixed work (its sentinel reset) costs; a slower link makes those bytes
// dearer, so the edge moves down by the bandwidth ratio (a power of two,
// at least one pack).
Window lamport_edge_over(Window window, const NodeLink& link) noexcept {
  if (window.is_never() || window.above == 0) return window;
  const double scaled = static_cast<double>(window.above) * link_ratio(link);
  window.above = std::max(kPackAlignment, std::bit_floor(static_cast<std::size_t>(scaled)));
  return window;
}

std::size_t host_one_shot_limit(int world_size) noexcept {
  const std::size_t peers = world_size < 2 ? 1 : static_cast<std::size_t>(world_size - 1);
  const std::size_t limit = std::bit_floor(kHostOneShotPullBudget / peers);
  if (limit == 0) return 1;  // more than a million ranks: keep the route finite and nonzero
  return limit < kHostOneShotCap ? limit : kHostOneShotCap;
}

// The model's one-shot / two-shot crossover at n >= 3 ranks, as a power of
// two no larger than the measured two-rank limit; B the measured link's
// bandwidth x `ratio` (link_ratio).
std::size_t cuda_one_shot_limit(std::size_t n, double ratio) noexcept {
  if (n <= 2) return kCudaOneShotTwoRanks;
  const double crossover = kTwoShotLatencyBytes * ratio * static_cast<double>(n) /
                           static_cast<double>((n - 1) * (n - 2));
  const std::size_t limit =
      crossover < 1.0 ? 1 : std::bit_floor(static_cast<std::size_t>(crossover));
  return limit < kCudaOneShotTwoRanks ? limit : kCudaOneShotTwoRanks;
}

// A two-rank size M as M x times / divided_by at n ranks, in whole packs;
// 0 (the route off) stays 0.
std::size_t scaled_from_two_ranks(std::size_t two_rank_bytes, std::size_t times,
                                  std::size_t divided_by) noexcept {
  if (two_rank_bytes == 0) return 0;
  const std::size_t packs = two_rank_bytes * times / divided_by / kPackAlignment * kPackAlignment;
  return packs == 0 ? kPackAlignment : packs;
}

RouteCutoffs cuda_cutoffs(int world_size, const NodeLink& link) noexcept {
  const std::size_t n = world_size < 2 ? 2 : static_cast<std::size_t>(world_size);
  // Two-shot to 2 x its two-rank maximum / n: never more link bytes than
  // the ring it replaces; its pieces likewise, the same staging at every n.
  const std::size_t two_shot_max = scaled_from_two_ranks(kCudaTwoShotMaxTwoRanks, 2, n);
  const std::size_t piece = scaled_from_two_ranks(kCudaTwoShotPieceTwoRanks, 2, n);
  // Where NCCL beat two-shot at two ranks says nothing of other world sizes.
  const std::size_t two_shot_min = n == 2 ? kCudaTwoShotMinTwoRanks : 0;
  // The fused one-shot pushes n-1 copies: its two-rank limit / (n-1).
  const std::size_t fused = scaled_from_two_ranks(kCudaFusedTwoRanks, 1, n - 1);
  return RouteCutoffs{cuda_one_shot_limit(n, link_ratio(link)), two_shot_max, fused, two_shot_min,
                      piece};
}

}  // namespace

RouteCutoffs default_cutoffs(int world_size, Backend backend, const NodeLink& link) noexcept {
  if (backend == Backend::cuda) return cuda_cutoffs(world_size, link);
  // The fused op is a one-shot reduction and shares its limit; two-shot
  // has no lower bound (below the one-shot limit one-shot is taken first).
  const std::size_t one_shot = host_one_shot_limit(world_size);
  return RouteCutoffs{one_shot, kHostTwoShotMax, one_shot, 0, kHostTwoShotMax};
}

ProtocolWindows default_protocol_windows(Backend backend, int /*world_size*/, bool pull) noexcept {
  if (backend != Backend::cuda) return {};
  ProtocolWindows windows;
  windows.pull = pull;
  // Pull mode has its own one-shot and two-shot, and no Lamport region for
  // them; the fused op always pushes, Lamport included.
  windows.lines = !pull;
  if (!pull) {
    windows.one_shot_lamport = kCudaOneShotLamport;
    windows.two_shot_dma = kCudaTwoShotDma;
    windows.two_shot_lamport = kCudaTwoShotLamport;
  }
  windows.fused_lamport = kCudaFusedLamport;
  windows.fused_ll = kCudaFusedLl;
  windows.fused_two_shot = true;
  windows.tunable = true;
  return windows;
}

ProtocolTuning default_link_windows(const NodeLink& link) noexcept {
  ProtocolTuning moved;
  if (!link.pcie) return moved;
  moved.one_shot_lamport = lamport_edge_over(kCudaOneShotLamport, link);
  moved.fused_lamport = lamport_edge_over(kCudaFusedLamport, link);
  return moved;
}

std::string describe_node_link(const NodeLink& link) {
  if (!link.pcie) return "NVLink or unknown";
  char speed[32];
  std::snprintf(speed, sizeof speed, "%.1f GB/s", pcie_speed(link) / 1000.0);
  return link.mb_per_s > 0 ? std::string("PCIe at ") + speed
                           : std::string("PCIe at an unknown speed, taken as ") + speed;
}

}  // namespace peerplan::routing
