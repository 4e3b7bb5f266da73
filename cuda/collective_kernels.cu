// The CUDA backend's kernels: one-shot and two-shot all-reduce, fused
// all-reduce + residual add + RMSNorm, the standalone add + RMSNorm of the
// fallback, and strided pack/unpack. Sums are fp32 in fixed rank order
// 0..n-1 with one rounding, so every rank's output is bit-identical.
// Peer slots are read 16 bytes at a time; the caller's tensors use 16-byte
// accesses only where this rank's pointer is aligned (a local choice: it
// never changes what is exchanged), element by element otherwise.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_recipe.hpp"
#include "launch_shape.cuh"
#include "recipe_steps.cuh"
#include "rms_norm_row.cuh"
#include "shard_geometry.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Sum of every source's sub-slot of this rank's own slot at element
// `first` (a pack boundary): fixed rank order, one rounding, local reads,
// all issued before the first add.
template <class T>
__device__ __forceinline__ Pack<T> reduce_sources(const PeerSet& p, std::uint32_t epoch,
                                                  std::int64_t first) {
  Pack<T> in[kMaxRanks];
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r) {
    if (r < p.size) in[r].raw = *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, r, epoch) + first);
  }
  float acc[Pack<T>::kCount];
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) acc[k] = 0.0f;
#pragma unroll
  for (int r = 0; r < kMaxRanks; ++r) {
    if (r >= p.size) break;
#pragma unroll
    for (int k = 0; k < Pack<T>::kCount; ++k) acc[k] = __fadd_rn(acc[k], to_float(in[r].v[k]));
  }
  Pack<T> out;
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) out.v[k] = from_float<T>(acc[k]);
  return out;
}

// One-shot uses NCCL's "LL" idea: every 16-byte line carries 8 bytes of
// data and the call's epoch twice, written with one 16-byte store, so a
// reader knows the data has arrived when it sees the flags: no separate
// flag write, hence no fence that would wait for the data writes to be
// acknowledged across the link. Line i of source r lies in sub-slot r.
__device__ __forceinline__ void store_line(uint4* line, uint2 data, std::uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(line), "r"(data.x),
               "r"(flag), "r"(data.y), "r"(flag)
               : "memory");
}

__device__ __forceinline__ uint4 load_line(const uint4* line) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(line)
               : "memory");
  return v;
}

// Waits (bounded) until `line` carries `epoch`; false when the call failed
// (timeout, or a peer or another block of this rank gave up).
__device__ __forceinline__ bool wait_line(const PeerSet& p, const uint4* line, int source,
                                          std::uint32_t epoch, uint2& data) {
  uint4 v = load_line(line);
  std::uint64_t start = 0;
  for (std::uint32_t spins = 0; v.y != epoch || v.w != epoch; v = load_line(line)) {
    if ((++spins & 255u) != 0u) continue;
    const Signals* own = signals_of(p, p.rank);
    if (*static_cast<const volatile std::uint32_t*>(&own->abandoned[source]) != 0u) {
      give_up(p, ErrorCode::peer_gave_up, Phase::arrive, epoch, source);
      return false;
    }
    if (*static_cast<const volatile std::uint32_t*>(&own->aborted) != 0u) return false;
    const std::uint64_t now = global_ns();
    if (start == 0) start = now;
    if (now - start > p.timeout_ns) {
      give_up(p, ErrorCode::timeout, Phase::arrive, epoch, source);
      return false;
    }
  }
  data = make_uint2(v.x, v.z);
  return true;
}

// `seen` is a first look at `line`, loaded early with others so that their
// latencies overlap; only a line that had not arrived then is waited for.
__device__ __forceinline__ bool take_line(const PeerSet& p, const uint4* line, uint4 seen,
                                          int source, std::uint32_t epoch, uint2& data) {
  if (seen.y == epoch && seen.w == epoch) {
    data = make_uint2(seen.x, seen.z);
    return true;
  }
  return wait_line(p, line, source, epoch, data);
}

template <class T>
union Half8 {  // the 8 data bytes of a line
  uint2 raw;
  T v[8 / sizeof(T)];
};

template <class T>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(const __grid_constant__ PeerSet p, const T* in, T* out, const __grid_constant__ KernelLayout layout, std::int64_t count) {
  constexpr int E = 8 / sizeof(T);  // elements per line
  const std::int64_t lines = (count + E - 1) / E;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_vec = layout.dense && (reinterpret_cast<std::uintptr_t>(in) & 7u) == 0;
  const bool out_vec = layout.dense && (reinterpret_cast<std::uintptr_t>(out) & 7u) == 0;
  auto load_input = [&](std::int64_t i) {
    Half8<T> data;
    data.raw = make_uint2(0u, 0u);
    if (i >= lines) return data;
    if (in_vec && (i + 1) * E <= count) {
      data.raw = *reinterpret_cast<const uint2*>(in + i * E);
    } else {
      for (int k = 0; k < E && i * E + k < count; ++k) data.v[k] = in[offset_of(layout, i * E + k)];
    }
    return data;
  };

  // The first line's input load is in flight while begin_call reads the
  // epoch (a small message is one line per thread: one latency, not two).
  wait_for_previous_kernel();
  const Half8<T> first = load_input(begin);
  std::uint32_t epoch, ticket;
  if (!begin_call(p, epoch, ticket)) return;

  for (std::int64_t i = begin; i < lines; i += stride) {
    const Half8<T> data = i == begin ? first : load_input(i);
    for (int q = 0; q < p.size; ++q) {
      store_line(data_of<uint4>(p, q, p.rank, epoch) + i, data.raw, epoch);
    }
  }

  // Each thread takes kLinesAtOnce of its lines from every source per
  // step: all those loads are in flight together, then each line is summed
  // (waiting only for lines that had not arrived).
  constexpr int kLinesAtOnce = 2;
  bool ok = true;
  for (std::int64_t i = begin; ok && i < lines; i += kLinesAtOnce * stride) {
    uint4 seen[kLinesAtOnce][kMaxRanks];
#pragma unroll
    for (int u = 0; u < kLinesAtOnce; ++u) {
      const std::int64_t line = i + u * stride;
#pragma unroll
      for (int r = 0; r < kMaxRanks; ++r) {
        if (r < p.size && line < lines) seen[u][r] = load_line(data_of<uint4>(p, p.rank, r, epoch) + line);
      }
    }
#pragma unroll
    for (int u = 0; u < kLinesAtOnce; ++u) {
      const std::int64_t line = i + u * stride;
      if (!ok || line >= lines) break;
      float acc[E];
#pragma unroll
      for (int k = 0; k < E; ++k) acc[k] = 0.0f;
#pragma unroll
      for (int r = 0; r < kMaxRanks; ++r) {
        if (r >= p.size) break;
        Half8<T> data;
        if (!take_line(p, data_of<uint4>(p, p.rank, r, epoch) + line, seen[u][r], r, epoch, data.raw)) {
          ok = false;
          break;
        }
#pragma unroll
        for (int k = 0; k < E; ++k) acc[k] = __fadd_rn(acc[k], to_float(data.v[k]));
      }
      if (!ok) break;
      Half8<T> sum;
#pragma unroll
      for (int k = 0; k < E; ++k) sum.v[k] = from_float<T>(acc[k]);
      if (out_vec && (line + 1) * E <= count) {
        *reinterpret_cast<uint2*>(out + line * E) = sum.raw;
      } else {
        for (int k = 0; k < E && line * E + k < count; ++k) out[offset_of(layout, line * E + k)] = sum.v[k];
      }
    }
  }
  // A failed call leaves the epoch where it was; the transport is broken
  // until reserve() re-creates the slabs.
  if (__syncthreads_or(!ok)) return;
  finish_call(p, epoch, ticket);
}

// Shard s covers [s * shard, min((s + 1) * shard, count)), shard a whole
// number of packs. Reduce-scatter: every rank pushes shard s of its input
// into rank s's slot (sub-slot <own rank>); rank s reduces its shard from
// its own slot and pushes the result into every peer's slot (sub-slot s, at
// the shard's positions, unused by the first phase); all-gather reads are
// local. Block b handles pack j of every shard for the same j on every
// rank, so per-block flags order exactly the data each block needs.
template <class T>
__global__ void __launch_bounds__(kThreads)
    two_shot_kernel(const __grid_constant__ PeerSet p, const T* in, T* out, const __grid_constant__ KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch, ticket;
  if (!begin_call(p, epoch, ticket)) return;
  Signals* own = signals_of(p, p.rank);

  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = shard_elements<V>(count, p.size);
  const std::int64_t shard_packs = shard / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_vec = layout.dense && aligned16(in);
  const bool out_vec = layout.dense && aligned16(out);

  // Loads of a step first, then its stores: the compiler may not move a
  // load past a store that could alias it, so this is spelled out.
  for (std::int64_t j = begin; j < shard_packs; j += stride) {
    Pack<T> mine[kMaxRanks];
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (s < p.size && first < count) mine[s] = load_tensor(in, layout, in_vec, first, count);
    }
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (s < p.size && first < count) {
        *reinterpret_cast<uint4*>(data_of<T>(p, s, p.rank, epoch) + first) = mine[s].raw;
      }
    }
  }
  __syncthreads();
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, own->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) return;

  for (std::int64_t j = begin; j < shard_packs; j += stride) {
    const std::int64_t first = p.rank * shard + j * V;
    if (first >= count) break;
    const Pack<T> sum = reduce_sources<T>(p, epoch, first);
    for (int q = 0; q < p.size; ++q) {
      if (q != p.rank) *reinterpret_cast<uint4*>(data_of<T>(p, q, p.rank, epoch) + first) = sum.raw;
    }
    store_tensor(out, layout, out_vec, first, count, sum);
  }
  __syncthreads();
  signal_peers(p, FlagRow::reduced, epoch);
  if (!wait_peers(p, own->reduced[blockIdx.x], epoch, Phase::reduced, epoch)) return;

  for (std::int64_t j = begin; j < shard_packs; j += stride) {
    Pack<T> sums[kMaxRanks];
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (s < p.size && s != p.rank && first < count) {
        sums[s].raw = *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, s, epoch) + first);
      }
    }
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (s < p.size && s != p.rank && first < count) store_tensor(out, layout, out_vec, first, count, sums[s]);
    }
  }
  finish_call(p, epoch, ticket);
}

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    fused_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual, const T* weight, float eps,
                 const __grid_constant__ KernelLayout layout, std::int64_t rows, std::int64_t hidden) {
  __shared__ float scratch[kRowThreads / 32];
  constexpr int V = Pack<T>::kCount;
  std::uint32_t epoch, ticket;
  if (!begin_call(p, epoch, ticket)) return;
  Signals* own = signals_of(p, p.rank);

  // Rows are packed back to back from a 256-byte aligned sub-slot start, so
  // they are 16-byte aligned exactly when a row is a whole number of packs.
  // Every rank pushes its rows into every slot; the reduction reads locally.
  const bool whole = hidden % V == 0;
  const std::int64_t packs = (hidden + V - 1) / V;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* src = inout + row_offset(layout, row, hidden);
    const bool vec = whole && aligned16(src);
    for (std::int64_t j = threadIdx.x; j < packs; j += blockDim.x) {
      const Pack<T> pack = load_row_pack(src, j * V, hidden, vec);
      for (int q = 0; q < p.size; ++q) {
        store_row_pack(data_of<T>(p, q, p.rank, epoch) + row * hidden, j * V, hidden, whole, pack);
      }
    }
  }
  __syncthreads();
  signal_peers(p, FlagRow::arrive, epoch);
  if (!wait_peers(p, own->arrive[blockIdx.x], epoch, Phase::arrive, epoch)) return;

  RowInBlock row_sum(scratch);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::int64_t base = row * hidden;
    auto sum_pack = [&](std::int64_t first, float (&s)[V]) {
      float acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = 0.0f;
      for (int r = 0; r < p.size; ++r) {
        const Pack<T> in = load_row_pack(data_of<T>(p, p.rank, r, epoch) + base, first, hidden, whole);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = __fadd_rn(acc[k], to_float(in.v[k]));
      }
#pragma unroll
      for (int k = 0; k < V; ++k) s[k] = to_float(from_float<T>(acc[k]));
      return true;
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    add_rms_norm_part<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps, row_sum);
  }
  finish_call(p, epoch, ticket);
}

// The fused op for small messages: rows travel as LL lines, as in the
// one-shot all-reduce, so there is no flag barrier (and no release fence):
// each pack of the row function waits for exactly the lines it sums. Rows
// are whole numbers of 16-byte packs (launch_fused checks), so pack j of a
// row is its lines 2j and 2j + 1. kCluster: a row per cluster of
// kRowSplits blocks (sm_90+), else a row per block; same bits either way.
template <class T, bool kCluster>
__global__ void __launch_bounds__(kCluster ? kSplitThreads : kRowThreads)
    fused_ll_kernel(const __grid_constant__ PeerSet p, T* inout, T* residual, const T* weight, float eps,
                    const __grid_constant__ KernelLayout layout, std::int64_t rows, std::int64_t hidden) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  constexpr int E = 8 / sizeof(T);  // elements per line
  static_assert(V == 2 * E, "a pack is two lines");
  std::uint32_t epoch, ticket;
  const bool started = begin_call(p, epoch, ticket);
  // A block of a cluster must not leave alone: its siblings would wait for
  // it at the row's cluster barrier. So a broken transport is carried as a
  // failure through the first row's exchange, and the cluster leaves after it.
  if (!kCluster && !started) return;
  bool failed = !started;

  auto row_sum = RowWorkers<kCluster>::row(shared);
  const int units = RowWorkers<kCluster>::row_step();
  const int unit = RowWorkers<kCluster>::first_row();
  const std::int64_t row_lines = hidden / E;
  const RowPart part = row_part(row_sum.split(), row_sum.thread(), row_lines / 2);
  for (std::int64_t row = unit; !failed && row < rows; row += units) {
    const T* src = inout + row_offset(layout, row, hidden);
    const bool vec = (reinterpret_cast<std::uintptr_t>(src) & 7u) == 0;
    for (std::int64_t l = 2 * part.first_pack + part.thread; l < 2 * part.end_pack; l += kSplitThreads) {
      Half8<T> data;
      if (vec) {
        data.raw = *reinterpret_cast<const uint2*>(src + l * E);
      } else {
        for (int k = 0; k < E; ++k) data.v[k] = src[l * E + k];
      }
      for (int q = 0; q < p.size; ++q) {
        store_line(data_of<uint4>(p, q, p.rank, epoch) + row * row_lines + l, data.raw, epoch);
      }
    }
  }

  // After a failure a thread stops waiting; every thread still reaches the
  // row's barrier, writes nothing more, and the kernel exits after it.
  for (std::int64_t row = unit; row < rows; row += units) {
    auto sum_pack = [&](std::int64_t first, float (&s)[V]) {
      const std::int64_t line = row * row_lines + first / E;
      // A first look at every source's two lines, all loads in flight at
      // once - in the cluster kernel, whose 128-thread blocks have the
      // registers for it; the 1024-thread block (64 registers a thread)
      // looks at one source at a time.
      constexpr int kAhead = kCluster ? kMaxRanks : 1;
      uint4 seen[kAhead][2];
#pragma unroll
      for (int r = 0; r < kAhead; ++r) {
        if (r < p.size) {
          const uint4* lines = data_of<uint4>(p, p.rank, r, epoch) + line;
          seen[r][0] = load_line(lines);
          seen[r][1] = load_line(lines + 1);
        }
      }
      float acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = 0.0f;
#pragma unroll
      for (int r = 0; r < kMaxRanks; ++r) {
        if (r >= p.size) break;
        const uint4* lines = data_of<uint4>(p, p.rank, r, epoch) + line;
        if (r >= kAhead) {
          seen[0][0] = load_line(lines);
          seen[0][1] = load_line(lines + 1);
        }
        const uint4 low_seen = seen[r < kAhead ? r : 0][0];
        const uint4 high_seen = seen[r < kAhead ? r : 0][1];
        Half8<T> low, high;
        low.raw = high.raw = make_uint2(0u, 0u);
        if (!failed) failed = !take_line(p, lines, low_seen, r, epoch, low.raw);
        if (!failed) failed = !take_line(p, lines + 1, high_seen, r, epoch, high.raw);
#pragma unroll
        for (int k = 0; k < E; ++k) {
          acc[k] = __fadd_rn(acc[k], to_float(low.v[k]));
          acc[E + k] = __fadd_rn(acc[E + k], to_float(high.v[k]));
        }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) s[k] = to_float(from_float<T>(acc[k]));
      return !failed;
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    if (!add_rms_norm_part<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps,
                              row_sum)) {
      return;  // the same decision on every thread of the block (or cluster)
    }
  }
  finish_call(p, epoch, ticket);
}

// kCluster: a row per cluster of kRowSplits blocks (sm_90+; launched as a
// programmatic dependent launch, hence the wait), else a row per block.
template <class T, bool kCluster>
__global__ void __launch_bounds__(kCluster ? kSplitThreads : kRowThreads)
    add_rms_norm_kernel(const T* reduced, T* inout, T* residual, const T* weight, float eps,
                        const __grid_constant__ KernelLayout layout, std::int64_t rows, std::int64_t hidden,
                        const std::uint32_t* aborted) {
  __shared__ RowShared shared;
  constexpr int V = Pack<T>::kCount;
  if constexpr (kCluster) wait_for_previous_kernel();
  // After the fused op's two-shot gave up, its sums are incomplete: leave
  // residual and output as they are. The word no longer changes once the
  // two-shot kernel has finished, so every block decides alike (a cluster
  // leaves whole, before its first barrier).
  if (aborted != nullptr && *static_cast<const volatile std::uint32_t*>(aborted) != 0u) return;
  auto row_sum = RowWorkers<kCluster>::row(shared);
  for (std::int64_t row = RowWorkers<kCluster>::first_row(); row < rows;
       row += RowWorkers<kCluster>::row_step()) {
    const T* sums = reduced + row * hidden;
    const bool vec = hidden % V == 0 && aligned16(sums);
    auto sum_pack = [&](std::int64_t first, float (&s)[V]) {
      const Pack<T> in = load_row_pack(sums, first, hidden, vec);
#pragma unroll
      for (int k = 0; k < V; ++k) s[k] = to_float(in.v[k]);
      return true;
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    add_rms_norm_part<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps, row_sum);
  }
}

template <class W>
__global__ void pack_kernel(const W* tensor, W* contiguous, const __grid_constant__ KernelLayout layout,
                            std::int64_t count, bool unpack) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    const std::int64_t offset = offset_of(layout, i);
    if (unpack) const_cast<W*>(tensor)[offset] = contiguous[i];
    else contiguous[i] = tensor[offset];
  }
}

}  // namespace

namespace {
// Rows of the row kernels in flight at once: blocks of kRowThreads, or
// clusters of kRowSplits blocks of kSplitThreads.
constexpr std::int64_t kMaxRowBlocks = 1024;
// Rows of the LL fused kernel in flight at once (clusters of kRowSplits blocks).
constexpr std::int64_t kMaxFusedClusters = 128;
std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }
// A staged message, padded: two-shot pads each of `size` shards by less
// than one pack; the fused op rounds the message up to a pack.
std::size_t padded_message(std::size_t max_message_bytes, int size) {
  return max_message_bytes + static_cast<std::size_t>(size + 1) * kPackBytes;
}
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

namespace detail {

KernelStep one_shot_ll_step(const PeerSet& shape, ElementType type, std::int64_t count) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t lines = (count + 8 / sizeof(T) - 1) / (8 / sizeof(T));
    step.kernel = reinterpret_cast<const void*>(one_shot_kernel<T>);
    // No per-block flags: the grid size is this rank's choice.
    step.blocks = blocks_for(lines, shape.one_shot_max_blocks);
  });
  step.threads = kThreads;
  step.programmatic = shape.overlap_launch;
  return step;
}

KernelStep two_shot_step(const PeerSet& shape, ElementType type, std::int64_t shard) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = Pack<T>::kCount;
    step.kernel = reinterpret_cast<const void*>(two_shot_kernel<T>);
    step.blocks = blocks_for(shard / V, kTwoShotMaxBlocks);
  });
  step.threads = kThreads;
  step.programmatic = shape.overlap_launch;
  return step;
}

KernelStep fused_ll_step(const PeerSet& shape, ElementType type, std::int64_t rows) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    if (shape.cluster_rows) {
      const auto clusters =
          static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxFusedClusters));
      step.kernel = reinterpret_cast<const void*>(fused_ll_kernel<T, true>);
      step.blocks = clusters * kRowSplits;
      step.threads = kSplitThreads;
      step.cluster = kRowSplits;
    } else {
      step.kernel = reinterpret_cast<const void*>(fused_ll_kernel<T, false>);
      step.blocks = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxBlocks));
      step.threads = kRowThreads;
    }
  });
  step.programmatic = shape.overlap_launch;
  return step;
}

KernelStep fused_staged_step(const PeerSet& shape, ElementType type, std::int64_t rows) {
  KernelStep step;
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    step.kernel = reinterpret_cast<const void*>(fused_kernel<T>);
  });
  step.blocks = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxBlocks));
  step.threads = kRowThreads;
  step.programmatic = shape.overlap_launch;
  return step;
}

// `clusters` as PeerSet::cluster_rows; the cluster kernel waits for the
// previous kernel on the device (it is a programmatic dependent launch
// whatever PeerSet::overlap_launch says), the block kernel is a plain launch.
KernelStep row_norm_step(ElementType type, std::int64_t rows, bool clusters) {
  KernelStep step;
  const auto units = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxRowBlocks));
  with_element_type(type, [&](auto tag) {
    using T = decltype(tag);
    if (clusters) {
      step.kernel = reinterpret_cast<const void*>(add_rms_norm_kernel<T, true>);
    } else {
      step.kernel = reinterpret_cast<const void*>(add_rms_norm_kernel<T, false>);
    }
  });
  if (clusters) {
    step.blocks = units * kRowSplits;
    step.threads = kSplitThreads;
    step.cluster = kRowSplits;
    step.programmatic = true;
  } else {
    step.blocks = units;
    step.threads = kRowThreads;
  }
  return step;
}

}  // namespace detail

cudaError_t launch_one_shot(const PeerSet& peers, ElementType type, const void* in, void* out,
                            const KernelLayout& layout, std::int64_t count,
                            cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  LaunchRecipe recipe;
  detail::plan_all_reduce(Algorithm::one_shot_ll, peers, type, layout, count, recipe);
  CallPointers pointers;
  pointers.in = in;
  pointers.out = out;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

cudaError_t launch_two_shot(const PeerSet& peers, ElementType type, const void* in, void* out,
                            const KernelLayout& layout, std::int64_t count,
                            cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  LaunchRecipe recipe;
  detail::plan_all_reduce(Algorithm::two_shot, peers, type, layout, count, recipe);
  CallPointers pointers;
  pointers.in = in;
  pointers.out = out;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

cudaError_t launch_fused(const PeerSet& peers, ElementType type, void* inout, void* residual,
                         const void* weight, float eps, const KernelLayout& layout,
                         std::int64_t rows, std::int64_t hidden, cudaStream_t stream) {
  if (!with_element_type(type, [](auto) {})) return cudaGetLastError();
  // Lamport: rows of whole packs (the region holds whole packs per row),
  // above the knob's threshold, within the region. Every input of the
  // choice is the same on every rank (the key fixes rows and hidden;
  // reserve() and the agreed knobs the rest), so sender and receiver run
  // the same protocol.
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(hidden) * detail::element_bytes(type);
  const std::uint64_t bytes = row_bytes * static_cast<std::uint64_t>(rows);
  Algorithm algorithm;
  // (The kernel indexes the region's packs with 32-bit integers.)
  if (row_bytes % kPackBytes == 0 && bytes > peers.fused_lamport_after_bytes &&
      bytes <= peers.fused_lamport_max_bytes && bytes <= peers.lamport_max_bytes &&
      bytes / kPackBytes <= 0x7fffffffu) {
    algorithm = Algorithm::fused_lamport;
  } else if (row_bytes % kPackBytes == 0 && bytes <= peers.fused_ll_max_bytes) {
    // LL lines: a cluster per row where the device has clusters, else a block per row.
    algorithm = Algorithm::fused_ll;
  } else if (layout.dense) {
    // Larger messages: the two-shot all-reduce in place, then the
    // fallback's own add + RMSNorm kernel - the same sums (fixed rank
    // order, one rounding) and the same row function, so the same bits;
    // measured faster than one kernel that reduces and normalises rows
    // (benchmarks/RESULTS.md, session 3).
    algorithm = Algorithm::fused_two_shot_row_norm;
  } else {
    algorithm = Algorithm::fused_staged;
  }
  LaunchRecipe recipe;
  detail::plan_fused(algorithm, peers, type, layout, rows, hidden, recipe);
  CallPointers pointers;
  pointers.inout = inout;
  pointers.residual = residual;
  pointers.weight = weight;
  pointers.eps = eps;
  return detail::legacy_status(launch(recipe, peers, pointers, stream));
}

bool rows_in_clusters_supported(int device) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, fused_ll_kernel<__nv_bfloat16, true>) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  // The device code that will run must be sm_90+ too (a build for older
  // architectures only has no cluster code, even on a Hopper GPU).
  return major >= 9 && attributes.binaryVersion >= 90;
}

cudaError_t launch_add_rms_norm(ElementType type, const void* reduced, void* inout,
                                void* residual, const void* weight, float eps,
                                const KernelLayout& layout, std::int64_t rows,
                                std::int64_t hidden, bool clusters, cudaStream_t stream) {
  const KernelStep step = detail::row_norm_step(type, rows, clusters);
  if (step.kernel == nullptr) return cudaGetLastError();
  // (const T* reduced, T* inout, T* residual, const T* weight, eps,
  // KernelLayout, rows, hidden, const uint32_t* aborted: none here)
  const std::uint32_t* aborted = nullptr;
  void* args[] = {&reduced, &inout, &residual, &weight, &eps, const_cast<KernelLayout*>(&layout),
                  &rows, &hidden, &aborted};
  detail::launch_step(step, args, stream);
  return cudaGetLastError();
}

namespace {
cudaError_t launch_copy(std::size_t element_bytes, const void* tensor, void* contiguous,
                        const KernelLayout& layout, std::int64_t count, bool unpack,
                        cudaStream_t stream) {
  const unsigned blocks = blocks_for(count, 1024);
  if (element_bytes == 2) {
    pack_kernel<std::uint16_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const std::uint16_t*>(tensor), static_cast<std::uint16_t*>(contiguous),
        layout, count, unpack);
  } else {
    pack_kernel<std::uint32_t><<<blocks, kThreads, 0, stream>>>(
        static_cast<const std::uint32_t*>(tensor), static_cast<std::uint32_t*>(contiguous),
        layout, count, unpack);
  }
  return cudaGetLastError();
}
}  // namespace

cudaError_t launch_pack(std::size_t element_bytes, const void* tensor, void* contiguous,
                        const KernelLayout& layout, std::int64_t count, cudaStream_t stream) {
  return launch_copy(element_bytes, tensor, contiguous, layout, count, false, stream);
}

cudaError_t launch_unpack(std::size_t element_bytes, const void* contiguous, void* tensor,
                          const KernelLayout& layout, std::int64_t count, cudaStream_t stream) {
  return launch_copy(element_bytes, tensor, const_cast<void*>(contiguous), layout, count, true,
                     stream);
}

}  // namespace peerplan::cuda_kernels
