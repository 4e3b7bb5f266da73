// SPDX-License-Identifier: Apache-2.0
// Bit-for-bit checks of GPU all-reduces shared by the protocol tests
// (cuda_lamport_test, cuda_two_shot_protocols_test; the graph replays also
// cuda_fused_lamport_test): inputs full of special bit patterns, one call
// through any path with poisoned padding checked untouched, the float64
// reference within one rounding, the first differing element of two
// results, and graph replays interleaved with eager calls.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {

// Bit patterns the sums must get right (little-endian low bytes are used
// for 16-bit types): the sentinel (all ones) and the NaN a sender maps it
// to, zeros of both signs, a quiet NaN, +-Inf, finite values whose low 16
// bits are all ones (a f32 element is checked at its own width, not as two
// halves), and a f32 NaN whose high half is all ones.
inline std::vector<std::uint32_t> special_bits(DataType dtype) {
  if (dtype == DataType::f32) {
    return {0xffffffffu, 0xfffffffeu, 0x80000000u, 0x00000000u, 0x7fc00000u, 0x7f800000u,
            0xff800000u, 0x3f80ffffu, 0xbf80ffffu, 0x0000ffffu, 0xffff0000u};
  }
  if (dtype == DataType::bf16) {
    return {0xffffu, 0xfffeu, 0x8000u, 0x0000u, 0x7fc0u,
            0x7f80u, 0xff80u, 0x3fffu, 0xbfffu, 0x00ffu};
  }
  return {0xffffu, 0xfffeu, 0x8000u, 0x0000u, 0x7e00u, 0x7c00u, 0xfc00u, 0x3bffu, 0xbbffu, 0x00ffu};
}

// Random values in [-1, 1) with a special pattern at about every fourth
// element, and runs of 64 all-ones elements (whole packs of the sentinel).
inline std::vector<std::uint8_t> tensor_with_specials(DataType dtype, std::int64_t count,
                                                      std::uint64_t seed, int r) {
  auto bytes = random_tensor(dtype, count, seed, r);
  const auto specials = special_bits(dtype);
  const std::size_t e = element_size(dtype);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint64_t h = mix(seed * 31 + static_cast<std::uint64_t>(r) * 1000003ull +
                                mix(static_cast<std::uint64_t>(i) + 7));
    std::uint32_t bits = 0;
    if ((i / 64 + r) % 7 == 3) {
      bits = 0xffffffffu;
    } else if (h % 4 == 0) {
      bits = specials[(h >> 8) % specials.size()];
    } else {
      continue;
    }
    std::memcpy(&bytes[static_cast<std::size_t>(i) * e], &bits, e);
  }
  return bytes;
}

inline std::int64_t offset_in(const TensorLayout& layout, std::int64_t i) {
  std::int64_t offset = 0;
  for (int d = layout.rank() - 1; d >= 0; --d) {
    offset += (i % layout.dim(d)) * layout.stride(d);
    i /= layout.dim(d);
  }
  return offset;
}

inline std::int64_t extent_of(const TensorLayout& layout) {
  std::int64_t extent = 1;
  for (int d = 0; d < layout.rank(); ++d) extent += (layout.dim(d) - 1) * layout.stride(d);
  return extent;
}

// Makes one all-reduce call from `in` into `out` (in == out for in place)
// on the legacy default stream.
using AllReduceCall = std::function<void(const void* in, void* out)>;

// One all-reduce of this rank's `logical` input laid out as `layout`
// (synchronised). Padding between rows holds all-ones bytes (the
// sentinel's pattern: the kernels must neither read nor write it), as does
// the output before the call. Returns the output buffer, padding included.
inline std::vector<std::uint8_t> run_all_reduce(const AllReduceCall& call, DataType dtype,
                                                const TensorLayout& layout,
                                                const std::vector<std::uint8_t>& logical,
                                                bool in_place) {
  const std::size_t e = element_size(dtype);
  const std::int64_t extent = extent_of(layout);
  std::vector<std::uint8_t> strided(static_cast<std::size_t>(extent) * e, 0xff);
  for (std::int64_t i = 0; i < layout.numel(); ++i) {
    std::memcpy(&strided[static_cast<std::size_t>(offset_in(layout, i)) * e], &logical[i * e], e);
  }
  DeviceBuffer in(strided.size()), out(strided.size());
  in.upload(strided);
  out.poison();
  void* out_ptr = in_place ? in.ptr : out.ptr;
  call(in.ptr, out_ptr);
  check_cuda(cudaDeviceSynchronize(), "all_reduce");
  std::vector<std::uint8_t> got(strided.size());
  check_cuda(cudaMemcpy(got.data(), out_ptr, got.size(), cudaMemcpyDeviceToHost), "download");
  std::vector<bool> element(static_cast<std::size_t>(extent), false);
  for (std::int64_t i = 0; i < layout.numel(); ++i) element[offset_in(layout, i)] = true;
  std::int64_t padding_written = 0;
  for (std::int64_t o = 0; o < extent; ++o) {
    if (element[o]) continue;
    for (std::size_t b = 0; b < e; ++b) padding_written += got[o * e + b] != 0xff;
  }
  EXPECT_EQ(padding_written, 0) << "padding bytes written, " << layout.to_string();
  return got;
}

// Elements of `got` (laid out as `layout`) that differ from the float64 sum
// of every rank's input beyond one rounding; a NaN sum must give a NaN, an
// infinite one the same infinity. `first` describes the first of them.
inline std::int64_t count_wrong(DataType dtype, const TensorLayout& layout,
                                const std::vector<std::vector<std::uint8_t>>& inputs,
                                const std::vector<std::uint8_t>& got, std::string& first) {
  const std::size_t e = element_size(dtype);
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < layout.numel(); ++i) {
    double ref = 0;
    for (const auto& input : inputs) ref += value_at(dtype, input, i);
    const double v = load_as_float(dtype, &got[static_cast<std::size_t>(offset_in(layout, i)) * e]);
    const bool ok = std::isnan(ref)   ? std::isnan(v)
                    : std::isinf(ref) ? v == ref
                                      : std::fabs(v - ref) <= sum_tolerance(dtype, ref);
    if (!ok && wrong++ == 0) {
      first =
          "element " + std::to_string(i) + ": " + std::to_string(v) + " vs " + std::to_string(ref);
    }
  }
  return wrong;
}

// "" when equal, else where the first differing element is and both values' bits.
inline std::string first_difference(DataType dtype, const std::vector<std::uint8_t>& a,
                                    const std::vector<std::uint8_t>& b) {
  if (a.size() != b.size()) return "sizes differ";
  const std::size_t e = element_size(dtype);
  for (std::size_t o = 0; o < a.size(); o += e) {
    if (std::memcmp(&a[o], &b[o], e) == 0) continue;
    std::uint32_t x = 0, y = 0;
    std::memcpy(&x, &a[o], e);
    std::memcpy(&y, &b[o], e);
    char text[96];
    std::snprintf(text, sizeof text, "element at offset %zu: 0x%x vs 0x%x", o / e, x, y);
    return text;
  }
  return "";
}

inline std::vector<std::vector<std::uint8_t>> every_rank_input(DataType dtype, std::int64_t count,
                                                               std::uint64_t seed) {
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < size(); ++r) inputs.push_back(tensor_with_specials(dtype, count, seed, r));
  return inputs;
}

// The all-reduce of a vector of `n` elements, named "<dtype>_<n>".
inline Declaration vector_declaration(DataType dtype, std::int64_t n) {
  return Declaration::all_reduce(std::string(to_string(dtype)) + "_" + std::to_string(n), dtype,
                                 vector_of(n));
}

// One vector all-reduce per (dtype, count), counts given per dtype.
template <class CountsOf>
std::vector<Declaration> vector_declarations(std::span<const DataType> dtypes,
                                             CountsOf&& counts_of) {
  std::vector<Declaration> declared;
  for (DataType dtype : dtypes) {
    for (std::int64_t n : counts_of(dtype)) declared.push_back(vector_declaration(dtype, n));
  }
  return declared;
}

// One vector all-reduce per message (anything with .dtype and .count).
template <class Messages>
std::vector<Declaration> message_declarations(const Messages& messages) {
  std::vector<Declaration> declared;
  for (const auto& m : messages) declared.push_back(vector_declaration(m.dtype, m.count));
  return declared;
}

using DeviceBuffers = std::vector<std::unique_ptr<DeviceBuffer>>;

// A device buffer of each message's bytes (messages as above).
template <class Messages>
DeviceBuffers message_buffers(const Messages& messages) {
  DeviceBuffers buffers;
  for (const auto& m : messages) {
    buffers.push_back(
        std::make_unique<DeviceBuffer>(static_cast<std::size_t>(m.count) * element_size(m.dtype)));
  }
  return buffers;
}

// Graph replays with new inputs: every input set holds one buffer per
// call, sets[set * ins.size() + s] for ins[s].

// Enqueues input set `set` into `ins` on `stream`.
inline void load_input_set(const DeviceBuffers& ins, const DeviceBuffers& sets, int set,
                           cudaStream_t stream) {
  for (std::size_t s = 0; s < ins.size(); ++s) {
    check_cuda(cudaMemcpyAsync(ins[s]->ptr, sets[set * ins.size() + s]->ptr, ins[s]->bytes,
                               cudaMemcpyDeviceToDevice, stream),
               "copy");
  }
}

// Every output's bytes, concatenated, once `stream` is done; the outputs
// are poisoned again for the next calls.
inline std::vector<std::uint8_t> take_outputs(const DeviceBuffers& outs, cudaStream_t stream) {
  check_cuda(cudaStreamSynchronize(stream), "sync");
  std::vector<std::uint8_t> all;
  for (const auto& out : outs) {
    auto part = out->download(out->bytes);
    all.insert(all.end(), part.begin(), part.end());
  }
  for (const auto& out : outs) out->poison();
  check_cuda(cudaDeviceSynchronize(), "poison");  // before the non-blocking stream writes
  return all;
}

// How graph replays interleave with eager calls (replay_mismatches):
// replay i runs on input set (i * set_stride + set_offset) % sets; after
// every `eager_every`-th replay, eager calls on set (i / eager_every) %
// sets, with one call more every second time, so that an odd and an even
// number of calls between replays both occur (they shift the epoch parity).
struct ReplayCadence {
  int replays = 0;
  int sets = 1;
  int set_stride = 1;
  int set_offset = 0;
  int eager_every = 1;
};

// `calls()` captured from `stream` into an instantiated graph; the graph
// and its instance go with this object.
class CapturedGraph {
 public:
  CapturedGraph(cudaStream_t stream, const std::function<void()>& calls) {
    check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    calls();
    check_cuda(cudaStreamEndCapture(stream, &graph_), "end capture");
    check_cuda(cudaGraphInstantiate(&exec_, graph_, 0), "instantiate");
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Captures `calls()` from `stream` into a graph and replays it as
// `cadence` says, with eager rounds of `calls()` in between. `load_set(set)`
// enqueues a set's inputs (before each replay and each eager round);
// `outputs()` synchronises and returns every output's bytes. Every second
// eager round makes one call more, `parity_shift()` (by default calls()
// again): it must leave the outputs as they are - an all-reduce whose
// inputs are unchanged - since an in-place fused call run twice would not.
// Returns how many of the outputs differed from expected[set] (after each
// replay and each eager round); the graph is freed before it returns.
inline int replay_mismatches(cudaStream_t stream, const ReplayCadence& cadence,
                             const std::function<void(int)>& load_set,
                             const std::function<void()>& calls,
                             const std::function<std::vector<std::uint8_t>()>& outputs,
                             const std::vector<std::vector<std::uint8_t>>& expected,
                             const std::function<void()>& parity_shift = {}) {
  const CapturedGraph graph(stream, calls);
  int mismatches = 0;
  for (int i = 0; i < cadence.replays; ++i) {
    const int set = (i * cadence.set_stride + cadence.set_offset) % cadence.sets;
    load_set(set);
    check_cuda(cudaGraphLaunch(graph.exec(), stream), "cudaGraphLaunch");
    if (outputs() != expected[static_cast<std::size_t>(set)]) ++mismatches;
    if (i % cadence.eager_every == cadence.eager_every - 1) {
      const int e = (i / cadence.eager_every) % cadence.sets;
      load_set(e);
      calls();
      if (i % (2 * cadence.eager_every) == 2 * cadence.eager_every - 1) {
        if (parity_shift)
          parity_shift();
        else
          calls();  // the inputs are unchanged, so are the sums
      }
      if (outputs() != expected[static_cast<std::size_t>(e)]) ++mismatches;
    }
  }
  return mismatches;
}

}  // namespace peerplan::cuda_test
