// SPDX-License-Identifier: Apache-2.0
// One POSIX shared-memory object mapped into this process. The creating
// rank owns the name: it removes it (shm_unlink) as soon as every peer has
// mapped the object, and the destructor removes it if that never happened
// (an exception during setup), so /dev/shm keeps nothing once setup is
// over, whatever happens to the processes afterwards.
#pragma once

#include <cstddef>
#include <string>

namespace peerplan::transport::host {

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // Creates `name` (must not exist), sizes it to `bytes` with its space
  // reserved up front (so a full /dev/shm fails here, not with SIGBUS
  // later), maps it and zero-fills it. Throws SystemError.
  static ShmSegment create(const std::string& name, std::size_t bytes);
  // Maps the existing object `name`, which must hold at least `bytes`.
  // Throws SystemError.
  static ShmSegment open(const std::string& name, std::size_t bytes);

  // Removes the name (owner only; idempotent). The mapping stays valid.
  void unlink() noexcept;
  // Unmaps (and unlinks if still owned). Idempotent.
  void reset() noexcept;

  std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  const std::string& name() const noexcept { return name_; }
  bool mapped() const noexcept { return data_ != nullptr; }

 private:
  std::string name_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool owns_name_ = false;
};

}  // namespace peerplan::transport::host
