// SPDX-License-Identifier: Apache-2.0
// format_route_table: every declaration appears with each of its columns,
// columns line up, strides appear only for non-contiguous layouts, fused
// declarations show their weight address and eps, and a count mismatch is
// reported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "peerplan/plan_key.hpp"
#include "routing/router.hpp"

namespace peerplan::routing {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The whitespace-separated words of a line.
std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

class RouteTable : public testing::Test {
 protected:
  void SetUp() override {
    const std::int64_t shape[] = {4, 4096};
    const std::int64_t padded_strides[] = {8192, 1};
    declarations_ = {
        Declaration::all_reduce("attn_out", DataType::bf16, {8, 4096}),
        Declaration::all_reduce("mlp_out_prefill_like", DataType::f32, {512, 8192}),
        Declaration::fused_add_rms_norm("post_attn_norm", DataType::f16, {8, 4096}, &weight_,
                                        1e-6f),
        Declaration::all_reduce("padded_rows", DataType::bf16,
                                TensorLayout::strided(shape, padded_strides)),
    };
    const RoutingContext context{4, 1, true, RouteCutoffs{64 * 1024, 1024 * 1024, 64 * 1024}};
    decisions_ = route_declarations(declarations_, context);
  }

  float weight_[4096] = {};
  std::vector<Declaration> declarations_;
  std::vector<RouteDecision> decisions_;
};

TEST_F(RouteTable, HeaderThenOneRowPerDeclarationWithEveryColumn) {
  const auto lines = lines_of(format_route_table(declarations_, decisions_));
  ASSERT_EQ(lines.size(), declarations_.size() + 1);
  EXPECT_EQ(words_of(lines[0]), (std::vector<std::string>{"name", "op", "dtype", "shape", "norm",
                                                          "bytes", "route", "protocol", "reason"}));
  for (std::size_t i = 0; i < declarations_.size(); ++i) {
    const Declaration& d = declarations_[i];
    const RouteDecision& r = decisions_[i];
    const auto words = words_of(lines[i + 1]);
    ASSERT_GE(words.size(), 9u) << lines[i + 1];
    EXPECT_EQ(words.front(), d.name);
    EXPECT_EQ(words[1], to_string(d.operation));
    EXPECT_EQ(words[2], to_string(d.dtype));
    // The shape and the norm column are the next words, up to the byte
    // count; the last four words are bytes, route, protocol, reason.
    EXPECT_EQ(words[words.size() - 4], std::to_string(message_bytes(d))) << lines[i + 1];
    EXPECT_EQ(words[words.size() - 3], to_string(r.route));
    EXPECT_EQ(words[words.size() - 2],
              r.route == Route::fallback ? std::string("-") : to_string(r.protocol));
    EXPECT_EQ(words.back(),
              r.reason == FallbackReason::none ? std::string("-") : to_string(r.reason));
    std::string shape = "[";
    for (int k = 0; k < d.layout.rank(); ++k)
      shape += (k ? ", " : "") + std::to_string(d.layout.dim(k));
    shape += "]";
    EXPECT_NE(lines[i + 1].find(shape), std::string::npos) << lines[i + 1];
  }
}

TEST_F(RouteTable, ShowsTheRoutesActuallyChosen) {
  // The fixture's declarations span the routes: check the table says so.
  ASSERT_EQ(decisions_[0].route, Route::one_shot);
  ASSERT_EQ(decisions_[1].route, Route::fallback);
  ASSERT_EQ(decisions_[2].route, Route::fused_one_shot);
  const std::string table = format_route_table(declarations_, decisions_);
  const auto lines = lines_of(table);
  EXPECT_NE(lines[1].find("one_shot"), std::string::npos);
  EXPECT_NE(lines[2].find("fallback"), std::string::npos);
  EXPECT_NE(lines[2].find("over_cutoff"), std::string::npos);
  EXPECT_NE(lines[3].find("fused_one_shot"), std::string::npos);
}

TEST_F(RouteTable, ColumnsLineUp) {
  const auto lines = lines_of(format_route_table(declarations_, decisions_));
  const std::size_t route_column = lines[0].find("route");
  const std::size_t bytes_column = lines[0].find("bytes");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find(to_string(decisions_[i - 1].route), bytes_column), route_column)
        << lines[i];
    EXPECT_EQ(lines[i].find(std::to_string(decisions_[i - 1].message_bytes), bytes_column - 1),
              bytes_column)
        << lines[i];
    EXPECT_NE(lines[i].back(), ' ') << "trailing blank: '" << lines[i] << "'";
  }
}

TEST_F(RouteTable, StridesOnlyForNonContiguousLayouts) {
  const auto lines = lines_of(format_route_table(declarations_, decisions_));
  EXPECT_EQ(lines[1].find("strides"), std::string::npos) << lines[1];
  EXPECT_NE(lines[4].find("[4, 4096] strides [8192, 1]"), std::string::npos) << lines[4];
}

// A fused call misses when its weight pointer or eps differ from the
// declaration's, so the table shows both, as PlanKey::to_string does.
TEST_F(RouteTable, FusedRowsShowTheWeightAddressAndEps) {
  const auto lines = lines_of(format_route_table(declarations_, decisions_));
  char weight[32];
  std::snprintf(weight, sizeof weight, "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(&weight_)));
  EXPECT_NE(lines[3].find(std::string("weight ") + weight + " eps 1e-06"), std::string::npos)
      << lines[3];
  const std::string key = make_key(declarations_[2]).to_string();
  EXPECT_NE(key.find(std::string("weight ") + weight + " eps 1e-06"), std::string::npos) << key;
  // The all-reduce rows have a "-" in that column, right after the shape.
  const auto words = words_of(lines[1]);  // name op dtype [8, 4096] - bytes route protocol reason
  ASSERT_EQ(words.size(), 10u) << lines[1];
  EXPECT_EQ(words[5], "-") << lines[1];
  EXPECT_EQ(lines[1].find("weight"), std::string::npos) << lines[1];
  // The column lines up like the others.
  EXPECT_EQ(lines[3].find("weight"), lines[0].find("norm")) << lines[0] << "\n" << lines[3];
}

TEST_F(RouteTable, FusedRowsTellApartEpsThatDifferInTheLastBit) {
  const float eps = 1e-6f;
  const std::vector<Declaration> two{
      Declaration::fused_add_rms_norm("a", DataType::bf16, {1, 4096}, &weight_, eps),
      Declaration::fused_add_rms_norm("b", DataType::bf16, {1, 4096}, &weight_,
                                      std::nextafter(eps, 1.0f))};
  const RoutingContext context{2, 1, true, RouteCutoffs{64 * 1024, 1024 * 1024, 64 * 1024}};
  const auto lines = lines_of(format_route_table(two, route_declarations(two, context)));
  ASSERT_EQ(lines.size(), 3u);
  const auto eps_of = [](const std::string& line) {
    const auto at = line.find(" eps ");
    return line.substr(at, line.find(' ', at + 5) - at);
  };
  EXPECT_NE(eps_of(lines[1]), eps_of(lines[2])) << lines[1] << "\n" << lines[2];
}

// The host backend's windows (the default ProtocolWindows) stage every
// route: the column says so rather than leaving it to be guessed.
TEST_F(RouteTable, ProtocolColumnNamesEachPlansProtocol) {
  const auto lines = lines_of(format_route_table(declarations_, decisions_));
  const std::size_t column = lines[0].find("protocol");
  ASSERT_NE(column, std::string::npos);
  EXPECT_EQ(lines[1].find("staged", column), column) << lines[1];
  EXPECT_EQ(lines[2].find("-", column), column) << lines[2];  // the fallback has none
  EXPECT_EQ(lines[3].find("staged", column), column) << lines[3];
}

// What the transport prepared for a plan is printed once, under its row;
// an empty text (the fallback) prints nothing.
TEST_F(RouteTable, LaunchLinesFollowTheirRows) {
  const std::vector<std::string> launches{"bf16 one-shot LL: 8 blocks x 512 threads", "",
                                          "f16 fused LL: 8 x 1024"};
  const auto lines = lines_of(format_route_table(declarations_, decisions_, launches));
  ASSERT_EQ(lines.size(), 1u + declarations_.size() + 2u);
  EXPECT_EQ(words_of(lines[1]).front(), "attn_out");
  EXPECT_EQ(lines[2], "  launch: bf16 one-shot LL: 8 blocks x 512 threads");
  EXPECT_EQ(words_of(lines[3]).front(), "mlp_out_prefill_like");
  EXPECT_EQ(words_of(lines[4]).front(), "post_attn_norm");
  EXPECT_EQ(lines[5], "  launch: f16 fused LL: 8 x 1024");
  EXPECT_EQ(words_of(lines[6]).front(), "padded_rows");  // fewer launches than rows: fine
}

TEST_F(RouteTable, EmptySetIsJustTheHeader) {
  EXPECT_EQ(lines_of(format_route_table({}, {})).size(), 1u);
}

TEST_F(RouteTable, CountMismatchIsReportedNotHidden) {
  const std::span<const RouteDecision> fewer(decisions_.data(), 2);
  const auto lines = lines_of(format_route_table(declarations_, fewer));
  ASSERT_EQ(lines.size(), 1u + 2u + 1u);
  EXPECT_NE(lines.back().find("4 declarations but 2 route decisions"), std::string::npos)
      << lines.back();
}

}  // namespace
}  // namespace peerplan::routing
