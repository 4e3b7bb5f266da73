// Hashing and comparison of canonical plan keys, inline so that the index's
// lookup compiles into one straight-line function.
//
// Why not the defaulted operator== and a byte hash: PlanKey has a padding
// byte after `rank`, so hashing or memcmp-ing its bytes would read an
// indeterminate value. Both functions below read named fields only, and
// they read all of them: every field takes part in the hash, so keys that
// differ in any one field (a stride, the eps bits, the weight address) land
// in unrelated buckets.
#pragma once

#include <cstdint>

#include "peerplan/layout.hpp"
#include "peerplan/plan_key.hpp"

namespace peerplan::plan {

// 64x64 -> 128-bit multiply, folded to 64 bits (high half xor low half).
// Each output bit depends on every input bit of both operands, which makes
// it a cheap, strong mixer (the "mum" step of wyhash-style hashes).
inline std::uint64_t fold_multiply(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ typedef unsigned __int128 u128;
  const u128 product = static_cast<u128>(a) * b;
  return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
#else
  const std::uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
  const std::uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const std::uint64_t ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
  const std::uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
  const std::uint64_t lo = (mid << 32) | (ll & 0xffffffffu);
  const std::uint64_t hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
  return lo ^ hi;
#endif
}

// The small fields packed into one word (no padding is read).
inline std::uint64_t key_head_word(const PlanKey& key) noexcept {
  return static_cast<std::uint64_t>(key.operation) |
         (static_cast<std::uint64_t>(key.dtype) << 8) |
         (static_cast<std::uint64_t>(key.rank) << 16) |
         (static_cast<std::uint64_t>(key.eps_bits) << 32);
}

// Every field, every dimension slot (unused ones are 0 in canonical form, so
// a fixed trip count keeps the function branch-free and its cost independent
// of the rank). The per-lane products are independent of each other, so the
// CPU overlaps them; only the final mix is serial.
inline std::uint64_t hash_key(const PlanKey& key) noexcept {
  // Arbitrary odd 64-bit constants (random draws), one per lane operand.
  constexpr std::uint64_t kSecret[2 + 2 * kMaxRank + 2] = {
      0x373a9eac7dece4cbULL, 0x55f652d8119644f5ULL, 0xe2cd56a772c07ea1ULL,
      0x2aa07b456dc93c5fULL, 0xd7f7629e6b2972cbULL, 0xb54128c02b6ba209ULL,
      0xd95db1eed3b92e45ULL, 0x70e6b785ebb49a43ULL, 0xc98b58bc46e26f6bULL,
      0xa2908ef227634d2bULL, 0xb8b8e88d5392d975ULL, 0x06f7c76f725de8d7ULL,
      0x7d5cec92ddffcb3dULL, 0x12ac5049ab223163ULL, 0xc01381c92a8d7cd3ULL,
      0xea0eb838f505e035ULL, 0xde4c7405329c17d3ULL, 0x1339aaab56173d61ULL,
      0x427aa16a09a4363fULL, 0x5851f42d4c957f2dULL};
  std::uint64_t h = fold_multiply(key_head_word(key) ^ kSecret[0],
                                  static_cast<std::uint64_t>(key.weight) ^ kSecret[1]);
  for (int i = 0; i < kMaxRank; ++i) {
    h += fold_multiply(static_cast<std::uint64_t>(key.shape[i]) ^ kSecret[2 + 2 * i],
                       static_cast<std::uint64_t>(key.strides[i]) ^ kSecret[3 + 2 * i]);
  }
  // Final avalanche, so the low bits the table indexes with depend on all.
  return fold_multiply(h ^ kSecret[2 + 2 * kMaxRank], (h >> 29) ^ kSecret[3 + 2 * kMaxRank]);
}

// Same result as the defaulted operator== (which the linear scan uses), but
// branch-free: differences are or-ed together and tested once.
inline bool keys_equal(const PlanKey& a, const PlanKey& b) noexcept {
  std::uint64_t diff = (key_head_word(a) ^ key_head_word(b)) |
                       (static_cast<std::uint64_t>(a.weight) ^ static_cast<std::uint64_t>(b.weight));
  for (int i = 0; i < kMaxRank; ++i) {
    diff |= static_cast<std::uint64_t>(a.shape[i] ^ b.shape[i]) |
            static_cast<std::uint64_t>(a.strides[i] ^ b.strides[i]);
  }
  return diff == 0;
}

}  // namespace peerplan::plan
