// SPDX-License-Identifier: Apache-2.0
// The slab's sizes (collective_kernels.hpp: sub_slot_bytes_for,
// result_offset_for, lamport_sub_slot_bytes_for) and the offset of its
// one-block call count, for reserve(). Host only.
#include <cstddef>
#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "launch_recipe.hpp"
#include "shard_geometry.cuh"

namespace peerplan::cuda_kernels {
namespace {

constexpr std::size_t round_up(std::size_t bytes, std::size_t to) {
  return (bytes + to - 1) / to * to;
}

// A staged message, padded: two-shot pads each of `size` shards by less
// than one pack; the fused op rounds the message up to a pack.
constexpr std::size_t padded_message(std::size_t max_message_bytes, int size) {
  return max_message_bytes + static_cast<std::size_t>(size + 1) * kPackBytes;
}

// The bound above against the shard geometry (shard_geometry.cuh), in
// bytes: shards of ceil(bytes / size) rounded up to 16 bytes are exactly
// the shards of every dtype (16 bytes = a pack of 8 or 4 elements), and a
// two-shot writes whole packs up to the end of the last non-empty shard.
constexpr bool covers_two_shot(std::size_t max_message_bytes, int size) {
  const auto bytes = static_cast<std::int64_t>(max_message_bytes);
  const std::int64_t shard = shard_elements<static_cast<int>(kPackBytes)>(bytes, size);
  std::int64_t end = 0;
  for (int rank = 0; rank < size; ++rank) {
    const ShardRange range = shard_range(bytes, shard, rank);
    if (range.end > range.begin) end = range.begin + shard;
  }
  return static_cast<std::size_t>(end) <= padded_message(max_message_bytes, size);
}

static_assert(covers_two_shot(1, 8) && covers_two_shot(17, 2) && covers_two_shot(1000, 3) &&
              covers_two_shot(4096, 8) && covers_two_shot((1 << 20) + 2, 7) &&
              covers_two_shot(12345678, 5));

}  // namespace

std::size_t result_offset_for(std::size_t max_message_bytes, int size) {
  return round_up(padded_message(max_message_bytes, size), 256);
}

std::size_t sub_slot_bytes_for(std::size_t max_message_bytes, int size) {
  // One-shot push's lines carry 8 data bytes in 16 (twice the message);
  // two-shot pull needs its input and its reduced shard side by side.
  const std::size_t line_bytes = 2 * max_message_bytes + kPackBytes;
  const std::size_t pull_bytes =
      result_offset_for(max_message_bytes, size) + padded_message(max_message_bytes, size);
  return round_up(line_bytes > pull_bytes ? line_bytes : pull_bytes, 256);
}

std::size_t lamport_sub_slot_bytes_for(std::size_t max_message_bytes, int size) {
  // Whole packs (a short last pack travels whole), 256-byte aligned
  // sub-slots. A two-shot puts two shards there (two_shot_lamport.cu): a
  // shard of any dtype is at most ceil(bytes / size) rounded up to a pack,
  // plus one element (shard_geometry.cuh).
  const std::size_t ranks = static_cast<std::size_t>(size);
  const std::size_t one_shot = round_up(max_message_bytes, kPackBytes);
  const std::size_t two_shot = 2 * ((max_message_bytes + ranks - 1) / ranks + 2 * kPackBytes);
  return round_up(one_shot > two_shot ? one_shot : two_shot, 256);
}

std::size_t dma_area_bytes_for(std::size_t max_message_bytes, int size) {
  // A shard of any dtype is at most ceil(bytes / size) plus one element,
  // rounded up to a pack (shard_geometry.cuh); the kernel reads and writes
  // whole packs. A message in pipelined pieces (at most kMaxDmaPieces,
  // each rounded up to a pack) keeps each piece's shard at its own offset:
  // every piece adds less than two packs of rounding, and a pack to the
  // pieces' total.
  const std::size_t ranks = static_cast<std::size_t>(size);
  return round_up((max_message_bytes + ranks - 1) / ranks + 2 * kPackBytes +
                      static_cast<std::size_t>(kMaxDmaPieces) * 3 * kPackBytes,
                  256);
}

std::size_t one_block_call_count_offset() {
  return offsetof(Signals, epochs) + kMaxCallBlocks * sizeof(std::uint32_t);
}

}  // namespace peerplan::cuda_kernels
