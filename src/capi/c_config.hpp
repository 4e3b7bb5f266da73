// SPDX-License-Identifier: Apache-2.0
// The C interface's configuration: PEERPLAN_* names and values, parsed by
// the same table as the environment (core/environment.hpp), so the C and
// C++ interfaces and the environment accept exactly the same settings.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "peerplan/config.hpp"
#include "peerplan/peerplan.h"

struct peerplan_config {
  std::vector<std::pair<std::string, std::string>> values;  // last set wins
};

namespace peerplan::capi {

// The Config the settings describe (defaults where nothing was set); null
// gives the defaults. Throws InvalidArgument for a value the table rejects.
Config config_from(const peerplan_config* config);

}  // namespace peerplan::capi
