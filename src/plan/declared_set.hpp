// SPDX-License-Identifier: Apache-2.0
// The declarations of one declared set and the payloads attached to them,
// as both lookup implementations store them inside a snapshot.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "peerplan/declaration.hpp"
#include "plan/plan_entry.hpp"

namespace peerplan::plan {

struct DeclaredSet {
  std::vector<Declaration> declarations;
  // Empty, or one per declaration (entries may be null). Declared after the
  // declarations so that payloads are destroyed first and may still read
  // their declaration in their destructor.
  std::vector<std::unique_ptr<PlanPayload>> payloads;

  // Throws InvalidArgument when the payload count is neither 0 nor the
  // declaration count, or there are more declarations than a uint32
  // position can number.
  static DeclaredSet take(std::vector<Declaration> declarations,
                          std::vector<std::unique_ptr<PlanPayload>> payloads);

  IndexEntry entry(std::size_t position) const noexcept {
    return IndexEntry{&declarations[position], static_cast<std::uint32_t>(position),
                      payloads.empty() ? nullptr : payloads[position].get()};
  }
};

}  // namespace peerplan::plan
