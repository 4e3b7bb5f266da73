// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's collectives on real GPUs, against float64 references:
// every dtype x route (one-shot, two-shot, fallback) at sizes from 16 bytes
// to beyond the cutoffs, strided layouts, the fused all-reduce + add +
// RMSNorm over rows 1..4096 x hidden 2048..8192 (P2P and fallback, which
// must agree), and CUDA graph capture + 1000 replays (60 where ranks share a
// GPU) with changing inputs interleaved with eager calls; an undeclared call
// is captured with the NCCL fallback and refused with InvalidUsage by the
// MPI fallback (then made eagerly after each replay). Any world size from 2
// to 8, one GPU per rank or shared. Skipped (on every rank) without GPUs.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <vector>

#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

TEST(CudaAllReduce, EveryDtypeAndRouteAndSize) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  // Message sizes in bytes (declarations need 16-byte rows): 16 B up to
  // 2 MiB + 16; 48, 8208 and 2097168 B leave the two-shot's last shard short.
  const std::array<std::int64_t, 7> sizes{16, 48, 2000, 8208, 131088, 524288, 2097168};
  for (auto [route, mode] : {std::pair{Route::one_shot, TransferMode::push},
                             {Route::two_shot, TransferMode::push},
                             {Route::one_shot, TransferMode::pull},
                             {Route::two_shot, TransferMode::pull},
                             {Route::fallback, TransferMode::push}}) {
    SCOPED_TRACE(std::string("transfer mode ") + to_string(mode));
    Config config = forcing(route == Route::fallback ? Route::one_shot : route);
    config.transfer_mode = mode;
    auto comm = create_cuda(config);
    ASSERT_EQ(comm->backend(), Backend::cuda);
    ASSERT_TRUE(comm->p2p_enabled());
    std::vector<Declaration> declared;
    if (route != Route::fallback) {
      for (DataType dtype : {DataType::f16, DataType::bf16, DataType::f32})
        for (auto bytes : sizes) {
          const std::int64_t n = bytes / static_cast<std::int64_t>(element_size(dtype));
          declared.push_back(Declaration::all_reduce(
              std::string(to_string(dtype)) + "_" + std::to_string(n), dtype, vector_of(n)));
        }
      declared.push_back(Declaration::all_reduce("in_place", DataType::bf16, vector_of(4104)));
    }
    comm->declare(declared);
    for (DataType dtype : {DataType::f16, DataType::bf16, DataType::f32}) {
      for (auto bytes : sizes) {
        const std::int64_t n = bytes / static_cast<std::int64_t>(element_size(dtype));
        SCOPED_TRACE(std::string(to_string(route)) + " " + to_string(dtype) + " x" +
                     std::to_string(n));
        check_all_reduce(*comm, dtype, vector_of(n), route);
      }
    }
    if (route != Route::fallback)
      check_all_reduce(*comm, DataType::bf16, vector_of(4104), route, true);
    comm->close();
  }
}

TEST(CudaAllReduce, StridedRowsOnEveryRoute) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const std::array<std::int64_t, 2> shape{5, 24};
  const std::array<std::int64_t, 2> strides{32, 1};
  const auto layout = TensorLayout::strided(shape, strides);
  for (auto [route, mode] : {std::pair{Route::one_shot, TransferMode::push},
                             {Route::two_shot, TransferMode::push},
                             {Route::one_shot, TransferMode::pull},
                             {Route::two_shot, TransferMode::pull}}) {
    Config config = forcing(route);
    config.transfer_mode = mode;
    auto comm = create_cuda(config);
    const std::vector<Declaration> declared{
        Declaration::all_reduce("rows", DataType::bf16, layout)};
    comm->declare(declared);
    check_all_reduce(*comm, DataType::bf16, layout, route);
    check_all_reduce(*comm, DataType::f32, layout,
                     Route::fallback);  // undeclared: NCCL via scratch
    comm->close();
  }
}

TEST(CudaAllReduce, DefaultCutoffsRouteBySize) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  PEERPLAN_MPI_SKIP_IF(size() != 2, "the CUDA defaults are measured for two ranks only");
  auto comm = create_cuda();
  // The measured 2-rank defaults (src/routing/cutoffs.cpp): one-shot up to
  // 4 MiB, two-shot up to 64 MiB, larger all-reduces to NCCL as over_cutoff.
  const std::int64_t small = 256 * 1024, medium = 3 * 1024 * 1024,
                     large = 33 * 1024 * 1024;  // bf16 elements
  const std::vector<Declaration> declared{
      Declaration::all_reduce("small", DataType::bf16, vector_of(small)),
      Declaration::all_reduce("medium", DataType::bf16, vector_of(medium)),
      Declaration::all_reduce("large", DataType::bf16, vector_of(large))};
  comm->declare(declared);
  check_all_reduce(*comm, DataType::bf16, vector_of(small), Route::one_shot);   // 512 KiB
  check_all_reduce(*comm, DataType::bf16, vector_of(medium), Route::two_shot);  // 6 MiB
  check_all_reduce(*comm, DataType::bf16, vector_of(large), Route::fallback);   // 66 MiB
  EXPECT_EQ(comm->stats().fallback_over_cutoff, 1u);
  comm->close();
}

TEST(CudaAllReduce, DisabledP2PUsesTheFallbackForEverything) {  // NCCL or MPI
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config;
  config.disable_p2p = true;
  auto comm = create_cuda(config);
  EXPECT_FALSE(comm->p2p_enabled());
  const std::vector<Declaration> declared{
      Declaration::all_reduce("x", DataType::bf16, vector_of(4096))};
  comm->declare(declared);
  check_all_reduce(*comm, DataType::bf16, vector_of(4096), Route::fallback);
  comm->close();
}

// ---------------------------------------------------------------- fused

TEST(CudaFused, RowsAndHiddenSizesP2PAndFallbackAgainstFloat64) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config;
  config.cutoffs.fused_max_bytes = 65u << 20;  // every shape below on the fused P2P route
  auto comm = create_cuda(config);
  const float eps = 1e-6f;
  const std::array<std::int64_t, 5> hiddens{2048, 4096, 5120, 7168, 8192};
  for (DataType dtype : {DataType::bf16, DataType::f16, DataType::f32}) {
    std::vector<std::int64_t> row_counts{1, 3, 64};
    if (dtype == DataType::bf16) row_counts.push_back(4096);
    for (auto hidden : hiddens) {
      const auto w_host = random_tensor(dtype, hidden, 77, -2);
      DeviceBuffer weight(w_host.size());
      weight.upload(w_host);
      std::vector<Declaration> declared;
      for (auto rows : row_counts) {
        if (dtype != DataType::bf16 && rows == 4096) continue;
        declared.push_back(Declaration::fused_add_rms_norm(
            "r" + std::to_string(rows), dtype, TensorLayout({rows, hidden}), weight.ptr, eps));
      }
      comm->declare(declared);
      for (auto rows : row_counts) {
        if (rows == 4096 && hidden != 8192 && hidden != 2048)
          continue;  // trim: the largest rows at two sizes
        SCOPED_TRACE(std::string(to_string(dtype)) + " rows " + std::to_string(rows) + " hidden " +
                     std::to_string(hidden));
        const std::uint64_t seed = next_seed();
        const FusedRun p2p = run_fused(*comm, dtype, rows, hidden, weight, eps, seed);
        EXPECT_EQ(p2p.result.route, default_fused_route(dtype, TensorLayout({rows, hidden})));
        // A different eps is another key: the same data through NCCL + add/RMSNorm.
        const FusedRun nccl =
            run_fused(*comm, dtype, rows, hidden, weight, eps * 1.0000001f + 1e-12f, seed);
        EXPECT_EQ(nccl.result.route, Route::fallback);

        const std::int64_t count = rows * hidden;
        std::vector<std::vector<std::uint8_t>> inputs;
        for (int r = 0; r < size(); ++r) inputs.push_back(random_tensor(dtype, count, seed, r));
        const auto res_in = random_tensor(dtype, count, seed, -1);
        std::int64_t wrong = 0, differ = 0;
        std::string first;
        std::vector<double> row_r(static_cast<std::size_t>(hidden)), row_slack(row_r.size());
        for (std::int64_t row = 0; row < rows; ++row) {
          double squares = 0;
          for (std::int64_t j = 0; j < hidden; ++j) {
            const std::int64_t i = row * hidden + j;
            double s = value_at(dtype, res_in, i), magnitudes = 0;
            for (int r = 0; r < size(); ++r) {
              s += value_at(dtype, inputs[r], i);
              magnitudes += std::fabs(value_at(dtype, inputs[r], i));
            }
            row_r[j] = s;
            // The fallback's all-reduce rounds its partial sums (n > 2 ranks).
            row_slack[j] = fallback_rounding_slack(dtype, magnitudes, size());
            squares += s * s;
          }
          const double inv = 1.0 / std::sqrt(squares / hidden + eps);
          for (std::int64_t j = 0; j < hidden; ++j) {
            const std::int64_t i = row * hidden + j;
            const double out_ref = row_r[j] * inv * value_at(dtype, w_host, j);
            for (const FusedRun* run : {&p2p, &nccl}) {
              const double r_got = value_at(dtype, run->residual, i);
              const double o_got = value_at(dtype, run->out, i);
              // The output scales the residual's error by inv * weight (twice: inv moves too).
              const double slack = run == &nccl ? row_slack[j] : 0.0;
              const double out_slack = 2 * slack * inv * std::fabs(value_at(dtype, w_host, j));
              if (!(std::fabs(r_got - row_r[j]) <= fused_tolerance(dtype, row_r[j]) + slack) ||
                  !(std::fabs(o_got - out_ref) <= fused_tolerance(dtype, out_ref) + out_slack)) {
                if (wrong++ == 0)
                  first = std::string(run == &p2p ? "p2p" : "fallback") + " element " +
                          std::to_string(i) + ": residual " + std::to_string(r_got) + " vs " +
                          std::to_string(row_r[j]) + ", out " + std::to_string(o_got) + " vs " +
                          std::to_string(out_ref);
              }
            }
            if (std::memcmp(&p2p.out[i * element_size(dtype)], &nccl.out[i * element_size(dtype)],
                            element_size(dtype)) != 0)
              ++differ;
          }
        }
        EXPECT_EQ(wrong, 0) << first;
        // Both paths round s, r and out identically; the fallback's 2-rank
        // sum (NCCL's or MPI's) is one fp32 add too.
        if (size() == 2) {
          EXPECT_EQ(differ, 0) << "P2P and fallback outputs differ in " << differ << " elements";
        }
        EXPECT_TRUE(same_on_every_rank(p2p.out));
        EXPECT_TRUE(same_on_every_rank(p2p.residual));
      }
    }
  }
  comm->close();
}

TEST(CudaFused, RowClustersAndOneBlockPerRowGiveTheSameBits) {
  // On sm_90+ a row runs as a cluster of blocks; RowClusters::off runs it
  // in one block, as on older GPUs. The rounding order is defined
  // to be the same (cuda/rms_norm_row.cuh): every output bit must match,
  // on the LL route (small), the two-shot + add/RMSNorm route (large) and
  // the fallback's add/RMSNorm (another eps: an undeclared key).
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const float eps = 1e-5f;
  const std::int64_t hidden = 7168;
  struct Case {
    DataType dtype;
    std::int64_t rows;
  };
  const std::vector<Case> cases{
      {DataType::bf16, 3}, {DataType::f32, 2}, {DataType::bf16, 96}, {DataType::f16, 70}};
  std::vector<FusedRun> with_clusters, without;
  for (RowClusters clusters : {RowClusters::automatic, RowClusters::off}) {
    Config config;
    config.cutoffs.fused_max_bytes = 16u << 20;
    config.kernels.row_clusters = clusters;
    auto comm = create_cuda(config);
    std::vector<FusedRun>& runs = clusters == RowClusters::automatic ? with_clusters : without;
    std::vector<std::unique_ptr<DeviceBuffer>> weights;
    std::vector<Declaration> declared;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto w_host = random_tensor(cases[i].dtype, hidden, 31, -2);
      weights.push_back(std::make_unique<DeviceBuffer>(w_host.size()));
      weights.back()->upload(w_host);
      declared.push_back(Declaration::fused_add_rms_norm("c" + std::to_string(i), cases[i].dtype,
                                                         TensorLayout({cases[i].rows, hidden}),
                                                         weights.back()->ptr, eps));
    }
    comm->declare(declared);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      runs.push_back(
          run_fused(*comm, cases[i].dtype, cases[i].rows, hidden, *weights[i], eps, 900 + i));
      EXPECT_EQ(runs.back().result.route,
                default_fused_route(cases[i].dtype, TensorLayout({cases[i].rows, hidden})))
          << "case " << i;
      runs.push_back(
          run_fused(*comm, cases[i].dtype, cases[i].rows, hidden, *weights[i], eps * 2, 900 + i));
      EXPECT_EQ(runs.back().result.route, Route::fallback) << "case " << i;
    }
    comm->close();
  }
  ASSERT_EQ(with_clusters.size(), without.size());
  for (std::size_t i = 0; i < with_clusters.size(); ++i) {
    EXPECT_TRUE(with_clusters[i].out == without[i].out) << "run " << i << ": outputs differ";
    EXPECT_TRUE(with_clusters[i].residual == without[i].residual)
        << "run " << i << ": residuals differ";
  }
}

// ---------------------------------------------------------------- graphs

TEST(CudaGraph, CaptureAndReplayDeclaredAndUndeclaredWithEagerInterleaved) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config;  // two-shot is off by default: turn it on to capture every route
  config.cutoffs.two_shot_max_bytes = 8u << 20;
  auto comm = create_cuda(config);
  // The NCCL fallback captures undeclared calls into the graph; the MPI
  // fallback (ranks sharing a GPU, or no NCCL) runs on the host and refuses
  // them during capture: the application then makes them eagerly.
  const bool fallback_captures = comm->fallback() == Fallback::nccl;
  // Ranks time-slicing one GPU make every flag round trip milliseconds long.
  const bool shared = gpus_shared(*comm);
  const int replays = shared ? 60 : 1000;
  const int eager_every = shared ? 6 : 50;
  const DataType bf16 = DataType::bf16;
  const std::int64_t n1 = 4096, n2 = 3 << 20, n3 = 1000, rows = 4, hidden = 4096;
  const auto w_host = random_tensor(bf16, hidden, 5, -2);
  DeviceBuffer weight(w_host.size());
  weight.upload(w_host);
  const std::vector<Declaration> declared{
      Declaration::all_reduce("one", bf16, vector_of(n1)),
      Declaration::all_reduce("two", bf16, vector_of(n2)),
      Declaration::fused_add_rms_norm("fused", bf16, TensorLayout({rows, hidden}), weight.ptr,
                                      1e-5f)};
  comm->declare(declared);

  constexpr int kSets = 8;
  const std::size_t b1 = n1 * 2, b2 = n2 * 2, b3 = n3 * 4, bf = rows * hidden * 2;
  DeviceBuffer in1(b1), out1(b1), in2(b2), out2(b2), in3(b3), out3(b3), inout(bf), residual(bf);
  std::vector<std::unique_ptr<DeviceBuffer>> sets;  // per set: in1, in2, in3, inout, residual
  for (int k = 0; k < kSets; ++k) {
    const std::uint64_t seed = next_seed();
    for (auto [dtype, n] :
         {std::pair{bf16, n1}, {bf16, n2}, {DataType::f32, n3}, {bf16, rows * hidden}}) {
      sets.push_back(std::make_unique<DeviceBuffer>(n * element_size(dtype)));
      sets.back()->upload(random_tensor(dtype, n, seed, rank()));
    }
    sets.push_back(std::make_unique<DeviceBuffer>(bf));
    sets.back()->upload(random_tensor(bf16, rows * hidden, seed, -1));
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto load_set = [&](int k) {
    auto s = [&](int j) { return sets[static_cast<std::size_t>(5 * k + j)].get(); };
    check_cuda(cudaMemcpyAsync(in1.ptr, s(0)->ptr, b1, cudaMemcpyDeviceToDevice, stream), "copy");
    check_cuda(cudaMemcpyAsync(in2.ptr, s(1)->ptr, b2, cudaMemcpyDeviceToDevice, stream), "copy");
    check_cuda(cudaMemcpyAsync(in3.ptr, s(2)->ptr, b3, cudaMemcpyDeviceToDevice, stream), "copy");
    check_cuda(cudaMemcpyAsync(inout.ptr, s(3)->ptr, bf, cudaMemcpyDeviceToDevice, stream), "copy");
    check_cuda(cudaMemcpyAsync(residual.ptr, s(4)->ptr, bf, cudaMemcpyDeviceToDevice, stream),
               "copy");
  };
  std::vector<CallResult> results;
  auto undeclared_call = [&] {
    return comm->all_reduce(in3.ptr, out3.ptr, DataType::f32, vector_of(n3), stream);
  };
  // The four calls in order; during an MPI-fallback capture the undeclared
  // one must be refused with InvalidUsage, before it touches the stream.
  auto calls = [&](bool capturing) {
    results.clear();
    results.push_back(comm->all_reduce(in1.ptr, out1.ptr, bf16, vector_of(n1), stream));
    results.push_back(comm->all_reduce(in2.ptr, out2.ptr, bf16, vector_of(n2), stream));
    if (capturing && !fallback_captures) {
      std::string message;
      try {
        undeclared_call();
      } catch (const InvalidUsage& e) {
        message = e.what();
      }
      EXPECT_NE(message.find("CUDA graph capture"), std::string::npos)
          << "an undeclared call captured with the MPI fallback must raise InvalidUsage naming "
             "the capture; got: \""
          << message << "\"";
    } else {
      results.push_back(undeclared_call());
    }
    results.push_back(comm->fused_add_rms_norm(inout.ptr, residual.ptr, weight.ptr, 1e-5f, bf16,
                                               TensorLayout({rows, hidden}), stream));
  };
  auto outputs = [&] {
    check_cuda(cudaStreamSynchronize(stream), "sync");
    std::vector<std::uint8_t> all = out1.download(b1);
    for (const DeviceBuffer* b : {&out2, &out3, &inout, &residual}) {
      auto part = b->download(b->bytes);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  // Expected bytes of each set, from eager calls (checked against float64 once).
  std::vector<std::vector<std::uint8_t>> expected;
  for (int k = 0; k < kSets; ++k) {
    load_set(k);
    calls(false);
    expected.push_back(outputs());
  }
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].route, Route::one_shot);
  EXPECT_EQ(results[1].route, Route::two_shot);
  EXPECT_EQ(results[2].route, Route::fallback);
  EXPECT_EQ(results[3].route, default_fused_route(bf16, TensorLayout({rows, hidden})));
  {
    // Spot check of set 0 against float64: the all-reduce parts.
    std::int64_t wrong = 0;
    for (int part = 0; part < 3; ++part) {
      const DataType dtype = part == 2 ? DataType::f32 : bf16;
      const std::int64_t n = part == 0 ? n1 : part == 1 ? n2 : n3;
      const std::size_t offset = part == 0 ? 0 : part == 1 ? b1 : b1 + b2;
      auto mine = sets[part]->download(n * element_size(dtype));
      std::vector<std::uint8_t> all(mine.size() * size());
      MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                    static_cast<int>(mine.size()), MPI_BYTE, test_comm());
      for (std::int64_t i = 0; i < n; ++i) {
        double ref = 0, magnitudes = 0;
        for (int r = 0; r < size(); ++r) {
          const double x = load_as_float(dtype, &all[r * mine.size() + i * element_size(dtype)]);
          ref += x;
          magnitudes += std::fabs(x);
        }
        const double v = load_as_float(dtype, &expected[0][offset + i * element_size(dtype)]);
        const double tolerance = part == 2 ? fallback_sum_tolerance(dtype, ref, magnitudes, size())
                                           : sum_tolerance(dtype, ref);
        if (!(std::fabs(v - ref) <= tolerance)) ++wrong;
      }
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_TRUE(same_on_every_rank(expected[0])) << "eager outputs differ across ranks";
  }

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  calls(true);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  int mismatches = 0;
  for (int i = 0; i < replays; ++i) {
    const int k = (i * 5 + 3) % kSets;
    load_set(k);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    // Not in the graph: made eagerly on the same stream, after the replay.
    if (!fallback_captures) undeclared_call();
    if (outputs() != expected[k]) ++mismatches;
    if (i % eager_every == eager_every - 1) {  // eager calls between replays
      const int e = (i / eager_every) % kSets;
      load_set(e);
      calls(false);
      if (outputs() != expected[e]) ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0) << "replays (" << replays << ", fallback " << to_string(comm->fallback())
                           << ") or interleaved eager calls whose bytes differ from the eager run";
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
  comm->close();
}

}  // namespace
}  // namespace peerplan::cuda_test
