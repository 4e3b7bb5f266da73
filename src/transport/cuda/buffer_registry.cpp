// SPDX-License-Identifier: Apache-2.0
#include "transport/cuda/buffer_registry.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>

#include "bootstrap/fail_together.hpp"
#include "peerplan/errors.hpp"
#include "transport/cuda/bounded_wait.hpp"
#include "transport/cuda/cuda_check.hpp"
#include "transport/cuda/ipc_handles.hpp"

namespace peerplan::transport::cuda {
namespace {

using cuda_kernels::kMaxRegisteredBuffers;

std::string describe(const BufferRegion& region, std::size_t i) {
  std::ostringstream out;
  out << "buffer " << i << " (" << region.data << ", " << region.bytes << " bytes)";
  return out.str();
}

// Throws InvalidArgument saying what to change, CudaError when the runtime
// refuses to export a buffer that looked valid.
ExportedBuffer check_and_export(const BufferRegion& region, std::size_t i, int device) {
  const std::string what = "register_buffers: " + describe(region, i);
  if (region.data == nullptr || region.bytes == 0) {
    throw InvalidArgument(what +
                          " is empty; pass device buffers with a non-null pointer and "
                          "a positive size");
  }
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, region.data) != cudaSuccess) cudaGetLastError();
  if (attributes.type != cudaMemoryTypeDevice) {
    throw InvalidArgument(what + " is not device memory (" +
                          (attributes.type == cudaMemoryTypeManaged ? "managed memory"
                           : attributes.type == cudaMemoryTypeHost  ? "pinned host memory"
                                                                    : "not known to CUDA") +
                          "); register memory from cudaMalloc or an allocator built on it");
  }
  if (attributes.device != device) {
    throw InvalidArgument(what + " lives on GPU " + std::to_string(attributes.device) +
                          " but this rank's communicator uses GPU " + std::to_string(device));
  }
  const AllocationRange allocation = allocation_of(region.data);
  const auto begin = reinterpret_cast<std::uintptr_t>(region.data);
  const auto allocation_end = reinterpret_cast<std::uintptr_t>(allocation.base) + allocation.bytes;
  if (allocation.bytes != 0 && begin + region.bytes > allocation_end) {
    throw InvalidArgument(what + " runs " + std::to_string(begin + region.bytes - allocation_end) +
                          " bytes past the end of its allocation; register at most the "
                          "allocated bytes");
  }
  try {
    return export_buffer(region.data, region.bytes);
  } catch (const CudaError& e) {
    throw CudaError(what +
                    " cannot be shared through CUDA IPC (memory from cudaMallocAsync "
                    "pools or cuMemCreate is not; use cudaMalloc-based memory): " +
                    e.what());
  }
}

}  // namespace

std::size_t BufferRegistry::map(int rank, const cudaIpcMemHandle_t& handle) {
  std::array<char, sizeof(cudaIpcMemHandle_t)> key{};
  std::memcpy(key.data(), &handle, key.size());
  for (std::size_t m = 0; m < mappings_.size(); ++m) {
    if (mappings_[m].rank == rank && mappings_[m].handle == key) {
      ++mappings_[m].users;
      return m;
    }
  }
  void* base = nullptr;
  check_cuda(cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess),
             "cudaIpcOpenMemHandle of a buffer registered by local rank " + std::to_string(rank));
  mappings_.push_back(Mapping{rank, key, base, 1});
  return mappings_.size() - 1;
}

void BufferRegistry::add(bootstrap::Bootstrap& bootstrap, std::span<const BufferRegion> regions,
                         std::chrono::milliseconds timeout) {
  if (table_.empty()) {
    local_rank_ = bootstrap.local_rank();
    local_size_ = bootstrap.local_size();
    table_.assign(static_cast<std::size_t>(local_size_) * kMaxRegisteredBuffers, nullptr);
    next_index_.assign(static_cast<std::size_t>(local_size_), 0);
  }
  // Every rank makes the same bootstrap calls whatever fails locally.
  std::string error;
  std::vector<ExportedBuffer> mine(regions.size());
  try {
    const std::size_t free_indices =
        kMaxRegisteredBuffers - next_index_[static_cast<std::size_t>(local_rank_)];
    if (regions.size() > free_indices) {
      throw InvalidArgument("register_buffers: " + std::to_string(regions.size()) +
                            " buffers, but only " + std::to_string(free_indices) + " of " +
                            std::to_string(kMaxRegisteredBuffers) +
                            " registrations are left on this communicator (indices are not "
                            "reused); register one large pool instead of many small buffers, "
                            "or create a new communicator");
    }
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    for (std::size_t i = 0; i < regions.size(); ++i)
      mine[i] = check_and_export(regions[i], i, device);
  } catch (const Error& e) {
    error = e.what();
  }
  bootstrap::Blob blob(sizeof(std::int32_t) + mine.size() * sizeof(ExportedBuffer));
  const std::int32_t ok = error.empty() ? 1 : 0;
  std::memcpy(blob.data(), &ok, sizeof ok);
  if (!mine.empty()) {
    std::memcpy(blob.data() + sizeof ok, mine.data(), mine.size() * sizeof(ExportedBuffer));
  }
  const auto all = bootstrap.local_allgather(blob);

  struct Entry {
    std::size_t slot;
    void* address;
  };
  std::vector<Entry> entries;
  std::vector<std::uint32_t> counts(all.size(), 0);
  std::vector<std::size_t> touched;  // mappings_ positions used by this call
  bool uploaded = false;
  bool every_rank_ok = true;
  for (const auto& b : all) {
    std::int32_t rank_ok = 0;
    if (b.size() >= sizeof rank_ok) std::memcpy(&rank_ok, b.data(), sizeof rank_ok);
    every_rank_ok = every_rank_ok && rank_ok == 1;
  }
  if (error.empty() && every_rank_ok) {
    try {
      for (std::size_t r = 0; r < all.size(); ++r) {
        const std::size_t n = (all[r].size() - sizeof(std::int32_t)) / sizeof(ExportedBuffer);
        counts[r] = static_cast<std::uint32_t>(n);
        if (next_index_[r] + n > static_cast<std::size_t>(kMaxRegisteredBuffers)) {
          throw InvalidArgument("register_buffers: local rank " + std::to_string(r) +
                                " registers more buffers than its table holds");
        }
        for (std::size_t i = 0; i < n; ++i) {
          ExportedBuffer e{};
          std::memcpy(&e, all[r].data() + sizeof(std::int32_t) + i * sizeof e, sizeof e);
          void* address = nullptr;
          if (static_cast<int>(r) == local_rank_) {
            address = regions[i].data;
          } else {
            const std::size_t m = map(static_cast<int>(r), e.handle);
            touched.push_back(m);
            address = static_cast<char*>(mappings_[m].base) + e.offset;
          }
          entries.push_back({r * kMaxRegisteredBuffers + next_index_[r] + i, address});
        }
      }
      // Uploaded before the agreement: a failure here is still everyone's.
      std::vector<void*> next_table = table_;
      for (const auto& e : entries) next_table[e.slot] = e.address;
      upload_table(next_table, timeout);
      uploaded = true;
    } catch (const Error& e) {
      error = e.what();
    }
  }
  // A rank that skipped mapping because another rank failed did not fail.
  const auto failures = bootstrap::gather_failures(
      bootstrap, error.empty() ? std::nullopt : std::optional<std::string>(error));
  if (failures) {
    if (uploaded) {
      try {
        upload_table(table_, timeout);
      } catch (const Error&) {
        // The old entries stay valid mappings; only new slots could differ,
        // and no call names them (their indices were never handed out).
      }
    }
    for (std::size_t m : touched) --mappings_[m].users;
    for (auto it = mappings_.begin(); it != mappings_.end();) {
      if (it->users > 0) {
        ++it;
        continue;
      }
      cudaIpcCloseMemHandle(it->base);
      it = mappings_.erase(it);
    }
    throw InvalidArgument("register_buffers failed (" + failures->message +
                          "); nothing was registered");
  }
  for (const auto& e : entries) table_[e.slot] = e.address;
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const auto begin = reinterpret_cast<std::uintptr_t>(regions[i].data);
    own_.push_back(
        {begin, begin + regions[i].bytes,
         next_index_[static_cast<std::size_t>(local_rank_)] + static_cast<std::uint32_t>(i)});
  }
  std::sort(own_.begin(), own_.end(),
            [](const OwnBuffer& a, const OwnBuffer& b) { return a.begin < b.begin; });
  for (std::size_t r = 0; r < counts.size(); ++r) next_index_[r] += counts[r];
}

// On a stream of its own, waited for up to `timeout`: a copy on the legacy
// stream (cudaMemcpy) would wait for the kernels of every blocking stream,
// which may never end (a kernel of another library, a fallback call a peer
// never made). The entries it rewrites hold the same values as before, so a
// kernel that reads the table meanwhile finds the same mappings.
void BufferRegistry::upload_table(const std::vector<void*>& table,
                                  std::chrono::milliseconds timeout) {
  const std::size_t bytes = table.size() * sizeof(void*);
  if (device_table_ == nullptr) {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_table_), bytes),
               "cudaMalloc of the registered-buffer table (register buffers outside CUDA graph "
               "capture)");
  }
  const OwnStream stream("the registered-buffer table");
  // From pageable memory: the call returns once `table` has been staged.
  check_cuda(
      cudaMemcpyAsync(device_table_, table.data(), bytes, cudaMemcpyHostToDevice, stream.get()),
      "uploading the registered-buffer table (register buffers outside CUDA graph capture)");
  const bool finished = stream.finished_within(timeout, "uploading the registered-buffer table");
  if (!finished) {
    throw CudaError("uploading the registered-buffer table (" + std::to_string(bytes) +
                    " bytes) did not finish within " + milliseconds_text(timeout) +
                    " (PEERPLAN_TIMEOUT_MS): the GPU is not making progress");
  }
}

void BufferRegistry::clear(bootstrap::Bootstrap& bootstrap, std::chrono::milliseconds timeout) {
  if (!table_.empty()) {
    unmap_all();
    std::fill(table_.begin(), table_.end(), nullptr);
    own_.clear();
    if (device_table_ != nullptr) upload_table(table_, timeout);
  }
  bootstrap.barrier();
}

void BufferRegistry::unmap_all() noexcept {
  for (auto& m : mappings_) cudaIpcCloseMemHandle(m.base);
  mappings_.clear();
}

void BufferRegistry::release_local() noexcept {
  unmap_all();
  if (device_table_ != nullptr) cudaFree(device_table_);
  device_table_ = nullptr;
  table_.clear();
  own_.clear();
  next_index_.clear();
}

void BufferRegistry::abandon() noexcept {
  mappings_.clear();
  device_table_ = nullptr;
  table_.clear();
  own_.clear();
  next_index_.clear();
}

cuda_kernels::PullSource BufferRegistry::find(const void* ptr, std::size_t bytes) const noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = std::upper_bound(own_.begin(), own_.end(), begin,
                             [](std::uintptr_t p, const OwnBuffer& b) { return p < b.begin; });
  // Registrations may overlap: look back over every buffer starting at or
  // before ptr (a handful at most in practice).
  while (it != own_.begin()) {
    --it;
    if (begin + bytes <= it->end) {
      return cuda_kernels::PullSource{it->index, 0, begin - it->begin};
    }
  }
  return cuda_kernels::PullSource{};
}

}  // namespace peerplan::transport::cuda
