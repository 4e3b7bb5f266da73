// SPDX-License-Identifier: Apache-2.0
// The head of every rank's shared-memory segment: the flags through which
// its owner tells its peers how far it got. Only the owner writes its flags
// (release stores); peers read them (acquire loads). The one exception is
// the node's verdict word, in local rank 0's segment: every rank of the node
// may set it, by compare-and-swap, which CPUs offer across processes on
// shared memory. Each flag sits on its own 128-byte line (two cache lines:
// adjacent-line prefetch) so that polling one does not bounce another.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/host/call_signature.hpp"

namespace peerplan::transport::host {

enum class Signal : int {
  arrive = 0,     // epoch whose input this rank has staged in its slot
  reduced = 1,    // two-shot: epoch whose shard this rank has reduced
  done = 2,       // epoch this rank has finished reading peers' slots for
  abandoned = 3,  // nonzero: this rank gave up (timeout) at that epoch
  // Local rank 0's segment only: how far the node's ranks have decided,
  // each wait of each call once, success or failure (host_peer_transport.cpp).
  verdict = 4,
  // Why this rank gave up (a GaveUpWhy), written before `abandoned`.
  gave_up_why = 5,
};

enum class GaveUpWhy : std::uint64_t { timeout = 0, between_nodes = 1, different_calls = 2 };

inline constexpr std::size_t kSignalStride = 128;
inline constexpr std::size_t kSignalAreaBytes = 4096;  // keeps the slots page aligned
// After the flags: the signatures of this rank's last two calls
// (call_signature.hpp), at [epoch % 2], written before `arrive` is raised.
// Two, because a peer may read call e's while this rank stages call e + 1;
// it stages e + 2 only after every peer is done with e.
inline constexpr std::size_t kCallSignatureOffset = 6 * kSignalStride;
inline constexpr std::size_t kCallSignatureWords = 3;
// Then the local ranks this rank still waited for when it gave
// up, one bit each, written before `abandoned` is raised. A peer that reads
// `abandoned` can then name the late ranks, which may have arrived since.
inline constexpr std::size_t kAwaitedOffset = 7 * kSignalStride;
inline constexpr int kMaxAwaitedRanks = static_cast<int>(kSignalAreaBytes - kAwaitedOffset) * 8;
static_assert(kCallSignatureOffset + 2 * kCallSignatureWords * 8 <= kAwaitedOffset);
static_assert(kAwaitedOffset < kSignalAreaBytes && kAwaitedOffset % 8 == 0);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "cross-process flags need lock-free 64-bit atomics");

inline std::uint64_t& signal_word(std::byte* segment, Signal which) noexcept {
  return *reinterpret_cast<std::uint64_t*>(segment +
                                           static_cast<std::size_t>(which) * kSignalStride);
}

inline std::uint64_t load_signal(std::byte* segment, Signal which) noexcept {
  return std::atomic_ref<std::uint64_t>(signal_word(segment, which))
      .load(std::memory_order_acquire);
}

inline void store_signal(std::byte* segment, Signal which, std::uint64_t value) noexcept {
  std::atomic_ref<std::uint64_t>(signal_word(segment, which))
      .store(value, std::memory_order_release);
}

// Sets the flag to `desired` if it still holds `expected`; else false, with
// `expected` updated to what it holds. For the verdict word only.
inline bool compare_exchange_signal(std::byte* segment, Signal which, std::uint64_t& expected,
                                    std::uint64_t desired) noexcept {
  return std::atomic_ref<std::uint64_t>(signal_word(segment, which))
      .compare_exchange_strong(expected, desired, std::memory_order_acq_rel,
                               std::memory_order_acquire);
}

// The awaited bits: word `i` holds local ranks 64i..64i+63. Relaxed word by
// word; `abandoned` (release store, acquire load) orders them.
inline std::uint64_t& awaited_word(std::byte* segment, int word) noexcept {
  return reinterpret_cast<std::uint64_t*>(segment + kAwaitedOffset)[word];
}

// Records `local_ranks` (each below kMaxAwaitedRanks; others are dropped)
// as the ranks awaited, out of a node of `local_size` ranks.
inline void store_awaited(std::byte* segment, int local_size,
                          std::span<const int> local_ranks) noexcept {
  const int words = (std::min(local_size, kMaxAwaitedRanks) + 63) / 64;
  for (int w = 0; w < words; ++w) {
    std::uint64_t bits = 0;
    for (int r : local_ranks) {
      if (r / 64 == w) bits |= std::uint64_t{1} << (r % 64);
    }
    std::atomic_ref<std::uint64_t>(awaited_word(segment, w)).store(bits, std::memory_order_relaxed);
  }
}

// Relaxed word by word: `arrive` (release store, acquire load) orders them.
inline void store_call_signature(std::byte* segment, std::uint64_t epoch,
                                 const CallSignature& call) noexcept {
  auto* words = reinterpret_cast<std::uint64_t*>(segment + kCallSignatureOffset) +
                (epoch % 2) * kCallSignatureWords;
  const std::uint64_t values[kCallSignatureWords] = {call.kind, call.elements, call.row};
  for (std::size_t i = 0; i < kCallSignatureWords; ++i)
    std::atomic_ref<std::uint64_t>(words[i]).store(values[i], std::memory_order_relaxed);
}

inline CallSignature load_call_signature(std::byte* segment, std::uint64_t epoch) noexcept {
  auto* words = reinterpret_cast<std::uint64_t*>(segment + kCallSignatureOffset) +
                (epoch % 2) * kCallSignatureWords;
  auto load = [&](std::size_t i) {
    return std::atomic_ref<std::uint64_t>(words[i]).load(std::memory_order_relaxed);
  };
  return {load(0), load(1), load(2)};
}

inline bool is_awaited(std::byte* segment, int local_rank) noexcept {
  if (local_rank < 0 || local_rank >= kMaxAwaitedRanks) return false;
  const std::uint64_t bits = std::atomic_ref<std::uint64_t>(awaited_word(segment, local_rank / 64))
                                 .load(std::memory_order_relaxed);
  return (bits >> (local_rank % 64)) & 1;
}

}  // namespace peerplan::transport::host
