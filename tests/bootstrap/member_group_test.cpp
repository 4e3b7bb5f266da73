// SPDX-License-Identifier: Apache-2.0
// make_member_group with threads standing in for ranks: a parent that poses
// its ranks on several nodes (the thread bootstrap puts them all on one),
// groups of the hierarchical all-reduce's shape (same local rank, one per
// node) and of others, the order of every exchange, a bad broadcast root
// failing on its own rank only, and the parent's timeout coming through.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../transport/thread_bootstrap.hpp"
#include "bootstrap/member_group.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::bootstrap {
namespace {

using transport::testing::ThreadBootstrap;
using transport::testing::ThreadGroup;

// The thread bootstrap, with each rank on the node the test chooses
// (node_of_rank[r], numbered by lowest rank as Bootstrap requires). Counts
// its exchanges so a test can see which parent calls a group makes.
class PosedNodes final : public Bootstrap {
 public:
  PosedNodes(ThreadGroup& group, int rank, std::vector<int> node_of_rank,
             std::chrono::milliseconds timeout)
      : threads_(group, rank, timeout), node_of_rank_(std::move(node_of_rank)) {
    for (int r = 0; r < static_cast<int>(node_of_rank_.size()); ++r) {
      if (node_of_rank_[r] != node_id()) continue;
      if (r == rank) local_rank_ = static_cast<int>(local_members_.size());
      local_members_.push_back(r);
    }
  }

  int rank() const noexcept override { return threads_.rank(); }
  int size() const noexcept override { return threads_.size(); }
  int local_rank() const noexcept override { return local_rank_; }
  int local_size() const noexcept override { return static_cast<int>(local_members_.size()); }
  int node_id() const noexcept override { return node_of_rank_[threads_.rank()]; }
  int num_nodes() const noexcept override { return *std::ranges::max_element(node_of_rank_) + 1; }

  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    ++allgathers;
    return threads_.allgather(mine);
  }
  std::vector<Blob> local_allgather(std::span<const std::byte> mine) override {
    ++local_allgathers;
    std::vector<Blob> all = threads_.allgather(mine);
    std::vector<Blob> local;
    for (int r : local_members_) local.push_back(all[r]);
    return local;
  }
  Blob broadcast(std::span<const std::byte> blob, int root) override {
    return threads_.broadcast(blob, root);
  }
  void barrier() override { threads_.barrier(); }
  bool agree(bool ok) override { return threads_.agree(ok); }

  int allgathers = 0;
  int local_allgathers = 0;

 private:
  ThreadBootstrap threads_;
  std::vector<int> node_of_rank_;
  std::vector<int> local_members_;
  int local_rank_ = 0;
};

// Runs body(rank, parent) on one thread per entry of node_of_rank and
// rethrows the first exception any of them raised.
void run_on_nodes(const std::vector<int>& node_of_rank,
                  const std::function<void(int, PosedNodes&)>& body,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const int size = static_cast<int>(node_of_rank.size());
  ThreadGroup group(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      PosedNodes parent(group, r, node_of_rank, timeout);
      try {
        body(r, parent);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

Blob text_blob(const std::string& text) {
  Blob blob(text.size());
  std::transform(text.begin(), text.end(), blob.begin(),
                 [](char c) { return static_cast<std::byte>(c); });
  return blob;
}

std::string text_of(const Blob& blob) {
  return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
}

// Each rank's contribution names its parent rank, so results read as lists.
Blob rank_blob(int parent_rank) { return text_blob("p" + std::to_string(parent_rank)); }

std::vector<std::string> texts_of(const std::vector<Blob>& blobs) {
  std::vector<std::string> texts;
  for (const Blob& blob : blobs) texts.push_back(text_of(blob));
  return texts;
}

std::vector<std::string> names(std::initializer_list<int> parent_ranks) {
  std::vector<std::string> texts;
  for (int r : parent_ranks) texts.push_back("p" + std::to_string(r));
  return texts;
}

// The hierarchical all-reduce's group: the ranks of one local rank, one on
// each node, ordered by node. Its shape follows from the parent's alone.
void expect_one_per_node(const std::vector<int>& node_of_rank) {
  run_on_nodes(node_of_rank, [&](int r, PosedNodes& parent) {
    auto group = make_member_group(parent, parent.local_rank(), parent.node_id());
    EXPECT_EQ(group->rank(), parent.node_id()) << "parent rank " << r;
    EXPECT_EQ(group->size(), parent.num_nodes());
    EXPECT_EQ(group->node_id(), parent.node_id());
    EXPECT_EQ(group->num_nodes(), parent.num_nodes());
    EXPECT_EQ(group->local_rank(), 0);
    EXPECT_EQ(group->local_size(), 1);

    // allgather: the members by node, each the rank of this local rank there.
    std::vector<std::string> expected;
    for (int node = 0; node < parent.num_nodes(); ++node) {
      int seen = 0;
      for (int p = 0; p < static_cast<int>(node_of_rank.size()); ++p) {
        if (node_of_rank[p] == node && seen++ == parent.local_rank()) {
          expected.push_back("p" + std::to_string(p));
        }
      }
    }
    EXPECT_EQ(texts_of(group->allgather(rank_blob(r))), expected) << "parent rank " << r;

    for (int root = 0; root < group->size(); ++root) {
      EXPECT_EQ(text_of(group->broadcast(rank_blob(r), root)), expected[root])
          << "parent rank " << r << ", root " << root;
    }
    // Alone on its node: the local exchange holds its own blob only.
    EXPECT_EQ(texts_of(group->local_allgather(rank_blob(r))), names({r}));
  });
}

TEST(MemberGroup, OnePerNodeTwoByTwoGrouped) { expect_one_per_node({0, 0, 1, 1}); }
TEST(MemberGroup, OnePerNodeTwoByTwoInterleaved) { expect_one_per_node({0, 1, 0, 1}); }
TEST(MemberGroup, OnePerNodeThreeNodesOfTwo) { expect_one_per_node({0, 0, 1, 1, 2, 2}); }
TEST(MemberGroup, OnePerNodeTwoNodesOfThree) { expect_one_per_node({0, 0, 0, 1, 1, 1}); }
TEST(MemberGroup, OnePerNodeThreeNodesInterleaved) { expect_one_per_node({0, 1, 2, 0, 1, 2}); }

// Spelled out for 2 nodes x 2, nodes interleaved ({0, 2} and {1, 3}):
// local rank 0 is parent ranks 0 and 1, local rank 1 is 2 and 3.
TEST(MemberGroup, TwoByTwoInterleavedSpelledOut) {
  run_on_nodes({0, 1, 0, 1}, [](int r, PosedNodes& parent) {
    auto group = make_member_group(parent, parent.local_rank(), parent.node_id());
    const int expected_rank[] = {0, 1, 0, 1};
    EXPECT_EQ(group->rank(), expected_rank[r]);
    EXPECT_EQ(group->size(), 2);
    EXPECT_EQ(group->node_id(), expected_rank[r]);
    const auto expected = r < 2 ? names({0, 1}) : names({2, 3});
    EXPECT_EQ(texts_of(group->allgather(rank_blob(r))), expected);
  });
}

// Members sharing nodes, keys reversing the parent's order: 2 nodes x 3,
// evens {0, 2, 4} and odds {1, 3, 5}, key = -rank. The group's nodes are
// renumbered by their lowest group rank, local ranks follow group ranks.
TEST(MemberGroup, SharedNodesRenumberedByGroupRank) {
  struct Expected {
    int rank, node_id, local_rank, local_size;
    std::vector<std::string> local;  // local_allgather, by group local rank
  };
  // Evens by key: 4 (node 1), 2 (node 0), 0 (node 0): group node 0 = parent node 1.
  // Odds by key: 5 (node 1), 3 (node 1), 1 (node 0): likewise.
  const std::vector<Expected> expected = {
      {2, 1, 1, 2, names({2, 0})},  // parent rank 0
      {2, 1, 0, 1, names({1})},     // 1
      {1, 1, 0, 2, names({2, 0})},  // 2
      {1, 0, 1, 2, names({5, 3})},  // 3
      {0, 0, 0, 1, names({4})},     // 4
      {0, 0, 0, 2, names({5, 3})},  // 5
  };
  run_on_nodes({0, 0, 0, 1, 1, 1}, [&](int r, PosedNodes& parent) {
    auto group = make_member_group(parent, r % 2, -r);
    const Expected& e = expected[r];
    EXPECT_EQ(group->rank(), e.rank) << "parent rank " << r;
    EXPECT_EQ(group->size(), 3);
    EXPECT_EQ(group->node_id(), e.node_id) << "parent rank " << r;
    EXPECT_EQ(group->num_nodes(), 2);
    EXPECT_EQ(group->local_rank(), e.local_rank) << "parent rank " << r;
    EXPECT_EQ(group->local_size(), e.local_size) << "parent rank " << r;
    EXPECT_EQ(texts_of(group->allgather(rank_blob(r))),
              r % 2 == 0 ? names({4, 2, 0}) : names({5, 3, 1}));
    EXPECT_EQ(texts_of(group->local_allgather(rank_blob(r))), e.local) << "parent rank " << r;
  });
}

// local_allgather must be a parent allgather on every rank: a parent
// local_allgather would be a different call on ranks of different nodes.
TEST(MemberGroup, EveryExchangeIsOneParentAllgather) {
  run_on_nodes({0, 0, 1, 1}, [](int r, PosedNodes& parent) {
    auto group = make_member_group(parent, parent.local_rank(), parent.node_id());
    EXPECT_EQ(parent.allgathers, 1);
    group->local_allgather(rank_blob(r));
    group->allgather(rank_blob(r));
    group->broadcast(rank_blob(r), 0);
    EXPECT_EQ(parent.allgathers, 4);
    EXPECT_EQ(parent.local_allgathers, 0);
  });
}

TEST(MemberGroup, GroupsOfDifferentSizes) {
  // Parent ranks 0, 1 in one group, 2, 3, 4 in the other; one node.
  run_on_nodes({0, 0, 0, 0, 0}, [](int r, PosedNodes& parent) {
    const bool small = r < 2;
    auto group = make_member_group(parent, small ? 7 : 3, r);
    EXPECT_EQ(group->size(), small ? 2 : 3);
    EXPECT_EQ(group->rank(), small ? r : r - 2);
    EXPECT_EQ(group->local_size(), group->size());
    EXPECT_EQ(group->local_rank(), group->rank());
    EXPECT_EQ(group->num_nodes(), 1);
    EXPECT_EQ(texts_of(group->allgather(rank_blob(r))), small ? names({0, 1}) : names({2, 3, 4}));
    EXPECT_EQ(texts_of(group->local_allgather(rank_blob(r))),
              small ? names({0, 1}) : names({2, 3, 4}));

    // Root 2 exists in the large group only: the small group's ranks throw,
    // the large group's get their root's blob, and nobody is left waiting.
    if (small) {
      EXPECT_THROW(group->broadcast(rank_blob(r), 2), InvalidArgument);
    } else {
      EXPECT_EQ(text_of(group->broadcast(rank_blob(r), 2)), "p4");
    }
    // Still in step afterwards.
    EXPECT_EQ(group->allgather(rank_blob(r)).size(), static_cast<std::size_t>(group->size()));
  });
}

TEST(MemberGroup, KeyTiesKeepParentOrder) {
  // Keys 1, 0, 1, 0: the zeros first (parent ranks 1, 3), then the ones (0, 2).
  run_on_nodes({0, 0, 0, 0}, [](int r, PosedNodes& parent) {
    const int key[] = {1, 0, 1, 0};
    auto group = make_member_group(parent, 0, key[r]);
    const int expected_rank[] = {2, 0, 3, 1};
    EXPECT_EQ(group->rank(), expected_rank[r]);
    EXPECT_EQ(group->size(), 4);
    EXPECT_EQ(texts_of(group->allgather(rank_blob(r))), names({1, 3, 0, 2}));
  });
}

TEST(MemberGroup, BadRootThrowsOnItsRankOnly) {
  run_on_nodes({0, 0, 1, 1}, [](int r, PosedNodes& parent) {
    auto group = make_member_group(parent, parent.local_rank(), parent.node_id());
    // Groups {0, 2} and {1, 3}; parent rank 1 names a root its group lacks.
    if (r == 1) {
      try {
        group->broadcast(rank_blob(r), 5);
        ADD_FAILURE() << "broadcast from root 5 of 2 did not throw";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("root 5"), std::string::npos) << e.what();
      }
    } else {
      const Blob got = group->broadcast(rank_blob(r), 0);
      // Group {0, 2}: root 0 is parent rank 0. Group {1, 3}: its root is
      // the rank that failed, which sent nothing.
      EXPECT_EQ(text_of(got), r == 3 ? "" : "p0") << "parent rank " << r;
    }
    // Every rank made the one parent call, so the groups are still in step.
    EXPECT_EQ(texts_of(group->allgather(rank_blob(r))), r % 2 == 0 ? names({0, 2}) : names({1, 3}));
  });
}

TEST(MemberGroup, AgreeIsTheParentsVerdict) {
  run_on_nodes({0, 0, 1, 1}, [](int r, PosedNodes& parent) {
    auto group = make_member_group(parent, parent.local_rank(), parent.node_id());
    EXPECT_TRUE(group->agree(true));
    // Parent rank 3 (group {1, 3}) says no: group {0, 2} hears it too.
    EXPECT_FALSE(group->agree(r != 3)) << "parent rank " << r;
    group->barrier();
    EXPECT_TRUE(group->agree(true));
  });
}

TEST(MemberGroup, ParentTimeoutPropagatesFromCreation) {
  std::atomic<int> timeouts = 0;
  run_on_nodes(
      {0, 0, 1},
      [&](int r, PosedNodes& parent) {
        if (r == 2) return;  // never creates its group
        try {
          make_member_group(parent, 0, r);
          ADD_FAILURE() << "parent rank " << r << " created a group without rank 2";
        } catch (const Timeout& e) {
          EXPECT_NE(std::string(e.what()).find("waited in vain"), std::string::npos) << e.what();
          ++timeouts;
        }
      },
      std::chrono::milliseconds(200));
  EXPECT_EQ(timeouts, 2);
}

TEST(MemberGroup, ParentTimeoutPropagatesFromAnExchange) {
  std::atomic<int> timeouts = 0;
  run_on_nodes(
      {0, 0, 1, 1},
      [&](int r, PosedNodes& parent) {
        auto group = make_member_group(parent, parent.local_rank(), parent.node_id());
        if (r == 3) return;  // skips the exchange
        EXPECT_THROW(group->local_allgather(rank_blob(r)), Timeout) << "parent rank " << r;
        ++timeouts;
      },
      std::chrono::milliseconds(200));
  EXPECT_EQ(timeouts, 3);
}

}  // namespace
}  // namespace peerplan::bootstrap
