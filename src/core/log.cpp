// SPDX-License-Identifier: Apache-2.0
// The logger behind src/core/log.hpp.
//
// Level, subsystems and rank are process-wide atomics: every communicator
// of a process shares one log, and a level check on the dispatch path must
// cost no more than a relaxed load.
//
// The prefix names the host and process too ("peerplan[node7:4711 rank 3]"),
// like NCCL's host:pid: under mpirun every rank's stderr arrives in one
// stream, and a rank number alone says neither which node a line came from
// nor which process to attach a debugger to or look up in a core dump.
//
// write() formats the whole message, every line prefixed, into one buffer
// and hands it to a single fwrite under the sink's mutex (so threads never
// interleave inside a line, and set_file cannot close the file under a
// writer). stderr is unbuffered and a log file is flushed after each
// message, so the buffer reaches the file descriptor in one write(2): under
// mpirun, where every rank's stderr is forwarded into one stream, lines of
// different ranks then do not cut into each other (a write of up to
// PIPE_BUF bytes to a pipe is atomic), and a file opened for appending by
// several processes gets whole messages.
#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace peerplan::log {
namespace {

// WARN by default, like Config::log_level, so warnings emitted before any
// communicator exists are not lost.
std::atomic<LogLevel> g_level{LogLevel::warn};
std::atomic<int> g_rank{-1};
std::atomic<std::uint32_t> g_subsystems{kAllSubsystems};

// Where lines go: `file` when set (opened from `pattern`), else stderr.
// `failed_pattern` is the last pattern that could not be opened, warned
// about once.
struct Sink {
  std::mutex mutex;
  std::FILE* file = nullptr;
  std::string pattern;
  std::string failed_pattern;
};
Sink& sink() {
  static Sink* const instance = new Sink;  // never destroyed: logging may run at exit
  return *instance;
}

// The short host name (up to the first '.'), as NCCL prints it: cluster
// node names are unique before the domain, and the full name only widens
// every line. Looked up once: a process does not change hosts.
const std::string& host_name() {
  static const std::string name = [] {
    char buffer[256] = {};
    if (::gethostname(buffer, sizeof buffer - 1) != 0 || buffer[0] == '\0') return std::string("?");
    std::string full(buffer);
    return full.substr(0, full.find('.'));
  }();
  return name;
}

// "host:pid", computed on first use: neither changes while the process
// lives. (A child of fork() would keep its parent's pid here; MPI programs
// do not fork once MPI is up, and Open MPI warns when they do.)
const std::string& host_and_pid() {
  static const std::string text = host_name() + ':' + std::to_string(::getpid());
  return text;
}

std::string make_prefix(LogLevel at) {
  std::string prefix = "peerplan[" + host_and_pid();
  const int rank = g_rank.load(std::memory_order_relaxed);
  if (rank >= 0) prefix += " rank " + std::to_string(rank);
  prefix += "] ";
  prefix += to_string(at);
  prefix += ": ";
  return prefix;
}

}  // namespace

void set_level(LogLevel level) noexcept { g_level.store(level, std::memory_order_relaxed); }
LogLevel level() noexcept { return g_level.load(std::memory_order_relaxed); }
void set_rank(int rank) noexcept { g_rank.store(rank < 0 ? -1 : rank, std::memory_order_relaxed); }
void set_subsystems(std::uint32_t mask) noexcept {
  g_subsystems.store(mask & kAllSubsystems, std::memory_order_relaxed);
}
std::uint32_t subsystems() noexcept { return g_subsystems.load(std::memory_order_relaxed); }

std::string expand_file_name(std::string_view pattern) {
  std::string name;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (pattern[i] != '%' || (next != 'h' && next != 'p' && next != '%')) {
      name += pattern[i];
      continue;
    }
    if (next == 'h') name += host_name();
    if (next == 'p') name += std::to_string(::getpid());
    if (next == '%') name += '%';
    ++i;
  }
  return name;
}

void set_file(std::string_view pattern) {
  std::string warning;
  {
    Sink& s = sink();
    const std::lock_guard lock(s.mutex);
    if (pattern == s.pattern) return;
    std::FILE* opened = nullptr;
    const std::string path = expand_file_name(pattern);
    if (!pattern.empty()) {
      opened = std::fopen(path.c_str(), "a");
      if (opened == nullptr && pattern != s.failed_pattern) {
        s.failed_pattern = std::string(pattern);
        warning = "PEERPLAN_DEBUG_FILE: cannot open " + path + " for writing (" +
                  std::strerror(errno) + "); logging to stderr";
      }
    }
    if (s.file != nullptr) std::fclose(s.file);
    s.file = opened;
    s.pattern = opened != nullptr ? std::string(pattern) : std::string();
  }
  if (!warning.empty()) warn(warning);  // after the unlock: write() takes the lock
}

void write(LogLevel at, std::string_view message) {
  // Filter here too, so a direct write() obeys PEERPLAN_DEBUG like the
  // inline helpers (which check first only to skip building the message).
  if (!enabled(at)) return;
  const std::string prefix = make_prefix(at);
  // A trailing newline ends the last line; it does not start an empty one.
  if (!message.empty() && message.back() == '\n') message.remove_suffix(1);

  std::string out;
  out.reserve(message.size() + prefix.size() + 1);
  std::size_t start = 0;
  while (true) {
    const std::size_t end = message.find('\n', start);
    const std::string_view line =
        message.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out += prefix;
    out += line;
    out += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  Sink& s = sink();
  const std::lock_guard lock(s.mutex);
  std::FILE* const to = s.file != nullptr ? s.file : stderr;
  std::fwrite(out.data(), 1, out.size(), to);
  if (to != stderr) std::fflush(to);  // a crash keeps every line written so far
}

}  // namespace peerplan::log
