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

#include "collective_kernels.hpp"
#include "device_sync.cuh"
#include "element_ops.cuh"
#include "launch_shape.cuh"

namespace peerplan::cuda_kernels {
namespace {

// Sum of every source's sub-slot of this rank's own slot at element
// `first` (a pack boundary): fixed rank order, one rounding, local reads.
template <class T>
__device__ __forceinline__ Pack<T> reduce_sources(const PeerSet& p, std::uint32_t epoch,
                                                  std::int64_t first) {
  float acc[Pack<T>::kCount];
#pragma unroll
  for (int k = 0; k < Pack<T>::kCount; ++k) acc[k] = 0.0f;
  for (int r = 0; r < p.size; ++r) {
    Pack<T> in;
    in.raw = *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, r, epoch) + first);
#pragma unroll
    for (int k = 0; k < Pack<T>::kCount; ++k) acc[k] = __fadd_rn(acc[k], to_float(in.v[k]));
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

template <class T>
union Half8 {  // the 8 data bytes of a line
  uint2 raw;
  T v[8 / sizeof(T)];
};

template <class T>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(PeerSet p, const T* in, T* out, KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;

  constexpr int E = 8 / sizeof(T);  // elements per line
  const std::int64_t lines = (count + E - 1) / E;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_vec = layout.dense && (reinterpret_cast<std::uintptr_t>(in) & 7u) == 0;
  const bool out_vec = layout.dense && (reinterpret_cast<std::uintptr_t>(out) & 7u) == 0;

  for (std::int64_t i = begin; i < lines; i += stride) {
    Half8<T> data;
    data.raw = make_uint2(0u, 0u);
    if (in_vec && (i + 1) * E <= count) {
      data.raw = *reinterpret_cast<const uint2*>(in + i * E);
    } else {
      for (int k = 0; k < E && i * E + k < count; ++k) data.v[k] = in[offset_of(layout, i * E + k)];
    }
    for (int q = 0; q < p.size; ++q) {
      store_line(data_of<uint4>(p, q, p.rank, epoch) + i, data.raw, epoch);
    }
  }

  bool ok = true;
  for (std::int64_t i = begin; ok && i < lines; i += stride) {
    float acc[E];
#pragma unroll
    for (int k = 0; k < E; ++k) acc[k] = 0.0f;
    for (int r = 0; r < p.size; ++r) {
      Half8<T> data;
      if (!wait_line(p, data_of<uint4>(p, p.rank, r, epoch) + i, r, epoch, data.raw)) {
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
    if (out_vec && (i + 1) * E <= count) {
      *reinterpret_cast<uint2*>(out + i * E) = sum.raw;
    } else {
      for (int k = 0; k < E && i * E + k < count; ++k) out[offset_of(layout, i * E + k)] = sum.v[k];
    }
  }
  // A failed call leaves the epoch where it was; the transport is broken
  // until reserve() re-creates the slabs.
  if (__syncthreads_or(!ok)) return;
  finish_call(p, epoch);
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
    two_shot_kernel(PeerSet p, const T* in, T* out, KernelLayout layout, std::int64_t count) {
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
  Signals* own = signals_of(p, p.rank);

  constexpr int V = Pack<T>::kCount;
  const std::int64_t shard = ((count + p.size - 1) / p.size + V - 1) / V * V;
  const std::int64_t shard_packs = shard / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool in_vec = layout.dense && aligned16(in);
  const bool out_vec = layout.dense && aligned16(out);

  for (std::int64_t j = begin; j < shard_packs; j += stride) {
    for (int s = 0; s < p.size; ++s) {
      const std::int64_t first = s * shard + j * V;
      if (first >= count) break;
      *reinterpret_cast<uint4*>(data_of<T>(p, s, p.rank, epoch) + first) =
          load_tensor(in, layout, in_vec, first, count).raw;
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
    for (int s = 0; s < p.size; ++s) {
      if (s == p.rank) continue;
      const std::int64_t first = s * shard + j * V;
      if (first >= count) break;
      Pack<T> sum;
      sum.raw = *reinterpret_cast<const uint4*>(data_of<T>(p, p.rank, s, epoch) + first);
      store_tensor(out, layout, out_vec, first, count, sum);
    }
  }
  finish_call(p, epoch);
}

// Deterministic block sum: fixed shuffle tree, then warps in order.
__device__ float block_sum(float value, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = __fadd_rn(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  const int warp = threadIdx.x / 32;
  if ((threadIdx.x & 31) == 0) scratch[warp] = value;
  __syncthreads();
  float total = 0.0f;
  const int warps = (blockDim.x + 31) / 32;
  for (int w = 0; w < warps; ++w) total = __fadd_rn(total, scratch[w]);
  __syncthreads();  // scratch is reused by the next row
  return total;
}

// Element offset of the first element of row `row` (the last dimension).
__device__ std::int64_t row_offset(const KernelLayout& layout, std::int64_t row,
                                   std::int64_t hidden) {
  return layout.dense ? row * hidden : offset_over(layout, row, layout.rank - 1);
}

// Packs of one row: 16-byte accesses when the row is a whole number of
// packs and the pointer is aligned, element by element otherwise (zeros
// past `hidden`). Either way thread t handles packs t, t + blockDim, ... and
// the elements of a pack in order, so the arithmetic order - and therefore
// every rounding - is the same on both paths.
template <class T>
__device__ __forceinline__ Pack<T> load_row_pack(const T* row, std::int64_t first,
                                                 std::int64_t hidden, bool vec) {
  Pack<T> pack;
  if (vec) {
    pack.raw = *reinterpret_cast<const uint4*>(row + first);
    return pack;
  }
  for (int k = 0; k < Pack<T>::kCount && first + k < hidden; ++k) pack.v[k] = row[first + k];
  return pack;
}

template <class T>
__device__ __forceinline__ void store_row_pack(T* row, std::int64_t first, std::int64_t hidden,
                                               bool vec, const Pack<T>& pack) {
  if (vec) {
    *reinterpret_cast<uint4*>(row + first) = pack.raw;
    return;
  }
  for (int k = 0; k < Pack<T>::kCount && first + k < hidden; ++k) row[first + k] = pack.v[k];
}

// One row of add + RMSNorm (the rounding of src/transport/host/rms_norm.hpp):
//   r = round(s + residual) -> residual; var = mean(r^2) (fp32);
//   out = round(r * (1 / sqrt(var + eps)) * weight) -> out.
// `sum_pack(first, s)` fills s[k] with the rounded all-reduced value of
// element first + k as a float. No contraction into FMAs, and the same
// thread/pack order in the fused and the fallback kernel, so both paths
// round alike bit for bit.
template <class T, class SumPack>
__device__ void add_rms_norm_row(SumPack sum_pack, T* residual, const T* weight, T* out,
                                 std::int64_t hidden, float eps, float* scratch) {
  constexpr int V = Pack<T>::kCount;
  // A thread's first kKept packs stay in registers between the two passes
  // (with their weights, loaded before the wait for the sums): no reload
  // on the latency-bound path of short rows. Same values, same order.
  constexpr int kKept = 2;
  const std::int64_t packs = (hidden + V - 1) / V;
  const bool whole = hidden % V == 0;
  const bool residual_vec = whole && aligned16(residual);
  const bool out_vec = whole && aligned16(out) && aligned16(weight) && residual_vec;
  float squares = 0.0f;
  auto add_residual = [&](std::int64_t j, Pack<T>& r) {
    const std::int64_t first = j * V;
    float s[V];
    sum_pack(first, s);
    const Pack<T> old = load_row_pack(residual, first, hidden, residual_vec);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (first + k >= hidden) break;
      r.v[k] = from_float<T>(__fadd_rn(s[k], to_float(old.v[k])));
      const float rf = to_float(r.v[k]);
      squares = __fadd_rn(squares, __fmul_rn(rf, rf));
    }
    store_row_pack(residual, first, hidden, residual_vec, r);
  };
  Pack<T> kept_r[kKept], kept_w[kKept];
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    const std::int64_t j = threadIdx.x + static_cast<std::int64_t>(it) * blockDim.x;
    if (j < packs) {
      kept_w[it] = load_row_pack(weight, j * V, hidden, out_vec);
      add_residual(j, kept_r[it]);
    }
  }
  for (std::int64_t j = threadIdx.x + static_cast<std::int64_t>(kKept) * blockDim.x; j < packs;
       j += blockDim.x) {
    Pack<T> r;
    add_residual(j, r);
  }
  const float variance = __fdiv_rn(block_sum(squares, scratch), static_cast<float>(hidden));
  const float inv_rms = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));
  auto normalize = [&](std::int64_t j, const Pack<T>& r, const Pack<T>& w) {
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      o.v[k] = from_float<T>(__fmul_rn(__fmul_rn(to_float(r.v[k]), inv_rms), to_float(w.v[k])));
    }
    store_row_pack(out, j * V, hidden, out_vec, o);
  };
#pragma unroll
  for (int it = 0; it < kKept; ++it) {
    const std::int64_t j = threadIdx.x + static_cast<std::int64_t>(it) * blockDim.x;
    if (j < packs) normalize(j, kept_r[it], kept_w[it]);
  }
  for (std::int64_t j = threadIdx.x + static_cast<std::int64_t>(kKept) * blockDim.x; j < packs;
       j += blockDim.x) {
    normalize(j, load_row_pack(static_cast<const T*>(residual), j * V, hidden, out_vec),
              load_row_pack(weight, j * V, hidden, out_vec));
  }
}

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    fused_kernel(PeerSet p, T* inout, T* residual, const T* weight, float eps,
                 KernelLayout layout, std::int64_t rows, std::int64_t hidden) {
  __shared__ float scratch[kRowThreads / 32];
  constexpr int V = Pack<T>::kCount;
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;
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
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    add_rms_norm_row<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps, scratch);
  }
  finish_call(p, epoch);
}

// The fused op for small messages: rows travel as LL lines, as in the
// one-shot all-reduce, so there is no flag barrier (and no release fence):
// each pack of the row function waits for exactly the lines it sums. Rows
// are whole numbers of 16-byte packs (launch_fused checks), so pack j of a
// row is its lines 2j and 2j + 1.
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    fused_ll_kernel(PeerSet p, T* inout, T* residual, const T* weight, float eps,
                    KernelLayout layout, std::int64_t rows, std::int64_t hidden) {
  __shared__ float scratch[kRowThreads / 32];
  constexpr int V = Pack<T>::kCount;
  constexpr int E = 8 / sizeof(T);  // elements per line
  std::uint32_t epoch;
  if (!begin_call(p, epoch)) return;

  const std::int64_t row_lines = hidden / E;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* src = inout + row_offset(layout, row, hidden);
    const bool vec = (reinterpret_cast<std::uintptr_t>(src) & 7u) == 0;
    for (std::int64_t l = threadIdx.x; l < row_lines; l += blockDim.x) {
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

  bool ok = true;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    auto sum_pack = [&](std::int64_t first, float (&s)[V]) {
      const std::int64_t line = row * row_lines + first / E;
      float acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = 0.0f;
      for (int r = 0; r < p.size; ++r) {
        Half8<T> low, high;
        low.raw = high.raw = make_uint2(0u, 0u);
        // After a failure the row is finished with zeros (every thread must
        // reach the row's block barriers) and the kernel exits after it.
        if (ok) ok = wait_line(p, data_of<uint4>(p, p.rank, r, epoch) + line, r, epoch, low.raw);
        if (ok) ok = wait_line(p, data_of<uint4>(p, p.rank, r, epoch) + line + 1, r, epoch, high.raw);
#pragma unroll
        for (int k = 0; k < E; ++k) {
          acc[k] = __fadd_rn(acc[k], to_float(low.v[k]));
          acc[E + k] = __fadd_rn(acc[E + k], to_float(high.v[k]));
        }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) s[k] = to_float(from_float<T>(acc[k]));
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    add_rms_norm_row<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps, scratch);
    if (__syncthreads_or(!ok)) return;
  }
  finish_call(p, epoch);
}

template <class T>
__global__ void __launch_bounds__(kRowThreads)
    add_rms_norm_kernel(const T* reduced, T* inout, T* residual, const T* weight, float eps,
                        KernelLayout layout, std::int64_t rows, std::int64_t hidden) {
  __shared__ float scratch[kRowThreads / 32];
  constexpr int V = Pack<T>::kCount;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* sums = reduced + row * hidden;
    const bool vec = hidden % V == 0 && aligned16(sums);
    auto sum_pack = [&](std::int64_t first, float (&s)[V]) {
      const Pack<T> in = load_row_pack(sums, first, hidden, vec);
#pragma unroll
      for (int k = 0; k < V; ++k) s[k] = to_float(in.v[k]);
    };
    const std::int64_t offset = row_offset(layout, row, hidden);
    add_rms_norm_row<T>(sum_pack, residual + offset, weight, inout + offset, hidden, eps, scratch);
  }
}

template <class W>
__global__ void pack_kernel(const W* tensor, W* contiguous, KernelLayout layout,
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

cudaError_t launch_one_shot(const PeerSet& peers, ElementType type, const void* in, void* out,
                            const KernelLayout& layout, std::int64_t count,
                            cudaStream_t stream) {
  return dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t lines = (count + 8 / sizeof(T) - 1) / (8 / sizeof(T));
    launch_p2p(one_shot_kernel<T>, blocks_for(lines, kAllReduceMaxBlocks), kThreads,
               peers.overlap_launch,
               stream, peers, static_cast<const T*>(in), static_cast<T*>(out), layout, count);
  });
}

cudaError_t launch_two_shot(const PeerSet& peers, ElementType type, const void* in, void* out,
                            const KernelLayout& layout, std::int64_t count,
                            cudaStream_t stream) {
  return dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = Pack<T>::kCount;
    const std::int64_t shard = ((count + peers.size - 1) / peers.size + V - 1) / V * V;
    launch_p2p(two_shot_kernel<T>, blocks_for(shard / V, kAllReduceMaxBlocks), kThreads,
               peers.overlap_launch, stream, peers, static_cast<const T*>(in),
               static_cast<T*>(out), layout, count);
  });
}

cudaError_t launch_fused(const PeerSet& peers, ElementType type, void* inout, void* residual,
                         const void* weight, float eps, const KernelLayout& layout,
                         std::int64_t rows, std::int64_t hidden, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxBlocks));
  return dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    const std::uint64_t row_bytes = static_cast<std::uint64_t>(hidden) * sizeof(T);
    const bool lines = row_bytes % kPackBytes == 0 &&
                       row_bytes * static_cast<std::uint64_t>(rows) <= peers.fused_ll_max_bytes;
    launch_p2p(lines ? fused_ll_kernel<T> : fused_kernel<T>, blocks, kRowThreads,
               peers.overlap_launch, stream,
               peers, static_cast<T*>(inout), static_cast<T*>(residual),
               static_cast<const T*>(weight), eps, layout, rows, hidden);
  });
}

cudaError_t launch_add_rms_norm(ElementType type, const void* reduced, void* inout,
                                void* residual, const void* weight, float eps,
                                const KernelLayout& layout, std::int64_t rows,
                                std::int64_t hidden, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 1024));
  return dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    add_rms_norm_kernel<T><<<blocks, kRowThreads, 0, stream>>>(
        static_cast<const T*>(reduced), static_cast<T*>(inout), static_cast<T*>(residual),
        static_cast<const T*>(weight), eps, layout, rows, hidden);
  });
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
