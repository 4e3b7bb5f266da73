// SPDX-License-Identifier: Apache-2.0
// The strict value parsers behind PEERPLAN_* variables: whole-string
// matches only, suffix arithmetic, and overflow detection.
#include "core/value_parsing.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "peerplan/config.hpp"

namespace peerplan::core {
namespace {

TEST(ParseSize, PlainBytesAndBinarySuffixes) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("524288"), 524288u);
  EXPECT_EQ(parse_size("512K"), 512u * 1024);
  EXPECT_EQ(parse_size("512k"), 512u * 1024);
  EXPECT_EQ(parse_size("8M"), 8u * 1024 * 1024);
  EXPECT_EQ(parse_size("8m"), 8u * 1024 * 1024);
  EXPECT_EQ(parse_size("2G"), std::size_t{2} << 30);
  EXPECT_EQ(parse_size("0K"), 0u);
}

TEST(ParseSize, RejectsAnythingButDigitsAndOneSuffix) {
  for (const char* bad : {"", "K", "-1", "+1", " 1", "1 ", "1.5M", "512KB", "512KiB", "1T", "0x10",
                          "1e3", "12 K", "K12"}) {
    EXPECT_FALSE(parse_size(bad).has_value()) << '"' << bad << '"';
  }
}

TEST(ParseSize, DetectsOverflowInsteadOfWrapping) {
  constexpr auto max = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(parse_size(std::to_string(max)), max);
  EXPECT_FALSE(parse_size(std::to_string(max) + "0").has_value());
  // The largest G count that fits, then one more.
  const std::size_t max_g = max >> 30;
  EXPECT_EQ(parse_size(std::to_string(max_g) + "G"), max_g << 30);
  EXPECT_FALSE(parse_size(std::to_string(max_g + 1) + "G").has_value());
}

TEST(ParseInteger, SignedDecimalOnly) {
  EXPECT_EQ(parse_integer("0"), 0);
  EXPECT_EQ(parse_integer("-1"), -1);
  EXPECT_EQ(parse_integer("30000"), 30000);
  EXPECT_EQ(parse_integer("9223372036854775807"), std::numeric_limits<std::int64_t>::max());
  for (const char* bad : {"", "-", "+5", " 5", "5 ", "5ms", "1.0", "0x1F", "9223372036854775808"}) {
    EXPECT_FALSE(parse_integer(bad).has_value()) << '"' << bad << '"';
  }
}

TEST(ParseBool, AcceptsTheEightSpellingsInAnyCase) {
  for (const char* yes : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On"})
    EXPECT_EQ(parse_bool(yes), true) << yes;
  for (const char* no : {"0", "false", "FALSE", "no", "No", "off", "OFF"})
    EXPECT_EQ(parse_bool(no), false) << no;
  for (const char* bad : {"", "2", "y", "n", "enable", "truee", " 1", "-1"})
    EXPECT_FALSE(parse_bool(bad).has_value()) << '"' << bad << '"';
}

TEST(ParseEnum, MatchesNamesCaseInsensitivelyAndWholly) {
  constexpr std::array levels{LogLevel::none, LogLevel::warn, LogLevel::info, LogLevel::trace};
  EXPECT_EQ(parse_enum("info", levels), LogLevel::info);
  EXPECT_EQ(parse_enum("TrAcE", levels), LogLevel::trace);
  EXPECT_FALSE(parse_enum("INF", levels).has_value());
  EXPECT_FALSE(parse_enum("INFO ", levels).has_value());
  EXPECT_EQ(enum_names(levels), "NONE|WARN|INFO|TRACE");
}

}  // namespace
}  // namespace peerplan::core
