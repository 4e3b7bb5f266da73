// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's teardown on real GPUs (docs/design.md, Bounded waits; CUDA
// graphs): close() and the destructor stay bounded by the timeout while a CUDA
// graph that captured a fallback (NCCL) call or a P2P call still exists, a
// graph destroyed before close() gives a clean close (no WARN), and a rank that
// skips close() does not hold the others. The MPI fallback (ranks sharing a
// GPU, or Config::fallback = mpi) cannot be captured: the tests of graphs of
// fallback calls skip there, and its own tests check that close() and the
// destructor after eager fallback calls are bounded and clean. Also bounded:
// a declare() that re-creates the P2P slabs and deregister_buffers() after a
// fallback call a peer skipped (every rank raises Timeout); and the NCCL
// fallback keeps the scratch buffer a graph replays into when a larger eager
// call grows it. Any world size from 2 to 8, one GPU per rank or shared.
// Skipped (on every rank) without GPUs.
#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <thread>

#include "bootstrap/mpi_bootstrap.hpp"
#include "support/cuda_test_support.hpp"
#include "transport/cuda/nccl_fallback.hpp"
#include "transport/cuda/parked_nccl.hpp"

namespace peerplan::cuda_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using transport::cuda::parked_nccl_communicators;
using transport::cuda::release_parked_nccl_communicators;

constexpr milliseconds kTimeout{3000};
// close() may wait the timeout for a missing peer, plus 2 s for GPU work to
// exit and 2 s for an NCCL abort: more than this is a wait without a bound.
constexpr milliseconds kBound = kTimeout + milliseconds(5000);
constexpr DataType kType = DataType::bf16;
constexpr std::int64_t kCount = 4096;
// A strided fallback call goes through the fallback's scratch buffer.
constexpr std::int64_t kRows = 8, kCols = 256, kRowStride = 320;

Config teardown_config() {
  Config config;
  config.timeout = kTimeout;
  config.log_level = LogLevel::warn;
  return config;
}

TensorLayout strided_layout(std::int64_t rows = kRows) {
  const std::int64_t shape[] = {rows, kCols};
  const std::int64_t strides[] = {kRowStride, 1};
  return TensorLayout::strided(shape, strides);
}

std::int64_t milliseconds_of(Clock::duration d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

// `logical` (rows x kCols) laid out with kRowStride, padding zeros.
std::vector<std::uint8_t> to_strided(const std::vector<std::uint8_t>& logical,
                                     std::int64_t rows = kRows) {
  std::vector<std::uint8_t> strided(rows * kRowStride * 2, 0);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(&strided[r * kRowStride * 2], &logical[r * kCols * 2], kCols * 2);
  return strided;
}

std::vector<std::uint8_t> from_strided(const std::vector<std::uint8_t>& strided,
                                       std::int64_t rows = kRows) {
  std::vector<std::uint8_t> logical(rows * kCols * 2);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(&logical[r * kCols * 2], &strided[r * kRowStride * 2], kCols * 2);
  return logical;
}

// The tests of graphs that captured fallback calls need the NCCL fallback:
// the MPI fallback runs on the host and refuses capture (InvalidUsage).
#define SKIP_UNLESS_THE_FALLBACK_IS_NCCL(comm)                                             \
  PEERPLAN_MPI_SKIP_IF((comm).fallback() != Fallback::nccl,                                \
                       std::string("the fallback is ") + to_string((comm).fallback()) +    \
                           " (ranks share a GPU, or no NCCL in this build), which cannot " \
                           "be captured in a CUDA graph: no graph of fallback calls can "  \
                           "outlive close() (CudaTeardownMpiFallback covers its teardown)")

// Elements of `got` (logical order, `count` of them) that are not the sum
// of every rank's random_tensor(kType, count, seed, rank), as `route`
// rounds it (a fallback rounds its partial sums too).
std::int64_t wrong_sums(const std::vector<std::uint8_t>& got, std::int64_t count,
                        std::uint64_t seed, Route route) {
  std::vector<std::vector<std::uint8_t>> inputs;
  for (int r = 0; r < size(); ++r) inputs.push_back(random_tensor(kType, count, seed, r));
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    double ref = 0, magnitudes = 0;
    for (int r = 0; r < size(); ++r) {
      ref += value_at(kType, inputs[r], i);
      magnitudes += std::fabs(value_at(kType, inputs[r], i));
    }
    const double tolerance = route == Route::fallback
                                 ? fallback_sum_tolerance(kType, ref, magnitudes, size())
                                 : sum_tolerance(kType, ref);
    if (!(std::fabs(value_at(kType, got, i) - ref) <= tolerance)) ++wrong;
  }
  return wrong;
}

// Calls captured in one CUDA graph on a stream of their own, instantiated
// and replayed once, their results checked. Declared shapes take P2P,
// others the fallback. Destroyed by destroy() (after close(), in the tests
// that keep it alive).
class CapturedCalls {
 public:
  CapturedCalls(Communicator& comm, bool with_strided, Route expected)
      : in_(kCount * 2),
        out_(kCount * 2),
        strided_in_(kRows * kRowStride * 2),
        strided_out_(kRows * kRowStride * 2),
        with_strided_(with_strided),
        expected_(expected) {
    in_.upload(random_tensor(kType, kCount, kSeed, rank()));
    strided_in_.upload(to_strided(random_tensor(kType, kRows * kCols, kSeed + 1, rank())));
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    // Eager first: NCCL connects the ranks at a first call, and a strided
    // fallback call sizes the scratch buffer (it cannot grow in a capture).
    calls(comm, expected);
    check_cuda(cudaStreamSynchronize(stream_), "sync");
    check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), "begin capture");
    calls(comm, expected);
    check_cuda(cudaStreamEndCapture(stream_, &graph_), "end capture");
    check_cuda(cudaGraphInstantiate(&exec_, graph_, 0), "instantiate");
    out_.poison();
    strided_out_.poison();
    check_cuda(cudaGraphLaunch(exec_, stream_), "replay");
    check_cuda(cudaStreamSynchronize(stream_), "sync");
  }
  ~CapturedCalls() { destroy(); }
  CapturedCalls(const CapturedCalls&) = delete;
  CapturedCalls& operator=(const CapturedCalls&) = delete;

  // Wrong elements of the replay's results.
  std::int64_t wrong() const {
    std::int64_t wrong = wrong_sums(out_.download(kCount * 2), kCount, kSeed, expected_);
    if (with_strided_) {
      wrong += wrong_sums(from_strided(strided_out_.download(strided_out_.bytes)), kRows * kCols,
                          kSeed + 1, Route::fallback);
    }
    return wrong;
  }

  void destroy() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    exec_ = nullptr;
    graph_ = nullptr;
    stream_ = nullptr;
  }

 private:
  static constexpr std::uint64_t kSeed = 4242;

  void calls(Communicator& comm, Route expected) {
    EXPECT_EQ(comm.all_reduce(in_.ptr, out_.ptr, kType, TensorLayout({kCount}), stream_).route,
              expected);
    if (with_strided_) {
      EXPECT_EQ(comm.all_reduce(strided_in_.ptr, strided_out_.ptr, kType, strided_layout(), stream_)
                    .route,
                Route::fallback);
    }
  }

  DeviceBuffer in_, out_, strided_in_, strided_out_;
  bool with_strided_;
  Route expected_;  // of the contiguous call
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// What a later create() or close() does for the communicators close() left
// open, once their graphs are gone; CUDA runs a destroyed graph's
// destructors asynchronously, so this polls for a while.
bool released_back_to(std::size_t parked) {
  const auto start = Clock::now();
  while (parked_nccl_communicators() > parked && Clock::now() - start < std::chrono::seconds(10)) {
    release_parked_nccl_communicators();
    std::this_thread::sleep_for(milliseconds(10));
  }
  return parked_nccl_communicators() == parked;
}

// (a) The reported hang: close() with a live graph that captured fallback
// calls (contiguous and strided) must return in time on every rank, with a
// WARN naming the cause; the NCCL communicator is left open (NCCL would wait
// for the graph) and released once the graph is destroyed.
// Closes `comm`, expecting it back within kBound; returns what it logged.
std::string close_in_time(Communicator& comm) {
  testing::internal::CaptureStderr();
  const auto start = Clock::now();
  comm.close();
  const auto took = Clock::now() - start;
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_LT(took, kBound) << "close() took " << milliseconds_of(took) << " ms";
  return log;
}

TEST(CudaTeardown, CloseReturnsInTimeWhileAGraphOfFallbackCallsExists) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const std::size_t parked = parked_nccl_communicators();
  auto comm = create_cuda(teardown_config());  // nothing declared: every call is a fallback
  SKIP_UNLESS_THE_FALLBACK_IS_NCCL(*comm);
  CapturedCalls graph(*comm, /*with_strided=*/true, Route::fallback);
  EXPECT_EQ(graph.wrong(), 0) << "replay of the captured fallback calls";

  const std::string log = close_in_time(*comm);
  EXPECT_NE(log.find("CUDA graph(s) that captured a fallback (NCCL) call still exist"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("Destroy CUDA graphs before close()"), std::string::npos) << log;
  EXPECT_EQ(parked_nccl_communicators(), parked + 1);

  graph.destroy();
  EXPECT_TRUE(released_back_to(parked))
      << "the NCCL communicator was not released after its graph was destroyed";
}

// The destructor (no close(), e.g. while an exception unwinds) aborts NCCL,
// which would wait for the graph just the same: it must not hang either.
TEST(CudaTeardown, DestroyWithoutCloseReturnsInTimeWhileAGraphOfAFallbackCallExists) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const std::size_t parked = parked_nccl_communicators();
  auto comm = create_cuda(teardown_config());
  SKIP_UNLESS_THE_FALLBACK_IS_NCCL(*comm);
  CapturedCalls graph(*comm, /*with_strided=*/false, Route::fallback);
  EXPECT_EQ(graph.wrong(), 0);
  const auto start = Clock::now();
  comm.reset();
  const auto took = Clock::now() - start;
  EXPECT_LT(took, kBound) << "the destructor took " << milliseconds_of(took) << " ms";
  EXPECT_EQ(parked_nccl_communicators(), parked + 1);
  graph.destroy();
  EXPECT_TRUE(released_back_to(parked));
}

// (b) A live graph of a declared (P2P) call: NCCL has nothing captured, so
// close() finalizes it cleanly and returns in time, without a WARN.
TEST(CudaTeardown, CloseReturnsInTimeWhileAGraphOfAP2PCallExists) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const std::size_t parked = parked_nccl_communicators();
  auto comm = create_cuda(teardown_config());
  PEERPLAN_MPI_SKIP_IF(!comm->p2p_enabled(), "P2P is disabled: " + comm->p2p_disabled_reason());
  comm->declare(
      std::vector<Declaration>{Declaration::all_reduce("x", kType, TensorLayout({kCount}))});
  CapturedCalls graph(*comm, /*with_strided=*/false, Route::one_shot);
  EXPECT_EQ(graph.wrong(), 0) << "replay of the captured P2P call";

  const std::string log = close_in_time(*comm);
  EXPECT_EQ(log.find("WARN"), std::string::npos) << log;
  EXPECT_EQ(parked_nccl_communicators(), parked);
  graph.destroy();  // never replayed after close(): its P2P buffers are gone
}

// (c) The safe order: destroy the graphs, then close(): NCCL finalizes
// cleanly, nothing is left open, no WARN.
TEST(CudaTeardown, GraphDestroyedBeforeCloseGivesACleanClose) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  const std::size_t parked = parked_nccl_communicators();
  auto comm = create_cuda(teardown_config());
  SKIP_UNLESS_THE_FALLBACK_IS_NCCL(*comm);
  CapturedCalls graph(*comm, /*with_strided=*/true, Route::fallback);
  EXPECT_EQ(graph.wrong(), 0);
  graph.destroy();

  const std::string log = close_in_time(*comm);
  EXPECT_EQ(log.find("WARN"), std::string::npos) << log;
  EXPECT_EQ(parked_nccl_communicators(), parked);
}

// The MPI fallback (ranks sharing a GPU, or asked for): eager fallback calls
// (contiguous and strided, through its pinned and device staging buffers),
// checked, then close() with a live graph of a P2P call returns in time and
// without a WARN: the fallback has nothing captured and nothing queued.
TEST(CudaTeardownMpiFallback, CloseAfterFallbackCallsWithAGraphOfAP2PCallAliveIsCleanAndInTime) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config = teardown_config();
  config.fallback = Fallback::mpi;
  auto comm = create_cuda(config);
  ASSERT_EQ(comm->fallback(), Fallback::mpi);
  PEERPLAN_MPI_SKIP_IF(!comm->p2p_enabled(), "P2P is disabled: " + comm->p2p_disabled_reason());
  comm->declare(
      std::vector<Declaration>{Declaration::all_reduce("x", kType, TensorLayout({kCount}))});
  {
    DeviceBuffer in(kCount * 4), out(kCount * 4), strided_in(kRows * kRowStride * 2),
        strided_out(kRows * kRowStride * 2);
    // Undeclared: bf16 x 2 kCount, and the strided rows.
    in.upload(random_tensor(kType, 2 * kCount, 61, rank()));
    strided_in.upload(to_strided(random_tensor(kType, kRows * kCols, 62, rank())));
    EXPECT_EQ(comm->all_reduce(in.ptr, out.ptr, kType, TensorLayout({2 * kCount}), nullptr).route,
              Route::fallback);
    EXPECT_EQ(
        comm->all_reduce(strided_in.ptr, strided_out.ptr, kType, strided_layout(), nullptr).route,
        Route::fallback);
    check_cuda(cudaDeviceSynchronize(), "sync");
    EXPECT_EQ(wrong_sums(out.download(kCount * 4), 2 * kCount, 61, Route::fallback), 0)
        << "contiguous fallback call";
    EXPECT_EQ(wrong_sums(from_strided(strided_out.download(strided_out.bytes)), kRows * kCols, 62,
                         Route::fallback),
              0)
        << "strided fallback call";
  }
  CapturedCalls graph(*comm, /*with_strided=*/false, Route::one_shot);
  EXPECT_EQ(graph.wrong(), 0) << "replay of the captured P2P call";

  const std::string log = close_in_time(*comm);
  EXPECT_EQ(log.find("WARN"), std::string::npos) << log;
  graph.destroy();  // never replayed after close(): its P2P buffers are gone
}

// The MPI fallback's destructor without close() (e.g. while an exception
// unwinds), right after a fallback call on a stream of its own: bounded.
TEST(CudaTeardownMpiFallback, DestroyWithoutCloseAfterAFallbackCallReturnsInTime) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  Config config = teardown_config();
  config.fallback = Fallback::mpi;
  auto comm = create_cuda(config);
  ASSERT_EQ(comm->fallback(), Fallback::mpi);
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceBuffer in(kCount * 2), out(kCount * 2);
  in.upload(random_tensor(kType, kCount, 63, rank()));
  EXPECT_EQ(comm->all_reduce(in.ptr, out.ptr, kType, TensorLayout({kCount}), stream).route,
            Route::fallback);
  const auto start = Clock::now();
  comm.reset();
  const auto took = Clock::now() - start;
  EXPECT_LT(took, kBound) << "the destructor took " << milliseconds_of(took) << " ms";
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(wrong_sums(out.download(kCount * 2), kCount, 63, Route::fallback), 0)
      << "the fallback call's result, queued before the destructor";
  CUDA_OK(cudaStreamDestroy(stream));
}

// A fallback (NCCL) call that rank 0 makes and the other ranks do not
// (rank 1 passes a null pointer and gets InvalidArgument, as in the report):
// NCCL's kernel then waits on rank 0's GPU until close() aborts NCCL. The
// buffers, the stream and the call outlive close(): freeing them before would
// wait for that kernel.
class SkippedFallbackCall {
 public:
  static constexpr DataType kCallType = DataType::f32;
  // The size of NCCL's small warm-up at create: NCCL has connected the ranks
  // for it, so rank 0's call does not wait on the host for the others.
  static constexpr std::int64_t kCallCount = 64;

  explicit SkippedFallbackCall(Communicator& comm) : in_(kCallCount * 4), out_(kCallCount * 4) {
    in_.upload(random_tensor(kCallType, kCallCount, 71, rank()));
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    EXPECT_EQ(call(comm, in_.ptr).route, Route::fallback);  // every rank: it completes
    check_cuda(cudaStreamSynchronize(stream_), "sync");
    if (rank() == 0) {
      EXPECT_EQ(call(comm, in_.ptr).route, Route::fallback);  // never completes
    } else {
      EXPECT_THROW(call(comm, nullptr), InvalidArgument);
    }
  }
  // After close() only: NCCL's kernel has been aborted by then.
  ~SkippedFallbackCall() { cudaStreamDestroy(stream_); }
  SkippedFallbackCall(const SkippedFallbackCall&) = delete;
  SkippedFallbackCall& operator=(const SkippedFallbackCall&) = delete;

 private:
  CallResult call(Communicator& comm, const void* in) {
    return comm.all_reduce(in, out_.ptr, kCallType, TensorLayout({kCallCount}), stream_);
  }

  DeviceBuffer in_, out_;
  cudaStream_t stream_ = nullptr;
};

// `step` (a collective call) must raise Timeout on every rank, within the
// timeout + 2 s for the device wait and some room for the exchanges, naming
// rank 0 as the rank whose GPU work did not end; then close() is bounded.
template <class Step>
void expect_every_rank_times_out(Communicator& comm, const char* what, Step&& step) {
  const auto start = Clock::now();
  std::string message;
  try {
    step();
    ADD_FAILURE() << what << " did not raise Timeout";
  } catch (const Timeout& e) {
    message = e.what();
  }
  const auto took = Clock::now() - start;
  EXPECT_LT(took, kBound) << what << " took " << milliseconds_of(took) << " ms";
  EXPECT_NE(message.find("GPU work did not end (rank 0:"), std::string::npos) << message;
  EXPECT_NE(message.find("close() the communicator"), std::string::npos) << message;
  EXPECT_THROW(step(), InvalidUsage) << "the communicator is broken after the Timeout";
  close_in_time(comm);  // aborts NCCL on rank 0, which ends its kernel
  MPI_Barrier(test_comm());
}

// The reported hang: rank 0 waited in cudaDeviceSynchronize for ever, before
// re-creating the P2P slabs, while the others timed out at the next barrier.
TEST(CudaTeardown, DeclareAfterASkippedFallbackCallTimesOutOnEveryRank) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto comm = create_cuda(teardown_config());
  SKIP_UNLESS_THE_FALLBACK_IS_NCCL(*comm);
  PEERPLAN_MPI_SKIP_IF(!comm->p2p_enabled(), "P2P is disabled: " + comm->p2p_disabled_reason());
  comm->declare(
      std::vector<Declaration>{Declaration::all_reduce("x", kType, TensorLayout({kCount}))});
  SkippedFallbackCall skipped(*comm);
  // A larger plan: the slabs are re-created.
  const std::vector<Declaration> larger{
      Declaration::all_reduce("x", kType, TensorLayout({kCount})),
      Declaration::all_reduce("y", kType, TensorLayout({4 * kCount}))};
  expect_every_rank_times_out(*comm, "declare", [&] { comm->declare(larger); });
}

TEST(CudaTeardown, DeregisterAfterASkippedFallbackCallTimesOutOnEveryRank) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto comm = create_cuda(teardown_config());
  SKIP_UNLESS_THE_FALLBACK_IS_NCCL(*comm);
  PEERPLAN_MPI_SKIP_IF(!comm->p2p_enabled(), "P2P is disabled: " + comm->p2p_disabled_reason());
  DeviceBuffer registered(kCount * 2);
  const BufferRegion region{registered.ptr, registered.bytes};
  comm->register_buffers(std::span<const BufferRegion>(&region, 1));
  SkippedFallbackCall skipped(*comm);
  expect_every_rank_times_out(*comm, "deregister_buffers", [&] { comm->deregister_buffers(); });
}

// The NCCL fallback's scratch buffer (strided calls): a graph captured after
// an eager call of its size replays into that buffer, so a later, larger
// eager call must grow into a new one and keep the old (freeing it made the
// replay write into freed memory). Drives the fallback directly to see the
// buffer kept; NCCL wants a GPU per rank.
TEST(CudaTeardown, GrowingTheScratchBufferKeepsTheOneACapturedGraphUses) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  ensure_cuda_contexts();  // selects this rank's GPU
  PEERPLAN_MPI_SKIP_IF(any_rank_shares_a_gpu(), "ranks share a GPU, which NCCL refuses");
  auto boot = bootstrap::make_mpi_bootstrap(MPI_COMM_WORLD, kTimeout);
  transport::cuda::NcclFallback fallback(*boot, kTimeout, RowClusters::automatic);
  constexpr std::int64_t kLargerRows = 4 * kRows;
  const TensorLayout small = strided_layout(), larger = strided_layout(kLargerRows);
  DeviceBuffer small_in(kRows * kRowStride * 2), small_out(kRows * kRowStride * 2),
      larger_in(kLargerRows * kRowStride * 2), larger_out(kLargerRows * kRowStride * 2);
  small_in.upload(to_strided(random_tensor(kType, kRows * kCols, 81, rank())));
  larger_in.upload(to_strided(random_tensor(kType, kLargerRows * kCols, 82, rank()), kLargerRows));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto small_call = [&] {
    fallback.all_reduce({small_in.ptr, small_out.ptr, kType, &small, stream});
  };

  small_call();  // eager: sizes the scratch buffer for the capture
  CUDA_OK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  small_call();
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  EXPECT_EQ(fallback.retired_scratch_buffers(), 0u);

  fallback.all_reduce({larger_in.ptr, larger_out.ptr, kType, &larger, stream});
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(wrong_sums(from_strided(larger_out.download(larger_out.bytes), kLargerRows),
                       kLargerRows * kCols, 82, Route::fallback),
            0)
      << "the larger eager call";
  EXPECT_EQ(fallback.retired_scratch_buffers(), 1u) << "the graph's scratch buffer was not kept";
  // Had the old buffer been freed, CUDA could give its memory to this
  // allocation of the same size, which the replay would then overwrite.
  DeviceBuffer decoy(kRows * kCols * 2);
  CUDA_OK(cudaMemset(decoy.ptr, 0x5a, decoy.bytes));
  CUDA_OK(cudaDeviceSynchronize());

  small_out.poison();
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(wrong_sums(from_strided(small_out.download(small_out.bytes)), kRows * kCols, 81,
                       Route::fallback),
            0)
      << "the replay after the scratch buffer grew";
  const auto after = decoy.download(decoy.bytes);
  EXPECT_EQ(std::count(after.begin(), after.end(), std::uint8_t{0x5a}),
            static_cast<std::ptrdiff_t>(decoy.bytes))
      << "the replay wrote into memory allocated after the scratch buffer grew";

  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  fallback.close();  // the graph is gone: NCCL finalizes, every scratch buffer is freed
  CUDA_OK(cudaStreamDestroy(stream));
  MPI_Barrier(test_comm());
}

// (d) A rank that destroys its communicator without close(): the others'
// close() waits for it only up to the timeout (a WARN), and its destructor
// does not wait for them. Keep this test last in the file: the others' close
// leaves a message to the departed rank in flight on their bootstrap's MPI
// communicator.
TEST(CudaTeardown, RankThatSkipsCloseDoesNotHoldTheOthers) {
  PEERPLAN_SKIP_WITHOUT_GPUS();
  auto comm = create_cuda(teardown_config());
  {
    DeviceBuffer in(kCount * 2), out(kCount * 2);
    in.upload(random_tensor(kType, kCount, 99, rank()));
    EXPECT_EQ(comm->all_reduce(in.ptr, out.ptr, kType, TensorLayout({kCount}), nullptr).route,
              Route::fallback);
    check_cuda(cudaDeviceSynchronize(), "sync");
    EXPECT_EQ(wrong_sums(out.download(kCount * 2), kCount, 99, Route::fallback), 0);
  }
  const bool skips = rank() == size() - 1;
  testing::internal::CaptureStderr();
  const auto start = Clock::now();
  if (skips) {
    comm.reset();
  } else {
    comm->close();
  }
  const auto took = Clock::now() - start;
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_LT(took, kBound) << (skips ? "the destructor" : "close()") << " took "
                          << milliseconds_of(took) << " ms";
  if (!skips) {
    EXPECT_NE(log.find("peers did not reach close()"), std::string::npos) << log;
  }
  MPI_Barrier(test_comm());
}

}  // namespace
}  // namespace peerplan::cuda_test
