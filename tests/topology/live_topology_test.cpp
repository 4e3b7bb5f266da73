// SPDX-License-Identifier: Apache-2.0
// The live machine: hwloc's view is checked against what the kernel reports
// directly (sched_getaffinity for the binding, /sys/bus/pci for the GPUs), so
// the test holds on CPU-only CI machines (no GPU) and GPU hosts alike.
#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "topology/topology.hpp"

namespace peerplan::topology {
namespace {

// "0-3,8" -> {0,1,2,3,8}
std::set<int> parse_cpu_list(const std::string& list) {
  std::set<int> cpus;
  std::istringstream in(list);
  std::string range;
  while (std::getline(in, range, ',')) {
    const auto dash = range.find('-');
    const int first = std::stoi(range.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
  }
  return cpus;
}

std::set<int> kernel_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::set<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.insert(cpu);
  return cpus;
}

unsigned read_hex(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  in >> text;
  return text.empty() ? 0u : static_cast<unsigned>(std::stoul(text, nullptr, 16));
}

// GPUs as sysfs lists them, with the same rule Topology uses: display/3D
// class (0x03xxxx) from NVIDIA, AMD or Intel.
std::vector<std::string> sysfs_gpus() {
  std::vector<std::string> gpus;
  const std::filesystem::path devices = "/sys/bus/pci/devices";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(devices, error)) {
    const unsigned pci_class = read_hex(entry.path() / "class");
    const unsigned vendor = read_hex(entry.path() / "vendor");
    if ((pci_class >> 16) == 0x03 && (vendor == 0x10de || vendor == 0x1002 || vendor == 0x8086))
      gpus.push_back(entry.path().filename().string());
  }
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

TEST(LiveTopology, Loads) {
  const auto topology = Topology::load_live();
  EXPECT_TRUE(topology.is_live());
  EXPECT_GE(topology.pu_count(), 1);
  EXPECT_GE(topology.numa_node_count(), 1);
  const auto through_config = Topology::load("");  // empty Config::topology_file
  EXPECT_TRUE(through_config.is_live());
  EXPECT_EQ(through_config.pu_count(), topology.pu_count());
}

TEST(LiveTopology, BindingIsTheKernelsAffinity) {
  const auto topology = Topology::load_live();
  const auto binding = topology.process_binding();
  EXPECT_TRUE(binding.live);
  ASSERT_FALSE(binding.cpus.empty());
  const auto kernel = kernel_affinity();
  EXPECT_EQ(parse_cpu_list(binding.cpus), kernel) << "hwloc says " << binding.cpus;
  EXPECT_FALSE(binding.numa_nodes.empty());
  EXPECT_EQ(kernel.count(binding.last_cpu), 1u) << "last CPU " << binding.last_cpu;
  // The locality of the same list agrees with the binding's.
  const auto again = topology.locality_of(binding.cpus);
  EXPECT_EQ(again.numa_nodes, binding.numa_nodes);
  EXPECT_EQ(again.packages, binding.packages);
}

TEST(LiveTopology, GpusAreThoseTheKernelLists) {
  if (!std::filesystem::exists("/sys/bus/pci/devices"))
    GTEST_SKIP() << "no /sys/bus/pci on this machine to compare with";
  const auto topology = Topology::load_live();
  std::vector<std::string> found;
  for (const auto& gpu : topology.gpus()) found.push_back(gpu.bus_id());
  // On the CPU-only CI machine both lists are empty; on a GPU host both list
  // every GPU.
  EXPECT_EQ(found, sysfs_gpus());
  for (const auto& gpu : topology.gpus()) {
    const auto again = topology.find_gpu(gpu.bus_id());
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->address, gpu.address);
  }
}

}  // namespace
}  // namespace peerplan::topology
