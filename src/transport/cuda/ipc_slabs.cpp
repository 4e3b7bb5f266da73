// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/ipc_slabs.hpp"

#include <cstdint>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "bootstrap/fail_together.hpp"
#include "peerplan/errors.hpp"
#include "transport/cuda/bounded_wait.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/ipc_handles.hpp"

namespace peerplan::transport::cuda {
namespace {

// Fills `slab` (zeros up to `head`, `tail_byte` after) on a stream of its
// own and waits for that alone: a device-wide wait (cudaDeviceSynchronize,
// or cudaMemset on the legacy stream) would also wait for every kernel of
// the process, without a bound, and a fallback kernel whose peer never made
// the call never ends. Returns false when the fill had not finished within
// `bound`: it may still write into the slab.
bool fill_slab(void* slab, std::size_t bytes, std::size_t head, unsigned char tail_byte,
               const std::optional<SlabWord>& word, std::chrono::milliseconds bound) {
  const OwnStream stream("zero-filling the staging slab");
  check_cuda(cudaMemsetAsync(slab, 0, head, stream.get()), "cudaMemset of the staging slab");
  if (head < bytes) {
    check_cuda(
        cudaMemsetAsync(static_cast<char*>(slab) + head, tail_byte, bytes - head, stream.get()),
        "cudaMemset of the staging slab's sentinel region");
  }
  // The word byte by byte (little-endian, as the GPU reads it): a copy
  // from host memory could wait for the stream without the bound below.
  for (std::size_t b = 0; word && b < sizeof word->value; ++b) {
    check_cuda(cudaMemsetAsync(static_cast<char*>(slab) + word->offset + b,
                               static_cast<int>((word->value >> (8 * b)) & 0xffu), 1, stream.get()),
               "writing the staging slab's starting word");
  }
  return stream.finished_within(bound, "zero-filling the staging slab");
}

}  // namespace

IpcSlabs& IpcSlabs::operator=(IpcSlabs&& other) noexcept {
  if (this != &other) {
    release_local();
    bases_ = std::move(other.bases_);
    mapped_ = std::move(other.mapped_);
    own_allocation_ = other.own_allocation_;
    local_rank_ = other.local_rank_;
    bytes_ = other.bytes_;
    other.bases_.clear();
    other.mapped_.clear();
    other.own_allocation_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

IpcSlabs IpcSlabs::establish(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                             std::size_t bytes, std::size_t tail_offset, unsigned char tail_byte,
                             std::optional<SlabWord> word) {
  IpcSlabs slabs;
  slabs.local_rank_ = bootstrap.local_rank();
  slabs.bytes_ = bytes;
  const auto n = static_cast<std::size_t>(bootstrap.local_size());
  std::string error;
  ExportedBuffer mine{};
  bool fill_may_run = false;  // then the slab is leaked on failure, not freed
  try {
    check_cuda(cudaMalloc(&slabs.own_allocation_, bytes),
               "cudaMalloc of a " + std::to_string(bytes) + "-byte staging slab");
    // Zero-filled and complete before anyone can see the handle: a peer
    // must never read a stale flag as a current epoch. The tail (the
    // Lamport region) holds the sentinel instead: a peer's first write
    // there must find it, and a reader must never take a stale byte for data.
    // A fill takes far less than half the timeout; bounded by that, its
    // failure still reaches the exchange below inside the peers' bound, so
    // that every rank fails together.
    const std::size_t head = tail_offset < bytes ? tail_offset : bytes;
    const auto bound = std::max(timeout / 2, std::chrono::milliseconds(1));
    fill_may_run = true;
    if (word && word->offset + sizeof word->value > head) {
      throw InvalidUsage("a slab's starting word must lie in its zero-filled head");
    }
    if (!fill_slab(slabs.own_allocation_, bytes, head, tail_byte, word, bound)) {
      throw CudaError("zero-filling the " + std::to_string(bytes) +
                      "-byte staging slab did not finish within " + milliseconds_text(bound) +
                      " (half of PEERPLAN_TIMEOUT_MS): the GPU is not making progress");
    }
    fill_may_run = false;
    mine = export_buffer(slabs.own_allocation_, bytes);
  } catch (const Error& e) {
    error = e.what();
    mine.ok = 0;
  }
  bootstrap::Blob blob(sizeof mine);
  std::memcpy(blob.data(), &mine, sizeof mine);
  const auto all = bootstrap.local_allgather(blob);

  slabs.bases_.assign(n, nullptr);
  slabs.mapped_.assign(n, nullptr);
  if (error.empty()) {
    try {
      for (std::size_t r = 0; r < n; ++r) {
        if (static_cast<int>(r) == slabs.local_rank_) {
          slabs.bases_[r] = slabs.own_allocation_;
          continue;
        }
        ExportedBuffer peer{};
        if (all[r].size() != sizeof peer) throw CudaError("malformed IPC handle from a peer");
        std::memcpy(&peer, all[r].data(), sizeof peer);
        if (!peer.ok) continue;  // that rank fails too; the agreement below reports it
        void* mapped = nullptr;
        check_cuda(cudaIpcOpenMemHandle(&mapped, peer.handle, cudaIpcMemLazyEnablePeerAccess),
                   "cudaIpcOpenMemHandle of local rank " + std::to_string(r) + "'s slab");
        slabs.mapped_[r] = mapped;
        slabs.bases_[r] = static_cast<char*>(mapped) + peer.offset;
      }
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (auto failures = bootstrap::gather_failures(
          bootstrap, error.empty() ? std::nullopt : std::optional<std::string>(error))) {
    // A fill that may still run writes into the slab; this rank mapped no
    // peer (it failed before), so forgetting it leaks the slab alone.
    if (fill_may_run) slabs.abandon();
    slabs.release_local();
    throw CudaError("peerplan cuda backend: sharing staging slabs through CUDA IPC failed (" +
                    failures->message + ")");
  }
  return slabs;
}

void IpcSlabs::unmap_peers() noexcept {
  for (void*& mapped : mapped_) {
    if (mapped != nullptr) cudaIpcCloseMemHandle(mapped);
    mapped = nullptr;
  }
}

void IpcSlabs::release(bootstrap::Bootstrap& bootstrap) {
  unmap_peers();
  bootstrap.barrier();
  release_local();
}

void IpcSlabs::release_local() noexcept {
  unmap_peers();
  if (own_allocation_ != nullptr) cudaFree(own_allocation_);
  own_allocation_ = nullptr;
  bases_.clear();
  mapped_.clear();
  bytes_ = 0;
}

void IpcSlabs::abandon() noexcept {
  own_allocation_ = nullptr;
  bases_.clear();
  mapped_.clear();
  bytes_ = 0;
}

}  // namespace peerplan::transport::cuda
