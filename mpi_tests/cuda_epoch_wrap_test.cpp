// SPDX-License-Identifier: Apache-2.0
// Calls across the epochs' 2^32 wrap (docs/design.md, "Epochs are 32-bit
// and wrap"), which a program reaches after 2^32 P2P calls on one
// communicator (hours to days of decoding). PEERPLAN_TEST_EPOCH_START starts
// a communicator's epoch count a few calls before the wrap. Every P2P
// protocol, the all-reduce (one-shot on LL lines and Lamport, two-shot
// staged, Lamport and on copy engines) and the fused op (LL, Lamport,
// two-shot + row norm), runs small and larger messages, alternating, across
// the wrap (the all-reduce's small ones are calls of one block, which count
// in a word of their own); each must give the bits of a twin communicator
// whose epochs start at 0, and the all-reduce the float64 sum. A rank late for the
// call at epoch 0 (after 2^32 - 1) fails that call, as its peers do, naming
// the same call. Any world size from 2 to 8, one GPU per rank or shared.
// Skipped (on every rank) without GPUs.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_bitwise_check.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

constexpr float kEps = 1e-6f;
constexpr std::int64_t kHidden = 1024;

// While it lives, communicators' slabs start their epoch count at `start`
// (read when declare() creates them).
class EpochStart {
 public:
  explicit EpochStart(std::uint32_t start) {
    setenv("PEERPLAN_TEST_EPOCH_START", std::to_string(start).c_str(), 1);
  }
  ~EpochStart() { unsetenv("PEERPLAN_TEST_EPOCH_START"); }
  EpochStart(const EpochStart&) = delete;
  EpochStart& operator=(const EpochStart&) = delete;
};

struct WrapCase {
  const char* name;
  bool fused;
  Route route;
  Protocol protocol;
};

Config config_for(const WrapCase& c) {
  Config config = forcing(c.route);
  config.kernels.one_shot_lamport =
      c.protocol == Protocol::lamport ? Window::every_size() : Window::never();
  config.kernels.two_shot_lamport = config.kernels.one_shot_lamport;
  config.kernels.two_shot_dma =
      c.protocol == Protocol::dma ? Window::every_size() : Window::never();
  config.kernels.fused_ll = c.protocol == Protocol::ll ? Window::every_size() : Window::never();
  config.kernels.fused_lamport = config.kernels.one_shot_lamport;
  return config;
}

// Alternately a small message and a larger one. In the all-reduce these are
// calls of one block (the one-block call count) and of several (the
// per-block counts), so that the epoch sum crosses the wrap in both words.
constexpr std::int64_t kAllReduceCounts[] = {512, 131072};  // bf16: 1 KiB, 256 KiB
constexpr std::int64_t kFusedRows[] = {1, 64};

class CudaEpochWrap : public ::testing::TestWithParam<WrapCase> {};

TEST_P(CudaEpochWrap, CallsAcrossTheWrapGiveTheBitsOfCallsAwayFromIt) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const WrapCase& c = GetParam();
  const DataType dtype = DataType::bf16;
  DeviceBuffer weight(kHidden * element_size(dtype));
  weight.upload(random_tensor(dtype, kHidden, 7, -1));
  std::vector<Declaration> declared;
  for (int k = 0; k < 2; ++k) {
    if (c.fused) {
      declared.push_back(Declaration::fused_add_rms_norm("rows" + std::to_string(k), dtype,
                                                         TensorLayout({kFusedRows[k], kHidden}),
                                                         weight.ptr, kEps));
    } else {
      declared.push_back(vector_declaration(dtype, kAllReduceCounts[k]));
    }
  }
  auto twin = create_cuda(config_for(c));
  auto wrapping = create_cuda(config_for(c));
  ASSERT_TRUE(wrapping->p2p_enabled()) << wrapping->p2p_disabled_reason();
  twin->declare(declared);
  {
    // Every call advances the epoch by at least one, so the calls below
    // cross the wrap within their first 64. Not closer to it: a flag
    // barrier takes a peer's flag for up to 16 calls ahead
    // (flag_window.cuh), and a new slab's flags are 0.
    const EpochStart start(0xFFFFFFFFu - 63u);
    wrapping->declare(declared);
  }
  for (int call = 0; call < 80; ++call) {
    const int k = call % 2;
    const std::uint64_t seed = next_seed();
    SCOPED_TRACE(std::string(c.name) + ", call " + std::to_string(call));
    if (c.fused) {
      const FusedRun got = run_fused(*wrapping, dtype, kFusedRows[k], kHidden, weight, kEps, seed);
      const FusedRun away = run_fused(*twin, dtype, kFusedRows[k], kHidden, weight, kEps, seed);
      EXPECT_EQ(got.result.route, c.route);
      EXPECT_EQ(got.result.protocol, c.protocol);
      EXPECT_EQ(first_difference(dtype, got.out, away.out), "") << "output";
      EXPECT_EQ(first_difference(dtype, got.residual, away.residual), "") << "residual";
      EXPECT_TRUE(same_on_every_rank(got.out)) << "outputs differ across ranks";
      continue;
    }
    const TensorLayout layout = vector_of(kAllReduceCounts[k]);
    const auto inputs = every_rank_input(dtype, layout.numel(), seed);
    CallResult result;
    const auto got = run_all_reduce(
        [&](const void* in, void* out) {
          result = wrapping->all_reduce(in, out, dtype, layout, nullptr);
        },
        dtype, layout, inputs[rank()], /*in_place=*/false);
    const auto away = run_all_reduce(
        [&](const void* in, void* out) { twin->all_reduce(in, out, dtype, layout, nullptr); },
        dtype, layout, inputs[rank()], /*in_place=*/false);
    EXPECT_EQ(result.route, c.route);
    EXPECT_EQ(result.protocol, c.protocol);
    std::string first;
    EXPECT_EQ(count_wrong(dtype, layout, inputs, got, first), 0) << "first: " << first;
    EXPECT_EQ(first_difference(dtype, got, away), "");
    EXPECT_TRUE(same_on_every_rank(got)) << "outputs differ across ranks";
  }
  wrapping->close();
  twin->close();
}

INSTANTIATE_TEST_SUITE_P(
    EveryProtocol, CudaEpochWrap,
    ::testing::Values(WrapCase{"one_shot_ll", false, Route::one_shot, Protocol::ll},
                      WrapCase{"one_shot_lamport", false, Route::one_shot, Protocol::lamport},
                      WrapCase{"two_shot_staged", false, Route::two_shot, Protocol::staged},
                      WrapCase{"two_shot_lamport", false, Route::two_shot, Protocol::lamport},
                      WrapCase{"two_shot_dma", false, Route::two_shot, Protocol::dma},
                      WrapCase{"fused_ll", true, Route::fused_one_shot, Protocol::ll},
                      WrapCase{"fused_lamport", true, Route::fused_one_shot, Protocol::lamport},
                      WrapCase{"fused_two_shot", true, Route::fused_two_shot, Protocol::staged}),
    [](const ::testing::TestParamInfo<WrapCase>& info) { return std::string(info.param.name); });

// The late-rank check (cuda_lifecycle_test's RankLateForACallItsPeersGaveUpOn...)
// at the wrap: the epochs go 2^32 - 2, 2^32 - 1, then 0, where 0 in a peer's
// give-up word means "no give-up" (cuda/give_up_mark.cuh). The last rank
// comes late for the call at 0; its peers give up on it, and every rank's
// Timeout names call #0 (a count from the start would name #3), the late
// rank's saying it came late. Then the next declare recovers.
TEST(CudaEpochWrapTimeout, RankLateForTheCallAtEpochZeroFailsThatCall) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  constexpr std::int64_t n = 8192;
  Config config;
  config.timeout = std::chrono::milliseconds(1500);
  auto comm = create_cuda(config);
  ASSERT_TRUE(comm->p2p_enabled()) << comm->p2p_disabled_reason();
  const std::vector<Declaration> declared{vector_declaration(DataType::bf16, n)};
  {
    const EpochStart start(0xFFFFFFFFu - 2u);
    comm->declare(declared);
  }
  DeviceBuffer in(n * 2), out(n * 2);
  in.upload(random_tensor(DataType::bf16, n, 2, rank()));
  for (int call = 0; call < 2; ++call) {  // epochs 2^32 - 2 and 2^32 - 1
    comm->all_reduce(in.ptr, out.ptr, DataType::bf16, vector_of(n), nullptr);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(expect_every_rank_fails_the_call_the_last_rank_is_late_for(
      *comm, n, config.timeout, "P2P call #0 "));  // the call at epoch 0
  MPI_Barrier(test_comm());
  comm->declare(declared);  // slabs and epochs re-created, from 0
  out.poison();
  comm->all_reduce(in.ptr, out.ptr, DataType::bf16, vector_of(n), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(same_on_every_rank(out.download(n * 2)));
  comm->close();
}

}  // namespace
}  // namespace peerplan::cuda_test
