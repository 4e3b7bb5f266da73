// SPDX-License-Identifier: Apache-2.0
// Names of the host transport's shared-memory segments, and the removal of
// segments that crashed jobs left behind in /dev/shm.
//
// A segment's name exists from its creation until every peer has mapped it
// (PeerSegments::establish); a rank killed inside that window leaves the
// name, and the memory behind it, in /dev/shm for good. So every name says
// who created it, and a later job on the node removes the names whose
// creator is dead:
//
//   /peerplan-<job nonce, 16 hex digits>-n<pid namespace>-p<creator pid>-<tag>
//
// <pid namespace> is the inode number of the creator's /proc/self/ns/pid
// (0 if it could not be read), <creator pid> its pid as seen in that
// namespace, <tag> anything (e.g. "g3l1": generation 3, local rank 1). The
// job nonce comes first so that all segments of one job share a prefix.
//
// Why names and not fd passing (unlinking before the peers map): handing a
// descriptor to another process needs either a Unix socket between the
// ranks (abstract sockets live in the network namespace, which containers
// sharing /dev/shm need not share; a socket file needs a shared writable
// directory and leaks the same way), or pidfd_getfd / /proc/<pid>/fd, which
// need ptrace rights over the peer (refused under Yama ptrace_scope >= 1,
// Ubuntu's default, and across pid namespaces). A name in /dev/shm works
// wherever the ranks share /dev/shm at all; what it costs is this cleanup.
//
// Why the cleanup is safe:
// - It only considers names of exactly this form, owned by our effective
//   uid (lstat of /dev/shm/<name>, a regular file).
// - It only considers names created in our own pid namespace: only there
//   does the pid in the name mean the same process to kill(). Containers
//   sharing /dev/shm but not the pid namespace never touch each other's
//   segments; names with namespace 0 (unknown) are never removed.
// - It removes a name only when kill(pid, 0) fails with ESRCH: no process
//   of that pid exists in the namespace, so the creator is gone (a zombie
//   still counts as alive; EPERM means alive). The creator of a live
//   segment exists, so a live segment is never removed. A reused pid only
//   keeps a stale segment a while longer, until that process exits too.
//   (Namespace inode numbers are unique among live namespaces; one reused
//   after its namespace died is ours and judged by our kill(), correctly.)
// - Removing a name never disturbs mappings: processes that mapped the
//   segment keep it until they unmap it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace peerplan::transport::host {

// The inode number of /proc/self/ns/pid; 0 when it cannot be read (no
// /proc): segments are then named with namespace 0 and nothing is cleaned.
std::uint64_t own_pid_namespace() noexcept;

// "/peerplan-<nonce as 16 hex digits>-": the prefix of every segment of a job.
std::string job_segment_prefix(std::uint64_t nonce);

// job_prefix + "n<pid_namespace>-p<pid>-": the prefix of the segments one
// process of the job creates; the caller appends a non-empty tag.
std::string creator_segment_prefix(const std::string& job_prefix, std::uint64_t pid_namespace,
                                   long pid);

struct SegmentCreator {
  std::uint64_t pid_namespace = 0;
  long pid = 0;
};

// The creator named by `file_name` (an entry of /dev/shm, without the
// leading '/'), or nullopt when the name is not of the form above.
std::optional<SegmentCreator> parse_segment_creator(std::string_view file_name);

// Removes every /dev/shm entry of the form above that was created in this
// pid namespace, is owned by this effective uid, and whose creator no
// longer exists; logs each removal at INFO. Returns the removed entries
// (without the leading '/'). Never throws; an unreadable /dev/shm removes
// nothing.
std::vector<std::string> remove_stale_segments() noexcept;

}  // namespace peerplan::transport::host
