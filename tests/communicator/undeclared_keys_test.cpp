// SPDX-License-Identifier: Apache-2.0
// The undeclared-key table: counts, most calls first, a fixed size however
// many distinct keys arrive, the space-saving guarantees (a key's true
// count within [calls - overcount, calls]; a key called more often than
// total / capacity is always kept), reset.
#include "communicator/undeclared_keys.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace peerplan::communicator {
namespace {

PlanKey key_of(std::int64_t rows) {
  return make_all_reduce_key(DataType::bf16, TensorLayout{rows, 4096});
}

TEST(UndeclaredKeys, CountsAndOrdersByCalls) {
  UndeclaredKeys table(4);
  for (int i = 0; i < 3; ++i) table.record(key_of(7));
  table.record(key_of(5));
  for (int i = 0; i < 2; ++i) table.record(key_of(9));
  const auto top = table.snapshot();
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].key, key_of(7).to_string());
  EXPECT_EQ(top[0].calls, 3u);
  EXPECT_EQ(top[1].key, key_of(9).to_string());
  EXPECT_EQ(top[2].calls, 1u);
  for (const auto& k : top) EXPECT_EQ(k.overcount, 0u) << "nothing was evicted";
}

TEST(UndeclaredKeys, StaysAtItsSizeAndKeepsTheFrequentKeys) {
  constexpr std::size_t kCapacity = 8;
  UndeclaredKeys table(kCapacity);
  std::map<std::string, std::uint64_t> truth;
  std::uint64_t total = 0;
  // 1000 distinct one-off shapes interleaved with two frequent ones.
  for (int i = 0; i < 1000; ++i) {
    const PlanKey once = key_of(1000 + i);
    table.record(once);
    ++truth[once.to_string()];
    ++total;
    if (i % 4 == 0) {
      table.record(key_of(1));
      ++truth[key_of(1).to_string()];
      ++total;
    }
    if (i % 5 == 0) {
      table.record(key_of(2));
      ++truth[key_of(2).to_string()];
      ++total;
    }
  }
  const auto top = table.snapshot();
  EXPECT_EQ(top.size(), kCapacity);
  ASSERT_GE(top.size(), 2u);
  EXPECT_EQ(top[0].key, key_of(1).to_string());  // 250 calls, far above total / capacity
  bool second_kept = false;
  for (const auto& k : top) {
    second_kept = second_kept || k.key == key_of(2).to_string();  // 200 calls > total / 8
    EXPECT_GE(k.calls, truth[k.key]) << k.key;
    EXPECT_LE(k.calls - k.overcount, truth[k.key]) << k.key;
  }
  EXPECT_TRUE(second_kept);
  EXPECT_GT(truth[key_of(2).to_string()], total / kCapacity);
}

TEST(UndeclaredKeys, ResetForgetsAndZeroCapacityKeepsNothing) {
  UndeclaredKeys table(2);
  table.record(key_of(3));
  table.reset();
  EXPECT_TRUE(table.snapshot().empty());
  UndeclaredKeys none(0);
  none.record(key_of(3));
  EXPECT_TRUE(none.snapshot().empty());
}

}  // namespace
}  // namespace peerplan::communicator
