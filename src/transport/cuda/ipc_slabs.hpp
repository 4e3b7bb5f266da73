// SPDX-License-Identifier: Apache-2.0
// One device buffer per node-local rank, mapped into every peer through
// CUDA IPC. Handles are taken of the allocation's base plus an offset, so
// a buffer sub-allocated by a caching allocator can be shared the same way.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace peerplan::transport::cuda {

// A 32-bit word that establish() writes into the zero-filled head after
// the fill (a test's starting epoch count: test_epoch_start.hpp).
struct SlabWord {
  std::size_t offset = 0;
  std::uint32_t value = 0;
};

class IpcSlabs {
 public:
  IpcSlabs() = default;
  IpcSlabs(IpcSlabs&& other) noexcept { *this = std::move(other); }
  IpcSlabs& operator=(IpcSlabs&& other) noexcept;
  IpcSlabs(const IpcSlabs&) = delete;
  IpcSlabs& operator=(const IpcSlabs&) = delete;
  ~IpcSlabs() { release_local(); }

  // Collective over the ranks of `bootstrap` (one node): each allocates
  // `bytes` on its current device and zero-fills it BEFORE publishing its
  // handle (on a stream of its own, waited for up to half of `timeout`:
  // other GPU work is not waited for), then maps every peer's. Bytes from
  // `tail_offset` to the end get `tail_byte` instead (the Lamport one-shot's
  // sentinel region), also before the handle is published, and so is
  // `word` where given. Every rank makes the same bootstrap calls whatever fails, and throws CudaError on every
  // rank when any rank failed (naming the ranks; the failing rank's own
  // message says why).
  static IpcSlabs establish(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout,
                            std::size_t bytes,
                            std::size_t tail_offset = static_cast<std::size_t>(-1),
                            unsigned char tail_byte = 0,
                            std::optional<SlabWord> word = std::nullopt);

  bool empty() const noexcept { return bases_.empty(); }
  std::size_t bytes() const noexcept { return bytes_; }
  // Device pointer of local rank r's slab, valid on this rank's device.
  void* base(int local_rank) const noexcept { return bases_[static_cast<std::size_t>(local_rank)]; }

  // Collective: unmaps the peers, waits until every rank has unmapped
  // (bounded barrier), then frees this rank's own buffer, so that no
  // mapping outlives the memory it points to.
  void release(bootstrap::Bootstrap& bootstrap);
  // Local only (peers may be gone): unmaps and frees. Idempotent.
  void release_local() noexcept;
  // Forgets the slabs without unmapping or freeing them, for a teardown
  // that could not make sure no kernel still uses them: leaked on purpose.
  void abandon() noexcept;

 private:
  void unmap_peers() noexcept;

  std::vector<void*> bases_;   // by local rank; own is the allocation
  std::vector<void*> mapped_;  // by local rank: what cudaIpcOpenMemHandle returned (null for own)
  void* own_allocation_ = nullptr;
  int local_rank_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace peerplan::transport::cuda
