// SPDX-License-Identifier: Apache-2.0
// Link classes and the P2P policy on hand-built GPU locations: the rules that
// do not need a whole machine (NVLink override, the same GPU, unknown
// locality, the policy table, the matrix's argument checks).
#include <gtest/gtest.h>

#include <array>

#include "peerplan/errors.hpp"
#include "topology/link_class.hpp"

namespace peerplan::topology {
namespace {

PciAddress bus(std::uint8_t b, std::uint8_t fn = 0) { return PciAddress{0, b, 0, fn}; }

// A GPU directly on root port 1.1 of bus `root_port_bus`, with a second
// port number for a second GPU on the same root bus.
GpuLocation gpu_on_root_port(std::uint8_t gpu_bus, std::uint8_t root_port_bus, std::string host,
                             int numa, std::uint8_t port_device = 1) {
  GpuLocation gpu;
  gpu.address = bus(gpu_bus);
  gpu.vendor_id = 0x10de;
  gpu.bridges = {PciBridge{PciAddress{0, root_port_bus, port_device, 1}, 0x1022, 0x1483,
                           PciPortRole::root_port}};
  gpu.host_bridge = std::move(host);
  gpu.numa_node = numa;
  gpu.package = numa;  // one NUMA node per socket, unless a test says otherwise
  return gpu;
}

TEST(LinkClass, ToStringUsesNvidiaSmiVocabulary) {
  EXPECT_EQ(to_string(LinkClass{LinkKind::loc, 0}), "X");
  EXPECT_EQ(to_string(LinkClass{LinkKind::nv, 18}), "NV18");
  EXPECT_EQ(to_string(LinkClass{LinkKind::nv, 4}), "NV4");
  EXPECT_EQ(to_string(LinkClass{LinkKind::pix, 0}), "PIX");
  EXPECT_EQ(to_string(LinkClass{LinkKind::pxb, 0}), "PXB");
  EXPECT_EQ(to_string(LinkClass{LinkKind::phb, 0}), "PHB");
  EXPECT_EQ(to_string(LinkClass{LinkKind::node, 0}), "NODE");
  EXPECT_EQ(to_string(LinkClass{LinkKind::sys, 0}), "SYS");
}

TEST(LinkClass, RootPortsOfOneHostBridgeArePhb) {
  const auto a = gpu_on_root_port(0x41, 0x40, "0000:[40-5f]", 0, 1);
  const auto b = gpu_on_root_port(0x42, 0x40, "0000:[40-5f]", 0, 3);
  EXPECT_EQ(classify(a, b), (LinkClass{LinkKind::phb, 0}));
  EXPECT_EQ(classify(b, a), (LinkClass{LinkKind::phb, 0}));
}

TEST(LinkClass, HostBridgesInOneNumaNodeAreNodeAndAcrossNodesSys) {
  const auto a = gpu_on_root_port(0x01, 0x00, "0000:[00-1f]", 0);
  const auto same_node = gpu_on_root_port(0x21, 0x20, "0000:[20-3f]", 0);
  const auto other_node = gpu_on_root_port(0x81, 0x80, "0000:[80-9f]", 1);
  EXPECT_EQ(classify(a, same_node).kind, LinkKind::node);
  EXPECT_EQ(classify(a, other_node).kind, LinkKind::sys);
}

TEST(LinkClass, UnknownLocalityAcrossHostBridgesIsTreatedAsSys) {
  // hwloc could not tell which NUMA node the host bridges hang off: assume far.
  const auto a = gpu_on_root_port(0x01, 0x00, "0000:[00-1f]", -1);
  const auto b = gpu_on_root_port(0x21, 0x20, "0000:[20-3f]", -1);
  EXPECT_EQ(classify(a, b).kind, LinkKind::sys);
}

TEST(LinkClass, OneNumaNodeOverTwoSocketsIsSysAcrossSockets) {
  // Node interleaving / NPS0: one NUMA node, two sockets.
  const auto a = gpu_on_root_port(0x01, 0x00, "0000:[00-1f]", 0);
  auto same_socket = gpu_on_root_port(0x21, 0x20, "0000:[20-3f]", 0);
  auto other_socket = gpu_on_root_port(0x81, 0x80, "0000:[80-9f]", 0);
  other_socket.package = 1;
  EXPECT_EQ(classify(a, same_socket).kind, LinkKind::node);
  EXPECT_EQ(classify(a, other_socket).kind, LinkKind::sys);
  EXPECT_EQ(classify(other_socket, a).kind, LinkKind::sys);
}

TEST(LinkClass, UnknownSocketAcrossHostBridgesIsTreatedAsSys) {
  // Same NUMA node, but hwloc could not tell the socket: it may be either.
  auto a = gpu_on_root_port(0x01, 0x00, "0000:[00-1f]", 0);
  auto b = gpu_on_root_port(0x21, 0x20, "0000:[20-3f]", 0);
  a.package = -1;
  b.package = -1;
  EXPECT_EQ(classify(a, b).kind, LinkKind::sys);
  b.package = 0;
  EXPECT_EQ(classify(a, b).kind, LinkKind::sys);
  EXPECT_EQ(classify(b, a).kind, LinkKind::sys);
}

TEST(LinkClass, TwoFunctionsBehindOneRootPortArePix) {
  // A dual-GPU board exposing two functions on one root port (no switch):
  // their traffic meets at that single bridge.
  auto a = gpu_on_root_port(0x41, 0x40, "0000:[40-5f]", 0);
  auto b = a;
  b.address = bus(0x41, 1);
  EXPECT_EQ(classify(a, b).kind, LinkKind::pix);
}

TEST(LinkClass, NvlinkWinsOverAnyPcieClass) {
  const auto a = gpu_on_root_port(0x01, 0x00, "0000:[00-1f]", 0);
  const auto far = gpu_on_root_port(0x81, 0x80, "0000:[80-9f]", 1);
  EXPECT_EQ(classify(a, far, 18), (LinkClass{LinkKind::nv, 18}));
  EXPECT_EQ(classify(far, a, 2), (LinkClass{LinkKind::nv, 2}));
  EXPECT_EQ(classify(a, far, 0).kind, LinkKind::sys);
}

TEST(LinkClass, SameGpuIsLocEvenWithNvlinks) {
  const auto a = gpu_on_root_port(0x01, 0x00, "0000:[00-1f]", 0);
  EXPECT_EQ(classify(a, a), (LinkClass{LinkKind::loc, 0}));
  EXPECT_EQ(classify(a, a, 12), (LinkClass{LinkKind::loc, 0}));
}

TEST(LinkClass, NegativeNvlinkCountIsRefused) {
  const auto a = gpu_on_root_port(0x01, 0x00, "0000:[00-1f]", 0);
  const auto b = gpu_on_root_port(0x21, 0x20, "0000:[20-3f]", 0);
  try {
    classify(a, b, -1);
    FAIL() << "classify accepted a negative NVLink count";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("0000:01:00.0"), std::string::npos) << error.what();
  }
}

TEST(P2PPolicy, LinkAllowedExactlyUpToTheLevel) {
  // Rows: link kinds loc, nv, pix, pxb, phb, node, sys.
  // Columns: levels LOC, NVL, PIX, PXB, PHB, NODE, SYS.
  constexpr std::array<std::array<bool, 7>, 7> expected = {{
      {1, 1, 1, 1, 1, 1, 1},  // loc: the same GPU needs no peer link
      {0, 1, 1, 1, 1, 1, 1},  // nv: every level but LOC
      {0, 0, 1, 1, 1, 1, 1},  // pix
      {0, 0, 0, 1, 1, 1, 1},  // pxb
      {0, 0, 0, 0, 1, 1, 1},  // phb
      {0, 0, 0, 0, 0, 1, 1},  // node
      {0, 0, 0, 0, 0, 0, 1},  // sys
  }};
  constexpr std::array<LinkKind, 7> kinds = {LinkKind::loc, LinkKind::nv,  LinkKind::pix,
                                             LinkKind::pxb, LinkKind::phb, LinkKind::node,
                                             LinkKind::sys};
  constexpr std::array<P2PLevel, 7> levels = {P2PLevel::loc, P2PLevel::nvl, P2PLevel::pix,
                                              P2PLevel::pxb, P2PLevel::phb, P2PLevel::node,
                                              P2PLevel::sys};
  for (std::size_t k = 0; k < kinds.size(); ++k)
    for (std::size_t l = 0; l < levels.size(); ++l) {
      const LinkClass link{kinds[k], kinds[k] == LinkKind::nv ? 4 : 0};
      EXPECT_EQ(p2p_allowed(link, levels[l]), expected[k][l])
          << to_string(link) << " at level index " << l;
    }
}

TEST(LinkMatrix, RefusesNvlinkCountsOfTheWrongShape) {
  const std::vector<GpuLocation> gpus = {gpu_on_root_port(0x01, 0x00, "0000:[00-1f]", 0),
                                         gpu_on_root_port(0x21, 0x20, "0000:[20-3f]", 0)};
  EXPECT_THROW(link_matrix(gpus, NvlinkCounts{{0, 1}}), InvalidArgument);
  EXPECT_THROW(link_matrix(gpus, NvlinkCounts{{0, 1}, {1}}), InvalidArgument);
  EXPECT_NO_THROW(link_matrix(gpus, NvlinkCounts{{0, 1}, {1, 0}}));
  EXPECT_NO_THROW(link_matrix(gpus));
}

TEST(LinkMatrix, SaysSoWhenThereIsNoGpu) {
  const std::string text = link_matrix({});
  EXPECT_NE(text.find("No GPUs"), std::string::npos) << text;
  EXPECT_EQ(text.find("GPU0"), std::string::npos) << text;
}

}  // namespace
}  // namespace peerplan::topology
