// SPDX-License-Identifier: Apache-2.0
// The two-shot all-reduce's other protocols on real GPUs: copy engines
// (Protocol::dma, cuda/two_shot_dma.cu) and the Lamport region
// (Protocol::lamport, cuda/two_shot_lamport.cu), each test run for both.
// Each check runs the same inputs through a communicator whose two-shot
// runs on the tested protocol and one whose two-shot stages through the
// kernel (KernelChoices::two_shot_dma and two_shot_lamport at every size
// or never), and requires: CallResult
// naming the protocol that ran, the float64 reference within one rounding
// (NaN stays NaN, infinities exact; the inputs are full of special bit
// patterns, the Lamport sentinel among them), the same bytes on every
// rank, and the same bytes from both protocols. Covered: every dtype, shard
// counts that leave ranks with short or empty shards, in == out; strided
// layouts (copy engines leave them staged, Lamport takes them); messages
// run in pieces; messages of 16 MiB and more (copy engines pipeline them
// in pieces over their own streams); the fused op's two-shot + row norm on the protocol; a CUDA graph mixing the protocol with one-shot plans (LL
// and Lamport: the Lamport region's parities are shared), replayed with
// new inputs and eager calls in between; the timeout and its recovery; the
// plan's launch text. Any world size from 2 to 8, one GPU per rank or
// shared. Skipped (on every rank) without GPUs.
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_bitwise_check.hpp"
#include "support/cuda_test_support.hpp"

namespace peerplan::cuda_test {
namespace {

constexpr std::array<DataType, 3> kDtypes{DataType::f16, DataType::bf16, DataType::f32};

// Every declared all-reduce up to 64 MiB routed two-shot, on `protocol`
// (staged, dma or lamport) at every size.
Config two_shot_on(Protocol protocol, Config config = forcing(Route::two_shot)) {
  config.kernels.two_shot_dma = protocol == Protocol::dma ? Window::every_size() : Window::never();
  config.kernels.two_shot_lamport =
      protocol == Protocol::lamport ? Window::every_size() : Window::never();
  return config;
}

// Each test runs for both protocols.
class CudaTwoShotProtocol : public ::testing::TestWithParam<Protocol> {};

AllReduceCall expecting(Communicator& comm, DataType dtype, const TensorLayout& layout,
                        Protocol protocol, Route route = Route::two_shot) {
  return [&comm, dtype, &layout, protocol, route](const void* in, void* out) {
    const CallResult result = comm.all_reduce(in, out, dtype, layout, nullptr);
    EXPECT_EQ(result.route, route) << to_string(dtype) << " " << layout.to_string();
    EXPECT_EQ(result.protocol, protocol) << to_string(dtype) << " " << layout.to_string();
  };
}

// The same inputs through `tested` and through `staged` (a whole staged
// two-shot): float64 reference, same bytes on every rank, same bytes from
// both. `protocol` is what `tested` must report for this layout.
void expect_same_bits(Communicator& staged, Communicator& tested, DataType dtype,
                      const TensorLayout& layout, bool in_place, Protocol protocol) {
  SCOPED_TRACE(std::string(to_string(dtype)) + " " + layout.to_string() +
               (in_place ? " in place" : "") + ", " + to_string(protocol));
  const auto inputs = every_rank_input(dtype, layout.numel(), next_seed());
  const auto got = run_all_reduce(expecting(tested, dtype, layout, protocol), dtype, layout,
                                  inputs[rank()], in_place);
  const auto by_kernel = run_all_reduce(expecting(staged, dtype, layout, Protocol::staged), dtype,
                                        layout, inputs[rank()], in_place);
  std::string first;
  EXPECT_EQ(count_wrong(dtype, layout, inputs, got, first), 0) << "first: " << first;
  EXPECT_TRUE(same_on_every_rank(got)) << "outputs differ across ranks";
  EXPECT_EQ(first_difference(dtype, got, by_kernel), "")
      << "outputs differ from the whole staged two-shot's";
}

// Counts of whole 16-byte packs (declarations have 16-byte rows): one pack
// (at 2+ ranks some shards are empty), a few, odd ones, and an odd number
// making several MiB.
std::vector<std::int64_t> counts_of(DataType dtype) {
  const std::int64_t v = static_cast<std::int64_t>(16 / element_size(dtype));
  std::vector<std::int64_t> n;
  for (std::int64_t packs : {1, 2, 3, 7, 9, 1001, 65537, (3 << 16) + 1}) n.push_back(packs * v);
  return n;
}

TEST_P(CudaTwoShotProtocol, EveryDtypeAndCountMatchesTheStagedTwoShotBitForBit) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const Protocol protocol = GetParam();
  auto staged = create_cuda(two_shot_on(Protocol::staged));
  auto tested = create_cuda(two_shot_on(protocol));
  ASSERT_TRUE(staged->p2p_enabled() && tested->p2p_enabled()) << tested->p2p_disabled_reason();
  const auto declared = vector_declarations(kDtypes, counts_of);
  staged->declare(declared);
  tested->declare(declared);
  for (DataType dtype : kDtypes) {
    bool in_place = false;
    for (std::int64_t n : counts_of(dtype)) {
      expect_same_bits(*staged, *tested, dtype, vector_of(n), in_place, protocol);
      in_place = !in_place;
    }
  }
  tested->close();
  staged->close();
}

TEST_P(CudaTwoShotProtocol, LargeMessagesMatchTheStagedTwoShotBitForBit) {
  // From 16 MiB on, copy engines run a message as pipelined pieces (their
  // copies on the transport's two streams, overlapping the adds): 2, 5
  // and 7 pieces here, the last one shorter, in place and not. Lamport takes the
  // same messages whole. Never split by the communicator (whose pieces
  // start at 128 MiB / ranks): each message is one plan launch.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const Protocol protocol = GetParam();
  const auto whole = [](Protocol p) {
    Config config = two_shot_on(p);
    config.cutoffs.two_shot_chunk_bytes = 0;
    return config;
  };
  auto staged = create_cuda(whole(Protocol::staged));
  auto tested = create_cuda(whole(protocol));
  ASSERT_TRUE(staged->p2p_enabled() && tested->p2p_enabled()) << tested->p2p_disabled_reason();
  struct Large {
    DataType dtype;
    std::int64_t count;
    int pieces;  // on copy engines
  };
  const std::array<Large, 3> messages{{{DataType::bf16, (8 << 20) + 24, 2},
                                       {DataType::f32, (10 << 20) + 4, 5},
                                       {DataType::bf16, (30 << 20) + 8, 7}}};
  const std::vector<Declaration> declared = message_declarations(messages);
  staged->declare(declared);
  tested->declare(declared);
  bool in_place = false;
  for (const Large& m : messages) {
    const PlanInfo plan = tested->plan_for(make_all_reduce_key(m.dtype, vector_of(m.count)));
    const std::string pieces = "in " + std::to_string(m.pieces) + " pipelined pieces";
    EXPECT_EQ(plan.launch.find(pieces) != std::string::npos, protocol == Protocol::dma)
        << plan.launch;
    expect_same_bits(*staged, *tested, m.dtype, vector_of(m.count), in_place, protocol);
    in_place = !in_place;
  }
  tested->close();
  staged->close();
}

TEST_P(CudaTwoShotProtocol, StridedRowsTakeLamportButStayStagedForCopyEngines) {
  // Copy engines move contiguous bytes: the router keeps padded rows on
  // the staged two-shot even where the window admits copy engines. The
  // Lamport kernel reads and writes through the layout.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const Protocol protocol = GetParam();
  auto staged = create_cuda(two_shot_on(Protocol::staged));
  auto tested = create_cuda(two_shot_on(protocol));
  const TensorLayout padded = TensorLayout::strided(std::vector<std::int64_t>{300, 1000},
                                                    std::vector<std::int64_t>{1032, 1});
  const TensorLayout dense{300, 1000};
  std::vector<Declaration> declared{Declaration::all_reduce("padded", DataType::bf16, padded),
                                    Declaration::all_reduce("dense", DataType::bf16, dense)};
  staged->declare(declared);
  tested->declare(declared);
  const Protocol padded_protocol = protocol == Protocol::dma ? Protocol::staged : protocol;
  for (bool in_place : {false, true}) {
    expect_same_bits(*staged, *tested, DataType::bf16, padded, in_place, padded_protocol);
    expect_same_bits(*staged, *tested, DataType::bf16, dense, in_place, protocol);
  }
  tested->close();
  staged->close();
}

TEST_P(CudaTwoShotProtocol, AMessageInPiecesRunsEachPieceOnTheProtocolWithTheSameBits) {
  // The same pieces on the staged kernel too: both must give the bits of
  // one whole staged two-shot.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const Protocol protocol = GetParam();
  Config tested_pieces = two_shot_on(protocol);
  tested_pieces.cutoffs.two_shot_chunk_bytes = 64 * 1024;
  Config staged_pieces = two_shot_on(Protocol::staged);
  staged_pieces.cutoffs.two_shot_chunk_bytes = 64 * 1024;
  auto whole = create_cuda(two_shot_on(Protocol::staged));
  auto tested = create_cuda(tested_pieces);
  auto staged = create_cuda(staged_pieces);
  // 3 pieces of 64 KiB and a short one, and a message that is one piece.
  const std::int64_t long_count = (3 * 64 * 1024 + 4000) / 2;
  const std::int64_t one_piece = 64 * 1024 / 2;
  const std::vector<Declaration> declared{
      Declaration::all_reduce("long", DataType::bf16, vector_of(long_count)),
      Declaration::all_reduce("one", DataType::bf16, vector_of(one_piece))};
  for (Communicator* c : {whole.get(), tested.get(), staged.get()}) c->declare(declared);
  const auto long_key = make_all_reduce_key(DataType::bf16, vector_of(long_count));
  const PlanInfo plan = tested->plan_for(long_key);
  EXPECT_EQ(plan.protocol, protocol);
  EXPECT_NE(plan.launch.find(protocol == Protocol::dma ? "copy engines" : "two-shot Lamport"),
            std::string::npos)
      << plan.launch;
  EXPECT_NE(plan.launch.find("in 3 pieces of 65536 bytes + 1 of 4000"), std::string::npos)
      << plan.launch;
  EXPECT_NE(staged->plan_for(long_key).launch.find("in 3 pieces"), std::string::npos)
      << staged->plan_for(long_key).launch;
  for (bool in_place : {false, true}) {
    for (std::int64_t n : {long_count, one_piece}) {
      expect_same_bits(*whole, *tested, DataType::bf16, vector_of(n), in_place, protocol);
      expect_same_bits(*whole, *staged, DataType::bf16, vector_of(n), in_place, Protocol::staged);
    }
  }
  for (Communicator* c : {staged.get(), tested.get(), whole.get()}) c->close();
}

TEST_P(CudaTwoShotProtocol, TheFusedTwoShotReducesOnTheProtocolWithTheStagedOnesBits) {
  // Past the fused op's one-shot windows (closed here) a dense fused
  // message runs the two-shot all-reduce in place, on the protocol a
  // plain two-shot of its bytes takes, then the row kernel: the same bits
  // as on the staged two-shot, on every rank.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const Protocol protocol = GetParam();
  const auto fused_two_shot_on = [](Protocol p) {
    Config config = two_shot_on(p, forcing(Route::fused_one_shot));
    config.kernels.fused_lamport = Window::never();
    config.kernels.fused_ll = Window::never();
    return config;
  };
  auto staged = create_cuda(fused_two_shot_on(Protocol::staged));
  auto tested = create_cuda(fused_two_shot_on(protocol));
  ASSERT_TRUE(staged->p2p_enabled() && tested->p2p_enabled()) << tested->p2p_disabled_reason();
  constexpr float kEps = 1e-6f;
  constexpr std::int64_t kHidden = 4104;  // 513 packs of bf16: shards end mid-row
  for (DataType dtype : kDtypes) {
    const auto weight_bytes = random_tensor(dtype, kHidden, 77, -2);
    DeviceBuffer weight(weight_bytes.size());
    weight.upload(weight_bytes);
    const std::vector<std::int64_t> row_counts{1, 3, 64, 257};
    std::vector<Declaration> declared;
    for (std::int64_t rows : row_counts) {
      declared.push_back(Declaration::fused_add_rms_norm(
          "r" + std::to_string(rows), dtype, TensorLayout({rows, kHidden}), weight.ptr, kEps));
    }
    staged->declare(declared);
    tested->declare(declared);
    for (std::int64_t rows : row_counts) {
      SCOPED_TRACE(std::string(to_string(dtype)) + " rows " + std::to_string(rows));
      const std::uint64_t seed = next_seed();
      const FusedRun got = run_fused(*tested, dtype, rows, kHidden, weight, kEps, seed);
      const FusedRun by_staged = run_fused(*staged, dtype, rows, kHidden, weight, kEps, seed);
      EXPECT_EQ(got.result.route, Route::fused_two_shot);
      EXPECT_EQ(got.result.protocol, protocol);
      EXPECT_EQ(by_staged.result.route, Route::fused_two_shot);
      EXPECT_EQ(by_staged.result.protocol, Protocol::staged);
      EXPECT_EQ(first_difference(dtype, got.out, by_staged.out), "") << "outputs";
      EXPECT_EQ(first_difference(dtype, got.residual, by_staged.residual), "") << "residuals";
      EXPECT_TRUE(same_on_every_rank(got.out) && same_on_every_rank(got.residual));
    }
    const PlanInfo plan =
        tested->plan_for(make_fused_key(dtype, TensorLayout({257, kHidden}), weight.ptr, kEps));
    EXPECT_NE(plan.launch.find("+ row norm"), std::string::npos) << plan.launch;
  }
  tested->close();
  staged->close();
}

TEST_P(CudaTwoShotProtocol, GraphCaptureAndReplaysWithNewInputsAndEagerCallsBetween) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  // One graph with two-shots on the protocol and one-shot kernels between
  // them, LL lines and Lamport: the one-shots move the epoch (and its
  // parity) while the copy engines' addresses stay fixed, and the Lamport
  // one-shot and two-shot share the region's parities.
  const Protocol protocol = GetParam();
  Config mixed = two_shot_on(protocol);
  mixed.cutoffs.one_shot_max_bytes = 16 * 1024;
  mixed.kernels.one_shot_lamport = Window::above_bytes(4 * 1024);
  auto tested = create_cuda(mixed);
  auto staged = create_cuda(two_shot_on(Protocol::staged));
  ASSERT_TRUE(staged->p2p_enabled() && tested->p2p_enabled()) << tested->p2p_disabled_reason();
  struct Shape {
    DataType dtype;
    std::int64_t count;
    Route route;  // on the tested communicator
  };
  // The last shape is 18 MiB: on copy engines, two pipelined pieces (the
  // capture takes in the transport's copy streams through the events).
  const std::array<Shape, 5> shapes{{{DataType::bf16, 600000, Route::two_shot},
                                     {DataType::f32, 1000, Route::one_shot},
                                     {DataType::f16, 40000, Route::two_shot},
                                     {DataType::bf16, 6000, Route::one_shot},
                                     {DataType::bf16, 9000008, Route::two_shot}}};
  const std::vector<Declaration> declared = message_declarations(shapes);
  tested->declare(declared);
  staged->declare(declared);

  constexpr int kSets = 5;
  const DeviceBuffers ins = message_buffers(shapes), outs = message_buffers(shapes);
  DeviceBuffers sets;  // sets[set * 5 + s]
  for (int set = 0; set < kSets; ++set) {
    for (const Shape& shape : shapes) {
      const auto inputs = every_rank_input(shape.dtype, shape.count, next_seed());
      sets.push_back(std::make_unique<DeviceBuffer>(inputs[rank()].size()));
      sets.back()->upload(inputs[rank()]);
    }
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto load_set = [&](int set) { load_input_set(ins, sets, set, stream); };
  auto calls = [&](Communicator& comm, bool check_routes) {
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      const CallResult result = comm.all_reduce(ins[s]->ptr, outs[s]->ptr, shapes[s].dtype,
                                                vector_of(shapes[s].count), stream);
      if (check_routes) {
        EXPECT_EQ(result.route, shapes[s].route) << s;
      }
    }
  };
  auto outputs = [&] { return take_outputs(outs, stream); };
  // Expected bytes of each set: eager staged calls; the eager copy-engine
  // calls must give them too.
  std::vector<std::vector<std::uint8_t>> expected;
  int eager_mismatches = 0;
  for (int set = 0; set < kSets; ++set) {
    load_set(set);
    calls(*staged, false);
    expected.push_back(outputs());
    load_set(set);
    calls(*tested, true);
    if (outputs() != expected.back()) ++eager_mismatches;
  }
  EXPECT_EQ(eager_mismatches, 0) << "eager sets whose bytes differ from staged";

  const int replays = gpus_shared(*tested) ? 20 : 60;
  const int mismatches = replay_mismatches(
      stream, ReplayCadence{replays, kSets, 3, 1, 7}, load_set, [&] { calls(*tested, true); },
      outputs, expected);
  EXPECT_EQ(mismatches, 0) << "of " << replays
                           << " replays and their eager calls, those whose bytes differ from the "
                              "eager staged run";
  CUDA_OK(cudaStreamDestroy(stream));
  staged->close();
  tested->close();
}

TEST_P(CudaTwoShotProtocol, RankThatSkipsACallMakesTheOthersRaiseTimeoutThenDeclareRecovers) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const Protocol protocol = GetParam();
  Config config = two_shot_on(protocol);
  config.timeout = std::chrono::milliseconds(1500);
  auto tested = create_cuda(config);
  auto staged = create_cuda(two_shot_on(Protocol::staged));
  ASSERT_TRUE(tested->p2p_enabled() && staged->p2p_enabled()) << tested->p2p_disabled_reason();
  // One piece, and (on copy engines) a message of two pipelined pieces:
  // the first piece's kernel gives up, the second's exits at its start,
  // and the copy streams still end.
  for (const std::int64_t n : {std::int64_t{1} << 18, (std::int64_t{8} << 20) + 24}) {
    SCOPED_TRACE("bf16 x " + std::to_string(n));
    const std::vector<Declaration> declared{
        Declaration::all_reduce("x", DataType::bf16, vector_of(n))};
    tested->declare(declared);
    staged->declare(declared);
    expect_same_bits(*staged, *tested, DataType::bf16, vector_of(n), false, protocol);

    if (rank() != size() - 1) {  // the last rank skips the call
      expect_call_abandoned_by_last_rank(*tested, n);
    }
    MPI_Barrier(test_comm());
    tested->declare(declared);  // re-creates the slabs and the region on every rank
    for (int k = 0; k < 3; ++k) {
      expect_same_bits(*staged, *tested, DataType::bf16, vector_of(n), k == 1, protocol);
    }
  }
  staged->close();
  tested->close();
}

INSTANTIATE_TEST_SUITE_P(Protocols, CudaTwoShotProtocol,
                         ::testing::Values(Protocol::dma, Protocol::lamport),
                         [](const ::testing::TestParamInfo<Protocol>& info) {
                           return std::string(to_string(info.param));
                         });

}  // namespace
}  // namespace peerplan::cuda_test
