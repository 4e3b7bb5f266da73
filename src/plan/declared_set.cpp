// SPDX-License-Identifier: Apache-2.0
#include "plan/declared_set.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "peerplan/errors.hpp"

namespace peerplan::plan {

DeclaredSet DeclaredSet::take(std::vector<Declaration> declarations,
                              std::vector<std::unique_ptr<PlanPayload>> payloads) {
  if (!payloads.empty() && payloads.size() != declarations.size()) {
    throw InvalidArgument("a declared set was given " + std::to_string(payloads.size()) +
                          " payloads for " + std::to_string(declarations.size()) +
                          " declarations: pass one payload per declaration (null allowed), "
                          "or none");
  }
  if (declarations.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw InvalidArgument("too many declarations (" + std::to_string(declarations.size()) +
                          "); at most 2^32-1 plans can be declared");
  }
  DeclaredSet set;
  set.declarations = std::move(declarations);
  set.payloads = std::move(payloads);
  return set;
}

}  // namespace peerplan::plan
