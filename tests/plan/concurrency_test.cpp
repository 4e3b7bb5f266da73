// SPDX-License-Identifier: Apache-2.0
// A lookup running concurrently with a refresh sees the old declared set or
// the new one, never a mix (docs/design.md, The lookup contract, point 6), on
// both implementations.
//
// Sets A and B have disjoint keys. A writer alternates rebuild(A), rebuild(B),
// each time with fresh payloads stamped with a generation number. Readers,
// on other threads, repeatedly take ONE snapshot view and probe every key of
// A and of B through it. On a correct implementation each pass sees exactly
// one whole set: all 16 keys of A and none of B (or the reverse), every hit
// carrying the same generation, and size/declarations agreeing. An
// implementation that updated its table in place (clear, then insert one by
// one), published before it finished building, or attached payloads after
// publication would show a pass with keys of both sets, a partial set, or
// mixed generations. Readers also use the plain find(), whose single answer
// must be internally consistent (declaration, position and payload from one
// set). Between rounds, with no reader running, the writer reclaims the
// retired sets and checks that every replaced payload was destroyed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "oracles/plan_scan.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"
#include "plan/plan_index.hpp"

namespace peerplan::plan {
namespace {

constexpr int kKeysPerSet = 16;

class StampedPayload : public PlanPayload {
 public:
  StampedPayload(char set, std::uint64_t generation, std::atomic<std::uint64_t>& destroyed)
      : set_(set), generation_(generation), destroyed_(destroyed) {}
  ~StampedPayload() override { destroyed_.fetch_add(1, std::memory_order_relaxed); }
  char set() const noexcept { return set_; }
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  char set_;
  std::uint64_t generation_;
  std::atomic<std::uint64_t>& destroyed_;
};

// Set A declares rows 1..16, set B rows 17..32 (all-reduce, bf16, hidden 64).
std::vector<Declaration> make_set(char set) {
  std::vector<Declaration> declarations;
  const std::int64_t first_row = set == 'A' ? 1 : 1 + kKeysPerSet;
  for (int i = 0; i < kKeysPerSet; ++i) {
    declarations.push_back(Declaration::all_reduce(
        std::string(1, set) + std::to_string(i), DataType::bf16, TensorLayout{first_row + i, 64}));
  }
  return declarations;
}

std::vector<std::unique_ptr<PlanPayload>> make_payloads(char set, std::uint64_t generation,
                                                        std::atomic<std::uint64_t>& destroyed) {
  std::vector<std::unique_ptr<PlanPayload>> payloads;
  for (int i = 0; i < kKeysPerSet; ++i) {
    payloads.push_back(std::make_unique<StampedPayload>(set, generation, destroyed));
  }
  return payloads;
}

struct ReaderTally {
  std::uint64_t passes = 0;
  std::uint64_t saw_a = 0;
  std::uint64_t saw_b = 0;
  std::uint64_t mixed = 0;         // a pass that was not exactly one whole set
  std::uint64_t inconsistent = 0;  // an entry whose parts disagree
};

template <class Lookup>
void read_until(const Lookup& lookup, const std::vector<PlanKey>& keys_a,
                const std::vector<PlanKey>& keys_b, const std::atomic<bool>& stop,
                std::atomic<std::uint64_t>& passes_done, ReaderTally& tally) {
  while (!stop.load(std::memory_order_relaxed)) {
    const auto view = lookup.snapshot();
    int hits_a = 0, hits_b = 0;
    std::uint64_t generation = 0;
    bool generations_agree = true, first = true;
    auto probe = [&](const PlanKey& key, char expected_set, int& hits) {
      const IndexEntry* entry = view.find(key);
      if (entry == nullptr) return;
      ++hits;
      const auto* payload = static_cast<const StampedPayload*>(entry->payload);
      if (payload == nullptr || payload->set() != expected_set ||
          entry->declaration->name[0] != expected_set) {
        ++tally.inconsistent;
        return;
      }
      if (first) generation = payload->generation();
      generations_agree = generations_agree && payload->generation() == generation;
      first = false;
    };
    for (const PlanKey& key : keys_a) probe(key, 'A', hits_a);
    for (const PlanKey& key : keys_b) probe(key, 'B', hits_b);
    const bool whole_a = hits_a == kKeysPerSet && hits_b == 0;
    const bool whole_b = hits_b == kKeysPerSet && hits_a == 0;
    const bool sizes_agree = view.size() == static_cast<std::size_t>(kKeysPerSet) &&
                             view.declarations().size() == static_cast<std::size_t>(kKeysPerSet) &&
                             view.declarations()[0].name[0] == (whole_a ? 'A' : 'B');
    if (!(whole_a || whole_b) || !generations_agree || !sizes_agree) ++tally.mixed;
    tally.saw_a += whole_a;
    tally.saw_b += whole_b;

    // The plain (one acquire load per call) path: one answer, self-consistent.
    const IndexEntry* entry = lookup.find(keys_b[kKeysPerSet - 1]);
    if (entry != nullptr) {
      const auto* payload = static_cast<const StampedPayload*>(entry->payload);
      if (entry->position != kKeysPerSet - 1 || entry->declaration->name != "B15" ||
          payload == nullptr || payload->set() != 'B') {
        ++tally.inconsistent;
      }
    }
    ++tally.passes;
    passes_done.fetch_add(1, std::memory_order_release);
  }
}

template <class Lookup>
void run_refresh_under_readers() {
  constexpr int kReaders = 2;
  constexpr int kRounds = 4;
  constexpr int kRebuildsPerRound = 200;

  std::vector<PlanKey> keys_a, keys_b;
  for (const Declaration& d : make_set('A')) keys_a.push_back(make_key(d));
  for (const Declaration& d : make_set('B')) keys_b.push_back(make_key(d));

  std::atomic<std::uint64_t> destroyed{0};
  std::uint64_t generation = 0;
  Lookup lookup(make_set('A'), make_payloads('A', generation, destroyed));
  std::uint64_t replaced = 0;
  std::vector<ReaderTally> tallies(kReaders * kRounds);

  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> passes{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) {
      readers.emplace_back([&, r] {
        read_until(lookup, keys_a, keys_b, stop, passes, tallies[round * kReaders + r]);
      });
    }
    for (int i = 0; i < kRebuildsPerRound; ++i) {
      // Let the readers complete a pass between refreshes, so that every
      // snapshot is observed while the next one is being built.
      const std::uint64_t before = passes.load(std::memory_order_acquire);
      while (passes.load(std::memory_order_acquire) == before) std::this_thread::yield();
      ++generation;
      const char set = generation % 2 == 1 ? 'B' : 'A';
      lookup.rebuild(make_set(set), make_payloads(set, generation, destroyed));
      ++replaced;
    }
    stop.store(true);
    for (std::thread& reader : readers) reader.join();
    // No reader is running: reclaiming is allowed, and frees every replaced set.
    EXPECT_EQ(lookup.reclaim_retired(), static_cast<std::size_t>(kRebuildsPerRound));
    EXPECT_EQ(destroyed.load(), replaced * kKeysPerSet);
  }

  ReaderTally total;
  for (const ReaderTally& t : tallies) {
    total.passes += t.passes;
    total.saw_a += t.saw_a;
    total.saw_b += t.saw_b;
    total.mixed += t.mixed;
    total.inconsistent += t.inconsistent;
  }
  EXPECT_EQ(total.mixed, 0u);
  EXPECT_EQ(total.inconsistent, 0u);
  // The test only means something if both sets were actually observed.
  EXPECT_GT(total.saw_a, 0u);
  EXPECT_GT(total.saw_b, 0u);
  EXPECT_GE(total.passes, static_cast<std::uint64_t>(kRounds * kRebuildsPerRound));
}

TEST(ConcurrentRefresh, IndexReadersSeeWholeSetsOnly) { run_refresh_under_readers<PlanIndex>(); }

TEST(ConcurrentRefresh, ScanReadersSeeWholeSetsOnly) { run_refresh_under_readers<PlanScan>(); }

}  // namespace
}  // namespace peerplan::plan
