// SPDX-License-Identifier: Apache-2.0
// POSIX shared-memory segments: zero-filled on creation, shared between
// mappings, and their names removed from /dev/shm by unlink() or, failing
// that, by the destructor.
#include <gtest/gtest.h>

#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "peerplan/errors.hpp"
#include "transport/host/shm_segment.hpp"

namespace peerplan::transport::host {
namespace {

std::string unique_name(const char* tag) {
  return "/peerplan-unittest-" + std::to_string(::getpid()) + "-" + tag;
}

bool in_dev_shm(const std::string& name) {
  return std::filesystem::exists("/dev/shm/" + name.substr(1));
}

TEST(ShmSegment, CreateIsZeroFilledAndSharedWithOpen) {
  const std::string name = unique_name("share");
  ShmSegment owner = ShmSegment::create(name, 3 * 4096 + 100);
  ASSERT_TRUE(owner.mapped());
  EXPECT_EQ(owner.size(), 3u * 4096 + 100);
  for (std::size_t i = 0; i < owner.size(); ++i) ASSERT_EQ(owner.data()[i], std::byte{0});
  EXPECT_TRUE(in_dev_shm(name));

  ShmSegment peer = ShmSegment::open(name, owner.size());
  std::memcpy(owner.data() + 5000, "hello", 5);
  EXPECT_EQ(std::memcmp(peer.data() + 5000, "hello", 5), 0);

  owner.unlink();
  EXPECT_FALSE(in_dev_shm(name));
  // The memory stays shared after the name is gone.
  std::memcpy(peer.data() + 12, "back", 4);
  EXPECT_EQ(std::memcmp(owner.data() + 12, "back", 4), 0);
}

TEST(ShmSegment, DestructorRemovesAStillOwnedName) {
  const std::string name = unique_name("dtor");
  {
    ShmSegment owner = ShmSegment::create(name, 4096);
    EXPECT_TRUE(in_dev_shm(name));
    ShmSegment moved = std::move(owner);  // ownership moves, name stays
    EXPECT_FALSE(owner.mapped());
    EXPECT_TRUE(in_dev_shm(name));
  }
  EXPECT_FALSE(in_dev_shm(name));
}

TEST(ShmSegment, ErrorsAreSystemErrorsThatSayWhatToCheck) {
  const std::string name = unique_name("exists");
  ShmSegment owner = ShmSegment::create(name, 4096);
  try {
    ShmSegment::create(name, 4096);
    FAIL() << "creating an existing name must fail";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("File exists"), std::string::npos) << e.what();
  }
  try {
    ShmSegment::open(unique_name("missing"), 4096);
    FAIL() << "opening a missing name must fail";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/shm"), std::string::npos) << e.what();
  }
  // A segment smaller than expected is refused rather than mapped short.
  EXPECT_THROW(ShmSegment::open(name, 8192), SystemError);
}

// Asking for twice the size of /dev/shm fails at once (ENOSPC from the
// up-front reservation), with advice, and leaves no name behind.
TEST(ShmSegment, ASegmentDevShmCannotHoldFailsUpFrontAndLeavesNothing) {
  struct statvfs fs {};
  ASSERT_EQ(::statvfs("/dev/shm", &fs), 0);
  const std::uint64_t total = static_cast<std::uint64_t>(fs.f_blocks) * fs.f_frsize;
  if (total == 0 || total > (std::uint64_t{1} << 44)) GTEST_SKIP() << "/dev/shm has no size limit";
  const std::string name = unique_name("huge");
  try {
    ShmSegment::create(name, 2 * total);
    FAIL() << "a segment twice the size of /dev/shm was created";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("--shm-size"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(in_dev_shm(name));
}

}  // namespace
}  // namespace peerplan::transport::host
