// SPDX-License-Identifier: Apache-2.0
// Topology::shared: one load per process and source (the live machine, each
// XML file), shared by every caller, thread-safe; a file whose content
// changed is read again, a missing one fails like load().
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "peerplan/errors.hpp"
#include "topology/topology.hpp"

namespace peerplan::topology {
namespace {

std::string fixture_path(const std::string& name) {
  return std::string(PEERPLAN_TEST_FIXTURES) + "/topology/" + name;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::filesystem::path scratch_path(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("peerplan-topology-cache-" + std::to_string(::getpid()) + "-" + name);
}

TEST(TopologyCache, LiveMachineIsLoadedOnce) {
  const auto first = Topology::shared("");
  const auto second = Topology::shared("");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first.get(), second.get()) << "the live topology was loaded again";
  EXPECT_TRUE(first->is_live());
  EXPECT_EQ(first->pu_count(), Topology::load_live().pu_count());
}

TEST(TopologyCache, EachFileIsItsOwnEntry) {
  const auto two = Topology::shared(fixture_path("2gpu-one-switch.xml"));
  const auto eight = Topology::shared(fixture_path("8gpu-two-sockets.xml"));
  EXPECT_EQ(two->gpus().size(), 2u);
  EXPECT_EQ(eight->gpus().size(), 8u);
  EXPECT_FALSE(two->is_live());
  EXPECT_EQ(two->source(), fixture_path("2gpu-one-switch.xml"));
  // Asked again, in another order: the same objects.
  EXPECT_EQ(Topology::shared(fixture_path("8gpu-two-sockets.xml")).get(), eight.get());
  EXPECT_EQ(Topology::shared(fixture_path("2gpu-one-switch.xml")).get(), two.get());
  EXPECT_NE(Topology::shared("").get(), two.get());
}

TEST(TopologyCache, RewrittenFileIsReadAgain) {
  const auto path = scratch_path("machine.xml");
  std::ofstream(path) << read_all(fixture_path("2gpu-one-switch.xml"));
  const auto before = Topology::shared(path.string());
  EXPECT_EQ(before->gpus().size(), 2u);
  // Another machine's export at the same path (another size, so the change
  // is seen even where the file system's clock is coarse).
  std::ofstream(path, std::ios::trunc) << read_all(fixture_path("4gpu-two-switches.xml"));
  const auto after = Topology::shared(path.string());
  EXPECT_EQ(after->gpus().size(), 4u);
  EXPECT_EQ(before->gpus().size(), 2u) << "a holder of the old topology keeps it intact";
  EXPECT_EQ(Topology::shared(path.string()).get(), after.get());

  std::filesystem::remove(path);
  EXPECT_THROW(Topology::shared(path.string()), InvalidArgument)
      << "a removed file must fail as load() does, not come from the cache";
}

TEST(TopologyCache, MissingFileFailsEveryTime) {
  for (int attempt = 0; attempt < 2; ++attempt)
    EXPECT_THROW(Topology::shared("/nonexistent-peerplan-dir/machine.xml"), InvalidArgument);
}

TEST(TopologyCache, ConcurrentCallersShareOneLoad) {
  const std::string file = fixture_path("4gpu-cascaded-switches.xml");
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<const Topology>> live(kThreads), xml(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      live[t] = Topology::shared("");
      xml[t] = Topology::shared(file);
      (void)live[t]->process_binding();  // const queries from several threads at once
      (void)xml[t]->find_gpu(xml[t]->gpus().front().bus_id());
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 1; t < kThreads; ++t) {
    EXPECT_EQ(live[t].get(), live[0].get());
    EXPECT_EQ(xml[t].get(), xml[0].get());
  }
}

}  // namespace
}  // namespace peerplan::topology
