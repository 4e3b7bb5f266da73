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
// are a starting point, not a measurement.
//
// The CUDA backend's come from measurement against NCCL on 2x H200 (NVLink,
// bf16, eager and CUDA-graph replay; benchmarks/RESULTS.md): at two ranks
// one-shot beats NCCL up to 64 KiB in both modes (at 256 KiB only under
// graphs), two-shot loses at 1 MiB and 16 MiB and wins only near 4 MiB, and
// the fused one-shot beats NCCL + a separate add + RMSNorm at every
// measured size up to 3.5 MiB. So: one-shot 64 KiB, two-shot off (a route
// must never be slower than the fallback it replaces; re-enabling it needs
// a lower bound as well), fused 3.5 MiB. Other world sizes are not measured
// yet: they scale the two-rank limits by the (n-1) bytes each rank pushes.
#include "routing/cutoffs.hpp"

#include <bit>

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

constexpr std::size_t kCudaOneShotTwoRanks = 64 * KiB;
constexpr std::size_t kCudaFusedTwoRanks = 3584 * KiB;  // 256 rows of 7168 bf16

RouteCutoffs cuda_cutoffs(int world_size) noexcept {
  const std::size_t peers = world_size < 2 ? 1 : static_cast<std::size_t>(world_size - 1);
  const std::size_t one_shot = std::bit_floor(kCudaOneShotTwoRanks / peers);
  const std::size_t fused = kCudaFusedTwoRanks / peers / kPackAlignment * kPackAlignment;
  return RouteCutoffs{one_shot == 0 ? 1 : one_shot, 0, fused == 0 ? kPackAlignment : fused};
}

}  // namespace

RouteCutoffs default_cutoffs(int world_size, Backend backend) noexcept {
  if (backend == Backend::cuda) return cuda_cutoffs(world_size);
  const std::size_t one_shot = host_one_shot_limit(world_size);
  return RouteCutoffs{one_shot, kTwoShotMax, one_shot};
}

RouteCutoffs resolve_cutoffs(const RouteCutoffs& configured, int world_size,
                             Backend backend) noexcept {
  const RouteCutoffs defaults = default_cutoffs(world_size, backend);
  RouteCutoffs resolved = configured;
  for (auto field : {&RouteCutoffs::one_shot_max_bytes, &RouteCutoffs::two_shot_max_bytes,
                     &RouteCutoffs::fused_max_bytes}) {
    if (resolved.*field == kAutoCutoff) resolved.*field = defaults.*field;
  }
  return resolved;
}

}  // namespace peerplan::routing
