// SPDX-License-Identifier: Apache-2.0
// CUDA graphs replayed with inputs that change between replays, on every
// P2P route: the one-shot and the two-shot all-reduce (each forced by the
// cutoffs, push and pull) and the fused all-reduce + add + RMSNorm (forced
// by fused_max_bytes; small messages on LL lines or Lamport, large ones on
// the two-shot + add/RMSNorm path), f16, bf16 and f32. One graph per route
// and dtype captures calls of several shapes: one 16-byte pack, odd pack
// counts, and counts whose two-shot last shard is short (a whole number of
// packs that is not a multiple of the world size), one of them in place.
// Before each replay every rank uploads new random data into the captured
// buffers (and poisons the outputs); every replay's outputs must match the
// float64 reference and be bit-identical on every rank. Eager calls of the
// same plans with their own new data run between replays, some of them an
// odd number, so that replays start at either epoch parity; one eager round
// on a replay's data must give the replay's bits. Element counts that no
// declaration can express (odd ones: 1, 7, 1001, ...) are captured through
// the CUDA transport itself. Replays are few where ranks share a GPU (it
// time-slices them). Any world size from 2 to 8, one GPU per rank or
// shared. Skipped (on every rank) without GPUs.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/mpi_bootstrap.hpp"
#include "support/cuda_all_reduce_check.hpp"
#include "support/cuda_test_support.hpp"
#include "transport/cuda/cuda_peer_transport.hpp"

namespace peerplan::cuda_test {
namespace {

constexpr float kEps = 1e-6f;

std::int64_t pack_of(DataType dtype) { return static_cast<std::int64_t>(16 / element_size(dtype)); }

// How many replays a graph gets: ranks time-slicing one GPU make every call
// milliseconds long.
int replays_for(bool shared) { return shared ? 3 : 12; }

// One captured call: an all-reduce of `count` elements, or a fused op of
// [rows, hidden]. Its buffers are captured, so they live as long as the graph.
struct Call {
  DataType dtype = DataType::f32;
  bool fused = false;
  std::int64_t rows = 1;
  std::int64_t hidden = 0;  // all-reduce: the element count
  bool in_place = false;    // all-reduce only (the fused op is always in place)
  std::unique_ptr<DeviceBuffer> first, second, weight;  // in + out, or inout + residual; weight
  std::vector<std::uint8_t> weight_host;

  std::int64_t count() const { return rows * hidden; }
  std::size_t bytes() const { return static_cast<std::size_t>(count()) * element_size(dtype); }
  TensorLayout layout() const {
    return fused ? TensorLayout({rows, hidden}) : TensorLayout({hidden});
  }
  std::string name() const {
    return std::string(to_string(dtype)) + (fused ? " fused " + std::to_string(rows) + "x" : " x") +
           std::to_string(hidden) + (in_place ? " in place" : "");
  }
};

Call all_reduce_call(DataType dtype, std::int64_t count, bool in_place) {
  Call c;
  c.dtype = dtype;
  c.hidden = count;
  c.in_place = in_place;
  return c;
}

// With a random weight of its own (host and device copies).
Call fused_call(DataType dtype, std::int64_t rows, std::int64_t hidden) {
  Call c;
  c.dtype = dtype;
  c.fused = true;
  c.rows = rows;
  c.hidden = hidden;
  c.weight_host = random_tensor(dtype, hidden, 77 + static_cast<std::uint64_t>(hidden), -2);
  c.weight = std::make_unique<DeviceBuffer>(c.weight_host.size());
  c.weight->upload(c.weight_host);
  return c;
}

// The all-reduces of one dtype: one pack; 1001 packs (odd, in place);
// 37 n + 1 packs (the last of n shards far shorter); 2504 n - 1 packs (the
// last shard one pack short). None is a multiple of n x pack elements.
std::vector<Call> all_reduce_calls(DataType dtype) {
  const std::int64_t v = pack_of(dtype), n = size();
  std::vector<Call> calls;
  for (std::int64_t packs : {std::int64_t{1}, std::int64_t{1001}, 37 * n + 1, 2504 * n - 1})
    calls.push_back(all_reduce_call(dtype, packs * v, packs == 1001));
  return calls;
}

// The fused shapes of one dtype, on each of the fused op's paths at the
// default protocol thresholds: one row and odd rows of an odd number of
// packs (LL lines, up to 64 KiB), 16 rows (Lamport, up to 4 MiB), and 300
// rows of an odd number of packs making more than 4 MiB (the two-shot +
// add/RMSNorm path).
std::vector<Call> fused_calls(DataType dtype) {
  std::vector<Call> calls;
  for (auto [rows, hidden] :
       {std::pair<std::int64_t, std::int64_t>{1, 4096}, {3, 4104}, {16, 7168}, {300, 7176}})
    calls.push_back(fused_call(dtype, rows, hidden));
  return calls;
}

void allocate(std::vector<Call>& calls) {
  for (Call& c : calls) {
    c.first = std::make_unique<DeviceBuffer>(c.bytes());
    c.second = std::make_unique<DeviceBuffer>(c.bytes());
  }
}

std::vector<Declaration> declarations_of(const std::vector<Call>& calls) {
  std::vector<Declaration> declared;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    const std::string name = std::string("c").append(std::to_string(i));
    declared.push_back(
        c.fused ? Declaration::fused_add_rms_norm(name, c.dtype, c.layout(), c.weight->ptr, kEps)
                : Declaration::all_reduce(name, c.dtype, c.layout()));
  }
  return declared;
}

// Host data of one round (one replay or one eager round): this rank's
// inputs and the replicated residuals, from one seed per call. Kept until
// the stream has copied them.
struct Round {
  std::vector<std::uint64_t> seeds;
  std::vector<std::vector<std::uint8_t>> inputs, residuals;
};

// Queues new inputs (and residuals) of every call on `stream` and poisons
// the all-reduces' outputs.
Round upload_new_inputs(std::span<Call> calls, cudaStream_t stream) {
  Round round;
  for (Call& c : calls) {
    round.seeds.push_back(next_seed());  // the same sequence on every rank
    round.inputs.push_back(random_tensor(c.dtype, c.count(), round.seeds.back(), rank()));
    check_cuda(cudaMemcpyAsync(c.first->ptr, round.inputs.back().data(), c.bytes(),
                               cudaMemcpyHostToDevice, stream),
               "upload");
    if (c.fused) {
      round.residuals.push_back(random_tensor(c.dtype, c.count(), round.seeds.back(), -1));
      check_cuda(cudaMemcpyAsync(c.second->ptr, round.residuals.back().data(), c.bytes(),
                                 cudaMemcpyHostToDevice, stream),
                 "upload");
    } else {
      round.residuals.emplace_back();
      if (!c.in_place)
        check_cuda(cudaMemsetAsync(c.second->ptr, 0xff, c.bytes(), stream), "poison");
    }
  }
  return round;
}

// The routes the calls must take.
Route expected_route(const Call& c, Route all_reduce_route) {
  return c.fused ? default_fused_route(c.dtype, c.layout()) : all_reduce_route;
}

// Every call once on `stream` through `comm` (captured or eager).
void make_calls(Communicator& comm, std::span<Call> calls, cudaStream_t stream, Route route) {
  for (Call& c : calls) {
    const CallResult result =
        c.fused ? comm.fused_add_rms_norm(c.first->ptr, c.second->ptr, c.weight->ptr, kEps, c.dtype,
                                          c.layout(), stream)
                : comm.all_reduce(c.first->ptr, c.in_place ? c.first->ptr : c.second->ptr, c.dtype,
                                  c.layout(), stream);
    EXPECT_EQ(result.route, expected_route(c, route)) << c.name();
  }
}

// What a round produced: per call, the output (all-reduce) or the output
// and the residual (fused op), after `stream` finished.
std::vector<std::vector<std::uint8_t>> results_of(std::span<const Call> calls,
                                                  cudaStream_t stream) {
  check_cuda(cudaStreamSynchronize(stream), "sync");
  std::vector<std::vector<std::uint8_t>> got;
  for (const Call& c : calls) {
    auto bytes = (c.fused || c.in_place ? c.first : c.second)->download(c.bytes());
    if (c.fused) {
      const auto residual = c.second->download(c.bytes());
      bytes.insert(bytes.end(), residual.begin(), residual.end());
    }
    got.push_back(std::move(bytes));
  }
  return got;
}

// Elements off the float64 reference (all-reduce: one rounding of the exact
// sum; fused: residual and output within the fused op's rounding).
std::int64_t count_wrong(const Call& c, std::uint64_t seed, const std::vector<std::uint8_t>& got,
                         std::string& first) {
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < size(); ++r) inputs.push_back(random_tensor(c.dtype, c.count(), seed, r));
  std::int64_t wrong = 0;
  auto note = [&](std::int64_t i, const std::string& what) {
    if (wrong++ == 0) first = c.name() + " element " + std::to_string(i) + ": " + what;
  };
  if (!c.fused) {
    for (std::int64_t i = 0; i < c.count(); ++i) {
      double ref = 0;
      for (const auto& input : inputs) ref += value_at(c.dtype, input, i);
      const double v = value_at(c.dtype, got, i);
      if (!(std::fabs(v - ref) <= sum_tolerance(c.dtype, ref)))
        note(i, std::to_string(v) + " vs " + std::to_string(ref));
    }
    return wrong;
  }
  const auto residual_in = random_tensor(c.dtype, c.count(), seed, -1);
  const std::vector<std::uint8_t> residual_got(got.begin() + static_cast<std::ptrdiff_t>(c.bytes()),
                                               got.end());
  std::vector<double> r_ref(static_cast<std::size_t>(c.hidden));
  for (std::int64_t row = 0; row < c.rows; ++row) {
    double squares = 0;
    for (std::int64_t j = 0; j < c.hidden; ++j) {
      const std::int64_t i = row * c.hidden + j;
      double s = value_at(c.dtype, residual_in, i);
      for (const auto& input : inputs) s += value_at(c.dtype, input, i);
      r_ref[static_cast<std::size_t>(j)] = s;
      squares += s * s;
    }
    const double inv = 1.0 / std::sqrt(squares / static_cast<double>(c.hidden) + kEps);
    for (std::int64_t j = 0; j < c.hidden; ++j) {
      const std::int64_t i = row * c.hidden + j;
      const double r = r_ref[static_cast<std::size_t>(j)];
      const double out_ref = r * inv * value_at(c.dtype, c.weight_host, j);
      const double r_got = value_at(c.dtype, residual_got, i), o_got = value_at(c.dtype, got, i);
      if (!(std::fabs(r_got - r) <= fused_tolerance(c.dtype, r)) ||
          !(std::fabs(o_got - out_ref) <= fused_tolerance(c.dtype, out_ref))) {
        note(i, "residual " + std::to_string(r_got) + " vs " + std::to_string(r) + ", out " +
                    std::to_string(o_got) + " vs " + std::to_string(out_ref));
      }
    }
  }
  return wrong;
}

// Checks one round's results: float64, and the same bytes on every rank.
void check_round(std::span<const Call> calls, const Round& round,
                 const std::vector<std::vector<std::uint8_t>>& got, const std::string& what) {
  for (std::size_t i = 0; i < calls.size(); ++i) {
    std::string first;
    EXPECT_EQ(count_wrong(calls[i], round.seeds[i], got[i], first), 0)
        << what << ", first: " << first;
    EXPECT_TRUE(same_on_every_rank(got[i]))
        << what << ", " << calls[i].name() << ": outputs differ across ranks";
  }
}

// Captures every call of `calls` once, then replays the graph with new
// inputs each time, eager calls between; see the file's comment.
void replay_with_new_inputs(Communicator& comm, std::vector<Call>& calls, Route route) {
  const int replays = replays_for(gpus_shared(comm));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {  // eager first: the plans work, and the graph starts after a call
    const Round round = upload_new_inputs(calls, stream);
    make_calls(comm, calls, stream, route);
    check_round(calls, round, results_of(calls, stream), "eager call before the capture");
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  make_calls(comm, calls, stream, route);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < replays; ++replay) {
    const std::string what = "replay " + std::to_string(replay) + " of " + std::to_string(replays);
    const Round round = upload_new_inputs(calls, stream);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    const auto by_replay = results_of(calls, stream);
    check_round(calls, round, by_replay, what);
    if (replay == 0) {
      // The same data eagerly: the same bits as the replay.
      for (std::size_t i = 0; i < calls.size(); ++i) {
        Call& c = calls[i];
        check_cuda(cudaMemcpyAsync(c.first->ptr, round.inputs[i].data(), c.bytes(),
                                   cudaMemcpyHostToDevice, stream),
                   "upload");
        if (c.fused) {
          check_cuda(cudaMemcpyAsync(c.second->ptr, round.residuals[i].data(), c.bytes(),
                                     cudaMemcpyHostToDevice, stream),
                     "upload");
        }
      }
      make_calls(comm, calls, stream, route);
      const auto by_eager = results_of(calls, stream);
      for (std::size_t i = 0; i < calls.size(); ++i)
        EXPECT_TRUE(by_eager[i] == by_replay[i])
            << calls[i].name() << ": eager and replay bits differ";
    }
    // Eager calls between replays, with new data: every call, and after
    // every other replay one more (an odd number of calls in between).
    const Round eager = upload_new_inputs(calls, stream);
    make_calls(comm, calls, stream, route);
    check_round(calls, eager, results_of(calls, stream), "eager calls after " + what);
    if (replay % 2 == 1) {
      const std::span<Call> first_call = std::span(calls).first(1);
      const Round one = upload_new_inputs(first_call, stream);
      make_calls(comm, first_call, stream, route);
      check_round(first_call, one, results_of(first_call, stream), "one eager call after " + what);
    }
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

constexpr DataType kDtypes[] = {DataType::f16, DataType::bf16, DataType::f32};

// Captures `call_all` (every call of `calls` on `stream`) once, then
// `replays` times: new inputs, a replay, its check; new inputs, the calls
// made eagerly, their check.
void capture_then_replay_and_call_eagerly(std::vector<Call>& calls, cudaStream_t stream,
                                          int replays, const std::function<void()>& call_all) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  call_all();
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < replays; ++replay) {
    const std::string what = "replay " + std::to_string(replay) + " of " + std::to_string(replays);
    const Round round = upload_new_inputs(calls, stream);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    check_round(calls, round, results_of(calls, stream), what);
    const Round eager = upload_new_inputs(calls, stream);
    call_all();
    check_round(calls, eager, results_of(calls, stream), "eager calls after " + what);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

TEST(CudaGraphReplay, AllReduceRoutesReplayNewInputsMatchingFloat64OnEveryRank) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  for (Route route : {Route::one_shot, Route::two_shot}) {
    for (TransferMode mode : {TransferMode::push, TransferMode::pull}) {
      SCOPED_TRACE(std::string(to_string(route)) + ", " + to_string(mode));
      Config config = forcing(route);
      config.transfer_mode = mode;
      auto comm = create_cuda(config);
      ASSERT_TRUE(comm->p2p_enabled()) << comm->p2p_disabled_reason();
      for (DataType dtype : kDtypes) {
        SCOPED_TRACE(to_string(dtype));
        auto calls = all_reduce_calls(dtype);
        allocate(calls);
        comm->declare(declarations_of(calls));
        replay_with_new_inputs(*comm, calls, route);
      }
      comm->close();
    }
  }
}

TEST(CudaGraphReplay, FusedReplaysNewInputsMatchingFloat64OnEveryRank) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto comm = create_cuda(forcing(Route::fused_one_shot, 16u << 20));
  ASSERT_TRUE(comm->p2p_enabled()) << comm->p2p_disabled_reason();
  for (DataType dtype : kDtypes) {
    SCOPED_TRACE(to_string(dtype));
    auto calls = fused_calls(dtype);
    allocate(calls);
    comm->declare(declarations_of(calls));
    replay_with_new_inputs(*comm, calls, Route::fused_one_shot);
  }
  comm->close();
}

TEST(CudaGraphReplay, FusedAndAllReduceInOneGraph) {
  // A decode step's shape: all-reduces and fused ops of every dtype, one
  // after the other in one graph, on one communicator (one-shot below its
  // cutoff, two-shot above, the fused route).
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config;
  config.cutoffs.one_shot_max_bytes = 64u << 10;
  config.cutoffs.two_shot_max_bytes = 64u << 20;
  config.cutoffs.two_shot_min_bytes = 0;
  config.cutoffs.fused_max_bytes = 16u << 20;
  auto comm = create_cuda(config);
  ASSERT_TRUE(comm->p2p_enabled()) << comm->p2p_disabled_reason();
  std::vector<Call> calls;
  for (DataType dtype : kDtypes) {
    auto plain = all_reduce_calls(dtype);
    auto fused = fused_calls(dtype);
    calls.push_back(std::move(fused[1]));  // 3 x 4104
    calls.push_back(std::move(plain[1]));  // 1001 packs, in place: one-shot
    calls.push_back(std::move(plain[3]));  // 2504 n - 1 packs: two-shot
  }
  allocate(calls);
  comm->declare(declarations_of(calls));
  // Which all-reduce takes which route follows from its size.
  for (const Call& c : calls) {
    if (c.fused) continue;
    const Route want =
        c.bytes() <= config.cutoffs.one_shot_max_bytes ? Route::one_shot : Route::two_shot;
    EXPECT_EQ(comm->plan_for(make_all_reduce_key(c.dtype, c.layout())).route, want) << c.name();
  }
  const int replays = replays_for(gpus_shared(*comm));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto call_all = [&] {
    for (Call& c : calls) {
      if (c.fused) {
        comm->fused_add_rms_norm(c.first->ptr, c.second->ptr, c.weight->ptr, kEps, c.dtype,
                                 c.layout(), stream);
      } else {
        comm->all_reduce(c.first->ptr, c.in_place ? c.first->ptr : c.second->ptr, c.dtype,
                         c.layout(), stream);
      }
    }
  };
  capture_then_replay_and_call_eagerly(calls, stream, replays, call_all);
  CUDA_OK(cudaStreamDestroy(stream));
  comm->close();
}

// ------------------------------------------- through the transport itself

TEST(CudaGraphReplay, OddElementCountsThroughTheTransportOnBothRoutes) {
  // Declarations admit whole 16-byte rows only; the kernels take any count
  // (a short last pack, shards that end inside a pack, empty shards where
  // the count is below the world size's). Captured through the CUDA
  // transport, push mode, one graph per route and dtype.
  PEERPLAN_SKIP_WITHOUT_GPUS();
  ensure_cuda_contexts();
  CUDA_OK(cudaSetDevice(device_of_this_rank()));
  auto boot = bootstrap::make_mpi_bootstrap(MPI_COMM_WORLD, std::chrono::milliseconds(30000));
  transport::cuda::CudaPeerTransport peer(*boot, std::chrono::milliseconds(30000), false,
                                          KernelChoices{});
  const std::int64_t n = size();
  const std::vector<std::int64_t> counts{1, 7, 13, 1001, 8 * n + 3, 4099, 65536 * n + 5};
  const std::int64_t largest = *std::max_element(counts.begin(), counts.end());
  const std::size_t largest_bytes = static_cast<std::size_t>(largest) * element_size(DataType::f32);
  peer.reserve(largest_bytes, largest_bytes);  // a Lamport region for every one-shot size
  const int replays = replays_for(any_rank_shares_a_gpu());
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (Route route : {Route::one_shot, Route::two_shot}) {
    for (DataType dtype : kDtypes) {
      SCOPED_TRACE(std::string(to_string(route)) + " " + to_string(dtype));
      std::vector<Call> calls;
      for (std::int64_t count : counts)
        calls.push_back(all_reduce_call(dtype, count, count == 1001));
      allocate(calls);
      std::vector<TensorLayout> layouts;
      for (const Call& c : calls) layouts.push_back(c.layout());
      // Each call's launch, prepared before the capture as declare does,
      // on the protocol the router would give it.
      std::vector<std::unique_ptr<transport::PlanLaunch>> launches;
      for (std::size_t i = 0; i < calls.size(); ++i) {
        const Protocol protocol =
            route == Route::two_shot ? Protocol::staged
            : peer.protocol_windows().one_shot_lamport.contains(calls[i].bytes())
                ? Protocol::lamport
                : Protocol::ll;
        launches.push_back(peer.prepare(
            {Operation::all_reduce, route, protocol, dtype, &layouts[i], calls[i].bytes()}));
      }
      auto call_all = [&] {
        for (std::size_t i = 0; i < calls.size(); ++i) {
          Call& c = calls[i];
          const transport::AllReduceArgs args{
              c.first->ptr, c.in_place ? c.first->ptr : c.second->ptr, dtype, &layouts[i], stream};
          peer.all_reduce(*launches[i], args);
        }
      };
      capture_then_replay_and_call_eagerly(calls, stream, replays, call_all);
    }
  }
  CUDA_OK(cudaStreamDestroy(stream));
  peer.close();
}

}  // namespace
}  // namespace peerplan::cuda_test
