// SPDX-License-Identifier: Apache-2.0
// nodes_in_fingerprint: the node count the tool refuses to tune, read from
// the fingerprints routing::topology_fingerprint writes.
#include "tunable_machine.hpp"

#include <gtest/gtest.h>

namespace peerplan::tune {
namespace {

TEST(NodesInFingerprint, OneNodeHasNoNodesWord) {
  EXPECT_EQ(nodes_in_fingerprint("host ranks=4"), 1);
  EXPECT_EQ(nodes_in_fingerprint("cuda ranks=2 gpu=\"NVIDIA H200\" links=NV18"), 1);
  EXPECT_EQ(nodes_in_fingerprint("cuda ranks=4 gpu=\"NVIDIA H200\" links=NV18 shared"), 1);
}

TEST(NodesInFingerprint, SeveralNodes) {
  EXPECT_EQ(nodes_in_fingerprint("host nodes=2 ranks=4"), 2);
  EXPECT_EQ(nodes_in_fingerprint("cuda nodes=16 ranks=128"), 16);
}

TEST(NodesInFingerprint, AGpuModelNamedNodesIsNotANodeCount) {
  // Only the " nodes=" word counts; anything unreadable after it is one node.
  EXPECT_EQ(nodes_in_fingerprint("cuda ranks=2 gpu=\"nodes\" links=NV18"), 1);
  EXPECT_EQ(nodes_in_fingerprint("host nodes=x ranks=4"), 1);
}

}  // namespace
}  // namespace peerplan::tune
