// SPDX-License-Identifier: Apache-2.0
// Device-side flag protocol shared by the collective kernels: the signal
// area, system-scope release/acquire flags, bounded waits and the end-of-call
// bookkeeping. See collective_kernels.hpp for the protocol.
#pragma once

#include <cstdint>

#include "collective_kernels.hpp"
#include "flag_window.cuh"
#include "give_up_mark.cuh"

namespace peerplan::cuda_kernels {

// Head of every slab. Flag arrays are indexed [block][writer]: peer p writes
// its epoch into *my* area at [b][p], so every wait polls local memory.
struct Signals {
  std::uint32_t arrive[kMaxBlocks][kMaxRanks];
  std::uint32_t reduced[kMaxBlocks][kMaxRanks];
  std::uint32_t done[kMaxBlocks][kMaxRanks];  // pull: peer p finished reading my input
  // Pull: where peer p's input of the call with epoch e is, at [e % 2][p];
  // written by p before its arrive flag. Parity suffices: p writes the
  // entry again at e + 2 only after seeing this rank arrive at e + 1, i.e.
  // after this rank's call e (the reader) finished.
  PullSource sources[2][kMaxRanks];
  // Nonzero: peer p gave up at that epoch (give_up_mark.cuh). Aligned for
  // begin_call's two 16-byte loads.
  alignas(16) std::uint32_t abandoned[kMaxRanks];
  // Owner-only words below.
  // The epoch of the last call is the sum of two counts, so that a call of
  // one block (the smallest messages') stores one word, not all of them:
  // word kMaxCallBlocks counts the calls of one block; every word below it
  // counts the calls of several blocks (block b of such a call reads word b
  // and the call's blocks together write every word, so no two blocks of a
  // call touch the same word).
  alignas(16) std::uint32_t epochs[kMaxCallBlocks + 1];
  std::uint32_t aborted;  // this rank gave up; later kernels exit at once
  // node_reduce_scatter's blocks that completed the call (node_shards.cu);
  // back to 0 when the last one has.
  std::uint32_t node_blocks_done;
};
static_assert(sizeof(Signals) <= kSignalAreaBytes, "signal area too small");
static_assert(kMaxRanks == 8, "begin_call reads abandoned[] as two 16-byte packs");

__device__ __forceinline__ Signals* signals_of(const PeerSet& p, int rank) {
  return static_cast<Signals*>(p.slabs[rank]);
}

// Where source rank `source`'s data for call `epoch` lies in rank
// `owner`'s slab: slot epoch % 2, sub-slot `source`.
template <class T>
__device__ __forceinline__ T* data_of(const PeerSet& p, int owner, int source,
                                      std::uint32_t epoch) {
  return reinterpret_cast<T*>(static_cast<char*>(p.slabs[owner]) + kSignalAreaBytes +
                              (epoch & 1u) * p.slot_bytes + source * p.sub_slot_bytes);
}

__device__ __forceinline__ std::uint32_t load_acquire(const std::uint32_t* address) {
  std::uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}

__device__ __forceinline__ void store_release(std::uint32_t* address, std::uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(address), "r"(value) : "memory");
}

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// 16 bytes that a peer writes (LL lines, Lamport packs, a peer's pulled
// data), loaded and stored volatile (relaxed, system scope): never served
// from a cache line filled earlier, each 32-bit lane single-copy atomic.
// The "memory" clobber keeps the compiler from moving other accesses
// across them.
__device__ __forceinline__ uint4 load_volatile_pack(const void* address) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(address)
               : "memory");
  return v;
}

__device__ __forceinline__ void store_volatile_pack(void* address, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(address), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Waits for the previous kernel of the stream under a programmatic
// dependent launch (its epoch, its outputs), after letting the next kernel
// be scheduled, whose own wait keeps it behind this one. Without such a
// launch the wait returns at once (and only a programmatic dependent of
// this kernel is let in early). begin_call issues it; a kernel may issue
// it earlier itself to load its input before begin_call's epoch read, so
// that the two loads' latencies overlap (a second wait returns at once).
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Records why this rank gives up (first failing thread only), then tells
// every peer, so that their waits end at once instead of at their own
// deadline.
inline __device__ __noinline__ void give_up(const PeerSet& p, ErrorCode code, Phase phase,
                                            std::uint32_t epoch, int peer) {
  Signals* own = signals_of(p, p.rank);
  if (atomicExch(&own->aborted, 1u) == 0u) {
    volatile DeviceError* error = p.error;
    error->epoch = epoch;
    error->phase = static_cast<std::uint32_t>(phase);
    error->peer = static_cast<std::uint32_t>(peer);
    error->block = blockIdx.x;
    if (peer >= static_cast<int>(kLatePeer)) {
      error->peer_mark = *static_cast<const volatile std::uint32_t*>(
          &own->abandoned[peer - static_cast<int>(kLatePeer)]);
    }
    __threadfence_system();
    error->code = static_cast<std::uint32_t>(code);
    __threadfence_system();
  }
  for (int q = 0; q < p.size; ++q) {
    if (q != p.rank) store_release(&signals_of(p, q)->abandoned[p.rank], gave_up_mark(epoch));
  }
}

// First words of every kernel: this call's epoch, or false (every thread
// alike) when an earlier call on this rank gave up: the transport is broken
// until reserve() re-creates the slabs.
//
// The epoch is the count of one-block calls plus that of wider calls
// (epochs[]); the wider count lives in one word per block of the largest
// grid, all equal between calls. Thread 0 of block b reads both counts;
// after the block's barrier a call of one block writes its count's one
// word, and the threads of a wider call write theirs into words b,
// b + grid, b + 2 grid, ...: the call's blocks together write every word,
// and no word is touched by two blocks of a call. So each block pays a load, not
// the longer round trip of an atomic on a word all blocks share
// (benchmarks/kernel-loop.md), and no fence: nothing reads the words
// again before the next kernel, which starts only after this one completed
// (stream order, or griddepcontrol.wait under a programmatic dependent
// launch). The end of a kernel needs no atomic either: the kernel boundary
// orders a call's last writes (its outputs, its remote stores) before the
// next kernel. A failed call advances the epoch too; it has set `aborted`,
// and every later kernel exits at begin_call until reserve() re-creates the
// slabs.
__device__ __forceinline__ bool begin_call(const PeerSet& p, std::uint32_t& epoch) {
  __shared__ std::uint32_t shared_epoch;
  __shared__ std::uint32_t shared_count;  // this call's count (epochs[])
  __shared__ int shared_aborted;
  wait_for_previous_kernel();
  Signals* own = signals_of(p, p.rank);
  if (threadIdx.x == 0) {
    // Loaded together, so that their latencies overlap: abandoned[] in two
    // 16-byte loads, not eight.
    const uint4 low = load_volatile_pack(&own->abandoned[0]);
    const uint4 high = load_volatile_pack(&own->abandoned[4]);
    const std::uint32_t aborted = *static_cast<const volatile std::uint32_t*>(&own->aborted);
    const std::uint32_t one_block_calls =
        *static_cast<const volatile std::uint32_t*>(&own->epochs[kMaxCallBlocks]);
    const std::uint32_t wide_calls =
        *static_cast<const volatile std::uint32_t*>(&own->epochs[blockIdx.x]);
    const std::uint32_t call = one_block_calls + wide_calls + 1u;
    shared_epoch = call;
    shared_count = (gridDim.x == 1 ? one_block_calls : wide_calls) + 1u;
    // A peer that gave up on this call or an earlier one (this rank was late)
    // reported it failed: so does this rank, before it reads anything whose
    // flags would let it complete the call. A peer that gave up on a later
    // call finished this one, and its data for it stays in place. (A rank's
    // own entry stays 0.)
    const std::uint32_t gave_up_at[kMaxRanks] = {low.x,  low.y,  low.z,  low.w,
                                                 high.x, high.y, high.z, high.w};
    int late_for = -1;
#pragma unroll
    for (int q = kMaxRanks - 1; q >= 0; --q) {
      if (late_for_mark(call, gave_up_at[q])) late_for = q;
    }
    shared_aborted = aborted != 0u || late_for >= 0;
    if (aborted == 0u && late_for >= 0) {
      give_up(p, ErrorCode::peer_gave_up, Phase::arrive, call, kLatePeer + late_for);
    }
  }
  __syncthreads();
  epoch = shared_epoch;
  const std::uint32_t count = shared_count;
  // One loop for both kinds of call, its bounds chosen (not two branches,
  // which cost the short-row kernels registers): a call of one block writes
  // word kMaxCallBlocks (thread 0), a wider one the words below it.
  const bool one_block = gridDim.x == 1;
  const unsigned first = one_block ? kMaxCallBlocks : blockIdx.x;
  const unsigned end = one_block ? kMaxCallBlocks + 1 : kMaxCallBlocks;
  for (unsigned word = first + threadIdx.x * gridDim.x; word < end;
       word += blockDim.x * gridDim.x) {
    own->epochs[word] = count;
  }
  return !shared_aborted;
}

enum class FlagRow { arrive, reduced, done };

__device__ __forceinline__ std::uint32_t* flag_row(Signals* s, FlagRow row, int block) {
  switch (row) {
    case FlagRow::arrive:
      return s->arrive[block];
    case FlagRow::reduced:
      return s->reduced[block];
    case FlagRow::done:
      break;
  }
  return s->done[block];
}

// Thread q < size publishes `epoch` into peer q's row[block][my rank].
// Call after __syncthreads(): the release covers the block's earlier writes.
__device__ __forceinline__ void signal_peers(const PeerSet& p, FlagRow row, std::uint32_t epoch) {
  const int q = threadIdx.x;
  if (q < p.size && q != p.rank) {
    store_release(&flag_row(signals_of(p, q), row, blockIdx.x)[p.rank], epoch);
  }
}

// What every bounded wait checks now and then (not on each poll: these
// are loads of their own): whether peer `source` gave up (it raised
// abandoned in `own`, this rank's signals), whether another block of this
// rank's call gave up (aborted), and the timeout, counted from the first
// check (`start`, 0 before it). False when the wait must end; give_up has
// then recorded why, where this block is the first to know.
__device__ __forceinline__ bool may_wait_on(const PeerSet& p, const Signals* own, int source,
                                            Phase phase, std::uint32_t epoch,
                                            std::uint64_t& start) {
  if (*static_cast<const volatile std::uint32_t*>(&own->abandoned[source]) != 0u) {
    give_up(p, ErrorCode::peer_gave_up, phase, epoch, source);
    return false;
  }
  if (*static_cast<const volatile std::uint32_t*>(&own->aborted) != 0u) return false;
  const std::uint64_t now = global_ns();
  if (start == 0) start = now;
  if (now - start > p.timeout_ns) {
    give_up(p, ErrorCode::timeout, phase, epoch, source);
    return false;
  }
  return true;
}

// Waits until every peer's flag in `flags` (this rank's area, indexed by
// writer) reached `target` (flag_window.cuh). Thread q polls peer q. Returns false on every
// thread of the block when the wait failed (timeout or a peer gave up).
// Ends with a block barrier either way.
__device__ __forceinline__ bool wait_peers(const PeerSet& p, const std::uint32_t* flags,
                                           std::uint32_t target, Phase phase, std::uint32_t epoch) {
  const int q = threadIdx.x;
  int failed = 0;
  if (q < p.size && q != p.rank) {
    const Signals* own = signals_of(p, p.rank);
    std::uint64_t start = 0;
    for (std::uint32_t spins = 0; !flag_reached(load_acquire(&flags[q]), target); ++spins) {
      if ((spins & 127u) != 127u) continue;
      if (!may_wait_on(p, own, q, phase, epoch, start)) {
        failed = 1;
        break;
      }
    }
  }
  return __syncthreads_or(failed) == 0;
}

}  // namespace peerplan::cuda_kernels
