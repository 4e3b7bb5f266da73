// SPDX-License-Identifier: Apache-2.0
// Window and its one text syntax: what each spelling means, what is
// refused and why, and that every window's text reads back as itself.
#include "core/window_text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace peerplan::core {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

Window parsed(const std::string& text) {
  const WindowSetting setting = parse_window(text);
  EXPECT_TRUE(setting.ok()) << text << ": " << setting.problem;
  EXPECT_TRUE(setting.window.has_value()) << text;
  return setting.window.value_or(Window{});
}

std::string problem(const std::string& text) {
  const WindowSetting setting = parse_window(text);
  EXPECT_FALSE(setting.ok()) << text << " was accepted";
  EXPECT_FALSE(setting.window.has_value()) << text;
  return setting.problem;
}

TEST(Window, ContainsSizesAboveItsStartUpToItsEnd) {
  const Window w{64 * KiB, 4 * MiB};
  EXPECT_FALSE(w.contains(64 * KiB));
  EXPECT_TRUE(w.contains(64 * KiB + 1));
  EXPECT_TRUE(w.contains(4 * MiB));
  EXPECT_FALSE(w.contains(4 * MiB + 1));
  EXPECT_TRUE(Window::every_size().contains(1));
  EXPECT_TRUE(Window::every_size().contains(kNoLimit));
  EXPECT_TRUE(Window::up_to_bytes(16).contains(16));
  EXPECT_FALSE(Window::up_to_bytes(16).contains(17));
  EXPECT_FALSE(Window::above_bytes(16).contains(16));
  EXPECT_TRUE(Window::above_bytes(16).contains(kNoLimit));
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, 64 * KiB, kNoLimit})
    EXPECT_FALSE(Window::never().contains(bytes)) << bytes;
}

TEST(Window, NeverIsTheOneValidEmptyWindow) {
  EXPECT_TRUE(Window::never().is_never());
  EXPECT_TRUE(Window::never().is_valid());
  EXPECT_TRUE((Window{8, 8}).is_never());
  EXPECT_FALSE((Window{8, 8}).is_valid());
  EXPECT_FALSE((Window{9, 8}).is_valid());
  EXPECT_TRUE((Window{8, 9}).is_valid());
  EXPECT_TRUE(Window::every_size().is_valid());
  EXPECT_EQ(Window::above_bytes(0), Window::every_size());
  EXPECT_NE(Window::up_to_bytes(4), Window::above_bytes(4));
}

TEST(WindowText, EverySpelling) {
  EXPECT_EQ(parse_window("auto").window, std::nullopt);
  EXPECT_TRUE(parse_window("AUTO").ok());
  EXPECT_EQ(parsed("never"), Window::never());
  EXPECT_EQ(parsed("Off"), Window::never());
  EXPECT_EQ(parsed("all"), Window::every_size());
  EXPECT_EQ(parsed("65536"), Window::up_to_bytes(64 * KiB));
  EXPECT_EQ(parsed("2M"), Window::up_to_bytes(2 * MiB));
  EXPECT_EQ(parsed("64K..4M"), (Window{64 * KiB, 4 * MiB}));
  EXPECT_EQ(parsed("0..1g"), Window::up_to_bytes(1024 * MiB));
  EXPECT_EQ(parsed("64K.."), Window::above_bytes(64 * KiB));
  EXPECT_EQ(parsed("0.."), Window::every_size());
}

TEST(WindowText, RefusesWhatHoldsNoSizeOrIsNoSize) {
  EXPECT_NE(problem("0").find("write never"), std::string::npos);
  EXPECT_NE(problem("4M..64K").find("holds no message"), std::string::npos);
  EXPECT_NE(problem("64K..64K").find("holds no message"), std::string::npos);
  EXPECT_NE(problem("ll").find("'ll' is not a byte count"), std::string::npos);
  EXPECT_NE(problem("..4M").find("'' is not a byte count"), std::string::npos);
  EXPECT_NE(problem("64K..4X").find("'4X' is not a byte count"), std::string::npos);
  // Open above the largest size: no size is above it.
  EXPECT_NE(problem("18446744073709551615..").find("holds no message"), std::string::npos);
  for (const char* bad : {"", " 4M", "4M ", "-1", "1.5M", "64K...4M", "64K-4M", "lamport"})
    EXPECT_FALSE(parse_window(bad).ok()) << bad;
}

TEST(WindowText, WritesWhatItReads) {
  EXPECT_EQ(window_text(std::optional<Window>{}), "auto");
  EXPECT_EQ(window_text(Window::never()), "never");
  EXPECT_EQ(window_text(Window::every_size()), "all");
  EXPECT_EQ(window_text(Window::up_to_bytes(2 * MiB)), "2M");
  EXPECT_EQ(window_text(Window::up_to_bytes(1000)), "1000");
  EXPECT_EQ(window_text(Window{64 * KiB, 4 * MiB}), "64K..4M");
  EXPECT_EQ(window_text(Window::above_bytes(3 * 1024 * MiB)), "3G..");
  for (const Window w : {Window::never(), Window::every_size(), Window::up_to_bytes(1),
                         Window{1, 2}, Window{64 * KiB + 1, 4 * MiB - 1}, Window::above_bytes(7),
                         Window::up_to_bytes(kNoLimit - 1)}) {
    EXPECT_EQ(parsed(window_text(w)), w) << window_text(w);
  }
}

TEST(WindowText, SizeText) {
  EXPECT_EQ(size_text(0), "0");
  EXPECT_EQ(size_text(1023), "1023");
  EXPECT_EQ(size_text(1024), "1K");
  EXPECT_EQ(size_text(1536 * KiB), "1536K");
  EXPECT_EQ(size_text(2 * 1024 * MiB), "2G");
}

}  // namespace
}  // namespace peerplan::core
