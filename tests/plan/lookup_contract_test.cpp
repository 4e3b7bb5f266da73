// SPDX-License-Identifier: Apache-2.0
// The lookup contract (docs/design.md), point by point, checked on both lookup
// implementations (the hash index and the linear scan must be
// interchangeable). Points 7 and 10 are the communicator's (close() and the
// dispatch fallback); the index parts they rely on (clear, a noexcept find
// that reports a miss) are tested here. Point 11's timing is measured by
// benchmarks/plan_lookup.cpp; the table-health part is tested at the end.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "oracles/plan_scan.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/errors.hpp"
#include "peerplan/plan_key.hpp"
#include "plan/plan_index.hpp"
#include "plan_test_support.hpp"

namespace peerplan::plan {
namespace {

using test::counting_payloads;
using test::CountingPayload;
using test::strided;

template <class Lookup>
class LookupContract : public ::testing::Test {
 protected:
  LookupContract() : weight_(4096, 0x3f80), same_values_weight_(4096, 0x3f80) {}
  std::vector<std::uint16_t> weight_;              // bf16 ones
  std::vector<std::uint16_t> same_values_weight_;  // equal values, other tensor
};

struct LookupNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, PlanIndex> ? "Index" : "Scan";
  }
};
using Implementations = ::testing::Types<PlanIndex, PlanScan>;
TYPED_TEST_SUITE(LookupContract, Implementations, LookupNames);

// Point 9: probes never throw (and find reports a miss as nullptr).
TYPED_TEST(LookupContract, ProbesAreNoexcept) {
  const TypeParam lookup;
  static_assert(noexcept(lookup.find(PlanKey{})));
  static_assert(noexcept(lookup.contains(PlanKey{})));
  static_assert(noexcept(lookup.snapshot().find(PlanKey{})));
  EXPECT_EQ(lookup.find(PlanKey{}), nullptr);
  EXPECT_EQ(lookup.size(), 0u);
}

// Points 1 and 4: the key is operation, dtype, shape, strides, weight
// identity and eps; changing any one of them misses.
TYPED_TEST(LookupContract, EveryKeyFieldMustMatch) {
  const TensorLayout layout{4, 4096};
  TypeParam lookup({Declaration::fused_add_rms_norm("norm", DataType::bf16, layout,
                                                    this->weight_.data(), 1e-6f)});
  const void* w = this->weight_.data();
  ASSERT_NE(lookup.find(make_fused_key(DataType::bf16, layout, w, 1e-6f)), nullptr);

  // Equal-valued but different weight tensor.
  ASSERT_EQ(this->weight_, this->same_values_weight_);
  EXPECT_EQ(
      lookup.find(make_fused_key(DataType::bf16, layout, this->same_values_weight_.data(), 1e-6f)),
      nullptr);
  // A different eps, even by one ulp.
  EXPECT_EQ(lookup.find(make_fused_key(DataType::bf16, layout, w, 1e-5f)), nullptr);
  EXPECT_EQ(lookup.find(make_fused_key(DataType::bf16, layout, w, std::nextafter(1e-6f, 1.0f))),
            nullptr);
  // dtype, shape (rows, hidden, rank) and stride.
  EXPECT_EQ(lookup.find(make_fused_key(DataType::f16, layout, w, 1e-6f)), nullptr);
  EXPECT_EQ(lookup.find(make_fused_key(DataType::bf16, TensorLayout{5, 4096}, w, 1e-6f)), nullptr);
  EXPECT_EQ(lookup.find(make_fused_key(DataType::bf16, TensorLayout{4, 2048}, w, 1e-6f)), nullptr);
  EXPECT_EQ(lookup.find(make_fused_key(DataType::bf16, TensorLayout{1, 4, 4096}, w, 1e-6f)),
            nullptr);
  EXPECT_EQ(lookup.find(make_fused_key(DataType::bf16, strided({4, 4096}, {8192, 1}), w, 1e-6f)),
            nullptr);
  // The operation.
  EXPECT_EQ(lookup.find(make_all_reduce_key(DataType::bf16, layout)), nullptr);
}

// Point 2: the stride of a size-1 dimension does not matter.
TYPED_TEST(LookupContract, TrimmedOneRowOutputWithPaddedRowStrideMatches) {
  TypeParam lookup({
      Declaration::all_reduce("one_row", DataType::bf16, TensorLayout{1, 4096}),
      Declaration::fused_add_rms_norm("one_row_norm", DataType::bf16, strided({1, 4096}, {8192, 1}),
                                      this->weight_.data(), 1e-6f),
      Declaration::all_reduce("middle", DataType::f32, strided({2, 1, 64}, {64, 64, 1})),
  });
  // Declared contiguous, called with the padded stride of a trimmed batch.
  const IndexEntry* e =
      lookup.find(make_all_reduce_key(DataType::bf16, strided({1, 4096}, {8192, 1})));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->position, 0u);
  // Declared padded, called contiguous.
  e = lookup.find(
      make_fused_key(DataType::bf16, TensorLayout{1, 4096}, this->weight_.data(), 1e-6f));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->position, 1u);
  // A size-1 dimension in the middle, with an odd stride.
  e = lookup.find(make_all_reduce_key(DataType::f32, strided({2, 1, 64}, {64, 13, 1})));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->position, 2u);
  // But the stride of a dimension larger than one still matters.
  EXPECT_EQ(lookup.find(make_all_reduce_key(DataType::f32, strided({2, 1, 64}, {128, 64, 1}))),
            nullptr);
}

// Point 3: declarations without strides mean contiguous row-major strides.
TYPED_TEST(LookupContract, DeclarationsWithoutStridesAreContiguous) {
  TypeParam lookup(
      {Declaration::all_reduce("plain", DataType::bf16, TensorLayout{8, 4096}),
       Declaration::all_reduce("explicit", DataType::f16, strided({8, 4096}, {4096, 1}))});
  EXPECT_NE(lookup.find(make_all_reduce_key(DataType::bf16, strided({8, 4096}, {4096, 1}))),
            nullptr);
  EXPECT_EQ(lookup.find(make_all_reduce_key(DataType::bf16, strided({8, 4096}, {8192, 1}))),
            nullptr);
  EXPECT_NE(lookup.find(make_all_reduce_key(DataType::f16, TensorLayout{8, 4096})), nullptr);
}

// Point 5: when several declarations share one key, the first declared wins.
TYPED_TEST(LookupContract, FirstDeclaredWins) {
  TypeParam lookup({
      Declaration::all_reduce("other", DataType::bf16, TensorLayout{2, 4096}),
      Declaration::all_reduce("first_padded", DataType::bf16, strided({1, 4096}, {8192, 1})),
      Declaration::all_reduce("second_exact", DataType::bf16, TensorLayout{1, 4096}),
      Declaration::all_reduce("third", DataType::bf16, strided({1, 4096}, {4096, 1})),
  });
  const IndexEntry* e = lookup.find(make_all_reduce_key(DataType::bf16, TensorLayout{1, 4096}));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->position, 1u);
  EXPECT_EQ(e->declaration->name, "first_padded");
  EXPECT_EQ(e->declaration, &lookup.declarations()[1]);
  EXPECT_EQ(lookup.size(), 2u);                 // distinct keys
  EXPECT_EQ(lookup.declarations().size(), 4u);  // every declaration kept, in order
  EXPECT_EQ(lookup.declarations()[3].name, "third");
}

TYPED_TEST(LookupContract, EntriesCarryTheirPayloads) {
  std::atomic<int> destroyed{0};
  TypeParam lookup({Declaration::all_reduce("a", DataType::bf16, TensorLayout{2, 64}),
                    Declaration::all_reduce("b", DataType::bf16, TensorLayout{3, 64})},
                   counting_payloads(2, destroyed, 10));
  const IndexEntry* e = lookup.find(make_all_reduce_key(DataType::bf16, TensorLayout{3, 64}));
  ASSERT_NE(e, nullptr);
  ASSERT_NE(e->payload, nullptr);
  EXPECT_EQ(dynamic_cast<CountingPayload&>(*e->payload).tag(), 11);
  // Without payloads, entries have none.
  TypeParam bare({Declaration::all_reduce("a", DataType::bf16, TensorLayout{2, 64})});
  ASSERT_NE(bare.find(make_all_reduce_key(DataType::bf16, TensorLayout{2, 64})), nullptr);
  EXPECT_EQ(bare.find(make_all_reduce_key(DataType::bf16, TensorLayout{2, 64}))->payload, nullptr);
}

TYPED_TEST(LookupContract, PayloadCountMustMatchOrBeZero) {
  std::atomic<int> destroyed{0};
  TypeParam lookup({Declaration::all_reduce("a", DataType::bf16, TensorLayout{2, 64})});
  EXPECT_THROW(lookup.rebuild({Declaration::all_reduce("b", DataType::bf16, TensorLayout{3, 64})},
                              counting_payloads(2, destroyed)),
               InvalidArgument);
  // The failed refresh left the previous set in force.
  EXPECT_NE(lookup.find(make_all_reduce_key(DataType::bf16, TensorLayout{2, 64})), nullptr);
  EXPECT_EQ(lookup.find(make_all_reduce_key(DataType::bf16, TensorLayout{3, 64})), nullptr);
}

// Point 6: a refresh replaces the whole set; keys no longer declared miss;
// replaced plans' resources are released (at reclamation, when no reader
// can hold them any more).
TYPED_TEST(LookupContract, RefreshReplacesTheWholeSetAndReleasesReplacedPlans) {
  std::atomic<int> destroyed{0};
  const PlanKey old_key = make_all_reduce_key(DataType::bf16, TensorLayout{2, 4096});
  const PlanKey kept_key = make_all_reduce_key(DataType::bf16, TensorLayout{4, 4096});
  const PlanKey new_key = make_all_reduce_key(DataType::bf16, TensorLayout{8, 4096});
  TypeParam lookup({Declaration::all_reduce("old", DataType::bf16, TensorLayout{2, 4096}),
                    Declaration::all_reduce("kept", DataType::bf16, TensorLayout{4, 4096})},
                   counting_payloads(2, destroyed, 0));
  const IndexEntry* held = lookup.find(old_key);
  ASSERT_NE(held, nullptr);

  lookup.rebuild({Declaration::all_reduce("kept", DataType::bf16, TensorLayout{4, 4096}),
                  Declaration::all_reduce("new", DataType::bf16, TensorLayout{8, 4096})},
                 counting_payloads(2, destroyed, 100));
  EXPECT_EQ(lookup.find(old_key), nullptr);
  ASSERT_NE(lookup.find(kept_key), nullptr);
  EXPECT_EQ(dynamic_cast<CountingPayload&>(*lookup.find(kept_key)->payload).tag(), 100);
  ASSERT_NE(lookup.find(new_key), nullptr);
  EXPECT_EQ(lookup.find(new_key)->position, 1u);
  EXPECT_EQ(lookup.size(), 2u);

  // Until reclamation, what a concurrent reader may hold stays valid.
  EXPECT_EQ(destroyed.load(), 0);
  EXPECT_EQ(held->declaration->name, "old");
  EXPECT_EQ(lookup.retired_count(), 1u);

  EXPECT_EQ(lookup.reclaim_retired(), 1u);
  EXPECT_EQ(destroyed.load(), 2);  // both replaced plans, none of the live ones
  EXPECT_EQ(lookup.retired_count(), 0u);
  EXPECT_EQ(lookup.reclaim_retired(), 0u);
  EXPECT_EQ(destroyed.load(), 2);
  EXPECT_NE(lookup.find(new_key), nullptr);
}

TYPED_TEST(LookupContract, DestructionReleasesLiveAndRetiredPlans) {
  std::atomic<int> destroyed{0};
  {
    TypeParam lookup({Declaration::all_reduce("a", DataType::bf16, TensorLayout{2, 64})},
                     counting_payloads(1, destroyed));
    lookup.rebuild({Declaration::all_reduce("b", DataType::bf16, TensorLayout{3, 64}),
                    Declaration::all_reduce("c", DataType::bf16, TensorLayout{4, 64})},
                   counting_payloads(2, destroyed));
    EXPECT_EQ(destroyed.load(), 0);
  }
  EXPECT_EQ(destroyed.load(), 3);
}

// A View answers from one snapshot: a refresh after it was taken does not
// change its answers (until reclamation).
TYPED_TEST(LookupContract, ViewKeepsAnsweringFromItsSnapshot) {
  TypeParam lookup({Declaration::all_reduce("a", DataType::bf16, TensorLayout{2, 64})});
  const auto view = lookup.snapshot();
  lookup.rebuild({Declaration::all_reduce("b", DataType::bf16, TensorLayout{3, 64})});
  EXPECT_NE(view.find(make_all_reduce_key(DataType::bf16, TensorLayout{2, 64})), nullptr);
  EXPECT_EQ(view.find(make_all_reduce_key(DataType::bf16, TensorLayout{3, 64})), nullptr);
  EXPECT_EQ(view.declarations()[0].name, "a");
  EXPECT_EQ(lookup.snapshot().declarations()[0].name, "b");
}

// Point 7 (the index part of close()): clear removes every plan, lookups
// miss, clearing again is harmless, and the cleared plans are released.
TYPED_TEST(LookupContract, ClearRemovesEveryPlanAndIsIdempotent) {
  std::atomic<int> destroyed{0};
  TypeParam lookup({Declaration::all_reduce("a", DataType::bf16, TensorLayout{2, 64}),
                    Declaration::all_reduce("b", DataType::bf16, TensorLayout{3, 64})},
                   counting_payloads(2, destroyed));
  lookup.clear();
  EXPECT_EQ(lookup.size(), 0u);
  EXPECT_TRUE(lookup.declarations().empty());
  EXPECT_FALSE(lookup.contains(make_all_reduce_key(DataType::bf16, TensorLayout{2, 64})));
  EXPECT_FALSE(lookup.contains(make_all_reduce_key(DataType::bf16, TensorLayout{3, 64})));
  lookup.clear();
  EXPECT_EQ(lookup.size(), 0u);
  lookup.reclaim_retired();
  EXPECT_EQ(destroyed.load(), 2);
  // Declaring again after a clear works.
  lookup.rebuild({Declaration::all_reduce("c", DataType::bf16, TensorLayout{2, 64})});
  EXPECT_TRUE(lookup.contains(make_all_reduce_key(DataType::bf16, TensorLayout{2, 64})));
}

// Points 8 and 9: a miss inserts nothing and a probe mutates nothing.
TYPED_TEST(LookupContract, ProbesMutateNothing) {
  const test::TransformerSet model(2, {1, 2, 4, 8}, 4096);
  TypeParam lookup(model.declarations);
  const std::size_t size = lookup.size();
  const Declaration* declarations = lookup.declarations().data();
  const std::size_t retired = lookup.retired_count();
  std::size_t hits = 0;
  for (std::int64_t rows = 1; rows <= 1000; ++rows) {
    hits += lookup.contains(make_all_reduce_key(DataType::bf16, TensorLayout{rows, 4096}));
    hits += lookup.find(make_fused_key(DataType::bf16, TensorLayout{rows, 4096}, model.weight_of(1),
                                       1e-6f)) != nullptr;
  }
  EXPECT_EQ(hits, 8u);  // rows 1, 2, 4, 8 for each of the two ops
  EXPECT_EQ(lookup.size(), size);
  EXPECT_EQ(lookup.declarations().data(), declarations);
  EXPECT_EQ(lookup.declarations().size(), model.declarations.size());
  EXPECT_EQ(lookup.retired_count(), retired);
}

// Point 9: the strict lookup throws UndeclaredPlan naming the key, and only
// the key (no dump of the declarations).
TYPED_TEST(LookupContract, StrictLookupOfAnUndeclaredKeyNamesOnlyTheKey) {
  const test::TransformerSet model(4, {1, 2, 4, 8}, 4096);
  TypeParam lookup(model.declarations);
  const PlanKey key =
      make_fused_key(DataType::bf16, TensorLayout{3, 4096}, model.weight_of(2), 1e-6f);
  try {
    (void)lookup.at(key);
    FAIL() << "at() returned for an undeclared key";
  } catch (const UndeclaredPlan& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.code(), ErrorCode::undeclared_plan);
    EXPECT_NE(message.find(key.to_string()), std::string::npos) << message;
    EXPECT_LT(message.size(), key.to_string().size() + 120) << message;
    for (const Declaration& d : model.declarations) {
      ASSERT_EQ(message.find(d.name), std::string::npos) << "message lists " << d.name;
    }
  }
  // On a hit, at() returns the entry find() returns.
  const PlanKey declared = make_key(model.declarations[5]);
  EXPECT_EQ(&lookup.at(declared), lookup.find(declared));
  EXPECT_EQ(&lookup.snapshot().at(declared), lookup.find(declared));
  EXPECT_THROW((void)lookup.snapshot().at(key), UndeclaredPlan);
}

// Point 11, the part a unit test can check: the hash table stays healthy
// (short probes) at 4096 transformer-like declarations, so a lookup's cost
// does not depend on the declared count. Timing is the benchmark's job.
TEST(PlanIndexTable, ProbesStayShortAt4096Declarations) {
  // 4096 distinct keys: fused add+RMSNorm of 512 layers (one weight each) at
  // 8 token counts. (The per-layer all-reduces of a transformer share their
  // keys across layers, so a TransformerSet has fewer distinct keys.) Fixed,
  // 8 KiB-aligned weight addresses keep the test deterministic and model what
  // an allocator hands out.
  std::vector<Declaration> model;
  for (std::uintptr_t layer = 0; layer < 512; ++layer) {
    const auto* weight = reinterpret_cast<const void*>(0x7f3a00000000ull + layer * 8192);
    for (std::int64_t tokens : {1, 2, 4, 8, 16, 32, 64, 128}) {
      model.push_back(Declaration::fused_add_rms_norm("norm" + std::to_string(model.size()),
                                                      DataType::bf16, TensorLayout{tokens, 4096},
                                                      weight, 1e-6f));
    }
  }
  ASSERT_EQ(model.size(), 4096u);
  const PlanIndex index(model);
  const auto stats = index.probe_stats();
  EXPECT_EQ(stats.keys, 4096u);
  EXPECT_GE(stats.slots, 2 * stats.keys);  // load factor <= 1/2
  // Linear probing at load 1/2 with a uniform hash: 1.5 slots on average;
  // the longest of 4096 probe sequences is ~18 typically and stays below ~45
  // (simulated with ideal random hashes). A hash that ignored some field or
  // mixed aligned addresses poorly would form clusters of hundreds.
  EXPECT_LT(stats.mean_probe, 1.75);
  EXPECT_LE(stats.max_probe, 64u);
  std::printf("probe stats: %zu keys in %zu slots, mean %.3f, max %zu\n", stats.keys, stats.slots,
              stats.mean_probe, stats.max_probe);
}

}  // namespace
}  // namespace peerplan::plan
