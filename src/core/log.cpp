// SPDX-License-Identifier: Apache-2.0
// The logger behind src/core/log.hpp.
//
// Level and rank are process-wide atomics: every communicator of a process
// shares one stderr, and a level check on the dispatch path must cost no
// more than a relaxed load.
//
// The prefix names the host and process too ("peerplan[node7:4711 rank 3]"),
// like NCCL's host:pid: under mpirun every rank's stderr arrives in one
// stream, and a rank number alone says neither which node a line came from
// nor which process to attach a debugger to or look up in a core dump.
//
// write() formats the whole message, every line prefixed, into one buffer
// and hands it to a single fwrite. stdio locks the stream for the duration
// of one call (so threads never interleave inside a line), and stderr is
// unbuffered, so the buffer reaches the file descriptor in one write(2):
// under mpirun, where every rank's stderr is forwarded into one stream,
// lines of different ranks then do not cut into each other (a write of up
// to PIPE_BUF bytes to a pipe is atomic).
#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace peerplan::log {
namespace {

// WARN by default, like Config::log_level, so warnings emitted before any
// communicator exists are not lost.
std::atomic<LogLevel> g_level{LogLevel::warn};
std::atomic<int> g_rank{-1};

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
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace peerplan::log
