// SPDX-License-Identifier: Apache-2.0
// Registered buffers and the pull transfer mode on real GPUs: inputs inside
// registered buffers are read by the peers in place (zero copy) on both
// all-reduce routes, at any 16-byte aligned offset inside a sub-allocated pool, mixed with
// staged inputs on other ranks; pull and push give the same bytes; graphs
// replayed 200 times (40 where ranks share a GPU) read inputs that change
// between replays; bad buffers are refused on every rank; replaying a graph
// after deregistration fails loudly and declare() recovers. Any world size
// from 2 to 8, one GPU per rank or shared. Skipped (on every rank) without
// GPUs.
#include <algorithm>
#include <array>

#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

constexpr std::size_t kPoolBytes = 8u << 20;
constexpr std::size_t kPoolHead = 4096;  // registered region starts this far into the pool

Config pull_config(Route route) {
  Config config = forcing(route);
  config.transfer_mode = TransferMode::pull;
  return config;
}

// Sizes in bytes (declared messages are whole 16-byte packs): one pack, an
// odd number of packs, a short last shard, and beyond the one-shot default.
constexpr std::array<std::int64_t, 4> kSizes{16, 2000, 131088, 2097168};

std::vector<Declaration> declarations_for(DataType dtype) {
  std::vector<Declaration> declared;
  for (auto bytes : kSizes) {
    const std::int64_t n = bytes / static_cast<std::int64_t>(element_size(dtype));
    declared.push_back(Declaration::all_reduce("x" + std::to_string(n), dtype, vector_of(n)));
  }
  return declared;
}

TEST(CudaRegistration, RegisteredInputsAreReadInPlaceOnBothRoutes) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  for (Route route : {Route::one_shot, Route::two_shot}) {
    SCOPED_TRACE(to_string(route));
    auto comm = create_cuda(pull_config(route));  // selects this rank's GPU
    DeviceBuffer pool(kPoolBytes);  // a caching allocator's block: register a part of it
    char* region = static_cast<char*>(pool.ptr) + kPoolHead;
    const BufferRegion registered{region, kPoolBytes - kPoolHead};
    comm->register_buffers(std::span(&registered, 1));
    EXPECT_EQ(comm->registered_buffer_count(), 1u);
    for (DataType dtype : {DataType::bf16, DataType::f16, DataType::f32}) {
      comm->declare(declarations_for(dtype));
      for (auto bytes : kSizes) {
        const std::int64_t n = bytes / static_cast<std::int64_t>(element_size(dtype));
        // At the region's start + 256, and 16 bytes further (a view into a
        // pool: the peers map the allocation base and add the offset).
        // Offsets that break the declared 16-byte input_alignment are
        // refused before any GPU work (below).
        for (std::size_t offset : {std::size_t{0}, std::size_t{16}}) {
          SCOPED_TRACE(std::string(to_string(dtype)) + " x" + std::to_string(n) + " at +" +
                       std::to_string(offset));
          CallResult result;
          check_all_reduce(*comm, dtype, vector_of(n), route,
                           {.input_at = region + 256 + offset, .result = &result});
          EXPECT_TRUE(result.zero_copy);
        }
        // One element off: the declaration promised 16-byte aligned
        // inputs, so the call is refused on every rank alike.
        DeviceBuffer out(static_cast<std::size_t>(bytes));
        EXPECT_THROW(comm->all_reduce(region + 256 + element_size(dtype), out.ptr, dtype,
                                      vector_of(n), nullptr),
                     InvalidArgument);
      }
    }
    const auto stats = comm->stats();
    EXPECT_EQ(stats.zero_copy_calls, stats.p2p_calls);
    EXPECT_EQ(stats.zero_copy_calls, 3u * kSizes.size() * 2u);
    comm->close();
  }
}

TEST(CudaRegistration, RanksMixRegisteredAndStagedInputsAndPullMatchesPushBitForBit) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  for (Route route : {Route::one_shot, Route::two_shot}) {
    SCOPED_TRACE(to_string(route));
    auto pull = create_cuda(pull_config(route));
    auto push = create_cuda(forcing(route));
    DeviceBuffer pool(kPoolBytes);  // after create(): on this rank's GPU
    const BufferRegion registered{pool.ptr, kPoolBytes};
    pull->register_buffers(std::span(&registered, 1));
    push->register_buffers(std::span(&registered, 1));  // accepted, unused by push
    EXPECT_EQ(push->registered_buffer_count(), 0u);
    const DataType dtype = DataType::bf16;
    pull->declare(declarations_for(dtype));
    push->declare(declarations_for(dtype));
    for (auto bytes : kSizes) {
      const std::int64_t n = bytes / 2;
      SCOPED_TRACE("x" + std::to_string(n));
      // Rank 0 reads in place; the others stage (input outside the pool).
      const bool in_pool = rank() == 0;
      CallResult result;
      check_all_reduce(*pull, dtype, vector_of(n), route,
                       {.input_at = in_pool ? pool.ptr : nullptr, .result = &result});
      EXPECT_EQ(result.zero_copy, in_pool);
      // In place on a registered input: staged (peers must never read an
      // input this rank is overwriting).
      check_all_reduce(*pull, dtype, vector_of(n), route,
                       {.in_place = true, .input_at = pool.ptr, .result = &result});
      EXPECT_FALSE(result.zero_copy);
      // Push on identical data must give identical bytes.
      DeviceBuffer in(static_cast<std::size_t>(bytes)), out_pull(static_cast<std::size_t>(bytes)),
          out_push(static_cast<std::size_t>(bytes));
      in.upload(random_tensor(dtype, n, 4242 + static_cast<std::uint64_t>(n), rank()));
      pull->all_reduce(in.ptr, out_pull.ptr, dtype, vector_of(n), nullptr);
      push->all_reduce(in.ptr, out_push.ptr, dtype, vector_of(n), nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      EXPECT_TRUE(out_pull.download(in.bytes) == out_push.download(in.bytes))
          << "pull and push results differ";
    }
    EXPECT_EQ(push->stats().zero_copy_calls, 0u);
    push->close();
    pull->close();
  }
}

TEST(CudaRegistration, GraphReplaysReadRegisteredInputsThatChangeBetweenReplays) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const DataType bf16 = DataType::bf16;
  const std::int64_t n1 = 8192, n2 = 1 << 19;  // 16 KiB one-shot, 1 MiB two-shot
  Config config;
  config.transfer_mode = TransferMode::pull;
  config.cutoffs.one_shot_max_bytes = 64u << 10;
  config.cutoffs.two_shot_max_bytes = 8u << 20;
  auto comm = create_cuda(config);
  const std::size_t b1 = n1 * 2, b2 = n2 * 2;
  DeviceBuffer pool(b1 + b2 + 4096), out1(b1), out2(b2);
  char* in1 = static_cast<char*>(pool.ptr);
  char* in2 = in1 + b1 + 4096;  // same allocation: one IPC mapping serves both
  const std::array regions{BufferRegion{in1, b1}, BufferRegion{in2, b2}};
  comm->register_buffers(regions);
  comm->declare(std::vector{Declaration::all_reduce("one", bf16, vector_of(n1)),
                            Declaration::all_reduce("two", bf16, vector_of(n2))});
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  constexpr int kSets = 4;
  std::vector<std::vector<std::uint8_t>> in1_sets, in2_sets, expected;
  for (int k = 0; k < kSets; ++k) {
    in1_sets.push_back(random_tensor(bf16, n1, 900 + k, rank()));
    in2_sets.push_back(random_tensor(bf16, n2, 900 + k, rank()));
  }
  DeviceBuffer staged1(b1 * kSets), staged2(b2 * kSets);
  for (int k = 0; k < kSets; ++k) {
    CUDA_OK(
        cudaMemcpy(staged1.get<char>() + k * b1, in1_sets[k].data(), b1, cudaMemcpyHostToDevice));
    CUDA_OK(
        cudaMemcpy(staged2.get<char>() + k * b2, in2_sets[k].data(), b2, cudaMemcpyHostToDevice));
  }
  // Copies from pageable memory may still run; the non-blocking stream below would not wait.
  CUDA_OK(cudaDeviceSynchronize());
  auto load_set = [&](int k) {
    check_cuda(
        cudaMemcpyAsync(in1, staged1.get<char>() + k * b1, b1, cudaMemcpyDeviceToDevice, stream),
        "copy");
    check_cuda(
        cudaMemcpyAsync(in2, staged2.get<char>() + k * b2, b2, cudaMemcpyDeviceToDevice, stream),
        "copy");
  };
  std::vector<CallResult> results;
  auto calls = [&] {
    results = {comm->all_reduce(in1, out1.ptr, bf16, vector_of(n1), stream),
               comm->all_reduce(in2, out2.ptr, bf16, vector_of(n2), stream)};
  };
  auto outputs = [&] {
    check_cuda(cudaStreamSynchronize(stream), "sync");
    auto all = out1.download(b1);
    auto second = out2.download(b2);
    all.insert(all.end(), second.begin(), second.end());
    return all;
  };
  for (int k = 0; k < kSets; ++k) {  // eager: the expected bytes, checked once against float64
    load_set(k);
    calls();
    expected.push_back(outputs());
  }
  ASSERT_EQ(results[0].route, Route::one_shot);
  ASSERT_EQ(results[1].route, Route::two_shot);
  EXPECT_TRUE(results[0].zero_copy && results[1].zero_copy);
  std::int64_t wrong = 0;
  for (int k = 0; k < kSets; ++k) {
    for (int part = 0; part < 2; ++part) {
      const std::int64_t n = part == 0 ? n1 : n2;
      const std::size_t base = part == 0 ? 0 : b1;
      std::vector<std::vector<std::uint8_t>> inputs;
      for (int r = 0; r < size(); ++r) inputs.push_back(random_tensor(bf16, n, 900 + k, r));
      for (std::int64_t i = 0; i < n; ++i) {
        double ref = 0;
        for (int r = 0; r < size(); ++r) ref += value_at(bf16, inputs[r], i);
        const double got =
            load_as_float(bf16, &expected[k][base + static_cast<std::size_t>(i) * 2]);
        if (!(std::fabs(got - ref) <= sum_tolerance(bf16, ref))) ++wrong;
      }
    }
  }
  EXPECT_EQ(wrong, 0);

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  calls();
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  // The input is overwritten right after each replay: a rank whose peers
  // had not finished reading it would get the next set's data. Ranks
  // time-slicing one GPU make each replay milliseconds long: fewer there.
  const int replays = gpus_shared(*comm) ? 40 : 200;
  int mismatches = 0;
  for (int replay = 0; replay < replays; ++replay) {
    const int k = replay % kSets;
    load_set(k);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    load_set((k + 1) % kSets);
    if (outputs() != expected[static_cast<std::size_t>(k)]) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0) << "of " << replays << " replays";
  // The eager calls and the two captured ones; replays bypass the host.
  EXPECT_EQ(comm->stats().zero_copy_calls, 2u * (kSets + 1));

  // Deregistered under a captured graph: the replay must fail loudly, never
  // read through a stale mapping; declare() then brings P2P back.
  comm->deregister_buffers();
  EXPECT_EQ(comm->registered_buffer_count(), 0u);
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  bool refused = false;
  try {
    calls();
  } catch (const Error& e) {
    refused = true;
    EXPECT_TRUE(std::string(e.what()).find("registered buffer") != std::string::npos ||
                std::string(e.what()).find("gave up") != std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(refused);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  MPI_Barrier(test_comm());
  comm->declare(std::vector{Declaration::all_reduce("one", bf16, vector_of(n1)),
                            Declaration::all_reduce("two", bf16, vector_of(n2))});
  load_set(1);
  calls();
  EXPECT_FALSE(results[0].zero_copy);
  EXPECT_EQ(outputs(), expected[1]);
  CUDA_OK(cudaStreamDestroy(stream));
  comm->close();
}

TEST(CudaRegistration, BadBuffersAreRefusedOnEveryRankAndNothingIsRegistered) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto comm = create_cuda(pull_config(Route::one_shot));
  DeviceBuffer good(1 << 20);
  std::vector<std::uint8_t> host_memory(4096);
  const std::array<std::pair<BufferRegion, const char*>, 3> bad{
      std::pair{BufferRegion{host_memory.data(), host_memory.size()}, "not device memory"},
      std::pair{BufferRegion{good.ptr, good.bytes + 4096}, "past the end of its allocation"},
      std::pair{BufferRegion{nullptr, 64}, "null pointer"}};
  for (const auto& [region, why] : bad) {
    SCOPED_TRACE(why);
    // Only the last rank passes the bad buffer: every rank must throw.
    const BufferRegion mine = rank() == size() - 1 ? region : BufferRegion{good.ptr, good.bytes};
    std::string message;
    try {
      comm->register_buffers(std::span(&mine, 1));
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    EXPECT_FALSE(message.empty()) << "rank " << rank() << " did not throw";
    if (rank() == size() - 1) {
      EXPECT_NE(message.find(why), std::string::npos) << message;
    }
    EXPECT_NE(message.find("rank " + std::to_string(size() - 1)), std::string::npos) << message;
    EXPECT_EQ(comm->registered_buffer_count(), 0u);
  }
  comm->close();
}

}  // namespace
}  // namespace peerplan::cuda_test
