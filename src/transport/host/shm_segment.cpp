// SPDX-License-Identifier: Apache-2.0
#include "transport/host/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "peerplan/errors.hpp"

namespace peerplan::transport::host {
namespace {

[[noreturn]] void throw_os_error(const std::string& what, const std::string& name,
                                 std::size_t bytes, int error) {
  std::string message = "peerplan host backend: " + what + " of shared-memory segment \"" + name +
                        "\" (" + std::to_string(bytes) + " bytes) failed: " + std::strerror(error) +
                        " (errno " + std::to_string(error) + ").";
  if (error == ENOSPC || error == ENOMEM || error == EFBIG || error == EFAULT) {
    message +=
        " Shared memory lives in /dev/shm: check its free space (df -h /dev/shm); in a "
        "container raise it (docker run --shm-size=1g, Kubernetes: an emptyDir with "
        "medium Memory), or lower PEERPLAN_TWO_SHOT_MAX_BYTES / PEERPLAN_ONE_SHOT_MAX_BYTES "
        "so that smaller staging slots suffice.";
  } else if (error == EACCES || error == EPERM || error == EROFS) {
    message += " Check that /dev/shm is mounted writable for this user.";
  } else if (error == ENOENT) {
    message +=
        " The owning rank removed it or never created it; is /dev/shm shared by "
        "all ranks of this node (same container / mount namespace)?";
  } else {
    message += " Check /dev/shm (mounted, writable, free space).";
  }
  message +=
      " PEERPLAN_DISABLE_P2P=1 avoids shared memory entirely (every call then "
      "goes to the MPI fallback).";
  throw SystemError(message);
}

// Closes a file descriptor when leaving scope; the mapping keeps the object.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owns_name_(std::exchange(other.owns_name_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owns_name_ = std::exchange(other.owns_name_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() { reset(); }

ShmSegment ShmSegment::create(const std::string& name, std::size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw_os_error("shm_open(O_CREAT|O_EXCL)", name, bytes, errno);
  FdCloser closer{fd};
  ShmSegment segment;
  segment.name_ = name;
  segment.owns_name_ = true;  // from here on the destructor removes the name
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    throw_os_error("ftruncate", name, bytes, errno);
  }
  // Reserve the pages now: tmpfs otherwise allocates on first touch and a
  // full /dev/shm would kill the process with SIGBUS in the middle of a call.
  const int reserve_error = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (reserve_error != 0 && reserve_error != EOPNOTSUPP && reserve_error != EINVAL) {
    throw_os_error("posix_fallocate", name, bytes, reserve_error);
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) throw_os_error("mmap", name, bytes, errno);
  segment.data_ = static_cast<std::byte*>(data);
  segment.size_ = bytes;
  // Zero before the name is published: peers must never see stale flags.
  std::memset(data, 0, bytes);
  return segment;
}

ShmSegment ShmSegment::open(const std::string& name, std::size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw_os_error("shm_open", name, bytes, errno);
  FdCloser closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw_os_error("fstat", name, bytes, errno);
  if (info.st_size < static_cast<off_t>(bytes)) {
    throw SystemError("peerplan host backend: shared-memory segment \"" + name + "\" holds " +
                      std::to_string(info.st_size) + " bytes, expected at least " +
                      std::to_string(bytes) +
                      "; another job may be using the same name (report this as a bug).");
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) throw_os_error("mmap", name, bytes, errno);
  ShmSegment segment;
  segment.name_ = name;
  segment.data_ = static_cast<std::byte*>(data);
  segment.size_ = bytes;
  return segment;
}

void ShmSegment::unlink() noexcept {
  if (owns_name_) {
    ::shm_unlink(name_.c_str());
    owns_name_ = false;
  }
}

void ShmSegment::reset() noexcept {
  unlink();
  if (data_ != nullptr) {
    ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
}

}  // namespace peerplan::transport::host
