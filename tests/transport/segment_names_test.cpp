// SPDX-License-Identifier: Apache-2.0
// Segment names say who created them, and remove_stale_segments() removes
// from /dev/shm exactly the segments whose creator (in our pid namespace,
// of our uid) is dead: never a live process's, never another namespace's.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

#include "transport/host/segment_names.hpp"
#include "transport/host/shm_segment.hpp"

namespace peerplan::transport::host {
namespace {

bool in_dev_shm(const std::string& name) {
  return std::filesystem::exists("/dev/shm/" + name.substr(1));
}

std::uint64_t random_nonce() {
  std::random_device entropy;
  return (static_cast<std::uint64_t>(entropy()) << 32) | entropy();
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name.substr(1)) != names.end();
}

// Removes the names a test created, whatever happened to it.
struct Unlinker {
  std::vector<std::string> names;
  ~Unlinker() {
    for (const auto& name : names) ::shm_unlink(name.c_str());
  }
};

TEST(SegmentNames, SayWhichProcessOfWhichPidNamespaceCreatedThem) {
  const std::string job = job_segment_prefix(0x0123456789abcdefull);
  EXPECT_EQ(job, "/peerplan-0123456789abcdef-");
  const std::string name = creator_segment_prefix(job, 4026531836ull, 4242) + "g3l1";
  EXPECT_EQ(name, "/peerplan-0123456789abcdef-n4026531836-p4242-g3l1");
  const auto creator = parse_segment_creator(name.substr(1));
  ASSERT_TRUE(creator.has_value());
  EXPECT_EQ(creator->pid_namespace, 4026531836ull);
  EXPECT_EQ(creator->pid, 4242);

  // Anything else is not ours to judge: other programs' names, names of
  // earlier peerplan versions ("peerplan-<pid>-<nonce>-..."), the unit
  // tests' own, and near misses.
  for (const char* other :
       {"peerplan-12345-0123456789abcdef-g1l0", "peerplan-unittest-77-share",
        "peerplan-0123456789abcdef-n1-p2-", "peerplan-0123456789abcdef-n1-p-x",
        "peerplan-0123456789abcdef-n-p2-x", "peerplan-0123456789ABCDEF-n1-p2-x",
        "peerplan-0123456789abcde-n1-p2-x", "peerplan-0123456789abcdef-n1-p-2-x",
        "peerplan-0123456789abcdef-n1-p02-x", "peerplan-0123456789abcdef-n1-p2",
        "peerplan-0123456789abcdef-n99999999999999999999999-p2-x", "sem.peerplan", ""}) {
    EXPECT_FALSE(parse_segment_creator(other).has_value()) << other;
  }
}

TEST(SegmentNames, OwnPidNamespaceIsKnownOnLinux) {
  EXPECT_NE(own_pid_namespace(), 0u) << "/proc/self/ns/pid could not be read";
}

// The scenario of a rank killed between shm_open and shm_unlink: a child
// creates a segment under the naming scheme and exits without unlinking.
// The cleanup removes it, and keeps a segment of a live process (this one)
// and one whose name carries another pid namespace (even with the dead
// child's pid, which would qualify in ours).
TEST(SegmentNames, CleanupRemovesSegmentsOfDeadCreatorsOnly) {
  const std::uint64_t ns = own_pid_namespace();
  if (ns == 0) GTEST_SKIP() << "no /proc/self/ns/pid: the cleanup is off";
  const std::string job = job_segment_prefix(random_nonce());
  Unlinker unlinker;

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Created and abandoned, as by a rank killed before the unlink.
    try {
      ShmSegment leaked = ShmSegment::create(
          creator_segment_prefix(job, own_pid_namespace(), ::getpid()) + "g1l0", 8192);
      ::_exit(leaked.mapped() ? 0 : 1);
    } catch (...) {
      ::_exit(2);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // reaped: no zombie keeps the pid
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child could not create";
  const std::string dead = creator_segment_prefix(job, ns, child) + "g1l0";
  unlinker.names.push_back(dead);
  ASSERT_TRUE(in_dev_shm(dead)) << "the child's segment should have outlived it";

  const std::string live = creator_segment_prefix(job, ns, ::getpid()) + "g1l1";
  ShmSegment own = ShmSegment::create(live, 4096);
  const std::string foreign = creator_segment_prefix(job, ns + 1, child) + "g1l2";
  ShmSegment other_namespace = ShmSegment::create(foreign, 4096);
  unlinker.names.insert(unlinker.names.end(), {live, foreign});

  // Owned by another user (only root can make one): never touched either.
  std::string someone_elses;
  std::optional<ShmSegment> not_ours;
  if (::geteuid() == 0) {
    someone_elses = creator_segment_prefix(job, ns, child) + "g1l3";
    not_ours.emplace(ShmSegment::create(someone_elses, 4096));
    ASSERT_EQ(::chown(("/dev/shm/" + someone_elses.substr(1)).c_str(), 65534, 65534), 0);
    unlinker.names.push_back(someone_elses);
  }

  const std::vector<std::string> removed = remove_stale_segments();
  EXPECT_TRUE(contains(removed, dead));
  EXPECT_FALSE(in_dev_shm(dead)) << "the dead child's segment is still there";
  EXPECT_FALSE(contains(removed, live));
  EXPECT_TRUE(in_dev_shm(live)) << "a live process's segment was removed";
  EXPECT_FALSE(contains(removed, foreign));
  EXPECT_TRUE(in_dev_shm(foreign)) << "another pid namespace's segment was removed";
  if (!someone_elses.empty()) {
    EXPECT_FALSE(contains(removed, someone_elses));
    EXPECT_TRUE(in_dev_shm(someone_elses)) << "another user's segment was removed";
  }
  // A second pass has nothing left to do among ours.
  const std::vector<std::string> again = remove_stale_segments();
  for (const auto& name : {dead, live, foreign}) EXPECT_FALSE(contains(again, name)) << name;
}

}  // namespace
}  // namespace peerplan::transport::host
