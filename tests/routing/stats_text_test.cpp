// SPDX-License-Identifier: Apache-2.0
// to_string(const Stats&): totals, one row per plan with its route, protocol (and why
// it falls back), the undeclared keys with their overcount.
#include <gtest/gtest.h>

#include <string>

#include "peerplan/route.hpp"

namespace peerplan {
namespace {

TEST(StatsText, TotalsPlansAndUndeclaredKeys) {
  Stats s;
  s.p2p_calls = 12;
  s.fallback_undeclared = 5;
  s.plans.push_back({"attn_out.t1", Operation::all_reduce, Route::one_shot, FallbackReason::none,
                     12, 0, Protocol::lamport, "bf16 one-shot Lamport: 8 blocks x 512 threads"});
  s.plans.push_back({"big",
                     Operation::all_reduce,
                     Route::fallback,
                     FallbackReason::over_cutoff,
                     0,
                     3,
                     Protocol::none,
                     {}});
  s.undeclared.push_back({"all_reduce bf16 [300, 4096]", 4, 0});
  s.undeclared.push_back({"all_reduce bf16 [7, 4096]", 1, 1});
  const std::string text = to_string(s);
  EXPECT_NE(text.find("P2P calls 12 (zero copy 0); fallback: undeclared 5, over cutoff 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("attn_out.t1  all_reduce          one_shot        lamport   -"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("big          all_reduce          fallback        -         over_cutoff"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("         4 calls  all_reduce bf16 [300, 4096]\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("all_reduce bf16 [7, 4096]  (up to 1 of other keys)"), std::string::npos)
      << text;
}

TEST(StatsText, EmptyStatsIsOneLine) {
  const std::string text = to_string(Stats{});
  EXPECT_EQ(text.find('\n'), text.size() - 1) << text;
}

}  // namespace
}  // namespace peerplan
