// SPDX-License-Identifier: Apache-2.0
// Config values set in code are range-checked like the environment's:
// InvalidArgument naming the field, its value, what it accepts and the
// variable; every bad field at once.
#include "core/config_validation.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::core {
namespace {

std::string rejection(const Config& config) {
  try {
    validate_config(config);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return {};
}

TEST(ConfigValidation, DefaultsAndEveryKnobsRangeAreAccepted) {
  EXPECT_NO_THROW(validate_config(Config{}));
  Config c;
  for (int blocks : {0, 1, 132, kOneShotMaxBlocksLimit}) {
    c.kernels.one_shot_max_blocks = blocks;
    EXPECT_NO_THROW(validate_config(c)) << blocks;
  }
  c.kernels.one_shot_lamport = Window::never();
  c.kernels.fused_lamport = Window::every_size();
  c.kernels.fused_ll = Window::never();
  c.kernels.two_shot_dma = Window{1, 2};
  c.kernels.two_shot_lamport = Window::up_to_bytes(1);
  for (auto clusters : {RowClusters::automatic, RowClusters::on, RowClusters::off}) {
    c.kernels.row_clusters = clusters;
    EXPECT_NO_THROW(validate_config(c));
  }
}

TEST(ConfigValidation, OneShotMaxBlocksOutOfRange) {
  for (int blocks : {-1, kOneShotMaxBlocksLimit + 1, 1 << 20}) {
    Config c;
    c.kernels.one_shot_max_blocks = blocks;
    const std::string message = rejection(c);
    EXPECT_NE(message.find("Config::kernels.one_shot_max_blocks is " + std::to_string(blocks)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("1 to 1024"), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_ONE_SHOT_MAX_BLOCKS"), std::string::npos) << message;
  }
}

TEST(ConfigValidation, AWindowThatHoldsNoSizeOtherThanNever) {
  for (const Window empty : {Window{5, 5}, Window{8, 4}, Window{kNoLimit, kNoLimit}}) {
    Config c;
    c.kernels.fused_lamport = empty;
    const std::string message = rejection(c);
    EXPECT_NE(message.find("Config::kernels.fused_lamport is {above " +
                           std::to_string(empty.above) + ", up_to " + std::to_string(empty.up_to)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Window::never()"), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_FUSED_LAMPORT"), std::string::npos) << message;
  }
  Config c;
  c.kernels.two_shot_lamport = Window{0, 0};  // never() itself
  EXPECT_NO_THROW(validate_config(c));
}

TEST(ConfigValidation, P2PLevelOutsideTheEnum) {
  Config c;
  for (auto level : {P2PLevel::loc, P2PLevel::node, P2PLevel::sys, P2PLevel::automatic}) {
    c.p2p_level = level;
    EXPECT_NO_THROW(validate_config(c)) << to_string(level);
  }
  c.p2p_level = static_cast<P2PLevel>(8);
  const std::string message = rejection(c);
  EXPECT_NE(message.find("Config::p2p_level is 8"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_P2P_LEVEL"), std::string::npos) << message;
}

TEST(ConfigValidation, RowClustersOutsideTheEnum) {
  Config c;
  c.kernels.row_clusters = static_cast<RowClusters>(7);
  const std::string message = rejection(c);
  EXPECT_NE(message.find("Config::kernels.row_clusters is 7"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_ROW_CLUSTERS"), std::string::npos) << message;
}

TEST(ConfigValidation, FallbackOutsideTheEnum) {
  Config c;
  c.fallback = static_cast<Fallback>(9);
  const std::string message = rejection(c);
  EXPECT_NE(message.find("Config::fallback is 9"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_FALLBACK"), std::string::npos) << message;
}

TEST(ConfigValidation, EveryBadFieldAtOnce) {
  Config c;
  c.kernels.one_shot_max_blocks = -5;
  c.kernels.row_clusters = static_cast<RowClusters>(3);
  const std::string message = rejection(c);
  EXPECT_NE(message.find("one_shot_max_blocks"), std::string::npos) << message;
  EXPECT_NE(message.find("row_clusters"), std::string::npos) << message;
}

TEST(ConfigValidation, UndeclaredKeysTrackedWithinItsRange) {
  for (int keys : {0, 1, 16, kMaxUndeclaredKeysTracked}) {
    Config c;
    c.undeclared_keys_tracked = keys;
    EXPECT_NO_THROW(validate_config(c)) << keys;
  }
  for (int keys : {-1, kMaxUndeclaredKeysTracked + 1}) {
    Config c;
    c.undeclared_keys_tracked = keys;
    const std::string message = rejection(c);
    EXPECT_NE(message.find("PEERPLAN_TRACK_UNDECLARED"), std::string::npos) << message;
  }
}

TEST(ConfigValidation, BackendTransferModeAndLogLevelOutsideTheEnum) {
  Config c;
  for (auto backend : {Backend::automatic, Backend::cuda, Backend::host}) {
    c.backend = backend;
    EXPECT_NO_THROW(validate_config(c));
  }
  c.backend = static_cast<Backend>(9);
  std::string message = rejection(c);
  EXPECT_NE(message.find("Config::backend is 9"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_BACKEND"), std::string::npos) << message;

  c = Config{};
  for (auto mode : {TransferMode::automatic, TransferMode::pull, TransferMode::push}) {
    c.transfer_mode = mode;
    EXPECT_NO_THROW(validate_config(c));
  }
  c.transfer_mode = static_cast<TransferMode>(3);
  message = rejection(c);
  EXPECT_NE(message.find("Config::transfer_mode is 3"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_TRANSFER_MODE"), std::string::npos) << message;

  c = Config{};
  for (auto level : {LogLevel::none, LogLevel::warn, LogLevel::info, LogLevel::trace}) {
    c.log_level = level;
    EXPECT_NO_THROW(validate_config(c));
  }
  c.log_level = static_cast<LogLevel>(4);
  message = rejection(c);
  EXPECT_NE(message.find("Config::log_level is 4"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_DEBUG"), std::string::npos) << message;
}

TEST(ConfigValidation, DeviceIsMinusOneOrAnIndex) {
  for (int device : {-1, 0, 7}) {
    Config c;
    c.device = device;
    EXPECT_NO_THROW(validate_config(c)) << device;
  }
  Config c;
  c.device = -7;  // once taken as -1 silently
  const std::string message = rejection(c);
  EXPECT_NE(message.find("Config::device is -7"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_DEVICE"), std::string::npos) << message;
}

// A negative size was never checked by create(), silently.
TEST(ConfigValidation, ExpectedWorldSizeIsZeroOrACount) {
  for (int size : {0, 1, 8}) {
    Config c;
    c.expected_world_size = size;
    EXPECT_NO_THROW(validate_config(c)) << size;
  }
  Config c;
  c.expected_world_size = -2;
  const std::string message = rejection(c);
  EXPECT_NE(message.find("Config::expected_world_size is -2"), std::string::npos) << message;
  EXPECT_NE(message.find("PEERPLAN_WORLD_SIZE"), std::string::npos) << message;
}

// Pieces round down to multiples of 256 bytes: 1..255 would mean "never
// split" without saying so, as it is refused from the environment.
TEST(ConfigValidation, TwoShotChunkBytesIsZeroOrAtLeast256) {
  for (std::size_t bytes :
       {std::size_t{0}, kTwoShotPieceAlignment, std::size_t{4097}, kAutoCutoff}) {
    Config c;
    c.cutoffs.two_shot_chunk_bytes = bytes;
    EXPECT_NO_THROW(validate_config(c)) << bytes;
  }
  for (std::size_t bytes : {std::size_t{1}, std::size_t{255}}) {
    Config c;
    c.cutoffs.two_shot_chunk_bytes = bytes;
    const std::string message = rejection(c);
    EXPECT_NE(message.find("Config::cutoffs.two_shot_chunk_bytes is " + std::to_string(bytes)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("use 0 to never split, or at least 256"), std::string::npos) << message;
    EXPECT_NE(message.find("PEERPLAN_TWO_SHOT_CHUNK_BYTES"), std::string::npos) << message;
  }
}

// "Wait forever" as milliseconds::max() would overflow now + timeout.
TEST(ConfigValidation, TimeoutWithinOneMillisecondToIntMax) {
  for (auto ms : {std::chrono::milliseconds(1), std::chrono::milliseconds(30'000), kMaxTimeout}) {
    Config c;
    c.timeout = ms;
    EXPECT_NO_THROW(validate_config(c)) << ms.count();
  }
  for (auto ms : {std::chrono::milliseconds(0), std::chrono::milliseconds(-1),
                  kMaxTimeout + std::chrono::milliseconds(1), std::chrono::milliseconds::max()}) {
    Config c;
    c.timeout = ms;
    const std::string message = rejection(c);
    EXPECT_NE(message.find("Config::timeout is " + std::to_string(ms.count()) + " ms"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("PEERPLAN_TIMEOUT_MS"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace peerplan::core
