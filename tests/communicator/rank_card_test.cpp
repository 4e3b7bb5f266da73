// SPDX-License-Identifier: Apache-2.0
// The rank card's byte encoding: every field survives the round trip, and
// bytes that are not a card of this version say what is wrong.
#include "communicator/rank_card.hpp"

#include <gtest/gtest.h>

#include <string>

#include "peerplan/errors.hpp"
#include "topology/pci_address.hpp"

namespace peerplan::communicator {
namespace {

RankCard full_card() {
  RankCard card;
  card.node_key = "host id node1";
  card.machine_key = "gpu-box/6f1c-boot";
  card.settings_error = "PEERPLAN_FALLBACK=\"pigeon\" is not valid: expected auto, nccl, mpi";
  card.agreed_settings = {{"cutoffs.one_shot_max_bytes", "PEERPLAN_ONE_SHOT_MAX_BYTES", "auto"},
                          {"fallback", "PEERPLAN_FALLBACK", "mpi"}};
  card.tuning_file = "/etc/peerplan/tuning.txt";
  card.tuning_digest = "0123456789abcdef";
  card.tuning_error = std::nullopt;
  card.tuning_entries = {{"cuda 4x NVIDIA H200 nvl", "one_shot_max_bytes=65536, ..."},
                         {"", "text with\nline breaks"}};
  card.topology_error = "cannot read topo.xml";
  card.sees_gpu = true;
  card.gpu_error = std::nullopt;
  card.gpu.bus_id = "0000:17:00.0";
  card.gpu.name = "NVIDIA H200";
  card.gpu.nvlinks.switch_links = 18;
  card.gpu.pcie_max_mb_per_s = 63015;
  card.gpu.nvlinks.gpu_peers = {*topology::PciAddress::parse("0000:3a:00.0"),
                                *topology::PciAddress::parse("0000:3a:00.0")};
  return card;
}

std::string decode_error(std::span<const std::byte> bytes) {
  try {
    decode_rank_card(bytes);
  } catch (const Mismatch& e) {
    return e.what();
  }
  return "";
}

TEST(RankCard, RoundTripsEveryField) {
  const RankCard card = full_card();
  EXPECT_EQ(decode_rank_card(encode_rank_card(card)), card);
}

TEST(RankCard, RoundTripsAnEmptyCard) {
  EXPECT_EQ(decode_rank_card(encode_rank_card(RankCard{})), RankCard{});
}

TEST(RankCard, EncodingIsFixedLittleEndianWithMagicAndVersion) {
  const auto bytes = encode_rank_card(RankCard{});
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 4), "PPRC");
  EXPECT_EQ(static_cast<int>(bytes[4]), static_cast<int>(RankCard::kVersion));
  EXPECT_EQ(static_cast<int>(bytes[5]) + static_cast<int>(bytes[6]) + static_cast<int>(bytes[7]),
            0);
}

TEST(RankCard, EveryTruncationIsAClearError) {
  const auto bytes = encode_rank_card(full_card());
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    const std::string error = decode_error(std::span(bytes).first(size));
    ASSERT_NE(error, "") << "a card cut to " << size << " bytes was accepted";
    EXPECT_NE(error.find("same peerplan build"), std::string::npos) << error;
  }
  EXPECT_NE(decode_error(std::span(bytes).first(10)).find("truncated in field 'node_key'"),
            std::string::npos);
}

TEST(RankCard, GarbageIsRejected) {
  const std::string text = "this is not a card at all";
  EXPECT_NE(decode_error(std::as_bytes(std::span(text.data(), text.size()))).find("magic"),
            std::string::npos);
}

TEST(RankCard, AnotherVersionIsNamed) {
  auto bytes = encode_rank_card(RankCard{});
  bytes[4] = std::byte{7};
  EXPECT_NE(decode_error(bytes).find("version 7, this build reads version 2"), std::string::npos)
      << decode_error(bytes);
}

TEST(RankCard, TrailingBytesAreRejected) {
  auto bytes = encode_rank_card(full_card());
  bytes.push_back(std::byte{0});
  EXPECT_NE(decode_error(bytes).find("1 bytes follow the last field"), std::string::npos);
}

TEST(RankCard, AHugeCountIsRejectedBeforeAllocating) {
  auto bytes = encode_rank_card(RankCard{});
  // node_key, machine_key: empty (4 bytes each); settings_error: absent
  // (1 byte); then the count of agreed settings.
  const std::size_t count_at = 8 + 4 + 4 + 1;
  for (std::size_t i = 0; i < 4; ++i) bytes[count_at + i] = std::byte{0xff};
  EXPECT_NE(decode_error(bytes).find("field 'agreed_settings' says 4294967295 items"),
            std::string::npos)
      << decode_error(bytes);
}

TEST(RankCard, AFlagOtherThanZeroOrOneIsRejected) {
  auto bytes = encode_rank_card(RankCard{});
  bytes[8 + 4 + 4] = std::byte{2};  // settings_error's presence flag
  EXPECT_NE(decode_error(bytes).find("'settings_error' is 2"), std::string::npos)
      << decode_error(bytes);
}

}  // namespace
}  // namespace peerplan::communicator
