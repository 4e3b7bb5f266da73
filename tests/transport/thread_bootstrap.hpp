// SPDX-License-Identifier: Apache-2.0
// A Bootstrap whose "ranks" are threads of one process: lets the unit tests
// run the host P2P transport's collective protocol (segments, flags,
// epochs, timeouts) without MPI. All ranks form one node.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "peerplan/errors.hpp"

namespace peerplan::transport::testing {

// State shared by the ranks of one group: a reusable all-to-all exchange.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), inputs_(size) {}
  int size() const { return size_; }

  std::vector<bootstrap::Blob> exchange(int rank, bootstrap::Blob mine,
                                        std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // Wait until everybody has picked up the previous round's results.
    if (!changed_.wait_until(lock, deadline, [&] { return !draining_; })) {
      throw Timeout("thread bootstrap: previous exchange never drained");
    }
    inputs_[rank] = std::move(mine);
    const unsigned long round = round_;
    if (++arrived_ == size_) {
      results_ = inputs_;
      arrived_ = 0;
      departed_ = 0;
      draining_ = true;
      ++round_;
      changed_.notify_all();
    } else if (!changed_.wait_until(lock, deadline, [&] { return round_ != round; })) {
      --arrived_;
      throw Timeout("thread bootstrap: rank " + std::to_string(rank) +
                    " waited in vain for the other threads");
    }
    std::vector<bootstrap::Blob> out = results_;
    if (++departed_ == size_) {
      draining_ = false;
      changed_.notify_all();
    }
    return out;
  }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bootstrap::Blob> inputs_, results_;
  int arrived_ = 0, departed_ = 0;
  bool draining_ = false;
  unsigned long round_ = 0;
};

class ThreadBootstrap final : public bootstrap::Bootstrap {
 public:
  ThreadBootstrap(ThreadGroup& group, int rank,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60))
      : group_(group), rank_(rank), timeout_(timeout) {}

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return group_.size(); }
  int local_rank() const noexcept override { return rank_; }
  int local_size() const noexcept override { return group_.size(); }
  int node_id() const noexcept override { return 0; }
  int num_nodes() const noexcept override { return 1; }

  std::vector<bootstrap::Blob> allgather(std::span<const std::byte> mine) override {
    return group_.exchange(rank_, bootstrap::Blob(mine.begin(), mine.end()), timeout_);
  }
  std::vector<bootstrap::Blob> local_allgather(std::span<const std::byte> mine) override {
    return allgather(mine);
  }
  bootstrap::Blob broadcast(std::span<const std::byte> blob, int root) override {
    return allgather(blob)[root];
  }
  void barrier() override { allgather({}); }
  bool agree(bool ok) override {
    const std::byte flag{static_cast<unsigned char>(ok ? 1 : 0)};
    for (const auto& blob : allgather(std::span<const std::byte>(&flag, 1))) {
      if (blob.at(0) == std::byte{0}) return false;
    }
    return true;
  }

 private:
  ThreadGroup& group_;
  int rank_;
  std::chrono::milliseconds timeout_;
};

// Runs body(rank, bootstrap) on `size` threads and rethrows the first
// exception any of them raised.
inline void run_ranks(int size, const std::function<void(int, bootstrap::Bootstrap&)>& body) {
  ThreadGroup group(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ThreadBootstrap bootstrap(group, r);
      try {
        body(r, bootstrap);
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

}  // namespace peerplan::transport::testing
