// SPDX-License-Identifier: Apache-2.0
#include "oracles/plan_scan.hpp"

#include <utility>

#include "plan/declared_set.hpp"

namespace peerplan::plan {

struct PlanScan::Snapshot {
  DeclaredSet set;
  std::vector<PlanKey> keys;        // keys[i] = make_key(declarations[i])
  std::vector<IndexEntry> entries;  // entries[i] describes declarations[i]
  std::size_t distinct_keys = 0;
};

namespace {

inline const IndexEntry* scan(const PlanScan::Snapshot& snapshot, const PlanKey& key) noexcept {
  const std::size_t count = snapshot.keys.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (snapshot.keys[i] == key) return &snapshot.entries[i];
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<PlanScan::Snapshot> PlanScan::build(
    std::vector<Declaration> declarations, std::vector<std::unique_ptr<PlanPayload>> payloads) {
  auto snapshot = std::make_unique<Snapshot>();
  snapshot->set = DeclaredSet::take(std::move(declarations), std::move(payloads));
  const std::size_t count = snapshot->set.declarations.size();
  snapshot->keys.reserve(count);
  snapshot->entries.reserve(count);
  for (std::size_t position = 0; position < count; ++position) {
    const PlanKey key = make_key(snapshot->set.declarations[position]);
    // Quadratic on purpose: the oracle shares no hashing with the index.
    bool first_of_its_key = true;
    for (const PlanKey& earlier : snapshot->keys) {
      if (earlier == key) {
        first_of_its_key = false;
        break;
      }
    }
    if (first_of_its_key) ++snapshot->distinct_keys;
    snapshot->keys.push_back(key);
    snapshot->entries.push_back(snapshot->set.entry(position));
  }
  return snapshot;
}

PlanScan::PlanScan() : PlanScan(std::vector<Declaration>{}) {}

PlanScan::PlanScan(std::vector<Declaration> declarations,
                   std::vector<std::unique_ptr<PlanPayload>> payloads)
    : publisher_(build(std::move(declarations), std::move(payloads))) {}

PlanScan::~PlanScan() = default;

void PlanScan::rebuild(std::vector<Declaration> declarations,
                       std::vector<std::unique_ptr<PlanPayload>> payloads) {
  publisher_.publish(build(std::move(declarations), std::move(payloads)));
}

void PlanScan::clear() { rebuild({}); }

std::size_t PlanScan::reclaim_retired() noexcept { return publisher_.reclaim_retired(); }

std::size_t PlanScan::retired_count() const noexcept { return publisher_.retired_count(); }

const IndexEntry* PlanScan::find(const PlanKey& key) const noexcept {
  return scan(*publisher_.current(), key);
}

const IndexEntry& PlanScan::at(const PlanKey& key) const { return snapshot().at(key); }

std::size_t PlanScan::size() const noexcept { return snapshot().size(); }

std::span<const Declaration> PlanScan::declarations() const noexcept {
  return snapshot().declarations();
}

const IndexEntry* PlanScan::View::find(const PlanKey& key) const noexcept {
  return scan(*snapshot_, key);
}

const IndexEntry& PlanScan::View::at(const PlanKey& key) const {
  const IndexEntry* entry = scan(*snapshot_, key);
  if (entry == nullptr) throw_undeclared_plan(key);
  return *entry;
}

std::size_t PlanScan::View::size() const noexcept { return snapshot_->distinct_keys; }

std::span<const Declaration> PlanScan::View::declarations() const noexcept {
  return snapshot_->set.declarations;
}

}  // namespace peerplan::plan
