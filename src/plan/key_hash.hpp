// SPDX-License-Identifier: Apache-2.0
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

#include <bit>
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
  return static_cast<std::uint64_t>(key.operation) | (static_cast<std::uint64_t>(key.dtype) << 8) |
         (static_cast<std::uint64_t>(key.rank) << 16) |
         (static_cast<std::uint64_t>(key.eps_bits) << 32);
}

// Arbitrary odd 64-bit constants (random draws), one per lane operand.
inline constexpr std::uint64_t kHashSecret[12] = {
    0x373a9eac7dece4cbULL, 0x55f652d8119644f5ULL, 0xe2cd56a772c07ea1ULL, 0x2aa07b456dc93c5fULL,
    0xd7f7629e6b2972cbULL, 0xb54128c02b6ba209ULL, 0xd95db1eed3b92e45ULL, 0x70e6b785ebb49a43ULL,
    0xc98b58bc46e26f6bULL, 0xa2908ef227634d2bULL, 0xb8b8e88d5392d975ULL, 0x06f7c76f725de8d7ULL};

// One word per dimension: the size in the low half, the stride rotated into
// the high half. Injective while both are below 2^32 (every real tensor);
// beyond that two dimensions may share a word, which costs a hash
// collision (resolved by the full key comparison), never a wrong answer.
inline std::uint64_t dimension_word(std::int64_t size, std::int64_t stride) noexcept {
  return static_cast<std::uint64_t>(size) ^ std::rotl(static_cast<std::uint64_t>(stride), 32);
}

// Every field, every dimension slot (unused ones are 0 in canonical form, so
// a fixed trip count keeps the function branch-free and its cost independent
// of the rank): five independent 128-bit products, which the CPU overlaps,
// summed, then one final product so that the low bits the table indexes
// with depend on every input bit.
inline std::uint64_t hash_key(const PlanKey& key) noexcept {
  static_assert(kMaxRank == 8, "the lanes below cover exactly 8 dimensions");
  const auto& shape = key.shape;
  const auto& strides = key.strides;
  std::uint64_t h = fold_multiply(key_head_word(key) ^ kHashSecret[0],
                                  static_cast<std::uint64_t>(key.weight) ^ kHashSecret[1]);
  h += fold_multiply(dimension_word(shape[0], strides[0]) ^ kHashSecret[2],
                     dimension_word(shape[1], strides[1]) ^ kHashSecret[3]);
  h += fold_multiply(dimension_word(shape[2], strides[2]) ^ kHashSecret[4],
                     dimension_word(shape[3], strides[3]) ^ kHashSecret[5]);
  h += fold_multiply(dimension_word(shape[4], strides[4]) ^ kHashSecret[6],
                     dimension_word(shape[5], strides[5]) ^ kHashSecret[7]);
  h += fold_multiply(dimension_word(shape[6], strides[6]) ^ kHashSecret[8],
                     dimension_word(shape[7], strides[7]) ^ kHashSecret[9]);
  return fold_multiply(h ^ kHashSecret[10], std::rotl(h, 29) ^ kHashSecret[11]);
}

// Same result as the defaulted operator== (which the tests' linear scan
// uses, tests/support/oracles/plan_scan.cpp), but
// branch-free: differences are or-ed together and tested once.
inline bool keys_equal(const PlanKey& a, const PlanKey& b) noexcept {
  std::uint64_t diff =
      (key_head_word(a) ^ key_head_word(b)) |
      (static_cast<std::uint64_t>(a.weight) ^ static_cast<std::uint64_t>(b.weight));
  for (int i = 0; i < kMaxRank; ++i) {
    diff |= static_cast<std::uint64_t>(a.shape[i] ^ b.shape[i]) |
            static_cast<std::uint64_t>(a.strides[i] ^ b.strides[i]);
  }
  return diff == 0;
}

}  // namespace peerplan::plan
