// SPDX-License-Identifier: Apache-2.0
// Open-addressing hash table (linear probing, load factor <= 1/2) over the
// canonical keys of one declared set, built once per declare and then only
// read. The slot array holds (full hash, node pointer) pairs, 16 bytes each,
// so a miss usually touches one cache line of slots and no key at all; a
// full key comparison happens only when the 64-bit hashes agree.
#include "plan/plan_index.hpp"

#include <algorithm>
#include <bit>
#include <utility>

#include "plan/declared_set.hpp"
#include "plan/key_hash.hpp"

namespace peerplan::plan {
namespace {

struct Node {
  PlanKey key;
  IndexEntry entry;
};

struct Slot {
  std::uint64_t hash = 0;
  const Node* node = nullptr;  // null = empty
};

constexpr std::size_t kMinSlots = 16;

}  // namespace

struct PlanIndex::Snapshot {
  DeclaredSet set;
  std::vector<Node> nodes;  // one per distinct key, in order of first declaration
  std::vector<Slot> slots;  // size is a power of two, at least twice nodes.size()
  std::uint64_t mask = 0;   // slots.size() - 1
};

namespace {

// The whole lookup. Terminates because at least half the slots are empty.
inline const IndexEntry* probe(const PlanIndex::Snapshot& snapshot, const PlanKey& key) noexcept {
  const std::uint64_t hash = hash_key(key);
  const Slot* slots = snapshot.slots.data();
  const std::uint64_t mask = snapshot.mask;
  for (std::uint64_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots[i];
    if (slot.node == nullptr) return nullptr;
    if (slot.hash == hash && keys_equal(slot.node->key, key)) return &slot.node->entry;
  }
}

}  // namespace

std::unique_ptr<PlanIndex::Snapshot> PlanIndex::build(
    std::vector<Declaration> declarations, std::vector<std::unique_ptr<PlanPayload>> payloads) {
  auto snapshot = std::make_unique<Snapshot>();
  snapshot->set = DeclaredSet::take(std::move(declarations), std::move(payloads));
  const std::size_t count = snapshot->set.declarations.size();
  const std::size_t capacity = std::bit_ceil(std::max(kMinSlots, 2 * count));
  snapshot->slots.assign(capacity, Slot{});
  snapshot->mask = capacity - 1;
  snapshot->nodes.reserve(count);  // node addresses must not move once slotted

  for (std::size_t position = 0; position < count; ++position) {
    const PlanKey key = make_key(snapshot->set.declarations[position]);
    const std::uint64_t hash = hash_key(key);
    for (std::uint64_t i = hash & snapshot->mask;; i = (i + 1) & snapshot->mask) {
      Slot& slot = snapshot->slots[i];
      if (slot.node == nullptr) {
        snapshot->nodes.push_back(Node{key, snapshot->set.entry(position)});
        slot = Slot{hash, &snapshot->nodes.back()};
        break;
      }
      if (slot.hash == hash && keys_equal(slot.node->key, key)) break;  // first declared wins
    }
  }
  return snapshot;
}

PlanIndex::PlanIndex() : PlanIndex(std::vector<Declaration>{}) {}

PlanIndex::PlanIndex(std::vector<Declaration> declarations,
                     std::vector<std::unique_ptr<PlanPayload>> payloads)
    : publisher_(build(std::move(declarations), std::move(payloads))) {}

PlanIndex::~PlanIndex() = default;

void PlanIndex::rebuild(std::vector<Declaration> declarations,
                        std::vector<std::unique_ptr<PlanPayload>> payloads) {
  publisher_.publish(build(std::move(declarations), std::move(payloads)));
}

void PlanIndex::clear() { rebuild({}); }

std::size_t PlanIndex::reclaim_retired() noexcept { return publisher_.reclaim_retired(); }

std::size_t PlanIndex::retired_count() const noexcept { return publisher_.retired_count(); }

const IndexEntry* PlanIndex::find(const PlanKey& key) const noexcept {
  return probe(*publisher_.current(), key);
}

const IndexEntry& PlanIndex::at(const PlanKey& key) const { return snapshot().at(key); }

std::size_t PlanIndex::size() const noexcept { return snapshot().size(); }

std::span<const Declaration> PlanIndex::declarations() const noexcept {
  return snapshot().declarations();
}

PlanIndex::ProbeStats PlanIndex::probe_stats() const noexcept {
  const Snapshot& snapshot = *publisher_.current();
  ProbeStats stats;
  stats.slots = snapshot.slots.size();
  stats.keys = snapshot.nodes.size();
  std::size_t total = 0;
  for (const Node& node : snapshot.nodes) {
    const std::uint64_t home = hash_key(node.key) & snapshot.mask;
    std::size_t length = 1;
    for (std::uint64_t i = home; snapshot.slots[i].node != &node; i = (i + 1) & snapshot.mask) {
      ++length;
    }
    total += length;
    stats.max_probe = std::max(stats.max_probe, length);
  }
  if (stats.keys > 0)
    stats.mean_probe = static_cast<double>(total) / static_cast<double>(stats.keys);
  return stats;
}

const IndexEntry* PlanIndex::View::find(const PlanKey& key) const noexcept {
  return probe(*snapshot_, key);
}

const IndexEntry& PlanIndex::View::at(const PlanKey& key) const {
  const IndexEntry* entry = probe(*snapshot_, key);
  if (entry == nullptr) throw_undeclared_plan(key);
  return *entry;
}

std::size_t PlanIndex::View::size() const noexcept { return snapshot_->nodes.size(); }

std::span<const Declaration> PlanIndex::View::declarations() const noexcept {
  return snapshot_->set.declarations;
}

}  // namespace peerplan::plan
