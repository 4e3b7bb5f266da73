// SPDX-License-Identifier: Apache-2.0
// The counters as a communicator keeps them, counted from several threads:
// the same summary as DispatchCounters fed the same calls, sizes past the
// lock-free slots included.
#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <thread>
#include <vector>

#include "nccl_interposer/dispatch_rules.hpp"
#include "nccl_interposer/shared_counters.hpp"

namespace peerplan::nccl_interposer {
namespace {

TEST(SharedDispatchCounters, NothingCounted) {
  EXPECT_EQ(SharedDispatchCounters{}.summary(), DispatchCounters{}.summary());
}

TEST(SharedDispatchCounters, SizesPastTheSlotsAreCountedToo) {
  SharedDispatchCounters shared;
  DispatchCounters plain;
  // Largest first, so that the summary's order is not the slots'.
  for (std::size_t i = 0; i < 2 * SharedDispatchCounters::kSlots + 1; ++i) {
    const std::size_t bytes = 4096 * (100 - i);
    for (std::size_t calls = 0; calls <= i; ++calls) {
      shared.hit(bytes);
      plain.hit(bytes);
    }
    shared.fallback(bytes, FallbackCause::misaligned);
    plain.fallback(bytes, FallbackCause::misaligned);
  }
  // count_ is no cause: as DispatchCounters, counted as peerplan_error (failed).
  shared.fallback(4096 * 100, FallbackCause::count_);
  plain.fallback(4096 * 100, FallbackCause::count_);
  shared.fallback(7, FallbackCause::count_);
  plain.fallback(7, FallbackCause::count_);
  EXPECT_EQ(shared.summary(), plain.summary());
}

// The largest size is the mark of a free slot: counted all the same, and
// taking no slot that a later size needs.
TEST(SharedDispatchCounters, TheLargestSizeIsCountedWithoutTakingASlot) {
  SharedDispatchCounters shared;
  DispatchCounters plain;
  const std::size_t largest = std::numeric_limits<std::size_t>::max();
  for (std::size_t bytes : {largest, std::size_t{64}, largest, std::size_t{128}}) {
    shared.hit(bytes);
    plain.hit(bytes);
  }
  shared.fallback(largest, FallbackCause::undeclared_count);
  plain.fallback(largest, FallbackCause::undeclared_count);
  EXPECT_EQ(shared.summary(), plain.summary());
}

TEST(SharedDispatchCounters, CallsFromSeveralThreadsAreAllCounted) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 20000;
  constexpr std::size_t kSizes = SharedDispatchCounters::kSlots + 4;
  // Call `call` of thread t, counted into either kind of counters.
  auto count = [](auto& counters, int t, int call) {
    // Every thread meets the sizes in another order, racing for slots.
    const std::size_t bytes = 64 * ((static_cast<std::size_t>(call) + t * 3) % kSizes);
    if (call % 3 == 0) {
      counters.fallback(bytes, FallbackCause::undeclared_count);
    } else {
      counters.hit(bytes);
    }
  };
  SharedDispatchCounters shared;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&shared, &count, t] {
      for (int call = 0; call < kCalls; ++call) count(shared, t, call);
    });
  }
  for (std::thread& thread : threads) thread.join();
  DispatchCounters plain;
  for (int t = 0; t < kThreads; ++t) {
    for (int call = 0; call < kCalls; ++call) count(plain, t, call);
  }
  EXPECT_EQ(shared.summary(), plain.summary());
}

}  // namespace
}  // namespace peerplan::nccl_interposer
