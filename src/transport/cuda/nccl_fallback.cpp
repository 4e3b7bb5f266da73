// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/nccl_fallback.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collective_kernels.hpp"
#include "bootstrap/fail_together.hpp"
#include "core/log.hpp"
#include "peerplan/errors.hpp"
#include "transport/cuda/bounded_wait.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/nccl_check.hpp"
#include "transport/cuda/row_clusters.hpp"
#include "transport/cuda/kernel_args.hpp"
#include "transport/cuda/parked_nccl.hpp"
#include "transport/cuda/stream_capture.hpp"

namespace peerplan::transport::cuda {
namespace {

ncclDataType_t nccl_type(DataType dtype) {
  switch (dtype) {
    case DataType::f16:
      return ncclFloat16;
    case DataType::bf16:
      return ncclBfloat16;
    case DataType::f32:
      break;
  }
  return ncclFloat32;
}

// NCCL's rendezvous also does NCCL's own set-up work on each rank (topology,
// buffers, proxy threads): it gets at least this long, whatever the timeout.
constexpr std::chrono::milliseconds kNcclInitMinimum{10'000};

// How long close() waits for CUDA to run the destructors of graphs that were
// destroyed just before it (CUDA runs them asynchronously).
constexpr std::chrono::milliseconds kGraphReleaseGrace{1000};

// NCCL_COMM_BLOCKING=0 (environment or NCCL's config file) overrides
// ncclConfig_t::blocking: the communicator then returns ncclInProgress from
// its calls, which settle() polls.
bool nccl_nonblocking_forced() {
  const char* value = std::getenv("NCCL_COMM_BLOCKING");
  if (value == nullptr) return false;
  char* end = nullptr;
  const long long parsed = std::strtoll(value, &end, 0);
  return end != value && parsed == 0;
}

// NCCL connects the ranks lazily, at the first call of each algorithm
// (NCCL_RUNTIME_CONNECT's default, left as the user set it): a blocking
// communicator would wait on the host, without a bound, for a peer that never
// makes that call. One small and one large all-reduce inside the bounded
// rendezvous connect the algorithms NCCL picks for them (docs/faults.md says
// what stays lazy).
constexpr std::size_t kWarmUpSmallElements = 64;
constexpr std::size_t kWarmUpLargeElements = std::size_t{1} << 20;  // 4 MiB of f32

// Waits until the non-blocking communicator's pending step (init, enqueue,
// finalize) is no longer in progress, or `deadline` passes. Returns its
// result; ncclInProgress when the deadline passed. A blocking
// communicator's results are final already: returned as they are.
ncclResult_t settle(ncclComm_t comm, ncclResult_t status, TeardownClock::time_point deadline) {
  for (int polls = 0; status == ncclInProgress; ++polls) {
    if (TeardownClock::now() >= deadline) return ncclInProgress;
    // An enqueue takes NCCL's thread some microseconds: yield first; init
    // and finalize take far longer: then sleep between polls.
    if (polls < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 50 : 1000));
    }
    const ncclResult_t query = ncclCommGetAsyncError(comm, &status);
    if (query != ncclSuccess) return query;
  }
  return status;
}

// Aborts `comm` on a helper thread, bounded: NCCL's abort stops its kernels
// and threads, then waits for them; it can wait forever for a CUDA graph
// that captured one of its calls, or for work queued behind a kernel that
// never ends. Then the abort is left running and the communicator leaked.
void abort_bounded(ncclComm_t comm, TeardownClock::time_point deadline,
                   const std::string& context) {
  if (!run_until([comm] { ncclCommAbort(comm); }, deadline)) {
    log::warn(context +
              ": ncclCommAbort did not return in time; it is left running on a helper "
              "thread and the NCCL communicator is leaked (a CUDA graph that captured a fallback "
              "call still exists, or GPU work that never ends)");
  }
}

// Ends `comm` (no CUDA graph holding one of its calls may exist: NCCL would
// wait for it). finalize: ncclCommFinalize polled until `deadline`, then
// ncclCommDestroy; when finalize fails or does not complete in time,
// ncclCommAbort with a WARN. Otherwise ncclCommAbort straight away. Returns
// within about `deadline` + kTeardownMargin.
void end_comm(ncclComm_t comm, bool blocking, int device, TeardownClock::time_point deadline,
              std::chrono::milliseconds timeout, bool finalize, const std::string& context) {
  if (!finalize) {
    abort_bounded(comm, std::max(deadline, TeardownClock::now()) + kTeardownMargin, context);
    return;
  }
  ncclResult_t status = ncclInProgress;
  if (!blocking) {
    status = settle(comm, ncclCommFinalize(comm), deadline);
  } else if (device_idle_by(device, deadline)) {
    // A blocking finalize waits for the communicator's GPU work without a
    // bound: it is called only once the device is idle.
    status = ncclCommFinalize(comm);
  }
  if (status == ncclSuccess) {
    // Local only; it frees NCCL's buffers, and cudaFree waits for the device.
    if (!run_until([comm] { ncclCommDestroy(comm); },
                   std::max(deadline, TeardownClock::now()) + kTeardownMargin)) {
      log::warn(context +
                ": ncclCommDestroy did not return in time (GPU work that never ends); "
                "it is left running on a helper thread");
    }
    return;
  }
  if (status == ncclInProgress) {
    log::warn(context + ": NCCL did not finalize its communicator within " +
              milliseconds_text(timeout) +
              " (PEERPLAN_TIMEOUT_MS): a CUDA graph that captured a fallback call still exists, "
              "or a peer did not call close() (or never made a fallback call this rank made); "
              "destroy graphs before close(). The NCCL communicator is aborted.");
  } else {
    log::warn(context + ": ncclCommFinalize failed: " + std::string(ncclGetErrorString(status)) +
              ". The NCCL communicator is aborted (NCCL_DEBUG=WARN says why it failed).");
  }
  abort_bounded(comm, TeardownClock::now() + kTeardownMargin, context);
}

// Frees the scratch buffers once the device is idle; leaks them when the
// device is not idle by `deadline` (a running kernel may still use them).
void free_scratch(const std::vector<void*>& buffers, int device, TeardownClock::time_point deadline,
                  const std::string& context) {
  if (buffers.empty()) return;
  if (!device_idle_by(device, deadline)) {
    log::warn(context +
              ": GPU work was still running at the deadline; the fallback's scratch "
              "buffers stay allocated (leaked on purpose: a running kernel may still use them)");
    return;
  }
  int current = -1;
  const bool switched = cudaGetDevice(&current) == cudaSuccess && current != device &&
                        cudaSetDevice(device) == cudaSuccess;
  for (void* buffer : buffers) cudaFree(buffer);
  if (switched) cudaSetDevice(current);
  cudaGetLastError();
}

// A device buffer of `wanted` bytes, else (that much is not free) of
// `needed`; its size in `allocated`.
void* allocate_scratch(std::size_t needed, std::size_t wanted, std::size_t& allocated) {
  void* buffer = nullptr;
  if (wanted > needed && cudaMalloc(&buffer, wanted) == cudaSuccess) {
    allocated = wanted;
    return buffer;
  }
  cudaGetLastError();  // out of memory is not sticky: try the size needed
  check_cuda(cudaMalloc(&buffer, needed), "cudaMalloc of the fallback's scratch buffer");
  allocated = needed;
  return buffer;
}

}  // namespace

// Graphs (with their instantiations) that captured a fallback call of one
// NCCL communicator. Owned by the NcclFallback (or the parked entry that
// took over its communicator) and by one CUDA user object per graph, whose
// destructor CUDA runs when the graph and its instantiations are destroyed
// (on a CUDA thread, where no CUDA call is allowed: atomics only).
struct NcclFallback::CapturedGraphs {
  std::atomic<int> live{0};
  std::atomic<int> owners{1};
  void add_owner() noexcept { owners.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (owners.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

namespace {

using CapturedGraphs = NcclFallback::CapturedGraphs;

void CUDART_CB graph_released(void* graphs) {
  auto* g = static_cast<CapturedGraphs*>(graphs);
  g->live.fetch_sub(1, std::memory_order_acq_rel);
  g->release();
}

// A communicator that close() (or a destructor) could not end because a
// graph that captured one of its calls still existed; ended by
// release_parked_nccl_communicators() once its graphs are gone. The scratch
// buffers stay with it: such a graph may use them.
struct Parked {
  ncclComm_t comm;
  CapturedGraphs* graphs;
  std::vector<void*> scratch;
  bool blocking;
  int device;
  std::chrono::milliseconds timeout;
  bool finalize;
};

// Never destroyed: CUDA may release graphs during the process's exit.
std::mutex& parked_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::vector<Parked>& parked() {
  static auto* list = new std::vector<Parked>;
  return *list;
}

}  // namespace

std::size_t parked_nccl_communicators() noexcept {
  std::lock_guard<std::mutex> lock(parked_mutex());
  return parked().size();
}

void release_parked_nccl_communicators() noexcept {
  std::vector<Parked> ready;
  {
    std::lock_guard<std::mutex> lock(parked_mutex());
    auto& list = parked();
    for (auto it = list.begin(); it != list.end();) {
      if (it->graphs->live.load(std::memory_order_acquire) == 0) {
        ready.push_back(*it);
        it = list.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const Parked& p : ready) {
    const auto deadline = TeardownClock::now() + p.timeout;
    const std::string context = "releasing an NCCL communicator that an earlier close() left open";
    end_comm(p.comm, p.blocking, p.device, deadline, p.timeout, p.finalize, context);
    free_scratch(p.scratch, p.device, deadline + kTeardownMargin, context);
    p.graphs->release();
    log::info(log::Subsystem::fallback, context + ": its CUDA graphs are gone, released");
  }
}

NcclFallback::NcclFallback(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                           RowClusters row_clusters)
    : timeout_(timeout), graphs_(new CapturedGraphs) {
  try {
    release_parked_nccl_communicators();
    init(bootstrap, row_clusters);
  } catch (...) {
    abandon_comm();
    graphs_->release();
    graphs_ = nullptr;
    throw;
  }
}

void NcclFallback::init(bootstrap::Bootstrap& bootstrap, RowClusters row_clusters) {
  ncclUniqueId id{};
  std::string error;
  if (bootstrap.rank() == 0) {
    const ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess) error = ncclGetErrorString(status);
  }
  bootstrap::Blob blob(sizeof id + 1);
  std::memcpy(blob.data(), &id, sizeof id);
  blob[sizeof id] = std::byte{error.empty() ? std::uint8_t{1} : std::uint8_t{0}};
  const auto received = bootstrap.broadcast(blob, 0);
  if (received.size() != blob.size() || received[sizeof id] != std::byte{1}) {
    throw NcclError("peerplan cuda backend: rank 0 could not create an NCCL unique id" +
                    (error.empty() ? std::string() : ": " + error) +
                    ". Set NCCL_DEBUG=WARN for NCCL's explanation.");
  }
  std::memcpy(&id, received.data(), sizeof id);
  check_cuda(cudaGetDevice(&device_), "cudaGetDevice");
  // Bounded: every rank is here before NCCL's rendezvous.
  bootstrap.barrier();

  // A blocking communicator. A non-blocking one bounds every NCCL step, but
  // NCCL then hands every call to a thread of its own: measured on 2x H200,
  // an eager fallback all-reduce took 64 us per call instead of NCCL's 8.7
  // (CHANGELOG.md). What can block for long is bounded
  // otherwise: the rendezvous runs on a helper thread until the deadline
  // (an unfinished one is left running with its communicator, leaked, and
  // this rank raises Timeout); the connections between the ranks are made
  // during it, by a warm-up, so that later calls do not wait on the
  // host for a peer (warm_up below); and close() is bounded as described there. Should the
  // user force a non-blocking communicator (NCCL_COMM_BLOCKING=0), every
  // step is still polled against the deadline (settle()).
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  const auto bound = std::max(timeout_, kNcclInitMinimum);
  const auto deadline = TeardownClock::now() + bound;
  struct InitResult {
    ncclComm_t comm = nullptr;
    ncclResult_t status = ncclInProgress;
  };
  auto result = std::make_shared<InitResult>();  // the helper thread may outlive this call
  const int size = bootstrap.size();
  const int rank = bootstrap.rank();
  const int device = device_;
  ncclResult_t status = ncclInProgress;
  if (run_until(
          [result, id, size, rank, device, config]() mutable {
            if (cudaSetDevice(device) != cudaSuccess) {
              result->status = ncclUnhandledCudaError;
              return;
            }
            result->status = ncclCommInitRankConfig(&result->comm, size, id, rank, &config);
          },
          deadline)) {
    comm_ = result->comm;
    status = result->status;
  }
  blocking_ = !nccl_nonblocking_forced();
  if (comm_ != nullptr) status = settle(comm_, status, deadline);
  const std::string me = "rank " + std::to_string(bootstrap.rank());
  bool timed_out = false;
  if (status == ncclInProgress) {
    timed_out = true;
    error =
        "peerplan cuda backend: NCCL's rendezvous (ncclCommInitRankConfig) did not complete "
        "within " +
        milliseconds_text(bound) + " on " + me + " (PEERPLAN_TIMEOUT_MS, at least " +
        milliseconds_text(kNcclInitMinimum) +
        " for NCCL's set-up): a rank did not reach it, or NCCL's bootstrap cannot connect "
        "the ranks (NCCL_SOCKET_IFNAME; NCCL_DEBUG=WARN says more). The unfinished "
        "rendezvous is left behind on a helper thread.";
  } else if (status != ncclSuccess || comm_ == nullptr) {
    error = "peerplan cuda backend: ncclCommInitRankConfig failed on " + me + ": " +
            ncclGetErrorString(status == ncclSuccess ? ncclInternalError : status) +
            ". Set NCCL_DEBUG=WARN for NCCL's explanation.";
  }
  // Every rank fails together: a rank alone with a communicator would wait
  // for the others at its first fallback call.
  std::optional<bootstrap::Failures> failures;
  try {
    failures = bootstrap::gather_failures(
        bootstrap, error.empty() ? std::nullopt : std::optional<std::string>(error));
  } catch (const Error& e) {
    abandon_comm();
    if (timed_out) throw Timeout(error + " Then: " + e.what());
    if (!error.empty()) throw NcclError(error + " Then: " + e.what());
    throw;
  }
  if (failures) {
    abandon_comm();
    if (timed_out) throw Timeout(error);
    throw NcclError("peerplan cuda backend: creating the NCCL communicator failed (" +
                    failures->message +
                    "); every rank gave up. Set NCCL_DEBUG=WARN for NCCL's explanation.");
  }
  // The warm-up runs only where every rank has a communicator; its outcome
  // is agreed like the rendezvous's.
  const auto warm_up_deadline = TeardownClock::now() + bound;
  error = warm_up(bootstrap.rank(), bound);
  timed_out = !error.empty() && TeardownClock::now() >= warm_up_deadline;
  try {
    failures = bootstrap::gather_failures(
        bootstrap, error.empty() ? std::nullopt : std::optional<std::string>(error));
  } catch (const Error& e) {
    abandon_comm();
    if (timed_out) throw Timeout(error + " Then: " + e.what());
    if (!error.empty()) throw NcclError(error + " Then: " + e.what());
    throw;
  }
  if (failures) {
    abandon_comm();
    if (timed_out) throw Timeout(error);
    throw NcclError("peerplan cuda backend: NCCL's first all-reduce failed (" + failures->message +
                    "); every rank gave up. Set NCCL_DEBUG=WARN for NCCL's explanation.");
  }
  // Never throws: after NCCL's rendezvous a rank must not fail alone.
  rows_in_clusters_ = use_row_clusters(row_clusters, device_);
  cuda_kernels::prepare_add_rms_norm(rows_in_clusters_);
}

std::string NcclFallback::warm_up(int rank, std::chrono::milliseconds bound) {
  const auto deadline = TeardownClock::now() + bound;
  // Shared with the helper thread, which may outlive this call; what it
  // holds is then leaked: NCCL may still use it.
  struct WarmUp {
    void* buffer = nullptr;
    cudaStream_t stream = nullptr;
    std::string error;
  };
  auto state = std::make_shared<WarmUp>();
  const ncclComm_t comm = comm_;
  const int device = device_;
  const bool finished = run_until(
      [state, comm, device, deadline] {
        auto fail = [&](const std::string& what) { state->error = what; };
        if (cudaSetDevice(device) != cudaSuccess ||
            cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking) != cudaSuccess ||
            cudaMalloc(&state->buffer, kWarmUpLargeElements * sizeof(float)) != cudaSuccess ||
            cudaMemsetAsync(state->buffer, 0, kWarmUpLargeElements * sizeof(float),
                            state->stream) != cudaSuccess) {
          return fail(std::string("CUDA failed to prepare NCCL's warm-up: ") +
                      cudaGetErrorString(cudaGetLastError()));
        }
        for (const std::size_t count : {kWarmUpSmallElements, kWarmUpLargeElements}) {
          ncclResult_t status = ncclAllReduce(state->buffer, state->buffer, count, ncclFloat32,
                                              ncclSum, comm, state->stream);
          status = settle(comm, status, deadline);
          if (status != ncclSuccess) {
            return fail(std::string("ncclAllReduce (warm-up) failed: ") +
                        (status == ncclInProgress ? "did not finish queueing in time"
                                                  : ncclGetErrorString(status)));
          }
        }
        if (cudaStreamSynchronize(state->stream) != cudaSuccess) {
          return fail(std::string("the warm-up all-reduce failed on the GPU: ") +
                      cudaGetErrorString(cudaGetLastError()));
        }
        cudaFree(state->buffer);
        cudaStreamDestroy(state->stream);
        state->buffer = nullptr;
        state->stream = nullptr;
      },
      deadline);
  const std::string me = "peerplan cuda backend: rank " + std::to_string(rank);
  if (!finished) {
    return me + ": NCCL's first all-reduce (connecting the ranks) did not complete within " +
           milliseconds_text(bound) +
           " (PEERPLAN_TIMEOUT_MS): a rank stopped after NCCL's rendezvous. It is left "
           "running on a helper thread.";
  }
  if (!state->error.empty()) return me + ": " + state->error;
  return {};
}

void NcclFallback::abandon_comm() noexcept {
  if (comm_ == nullptr) return;
  abort_bounded(comm_, TeardownClock::now() + kTeardownMargin,
                "giving up on the NCCL communicator");
  comm_ = nullptr;
}

NcclFallback::~NcclFallback() {
  // Not closed: peers may be gone, so NCCL is aborted, not finalized.
  shut_down(false);
  if (graphs_ != nullptr) graphs_->release();
}

void NcclFallback::close() {
  shut_down(true);
  release_parked_nccl_communicators();
}

void NcclFallback::shut_down(bool finalize) noexcept {
  const std::string context = finalize ? "close" : "destroying a communicator without close()";
  const auto deadline = TeardownClock::now() + timeout_;
  const int live = comm_ != nullptr ? graphs_still_alive(deadline) : 0;
  if (live > 0) {
    // Neither finalize nor abort would return before the graphs are gone.
    log::warn(context + ": " + std::to_string(live) +
              " CUDA graph(s) that captured a fallback (NCCL) call still exist; NCCL can "
              "neither finalize nor abort its communicator until they (and their "
              "instantiations) are destroyed, so it is left open instead of hanging (released "
              "at a later create() or close() in this process once the graphs are gone, else "
              "at exit). Destroy CUDA graphs before close(), then MPI_Finalize.");
    graphs_->add_owner();
    std::lock_guard<std::mutex> lock(parked_mutex());
    parked().push_back(Parked{comm_, graphs_, std::move(scratch_buffers_), blocking_, device_,
                              timeout_, finalize});
    comm_ = nullptr;
    scratch_buffers_.clear();
    scratch_bytes_ = 0;
    return;
  }
  if (comm_ != nullptr) {
    end_comm(comm_, blocking_, device_, deadline, timeout_, finalize, context);
    comm_ = nullptr;
  }
  // Our kernels that use it (pack, unpack, add + RMSNorm) are queued behind
  // NCCL's, which have now ended or been aborted.
  free_scratch(scratch_buffers_, device_, deadline + kTeardownMargin, context);
  scratch_buffers_.clear();
  scratch_bytes_ = 0;
}

int NcclFallback::graphs_still_alive(TeardownClock::time_point deadline) noexcept {
  if (graphs_ == nullptr || graphs_->live.load(std::memory_order_acquire) == 0) return 0;
  // CUDA runs a user object's destructor some time after the graph's
  // destruction, and only once the graph's pending launches have finished:
  // let a graph destroyed just before close() go.
  device_idle_by(device_, deadline);
  const auto grace = TeardownClock::now() + kGraphReleaseGrace;
  int live = graphs_->live.load(std::memory_order_acquire);
  while (live > 0 && TeardownClock::now() < grace) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    live = graphs_->live.load(std::memory_order_acquire);
  }
  return live;
}

void NcclFallback::track_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
  if (cudaStreamGetCaptureInfo(stream, &status, &id, &graph) != cudaSuccess) {
    cudaGetLastError();  // NCCL queried the same and did not fail: not capturing
    return;
  }
  if (status != cudaStreamCaptureStatusActive || graph == nullptr || id == last_capture_id_) return;
  last_capture_id_ = id;
  // Counted before the object exists: when tracking fails, the count stays
  // up for good, so that close() never calls into NCCL with a graph alive.
  graphs_->live.fetch_add(1, std::memory_order_acq_rel);
  graphs_->add_owner();
  cudaUserObject_t object = nullptr;
  if (cudaUserObjectCreate(&object, graphs_, graph_released, 1, cudaUserObjectNoDestructorSync) !=
      cudaSuccess) {
    cudaGetLastError();
    graphs_->release();  // no object will ever release it
    log::warn(
        "could not attach a tracker to the CUDA graph capturing a fallback call; this "
        "communicator's NCCL resources will be left to the end of the process");
    return;
  }
  if (cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove) != cudaSuccess) {
    cudaGetLastError();
    // Keeps its reference (and the count) for good, as above.
    log::warn(
        "could not attach a tracker to the CUDA graph capturing a fallback call; this "
        "communicator's NCCL resources will be left to the end of the process");
  }
}

void NcclFallback::enqueue_all_reduce(const void* in, void* out, std::size_t count,
                                      ncclDataType_t type, cudaStream_t stream) {
  ncclResult_t status = ncclAllReduce(in, out, count, type, ncclSum, comm_, stream);
  // NCCL puts the kernel on the stream from its own thread: wait for it, so
  // that what the caller queues next runs after it.
  status = settle(comm_, status, TeardownClock::now() + timeout_);
  // Whatever the outcome: NCCL may have tied the graph being captured to its
  // communicator before failing, and counting a graph too many is safe.
  track_capture(stream);
  if (status == ncclInProgress) {
    throw Timeout(
        "peerplan cuda backend: NCCL did not finish queueing a fallback all-reduce "
        "within " +
        milliseconds_text(timeout_) +
        " (PEERPLAN_TIMEOUT_MS). NCCL connects the ranks at the first call of each "
        "kind, with every rank: a rank probably stopped making calls (crashed, hung) "
        "or makes them in a different order. If NCCL is only slow, raise "
        "PEERPLAN_TIMEOUT_MS.");
  }
  check_nccl(status, "ncclAllReduce");
}

void* NcclFallback::scratch(std::size_t bytes, cudaStream_t stream, const char* what) {
  if (bytes <= scratch_bytes_) return scratch_buffers_.empty() ? nullptr : scratch_buffers_.back();
  if (capturing(stream)) {
    throw InvalidUsage(std::string("peerplan cuda backend: ") + what +
                       " of a non-contiguous tensor on the fallback needs a " +
                       std::to_string(bytes) +
                       "-byte scratch buffer, which cannot be allocated during CUDA graph "
                       "capture; declare this shape (P2P routes need no scratch), make it "
                       "contiguous, or make one eager call of this size before capturing");
  }
  // The buffer in use is replaced, not freed: a graph captured earlier
  // replays into it, and a call queued earlier, on any stream, may still be
  // using it. So nothing is waited for either (cudaFree, like synchronising
  // a stream behind a fallback kernel whose peer never calls, could wait for
  // ever); shut_down() frees every buffer once the device is idle. Growing
  // at least twofold keeps the replaced ones smaller, together, than the
  // one in use.
  scratch_buffers_.reserve(scratch_buffers_.size() + 1);  // the push below cannot throw
  std::size_t allocated = 0;
  void* grown = allocate_scratch(bytes, std::max(bytes, 2 * scratch_bytes_), allocated);
  scratch_buffers_.push_back(grown);
  scratch_bytes_ = allocated;
  return grown;
}

void NcclFallback::all_reduce(const AllReduceArgs& args) {
  if (comm_ == nullptr) throw InvalidUsage("peerplan cuda backend: all_reduce after close()");
  if (args.layout == nullptr)
    throw InvalidArgument("peerplan cuda backend: all_reduce: layout is null");
  const std::int64_t count = args.layout->numel();
  const auto stream = static_cast<cudaStream_t>(args.stream);
  const auto type = nccl_type(args.dtype);
  if (args.layout->is_contiguous() || count == 0) {
    enqueue_all_reduce(args.in, args.out, static_cast<std::size_t>(count), type, stream);
    return;
  }
  const std::size_t bytes = element_size(args.dtype);
  void* buffer = scratch(static_cast<std::size_t>(count) * bytes, stream, "all_reduce");
  const auto layout = kernel_layout(*args.layout);
  check_cuda(cuda_kernels::launch_pack(bytes, args.in, buffer, layout, count, stream),
             "launching the pack kernel");
  enqueue_all_reduce(buffer, buffer, static_cast<std::size_t>(count), type, stream);
  check_cuda(cuda_kernels::launch_unpack(bytes, buffer, args.out, layout, count, stream),
             "launching the unpack kernel");
}

void NcclFallback::fused_add_rms_norm(const FusedArgs& args) {
  if (comm_ == nullptr)
    throw InvalidUsage("peerplan cuda backend: fused_add_rms_norm after close()");
  if (args.layout == nullptr) {
    throw InvalidArgument("peerplan cuda backend: fused_add_rms_norm: layout is null");
  }
  const std::int64_t count = args.layout->numel();
  if (count == 0) return;
  const auto stream = static_cast<cudaStream_t>(args.stream);
  const auto type = nccl_type(args.dtype);
  const auto layout = kernel_layout(*args.layout);
  const std::size_t bytes = element_size(args.dtype);
  void* reduced = args.inout;
  if (!args.layout->is_contiguous()) {
    reduced = scratch(static_cast<std::size_t>(count) * bytes, stream, "fused_add_rms_norm");
    check_cuda(cuda_kernels::launch_pack(bytes, args.inout, reduced, layout, count, stream),
               "launching the pack kernel");
  }
  enqueue_all_reduce(reduced, reduced, static_cast<std::size_t>(count), type, stream);
  const std::int64_t hidden = args.layout->last_dim();
  check_cuda(cuda_kernels::launch_add_rms_norm(element_type(args.dtype), reduced, args.inout,
                                               args.residual, args.weight, args.eps, layout,
                                               count / hidden, hidden, rows_in_clusters_, stream),
             "launching the add + RMSNorm kernel");
}

}  // namespace peerplan::transport::cuda
