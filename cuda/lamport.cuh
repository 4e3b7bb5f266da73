// SPDX-License-Identifier: Apache-2.0
// The Lamport protocol's device side (docs/design.md, Lamport), shared by the
// Lamport one-shot all-reduce (one_shot_lamport.cu), the Lamport two-shot
// (two_shot_lamport.cu: both halves of its sub-slot layout are there) and
// the fused all-reduce + residual add + RMSNorm on it (fused_lamport.cu):
// the data is its own flag. Every rank's slab holds a receive region that is kept filled with a
// sentinel bit pattern; a sender writes its plain input, 16 bytes at a
// time, into its sub-slot of every peer's region; a receiver polls its own
// region until no element of a pack equals the sentinel, uses the pack, and
// puts the sentinel back into every pack it read before its kernel ends.
// One write per element crosses the link (LL lines carry twice that), and
// there is no barrier and no flag word.
//
// Region layout (slab bytes [lamport_offset, lamport_offset + 2 * (size - 1)
// * lamport_sub_slot_bytes)): two parities (epoch % 2, like the staging
// slots), each with one sub-slot per *other* rank - a rank reads its own
// input directly, it never copies it to itself. Source r's sub-slot in
// owner o's region is r for r < o, r - 1 for r > o. Inside a sub-slot,
// pack i is the message's pack i (the one-shot: elements 16i/size(T)...;
// the fused op: row i / row_packs, pack i % row_packs of the row).
//
// The sentinel is all-ones bits (0xffff / 0xffffffff), a NaN in f16, bf16
// and f32 alike, so one region serves calls of every dtype and either op in
// any order: the region is all-ones wherever no data is pending, whatever
// call wrote there last. A sender never emits it: an input element whose
// bits are all ones gets its lowest bit cleared (0xfffe / 0xfffffffe),
// still a NaN of the same sign. Every rank sums the mapped values (its own
// included), so the ranks' results stay bit-identical; they equal the LL
// kernels' because a sum with a NaN term is NaN and the GPU's fp32 add
// returns the one canonical NaN whatever the payload of its NaN operand.
//
// Arrival is checked per element at the dtype's width, and the 16-byte
// accesses are volatile (relaxed, system scope): each 32-bit lane is
// single-copy atomic, and no element spans two lanes. So a 16-byte store
// that becomes visible in parts (the link does not promise more) is
// harmless: a pack counts as arrived only when every element has left the
// sentinel, and an element is never seen half-written.
//
// Why two parities suffice (WAW: the receiver's reset of buffer e % 2 at
// call e against a sender's data for call e + 2 in the same buffer). Calls
// on one communicator are stream-ordered on every rank, and every kernel
// issues griddepcontrol.wait before its first load or store (begin_call):
// under a programmatic dependent launch, that waits until the previous
// kernel of the stream has completed and its memory operations are
// performed and visible (without one, stream order gives the same). Then,
// for ranks R (receiver) and S (sender):
//   1. R's call-e kernel resets every pack of buffer e % 2 that call e used
//      (stores to R's own memory) and completes;
//   2. R's call-e+1 kernel starts its stores only after that (its
//      griddepcontrol.wait), among them its call-e+1 data for S (or, if
//      call e+1 is an LL, two-shot, staged fused or pull call, its lines or
//      arrive flags: every P2P kernel waits for data or flags that each
//      peer sends after its own griddepcontrol.wait);
//   3. S's call-e+1 kernel completes only after it has seen what R sent in
//      2 (a kernel that did not see it failed: see below); the one-shot,
//      the two-shot and the fused op alike take in every pack of every
//      peer before they end;
//   4. S's call-e+2 kernel stores into R's buffer e % 2 only after its
//      griddepcontrol.wait, i.e. after 3.
// So S's call-e+2 data reaches R's memory after R's resets of call e were
// performed there (the owner's L2 orders both: local and peer writes to
// R's memory meet there). Reads of buffer e % 2 by R at call e happen
// before its resets (same thread, same address, program order), so the
// WAR case is covered by the same chain. NCCL fallback calls do not count
// as calls here: they do not advance the epoch. Three buffers would add
// nothing: no step of the chain depends on the number of buffers beyond
// "a call in between".
//
// Failure: every wait is bounded exactly like the LL kernels' wait_line
// (abandoned[source], aborted, %globaltimer every 256 polls; give_up on
// timeout). A failed call leaves the region in any state (packs half
// reset, a peer's data unread); that is harmless
// because the transport is unusable from then on: every later kernel of
// this rank exits at begin_call (aborted), the host raises Timeout, and
// only reserve() re-creates the slabs (freshly filled with the sentinel)
// on every rank before the next P2P call.
#pragma once

#include <cstdint>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"

namespace peerplan::cuda_kernels {

inline constexpr std::uint32_t kSentinelWord = 0xffffffffu;  // every element all ones

// Where source `source`'s packs for call `epoch` lie in rank `owner`'s
// region (source != owner).
__device__ __forceinline__ uint4* lamport_of(const PeerSet& p, int owner, int source,
                                             std::uint32_t epoch) {
  const int sub = source < owner ? source : source - 1;
  return reinterpret_cast<uint4*>(
      static_cast<char*>(p.slabs[owner]) + p.lamport_offset +
      ((epoch & 1u) * static_cast<std::uint64_t>(p.size - 1) + static_cast<std::uint64_t>(sub)) *
          p.lamport_sub_slot_bytes);
}

// 16-bit elements: either half of `word` all ones.
__device__ __forceinline__ bool has_sentinel_half(std::uint32_t word) {
  return (word & 0xffffu) == 0xffffu || (word >> 16) == 0xffffu;
}

// True while some element of the pack still holds the sentinel (not arrived).
template <class T>
__device__ __forceinline__ bool pending(const uint4& v) {
  if constexpr (sizeof(T) == 4) {
    return v.x == kSentinelWord || v.y == kSentinelWord || v.z == kSentinelWord ||
           v.w == kSentinelWord;
  } else {
    static_assert(sizeof(T) == 2, "16- or 32-bit elements");
    return has_sentinel_half(v.x) || has_sentinel_half(v.y) || has_sentinel_half(v.z) ||
           has_sentinel_half(v.w);
  }
}

__device__ __forceinline__ std::uint32_t without_sentinel_half(std::uint32_t word) {
  if ((word & 0xffffu) == 0xffffu) word ^= 0x1u;
  if ((word >> 16) == 0xffffu) word ^= 0x10000u;
  return word;
}

// The pack as it travels: an element whose bits are all ones becomes the
// NaN with its lowest bit cleared (see the header).
template <class T>
__device__ __forceinline__ uint4 without_sentinel(uint4 v) {
  if constexpr (sizeof(T) == 4) {
    v.x = v.x == kSentinelWord ? kSentinelWord - 1u : v.x;
    v.y = v.y == kSentinelWord ? kSentinelWord - 1u : v.y;
    v.z = v.z == kSentinelWord ? kSentinelWord - 1u : v.z;
    v.w = v.w == kSentinelWord ? kSentinelWord - 1u : v.w;
  } else {
    v.x = without_sentinel_half(v.x);
    v.y = without_sentinel_half(v.y);
    v.z = without_sentinel_half(v.z);
    v.w = without_sentinel_half(v.w);
  }
  return v;
}

__device__ __forceinline__ uint4 sentinel_pack() {
  return make_uint4(kSentinelWord, kSentinelWord, kSentinelWord, kSentinelWord);
}

// Waits (bounded, as wait_line does) until the pack at `pack` has fully
// arrived; `v` holds a first look at it (loaded early with others, so that
// their latencies overlap) and, on success, the arrived pack. False when
// the call failed: a timeout, or a peer or another block of this rank gave
// up.
template <class T>
__device__ __forceinline__ bool take_pack(const PeerSet& p, const uint4* pack, int source,
                                          std::uint32_t epoch, uint4& v) {
  std::uint64_t start = 0;
  for (std::uint32_t spins = 0; pending<T>(v); v = load_volatile_pack(pack)) {
    if ((++spins & 255u) != 0u) continue;
    const Signals* own = signals_of(p, p.rank);
    if (!may_wait_on(p, own, source, Phase::arrive, epoch, start)) return false;
  }
  return true;
}

// take_pack with its waiting loop as a call instead of inline: the fused
// kernel (fused_lamport.cu) inlines the sum of a pack four times over up
// to eight sources, and there the smaller code ran faster in the kernel
// loop; the one- and two-shot ran slower with the call. The call looks at
// the pack afresh (passing the first look in would keep it in registers
// across the call) and returns it as last seen: still pending<T> when the
// call failed.
template <class T>
__device__ __noinline__ uint4 waited_pack(const PeerSet& p, const uint4* pack, int source,
                                          std::uint32_t epoch) {
  uint4 v = load_volatile_pack(pack);
  take_pack<T>(p, pack, source, epoch, v);
  return v;
}

template <class T>
__device__ __forceinline__ bool take_pack_by_call(const PeerSet& p, const uint4* pack, int source,
                                                  std::uint32_t epoch, uint4& v) {
  if (pending<T>(v)) v = waited_pack<T>(p, pack, source, epoch);
  return !pending<T>(v);
}

// Call `epoch`'s sub-slots as a kernel thread uses them, pack after pack:
// source q's in this rank's region (from) and this rank's in owner q's
// (to). kBound: the most ranks the kernel serves (2 in its two-rank
// instantiation, else kMaxRanks). At two ranks the peer's two sub-slots are
// worked out once and kept (lamport_of per pack was about a tenth of the
// fused kernel's instructions); with more ranks each is worked out when
// asked, which keeps the registers free. kKeep = false works each out when
// asked at two ranks too: the one-shot's two-rank kernel spilled with the
// two pointers kept (benchmarks/kernel-loop.md).
template <int kBound, bool kKeep = kBound == 2>
class LamportSlots {
  static_assert(!kKeep || kBound == 2, "the sub-slots are kept at two ranks only");

 public:
  __device__ LamportSlots(const PeerSet& p, std::uint32_t epoch) : p_(&p), epoch_(epoch) {
    if constexpr (kKeep) {
      from_peer_ = lamport_of(p, p.rank, 1 - p.rank, epoch);
      to_peer_ = lamport_of(p, 1 - p.rank, p.rank, epoch);
    }
  }
  __device__ uint4* from(int source) const {
    if constexpr (kKeep) {
      return from_peer_;
    } else {
      return lamport_of(*p_, p_->rank, source, epoch_);
    }
  }
  __device__ uint4* to(int owner) const {
    if constexpr (kKeep) {
      return to_peer_;
    } else {
      return lamport_of(*p_, owner, p_->rank, epoch_);
    }
  }

 private:
  const PeerSet* p_;
  std::uint32_t epoch_;
  uint4* from_peer_ = nullptr;
  uint4* to_peer_ = nullptr;
};

// Whether the helpers below take a two-rank call's peer without a branch on
// the rank: its pack at seen[0], summed as own + peer (two_rank_sum, the
// same bits as the rank order). For the one-shot (its sub-slots not kept)
// only: the same in the two-shot and the fused op ran slower on the kernel
// loop (benchmarks/kernel-loop.md).
template <int kBound, bool kKeep>
inline constexpr bool kTwoRankPeerFirst = kBound == 2 && !kKeep;

// Pack j of every peer's sub-slot in this rank's region (what the one-shot
// and the two-shot's reduce-scatter take in): a first look at each, all
// loads in flight together; `ranks` how many the call has. Source q's at
// seen[q], or the peer's at seen[0] (kTwoRankPeerFirst).
template <int kBound, bool kKeep>
__device__ __forceinline__ void look_at_arrivals(const PeerSet& p, int ranks,
                                                 const LamportSlots<kBound, kKeep>& slots,
                                                 std::int64_t j, uint4 (&seen)[kBound]) {
  if constexpr (kTwoRankPeerFirst<kBound, kKeep>) {
    seen[0] = load_volatile_pack(slots.from(1 - p.rank) + j);
    return;
  }
#pragma unroll
  for (int r = 0; r < kBound; ++r) {
    if (r >= ranks) break;
    if (r != p.rank) seen[r] = load_volatile_pack(slots.from(r) + j);
  }
}

// `own` and those packs summed in rank order (RankOrderSum: the bits of
// every other route), each waited for (take_pack) where the first look
// found it pending. False when the call failed.
template <class T, int kBound, bool kKeep>
__device__ __forceinline__ bool sum_arrivals(const PeerSet& p, int ranks, std::uint32_t epoch,
                                             const LamportSlots<kBound, kKeep>& slots,
                                             std::int64_t j, const uint4& own,
                                             uint4 (&seen)[kBound], Pack<T>& sum) {
  if constexpr (kTwoRankPeerFirst<kBound, kKeep>) {
    const int peer = 1 - p.rank;
    if (!take_pack<T>(p, slots.from(peer) + j, peer, epoch, seen[0])) return false;
    sum = two_rank_sum<T>(own, seen[0]).rounded();
    return true;
  }
  RankOrderSum<T> acc;
#pragma unroll
  for (int r = 0; r < kBound; ++r) {
    if (r >= ranks) break;
    Pack<T> source;
    if (r == p.rank) {
      source.raw = own;
    } else {
      if (!take_pack<T>(p, slots.from(r) + j, r, epoch, seen[r])) return false;
      source.raw = seen[r];
    }
    acc.add(source);
  }
  sum = acc.rounded();
  return true;
}

// Those packs back to the sentinel, ready for call epoch + 2 (see above):
// after the same thread's reads of the same addresses (program order).
template <int kBound, bool kKeep>
__device__ __forceinline__ void reset_arrivals(const PeerSet& p, int ranks,
                                               const LamportSlots<kBound, kKeep>& slots,
                                               std::int64_t j) {
  if constexpr (kTwoRankPeerFirst<kBound, kKeep>) {
    store_volatile_pack(slots.from(1 - p.rank) + j, sentinel_pack());
    return;
  }
#pragma unroll
  for (int r = 0; r < kBound; ++r) {
    if (r >= ranks) break;
    if (r != p.rank) store_volatile_pack(slots.from(r) + j, sentinel_pack());
  }
}

}  // namespace peerplan::cuda_kernels
