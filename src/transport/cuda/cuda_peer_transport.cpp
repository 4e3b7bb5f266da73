// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/cuda_peer_transport.hpp"

#include <cstdint>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "core/log.hpp"
#include "bootstrap/fail_together.hpp"
#include "peerplan/errors.hpp"
#include "routing/defaults.hpp"
#include "routing/protocol_tuning.hpp"
#include "shard_geometry.cuh"
#include "transport/cuda/bounded_wait.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/device_error_text.hpp"
#include "transport/cuda/idle_gpus.hpp"
#include "transport/cuda/row_clusters.hpp"
#include "transport/cuda/test_epoch_start.hpp"
#include "transport/cuda/kernel_args.hpp"
#include "transport/peer_call_state.hpp"

namespace peerplan::transport::cuda {
namespace {

using cuda_kernels::DeviceError;
using cuda_kernels::ErrorCode;

struct DeviceIdentity {
  std::int32_t global_rank;
  std::int32_t device;
  char pci_bus_id[32];
};

constexpr std::string_view kBackend = "peerplan cuda backend";

constexpr std::uint32_t kProbePattern = 0x5eed0000u;

// One pinned, mapped block: the kernels' error word and, after it, the words
// create()'s probe reads from the peers, so that create() allocates and frees
// no pinned memory of its own (cudaFreeHost waits for the device).
struct HostWords {
  DeviceError error;
  std::uint32_t probe[cuda_kernels::kMaxRanks];
};

// create() validates KernelChoices::one_shot_max_blocks against this.
static_assert(kOneShotMaxBlocksLimit == cuda_kernels::kMaxOneShotBlocks,
              "config.hpp's limit must be the kernels' own");

// The kernels' copy-engine piece target is the defaults table's.
static_assert(cuda_kernels::kDmaPieceTargetBytes == routing::kDmaPieceTargetBytes,
              "routing/defaults.hpp holds the built-in piece target");

// The kernel choices in force, for the INFO log (their "auto" resolved),
// under the names and in the window syntax of KernelChoices.
std::string describe_choices(const cuda_kernels::PeerSet& p, const routing::ProtocolWindows& w) {
  std::string text = "one_shot_max_blocks=" + std::to_string(p.one_shot_max_blocks) + ' ';
  if (w.pull) text += "(one-shot and two-shot by pull) ";
  return text + routing::describe_protocol_windows(w) +
         " row_clusters=" + (p.cluster_rows ? "on" : "off");
}

}  // namespace

CudaPeerTransport::CudaPeerTransport(bootstrap::Bootstrap& bootstrap,
                                     std::chrono::milliseconds timeout, bool pull,
                                     const KernelChoices& kernels,
                                     std::unique_ptr<NodeExchange> across_nodes)
    : bootstrap_(bootstrap),
      timeout_(timeout),
      local_rank_(bootstrap.local_rank()),
      local_size_(bootstrap.local_size()),
      pull_(pull),
      across_nodes_(std::move(across_nodes)) {
  if (timeout.count() <= 0) {
    throw InvalidArgument("peerplan cuda backend: the timeout must be positive (got " +
                          std::to_string(timeout.count()) + " ms); set PEERPLAN_TIMEOUT_MS > 0");
  }
  // Every collective step below is made by every rank whatever failed
  // locally, so that the ranks stay in step; errors are thrown at the end.
  std::string error;
  DeviceIdentity mine{};
  mine.global_rank = bootstrap.rank();
  try {
    if (local_size_ > cuda_kernels::kMaxRanks) {
      throw Unsupported("peerplan cuda backend: " + std::to_string(local_size_) +
                        " ranks on one node; the P2P kernels support at most " +
                        std::to_string(cuda_kernels::kMaxRanks));
    }
    check_cuda(cudaGetDevice(&mine.device), "cudaGetDevice");
    check_cuda(cudaDeviceGetPCIBusId(mine.pci_bus_id, sizeof mine.pci_bus_id, mine.device),
               "cudaDeviceGetPCIBusId");
    check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&error_host_), sizeof(HostWords),
                             cudaHostAllocMapped),
               "cudaHostAlloc of the error word");
    std::memset(error_host_, 0, sizeof(DeviceError));
    void* device_view = nullptr;
    check_cuda(cudaHostGetDevicePointer(&device_view, error_host_, 0), "cudaHostGetDevicePointer");
    peers_.error = static_cast<DeviceError*>(device_view);
    int major = 0;
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, mine.device),
               "cudaDeviceGetAttribute");
    peers_.overlap_launch = major >= 9;
    // The one-shot kernel's largest grid: the defaults table's blocks per
    // SM, unless KernelChoices::one_shot_max_blocks says otherwise (only
    // speed changes, and ranks may differ).
    int multiprocessors = 1;
    check_cuda(
        cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, mine.device),
        "cudaDeviceGetAttribute");
    configured_one_shot_blocks_ = kernels.one_shot_max_blocks;
    peers_.one_shot_max_blocks = kernels.one_shot_max_blocks > 0
                                     ? kernels.one_shot_max_blocks
                                     : multiprocessors * routing::kOneShotBlocksPerMultiprocessor;
    peers_.cluster_rows = use_row_clusters(kernels.row_clusters, mine.device);
    // Which protocol the router gives which plan (protocol_windows()): the
    // defaults table's windows, with those the Config sets.
    windows_ = routing::apply_configured_windows(
        routing::default_protocol_windows(Backend::cuda, local_size_, pull), kernels);
    if (bootstrap.rank() == 0) {
      log::info(log::Subsystem::transport,
                std::string(kBackend) + ": " + describe_choices(peers_, windows_));
    }
  } catch (const Error& e) {
    error = e.what();
  }
  bootstrap::Blob blob(sizeof mine);
  std::memcpy(blob.data(), &mine, sizeof mine);
  const auto all = bootstrap.local_allgather(blob);
  global_ranks_.assign(all.size(), -1);
  for (std::size_t r = 0; r < all.size(); ++r) {
    DeviceIdentity peer{};
    std::memcpy(&peer, all[r].data(), std::min(sizeof peer, all[r].size()));
    global_ranks_[r] = peer.global_rank;
    if (!error.empty() || static_cast<int>(r) == local_rank_) continue;
    peer.pci_bus_id[sizeof peer.pci_bus_id - 1] = '\0';
    int peer_device = -1;
    const std::string who =
        "rank " + std::to_string(peer.global_rank) + "'s GPU (PCI " + peer.pci_bus_id + ")";
    if (cudaDeviceGetByPCIBusId(&peer_device, peer.pci_bus_id) != cudaSuccess) {
      cudaGetLastError();
      error = "peerplan cuda backend: " + who + " is not visible to rank " +
              std::to_string(mine.global_rank) +
              "; CUDA IPC needs every node-local GPU visible to every rank (do not restrict "
              "CUDA_VISIBLE_DEVICES per rank; select the GPU with PEERPLAN_DEVICE instead)";
    } else if (peer_device == mine.device) {
      // Ranks sharing a GPU (for testing: the communicator warned): CUDA
      // IPC works between processes of one device, no peer access needed.
    } else {
      int can_access = 0;
      if (cudaDeviceCanAccessPeer(&can_access, mine.device, peer_device) != cudaSuccess ||
          !can_access) {
        cudaGetLastError();
        error = "peerplan cuda backend: rank " + std::to_string(mine.global_rank) +
                "'s GPU cannot access " + who + " (cudaDeviceCanAccessPeer)";
      }
    }
  }
  if (auto failures = bootstrap::gather_failures(
          bootstrap, error.empty() ? std::nullopt : std::optional<std::string>(error))) {
    // No kernel has used it; freeing it still waits for the device's other
    // work, so only where that ends soon (else a word's bytes are leaked).
    if (error_host_ != nullptr &&
        device_idle_by(device_of(error_host_), TeardownClock::now() + kTeardownMargin)) {
      cudaFreeHost(error_host_);
    }
    error_host_ = nullptr;
    throw Unsupported(failures->message);
  }
  probe_peer_access();
}

// cudaDeviceCanAccessPeer can claim access that does not work (IOMMU,
// virtualisation, ACS): read a known word from every peer's slab. Nothing
// here waits for other GPU work, which may never end (a kernel of another
// library, a fallback call a peer never made): the word goes in with the
// slab's fill (bounded, on a stream of its own), the reads run on a stream of
// their own into pinned memory, waited for up to the timeout, and the slabs
// are freed only at close(), after its bounded wait for the device
// (cudaFree waits for every kernel).
void CudaPeerTransport::probe_peer_access() {
  probe_slabs_ = IpcSlabs::establish(
      bootstrap_, timeout_, cuda_kernels::kSignalAreaBytes, static_cast<std::size_t>(-1), 0,
      SlabWord{0, kProbePattern | static_cast<std::uint32_t>(local_rank_)});
  std::uint32_t* seen = reinterpret_cast<HostWords*>(error_host_)->probe;
  std::fill(seen, seen + cuda_kernels::kMaxRanks, 0u);
  const OwnStream stream("the peer-access probe");
  std::string error;
  bool finished = false;
  for (int r = 0; r < local_size_ && error.empty(); ++r) {
    if (r == local_rank_) continue;
    const cudaError_t status = cudaMemcpyAsync(&seen[r], probe_slabs_.base(r), sizeof seen[r],
                                               cudaMemcpyDeviceToHost, stream.get());
    if (status != cudaSuccess) {
      cudaGetLastError();
      error = "reading rank " + std::to_string(global_ranks_[r]) +
              "'s probe word through its IPC mapping failed: " + cudaGetErrorString(status);
    }
  }
  try {
    finished = stream.finished_within(timeout_, "reading the peers' probe words");
  } catch (const Error& e) {
    if (error.empty()) error = e.what();
  }
  if (error.empty() && !finished) {
    error = "reading the peers' probe words through their IPC mappings did not finish within " +
            milliseconds_text(timeout_) + " (PEERPLAN_TIMEOUT_MS)";
  }
  for (int r = 0; r < local_size_ && error.empty(); ++r) {
    if (r != local_rank_ && seen[r] != (kProbePattern | static_cast<std::uint32_t>(r))) {
      error = "reading rank " + std::to_string(global_ranks_[r]) +
              "'s probe word through its IPC mapping returned a wrong value";
    }
  }
  if (!error.empty()) {
    // Freed only where nothing runs on the device (copies that did not
    // finish may still write; cudaFree would wait for every kernel):
    // else leaked, a signal area's bytes.
    if (finished &&
        device_idle_by(device_of(error_host_), TeardownClock::now() + kTeardownMargin)) {
      probe_slabs_.release_local();
    } else {
      probe_slabs_.abandon();
    }
    throw CudaError("peerplan cuda backend: " + error +
                    "; peer-to-peer access does not work between these GPUs");
  }
}

CudaPeerTransport::~CudaPeerTransport() { close(); }

void CudaPeerTransport::close() {
  if (closed_) return;
  closed_ = true;
  // Our kernels give up waiting after the timeout, so the device is idle by
  // timeout + margin unless something else never ends (a fallback call a
  // peer never made, another library's kernel). Then a kernel may still
  // read or write the slabs, the peers' mappings, the registry table or the
  // error word: leave them allocated rather than free memory in use.
  const auto deadline = TeardownClock::now() + timeout_ + kTeardownMargin;
  const bool idle = device_idle_by(device_of(error_host_), deadline);
  if (!idle) {
    log::warn("close: GPU work queued before close() was still running " +
              milliseconds_text(timeout_ + kTeardownMargin) +
              " later (PEERPLAN_TIMEOUT_MS + margin); the P2P transport's staging slabs, peer "
              "mappings and error word stay allocated (leaked on purpose: a running kernel may "
              "still use them). A kernel on this GPU does not end: a fallback call that a peer "
              "never made, or a kernel outside peerplan.");
    slabs_.abandon();
    probe_slabs_.abandon();
    registry_.abandon();
    node_shard_ = node_reduced_ = nullptr;
    error_host_ = nullptr;
    capacity_ = 0;
    if (across_nodes_) across_nodes_->close();
    return;
  }
  slabs_.release_local();
  probe_slabs_.release_local();
  registry_.release_local();
  release_node_buffers();
  if (dma_streams_) cuda_kernels::destroy_dma_streams(*dma_streams_);
  dma_streams_.reset();
  if (across_nodes_) across_nodes_->close();
  if (error_host_ != nullptr) cudaFreeHost(error_host_);
  cudaGetLastError();
  error_host_ = nullptr;
  capacity_ = 0;
}

void CudaPeerTransport::reserve(std::size_t max_message_bytes, std::size_t max_lamport_bytes,
                                std::size_t max_dma_bytes) {
  if (closed_) {
    throw InvalidUsage(
        "peerplan cuda backend: reserve() after close(); create a new communicator.");
  }
  if (error_host_ != nullptr && *static_cast<volatile std::uint32_t*>(&error_host_->code) != 0) {
    broken_ = true;
  }
  // Read before any exchange or release: a bad value fails declare() at once.
  const std::optional<std::uint32_t> epoch_start = test_epoch_start();
  // The Lamport region holds exactly the plans the router gave the Lamport
  // protocol (one-shot, two-shot and fused alike): the largest of them.
  // The copy-engine region holds the plans given Protocol::dma. Neither
  // kind stages anything in the slots: `max_message_bytes` does not count
  // them.
  const std::size_t lamport_bytes = max_lamport_bytes;
  const bool needs_rebuild = broken_ || max_message_bytes != slot_capacity_ ||
                             lamport_bytes != lamport_capacity_ || max_dma_bytes != dma_capacity_;
  // Every rank rebuilds, or none: a rank that timed out resets every rank's epochs.
  if (bootstrap_.agree(!needs_rebuild)) return;

  // The first slabs replace nothing: no wait for the GPU, whose other work
  // may never end (every rank alike: the slabs come and go together).
  if (!bootstrap_.agree(slabs_.empty() && node_shard_ == nullptr)) {
    wait_until_no_kernel_uses_buffers("re-creating the staging slabs (declare)");
  }
  slabs_.release(bootstrap_);
  release_node_buffers();
  std::memset(error_host_, 0, sizeof(DeviceError));
  capacity_ = 0;
  slot_capacity_ = 0;
  lamport_capacity_ = 0;
  dma_capacity_ = 0;
  broken_ = false;
  broken_reason_.clear();
  if (max_message_bytes == 0 && lamport_bytes == 0 && max_dma_bytes == 0) return;

  const std::size_t sub_slot = cuda_kernels::sub_slot_bytes_for(max_message_bytes, local_size_);
  const std::size_t slot = sub_slot * static_cast<std::size_t>(local_size_);
  // The Lamport region last, filled with the sentinel: 2 parities x
  // (ranks - 1) sources x the largest Lamport message it may carry (none
  // when the router gave no plan the Lamport protocol).
  const std::size_t lamport_sub =
      lamport_bytes == 0 || local_size_ < 2
          ? 0
          : cuda_kernels::lamport_sub_slot_bytes_for(lamport_bytes, local_size_);
  // The copy-engine region after the slots: `local_size_` areas of a
  // shard each (none without a dma plan).
  const std::size_t dma_area =
      max_dma_bytes == 0 ? 0 : cuda_kernels::dma_area_bytes_for(max_dma_bytes, local_size_);
  const std::size_t dma_offset = cuda_kernels::kSignalAreaBytes + 2 * slot;
  const std::size_t lamport_offset = dma_offset + static_cast<std::size_t>(local_size_) * dma_area;
  std::optional<SlabWord> first_count;
  if (epoch_start)
    first_count = SlabWord{cuda_kernels::one_block_call_count_offset(), *epoch_start};
  slabs_ = IpcSlabs::establish(
      bootstrap_, timeout_,
      lamport_offset + 2 * static_cast<std::size_t>(local_size_ - 1) * lamport_sub, lamport_offset,
      cuda_kernels::kLamportSentinelByte, first_count);
  for (int r = 0; r < local_size_; ++r) peers_.slabs[r] = slabs_.base(r);
  peers_.rank = local_rank_;
  peers_.size = local_size_;
  peers_.slot_bytes = slot;
  peers_.sub_slot_bytes = sub_slot;
  peers_.timeout_ns = static_cast<std::uint64_t>(timeout_.count()) * 1'000'000ull;
  peers_.result_offset = cuda_kernels::result_offset_for(max_message_bytes, local_size_);
  peers_.lamport_offset = lamport_offset;
  peers_.lamport_sub_slot_bytes = lamport_sub;
  peers_.lamport_max_bytes = lamport_sub == 0 ? 0 : lamport_bytes;
  peers_.dma_offset = dma_offset;
  peers_.dma_area_bytes = dma_area;
  peers_.dma_max_bytes = max_dma_bytes;
  if (across_nodes_) allocate_node_buffers(max_message_bytes);
  capacity_ = std::max({max_message_bytes, peers_.lamport_max_bytes, max_dma_bytes});
  slot_capacity_ = max_message_bytes;
  lamport_capacity_ = lamport_bytes;
  dma_capacity_ = max_dma_bytes;
}

// No kernel of any rank may still use the slabs or the mappings about to
// be released (peers write into this rank's slab through theirs). Our
// kernels end within the timeout; an NCCL kernel whose peer never made the
// call does not. The wait is bounded and made by every rank together
// (idle_gpus.hpp): on its Timeout every rank keeps what it holds, as close()
// does on that path, and refuses P2P calls until the next reserve().
void CudaPeerTransport::wait_until_no_kernel_uses_buffers(const char* step) {
  try {
    wait_for_idle_gpus(bootstrap_, device_of(error_host_), timeout_, step);
  } catch (const Timeout&) {
    broken_ = true;
    broken_reason_ = std::string(step) + " timed out: GPU work did not end";
    throw;
  }
}

void CudaPeerTransport::allocate_node_buffers(std::size_t max_message_bytes) {
  // A shard is ceil(count / ranks) elements rounded up to whole 16-byte
  // packs (cuda/shard_geometry.cuh), and the mark follows this rank's part
  // of it: at most bytes / ranks + two packs.
  const std::size_t shard_bytes =
      max_message_bytes / static_cast<std::size_t>(local_size_) + 2 * cuda_kernels::kPackBytes;
  check_cuda(cudaMalloc(&node_shard_, shard_bytes),
             "cudaMalloc of " + std::to_string(shard_bytes) + " bytes for the node's shard");
  const std::size_t reduced_bytes = max_message_bytes + cuda_kernels::kPackBytes;
  check_cuda(cudaMalloc(&node_reduced_, reduced_bytes),
             "cudaMalloc of " + std::to_string(reduced_bytes) +
                 " bytes for the hierarchical fused op's reduced rows");
}

void CudaPeerTransport::release_node_buffers() noexcept {
  // Callers made sure no kernel uses them (reserve() waited for every
  // rank's device; close() for its own).
  if (node_shard_ != nullptr) cudaFree(node_shard_);
  if (node_reduced_ != nullptr) cudaFree(node_reduced_);
  cudaGetLastError();
  node_shard_ = node_reduced_ = nullptr;
}

void CudaPeerTransport::check_error_word(const char* what) {
  if (error_host_ == nullptr) return;
  const auto* word = static_cast<volatile DeviceError*>(error_host_);
  const std::uint32_t code = word->code;
  if (code == 0 || broken_) return;
  broken_ = true;
  // The device wrote `code` last: the other fields are in place.
  DeviceError seen{};
  seen.code = code;
  seen.epoch = word->epoch;
  seen.phase = word->phase;
  seen.peer = word->peer;
  seen.block = word->block;
  seen.peer_mark = word->peer_mark;
  broken_reason_ = describe_device_error(seen, what, global_ranks_, timeout_);
  if (static_cast<ErrorCode>(code) == ErrorCode::unregistered_buffer) {
    throw InvalidUsage(std::string(kBackend) + ": " + broken_reason_ +
                       ". Buffers were deregistered while a captured CUDA graph still reads "
                       "them: capture graphs again after deregister_buffers(), or keep the "
                       "buffers registered. " +
                       std::string(kUnusableUntilReserve));
  }
  throw Timeout(peer_timeout_message(kBackend, broken_reason_));
}

void CudaPeerTransport::begin_call(const char* what, std::size_t message_bytes) {
  // A closed transport refuses the call before its error word is read.
  if (!closed_) check_error_word(what);
  begin_peer_call(kBackend, {closed_, broken_, broken_reason_, capacity_}, what, message_bytes);
}

void CudaPeerTransport::check_launch(cudaError_t status, const char* what) {
  // The message only for a failed launch: a call's path allocates nothing.
  if (status != cudaSuccess) [[unlikely]] {
    check_cuda(status, std::string("launching the ") + what + " kernel");
  }
}

// Zero copy only for an input the peers can read as-is: dense, inside a
// registered buffer, and not overlapping the output (this rank writes its
// output while peers may still read its input).
cuda_kernels::PullSource CudaPeerTransport::pull_source(const AllReduceArgs& args,
                                                        std::size_t bytes) const noexcept {
  if (!args.layout->is_contiguous()) return {};
  const auto in = reinterpret_cast<std::uintptr_t>(args.in);
  const auto out = reinterpret_cast<std::uintptr_t>(args.out);
  if (in < out + bytes && out < in + bytes) return {};
  return registry_.find(args.in, bytes);
}

namespace {

using cuda_kernels::Algorithm;

// The kernel recipe of one plan, and what its calls name in errors. A
// hierarchical plan has two: `recipe` before the step between nodes,
// `after` after it.
class CudaPlanLaunch final : public PlanLaunch {
 public:
  CudaPlanLaunch(const cuda_kernels::LaunchRecipe& r, std::string call_name)
      : recipe(r), what(std::move(call_name)) {}
  std::string describe() const override {
    if (!hierarchical) return cuda_kernels::describe(recipe);
    return cuda_kernels::describe(recipe) + "; across nodes: " + engine + " all-reduce of " +
           std::to_string(exchange_count) + " elements (shard and mark); then " +
           cuda_kernels::describe(after);
  }
  const cuda_kernels::LaunchRecipe recipe;
  const std::string what;  // "all_reduce (one-shot LL)"
  bool hierarchical = false;
  cuda_kernels::LaunchRecipe after{};
  // Elements summed between nodes: this rank's shard to whole packs and its
  // mark (cuda/node_shards.cu); 0 when the shard is empty.
  std::size_t exchange_count = 0;
  std::string engine;  // "NCCL" / "MPI"
};

// The kernels that run (route, protocol); nullopt: this transport has none.
std::optional<Algorithm> algorithm_for(Route route, Protocol protocol) {
  switch (route) {
    case Route::one_shot:
      if (protocol == Protocol::ll) return Algorithm::one_shot_ll;
      if (protocol == Protocol::lamport) return Algorithm::one_shot_lamport;
      if (protocol == Protocol::pull) return Algorithm::pull_one_shot;
      break;
    case Route::two_shot:
      if (protocol == Protocol::staged) return Algorithm::two_shot;
      if (protocol == Protocol::pull) return Algorithm::pull_two_shot;
      if (protocol == Protocol::dma) return Algorithm::two_shot_dma;
      if (protocol == Protocol::lamport) return Algorithm::two_shot_lamport;
      break;
    case Route::fused_one_shot:
      if (protocol == Protocol::lamport) return Algorithm::fused_lamport;
      if (protocol == Protocol::ll) return Algorithm::fused_ll;
      if (protocol == Protocol::staged) return Algorithm::fused_staged;
      break;
    case Route::fused_two_shot:
      if (protocol == Protocol::staged) return Algorithm::fused_two_shot_row_norm;
      if (protocol == Protocol::lamport) return Algorithm::fused_two_shot_lamport_row_norm;
      if (protocol == Protocol::dma) return Algorithm::fused_two_shot_dma_row_norm;
      break;
    case Route::fallback:
    case Route::hierarchical:
      break;
  }
  return std::nullopt;
}

}  // namespace

void CudaPeerTransport::set_launch_shapes(const routing::LaunchShapeTuning& shapes) {
  shapes_ = shapes;
  if (bootstrap_.rank() == 0 && !shapes.one_shot_grid.empty()) {
    log::info(log::Subsystem::transport,
              std::string(kBackend) + ": one-shot grid by message size (bytes:blocks) " +
                  routing::describe_one_shot_grid(shapes.one_shot_grid) +
                  (configured_one_shot_blocks_ > 0 ? ", not applied: one_shot_max_blocks is set"
                                                   : ", the default above"));
  }
}

std::unique_ptr<PlanLaunch> CudaPeerTransport::prepare(const LaunchRequest& request) {
  const auto refuse = [&](const std::string& why) -> std::unique_ptr<PlanLaunch> {
    throw InvalidArgument(std::string(kBackend) + ": cannot prepare a " + to_string(request.route) +
                          " plan on protocol " + to_string(request.protocol) + ": " + why);
  };
  // Copy-engine and Lamport plans have regions of their own; the others
  // stage through the slots.
  const std::size_t room = request.protocol == Protocol::dma       ? dma_capacity_
                           : request.protocol == Protocol::lamport ? lamport_capacity_
                                                                   : slot_capacity_;
  if (closed_ || room == 0 || request.message_bytes > room) {
    refuse_peer_call(kBackend, {closed_, false, {}, room}, "prepare", request.message_bytes);
  }
  if (request.layout == nullptr) refuse("layout is null");
  if (request.route == Route::hierarchical || across_nodes_) {
    if (request.route != Route::hierarchical) refuse("the job spans several nodes");
    if (!across_nodes_) refuse("the job runs on one node");
    if (request.protocol != Protocol::staged) refuse("the hierarchical route stages its packs");
    return prepare_hierarchical(request);
  }
  const bool fused = request.operation == Operation::fused_add_rms_norm;
  const bool fused_route =
      request.route == Route::fused_one_shot || request.route == Route::fused_two_shot;
  if (fused != fused_route) refuse("the route is not one of the operation's");
  auto algorithm = algorithm_for(request.route, request.protocol);
  if (!algorithm) refuse("this transport has no such kernel");
  if (pull_ != (*algorithm == Algorithm::pull_one_shot || *algorithm == Algorithm::pull_two_shot) &&
      !fused) {
    refuse(pull_ ? "the transfer mode is pull" : "the transfer mode is push");
  }
  const auto& layout = *request.layout;
  const auto type = element_type(request.dtype);
  // The staged fused two-shot in one kernel where its rows fit it and are
  // long enough: the norm then reads the reduced rows where they land
  // instead of a second pass.
  if (*algorithm == Algorithm::fused_two_shot_row_norm && kernel_layout(layout).dense &&
      cuda_kernels::fused_two_shot_rows_fits(type, layout.last_dim()) &&
      static_cast<std::size_t>(layout.last_dim()) * element_size(request.dtype) >=
          cuda_kernels::fused_two_shot_rows_min_row_bytes(peers_.size)) {
    algorithm = Algorithm::fused_two_shot_rows;
  }
  // The one-shot's grid for this message (a local choice: its kernels have
  // no per-block flags), as the tuning file's sweep measured it for the
  // one-shot; the Lamport two-shot, which shares the cap, keeps the
  // default; every other kernel ignores it.
  cuda_kernels::PeerSet shape = peers_;
  if (request.route == Route::one_shot) {
    shape.one_shot_max_blocks = routing::one_shot_grid_for(
        configured_one_shot_blocks_, shapes_, request.message_bytes, peers_.one_shot_max_blocks);
  }
  cuda_kernels::LaunchRecipe recipe;
  const cudaError_t status =
      fused ? cuda_kernels::prepare_fused(*algorithm, shape, type, kernel_layout(layout),
                                          layout.numel() / layout.last_dim(), layout.last_dim(),
                                          recipe)
            : cuda_kernels::prepare_all_reduce(*algorithm, shape, type, kernel_layout(layout),
                                               layout.numel(), recipe);
  if (status != cudaSuccess) {
    cudaGetLastError();
    refuse(std::string(cuda_kernels::to_string(*algorithm)) + " cannot carry this message (" +
           cudaGetErrorString(status) + ")");
  }
  if (recipe.pieces > 1 && !dma_streams_) {
    auto streams = std::make_unique<cuda_kernels::DmaStreams>();
    check_cuda(cuda_kernels::create_dma_streams(*streams),
               "creating the copy-engine pipeline's streams and events");
    dma_streams_ = std::move(streams);
  }
  return std::make_unique<CudaPlanLaunch>(
      recipe, std::string(fused ? "fused_add_rms_norm (" : "all_reduce (") +
                  cuda_kernels::to_string(*algorithm) + ")");
}

// Before the step between nodes: the node reduce-scatter of the whole
// message (the fused op's too); after it: the node all-gather into the
// output, or for the fused op into the dense buffer and the row kernel from
// there. The exchange carries this rank's shard: the same length on every
// member of its group (same local rank, same message).
std::unique_ptr<PlanLaunch> CudaPeerTransport::prepare_hierarchical(const LaunchRequest& request) {
  using cuda_kernels::Algorithm;
  const bool fused = request.operation == Operation::fused_add_rms_norm;
  const auto& layout = *request.layout;
  const auto type = element_type(request.dtype);
  const auto kernel_shape = kernel_layout(layout);
  cuda_kernels::LaunchRecipe before;
  cuda_kernels::LaunchRecipe after;
  cudaError_t status = cuda_kernels::prepare_all_reduce(Algorithm::node_reduce_scatter, peers_,
                                                        type, kernel_shape, layout.numel(), before);
  if (status == cudaSuccess) {
    status = fused ? cuda_kernels::prepare_fused(Algorithm::node_all_gather_row_norm, peers_, type,
                                                 kernel_shape, layout.numel() / layout.last_dim(),
                                                 layout.last_dim(), after)
                   : cuda_kernels::prepare_all_reduce(Algorithm::node_all_gather, peers_, type,
                                                      kernel_shape, layout.numel(), after);
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw InvalidArgument(std::string(kBackend) +
                          ": cannot prepare a hierarchical plan: the "
                          "node kernels cannot carry this message (" +
                          cudaGetErrorString(status) + ")");
  }
  auto plan = std::make_unique<CudaPlanLaunch>(
      before, fused ? "fused_add_rms_norm (hierarchical)" : "all_reduce (hierarchical)");
  plan->hierarchical = true;
  plan->after = after;
  const auto shard = cuda_kernels::shard_range(before.count, before.shard_elements, local_rank_);
  const auto pack_elements =
      static_cast<int>(cuda_kernels::kPackBytes / element_size(request.dtype));
  if (shard.end > shard.begin) {
    plan->exchange_count =
        static_cast<std::size_t>(cuda_kernels::node_mark_offset(shard, pack_elements)) + 1;
  }
  plan->engine = across_nodes_->engine();
  return plan;
}

// Node reduce-scatter of `in` into the node shard, the step between nodes
// on it, then `after` with the summed shard as its input.
void CudaPeerTransport::run_hierarchical(const cuda_kernels::LaunchRecipe& before,
                                         const cuda_kernels::LaunchRecipe& after,
                                         std::size_t exchange_count, const char* what,
                                         const void* in, cuda_kernels::CallPointers after_pointers,
                                         DataType dtype, cudaStream_t stream) {
  across_nodes_->check_stream(stream, what);  // before anything is queued
  cuda_kernels::CallPointers pointers;
  pointers.in = in;
  pointers.out = node_shard_;
  check_launch(cuda_kernels::launch(before, peers_, pointers, stream), what);
  // A rank whose shard is empty (short messages) has nothing to add up,
  // and neither has any member of its group (same local rank, same shard).
  if (exchange_count > 0) across_nodes_->sum(node_shard_, exchange_count, dtype, stream, what);
  after_pointers.in = node_shard_;
  check_launch(cuda_kernels::launch(after, peers_, after_pointers, stream), what);
}

bool CudaPeerTransport::all_reduce(const PlanLaunch& launch, const AllReduceArgs& args) {
  // Only this transport's prepare() made the plans the communicator passes.
  const auto& plan = static_cast<const CudaPlanLaunch&>(launch);
  const auto& recipe = plan.recipe;
  if (recipe.count == 0) return false;
  begin_call(plan.what.c_str(), recipe.message_bytes);
  if (plan.hierarchical) {
    cuda_kernels::CallPointers after;
    after.out = args.out;
    run_hierarchical(recipe, plan.after, plan.exchange_count, plan.what.c_str(), args.in, after,
                     args.dtype, static_cast<cudaStream_t>(args.stream));
    return false;
  }
  cuda_kernels::CallPointers pointers;
  pointers.in = args.in;
  pointers.out = args.out;
  pointers.dma = dma_streams_.get();
  const bool pulls =
      recipe.algorithm == Algorithm::pull_one_shot || recipe.algorithm == Algorithm::pull_two_shot;
  if (pulls) pointers.source = pull_source(args, recipe.message_bytes);
  check_launch(
      cuda_kernels::launch(recipe, peers_, pointers, static_cast<cudaStream_t>(args.stream)),
      plan.what.c_str());
  return pulls && pointers.source.buffer != cuda_kernels::kStagedSource;
}

void CudaPeerTransport::register_buffers(std::span<const BufferRegion> buffers) {
  if (closed_) {
    throw InvalidUsage("peerplan cuda backend: register_buffers after close()");
  }
  registry_.add(bootstrap_, buffers, timeout_);
  peers_.registry = registry_.device_table();
}

void CudaPeerTransport::deregister_buffers() {
  if (closed_) return;
  // Every rank has registered (add() is collective), or none has: then
  // nothing is mapped and there is nothing to wait for.
  if (!registry_.empty()) wait_until_no_kernel_uses_buffers("deregister_buffers");
  registry_.clear(bootstrap_, timeout_);
}

void CudaPeerTransport::fused_add_rms_norm(const PlanLaunch& launch, const FusedArgs& args) {
  const auto& plan = static_cast<const CudaPlanLaunch&>(launch);
  const auto& recipe = plan.recipe;
  if (recipe.count == 0) return;
  begin_call(plan.what.c_str(), recipe.message_bytes);
  cuda_kernels::CallPointers pointers;
  if (plan.hierarchical) {
    pointers.out = node_reduced_;  // the dense reduced rows, read by the row kernel
    pointers.inout = args.inout;
    pointers.residual = args.residual;
    pointers.weight = args.weight;
    pointers.eps = args.eps;
    run_hierarchical(recipe, plan.after, plan.exchange_count, plan.what.c_str(), args.inout,
                     pointers, args.dtype, static_cast<cudaStream_t>(args.stream));
    return;
  }
  pointers.inout = args.inout;
  pointers.residual = args.residual;
  pointers.weight = args.weight;
  pointers.eps = args.eps;
  pointers.dma = dma_streams_.get();
  check_launch(
      cuda_kernels::launch(recipe, peers_, pointers, static_cast<cudaStream_t>(args.stream)),
      plan.what.c_str());
}

}  // namespace peerplan::transport::cuda
