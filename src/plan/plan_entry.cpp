// SPDX-License-Identifier: Apache-2.0
#include "plan/plan_entry.hpp"

#include <string>

#include "peerplan/errors.hpp"

namespace peerplan::plan {

void throw_undeclared_plan(const PlanKey& key) {
  throw UndeclaredPlan("no plan was declared for " + key.to_string() +
                       "; declare this exact key, or probe with has_plan_for() first");
}

}  // namespace peerplan::plan
