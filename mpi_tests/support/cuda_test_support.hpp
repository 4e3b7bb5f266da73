// SPDX-License-Identifier: Apache-2.0
// Helpers of the CUDA backend's GPU tests (mpi_tests/cuda_*_test.cpp).
// Every rank regenerates every rank's input from (seed, rank, index), so the
// float64 reference needs no communication; outputs are poisoned (all-ones
// bytes: NaN in f16, bf16 and f32) before each call; cross-rank checks go
// through a private duplicate of MPI_COMM_WORLD.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "peerplan/communicator.hpp"
#include "peerplan/errors.hpp"
#include "support/mpi_test_support.hpp"
#include "transport/host/element.hpp"

namespace peerplan::cuda_test {

using transport::host::load_as_float;
using transport::host::store_from_float;

using mpi_test::test_comm;

inline int rank() { return mpi_test::world_rank(); }
inline int size() { return mpi_test::world_size(); }

// At least one visible GPU, and the ranks of this test all on one node.
// Ranks outnumbering the GPUs share them (local rank modulo the GPU count):
// the CUDA backend then runs for correctness only, with the MPI fallback.
inline bool gpus_for_every_rank() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_size = 0;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  return count >= 1 && local_size == size();
}

// Whether some ranks of `comm` drive the same GPU (its fingerprint says so).
inline bool gpus_shared(const Communicator& comm) {
  const std::string& fingerprint = comm.topology_fingerprint();
  return fingerprint.size() >= 7 && fingerprint.compare(fingerprint.size() - 7, 7, " shared") == 0;
}

// How many ranks of the test drive this rank's current GPU (1 when every
// rank has its own). Collective over the test's ranks.
inline int ranks_on_my_gpu() {
  int device = 0;
  char bus_id[32] = {};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
    cudaGetLastError();
    bus_id[0] = '\0';  // unknown: counts as a GPU of its own
  }
  std::vector<char> all(sizeof bus_id * static_cast<std::size_t>(size()));
  MPI_Allgather(bus_id, sizeof bus_id, MPI_CHAR, all.data(), sizeof bus_id, MPI_CHAR, test_comm());
  int same = 0;
  for (int r = 0; r < size(); ++r) {
    const char* theirs = &all[sizeof bus_id * static_cast<std::size_t>(r)];
    if (r == rank() || (bus_id[0] != '\0' && std::strncmp(theirs, bus_id, sizeof bus_id) == 0))
      ++same;
  }
  return same;
}

// Whether any rank of the test shares its GPU. Collective; the same on
// every rank, so every rank makes the same number of calls from it (a
// rank's own ranks_on_my_gpu() differs at 3 ranks on 2 GPUs).
inline bool any_rank_shares_a_gpu() {
  int mine = ranks_on_my_gpu();
  int most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_INT, MPI_MAX, test_comm());
  return most > 1;
}

// The GPU communicator's create() would pick: PEERPLAN_DEVICE, else the
// local rank (the world rank: the GPU tests run on one node) modulo the
// GPU count.
inline int device_of_this_rank() {
  int count = 1;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
    cudaGetLastError();
    count = 1;
  }
  if (const char* configured = std::getenv("PEERPLAN_DEVICE"); configured && *configured)
    return std::atoi(configured);
  return rank() % count;
}

// Creates this process's CUDA context once, then waits for every rank to
// have done so. Eight processes creating contexts on one GPU at once can
// take seconds, and create()'s exchanges are bounded by the communicator's
// timeout (1.5 s in some tests): the tests time the calls, not the driver.
inline void ensure_cuda_contexts() {
  static bool done = false;
  if (done) return;
  done = true;
  if (cudaSetDevice(device_of_this_rank()) == cudaSuccess) cudaFree(nullptr);
  cudaGetLastError();
  MPI_Barrier(test_comm());
}

#define PEERPLAN_SKIP_WITHOUT_GPUS()                                                    \
  PEERPLAN_MPI_SKIP_IF(!::peerplan::cuda_test::gpus_for_every_rank(),                   \
                       "needs a visible GPU and every rank on one node (no GPU here): " \
                       "the CUDA backend's tests run on GPU hosts (scripts/gpu-check.sh)")

#define CUDA_OK(expr)                                                                \
  do {                                                                               \
    const cudaError_t status_ = (expr);                                              \
    ASSERT_EQ(status_, cudaSuccess) << #expr << ": " << cudaGetErrorString(status_); \
  } while (false)

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Device memory owned by the test.
struct DeviceBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  explicit DeviceBuffer(std::size_t n) : bytes(n) {
    check_cuda(cudaMalloc(&ptr, n ? n : 16), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr);
  }
  // Both return once the bytes are on the device: a copy from pageable
  // memory or a memset may still run after cudaMemcpy/cudaMemset return,
  // and work queued on a non-blocking stream does not wait for them.
  void upload(const std::vector<std::uint8_t>& host) {
    check_cuda(cudaMemcpy(ptr, host.data(), host.size(), cudaMemcpyHostToDevice), "upload");
    check_cuda(cudaDeviceSynchronize(), "upload");
  }
  std::vector<std::uint8_t> download(std::size_t n) const {
    std::vector<std::uint8_t> host(n);
    check_cuda(cudaMemcpy(host.data(), ptr, n, cudaMemcpyDeviceToHost), "download");
    return host;
  }
  void poison() {
    check_cuda(cudaMemset(ptr, 0xff, bytes), "poison");
    check_cuda(cudaDeviceSynchronize(), "poison");
  }
};

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), never all zeros; a fresh `seed` per check.
inline float random_value(std::uint64_t seed, int r, std::int64_t i) {
  const std::uint64_t h = mix(seed * 1000003ull + static_cast<std::uint64_t>(r) * 7919ull +
                              mix(static_cast<std::uint64_t>(i)));
  return static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

// `count` elements of `dtype` (logical order) from (seed, rank).
inline std::vector<std::uint8_t> random_tensor(DataType dtype, std::int64_t count,
                                               std::uint64_t seed, int r) {
  const std::size_t e = element_size(dtype);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count) * e);
  for (std::int64_t i = 0; i < count; ++i)
    store_from_float(dtype, random_value(seed, r, i), bytes.data() + i * e);
  return bytes;
}

inline double value_at(DataType dtype, const std::vector<std::uint8_t>& bytes, std::int64_t i) {
  return load_as_float(dtype, bytes.data() + i * element_size(dtype));
}

// Tolerance of one all-reduced element (one rounding of an exact sum).
inline double sum_tolerance(DataType dtype, double reference) {
  const double rel = dtype == DataType::bf16  ? 1.0 / 128
                     : dtype == DataType::f16 ? 1.0 / 1024
                                              : 1e-6;
  return rel * std::fabs(reference) + (dtype == DataType::f32 ? 1e-6 : 1e-3);
}

// How many of the first `count` elements of `got` miss the sum over every
// rank r of random_tensor(dtype, ..., seed, r) (sum_tolerance): the check of
// an all-reduce of those inputs by a P2P route.
inline std::int64_t wrong_sums(DataType dtype, const std::vector<std::uint8_t>& got,
                               std::int64_t count, std::uint64_t seed) {
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < size(); ++r) inputs.push_back(random_tensor(dtype, count, seed, r));
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    double reference = 0;
    for (const auto& input : inputs) reference += value_at(dtype, input, i);
    if (!(std::fabs(value_at(dtype, got, i) - reference) <= sum_tolerance(dtype, reference))) {
      ++wrong;
    }
  }
  return wrong;
}

// What a fallback (NCCL, MPI) adds to sum_tolerance: it adds one rank's
// value at a time and rounds each partial sum to the dtype, so n ranks
// round n - 1 times; the last rounding is sum_tolerance's, each earlier one
// is at most half a unit in the last place of a partial sum, which is no
// larger than the sum of the magnitudes of the ranks' values. Nothing at
// two ranks (one rounding of the exact sum, like the P2P kernels).
inline double fallback_rounding_slack(DataType dtype, double magnitude_sum, int ranks) {
  const double unit_roundoff = dtype == DataType::bf16  ? 0x1p-8
                               : dtype == DataType::f16 ? 0x1p-11
                                                        : 0x1p-24;
  return ranks > 2 ? unit_roundoff * magnitude_sum * (ranks - 2) : 0.0;
}

// Tolerance of one element all-reduced by a fallback: see above.
inline double fallback_sum_tolerance(DataType dtype, double reference, double magnitude_sum,
                                     int ranks) {
  return sum_tolerance(dtype, reference) + fallback_rounding_slack(dtype, magnitude_sum, ranks);
}

// Fused op: r and out are rounded twice or three times.
inline double fused_tolerance(DataType dtype, double reference) {
  const double rel = dtype == DataType::bf16  ? 3.0 / 128
                     : dtype == DataType::f16 ? 3.0 / 1024
                                              : 1e-5;
  return rel * std::fabs(reference) + (dtype == DataType::f32   ? 1e-5
                                       : dtype == DataType::f16 ? 2e-3
                                                                : 2e-2);
}

// True iff `bytes` is identical on every rank.
inline bool same_on_every_rank(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
  std::uint64_t lo = h, hi = h;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, test_comm());
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, test_comm());
  return lo == hi;
}

inline std::unique_ptr<Communicator> create_cuda(Config config = {}) {
  ensure_cuda_contexts();
  config.backend = Backend::cuda;
  return Communicator::create(MPI_COMM_WORLD, std::move(config));
}

// The fused op's route under the CUDA backend's default kernel choices
// (an independent statement of docs/concepts.md, "Routes" to "What a call
// launches", not the router's code): Lamport above 64 KiB up to 4 MiB and LL
// lines up to 2 MiB, both for rows of whole 16-byte packs, run
// fused_one_shot; past them a dense message runs fused_two_shot, a strided
// one the staged fused_one_shot.
inline Route default_fused_route(DataType dtype, const TensorLayout& layout) {
  const std::size_t row_bytes = static_cast<std::size_t>(layout.last_dim()) * element_size(dtype);
  const std::size_t bytes = static_cast<std::size_t>(layout.numel()) * element_size(dtype);
  const bool whole_packs = row_bytes % 16 == 0;
  if (whole_packs && bytes <= (4u << 20)) return Route::fused_one_shot;
  return layout.is_contiguous() ? Route::fused_two_shot : Route::fused_one_shot;
}

inline bool is_fused_p2p(Route route) {
  return route == Route::fused_one_shot || route == Route::fused_two_shot;
}

// Cutoffs that force one route for every declared plan that fits.
inline Config forcing(Route route, std::size_t max_bytes = 64u << 20) {
  Config c;
  c.cutoffs.one_shot_max_bytes = route == Route::one_shot ? max_bytes : 0;
  c.cutoffs.two_shot_max_bytes = route == Route::two_shot ? max_bytes : 0;
  c.cutoffs.fused_max_bytes = is_fused_p2p(route) ? max_bytes : 0;
  return c;
}

// One fused call of rows x hidden: this rank's random input, a residual
// replicated on every rank (as in tensor parallelism), default stream.
struct FusedRun {
  std::vector<std::uint8_t> out, residual;
  CallResult result;
};

FusedRun run_fused(Communicator& comm, DataType dtype, std::int64_t rows, std::int64_t hidden,
                   const DeviceBuffer& weight, float eps, std::uint64_t seed) {
  const std::size_t bytes = static_cast<std::size_t>(rows * hidden) * element_size(dtype);
  DeviceBuffer inout(bytes), residual(bytes);
  inout.upload(random_tensor(dtype, rows * hidden, seed, rank()));
  residual.upload(random_tensor(dtype, rows * hidden, seed, -1));  // replicated, as in TP
  FusedRun run;
  run.result = comm.fused_add_rms_norm(inout.ptr, residual.ptr, weight.ptr, eps, dtype,
                                       TensorLayout({rows, hidden}), nullptr);
  check_cuda(cudaDeviceSynchronize(), "fused");
  run.out = inout.download(bytes);
  run.residual = residual.download(bytes);
  return run;
}

}  // namespace peerplan::cuda_test
