// SPDX-License-Identifier: Apache-2.0
// The XML fixtures of tests/fixtures/topology (README.md there describes each
// machine and derives its `nvidia-smi topo -m` matrix). Every pair of GPUs is
// classified and compared with that matrix, written out here by hand, and the
// P2P policy is applied at every level.
#include <gtest/gtest.h>

#include <array>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "peerplan/errors.hpp"
#include "topology/link_class.hpp"
#include "topology/p2p_policy.hpp"
#include "topology/topology.hpp"
#include "fixture_support.hpp"

namespace peerplan::topology {
namespace {

constexpr std::array<const char*, 7> kLevelNames = {"LOC", "NVL",  "PIX", "PXB",
                                                    "PHB", "NODE", "SYS"};

struct FixtureCase {
  std::string file;
  int pus, numa_nodes, packages;
  std::vector<std::string> bus_ids;              // GPUs in PCI bus id order
  std::vector<std::vector<std::string>> matrix;  // expected nvidia-smi topo -m cells
  std::array<int, 7> allowed_pairs;              // pairs (i < j) P2P may use, per level LOC..SYS
};

std::ostream& operator<<(std::ostream& out, const FixtureCase& c) { return out << c.file; }

// Cells shared by fixtures of one machine seen differently (a cgroup, a CXL node).
const std::vector<std::string> kEightGpuIds = {"0000:03:00.0", "0000:04:00.0", "0000:23:00.0",
                                               "0000:24:00.0", "0000:83:00.0", "0000:84:00.0",
                                               "0000:a3:00.0", "0000:a4:00.0"};
const std::vector<std::vector<std::string>> kEightGpuMatrix = {
    {"X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
    {"PIX", "X", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"},
    {"NODE", "NODE", "X", "PIX", "SYS", "SYS", "SYS", "SYS"},
    {"NODE", "NODE", "PIX", "X", "SYS", "SYS", "SYS", "SYS"},
    {"SYS", "SYS", "SYS", "SYS", "X", "PIX", "NODE", "NODE"},
    {"SYS", "SYS", "SYS", "SYS", "PIX", "X", "NODE", "NODE"},
    {"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "X", "PIX"},
    {"SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PIX", "X"}};
const std::vector<std::string> kFourGpuTwoSocketsIds = {"0000:01:00.0", "0000:21:00.0",
                                                        "0000:81:00.0", "0000:a1:00.0"};
const std::vector<std::vector<std::string>> kFourGpuTwoSocketsMatrix = {
    {"X", "NODE", "SYS", "SYS"},
    {"NODE", "X", "SYS", "SYS"},
    {"SYS", "SYS", "X", "NODE"},
    {"SYS", "SYS", "NODE", "X"}};

const std::vector<FixtureCase>& fixture_cases() {
  static const std::vector<FixtureCase> cases = {
      {"2gpu-one-switch.xml",
       32,
       1,
       1,
       {"0000:43:00.0", "0000:44:00.0"},
       {{"X", "PIX"}, {"PIX", "X"}},
       {0, 0, 1, 1, 1, 1, 1}},
      {"4gpu-two-switches.xml",
       64,
       1,
       1,
       {"0000:43:00.0", "0000:44:00.0", "0000:47:00.0", "0000:48:00.0"},
       {{"X", "PIX", "PHB", "PHB"},
        {"PIX", "X", "PHB", "PHB"},
        {"PHB", "PHB", "X", "PIX"},
        {"PHB", "PHB", "PIX", "X"}},
       {0, 0, 2, 2, 6, 6, 6}},
      {"8gpu-two-sockets.xml", 64, 2, 2, kEightGpuIds, kEightGpuMatrix, {0, 0, 4, 4, 4, 12, 28}},
      {"2gpu-h200-vm.xml",
       32,
       1,
       1,
       {"0000:00:06.0", "0000:00:07.0"},
       {{"X", "PHB"}, {"PHB", "X"}},
       {0, 0, 0, 0, 1, 1, 1}},
      {"4gpu-cascaded-switches.xml",
       48,
       1,
       1,
       {"0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0"},
       {{"X", "PIX", "PXB", "PXB"},
        {"PIX", "X", "PXB", "PXB"},
        {"PXB", "PXB", "X", "PIX"},
        {"PXB", "PXB", "PIX", "X"}},
       {0, 0, 2, 6, 6, 6, 6}},
      // One NUMA node over two sockets (node interleaving): NODE only within a socket.
      {"4gpu-one-numa-two-sockets.xml",
       16,
       1,
       2,
       kFourGpuTwoSocketsIds,
       kFourGpuTwoSocketsMatrix,
       {0, 0, 0, 0, 0, 2, 6}},
      // Single-socket EPYC, one GPU per root complex; and the same with a CXL node.
      {"2gpu-one-socket-two-root-complexes.xml",
       16,
       1,
       1,
       {"0000:01:00.0", "0000:41:00.0"},
       {{"X", "NODE"}, {"NODE", "X"}},
       {0, 0, 0, 0, 0, 1, 1}},
      // A CPU-less (CXL) NUMA node beside the socket's own is not the GPUs' node.
      {"2gpu-one-socket-cxl-node.xml",
       16,
       2,
       1,
       {"0000:01:00.0", "0000:41:00.0"},
       {{"X", "NODE"}, {"NODE", "X"}},
       {0, 0, 0, 0, 0, 1, 1}},
      {"4gpu-two-sockets-cxl-machine-wide.xml",
       16,
       3,
       2,
       kFourGpuTwoSocketsIds,
       kFourGpuTwoSocketsMatrix,
       {0, 0, 0, 0, 0, 2, 6}},
      {"4gpu-two-sockets-cxl-on-socket0.xml",
       16,
       3,
       2,
       kFourGpuTwoSocketsIds,
       kFourGpuTwoSocketsMatrix,
       {0, 0, 0, 0, 0, 2, 6}},
      // 8gpu-two-sockets.xml exported by a process whose cgroup allows socket 0
      // only: the disallowed socket still counts, so the matrix is the same.
      {"8gpu-two-sockets-cgroup-socket0.xml",
       64,
       2,
       2,
       kEightGpuIds,
       kEightGpuMatrix,
       {0, 0, 4, 4, 4, 12, 28}},
  };
  return cases;
}

class FixtureTopology : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(FixtureTopology, LoadsTheDescribedMachine) {
  const auto& c = GetParam();
  const auto topology = Topology::load_xml(fixture_path(c.file));
  EXPECT_FALSE(topology.is_live());
  EXPECT_EQ(topology.source(), fixture_path(c.file));
  EXPECT_EQ(topology.pu_count(), c.pus);
  EXPECT_EQ(topology.numa_node_count(), c.numa_nodes);
  EXPECT_EQ(topology.package_count(), c.packages);
}

TEST_P(FixtureTopology, ListsTheGpusInBusIdOrder) {
  const auto& c = GetParam();
  const auto topology = Topology::load_xml(fixture_path(c.file));
  std::vector<std::string> bus_ids;
  for (const auto& gpu : topology.gpus()) {
    bus_ids.push_back(gpu.bus_id());
    EXPECT_EQ(gpu.vendor_id, 0x10de) << gpu.bus_id();
    EXPECT_FALSE(gpu.host_bridge.empty()) << gpu.bus_id();
    if (!gpu.bridges.empty()) {  // the topmost bridge is the root port
      EXPECT_EQ(gpu.bridges.back().role, PciPortRole::root_port) << gpu.bus_id();
    }
    EXPECT_GE(gpu.numa_node, 0) << gpu.bus_id();
    EXPECT_GE(gpu.package, 0) << gpu.bus_id();
  }
  // Also proves the servers' ASPEED VGA (class 0x0300, vendor 0x1a03) in
  // three of the fixtures is not taken for a GPU.
  EXPECT_EQ(bus_ids, c.bus_ids);
}

TEST_P(FixtureTopology, ClassifiesEveryPairLikeNvidiaSmi) {
  const auto& c = GetParam();
  const auto topology = Topology::load_xml(fixture_path(c.file));
  const auto& gpus = topology.gpus();
  ASSERT_EQ(gpus.size(), c.matrix.size());
  for (std::size_t i = 0; i < gpus.size(); ++i)
    for (std::size_t j = 0; j < gpus.size(); ++j)
      EXPECT_EQ(to_string(classify(gpus[i], gpus[j])), c.matrix[i][j])
          << "GPU" << i << " (" << gpus[i].bus_id() << ") to GPU" << j << " (" << gpus[j].bus_id()
          << ")";
}

TEST_P(FixtureTopology, AppliesThePolicyAtEveryLevel) {
  const auto& c = GetParam();
  const auto topology = Topology::load_xml(fixture_path(c.file));
  const auto& gpus = topology.gpus();
  for (std::size_t l = 0; l < kLevels.size(); ++l) {
    int allowed = 0;
    for (std::size_t i = 0; i < gpus.size(); ++i)
      for (std::size_t j = i + 1; j < gpus.size(); ++j)
        allowed += p2p_allowed(classify(gpus[i], gpus[j]), kLevels[l]) ? 1 : 0;
    EXPECT_EQ(allowed, c.allowed_pairs[l]) << "at P2P level " << kLevelNames[l];
  }
}

TEST_P(FixtureTopology, MatrixRowsMatchTheExpectedCells) {
  const auto& c = GetParam();
  const auto topology = Topology::load_xml(fixture_path(c.file));
  std::istringstream text(link_matrix(topology.gpus()));
  std::string line;
  std::getline(text, line);  // header
  std::istringstream header(line);
  std::vector<std::string> columns{std::istream_iterator<std::string>(header), {}};
  ASSERT_GE(columns.size(), c.bus_ids.size());
  EXPECT_EQ(columns.front(), "GPU0");
  for (std::size_t i = 0; i < c.bus_ids.size(); ++i) {
    ASSERT_TRUE(std::getline(text, line));
    std::istringstream row(line);
    std::vector<std::string> cells{std::istream_iterator<std::string>(row), {}};
    ASSERT_EQ(cells.size(), c.bus_ids.size() + 4) << line;  // name, cells, CPUs, NUMA, bus id
    EXPECT_EQ(cells.front(), "GPU" + std::to_string(i));
    for (std::size_t j = 0; j < c.bus_ids.size(); ++j)
      EXPECT_EQ(cells[1 + j], c.matrix[i][j]) << line;
    EXPECT_EQ(cells.back(), c.bus_ids[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTopology, ::testing::ValuesIn(fixture_cases()),
                         [](const auto& info) {
                           std::string name = info.param.file.substr(0, info.param.file.find('.'));
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// --- fixture-specific details ---------------------------------------------------

TEST(FixtureDetails, TwoSocketGpuKnowsItsPathSocketAndCpus) {
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  const auto gpu = topology.find_gpu("0000:83:00.0");
  ASSERT_TRUE(gpu.has_value());
  EXPECT_EQ(gpu->device_id, 0x26b9);  // L40S
  EXPECT_EQ(gpu->class_id, 0x0302);
  EXPECT_EQ(gpu->host_bridge, "0000:[80-9f]");
  EXPECT_EQ(gpu.value().numa_node, 1);
  EXPECT_EQ(gpu->package, 1);
  EXPECT_EQ(gpu->local_cpus, "16-31,48-63");
  ASSERT_EQ(gpu->bridges.size(), 3u);
  EXPECT_EQ(gpu->bridges[0].address.to_string(), "0000:82:00.0");
  EXPECT_EQ(gpu->bridges[0].role, PciPortRole::switch_downstream);
  EXPECT_EQ(gpu->bridges[1].address.to_string(), "0000:81:00.0");
  EXPECT_EQ(gpu->bridges[1].role, PciPortRole::switch_upstream);
  EXPECT_EQ(gpu->bridges[1].vendor_id, 0x1000);  // Broadcom PEX88000
  EXPECT_EQ(gpu->bridges[2].address.to_string(), "0000:80:01.1");
  EXPECT_EQ(gpu->bridges[2].role, PciPortRole::root_port);
  ASSERT_EQ(gpu->switches().size(), 1u);
  EXPECT_EQ(gpu->switches()[0].to_string(), "0000:81:00.0");

  const auto first_socket = topology.find_gpu("0000:03:00.0");
  ASSERT_TRUE(first_socket.has_value());
  EXPECT_EQ(first_socket.value().numa_node, 0);
  EXPECT_EQ(first_socket->package, 0);
  EXPECT_EQ(first_socket->local_cpus, "0-15,32-47");
}

TEST(FixtureDetails, CascadedSwitchesAreCountedOncePerSwitch) {
  const auto topology = Topology::load_xml(fixture_path("4gpu-cascaded-switches.xml"));
  const auto gpu = topology.find_gpu("0000:34:00.0");
  ASSERT_TRUE(gpu.has_value());
  ASSERT_EQ(gpu->bridges.size(), 5u);
  const std::vector<PciPortRole> roles = {
      PciPortRole::switch_downstream, PciPortRole::switch_upstream, PciPortRole::switch_downstream,
      PciPortRole::switch_upstream, PciPortRole::root_port};
  for (std::size_t k = 0; k < roles.size(); ++k)
    EXPECT_EQ(gpu->bridges[k].role, roles[k]) << gpu->bridges[k].address.to_string();
  const auto switches = gpu->switches();
  ASSERT_EQ(switches.size(), 2u);
  EXPECT_EQ(switches[0].to_string(), "0000:32:00.0");  // inner switch
  EXPECT_EQ(switches[1].to_string(), "0000:2c:00.0");  // outer switch
}

TEST(FixtureDetails, VgaClassGpusAreFoundToo) {
  // RTX 6000 Ada boards have display outputs and report class 0x0300 (VGA),
  // not 0x0302 (3D controller).
  const auto topology = Topology::load_xml(fixture_path("4gpu-two-switches.xml"));
  ASSERT_EQ(topology.gpus().size(), 4u);
  for (const auto& gpu : topology.gpus()) {
    EXPECT_EQ(gpu.class_id, 0x0300) << gpu.bus_id();
    EXPECT_EQ(gpu.device_id, 0x26b1) << gpu.bus_id();
  }
}

TEST(FixtureDetails, EachGpuKnowsItsOwnPcieLinkSpeed) {
  // hwloc's pci_link_speed in GB/s, kept as MB/s: PCIe 4.0 x16 below the
  // switches, PCIe 5.0 x16 for the H200s of the VM.
  for (const char* file :
       {"2gpu-one-switch.xml", "4gpu-two-switches.xml", "8gpu-two-sockets.xml"}) {
    const auto topology = Topology::load_xml(fixture_path(file));
    ASSERT_FALSE(topology.gpus().empty()) << file;
    for (const auto& gpu : topology.gpus()) EXPECT_EQ(gpu.pcie_mb_per_s, 31508u) << file;
  }
  const auto vm = Topology::load_xml(fixture_path("2gpu-h200-vm.xml"));
  ASSERT_EQ(vm.gpus().size(), 2u);
  for (const auto& gpu : vm.gpus()) EXPECT_EQ(gpu.pcie_mb_per_s, 63015u) << gpu.bus_id();
}

TEST(FixtureDetails, NvlinkCountsTurnEveryPairIntoNv) {
  // On the real DGX-2 every GPU pair has 6 NVLinks through the NVSwitches,
  // which hwloc cannot see: given the counts, NV6 replaces PIX and PXB.
  const auto topology = Topology::load_xml(fixture_path("4gpu-cascaded-switches.xml"));
  const auto& gpus = topology.gpus();
  ASSERT_EQ(gpus.size(), 4u);
  const NvlinkCounts nvlinks(4, std::vector<int>(4, 6));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      const auto link = classify(gpus[i], gpus[j], nvlinks[i][j]);
      EXPECT_EQ(to_string(link), i == j ? "X" : "NV6");
      EXPECT_EQ(p2p_allowed(link, P2PLevel::nvl), true);
      EXPECT_EQ(p2p_allowed(link, P2PLevel::loc), i == j);
    }
  const std::string matrix = link_matrix(gpus, nvlinks);
  const std::string cells = matrix.substr(0, matrix.find("Legend:"));
  EXPECT_EQ(cells.find("PXB"), std::string::npos) << matrix;
  EXPECT_EQ(cells.find("PIX"), std::string::npos) << matrix;
  EXPECT_NE(cells.find("NV6"), std::string::npos) << matrix;
}

TEST(FixtureDetails, CapturedVmMatchesNvidiaSmiThere) {
  // Captured on a 2x H200 cloud VM, where `nvidia-smi topo -m` printed NV18
  // for the pair and these bus ids (`nvidia-smi -q`). The GPUs sit on the
  // host bridge's own bus, no bridge in between: PHB without NVLink counts.
  const auto topology = Topology::load_xml(fixture_path("2gpu-h200-vm.xml"));
  const auto gpu0 = topology.find_gpu("00000000:00:06.0");
  const auto gpu1 = topology.find_gpu("00000000:00:07.0");
  ASSERT_TRUE(gpu0.has_value());
  ASSERT_TRUE(gpu1.has_value());
  EXPECT_EQ(gpu0->device_id, 0x2335);  // H200
  EXPECT_TRUE(gpu0->bridges.empty());
  EXPECT_EQ(gpu0->host_bridge, "0000:[00-00]");
  EXPECT_EQ(gpu0.value().numa_node, 0);
  EXPECT_EQ(to_string(classify(*gpu0, *gpu1, 18)), "NV18");
  EXPECT_EQ(to_string(classify(*gpu0, *gpu1)), "PHB");
  // The virtio and NIC devices on the same bus are not GPUs.
  EXPECT_EQ(topology.gpus().size(), 2u);
}

TEST(FixtureDetails, FindGpuAcceptsEveryBusIdSpelling) {
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  for (const char* spelling : {"0000:a3:00.0", "00000000:A3:00.0", "0000:A3:00.0", "a3:00.0"}) {
    const auto gpu = topology.find_gpu(spelling);
    ASSERT_TRUE(gpu.has_value()) << spelling;
    EXPECT_EQ(gpu->bus_id(), "0000:a3:00.0") << spelling;
  }
}

TEST(FixtureDetails, FindGpuReturnsNothingWhereNoGpuIs) {
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  EXPECT_FALSE(topology.find_gpu("0000:62:00.0").has_value());  // the BMC's ASPEED VGA
  EXPECT_FALSE(topology.find_gpu("0000:41:00.0").has_value());  // ConnectX-6 Dx NIC
  EXPECT_FALSE(topology.find_gpu("0000:81:00.0").has_value());  // a switch port
  EXPECT_FALSE(topology.find_gpu("0000:a5:00.0").has_value());  // nothing there
  EXPECT_FALSE(topology.find_gpu("0001:a3:00.0").has_value());  // other PCI domain
}

TEST(FixtureDetails, FindGpuRefusesWhatIsNotABusId) {
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  for (const char* text : {"a3:00", "GPU-0", "0000:zz:00.0", ""}) {
    try {
      (void)topology.find_gpu(text);
      ADD_FAILURE() << "find_gpu accepted '" << text << "'";
    } catch (const InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find("0000:17:00.0"), std::string::npos)
          << "message should show the expected form: " << error.what();
    }
  }
}

TEST(FixtureDetails, XmlBindingIsTheWholeMachine) {
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  const auto binding = topology.process_binding();
  EXPECT_FALSE(binding.live);
  EXPECT_EQ(binding.cpus, "0-63");
  EXPECT_EQ(binding.numa_nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(binding.packages, (std::vector<int>{0, 1}));
  EXPECT_EQ(binding.last_cpu, -1);
}

TEST(FixtureDetails, LocalityOfACpuList) {
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  const auto second_socket = topology.locality_of("16-31,48-63");
  EXPECT_EQ(second_socket.cpus, "16-31,48-63");
  EXPECT_EQ(second_socket.numa_nodes, (std::vector<int>{1}));
  EXPECT_EQ(second_socket.packages, (std::vector<int>{1}));
  const auto hyperthread_of_core_0 = topology.locality_of("32");
  EXPECT_EQ(hyperthread_of_core_0.numa_nodes, (std::vector<int>{0}));
  const auto straddling = topology.locality_of("0,16");
  EXPECT_EQ(straddling.numa_nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(straddling.packages, (std::vector<int>{0, 1}));
}

TEST(FixtureDetails, LocalityRefusesBadOrForeignCpuLists) {
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets.xml"));
  EXPECT_THROW(topology.locality_of("abc"), InvalidArgument);
  EXPECT_THROW(topology.locality_of(""), InvalidArgument);
  EXPECT_THROW(topology.locality_of("0x3"), InvalidArgument);
  try {
    topology.locality_of("60-64");
    FAIL() << "CPU 64 does not exist in the fixture";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("0-63"), std::string::npos) << error.what();
  }
}

// Ranks, one per GPU of `topology`, in bus id order.
std::vector<RankGpuPlacement> one_rank_per_gpu(const Topology& topology) {
  std::vector<RankGpuPlacement> ranks;
  for (const auto& gpu : topology.gpus())
    ranks.push_back({static_cast<int>(ranks.size()), gpu.bus_id(), gpu});
  return ranks;
}

TEST(FixtureDetails, OneNumaNodeOverTwoSocketsWithUnknownSocketIsSys) {
  // NPS0 / node interleaving: one NUMA node for both sockets, and hwloc
  // attaches the host bridges to the whole machine, so no GPU has a known
  // socket. The pairs may cross sockets: SYS, and off at the default level.
  const auto topology =
      Topology::load_xml(fixture_path("4gpu-one-numa-two-sockets-machine-locality.xml"));
  EXPECT_EQ(topology.numa_node_count(), 1);
  EXPECT_EQ(topology.package_count(), 2);
  const auto& gpus = topology.gpus();
  ASSERT_EQ(gpus.size(), 4u);
  for (const auto& gpu : gpus) {
    EXPECT_EQ(gpu.numa_node, 0) << gpu.bus_id();
    EXPECT_EQ(gpu.package, -1) << gpu.bus_id();
  }
  EXPECT_EQ(classify(gpus[0], gpus[2]).kind, LinkKind::sys);
  EXPECT_EQ(classify(gpus[0], gpus[1]).kind, LinkKind::sys);
  const auto verdict = check_p2p_level(one_rank_per_gpu(topology), {}, P2PLevel::automatic);
  ASSERT_TRUE(verdict.obstacle.has_value());
  EXPECT_NE(verdict.obstacle->find("SYS"), std::string::npos) << *verdict.obstacle;
  EXPECT_FALSE(check_p2p_level(one_rank_per_gpu(topology), {}, P2PLevel::sys).obstacle);
}

TEST(FixtureDetails, OneNumaNodeOverTwoSocketsWithKnownSocketsIsSysAcross) {
  const auto topology = Topology::load_xml(fixture_path("4gpu-one-numa-two-sockets.xml"));
  const auto far = topology.find_gpu("0000:81:00.0");
  ASSERT_TRUE(far.has_value());
  EXPECT_EQ(far.value().numa_node, 0);
  EXPECT_EQ(far->package, 1);
  EXPECT_TRUE(check_p2p_level(one_rank_per_gpu(topology), {}, P2PLevel::automatic).obstacle);
}

TEST(FixtureDetails, CpuLessNumaNodeIsNotTheGpusNode) {
  // hwloc gives a CXL memory node the cpuset of the object it hangs from,
  // so it meets the GPUs' CPUs too; the GPUs' node is still the socket's own.
  const auto one_socket = Topology::load_xml(fixture_path("2gpu-one-socket-cxl-node.xml"));
  const auto& gpus = one_socket.gpus();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].numa_node, 0);
  EXPECT_EQ(gpus[1].numa_node, 0);
  EXPECT_EQ(classify(gpus[0], gpus[1]).kind, LinkKind::node);
  EXPECT_FALSE(check_p2p_level(one_rank_per_gpu(one_socket), {}, P2PLevel::automatic).obstacle);

  // The same machine without the CXL node: the same answer.
  const auto plain = Topology::load_xml(fixture_path("2gpu-one-socket-two-root-complexes.xml"));
  ASSERT_EQ(plain.gpus().size(), 2u);
  EXPECT_EQ(plain.gpus()[0].numa_node, 0);
  EXPECT_EQ(classify(plain.gpus()[0], plain.gpus()[1]).kind, LinkKind::node);

  // A CXL node attached to the whole machine (node 2) is farther than each socket's node.
  const auto machine_wide =
      Topology::load_xml(fixture_path("4gpu-two-sockets-cxl-machine-wide.xml"));
  EXPECT_EQ(machine_wide.find_gpu("0000:21:00.0").value().numa_node, 0);
  EXPECT_EQ(machine_wide.find_gpu("0000:81:00.0").value().numa_node, 1);
  // ... and one attached to socket 0 beside its DRAM node (node 2) is not picked either.
  const auto on_socket = Topology::load_xml(fixture_path("4gpu-two-sockets-cxl-on-socket0.xml"));
  EXPECT_EQ(on_socket.find_gpu("0000:01:00.0").value().numa_node, 0);
  EXPECT_EQ(on_socket.find_gpu("0000:81:00.0").value().numa_node, 1);
}

TEST(FixtureDetails, CgroupConfinedExportStillPlacesTheOtherSocketsGpus) {
  // Exported by a rank whose cgroup (Slurm ConstrainCores) allows socket 0
  // only: hwloc must keep socket 1, or its GPUs lose their node and socket.
  const auto topology = Topology::load_xml(fixture_path("8gpu-two-sockets-cgroup-socket0.xml"));
  const auto gpu = topology.find_gpu("0000:83:00.0");
  ASSERT_TRUE(gpu.has_value());
  EXPECT_EQ(gpu.value().numa_node, 1);
  EXPECT_EQ(gpu->package, 1);
  EXPECT_EQ(gpu->local_cpus, "16-31,48-63");
  const auto& gpus = topology.gpus();
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_EQ(classify(gpus[4], gpus[6]).kind, LinkKind::node);
  EXPECT_EQ(classify(gpus[5], gpus[6]).kind, LinkKind::node);
}

}  // namespace
}  // namespace peerplan::topology
