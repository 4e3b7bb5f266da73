// SPDX-License-Identifier: Apache-2.0
#include "transport/host/node_group_sum.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::transport::host {
NodeGroupSum::NodeGroupSum(bootstrap::OwnedComm comm, bootstrap::Bootstrap& bootstrap,
                           const std::vector<int>& node_of_rank, std::chrono::milliseconds timeout)
    : comm_(std::move(comm)) {
  const int my_local_rank = bootstrap.local_rank();
  // The group: every rank with this rank's local rank. Ascending ranks is
  // the order the exchange wants; node order is the order of the sum.
  std::vector<int> members;
  std::vector<int> node_of_member;
  std::map<int, int> seen_on_node;
  for (int rank = 0; rank < static_cast<int>(node_of_rank.size()); ++rank) {
    const int node = node_of_rank[rank];
    if (seen_on_node[node]++ != my_local_rank) continue;
    members.push_back(rank);
    node_of_member.push_back(node);
  }
  const int nodes = bootstrap.num_nodes();
  node_order_.assign(static_cast<std::size_t>(nodes), -1);
  for (std::size_t position = 0; position < members.size(); ++position) {
    const int node = node_of_member[position];
    if (node < 0 || node >= nodes || node_order_[node] != -1) node_order_.clear();
    if (node_order_.empty()) break;
    node_order_[node] = static_cast<int>(position);
  }
  if (members.size() != static_cast<std::size_t>(nodes) || node_order_.empty() ||
      std::count(node_order_.begin(), node_order_.end(), -1) != 0) {
    throw InternalError("peerplan host backend: local rank " + std::to_string(my_local_rank) +
                        " is not held once by each of the " + std::to_string(nodes) +
                        " nodes; the hierarchical route needs the same number of ranks on every "
                        "node; please report this");
  }
  for (int position : node_order_) members_by_node_.push_back(members[position]);
  using bootstrap::detail::TimedExchange;
  exchange_ = std::make_unique<TimedExchange>(comm_.get(), timeout, std::move(members),
                                              TimedExchange::Lane{0, 2});
  std::vector<int> everyone(node_of_rank.size());
  for (std::size_t rank = 0; rank < everyone.size(); ++rank)
    everyone[rank] = static_cast<int>(rank);
  verdicts_ = std::make_unique<TimedExchange>(comm_.get(), timeout, std::move(everyone),
                                              TimedExchange::Lane{1, 2});
}

NodeGroupSum::~NodeGroupSum() {
  // Messages of an abandoned exchange may still be in flight on the
  // communicator; freeing it would hand them to whatever reuses its context
  // (bootstrap/mpi_bootstrap.cpp, release_communicator): keep it until exit.
  if (!out_of_step_.empty()) comm_.release();
}

void NodeGroupSum::refuse_if_out_of_step(const char* what) const {
  if (!out_of_step_.empty()) {
    throw InvalidUsage(std::string("peerplan host backend: ") + what +
                       ": the exchange between nodes is out of step since " + out_of_step_ +
                       "; close() the communicator and create a new one");
  }
}

std::vector<bootstrap::Blob> NodeGroupSum::allgather(std::span<const std::byte> mine,
                                                     const char* what) {
  try {
    return exchange_->allgather(mine, what);
  } catch (const Error& e) {
    out_of_step_ = std::string(what) + " failed between nodes (" + e.what() + ")";
    throw;
  }
}

namespace {
constexpr std::byte kOk{1};
constexpr std::byte kGaveUp{2};
}  // namespace

NodeGroupSum::Verdict NodeGroupSum::agree(std::chrono::steady_clock::time_point deadline,
                                          std::chrono::milliseconds bound, const char* what) {
  refuse_if_out_of_step(what);
  verdict_given_ = true;  // whatever happens next, this rank has given its word
  Verdict verdict;
  std::vector<bootstrap::Blob> words;
  try {
    words = verdicts_->allgather_by(std::span(&kOk, 1), std::span(&kGaveUp, 1), deadline,
                                    verdict.said, what, bound);
  } catch (const Error& e) {
    out_of_step_ = std::string(what) + " got no verdict from every rank (" + e.what() + ")";
    throw;
  }
  if (!verdict.said.all_in_time()) {
    out_of_step_ = std::string(what) + ": this rank said 'gave up' to some rank";
    return verdict;
  }
  for (std::size_t rank = 0; rank < words.size(); ++rank) {
    if (words[rank].size() != 1 || words[rank][0] != kOk)
      verdict.gave_up.push_back(static_cast<int>(rank));
  }
  if (!verdict.gave_up.empty()) out_of_step_ = std::string(what) + ": a rank gave up";
  verdict_given_ = !verdict.gave_up.empty();  // the next call's verdict is yet to come
  return verdict;
}

void NodeGroupSum::give_up(const std::string& why) {
  if (out_of_step_.empty()) out_of_step_ = why;
  if (verdict_given_) return;  // at most one verdict per call
  verdict_given_ = true;
  try {
    verdicts_->allgather(std::span(&kGaveUp, 1), "verdict (gave up)", std::chrono::milliseconds(0));
  } catch (const Error&) {
    // Expected: sent, not waited for; the messages stay alive until they are taken.
  }
}

void NodeGroupSum::sum(std::span<float> values, const char* what) {
  refuse_if_out_of_step(what);
  const std::vector<bootstrap::Blob> shards = allgather(std::as_bytes(values), what);
  for (std::size_t node = 0; node < node_order_.size(); ++node) {
    if (shards[node_order_[node]].size() != values.size_bytes()) {
      out_of_step_ = std::string(what) + " met a different call on another node";
      throw Mismatch(std::string("peerplan host backend: ") + what + ": rank " +
                     std::to_string(members_by_node_[node]) + " sent " +
                     std::to_string(shards[node_order_[node]].size()) +
                     " bytes for its shard where this rank has " +
                     std::to_string(values.size_bytes()) +
                     "; every rank must make the same calls in the same order");
    }
  }
  // values = node 0's + node 1's + ...: the same order, so the same bits,
  // on every member.
  std::memcpy(values.data(), shards[node_order_[0]].data(), values.size_bytes());
  std::vector<float> addend(values.size());
  for (std::size_t node = 1; node < node_order_.size(); ++node) {
    std::memcpy(addend.data(), shards[node_order_[node]].data(), values.size_bytes());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] += addend[i];
  }
}

}  // namespace peerplan::transport::host
