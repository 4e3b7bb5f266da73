// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/member_group.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "bootstrap/nodes.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::bootstrap {
namespace {

// What each parent rank tells the others when the groups are formed.
struct Membership {
  std::int32_t color = 0;
  std::int32_t key = 0;
  std::int32_t parent_node_id = 0;
};

Blob encode(const Membership& membership) {
  const std::array<std::int32_t, 3> fields{membership.color, membership.key,
                                           membership.parent_node_id};
  Blob blob(sizeof fields);
  std::memcpy(blob.data(), fields.data(), sizeof fields);
  return blob;
}

// Every rank decodes the same blobs, so a malformed one makes every rank
// throw alike (it means a rank was at another call: the ranks are out of step).
Membership decode(const Blob& blob, int parent_rank) {
  std::array<std::int32_t, 3> fields{};
  if (blob.size() != sizeof fields) {
    throw Mismatch("member group: parent rank " + std::to_string(parent_rank) + " sent " +
                   std::to_string(blob.size()) + " bytes instead of its color, key and node (" +
                   std::to_string(sizeof fields) +
                   " bytes); the ranks are not creating their groups at the same call");
  }
  std::memcpy(fields.data(), blob.data(), sizeof fields);
  return {fields[0], fields[1], fields[2]};
}

class MemberGroup final : public Bootstrap {
 public:
  MemberGroup(Bootstrap& parent, int color, int key) : parent_(parent) {
    const std::vector<Blob> all = parent_.allgather(encode({color, key, parent_.node_id()}));
    std::vector<Membership> memberships;
    memberships.reserve(all.size());
    for (int r = 0; r < static_cast<int>(all.size()); ++r) {
      memberships.push_back(decode(all[r], r));
    }

    for (int r = 0; r < static_cast<int>(memberships.size()); ++r) {
      if (memberships[r].color == color) parent_rank_of_.push_back(r);
    }
    // Stable sort of ascending parent ranks: equal keys keep parent rank order.
    std::ranges::stable_sort(parent_rank_of_, {}, [&](int r) { return memberships[r].key; });
    rank_ = static_cast<int>(std::ranges::find(parent_rank_of_, parent_.rank()) -
                             parent_rank_of_.begin());

    // The one placement rule of the bootstrap (nodes.hpp), applied to the
    // members' parent nodes in group rank order.
    std::vector<std::string> node_keys;
    node_keys.reserve(parent_rank_of_.size());
    for (int r : parent_rank_of_) {
      node_keys.push_back(std::to_string(memberships[r].parent_node_id));
    }
    placement_ = detail::place_on_nodes(node_keys, rank_);
    for (int g : placement_.members) local_parent_ranks_.push_back(parent_rank_of_[g]);
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return static_cast<int>(parent_rank_of_.size()); }
  int local_rank() const noexcept override { return placement_.local_rank; }
  int local_size() const noexcept override { return static_cast<int>(placement_.members.size()); }
  int node_id() const noexcept override { return placement_.node_id; }
  int num_nodes() const noexcept override { return placement_.num_nodes; }

  std::vector<Blob> allgather(std::span<const std::byte> mine) override {
    return pick(parent_.allgather(mine), parent_rank_of_);
  }

  // A parent allgather, not a parent local_allgather: every rank of the
  // parent must make the same parent call whatever its group.
  std::vector<Blob> local_allgather(std::span<const std::byte> mine) override {
    return pick(parent_.allgather(mine), local_parent_ranks_);
  }

  Blob broadcast(std::span<const std::byte> blob, int root) override {
    // A bad root is checked after the parent call, not before: throwing
    // first would leave the other ranks waiting in the parent for this one.
    const bool root_valid = root >= 0 && root < size();
    const bool sending = root_valid && root == rank_;
    std::vector<Blob> all = parent_.allgather(sending ? blob : std::span<const std::byte>{});
    if (!root_valid) {
      throw InvalidArgument("member group broadcast: root " + std::to_string(root) +
                            " is not a rank of the group (0.." + std::to_string(size() - 1) + ")");
    }
    return std::move(all[parent_rank_of_[root]]);
  }

  void barrier() override { parent_.barrier(); }

  // The parent's verdict, over every group (see member_group.hpp).
  bool agree(bool ok) override { return parent_.agree(ok); }

 private:
  // The blobs of the given parent ranks, in that order.
  static std::vector<Blob> pick(std::vector<Blob> parent_blobs,
                                const std::vector<int>& parent_ranks) {
    std::vector<Blob> picked;
    picked.reserve(parent_ranks.size());
    for (int r : parent_ranks) picked.push_back(std::move(parent_blobs[r]));
    return picked;
  }

  Bootstrap& parent_;
  std::vector<int> parent_rank_of_;  // index: group rank
  int rank_ = 0;
  detail::NodePlacement placement_;      // members: group ranks on this rank's node
  std::vector<int> local_parent_ranks_;  // index: group local rank
};

}  // namespace

std::unique_ptr<Bootstrap> make_member_group(Bootstrap& parent, int color, int key) {
  return std::make_unique<MemberGroup>(parent, color, key);
}

}  // namespace peerplan::bootstrap
