// SPDX-License-Identifier: Apache-2.0
// The topology fingerprint from the hwloc fixtures of tests/fixtures/topology
// (their README derives every pair's link class): the farthest link over
// the ranks' GPUs, GPU models, NVLink counts, and the host backend.
#include "routing/fingerprint.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peerplan/errors.hpp"
#include "topology/topology.hpp"

namespace peerplan::routing {
namespace {

std::vector<topology::GpuLocation> fixture_gpus(const std::string& file) {
  return topology::Topology::load_xml(std::string(PEERPLAN_TEST_FIXTURES) + "/topology/" + file)
      .gpus();
}

// A cuda communicator with one rank per GPU of `gpus`, all of model `name`.
MachineFacts cuda_ranks(std::vector<topology::GpuLocation> gpus,
                        const std::string& name = "NVIDIA L40S") {
  MachineFacts facts;
  facts.backend = Backend::cuda;
  facts.world_size = static_cast<int>(gpus.size());
  facts.gpu_names.assign(gpus.size(), name);
  facts.gpus = std::move(gpus);
  return facts;
}

TEST(Fingerprint, HostBackendIsBackendAndRanks) {
  MachineFacts facts;
  facts.world_size = 4;
  EXPECT_EQ(topology_fingerprint(facts), "host ranks=4");
  // GPUs a host-backend rank might see do not matter to its routes.
  facts.gpu_names = {"NVIDIA H200"};
  EXPECT_EQ(topology_fingerprint(facts), "host ranks=4");
}

TEST(Fingerprint, OneSwitchPairIsPix) {
  EXPECT_EQ(topology_fingerprint(cuda_ranks(fixture_gpus("2gpu-one-switch.xml"))),
            "cuda ranks=2 gpu=\"NVIDIA L40S\" links=PIX");
}

TEST(Fingerprint, FarthestPairDecides) {
  // 4gpu-two-switches: PIX within a switch, PHB across: four ranks see PHB,
  // two ranks on one switch only PIX.
  const std::string model = "NVIDIA RTX 6000 Ada Generation";
  const auto gpus = fixture_gpus("4gpu-two-switches.xml");
  ASSERT_EQ(gpus.size(), 4u);
  EXPECT_EQ(topology_fingerprint(cuda_ranks(gpus, model)),
            "cuda ranks=4 gpu=\"" + model + "\" links=PHB");
  EXPECT_EQ(topology_fingerprint(cuda_ranks({gpus[0], gpus[1]}, model)),
            "cuda ranks=2 gpu=\"" + model + "\" links=PIX");
  EXPECT_EQ(topology_fingerprint(cuda_ranks({gpus[1], gpus[2]}, model)),
            "cuda ranks=2 gpu=\"" + model + "\" links=PHB");
}

TEST(Fingerprint, CascadedSwitchesArePxb) {
  EXPECT_EQ(topology_fingerprint(cuda_ranks(fixture_gpus("4gpu-cascaded-switches.xml"))),
            "cuda ranks=4 gpu=\"NVIDIA L40S\" links=PXB");  // (V100s there; the name is an input)
}

TEST(Fingerprint, TwoSocketsAreSysAndOneSocketNode) {
  const auto gpus = fixture_gpus("8gpu-two-sockets.xml");
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_EQ(topology_fingerprint(cuda_ranks(gpus)), "cuda ranks=8 gpu=\"NVIDIA L40S\" links=SYS");
  EXPECT_EQ(topology_fingerprint(cuda_ranks({gpus[0], gpus[1], gpus[2], gpus[3]})),
            "cuda ranks=4 gpu=\"NVIDIA L40S\" links=NODE");
}

TEST(Fingerprint, NvlinkCountsWinOverThePcieClass) {
  // The captured 2x H200 VM: PCIe alone says PHB, nvidia-smi says NV18.
  MachineFacts facts = cuda_ranks(fixture_gpus("2gpu-h200-vm.xml"), "NVIDIA H200");
  EXPECT_EQ(topology_fingerprint(facts), "cuda ranks=2 gpu=\"NVIDIA H200\" links=PHB");
  facts.nvlinks = {{0, 18}, {18, 0}};
  EXPECT_EQ(topology_fingerprint(facts), "cuda ranks=2 gpu=\"NVIDIA H200\" links=NV18");
}

TEST(Fingerprint, FewerNvlinksAndPcieHopsAreFarther) {
  const auto gpus = fixture_gpus("4gpu-cascaded-switches.xml");
  // Every pair on NVLink: the pair with the fewest links is the farthest.
  topology::NvlinkCounts all_nv(4, std::vector<int>(4, 6));
  all_nv[1][2] = all_nv[2][1] = 2;
  EXPECT_EQ(to_string(*farthest_link(gpus, all_nv)), "NV2");
  // One pair without NVLink: its PCIe class is farther than any NVLink.
  all_nv[0][3] = all_nv[3][0] = 0;
  EXPECT_EQ(to_string(*farthest_link(gpus, all_nv)), "PXB");
}

TEST(Fingerprint, RanksSharingOneGpu) {
  const auto gpus = fixture_gpus("2gpu-one-switch.xml");
  EXPECT_EQ(topology_fingerprint(cuda_ranks({gpus[0], gpus[0]})),
            "cuda ranks=2 gpu=\"NVIDIA L40S\" links=X");
  // A shared GPU next to a real pair: the pair decides.
  EXPECT_EQ(topology_fingerprint(cuda_ranks({gpus[0], gpus[0], gpus[1]})),
            "cuda ranks=3 gpu=\"NVIDIA L40S\" links=PIX");
  // The communicator says when ranks share a GPU (it compares their bus
  // ids, which need not be in the topology): the fingerprint ends in
  // "shared", and such a fingerprint is never tuned for.
  MachineFacts facts = cuda_ranks({gpus[0], gpus[0], gpus[1]});
  facts.gpus_shared = true;
  const std::string shared = topology_fingerprint(facts);
  EXPECT_EQ(shared, "cuda ranks=3 gpu=\"NVIDIA L40S\" links=PIX shared");
  EXPECT_TRUE(fingerprint_says_shared(shared));
  EXPECT_FALSE(fingerprint_says_shared(topology_fingerprint(cuda_ranks({gpus[0], gpus[1]}))));
  facts.gpus.clear();
  EXPECT_EQ(topology_fingerprint(facts), "cuda ranks=3 gpu=\"NVIDIA L40S\" links=unknown shared");
  EXPECT_FALSE(fingerprint_says_shared("host ranks=2"));
  EXPECT_FALSE(fingerprint_says_shared(""));
}

TEST(Fingerprint, MixedModels) {
  MachineFacts facts = cuda_ranks(fixture_gpus("2gpu-one-switch.xml"));
  facts.gpu_names = {"NVIDIA L40S", "NVIDIA L40"};
  EXPECT_EQ(topology_fingerprint(facts), "cuda ranks=2 gpu=\"mixed\" links=PIX");
  EXPECT_EQ(gpu_model({}), "unknown");
  EXPECT_EQ(gpu_model({"A", "A", "A"}), "A");
  EXPECT_EQ(gpu_model({"A", "A", "B"}), "mixed");
}

TEST(Fingerprint, GpusMissingFromTheTopologyMakeLinksUnknown) {
  MachineFacts facts = cuda_ranks(fixture_gpus("2gpu-one-switch.xml"));
  facts.gpus.pop_back();  // one rank's bus id was not found
  EXPECT_EQ(topology_fingerprint(facts), "cuda ranks=2 gpu=\"NVIDIA L40S\" links=unknown");
}

TEST(Fingerprint, OneRankHasNoLinks) {
  const auto gpus = fixture_gpus("2gpu-one-switch.xml");
  EXPECT_EQ(topology_fingerprint(cuda_ranks({gpus[0]})), "cuda ranks=1 gpu=\"NVIDIA L40S\"");
  EXPECT_FALSE(farthest_link({gpus[0]}).has_value());
  EXPECT_FALSE(farthest_link({}).has_value());
}

TEST(Fingerprint, SeveralNodesKeepOnlyNodesAndRanks) {
  MachineFacts facts = cuda_ranks(fixture_gpus("2gpu-one-switch.xml"));
  facts.world_size = 16;
  facts.num_nodes = 2;
  EXPECT_EQ(topology_fingerprint(facts), "cuda nodes=2 ranks=16");
  facts.backend = Backend::host;
  EXPECT_EQ(topology_fingerprint(facts), "host nodes=2 ranks=16");
}

TEST(Fingerprint, QuotesInModelNamesAreEscaped) {
  MachineFacts facts = cuda_ranks(fixture_gpus("2gpu-one-switch.xml"), "odd \"name\"\\x");
  EXPECT_EQ(topology_fingerprint(facts), "cuda ranks=2 gpu=\"odd \\\"name\\\"\\\\x\" links=PIX");
}

TEST(Fingerprint, DoesNotDependOnWhichRankComputesIt) {
  // A pure function of gathered facts: the same facts, the same line (and
  // rank order does not move the farthest pair).
  const auto gpus = fixture_gpus("4gpu-two-switches.xml");
  const std::string forward = topology_fingerprint(cuda_ranks(gpus));
  EXPECT_EQ(topology_fingerprint(cuda_ranks(gpus)), forward);
  EXPECT_EQ(topology_fingerprint(cuda_ranks({gpus[3], gpus[1], gpus[2], gpus[0]})), forward);
}

TEST(Fingerprint, RejectsAnNvlinkMatrixOfTheWrongSize) {
  const auto gpus = fixture_gpus("2gpu-one-switch.xml");
  EXPECT_THROW(farthest_link(gpus, {{0}}), InvalidArgument);
  EXPECT_THROW(farthest_link(gpus, {{0, 1}, {1}}), InvalidArgument);
}

}  // namespace
}  // namespace peerplan::routing
