// SPDX-License-Identifier: Apache-2.0
// The Lamport one-shot all-reduce (cuda/one_shot_lamport.cu) on real GPUs.
// Each check runs the same inputs through a communicator whose push
// one-shot uses the Lamport protocol and one that uses LL lines
// (PEERPLAN_ONE_SHOT_LAMPORT, read at create), and requires: the float64
// reference within one rounding (NaN stays NaN, infinities exact), the same
// bytes on every rank, and the same bytes from both protocols. Inputs hold
// special bit patterns: the sentinel itself (all ones, whole packs of it
// too), -0.0, +0.0, NaNs, +-Inf, and finite values whose low 16 bits are all
// ones. Covered: every dtype; through the communicator (whose
// declarations have 16-byte rows) 1 to several MiB of packs, odd pack
// counts, strided rows with padding, in == out; through the transport
// itself any element count (1, 7, 8, 9, odd: short last packs) and rows
// that end inside a pack; 200 back-to-back calls changing
// dtype and size (the region's reset across dtypes) on both protocols and
// on one communicator that mixes them by size, CUDA-graph capture + 100
// replays with new inputs and eager calls in between (50 calls and 30
// replays where ranks share a GPU), the timeout and its recovery, ranks
// that disagree on the protocol, and a tuning entry's protocol windows. Any
// world size from 2 to 8, one GPU per rank or shared. Skipped (on every
// rank) without GPUs.
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "bootstrap/mpi_bootstrap.hpp"
#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_bitwise_check.hpp"
#include "support/cuda_test_support.hpp"
#include "transport/cuda/cuda_peer_transport.hpp"
#include "transport/one_time_plan.hpp"

namespace peerplan::cuda_test {
namespace {

constexpr const char* kProtocolVariable = "PEERPLAN_ONE_SHOT_LAMPORT";
// A communicator mixing the protocols: LL lines up to this many bytes, Lamport above.
constexpr const char* kMixedThreshold = "16384..";

// A communicator whose push one-shot calls use the Lamport window
// `protocol` ("never": LL lines, "all": Lamport); every declared
// all-reduce up to 64 MiB is routed one-shot.
std::unique_ptr<Communicator> create_with_protocol(const std::string& protocol,
                                                   Config config = forcing(Route::one_shot)) {
  setenv(kProtocolVariable, protocol.c_str(), 1);
  struct Unset {
    ~Unset() { unsetenv(kProtocolVariable); }
  } unset;
  return create_cuda(std::move(config));
}

AllReduceCall through(Communicator& comm, DataType dtype, const TensorLayout& layout) {
  return [&comm, dtype, &layout](const void* in, void* out) {
    const CallResult result = comm.all_reduce(in, out, dtype, layout, nullptr);
    EXPECT_EQ(result.route, Route::one_shot) << to_string(dtype) << " " << layout.to_string();
  };
}

AllReduceCall through(transport::PeerTransport& peer, DataType dtype, const TensorLayout& layout) {
  return [&peer, dtype, &layout](const void* in, void* out) {
    const transport::AllReduceArgs args{in, out, dtype, &layout, nullptr};
    // The protocol the router would give a plan of this size.
    const std::size_t bytes = static_cast<std::size_t>(layout.numel()) * element_size(dtype);
    const Protocol protocol =
        peer.protocol_windows().one_shot_lamport.contains(bytes) ? Protocol::lamport : Protocol::ll;
    transport::all_reduce_once(peer, Route::one_shot, protocol, args);
  };
}

// The same inputs through both protocols (communicators or transports):
// float64 reference, same bytes on every rank, same bytes from Lamport and LL.
template <class Peer>
void expect_protocols_agree(Peer& ll, Peer& lamport, DataType dtype, const TensorLayout& layout,
                            bool in_place) {
  SCOPED_TRACE(std::string(to_string(dtype)) + " " + layout.to_string() +
               (in_place ? " in place" : ""));
  const auto inputs = every_rank_input(dtype, layout.numel(), next_seed());
  const auto by_lamport =
      run_all_reduce(through(lamport, dtype, layout), dtype, layout, inputs[rank()], in_place);
  const auto by_ll =
      run_all_reduce(through(ll, dtype, layout), dtype, layout, inputs[rank()], in_place);
  std::string first;
  EXPECT_EQ(count_wrong(dtype, layout, inputs, by_lamport, first), 0)
      << "Lamport, first: " << first;
  EXPECT_TRUE(same_on_every_rank(by_lamport)) << "Lamport outputs differ across ranks";
  const std::string differ = first_difference(dtype, by_lamport, by_ll);
  EXPECT_EQ(differ, "") << "Lamport and LL one-shot outputs differ";
}

constexpr std::array<DataType, 3> kDtypes{DataType::f16, DataType::bf16, DataType::f32};

TEST(CudaLamport, EveryDtypeAndCountMatchesFloat64AndTheLLOneShotBitForBit) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto ll = create_with_protocol("never");
  auto lamport = create_with_protocol("all");
  ASSERT_TRUE(ll->p2p_enabled() && lamport->p2p_enabled()) << lamport->p2p_disabled_reason();
  auto counts = [](DataType dtype) {
    // Declarations have whole 16-byte rows: counts of packs (8 or 4
    // elements) - 1, 7, 8, 9, odd ones, and an odd number of them making
    // several MiB (shorter packs: AnyElementCountAndRowThroughTheTransport).
    const std::int64_t v = static_cast<std::int64_t>(16 / element_size(dtype));
    std::vector<std::int64_t> n;
    for (std::int64_t packs : {1, 2, 3, 7, 8, 9, 1001, 4097, 65537, (3 << 16) + 1})
      n.push_back(packs * v);
    return n;
  };
  const auto declared = vector_declarations(kDtypes, counts);
  ll->declare(declared);
  lamport->declare(declared);
  for (DataType dtype : kDtypes) {
    bool in_place = false;
    for (std::int64_t n : counts(dtype)) {
      expect_protocols_agree(*ll, *lamport, dtype, vector_of(n), in_place);
      in_place = !in_place;
    }
  }
  lamport->close();
  ll->close();
}

TEST(CudaLamport, StridedPaddedRowsAndInPlace) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto ll = create_with_protocol("never");
  auto lamport = create_with_protocol("all");
  // 2-d and 3-d layouts with padding between rows (declarations need
  // 16-byte rows and strides: 8 elements of every dtype make 16 or 32 bytes).
  const std::vector<TensorLayout> layouts{
      TensorLayout::strided(std::vector<std::int64_t>{5, 24}, std::vector<std::int64_t>{32, 1}),
      TensorLayout::strided(std::vector<std::int64_t>{7, 40}, std::vector<std::int64_t>{48, 1}),
      TensorLayout::strided(std::vector<std::int64_t>{3, 4, 8},
                            std::vector<std::int64_t>{80, 16, 1}),
      TensorLayout::strided(std::vector<std::int64_t>{300, 1000},
                            std::vector<std::int64_t>{1032, 1})};
  std::vector<Declaration> declared;
  for (DataType dtype : kDtypes) {
    for (std::size_t k = 0; k < layouts.size(); ++k) {
      declared.push_back(Declaration::all_reduce(
          std::string(to_string(dtype)) + "_" + std::to_string(k), dtype, layouts[k]));
    }
  }
  ll->declare(declared);
  lamport->declare(declared);
  for (DataType dtype : kDtypes) {
    for (const auto& layout : layouts) {
      for (bool in_place : {false, true})
        expect_protocols_agree(*ll, *lamport, dtype, layout, in_place);
    }
  }
  lamport->close();
  ll->close();
}

TEST(CudaLamport, AnyElementCountAndRowThroughTheTransport) {
  // The kernels take any count and row length; declarations admit whole
  // 16-byte rows only, so the short last packs (zeros past the end on the
  // sender, a partial store on the receiver) are reached through the
  // transport itself.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  int devices = 0;
  CUDA_OK(cudaGetDeviceCount(&devices));
  CUDA_OK(cudaSetDevice(rank() % devices));
  auto boot = bootstrap::make_mpi_bootstrap(MPI_COMM_WORLD, std::chrono::milliseconds(30000));
  auto make = [&](Window lamport) {
    KernelChoices kernels;
    kernels.one_shot_lamport = lamport;
    auto peer = std::make_unique<transport::cuda::CudaPeerTransport>(
        *boot, std::chrono::milliseconds(10000), false, kernels);
    const std::size_t capacity = (std::size_t{3} << 20) + 64;
    peer->reserve(capacity, lamport.is_never() ? 0 : capacity);
    return peer;
  };
  auto ll = make(Window::never());
  auto lamport = make(Window::every_size());
  for (DataType dtype : kDtypes) {
    const std::int64_t several_mib =
        static_cast<std::int64_t>((std::size_t{3} << 20) / element_size(dtype)) - 3;
    bool in_place = false;
    for (std::int64_t n :
         {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{5}, std::int64_t{7},
          std::int64_t{8}, std::int64_t{9}, std::int64_t{13}, std::int64_t{17}, std::int64_t{1001},
          std::int64_t{4099}, std::int64_t{65537}, several_mib}) {
      expect_protocols_agree(*ll, *lamport, dtype, vector_of(n), in_place);
      in_place = !in_place;
    }
    // Rows of 13 and 3 elements: packs straddle rows and padding.
    for (const auto& layout :
         {TensorLayout::strided(std::vector<std::int64_t>{7, 13}, std::vector<std::int64_t>{16, 1}),
          TensorLayout::strided(std::vector<std::int64_t>{3, 5, 3},
                                std::vector<std::int64_t>{40, 8, 1})}) {
      for (bool place : {false, true}) expect_protocols_agree(*ll, *lamport, dtype, layout, place);
    }
  }
  lamport->close();
  ll->close();
}

struct Shape {
  DataType dtype;
  std::int64_t count;
};

// Byte sizes on both sides of kMixedThreshold (16384, itself Lamport).
constexpr std::array<Shape, 7> kShapes{{{DataType::bf16, 1000},   // 2000 B
                                        {DataType::f32, 70000},   // 280000 B
                                        {DataType::f16, 8},       // 16 B
                                        {DataType::bf16, 50008},  // 100016 B
                                        {DataType::f32, 4096},    // 16384 B
                                        {DataType::f16, 8200},    // 16400 B
                                        {DataType::bf16, 24}}};   // 48 B

TEST(CudaLamport, TwoHundredBackToBackCallsChangingDtypeSizeAndProtocol) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto ll = create_with_protocol("never");
  auto lamport = create_with_protocol("all");
  auto mixed = create_with_protocol(kMixedThreshold);  // Lamport and LL calls interleaved
  const auto declared = message_declarations(kShapes);
  for (Communicator* c : {ll.get(), lamport.get(), mixed.get()}) c->declare(declared);

  constexpr int kSets = 3;
  // Ranks time-slicing one GPU make every call milliseconds long: fewer there.
  const int call_count = gpus_shared(*ll) ? 50 : 200;
  // inputs[s][set]: every rank's host input; device copies of this rank's.
  std::vector<std::vector<std::vector<std::vector<std::uint8_t>>>> inputs(kShapes.size());
  std::vector<std::unique_ptr<DeviceBuffer>> device_inputs;
  for (std::size_t s = 0; s < kShapes.size(); ++s) {
    for (int set = 0; set < kSets; ++set) {
      inputs[s].push_back(every_rank_input(kShapes[s].dtype, kShapes[s].count, next_seed()));
      device_inputs.push_back(std::make_unique<DeviceBuffer>(inputs[s][set][rank()].size()));
      device_inputs.back()->upload(inputs[s][set][rank()]);
    }
  }
  // An irregular order: Lamport-Lamport, LL-LL, Lamport-LL and LL-Lamport
  // neighbours on the mixed communicator, every dtype after every other.
  auto shape_of = [](int k) { return static_cast<std::size_t>((k * 3 + k / 7) % 7); };
  std::vector<std::unique_ptr<DeviceBuffer>> outputs;
  for (int k = 0; k < call_count; ++k) {
    const Shape& shape = kShapes[shape_of(k)];
    outputs.push_back(std::make_unique<DeviceBuffer>(shape.count * element_size(shape.dtype)));
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto run_all = [&](Communicator& comm) {
    for (auto& out : outputs) out->poison();
    check_cuda(cudaDeviceSynchronize(), "poison");  // before the non-blocking stream writes
    for (int k = 0; k < call_count; ++k) {
      const std::size_t s = shape_of(k);
      const DeviceBuffer& in = *device_inputs[s * kSets + k % kSets];
      const auto result = comm.all_reduce(in.ptr, outputs[k]->ptr, kShapes[s].dtype,
                                          vector_of(kShapes[s].count), stream);
      EXPECT_EQ(result.route, Route::one_shot) << "call " << k;
    }
    check_cuda(cudaStreamSynchronize(stream), "the back-to-back calls");
    std::vector<std::vector<std::uint8_t>> got;
    for (auto& out : outputs) got.push_back(out->download(out->bytes));
    return got;
  };
  const auto by_ll = run_all(*ll);
  const auto by_lamport = run_all(*lamport);
  const auto by_mixed = run_all(*mixed);
  std::int64_t wrong_calls = 0, differing = 0;
  std::string first;
  for (int k = 0; k < call_count; ++k) {
    const std::size_t s = shape_of(k);
    const DataType dtype = kShapes[s].dtype;
    std::string first_element;
    if (count_wrong(dtype, vector_of(kShapes[s].count), inputs[s][k % kSets], by_lamport[k],
                    first_element) != 0 &&
        wrong_calls++ == 0) {
      first = "call " + std::to_string(k) + ", " + first_element;
    }
    const std::string a = first_difference(dtype, by_lamport[k], by_ll[k]);
    const std::string b = first_difference(dtype, by_mixed[k], by_ll[k]);
    if ((!a.empty() || !b.empty()) && differing++ == 0) {
      ADD_FAILURE() << "call " << k << " (" << to_string(dtype) << " x" << kShapes[s].count
                    << "): Lamport vs LL: " << a << "; mixed vs LL: " << b;
    }
    EXPECT_TRUE(same_on_every_rank(by_lamport[k])) << "call " << k;
    EXPECT_TRUE(same_on_every_rank(by_mixed[k])) << "call " << k;
  }
  EXPECT_EQ(wrong_calls, 0) << "Lamport calls off the float64 reference; first: " << first;
  EXPECT_EQ(differing, 0) << "calls whose protocols disagree";
  CUDA_OK(cudaStreamDestroy(stream));
  for (Communicator* c : {mixed.get(), lamport.get(), ll.get()}) c->close();
}

TEST(CudaLamport, GraphCaptureAndReplaysWithNewInputsAndEagerCallsBetween) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto ll = create_with_protocol("never");
  // Lamport for the two small calls, LL for the large one, in one graph.
  auto mixed = create_with_protocol(kMixedThreshold);
  // Without P2P the calls would go to the fallback, which (MPI) refuses capture.
  ASSERT_TRUE(ll->p2p_enabled() && mixed->p2p_enabled()) << mixed->p2p_disabled_reason();
  const std::array<Shape, 3> shapes{
      {{DataType::bf16, 4096}, {DataType::f32, 1004}, {DataType::f16, 300000}}};
  const std::vector<Declaration> declared = message_declarations(shapes);
  ll->declare(declared);
  mixed->declare(declared);

  constexpr int kSets = 6;
  const DeviceBuffers ins = message_buffers(shapes), outs = message_buffers(shapes);
  DeviceBuffers sets;  // sets[set * 3 + s]
  std::vector<std::vector<std::vector<std::vector<std::uint8_t>>>> host(kSets);
  for (int set = 0; set < kSets; ++set) {
    for (const Shape& shape : shapes) {
      host[set].push_back(every_rank_input(shape.dtype, shape.count, next_seed()));
      sets.push_back(std::make_unique<DeviceBuffer>(host[set].back()[rank()].size()));
      sets.back()->upload(host[set].back()[rank()]);
    }
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto load_set = [&](int set) { load_input_set(ins, sets, set, stream); };
  auto calls = [&](Communicator& comm) {
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      comm.all_reduce(ins[s]->ptr, outs[s]->ptr, shapes[s].dtype, vector_of(shapes[s].count),
                      stream);
    }
  };
  auto outputs = [&] { return take_outputs(outs, stream); };
  // Expected bytes of each set: eager LL calls. The mixed communicator's
  // eager calls must give them too, and lie within the float64 reference.
  std::vector<std::vector<std::uint8_t>> expected;
  std::int64_t eager_mismatches = 0, wrong = 0;
  std::string first;
  for (int set = 0; set < kSets; ++set) {
    load_set(set);
    calls(*ll);
    expected.push_back(outputs());
    load_set(set);
    calls(*mixed);
    const auto got = outputs();
    if (got != expected.back()) ++eager_mismatches;
    std::size_t offset = 0;
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      const std::size_t bytes = shapes[s].count * element_size(shapes[s].dtype);
      const std::vector<std::uint8_t> part(got.begin() + offset, got.begin() + offset + bytes);
      wrong += count_wrong(shapes[s].dtype, vector_of(shapes[s].count), host[set][s], part, first);
      offset += bytes;
    }
    EXPECT_TRUE(same_on_every_rank(got));
  }
  EXPECT_EQ(eager_mismatches, 0) << "eager sets whose mixed-protocol bytes differ from LL's";
  EXPECT_EQ(wrong, 0) << "first: " << first;

  // Ranks time-slicing one GPU make every replay milliseconds long: fewer
  // there, still with eager calls (single and double) in between.
  const int replays = gpus_shared(*mixed) ? 30 : 100;
  const int mismatches = replay_mismatches(
      stream, ReplayCadence{replays, kSets, 5, 3, 10}, load_set, [&] { calls(*mixed); }, outputs,
      expected);
  EXPECT_EQ(mismatches, 0) << "of " << replays
                           << " replays and their eager calls, those whose bytes differ from the "
                              "eager LL run";
  CUDA_OK(cudaStreamDestroy(stream));
  mixed->close();
  ll->close();
}

TEST(CudaLamport, RankThatSkipsACallMakesTheOthersRaiseTimeoutThenDeclareRecovers) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config = forcing(Route::one_shot);
  config.timeout = std::chrono::milliseconds(1500);
  auto comm = create_with_protocol("all", config);
  auto ll = create_with_protocol("never");
  ASSERT_TRUE(comm->p2p_enabled() && ll->p2p_enabled()) << comm->p2p_disabled_reason();
  const std::int64_t n = 8192, small = 12;
  const std::vector<Declaration> declared{
      Declaration::all_reduce("x", DataType::bf16, vector_of(n)),
      Declaration::all_reduce("y", DataType::f32, vector_of(small))};
  comm->declare(declared);
  ll->declare(declared);
  expect_protocols_agree(*ll, *comm, DataType::bf16, vector_of(n), false);

  if (rank() != size() - 1) {  // the last rank skips the call
    expect_call_abandoned_by_last_rank(*comm, n);
  }
  MPI_Barrier(test_comm());
  comm->declare(declared);  // re-creates the slabs, sentinel region included, on every rank
  // Both parities of the new region, two dtypes, each against LL.
  for (int k = 0; k < 4; ++k) {
    if (k % 2 == 0)
      expect_protocols_agree(*ll, *comm, DataType::bf16, vector_of(n), false);
    else
      expect_protocols_agree(*ll, *comm, DataType::f32, vector_of(small), true);
  }
  ll->close();
  comm->close();
}

TEST(CudaLamport, RanksThatDisagreeOnTheProtocolFailCreateTogether) {
  // Checked with the rest of the config at create, on every backend
  // (communicator/card_decisions.cpp), before any kernel could wait for
  // a peer that runs the other protocol.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  std::string message = "create() succeeded";
  try {
    create_with_protocol(rank() == 0 ? "never" : "all");
  } catch (const Mismatch& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(kProtocolVariable), std::string::npos) << message;
  EXPECT_NE(message.find("kernels.one_shot_lamport"), std::string::npos) << message;
  EXPECT_NE(message.find("set the same value on every rank"), std::string::npos) << message;

  message = "create() succeeded";
  try {
    create_with_protocol("fastest");
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("PEERPLAN_ONE_SHOT_LAMPORT=\"fastest\""), std::string::npos) << message;

  auto comm = create_with_protocol("all");  // agreeing ranks still work afterwards
  EXPECT_TRUE(comm->p2p_enabled());
  comm->close();
}

// A tuning file entry's protocol windows move the one-shot's LL/Lamport
// threshold and the fused op's windows (routing/protocol_tuning.hpp), and
// an explicit PEERPLAN_ONE_SHOT_LAMPORT wins over the file. Tuning files
// are never applied where ranks share a GPU (their times would be time
// slices), so this needs a GPU per rank.
TEST(CudaLamport, ATuningEntrysProtocolWindowsMoveThePlansProtocols) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto probe = create_cuda(forcing(Route::one_shot));
  const std::string fingerprint = probe->topology_fingerprint();
  const bool shared = gpus_shared(*probe);
  probe->close();
  PEERPLAN_MPI_SKIP_IF(shared, "ranks share a GPU: tuning files are not applied then");
  const std::string path = "/tmp/peerplan_cuda_tuning_" + std::to_string(::getpid()) + ".tune";
  std::ofstream(path) << "peerplan-tuning 1\n[entry]\nfingerprint = " << fingerprint
                      << "\none_shot_lamport = 4K..\nfused_lamport = never\nfused_ll = 8M\n";
  const auto ar = [](std::int64_t elements) {
    return Declaration::all_reduce("ar", DataType::bf16, TensorLayout{elements});
  };
  static float weight[7168];
  const auto fused =
      Declaration::fused_add_rms_norm("f", DataType::bf16, TensorLayout{64, 7168}, weight, 1e-6f);
  Config config = forcing(Route::one_shot);
  config.cutoffs.fused_max_bytes = 64u << 20;
  config.tuning_file = path;
  {
    auto comm = create_cuda(config);
    comm->declare(std::vector<Declaration>{ar(1024), ar(4096), fused});
    EXPECT_EQ(comm->plan_for(make_key(ar(1024))).protocol, Protocol::ll) << "2 KiB <= 4 KiB";
    EXPECT_EQ(comm->plan_for(make_key(ar(4096))).protocol, Protocol::lamport)
        << "8 KiB: Lamport above the file's 4 KiB (LL up to 64 KiB by default)";
    const PlanInfo f = comm->plan_for(make_key(fused));
    EXPECT_EQ(f.route, Route::fused_one_shot);
    EXPECT_EQ(f.protocol, Protocol::ll) << "896 KiB: Lamport by default, LL with the window closed";
    comm->close();
  }
  {
    setenv(kProtocolVariable, "never", 1);
    auto comm = create_cuda(config);
    unsetenv(kProtocolVariable);
    comm->declare(std::vector<Declaration>{ar(4096)});
    EXPECT_EQ(comm->plan_for(make_key(ar(4096))).protocol, Protocol::ll)
        << "an explicit protocol wins over the file";
    comm->close();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace peerplan::cuda_test
