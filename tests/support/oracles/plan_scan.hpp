// SPDX-License-Identifier: Apache-2.0
// A linear scan over the declared keys with exactly the contract and API of
// PlanIndex (see src/plan/plan_index.hpp for the contract, threads and
// reclamation): the canonical key of every declaration is computed once at
// rebuild, and a lookup compares them in declaration order with PlanKey's
// operator==, so the first match is the first declared. It is the naive
// reference: the lookup benchmark's baseline and the oracle of the
// randomized index test. Not part of the library: built only for the tests
// and the benchmarks (peerplan_test_oracles, tests/support/CMakeLists.txt),
// over the plan layer's objects. Never use it for dispatch; its cost grows
// with the number of declarations.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"
#include "plan/plan_entry.hpp"
#include "plan/snapshot_publisher.hpp"

namespace peerplan::plan {

class PlanScan {
 public:
  struct Snapshot;  // defined in plan_scan.cpp

  class View {
   public:
    const IndexEntry* find(const PlanKey& key) const noexcept;
    bool contains(const PlanKey& key) const noexcept { return find(key) != nullptr; }
    const IndexEntry& at(const PlanKey& key) const;
    std::size_t size() const noexcept;  // distinct declared keys
    std::span<const Declaration> declarations() const noexcept;

   private:
    friend class PlanScan;
    explicit View(const Snapshot* snapshot) noexcept : snapshot_(snapshot) {}
    const Snapshot* snapshot_;
  };

  PlanScan();
  explicit PlanScan(std::vector<Declaration> declarations,
                    std::vector<std::unique_ptr<PlanPayload>> payloads = {});
  ~PlanScan();
  PlanScan(const PlanScan&) = delete;
  PlanScan& operator=(const PlanScan&) = delete;

  void rebuild(std::vector<Declaration> declarations,
               std::vector<std::unique_ptr<PlanPayload>> payloads = {});
  void clear();

  const IndexEntry* find(const PlanKey& key) const noexcept;
  bool contains(const PlanKey& key) const noexcept { return find(key) != nullptr; }
  const IndexEntry& at(const PlanKey& key) const;
  std::size_t size() const noexcept;
  std::span<const Declaration> declarations() const noexcept;
  View snapshot() const noexcept { return View(publisher_.current()); }

  std::size_t reclaim_retired() noexcept;
  std::size_t retired_count() const noexcept;

 private:
  static std::unique_ptr<Snapshot> build(std::vector<Declaration> declarations,
                                         std::vector<std::unique_ptr<PlanPayload>> payloads);
  SnapshotPublisher<Snapshot> publisher_;
};

}  // namespace peerplan::plan
