#include "transport/cuda/nccl_fallback.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collective_kernels.hpp"
#include "core/log.hpp"
#include "peerplan/errors.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/row_clusters.hpp"
#include "transport/cuda/kernel_args.hpp"

namespace peerplan::transport::cuda {
namespace {

ncclDataType_t nccl_type(DataType dtype) {
  switch (dtype) {
    case DataType::f16: return ncclFloat16;
    case DataType::bf16: return ncclBfloat16;
    case DataType::f32: break;
  }
  return ncclFloat32;
}

// NVLink multicast (NVLS) must stay off: on shared hosts a program using it
// can take the GPUs out of service. peerplan never needs it.
void keep_nvls_off() {
  const char* value = std::getenv("NCCL_NVLS_ENABLE");
  if (value != nullptr && std::string(value) != "0") {
    log::warn(std::string("NCCL_NVLS_ENABLE=") + value +
              " overridden to 0: peerplan's NCCL communicator never uses NVLink multicast");
  }
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

NcclFallback::NcclFallback(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds) {
  keep_nvls_off();
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
  // Bounded: every rank is here before NCCL's own (unbounded) rendezvous.
  bootstrap.barrier();
  check_nccl(ncclCommInitRank(&comm_, bootstrap.size(), id, bootstrap.rank()),
             "ncclCommInitRank");
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  try {
    rows_in_clusters_ = use_row_clusters(device);
  } catch (const InvalidArgument&) {
    // The P2P transport reports a malformed PEERPLAN_ROW_CLUSTERS on every
    // rank at once; here, after NCCL's rendezvous, a rank must not throw
    // alone. The choice changes speed only, never the bits.
    rows_in_clusters_ = cuda_kernels::rows_in_clusters_supported(device);
  }
}

NcclFallback::~NcclFallback() {
  if (comm_ != nullptr) ncclCommAbort(comm_);  // not closed: peers may be gone
  comm_ = nullptr;
  if (scratch_ != nullptr) cudaFree(scratch_);
}

void NcclFallback::close() {
  if (comm_ != nullptr) {
    ncclCommFinalize(comm_);
    ncclCommDestroy(comm_);
    comm_ = nullptr;
  }
  if (scratch_ != nullptr) {
    cudaDeviceSynchronize();
    cudaFree(scratch_);
  }
  scratch_ = nullptr;
  scratch_bytes_ = 0;
}

void* NcclFallback::scratch(std::size_t bytes, cudaStream_t stream, const char* what) {
  if (bytes <= scratch_bytes_) return scratch_;
  if (capturing(stream)) {
    throw InvalidUsage(std::string("peerplan cuda backend: ") + what +
                       " of a non-contiguous tensor on the fallback needs a " +
                       std::to_string(bytes) +
                       "-byte scratch buffer, which cannot be allocated during CUDA graph "
                       "capture; declare this shape (P2P routes need no scratch), make it "
                       "contiguous, or make one eager call of this size before capturing");
  }
  check_cuda(cudaStreamSynchronize(stream), "synchronising before growing the scratch buffer");
  if (scratch_ != nullptr) cudaFree(scratch_);
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  check_cuda(cudaMalloc(&scratch_, bytes), "cudaMalloc of the fallback's scratch buffer");
  scratch_bytes_ = bytes;
  return scratch_;
}

void NcclFallback::all_reduce(const AllReduceArgs& args) {
  if (comm_ == nullptr) throw InvalidUsage("peerplan cuda backend: all_reduce after close()");
  if (args.layout == nullptr) throw InvalidArgument("peerplan cuda backend: all_reduce: layout is null");
  const std::int64_t count = args.layout->numel();
  const auto stream = static_cast<cudaStream_t>(args.stream);
  const auto type = nccl_type(args.dtype);
  if (args.layout->is_contiguous() || count == 0) {
    check_nccl(ncclAllReduce(args.in, args.out, static_cast<std::size_t>(count), type, ncclSum,
                             comm_, stream),
               "ncclAllReduce");
    return;
  }
  const std::size_t bytes = element_size(args.dtype);
  void* buffer = scratch(static_cast<std::size_t>(count) * bytes, stream, "all_reduce");
  const auto layout = kernel_layout(*args.layout);
  check_cuda(cuda_kernels::launch_pack(bytes, args.in, buffer, layout, count, stream),
             "launching the pack kernel");
  check_nccl(ncclAllReduce(buffer, buffer, static_cast<std::size_t>(count), type, ncclSum, comm_,
                           stream),
             "ncclAllReduce");
  check_cuda(cuda_kernels::launch_unpack(bytes, buffer, args.out, layout, count, stream),
             "launching the unpack kernel");
}

void NcclFallback::fused_add_rms_norm(const FusedArgs& args) {
  if (comm_ == nullptr) throw InvalidUsage("peerplan cuda backend: fused_add_rms_norm after close()");
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
  check_nccl(ncclAllReduce(reduced, reduced, static_cast<std::size_t>(count), type, ncclSum,
                           comm_, stream),
             "ncclAllReduce");
  const std::int64_t hidden = args.layout->last_dim();
  check_cuda(cuda_kernels::launch_add_rms_norm(element_type(args.dtype), reduced, args.inout,
                                               args.residual, args.weight, args.eps, layout,
                                               count / hidden, hidden, rows_in_clusters_,
                                               stream),
             "launching the add + RMSNorm kernel");
}

}  // namespace peerplan::transport::cuda
