// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's MPI fallback (Config::fallback = mpi; what ranks that
// share a GPU get by default) on real GPUs: undeclared all-reduces of every
// dtype, odd element counts, strided and in-place layouts against float64;
// the fused op against float64 and bit for bit against the fused P2P
// kernel at every world size; a call during CUDA graph capture refused with
// InvalidUsage; a rank that skips a call makes the others raise Timeout
// naming it. Runs with one GPU per rank or with ranks sharing GPUs.
#include <array>
#include <chrono>
#include <string>
#include <vector>

#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

Config mpi_fallback(Config config = {}) {
  config.fallback = Fallback::mpi;
  return config;
}

TEST(CudaMpiFallback, EveryDtypeOddCountsStridedAndInPlaceMatchFloat64) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto comm = create_cuda(mpi_fallback());
  ASSERT_EQ(comm->backend(), Backend::cuda);
  EXPECT_EQ(comm->fallback(), Fallback::mpi);
  // Nothing declared: every call takes the fallback.
  for (DataType dtype : {DataType::f16, DataType::bf16, DataType::f32}) {
    for (std::int64_t n : {1, 7, 1000, 4099, 65537, 300001}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " x" + std::to_string(n));
      check_all_reduce(*comm, dtype, vector_of(n), Route::fallback);
    }
    check_all_reduce(*comm, dtype, vector_of(513), Route::fallback, /*in_place=*/true);
  }
  // Rows of 24 in a row stride of 32: packed, reduced, unpacked; padding untouched.
  const std::array<std::int64_t, 2> shape{5, 24};
  const std::array<std::int64_t, 2> strides{32, 1};
  check_all_reduce(*comm, DataType::bf16, TensorLayout::strided(shape, strides), Route::fallback);
  EXPECT_GE(comm->stats().fallback_undeclared, 20u);
  comm->close();
}

TEST(CudaMpiFallback, TheBufferGrowsAndCallsOnTwoStreamsStayOrdered) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto comm = create_cuda(mpi_fallback());
  cudaStream_t a = nullptr, b = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  // Growing sizes, alternating streams, each result checked after the next
  // call was queued: a copy of one call must not overwrite another's data.
  const std::array<std::int64_t, 4> sizes{256, 4096, 100000, 1 << 20};
  std::vector<std::unique_ptr<DeviceBuffer>> outs;
  std::vector<std::uint64_t> seeds;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::int64_t n = sizes[k];
    const std::uint64_t seed = next_seed();
    DeviceBuffer in(static_cast<std::size_t>(n) * 4);
    in.upload(random_tensor(DataType::f32, n, seed, rank()));
    outs.push_back(std::make_unique<DeviceBuffer>(static_cast<std::size_t>(n) * 4));
    outs.back()->poison();
    // The poison is queued on the legacy stream, which non-blocking streams
    // do not wait for.
    CUDA_OK(cudaDeviceSynchronize());
    comm->all_reduce(in.ptr, outs.back()->ptr, DataType::f32, vector_of(n), k % 2 ? b : a);
    seeds.push_back(seed);
    CUDA_OK(cudaDeviceSynchronize());  // `in` is freed at the end of the iteration
  }
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::int64_t n = sizes[k];
    const auto got = outs[k]->download(static_cast<std::size_t>(n) * 4);
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      double ref = 0, magnitudes = 0;
      for (int r = 0; r < size(); ++r) {
        ref += random_value(seeds[k], r, i);
        magnitudes += std::fabs(random_value(seeds[k], r, i));
      }
      const double tolerance = fallback_sum_tolerance(DataType::f32, ref, magnitudes, size());
      if (!(std::fabs(value_at(DataType::f32, got, i) - ref) <= tolerance)) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << "call " << k << " (" << n << " elements)";
    EXPECT_TRUE(same_on_every_rank(got));
  }
  CUDA_OK(cudaStreamDestroy(a));
  CUDA_OK(cudaStreamDestroy(b));
  comm->close();
}

TEST(CudaMpiFallback, FusedMatchesFloat64AndTheP2PKernelBitForBit) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config = mpi_fallback();
  config.cutoffs.fused_max_bytes = 16u << 20;
  auto comm = create_cuda(config);
  const float eps = 1e-6f;
  for (DataType dtype : {DataType::bf16, DataType::f16, DataType::f32}) {
    for (auto [rows, hidden] :
         {std::pair<std::int64_t, std::int64_t>{1, 2048}, {5, 4096}, {64, 7168}}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " " + std::to_string(rows) + "x" +
                   std::to_string(hidden));
      const auto w_host = random_tensor(dtype, hidden, 5, -2);
      DeviceBuffer weight(w_host.size());
      weight.upload(w_host);
      const std::vector<Declaration> declared{Declaration::fused_add_rms_norm(
          "rows", dtype, TensorLayout({rows, hidden}), weight.ptr, eps)};
      comm->declare(declared);
      const std::uint64_t seed = next_seed();
      // Another eps is another key: the same data through the MPI fallback.
      const FusedRun fallback =
          run_fused(*comm, dtype, rows, hidden, weight, eps * 1.0000001f + 1e-12f, seed);
      EXPECT_EQ(fallback.result.route, Route::fallback);
      const std::int64_t count = rows * hidden;
      std::vector<std::vector<std::uint8_t>> inputs;
      for (int r = 0; r < size(); ++r) inputs.push_back(random_tensor(dtype, count, seed, r));
      const auto res_in = random_tensor(dtype, count, seed, -1);
      std::int64_t wrong = 0;
      // One rounding of the sum at every world size (see below): the same
      // tolerance as the P2P kernels'.
      for (std::int64_t row = 0; row < rows; ++row) {
        std::vector<double> s(static_cast<std::size_t>(hidden));
        double squares = 0;
        for (std::int64_t j = 0; j < hidden; ++j) {
          const std::int64_t i = row * hidden + j;
          s[j] = value_at(dtype, res_in, i);
          for (int r = 0; r < size(); ++r) s[j] += value_at(dtype, inputs[r], i);
          squares += s[j] * s[j];
        }
        const double inv = 1.0 / std::sqrt(squares / hidden + eps);
        for (std::int64_t j = 0; j < hidden; ++j) {
          const std::int64_t i = row * hidden + j;
          const double out_ref = s[j] * inv * value_at(dtype, w_host, j);
          if (!(std::fabs(value_at(dtype, fallback.residual, i) - s[j]) <=
                fused_tolerance(dtype, s[j])) ||
              !(std::fabs(value_at(dtype, fallback.out, i) - out_ref) <=
                fused_tolerance(dtype, out_ref)))
            ++wrong;
        }
      }
      EXPECT_EQ(wrong, 0);
      EXPECT_TRUE(same_on_every_rank(fallback.out));
      EXPECT_TRUE(same_on_every_rank(fallback.residual));
      if (comm->p2p_enabled()) {
        const FusedRun p2p = run_fused(*comm, dtype, rows, hidden, weight, eps, seed);
        EXPECT_NE(p2p.result.route, Route::fallback);
        // The MPI fallback sums like the kernel (rank order, fp32, one
        // rounding: MPI's own sum at 2 ranks, a gather summed on the host
        // at 3+), then the same add + RMSNorm kernel: the same bits at
        // every world size.
        EXPECT_EQ(p2p.out, fallback.out) << "P2P and MPI fallback outputs differ";
        EXPECT_EQ(p2p.residual, fallback.residual);
      }
    }
  }
  comm->close();
}

TEST(CudaMpiFallback, CallDuringGraphCaptureIsRefusedAndDeclaredCallsStillCapture) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto comm = create_cuda(mpi_fallback(forcing(Route::one_shot)));
  PEERPLAN_MPI_SKIP_IF(!comm->p2p_enabled(), "P2P is disabled: " + comm->p2p_disabled_reason());
  const std::int64_t n = 4096;
  const std::vector<Declaration> declared{
      Declaration::all_reduce("x", DataType::bf16, vector_of(n))};
  comm->declare(declared);
  DeviceBuffer in(n * 2), out(n * 2), other(n * 4);
  in.upload(random_tensor(DataType::bf16, n, 11, rank()));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  comm->all_reduce(in.ptr, out.ptr, DataType::bf16, vector_of(n), stream);  // declared: captured
  std::string message;
  try {
    comm->all_reduce(other.ptr, other.ptr, DataType::f32, vector_of(n), stream);  // undeclared
  } catch (const InvalidUsage& e) {
    message = e.what();
  }
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  EXPECT_NE(message.find("CUDA graph capture"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_FALLBACK=nccl"), std::string::npos) << message;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    out.poison();
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto got = out.download(n * 2);
    double ref = 0;
    for (int r = 0; r < size(); ++r)
      ref += value_at(DataType::bf16, random_tensor(DataType::bf16, 1, 11, r), 0);
    EXPECT_NEAR(value_at(DataType::bf16, got, 0), ref, sum_tolerance(DataType::bf16, ref));
    EXPECT_TRUE(same_on_every_rank(got));
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
  comm->close();
}

TEST(CudaMpiFallback, RankThatSkipsACallMakesTheOthersRaiseTimeoutNamingIt) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config = mpi_fallback();
  config.timeout = std::chrono::milliseconds(2000);
  auto comm = create_cuda(config);
  const std::int64_t n = 1024;
  DeviceBuffer in(n * 4), out(n * 4);
  in.upload(random_tensor(DataType::f32, n, 3, rank()));
  comm->all_reduce(in.ptr, out.ptr, DataType::f32, vector_of(n), nullptr);  // all ranks: fine
  const int skipper = size() - 1;
  if (rank() != skipper) {
    const auto start = std::chrono::steady_clock::now();
    std::string message;
    try {
      comm->all_reduce(in.ptr, out.ptr, DataType::f32, vector_of(n), nullptr);
    } catch (const Timeout& e) {
      message = e.what();
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_NE(message.find("rank " + std::to_string(skipper)), std::string::npos) << message;
    EXPECT_LT(waited, std::chrono::milliseconds(2000 * 3 / 2 + 1500)) << "detection took too long";
  }
  MPI_Barrier(test_comm());
  comm->close();
}

}  // namespace
}  // namespace peerplan::cuda_test
