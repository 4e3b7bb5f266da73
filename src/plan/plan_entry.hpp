// SPDX-License-Identifier: Apache-2.0
// What a lookup returns: the declaration a key stands for, its position in
// declaration order, and the prepared plan attached to it (if any).
#pragma once

#include <cstdint>

#include "peerplan/declaration.hpp"
#include "peerplan/plan_key.hpp"

namespace peerplan::plan {

// Base of whatever a layer above attaches to a declared plan (the
// communicator derives its prepared plans - route, slab, registrations -
// from it). The index owns payloads and destroys them when the declared set
// they belong to is reclaimed, which is how replaced plans release their
// resources (docs/design.md, The lookup contract, point 6).
class PlanPayload {
 public:
  PlanPayload() = default;
  PlanPayload(const PlanPayload&) = delete;
  PlanPayload& operator=(const PlanPayload&) = delete;
  virtual ~PlanPayload() = default;
};

struct IndexEntry {
  const Declaration* declaration = nullptr;  // owned by the declared set
  std::uint32_t position = 0;                // index in declaration order
  PlanPayload* payload = nullptr;            // may be null
};

// The error of a strict lookup that missed. Deliberately cheap: it names the
// key and nothing else (no dump of the declared set: docs/design.md, The
// lookup contract, point 9).
[[noreturn]] void throw_undeclared_plan(const PlanKey& key);

}  // namespace peerplan::plan
