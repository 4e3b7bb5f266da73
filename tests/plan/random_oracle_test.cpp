// SPDX-License-Identifier: Apache-2.0
// Randomized differential test: the hash index against the linear scan (the
// oracle), over thousands of random declared sets and probes built to be
// near misses: one stride, one dimension, the eps, a different weight
// address, size-1 dimensions with odd strides, duplicate keys. For every
// probe both must agree on hit/miss and on WHICH declaration (position).
// The scan itself is cross-checked against a brute-force search over the
// declarations, so a bug shared by both would still be caught.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "oracles/plan_scan.hpp"
#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"
#include "plan/plan_index.hpp"

namespace peerplan::plan {
namespace {

// Small value pools make duplicate keys and near misses common.
class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  const void* weight() { return &weights_[static_cast<std::size_t>(pick(kWeights))]; }
  float eps() {
    constexpr float pool[] = {1e-6f, 1e-5f, 0.0f, -0.0f, 1e-6f};
    return pool[pick(5)];
  }
  DataType dtype() { return static_cast<DataType>(pick(3)); }

  TensorLayout layout() {
    const int rank = chance(0.9) ? 1 + pick(3) : 1 + pick(kMaxRank);
    std::vector<std::int64_t> shape(static_cast<std::size_t>(rank));
    constexpr std::int64_t dims[] = {1, 1, 2, 3, 8, 64};
    for (auto& d : shape) d = dims[pick(6)];
    if (chance(0.5)) return TensorLayout::contiguous(shape);
    // Explicit strides: row-major with occasional padding, and arbitrary
    // (odd, even negative) strides on size-1 dimensions, which must not matter.
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t running = 1;
    for (int i = rank - 1; i >= 0; --i) {
      if (shape[i] == 1 && chance(0.7)) {
        strides[i] = pick(9) - 2;
      } else {
        strides[i] = running;
      }
      running *= shape[i] + (chance(0.2) ? 1 : 0);
    }
    return TensorLayout::strided(shape, strides);
  }

  Declaration declaration(int serial) {
    const std::string name = std::string("d") + std::to_string(serial);
    if (chance(0.5)) return Declaration::all_reduce(name, dtype(), layout());
    return Declaration::fused_add_rms_norm(name, dtype(), layout(), weight(), eps());
  }

  // A key close to `base`, changed in exactly one respect (or not at all).
  PlanKey near(const PlanKey& base) {
    PlanKey key = base;
    switch (pick(9)) {
      case 0:
        break;  // exact
      case 1:   // one stride, of a dimension larger than one
        for (int i = 0; i < key.rank; ++i) {
          if (key.shape[i] > 1) {
            key.strides[i] += chance(0.5) ? 1 : -1;
            break;
          }
        }
        break;
      case 2:  // one dimension
        if (key.rank > 0) {
          const int i = pick(key.rank);
          key.shape[i] += 1;
          if (key.shape[i] == 2) key.strides[i] = 1;  // keep it canonical-looking
        }
        break;
      case 3:  // eps by one ulp, or -0.0 for +0.0 (which must still hit)
        key = rebuild_fused(key, std::nextafter(std::bit_cast<float>(key.eps_bits), 1.0f));
        break;
      case 4:  // another weight address
        key = rebuild_fused(key, std::bit_cast<float>(key.eps_bits), weight());
        break;
      case 5:  // the same call with odd strides on its size-1 dimensions
        key = reshuffled_size_one_strides(key);
        break;
      case 6:
        key.dtype = dtype();
        break;
      case 7:
        key.operation = chance(0.5) ? Operation::all_reduce : Operation::fused_add_rms_norm;
        break;
      case 8:
        key = random_key();
        break;
    }
    return key;
  }

 private:
  static constexpr int kWeights = 3;

  // Rebuilds the key through the public key builder, as a call would.
  PlanKey call_key(const PlanKey& key, const std::vector<std::int64_t>& strides, float eps,
                   const void* weight) const {
    std::vector<std::int64_t> shape(key.shape.begin(), key.shape.begin() + key.rank);
    const TensorLayout layout = TensorLayout::strided(shape, strides);
    if (key.operation == Operation::all_reduce) return make_all_reduce_key(key.dtype, layout);
    return make_fused_key(key.dtype, layout, weight, eps);
  }
  std::vector<std::int64_t> strides_of(const PlanKey& key) const {
    return {key.strides.begin(), key.strides.begin() + key.rank};
  }
  PlanKey rebuild_fused(const PlanKey& key, float eps, const void* weight = nullptr) const {
    if (key.operation == Operation::all_reduce) return key;
    return call_key(key, strides_of(key), eps,
                    weight != nullptr ? weight : reinterpret_cast<const void*>(key.weight));
  }
  PlanKey reshuffled_size_one_strides(const PlanKey& key) {
    std::vector<std::int64_t> strides = strides_of(key);
    for (int i = 0; i < key.rank; ++i) {
      if (key.shape[i] == 1) strides[i] = 2 * pick(50) + 1;
    }
    return call_key(key, strides, std::bit_cast<float>(key.eps_bits),
                    reinterpret_cast<const void*>(key.weight));
  }
  PlanKey random_key() {
    if (chance(0.5)) return make_all_reduce_key(dtype(), layout());
    return make_fused_key(dtype(), layout(), weight(), eps());
  }

  std::mt19937_64 rng_;
  char weights_[kWeights] = {};
};

// The first declaration whose key equals `key`, by brute force.
const Declaration* brute_force(std::span<const Declaration> declarations, const PlanKey& key,
                               std::size_t& position) {
  for (position = 0; position < declarations.size(); ++position) {
    if (make_key(declarations[position]) == key) return &declarations[position];
  }
  return nullptr;
}

TEST(RandomizedOracle, IndexAgreesWithScanOnHitMissAndPosition) {
  constexpr int kSets = 3000;
  constexpr int kProbesPerSet = 60;
  Generator gen(20240917);
  PlanIndex index;  // long-lived: also exercises repeated rebuild + reclaim
  PlanScan scan;
  std::uint64_t hits = 0, misses = 0, duplicate_hits = 0;

  for (int set = 0; set < kSets; ++set) {
    const int count = gen.pick(40);
    std::vector<Declaration> declarations;
    for (int i = 0; i < count; ++i) {
      // Re-declare an earlier key under a new name now and then.
      if (i > 0 && gen.chance(0.15)) {
        Declaration copy = declarations[static_cast<std::size_t>(gen.pick(i))];
        copy.name = std::string("dup") + std::to_string(i);
        declarations.push_back(copy);
      } else {
        declarations.push_back(gen.declaration(i));
      }
    }
    index.rebuild(declarations);
    scan.rebuild(declarations);
    index.reclaim_retired();
    scan.reclaim_retired();
    ASSERT_EQ(index.size(), scan.size()) << "set " << set;

    for (int p = 0; p < kProbesPerSet; ++p) {
      const PlanKey base = count > 0 && gen.chance(0.8)
                               ? make_key(declarations[static_cast<std::size_t>(gen.pick(count))])
                               : make_all_reduce_key(gen.dtype(), gen.layout());
      const PlanKey probe = gen.near(base);
      const IndexEntry* from_index = index.find(probe);
      const IndexEntry* from_scan = scan.find(probe);
      std::size_t position = 0;
      const Declaration* truth = brute_force(declarations, probe, position);

      ASSERT_EQ(from_index != nullptr, from_scan != nullptr)
          << "set " << set << " probe " << probe.to_string();
      ASSERT_EQ(from_scan != nullptr, truth != nullptr) << probe.to_string();
      ASSERT_EQ(index.contains(probe), from_index != nullptr);
      if (truth == nullptr) {
        ++misses;
        continue;
      }
      ++hits;
      ASSERT_EQ(from_index->position, from_scan->position) << probe.to_string();
      ASSERT_EQ(from_scan->position, position) << probe.to_string();
      ASSERT_EQ(from_index->declaration->name, truth->name);
      ASSERT_EQ(from_index->declaration, &index.declarations()[position]);
      for (std::size_t later = position + 1; later < declarations.size(); ++later) {
        if (make_key(declarations[later]) == probe) {
          ++duplicate_hits;  // a later declaration shares the key: first one won
          break;
        }
      }
    }
  }
  // The mix must actually exercise both outcomes and the first-wins rule.
  EXPECT_GT(hits, 20000u);
  EXPECT_GT(misses, 20000u);
  EXPECT_GT(duplicate_hits, 1000u);
  std::printf("randomized oracle: %llu hits (%llu on duplicated keys), %llu misses\n",
              static_cast<unsigned long long>(hits),
              static_cast<unsigned long long>(duplicate_hits),
              static_cast<unsigned long long>(misses));
}

}  // namespace
}  // namespace peerplan::plan
