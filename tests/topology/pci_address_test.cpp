// SPDX-License-Identifier: Apache-2.0
// PCI bus ids as hwloc, lspci, nvidia-smi and CUDA print them parse to the
// same address; anything else is refused.
#include <gtest/gtest.h>

#include "topology/pci_address.hpp"

namespace peerplan::topology {
namespace {

TEST(PciAddress, ParsesFourAndEightDigitDomainsAlike) {
  const auto hwloc_style = PciAddress::parse("0000:17:00.0");
  const auto cuda_style = PciAddress::parse("00000000:17:00.0");
  ASSERT_TRUE(hwloc_style.has_value());
  ASSERT_TRUE(cuda_style.has_value());
  EXPECT_EQ(*hwloc_style, *cuda_style);
  EXPECT_EQ(hwloc_style->domain, 0u);
  EXPECT_EQ(hwloc_style->bus, 0x17);
  EXPECT_EQ(hwloc_style->device, 0);
  EXPECT_EQ(hwloc_style->function, 0);
}

TEST(PciAddress, IsCaseInsensitiveAndToleratesSurroundingSpace) {
  const auto upper = PciAddress::parse("00000000:A3:1F.7");
  const auto lower = PciAddress::parse(" 0000:a3:1f.7\n");
  ASSERT_TRUE(upper.has_value());
  ASSERT_TRUE(lower.has_value());
  EXPECT_EQ(*upper, *lower);
  EXPECT_EQ(upper->bus, 0xa3);
  EXPECT_EQ(upper->device, 0x1f);
  EXPECT_EQ(upper->function, 7);
}

TEST(PciAddress, MissingDomainMeansDomainZero) {
  const auto short_form = PciAddress::parse("a3:00.1");  // lspci without -D
  ASSERT_TRUE(short_form.has_value());
  EXPECT_EQ(*short_form, (PciAddress{0, 0xa3, 0, 1}));
}

TEST(PciAddress, KeepsWideDomains) {
  const auto vmd = PciAddress::parse("10000:e1:00.0");  // Intel VMD domain
  ASSERT_TRUE(vmd.has_value());
  EXPECT_EQ(vmd->domain, 0x10000u);
  EXPECT_EQ(vmd->to_string(), "10000:e1:00.0");
}

TEST(PciAddress, FormatsLikeHwloc) {
  EXPECT_EQ((PciAddress{0, 0x17, 0, 0}).to_string(), "0000:17:00.0");
  EXPECT_EQ((PciAddress{1, 0xa, 0x1f, 3}).to_string(), "0001:0a:1f.3");
  const auto round_trip = PciAddress::parse("00000002:C1:00.1");
  ASSERT_TRUE(round_trip.has_value());
  EXPECT_EQ(round_trip->to_string(), "0002:c1:00.1");
}

TEST(PciAddress, RefusesWhatIsNotABusId) {
  for (const char* text : {"", "0000:17:00", "17.0", "0000:17:00.8" /* function > 7 */,
                           "0000:17:20.0" /* device > 31 */, "0000:117:00.0", "000000000:17:00.0",
                           "0000:1g:00.0", "0000::00.0", ":17:00.0", "0000:17:00.0.0",
                           "0000:17:00.", "GPU-5bfda7ef", "0000:17:00.0 junk"}) {
    EXPECT_FALSE(PciAddress::parse(text).has_value()) << "accepted '" << text << "'";
  }
}

TEST(PciAddress, OrdersByDomainThenBusThenDeviceThenFunction) {
  EXPECT_LT((PciAddress{0, 0x17, 0, 0}), (PciAddress{0, 0x18, 0, 0}));
  EXPECT_LT((PciAddress{0, 0xff, 0, 0}), (PciAddress{1, 0x00, 0, 0}));
  EXPECT_LT((PciAddress{0, 0x17, 0, 1}), (PciAddress{0, 0x17, 1, 0}));
}

}  // namespace
}  // namespace peerplan::topology
