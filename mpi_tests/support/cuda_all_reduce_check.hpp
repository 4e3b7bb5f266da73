// SPDX-License-Identifier: Apache-2.0
// The all-reduce check shared by the CUDA backend's GPU tests: fresh random
// inputs, a float64 reference, poisoned outputs checked fully written (and
// padding of strided layouts untouched), bit-identical results on every rank.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {

// A fresh seed per check: inputs never repeat between checks.
inline std::uint64_t next_seed() {
  static std::uint64_t seed = 1000;
  return ++seed;
}

// Where check_all_reduce puts its input, and what it reports back.
struct AllReduceCheckOptions {
  bool in_place = false;
  void* input_at = nullptr;      // device memory for the input (e.g. inside a registered buffer)
  CallResult* result = nullptr;  // out: the call's result
  std::vector<std::uint8_t>* output = nullptr;  // out: this rank's output bytes
};

// Runs one all-reduce of `count` elements through `comm` and checks it.
inline void check_all_reduce(Communicator& comm, DataType dtype, const TensorLayout& layout,
                             Route expected_route, AllReduceCheckOptions options) {
  const bool in_place = options.in_place;
  const std::int64_t count = layout.numel();
  // Extent of the strided tensor in elements.
  std::int64_t extent = 1;
  for (int d = 0; d < layout.rank(); ++d) extent += (layout.dim(d) - 1) * layout.stride(d);
  const std::size_t e = element_size(dtype);
  const std::uint64_t seed = next_seed();
  auto logical = random_tensor(dtype, count, seed, rank());
  // Scatter the logical values into the strided buffer, padding poisoned.
  std::vector<std::uint8_t> strided(static_cast<std::size_t>(extent) * e, 0xff);
  auto offset_of = [&](std::int64_t i) {
    std::int64_t off = 0;
    for (int d = layout.rank() - 1; d >= 0; --d) {
      off += (i % layout.dim(d)) * layout.stride(d);
      i /= layout.dim(d);
    }
    return off;
  };
  for (std::int64_t i = 0; i < count; ++i)
    std::memcpy(&strided[offset_of(i) * e], &logical[i * e], e);
  DeviceBuffer own_in(options.input_at ? 0 : strided.size()), out(strided.size());
  void* in = options.input_at ? options.input_at : own_in.ptr;
  ASSERT_EQ(cudaMemcpy(in, strided.data(), strided.size(), cudaMemcpyHostToDevice), cudaSuccess);
  out.poison();
  void* out_ptr = in_place ? in : out.ptr;
  const auto result = comm.all_reduce(in, out_ptr, dtype, layout, nullptr);
  EXPECT_EQ(result.route, expected_route) << to_string(dtype) << " " << layout.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::uint8_t> got(strided.size());
  ASSERT_EQ(cudaMemcpy(got.data(), out_ptr, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  if (options.result) *options.result = result;

  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < size(); ++r) inputs.push_back(random_tensor(dtype, count, seed, r));
  std::int64_t wrong = 0;
  std::string first;
  std::vector<bool> touched(static_cast<std::size_t>(extent), false);
  const bool by_fallback = expected_route == Route::fallback;
  for (std::int64_t i = 0; i < count; ++i) {
    double ref = 0, magnitudes = 0;
    for (int r = 0; r < size(); ++r) {
      ref += value_at(dtype, inputs[r], i);
      magnitudes += std::fabs(value_at(dtype, inputs[r], i));
    }
    const auto off = offset_of(i);
    touched[off] = true;
    const double v = load_as_float(dtype, &got[off * e]);
    const double tolerance = by_fallback ? fallback_sum_tolerance(dtype, ref, magnitudes, size())
                                         : sum_tolerance(dtype, ref);
    if (!(std::fabs(v - ref) <= tolerance)) {
      if (wrong++ == 0)
        first = "element " + std::to_string(i) + ": " + std::to_string(v) + " vs " +
                std::to_string(ref);
    }
  }
  EXPECT_EQ(wrong, 0) << to_string(dtype) << " " << layout.to_string() << " route "
                      << to_string(result.route) << ", first: " << first;
  if (!in_place) {
    for (std::int64_t o = 0; o < extent; ++o) {
      if (touched[o]) continue;
      for (std::size_t b = 0; b < e; ++b)
        ASSERT_EQ(got[o * e + b], 0xff) << "padding written at " << o;
    }
  }
  EXPECT_TRUE(same_on_every_rank(got)) << "outputs differ across ranks";
  if (options.output) *options.output = std::move(got);
}

inline void check_all_reduce(Communicator& comm, DataType dtype, const TensorLayout& layout,
                             Route expected_route, bool in_place = false) {
  check_all_reduce(comm, dtype, layout, expected_route,
                   AllReduceCheckOptions{.in_place = in_place});
}

inline TensorLayout vector_of(std::int64_t n) { return TensorLayout({n}); }

// The ranks that make the call in a "rank that skips a call" test (all
// but the last rank, which skips it): an all-reduce of `n` bf16 elements
// on `comm` (timeout 1500 ms) waits out the timeout - the kernel exits,
// never traps - and the next call raises Timeout naming the last rank.
inline void expect_call_abandoned_by_last_rank(Communicator& comm, std::int64_t n) {
  DeviceBuffer in(n * 2), out(n * 2);
  in.upload(random_tensor(DataType::bf16, n, 2, rank()));
  const auto start = std::chrono::steady_clock::now();
  comm.all_reduce(in.ptr, out.ptr, DataType::bf16, vector_of(n), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the kernel must exit, not trap";
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(1000));
  EXPECT_LT(waited, std::chrono::milliseconds(20000));
  std::string message;
  bool timed_out = false;
  try {
    comm.all_reduce(in.ptr, out.ptr, DataType::bf16, vector_of(n), nullptr);
  } catch (const Timeout& e) {
    timed_out = true;
    message = e.what();
  }
  EXPECT_TRUE(timed_out) << "the call after the abandoned one must raise Timeout";
  EXPECT_NE(message.find("rank " + std::to_string(size() - 1)), std::string::npos) << message;
}

// The late-rank check: every rank makes an all-reduce of `n` bf16 elements
// on `comm` (timeout `timeout`), the last rank three timeouts after the
// others, who give up on it. Every rank's Timeout, at that call or the next,
// must name `call` (e.g. "P2P call #2 "); the late rank's must say that it
// reached the call late and not that it waited, the others' not that they
// came late.
inline void expect_every_rank_fails_the_call_the_last_rank_is_late_for(
    Communicator& comm, std::int64_t n, std::chrono::milliseconds timeout,
    const std::string& call) {
  const bool late = rank() == size() - 1;
  DeviceBuffer in(n * 2), out(n * 2);
  in.upload(random_tensor(DataType::bf16, n, 2, rank()));
  MPI_Barrier(test_comm());
  if (late) std::this_thread::sleep_for(3 * timeout);
  comm.all_reduce(in.ptr, out.ptr, DataType::bf16, vector_of(n), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the kernel must exit, not trap";
  std::string message;
  try {
    comm.all_reduce(in.ptr, out.ptr, DataType::bf16, vector_of(n), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    comm.all_reduce(in.ptr, out.ptr, DataType::bf16, vector_of(n), nullptr);
  } catch (const Timeout& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(call), std::string::npos)
      << (late ? "the late rank" : "a rank that gave up") << ": " << message;
  if (late) {
    EXPECT_NE(message.find("this rank reached it late"), std::string::npos) << message;
    EXPECT_EQ(message.find("while this rank waited"), std::string::npos) << message;
  } else {
    EXPECT_EQ(message.find("reached it late"), std::string::npos) << message;
  }
}

}  // namespace peerplan::cuda_test
