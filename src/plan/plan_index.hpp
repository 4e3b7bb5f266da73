// SPDX-License-Identifier: Apache-2.0
// The declared-plan index: one hash lookup on a call's canonical key finds
// the declared plan or reports a miss (docs/design.md, The lookup contract).
//
// Contract
// - Declared keys only. A miss inserts nothing (no negative cache), so
//   probing ever new shapes cannot grow memory.
// - When several declarations share one key, the first declared wins.
// - rebuild() replaces the whole declared set atomically: the new table is
//   built off to the side and published with one atomic pointer store
//   (release); find()/contains()/at() do one acquire load and probe that
//   snapshot, so a lookup running concurrently on another thread sees the old
//   set or the new one, never a mix. clear() publishes an empty set.
// - find() and contains() are noexcept and allocate nothing. at() throws
//   UndeclaredPlan naming the key (only the key: it is cheap).
//
// Threads and memory reclamation
// - Lookups may run on any number of threads concurrently with each other
//   and with rebuild()/clear().
// - An IndexEntry (and the Declaration and PlanPayload it points to) stays
//   valid after its set is replaced: replaced sets are kept on a retired list
//   until reclaim_retired() or the destructor frees them (and destroys their
//   payloads, releasing the replaced plans' resources). The caller of
//   reclaim_retired() must guarantee that no lookup is in flight and that no
//   pointer obtained from a replaced set is still used. The communicator
//   calls it in declare() and close(), which by its API contract are not
//   concurrent with any other call on the same communicator.
// - Validation is not the index's job: the caller validates declarations
//   first (validate_declarations); the index stores any set faithfully.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"
#include "plan/plan_entry.hpp"
#include "plan/snapshot_publisher.hpp"

namespace peerplan::plan {

class PlanIndex {
 public:
  struct Snapshot;  // immutable once published; defined in plan_index.cpp

  // All lookups on one snapshot: a caller that needs several consistent
  // answers (several keys, or a key plus the size) takes one View.
  class View {
   public:
    const IndexEntry* find(const PlanKey& key) const noexcept;
    bool contains(const PlanKey& key) const noexcept { return find(key) != nullptr; }
    const IndexEntry& at(const PlanKey& key) const;
    std::size_t size() const noexcept;  // distinct declared keys
    std::span<const Declaration> declarations() const noexcept;

   private:
    friend class PlanIndex;
    explicit View(const Snapshot* snapshot) noexcept : snapshot_(snapshot) {}
    const Snapshot* snapshot_;
  };

  // Health of the open-addressing table (for tests and benchmarks).
  struct ProbeStats {
    std::size_t slots = 0;      // table capacity (a power of two)
    std::size_t keys = 0;       // distinct keys stored
    std::size_t max_probe = 0;  // most slots inspected to find a stored key
    double mean_probe = 0.0;    // mean slots inspected to find a stored key
  };

  PlanIndex();
  explicit PlanIndex(std::vector<Declaration> declarations,
                     std::vector<std::unique_ptr<PlanPayload>> payloads = {});
  ~PlanIndex();
  PlanIndex(const PlanIndex&) = delete;
  PlanIndex& operator=(const PlanIndex&) = delete;

  // Replaces the declared set. `payloads` is empty or holds one (possibly
  // null) payload per declaration; the index owns them. Throws
  // InvalidArgument on a payload count mismatch; the current set then stays.
  void rebuild(std::vector<Declaration> declarations,
               std::vector<std::unique_ptr<PlanPayload>> payloads = {});
  void clear();

  const IndexEntry* find(const PlanKey& key) const noexcept;  // nullptr on a miss
  bool contains(const PlanKey& key) const noexcept { return find(key) != nullptr; }
  const IndexEntry& at(const PlanKey& key) const;  // throws UndeclaredPlan
  std::size_t size() const noexcept;
  std::span<const Declaration> declarations() const noexcept;
  View snapshot() const noexcept { return View(publisher_.current()); }

  // Frees replaced sets; see the reclamation contract above. Returns how
  // many sets were freed.
  std::size_t reclaim_retired() noexcept;
  std::size_t retired_count() const noexcept;

  ProbeStats probe_stats() const noexcept;

 private:
  static std::unique_ptr<Snapshot> build(std::vector<Declaration> declarations,
                                         std::vector<std::unique_ptr<PlanPayload>> payloads);
  SnapshotPublisher<Snapshot> publisher_;
};

}  // namespace peerplan::plan
