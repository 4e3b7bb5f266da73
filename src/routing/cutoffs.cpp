// SPDX-License-Identifier: Apache-2.0
// Default cutoffs.
//
// One-shot makes every rank read all n-1 peers' whole messages, so its
// cost per rank grows with the world size, while two-shot's stays near two
// message sizes (a 1/n shard from each peer, then the other shards). So:
//  - the one-shot limit is the largest power of two with
//    (n-1) x limit <= 1 MiB (the bytes a rank pulls per call), capped at
//    512 KiB: 512K for 2-3 ranks, 256K for 4-5, 128K for 6-9, 64K for
//    10-17, ...;
//  - the fused op is a one-shot reduction and shares that limit;
//  - the two-shot limit is flat at 8 MiB; above it the fallback's pipelined
//    algorithms are competitive and staging slots would grow past what is
//    worth pinning per rank.
// 512 KiB one-shot / 8 MiB two-shot at two ranks are the numbers custom
// all-reduce kernels commonly start from.
//
// These numbers are for the host backend (shared memory, CPU copies) and
// are a starting point, not a measurement. Two-shot has no lower bound
// there (min 0): below the one-shot limit one-shot is taken first anyway.
//
// The CUDA backend's come from measurement on 2x H200 (NVLink NV18, bf16;
// peerplan_tune and the collective benchmark, CUDA graphs and eager;
// their history in CHANGELOG.md). At two ranks: one-shot is the
// fastest route up to 1 MiB (it ties two-shot there); two-shot beats NCCL
// from 1 MiB to 64 MiB by 11-44% in both modes, and at 256 MiB by 3%,
// which is not worth its 1 GiB of staging per rank; the fused op beats
// NCCL + a separate add + RMSNorm at every measured size up to 64 MiB, by
// 13% at 14 MiB and 5% at 64 MiB. So: one-shot 1 MiB, two-shot
// (1 MiB, 64 MiB], fused 16 MiB. The Lamport one-shot, measured later
// (half the link bytes of LL lines): one-shot 20.4 us at 4 MiB against
// two-shot's 23.2, 78.9 at 16 MiB against 60.7 (CUDA graphs, bf16): the
// one-shot limit is 4 MiB since.
//
// Other world sizes are not measured (no host with more than two GPUs has
// been available); their defaults come from the link bytes per rank of a
// message of M bytes at n ranks (docs/concepts.md, "World sizes"):
//   one-shot  sends (n-1) M, one hop;
//   two-shot  sends 2 (n-1)/n M (reduce-scatter, then all-gather), two hops
//             and a barrier;
//   NCCL ring sends 2 (n-1)/n M too, in 2 (n-1) steps.
// With a per-GPU bandwidth B and two-shot's extra latency a, one-shot is
// the faster while (n-1) M / B <= 2 (n-1) M / (n B) + a, i.e. up to
// M* = a B n / ((n-1)(n-2)). Taking a = 3 us (two-shot's second hop and
// barrier on 2x H200) and B = 366 GB/s (SM stores over NVLink, measured)
// gives a B = 1.1 MB: one-shot up to 1 MiB at 3 ranks, 512 KiB at 4,
// 256 KiB at 5-6, 128 KiB at 7-8 (powers of two, never above the
// two-rank 4 MiB). Two-shot then runs up to 128 MiB / n (64 MiB at two
// ranks): it never sends more bytes than the ring it replaces, in fewer
// steps, and the bound keeps its staging (2 slots x n ranks x twice the
// message) the same at every n. The fused op keeps 16 MiB / (n-1): its
// one-shot kernels push n-1 copies. Correctness runs at 3, 4 and 8 ranks
// (ranks sharing GPUs) say nothing of speed; peerplan_tune measures a
// machine's own crossovers and writes them to a tuning file.
#include "routing/cutoffs.hpp"

#include <bit>
#include <string>

namespace peerplan::routing {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

constexpr std::size_t kOneShotPullBudget = 1 * MiB;  // (n-1) x one-shot limit
constexpr std::size_t kOneShotCap = 512 * KiB;
constexpr std::size_t kTwoShotMax = 8 * MiB;
constexpr std::size_t kPackAlignment = 16;  // declared messages are whole 16-byte packs

std::size_t host_one_shot_limit(int world_size) noexcept {
  const std::size_t peers = world_size < 2 ? 1 : static_cast<std::size_t>(world_size - 1);
  const std::size_t limit = std::bit_floor(kOneShotPullBudget / peers);
  if (limit == 0) return 1;  // more than a million ranks: keep the route finite and nonzero
  return limit < kOneShotCap ? limit : kOneShotCap;
}

constexpr std::size_t kCudaOneShotTwoRanks = 4 * MiB;
constexpr std::size_t kCudaTwoShotMaxTwoRanks = 64 * MiB;
constexpr std::size_t kCudaFusedTwoRanks = 16 * MiB;

// a x B of the model above, in bytes: two-shot's extra latency times the
// per-GPU bandwidth.
constexpr double kTwoShotLatencyBytes = 3e-6 * 366e9;

// The model's one-shot / two-shot crossover at n >= 3 ranks, as a power of
// two no larger than the measured two-rank limit.
std::size_t cuda_one_shot_limit(std::size_t n) noexcept {
  if (n <= 2) return kCudaOneShotTwoRanks;
  const double crossover =
      kTwoShotLatencyBytes * static_cast<double>(n) / static_cast<double>((n - 1) * (n - 2));
  const std::size_t limit =
      crossover < 1.0 ? 1 : std::bit_floor(static_cast<std::size_t>(crossover));
  return limit < kCudaOneShotTwoRanks ? limit : kCudaOneShotTwoRanks;
}

RouteCutoffs cuda_cutoffs(int world_size) noexcept {
  const std::size_t n = world_size < 2 ? 2 : static_cast<std::size_t>(world_size);
  // Constant staging: 64 MiB at two ranks, 128 MiB / n beyond.
  const std::size_t two_shot = kCudaTwoShotMaxTwoRanks * 2 / n / kPackAlignment * kPackAlignment;
  const std::size_t fused = kCudaFusedTwoRanks / (n - 1) / kPackAlignment * kPackAlignment;
  const std::size_t two_shot_max = two_shot == 0 ? kPackAlignment : two_shot;
  // Pieces of the default maximum: the staging of a larger two-shot stays
  // what the default sizes need.
  return RouteCutoffs{cuda_one_shot_limit(n), two_shot_max, fused == 0 ? kPackAlignment : fused, 0,
                      two_shot_max};
}

}  // namespace

RouteCutoffs default_cutoffs(int world_size, Backend backend) noexcept {
  if (backend == Backend::cuda) return cuda_cutoffs(world_size);
  const std::size_t one_shot = host_one_shot_limit(world_size);
  return RouteCutoffs{one_shot, kTwoShotMax, one_shot, 0, kTwoShotMax};
}

std::size_t two_shot_piece_bytes(const RouteCutoffs& cutoffs, std::size_t message_bytes,
                                 bool contiguous) noexcept {
  // A message up to the configured size runs whole even where the piece
  // rounds below it (the default maximum at 3 ranks is no multiple of 256).
  const std::size_t piece =
      cutoffs.two_shot_chunk_bytes / kTwoShotPieceAlignment * kTwoShotPieceAlignment;
  if (!contiguous || piece == 0 || message_bytes <= cutoffs.two_shot_chunk_bytes) return 0;
  return piece;
}

RouteCutoffs fill_automatic(RouteCutoffs preferred, const RouteCutoffs& fallback) noexcept {
  for (const CutoffField& field : kCutoffFields) {
    if (preferred.*field.member == kAutoCutoff) preferred.*field.member = fallback.*field.member;
  }
  return preferred;
}

RouteCutoffs resolve_cutoffs(const RouteCutoffs& configured, int world_size,
                             Backend backend) noexcept {
  return fill_automatic(configured, default_cutoffs(world_size, backend));
}

RouteCutoffs resolve_cutoffs(const RouteCutoffs& configured, const RouteCutoffs& tuned,
                             int world_size, Backend backend) noexcept {
  return resolve_cutoffs(fill_automatic(configured, tuned), world_size, backend);
}

std::string describe_cutoffs(const RouteCutoffs& cutoffs) {
  return describe_byte_fields(cutoffs, kCutoffFields);
}

}  // namespace peerplan::routing
