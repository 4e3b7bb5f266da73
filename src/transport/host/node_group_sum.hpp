// SPDX-License-Identifier: Apache-2.0
// The hierarchical route's step between nodes on the host backend: the
// ranks that hold the same local rank, one on each node, add up their fp32
// shards in node order.
//
// Every member gathers every member's shard (point-to-point messages with a
// per-call tag on a communicator of its own, every wait bounded by the
// timeout: bootstrap/timed_exchange.hpp) and sums them in node order 0, 1,
// ..., so every member computes the same bits. The gather moves
// (nodes - 1) shards to each member where a ring would move about twice one
// shard; the host backend is the reference and the test bed of the routes,
// and a gather keeps the order of the sum fixed without a second pass.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/owned_comm.hpp"
#include "bootstrap/timed_exchange.hpp"

namespace peerplan::transport::host {

class NodeGroupSum {
 public:
  // Local: `node_of_rank[r]` is rank r's node (numbered in the order of
  // each node's lowest rank), as the communicator's rank cards say; a
  // rank's local rank is its position among its node's ranks. `comm`: a
  // duplicate of the communicator `bootstrap` runs on (same ranks), which
  // this object owns. Every node must hold the same number of ranks (the
  // communicator checks that before building the route); throws
  // InternalError otherwise.
  NodeGroupSum(bootstrap::OwnedComm comm, bootstrap::Bootstrap& bootstrap,
               const std::vector<int>& node_of_rank, std::chrono::milliseconds timeout);
  ~NodeGroupSum();
  NodeGroupSum(const NodeGroupSum&) = delete;
  NodeGroupSum& operator=(const NodeGroupSum&) = delete;

  // Collective among this rank's group (one rank per node). `values`
  // becomes, element by element, the fp32 sum over the nodes in node order
  // of every member's `values`. Throws Timeout naming the members that did
  // not arrive (the group is out of step from then on: every later call
  // throws InvalidUsage), Mismatch when members pass different lengths.
  // `what` names the call in errors.
  void sum(std::span<float> values, const char* what);

  // What the call's verdict came to on this rank (agree).
  struct Verdict {
    // Whom this rank's "ok" reached: only where it reached every rank in
    // time is `gave_up` filled.
    bootstrap::detail::TimedExchange::Said said;
    std::vector<int> gave_up;  // the ranks that said they gave up; empty: the call succeeds
  };
  // The call's verdict, collective over every rank of the communicator
  // (not only the group), after the node's ranks all hold the call's
  // shards: this rank says "ok" in each message that leaves before
  // `deadline` (its call's own) and "gave up" in the later ones; when every
  // rank got its "ok", it waits at most `bound` for every rank's word.
  // Throws Timeout naming the ranks that did not answer in time. Any
  // outcome but success leaves the group out of step.
  // host_peer_transport.cpp says why no rank can succeed where another fails.
  Verdict agree(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds bound,
                const char* what);
  // This rank's "gave up" for the call's verdict, sent without waiting, so
  // that no rank waits for it in vain; once per call, and only if agree()
  // was not called for it. Leaves the group out of step.
  void give_up(const std::string& why);
  // For a route without the verdict round (the CUDA transport's step
  // between nodes): the route failed elsewhere, so members may have sent
  // this rank messages it will never read. Marks the group out of step only.
  void abandon(const std::string& why) {
    if (out_of_step_.empty()) out_of_step_ = why;
  }

  int num_nodes() const noexcept { return static_cast<int>(node_order_.size()); }
  // The group's ranks (in the communicator), in node order.
  const std::vector<int>& members_by_node() const noexcept { return members_by_node_; }

 private:
  void refuse_if_out_of_step(const char* what) const;
  // The exchange's allgather; a failure leaves the group out of step.
  std::vector<bootstrap::Blob> allgather(std::span<const std::byte> mine, const char* what);

  bootstrap::OwnedComm comm_;
  std::unique_ptr<bootstrap::detail::TimedExchange> exchange_;  // the group's shards
  std::unique_ptr<bootstrap::detail::TimedExchange> verdicts_;  // every rank's verdict
  std::vector<int> node_order_;  // node k's member is at position node_order_[k] of the exchange
  std::vector<int> members_by_node_;
  std::string out_of_step_;     // why, once an exchange failed
  bool verdict_given_ = false;  // this rank's verdict for the current (failed) call went out
};

}  // namespace peerplan::transport::host
