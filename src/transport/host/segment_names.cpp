// SPDX-License-Identifier: Apache-2.0
#include "transport/host/segment_names.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <limits>
#include <memory>

#include "core/log.hpp"

namespace peerplan::transport::host {
namespace {

constexpr std::string_view kLead = "peerplan-";
constexpr std::size_t kNonceDigits = 16;

bool is_hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Parses the decimal number at the front of `text` (at least one digit, no
// sign, no leading zero unless it is "0") and drops it from `text`.
template <class Number>
std::optional<Number> take_number(std::string_view& text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const auto length = static_cast<std::size_t>(end - text.data());
  if (error != std::errc{} || length == 0 || (text[0] == '0' && length > 1) || text[0] == '-') {
    return std::nullopt;
  }
  text.remove_prefix(length);
  return value;
}

bool take(std::string_view& text, std::string_view expected) {
  if (text.substr(0, expected.size()) != expected) return false;
  text.remove_prefix(expected.size());
  return true;
}

// Whether the process `pid` of our pid namespace is known not to exist.
bool creator_is_gone(long pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max() || pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

std::uint64_t own_pid_namespace() noexcept {
  struct stat info {};
  if (::stat("/proc/self/ns/pid", &info) != 0) return 0;
  return static_cast<std::uint64_t>(info.st_ino);
}

std::string job_segment_prefix(std::uint64_t nonce) {
  static const char digits[] = "0123456789abcdef";
  std::string hex(kNonceDigits, '0');
  for (int i = static_cast<int>(kNonceDigits) - 1; i >= 0; --i, nonce >>= 4) {
    hex[static_cast<std::size_t>(i)] = digits[nonce & 0xf];
  }
  return "/" + std::string(kLead) + hex + "-";
}

std::string creator_segment_prefix(const std::string& job_prefix, std::uint64_t pid_namespace,
                                   long pid) {
  return job_prefix + "n" + std::to_string(pid_namespace) + "-p" + std::to_string(pid) + "-";
}

std::optional<SegmentCreator> parse_segment_creator(std::string_view name) {
  if (!take(name, kLead)) return std::nullopt;
  if (name.size() < kNonceDigits) return std::nullopt;
  for (std::size_t i = 0; i < kNonceDigits; ++i) {
    if (!is_hex_digit(name[i])) return std::nullopt;
  }
  name.remove_prefix(kNonceDigits);
  if (!take(name, "-n")) return std::nullopt;
  const auto pid_namespace = take_number<std::uint64_t>(name);
  if (!pid_namespace || !take(name, "-p")) return std::nullopt;
  const auto pid = take_number<long>(name);
  if (!pid || !take(name, "-") || name.empty()) return std::nullopt;
  return SegmentCreator{*pid_namespace, *pid};
}

std::vector<std::string> remove_stale_segments() noexcept {
  std::vector<std::string> removed;
  try {
    const std::uint64_t own_namespace = own_pid_namespace();
    if (own_namespace == 0) return removed;  // cannot tell whose pids the names hold
    const std::unique_ptr<DIR, int (*)(DIR*)> open_directory(::opendir("/dev/shm"), ::closedir);
    DIR* const directory = open_directory.get();
    if (directory == nullptr) return removed;
    const uid_t uid = ::geteuid();
    while (const dirent* entry = ::readdir(directory)) {
      const std::string name = entry->d_name;
      const auto creator = parse_segment_creator(name);
      if (!creator || creator->pid_namespace != own_namespace) continue;
      struct stat info {};
      if (::fstatat(::dirfd(directory), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISREG(info.st_mode) || info.st_uid != uid) {
        continue;
      }
      if (!creator_is_gone(creator->pid)) continue;
      // Another rank of this node may remove it at the same moment: only
      // the one whose unlink succeeds reports it.
      if (::shm_unlink(("/" + name).c_str()) != 0) continue;
      log::info(log::Subsystem::transport,
                "removed the stale shared-memory segment /dev/shm/" + name + " (" +
                    std::to_string(info.st_size) + " bytes): its creator, process " +
                    std::to_string(creator->pid) +
                    ", no longer exists (a peerplan job on this node was killed while "
                    "setting up shared memory)");
      removed.push_back(name);
    }
  } catch (...) {
    // Out of memory while building a string: the cleanup is best effort.
  }
  return removed;
}

}  // namespace peerplan::transport::host
