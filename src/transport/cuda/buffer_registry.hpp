// SPDX-License-Identifier: Apache-2.0
// Application buffers registered for zero-copy peer reads (pull calls).
//
// Each rank registers its own device buffers; every rank maps every peer's
// through CUDA IPC and keeps a device table [local rank][index] of where
// they are readable from its GPU (PeerSet::registry). At a pull call a rank
// looks up its input here (host side, allocation-free) and tells its peers
// "buffer j, offset o"; they read it in place.
//
// Indices are never reused within one registry: a graph captured while a
// buffer was registered and replayed after deregister_all() finds a null
// entry and fails with a clear error instead of reading another buffer.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "collective_kernels.hpp"
#include "peerplan/buffer_region.hpp"

namespace peerplan::transport::cuda {

class BufferRegistry {
 public:
  BufferRegistry() = default;
  BufferRegistry(const BufferRegistry&) = delete;
  BufferRegistry& operator=(const BufferRegistry&) = delete;
  ~BufferRegistry() { release_local(); }

  // Collective over the node-local ranks. Checks this rank's regions (device
  // memory of the current device, inside one allocation, exportable), then
  // exchanges and maps every rank's. Throws on every rank when any rank
  // failed (its own message says why), leaving the registry unchanged.
  // The device table's upload waits for nothing but itself, up to `timeout`.
  void add(bootstrap::Bootstrap& bootstrap, std::span<const BufferRegion> regions,
           std::chrono::milliseconds timeout);
  // Collective: forgets (and unmaps) every registration. The caller first
  // makes sure that no kernel of any rank still reads through the mappings
  // (wait_for_idle_gpus, idle_gpus.hpp): clear() does not wait for the GPU.
  void clear(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout);
  // Local only (peers may be gone). Idempotent.
  void release_local() noexcept;
  // Forgets every mapping and the device table without closing or freeing
  // them, for a teardown that could not make sure no kernel still reads
  // them: leaked on purpose.
  void abandon() noexcept;

  // Where [ptr, ptr + bytes) lies among this rank's registered buffers, or
  // a staged source when it is not wholly inside one. Allocation-free.
  cuda_kernels::PullSource find(const void* ptr, std::size_t bytes) const noexcept;

  // True until the first add(), on every rank alike (add() is collective).
  bool empty() const noexcept { return table_.empty(); }
  // Device table for PeerSet::registry; null until the first add().
  void* const* device_table() const noexcept { return device_table_; }
  std::size_t own_count() const noexcept { return own_.size(); }

 private:
  struct OwnBuffer {
    std::uintptr_t begin;
    std::uintptr_t end;
    std::uint32_t index;
  };
  // One cudaIpcOpenMemHandle per peer allocation: a handle may be opened
  // only once per process, and several buffers may share an allocation.
  struct Mapping {
    int rank;
    std::array<char, sizeof(cudaIpcMemHandle_t)> handle;
    void* base;
    int users;
  };

  // Position in mappings_ of rank's allocation behind `handle`, opened on
  // first use; counts one more user.
  std::size_t map(int rank, const cudaIpcMemHandle_t& handle);
  void unmap_all() noexcept;
  void upload_table(const std::vector<void*>& table, std::chrono::milliseconds timeout);

  std::vector<OwnBuffer> own_;             // sorted by begin
  std::vector<void*> table_;               // [local rank][kMaxRegisteredBuffers]
  std::vector<std::uint32_t> next_index_;  // per local rank: first unused index
  std::vector<Mapping> mappings_;
  void** device_table_ = nullptr;
  int local_rank_ = 0;
  int local_size_ = 0;
};

}  // namespace peerplan::transport::cuda
