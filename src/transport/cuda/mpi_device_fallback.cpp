// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/mpi_device_fallback.hpp"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "collective_kernels.hpp"
#include "core/log.hpp"
#include "peerplan/errors.hpp"
#include "transport/cuda/bounded_wait.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/kernel_args.hpp"
#include "transport/cuda/row_clusters.hpp"
#include "transport/cuda/stream_capture.hpp"
#include "transport/host/mpi_fallback.hpp"

namespace peerplan::transport::cuda {
namespace {

constexpr const char* kContext = "peerplan cuda backend, MPI fallback";

void refuse_capture(cudaStream_t stream, const char* what) {
  if (!capturing(stream)) return;
  throw InvalidUsage(std::string(kContext) + ": " + what +
                     " is not declared (or not admitted by the cutoffs) and the MPI fallback "
                     "cannot run inside CUDA graph capture (MPI runs on the host, at capture "
                     "time, not at replay). Declare this shape so that a P2P route is captured, "
                     "or use the NCCL fallback (Config::fallback / PEERPLAN_FALLBACK=nccl; not "
                     "possible while ranks share a GPU).");
}

}  // namespace

MpiDeviceFallback::MpiDeviceFallback(bootstrap::OwnedComm comm, std::chrono::milliseconds timeout,
                                     RowClusters row_clusters)
    : host_(std::make_unique<host::MpiFallback>(std::move(comm), timeout)), timeout_(timeout) {
  check_cuda(cudaGetDevice(&device_), "cudaGetDevice");
  rows_in_clusters_ = use_row_clusters(row_clusters, device_);
  cuda_kernels::prepare_add_rms_norm(rows_in_clusters_);
  check_cuda(cudaEventCreateWithFlags(&last_use_, cudaEventDisableTiming),
             "creating the MPI fallback's event");
}

MpiDeviceFallback::~MpiDeviceFallback() { close(); }

void MpiDeviceFallback::close() {
  if (closed_) return;
  closed_ = true;
  host_->close();
  release_buffers();
}

void MpiDeviceFallback::release_buffers() noexcept {
  // The last call's copies and kernels may still run on its stream; they
  // end unless something queued before them never does. One deadline for
  // both waits below.
  const auto deadline = TeardownClock::now() + timeout_;
  bool idle = true;
  try {
    idle = poll_until_done([this] { return cudaEventQuery(last_use_); }, timeout_,
                           "waiting for the MPI fallback's last call");
  } catch (const Error&) {
    idle = true;  // a sticky device error: nothing runs on the device any more
  }
  if (!idle) {
    log::warn(std::string(kContext) + ": close: the last fallback call's copies had not run " +
              milliseconds_text(timeout_) +
              " later; its staging buffers stay allocated "
              "(leaked on purpose: a copy may still use them)");
    return;
  }
  const bool holds_memory = pinned_ != nullptr || scratch_ != nullptr;
  if (holds_memory && !device_idle_by(device_, deadline)) {
    log::warn(std::string(kContext) + ": close: other work on the GPU was still running " +
              milliseconds_text(timeout_) +
              " after close() began; the fallback's staging buffers stay allocated (leaked on "
              "purpose: freeing them would wait for that work)");
    return;
  }
  for (void* buffer : retired_pinned_) cudaFreeHost(buffer);
  for (void* buffer : retired_scratch_) cudaFree(buffer);
  retired_pinned_.clear();
  retired_scratch_.clear();
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (last_use_ != nullptr) cudaEventDestroy(last_use_);
  cudaGetLastError();
  pinned_ = scratch_ = nullptr;
  pinned_bytes_ = scratch_bytes_ = 0;
  last_use_ = nullptr;
}

void MpiDeviceFallback::wait_for_stream(cudaStream_t stream, const char* what) {
  if (poll_until_done([stream] { return cudaStreamQuery(stream); }, timeout_,
                      "waiting for the stream")) {
    return;
  }
  throw Timeout(
      std::string(kContext) + ": " + what + ": the work queued on the stream before " +
      "this call did not finish within PEERPLAN_TIMEOUT_MS=" + milliseconds_text(timeout_) +
      " (a kernel before it waits for a peer, or a copy is stuck); this rank did not "
      "take part in the reduction, so the others raise Timeout naming it. Close the "
      "communicator and create a new one.");
}

void MpiDeviceFallback::after_previous_call(cudaStream_t stream, const char* what) {
  check_cuda(cudaStreamWaitEvent(stream, last_use_, 0),
             std::string(what) + ": ordering after the previous MPI fallback call");
}

void MpiDeviceFallback::record_last_use(cudaStream_t stream) {
  check_cuda(cudaEventRecord(last_use_, stream), "recording the MPI fallback's event");
}

void* MpiDeviceFallback::pinned(std::size_t bytes) {
  if (bytes <= pinned_bytes_) return pinned_;
  // Retired, not freed (retired_pinned_): earlier calls' copies may still
  // read it.
  const std::size_t grown = std::max(bytes, 2 * pinned_bytes_);
  void* buffer = nullptr;
  check_cuda(cudaHostAlloc(&buffer, grown, cudaHostAllocDefault),
             "cudaHostAlloc of " + std::to_string(grown) + " bytes for the MPI fallback");
  if (pinned_ != nullptr) retired_pinned_.push_back(pinned_);
  pinned_ = buffer;
  pinned_bytes_ = grown;
  return pinned_;
}

void* MpiDeviceFallback::device_scratch(std::size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  const std::size_t grown = std::max(bytes, 2 * scratch_bytes_);
  void* buffer = nullptr;
  check_cuda(cudaMalloc(&buffer, grown),
             "cudaMalloc of " + std::to_string(grown) + " bytes for the MPI fallback");
  if (scratch_ != nullptr) retired_scratch_.push_back(scratch_);  // as in pinned()
  scratch_ = buffer;
  scratch_bytes_ = grown;
  return scratch_;
}

void MpiDeviceFallback::reduce_staged(const void* source, void* destination, std::size_t bytes,
                                      DataType dtype, cudaStream_t stream, bool fused) {
  void* host = pinned(bytes);
  check_cuda(cudaMemcpyAsync(host, source, bytes, cudaMemcpyDeviceToHost, stream),
             "copying the message to pinned host memory");
  wait_for_stream(stream, fused ? "fused_add_rms_norm" : "all_reduce");
  host_->all_reduce_contiguous(host, dtype, static_cast<std::int64_t>(bytes / element_size(dtype)),
                               fused);
  check_cuda(cudaMemcpyAsync(destination, host, bytes, cudaMemcpyHostToDevice, stream),
             "copying the reduced message back to the GPU");
}

void MpiDeviceFallback::all_reduce(const AllReduceArgs& args) {
  if (closed_) throw InvalidUsage(std::string(kContext) + ": all_reduce after close()");
  if (args.layout == nullptr) throw InvalidArgument(std::string(kContext) + ": layout is null");
  const std::int64_t count = args.layout->numel();
  if (count == 0) {  // still exchanged: a peer's call with elements is a Mismatch
    host_->all_reduce_contiguous(nullptr, args.dtype, 0, false);
    return;
  }
  const auto stream = static_cast<cudaStream_t>(args.stream);
  refuse_capture(stream, "this all_reduce");
  after_previous_call(stream, "all_reduce");
  const std::size_t element_bytes = element_size(args.dtype);
  const std::size_t bytes = static_cast<std::size_t>(count) * element_bytes;
  if (args.layout->is_contiguous()) {
    reduce_staged(args.in, args.out, bytes, args.dtype, stream, false);
  } else {
    void* packed = device_scratch(bytes);
    const auto layout = kernel_layout(*args.layout);
    check_cuda(cuda_kernels::launch_pack(element_bytes, args.in, packed, layout, count, stream),
               "launching the pack kernel");
    reduce_staged(packed, packed, bytes, args.dtype, stream, false);
    check_cuda(cuda_kernels::launch_unpack(element_bytes, packed, args.out, layout, count, stream),
               "launching the unpack kernel");
  }
  record_last_use(stream);
}

void MpiDeviceFallback::fused_add_rms_norm(const FusedArgs& args) {
  if (closed_) throw InvalidUsage(std::string(kContext) + ": fused_add_rms_norm after close()");
  if (args.layout == nullptr) throw InvalidArgument(std::string(kContext) + ": layout is null");
  const std::int64_t count = args.layout->numel();
  if (count == 0) {  // still exchanged: a peer's call with elements is a Mismatch
    host_->all_reduce_contiguous(nullptr, args.dtype, 0, true);
    return;
  }
  const auto stream = static_cast<cudaStream_t>(args.stream);
  refuse_capture(stream, "this fused_add_rms_norm");
  after_previous_call(stream, "fused_add_rms_norm");
  const std::size_t element_bytes = element_size(args.dtype);
  const std::size_t bytes = static_cast<std::size_t>(count) * element_bytes;
  // The reduced message lands in the packed buffer; the add + RMSNorm
  // kernel reads it from there and writes inout and residual, exactly as
  // after the NCCL fallback's all-reduce.
  void* reduced = device_scratch(bytes);
  const auto layout = kernel_layout(*args.layout);
  const void* source = args.inout;
  if (!args.layout->is_contiguous()) {
    check_cuda(cuda_kernels::launch_pack(element_bytes, args.inout, reduced, layout, count, stream),
               "launching the pack kernel");
    source = reduced;
  }
  reduce_staged(source, reduced, bytes, args.dtype, stream, true);
  const std::int64_t hidden = args.layout->last_dim();
  check_cuda(cuda_kernels::launch_add_rms_norm(element_type(args.dtype), reduced, args.inout,
                                               args.residual, args.weight, args.eps, layout,
                                               count / hidden, hidden, rows_in_clusters_, stream),
             "launching the add + RMSNorm kernel");
  record_last_use(stream);
}

}  // namespace peerplan::transport::cuda
